//! `hotpath-bench storm-sweep`: the heartbeat storm at several node counts, one connection per
//! node, against our RM, the raw reference server and the Java RM, repeated, and one SVG chart
//! of p99 latency and server CPU per heartbeat against node count.
//!
//! How it fits together: every point is one `hotpath-bench loadgen heartbeats --json` child
//! process of this binary (`--target both` for our RM and the raw server answering with the
//! RM's captured response, in one sitting; `--target java` for the Java RM), so each run has a
//! fresh server and its own descriptors. Their [`crate::loadgen::Figures`] JSON lines are collected per
//! (target, nodes); with `--repeat R` each point is run R times, interleaved (all targets at
//! one node count, then the next count, then again), and the chart and table give the median
//! with the min–max spread. `--json PATH` keeps every run; `--svg PATH` draws the chart.
//!
//! The latency is the one from each heartbeat's *scheduled* time (`sched_p99_us`: no
//! coordinated omission); the CPU is the server process's utime+stime over the measured
//! window per answered heartbeat.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use anyhow::{bail, Context, Result};
use plotters::prelude::*;
use serde_json::{json, Value};

/// Flags of `hotpath-bench storm-sweep`.
#[derive(clap::Args, Debug)]
pub struct SweepArgs {
    /// Node counts (one connection per node).
    #[arg(long, value_delimiter = ',', default_value = "1000,2500,5000,10000")]
    pub nodes: Vec<usize>,
    /// Servers: `rm` and `raw` (run together as `--target both`), `java`.
    #[arg(long, value_delimiter = ',', default_value = "rm,raw,java")]
    pub targets: Vec<String>,
    /// Runs per point (interleaved); the median and the min–max spread are reported.
    #[arg(long, default_value_t = 1)]
    pub repeat: usize,
    /// RUNNING container statuses per heartbeat.
    #[arg(long, default_value_t = 50)]
    pub containers: usize,
    /// Each node's heartbeat period.
    #[arg(long, default_value_t = 1000)]
    pub interval_ms: u64,
    /// Measured seconds per run.
    #[arg(long, default_value_t = 10.0)]
    pub duration: f64,
    /// Event-loop threads per load process.
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// Loopback source addresses for the connections (see `loadgen heartbeats`).
    #[arg(long, default_value_t = 1)]
    pub source_ips: u8,
    /// A configuration key for our RM and the raw server (`KEY=VALUE`, repeatable; see
    /// `loadgen heartbeats --server-set`).
    #[arg(long, value_name = "KEY=VALUE")]
    pub server_set: Vec<String>,
    /// Write the chart here (SVG).
    #[arg(long)]
    pub svg: Option<PathBuf>,
    /// Write every run's figures here (JSON).
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Run nothing: read the runs of an earlier `--json` file and print (and draw) them again.
    #[arg(long, value_name = "JSON")]
    pub from_json: Option<PathBuf>,
}

/// One (target, nodes) point over its runs.
#[derive(Debug, Default, Clone)]
struct Point {
    p99_us: Vec<f64>,
    cpu_us: Vec<f64>,
    hb_per_s: Vec<f64>,
}

fn median_min_max(v: &[f64]) -> Option<(f64, f64, f64)> {
    let mut s: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    if s.is_empty() {
        return None;
    }
    s.sort_by(f64::total_cmp);
    let m = if s.len() % 2 == 1 {
        s[s.len() / 2]
    } else {
        (s[s.len() / 2 - 1] + s[s.len() / 2]) / 2.0
    };
    Some((m, s[0], s[s.len() - 1]))
}

fn loadgen(args: &SweepArgs, target: &str, nodes: usize) -> Result<Value> {
    let out = Command::new(std::env::current_exe()?)
        .args(["loadgen", "heartbeats", "--json", "--target", target])
        .args(["--nodes", &nodes.to_string()])
        .args(["--containers", &args.containers.to_string()])
        .args(["--interval-ms", &args.interval_ms.to_string()])
        .args(["--duration", &args.duration.to_string()])
        .args(["--threads", &args.threads.to_string()])
        .args(["--source-ips", &args.source_ips.to_string()])
        .args(
            args.server_set
                .iter()
                .flat_map(|kv| ["--server-set", kv.as_str()]),
        )
        .env(
            "HOTPATH_LOG",
            std::env::var("HOTPATH_LOG").unwrap_or_else(|_| "warn".into()),
        )
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("running loadgen --target {target} --nodes {nodes}"))?;
    if !out.status.success() {
        bail!(
            "loadgen --target {target} --nodes {nodes} failed ({})",
            out.status
        );
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .rev()
        .find(|l| l.starts_with('{'))
        .with_context(|| format!("loadgen --target {target} printed no JSON: {text}"))?;
    serde_json::from_str(line).context("loadgen JSON")
}

