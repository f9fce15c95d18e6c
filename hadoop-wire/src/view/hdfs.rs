//! Views of the HDFS read path.
//!
//! [`LocatedBlocksView`] (the body of `getBlockLocations`' response) → [`LocatedBlockView`] →
//! [`DatanodeInfoView`] → [`DatanodeIdView`], and [`ExtendedBlockView`]; plus
//! [`PacketHeaderView`], the fixed-width header of each DataTransfer packet.

use super::common::TokenView;
use super::schema::Schema;
use super::{
    last_fixed32, last_fixed64, last_known_enum, last_len, last_varint, message_view, required,
    utf8, Repeated, RepeatedVarint,
};
use crate::pb::hadoop::hdfs::datanode_info_proto::AdminState;
use crate::pb::hadoop::hdfs::StorageTypeProto;
use crate::pb::schema::hadoop::hdfs as s;
use crate::reader::{exact, fail, DecodeError, Failure, Reader, WireType};

#[inline]
fn opt_str<'a>(
    b: Option<&'a [u8]>,
    schema: &'static Schema,
    number: u32,
) -> Result<Option<&'a str>, DecodeError> {
    b.map(|b| utf8(b, schema, number)).transpose()
}

// ---------------------------------------------------------------------------------------

message_view! {
    /// `hadoop.hdfs.LocatedBlocksProto`: a file's length and the blocks of a byte range.
    LocatedBlocksView => s::LocatedBlocksProto
}

const LBS: &Schema = &s::LocatedBlocksProto;

impl<'a> LocatedBlocksView<'a> {
    /// Field 1 `required uint64 fileLength`.
    #[inline]
    pub fn file_length(&self) -> Result<u64, DecodeError> {
        required(last_varint(self.bytes, LBS, 1)?, LBS, 1)
    }
    /// Field 2 `repeated LocatedBlockProto blocks`, in file order.
    #[inline]
    pub fn blocks(&self) -> Repeated<'a, LocatedBlockView<'a>> {
        Repeated::new(self.bytes, LBS, 2)
    }
    /// Field 3 `required bool underConstruction`.
    #[inline]
    pub fn under_construction(&self) -> Result<bool, DecodeError> {
        Ok(required(last_varint(self.bytes, LBS, 3)?, LBS, 3)? != 0)
    }
    /// Field 4 `LocatedBlockProto lastBlock`.
    #[inline]
    pub fn last_block(&self) -> Result<Option<LocatedBlockView<'a>>, DecodeError> {
        Ok(last_len(self.bytes, LBS, 4)?.map(LocatedBlockView::new))
    }
    /// Field 5 `required bool isLastBlockComplete`.
    #[inline]
    pub fn is_last_block_complete(&self) -> Result<bool, DecodeError> {
        Ok(required(last_varint(self.bytes, LBS, 5)?, LBS, 5)? != 0)
    }
    /// Field 6 `FileEncryptionInfoProto fileEncryptionInfo`, raw bytes.
    #[inline]
    pub fn file_encryption_info(&self) -> Result<Option<&'a [u8]>, DecodeError> {
        last_len(self.bytes, LBS, 6)
    }
    /// Field 7 `ErasureCodingPolicyProto ecPolicy`, raw bytes.
    #[inline]
    pub fn ec_policy(&self) -> Result<Option<&'a [u8]>, DecodeError> {
        last_len(self.bytes, LBS, 7)
    }
}

// ---------------------------------------------------------------------------------------

message_view! {
    /// `hadoop.hdfs.LocatedBlockProto`: one block and its replicas, already ordered by the
    /// NameNode for this client.
    LocatedBlockView => s::LocatedBlockProto
}

const LB: &Schema = &s::LocatedBlockProto;

