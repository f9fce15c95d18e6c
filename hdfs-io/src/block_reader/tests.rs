use super::*;
use crate::fixtures::{dn_packet, dn_response, dn_stream};
use hadoop_wire::pb::hadoop::common::TokenProto;
use hadoop_wire::pb::hadoop::hdfs::{
    BaseHeaderProto, CachingStrategyProto, ClientOperationHeaderProto, ExtendedBlockProto,
    OpReadBlockProto,
};

const CRC32C: DataChecksum = DataChecksum {
    kind: ChecksumKind::Crc32c,
    bytes_per_checksum: 512,
};

fn name() -> BlockName {
    BlockName {
        pool_id: "BP-1".into(),
        block_id: 1073741825,
        generation_stamp: 1001,
    }
}

fn block_data(n: usize) -> Vec<u8> {
    (0..n)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect()
}

/// Feeds `stream` in pieces of `piece` bytes, as a receive loop would (keeping unconsumed
/// bytes), and collects the returned data until Done.
fn run(stream: &[u8], r: &mut BlockRead, piece: usize) -> Result<Vec<u8>, Error> {
    let mut out = Vec::new();
    let mut pending: Vec<u8> = Vec::new();
    let mut fed = 0;
    loop {
        match r.poll(&pending)? {
            Event::NeedMore(n) => {
                assert!(n > 0);
                if fed == stream.len() {
                    return Err(Error::Truncated {
                        block: r.block().clone(),
                        datanode: "test".into(),
                        received: r.delivered(),
                        expected: r.delivered() + r.remaining(),
                    });
                }
                let k = piece.min(stream.len() - fed);
                pending.extend_from_slice(&stream[fed..fed + k]);
                fed += k;
            }
            Event::Data { data, consumed } => {
                out.extend_from_slice(data);
                pending.drain(..consumed);
            }
            Event::Done { consumed } => {
                pending.drain(..consumed);
                assert!(
                    pending.is_empty() && fed == stream.len(),
                    "bytes after the last packet"
                );
                return Ok(out);
            }
        }
    }
}

#[test]
fn request_bytes_match_prost() {
    let block = ExtendedBlockProto {
        pool_id: "BP-1234-127.0.0.1-1".into(),
        block_id: 1073741825,
        generation_stamp: 1001,
        num_bytes: Some(1 << 20),
    };
    let token = TokenProto {
        identifier: vec![1, 2],
        password: vec![3],
        kind: "HDFS_BLOCK_TOKEN".into(),
        service: "".into(),
    };
    let (bb, tb) = (block.encode_to_vec(), token.encode_to_vec());
    let mut ours = Vec::new();
    encode_read_block(
        &ReadBlockRequest {
            block: &bb,
            token: &tb,
            client_name: "DFSClient_hotpath",
            offset: 300,
            len: 1 << 40,
        },
        &mut ours,
    );
    let want = OpReadBlockProto {
        header: ClientOperationHeaderProto {
            base_header: BaseHeaderProto {
                block,
                token: Some(token),
                trace_info: None,
            },
            client_name: "DFSClient_hotpath".into(),
        },
        offset: 300,
        len: 1 << 40,
        send_checksums: Some(true),
        caching_strategy: Some(CachingStrategyProto {
            drop_behind: None,
            readahead: None,
        }),
    };
    let mut expected = vec![0, 28, 81];
    expected.extend(want.encode_length_delimited_to_vec());
    assert_eq!(ours, expected);
}

#[test]
fn whole_block_in_any_receive_pieces() {
    let data = block_data(5000); // 9 full chunks + a short one of 392
    let stream = dn_stream(&data, 0, 5000, CRC32C, 1024);
    for piece in [1, 7, 100, 4096, usize::MAX] {
        let mut r = BlockRead::new(name(), "dn".into(), 0, 5000);
        assert_eq!(run(&stream, &mut r, piece).unwrap(), data, "piece {piece}");
        assert!(r.is_done());
        assert_eq!(r.status_bytes(), [2, 0x08, 6], "CHECKSUM_OK");
    }
}

#[test]
fn unaligned_ranges_discard_and_trim() {
    let data = block_data(70_000);
    for (off, len) in [
        (1, 1),
        (511, 2),
        (512, 512),
        (700, 65_536),
        (69_999, 1),
        (3, 69_997),
        (66_000, 4000),
    ] {
        for c in [
            CRC32C,
            DataChecksum {
                kind: ChecksumKind::Crc32,
                bytes_per_checksum: 512,
            },
        ] {
            let stream = dn_stream(&data, off, len, c, 64 * 1024);
            let mut r = BlockRead::new(name(), "dn".into(), off, len);
            let got = run(&stream, &mut r, 1500).unwrap();
            assert_eq!(
                got,
                &data[off as usize..(off + len) as usize],
                "{off}+{len}"
            );
            assert_eq!(r.checksum().kind, c.kind);
        }
    }
}

#[test]
fn checksum_null_sends_success() {
    let data = block_data(2000);
    let c = DataChecksum {
        kind: ChecksumKind::Null,
        bytes_per_checksum: 512,
    };
    let stream = dn_stream(&data, 100, 1000, c, 1024);
    let mut r = BlockRead::new(name(), "dn".into(), 100, 1000);
    assert_eq!(run(&stream, &mut r, 333).unwrap(), &data[100..1100]);
    assert_eq!(r.status_bytes(), [2, 0x08, 0]);
}

