//! The SASL messages on callId −33 (`RpcSaslProto`), their frames, and the auth methods they
//! name.
//!
//! Every SASL message is an ordinary IPC frame: `u32 length ‖ delimited header ‖ delimited
//! RpcSaslProto`. The client's header is `RpcRequestHeaderProto{rpcKind 2, rpcOp 0, callId −33,
//! clientId empty (present), retryCount −1}`; the server's negotiation replies carry
//! `RpcResponseHeaderProto{callId −33, SUCCESS, serverIpcVersionNum 9, clientId empty, retryCount
//! −1}`, while its WRAP packets carry only fields 1 and 2. Negotiation messages are decoded with
//! prost (a handful per connection); WRAP packets, which carry every byte once a security layer is
//! on, are read and written by hand without allocating.

use crate::encode::{self, write_delimited, Encoded, FrameBuf, Proto, RpcRequestHeader};
use crate::error::EncodeError;
use crate::pb::hadoop::common::rpc_sasl_proto::{SaslAuth, SaslState};
use crate::pb::hadoop::common::RpcSaslProto;
use crate::reader::{DecodeError, Reader, WireType};
use crate::rpc::{INVALID_RETRY_COUNT, SASL_CALL_ID};
use crate::writer::{Encode, Sink};

use super::SaslError;

/// `hadoop.security.sasl.mechanism`'s default: the mechanism of the TOKEN method.
pub const DEFAULT_TOKEN_MECHANISM: &str = "DIGEST-MD5";
/// `SaslRpcServer.SASL_DEFAULT_REALM`: the DIGEST-MD5 server name (and so realm) of IPC TOKEN auth.
pub const SASL_DEFAULT_REALM: &str = "default";
/// Largest negotiation message accepted (before WRAP): a DIGEST-MD5 response is at most
/// 4096 bytes, a Kerberos AP-REQ with a PAC a few KiB.
pub const DEFAULT_MAX_NEGOTIATION_MESSAGE: usize = 64 * 1024;
/// Room a negotiation frame may take beyond its `RpcSaslProto`: the RPC header (14 bytes from
/// Java's server, 10 from its client; a FATAL's exception text is in it too) and the two varint
/// length prefixes.
pub const NEGOTIATION_FRAME_OVERHEAD: usize = 1024;

/// The largest frame body (the value of the 4-byte length) either side accepts while
/// negotiating, for messages of at most `max_message` bytes. Both sides check the length
/// against it before reading the body, so a peer that is not authenticated yet cannot make
/// them buffer more (the general cap, `ipc.maximum.data.length`, is 128 MiB).
pub fn max_negotiation_frame(max_message: usize) -> u32 {
    max_message
        .saturating_add(NEGOTIATION_FRAME_OVERHEAD)
        .min(i32::MAX as usize) as u32
}

/// An authentication method (`SaslRpcServer.AuthMethod`) as it appears in `SaslAuth.method`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AuthMethod {
    Simple,
    Kerberos,
    Token,
}

impl AuthMethod {
    /// The name on the wire and in `hadoop.security.authentication` (upper case).
    pub fn name(self) -> &'static str {
        match self {
            AuthMethod::Simple => "SIMPLE",
            AuthMethod::Kerberos => "KERBEROS",
            AuthMethod::Token => "TOKEN",
        }
    }

    /// Parses a wire name exactly (Java's `AuthMethod.valueOf`).
    pub fn from_name(s: &str) -> Option<AuthMethod> {
        match s {
            "SIMPLE" => Some(AuthMethod::Simple),
            "KERBEROS" => Some(AuthMethod::Kerberos),
            "TOKEN" => Some(AuthMethod::Token),
            _ => None,
        }
    }

    /// Parses `hadoop.security.authentication` (any case, as Java upper-cases it).
    pub fn from_conf(s: &str) -> Option<AuthMethod> {
        Self::from_name(&s.trim().to_ascii_uppercase())
    }
}

