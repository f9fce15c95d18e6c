//! Our client against Java's on the same real MiniDFSCluster (peer-harness `hdfs` mode), each
//! in its own process for Java (the peer's drivers) and this process for ours:
//!
//! - `read`: a 256 MiB file written with 128 MiB blocks, read whole, runs alternated between
//!   ours with io_uring receive (`hotpath`), ours with the blocking receive
//!   (`hotpath_blocking`, `HOTPATH_IO=epoll`'s path) and Java's `FileSystem.open` read (`ReadDriver`, one unmeasured warm-up read in its JVM
//!   first); throughput and process CPU per GB, and the CPU of the peer's JVM (it hosts the
//!   DataNodes and the NameNode; during a read it is the DataNodes serving the blocks) per GB
//!   served, from `/proc/<pid>/stat` around each run. Java's run reads the file twice (the
//!   warm-up read in the driver's JVM, then the measured one), so its peer CPU is divided by
//!   the bytes of both reads.
//! - `filestatus`: getFileInfo over N files with T threads at a fixed offered rate, ours
//!   ([`benches::filestatus`]) and Java's `FileStatusDriver`; client CPU per call. Ours
//!   runs twice per round: with direct calls (the default) and through the shared
//!   `ipc::client` connection (`hotpath_shared`, [`NameNodeConfig::direct_calls`] off).
//!
//! `cargo run --release -p benches --example vs_java -- [read|filestatus|all] [runs] [rate] [files] [seconds] [--encrypt]`
//! (`--encrypt`: the cluster encrypts data transfer, `dfs.encrypt.data.transfer` with
//! AES/CTR/NoPadding, and both clients read through the AES streams; `--encrypt-3des` /
//! `--encrypt-rc4`: encrypted data transfer without AES, so both clients read through the
//! DIGEST-MD5 stream layer with that cipher (`dfs.encrypt.data.transfer.algorithm`); ours then
//! runs only its blocking receive, the only path of that layer; `--kerberos`, with `read`
//! only: the peer's Kerberized MiniDFSCluster (MiniKdc, `hdfs --kerberos true`), ours reading
//! with the client's TGT from a ticket cache, Java's driver logged in from the client keytab)
//! (defaults 3 runs, 1000 calls/s, 10,000 files, 10 s). Prints JSON lines, then one summary
//! line per measurement with the medians over the runs. The NameNode and DataNodes share the machine: compare CPU, not only speed.

use benches::filestatus;
use hdfs_io::dfs::{DfsClient, DfsConfig};
use hdfs_io::namenode::{endpoints_from_conf, NameNodeClient, NameNodeConfig};
use hdfs_io::topology::{LocalNode, RackMap};
use ipc::transport::BackendChoice;
use peer_harness::{Driver, Mode, Peer};
use std::io::Write;
use std::time::{Duration, Instant};

