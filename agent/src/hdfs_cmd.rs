//! `hotpath hdfs …`: thin wiring of `hdfs-io` to the command line.
//! Addresses come from `fs.defaultFS` / `dfs.*` in `$HADOOP_CONF_DIR` (or `--conf-dir`).

use std::io::Write;
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use hdfs_io::dfs::DfsClient;

#[derive(Args)]
pub struct HdfsArgs {
    /// Directory with core-site.xml / hdfs-site.xml (default: $HADOOP_CONF_DIR).
    #[arg(long, global = true)]
    conf_dir: Option<PathBuf>,
    /// Override a configuration key (`key=value`, repeatable).
    #[arg(long = "set", global = true, value_name = "KEY=VALUE")]
    set: Vec<String>,
    #[command(subcommand)]
    cmd: HdfsCmd,
}

#[derive(Subcommand)]
enum HdfsCmd {
    /// getFileInfo of PATH.
    Stat {
        path: String,
        #[arg(long)]
        json: bool,
    },
    /// Read PATH (or a range of it) to standard output, checksums verified.
    Cat {
        path: String,
        #[arg(long, default_value_t = 0)]
        offset: u64,
        #[arg(long)]
        length: Option<u64>,
    },
}

pub fn run(args: HdfsArgs) -> Result<()> {
    let conf = conf::Configuration::from_flags(args.conf_dir.as_deref(), &args.set)
        .context("reading the Hadoop configuration")?;
    match args.cmd {
        HdfsCmd::Stat { path, json } => {
            let client = DfsClient::from_conf(&conf)?;
            let st = client.stat(&path)?;
            if json {
                let v = serde_json::json!({
                    "path": path,
                    "type": hdfs_io::dfs::type_name(st.file_type),
                    "length": st.length,
                    "permission": format!("{:o}", st.permission),
                    "owner": st.owner,
                    "group": st.group,
                    "modification_time": st.modification_time,
                    "access_time": st.access_time,
                    "replication": st.block_replication,
                    "blocksize": st.blocksize,
                    "file_id": st.file_id,
                    "children": st.children_num,
                });
                println!("{v}");
            } else {
                println!(
                    "{} {} {} {} {:>12} {} {}",
                    st.mode_string(),
                    st.block_replication,
                    st.owner,
                    st.group,
                    st.length,
                    st.modification_time,
                    path
                );
            }
        }
        HdfsCmd::Cat {
            path,
            offset,
            length,
        } => {
            let client = DfsClient::from_conf(&conf)?;
            let stdout = std::io::stdout();
            let mut out = std::io::BufWriter::with_capacity(1 << 20, stdout.lock());
            let stats = client.read(&path, offset, length, &mut out)?;
            out.flush()?;
            tracing::debug!(?stats, "read done");
        }
    }
    Ok(())
}
