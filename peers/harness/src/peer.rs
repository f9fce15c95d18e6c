//! One launcher JVM: start, READY, commands, stop.
//!
//! The launcher (`peers/hadoop`, class `hotpath.peer.Launcher`) takes `MODE --conf-dir DIR
//! [--work-dir DIR] [--set key=value]... [--log-level LEVEL|logger=LEVEL]...` plus:
//! `hdfs`/`hdfs-ha`: `--datanodes N` (3), `--block-size BYTES` (1 MiB), `--racks /a,/b,..`,
//! `--shared-ip true` (all DataNodes on 127.0.0.1), `--kerberos true` (a MiniKdc and a
//! Kerberized cluster, see [`Kerberos`]); `yarn-rm`: `--nms K` (0), `--profile agents`
//! (defaults for running apps on external NodeManagers, each overridable by `--set`: FifoScheduler,
//! `yarn.scheduler.minimum-allocation-mb` 128, `yarn.resourcemanager.am.max-attempts` 2,
//! `yarn.nm.liveness-monitor.expiry-interval-ms` 10000,
//! `yarn.client.nodemanager-connect.max-wait-ms` 5000 / `retry-interval-ms` 1000,
//! `yarn.am.liveness-monitor.expiry-interval-ms` 30000, in-JVM NMs 4096 MB / 8 vcores);
//! `yarn-nm`: `--rm HOST:PORT` (required unless `--kerberos true`: a MiniKdc holding
//! `nm/localhost`, `HTTP/localhost`, `rm/localhost` and `client`, a Kerberized NM, READY `kerberos`
//! with their keytabs; then `nm-start HOST:PORT [KEY=VALUE...]` starts the NM); `sasl`: `--nm-key-id N --nm-key HEX` (both required:
//! the NMToken master key, raw bytes in hex, normally 8). `--set` values go into the services'
//! configuration and into the written site file.
//!
//! It writes `core-site.xml`, `hdfs-site.xml` / `yarn-site.xml` into the conf dir, prints
//! `READY {json}`, then answers one command per line with one JSON line, `{"ok":true,...}` or
//! `{"ok":false,"error":"<class>: <first message line>",...}`; a failure also carries
//! `exception_class` (for a Hadoop `RemoteException` the server-side class it names),
//! `message` (the whole `getMessage()`), `cause_class`, `cause_message` (null when there is no
//! cause), `remote` (a `RemoteException` in the cause chain: the other side said it) and, when
//! the RPC response had one, `error_code` (see [`JavaException`]). Arguments are separated by
//! whitespace. Commands:
//!
//! | mode | command | reply |
//! |---|---|---|
//! | all | `ping` | `{}` |
//! | hdfs, hdfs-ha | `write PATH BYTES [BLOCKSIZE] [REPLICATION]` | `sha256`, `blocks`, `seconds` (content: [`crate::content`]) |
//! | | `mkfiles DIR K` | creates `DIR/f0 .. DIR/f<K-1>` (empty) |
//! | | `delete PATH` | recursive |
//! | | `block-locations PATH` | per block: id, offset, length, locations (`dn_index`, `xfer`, `rack`, ...) |
//! | | `datanodes` | every DataNode slot with the active NameNode's view (`nn_alive`, ...) |
//! | | `dn-stop I` | DataNode I shuts down (sockets closed; the NameNode is not told and marks it dead only after the heartbeat expiry, 10.5 min by default) |
//! | | `dn-dead I` | `dn-stop I`, then the NameNode marks it dead at once |
//! | | `dn-restart I` | (stop and) start DataNode I again, same address and xfer/ipc ports |
//! | | `corrupt PATH BLOCK REPLICA` | flips bytes of that replica's block file; says which DataNode |
//! | | `namenodes` | each NameNode's state, addresses, `rpc_requests` (client port total) |
//! | hdfs-ha | `failover TO` | the active NameNode to standby, then standby NameNode TO to active: `from`, `to`, `namenodes` |
//! | | `transition I standby\|observer` | NameNode I (not the active) to that state: `namenodes` |
//! | yarn-rm | `nodes` | the RM context's nodes: id, state, memory/vcores, `last_heartbeat_ms_ago`, `response_id`, launched/completed containers; `inactive` nodes too |
//! | | `nm-stop I` | stops in-JVM NodeManager I (it unregisters) |
//! | | `app-submit KEY=VALUE...` | submits the `hotpath.peer.ShellAm` app through `YarnClient` (keys: `mode` shell\|bench, `containers` (1), `exit` `I:CODE,...`, `stop` `I,...` (runs `sleep 600`, stopped by the AM: −105), `sleep` `I:SECS,...`, `am_mb` (256), `container_mb` (128), `container_vcores` (1), `fail_attempt` (0: attempts ≤ N exit 3), `result` FILE (required), `shared` DIR (default under the app dir), `queue` (default), `per_node` (bench, 4), `timeout_s` (AM, 300), `heartbeat_ms` (AM→RM, 200), `name`): `app_id`, `app_dir`, `shared`, `result`, `am_command`, `am_classpath`, `local_resources` {name: `path`, `size`, `timestamp`, `type`, `visibility`} |
//! | | `app-wait APP_ID [TIMEOUT_S]` (120) | polls until the client report and the RM's app and attempts are final: `timed_out`, `state`, `rm_app_state`, `final_status`, `diagnostics`, `attempt_count`, `attempts` [{`attempt_id`, `attempt`, `state`, `am_container_id`, `am_node_id`, `am_container_exit_status` (only for an attempt the AM container's exit ended; else −1000), `diagnostics`}], `current_attempt_id` |
//! | | `app-kill APP_ID` | `killApplication`, then `app-wait APP_ID 30` |
//! | yarn-nm | `status`, `nm-stop`, `nm-start` | NodeManager state (`containers`: how many it holds, `applications` {id: state}); stop unregisters; start re-registers with the same NodeId |
//! | sasl | `mint-nm-token ADDR ATTEMPT_ID USER FILE [key-id=N] [key=HEX] [service=HOST:PORT] [format=writable\|protobuf]` | Hadoop's `BaseNMTokenSecretManager.createNMToken` with the mode's key (or the given one): identifier (attempt, NodeId(ADDR), USER, key id), HMAC password, service = `buildTokenService(service or ADDR)`; written with `Credentials.writeTokenStorageFile` (alias = service; default format writable). `identifier`, `password` (base64), `kind`, `service`, `key_id`, `node_id`, `format`, `file` |
//! | | `read-credentials FILE` | `Credentials.readTokenStorageFile`: `tokens` [{`alias`, `kind`, `service`, `identifier`, `password` (base64), NMTokens also `nm_token` {`app_attempt_id`, `node_id`, `app_submitter`, `key_id`} or `nm_token_error`}], `secrets` [{`alias`, `value` (base64)}], `format` (`writable`/`protobuf` from byte 4) |
//! | | `call ADDR TOKENFILE PROTECTION [CONTAINER_ID ...]` | Java IPC client: new UGI named after the file's NMToken attempt id, holding the file's tokens; `hadoop.rpc.protection=PROTECTION`, SIMPLE otherwise (the token makes it SASL); one `getContainerStatuses` (default id `container_1_0001_01_000001`); stopProxy. `failed` {id: message}, `ms` (UGI creation to answer), `stop_ms`, `user`. No connect retries, 20 s connect and 60 s RPC timeout (a peer that drops a bad MAC silently fails the call instead of hanging the launcher) |
//! | | `bench-connect ADDR TOKENFILE PROTECTION N` | N × the whole of `call` after `warmup` (= clamp(N/5, 2, 20)) unmeasured ones: `n`, `warmup`, `mean_us`, `p50_us`, `p99_us`, `min_us`, `max_us` (UGI to answer), `stop_mean_us`, `process_cpu_us_per_iter` (whole JVM, so it includes the Java servers when ADDR is one; Linux counts it in 10 ms ticks: use N ≥ 100), `caller_thread_cpu_us_per_iter` (the calling thread does the SASL handshake; the reply is read on the connection's thread), `wall_s` |
//! | | `jdk-server-new ID PROTOCOL SERVERNAME QOPS USER PASSWORD` | JDK DIGEST-MD5 `SaslServer` (PROTOCOL `-` = ""; props `qop`=QOPS, `server.authentication`=true; knows only USER; authorized iff authzid = authid): `challenge` (base64 of `evaluateResponse([])`) |
//! | | `jdk-server-step ID B64` | `token` (base64, null if the JDK returned null), `complete`; once complete `qop`, and `cipher` for auth-conf (taken from the response's cipher directive) |
//! | | `jdk-client-new ID PROTOCOL SERVERNAME QOPS USER PASSWORD [AUTHZID\|-] [CIPHER\|-]` | JDK DIGEST-MD5 `SaslClient` (CIPHER sets `com.sun.security.sasl.digest.cipher`): `{}` |
//! | | `jdk-client-step ID B64` | as `jdk-server-step` (`evaluateChallenge`) |
//! | | `jdk-wrap ID B64`, `jdk-unwrap ID B64` | `token` / `plain` (base64; the JDK unwraps a bad MAC to empty); errors as above |
//! | | `jdk-dispose ID` | `existed`. `ID` is any word; `-new` on an existing ID replaces it. `B64` = standard padded base64, `-` = empty |
//! | | `bench-wrap QOP CIPHER\|- BYTES SECONDS` | in-process JDK client/server at QOP (protocol "", server "default"); 1 s warm-up, then client wrap + server unwrap of BYTES for SECONDS: `mb_per_s` (10^6 bytes per second of wrap+unwrap time), `iterations`, `warmup_iterations`, `wrap_ns`, `unwrap_ns` (means), `qop`, `cipher`, `bytes`, `wrapped_bytes` |
//!
//! `yarn-rm` READY also has `profile`, `scheduler`, `minimum_allocation_mb`, `am_max_attempts`,
//! `am_conf_dir` (the running cluster's conf as the AMs' yarn-site.xml), `am_conf_scheduler_address`,
//! `am_conf_has_bound_ports` (startup fails if the bound ports are not in it).
//!
//! `yarn-rm --kerberos true`: a MiniKdc (realm `EXAMPLE.COM`) holding `rm/localhost` +
//! `HTTP/localhost` (`rm_keytab`), `nm/localhost` and `nm/<canonical local host>` (`nm_keytab`,
//! for joining NodeManagers) and `client` (`client_keytab`); the RM runs as `rm/localhost@REALM`
//! with `hadoop.rpc.protection` `authentication` unless `--set`; the application commands run as
//! `client`. READY `kerberos`: `realm`, `kdc`, `krb5_conf`, `client_principal`, `client_keytab`,
//! `rm_principal`, `rm_keytab`, `nm_principal`, `nm_host_principal`, `nm_keytab`,
//! `rpc_protection`.
//!
//! `hdfs --kerberos true` (and `hdfs-ha`: all three NameNodes alike) READY also has `kerberos` ([`Peer::kerberos`]): a MiniKdc (realm
//! `EXAMPLE.COM`, TCP) holding `hdfs/localhost` + `HTTP/localhost` (service keytab) and `client`
//! (client keytab); NameNode and DataNodes run as `hdfs/localhost@REALM` with
//! `hadoop.security.authentication=kerberos`, service authorization, block access tokens, SASL
//! data transfer protection (`ignore.secure.ports.for.testing`), and `hadoop.rpc.protection` /
//! `dfs.data.transfer.protection` = `authentication,integrity,privacy` unless `--set`. The
//! written core-site/hdfs-site carry the client's side of those keys. The peer's own commands run
//! as `hdfs/localhost`.
//!
//! `sasl` READY: `servers` {`authentication`, `integrity`, `privacy`: `127.0.0.1:PORT`}, `nm_key_id`.
//! Each is a Hadoop IPC server for ContainerManagementProtocol with `hadoop.security.authentication`
//! forced to TOKEN (as the NodeManager does) at that `hadoop.rpc.protection`, with its own real
//! `NMTokenSecretManagerInNM` (master key from the arguments, NodeId = its own address);
//! `getContainerStatuses` answers every id as a failed request with the message
//! `user=<remote user short name> auth=<its AuthenticationMethod> ids=<n>`; all other methods throw
//! `YarnException("not served by the hotpath sasl peer")`.
//!
//! Closing stdin stops everything; with `--delete-on-exit DIR` the JVM then removes DIR.

