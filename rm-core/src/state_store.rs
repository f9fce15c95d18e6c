//! The RM state store: applications, their attempts, the RM epoch and the token master keys,
//! on local disk, so that running applications survive a `hotpath rm` restart
//! (`yarn.resourcemanager.recovery.enabled`, work-preserving as Java's default).
//!
//! Java's `FileSystemRMStateStore` writes one file per application and attempt; we keep one
//! append-only log, `rmstore.log`, in `yarn.resourcemanager.fs.state-store.uri` (a local path
//! or `file:` URI; default `<hotpath.rm.completion-log.dir>/rmstore`), because our writes are
//! small, ordered and must be cheap on the submit path. What is written, and when (the same
//! points at which Java's `RMStateStore` stores):
//!
//! - [`Rec::Submitted`]: an accepted submission (id, user, time, the whole
//!   `ApplicationSubmissionContextProto` as the client sent it);
//! - [`Rec::AmAllocated`]: an attempt got its AM container (id and node);
//! - [`Rec::AttemptEnded`]: an attempt reached a final state (with its diagnostics, the AM's exit
//!   status and whether it counts against the attempt limit);
//! - [`Rec::AppEnded`]: an application's final state, written when the AM unregisters
//!   (Java's FINAL_SAVING) and again when the application ends;
//! - [`Rec::Keys`]: the AMRMToken, container-token and NMToken master keys, at start and
//!   whenever one rolls, so tokens held by running AMs and NodeManagers still verify;
//! - [`Rec::Epoch`]: the RM epoch, one more on every start; container ids allocated in epoch
//!   `e` carry it in their high bits (`container_e<e>_…`) so they never repeat an id of an
//!   earlier run;
//! - [`Rec::DtKey`] / [`Rec::DtKeyRemoved`], [`Rec::DtToken`] / [`Rec::DtTokenRemoved`]: the
//!   RM delegation-token master keys and tokens ([`crate::rm_delegation`]; Java's
//!   `storeRMDTMasterKey`, `storeRMDelegationToken`, `updateRMDelegationToken` and their
//!   removals), so `RM_DELEGATION_TOKEN`s stay valid across a restart. Logs written before
//!   these records existed read as before (no keys, no tokens);
//! - [`Rec::ClientToAmKey`]: a secure RM's ClientToAM master key of an attempt, when its AM
//!   registers (Java keeps it in the attempt's stored credentials), so that clients of an AM
//!   that outlived a restart still get tokens it verifies.
//!
//! Records are framed `u32 LE length | u32 LE CRC32C(payload) | payload`, the payload a
//! protobuf message ([`StoreRecord`], ours). Appends are fsynced by the RM's store writer thread
//! (several changes per fsync when they queue up; `app_service`): a client or AM call is
//! answered, and an AM container launched, only once what it changed is durable; heartbeat
//! threads never wait for the disk. [`StateStore::open`] replays the
//! log into [`Recovered`]; a torn tail (a cut or unverifiable last record with nothing valid
//! after it) is truncated, damage before valid records refuses to start
//! ([`Error::StoreCorrupt`]). The log is then rewritten compactly ([`StateStore::compact`]):
//! one file holding only what the RM still keeps, written beside it, fsynced and renamed.
//! It is compacted again when it has grown past `hotpath.rm.state-store.max-log-bytes`.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use hadoop_wire::pb::hadoop::yarn::{
    ApplicationAttemptIdProto, ApplicationIdProto, MasterKeyProto,
};
use prost::Message;

use crate::Error;

/// The log's file name in the store directory.
pub const LOG_FILE: &str = "rmstore.log";
/// Largest record we write or read (a submission context is capped well below this by
/// `hotpath.rm.max-submission-bytes`).
pub const MAX_RECORD: usize = 64 << 20;
/// Largest log read at startup.
pub const MAX_LOG_BYTES: u64 = 1 << 32;

/// One stored record.
#[derive(Clone, PartialEq, Message)]
pub struct StoreRecord {
    #[prost(oneof = "Rec", tags = "1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11")]
    pub rec: Option<Rec>,
}

