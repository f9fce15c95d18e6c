//! HDFS delegation tokens on the client side: the `ClientNamenodeProtocol` messages of
//! `getDelegationToken` / `renewDelegationToken` / `cancelDelegationToken`, the token service a
//! NameNode's token carries, and the Credentials files a client takes its tokens from.
//!
//! - Messages (`hadoop.common`, Security.proto; field numbers from Hadoop 3.5.0's
//!   `SecurityProtos` descriptor): `GetDelegationTokenRequestProto{required string renewer = 1}`
//!   → `GetDelegationTokenResponseProto{optional TokenProto token = 1}` (absent when the
//!   NameNode runs no secret manager, i.e. security is off);
//!   `RenewDelegationTokenRequestProto{required TokenProto token = 1}` →
//!   `RenewDelegationTokenResponseProto{required uint64 newExpiryTime = 1}`;
//!   `CancelDelegationTokenRequestProto{required TokenProto token = 1}` → an empty message.
//! - **Service**: Java's `SecurityUtil.buildTokenService` with
//!   `hadoop.security.token.service.use_ip` (the default): `ip:port` of the NameNode; for an HA
//!   nameservice `ha-hdfs:<nameservice>` (`HAUtilClient.buildTokenServiceForLogicalUri`). A
//!   connection to a NameNode uses the first `HDFS_DELEGATION_TOKEN` for its `ip:port`, else the
//!   first for the nameservice.
//! - **Files**: as Java's `UserGroupInformation` login, the tokens of the Credentials files at
//!   `HADOOP_TOKEN_FILE_LOCATION` and in `hadoop.token.files` (comma-separated), read with the
//!   caps of [`Limits::DEFAULT`]; a later file's alias replaces an earlier one's.
//!
//! The NameNode issues and renews tokens only over a Kerberos-authenticated connection ("Delegation
//! Token can be issued only with kerberos or web authentication"); a connection authenticated by
//! a token can still cancel it. Renewing needs the caller's short name to be the token's renewer.

use std::net::SocketAddr;
use std::ops::Range;
use std::path::Path;

use hadoop_wire::reader::{Reader, WireType};
use hadoop_wire::sasl::client::TokenCredential;
use hadoop_wire::token::{Credentials, Limits, Token, TokenError, KIND_HDFS_DELEGATION};
use hadoop_wire::writer::{Sink, Writer};

use crate::error::Error;

/// The environment variable naming the process's Credentials file.
pub const TOKEN_FILE_ENV: &str = "HADOOP_TOKEN_FILE_LOCATION";
/// The configuration key listing more Credentials files.
pub const TOKEN_FILES_KEY: &str = "hadoop.token.files";
/// Prefix of an HA nameservice's token service (`HdfsConstants.HA_DT_SERVICE_PREFIX`).
pub const HA_DT_SERVICE_PREFIX: &str = "ha-hdfs:";

/// `GetDelegationTokenRequestProto{renewer}`.
pub fn encode_get_delegation_token(renewer: &str, out: &mut Vec<u8>) {
    Writer::new(out).string(1, renewer);
}

/// `RenewDelegationTokenRequestProto{token}` and `CancelDelegationTokenRequestProto{token}`
/// (the same shape).
pub fn encode_token_request(token: &Token, out: &mut Vec<u8>) {
    Writer::new(out).bytes(1, &token.encode_proto());
}

fn bad(what: &'static str) -> impl Fn(hadoop_wire::reader::DecodeError) -> Error {
    move |e| Error::Decode { what, source: e }
}

