//! Container localization on a Kerberized Hadoop 3.5 cluster (`hdfs --kerberos true`, MiniKdc),
//! as Java's NodeManager does it: APPLICATION and PRIVATE `hdfs:` resources read with the
//! application's HDFS delegation token alone (the launch context's Credentials; the NameNode's
//! audit log names the token's owner with `auth:TOKEN`), PUBLIC ones with the agent's own
//! Kerberos login (`yarn.nodemanager.principal`, keys from `KRB5_CLIENT_KTNAME`; the audit log
//! says `auth:KERBEROS`). No token, or a cancelled one, fails the resource at once with a
//! message naming the cause, one refused authentication and no retries; the agent's own login
//! is never used for an application's resource.
//!
//! With `yarn.nodemanager.keytab` the agent's login reads its key from that keytab itself, with
//! no ticket in the process's `KRB5CCNAME` (an empty cache) and no `KRB5_CLIENT_KTNAME`; a
//! keytab without the principal, or one without its key, fails with a message naming both.
//!
//! The reader thread runs in this process, as the agent runs it. MIT's environment is
//! process-wide: the tests set it under the peer's lock.
//!
//! The DataNodes require SASL data-transfer protection (`dfs.data.transfer.protection`, the
//! peer's Kerberized default), so every block the reader fetches also goes through the
//! DataTransfer handshake over its block token.

use std::fs;
use std::path::Path;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hadoop_wire::pb::hadoop::yarn::{
    LocalResourceProto, LocalResourceTypeProto as T, LocalResourceVisibilityProto as V,
    StringLocalResourceMapProto, UrlProto,
};
use hadoop_wire::token::{Credentials, Format, Token};
use hdfs_io::namenode::{NameNodeClient, NameNodeConfig, NameNodeKerberos};
use nm_core::ids::{AppId, ContainerId};
use nm_core::localization::{ResourceRequest, DEFAULT_MAX_FILES_PER_DIRECTORY};
use nm_runtime::config::{self, HdfsSettings};
use nm_runtime::hdfs_reader;
use nm_runtime::localizer::{LocalizedResource, ResourceError, ResourceLocalizer};
use peer_harness::{Kerberos, Mode, Peer, Shared};

static HDFS: Shared = Shared::new(
    Mode::Hdfs,
    &[
        "--datanodes",
        "1",
        "--shared-ip",
        "true",
        "--kerberos",
        "true",
        "--log-level",
        "org.apache.hadoop.hdfs.server.namenode.FSNamesystem.audit=INFO",
    ],
);

const USER: &str = "client";

fn app(n: i32) -> AppId {
    AppId {
        cluster_timestamp: 1_700_000_000_000,
        id: n,
    }
}

fn cid(a: i32, n: i64) -> ContainerId {
    ContainerId {
        app: app(a),
        attempt: 1,
        id: n,
    }
}

fn count(peer: &Peer, pred: impl Fn(&str) -> bool) -> usize {
    fs::read_to_string(peer.log_path())
        .expect("peer log")
        .lines()
        .filter(|l| pred(l))
        .count()
}

/// NameNode audit lines for `cmd` on `src` by `ugi` (`user@REALM (auth:…)`).
fn audited(peer: &Peer, ugi: &str, cmd: &str, src: &str) -> usize {
    count(peer, |l| {
        l.contains(&format!("ugi={ugi}\t"))
            && l.contains(&format!("cmd={cmd}\t"))
            && l.contains(&format!("src={src}\t"))
    })
}

fn hdfs_req(authority: &str, path: &str, len: u64, ts: i64, v: V) -> ResourceRequest {
    let (host, port) = authority.rsplit_once(':').unwrap();
    ResourceRequest::from_proto(&StringLocalResourceMapProto {
        key: Some(path.rsplit('/').next().unwrap().into()),
        value: Some(LocalResourceProto {
            resource: Some(UrlProto {
                scheme: Some("hdfs".into()),
                host: Some(host.into()),
                port: Some(port.parse().unwrap()),
                file: Some(path.into()),
                user_info: None,
            }),
            size: Some(len as i64),
            timestamp: Some(ts),
            r#type: Some(T::File as i32),
            visibility: Some(v as i32),
            pattern: None,
            should_be_uploaded_to_shared_cache: None,
        }),
    })
    .unwrap()
}

