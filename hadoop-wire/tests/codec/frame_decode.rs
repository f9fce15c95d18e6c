//! Frame decoding: preamble outcomes, the length cap, the accumulator, splitting, packets.

use hadoop_wire::frame::*;
use hadoop_wire::FrameError;
use proptest::prelude::*;

fn framed(body: &[u8]) -> Vec<u8> {
    let mut v = (body.len() as u32).to_be_bytes().to_vec();
    v.extend_from_slice(body);
    v
}

fn delimited(parts: &[&[u8]]) -> Vec<u8> {
    let mut v = Vec::new();
    for p in parts {
        prost::encoding::encode_varint(p.len() as u64, &mut v);
        v.extend_from_slice(p);
    }
    v
}

#[test]
fn zerocopy_layouts() {
    use zerocopy::{FromBytes, IntoBytes};
    assert_eq!(std::mem::size_of::<FrameLength>(), 4);
    assert_eq!(std::mem::size_of::<Preamble>(), 7);
    assert_eq!(std::mem::size_of::<PacketPrefix>(), 6);
    assert_eq!(Preamble::simple(0).as_bytes(), b"hrpc\x09\x00\x00");
    assert_eq!(FrameLength::new(0x55).as_bytes(), [0, 0, 0, 0x55]);
    assert_eq!(
        PacketPrefix::new(0x0102_0304, 0x1920).as_bytes(),
        [1, 2, 3, 4, 0x19, 0x20]
    );
    let p = PacketPrefix::read_from_bytes(&[0, 0, 2, 4, 0, 25][..]).unwrap();
    assert_eq!((p.packet_len.get(), p.header_len.get()), (516, 25));
}

#[test]
fn preamble_outcomes() {
    assert_eq!(
        parse_preamble(b"hrpc\x09\x03\x00"),
        Ok(PreambleOutcome::Simple { service_class: 3 })
    );
    // Bytes after the 7 belong to the first frame and are ignored here.
    assert_eq!(
        parse_preamble(b"hrpc\x09\x00\x00\x00\x00\x00\x55"),
        Ok(PreambleOutcome::Simple { service_class: 0 })
    );
    for n in 0..7 {
        assert_eq!(
            parse_preamble(&b"hrpc\x09\x00\x00"[..n]),
            Ok(PreambleOutcome::NeedMore(7 - n))
        );
    }
    assert_eq!(
        parse_preamble(b"GET / HTTP/1.1\r\n"),
        Ok(PreambleOutcome::HttpProbe)
    );
    assert_eq!(
        parse_preamble(b"hrpc\x08\x00\x00"),
        Ok(PreambleOutcome::VersionMismatch {
            magic_ok: true,
            client_version: 8
        })
    );
    assert_eq!(
        parse_preamble(b"hrpc\x0a\x00\x00"),
        Ok(PreambleOutcome::VersionMismatch {
            magic_ok: true,
            client_version: 10
        })
    );
    assert_eq!(
        parse_preamble(b"HRPC\x09\x00\x00"),
        Ok(PreambleOutcome::VersionMismatch {
            magic_ok: false,
            client_version: 9
        })
    );
    assert_eq!(
        parse_preamble(b"hrpc\x09\x00\xdf"),
        Ok(PreambleOutcome::Sasl { service_class: 0 })
    );
    assert_eq!(
        parse_preamble(b"hrpc\x09\x00\x51"),
        Err(FrameError::UnknownAuthProtocol(0x51))
    );
    assert!(HTTP_PROBE_RESPONSE.starts_with(b"HTTP/1.1 404 "));
}

#[test]
fn decoder_need_more_and_frame() {
    let d = FrameDecoder::default();
    assert_eq!(d.max_len, 134_217_728);
    let f = framed(b"hello");
    for n in 0..4 {
        assert_eq!(d.decode(&f[..n]), Ok(Decoded::NeedMore(4 - n)));
    }
    for n in 4..f.len() {
        assert_eq!(d.decode(&f[..n]), Ok(Decoded::NeedMore(f.len() - n)));
    }
    assert_eq!(d.decode(&f), Ok(Decoded::Frame(4..9)));
    let mut two = f.clone();
    two.extend_from_slice(&framed(b""));
    assert_eq!(d.decode(&two), Ok(Decoded::Frame(4..9)));
    assert_eq!(d.decode(&two[9..]), Ok(Decoded::Frame(4..4)));
}