/// `GetDelegationTokenResponseProto`: its token, if the NameNode sent one (as the NameNode
/// sent it: its service is empty until the client sets one).
pub fn decode_get_delegation_token(msg: &[u8]) -> Result<Option<Token>, Error> {
    const WHAT: &str = "GetDelegationTokenResponseProto";
    let mut r = Reader::new(msg);
    let mut found: Option<Range<usize>> = None;
    while !r.is_empty() {
        match r.read_tag().map_err(bad(WHAT))? {
            (1, WireType::Len) => {
                let b = r.read_len().map_err(bad(WHAT))?;
                let start = b.as_ptr() as usize - msg.as_ptr() as usize;
                found = Some(start..start + b.len());
            }
            (1, _) => {
                return Err(Error::Malformed {
                    what: WHAT,
                    reason: "token: wrong wire type",
                })
            }
            (f, wt) => r.skip(f, wt, 0).map_err(bad(WHAT))?,
        }
    }
    match found {
        None => Ok(None),
        Some(range) => Token::decode_proto(&msg[range], &Limits::DEFAULT)
            .map(Some)
            .map_err(|source| Error::Token {
                context: WHAT.into(),
                source,
            }),
    }
}

/// `RenewDelegationTokenResponseProto.newExpiryTime` (ms since the epoch).
pub fn decode_renew_delegation_token(msg: &[u8]) -> Result<i64, Error> {
    const WHAT: &str = "RenewDelegationTokenResponseProto";
    let mut r = Reader::new(msg);
    let mut out = None;
    while !r.is_empty() {
        match r.read_tag().map_err(bad(WHAT))? {
            (1, WireType::Varint) => out = Some(r.read_varint().map_err(bad(WHAT))? as i64),
            (1, _) => {
                return Err(Error::Malformed {
                    what: WHAT,
                    reason: "newExpiryTime: wrong wire type",
                })
            }
            (f, wt) => r.skip(f, wt, 0).map_err(bad(WHAT))?,
        }
    }
    out.ok_or(Error::Malformed {
        what: WHAT,
        reason: "no newExpiryTime",
    })
}

/// The token service of one NameNode: `ip:port` (`SecurityUtil.buildTokenService`).
pub fn token_service(addr: SocketAddr) -> String {
    addr.to_string()
}

/// The token service of an HA nameservice: `ha-hdfs:<nameservice>`.
pub fn logical_token_service(nameservice: &str) -> String {
    format!("{HA_DT_SERVICE_PREFIX}{nameservice}")
}

/// The `HDFS_DELEGATION_TOKEN` a connection to the NameNode at `addr` authenticates with: the
/// first for `ip:port`, else the first for `logical` (`ha-hdfs:<ns>`, when the NameNode belongs
/// to a nameservice).
pub fn select_delegation_token<'a>(
    creds: &'a Credentials,
    addr: SocketAddr,
    logical: Option<&str>,
) -> Option<&'a Token> {
    creds
        .find(KIND_HDFS_DELEGATION, &token_service(addr))
        .or_else(|| logical.and_then(|l| creds.find(KIND_HDFS_DELEGATION, l)))
}

/// A token as Java's `formatTokenId` prints it, `(token for client: HDFS_DELEGATION_TOKEN
/// owner=…, renewer=…, …, sequenceNumber=…, masterKeyId=…)`, for an HDFS delegation token
/// whose identifier parses; else `(<kind> token for <service>)`.
pub fn describe(token: &Token) -> String {
    use hadoop_wire::token::{DelegationTokenIdentifier, TokenIdentifier as _};
    match DelegationTokenIdentifier::parse(&token.identifier) {
        Ok(id) if token.kind == KIND_HDFS_DELEGATION => {
            hadoop_wire::token::delegation::format_token_id(&id)
        }
        _ => format!("({} token for {})", token.kind, token.service),
    }
}

/// A token's secret parts as the SASL layer presents them.
pub fn credential(token: &Token) -> TokenCredential {
    TokenCredential {
        identifier: token.identifier.clone(),
        password: token.password.clone(),
    }
}

