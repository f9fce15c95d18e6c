//! The RM's delegation-token identifier, `RMDelegationTokenIdentifier` (kind
//! `RM_DELEGATION_TOKEN`), checked against the Hadoop 3.5.0 jars.
//!
//! It extends `YARNDelegationTokenIdentifier`, whose `write` is
//! `YARNDelegationTokenIdentifierProto` (`hadoop.yarn`: 1 owner, 2 renewer, 3 realUser strings,
//! 4 issueDate, 5 maxDate int64, 6 sequenceNumber, 7 masterKeyId int32) and whose `readFields`
//! merges that protobuf from the stream (not the Writable layout of HDFS tokens). Java's
//! builder only sets a field that differs from the builder's default, so empty strings and
//! zeros are not written ([`RmDelegationTokenIdentifier::bytes`]). The renewer is stored as a
//! short name. The secret manager is [`super::delegation`]'s, as for HDFS tokens.

use std::fmt;

use prost::Message as _;

use super::delegation::{abstract_identifier_string, format_token_id, DelegationIdentifier};
use super::{TokenError, TokenIdentifier};
use crate::pb::hadoop::yarn::YarnDelegationTokenIdentifierProto;

/// `RMDelegationTokenIdentifier.KIND_NAME`.
pub const KIND_RM_DELEGATION: &str = "RM_DELEGATION_TOKEN";
/// Largest identifier we parse (a Java one is well under 1 KiB).
pub const MAX_IDENTIFIER_BYTES: usize = 64 << 10;

/// An `RMDelegationTokenIdentifier`: the fields, the bytes as received and the bytes Java's
/// `getBytes()` gives for them.
#[derive(Clone, PartialEq, Eq)]
pub struct RmDelegationTokenIdentifier {
    owner: String,
    renewer: String,
    real_user: String,
    issue_date: i64,
    max_date: i64,
    sequence_number: i32,
    master_key_id: i32,
    raw: Vec<u8>,
    bytes: Vec<u8>,
}

impl fmt::Debug for RmDelegationTokenIdentifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_java_string())
    }
}

fn nonempty(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_string())
}

fn nonzero<T: Default + PartialEq>(v: T) -> Option<T> {
    (v != T::default()).then_some(v)
}

impl RmDelegationTokenIdentifier {
    /// An identifier with these fields (its bytes as Java writes them).
    pub fn new(
        owner: &str,
        renewer: &str,
        real_user: &str,
        issue_date: i64,
        max_date: i64,
        sequence_number: i32,
        master_key_id: i32,
    ) -> RmDelegationTokenIdentifier {
        let mut id = RmDelegationTokenIdentifier {
            owner: owner.into(),
            renewer: renewer.into(),
            real_user: real_user.into(),
            issue_date,
            max_date,
            sequence_number,
            master_key_id,
            raw: Vec::new(),
            bytes: Vec::new(),
        };
        id.bytes = id.canonical();
        id.raw = id.bytes.clone();
        id
    }

    /// `setBuilderFields` + `build().writeTo`: only fields that differ from the defaults.
    fn canonical(&self) -> Vec<u8> {
        YarnDelegationTokenIdentifierProto {
            owner: nonempty(&self.owner),
            renewer: nonempty(&self.renewer),
            real_user: nonempty(&self.real_user),
            issue_date: nonzero(self.issue_date),
            max_date: nonzero(self.max_date),
            sequence_number: nonzero(self.sequence_number),
            master_key_id: nonzero(self.master_key_id),
        }
        .encode_to_vec()
    }

    pub fn owner(&self) -> &str {
        &self.owner
    }
    pub fn renewer(&self) -> &str {
        &self.renewer
    }
    pub fn real_user(&self) -> &str {
        &self.real_user
    }
    pub fn issue_date(&self) -> i64 {
        self.issue_date
    }
    pub fn max_date(&self) -> i64 {
        self.max_date
    }
    pub fn sequence_number(&self) -> i32 {
        self.sequence_number
    }
    pub fn master_key_id(&self) -> i32 {
        self.master_key_id
    }

    /// `AbstractDelegationTokenIdentifier.toString()`.
    pub fn to_java_string(&self) -> String {
        abstract_identifier_string(KIND_RM_DELEGATION, self)
    }

    /// `formatTokenId`: `(` + `toString()` + `)`.
    pub fn format_token_id(&self) -> String {
        format_token_id(self)
    }
}

impl TokenIdentifier for RmDelegationTokenIdentifier {
    const KIND: &'static str = KIND_RM_DELEGATION;

