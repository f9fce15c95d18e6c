//! Hadoop's tokens, sans-IO: the [`Token`] itself (`TokenProto` and the Writable form), the
//! Credentials file ("HDTS"), the token identifiers, and the secret manager that mints and
//! verifies passwords.
//!
//! How the types connect:
//!
//! - A [`Token`] is four owned parts: `identifier` bytes, `password` bytes, `kind` and `service`.
//!   It travels as `TokenProto` (RPC messages such as `StartContainerRequestProto`), in the
//!   Writable form (Credentials files, URL strings) and, on SASL, as the DIGEST-MD5 username and
//!   password ([`Token::sasl_username`], [`Token::sasl_password`]: standard padded base64 of the
//!   raw identifier and password; not the URL-safe base64 of [`Token::encode_to_url_string`]).
//! - [`writable`] holds the Writable primitives the Writable forms are made of (vint/vlong,
//!   `Text`, `WritableUtils.writeString`) over the borrowing [`writable::WritableReader`].
//! - [`credentials::Credentials`] is a token file: tokens and secret keys by alias, read in
//!   both formats, written in either ([`credentials::Format::Writable`] is Hadoop 3.5's default).
//! - [`identifier`] parses what a token's `identifier` bytes mean, per kind: the YARN
//!   [`identifier::NmTokenIdentifier`], [`identifier::ContainerTokenIdentifier`] and
//!   [`identifier::AmrmTokenIdentifier`] (protobuf), and the HDFS
//!   [`identifier::DelegationTokenIdentifier`] (Writable). Each keeps the bytes as received
//!   ([`TokenIdentifier::raw`]) and the bytes Java's `getBytes()` would produce after parsing
//!   them ([`TokenIdentifier::bytes`]), which is what the password covers.
//! - [`secret`] computes passwords (`HMAC-SHA1(key, identifier.bytes())`), holds the
//!   [`secret::MasterKey`]s the RM rolls and the NM receives, and verifies NM and container
//!   tokens as the Java NodeManager does, with its `InvalidToken` texts.
//! - [`delegation`] is the delegation-token secret manager
//!   (`AbstractDelegationTokenSecretManager`), once for the NameNode's HDFS tokens and the
//!   RM's [`rm_delegation`] tokens: rolled delegation keys, minted, renewed, cancelled and
//!   expired tokens, persisted through a store the caller gives, and Java's `formatTokenId` /
//!   `Time.formatTime` texts.
//!
//! Errors are [`TokenError`]s; [`TokenError::java_class`] names the Java exception a Hadoop
//! server answers with, and a `TokenError` converts into
//! [`SaslError::InvalidToken`](crate::sasl::SaslError::InvalidToken) for the SASL layer.
//!
//! Every length and count read from input is checked against [`Limits`] and against the bytes
//! that remain before anything is allocated; nothing here panics on bad input.

pub mod credentials;
pub mod delegation;
pub mod identifier;
pub mod rm_delegation;
pub mod secret;
pub mod writable;

mod canonical;

use std::fmt;

use base64::Engine as _;
use prost::Message as _;

use crate::pb::hadoop::common::TokenProto;
use crate::reader::DecodeError;
use writable::WritableReader;

pub use credentials::{Credentials, Format};
pub use delegation::DelegationIdentifier;
pub use identifier::{
    AmrmTokenIdentifier, ContainerTokenIdentifier, DelegationTokenIdentifier, NmTokenIdentifier,
    NodeId,
};
pub use secret::{MasterKey, MasterKeys, Password};

/// Kind of an HDFS delegation token (`DelegationTokenIdentifier.HDFS_DELEGATION_KIND`).
pub const KIND_HDFS_DELEGATION: &str = "HDFS_DELEGATION_TOKEN";
/// Kind of an HDFS block access token (`BlockTokenIdentifier.KIND_NAME`).
pub const KIND_HDFS_BLOCK: &str = "HDFS_BLOCK_TOKEN";
/// Kind of an NMToken (`NMTokenIdentifier.KIND`).
pub const KIND_NM: &str = "NMToken";
/// Kind of a container token (`ContainerTokenIdentifier.KIND`).
pub const KIND_CONTAINER: &str = "ContainerToken";
/// Kind of an AMRMToken (`AMRMTokenIdentifier.KIND_NAME`).
pub const KIND_AMRM: &str = "YARN_AM_RM_TOKEN";

/// Caps on what a token or a Credentials file may claim. Inputs are in memory already, so a
/// length is also checked against the bytes that remain; these caps bound the rest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest identifier, password or secret key, in bytes.
    pub max_bytes: usize,
    /// Largest `Text` (alias, kind, service), in bytes.
    pub max_text: usize,
    /// Most tokens in one Credentials file.
    pub max_tokens: usize,
    /// Most secret keys in one Credentials file.
    pub max_secrets: usize,
    /// Largest Credentials file (or protobuf body), in bytes.
    pub max_file: usize,
}

