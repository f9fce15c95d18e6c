//! Sharing the highest stateId across clients ([`StateIdCell`]): responses on any client raise
//! the shared value, requests on every client carry it; without a shared cell each client keeps
//! its own.
//!
//! The in-process server here answers each call with the stateId the request asked for (the
//! request message: 8 bytes little-endian, or empty for none) and returns, as the response
//! message, the stateId the request header carried (8 bytes, or empty when absent).

use crate::server_support;

use std::io::Write;
use std::net::{SocketAddr, TcpListener};
use std::time::Duration;

use ipc::client::{Client, ClientConfig, StateIdCell};
use server_support::read_frame;

/// Starts the stateId server; it serves any number of connections until they close.
fn state_server() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { break };
            std::thread::spawn(move || {
                let mut pre = [0u8; 7];
                if std::io::Read::read_exact(&mut s, &mut pre).is_err() {
                    return;
                }
                let _context = read_frame(&mut s);
                while let Some(body) = read_frame(&mut s) {
                    let f = hadoop_wire::frame::RequestFrame::split(&body).unwrap();
                    let h = hadoop_wire::view::rpc::RpcRequestHeaderView::new(f.rpc_header);
                    let seen = h.state_id().unwrap();
                    let set = f
                        .payload
                        .filter(|p| p.len() == 8)
                        .map(|p| i64::from_le_bytes(p.try_into().unwrap()));
                    let echo = seen.map(i64::to_le_bytes);
                    let mut out = Vec::new();
                    hadoop_wire::encode::success_response_frame(
                        &mut out,
                        &hadoop_wire::encode::RpcResponseHeader {
                            state_id: set,
                            ..hadoop_wire::encode::RpcResponseHeader::success(
                                h.call_id().unwrap(),
                                h.client_id().unwrap(),
                                0,
                            )
                        },
                        echo.as_ref().map_or(&[][..], |e| &e[..]),
                    )
                    .unwrap();
                    if s.write_all(&out).is_err() {
                        break;
                    }
                }
            });
        }
    });
    addr
}

fn cfg(cell: Option<StateIdCell>) -> ClientConfig {
    ClientConfig {
        protocol: "hotpath.test.StateProtocol".into(),
        call_timeout: Duration::from_secs(20),
        state_id: cell,
        ..ClientConfig::default()
    }
}

/// One call that asks the server to answer with stateId `set`; returns the stateId the request
/// header carried.
fn call(c: &Client, set: Option<i64>) -> Option<i64> {
    let req = set.map(i64::to_le_bytes);
    let r = c
        .call("state", req.as_ref().map_or(&[][..], |e| &e[..]))
        .unwrap();
    assert_eq!(r.state_id(), set);
    match r.payload() {
        [] => None,
        p => Some(i64::from_le_bytes(p.try_into().unwrap())),
    }
}

#[test]
fn two_clients_sharing_a_cell_send_the_highest_state_id_either_has_seen() {
    let (active_addr, observer_addr) = (state_server(), state_server());
    let cell = StateIdCell::new();
    let active = Client::new(active_addr, cfg(Some(cell.clone())));
    let observer = Client::new(observer_addr, cfg(Some(cell.clone())));
    assert!(active.state_id_cell().same_cell(&cell));
    assert!(observer.state_id_cell().same_cell(&cell));

    // Nothing seen yet: no stateId in the header.
    assert_eq!(call(&active, Some(100)), None);
    assert_eq!(cell.get(), Some(100));
    // The observer's first request carries what the active's response set.
    assert_eq!(call(&observer, None), Some(100));
    // A lower stateId (a lagging observer) does not move the cell back.
    assert_eq!(call(&observer, Some(50)), Some(100));
    assert_eq!(cell.get(), Some(100));
    assert_eq!(call(&active, None), Some(100));
    // The observer raises it; the active sends the new value.
    assert_eq!(call(&observer, Some(200)), Some(100));
    assert_eq!(call(&active, None), Some(200));
    assert_eq!(active.last_state_id(), Some(200));
    assert_eq!(observer.last_state_id(), Some(200));
    // A value observed outside any client (e.g. a direct connection) is sent too.
    cell.observe(300);
    assert_eq!(call(&observer, None), Some(300));
    // A third client joining through `state_id_cell` shares it as well.
    let third = Client::new(observer_addr, cfg(Some(observer.state_id_cell().clone())));
    assert_eq!(call(&third, Some(400)), Some(300));
    assert_eq!(call(&active, None), Some(400));
}

#[test]
fn without_a_shared_cell_each_client_keeps_its_own_state_id() {
    let addr = state_server();
    // The same (cloned) config: `state_id: None` gives each client a cell of its own.
    let config = cfg(None);
    let a = Client::new(addr, config.clone());
    let b = Client::new(addr, config);
    assert!(!a.state_id_cell().same_cell(b.state_id_cell()));
    assert_eq!(call(&a, Some(100)), None);
    assert_eq!(call(&a, None), Some(100));
    assert_eq!(call(&b, None), None);
    assert_eq!(call(&b, Some(7)), None);
    assert_eq!(call(&b, None), Some(7));
    assert_eq!((a.last_state_id(), b.last_state_id()), (Some(100), Some(7)));
}

#[test]
fn concurrent_calls_on_sharing_clients_leave_the_maximum() {
    let addr = state_server();
    let cell = StateIdCell::new();
    std::thread::scope(|s| {
        for t in 0..4i64 {
            let cell = cell.clone();
            s.spawn(move || {
                let c = Client::new(addr, cfg(Some(cell)));
                for i in 0..50i64 {
                    let sent = call(&c, Some(i * 4 + t));
                    // Whatever was sent is at most the cell's value after the call.
                    assert!(sent <= c.last_state_id());
                }
            });
        }
    });
    assert_eq!(cell.get(), Some(49 * 4 + 3));
}

#[test]
fn a_state_id_cell_keeps_the_highest_value_observed() {
    let cell = StateIdCell::default();
    assert_eq!(cell.get(), None);
    cell.observe(-5);
    assert_eq!(cell.get(), Some(-5));
    cell.observe(10);
    cell.observe(3);
    assert_eq!(cell.get(), Some(10));
    let clone = cell.clone();
    clone.observe(11);
    assert_eq!(cell.get(), Some(11));
    assert!(clone.same_cell(&cell));
    assert!(!StateIdCell::new().same_cell(&cell));
    assert_eq!(format!("{cell:?}"), "StateIdCell(Some(11))");
}
