//! Map outputs on disk: where a map attempt's `file.out` and `file.out.index` are, the index
//! file (`SpillRecord`) read and cached within a bound, and the `ShuffleHeader` Writable that
//! precedes each segment in a response.
//!
//! Tasks write `$LOCAL_DIRS/output/<attempt>/file.out(.index)`, i.e.
//! `<local dir>/usercache/<user>/appcache/<appId>/output/<attempt>/…`; the data and the index
//! may be on different local dirs (a multi-spill merge allocates them independently), so each
//! is searched across all local dirs in their configured order, as Java's
//! `LocalDirsHandlerService.getLocalPathForRead` does.
//!
//! Index file: N records of (startOffset, rawLength, partLength), big-endian i64, then the
//! CRC32 of those N × 24 bytes as a big-endian i64; N = file length / 24.

use std::collections::{HashMap, VecDeque};
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use hadoop_wire::token::writable::{write_vint, write_vlong};

/// Bytes of one index record.
pub const INDEX_RECORD_LENGTH: u64 = 24;
/// Largest index file read (a job with more than ~1.4 million reducers is refused).
pub const MAX_INDEX_BYTES: u64 = 32 << 20;

/// One partition of a map output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexRecord {
    pub start_offset: i64,
    pub raw_length: i64,
    pub part_length: i64,
}

/// Why a map output cannot be served: the text is Java's 500 body.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct MapOutputError(pub String);

/// Whether `s` is a map attempt id (`attempt_<ts>_<job>_m_<task>_<attempt>`, digits only):
/// anything else (`..`, `/`, a reduce attempt) is never looked up on disk.
pub fn is_map_attempt_id(s: &str) -> bool {
    let Some(rest) = s.strip_prefix("attempt_") else {
        return false;
    };
    let parts: Vec<&str> = rest.split('_').collect();
    let digits = |p: &str| !p.is_empty() && p.len() <= 20 && p.bytes().all(|b| b.is_ascii_digit());
    parts.len() == 5
        && digits(parts[0])
        && digits(parts[1])
        && parts[2] == "m"
        && digits(parts[3])
        && digits(parts[4])
}

/// `output/<attempt>/<file>` of a job, relative to a local dir.
pub fn relative_path(user: &str, app: &str, attempt: &str, file: &str) -> String {
    format!("usercache/{user}/appcache/{app}/output/{attempt}/{file}")
}

/// Opens `rel` in the first local dir that has it as a regular file (Java's
/// `getLocalPathForRead`): the file, its path and its length.
pub fn open_in_dirs(dirs: &[PathBuf], rel: &str) -> Result<(File, PathBuf, u64), MapOutputError> {
    for d in dirs {
        let p = d.join(rel);
        if let Ok(f) = File::open(&p) {
            match f.metadata() {
                Ok(m) if m.is_file() => return Ok((f, p, m.len())),
                _ => {}
            }
        }
    }
    Err(MapOutputError(format!(
        "Could not find {rel} in any of the directories"
    )))
}

/// Reads and checks an index file (`SpillRecord`).
pub fn read_index(mut f: File, path: &Path, len: u64) -> Result<Vec<IndexRecord>, MapOutputError> {
    let read_err = |m: String| MapOutputError(format!("Error Reading IndexFile{m}"));
    if len > MAX_INDEX_BYTES {
        return Err(read_err(format!(
            "{}: {len} bytes is larger than {MAX_INDEX_BYTES}",
            path.display()
        )));
    }
    let n = len / INDEX_RECORD_LENGTH;
    let want = (n * INDEX_RECORD_LENGTH + 8) as usize;
    let mut buf = Vec::with_capacity(want);
    (&mut f)
        .take(want as u64)
        .read_to_end(&mut buf)
        .map_err(|e| read_err(e.to_string()))?;
    if buf.len() < want {
        return Err(read_err(String::new()));
    }
    let body = &buf[..want - 8];
    let stored = u64::from_be_bytes(buf[want - 8..].try_into().expect("8 bytes"));
    if u64::from(crc32fast::hash(body)) != stored {
        return Err(read_err(format!(
            "Checksum error reading spill index: {}",
            path.display()
        )));
    }
    let be = |b: &[u8]| i64::from_be_bytes(b.try_into().expect("8 bytes"));
    Ok(body
        .chunks_exact(INDEX_RECORD_LENGTH as usize)
        .map(|r| IndexRecord {
            start_offset: be(&r[0..8]),
            raw_length: be(&r[8..16]),
            part_length: be(&r[16..24]),
        })
        .collect())
}