impl<'a> LocatedBlockView<'a> {
    /// Field 1 `required ExtendedBlockProto b`.
    #[inline]
    pub fn b(&self) -> Result<ExtendedBlockView<'a>, DecodeError> {
        Ok(ExtendedBlockView::new(required(
            last_len(self.bytes, LB, 1)?,
            LB,
            1,
        )?))
    }
    /// Field 2 `required uint64 offset`: offset of the block's first byte in the file.
    #[inline]
    pub fn offset(&self) -> Result<u64, DecodeError> {
        required(last_varint(self.bytes, LB, 2)?, LB, 2)
    }
    /// Field 3 `repeated DatanodeInfoProto locs`, in the NameNode's order.
    #[inline]
    pub fn locs(&self) -> Repeated<'a, DatanodeInfoView<'a>> {
        Repeated::new(self.bytes, LB, 3)
    }
    /// Field 4 `required bool corrupt`.
    #[inline]
    pub fn corrupt(&self) -> Result<bool, DecodeError> {
        Ok(required(last_varint(self.bytes, LB, 4)?, LB, 4)? != 0)
    }
    /// Field 5 `required TokenProto blockToken`.
    #[inline]
    pub fn block_token(&self) -> Result<TokenView<'a>, DecodeError> {
        Ok(TokenView::new(required(
            last_len(self.bytes, LB, 5)?,
            LB,
            5,
        )?))
    }
    /// Field 6 `repeated bool isCached [packed = true]`; unpacked values are accepted too.
    #[inline]
    pub fn is_cached(&self) -> RepeatedVarint<'a, bool> {
        RepeatedVarint::new(self.bytes, LB, 6)
    }
    /// Field 7 `repeated StorageTypeProto storageTypes` as on the wire (parallel to `locs`).
    #[inline]
    pub fn storage_types_raw(&self) -> RepeatedVarint<'a, i32> {
        RepeatedVarint::new(self.bytes, LB, 7)
    }
    /// Field 7, known values only (Java drops unknown enum values of repeated fields).
    #[inline]
    pub fn storage_types(
        &self,
    ) -> impl Iterator<Item = Result<StorageTypeProto, DecodeError>> + 'a {
        self.storage_types_raw().filter_map(|r| match r {
            Ok(v) => StorageTypeProto::try_from(v).ok().map(Ok),
            Err(e) => Some(Err(e)),
        })
    }
    /// Field 8 `repeated string storageIDs`.
    #[inline]
    pub fn storage_ids(&self) -> Repeated<'a, &'a str> {
        Repeated::new(self.bytes, LB, 8)
    }
    /// Field 9 `bytes blockIndices` (erasure coding).
    #[inline]
    pub fn block_indices(&self) -> Result<Option<&'a [u8]>, DecodeError> {
        last_len(self.bytes, LB, 9)
    }
    /// Field 10 `repeated TokenProto blockTokens` (erasure coding).
    #[inline]
    pub fn block_tokens(&self) -> Repeated<'a, TokenView<'a>> {
        Repeated::new(self.bytes, LB, 10)
    }
}

// ---------------------------------------------------------------------------------------

message_view! {
    /// `hadoop.hdfs.ExtendedBlockProto`: block pool, block id, generation stamp, length.
    ExtendedBlockView => s::ExtendedBlockProto
}

const EB: &Schema = &s::ExtendedBlockProto;

impl<'a> ExtendedBlockView<'a> {
    /// Field 1 `required string poolId`.
    #[inline]
    pub fn pool_id(&self) -> Result<&'a str, DecodeError> {
        utf8(self.pool_id_bytes()?, EB, 1)
    }
    /// Field 1 unchecked.
    #[inline]
    pub fn pool_id_bytes(&self) -> Result<&'a [u8], DecodeError> {
        required(last_len(self.bytes, EB, 1)?, EB, 1)
    }
    /// Field 2 `required uint64 blockId`.
    #[inline]
    pub fn block_id(&self) -> Result<u64, DecodeError> {
        required(last_varint(self.bytes, EB, 2)?, EB, 2)
    }
    /// Field 3 `required uint64 generationStamp`.
    #[inline]
    pub fn generation_stamp(&self) -> Result<u64, DecodeError> {
        required(last_varint(self.bytes, EB, 3)?, EB, 3)
    }
    /// Field 4 `uint64 numBytes [default = 0]`.
    #[inline]
    pub fn num_bytes(&self) -> Result<u64, DecodeError> {
        Ok(self.num_bytes_opt()?.unwrap_or(0))
    }
    /// Field 4 with presence.
    #[inline]
    pub fn num_bytes_opt(&self) -> Result<Option<u64>, DecodeError> {
        last_varint(self.bytes, EB, 4)
    }
}

