//! SASL settings from Hadoop's configuration, the way Java reads them.
//!
//! - `hadoop.security.authentication` (`simple` | `kerberos` | `token`): a client is secure
//!   unless it is `simple`; a server offers this method, after TOKEN when it has token secrets.
//! - `hadoop.rpc.protection` (`authentication`, `integrity`, `privacy`, a comma list): what a
//!   server accepts; a client's preference order.
//! - `hadoop.security.sasl.mechanism` (`DIGEST-MD5`) and
//!   `ipc.client.fallback-to-simple-auth-allowed` (false).
//!
//! The negotiation itself is `hadoop_wire::sasl`; this module turns keys into its types,
//! picks a client's token out of a Credentials file the way Java's token selectors do
//! (kind, and service `ip:port` of the server), and holds what every client connection that
//! negotiates SASL over a socket needs, whoever reads its responses ([`crate::client`]'s reader
//! thread, or a caller reading its own, as `hdfs-io`'s direct NameNode calls do):
//! [`negotiate`] (the preamble and the exchange, bounded), [`context_user`] (whom the
//! connection context then names), and the security layer's framing after SUCCESS:
//! [`wrap_frames`] (outgoing bytes as WRAP packets of at most `max_wrap_input` plaintext
//! bytes) and [`Unwrapper`] (incoming WRAP packets back to plaintext, each packet's length
//! checked against a cap before anything is read or allocated for it).

use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::sync::Arc;

use conf::Configuration;
use hadoop_wire::pb::hadoop::common::rpc_response_header_proto::RpcStatusProto;
use hadoop_wire::rpc::client::{RemoteError, Responses};
use hadoop_wire::sasl::client::{
    ClientAuth, ClientNegotiation, ClientOutcome, ClientStep, TokenCredential,
};
use hadoop_wire::sasl::message::{
    self as sasl_message, AuthMethod, SaslMessageView, DEFAULT_TOKEN_MECHANISM,
};
use hadoop_wire::sasl::server::{ServerAuth, TokenSecrets};
use hadoop_wire::sasl::{parse_protection, Qop, SaslError, SecurityLayer};

use crate::entropy::OsEntropy;
use hadoop_wire::token::credentials::Credentials;

fn get<'a>(conf: &'a Configuration, key: &str, default: &'a str) -> &'a str {
    conf.get(key).unwrap_or(default)
}

fn method(conf: &Configuration) -> Result<AuthMethod, SaslError> {
    let v = get(conf, "hadoop.security.authentication", "simple");
    AuthMethod::from_conf(v).ok_or_else(|| {
        SaslError::Config(format!(
            "hadoop.security.authentication: unknown method {v:?} (simple, kerberos, token)"
        ))
    })
}

/// `hadoop.rpc.protection`.
pub fn protection(conf: &Configuration) -> Result<Vec<Qop>, SaslError> {
    parse_protection(get(conf, "hadoop.rpc.protection", "authentication"))
}

/// A server's auth: the configured method, TOKEN first when `secrets` are given.
pub fn server_auth(
    conf: &Configuration,
    secrets: Option<Arc<dyn TokenSecrets>>,
) -> Result<ServerAuth, SaslError> {
    ServerAuth::new(method(conf)?, secrets, protection(conf)?)?.with_token_mechanism(get(
        conf,
        "hadoop.security.sasl.mechanism",
        DEFAULT_TOKEN_MECHANISM,
    ))
}