impl std::fmt::Display for AuthMethod {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Java's `List.toString` of methods: `[TOKEN, SIMPLE]`.
pub(crate) fn method_list(methods: impl IntoIterator<Item = impl std::fmt::Display>) -> String {
    let names: Vec<String> = methods.into_iter().map(|m| m.to_string()).collect();
    format!("[{}]", names.join(", "))
}

/// A message of the given state with nothing else set.
pub fn message(state: SaslState) -> RpcSaslProto {
    RpcSaslProto {
        version: None,
        state: state as i32,
        token: None,
        auths: Vec::new(),
    }
}

/// The state of a decoded message (`None`: a number this side does not know).
pub fn state_of(m: &RpcSaslProto) -> Option<SaslState> {
    SaslState::try_from(m.state).ok()
}

/// The name of a state number as Java prints it (`NEGOTIATE`, ...), for error texts.
pub fn state_name(state: i32) -> String {
    match SaslState::try_from(state) {
        Ok(s) => s.as_str_name().to_string(),
        Err(_) => state.to_string(),
    }
}

/// An auth entry without its challenge: what the client echoes in INITIATE and what the server
/// compares it with (Java: proto `equals`).
pub fn without_challenge(a: &SaslAuth) -> SaslAuth {
    SaslAuth {
        challenge: None,
        ..a.clone()
    }
}

/// Decodes a negotiation message, refusing one over `max` bytes before decoding it.
pub fn decode(msg: &[u8], max: usize) -> Result<RpcSaslProto, SaslError> {
    if msg.len() > max {
        return Err(SaslError::Sasl(format!(
            "SASL message of {} bytes exceeds the limit of {max}",
            msg.len()
        )));
    }
    let m: RpcSaslProto = prost::Message::decode(msg)
        .map_err(|e| SaslError::Sasl(format!("Malformed RpcSaslProto: {e}")))?;
    // prost fills an absent required enum with its default (SUCCESS); protobuf-java refuses
    // the message, and so do we.
    if SaslMessageView::read(msg).map_or(true, |v| v.state.is_none()) {
        return Err(SaslError::Sasl(
            "Malformed RpcSaslProto: Message missing required fields: state".into(),
        ));
    }
    Ok(m)
}

/// The request header of every client SASL frame (callId −33, empty clientId, retryCount −1).
fn client_header() -> RpcRequestHeader<'static> {
    RpcRequestHeader::call(SASL_CALL_ID, &[], INVALID_RETRY_COUNT)
}

/// Appends a client SASL frame carrying `msg`. Returns the frame size.
pub fn client_frame<B: FrameBuf>(buf: &mut B, msg: &RpcSaslProto) -> Result<usize, EncodeError> {
    let header = client_header();
    encode::frame(buf, |b| {
        write_delimited(b, &header)?;
        write_delimited(b, &Proto(msg))?;
        Ok(())
    })
}

/// Appends a server SASL reply frame (negotiation, not WRAP) carrying `msg`.
pub fn server_frame<B: FrameBuf>(buf: &mut B, msg: &RpcSaslProto) -> Result<usize, EncodeError> {
    let header = encode::RpcResponseHeader::success(SASL_CALL_ID, &[], INVALID_RETRY_COUNT);
    encode::frame(buf, |b| {
        write_delimited(b, &header)?;
        write_delimited(b, &Proto(msg))?;
        Ok(())
    })
}

/// `RpcSaslProto{state: WRAP, token}`, written by hand (no owned message per packet).
struct Wrap<'a>(&'a [u8]);

impl Encode for Wrap<'_> {
    fn encode<S: Sink>(&self, s: &mut S) {
        s.int32(2, SaslState::Wrap as i32);
        s.bytes(3, self.0);
    }
}

/// The header of a server WRAP packet: callId −33 and SUCCESS only (Java's `wrapWithSasl`).
struct WrapResponseHeader;

impl Encode for WrapResponseHeader {
    fn encode<S: Sink>(&self, s: &mut S) {
        s.uint(1, u64::from(SASL_CALL_ID as u32));
        s.int32(2, 0);
    }
}

/// Appends a client WRAP frame around `token` (a security layer's output).
pub fn client_wrap_frame<B: FrameBuf>(buf: &mut B, token: &[u8]) -> Result<usize, EncodeError> {
    let header = client_header();
    encode::frame(buf, |b| {
        write_delimited(b, &header)?;
        write_delimited(b, &Encoded(&Wrap(token)))?;
        Ok(())
    })
}

/// Appends a server WRAP frame around `token`.
pub fn server_wrap_frame<B: FrameBuf>(buf: &mut B, token: &[u8]) -> Result<usize, EncodeError> {
    encode::frame(buf, |b| {
        write_delimited(b, &Encoded(&WrapResponseHeader))?;
        write_delimited(b, &Encoded(&Wrap(token)))?;
        Ok(())
    })
}

