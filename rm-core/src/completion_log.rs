//! The durable completion log: every container completion, once, on disk before it is
//! acknowledged.
//!
//! rm-core has no ApplicationMasters, so it consumes completions itself. Each shard appends
//! the completions of its nodes to its own file, `completions-<shard>.log` in the configured
//! directory (`hotpath.rm.completion-log.dir`), and fsyncs once per batch
//! ([`CompletionLog::commit`]). Only then are the containers acknowledged to their
//! NodeManagers through `containers_to_be_removed_from_nm`. **This is our choice, not
//! Java's**: Java fills that field only after the ApplicationMaster pulled the completion
//! (trap 1). Acknowledging after fsync means a completion the NodeManager forgets is never
//! lost by the RM.
//!
//! # File format
//!
//! An 8-byte header `HPCLOG01`, then records framed as
//! `u32 LE payload length | u32 LE CRC32C(payload) | payload`. The payload (little endian):
//! version `1` (u8), cluster timestamp (i64), application id (i32), attempt (i32),
//! container id (i64), exit status (i32), time in ms (u64), node port (i32), node host
//! (u16 length + bytes), diagnostics (u16 length + bytes, cut at [`MAX_DIAGNOSTICS`] bytes on a
//! character boundary).
//!
//! # Restart and torn tails
//!
//! [`CompletionLog::open`] reads every `completions-*.log` in the directory (the shard count
//! may have changed since they were written), keeps the records whose node routes to this
//! shard ([`crate::ids::shard_of`]) as the deduplication set, then opens its own file for
//! appending. A crash during a write leaves a *torn tail*: a record cut short, or bytes that
//! do not check out. The scan stops at the first invalid record; if no valid record follows
//! anywhere after it, that is a torn tail and the file is truncated there (nothing after the
//! last fsync was acknowledged, and a NodeManager re-reports unacknowledged completions when
//! it re-registers). If a valid record does follow, the damage is not a torn write and
//! [`Error::LogCorrupt`] refuses to start.
//!
//! Deduplication is by container id. Ids are remembered for
//! `hotpath.rm.completion-dedup-retention-ms` ([`CompletionLog::prune`]); a NodeManager stops
//! reporting a container long before (it forgets it on our acknowledgement, or after
//! `yarn.nodemanager.duration-to-track-stopped-containers`). The file itself only grows:
//! rotation and compaction are not implemented.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use crate::ids::{shard_of, AppKey, ContainerKey, FastMap, NodeKey};
use crate::Error;

/// File header.
pub const MAGIC: &[u8; 8] = b"HPCLOG01";
/// Bytes of diagnostics kept per record.
pub const MAX_DIAGNOSTICS: usize = 1024;
/// Bytes of host kept per record.
pub const MAX_HOST: usize = 1024;
const FIXED: usize = 1 + 8 + 4 + 4 + 8 + 4 + 8 + 4 + 2 + 2;
/// Largest valid payload.
pub const MAX_PAYLOAD: usize = FIXED + MAX_HOST + MAX_DIAGNOSTICS;
/// Largest file we read at startup.
pub const MAX_FILE_BYTES: u64 = 1 << 34;

/// One completion as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompletionRecord {
    pub container: ContainerKey,
    pub exit_status: i32,
    pub time_ms: u64,
    pub node: NodeKey,
    pub diagnostics: String,
}

/// What [`CompletionLog::open`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LoadReport {
    /// Records read from all files.
    pub records: u64,
    /// Records kept for this shard's deduplication.
    pub kept: u64,
    /// Bytes cut off this shard's own file as a torn tail.
    pub truncated_bytes: u64,
    /// Files read.
    pub files: u32,
}

/// The file of shard `shard` in `dir`.
pub fn shard_file(dir: &Path, shard: usize) -> PathBuf {
    dir.join(format!("completions-{shard}.log"))
}