/// A daemon's server auth: as [`server_auth`], and when `hadoop.security.authentication` is
/// `kerberos`, KERBEROS with the daemon's identity (`principal_key`, e.g.
/// `yarn.resourcemanager.principal`, `_HOST` replaced by `host`; `keytab_key`, e.g.
/// `yarn.resourcemanager.keytab`) offered after TOKEN (when `secrets` are given). `host` is
/// asked only then (it may do a reverse lookup). A keytab without the principal fails here, so
/// the daemon does not start.
pub fn daemon_server_auth(
    conf: &Configuration,
    secrets: Option<Arc<dyn TokenSecrets>>,
    principal_key: &str,
    keytab_key: &str,
    host: impl FnOnce() -> String,
) -> Result<ServerAuth, SaslError> {
    if method(conf)? != AuthMethod::Kerberos {
        return server_auth(conf, secrets);
    }
    let k = crate::kerberos::kerberos_server(conf, principal_key, keytab_key, &host())?;
    ServerAuth::with_kerberos(k, secrets, protection(conf)?)?.with_token_mechanism(get(
        conf,
        "hadoop.security.sasl.mechanism",
        DEFAULT_TOKEN_MECHANISM,
    ))
}

/// A client's auth, holding `token` (if any) for the server it connects to.
pub fn client_auth(
    conf: &Configuration,
    token: Option<TokenCredential>,
) -> Result<ClientAuth, SaslError> {
    let fallback = match conf.get("ipc.client.fallback-to-simple-auth-allowed") {
        None => false,
        Some(v) => v.trim().parse::<bool>().map_err(|_| {
            SaslError::Config(format!(
                "ipc.client.fallback-to-simple-auth-allowed: not a boolean: {v:?}"
            ))
        })?,
    };
    Ok(ClientAuth {
        token,
        qops: protection(conf)?,
        token_mechanism: get(
            conf,
            "hadoop.security.sasl.mechanism",
            DEFAULT_TOKEN_MECHANISM,
        )
        .to_string(),
        security_enabled: method(conf)? != AuthMethod::Simple,
        fallback_to_simple_allowed: fallback,
        ..ClientAuth::default()
    })
}

/// The token of `kind` for the server at `addr` (service `ip:port`, Java's
/// `SecurityUtil.buildTokenService` with `hadoop.security.token.service.use_ip` true).
pub fn select_token(creds: &Credentials, kind: &str, addr: SocketAddr) -> Option<TokenCredential> {
    creds
        .find(kind, &addr.to_string())
        .map(|t| TokenCredential {
            identifier: t.identifier.clone(),
            password: t.password.clone(),
        })
}

