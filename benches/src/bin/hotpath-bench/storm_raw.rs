//! `hotpath-bench storm-raw`: the heartbeat storm's raw reference server. It runs on the
//! transport the RM uses (`ipc::transport`: io_uring, epoll fallback, the same default
//! [`ipc::server::ServerConfig`] transport settings and the RM's ring placement from the `hw`
//! plan), and does the least an IPC server can: it checks the 7-byte preamble, cuts request
//! frames ([`FrameAccumulator`]), reads each call's RPC header (call id, client id, retry count)
//! and answers every call with one SUCCESS frame whose message is a fixed template — a real
//! `NodeHeartbeatResponseProto`, so the response frame has the RM's size and the load generator
//! reads it as it reads the RM's. No method lookup, no protobuf decode of the request, no state.
//!
//! Its CPU per request (from /proc) is the floor the RM's CPU per heartbeat is compared with.
//! It prints `READY {"address":…,"pid":…}` and serves until its stdin closes (the parent's
//! handle on it), then shuts its rings down.

use std::io::Read;
use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::{Context, Result};
use clap::Args;
use hadoop_wire::encode::{success_response_frame, RpcResponseHeader};
use hadoop_wire::frame::{
    parse_preamble, FrameAccumulator, FrameDecoder, Preamble, PreambleOutcome, RequestFrame,
};
use ipc::transport::{Flow, Outbox, Service, Session};

#[derive(Args)]
pub struct RawArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:0")]
    address: SocketAddr,
    /// The response message (hex), e.g. a heartbeat answer the loadgen saw from the RM.
    #[arg(long)]
    payload_hex: String,
    /// Ring threads (default: as many as the RM's `hw` plan gives it, pinned the same way).
    #[arg(long)]
    threads: Option<usize>,
    /// Print `READY {json}` on stdout once serving.
    #[arg(long)]
    ready_line: bool,
    /// A configuration key for the transport, as the RM takes it (`KEY=VALUE`, repeatable),
    /// e.g. `hotpath.ipc.server.batch-wait-us=200`.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
}

struct Raw {
    payload: Arc<[u8]>,
}

impl Service for Raw {
    type Session = RawSession;
    fn open(&self, _peer: Option<SocketAddr>) -> RawSession {
        RawSession {
            preamble: Vec::new(),
            acc: FrameAccumulator::new(FrameDecoder::default()),
            payload: self.payload.clone(),
            held: Vec::new(),
            scratch: Vec::with_capacity(self.payload.len() + 64),
        }
    }
}

/// One connection: preamble, then frames; what backpressure stops is kept in `held`.
pub struct RawSession {
    /// Preamble bytes until all 7 are in (then empty, with `acc` taking over).
    preamble: Vec<u8>,
    acc: FrameAccumulator,
    payload: Arc<[u8]>,
    held: Vec<u8>,
    scratch: Vec<u8>,
}

/// How far [`RawSession::consume`] got.
enum Took {
    /// All of the input.
    All,
    /// Stopped for want of a pool chunk after this many bytes.
    Starved(usize),
    Close,
}

impl RawSession {
    fn consume(&mut self, mut data: &[u8], out: &mut Outbox<'_>) -> Took {
        let total = data.len();
        if self.preamble.len() < Preamble::SIZE + 1 {
            let take = (Preamble::SIZE - self.preamble.len()).min(data.len());
            self.preamble.extend_from_slice(&data[..take]);
            data = &data[take..];
            match parse_preamble(&self.preamble) {
                Ok(PreambleOutcome::NeedMore(_)) => return Took::All,
                Ok(PreambleOutcome::Simple { .. }) => {
                    // Marks the preamble done (a length no preamble has).
                    self.preamble.push(0);
                }
                _ => return Took::Close,
            }
        }
        loop {
            // A response of up to one chunk can then be written whatever the handler does.
            if out.reserve_spare().is_err() {
                return Took::Starved(total - data.len());
            }
            let step = match self.acc.next_frame(data) {
                Ok(s) => s,
                Err(_) => return Took::Close,
            };
            data = &data[step.consumed..];
            let Some(frame) = step.frame else {
                return Took::All;
            };
            let Ok((req, call_id)) = RequestFrame::parse(&frame) else {
                return Took::Close;
            };
            // The connection context (-3) and pings (-4) get no answer.
            if call_id < 0 {
                continue;
            }
            let h = req.rpc_header_view();
            let (Ok(client_id), Ok(retry)) = (h.client_id(), h.retry_count()) else {
                return Took::Close;
            };
            self.scratch.clear();
            let header = RpcResponseHeader::success(call_id, client_id, retry);
            if success_response_frame(&mut self.scratch, &header, &self.payload[..]).is_err()
                || out.write_sealed(&self.scratch).is_err()
            {
                return Took::Close;
            }
        }
    }

    fn drain_held(&mut self, out: &mut Outbox<'_>) -> Flow {
        let held = std::mem::take(&mut self.held);
        let flow = match self.consume(&held, out) {
            Took::All => Flow::Continue,
            Took::Starved(n) => {
                self.held.extend_from_slice(&held[n..]);
                Flow::Continue
            }
            Took::Close => Flow::CloseAfterFlush,
        };
        if self.held.is_empty() {
            // Keep the allocation for the next time.
            self.held = held;
            self.held.clear();
        }
        flow
    }
}

