//! `mapreduce_shuffle` as the 3.5.0 Fetcher sees it: the Fetcher's exact request (URL, headers,
//! `UrlHash` computed here with the `hmac`/`sha1` crates, independently of the service) against
//! map outputs written in the IFile/SpillRecord formats of shuffle.md §3.5/§4.3, checking
//! status, headers and body bytes; and every bad input of issue 32 part 3. Each test runs its
//! own service on an ephemeral port (well under a second each; the flood test a few seconds).
//! The encrypted shuffle (`mapreduce.shuffle.ssl.enabled`) with keystores made by the JDK's
//! `keytool` (`fixtures/`, see [`fixture`]), fetched through a rustls client.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use hadoop_wire::token::Token;
use hmac::{Hmac, KeyInit, Mac};
use nm_core::ids::AppId;
use nm_runtime::metrics::ShuffleMetrics;
use nm_runtime::shuffle::{Jobs, ShuffleConfig, ShuffleServer};

const TS: i64 = 1_700_000_000_000;
const USER: &str = "alice";
const SECRET: [u8; 8] = [1, 2, 3, 4, 5, 6, 7, 8];

fn app(id: i32) -> AppId {
    AppId::new(TS, id)
}
fn job(id: i32) -> String {
    format!("job_{TS}_{id:04}")
}
fn attempt(app: i32, task: u32) -> String {
    format!("attempt_{TS}_{app:04}_m_{task:06}_0")
}

/// shuffle.md §3.5: partition 0 holds Text("a") → Text("1"), partition 1 is empty.
const PART0: [u8; 12] = [
    0x02, 0x02, 0x01, 0x61, 0x01, 0x31, 0xff, 0xff, 0xfc, 0xa5, 0xbe, 0x58,
];
const PART1: [u8; 6] = [0xff, 0xff, 0xff, 0xff, 0x00, 0x00];

/// An index file: (start, raw, part) records and the CRC32 trailer.
fn index_bytes(records: &[(i64, i64, i64)]) -> Vec<u8> {
    let mut b = Vec::new();
    for (s, r, p) in records {
        for v in [s, r, p] {
            b.extend_from_slice(&v.to_be_bytes());
        }
    }
    let crc = u64::from(crc32fast::hash(&b));
    b.extend_from_slice(&crc.to_be_bytes());
    b
}

fn output_dir(local: &Path, app: AppId, attempt: &str) -> PathBuf {
    local
        .join("usercache")
        .join(USER)
        .join("appcache")
        .join(app.to_string())
        .join("output")
        .join(attempt)
}

/// Writes shuffle.md's two-partition fixture for `attempt`: data in `data_dir`, index in
/// `index_dir` (they may differ, as after a multi-spill merge).
fn write_fixture(data_dir: &Path, index_dir: &Path, app: AppId, attempt: &str) {
    let d = output_dir(data_dir, app, attempt);
    std::fs::create_dir_all(&d).unwrap();
    let mut data = PART0.to_vec();
    data.extend_from_slice(&PART1);
    std::fs::write(d.join("file.out"), data).unwrap();
    let i = output_dir(index_dir, app, attempt);
    std::fs::create_dir_all(&i).unwrap();
    std::fs::write(
        i.join("file.out.index"),
        index_bytes(&[(0, 8, 12), (12, 2, 6)]),
    )
    .unwrap();
}

fn service_data(job: &str, secret: &[u8]) -> Vec<u8> {
    let mut id = Vec::new();
    hadoop_wire::token::writable::write_text(&mut id, job);
    Token::new(id, secret.to_vec(), "mapreduce.job", job).to_writable()
}

struct Node {
    _dir: tempfile::TempDir,
    locals: Vec<PathBuf>,
    server: ShuffleServer,
    metrics: Arc<ShuffleMetrics>,
}

impl Node {
    fn start(cfg: ShuffleConfig) -> Node {
        let dir = tempfile::tempdir().unwrap();
        let locals = vec![dir.path().join("l1"), dir.path().join("l2")];
        let metrics = Arc::new(ShuffleMetrics::default());
        let jobs = Jobs::new(None);
        let server = ShuffleServer::start(
            ShuffleConfig { port: 0, ..cfg },
            locals.clone(),
            jobs,
            metrics.clone(),
        )
        .unwrap();
        Node {
            _dir: dir,
            locals,
            server,
            metrics,
        }
    }

    fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.server.port()))
    }

    fn register(&self, app_id: i32) {
        self.server
            .jobs()
            .register(USER, app(app_id), &service_data(&job(app_id), &SECRET))
            .unwrap();
    }
}

/// `UrlHash` as the Fetcher computes it (`SecureShuffleUtils.hashFromString`).
fn url_hash(secret: &[u8], port: u16, path_and_query: &str) -> String {
    let mut m = <Hmac<sha1::Sha1> as KeyInit>::new_from_slice(secret).unwrap();
    m.update(format!("{port}{path_and_query}").as_bytes());
    STANDARD.encode(m.finalize().into_bytes())
}

/// The Fetcher's request for `maps` of reduce `reduce` (the JDK's own headers included).
fn fetcher_request(
    port: u16,
    job: &str,
    reduce: i32,
    maps: &[String],
    hash: Option<&str>,
) -> String {
    let target = format!(
        "/mapOutput?job={job}&reduce={reduce}&map={}",
        maps.join(",")
    );
    let hash = hash.map_or_else(|| url_hash(&SECRET, port, &target), str::to_string);
    format!(
        "GET {target} HTTP/1.1\r\nUrlHash: {hash}\r\nname: mapreduce\r\nversion: 1.0.0\r\n\
         User-Agent: Java/17.0.15\r\nHost: 127.0.0.1:{port}\r\nAccept: */*\r\nConnection: keep-alive\r\n\r\n"
    )
}

#[derive(Debug)]
struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Reply {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .rev()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
    fn text(&self) -> &str {
        std::str::from_utf8(&self.body).unwrap()
    }
}

/// Reads one response (head, then `content-length` bytes) from `s`.
fn read_reply(s: &mut impl Read) -> Reply {
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    while !buf.ends_with(b"\r\n\r\n") {
        assert_eq!(s.read(&mut byte).unwrap(), 1, "EOF in the head: {buf:?}");
        buf.push(byte[0]);
    }
    let text = String::from_utf8(buf).unwrap();
    let mut lines = text.split("\r\n");
    let status: u16 = lines
        .next()
        .unwrap()
        .split(' ')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let headers: Vec<(String, String)> = lines
        .filter(|l| !l.is_empty())
        .map(|l| {
            let (n, v) = l.split_once(':').unwrap();
            (n.trim().to_string(), v.trim().to_string())
        })
        .collect();
    let len: usize = headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
        .map(|(_, v)| v.parse().unwrap())
        .expect("content-length");
    let mut body = vec![0u8; len];
    s.read_exact(&mut body).unwrap();
    Reply {
        status,
        headers,
        body,
    }
}

fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s
}

/// Sends `req`, reads the answer, and checks the server closed the connection after it.
fn fetch_raw(addr: SocketAddr, req: &[u8]) -> Reply {
    let mut s = connect(addr);
    s.write_all(req).unwrap();
    let r = read_reply(&mut s);
    let mut rest = Vec::new();
    s.read_to_end(&mut rest).unwrap();
    assert!(rest.is_empty(), "bytes after the answer: {rest:?}");
    r
}

fn shuffle_header(map: &str, part: i64, raw: i64, reduce: i32) -> Vec<u8> {
    let mut v = vec![map.len() as u8];
    v.extend_from_slice(map.as_bytes());
    for x in [part, raw, i64::from(reduce)] {
        assert!((0..=127).contains(&x));
        v.push(x as u8);
    }
    v
}

#[test]
fn the_fixture_is_shuffle_md_s() {
    assert_eq!(
        index_bytes(&[(0, 8, 12), (12, 2, 6)])[48..],
        [0, 0, 0, 0, 0x1b, 0x56, 0x0e, 0xe2]
    );
}

