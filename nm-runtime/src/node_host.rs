//! The host of the node's NodeId, chosen as Java's NodeManager chooses it
//! (`ContainerManagerImpl.serviceStart`, production notes §3.1):
//!
//! 1. the bind address: `yarn.nodemanager.bind-host` if set, else the host of
//!    `yarn.nodemanager.address` (default `${yarn.nodemanager.hostname}:0`, hostname default
//!    `0.0.0.0`), resolved;
//! 2. the connect address: the bound address; a wildcard (`0.0.0.0`, `::`) is replaced by
//!    the local host's address (`InetAddress.getLocalHost()`: the kernel host name resolved,
//!    IPv4 first; `localhost` is the loopback; unresolvable → `127.0.0.1`);
//! 3. with **both** `bind-host` and `yarn.nodemanager.address` set (yarn-default.xml always
//!    sets the address, so: whenever `bind-host` is set), the address's host, resolved,
//!    replaces it (a wildcard there is the local host's address again);
//! 4. the host is that IP's canonical name (`getCanonicalHostName`): its reverse lookup,
//!    kept only if the name resolves back to the same IP, else the IP literal.
//!
//! So a configured name only picks the IP; the NodeId host is what reverse DNS says (on a
//! machine whose host name maps to 127.0.0.1: `localhost`). `_HOST` plays no part (it is
//! only for Kerberos principals). The system resolver is asked through a [`Resolver`], so
//! the tests can give their own answers.

use std::net::{IpAddr, Ipv4Addr, ToSocketAddrs};

/// The name service, as the JDK asks it.
pub trait Resolver {
    /// Reverse lookup (`getnameinfo` with `NI_NAMEREQD`); `None` when there is no name.
    fn reverse(&self, ip: IpAddr) -> Option<String>;
    /// Forward lookup (`getaddrinfo`), every address.
    fn forward(&self, name: &str) -> Vec<IpAddr>;
    /// The kernel host name (`gethostname`).
    fn hostname(&self) -> Option<String>;
}

/// The system's resolver (`/etc/hosts`, DNS, as nsswitch says).
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemResolver;

impl Resolver for SystemResolver {
    fn reverse(&self, ip: IpAddr) -> Option<String> {
        let name = ipc::kerberos::canonical_host_name(ip);
        // canonical_host_name answers the IP literal when there is no name
        (name != ip.to_string()).then_some(name)
    }

    fn forward(&self, name: &str) -> Vec<IpAddr> {
        (name, 0)
            .to_socket_addrs()
            .map(|a| a.map(|s| s.ip()).collect())
            .unwrap_or_default()
    }

    fn hostname(&self) -> Option<String> {
        std::fs::read_to_string("/proc/sys/kernel/hostname")
            .ok()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
    }
}

/// The first address of `name`, IPv4 first (the JDK's default order, `preferIPv6Addresses`
/// false); an IP literal is itself.
pub fn resolve_first(r: &dyn Resolver, name: &str) -> Option<IpAddr> {
    if let Ok(ip) = name.parse::<IpAddr>() {
        return Some(ip);
    }
    let all = r.forward(name);
    all.iter()
        .find(|a| a.is_ipv4())
        .or_else(|| all.first())
        .copied()
}

/// `InetAddress.getLocalHost()` as `NetUtils.getConnectAddress` uses it (unresolvable →
/// `127.0.0.1`).
pub fn local_host_address(r: &dyn Resolver) -> IpAddr {
    let loopback = IpAddr::V4(Ipv4Addr::LOCALHOST);
    match r.hostname() {
        Some(h) if h == "localhost" => loopback,
        Some(h) => resolve_first(r, &h).unwrap_or(loopback),
        None => loopback,
    }
}

/// `InetAddress.getCanonicalHostName()`: the reverse name if it resolves back to `ip`, else
/// the IP literal.
pub fn canonical_host_name(r: &dyn Resolver, ip: IpAddr) -> String {
    match r.reverse(ip) {
        Some(name) if r.forward(&name).contains(&ip) => name,
        _ => ip.to_string(),
    }
}

