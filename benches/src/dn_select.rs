//! The `dn-select` measurement, shared by `benches/benches/dn_select.rs`, the tests and the
//! CLI (`hotpath-bench dn-select`): the DataNode choice for a 3-replica block with a warm
//! address cache, against a baseline that does what Java's read path does per block.
//!
//! - **ours** ([`DnSelect::ours`]): [`Selector::choose`] over the block's replicas (decoded
//!   once per NameNode response, as Java decodes the response into `DatanodeInfo` objects once):
//!   dead/ignored filter, health and locality ranking, stable sort, address-cache hit.
//! - **ours with decode** ([`DnSelect::ours_with_decode`]): the same plus decoding the three
//!   DatanodeInfos from the response bytes, i.e. the cost if nothing were kept between reads.
//! - **baseline** ([`DnSelect::baseline`]): Java's `getBestNodeDNAddrPair` + `NetUtils.createSocketAddr`
//!   on the NameNode's first replica: a dead-node map probe, then the `ipAddr:xferPort` string
//!   (Java caches it in `DatanodeID`) trimmed, prefixed with `dummyscheme://`, parsed as a URI
//!   (`url` crate, as `java.net.URI`), host/port/path checks, the static-resolution map probe
//!   (a synchronized map in Java), then the IP literal parse (`InetAddress.getByName` on a
//!   literal) and the socket address. No DNS lookup.
//!
//! [`measure`] times each with rounds of a tight loop (thread CPU time) and reports the median round
//! (`ours_ns`, `baseline_ns`, `ratio`) and, when given an allocation counter (a counting
//! global allocator lives in the binary), allocations per call (`allocs`).

use hadoop_wire::view::hdfs::LocatedBlockView;
use hdfs_io::addr_cache::AddrCache;
use hdfs_io::dead_nodes::DeadNodes;
use hdfs_io::fixtures;
use hdfs_io::replica::{decode_replicas, Replica};
use hdfs_io::selection::{LazyNow, Selector};
use hdfs_io::topology::{LocalNode, RackMap};
use std::collections::HashMap;
use std::hint::black_box;
use std::net::{IpAddr, SocketAddr};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Everything one choice needs, set up once.
pub struct DnSelect {
    selector: Selector,
    dead: DeadNodes,
    cache: AddrCache,
    /// Java's `DatanodeID.xferAddr` strings, built once per DatanodeInfo.
    xfer_addrs: Vec<String>,
    /// The baseline's stand-ins for Java's `deadNodes` map and `NetUtils` static resolutions.
    java_dead: HashMap<Vec<u8>, ()>,
    static_resolutions: Mutex<HashMap<String, String>>,
}

impl Default for DnSelect {
    fn default() -> Self {
        Self::new()
    }
}

impl DnSelect {
    /// The 3-replica block of [`fixtures::three_replica_block`], a client on another host in
    /// rack `/r2` (so the ranking moves replica 1 first), a warm address cache.
    pub fn new() -> DnSelect {
        let bytes = fixtures::three_replica_block();
        let selector = Selector::new(
            LocalNode::with_names(["client.example", "10.9.9.9"]),
            RackMap::default(),
            Some(b"/r2"),
            false,
        );
        let mut cache = AddrCache::default();
        let now = Instant::now();
        let mut xfer_addrs = Vec::new();
        {
            let mut reps = Vec::new();
            decode_replicas(&LocatedBlockView::new(&bytes), 0, &mut reps).expect("fixture decodes");
            for r in &reps {
                cache
                    .resolve(r.ip_addr, r.xfer_port, now, |_, _| {
                        unreachable!("IP literals")
                    })
                    .expect("literal");
                xfer_addrs.push(format!(
                    "{}:{}",
                    String::from_utf8_lossy(r.ip_addr),
                    r.xfer_port
                ));
            }
        }
        DnSelect {
            selector,
            dead: DeadNodes::default(),
            cache,
            xfer_addrs,
            java_dead: HashMap::new(),
            static_resolutions: Mutex::new(HashMap::new()),
        }
    }

    /// The block's bytes (a LocatedBlockProto); decode with [`decode_replicas`].
    pub fn block_bytes() -> Vec<u8> {
        fixtures::three_replica_block()
    }

    /// Our choice on decoded replicas: the chosen address (a cache hit).
    #[inline]
    pub fn ours(&self, replicas: &[Replica<'_>]) -> Option<SocketAddr> {
        let mut now = LazyNow::new();
        self.selector
            .choose(replicas, &self.dead, &[], &self.cache, &mut now)?
            .addr
            .copied()
    }

    /// Decode + choice, with a reused replica vector.
    #[inline]
    pub fn ours_with_decode<'a>(
        &self,
        bytes: &'a [u8],
        scratch: &mut Vec<Replica<'a>>,
    ) -> Option<SocketAddr> {
        decode_replicas(&LocatedBlockView::new(bytes), 0, scratch).ok()?;
        let mut now = LazyNow::new();
        self.selector
            .choose(scratch, &self.dead, &[], &self.cache, &mut now)?
            .addr
            .copied()
    }

