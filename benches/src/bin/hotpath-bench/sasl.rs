//! `hotpath-bench sasl`: what SASL (TOKEN auth, DIGEST-MD5) costs at each protection level,
//! each figure beside its baseline measured in the same run.
//!
//! One run has three sections (`--sections`, all by default):
//!
//! - **connect**: connection setup, preamble to first call answered, at `authentication`,
//!   `integrity` and `privacy`, against the **same Java server** for both clients: the `sasl`
//!   peer's ContainerManagementProtocol server for that protection, with an NMToken minted by
//!   Hadoop (`mint-nm-token`) for that server's address. *Ours*: a fresh
//!   [`ipc::client::Client`] per connect (new TCP connection, SASL with the minted identifier
//!   and password as a [`TokenCredential`], connection context, one `getContainerStatuses`),
//!   timed from `Client::new` to the answer (the drop that closes it is outside the time, inside
//!   the CPU window). *Java*: the peer's `bench-connect` (UGI creation to the answer, Hadoop's
//!   own client). `--rounds` rounds of `--connects / --rounds` connects per client alternate
//!   which client goes first, after an unmeasured warm-up of both; the figures are the mean of
//!   the rounds' means and the median of the rounds' p50 and p99, for both clients alike. CPU:
//!   ours is this process (client only) plus the JVM's CPU over the same window from
//!   `/proc/<jvm>/stat` (the Java server, and whatever else the JVM does; 10 ms ticks); Java's
//!   is `process_cpu_us_per_iter`, the whole JVM (its client and the same server).
//! - **wrap**: the `privacy` (and `integrity`) layer alone, wrap + unwrap of one message: our
//!   `DigestLayer`s from a DIGEST-MD5 exchange run in memory ([`DigestClient`] ↔
//!   [`DigestServer`], client wraps, server unwraps) beside the JDK's (`bench-wrap`, the same in
//!   one JVM), for `auth-int`, `auth-conf` with `3des` and with `rc4`, at each `--wrap-sizes`.
//!   MB/s = 10^6 bytes of plaintext per second of wrap + unwrap time, as the peer computes it.
//!   Ours runs in `--rounds` slices, before and after the JDK's run; the median slice is
//!   reported.
//! - **calls**: calls/s and CPU per call over ONE connection at each level against OUR
//!   [`ipc::server::Server`] (one ring thread; `--backend`, io_uring when available), calls
//!   pipelined by one [`Client`]: `echo` of `--echo-bytes` (`--inflight` in flight) and
//!   `getBuffer` of `--buffer-bytes` (`--buffer-inflight`). Each is checked (echo bytes equal,
//!   getBuffer length; every byte of one getBuffer per level before timing). SIMPLE (no SASL) is
//!   the baseline row. CPU is `getrusage(RUSAGE_SELF)`:
//!   client (calling thread and reader thread) **and** server, all in this process. The levels
//!   are interleaved over `--rounds`; rates are pooled over the rounds. After the timings,
//!   allocations per call are counted (the counting allocator): on the calling thread, on the
//!   client's reader thread and on the server's ring thread (whose one `getBuffer` allocation
//!   is the bench protocol's boxed body source). The server's token secrets check
//!   an HMAC-SHA1 password over the identifier, as the NodeManager's do.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, ensure, Context, Result};
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use hadoop_wire::entropy::SeededEntropy;
use hadoop_wire::sasl::client::{ClientAuth, TokenCredential};
use hadoop_wire::sasl::digest::{
    DigestCipher, DigestClient, DigestClientConfig, DigestServer, DigestServerConfig,
};
use hadoop_wire::sasl::message::AuthMethod;
use hadoop_wire::sasl::server::{ServerAuth, TokenPassword, TokenSecrets};
use hadoop_wire::sasl::{ClientMechanism, Qop, SaslError, SecurityLayer, ServerMechanism};
use hadoop_wire::writer::{Sink, Writer};
use hadoop_wire::yarn::ids::ContainerId;
use ipc::buffer_protocol as bench;
use ipc::client::{Client, ClientConfig, PendingCall, Response};
use ipc::server::{Registry, Server, ServerConfig};
use peer_harness::{Mode, Peer};
use serde_json::{json, Value};

use crate::ipc_large::{self_cpu_us, BackendArg};

/// Flags of `hotpath-bench sasl`.
#[derive(clap::Args, Debug, Clone)]
pub struct SaslArgs {
    /// Timed seconds per throughput figure: each wrap cell (ours, and the JDK's after its own
    /// 1 s warm-up) and each calls cell (split over the rounds).
    #[arg(long, default_value_t = 2.0)]
    pub seconds: f64,
    /// Rounds the figures are interleaved over (see the module docs).
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
    /// Measured connects per client per protection level (split over the rounds; Java's CPU
    /// figure needs ≥ 100 per round for its 10 ms ticks).
    #[arg(long, default_value_t = 300)]
    pub connects: usize,
    /// Message sizes of the wrap section, bytes.
    #[arg(long, value_delimiter = ',', default_value = "65536,1024")]
    pub wrap_sizes: Vec<usize>,
    /// `echo` calls in flight on the one connection of the calls section.
    #[arg(long, default_value_t = 32)]
    pub inflight: usize,
    /// `getBuffer` calls in flight (fewer: at `privacy` one 1 MiB call takes ~0.1 s of 3DES,
    /// and a slice ends by draining what is in flight).
    #[arg(long, default_value_t = 4)]
    pub buffer_inflight: usize,
    /// Payload of the `echo` calls, bytes.
    #[arg(long, default_value_t = 100)]
    pub echo_bytes: usize,
    /// Response size of the `getBuffer` calls, bytes.
    #[arg(long, default_value_t = 1 << 20)]
    pub buffer_bytes: u64,
    /// Backend of our server in the calls section.
    #[arg(long, value_enum, default_value = "auto")]
    pub backend: BackendArg,
    /// Sections to run, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "connect,wrap,calls")]
    pub sections: Vec<Section>,
    /// Print one JSON object instead of the tables.
    #[arg(long)]
    pub json: bool,
}