impl Limits {
    /// 1 MiB per identifier, password and secret (Java's `Text.DEFAULT_MAX_LEN`), 64 KiB per
    /// text, 10 000 tokens and 10 000 secrets, 64 MiB per file.
    pub const DEFAULT: Limits = Limits {
        max_bytes: 1 << 20,
        max_text: 64 << 10,
        max_tokens: 10_000,
        max_secrets: 10_000,
        max_file: 64 << 20,
    };
}

impl Default for Limits {
    fn default() -> Self {
        Limits::DEFAULT
    }
}

/// Why token bytes could not be read, or why a token is not accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    /// The input ended inside `what`.
    #[error("{what}: input ended early")]
    Truncated { what: &'static str },
    /// A length prefix is negative (and not the `-1` that means null where that is allowed).
    #[error("{what}: negative length {len}")]
    NegativeLength { what: &'static str, len: i64 },
    /// A length over the configured cap.
    #[error("{what}: length {len} exceeds the limit of {max}")]
    TooLong {
        what: &'static str,
        len: u64,
        max: usize,
    },
    /// A count over the configured cap, or negative.
    #[error("{what}: count {count} is outside 0 ..= {max}")]
    TooMany {
        what: &'static str,
        count: i64,
        max: usize,
    },
    /// A vint outside the `int` range (Java: "value too long to fit in integer").
    #[error("{what}: value too long to fit in integer ({value})")]
    VIntRange { what: &'static str, value: i64 },
    /// Text that is not UTF-8 (Java's `Text` would keep the bytes; we refuse them).
    #[error("{what}: invalid UTF-8")]
    Utf8 { what: &'static str },
    /// A Credentials file that does not start with `HDTS`.
    #[error("Bad header found in token storage.")]
    BadMagic,
    /// A Credentials file whose format byte is neither 0 (Writable) nor 1 (protobuf) (Java
    /// prints the byte signed).
    #[error("Unknown credential format: {}", *.0 as i8)]
    UnknownFormat(u8),
    /// A delegation token identifier whose version byte is not 0.
    #[error("Unknown version of delegation token {0}")]
    DelegationVersion(u8),
    /// Protobuf bytes that protobuf-java would refuse.
    #[error("{what}: {source}")]
    Proto {
        what: &'static str,
        #[source]
        source: DecodeError,
    },
    /// Protobuf bytes prost could not decode (a `string` field that is not UTF-8).
    #[error("{what}: {message}")]
    Prost { what: &'static str, message: String },
    /// A base64 string that does not decode.
    #[error("{what}: invalid base64")]
    Base64 { what: &'static str },
    /// Bytes that are not the identifier they claim to be (the old NMToken format).
    #[error("{what}: {reason}")]
    Malformed { what: &'static str, reason: String },
    /// `hadoop.security.secret-manager.key-generator.algorithm` names something other than
    /// HmacSHA1.
    #[error("unsupported secret manager algorithm {0:?}: only HmacSHA1 is implemented")]
    UnsupportedAlgorithm(String),
    /// A master key with no bytes or more than [`secret::MAX_KEY_BYTES`].
    #[error("master key {key_id}: {len} key bytes (1 ..= {max} allowed)")]
    BadKey { key_id: i32, len: usize, max: usize },
    /// No key to mint with: no master key has been set yet.
    #[error("no current master key")]
    NoCurrentKey,
    /// No key with this id to mint with (neither current nor previous).
    #[error("master key {0} is neither the current nor the previous key")]
    UnknownKey(i32),
    /// `SecretManager.InvalidToken` with Java's text: unknown key, wrong node, wrong password.
    #[error("{0}")]
    InvalidToken(String),
    /// `org.apache.hadoop.security.AccessControlException` with Java's text: a delegation
    /// token renewed or cancelled by someone who may not.
    #[error("{0}")]
    AccessControl(String),
    /// A start request the NM refuses after the token checked out (`YarnException` with Java's
    /// "Unauthorized request to start container." text): other application, relaunch, expiry.
    #[error("{0}")]
    Unauthorized(String),
    /// A bounded table of the secret managers is full (remembered container starts with
    /// unexpired tokens, remembered attempt keys).
    #[error("{what}: all {max} places taken")]
    Full { what: &'static str, max: usize },
}

impl TokenError {
    /// The Java exception class a Hadoop server reports for this error.
    pub fn java_class(&self) -> &'static str {
        match self {
            TokenError::InvalidToken(_) => {
                "org.apache.hadoop.security.token.SecretManager$InvalidToken"
            }
            TokenError::Unauthorized(_) => "org.apache.hadoop.yarn.exceptions.YarnException",
            TokenError::AccessControl(_) => "org.apache.hadoop.security.AccessControlException",
            _ => "java.io.IOException",
        }
    }

    pub(crate) fn proto(what: &'static str) -> impl FnOnce(DecodeError) -> TokenError {
        move |source| TokenError::Proto { what, source }
    }

    pub(crate) fn prost(what: &'static str) -> impl FnOnce(prost::DecodeError) -> TokenError {
        move |e| TokenError::Prost {
            what,
            message: e.to_string(),
        }
    }
}

/// A token the SASL layer cannot accept is an `InvalidToken` there, whatever the reason.
impl From<TokenError> for crate::sasl::SaslError {
    fn from(e: TokenError) -> Self {
        crate::sasl::SaslError::InvalidToken(e.to_string())
    }
}

/// What a token identifier is: parsed from a token's `identifier` bytes, with the bytes as
/// received and the bytes Java re-serializes them to (the HMAC input).
pub trait TokenIdentifier: Sized {
    /// The token kind (`Token.kind`) of this identifier.
    const KIND: &'static str;
    /// Parses the identifier bytes as Java's `readFields` does.
    fn parse(raw: &[u8]) -> Result<Self, TokenError>;
    /// The bytes as received (or as built).
    fn raw(&self) -> &[u8];
    /// The bytes Java's `TokenIdentifier.getBytes()` returns for what was parsed: the
    /// canonical re-serialization the secret managers compute the password over.
    fn bytes(&self) -> &[u8];
    /// Java's `getUser().getUserName()`; `None` where Java has no user (or would fail).
    fn user(&self) -> Option<String>;
    /// The id of the master key the password was made with.
    fn key_id(&self) -> i32;
}

/// A Hadoop token: `TokenProto` / the Writable `Token`.
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct Token {
    pub identifier: Vec<u8>,
    pub password: Vec<u8>,
    pub kind: String,
    pub service: String,
}

/// Prints the kind, the service and the sizes, never the password.
impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Token")
            .field("kind", &self.kind)
            .field("service", &self.service)
            .field(
                "identifier",
                &format_args!("{} bytes", self.identifier.len()),
            )
            .field("password", &format_args!("{} bytes", self.password.len()))
            .finish()
    }
}

/// Standard base64 with padding (commons-codec `Base64.encodeBase64`): SASL usernames and
/// passwords.
pub fn sasl_encode(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// Decodes a SASL username or password (standard alphabet; padding optional).
pub fn sasl_decode(text: &str, what: &'static str) -> Result<Vec<u8>, TokenError> {
    LENIENT_STANDARD
        .decode(text.trim_end_matches('='))
        .map_err(|_| TokenError::Base64 { what })
}

const LENIENT: base64::engine::GeneralPurposeConfig = base64::engine::GeneralPurposeConfig::new()
    .with_encode_padding(false)
    .with_decode_padding_mode(base64::engine::DecodePaddingMode::RequireNone)
    .with_decode_allow_trailing_bits(true);
const LENIENT_STANDARD: base64::engine::GeneralPurpose =
    base64::engine::GeneralPurpose::new(&base64::alphabet::STANDARD, LENIENT);
const URL_SAFE_NO_PAD: base64::engine::GeneralPurpose =
    base64::engine::GeneralPurpose::new(&base64::alphabet::URL_SAFE, LENIENT);

impl Token {
    pub fn new(
        identifier: impl Into<Vec<u8>>,
        password: impl Into<Vec<u8>>,
        kind: impl Into<String>,
        service: impl Into<String>,
    ) -> Token {
        Token {
            identifier: identifier.into(),
            password: password.into(),
            kind: kind.into(),
            service: service.into(),
        }
    }

    /// The token for an identifier and its password: `identifier.bytes()`, the identifier's
    /// kind, and `service` (`ip:port` for YARN tokens; empty until a client sets it).
    pub fn for_identifier<I: TokenIdentifier>(id: &I, password: &[u8], service: &str) -> Token {
        Token::new(id.bytes(), password, I::KIND, service)
    }

    /// The `TokenProto` form.
    pub fn to_proto(&self) -> TokenProto {
        TokenProto {
            identifier: self.identifier.clone(),
            password: self.password.clone(),
            kind: self.kind.clone(),
            service: self.service.clone(),
        }
    }

    /// From a decoded `TokenProto` (checked against `limits`).
    pub fn from_proto(p: TokenProto, limits: &Limits) -> Result<Token, TokenError> {
        let t = Token {
            identifier: p.identifier,
            password: p.password,
            kind: p.kind,
            service: p.service,
        };
        t.check(limits)?;
        Ok(t)
    }

    /// Encodes `TokenProto` (fields 1–4, all present as `required` demands).
    pub fn encode_proto(&self) -> Vec<u8> {
        self.to_proto().encode_to_vec()
    }

    /// Decodes `TokenProto` bytes; all four fields are required, as in Java.
    pub fn decode_proto(bytes: &[u8], limits: &Limits) -> Result<Token, TokenError> {
        const WHAT: &str = "TokenProto";
        if bytes.len() > limits.max_file {
            return Err(TokenError::TooLong {
                what: WHAT,
                len: bytes.len() as u64,
                max: limits.max_file,
            });
        }
        crate::view::schema::validate(&crate::pb::schema::hadoop::common::TokenProto, bytes, 0)
            .map_err(TokenError::proto(WHAT))?;
        let p = TokenProto::decode(bytes).map_err(TokenError::prost(WHAT))?;
        Token::from_proto(p, limits)
    }

    fn check(&self, limits: &Limits) -> Result<(), TokenError> {
        let over = |what, len: usize, max: usize| {
            (len > max).then_some(TokenError::TooLong {
                what,
                len: len as u64,
                max,
            })
        };
        match over("token identifier", self.identifier.len(), limits.max_bytes)
            .or_else(|| over("token password", self.password.len(), limits.max_bytes))
            .or_else(|| over("token kind", self.kind.len(), limits.max_text))
            .or_else(|| over("token service", self.service.len(), limits.max_text))
        {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Reads a Writable `Token`: `vint len, identifier, vint len, password, Text kind, Text
    /// service`.
    pub fn read_writable(r: &mut WritableReader<'_>, limits: &Limits) -> Result<Token, TokenError> {
        let identifier = r.read_vint_bytes("token identifier", limits.max_bytes)?;
        let password = r.read_vint_bytes("token password", limits.max_bytes)?;
        let kind = r.read_text("token kind", limits.max_text)?;
        let service = r.read_text("token service", limits.max_text)?;
        Ok(Token::new(identifier, password, kind, service))
    }

    /// Appends the Writable form.
    pub fn write_writable(&self, out: &mut Vec<u8>) {
        writable::write_vint_bytes(out, &self.identifier);
        writable::write_vint_bytes(out, &self.password);
        writable::write_text(out, &self.kind);
        writable::write_text(out, &self.service);
    }

    /// The Writable form.
    pub fn to_writable(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(
            self.identifier.len() + self.password.len() + self.kind.len() + self.service.len() + 20,
        );
        self.write_writable(&mut out);
        out
    }

    /// Reads the Writable form from the start of `bytes`; bytes after it are ignored, as
    /// Java's `readFields` ignores them.
    pub fn from_writable(bytes: &[u8], limits: &Limits) -> Result<Token, TokenError> {
        Token::read_writable(&mut WritableReader::new(bytes), limits)
    }

    /// Java's `Token.encodeToUrlString()`: URL-safe base64 without padding of the Writable
    /// form (what `hdfs fetchdt`, WebHDFS `delegation=` and the CLI print).
    pub fn encode_to_url_string(&self) -> String {
        URL_SAFE_NO_PAD.encode(self.to_writable())
    }

    /// Java's `Token.decodeFromUrlString`: like commons-codec, accepts the URL-safe and the
    /// standard alphabet, with or without padding.
    pub fn decode_from_url_string(text: &str, limits: &Limits) -> Result<Token, TokenError> {
        const WHAT: &str = "token URL string";
        let max_chars = limits.max_file.saturating_mul(4) / 3 + 4;
        if text.len() > max_chars {
            return Err(TokenError::TooLong {
                what: WHAT,
                len: text.len() as u64,
                max: max_chars,
            });
        }
        let url: String = text
            .trim_end_matches('=')
            .chars()
            .map(|c| match c {
                '+' => '-',
                '/' => '_',
                c => c,
            })
            .collect();
        let bytes = URL_SAFE_NO_PAD
            .decode(url)
            .map_err(|_| TokenError::Base64 { what: WHAT })?;
        Token::from_writable(&bytes, limits)
    }

    /// The DIGEST-MD5 username the IPC client sends: standard padded base64 of the raw
    /// identifier.
    pub fn sasl_username(&self) -> String {
        sasl_encode(&self.identifier)
    }

    /// The DIGEST-MD5 password: standard padded base64 of the password bytes.
    pub fn sasl_password(&self) -> String {
        sasl_encode(&self.password)
    }
}
