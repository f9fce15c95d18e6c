//! RM delegation tokens on a Kerberized `hotpath rm`, proven with Hadoop's own client side (the
//! yarn-nm peer's MiniKdc, realm EXAMPLE.COM, the RM as `rm/_HOST` from its keytab,
//! `hadoop.rpc.protection=privacy`, recovery on):
//!
//! 1. Hadoop's `YarnClient` (peer `yarn-client`, logged in as `client@EXAMPLE.COM` from its
//!    keytab) submits an application, then gets an `RM_DELEGATION_TOKEN` (renewer `client`) and
//!    writes it to a Credentials file with the service `ClientRMProxy` gives (`ip:port`); Java
//!    decodes the identifier (owner, renewer, dates, sequence number 1, key 2).
//! 2. A second peer process with no Kerberos login (no keytab, no ticket cache) and
//!    `HADOOP_TOKEN_FILE_LOCATION` pointing at that file lists and reports the application over
//!    TOKEN (DIGEST-MD5); asking for a token itself over TOKEN is refused with Java's
//!    "Delegation Token can be issued only with kerberos authentication".
//! 3. `Token.renew` by the renewer succeeds (a new expiry within the max date); by another
//!    Kerberos user (`nm/localhost`) it fails with Java's AccessControlException text.
//! 4. The RM is killed and restarted on the same addresses and state store: the token still
//!    authenticates and renews.
//! 5. `Token.cancel` by its owner; a fresh token holder is then refused at connection time with
//!    Java's InvalidToken text.
//!
//! MIT's environment (`KRB5_CONFIG`, `KRB5CCNAME`) is process-wide: everything runs in one
//! test, in order.

mod support;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use peer_harness::{Mode, Peer};
use serde_json::Value;

#[path = "support/daemon.rs"]
mod daemon;
use daemon::Daemon;

const PROTECTION: &str = "privacy";

use testkit::kerberos::PeerKerberos as Krb;

fn krb(peer: &Peer) -> Krb {
    Krb::from_ready(peer.ready())
}

/// A free port on 127.0.0.1 (the RM restarts on the same client address: the token's service
/// names it).
fn free_addr() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().to_string()
}

/// A Kerberized `hotpath rm` with recovery on, on the given addresses and state store.
fn start_rm(k: &Krb, addrs: &[String; 3], store: &Path) -> Daemon {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(support::hotpath_exe());
    cmd.args([
        "rm",
        "--address",
        &addrs[0],
        "--metrics-port",
        "0",
        "--ready-line",
    ]);
    let sets = vec![
        format!(
            "hotpath.rm.completion-log.dir={}",
            dir.path().join("completion-log").display()
        ),
        format!("yarn.resourcemanager.address={}", addrs[1]),
        format!("yarn.resourcemanager.scheduler.address={}", addrs[2]),
        "yarn.resourcemanager.admin.address=127.0.0.1:0".into(),
        "hadoop.security.authentication=kerberos".into(),
        format!("yarn.resourcemanager.principal=rm/_HOST@{}", k.realm),
        format!("yarn.resourcemanager.keytab={}", k.rm_keytab.display()),
        format!("hadoop.rpc.protection={PROTECTION}"),
        "yarn.resourcemanager.recovery.enabled=true".into(),
        format!("hotpath.rm.state-store.dir={}", store.display()),
        "hadoop.security.authorization=true".into(),
        "security.applicationclient.protocol.acl=client,nm".into(),
    ];
    for s in sets {
        cmd.arg("--set").arg(s);
    }
    cmd.env("KRB5_CONFIG", &k.krb5_conf)
        .env("HOTPATH_LOG", "info,ipc=debug");
    Daemon::spawn(cmd, dir)
}

