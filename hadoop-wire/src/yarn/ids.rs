//! Application, attempt and container ids: small `Copy` keys with Java's string forms
//! (`application_1410901177871_0001`, `appattempt_1410901177871_0001_000001`,
//! `container_1410901177871_0001_01_000005`, `container_e17_…` when the RM epoch is non-zero).
//!
//! One implementation for both ends: the RM reads them from heartbeats with
//! [`ContainerId::from_view`] and writes them into responses, the NM keys its container table
//! with them. Bytes are written with [`Encode`] (the one writer), in protobuf-java's field
//! order; the tests check them against prost.

use std::fmt;
use std::str::FromStr;

use crate::pb::hadoop::yarn::{ApplicationAttemptIdProto, ApplicationIdProto, ContainerIdProto};
use crate::reader::DecodeError;
use crate::view::yarn::{ApplicationIdView, ContainerIdView};
use crate::writer::{Encode, Sink};

/// `ContainerId.CONTAINER_ID_BITMASK`: the sequence number's bits; the epoch sits above.
pub const CONTAINER_ID_BITMASK: i64 = 0xff_ffff_ffff;

/// Bits below the epoch in a container id's 64-bit `id`.
const EPOCH_SHIFT: u32 = 40;

/// `ApplicationIdProto`: cluster timestamp and sequence number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AppId {
    pub cluster_timestamp: i64,
    pub id: i32,
}

/// `ContainerIdProto`: application, attempt and the 64-bit id (epoch in the bits above
/// [`CONTAINER_ID_BITMASK`], as Java's `ContainerId.getContainerId()` carries it), which is
/// what Java's `ContainerId.equals` compares.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
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

    /// Reads an `ApplicationIdProto`; `None` if the id is absent (the timestamp defaults to 0).
    #[inline]
    pub fn from_view(v: ApplicationIdView<'_>) -> Result<Option<AppId>, DecodeError> {
        let (id, ts) = v.parts()?;
        Ok(id.map(|id| AppId::new(ts.unwrap_or(0), id)))
    }

    /// The prost form.
    pub fn to_proto(&self) -> ApplicationIdProto {
        ApplicationIdProto {
            id: Some(self.id),
            cluster_timestamp: Some(self.cluster_timestamp),
        }
    }

    /// Parses Java's form `application_<timestamp>_<id>`; `None` if `s` is not one.
    pub fn parse(s: &str) -> Option<AppId> {
        s.parse().ok()
    }
}

/// Fields 1 and 2, as protobuf-java writes them.
impl Encode for AppId {
    #[inline]
    fn encode<S: Sink>(&self, s: &mut S) {
        s.int32(1, self.id);
        s.int64(2, self.cluster_timestamp);
    }
}

impl ContainerId {
    pub const fn new(app: AppId, attempt: i32, id: i64) -> Self {
        Self { app, attempt, id }
    }

    /// The RM epoch (the bits above [`CONTAINER_ID_BITMASK`]).
    pub fn epoch(&self) -> i64 {
        self.id >> EPOCH_SHIFT
    }

    /// Reads a `ContainerIdProto`. Java builds the id from `app_attempt_id` and `id`; we do the
    /// same and fall back to the deprecated `app_id` field when the attempt carries no
    /// application. `None` if the id, the attempt or the application id is absent (Java would
    /// fail with a NullPointerException on such a status).
    #[inline]
    pub fn from_view(v: ContainerIdView<'_>) -> Result<Option<ContainerId>, DecodeError> {
        let p = v.parts()?;
        let (Some(id), Some(attempt)) = (p.id, p.app_attempt_id) else {
            return Ok(None);
        };
        let (app_view, attempt_id) = attempt.parts()?;
        let app_view = match app_view.or(p.app_id) {
            Some(a) => a,
            None => return Ok(None),
        };
        let Some(app) = AppId::from_view(app_view)? else {
            return Ok(None);
        };
        Ok(Some(ContainerId::new(app, attempt_id.unwrap_or(0), id)))
    }

    /// The prost form, as Java's `ContainerIdPBImpl` sets it: attempt and id.
    pub fn to_proto(&self) -> ContainerIdProto {
        ContainerIdProto {
            app_id: None,
            app_attempt_id: Some(self.attempt_proto()),
            id: Some(self.id),
        }
    }