/// Why [`negotiate`] failed.
#[derive(Debug, thiserror::Error)]
pub enum NegotiateError {
    /// The socket failed (a retry on a new connection may work).
    #[error("{0}")]
    Io(#[from] io::Error),
    /// SASL failed on this side (no usable method, fallback refused, a bad server reply, a
    /// Kerberos login or context that failed); `class` is the Java exception class.
    #[error("{class}: {message}")]
    Auth { class: String, message: String },
    /// The server sent bytes that are not a valid negotiation reply, or one over the cap.
    #[error("malformed SASL reply: {0}")]
    Protocol(String),
    /// The server refused (an ERROR or FATAL reply, e.g. an InvalidToken).
    #[error("{}: {}", .0.class, .0.message)]
    Remote(RemoteError),
}

/// Runs SASL on a fresh socket, as the client of Java's `SaslRpcClient` does: the SASL
/// preamble (service class 0) and NEGOTIATE in one write, then one reply at a time until the
/// negotiation says done. Replies are read with `responses` (their stateIds are folded in)
/// and each is refused over `sasl_message::max_negotiation_frame(auth.max_message)` bytes
/// before its body is read. The socket's read timeout bounds each wait (set it first).
///
/// After it, the caller sends the connection context (naming [`context_user`]), wrapped with
/// the outcome's security layer when there is one ([`wrap_frames`]), then its calls.
pub fn negotiate<S: Read + Write>(
    s: &mut S,
    auth: &ClientAuth,
    responses: &Responses,
) -> Result<ClientOutcome, NegotiateError> {
    let local = |e: SaslError| NegotiateError::Auth {
        class: e.java_class().to_string(),
        message: e.to_string(),
    };
    let encode_err =
        |e: hadoop_wire::error::EncodeError| io::Error::new(io::ErrorKind::InvalidInput, e);
    let protocol =
        |e: hadoop_wire::rpc::client::ResponseError| NegotiateError::Protocol(e.to_string());
    let mut neg = ClientNegotiation::new(auth.clone());
    let mut buf = Vec::with_capacity(64);
    hadoop_wire::encode::sasl_preamble(&mut buf, 0);
    sasl_message::client_frame(&mut buf, &neg.start()).map_err(encode_err)?;
    s.write_all(&buf)?;
    // Checked against the 4-byte length before the body is read: a server cannot make a
    // client that is still negotiating buffer more than this.
    let limit = sasl_message::max_negotiation_frame(auth.max_message) as usize;
    let mut body = Vec::new();
    loop {
        let mut len = [0u8; 4];
        s.read_exact(&mut len)?;
        let n = responses.frame_len(len).map_err(protocol)?;
        if n > limit {
            return Err(NegotiateError::Protocol(format!(
                "SASL reply of {n} bytes exceeds the limit of {limit}"
            )));
        }
        body.resize(n, 0);
        s.read_exact(&mut body)?;
        let reply = responses.reply(&body).map_err(protocol)?;
        let payload = match reply.result {
            Ok(p) => p,
            Err(remote) => return Err(NegotiateError::Remote(remote)),
        };
        let step = neg
            .on_reply(reply.call_id, payload, &mut OsEntropy)
            .map_err(local)?;
        let (msg, done) = match step {
            ClientStep::Done(o) => return Ok(o),
            ClientStep::Send(m) => (m, None),
            ClientStep::SendThenDone(m, o) => (m, Some(o)),
        };
        buf.clear();
        sasl_message::client_frame(&mut buf, &msg).map_err(encode_err)?;
        s.write_all(&buf)?;
        if let Some(o) = done {
            return Ok(o);
        }
    }
}

/// The connection context's effectiveUser after a negotiation, as Java's client names it:
/// none with TOKEN (the token says who), the whole authenticated principal with KERBEROS
/// (`ugi.getUserName()`; another name would be a proxy-user request), else `configured`.
pub fn context_user<'a>(outcome: &'a ClientOutcome, configured: &'a str) -> Option<&'a str> {
    match (outcome.method, &outcome.user) {
        (AuthMethod::Token, _) => None,
        (AuthMethod::Kerberos, Some(principal)) => Some(principal),
        _ => Some(configured),
    }
}

/// Appends `plain` to `out` as WRAP packets of at most `layer.max_wrap_input()` plaintext bytes
/// each (Java's client does the same through its buffered stream), wrapping with `token` as
/// scratch. Sequence numbers follow the order of the calls, so the caller wraps in the order
/// the bytes go on the wire.
pub fn wrap_frames(
    layer: &mut dyn SecurityLayer,
    plain: &[u8],
    token: &mut Vec<u8>,
    out: &mut Vec<u8>,
) -> io::Result<()> {
    let piece = layer.max_wrap_input().max(1);
    // Room to spare: frames that grow by a few bytes (longer callId and stateId varints) do not
    // make the reused buffers grow again.
    let packets = plain.len().div_ceil(piece).max(1);
    reserve_spare(out, out.len() + plain.len() + packets * WRAP_OVERHEAD);
    reserve_spare(token, piece.min(plain.len()) + WRAP_OVERHEAD);
    for part in plain.chunks(piece) {
        token.clear();
        layer
            .wrap(part, token)
            .map_err(|e| io::Error::other(format!("SASL wrap: {e}")))?;
        sasl_message::client_wrap_frame(out, token)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    }
    Ok(())
}

/// Bytes a WRAP packet adds to its plaintext, at most (the mechanism's MAC, padding and
/// header, the response header and SASL message around it), for sizing buffers only.
const WRAP_OVERHEAD: usize = 128;

/// Bytes of room a reused buffer gets past what it has to hold when it grows.
const SPARE: usize = 256;

/// Makes room for `want` bytes in `v`, and [`SPARE`] more, when it has less than `want`.
fn reserve_spare(v: &mut Vec<u8>, want: usize) {
    if v.capacity() < want {
        v.reserve_exact(want + SPARE - v.len());
    }
}

/// The receiving side of a security layer: reads the server's WRAP packets one at a time from a
/// socket and hands out their plaintext, as [`Read`] would. Its two buffers are reused: once
/// they have grown to the largest packet, reading allocates nothing (the layer's own unwrap
/// aside).
#[derive(Debug)]
pub struct Unwrapper {
    max_len: u32,
    packet: Vec<u8>,
    plain: Vec<u8>,
    pos: usize,
}

impl Unwrapper {
    /// Accepts WRAP packets of up to `max_len` bytes (`ipc.maximum.response.length`): a longer
    /// one is refused before its body is read.
    pub fn new(max_len: u32) -> Self {
        Self {
            max_len,
            packet: Vec::new(),
            plain: Vec::new(),
            pos: 0,
        }
    }

