//! [`DfsClient`]: `stat` and reads of HDFS files, putting the pieces together.
//!
//! A read walks the file's blocks: block locations come from the NameNode a window at a time
//! (`dfs.client.read.prefetch.size`, 10 blocks by default); for each block the
//! [`Selector`] orders the replicas, the [`AddrCache`] gives the address, the [`PeerCache`] a
//! connection, and [`read_block_on`](crate::datanode::read_block_on) the verified bytes. A replica that fails (connect, I/O,
//! DataNode error, checksum) goes into the shared [`DeadNodes`] memory and the read moves on to
//! the next replica from the byte where it stopped: bytes already delivered were verified, so
//! nothing is re-sent or returned twice. A checksum failure is also reported to the NameNode
//! (`reportBadBlocks`) once another replica served the block, as Java's `reportCheckSumFailure`
//! does. When every replica failed, the locations are fetched again after a randomised wait
//! (`dfs.client.retry.window.base`), at most `dfs.client.max.block.acquire.failures` times, and
//! then the read fails with [`Error::BlockMissing`].
//!
//! Refused with a clear error: erasure-coded files (`ecPolicy`, `blockIndices`), encrypted
//! files (`fileEncryptionInfo`), and reads that reach into a last block still under
//! construction (its visible length needs `ClientDatanodeProtocol.getReplicaVisibleLength`,
//! which this client does not speak); the completed part of such a file can be read.
//! Java reads local replicas by short-circuit (`dfs.client.read.shortcircuit`, a Unix socket and
//! file descriptors); this client always reads over TCP.

use crate::addr_cache::{system_resolver, AddrCache};
use crate::block_reader::{BlockRead, ReadBlockRequest};
use crate::datanode::{
    block_name, connect, handshake, read_block_on_sasl, read_block_on_with, Peer, PeerCache,
    Protection, RecvBuf,
};
use crate::dead_nodes::{DeadNodes, Failure};
use crate::error::{BlockName, Error};
use crate::file_status::{FileStatus, FileType};
use crate::namenode::{BadBlock, LocatedBlocksBuf, NameNodeClient, NameNodeConfig};
use crate::receive::{read_block_uring_with, RecvPath};
use crate::replica::{decode_replicas, Replica};
use crate::selection::{LazyNow, Ranked, Selector};
use crate::topology::{LocalNode, RackMap};
use hadoop_wire::hdfs::transfer_sasl::{
    AesCtrStreams, Credentials, DataEncryptionKey, AES_CTR_SUITE_NAME,
};
use hadoop_wire::view::hdfs::{LocatedBlockView, LocatedBlocksView};
use ipc::transport::BackendChoice;
use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Read-path settings (Hadoop keys in the field docs).
#[derive(Debug, Clone)]
pub struct DfsConfig {
    /// `dfs.client.read.prefetch.size` (10 × `dfs.blocksize`).
    pub prefetch_size: u64,
    /// `dfs.client.max.block.acquire.failures` (3).
    pub max_block_acquire_failures: u32,
    /// `dfs.client.retry.window.base` (3000 ms).
    pub retry_window_base: Duration,
    /// `dfs.client.socket-timeout` (60 s): connect and read timeout on DataNodes.
    pub socket_timeout: Duration,
    /// `dfs.client.use.datanode.hostname` (false).
    pub use_hostname: bool,
    /// `dfs.namenode.stale.datanode.interval` (30 s): replicas without a heartbeat for this
    /// long go last. Zero: off.
    pub stale_interval: Duration,
    /// How long a failed DataNode is skipped.
    pub dead_node_ttl: Duration,
    /// Resolved DataNode host names live this long.
    pub dns_ttl: Duration,
    /// Client name sent to DataNodes.
    pub client_name: String,
    /// How block data is received: `Auto` follows `HOTPATH_IO` (`uring` / `epoll`), then the
    /// io_uring probe; see [`crate::receive`]. `Epoll` selects the blocking fallback.
    pub io: BackendChoice,
    /// `dfs.encrypt.data.transfer.cipher.suites` = `AES/CTR/NoPadding`: offer AES in the
    /// encrypted handshake (the NameNode decides whether data transfer is encrypted at all).
    pub encrypt_aes: bool,
    /// `dfs.data.transfer.protection` (empty: none), used on a Kerberized cluster
    /// (`hadoop.security.authentication=kerberos`) for DataNodes on unprivileged ports (≥ 1024)
    /// when the NameNode does not encrypt data transfer: the general SASL handshake, DIGEST-MD5
    /// over the block token. `integrity`, and `privacy` without AES, run the connection through
    /// the DIGEST-MD5 stream layer (3DES by default under `privacy`; blocking receive, one more
    /// copy: see [`crate::datanode`]).
    pub data_transfer_protection: Vec<hadoop_wire::sasl::Qop>,
    /// `hadoop.security.authentication` is `kerberos`.
    pub kerberos: bool,
    /// `dfs.client.socketcache.capacity` (16): idle DataNode connections kept for reuse; 0
    /// turns the cache off.
    pub socket_cache_capacity: usize,
    /// `dfs.client.socketcache.expiryMsec` (3000 ms): how long an idle connection is kept.
    /// The DataNode closes its end after `dfs.datanode.socket.reuse.keepalive` (4 s); a
    /// connection it closed fails before the first byte and the read goes on a new one.
    pub socket_cache_expiry: Duration,
}