    /// The `ApplicationAttemptIdProto` of this container's attempt.
    pub fn attempt_proto(&self) -> ApplicationAttemptIdProto {
        ApplicationAttemptIdProto {
            application_id: Some(self.app.to_proto()),
            attempt_id: Some(self.attempt),
        }
    }

    /// Parses Java's form `container_[e<epoch>_]<timestamp>_<app>_<attempt>_<id>`; `None` if
    /// `s` is not one.
    pub fn parse(s: &str) -> Option<ContainerId> {
        s.parse().ok()
    }

    /// The application attempt (`ApplicationAttemptIdProto`), for [`Encode`].
    pub fn attempt_id(&self) -> AttemptId {
        AttemptId {
            app: self.app,
            attempt: self.attempt,
        }
    }
}

/// As Java's `ContainerIdPBImpl` writes it: `app_attempt_id` (2) and `id` (3); the deprecated
/// `app_id` (1) is not set.
impl Encode for ContainerId {
    #[inline]
    fn encode<S: Sink>(&self, s: &mut S) {
        s.message(2, &self.attempt_id());
        s.int64(3, self.id);
    }
}

/// `ApplicationAttemptIdProto`: an application and its attempt number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AttemptId {
    pub app: AppId,
    pub attempt: i32,
}

/// Fields 1 (`application_id`) and 2 (`attemptId`).
impl Encode for AttemptId {
    #[inline]
    fn encode<S: Sink>(&self, s: &mut S) {
        s.message(1, &self.app);
        s.int32(2, self.attempt);
    }
}

/// Java's `FastNumberFormat.format(sb, value, minimumDigits)`: a sign, then the magnitude
/// zero-padded to `min` digits (`-5` with 4 digits is `-0005`, where `{:04}` would give `-005`).
struct JavaDigits(i64, usize);

impl fmt::Display for JavaDigits {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let JavaDigits(v, min) = *self;
        if v < 0 {
            f.write_str("-")?;
        }
        write!(f, "{:0min$}", v.unsigned_abs())
    }
}

impl fmt::Display for AppId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "application_{}_{}",
            self.cluster_timestamp,
            JavaDigits(self.id.into(), 4)
        )
    }
}

/// Java's `ApplicationAttemptId.toString()`: `appattempt_<timestamp>_<app, 4 digits>_<attempt,
/// 6 digits>`, the user name of NMToken and AMRMToken connections.
impl fmt::Display for AttemptId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "appattempt_{}_{}_{}",
            self.app.cluster_timestamp,
            JavaDigits(self.app.id.into(), 4),
            JavaDigits(self.attempt.into(), 6)
        )
    }
}

impl fmt::Display for ContainerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("container_")?;
        let epoch = self.epoch();
        if epoch > 0 {
            write!(f, "e{}_", JavaDigits(epoch, 2))?;
        }
        write!(
            f,
            "{}_{}_{}_{}",
            self.app.cluster_timestamp,
            JavaDigits(self.app.id.into(), 4),
            JavaDigits(self.attempt.into(), 2),
            JavaDigits(self.id & CONTAINER_ID_BITMASK, 6)
        )
    }
}

fn bad(what: &'static str, s: &str) -> IdParseError {
    IdParseError {
        what,
        text: s.chars().take(80).collect(),
    }
}

