//! CRC verify rate in 512-byte chunks over 64 MiB (the read path's pattern), GB/s of thread CPU:
//! `cargo run --release -p benches --example crc_rate`.

use benches::checksum_rate::verify_rate_gbps;
use hdfs_io::checksum::ChecksumKind;

fn main() {
    for (name, kind) in [
        ("crc32c", ChecksumKind::Crc32c),
        ("crc32", ChecksumKind::Crc32),
    ] {
        let gbps = verify_rate_gbps(kind, 512, 64 << 20);
        println!(
            "{{\"checksum\":\"{name}\",\"bytes_per_checksum\":512,\"verify_gbps\":{gbps:.2}}}"
        );
    }
}
