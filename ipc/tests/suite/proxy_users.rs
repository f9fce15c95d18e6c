//! Proxy users (`hadoop.proxyuser.*`, [`ipc::authorize::ProxyUsers`]) on the server: a SIMPLE
//! connection context naming a `realUser` acts as its `effectiveUser` only when the rules let
//! that real user impersonate it from the caller's address; otherwise Java's FATAL
//! `AuthorizationException`, and without rules nobody may. (Under KERBEROS the real user is the
//! principal and the context's `effectiveUser` another name; same rules, same texts.)

use crate::server_support;

use std::io::Write;
use std::sync::Arc;

use hadoop_wire::encode::{self, ConnectionContext};
use hadoop_wire::pb::hadoop::common::rpc_response_header_proto::{
    RpcErrorCodeProto, RpcStatusProto,
};
use ipc::authorize::{GroupsMapping, ProxyUsers};
use ipc::server::{Call, Registry, Reply};
use server_support::*;

struct Groups;
impl GroupsMapping for Groups {
    fn groups(&self, user: &str) -> Vec<String> {
        match user {
            "bob" => vec!["analysts".into()],
            _ => Vec::new(),
        }
    }
}

const P: &str = "test.WhoAmI";

fn registry() -> Registry {
    let mut r = Registry::new();
    r.register(
        P,
        1,
        "whoami",
        |call: &Call<'_>, reply: &mut Reply<'_, '_>| {
            reply.bytes(call.user.unwrap_or("-").as_bytes())?;
            Ok(())
        },
    );
    r
}

/// Connects with a context of `effective` (and `real`), calls `whoami`: the user the server
/// saw, or the FATAL refusal's text.
fn whoami(
    addr: std::net::SocketAddr,
    effective: &str,
    real: Option<&str>,
) -> Result<String, String> {
    let mut s = raw_connect(addr, false);
    let mut b = Vec::new();
    encode::connection_context_frame(
        &mut b,
        &CLIENT_ID,
        &ConnectionContext {
            effective_user: Some(effective),
            real_user: real,
            protocol: Some(P),
        },
    )
    .unwrap();
    b.extend_from_slice(&call_frame(1, P, 1, "whoami", b""));
    s.write_all(&b).unwrap();
    let r = parse_response(&read_frame(&mut s).expect("an answer"));
    if r.status == RpcStatusProto::Fatal {
        assert_eq!(r.detail, Some(RpcErrorCodeProto::FatalUnauthorized));
        assert_eq!(
            r.class,
            "org.apache.hadoop.security.authorize.AuthorizationException"
        );
        assert!(closed_by_server(&mut s));
        return Err(r.message);
    }
    Ok(String::from_utf8(r.payload.clone().unwrap_or_default()).unwrap())
}

#[test]
fn a_real_user_acts_for_whom_its_rules_allow_from_where_they_allow() {
    for_each_backend(|b| {
        // No rules: nobody impersonates anyone; a plain context is untouched.
        let srv = start(b, registry(), |_| {});
        assert_eq!(whoami(srv.local_addr(), "alice", None).unwrap(), "alice");
        assert_eq!(
            whoami(srv.local_addr(), "alice", Some("oozie")).unwrap_err(),
            "User: oozie is not allowed to impersonate alice"
        );
        srv.shutdown();

        let mut conf = conf::Configuration::new();
        conf.set("hadoop.proxyuser.oozie.users", "alice");
        conf.set("hadoop.proxyuser.oozie.groups", "analysts");
        conf.set("hadoop.proxyuser.oozie.hosts", "127.0.0.0/8");
        conf.set("hadoop.proxyuser.far.users", "*");
        conf.set("hadoop.proxyuser.far.hosts", "10.0.0.1");
        let proxy = Arc::new(ProxyUsers::from_conf(&conf, Box::new(Groups)));
        let p = proxy.clone();
        let srv = start(b, registry(), move |c| c.proxy_users = Some(p));
        let addr = srv.local_addr();
        assert_eq!(whoami(addr, "alice", Some("oozie")).unwrap(), "alice");
        assert_eq!(
            whoami(addr, "bob", Some("oozie")).unwrap(),
            "bob",
            "by group"
        );
        assert_eq!(
            whoami(addr, "carol", Some("oozie")).unwrap_err(),
            "User: oozie is not allowed to impersonate carol"
        );
        assert_eq!(
            whoami(addr, "alice", Some("far")).unwrap_err(),
            "Unauthorized connection for super-user: far from IP 127.0.0.1"
        );
        // Rules re-read (`yarn rmadmin -refreshSuperUserGroupsConfiguration`).
        conf.set("hadoop.proxyuser.oozie.users", "carol");
        conf.set("hadoop.proxyuser.oozie.groups", "");
        proxy.reload(&conf);
        assert_eq!(whoami(addr, "carol", Some("oozie")).unwrap(), "carol");
        assert!(whoami(addr, "alice", Some("oozie")).is_err());
        assert!(srv.metrics().auth_failures >= 3);
        srv.shutdown();
    });
}
