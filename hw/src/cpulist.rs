//! The kernel's CPU list format (`0-3,8,10-11`), as found in sysfs `*_list` files and
//! `taskset -c`: parsing and printing.

/// Parses a kernel CPU list (`0-3,8,10-11`, possibly empty, possibly with a trailing
/// newline) into sorted, deduplicated CPU numbers.
///
/// Returns `None` on anything else (a reversed range, a non-number, a range wider than
/// [`MAX_CPU`]), so that a corrupt file cannot make us allocate without bound.
pub fn parse(text: &str) -> Option<Vec<u32>> {
    let text = text.trim();
    let mut out = Vec::new();
    if text.is_empty() {
        return Some(out);
    }
    for part in text.split(',') {
        let part = part.trim();
        let (lo, hi) = match part.split_once('-') {
            Some((a, b)) => (a.trim().parse::<u32>().ok()?, b.trim().parse::<u32>().ok()?),
            None => {
                let v = part.parse::<u32>().ok()?;
                (v, v)
            }
        };
        if lo > hi || hi > MAX_CPU {
            return None;
        }
        out.extend(lo..=hi);
    }
    out.sort_unstable();
    out.dedup();
    Some(out)
}

/// The largest CPU number we accept from a list (Linux's `NR_CPUS` tops out at 8192).
pub const MAX_CPU: u32 = 8191;

/// Prints CPU numbers in the kernel's list format, collapsing runs: `[0,1,2,3,8]` → `0-3,8`.
pub fn format(cpus: &[u32]) -> String {
    let mut sorted = cpus.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut out = String::new();
    let mut i = 0;
    while i < sorted.len() {
        let start = sorted[i];
        let mut end = start;
        while i + 1 < sorted.len() && sorted[i + 1] == end + 1 {
            i += 1;
            end = sorted[i];
        }
        if !out.is_empty() {
            out.push(',');
        }
        if start == end {
            out.push_str(&start.to_string());
        } else {
            out.push_str(&format!("{start}-{end}"));
        }
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_ranges_and_singles() {
        assert_eq!(parse("0-3,8,10-11\n"), Some(vec![0, 1, 2, 3, 8, 10, 11]));
        assert_eq!(parse("5"), Some(vec![5]));
        assert_eq!(parse(""), Some(vec![]));
        assert_eq!(parse("3,1,1-2"), Some(vec![1, 2, 3]));
    }

    #[test]
    fn rejects_garbage() {
        assert_eq!(parse("3-1"), None);
        assert_eq!(parse("a"), None);
        assert_eq!(parse("1,,2"), None);
        assert_eq!(parse("0-4294967295"), None);
        assert_eq!(parse("-1"), None);
    }

    #[test]
    fn format_round_trips() {
        for s in ["0-3,8,10-11", "0", "0,2,4", "1-2"] {
            assert_eq!(format(&parse(s).unwrap()), s);
        }
        assert_eq!(format(&[]), "");
    }
}
