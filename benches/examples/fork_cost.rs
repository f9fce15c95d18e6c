//! What one `fork` + `exec` of a child costs a process that holds io_uring-registered IPC
//! pools, as the agent does (it forks every container process, and every zygote).
//!
//! The kernel cannot share a page pinned for I/O copy-on-write, so `fork` copies every pinned
//! page into the child at once, unless the mapping is `MADV_DONTFORK` (which `ipc` sets on its
//! pools and buffer rings). Three cases in one run, each `N` spawns of `/bin/true` through
//! `Command` with a `pre_exec` hook (so std forks, as the agent's spawns do):
//!
//! - `bare`: no server in the process (the floor);
//! - `pools`: two IPC servers with the agent's pool settings (16 × 64 KiB registered, 8 × 16
//!   KiB receive buffers each), as `ipc` maps them;
//! - `pools, copied`: the same after `MADV_DOFORK` on every anonymous `dc` mapping of the
//!   process (undoing `ipc`'s advice: what each fork cost before it).
//!
//! Per spawn: wall time (spawn to exit reaped) and this process's CPU (utime + stime from
//! `/proc/self/stat`, so the fork's copying in the parent, not the child's exec).
//!
//! `cargo run --release -p benches --example fork_cost -- [N]` (default 400).

use std::net::SocketAddr;
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::time::Instant;

use ipc::server::{Registry, Server, ServerConfig};
use ipc::transport::pool::PoolConfig;
use ipc::transport::TransportConfig;

fn cpu_ms() -> f64 {
    let s = std::fs::read_to_string("/proc/self/stat").expect("stat");
    let rest = &s[s.rfind(')').expect("comm") + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // fields 14 and 15 (utime, stime) are 12 and 13 after the state field
    let ticks: f64 = f[11].parse::<f64>().unwrap() + f[12].parse::<f64>().unwrap();
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    ticks * 1000.0 / hz
}

fn spawns(n: usize) -> (f64, f64) {
    let (t, c) = (Instant::now(), cpu_ms());
    for _ in 0..n {
        let mut cmd = Command::new("/bin/true");
        // SAFETY: the hook does nothing; it only makes std use fork instead of posix_spawn.
        unsafe {
            cmd.pre_exec(|| Ok(()));
        }
        let st = cmd.status().expect("spawn /bin/true");
        assert!(st.success());
    }
    (
        t.elapsed().as_secs_f64() * 1e6 / n as f64,
        (cpu_ms() - c) * 1000.0 / n as f64,
    )
}

/// `MADV_DOFORK` on every private anonymous mapping marked `dc` (do not copy on fork).
fn undo_dontfork() -> usize {
    let smaps = std::fs::read_to_string("/proc/self/smaps").expect("smaps");
    let mut cur: Option<(usize, usize, bool)> = None;
    let mut n = 0;
    for line in smaps.lines() {
        let mut parts = line.split_whitespace();
        let first = parts.next().unwrap_or("");
        if let Some((a, b)) = first.split_once('-') {
            if let (Ok(a), Ok(b)) = (usize::from_str_radix(a, 16), usize::from_str_radix(b, 16)) {
                let perms = parts.next().unwrap_or("");
                let path = parts.nth(3);
                cur = Some((a, b, perms.starts_with("rw") && path.is_none()));
                continue;
            }
        }
        if let (Some(f), Some((a, b, anon))) = (line.strip_prefix("VmFlags:"), cur) {
            if anon && f.split_whitespace().any(|x| x == "dc") {
                // SAFETY: an existing mapping of this process, exactly as smaps lists it;
                // the advice does not touch its contents.
                if unsafe { libc::madvise(a as *mut libc::c_void, b - a, libc::MADV_DOFORK) } == 0 {
                    n += 1;
                }
            }
        }
    }
    n
}

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .map(|s| s.parse().expect("N"))
        .unwrap_or(400);
    spawns(20);
    let bare = spawns(n);
    let server = || {
        let cfg = ServerConfig {
            transport: TransportConfig {
                threads: 1,
                pool: PoolConfig {
                    chunk_size: 64 * 1024,
                    chunks: 16,
                    per_conn_chunks: 8,
                    register: true,
                },
                recv_buf_size: 16 * 1024,
                recv_bufs: 8,
                max_connections: 256,
                ..TransportConfig::default()
            },
            ..ServerConfig::default()
        };
        let addr: SocketAddr = "127.0.0.1:0".parse().unwrap();
        Server::start(addr, cfg, Registry::new()).expect("server")
    };
    let servers = [server(), server()];
    let backend = servers[0].backend();
    let pool_bytes: usize = servers.iter().map(Server::pool_bytes).sum();
    std::thread::sleep(std::time::Duration::from_millis(200));
    spawns(20);
    let pools = spawns(n);
    let undone = undo_dontfork();
    spawns(20);
    let copied = spawns(n);
    println!(
        "fork+exec of /bin/true, {n} spawns each; {backend:?} backend, {} KiB of pools, {undone} mapping(s) undone",
        pool_bytes / 1024
    );
    println!("case              wall µs/spawn   parent CPU µs/spawn");
    for (name, (w, c)) in [("bare", bare), ("pools", pools), ("pools, copied", copied)] {
        println!("{name:<17} {w:>14.1} {c:>20.1}");
    }
    println!(
        "copying the pools costs {:.1}× the parent CPU of a spawn with them excluded",
        copied.1 / pools.1
    );
    for s in servers {
        s.shutdown();
    }
}
