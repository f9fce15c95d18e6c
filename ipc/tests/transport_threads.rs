//! Ring thread names and pinning: the default `hp-ring-<i>` / `hp-ring-<cpu>`, names given in
//! `TransportConfig::thread_names`, and the `hw` plan's names from `name_threads_by_plan`.

mod server_support;

use server_support::*;

/// `Cpus_allowed_list` of every thread of this process called `name`.
fn threads_named(name: &str) -> Vec<String> {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(Result::ok)
        .filter(|t| {
            std::fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.trim_end() == name)
        })
        .filter_map(|t| std::fs::read_to_string(t.path().join("status")).ok())
        .map(|status| {
            status
                .lines()
                .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
                .unwrap()
                .trim()
                .to_string()
        })
        .collect()
}

fn a_usable_cpu() -> u32 {
    *hw::affinity::current_cpus().unwrap().last().unwrap()
}

#[test]
fn ring_threads_take_the_plan_names_when_asked() {
    let cpu = a_usable_cpu();
    for_each_backend(|b| {
        let srv = start(b, bench_registry(), |cfg| {
            cfg.transport.threads = 2;
            cfg.transport.cpus = vec![cpu];
            cfg.transport.name_threads_by_plan();
            assert_eq!(
                cfg.transport.thread_names,
                [format!("hp-ring0-{cpu}"), format!("hp-ring1-{cpu}")]
            );
        });
        // Both rings run, pinned, under the plan's names; and they serve.
        get_buffer_checked(&client(srv.local_addr()), 1000);
        for i in 0..2 {
            assert_eq!(
                threads_named(&format!("hp-ring{i}-{cpu}")),
                [cpu.to_string()],
                "ring {i}"
            );
        }
        srv.shutdown();
    });
}

#[test]
fn ring_threads_take_given_names_and_default_names_otherwise() {
    for_each_backend(|b| {
        let srv = start(b, bench_registry(), |cfg| {
            cfg.transport.threads = 2;
            cfg.transport.thread_names = vec!["hp-tt-first".into()];
        });
        get_buffer_checked(&client(srv.local_addr()), 1000);
        // Thread 0 has the given name; thread 1, with none given, the default.
        assert_eq!(threads_named("hp-tt-first").len(), 1);
        assert!(!threads_named("hp-ring-1").is_empty());
        srv.shutdown();
        // Joined, the thread has exited; its /proc/self/task entry goes away a moment after
        // the join returns (the kernel clears the join futex before it releases the task).
        let t0 = std::time::Instant::now();
        while !threads_named("hp-tt-first").is_empty() {
            assert!(
                t0.elapsed() < std::time::Duration::from_secs(5),
                "hp-tt-first still runs 5 s after shutdown"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    });
    // Without CPUs, the plan names are not used (the threads are not on a plan CPU).
    let mut cfg = ipc::transport::TransportConfig::default();
    cfg.name_threads_by_plan();
    assert!(cfg.thread_names.is_empty());
}

/// With several rings, each has its own `SO_REUSEPORT` listener on the one address, so new
/// connections spread over the rings: 32 connections all landing on one of two rings has a
/// chance of 2^-31 under the kernel's 4-tuple hash (and was what happened with one shared
/// listening socket: the first ring's multishot accept took nearly every connection).
#[test]
fn connections_spread_over_the_rings() {
    use ipc::server::{Call, Reply};
    use std::collections::BTreeSet;
    use std::sync::{Arc, Mutex};
    for_each_backend(|b| {
        let seen = Arc::new(Mutex::new(BTreeSet::new()));
        let mut reg = bench_registry();
        let s = seen.clone();
        reg.register(
            ipc::buffer_protocol::PROTOCOL,
            ipc::buffer_protocol::VERSION,
            "whichRing",
            move |_: &Call<'_>, reply: &mut Reply<'_, '_>| {
                let name = std::thread::current().name().unwrap_or("?").to_string();
                s.lock().unwrap().insert(name);
                reply.bytes(&[]).map_err(ipc::server::CallError::from)
            },
        );
        let srv = start(b, reg, |cfg| cfg.transport.threads = 2);
        let clients: Vec<_> = (0..32).map(|_| client(srv.local_addr())).collect();
        for c in &clients {
            c.call("whichRing", &[]).unwrap();
        }
        let seen = seen.lock().unwrap().clone();
        assert_eq!(
            seen,
            BTreeSet::from(["hp-ring-0".to_string(), "hp-ring-1".to_string()]),
            "32 connections were served by {seen:?}"
        );
        // Both rings keep serving real responses, and the address is one port.
        for c in &clients[..4] {
            get_buffer_checked(c, 200_000);
        }
        drop(clients);
        srv.shutdown();
    });
}
