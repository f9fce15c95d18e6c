//! Kerberos for IPC clients: GSS-API security contexts on MIT krb5 (through the `libgssapi`
//! crate) for `hadoop_wire::sasl::gssapi`, and the configuration that selects them.
//!
//! A client's credentials come from a keytab of its own ([`MitGss::from_keytab`]: the keys of
//! one principal, its tickets in an in-memory cache of that login's own, so clients of one
//! process may hold different identities), or MIT's process-wide environment decides
//! ([`MitGss::new`]):
//!
//! - `KRB5_CONFIG`: the krb5.conf (realm, KDC); read in both cases.
//! - `KRB5CCNAME`: the ticket cache, e.g. filled by `kinit -kt KEYTAB PRINCIPAL`.
//! - `KRB5_CLIENT_KTNAME`: a client keytab. When the cache holds no ticket for the principal,
//!   MIT krb5 gets one from the keytab itself (and stores it in the cache).
//!
//! The client principal is named explicitly ([`MitGss::new`], [`MitGss::from_keytab`]) or
//! taken from the cache (`None`). Both names, the client's and the server's, are imported as
//! Kerberos principal names (`GSS_KRB5_NT_PRINCIPAL_NAME`), so no DNS canonicalisation or realm
//! mapping of a host happens: the server principal is exactly the one the server advertised
//! and the client expected (see [`hadoop_wire::sasl::gssapi::check_server_principal`]).
//!
//! Threads: one [`MitGss`] serves every connection of a client, opened on any thread at once
//! (`hdfs-io`'s direct NameNode calls open one per calling thread). It holds only names and
//! paths; each connection acquires its own credential handle and builds its own GSS context
//! (MIT's GSS-API keeps no state shared between contexts beyond the ticket caches, FILE or
//! MEMORY, which lock themselves), and each context is used by one thread at a time (the
//! security layer it becomes sits behind a lock in [`crate::client`], and is its caller's alone
//! on a direct connection). `hdfs-io/tests/kerberos_direct_calls.rs` opens connections from
//! several threads at once: four with a kinit cache, eight with a keytab login.

use std::ffi::{CStr, CString};
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use conf::Configuration;
use hadoop_wire::sasl::gss_context::EstablishedContext;
use hadoop_wire::sasl::gssapi::{replace_host, GssContext, GssContextFactory, KerberosClient};
use hadoop_wire::sasl::gssapi_server::{GssAcceptor, GssAcceptorFactory, KerberosServer};
use hadoop_wire::sasl::kerberos_name::AuthToLocal;
use hadoop_wire::sasl::SaslError;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use hadoop_wire::entropy::Entropy;
use hadoop_wire::sasl::krb5_cfx::{CfxContext, CfxKey, CfxParams};

mod gss;
use gss::{Cred, GssFailure, NameHandle, Usage};

/// Contexts on MIT krb5 for one client principal (or the ticket cache's default one), with
/// its keys from the process-wide MIT environment or from a keytab of its own
/// ([`MitGss::from_keytab`]).
#[derive(Debug, Clone, Default)]
pub struct MitGss {
    client_principal: Option<String>,
    keytab: Option<ClientKeytab>,
    /// Our RFC 4121 layer (`Some(true)`), MIT's (`Some(false)`), or as [`OWN_WRAP_ENV`] says.
    own_wrap: Option<bool>,
}

/// A client login from an explicit keytab: the keytab and the in-memory ticket cache that
/// holds this login's tickets.
#[derive(Debug, Clone)]
struct ClientKeytab {
    path: PathBuf,
    path_c: CString,
    /// `MEMORY:hotpath:<principal>:<keytab>`: one per identity in the process, so logins
    /// with different keytabs never share tickets and a rebuilt client reuses its tickets.
    ccache: CString,
}

/// `KRB5_FCC_NOFILE` (`krb5.h`): what MIT answers when the ticket cache is empty and no key
/// for the principal is found in the client keytab.
const KRB5_FCC_NOFILE: i32 = -1_765_328_189;

impl MitGss {
    /// `client_principal`: `user@REALM` to log in as; `None` takes the ticket cache's principal.
    /// The keys come from MIT's environment (`KRB5CCNAME`, `KRB5_CLIENT_KTNAME`).
    pub fn new(client_principal: Option<String>) -> Self {
        Self {
            client_principal,
            keytab: None,
            own_wrap: None,
        }
    }

