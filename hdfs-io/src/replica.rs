//! One replica of a block as the DataNode choice needs it, read from a
//! [`DatanodeInfoView`] in one pass over its bytes (no owned copies: every field borrows the
//! NameNode's response buffer).
//!
//! The `ipc` views read one field per scan (each accessor walks the message), which is right
//! for cold fields; a DatanodeInfo has ~17 fields and the choice needs six of them, so
//! [`Replica::decode`] walks the DatanodeInfo and its DatanodeID once each, with the same
//! semantics as the views (last occurrence wins, wrong wire types and missing required fields
//! are errors, unknown enum values fall back to the default).

use crate::addr_cache::HostPort;
use crate::error::Error;
use hadoop_wire::pb::hadoop::hdfs::datanode_info_proto::AdminState;
use hadoop_wire::reader::{Reader, WireType};
use hadoop_wire::view::hdfs::{DatanodeInfoView, LocatedBlockView};

/// What the DataNode choice knows about one replica.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Replica<'a> {
    /// The DatanodeInfo this was read from (for cold fields).
    pub info: DatanodeInfoView<'a>,
    /// Position in the block's `locs` (the NameNode's order).
    pub index: u16,
    /// `DatanodeID.ipAddr`: the address the NameNode saw the DataNode register from.
    pub ip_addr: &'a [u8],
    /// `DatanodeID.hostName`.
    pub host_name: &'a [u8],
    /// `DatanodeID.datanodeUuid`: the DataNode's identity (dead-node memory key).
    pub uuid: &'a [u8],
    /// `DatanodeID.xferPort`: the DataTransfer port.
    pub xfer_port: u16,
    /// `DatanodeInfo.location`: the rack path the NameNode resolved (empty when absent).
    pub location: &'a [u8],
    /// `DatanodeInfo.adminState`.
    pub admin_state: AdminState,
    /// `DatanodeInfo.lastUpdate`: the DataNode's last heartbeat, NameNode wall clock in ms
    /// (0 when absent).
    pub last_update_ms: u64,
    /// No heartbeat for longer than the stale interval when the response was read
    /// (see [`Replica::decode`]).
    pub stale: bool,
    /// The address cache's keys of `ipAddr:xferPort` and `hostName:xferPort`, hashed once
    /// here rather than on every choice ([`Replica::xfer_key`]).
    ip_key: HostPort<'a>,
    host_key: HostPort<'a>,
}

#[cold]
fn bad(what: &'static str, e: hadoop_wire::reader::DecodeError) -> Error {
    Error::Decode { what, source: e }
}

#[cold]
fn wrong(what: &'static str, field: &'static str) -> Error {
    Error::Malformed {
        what,
        reason: field,
    }
}