#[test]
fn decoder_cap_boundaries() {
    let d = FrameDecoder::new(100);
    assert_eq!(d.decode(&[0, 0, 0, 100]), Ok(Decoded::NeedMore(100)));
    assert_eq!(
        d.decode(&[0, 0, 0, 101]),
        Err(FrameError::FrameTooLong { len: 101, max: 100 })
    );
    let d = FrameDecoder::default();
    assert_eq!(
        d.decode(&[0x80, 0, 0, 0]),
        Err(FrameError::FrameTooLong {
            len: 1 << 31,
            max: DEFAULT_MAX_DATA_LENGTH
        })
    );
    assert_eq!(
        d.decode(&[0xff; 4]),
        Err(FrameError::FrameTooLong {
            len: u32::MAX,
            max: DEFAULT_MAX_DATA_LENGTH
        })
    );
    // A cap above i32::MAX is clamped: negative Java ints are always refused.
    let d = FrameDecoder::new(u32::MAX);
    assert_eq!(d.cap(), i32::MAX as u32);
    assert_eq!(
        d.decode(&[0x7f, 0xff, 0xff, 0xff]),
        Ok(Decoded::NeedMore(i32::MAX as usize))
    );
    assert_eq!(
        d.decode(&[0x80, 0, 0, 0]),
        Err(FrameError::FrameTooLong {
            len: 1 << 31,
            max: i32::MAX as u32
        })
    );
}

/// Runs a byte stream through the accumulator in the given chunks; returns the frames and
/// whether each was borrowed.
fn run(acc: &mut FrameAccumulator, chunks: &[&[u8]]) -> Result<Vec<(Vec<u8>, bool)>, FrameError> {
    let mut out = Vec::new();
    for chunk in chunks {
        let mut rest = *chunk;
        loop {
            let step = acc.next_frame(rest)?;
            assert!(step.consumed <= rest.len());
            rest = &rest[step.consumed..];
            match step.frame {
                Some(f) => {
                    let borrowed = matches!(f, FrameBytes::Borrowed(_));
                    out.push((f.to_vec(), borrowed));
                }
                None => {
                    assert!(rest.is_empty(), "no frame but input left");
                    break;
                }
            }
        }
    }
    Ok(out)
}

fn stream(bodies: &[Vec<u8>]) -> Vec<u8> {
    bodies.iter().flat_map(|b| framed(b)).collect()
}

#[test]
fn accumulator_byte_by_byte() {
    let bodies = vec![b"first".to_vec(), Vec::new(), vec![7u8; 300], b"x".to_vec()];
    let s = stream(&bodies);
    let chunks: Vec<&[u8]> = s.chunks(1).collect();
    let mut acc = FrameAccumulator::new(FrameDecoder::default());
    let got = run(&mut acc, &chunks).unwrap();
    assert_eq!(got.iter().map(|g| g.0.clone()).collect::<Vec<_>>(), bodies);
    // Fed one byte at a time, every frame straddles (an empty frame's 4 bytes too).
    assert!(got.iter().all(|g| !g.1));
    assert_eq!(acc.pending(), 0);
}

#[test]
fn accumulator_borrows_whole_frames() {
    let bodies = vec![b"a".to_vec(), b"bb".to_vec(), b"ccc".to_vec()];
    let s = stream(&bodies);
    let mut acc = FrameAccumulator::new(FrameDecoder::default());
    let got = run(&mut acc, &[&s]).unwrap();
    assert_eq!(got.iter().map(|g| g.0.clone()).collect::<Vec<_>>(), bodies);
    assert!(got.iter().all(|g| g.1), "whole frames are not copied");
    assert_eq!(acc.capacity(), 0, "nothing was copied");
    // Split in the middle of the second frame: only that one is assembled.
    let got = run(&mut acc, &[&s[..7], &s[7..]]).unwrap();
    assert_eq!(
        got.iter().map(|g| g.1).collect::<Vec<_>>(),
        [true, false, true]
    );
}

