//! The SASL stream layer of a DataTransfer connection, sans-IO: what Java's
//! `SaslOutputStream` / `SaslInputStream` do when the handshake settled on `auth-int` or
//! `auth-conf` and no AES cipher (security.md §5.6): `dfs.data.transfer.protection=integrity`,
//! or `privacy` / `dfs.encrypt.data.transfer` without `dfs.encrypt.data.transfer.cipher.suites`.
//!
//! ```text
//! frame = u32 BE len ‖ token        token = wrap(bytes of one write)   (per direction)
//! auth-int : token = msg ‖ MAC(10) ‖ 00 01 ‖ seq(4)
//! auth-conf: token = ENC(msg ‖ pad ‖ MAC(10)) ‖ 00 01 ‖ seq(4)          (3DES/DES CBC, RC4)
//! ```
//!
//! The tokens are the DIGEST-MD5 layer's (the IPC one, [`SecurityLayer`]); the sequence
//! numbers and cipher state run on across frames and ops for the life of the connection,
//! continuing from the handshake (whose wrapped AES keys, when there are any, used the first
//! ones). Chunk boundaries mean nothing: the DataNode writes a packet per frame, but a frame may
//! hold any part of the byte stream, so the plaintext is a stream to be parsed on its own.
//!
//! Every frame length is capped at [`MAX_FRAME_LEN`] from its 4-byte prefix alone, before
//! anything is buffered for it. A frame that fails its MAC, padding or sequence check is a
//! [`SaslStreamError::Layer`] (the JDK would drop it silently and hang); after any error the
//! streams refuse further use ([`SaslStreamError::Failed`]): the connection must be closed.

use crate::frame::DEFAULT_MAX_PACKET_LEN;
use crate::sasl::{Qop, SaslError, SecurityLayer};

/// Largest frame (token) accepted from a DataNode: its largest packet (Java's
/// `PacketReceiver.MAX_PACKET_SIZE`, 16 MiB, with the 6-byte prefix) plus the layer's overhead
/// (at most 26 bytes), rounded up.
pub const MAX_FRAME_LEN: usize = DEFAULT_MAX_PACKET_LEN as usize + 1024;
/// The frame's length prefix.
pub const FRAME_PREFIX: usize = 4;

/// Why the stream layer failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SaslStreamError {
    /// A frame's length prefix exceeds [`MAX_FRAME_LEN`].
    #[error("a SASL frame of {len} bytes exceeds the cap of {cap}")]
    FrameTooLong { len: u32, cap: usize },
    /// The DIGEST-MD5 layer refused a frame: [`SaslError::Integrity`] for a bad MAC or bad
    /// padding, [`SaslError::Sasl`] for an out-of-order sequence number or a wrong message type.
    #[error("SASL stream layer: {0}")]
    Layer(#[from] SaslError),
    /// A write too large for one frame.
    #[error("{0} bytes do not fit one SASL frame")]
    TooLarge(usize),
    /// An earlier error left the streams unusable (their sequence numbers or cipher state no
    /// longer match the peer's): close the connection.
    #[error("the SASL stream layer failed earlier; the connection must be closed")]
    Failed,
}

/// What [`SaslStreams::unwrap`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unwrapped {
    /// Input bytes consumed: whole frames only.
    pub consumed: usize,
    /// Frames unwrapped.
    pub frames: usize,
    /// Bytes still to receive (past the input) before the next frame is complete: its prefix,
    /// or the rest of its token (at least 1).
    pub need: usize,
}

/// Both directions of a connection's SASL stream layer (see the module docs).
pub struct SaslStreams {
    layer: Box<dyn SecurityLayer>,
    failed: bool,
    /// A frame refused after good ones in the same [`SaslStreams::unwrap`] call: reported by
    /// the next call, so the good ones' plaintext is handed over first.
    deferred: Option<SaslStreamError>,
}

impl std::fmt::Debug for SaslStreams {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SaslStreams")
            .field("qop", &self.layer.qop())
            .field("failed", &self.failed)
            .finish_non_exhaustive()
    }
}

/// The total size (prefix included) of the frame at the start of `input`, once its prefix is
/// in: `Ok(None)` while fewer than 4 bytes are. Refuses a length over [`MAX_FRAME_LEN`].
pub fn frame_len(input: &[u8]) -> Result<Option<usize>, SaslStreamError> {
    let Some(p) = input.first_chunk::<FRAME_PREFIX>() else {
        return Ok(None);
    };
    let len = u32::from_be_bytes(*p);
    // u32 → usize cannot fail on the 32- and 64-bit targets this builds for
    let n = usize::try_from(len).unwrap_or(usize::MAX);
    if n > MAX_FRAME_LEN {
        return Err(SaslStreamError::FrameTooLong {
            len,
            cap: MAX_FRAME_LEN,
        });
    }
    Ok(Some(FRAME_PREFIX + n))
}

