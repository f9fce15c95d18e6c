//! Runs one heartbeat path N times, for `valgrind --tool=callgrind` instruction counts:
//! `hb_profile ours|cold|opportunistic|eager|e2e|tracker N`. Single-threaded (no io_uring), so it
//! is safe under valgrind.

use benches::rm_heartbeat::HeartbeatBench;

fn main() {
    let mut args = std::env::args().skip(1);
    let which = args.next().unwrap_or_else(|| "ours".into());
    let n: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(1000);
    let dir = std::env::temp_dir().join(format!("hb-profile-{}", std::process::id()));
    let mut b = HeartbeatBench::new(&dir, which == "opportunistic").expect("bench");
    for _ in 0..n {
        match which.as_str() {
            "ours" | "opportunistic" => b.ours(),
            "cold" => b.ours_cold(),
            "eager" => b.eager(),
            "e2e" => b.end_to_end(),
            "tracker" => b.tracker_only(),
            other => panic!("unknown path {other}"),
        }
        .expect("heartbeat");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
