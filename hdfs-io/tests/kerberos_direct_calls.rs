//! Direct `getFileInfo` calls (`NameNodeConfig::direct_calls`: the calling thread writes its
//! call and reads its own response on a pooled connection of its own) against a Kerberized
//! Hadoop 3.5 NameNode (`hdfs --kerberos true`, MiniKdc): at `authentication`, `integrity` and
//! `privacy`, from several threads at once (each direct connection runs its own GSSAPI
//! exchange, and at integrity / privacy wraps and unwraps with its own layer), shown by the
//! client's call counters and the NameNode's log (one negotiation per direct connection, none
//! on the shared connection); with a delegation token (SASL TOKEN, DIGEST-MD5, no Kerberos
//! credentials at all); a login from a keytab of the client's own (MIT's in-memory ticket
//! cache, shared by connections opened on several threads at once); the idle close of direct
//! SASL connections (by the pool's sweeper, with no further call: the NameNode's sockets go
//! too); and what a warm direct call at `privacy` allocates on the calling thread (nothing: the
//! tokens are made and read by our own RFC 4121 layer, `ipc::kerberos::wrap_stats` shows it was
//! ours and not MIT's `gss_wrap` / `gss_unwrap`, whose `malloc`s the counter would not see).
//!
//! MIT's and Hadoop's environment variables are process-wide: each test sets them under the
//! peer's lock.

#[macro_use]
#[path = "support/kerberos.rs"]
mod kerberos;

use std::sync::Arc;
use std::time::Duration;

use hadoop_wire::token::Credentials;
use hdfs_io::namenode::{NameNodeClient, NameNodeConfig};
use kerberos::{keytab_client, kinit_client, log_count};
use peer_harness::{Kerberos, Mode, Shared};
use testkit::loopback::{my_ports_to, tcp_rows, wait_idle_closed};

#[global_allocator]
static GLOBAL: alloc_counter::Counting = alloc_counter::Counting;

static HDFS: Shared = Shared::new(
    Mode::Hdfs,
    kerberos_args!("--log-level", "org.apache.hadoop.ipc.Server=DEBUG"),
);

/// `threads` threads each asking `calls` times for `path`'s length.
fn hammer(nn: &NameNodeClient, path: &str, threads: usize, calls: usize) -> Vec<u64> {
    std::thread::scope(|sc| {
        let hs: Vec<_> = (0..threads)
            .map(|_| {
                sc.spawn(move || {
                    let mut scratch = Vec::new();
                    let mut got = Vec::new();
                    for _ in 0..calls {
                        let len = nn
                            .get_file_info_with(path, &mut scratch, |v| v.length)
                            .unwrap_or_else(|e| panic!("getFileInfo {path}: {e}"))
                            .expect("exists");
                        got.push(len);
                    }
                    got
                })
            })
            .collect();
        hs.into_iter().flat_map(|h| h.join().unwrap()).collect()
    })
}

#[test]
fn direct_calls_at_every_protection_level_from_several_threads() {
    let mut peer = HDFS.lock().expect("Kerberized hdfs peer");
    peer.command("write /kdirect/f 4242").expect("write");
    let (_k, _dir, mut conf) = kinit_client(&peer);
    let (threads, calls) = (4, 50);
    for (protection, qop) in [
        ("authentication", "auth"),
        ("integrity", "auth-int"),
        ("privacy", "auth-conf"),
    ] {
        conf.set("hadoop.rpc.protection", protection);
        let negotiated = format!("Negotiated QoP is {qop}.");
        let before = log_count(&peer, &negotiated);
        let w0 = ipc::kerberos::wrap_stats();
        let nn = NameNodeClient::from_conf(&conf).expect("namenode client");
        let got = hammer(&nn, "/kdirect/f", threads, calls);
        let w1 = ipc::kerberos::wrap_stats();
        assert_eq!(got.len(), threads * calls);
        assert!(got.iter().all(|&l| l == 4242), "{protection}");
        let s = nn.call_stats();
        assert_eq!(
            s.direct_calls,
            (threads * calls) as u64,
            "{protection}: {s:?}"
        );
        assert_eq!(
            s.shared_calls, 0,
            "{protection}: the shared connection unused"
        );
        assert!(
            (1..=threads as u64).contains(&s.direct_connections),
            "{protection}: {s:?}"
        );
        let wraps = protection != "authentication";
        assert_eq!(
            s.direct_wrapped_connections,
            if wraps { s.direct_connections } else { 0 },
            "{protection}: {s:?}"
        );
        // Our RFC 4121 layer (not MIT's gss_wrap / gss_unwrap) made every call's token and
        // read every response's, which Java's NameNode took and made (at authentication only
        // the SASL negotiation's last message of each connection is wrapped).
        let (own_wraps, own_unwraps) =
            (w1.own_wraps - w0.own_wraps, w1.own_unwraps - w0.own_unwraps);
        assert_eq!(
            (w1.mit_wraps - w0.mit_wraps, w1.mit_unwraps - w0.mit_unwraps),
            (0, 0),
            "{protection}: {w0:?} {w1:?}"
        );
        if wraps {
            assert!(
                own_wraps >= (threads * calls) as u64 && own_unwraps >= (threads * calls) as u64,
                "{protection}: {w0:?} {w1:?}"
            );
        } else {
            assert!(own_wraps + own_unwraps > 0, "{protection}: {w0:?} {w1:?}");
        }
        // every direct connection negotiated Kerberos on its own, at the configured level
        assert_eq!(
            log_count(&peer, &negotiated) - before,
            s.direct_connections as usize,
            "{protection}: {s:?}"
        );
        eprintln!("{protection}: {s:?}");
    }
    // direct_calls off: the same over the shared connection
    conf.set("hadoop.rpc.protection", "privacy");
    let nn = NameNodeClient::from_conf_with(
        &conf,
        NameNodeConfig {
            direct_calls: false,
            ..NameNodeConfig::default()
        },
    )
    .expect("namenode client");
    assert!(hammer(&nn, "/kdirect/f", 2, 10).iter().all(|&l| l == 4242));
    let s = nn.call_stats();
    assert_eq!((s.direct_calls, s.direct_connections), (0, 0), "{s:?}");
    assert_eq!(s.shared_calls, 20, "{s:?}");
}