fn add(points: &mut BTreeMap<(String, usize), Point>, target: &str, nodes: usize, f: &Value) {
    let cpu_key = if target == "raw" {
        "raw_cpu_us_per_req"
    } else {
        "rm_cpu_us_per_hb"
    };
    let p = points.entry((target.to_string(), nodes)).or_default();
    p.p99_us
        .push(f["sched_p99_us"].as_f64().unwrap_or(f64::NAN));
    p.cpu_us.push(f[cpu_key].as_f64().unwrap_or(f64::NAN));
    p.hb_per_s.push(f["hb_per_s"].as_f64().unwrap_or(f64::NAN));
}

pub fn run(args: SweepArgs) -> Result<()> {
    for t in &args.targets {
        if !matches!(t.as_str(), "rm" | "raw" | "java") {
            bail!("--targets: unknown {t:?} (rm, raw, java)");
        }
    }
    let ours = args.targets.iter().any(|t| t == "rm" || t == "raw");
    let java = args.targets.iter().any(|t| t == "java");
    let mut points: BTreeMap<(String, usize), Point> = BTreeMap::new();
    let mut runs = Vec::new();
    if let Some(path) = &args.from_json {
        let doc: Value = serde_json::from_slice(
            &std::fs::read(path).with_context(|| format!("reading {}", path.display()))?,
        )
        .with_context(|| format!("parsing {}", path.display()))?;
        for r in doc["runs"].as_array().context("no \"runs\" array")? {
            let n = r["nodes"].as_u64().context("a run without nodes")? as usize;
            match r["target"].as_str() {
                Some("both") => {
                    for t in ["rm", "raw"] {
                        add(&mut points, t, n, &r["figures"][t]);
                    }
                }
                Some(t) => add(&mut points, t, n, &r["figures"]),
                None => bail!("a run without target"),
            }
            runs.push(r.clone());
        }
    }
    let rounds = if args.from_json.is_some() {
        0
    } else {
        args.repeat.max(1)
    };
    for round in 0..rounds {
        for &n in &args.nodes {
            if ours {
                let v = loadgen(&args, "both", n)?;
                for t in ["rm", "raw"] {
                    if args.targets.iter().any(|x| x == t) {
                        add(&mut points, t, n, &v[t]);
                    }
                }
                eprintln!(
                    "round {round} nodes {n}: rm p99 {} µs cpu {:.1} µs/hb; raw p99 {} µs cpu {:.1} µs/req",
                    v["rm"]["sched_p99_us"],
                    v["rm"]["rm_cpu_us_per_hb"].as_f64().unwrap_or(f64::NAN),
                    v["raw"]["sched_p99_us"],
                    v["raw"]["raw_cpu_us_per_req"].as_f64().unwrap_or(f64::NAN),
                );
                runs.push(json!({ "round": round, "nodes": n, "target": "both", "figures": v }));
            }
            if java {
                let v = loadgen(&args, "java", n)?;
                add(&mut points, "java", n, &v);
                eprintln!(
                    "round {round} nodes {n}: java p99 {} µs cpu {:.1} µs/hb, {:.0} hb/s",
                    v["sched_p99_us"],
                    v["rm_cpu_us_per_hb"].as_f64().unwrap_or(f64::NAN),
                    v["hb_per_s"].as_f64().unwrap_or(f64::NAN),
                );
                runs.push(json!({ "round": round, "nodes": n, "target": "java", "figures": v }));
            }
        }
    }
    println!(
        "| server | nodes | hb/s | p99 µs (median, min–max) | CPU µs per heartbeat (median, min–max) |"
    );
    println!("|---|---|---|---|---|");
    let mut summary = Vec::new();
    for ((t, n), p) in &points {
        let (Some(l), Some(c), Some(h)) = (
            median_min_max(&p.p99_us),
            median_min_max(&p.cpu_us),
            median_min_max(&p.hb_per_s),
        ) else {
            continue;
        };
        println!(
            "| {t} | {n} | {:.0} | {:.0} ({:.0}–{:.0}) | {:.1} ({:.1}–{:.1}) |",
            h.0, l.0, l.1, l.2, c.0, c.1, c.2
        );
        summary.push(json!({
            "target": t, "nodes": n, "runs": p.p99_us.len(),
            "hb_per_s": h.0, "sched_p99_us": [l.0, l.1, l.2], "cpu_us_per_hb": [c.0, c.1, c.2],
        }));
    }
    if let Some(path) = &args.json {
        let doc = json!({ "summary": summary, "runs": runs });
        std::fs::write(path, serde_json::to_string_pretty(&doc)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if let Some(path) = &args.svg {
        chart(path, &points, &args)?;
        eprintln!("chart: {}", path.display());
    }
    Ok(())
}

const COLORS: [(&str, RGBColor); 3] = [
    ("rm", RGBColor(0xd6, 0x27, 0x28)),
    ("raw", RGBColor(0x7f, 0x7f, 0x7f)),
    ("java", RGBColor(0x1f, 0x77, 0xb4)),
];

fn label(t: &str) -> &'static str {
    match t {
        "rm" => "hotpath rm",
        "raw" => "raw reference server",
        _ => "Java RM (Hadoop 3.5)",
    }
}

/// Two panels side by side: p99 from the scheduled time (log scale) and server CPU per
/// heartbeat (log scale), against node count; median line, min–max bars.
fn chart(path: &PathBuf, points: &BTreeMap<(String, usize), Point>, a: &SweepArgs) -> Result<()> {
    let root = SVGBackend::new(path, (1100, 480)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| anyhow::anyhow!("{e}"))?;
    let root = root
        .titled(
            &format!(
                "Heartbeat storm: {} container statuses per heartbeat, 1 heartbeat/s per node, \
one TCP connection per node (median of {} run(s), bars min–max)",
                a.containers,
                points.values().map(|p| p.p99_us.len()).max().unwrap_or(0)
            ),
            ("sans-serif", 15),
        )
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let (left, right) = root.split_horizontally(550);
    let max_n = points.keys().map(|(_, n)| *n).max().unwrap_or(1) as f64 * 1.05;
    type Get = fn(&Point) -> &Vec<f64>;
    // The goals of the storm issue: p99 < 2 ms, RM CPU <= 8 µs per heartbeat.
    let panels: [(&DrawingArea<_, _>, &str, Get, f64); 2] = [
        (
            &left,
            "p99 latency from scheduled send (µs)",
            |p| &p.p99_us,
            2000.0,
        ),
        (&right, "server CPU per heartbeat (µs)", |p| &p.cpu_us, 8.0),
    ];
    for (area, title, get, goal) in panels {
        let vals: Vec<f64> = points
            .values()
            .flat_map(|p| get(p).iter().copied())
            .filter(|v| v.is_finite() && *v > 0.0)
            .collect();
        let lo = vals.iter().copied().fold(goal, f64::min).max(0.1) / 1.5;
        // A decade of headroom above the highest point keeps the legend off the data.
        let hi = vals.iter().copied().fold(goal, f64::max).max(lo * 10.0) * 10.0;
        let mut c = ChartBuilder::on(area)
            .caption(title, ("sans-serif", 14))
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(56)
            .build_cartesian_2d(0f64..max_n, (lo..hi).log_scale())
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        c.configure_mesh()
            .x_desc("nodes (= connections)")
            .x_label_formatter(&|x| format!("{x:.0}"))
            .y_label_formatter(&|y| format!("{y}"))
            .draw()
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        let goal_style = RGBColor(0x2c, 0xa0, 0x2c).stroke_width(1);
        c.draw_series(LineSeries::new([(0.0, goal), (max_n, goal)], goal_style))
            .map_err(|e| anyhow::anyhow!("{e}"))?
            .label(format!("goal ({goal} µs)"))
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 18, y)], goal_style));
        for (t, color) in COLORS {
            let series: Vec<(f64, (f64, f64, f64))> = points
                .iter()
                .filter(|((pt, _), _)| pt == t)
                .filter_map(|((_, n), p)| Some((*n as f64, median_min_max(get(p))?)))
                .filter(|(_, (m, _, _))| *m > 0.0)
                .collect();
            if series.is_empty() {
                continue;
            }
            c.draw_series(LineSeries::new(
                series.iter().map(|(x, (m, _, _))| (*x, *m)),
                color.stroke_width(2),
            ))
            .map_err(|e| anyhow::anyhow!("{e}"))?
            .label(label(t))
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 18, y)], color.stroke_width(2)));
            c.draw_series(
                series
                    .iter()
                    .map(|(x, (m, _, _))| Circle::new((*x, *m), 3, color.filled())),
            )
            .map_err(|e| anyhow::anyhow!("{e}"))?;
            c.draw_series(series.iter().map(|(x, (_, lo, hi))| {
                PathElement::new([(*x, lo.max(1e-3)), (*x, *hi)], color.stroke_width(1))
            }))
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        }
        c.configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK.mix(0.3))
            .draw()
            .map_err(|e| anyhow::anyhow!("{e}"))?;
    }
    root.present().map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(())
}
