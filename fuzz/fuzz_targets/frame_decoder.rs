//! The frame decoder, the accumulator and request/response splitting on arbitrary bytes.
//! The first byte picks the cap and the chunking of the rest.
#![no_main]

use ipc::frame::{
    parse_preamble, Decoded, FrameAccumulator, FrameDecoder, RequestFrame, ResponseFrame,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&ctl, bytes)) = data.split_first() else {
        return;
    };
    let _ = parse_preamble(bytes);
    let cap = if ctl & 0x80 != 0 { u32::MAX } else { u32::from(ctl) * 16 };
    let decoder = FrameDecoder::new(cap);

    // Contiguous decoding of every frame in the input.
    let mut contiguous = Vec::new();
    let mut rest = bytes;
    loop {
        match decoder.decode(rest) {
            Ok(Decoded::Frame(r)) => {
                assert!(r.end <= rest.len() && (r.end - r.start) as u64 <= u64::from(decoder.cap()));
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

    // The accumulator in chunks of 1..=8 bytes must yield the same frames.
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
                        None => break,
                    }
                }
                Err(_) => break 'outer,
            }
        }
    }
    assert_eq!(contiguous, assembled);
});

fn split(body: &[u8]) {
    if let Ok(f) = RequestFrame::split(body) {
        for id in [-33, -4, -3, -1, 0, 1] {
            let _ = f.check_call_id(id);
        }
    }
    if let Ok(f) = ResponseFrame::split(body) {
        assert!(f.header.len() <= body.len());
    }
}