/// The three sections.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Section {
    Connect,
    Wrap,
    Calls,
}

/// The NMToken master key of the peer's NodeManager secret managers (and of our server's
/// token secrets): key id and raw bytes.
const NM_KEY_ID: &str = "1";
const NM_KEY: [u8; 8] = *b"hp-bench";
/// The application attempt the minted NMTokens are for (the connection's user).
const ATTEMPT: &str = "appattempt_1_0001_000001";
/// Java's ContainerManagementProtocolPB as the peer serves it.
const CMP_PROTOCOL: &str = "org.apache.hadoop.yarn.api.ContainerManagementProtocolPB";
const CMP_VERSION: u64 = 1;
const GET_CONTAINER_STATUSES: &str = "getContainerStatuses";
const CONTAINER: &str = "container_1_0001_01_000001";
const LEVELS: [Qop; 3] = [Qop::Auth, Qop::AuthInt, Qop::AuthConf];

pub fn run(args: SaslArgs) -> Result<()> {
    ensure!(args.seconds > 0.0, "--seconds must be positive");
    let rounds = args.rounds.max(1);
    let want = |s| args.sections.contains(&s);
    let mut out = serde_json::Map::new();
    out.insert("bench".into(), json!("sasl"));
    out.insert(
        "settings".into(),
        json!({
            "cpus": std::thread::available_parallelism().map_or(0, |n| n.get()),
            "seconds": args.seconds,
            "rounds": rounds,
            "connects": args.connects,
            "wrap_sizes": args.wrap_sizes,
            "inflight": args.inflight,
            "buffer_inflight": args.buffer_inflight,
            "echo_bytes": args.echo_bytes,
            "buffer_bytes": args.buffer_bytes,
        }),
    );

    let mut peer = if want(Section::Connect) || want(Section::Wrap) {
        eprintln!("sasl: starting the Java peer (mode sasl) ...");
        let key_hex: String = NM_KEY.iter().map(|b| format!("{b:02x}")).collect();
        let peer = Peer::start(
            Mode::Sasl,
            &["--nm-key-id", NM_KEY_ID, "--nm-key", &key_hex],
        )
        .context("starting the Java sasl peer")?;
        eprintln!(
            "sasl: peer ready in {:.1} s",
            peer.startup_time().as_secs_f64()
        );
        Some(peer)
    } else {
        None
    };

    if want(Section::Connect) {
        let peer = peer.as_mut().ok_or_else(|| anyhow!("no peer"))?;
        let rows = connect_section(peer, &args, rounds)?;
        out.insert("connect".into(), Value::Array(rows));
    }
    if want(Section::Wrap) {
        let peer = peer.as_mut().ok_or_else(|| anyhow!("no peer"))?;
        let rows = wrap_section(peer, &args, rounds)?;
        out.insert("wrap".into(), Value::Array(rows));
    }
    // the JVM would only add noise to the calls section
    drop(peer);
    if want(Section::Calls) {
        let (backend, rows) = calls_section(&args, rounds)?;
        out.insert("backend".into(), json!(backend));
        out.insert("calls".into(), Value::Array(rows));
    }

    let v = Value::Object(out);
    if args.json {
        println!("{v}");
    } else {
        print_tables(&v);
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Statistics

/// Mean, p50 and p99 of one round's samples (µs).
#[derive(Debug, Clone, Copy)]
struct Lat {
    mean: f64,
    p50: f64,
    p99: f64,
}

fn lat_of(samples: &mut [f64]) -> Lat {
    samples.sort_by(f64::total_cmp);
    let n = samples.len().max(1);
    let q = |p: f64| samples[((n as f64 * p).ceil() as usize).clamp(1, n) - 1];
    Lat {
        mean: samples.iter().sum::<f64>() / n as f64,
        p50: q(0.50),
        p99: q(0.99),
    }
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        return f64::NAN;
    }
    v[v.len() / 2]
}

/// The rounds combined: mean of the means, median of the p50s and of the p99s.
fn combine(rounds: &[Lat]) -> Lat {
    let n = rounds.len().max(1) as f64;
    Lat {
        mean: rounds.iter().map(|r| r.mean).sum::<f64>() / n,
        p50: median(&mut rounds.iter().map(|r| r.p50).collect::<Vec<_>>()),
        p99: median(&mut rounds.iter().map(|r| r.p99).collect::<Vec<_>>()),
    }
}

fn lat_json(l: Lat) -> Value {
    json!({ "mean_us": round1(l.mean), "p50_us": round1(l.p50), "p99_us": round1(l.p99) })
}

fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// User + system CPU of another process, µs (from `/proc/<pid>/stat`, clock ticks).
fn process_cpu_us(pid: u32) -> Result<u64> {
    let path = format!("/proc/{pid}/stat");
    let s = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
    // the fields after the command name (which may hold spaces): state is field 3
    let rest = s
        .rsplit_once(')')
        .map(|(_, r)| r)
        .ok_or_else(|| anyhow!("unexpected {path}: {s}"))?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let tick = |i: usize| -> Result<u64> {
        f.get(i)
            .and_then(|v| v.parse::<u64>().ok())
            .ok_or_else(|| anyhow!("field {} missing in {path}", i + 3))
    };
    let ticks = tick(11)? + tick(12)?; // utime (14), stime (15)
                                       // SAFETY: sysconf only reads a configuration value.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    let hz = if hz > 0 { hz as u64 } else { 100 };
    Ok(ticks * 1_000_000 / hz)
}

fn f64_field(v: &Value, k: &str) -> Result<f64> {
    v.get(k)
        .and_then(Value::as_f64)
        .ok_or_else(|| anyhow!("{k} missing in the peer's reply {v}"))
}

// ---------------------------------------------------------------------------------------------
// Section 1: connection setup, ours vs Java's client, against the same Java server

/// The `getContainerStatuses` request for one container id, hand-encoded:
/// `GetContainerStatusesRequestProto { repeated ContainerIdProto container_id = 1; }`.
fn container_statuses_request() -> Result<Vec<u8>> {
    let id = ContainerId::parse(CONTAINER).ok_or_else(|| anyhow!("bad id {CONTAINER}"))?;
    let mut buf = Vec::new();
    Writer::new(&mut buf).message(1, &id);
    Ok(buf)
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// One connect of ours: a fresh client, one call; returns the time to the answer (µs).
fn our_connect(addr: SocketAddr, cfg: &ClientConfig, req: &[u8]) -> Result<f64> {
    let cfg = cfg.clone();
    let t0 = Instant::now();
    let c = Client::new(addr, cfg);
    let r = c
        .call(GET_CONTAINER_STATUSES, req)
        .with_context(|| format!("our getContainerStatuses to {addr}"))?;
    let us = t0.elapsed().as_secs_f64() * 1e6;
    // the peer answers every id as a failed request naming the caller's auth method
    ensure!(
        contains(r.payload(), b"auth=TOKEN ids=1"),
        "unexpected answer from {addr}: {:?}",
        String::from_utf8_lossy(r.payload())
    );
    drop(r);
    drop(c);
    Ok(us)
}

fn connect_section(peer: &mut Peer, args: &SaslArgs, rounds: usize) -> Result<Vec<Value>> {
    let dir = tempfile::tempdir().context("a temp dir for the token files")?;
    let req = container_statuses_request()?;
    let per_round = (args.connects / rounds).max(1);
    let jvm = peer.pid();
    let mut rows = Vec::new();
    for qop in LEVELS {
        let protection = qop.protection_name();
        let addr = peer.sasl_server(protection)?;
        let file = dir.path().join(format!("{protection}.tok"));
        let minted = peer.command(&format!(
            "mint-nm-token {addr} {ATTEMPT} alice {}",
            file.display()
        ))?;
        let b64 = |k: &str| -> Result<Vec<u8>> {
            let s = minted
                .get(k)
                .and_then(Value::as_str)
                .ok_or_else(|| anyhow!("{k} missing in {minted}"))?;
            B64.decode(s).with_context(|| format!("{k} is not base64"))
        };
        let token = TokenCredential {
            identifier: b64("identifier")?,
            password: b64("password")?,
        };
        let cfg = ClientConfig {
            protocol: CMP_PROTOCOL.into(),
            protocol_version: CMP_VERSION,
            user: "alice".into(),
            call_timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(20),
            max_connect_attempts: 1,
            reader_thread_name: "hpb-conn".into(),
            auth: ClientAuth::token(token, vec![qop]),
            ..ClientConfig::default()
        };
        let java_cmd =
            |n: usize| format!("bench-connect {addr} {} {protection} {n}", file.display());

        eprintln!("sasl: connect {protection}: warm-up ...");
        for _ in 0..30 {
            our_connect(addr, &cfg, &req)?;
        }
        peer.command(&java_cmd(30))?;

        let (mut ours, mut java) = (Vec::new(), Vec::new());
        let (mut our_cpu, mut jvm_cpu, mut our_n) = (0u64, 0u64, 0usize);
        let (mut java_cpu, mut java_caller_cpu) = (Vec::new(), Vec::new());
        for round in 0..rounds {
            for java_turn in [round % 2 == 1, round % 2 == 0] {
                if java_turn {
                    let r = peer.command(&java_cmd(per_round))?;
                    java.push(Lat {
                        mean: f64_field(&r, "mean_us")?,
                        p50: f64_field(&r, "p50_us")?,
                        p99: f64_field(&r, "p99_us")?,
                    });
                    java_cpu.push(f64_field(&r, "process_cpu_us_per_iter")?);
                    java_caller_cpu.push(f64_field(&r, "caller_thread_cpu_us_per_iter")?);
                } else {
                    let mut samples = Vec::with_capacity(per_round);
                    let (c0, j0) = (self_cpu_us(), process_cpu_us(jvm)?);
                    for _ in 0..per_round {
                        samples.push(our_connect(addr, &cfg, &req)?);
                    }
                    our_cpu += self_cpu_us() - c0;
                    jvm_cpu += process_cpu_us(jvm)? - j0;
                    our_n += per_round;
                    ours.push(lat_of(&mut samples));
                }
            }
        }
        let (o, j) = (combine(&ours), combine(&java));
        let our_cpu = our_cpu as f64 / our_n as f64;
        let jvm_cpu = jvm_cpu as f64 / our_n as f64;
        let java_total = java_cpu.iter().sum::<f64>() / java_cpu.len() as f64;
        let java_caller = java_caller_cpu.iter().sum::<f64>() / java_caller_cpu.len() as f64;
        rows.push(json!({
            "protection": protection,
            "qop": qop.sasl_name(),
            "server": addr.to_string(),
            "connects_per_client": per_round * rounds,
            "ours": {
                "latency": lat_json(o),
                "client_cpu_us_per_connect": round1(our_cpu),
                "jvm_cpu_us_per_connect": round1(jvm_cpu),
                "total_cpu_us_per_connect": round1(our_cpu + jvm_cpu),
            },
            "java": {
                "latency": lat_json(j),
                "caller_thread_cpu_us_per_connect": round1(java_caller),
                "total_cpu_us_per_connect": round1(java_total),
            },
            "ratio_java_over_ours": {
                "mean": round3(j.mean / o.mean),
                "p50": round3(j.p50 / o.p50),
                "p99": round3(j.p99 / o.p99),
                "total_cpu": round3(java_total / (our_cpu + jvm_cpu)),
            },
        }));
    }
    Ok(rows)
}

// ---------------------------------------------------------------------------------------------
// Section 2: the security layer alone, ours vs the JDK's

/// Both layers of a DIGEST-MD5 exchange run in memory: (client's, server's).
fn negotiated_layers(
    qop: Qop,
    cipher: Option<DigestCipher>,
) -> Result<(Box<dyn SecurityLayer>, Box<dyn SecurityLayer>)> {
    const USER: &str = "YmVuY2gtaWRlbnRpZmllcg==";
    const PASSWORD: &str = "YmVuY2gtcGFzc3dvcmQ=";
    let mut rng = SeededEntropy(0x5eed_5a51);
    let mut server = DigestServer::new(
        DigestServerConfig::ipc(vec![qop]),
        &mut rng,
        Box::new(|_user: &str, _realm: &str| Ok(PASSWORD.to_owned())),
    )?;
    let mut ccfg = DigestClientConfig::ipc(USER.into(), PASSWORD.into(), vec![qop]);
    ccfg.cipher = cipher;
    let mut client = DigestClient::new(ccfg, &mut rng)?;
    let challenge = server.evaluate_response(&[])?;
    let response = client.evaluate_challenge(&challenge)?;
    let rspauth = server.evaluate_response(&response)?;
    let last = client.evaluate_challenge(&rspauth)?;
    ensure!(
        last.is_empty() && client.is_complete() && server.is_complete(),
        "the in-memory DIGEST-MD5 exchange did not complete"
    );
    ensure!(
        client.negotiated_qop() == Some(qop) && client.negotiated_cipher() == cipher,
        "negotiated {:?}/{:?}, wanted {qop:?}/{cipher:?}",
        client.negotiated_qop(),
        client.negotiated_cipher()
    );
    let c = client
        .take_layer()
        .ok_or_else(|| anyhow!("no client layer"))?;
    let s = server
        .take_layer()
        .ok_or_else(|| anyhow!("no server layer"))?;
    Ok((c, s))
}

/// One slice of our wrap + unwrap loop.
#[derive(Debug, Clone, Copy, Default)]
struct WrapSlice {
    iterations: u64,
    wrap_ns: f64,
    unwrap_ns: f64,
    mb_per_s: f64,
}

struct WrapLoop {
    client: Box<dyn SecurityLayer>,
    server: Box<dyn SecurityLayer>,
    msg: Vec<u8>,
    wrapped: Vec<u8>,
    plain: Vec<u8>,
}

impl WrapLoop {
    fn new(qop: Qop, cipher: Option<DigestCipher>, bytes: usize) -> Result<WrapLoop> {
        let (client, server) = negotiated_layers(qop, cipher)?;
        let msg: Vec<u8> = (0..bytes).map(|i| (i * 31 + 7) as u8).collect();
        Ok(WrapLoop {
            client,
            server,
            wrapped: Vec::with_capacity(bytes + 64),
            plain: Vec::with_capacity(bytes),
            msg,
        })
    }

    fn once(&mut self) -> Result<(), SaslError> {
        self.wrapped.clear();
        self.plain.clear();
        self.client.wrap(&self.msg, &mut self.wrapped)?;
        self.server.unwrap(&self.wrapped, &mut self.plain)
    }

    fn check(&self) -> Result<()> {
        ensure!(self.plain == self.msg, "unwrap did not return the message");
        Ok(())
    }

    /// Wrap + unwrap for `dur`, each step timed on its own.
    fn slice(&mut self, dur: Duration) -> Result<WrapSlice> {
        let (mut wrap, mut unwrap, mut n) = (Duration::ZERO, Duration::ZERO, 0u64);
        let start = Instant::now();
        while start.elapsed() < dur {
            self.wrapped.clear();
            self.plain.clear();
            let t0 = Instant::now();
            self.client.wrap(&self.msg, &mut self.wrapped)?;
            let t1 = Instant::now();
            self.server.unwrap(&self.wrapped, &mut self.plain)?;
            let t2 = Instant::now();
            wrap += t1 - t0;
            unwrap += t2 - t1;
            n += 1;
        }
        self.check()?;
        let n_f = n.max(1) as f64;
        Ok(WrapSlice {
            iterations: n,
            wrap_ns: wrap.as_nanos() as f64 / n_f,
            unwrap_ns: unwrap.as_nanos() as f64 / n_f,
            mb_per_s: (self.msg.len() as f64 * n as f64) / (wrap + unwrap).as_secs_f64() / 1e6,
        })
    }
}

fn wrap_section(peer: &mut Peer, args: &SaslArgs, rounds: usize) -> Result<Vec<Value>> {
    let cells = [
        (Qop::AuthInt, None),
        (Qop::AuthConf, Some(DigestCipher::TripleDes)),
        (Qop::AuthConf, Some(DigestCipher::Rc4)),
    ];
    let slice = Duration::from_secs_f64(args.seconds / rounds as f64);
    let mut rows = Vec::new();
    for &bytes in &args.wrap_sizes {
        ensure!(bytes > 0, "--wrap-sizes: sizes must be positive");
        for (qop, cipher) in cells {
            let cname = cipher.map_or("-", DigestCipher::token);
            eprintln!("sasl: wrap {} {cname} {bytes} B ...", qop.sasl_name());
            let mut l = WrapLoop::new(qop, cipher, bytes)?;
            // warm-up, a correctness check, and the allocation count (after warm-up)
            l.slice(Duration::from_millis(200))?;
            let (r, allocs) = alloc_counter::thread(|| {
                for _ in 0..100 {
                    l.once()?;
                }
                Ok::<_, SaslError>(())
            });
            r?;
            l.check()?;
            let wrapped_bytes = l.wrapped.len();
            // ours before and after the JDK's run, in `rounds` slices
            let mut slices = Vec::new();
            let before = rounds.div_ceil(2);
            for _ in 0..before {
                slices.push(l.slice(slice)?);
            }
            let jdk = peer.command(&format!(
                "bench-wrap {} {cname} {bytes} {}",
                qop.sasl_name(),
                args.seconds
            ))?;
            for _ in before..rounds {
                slices.push(l.slice(slice)?);
            }
            if let Some(c) = cipher {
                ensure!(
                    jdk.get("cipher").and_then(Value::as_str) == Some(c.token()),
                    "the JDK ran another cipher: {jdk}"
                );
            }
            // the same bytes on the wire as the JDK's layer
            ensure!(
                jdk.get("wrapped_bytes").and_then(Value::as_u64) == Some(wrapped_bytes as u64),
                "our wrapped message has {wrapped_bytes} bytes, the JDK's: {jdk}"
            );
            slices.sort_by(|a, b| a.mb_per_s.total_cmp(&b.mb_per_s));
            let ours = slices[slices.len() / 2];
            let iterations: u64 = slices.iter().map(|s| s.iterations).sum();
            let jdk_mb = f64_field(&jdk, "mb_per_s")?;
            rows.push(json!({
                "qop": qop.sasl_name(),
                "cipher": cipher.map(DigestCipher::token),
                "bytes": bytes,
                "ours": {
                    "mb_per_s": round1(ours.mb_per_s),
                    "wrap_ns": ours.wrap_ns.round(),
                    "unwrap_ns": ours.unwrap_ns.round(),
                    "iterations": iterations,
                    "wrapped_bytes": wrapped_bytes,
                    "allocs_per_wrap_unwrap": allocs.allocs as f64 / 100.0,
                },
                "jdk": {
                    "mb_per_s": round1(jdk_mb),
                    "wrap_ns": f64_field(&jdk, "wrap_ns")?.round(),
                    "unwrap_ns": f64_field(&jdk, "unwrap_ns")?.round(),
                    "iterations": jdk.get("iterations").cloned().unwrap_or(Value::Null),
                },
                "ratio_ours_over_jdk": round3(ours.mb_per_s / jdk_mb),
            }));
        }
    }
    Ok(rows)
}

// ---------------------------------------------------------------------------------------------
// Section 3: calls over one connection to our own server

/// The user our server's token stands for, and the start of its identifier.
const BENCH_USER: &str = "appattempt_1_0001_000001";

fn hmac_sha1(key: &[u8], data: &[u8]) -> Result<Vec<u8>, SaslError> {
    use hmac::{Hmac, KeyInit, Mac};
    let mut m = <Hmac<sha1::Sha1> as KeyInit>::new_from_slice(key)
        .map_err(|e| SaslError::Config(format!("HMAC key: {e}")))?;
    m.update(data);
    Ok(m.finalize().into_bytes().to_vec())
}

/// Token secrets as the NodeManager's check them: the password is HmacSHA1(master key,
/// identifier); identifiers are `BENCH_USER` followed by anything.
struct BenchSecrets;

impl TokenSecrets for BenchSecrets {
    fn retrieve(&self, identifier: &[u8]) -> Result<TokenPassword, SaslError> {
        if !identifier.starts_with(BENCH_USER.as_bytes()) {
            return Err(SaslError::InvalidToken(
                "Given NMToken seems to have been generated illegally.".into(),
            ));
        }
        Ok(TokenPassword {
            password: hmac_sha1(&NM_KEY, identifier)?,
            user: BENCH_USER.into(),
        })
    }
}

/// A level of the calls section: SIMPLE or TOKEN at a QOP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Level {
    Simple,
    Token(Qop),
}

impl Level {
    fn name(self) -> &'static str {
        match self {
            Level::Simple => "simple",
            Level::Token(q) => q.protection_name(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Workload {
    Echo,
    GetBuffer,
}

/// Pooled figures of one (level, workload) cell.
#[derive(Debug, Clone, Copy, Default)]
struct CallTotals {
    calls: u64,
    wall: Duration,
    cpu_us: u64,
}

/// One connection to one server, ready to measure.
struct CallRig {
    level: Level,
    server: Server,
    client: Client,
    echo: Vec<u8>,
    get_buffer: Vec<u8>,
    buffer_bytes: u64,
    echo_inflight: usize,
    buffer_inflight: usize,
}

impl CallRig {
    fn start(level: Level, args: &SaslArgs) -> Result<CallRig> {
        let mut reg = Registry::new();
        bench::register(&mut reg, args.buffer_bytes.max(1 << 20));
        let mut cfg = ServerConfig::default();
        cfg.transport.backend = args.backend.choice();
        cfg.transport.threads = 1;
        let mut client_cfg = ClientConfig {
            protocol: bench::PROTOCOL.into(),
            protocol_version: bench::VERSION,
            user: "alice".into(),
            call_timeout: Duration::from_secs(60),
            max_connect_attempts: 1,
            call_slots: args.inflight.max(args.buffer_inflight).max(1) + 2,
            recycled_buffers: args.inflight.max(args.buffer_inflight).max(1) + 2,
            reader_thread_name: READER_NAME.into(),
            ..ClientConfig::default()
        };
        if let Level::Token(qop) = level {
            cfg.auth = Arc::new(ServerAuth::new(
                AuthMethod::Token,
                Some(Arc::new(BenchSecrets)),
                vec![qop],
            )?);
            let identifier = format!("{BENCH_USER}@hotpath-bench").into_bytes();
            let token = TokenCredential {
                password: hmac_sha1(&NM_KEY, &identifier)?,
                identifier,
            };
            client_cfg.auth = ClientAuth::token(token, vec![qop]);
        }
        let server = Server::start("127.0.0.1:0".parse()?, cfg, reg)
            .with_context(|| format!("starting our server ({})", level.name()))?;
        let client = Client::new(server.local_addr(), client_cfg);
        client.connect_now()?;
        let echo: Vec<u8> = (0..args.echo_bytes).map(|i| (i * 13 + 1) as u8).collect();
        let mut get_buffer = Vec::new();
        bench::encode_request(args.buffer_bytes, &mut get_buffer);
        let rig = CallRig {
            level,
            server,
            client,
            echo,
            get_buffer,
            buffer_bytes: args.buffer_bytes,
            echo_inflight: args.inflight.max(1),
            buffer_inflight: args.buffer_inflight.max(1),
        };
        // every byte checked once, then the auth the server saw
        let r = rig.client.call(bench::GET_BUFFER, &rig.get_buffer)?;
        let data = bench::response_data(r.payload())?;
        ensure!(
            data.len() as u64 == args.buffer_bytes && bench::is_pattern(data),
            "{}: getBuffer returned wrong bytes",
            level.name()
        );
        drop(r);
        let m = rig.server.metrics();
        let want = u64::from(level != Level::Simple);
        ensure!(
            m.auth_successes == want && m.auth_failures == 0,
            "{}: server auth counters {m:?}",
            level.name()
        );
        Ok(rig)
    }

    fn inflight(&self, w: Workload) -> usize {
        match w {
            Workload::Echo => self.echo_inflight,
            Workload::GetBuffer => self.buffer_inflight,
        }
    }

    fn start_call(&self, w: Workload) -> Result<PendingCall> {
        let (method, req) = match w {
            Workload::Echo => (bench::ECHO, &self.echo),
            Workload::GetBuffer => (bench::GET_BUFFER, &self.get_buffer),
        };
        Ok(self.client.start_call(
            bench::PROTOCOL,
            bench::VERSION,
            method,
            req,
            Duration::from_secs(60),
        )?)
    }

    fn check(&self, w: Workload, r: &Response) -> Result<()> {
        let ok = match w {
            Workload::Echo => r.payload() == self.echo.as_slice(),
            Workload::GetBuffer => {
                bench::response_data(r.payload())?.len() as u64 == self.buffer_bytes
            }
        };
        ensure!(ok, "{}: {w:?} returned a wrong answer", self.level.name());
        Ok(())
    }

    /// Keeps `inflight` calls going: `count` calls, or for `dur` (then drains). Returns the
    /// calls completed.
    fn pipelined(&self, w: Workload, count: Option<u64>, dur: Duration) -> Result<u64> {
        let inflight = self.inflight(w);
        let mut q: VecDeque<PendingCall> = VecDeque::with_capacity(inflight);
        let (mut sent, mut done) = (0u64, 0u64);
        let start = Instant::now();
        let mut stop = false;
        loop {
            while !stop && q.len() < inflight {
                if count.is_some_and(|c| sent >= c) {
                    stop = true;
                    break;
                }
                q.push_back(self.start_call(w)?);
                sent += 1;
            }
            let Some(p) = q.pop_front() else {
                break;
            };
            let r = p.wait()?;
            self.check(w, &r)?;
            done += 1;
            if count.is_none() && !stop && start.elapsed() >= dur {
                stop = true;
            }
        }
        Ok(done)
    }

    fn timed(&self, w: Workload, dur: Duration) -> Result<CallTotals> {
        let c0 = self_cpu_us();
        let t0 = Instant::now();
        let calls = self.pipelined(w, None, dur)?;
        Ok(CallTotals {
            calls,
            wall: t0.elapsed(),
            cpu_us: self_cpu_us() - c0,
        })
    }
}

/// The calls section's client reader thread name, and the server's ring thread prefix (the
/// transport's default for unpinned rings), for the allocation filters.
const READER_NAME: &str = "hpb-reader";
const RING_PREFIX: &[u8] = b"hp-ring";

/// Which thread this is, for the process-wide allocation filter: cached per thread once it
/// has a name (0 unknown, 1 our reader, 2 a server ring, 3 anything else). Allocation-free.
fn thread_class() -> u8 {
    use std::cell::Cell;
    thread_local! {
        static CLASS: Cell<u8> = const { Cell::new(0) };
    }
    CLASS.with(|c| {
        if c.get() == 0 {
            let mut name = [0u8; 16];
            // SAFETY: a 16-byte buffer for a name Linux caps at 16 bytes including the NUL.
            let ok = unsafe {
                libc::pthread_getname_np(libc::pthread_self(), name.as_mut_ptr().cast(), 16)
            } == 0;
            if ok && name[0] != 0 {
                let len = name.iter().position(|&b| b == 0).unwrap_or(16);
                let n = &name[..len];
                c.set(if n == READER_NAME.as_bytes() {
                    1
                } else if n.starts_with(RING_PREFIX) {
                    2
                } else {
                    3
                });
            }
        }
        c.get()
    })
}

fn on_reader() -> bool {
    thread_class() == 1
}

fn on_ring() -> bool {
    thread_class() == 2
}

/// Allocations per call: (calling thread, reader thread, server ring thread).
fn allocs_per_call(rig: &CallRig, w: Workload, n: u64) -> Result<(f64, f64, f64)> {
    alloc_counter::set_process_filter(Some(on_reader));
    let ((r, caller), reader) = alloc_counter::process(|| {
        alloc_counter::thread(|| rig.pipelined(w, Some(n), Duration::MAX))
    });
    r?;
    alloc_counter::set_process_filter(Some(on_ring));
    let (r, ring) = alloc_counter::process(|| rig.pipelined(w, Some(n), Duration::MAX));
    alloc_counter::set_process_filter(None);
    r?;
    let per = |c: alloc_counter::Counts| c.allocs as f64 / n as f64;
    Ok((per(caller), per(reader), per(ring)))
}

fn calls_section(args: &SaslArgs, rounds: usize) -> Result<(String, Vec<Value>)> {
    let levels = [
        Level::Simple,
        Level::Token(Qop::Auth),
        Level::Token(Qop::AuthInt),
        Level::Token(Qop::AuthConf),
    ];
    let workloads = [Workload::Echo, Workload::GetBuffer];
    eprintln!("sasl: calls: starting our servers ...");
    let rigs: Vec<CallRig> = levels
        .iter()
        .map(|&l| CallRig::start(l, args))
        .collect::<Result<_>>()?;
    let backend = rigs[0].server.backend().name().to_string();
    let slice = Duration::from_secs_f64(args.seconds / rounds as f64);
    let mut totals = vec![[CallTotals::default(); 2]; rigs.len()];
    for round in 0..rounds {
        eprintln!("sasl: calls round {} ...", round + 1);
        // alternate the order of the levels from round to round
        let order: Vec<usize> = if round % 2 == 0 {
            (0..rigs.len()).collect()
        } else {
            (0..rigs.len()).rev().collect()
        };
        for &i in &order {
            for (k, &w) in workloads.iter().enumerate() {
                let rig = &rigs[i];
                // a short unmeasured burst, so each slice starts in a steady state
                rig.pipelined(w, Some(rig.inflight(w) as u64), Duration::MAX)?;
                let t = rig.timed(w, slice)?;
                let acc = &mut totals[i][k];
                acc.calls += t.calls;
                acc.wall += t.wall;
                acc.cpu_us += t.cpu_us;
            }
        }
    }
    eprintln!("sasl: calls: counting allocations ...");
    let mut rows = Vec::new();
    let base: Vec<(f64, f64)> = (0..workloads.len())
        .map(|k| {
            let t = totals[0][k];
            (
                t.calls as f64 / t.wall.as_secs_f64(),
                t.cpu_us as f64 / t.calls as f64,
            )
        })
        .collect();
    for (i, rig) in rigs.iter().enumerate() {
        for (k, &w) in workloads.iter().enumerate() {
            let t = totals[i][k];
            let rate = t.calls as f64 / t.wall.as_secs_f64();
            let cpu = t.cpu_us as f64 / t.calls.max(1) as f64;
            let (n, bytes) = match w {
                Workload::Echo => (512, args.echo_bytes as u64),
                Workload::GetBuffer => (rig.buffer_inflight as u64 * 2, args.buffer_bytes),
            };
            let (caller, reader, ring) = allocs_per_call(rig, w, n)?;
            let m = rig.server.metrics();
            ensure!(
                m.fatals == 0 && m.auth_failures == 0,
                "{}: server counters {m:?}",
                rig.level.name()
            );
            rows.push(json!({
                "level": rig.level.name(),
                "workload": match w { Workload::Echo => "echo", Workload::GetBuffer => "getBuffer" },
                "bytes": bytes,
                "inflight": rig.inflight(w),
                "calls": t.calls,
                "seconds": round3(t.wall.as_secs_f64()),
                "calls_per_s": rate.round(),
                "mb_per_s": round1(rate * bytes as f64 / 1e6),
                "cpu_us_per_call": round1(cpu),
                "ratio_vs_simple": {
                    "calls_per_s": round3(rate / base[k].0),
                    "cpu_per_call": round3(cpu / base[k].1),
                },
                "allocs_per_call": {
                    "caller_thread": round3(caller),
                    "reader_thread": round3(reader),
                    "server_ring": round3(ring),
                },
            }));
        }
    }
    for rig in rigs {
        drop(rig.client);
        rig.server.shutdown();
    }
    Ok((backend, rows))
}

// ---------------------------------------------------------------------------------------------
// Output

fn print_tables(v: &Value) {
    let s = |v: &Value| match v {
        Value::String(s) => s.clone(),
        Value::Null => "-".into(),
        other => other.to_string(),
    };
    let num = |v: &Value| v.as_f64().unwrap_or(f64::NAN);
    if let Some(rows) = v["connect"].as_array() {
        println!("1. connection setup, preamble to first call answered, same Java server (µs)");
        println!(
            "   {:<15}{:>9}{:>9}{:>9} | {:>9}{:>9}{:>9} | {:>6}{:>6}{:>6} | {:>9}{:>9}{:>6}",
            "protection",
            "ours mean",
            "p50",
            "p99",
            "java mean",
            "p50",
            "p99",
            "J/O mn",
            "p50",
            "p99",
            "cpu ours",
            "cpu java",
            "J/O"
        );
        for r in rows {
            let (o, j, x) = (
                &r["ours"]["latency"],
                &r["java"]["latency"],
                &r["ratio_java_over_ours"],
            );
            println!(
                "   {:<15}{:>9.0}{:>9.0}{:>9.0} | {:>9.0}{:>9.0}{:>9.0} | {:>6.2}{:>6.2}{:>6.2} | {:>9.0}{:>9.0}{:>6.2}",
                s(&r["protection"]),
                num(&o["mean_us"]),
                num(&o["p50_us"]),
                num(&o["p99_us"]),
                num(&j["mean_us"]),
                num(&j["p50_us"]),
                num(&j["p99_us"]),
                num(&x["mean"]),
                num(&x["p50"]),
                num(&x["p99"]),
                num(&r["ours"]["total_cpu_us_per_connect"]),
                num(&r["java"]["total_cpu_us_per_connect"]),
                num(&x["total_cpu"]),
            );
        }
        println!(
            "   cpu = client + Java server per connect (µs): ours = this process + the JVM over the same \
             window; java = the whole JVM"
        );
        for r in rows {
            println!(
                "     {:<15} ours: client {:.0} + jvm {:.0}; java: calling thread {:.0}",
                s(&r["protection"]),
                num(&r["ours"]["client_cpu_us_per_connect"]),
                num(&r["ours"]["jvm_cpu_us_per_connect"]),
                num(&r["java"]["caller_thread_cpu_us_per_connect"]),
            );
        }
        println!();
    }
    if let Some(rows) = v["wrap"].as_array() {
        println!("2. security layer, client wrap + server unwrap of one message (MB/s = 10^6 B/s)");
        println!(
            "   {:<10}{:<6}{:>7} | {:>9}{:>10}{:>10}{:>7} | {:>9}{:>10}{:>10} | {:>6}",
            "qop",
            "cipher",
            "bytes",
            "ours MB/s",
            "wrap ns",
            "unwrap ns",
            "allocs",
            "jdk MB/s",
            "wrap ns",
            "unwrap ns",
            "O/J"
        );
        for r in rows {
            let (o, j) = (&r["ours"], &r["jdk"]);
            println!(
                "   {:<10}{:<6}{:>7} | {:>9.1}{:>10.0}{:>10.0}{:>7} | {:>9.1}{:>10.0}{:>10.0} | {:>6.2}",
                s(&r["qop"]),
                s(&r["cipher"]),
                s(&r["bytes"]),
                num(&o["mb_per_s"]),
                num(&o["wrap_ns"]),
                num(&o["unwrap_ns"]),
                s(&o["allocs_per_wrap_unwrap"]),
                num(&j["mb_per_s"]),
                num(&j["wrap_ns"]),
                num(&j["unwrap_ns"]),
                num(&r["ratio_ours_over_jdk"]),
            );
        }
        println!();
    }
    if let Some(rows) = v["calls"].as_array() {
        println!(
            "3. one connection to our server ({}, 1 ring thread), pipelined; cpu = client + server \
             (getrusage of this process)",
            s(&v["backend"])
        );
        println!(
            "   {:<15}{:<10}{:>8}{:>4} | {:>10}{:>9}{:>10} | {:>7}{:>8} | {:>7}{:>7}{:>7}",
            "level",
            "call",
            "bytes",
            "in",
            "calls/s",
            "MB/s",
            "cpu µs",
            "rate/S",
            "cpu/S",
            "a:call",
            "a:read",
            "a:srv"
        );
        for r in rows {
            let a = &r["allocs_per_call"];
            println!(
                "   {:<15}{:<10}{:>8}{:>4} | {:>10.0}{:>9.1}{:>10.1} | {:>7.3}{:>8.2} | {:>7.2}{:>7.2}{:>7.2}",
                s(&r["level"]),
                s(&r["workload"]),
                s(&r["bytes"]),
                s(&r["inflight"]),
                num(&r["calls_per_s"]),
                num(&r["mb_per_s"]),
                num(&r["cpu_us_per_call"]),
                num(&r["ratio_vs_simple"]["calls_per_s"]),
                num(&r["ratio_vs_simple"]["cpu_per_call"]),
                num(&a["caller_thread"]),
                num(&a["reader_thread"]),
                num(&a["server_ring"]),
            );
        }
        println!(
            "   rate/S, cpu/S: ratios to the simple row; a:call, a:read, a:srv: allocations per call \
             on the calling thread, the client's reader thread, the server's ring thread"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hadoop_wire::reader::{Reader, Value as Field};
    use prost::Message as _;

    #[test]
    fn percentiles_are_nearest_rank() {
        let mut v: Vec<f64> = (1..=200).rev().map(f64::from).collect();
        let l = lat_of(&mut v);
        assert_eq!((l.mean, l.p50, l.p99), (100.5, 100.0, 198.0));
        let c = combine(&[
            l,
            Lat {
                mean: 0.5,
                p50: 1.0,
                p99: 2.0,
            },
            Lat {
                mean: 2.0,
                p50: 300.0,
                p99: 400.0,
            },
        ]);
        assert!((c.mean - 103.0 / 3.0).abs() < 1e-9, "{c:?}");
        assert_eq!((c.p50, c.p99), (100.0, 198.0));
    }

    #[test]
    fn the_request_carries_one_container_id() {
        let req = container_statuses_request().unwrap();
        let mut r = Reader::new(&req);
        let (field, value) = r.read_field(0).unwrap();
        assert!(r.is_empty());
        let Field::Len(body) = value else {
            panic!("field 1 is not length-delimited");
        };
        assert_eq!(field, 1);
        let id = hadoop_wire::pb::hadoop::yarn::ContainerIdProto::decode(body).unwrap();
        assert_eq!(id, ContainerId::parse(CONTAINER).unwrap().to_proto());
    }

    #[test]
    fn in_memory_layers_round_trip_with_the_jdks_sizes() {
        // wrapped sizes of 1024 bytes as the JDK makes them (the peer's smoke test checks
        // those): MAC, type and sequence number, and 3DES padding
        for (qop, cipher, wrapped) in [
            (Qop::AuthInt, None, 1024 + 16),
            (Qop::AuthConf, Some(DigestCipher::TripleDes), 1024 + 22),
            (Qop::AuthConf, Some(DigestCipher::Rc4), 1024 + 16),
        ] {
            let mut l = WrapLoop::new(qop, cipher, 1024).unwrap();
            for _ in 0..3 {
                l.once().unwrap();
                l.check().unwrap();
            }
            assert_eq!(l.wrapped.len(), wrapped, "{qop:?} {cipher:?}");
            let s = l.slice(Duration::from_millis(5)).unwrap();
            assert!(s.iterations > 0 && s.mb_per_s > 0.0, "{s:?}");
        }
    }

    #[test]
    fn the_bench_secrets_refuse_other_identifiers() {
        let e = BenchSecrets.retrieve(b"someone else").unwrap_err();
        assert!(matches!(e, SaslError::InvalidToken(_)), "{e:?}");
        let id = format!("{BENCH_USER}@x").into_bytes();
        let p = BenchSecrets.retrieve(&id).unwrap();
        assert_eq!(p.user, BENCH_USER);
        assert_eq!(p.password.len(), 20);
    }
}