#[test]
fn corrupt_data_or_crc_returns_no_byte_of_that_packet() {
    let data = block_data(4096);
    let clean = dn_stream(&data, 0, 4096, CRC32C, 1024);
    let resp_len = dn_response(0, Some((ChecksumKind::Crc32c, 512, 0)), None).len();
    let pkt = dn_packet(0, 0, false, &data[..1024], CRC32C).len();
    // second packet: prefix(6) + header(25) + 8 CRCs, then data; flip byte 600 of its data
    let data_at = resp_len + pkt + 6 + 25 + 32;
    for flip in [
        data_at + 600,
        resp_len + pkt + 6 + 25 + 5, /* a CRC byte of chunk 1 */
    ] {
        let mut bad = clean.clone();
        bad[flip] ^= 0x10;
        let mut r = BlockRead::new(name(), "dn9".into(), 0, 4096);
        let mut got = Vec::new();
        let mut pending = &bad[..];
        let err = loop {
            match r.poll(pending) {
                Ok(Event::Data { data, consumed }) => {
                    got.extend_from_slice(data);
                    pending = &pending[consumed..];
                }
                Ok(e) => panic!("unexpected {e:?}"),
                Err(e) => break e,
            }
        };
        assert_eq!(got, &data[..1024], "only the first packet's bytes");
        match err {
            Error::Checksum {
                block,
                offset,
                datanode,
                expected,
                computed,
            } => {
                assert_eq!(block, name());
                assert_eq!(offset, 1024 + 512, "chunk 1 of packet 1");
                assert_eq!(datanode, "dn9");
                assert_ne!(expected, computed);
            }
            e => panic!("{e}"),
        }
        assert!(r.poll(pending).is_err(), "stays failed");
    }
}

#[test]
fn datanode_refusal_is_typed() {
    let stream = dn_response(
        1,
        None,
        Some("Replica not found for BP-1:blk_1073741825_1001"),
    );
    let mut r = BlockRead::new(name(), "dn".into(), 0, 10);
    match r.poll(&stream).unwrap_err() {
        Error::DataNodeRefused {
            status, message, ..
        } => {
            assert_eq!(status, "ERROR");
            assert!(message.contains("Replica not found"));
        }
        e => panic!("{e}"),
    }
    let stream = dn_response(5, None, None);
    let e = BlockRead::new(name(), "dn".into(), 0, 10)
        .poll(&stream)
        .unwrap_err();
    assert!(e.to_string().contains("ERROR_ACCESS_TOKEN"), "{e}");
}

#[test]
fn protocol_violations() {
    let data = block_data(3000);
    let resp = |chunk_offset| dn_response(0, Some((ChecksumKind::Crc32c, 512, chunk_offset)), None);
    let cases: Vec<(&str, Vec<u8>, u64, u64)> = vec![
        ("chunkOffset after offset", resp(1024), 1000, 10),
        ("chunkOffset a chunk too early", resp(0), 600, 10),
        ("no checksum info", dn_response(0, None, None), 0, 10),
        (
            "seqno skip",
            [
                resp(0),
                dn_packet(0, 0, false, &data[..512], CRC32C),
                dn_packet(512, 2, false, &data[512..1024], CRC32C),
            ]
            .concat(),
            0,
            1024,
        ),
        (
            "offset gap",
            [
                resp(0),
                dn_packet(0, 0, false, &data[..512], CRC32C),
                dn_packet(1024, 1, false, &data[1024..1536], CRC32C),
            ]
            .concat(),
            0,
            1024,
        ),
        (
            "early last",
            [
                resp(0),
                dn_packet(0, 0, false, &data[..512], CRC32C),
                dn_packet(512, 1, true, &[], CRC32C),
            ]
            .concat(),
            0,
            1024,
        ),
        (
            "extra data",
            [
                resp(0),
                dn_packet(0, 0, false, &data[..512], CRC32C),
                dn_packet(512, 1, false, &data[512..1024], CRC32C),
            ]
            .concat(),
            0,
            512,
        ),
        (
            "data in last",
            [resp(0), dn_packet(0, 0, true, &data[..512], CRC32C)].concat(),
            0,
            512,
        ),
        ("huge response", vec![0xff, 0xff, 0xff, 0xff, 0x07], 0, 10),
        ("long varint", vec![0xff; 6], 0, 10),
        (
            "huge packet",
            [resp(0), vec![0x7f, 0xff, 0xff, 0xff, 0, 25]].concat(),
            0,
            10,
        ),
    ];
    for (what, stream, off, len) in cases {
        let mut r = BlockRead::new(name(), "dn".into(), off, len);
        match run(&stream, &mut r, usize::MAX) {
            Err(Error::Protocol { reason, .. }) => assert!(!reason.is_empty(), "{what}"),
            other => panic!("{what}: {other:?}"),
        }
    }
    // a stream cut short is NeedMore forever (the I/O edge turns EOF into Truncated)
    let stream = dn_stream(&data, 0, 3000, CRC32C, 1024);
    let mut r = BlockRead::new(name(), "dn".into(), 0, 3000);
    assert!(matches!(
        run(&stream[..stream.len() - 3], &mut r, 64),
        Err(Error::Truncated { .. })
    ));
}