/// Java's `IndexCache`: whole index files by (job, map attempt), at most `max_bytes` of
/// records and keys, the oldest entries evicted first. Keyed by the job too (Java keys by the
/// attempt alone), so one job's request never sees another's index.
#[derive(Debug)]
pub struct IndexCache {
    inner: Mutex<CacheInner>,
    max_bytes: usize,
    files: Mutex<FileCache>,
    max_files: usize,
}

/// A map output's data file, open (a reducer per reduce fetches it once each: the open, the
/// path walk across the local dirs and the `fstat` are paid once).
#[derive(Debug)]
pub struct DataFile {
    pub file: File,
    pub path: PathBuf,
    /// Its length when opened (a finished map output does not change).
    pub size: u64,
}

/// Job → attempt → open data file, with the insertion order for eviction.
#[derive(Debug, Default)]
struct FileCache {
    map: HashMap<String, HashMap<String, Arc<DataFile>>>,
    order: VecDeque<(String, String)>,
}

/// Job → attempt → records (nested, so that a hit is looked up by `&str`, allocating
/// nothing), with the insertion order for eviction.
#[derive(Debug, Default)]
struct CacheInner {
    map: HashMap<String, HashMap<String, Arc<Vec<IndexRecord>>>>,
    order: VecDeque<(String, String)>,
    bytes: usize,
}

fn weight(key: &(String, String), v: &[IndexRecord]) -> usize {
    key.0.len() + key.1.len() + v.len() * INDEX_RECORD_LENGTH as usize
}

impl CacheInner {
    fn get(&self, job: &str, attempt: &str) -> Option<&Arc<Vec<IndexRecord>>> {
        self.map.get(job)?.get(attempt)
    }

    fn remove(&mut self, key: &(String, String)) -> Option<Arc<Vec<IndexRecord>>> {
        let per_job = self.map.get_mut(&key.0)?;
        let v = per_job.remove(&key.1);
        if per_job.is_empty() {
            self.map.remove(&key.0);
        }
        v
    }
}

impl IndexCache {
    /// A cache of at most `max_bytes` of index records and `max_files` open data files.
    pub fn new(max_bytes: usize, max_files: usize) -> IndexCache {
        IndexCache {
            inner: Mutex::new(CacheInner::default()),
            max_bytes,
            files: Mutex::new(FileCache::default()),
            max_files,
        }
    }

    /// The data file (`file.out`) of `attempt` of `job`, opened on a miss; the oldest entry
    /// is closed when `max_files` are open.
    pub fn data_file(
        &self,
        dirs: &[PathBuf],
        job: &str,
        user: &str,
        app: &str,
        attempt: &str,
    ) -> Result<Arc<DataFile>, MapOutputError> {
        let hit = {
            let c = self.files.lock().unwrap_or_else(|p| p.into_inner());
            c.map.get(job).and_then(|m| m.get(attempt)).cloned()
        };
        if let Some(f) = hit {
            return Ok(f);
        }
        let (file, path, size) =
            open_in_dirs(dirs, &relative_path(user, app, attempt, "file.out"))?;
        let f = Arc::new(DataFile { file, path, size });
        if self.max_files == 0 {
            return Ok(f);
        }
        let mut c = self.files.lock().unwrap_or_else(|p| p.into_inner());
        if c.map.get(job).is_some_and(|m| m.contains_key(attempt)) {
            return Ok(f);
        }
        while c.order.len() >= self.max_files {
            let Some((j, a)) = c.order.pop_front() else {
                break;
            };
            if let Some(m) = c.map.get_mut(&j) {
                m.remove(&a);
                if m.is_empty() {
                    c.map.remove(&j);
                }
            }
        }
        c.order.push_back((job.to_string(), attempt.to_string()));
        c.map
            .entry(job.to_string())
            .or_default()
            .insert(attempt.to_string(), f.clone());
        Ok(f)
    }

