//! When RLIMIT_MEMLOCK refuses registering the receive pool (a user without CAP_IPC_LOCK),
//! the io_uring receiver uses the pool unregistered, logs one warning per process, and reads
//! correctly.
//!
//! This binary lowers RLIMIT_MEMLOCK for the whole process and drops CAP_IPC_LOCK from the
//! thread that starts the readers (threads inherit it), so it holds this one test only.

use hdfs_io::block_reader::{BlockRead, ReadBlockRequest};
use hdfs_io::checksum::{ChecksumKind, DataChecksum};
use hdfs_io::datanode::connect;
use hdfs_io::error::BlockName;
use hdfs_io::fixtures::dn_stream;
use hdfs_io::receive::{read_block_uring, thread_stats, CHUNKS, CHUNK_SIZE};
use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

static MEMLOCK_WARNINGS: AtomicUsize = AtomicUsize::new(0);

/// Counts WARN events that mention RLIMIT_MEMLOCK.
struct CountWarnings;

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

/// One block read through this thread's io_uring receiver from a DataNode stand-in.
fn read_once(data: &[u8]) -> Vec<u8> {
    let c = DataChecksum {
        kind: ChecksumKind::Crc32c,
        bytes_per_checksum: 512,
    };
    let stream = dn_stream(data, 0, data.len() as u64, c, 64 * 1024);
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let dn = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        // the request: version, op, varint length, OpReadBlockProto
        let mut head = [0u8; 3];
        s.read_exact(&mut head).unwrap();
        let (mut len, mut shift) = (0usize, 0);
        loop {
            let mut b = [0u8; 1];
            s.read_exact(&mut b).unwrap();
            len |= usize::from(b[0] & 0x7f) << shift;
            shift += 7;
            if b[0] < 0x80 {
                break;
            }
        }
        let mut body = vec![0; len];
        s.read_exact(&mut body).unwrap();
        s.write_all(&stream).unwrap();
        let mut st = [0u8; 3];
        s.read_exact(&mut st).unwrap();
        st
    });
    let mut s = connect(addr, Duration::from_secs(5), Duration::from_secs(10)).unwrap();
    let mut read = BlockRead::new(BlockName::default(), "dn".into(), 0, data.len() as u64);
    let mut out = Vec::new();
    let r = read_block_uring(
        &mut s,
        &ReadBlockRequest {
            block: b"\x0a\x04BP-1\x10\x01\x18\x02",
            token: b"",
            client_name: "DFSClient_memlock",
            offset: 0,
            len: data.len() as u64,
        },
        &mut read,
        &mut Vec::new(),
        &mut |d| {
            out.extend_from_slice(d);
            Ok(())
        },
        "dn",
        Duration::from_secs(10),
    )
    .expect("a ring on this thread");
    assert!(r.error.is_none(), "{:?}", r.error);
    assert_eq!(dn.join().unwrap(), [2, 0x08, 6], "CHECKSUM_OK");
    out
}

#[test]
fn registration_refused_by_memlock_falls_back_with_one_warning() {
    if let Err(why) = ipc::transport::uring::probe() {
        eprintln!("io_uring unavailable here, skipping: {why}");
        return;
    }
    let _ = tracing::subscriber::set_global_default(CountWarnings);
    // less lockable memory than one receive pool, enough for the rings themselves
    let pool = (CHUNK_SIZE * CHUNKS) as u64;
    let mut cur = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit with pointers to live locals.
    unsafe {
        libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut cur);
        let l = libc::rlimit {
            rlim_cur: pool / 2,
            rlim_max: cur.rlim_max,
        };
        assert_eq!(libc::setrlimit(libc::RLIMIT_MEMLOCK, &l), 0);
    }
    let data: Vec<u8> = (0..1_000_000u32).map(|i| (i * 7 % 251) as u8).collect();
    std::thread::scope(|s| {
        s.spawn(|| {
            drop_ipc_lock();
            std::thread::scope(|s| {
                for _ in 0..3 {
                    s.spawn(|| {
                        assert_eq!(read_once(&data), data);
                        let st = thread_stats().expect("receiver");
                        assert!(!st.registered, "{st:?}");
                        assert_eq!(st.reads, 1);
                    });
                }
            });
        });
    });
    // three receivers could not register; one warning was logged
    assert_eq!(MEMLOCK_WARNINGS.load(Ordering::Relaxed), 1);
    // with CAP_IPC_LOCK (this thread kept it) the pool registers
    assert_eq!(read_once(&data), data);
    assert!(thread_stats().expect("receiver").registered);
}