use std::fmt;
use std::fs::{self, File};
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, ToSocketAddrs};
use std::ops::{Deref, DerefMut};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::build::{ensure_built, Build};
use crate::driver::{self, Driver};
use crate::error::{tail, PeerError};

/// READY `kerberos` of `hdfs` / `hdfs-ha --kerberos true`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kerberos {
    /// `EXAMPLE.COM`.
    pub realm: String,
    /// `localhost:PORT` (TCP).
    pub kdc: String,
    /// The krb5.conf MiniKdc wrote (for `KRB5_CONFIG`).
    pub krb5_conf: PathBuf,
    /// `client@REALM`, the only principal in `client_keytab`.
    pub client_principal: String,
    pub client_keytab: PathBuf,
    /// `hdfs/localhost@REALM` (NameNode and DataNodes).
    pub namenode_principal: String,
    /// `hdfs/localhost` and `HTTP/localhost`.
    pub service_keytab: PathBuf,
    /// The cluster's `hadoop.rpc.protection`.
    pub rpc_protection: String,
}

impl Kerberos {
    /// Makes this process a Kerberos client of the peer's realm, the MIT way: `KRB5_CONFIG` =
    /// the KDC's krb5.conf, `KRB5CCNAME` = `FILE:<dir>/ccache` holding the client's TGT
    /// (`kinit -kt client_keytab client_principal`), and neither `KRB5_CLIENT_KTNAME` nor
    /// `HADOOP_TOKEN_FILE_LOCATION`, so the ticket is the process's only credential. MIT's
    /// environment is process-wide: call it under the peer's lock. Returns the cache's path.
    pub fn kinit_process(&self, dir: &Path) -> Result<PathBuf, PeerError> {
        let cache = dir.join("ccache");
        std::env::set_var("KRB5_CONFIG", &self.krb5_conf);
        std::env::set_var("KRB5CCNAME", format!("FILE:{}", cache.display()));
        std::env::remove_var("KRB5_CLIENT_KTNAME");
        std::env::remove_var("HADOOP_TOKEN_FILE_LOCATION");
        let out = Command::new("kinit")
            .arg("-kt")
            .arg(&self.client_keytab)
            .arg(&self.client_principal)
            .output()
            .map_err(|e| PeerError::Io {
                what: "running kinit (krb5-user, installed by scripts/setup.sh)".into(),
                source: e,
            })?;
        if !out.status.success() {
            return Err(PeerError::Command {
                command: format!(
                    "kinit -kt {:?} {}",
                    self.client_keytab, self.client_principal
                ),
                error: String::from_utf8_lossy(&out.stderr).into_owned(),
            });
        }
        Ok(cache)
    }

