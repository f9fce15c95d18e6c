//! Per-message cost of the RFC 4121 layer (`hadoop_wire::sasl::krb5_cfx`): a sealed and an
//! integrity-only wrap + unwrap of messages of a few sizes, CPU ns per message (one thread),
//! for each enctype named (default: 17 18 19 20).
//! `cargo run --release -p hadoop-wire --example cfx_rate [ENCTYPE...]`

use hadoop_wire::sasl::krb5_cfx::{CfxContext, CfxKey, CfxParams};
use std::time::Instant;

/// This thread's CPU time (user + system), seconds (`/proc/thread-self/stat`, clock ticks of
/// 10 ms: run long enough).
fn cpu_secs() -> f64 {
    let s = std::fs::read_to_string("/proc/thread-self/stat").unwrap();
    let rest = &s[s.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    (f[11].parse::<f64>().unwrap() + f[12].parse::<f64>().unwrap()) / 100.0
}

fn main() {
    let enctypes: Vec<i32> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("an enctype number"))
        .collect();
    let enctypes = if enctypes.is_empty() {
        vec![17, 18, 19, 20]
    } else {
        enctypes
    };
    for enctype in enctypes {
        // aes256 (18, 20) keys are 32 bytes, aes128 (17, 19) 16
        let len = if enctype % 2 == 0 { 32 } else { 16 };
        let key = vec![7u8; len];
        let sub = vec![9u8; len];
        let p = |initiator| CfxParams {
            initiator,
            ctx_key: CfxKey { enctype, key: &key },
            acceptor_subkey: Some(CfxKey { enctype, key: &sub }),
            send_seq: 0,
            recv_seq: 0,
        };
        let mut i = CfxContext::new(&p(true), &[1; 32]).expect("a supported enctype");
        let mut a = CfxContext::new(&p(false), &[2; 32]).expect("a supported enctype");
        let (mut w, mut out) = (Vec::with_capacity(1 << 17), Vec::with_capacity(1 << 17));
        for len in [100usize, 400, 4096, 65536] {
            let msg = vec![0x5au8; len];
            for sealed in [true, false] {
                let n = (400_000_000 / (len + 200)).max(2000);
                let (t, c0) = (Instant::now(), cpu_secs());
                for _ in 0..n {
                    w.clear();
                    out.clear();
                    i.wrap(sealed, &msg, &mut w);
                    a.unwrap(&w, &mut out).unwrap();
                }
                let wall = t.elapsed().as_nanos() as f64 / n as f64;
                let ns = (cpu_secs() - c0) * 1e9 / n as f64;
                println!(
                    "enctype {enctype} {len:>6} bytes {}: wrap + unwrap {ns:>8.0} ns CPU \
                     ({:.0} MB/s; wall {wall:.0} ns)",
                    if sealed { "sealed   " } else { "integrity" },
                    len as f64 / ns * 1e3
                );
            }
        }
    }
}