    /// Open data files cached now.
    pub fn open_files(&self) -> usize {
        self.files
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .order
            .len()
    }

    /// Bytes cached now.
    pub fn bytes(&self) -> usize {
        self.inner.lock().unwrap_or_else(|p| p.into_inner()).bytes
    }

    /// The index of `attempt` of `job` (its files under `user`/`app`), read on a miss.
    pub fn get(
        &self,
        dirs: &[PathBuf],
        job: &str,
        user: &str,
        app: &str,
        attempt: &str,
    ) -> Result<Arc<Vec<IndexRecord>>, MapOutputError> {
        if let Some(v) = self
            .inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(job, attempt)
        {
            return Ok(v.clone());
        }
        let key = (job.to_string(), attempt.to_string());
        let rel = relative_path(user, app, attempt, "file.out.index");
        let (f, path, len) = open_in_dirs(dirs, &rel)?;
        let records = Arc::new(read_index(f, &path, len)?);
        let w = weight(&key, &records);
        let mut c = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if w <= self.max_bytes && c.get(job, attempt).is_none() {
            while c.bytes + w > self.max_bytes {
                let Some(old) = c.order.pop_front() else {
                    break;
                };
                if let Some(v) = c.remove(&old) {
                    c.bytes -= weight(&old, &v);
                }
            }
            c.bytes += w;
            c.order.push_back(key.clone());
            c.map
                .entry(key.0)
                .or_default()
                .insert(key.1, records.clone());
        }
        Ok(records)
    }

    /// Forgets a job's entries and closes its files (its application was cleaned up).
    pub fn remove_job(&self, job: &str) {
        {
            let mut f = self.files.lock().unwrap_or_else(|p| p.into_inner());
            if f.map.remove(job).is_some() {
                f.order.retain(|k| k.0 != job);
            }
        }
        let mut c = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(gone) = c.map.remove(job) {
            for (attempt, v) in gone {
                c.bytes -= weight(&(job.to_string(), attempt), &v);
            }
            c.order.retain(|k| k.0 != job);
        }
    }
}