fn cut_utf8(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// Appends one framed record to `buf`.
pub fn encode_record(
    buf: &mut Vec<u8>,
    container: &ContainerKey,
    exit_status: i32,
    time_ms: u64,
    node: &NodeKey,
    diagnostics: &str,
) {
    let host = cut_utf8(&node.host, MAX_HOST);
    let diag = cut_utf8(diagnostics, MAX_DIAGNOSTICS);
    let len = FIXED + host.len() + diag.len();
    let start = buf.len();
    buf.extend_from_slice(&(len as u32).to_le_bytes());
    buf.extend_from_slice(&[0; 4]);
    buf.push(1);
    buf.extend_from_slice(&container.app.cluster_timestamp.to_le_bytes());
    buf.extend_from_slice(&container.app.id.to_le_bytes());
    buf.extend_from_slice(&container.attempt.to_le_bytes());
    buf.extend_from_slice(&container.id.to_le_bytes());
    buf.extend_from_slice(&exit_status.to_le_bytes());
    buf.extend_from_slice(&time_ms.to_le_bytes());
    buf.extend_from_slice(&node.port.to_le_bytes());
    buf.extend_from_slice(&(host.len() as u16).to_le_bytes());
    buf.extend_from_slice(host.as_bytes());
    buf.extend_from_slice(&(diag.len() as u16).to_le_bytes());
    buf.extend_from_slice(diag.as_bytes());
    let crc = crc32c::crc32c(&buf[start + 8..]);
    buf[start + 4..start + 8].copy_from_slice(&crc.to_le_bytes());
}

struct Cursor<'a>(&'a [u8]);

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Some(a)
    }
    fn arr<const N: usize>(&mut self) -> Option<[u8; N]> {
        self.take(N).map(|s| s.try_into().unwrap_or([0; N]))
    }
}

/// Decodes one payload (without the frame).
pub fn decode_payload(p: &[u8]) -> Option<CompletionRecord> {
    let mut c = Cursor(p);
    if c.arr::<1>()? != [1] {
        return None;
    }
    let ts = i64::from_le_bytes(c.arr()?);
    let app = i32::from_le_bytes(c.arr()?);
    let attempt = i32::from_le_bytes(c.arr()?);
    let id = i64::from_le_bytes(c.arr()?);
    let exit_status = i32::from_le_bytes(c.arr()?);
    let time_ms = u64::from_le_bytes(c.arr()?);
    let port = i32::from_le_bytes(c.arr()?);
    let hl = u16::from_le_bytes(c.arr()?) as usize;
    let host = std::str::from_utf8(c.take(hl)?).ok()?;
    let dl = u16::from_le_bytes(c.arr()?) as usize;
    let diag = std::str::from_utf8(c.take(dl)?).ok()?;
    if !c.0.is_empty() {
        return None;
    }
    Some(CompletionRecord {
        container: ContainerKey {
            app: AppKey {
                cluster_timestamp: ts,
                id: app,
            },
            attempt,
            id,
        },
        exit_status,
        time_ms,
        node: NodeKey::new(host, port),
        diagnostics: diag.to_string(),
    })
}

/// A record frame at `at`, if valid: (record, frame length).
fn frame_at(bytes: &[u8], at: usize) -> Result<(CompletionRecord, usize), &'static str> {
    let rest = &bytes[at..];
    if rest.len() < 8 {
        return Err("truncated frame header");
    }
    let len = u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
    if !(FIXED..=MAX_PAYLOAD).contains(&len) {
        return Err("implausible record length");
    }
    if rest.len() < 8 + len {
        return Err("record runs past the end of the file");
    }
    let crc = u32::from_le_bytes([rest[4], rest[5], rest[6], rest[7]]);
    let payload = &rest[8..8 + len];
    if crc32c::crc32c(payload) != crc {
        return Err("checksum mismatch");
    }
    let rec = decode_payload(payload).ok_or("undecodable payload")?;
    Ok((rec, 8 + len))
}