    /// Leaves this process without Kerberos credentials: `KRB5CCNAME` names an empty cache
    /// (`FILE:<dir>/empty-ccache`, so MIT does not fall back to `/tmp/krb5cc_UID`) and no
    /// `KRB5_CLIENT_KTNAME`. `KRB5_CONFIG` stays.
    pub fn clear_process_credentials(dir: &Path) {
        std::env::set_var(
            "KRB5CCNAME",
            format!("FILE:{}", dir.join("empty-ccache").display()),
        );
        std::env::remove_var("KRB5_CLIENT_KTNAME");
    }

    /// Makes this process a Kerberos client of the realm whose krb5.conf is `krb5_conf` (from
    /// any peer's READY) without credentials: `KRB5_CONFIG` = `krb5_conf`, no
    /// `HADOOP_TOKEN_FILE_LOCATION`, and [`Kerberos::clear_process_credentials`]; only a login
    /// from a keytab of its own (`ipc::kerberos::MitGss::from_keytab`) gets a ticket. MIT's
    /// environment is process-wide: call it under the peer's lock.
    pub fn realm_process(krb5_conf: &Path, dir: &Path) {
        std::env::set_var("KRB5_CONFIG", krb5_conf);
        std::env::remove_var("HADOOP_TOKEN_FILE_LOCATION");
        Self::clear_process_credentials(dir);
    }