/// What a record says.
#[derive(Clone, PartialEq, prost::Oneof)]
pub enum Rec {
    #[prost(message, tag = "1")]
    Epoch(EpochRec),
    #[prost(message, tag = "2")]
    Keys(KeysRec),
    #[prost(message, tag = "3")]
    Submitted(SubmittedRec),
    #[prost(message, tag = "4")]
    AmAllocated(AmAllocatedRec),
    #[prost(message, tag = "5")]
    AttemptEnded(AttemptEndedRec),
    #[prost(message, tag = "6")]
    AppEnded(AppEndedRec),
    #[prost(message, tag = "7")]
    DtKey(DtKeyRec),
    #[prost(message, tag = "8")]
    DtKeyRemoved(DtKeyRemovedRec),
    #[prost(message, tag = "9")]
    DtToken(DtTokenRec),
    #[prost(message, tag = "10")]
    DtTokenRemoved(DtTokenRemovedRec),
    #[prost(message, tag = "11")]
    ClientToAmKey(ClientToAmKeyRec),
}

/// An attempt's ClientToAM master key (a secure RM's, made when its AM registered; Java keeps
/// it in the attempt's state, `ApplicationAttemptStateData`), so that after a restart the RM
/// still hands clients tokens its AM verifies.
#[derive(Clone, PartialEq, Message)]
pub struct ClientToAmKeyRec {
    #[prost(message, required, tag = "1")]
    pub attempt: ApplicationAttemptIdProto,
    #[prost(bytes = "vec", required, tag = "2")]
    pub key: Vec<u8>,
}

/// An RM delegation-token master key (made, or its expiry moved at a roll).
#[derive(Clone, PartialEq, Message)]
pub struct DtKeyRec {
    #[prost(int32, required, tag = "1")]
    pub key_id: i32,
    #[prost(int64, required, tag = "2")]
    pub expiry_date: i64,
    #[prost(bytes = "vec", required, tag = "3")]
    pub bytes: Vec<u8>,
}

/// An expired RM delegation-token master key, dropped.
#[derive(Clone, PartialEq, Message)]
pub struct DtKeyRemovedRec {
    #[prost(int32, required, tag = "1")]
    pub key_id: i32,
}

/// An RM delegation token stored or renewed (Java's `RMDelegationTokenIdentifierData`: the
/// identifier and its renew date; the password is recomputed from its key on recovery), with
/// the sequence counter then.
#[derive(Clone, PartialEq, Message)]
pub struct DtTokenRec {
    /// `YARNDelegationTokenIdentifierProto` bytes.
    #[prost(bytes = "vec", required, tag = "1")]
    pub identifier: Vec<u8>,
    #[prost(int64, required, tag = "2")]
    pub renew_date: i64,
    #[prost(int32, required, tag = "3")]
    pub sequence: i32,
}

/// An RM delegation token cancelled or expired.
#[derive(Clone, PartialEq, Message)]
pub struct DtTokenRemovedRec {
    #[prost(bytes = "vec", required, tag = "1")]
    pub identifier: Vec<u8>,
}

/// The RM epoch of the run that wrote the following records.
#[derive(Clone, PartialEq, Message)]
pub struct EpochRec {
    #[prost(int64, required, tag = "1")]
    pub epoch: i64,
}

/// The master keys in use.
#[derive(Clone, PartialEq, Message)]
pub struct KeysRec {
    #[prost(message, optional, tag = "1")]
    pub amrm_current: Option<MasterKeyProto>,
    #[prost(message, optional, tag = "2")]
    pub amrm_next: Option<MasterKeyProto>,
    #[prost(message, optional, tag = "3")]
    pub container: Option<MasterKeyProto>,
    #[prost(message, optional, tag = "4")]
    pub nm: Option<MasterKeyProto>,
}

/// An accepted submission.
#[derive(Clone, PartialEq, Message)]
pub struct SubmittedRec {
    #[prost(message, required, tag = "1")]
    pub app: ApplicationIdProto,
    #[prost(string, required, tag = "2")]
    pub user: String,
    #[prost(uint64, required, tag = "3")]
    pub submit_ms: u64,
    /// `ApplicationSubmissionContextProto`, as submitted.
    #[prost(bytes = "vec", required, tag = "4")]
    pub context: Vec<u8>,
}

