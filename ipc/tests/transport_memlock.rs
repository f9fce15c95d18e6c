//! When RLIMIT_MEMLOCK refuses fixed-buffer registration (a user without CAP_IPC_LOCK), the
//! io_uring backend keeps the pool unregistered, logs one warning per process, and serves
//! normally.
//!
//! This binary lowers RLIMIT_MEMLOCK for the whole process and drops CAP_IPC_LOCK from the
//! thread that starts the servers (ring threads inherit it), so it holds this one test only.

mod server_support;

use std::sync::atomic::{AtomicUsize, Ordering};

use ipc::transport::{BackendChoice, PoolConfig};
use server_support::*;

/// Counts WARN events that mention RLIMIT_MEMLOCK.
struct CountWarnings;

static MEMLOCK_WARNINGS: AtomicUsize = AtomicUsize::new(0);

struct Visitor(bool);

impl tracing::field::Visit for Visitor {
    fn record_debug(&mut self, _f: &tracing::field::Field, v: &dyn std::fmt::Debug) {
        if format!("{v:?}").contains("RLIMIT_MEMLOCK") {
            self.0 = true;
        }
    }
}

impl tracing::Subscriber for CountWarnings {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, e: &tracing::Event<'_>) {
        if *e.metadata().level() == tracing::Level::WARN {
            let mut v = Visitor(false);
            e.record(&mut v);
            if v.0 {
                MEMLOCK_WARNINGS.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: i32,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

const LINUX_CAPABILITY_VERSION_3: u32 = 0x2008_0522;
const CAP_IPC_LOCK: u32 = 14;

/// Drops CAP_IPC_LOCK from the calling thread's effective set.
fn drop_ipc_lock() {
    let mut h = CapHeader {
        version: LINUX_CAPABILITY_VERSION_3,
        pid: 0,
    };
    let mut d = [CapData::default(); 2];
    // SAFETY: capget/capset with a valid v3 header and a two-element data array, as the ABI
    // requires; both live on this stack frame.
    unsafe {
        assert_eq!(libc::syscall(libc::SYS_capget, &mut h, d.as_mut_ptr()), 0);
        d[0].effective &= !(1 << CAP_IPC_LOCK);
        assert_eq!(libc::syscall(libc::SYS_capset, &mut h, d.as_ptr()), 0);
    }
}

#[test]
fn registration_refused_by_memlock_falls_back_with_one_warning() {
    if !backends().contains(&BackendChoice::Uring) {
        return; // HOTPATH_IO=epoll: fixed buffers are io_uring only
    }
    let _ = tracing::subscriber::set_global_default(CountWarnings);
    // 2 MiB of lockable memory: enough for the rings themselves (which count against the limit
    // without CAP_IPC_LOCK), not for a 4 MiB pool.
    let lim = libc::rlimit {
        rlim_cur: 2 * 1024 * 1024,
        rlim_max: libc::RLIM_INFINITY,
    };
    let mut cur = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit with pointers to live locals.
    unsafe {
        libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut cur);
        let l = libc::rlimit {
            rlim_cur: lim.rlim_cur,
            rlim_max: cur.rlim_max,
        };
        assert_eq!(libc::setrlimit(libc::RLIMIT_MEMLOCK, &l), 0);
    }
    std::thread::spawn(|| {
        drop_ipc_lock();
        let mut servers = Vec::new();
        for _ in 0..2 {
            let srv = start(BackendChoice::Uring, bench_registry(), |c| {
                c.transport.threads = 2;
                c.transport.pool = PoolConfig {
                    chunks: 64,
                    ..PoolConfig::default()
                };
            });
            let c = client(srv.local_addr());
            get_buffer_checked(&c, 3_000_000);
            let m = srv.metrics();
            assert_eq!(m.transport.pools_registered, 0, "{m:?}");
            servers.push(srv);
        }
        // Four rings failed to register; one warning was logged.
        assert_eq!(MEMLOCK_WARNINGS.load(Ordering::Relaxed), 1);
        for s in servers {
            s.shutdown();
        }
    })
    .join()
    .unwrap();
}
