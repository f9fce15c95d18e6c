//! A container on a hotpath agent reads a Kerberized HDFS (`hdfs --kerberos true`, MiniKdc)
//! with the application's HDFS delegation token alone, end to end: the test gets the token
//! from the NameNode over Kerberos (the client keytab, as a submitting client does), puts it in
//! the launch context of a `startContainers` call to a running agent (ContainerManagementProtocol
//! over IPC with an NMToken, as an ApplicationMaster calls it), and the container's command runs
//! `hotpath hdfs cat` of a file on that HDFS. The agent writes the tokens to the container's
//! `container_tokens` (`HADOOP_TOKEN_FILE_LOCATION`); the cluster's configuration reaches the
//! container through `HADOOP_CONF_DIR` (in `yarn.nodemanager.env-whitelist`). The process has no
//! Kerberos ticket (`KRB5CCNAME` names an empty cache, no client keytab), so the read can only
//! authenticate with the token: the bytes land in the container's stdout log and the NameNode's
//! audit log says `auth:TOKEN`. A container started without the token fails, its stderr naming
//! the missing token.
//!
//! MIT's environment and `HADOOP_CONF_DIR` are process-wide (the agent runs in this process and
//! its containers inherit them): one test in this binary.

use std::fs;
use std::path::Path;
use std::time::Duration;

use agent::demo::{Cluster, DemoConfig};
use hadoop_wire::pb::hadoop::yarn::{StartContainersRequestProto, StartContainersResponseProto};
use hadoop_wire::token::{Credentials, Format};
use hadoop_wire::yarn::cmp;
use hdfs_io::namenode::{NameNodeClient, NameNodeConfig, NameNodeKerberos};
use nm_core::ids::{AppId, AttemptId, ContainerId};
use nm_runtime::{Agent, AgentConfig};
use peer_harness::{Kerberos, Mode, Peer};

#[path = "support/cmp.rs"]
mod cmp_support;
use cmp_support::{call, now_ms, wait_for, Minter};

fn attempt(app: i32) -> AttemptId {
    AttemptId {
        app: AppId {
            cluster_timestamp: 1_700_000_000_000,
            id: app,
        },
        attempt: 1,
    }
}

fn container(app: i32, n: i64) -> ContainerId {
    ContainerId {
        app: attempt(app).app,
        attempt: 1,
        id: n,
    }
}