/// An attempt's AM container.
#[derive(Clone, PartialEq, Message)]
pub struct AmAllocatedRec {
    #[prost(message, required, tag = "1")]
    pub attempt: ApplicationAttemptIdProto,
    /// The container id's 64-bit number (epoch bits included).
    #[prost(int64, required, tag = "2")]
    pub container: i64,
    #[prost(string, required, tag = "3")]
    pub host: String,
    #[prost(int32, required, tag = "4")]
    pub port: i32,
    #[prost(uint64, required, tag = "5")]
    pub allocated_ms: u64,
}

/// An attempt in a final state.
#[derive(Clone, PartialEq, Message)]
pub struct AttemptEndedRec {
    #[prost(message, required, tag = "1")]
    pub attempt: ApplicationAttemptIdProto,
    /// [`crate::apps::AttemptState`] as its code (see `AttemptState::code`).
    #[prost(int32, required, tag = "2")]
    pub state: i32,
    #[prost(string, required, tag = "3")]
    pub diagnostics: String,
    #[prost(int32, optional, tag = "4")]
    pub am_exit_status: Option<i32>,
    /// The application's attempt failures that count against its limit, this one included.
    #[prost(int32, required, tag = "5")]
    pub failures: i32,
    /// `FinalApplicationStatusProto` the AM unregistered with, if it did.
    #[prost(int32, optional, tag = "6")]
    pub final_status: Option<i32>,
}

/// An application's final state.
#[derive(Clone, PartialEq, Message)]
pub struct AppEndedRec {
    #[prost(message, required, tag = "1")]
    pub app: ApplicationIdProto,
    /// [`crate::apps::AppState`] as its code.
    #[prost(int32, required, tag = "2")]
    pub state: i32,
    /// `FinalApplicationStatusProto`.
    #[prost(int32, required, tag = "3")]
    pub final_status: i32,
    #[prost(string, required, tag = "4")]
    pub diagnostics: String,
    #[prost(uint64, required, tag = "5")]
    pub finish_ms: u64,
}

/// One attempt as replayed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RecoveredAttempt {
    pub allocated: Option<AmAllocatedRec>,
    pub ended: Option<AttemptEndedRec>,
    /// Its ClientToAM master key, if its AM registered with a secure RM.
    pub client_to_am_key: Option<Vec<u8>>,
}

/// One application as replayed.
#[derive(Debug, Clone, PartialEq)]
pub struct RecoveredApp {
    pub submitted: SubmittedRec,
    /// Attempt number → attempt.
    pub attempts: BTreeMap<i32, RecoveredAttempt>,
    pub ended: Option<AppEndedRec>,
}

/// What the log held.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Recovered {
    /// The newest epoch written (0 when the store was empty).
    pub epoch: i64,
    /// The newest keys written.
    pub keys: Option<KeysRec>,
    /// (cluster timestamp, sequence number) → application, in submission order.
    pub apps: BTreeMap<(i64, i32), RecoveredApp>,
    /// RM delegation-token master keys, by id.
    pub dt_keys: BTreeMap<i32, DtKeyRec>,
    /// RM delegation tokens: identifier bytes → renew date.
    pub dt_tokens: BTreeMap<Vec<u8>, i64>,
    /// The RM delegation-token sequence counter.
    pub dt_sequence: i32,
    /// Valid records read.
    pub records: u64,
    /// Bytes cut from a torn tail.
    pub truncated_bytes: u64,
}

fn app_key(p: &ApplicationIdProto) -> (i64, i32) {
    (p.cluster_timestamp.unwrap_or(0), p.id.unwrap_or(0))
}