    /// Java's per-block work (see the module docs) on replica 0 in the NameNode's order.
    #[inline]
    pub fn baseline(&self, replicas: &[Replica<'_>]) -> Option<SocketAddr> {
        let (i, _) = replicas
            .iter()
            .enumerate()
            .find(|(_, r)| !self.java_dead.contains_key(r.uuid))?;
        create_socket_addr(&self.xfer_addrs[i], &self.static_resolutions)
    }
}

/// What `NetUtils.createSocketAddr(target, -1, null, false)` does for an IP-literal target,
/// step by step (see the module docs). `None` where Java throws or returns an unresolved
/// address.
pub fn create_socket_addr(
    target: &str,
    static_resolutions: &Mutex<HashMap<String, String>>,
) -> Option<SocketAddr> {
    let target = target.trim();
    let has_scheme = target.contains("://");
    let uri_text = if has_scheme {
        target.to_string()
    } else {
        format!("dummyscheme://{target}")
    };
    let uri = url::Url::parse(&uri_text).ok()?;
    let host = uri.host_str()?;
    let port = uri.port()?;
    if !has_scheme && !uri.path().is_empty() {
        return None;
    }
    // createSocketAddrForHost: static resolution first (a synchronized map in Java)
    let resolved = static_resolutions.lock().ok()?.get(host).cloned();
    let resolve_host = resolved.as_deref().unwrap_or(host);
    // SecurityUtil.getByName → InetAddress.getByName: an IP literal is parsed, not looked up
    let ip: IpAddr = resolve_host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .parse()
        .ok()?;
    Some(SocketAddr::new(ip, port))
}

/// Result of [`measure`]. The JSON keys of the CLI are the field names.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DnSelectReport {
    /// Median ns per choice, ours (decoded replicas, cache hit, ordering included).
    pub ours_ns: f64,
    /// Median ns per choice including decoding the three DatanodeInfos.
    pub ours_with_decode_ns: f64,
    /// Median ns per call of the Java-equivalent baseline.
    pub baseline_ns: f64,
    /// `baseline_ns / ours_ns`.
    pub ratio: f64,
    /// Heap allocations per choice, ours (`None` without a counter).
    pub allocs: Option<f64>,
    /// Heap allocations per call of the baseline.
    pub baseline_allocs: Option<f64>,
    /// Calls per batch (rounds last at least [`MIN_ROUND`]) and rounds.
    pub iterations: u64,
    pub rounds: u32,
}