fn creds_of(t: &Token) -> Vec<u8> {
    let mut c = Credentials::new();
    c.add_token(t.service.clone(), t.clone());
    c.write(Format::Writable)
}

fn sha256(p: &Path) -> String {
    let out = std::process::Command::new("sha256sum")
        .arg(p)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_string()
}

#[test]
fn app_resources_with_the_apps_token_public_ones_with_the_nodes_login() {
    let mut peer = HDFS.lock().expect("Kerberized hdfs peer");
    let k = peer.kerberos().expect("READY kerberos");
    let dir = tempfile::tempdir().unwrap();
    // The agent's login: its keytab (the MiniKdc's client keytab stands in for nm's).
    Kerberos::client_keytab_process(&k.krb5_conf, &k.client_keytab, dir.path());

    let mut files = std::collections::HashMap::new();
    for (name, len) in [
        ("app.bin", (1u64 << 20) + 3),
        ("private.bin", 4097),
        ("public.bin", 65_537),
        ("none.bin", 10),
        ("cancelled.bin", 10),
    ] {
        let w = peer
            .command(&format!("write /lk/{name} {len}"))
            .expect("write");
        files.insert(name, (len, w["sha256"].as_str().unwrap().to_string()));
    }
    let mut conf = conf::Configuration::load_dir(peer.conf_dir()).unwrap();
    conf.set("yarn.nodemanager.principal", &k.client_principal);

    // The application's token, as a client got it over KERBEROS before submitting.
    let krb = NameNodeClient::from_conf(&conf).expect("namenode client");
    let token = krb
        .get_delegation_token("yarn")
        .unwrap_or_else(|e| panic!("getDelegationToken: {e}\n{}", peer.log_tail(40)))
        .expect("a secure NameNode issues tokens");
    let ts = |p: &str| {
        krb.get_file_info(p)
            .unwrap()
            .expect("written")
            .modification_time as i64
    };

    let settings = HdfsSettings::from_conf(&conf)
        .unwrap()
        .expect("hdfs:// default FS");
    let default_fs = settings.default_fs.clone();
    let authority = default_fs
        .trim_start_matches("hdfs://")
        .trim_end_matches('/')
        .to_string();
    let (queue, end) = hdfs_reader::queue(4);
    let shared = Arc::new(nm_runtime::shared::Shared::new(
        nm_core::status_updater::NodeIdentity {
            host: "127.0.0.1".into(),
            port: 0,
            http_port: 0,
            resource: nm_core::table::Resource {
                memory_mb: 1024,
                vcores: 1,
            },
            nm_version: "test".into(),
        },
        nm_core::table::ContainerTable::new(4),
    ));
    let reader = {
        let shared = shared.clone();
        std::thread::spawn(move || hdfs_reader::run_reader(end, settings, vec![], shared, None))
    };
    let local = dir.path().join("local");
    fs::create_dir(&local).unwrap();
    let loc = ResourceLocalizer::new(
        vec![local.clone()],
        &default_fs,
        Some(queue.fetcher(&default_fs)),
        DEFAULT_MAX_FILES_PER_DIRECTORY,
    )
    .unwrap();
    let req = |name: &str, v: V| {
        let p = format!("/lk/{name}");
        hdfs_req(&authority, &p, files[name].0, ts(&p), v)
    };
    let one = |a: i32,
               r: ResourceRequest,
               tokens: Option<&[u8]>|
     -> Result<LocalizedResource, ResourceError> {
        loc.localize_with_tokens(USER, &app(a), &cid(a, 2), &[r], tokens)
            .map(|mut v| v.remove(0))
    };
    let creds = creds_of(&token);
    let token_ugi = format!("{} (auth:TOKEN)", k.client_principal);
    let kerberos_ugi = format!("{} (auth:KERBEROS)", k.client_principal);

    // 1. APPLICATION and PRIVATE: the application's token
    for (name, v) in [("app.bin", V::Application), ("private.bin", V::Private)] {
        let got = one(1, req(name, v), Some(&creds))
            .unwrap_or_else(|e| panic!("{name}: {e}\n{}", peer.log_tail(40)));
        assert_eq!(sha256(&got.path), files[name].1, "{name}");
        let src = format!("/lk/{name}");
        assert_eq!(audited(&peer, &token_ugi, "open", &src), 1, "{name}");
        assert_eq!(audited(&peer, &kerberos_ugi, "open", &src), 0, "{name}");
    }

    // 2. PUBLIC: the agent's own login, even when the container has tokens
    let got = one(1, req("public.bin", V::Public), Some(&creds))
        .unwrap_or_else(|e| panic!("public: {e}\n{}", peer.log_tail(40)));
    assert_eq!(sha256(&got.path), files["public.bin"].1);
    assert_eq!(got.path, local.join("filecache/10/public.bin"));
    assert_eq!(audited(&peer, &kerberos_ugi, "open", "/lk/public.bin"), 1);
    assert_eq!(audited(&peer, &token_ugi, "open", "/lk/public.bin"), 0);

    // 3. no HDFS token: refused before the NameNode is asked, although the agent's own
    //    Kerberos login works (it is not used for an application's resource)
    let empty = Credentials::new().write(Format::Writable);
    let none = req("none.bin", V::Application);
    let asked = count(&peer, |l| l.contains("src=/lk/none.bin\t"));
    for tokens in [None, Some(&empty[..])] {
        let t = Instant::now();
        let e = one(2, none.clone(), tokens).unwrap_err().diagnostics();
        assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
        assert!(
            e.starts_with(&format!(
                "{USER} cannot read /lk/none.bin: the application's credentials hold no \
                 HDFS_DELEGATION_TOKEN for the NameNode ({authority})"
            )) && e.contains("Client cannot authenticate via:[TOKEN, KERBEROS]"),
            "{e}"
        );
    }
    assert_eq!(
        count(&peer, |l| l.contains("src=/lk/none.bin\t")),
        asked,
        "the NameNode was not asked"
    );
    // unreadable credentials
    let e = one(2, none.clone(), Some(b"not a Credentials file"))
        .unwrap_err()
        .diagnostics();
    assert!(
        e.starts_with("the application's credentials (the launch context's tokens) cannot be read"),
        "{e}"
    );

    // 4. a cancelled token: one refused authentication, a message naming the token, no retries
    let doomed = krb
        .get_delegation_token("yarn")
        .unwrap()
        .expect("a second token");
    krb.cancel_delegation_token(&doomed).expect("cancel");
    let cancelled = req("cancelled.bin", V::Application);
    let refused = count(&peer, |l| l.contains("Auth failed for"));
    let asked = count(&peer, |l| l.contains("src=/lk/cancelled.bin\t"));
    let t = Instant::now();
    let e = one(3, cancelled, Some(&creds_of(&doomed)))
        .unwrap_err()
        .diagnostics();
    let took = t.elapsed();
    assert!(
        e.contains("refused the delegation token (token for client: HDFS_DELEGATION_TOKEN owner=client@EXAMPLE.COM")
            && e.contains("can't be found in cache"),
        "{e}"
    );
    assert!(took < Duration::from_secs(10), "{took:?}");
    assert_eq!(
        count(&peer, |l| l.contains("Auth failed for")),
        refused + 1,
        "one authentication, refused once"
    );
    assert_eq!(
        count(&peer, |l| l.contains("src=/lk/cancelled.bin\t")),
        asked
    );
    // nothing left behind for the failed ones
    for a in [2, 3] {
        let d = local.join(format!("usercache/{USER}/appcache/{}/filecache", app(a)));
        let n = fs::read_dir(&d).map_or(0, |r| r.count());
        assert_eq!(n, 0, "{}", d.display());
    }
    let m = &shared.metrics.localize;
    assert_eq!(m.ok.load(Relaxed), 3);
    assert_eq!(
        m.failed.load(Relaxed),
        4,
        "none.bin three times, cancelled.bin once"
    );

    drop(loc);
    drop(queue);
    reader.join().unwrap();
}

