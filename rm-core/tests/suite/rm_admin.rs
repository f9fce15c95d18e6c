//! `yarn rmadmin`'s protocol ([`rm_core::admin`]) over TCP, called by our `ipc` client as
//! SIMPLE users: the admin ACL on every call and its refresh, the answers of the methods that
//! only check and succeed, Java's refusals, the service ACLs' refresh, the queue ACLs'
//! refresh from `capacity-scheduler.xml`, and `refreshNodes` NORMAL, GRACEFUL (an idle node
//! drains at once; a timeout) and FORCEFUL against a registered node's heartbeats.
//! (Hadoop's own `RMAdminCLI`: `agent/tests/interop/rm_admin.rs`.)

use crate::support;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hadoop_wire::pb::hadoop::yarn::{
    CheckForDecommissioningNodesResponseProto, GetGroupsForUserRequestProto,
    GetGroupsForUserResponseProto, NodeActionProto, NodeHeartbeatResponseProto,
    RegisterNodeManagerResponseProto,
};
use ipc::authorize::{GroupsMapping, ServiceAuthorization};
use ipc::client::{Client, ClientConfig, ClientError};
use ipc::server::ServerConfig;
use prost::Message;
use rm_core::admin::{self, method, AdminService, AdminSetup, DecommissionType};
use rm_core::app_acls::{AclPolicy, Caller};
use rm_core::ids::NodeKey;
use rm_core::service::{AppsSecurity, RmService};
use testkit::heartbeat::{heartbeat_request, node_status, register_request};

struct Groups;
impl GroupsMapping for Groups {
    fn groups(&self, user: &str) -> Vec<String> {
        match user {
            "dave" => vec!["dave".into(), "ops".into()],
            u => vec![u.to_string()],
        }
    }
}

fn write_site(dir: &Path, name: &str, props: &[(&str, &str)]) {
    let mut x = String::from("<configuration>\n");
    for (k, v) in props {
        x.push_str(&format!(
            "<property><name>{k}</name><value>{v}</value></property>\n"
        ));
    }
    x.push_str("</configuration>\n");
    std::fs::write(dir.join(name), x).unwrap();
}

fn admin_client(addr: std::net::SocketAddr, user: &str) -> Client {
    Client::new(
        addr,
        ClientConfig {
            protocol: admin::PROTOCOL.into(),
            user: user.into(),
            call_timeout: Duration::from_secs(10),
            max_connect_attempts: 1,
            ..ClientConfig::default()
        },
    )
}

fn call(
    addr: std::net::SocketAddr,
    user: &str,
    m: &str,
    req: &[u8],
) -> Result<Vec<u8>, ClientError> {
    admin_client(addr, user)
        .call(m, req)
        .map(|r| r.payload().to_vec())
}

fn refresh_nodes(addr: std::net::SocketAddr, kind: DecommissionType, timeout: Option<i32>) {
    let req = admin::RefreshNodesRequestProto {
        decommission_type: Some(kind as i32),
        decommission_timeout: timeout,
        sub_cluster_id: None,
    };
    call(addr, "yarn", method::REFRESH_NODES, &req.encode_to_vec()).unwrap();
}

/// An RM with applications (and `security`), its admin service reading `conf_dir`.
fn start(
    conf_dir: &Path,
    security: AppsSecurity,
    service_acls: Vec<Arc<ServiceAuthorization>>,
    queues: Vec<String>,
) -> (RmService, AdminService, tempfile::TempDir) {
    let app_acls = security.app_acls.clone();
    let (rm, guard) = support::start_rm(security);
    let dir = conf_dir.to_path_buf();
    let admin = AdminService::start(
        &rm,
        AdminSetup {
            address: "127.0.0.1:0".parse().unwrap(),
            server: ServerConfig::default(),
            reload: Box::new(move || rm_core::config::rm_configuration(Some(&dir), &[])),
            daemon_user: Some("yarn".into()),
            groups: Arc::new(Groups),
            service_acls,
            app_acls,
            queues,
            proxy_users: None,
        },
    )
    .unwrap();
    (rm, admin, guard)
}

fn remote(r: Result<Vec<u8>, ClientError>) -> (String, String) {
    match r {
        Err(ClientError::Remote { class, message, .. }) => (class, message),
        other => panic!("not a remote error: {other:?}"),
    }
}

