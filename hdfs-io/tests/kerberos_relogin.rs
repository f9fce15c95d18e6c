//! Kerberos logins outliving their tickets, against a Kerberized Hadoop 3.5 NameNode whose
//! MiniKdc issues tickets lasting `LIFETIME` seconds (`hdfs --kerberos true --ticket-lifetime`).
//!
//! - A client logged in from a keytab (`NameNodeKerberos::keytab`: MIT's `client_keytab`
//!   credential store over an in-memory cache) keeps working across more than two ticket
//!   lifetimes: each new connection acquires the credential again, and MIT takes a new ticket
//!   from the keytab once the old one is half-way to its expiry (Java's `reloginFromKeytab`).
//!   The KDC log shows the new AS exchanges.
//! - A client with only a ticket cache (`kinit`, no keytab) works until the ticket expires,
//!   then fails at once (no hang, no retries, nothing sent to the NameNode), the error naming
//!   the cache and the expiry.
//!
//! MIT's environment is process-wide: one test in this binary.

#[path = "support/kerberos.rs"]
mod kerberos;

use std::process::Command;
use std::time::{Duration, Instant};

use hdfs_io::namenode::NameNodeClient;
use kerberos::keytab_client;
use peer_harness::{Mode, Peer};

/// Just above MIT's 30 s window: MIT refreshes a keytab login's ticket when it expires within
/// 30 s (or is half-way to its expiry), so with 32 s tickets a ticket is reused for about 2 s,
/// then replaced from the keytab; shorter tickets would be replaced at every acquisition.
const LIFETIME: u64 = 32;

fn log_count(peer: &Peer, pred: impl Fn(&str) -> bool) -> usize {
    std::fs::read_to_string(peer.log_path())
        .expect("peer log")
        .lines()
        .filter(|l| pred(l))
        .count()
}

#[test]
fn a_keytab_login_outlives_its_tickets_a_ticket_cache_does_not() {
    let lifetime = LIFETIME.to_string();
    let mut peer = Peer::start(
        Mode::Hdfs,
        &[
            "--datanodes",
            "1",
            "--shared-ip",
            "true",
            "--kerberos",
            "true",
            "--ticket-lifetime",
            &lifetime,
        ],
    )
    .expect("Kerberized hdfs peer with short tickets");
    let k = peer.kerberos().expect("READY kerberos");
    peer.command("write /relogin/f 777").expect("write");
    let conf = conf::Configuration::load_dir(peer.conf_dir()).expect("peer conf dir");
    let dir = tempfile::tempdir().unwrap();
    // The ticket cache: one kinit, never renewed.
    let cache = k.kinit_process(dir.path()).expect("kinit");
    let ccache = format!("FILE:{}", cache.display());
    let kinit_at = Instant::now();
    let klist = Command::new("klist").output().expect("klist");
    eprintln!("{}", String::from_utf8_lossy(&klist.stdout));
    let as_issued = |peer: &Peer| {
        log_count(peer, |l| {
            l.contains("AS_REQ ISSUE:")
                && l.contains(&format!("{} for krbtgt/", k.client_principal))
        })
    };

    let keytab_client = || keytab_client(&conf, Some(&k.client_principal), &k.client_keytab);
    let stat = |nn: &NameNodeClient| nn.get_file_info("/relogin/f").map(|s| s.map(|s| s.length));

    // the cache works while its ticket lasts
    let cached = NameNodeClient::from_conf(&conf).expect("client on the ticket cache");
    assert_eq!(
        stat(&cached).unwrap_or_else(|e| panic!("ticket cache: {e}\n{}", peer.log_tail(30))),
        Some(777)
    );
    drop(cached);
    let as_before = as_issued(&peer);

    // over two lifetimes of new keytab clients (new connections), one a second
    let start = Instant::now();
    let end = Duration::from_secs(LIFETIME * 21 / 10);
    let mut after_expiry = 0;
    let mut rounds = 0;
    while start.elapsed() < end {
        let nn = keytab_client()
            .unwrap_or_else(|e| panic!("keytab login at {:?}: {e}", start.elapsed()));
        assert_eq!(
            stat(&nn).unwrap_or_else(|e| panic!(
                "keytab client at {:?}: {e}\n{}",
                start.elapsed(),
                peer.log_tail(30)
            )),
            Some(777)
        );
        rounds += 1;
        if start.elapsed() > Duration::from_secs(LIFETIME + 1) {
            after_expiry += 1;
        }
        std::thread::sleep(Duration::from_secs(1));
    }
    let relogins = as_issued(&peer) - as_before;
    eprintln!("{rounds} keytab clients, {after_expiry} after the first ticket expired; {relogins} AS exchanges");
    assert!(after_expiry >= LIFETIME / 2, "{after_expiry}");
    assert!(
        relogins >= 3,
        "the first login and at least two new tickets from the keytab: {relogins}"
    );
    // each client acquires the credential twice (its login, its connection): tickets are
    // reused while they are fresh
    assert!(
        relogins < rounds,
        "{relogins} AS exchanges for {rounds} clients"
    );

    // the cache's ticket has expired: refused at once, naming the cache and the expiry
    assert!(kinit_at.elapsed() > Duration::from_secs(LIFETIME + 1));
    let as_now = as_issued(&peer);
    let auths = log_count(&peer, |l| {
        l.contains("Auth successful for") || l.contains("Auth failed for")
    });
    let t = Instant::now();
    let e = match NameNodeClient::from_conf(&conf) {
        Ok(nn) => stat(&nn).expect_err("an expired ticket").to_string(),
        Err(e) => e.to_string(),
    };
    let took = t.elapsed();
    eprintln!("with an expired ticket ({took:?}): {e}");
    assert!(took < Duration::from_secs(5), "{took:?}");
    assert!(e.contains(&ccache), "{e}");
    assert!(e.to_lowercase().contains("expired"), "{e}");
    // MIT's own attempt to refresh through its default client keytab (absent here) costs the
    // KDC at most two AS requests; nothing reaches the NameNode's authentication
    assert!(as_issued(&peer) - as_now <= 2, "no retry storm at the KDC");
    assert_eq!(
        log_count(&peer, |l| l.contains("Auth successful for")
            || l.contains("Auth failed for")),
        auths,
        "no authentication attempt at the NameNode"
    );
}
