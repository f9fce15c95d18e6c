use super::*;
use crate::checksum::{ChecksumKind, DataChecksum};
use crate::error::BlockName;
use crate::fixtures::dn_stream;
use std::io::Read;
use std::net::TcpListener;
use std::thread::JoinHandle;
use std::time::Instant;

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

/// Reads one OP_READ_BLOCK request (version, op, delimited proto); false at end of stream.
fn read_request(s: &mut TcpStream) -> bool {
    let mut head = [0u8; 3];
    if s.read_exact(&mut head).is_err() {
        return false;
    }
    assert_eq!(head, [0, 28, 81]);
    let (mut len, mut shift) = (0usize, 0);
    loop {
        let mut b = [0u8; 1];
        s.read_exact(&mut b).unwrap();
        len |= usize::from(b[0] & 0x7f) << shift;
        shift += 7;
        if b[0] < 0x80 {
            break;
        }
    }
    let mut body = vec![0; len];
    s.read_exact(&mut body).unwrap();
    true
}

/// What the fake DataNode does with one request.
#[derive(Clone)]
enum Answer {
    /// Send these bytes (in writes of at most `piece`), then expect the 3-byte status.
    Stream(Vec<u8>, usize),
    /// Send these bytes, then stall until the client goes away.
    Stall(Vec<u8>),
    /// Send these bytes, then close.
    Close(Vec<u8>),
}

/// A DataNode on 127.0.0.1 answering one connection's requests in turn; returns the statuses
/// it received.
fn fake_dn(answers: Vec<Answer>) -> (SocketAddrV4Like, JoinHandle<Vec<[u8; 3]>>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let h = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        let mut statuses = Vec::new();
        for a in answers {
            if !read_request(&mut s) {
                break;
            }
            match a {
                Answer::Stream(bytes, piece) => {
                    for p in bytes.chunks(piece) {
                        s.write_all(p).unwrap();
                    }
                    let mut st = [0u8; 3];
                    s.read_exact(&mut st).unwrap();
                    statuses.push(st);
                }
                Answer::Stall(bytes) => {
                    s.write_all(&bytes).unwrap();
                    let mut sink = Vec::new();
                    let _ = s.read_to_end(&mut sink);
                    return statuses;
                }
                Answer::Close(bytes) => {
                    s.write_all(&bytes).unwrap();
                    return statuses;
                }
            }
        }
        statuses
    });
    (addr, h)
}

type SocketAddrV4Like = std::net::SocketAddr;

fn connect(addr: SocketAddrV4Like) -> TcpStream {
    crate::datanode::connect(addr, Duration::from_secs(5), Duration::from_secs(5)).unwrap()
}

fn req(offset: u64, len: u64) -> ReadBlockRequest<'static> {
    ReadBlockRequest {
        block: b"\x0a\x04BP-1\x10\x01\x18\x02",
        token: b"",
        client_name: "DFSClient_test",
        offset,
        len,
    }
}

/// One read through `rx`, collecting the output.
fn read_with(
    rx: &mut Receiver,
    s: &mut TcpStream,
    offset: u64,
    len: u64,
    timeout: Duration,
) -> (Vec<u8>, BlockReadResult, bool) {
    let chunk = rx.ring.pool_mut().try_acquire().unwrap();
    let mut read = BlockRead::new(name(), "dn".into(), offset, len);
    let mut out = Vec::new();
    let mut scratch = Vec::new();
    let r = drive(
        rx,
        chunk,
        s,
        None,
        &req(offset, len),
        &mut read,
        &mut scratch,
        &mut |d| {
            out.extend_from_slice(d);
            Ok(())
        },
        "dn",
        timeout,
    );
    rx.ring.pool_mut().release(chunk);
    let done = read.is_done();
    (out, r, done)
}

fn receiver(mode: PoolMode) -> Receiver {
    let r = Receiver::new(mode).expect("io_uring receiver");
    assert_eq!(
        r.stats().registered,
        mode != PoolMode::Unregistered,
        "root can register 1 MiB"
    );
    r
}

fn uring_usable() -> bool {
    match probe() {
        Ok(_) => true,
        Err(why) => {
            eprintln!("io_uring unavailable here, skipping: {why}");
            false
        }
    }
}

