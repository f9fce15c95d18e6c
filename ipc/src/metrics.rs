//! `/metrics`: the one Prometheus text renderer and the one HTTP endpoint that serves it.
//!
//! Both the RM core and the node agent publish counters, gauges and latency histograms.
//! [`Exposition`] writes them in the Prometheus text format (0.0.4): a `# HELP` and `# TYPE`
//! line per family, then its samples; a latency histogram (hdrhistogram, in any unit) becomes
//! a `summary` (quantiles, `_sum`, `_count`) or a `histogram` (cumulative `le` buckets). The
//! callers only say what their metrics are called and what they hold.
//!
//! [`MetricsHttp`] answers `GET /metrics` (and `GET /`) with a body the caller renders per
//! scrape, anything else with 404. It is std::net, one request per connection, with a 2 s
//! deadline and an 8 KiB cap on the request head, so a slow or hostile scraper costs a socket
//! for two seconds at most. It is polled from a housekeeping loop ([`MetricsHttp::poll`]) or
//! given a thread of its own ([`MetricsHttp::serve_blocking`]). Written by hand because a
//! scrape endpoint needs one route and no HTTP crate is smaller than these lines.

use std::fmt::{Display, Write as _};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

/// A metric family's type, as the `# TYPE` line spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
    Summary,
    Histogram,
}

impl Kind {
    /// The `# TYPE` spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Summary => "summary",
            Kind::Histogram => "histogram",
        }
    }
}

/// Quantiles a summary exports.
pub const SUMMARY_QUANTILES: [f64; 4] = [0.5, 0.9, 0.99, 0.999];

/// A Prometheus text exposition being written.
#[derive(Debug, Default)]
pub struct Exposition {
    out: String,
}

impl Exposition {
    /// An empty exposition (4 KiB reserved: what a scrape of either service takes).
    pub fn new() -> Self {
        Exposition {
            out: String::with_capacity(4096),
        }
    }

    /// Starts a family: its `# HELP` and `# TYPE` lines.
    pub fn family(&mut self, name: &str, help: &str, kind: Kind) -> &mut Self {
        let _ = writeln!(self.out, "# HELP {name} {help}");
        let _ = writeln!(self.out, "# TYPE {name} {}", kind.as_str());
        self
    }

    /// One sample line: `name value`, or `name{labels} value` (`labels` as in `shard="0"`).
    pub fn sample(&mut self, name: &str, labels: &str, value: impl Display) -> &mut Self {
        if labels.is_empty() {
            let _ = writeln!(self.out, "{name} {value}");
        } else {
            let _ = writeln!(self.out, "{name}{{{labels}}} {value}");
        }
        self
    }

    /// A counter family with its one unlabelled sample.
    pub fn counter(&mut self, name: &str, help: &str, value: u64) -> &mut Self {
        self.family(name, help, Kind::Counter)
            .sample(name, "", value)
    }

    /// A gauge family with its one unlabelled sample.
    pub fn gauge(&mut self, name: &str, help: &str, value: impl Display) -> &mut Self {
        self.family(name, help, Kind::Gauge).sample(name, "", value)
    }

    /// The sample lines of one summary in seconds: the [`SUMMARY_QUANTILES`], `_sum` and
    /// `_count`. `labels` (e.g. `shard="0"`, or empty) go on every line; `per_second` is the
    /// histogram's units per second (1e6 for µs, 1e9 for ns). Values have 9 decimals (ns).
    pub fn summary(
        &mut self,
        name: &str,
        labels: &str,
        h: &Histogram<u64>,
        per_second: f64,
    ) -> &mut Self {
        let (open, sep, close) = if labels.is_empty() {
            ("", "", "")
        } else {
            ("{", ",", "}")
        };
        for q in SUMMARY_QUANTILES {
            let v = h.value_at_quantile(q) as f64 / per_second;
            let _ = writeln!(self.out, "{name}{{{labels}{sep}quantile=\"{q}\"}} {v:.9}");
        }
        let sum = h.mean() * h.len() as f64 / per_second;
        let _ = writeln!(self.out, "{name}_sum{open}{labels}{close} {sum:.9}");
        let _ = writeln!(self.out, "{name}_count{open}{labels}{close} {}", h.len());
        self
    }

