//! The Kerberos half of a Kerberized peer's READY line (`yarn-rm --kerberos true` and friends):
//! its MiniKdc's `krb5.conf` and realm, the RM's and NodeManager's keytabs, and a client
//! principal with its keytab. Read once here instead of in each Kerberos test.

use std::path::PathBuf;

/// The peer's `kerberos` object from its READY line.
#[derive(Debug, Clone)]
pub struct PeerKerberos {
    pub krb5_conf: PathBuf,
    pub realm: String,
    pub rm_keytab: PathBuf,
    pub nm_keytab: PathBuf,
    pub client_keytab: PathBuf,
    pub client_principal: String,
}

impl PeerKerberos {
    /// Reads `ready["kerberos"]`; panics naming the missing field and the whole READY line, as
    /// a test's set-up should.
    pub fn from_ready(ready: &serde_json::Value) -> PeerKerberos {
        let k = &ready["kerberos"];
        let s = |f: &str| {
            k[f].as_str()
                .unwrap_or_else(|| panic!("kerberos.{f} in READY {ready}"))
                .to_string()
        };
        PeerKerberos {
            krb5_conf: s("krb5_conf").into(),
            realm: s("realm"),
            rm_keytab: s("rm_keytab").into(),
            nm_keytab: s("nm_keytab").into(),
            client_keytab: s("client_keytab").into(),
            client_principal: s("client_principal"),
        }
    }

    /// `yarn.resourcemanager.principal` as a cluster sets it: `rm/_HOST@REALM`.
    pub fn rm_principal(&self) -> String {
        format!("rm/_HOST@{}", self.realm)
    }

    /// What every Kerberized client of the RM sets (`--set` pairs), at `protection`.
    pub fn client_sets(&self, protection: &str) -> Vec<String> {
        vec![
            "hadoop.security.authentication=kerberos".into(),
            format!("yarn.resourcemanager.principal={}", self.rm_principal()),
            format!("hadoop.rpc.protection={protection}"),
        ]
    }
}