/// The result of scanning a file's bytes.
#[derive(Debug)]
pub struct Scan {
    pub records: Vec<CompletionRecord>,
    /// Bytes up to the end of the last valid record (header included).
    pub valid_len: u64,
    /// Why the scan stopped early, if it did; `Some` with `corrupt = false` is a torn tail.
    pub stop: Option<(u64, &'static str)>,
    /// A valid record follows the first invalid one: not a torn write.
    pub corrupt: bool,
}

/// Scans a whole file image (pure: bytes in, records out).
pub fn scan(bytes: &[u8]) -> Scan {
    if bytes.len() < MAGIC.len() {
        // A header cut short (or an empty file) is a torn header if it is a prefix of ours.
        let torn = MAGIC.starts_with(bytes) || bytes.iter().all(|b| *b == 0);
        return Scan {
            records: Vec::new(),
            valid_len: 0,
            stop: (!bytes.is_empty()).then_some((0, "truncated header")),
            corrupt: !torn,
        };
    }
    if &bytes[..8] != MAGIC {
        return Scan {
            records: Vec::new(),
            valid_len: 0,
            stop: Some((0, "not a completion log (bad magic)")),
            corrupt: true,
        };
    }
    let mut at = 8usize;
    let mut records = Vec::new();
    while at < bytes.len() {
        match frame_at(bytes, at) {
            Ok((rec, n)) => {
                records.push(rec);
                at += n;
            }
            Err(reason) => {
                // Torn tail or corruption: is there any valid record after this point?
                let corrupt = (at + 1..bytes.len().saturating_sub(8 + FIXED - 1))
                    .any(|p| frame_at(bytes, p).is_ok());
                return Scan {
                    records,
                    valid_len: at as u64,
                    stop: Some((at as u64, reason)),
                    corrupt,
                };
            }
        }
    }
    Scan {
        records,
        valid_len: at as u64,
        stop: None,
        corrupt: false,
    }
}

fn read_capped(path: &Path) -> Result<Vec<u8>, Error> {
    let io = |source| Error::LogIo {
        path: path.into(),
        source,
    };
    let f = File::open(path).map_err(io)?;
    let mut v = Vec::new();
    f.take(MAX_FILE_BYTES).read_to_end(&mut v).map_err(io)?;
    Ok(v)
}

fn log_files(dir: &Path) -> Result<Vec<(usize, PathBuf)>, Error> {
    let io = |source| Error::LogIo {
        path: dir.into(),
        source,
    };
    let mut out = Vec::new();
    let rd = match std::fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(io(e)),
    };
    for ent in rd {
        let ent = ent.map_err(io)?;
        let name = ent.file_name();
        let Some(name) = name.to_str() else { continue };
        if let Some(n) = name
            .strip_prefix("completions-")
            .and_then(|s| s.strip_suffix(".log"))
            .and_then(|s| s.parse::<usize>().ok())
        {
            out.push((n, ent.path()));
        }
    }
    out.sort();
    Ok(out)
}

/// Every record in every log file of `dir`, file by file (shard order), in append order.
/// Files are read up to their first invalid record (tests, the demo, `hotpath rm`).
pub fn read_dir_records(dir: &Path) -> Result<Vec<CompletionRecord>, Error> {
    let mut out = Vec::new();
    for (_, p) in log_files(dir)? {
        out.extend(scan(&read_capped(&p)?).records);
    }
    Ok(out)
}

/// One shard's log: the deduplication set, the open file, and the batch not yet synced.
#[derive(Debug)]
pub struct CompletionLog {
    path: PathBuf,
    file: File,
    committed_len: u64,
    dedup: FastMap<ContainerKey, u64>,
    batch: Vec<u8>,
    batch_records: u64,
    total_records: u64,
}

