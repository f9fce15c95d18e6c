//! Encrypted shuffle (`mapreduce.shuffle.ssl.enabled=true`): the TLS settings Java's
//! `SSLFactory(SERVER)` reads, turned into a rustls server configuration.
//!
//! Where the settings come from, as in Java: the resource named by `hadoop.ssl.server.conf`
//! (default `ssl-server.xml`), looked up in the agent's configuration directory (an absolute
//! path is taken as is). Its keys, each also accepted from the agent's own configuration (so
//! `--set` works) when the file does not set it:
//!
//! | key | meaning |
//! |---|---|
//! | `ssl.server.keystore.location` | the keystore file (required) |
//! | `ssl.server.keystore.password` | the store's password |
//! | `ssl.server.keystore.keypassword` | the key's password (default: the store's) |
//! | `ssl.server.keystore.type` | `jks` (Java's default), `pkcs12`, or `pem` (ours) |
//!
//! and from the agent's configuration `hadoop.ssl.enabled.protocols` (default `TLSv1.2`;
//! `TLSv1.2` and `TLSv1.3` are served, older names are skipped) and
//! `hadoop.ssl.require.client.cert` (default false).
//!
//! Keystores: **PKCS#12** (what `keytool` writes by default since JDK 9, with PBES2/AES or the
//! older PBES1 ciphers) is read whatever `type` says, as Java 9+ reads a PKCS#12 file for type
//! `jks` too; **PEM** (certificate chain and PKCS#8/PKCS#1/SEC1 private key in one file) is an
//! extension of ours. A **JKS** or **JCEKS** file (Sun's proprietary formats) is refused at
//! start, naming the `keytool` command that converts it: no well-kept Rust crate reads them.
//! Client certificates (`hadoop.ssl.require.client.cert=true`) are refused the same way.
//! `ssl.server.exclude.cipher.list` is not needed: rustls offers only AEAD suites with forward
//! secrecy.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use conf::Configuration;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

use super::ShuffleError;

/// Keystores larger than this are not keystores.
const MAX_KEYSTORE: u64 = 16 << 20;

fn err(msg: impl Into<String>) -> ShuffleError {
    ShuffleError::Config(msg.into())
}

/// Where `hadoop.ssl.server.conf` points (it need not exist).
fn ssl_server_xml(conf: &Configuration) -> Option<PathBuf> {
    let name = conf
        .get("hadoop.ssl.server.conf")
        .map(str::trim)
        .filter(|n| !n.is_empty())
        .unwrap_or("ssl-server.xml");
    let p = Path::new(name);
    if p.is_absolute() {
        return Some(p.to_owned());
    }
    conf.conf_dir().map(|d| d.join(p))
}

/// The rustls server configuration of the encrypted shuffle (see the module docs).
pub fn server_config(conf: &Configuration) -> Result<Arc<rustls::ServerConfig>, ShuffleError> {
    let xml = ssl_server_xml(conf);
    let ssl = match &xml {
        Some(p) if p.is_file() => {
            let mut c = Configuration::new();
            c.add_resource(p)
                .map_err(|e| err(format!("{}: {e}", p.display())))?;
            Some(c)
        }
        _ => None,
    };
    let get = |k: &str| -> Option<String> {
        ssl.as_ref()
            .and_then(|c| c.get(k))
            .or_else(|| conf.get(k))
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
    };
    let where_ = match &xml {
        Some(p) if ssl.is_some() => format!("{}", p.display()),
        Some(p) => format!("{} (not found) or the agent's configuration", p.display()),
        None => "ssl-server.xml (no configuration directory) or the agent's configuration".into(),
    };
    if get("hadoop.ssl.require.client.cert").is_some_and(|v| v.eq_ignore_ascii_case("true")) {
        return Err(err(
            "mapreduce.shuffle.ssl.enabled with hadoop.ssl.require.client.cert=true: this \
             agent's encrypted shuffle does not ask reducers for client certificates; set \
             hadoop.ssl.require.client.cert=false or run a Java NodeManager",
        ));
    }
    let location = get("ssl.server.keystore.location").ok_or_else(|| {
        err(format!(
            "mapreduce.shuffle.ssl.enabled is true, but ssl.server.keystore.location is not set \
             (looked in {where_})"
        ))
    })?;
    let password = get("ssl.server.keystore.password").unwrap_or_default();
    let key_password = get("ssl.server.keystore.keypassword");
    let ty = get("ssl.server.keystore.type").unwrap_or_else(|| "jks".into());
    let (certs, key) = load_keystore(Path::new(&location), &ty, &password, key_password)?;
    let versions =
        protocols(&get("hadoop.ssl.enabled.protocols").unwrap_or_else(|| "TLSv1.2".into()))?;
    // ring, not aws-lc (a C and assembler build); its only lack, post-quantum key exchange,
    // is nothing a JDK 17 reducer offers.
    #[allow(deprecated)]
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let cfg = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&versions)
        .map_err(|e| err(format!("TLS versions: {e}")))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| {
            err(format!(
                "ssl.server.keystore.location = {location}: its key and certificate cannot \
                 serve TLS: {e}"
            ))
        })?;
    Ok(Arc::new(cfg))
}

