//! `hotpath`: the one installed binary. Each subcommand parses its flags and calls the library
//! crate that does the work:
//!
//! | subcommand | module here | library |
//! |---|---|---|
//! | `agent` (the NodeManager), `container …` (talk to a running one) | `agent_cmd` | `nm-runtime` |
//! | `rm` (the ResourceManager) and its admin commands | `rm_cmd` | `rm-core` |
//! | `hdfs stat`, `cat`, `fetchdt` | `hdfs_cmd` | `hdfs-io` |
//! | `app run`, `am`, `kill`, `status` (a Rust DistributedShell) | `app_cmd` | `yarn-client` |
//! | `demo` (an embedded RM with four agents) | [`agent::demo`] | `rm-core`, `nm-runtime` |
//! | `hw` (topology and core plan) | here | `hw` |
//! | `decode` (captured protobuf bytes as JSON) | `decode` | `hadoop-wire`'s descriptors |
//!
//! Configuration comes from `HADOOP_CONF_DIR` through the `conf` crate; flags override it.
#![forbid(unsafe_code)]

mod agent_cmd;
mod app_cmd;
mod decode;
mod hdfs_cmd;
mod rm_cmd;

use std::io::Read;
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "hotpath",
    version,
    about = "Hadoop hot paths, natively: node agent, thin RM core, HDFS client"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Print this machine's topology and the core plan hotpath pins its threads by.
    Hw {
        /// One JSON object (`cores`, `pus`, `numa_nodes`, `plan: [{role, cpu}]`).
        #[arg(long)]
        json: bool,
        /// Which binary's plan to show.
        #[arg(long, value_enum, default_value = "agent")]
        role_set: RoleSet,
    },
    /// Decode captured Hadoop protobuf bytes and print them as JSON with proto field names.
    Decode {
        /// Message type, e.g. NodeHeartbeatRequestProto (short or full name). With --frame, the
        /// payload's type.
        message: String,
        /// Input file; `-` or absent reads standard input.
        file: Option<PathBuf>,
        /// The input is a whole IPC frame (4-byte length, RPC header, RequestHeaderProto, payload).
        #[arg(long, value_enum)]
        frame: Option<decode::FrameKind>,
    },
    /// The node agent: registers with the RM and heartbeats (yarn-site.xml from
    /// $HADOOP_CONF_DIR or --conf-dir; flags override).
    Agent(agent_cmd::AgentArgs),
    /// Talk to a running agent's control socket (container events, cleanup orders).
    Container(agent_cmd::ContainerArgs),
    /// Embedded rm-core + 4 agents with simulated containers on 127.0.0.2..5, live status
    /// line; ends on Ctrl-C or --duration.
    Demo(agent::demo::DemoArgs),
    /// The thin ResourceManager (ResourceTracker service), and its admin commands.
    Rm(rm_cmd::RmArgs),
    /// HDFS client: stat and cat (fs.defaultFS from core-site.xml).
    Hdfs(hdfs_cmd::HdfsArgs),
    /// A Rust DistributedShell: `app run … -- COMMAND` submits an application whose
    /// ApplicationMaster is this binary (`app am`).
    App(app_cmd::AppArgs),
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum RoleSet {
    Agent,
    Rm,
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    // The demo's own lines are its output: the daemons it embeds log warnings only, unless
    // HOTPATH_LOG says otherwise.
    let default_filter = match cli.cmd {
        Cmd::Demo(_) => "warn",
        _ => "info",
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("HOTPATH_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_filter)),
        )
        .with_writer(std::io::stderr)
        .init();
    match cli.cmd {
        Cmd::Hw { json, role_set } => cmd_hw(json, role_set),
        Cmd::Hdfs(args) => hdfs_cmd::run(args),
        Cmd::App(args) => std::process::exit(app_cmd::run(args)),
        Cmd::Rm(args) => rm_cmd::run(args),
        Cmd::Agent(args) => agent_cmd::run_agent(&args),
        Cmd::Container(args) => agent_cmd::run_container(&args),
        Cmd::Demo(args) => agent::demo::run(&args).map(drop).map_err(Into::into),
        Cmd::Decode {
            message,
            file,
            frame,
        } => {
            let bytes = read_input(file.as_deref())?;
            let value = match frame {
                None => decode::decode_message(&message, &bytes)?,
                Some(kind) => decode::decode_frame(&message, kind, &bytes)?,
            };
            print_out(&serde_json::to_string_pretty(&value)?)
        }
    }
}

/// Prints one line on stdout; a reader that went away (`hotpath decode … | head`) ends the
/// command quietly, as Unix tools do, instead of `println!`'s panic.
fn print_out(text: &str) -> Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match writeln!(out, "{text}").and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => Ok(r?),
    }
}

fn read_input(file: Option<&std::path::Path>) -> Result<Vec<u8>> {
    let mut bytes = Vec::new();
    match file {
        None => std::io::stdin().read_to_end(&mut bytes)?,
        Some(p) if p.as_os_str() == "-" => std::io::stdin().read_to_end(&mut bytes)?,
        Some(p) => {
            bytes = std::fs::read(p).with_context(|| format!("reading {}", p.display()))?;
            bytes.len()
        }
    };
    Ok(bytes)
}

fn cmd_hw(json: bool, role_set: RoleSet) -> Result<()> {
    let topo = hw::Topology::detect().context("detecting the CPU topology")?;
    let plan = match role_set {
        RoleSet::Agent => hw::Plan::for_agent(&topo),
        RoleSet::Rm => hw::Plan::for_rm(&topo),
    };
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&hw::report_json(&topo, &plan))?
        );
    } else {
        print!("{}", hw::report_text(&topo, &plan));
    }
    Ok(())
}
