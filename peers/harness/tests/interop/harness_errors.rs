//! Start failures come back as errors carrying the launcher's log.

use peer_harness::{Mode, Peer, PeerError};

#[test]
fn bad_launcher_arguments_fail_with_the_log_tail() {
    match Peer::start(Mode::Hdfs, &["--no-such-option"]) {
        Err(PeerError::Exited { log, status, .. }) => {
            assert!(log.contains("bad arguments"), "{log}");
            assert!(!status.contains("exit status: 0"), "{status}");
        }
        other => panic!("expected Exited, got {other:?}"),
    }
}

#[test]
fn yarn_nm_without_rm_address_fails() {
    let err = Peer::start(Mode::YarnNm, &[]).expect_err("--rm is required");
    assert!(err.to_string().contains("--rm is required"), "{err}");
}