/// Digits only: Java prints no sign, and a sign or a space in an id is a typo, not an id.
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
        let mut parts = [""; 5];
        let mut n = 0;
        for p in rest.split('_') {
            if n == parts.len() {
                return Err(bad(W, s));
            }
            parts[n] = p;
            n += 1;
        }
        let (epoch, p) = match &parts[..n] {
            [e, p @ ..] if e.starts_with('e') && p.len() == 4 => (num::<i64>(W, s, &e[1..])?, p),
            p if p.len() == 4 => (0, p),
            _ => return Err(bad(W, s)),
        };
        let seq: i64 = num(W, s, p[3])?;
        // The epoch must fit the 23 bits above the sequence number (the id stays positive).
        if seq > CONTAINER_ID_BITMASK || epoch >= 1 << (63 - EPOCH_SHIFT) {
            return Err(bad(W, s));
        }
        Ok(ContainerId::new(
            AppId::new(num(W, s, p[0])?, num(W, s, p[1])?),
            num(W, s, p[2])?,
            (epoch << EPOCH_SHIFT) | seq,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::writer;
    use prost::Message;

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

    #[test]
    fn container_id_encoding_matches_prost() {
        let k = ContainerId {
            app: AppId {
                cluster_timestamp: 1_700_000_000_123,
                id: 42,
            },
            attempt: 1,
            id: (3i64 << 40) | 17,
        };
        let mut ours = Vec::new();
        writer::write(&mut ours, &k);
        assert_eq!(ours, k.to_proto().encode_to_vec());
        assert_eq!(ours.len(), writer::Encode::encoded_len(&k));
        let back = ContainerId::from_view(ContainerIdView::new(&ours)).unwrap();
        assert_eq!(back, Some(k));
        let mut a = Vec::new();
        writer::write(&mut a, &k.app);
        assert_eq!(a, k.app.to_proto().encode_to_vec());
        let mut att = Vec::new();
        writer::write(&mut att, &k.attempt_id());
        assert_eq!(att, k.attempt_proto().encode_to_vec());
    }

    #[test]
    fn attempt_display_and_negative_numbers_as_java_prints_them() {
        let a = AttemptId {
            app: AppId::new(1_700_000_000_123, 7),
            attempt: 2,
        };
        assert_eq!(a.to_string(), "appattempt_1700000000123_0007_000002");
        let neg = AttemptId {
            app: AppId::new(5, -5),
            attempt: -12,
        };
        assert_eq!(neg.to_string(), "appattempt_5_-0005_-000012");
        assert_eq!(
            AppId::new(1, i32::MIN).to_string(),
            "application_1_-2147483648"
        );
        assert_eq!(
            ContainerId::new(AppId::new(1, 12345), 100, 1234567).to_string(),
            "container_1_12345_100_1234567"
        );
    }

    #[test]
    fn display_and_parse_round_trip() {
        let k = ContainerId {
            app: AppId {
                cluster_timestamp: 1_700_000_000_123,
                id: 7,
            },
            attempt: 2,
            id: 5,
        };
        assert_eq!(k.to_string(), "container_1700000000123_0007_02_000005");
        assert_eq!(ContainerId::parse(&k.to_string()), Some(k));
        let e = ContainerId {
            id: (1 << 40) | 5,
            ..k
        };
        assert_eq!(e.to_string(), "container_e01_1700000000123_0007_02_000005");
        assert_eq!(ContainerId::parse(&e.to_string()), Some(e));
        assert_eq!(k.app.to_string(), "application_1700000000123_0007");
        assert_eq!(AppId::parse("application_1700000000123_0007"), Some(k.app));
        assert_eq!(ContainerId::parse("container_x"), None);
        assert_eq!(AppId::parse("app_1_2"), None);
    }

    #[test]
    fn missing_parts_are_none_not_errors() {
        let no_attempt = ContainerIdProto {
            app_id: None,
            app_attempt_id: None,
            id: Some(1),
        }
        .encode_to_vec();
        assert_eq!(
            ContainerId::from_view(ContainerIdView::new(&no_attempt)).unwrap(),
            None
        );
        let app_in_field_1 = ContainerIdProto {
            app_id: Some(
                AppId {
                    cluster_timestamp: 9,
                    id: 3,
                }
                .to_proto(),
            ),
            app_attempt_id: Some(ApplicationAttemptIdProto {
                application_id: None,
                attempt_id: Some(1),
            }),
            id: Some(1),
        }
        .encode_to_vec();
        let k = ContainerId::from_view(ContainerIdView::new(&app_in_field_1))
            .unwrap()
            .unwrap();
        assert_eq!(
            k.app,
            AppId {
                cluster_timestamp: 9,
                id: 3
            }
        );
        // Garbage is a typed error.
        assert!(ContainerId::from_view(ContainerIdView::new(&[0x12, 0x05, 0x01])).is_err());
    }
}