impl Default for DfsConfig {
    fn default() -> Self {
        DfsConfig {
            prefetch_size: 10 * 128 * 1024 * 1024,
            max_block_acquire_failures: 3,
            retry_window_base: Duration::from_millis(3000),
            socket_timeout: Duration::from_secs(60),
            use_hostname: false,
            stale_interval: Duration::from_secs(30),
            dead_node_ttl: DeadNodes::DEFAULT_TTL,
            dns_ttl: AddrCache::DEFAULT_TTL,
            client_name: format!("DFSClient_hotpath_{}", std::process::id()),
            io: BackendChoice::Auto,
            encrypt_aes: false,
            data_transfer_protection: Vec::new(),
            kerberos: false,
            socket_cache_capacity: 16,
            socket_cache_expiry: Duration::from_millis(3000),
        }
    }
}

impl DfsConfig {
    /// From a configuration (defaults where unset).
    pub fn from_conf(conf: &conf::Configuration) -> Result<DfsConfig, Error> {
        let ms = |k: &str, d: u64| -> Result<Duration, Error> {
            Ok(Duration::from_millis(match conf.get(k) {
                Some(_) => conf.get_duration_ms(k)?,
                None => d,
            }))
        };
        Ok(DfsConfig {
            prefetch_size: conf.get_bytes("dfs.client.read.prefetch.size")?,
            max_block_acquire_failures: conf.get_u64("dfs.client.max.block.acquire.failures")?
                as u32,
            retry_window_base: ms("dfs.client.retry.window.base", 3000)?,
            socket_timeout: ms("dfs.client.socket-timeout", 60_000)?,
            use_hostname: conf.get_bool("dfs.client.use.datanode.hostname")?,
            stale_interval: ms("dfs.namenode.stale.datanode.interval", 30_000)?,
            encrypt_aes: match conf.get("dfs.encrypt.data.transfer.cipher.suites") {
                None => false,
                Some(v) if v.trim().is_empty() => false,
                Some(v) if v.trim() == AES_CTR_SUITE_NAME => true,
                Some(v) => {
                    return Err(Error::Config(format!(
                        "dfs.encrypt.data.transfer.cipher.suites: {v:?} is not {AES_CTR_SUITE_NAME}"
                    )))
                }
            },
            data_transfer_protection: match conf.get("dfs.data.transfer.protection") {
                Some(v) if !v.trim().is_empty() => hadoop_wire::sasl::parse_protection(v)
                    .map_err(|e| Error::Config(format!("dfs.data.transfer.protection: {e}")))?,
                _ => Vec::new(),
            },
            kerberos: conf
                .get("hadoop.security.authentication")
                .is_some_and(|v| v.trim().eq_ignore_ascii_case("kerberos")),
            socket_cache_capacity: conf.get_u64("dfs.client.socketcache.capacity")? as usize,
            socket_cache_expiry: ms("dfs.client.socketcache.expiryMsec", 3000)?,
            ..DfsConfig::default()
        })
    }
}