/// The yarn-client peer: logged in from `login` (principal, keytab) or, with `None`, with no
/// login of its own (the token file of `HADOOP_TOKEN_FILE_LOCATION`, no ticket cache).
fn yarn_client(k: &Krb, rm: &Daemon, login: Option<(&str, &Path)>) -> Peer {
    let mut args: Vec<String> = vec![
        "--rm".into(),
        rm.field("client"),
        "--scheduler".into(),
        rm.field("scheduler"),
        "--krb5-conf".into(),
        k.krb5_conf.display().to_string(),
        "--log-level".into(),
        "ERROR".into(),
    ];
    if let Some((p, kt)) = login {
        args.extend([
            "--principal".into(),
            p.to_string(),
            "--keytab".into(),
            kt.display().to_string(),
        ]);
    }
    for s in [
        "hadoop.security.authentication=kerberos".to_string(),
        format!("yarn.resourcemanager.principal=rm/_HOST@{}", k.realm),
        format!("hadoop.rpc.protection={PROTECTION}"),
    ] {
        args.extend(["--set".to_string(), s]);
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    Peer::start(Mode::YarnClient, &args)
        .unwrap_or_else(|e| panic!("the yarn-client peer (login {login:?}) must start: {e}"))
}

/// A peer with no login holding the tokens of `file`.
fn token_holder(k: &Krb, rm: &Daemon, file: &Path, no_cache: &Path) -> Peer {
    std::env::set_var("HADOOP_TOKEN_FILE_LOCATION", file);
    std::env::set_var("KRB5CCNAME", format!("FILE:{}", no_cache.display()));
    let p = yarn_client(k, rm, None);
    std::env::remove_var("HADOOP_TOKEN_FILE_LOCATION");
    p
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

fn wait_for(what: &str, timeout: Duration, mut ok: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !ok() {
        assert!(
            t0.elapsed() < timeout,
            "timed out after {timeout:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn app_ids(v: &Value) -> Vec<String> {
    v["apps"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|x| x["app_id"].as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn java_clients_get_use_renew_and_cancel_rm_delegation_tokens() {
    let kdc = Peer::start(Mode::YarnNm, &["--kerberos", "true"])
        .unwrap_or_else(|e| panic!("the Kerberized yarn-nm peer (the KDC) must start: {e}"));
    let k = krb(&kdc);
    std::env::set_var("KRB5_CONFIG", &k.krb5_conf);
    let work = tempfile::tempdir().unwrap();
    let no_cache = work.path().join("no-such-ccache");
    let store = work.path().join("rmstore");
    let addrs = [free_addr(), free_addr(), free_addr()];
    let mut rm = start_rm(&k, &addrs, &store);
    let client_addr = rm.field("client");
    assert_eq!(client_addr, addrs[1]);

    // 1. the Kerberized client: an application, then a token with renewer `client`
    let mut yc = yarn_client(&k, &rm, Some((&k.client_principal, &k.client_keytab)));
    let app = yc
        .command(&format!(
            "app-submit containers=1 result={}",
            work.path().join("result.json").display()
        ))
        .expect("app-submit (it waits in ACCEPTED: no NodeManagers)");
    let app_id = app["app_id"].as_str().expect("app_id").to_string();
    let file = work.path().join("rm.token");
    let t0 = now_ms();
    let got = yc
        .command(&format!("rmdt-get {} client", file.display()))
        .unwrap_or_else(|e| panic!("getRMDelegationToken over KERBEROS: {e}"));
    eprintln!("the RM delegation token as Java decodes it: {got}");
    assert_eq!(got["kind"], "RM_DELEGATION_TOKEN", "{got}");
    assert_eq!(
        got["service_from_rm"], "",
        "the RM leaves the service to the client"
    );
    assert_eq!(got["service"], client_addr.as_str(), "{got}");
    assert_eq!(got["owner"], k.client_principal.as_str(), "{got}");
    assert_eq!(got["renewer"], "client", "{got}");
    assert_eq!(got["real_user"], "", "{got}");
    assert_eq!(got["sequence_number"], 1, "{got}");
    assert_eq!(
        got["master_key_id"], 2,
        "a fresh RM rolls once at start: {got}"
    );
    let issue = got["issue_date"].as_i64().unwrap();
    let max = got["max_date"].as_i64().unwrap();
    assert!(issue >= t0 - 5_000 && issue <= now_ms() + 5_000, "{got}");
    assert_eq!(max - issue, 7 * 86_400_000, "max-lifetime 7 days: {got}");
    assert!(file.is_file());

    // 2. a process with no Kerberos login, only the token file
    let mut th = token_holder(&k, &rm, &file, &no_cache);
    let who = th.command("whoami").expect("whoami");
    eprintln!("token holder: {who}");
    assert_eq!(who["kerberos_credentials"], false, "{who}");
    let apps = th
        .command("apps")
        .unwrap_or_else(|e| panic!("getApplications over TOKEN: {e}"));
    assert_eq!(app_ids(&apps), vec![app_id.clone()], "{apps}");
    assert_eq!(apps["apps"][0]["user"], "client", "{apps}");
    let rep = th
        .command(&format!("app-report {app_id}"))
        .unwrap_or_else(|e| panic!("getApplicationReport over TOKEN: {e}"));
    assert_eq!(rep["user"], "client", "{rep}");
    assert_eq!(
        rep["queue"], "default",
        "the full report (VIEW_APP as the owner): {rep}"
    );
    let e = th
        .command_expect_error(&format!(
            "rmdt-get {} client",
            work.path().join("x.token").display()
        ))
        .expect("a token over TOKEN is refused");
    let text = format!("{e:?}");
    assert!(
        text.contains("Delegation Token can be issued only with kerberos authentication"),
        "{text}"
    );
    drop(th);

    // 3. renew: by the renewer, then by another user
    let renewed = yc
        .command(&format!("rmdt-renew {}", file.display()))
        .unwrap_or_else(|e| panic!("renew by the renewer: {e}"));
    let exp = renewed["expiration"].as_i64().unwrap();
    assert!(
        exp > now_ms() + 86_400_000 - 60_000 && exp <= max,
        "renew-interval 1 day, capped at the max date: {renewed}"
    );
    let nm_principal = format!("nm/localhost@{}", k.realm);
    let e = yc
        .command_expect_error(&format!(
            "as-keytab {nm_principal} {} rmdt-renew {}",
            k.nm_keytab.display(),
            file.display()
        ))
        .expect("renew by another user is refused");
    let text = format!("{e:?}");
    eprintln!("renew by {nm_principal}: {text}");
    assert!(
        text.contains("org.apache.hadoop.security.AccessControlException")
            && text.contains("nm tries to renew a token (RM_DELEGATION_TOKEN owner=")
            && text.contains("with non-matching renewer client"),
        "{text}"
    );

    // 4. a restart with recovery: the token still authenticates and renews
    drop(yc);
    rm.kill9();
    wait_for(
        "the RM's addresses to be free",
        Duration::from_secs(30),
        || {
            addrs
                .iter()
                .all(|a| std::net::TcpListener::bind(a.as_str()).is_ok())
        },
    );
    let rm = start_rm(&k, &addrs, &store);
    let mut th = token_holder(&k, &rm, &file, &no_cache);
    let apps = th
        .command("apps")
        .unwrap_or_else(|e| panic!("the token after a restart: {e}"));
    assert_eq!(app_ids(&apps), vec![app_id.clone()], "{apps}");
    drop(th);
    let mut yc = yarn_client(&k, &rm, Some((&k.client_principal, &k.client_keytab)));
    yc.command(&format!("rmdt-renew {}", file.display()))
        .unwrap_or_else(|e| panic!("renew after a restart: {e}"));

    // 5. cancel by the owner; the cancelled token is refused
    yc.command(&format!("rmdt-cancel {}", file.display()))
        .unwrap_or_else(|e| panic!("cancel by the owner: {e}"));
    let mut th = token_holder(&k, &rm, &file, &no_cache);
    let e = th
        .command_expect_error("apps")
        .expect("a cancelled token is refused");
    let text = format!("{e:?}");
    eprintln!("cancelled token: {text}");
    assert!(
        text.contains("Token for real user: , can't be found in cache"),
        "{text}"
    );
    let e = yc
        .command_expect_error(&format!("rmdt-renew {}", file.display()))
        .expect("renewing a cancelled token is refused");
    let text = format!("{e:?}");
    assert!(text.contains("Renewal request for unknown token"), "{text}");
}
