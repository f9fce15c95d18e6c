//! KERBEROS on `hotpath rm` (issue 14, part 1 "Server"): a Kerberized Java NodeManager (Hadoop
//! 3.5, peer `yarn-nm --kerberos true`, whose MiniKdc also holds the RM's keytab) registers with
//! and heartbeats to `hotpath rm` over SASL GSSAPI, at each of the three protection levels, and
//! the bad cases fail clearly:
//!
//! 1. For each of authentication, integrity, privacy, the RM offers only that level and the NM
//!    asks only for it, so a registration proves the level was negotiated; the RM's debug log
//!    names the principal, KERBEROS and the QOP, and the NM heartbeats. The privacy run also maps
//!    `nm/localhost@EXAMPLE.COM` through an `auth_to_local` RULE to `yarn`, and admits it by
//!    `security.resourcetracker.protocol.acl=yarn` with `hadoop.security.authorization=true`.
//! 2. A principal the ACL does not list, or not the configured `yarn.nodemanager.principal`:
//!    the Java NM cannot start, with Hadoop's `AuthorizationException` text from our RM. (The
//!    integrity run admits it by `yarn.nodemanager.principal=nm/_HOST@…`.)
//! 3. A client that presents a ticket for another service principal (`nm/localhost` instead of
//!    `rm/localhost`): the RM refuses the AP-REQ ("GSS initiate failed", FATAL SaslException);
//!    `hotpath rm refresh-nodes` (`yarn rmadmin`'s refreshNodes on the admin port), logged in as
//!    `client` from its keytab, gets in over KERBEROS, and without Kerberos is refused
//!    ("SIMPLE authentication is not enabled").
//! 4. A keytab without the RM's principal: `hotpath rm` does not start and says why.
//!
//! MIT's environment (`KRB5_CONFIG`, `KRB5CCNAME`, `KRB5_CLIENT_KTNAME`) is process-wide (and
//! inherited by the `hotpath rm` processes): the process is a client of the peer's realm
//! without credentials, until case 3 gives it the client keytab; the cases run in one test, in
//! order.

mod support;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hadoop_wire::sasl::client::ClientAuth;
use hadoop_wire::sasl::gssapi::{GssContext, GssContextFactory, KerberosClient};
use hadoop_wire::sasl::{Qop, SaslError};
use ipc::client::{Client, ClientConfig};
use ipc::kerberos::MitGss;
use peer_harness::{Kerberos, Mode, Peer};
use support::RmChild;

use testkit::kerberos::PeerKerberos as Krb;

fn krb(peer: &Peer) -> Krb {
    Krb::from_ready(peer.ready())
}

