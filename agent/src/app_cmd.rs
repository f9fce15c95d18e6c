//! `hotpath app run|am|kill|status`: the flags. The commands themselves are
//! `yarn_client::app_commands` (a Rust DistributedShell client and ApplicationMaster); see its
//! docs for what each does and its exit codes.

use std::path::PathBuf;

use clap::{Args, Subcommand};
use yarn_client::app_commands::{
    self, AmOptions, ConfSource, RunOptions, Target, EXIT_CLIENT_ERROR,
};

#[derive(Args)]
pub struct AppArgs {
    #[command(subcommand)]
    cmd: AppCmd,
}

#[derive(Subcommand)]
enum AppCmd {
    /// Submit a DistributedShell application running COMMAND in N containers, and follow it.
    Run(RunArgs),
    /// The ApplicationMaster (started by `app run` in the AM container, not by hand).
    Am(AmArgs),
    /// Kill an application (as the current user).
    Kill(TargetArgs),
    /// Print an application's report (what the RM lets the current user see).
    Status(TargetArgs),
}

#[derive(Args)]
struct TargetArgs {
    #[command(flatten)]
    conf: ConfArgs,
    /// The RM's client address (overrides `yarn.resourcemanager.address`).
    #[arg(long, value_name = "HOST:PORT")]
    rm: Option<String>,
    /// Connect attempts to the RM before giving up.
    #[arg(long, default_value_t = 6)]
    connect_attempts: u32,
    /// The application, `application_<cluster timestamp>_<sequence>`.
    app_id: String,
}

#[derive(Args)]
struct ConfArgs {
    /// Directory with the site files (default: $HADOOP_CONF_DIR).
    #[arg(long)]
    conf_dir: Option<PathBuf>,
    /// Override a configuration key (`key=value`, repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
}

#[derive(Args)]
struct RunArgs {
    #[command(flatten)]
    conf: ConfArgs,
    /// The RM's client address (overrides `yarn.resourcemanager.address`).
    #[arg(long, value_name = "HOST:PORT")]
    rm: Option<String>,
    /// The RM's scheduler address the AM dials (overrides
    /// `yarn.resourcemanager.scheduler.address`; a wildcard host there, such as the default
    /// `0.0.0.0`, is replaced by the RM's host).
    #[arg(long, value_name = "HOST:PORT")]
    scheduler: Option<String>,
    /// Service data for a NodeManager auxiliary service, sent with every shell container's
    /// start (`NAME=VALUE`, repeatable; as MapReduce sends its job token to `mapreduce_shuffle`).
    /// A NodeManager without that service refuses the start.
    #[arg(long = "service-data", value_name = "NAME=VALUE")]
    service_data: Vec<String>,
    /// Containers to run COMMAND in.
    #[arg(long, default_value_t = 1)]
    containers: u32,
    /// Memory per container (MB).
    #[arg(long, default_value_t = 128)]
    memory: i64,
    /// Virtual cores per container.
    #[arg(long, default_value_t = 1)]
    vcores: i32,
    /// The containers' priority.
    #[arg(long, default_value_t = 0)]
    priority: i32,
    /// Memory of the AM container (MB).
    #[arg(long, default_value_t = 256)]
    am_memory: i64,
    /// Application name.
    #[arg(long, default_value = "hotpath-shell")]
    name: String,
    /// Queue.
    #[arg(long, default_value = "default")]
    queue: String,
    /// Give up after this many seconds: the application is killed.
    #[arg(long, default_value_t = 600)]
    timeout: u64,
    /// Ship this binary to the AM container as a `file:` LocalResource instead of running it
    /// from its path.
    #[arg(long)]
    ship_binary: bool,
    /// Connect attempts to the RM before giving up (with backoff, 0.2 s doubling to 3 s).
    #[arg(long, default_value_t = 6)]
    connect_attempts: u32,
    /// The AM's allocate interval (ms).
    #[arg(long, default_value_t = 250)]
    heartbeat_ms: u64,
    /// How often the client polls the RM and the AM (ms).
    #[arg(long, default_value_t = 500)]
    poll_ms: u64,
    /// The command (bash), after `--`. One word is a whole bash command line.
    #[arg(last = true, required = true, value_name = "COMMAND")]
    command: Vec<String>,
}

#[derive(Args)]
struct AmArgs {
    #[command(flatten)]
    conf: ConfArgs,
    #[arg(long)]
    containers: u32,
    #[arg(long)]
    memory: i64,
    #[arg(long)]
    vcores: i32,
    #[arg(long, default_value_t = 0)]
    priority: i32,
    /// The RM's scheduler address (overrides `yarn.resourcemanager.scheduler.address`).
    #[arg(long)]
    scheduler: Option<String>,
    /// The command, hex-encoded UTF-8 (it passes the launch script untouched).
    #[arg(long)]
    command_hex: String,
    /// `NAME=VALUE` service data for the shell containers, hex-encoded (repeatable).
    #[arg(long = "service-data-hex")]
    service_data_hex: Vec<String>,
    #[arg(long, default_value_t = 250)]
    heartbeat_ms: u64,
    /// Give up (FAILED) after this many seconds.
    #[arg(long, default_value_t = 600)]
    timeout_s: u64,
    /// Wait at most this long (ms) for the client to fetch the final status before unregistering.
    #[arg(long, default_value_t = 5000)]
    linger_ms: u64,
}

/// Runs the subcommand; the process exit code.
pub fn run(args: AppArgs) -> i32 {
    let r = match args.cmd {
        AppCmd::Run(a) => app_commands::run(&a.into()),
        AppCmd::Am(a) => app_commands::am(&a.into()),
        AppCmd::Kill(a) => app_commands::kill(&a.into()),
        AppCmd::Status(a) => app_commands::status(&a.into()),
    };
    match r {
        Ok(code) => code,
        Err(e) => {
            eprintln!("hotpath app: error: {:#}", anyhow::Error::from(e));
            EXIT_CLIENT_ERROR
        }
    }
}

impl From<ConfArgs> for ConfSource {
    fn from(c: ConfArgs) -> ConfSource {
        ConfSource {
            conf_dir: c.conf_dir,
            set: c.set,
        }
    }
}

impl From<TargetArgs> for Target {
    fn from(a: TargetArgs) -> Target {
        Target {
            conf: a.conf.into(),
            rm: a.rm,
            connect_attempts: a.connect_attempts,
            app_id: a.app_id,
        }
    }
}

impl From<RunArgs> for RunOptions {
    fn from(a: RunArgs) -> RunOptions {
        RunOptions {
            conf: a.conf.into(),
            rm: a.rm,
            scheduler: a.scheduler,
            service_data: a.service_data,
            containers: a.containers,
            memory: a.memory,
            vcores: a.vcores,
            priority: a.priority,
            am_memory: a.am_memory,
            name: a.name,
            queue: a.queue,
            timeout: a.timeout,
            ship_binary: a.ship_binary,
            connect_attempts: a.connect_attempts,
            heartbeat_ms: a.heartbeat_ms,
            poll_ms: a.poll_ms,
            command: a.command,
        }
    }
}

impl From<AmArgs> for AmOptions {
    fn from(a: AmArgs) -> AmOptions {
        AmOptions {
            conf: a.conf.into(),
            containers: a.containers,
            memory: a.memory,
            vcores: a.vcores,
            priority: a.priority,
            scheduler: a.scheduler,
            command_hex: a.command_hex,
            service_data_hex: a.service_data_hex,
            heartbeat_ms: a.heartbeat_ms,
            timeout_s: a.timeout_s,
            linger_ms: a.linger_ms,
        }
    }
}
