//! MIT's own KDC (`krb5kdc`, Debian's `krb5-kdc` and `krb5-admin-server`, installed by
//! `scripts/setup.sh`) on loopback, in a temp dir, for the Kerberos tests that need what the
//! peers' MiniKdc (Apache Kerby 2.0) cannot issue: Kerby has no RFC 8009 enctypes
//! (`aes128-cts-hmac-sha256-128` = 19, `aes256-cts-hmac-sha384-192` = 20).
//!
//! [`MitKdc::start`] creates a realm database (`kdb5_util create`) whose principals get keys of
//! the enctypes named, starts `krb5kdc -n` on a free 127.0.0.1 port and waits until it accepts
//! TCP connections; [`MitKdc::add_principal`] adds a principal with a random key of one enctype
//! and writes it into a keytab (`kadmin.local`, which works on the database directly);
//! [`MitKdc::write_krb5_conf`] writes a client krb5.conf for the realm that permits only the
//! enctypes named (so tickets, session keys and GSS subkeys are all of those). Dropping the
//! value kills the KDC (by its process id) and removes the directory. It all takes well under a
//! second.

use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::error::{tail, PeerError};

/// A running MIT KDC for one realm (see the module docs).
pub struct MitKdc {
    dir: tempfile::TempDir,
    child: Child,
    realm: String,
    addr: SocketAddr,
    profile: PathBuf,
}

impl std::fmt::Debug for MitKdc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MitKdc")
            .field("realm", &self.realm)
            .field("addr", &self.addr)
            .field("dir", &self.dir.path())
            .finish_non_exhaustive()
    }
}

/// `name` on `PATH` or in the sbin directories (not on a non-root user's `PATH`).
fn tool(name: &str) -> Result<PathBuf, PeerError> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/usr/local/sbin", "/sbin"].map(PathBuf::from))
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .ok_or_else(|| PeerError::Io {
            what: format!(
                "finding MIT's {name} (Debian's krb5-kdc and krb5-admin-server, installed by \
                 scripts/setup.sh)"
            ),
            source: std::io::Error::from(std::io::ErrorKind::NotFound),
        })
}

/// Runs `cmd`; its output (stdout and stderr) when it exits 0 and, if `expect` is given, says
/// so (kadmin.local reports a failed query on stderr and still exits 0).
fn run(cmd: &mut Command, what: &str, expect: Option<&str>) -> Result<String, PeerError> {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| PeerError::io(format!("running {what}"), e))?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if !out.status.success() || expect.is_some_and(|e| !text.contains(e)) {
        return Err(PeerError::Command {
            command: what.to_string(),
            error: text,
        });
    }
    Ok(text)
}