    /// Log in as `principal` (`user@REALM` or `svc/host@REALM`, `_HOST` already replaced) with
    /// its key from `keytab`, as Java's `UserGroupInformation.loginUserFromKeytab` does:
    /// `gss_acquire_cred_from` with the credential store `client_keytab` = `keytab` and `ccache`
    /// = an in-memory ticket cache of this identity's own. Neither `KRB5CCNAME` nor
    /// `KRB5_CLIENT_KTNAME` is read or changed, so clients of one process can hold different
    /// identities at once (`KRB5_CONFIG` still names krb5.conf).
    ///
    /// The first ticket is got here (an AS exchange with the KDC), so a missing or unreadable
    /// keytab, one without the principal, or a KDC that refuses fail now, naming the principal
    /// and the keytab. Every context acquires the credential again from the same ticket cache:
    /// MIT reuses the tickets in it and, once the ticket is half-way to its expiry, gets a new
    /// one from the keytab (Java's `reloginFromKeytab`).
    pub fn from_keytab(principal: &str, keytab: &Path) -> Result<Self, LoginError> {
        let fail = |reason: String| LoginError::Keytab {
            principal: principal.to_string(),
            keytab: keytab.to_path_buf(),
            reason,
        };
        if let Err(e) = std::fs::File::open(keytab) {
            return Err(fail(format!("cannot read the keytab: {e}")));
        }
        let path_c = CString::new(keytab.as_os_str().as_encoded_bytes())
            .map_err(|_| fail("the keytab path holds a NUL byte".into()))?;
        let ccache = CString::new(format!("MEMORY:hotpath:{principal}:{}", keytab.display()))
            .map_err(|_| fail("the principal holds a NUL byte".into()))?;
        let k = ClientKeytab {
            path: keytab.to_path_buf(),
            path_c,
            ccache,
        };
        acquire_keytab_cred(principal, &k)?;
        Ok(Self {
            client_principal: Some(principal.to_string()),
            keytab: Some(k),
            own_wrap: None,
        })
    }

    /// A client's login as configured: `principal` with its key from `keytab` when a keytab
    /// is named ([`MitGss::from_keytab`], which asks the KDC now), else MIT's environment as
    /// `principal` or the ticket cache's ([`MitGss::new`], nothing asked yet). A keytab without
    /// a principal is refused ([`LoginError::MissingPrincipal`]): a keytab may hold the keys of
    /// several principals, and which one to log in as is not guessed.
    pub fn login(principal: Option<String>, keytab: Option<&Path>) -> Result<Self, LoginError> {
        match (keytab, principal) {
            (Some(keytab), Some(principal)) => Self::from_keytab(&principal, keytab),
            (Some(keytab), None) => Err(LoginError::MissingPrincipal {
                keytab: keytab.to_path_buf(),
            }),
            (None, principal) => Ok(Self::new(principal)),
        }
    }

    /// Whether established contexts wrap and unwrap with our RFC 4121 layer (`true`, when the
    /// enctype is one it implements) or MIT's `gss_wrap` / `gss_unwrap` (`false`), whatever
    /// [`OWN_WRAP_ENV`] says.
    pub fn with_own_wrap(mut self, own: bool) -> Self {
        self.own_wrap = Some(own);
        self
    }

    /// The keytab this login reads its keys from (`None`: MIT's environment decides).
    pub fn keytab(&self) -> Option<&Path> {
        self.keytab.as_ref().map(|k| k.path.as_path())
    }

    /// The principal this login names (`None`: the ticket cache's).
    pub fn client_principal(&self) -> Option<&str> {
        self.client_principal.as_deref()
    }

    /// The initiator credential of a keytab login (see [`MitGss::from_keytab`]).
    fn keytab_cred(&self) -> Result<Cred, SaslError> {
        let (Some(k), Some(principal)) = (&self.keytab, &self.client_principal) else {
            return Err(SaslError::Config(
                "a Kerberos keytab login needs a keytab and a principal".into(),
            ));
        };
        acquire_keytab_cred(principal, k).map_err(|e| SaslError::Config(e.to_string()))
    }