#[test]
fn a_fetcher_request_gets_java_s_headers_and_both_segments() {
    let node = Node::start(ShuffleConfig::default());
    node.register(1);
    let maps = [attempt(1, 0), attempt(1, 1)];
    write_fixture(&node.locals[0], &node.locals[0], app(1), &maps[0]);
    // data and index on different local dirs
    write_fixture(&node.locals[1], &node.locals[0], app(1), &maps[1]);
    assert!(!output_dir(&node.locals[0], app(1), &maps[1])
        .join("file.out")
        .exists());
    let port = node.server.port();
    for (reduce, part, raw, bytes) in [(1, 6, 2, &PART1[..]), (0, 12, 8, &PART0[..])] {
        let req = fetcher_request(port, &job(1), reduce, &maps, None);
        let r = fetch_raw(node.addr(), req.as_bytes());
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
        let hash = req
            .lines()
            .find_map(|l| l.strip_prefix("UrlHash: "))
            .unwrap();
        // ReplyHash = HMAC of the received UrlHash value
        let mut m = <Hmac<sha1::Sha1> as KeyInit>::new_from_slice(&SECRET).unwrap();
        m.update(hash.as_bytes());
        let reply = STANDARD.encode(m.finalize().into_bytes());
        assert_eq!(r.header("ReplyHash"), Some(reply.as_str()));
        assert_eq!(r.header("name"), Some("mapreduce"));
        assert_eq!(r.header("version"), Some("1.0.0"));
        assert_eq!(r.header("connection"), Some("close"));
        let mut want = Vec::new();
        for m in &maps {
            want.extend(shuffle_header(m, part, raw, reduce));
            want.extend_from_slice(bytes);
        }
        assert_eq!(r.body, want);
    }
    let m = &node.metrics;
    assert_eq!(m.fetches.load(Relaxed), 2);
    assert_eq!(m.maps.load(Relaxed), 4);
    assert_eq!(m.bytes.load(Relaxed), 2 * (6 + 12));
}

#[test]
fn a_large_partition_arrives_whole_and_keep_alive_serves_a_second_request() {
    let node = Node::start(ShuffleConfig::default());
    node.register(2);
    let map = attempt(2, 0);
    let d = output_dir(&node.locals[0], app(2), &map);
    std::fs::create_dir_all(&d).unwrap();
    // 3 partitions, the middle one 24 MiB (several loop turns of sendfile)
    let big = 24usize << 20;
    let data: Vec<u8> = (0..6 + big + 6).map(|i| (i * 7 + i / 4096) as u8).collect();
    std::fs::write(d.join("file.out"), &data).unwrap();
    std::fs::write(
        d.join("file.out.index"),
        index_bytes(&[
            (0, 2, 6),
            (6, big as i64 - 4, big as i64),
            (6 + big as i64, 2, 6),
        ]),
    )
    .unwrap();
    let port = node.server.port();
    let target = format!(
        "/mapOutput?job={}&reduce=1&map={map}&keepAlive=true",
        job(2)
    );
    let hash = url_hash(&SECRET, port, &target);
    let req = format!(
        "GET {target} HTTP/1.1\r\nUrlHash: {hash}\r\nname: mapreduce\r\nversion: 1.0.0\r\n\r\n"
    );
    let mut s = connect(node.addr());
    for _ in 0..2 {
        s.write_all(req.as_bytes()).unwrap();
        let r = read_reply(&mut s);
        assert_eq!(r.status, 200);
        assert_eq!(r.header("Connection"), Some("keep-alive"));
        assert_eq!(r.header("Keep-Alive"), Some("timeout=5"));
        let head_len = 1 + map.len() + 5 + 5 + 1;
        assert_eq!(r.body.len(), head_len + big);
        assert!(
            r.body[head_len..] == data[6..6 + big],
            "segment bytes differ"
        );
    }
}

