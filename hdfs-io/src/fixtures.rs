//! Realistic NameNode messages built with the prost types, for tests, benches and the
//! `dn-select` measurement: DatanodeInfo entries filled the way the NameNode fills them
//! (`PBHelperClient.convert(DatanodeInfo)` sets every usage field), so that decoding costs what
//! it costs on real responses.

use hadoop_wire::pb::hadoop::common::TokenProto;
use hadoop_wire::pb::hadoop::hdfs::datanode_info_proto::AdminState;
use hadoop_wire::pb::hadoop::hdfs::{
    DatanodeIdProto, DatanodeInfoProto, ExtendedBlockProto, LocatedBlockProto,
};
use prost::Message;

/// One DataNode of a fixture.
#[derive(Debug, Clone)]
pub struct Dn {
    pub ip: String,
    pub host: String,
    pub uuid: String,
    pub xfer_port: u32,
    pub rack: String,
    pub admin: AdminState,
    pub last_update_ms: u64,
}

impl Dn {
    /// A normal DataNode `i` on 127.0.0.(2+i), host `dn<i>.example`, in `rack`.
    pub fn new(i: u32, rack: &str) -> Dn {
        Dn {
            ip: format!("127.0.0.{}", 2 + i),
            host: format!("dn{i}.example"),
            uuid: format!(
                "6f1c2a3b-4d5e-4f60-8a7b-{:012x}",
                0x9c0d1e2f3a00u64 + u64::from(i)
            ),
            xfer_port: 9866 + i,
            rack: rack.to_string(),
            admin: AdminState::Normal,
            last_update_ms: 1_767_225_600_000,
        }
    }

    /// The DatanodeInfoProto the NameNode would send for it.
    pub fn to_proto(&self) -> DatanodeInfoProto {
        DatanodeInfoProto {
            id: DatanodeIdProto {
                ip_addr: self.ip.clone(),
                host_name: self.host.clone(),
                datanode_uuid: self.uuid.clone(),
                xfer_port: self.xfer_port,
                info_port: 9864,
                ipc_port: 9867,
                info_secure_port: Some(0),
            },
            capacity: Some(1_967_317_549_056),
            dfs_used: Some(3_221_225_472),
            remaining: Some(1_702_148_964_352),
            block_pool_used: Some(3_221_225_472),
            last_update: Some(self.last_update_ms),
            xceiver_count: Some(3),
            location: Some(self.rack.clone()),
            non_dfs_used: Some(161_947_359_232),
            admin_state: Some(self.admin as i32),
            cache_capacity: Some(0),
            cache_used: Some(0),
            last_update_monotonic: Some(93_412_117),
            upgrade_domain: None,
            last_block_report_time: Some(1_767_225_000_000),
            last_block_report_monotonic: Some(92_811_000),
            num_blocks: Some(24),
            software_version: None,
        }
    }
}

/// An encoded LocatedBlockProto with these replicas, in this order.
pub fn located_block(dns: &[Dn]) -> Vec<u8> {
    LocatedBlockProto {
        b: ExtendedBlockProto {
            pool_id: "BP-1234567890-127.0.0.1-1767225600000".into(),
            block_id: 1_073_741_825,
            generation_stamp: 1001,
            num_bytes: Some(134_217_728),
        },
        offset: 0,
        locs: dns.iter().map(Dn::to_proto).collect(),
        corrupt: false,
        block_token: TokenProto {
            identifier: vec![],
            password: vec![],
            kind: String::new(),
            service: String::new(),
        },
        is_cached: vec![false; dns.len()],
        storage_types: vec![1; dns.len()],
        storage_i_ds: (0..dns.len())
            .map(|i| format!("DS-{i:08x}-0000-0000-0000-000000000000"))
            .collect(),
        block_indices: None,
        block_tokens: vec![],
    }
    .encode_to_vec()
}

/// The 3-replica block of the `dn-select` measurement: two DataNodes in `/r1`, one in `/r2`.
pub fn three_replica_block() -> Vec<u8> {
    located_block(&[Dn::new(0, "/r1"), Dn::new(1, "/r2"), Dn::new(2, "/r1")])
}

// ---------------------------------------------------------------------------------------
// The DataNode side of OP_READ_BLOCK, as `BlockSender` writes it (tests and fixtures only).

use crate::checksum::{ChecksumKind, DataChecksum};
use hadoop_wire::pb::hadoop::hdfs::{
    BlockOpResponseProto, ChecksumProto, PacketHeaderProto, ReadOpChecksumInfoProto,
};

/// A delimited BlockOpResponseProto.
pub fn dn_response(
    status: i32,
    checksum: Option<(ChecksumKind, u32, u64)>,
    message: Option<&str>,
) -> Vec<u8> {
    BlockOpResponseProto {
        status,
        first_bad_link: None,
        checksum_response: None,
        read_op_checksum_info: checksum.map(|(kind, bpc, chunk_offset)| ReadOpChecksumInfoProto {
            checksum: ChecksumProto {
                r#type: match kind {
                    ChecksumKind::Null => 0,
                    ChecksumKind::Crc32 => 1,
                    ChecksumKind::Crc32c => 2,
                },
                bytes_per_checksum: bpc,
            },
            chunk_offset,
        }),
        message: message.map(str::to_string),
        short_circuit_access_version: None,
    }
    .encode_length_delimited_to_vec()
}

/// One packet: prefix, header, the CRCs of `data`, `data`.
pub fn dn_packet(offset: i64, seqno: i64, last: bool, data: &[u8], c: DataChecksum) -> Vec<u8> {
    let header = PacketHeaderProto {
        offset_in_block: offset,
        seqno,
        last_packet_in_block: last,
        data_len: data.len() as i32,
        sync_block: None,
    }
    .encode_to_vec();
    let mut sums = Vec::new();
    c.append_sums(data, &mut sums);
    let mut out = Vec::new();
    out.extend_from_slice(&((4 + sums.len() + data.len()) as u32).to_be_bytes());
    out.extend_from_slice(&(header.len() as u16).to_be_bytes());
    out.extend_from_slice(&header);
    out.extend_from_slice(&sums);
    out.extend_from_slice(data);
    out
}

/// The whole DataNode answer to a read of `len` bytes at `offset` of a replica holding
/// `block`: response, data packets of `packet_data` bytes (a multiple of `bpc`) from the chunk
/// holding `offset` to the end of the chunk holding the last byte, then the empty last packet.
pub fn dn_stream(
    block: &[u8],
    offset: u64,
    len: u64,
    c: DataChecksum,
    packet_data: usize,
) -> Vec<u8> {
    let bpc = u64::from(c.bytes_per_checksum);
    let start = offset / bpc * bpc;
    let end = ((offset + len).div_ceil(bpc) * bpc).min(block.len() as u64);
    let mut out = dn_response(0, Some((c.kind, c.bytes_per_checksum, start)), None);
    let mut seq = 0;
    let mut at = start;
    while at < end {
        let n = (packet_data as u64).min(end - at);
        out.extend(dn_packet(
            at as i64,
            seq,
            false,
            &block[at as usize..(at + n) as usize],
            c,
        ));
        seq += 1;
        at += n;
    }
    out.extend(dn_packet(at as i64, seq, true, &[], c));
    out
}