    /// [`Kerberos::realm_process`], then MIT's client keytab: `KRB5_CLIENT_KTNAME` = `keytab`
    /// and `KRB5CCNAME` = `FILE:<dir>/ccache`, empty until a context needs a ticket and MIT
    /// gets it from the keytab (for the principal named, or the keytab's first). Returns the
    /// cache's path.
    pub fn client_keytab_process(krb5_conf: &Path, keytab: &Path, dir: &Path) -> PathBuf {
        Self::realm_process(krb5_conf, dir);
        let cache = dir.join("ccache");
        std::env::set_var("KRB5CCNAME", format!("FILE:{}", cache.display()));
        std::env::set_var("KRB5_CLIENT_KTNAME", keytab);
        cache
    }
}

/// What the launcher runs (its first argument).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// MiniDFSCluster: one NameNode, N DataNodes (`--datanodes`, default 3) on 127.0.0.2..
    /// in racks /r1, /r1, /r2.
    Hdfs,
    /// Active (nn0) + standby (nn1) + observer (nn2) NameNodes and N DataNodes.
    HdfsHa,
    /// A ResourceManager (MiniYARNCluster) with `--nms K` in-JVM NodeManagers (default 0).
    YarnRm,
    /// ResourceManager HA: `--rms N` (2 or 3) real RMs in one MiniYARNCluster with HA on,
    /// manual failover (no ZooKeeper), fixed loopback ports and a shared FileSystemRMStateStore
    /// (applications survive a failover); rm0 starts active. Commands: `active`, `failover
    /// FROM TO`, `stop I`, `start I`, `transition I active|standby`, `nodes`, `app-submit`,
    /// `app-wait`: see `peers/hadoop/src/main/java/hotpath/peer/YarnRmHaMode.java`.
    YarnRmHa,
    /// One NodeManager registered with `--rm HOST:PORT`.
    YarnNm,
    /// Hadoop's client side against any RM (`--rm HOST:PORT --scheduler HOST:PORT`): a
    /// `YarnClient` for the ShellAm application, the report calls and the `yarn application` /
    /// `yarn node` command-line classes.
    YarnClient,
    /// Hadoop's and the JDK's SASL/DIGEST-MD5/token code (`--nm-key-id N --nm-key HEX`): three
    /// TOKEN-only ContainerManagementProtocol servers, token minting, a Java IPC client, JDK
    /// SASL sessions.
    Sasl,
    /// The MapReduce peer (`peers/hadoop-mr`, its own unshaded classpath): a Java RM set up for
    /// MapReduce (`MiniMRYarnCluster` with no NodeManagers) and Hadoop 3.5.0's MR client in one
    /// JVM. Commands `nodes`, `submit sleep|wordcount KEY=VALUE...`, `wait JOB_ID [TIMEOUT_S]`,
    /// `status JOB_ID`, `kill JOB_ID`: see `peers/hadoop-mr/src/main/java/hotpath/mr/MrRm.java`.
    MrRm,
    /// The MapReduce peer without an RM of its own: Hadoop 3.5.0's MR client submitting to the
    /// RM that `--set yarn.resourcemanager.address=HOST:PORT` and `--set
    /// yarn.resourcemanager.scheduler.address=HOST:PORT` name (`hotpath rm`, say), with the
    /// job configuration `mr-rm` gives (local staging, `yarn.is.minicluster`). The same
    /// commands as [`Mode::MrRm`] (`nodes` and `am-node` through a `YarnClient`).
    MrClient,
    /// Hadoop 3.5.0's own `ShuffleHandler` hosted standalone by the MapReduce peer
    /// (`--local-dirs DIR[,DIR]`, `--set K=V`): READY carries `port`; commands `init-app USER
    /// APP_ID SERVICE_DATA_HEX`, `stop-app APP_ID`, and `fetch URL SECRET_HEX
    /// [ssl-conf-dir=DIR]` (one request as the Fetcher makes it, over HTTP or HTTPS): see
    /// `peers/hadoop-mr/src/main/java/hotpath/mr/MrShuffle.java`.
    MrShuffle,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Hdfs => "hdfs",
            Mode::HdfsHa => "hdfs-ha",
            Mode::YarnRm => "yarn-rm",
            Mode::YarnRmHa => "yarn-rm-ha",
            Mode::YarnNm => "yarn-nm",
            Mode::YarnClient => "yarn-client",
            Mode::Sasl => "sasl",
            Mode::MrRm => "mr-rm",
            Mode::MrClient => "mr-client",
            Mode::MrShuffle => "mr-shuffle",
        }
    }

    /// The launcher class that runs this mode.
    pub fn launcher_class(self) -> &'static str {
        match self {
            Mode::MrRm | Mode::MrClient | Mode::MrShuffle => "hotpath.mr.MrLauncher",
            _ => "hotpath.peer.Launcher",
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Start options beyond the launcher's own arguments.
#[derive(Debug, Clone)]
pub struct Options {
    /// How long to wait for READY (default 180 s).
    pub start_timeout: Duration,
    /// How long to wait for each command's reply (default 300 s).
    pub command_timeout: Duration,
    /// Keep the temp dir (conf, data, launcher.log) after the peer stops; also on when the
    /// environment variable `HOTPATH_PEER_KEEP` is set to anything but `0`.
    pub keep_dir: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            start_timeout: Duration::from_secs(180),
            command_timeout: Duration::from_secs(300),
            keep_dir: std::env::var("HOTPATH_PEER_KEEP").is_ok_and(|v| !v.is_empty() && v != "0"),
        }
    }
}