    /// The sample lines of one histogram in seconds: a cumulative `_bucket` per upper bound in
    /// `bounds_s` (seconds) and `+Inf`, `_sum` and `_count`; `per_second` as in
    /// [`Exposition::summary`].
    pub fn histogram(
        &mut self,
        name: &str,
        h: &Histogram<u64>,
        bounds_s: &[f64],
        per_second: f64,
    ) -> &mut Self {
        for &b in bounds_s {
            let le = (b * per_second) as u64;
            let n = h.count_between(0, le);
            let _ = writeln!(self.out, "{name}_bucket{{le=\"{b}\"}} {n}");
        }
        let _ = writeln!(self.out, "{name}_bucket{{le=\"+Inf\"}} {}", h.len());
        let _ = writeln!(
            self.out,
            "{name}_sum {}",
            h.mean() * h.len() as f64 / per_second
        );
        let _ = writeln!(self.out, "{name}_count {}", h.len());
        self
    }

    /// The text written so far.
    pub fn as_str(&self) -> &str {
        &self.out
    }

    /// The finished text.
    pub fn finish(self) -> String {
        self.out
    }
}

/// The HTTP endpoint (see the module docs).
pub struct MetricsHttp {
    listener: TcpListener,
    conns: Vec<(TcpStream, Vec<u8>, Instant)>,
}

/// Longest request head read (bytes); a longer one is dropped unanswered.
const MAX_REQUEST: usize = 8192;
/// Scrapes answered at once by [`MetricsHttp::poll`]; more are closed at accept.
const MAX_HTTP_CONNS: usize = 32;
/// Time a scraper has to send its request head.
const REQUEST_DEADLINE: Duration = Duration::from_secs(2);

impl MetricsHttp {
    /// Listens on `addr` (port 0: any free port, see [`MetricsHttp::local_addr`]).
    pub fn bind(addr: SocketAddr) -> std::io::Result<Self> {
        let listener = TcpListener::bind(addr)?;
        listener.set_nonblocking(true)?;
        Ok(Self {
            listener,
            conns: Vec::new(),
        })
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Accepts and answers what is ready, without blocking. `body` renders the metrics.
    /// Returns whether it did anything.
    pub fn poll(&mut self, body: impl Fn() -> String) -> bool {
        let mut busy = false;
        while let Ok((s, _)) = self.listener.accept() {
            busy = true;
            if self.conns.len() >= MAX_HTTP_CONNS || s.set_nonblocking(true).is_err() {
                continue;
            }
            self.conns.push((s, Vec::new(), Instant::now()));
        }
        let mut i = 0;
        while i < self.conns.len() {
            let (s, buf, since) = &mut self.conns[i];
            let mut chunk = [0u8; 1024];
            let mut done = false;
            match s.read(&mut chunk) {
                Ok(0) => done = true,
                Ok(n) => {
                    busy = true;
                    buf.extend_from_slice(&chunk[..n]);
                    if let Some(resp) = answer(buf, &body) {
                        let _ = s.set_nonblocking(false);
                        let _ = s.set_write_timeout(Some(REQUEST_DEADLINE));
                        let _ = s.write_all(resp.as_bytes());
                        done = true;
                    } else if buf.len() > MAX_REQUEST {
                        done = true;
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    if since.elapsed() > REQUEST_DEADLINE {
                        done = true;
                    }
                }
                Err(_) => done = true,
            }
            if done {
                self.conns.swap_remove(i);
            } else {
                i += 1;
            }
        }
        busy
    }

    /// Serves on the calling thread until the process ends, blocking in `accept` (no polling:
    /// an idle endpoint costs no CPU). One connection at a time, each with the same 2 s and
    /// 8 KiB limits as [`MetricsHttp::poll`]; meant for a thread of its own.
    pub fn serve_blocking(self, body: impl Fn() -> String) {
        if let Err(e) = self.listener.set_nonblocking(false) {
            tracing::error!("/metrics: {e}");
            return;
        }
        for s in self.listener.incoming() {
            let Ok(mut s) = s else { continue };
            let _ = s.set_nonblocking(false);
            let _ = s.set_read_timeout(Some(REQUEST_DEADLINE));
            let _ = s.set_write_timeout(Some(REQUEST_DEADLINE));
            let deadline = Instant::now() + REQUEST_DEADLINE;
            let mut buf = Vec::new();
            let mut chunk = [0u8; 1024];
            while buf.len() <= MAX_REQUEST && Instant::now() < deadline {
                match s.read(&mut chunk) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        buf.extend_from_slice(&chunk[..n]);
                        if let Some(resp) = answer(&buf, &body) {
                            let _ = s.write_all(resp.as_bytes());
                            break;
                        }
                    }
                }
            }
        }
    }
}