    /// The initiator credential from MIT's environment.
    fn env_cred(&self) -> Result<Cred, SaslError> {
        let name = match &self.client_principal {
            Some(p) => Some(
                NameHandle::principal(p)
                    .map_err(|e| gss_err(&format!("client principal {p:?}"), e))?,
            ),
            None => None,
        };
        Cred::acquire(name.as_ref(), Usage::Initiate).map_err(|e| {
            SaslError::Sasl(format!(
                "Kerberos login as {} failed (KRB5CCNAME={}, KRB5_CLIENT_KTNAME={}, \
                 KRB5_CONFIG={}): {}",
                self.client_principal
                    .as_deref()
                    .unwrap_or("the ticket cache's principal"),
                env("KRB5CCNAME"),
                env("KRB5_CLIENT_KTNAME"),
                env("KRB5_CONFIG"),
                e.to_string().trim()
            ))
        })
    }
}

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| "(unset)".into())
}

fn gss_err(what: &str, e: impl std::fmt::Display) -> SaslError {
    SaslError::Sasl(format!("GSSAPI {what}: {}", e.to_string().trim()))
}

/// `principal`'s initiator credential from the keytab `k` into `k`'s in-memory ticket cache
/// (see [`MitGss::from_keytab`]).
fn acquire_keytab_cred(principal: &str, k: &ClientKeytab) -> Result<Cred, LoginError> {
    acquire_cred_from(
        principal,
        Usage::Initiate,
        &[
            (c"client_keytab", k.path_c.as_c_str()),
            (c"ccache", k.ccache.as_c_str()),
        ],
    )
    .map_err(|e| {
        let reason = if e.minor as i32 == KRB5_FCC_NOFILE {
            format!("the keytab holds no key for {principal} ({})", e.text)
        } else {
            e.text
        };
        LoginError::Keytab {
            principal: principal.to_string(),
            keytab: k.path.clone(),
            reason,
        }
    })
}

/// Why a client's Kerberos login ([`MitGss::login`], [`MitGss::from_keytab`]) failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LoginError {
    /// A keytab is named but no principal to log in as with it.
    #[error(
        "a Kerberos keytab ({}) is named but no principal to log in as with it",
        keytab.display()
    )]
    MissingPrincipal { keytab: PathBuf },
    /// The login as `principal` from `keytab` failed: `reason` says why (the keytab cannot be
    /// read or holds no key for the principal, the KDC refused, ...).
    #[error("Kerberos login as {principal} from keytab {} failed: {reason}", keytab.display())]
    Keytab {
        principal: String,
        keytab: PathBuf,
        reason: String,
    },
}

impl GssContextFactory for MitGss {
    fn client_context(&self, target: &str) -> Result<Box<dyn GssContext>, SaslError> {
        let cred = match &self.keytab {
            Some(_) => self.keytab_cred()?,
            None => self.env_cred()?,
        };
        let target_name = NameHandle::principal(target)
            .map_err(|e| gss_err(&format!("server principal {target:?}"), e))?;
        // The JDK's GSSAPI client's flags (`gss::INIT_FLAGS`): mutual authentication (Hadoop
        // sets server.authentication), confidentiality and integrity available, replay and
        // sequence detection, no delegation.
        // Named in a failure: an expired ticket in a cache nobody refreshes is the usual one.
        let login = match &self.keytab {
            Some(k) => format!(
                "{} from keytab {}",
                self.client_principal.as_deref().unwrap_or_default(),
                k.path.display()
            ),
            None => format!(
                "{} from the ticket cache KRB5CCNAME={}",
                self.client_principal
                    .as_deref()
                    .unwrap_or("the ticket cache's principal"),
                env("KRB5CCNAME")
            ),
        };
        Ok(Box::new(MitContext::new(
            self.own_wrap,
            format!("GSSAPI unwrap from {target}"),
            Initiating {
                cred,
                target_name,
                target: target.to_string(),
                login,
                started: false,
            },
        )))
    }
}

/// A GSS-API context on MIT krb5, of either side: `H` is the side's handshake state
/// ([`Initiating`], [`Accepting`]); what is done with the context once it is established is the
/// same for both ([`EstablishedContext`]).
struct MitContext<H> {
    ctx: gss::Context,
    own_wrap: bool,
    /// Who makes and checks the per-message tokens once the context is established.
    layer: Layer,
    /// What a failed unwrap is called (names the server on the client side).
    unwrap_what: String,
    handshake: H,
}

/// The client side's handshake: its credential and the server it is aimed at.
struct Initiating {
    cred: Cred,
    target_name: NameHandle,
    target: String,
    /// Whose credential, from where (for errors).
    login: String,
    started: bool,
}

/// The server side's handshake: its keytab credential.
struct Accepting {
    cred: Cred,
}