impl Recovered {
    /// Applies one record (later records win).
    pub fn apply(&mut self, r: Rec) {
        match r {
            Rec::Epoch(e) => self.epoch = self.epoch.max(e.epoch),
            Rec::Keys(k) => self.keys = Some(k),
            Rec::Submitted(s) => {
                let key = app_key(&s.app);
                self.apps.entry(key).or_insert(RecoveredApp {
                    submitted: s,
                    attempts: BTreeMap::new(),
                    ended: None,
                });
            }
            Rec::AmAllocated(a) => {
                if let Some(app) = a
                    .attempt
                    .application_id
                    .as_ref()
                    .and_then(|id| self.apps.get_mut(&app_key(id)))
                {
                    let n = a.attempt.attempt_id.unwrap_or(0);
                    app.attempts.entry(n).or_default().allocated = Some(a);
                }
            }
            Rec::AttemptEnded(e) => {
                if let Some(app) = e
                    .attempt
                    .application_id
                    .as_ref()
                    .and_then(|id| self.apps.get_mut(&app_key(id)))
                {
                    let n = e.attempt.attempt_id.unwrap_or(0);
                    app.attempts.entry(n).or_default().ended = Some(e);
                }
            }
            Rec::AppEnded(e) => {
                if let Some(app) = self.apps.get_mut(&app_key(&e.app)) {
                    app.ended = Some(e);
                }
            }
            Rec::DtKey(k) => {
                self.dt_keys.insert(k.key_id, k);
            }
            Rec::DtKeyRemoved(k) => {
                self.dt_keys.remove(&k.key_id);
            }
            Rec::DtToken(t) => {
                self.dt_sequence = self.dt_sequence.max(t.sequence);
                self.dt_tokens.insert(t.identifier, t.renew_date);
            }
            Rec::DtTokenRemoved(t) => {
                self.dt_tokens.remove(&t.identifier);
            }
            Rec::ClientToAmKey(k) => {
                if let Some(app) = k
                    .attempt
                    .application_id
                    .as_ref()
                    .and_then(|id| self.apps.get_mut(&app_key(id)))
                {
                    let n = k.attempt.attempt_id.unwrap_or(0);
                    app.attempts.entry(n).or_default().client_to_am_key = Some(k.key);
                }
            }
        }
    }
}

/// Frames one record.
pub fn frame(rec: &Rec, out: &mut Vec<u8>) {
    let msg = StoreRecord {
        rec: Some(rec.clone()),
    };
    let len = msg.encoded_len();
    let start = out.len();
    out.extend_from_slice(&[0u8; 8]);
    msg.encode(out).expect("a Vec grows as needed");
    let crc = crc32c::crc32c(&out[start + 8..]);
    out[start..start + 4].copy_from_slice(&(len as u32).to_le_bytes());
    out[start + 4..start + 8].copy_from_slice(&crc.to_le_bytes());
}

/// The frame at `at`: its payload and the offset after it, or why it is not valid.
fn frame_at(bytes: &[u8], at: usize) -> Result<(&[u8], usize), &'static str> {
    let head = bytes.get(at..at + 8).ok_or("short header")?;
    let len = u32::from_le_bytes([head[0], head[1], head[2], head[3]]) as usize;
    let crc = u32::from_le_bytes([head[4], head[5], head[6], head[7]]);
    if len > MAX_RECORD {
        return Err("length over the record cap");
    }
    let payload = bytes.get(at + 8..at + 8 + len).ok_or("short payload")?;
    if crc32c::crc32c(payload) != crc {
        return Err("checksum mismatch");
    }
    Ok((payload, at + 8 + len))
}

/// Replays `bytes`: the state, and the length of the valid prefix.
pub fn replay(path: &Path, bytes: &[u8]) -> Result<(Recovered, usize), Error> {
    let mut rec = Recovered::default();
    let mut at = 0;
    while at < bytes.len() {
        match frame_at(bytes, at) {
            Ok((payload, next)) => {
                let msg = StoreRecord::decode(payload).map_err(|_| Error::StoreCorrupt {
                    path: path.to_path_buf(),
                    offset: at as u64,
                    reason: "record does not decode",
                })?;
                if let Some(r) = msg.rec {
                    rec.apply(r);
                }
                rec.records += 1;
                at = next;
            }
            Err(reason) => {
                // A torn tail only if nothing valid follows.
                let later_valid = (at + 1..bytes.len()).any(|i| {
                    frame_at(bytes, i)
                        .ok()
                        .is_some_and(|(p, _)| StoreRecord::decode(p).is_ok() && !p.is_empty())
                });
                if later_valid {
                    return Err(Error::StoreCorrupt {
                        path: path.to_path_buf(),
                        offset: at as u64,
                        reason,
                    });
                }
                break;
            }
        }
    }
    rec.truncated_bytes = (bytes.len() - at) as u64;
    Ok((rec, at))
}

