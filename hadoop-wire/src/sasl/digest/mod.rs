//! DIGEST-MD5 (RFC 2831) exactly as the JDK's `com.sun.security.sasl.digest` runs it: the
//! mechanism of Hadoop's TOKEN auth method on IPC and of the DataTransfer SASL handshake.
//!
//! How the types connect:
//!
//! - [`DigestServer`] (a [`ServerMechanism`](super::ServerMechanism)) is built from a
//!   [`DigestServerConfig`], a nonce (drawn from an [`Entropy`](crate::entropy::Entropy) or fixed
//!   for tests) and a [`PasswordCallback`]. Its first `evaluate_response(&[])` returns the
//!   challenge; the second checks the client's response in the JDK's order, with the JDK's
//!   exception texts, and answers `rspauth=<hex>`.
//! - [`DigestClient`] (a [`ClientMechanism`](super::ClientMechanism)) is built from a
//!   [`DigestClientConfig`] and a cnonce. It answers the challenge with the JDK's directive
//!   order and quoting, and checks `rspauth`.
//! - Both parse with [`directives`] (the JDK's `parseDirectives`, which never panics and is
//!   fuzzed) and compute with [`h_a1`] and [`response_value`].
//! - Once complete with `auth-int` or `auth-conf`, each side holds [`SessionKeys`] (H(A1), QOP,
//!   cipher) and hands out a [`DigestLayer`] (a [`SecurityLayer`](super::SecurityLayer)). The
//!   same `SessionKeys` build both directions' layers ([`SessionKeys::client_layer`],
//!   [`SessionKeys::server_layer`]), so a test that knows H(A1) can compute byte for byte what
//!   the Java peer's `wrap` must produce, and unwrap it.
//!
//! Where this code differs from the JDK on purpose (all on input a JDK peer never sends): a
//! message whose MAC or padding does not verify is an error ([`SaslError::Integrity`]) where the
//! JDK silently returns an empty array; malformed numbers and too-short wrapped tokens are
//! [`SaslError::Sasl`] / [`SaslError::Integrity`] where the JDK throws a `RuntimeException`.

mod client;
mod directives;
mod layer;
mod server;
#[cfg(test)]
mod tests;

use std::borrow::Cow;

use md5::{Digest, Md5};

pub use client::{DigestClient, DigestClientConfig};
pub use directives::{directives, Directive, Directives};
pub use layer::{DigestLayer, SessionKeys};
pub use server::{AuthzPolicy, DigestServer, DigestServerConfig, PasswordCallback};

use super::{Qop, SaslError};

/// The SASL mechanism name.
pub const MECHANISM: &str = "DIGEST-MD5";
/// The largest challenge a client accepts (`MAX_CHALLENGE_LENGTH`).
pub const MAX_CHALLENGE_LENGTH: usize = 2048;
/// The largest response a server accepts (`MAX_RESPONSE_LENGTH`).
pub const MAX_RESPONSE_LENGTH: usize = 4096;
/// The receive buffer both JDK sides announce unless configured (`DEFAULT_MAXBUF`).
pub const DEFAULT_MAXBUF: u32 = 65536;
/// Random bytes in a nonce or cnonce (`RAW_NONCE_SIZE`); base64 makes 40 characters.
pub const RAW_NONCE_SIZE: usize = 30;
/// Realm and server name of Hadoop IPC's TOKEN auth (`SaslRpcServer.SASL_DEFAULT_REALM`).
pub const IPC_SERVER_NAME: &str = "default";
/// Realm and server name of the DataTransfer handshake (`SaslParticipant.SERVER_NAME`).
pub const DATA_TRANSFER_SERVER_NAME: &str = "0";
/// Protocol of the DataTransfer handshake (`SaslParticipant.PROTOCOL`); IPC's is empty.
pub const DATA_TRANSFER_PROTOCOL: &str = "hdfs";

/// The nonce count: the JDK supports only initial authentication, so it is always 1.
const NONCE_COUNT: &[u8] = b"00000001";
/// Appended to A2 when a security layer is negotiated.
const SECURITY_LAYER_MARKER: &[u8] = b":00000000000000000000000000000000";

/// A cipher for `auth-conf`. The variants are in the JDK's `CIPHER_TOKENS` order, which is also
/// the order a JDK server lists them and the order a JDK client searches them.
#[allow(non_camel_case_types)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DigestCipher {
    /// `3des`: two-key triple DES (EDE, K1‖K2‖K1) in CBC mode. High strength.
    TripleDes,
    /// `rc4`: RC4 with a 128-bit key. High strength.
    Rc4,
    /// `des`: single DES in CBC mode. Medium strength.
    Des,
    /// `rc4-56`: RC4 keyed from 7 bytes of H(A1). Medium strength.
    Rc4_56,
    /// `rc4-40`: RC4 keyed from 5 bytes of H(A1). Low strength.
    Rc4_40,
}

