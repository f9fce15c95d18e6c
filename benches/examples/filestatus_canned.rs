//! The client alone: `getFileInfo` through [`NameNodeClient`] against our own in-process
//! `ipc::server::Server` that answers every call with one canned `GetFileInfoResponseProto`
//! (an `HdfsFileStatusProto` as a NameNode fills it for a small file), so that no NameNode
//! work is in the figure.
//!
//! The client is pointed at the server by a configuration with
//! `fs.defaultFS = hdfs://127.0.0.1:PORT` ([`endpoints_from_conf`]), and
//! [`filestatus::run`] drives it (T threads, closed loop, or paced with a rate).
//!
//! `cargo run --release -p benches --example filestatus_canned -- [threads] [seconds] [runs] [rate|-] [direct|shared]`
//! (defaults 16, 5, 3, unpaced, direct). `shared` turns [`NameNodeConfig::direct_calls`] off:
//! every call goes through the one shared `ipc::client` connection and its reader thread.
//! Prints one JSON line per run and a summary line with the medians. The server's ring
//! threads (`hp-ring-*`) run in this process: their CPU time, read per thread from `/proc/self/task/*/stat`, is the server's share (`server_cpu_ns_per_op`);
//! the process CPU per call minus that share is the client's (`client_cpu_ns_per_op`).

use benches::filestatus;
use hadoop_wire::hdfs::{CLIENT_PROTOCOL, CLIENT_PROTOCOL_VERSION};
use hadoop_wire::pb::hadoop::hdfs::{
    FsPermissionProto, GetFileInfoResponseProto, HdfsFileStatusProto,
};
use hdfs_io::namenode::{endpoints_from_conf, NameNodeClient, NameNodeConfig};
use ipc::server::{Call, CallError, Registry, Reply, Server, ServerConfig};
use prost::Message;
use std::time::Duration;

/// The canned answer: a 5 MiB file, as `getFileInfo` returns it (no path, as Java's NameNode).
fn canned() -> Vec<u8> {
    GetFileInfoResponseProto {
        fs: Some(HdfsFileStatusProto {
            file_type: 2,
            path: vec![],
            length: 5 << 20,
            permission: FsPermissionProto { perm: 0o644 },
            owner: "alice".into(),
            group: "supergroup".into(),
            modification_time: 1_767_225_600_123,
            access_time: 1_767_225_600_000,
            block_replication: Some(3),
            blocksize: Some(128 << 20),
            file_id: Some(16386),
            children_num: Some(0),
            storage_policy: Some(0),
            flags: Some(0),
            ..Default::default()
        }),
    }
    .encode_to_vec()
}

/// CPU (user + system, ns) of this process's threads whose name starts with `prefix`.
fn threads_cpu_ns(prefix: &str) -> u64 {
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return 0;
    };
    let mut total = 0;
    for e in dir.flatten() {
        let p = e.path();
        let name = std::fs::read_to_string(p.join("comm")).unwrap_or_default();
        if !name.trim_end().starts_with(prefix) {
            continue;
        }
        let Ok(s) = std::fs::read_to_string(p.join("stat")) else {
            continue;
        };
        let Some(i) = s.rfind(')') else { continue };
        let f: Vec<&str> = s[i + 2..].split_whitespace().collect();
        let t = |k: usize| f.get(k).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        total += (t(11) + t(12)) * 10_000_000;
    }
    total
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let mut args = std::env::args().skip(1);
    let threads: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(16);
    let secs: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(5);
    let runs: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(3);
    let rate: Option<f64> = args.next().and_then(|s| s.parse().ok());
    let direct = args.next().is_none_or(|s| s != "shared");

    let answer = canned();
    let mut reg = Registry::new();
    reg.register(
        CLIENT_PROTOCOL,
        CLIENT_PROTOCOL_VERSION,
        "getFileInfo",
        move |call: &Call<'_>, reply: &mut Reply<'_, '_>| -> Result<(), CallError> {
            if call.request.is_empty() {
                return Err(CallError::application(
                    "java.io.IOException",
                    "empty getFileInfo request",
                ));
            }
            reply.bytes(&answer)?;
            Ok(())
        },
    );
    let server = Server::start(
        "127.0.0.1:0".parse().expect("addr"),
        ServerConfig::default(),
        reg,
    )
    .expect("server");
    let mut conf = conf::Configuration::new();
    conf.set(
        "fs.defaultFS",
        &format!("hdfs://127.0.0.1:{}", server.local_addr().port()),
    );
    let (endpoints, _) = endpoints_from_conf(&conf).expect("endpoints");
    let nn = NameNodeClient::new(
        endpoints,
        NameNodeConfig {
            direct_calls: direct,
            ..NameNodeConfig::default()
        },
    )
    .expect("client");
    // the canned answer decodes as the status we sent
    let st = nn
        .get_file_info("/canned/f0")
        .expect("call")
        .expect("status");
    assert_eq!(st.length, 5 << 20);

    let paths: Vec<String> = (0..10_000).map(|i| format!("/canned/f{i}")).collect();
    let (mut ops, mut cpu, mut srv) = (Vec::new(), Vec::new(), Vec::new());
    for run in 0..runs {
        let calls0 = server.metrics().calls;
        let s0 = threads_cpu_ns("hp-ring");
        let r =
            filestatus::run(&nn, &paths, threads, Duration::from_secs(secs), rate).expect("bench");
        let s1 = threads_cpu_ns("hp-ring");
        let calls = server.metrics().calls - calls0;
        assert_eq!(r.errors, 0, "errors against the canned server");
        assert_eq!(r.missing, 0);
        let server_ns = (s1 - s0) as f64 / calls.max(1) as f64;
        let total = r.cpu_ns_per_op.unwrap_or(f64::NAN);
        let client_ns = total - server_ns;
        println!(
            "{{\"run\":{run},\"backend\":\"{:?}\",\"server_calls\":{calls},\"filestatus\":{},\"server_cpu_ns_per_op\":{server_ns:.1},\"client_cpu_ns_per_op\":{client_ns:.1}}}",
            server.backend(),
            r.to_json()
        );
        ops.push(r.ops_per_sec);
        cpu.push(client_ns);
        srv.push(server_ns);
    }
    println!(
        "{{\"summary\":true,\"direct_calls\":{direct},\"threads\":{threads},\"runs\":{runs},\"median_ops_per_sec\":{:.1},\"median_client_cpu_ns_per_op\":{:.1},\"median_server_cpu_ns_per_op\":{:.1}}}",
        median(ops),
        median(cpu),
        median(srv)
    );
    server.shutdown();
}