impl Session for RawSession {
    fn on_recv(&mut self, data: &[u8], out: &mut Outbox<'_>) -> Flow {
        if !self.held.is_empty() {
            self.held.extend_from_slice(data);
            return self.drain_held(out);
        }
        match self.consume(data, out) {
            Took::All => Flow::Continue,
            Took::Starved(n) => {
                self.held.extend_from_slice(&data[n..]);
                Flow::Continue
            }
            Took::Close => Flow::CloseAfterFlush,
        }
    }

    fn on_send_progress(&mut self, out: &mut Outbox<'_>) -> Flow {
        if self.held.is_empty() {
            Flow::Continue
        } else {
            self.drain_held(out)
        }
    }

    fn wants_input(&self) -> bool {
        self.held.is_empty()
    }

    fn is_idle(&self) -> bool {
        self.held.is_empty() && self.acc.pending() == 0
    }
}

pub fn run(a: RawArgs) -> Result<()> {
    let payload: Arc<[u8]> = crate::storm::unhex(&a.payload_hex)
        .context("--payload-hex")?
        .into();
    crate::storm::raise_nofile();
    let mut cfg = ipc::server::ServerConfig::default().transport;
    // The RM's placement: its network rings where the plan puts `ring-i`.
    if let Ok(t) = hw::Topology::detect() {
        let plan = hw::Plan::for_rm(&t);
        let rings: Vec<u32> = plan
            .assignments()
            .iter()
            .filter(|a| matches!(a.role, hw::Role::NetRing(_)))
            .map(|a| a.cpu)
            .collect();
        if !rings.is_empty() {
            cfg.threads = rings.len();
            cfg.cpus = rings;
        }
    }
    if let Some(t) = a.threads {
        cfg.threads = t.max(1);
    }
    let conf = conf::Configuration::from_flags(None, &a.set).context("--set")?;
    if let Some(w) = ipc::transport::batch_wait_from_conf(&conf)? {
        cfg.batch_wait = w;
    }
    let running = ipc::transport::start(a.address, cfg, Arc::new(Raw { payload }))
        .context("starting the raw server")?;
    tracing::info!(
        "storm-raw serving on {} ({})",
        running.local_addr(),
        running.backend()
    );
    if a.ready_line {
        println!(
            "READY {}",
            serde_json::json!({
                "address": running.local_addr().to_string(),
                "pid": std::process::id(),
                "backend": running.backend().name(),
            })
        );
    }
    // Serve until stdin closes.
    let mut sink = [0u8; 256];
    let mut stdin = std::io::stdin();
    while matches!(stdin.read(&mut sink), Ok(n) if n > 0) {}
    running.shutdown();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use hadoop_wire::rpc::client::{Caller, Responses, StateIdCell};
    use ipc::transport::{BufferPool, PoolConfig, TxQueue};

    /// The session answers each call with the template, echoing the call id, and nothing to
    /// the connection context; bytes split anywhere give the same answers.
    #[test]
    fn answers_each_call_with_the_template() {
        let payload: Arc<[u8]> = vec![8, 7, 32, 0].into();
        let svc = Raw {
            payload: payload.clone(),
        };
        let caller = Caller::new([3; 16], StateIdCell::new());
        let mut wire = Vec::new();
        let ctx = hadoop_wire::encode::ConnectionContext {
            effective_user: Some("t"),
            real_user: None,
            protocol: Some("p"),
        };
        caller.hello(&mut wire, &ctx).unwrap();
        let rh = hadoop_wire::encode::RequestHeader {
            method_name: "m",
            declaring_class_protocol_name: "p",
            client_protocol_version: 1,
        };
        for id in [5, 6, 900] {
            caller.call_frame(&mut wire, id, &rh, &b"req"[..]).unwrap();
        }
        for split in [1usize, 3, 7, 11, wire.len()] {
            let mut pool = BufferPool::new(&PoolConfig {
                chunk_size: 4096,
                chunks: 8,
                per_conn_chunks: 4,
                register: false,
            })
            .unwrap();
            let mut tx = TxQueue::new();
            let mut s = svc.open(None);
            for part in wire.chunks(split) {
                let mut out = Outbox::new(&mut pool, &mut tx);
                assert_eq!(s.on_recv(part, &mut out), Flow::Continue);
            }
            let mut sent = Vec::new();
            for i in 0..tx.segments() {
                let seg = tx.segment(i).unwrap();
                sent.extend_from_slice(pool.slice(seg.chunk, seg.start as usize, seg.end as usize));
            }
            let r = Responses::new(1 << 20, StateIdCell::new());
            let mut at = 0;
            let mut ids = Vec::new();
            while at < sent.len() {
                let n = r.frame_len(sent[at..at + 4].try_into().unwrap()).unwrap();
                let reply = r.reply(&sent[at + 4..at + 4 + n]).unwrap();
                assert_eq!(reply.result.unwrap(), &payload[..]);
                ids.push(reply.call_id);
                at += 4 + n;
            }
            assert_eq!(ids, [5, 6, 900], "split {split}");
            assert!(s.is_idle());
        }
    }

    #[test]
    fn a_bad_preamble_closes() {
        let svc = Raw {
            payload: vec![0u8].into(),
        };
        let mut pool = BufferPool::new(&PoolConfig {
            chunk_size: 4096,
            chunks: 4,
            per_conn_chunks: 2,
            register: false,
        })
        .unwrap();
        let mut tx = TxQueue::new();
        let mut s = svc.open(None);
        let mut out = Outbox::new(&mut pool, &mut tx);
        assert_eq!(
            s.on_recv(b"hrpx\x09\x00\x00", &mut out),
            Flow::CloseAfterFlush
        );
    }
}