impl DigestCipher {
    /// All ciphers, in `CIPHER_TOKENS` order.
    pub const ALL: [DigestCipher; 5] = [
        DigestCipher::TripleDes,
        DigestCipher::Rc4,
        DigestCipher::Des,
        DigestCipher::Rc4_56,
        DigestCipher::Rc4_40,
    ];

    /// The token on the wire: `3des`, `rc4`, `des`, `rc4-56`, `rc4-40`.
    pub fn token(self) -> &'static str {
        match self {
            DigestCipher::TripleDes => "3des",
            DigestCipher::Rc4 => "rc4",
            DigestCipher::Des => "des",
            DigestCipher::Rc4_56 => "rc4-56",
            DigestCipher::Rc4_40 => "rc4-40",
        }
    }

    /// Parses a token. Case-sensitive, as the JDK compares them.
    pub fn from_token(s: &str) -> Option<DigestCipher> {
        Self::ALL.into_iter().find(|c| c.token() == s)
    }

    /// The JDK's strength class (`CIPHER_MASKS`): 4 high, 2 medium, 1 low.
    fn strength(self) -> u8 {
        match self {
            DigestCipher::TripleDes | DigestCipher::Rc4 => 4,
            DigestCipher::Des | DigestCipher::Rc4_56 => 2,
            DigestCipher::Rc4_40 => 1,
        }
    }

    /// How many bytes of H(A1) key the sealing keys (`n` of RFC 2831 §2.4).
    fn h_a1_prefix(self) -> usize {
        match self {
            DigestCipher::Rc4_40 => 5,
            DigestCipher::Rc4_56 => 7,
            _ => 16,
        }
    }

    fn bit(self) -> u8 {
        1 << (self as u8)
    }
}

/// Which of the two response values [`response_value`] computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResponseKind {
    /// The client's `response=` (A2 starts with `AUTHENTICATE`).
    Client,
    /// The server's `rspauth=` (A2 starts with an empty method).
    Server,
}

/// H(A1), raw: `MD5( MD5(username ":" realm ":" password) ":" nonce ":" cnonce [":" authzid] )`.
///
/// `utf8` is whether the exchange uses UTF-8 (the server sent `charset=utf-8`; Hadoop always
/// does). Username, realm and password are then encoded as the JDK's `stringToByte_8859_1`
/// does: ISO-8859-1, unless `utf8` and a character is above U+00FF, in which case the whole
/// string is UTF-8. `nonce`, `cnonce` and `authzid` are the bytes as sent.
pub fn h_a1(
    username: &str,
    realm: &str,
    password: &str,
    nonce: &[u8],
    cnonce: &[u8],
    authzid: Option<&[u8]>,
    utf8: bool,
) -> [u8; 16] {
    let mut inner = Md5::new();
    inner.update(latin1_unless_wide(username, utf8));
    inner.update(b":");
    inner.update(latin1_unless_wide(realm, utf8));
    inner.update(b":");
    inner.update(latin1_unless_wide(password, utf8));
    let mut outer = Md5::new();
    outer.update(inner.finalize());
    outer.update(b":");
    outer.update(nonce);
    outer.update(b":");
    outer.update(cnonce);
    if let Some(a) = authzid {
        outer.update(b":");
        outer.update(a);
    }
    outer.finalize().into()
}

/// The 32 lowercase hex digits of a `response` or `rspauth` value:
/// `HEX(MD5( HEX(H(A1)) ":" nonce ":" 00000001 ":" cnonce ":" qop ":" HEX(MD5(A2)) ))` with
/// `A2 = method ":" digest-uri [":" 32 zeros if qop is auth-int or auth-conf]`.
pub fn response_value(
    h_a1: &[u8; 16],
    nonce: &[u8],
    cnonce: &[u8],
    qop: Qop,
    digest_uri: &str,
    utf8: bool,
    kind: ResponseKind,
) -> [u8; 32] {
    let mut a2 = Md5::new();
    if kind == ResponseKind::Client {
        a2.update(b"AUTHENTICATE");
    }
    a2.update(b":");
    a2.update(java_bytes(digest_uri, utf8));
    if qop != Qop::Auth {
        a2.update(SECURITY_LAYER_MARKER);
    }
    let mut kd = Md5::new();
    kd.update(hex(h_a1));
    kd.update(b":");
    kd.update(nonce);
    kd.update(b":");
    kd.update(NONCE_COUNT);
    kd.update(b":");
    kd.update(cnonce);
    kd.update(b":");
    kd.update(qop.sasl_name());
    kd.update(b":");
    kd.update(hex(&a2.finalize().into()));
    hex(&kd.finalize().into())
}

/// A fresh nonce or cnonce: standard base64 of [`RAW_NONCE_SIZE`] random bytes (40 characters).
pub fn generate_nonce(entropy: &mut dyn crate::entropy::Entropy) -> Result<String, SaslError> {
    use base64::Engine as _;
    let mut raw = [0u8; RAW_NONCE_SIZE];
    entropy.fill(&mut raw)?;
    Ok(base64::engine::general_purpose::STANDARD.encode(raw))
}

