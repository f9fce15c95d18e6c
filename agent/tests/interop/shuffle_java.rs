//! Our `mapreduce_shuffle` beside Hadoop 3.5.0's own `ShuffleHandler` (peer `mr-shuffle`, the
//! real class hosted standalone as an NM hosts it), both fetched by Hadoop's Fetcher-side code in
//! the peer (`SecureShuffleUtils` for `UrlHash`/`ReplyHash`, `ShuffleHeader.readFields`, the
//! JDK's `HttpURLConnection`, and for HTTPS `HttpsURLConnection` with Hadoop's
//! `SSLFactory(CLIENT)` reading `ssl-client.xml`, as the Fetcher sets it up):
//!
//! - the same map outputs (IFile segments, two partitions per map) over HTTP from both servers:
//!   the same maps, lengths, reduce numbers and segment CRCs, every IFile trailer intact;
//! - the same fetches over HTTPS from ours (`mapreduce.shuffle.ssl.enabled=true`, the keystore
//!   a PKCS12 file made by `keytool`, the reducer trusting it through a PKCS12 truststore): the
//!   same answers.
//!
//! One peer JVM for the file (~2 s to start); the test itself takes a few seconds.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use nm_core::ids::AppId;
use nm_runtime::shuffle::{Jobs, ShuffleConfig, ShuffleServer};
use peer_harness::{Mode, Peer};
use serde_json::Value;

const TS: i64 = 1_700_000_000_000;
const USER: &str = "alice";
const SECRET: [u8; 8] = [8, 7, 6, 5, 4, 3, 2, 1];
const STOREPASS: &str = "hotpath-test";

fn job() -> String {
    format!("job_{TS}_0001")
}
fn attempt(task: u32) -> String {
    format!("attempt_{TS}_0001_m_{task:06}_0")
}
fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../nm-runtime/tests/suite/fixtures")
        .join(name)
}

fn service_data() -> Vec<u8> {
    let mut id = Vec::new();
    hadoop_wire::token::writable::write_text(&mut id, &job());
    hadoop_wire::token::Token::new(id, SECRET.to_vec(), "mapreduce.job", job()).to_writable()
}

/// An IFile segment of `n` bytes of records (made-up bytes here) and its CRC32 trailer.
fn segment(seed: u32, n: usize) -> Vec<u8> {
    let mut s: Vec<u8> = (0..n as u32)
        .map(|i| (i.wrapping_mul(2_654_435_761).wrapping_add(seed) >> 13) as u8)
        .collect();
    let crc = crc32(&s);
    s.extend_from_slice(&crc.to_be_bytes());
    s
}

/// CRC32 (IEEE), as `java.util.zip.CRC32`.
fn crc32(b: &[u8]) -> u32 {
    let mut c = !0u32;
    for &x in b {
        c ^= u32::from(x);
        for _ in 0..8 {
            c = if c & 1 == 1 {
                (c >> 1) ^ 0xedb8_8320
            } else {
                c >> 1
            };
        }
    }
    !c
}

/// Map outputs of three maps with two partitions each, in `local` as map tasks leave them.
fn write_outputs(local: &Path) {
    for t in 0..3u32 {
        let d = local
            .join("usercache")
            .join(USER)
            .join("appcache")
            .join(AppId::new(TS, 1).to_string())
            .join("output")
            .join(attempt(t));
        std::fs::create_dir_all(&d).unwrap();
        let parts = [segment(t, 1000 + 70_000 * t as usize), segment(t + 9, 20)];
        let mut data = Vec::new();
        let mut index = Vec::new();
        for p in &parts {
            for v in [data.len() as i64, p.len() as i64 - 4, p.len() as i64] {
                index.extend_from_slice(&v.to_be_bytes());
            }
            data.extend_from_slice(p);
        }
        let crc = u64::from(crc32(&index));
        index.extend_from_slice(&crc.to_be_bytes());
        std::fs::write(d.join("file.out"), data).unwrap();
        std::fs::write(d.join("file.out.index"), index).unwrap();
    }
}

