//! `hotpath-bench filestatus-kerberos` still runs end to end (not a measurement: one level, a
//! few hundred files, one second): the Kerberized HDFS peer starts, Hadoop's
//! NNThroughputBenchmark logs in from the client keytab, creates its files and stats each once
//! at `privacy`, ours stats the same files over MIT Kerberos at `privacy` with no error and no
//! missing file (direct calls, and with `--ab-shared` again over the shared connection), then
//! again at `authentication` paced to privacy's rate. The figures themselves are only checked
//! to be there.

use std::process::Command;

use serde_json::Value;

#[test]
fn filestatus_kerberos_runs_at_privacy() {
    let files = 300;
    let out = Command::new(env!("CARGO_BIN_EXE_hotpath-bench"))
        .args([
            "filestatus-kerberos",
            "--qops",
            "privacy",
            "--no-driver",
            "--ab-shared",
            "--json",
        ])
        .args(["--files", &files.to_string(), "--seconds", "1"])
        .env("HOTPATH_LOG", "warn")
        .output()
        .expect("running hotpath-bench");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "filestatus-kerberos failed:\n{stderr}"
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let v: Value = serde_json::from_str(stdout.trim()).expect("one JSON object");
    let m = &v["medians"][0];
    assert_eq!(m["qop"], "privacy", "{v}");
    // NNThroughputBenchmark stats every file once
    assert_eq!(m["nntb"]["ops"].as_u64(), Some(files), "{v}");
    let positive = |x: &Value| x.as_f64().is_some_and(|f| f > 0.0 && f.is_finite());
    for f in [
        &m["ours"]["ops_per_sec"],
        &m["ours"]["cpu_us_per_op"],
        &m["nntb"]["ops_per_sec"],
        &m["ours_shared"]["ops_per_sec"],
        &m["ours_shared"]["cpu_us_per_op"],
        &m["authentication_at_this_rate"]["ours"]["ops_per_sec"],
    ] {
        assert!(positive(f), "{f} in {v}");
    }
    assert!(m["filestatus_driver"].is_null(), "{v}");
}
