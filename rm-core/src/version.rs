//! NodeManager version checks (`yarn.resourcemanager.nodemanager.minimum.version`).
//!
//! Hadoop compares with Maven's `ComparableVersion`. We implement the part that matters for
//! Hadoop version strings: components split on `.` and `-`; numbers compare numerically; a
//! missing number counts as 0 (`3.4` = `3.4.0`); a qualifier (`SNAPSHOT`, `alpha`) sorts
//! below the release it qualifies (`3.4.0-SNAPSHOT` < `3.4.0`); qualifiers compare
//! case-insensitively as text.

use std::cmp::Ordering;

#[derive(Debug, PartialEq, Eq)]
enum Part<'a> {
    Num(u64),
    Text(&'a str),
}

fn parts(v: &str) -> Vec<Part<'_>> {
    v.trim()
        .split(['.', '-'])
        .filter(|s| !s.is_empty())
        .map(|s| match s.parse::<u64>() {
            Ok(n) => Part::Num(n),
            Err(_) => Part::Text(s),
        })
        .collect()
}

/// Compares two version strings.
pub fn compare_versions(a: &str, b: &str) -> Ordering {
    let (pa, pb) = (parts(a), parts(b));
    let n = pa.len().max(pb.len());
    for i in 0..n {
        let o = match (pa.get(i), pb.get(i)) {
            (Some(Part::Num(x)), Some(Part::Num(y))) => x.cmp(y),
            (Some(Part::Num(x)), None) => x.cmp(&0),
            (None, Some(Part::Num(y))) => 0.cmp(y),
            // A number (or the end) ranks above a qualifier.
            (Some(Part::Num(_)), Some(Part::Text(_))) | (None, Some(Part::Text(_))) => {
                Ordering::Greater
            }
            (Some(Part::Text(_)), Some(Part::Num(_))) | (Some(Part::Text(_)), None) => {
                Ordering::Less
            }
            (Some(Part::Text(x)), Some(Part::Text(y))) => {
                x.to_ascii_lowercase().cmp(&y.to_ascii_lowercase())
            }
            (None, None) => Ordering::Equal,
        };
        if o != Ordering::Equal {
            return o;
        }
    }
    Ordering::Equal
}

/// The register-time check: `None` if allowed, else the reason. `minimum` is `NONE`,
/// `EqualToRM` or a version; `nm` is what the NodeManager sent (absent fails any check).
pub fn check_nm_version(minimum: &str, rm_version: &str, nm: Option<&str>) -> Option<String> {
    if minimum.eq_ignore_ascii_case("NONE") {
        return None;
    }
    let min = if minimum == "EqualToRM" {
        rm_version
    } else {
        minimum
    };
    match nm {
        Some(v) if compare_versions(v, min) != Ordering::Less => None,
        other => Some(format!(
            "Disallowed NodeManager Version {}, is less than the minimum version {}",
            other.unwrap_or("null"),
            min
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Ordering::*;

    #[test]
    fn ordering() {
        assert_eq!(compare_versions("3.4.1", "3.4.0"), Greater);
        assert_eq!(compare_versions("3.4", "3.4.0"), Equal);
        assert_eq!(compare_versions("3.10.0", "3.9.9"), Greater);
        assert_eq!(compare_versions("3.4.0-SNAPSHOT", "3.4.0"), Less);
        assert_eq!(compare_versions("3.4.0", "3.4.0-SNAPSHOT"), Greater);
        assert_eq!(compare_versions("2.7.0", "3.0.0-alpha1"), Less);
    }

    #[test]
    fn nm_check() {
        assert_eq!(check_nm_version("NONE", "3.4.1", None), None);
        assert_eq!(check_nm_version("3.0.0", "3.4.1", Some("3.4.1")), None);
        assert!(check_nm_version("3.0.0", "3.4.1", Some("2.10.2")).is_some());
        assert!(check_nm_version("3.0.0", "3.4.1", None).is_some());
        assert_eq!(check_nm_version("EqualToRM", "3.4.1", Some("3.4.1")), None);
        assert!(check_nm_version("EqualToRM", "3.4.1", Some("3.4.0")).is_some());
    }
}