/// `hadoop.ssl.enabled.protocols` → the versions rustls serves.
fn protocols(list: &str) -> Result<Vec<&'static rustls::SupportedProtocolVersion>, ShuffleError> {
    let mut v = Vec::new();
    for p in list.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        match p {
            "TLSv1.2" => v.push(&rustls::version::TLS12),
            "TLSv1.3" => v.push(&rustls::version::TLS13),
            other => tracing::warn!(
                "hadoop.ssl.enabled.protocols: {other} is not served by the encrypted shuffle \
                 (TLSv1.2 and TLSv1.3 are)"
            ),
        }
    }
    if v.is_empty() {
        return Err(err(format!(
            "hadoop.ssl.enabled.protocols = {list:?}: none of TLSv1.2, TLSv1.3"
        )));
    }
    Ok(v)
}

/// Reads the keystore at `path`: its certificate chain and private key.
pub fn load_keystore(
    path: &Path,
    ty: &str,
    password: &str,
    key_password: Option<String>,
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), ShuffleError> {
    let name = path.display();
    let meta = std::fs::metadata(path)
        .map_err(|e| err(format!("ssl.server.keystore.location = {name}: {e}")))?;
    if meta.len() > MAX_KEYSTORE {
        return Err(err(format!(
            "ssl.server.keystore.location = {name}: {} bytes is not a keystore",
            meta.len()
        )));
    }
    let data = std::fs::read(path)
        .map_err(|e| err(format!("ssl.server.keystore.location = {name}: {e}")))?;
    let ty_l = ty.to_ascii_lowercase();
    if !["jks", "pkcs12", "pem"].contains(&ty_l.as_str()) {
        return Err(err(format!(
            "ssl.server.keystore.type = {ty}: this agent reads pkcs12 (also for type jks, as \
             Java does) and pem keystores"
        )));
    }
    if data.starts_with(&[0xfe, 0xed, 0xfe, 0xed]) || data.starts_with(&[0xce, 0xce, 0xce, 0xce]) {
        let kind = if data[0] == 0xfe { "JKS" } else { "JCEKS" };
        return Err(err(format!(
            "ssl.server.keystore.location = {name} is a {kind} keystore, which this agent \
             cannot read (a Java-only format). Convert it to PKCS12, which Java reads too: \
             keytool -importkeystore -srckeystore {name} -destkeystore {name}.p12 \
             -deststoretype pkcs12; then point ssl.server.keystore.location at {name}.p12 \
             (ssl.server.keystore.type jks or pkcs12)"
        )));
    }
    if ty_l == "pem" || data.starts_with(b"-----BEGIN") {
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&data)
            .collect::<Result<_, _>>()
            .map_err(|e| err(format!("{name}: PEM certificates: {e}")))?;
        let key = PrivateKeyDer::from_pem_slice(&data)
            .map_err(|e| err(format!("{name}: PEM private key: {e}")))?;
        if certs.is_empty() {
            return Err(err(format!("{name}: no PEM certificate")));
        }
        return Ok((certs, key));
    }
    let mut tried = vec![password.to_string()];
    if let Some(k) = key_password.filter(|k| k != password) {
        tried.push(k);
    }
    let mut last = None;
    for pw in &tried {
        match p12_keystore::KeyStore::from_pkcs12(
            &data,
            pw,
            p12_keystore::Pkcs12ImportPolicy::Strict,
        ) {
            Ok(ks) => {
                let Some((alias, chain)) = ks.private_key_chain() else {
                    return Err(err(format!(
                        "ssl.server.keystore.location = {name}: no private key entry with its \
                         certificate"
                    )));
                };
                let certs: Vec<CertificateDer<'static>> = chain
                    .certs()
                    .iter()
                    .map(|c| CertificateDer::from(c.as_der().to_vec()))
                    .collect();
                if certs.is_empty() {
                    return Err(err(format!("{name}: key {alias:?} has no certificate")));
                }
                let key =
                    PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(chain.key().as_der().to_vec()));
                return Ok((certs, key));
            }
            Err(e) => last = Some(e),
        }
    }
    Err(err(format!(
        "ssl.server.keystore.location = {name}: not a PKCS12 keystore this password opens \
         (ssl.server.keystore.password / keypassword): {}",
        last.map_or_else(String::new, |e| e.to_string())
    )))
}