#[test]
fn bad_input_gets_java_s_answers() {
    let node = Node::start(ShuffleConfig::default());
    node.register(3);
    node.register(4);
    let map = attempt(3, 0);
    write_fixture(&node.locals[0], &node.locals[0], app(3), &map);
    write_fixture(&node.locals[0], &node.locals[0], app(4), &attempt(4, 0));
    let port = node.server.port();
    let addr = node.addr();
    let ok = "name: mapreduce\r\nversion: 1.0.0\r\n";
    let signed = |job: &str, reduce: &str, maps: &str| {
        let target = format!("/mapOutput?job={job}&reduce={reduce}&map={maps}");
        format!(
            "GET {target} HTTP/1.1\r\nUrlHash: {}\r\n{ok}\r\n",
            url_hash(&SECRET, port, &target)
        )
    };
    let rel =
        |map: &str, file: &str| format!("usercache/{USER}/appcache/{}/output/{map}/{file}", app(3));
    let long_header = format!("GET /mapOutput HTTP/1.1\r\nx: {}\r\n\r\n", "y".repeat(9000));
    let cases: Vec<(String, u16, String)> = vec![
        (format!("POST /mapOutput?job=x HTTP/1.1\r\n{ok}\r\n"), 405, String::new()),
        (
            format!("GET /mapOutput?job={}&reduce=0&map={map} HTTP/1.1\r\nname: mapreduce\r\nversion: 2.0\r\n\r\n", job(3)),
            400,
            "Incompatible shuffle request version".into(),
        ),
        (
            format!("GET /mapOutput?job={}&map={map} HTTP/1.1\r\n{ok}\r\n", job(3)),
            400,
            "Required param job, map and reduce".into(),
        ),
        (
            format!("GET /mapOutput?job=a&job=b&reduce=0&map={map} HTTP/1.1\r\n{ok}\r\n"),
            400,
            "Too many job/reduce parameters".into(),
        ),
        (
            format!("GET /mapOutput?job=a&reduce=0-3&map={map} HTTP/1.1\r\n{ok}\r\n"),
            400,
            "Bad reduce parameter".into(),
        ),
        (
            signed("job_1_0001", "0", &map),
            401,
            "Can't find job token for job job_1_0001 !!".into(),
        ),
        (
            format!("GET /mapOutput?job={}&reduce=0&map={map} HTTP/1.1\r\n{ok}\r\n", job(3)),
            401,
            "fetcher cannot be authenticated".into(),
        ),
        (
            format!(
                "GET /mapOutput?job={}&reduce=0&map={map} HTTP/1.1\r\nUrlHash: {}\r\n{ok}\r\n",
                job(3),
                url_hash(&SECRET, port, "/mapOutput?job=other")
            ),
            401,
            "Verification of the hashReply failed".into(),
        ),
        // the hash of another port (a translated port) fails too
        (
            format!(
                "GET /mapOutput?job={}&reduce=0&map={map} HTTP/1.1\r\nUrlHash: {}\r\n{ok}\r\n",
                job(3),
                url_hash(&SECRET, port.wrapping_add(1), &format!("/mapOutput?job={}&reduce=0&map={map}", job(3)))
            ),
            401,
            "Verification of the hashReply failed".into(),
        ),
        // path traversal: never a path on disk, "not found"
        (
            signed(&job(3), "0", &format!("{map}/../../../../{}", attempt(4, 0))),
            500,
            format!(
                "Could not find {} in any of the directories",
                rel(&format!("{map}/../../../../{}", attempt(4, 0)), "file.out.index")
            ),
        ),
        (
            signed(&job(3), "0", "..%2F..%2F..%2Fetc"),
            500,
            format!("Could not find {} in any of the directories", rel("../../../etc", "file.out.index")),
        ),
        // another job's map output with this job's hash: not under this job's directories
        (
            signed(&job(3), "0", &attempt(4, 0)),
            500,
            format!("Could not find {} in any of the directories", rel(&attempt(4, 0), "file.out.index")),
        ),
        // one missing map fails the whole request
        (
            signed(&job(3), "0", &format!("{map},{}", attempt(3, 9))),
            500,
            format!("Could not find {} in any of the directories", rel(&attempt(3, 9), "file.out.index")),
        ),
        (
            signed(&job(3), "2", &map),
            500,
            format!("Invalid request  Map Id = {map} Reducer = 2 Index Info Length = 2"),
        ),
        (
            signed(&job(3), "-1", &map),
            500,
            format!("Invalid request  Map Id = {map} Reducer = -1 Index Info Length = 2"),
        ),
        (long_header, 400, String::new()),
        ("\x16\x03\x01\x02\x00\x01\x00\x01\x7c\x03\x03\r\n\r\n".into(), 400, String::new()),
    ];
    for (req, status, body) in &cases {
        let r = fetch_raw(addr, req.as_bytes());
        assert_eq!((r.status, r.text()), (*status, body.as_str()), "{req}");
        assert_eq!(r.header("connection"), Some("close"));
        if *status != 405 {
            assert_eq!(r.header("content-type"), Some("text/plain; charset=UTF-8"));
        }
    }
    let m = &node.metrics;
    assert_eq!(m.bad_requests.load(Relaxed), 7);
    assert_eq!(m.unauthorized.load(Relaxed), 4);
    assert_eq!(m.map_output_errors.load(Relaxed), 6);
    // a bad index CRC
    let idx = output_dir(&node.locals[0], app(3), &map).join("file.out.index");
    let mut b = std::fs::read(&idx).unwrap();
    b[0] ^= 1;
    std::fs::write(&idx, b).unwrap();
    let r = fetch_raw(addr, signed(&job(3), "1", &attempt(3, 0)).as_bytes());
    assert_eq!(r.status, 200, "cached before the corruption");
    write_fixture(&node.locals[0], &node.locals[0], app(3), &attempt(3, 5));
    let idx = output_dir(&node.locals[0], app(3), &attempt(3, 5)).join("file.out.index");
    let mut b = std::fs::read(&idx).unwrap();
    b[0] ^= 1;
    std::fs::write(&idx, b).unwrap();
    let r = fetch_raw(addr, signed(&job(3), "1", &attempt(3, 5)).as_bytes());
    assert_eq!(r.status, 500);
    assert!(
        r.text()
            .starts_with("Error Reading IndexFileChecksum error reading spill index: "),
        "{}",
        r.text()
    );
    // after the application stops: 401
    node.server.jobs().stop_application(app(3));
    let r = fetch_raw(addr, signed(&job(3), "1", &map).as_bytes());
    assert_eq!(
        (r.status, r.text()),
        (
            401,
            format!("Can't find job token for job {} !!", job(3)).as_str()
        )
    );
}

