//! Service-level authorization (`hadoop.security.authorization = true`), as Java's
//! `ServiceAuthorizationManager` checks each connection once its context names the protocol.
//!
//! - Each protocol has an ACL key (`security.resourcetracker.protocol.acl` for
//!   `ResourceTrackerPB`, from the daemon's policy provider); an unset key takes
//!   `security.service.authorization.default.acl` (default `*`). The key with `.blocked`
//!   appended (default: nobody; else `security.service.authorization.default.acl.blocked`) names
//!   who is refused even when the ACL allows.
//! - ACL format (Hadoop's `AccessControlList`): `users groups`, each a comma list, split at the
//!   first space; `*` alone is everyone; blank is nobody. A user is allowed when its short name
//!   is in `users`, or one of its groups is in `groups`.
//! - Groups: the user's primary and supplementary Unix groups from the name service
//!   (`getpwnam_r` + `getgrouplist`), what `ShellBasedUnixGroupsMapping` gets from `id` and
//!   `JniBasedUnixGroupsMapping` from the same calls; looked up only when an ACL lists groups
//!   and the user is not listed by name, and not cached. A user the system does not know has no
//!   groups (Java logs "No groups available" and goes on).
//! - A protocol whose Kerberos info names a client principal key (ResourceTrackerPB:
//!   `yarn.nodemanager.principal`) admits, when that key is set, only that principal (`_HOST`
//!   replaced by the client address's canonical name, a reverse lookup per connection): Java's
//!   ": this service is only accessible by …".
//! - Protocols with no ACL key registered are not checked (Java's policy providers list every
//!   protocol a daemon serves; we register only the ones we enforce). Per-protocol host lists
//!   (`.hosts`) are not implemented.
//!
//! A refusal is a FATAL `org.apache.hadoop.security.authorize.AuthorizationException`
//! "User … is not authorized for protocol …: denied by configured ACL" (Hadoop 3.5's text),
//! and the connection closes.

use std::collections::HashMap;
use std::ffi::{CStr, CString};
use std::net::IpAddr;

use conf::Configuration;
use hadoop_wire::sasl::gssapi::replace_host;
use hadoop_wire::sasl::message::AuthMethod;

/// `security.service.authorization.default.acl`.
pub const DEFAULT_ACL_KEY: &str = "security.service.authorization.default.acl";
/// The class named in refusals.
pub const AUTHORIZATION_EXCEPTION: &str =
    "org.apache.hadoop.security.authorize.AuthorizationException";

/// Hadoop's `AccessControlList`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessControlList {
    all: bool,
    users: Vec<String>,
    groups: Vec<String>,
}

fn trimmed_list(s: &str) -> Vec<String> {
    s.split(',')
        .map(str::trim)
        .filter(|x| !x.is_empty())
        .map(str::to_string)
        .collect()
}

impl AccessControlList {
    /// Parses `users groups` (`*` everyone, blank nobody).
    pub fn parse(acl: &str) -> AccessControlList {
        let mut parts = acl.splitn(2, ' ');
        let users = parts.next().unwrap_or("");
        let groups = parts.next();
        let wild = |p: &str| p.trim() == "*";
        if wild(users) || groups.is_some_and(wild) {
            return AccessControlList {
                all: true,
                users: Vec::new(),
                groups: Vec::new(),
            };
        }
        AccessControlList {
            all: false,
            users: trimmed_list(users),
            groups: groups.map(trimmed_list).unwrap_or_default(),
        }
    }

    /// Whether `user` (its short name) is allowed; `groups` is asked only when needed.
    pub fn allows(&self, user: &str, groups: &dyn Fn(&str) -> Vec<String>) -> bool {
        if self.all || self.users.iter().any(|u| u == user) {
            return true;
        }
        !self.groups.is_empty() && groups(user).iter().any(|g| self.groups.contains(g))
    }

