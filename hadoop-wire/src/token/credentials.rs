//! Hadoop's Credentials file ("token storage"): `HADOOP_TOKEN_FILE_LOCATION`, the NM's
//! `container_tokens`, `ContainerLaunchContextProto.tokens`.
//!
//! `"HDTS"` ‖ one format byte ‖ body:
//!
//! - format 0, [`Format::Writable`] (Java's `Credentials.write`): `vint nTokens`, per token
//!   `Text alias ‖ Writable Token`; `vint nSecrets`, per secret `Text alias ‖ vint len ‖ bytes`.
//!   An empty file is `48 44 54 53 00 00 00`.
//! - format 1, [`Format::Protobuf`]: a varint-delimited `CredentialsProto { repeated
//!   CredentialsKVProto tokens = 1; repeated CredentialsKVProto secrets = 2; }` with
//!   `CredentialsKVProto { required string alias = 1; optional TokenProto token = 2; optional
//!   bytes secret = 3; }`.
//!
//! Hadoop 3.5's `writeTokenStorageToStream(os)` and `writeTokenStorageFile(path, conf)` write
//! format 0 ("the oldest supported format for compatibility"), so [`Format::default`] is
//! [`Format::Writable`]; readers take both. Bytes after the body are ignored, as Java ignores
//! them.
//!
//! Java keeps tokens and secrets in hash maps by alias: a repeated alias replaces the earlier
//! entry (here in place, so the first position stays), and the order in which Java writes them
//! is its hash order. Every count and length is checked against [`Limits`] before use.

use std::fmt;

use prost::Message as _;

use super::writable::{self, WritableReader};
use super::{Limits, Token, TokenError};
use crate::pb::hadoop::common::{CredentialsKvProto, CredentialsProto};

/// The first four bytes of a Credentials file.
pub const MAGIC: &[u8; 4] = b"HDTS";

/// The body format of a Credentials file (Java's `Credentials.SerializedFormat`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Format {
    /// Format byte 0, Hadoop 3.5's default for writing.
    #[default]
    Writable,
    /// Format byte 1.
    Protobuf,
}

impl Format {
    /// The format byte after `HDTS`.
    pub fn byte(self) -> u8 {
        match self {
            Format::Writable => 0,
            Format::Protobuf => 1,
        }
    }

    pub fn from_byte(b: u8) -> Result<Format, TokenError> {
        match b {
            0 => Ok(Format::Writable),
            1 => Ok(Format::Protobuf),
            other => Err(TokenError::UnknownFormat(other)),
        }
    }
}

/// Tokens and secret keys by alias.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Credentials {
    pub tokens: Vec<(String, Token)>,
    pub secrets: Vec<(String, Vec<u8>)>,
}

/// Prints aliases and tokens (without passwords) and the secrets' sizes, never their bytes.
impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        struct Secrets<'a>(&'a [(String, Vec<u8>)]);
        impl fmt::Debug for Secrets<'_> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.debug_map()
                    .entries(
                        self.0
                            .iter()
                            .map(|(a, s)| (a, format!("{} bytes", s.len()))),
                    )
                    .finish()
            }
        }
        f.debug_struct("Credentials")
            .field("tokens", &self.tokens)
            .field("secrets", &Secrets(&self.secrets))
            .finish()
    }
}

fn put<V>(list: &mut Vec<(String, V)>, alias: String, value: V) {
    match list.iter_mut().find(|(a, _)| *a == alias) {
        Some(slot) => slot.1 = value,
        None => list.push((alias, value)),
    }
}

fn check_count(what: &'static str, count: i64, max: usize) -> Result<usize, TokenError> {
    if count < 0 || count as u64 > max as u64 {
        return Err(TokenError::TooMany { what, count, max });
    }
    Ok(count as usize)
}

impl Credentials {
    pub fn new() -> Credentials {
        Credentials::default()
    }

    /// Reads a Credentials file in either format, with [`Limits::DEFAULT`].
    pub fn read(bytes: &[u8]) -> Result<Credentials, TokenError> {
        Credentials::read_with(bytes, &Limits::DEFAULT)
    }

    /// Reads a Credentials file in either format.
    pub fn read_with(bytes: &[u8], limits: &Limits) -> Result<Credentials, TokenError> {
        Ok(Credentials::read_format(bytes, limits)?.0)
    }

    /// Reads a Credentials file and says which format it was in.
    pub fn read_format(bytes: &[u8], limits: &Limits) -> Result<(Credentials, Format), TokenError> {
        if bytes.len() > limits.max_file {
            return Err(TokenError::TooLong {
                what: "Credentials file",
                len: bytes.len() as u64,
                max: limits.max_file,
            });
        }
        let mut r = WritableReader::new(bytes);
        if r.read_bytes(4, "Credentials header")
            .map_err(|_| TokenError::BadMagic)?
            != MAGIC
        {
            return Err(TokenError::BadMagic);
        }
        let format = Format::from_byte(r.read_u8("Credentials format byte")?)?;
        let creds = match format {
            Format::Writable => Credentials::read_writable_body(&mut r, limits)?,
            Format::Protobuf => Credentials::read_proto_body(r.remaining(), limits)?,
        };
        Ok((creds, format))
    }

    /// Java's `Credentials.readFields`: the Writable body.
    pub fn read_writable_body(
        r: &mut WritableReader<'_>,
        limits: &Limits,
    ) -> Result<Credentials, TokenError> {
        let mut c = Credentials::new();
        let n = r.read_vint("Credentials token count")?;
        let n = check_count("Credentials tokens", n.into(), limits.max_tokens)?;
        for _ in 0..n {
            let alias = r.read_text("token alias", limits.max_text)?.to_string();
            let token = Token::read_writable(r, limits)?;
            put(&mut c.tokens, alias, token);
        }
        let n = r.read_vint("Credentials secret count")?;
        let n = check_count("Credentials secrets", n.into(), limits.max_secrets)?;
        for _ in 0..n {
            let alias = r.read_text("secret alias", limits.max_text)?.to_string();
            let secret = r.read_vint_bytes("secret key", limits.max_bytes)?.to_vec();
            put(&mut c.secrets, alias, secret);
        }
        Ok(c)
    }