#[test]
fn accumulator_refuses_claim_split_across_chunks() {
    let mut acc = FrameAccumulator::new(FrameDecoder::new(1000));
    let mut rest: &[u8] = &[0, 0];
    let step = acc.next_frame(rest).unwrap();
    assert_eq!((step.consumed, step.frame.is_none()), (2, true));
    rest = &[0x03, 0xe9, 1, 2, 3];
    assert_eq!(
        acc.next_frame(rest),
        Err(FrameError::FrameTooLong {
            len: 1001,
            max: 1000
        })
    );
    assert!(acc.capacity() < 64, "no allocation sized by the claim");
}

#[test]
fn accumulator_releases_large_buffers() {
    let big = vec![1u8; 200_000];
    let s = stream(&[big.clone(), b"after".to_vec()]);
    let mut acc = FrameAccumulator::new(FrameDecoder::default()).with_retained_capacity(1024);
    let chunks: Vec<&[u8]> = s.chunks(4096).collect();
    let got = run(&mut acc, &chunks).unwrap();
    assert_eq!(got[0].0, big);
    assert_eq!(got[1].0, b"after");
    assert!(acc.capacity() <= 1024, "capacity {} kept", acc.capacity());
}

#[test]
fn request_frame_split() {
    let body = delimited(&[b"HDR", b"REQH", b"PAYLOAD"]);
    let f = RequestFrame::split(&body).unwrap();
    assert_eq!(f.rpc_header, b"HDR");
    assert_eq!(f.request_header, Some(&b"REQH"[..]));
    assert_eq!(f.payload, Some(&b"PAYLOAD"[..]));
    f.check_call_id(0).unwrap();
    f.check_call_id(i32::MAX).unwrap();
    assert!(f.check_call_id(-3).is_err());
    assert!(f.check_call_id(-4).is_err());
    assert!(f.check_call_id(-33).is_err());

    let body = delimited(&[b"HDR", b""]);
    let f = RequestFrame::split(&body).unwrap();
    assert_eq!((f.request_header, f.payload), (None, Some(&b""[..])));
    f.check_call_id(-3).unwrap();
    assert!(f.check_call_id(5).is_err());

    let body = delimited(&[b"HDR"]);
    let f = RequestFrame::split(&body).unwrap();
    assert_eq!((f.request_header, f.payload), (None, None));
    f.check_call_id(-4).unwrap();
    assert!(f.check_call_id(-3).is_err());

    assert_eq!(RequestFrame::split(&[]), Err(FrameError::EmptyFrame));
    let body = delimited(&[b"a", b"b", b"c", b"d"]);
    assert_eq!(
        RequestFrame::split(&body),
        Err(FrameError::TrailingBytes { parts: 3, len: 2 })
    );
    assert_eq!(
        RequestFrame::split(&[5, 1, 2]),
        Err(FrameError::PartOverrun {
            index: 0,
            len: 5,
            remaining: 2
        })
    );
    assert!(matches!(
        RequestFrame::split(&[0x80, 0x80]),
        Err(FrameError::Truncated { .. })
    ));
    // Six-byte varint, and a five-byte one above i32::MAX.
    assert_eq!(
        RequestFrame::split(&[0x80, 0x80, 0x80, 0x80, 0x80, 0x00]),
        Err(FrameError::BadVarint { offset: 0 })
    );
    assert_eq!(
        RequestFrame::split(&[0xff, 0xff, 0xff, 0xff, 0x0f]),
        Err(FrameError::BadVarint { offset: 0 })
    );
    // Non-minimal varints are accepted (protobuf-java accepts them too).
    let f = RequestFrame::split(&[0x81, 0x00, b'z']).unwrap();
    assert_eq!(f.rpc_header, b"z");
}