impl CompletionLog {
    /// Loads `dir` for shard `shard` of `shards` (see the module docs) and opens the shard's
    /// file for appending, creating the directory and file as needed.
    pub fn open(
        dir: &Path,
        shard: usize,
        shards: usize,
    ) -> Result<(CompletionLog, LoadReport), Error> {
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| Error::LogIo { path, source }
        };
        std::fs::create_dir_all(dir).map_err(io(dir))?;
        let own = shard_file(dir, shard);
        let mut report = LoadReport::default();
        let mut dedup = FastMap::default();
        let mut own_scan = None;
        for (n, p) in log_files(dir)? {
            let bytes = read_capped(&p)?;
            let s = scan(&bytes);
            report.files += 1;
            if n == shard {
                if s.corrupt {
                    return Err(Error::LogCorrupt {
                        path: p,
                        offset: s.stop.map(|x| x.0).unwrap_or(0),
                        reason: s.stop.map(|x| x.1).unwrap_or("corrupt"),
                    });
                }
                own_scan = Some((s.valid_len, bytes.len() as u64));
            }
            for r in s.records {
                report.records += 1;
                if shard_of(&r.node.host, r.node.port, shards) == shard {
                    report.kept += 1;
                    dedup.insert(r.container, r.time_ms);
                }
            }
        }
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&own)
            .map_err(io(&own))?;
        let committed_len = match own_scan {
            Some((valid, total)) if valid >= MAGIC.len() as u64 => {
                if valid < total {
                    report.truncated_bytes = total - valid;
                    file.set_len(valid).map_err(io(&own))?;
                    file.sync_all().map_err(io(&own))?;
                }
                valid
            }
            _ => {
                // New file, or a torn header: start over.
                file.set_len(0).map_err(io(&own))?;
                file.write_all(MAGIC).map_err(io(&own))?;
                file.sync_all().map_err(io(&own))?;
                MAGIC.len() as u64
            }
        };
        file.seek(SeekFrom::Start(committed_len))
            .map_err(io(&own))?;
        Ok((
            CompletionLog {
                path: own,
                file,
                committed_len,
                total_records: report.kept,
                dedup,
                batch: Vec::with_capacity(64 << 10),
                batch_records: 0,
            },
            report,
        ))
    }

    /// The file this shard appends to.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether `c` has completed (durable or in the current batch).
    #[inline]
    pub fn is_completed(&self, c: &ContainerKey) -> bool {
        self.dedup.contains_key(c)
    }

    /// Adds a completion to the batch unless `container` is already recorded. Returns
    /// whether it was new. Nothing is durable before [`commit`](Self::commit).
    pub fn record(
        &mut self,
        container: ContainerKey,
        exit_status: i32,
        time_ms: u64,
        node: &NodeKey,
        diagnostics: &str,
    ) -> bool {
        if self.dedup.contains_key(&container) {
            return false;
        }
        self.dedup.insert(container, time_ms);
        encode_record(
            &mut self.batch,
            &container,
            exit_status,
            time_ms,
            node,
            diagnostics,
        );
        self.batch_records += 1;
        true
    }

    /// Records waiting for [`commit`](Self::commit).
    pub fn pending(&self) -> u64 {
        self.batch_records
    }

    /// Records durable in this shard's file plus those loaded for it.
    pub fn total_records(&self) -> u64 {
        self.total_records
    }

    /// Ids remembered for deduplication.
    pub fn dedup_len(&self) -> usize {
        self.dedup.len()
    }

    /// Writes the batch and fsyncs. On failure the file is cut back to its last committed
    /// length and the batch is kept, so a retry appends whole records only.
    pub fn commit(&mut self) -> Result<u64, Error> {
        if self.batch.is_empty() {
            return Ok(0);
        }
        let r = self
            .file
            .write_all(&self.batch)
            .and_then(|_| self.file.sync_data());
        if let Err(source) = r {
            let _ = self.file.set_len(self.committed_len);
            let _ = self.file.seek(SeekFrom::Start(self.committed_len));
            return Err(Error::LogIo {
                path: self.path.clone(),
                source,
            });
        }
        self.committed_len += self.batch.len() as u64;
        self.batch.clear();
        let n = self.batch_records;
        self.total_records += n;
        self.batch_records = 0;
        Ok(n)
    }

    /// Forgets ids completed before `now_ms - retention_ms`.
    pub fn prune(&mut self, now_ms: u64, retention_ms: u64) -> usize {
        let before = self.dedup.len();
        let cutoff = now_ms.saturating_sub(retention_ms);
        self.dedup.retain(|_, t| *t >= cutoff);
        before - self.dedup.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(n: i64) -> ContainerKey {
        ContainerKey {
            app: AppKey {
                cluster_timestamp: 1000,
                id: 1,
            },
            attempt: 1,
            id: n,
        }
    }

    #[test]
    fn record_round_trip_and_diagnostics_cut() {
        let node = NodeKey::new("127.0.0.1", 8041);
        let mut b = Vec::new();
        let long = "é".repeat(MAX_DIAGNOSTICS); // 2 bytes each: cut on a boundary
        encode_record(&mut b, &key(5), -100, 42, &node, &long);
        let mut file = MAGIC.to_vec();
        file.extend_from_slice(&b);
        let s = scan(&file);
        assert!(s.stop.is_none());
        let r = &s.records[0];
        assert_eq!(r.container, key(5));
        assert_eq!(r.exit_status, -100);
        assert_eq!(r.node, node);
        assert_eq!(r.diagnostics.len(), MAX_DIAGNOSTICS);
    }

    #[test]
    fn torn_tail_is_truncated_and_corruption_refused() {
        let dir = tempfile::tempdir().unwrap();
        let node = NodeKey::new("n1", 1);
        {
            let (mut log, rep) = CompletionLog::open(dir.path(), 0, 1).unwrap();
            assert_eq!(rep.kept, 0);
            assert!(log.record(key(1), 0, 1, &node, "ok"));
            assert!(log.record(key(2), 0, 1, &node, "ok"));
            assert!(!log.record(key(1), 0, 1, &node, "dup"));
            assert_eq!(log.commit().unwrap(), 2);
        }
        let path = shard_file(dir.path(), 0);
        let good_len = std::fs::metadata(&path).unwrap().len();
        // A torn write: half a record at the end.
        let mut half = Vec::new();
        encode_record(&mut half, &key(3), 0, 1, &node, "torn");
        let mut bytes = std::fs::read(&path).unwrap();
        bytes.extend_from_slice(&half[..half.len() / 2]);
        std::fs::write(&path, &bytes).unwrap();
        {
            let (log, rep) = CompletionLog::open(dir.path(), 0, 1).unwrap();
            assert_eq!(rep.kept, 2);
            assert_eq!(rep.truncated_bytes, (half.len() / 2) as u64);
            assert!(log.is_completed(&key(1)) && log.is_completed(&key(2)));
            assert!(!log.is_completed(&key(3)));
        }
        assert_eq!(std::fs::metadata(&path).unwrap().len(), good_len);
        // Zeros after the last record (a file system that extended the file): torn too.
        let mut bytes = std::fs::read(&path).unwrap();
        bytes.extend_from_slice(&[0u8; 300]);
        std::fs::write(&path, &bytes).unwrap();
        let (_, rep) = CompletionLog::open(dir.path(), 0, 1).unwrap();
        assert_eq!(rep.truncated_bytes, 300);
        // A flipped byte in the first record, with a valid record after it: corruption.
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[8 + 8 + 3] ^= 0xff;
        std::fs::write(&path, &bytes).unwrap();
        assert!(matches!(
            CompletionLog::open(dir.path(), 0, 1),
            Err(Error::LogCorrupt { .. })
        ));
    }

    #[test]
    fn reload_routes_by_node_and_prunes() {
        let dir = tempfile::tempdir().unwrap();
        let nodes: Vec<NodeKey> = (0..8).map(|i| NodeKey::new(&format!("h{i}"), 1)).collect();
        {
            let (mut log, _) = CompletionLog::open(dir.path(), 0, 1).unwrap();
            for (i, n) in nodes.iter().enumerate() {
                log.record(key(i as i64), 0, 100 + i as u64, n, "");
            }
            log.commit().unwrap();
        }
        // Two shards now: each keeps the completions of its own nodes.
        let (l0, r0) = CompletionLog::open(dir.path(), 0, 2).unwrap();
        let (l1, r1) = CompletionLog::open(dir.path(), 1, 2).unwrap();
        assert_eq!(r0.kept + r1.kept, 8);
        assert_eq!(r0.records, 8);
        for (i, n) in nodes.iter().enumerate() {
            let s = shard_of(&n.host, n.port, 2);
            let (own, other) = if s == 0 { (&l0, &l1) } else { (&l1, &l0) };
            assert!(own.is_completed(&key(i as i64)));
            assert!(!other.is_completed(&key(i as i64)));
        }
        let all = read_dir_records(dir.path()).unwrap();
        assert_eq!(all.len(), 8);
        let (mut l, _) = CompletionLog::open(dir.path(), 0, 1).unwrap();
        assert_eq!(l.prune(1000 + 104, 1000), 4);
        assert_eq!(l.dedup_len(), 4);
    }
}