/// A DataNode as READY and `datanodes` describe it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataNode {
    /// Stable index used by `dn-stop I`, `dn-restart I`, ...
    pub index: usize,
    /// The host name it registers with (its own loopback address, e.g. `127.0.0.2`).
    pub host: String,
    pub rack: String,
    /// Data transfer address (what a client connects to with `dfs.client.use.datanode.hostname`).
    pub xfer: SocketAddr,
    pub ipc: SocketAddr,
    pub uuid: String,
}

/// A running launcher JVM. Dropping it stops the JVM (stdin EOF, then kill after 30 s).
pub struct Peer {
    mode: Mode,
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    ready: Value,
    conf_dir: PathBuf,
    log_path: PathBuf,
    startup: Duration,
    command_timeout: Duration,
    broken: Option<String>,
    build: Build,
    // last field: the directory is removed after the JVM is gone (Drop runs first)
    _dir: Option<tempfile::TempDir>,
}

impl fmt::Debug for Peer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Peer")
            .field("mode", &self.mode)
            .field("pid", &self.child.id())
            .field("conf_dir", &self.conf_dir)
            .finish_non_exhaustive()
    }
}

impl Peer {
    /// Builds the peer if needed and starts `mode` with the launcher arguments `args`
    /// (e.g. `["--nms", "1"]`, `["--set", "key=value"]`), waiting for READY.
    pub fn start(mode: Mode, args: &[&str]) -> Result<Peer, PeerError> {
        Peer::start_with(mode, args, Options::default())
    }

