//! The AES-CTR keystream rate of the DataTransfer streams alone (RustCrypto `aes` + `ctr`,
//! AES-NI/VAES picked at run time): decrypt in place over a buffer the size of a few DataNode
//! packets, as the receive paths do, for each key size.
//!
//! `cargo run --release -p benches --example aes_ctr_rate -- [MiB per key size]` (default 1024)

use hadoop_wire::hdfs::transfer_sasl::{AesCtrStreams, AesKeys};

/// This thread's CPU time (ns) from `/proc/thread-self/schedstat`: the machine is shared, so
/// wall time alone overstates the cost.
fn thread_cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

fn main() {
    let mib: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1024);
    // one receive's worth: the io_uring chunk is 512 KiB
    let mut buf = vec![0x5au8; 512 * 1024];
    let rounds = mib * 1024 * 1024 / buf.len();
    use ctr::cipher::{KeyIvInit, StreamCipher};
    // alternating, in one process: ours (hadoop-wire's streams) and the `ctr` crate's
    // Ctr128BE over the same `aes` block cipher, three rounds each
    for bits in [128usize, 192, 256] {
        let keys = AesKeys {
            in_key: vec![1; bits / 8],
            in_iv: [2; 16],
            out_key: vec![3; bits / 8],
            out_iv: [4; 16],
        };
        let mut ours = AesCtrStreams::client(&keys).expect("keys");
        let mut theirs: Box<dyn StreamCipher> = match bits {
            128 => Box::new(
                ctr::Ctr128BE::<aes::Aes128>::new_from_slices(&keys.out_key, &keys.out_iv).unwrap(),
            ),
            192 => Box::new(
                ctr::Ctr128BE::<aes::Aes192>::new_from_slices(&keys.out_key, &keys.out_iv).unwrap(),
            ),
            _ => Box::new(
                ctr::Ctr128BE::<aes::Aes256>::new_from_slices(&keys.out_key, &keys.out_iv).unwrap(),
            ),
        };
        let (mut a, mut b) = (buf.clone(), buf.clone());
        ours.decrypt(&mut a);
        theirs.apply_keystream(&mut b);
        assert_eq!(a, b, "same keystream");
        let (mut ours_cpu, mut theirs_cpu) = (Vec::new(), Vec::new());
        for _ in 0..3 {
            for which in 0..2 {
                let c0 = thread_cpu_ns();
                for _ in 0..rounds {
                    if which == 0 {
                        ours.decrypt(&mut buf);
                    } else {
                        theirs.apply_keystream(&mut buf);
                    }
                }
                let cpu = (thread_cpu_ns() - c0) as f64 / 1e9;
                let gb = (rounds * buf.len()) as f64 / 1e9;
                if which == 0 {
                    ours_cpu.push(gb / cpu)
                } else {
                    theirs_cpu.push(gb / cpu)
                }
            }
        }
        let med = |mut v: Vec<f64>| {
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        };
        println!(
            "{{\"aes_bits\":{bits},\"gb_per_round\":{:.3},\"ours_cpu_gb_per_s\":{:.2},\"ctr_crate_cpu_gb_per_s\":{:.2},\"check\":{}}}",
            (rounds * buf.len()) as f64 / 1e9,
            med(ours_cpu),
            med(theirs_cpu),
            buf[7]
        );
    }
}