fn io(path: &Path) -> impl Fn(std::io::Error) -> Error + '_ {
    move |source| Error::StoreIo {
        path: path.to_path_buf(),
        source,
    }
}

/// The open log (see the module docs).
#[derive(Debug)]
pub struct StateStore {
    dir: PathBuf,
    path: PathBuf,
    file: File,
    bytes: u64,
    max_bytes: u64,
    buf: Vec<u8>,
}

impl StateStore {
    /// Opens (creating) the store in `dir` and replays it; a torn tail is cut off.
    pub fn open(dir: &Path, max_bytes: u64) -> Result<(StateStore, Recovered), Error> {
        std::fs::create_dir_all(dir).map_err(io(dir))?;
        let path = dir.join(LOG_FILE);
        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(&path)
            .map_err(io(&path))?;
        let len = file.metadata().map_err(io(&path))?.len();
        if len > MAX_LOG_BYTES {
            return Err(Error::StoreCorrupt {
                path,
                offset: 0,
                reason: "log larger than the startup read cap",
            });
        }
        let mut bytes = Vec::with_capacity(len as usize);
        file.read_to_end(&mut bytes).map_err(io(&path))?;
        let (rec, valid) = replay(&path, &bytes)?;
        if (valid as u64) < len {
            file.set_len(valid as u64).map_err(io(&path))?;
            file.sync_all().map_err(io(&path))?;
        }
        Ok((
            StateStore {
                dir: dir.to_path_buf(),
                path,
                file,
                bytes: valid as u64,
                max_bytes,
                buf: Vec::new(),
            },
            rec,
        ))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Bytes in the log now.
    pub fn len(&self) -> u64 {
        self.bytes
    }

    pub fn is_empty(&self) -> bool {
        self.bytes == 0
    }

    /// Whether the log has grown past its limit (then [`compact`](Self::compact) it).
    pub fn wants_compaction(&self) -> bool {
        self.bytes > self.max_bytes
    }

    /// Appends `recs` and fsyncs them.
    pub fn append(&mut self, recs: &[Rec]) -> Result<(), Error> {
        if recs.is_empty() {
            return Ok(());
        }
        self.buf.clear();
        for r in recs {
            frame(r, &mut self.buf);
        }
        self.file.write_all(&self.buf).map_err(io(&self.path))?;
        self.file.sync_data().map_err(io(&self.path))?;
        self.bytes += self.buf.len() as u64;
        if self.buf.capacity() > 1 << 20 {
            self.buf = Vec::new();
        }
        Ok(())
    }

    /// Replaces the log by `recs` (what the RM keeps now): written to a temporary file,
    /// fsynced, renamed over the log, the directory fsynced.
    pub fn compact(&mut self, recs: &[Rec]) -> Result<(), Error> {
        let tmp = self.dir.join(format!("{LOG_FILE}.tmp"));
        let mut out = Vec::new();
        for r in recs {
            frame(r, &mut out);
        }
        {
            let mut f = File::create(&tmp).map_err(io(&tmp))?;
            f.write_all(&out).map_err(io(&tmp))?;
            f.sync_all().map_err(io(&tmp))?;
        }
        std::fs::rename(&tmp, &self.path).map_err(io(&self.path))?;
        File::open(&self.dir)
            .and_then(|d| d.sync_all())
            .map_err(io(&self.dir))?;
        self.file = OpenOptions::new()
            .append(true)
            .open(&self.path)
            .map_err(io(&self.path))?;
        self.bytes = out.len() as u64;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn app(id: i32) -> ApplicationIdProto {
        ApplicationIdProto {
            id: Some(id),
            cluster_timestamp: Some(1_700_000_000_000),
        }
    }

    fn attempt(id: i32, n: i32) -> ApplicationAttemptIdProto {
        ApplicationAttemptIdProto {
            application_id: Some(app(id)),
            attempt_id: Some(n),
        }
    }

    fn sample() -> Vec<Rec> {
        vec![
            Rec::Epoch(EpochRec { epoch: 3 }),
            Rec::Submitted(SubmittedRec {
                app: app(1),
                user: "alice".into(),
                submit_ms: 5,
                context: vec![1, 2, 3],
            }),
            Rec::AmAllocated(AmAllocatedRec {
                attempt: attempt(1, 1),
                container: 1,
                host: "h1".into(),
                port: 45454,
                allocated_ms: 6,
            }),
            Rec::AttemptEnded(AttemptEndedRec {
                attempt: attempt(1, 1),
                state: 6,
                diagnostics: "boom".into(),
                am_exit_status: Some(1),
                failures: 1,
                final_status: None,
            }),
        ]
    }

    #[test]
    fn records_replay_and_later_ones_win() {
        let d = tempfile::tempdir().unwrap();
        let (mut s, r) = StateStore::open(d.path(), 1 << 20).unwrap();
        assert_eq!(r, Recovered::default());
        s.append(&sample()).unwrap();
        s.append(&[Rec::Epoch(EpochRec { epoch: 4 })]).unwrap();
        drop(s);
        let (_, r) = StateStore::open(d.path(), 1 << 20).unwrap();
        assert_eq!(r.epoch, 4);
        assert_eq!(r.records, 5);
        let a = &r.apps[&(1_700_000_000_000, 1)];
        assert_eq!(a.submitted.user, "alice");
        let at = &a.attempts[&1];
        assert_eq!(at.allocated.as_ref().unwrap().host, "h1");
        assert_eq!(at.ended.as_ref().unwrap().diagnostics, "boom");
        assert!(a.ended.is_none());
    }

    #[test]
    fn client_to_am_keys_replay_with_their_attempts() {
        let d = tempfile::tempdir().unwrap();
        let (mut s, _) = StateStore::open(d.path(), 1 << 20).unwrap();
        s.append(&sample()).unwrap();
        let key = |a: i32, n: i32, b: u8| {
            Rec::ClientToAmKey(ClientToAmKeyRec {
                attempt: attempt(a, n),
                key: vec![b; 32],
            })
        };
        // Attempt 2's key; one of an application never submitted is dropped.
        s.append(&[key(1, 2, 7), key(9, 1, 8)]).unwrap();
        drop(s);
        let (_, r) = StateStore::open(d.path(), 1 << 20).unwrap();
        let a = &r.apps[&(1_700_000_000_000, 1)];
        assert_eq!(a.attempts[&1].client_to_am_key, None);
        assert_eq!(a.attempts[&2].client_to_am_key, Some(vec![7; 32]));
        assert_eq!(r.apps.len(), 1);
    }

    #[test]
    fn a_torn_tail_is_cut_and_damage_before_valid_records_refused() {
        let d = tempfile::tempdir().unwrap();
        let (mut s, _) = StateStore::open(d.path(), 1 << 20).unwrap();
        s.append(&sample()).unwrap();
        let good = s.len();
        drop(s);
        let path = d.path().join(LOG_FILE);
        // A record cut short.
        let mut tail = Vec::new();
        frame(&Rec::Epoch(EpochRec { epoch: 9 }), &mut tail);
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(&tail[..tail.len() - 1]).unwrap();
        drop(f);
        let (s, r) = StateStore::open(d.path(), 1 << 20).unwrap();
        assert_eq!(r.epoch, 3);
        assert_eq!(r.truncated_bytes, tail.len() as u64 - 1);
        assert_eq!(s.len(), good);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), good);
        drop(s);
        // A flipped byte in the first record, valid ones after it: refused.
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[9] ^= 0xff;
        std::fs::write(&path, &bytes).unwrap();
        match StateStore::open(d.path(), 1 << 20) {
            Err(Error::StoreCorrupt { offset, .. }) => assert_eq!(offset, 0),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn oversized_lengths_are_not_allocated() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join(LOG_FILE);
        let mut bytes = u32::MAX.to_le_bytes().to_vec();
        bytes.extend_from_slice(&[0, 0, 0, 0, 1, 2, 3]);
        std::fs::write(&path, &bytes).unwrap();
        let (s, r) = StateStore::open(d.path(), 1 << 20).unwrap();
        assert_eq!(r.records, 0);
        assert_eq!(r.truncated_bytes, bytes.len() as u64);
        assert!(s.is_empty());
    }

    proptest::proptest! {
        /// Any bytes after a valid prefix: replay keeps the prefix or refuses, never panics.
        #[test]
        fn arbitrary_tails_never_panic(tail in proptest::collection::vec(proptest::num::u8::ANY, 0..512)) {
            let mut bytes = Vec::new();
            for r in sample() {
                frame(&r, &mut bytes);
            }
            let good = bytes.len();
            bytes.extend_from_slice(&tail);
            match replay(Path::new("x"), &bytes) {
                Ok((rec, valid)) => {
                    proptest::prop_assert!(valid >= good);
                    proptest::prop_assert_eq!(rec.epoch, 3);
                }
                Err(Error::StoreCorrupt { offset, .. }) => {
                    proptest::prop_assert!(offset as usize >= good)
                }
                Err(e) => proptest::prop_assert!(false, "{e}"),
            }
        }
    }

    #[test]
    fn delegation_records_replay_and_old_logs_read_as_before() {
        let d = tempfile::tempdir().unwrap();
        let (mut s, _) = StateStore::open(d.path(), 1 << 20).unwrap();
        s.append(&sample()).unwrap();
        let old = std::fs::read(d.path().join(LOG_FILE)).unwrap();
        let key = |id, exp| {
            Rec::DtKey(DtKeyRec {
                key_id: id,
                expiry_date: exp,
                bytes: vec![id as u8; 8],
            })
        };
        let tok = |i: u8, renew, seq| {
            Rec::DtToken(DtTokenRec {
                identifier: vec![i],
                renew_date: renew,
                sequence: seq,
            })
        };
        s.append(&[
            key(1, 10),
            key(2, 20),
            tok(1, 100, 1),
            tok(2, 100, 2),
            key(1, 15),
            tok(1, 200, 2),
            Rec::DtKeyRemoved(DtKeyRemovedRec { key_id: 2 }),
            Rec::DtTokenRemoved(DtTokenRemovedRec {
                identifier: vec![2],
            }),
        ])
        .unwrap();
        drop(s);
        let (_, r) = StateStore::open(d.path(), 1 << 20).unwrap();
        assert_eq!(r.dt_keys.keys().copied().collect::<Vec<_>>(), vec![1]);
        assert_eq!(r.dt_keys[&1].expiry_date, 15);
        assert_eq!(r.dt_tokens, BTreeMap::from([(vec![1u8], 200)]));
        assert_eq!(r.dt_sequence, 2);
        assert_eq!(r.epoch, 3);
        // A log from before these records: nothing delegation, the rest as before.
        let (rec, valid) = replay(Path::new("x"), &old).unwrap();
        assert_eq!(valid, old.len());
        assert!(rec.dt_keys.is_empty() && rec.dt_tokens.is_empty());
        assert_eq!(rec.apps.len(), 1);
    }

    #[test]
    fn compaction_replaces_the_log() {
        let d = tempfile::tempdir().unwrap();
        let (mut s, _) = StateStore::open(d.path(), 100).unwrap();
        for _ in 0..10 {
            s.append(&sample()).unwrap();
        }
        assert!(s.wants_compaction());
        s.compact(&sample()[..2]).unwrap();
        assert!(!s.wants_compaction());
        s.append(&[Rec::Epoch(EpochRec { epoch: 7 })]).unwrap();
        drop(s);
        let (_, r) = StateStore::open(d.path(), 100).unwrap();
        assert_eq!(r.records, 3);
        assert_eq!(r.epoch, 7);
        assert_eq!(r.apps.len(), 1);
        assert!(r.apps.values().next().unwrap().attempts.is_empty());
    }
}
