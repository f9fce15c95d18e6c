//! Hadoop's value syntaxes, as its typed getters read them: integers, sizes with binary
//! prefixes (`getLongBytes`), durations with unit suffixes (`getTimeDuration`), booleans,
//! `host:port` addresses (`NetUtils.createSocketAddr`), and comma lists (`getTrimmedStrings`).
//! Each parser is pure and returns `None` on anything it does not accept; the caller turns
//! that into [`Error::Invalid`](crate::Error::Invalid) with the key.

use std::fmt;
use std::time::Duration;

/// A plain integer: decimal, or hex with `0x`/`0X` (Hadoop's `getLong`), surrounding
/// whitespace ignored. Negative values are refused: every key we read as a count is ≥ 0.
pub fn parse_u64(s: &str) -> Option<u64> {
    let s = s.trim();
    if let Some(hex) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        return u64::from_str_radix(hex, 16).ok();
    }
    let s = s.strip_prefix('+').unwrap_or(s);
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// A size with an optional binary prefix, case-insensitive: `k` (×2¹⁰), `m`, `g`, `t`, `p`,
/// `e` (×2⁶⁰), as Hadoop's `getLongBytes` (e.g. `dfs.blocksize` = `128m`). Overflow → `None`.
pub fn parse_bytes(s: &str) -> Option<u64> {
    let s = s.trim();
    let last = s.chars().last()?;
    let shift = match last.to_ascii_lowercase() {
        'k' => 10,
        'm' => 20,
        'g' => 30,
        't' => 40,
        'p' => 50,
        'e' => 60,
        _ => return parse_u64(s),
    };
    let n = parse_u64(&s[..s.len() - 1])?;
    n.checked_mul(1u64 << shift)
}

/// The unit a duration key is expressed in when its value has no suffix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeUnit {
    Nanos,
    Micros,
    Millis,
    Seconds,
    Minutes,
    Hours,
    Days,
}

impl TimeUnit {
    fn duration(self, n: u64) -> Option<Duration> {
        let secs = |mult: u64| n.checked_mul(mult).map(Duration::from_secs);
        match self {
            TimeUnit::Nanos => Some(Duration::from_nanos(n)),
            TimeUnit::Micros => Some(Duration::from_micros(n)),
            TimeUnit::Millis => Some(Duration::from_millis(n)),
            TimeUnit::Seconds => secs(1),
            TimeUnit::Minutes => secs(60),
            TimeUnit::Hours => secs(3600),
            TimeUnit::Days => secs(86400),
        }
    }
}

/// A duration as Hadoop's `getTimeDuration`: an integer with an optional unit suffix `ns`,
/// `us`, `ms`, `s`, `m`, `h`, `d` (case-insensitive); without a suffix, `default_unit`.
pub fn parse_duration(s: &str, default_unit: TimeUnit) -> Option<Duration> {
    let t = s.trim().to_ascii_lowercase();
    const SUFFIXES: [(&str, TimeUnit); 7] = [
        ("ns", TimeUnit::Nanos),
        ("us", TimeUnit::Micros),
        ("ms", TimeUnit::Millis),
        ("s", TimeUnit::Seconds),
        ("m", TimeUnit::Minutes),
        ("h", TimeUnit::Hours),
        ("d", TimeUnit::Days),
    ];
    for (suffix, unit) in SUFFIXES {
        if let Some(num) = t.strip_suffix(suffix) {
            return unit.duration(parse_u64(num)?);
        }
    }
    default_unit.duration(parse_u64(&t)?)
}

/// `true` or `false`, case-insensitive, surrounding whitespace ignored. (Hadoop's
/// `getBoolean` silently falls back to the default on anything else; we report it.)
pub fn parse_bool(s: &str) -> Option<bool> {
    let t = s.trim();
    if t.eq_ignore_ascii_case("true") {
        Some(true)
    } else if t.eq_ignore_ascii_case("false") {
        Some(false)
    } else {
        None
    }
}

/// A host and port, not resolved (resolution is the caller's I/O).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct HostPort {
    /// Host name or IP literal, without brackets for IPv6.
    pub host: String,
    pub port: u16,
}

