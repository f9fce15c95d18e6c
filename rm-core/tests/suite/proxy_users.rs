//! A proxy-user submission on `hotpath rm`'s client port: `oozie` (SIMPLE, its connection
//! context naming `realUser = oozie`, `effectiveUser = alice`) submits for alice when
//! `hadoop.proxyuser.oozie.*` allow it, and the application is alice's; for carol, whom the
//! rules leave out, the connection is refused with Java's `AuthorizationException`.

use crate::support;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use hadoop_wire::encode::{self, ConnectionContext, RequestHeader, RpcRequestHeader};
use hadoop_wire::frame::ResponseFrame;
use hadoop_wire::pb::hadoop::yarn::{
    ApplicationSubmissionContextProto, ContainerLaunchContextProto, GetNewApplicationResponseProto,
    SubmitApplicationRequestProto,
};
use hadoop_wire::view::rpc::RpcResponseHeaderView;
use hadoop_wire::yarn::ids::AppId;
use hadoop_wire::yarn::{acp, APPLICATION_CLIENT_PROTOCOL};
use ipc::authorize::{GroupsMapping, ProxyUsers};
use prost::Message;
use rm_core::apps::Res;
use rm_core::service::AppsSecurity;

struct NoGroups;
impl GroupsMapping for NoGroups {
    fn groups(&self, _: &str) -> Vec<String> {
        Vec::new()
    }
}

const CLIENT_ID: [u8; 16] = *b"proxyuser-test-1";

/// A connection as `real` acting for `effective`.
fn connect(addr: SocketAddr, effective: &str, real: &str) -> TcpStream {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut b = Vec::new();
    encode::preamble(&mut b, 0);
    encode::connection_context_frame(
        &mut b,
        &CLIENT_ID,
        &ConnectionContext {
            effective_user: Some(effective),
            real_user: Some(real),
            protocol: Some(APPLICATION_CLIENT_PROTOCOL),
        },
    )
    .unwrap();
    s.write_all(&b).unwrap();
    s
}

/// One call: `Ok(payload)` or `Err(exception class, message)`.
fn call(s: &mut TcpStream, id: i32, method: &str, req: &[u8]) -> Result<Vec<u8>, (String, String)> {
    let mut b = Vec::new();
    encode::call_frame(
        &mut b,
        &RpcRequestHeader::call(id, &CLIENT_ID, 0),
        &RequestHeader {
            method_name: method,
            declaring_class_protocol_name: APPLICATION_CLIENT_PROTOCOL,
            client_protocol_version: 1,
        },
        req,
    )
    .unwrap();
    s.write_all(&b).unwrap();
    let mut len = [0u8; 4];
    s.read_exact(&mut len).unwrap();
    let mut body = vec![0u8; u32::from_be_bytes(len) as usize];
    s.read_exact(&mut body).unwrap();
    let f = ResponseFrame::split(&body).unwrap();
    let h = RpcResponseHeaderView::new(f.header);
    match h.exception_class_name().unwrap() {
        Some(class) => Err((
            class.to_string(),
            h.error_msg().unwrap().unwrap_or("").to_string(),
        )),
        None => Ok(f.payload.unwrap_or(&[]).to_vec()),
    }
}

#[test]
fn oozie_submits_for_alice_but_not_for_carol() {
    let mut conf = conf::Configuration::new();
    conf.set("hadoop.proxyuser.oozie.users", "alice");
    conf.set("hadoop.proxyuser.oozie.hosts", "127.0.0.1");
    let (rm, _g) = support::start_rm(AppsSecurity {
        proxy_users: Some(Arc::new(ProxyUsers::from_conf(&conf, Box::new(NoGroups)))),
        ..AppsSecurity::default()
    });
    let addr = rm.client_addr().unwrap();

    let mut s = connect(addr, "alice", "oozie");
    let n = GetNewApplicationResponseProto::decode(
        &call(&mut s, 1, acp::GET_NEW_APPLICATION, &[]).unwrap()[..],
    )
    .unwrap();
    let p = n.application_id.unwrap();
    let id = AppId::new(p.cluster_timestamp(), p.id());
    let req = SubmitApplicationRequestProto {
        application_submission_context: Some(ApplicationSubmissionContextProto {
            application_id: Some(id.to_proto()),
            am_container_spec: Some(ContainerLaunchContextProto::default()),
            resource: Some(Res::new(1024, 1).to_proto()),
            queue: Some("default".into()),
            ..Default::default()
        }),
    };
    call(&mut s, 2, acp::SUBMIT_APPLICATION, &req.encode_to_vec()).unwrap();
    let user = rm
        .apps()
        .unwrap()
        .with(|a| a.app(id).map(|x| x.user.clone()));
    assert_eq!(
        user.as_deref(),
        Some("alice"),
        "the effective user's application"
    );

    let mut s = connect(addr, "carol", "oozie");
    let (class, msg) = call(&mut s, 1, acp::GET_NEW_APPLICATION, &[]).unwrap_err();
    assert_eq!(
        class,
        "org.apache.hadoop.security.authorize.AuthorizationException"
    );
    assert_eq!(msg, "User: oozie is not allowed to impersonate carol");
}