impl MitKdc {
    /// A KDC for `realm` whose database gives principals keys of `enctypes` (MIT's names, e.g.
    /// `aes128-cts-hmac-sha256-128`), listening on 127.0.0.1 (UDP and TCP, one port).
    pub fn start(realm: &str, enctypes: &[&str]) -> Result<MitKdc, PeerError> {
        let (krb5kdc, kdb5_util) = (tool("krb5kdc")?, tool("kdb5_util")?);
        tool("kadmin.local")?;
        let dir = tempfile::Builder::new()
            .prefix("hotpath-mit-kdc")
            .tempdir()
            .map_err(|e| PeerError::io("creating the KDC's directory", e))?;
        let d = dir.path();
        // A free port, released just before the KDC binds it (a race with another binder is
        // caught below: the KDC exits).
        let port = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .and_then(|l| l.local_addr())
            .map_err(|e| PeerError::io("finding a free port", e))?
            .port();
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
        let supported: Vec<String> = enctypes.iter().map(|e| format!("{e}:normal")).collect();
        let profile = d.join("kdc.conf");
        let conf = format!(
            "[kdcdefaults]\n kdc_listen = {addr}\n kdc_tcp_listen = {addr}\n\
             [realms]\n {realm} = {{\n  database_name = {db}\n  key_stash_file = {stash}\n  \
             acl_file = {acl}\n  master_key_type = {master}\n  supported_enctypes = {supp}\n  \
             max_life = 1d\n }}\n\
             [logging]\n kdc = FILE:{log}\n",
            db = d.join("principal").display(),
            stash = d.join("stash").display(),
            acl = d.join("kadm5.acl").display(),
            master = enctypes
                .first()
                .copied()
                .unwrap_or("aes256-cts-hmac-sha1-96"),
            supp = supported.join(" "),
            log = d.join("kdc.log").display(),
        );
        std::fs::write(&profile, conf).map_err(|e| PeerError::io("writing kdc.conf", e))?;
        std::fs::write(d.join("kadm5.acl"), "")
            .map_err(|e| PeerError::io("writing kadm5.acl", e))?;
        // The tools read krb5.conf too: one of this realm's own, not the machine's.
        let krb5_conf = d.join("krb5.conf");
        write_conf(&krb5_conf, realm, addr, enctypes)?;
        run(
            Command::new(&kdb5_util)
                .env("KRB5_KDC_PROFILE", &profile)
                .env("KRB5_CONFIG", &krb5_conf)
                .args(["-r", realm, "-P", "hotpath-master-key", "create", "-s"]),
            "kdb5_util create",
            None,
        )?;
        let log = d.join("krb5kdc.out");
        let out = std::fs::File::create(&log).map_err(|e| PeerError::io("krb5kdc.out", e))?;
        let err = out
            .try_clone()
            .map_err(|e| PeerError::io("krb5kdc.out", e))?;
        let child = Command::new(&krb5kdc)
            .env("KRB5_KDC_PROFILE", &profile)
            .env("KRB5_CONFIG", &krb5_conf)
            .args(["-n", "-r", realm])
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(|e| PeerError::io("starting krb5kdc", e))?;
        let mut kdc = MitKdc {
            dir,
            child,
            realm: realm.to_string(),
            addr,
            profile,
        };
        let t0 = Instant::now();
        loop {
            if let Ok(Some(status)) = kdc.child.try_wait() {
                return Err(PeerError::Exited {
                    mode: "krb5kdc".into(),
                    status: status.to_string(),
                    log: format!(
                        "{}\n{}",
                        tail(&log, 20),
                        tail(&kdc.dir.path().join("kdc.log"), 20)
                    ),
                    log_path: log,
                });
            }
            if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
                return Ok(kdc);
            }
            if t0.elapsed() > Duration::from_secs(20) {
                return Err(PeerError::StartTimeout {
                    mode: "krb5kdc".into(),
                    timeout: Duration::from_secs(20),
                    log: tail(&log, 20),
                    log_path: log,
                });
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The realm.
    pub fn realm(&self) -> &str {
        &self.realm
    }

    /// The KDC's address (UDP and TCP).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Adds `principal` (`name` or `name/host`, this realm) with a random key of `enctype` only
    /// and appends that key to `keytab`. Returns `principal@REALM`.
    pub fn add_principal(
        &self,
        principal: &str,
        enctype: &str,
        keytab: &Path,
    ) -> Result<String, PeerError> {
        let full = format!("{principal}@{}", self.realm);
        let kadmin = |query: String, expect: &str| {
            run(
                Command::new(tool("kadmin.local")?)
                    .env("KRB5_KDC_PROFILE", &self.profile)
                    .env("KRB5_CONFIG", self.dir.path().join("krb5.conf"))
                    .args(["-r", &self.realm, "-q", &query]),
                &format!("kadmin.local -q {query:?}"),
                Some(expect),
            )
        };
        kadmin(
            format!("addprinc -randkey -e {enctype}:normal {full}"),
            &format!("Principal \"{full}\" created."),
        )?;
        kadmin(
            format!("ktadd -norandkey -k {} {full}", keytab.display()),
            &format!("encryption type {enctype} added to keytab"),
        )?;
        Ok(full)
    }

    /// Writes a client krb5.conf for this realm (its KDC over TCP, no DNS) that permits only
    /// `enctypes`, for `KRB5_CONFIG`.
    pub fn write_krb5_conf(&self, path: &Path, enctypes: &[&str]) -> Result<(), PeerError> {
        write_conf(path, &self.realm, self.addr, enctypes)
    }
}

fn write_conf(
    path: &Path,
    realm: &str,
    addr: SocketAddr,
    enctypes: &[&str],
) -> Result<(), PeerError> {
    let list = enctypes.join(" ");
    let conf = format!(
        "[libdefaults]\n default_realm = {realm}\n dns_lookup_kdc = false\n \
         dns_lookup_realm = false\n rdns = false\n udp_preference_limit = 1\n \
         permitted_enctypes = {list}\n default_tkt_enctypes = {list}\n \
         default_tgs_enctypes = {list}\n\
         [realms]\n {realm} = {{\n  kdc = {addr}\n }}\n"
    );
    std::fs::write(path, conf).map_err(|e| PeerError::io(format!("writing {path:?}"), e))
}

impl Drop for MitKdc {
    fn drop(&mut self) {
        // The KDC this value started, by its process id.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