impl fmt::Display for HostPort {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

impl HostPort {
    /// Resolves through the system resolver (`std::net::ToSocketAddrs`).
    pub fn to_socket_addrs(&self) -> std::io::Result<std::vec::IntoIter<std::net::SocketAddr>> {
        std::net::ToSocketAddrs::to_socket_addrs(&(self.host.as_str(), self.port))
    }
}

/// An address as Hadoop's `NetUtils.createSocketAddr` accepts it: `host:port`, `host` (then
/// `default_port`), `[v6]:port`, or a URI `scheme://host[:port][/path]` (e.g. `fs.defaultFS`
/// = `hdfs://nn1:8020`).
pub fn parse_host_port(s: &str, default_port: u16) -> Option<HostPort> {
    let mut t = s.trim();
    if let Some(i) = t.find("://") {
        t = &t[i + 3..];
        // authority ends at the path, query or fragment
        let end = t.find(['/', '?', '#']).unwrap_or(t.len());
        t = &t[..end];
        // drop user info
        if let Some(at) = t.rfind('@') {
            t = &t[at + 1..];
        }
    }
    if t.is_empty() {
        return None;
    }
    let (host, port) = if let Some(rest) = t.strip_prefix('[') {
        let close = rest.find(']')?;
        let host = &rest[..close];
        let after = &rest[close + 1..];
        let port = match after.strip_prefix(':') {
            Some(p) => p,
            None if after.is_empty() => "",
            None => return None,
        };
        (host, port)
    } else {
        match t.rsplit_once(':') {
            Some((h, p)) => (h, p),
            None => (t, ""),
        }
    };
    if host.is_empty()
        || host
            .chars()
            .any(|c| c.is_whitespace() || c == '/' || c == '[' || c == ']')
    {
        return None;
    }
    let port = if port.is_empty() {
        default_port
    } else {
        if !port.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        port.parse().ok()?
    };
    Some(HostPort {
        host: host.to_string(),
        port,
    })
}

/// Splits a list on commas and newlines and trims each element, as Hadoop's
/// `getTrimmedStrings`; empty elements are dropped (Hadoop keeps inner empty ones).
pub fn trimmed_strings(s: &str) -> Vec<String> {
    s.split([',', '\n'])
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .map(String::from)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers() {
        assert_eq!(parse_u64(" 134217728 "), Some(134217728));
        assert_eq!(parse_u64("0x10"), Some(16));
        assert_eq!(parse_u64("+5"), Some(5));
        assert_eq!(parse_u64("-1"), None);
        assert_eq!(parse_u64("12k"), None);
        assert_eq!(parse_u64(""), None);
        assert_eq!(parse_u64("18446744073709551616"), None);
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_bytes("128m"), Some(128 << 20));
        assert_eq!(parse_bytes("128M"), Some(128 << 20));
        assert_eq!(parse_bytes("1g"), Some(1 << 30));
        assert_eq!(parse_bytes("2T"), Some(2 << 40));
        assert_eq!(parse_bytes("1p"), Some(1 << 50));
        assert_eq!(parse_bytes("512"), Some(512));
        assert_eq!(parse_bytes("16e"), None, "overflow");
        assert_eq!(parse_bytes("m"), None);
        assert_eq!(parse_bytes("1.5g"), None);
        assert_eq!(parse_bytes("1x"), None);
    }

    #[test]
    fn durations() {
        let ms = |s| parse_duration(s, TimeUnit::Millis);
        assert_eq!(ms("1000"), Some(Duration::from_millis(1000)));
        assert_eq!(ms("10s"), Some(Duration::from_secs(10)));
        assert_eq!(ms("10ms"), Some(Duration::from_millis(10)));
        assert_eq!(ms("5m"), Some(Duration::from_secs(300)));
        assert_eq!(ms("2h"), Some(Duration::from_secs(7200)));
        assert_eq!(ms("1d"), Some(Duration::from_secs(86400)));
        assert_eq!(ms("7us"), Some(Duration::from_micros(7)));
        assert_eq!(ms("7ns"), Some(Duration::from_nanos(7)));
        assert_eq!(ms(" 3S "), Some(Duration::from_secs(3)));
        assert_eq!(
            parse_duration("86400", TimeUnit::Seconds),
            Some(Duration::from_secs(86400))
        );
        assert_eq!(ms("s"), None);
        assert_eq!(ms("10 minutes"), None);
        assert_eq!(ms("-5"), None);
        assert_eq!(ms("18446744073709551615d"), None, "overflow");
    }

    #[test]
    fn booleans() {
        assert_eq!(parse_bool(" TRUE\n"), Some(true));
        assert_eq!(parse_bool("false"), Some(false));
        assert_eq!(parse_bool("yes"), None);
    }

    #[test]
    fn addresses() {
        let hp = |h: &str, p| {
            Some(HostPort {
                host: h.into(),
                port: p,
            })
        };
        assert_eq!(parse_host_port("rm1:8031", 1), hp("rm1", 8031));
        assert_eq!(parse_host_port("rm1", 8031), hp("rm1", 8031));
        assert_eq!(parse_host_port("0.0.0.0:0", 1), hp("0.0.0.0", 0));
        assert_eq!(parse_host_port("hdfs://nn1:9000/", 8020), hp("nn1", 9000));
        assert_eq!(parse_host_port("hdfs://nn1", 8020), hp("nn1", 8020));
        assert_eq!(parse_host_port("hdfs://user@nn1:1/x?y", 8020), hp("nn1", 1));
        assert_eq!(parse_host_port("[::1]:8031", 1), hp("::1", 8031));
        assert_eq!(parse_host_port("[::1]", 7), hp("::1", 7));
        assert_eq!(parse_host_port("rm1:99999", 1), None);
        assert_eq!(parse_host_port("rm1:x", 1), None);
        assert_eq!(parse_host_port(":8031", 1), None);
        assert_eq!(parse_host_port("", 1), None);
        assert_eq!(parse_host_port("file:///", 1), None);
        assert_eq!(parse_host_port("[::1", 1), None);
        assert_eq!(hp("::1", 5).unwrap().to_string(), "[::1]:5");
        assert_eq!(hp("rm", 5).unwrap().to_string(), "rm:5");
    }

    #[test]
    fn lists() {
        assert_eq!(
            trimmed_strings(" /a , /b,\n /c ,, "),
            vec!["/a", "/b", "/c"]
        );
        assert!(trimmed_strings("  ").is_empty());
    }
}
