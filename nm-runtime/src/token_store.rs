//! The started-container-token store of NM recovery: what Java's NMStateStore keeps under its
//! `ContainerTokens/` keys (`NMContainerTokenSecretManager.startContainerSuccessful` stores
//! the container and its token's expiry; expired ones are removed). A restarted agent loads
//! it, so a replayed start of a container that already ran is refused as a relaunch ("Attempt
//! to relaunch the same container") until its token expires, as Java's NodeManager does.
//!
//! One text file, `<first local dir>/nmPrivate/container-tokens`, a line `<container>
//! <expiry ms>` per accepted start, appended before the start is answered. It is rewritten
//! without the expired lines when opened and whenever it has grown to twice its live lines
//! (plus [`COMPACT_SLACK`]), so it does not grow forever. A line that cannot be read is
//! skipped; the file is capped at [`MAX_BYTES`] when read.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use nm_core::ids::ContainerId;

/// The store's file name (under the first local dir's `nmPrivate`).
pub const FILE: &str = "container-tokens";
/// Lines appended beyond twice the live ones before a rewrite.
pub const COMPACT_SLACK: usize = 4096;
/// Largest store read (bytes); beyond it the rest is ignored.
pub const MAX_BYTES: u64 = 64 << 20;

/// The open store.
#[derive(Debug)]
pub struct TokenStore {
    path: PathBuf,
    file: File,
    lines: usize,
    live_at_compaction: usize,
}

/// Reads the entries of `path` that have not expired at `now_ms`.
fn load(path: &Path, now_ms: i64) -> Vec<(ContainerId, i64)> {
    use std::io::Read;
    let mut text = String::new();
    if let Ok(f) = File::open(path) {
        let _ = f.take(MAX_BYTES).read_to_string(&mut text);
    }
    text.lines()
        .filter_map(|l| {
            let (c, e) = l.split_once(' ')?;
            Some((c.parse().ok()?, e.trim().parse().ok()?))
        })
        .filter(|&(_, e): &(ContainerId, i64)| e >= now_ms)
        .collect()
}

/// Writes `entries` as the whole store (a temporary file renamed over it).
fn rewrite(path: &Path, entries: &[(ContainerId, i64)]) -> std::io::Result<()> {
    let tmp = path.with_extension("tmp");
    let mut out = String::with_capacity(entries.len() * 56);
    for (c, e) in entries {
        out.push_str(&format!("{c} {e}\n"));
    }
    std::fs::write(&tmp, out)?;
    std::fs::rename(&tmp, path)
}

impl TokenStore {
    /// Opens the store under `local_dir`, returning it and the unexpired starts it holds (the
    /// file is rewritten with only those).
    pub fn open(
        local_dir: &Path,
        now_ms: i64,
    ) -> std::io::Result<(TokenStore, Vec<(ContainerId, i64)>)> {
        let dir = local_dir.join("nmPrivate");
        std::fs::create_dir_all(&dir)?;
        let path = dir.join(FILE);
        let entries = load(&path, now_ms);
        rewrite(&path, &entries)?;
        let file = OpenOptions::new().append(true).open(&path)?;
        Ok((
            TokenStore {
                path,
                file,
                lines: entries.len(),
                live_at_compaction: entries.len(),
            },
            entries,
        ))
    }

    /// Records an accepted start (before it is answered).
    pub fn started(
        &mut self,
        id: &ContainerId,
        expiry_ms: i64,
        now_ms: i64,
    ) -> std::io::Result<()> {
        self.file
            .write_all(format!("{id} {expiry_ms}\n").as_bytes())?;
        self.lines += 1;
        if self.lines >= 2 * self.live_at_compaction + COMPACT_SLACK {
            let entries = load(&self.path, now_ms);
            rewrite(&self.path, &entries)?;
            self.file = OpenOptions::new().append(true).open(&self.path)?;
            self.lines = entries.len();
            self.live_at_compaction = entries.len();
        }
        Ok(())
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_survive_a_reopen_and_expired_ones_go() {
        let dir = std::env::temp_dir().join(format!("hp-tokens-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let a: ContainerId = "container_1700000000000_0001_01_000001".parse().unwrap();
        let b: ContainerId = "container_1700000000000_0001_01_000002".parse().unwrap();
        let (mut s, none) = TokenStore::open(&dir, 1000).unwrap();
        assert!(none.is_empty());
        s.started(&a, 5000, 1000).unwrap();
        s.started(&b, 1500, 1000).unwrap();
        drop(s);
        let (_s, got) = TokenStore::open(&dir, 2000).unwrap();
        assert_eq!(got, vec![(a, 5000)]);
        let text = std::fs::read_to_string(dir.join("nmPrivate").join(FILE)).unwrap();
        assert_eq!(text, format!("{a} 5000\n"));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_file_is_compacted_as_it_grows() {
        let dir = std::env::temp_dir().join(format!("hp-tokens-c-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let (mut s, _) = TokenStore::open(&dir, 0).unwrap();
        for i in 0..(3 * COMPACT_SLACK) as i64 {
            let c: ContainerId = format!("container_1700000000000_0001_01_{:06}", i + 1)
                .parse()
                .unwrap();
            // Each start expires 10 ms after it is made: at most a few are live at a time.
            s.started(&c, i * 10 + 10, i * 10).unwrap();
        }
        let lines = std::fs::read_to_string(s.path()).unwrap().lines().count();
        assert!(lines <= COMPACT_SLACK + 2, "{lines} lines");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