#[test]
fn response_frame_split() {
    let body = delimited(&[b"HDR", b""]);
    let f = ResponseFrame::split(&body).unwrap();
    assert_eq!((f.header, f.payload), (&b"HDR"[..], Some(&b""[..])));
    let body = delimited(&[b"HDR"]);
    assert_eq!(ResponseFrame::split(&body).unwrap().payload, None);
    let body = delimited(&[b"HDR", b"P", b"X"]);
    assert_eq!(
        ResponseFrame::split(&body),
        Err(FrameError::TrailingBytes { parts: 2, len: 2 })
    );
    assert_eq!(ResponseFrame::split(&[]), Err(FrameError::EmptyFrame));
}

/// A packet on the wire: prefix, header, checksums, data.
fn packet(header: &[u8], checksums: &[u8], data: &[u8]) -> Vec<u8> {
    use zerocopy::IntoBytes;
    let plen = 4 + checksums.len() + data.len();
    let mut v = PacketPrefix::new(plen as u32, header.len() as u16)
        .as_bytes()
        .to_vec();
    v.extend_from_slice(header);
    v.extend_from_slice(checksums);
    v.extend_from_slice(data);
    v
}

#[test]
fn packet_decode_and_split() {
    let data: Vec<u8> = (0..1100u32).map(|i| i as u8).collect();
    let crcs: Vec<u8> = (0..3u32)
        .flat_map(|i| (0xabc0_0000 + i).to_be_bytes())
        .collect();
    let header = [0x11u8; 25];
    let mut wire = packet(&header, &crcs, &data);
    wire.extend_from_slice(b"next");
    let d = PacketDecoder::default();
    for n in 0..6 {
        assert_eq!(d.decode(&wire[..n]), Ok(PacketDecoded::NeedMore(6 - n)));
    }
    let total = 6 + 25 + 12 + 1100;
    assert_eq!(d.decode(&wire[..total - 1]), Ok(PacketDecoded::NeedMore(1)));
    let PacketDecoded::Packet {
        packet: raw,
        consumed,
    } = d.decode(&wire).unwrap()
    else {
        panic!("no packet")
    };
    assert_eq!(consumed, total);
    assert_eq!(raw.header, header);
    let p = raw.split_checked(1100, 512, 4).unwrap();
    assert_eq!((p.checksums, p.data), (&crcs[..], &data[..]));
    let chunks: Vec<(u32, usize)> = p.crc_chunks(512).map(|(c, d)| (c, d.len())).collect();
    assert_eq!(
        chunks,
        [(0xabc0_0000, 512), (0xabc0_0001, 512), (0xabc0_0002, 76)]
    );
    // Wrong chunking: 1100 bytes at 256 per checksum need 5 CRCs.
    assert_eq!(
        raw.split_checked(1100, 256, 4),
        Err(FrameError::PacketChecksumLen {
            got: 12,
            expected: 20,
            data_len: 1100
        })
    );
    assert_eq!(
        raw.split(1113),
        Err(FrameError::PacketDataLen {
            data_len: 1113,
            payload: 1112
        })
    );
    assert!(raw.split(-1).is_err());
    assert!(raw.split_checked(1100, 0, 4).is_err());
    assert!(raw.split_checked(1100, 512, 3).is_err());
    // The last packet: no checksums, no data.
    let last = packet(&header, &[], &[]);
    let PacketDecoded::Packet {
        packet: raw,
        consumed,
    } = d.decode(&last).unwrap()
    else {
        panic!()
    };
    assert_eq!(consumed, 31);
    let p = raw.split_checked(0, 512, 4).unwrap();
    assert!(p.checksums.is_empty() && p.data.is_empty());
    // CHECKSUM_NULL: data only.
    let nul = packet(&header, &[], &data);
    let PacketDecoded::Packet { packet: raw, .. } = d.decode(&nul).unwrap() else {
        panic!()
    };
    raw.split_checked(1100, 512, 0).unwrap();
}

