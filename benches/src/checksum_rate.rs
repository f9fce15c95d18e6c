//! The read path's checksum cost: CRC32C (or CRC32) verification rate of
//! [`DataChecksum::verify`] in the chunk size the DataNode uses, for `examples/crc_rate.rs`.

use hdfs_io::checksum::{ChecksumKind, DataChecksum};

/// Measures CRC32C verification of `total` bytes in `bpc`-byte chunks (the read path's
/// pattern), returning GB/s (10^9 bytes per second) of thread CPU time when available.
pub fn verify_rate_gbps(kind: ChecksumKind, bpc: u32, total: usize) -> f64 {
    let c = DataChecksum {
        kind,
        bytes_per_checksum: bpc,
    };
    let data: Vec<u8> = (0..total.max(bpc as usize))
        .map(|i| (i * 131 % 251) as u8)
        .collect();
    let mut sums = Vec::new();
    c.append_sums(&data, &mut sums);
    c.verify(&data, &sums).expect("own sums verify"); // warm
                                                      // rounds of at least 200 ms: the thread CPU clock is only brought up to date at ticks
    let mut best = 0f64;
    for _ in 0..3 {
        let c0 = crate::dn_select::thread_cpu_ns();
        let t = std::time::Instant::now();
        let mut bytes = 0u64;
        while t.elapsed() < std::time::Duration::from_millis(200) {
            std::hint::black_box(c.verify(std::hint::black_box(&data), &sums)).expect("verify");
            bytes += data.len() as u64;
        }
        let wall = t.elapsed().as_nanos() as f64;
        let ns = match (c0, crate::dn_select::thread_cpu_ns()) {
            (Some(a), Some(b)) if b > a => (b - a) as f64,
            _ => wall,
        };
        best = best.max(bytes as f64 / ns.max(1.0));
    }
    best
}