// ---------------------------------------------------------------------------------------

message_view! {
    /// `hadoop.hdfs.DatanodeIDProto`: addresses and ports of a DataNode.
    DatanodeIdView => s::DatanodeIDProto
}

const DID: &Schema = &s::DatanodeIDProto;

impl<'a> DatanodeIdView<'a> {
    /// Field 1 `required string ipAddr`.
    #[inline]
    pub fn ip_addr(&self) -> Result<&'a str, DecodeError> {
        utf8(required(last_len(self.bytes, DID, 1)?, DID, 1)?, DID, 1)
    }
    /// Field 2 `required string hostName`.
    #[inline]
    pub fn host_name(&self) -> Result<&'a str, DecodeError> {
        utf8(required(last_len(self.bytes, DID, 2)?, DID, 2)?, DID, 2)
    }
    /// Field 3 `required string datanodeUuid`.
    #[inline]
    pub fn datanode_uuid(&self) -> Result<&'a str, DecodeError> {
        utf8(required(last_len(self.bytes, DID, 3)?, DID, 3)?, DID, 3)
    }
    /// Field 4 `required uint32 xferPort` (DataTransfer).
    #[inline]
    pub fn xfer_port(&self) -> Result<u32, DecodeError> {
        Ok(required(last_varint(self.bytes, DID, 4)?, DID, 4)? as u32)
    }
    /// Field 5 `required uint32 infoPort` (HTTP).
    #[inline]
    pub fn info_port(&self) -> Result<u32, DecodeError> {
        Ok(required(last_varint(self.bytes, DID, 5)?, DID, 5)? as u32)
    }
    /// Field 6 `required uint32 ipcPort`.
    #[inline]
    pub fn ipc_port(&self) -> Result<u32, DecodeError> {
        Ok(required(last_varint(self.bytes, DID, 6)?, DID, 6)? as u32)
    }
    /// Field 7 `uint32 infoSecurePort [default = 0]`.
    #[inline]
    pub fn info_secure_port(&self) -> Result<u32, DecodeError> {
        Ok(self.info_secure_port_opt()?.unwrap_or(0))
    }
    /// Field 7 with presence.
    #[inline]
    pub fn info_secure_port_opt(&self) -> Result<Option<u32>, DecodeError> {
        Ok(last_varint(self.bytes, DID, 7)?.map(|v| v as u32))
    }
}

// ---------------------------------------------------------------------------------------

message_view! {
    /// `hadoop.hdfs.DatanodeInfoProto`: a DataNode with its usage figures and admin state.
    DatanodeInfoView => s::DatanodeInfoProto
}

const DI: &Schema = &s::DatanodeInfoProto;