    pub fn start_with(mode: Mode, args: &[&str], opts: Options) -> Result<Peer, PeerError> {
        let build = match mode {
            Mode::MrRm | Mode::MrClient | Mode::MrShuffle => crate::build::ensure_built_mr()?,
            _ => ensure_built()?,
        };
        let dir = tempfile::Builder::new()
            .prefix(&format!("hotpath-peer-{mode}-"))
            .tempdir()
            .map_err(|e| PeerError::io("create the peer's temp dir", e))?;
        let conf_dir = dir.path().join("conf");
        let work_dir = dir.path().join("work");
        let log_path = dir.path().join("launcher.log");
        for d in [&conf_dir, &work_dir] {
            fs::create_dir_all(d).map_err(|e| PeerError::io(format!("mkdir {d:?}"), e))?;
        }
        let log = File::create(&log_path)
            .map_err(|e| PeerError::io(format!("create {log_path:?}"), e))?;

        let mut cmd = build.java_command(mode.launcher_class());
        cmd.arg(mode.as_str())
            .arg("--conf-dir")
            .arg(&conf_dir)
            .arg("--work-dir")
            .arg(&work_dir);
        if !opts.keep_dir {
            // if this process dies, the JVM still cleans up after itself
            cmd.arg("--delete-on-exit").arg(dir.path());
        }
        cmd.args(args)
            .current_dir(&work_dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(log);
        let t0 = Instant::now();
        let mut child = cmd
            .spawn()
            .map_err(|e| PeerError::io(format!("start {:?}", build.java), e))?;
        let stdin = child.stdin.take();
        let (tx, lines) = mpsc::channel();
        if let Some(out) = child.stdout.take() {
            let spawned = thread::Builder::new()
                .name(format!("peer-{mode}-stdout"))
                .spawn(move || {
                    for line in BufReader::new(out).lines() {
                        match line {
                            Ok(l) => {
                                if tx.send(l).is_err() {
                                    break;
                                }
                            }
                            Err(_) => break,
                        }
                    }
                });
            if let Err(e) = spawned {
                let _ = child.kill();
                let _ = child.wait();
                return Err(PeerError::io("spawn the stdout reader thread", e));
            }
        }
        let dir = if opts.keep_dir {
            let kept = dir.keep();
            eprintln!("peer-harness: {mode} keeps its files in {kept:?}");
            None
        } else {
            Some(dir)
        };
        let mut peer = Peer {
            mode,
            child,
            stdin,
            lines,
            ready: Value::Null,
            conf_dir,
            log_path,
            startup: Duration::ZERO,
            command_timeout: opts.command_timeout,
            broken: None,
            build,
            _dir: dir,
        };
        peer.wait_ready(t0, opts.start_timeout)?;
        Ok(peer)
    }

    fn wait_ready(&mut self, t0: Instant, timeout: Duration) -> Result<(), PeerError> {
        let deadline = t0 + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    // anything before READY is not ours (a JVM warning, say): skip it
                    let Some(json) = line.strip_prefix("READY ") else {
                        continue;
                    };
                    self.ready = serde_json::from_str(json).map_err(|e| PeerError::Protocol {
                        mode: self.mode.to_string(),
                        line: line.clone(),
                        reason: e.to_string(),
                    })?;
                    self.startup = t0.elapsed();
                    return Ok(());
                }
                Err(RecvTimeoutError::Timeout) => {
                    let log = tail(&self.log_path, 80);
                    return Err(PeerError::StartTimeout {
                        mode: self.mode.to_string(),
                        timeout,
                        log_path: self.log_path.clone(),
                        log,
                    });
                }
                Err(RecvTimeoutError::Disconnected) => {
                    let status = match self.child.wait() {
                        Ok(s) => s.to_string(),
                        Err(e) => format!("unknown: {e}"),
                    };
                    return Err(PeerError::Exited {
                        mode: self.mode.to_string(),
                        status,
                        log_path: self.log_path.clone(),
                        log: tail(&self.log_path, 80),
                    });
                }
            }
        }
    }

    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// The READY object.
    pub fn ready(&self) -> &Value {
        &self.ready
    }

    /// The directory holding core-site.xml, hdfs-site.xml, yarn-site.xml (HADOOP_CONF_DIR).
    pub fn conf_dir(&self) -> &Path {
        &self.conf_dir
    }

    /// The launcher's stderr (all Hadoop logging).
    pub fn log_path(&self) -> &Path {
        &self.log_path
    }

    pub fn log_tail(&self, lines: usize) -> String {
        tail(&self.log_path, lines)
    }

    /// Launch to READY, as measured here (READY's `startup_ms` is the JVM's own view).
    pub fn startup_time(&self) -> Duration {
        self.startup
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether the JVM still runs and the command channel is in step.
    pub fn is_alive(&mut self) -> bool {
        self.broken.is_none() && matches!(self.child.try_wait(), Ok(None))
    }

    /// A READY string field.
    pub fn field_str(&self, field: &str) -> Result<&str, PeerError> {
        self.ready
            .get(field)
            .and_then(Value::as_str)
            .ok_or_else(|| self.field_error(field))
    }

    /// A READY `host:port` field as a socket address (IPv4 preferred).
    pub fn addr(&self, field: &str) -> Result<SocketAddr, PeerError> {
        let s = self.field_str(field)?;
        resolve(s).ok_or_else(|| self.field_error(field))
    }

    /// `hdfs`, `hdfs-ha`: the (active) NameNode's RPC address.
    pub fn namenode_addr(&self) -> Result<SocketAddr, PeerError> {
        self.addr("namenode")
    }

    /// `hdfs` / `hdfs-ha --kerberos true`: the KDC, the principals and keytabs.
    pub fn kerberos(&self) -> Result<Kerberos, PeerError> {
        let k = self
            .ready
            .get("kerberos")
            .ok_or_else(|| self.field_error("kerberos"))?;
        let s = |f: &str| {
            k.get(f)
                .and_then(Value::as_str)
                .map(str::to_string)
                .ok_or_else(|| self.field_error(&format!("kerberos.{f}")))
        };
        Ok(Kerberos {
            realm: s("realm")?,
            kdc: s("kdc")?,
            krb5_conf: s("krb5_conf")?.into(),
            client_principal: s("client_principal")?,
            client_keytab: s("client_keytab")?.into(),
            namenode_principal: s("namenode_principal")?,
            service_keytab: s("service_keytab")?.into(),
            rpc_protection: s("rpc_protection")?,
        })
    }

    /// `yarn-rm`: the ResourceManager's resource-tracker address (NodeManagers heartbeat here).
    pub fn resource_tracker_addr(&self) -> Result<SocketAddr, PeerError> {
        self.addr("resource_tracker")
    }

    /// `sasl`: the ContainerManagementProtocol server at `protection` (`authentication`,
    /// `integrity` or `privacy`).
    pub fn sasl_server(&self, protection: &str) -> Result<SocketAddr, PeerError> {
        let field = format!("servers.{protection}");
        self.ready
            .get("servers")
            .and_then(|s| s.get(protection))
            .and_then(Value::as_str)
            .and_then(resolve)
            .ok_or_else(|| self.field_error(&field))
    }

    /// `hdfs`, `hdfs-ha`: the DataNodes as READY lists them.
    pub fn datanodes(&self) -> Result<Vec<DataNode>, PeerError> {
        let err = || self.field_error("datanodes");
        let list = self
            .ready
            .get("datanodes")
            .and_then(Value::as_array)
            .ok_or_else(err)?;
        list.iter()
            .map(|d| {
                let s = |k: &str| d.get(k).and_then(Value::as_str).ok_or_else(err);
                Ok(DataNode {
                    index: d
                        .get("index")
                        .and_then(Value::as_u64)
                        .and_then(|i| usize::try_from(i).ok())
                        .ok_or_else(err)?,
                    host: s("host")?.to_owned(),
                    rack: s("rack")?.to_owned(),
                    xfer: resolve(s("xfer")?).ok_or_else(err)?,
                    ipc: resolve(s("ipc")?).ok_or_else(err)?,
                    uuid: s("uuid")?.to_owned(),
                })
            })
            .collect()
    }

    fn field_error(&self, field: &str) -> PeerError {
        PeerError::Field {
            field: field.to_owned(),
            ready: self.ready.to_string(),
        }
    }

    /// Sends one command line and returns its reply; `{"ok":false}` becomes
    /// [`PeerError::Command`].
    pub fn command(&mut self, line: &str) -> Result<Value, PeerError> {
        let reply = self.command_raw(line)?;
        if reply.get("ok").and_then(Value::as_bool) == Some(true) {
            Ok(reply)
        } else {
            Err(PeerError::Command {
                command: line.to_owned(),
                error: reply
                    .get("error")
                    .and_then(Value::as_str)
                    .unwrap_or("reply without ok:true")
                    .to_owned(),
            })
        }
    }

    /// Sends one command line that must fail and returns the Java exception it failed with; a
    /// reply with `ok:true` is a [`PeerError::Command`].
    pub fn command_expect_error(&mut self, line: &str) -> Result<JavaException, PeerError> {
        let reply = self.command_raw(line)?;
        JavaException::from_reply(&reply).ok_or_else(|| PeerError::Command {
            command: line.to_owned(),
            error: format!("expected a failure, got {reply}"),
        })
    }

    /// Sends one command line and returns the reply as it is, `ok` true or false.
    pub fn command_raw(&mut self, line: &str) -> Result<Value, PeerError> {
        let no_reply = |p: &Peer, reason: String| PeerError::NoReply {
            mode: p.mode.to_string(),
            command: line.to_owned(),
            reason,
            log: tail(&p.log_path, 40),
        };
        if line.contains('\n') || line.trim().is_empty() {
            return Err(PeerError::Command {
                command: line.to_owned(),
                error: "a command is one non-empty line".into(),
            });
        }
        if let Some(why) = &self.broken {
            return Err(no_reply(self, format!("peer unusable: {why}")));
        }
        let Some(stdin) = self.stdin.as_mut() else {
            return Err(no_reply(self, "stdin already closed".into()));
        };
        if let Err(e) = stdin
            .write_all(format!("{line}\n").as_bytes())
            .and_then(|()| stdin.flush())
        {
            self.broken = Some(format!("write failed: {e}"));
            return Err(no_reply(self, format!("write failed: {e}")));
        }
        match self.lines.recv_timeout(self.command_timeout) {
            Ok(reply) => serde_json::from_str(&reply).map_err(|e| {
                self.broken = Some("unparsable reply".into());
                PeerError::Protocol {
                    mode: self.mode.to_string(),
                    line: reply.clone(),
                    reason: e.to_string(),
                }
            }),
            Err(e) => {
                let reason = match e {
                    RecvTimeoutError::Timeout => format!("no reply in {:?}", self.command_timeout),
                    RecvTimeoutError::Disconnected => "the launcher exited".into(),
                };
                // a late reply would answer the next command: stop using this peer
                self.broken = Some(reason.clone());
                Err(no_reply(self, reason))
            }
        }
    }

    /// Runs a measuring driver against this peer's conf dir (see [`driver::run`]).
    pub fn run_driver(&self, driver: Driver, args: &[&str]) -> Result<Value, PeerError> {
        driver::run(&self.build, &self.conf_dir, driver, args)
    }

    /// Kills the JVM at once (SIGKILL): its services stop without a word to anyone, as when a
    /// machine dies (a NodeManager does not unregister, DataNodes stop heartbeating).
    pub fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Stops the JVM now (stdin EOF; killed after `grace`) and returns how long that took.
    pub fn stop(mut self, grace: Duration) -> Duration {
        self.shutdown(grace)
    }

    fn shutdown(&mut self, grace: Duration) -> Duration {
        let t0 = Instant::now();
        drop(self.stdin.take());
        let deadline = t0 + grace;
        loop {
            match self.child.try_wait() {
                Ok(Some(_)) => break,
                Ok(None) if Instant::now() < deadline => thread::sleep(Duration::from_millis(20)),
                _ => {
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    break;
                }
            }
        }
        t0.elapsed()
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        self.shutdown(Duration::from_secs(30));
        // `dir` (the TempDir) is dropped after this: conf, data and log go away
    }
}