    /// Whether it lists nobody.
    pub fn is_empty(&self) -> bool {
        !self.all && self.users.is_empty() && self.groups.is_empty()
    }
}

/// A user's groups (Hadoop's `GroupMappingServiceProvider`).
pub trait GroupsMapping: Send + Sync {
    fn groups(&self, user: &str) -> Vec<String>;
}

/// The name service's groups for a user: primary first, then supplementary (no duplicates).
#[derive(Debug, Clone, Copy, Default)]
pub struct UnixGroups;

/// Largest buffer tried for one `getpwnam_r` / `getgrgid_r` record.
const MAX_NSS_BUFFER: usize = 1 << 20;
/// Most groups read for one user.
const MAX_GROUPS: usize = 65536;

fn primary_gid(user: &CStr) -> Option<libc::gid_t> {
    let mut buf = vec![0 as libc::c_char; 1024];
    loop {
        // SAFETY: `passwd` is plain old data, all-zero is a valid value for it.
        let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
        let mut result: *mut libc::passwd = std::ptr::null_mut();
        // Only `pw_gid` is read, though the record's strings point into `buf`.
        // SAFETY: `user` is NUL-terminated; `pw`, `result`, `buf` are live and sized as passed.
        let rc = unsafe {
            libc::getpwnam_r(
                user.as_ptr(),
                &mut pw,
                buf.as_mut_ptr(),
                buf.len(),
                &mut result,
            )
        };
        if rc == libc::ERANGE && buf.len() < MAX_NSS_BUFFER {
            buf.resize(buf.len() * 4, 0);
            continue;
        }
        return (rc == 0 && !result.is_null()).then_some(pw.pw_gid);
    }
}

fn group_name(gid: libc::gid_t) -> Option<String> {
    let mut buf = vec![0 as libc::c_char; 1024];
    loop {
        // SAFETY: `group` is plain old data, all-zero is a valid value for it.
        let mut gr: libc::group = unsafe { std::mem::zeroed() };
        let mut result: *mut libc::group = std::ptr::null_mut();
        // `buf` outlives the use of `gr.gr_name`, which points into it.
        let (gr_p, buf_p, len) = (&mut gr, buf.as_mut_ptr(), buf.len());
        // SAFETY: `gr` and `result` are live locals; `buf` is writable for `len` bytes.
        let rc = unsafe { libc::getgrgid_r(gid, gr_p, buf_p, len, &mut result) };
        if rc == libc::ERANGE && buf.len() < MAX_NSS_BUFFER {
            buf.resize(buf.len() * 4, 0);
            continue;
        }
        if rc != 0 || result.is_null() || gr.gr_name.is_null() {
            return None;
        }
        // SAFETY: on success `gr_name` is a NUL-terminated string inside `buf`, alive here.
        let name = unsafe { CStr::from_ptr(gr.gr_name) };
        return Some(name.to_string_lossy().into_owned());
    }
}

impl GroupsMapping for UnixGroups {
    fn groups(&self, user: &str) -> Vec<String> {
        let Ok(c_user) = CString::new(user) else {
            return Vec::new();
        };
        let Some(primary) = primary_gid(&c_user) else {
            return Vec::new();
        };
        let mut gids: Vec<libc::gid_t> = vec![0; 64];
        loop {
            let mut n = gids.len() as libc::c_int;
            let (user_p, gids_p) = (c_user.as_ptr(), gids.as_mut_ptr());
            // SAFETY: `c_user` is NUL-terminated; `gids` has `n` entries; `n` gets the count.
            let rc = unsafe { libc::getgrouplist(user_p, primary, gids_p, &mut n) };
            if rc >= 0 {
                gids.truncate(n.max(0) as usize);
                break;
            }
            let want = (n.max(0) as usize).max(gids.len() * 2);
            if want > MAX_GROUPS {
                // as many as fit (glibc fills the array before failing)
                break;
            }
            gids.resize(want, 0);
        }
        let mut names: Vec<String> = Vec::new();
        for gid in std::iter::once(primary).chain(gids) {
            if let Some(n) = group_name(gid) {
                if !names.contains(&n) {
                    names.push(n);
                }
            }
        }
        names
    }
}