/// The response to a complete request head in `buf` (`None` while the head is incomplete):
/// `GET /metrics` (or `/`) gets the rendered metrics, anything else a 404.
fn answer(buf: &[u8], body: &impl Fn() -> String) -> Option<String> {
    if !(buf.windows(4).any(|w| w == b"\r\n\r\n") || buf.windows(2).any(|w| w == b"\n\n")) {
        return None;
    }
    let line = buf.split(|&b| b == b'\n').next().unwrap_or(&[]);
    let line = String::from_utf8_lossy(line);
    let mut parts = line.split_whitespace();
    let (m, p) = (parts.next(), parts.next());
    Some(
        if m == Some("GET") && matches!(p, Some("/metrics") | Some("/")) {
            let b = body();
            format!(
                "HTTP/1.0 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{b}",
                b.len()
            )
        } else {
            "HTTP/1.0 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".into()
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_samples_and_labels() {
        let mut e = Exposition::new();
        e.counter("a_total", "As.", 3)
            .gauge("g", "A gauge.", format_args!("{:.1}", 2.26))
            .family("s", "Per shard.", Kind::Gauge)
            .sample("s", "shard=\"0\"", 7);
        assert_eq!(
            e.finish(),
            "# HELP a_total As.\n# TYPE a_total counter\na_total 3\n\
             # HELP g A gauge.\n# TYPE g gauge\ng 2.3\n\
             # HELP s Per shard.\n# TYPE s gauge\ns{shard=\"0\"} 7\n"
        );
    }

    #[test]
    fn summary_and_histogram_lines() {
        let mut h = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).unwrap();
        h.record(100).unwrap(); // 100 µs
        h.record(2_000).unwrap(); // 2 ms
        let mut e = Exposition::new();
        e.summary("lat", "shard=\"1\"", &h, 1e6);
        e.histogram("rpc", &h, &[0.0005, 0.01], 1e6);
        let t = e.finish();
        assert!(
            t.contains("lat{shard=\"1\",quantile=\"0.5\"} 0.000100000\n"),
            "{t}"
        );
        assert!(t.contains("lat_count{shard=\"1\"} 2\n"), "{t}");
        assert!(t.contains("rpc_bucket{le=\"0.0005\"} 1\n"), "{t}");
        assert!(t.contains("rpc_bucket{le=\"0.01\"} 2\n"), "{t}");
        assert!(t.contains("rpc_bucket{le=\"+Inf\"} 2\nrpc_sum "), "{t}");
        assert!(t.ends_with("rpc_count 2\n"), "{t}");
    }

    #[test]
    fn an_unlabelled_summary_has_no_braces_on_sum_and_count() {
        let h = Histogram::<u64>::new(2).unwrap();
        let mut e = Exposition::new();
        e.summary("x", "", &h, 1e9);
        let t = e.finish();
        assert!(t.starts_with("x{quantile=\"0.5\"} 0.000000000\n"), "{t}");
        assert!(t.contains("\nx_sum 0.000000000\nx_count 0\n"), "{t}");
    }

    #[test]
    fn answers_get_metrics_and_404s_the_rest() {
        let body = || "m 1\n".to_string();
        assert!(
            answer(b"GET /metrics HTTP/1.0\r\n", &body).is_none(),
            "head incomplete"
        );
        let ok = answer(b"GET /metrics HTTP/1.0\r\n\r\n", &body).unwrap();
        assert!(ok.starts_with("HTTP/1.0 200 OK\r\n") && ok.ends_with("\r\n\r\nm 1\n"));
        assert!(ok.contains("Content-Length: 4\r\n"));
        let nf = answer(b"POST /metrics HTTP/1.0\n\n", &body).unwrap();
        assert!(nf.starts_with("HTTP/1.0 404"));
    }
}
