//! One function per fuzz target: run the code under test on arbitrary bytes and assert its
//! invariants. A panic here is a finding. Only `ipc` and `std` are used, so that this file also
//! compiles inside ipc's test suite.

use ipc::frame::{
    parse_preamble, Decoded, FrameAccumulator, FrameDecoder, PacketDecoded, PacketDecoder,
    RequestFrame, ResponseFrame,
};

/// The frame decoder, the accumulator and request/response splitting. The first byte picks the
/// cap and the chunking of the rest; contiguous decoding and the accumulator must agree.
pub fn frame_decoder(data: &[u8]) {
    let Some((&ctl, bytes)) = data.split_first() else {
        return;
    };
    let _ = parse_preamble(bytes);
    let cap = if ctl & 0x80 != 0 {
        u32::MAX
    } else {
        u32::from(ctl) * 16
    };
    let decoder = FrameDecoder::new(cap);

    let mut contiguous = Vec::new();
    let mut rest = bytes;
    loop {
        match decoder.decode(rest) {
            Ok(Decoded::Frame(r)) => {
                assert!(r.end <= rest.len());
                assert!((r.end - r.start) as u64 <= u64::from(decoder.cap()));
                let body = &rest[r.clone()];
                split(body);
                contiguous.push(body.to_vec());
                rest = &rest[r.end..];
            }
            Ok(Decoded::NeedMore(n)) => {
                assert!(n > 0);
                break;
            }
            Err(_) => break,
        }
    }

    let chunk = usize::from(ctl & 7) + 1;
    let mut acc = FrameAccumulator::new(decoder).with_retained_capacity(64);
    let mut assembled = Vec::new();
    'outer: for piece in bytes.chunks(chunk) {
        let mut rest = piece;
        loop {
            match acc.next_frame(rest) {
                Ok(step) => {
                    assert!(step.consumed <= rest.len());
                    rest = &rest[step.consumed..];
                    match step.frame {
                        Some(f) => assembled.push(f.to_vec()),
                        None => {
                            assert!(rest.is_empty());
                            break;
                        }
                    }
                }
                Err(_) => break 'outer,
            }
        }
    }
    assert_eq!(contiguous, assembled);
}

fn split(body: &[u8]) {
    if let Ok(f) = RequestFrame::split(body) {
        let parts = 1 + usize::from(f.request_header.is_some()) + usize::from(f.payload.is_some());
        assert!(f.request_header.is_none() || f.payload.is_some());
        assert!(parts >= 1);
        for id in [-33, -4, -3, -1, 0, 1] {
            let _ = f.check_call_id(id);
        }
    }
    if let Ok(f) = ResponseFrame::split(body) {
        assert!(f.header.len() < body.len());
    }
}

/// The DataTransfer packet decoder and splitter. The first byte picks bytes-per-checksum.
pub fn packet(data: &[u8]) {
    let Some((&ctl, bytes)) = data.split_first() else {
        return;
    };
    let bpc = u32::from(ctl) * 4;
    let decoder = PacketDecoder::new(1 << 20);
    let mut rest = bytes;
    while let Ok(PacketDecoded::Packet { packet, consumed }) = decoder.decode(rest) {
        assert!(consumed >= 6 && consumed <= rest.len());
        assert!(packet.header.len() <= 33);
        let n = packet.body.len() as i32;
        for data_len in [0, 1, n / 2, n, n + 1, -1] {
            if let Ok(p) = packet.split(data_len) {
                assert_eq!(p.data.len(), data_len as usize);
                assert_eq!(p.checksums.len() + p.data.len(), packet.body.len());
                if p.check_checksums(bpc, 4).is_ok() {
                    let total: usize = p.crc_chunks(bpc).map(|(_, d)| d.len()).sum();
                    assert_eq!(total, p.data.len());
                }
                let _ = p.check_checksums(bpc, 0);
            }
        }
        rest = &rest[consumed..];
    }
}