/// Bytes a WRAP frame around a token of `token_len` bytes takes, server side (length prefix
/// included).
pub fn server_wrap_frame_len(token_len: usize) -> usize {
    let h = WrapResponseHeader.encoded_len();
    let m = Wrap(&[]).encoded_len() - 1
        + prost::encoding::encoded_len_varint(token_len as u64)
        + token_len;
    4 + prost::encoding::encoded_len_varint(h as u64)
        + h
        + prost::encoding::encoded_len_varint(m as u64)
        + m
}

/// The state and token of a SASL message, read without decoding it into an owned message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SaslMessageView<'a> {
    /// `state` (required; `None` if absent).
    pub state: Option<i32>,
    /// `token`, if present.
    pub token: Option<&'a [u8]>,
}

impl<'a> SaslMessageView<'a> {
    /// Reads `state` and `token`; other fields are skipped (checked for well-formedness).
    pub fn read(msg: &'a [u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(msg);
        let mut v = SaslMessageView {
            state: None,
            token: None,
        };
        while !r.is_empty() {
            let (field, wt) = r.read_tag()?;
            match (field, wt) {
                (2, WireType::Varint) => v.state = Some(r.read_varint()? as i32),
                (3, WireType::Len) => v.token = Some(r.read_len()?),
                (f, wt) => r.skip(f, wt, 0)?,
            }
        }
        Ok(v)
    }

    /// Whether this is a WRAP packet.
    pub fn is_wrap(&self) -> bool {
        self.state == Some(SaslState::Wrap as i32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negotiate_frame_is_javas_bytes() {
        let mut b = Vec::new();
        client_frame(&mut b, &message(SaslState::Negotiate)).unwrap();
        // security.md §1.2, made by running Hadoop 3.5.0's ProtoUtil.
        assert_eq!(
            b,
            [
                0x00, 0x00, 0x00, 0x0e, 0x0a, 0x08, 0x02, 0x10, 0x00, 0x18, 0x41, 0x22, 0x00, 0x28,
                0x01, 0x02, 0x10, 0x01
            ]
        );
    }

    #[test]
    fn server_headers_are_javas_bytes() {
        let mut b = Vec::new();
        server_frame(&mut b, &message(SaslState::Success)).unwrap();
        let hdr = [
            0x08, 0xdf, 0xff, 0xff, 0xff, 0x0f, 0x10, 0x00, 0x18, 0x09, 0x3a, 0x00, 0x40, 0x01,
        ];
        assert_eq!(b[4] as usize, hdr.len());
        assert_eq!(&b[5..5 + hdr.len()], hdr);

        let mut w = Vec::new();
        let n = server_wrap_frame(&mut w, b"abc").unwrap();
        assert_eq!(n, w.len());
        assert_eq!(server_wrap_frame_len(3), w.len());
        assert_eq!(
            &w[4..13],
            [8, 0x08, 0xdf, 0xff, 0xff, 0xff, 0x0f, 0x10, 0x00]
        );
        let (_, rest) = w[13..].split_at(1);
        let v = SaslMessageView::read(rest).unwrap();
        assert!(v.is_wrap());
        assert_eq!(v.token, Some(&b"abc"[..]));
        for len in [0usize, 1, 127, 128, 16383, 16384, 70000] {
            let mut w = Vec::new();
            server_wrap_frame(&mut w, &vec![7; len]).unwrap();
            assert_eq!(server_wrap_frame_len(len), w.len(), "{len}");
        }
    }

    #[test]
    fn negotiation_frame_cap() {
        assert_eq!(
            max_negotiation_frame(DEFAULT_MAX_NEGOTIATION_MESSAGE),
            64 * 1024 + 1024
        );
        assert_eq!(max_negotiation_frame(usize::MAX), i32::MAX as u32);
        // the largest message fits its frame with Java's client header
        let mut m = message(SaslState::Initiate);
        m.token = Some(vec![0; DEFAULT_MAX_NEGOTIATION_MESSAGE - 8]);
        let mut b = Vec::new();
        client_frame(&mut b, &m).unwrap();
        let body = b.len() - 4;
        assert!(body <= max_negotiation_frame(DEFAULT_MAX_NEGOTIATION_MESSAGE) as usize);
    }

    #[test]
    fn oversized_message_refused_before_decoding() {
        let e = decode(&[0u8; 100], 99).unwrap_err();
        assert!(matches!(e, SaslError::Sasl(m) if m.contains("exceeds the limit of 99")));
        assert!(decode(&[0xff], 10).is_err());
        // a message without its required state is not a SUCCESS
        assert!(decode(&[0x1a, 0x00], 10).is_err());
        assert!(decode(&[0x10, 0x00], 10).is_ok());
    }
}
