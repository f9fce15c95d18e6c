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
        assert!(threads_named("hp-tt-first").is_empty());
    });
    // Without CPUs, the plan names are not used (the threads are not on a plan CPU).
    let mut cfg = ipc::transport::TransportConfig::default();
    cfg.name_threads_by_plan();
    assert!(cfg.thread_names.is_empty());
}