#[test]
fn packets_of_every_size_arrive_whole_and_only_prefixes_move() {
    if !uring_usable() {
        return;
    }
    let data = block_data(1_200_000);
    for mode in [
        PoolMode::Registered,
        PoolMode::Unregistered,
        PoolMode::ReadFixed,
    ] {
        let mut rx = receiver(mode);
        // (packet data bytes, offset, len, write piece)
        for (packet, off, len, piece) in [
            (64 * 1024, 0u64, 1_200_000u64, 1 << 20),
            (64 * 1024, 700, 1_000_000, 1500),
            (1024, 3, 70_000, 333),
            (512, 5000, 2000, 7),
            (300 * 1024, 0, 1_200_000, 65_536), // two per chunk: exact receives only
            (600 * 1024, 1000, 1_199_000, 65_536), // larger than a chunk: overflow
        ] {
            let stream = dn_stream(&data, off, len, CRC32C, packet);
            let packets = stream.len() / (packet + 40) + 2;
            let stream_len = stream.len();
            let (addr, dn) = fake_dn(vec![Answer::Stream(stream, piece)]);
            let mut s = connect(addr);
            let before = rx.stats();
            let (out, r, done) = read_with(&mut rx, &mut s, off, len, Duration::from_secs(10));
            assert!(r.error.is_none(), "{:?}", r.error);
            assert!(done && r.got_bytes);
            assert_eq!(out, &data[off as usize..(off + len) as usize]);
            assert_eq!(dn.join().unwrap(), vec![[2, 0x08, 6]], "CHECKSUM_OK sent");
            let moved = rx.stats().moved - before.moved;
            let overflows = rx.stats().overflows - before.overflows;
            if packet > CHUNK_SIZE {
                assert!(overflows > 0, "{packet}");
            } else {
                assert_eq!(overflows, 0, "{packet}");
                // only prefixes (or a few bytes pending near a chunk's end) move, no data in
                // bulk; with packets larger than MARGIN, the first greedy receive (before
                // any packet length is known) may leave one packet to move
                let compactions = (stream_len / (CHUNK_SIZE / 2) + 2) as u64;
                let mut bound = packets as u64 * 6 + compactions * SMALL_RECV as u64;
                if packet + 1024 > MARGIN {
                    bound += (packet + 1024) as u64;
                }
                assert!(
                    moved <= bound,
                    "packet {packet}: moved {moved} bytes over {packets} packets"
                );
            }
            if packet == 64 * 1024 && piece > packet {
                let recvs = rx.stats().recvs - before.recvs;
                assert!(
                    recvs <= packets as u64 * 2 + 4,
                    "one receive per packet: {recvs} for {packets}"
                );
            }
        }
        eprintln!("{mode:?}: {:?} fixed {:?}", rx.stats(), rx.fixed());
        assert_eq!(
            rx.ring.pool().available(),
            CHUNKS as u32,
            "every chunk back"
        );
        match mode {
            PoolMode::Registered => {
                assert!(rx.fixed() == FixedUse::Recv || rx.fixed() == FixedUse::No)
            }
            PoolMode::Unregistered => assert_eq!(rx.fixed(), FixedUse::No),
            PoolMode::ReadFixed => assert_eq!(rx.fixed(), FixedUse::ReadFixed),
        }
    }
}

#[test]
fn a_connection_carries_consecutive_reads() {
    if !uring_usable() {
        return;
    }
    let data = block_data(300_000);
    let a = dn_stream(&data, 0, 100_000, CRC32C, 64 * 1024);
    let b = dn_stream(&data, 150_000, 150_000, CRC32C, 64 * 1024);
    let (addr, dn) = fake_dn(vec![Answer::Stream(a, 4096), Answer::Stream(b, 100_000)]);
    let mut s = connect(addr);
    let mut rx = receiver(PoolMode::Registered);
    let (o1, r1, d1) = read_with(&mut rx, &mut s, 0, 100_000, Duration::from_secs(10));
    assert!(r1.error.is_none() && d1, "{:?}", r1.error);
    let (o2, r2, d2) = read_with(&mut rx, &mut s, 150_000, 150_000, Duration::from_secs(10));
    assert!(r2.error.is_none() && d2, "{:?}", r2.error);
    assert_eq!(o1, &data[..100_000]);
    assert_eq!(o2, &data[150_000..]);
    assert_eq!(dn.join().unwrap().len(), 2);
}