/// What a read did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReadStats {
    pub bytes: u64,
    pub blocks: u64,
    /// `getBlockLocations` calls.
    pub location_fetches: u64,
    /// Replica attempts that failed (and were retried elsewhere).
    pub replica_failures: u64,
    /// Checksum failures detected.
    pub checksum_failures: u64,
    /// Corrupt replicas reported to the NameNode.
    pub reported_bad: u64,
    /// Reads served on a cached connection.
    pub reused_connections: u64,
    /// Block reads (replica attempts) received through io_uring; the others were blocking.
    pub uring_reads: u64,
    /// Connections that ran the encrypted DataTransfer handshake.
    pub encrypted_handshakes: u64,
    /// Block locations fetched again because a DataNode refused the block token.
    pub token_refetches: u64,
    /// Block reads (replica attempts) through the DIGEST-MD5 stream layer (`auth-int`, or
    /// `auth-conf` without AES).
    pub sasl_layer_reads: u64,
}

/// An HDFS client for stat and reads. Share it across threads.
pub struct DfsClient {
    nn: NameNodeClient,
    cfg: DfsConfig,
    selector: Selector,
    dead: Arc<DeadNodes>,
    addrs: Mutex<AddrCache>,
    peers: PeerCache,
    recv: OnceLock<RecvPath>,
    /// The NameNode's data encryption key and when it was asked (`None` inside: the NameNode
    /// does not encrypt data transfer; asked again after [`KEY_RECHECK`]).
    enc_key: Mutex<Option<(Option<Arc<DataEncryptionKey>>, Instant)>>,
}

/// How long a NameNode's "no encryption" answer is trusted (Java re-reads its server defaults
/// after `dfs.client.server-defaults.validity.period.ms`, 1 h).
const KEY_RECHECK: Duration = Duration::from_secs(3600);

impl std::fmt::Debug for DfsClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DfsClient")
            .field("nn", &self.nn)
            .field("cfg", &self.cfg)
            .finish()
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// A small random source for back-off jitter (not for anything else).
fn jitter() -> f64 {
    let n = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let mut x = u64::from(n) ^ 0x9e37_79b9_7f4a_7c15 ^ u64::from(std::process::id());
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    (x % 10_000) as f64 / 10_000.0
}

impl DfsClient {
    /// A client over `nn` with a selector built from this host and `racks`.
    pub fn new(
        nn: NameNodeClient,
        cfg: DfsConfig,
        local: LocalNode,
        racks: RackMap,
        local_rack: Option<&[u8]>,
    ) -> DfsClient {
        DfsClient {
            selector: Selector::new(local, racks, local_rack, cfg.use_hostname),
            dead: Arc::new(DeadNodes::new(cfg.dead_node_ttl)),
            addrs: Mutex::new(AddrCache::new(cfg.dns_ttl)),
            peers: PeerCache::new(cfg.socket_cache_capacity, cfg.socket_cache_expiry),
            recv: OnceLock::new(),
            enc_key: Mutex::new(None),
            nn,
            cfg,
        }
    }

    /// From a configuration: NameNode addresses, read settings, this host's names
    /// ([`LocalNode::detect`]) and the rack table of `net.topology.table.file.name` when
    /// `net.topology.node.switch.mapping.impl` is `TableMapping`.
    pub fn from_conf(conf: &conf::Configuration) -> Result<DfsClient, Error> {
        Self::from_conf_with(conf, NameNodeConfig::default())
    }

    /// As [`DfsClient::from_conf`], with the NameNode client's other settings (e.g. where its
    /// connections' reader threads run) taken from `nn`.
    pub fn from_conf_with(
        conf: &conf::Configuration,
        nn: NameNodeConfig,
    ) -> Result<DfsClient, Error> {
        let nn = NameNodeClient::from_conf_with(conf, nn)?;
        let cfg = DfsConfig::from_conf(conf)?;
        let mut racks = RackMap::default();
        let imp = conf
            .get("net.topology.node.switch.mapping.impl")
            .unwrap_or("");
        if imp.ends_with("TableMapping") {
            if let Some(f) = conf.get("net.topology.table.file.name") {
                racks = RackMap::load_table(std::path::Path::new(f))
                    .map_err(|e| Error::io(format!("rack table {f}"), e))?;
            }
        }
        Ok(DfsClient::new(nn, cfg, LocalNode::detect(), racks, None))
    }

    /// The NameNode client.
    pub fn namenode(&self) -> &NameNodeClient {
        &self.nn
    }

