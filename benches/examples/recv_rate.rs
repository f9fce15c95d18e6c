//! The block receive path alone: one 128 MiB block (CRC32C, 64 KiB packets, as a DataNode
//! sends it) served from memory by a thread standing in for the DataNode over loopback TCP,
//! read whole by this thread through each receive path in turn (io_uring with the pool
//! registered, unregistered, registered with READ_FIXED; blocking); wall time and this thread's
//! CPU (from `/proc/thread-self/schedstat`, ns) per GB.
//!
//! `cargo run --release -p benches --example recv_rate -- [rounds] [MiB] [packet KiB]`

use benches::dn_select::thread_cpu_ns;
use hdfs_io::block_reader::{BlockRead, ReadBlockRequest};
use hdfs_io::checksum::{ChecksumKind, DataChecksum};
use hdfs_io::datanode::{connect, read_block_on, RecvBuf};
use hdfs_io::error::BlockName;
use hdfs_io::fixtures::dn_stream;
use hdfs_io::receive::{read_block_uring, renew_thread_receiver, thread_stats, PoolMode};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

fn serve(mut s: TcpStream, stream: &[u8]) {
    loop {
        let mut head = [0u8; 3];
        if s.read_exact(&mut head).is_err() {
            return;
        }
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
        s.write_all(stream).unwrap();
        let mut st = [0u8; 3];
        s.read_exact(&mut st).unwrap();
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let mut args = std::env::args().skip(1);
    let rounds: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(5);
    let mib: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(128);
    let packet_kib: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(64);
    let len = mib << 20;
    let data: Vec<u8> = (0..len).map(|i| (i * 131 % 251) as u8).collect();
    let c = DataChecksum {
        kind: ChecksumKind::Crc32c,
        bytes_per_checksum: 512,
    };
    let stream: &'static [u8] = dn_stream(&data, 0, len as u64, c, packet_kib << 10).leak();
    drop(data);
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let s = s.unwrap();
            std::thread::spawn(move || serve(s, stream));
        }
    });
    let mut s = connect(addr, Duration::from_secs(5), Duration::from_secs(30)).unwrap();
    let name = BlockName::default();
    let req = ReadBlockRequest {
        block: b"\x0a\x04BP-1\x10\x01\x18\x02",
        token: b"",
        client_name: "DFSClient_recv_rate",
        offset: 0,
        len: len as u64,
    };
    let paths = [
        "uring_registered",
        "uring_unregistered",
        "uring_read_fixed",
        "blocking",
    ];
    let modes = [
        PoolMode::Registered,
        PoolMode::Unregistered,
        PoolMode::ReadFixed,
    ];
    let mut res: Vec<(Vec<f64>, Vec<f64>)> = vec![Default::default(); paths.len()];
    let mut buf = RecvBuf::default();
    let mut scratch = Vec::new();
    for round in 0..=rounds {
        for (i, p) in paths.iter().enumerate() {
            if i < 3 && !renew_thread_receiver(modes[i]) {
                continue;
            }
            let mut read = BlockRead::new(name.clone(), "dn".into(), 0, len as u64);
            let mut n = 0u64;
            let mut sink = |d: &[u8]| {
                n += d.len() as u64;
                std::hint::black_box(d);
                Ok(())
            };
            let c0 = thread_cpu_ns().unwrap_or(0);
            let t = Instant::now();
            let r = if i < 3 {
                read_block_uring(
                    &mut s,
                    &req,
                    &mut read,
                    &mut scratch,
                    &mut sink,
                    "dn",
                    Duration::from_secs(30),
                )
                .expect("ring")
            } else {
                read_block_on(
                    &mut s,
                    &req,
                    &mut read,
                    &mut buf,
                    &mut scratch,
                    &mut sink,
                    "dn",
                )
            };
            let wall = t.elapsed().as_secs_f64();
            let cpu = (thread_cpu_ns().unwrap_or(0) - c0) as f64 / 1e9;
            assert!(r.error.is_none(), "{:?}", r.error);
            assert_eq!(n, len as u64);
            let gb = n as f64 / 1e9;
            if round > 0 {
                res[i].0.push(gb / wall);
                res[i].1.push(cpu / gb);
                let st = if i < 3 { thread_stats() } else { None };
                println!(
                    "{{\"path\":\"{p}\",\"round\":{round},\"gb_per_s\":{:.3},\"cpu_s_per_gb\":{:.3}{}}}",
                    gb / wall,
                    cpu / gb,
                    st.map_or(String::new(), |s| format!(
                        ",\"recvs\":{},\"moved\":{},\"fixed\":{}",
                        s.recvs, s.moved, s.fixed
                    ))
                );
            }
        }
    }
    for (p, (g, c)) in paths.iter().zip(res) {
        if !g.is_empty() {
            println!(
                "{{\"summary\":\"{p}\",\"gb_per_s\":{:.3},\"cpu_s_per_gb\":{:.3}}}",
                median(g),
                median(c)
            );
        }
    }
}
