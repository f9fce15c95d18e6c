//! `NodeHeartbeatResponseProto`, written by the one protobuf writer from borrowed values (no
//! prost struct, no allocation when the buffer has room). Fields are written in field-number order, as
//! protobuf-java writes them; the tests check byte equality with prost.

use hadoop_wire::pb::hadoop::yarn::NodeActionProto;
use hadoop_wire::writer::{self, Encode, Sink};

use crate::ids::{AppKey, ContainerKey};
use crate::master_key::MasterKey;
use crate::signals::QueuedSignal;

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
    /// Field 13 (`signalToContainer`, [`crate::signals`]).
    pub containers_to_signal: &'a [QueuedSignal],
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
            containers_to_signal: &[],
        }
    }

    /// Appends the message body to `buf`.
    pub fn encode(&self, buf: &mut Vec<u8>) {
        writer::write(buf, self)
    }

    /// The encoded length (for callers that size a buffer first).
    pub fn encoded_len(&self) -> usize {
        Encode::encoded_len(self)
    }
}

/// The fields in number order; one body serves the bytes ([`writer::Writer`]) and the exact
/// length ([`writer::Counter`]).
impl Encode for HeartbeatResponse<'_> {
    fn encode<S: Sink>(&self, s: &mut S) {
        if let Some(id) = self.response_id {
            s.int32(1, id);
        }
        if let Some(k) = self.container_token_master_key {
            s.message(2, k);
        }
        if let Some(k) = self.nm_token_master_key {
            s.message(3, k);
        }
        s.int32(4, self.action as i32);
        for c in self.containers_to_cleanup {
            s.message(5, c);
        }
        for a in self.applications_to_cleanup {
            s.message(6, a);
        }
        if let Some(i) = self.next_heartbeat_interval_ms {
            s.int64(7, i);
        }
        if let Some(d) = self.diagnostics {
            s.string(8, d);
        }
        for c in self.containers_to_be_removed_from_nm {
            s.message(9, c);
        }
        for c in self.containers_to_signal {
            s.message(13, c);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hadoop_wire::pb::hadoop::yarn::{
        NodeHeartbeatResponseProto, SignalContainerCommandProto, SignalContainerRequestProto,
    };
    use prost::Message;

    #[test]
    fn byte_equal_to_prost() {
        let k1 = MasterKey {
            key_id: 5,
            bytes: vec![9; 8],
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
            containers_to_signal: &[],
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

    #[test]
    fn every_field_byte_equal_to_prost() {
        let k1 = MasterKey {
            key_id: -7,
            bytes: vec![1; 8],
        };
        let k2 = MasterKey {
            key_id: 300,
            bytes: vec![2; 8],
        };
        let a = AppKey {
            cluster_timestamp: 1_700_000_000_000,
            id: 9,
        };
        let c = ContainerKey {
            app: a,
            attempt: 2,
            id: 1 << 40,
        };
        let r = HeartbeatResponse {
            response_id: Some(-1),
            container_token_master_key: Some(&k1),
            nm_token_master_key: Some(&k2),
            action: NodeActionProto::Shutdown,
            containers_to_cleanup: &[c],
            applications_to_cleanup: &[a],
            next_heartbeat_interval_ms: Some(-5),
            diagnostics: Some("why"),
            containers_to_be_removed_from_nm: &[c],
            containers_to_signal: &[
                QueuedSignal::new(c, SignalContainerCommandProto::OutputThreadDump),
                QueuedSignal::new(c, SignalContainerCommandProto::ForcefulShutdown),
            ],
        };
        let mut ours = Vec::new();
        r.encode(&mut ours);
        let p = NodeHeartbeatResponseProto {
            response_id: Some(-1),
            container_token_master_key: Some(k1.to_proto()),
            nm_token_master_key: Some(k2.to_proto()),
            node_action: Some(NodeActionProto::Shutdown as i32),
            containers_to_cleanup: vec![c.to_proto()],
            applications_to_cleanup: vec![a.to_proto()],
            next_heart_beat_interval: Some(-5),
            diagnostics_message: Some("why".into()),
            containers_to_be_removed_from_nm: vec![c.to_proto()],
            containers_to_signal: vec![
                SignalContainerRequestProto {
                    container_id: c.to_proto(),
                    command: SignalContainerCommandProto::OutputThreadDump as i32,
                },
                SignalContainerRequestProto {
                    container_id: c.to_proto(),
                    command: SignalContainerCommandProto::ForcefulShutdown as i32,
                },
            ],
            ..Default::default()
        };
        assert_eq!(ours, p.encode_to_vec());
        assert_eq!(ours.len(), r.encoded_len());
    }
}