    /// How this client receives block data (decided on first use, see [`crate::receive`]).
    /// A forced `uring` that the probe refuses is an error.
    pub fn recv_path(&self) -> Result<RecvPath, Error> {
        if let Some(p) = self.recv.get() {
            return Ok(*p);
        }
        let p = crate::receive::choose(self.cfg.io)?;
        Ok(*self.recv.get_or_init(|| p))
    }

    /// The shared dead-node memory.
    pub fn dead_nodes(&self) -> &Arc<DeadNodes> {
        &self.dead
    }

    /// The file status of `path` ([`Error::FileNotFound`] when it does not exist).
    pub fn stat(&self, path: &str) -> Result<FileStatus, Error> {
        self.nn
            .get_file_info(path)?
            .ok_or_else(|| Error::FileNotFound {
                path: path.to_string(),
            })
    }

    fn fetch(
        &self,
        path: &str,
        offset: u64,
        stats: &mut ReadStats,
    ) -> Result<LocatedBlocksBuf, Error> {
        stats.location_fetches += 1;
        let lb = self
            .nn
            .get_block_locations(path, offset, self.cfg.prefetch_size.max(1))?;
        check_supported(path, &lb.view())?;
        Ok(lb)
    }

    /// Reads `length` bytes (to the end when `None`) of `path` from `offset` into `out`.
    pub fn read(
        &self,
        path: &str,
        offset: u64,
        length: Option<u64>,
        out: &mut dyn Write,
    ) -> Result<ReadStats, Error> {
        let mut stats = ReadStats::default();
        let recv = self.recv_path()?;
        let mut locs = self.fetch(path, offset, &mut stats)?;
        let v = locs.view();
        let d = |e| Error::Decode {
            what: "LocatedBlocksProto",
            source: e,
        };
        let file_len = v.file_length().map_err(d)?;
        let under_construction =
            v.under_construction().map_err(d)? && !v.is_last_block_complete().map_err(d)?;
        let end = match length {
            Some(l) => offset.saturating_add(l),
            None => file_len,
        };
        if under_construction && (length.is_none() || end > file_len) {
            return Err(Error::Unsupported {
                path: path.to_string(),
                feature: "reading the last block of a file under construction (its visible length needs ClientDatanodeProtocol.getReplicaVisibleLength)",
            });
        }
        let end = end.min(file_len);
        let mut pos = offset;
        let mut sink = |b: &[u8]| out.write_all(b);
        let mut buf = RecvBuf::default();
        let mut scratch = Vec::new();
        while pos < end {
            let found = find_block(&locs.view(), pos)?;
            let (block_off, block_len) = match found {
                Some(x) => x,
                None => {
                    locs = self.fetch(path, pos, &mut stats)?;
                    match find_block(&locs.view(), pos)? {
                        Some(x) => x,
                        None => {
                            return Err(Error::Malformed {
                                what: "LocatedBlocksProto",
                                reason: "no block covers an offset below the file length",
                            })
                        }
                    }
                }
            };
            let stop = end.min(block_off + block_len);
            let n = self.read_block(
                recv,
                path,
                &mut locs,
                block_off,
                pos - block_off,
                stop - pos,
                &mut sink,
                &mut buf,
                &mut scratch,
                &mut stats,
            )?;
            pos += n;
            stats.blocks += 1;
        }
        stats.bytes = pos - offset;
        out.flush()
            .map_err(|e| Error::io("flushing the output", e))?;
        Ok(stats)
    }

