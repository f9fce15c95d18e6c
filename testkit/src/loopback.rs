//! Our [`Server`] (`ipc::server`) standing in for a Hadoop server on loopback,
//! one SASL TOKEN it accepts, the wait for its idle connections to be closed by the client,
//! and this process's TCP connections as `/proc` shows them.
//!
//! The helpers panic (with what went wrong) instead of returning errors: they are test
//! assertions.

use std::collections::HashSet;
use std::ops::Range;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hadoop_wire::sasl::client::TokenCredential;
use hadoop_wire::sasl::message::AuthMethod;
use hadoop_wire::sasl::server::{ServerAuth, TokenPassword, TokenSecrets};
use hadoop_wire::sasl::{Qop, SaslError};

use ipc::server::{Registry, Server, ServerConfig};

/// Token secrets knowing one token: identifier `id` with password `password`, standing for
/// `user`. Any other identifier is an invalid token.
#[derive(Debug, Clone, Copy)]
pub struct OneToken {
    pub id: &'static [u8],
    pub password: &'static [u8],
    pub user: &'static str,
}

impl TokenSecrets for OneToken {
    fn retrieve(&self, identifier: &[u8]) -> Result<TokenPassword, SaslError> {
        if identifier != self.id {
            return Err(SaslError::InvalidToken("unknown token".into()));
        }
        Ok(TokenPassword {
            password: self.password.to_vec(),
            user: self.user.into(),
        })
    }
}

impl OneToken {
    /// A server's auth accepting this token (SASL TOKEN, DIGEST-MD5) at `qop` only.
    pub fn server_auth(self, qop: Qop) -> ServerAuth {
        ServerAuth::new(AuthMethod::Token, Some(Arc::new(self)), vec![qop])
            .expect("a TOKEN server with secrets")
    }

    /// The token as a client holds it.
    pub fn credential(&self) -> TokenCredential {
        TokenCredential {
            identifier: self.id.to_vec(),
            password: self.password.to_vec(),
        }
    }
}

/// Starts `registry` on an ephemeral loopback port (`127.0.0.1:0`) with `auth` and the
/// defaults otherwise.
pub fn start_local(registry: Registry, auth: ServerAuth) -> Server {
    let config = ServerConfig {
        auth: Arc::new(auth),
        ..ServerConfig::default()
    };
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], 0));
    Server::start(addr, config, registry).expect("an ipc::server on 127.0.0.1:0")
}

/// Waits, making no call, until `open()` (the connections still open) is 0: the client closed
/// what it left idle (`ipc.client.connection.maxidletime`) after its last call at `last_call`.
/// Panics unless that comes within `window` after `last_call` (its start: not closed before
/// the connections were idle long enough; its end: the deadline). Returns when it came.
pub fn wait_idle_closed(
    what: &str,
    last_call: Instant,
    window: Range<Duration>,
    open: impl Fn() -> u64,
) -> Duration {
    loop {
        let n = open();
        let after = last_call.elapsed();
        if n == 0 {
            assert!(
                after >= window.start,
                "{what}: closed {after:?} after the last call, before {:?}",
                window.start
            );
            return after;
        }
        assert!(
            after < window.end,
            "{what}: {n} still open {after:?} after the last call (deadline {:?})",
            window.end
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A row of `/proc/self/net/tcp` or `tcp6`: this network namespace's TCP sockets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TcpRow {
    pub local_port: u16,
    pub remote_port: u16,
    /// The state in hex as the kernel writes it (`01`: ESTABLISHED).
    pub state: String,
    /// The socket's inode.
    pub inode: String,
}

/// The rows of `/proc/self/net/tcp` and `tcp6`.
pub fn tcp_rows() -> Vec<TcpRow> {
    let port = |a: &str| {
        a.rsplit(':')
            .next()
            .and_then(|p| u16::from_str_radix(p, 16).ok())
    };
    let rows = std::fs::read_to_string("/proc/self/net/tcp").expect("/proc/self/net/tcp")
        + &std::fs::read_to_string("/proc/self/net/tcp6").unwrap_or_default();
    rows.lines()
        .skip(1)
        .filter_map(|row| {
            let f: Vec<&str> = row.split_whitespace().collect();
            if f.len() <= 9 {
                return None;
            }
            Some(TcpRow {
                local_port: port(f[1])?,
                remote_port: port(f[2])?,
                state: f[3].to_string(),
                inode: f[9].to_string(),
            })
        })
        .collect()
}

/// The local ports of this process's ESTABLISHED TCP connections to `port` (rows whose
/// socket inode is one of this process's file descriptors).
pub fn my_ports_to(port: u16) -> Vec<u16> {
    let mine: HashSet<String> = std::fs::read_dir("/proc/self/fd")
        .expect("/proc/self/fd")
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter_map(|l| {
            let l = l.to_string_lossy().into_owned();
            Some(l.strip_prefix("socket:[")?.strip_suffix(']')?.to_string())
        })
        .collect();
    tcp_rows()
        .into_iter()
        .filter(|r| r.remote_port == port && r.state == "01" && mine.contains(&r.inode))
        .map(|r| r.local_port)
        .collect()
}
