//! Prints the topology and the agent and rm plans, the way `hotpath hw` will.
//!
//! `cargo run -p hw --example plan -- [--json] [--sysfs] [xeon4 | flat:N | dual:N]`
//! Without a shape argument it uses this machine (hwloc, else sysfs; `--sysfs` forces sysfs).

use hw::{Plan, Synthetic, Topology};

fn main() -> Result<(), hw::Error> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let json = args.iter().any(|a| a == "--json");
    let force_sysfs = args.iter().any(|a| a == "--sysfs");
    let shape = args.iter().find(|a| !a.starts_with("--"));
    let topo = match shape.map(String::as_str) {
        None if force_sysfs => Topology::from_sysfs(std::path::Path::new(hw::sysfs::DEFAULT_ROOT))?
            .restrict(&hw::affinity::current_cpus()?)?,
        None => Topology::detect()?,
        Some("xeon4") => Topology::synthetic(Synthetic::xeon4())?,
        Some(s) if s.starts_with("flat:") => {
            Topology::synthetic(Synthetic::flat(s[5..].parse().expect("flat:N")))?
        }
        Some(s) if s.starts_with("dual:") => {
            Topology::synthetic(Synthetic::dual_socket_smt(s[5..].parse().expect("dual:N")))?
        }
        Some(other) => panic!("unknown shape {other}"),
    };
    for (name, plan) in [
        ("agent", Plan::for_agent(&topo)),
        ("rm", Plan::for_rm(&topo)),
    ] {
        if json {
            println!("{}", hw::report_json(&topo, &plan));
        } else {
            println!("== {name} ==");
            print!("{}", hw::report_text(&topo, &plan));
        }
    }
    Ok(())
}