/// Reads one Credentials file (either format), its size checked before it is read.
pub fn read_credentials_file(path: &Path) -> Result<Credentials, Error> {
    let context = || format!("token file {}", path.display());
    let max = Limits::DEFAULT.max_file as u64;
    let len = std::fs::metadata(path)
        .map_err(|e| Error::io(context(), e))?
        .len();
    if len > max {
        return Err(Error::Token {
            context: context(),
            source: TokenError::TooLong {
                what: "Credentials file",
                len,
                max: Limits::DEFAULT.max_file,
            },
        });
    }
    let bytes = std::fs::read(path).map_err(|e| Error::io(context(), e))?;
    Credentials::read(&bytes).map_err(|source| Error::Token {
        context: context(),
        source,
    })
}

/// Writes `creds` as a Credentials file Java reads (`writeTokenStorageFile`: format 0),
/// replacing the file; a new file is made readable by its owner only (it holds secrets).
pub fn write_credentials_file(path: &Path, creds: &Credentials) -> Result<(), Error> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .and_then(|mut f| f.write_all(&creds.write(hadoop_wire::token::Format::Writable)))
        .map_err(|e| Error::io(format!("writing token file {}", path.display()), e))
}

/// The tokens of the process's Credentials files: `HADOOP_TOKEN_FILE_LOCATION`, then each of
/// `hadoop.token.files`; `None` when neither names a file. A named file that cannot be read is
/// an error (Java's login fails the same way).
pub fn credentials_from_env(conf: &conf::Configuration) -> Result<Option<Credentials>, Error> {
    let mut files: Vec<String> = Vec::new();
    if let Some(f) = std::env::var_os(TOKEN_FILE_ENV) {
        if !f.is_empty() {
            files.push(f.to_string_lossy().into_owned());
        }
    }
    files.extend(conf.get_trimmed_strings(TOKEN_FILES_KEY)?);
    if files.is_empty() {
        return Ok(None);
    }
    let mut all = Credentials::new();
    for f in files {
        let c = read_credentials_file(Path::new(&f))?;
        for (alias, t) in c.tokens {
            all.add_token(alias, t);
        }
        for (alias, s) in c.secrets {
            all.add_secret(alias, s);
        }
    }
    Ok(Some(all))
}

#[cfg(test)]
mod tests {
    use super::*;
    use hadoop_wire::pb::hadoop::common::TokenProto;
    use prost::Message;

    fn token(service: &str) -> Token {
        Token::new(
            vec![0, 6, b'c', b'l', b'i', b'e', b'n', b't'],
            vec![7; 20],
            KIND_HDFS_DELEGATION,
            service,
        )
    }

    #[test]
    fn requests_as_java_builds_them() {
        // GetDelegationTokenRequestProto{renewer = 1 (string)}
        let mut b = Vec::new();
        encode_get_delegation_token("yarn", &mut b);
        assert_eq!(b, [0x0a, 4, b'y', b'a', b'r', b'n']);
        b.clear();
        encode_get_delegation_token("", &mut b);
        assert_eq!(b, [0x0a, 0], "required: present even when empty");
        // {token = 1 (TokenProto)}
        b.clear();
        let t = token("127.0.0.1:8020");
        encode_token_request(&t, &mut b);
        let inner = t.to_proto().encode_to_vec();
        assert_eq!(b[0], 0x0a);
        assert_eq!(b[1] as usize, inner.len());
        assert_eq!(&b[2..], &inner[..]);
        assert_eq!(TokenProto::decode(&b[2..]).unwrap(), t.to_proto());
    }

    #[test]
    fn responses() {
        let t = token("");
        let mut msg = Vec::new();
        Writer::new(&mut msg).bytes(1, &t.encode_proto());
        assert_eq!(decode_get_delegation_token(&msg).unwrap(), Some(t));
        assert_eq!(decode_get_delegation_token(&[]).unwrap(), None);
        // a TokenProto without its required fields is refused
        assert!(decode_get_delegation_token(&[0x0a, 2, 0x0a, 0]).is_err());
        // token with a varint wire type
        assert!(decode_get_delegation_token(&[0x08, 1]).is_err());
        assert!(
            decode_get_delegation_token(&[0x0a, 9, 1]).is_err(),
            "truncated"
        );

        let mut msg = Vec::new();
        Writer::new(&mut msg).uint(1, 1_733_400_000_000);
        assert_eq!(
            decode_renew_delegation_token(&msg).unwrap(),
            1_733_400_000_000
        );
        assert!(decode_renew_delegation_token(&[]).is_err(), "required");
        assert!(decode_renew_delegation_token(&[0x0a, 0]).is_err());
    }

