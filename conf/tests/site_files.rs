//! Real site files in a temporary directory: load order, `<final>`, flags, expansion,
//! defaults, typed getters and malformed input.

use std::fs;
use std::path::{Path, PathBuf};

use conf::defaults::{DefaultValue, Kind, DEFAULTS};
use conf::{Configuration, Error, HostPort, Source, TimeUnit};

/// A directory under the system temp dir, removed on drop.
struct TempDir(PathBuf);
impl TempDir {
    fn new(tag: &str) -> TempDir {
        use std::sync::atomic::{AtomicU32, Ordering};
        static N: AtomicU32 = AtomicU32::new(0);
        let p = std::env::temp_dir().join(format!(
            "conf-test-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        ));
        fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
    fn path(&self) -> &Path {
        &self.0
    }
}
impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// Writes a site file from `(name, value, final)` triples.
fn site(dir: &Path, file: &str, props: &[(&str, &str, bool)]) {
    let mut x = String::from(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
         <?xml-stylesheet type=\"text/xsl\" href=\"configuration.xsl\"?>\n\
         <!-- Licensed under the Apache License -->\n<configuration>\n",
    );
    for (k, v, fin) in props {
        x.push_str(&format!(
            "  <property>\n    <name>{k}</name>\n    <value>{v}</value>\n{}    <description>about {k}</description>\n  </property>\n",
            if *fin { "    <final>true</final>\n" } else { "" }
        ));
    }
    x.push_str("</configuration>\n");
    fs::write(dir.join(file), x).unwrap();
}

fn fake_env(name: &str) -> Option<String> {
    match name {
        "USER" => Some("alice".into()),
        "HOME" => Some("/home/alice".into()),
        "RM_HOST" => Some("rm-from-env".into()),
        _ => None,
    }
}

fn load(dir: &Path) -> Configuration {
    let mut c = Configuration::with_env(fake_env);
    c.add_dir(dir).unwrap();
    c
}

#[test]
fn load_order_is_core_hdfs_yarn() {
    let d = TempDir::new("order");
    site(
        d.path(),
        "core-site.xml",
        &[
            ("k.all", "core", false),
            ("k.core-hdfs", "core", false),
            ("k.core", "core", false),
        ],
    );
    site(
        d.path(),
        "hdfs-site.xml",
        &[("k.all", "hdfs", false), ("k.core-hdfs", "hdfs", false)],
    );
    site(d.path(), "yarn-site.xml", &[("k.all", "yarn", false)]);
    let c = load(d.path());
    assert_eq!(c.get("k.all"), Some("yarn"));
    assert_eq!(c.get("k.core-hdfs"), Some("hdfs"));
    assert_eq!(c.get("k.core"), Some("core"));
    let names: Vec<_> = c
        .resources()
        .iter()
        .map(|p| p.file_name().unwrap().to_owned())
        .collect();
    assert_eq!(names, ["core-site.xml", "hdfs-site.xml", "yarn-site.xml"]);
    assert_eq!(
        c.source("k.all"),
        Some(Source::Resource(d.path().join("yarn-site.xml")))
    );
    assert_eq!(c.conf_dir(), Some(d.path()));
}

#[test]
fn final_blocks_later_files_but_not_flags() {
    let d = TempDir::new("final");
    site(
        d.path(),
        "core-site.xml",
        &[
            ("ipc.maximum.data.length", "1048576", true),
            ("k", "core", false),
        ],
    );
    site(
        d.path(),
        "hdfs-site.xml",
        &[
            ("ipc.maximum.data.length", "999", false),
            ("k", "hdfs", true),
        ],
    );
    site(d.path(), "yarn-site.xml", &[("k", "yarn", false)]);
    let mut c = load(d.path());
    assert_eq!(c.get_bytes("ipc.maximum.data.length").unwrap(), 1 << 20);
    assert!(c.is_final("ipc.maximum.data.length"));
    // final set by a later file still wins over the earlier value and blocks the next file
    assert_eq!(c.get("k"), Some("hdfs"));
    // A flag is the operator's last word.
    c.set("ipc.maximum.data.length", "64m");
    assert_eq!(c.get_bytes("ipc.maximum.data.length").unwrap(), 64 << 20);
    assert_eq!(c.source("ipc.maximum.data.length"), Some(Source::Set));
    // ... and an extra resource loaded afterwards still cannot override the final key.
    c.add_resource_str(
        "extra.xml",
        "<configuration><property><name>ipc.maximum.data.length</name><value>1</value></property></configuration>",
    )
    .unwrap();
    assert_eq!(c.get_bytes("ipc.maximum.data.length").unwrap(), 64 << 20);
}

#[test]
fn defaults_apply_and_expand() {
    let d = TempDir::new("defaults");
    site(
        d.path(),
        "yarn-site.xml",
        &[("yarn.resourcemanager.hostname", "rm1.example", false)],
    );
    let mut c = load(d.path());
    // ${yarn.resourcemanager.hostname}:8031 from the table, expanded with the file's host.
    assert_eq!(
        c.get("yarn.resourcemanager.resource-tracker.address"),
        Some("rm1.example:8031")
    );
    assert_eq!(
        c.get_socket_addr("yarn.resourcemanager.resource-tracker.address", 8031)
            .unwrap(),
        HostPort {
            host: "rm1.example".into(),
            port: 8031
        }
    );
    assert_eq!(
        c.source("yarn.resourcemanager.resource-tracker.address"),
        Some(Source::Default)
    );
    assert_eq!(c.get("yarn.nodemanager.address"), Some("0.0.0.0:0"));
    assert_eq!(c.get("hadoop.tmp.dir"), Some("/tmp/hadoop-alice"));
    assert_eq!(
        c.get_trimmed_strings("yarn.nodemanager.local-dirs")
            .unwrap(),
        vec!["/tmp/hadoop-alice/nm-local-dir"]
    );
    assert_eq!(c.get("fs.defaultFS"), Some("file:///"));
    assert_eq!(
        c.get_duration_ms("yarn.resourcemanager.nodemanagers.heartbeat-interval-ms")
            .unwrap(),
        1000
    );
    assert_eq!(
        c.get_duration_ms("yarn.nm.liveness-monitor.expiry-interval-ms")
            .unwrap(),
        600_000
    );
    assert!(!c
        .get_bool("yarn.resourcemanager.opportunistic-container-allocation.enabled")
        .unwrap());
    assert_eq!(
        c.get("yarn.resourcemanager.nodemanager.minimum.version"),
        Some("NONE")
    );
    assert_eq!(c.get("yarn.resourcemanager.nodes.include-path"), Some(""));
    assert_eq!(
        c.get_duration(
            "yarn.resourcemanager.container-tokens.master-key-rolling-interval-secs",
            TimeUnit::Seconds
        )
        .unwrap()
        .as_secs(),
        86400
    );
    assert_eq!(c.get_bytes("dfs.blocksize").unwrap(), 134_217_728);
    assert_eq!(
        c.get_bytes("dfs.client.read.prefetch.size").unwrap(),
        1_342_177_280
    );
    assert_eq!(c.get("dfs.checksum.type"), Some("CRC32C"));
    assert_eq!(c.get("dfs.nameservices"), None);
    assert!(c
        .get_trimmed_strings("dfs.nameservices")
        .unwrap()
        .is_empty());
    assert!(matches!(
        c.get_u64("dfs.namenode.rpc-address"),
        Err(Error::Missing { .. })
    ));
    // A flag changes what the default expands to; unset brings the file value back.
    c.set("yarn.resourcemanager.hostname", "${env.RM_HOST}");
    assert_eq!(
        c.get("yarn.resourcemanager.resource-tracker.address"),
        Some("rm-from-env:8031")
    );
    c.unset("yarn.resourcemanager.hostname");
    assert_eq!(
        c.get("yarn.resourcemanager.resource-tracker.address"),
        Some("0.0.0.0:8031")
    );
}

#[test]
fn every_default_reads_with_its_getter() {
    let c = Configuration::with_env(fake_env);
    for row in DEFAULTS {
        if row.value == DefaultValue::Unset {
            assert_eq!(c.get(row.key), None, "{}", row.key);
            continue;
        }
        let k = row.key;
        let ok = match row.kind {
            Kind::Text | Kind::Uri => c.get(k).map(|_| ()).ok_or(Error::Missing { key: k.into() }),
            Kind::Count => c.get_u64(k).map(|_| ()),
            Kind::Bytes => c.get_bytes(k).map(|_| ()),
            Kind::Millis => c.get_duration_ms(k).map(|_| ()),
            Kind::Seconds => c.get_duration(k, TimeUnit::Seconds).map(|_| ()),
            Kind::Bool => c.get_bool(k).map(|_| ()),
            Kind::Address(p) => c.get_socket_addr(k, p).map(|_| ()),
            Kind::List => c.get_trimmed_strings(k).map(|_| ()),
        };
        ok.unwrap_or_else(|e| panic!("default of {k}: {e}"));
        assert!(
            !c.get(k).unwrap().contains("${"),
            "{k} left unexpanded: {:?}",
            c.get(k)
        );
    }
}

#[test]
fn suffixes_where_hadoop_allows_them() {
    let d = TempDir::new("suffix");
    site(
        d.path(),
        "hdfs-site.xml",
        &[
            ("dfs.blocksize", "64m", false),
            ("dfs.client.retry.window.base", "3s", false),
        ],
    );
    site(
        d.path(),
        "yarn-site.xml",
        &[
            (
                "yarn.resourcemanager.nodemanagers.heartbeat-interval-ms",
                " 250ms ",
                false,
            ),
            ("yarn.nm.liveness-monitor.expiry-interval-ms", "10m", false),
            ("yarn.resourcemanager.connect.max-wait.ms", "1h", false),
        ],
    );
    let c = load(d.path());
    assert_eq!(c.get_bytes("dfs.blocksize").unwrap(), 64 << 20);
    // The computed default follows the configured block size.
    assert_eq!(
        c.get_bytes("dfs.client.read.prefetch.size").unwrap(),
        640 << 20
    );
    assert_eq!(
        c.get_duration_ms("dfs.client.retry.window.base").unwrap(),
        3000
    );
    assert_eq!(
        c.get_duration_ms("yarn.resourcemanager.nodemanagers.heartbeat-interval-ms")
            .unwrap(),
        250
    );
    assert_eq!(
        c.get_duration_ms("yarn.nm.liveness-monitor.expiry-interval-ms")
            .unwrap(),
        600_000
    );
    assert_eq!(
        c.get_duration_ms("yarn.resourcemanager.connect.max-wait.ms")
            .unwrap(),
        3_600_000
    );
    // A size suffix is not a plain integer.
    assert!(matches!(
        c.get_u64("dfs.blocksize"),
        Err(Error::Invalid { .. })
    ));
}

#[test]
fn bad_values_are_typed_errors_naming_the_key() {
    let mut c = Configuration::with_env(fake_env);
    c.set("yarn.nodemanager.resource.memory-mb", "lots");
    c.set(
        "yarn.resourcemanager.opportunistic-container-allocation.enabled",
        "yes",
    );
    c.set("yarn.resourcemanager.resource-tracker.address", "rm1:99999");
    c.set("yarn.nodemanager.resource.cpu-vcores", "-1");
    let e = c
        .get_u64("yarn.nodemanager.resource.memory-mb")
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("yarn.nodemanager.resource.memory-mb"),
        "{e}"
    );
    assert!(matches!(
        c.get_bool("yarn.resourcemanager.opportunistic-container-allocation.enabled"),
        Err(Error::Invalid { .. })
    ));
    assert!(matches!(
        c.get_socket_addr("yarn.resourcemanager.resource-tracker.address", 8031),
        Err(Error::Invalid { .. })
    ));
    assert!(c.get_u64("yarn.nodemanager.resource.cpu-vcores").is_err());
    assert_eq!(
        c.get_i64("yarn.nodemanager.resource.cpu-vcores").unwrap(),
        -1
    );
}

#[test]
fn substitution_env_and_loops() {
    let d = TempDir::new("subst");
    site(
        d.path(),
        "core-site.xml",
        &[
            ("my.base", "/data", false),
            ("my.dirs", "${my.base}/1, ${my.base}/2 ,${my.base}/3", false),
            ("my.home", "${env.HOME}/x", false),
            ("my.fallback", "${env.NOT_SET:-/fallback}", false),
            ("my.unbound", "${no.such.key}/y", false),
            ("loop.a", "${loop.b}", false),
            ("loop.b", "x${loop.a}", false),
            ("self", "${self}", false),
            ("uses.loop", "2${loop.a}", false),
        ],
    );
    let c = load(d.path());
    assert_eq!(
        c.get_trimmed_strings("my.dirs").unwrap(),
        vec!["/data/1", "/data/2", "/data/3"]
    );
    assert_eq!(c.get("my.home"), Some("/home/alice/x"));
    assert_eq!(c.get("my.fallback"), Some("/fallback"));
    assert_eq!(c.get("my.unbound"), Some("${no.such.key}/y"));
    assert_eq!(c.get_raw("my.home"), Some("${env.HOME}/x"));
    for key in ["loop.a", "loop.b", "self", "uses.loop"] {
        assert_eq!(c.get(key), None, "{key}");
        match c.try_get(key) {
            Err(Error::SubstitutionDepth { key: k, max, .. }) => {
                assert_eq!(k, key);
                assert_eq!(max, 20);
            }
            other => panic!("{key}: expected SubstitutionDepth, got {other:?}"),
        }
        assert!(matches!(
            c.get_u64(key),
            Err(Error::SubstitutionDepth { .. })
        ));
    }
    // Everything else is unaffected by the loop.
    assert!(c.iter().any(|(k, v)| k == "my.base" && v == "/data"));
    assert!(!c.iter().any(|(k, _)| k == "loop.a"));
}

#[test]
fn real_process_environment_is_used_by_default() {
    // Cargo sets CARGO_PKG_NAME for the test process.
    let mut c = Configuration::new();
    c.set("who", "${env.CARGO_PKG_NAME}");
    assert_eq!(c.get("who"), Some("conf"));
}

#[test]
fn ha_nameservice_keys() {
    let d = TempDir::new("ha");
    site(
        d.path(),
        "core-site.xml",
        &[("fs.defaultFS", "hdfs://ns1", false)],
    );
    site(
        d.path(),
        "hdfs-site.xml",
        &[
            ("dfs.nameservices", "ns1", false),
            ("dfs.ha.namenodes.ns1", "nn1, nn2", false),
            (
                "dfs.namenode.rpc-address.ns1.nn1",
                "nn-a.example:8020",
                false,
            ),
            ("dfs.namenode.rpc-address.ns1.nn2", "nn-b.example", false),
        ],
    );
    let c = load(d.path());
    assert_eq!(c.get_socket_addr("fs.defaultFS", 8020).unwrap().host, "ns1");
    let ns = c.get_trimmed_strings("dfs.nameservices").unwrap();
    let nns = c
        .get_trimmed_strings(&format!("dfs.ha.namenodes.{}", ns[0]))
        .unwrap();
    assert_eq!(nns, vec!["nn1", "nn2"]);
    let addrs: Vec<String> = nns
        .iter()
        .map(|nn| {
            c.get_socket_addr(&format!("dfs.namenode.rpc-address.ns1.{nn}"), 8020)
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(addrs, vec!["nn-a.example:8020", "nn-b.example:8020"]);
    assert_eq!(c.keys_with_prefix("dfs.namenode.rpc-address.").count(), 2);
}

#[test]
fn malformed_file_is_a_typed_error_with_the_file_name() {
    let d = TempDir::new("malformed");
    site(d.path(), "core-site.xml", &[("k", "core", false)]);
    fs::write(
        d.path().join("yarn-site.xml"),
        "<configuration>\n  <property>\n    <name>k</name>\n    <value>v</valu>\n  </property>\n</configuration>\n",
    )
    .unwrap();
    let err = Configuration::load_dir(d.path()).unwrap_err();
    match &err {
        Error::Xml { path, .. } => assert!(path.ends_with("yarn-site.xml"), "{path:?}"),
        other => panic!("expected Xml, got {other:?}"),
    }
    let msg = err.to_string();
    assert!(
        msg.contains("yarn-site.xml") && msg.contains("4:"),
        "line number in {msg}"
    );

    // A failed load leaves an existing configuration untouched.
    let mut c = Configuration::with_env(fake_env);
    c.add_resource(&d.path().join("core-site.xml")).unwrap();
    assert!(c.add_resource(&d.path().join("yarn-site.xml")).is_err());
    assert_eq!(c.get("k"), Some("core"));
    assert_eq!(c.resources().len(), 1);

    fs::write(d.path().join("hdfs-site.xml"), "<conf/>").unwrap();
    assert!(matches!(
        c.add_resource(&d.path().join("hdfs-site.xml")),
        Err(Error::NotAConfiguration { .. })
    ));
    fs::write(
        d.path().join("bin.xml"),
        b"<configuration>\xff</configuration>",
    )
    .unwrap();
    assert!(matches!(
        c.add_resource(&d.path().join("bin.xml")),
        Err(Error::NotUtf8 { .. })
    ));
    assert!(matches!(
        c.add_resource(&d.path().join("absent.xml")),
        Err(Error::Io { .. })
    ));
}

#[test]
fn missing_files_are_skipped_missing_dir_is_an_error() {
    let d = TempDir::new("partial");
    site(d.path(), "hdfs-site.xml", &[("dfs.blocksize", "1m", false)]);
    let c = load(d.path());
    assert_eq!(c.resources().len(), 1);
    assert_eq!(c.get_bytes("dfs.blocksize").unwrap(), 1 << 20);
    assert!(matches!(
        Configuration::load_dir(&d.path().join("nope")),
        Err(Error::Io { .. })
    ));
}

#[test]
fn oversized_file_is_refused() {
    let d = TempDir::new("big");
    let p = d.path().join("core-site.xml");
    let f = fs::File::create(&p).unwrap();
    f.set_len(conf::configuration::MAX_FILE_BYTES + 1).unwrap();
    assert!(matches!(
        Configuration::load_dir(d.path()),
        Err(Error::TooLarge { .. })
    ));
}
