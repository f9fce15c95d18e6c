//! The heartbeat measurement: fixtures, our path, the eager (Java-like) baseline, and a
//! plain timing loop. Used by the criterion bench (`benches/benches/heartbeat.rs`), the
//! allocation test, and `hotpath-bench heartbeat` (whose `--json` keys are the fields of
//! [`HeartbeatFigures`]).
//!
//! The fixture ([`testkit::heartbeat`], shared with rm-core's tests) is what a Java
//! NodeManager sends: a `NodeHeartbeatRequestProto` whose `NodeStatusProto` carries
//! [`CONTAINERS`] RUNNING GUARANTEED container statuses, each with a full container id, empty
//! diagnostics, exit status −1000, a capability with memory, vcores and the `memory-mb` /
//! `vcores` resource map entries (as `ResourcePBImpl` writes them), the
//! execution type and the sub-state; plus health, utilization and both last-known master keys.
//! The containers are already known (steady state).
//!
//! - **ours** ([`HeartbeatBench::ours`]): decode through the views and update the node state —
//!   id, state, exit status and execution type of every status are read
//!   ([`ContainerStatusView::summary`](hadoop_wire::view::yarn::ContainerStatusView::summary)), the
//!   capability only when opportunistic containers are on.
//! - **eager** ([`HeartbeatBench::eager`]): what Java does before YARN-11878: decode the whole
//!   request with prost into owned structs, then for every RUNNING/NEW status build a map-based
//!   Resource from the capability twice (the null check and the add of
//!   `ContainerStatusPBImpl.getCapability()`, which is not memoized), each one a map of resource
//!   name → owned `ResourceInformation` with `String` name and units, units converted; then the
//!   same state update.
//! - **end to end** ([`HeartbeatBench::end_to_end`]): the tracker (node lookup, responseId,
//!   keys, response encoding, the copy into the shard's inbox) plus the shard's handling.

use std::collections::BTreeMap;
use std::hint::black_box;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hadoop_wire::pb::hadoop::yarn::{
    ContainerStateProto, ExecutionTypeProto, NodeHeartbeatRequestProto, ResourceProto,
};
use hadoop_wire::view::yarn::NodeHeartbeatRequestView;
use prost::Message;

use rm_core::dispatcher::Clock;
use rm_core::hosts::HostLists;
use rm_core::ids::NodeKey;
use rm_core::mailbox::{Inbox, Mailbox};
use rm_core::master_key::SeededEntropy;
use rm_core::shard::Shard;
use rm_core::tracker::{next_response_id, HeartbeatOutcome, ResourceTracker};
use rm_core::{Error, RmConfig};

pub use testkit::heartbeat::{
    capability, container_status, containers, heartbeat_request, node_status, register_request,
    set_response_id, CLUSTER_TS, CONTAINERS,
};

// ---------------------------------------------------------------------------------------
// The eager baseline's Resource (what ResourcePBImpl builds).

/// `ResourceInformation`, owned.
#[derive(Debug, Clone)]
pub struct JavaResourceInformation {
    pub name: String,
    pub units: String,
    pub resource_type: i32,
    pub value: i64,
    pub minimum_allocation: i64,
    pub maximum_allocation: i64,
    pub tags: Vec<String>,
    pub attributes: BTreeMap<String, String>,
}

/// A map-based `Resource`.
#[derive(Debug, Clone, Default)]
pub struct JavaResource {
    pub resources: BTreeMap<String, JavaResourceInformation>,
}

/// The configured resource types (`ResourceUtils.getResourceTypesArray()`): name, units.
pub const RESOURCE_TYPES: [(&str, &str); 2] = [("memory-mb", "Mi"), ("vcores", "")];

fn unit_scale(u: &str) -> Option<i128> {
    Some(match u {
        "" => 1,
        "k" => 1_000,
        "M" => 1_000_000,
        "G" => 1_000_000_000,
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        "Gi" => 1 << 30,
        "Ti" => 1 << 40,
        _ => return None,
    })
}

/// `UnitsConversionUtil.convert`.
fn convert(from: &str, to: &str, v: i64) -> i64 {
    if from == to {
        return v;
    }
    match (unit_scale(from), unit_scale(to)) {
        (Some(f), Some(t)) => (v as i128 * f / t) as i64,
        _ => v,
    }
}