#[test]
fn a_delegation_token_authenticates_direct_calls_at_privacy() {
    let mut peer = HDFS.lock().expect("Kerberized hdfs peer");
    peer.command("write /kdirect/tok 1234").expect("write");
    let (_k, dir, mut conf) = kinit_client(&peer);
    conf.set("hadoop.rpc.protection", "privacy");
    let krb = NameNodeClient::from_conf(&conf).expect("namenode client");
    let t = krb
        .get_delegation_token("client")
        .expect("getDelegationToken")
        .expect("a token");
    drop(krb);
    let mut creds = Credentials::new();
    creds.add_token(t.service.clone(), t);
    // no Kerberos credentials from here on: the token alone
    Kerberos::clear_process_credentials(dir.path());
    let before = log_count(&peer, "client@EXAMPLE.COM (auth:TOKEN)");
    let nn = NameNodeClient::from_conf_with(
        &conf,
        NameNodeConfig {
            credentials: Some(Arc::new(creds)),
            ..NameNodeConfig::default()
        },
    )
    .expect("namenode client");
    let got = hammer(&nn, "/kdirect/tok", 3, 20);
    assert!(got.iter().all(|&l| l == 1234));
    let s = nn.call_stats();
    assert_eq!((s.direct_calls, s.shared_calls), (60, 0), "{s:?}");
    assert_eq!(s.direct_wrapped_connections, s.direct_connections, "{s:?}");
    assert!(
        log_count(&peer, "client@EXAMPLE.COM (auth:TOKEN)") - before
            >= s.direct_connections as usize,
        "each direct connection authenticated with the token: {s:?}"
    );
}

#[test]
fn an_idle_direct_sasl_connection_is_closed_and_a_new_one_negotiated() {
    let mut peer = HDFS.lock().expect("Kerberized hdfs peer");
    peer.command("write /kdirect/idle 99").expect("write");
    let (_k, _dir, mut conf) = kinit_client(&peer);
    conf.set("hadoop.rpc.protection", "integrity");
    conf.set("ipc.client.connection.maxidletime", "300");
    let nn = NameNodeClient::from_conf(&conf).expect("namenode client");
    let len = |nn: &NameNodeClient| nn.get_file_info("/kdirect/idle").unwrap().unwrap().length;
    assert_eq!(len(&nn), 99);
    assert_eq!(len(&nn), 99);
    assert_eq!(nn.call_stats().direct_connections, 1);
    std::thread::sleep(Duration::from_millis(600));
    assert_eq!(len(&nn), 99);
    let s = nn.call_stats();
    assert_eq!((s.direct_calls, s.direct_connections), (3, 2), "{s:?}");
    assert_eq!(s.shared_calls, 0, "{s:?}");
}

