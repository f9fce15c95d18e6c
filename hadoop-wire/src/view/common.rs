//! Views of `hadoop.common` records shared by YARN and HDFS messages.

use super::{last_len, message_view, required, utf8};
use crate::pb::schema::hadoop::common as s;
use crate::reader::DecodeError;

message_view! {
    /// `hadoop.common.TokenProto`: identifier, password, kind, service (all required; empty
    /// identifier and password in non-secure clusters).
    TokenView => s::TokenProto
}

impl<'a> TokenView<'a> {
    /// Field 1, `required bytes identifier`.
    #[inline]
    pub fn identifier(&self) -> Result<&'a [u8], DecodeError> {
        required(last_len(self.bytes, &s::TokenProto, 1)?, &s::TokenProto, 1)
    }
    /// Field 2, `required bytes password`.
    #[inline]
    pub fn password(&self) -> Result<&'a [u8], DecodeError> {
        required(last_len(self.bytes, &s::TokenProto, 2)?, &s::TokenProto, 2)
    }
    /// Field 3, `required string kind`.
    #[inline]
    pub fn kind(&self) -> Result<&'a str, DecodeError> {
        utf8(self.kind_bytes()?, &s::TokenProto, 3)
    }
    /// Field 3 unchecked.
    #[inline]
    pub fn kind_bytes(&self) -> Result<&'a [u8], DecodeError> {
        required(last_len(self.bytes, &s::TokenProto, 3)?, &s::TokenProto, 3)
    }
    /// Field 4, `required string service`.
    #[inline]
    pub fn service(&self) -> Result<&'a str, DecodeError> {
        utf8(self.service_bytes()?, &s::TokenProto, 4)
    }
    /// Field 4 unchecked.
    #[inline]
    pub fn service_bytes(&self) -> Result<&'a [u8], DecodeError> {
        required(last_len(self.bytes, &s::TokenProto, 4)?, &s::TokenProto, 4)
    }
}