struct Count(u64);
impl Write for Count {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0 += b.len() as u64;
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// CPU time (user + system, ns) of process `pid`, threads that exited included.
fn pid_cpu_ns(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &s[s.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let utime: u64 = f.get(11)?.parse().ok()?;
    let stime: u64 = f.get(12)?.parse().ok()?;
    Some((utime + stime) * 10_000_000)
}

/// CPU time (ns) of this process's live threads, from `/proc/self/task/*/schedstat`:
/// nanosecond precision, where `/proc/self/stat` counts 10 ms ticks (0.1 s reads of 256 MiB
/// would be measured to ±10 %). Threads that exited are not counted: none does during a read.
fn own_cpu_ns_precise() -> Option<u64> {
    let mut sum = 0u64;
    for t in std::fs::read_dir("/proc/self/task").ok()? {
        let p = t.ok()?.path().join("schedstat");
        if let Ok(s) = std::fs::read_to_string(p) {
            sum += s.split_whitespace().next()?.parse::<u64>().ok()?;
        }
    }
    Some(sum)
}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// `--encrypt`: the cluster runs with encrypted data transfer (AES/CTR/NoPadding offered by
/// both clients through the peer's hdfs-site.xml).
const ENCRYPT_SETS: [&str; 6] = [
    "--set",
    "dfs.encrypt.data.transfer=true",
    "--set",
    "dfs.block.access.token.enable=true",
    "--set",
    "dfs.encrypt.data.transfer.cipher.suites=AES/CTR/NoPadding",
];

/// `--encrypt-3des` / `--encrypt-rc4`: encrypted data transfer without AES (the DIGEST-MD5
/// stream layer, `auth-conf` with the key's cipher).
const DIGEST_SETS: [&str; 4] = [
    "--set",
    "dfs.encrypt.data.transfer=true",
    "--set",
    "dfs.block.access.token.enable=true",
];

fn main() {
    let all: Vec<String> = std::env::args().skip(1).collect();
    let encrypt = all.iter().any(|a| a == "--encrypt");
    let kerberos = all.iter().any(|a| a == "--kerberos");
    let digest: Option<&str> = if all.iter().any(|a| a == "--encrypt-3des") {
        Some("3des")
    } else if all.iter().any(|a| a == "--encrypt-rc4") {
        Some("rc4")
    } else {
        None
    };
    let mut sets: Vec<&str> = if encrypt {
        ENCRYPT_SETS.to_vec()
    } else {
        Vec::new()
    };
    if kerberos {
        sets.extend_from_slice(&["--kerberos", "true"]);
    }
    if let Some(c) = digest {
        sets.extend_from_slice(&DIGEST_SETS);
        if c == "rc4" {
            sets.extend_from_slice(&["--set", "dfs.encrypt.data.transfer.algorithm=rc4"]);
        }
    }
    let layer = match (encrypt, digest) {
        (_, Some(c)) => c,
        (true, None) => "aes",
        (false, None) => "none",
    };
    let mut args = all.into_iter().filter(|a| {
        !matches!(
            a.as_str(),
            "--encrypt" | "--encrypt-3des" | "--encrypt-rc4" | "--kerberos"
        )
    });
    let what = args.next().unwrap_or_else(|| "all".into());
    assert!(
        !kerberos || what == "read",
        "--kerberos is for `read` (filestatus-kerberos is `hotpath-bench filestatus-kerberos`)"
    );
    let runs: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(3);
    let rate: f64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(1000.0);
    let files: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(10_000);
    let seconds: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(10);
    let mut peer = Peer::start(Mode::Hdfs, &sets).expect("hdfs peer");
    // --kerberos: this process reads with the client's TGT from a ticket cache (MIT's
    // environment, set before any client exists), Java's ReadDriver logs in from the keytab.
    let krb_dir = tempfile::tempdir().expect("a temp dir for the ticket cache");
    let mut java_login: Vec<String> = Vec::new();
    if kerberos {
        let k = peer.kerberos().expect("the peer's Kerberos facts");
        k.kinit_process(krb_dir.path()).expect("kinit");
        java_login = vec![
            "--principal".into(),
            k.client_principal.clone(),
            "--keytab".into(),
            k.client_keytab.display().to_string(),
            "--krb5-conf".into(),
            k.krb5_conf.display().to_string(),
        ];
    }
    let java_args = |a: &[&'static str]| -> Vec<String> {
        a.iter()
            .map(|s| s.to_string())
            .chain(java_login.iter().cloned())
            .collect()
    };
    let conf = conf::Configuration::load_dir(peer.conf_dir()).expect("conf");
    let nn = NameNodeClient::from_conf(&conf).expect("nn");
    let client = DfsClient::new(
        nn,
        DfsConfig::from_conf(&conf).expect("cfg"),
        LocalNode::default(),
        RackMap::default(),
        None,
    );

    if what == "read" || what == "all" {
        let len: u64 = 256 << 20;
        peer.command(&format!("write /vs/big {len} {}", 128u64 << 20))
            .expect("write");
        // ours twice per round: io_uring receive into pooled buffers, and the blocking path
        let with_io = |io: BackendChoice| {
            let mut cfg = DfsConfig::from_conf(&conf).expect("cfg");
            cfg.io = io;
            DfsClient::new(
                NameNodeClient::from_conf(&conf).expect("nn"),
                cfg,
                LocalNode::default(),
                RackMap::default(),
                None,
            )
        };
        let mut ours: Vec<(&str, DfsClient)> =
            vec![("hotpath_blocking", with_io(BackendChoice::Epoll))];
        match with_io(BackendChoice::Uring).recv_path() {
            _ if digest.is_some() => {}
            Ok(_) => ours.insert(0, ("hotpath", with_io(BackendChoice::Uring))),
            Err(e) => eprintln!("io_uring receive unavailable ({e}): blocking only"),
        }
        // warm the page cache and every client
        for (_, c) in &ours {
            c.read("/vs/big", 0, None, &mut Count(0))
                .expect("warm read");
        }
        let warm = java_args(&["--path", "/vs/big", "--runs", "1"]);
        let warm: Vec<&str> = warm.iter().map(String::as_str).collect();
        peer.run_driver(Driver::Read, &warm).expect("warm java");
        let peer_pid = peer.pid();
        // per client: gb/s, cpu s/GB, DataNode cpu s/GB
        let mut m: Vec<[Vec<f64>; 3]> = vec![Default::default(); ours.len() + 1];
        for run in 0..runs {
            for (i, (name, c)) in ours.iter().enumerate() {
                let p0 = pid_cpu_ns(peer_pid).unwrap_or(0);
                let c0 = own_cpu_ns_precise().unwrap_or(0);
                let t = Instant::now();
                let mut sink = Count(0);
                let st = c.read("/vs/big", 0, None, &mut sink).expect("read");
                let secs = t.elapsed().as_secs_f64();
                let cpu = own_cpu_ns_precise().unwrap_or(0).saturating_sub(c0) as f64 / 1e9;
                let dn_cpu = (pid_cpu_ns(peer_pid).unwrap_or(0) - p0) as f64 / 1e9;
                let gb = sink.0 as f64 / 1e9;
                println!(
                    "{{\"client\":\"{name}\",\"run\":{run},\"bytes\":{},\"gb_per_s\":{:.3},\"cpu_s\":{cpu:.3},\"cpu_s_per_gb\":{:.3},\"dn_cpu_s\":{dn_cpu:.3},\"dn_gb_served\":{gb:.3},\"dn_cpu_s_per_gb\":{:.3},\"uring_reads\":{},\"encrypted_handshakes\":{},\"sasl_layer_reads\":{}}}",
                    sink.0,
                    gb / secs,
                    cpu / gb,
                    dn_cpu / gb,
                    st.uring_reads,
                    st.encrypted_handshakes,
                    st.sasl_layer_reads
                );
                m[i][0].push(gb / secs);
                m[i][1].push(cpu / gb);
                m[i][2].push(dn_cpu / gb);
            }
            let p0 = pid_cpu_ns(peer_pid).unwrap_or(0);
            let ja = java_args(&["--path", "/vs/big", "--warmup-runs", "1", "--runs", "1"]);
            let ja: Vec<&str> = ja.iter().map(String::as_str).collect();
            let j = peer.run_driver(Driver::Read, &ja).expect("java read");
            let dn_cpu = (pid_cpu_ns(peer_pid).unwrap_or(0) - p0) as f64 / 1e9;
            let bytes = j["bytes"].as_f64().unwrap_or(0.0);
            // the driver's warm-up read and its measured read
            let served = 2.0 * bytes / 1e9;
            let (gbs, cpg) = (
                j["gb_per_s"].as_f64().unwrap_or(0.0),
                j["cpu_s_per_gb"].as_f64().unwrap_or(0.0),
            );
            println!(
                "{{\"client\":\"java\",\"run\":{run},\"bytes\":{},\"gb_per_s\":{gbs:.3},\"cpu_s\":{:.3},\"cpu_s_per_gb\":{cpg:.3},\"dn_cpu_s\":{dn_cpu:.3},\"dn_gb_served\":{served:.3},\"dn_cpu_s_per_gb\":{:.3}}}",
                j["bytes"], j["cpu_s"].as_f64().unwrap_or(0.0),
                dn_cpu / served
            );
            let k = ours.len();
            m[k][0].push(gbs);
            m[k][1].push(cpg);
            m[k][2].push(dn_cpu / served);
        }
        let names: Vec<&str> = ours.iter().map(|(n, _)| *n).chain(["java"]).collect();
        let parts: Vec<String> = names
            .iter()
            .zip(m)
            .map(|(n, [a, b, c])| {
                format!(
                    "\"{n}\":{{\"gb_per_s\":{:.3},\"cpu_s_per_gb\":{:.3},\"dn_cpu_s_per_gb\":{:.3}}}",
                    median(a),
                    median(b),
                    median(c)
                )
            })
            .collect();
        println!(
            "{{\"summary\":\"read\",\"encrypted\":{},\"kerberos\":{kerberos},\"layer\":\"{layer}\",\"runs\":{runs},{}}}",
            encrypt || digest.is_some(),
            parts.join(",")
        );
    }
    if what == "filestatus" || what == "all" {
        peer.command(&format!("mkfiles /vs/fs {files}"))
            .expect("mkfiles");
        let paths: Vec<String> = (0..files).map(|i| format!("/vs/fs/f{i}")).collect();
        let (mut ours, mut java) = (Vec::new(), Vec::new());
        let (mut ours_ops, mut java_ops) = (Vec::new(), Vec::new());
        let mut shared_cpu = Vec::new();
        let shared = NameNodeClient::new(
            endpoints_from_conf(&conf).expect("endpoints").0,
            NameNodeConfig {
                direct_calls: false,
                ..NameNodeConfig::default()
            },
        )
        .expect("nn");
        for run in 0..runs {
            let r = filestatus::run(
                client.namenode(),
                &paths,
                16,
                Duration::from_secs(seconds),
                Some(rate),
            )
            .expect("ours");
            println!(
                "{{\"client\":\"hotpath\",\"run\":{run},\"filestatus\":{}}}",
                r.to_json()
            );
            ours.push(r.cpu_ns_per_op.unwrap_or(f64::NAN) / 1e3);
            ours_ops.push(r.ops_per_sec);
            let r = filestatus::run(
                &shared,
                &paths,
                16,
                Duration::from_secs(seconds),
                Some(rate),
            )
            .expect("ours, shared connection");
            println!(
                "{{\"client\":\"hotpath_shared\",\"run\":{run},\"filestatus\":{}}}",
                r.to_json()
            );
            shared_cpu.push(r.cpu_ns_per_op.unwrap_or(f64::NAN) / 1e3);
            let j = peer
                .run_driver(
                    Driver::FileStatus,
                    &[
                        "--threads",
                        "16",
                        "--files",
                        &files.to_string(),
                        "--dir",
                        "/vs/fs",
                        "--rate",
                        &rate.to_string(),
                        "--duration",
                        &seconds.to_string(),
                        "--warmup",
                        "2",
                    ],
                )
                .expect("java filestatus");
            println!("{{\"client\":\"java\",\"run\":{run},\"filestatus\":{j}}}");
            java.push(j["cpu_us_per_call"].as_f64().unwrap_or(f64::NAN));
            java_ops.push(j["ops_per_s"].as_f64().unwrap_or(f64::NAN));
        }
        let (o, jv) = (median(ours), median(java));
        println!(
            "{{\"summary\":\"filestatus\",\"files\":{files},\"threads\":16,\"rate\":{rate},\"runs\":{runs},\"hotpath_cpu_us_per_call\":{o:.1},\"java_cpu_us_per_call\":{jv:.1},\"hotpath_shared_cpu_us_per_call\":{:.1},\"ratio\":{:.3},\"hotpath_ops_per_s\":{:.1},\"java_ops_per_s\":{:.1}}}",
            median(shared_cpu),
            o / jv,
            median(ours_ops),
            median(java_ops)
        );
    }
}