    /// Reads `[start, start + len)` of the block at file offset `block_off`, failing over
    /// between replicas and refetching locations when all failed.
    #[allow(clippy::too_many_arguments)]
    fn read_block(
        &self,
        recv: RecvPath,
        path: &str,
        locs: &mut LocatedBlocksBuf,
        block_off: u64,
        start: u64,
        len: u64,
        sink: &mut dyn FnMut(&[u8]) -> std::io::Result<()>,
        buf: &mut RecvBuf,
        scratch: &mut Vec<u8>,
        stats: &mut ReadStats,
    ) -> Result<u64, Error> {
        let mut done = 0u64;
        let mut failures = 0u32;
        let mut tried: Vec<Vec<u8>> = Vec::new();
        let mut tried_names: Vec<String> = Vec::new();
        let mut checksum_failures = 0u32;
        let mut corrupt: Vec<BadBlock> = Vec::new();
        let mut order: Vec<Ranked> = Vec::new();
        let mut fetched_ms = now_ms();
        let (mut token_refetches, mut key_refetches) = (0u32, 0u32);
        loop {
            let view = locs.view();
            let Some(block) = block_at(&view, block_off)? else {
                return Err(Error::Malformed {
                    what: "LocatedBlocksProto",
                    reason: "the block vanished from a refetch",
                });
            };
            let eb = block.b().map_err(|e| Error::Decode {
                what: "LocatedBlockProto",
                source: e,
            })?;
            let name = block_name(&eb)?;
            let stale_before = if self.cfg.stale_interval.is_zero() {
                0
            } else {
                fetched_ms.saturating_sub(self.cfg.stale_interval.as_millis() as u64)
            };
            let mut reps: Vec<Replica<'_>> = Vec::with_capacity(4);
            decode_replicas(&block, stale_before, &mut reps)?;
            let ignored: Vec<&[u8]> = tried.iter().map(|t| t.as_slice()).collect();
            let mut now = LazyNow::new();
            // after a refetch, Java forgets its dead nodes: try every replica again
            let no_dead = DeadNodes::new(Duration::ZERO);
            let dead: &DeadNodes = if failures == 0 { &self.dead } else { &no_dead };
            self.selector
                .order(&reps, dead, &ignored, &mut now, &mut order);
            let Some(first) = order.first() else {
                if failures >= self.cfg.max_block_acquire_failures {
                    return Err(Error::BlockMissing {
                        path: path.to_string(),
                        block: name,
                        offset: block_off + start + done,
                        tried: if tried_names.is_empty() {
                            "no replica locations".into()
                        } else {
                            tried_names.join(", ")
                        },
                        checksum_failures,
                    });
                }
                // Java's DFSInputStream.refetchLocations back-off
                let w = self.cfg.retry_window_base.as_secs_f64();
                let f = f64::from(failures);
                let wait = w * f + w * (f + 1.0) * jitter();
                tracing::info!(
                    "every replica of {name} failed; refetching locations in {wait:.1} s"
                );
                std::thread::sleep(Duration::from_secs_f64(wait));
                failures += 1;
                tried.clear();
                *locs = self.fetch(path, block_off, stats)?;
                fetched_ms = now_ms();
                continue;
            };
            let r = reps[first.index as usize];
            let dn = r.xfer_addr_string(self.cfg.use_hostname);
            let host = r.xfer_host(self.cfg.use_hostname);
            let t = Instant::now();
            let addr = {
                let mut c = self.addrs.lock().unwrap_or_else(|p| p.into_inner());
                c.resolve(host, r.xfer_port, t, system_resolver)
            };
            let addr = match addr {
                Ok((a, _)) => a,
                Err(e) => {
                    tracing::warn!("DataNode {dn}: {e}");
                    self.dead.mark(r.uuid, Failure::Connect, t);
                    tried.push(r.uuid.to_vec());
                    tried_names.push(format!("{dn} (unresolvable)"));
                    stats.replica_failures += 1;
                    continue;
                }
            };
            let token = block.block_token().map_err(|e| Error::Decode {
                what: "LocatedBlockProto",
                source: e,
            })?;
            let tok_err = |e| Error::Decode {
                what: "TokenProto",
                source: e,
            };
            let (token_id, token_pw) = (
                token.identifier().map_err(tok_err)?,
                token.password().map_err(tok_err)?,
            );
            let req = ReadBlockRequest {
                block: eb.as_bytes(),
                token: token.as_bytes(),
                client_name: &self.cfg.client_name,
                offset: start + done,
                len: len - done,
            };
            // a cached connection first; one that fails before any byte is the cache's fault
            let mut result = None;
            if let Some(mut s) = self.peers.take(addr, t) {
                let mut read = BlockRead::new(name.clone(), dn.clone(), req.offset, req.len);
                let res = self.read_on(
                    recv, &mut s, &req, &mut read, buf, scratch, sink, &dn, stats,
                );
                if res.error.is_none() || res.got_bytes || res.delivered > 0 {
                    stats.reused_connections += u64::from(res.error.is_none());
                    result = Some((res, read.is_done(), Some(s)));
                }
            }
            let (res, clean, s) = match result {
                Some(x) => x,
                None => {
                    match self.open_peer(
                        addr,
                        self.encryption_key()?.as_deref(),
                        (token_id, token_pw),
                        &name,
                        &dn,
                        stats,
                    ) {
                        Ok(mut s) => {
                            let mut read =
                                BlockRead::new(name.clone(), dn.clone(), req.offset, req.len);
                            let res = self.read_on(
                                recv, &mut s, &req, &mut read, buf, scratch, sink, &dn, stats,
                            );
                            let clean = read.is_done();
                            (res, clean, Some(s))
                        }
                        Err((e, false)) => {
                            // the handshake failed: handled as a read error
                            let res = crate::datanode::BlockReadResult {
                                delivered: 0,
                                error: Some(e),
                                got_bytes: true,
                            };
                            (res, false, None)
                        }
                        Err((e, true)) => {
                            tracing::warn!("connecting to DataNode {dn} for {name}: {e}");
                            self.addrs
                                .lock()
                                .unwrap_or_else(|p| p.into_inner())
                                .invalidate(host, r.xfer_port);
                            self.dead.mark(r.uuid, Failure::Connect, Instant::now());
                            tried.push(r.uuid.to_vec());
                            tried_names.push(format!("{dn} (connect: {e})"));
                            stats.replica_failures += 1;
                            continue;
                        }
                    }
                }
            };
            done += res.delivered;
            match res.error {
                None => {
                    if let (true, Some(s)) = (clean, s) {
                        self.peers.put(addr, s, Instant::now());
                    }
                    if !corrupt.is_empty() {
                        // another replica served the block: the bad copies are reported
                        match self.nn.report_bad_blocks(&corrupt) {
                            Ok(()) => stats.reported_bad += corrupt.len() as u64,
                            Err(e) => tracing::warn!("reportBadBlocks for {name}: {e}"),
                        }
                    }
                    return Ok(done);
                }
                Some(e) if e.is_access_token_error() && token_refetches == 0 => {
                    // Java's DFSInputStream: new locations (new tokens) once, the DataNode
                    // is not held against
                    tracing::info!("{dn} refused the block token of {name} ({e}); refetching");
                    token_refetches += 1;
                    stats.token_refetches += 1;
                    *locs = self.fetch(path, block_off, stats)?;
                    fetched_ms = now_ms();
                }
                Some(e) if e.is_unknown_encryption_key() && key_refetches == 0 => {
                    // Java: a new data encryption key once, then the same replica again
                    tracing::info!("{dn} does not know the data encryption key ({e}); refetching");
                    key_refetches += 1;
                    self.clear_encryption_key();
                }
                Some(e) => {
                    tracing::warn!("reading {name} from {dn}: {e}; trying another replica");
                    stats.replica_failures += 1;
                    let kind = if matches!(e, Error::Checksum { .. }) {
                        stats.checksum_failures += 1;
                        checksum_failures += 1;
                        corrupt.push(BadBlock {
                            block: eb.as_bytes().to_vec(),
                            offset: block_off,
                            token: token.as_bytes().to_vec(),
                            datanode: r.info.as_bytes().to_vec(),
                        });
                        Failure::Checksum
                    } else {
                        Failure::Io
                    };
                    if matches!(e, Error::Sink { .. }) {
                        return Err(e);
                    }
                    self.dead.mark(r.uuid, kind, Instant::now());
                    tried.push(r.uuid.to_vec());
                    tried_names.push(format!("{dn} ({e})"));
                    if done >= len {
                        return Ok(done);
                    }
                }
            }
        }
    }
}