fn whoami() -> String {
    std::env::var("USER").unwrap_or_else(|_| "root".into())
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

/// NameNode audit lines for `cmd` on `src` by `ugi` (`user@REALM (auth:…)`).
fn audited(peer: &Peer, ugi: &str, cmd: &str, src: &str) -> usize {
    fs::read_to_string(peer.log_path())
        .expect("peer log")
        .lines()
        .filter(|l| {
            l.contains(&format!("ugi={ugi}\t"))
                && l.contains(&format!("cmd={cmd}\t"))
                && l.contains(&format!("src={src}\t"))
        })
        .count()
}

#[test]
fn a_container_reads_kerberized_hdfs_with_its_delegation_token_alone() {
    let mut peer = Peer::start(
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
    )
    .expect("Kerberized hdfs peer");
    let k = peer.kerberos().expect("READY kerberos");
    let len = (1u64 << 20) + 12_345; // two blocks of 1 MiB
    let w = peer
        .command(&format!("write /ctok/f {len}"))
        .expect("write");
    let sum = w["sha256"].as_str().unwrap().to_string();

    // The agent's process (and so its containers): the cluster's krb5.conf and configuration,
    // no ticket (an empty cache of the test's own, not the default /tmp/krb5cc_UID), no keytab.
    let dir = tempfile::tempdir().unwrap();
    Kerberos::realm_process(&k.krb5_conf, dir.path());
    std::env::set_var("HADOOP_CONF_DIR", peer.conf_dir());

    // The application's token, as a submitting client gets it: over Kerberos, from its keytab.
    let conf = conf::Configuration::load_dir(peer.conf_dir()).unwrap();
    let krb = NameNodeClient::from_conf_with(
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
    let token = krb
        .get_delegation_token("yarn")
        .unwrap_or_else(|e| panic!("getDelegationToken: {e}\n{}", peer.log_tail(40)))
        .expect("a secure NameNode issues tokens");
    let mut creds = Credentials::new();
    creds.add_token(token.service.clone(), token.clone());
    let tokens = creds.write(Format::Writable);

    // A node: the embedded rm-core and an agent registered with it.
    let cluster = Cluster::start(DemoConfig {
        agents: 0,
        heartbeat_ms: 200,
        ..DemoConfig::default()
    })
    .unwrap();
    let node_dir = dir.path().join("node");
    fs::create_dir(&node_dir).unwrap();
    let cfg =
        AgentConfig::local(cluster.rm_addr(), "127.0.0.31".parse().unwrap(), &node_dir).unwrap();
    let log_root = cfg.nm.log_dirs[0].clone();
    let agent = Agent::start(cfg).unwrap();
    wait_for("keys", Duration::from_secs(10), || {
        agent.shared().cm.lock().unwrap().has_keys()
    });
    let m = Minter::new(&agent, &whoami());
    let a = attempt(1);
    let client = m.client(a);
    let me = agent.node_id();
    let exe = env!("CARGO_BIN_EXE_hotpath");
    // The command says on stderr whether MIT finds a ticket (it must not), then reads. (The
    // launch script runs it as `bash -c "…"`, as Java's does: no double quotes in it.)
    let command = format!(
        "{{ {{ if klist -s; then echo a Kerberos ticket is here; else echo no Kerberos ticket; fi; \
         echo conf=$HADOOP_CONF_DIR tokens=$HADOOP_TOKEN_FILE_LOCATION; }} 1>&2; \
         exec {exe} hdfs cat /ctok/f; }} 1><LOG_DIR>/stdout 2><LOG_DIR>/stderr"
    );
    let with = container(1, 2);
    let without = container(1, 3);
    let mut good = m.start_request(with, &me, now_ms() + 600_000, &command);
    good.container_launch_context.as_mut().unwrap().tokens = Some(tokens);
    let bare = m.start_request(without, &me, now_ms() + 600_000, &command);
    let r: StartContainersResponseProto = call(
        &client,
        cmp::START_CONTAINERS,
        &StartContainersRequestProto {
            start_container_request: vec![good, bare],
        },
    )
    .unwrap();
    assert_eq!(r.succeeded_requests.len(), 2, "{r:?}");

    let logs = |id: ContainerId| log_root.join(id.app.to_string()).join(id.to_string());
    let stderr_of =
        |id: ContainerId| fs::read_to_string(logs(id).join("stderr")).unwrap_or_default();
    // Completed containers leave the table once the RM has them; their exit codes stay in the
    // agent's private dir (`<pid file>.exitcode`, as Java's NodeManager writes it).
    let exit_code = |id: ContainerId| {
        let f = node_dir
            .join("local/nmPrivate")
            .join(id.app.to_string())
            .join(id.to_string())
            .join(format!("{id}.pid.exitcode"));
        fs::read_to_string(f).ok()?.trim().parse::<i32>().ok()
    };
    wait_for("both containers exit", Duration::from_secs(60), || {
        exit_code(with).is_some() && exit_code(without).is_some()
    });

    // 1. with the token: the file's bytes on stdout, read with auth:TOKEN
    let err = stderr_of(with);
    assert_eq!(
        exit_code(with),
        Some(0),
        "stderr: {err}\n{}",
        peer.log_tail(30)
    );
    assert!(err.contains("no Kerberos ticket"), "{err}");
    assert!(
        err.contains(&format!("conf={} ", peer.conf_dir().display()))
            && err.contains("/container_tokens"),
        "{err}"
    );
    let out = logs(with).join("stdout");
    assert_eq!(fs::metadata(&out).unwrap().len(), len);
    assert_eq!(sha256(&out), sum);
    let token_ugi = format!("{} (auth:TOKEN)", k.client_principal);
    assert_eq!(audited(&peer, &token_ugi, "open", "/ctok/f"), 1);
    let kerberos_ugi = format!("{} (auth:KERBEROS)", k.client_principal);
    assert_eq!(audited(&peer, &kerberos_ugi, "open", "/ctok/f"), 0);

    // 2. without: it fails, naming the token it lacks; nothing read
    let err = stderr_of(without);
    eprintln!("the container without a token: {err}");
    assert_eq!(exit_code(without), Some(1), "{err}");
    assert!(err.contains("no Kerberos ticket"), "{err}");
    let nn = peer.namenode_addr().unwrap();
    assert!(
        err.contains(&format!(
            "no HDFS_DELEGATION_TOKEN for the NameNode {nn} in the client's credentials \
             (0 tokens), and the Kerberos login failed"
        )),
        "{err}"
    );
    assert_eq!(fs::metadata(logs(without).join("stdout")).unwrap().len(), 0);
    assert_eq!(audited(&peer, &token_ugi, "open", "/ctok/f"), 1);

    drop(client);
    drop(agent);
    drop(cluster);
}