#[test]
fn packet_sanity_errors() {
    let d = PacketDecoder::default();
    assert_eq!(
        d.decode(&[0, 0, 0, 3, 0, 25]),
        Err(FrameError::PacketLenTooSmall { len: 3 })
    );
    assert_eq!(
        d.decode(&[0, 0, 0, 4, 0, 34]),
        Err(FrameError::PacketHeaderTooLong { len: 34, max: 33 })
    );
    assert_eq!(
        d.decode(&[0, 0, 0, 4, 0xff, 0xff]),
        Err(FrameError::PacketHeaderTooLong {
            len: 0xffff,
            max: 33
        })
    );
    assert_eq!(
        d.decode(&[0x01, 0, 0, 0, 0, 25]),
        Err(FrameError::PacketTooLong {
            len: (1 << 24) + 25,
            max: DEFAULT_MAX_PACKET_LEN
        })
    );
    assert!(matches!(
        d.decode(&[0xff, 0xff, 0xff, 0xff, 0, 33]),
        Err(FrameError::PacketTooLong { .. })
    ));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200), cap in 0u32..300) {
        let _ = parse_preamble(&bytes);
        let d = FrameDecoder::new(cap);
        match d.decode(&bytes) {
            Ok(Decoded::Frame(r)) => {
                prop_assert!(r.end <= bytes.len() && r.end - r.start <= cap as usize);
                let _ = RequestFrame::split(&bytes[r.clone()]);
                let _ = ResponseFrame::split(&bytes[r]);
            }
            Ok(Decoded::NeedMore(n)) => prop_assert!(n > 0),
            Err(_) => {}
        }
        if let Ok(f) = RequestFrame::split(&bytes) {
            for id in [-33, -4, -3, -1, 0, 7] { let _ = f.check_call_id(id); }
        }
        let _ = ResponseFrame::split(&bytes);
        if let Ok(PacketDecoded::Packet { packet, consumed }) = PacketDecoder::new(cap).decode(&bytes) {
            prop_assert!(consumed <= bytes.len());
            for dl in [-1, 0, 1, 100, i32::MAX] {
                if let Ok(p) = packet.split(dl) {
                    let _ = p.check_checksums(512, 4);
                    let _ = p.crc_chunks(512).count();
                }
            }
        }
        let mut acc = FrameAccumulator::new(d);
        let mut rest = &bytes[..];
        while let Ok(step) = acc.next_frame(rest) {
            prop_assert!(step.consumed <= rest.len());
            rest = &rest[step.consumed..];
            if step.frame.is_none() { break; }
        }
    }

    #[test]
    fn accumulator_any_split(bodies in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..40), 0..8),
                             cuts in proptest::collection::vec(0usize..400, 0..10)) {
        let s = stream(&bodies);
        let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(s.len())).collect();
        cuts.push(0);
        cuts.push(s.len());
        cuts.sort();
        let chunks: Vec<&[u8]> = cuts.windows(2).map(|w| &s[w[0]..w[1]]).collect();
        let mut acc = FrameAccumulator::new(FrameDecoder::default());
        let got = run(&mut acc, &chunks).unwrap();
        prop_assert_eq!(got.into_iter().map(|g| g.0).collect::<Vec<_>>(), bodies);
        prop_assert_eq!(acc.pending(), 0);
    }

    #[test]
    fn split_round_trip(parts in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..300), 1..4)) {
        let refs: Vec<&[u8]> = parts.iter().map(|p| &p[..]).collect();
        let body = delimited(&refs);
        let f = RequestFrame::split(&body).unwrap();
        prop_assert_eq!(f.rpc_header, refs[0]);
        let mut got = vec![f.rpc_header];
        got.extend(f.request_header);
        got.extend(f.payload);
        prop_assert_eq!(got, refs.clone());
        if refs.len() <= 2 {
            let r = ResponseFrame::split(&body).unwrap();
            prop_assert_eq!(r.header, refs[0]);
            prop_assert_eq!(r.payload, refs.get(1).copied());
        }
    }
}
