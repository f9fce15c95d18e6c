//! The `mapreduce_shuffle` aux service wired into a running agent (registered with the
//! embedded rm-core): every StartContainers answer carries its port, a task container's
//! service data registers its job (the service then answers for it), containers get
//! `NM_AUX_SERVICE_mapreduce_shuffle`, a container's stop keeps the job served, and an aux
//! service the agent cannot serve stops it at start. About two seconds.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use agent::demo::{Cluster, DemoConfig};
use hadoop_wire::pb::hadoop::yarn::{
    StartContainersRequestProto, StartContainersResponseProto, StopContainersRequestProto,
    StopContainersResponseProto, StringBytesMapProto,
};
use hadoop_wire::sasl::client::ClientAuth;
use hadoop_wire::sasl::Qop;
use hadoop_wire::token::Token;
use hadoop_wire::yarn::cmp;
use nm_core::ids::{AppId, AttemptId, ContainerId};
use nm_core::wire::container_id_proto;
use nm_runtime::shuffle::ShuffleConfig;
use nm_runtime::{Agent, AgentConfig};

use crate::cmp::{call, now_ms, wait_for, Minter};

const TS: i64 = 1_700_000_000_000;

fn attempt(app: i32) -> AttemptId {
    AttemptId {
        app: AppId {
            cluster_timestamp: TS,
            id: app,
        },
        attempt: 1,
    }
}

fn whoami() -> String {
    std::env::var("USER").unwrap_or_else(|_| "root".into())
}

/// `service_data["mapreduce_shuffle"]` as the MR AM writes it (shuffle.md §1.3).
fn service_data(job: &str, secret: &[u8]) -> StringBytesMapProto {
    let mut id = Vec::new();
    hadoop_wire::token::writable::write_text(&mut id, job);
    StringBytesMapProto {
        key: Some("mapreduce_shuffle".into()),
        value: Some(Token::new(id, secret.to_vec(), "mapreduce.job", job).to_writable()),
    }
}

/// A fetch without a hash: the service says whether it knows the job (401 "Can't find job
/// token" vs "fetcher cannot be authenticated").
fn probe(port: u16, job: &str) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "GET /mapOutput?job={job}&reduce=0&map=attempt_{TS}_0001_m_000000_0 HTTP/1.1\r\n\
         name: mapreduce\r\nversion: 1.0.0\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

#[test]
fn every_start_carries_the_shuffle_port_and_service_data_registers_the_job() {
    let cluster = Cluster::start(DemoConfig {
        agents: 0,
        heartbeat_ms: 200,
        ..DemoConfig::default()
    })
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut cfg =
        AgentConfig::local(cluster.rm_addr(), "127.0.0.24".parse().unwrap(), dir.path()).unwrap();
    cfg.nm.aux_services = vec!["mapreduce_shuffle".into()];
    cfg.nm.shuffle = Some(ShuffleConfig {
        port: 0,
        ..ShuffleConfig::default()
    });
    let agent = Agent::start(cfg).unwrap();
    wait_for("keys", Duration::from_secs(10), || {
        agent.shared().cm.lock().unwrap().has_keys()
    });
    let port = agent.shuffle_port().unwrap();
    assert_ne!(port, 0);
    let job = format!("job_{TS}_0001");
    assert!(probe(port, &job).contains("Can't find job token for job"));

    let m = Minter::new(&agent, &whoami());
    let a = attempt(1);
    let client = m.client_with(
        ClientAuth::token(m.nm_token(a, &m.node(), None, false), vec![Qop::Auth]),
        &a.to_string(),
    );
    let c = |n: i64| ContainerId {
        app: a.app,
        attempt: 1,
        id: n,
    };
    let env_file = dir.path().join("aux.env");
    // a map task's start: service data, a command that records the variable
    let mut task = m.start_request(
        c(2),
        &agent.node_id(),
        now_ms() + 600_000,
        &format!(
            "echo -n \"$NM_AUX_SERVICE_mapreduce_shuffle\" > {}; sleep 30",
            env_file.display()
        ),
    );
    task.container_launch_context
        .as_mut()
        .unwrap()
        .service_data
        .push(service_data(&job, &[1, 2, 3, 4, 5, 6, 7, 8]));
    // the AM's start: no service data, the port all the same
    let am = m.start_request(c(1), &agent.node_id(), now_ms() + 600_000, "true");
    let want = i32::from(port).to_be_bytes().to_vec();
    for req in [am, task] {
        let r: StartContainersResponseProto = call(
            &client,
            cmp::START_CONTAINERS,
            &StartContainersRequestProto {
                start_container_request: vec![req],
            },
        )
        .unwrap();
        assert!(r.failed_requests.is_empty(), "{:?}", r.failed_requests);
        assert_eq!(r.services_meta_data.len(), 1);
        let meta = &r.services_meta_data[0];
        assert_eq!(meta.key.as_deref(), Some("mapreduce_shuffle"));
        assert_eq!(meta.value.as_deref(), Some(want.as_slice()));
    }
    // registered before the answer: the job is known now
    assert!(probe(port, &job).contains("fetcher cannot be authenticated"));
    wait_for("the container's env", Duration::from_secs(20), || {
        std::fs::read_to_string(&env_file).is_ok_and(|s| !s.is_empty())
    });
    assert_eq!(
        std::fs::read_to_string(&env_file).unwrap(),
        hadoop_wire::token::sasl_encode(&want)
    );
    // the map container stops (the MR AM stops each map as it succeeds): still served
    let _: StopContainersResponseProto = call(
        &client,
        cmp::STOP_CONTAINERS,
        &StopContainersRequestProto {
            container_id: vec![container_id_proto(&c(2))],
        },
    )
    .unwrap();
    assert!(probe(port, &job).contains("fetcher cannot be authenticated"));
    // an unknown aux service in a launch context is still Java's per-container failure
    let mut spark = m.start_request(c(3), &agent.node_id(), now_ms() + 600_000, "true");
    spark
        .container_launch_context
        .as_mut()
        .unwrap()
        .service_data
        .push(StringBytesMapProto {
            key: Some("spark_shuffle".into()),
            value: Some(vec![]),
        });
    let r: StartContainersResponseProto = call(
        &client,
        cmp::START_CONTAINERS,
        &StartContainersRequestProto {
            start_container_request: vec![spark],
        },
    )
    .unwrap();
    let e = r.failed_requests[0].exception.as_ref().unwrap();
    assert_eq!(
        e.message.as_deref(),
        Some("The auxService:spark_shuffle does not exist")
    );
    assert_eq!(r.services_meta_data.len(), 1);
}

