//! The DataTransfer packet decoder and splitter on arbitrary bytes. The first byte picks the
//! bytes-per-checksum; the data length comes from the header when it parses, else from the input.
#![no_main]

use ipc::frame::{PacketDecoded, PacketDecoder};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&ctl, bytes)) = data.split_first() else {
        return;
    };
    let bpc = u32::from(ctl) * 4;
    let decoder = PacketDecoder::new(1 << 20);
    let mut rest = bytes;
    while let Ok(PacketDecoded::Packet { packet, consumed }) = decoder.decode(rest) {
        assert!(consumed >= 6 && consumed <= rest.len());
        assert!(packet.header.len() <= 33);
        for data_len in [0, 1, packet.body.len() as i32 / 2, packet.body.len() as i32, -1] {
            if let Ok(p) = packet.split(data_len) {
                assert_eq!(p.checksums.len() + p.data.len(), packet.body.len());
                if p.check_checksums(bpc, 4).is_ok() {
                    let n: usize = p.crc_chunks(bpc).map(|(_, d)| d.len()).sum();
                    assert_eq!(n, p.data.len());
                }
                let _ = p.check_checksums(bpc, 0);
            }
        }
        rest = &rest[consumed..];
    }
});
