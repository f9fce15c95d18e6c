//! Include/exclude host lists (`yarn.resourcemanager.nodes.include-path` / `exclude-path`).
//!
//! The files use Hadoop's `HostsFileReader` text format: host names separated by white space
//! or new lines, `#` starts a comment to the end of the line. An empty (or unset) include
//! list admits every host; the exclude list wins over the include list. Hosts are compared
//! as the NodeManager sent them (no DNS: trap 9). Java's XML exclude format (with
//! decommissioning timeouts) is not read.
//!
//! Hosts being decommissioned gracefully (`yarn rmadmin -refreshNodes -g`) stay valid while
//! they drain ([`HostLists::with_grace`]): Java's heartbeat check lets a DECOMMISSIONING node
//! through although the exclude list names it.

use std::collections::HashSet;
use std::io::Read;
use std::path::{Path, PathBuf};

use crate::Error;

/// Largest host file we read.
pub const MAX_HOST_FILE_BYTES: u64 = 16 << 20;

/// The include and exclude lists in force.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostLists {
    include: HashSet<String>,
    exclude: HashSet<String>,
    /// Excluded hosts still allowed while they decommission gracefully.
    grace: HashSet<String>,
}

impl HostLists {
    /// Lists from explicit host names (tests, admin).
    pub fn new<I, E>(include: I, exclude: E) -> HostLists
    where
        I: IntoIterator,
        I::Item: Into<String>,
        E: IntoIterator,
        E::Item: Into<String>,
    {
        HostLists {
            include: include.into_iter().map(Into::into).collect(),
            exclude: exclude.into_iter().map(Into::into).collect(),
            grace: HashSet::new(),
        }
    }

    /// These lists, with `grace`'s hosts allowed although excluded (DECOMMISSIONING nodes).
    pub fn with_grace<G>(mut self, grace: G) -> HostLists
    where
        G: IntoIterator,
        G::Item: Into<String>,
    {
        self.grace = grace.into_iter().map(Into::into).collect();
        self
    }

    /// Whether the lists (include and exclude, grace aside) admit `host`.
    pub fn is_listed_valid(&self, host: &str) -> bool {
        (self.include.is_empty() || self.include.contains(host)) && !self.exclude.contains(host)
    }

    /// Reads both files; `None` is an empty list. A named file that cannot be read is an
    /// error (Java fails the refresh too), so a typo cannot silently admit every host.
    pub fn load(include: Option<&Path>, exclude: Option<&Path>) -> Result<HostLists, Error> {
        Ok(HostLists {
            include: match include {
                Some(p) => read_hosts(p)?,
                None => HashSet::new(),
            },
            exclude: match exclude {
                Some(p) => read_hosts(p)?,
                None => HashSet::new(),
            },
            grace: HashSet::new(),
        })
    }

    /// Whether `host` may register and heartbeat.
    pub fn is_valid(&self, host: &str) -> bool {
        self.is_listed_valid(host) || self.grace.contains(host)
    }

    pub fn include_len(&self) -> usize {
        self.include.len()
    }

    pub fn exclude_len(&self) -> usize {
        self.exclude.len()
    }
}

/// Parses the text format.
pub fn parse_hosts(text: &str) -> HashSet<String> {
    text.lines()
        .map(|l| l.split('#').next().unwrap_or(""))
        .flat_map(str::split_whitespace)
        .map(str::to_string)
        .collect()
}

fn read_hosts(path: &Path) -> Result<HashSet<String>, Error> {
    let io = |source| Error::HostList {
        path: PathBuf::from(path),
        source,
    };
    let f = std::fs::File::open(path).map_err(io)?;
    let mut text = String::new();
    f.take(MAX_HOST_FILE_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(io)?;
    if text.len() as u64 > MAX_HOST_FILE_BYTES {
        return Err(Error::HostListTooLarge {
            path: path.into(),
            max: MAX_HOST_FILE_BYTES,
        });
    }
    Ok(parse_hosts(&text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_and_rules() {
        let hosts = parse_hosts("a b\n# comment\nc # trailing\n\n  d\t e ");
        let want: HashSet<String> = ["a", "b", "c", "d", "e"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(hosts, want);

        let all = HostLists::default();
        assert!(all.is_valid("anything"));
        let l = HostLists::new(["a", "b"], ["b"]);
        assert!(l.is_valid("a"));
        assert!(!l.is_valid("b"), "exclude wins");
        assert!(!l.is_valid("c"), "not included");
        let ex = HostLists::new(Vec::<String>::new(), ["x"]);
        assert!(ex.is_valid("a") && !ex.is_valid("x"));
    }

    #[test]
    fn files() {
        let dir = tempfile::tempdir().unwrap();
        let inc = dir.path().join("inc");
        std::fs::write(&inc, "127.0.0.1\n127.0.0.2\n").unwrap();
        let l = HostLists::load(Some(&inc), None).unwrap();
        assert!(l.is_valid("127.0.0.2") && !l.is_valid("127.0.0.3"));
        let missing = dir.path().join("nope");
        assert!(matches!(
            HostLists::load(None, Some(&missing)),
            Err(Error::HostList { .. })
        ));
    }
}
