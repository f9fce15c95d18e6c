//! A quick load check of `RmService` over loopback TCP: `rm_smoke NODES ROUNDS [CLIENTS]`.
//! NODES NodeManagers (50 RUNNING containers each, IP-literal host, distinct ports) register,
//! then every round each node sends one heartbeat (its own responseId sequence), pipelined
//! over CLIENTS connections. Prints heartbeats/s, RPC latency percentiles and the largest
//! dispatcher backlog as one JSON line. Not the loadgen (that is `hotpath-bench loadgen`): no
//! pacing, the client and server share the machine.

use std::time::{Duration, Instant};

use hadoop_wire::pb::hadoop::yarn::{
    ContainerStateProto, ExecutionTypeProto, NodeHeartbeatResponseProto,
};
use hadoop_wire::yarn::{
    HADOOP_VERSION, NODE_HEARTBEAT, REGISTER_NODE_MANAGER, RESOURCE_TRACKER_PROTOCOL,
    RESOURCE_TRACKER_VERSION,
};
use ipc::client::{Client, ClientConfig};
use ipc::server::ServerConfig;
use rm_core::dispatcher::Placement;
use rm_core::ids::NodeKey;
use rm_core::service::RmService;
use rm_core::RmConfig;
use testkit::heartbeat::{
    container_status, containers, heartbeat_request, node_status, register_request, set_response_id,
};

fn main() {
    let mut args = std::env::args().skip(1);
    let nodes: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(1000);
    let rounds: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(10);
    let clients: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(4);
    let dir = std::env::temp_dir().join(format!("rm-smoke-{}", std::process::id()));
    let cfg = RmConfig {
        completion_log_dir: dir.clone(),
        ..RmConfig::default()
    };
    let rm = RmService::start(
        cfg,
        "127.0.0.1:0".parse().unwrap(),
        &Placement::Unpinned(2),
        ServerConfig::default(),
    )
    .expect("rm");
    let conns: Vec<Client> = (0..clients)
        .map(|_| {
            Client::new(
                rm.local_addr(),
                ClientConfig {
                    protocol: RESOURCE_TRACKER_PROTOCOL.into(),
                    call_timeout: Duration::from_secs(30),
                    ..ClientConfig::default()
                },
            )
        })
        .collect();
    let ids: Vec<NodeKey> = (0..nodes)
        .map(|i| NodeKey::new("127.0.0.1", 20000 + i as i32))
        .collect();
    let mut reqs = Vec::with_capacity(nodes);
    for (i, n) in ids.iter().enumerate() {
        conns[i % clients]
            .call(
                REGISTER_NODE_MANAGER,
                &register_request(n, 65536, 32, HADOOP_VERSION),
            )
            .expect("register");
        let st = containers(i as i32 + 1, 50)
            .into_iter()
            .map(|k| {
                container_status(
                    k,
                    ContainerStateProto::CRunning,
                    -1000,
                    ExecutionTypeProto::Guaranteed,
                )
            })
            .collect();
        reqs.push(heartbeat_request(&node_status(n, st, true), 0, None));
    }
    let mut rids = vec![0i32; nodes];
    let mut lat = Vec::with_capacity(nodes * rounds);
    let t0 = Instant::now();
    for _ in 0..rounds {
        let mut pending = Vec::with_capacity(nodes);
        for (i, (req, at)) in reqs.iter_mut().enumerate() {
            set_response_id(req, *at, rids[i]);
            let p = conns[i % clients]
                .start_call(
                    RESOURCE_TRACKER_PROTOCOL,
                    RESOURCE_TRACKER_VERSION,
                    NODE_HEARTBEAT,
                    req,
                    Duration::from_secs(30),
                )
                .expect("send");
            pending.push((i, Instant::now(), p));
        }
        for (i, t, p) in pending {
            let r: NodeHeartbeatResponseProto =
                p.wait().expect("heartbeat").decode().expect("decode");
            lat.push(t.elapsed().as_micros() as u64);
            rids[i] = r.response_id.expect("NORMAL");
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    lat.sort_unstable();
    let q = |f: f64| lat[((lat.len() as f64 * f) as usize).min(lat.len() - 1)];
    println!(
        "{{\"nodes\":{nodes},\"rounds\":{rounds},\"hb_per_s\":{:.0},\"p50_us\":{},\"p99_us\":{},\"p999_us\":{},\"max_backlog\":{}}}",
        (nodes * rounds) as f64 / secs,
        q(0.5),
        q(0.99),
        q(0.999),
        rm.max_backlog()
    );
    rm.shutdown();
    let _ = std::fs::remove_dir_all(dir);
}
