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

use super::delegation::{format_token_id, DelegationFields, DelegationIdentifier};
use super::{TokenError, TokenIdentifier};
use crate::pb::hadoop::yarn::YarnDelegationTokenIdentifierProto;

/// `RMDelegationTokenIdentifier.KIND_NAME`.
pub const KIND_RM_DELEGATION: &str = "RM_DELEGATION_TOKEN";
/// Largest identifier we parse (a Java one is well under 1 KiB).
pub const MAX_IDENTIFIER_BYTES: usize = 64 << 10;

/// An `RMDelegationTokenIdentifier`: the fields (read through [`DelegationIdentifier`]), the
/// bytes as received and the bytes Java's `getBytes()` gives for them.
#[derive(Clone, PartialEq, Eq)]
pub struct RmDelegationTokenIdentifier {
    fields: DelegationFields,
    raw: Vec<u8>,
    bytes: Vec<u8>,
}

impl fmt::Debug for RmDelegationTokenIdentifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.fields.java_string(KIND_RM_DELEGATION))
    }
}

fn nonempty(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_string())
}

fn nonzero<T: Default + PartialEq>(v: T) -> Option<T> {
    (v != T::default()).then_some(v)
}

impl RmDelegationTokenIdentifier {
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
        let mut id = RmDelegationTokenIdentifier::from_fields(DelegationFields {
            owner: p.owner.unwrap_or_default(),
            renewer: p.renewer.unwrap_or_default(),
            real_user: p.real_user.unwrap_or_default(),
            issue_date: p.issue_date.unwrap_or(0),
            max_date: p.max_date.unwrap_or(0),
            sequence_number: p.sequence_number.unwrap_or(0),
            master_key_id: p.master_key_id.unwrap_or(0),
        });
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
        nonempty(&self.fields.owner)
    }
    fn key_id(&self) -> i32 {
        self.fields.master_key_id
    }
}

impl DelegationIdentifier for RmDelegationTokenIdentifier {
    const STORED: &'static str = "stored RM delegation tokens";

    /// `setBuilderFields` + `build().writeTo`: only fields that differ from the defaults.
    fn from_fields(fields: DelegationFields) -> Self {
        let f = &fields;
        let bytes = YarnDelegationTokenIdentifierProto {
            owner: nonempty(&f.owner),
            renewer: nonempty(&f.renewer),
            real_user: nonempty(&f.real_user),
            issue_date: nonzero(f.issue_date),
            max_date: nonzero(f.max_date),
            sequence_number: nonzero(f.sequence_number),
            master_key_id: nonzero(f.master_key_id),
        }
        .encode_to_vec();
        RmDelegationTokenIdentifier {
            fields,
            raw: bytes.clone(),
            bytes,
        }
    }

    fn fields(&self) -> &DelegationFields {
        &self.fields
    }

    /// `AbstractDelegationTokenIdentifier.toString()` (`YARNDelegationTokenIdentifier` does not
    /// override it), so never `None`.
    fn to_java_string(&self) -> Option<String> {
        Some(self.fields.java_string(KIND_RM_DELEGATION))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: i64 = 1_711_242_400_403;

    #[test]
    fn identifier_is_the_yarn_protobuf_with_defaults_left_out() {
        let id = RmDelegationTokenIdentifier::from_fields(DelegationFields {
            owner: "alice@EXAMPLE.COM".into(),
            renewer: "yarn".into(),
            real_user: "".into(),
            issue_date: T0,
            max_date: T0 + 1,
            sequence_number: 1,
            master_key_id: 2,
        });
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