impl DfsClient {
    /// The data encryption key for a new DataNode connection (Java's
    /// `DFSClient.newDataEncryptionKey`): fetched from the NameNode once and again when it
    /// expired or was [cleared](Self::clear_encryption_key); `None` when the NameNode does not
    /// encrypt data transfer.
    fn encryption_key(&self) -> Result<Option<Arc<DataEncryptionKey>>, Error> {
        let mut g = self.enc_key.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((k, at)) = &*g {
            let fresh = match k {
                Some(k) => k.expiry_date > now_ms(),
                None => at.elapsed() < KEY_RECHECK,
            };
            if fresh {
                return Ok(k.clone());
            }
        }
        let k = self.nn.get_data_encryption_key()?.map(Arc::new);
        *g = Some((k.clone(), Instant::now()));
        Ok(k)
    }

    /// Forgets the key (a DataNode answered ERROR_UNKNOWN_KEY).
    fn clear_encryption_key(&self) {
        *self.enc_key.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }

    /// A new connection to `addr`, with the encrypted handshake when `key` is set. Errors:
    /// `(e, true)` the connect failed, `(e, false)` the handshake (the socket is dropped).
    fn open_peer(
        &self,
        addr: std::net::SocketAddr,
        key: Option<&DataEncryptionKey>,
        token: (&[u8], &[u8]),
        name: &BlockName,
        dn: &str,
        stats: &mut ReadStats,
    ) -> Result<Peer, (Error, bool)> {
        let mut s = connect(addr, self.cfg.socket_timeout, self.cfg.socket_timeout)
            .map_err(|e| (Error::io(format!("connecting to DataNode {dn}"), e), true))?;
        // Java's SaslDataTransferClient.send, in its order
        let general = !self.cfg.data_transfer_protection.is_empty()
            && self.cfg.kerberos
            && addr.port() >= 1024;
        let protection = match key {
            None if general => handshake(
                &mut s,
                Credentials::BlockToken {
                    identifier: token.0,
                    password: token.1,
                    qops: &self.cfg.data_transfer_protection,
                },
                self.cfg.encrypt_aes,
                name,
                dn,
            )
            .map_err(|e| (e, false))?,
            None => Protection::None,
            Some(k) => {
                stats.encrypted_handshakes += 1;
                handshake(
                    &mut s,
                    Credentials::EncryptionKey(k),
                    self.cfg.encrypt_aes,
                    name,
                    dn,
                )
                .map_err(|e| (e, false))?
            }
        };
        Ok(Peer::new(s, protection))
    }