#[test]
fn the_nodes_principal_has_host_replaced() {
    let mut c = conf::Configuration::new();
    assert_eq!(config::node_principal(&c, "node1.example.com"), None);
    c.set("yarn.nodemanager.principal", " nm/_HOST@EXAMPLE.COM ");
    assert_eq!(
        config::node_principal(&c, "Node1.Example.com").as_deref(),
        Some("nm/node1.example.com@EXAMPLE.COM")
    );
    c.set("yarn.nodemanager.principal", "nm@EXAMPLE.COM");
    assert_eq!(
        config::node_principal(&c, "node1").as_deref(),
        Some("nm@EXAMPLE.COM")
    );
}

/// A reader thread as the agent runs it, and a localizer feeding it.
struct Reader {
    loc: ResourceLocalizer,
    queue: hdfs_reader::Queue,
    thread: std::thread::JoinHandle<()>,
    local: std::path::PathBuf,
    authority: String,
}

fn start_reader(conf: &conf::Configuration, dir: &Path) -> Reader {
    let settings = HdfsSettings::from_conf(conf)
        .unwrap()
        .expect("hdfs:// default FS");
    let default_fs = settings.default_fs.clone();
    let authority = default_fs
        .trim_start_matches("hdfs://")
        .trim_end_matches('/')
        .to_string();
    let (queue, end) = hdfs_reader::queue(4);
    let shared = Arc::new(nm_runtime::shared::Shared::new(
        nm_core::status_updater::NodeIdentity {
            host: "127.0.0.1".into(),
            port: 0,
            http_port: 0,
            resource: nm_core::table::Resource {
                memory_mb: 1024,
                vcores: 1,
            },
            nm_version: "test".into(),
        },
        nm_core::table::ContainerTable::new(4),
    ));
    let thread =
        std::thread::spawn(move || hdfs_reader::run_reader(end, settings, vec![], shared, None));
    let local = dir.join("local");
    fs::create_dir_all(&local).unwrap();
    let loc = ResourceLocalizer::new(
        vec![local.clone()],
        &default_fs,
        Some(queue.fetcher(&default_fs)),
        DEFAULT_MAX_FILES_PER_DIRECTORY,
    )
    .unwrap();
    Reader {
        loc,
        queue,
        thread,
        local,
        authority,
    }
}