#[test]
fn idle_direct_connections_close_at_the_namenode_with_no_further_call() {
    // The pool's sweeper closes them after ipc.client.connection.maxidletime; the NameNode
    // reads EOF and closes its side: its sockets from our ports leave /proc/net/tcp.
    let mut peer = HDFS.lock().expect("Kerberized hdfs peer");
    peer.command("write /kdirect/sweep 77").expect("write");
    let nn_port = peer.namenode_addr().expect("namenode address").port();
    let (_k, _dir, mut conf) = kinit_client(&peer);
    conf.set("hadoop.rpc.protection", "privacy");
    let idle = Duration::from_millis(1500);
    conf.set("ipc.client.connection.maxidletime", "1500");
    let nn = NameNodeClient::from_conf(&conf).expect("namenode client");
    let got = hammer(&nn, "/kdirect/sweep", 3, 20);
    let done = std::time::Instant::now();
    assert!(got.iter().all(|&l| l == 77));
    let s = nn.call_stats();
    assert_eq!((s.direct_calls, s.shared_calls), (60, 0), "{s:?}");
    let ports = my_ports_to(nn_port);
    assert_eq!(ports.len() as u64, s.direct_connections, "{s:?}: {ports:?}");
    // the NameNode's side of each, ESTABLISHED
    let nn_side = |state: Option<&str>| {
        tcp_rows()
            .into_iter()
            .filter(|r| {
                r.local_port == nn_port
                    && ports.contains(&r.remote_port)
                    && state.is_none_or(|x| x == r.state)
            })
            .count()
    };
    assert_eq!(nn_side(Some("01")), ports.len());
    wait_idle_closed(
        "NameNode-side sockets and ours",
        done,
        idle - Duration::from_millis(100)..idle + Duration::from_secs(5),
        || (nn_side(None) + my_ports_to(nn_port).len()) as u64,
    );
    assert_eq!(nn.call_stats().direct_idle_closed, s.direct_connections);
    // and the next call authenticates a new connection
    assert_eq!(
        nn.get_file_info("/kdirect/sweep").unwrap().unwrap().length,
        77
    );
    assert_eq!(nn.call_stats().direct_connections, s.direct_connections + 1);
}

#[test]
fn a_warm_direct_call_at_privacy_allocates_nothing() {
    let mut peer = HDFS.lock().expect("Kerberized hdfs peer");
    peer.command("write /kdirect/alloc 321").expect("write");
    let (_k, _dir, mut conf) = kinit_client(&peer);
    conf.set("hadoop.rpc.protection", "privacy");
    let nn = NameNodeClient::from_conf(&conf).expect("namenode client");
    let mut scratch = Vec::new();
    let mut call = || {
        nn.get_file_info_with("/kdirect/alloc", &mut scratch, |v| v.length)
            .unwrap()
            .unwrap()
    };
    for _ in 0..200 {
        assert_eq!(call(), 321);
    }
    let w0 = ipc::kerberos::wrap_stats();
    let (sum, c) = alloc_counter::thread(|| (0..300).map(|_| call()).sum::<u64>());
    assert_eq!(sum, 300 * 321);
    let w1 = ipc::kerberos::wrap_stats();
    assert!(
        w1.own_wraps - w0.own_wraps >= 300 && w1.own_unwraps - w0.own_unwraps >= 300,
        "our RFC 4121 layer wrapped the calls: {w0:?} {w1:?}"
    );
    assert_eq!(w1.mit_wraps - w0.mit_wraps, 0, "{w0:?} {w1:?}");
    assert_eq!(
        c.allocs, 0,
        "{} allocations ({} bytes) in 300 warm calls at privacy",
        c.allocs, c.bytes
    );
    let s = nn.call_stats();
    assert_eq!(
        (s.direct_calls, s.direct_wrapped_connections),
        (500, 1),
        "{s:?}"
    );
}

#[test]
fn a_keytab_login_opens_direct_connections_from_several_threads_at_once() {
    let mut peer = HDFS.lock().expect("Kerberized hdfs peer");
    let k = peer.kerberos().expect("READY kerberos");
    peer.command("write /kdirect/kt 555").expect("write");
    let dir = tempfile::tempdir().unwrap();
    // no process-wide credentials: the keytab login alone (krb5.conf still names the KDC)
    std::env::set_var("KRB5_CONFIG", &k.krb5_conf);
    Kerberos::clear_process_credentials(dir.path());
    let mut conf = conf::Configuration::load_dir(peer.conf_dir()).expect("peer conf dir");
    conf.set("hadoop.rpc.protection", "privacy");
    let nn =
        keytab_client(&conf, Some(&k.client_principal), &k.client_keytab).expect("keytab login");
    let threads = 8;
    // every thread's first call opens a connection at the same moment (a GSS context each,
    // the credential acquired from the one in-memory cache)
    let barrier = std::sync::Barrier::new(threads);
    std::thread::scope(|sc| {
        for _ in 0..threads {
            let (nn, barrier) = (&nn, &barrier);
            sc.spawn(move || {
                barrier.wait();
                for _ in 0..20 {
                    let st = nn.get_file_info("/kdirect/kt").unwrap().unwrap();
                    assert_eq!(st.length, 555);
                }
            });
        }
    });
    let s = nn.call_stats();
    assert_eq!((s.direct_calls, s.shared_calls), (160, 0), "{s:?}");
    assert!(
        s.direct_connections >= 2,
        "connections opened at once: {s:?}"
    );
    assert_eq!(s.direct_wrapped_connections, s.direct_connections, "{s:?}");
}