impl<H> MitContext<H> {
    /// `own_wrap`: the factory's choice, else [`OWN_WRAP_ENV`]'s.
    fn new(own_wrap: Option<bool>, unwrap_what: String, handshake: H) -> Self {
        MitContext {
            ctx: gss::Context::new(),
            own_wrap: own_wrap.unwrap_or_else(own_wrap_enabled),
            layer: Layer::Mit,
            unwrap_what,
            handshake,
        }
    }

    /// One handshake step; once it establishes the context, the per-message layer is chosen.
    fn step<E>(
        &mut self,
        side: &str,
        step: impl FnOnce(&mut gss::Context, &mut H) -> Result<Vec<u8>, E>,
    ) -> Result<Vec<u8>, E> {
        let was = self.ctx.is_established();
        let tok = step(&mut self.ctx, &mut self.handshake)?;
        if !was && self.ctx.is_established() {
            self.layer = Layer::for_context(&self.ctx, side, self.own_wrap);
        }
        Ok(tok)
    }
}

impl GssContext for MitContext<Initiating> {
    fn init_step(&mut self, input: &[u8]) -> Result<Vec<u8>, SaslError> {
        self.step("client", |ctx, h| {
            let input = if h.started { Some(input) } else { None };
            h.started = true;
            ctx.init_step(&h.cred, &h.target_name, input).map_err(|e| {
                SaslError::Sasl(format!(
                    "GSSAPI init_sec_context for {} as {}: {e}",
                    h.target, h.login,
                ))
            })
        })
    }
}

impl GssAcceptor for MitContext<Accepting> {
    fn accept_step(&mut self, input: &[u8]) -> Result<Vec<u8>, SaslError> {
        self.step("server", |ctx, h| {
            ctx.accept_step(&h.cred, input)
                .map_err(|e| SaslError::Sasl(format!("GSS initiate failed: {e}")))
        })
    }
}

impl<H: Send> EstablishedContext for MitContext<H> {
    fn is_established(&self) -> bool {
        self.ctx.is_established()
    }

    fn initiator(&self) -> Result<String, SaslError> {
        self.ctx
            .source_name()
            .map_err(|e| gss_err("inquire_context", e))
    }

    fn wrap(
        &mut self,
        confidential: bool,
        plain: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<(), SaslError> {
        self.layer
            .wrap(&mut self.ctx, confidential, plain, out)
            .map_err(|e| gss_err("wrap", e))
    }

    fn unwrap(&mut self, token: &[u8], out: &mut Vec<u8>) -> Result<bool, SaslError> {
        self.layer
            .unwrap(&mut self.ctx, token, out)
            .map_err(|e| SaslError::Integrity(format!("{}: {e}", self.unwrap_what)))
    }
}

// ---------------------------------------------------------------------------------------------
// The per-message layer: our RFC 4121 tokens (`hadoop_wire::sasl::krb5_cfx`) once the context is
// established, or MIT's `gss_wrap` / `gss_unwrap`.

/// `HOTPATH_GSS_OWN_WRAP`: `0`, `false`, `off` or `no` keeps MIT's `gss_wrap` / `gss_unwrap`
/// for every context (for A/B measurements); anything else, or unset, uses our own RFC 4121
/// layer whenever the context's enctype is one it implements.
pub const OWN_WRAP_ENV: &str = "HOTPATH_GSS_OWN_WRAP";

fn own_wrap_enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| {
        !matches!(
            std::env::var(OWN_WRAP_ENV)
                .unwrap_or_default()
                .trim()
                .to_ascii_lowercase()
                .as_str(),
            "0" | "false" | "off" | "no"
        )
    })
}

static OWN_WRAPS: AtomicU64 = AtomicU64::new(0);
static OWN_UNWRAPS: AtomicU64 = AtomicU64::new(0);
static MIT_WRAPS: AtomicU64 = AtomicU64::new(0);
static MIT_UNWRAPS: AtomicU64 = AtomicU64::new(0);

/// How many Kerberos wrap / unwrap calls of this process went through our RFC 4121 layer and
/// how many through MIT's (counted since the process started; the interop tests read it).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WrapStats {
    pub own_wraps: u64,
    pub own_unwraps: u64,
    pub mit_wraps: u64,
    pub mit_unwraps: u64,
}

/// This process's [`WrapStats`] so far.
pub fn wrap_stats() -> WrapStats {
    WrapStats {
        own_wraps: OWN_WRAPS.load(Ordering::Relaxed),
        own_unwraps: OWN_UNWRAPS.load(Ordering::Relaxed),
        mit_wraps: MIT_WRAPS.load(Ordering::Relaxed),
        mit_unwraps: MIT_UNWRAPS.load(Ordering::Relaxed),
    }
}