impl Reader {
    fn stop(self) {
        drop(self.loc);
        drop(self.queue);
        self.thread.join().unwrap();
    }
}

#[test]
fn public_resources_with_the_nodes_keytab_and_no_mit_environment() {
    let mut peer = HDFS.lock().expect("Kerberized hdfs peer");
    let k = peer.kerberos().expect("READY kerberos");
    let dir = tempfile::tempdir().unwrap();
    // no ticket (an empty cache, not the default /tmp/krb5cc_UID), no client keytab
    Kerberos::realm_process(&k.krb5_conf, dir.path());
    let w = peer.command("write /lk/keytab.bin 70001").expect("write");
    let sum = w["sha256"].as_str().unwrap().to_string();
    let conf = conf::Configuration::load_dir(peer.conf_dir()).unwrap();
    // the test's own client (for the timestamp) logs in from the client keytab
    let nn = NameNodeClient::from_conf_with(
        &conf,
        NameNodeConfig {
            kerberos: Some(NameNodeKerberos {
                server_principal: String::new(),
                client_principal: Some(k.client_principal.clone()),
                keytab: Some(k.client_keytab.clone()),
            }),
            ..NameNodeConfig::default()
        },
    )
    .expect("namenode client from the client keytab");
    let ts = nn
        .get_file_info("/lk/keytab.bin")
        .unwrap_or_else(|e| panic!("getFileInfo: {e}\n{}", peer.log_tail(40)))
        .expect("written")
        .modification_time as i64;

    // 1. the node's login: hdfs/localhost@REALM from the service keytab (the MiniKdc's
    //    stand-in for nm.keytab), named by yarn.nodemanager.keytab alone
    let mut node = conf.clone();
    node.set("yarn.nodemanager.principal", &k.namenode_principal);
    node.set(
        "yarn.nodemanager.keytab",
        k.service_keytab.to_str().unwrap(),
    );
    let r = start_reader(&node, &dir.path().join("a"));
    let req = hdfs_req(&r.authority, "/lk/keytab.bin", 70001, ts, V::Public);
    let got = r
        .loc
        .localize_with_tokens(USER, &app(7), &cid(7, 2), std::slice::from_ref(&req), None)
        .map(|mut v| v.remove(0))
        .unwrap_or_else(|e| panic!("public: {e}\n{}", peer.log_tail(40)));
    assert_eq!(sha256(&got.path), sum);
    assert_eq!(got.path, r.local.join("filecache/10/keytab.bin"));
    let ugi = format!("{} (auth:KERBEROS)", k.namenode_principal);
    assert_eq!(audited(&peer, &ugi, "open", "/lk/keytab.bin"), 1);
    let client_ugi = format!("{} (auth:KERBEROS)", k.client_principal);
    assert_eq!(audited(&peer, &client_ugi, "open", "/lk/keytab.bin"), 0);
    r.stop();

    // 2. a keytab without the node's key: the resource fails, naming principal and keytab
    let mut wrong = conf.clone();
    wrong.set("yarn.nodemanager.principal", &k.client_principal);
    wrong.set(
        "yarn.nodemanager.keytab",
        k.service_keytab.to_str().unwrap(),
    );
    let r = start_reader(&wrong, &dir.path().join("b"));
    let t = Instant::now();
    let e = r
        .loc
        .localize_with_tokens(USER, &app(8), &cid(8, 2), &[req], None)
        .unwrap_err()
        .diagnostics();
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    assert!(
        e.contains(&format!(
            "Kerberos login as {} from keytab {} failed: the keytab holds no key for {}",
            k.client_principal,
            k.service_keytab.display(),
            k.client_principal
        )),
        "{e}"
    );
    r.stop();

    // 3. a keytab without yarn.nodemanager.principal: refused at start, naming both keys
    let mut bare = conf.clone();
    bare.unset("yarn.nodemanager.principal");
    bare.set(
        "yarn.nodemanager.keytab",
        k.service_keytab.to_str().unwrap(),
    );
    let e = HdfsSettings::from_conf(&bare).unwrap_err().to_string();
    assert!(
        e.contains("yarn.nodemanager.keytab is set")
            && e.contains(&k.service_keytab.display().to_string())
            && e.contains("yarn.nodemanager.principal is not"),
        "{e}"
    );
}

#[test]
fn the_nodes_keytab_needs_the_nodes_principal() {
    let mut c = conf::Configuration::new();
    assert_eq!(config::node_keytab(&c).unwrap(), None);
    c.set("yarn.nodemanager.keytab", " /etc/security/nm.keytab ");
    let e = config::node_keytab(&c).unwrap_err().to_string();
    assert!(
        e.contains("yarn.nodemanager.keytab is set (/etc/security/nm.keytab)")
            && e.contains("yarn.nodemanager.principal is not"),
        "{e}"
    );
    c.set("yarn.nodemanager.principal", "nm/_HOST@EXAMPLE.COM");
    assert_eq!(
        config::node_keytab(&c).unwrap().as_deref(),
        Some(Path::new("/etc/security/nm.keytab"))
    );
}