/// Accessor pair for an `optional uint64 ... [default = 0]` field of DatanodeInfoProto.
macro_rules! u64_default_zero {
    ($($(#[$m:meta])* $name:ident, $opt:ident = $num:expr;)*) => {$(
        $(#[$m])*
        #[inline]
        pub fn $name(&self) -> Result<u64, DecodeError> {
            Ok(self.$opt()?.unwrap_or(0))
        }
        /// With presence.
        #[inline]
        pub fn $opt(&self) -> Result<Option<u64>, DecodeError> {
            last_varint(self.bytes, DI, $num)
        }
    )*};
}

impl<'a> DatanodeInfoView<'a> {
    /// Field 1 `required DatanodeIDProto id`.
    #[inline]
    pub fn id(&self) -> Result<DatanodeIdView<'a>, DecodeError> {
        Ok(DatanodeIdView::new(required(
            last_len(self.bytes, DI, 1)?,
            DI,
            1,
        )?))
    }

    u64_default_zero! {
        /// Field 2 `uint64 capacity [default = 0]`.
        capacity, capacity_opt = 2;
        /// Field 3 `uint64 dfsUsed [default = 0]`.
        dfs_used, dfs_used_opt = 3;
        /// Field 4 `uint64 remaining [default = 0]`.
        remaining, remaining_opt = 4;
        /// Field 5 `uint64 blockPoolUsed [default = 0]`.
        block_pool_used, block_pool_used_opt = 5;
        /// Field 6 `uint64 lastUpdate [default = 0]`.
        last_update, last_update_opt = 6;
        /// Field 11 `uint64 cacheCapacity [default = 0]`.
        cache_capacity, cache_capacity_opt = 11;
        /// Field 12 `uint64 cacheUsed [default = 0]`.
        cache_used, cache_used_opt = 12;
        /// Field 13 `uint64 lastUpdateMonotonic [default = 0]`.
        last_update_monotonic, last_update_monotonic_opt = 13;
        /// Field 15 `uint64 lastBlockReportTime [default = 0]`.
        last_block_report_time, last_block_report_time_opt = 15;
        /// Field 16 `uint64 lastBlockReportMonotonic [default = 0]`.
        last_block_report_monotonic, last_block_report_monotonic_opt = 16;
    }

    /// Field 7 `uint32 xceiverCount [default = 0]`.
    #[inline]
    pub fn xceiver_count(&self) -> Result<u32, DecodeError> {
        Ok(self.xceiver_count_opt()?.unwrap_or(0))
    }
    /// Field 7 with presence.
    #[inline]
    pub fn xceiver_count_opt(&self) -> Result<Option<u32>, DecodeError> {
        Ok(last_varint(self.bytes, DI, 7)?.map(|v| v as u32))
    }
    /// Field 8 `string location` (rack path).
    #[inline]
    pub fn location(&self) -> Result<Option<&'a str>, DecodeError> {
        opt_str(last_len(self.bytes, DI, 8)?, DI, 8)
    }
    /// Field 9 `uint64 nonDfsUsed` (no explicit default).
    #[inline]
    pub fn non_dfs_used(&self) -> Result<Option<u64>, DecodeError> {
        last_varint(self.bytes, DI, 9)
    }
    /// Field 10 `AdminState adminState` as on the wire.
    #[inline]
    pub fn admin_state_raw(&self) -> Result<Option<i32>, DecodeError> {
        Ok(last_varint(self.bytes, DI, 10)?.map(|v| v as i32))
    }
    /// Field 10 `[default = NORMAL]`: last known value, else NORMAL.
    #[inline]
    pub fn admin_state(&self) -> Result<AdminState, DecodeError> {
        let v = last_known_enum(self.bytes, DI, 10, |v| AdminState::try_from(v).is_ok())?;
        Ok(v.and_then(|v| AdminState::try_from(v).ok())
            .unwrap_or(AdminState::Normal))
    }
    /// Field 14 `string upgradeDomain`.
    #[inline]
    pub fn upgrade_domain(&self) -> Result<Option<&'a str>, DecodeError> {
        opt_str(last_len(self.bytes, DI, 14)?, DI, 14)
    }
    /// Field 17 `uint32 numBlocks [default = 0]`.
    #[inline]
    pub fn num_blocks(&self) -> Result<u32, DecodeError> {
        Ok(self.num_blocks_opt()?.unwrap_or(0))
    }
    /// Field 17 with presence.
    #[inline]
    pub fn num_blocks_opt(&self) -> Result<Option<u32>, DecodeError> {
        Ok(last_varint(self.bytes, DI, 17)?.map(|v| v as u32))
    }
}