impl<'a> Replica<'a> {
    /// Reads one DatanodeInfo. `stale_before_ms` is a NameNode-clock time in ms: a replica
    /// whose `lastUpdate` is present and earlier is marked stale (pass 0 to mark none). The
    /// caller computes it once per response (its receive time minus
    /// `dfs.namenode.stale.datanode.interval`), so the hot path reads no clock.
    pub fn decode(
        info: DatanodeInfoView<'a>,
        index: u16,
        stale_before_ms: u64,
    ) -> Result<Self, Error> {
        const W: &str = "DatanodeInfoProto";
        let mut id = None;
        let mut location: &[u8] = &[];
        let mut admin = AdminState::Normal;
        let mut last_update = 0u64;
        let mut r = Reader::new(info.as_bytes());
        while !r.is_empty() {
            let (n, wt) = r.read_tag().map_err(|e| bad(W, e))?;
            match (n, wt) {
                (1, WireType::Len) => id = Some(r.read_len().map_err(|e| bad(W, e))?),
                (6, WireType::Varint) => last_update = r.read_varint().map_err(|e| bad(W, e))?,
                (8, WireType::Len) => location = r.read_len().map_err(|e| bad(W, e))?,
                (10, WireType::Varint) => {
                    let x = r.read_varint().map_err(|e| bad(W, e))?;
                    // proto2 Java files unknown enum values under unknown fields: keep the last known
                    if let Ok(s) = AdminState::try_from(x as i32) {
                        admin = s;
                    }
                }
                (1 | 6 | 8 | 10, _) => {
                    return Err(wrong(W, "wire type of id/lastUpdate/location/adminState"))
                }
                _ => r.skip(n, wt, 0).map_err(|e| bad(W, e))?,
            }
        }
        let Some(id) = id else {
            return Err(wrong(W, "missing required field id"));
        };

        const D: &str = "DatanodeIDProto";
        let (mut ip, mut host, mut uuid, mut port) = (None, None, None, None);
        let mut r = Reader::new(id);
        while !r.is_empty() {
            let (n, wt) = r.read_tag().map_err(|e| bad(D, e))?;
            match (n, wt) {
                (1, WireType::Len) => ip = Some(r.read_len().map_err(|e| bad(D, e))?),
                (2, WireType::Len) => host = Some(r.read_len().map_err(|e| bad(D, e))?),
                (3, WireType::Len) => uuid = Some(r.read_len().map_err(|e| bad(D, e))?),
                (4, WireType::Varint) => port = Some(r.read_varint().map_err(|e| bad(D, e))?),
                (1..=4, _) => {
                    return Err(wrong(
                        D,
                        "wire type of ipAddr/hostName/datanodeUuid/xferPort",
                    ))
                }
                _ => r.skip(n, wt, 1).map_err(|e| bad(D, e))?,
            }
        }
        let (Some(ip), Some(host), Some(uuid), Some(port)) = (ip, host, uuid, port) else {
            return Err(wrong(
                D,
                "missing required field ipAddr, hostName, datanodeUuid or xferPort",
            ));
        };
        let Ok(xfer_port) = u16::try_from(port) else {
            return Err(wrong(D, "xferPort out of the TCP port range"));
        };
        Ok(Replica {
            info,
            index,
            ip_addr: ip,
            host_name: host,
            uuid,
            xfer_port,
            location,
            admin_state: admin,
            last_update_ms: last_update,
            stale: last_update != 0 && last_update < stale_before_ms,
            ip_key: HostPort::new(ip, xfer_port),
            host_key: HostPort::new(host, xfer_port),
        })
    }

    /// The host part of the DataTransfer address: `hostName` when
    /// `dfs.client.use.datanode.hostname` is set, else `ipAddr` (as Java's
    /// `DatanodeID.getXferAddr(useHostname)`).
    #[inline]
    pub fn xfer_host(&self, use_hostname: bool) -> &'a [u8] {
        if use_hostname {
            self.host_name
        } else {
            self.ip_addr
        }
    }

    /// The DataTransfer address as the [`AddrCache`](crate::addr_cache::AddrCache) looks it
    /// up: [`xfer_host`](Self::xfer_host) and `xferPort`, hashed when the replica was decoded.
    #[inline]
    pub fn xfer_key(&self, use_hostname: bool) -> HostPort<'a> {
        if use_hostname {
            self.host_key
        } else {
            self.ip_key
        }
    }

    /// `host:port` text of the DataTransfer address, for messages.
    pub fn xfer_addr_string(&self, use_hostname: bool) -> String {
        let h = String::from_utf8_lossy(self.xfer_host(use_hostname));
        if h.contains(':') {
            format!("[{h}]:{}", self.xfer_port)
        } else {
            format!("{h}:{}", self.xfer_port)
        }
    }
}