/// Appends the `ShuffleHeader` Writable: `Text mapId`, `VLong compressedLength` (partLength),
/// `VLong uncompressedLength` (rawLength), `VInt forReduce`.
pub fn write_shuffle_header(out: &mut Vec<u8>, map_id: &str, rec: &IndexRecord, reduce: i32) {
    write_vint(out, map_id.len() as i32);
    out.extend_from_slice(map_id.as_bytes());
    write_vlong(out, rec.part_length);
    write_vlong(out, rec.raw_length);
    write_vint(out, reduce);
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAP: &str = "attempt_1700000000000_0001_m_000000_0";

    fn header(part: i64, raw: i64, reduce: i32) -> Vec<u8> {
        let mut v = Vec::new();
        let rec = IndexRecord {
            start_offset: 0,
            raw_length: raw,
            part_length: part,
        };
        write_shuffle_header(&mut v, MAP, &rec, reduce);
        assert_eq!(v[0], 0x25);
        assert_eq!(&v[1..38], MAP.as_bytes());
        v[38..].to_vec()
    }

    #[test]
    fn shuffle_headers_are_shuffle_md_s_vectors() {
        assert_eq!(header(5, 10, 0), [0x05, 0x0a, 0x00]);
        assert_eq!(header(200, 300, 0), [0x8f, 0xc8, 0x8e, 0x01, 0x2c, 0x00]);
        assert_eq!(header(128, 127, 200), [0x8f, 0x80, 0x7f, 0x8f, 0xc8]);
        assert_eq!(
            header(70000, 1 << 33, 3),
            [0x8d, 0x01, 0x11, 0x70, 0x8b, 0x02, 0, 0, 0, 0, 0x03]
        );
    }

    #[test]
    fn attempt_ids_are_checked_before_any_path_is_built() {
        assert!(is_map_attempt_id(MAP));
        for bad in [
            "",
            "attempt_1700000000000_0001_r_000000_0",
            "attempt_1700000000000_0001_m_000000_0/../../x",
            "../attempt_1700000000000_0001_m_000000_0",
            "attempt_1700000000000_0001_m_000000",
            "attempt_1_2_m_3_4_5",
            "attempt_a_2_m_3_4",
        ] {
            assert!(!is_map_attempt_id(bad), "{bad}");
        }
    }

    #[test]
    fn the_index_fixture_reads_and_a_bad_crc_is_java_s_error() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("file.out.index");
        let mut b = Vec::new();
        for v in [0i64, 8, 12, 12, 2, 6] {
            b.extend_from_slice(&v.to_be_bytes());
        }
        b.extend_from_slice(&0x1b56_0ee2u64.to_be_bytes());
        std::fs::write(&p, &b).unwrap();
        let r = read_index(File::open(&p).unwrap(), &p, b.len() as u64).unwrap();
        assert_eq!(
            r[1],
            IndexRecord {
                start_offset: 12,
                raw_length: 2,
                part_length: 6
            }
        );
        b[50] ^= 1;
        std::fs::write(&p, &b).unwrap();
        let e = read_index(File::open(&p).unwrap(), &p, b.len() as u64).unwrap_err();
        assert!(
            e.0.starts_with("Error Reading IndexFileChecksum error reading spill index: "),
            "{e}"
        );
    }

    #[test]
    fn the_index_cache_stays_within_its_bound_and_forgets_a_stopped_job() {
        let dir = tempfile::tempdir().unwrap();
        let dirs = vec![dir.path().to_path_buf()];
        let mut b = Vec::new();
        for v in [0i64, 8, 12, 12, 2, 6] {
            b.extend_from_slice(&v.to_be_bytes());
        }
        b.extend_from_slice(&u64::from(crc32fast::hash(&b)).to_be_bytes());
        let maps: Vec<String> = (0..5)
            .map(|i| format!("attempt_1_0001_m_00000{i}_0"))
            .collect();
        for m in &maps {
            let d = dir
                .path()
                .join(relative_path("u", "application_1_0001", m, ""));
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("file.out.index"), &b).unwrap();
            std::fs::write(d.join("file.out"), [0u8; 18]).unwrap();
        }
        // room for two entries (48 bytes of records + the key's bytes each)
        let w = 48 + "job_1_0001".len() + maps[0].len();
        let cache = IndexCache::new(2 * w + 10, 4);
        for m in &maps {
            let r = cache
                .get(&dirs, "job_1_0001", "u", "application_1_0001", m)
                .unwrap();
            assert_eq!(r.len(), 2);
            assert!(cache.bytes() <= 2 * w + 10);
        }
        assert_eq!(cache.bytes(), 2 * w);
        // a file deleted after it was cached is still answered from the cache
        let last = dir.path().join(relative_path(
            "u",
            "application_1_0001",
            &maps[4],
            "file.out.index",
        ));
        std::fs::remove_file(&last).unwrap();
        assert!(cache
            .get(&dirs, "job_1_0001", "u", "application_1_0001", &maps[4])
            .is_ok());
        // data files: at most 4 open, the oldest closed first, each open once
        for m in &maps {
            let f = cache
                .data_file(&dirs, "job_1_0001", "u", "application_1_0001", m)
                .unwrap();
            assert_eq!(f.size, 18);
            assert!(cache.open_files() <= 4);
        }
        let again = cache
            .data_file(&dirs, "job_1_0001", "u", "application_1_0001", &maps[4])
            .unwrap();
        let once = cache
            .data_file(&dirs, "job_1_0001", "u", "application_1_0001", &maps[4])
            .unwrap();
        assert!(Arc::ptr_eq(&again, &once));
        cache.remove_job("job_1_0001");
        assert_eq!(cache.bytes(), 0);
        assert_eq!(cache.open_files(), 0);
        let e = cache
            .get(&dirs, "job_1_0001", "u", "application_1_0001", &maps[4])
            .unwrap_err();
        assert!(
            e.0.starts_with("Could not find usercache/u/appcache/application_1_0001/output/"),
            "{e}"
        );
    }
}