    #[test]
    fn descriptions() {
        let id = hadoop_wire::token::DelegationTokenIdentifier::new(
            "client@EXAMPLE.COM",
            "yarn",
            "",
            1,
            2,
            7,
            3,
        );
        let t = Token::for_identifier(&id, b"pw", "127.0.0.1:8020");
        assert_eq!(
            describe(&t),
            "(token for client: HDFS_DELEGATION_TOKEN owner=client@EXAMPLE.COM, renewer=yarn, \
             realUser=, issueDate=1, maxDate=2, sequenceNumber=7, masterKeyId=3)"
        );
        assert_eq!(
            describe(&token("127.0.0.1:1")),
            "(HDFS_DELEGATION_TOKEN token for 127.0.0.1:1)",
            "an identifier that does not parse"
        );
    }

    #[test]
    fn selection_by_kind_and_service() {
        let nn: SocketAddr = "127.0.0.1:8020".parse().unwrap();
        let mut c = Credentials::new();
        let mut other_kind = token("127.0.0.1:8020");
        other_kind.kind = "YARN_AM_RM_TOKEN".into();
        c.add_token("amrm", other_kind);
        c.add_token("other-nn", token("127.0.0.1:9000"));
        assert_eq!(select_delegation_token(&c, nn, None), None);
        c.add_token("ha", token("ha-hdfs:ns1"));
        assert_eq!(select_delegation_token(&c, nn, None), None);
        assert_eq!(
            select_delegation_token(&c, nn, Some(&logical_token_service("ns1")))
                .map(|t| t.service.as_str()),
            Some("ha-hdfs:ns1")
        );
        c.add_token("nn", token("127.0.0.1:8020"));
        assert_eq!(
            select_delegation_token(&c, nn, Some("ha-hdfs:ns1")).map(|t| t.service.as_str()),
            Some("127.0.0.1:8020"),
            "the NameNode's own address first"
        );
    }

    #[test]
    fn files_from_env_and_conf() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        let mut ca = Credentials::new();
        ca.add_token("x", token("127.0.0.1:1"));
        write_credentials_file(&a, &ca).unwrap();
        let mut cb = Credentials::new();
        cb.add_token("x", token("127.0.0.1:2"));
        cb.add_token("y", token("127.0.0.1:3"));
        std::fs::write(&b, cb.write(hadoop_wire::token::Format::Protobuf)).unwrap();
        assert_eq!(read_credentials_file(&a).unwrap(), ca);
        let mut conf = conf::Configuration::new();
        // (the environment variable is left alone: tests in this binary share it)
        if std::env::var_os(TOKEN_FILE_ENV).is_none() {
            assert_eq!(credentials_from_env(&conf).unwrap(), None);
            conf.set(
                TOKEN_FILES_KEY,
                &format!("{}, {}", a.display(), b.display()),
            );
            let all = credentials_from_env(&conf).unwrap().unwrap();
            assert_eq!(all.token("x").unwrap().service, "127.0.0.1:2");
            assert_eq!(all.tokens.len(), 2);
            conf.set(
                TOKEN_FILES_KEY,
                &dir.path().join("nope").display().to_string(),
            );
            let e = credentials_from_env(&conf).unwrap_err().to_string();
            assert!(e.contains("nope"), "{e}");
        }
        std::fs::write(&a, b"HDTS\x07").unwrap();
        let e = read_credentials_file(&a).unwrap_err().to_string();
        assert!(e.contains(&a.display().to_string()), "{e}");
    }
}
