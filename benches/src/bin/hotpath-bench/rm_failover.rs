//! `hotpath-bench rm-failover`: how fast a node finds the new active ResourceManager, a hotpath
//! agent beside a real Java NodeManager, in the same run against the same RMs.
//!
//! Two real RMs with HA on (`yarn-rm-ha`: MiniYARNCluster, manual failover, shared
//! FileSystemRMStateStore), one in-process agent and one Java NodeManager (`yarn-nm` peer), both
//! HA-configured alike (`ha.enabled`, `ha.rm-ids`, `resource-tracker.address.rmI`; each with
//! its own defaults otherwise: Java's 30 s retry interval, the agent's 100 ms → 2 s failover
//! sleeps). Each node reaches the RMs through loopback relays that count every accepted
//! connection (its connection attempts; a relayed connect the RM refuses closes at once, the
//! same failover trigger as a refused connect).
//!
//! Each run fails over the active RM (`failover FROM TO`: FROM to standby, then TO to active,
//! as `yarn rmadmin -transitionToStandby/-transitionToActive` do) and polls the new active's
//! node list (every ~10 ms) for each node's first answered heartbeat (RUNNING, response id ≥ 1
//! since its re-registration). Reported: from the old active's transition to standby to that
//! heartbeat, per node, and the connection attempts per second each node made meanwhile.
//! With `--outage-ms N` the active goes standby, the cluster has no active RM for N ms, then the
//! other RM becomes active; the time is then counted from the new active being ready, and the
//! attempts per second over the outage.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context, Result};
use peer_harness::{Mode, Peer};
use serde_json::Value;

/// Flags of `hotpath-bench rm-failover`.
#[derive(clap::Args, Debug, Clone)]
pub struct RmFailoverArgs {
    /// Failovers to measure.
    #[arg(long, default_value_t = 5)]
    pub runs: usize,
    /// 0: a plain failover; N: N ms with no active RM between the two transitions.
    #[arg(long, default_value_t = 0)]
    pub outage_ms: u64,
    /// How long to wait for a node after each failover before recording it as missing.
    #[arg(long, default_value_t = 120)]
    pub wait_s: u64,
}

struct CountingRelay {
    addr: SocketAddr,
    accepted: Arc<AtomicUsize>,
}

impl CountingRelay {
    fn start(upstream: SocketAddr) -> Result<CountingRelay> {
        let l = TcpListener::bind("127.0.0.1:0")?;
        let addr = l.local_addr()?;
        let accepted = Arc::new(AtomicUsize::new(0));
        let a = accepted.clone();
        std::thread::spawn(move || {
            for down in l.incoming() {
                let Ok(down) = down else { return };
                a.fetch_add(1, Relaxed);
                let Ok(up) = TcpStream::connect(upstream) else {
                    continue;
                };
                let (Ok(d2), Ok(u2)) = (down.try_clone(), up.try_clone()) else {
                    continue;
                };
                for (mut from, mut to) in [(d2, u2), (up, down)] {
                    std::thread::spawn(move || {
                        let _ = std::io::copy(&mut from, &mut to);
                        let _ = to.shutdown(std::net::Shutdown::Both);
                    });
                }
            }
        });
        Ok(CountingRelay { addr, accepted })
    }

    fn count(&self) -> usize {
        self.accepted.load(Relaxed)
    }
}

fn epoch_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

fn active_nodes(rm: &mut Peer) -> Result<(i64, Vec<Value>)> {
    let v = rm.command("nodes")?;
    Ok((
        v["active"].as_i64().unwrap_or(-1),
        v["nodes"].as_array().cloned().unwrap_or_default(),
    ))
}

/// HA keys naming `addrs[i]` as rm-id i's resource tracker.
fn ha_keys(ready: &Value, addrs: &[SocketAddr]) -> Vec<(String, String)> {
    let mut k = vec![
        (
            "yarn.resourcemanager.ha.enabled".to_string(),
            "true".to_string(),
        ),
        (
            "yarn.resourcemanager.ha.rm-ids".to_string(),
            ready["rm_ids"].as_str().unwrap_or_default().to_string(),
        ),
    ];
    for (rm, a) in ready["rms"].as_array().into_iter().flatten().zip(addrs) {
        k.push((
            format!(
                "yarn.resourcemanager.resource-tracker.address.{}",
                rm["rm_id"].as_str().unwrap_or_default()
            ),
            a.to_string(),
        ));
    }
    k
}

fn stats(v: &[i64]) -> String {
    if v.is_empty() {
        return "none".into();
    }
    let mut s = v.to_vec();
    s.sort();
    format!(
        "median {} ms (min {}, max {}, n {})",
        s[s.len() / 2],
        s[0],
        s[s.len() - 1],
        s.len()
    )
}