    /// `readFields`: the protobuf merged from the whole stream.
    fn parse(raw: &[u8]) -> Result<Self, TokenError> {
        if raw.len() > MAX_IDENTIFIER_BYTES {
            return Err(TokenError::TooLong {
                what: "RMDelegationTokenIdentifier",
                len: raw.len() as u64,
                max: MAX_IDENTIFIER_BYTES,
            });
        }
        let p = YarnDelegationTokenIdentifierProto::decode(raw).map_err(|e| TokenError::Prost {
            what: "YARNDelegationTokenIdentifierProto",
            message: e.to_string(),
        })?;
        let mut id = RmDelegationTokenIdentifier::new(
            p.owner.as_deref().unwrap_or(""),
            p.renewer.as_deref().unwrap_or(""),
            p.real_user.as_deref().unwrap_or(""),
            p.issue_date.unwrap_or(0),
            p.max_date.unwrap_or(0),
            p.sequence_number.unwrap_or(0),
            p.master_key_id.unwrap_or(0),
        );
        id.raw = raw.to_vec();
        Ok(id)
    }
    fn raw(&self) -> &[u8] {
        &self.raw
    }
    fn bytes(&self) -> &[u8] {
        &self.bytes
    }
    /// The owner (`getUser()`'s user name; a proxied token's effective user).
    fn user(&self) -> Option<String> {
        nonempty(&self.owner)
    }
    fn key_id(&self) -> i32 {
        self.master_key_id
    }
}

impl DelegationIdentifier for RmDelegationTokenIdentifier {
    const STORED: &'static str = "stored RM delegation tokens";
    fn with_fields(
        owner: &str,
        renewer: &str,
        real_user: &str,
        issue_date: i64,
        max_date: i64,
        sequence_number: i32,
        master_key_id: i32,
    ) -> Self {
        RmDelegationTokenIdentifier::new(
            owner,
            renewer,
            real_user,
            issue_date,
            max_date,
            sequence_number,
            master_key_id,
        )
    }
    fn owner(&self) -> &str {
        &self.owner
    }
    fn renewer(&self) -> &str {
        &self.renewer
    }
    fn real_user(&self) -> &str {
        &self.real_user
    }
    fn issue_date(&self) -> i64 {
        self.issue_date
    }
    fn max_date(&self) -> i64 {
        self.max_date
    }
    fn sequence_number(&self) -> i32 {
        self.sequence_number
    }
    fn master_key_id(&self) -> i32 {
        self.master_key_id
    }
    /// Always some: `YARNDelegationTokenIdentifier` does not override `toString()`.
    fn to_java_string(&self) -> Option<String> {
        Some(RmDelegationTokenIdentifier::to_java_string(self))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: i64 = 1_711_242_400_403;

    #[test]
    fn identifier_is_the_yarn_protobuf_with_defaults_left_out() {
        let id =
            RmDelegationTokenIdentifier::new("alice@EXAMPLE.COM", "yarn", "", T0, T0 + 1, 1, 2);
        // owner(1), renewer(2), no realUser, issueDate(4), maxDate(5), seq(6), key(7).
        let b = id.bytes();
        assert_eq!(b[0], 0x0a);
        assert_eq!(&b[2..19], b"alice@EXAMPLE.COM");
        assert_eq!(&b[19..25], b"\x12\x04yarn");
        assert_eq!(b[25], 0x20, "realUser is not written when empty");
        let back = RmDelegationTokenIdentifier::parse(b).unwrap();
        assert_eq!(back, id);
        assert_eq!(back.user().as_deref(), Some("alice@EXAMPLE.COM"));
        assert_eq!(
            id.format_token_id(),
            "(RM_DELEGATION_TOKEN owner=alice@EXAMPLE.COM, renewer=yarn, realUser=, issueDate=1711242400403, maxDate=1711242400404, sequenceNumber=1, masterKeyId=2)"
        );
        // Explicit defaults on the wire parse to the same fields; bytes() drops them again.
        let mut padded = b.to_vec();
        padded.extend_from_slice(&[0x1a, 0x00]);
        let p = RmDelegationTokenIdentifier::parse(&padded).unwrap();
        assert_eq!(p.bytes(), b);
        assert_eq!(p.raw(), &padded[..]);
        assert!(RmDelegationTokenIdentifier::parse(&[0x0a, 0x05, 1]).is_err());
        assert!(RmDelegationTokenIdentifier::parse(&vec![0u8; MAX_IDENTIFIER_BYTES + 1]).is_err());
    }
}