/// Reads every replica of a block into `out` (cleared first; its capacity is reused, so a
/// caller that keeps the vector allocates only for its first blocks).
pub fn decode_replicas<'a>(
    block: &LocatedBlockView<'a>,
    stale_before_ms: u64,
    out: &mut Vec<Replica<'a>>,
) -> Result<(), Error> {
    out.clear();
    for (i, info) in block.locs().enumerate() {
        let info = info.map_err(|e| bad("LocatedBlockProto.locs", e))?;
        let i = u16::try_from(i).map_err(|_| Error::Malformed {
            what: "LocatedBlockProto",
            reason: "more than 65535 replicas",
        })?;
        out.push(Replica::decode(info, i, stale_before_ms)?);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::{located_block, Dn};
    use hadoop_wire::pb::hadoop::hdfs::DatanodeInfoProto;
    use prost::Message;

    #[test]
    fn decodes_what_the_namenode_sends() {
        let dns = [Dn::new(0, "/r1"), Dn::new(1, "/r2")];
        let bytes = located_block(&dns);
        let mut out = Vec::new();
        decode_replicas(&LocatedBlockView::new(&bytes), 0, &mut out).unwrap();
        assert_eq!(out.len(), 2);
        let r = &out[1];
        assert_eq!(r.index, 1);
        assert_eq!(r.ip_addr, b"127.0.0.3");
        assert_eq!(r.host_name, b"dn1.example");
        assert_eq!(r.uuid, dns[1].uuid.as_bytes());
        assert_eq!(r.xfer_port, 9867);
        assert_eq!(r.location, b"/r2");
        assert_eq!(r.admin_state, AdminState::Normal);
        assert!(!r.stale);
        assert_eq!(r.xfer_host(true), b"dn1.example");
        // the cache keys hashed at decode are the ones a lookup would build
        use crate::addr_cache::HostPort;
        assert_eq!(r.xfer_key(true), HostPort::new(b"dn1.example", 9867));
        assert_eq!(r.xfer_key(false), HostPort::new(b"127.0.0.3", 9867));
        assert_eq!(r.xfer_addr_string(false), "127.0.0.3:9867");
        // agrees with the views
        assert_eq!(
            r.info.id().unwrap().ip_addr().unwrap().as_bytes(),
            r.ip_addr
        );
        assert_eq!(r.info.location().unwrap().unwrap().as_bytes(), r.location);
        decode_replicas(
            &LocatedBlockView::new(&bytes),
            dns[0].last_update_ms + 1,
            &mut out,
        )
        .unwrap();
        assert!(out.iter().all(|r| r.stale));
    }

    #[test]
    fn proto2_rules_and_bad_input() {
        let mut p = Dn::new(0, "/r1").to_proto();
        let base = p.encode_to_vec();
        // unknown adminState value: keeps the last known one (here none → NORMAL)
        let mut b = base.clone();
        b.extend_from_slice(&[0x50, 0x09]); // field 10 = 9
        let r = Replica::decode(DatanodeInfoView::new(&b), 0, 0).unwrap();
        assert_eq!(r.admin_state, AdminState::Normal);
        // last occurrence wins
        b.extend_from_slice(&[0x50, 0x01, 0x42, 0x03, b'/', b'r', b'7']);
        let r = Replica::decode(DatanodeInfoView::new(&b), 0, 0).unwrap();
        assert_eq!(
            (r.admin_state, r.location),
            (AdminState::DecommissionInprogress, &b"/r7"[..])
        );
        // wrong wire type on a known field
        let mut w = base.clone();
        w.extend_from_slice(&[0x55, 0, 0, 0, 0]); // field 10 as fixed32
        assert!(matches!(
            Replica::decode(DatanodeInfoView::new(&w), 0, 0),
            Err(Error::Malformed { .. })
        ));
        // port out of range
        p.id.xfer_port = 70000;
        let e = Replica::decode(DatanodeInfoView::new(&p.encode_to_vec()), 0, 0).unwrap_err();
        assert!(e.to_string().contains("port"), "{e}");
        // missing id
        let no_id = DatanodeInfoProto {
            location: Some("/r".into()),
            ..Default::default()
        };
        let mut nb = no_id.encode_to_vec();
        // prost always writes the required `id`; cut it out (first field, tag 0x0a)
        let l = nb[1] as usize;
        nb.drain(..2 + l);
        let e = Replica::decode(DatanodeInfoView::new(&nb), 0, 0).unwrap_err();
        assert!(e.to_string().contains("missing required field id"), "{e}");
        // truncation anywhere: error, never panic
        for cut in 0..base.len() {
            let _ = Replica::decode(DatanodeInfoView::new(&base[..cut]), 0, 0);
        }
        assert!(Replica::decode(DatanodeInfoView::new(&base[..base.len() - 1]), 0, 0).is_err());
    }
}
