//! Container localization of an `hdfs:` resource from the real HDFS peer (MiniDFSCluster): the
//! reader thread fetches it for the localizer, Java's timestamp check holds, and the NameNode's
//! audit log names the submitter for APPLICATION and the agent's own user for PUBLIC. Split
//! from `tests/suite/resources.rs` (the `file:` cases, same helpers) as the one case that
//! needs Hadoop.

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use hadoop_wire::pb::hadoop::yarn::{
    LocalResourceProto, LocalResourceTypeProto as T, LocalResourceVisibilityProto as V,
    StringLocalResourceMapProto, UrlProto,
};
use nm_core::ids::{AppId, ContainerId};
use nm_core::localization::{ResourceRequest, DEFAULT_MAX_FILES_PER_DIRECTORY};
use nm_runtime::localizer::ResourceLocalizer;

const USER: &str = "alice";

fn app() -> AppId {
    AppId {
        cluster_timestamp: 1_700_000_000_000,
        id: 3,
    }
}

fn cid(n: i64) -> ContainerId {
    ContainerId {
        app: app(),
        attempt: 1,
        id: n,
    }
}

struct Node {
    _tmp: tempfile::TempDir,
    local: PathBuf,
}

fn node() -> Node {
    let tmp = tempfile::tempdir().unwrap();
    fs::set_permissions(tmp.path(), fs::Permissions::from_mode(0o755)).unwrap();
    let local = tmp.path().join("nm-local");
    fs::create_dir(&local).unwrap();
    Node { _tmp: tmp, local }
}

fn mode(p: &Path) -> u32 {
    fs::symlink_metadata(p).unwrap().mode() & 0o7777
}

/// The real HDFS peer (MiniDFSCluster), started by the first test that locks it, with the
/// NameNode's audit log on (it names the user of each call).
static HDFS: peer_harness::Shared = peer_harness::Shared::new(
    peer_harness::Mode::Hdfs,
    &[
        "--log-level",
        "org.apache.hadoop.hdfs.server.namenode.FSNamesystem.audit=INFO",
    ],
);

#[test]
fn hdfs_resources_come_through_the_reader_thread_with_the_timestamp_checked() {
    use nm_runtime::config::HdfsSettings;
    use nm_runtime::hdfs_reader;
    let mut peer = HDFS.lock().expect("hdfs peer");
    let len = (2u64 << 20) + 777;
    let w = peer
        .command(&format!("write /resources/app/data.bin {len}"))
        .expect("write");
    let sha = w["sha256"].as_str().unwrap().to_string();
    let conf = conf::Configuration::load_dir(peer.conf_dir()).unwrap();
    let settings = HdfsSettings::from_conf(&conf)
        .unwrap()
        .expect("hdfs:// default FS");
    let default_fs = settings.default_fs.clone();
    let st = hdfs_io::dfs::DfsClient::from_conf(&conf)
        .unwrap()
        .stat("/resources/app/data.bin")
        .unwrap();

    // the reader thread as the agent runs it, fed by the localizer's fetches
    let (queue, end) = hdfs_reader::queue(2);
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
    let n = node();
    let loc = ResourceLocalizer::new(
        vec![n.local.clone()],
        &default_fs,
        Some(queue.fetcher(&default_fs)),
        DEFAULT_MAX_FILES_PER_DIRECTORY,
    )
    .unwrap();
    let authority = default_fs
        .trim_start_matches("hdfs://")
        .trim_end_matches('/');
    let (host, port) = authority.rsplit_once(':').unwrap();
    let req = |ts: i64, v: V| {
        ResourceRequest::from_proto(&StringLocalResourceMapProto {
            key: Some("data.bin".into()),
            value: Some(LocalResourceProto {
                resource: Some(UrlProto {
                    scheme: Some("hdfs".into()),
                    host: Some(host.into()),
                    port: Some(port.parse().unwrap()),
                    file: Some("/resources/app/data.bin".into()),
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
    };
    let ts = st.modification_time as i64;
    let got = loc
        .localize(USER, &app(), &cid(2), &[req(ts, V::Application)])
        .unwrap();
    let p = &got[0].path;
    assert!(p.ends_with("appcache/application_1700000000000_0003/filecache/10/data.bin"));
    let out = std::process::Command::new("sha256sum")
        .arg(p)
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).starts_with(&sha));
    assert_eq!(mode(p), 0o500);
    // written with the default umask: everyone may read it, so PUBLIC works too
    let got = loc
        .localize(USER, &app(), &cid(2), &[req(ts, V::Public)])
        .unwrap();
    assert_eq!(got[0].path, n.local.join("filecache/10/data.bin"));
    assert_eq!(mode(&got[0].path), 0o555);
    let e = loc
        .localize(USER, &app(), &cid(3), &[req(ts - 1, V::Private)])
        .unwrap_err()
        .diagnostics();
    assert!(
        e.starts_with(&format!(
            "Resource hdfs://{authority}/resources/app/data.bin changed on src filesystem - expected: \"{}\", was: \"{}\"",
            nm_core::localization::format_iso8601(ts - 1),
            nm_core::localization::format_iso8601(ts)
        )),
        "{e}"
    );
    let cache = n.local.join("usercache/alice/filecache");
    assert_eq!(fs::read_dir(&cache).unwrap().count(), 0);
    assert_eq!(loc.downloads(), 2);
    assert_eq!(
        shared
            .metrics
            .localize
            .ok
            .load(std::sync::atomic::Ordering::Relaxed),
        2
    );
    // the NameNode's audit log names who asked: the submitter for APPLICATION, the agent
    // for PUBLIC
    let log = fs::read_to_string(peer.log_path()).unwrap();
    let audit = |user: &str| {
        log.lines().any(|l| {
            l.contains(&format!("ugi={user} "))
                && l.contains("cmd=open")
                && l.contains("src=/resources/app/data.bin")
        })
    };
    assert!(audit(USER), "no open as {USER} in the audit log");
    // PUBLIC is read as the agent's own user
    let own = hdfs_io::namenode::default_user();
    assert_ne!(own, USER);
    assert!(audit(&own), "no open as {own} in the audit log");
    drop(loc);
    drop(queue);
    reader.join().unwrap();
}