impl JavaResource {
    /// `new ResourcePBImpl(proto)`: one `ResourceInformation` per configured type, then the
    /// proto's values (map entries converted to the type's units, then memory and vcores).
    pub fn from_proto(p: &ResourceProto) -> JavaResource {
        let mut resources = BTreeMap::new();
        for (name, units) in RESOURCE_TYPES {
            resources.insert(
                name.to_string(),
                JavaResourceInformation {
                    name: name.to_string(),
                    units: units.to_string(),
                    resource_type: 0,
                    value: 0,
                    minimum_allocation: 0,
                    maximum_allocation: i64::MAX,
                    tags: Vec::new(),
                    attributes: BTreeMap::new(),
                },
            );
        }
        for e in &p.resource_value_map {
            let units = e.units.clone().unwrap_or_default();
            let value = e.value.unwrap_or(0);
            match resources.get_mut(&e.key) {
                Some(ri) => {
                    ri.value = convert(&units, &ri.units, value);
                    ri.tags = e.tags.clone();
                    ri.attributes = e
                        .attributes
                        .iter()
                        .map(|a| {
                            (
                                a.key.clone().unwrap_or_default(),
                                a.value.clone().unwrap_or_default(),
                            )
                        })
                        .collect();
                }
                None => {
                    resources.insert(
                        e.key.clone(),
                        JavaResourceInformation {
                            name: e.key.clone(),
                            units,
                            resource_type: e.r#type.unwrap_or(0),
                            value,
                            minimum_allocation: 0,
                            maximum_allocation: i64::MAX,
                            tags: e.tags.clone(),
                            attributes: BTreeMap::new(),
                        },
                    );
                }
            }
        }
        if let (Some(m), Some(ri)) = (p.memory, resources.get_mut("memory-mb")) {
            ri.value = m;
        }
        if let (Some(v), Some(ri)) = (p.virtual_cores, resources.get_mut("vcores")) {
            ri.value = v as i64;
        }
        JavaResource { resources }
    }