#[test]
fn a_stalled_datanode_times_out_and_the_ring_stays_usable() {
    if !uring_usable() {
        return;
    }
    let data = block_data(200_000);
    let stream = dn_stream(&data, 0, 200_000, CRC32C, 64 * 1024);
    for mode in [PoolMode::Registered, PoolMode::ReadFixed] {
        let mut rx = receiver(mode);
        // the response and 1.5 packets, sent before the read starts (so that a slow
        // scheduler cannot delay them into the timeout), then nothing
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let early = stream[..100_000].to_vec();
        let (sent_tx, sent) = std::sync::mpsc::channel();
        let dn = std::thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            s.write_all(&early).unwrap();
            sent_tx.send(()).unwrap();
            let mut sink = Vec::new();
            let _ = s.read_to_end(&mut sink);
        });
        let mut s = connect(addr);
        sent.recv().unwrap();
        let t = Instant::now();
        let (out, r, done) = read_with(&mut rx, &mut s, 0, 200_000, Duration::from_millis(300));
        let took = t.elapsed();
        assert!(!done);
        match r.error {
            Some(Error::Io { ref source, .. }) => {
                assert_eq!(source.kind(), io::ErrorKind::TimedOut, "{source}")
            }
            ref e => panic!("{e:?}"),
        }
        assert_eq!(out, &data[..65_536], "the verified first packet only");
        assert_eq!(r.delivered, 65_536);
        assert!(took < Duration::from_secs(3), "{took:?}");
        assert_eq!(rx.stats().timeouts, 1);
        drop(s);
        dn.join().unwrap();
        // the cancelled receive was reaped: the same receiver serves the next read
        let (addr, dn) = fake_dn(vec![Answer::Stream(stream.clone(), 1 << 20)]);
        let mut s = connect(addr);
        let (out, r, _) = read_with(&mut rx, &mut s, 0, 200_000, Duration::from_secs(10));
        assert!(r.error.is_none(), "{:?}", r.error);
        assert_eq!(out, data);
        dn.join().unwrap();
    }
}

#[test]
fn a_closed_connection_is_truncated_and_corruption_is_caught() {
    if !uring_usable() {
        return;
    }
    let data = block_data(200_000);
    let stream = dn_stream(&data, 0, 200_000, CRC32C, 64 * 1024);
    let mut rx = receiver(PoolMode::Registered);
    let (addr, dn) = fake_dn(vec![Answer::Close(stream[..150_000].to_vec())]);
    let mut s = connect(addr);
    let (out, r, _) = read_with(&mut rx, &mut s, 0, 200_000, Duration::from_secs(10));
    assert!(
        matches!(r.error, Some(Error::Truncated { .. })),
        "{:?}",
        r.error
    );
    assert_eq!(out.len() as u64, r.delivered);
    assert_eq!(out, &data[..out.len()]);
    dn.join().unwrap();

    // a flipped byte in the second packet's data: the first packet only, then Checksum
    let mut bad = stream.clone();
    let at = bad.len() - 200_000 + 65_536 + 1000; // inside packet 2's data region
    bad[at] ^= 0x20;
    let (addr, dn) = fake_dn(vec![Answer::Stall(bad)]);
    let mut s = connect(addr);
    let (out, r, _) = read_with(&mut rx, &mut s, 0, 200_000, Duration::from_secs(10));
    assert!(
        matches!(r.error, Some(Error::Checksum { .. })),
        "{:?}",
        r.error
    );
    assert_eq!(out, &data[..65_536]);
    drop(s);
    dn.join().unwrap();
}

#[test]
fn the_thread_receiver_serves_reads_and_a_nested_read_goes_blocking() {
    if !uring_usable() {
        return;
    }
    std::thread::spawn(|| {
        assert!(thread_stats().is_none());
        let data = block_data(100_000);
        let stream = dn_stream(&data, 0, 100_000, CRC32C, 64 * 1024);
        let (addr, dn) = fake_dn(vec![Answer::Stream(stream, 1 << 20)]);
        let mut s = connect(addr);
        let mut read = BlockRead::new(name(), "dn".into(), 0, 100_000);
        let mut out = Vec::new();
        let mut nested = None;
        let r = read_block_uring(
            &mut s,
            &req(0, 100_000),
            &mut read,
            &mut Vec::new(),
            &mut |d| {
                // inside a read this thread's receiver is busy: a nested read is refused
                nested.get_or_insert_with(|| with_receiver(|_| ()).is_none());
                out.extend_from_slice(d);
                Ok(())
            },
            "dn",
            Duration::from_secs(10),
        )
        .expect("this thread has a ring");
        assert!(r.error.is_none(), "{:?}", r.error);
        assert_eq!(out, data);
        assert_eq!(nested, Some(true));
        let st = thread_stats().expect("made on first use");
        assert_eq!(st.reads, 1);
        assert!(st.registered);
        dn.join().unwrap();
    })
    .join()
    .unwrap();
}

#[test]
fn forced_choices_follow_the_transport_switch() {
    assert_eq!(choose(BackendChoice::Epoll).unwrap(), RecvPath::Blocking);
    match probe() {
        Ok(_) => assert_eq!(choose(BackendChoice::Uring).unwrap(), RecvPath::Uring),
        Err(_) => assert!(choose(BackendChoice::Uring).is_err()),
    }
}

