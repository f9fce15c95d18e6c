//! `hotpath.bench.BufferProtocol` v1, the large-response service, after Hadoop's TestRpcCpu
//! (HADOOP-4797): `getBuffer(size)` returns `size` bytes; `echo(data)` returns its request.
//!
//! The agent serves it on its report port, so an operator can ask a live node for a 10 MB
//! response and watch the server's memory stay flat; `hotpath-bench ipc-large` and the
//! transport tests drive it as well. It is a protocol of ours, not Hadoop's, and lives beside
//! (not inside) the server it is registered on.
//!
//! Messages (no .proto needed: two one-field messages): `GetBufferRequest { uint64 size = 1; }`,
//! `GetBufferResponse { bytes data = 1; }`, `EchoRequest/EchoResponse { bytes data = 1; }`. The
//! data of `getBuffer` is the pattern `byte[i] = i mod 251`, streamed into pool chunks: a 10 MB
//! response never exists as one buffer on the server.

use crate::server::{BodySource, Call, CallError, Registry, Reply};
use hadoop_wire::reader::{Reader, Value};
use hadoop_wire::writer::{len_field_len, Sink, Writer, WIRE_LEN};

pub const PROTOCOL: &str = "hotpath.bench.BufferProtocol";
pub const VERSION: u64 = 1;
pub const GET_BUFFER: &str = "getBuffer";
pub const ECHO: &str = "echo";

const PERIOD: usize = 251;
const TABLE_LEN: usize = PERIOD * 64;
static TABLE: [u8; TABLE_LEN] = {
    let mut t = [0u8; TABLE_LEN];
    let mut i = 0;
    while i < TABLE_LEN {
        t[i] = (i % PERIOD) as u8;
        i += 1;
    }
    t
};

/// Fills `dst` with the pattern bytes starting at data offset `offset` (memcpy speed).
pub fn fill_pattern(offset: u64, dst: &mut [u8]) {
    let mut start = (offset % PERIOD as u64) as usize;
    let mut rest = dst;
    while !rest.is_empty() {
        let n = (TABLE_LEN - start).min(rest.len());
        let (head, tail) = rest.split_at_mut(n);
        head.copy_from_slice(&TABLE[start..start + n]);
        rest = tail;
        start = 0;
    }
}

/// Whether `data` is the pattern from offset 0.
pub fn is_pattern(data: &[u8]) -> bool {
    data.chunks(TABLE_LEN).all(|c| c == &TABLE[..c.len()])
}

/// `GetBufferRequest { size }` (at most 11 bytes).
pub fn encode_request(size: u64, buf: &mut Vec<u8>) {
    Writer::new(buf).uint(1, size);
}

/// Reads `size` from a `GetBufferRequest`.
pub fn decode_request(bytes: &[u8]) -> Result<u64, hadoop_wire::reader::DecodeError> {
    let mut r = Reader::new(bytes);
    let mut size = 0;
    while !r.is_empty() {
        if let (1, Value::Varint(v)) = r.read_field(0)? {
            size = v;
        }
    }
    Ok(size)
}

/// The `bytes data = 1` field of a response message, without copying.
pub fn response_data(message: &[u8]) -> Result<&[u8], hadoop_wire::reader::DecodeError> {
    let mut r = Reader::new(message);
    let mut data: &[u8] = &[];
    while !r.is_empty() {
        if let (1, Value::Len(d)) = r.read_field(0)? {
            data = d;
        }
    }
    Ok(data)
}

/// Streams `GetBufferResponse { data = pattern[..size] }`: the field tag and length, then the
/// pattern, as chunks come.
pub struct GetBufferBody {
    prefix: [u8; 11],
    prefix_len: usize,
    /// Message bytes produced so far.
    pos: u64,
}

impl GetBufferBody {
    /// The body and its total message length.
    pub fn new(size: u64) -> (Self, u64) {
        let mut prefix = [0u8; 11];
        let mut w = &mut prefix[..];
        let mut wr = Writer::new(&mut w);
        wr.key(1, WIRE_LEN);
        wr.varint(size);
        // key and length of field 1: the whole field's length less its data
        let prefix_len = len_field_len(1, size as usize) - size as usize;
        (
            Self {
                prefix,
                prefix_len,
                pos: 0,
            },
            prefix_len as u64 + size,
        )
    }
}

impl BodySource for GetBufferBody {
    fn fill(&mut self, dst: &mut [u8]) {
        let mut dst = dst;
        let p = self.prefix_len as u64;
        if self.pos < p {
            let n = ((p - self.pos) as usize).min(dst.len());
            let s = self.pos as usize;
            dst[..n].copy_from_slice(&self.prefix[s..s + n]);
            self.pos += n as u64;
            dst = &mut dst[n..];
            if dst.is_empty() {
                return;
            }
        }
        fill_pattern(self.pos - p, dst);
        self.pos += dst.len() as u64;
    }
}

/// Registers `getBuffer` (sizes up to `max_size`) and `echo`.
pub fn register(reg: &mut Registry, max_size: u64) {
    reg.register(
        PROTOCOL,
        VERSION,
        GET_BUFFER,
        move |call: &Call<'_>, reply: &mut Reply<'_, '_>| {
            let size = decode_request(call.request).map_err(CallError::invalid_request)?;
            if size > max_size {
                return Err(CallError::application(
                    "java.io.IOException",
                    format!("getBuffer({size}) exceeds the server's limit of {max_size} bytes"),
                ));
            }
            let (body, len) = GetBufferBody::new(size);
            reply.stream(len, Box::new(body))?;
            Ok(())
        },
    );
    reg.register(
        PROTOCOL,
        VERSION,
        ECHO,
        |call: &Call<'_>, reply: &mut Reply<'_, '_>| {
            if call.request.len() <= reply.max_unstreamed() {
                reply.bytes(call.request)?;
            } else {
                // Larger than a chunk: the request bytes live in the receive buffer only
                // until the handler returns, so an echo that big is refused.
                return Err(CallError::application(
                    "java.io.IOException",
                    format!(
                        "echo of {} bytes exceeds one pool chunk",
                        call.request.len()
                    ),
                ));
            }
            Ok(())
        },
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::BodySource;

    #[test]
    fn pattern_fill_matches_the_definition() {
        let mut buf = vec![0u8; 100_000];
        fill_pattern(0, &mut buf);
        assert!(buf.iter().enumerate().all(|(i, &b)| b == (i % 251) as u8));
        assert!(is_pattern(&buf));
        let mut part = vec![0u8; 777];
        fill_pattern(12_345, &mut part);
        assert_eq!(&part[..], &buf[12_345..12_345 + 777]);
    }

    #[test]
    fn get_buffer_body_is_a_valid_message() {
        let (mut body, len) = GetBufferBody::new(70_000);
        let mut msg = vec![0u8; len as usize];
        // Fill in uneven pieces, as pool chunks would.
        let mut at = 0;
        for piece in [1usize, 2, 5000, 65536] {
            let n = piece.min(msg.len() - at);
            body.fill(&mut msg[at..at + n]);
            at += n;
        }
        body.fill(&mut msg[at..]);
        let data = response_data(&msg).unwrap();
        assert_eq!(data.len(), 70_000);
        assert!(is_pattern(data));
        let mut req = Vec::new();
        encode_request(10_000_000, &mut req);
        assert_eq!(decode_request(&req).unwrap(), 10_000_000);
    }
}
