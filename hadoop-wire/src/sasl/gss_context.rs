//! What both sides of a GSS-API security context share once it is established, sans-IO: the
//! per-message calls ([`EstablishedContext`]: `gss_wrap`, `gss_unwrap`, the authenticated
//! initiator), the RFC 4752 §3.1 security-layer message both sides wrap (`[mask, maxbuf24]`),
//! and the [`SecurityLayer`] a complete GSSAPI mechanism hands over for `auth-int` /
//! `auth-conf`, with its privacy rule (a token that is not sealed is refused at `auth-conf`).
//!
//! The handshakes stay apart: [`GssContext`](super::gssapi::GssContext) adds
//! `gss_init_sec_context` (client), [`GssAcceptor`](super::gssapi_server::GssAcceptor)
//! `gss_accept_sec_context` (server). `ipc` implements both on MIT krb5, where the per-message
//! tokens are our RFC 4121 layer ([`super::krb5_cfx`]: sequence numbers, replay and order
//! checks) or MIT's.

use std::fmt;

use super::{Qop, SaslError, SecurityLayer};

/// The receive buffer a client announces when a layer wraps (the JDK's default), and the one
/// assumed of a peer that announced none.
pub const CLIENT_MAX_RECEIVE: u32 = 65536;

/// What one Kerberos wrap token adds to its plaintext at most (RFC 4121 with AES: 16-byte header,
/// 16-byte confounder, encrypted header copy, 12-byte checksum; older enctypes less), with room
/// to spare. The plaintext of one WRAP is kept that far under the peer's receive buffer.
pub const WRAP_OVERHEAD: usize = 128;

/// A GSS-API security context of either side, for one connection: what is used of it once it
/// is established.
pub trait EstablishedContext: Send {
    /// Whether the context is established (no more handshake steps needed).
    fn is_established(&self) -> bool;
    /// The authenticated initiator, `user@REALM` or `svc/host@REALM`, once established.
    fn initiator(&self) -> Result<String, SaslError>;
    /// Appends `gss_wrap(conf_req = confidential, qop 0)` of `plain` to `out`.
    fn wrap(
        &mut self,
        confidential: bool,
        plain: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<(), SaslError>;
    /// Appends `gss_unwrap(token)` to `out` and returns its `conf_state` (whether the token
    /// was sealed); a bad token is an error, never silently empty.
    fn unwrap(&mut self, token: &[u8], out: &mut Vec<u8>) -> Result<bool, SaslError>;
}

/// RFC 4752 §3.1: the security-layer message, `[mask, maxbuf24]` (the server's offer: the
/// layers it offers; the client's choice: the one it takes), before the client's optional
/// authorization id.
pub(crate) fn layer_message(mask: u8, max_receive: u32) -> [u8; 4] {
    let mb = max_receive.to_be_bytes();
    [mask, mb[1], mb[2], mb[3]]
}

/// The mask and receive buffer of a security-layer message (its first four bytes).
pub(crate) fn read_layer_message(plain: &[u8; 4]) -> (u8, u32) {
    (
        plain[0],
        u32::from_be_bytes([0, plain[1], plain[2], plain[3]]),
    )
}

/// A GSSAPI mechanism's context and what its negotiation settled (the layer, the peer's
/// receive buffer, the authenticated client), until the context is handed over as the
/// [`SecurityLayer`]. Both mechanisms keep one.
pub(crate) struct Negotiated<C: ?Sized> {
    ctx: Option<Box<C>>,
    pub(crate) qop: Option<Qop>,
    /// The peer's announced receive buffer (0: none).
    peer_max: u32,
    /// The authenticated client principal, once complete.
    pub(crate) client: Option<String>,
}

/// Prints what was settled, never the context.
impl<C: ?Sized> fmt::Debug for Negotiated<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Negotiated")
            .field("qop", &self.qop)
            .field("peer_max", &self.peer_max)
            .field("client", &self.client)
            .finish_non_exhaustive()
    }
}

impl<C: EstablishedContext + ?Sized + 'static> Negotiated<C> {
    pub(crate) fn new(ctx: Box<C>) -> Self {
        Negotiated {
            ctx: Some(ctx),
            qop: None,
            peer_max: 0,
            client: None,
        }
    }

    /// The context, until it is handed over.
    pub(crate) fn ctx(&mut self) -> Result<&mut C, SaslError> {
        self.ctx
            .as_deref_mut()
            .ok_or_else(|| SaslError::Sasl("GSSAPI: security context already handed over".into()))
    }

    /// The negotiation's outcome: the layer, the peer's receive buffer, the client.
    pub(crate) fn complete(&mut self, qop: Qop, peer_max: u32, client: String) {
        self.qop = Some(qop);
        self.peer_max = peer_max;
        self.client = Some(client);
    }

    /// The layer a complete mechanism hands over: `None` for `auth` (or when the context was
    /// handed over already). A peer that announced no receive buffer is taken to have
    /// [`CLIENT_MAX_RECEIVE`].
    pub(crate) fn take_layer(&mut self) -> Option<Box<dyn SecurityLayer>> {
        let qop = self.qop.filter(|q| q.wraps())?;
        let ctx = self.ctx.take()?;
        let peer_max = if self.peer_max == 0 {
            CLIENT_MAX_RECEIVE
        } else {
            self.peer_max
        };
        Some(Box::new(GssLayer {
            ctx,
            qop,
            max_input: (peer_max as usize).saturating_sub(WRAP_OVERHEAD).max(1),
        }))
    }
}

/// `auth-int` / `auth-conf` over an established context, of either side.
struct GssLayer<C: ?Sized> {
    ctx: Box<C>,
    qop: Qop,
    max_input: usize,
}

impl<C: EstablishedContext + ?Sized> SecurityLayer for GssLayer<C> {
    fn qop(&self) -> Qop {
        self.qop
    }

    fn max_wrap_input(&self) -> usize {
        self.max_input
    }

    fn wrap(&mut self, plain: &[u8], out: &mut Vec<u8>) -> Result<(), SaslError> {
        if plain.is_empty() {
            return Ok(());
        }
        self.ctx.wrap(self.qop == Qop::AuthConf, plain, out)
    }

    fn unwrap(&mut self, token: &[u8], out: &mut Vec<u8>) -> Result<(), SaslError> {
        let before = out.len();
        let sealed = self.ctx.unwrap(token, out)?;
        require_sealed(self.qop, sealed).inspect_err(|_| out.truncate(before))
    }
}

/// At `auth-conf` every token after the negotiation must be sealed: one that is only
/// integrity-protected is refused (the JDK's `GssKrb5Base.unwrap` refuses it too), so a peer
/// cannot fall back to sending in the clear what was negotiated as private.
pub(crate) fn require_sealed(qop: Qop, sealed: bool) -> Result<(), SaslError> {
    if qop == Qop::AuthConf && !sealed {
        return Err(SaslError::Integrity(
            "GSSAPI: a token without confidentiality on a connection that negotiated privacy \
             (auth-conf)"
                .into(),
        ));
    }
    Ok(())
}