struct Rm {
    child: RmChild,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Rm {
    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
    fn metric(&self, name: &str) -> u64 {
        support::metric(&self.child.metrics, name) as u64
    }
}

/// The `--set`s of a Kerberized RM (principal with `_HOST`: the RM listens on 127.0.0.1, whose
/// canonical name is `localhost`).
fn krb_sets(k: &Krb, keytab: &Path, protection: &str) -> Vec<String> {
    vec![
        "hadoop.security.authentication=kerberos".into(),
        format!("yarn.resourcemanager.principal=rm/_HOST@{}", k.realm),
        format!("yarn.resourcemanager.keytab={}", keytab.display()),
        format!("hadoop.rpc.protection={protection}"),
        "yarn.resourcemanager.nodemanagers.heartbeat-interval-ms=1000".into(),
    ]
}

fn start_rm(k: &Krb, extra: &[String], protection: &str) -> Rm {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("rm.log");
    let mut sets = krb_sets(k, &k.rm_keytab, protection);
    sets.extend_from_slice(extra);
    let child = support::start_rm(
        dir.path(),
        &sets,
        "info,ipc=debug",
        std::fs::File::create(&log).unwrap().into(),
    );
    Rm {
        child,
        log,
        _dir: dir,
    }
}

fn wait_for(what: &str, timeout: Duration, mut ok: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !ok() {
        assert!(
            t0.elapsed() < timeout,
            "timed out after {timeout:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A Java NM registers over KERBEROS at `protection` and heartbeats.
fn nm_at_level(
    nm: &mut Peer,
    k: &Krb,
    protection: &str,
    qop: Qop,
    extra: &[String],
    nm_sets: &str,
) {
    let rm = start_rm(k, extra, protection);
    let reply = nm
        .command(&format!(
            "nm-start {} hadoop.rpc.protection={protection} {nm_sets}",
            rm.child.tracker
        ))
        .unwrap_or_else(|e| panic!("Kerberized NM at {protection}: {e}\nRM log:\n{}", rm.log()));
    assert_eq!(reply["state"], "STARTED", "{reply}");
    wait_for(
        &format!("the NM's registration at {protection}"),
        Duration::from_secs(60),
        || rm.metric("hotpath_rm_registrations_total") == 1,
    );
    let hb0 = rm.metric("hotpath_rm_heartbeats_total");
    wait_for("three heartbeats", Duration::from_secs(20), || {
        rm.metric("hotpath_rm_heartbeats_total") >= hb0 + 3
    });
    let log = rm.log();
    let line = format!(
        "SASL: nm/localhost@{} authenticated by KERBEROS at {}",
        k.realm,
        qop.sasl_name()
    );
    assert!(log.contains(&line), "no {line:?} in the RM log:\n{log}");
    // Our RFC 4121 layer (not MIT's gss_wrap / gss_unwrap) wraps and unwraps the RM's side of
    // the Java NM's connection, whose registration and heartbeats above went through it.
    assert!(
        log.contains("Kerberos server: wrapping with our RFC 4121 layer (enctype 17"),
        "the RM's own RFC 4121 layer not in use:\n{log}"
    );
    for l in log.lines().filter(|l| l.contains("SASL: ")) {
        eprintln!("{protection}: {l}");
    }
    assert_eq!(rm.metric("hotpath_rm_bad_requests_total"), 0);
    nm.command("nm-stop").unwrap();
    wait_for("the unregistration", Duration::from_secs(30), || {
        rm.metric("hotpath_rm_unregistrations_total") == 1
    });
}

/// Initiating contexts aimed at `target` whatever the server advertised: a ticket for another
/// service than the one the client is talking to.
struct WrongTarget(MitGss, String);

impl GssContextFactory for WrongTarget {
    fn client_context(&self, _advertised: &str) -> Result<Box<dyn GssContext>, SaslError> {
        self.0.client_context(&self.1)
    }
}

#[test]
fn kerberized_java_nodemanager_into_hotpath_rm() {
    let mut nm = Peer::start(
        Mode::YarnNm,
        &[
            "--kerberos",
            "true",
            "--set",
            "yarn.nm.liveness-monitor.expiry-interval-ms=10000",
        ],
    )
    .unwrap_or_else(|e| panic!("the Kerberized yarn-nm peer must start (mvn, JDK): {e}"));
    let k = krb(&nm);
    let env = tempfile::tempdir().unwrap();
    Kerberos::realm_process(&k.krb5_conf, env.path());

    // 1. every level; privacy also through an auth_to_local RULE and the ACL
    nm_at_level(&mut nm, &k, "authentication", Qop::Auth, &[], "");
    // both sides with _HOST: the NM names the RM rm/_HOST (Java resolves 127.0.0.1 to
    // localhost), the RM admits only nm/_HOST of the connecting address
    nm_at_level(
        &mut nm,
        &k,
        "integrity",
        Qop::AuthInt,
        &[
            "hadoop.security.authorization=true".into(),
            format!("yarn.nodemanager.principal=nm/_HOST@{}", k.realm),
        ],
        &format!("yarn.resourcemanager.principal=rm/_HOST@{}", k.realm),
    );
    let acl = [
        format!(
            "hadoop.security.auth_to_local=RULE:[2:$1@$0](nm@{})s/.*/yarn/ DEFAULT",
            k.realm
        ),
        "hadoop.security.authorization=true".to_string(),
        "security.resourcetracker.protocol.acl=yarn".to_string(),
    ];
    nm_at_level(&mut nm, &k, "privacy", Qop::AuthConf, &acl, "");

    // 2. a principal the ACL refuses
    let rm = start_rm(
        &k,
        &[
            "hadoop.security.authorization=true".into(),
            "security.resourcetracker.protocol.acl=someone-else".into(),
        ],
        "authentication",
    );
    let e = nm
        .command(&format!(
            "nm-start {} hadoop.rpc.protection=authentication",
            rm.child.tracker
        ))
        .expect_err("the ACL lists only someone-else");
    let text = e.to_string();
    eprintln!("ACL refusal: {text}");
    assert!(
        text.contains(&format!(
            "User nm/localhost@{} (auth:KERBEROS) is not authorized for protocol interface \
             org.apache.hadoop.yarn.server.api.ResourceTrackerPB: denied by configured ACL",
            k.realm
        )),
        "{text}"
    );
    assert_eq!(rm.metric("hotpath_rm_registrations_total"), 0);
    assert!(rm.log().contains("authorization refused"), "{}", rm.log());
    drop(rm);
    // ... and a principal other than the configured NodeManager principal
    let rm = start_rm(
        &k,
        &[
            "hadoop.security.authorization=true".into(),
            format!("yarn.nodemanager.principal=other/localhost@{}", k.realm),
        ],
        "authentication",
    );
    let e = nm
        .command(&format!("nm-start {}", rm.child.tracker))
        .expect_err("only other/localhost may call");
    let text = e.to_string();
    eprintln!("client principal refusal: {text}");
    assert!(
        text.contains(&format!(
            "is not authorized for protocol interface \
             org.apache.hadoop.yarn.server.api.ResourceTrackerPB: this service is only \
             accessible by other/localhost@{}",
            k.realm
        )),
        "{text}"
    );
    drop(rm);

    // 3. a ticket for another service principal
    let rm = start_rm(&k, &[], "authentication");
    Kerberos::client_keytab_process(&k.krb5_conf, &k.client_keytab, env.path());
    let client = Client::new(
        rm.child.tracker.parse().unwrap(),
        ClientConfig {
            protocol: "org.apache.hadoop.yarn.server.api.ResourceTrackerPB".into(),
            protocol_version: 1,
            connect_timeout: Duration::from_secs(10),
            call_timeout: Duration::from_secs(20),
            max_connect_attempts: 1,
            auth: ClientAuth {
                qops: vec![Qop::Auth],
                security_enabled: true,
                kerberos: Some(KerberosClient {
                    server_principal: format!("rm/localhost@{}", k.realm),
                    contexts: Arc::new(WrongTarget(
                        MitGss::new(Some(k.client_principal.clone())),
                        format!("nm/localhost@{}", k.realm),
                    )),
                }),
                ..ClientAuth::default()
            },
            ..ClientConfig::default()
        },
    );
    let e = client
        .call("registerNodeManager", &[])
        .expect_err("a ticket for nm/localhost at the RM");
    let text = e.to_string();
    eprintln!("wrong service ticket: {text}");
    assert!(
        text.contains("javax.security.sasl.SaslException") && text.contains("GSS initiate failed"),
        "{text}"
    );
    assert_eq!(rm.metric("hotpath_rm_registrations_total"), 0);

    // ... while our own admin client, logged in as `client` from its keytab, gets in over
    // KERBEROS (the RM's principal from yarn.resourcemanager.principal, _HOST = localhost),
    // and a SIMPLE one does not
    let admin = |secure: bool| {
        let mut cmd = Command::new(support::hotpath_exe());
        cmd.args(["rm", "refresh-nodes", "--admin-address", &rm.child.admin]);
        if secure {
            cmd.args(["--set", "hadoop.security.authentication=kerberos"])
                .arg("--set")
                .arg(format!(
                    "yarn.resourcemanager.principal=rm/_HOST@{}",
                    k.realm
                ));
        }
        cmd.output().expect("hotpath rm refresh-nodes")
    };
    let out = admin(true);
    assert!(
        out.status.success(),
        "admin over KERBEROS: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = format!(
        "SASL: {} authenticated by KERBEROS at auth",
        k.client_principal
    );
    assert!(rm.log().contains(&line), "{line:?} not in {}", rm.log());
    let out = admin(false);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success()
            && err.contains("SIMPLE authentication is not enabled.  Available:[KERBEROS]"),
        "a SIMPLE admin client: {err}"
    );
    drop(rm);

    // 4. a keytab without the RM's principal: no start, a clear error
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(support::hotpath_exe());
    cmd.args([
        "rm",
        "--address",
        "127.0.0.1:0",
        "--metrics-port",
        "0",
        "--ready-line",
    ]);
    for s in krb_sets(&k, &k.nm_keytab, "authentication") {
        cmd.arg("--set").arg(s);
    }
    cmd.arg("--set")
        .arg(format!(
            "hotpath.rm.completion-log.dir={}",
            dir.path().join("cl").display()
        ))
        .args(["--set", "yarn.resourcemanager.address=127.0.0.1:0"])
        .args([
            "--set",
            "yarn.resourcemanager.scheduler.address=127.0.0.1:0",
        ])
        .args(["--set", "yarn.resourcemanager.admin.address=127.0.0.1:0"])
        .env("KRB5_CONFIG", &k.krb5_conf)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let out = cmd.output().expect("running hotpath rm");
    assert!(!out.status.success(), "hotpath rm started without its keys");
    let mut first = String::new();
    BufReader::new(&out.stdout[..])
        .read_line(&mut first)
        .unwrap();
    assert!(!first.starts_with("READY"), "{first}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!(
            "Kerberos login as rm/localhost@{} from keytab {} failed",
            k.realm,
            k.nm_keytab.display()
        )),
        "{err}"
    );
    eprintln!("keytab without the principal: {}", err.trim());
}