// ---------------------------------------------------------------------------------------

message_view! {
    /// `hadoop.hdfs.PacketHeaderProto`: the header of one DataTransfer packet (framed by the
    /// packet's u16 header length, not by a varint). All fields but `syncBlock` are required.
    PacketHeaderView => s::PacketHeaderProto
}

const PH: &Schema = &s::PacketHeaderProto;

/// A decoded packet header (see [`PacketHeaderView::read`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PacketHeader {
    pub offset_in_block: i64,
    pub seqno: i64,
    pub last_packet_in_block: bool,
    pub data_len: i32,
    pub sync_block: bool,
}

impl PacketHeaderView<'_> {
    /// All five fields in one pass, required ones checked (last occurrence wins).
    #[inline]
    pub fn read(&self) -> Result<PacketHeader, DecodeError> {
        exact!(self.read_g::<E>())
    }

    #[inline(always)]
    fn read_g<E: Failure>(&self) -> Result<PacketHeader, E> {
        fn req<T, E: Failure>(v: Option<T>, number: u32) -> Result<T, E> {
            match v {
                Some(v) => Ok(v),
                None => fail(|| super::missing(PH, number)),
            }
        }
        let (mut off, mut seq, mut last, mut len, mut sync) = (None, None, None, None, None);
        let mut r = Reader::new(self.bytes);
        while !r.is_empty() {
            let (n, wt) = r.tag::<E>()?;
            match (n, wt) {
                (1, WireType::Fixed64) => off = Some(r.fixed64::<E>()? as i64),
                (2, WireType::Fixed64) => seq = Some(r.fixed64::<E>()? as i64),
                (3, WireType::Varint) => last = Some(r.varint::<E>()? != 0),
                (4, WireType::Fixed32) => len = Some(r.fixed32::<E>()? as i32),
                (5, WireType::Varint) => sync = Some(r.varint::<E>()? != 0),
                (1..=5, other) => return fail(|| super::wrong_wire(PH, n, other)),
                _ => r.skip_value::<E>(n, wt, 0)?,
            }
        }
        Ok(PacketHeader {
            offset_in_block: req(off, 1)?,
            seqno: req(seq, 2)?,
            last_packet_in_block: req(last, 3)?,
            data_len: req(len, 4)?,
            sync_block: sync.unwrap_or(false),
        })
    }
    /// Field 1 `required sfixed64 offsetInBlock`.
    #[inline]
    pub fn offset_in_block(&self) -> Result<i64, DecodeError> {
        Ok(required(last_fixed64(self.bytes, PH, 1)?, PH, 1)? as i64)
    }
    /// Field 2 `required sfixed64 seqno`.
    #[inline]
    pub fn seqno(&self) -> Result<i64, DecodeError> {
        Ok(required(last_fixed64(self.bytes, PH, 2)?, PH, 2)? as i64)
    }
    /// Field 3 `required bool lastPacketInBlock`.
    #[inline]
    pub fn last_packet_in_block(&self) -> Result<bool, DecodeError> {
        Ok(required(last_varint(self.bytes, PH, 3)?, PH, 3)? != 0)
    }
    /// Field 4 `required sfixed32 dataLen`.
    #[inline]
    pub fn data_len(&self) -> Result<i32, DecodeError> {
        Ok(required(last_fixed32(self.bytes, PH, 4)?, PH, 4)? as i32)
    }
    /// Field 5 `bool syncBlock [default = false]`.
    #[inline]
    pub fn sync_block(&self) -> Result<bool, DecodeError> {
        Ok(self.sync_block_opt()?.unwrap_or(false))
    }
    /// Field 5 with presence.
    #[inline]
    pub fn sync_block_opt(&self) -> Result<Option<bool>, DecodeError> {
        Ok(last_varint(self.bytes, PH, 5)?.map(|v| v != 0))
    }
}
