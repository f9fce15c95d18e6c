//! `hotpath-bench rm-apps` small and short against our RM only (two agents, 1 s windows, two
//! submits, eight containers of `true`): every part measures, with sane figures. No timing
//! goals are checked, only that the numbers are there and consistent.

mod support;

use std::process::Command;

use serde_json::Value;

#[test]
fn rm_apps_measures_all_three_parts_against_our_rm() {
    let out = Command::new(env!("CARGO_BIN_EXE_hotpath-bench"))
        .args(["rm-apps", "--only", "ours", "--json", "--agents", "2"])
        .args(["--alloc-seconds", "1", "--asks", "50", "--submits", "2"])
        .args(["--containers", "8", "--start-threads", "2"])
        .args(["--am-heartbeat-ms", "50", "--nm-heartbeat-ms", "100"])
        .arg("--hotpath")
        .arg(support::hotpath_exe())
        .env("HOTPATH_LOG", "warn")
        .output()
        .expect("running hotpath-bench rm-apps");
    assert!(
        out.status.success(),
        "rm-apps failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    let runs = v["runs"].as_array().expect("runs");
    assert_eq!(runs.len(), 1, "{v}");
    let r = &runs[0];
    assert_eq!(r["side"], "ours");

    let a = &r["alloc"];
    let calls = a["calls"].as_u64().unwrap();
    assert!(calls > 10, "{a}");
    assert_eq!(a["asks"], 50);
    let gross = a["rm_cpu_us_per_call_gross"].as_f64().unwrap();
    assert!(gross > 0.0 && gross.is_finite(), "{a}");
    let (p50, p99) = (
        a["latency_us_p50"].as_u64().unwrap(),
        a["latency_us_p99"].as_u64().unwrap(),
    );
    assert!(p50 > 0 && p50 <= p99, "{a}");
    assert!(a["rm_idle_cpu_ms_per_s"].as_f64().unwrap() >= 0.0, "{a}");

    let s = &r["submit"];
    assert_eq!(s["apps"], 2);
    let to_running = s["to_am_running_ms"]["p50"].as_f64().unwrap();
    let to_registered = s["to_am_registered_ms"]["p50"].as_f64().unwrap();
    assert!(
        to_running > 0.0 && to_running < 30_000.0,
        "submit → AM running {to_running} ms: {s}"
    );
    assert!(to_registered >= to_running, "{s}");

    let c = &r["containers"];
    assert_eq!(c["exited_0"], 8, "{c}");
    assert_eq!(c["failed"], 0, "{c}");
    assert!(c["allocated_per_s"].as_f64().unwrap() > 0.0, "{c}");
    assert!(c["launched_per_s"].as_f64().unwrap() > 0.0, "{c}");
    assert!(
        c["all_allocated_s"].as_f64().unwrap() <= c["all_done_s"].as_f64().unwrap(),
        "{c}"
    );

    for key in [
        "alloc.rm_cpu_us_per_call_net",
        "submit.to_am_running_ms.p50",
        "containers.launched_per_s",
    ] {
        assert!(v["summary"][key]["ours"].is_number(), "{key}: {v}");
    }
}