#[test]
fn an_aux_service_the_agent_cannot_serve_stops_it_at_start() {
    let mut conf = conf::Configuration::new();
    conf.set(
        "yarn.nodemanager.aux-services",
        "mapreduce_shuffle,spark_shuffle",
    );
    conf.set(
        "yarn.nodemanager.aux-services.spark_shuffle.class",
        "org.apache.spark.network.yarn.YarnShuffleService",
    );
    let e = AgentConfig::from_conf(&conf).unwrap_err().to_string();
    assert!(
        e.contains("yarn.nodemanager.aux-services names spark_shuffle")
            && e.contains("org.apache.spark.network.yarn.YarnShuffleService"),
        "{e}"
    );
    // mapreduce_shuffle with another class
    let mut conf = conf::Configuration::new();
    conf.set("yarn.nodemanager.aux-services", "mapreduce_shuffle");
    conf.set(
        "yarn.nodemanager.aux-services.mapreduce_shuffle.class",
        "com.example.OtherShuffle",
    );
    let e = AgentConfig::from_conf(&conf).unwrap_err().to_string();
    assert!(e.contains("com.example.OtherShuffle"), "{e}");
    // encrypted shuffle without a keystore is refused, saying so
    let mut conf = conf::Configuration::new();
    conf.set("yarn.nodemanager.aux-services", "mapreduce_shuffle");
    conf.set("mapreduce.shuffle.ssl.enabled", "true");
    let e = AgentConfig::from_conf(&conf).unwrap_err().to_string();
    assert!(e.contains("mapreduce.shuffle.ssl.enabled is true"), "{e}");
    // the default: mapreduce_shuffle on 13562 with Java's defaults
    let mut conf = conf::Configuration::new();
    conf.set("yarn.nodemanager.aux-services", "mapreduce_shuffle");
    let s = AgentConfig::from_conf(&conf).unwrap().nm.shuffle.unwrap();
    assert_eq!((s.port, s.max_connections, s.keep_alive), (13562, 0, false));
    // a configuration built in code naming another service: Agent::start refuses it
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = AgentConfig::local(
        "127.0.0.1:1".parse().unwrap(),
        "127.0.0.25".parse().unwrap(),
        dir.path(),
    )
    .unwrap();
    cfg.nm.aux_services = vec!["spark_shuffle".into()];
    let e = Agent::start(cfg).err().expect("refused").to_string();
    assert!(e.contains("spark_shuffle"), "{e}");
}

#[test]
fn with_recovery_a_restarted_agent_still_serves_its_registered_jobs() {
    let cluster = Cluster::start(DemoConfig {
        agents: 0,
        heartbeat_ms: 200,
        ..DemoConfig::default()
    })
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let start = |recovery: bool| {
        let mut cfg =
            AgentConfig::local(cluster.rm_addr(), "127.0.0.26".parse().unwrap(), dir.path())
                .unwrap();
        cfg.nm.recovery = recovery;
        cfg.nm.shuffle = Some(ShuffleConfig {
            port: 0,
            ..ShuffleConfig::default()
        });
        let agent = Agent::start(cfg).unwrap();
        wait_for("keys", Duration::from_secs(10), || {
            agent.shared().cm.lock().unwrap().has_keys()
        });
        agent
    };
    let agent = start(true);
    let job = format!("job_{TS}_0002");
    {
        let m = Minter::new(&agent, &whoami());
        let a = attempt(2);
        let client = m.client_with(
            ClientAuth::token(m.nm_token(a, &m.node(), None, false), vec![Qop::Auth]),
            &a.to_string(),
        );
        let c = ContainerId {
            app: a.app,
            attempt: 1,
            id: 2,
        };
        let mut task = m.start_request(c, &agent.node_id(), now_ms() + 600_000, "true");
        task.container_launch_context
            .as_mut()
            .unwrap()
            .service_data
            .push(service_data(&job, &[9; 8]));
        let r: StartContainersResponseProto = call(
            &client,
            cmp::START_CONTAINERS,
            &StartContainersRequestProto {
                start_container_request: vec![task],
            },
        )
        .unwrap();
        assert!(r.failed_requests.is_empty(), "{:?}", r.failed_requests);
    }
    assert!(probe(agent.shuffle_port().unwrap(), &job).contains("fetcher cannot be authenticated"));
    agent.stop();
    agent.join();
    let again = start(true);
    assert!(
        probe(again.shuffle_port().unwrap(), &job).contains("fetcher cannot be authenticated"),
        "the job was not recovered"
    );
    again.stop();
    again.join();
    // without recovery the registration is not read back
    let plain = start(false);
    assert!(probe(plain.shuffle_port().unwrap(), &job).contains("Can't find job token"));
}
