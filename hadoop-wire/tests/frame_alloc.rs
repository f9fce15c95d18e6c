//! A 2 GiB (or any over-cap) length claim is refused before any allocation: a counting global
//! allocator records every allocation made by this test binary's test thread.
//!
//! Its own binary, so no other test's allocations interfere; one #[test] so no parallel tests.

use hadoop_wire::frame::{Decoded, FrameAccumulator, FrameDecoder};
use hadoop_wire::FrameError;

#[global_allocator]
static GLOBAL: alloc_counter::Counting = alloc_counter::Counting;

/// Runs `f` counting this thread's allocations; returns (result, allocations, largest size).
fn tracked<R>(f: impl FnOnce() -> R) -> (R, usize, usize) {
    let (r, c) = alloc_counter::thread(f);
    (r, c.allocs as usize, c.largest)
}

#[test]
fn oversized_claims_allocate_nothing() {
    // The counter works: a 1 MiB Vec is seen.
    let (_, n, largest) = tracked(|| std::hint::black_box(vec![0u8; 1 << 20]));
    assert_eq!((n, largest), (1, 1 << 20));

    let claims: [[u8; 4]; 4] = [
        [0x80, 0, 0, 0], // 2 GiB: negative as a Java int
        [0xff, 0xff, 0xff, 0xff],
        [0x7f, 0xff, 0xff, 0xff], // just under 2 GiB, over the 128 MiB cap
        [0x08, 0, 0, 1],          // 128 MiB + 1
    ];
    let d = FrameDecoder::default();
    for claim in claims {
        let mut input = claim.to_vec();
        input.extend_from_slice(&[0xab; 64]);
        // Contiguous decoder: no allocation at all.
        let (r, n, _) = tracked(|| d.decode(&input));
        assert!(
            matches!(r, Err(FrameError::FrameTooLong { .. })),
            "{claim:?}: {r:?}"
        );
        assert_eq!(n, 0, "decoder allocated for claim {claim:?}");

        // Accumulator, claim whole in the first buffer: refused before copying anything.
        let mut acc = FrameAccumulator::new(d);
        let (r, n, _) = tracked(|| acc.next_frame(&input).map(|s| s.consumed));
        assert!(r.is_err());
        assert_eq!(n, 0, "accumulator allocated for claim {claim:?}");

        // Accumulator, claim straddling buffers byte by byte: it holds at most the three bytes
        // before the claim is complete, and nothing sized by the claim.
        let mut acc = FrameAccumulator::new(d);
        let (r, _, largest) = tracked(|| {
            for b in &input {
                acc.next_frame(std::slice::from_ref(b))?;
            }
            Ok::<_, FrameError>(())
        });
        assert!(matches!(r, Err(FrameError::FrameTooLong { .. })));
        assert!(
            largest <= 64,
            "largest allocation {largest} bytes for claim {claim:?}"
        );
    }

    // A claim at the cap is accepted, but the accumulator grows only with received bytes.
    let mut acc = FrameAccumulator::new(d);
    let (r, _, largest) = tracked(|| {
        let s = acc.next_frame(&[0x08, 0, 0, 0, 1, 2, 3])?;
        assert!(s.frame.is_none());
        let s = acc.next_frame(&[4u8; 1000])?;
        assert!(s.frame.is_none());
        Ok::<_, FrameError>(acc.pending())
    });
    assert_eq!(r, Ok(1007));
    assert!(
        largest < 4096,
        "largest allocation {largest} for 1007 received bytes"
    );
    assert_eq!(d.decode(&[0x08, 0, 0, 0]), Ok(Decoded::NeedMore(128 << 20)));
}
