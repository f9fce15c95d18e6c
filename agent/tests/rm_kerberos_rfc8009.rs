//! The JDK's Kerberos on the RFC 8009 enctypes against our RFC 4121 layer: Hadoop's own
//! `YarnClient` (peer `yarn-client`, JDK 17, logged in from its keytab) lists the nodes of a
//! Kerberized `hotpath rm` at `hadoop.rpc.protection=privacy`, once in a realm whose keys are
//! all `aes256-cts-hmac-sha384-192` (20) and once all `aes128-cts-hmac-sha256-128` (19).
//!
//! The peers' MiniKdc (Apache Kerby 2.0.3) has no RFC 8009 enctypes, so each realm is MIT's
//! own KDC on loopback (`peer_harness::MitKdc`, Debian's `krb5-kdc` from `scripts/setup.sh`),
//! whose krb5.conf permits only that enctype, for the JDK (`java.security.krb5.conf`) and the
//! RM (`KRB5_CONFIG`, MIT) alike. The RM's debug log proves the rest: the client authenticated
//! by KERBEROS at auth-conf, and the RM's side of the connection wrapped and unwrapped by our
//! layer with that enctype (not MIT's `gss_wrap` / `gss_unwrap`).
//!
//! MIT's environment (`KRB5_CONFIG`) is process-wide and inherited by the RM: one test.

mod support;

use std::time::Duration;

use peer_harness::{Kerberos, MitKdc, Mode, Peer};

#[test]
fn java_yarn_client_into_hotpath_rm_on_rfc8009_enctypes() {
    for (enctype, name) in [
        (20, "aes256-cts-hmac-sha384-192"),
        (19, "aes128-cts-hmac-sha256-128"),
    ] {
        let realm = format!("E{enctype}.TEST");
        let kdc = MitKdc::start(&realm, &[name]).expect("MIT's KDC");
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let rm_keytab = d.join("rm.keytab");
        let client_keytab = d.join("client.keytab");
        kdc.add_principal("rm/localhost", name, &rm_keytab)
            .expect("rm/localhost");
        let client = kdc
            .add_principal("client", name, &client_keytab)
            .expect("client");
        let krb5_conf = d.join("krb5.conf");
        kdc.write_krb5_conf(&krb5_conf, &[name]).expect("krb5.conf");
        Kerberos::realm_process(&krb5_conf, d);

        let sets = [
            "hadoop.security.authentication=kerberos".to_string(),
            format!("yarn.resourcemanager.principal=rm/_HOST@{realm}"),
            "hadoop.rpc.protection=privacy".to_string(),
        ];
        let mut rm_sets = sets.to_vec();
        rm_sets.push(format!(
            "yarn.resourcemanager.keytab={}",
            rm_keytab.display()
        ));
        let log = d.join("rm.log");
        let rm = support::start_rm(
            d,
            &rm_sets,
            "info,ipc=debug",
            std::fs::File::create(&log).unwrap().into(),
        );
        let keytab = client_keytab.display().to_string();
        let conf = krb5_conf.display().to_string();
        let mut args: Vec<&str> = vec![
            "--rm",
            rm.client.as_str(),
            "--scheduler",
            rm.scheduler.as_str(),
            "--principal",
            client.as_str(),
            "--keytab",
            keytab.as_str(),
            "--krb5-conf",
            conf.as_str(),
            "--log-level",
            "ERROR",
        ];
        for s in &sets {
            args.extend(["--set", s.as_str()]);
        }
        let t0 = std::time::Instant::now();
        let mut yc = Peer::start(Mode::YarnClient, &args)
            .unwrap_or_else(|e| panic!("enctype {enctype}: the Kerberized yarn-client peer: {e}"));
        let nodes = yc
            .command("nodes")
            .unwrap_or_else(|e| panic!("enctype {enctype}: getClusterNodes over KERBEROS: {e}"));
        eprintln!(
            "enctype {enctype}: Java YarnClient's getClusterNodes in {:?}: {nodes}",
            t0.elapsed()
        );
        assert_eq!(nodes["nodes"], serde_json::json!([]), "{nodes}");
        drop(yc);
        // the RM logs the authentication as the call is served
        let mut text = String::new();
        for _ in 0..50 {
            text = std::fs::read_to_string(&log).unwrap();
            if text.contains("Kerberos server: wrapping") {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let line = format!("SASL: {client} authenticated by KERBEROS at auth-conf");
        assert!(text.contains(&line), "no {line:?} in the RM log:\n{text}");
        let ours = format!("Kerberos server: wrapping with our RFC 4121 layer (enctype {enctype}");
        assert!(
            text.contains(&ours),
            "enctype {enctype}: the RM's own RFC 4121 layer not in use:\n{text}"
        );
        drop(rm);
    }
}