/// A DataNode speaking through AES-CTR streams (the state after the encrypted handshake):
/// answers each request with `streams[i]` encrypted, in writes of `piece` bytes, and returns the
/// decrypted statuses.
fn fake_encrypted_dn(
    keys: hadoop_wire::hdfs::transfer_sasl::AesKeys,
    streams: Vec<Vec<u8>>,
    piece: usize,
) -> (SocketAddrV4Like, JoinHandle<Vec<[u8; 3]>>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let h = std::thread::spawn(move || {
        let mut c = AesCtrStreams::server(&keys).unwrap();
        let (mut s, _) = l.accept().unwrap();
        let byte = |s: &mut TcpStream, c: &mut AesCtrStreams| {
            let mut b = [0u8; 1];
            s.read_exact(&mut b).unwrap();
            c.decrypt(&mut b);
            b[0]
        };
        let mut statuses = Vec::new();
        for mut bytes in streams {
            let head = [
                byte(&mut s, &mut c),
                byte(&mut s, &mut c),
                byte(&mut s, &mut c),
            ];
            assert_eq!(head, [0, 28, 81], "the request decrypts");
            let (mut len, mut shift) = (0usize, 0);
            loop {
                let b = byte(&mut s, &mut c);
                len |= usize::from(b & 0x7f) << shift;
                shift += 7;
                if b < 0x80 {
                    break;
                }
            }
            for _ in 0..len {
                byte(&mut s, &mut c);
            }
            c.encrypt(&mut bytes);
            for p in bytes.chunks(piece) {
                s.write_all(p).unwrap();
            }
            let mut st = [0u8; 3];
            s.read_exact(&mut st).unwrap();
            c.decrypt(&mut st);
            statuses.push(st);
        }
        statuses
    });
    (addr, h)
}

#[test]
fn encrypted_streams_decrypt_in_place_on_both_paths() {
    use crate::datanode::{read_block_on_with, RecvBuf};
    let keys = hadoop_wire::hdfs::transfer_sasl::AesKeys {
        in_key: (1u8..17).collect(),
        in_iv: [0xfe; 16],
        out_key: (40u8..72).collect(),
        // the low 64 bits about to wrap: the counter carries into the high half
        out_iv: [0xff; 16],
    };
    let data = block_data(400_000);
    let a = dn_stream(&data, 0, 200_000, CRC32C, 64 * 1024);
    let b = dn_stream(&data, 123, 300_000, CRC32C, 64 * 1024);
    let c = dn_stream(&data, 200_000, 200_000, CRC32C, 64 * 1024);
    let (addr, dn) = fake_encrypted_dn(keys.clone(), vec![a, b, c], 3000);
    let mut s = connect(addr);
    let mut crypt = AesCtrStreams::client(&keys).unwrap();
    let mut outs = Vec::new();
    let mut reads: Vec<(u64, u64)> = vec![(0, 200_000), (123, 300_000), (200_000, 200_000)];
    // the blocking path first, then io_uring (when usable) on the same connection: the
    // keystreams run on across reads
    let mut buf = RecvBuf::default();
    let (off, len) = reads.remove(0);
    let mut read = BlockRead::new(name(), "dn".into(), off, len);
    let mut out = Vec::new();
    let r = read_block_on_with(
        &mut s,
        Some(&mut crypt),
        &req(off, len),
        &mut read,
        &mut buf,
        &mut Vec::new(),
        &mut |d| {
            out.extend_from_slice(d);
            Ok(())
        },
        "dn",
    );
    assert!(r.error.is_none() && read.is_done(), "{:?}", r.error);
    outs.push(out);
    for (off, len) in reads {
        let mut read = BlockRead::new(name(), "dn".into(), off, len);
        let mut out = Vec::new();
        let mut sink = |d: &[u8]| {
            out.extend_from_slice(d);
            Ok(())
        };
        let r = match uring_usable()
            .then(|| {
                read_block_uring_with(
                    &mut s,
                    Some(&mut crypt),
                    &req(off, len),
                    &mut read,
                    &mut Vec::new(),
                    &mut sink,
                    "dn",
                    Duration::from_secs(10),
                )
            })
            .flatten()
        {
            Some(r) => r,
            None => read_block_on_with(
                &mut s,
                Some(&mut crypt),
                &req(off, len),
                &mut read,
                &mut buf,
                &mut Vec::new(),
                &mut sink,
                "dn",
            ),
        };
        assert!(r.error.is_none() && read.is_done(), "{:?}", r.error);
        outs.push(out);
    }
    assert_eq!(outs[0], &data[..200_000]);
    assert_eq!(outs[1], &data[123..300_123]);
    assert_eq!(outs[2], &data[200_000..]);
    assert_eq!(dn.join().unwrap(), vec![[2, 0x08, 6]; 3], "CHECKSUM_OK x3");
}
