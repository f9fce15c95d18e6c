//! A TCP relay for tests: it forwards each
//! connection to `upstream`, counts them, and can cut them all at once (a connection broken
//! under the client, as a network failure or a restarted server does).

use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex};

/// A TCP relay to `upstream` whose connections can be dropped at once.
pub struct Relay {
    /// Where clients connect.
    pub addr: SocketAddr,
    /// Connections accepted (and connected upstream) so far.
    pub accepted: Arc<AtomicUsize>,
    conns: Arc<Mutex<Vec<TcpStream>>>,
}

impl Relay {
    pub fn start(upstream: SocketAddr) -> Relay {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let accepted = Arc::new(AtomicUsize::new(0));
        let conns: Arc<Mutex<Vec<TcpStream>>> = Arc::default();
        let (a, c) = (accepted.clone(), conns.clone());
        std::thread::spawn(move || {
            for down in listener.incoming() {
                let Ok(down) = down else { return };
                let Ok(up) = TcpStream::connect(upstream) else {
                    continue;
                };
                a.fetch_add(1, Relaxed);
                {
                    let mut g = c.lock().unwrap();
                    g.push(down.try_clone().unwrap());
                    g.push(up.try_clone().unwrap());
                }
                for (mut from, mut to) in [
                    (down.try_clone().unwrap(), up.try_clone().unwrap()),
                    (up, down),
                ] {
                    std::thread::spawn(move || {
                        let _ = std::io::copy(&mut from, &mut to);
                        let _ = to.shutdown(Shutdown::Both);
                    });
                }
            }
        });
        Relay {
            addr,
            accepted,
            conns,
        }
    }

    /// Shuts down both sides of every connection relayed so far.
    pub fn drop_connections(&self) {
        for s in self.conns.lock().unwrap().drain(..) {
            let _ = s.shutdown(Shutdown::Both);
        }
    }
}