/// The NodeId host for a server bound on `bound` (step 2–4 of the module docs);
/// `host_override` is the host of `yarn.nodemanager.address` when `bind-host` is set too.
pub fn node_host(
    r: &dyn Resolver,
    bound: IpAddr,
    host_override: Option<&str>,
) -> Result<String, String> {
    // buildNodeId: the override, resolved, goes through getConnectAddress too
    let ip = match host_override {
        Some(h) => resolve_first(r, h)
            .ok_or_else(|| format!("yarn.nodemanager.address host {h} does not resolve"))?,
        None => bound,
    };
    let ip = if ip.is_unspecified() {
        local_host_address(r)
    } else {
        ip
    };
    Ok(canonical_host_name(r, ip))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[derive(Default)]
    struct Fake {
        ptr: HashMap<IpAddr, String>,
        a: HashMap<String, Vec<IpAddr>>,
        hostname: Option<String>,
    }

    impl Resolver for Fake {
        fn reverse(&self, ip: IpAddr) -> Option<String> {
            self.ptr.get(&ip).cloned()
        }
        fn forward(&self, name: &str) -> Vec<IpAddr> {
            self.a.get(name).cloned().unwrap_or_default()
        }
        fn hostname(&self) -> Option<String> {
            self.hostname.clone()
        }
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn vm() -> Fake {
        // a test VM: /etc/hosts maps its name "vm" to 127.0.0.1, whose first name is
        // localhost; 10.0.0.5 has a PTR to node5.example.com, which maps back.
        let mut f = Fake {
            hostname: Some("vm".into()),
            ..Fake::default()
        };
        f.ptr.insert(ip("127.0.0.1"), "localhost".into());
        f.a.insert("localhost".into(), vec![ip("::1"), ip("127.0.0.1")]);
        f.a.insert("vm".into(), vec![ip("::1"), ip("127.0.0.1")]);
        f.ptr.insert(ip("10.0.0.5"), "node5.example.com".into());
        f.a.insert("node5.example.com".into(), vec![ip("10.0.0.5")]);
        f.a.insert("nm5".into(), vec![ip("10.0.0.5")]);
        // a PTR that does not map back
        f.ptr.insert(ip("10.0.0.6"), "liar.example.com".into());
        f.a.insert("liar.example.com".into(), vec![ip("10.9.9.9")]);
        f
    }

    #[test]
    fn the_wildcard_registers_the_canonical_name_of_the_local_host() {
        let f = vm();
        // Java on such a VM: getLocalHost() = vm/127.0.0.1, canonical = localhost
        assert_eq!(node_host(&f, ip("0.0.0.0"), None).unwrap(), "localhost");
        let mut g = vm();
        g.hostname = Some("localhost".into());
        assert_eq!(node_host(&g, ip("0.0.0.0"), None).unwrap(), "localhost");
        // an unresolvable host name: 127.0.0.1
        let mut u = vm();
        u.hostname = Some("nowhere".into());
        assert_eq!(local_host_address(&u), ip("127.0.0.1"));
    }

    #[test]
    fn a_bound_address_registers_its_reverse_name_or_its_literal() {
        let f = vm();
        assert_eq!(
            node_host(&f, ip("10.0.0.5"), None).unwrap(),
            "node5.example.com"
        );
        // no PTR: the IP literal (Java measured 127.0.0.2 → "127.0.0.2")
        assert_eq!(node_host(&f, ip("127.0.0.2"), None).unwrap(), "127.0.0.2");
        // a PTR whose name does not resolve back: the literal
        assert_eq!(node_host(&f, ip("10.0.0.6"), None).unwrap(), "10.0.0.6");
    }

    #[test]
    fn with_bind_host_the_address_host_picks_the_ip() {
        let f = vm();
        // bind-host 0.0.0.0, yarn.nodemanager.address nm5:8041 → canonical of 10.0.0.5
        assert_eq!(
            node_host(&f, ip("0.0.0.0"), Some("nm5")).unwrap(),
            "node5.example.com"
        );
        // bind-host set, the address left at its default 0.0.0.0: the local host
        assert_eq!(
            node_host(&f, ip("10.0.0.5"), Some("0.0.0.0")).unwrap(),
            "localhost"
        );
        assert!(node_host(&f, ip("0.0.0.0"), Some("nowhere"))
            .unwrap_err()
            .contains("nowhere"));
        assert_eq!(
            resolve_first(&f, "localhost"),
            Some(ip("127.0.0.1")),
            "IPv4 first"
        );
    }
}