/// One enforced protocol: its name, its ACL key, and the configuration key of the only client
/// principal it admits (its `KerberosInfo.clientPrincipal`), if any.
#[derive(Debug, Clone, Copy)]
pub struct ProtocolPolicy {
    pub protocol: &'static str,
    pub acl_key: &'static str,
    pub client_principal_key: Option<&'static str>,
}

/// Who a connection is, as authorization sees it.
#[derive(Debug, Clone, Copy)]
pub struct Subject<'a> {
    /// The short name (ACLs list these).
    pub user: &'a str,
    /// Java's `ugi.getUserName()`: the principal under KERBEROS, else the user.
    pub full_name: &'a str,
    pub method: AuthMethod,
    pub peer: Option<IpAddr>,
}

struct Policy {
    acl_key: String,
    allowed: AccessControlList,
    blocked: AccessControlList,
    client_principal: Option<String>,
}

/// The ACLs of the protocols a server enforces.
pub struct ServiceAuthorization {
    /// Replaced whole by [`reload`](ServiceAuthorization::reload) (`yarn rmadmin
    /// -refreshServiceAcls`); read once per connection.
    acls: std::sync::RwLock<HashMap<String, Policy>>,
    protocols: Vec<ProtocolPolicy>,
    groups: Box<dyn GroupsMapping>,
}