/// The exception of a failed command (`{"ok":false,...}`), as the launcher describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JavaException {
    /// `<class>: <first line of the message>`.
    pub error: String,
    /// The exception's class; for a Hadoop `RemoteException`, the server-side class it names.
    pub class: String,
    /// The whole `getMessage()`, if any.
    pub message: Option<String>,
    /// The cause's class (same rule as `class`), if there is a cause.
    pub cause_class: Option<String>,
    pub cause_message: Option<String>,
    /// A `RemoteException` is in the cause chain: the other side of the RPC said it.
    pub remote: bool,
    /// The RPC error code of that `RemoteException`, when the response carried one.
    pub error_code: Option<String>,
}

impl JavaException {
    /// The exception of an `ok:false` reply; `None` for anything else.
    pub fn from_reply(reply: &Value) -> Option<JavaException> {
        if reply.get("ok").and_then(Value::as_bool) != Some(false) {
            return None;
        }
        let s = |k: &str| reply.get(k).and_then(Value::as_str).map(str::to_owned);
        Some(JavaException {
            error: s("error").unwrap_or_default(),
            class: s("exception_class").unwrap_or_default(),
            message: s("message"),
            cause_class: s("cause_class"),
            cause_message: s("cause_message"),
            remote: reply.get("remote").and_then(Value::as_bool) == Some(true),
            error_code: s("error_code"),
        })
    }
}