#[test]
fn over_max_connections_a_connect_gets_429_with_retry_after() {
    let node = Node::start(ShuffleConfig {
        max_connections: 2,
        ..ShuffleConfig::default()
    });
    let _a = connect(node.addr());
    let _b = connect(node.addr());
    // the third is answered at once, before it sends anything
    let mut c = connect(node.addr());
    let r = read_reply(&mut c);
    assert_eq!(r.status, 429);
    assert_eq!(r.header("Retry-After"), Some("1000"));
    assert_eq!(node.metrics.too_many.load(Relaxed), 1);
}

#[test]
fn a_flood_of_idle_and_half_sent_connections_stays_bounded_and_fetches_flow() {
    let node = Node::start(ShuffleConfig {
        max_open: 100,
        threads: 2,
        request_timeout: Duration::from_secs(2),
        ..ShuffleConfig::default()
    });
    node.register(5);
    let map = attempt(5, 0);
    write_fixture(&node.locals[0], &node.locals[0], app(5), &map);
    let port = node.server.port();
    let mut flood = Vec::new();
    // 800 client sockets + at most 100 accepted: under a 1024-descriptor soft limit
    for i in 0..800 {
        let mut s = TcpStream::connect(node.addr()).unwrap();
        if i % 2 == 0 {
            // half a request, never finished
            let _ = s.write_all(b"GET /mapOutput?job=job_1_0001&reduce=0&map=attempt_1_0001_m_0");
        }
        flood.push(s);
        if i % 200 == 199 {
            // a real fetch in the middle of the flood gets its answer
            let req = fetcher_request(port, &job(5), 1, std::slice::from_ref(&map), None);
            let r = fetch_raw(node.addr(), req.as_bytes());
            assert_eq!(r.status, 200);
        }
    }
    let open = node.metrics.open.load(Relaxed);
    assert!(open <= 100, "{open} connections open");
    assert!(node.metrics.evicted.load(Relaxed) >= 600);
    // idle connections time out after the request timeout
    let t0 = Instant::now();
    while node.metrics.open.load(Relaxed) > 0 {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "idle connections stay open"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(node.metrics.timeouts.load(Relaxed) >= 1);
    drop(flood);
    let req = fetcher_request(port, &job(5), 0, std::slice::from_ref(&map), None);
    assert_eq!(fetch_raw(node.addr(), req.as_bytes()).status, 200);
}

/// The keystores of the TLS tests, made once with the JDK 17 `keytool` (valid for 100 years):
///
/// ```text
/// keytool -genkeypair -alias shuffle -keyalg RSA -keysize 2048 -validity 36500 \
///   -dname "CN=localhost, O=hotpath test" -ext "SAN=dns:localhost,ip:127.0.0.1" \
///   -storetype pkcs12 -keystore shuffle-server.p12 -storepass hotpath-test
/// keytool -importkeystore -srckeystore shuffle-server.p12 -srcstoretype pkcs12 \
///   -srcstorepass hotpath-test -destkeystore shuffle-server.jks -deststoretype jks \
///   -deststorepass hotpath-test -destkeypass hotpath-test
/// keytool -exportcert -alias shuffle -keystore shuffle-server.p12 -storepass hotpath-test \
///   -rfc -file shuffle-server.crt
/// keytool -importcert -noprompt -alias shuffle -file shuffle-server.crt -storetype pkcs12 \
///   -keystore shuffle-trust.p12 -storepass hotpath-test
/// openssl pkcs12 -in shuffle-server.p12 -passin pass:hotpath-test -nodes   # → .pem
/// ```
///
/// The PKCS12 files are what JDK 17 writes: PBES2 (PBKDF2-HmacSHA256, AES-256-CBC), HmacSHA256
/// MAC.
fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/suite/fixtures")
        .join(name)
}