enum Layer {
    Mit,
    Own(Box<CfxContext>),
}

impl Layer {
    /// Our layer for the just-established `ctx` when it is enabled and the context's keys are
    /// ones it implements (RFC 4121 with aes128/aes256-cts-hmac-sha1-96 or
    /// aes128-cts-hmac-sha256-128 / aes256-cts-hmac-sha384-192); MIT's otherwise
    /// (logged once per process at debug, naming why).
    fn for_context(ctx: &gss::Context, side: &str, own_wrap: bool) -> Layer {
        if !own_wrap {
            return Layer::Mit;
        }
        match Self::own(ctx) {
            Ok((c, enctype, subkey)) => {
                tracing::debug!(
                    "Kerberos {side}: wrapping with our RFC 4121 layer (enctype {enctype}, \
                     acceptor subkey: {subkey})"
                );
                Layer::Own(Box::new(c))
            }
            Err(why) => {
                static ONCE: std::sync::Once = std::sync::Once::new();
                ONCE.call_once(|| {
                    tracing::debug!(
                        "Kerberos {side}: MIT's gss_wrap/gss_unwrap stay in use ({why})"
                    )
                });
                Layer::Mit
            }
        }
    }

    /// Our layer for `ctx`, its enctype and whether the acceptor asserted a subkey.
    fn own(ctx: &gss::Context) -> Result<(CfxContext, i32, bool), String> {
        let l = ctx.lucid()?;
        if l.protocol != 1 {
            return Err(format!(
                "RFC 1964 tokens (enctype {}), not RFC 4121",
                l.ctx_key.enctype
            ));
        }
        fn key(k: &gss::Key) -> CfxKey<'_> {
            CfxKey {
                enctype: k.enctype,
                key: &k.bytes,
            }
        }
        let params = CfxParams {
            initiator: l.initiator,
            ctx_key: key(&l.ctx_key),
            acceptor_subkey: l.acceptor_subkey.as_ref().map(key),
            send_seq: l.send_seq,
            recv_seq: l.recv_seq,
        };
        let mut seed = [0u8; 32];
        crate::entropy::OsEntropy
            .fill(&mut seed)
            .map_err(|e| e.to_string())?;
        let c = CfxContext::new(&params, &seed).map_err(|e| e.to_string());
        seed.fill(0);
        let base = params.acceptor_subkey.unwrap_or(params.ctx_key);
        Ok((c?, base.enctype, params.acceptor_subkey.is_some()))
    }

    fn wrap(
        &mut self,
        ctx: &mut gss::Context,
        confidential: bool,
        plain: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<(), GssFailure> {
        match self {
            Layer::Own(c) => {
                OWN_WRAPS.fetch_add(1, Ordering::Relaxed);
                c.wrap(confidential, plain, out);
                Ok(())
            }
            Layer::Mit => {
                MIT_WRAPS.fetch_add(1, Ordering::Relaxed);
                ctx.wrap(confidential, plain, out)
            }
        }
    }

    fn unwrap(
        &mut self,
        ctx: &mut gss::Context,
        token: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<bool, UnwrapFailure> {
        match self {
            Layer::Own(c) => {
                OWN_UNWRAPS.fetch_add(1, Ordering::Relaxed);
                match c.unwrap(token, out) {
                    Ok(sealed) => Ok(sealed),
                    Err(SaslError::Integrity(m)) => Err(UnwrapFailure::Own(m)),
                    Err(e) => Err(UnwrapFailure::Own(e.to_string())),
                }
            }
            Layer::Mit => {
                MIT_UNWRAPS.fetch_add(1, Ordering::Relaxed);
                ctx.unwrap(token, out).map_err(UnwrapFailure::Mit)
            }
        }
    }
}

/// Why an unwrap failed: our layer's text, or MIT's status.
enum UnwrapFailure {
    Own(String),
    Mit(GssFailure),
}

impl std::fmt::Display for UnwrapFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            UnwrapFailure::Own(m) => f.write_str(m),
            UnwrapFailure::Mit(e) => e.fmt(f),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The accepting side: a server's Kerberos identity from its own keytab.

/// A server's accepting credentials on MIT krb5: the keys of `principal` read from `keytab`
/// (`gss_acquire_cred_from` with a `keytab` credential store, so nothing process-wide such as
/// `KRB5_KTNAME` is touched). Every connection gets its own context over them.
#[derive(Clone)]
pub struct MitAcceptors {
    principal: String,
    cred: Cred,
    /// Our RFC 4121 layer (`Some(true)`), MIT's (`Some(false)`), or as [`OWN_WRAP_ENV`] says.
    own_wrap: Option<bool>,
}

impl std::fmt::Debug for MitAcceptors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MitAcceptors")
            .field("principal", &self.principal)
            .finish_non_exhaustive()
    }
}