    /// Java's `Credentials.readProto`: a varint-delimited `CredentialsProto` at the start of
    /// `bytes`.
    pub fn read_proto_body(bytes: &[u8], limits: &Limits) -> Result<Credentials, TokenError> {
        const WHAT: &str = "CredentialsProto";
        let mut r = crate::reader::Reader::new(bytes);
        let len = r.read_varint().map_err(TokenError::proto(WHAT))?;
        if len > limits.max_file as u64 {
            return Err(TokenError::TooLong {
                what: WHAT,
                len,
                max: limits.max_file,
            });
        }
        let body = r
            .remaining()
            .get(..len as usize)
            .ok_or(TokenError::Truncated { what: WHAT })?;
        crate::view::schema::validate(
            &crate::pb::schema::hadoop::common::CredentialsProto,
            body,
            0,
        )
        .map_err(TokenError::proto(WHAT))?;
        let p = CredentialsProto::decode(body).map_err(TokenError::prost(WHAT))?;
        check_count(
            "Credentials tokens",
            p.tokens.len() as i64,
            limits.max_tokens,
        )?;
        check_count(
            "Credentials secrets",
            p.secrets.len() as i64,
            limits.max_secrets,
        )?;
        let text = |what, s: &String| {
            if s.len() > limits.max_text {
                Err(TokenError::TooLong {
                    what,
                    len: s.len() as u64,
                    max: limits.max_text,
                })
            } else {
                Ok(())
            }
        };
        let mut c = Credentials::new();
        for kv in p.tokens {
            text("token alias", &kv.alias)?;
            // Java's `kv.getToken()` is the empty default token when the field is absent.
            let token = Token::from_proto(kv.token.unwrap_or_default(), limits)?;
            put(&mut c.tokens, kv.alias, token);
        }
        for kv in p.secrets {
            text("secret alias", &kv.alias)?;
            let secret = kv.secret.unwrap_or_default();
            if secret.len() > limits.max_bytes {
                return Err(TokenError::TooLong {
                    what: "secret key",
                    len: secret.len() as u64,
                    max: limits.max_bytes,
                });
            }
            put(&mut c.secrets, kv.alias, secret);
        }
        Ok(c)
    }

    /// Writes a Credentials file (`writeTokenStorageToStream(os, format)`).
    pub fn write(&self, format: Format) -> Vec<u8> {
        let mut out = Vec::with_capacity(64);
        out.extend_from_slice(MAGIC);
        out.push(format.byte());
        match format {
            Format::Writable => self.write_writable_body(&mut out),
            Format::Protobuf => {
                out.extend_from_slice(&self.to_proto().encode_length_delimited_to_vec())
            }
        }
        out
    }

    /// Java's `Credentials.write`: the Writable body.
    pub fn write_writable_body(&self, out: &mut Vec<u8>) {
        writable::write_vint(out, self.tokens.len() as i32);
        for (alias, token) in &self.tokens {
            writable::write_text(out, alias);
            token.write_writable(out);
        }
        writable::write_vint(out, self.secrets.len() as i32);
        for (alias, secret) in &self.secrets {
            writable::write_text(out, alias);
            writable::write_vint_bytes(out, secret);
        }
    }

    /// The `CredentialsProto` Java's `writeProto` builds.
    pub fn to_proto(&self) -> CredentialsProto {
        CredentialsProto {
            tokens: self
                .tokens
                .iter()
                .map(|(alias, t)| CredentialsKvProto {
                    alias: alias.clone(),
                    token: Some(t.to_proto()),
                    secret: None,
                })
                .collect(),
            secrets: self
                .secrets
                .iter()
                .map(|(alias, s)| CredentialsKvProto {
                    alias: alias.clone(),
                    token: None,
                    secret: Some(s.clone()),
                })
                .collect(),
        }
    }

    /// `addToken`: adds or replaces the token under `alias`.
    pub fn add_token(&mut self, alias: impl Into<String>, token: Token) {
        put(&mut self.tokens, alias.into(), token);
    }

    /// `addSecretKey`: adds or replaces the secret under `alias`.
    pub fn add_secret(&mut self, alias: impl Into<String>, secret: impl Into<Vec<u8>>) {
        put(&mut self.secrets, alias.into(), secret.into());
    }

    /// `getToken(alias)`.
    pub fn token(&self, alias: &str) -> Option<&Token> {
        self.tokens.iter().find(|(a, _)| a == alias).map(|(_, t)| t)
    }

    /// `getSecretKey(alias)`.
    pub fn secret(&self, alias: &str) -> Option<&[u8]> {
        self.secrets
            .iter()
            .find(|(a, _)| a == alias)
            .map(|(_, s)| s.as_slice())
    }

    /// The first token of this kind for this service (what Hadoop's token selectors pick).
    pub fn find(&self, kind: &str, service: &str) -> Option<&Token> {
        self.tokens
            .iter()
            .map(|(_, t)| t)
            .find(|t| t.kind == kind && t.service == service)
    }

    /// Every token of this kind.
    pub fn tokens_of_kind<'a>(&'a self, kind: &'a str) -> impl Iterator<Item = &'a Token> + 'a {
        self.tokens
            .iter()
            .map(|(_, t)| t)
            .filter(move |t| t.kind == kind)
    }
}