    /// Whether plaintext of an unwrapped packet is still waiting to be read.
    pub fn has_plain(&self) -> bool {
        self.pos < self.plain.len()
    }

    /// Copies plaintext into `dst`: what is left of the last packet, else the next packet's
    /// (read from `src` and unwrapped with `unwrap`, called once per packet, so a shared layer
    /// is locked only for the unwrap, never while waiting on the socket). `Ok(0)` on a clean
    /// end of the stream between packets. A packet over the cap, one that is not a WRAP, or
    /// one the layer refuses (tampered, replayed, out of order) is an `InvalidData` error:
    /// the connection cannot be used after it.
    pub fn read<R: Read>(
        &mut self,
        src: &mut R,
        dst: &mut [u8],
        mut unwrap: impl FnMut(&[u8], &mut Vec<u8>) -> Result<(), SaslError>,
    ) -> io::Result<usize> {
        while self.pos == self.plain.len() {
            let mut len = [0u8; 4];
            match src.read_exact(&mut len) {
                Ok(()) => {}
                // A clean end between packets is a clean end of the stream.
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(0),
                Err(e) => return Err(e),
            }
            let n = u32::from_be_bytes(len);
            if n > self.max_len || n > i32::MAX as u32 {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "WRAP packet of {n} bytes exceeds the limit of {}",
                        self.max_len
                    ),
                ));
            }
            reserve_spare(&mut self.packet, n as usize);
            self.packet.resize(n as usize, 0);
            src.read_exact(&mut self.packet)?;
            let token = wrapped_token(&self.packet).ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    "Server sent non-wrapped response",
                )
            })?;
            self.plain.clear();
            self.pos = 0;
            // the plaintext is shorter than its packet
            reserve_spare(&mut self.plain, n as usize);
            unwrap(token, &mut self.plain).map_err(|e| {
                io::Error::new(io::ErrorKind::InvalidData, format!("SASL unwrap: {e}"))
            })?;
        }
        let n = dst.len().min(self.plain.len() - self.pos);
        dst[..n].copy_from_slice(&self.plain[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

/// The token of a server WRAP packet (a response frame for callId −33 whose message is a
/// WRAP); `None` when `body` is anything else.
pub fn wrapped_token(body: &[u8]) -> Option<&[u8]> {
    let frame = hadoop_wire::frame::ResponseFrame::split(body).ok()?;
    let h = hadoop_wire::view::rpc::RpcResponseHeaderView::new(frame.header)
        .summary()
        .ok()?;
    if h.call_id_i32() != hadoop_wire::rpc::SASL_CALL_ID || h.status != RpcStatusProto::Success {
        return None;
    }
    let v = SaslMessageView::read(frame.payload?).ok()?;
    v.is_wrap().then_some(v.token.unwrap_or(&[]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use hadoop_wire::token::Token;

    #[test]
    fn keys_and_defaults() {
        let mut c = Configuration::new();
        let a = client_auth(&c, None).unwrap();
        assert_eq!(a.qops, [Qop::Auth]);
        assert!(!a.security_enabled && !a.fallback_to_simple_allowed && !a.uses_sasl());
        c.set("hadoop.rpc.protection", "privacy, integrity");
        c.set("hadoop.security.authentication", "Kerberos");
        c.set("ipc.client.fallback-to-simple-auth-allowed", "true");
        let a = client_auth(&c, None).unwrap();
        assert_eq!(a.qops, [Qop::AuthConf, Qop::AuthInt]);
        assert!(a.security_enabled && a.fallback_to_simple_allowed && a.uses_sasl());
        c.set("hadoop.rpc.protection", "secret");
        assert!(client_auth(&c, None).is_err());
        c.set("hadoop.rpc.protection", "integrity");
        c.set("hadoop.security.authentication", "token");
        assert!(server_auth(&c, None).is_err(), "TOKEN needs secrets");
        c.set("hadoop.security.authentication", "simple");
        let s = server_auth(&c, None).unwrap();
        assert_eq!(
            (s.methods(), s.qops()),
            (&[AuthMethod::Simple][..], &[Qop::AuthInt][..])
        );
        c.set("hadoop.security.sasl.mechanism", "SCRAM");
        assert!(server_auth(&c, None).is_err());
    }

    #[test]
    fn a_kerberos_daemon_needs_its_principal_and_keytab() {
        let mut c = Configuration::new();
        let (p, k) = (
            "yarn.resourcemanager.principal",
            "yarn.resourcemanager.keytab",
        );
        let s = daemon_server_auth(&c, None, p, k, || "localhost".into()).unwrap();
        assert_eq!(s.methods(), [AuthMethod::Simple], "simple unless kerberos");
        c.set("hadoop.security.authentication", "kerberos");
        let e = daemon_server_auth(&c, None, p, k, || "localhost".into()).unwrap_err();
        assert!(e.to_string().contains(p), "{e}");
        c.set(p, "rm@EXAMPLE.COM");
        c.set(k, "/nonexistent/rm.keytab");
        let e = daemon_server_auth(&c, None, p, k, || "localhost".into()).unwrap_err();
        assert!(e.to_string().contains("hostname part"), "{e}");
        c.set(p, "rm/_HOST@EXAMPLE.COM");
        let e = daemon_server_auth(&c, None, p, k, || "RM1".into()).unwrap_err();
        assert!(
            e.to_string().starts_with(
                "Kerberos login as rm/rm1@EXAMPLE.COM from keytab /nonexistent/rm.keytab failed"
            ),
            "{e}"
        );
        c.set("hadoop.security.auth_to_local", "RULE:[1:$1");
        let e = daemon_server_auth(&c, None, p, k, || "rm1".into()).unwrap_err();
        assert!(e.to_string().contains("auth_to_local"), "{e}");
    }

    #[test]
    fn the_token_for_a_server_is_chosen_by_kind_and_service() {
        let mut creds = Credentials::default();
        let t = |svc: &str, kind: &str, pw: u8| Token {
            identifier: vec![1, 2],
            password: vec![pw],
            kind: kind.into(),
            service: svc.into(),
        };
        creds.add_token("a", t("127.0.0.1:8041", "NMToken", 1));
        creds.add_token("b", t("127.0.0.1:8042", "NMToken", 2));
        creds.add_token("c", t("127.0.0.1:8042", "HDFS_DELEGATION_TOKEN", 3));
        let addr: SocketAddr = "127.0.0.1:8042".parse().unwrap();
        assert_eq!(select_token(&creds, "NMToken", addr).unwrap().password, [2]);
        assert!(select_token(&creds, "NMToken", "127.0.0.1:1".parse().unwrap()).is_none());
    }
}