    /// One block read over `s`: io_uring into this thread's pooled buffers, or the blocking
    /// path (when chosen, or when this thread has no ring).
    #[allow(clippy::too_many_arguments)]
    fn read_on(
        &self,
        recv: RecvPath,
        p: &mut Peer,
        req: &ReadBlockRequest<'_>,
        read: &mut BlockRead,
        buf: &mut RecvBuf,
        scratch: &mut Vec<u8>,
        sink: &mut dyn FnMut(&[u8]) -> std::io::Result<()>,
        dn: &str,
        stats: &mut ReadStats,
    ) -> crate::datanode::BlockReadResult {
        let s = &mut p.stream;
        if let Some(l) = p.sasl.as_deref_mut() {
            // DIGEST-MD5 frames: blocking receive (see datanode's module docs)
            stats.sasl_layer_reads += 1;
            return read_block_on_sasl(s, l, req, read, buf, scratch, sink, dn);
        }
        let mut crypt: Option<&mut AesCtrStreams> = p.crypt.as_deref_mut();
        if recv == RecvPath::Uring {
            if let Some(r) = read_block_uring_with(
                s,
                crypt.as_deref_mut(),
                req,
                read,
                scratch,
                sink,
                dn,
                self.cfg.socket_timeout,
            ) {
                stats.uring_reads += 1;
                return r;
            }
        }
        read_block_on_with(s, crypt, req, read, buf, scratch, sink, dn)
    }
}

/// Refuses what this client cannot read (see the module docs).
pub fn check_supported(path: &str, v: &LocatedBlocksView<'_>) -> Result<(), Error> {
    let d = |e| Error::Decode {
        what: "LocatedBlocksProto",
        source: e,
    };
    if v.ec_policy().map_err(d)?.is_some() {
        return Err(Error::Unsupported {
            path: path.to_string(),
            feature: "erasure coding (ecPolicy)",
        });
    }
    if v.file_encryption_info().map_err(d)?.is_some() {
        return Err(Error::Unsupported {
            path: path.to_string(),
            feature: "transparent encryption (fileEncryptionInfo)",
        });
    }
    for b in v.blocks() {
        let b = b.map_err(d)?;
        if b.block_indices().map_err(d)?.is_some() {
            return Err(Error::Unsupported {
                path: path.to_string(),
                feature: "erasure coding (blockIndices)",
            });
        }
    }
    Ok(())
}