#[test]
fn the_admin_acl_guards_every_call_and_is_refreshed() {
    let conf = tempfile::tempdir().unwrap();
    write_site(
        conf.path(),
        "yarn-site.xml",
        &[("yarn.admin.acl", "alice ops")],
    );
    let (_rm, admin, _g) = start(conf.path(), AppsSecurity::default(), Vec::new(), Vec::new());
    let addr = admin.local_addr();
    let groups_req = GetGroupsForUserRequestProto {
        user: "dave".into(),
    }
    .encode_to_vec();

    // bob is not an admin: Java's refusal, for each method.
    for m in [
        method::REFRESH_QUEUES,
        method::REFRESH_ADMIN_ACLS,
        method::REFRESH_USER_TO_GROUPS,
        method::REFRESH_SUPER_USER_GROUPS,
        method::CHECK_FOR_DECOMMISSIONING_NODES,
        method::REFRESH_CLUSTER_MAX_PRIORITY,
    ] {
        let (class, msg) = remote(call(addr, "bob", m, &[]));
        assert_eq!(class, admin::YARN_EXCEPTION);
        assert_eq!(
            msg,
            format!(
                "org.apache.hadoop.security.AccessControlException: User bob doesn't have \
                 permission to call '{m}'"
            )
        );
    }
    let (_, msg) = remote(call(addr, "bob", method::GET_GROUPS_FOR_USER, &groups_req));
    assert!(msg.ends_with("call 'getGroupsForUser'"), "{msg}");

    // alice by name, dave by group, the RM's own user: admins.
    for u in ["alice", "dave", "yarn"] {
        let r = call(addr, u, method::GET_GROUPS_FOR_USER, &groups_req).unwrap();
        let g = GetGroupsForUserResponseProto::decode(&r[..]).unwrap();
        assert_eq!(g.groups, vec!["dave".to_string(), "ops".into()]);
        for m in [
            method::REFRESH_QUEUES,
            method::REFRESH_USER_TO_GROUPS,
            method::REFRESH_SUPER_USER_GROUPS,
            method::REFRESH_NODES_RESOURCES,
            method::REFRESH_CLUSTER_MAX_PRIORITY,
        ] {
            assert!(call(addr, u, m, &[]).unwrap().is_empty(), "{m} as {u}");
        }
        let r = call(addr, u, method::CHECK_FOR_DECOMMISSIONING_NODES, &[]).unwrap();
        assert!(CheckForDecommissioningNodesResponseProto::decode(&r[..])
            .unwrap()
            .decommissioning_nodes
            .is_empty());
    }
    // Node labels are off; service ACLs are off.
    let (class, msg) = remote(call(addr, "alice", method::ADD_TO_CLUSTER_NODE_LABELS, &[]));
    assert_eq!(class, admin::YARN_EXCEPTION);
    assert_eq!(
        msg,
        "java.io.IOException: Node-label-based scheduling is disabled. Please check \
         yarn.node-labels.enabled"
    );
    let (_, msg) = remote(call(addr, "alice", method::REFRESH_SERVICE_ACLS, &[]));
    assert_eq!(
        msg,
        "java.io.IOException: Service Authorization (hadoop.security.authorization) not enabled."
    );

    // A new yarn.admin.acl counts from refreshAdminAcls on, not before.
    write_site(conf.path(), "yarn-site.xml", &[("yarn.admin.acl", "bob")]);
    assert!(call(addr, "bob", method::REFRESH_QUEUES, &[]).is_err());
    call(addr, "alice", method::REFRESH_ADMIN_ACLS, &[]).unwrap();
    call(addr, "bob", method::REFRESH_QUEUES, &[]).unwrap();
    let (_, msg) = remote(call(addr, "alice", method::REFRESH_QUEUES, &[]));
    assert!(msg.contains("User alice doesn't have permission"), "{msg}");
    // The RM's own user stays an admin.
    call(addr, "yarn", method::REFRESH_QUEUES, &[]).unwrap();
    admin.shutdown();
}

