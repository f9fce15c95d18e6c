//! Observer reads against the real HA MiniDFSCluster (peer-harness `hdfs-ha`: active nn0,
//! standby nn1, observer nn2, ObserverReadProxyProvider in the written hdfs-site.xml), and a
//! read on the observer right after a write on the active seeing the write (the stateId is
//! shared by every connection; `shared_state_id.rs` shows the value sent).

use hdfs_io::dfs::{DfsClient, DfsConfig};
use hdfs_io::namenode::{endpoints_from_conf, NameNodeClient, NameNodeConfig, Role};
use hdfs_io::topology::{LocalNode, RackMap};
use peer_harness::{Mode, Peer};
use sha2::{Digest, Sha256};

fn rpc_requests(peer: &mut Peer, state: &str) -> u64 {
    let r = peer.command("namenodes").expect("namenodes");
    r["namenodes"]
        .as_array()
        .expect("namenodes")
        .iter()
        .find(|n| n["state"] == state)
        .and_then(|n| n["rpc_requests"].as_u64())
        .unwrap_or_else(|| panic!("no {state} NameNode in {r}"))
}

#[test]
fn reads_go_to_the_observer_and_msync_to_the_active() {
    let mut peer = Peer::start(Mode::HdfsHa, &[]).expect("hdfs-ha peer");
    peer.command("mkfiles /ha 20").expect("mkfiles");
    let w = peer.command("write /ha/data 3145728").expect("write");
    let conf = conf::Configuration::load_dir(peer.conf_dir()).expect("conf");
    let nn = NameNodeClient::from_conf(&conf).expect("client");
    nn.discover_roles();
    let roles: Vec<Role> = nn.nodes().into_iter().map(|(_, r)| r).collect();
    assert_eq!(roles, [Role::Active, Role::Standby, Role::Observer]);

    // the observer tails the active's edits every 100 ms: until it has caught up with this
    // client's stateId (set by the first read's msync), reads go to the active
    let start = std::time::Instant::now();
    let obs = rpc_requests(&mut peer, "observer");
    while rpc_requests(&mut peer, "observer") < obs + 5 && start.elapsed().as_secs() < 5 {
        nn.get_file_info("/ha/f0").expect("getFileInfo");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let (obs0, act0) = (
        rpc_requests(&mut peer, "observer"),
        rpc_requests(&mut peer, "active"),
    );
    let mut found = 0;
    for i in 0..20 {
        if nn
            .get_file_info(&format!("/ha/f{i}"))
            .expect("getFileInfo")
            .is_some()
        {
            found += 1;
        }
    }
    assert_eq!(found, 20);
    let (obs1, act1) = (
        rpc_requests(&mut peer, "observer"),
        rpc_requests(&mut peer, "active"),
    );
    eprintln!("observer +{} active +{}", obs1 - obs0, act1 - act0);
    // the rpc counters also count DataNode heartbeats: compare with margins
    assert!(
        obs1 - obs0 >= 18,
        "observer served {} of 20 reads",
        obs1 - obs0
    );
    let before_msync = nn.state_id().expect("stateId");
    nn.msync().expect("msync");
    assert!(nn.state_id().expect("stateId") >= before_msync);

    // a read through the DfsClient: locations from the observer, bytes from the DataNodes
    let c = DfsClient::new(
        nn,
        DfsConfig::from_conf(&conf).expect("cfg"),
        LocalNode::default(),
        RackMap::default(),
        None,
    );
    let mut out = Vec::new();
    c.read("/ha/data", 0, None, &mut out).expect("read");
    let sha: String = Sha256::digest(&out)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(sha, w["sha256"].as_str().expect("sha"));
    // a path created after the client's last call is seen (stateId carried: no stale read)
    peer.command("write /ha/late 10").expect("write late");
    c.namenode().msync().expect("msync");
    assert!(
        c.stat("/ha/late").is_ok(),
        "a file created before msync is visible"
    );

    // a write on the active, then at once a read on the observer, no msync between: the
    // read carries the write's stateId (one cell shared by every connection), so the observer
    // holds it until it has applied the write (it tails the active's edits every 100 ms; with
    // its own connection's older stateId it would answer at once, without the directory)
    // (as the cluster's superuser, the owner of /: this client's user may not write there)
    let owner = c.stat("/").expect("stat /").owner;
    let nn = NameNodeClient::new(
        endpoints_from_conf(&conf).expect("endpoints").0,
        NameNodeConfig {
            user: owner,
            observer_reads: true,
            ..NameNodeConfig::default()
        },
    )
    .expect("client");
    assert!(nn
        .get_file_info("/ha/f0")
        .expect("first read (msync)")
        .is_some());
    let (obs0, act0) = (
        rpc_requests(&mut peer, "observer"),
        rpc_requests(&mut peer, "active"),
    );
    for i in 0..5 {
        let before = nn.state_id().expect("stateId");
        let dir = format!("/ha/written/d{i}");
        assert!(nn.mkdirs(&dir, 0o755).expect("mkdirs on the active"));
        let write = nn.state_id().expect("stateId");
        assert!(write > before, "the write's stateId {write} after {before}");
        let st = nn
            .get_file_info(&dir)
            .expect("getFileInfo")
            .expect("the observer sees the write");
        assert_eq!(st.file_type, hdfs_io::file_status::FileType::Dir);
        assert!(nn.state_id().expect("stateId") >= write);
    }
    // The NameNode's counter can lag the last response by a moment (CI saw observer +4 with
    // the fifth read already answered): wait for it, a few seconds at most. A read that truly
    // fell back to the active would show there instead and never reach 5 here.
    let t0 = std::time::Instant::now();
    let (obs1, act1) = loop {
        let (o, a) = (
            rpc_requests(&mut peer, "observer"),
            rpc_requests(&mut peer, "active"),
        );
        if (o - obs0 >= 5 && a - act0 >= 5) || t0.elapsed() > std::time::Duration::from_secs(5) {
            break (o, a);
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    eprintln!(
        "write then read x5: observer +{} active +{} (counted after {:?})",
        obs1 - obs0,
        act1 - act0,
        t0.elapsed()
    );
    assert!(obs1 - obs0 >= 5, "the reads went to the observer");
    assert!(act1 - act0 >= 5, "the writes went to the active");
}
