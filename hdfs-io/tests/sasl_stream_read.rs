//! Block reads through the DIGEST-MD5 stream layer (`auth-int`, `auth-conf` with 3DES and RC4:
//! `dfs.data.transfer.protection=integrity`, or `privacy` without AES) against a fake DataNode
//! that frames its side as Java's `SaslOutputStream` (`u32 len ‖ wrap(write)`), over real
//! sockets: several reads on one connection (sequence numbers and cipher state run on), frames
//! cut anywhere in the stream, then what a bad peer can do (a tampered MAC, an oversized
//! length, a frame cut short by a close): a typed error, no panic, no hang. A warm read
//! allocates nothing (the counting allocator counts this thread; the DataNode's is not).

use hadoop_wire::hdfs::transfer_sasl::{frame_len, SaslStreamError, SaslStreams};
use hadoop_wire::sasl::digest::{DigestCipher, DigestLayer, SessionKeys};
use hadoop_wire::sasl::{Qop, SaslError, SecurityLayer};
use hdfs_io::block_reader::{BlockRead, ReadBlockRequest};
use hdfs_io::checksum::{ChecksumKind, DataChecksum};
use hdfs_io::datanode::{connect, read_block_on_sasl, RecvBuf, SaslConn};
use hdfs_io::fixtures::dn_stream;
use hdfs_io::{BlockName, Error};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

#[global_allocator]
static GLOBAL: alloc_counter::Counting = alloc_counter::Counting;

const C32: DataChecksum = DataChecksum {
    kind: ChecksumKind::Crc32c,
    bytes_per_checksum: 512,
};
const BLOCK: &[u8] = b"\x0a\x04BP-1\x10\x01\x18\x02";

fn name() -> BlockName {
    BlockName {
        pool_id: "BP-1".into(),
        block_id: 1,
        generation_stamp: 2,
    }
}

fn keys(qop: Qop, cipher: Option<DigestCipher>) -> SessionKeys {
    let h: [u8; 16] = std::array::from_fn(|i| (i as u8).wrapping_mul(53) ^ 0x3c);
    SessionKeys::new(h, qop, cipher).unwrap()
}

fn block_data(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 131 % 251) as u8).collect()
}

/// What the fake DataNode does to its answer to one request.
#[derive(Clone, Copy, Debug)]
enum Fault {
    None,
    /// Flip a bit in the MAC of the frame holding this byte of the answer.
    Mac(usize),
    /// Send a frame length over the cap after this many bytes of the answer.
    Oversized(usize),
    /// Send this many bytes of the answer's frames, then close mid-frame.
    CutAt(usize),
}

/// The DataNode's side, framed by hand as Java's `SaslOutputStream` / `SaslInputStream` do
/// (one token per write, whatever its size): frames received, unwrapped; reads one request.
struct DnSide {
    s: TcpStream,
    layer: DigestLayer,
    raw: Vec<u8>,
    plain: Vec<u8>,
}

impl DnSide {
    /// Unwraps frames until `n` plaintext bytes are in; `None` at end of stream.
    fn plain(&mut self, n: usize) -> Option<Vec<u8>> {
        while self.plain.len() < n {
            while let Some(total) = frame_len(&self.raw).unwrap() {
                if self.raw.len() < total {
                    break;
                }
                self.layer
                    .unwrap(&self.raw[4..total], &mut self.plain)
                    .unwrap();
                self.raw.drain(..total);
            }
            if self.plain.len() >= n {
                break;
            }
            let mut b = [0u8; 4096];
            let k = self.s.read(&mut b).ok()?;
            if k == 0 {
                return None;
            }
            self.raw.extend_from_slice(&b[..k]);
        }
        Some(self.plain.drain(..n).collect())
    }

    fn request(&mut self) -> bool {
        let Some(head) = self.plain(3) else {
            return false;
        };
        assert_eq!(head, [0, 28, 81], "the request unwraps");
        let (mut len, mut shift) = (0usize, 0);
        loop {
            let b = self.plain(1).unwrap()[0];
            len |= usize::from(b & 0x7f) << shift;
            shift += 7;
            if b < 0x80 {
                break;
            }
        }
        self.plain(len).unwrap();
        true
    }
}

