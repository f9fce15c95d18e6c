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
    /// Delegation tokens, as `hdfs fetchdt`: get an HDFS_DELEGATION_TOKEN (over Kerberos) and
    /// write it to FILE as a Credentials file Java reads (HADOOP_TOKEN_FILE_LOCATION); or renew,
    /// cancel or print the HDFS delegation tokens FILE holds.
    #[command(alias = "fetch-token")]
    Fetchdt {
        file: PathBuf,
        /// Short name of the user who may renew the token (default: none may).
        #[arg(long, default_value = "")]
        renewer: String,
        /// Renew the tokens of FILE (as their renewer) and print their new expiry.
        #[arg(long, conflicts_with_all = ["cancel", "print"])]
        renew: bool,
        /// Cancel the tokens of FILE.
        #[arg(long, conflicts_with = "print")]
        cancel: bool,
        /// Print the tokens of FILE.
        #[arg(long)]
        print: bool,
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
        HdfsCmd::Fetchdt {
            file,
            renewer,
            renew,
            cancel,
            print,
        } => fetchdt(&conf, &file, &renewer, renew, cancel, print)?,
    }
    Ok(())
}

/// `hotpath hdfs fetchdt`: see [`HdfsCmd::Fetchdt`].
fn fetchdt(
    conf: &conf::Configuration,
    file: &std::path::Path,
    renewer: &str,
    renew: bool,
    cancel: bool,
    print: bool,
) -> Result<()> {
    use hadoop_wire::token::{Credentials, KIND_HDFS_DELEGATION};
    use hdfs_io::namenode::NameNodeClient;
    use hdfs_io::tokens::{describe, read_credentials_file, write_credentials_file};

    if !(renew || cancel || print) {
        let nn = NameNodeClient::from_conf(conf)?;
        let token = nn
            .get_delegation_token(renewer)
            .context("getDelegationToken")?
            .ok_or_else(|| {
                anyhow::anyhow!("the NameNode issued no delegation token (is security on?)")
            })?;
        let mut creds = Credentials::new();
        creds.add_token(token.service.clone(), token.clone());
        write_credentials_file(file, &creds)?;
        println!(
            "Fetched token {} for {} into {}",
            describe(&token),
            token.service,
            file.display()
        );
        return Ok(());
    }
    let creds = read_credentials_file(file)?;
    let nn = if renew || cancel {
        Some(NameNodeClient::from_conf(conf)?)
    } else {
        None
    };
    for (_, t) in &creds.tokens {
        match &nn {
            None => println!("Token {} for {}", describe(t), t.service),
            Some(_) if t.kind != KIND_HDFS_DELEGATION => {
                println!(
                    "Skipped {} for {}: not an HDFS delegation token",
                    describe(t),
                    t.service
                )
            }
            Some(nn) if renew => {
                let until = nn
                    .renew_delegation_token(t)
                    .with_context(|| format!("renewing {}", describe(t)))?;
                println!(
                    "Renewed token for {} until: {}",
                    t.service,
                    hadoop_wire::token::delegation::format_time(until, 0)
                );
            }
            Some(nn) => {
                nn.cancel_delegation_token(t)
                    .with_context(|| format!("cancelling {}", describe(t)))?;
                println!("Cancelled token {} for {}", describe(t), t.service);
            }
        }
    }
    Ok(())
}
