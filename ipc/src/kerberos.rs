//! Kerberos for IPC clients: GSS-API security contexts on MIT krb5 (through the `libgssapi`
//! crate) for `hadoop_wire::sasl::gssapi`, and the configuration that selects them.
//!
//! Where the client's credentials come from is MIT's business, steered by the environment:
//!
//! - `KRB5_CONFIG`: the krb5.conf (realm, KDC).
//! - `KRB5CCNAME`: the ticket cache, e.g. filled by `kinit -kt KEYTAB PRINCIPAL`.
//! - `KRB5_CLIENT_KTNAME`: a client keytab. When the cache holds no ticket for the principal,
//!   MIT krb5 gets one from the keytab itself (and stores it in the cache). This is how the
//!   interop tests log in.
//!
//! The client principal is named explicitly ([`MitGss::new`]) or taken from the cache
//! (`None`). Both names, the client's and the server's, are imported as Kerberos principal
//! names (`GSS_KRB5_NT_PRINCIPAL_NAME`), so no DNS canonicalisation or realm mapping of a host
//! happens: the server principal is exactly the one the server advertised and the client
//! expected (see [`hadoop_wire::sasl::gssapi::check_server_principal`]).

use std::ffi::CStr;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use conf::Configuration;
use hadoop_wire::sasl::gssapi::{replace_host, GssContext, GssContextFactory, KerberosClient};
use hadoop_wire::sasl::SaslError;
use libgssapi::context::{ClientCtx, CtxFlags, SecurityContext};
use libgssapi::credential::{Cred, CredUsage};
use libgssapi::name::Name;
use libgssapi::oid::{OidSet, GSS_MECH_KRB5, GSS_NT_KRB5_PRINCIPAL};

/// Contexts on MIT krb5 for one client principal (or the ticket cache's default one).
#[derive(Debug, Clone, Default)]
pub struct MitGss {
    client_principal: Option<String>,
}

impl MitGss {
    /// `client_principal`: `user@REALM` to log in as; `None` takes the ticket cache's principal.
    pub fn new(client_principal: Option<String>) -> Self {
        Self { client_principal }
    }
}

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| "(unset)".into())
}

fn gss_err(what: &str, e: libgssapi::error::Error) -> SaslError {
    SaslError::Sasl(format!("GSSAPI {what}: {}", e.to_string().trim()))
}

impl GssContextFactory for MitGss {
    fn client_context(&self, target: &str) -> Result<Box<dyn GssContext>, SaslError> {
        let mut mechs = OidSet::new();
        mechs
            .add(GSS_MECH_KRB5)
            .map_err(|e| gss_err("OID set", e))?;
        let name = match &self.client_principal {
            Some(p) => Some(
                Name::new(p.as_bytes(), Some(GSS_NT_KRB5_PRINCIPAL))
                    .map_err(|e| gss_err(&format!("client principal {p:?}"), e))?,
            ),
            None => None,
        };
        let cred =
            Cred::acquire(name.as_ref(), None, CredUsage::Initiate, Some(&mechs)).map_err(|e| {
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
            })?;
        let target_name = Name::new(target.as_bytes(), Some(GSS_NT_KRB5_PRINCIPAL))
            .map_err(|e| gss_err(&format!("server principal {target:?}"), e))?;
        // The JDK's GSSAPI client: mutual authentication (Hadoop sets server.authentication),
        // confidentiality and integrity available, replay and sequence detection, no delegation.
        let flags = CtxFlags::GSS_C_MUTUAL_FLAG
            | CtxFlags::GSS_C_CONF_FLAG
            | CtxFlags::GSS_C_INTEG_FLAG
            | CtxFlags::GSS_C_REPLAY_FLAG
            | CtxFlags::GSS_C_SEQUENCE_FLAG;
        Ok(Box::new(MitContext {
            ctx: ClientCtx::new(Some(cred), target_name, flags, Some(GSS_MECH_KRB5)),
            target: target.to_string(),
            started: false,
        }))
    }
}

struct MitContext {
    ctx: ClientCtx,
    target: String,
    started: bool,
}

impl GssContext for MitContext {
    fn init_step(&mut self, input: &[u8]) -> Result<Vec<u8>, SaslError> {
        let input = if self.started { Some(input) } else { None };
        self.started = true;
        match self.ctx.step(input, None) {
            Ok(Some(tok)) => Ok(tok.to_vec()),
            Ok(None) => Ok(Vec::new()),
            Err(e) => Err(SaslError::Sasl(format!(
                "GSSAPI init_sec_context for {}: {}",
                self.target,
                e.to_string().trim()
            ))),
        }
    }

    fn is_established(&self) -> bool {
        self.ctx.is_complete()
    }

    fn initiator(&self) -> Result<String, SaslError> {
        let info = self.ctx.info().map_err(|e| gss_err("inquire_context", e))?;
        Ok(info.source_name.to_string())
    }

    fn wrap(
        &mut self,
        confidential: bool,
        plain: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<(), SaslError> {
        let t = self
            .ctx
            .wrap(confidential, plain)
            .map_err(|e| gss_err("wrap", e))?;
        out.extend_from_slice(&t);
        Ok(())
    }

    fn unwrap(&mut self, token: &[u8], out: &mut Vec<u8>) -> Result<(), SaslError> {
        let p = self.ctx.unwrap(token).map_err(|e| {
            SaslError::Integrity(format!(
                "GSSAPI unwrap from {}: {}",
                self.target,
                e.to_string().trim()
            ))
        })?;
        out.extend_from_slice(&p);
        Ok(())
    }
}

/// The host name `_HOST` stands for when a client connects to `ip`: Java's
/// `InetAddress.getCanonicalHostName()` (a reverse lookup), or the address text when the lookup
/// finds no name.
pub fn canonical_host_name(ip: IpAddr) -> String {
    let sa = socket2::SockAddr::from(SocketAddr::new(ip, 0));
    let mut host = [0 as libc::c_char; 1025]; // NI_MAXHOST
                                              // SAFETY: `sa` is a valid socket address of `sa.len()` bytes (socket2's storage is a
                                              // `sockaddr_storage`, so the pointer cast keeps its layout); `host` is writable for
                                              // `host.len()` bytes; no service name is asked for (null buffer, length 0).
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
