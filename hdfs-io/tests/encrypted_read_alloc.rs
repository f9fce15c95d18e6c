//! An encrypted block read allocates nothing once warm, on both receive paths: decryption runs
//! in place in the receive buffer (the alloc-counter allocator counts this thread's
//! allocations; the fake DataNode's thread is not counted).

use hadoop_wire::hdfs::transfer_sasl::{AesCtrStreams, AesKeys};
use hdfs_io::block_reader::{BlockRead, ReadBlockRequest};
use hdfs_io::checksum::{ChecksumKind, DataChecksum};
use hdfs_io::datanode::{connect, read_block_on_with, RecvBuf};
use hdfs_io::fixtures::dn_stream;
use hdfs_io::receive::read_block_uring_with;
use hdfs_io::BlockName;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

#[global_allocator]
static GLOBAL: alloc_counter::Counting = alloc_counter::Counting;

const LEN: u64 = 1 << 20;

fn keys() -> AesKeys {
    AesKeys {
        in_key: vec![7; 16],
        in_iv: [1; 16],
        out_key: vec![9; 16],
        out_iv: [2; 16],
    }
}

/// Serves `n` reads of the whole block over one connection, encrypted.
fn fake_dn(n: usize, data: Vec<u8>) -> (std::net::SocketAddr, std::thread::JoinHandle<()>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let h = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        let mut c = AesCtrStreams::server(&keys()).unwrap();
        let c32 = DataChecksum {
            kind: ChecksumKind::Crc32c,
            bytes_per_checksum: 512,
        };
        for _ in 0..n {
            // version, op, then the delimited request (decrypted byte by byte)
            let mut byte = |s: &mut TcpStream| {
                let mut b = [0u8; 1];
                s.read_exact(&mut b).unwrap();
                c.decrypt(&mut b);
                b[0]
            };
            assert_eq!([byte(&mut s), byte(&mut s), byte(&mut s)], [0, 28, 81]);
            let (mut len, mut shift) = (0usize, 0);
            loop {
                let b = byte(&mut s);
                len |= usize::from(b & 0x7f) << shift;
                shift += 7;
                if b < 0x80 {
                    break;
                }
            }
            for _ in 0..len {
                byte(&mut s);
            }
            let mut out = dn_stream(&data, 0, LEN, c32, 64 * 1024);
            c.encrypt(&mut out);
            s.write_all(&out).unwrap();
            let mut st = [0u8; 3];
            s.read_exact(&mut st).unwrap();
            c.decrypt(&mut st);
            assert_eq!(st, [2, 0x08, 6]);
        }
    });
    (addr, h)
}

#[test]
fn a_warm_encrypted_read_allocates_nothing() {
    let data: Vec<u8> = (0..LEN as usize).map(|i| (i * 31 % 251) as u8).collect();
    let (addr, dn) = fake_dn(4, data.clone());
    let mut s = connect(addr, Duration::from_secs(10), Duration::from_secs(10)).unwrap();
    let mut crypt = AesCtrStreams::client(&keys()).unwrap();
    let block = b"\x0a\x04BP-1\x10\x01\x18\x02";
    let req = ReadBlockRequest {
        block,
        token: b"",
        client_name: "DFSClient_test",
        offset: 0,
        len: LEN,
    };
    let name = BlockName {
        pool_id: "BP-1".into(),
        block_id: 1,
        generation_stamp: 2,
    };
    let mut buf = RecvBuf::default();
    let mut scratch = Vec::with_capacity(256);
    let mut out: Vec<u8> = Vec::with_capacity(LEN as usize);
    for uring in [false, true] {
        for warm in [false, true] {
            let mut read = BlockRead::new(name.clone(), "dn".into(), 0, LEN);
            out.clear();
            let (r, counts) = alloc_counter::thread(|| {
                let mut sink = |d: &[u8]| {
                    out.extend_from_slice(d);
                    Ok(())
                };
                let r = if uring {
                    read_block_uring_with(
                        &mut s,
                        Some(&mut crypt),
                        &req,
                        &mut read,
                        &mut scratch,
                        &mut sink,
                        "dn",
                        Duration::from_secs(10),
                    )
                } else {
                    None
                };
                match r {
                    Some(r) => r,
                    None => read_block_on_with(
                        &mut s,
                        Some(&mut crypt),
                        &req,
                        &mut read,
                        &mut buf,
                        &mut scratch,
                        &mut sink,
                        "dn",
                    ),
                }
            });
            assert!(r.error.is_none() && read.is_done(), "{:?}", r.error);
            assert_eq!(out, data, "uring {uring}");
            if warm {
                assert_eq!(counts.allocs, 0, "uring {uring}: {counts:?}");
            } else if !uring {
                // the receive buffer's first use: the counter sees this thread's allocations
                assert!(counts.allocs >= 1, "{counts:?}");
            }
        }
    }
    dn.join().unwrap();
}