fn resolve(s: &str) -> Option<SocketAddr> {
    if let Ok(a) = s.parse::<SocketAddr>() {
        return Some(a);
    }
    let addrs: Vec<SocketAddr> = s.to_socket_addrs().ok()?.collect();
    addrs
        .iter()
        .find(|a| a.is_ipv4())
        .or(addrs.first())
        .copied()
}

/// One peer per test binary, started on first use and shared by the tests that lock it; the
/// lock also serialises them. Use it as a `static`:
///
/// ```no_run
/// use peer_harness::{Mode, Shared};
/// static HDFS: Shared = Shared::new(Mode::Hdfs, &[]);
/// let mut peer = HDFS.lock().expect("hdfs peer");
/// peer.command("write /f 100").expect("write");
/// ```
///
/// A static is never dropped: at process exit the JVM sees stdin close and stops by itself,
/// removing its temp dir. A peer that died is started again on the next `lock`.
pub struct Shared {
    mode: Mode,
    args: &'static [&'static str],
    slot: Mutex<Option<Peer>>,
}

impl Shared {
    pub const fn new(mode: Mode, args: &'static [&'static str]) -> Shared {
        Shared {
            mode,
            args,
            slot: Mutex::new(None),
        }
    }

    /// The shared peer, started if needed. A test that panicked while holding it does not
    /// poison it for the others.
    pub fn lock(&self) -> Result<SharedGuard<'_>, PeerError> {
        let mut g = self.slot.lock().unwrap_or_else(PoisonError::into_inner);
        let alive = g.as_mut().is_some_and(Peer::is_alive);
        if !alive {
            *g = None;
            *g = Some(Peer::start(self.mode, self.args)?);
        }
        Ok(SharedGuard(g))
    }
}

/// Exclusive access to a [`Shared`] peer.
pub struct SharedGuard<'a>(MutexGuard<'a, Option<Peer>>);

impl Deref for SharedGuard<'_> {
    type Target = Peer;
    fn deref(&self) -> &Peer {
        self.0
            .as_ref()
            .expect("a SharedGuard is only made around a started peer")
    }
}

impl DerefMut for SharedGuard<'_> {
    fn deref_mut(&mut self) -> &mut Peer {
        self.0
            .as_mut()
            .expect("a SharedGuard is only made around a started peer")
    }
}
