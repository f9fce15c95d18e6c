//! Running `hotpath app run` (the built binary, an argument) and reading what it printed, for
//! the application tests.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// What one `hotpath app run` did.
#[derive(Debug)]
pub struct RunResult {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
    /// `application_…` from the "submitted" line.
    pub app_id: String,
    /// node → exit statuses, from the per-node table.
    pub table: BTreeMap<String, Vec<String>>,
    /// "`<STATE> final status <STATUS>`" from the last line of that form.
    pub state: String,
    pub final_status: String,
}

impl RunResult {
    /// Every exit status in the table, sorted.
    pub fn exits(&self) -> Vec<String> {
        let mut v: Vec<String> = self.table.values().flatten().cloned().collect();
        v.sort();
        v
    }
}

/// `hotpath app run --conf-dir CONF ARGS… -- COMMAND`, `hotpath` being the binary.
pub fn app_run(hotpath: &Path, conf_dir: &Path, args: &[&str], command: &str) -> RunResult {
    let t0 = Instant::now();
    let out = Command::new(hotpath)
        .args(["app", "run", "--conf-dir"])
        .arg(conf_dir)
        .args(args)
        .arg("--")
        .arg(command)
        .output()
        .expect("spawn hotpath app run");
    let elapsed = t0.elapsed();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let app_id = stdout
        .lines()
        .find_map(|l| l.strip_prefix("submitted "))
        .and_then(|l| l.split_whitespace().next())
        .unwrap_or("")
        .to_string();
    let mut table = BTreeMap::new();
    let mut in_table = false;
    let (mut state, mut final_status) = (String::new(), String::new());
    for l in stdout.lines() {
        if l.starts_with("node ") && l.contains("exit statuses") {
            in_table = true;
            continue;
        }
        if in_table {
            if l.starts_with("  ") || l.trim().is_empty() {
                continue;
            }
            let w: Vec<&str> = l.split_whitespace().collect();
            if w.len() >= 2 && w[1].parse::<usize>().is_ok() && !l.starts_with("application_") {
                let n: usize = w[1].parse().unwrap();
                let exits: Vec<String> = w[2..].iter().map(|s| s.to_string()).collect();
                assert_eq!(n, exits.len(), "table line {l:?}");
                table.insert(w[0].to_string(), exits);
                continue;
            }
            in_table = false;
        }
        if let Some(rest) = l.strip_prefix(&format!("{app_id} ")) {
            if let Some((s, f)) = rest.split_once(" final status ") {
                state = s.trim().to_string();
                final_status = f.trim().to_string();
            }
        }
    }
    RunResult {
        code: out.status.code().unwrap_or(-1),
        stdout,
        stderr,
        elapsed,
        app_id,
        table,
        state,
        final_status,
    }
}

/// A shell command that exits `code` in the container whose id ends in `_<suffix>` (the AM is
/// `_000001`, the shell containers `_000002` on), prints a line in every one.
pub fn fail_one(suffix: &str, code: i32) -> String {
    format!("echo hello from $CONTAINER_ID; test ${{CONTAINER_ID##*_}} != {suffix} || exit {code}")
}