impl DnSelectReport {
    /// One JSON object (no serde dependency here).
    pub fn to_json(&self) -> String {
        let opt = |v: Option<f64>| v.map_or("null".to_string(), |v| format!("{v}"));
        format!(
            "{{\"ours_ns\":{:.2},\"baseline_ns\":{:.2},\"ratio\":{:.2},\"allocs\":{},\"ours_with_decode_ns\":{:.2},\"baseline_allocs\":{},\"iterations\":{},\"rounds\":{}}}",
            self.ours_ns,
            self.baseline_ns,
            self.ratio,
            opt(self.allocs),
            self.ours_with_decode_ns,
            opt(self.baseline_allocs),
            self.iterations,
            self.rounds
        )
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// This thread's CPU time in ns (`/proc/thread-self/schedstat`, first field), if readable.
/// On a shared machine, wall time counts the time other processes hold the CPU; CPU time
/// does not.
pub fn thread_cpu_ns() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    s.split_whitespace().next()?.parse().ok()
}

/// Shortest round: `/proc/thread-self/schedstat` is brought up to date only at scheduler
/// ticks and switches (up to 4 ms late at HZ=250), so a round must be much longer than that.
pub const MIN_ROUND: std::time::Duration = std::time::Duration::from_millis(100);

/// Runs `f` in batches of `batch` calls for at least [`MIN_ROUND`] and returns ns per call:
/// thread CPU time when available, else wall time.
fn time_round(batch: u64, mut f: impl FnMut()) -> f64 {
    let c0 = thread_cpu_ns();
    let t = Instant::now();
    let mut n = 0u64;
    while t.elapsed() < MIN_ROUND {
        for _ in 0..batch {
            f();
        }
        n += batch;
    }
    let wall = t.elapsed().as_nanos() as f64;
    let ns = match (c0, thread_cpu_ns()) {
        (Some(a), Some(b)) if b > a => (b - a) as f64,
        _ => wall,
    };
    ns / n as f64
}

/// Allocations per call over `n` calls, by the counter's difference.
fn allocs_per_call(counter: fn() -> u64, n: u64, mut f: impl FnMut()) -> f64 {
    let a = counter();
    for _ in 0..n {
        f();
    }
    (counter() - a) as f64 / n as f64
}

/// Runs the measurement: `rounds` rounds of each path, each at least [`MIN_ROUND`] long, in
/// batches of `iterations` calls. `alloc_counter` reads a counting global allocator's total
/// allocations (process-wide: run it on a quiet process).
pub fn measure(iterations: u64, rounds: u32, alloc_counter: Option<fn() -> u64>) -> DnSelectReport {
    let iterations = iterations.max(1);
    let rounds = rounds.max(1);
    let s = DnSelect::new();
    let bytes = DnSelect::block_bytes();
    let mut reps = Vec::with_capacity(8);
    decode_replicas(&LocatedBlockView::new(&bytes), 0, &mut reps).expect("fixture decodes");
    let mut scratch = Vec::with_capacity(8);
    // warm up (grows the selector's scratch, faults in code and data)
    let deadline = Instant::now() + Duration::from_millis(50);
    while Instant::now() < deadline {
        black_box(s.ours(black_box(&reps)));
        black_box(s.baseline(black_box(&reps)));
        black_box(s.ours_with_decode(black_box(&bytes), &mut scratch));
    }
    let (mut ours, mut base, mut dec) = (Vec::new(), Vec::new(), Vec::new());
    // interleave the three so that machine noise hits them alike
    for _ in 0..rounds {
        ours.push(time_round(iterations, || {
            black_box(s.ours(black_box(&reps)));
        }));
        base.push(time_round(iterations, || {
            black_box(s.baseline(black_box(&reps)));
        }));
        dec.push(time_round(iterations, || {
            black_box(s.ours_with_decode(black_box(&bytes), &mut scratch));
        }));
    }
    let (ours_ns, baseline_ns, ours_with_decode_ns) = (median(ours), median(base), median(dec));
    let n = iterations.min(10_000);
    let allocs = alloc_counter.map(|c| {
        allocs_per_call(c, n, || {
            black_box(s.ours(black_box(&reps)));
        })
    });
    let baseline_allocs = alloc_counter.map(|c| {
        allocs_per_call(c, n, || {
            black_box(s.baseline(black_box(&reps)));
        })
    });
    DnSelectReport {
        ours_ns,
        ours_with_decode_ns,
        baseline_ns,
        ratio: baseline_ns / ours_ns,
        allocs,
        baseline_allocs,
        iterations,
        rounds,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ours_and_baseline_agree_on_addresses() {
        let s = DnSelect::new();
        let bytes = DnSelect::block_bytes();
        let mut reps = Vec::new();
        decode_replicas(&LocatedBlockView::new(&bytes), 0, &mut reps).unwrap();
        // ours moves the /r2 replica (index 1) first; Java takes the NameNode's first
        assert_eq!(s.ours(&reps), Some("127.0.0.3:9867".parse().unwrap()));
        assert_eq!(s.baseline(&reps), Some("127.0.0.2:9866".parse().unwrap()));
        let mut scratch = Vec::new();
        assert_eq!(
            s.ours_with_decode(&bytes, &mut scratch),
            Some("127.0.0.3:9867".parse().unwrap())
        );
        let m = Mutex::new(HashMap::new());
        assert_eq!(
            create_socket_addr(" 10.0.0.1:50010 ", &m),
            Some("10.0.0.1:50010".parse().unwrap())
        );
        assert_eq!(
            create_socket_addr("[::1]:50010", &m),
            Some("[::1]:50010".parse().unwrap())
        );
        assert_eq!(
            create_socket_addr("10.0.0.1", &m),
            None,
            "no port, default -1"
        );
        assert_eq!(
            create_socket_addr("10.0.0.1:50010/path", &m),
            None,
            "path without scheme"
        );
        m.lock()
            .unwrap()
            .insert("dn".to_string(), "10.1.1.1".to_string());
        assert_eq!(
            create_socket_addr("dn:1", &m),
            Some("10.1.1.1:1".parse().unwrap())
        );
    }

    #[test]
    fn report_json_has_the_cli_keys() {
        let r = measure(100, 1, None);
        let j = r.to_json();
        for k in [
            "\"ours_ns\":",
            "\"baseline_ns\":",
            "\"ratio\":",
            "\"allocs\":null",
        ] {
            assert!(j.contains(k), "{j}");
        }
        assert!(r.ours_ns > 0.0 && r.baseline_ns > 0.0);
    }
}