impl MitAcceptors {
    /// The keys of `principal` (`svc/host@REALM`, `_HOST` already replaced) from `keytab`. A
    /// missing or unreadable keytab, or one without the principal, fails here, naming both.
    pub fn from_keytab(principal: &str, keytab: &Path) -> Result<Self, SaslError> {
        let fail = |why: String| {
            SaslError::Config(format!(
                "Kerberos login as {principal} from keytab {} failed: {why}",
                keytab.display()
            ))
        };
        if let Err(e) = std::fs::metadata(keytab) {
            return Err(fail(format!("cannot read the keytab: {e}")));
        }
        let keytab_c = CString::new(keytab.as_os_str().as_encoded_bytes())
            .map_err(|_| fail("the keytab path holds a NUL byte".into()))?;
        let cred = acquire_cred_from(
            principal,
            Usage::Accept,
            &[(c"keytab", keytab_c.as_c_str())],
        )
        .map_err(|e| fail(e.text))?;
        Ok(Self {
            principal: principal.to_string(),
            cred,
            own_wrap: None,
        })
    }

    /// Whether accepted contexts wrap and unwrap with our RFC 4121 layer (`true`, when the
    /// enctype is one it implements) or MIT's (`false`), whatever [`OWN_WRAP_ENV`] says.
    pub fn with_own_wrap(mut self, own: bool) -> Self {
        self.own_wrap = Some(own);
        self
    }
}

/// A failed [`acquire_cred_from`]: MIT's text and its minor (krb5) code.
#[derive(Debug)]
struct AcquireFailure {
    text: String,
    minor: u32,
}

/// `gss_acquire_cred_from` for the Kerberos principal `principal` (imported as
/// `GSS_KRB5_NT_PRINCIPAL_NAME`) with an explicit credential store (`keytab`, `client_keytab`,
/// `ccache`, ...), so nothing process-wide (`KRB5_KTNAME`, `KRB5_CLIENT_KTNAME`, `KRB5CCNAME`)
/// is read or changed.
fn acquire_cred_from(
    principal: &str,
    usage: Usage,
    store: &[(&CStr, &CStr)],
) -> Result<Cred, AcquireFailure> {
    let name = NameHandle::principal(principal).map_err(|e| AcquireFailure {
        text: format!("bad principal name: {e}"),
        minor: e.minor,
    })?;
    Cred::acquire_from(Some(&name), usage, store).map_err(|e| AcquireFailure {
        text: e.to_string(),
        minor: e.minor,
    })
}

impl GssAcceptorFactory for MitAcceptors {
    fn principal(&self) -> &str {
        &self.principal
    }

    fn acceptor(&self) -> Result<Box<dyn GssAcceptor>, SaslError> {
        Ok(Box::new(MitContext::new(
            self.own_wrap,
            "GSSAPI unwrap".into(),
            Accepting {
                cred: self.cred.clone(),
            },
        )))
    }
}

/// A server's Kerberos settings from Hadoop's keys: the principal under `principal_key` (e.g.
/// `yarn.resourcemanager.principal`, `_HOST` replaced by `host` as Java's
/// `SecurityUtil.getServerPrincipal` does), its keys from the keytab under `keytab_key`
/// (`yarn.resourcemanager.keytab`), and `hadoop.security.auth_to_local` (default `DEFAULT`;
/// the default realm is the server principal's).
pub fn kerberos_server(
    conf: &Configuration,
    principal_key: &str,
    keytab_key: &str,
    host: &str,
) -> Result<KerberosServer, SaslError> {
    let Some(p) = conf
        .get(principal_key)
        .map(str::trim)
        .filter(|p| !p.is_empty())
    else {
        return Err(SaslError::Config(format!(
            "hadoop.security.authentication is kerberos but {principal_key} is not set"
        )));
    };
    let principal = replace_host(p, host);
    let Some(keytab) = conf
        .get(keytab_key)
        .map(str::trim)
        .filter(|k| !k.is_empty())
    else {
        return Err(SaslError::Config(format!(
            "hadoop.security.authentication is kerberos but {keytab_key} is not set"
        )));
    };
    let realm = principal
        .rsplit_once('@')
        .map(|(_, r)| r.to_string())
        .unwrap_or_default();
    let rules = conf
        .get("hadoop.security.auth_to_local")
        .unwrap_or("DEFAULT");
    let names = AuthToLocal::new(rules, &realm)
        .map_err(|e| SaslError::Config(format!("hadoop.security.auth_to_local: {e}")))?;
    // The form first (no host part: refused before the keytab is read).
    hadoop_wire::sasl::gssapi_server::protocol_and_server_id(&principal)?;
    let acceptors = MitAcceptors::from_keytab(&principal, Path::new(keytab))?;
    KerberosServer::new(Arc::new(acceptors), names)
}