/// The (offset, length) of the block covering `pos`, if the window has it.
fn find_block(v: &LocatedBlocksView<'_>, pos: u64) -> Result<Option<(u64, u64)>, Error> {
    let d = |e| Error::Decode {
        what: "LocatedBlockProto",
        source: e,
    };
    for b in v.blocks() {
        let b = b.map_err(d)?;
        let off = b.offset().map_err(d)?;
        let len = b.b().map_err(d)?.num_bytes().map_err(d)?;
        if off <= pos && pos < off + len {
            return Ok(Some((off, len)));
        }
    }
    Ok(None)
}

/// The block starting at file offset `off`.
fn block_at<'a>(
    v: &LocatedBlocksView<'a>,
    off: u64,
) -> Result<Option<LocatedBlockView<'a>>, Error> {
    let d = |e| Error::Decode {
        what: "LocatedBlockProto",
        source: e,
    };
    for b in v.blocks() {
        let b = b.map_err(d)?;
        if b.offset().map_err(d)? == off {
            return Ok(Some(b));
        }
    }
    Ok(None)
}

/// Type letter for listings.
pub fn type_name(t: FileType) -> &'static str {
    match t {
        FileType::Dir => "directory",
        FileType::File => "regular file",
        FileType::Symlink => "symlink",
    }
}

/// `BlockName` of a located block (for reports).
pub fn located_block_name(b: &LocatedBlockView<'_>) -> Result<BlockName, Error> {
    block_name(&b.b().map_err(|e| Error::Decode {
        what: "LocatedBlockProto",
        source: e,
    })?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::{located_block, Dn};
    use hadoop_wire::pb::hadoop::hdfs::{
        ErasureCodingPolicyProto, FileEncryptionInfoProto, LocatedBlockProto, LocatedBlocksProto,
    };
    use prost::Message;

    fn blocks(ec: bool, crypt: bool, indices: bool) -> Vec<u8> {
        let mut b = LocatedBlockProto::decode(&located_block(&[Dn::new(0, "/r1")])[..]).unwrap();
        if indices {
            b.block_indices = Some(vec![0, 1, 2]);
        }
        LocatedBlocksProto {
            file_length: 10,
            blocks: vec![b],
            under_construction: false,
            last_block: None,
            is_last_block_complete: true,
            file_encryption_info: crypt.then(|| FileEncryptionInfoProto {
                key_name: "k".into(),
                ..Default::default()
            }),
            ec_policy: ec.then(|| ErasureCodingPolicyProto {
                id: 1,
                ..Default::default()
            }),
        }
        .encode_to_vec()
    }

    #[test]
    fn refuses_erasure_coding_and_encryption_by_name() {
        assert!(
            check_supported("/p", &LocatedBlocksView::new(&blocks(false, false, false))).is_ok()
        );
        for (bytes, feature) in [
            (blocks(true, false, false), "erasure coding (ecPolicy)"),
            (
                blocks(false, true, false),
                "transparent encryption (fileEncryptionInfo)",
            ),
            (blocks(false, false, true), "erasure coding (blockIndices)"),
        ] {
            match check_supported("/p", &LocatedBlocksView::new(&bytes)) {
                Err(e @ Error::Unsupported { .. }) => {
                    assert!(e.to_string().contains(feature), "{e}");
                    assert!(e.to_string().starts_with("/p: "), "{e}");
                }
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn finds_blocks_by_offset() {
        let bytes = blocks(false, false, false);
        let v = LocatedBlocksView::new(&bytes);
        assert_eq!(find_block(&v, 0).unwrap(), Some((0, 134_217_728)));
        assert_eq!(find_block(&v, 134_217_728).unwrap(), None);
        assert!(block_at(&v, 0).unwrap().is_some());
        assert!(block_at(&v, 1).unwrap().is_none());
    }

    #[test]
    fn socket_cache_keys_are_read() {
        let mut c = conf::Configuration::new();
        let d = DfsConfig::from_conf(&c).unwrap();
        assert_eq!(d.socket_cache_capacity, 16);
        assert_eq!(d.socket_cache_expiry, Duration::from_millis(3000));
        c.set("dfs.client.socketcache.capacity", "0");
        c.set("dfs.client.socketcache.expiryMsec", "45s");
        let d = DfsConfig::from_conf(&c).unwrap();
        assert_eq!(d.socket_cache_capacity, 0);
        assert_eq!(d.socket_cache_expiry, Duration::from_secs(45));
        c.set("dfs.client.socketcache.capacity", "many");
        assert!(DfsConfig::from_conf(&c).is_err());
    }
}
