//! `hotpath app run` across an AMRMToken roll: a real Java RM rolling its AMRM master key every
//! 10 s (the smallest interval it accepts with a 3 s AM expiry: more than 3 × the expiry) and
//! one Java NodeManager. The RM sends the new token in allocate responses until the AM
//! authenticates with it; the AM must switch (a new connection with the new token) and keep
//! allocating, or the RM would reject it once the old key is gone.

use peer_harness::{Mode, Shared};

use crate::app_run;
use app_run::app_run;

static RM: Shared = Shared::new(
    Mode::YarnRm,
    &[
        "--profile",
        "agents",
        "--nms",
        "1",
        "--set",
        "yarn.am.liveness-monitor.expiry-interval-ms=3000",
        "--set",
        "yarn.resourcemanager.am-rm-tokens.master-key-rolling-interval-secs=10",
    ],
);

#[test]
fn app_run_survives_amrm_token_rolls() {
    let rm = RM.lock().expect("yarn-rm with a 10 s AMRM key roll");
    // 25 s of work spans at least two rolls (a new key every 10 s, active 4.5 s later).
    let r = app_run(rm.conf_dir(), &["--containers", "2"], "sleep 25");
    assert_eq!(r.code, 0, "{r:#?}\n{}", rm.log_tail(80));
    assert_eq!(r.final_status, "SUCCEEDED", "{r:#?}");
    assert_eq!(r.exits(), ["0", "0"], "{r:#?}");
    let rolls: u32 = r
        .stdout
        .lines()
        .find_map(|l| {
            l.strip_prefix("the ApplicationMaster switched to a rolled AMRMToken ")
                .and_then(|t| t.split_whitespace().next())
                .and_then(|n| n.parse().ok())
        })
        .unwrap_or(0);
    assert!(rolls >= 2, "rolls {rolls}\n{}", r.stdout);
}
