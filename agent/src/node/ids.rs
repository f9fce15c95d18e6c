//! Application and container ids: the small `Copy` keys of the container table, with Java's
//! string forms (`application_1410901177871_0001`,
//! `container_1410901177871_0001_01_000005`, `container_e17_…` when the epoch is non-zero).

use std::fmt;
use std::str::FromStr;

/// `ApplicationIdProto`: cluster timestamp and sequence number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AppId {
    pub cluster_timestamp: i64,
    pub id: i32,
}

/// `ContainerIdProto`: application, attempt and container number. `id` carries the RM epoch
/// in its bits above 40, as Java's `ContainerId.getContainerId()` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ContainerId {
    pub app: AppId,
    pub attempt: i32,
    pub id: i64,
}

/// A string that is not an application or container id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a {what} id: {text:?}")]
pub struct IdParseError {
    pub what: &'static str,
    pub text: String,
}

impl AppId {
    pub const fn new(cluster_timestamp: i64, id: i32) -> Self {
        Self {
            cluster_timestamp,
            id,
        }
    }
}

impl ContainerId {
    pub const fn new(app: AppId, attempt: i32, id: i64) -> Self {
        Self { app, attempt, id }
    }

    /// The RM epoch (bits 40 and up of `id`).
    pub fn epoch(&self) -> i64 {
        self.id >> 40
    }
}

impl fmt::Display for AppId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "application_{}_{:04}", self.cluster_timestamp, self.id)
    }
}

impl fmt::Display for ContainerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("container_")?;
        let epoch = self.epoch();
        if epoch > 0 {
            write!(f, "e{epoch:02}_")?;
        }
        write!(
            f,
            "{}_{:04}_{:02}_{:06}",
            self.app.cluster_timestamp,
            self.app.id,
            self.attempt,
            self.id & ((1i64 << 40) - 1)
        )
    }
}

fn bad(what: &'static str, s: &str) -> IdParseError {
    IdParseError {
        what,
        text: s.chars().take(80).collect(),
    }
}

fn num<T: FromStr>(what: &'static str, s: &str, part: &str) -> Result<T, IdParseError> {
    if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad(what, s));
    }
    part.parse().map_err(|_| bad(what, s))
}

impl FromStr for AppId {
    type Err = IdParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let rest = s
            .strip_prefix("application_")
            .ok_or_else(|| bad("application", s))?;
        let mut it = rest.split('_');
        let (Some(ts), Some(id), None) = (it.next(), it.next(), it.next()) else {
            return Err(bad("application", s));
        };
        Ok(AppId::new(
            num("application", s, ts)?,
            num("application", s, id)?,
        ))
    }
}

impl FromStr for ContainerId {
    type Err = IdParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        const W: &str = "container";
        let rest = s.strip_prefix("container_").ok_or_else(|| bad(W, s))?;
        let parts: Vec<&str> = rest.split('_').collect();
        let (epoch, p) = match parts.as_slice() {
            [e, p @ ..] if e.starts_with('e') && p.len() == 4 => (num::<i64>(W, s, &e[1..])?, p),
            p if p.len() == 4 => (0, p),
            _ => return Err(bad(W, s)),
        };
        let seq: i64 = num(W, s, p[3])?;
        if seq >= 1 << 40 || epoch >= 1 << 23 {
            return Err(bad(W, s));
        }
        Ok(ContainerId::new(
            AppId::new(num(W, s, p[0])?, num(W, s, p[1])?),
            num(W, s, p[2])?,
            (epoch << 40) | seq,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_string_forms_round_trip() {
        let c: ContainerId = "container_1410901177871_0001_01_000005".parse().unwrap();
        assert_eq!(c.app, AppId::new(1410901177871, 1));
        assert_eq!((c.attempt, c.id), (1, 5));
        assert_eq!(c.to_string(), "container_1410901177871_0001_01_000005");
        let e: ContainerId = "container_e17_1410901177871_0001_01_000005"
            .parse()
            .unwrap();
        assert_eq!(e.epoch(), 17);
        assert_eq!(e.to_string(), "container_e17_1410901177871_0001_01_000005");
        let a: AppId = "application_1410901177871_12345".parse().unwrap();
        assert_eq!(a.to_string(), "application_1410901177871_12345");
        for bad in [
            "",
            "container_",
            "container_1_2_3",
            "container_1_2_3_x",
            "container_1_2_3_4_5",
            "container_-1_2_3_4",
            "application_1",
            "application_1_2_3",
            "container_1_2_3_99999999999999999999",
        ] {
            assert!(bad.parse::<ContainerId>().is_err(), "{bad}");
            assert!(bad.parse::<AppId>().is_err(), "{bad}");
        }
    }
}