#[test]
fn service_acls_from_hadoop_policy_xml_and_queue_acls_from_capacity_scheduler_xml_refresh() {
    let conf = tempfile::tempdir().unwrap();
    write_site(
        conf.path(),
        "core-site.xml",
        &[("hadoop.security.authorization", "true")],
    );
    write_site(
        conf.path(),
        "yarn-site.xml",
        &[("yarn.acl.enable", "true"), ("yarn.admin.acl", "alice")],
    );
    write_site(
        conf.path(),
        "hadoop-policy.xml",
        &[(
            "security.resourcemanager-administration.protocol.acl",
            "alice,carol",
        )],
    );
    write_site(
        conf.path(),
        "capacity-scheduler.xml",
        &[
            ("yarn.scheduler.capacity.root.acl_submit_applications", " "),
            ("yarn.scheduler.capacity.root.acl_administer_queue", " "),
            (
                "yarn.scheduler.capacity.root.default.acl_submit_applications",
                "carol",
            ),
        ],
    );
    let loaded = rm_core::config::rm_configuration(Some(conf.path()), &[]).unwrap();
    let queues = vec!["default".to_string()];
    let policy = Arc::new(
        AclPolicy::from_conf(&loaded, &queues, Some("yarn".into()), Box::new(Groups))
            .unwrap()
            .expect("yarn.acl.enable"),
    );
    let may_submit = |u: &str| policy.may_submit(&Caller::new(u), "default");
    assert!(
        may_submit("carol") && !may_submit("bob"),
        "a deny in capacity-scheduler.xml"
    );
    let authz = Arc::new(
        ServiceAuthorization::from_conf(&loaded, admin::SERVICE_ACLS, Box::new(Groups))
            .unwrap()
            .expect("hadoop.security.authorization"),
    );
    let (_rm, admin, _g) = start(
        conf.path(),
        AppsSecurity {
            app_acls: Some(policy.clone()),
            ..AppsSecurity::default()
        },
        vec![authz.clone()],
        queues,
    );
    // The admin server has no authorization of its own here; the hadoop-policy.xml deny is
    // seen through the ServiceAuthorization it refreshes.
    let subject = |u: &'static str| ipc::authorize::Subject {
        user: u,
        full_name: u,
        method: hadoop_wire::sasl::message::AuthMethod::Simple,
        peer: None,
    };
    assert!(authz.authorize(&subject("carol"), admin::PROTOCOL).is_ok());
    let refused = authz
        .authorize(&subject("bob"), admin::PROTOCOL)
        .unwrap_err();
    assert!(refused.contains("denied by configured ACL"), "{refused}");

    write_site(
        conf.path(),
        "hadoop-policy.xml",
        &[(
            "security.resourcemanager-administration.protocol.acl",
            "bob",
        )],
    );
    write_site(
        conf.path(),
        "capacity-scheduler.xml",
        &[
            ("yarn.scheduler.capacity.root.acl_submit_applications", " "),
            ("yarn.scheduler.capacity.root.acl_administer_queue", " "),
            (
                "yarn.scheduler.capacity.root.default.acl_submit_applications",
                "bob",
            ),
        ],
    );
    let addr = admin.local_addr();
    call(addr, "alice", method::REFRESH_SERVICE_ACLS, &[]).unwrap();
    assert!(authz.authorize(&subject("bob"), admin::PROTOCOL).is_ok());
    assert!(authz.authorize(&subject("carol"), admin::PROTOCOL).is_err());
    assert!(may_submit("carol"), "queue ACLs wait for refreshQueues");
    call(addr, "alice", method::REFRESH_QUEUES, &[]).unwrap();
    assert!(may_submit("bob") && !may_submit("carol"));
    admin.shutdown();
}

/// A node registered at `n` with the tracker; returns a heartbeat function (the node's
/// answer: its action).
fn register(rm: &RmService, n: &NodeKey) -> impl FnMut() -> NodeActionProto {
    let nm = support::tracker_client(rm);
    let r: RegisterNodeManagerResponseProto = nm
        .call(
            "registerNodeManager",
            &register_request(n, 8192, 8, "3.4.1"),
        )
        .unwrap()
        .decode()
        .unwrap();
    assert_eq!(r.node_action(), NodeActionProto::Normal);
    let n = n.clone();
    let mut rid = 0;
    move || {
        let (req, _) = heartbeat_request(&node_status(&n, Vec::new(), true), rid, None);
        let r: NodeHeartbeatResponseProto =
            nm.call("nodeHeartbeat", &req).unwrap().decode().unwrap();
        if let Some(id) = r.response_id {
            rid = id;
        }
        r.node_action()
    }
}