/// A DataNode behind the SASL stream layer (the server side of `keys`): answers each request
/// with the block's stream, one frame per `piece` bytes of it (so frames cut packets
/// anywhere), with `faults[i]` applied to the i-th answer; returns the statuses it unwrapped.
fn fake_dn(
    keys: SessionKeys,
    data: Vec<u8>,
    piece: usize,
    faults: Vec<Fault>,
) -> (SocketAddr, JoinHandle<Vec<Vec<u8>>>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let h = std::thread::spawn(move || {
        let (s, _) = l.accept().unwrap();
        let mut dn = DnSide {
            s,
            layer: keys.server_layer(65536),
            raw: Vec::new(),
            plain: Vec::new(),
        };
        let mut statuses = Vec::new();
        for fault in faults {
            if !dn.request() {
                break;
            }
            let answer = dn_stream(&data, 0, data.len() as u64, C32, 64 * 1024);
            let mut wire = Vec::new();
            let mut frame_ends = Vec::new();
            for p in answer.chunks(piece) {
                // one frame per write, even past the client's maxbuf (a DataNode packet is)
                let at = wire.len();
                wire.extend_from_slice(&[0; 4]);
                dn.layer.wrap(p, &mut wire).unwrap();
                let len = (wire.len() - at - 4) as u32;
                wire[at..at + 4].copy_from_slice(&len.to_be_bytes());
                frame_ends.push((wire.len(), p.len()));
            }
            match fault {
                Fault::None => {}
                Fault::Mac(at) => {
                    // the frame holding answer byte `at`: its last MAC byte (auth-int) or
                    // its last encrypted byte (auth-conf) sits 7 bytes before its end
                    let mut sent = 0;
                    let (end, _) = *frame_ends
                        .iter()
                        .find(|(_, n)| {
                            sent += n;
                            sent > at
                        })
                        .unwrap();
                    wire[end - 7] ^= 0x01;
                }
                Fault::Oversized(at) => {
                    let (end, _) = frame_ends[at.min(frame_ends.len() - 1)];
                    wire.truncate(end);
                    wire.extend_from_slice(&u32::MAX.to_be_bytes());
                    wire.extend_from_slice(&[0; 64]);
                    let _ = dn.s.write_all(&wire);
                    // the client must give up from the prefix alone: it gets no more
                    let _ = dn.s.read(&mut [0u8; 1]);
                    break;
                }
                Fault::CutAt(n) => {
                    let _ = dn.s.write_all(&wire[..n]);
                    break;
                }
            }
            if dn.s.write_all(&wire).is_err() {
                break;
            }
            match dn.plain(3) {
                Some(st) => statuses.push(st),
                None => break,
            }
        }
        statuses
    });
    (addr, h)
}

/// One read of `read`'s range at offset 0 (made by the caller: its names allocate).
fn read_once(
    s: &mut TcpStream,
    conn: &mut SaslConn,
    read: &mut BlockRead,
    buf: &mut RecvBuf,
    scratch: &mut Vec<u8>,
    out: &mut Vec<u8>,
) -> (hdfs_io::datanode::BlockReadResult, bool) {
    let req = ReadBlockRequest {
        block: BLOCK,
        token: b"",
        client_name: "DFSClient_test",
        offset: 0,
        len: read.remaining(),
    };
    out.clear();
    let r = read_block_on_sasl(
        s,
        conn,
        &req,
        read,
        buf,
        scratch,
        &mut |d: &[u8]| {
            out.extend_from_slice(d);
            Ok(())
        },
        "dn",
    );
    (r, read.is_done())
}

fn new_read(len: u64) -> BlockRead {
    BlockRead::new(name(), "dn".into(), 0, len)
}

fn layers() -> [(Qop, Option<DigestCipher>); 3] {
    [
        (Qop::AuthInt, None),
        (Qop::AuthConf, Some(DigestCipher::TripleDes)),
        (Qop::AuthConf, Some(DigestCipher::Rc4)),
    ]
}