fn hex(bytes: &[u8; 16]) -> [u8; 32] {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = [0u8; 32];
    for (i, b) in bytes.iter().enumerate() {
        out[2 * i] = DIGITS[usize::from(b >> 4)];
        out[2 * i + 1] = DIGITS[usize::from(b & 15)];
    }
    out
}

/// Java's `String.getBytes(charset)`: UTF-8, or ISO-8859-1 with `?` for every character above
/// U+00FF.
fn java_bytes(s: &str, utf8: bool) -> Cow<'_, [u8]> {
    if utf8 || s.is_ascii() {
        Cow::Borrowed(s.as_bytes())
    } else {
        Cow::Owned(
            s.chars()
                .map(|c| u8::try_from(u32::from(c)).unwrap_or(b'?'))
                .collect(),
        )
    }
}

/// The JDK's `stringToByte_8859_1`: ISO-8859-1, unless UTF-8 is in use and some character is
/// above U+00FF, in which case the whole string is UTF-8.
fn latin1_unless_wide(s: &str, utf8: bool) -> Cow<'_, [u8]> {
    java_bytes(s, utf8 && s.chars().any(|c| u32::from(c) > 0xff))
}

/// Java's `new String(bytes, charset)`: UTF-8 (malformed input replaced by U+FFFD) or
/// ISO-8859-1.
fn java_string(bytes: &[u8], utf8: bool) -> Cow<'_, str> {
    if utf8 {
        return String::from_utf8_lossy(bytes);
    }
    match std::str::from_utf8(bytes) {
        Ok(s) if s.is_ascii() => Cow::Borrowed(s),
        _ => Cow::Owned(bytes.iter().map(|&b| char::from(b)).collect()),
    }
}

/// Lossy text of peer bytes for an error message (the JDK prints them with the platform
/// charset, UTF-8 on current JDKs).
fn lossy(bytes: &[u8]) -> Cow<'_, str> {
    String::from_utf8_lossy(bytes)
}

/// Whether the JDK's `writeQuotedStringValue` puts a `\` before this byte: `"`, `\`, DEL and
/// the controls other than CR, LF and HT.
fn needs_escape(b: u8) -> bool {
    matches!(b, b'"' | b'\\' | 127) || (b <= 31 && !matches!(b, 9 | 10 | 13))
}

/// Appends `bytes` as the inside of a quoted string.
fn write_quoted(out: &mut Vec<u8>, bytes: &[u8]) {
    for &b in bytes {
        if needs_escape(b) {
            out.push(b'\\');
        }
        out.push(b);
    }
}

/// Java's `String.equalsIgnoreCase`: per character equal, or equal after upper-casing, or
/// after upper- then lower-casing. Rust's case mappings stand in for Java's simple ones (a
/// character whose full mapping has several characters maps to itself, as in Java).
fn java_eq_ignore_case(a: &str, b: &str) -> bool {
    fn upper(c: char) -> char {
        let mut it = c.to_uppercase();
        match (it.next(), it.next()) {
            (Some(u), None) => u,
            _ => c,
        }
    }
    fn lower(c: char) -> char {
        let mut it = c.to_lowercase();
        match (it.next(), it.next()) {
            (Some(l), None) => l,
            _ => c,
        }
    }
    if a.is_ascii() && b.is_ascii() {
        return a.eq_ignore_ascii_case(b);
    }
    let mut ai = a.chars();
    let mut bi = b.chars();
    loop {
        match (ai.next(), bi.next()) {
            (None, None) => return true,
            (Some(x), Some(y)) => {
                if x != y {
                    let (ux, uy) = (upper(x), upper(y));
                    if ux != uy && lower(ux) != lower(uy) {
                        return false;
                    }
                }
            }
            _ => return false,
        }
    }
}

/// Java's `StringTokenizer(s, ", \t\n")`: the non-empty pieces between those delimiters.
fn tokens(s: &str) -> impl Iterator<Item = &str> {
    s.split([',', ' ', '\t', '\n']).filter(|t| !t.is_empty())
}

/// Java's `Integer.parseInt(s, radix)` for ASCII input: an optional sign, then digits, in
/// `i32` range.
fn java_parse_int(s: &str, radix: u32) -> Option<i32> {
    i32::from_str_radix(s, radix).ok()
}

/// The JDK's qop tokens to a mask, ignoring unknown tokens (`parseQop(..., ignore = true)`).
fn qop_mask(list: &str) -> u8 {
    tokens(list)
        .filter_map(|t| {
            [Qop::AuthConf, Qop::AuthInt, Qop::Auth]
                .into_iter()
                .find(|q| java_eq_ignore_case(t, q.sasl_name()))
        })
        .fold(0, |m, q| m | q.mask())
}