fn until(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A NodeManager address that accepts connections and never answers: an AM launched there
/// holds its container (the launcher waits up to 60 s) until this is dropped, which closes
/// every connection it holds and any it accepts later (the launch fails at once then).
struct SilentNm {
    key: NodeKey,
    held: Arc<std::sync::Mutex<Option<Vec<std::net::TcpStream>>>>,
}

impl SilentNm {
    fn start(host: &str) -> SilentNm {
        let l = std::net::TcpListener::bind((host, 0)).unwrap();
        let port = l.local_addr().unwrap().port();
        let held = Arc::new(std::sync::Mutex::new(Some(Vec::new())));
        let h = held.clone();
        std::thread::spawn(move || {
            for s in l.incoming().flatten() {
                match h.lock().unwrap().as_mut() {
                    Some(v) => v.push(s),
                    None => drop(s),
                }
            }
        });
        SilentNm {
            key: NodeKey::new(host, i32::from(port)),
            held,
        }
    }
}

impl Drop for SilentNm {
    fn drop(&mut self) {
        if let Some(v) = self.held.lock().unwrap_or_else(|p| p.into_inner()).take() {
            for s in v {
                let _ = s.shutdown(std::net::Shutdown::Both);
            }
        }
    }
}

fn exclude_conf() -> (tempfile::TempDir, std::path::PathBuf) {
    let conf = tempfile::tempdir().unwrap();
    let exclude = conf.path().join("exclude");
    std::fs::write(&exclude, "").unwrap();
    write_site(
        conf.path(),
        "yarn-site.xml",
        &[(
            "yarn.resourcemanager.nodes.exclude-path",
            exclude.to_str().unwrap(),
        )],
    );
    (conf, exclude)
}

fn decommissioning(addr: std::net::SocketAddr) -> Vec<hadoop_wire::pb::hadoop::yarn::NodeIdProto> {
    let r = call(addr, "yarn", method::CHECK_FOR_DECOMMISSIONING_NODES, &[]).unwrap();
    CheckForDecommissioningNodesResponseProto::decode(&r[..])
        .unwrap()
        .decommissioning_nodes
}

/// About 1 s: two nodes, one running an AM container (its launch hanging at a silent NM).
#[test]
fn refresh_nodes_normal_graceful_and_forceful() {
    let (conf, exclude) = exclude_conf();
    let (rm, admin, _g) = start(conf.path(), AppsSecurity::default(), Vec::new(), Vec::new());
    let addr = admin.local_addr();
    let silent = SilentNm::start("127.0.0.2");
    let (a, b) = (NodeKey::new("127.0.0.1", 1), silent.key.clone());
    let mut beat_a = register(&rm, &a);
    let mut beat_b = register(&rm, &b);
    assert_eq!(beat_a(), NodeActionProto::Normal);
    // b runs the AM container: a is passed over while marked DECOMMISSIONING.
    let apps = rm.apps().unwrap();
    apps.with(|x| x.set_decommissioning(&a, true));
    support::submit_direct(&rm, "alice", rm_core::apps::Res::new(1024, 1));
    apps.with(|x| x.set_decommissioning(&a, false));
    assert_eq!(apps.with(|x| x.containers_on(&b)), Some(1));

    // GRACEFUL, a long timeout: the idle a is decommissioned at once; the busy b stays
    // DECOMMISSIONING, heartbeats NORMAL and is offered nothing new.
    std::fs::write(&exclude, "127.0.0.1 127.0.0.2\n").unwrap();
    refresh_nodes(addr, DecommissionType::Graceful, Some(3600));
    until("a to be decommissioned", || {
        beat_a() == NodeActionProto::Shutdown
    });
    assert_eq!(decommissioning(addr), vec![b.to_proto()]);
    assert_eq!(beat_b(), NodeActionProto::Normal);
    support::submit_direct(&rm, "alice", rm_core::apps::Res::new(1024, 1));
    assert_eq!(beat_b(), NodeActionProto::Normal);
    assert_eq!(
        apps.with(|x| x.containers_on(&b)),
        Some(1),
        "nothing new on b"
    );

    // Out of the exclude file and refreshed: back in service.
    std::fs::write(&exclude, "127.0.0.1\n").unwrap();
    refresh_nodes(addr, DecommissionType::Normal, None);
    assert!(decommissioning(addr).is_empty());
    assert_eq!(beat_b(), NodeActionProto::Normal);

    // GRACEFUL then FORCEFUL: decommissioned at once, busy or not.
    std::fs::write(&exclude, "127.0.0.1 127.0.0.2\n").unwrap();
    refresh_nodes(addr, DecommissionType::Graceful, Some(3600));
    assert_eq!(decommissioning(addr), vec![b.to_proto()]);
    assert_eq!(
        apps.with(|x| x.node(&b).map(|n| n.decommissioning)),
        Some(true)
    );
    refresh_nodes(addr, DecommissionType::Forceful, None);
    assert!(decommissioning(addr).is_empty());
    assert_eq!(beat_b(), NodeActionProto::Shutdown);
    assert_eq!(
        apps.with(|x| x.node(&b).map(|n| n.decommissioning)),
        Some(false),
        "no mark left for when it registers again"
    );
    admin.shutdown();
    drop(silent);
}

/// About 1 s: a busy node's graceful timeout passes.
#[test]
fn a_busy_node_is_decommissioned_when_its_timeout_passes() {
    let (conf, exclude) = exclude_conf();
    let (rm, admin, _g) = start(conf.path(), AppsSecurity::default(), Vec::new(), Vec::new());
    let addr = admin.local_addr();
    let silent = SilentNm::start("127.0.0.3");
    let n = silent.key.clone();
    let mut beat = register(&rm, &n);
    support::submit_direct(&rm, "alice", rm_core::apps::Res::new(1024, 1));
    assert_eq!(rm.apps().unwrap().with(|x| x.containers_on(&n)), Some(1));
    std::fs::write(&exclude, "127.0.0.3\n").unwrap();
    refresh_nodes(addr, DecommissionType::Graceful, Some(1));
    assert_eq!(beat(), NodeActionProto::Normal, "DECOMMISSIONING");
    until("the timeout", || beat() == NodeActionProto::Shutdown);
    assert!(decommissioning(addr).is_empty());
    admin.shutdown();
    drop(silent);
}