impl SaslStreams {
    /// The streams over the layer a completed handshake handed over
    /// ([`Negotiated::layer`](super::Negotiated::layer)).
    pub fn new(layer: Box<dyn SecurityLayer>) -> SaslStreams {
        SaslStreams {
            layer,
            failed: false,
            deferred: None,
        }
    }

    /// `auth-int` or `auth-conf`.
    pub fn qop(&self) -> Qop {
        self.layer.qop()
    }

    fn check(&mut self) -> Result<(), SaslStreamError> {
        if let Some(e) = self.deferred.take() {
            self.failed = true;
            return Err(e);
        }
        if self.failed {
            Err(SaslStreamError::Failed)
        } else {
            Ok(())
        }
    }

    fn fail(&mut self, e: SaslStreamError) -> SaslStreamError {
        self.failed = true;
        e
    }

    /// Appends `plain` to `out` as frames (`SaslOutputStream.write`): one per
    /// [`SecurityLayer::max_wrap_input`] bytes (the DataNode's maxbuf less the layer's overhead;
    /// Java wraps each write whole, the DataNode takes any size, and DataTransfer requests are
    /// far smaller). Nothing for an empty `plain`.
    pub fn wrap(&mut self, plain: &[u8], out: &mut Vec<u8>) -> Result<(), SaslStreamError> {
        self.check()?;
        let max = self.layer.max_wrap_input().clamp(1, MAX_FRAME_LEN / 2);
        for chunk in plain.chunks(max) {
            let at = out.len();
            out.extend_from_slice(&[0; FRAME_PREFIX]);
            if let Err(e) = self.layer.wrap(chunk, out) {
                out.truncate(at);
                return Err(self.fail(e.into()));
            }
            let token = out.len() - at - FRAME_PREFIX;
            let Ok(len) = u32::try_from(token) else {
                out.truncate(at);
                return Err(self.fail(SaslStreamError::TooLarge(token)));
            };
            out[at..at + FRAME_PREFIX].copy_from_slice(&len.to_be_bytes());
        }
        Ok(())
    }

