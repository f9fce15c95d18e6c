//! `NodeHeartbeatResponseProto`, hand-encoded from borrowed values (no prost struct, no
//! allocation when the buffer has room). Fields are written in field-number order, as
//! protobuf-java writes them; the tests check byte equality with prost.

use hadoop_wire::pb::hadoop::yarn::NodeActionProto;
use prost::encoding::{encode_varint, encoded_len_varint};

use crate::ids::{AppKey, ContainerKey};
use crate::master_key::MasterKey;

/// One heartbeat response.
#[derive(Debug, Clone, Copy)]
pub struct HeartbeatResponse<'a> {
    /// Field 1 (absent in RESYNC / SHUTDOWN answers, as Java builds them).
    pub response_id: Option<i32>,
    /// Field 2.
    pub container_token_master_key: Option<&'a MasterKey>,
    /// Field 3.
    pub nm_token_master_key: Option<&'a MasterKey>,
    /// Field 4.
    pub action: NodeActionProto,
    /// Field 5.
    pub containers_to_cleanup: &'a [ContainerKey],
    /// Field 6.
    pub applications_to_cleanup: &'a [AppKey],
    /// Field 7.
    pub next_heartbeat_interval_ms: Option<i64>,
    /// Field 8.
    pub diagnostics: Option<&'a str>,
    /// Field 9.
    pub containers_to_be_removed_from_nm: &'a [ContainerKey],
}

impl<'a> HeartbeatResponse<'a> {
    /// A RESYNC or SHUTDOWN answer with a message (Java's `newNodeHeartbeatResponse(action,
    /// message)`).
    pub fn action(action: NodeActionProto, diagnostics: &'a str) -> Self {
        HeartbeatResponse {
            response_id: None,
            container_token_master_key: None,
            nm_token_master_key: None,
            action,
            containers_to_cleanup: &[],
            applications_to_cleanup: &[],
            next_heartbeat_interval_ms: None,
            diagnostics: Some(diagnostics),
            containers_to_be_removed_from_nm: &[],
        }
    }

    /// Appends the message body to `buf`.
    pub fn encode(&self, buf: &mut Vec<u8>) {
        if let Some(id) = self.response_id {
            buf.push(0x08);
            encode_varint(id as i64 as u64, buf);
        }
        for (tag, key) in [
            (0x12, self.container_token_master_key),
            (0x1a, self.nm_token_master_key),
        ] {
            if let Some(k) = key {
                buf.push(tag);
                encode_varint(k.encoded_len() as u64, buf);
                k.encode(buf);
            }
        }
        buf.push(0x20);
        encode_varint(self.action as i32 as i64 as u64, buf);
        for c in self.containers_to_cleanup {
            buf.push(0x2a);
            encode_varint(c.encoded_len() as u64, buf);
            c.encode(buf);
        }
        for a in self.applications_to_cleanup {
            buf.push(0x32);
            encode_varint(a.encoded_len() as u64, buf);
            a.encode(buf);
        }
        if let Some(i) = self.next_heartbeat_interval_ms {
            buf.push(0x38);
            encode_varint(i as u64, buf);
        }
        if let Some(d) = self.diagnostics {
            buf.push(0x42);
            encode_varint(d.len() as u64, buf);
            buf.extend_from_slice(d.as_bytes());
        }
        for c in self.containers_to_be_removed_from_nm {
            buf.push(0x4a);
            encode_varint(c.encoded_len() as u64, buf);
            c.encode(buf);
        }
    }

    /// The encoded length (for callers that size a buffer first).
    pub fn encoded_len(&self) -> usize {
        let mut n = 0;
        if let Some(id) = self.response_id {
            n += 1 + encoded_len_varint(id as i64 as u64);
        }
        for k in [self.container_token_master_key, self.nm_token_master_key]
            .into_iter()
            .flatten()
        {
            n += 1 + encoded_len_varint(k.encoded_len() as u64) + k.encoded_len();
        }
        n += 1 + encoded_len_varint(self.action as i32 as i64 as u64);
        for c in self
            .containers_to_cleanup
            .iter()
            .chain(self.containers_to_be_removed_from_nm)
        {
            n += 1 + encoded_len_varint(c.encoded_len() as u64) + c.encoded_len();
        }
        for a in self.applications_to_cleanup {
            n += 1 + encoded_len_varint(a.encoded_len() as u64) + a.encoded_len();
        }
        if let Some(i) = self.next_heartbeat_interval_ms {
            n += 1 + encoded_len_varint(i as u64);
        }
        if let Some(d) = self.diagnostics {
            n += 1 + encoded_len_varint(d.len() as u64) + d.len();
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hadoop_wire::pb::hadoop::yarn::NodeHeartbeatResponseProto;
    use prost::Message;

    #[test]
    fn byte_equal_to_prost() {
        let k1 = MasterKey {
            key_id: 5,
            bytes: [9; 8],
        };
        let c = ContainerKey {
            app: AppKey {
                cluster_timestamp: 1_700_000_000_000,
                id: 3,
            },
            attempt: 1,
            id: 44,
        };
        let a = AppKey {
            cluster_timestamp: 1_700_000_000_000,
            id: 4,
        };
        let r = HeartbeatResponse {
            response_id: Some(17),
            container_token_master_key: Some(&k1),
            nm_token_master_key: None,
            action: NodeActionProto::Normal,
            containers_to_cleanup: &[c],
            applications_to_cleanup: &[a, a],
            next_heartbeat_interval_ms: Some(1000),
            diagnostics: None,
            containers_to_be_removed_from_nm: &[c, c],
        };
        let mut ours = Vec::new();
        r.encode(&mut ours);
        assert_eq!(ours.len(), r.encoded_len());
        let p = NodeHeartbeatResponseProto {
            response_id: Some(17),
            container_token_master_key: Some(k1.to_proto()),
            node_action: Some(NodeActionProto::Normal as i32),
            containers_to_cleanup: vec![c.to_proto()],
            applications_to_cleanup: vec![a.to_proto(), a.to_proto()],
            next_heart_beat_interval: Some(1000),
            containers_to_be_removed_from_nm: vec![c.to_proto(), c.to_proto()],
            ..Default::default()
        };
        assert_eq!(ours, p.encode_to_vec());

        let mut rs = Vec::new();
        let resync =
            HeartbeatResponse::action(NodeActionProto::Resync, "Node not found resyncing h:1");
        resync.encode(&mut rs);
        let back = NodeHeartbeatResponseProto::decode(&rs[..]).unwrap();
        assert_eq!(back.node_action(), NodeActionProto::Resync);
        assert_eq!(back.response_id, None);
        assert_eq!(
            back.diagnostics_message.as_deref(),
            Some("Node not found resyncing h:1")
        );
        assert_eq!(rs.len(), resync.encoded_len());
    }
}
