//! The AES-CTR keystream rate of the DataTransfer streams alone (RustCrypto `aes` + `ctr`,
//! AES-NI/VAES picked at run time): decrypt in place over a buffer the size of a few DataNode
//! packets, as the receive paths do, for each key size.
//!
//! `cargo run --release -p benches --example aes_ctr_rate -- [MiB per key size]` (default 1024)

use hadoop_wire::hdfs::transfer_sasl::{AesCtrStreams, AesKeys};
use std::time::Instant;

fn main() {
    let mib: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1024);
    // one receive's worth: the io_uring chunk is 512 KiB
    let mut buf = vec![0x5au8; 512 * 1024];
    let rounds = mib * 1024 * 1024 / buf.len();
    for bits in [128usize, 192, 256] {
        let keys = AesKeys {
            in_key: vec![1; bits / 8],
            in_iv: [2; 16],
            out_key: vec![3; bits / 8],
            out_iv: [4; 16],
        };
        let mut s = AesCtrStreams::client(&keys).expect("keys");
        // warm-up
        s.decrypt(&mut buf);
        let t = Instant::now();
        for _ in 0..rounds {
            s.decrypt(&mut buf);
        }
        let secs = t.elapsed().as_secs_f64();
        let gb = (rounds * buf.len()) as f64 / 1e9;
        println!(
            "{{\"aes_bits\":{bits},\"gb\":{gb:.3},\"gb_per_s\":{:.2},\"cpu_s_per_gb\":{:.3},\"check\":{}}}",
            gb / secs,
            secs / gb,
            buf[7]
        );
    }
}