pub fn run(args: RmFailoverArgs) -> Result<()> {
    let mut rm = Peer::start(Mode::YarnRmHa, &["--profile", "agents"]).context("yarn-rm-ha")?;
    let ready = rm.ready().clone();
    let rts: Vec<SocketAddr> = ready["rms"]
        .as_array()
        .ok_or_else(|| anyhow!("no rms in {ready}"))?
        .iter()
        .map(|r| {
            r["resource_tracker"]
                .as_str()
                .unwrap_or_default()
                .parse()
                .context("resource_tracker")
        })
        .collect::<Result<_>>()?;
    let relays_agent: Vec<CountingRelay> = rts
        .iter()
        .map(|a| CountingRelay::start(*a))
        .collect::<Result<_>>()?;
    let relays_java: Vec<CountingRelay> = rts
        .iter()
        .map(|a| CountingRelay::start(*a))
        .collect::<Result<_>>()?;
    let agent_addrs: Vec<SocketAddr> = relays_agent.iter().map(|r| r.addr).collect();
    let java_addrs: Vec<SocketAddr> = relays_java.iter().map(|r| r.addr).collect();

    // the agent, in this process
    let dir = tempfile::tempdir()?;
    let mut conf = conf::Configuration::new();
    for (k, v) in ha_keys(&ready, &agent_addrs) {
        conf.set(&k, &v);
    }
    let mut cfg =
        nm_runtime::AgentConfig::local(agent_addrs[0], "127.0.0.81".parse()?, dir.path())?;
    cfg.rm_ha =
        nm_runtime::config::RmHa::from_conf(&conf, cfg.connect_max_wait, cfg.retry_interval)?;
    cfg.memory_mb = 4096;
    cfg.vcores = 4;
    let agent = nm_runtime::Agent::start(cfg)?;
    // the Java NodeManager, Java's defaults otherwise
    let mut java_args = vec!["--rm".to_string(), java_addrs[0].to_string()];
    for (k, v) in ha_keys(&ready, &java_addrs) {
        java_args.push("--set".into());
        java_args.push(format!("{k}={v}"));
    }
    let refs: Vec<&str> = java_args.iter().map(String::as_str).collect();
    let mut java = Peer::start(Mode::YarnNm, &refs).context("yarn-nm")?;
    let nodes = [
        agent.node_id(),
        java.ready()["node_id"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
    ];
    let relays = [&relays_agent, &relays_java];
    let mut active = rm.command("active")?["active"].as_i64().unwrap_or(0);
    let t0 = Instant::now();
    loop {
        let (_, list) = active_nodes(&mut rm)?;
        if nodes.iter().all(|n| {
            list.iter()
                .any(|x| x["node_id"] == n.as_str() && x["state"] == "RUNNING")
        }) {
            break;
        }
        if t0.elapsed() > Duration::from_secs(120) {
            return Err(anyhow!("nodes {nodes:?} not RUNNING at the RM in 120 s"));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    println!(
        "rm-failover: 2 RMs, agent {} and Java NodeManager {}; {} runs, outage {} ms",
        nodes[0], nodes[1], args.runs, args.outage_ms
    );
    let mut took: [Vec<i64>; 2] = [Vec::new(), Vec::new()];
    let mut rates: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
    for run in 0..args.runs {
        let next = 1 - active;
        let before: Vec<usize> = relays
            .iter()
            .map(|r| r.iter().map(CountingRelay::count).sum())
            .collect();
        let started = Instant::now();
        let from_ms = if args.outage_ms == 0 {
            let fo = rm.command(&format!("failover {active} {next}"))?;
            fo["standby_done_epoch_ms"].as_i64().unwrap_or(0)
        } else {
            rm.command(&format!("transition {active} standby"))?;
            std::thread::sleep(Duration::from_millis(args.outage_ms));
            let t = rm.command(&format!("transition {next} active"))?;
            t["done_epoch_ms"].as_i64().unwrap_or(0)
        };
        let outage_counts: Vec<usize> = relays
            .iter()
            .zip(&before)
            .map(|(r, b)| r.iter().map(CountingRelay::count).sum::<usize>() - b)
            .collect();
        let outage_s = started.elapsed().as_secs_f64();
        let mut seen: [Option<(i64, f64)>; 2] = [None, None];
        let deadline = Instant::now() + Duration::from_secs(args.wait_s);
        while seen.iter().any(Option::is_none) && Instant::now() < deadline {
            let (a, list) = active_nodes(&mut rm)?;
            let now = epoch_ms();
            if a == next {
                for i in 0..2 {
                    if seen[i].is_none()
                        && list.iter().any(|x| {
                            x["node_id"] == nodes[i].as_str()
                                && x["response_id"].as_i64() >= Some(1)
                        })
                    {
                        let n: usize = relays[i].iter().map(CountingRelay::count).sum();
                        let window = started.elapsed().as_secs_f64();
                        let rate = if args.outage_ms > 0 {
                            outage_counts[i] as f64 / outage_s
                        } else {
                            (n - before[i]) as f64 / window
                        };
                        seen[i] = Some((now - from_ms, rate));
                    }
                }
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let show = |s: Option<(i64, f64)>| {
            s.map_or("not within the wait".to_string(), |(ms, r)| {
                format!("{ms} ms, {r:.1} connects/s")
            })
        };
        println!(
            "run {run}: rm{active} -> rm{next}: agent {}; Java NodeManager {}",
            show(seen[0]),
            show(seen[1])
        );
        for i in 0..2 {
            if let Some((ms, r)) = seen[i] {
                took[i].push(ms);
                rates[i].push(r);
            }
        }
        active = next;
    }
    let rate = |v: &[f64]| {
        let mut s = v.to_vec();
        s.sort_by(f64::total_cmp);
        s.get(s.len() / 2).map_or("none".into(), |m| {
            format!(
                "median {m:.1}/s (min {:.1}, max {:.1})",
                s[0],
                s[s.len() - 1]
            )
        })
    };
    println!(
        "to the first heartbeat answered by the new active ({}): agent {}; Java NodeManager {}",
        if args.outage_ms > 0 {
            "from the new active ready"
        } else {
            "from the old active's transition to standby"
        },
        stats(&took[0]),
        stats(&took[1])
    );
    println!(
        "connection attempts per second ({}): agent {}; Java NodeManager {}",
        if args.outage_ms > 0 {
            "during the outage"
        } else {
            "until that heartbeat"
        },
        rate(&rates[0]),
        rate(&rates[1])
    );
    let _ = java.command("nm-stop");
    agent.stop();
    let _ = agent.join();
    Ok(())
}