impl std::fmt::Debug for ServiceAuthorization {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceAuthorization")
            .field(
                "protocols",
                &self
                    .protocols
                    .iter()
                    .map(|p| p.protocol)
                    .collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

/// Each protocol's ACLs from `conf` (unset keys: `security.service.authorization.default.acl`).
fn policies(conf: &Configuration, protocols: &[ProtocolPolicy]) -> HashMap<String, Policy> {
    let default = conf.get(DEFAULT_ACL_KEY).unwrap_or("*");
    let default_blocked = conf
        .get(&format!("{DEFAULT_ACL_KEY}.blocked"))
        .unwrap_or("");
    let mut acls = HashMap::new();
    for p in protocols {
        let key = p.acl_key;
        let allowed = AccessControlList::parse(conf.get(key).unwrap_or(default));
        let blocked = AccessControlList::parse(
            conf.get(&format!("{key}.blocked"))
                .unwrap_or(default_blocked),
        );
        let client_principal = p
            .client_principal_key
            .and_then(|k| conf.get(k))
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .map(str::to_string);
        acls.insert(
            p.protocol.to_string(),
            Policy {
                acl_key: key.to_string(),
                allowed,
                blocked,
                client_principal,
            },
        );
    }
    acls
}

impl ServiceAuthorization {
    /// The ACLs of `protocols` from `conf`, when `hadoop.security.authorization` is true;
    /// `None` when it is off (nothing checked).
    pub fn from_conf(
        conf: &Configuration,
        protocols: &[ProtocolPolicy],
        groups: Box<dyn GroupsMapping>,
    ) -> Result<Option<ServiceAuthorization>, String> {
        let on = match conf.get("hadoop.security.authorization").map(str::trim) {
            None => false,
            Some(v) => v
                .parse::<bool>()
                .map_err(|_| format!("hadoop.security.authorization: not a boolean: {v:?}"))?,
        };
        if !on {
            return Ok(None);
        }
        Ok(Some(ServiceAuthorization {
            acls: std::sync::RwLock::new(policies(conf, protocols)),
            protocols: protocols.to_vec(),
            groups,
        }))
    }

    /// Re-reads the ACLs of the same protocols from `conf` (Java's
    /// `refreshServiceAclWithLoadedConfiguration`): connections opened from now on are checked
    /// against them. `hadoop.security.authorization` itself is not re-read (Java's is not).
    pub fn reload(&self, conf: &Configuration) {
        let new = policies(conf, &self.protocols);
        *self.acls.write().unwrap_or_else(|p| p.into_inner()) = new;
    }

    /// Checks `who` for `protocol` (Java's `ServiceAuthorizationManager.authorize`). `Err` is
    /// the refusal text.
    pub fn authorize(&self, who: &Subject<'_>, protocol: &str) -> Result<(), String> {
        let acls = self.acls.read().unwrap_or_else(|p| p.into_inner());
        let Some(p) = acls.get(protocol) else {
            return Ok(());
        };
        let shown = format!("{} (auth:{})", who.full_name, who.method);
        let client_principal = match &p.client_principal {
            None => None,
            Some(c) if !c.contains("/_HOST@") => Some(c.clone()),
            Some(c) => match who.peer {
                Some(ip) => Some(replace_host(c, &crate::kerberos::canonical_host_name(ip))),
                None => {
                    return Err(format!(
                        "Can't figure out Kerberos principal name for connection from (unknown) \
                         for user={shown} protocol=interface {protocol}"
                    ))
                }
            },
        };
        let user = who.user;
        let groups = |u: &str| self.groups.groups(u);
        let cause = match client_principal {
            Some(c) if c != who.full_name => format!(": this service is only accessible by {c}"),
            _ if !p.allowed.allows(user, &groups)
                || (!p.blocked.is_empty() && p.blocked.allows(user, &groups)) =>
            {
                ": denied by configured ACL".to_string()
            }
            _ => return Ok(()),
        };
        tracing::info!(
            "authorization refused: {shown} for protocol={protocol}{cause} ({})",
            p.acl_key
        );
        Err(format!(
            "User {shown} is not authorized for protocol interface {protocol}{cause}"
        ))
    }
}

/// `hadoop.proxyuser.` (Java's `ProxyUsers` with `DefaultImpersonationProvider`): which real
/// users may act for others. For a real user `r` (its short name), `hadoop.proxyuser.r.users`
/// and `hadoop.proxyuser.r.groups` (comma lists, `*` all) say whom it may impersonate (an
/// effective user listed by name or by one of its groups), `hadoop.proxyuser.r.hosts` (`*`, IP
/// addresses, CIDR ranges, host names resolved when read) from where. A real user with neither
/// `.users` nor `.groups` may impersonate nobody; one without `.hosts`, from nowhere.
/// Re-read by [`reload`](ProxyUsers::reload) (`yarn rmadmin -refreshSuperUserGroupsConfiguration`).
pub struct ProxyUsers {
    rules: std::sync::RwLock<HashMap<String, ProxyRule>>,
    groups: Box<dyn GroupsMapping>,
}

#[derive(Debug, Clone, Default)]
struct ProxyRule {
    /// `users groups`; `None`: neither key set.
    acl: Option<AccessControlList>,
    hosts: Option<Hosts>,
}

#[derive(Debug, Clone)]
enum Hosts {
    All,
    Some(Vec<(IpAddr, u8)>),
}

impl Hosts {
    fn parse(list: &str) -> Hosts {
        let items = trimmed_list(list);
        if items.iter().any(|i| i == "*") {
            return Hosts::All;
        }
        let mut nets = Vec::new();
        for item in items {
            if let Some((ip, bits)) = item.split_once('/') {
                if let (Ok(ip), Ok(bits)) = (ip.parse::<IpAddr>(), bits.parse::<u8>()) {
                    nets.push((ip, bits));
                }
            } else if let Ok(ip) = item.parse::<IpAddr>() {
                nets.push((ip, if ip.is_ipv4() { 32 } else { 128 }));
            } else {
                use std::net::ToSocketAddrs;
                // A host name: its addresses now (Java's MachineList resolves them too).
                if let Ok(addrs) = (item.as_str(), 0).to_socket_addrs() {
                    for a in addrs {
                        let ip = a.ip();
                        nets.push((ip, if ip.is_ipv4() { 32 } else { 128 }));
                    }
                }
            }
        }
        Hosts::Some(nets)
    }

    fn includes(&self, ip: IpAddr) -> bool {
        match self {
            Hosts::All => true,
            Hosts::Some(nets) => nets.iter().any(|&(net, bits)| in_net(ip, net, bits)),
        }
    }
}

fn in_net(ip: IpAddr, net: IpAddr, bits: u8) -> bool {
    match (ip, net) {
        (IpAddr::V4(a), IpAddr::V4(n)) => {
            let bits = u32::from(bits.min(32));
            let mask = if bits == 0 {
                0
            } else {
                u32::MAX << (32 - bits)
            };
            u32::from(a) & mask == u32::from(n) & mask
        }
        (IpAddr::V6(a), IpAddr::V6(n)) => {
            let bits = u32::from(bits.min(128));
            let mask = if bits == 0 {
                0
            } else {
                u128::MAX << (128 - bits)
            };
            u128::from(a) & mask == u128::from(n) & mask
        }
        _ => false,
    }
}

/// `hadoop.proxyuser.`
pub const PROXYUSER_PREFIX: &str = "hadoop.proxyuser.";

fn proxy_rules(conf: &Configuration) -> HashMap<String, ProxyRule> {
    let mut users: HashMap<String, (Option<String>, Option<String>)> = HashMap::new();
    let mut rules: HashMap<String, ProxyRule> = HashMap::new();
    for key in conf.keys_with_prefix(PROXYUSER_PREFIX) {
        let rest = &key[PROXYUSER_PREFIX.len()..];
        let Some((user, what)) = rest.rsplit_once('.') else {
            continue;
        };
        let value = conf.get(key).unwrap_or("").to_string();
        match what {
            "users" => users.entry(user.to_string()).or_default().0 = Some(value),
            "groups" => users.entry(user.to_string()).or_default().1 = Some(value),
            "hosts" => {
                rules.entry(user.to_string()).or_default().hosts = Some(Hosts::parse(&value))
            }
            _ => {}
        }
    }
    for (user, (u, g)) in users {
        let text = format!("{} {}", u.unwrap_or_default(), g.unwrap_or_default());
        rules.entry(user).or_default().acl = Some(AccessControlList::parse(&text));
    }
    rules
}

impl std::fmt::Debug for ProxyUsers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let rules = self.rules.read().unwrap_or_else(|p| p.into_inner());
        f.debug_struct("ProxyUsers")
            .field("real_users", &rules.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl ProxyUsers {
    /// The proxy-user rules of `conf`.
    pub fn from_conf(conf: &Configuration, groups: Box<dyn GroupsMapping>) -> ProxyUsers {
        ProxyUsers {
            rules: std::sync::RwLock::new(proxy_rules(conf)),
            groups,
        }
    }

    /// Re-reads the rules from `conf`.
    pub fn reload(&self, conf: &Configuration) {
        let new = proxy_rules(conf);
        *self.rules.write().unwrap_or_else(|p| p.into_inner()) = new;
    }

    /// Whether `real` (its short name; `real_full`: its principal, as Java's messages show it)
    /// may act as `effective` from `peer`. `Err`: Java's `AuthorizationException` text.
    pub fn authorize(
        &self,
        real: &str,
        real_full: &str,
        effective: &str,
        peer: Option<IpAddr>,
    ) -> Result<(), String> {
        let rules = self.rules.read().unwrap_or_else(|p| p.into_inner());
        let rule = rules.get(real);
        let groups = |u: &str| self.groups.groups(u);
        let allowed = rule
            .and_then(|r| r.acl.as_ref())
            .is_some_and(|acl| acl.allows(effective, &groups));
        if !allowed {
            return Err(format!(
                "User: {real_full} is not allowed to impersonate {effective}"
            ));
        }
        let from = rule.and_then(|r| r.hosts.as_ref());
        match (from, peer) {
            (Some(h), Some(ip)) if h.includes(ip) => Ok(()),
            _ => Err(format!(
                "Unauthorized connection for super-user: {real_full} from IP {}",
                peer.map(|p| p.to_string()).unwrap_or_default()
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Fixed;
    impl GroupsMapping for Fixed {
        fn groups(&self, user: &str) -> Vec<String> {
            match user {
                "nm" => vec!["yarn".into(), "hadoop".into()],
                _ => vec!["users".into()],
            }
        }
    }

    fn fixed(u: &str) -> Vec<String> {
        Fixed.groups(u)
    }

    #[test]
    fn acl_format_as_hadoop() {
        let a = AccessControlList::parse("*");
        assert!(a.allows("anyone", &fixed));
        let a = AccessControlList::parse(" * ");
        assert!(a.allows("anyone", &fixed), "trimmed star");
        let a = AccessControlList::parse("");
        assert!(a.is_empty() && !a.allows("nm", &fixed), "blank is nobody");
        let a = AccessControlList::parse(" ");
        assert!(!a.allows("nm", &fixed), "a space is nobody");
        let a = AccessControlList::parse("alice,bob");
        assert!(a.allows("bob", &fixed) && !a.allows("nm", &fixed));
        // the first space ends the users: "bob" here is a group, as in Hadoop
        let a = AccessControlList::parse("alice, bob");
        assert!(!a.allows("bob", &fixed) && a.allows("alice", &fixed));
        let a = AccessControlList::parse("alice hadoop,admins");
        assert!(a.allows("nm", &fixed), "by group");
        assert!(a.allows("alice", &fixed) && !a.allows("carol", &fixed));
        let a = AccessControlList::parse(" yarn");
        assert!(
            a.allows("nm", &fixed) && !a.allows("yarn", &fixed),
            "groups only"
        );
    }

    const RT: &str = "org.apache.hadoop.yarn.server.api.ResourceTrackerPB";
    const P: [ProtocolPolicy; 1] = [ProtocolPolicy {
        protocol: RT,
        acl_key: "security.resourcetracker.protocol.acl",
        client_principal_key: Some("yarn.nodemanager.principal"),
    }];

    fn who<'a>(user: &'a str, full: &'a str) -> Subject<'a> {
        Subject {
            user,
            full_name: full,
            method: AuthMethod::Kerberos,
            peer: Some("127.0.0.1".parse().unwrap()),
        }
    }

    fn authz(c: &Configuration) -> ServiceAuthorization {
        ServiceAuthorization::from_conf(c, &P, Box::new(Fixed))
            .unwrap()
            .unwrap()
    }

    #[test]
    fn per_protocol_acls_from_conf() {
        let mut c = Configuration::new();
        assert!(ServiceAuthorization::from_conf(&c, &P, Box::new(Fixed))
            .unwrap()
            .is_none());
        c.set("hadoop.security.authorization", "true");
        assert!(
            authz(&c).authorize(&who("x", "x"), RT).is_ok(),
            "default ACL *"
        );
        c.set("security.resourcetracker.protocol.acl", "nm");
        let s = authz(&c);
        assert!(s
            .authorize(&who("nm", "nm/localhost@EXAMPLE.COM"), RT)
            .is_ok());
        let e = s
            .authorize(&who("client", "client@EXAMPLE.COM"), RT)
            .unwrap_err();
        assert_eq!(
            e,
            "User client@EXAMPLE.COM (auth:KERBEROS) is not authorized for protocol interface \
             org.apache.hadoop.yarn.server.api.ResourceTrackerPB: denied by configured ACL"
        );
        assert!(
            s.authorize(&who("client", "client"), "other.Protocol")
                .is_ok(),
            "not enforced"
        );
        c.set("security.resourcetracker.protocol.acl", "*");
        c.set("security.resourcetracker.protocol.acl.blocked", " hadoop");
        let s = authz(&c);
        assert!(
            s.authorize(&who("nm", "nm"), RT).is_err(),
            "blocked by group"
        );
        assert!(s.authorize(&who("client", "client"), RT).is_ok());
        c.set("hadoop.security.authorization", "yes");
        assert!(ServiceAuthorization::from_conf(&c, &P, Box::new(Fixed)).is_err());
    }

    #[test]
    fn the_client_principal_key_admits_only_that_principal() {
        let mut c = Configuration::new();
        c.set("hadoop.security.authorization", "true");
        c.set("yarn.nodemanager.principal", "nm/_HOST@EXAMPLE.COM");
        let s = authz(&c);
        // 127.0.0.1 is named localhost
        assert!(s
            .authorize(&who("nm", "nm/localhost@EXAMPLE.COM"), RT)
            .is_ok());
        let e = s
            .authorize(&who("client", "client@EXAMPLE.COM"), RT)
            .unwrap_err();
        assert!(
            e.ends_with(": this service is only accessible by nm/localhost@EXAMPLE.COM"),
            "{e}"
        );
        let mut no_peer = who("nm", "nm/localhost@EXAMPLE.COM");
        no_peer.peer = None;
        assert!(s.authorize(&no_peer, RT).is_err());
        c.set("yarn.nodemanager.principal", "nm/host1@EXAMPLE.COM");
        let s = authz(&c);
        assert!(s
            .authorize(&who("nm", "nm/localhost@EXAMPLE.COM"), RT)
            .is_err());
        assert!(s.authorize(&who("nm", "nm/host1@EXAMPLE.COM"), RT).is_ok());
    }

    #[test]
    fn unix_groups_of_root_and_of_nobody_known() {
        let g = UnixGroups.groups("root");
        assert_eq!(g.first().map(String::as_str), Some("root"), "{g:?}");
        assert!(UnixGroups.groups("no-such-user-hotpath").is_empty());
        assert!(UnixGroups.groups("nul\0byte").is_empty());
    }

    #[test]
    fn proxy_users_as_javas_default_impersonation_provider() {
        let mut c = Configuration::new();
        c.set("hadoop.proxyuser.oozie.users", "alice");
        c.set("hadoop.proxyuser.oozie.groups", "ops");
        c.set("hadoop.proxyuser.oozie.hosts", "127.0.0.1,10.0.0.0/8");
        c.set("hadoop.proxyuser.livy.groups", "*");
        c.set("hadoop.proxyuser.nohosts.users", "*");
        let p = ProxyUsers::from_conf(&c, Box::new(Fixed));
        let lo: Option<IpAddr> = Some("127.0.0.1".parse().unwrap());
        let ten: Option<IpAddr> = Some("10.1.2.3".parse().unwrap());
        assert!(p.authorize("oozie", "oozie/h@R", "alice", lo).is_ok());
        assert!(p.authorize("oozie", "oozie/h@R", "alice", ten).is_ok());
        assert_eq!(
            p.authorize("oozie", "oozie/h@R", "carol", lo).unwrap_err(),
            "User: oozie/h@R is not allowed to impersonate carol"
        );
        assert_eq!(
            p.authorize(
                "oozie",
                "oozie/h@R",
                "alice",
                Some("192.168.1.1".parse().unwrap())
            )
            .unwrap_err(),
            "Unauthorized connection for super-user: oozie/h@R from IP 192.168.1.1"
        );
        assert!(
            p.authorize("livy", "livy", "anyone", lo).is_err(),
            "no hosts"
        );
        assert!(p.authorize("nohosts", "nohosts", "x", lo).is_err());
        assert!(p.authorize("nobody", "nobody", "alice", lo).is_err());
        c.set("hadoop.proxyuser.livy.hosts", "*");
        p.reload(&c);
        assert!(p.authorize("livy", "livy", "anyone", lo).is_ok());
    }
}