#[test]
fn reads_through_the_layer_are_exact_across_ops_and_frame_cuts_and_warm_ones_allocate_nothing() {
    let data = block_data(300_000);
    for (qop, cipher) in layers() {
        // frames of one packet and a bit (as the DataNode's writes never are), then tiny ones
        for piece in [66_000, 1_000] {
            let k = keys(qop, cipher);
            let (addr, dn) = fake_dn(k.clone(), data.clone(), piece, vec![Fault::None; 4]);
            let mut s = connect(addr, Duration::from_secs(10), Duration::from_secs(10)).unwrap();
            let mut conn = SaslConn::new(SaslStreams::new(Box::new(k.client_layer(65536))));
            assert_eq!(conn.qop(), qop);
            let mut buf = RecvBuf::default();
            let mut scratch = Vec::with_capacity(1024);
            let mut out = Vec::with_capacity(data.len());
            for i in 0..4 {
                let mut read = new_read(data.len() as u64);
                let ((r, done), c) = alloc_counter::thread(|| {
                    read_once(
                        &mut s,
                        &mut conn,
                        &mut read,
                        &mut buf,
                        &mut scratch,
                        &mut out,
                    )
                });
                assert!(
                    r.error.is_none() && done,
                    "{qop:?} {cipher:?}: {:?}",
                    r.error
                );
                assert_eq!(out, data, "{qop:?} {cipher:?} piece {piece} read {i}");
                if i >= 2 {
                    assert_eq!(c.allocs, 0, "{qop:?} {cipher:?} read {i}: {c:?}");
                }
            }
            drop(s);
            let statuses = dn.join().unwrap();
            // CHECKSUM_OK, wrapped with the client's sequence numbers
            assert_eq!(statuses, vec![vec![2, 0x08, 6]; 4], "{qop:?} {cipher:?}");
        }
    }
}

fn failing_read(qop: Qop, cipher: Option<DigestCipher>, fault: Fault) -> (Error, u64) {
    let data = block_data(300_000);
    let k = keys(qop, cipher);
    let (addr, dn) = fake_dn(k.clone(), data.clone(), 70_000, vec![Fault::None, fault]);
    let mut s = connect(addr, Duration::from_secs(10), Duration::from_secs(10)).unwrap();
    let mut conn = SaslConn::new(SaslStreams::new(Box::new(k.client_layer(65536))));
    let mut buf = RecvBuf::default();
    let mut out = Vec::new();
    let mut read = new_read(300_000);
    let (r, done) = read_once(
        &mut s,
        &mut conn,
        &mut read,
        &mut buf,
        &mut Vec::new(),
        &mut out,
    );
    assert!(r.error.is_none() && done, "{:?}", r.error);
    let t = Instant::now();
    let mut read = new_read(300_000);
    let (r, done) = read_once(
        &mut s,
        &mut conn,
        &mut read,
        &mut buf,
        &mut Vec::new(),
        &mut out,
    );
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    assert!(!done);
    // what was delivered is good
    assert_eq!(out.len() as u64, r.delivered);
    assert_eq!(out, data[..out.len()]);
    drop(s);
    dn.join().unwrap();
    (r.error.expect("the read fails"), r.delivered)
}

#[test]
fn a_tampered_mac_fails_the_read_with_a_typed_error() {
    for (qop, cipher) in layers() {
        let (e, delivered) = failing_read(qop, cipher, Fault::Mac(150_000));
        assert!(
            matches!(
                &e,
                Error::DataTransferLayer {
                    source: SaslStreamError::Layer(SaslError::Integrity(_)),
                    ..
                }
            ),
            "{qop:?} {cipher:?}: {e:?}"
        );
        assert!(e.to_string().contains("MAC"), "{e}");
        // the packets in the frames before the bad one got through
        assert!((65_536..150_000).contains(&delivered), "{delivered}");
    }
}

#[test]
fn an_oversized_frame_length_fails_at_once() {
    for (qop, cipher) in layers() {
        let (e, _) = failing_read(qop, cipher, Fault::Oversized(1));
        assert!(
            matches!(
                &e,
                Error::DataTransferLayer {
                    source: SaslStreamError::FrameTooLong { len: u32::MAX, .. },
                    ..
                }
            ),
            "{qop:?} {cipher:?}: {e:?}"
        );
    }
}

#[test]
fn a_frame_cut_short_by_a_close_is_a_truncated_read() {
    for (qop, cipher) in layers() {
        let (e, _) = failing_read(qop, cipher, Fault::CutAt(100_000));
        assert!(
            matches!(&e, Error::Truncated { .. }),
            "{qop:?} {cipher:?}: {e:?}"
        );
    }
}