    /// Unwraps the complete frames at the start of `input` (the bytes received and not yet
    /// consumed), appending their plaintext to `out`; a partial frame at the end stays (see
    /// [`Unwrapped::need`]). Lengths are checked against [`MAX_FRAME_LEN`] from the prefix
    /// alone. A bad frame after good ones: this call returns the good ones (their plaintext in
    /// `out`, the bad frame not consumed) and the next call the error. After an error the
    /// streams are [failed](SaslStreamError::Failed).
    pub fn unwrap(
        &mut self,
        input: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<Unwrapped, SaslStreamError> {
        self.check()?;
        let mut at = 0;
        let mut frames = 0;
        loop {
            let rest = &input[at..];
            let total = match frame_len(rest) {
                Ok(Some(t)) => t,
                Ok(None) => {
                    return Ok(Unwrapped {
                        consumed: at,
                        frames,
                        need: FRAME_PREFIX - rest.len(),
                    })
                }
                Err(e) => return self.refuse(e, at, frames),
            };
            if rest.len() < total {
                return Ok(Unwrapped {
                    consumed: at,
                    frames,
                    need: total - rest.len(),
                });
            }
            if let Err(e) = self.layer.unwrap(&rest[FRAME_PREFIX..total], out) {
                return self.refuse(e.into(), at, frames);
            }
            at += total;
            frames += 1;
        }
    }

    /// A refused frame: the error now, or after the good frames before it.
    fn refuse(
        &mut self,
        e: SaslStreamError,
        consumed: usize,
        frames: usize,
    ) -> Result<Unwrapped, SaslStreamError> {
        if frames == 0 {
            return Err(self.fail(e));
        }
        self.deferred = Some(e);
        Ok(Unwrapped {
            consumed,
            frames,
            need: 1,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sasl::digest::{DigestCipher, SessionKeys};

    /// The client's and the DataNode's streams over the same session keys.
    fn pair(qop: Qop, cipher: Option<DigestCipher>) -> (SaslStreams, SaslStreams) {
        let h: [u8; 16] = std::array::from_fn(|i| (i as u8).wrapping_mul(29) ^ 0xa5);
        let keys = SessionKeys::new(h, qop, cipher).unwrap();
        (
            SaslStreams::new(Box::new(keys.client_layer(65536))),
            SaslStreams::new(Box::new(keys.server_layer(65536))),
        )
    }

    fn all_layers() -> [(Qop, Option<DigestCipher>); 4] {
        [
            (Qop::AuthInt, None),
            (Qop::AuthConf, Some(DigestCipher::TripleDes)),
            (Qop::AuthConf, Some(DigestCipher::Rc4)),
            (Qop::AuthConf, Some(DigestCipher::Des)),
        ]
    }

    #[test]
    fn frames_round_trip_in_both_directions_across_arbitrary_receive_splits() {
        for (qop, cipher) in all_layers() {
            let (mut client, mut dn) = pair(qop, cipher);
            // the DataNode's packets: one write (one frame) each, then a request back
            let writes: Vec<Vec<u8>> = [1usize, 7, 65_536 + 542, 0, 300_000, 3]
                .iter()
                .enumerate()
                .map(|(i, &n)| (0..n).map(|j| (i * 31 + j * 7) as u8).collect())
                .collect();
            let mut wire = Vec::new();
            for w in &writes {
                let before = wire.len();
                dn.wrap(w, &mut wire).unwrap();
                if w.is_empty() {
                    assert_eq!(wire.len(), before, "an empty write sends nothing");
                }
            }
            let want: Vec<u8> = writes.concat();
            // received in odd pieces: every complete frame unwrapped, partial ones kept
            let mut got = Vec::new();
            let mut pending: Vec<u8> = Vec::new();
            for piece in wire.chunks(4093) {
                pending.extend_from_slice(piece);
                let u = client.unwrap(&pending, &mut got).unwrap();
                assert!(u.need >= 1);
                pending.drain(..u.consumed);
            }
            assert!(pending.is_empty(), "{qop:?} {cipher:?}");
            assert_eq!(got, want, "{qop:?} {cipher:?}");
            // and the client's status back, with its own sequence numbers
            let mut up = Vec::new();
            client.wrap(&[0x08, 0x06], &mut up).unwrap();
            client.wrap(b"OP_READ_BLOCK again", &mut up).unwrap();
            let mut back = Vec::new();
            let u = dn.unwrap(&up, &mut back).unwrap();
            assert_eq!((u.consumed, u.frames, u.need), (up.len(), 2, FRAME_PREFIX));
            assert_eq!(back, b"\x08\x06OP_READ_BLOCK again");
        }
    }

    #[test]
    fn a_datanode_frame_past_the_clients_maxbuf_is_accepted() {
        // Java's SaslOutputStream wraps each write whole: a 64 KiB packet with its checksums
        // and header is one token of about 66 KB
        for (qop, cipher) in all_layers() {
            let h: [u8; 16] = std::array::from_fn(|i| (i as u8).wrapping_mul(29) ^ 0xa5);
            let keys = SessionKeys::new(h, qop, cipher).unwrap();
            let mut dn = keys.server_layer(65536);
            let packet: Vec<u8> = (0..66_100u32).map(|i| (i % 253) as u8).collect();
            let mut wire = vec![0; 4];
            dn.wrap(&packet, &mut wire).unwrap();
            let len = (wire.len() - 4) as u32;
            assert!(len > 65_536);
            wire[..4].copy_from_slice(&len.to_be_bytes());
            let mut client = SaslStreams::new(Box::new(keys.client_layer(65536)));
            let mut out = Vec::new();
            let u = client.unwrap(&wire, &mut out).unwrap();
            assert_eq!(
                (u.consumed, u.frames),
                (wire.len(), 1),
                "{qop:?} {cipher:?}"
            );
            assert_eq!(out, packet, "{qop:?} {cipher:?}");
        }
    }

    #[test]
    fn frame_layout_is_a_be_length_then_the_token() {
        let (mut client, _) = pair(Qop::AuthInt, None);
        let mut out = vec![0xee];
        client.wrap(b"hello", &mut out).unwrap();
        // auth-int: 5 bytes + MAC(10) + 00 01 + seq 0
        assert_eq!(out.len(), 1 + 4 + 21);
        assert_eq!(&out[1..5], &21u32.to_be_bytes());
        assert_eq!(&out[5..10], b"hello");
        assert_eq!(&out[out.len() - 6..], &[0, 1, 0, 0, 0, 0]);
        client.wrap(b"x", &mut out).unwrap();
        assert_eq!(&out[out.len() - 4..], &1u32.to_be_bytes(), "seq 1");
        // a large write is cut at the DataNode's maxbuf less the overhead
        let (mut conf, _) = pair(Qop::AuthConf, Some(DigestCipher::TripleDes));
        let mut big = Vec::new();
        let input: Vec<u8> = (0..65_510 * 2 + 1).map(|i| i as u8).collect();
        conf.wrap(&input, &mut big).unwrap();
        let mut at = 0;
        let mut n = 0;
        while at < big.len() {
            at += frame_len(&big[at..]).unwrap().unwrap();
            n += 1;
        }
        assert_eq!((at, n), (big.len(), 3));
    }

    #[test]
    fn an_oversized_length_is_refused_from_the_prefix() {
        // (that the refusal allocates nothing: tests/sasl_stream_alloc.rs, with a counting
        // allocator)
        for (qop, cipher) in all_layers() {
            let (mut client, _) = pair(qop, cipher);
            let len = (MAX_FRAME_LEN + 1) as u32;
            let mut out = Vec::new();
            let input = [&len.to_be_bytes()[..], &[0; 16]].concat();
            assert_eq!(
                client.unwrap(&input, &mut out),
                Err(SaslStreamError::FrameTooLong {
                    len,
                    cap: MAX_FRAME_LEN
                })
            );
            assert!(out.is_empty());
            assert_eq!(
                client.unwrap(&[0, 0, 0, 0], &mut out),
                Err(SaslStreamError::Failed)
            );
            assert_eq!(
                client.wrap(b"x", &mut out),
                Err(SaslStreamError::Failed),
                "closed both ways"
            );
            // u32::MAX itself
            let (mut c2, _) = pair(qop, cipher);
            assert!(matches!(
                c2.unwrap(&[0xff; 4], &mut out),
                Err(SaslStreamError::FrameTooLong { len: u32::MAX, .. })
            ));
            // the largest allowed length is only waited for
            let (mut c3, _) = pair(qop, cipher);
            let u = c3
                .unwrap(&(MAX_FRAME_LEN as u32).to_be_bytes(), &mut out)
                .unwrap();
            assert_eq!((u.consumed, u.frames, u.need), (0, 0, MAX_FRAME_LEN));
        }
    }

    #[test]
    fn a_tampered_mac_or_body_is_a_typed_error_and_fails_the_streams() {
        for (qop, cipher) in all_layers() {
            let mut wire = Vec::new();
            let (mut client, mut dn) = pair(qop, cipher);
            dn.wrap(b"first packet", &mut wire).unwrap();
            let first = wire.len();
            dn.wrap(b"second packet, tampered", &mut wire).unwrap();
            dn.wrap(b"third", &mut wire).unwrap();
            // flip a bit of the second frame's MAC (auth-int: in the clear before the
            // trailer) or of its encrypted part
            let second_end = first + frame_len(&wire[first..]).unwrap().unwrap();
            wire[second_end - 7] ^= 0x01;
            let mut out = Vec::new();
            // the frame before the bad one comes first, then the error
            let u = client.unwrap(&wire, &mut out).unwrap();
            assert_eq!((u.consumed, u.frames), (first, 1), "{qop:?} {cipher:?}");
            assert_eq!(out, b"first packet", "{qop:?} {cipher:?}");
            let e = client.unwrap(&wire[first..], &mut out).unwrap_err();
            assert!(
                matches!(e, SaslStreamError::Layer(SaslError::Integrity(_))),
                "{qop:?} {cipher:?}: {e:?}"
            );
            assert_eq!(out, b"first packet", "nothing after the bad frame");
            assert_eq!(
                client.unwrap(&wire[second_end..], &mut out),
                Err(SaslStreamError::Failed)
            );
        }
        // a replayed frame (valid MAC, old sequence number): out of order
        let (mut client, mut dn) = pair(Qop::AuthInt, None);
        let mut wire = Vec::new();
        dn.wrap(b"once", &mut wire).unwrap();
        let replay = [&wire[..], &wire[..]].concat();
        let mut out = Vec::new();
        assert_eq!(client.unwrap(&replay, &mut out).unwrap().frames, 1);
        assert_eq!(out, b"once");
        let e = client.unwrap(&replay[wire.len()..], &mut out).unwrap_err();
        assert!(
            matches!(&e, SaslStreamError::Layer(SaslError::Sasl(m)) if m.contains("Out of order")),
            "{e:?}"
        );
        // a token shorter than the layer's trailer
        let (mut client, _) = pair(Qop::AuthInt, None);
        let e = client
            .unwrap(&[0, 0, 0, 3, 1, 2, 3], &mut Vec::new())
            .unwrap_err();
        assert!(matches!(e, SaslStreamError::Layer(SaslError::Integrity(_))));
    }

    #[test]
    fn a_truncated_frame_is_waited_for_and_yields_nothing() {
        for (qop, cipher) in all_layers() {
            let (mut client, mut dn) = pair(qop, cipher);
            let mut wire = Vec::new();
            dn.wrap(&[9u8; 1000], &mut wire).unwrap();
            let total = wire.len();
            let mut out = Vec::new();
            for cut in [0, 1, 3, 4, 5, total / 2, total - 1] {
                let u = client.unwrap(&wire[..cut], &mut out).unwrap();
                let need = if cut < 4 { 4 - cut } else { total - cut };
                assert_eq!((u.consumed, u.frames, u.need), (0, 0, need), "cut {cut}");
                assert!(out.is_empty());
            }
            let u = client.unwrap(&wire, &mut out).unwrap();
            assert_eq!((u.consumed, u.frames), (total, 1));
            assert_eq!(out, [9u8; 1000]);
        }
    }
}