/// The host name `_HOST` stands for when a client connects to `ip`: Java's
/// `InetAddress.getCanonicalHostName()` (a reverse lookup), or the address text when the lookup
/// finds no name.
pub fn canonical_host_name(ip: IpAddr) -> String {
    let sa = socket2::SockAddr::from(SocketAddr::new(ip, 0));
    const NI_MAXHOST: usize = 1025;
    let mut host = [0 as libc::c_char; NI_MAXHOST];
    // socket2's storage is a `sockaddr_storage`, so the pointer cast keeps its layout; no
    // service name is asked for (null buffer, length 0).
    // SAFETY: `sa` is a valid address of `sa.len()` bytes; `host` is writable for its length.
    let rc = unsafe {
        libc::getnameinfo(
            sa.as_ptr().cast::<libc::sockaddr>(),
            sa.len(),
            host.as_mut_ptr(),
            host.len() as libc::socklen_t,
            std::ptr::null_mut(),
            0,
            libc::NI_NAMEREQD,
        )
    };
    if rc != 0 {
        return ip.to_string();
    }
    // SAFETY: on success getnameinfo wrote a NUL-terminated name into `host`, which outlives
    // this borrow.
    let name = unsafe { CStr::from_ptr(host.as_ptr()) };
    name.to_string_lossy().into_owned()
}

/// The host `_HOST` stands for in a server's own principal when it listens on `ip`: Java's
/// `SecurityUtil.getServerPrincipal` takes the bind host, and for `0.0.0.0` the local host's
/// canonical name; an address is named by its reverse lookup ([`canonical_host_name`]).
pub fn server_host_name(ip: IpAddr) -> String {
    if !ip.is_unspecified() {
        return canonical_host_name(ip);
    }
    let mut buf = [0 as libc::c_char; 256];
    // SAFETY: `buf` is writable for its length; gethostname NUL-terminates on success within it
    // (the last byte is kept 0 in case the name was truncated).
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr(), buf.len() - 1) };
    if rc != 0 {
        return "localhost".into();
    }
    // SAFETY: `buf` holds a NUL-terminated string (see above) and outlives this borrow.
    let name = unsafe { CStr::from_ptr(buf.as_ptr()) }
        .to_string_lossy()
        .into_owned();
    use std::net::ToSocketAddrs;
    match (name.as_str(), 0)
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
    {
        Some(a) => canonical_host_name(a.ip()),
        None => name.to_ascii_lowercase(),
    }
}