const STOREPASS: &str = "hotpath-test";

fn tls_conf(location: &Path, ty: &str, password: &str) -> conf::Configuration {
    let mut c = conf::Configuration::new();
    c.set("mapreduce.shuffle.ssl.enabled", "true");
    c.set(
        "ssl.server.keystore.location",
        &location.display().to_string(),
    );
    c.set("ssl.server.keystore.password", password);
    c.set("ssl.server.keystore.type", ty);
    c
}

/// A rustls client that trusts the fixture's certificate, as a reducer with
/// `ssl-client.xml`'s truststore would.
fn tls_client(addr: SocketAddr) -> rustls::StreamOwned<rustls::ClientConnection, TcpStream> {
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(
            rustls::pki_types::CertificateDer::from_pem_file(fixture("shuffle-server.crt"))
                .unwrap(),
        )
        .unwrap();
    #[allow(deprecated)] // ring's provider: the one the service uses
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let cfg = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let conn =
        rustls::ClientConnection::new(Arc::new(cfg), "localhost".try_into().unwrap()).unwrap();
    rustls::StreamOwned::new(conn, connect(addr))
}

#[test]
fn over_tls_a_fetch_gets_java_s_answer_from_a_pkcs12_or_pem_keystore() {
    // the operator's way: yarn-site.xml turns it on, ssl-server.xml names the keystore
    // (type jks, Hadoop's default, holding a PKCS12 file: Java 9+ reads that too)
    let confdir = tempfile::tempdir().unwrap();
    std::fs::write(
        confdir.path().join("yarn-site.xml"),
        "<configuration><property><name>mapreduce.shuffle.ssl.enabled</name>\
         <value>true</value></property></configuration>",
    )
    .unwrap();
    std::fs::write(
        confdir.path().join("ssl-server.xml"),
        format!(
            "<configuration>\
             <property><name>ssl.server.keystore.location</name><value>{}</value></property>\
             <property><name>ssl.server.keystore.password</name><value>{STOREPASS}</value></property>\
             <property><name>ssl.server.keystore.keypassword</name><value>{STOREPASS}</value></property>\
             </configuration>",
            fixture("shuffle-server.p12").display()
        ),
    )
    .unwrap();
    let site = conf::Configuration::load_dir(confdir.path()).unwrap();
    let confs = [
        site,
        tls_conf(&fixture("shuffle-server.p12"), "pkcs12", STOREPASS),
        tls_conf(&fixture("shuffle-server.pem"), "pem", ""),
    ];
    for c in confs {
        let cfg = ShuffleConfig::from_conf(&c).unwrap();
        assert!(cfg.tls.is_some());
        let node = Node::start(cfg);
        node.register(1);
        let maps = [attempt(1, 0), attempt(1, 1)];
        for m in &maps {
            write_fixture(&node.locals[0], &node.locals[1], app(1), m);
        }
        let port = node.server.port();
        let req = fetcher_request(port, &job(1), 0, &maps, None);
        let mut s = tls_client(node.addr());
        s.write_all(req.as_bytes()).unwrap();
        let r = read_reply(&mut s);
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
        let hash = url_hash(&SECRET, port, req.split(' ').nth(1).unwrap());
        let mut m = <Hmac<sha1::Sha1> as KeyInit>::new_from_slice(&SECRET).unwrap();
        m.update(hash.as_bytes());
        assert_eq!(
            r.header("ReplyHash"),
            Some(STANDARD.encode(m.finalize().into_bytes()).as_str())
        );
        assert_eq!(r.header("name"), Some("mapreduce"));
        let mut want = Vec::new();
        for map in &maps {
            want.extend(shuffle_header(map, 12, 8, 0));
            want.extend_from_slice(&PART0);
        }
        assert_eq!(r.body, want);
        // then the server's close_notify: a clean end of the session
        let mut rest = Vec::new();
        s.read_to_end(&mut rest).unwrap();
        assert!(rest.is_empty());
        // a large segment crosses many records and pieces
        let big = attempt(1, 7);
        let d = output_dir(&node.locals[1], app(1), &big);
        std::fs::create_dir_all(&d).unwrap();
        let part: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(d.join("file.out"), &part).unwrap();
        let len = part.len() as i64;
        std::fs::write(d.join("file.out.index"), index_bytes(&[(0, len - 4, len)])).unwrap();
        let mut s = tls_client(node.addr());
        s.write_all(fetcher_request(port, &job(1), 0, std::slice::from_ref(&big), None).as_bytes())
            .unwrap();
        let r = read_reply(&mut s);
        assert_eq!(r.status, 200);
        let skip = r.body.len() - part.len();
        assert!(r.body[..skip].starts_with(&[big.len() as u8]));
        assert!(r.body[skip..] == part[..], "the large segment differs");
        // plain HTTP on the TLS port gets no HTTP answer, only a closed connection
        let mut p = connect(node.addr());
        p.write_all(req.as_bytes()).unwrap();
        let mut got = Vec::new();
        let _ = p.read_to_end(&mut got);
        assert!(!got.starts_with(b"HTTP/"), "{got:?}");
    }
}