    /// `Resources.addTo`.
    pub fn add(&mut self, other: &JavaResource) {
        for (k, ri) in &other.resources {
            match self.resources.get_mut(k) {
                Some(mine) => mine.value += convert(&ri.units, &mine.units, ri.value),
                None => {
                    self.resources.insert(k.clone(), ri.clone());
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------

/// A tracker and one shard (sans-IO) with one registered node that already knows the
/// fixture's containers.
pub struct HeartbeatBench {
    pub request: Vec<u8>,
    /// The same statuses in reverse order: alternating with `request` defeats the
    /// per-position container-id cache ([`HeartbeatBench::ours_cold`]).
    reversed: Vec<u8>,
    flip: bool,
    rid_at: usize,
    rid: i32,
    tracker: ResourceTracker,
    mailbox: Arc<Mailbox>,
    shard: Shard,
    node: u32,
    clock: Clock,
    out: Vec<u8>,
    eager_allocated: JavaResource,
    spare: Inbox,
}

impl HeartbeatBench {
    /// Sets up in `dir` (the completion log goes there).
    pub fn new(dir: &Path, opportunistic: bool) -> Result<HeartbeatBench, Error> {
        let cfg = RmConfig {
            opportunistic,
            completion_log_dir: dir.to_path_buf(),
            ..RmConfig::default()
        };
        let clock = Clock::default();
        let mailbox = Arc::new(Mailbox::new(usize::MAX));
        let mut tracker = ResourceTracker::new(
            cfg.clone(),
            HostLists::default(),
            vec![mailbox.clone()],
            CLUSTER_TS,
            Box::new(SeededEntropy(42)),
            clock.now_ns(),
        )?;
        let (mut shard, _) = Shard::open(dir, 0, 1, opportunistic)?;
        // The fixture repeats one heartbeat, which the RM answers through its steady-state
        // fast path (equal statuses are not read again). This bench measures the decode and
        // update itself, beside the eager baseline that has no such path: keep it off.
        shard.set_steady_fast_path(false);
        let id = NodeKey::new("127.0.0.1", 45454);
        let mut out = Vec::with_capacity(4096);
        tracker.register_node_manager(
            &register_request(&id, 65536, 32, "3.4.1"),
            clock.now_ns(),
            &mut out,
        )?;
        let node = tracker
            .node(&id.host, id.port)
            .map(|n| n.local)
            .unwrap_or(0);
        let statuses = containers(1, CONTAINERS)
            .into_iter()
            .map(|k| {
                container_status(
                    k,
                    ContainerStateProto::CRunning,
                    -1000,
                    ExecutionTypeProto::Guaranteed,
                )
            })
            .collect::<Vec<_>>();
        let ck = tracker.container_keys().current().key_id;
        let nk = tracker.nm_keys().current().key_id;
        let mut rev = statuses.clone();
        rev.reverse();
        let (reversed, _) = heartbeat_request(&node_status(&id, rev, true), 0, Some((ck, nk)));
        let (request, rid_at) =
            heartbeat_request(&node_status(&id, statuses, true), 0, Some((ck, nk)));
        let mut b = HeartbeatBench {
            request,
            reversed,
            flip: false,
            rid_at,
            rid: 0,
            tracker,
            mailbox,
            shard,
            node,
            clock,
            out,
            eager_allocated: JavaResource::default(),
            spare: Inbox::default(),
        };
        // Warm up: registration, first heartbeats (containers become known), buffers sized.
        b.drain()?;
        for _ in 0..4 {
            b.end_to_end()?;
        }
        if b.shard.node(node).map(|n| n.launched_len()) != Some(CONTAINERS) {
            return Err(Error::BadConfig(
                "bench fixture: containers not launched".into(),
            ));
        }
        Ok(b)
    }

    fn drain(&mut self) -> Result<(), Error> {
        let clock = self.clock;
        let now = move || (CLUSTER_TS as u64, clock.now_ns());
        self.shard.run_once(&self.mailbox, Duration::ZERO, &now)?;
        Ok(())
    }

    /// Ours: decode + state update of the fixture heartbeat.
    #[inline]
    pub fn ours(&mut self) -> Result<(), Error> {
        let req = NodeHeartbeatRequestView::new(&self.request);
        let status = req
            .node_status()
            .map_err(|source| Error::Decode {
                message: "NodeHeartbeatRequestProto",
                source,
            })?
            .ok_or(Error::Missing {
                message: "NodeHeartbeatRequestProto",
                field: "node_status",
            })?;
        self.shard
            .apply_status(self.node, status, CLUSTER_TS as u64)
            .map_err(|source| Error::Decode {
                message: "NodeStatusProto",
                source,
            })
    }

    /// Ours with every container id parsed and hashed: the statuses arrive in alternating
    /// orders, so the per-position id cache never hits (a NodeManager that reorders its
    /// containers every heartbeat).
    pub fn ours_cold(&mut self) -> Result<(), Error> {
        self.flip = !self.flip;
        let bytes = if self.flip {
            &self.reversed
        } else {
            &self.request
        };
        let req = NodeHeartbeatRequestView::new(bytes);
        let status = req
            .node_status()
            .map_err(|source| Error::Decode {
                message: "NodeHeartbeatRequestProto",
                source,
            })?
            .ok_or(Error::Missing {
                message: "NodeHeartbeatRequestProto",
                field: "node_status",
            })?;
        self.shard
            .apply_status(self.node, status, CLUSTER_TS as u64)
            .map_err(|source| Error::Decode {
                message: "NodeStatusProto",
                source,
            })
    }

    /// The eager baseline: prost decode + two map Resources per RUNNING/NEW status + the same
    /// state update.
    pub fn eager(&mut self) -> Result<(), Error> {
        let req = NodeHeartbeatRequestProto::decode(&self.request[..]).map_err(|source| {
            Error::Prost {
                message: "NodeHeartbeatRequestProto",
                source,
            }
        })?;
        let Some(status) = req.node_status.as_ref() else {
            return Err(Error::Missing {
                message: "NodeHeartbeatRequestProto",
                field: "node_status",
            });
        };
        let mut allocated = std::mem::take(&mut self.eager_allocated);
        allocated.resources.clear();
        self.shard
            .apply_status_owned(self.node, status, CLUSTER_TS as u64, |cs| {
                let st = cs.state.unwrap_or(0);
                if st == ContainerStateProto::CRunning as i32
                    || st == ContainerStateProto::CNew as i32
                {
                    // getCapability() != null: the first conversion, thrown away.
                    let first = cs.capability.as_ref().map(JavaResource::from_proto);
                    if black_box(first).is_some() {
                        // Resources.addTo(allocated, getCapability()): the second.
                        if let Some(c) = cs.capability.as_ref() {
                            allocated.add(&JavaResource::from_proto(c));
                        }
                    }
                }
            });
        black_box(&allocated);
        self.eager_allocated = allocated;
        black_box(req);
        Ok(())
    }

    /// Tracker (answer + hand-over) and shard (decode + state update), one heartbeat.
    pub fn end_to_end(&mut self) -> Result<(), Error> {
        set_response_id(&mut self.request, self.rid_at, self.rid);
        self.out.clear();
        let o = self
            .tracker
            .node_heartbeat(&self.request, self.clock.now_ns(), &mut self.out)?;
        if !matches!(o, HeartbeatOutcome::Normal { .. }) {
            return Err(Error::BadConfig(format!("bench heartbeat answered {o:?}")));
        }
        self.rid = next_response_id(self.rid);
        black_box(&self.out);
        self.drain()
    }

    /// The tracker half alone (the shard's inbox is emptied without processing).
    pub fn tracker_only(&mut self) -> Result<(), Error> {
        set_response_id(&mut self.request, self.rid_at, self.rid);
        self.out.clear();
        self.tracker
            .node_heartbeat(&self.request, self.clock.now_ns(), &mut self.out)?;
        self.rid = next_response_id(self.rid);
        black_box(&self.out);
        // Hand the entry over and drop it, as if a shard took it.
        self.mailbox.take_inbox(&mut self.spare, Duration::ZERO);
        self.spare.clear();
        Ok(())
    }

    /// Containers the node has launched (a check that the work really happened).
    pub fn launched(&self) -> usize {
        self.shard
            .node(self.node)
            .map(|n| n.launched_len())
            .unwrap_or(0)
    }

    /// Node-level allocated resource (opportunistic mode).
    pub fn allocated_memory_mb(&self) -> i64 {
        self.shard
            .node(self.node)
            .map(|n| n.allocated().memory_mb)
            .unwrap_or(0)
    }

    /// The eager baseline's allocated memory from the last run.
    pub fn eager_allocated_memory_mb(&self) -> i64 {
        self.eager_allocated
            .resources
            .get("memory-mb")
            .map(|r| r.value)
            .unwrap_or(0)
    }
}

/// The figures `hotpath bench heartbeat --json` prints.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HeartbeatFigures {
    pub ours_ns: f64,
    pub ours_opportunistic_ns: f64,
    pub eager_ns: f64,
    /// eager / ours.
    pub ratio: f64,
    /// Allocations per end-to-end heartbeat in steady state (`None` without a counter).
    pub allocs_per_hb: Option<f64>,
    pub tracker_ns: f64,
    pub end_to_end_ns: f64,
    /// Ours with the per-position id cache defeated.
    pub ours_cold_ns: f64,
}

/// ns per call of `f`: the best of `rounds` rounds of about `round` each. The best round,
/// not the median: on a shared machine the spread comes from other processes taking the CPU,
/// and the least disturbed round is the closest to the cost of the code.
pub fn time_ns(
    round: Duration,
    rounds: usize,
    mut f: impl FnMut() -> Result<(), Error>,
) -> Result<f64, Error> {
    // Calibrate the iteration count.
    let mut iters = 1u64;
    loop {
        let t = Instant::now();
        for _ in 0..iters {
            f()?;
        }
        if t.elapsed() >= round / 4 || iters >= 1 << 30 {
            let per = t.elapsed().as_secs_f64() / iters as f64;
            iters = ((round.as_secs_f64() / per.max(1e-9)) as u64).max(1);
            break;
        }
        iters *= 2;
    }
    let mut samples = Vec::with_capacity(rounds);
    for _ in 0..rounds.max(1) {
        let t = Instant::now();
        for _ in 0..iters {
            f()?;
        }
        samples.push(t.elapsed().as_nanos() as f64 / iters as f64);
    }
    samples.sort_by(f64::total_cmp);
    Ok(samples[0])
}

/// Allocations per call of `f` after warm-up, read from `allocations` (a global counter).
pub fn allocs_per_call(
    iters: u64,
    allocations: &dyn Fn() -> u64,
    mut f: impl FnMut() -> Result<(), Error>,
) -> Result<f64, Error> {
    for _ in 0..16 {
        f()?;
    }
    let before = allocations();
    for _ in 0..iters {
        f()?;
    }
    Ok((allocations() - before) as f64 / iters as f64)
}

/// Runs every measurement (`round` per round, best of 5 rounds each). `dir` holds scratch completion
/// logs. `allocations` reads a global allocation counter if the binary installed one.
pub fn measure(
    dir: &Path,
    round: Duration,
    allocations: Option<&dyn Fn() -> u64>,
) -> Result<HeartbeatFigures, Error> {
    let rounds = 5;
    let mut off = HeartbeatBench::new(&dir.join("off"), false)?;
    let mut on = HeartbeatBench::new(&dir.join("on"), true)?;
    let mut eager = HeartbeatBench::new(&dir.join("eager"), false)?;
    let ours_ns = time_ns(round, rounds, || off.ours())?;
    let ours_opportunistic_ns = time_ns(round, rounds, || on.ours())?;
    let eager_ns = time_ns(round, rounds, || eager.eager())?;
    let end_to_end_ns = time_ns(round, rounds, || off.end_to_end())?;
    let mut cold = HeartbeatBench::new(&dir.join("cold"), false)?;
    let ours_cold_ns = time_ns(round, rounds, || cold.ours_cold())?;
    let mut tr = HeartbeatBench::new(&dir.join("tracker"), false)?;
    let tracker_ns = time_ns(round, rounds, || tr.tracker_only())?;
    let allocs_per_hb = match allocations {
        Some(a) => Some(allocs_per_call(1000, a, || off.end_to_end())?),
        None => None,
    };
    if off.launched() != CONTAINERS || on.allocated_memory_mb() != 2048 * CONTAINERS as i64 {
        return Err(Error::BadConfig("bench state check failed".into()));
    }
    Ok(HeartbeatFigures {
        ours_ns,
        ours_opportunistic_ns,
        eager_ns,
        ratio: eager_ns / ours_ns,
        allocs_per_hb,
        tracker_ns,
        end_to_end_ns,
        ours_cold_ns,
    })
}

impl HeartbeatFigures {
    /// The JSON object `hotpath bench heartbeat --json` prints (keys in this order).
    pub fn to_json(&self) -> String {
        let allocs = match self.allocs_per_hb {
            Some(a) => format!("{a}"),
            None => "null".into(),
        };
        format!(
            "{{\"ours_ns\":{:.1},\"ours_opportunistic_ns\":{:.1},\"eager_ns\":{:.1},\"ratio\":{:.1},\"allocs_per_hb\":{},\"tracker_ns\":{:.1},\"end_to_end_ns\":{:.1},\"ours_cold_ns\":{:.1}}}",
            self.ours_ns, self.ours_opportunistic_ns, self.eager_ns, self.ratio, allocs, self.tracker_ns, self.end_to_end_ns, self.ours_cold_ns
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixture_paths_agree() {
        let dir = tempfile::tempdir().unwrap();
        let mut b = HeartbeatBench::new(dir.path(), true).unwrap();
        b.ours().unwrap();
        assert_eq!(b.launched(), CONTAINERS);
        assert_eq!(b.allocated_memory_mb(), 2048 * CONTAINERS as i64);
        b.eager().unwrap();
        assert_eq!(b.launched(), CONTAINERS);
        for _ in 0..3 {
            b.ours_cold().unwrap();
        }
        assert_eq!(b.launched(), CONTAINERS);
        assert_eq!(b.eager_allocated_memory_mb(), 2048 * CONTAINERS as i64);
        for _ in 0..3 {
            b.end_to_end().unwrap();
        }
        assert_eq!(b.launched(), CONTAINERS);
        // The padded responseId reads back.
        let mut r = b.request.clone();
        set_response_id(&mut r, b.rid_at, 123_456_789);
        let v = NodeHeartbeatRequestView::new(&r);
        assert_eq!(
            v.node_status().unwrap().unwrap().response_id().unwrap(),
            Some(123_456_789)
        );
        let p = NodeHeartbeatRequestProto::decode(&r[..]).unwrap();
        assert_eq!(p.node_status.unwrap().response_id, Some(123_456_789));
    }

    #[test]
    fn java_resource_conversion() {
        let mut p = capability(2048, 2);
        p.memory = None;
        p.resource_value_map[0].value = Some(2);
        p.resource_value_map[0].units = Some("Gi".into());
        let r = JavaResource::from_proto(&p);
        assert_eq!(r.resources["memory-mb"].value, 2048);
        assert_eq!(r.resources["vcores"].value, 2);
    }
}
