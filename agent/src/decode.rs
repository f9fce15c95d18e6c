//! `hotpath decode`: print captured Hadoop protobuf bytes as JSON with proto field names.
//!
//! Operators point it at traffic they captured (tcpdump payloads, a hex dump turned into bytes).
//! It decodes with the descriptor set generated from our own `.proto` files
//! (`hadoop_wire::pb::DESCRIPTOR_SET`) through prost-reflect, so every message of those files can be
//! printed without a hand-written printer per type. Only fields present on the wire are printed
//! (proto2 presence); unknown fields are dropped.
//!
//! With `--frame request|response` the input is a whole IPC frame (4-byte length included): the
//! RPC header, the RequestHeader (requests) and the payload are printed side by side. `MESSAGE`
//! then names the payload type; a connection-context frame (callId −3) always carries an
//! `IpcConnectionContextProto`, a ping (−4) nothing.

use anyhow::{anyhow, bail, Context, Result};
use prost_reflect::{DescriptorPool, DynamicMessage, MessageDescriptor, SerializeOptions};
use serde_json::{Map, Value};

/// Which bytes the input holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum FrameKind {
    Request,
    Response,
}

fn pool() -> Result<DescriptorPool> {
    DescriptorPool::decode(hadoop_wire::pb::DESCRIPTOR_SET)
        .context("loading the built-in descriptor set")
}

/// Finds a message by full name (`hadoop.yarn.NodeHeartbeatRequestProto`) or by its short name
/// when that is unique.
pub fn find_message(pool: &DescriptorPool, name: &str) -> Result<MessageDescriptor> {
    if let Some(m) = pool.get_message_by_name(name) {
        return Ok(m);
    }
    let matches: Vec<MessageDescriptor> =
        pool.all_messages().filter(|m| m.name() == name).collect();
    match matches.len() {
        1 => Ok(matches.into_iter().next().expect("one match")),
        0 => bail!("unknown message {name:?}; known messages: {}", known(pool)),
        _ => bail!(
            "message name {name:?} is ambiguous: {}",
            matches
                .iter()
                .map(|m| m.full_name())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

fn known(pool: &DescriptorPool) -> String {
    let mut names: Vec<String> = pool.all_messages().map(|m| m.name().to_string()).collect();
    names.sort();
    names.join(", ")
}

fn to_json(desc: &MessageDescriptor, bytes: &[u8]) -> Result<Value> {
    let msg = DynamicMessage::decode(desc.clone(), bytes)
        .with_context(|| format!("decoding {} ({} bytes)", desc.full_name(), bytes.len()))?;
    let opts = SerializeOptions::new()
        .use_proto_field_name(true)
        .skip_default_fields(true)
        .stringify_64_bit_integers(false);
    let mut ser = serde_json::Serializer::new(Vec::new());
    msg.serialize_with_options(&mut ser, &opts)?;
    Ok(serde_json::from_slice(&ser.into_inner())?)
}

/// Decodes one bare message (no length prefix).
pub fn decode_message(name: &str, bytes: &[u8]) -> Result<Value> {
    let pool = pool()?;
    let desc = find_message(&pool, name)?;
    to_json(&desc, bytes)
}

/// Decodes a whole IPC frame, length prefix included.
pub fn decode_frame(payload_type: &str, kind: FrameKind, bytes: &[u8]) -> Result<Value> {
    let pool = pool()?;
    let payload_desc = find_message(&pool, payload_type)?;
    let mut out = Map::new();
    let body = frame_body(bytes)?;
    match kind {
        FrameKind::Request => {
            let frame = hadoop_wire::frame::RequestFrame::split(body)
                .map_err(|e| anyhow!("bad request frame: {e}"))?;
            let hdr_desc = find_message(&pool, "hadoop.common.RpcRequestHeaderProto")?;
            let hdr = to_json(&hdr_desc, frame.rpc_header)?;
            let call_id = hdr.get("callId").and_then(Value::as_i64);
            out.insert("rpc_header".into(), hdr);
            if let Some(rh) = frame.request_header {
                let rh_desc = find_message(&pool, "hadoop.common.RequestHeaderProto")?;
                out.insert("request_header".into(), to_json(&rh_desc, rh)?);
            }
            if let Some(p) = frame.payload {
                let desc = if call_id == Some(-3) {
                    find_message(&pool, "hadoop.common.IpcConnectionContextProto")?
                } else {
                    payload_desc
                };
                out.insert("payload".into(), to_json(&desc, p)?);
            }
        }
        FrameKind::Response => {
            let frame = hadoop_wire::frame::ResponseFrame::split(body)
                .map_err(|e| anyhow!("bad response frame: {e}"))?;
            let hdr_desc = find_message(&pool, "hadoop.common.RpcResponseHeaderProto")?;
            out.insert("rpc_header".into(), to_json(&hdr_desc, frame.header)?);
            if let Some(p) = frame.payload {
                out.insert("payload".into(), to_json(&payload_desc, p)?);
            }
        }
    }
    Ok(Value::Object(out))
}

/// Checks the 4-byte big-endian length and returns the bytes it covers.
fn frame_body(bytes: &[u8]) -> Result<&[u8]> {
    if bytes.len() < 4 {
        bail!("a frame needs a 4-byte length, got {} bytes", bytes.len());
    }
    let len = u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) as usize;
    let rest = &bytes[4..];
    if rest.len() != len {
        bail!(
            "frame length says {len} bytes, input has {} after it",
            rest.len()
        );
    }
    Ok(rest)
}
