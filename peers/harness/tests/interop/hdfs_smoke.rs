//! The HDFS side of the real-Hadoop peer: DataNodes on their own loopback addresses in two
//! racks, files of known content, the helper commands and the Java measuring drivers.
//! All tests share one peer (one JVM per test binary); the lock serialises them, and each
//! leaves every DataNode running.

use std::collections::BTreeSet;
use std::net::TcpStream;

use peer_harness::{content, Driver, Mode, PeerError, Shared};
use sha2::{Digest, Sha256};

static HDFS: Shared = Shared::new(Mode::Hdfs, &[]);

fn sha256_hex(data: &[u8]) -> String {
    Sha256::digest(data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[test]
fn ready_lists_three_datanodes_on_their_own_addresses_in_two_racks() {
    let peer = HDFS.lock().expect("hdfs peer");
    eprintln!("hdfs READY after {:?}", peer.startup_time());
    let nn = peer.namenode_addr().expect("namenode");
    TcpStream::connect(nn).expect("NameNode accepts TCP");
    let dns = peer.datanodes().expect("datanodes");
    assert_eq!(dns.len(), 3);
    let racks: Vec<&str> = dns.iter().map(|d| d.rack.as_str()).collect();
    assert_eq!(racks, ["/r1", "/r1", "/r2"]);
    let hosts: BTreeSet<&str> = dns.iter().map(|d| d.host.as_str()).collect();
    assert_eq!(hosts.len(), 3, "distinct hosts: {dns:?}");
    for d in &dns {
        assert_eq!(d.xfer.ip().to_string(), d.host, "{d:?}");
        TcpStream::connect(d.xfer).expect("DataNode xfer port accepts TCP");
    }
    // the NameNode's own view agrees on host names and racks
    for d in peer.ready()["datanodes"].as_array().expect("datanodes") {
        assert_eq!(d["nn_host_name"], d["host"], "{d}");
        assert_eq!(d["nn_network_location"], d["rack"], "{d}");
        assert_eq!(d["nn_alive"], true, "{d}");
    }
    let hdfs_site =
        std::fs::read_to_string(peer.conf_dir().join("hdfs-site.xml")).expect("hdfs-site");
    assert!(
        hdfs_site.contains("dfs.client.use.datanode.hostname"),
        "{hdfs_site}"
    );
    let core_site =
        std::fs::read_to_string(peer.conf_dir().join("core-site.xml")).expect("core-site");
    assert!(core_site.contains(&format!("hdfs://{nn}")), "{core_site}");
}

#[test]
fn write_returns_the_sha256_of_the_known_content() {
    let mut peer = HDFS.lock().expect("hdfs peer");
    let len = 3 * 1024 * 1024;
    let w = peer
        .command(&format!("write /smoke/f {len}"))
        .expect("write");
    assert_eq!(w["bytes"], len);
    assert_eq!(w["blocks"], 3);
    assert_eq!(w["sha256"], sha256_hex(&content::range(0, len)));

    let b = peer
        .command("block-locations /smoke/f")
        .expect("block-locations");
    let blocks = b["blocks"].as_array().expect("blocks");
    assert_eq!(blocks.len(), 3);
    for blk in blocks {
        let locs = blk["locations"].as_array().expect("locations");
        assert_eq!(locs.len(), 3, "{blk}");
        let racks: BTreeSet<&str> = locs.iter().filter_map(|l| l["rack"].as_str()).collect();
        assert_eq!(racks.len(), 2, "replicas span both racks: {blk}");
    }
    // a per-file block size
    let w = peer
        .command("write /smoke/g 1000000 262144")
        .expect("write with block size");
    assert_eq!(w["blocks"], 4);
    assert_eq!(w["sha256"], sha256_hex(&content::range(0, 1_000_000)));
}

#[test]
fn bad_commands_fail_and_the_peer_keeps_answering() {
    let mut peer = HDFS.lock().expect("hdfs peer");
    for bad in [
        "write",
        "write /x notanumber",
        "dn-stop 7",
        "block-locations /does/not/exist",
    ] {
        match peer.command(bad) {
            Err(PeerError::Command { error, .. }) => assert!(!error.is_empty()),
            other => panic!("{bad}: expected a command error, got {other:?}"),
        }
    }
    peer.command("ping").expect("ping after errors");
}

#[test]
fn drivers_measure_filestatus_and_reads_against_the_peer() {
    let mut peer = HDFS.lock().expect("hdfs peer");
    let m = peer.command("mkfiles /bench/fs 200").expect("mkfiles");
    assert_eq!(m["files"], 200);
    let fs = peer
        .run_driver(
            Driver::FileStatus,
            &[
                "--threads",
                "2",
                "--files",
                "200",
                "--dir",
                "/bench/fs",
                "--duration",
                "1",
                "--warmup",
                "0.5",
            ],
        )
        .expect("FileStatusDriver");
    eprintln!("FileStatusDriver: {fs}");
    assert_eq!(fs["errors"], 0, "{fs}");
    assert!(fs["ops"].as_u64().expect("ops") > 0, "{fs}");
    assert!(
        fs["cpu_us_per_call"].as_f64().expect("cpu per call") > 0.0,
        "{fs}"
    );

    let len = 8 * 1024 * 1024;
    let w = peer
        .command(&format!("write /bench/read {len}"))
        .expect("write");
    let r = peer
        .run_driver(Driver::Read, &["--path", "/bench/read", "--sha256", "true"])
        .expect("ReadDriver");
    eprintln!("ReadDriver: {r}");
    assert_eq!(r["bytes"], len);
    assert_eq!(r["sha256"], w["sha256"]);

    // a driver that fails reports its stderr
    let err = peer
        .run_driver(Driver::Read, &["--path", "/bench/missing"])
        .expect_err("reading a missing file fails");
    assert!(err.to_string().contains("FileNotFoundException"), "{err}");
}

#[test]
fn corrupt_stop_dead_and_restart_datanodes() {
    let mut peer = HDFS.lock().expect("hdfs peer");
    let len = 2 * 1024 * 1024;
    let w = peer
        .command(&format!("write /smoke/c {len}"))
        .expect("write");

    // a corrupt replica: the client skips it and still reads the right bytes
    let c = peer.command("corrupt /smoke/c 0 0").expect("corrupt");
    let dn = c["dn_index"].as_u64().expect("dn_index");
    let r = peer
        .run_driver(Driver::Read, &["--path", "/smoke/c", "--sha256", "true"])
        .expect("read around the corrupt replica");
    assert_eq!(r["sha256"], w["sha256"]);

    // a stopped-and-dead DataNode disappears from new block locations
    let d = peer.command(&format!("dn-dead {dn}")).expect("dn-dead");
    let row = &d["datanodes"][dn as usize];
    assert_eq!(row["running"], false, "{d}");
    assert_eq!(row["nn_alive"], false, "{d}");
    let b = peer
        .command("block-locations /smoke/c")
        .expect("block-locations");
    for blk in b["blocks"].as_array().expect("blocks") {
        for l in blk["locations"].as_array().expect("locations") {
            assert_ne!(l["dn_index"], dn, "dead DataNode still listed: {blk}");
        }
    }

    // restart keeps its address and port
    let before = peer.datanodes().expect("datanodes")[dn as usize].clone();
    let rs = peer
        .command(&format!("dn-restart {dn}"))
        .expect("dn-restart");
    let row = &rs["datanodes"][dn as usize];
    assert_eq!(row["running"], true, "{rs}");
    assert_eq!(row["xfer"], before.xfer.to_string(), "{rs}");
    TcpStream::connect(before.xfer).expect("restarted DataNode accepts TCP");

    // plain stop + restart
    peer.command("dn-stop 1").expect("dn-stop");
    let rs = peer.command("dn-restart 1").expect("dn-restart");
    assert_eq!(rs["datanodes"][1]["running"], true, "{rs}");
}