#[test]
fn a_keystore_the_service_cannot_use_stops_it_at_start() {
    let refused = |c: conf::Configuration| ShuffleConfig::from_conf(&c).unwrap_err().to_string();
    // JKS: named, with the keytool command that converts it
    let e = refused(tls_conf(&fixture("shuffle-server.jks"), "jks", STOREPASS));
    assert!(
        e.contains("is a JKS keystore") && e.contains("keytool -importkeystore"),
        "{e}"
    );
    // a wrong password
    let e = refused(tls_conf(&fixture("shuffle-server.p12"), "pkcs12", "wrong"));
    assert!(e.contains("password"), "{e}");
    // a missing file, an unknown type, no location at all
    let e = refused(tls_conf(
        Path::new("/nonexistent/ks.p12"),
        "pkcs12",
        STOREPASS,
    ));
    assert!(e.contains("/nonexistent/ks.p12"), "{e}");
    let e = refused(tls_conf(&fixture("shuffle-server.p12"), "bks", STOREPASS));
    assert!(e.contains("ssl.server.keystore.type = bks"), "{e}");
    let mut c = conf::Configuration::new();
    c.set("mapreduce.shuffle.ssl.enabled", "true");
    let e = refused(c);
    assert!(e.contains("ssl.server.keystore.location is not set"), "{e}");
    // a truststore holds no key
    let e = refused(tls_conf(&fixture("shuffle-trust.p12"), "pkcs12", STOREPASS));
    assert!(e.contains("no private key"), "{e}");
    // client certificates and protocols it does not serve
    let mut c = tls_conf(&fixture("shuffle-server.p12"), "pkcs12", STOREPASS);
    c.set("hadoop.ssl.require.client.cert", "true");
    assert!(refused(c).contains("hadoop.ssl.require.client.cert"));
    let mut c = tls_conf(&fixture("shuffle-server.p12"), "pkcs12", STOREPASS);
    c.set("hadoop.ssl.enabled.protocols", "TLSv1,TLSv1.1");
    assert!(refused(c).contains("hadoop.ssl.enabled.protocols"));
}