/// A client's Kerberos settings for the server at `host`: the server principal from the
/// configuration key that the protocol's `KerberosInfo` names (e.g.
/// `dfs.namenode.kerberos.principal`, `yarn.resourcemanager.principal`), `_HOST` replaced by
/// `host`, and MIT contexts as `client_principal` (or the ticket cache's principal).
pub fn kerberos_client(
    conf: &Configuration,
    server_principal_key: &str,
    host: &str,
    client_principal: Option<String>,
) -> Result<KerberosClient, SaslError> {
    let Some(p) = conf.get(server_principal_key) else {
        return Err(SaslError::Config(format!(
            "Failed to specify server's Kerberos principal name ({server_principal_key} is not set)"
        )));
    };
    Ok(KerberosClient {
        server_principal: replace_host(p.trim(), host),
        contexts: Arc::new(MitGss::new(client_principal)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_is_localhost_as_java_names_it() {
        assert_eq!(
            canonical_host_name("127.0.0.1".parse().unwrap()),
            "localhost"
        );
    }

    /// A FILE keytab (format 0x0502) with one AES-128 key for `principal` (`name@REALM`).
    fn keytab_for(path: &Path, principal: &str) {
        let (name, realm) = principal.rsplit_once('@').unwrap();
        let counted = |out: &mut Vec<u8>, b: &[u8]| {
            out.extend_from_slice(&(b.len() as u16).to_be_bytes());
            out.extend_from_slice(b);
        };
        let parts: Vec<&str> = name.split('/').collect();
        let mut e = Vec::new();
        e.extend_from_slice(&(parts.len() as u16).to_be_bytes());
        counted(&mut e, realm.as_bytes());
        for p in &parts {
            counted(&mut e, p.as_bytes());
        }
        e.extend_from_slice(&1u32.to_be_bytes()); // KRB5_NT_PRINCIPAL
        e.extend_from_slice(&0u32.to_be_bytes()); // timestamp
        e.push(1); // kvno
        e.extend_from_slice(&17u16.to_be_bytes()); // aes128-cts-hmac-sha1-96
        counted(&mut e, &[7u8; 16]);
        let mut file = vec![0x05, 0x02];
        file.extend_from_slice(&(e.len() as i32).to_be_bytes());
        file.extend_from_slice(&e);
        std::fs::write(path, file).unwrap();
    }

    #[test]
    fn a_login_takes_the_keytab_when_named_and_refuses_one_without_a_principal() {
        let dir = tempfile::tempdir().unwrap();
        let keytab = dir.path().join("client.keytab");
        keytab_for(&keytab, "client@EXAMPLE.COM");
        let e = MitGss::login(None, Some(&keytab)).unwrap_err();
        assert_eq!(
            e,
            LoginError::MissingPrincipal {
                keytab: keytab.clone()
            }
        );
        assert_eq!(
            e.to_string(),
            format!(
                "a Kerberos keytab ({}) is named but no principal to log in as with it",
                keytab.display()
            )
        );
        // a keytab and a principal: the keytab login (which fails here: no such key)
        let e = MitGss::login(Some("other@EXAMPLE.COM".into()), Some(&keytab)).unwrap_err();
        assert!(
            matches!(&e, LoginError::Keytab { principal, keytab: k, reason }
                if principal == "other@EXAMPLE.COM" && k == &keytab
                    && reason.starts_with("the keytab holds no key for other@EXAMPLE.COM")),
            "{e:?}"
        );
        // no keytab: MIT's environment, as the principal named or the ticket cache's
        let g = MitGss::login(Some("client@EXAMPLE.COM".into()), None).unwrap();
        assert_eq!(g.client_principal(), Some("client@EXAMPLE.COM"));
        assert!(g.keytab().is_none());
        let g = MitGss::login(None, None).unwrap();
        assert!(g.client_principal().is_none() && g.keytab().is_none());
    }

    #[test]
    fn a_kerberos_keytab_login_fails_clearly_without_its_principal_or_its_file() {
        let dir = tempfile::tempdir().unwrap();
        let keytab = dir.path().join("other.keytab");
        keytab_for(&keytab, "other/node1@EXAMPLE.COM");
        // No KDC is needed to find that the keytab lacks the principal.
        let e = MitGss::from_keytab("client@EXAMPLE.COM", &keytab)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with(&format!(
                "Kerberos login as client@EXAMPLE.COM from keytab {} failed: the keytab holds \
                 no key for client@EXAMPLE.COM",
                keytab.display()
            )),
            "{e}"
        );
        let missing = dir.path().join("missing.keytab");
        let e = MitGss::from_keytab("client@EXAMPLE.COM", &missing)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with(&format!(
                "Kerberos login as client@EXAMPLE.COM from keytab {} failed: cannot read the \
                 keytab",
                missing.display()
            )),
            "{e}"
        );
    }

    #[test]
    fn the_server_principal_comes_from_the_protocol_key_with_host() {
        let mut c = Configuration::new();
        let e = kerberos_client(&c, "dfs.namenode.kerberos.principal", "nn", None).unwrap_err();
        assert!(
            e.to_string().contains("dfs.namenode.kerberos.principal"),
            "{e}"
        );
        c.set("dfs.namenode.kerberos.principal", "hdfs/_HOST@EXAMPLE.COM");
        let k = kerberos_client(&c, "dfs.namenode.kerberos.principal", "NN1", None).unwrap();
        assert_eq!(k.server_principal, "hdfs/nn1@EXAMPLE.COM");
    }
}