fn ours(cfg: ShuffleConfig, local: &Path) -> ShuffleServer {
    let jobs = Jobs::new(None);
    let s = ShuffleServer::start(
        ShuffleConfig { port: 0, ..cfg },
        vec![local.to_owned()],
        jobs,
        Arc::default(),
    )
    .unwrap();
    s.jobs()
        .register(USER, AppId::new(TS, 1), &service_data())
        .unwrap();
    s
}

fn fetch(peer: &mut Peer, url: &str, extra: &str) -> Value {
    let mut r = peer
        .command(&format!("fetch {url} {} {extra}", hex(&SECRET)))
        .unwrap_or_else(|e| panic!("fetch {url}: {e}"));
    r.as_object_mut().unwrap().remove("ok");
    r
}

#[test]
fn hadoop_s_fetcher_gets_the_same_answers_from_ours_over_http_and_https_as_from_java_s() {
    let dir = tempfile::tempdir().unwrap();
    let local = dir.path().join("local");
    write_outputs(&local);
    let mut java = Peer::start(
        Mode::MrShuffle,
        &[
            "--local-dirs",
            &local.display().to_string(),
            "--log-level",
            "WARN",
        ],
    )
    .expect("mr-shuffle peer (peers/hadoop-mr)");
    let java_port = java.ready()["port"].as_u64().unwrap();
    java.command(&format!(
        "init-app {USER} {} {}",
        AppId::new(TS, 1),
        hex(&service_data())
    ))
    .unwrap();
    let plain = ours(ShuffleConfig::default(), &local);
    let mut c = conf::Configuration::new();
    c.set("mapreduce.shuffle.ssl.enabled", "true");
    c.set(
        "ssl.server.keystore.location",
        &fixture("shuffle-server.p12").display().to_string(),
    );
    c.set("ssl.server.keystore.password", STOREPASS);
    let tls = ours(ShuffleConfig::from_conf(&c).unwrap(), &local);
    let ssl_dir = dir.path().join("ssl-client");
    std::fs::create_dir_all(&ssl_dir).unwrap();
    std::fs::write(
        ssl_dir.join("ssl-client.xml"),
        format!(
            "<configuration>\
             <property><name>ssl.client.truststore.location</name><value>{}</value></property>\
             <property><name>ssl.client.truststore.password</name><value>{STOREPASS}</value></property>\
             <property><name>ssl.client.truststore.type</name><value>pkcs12</value></property>\
             </configuration>",
            fixture("shuffle-trust.p12").display()
        ),
    )
    .unwrap();
    let maps = (0..3).map(attempt).collect::<Vec<_>>().join(",");
    for reduce in [0, 1] {
        let q = format!("/mapOutput?job={}&reduce={reduce}&map={maps}", job());
        let want = fetch(&mut java, &format!("http://127.0.0.1:{java_port}{q}"), "");
        assert_eq!(want["status"], 200, "Java's ShuffleHandler: {want}");
        let got = want["maps"].as_array().unwrap();
        assert_eq!(got.len(), 3, "{want}");
        assert!(
            got.iter()
                .all(|m| m["trailer_ok"] == true && m["reduce"] == reduce),
            "{want}"
        );
        let http = fetch(
            &mut java,
            &format!("http://127.0.0.1:{}{q}", plain.port()),
            "",
        );
        assert_eq!(http, want, "ours over HTTP");
        let https = fetch(
            &mut java,
            &format!("https://localhost:{}{q}", tls.port()),
            &format!("ssl-conf-dir={}", ssl_dir.display()),
        );
        assert_eq!(https, want, "ours over HTTPS");
    }
    // an unknown map: Java's and our 500 (the body names the missing index either way)
    let q = format!("/mapOutput?job={}&reduce=0&map={}", job(), attempt(9));
    let j = fetch(&mut java, &format!("http://127.0.0.1:{java_port}{q}"), "");
    let o = fetch(
        &mut java,
        &format!("https://localhost:{}{q}", tls.port()),
        &format!("ssl-conf-dir={}", ssl_dir.display()),
    );
    assert_eq!(
        (j["status"].clone(), o["status"].clone()),
        (500.into(), 500.into())
    );
    assert!(
        o["body"].as_str().unwrap().contains("file.out.index"),
        "{o}"
    );
}
