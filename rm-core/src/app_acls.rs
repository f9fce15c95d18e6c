//! Application ACLs (`yarn.acl.enable`), as Java's `ClientRMService.checkAccess` decides them:
//! `ApplicationACLsManager.checkAccess` or the queue's `ADMINISTER_QUEUE` ACL.
//!
//! - Off (`yarn.acl.enable=false`, the default): nothing is checked, no policy exists
//!   ([`AclPolicy::from_conf`] gives `None`) and the handlers take their old path.
//! - On, a caller (its short name: the SIMPLE user, or the Kerberos principal mapped by
//!   `auth_to_local`) has an access type (`VIEW_APP`, `MODIFY_APP`) on an application when it
//!   is an admin (`yarn.admin.acl`, default `*`, plus the RM's own user, which Java's
//!   `AdminACLsManager` always adds), the application's owner, listed in the application's ACL
//!   for that type (the submission's `ContainerLaunchContext.application_ACLs`; a type not
//!   given is Java's `DEFAULT_YARN_APP_ACL`, `" "`: nobody), or allowed to administer the
//!   application's queue.
//! - The queue term: Java asks its scheduler. Hadoop's default scheduler (Capacity) allows a
//!   user who is in the queue's `yarn.scheduler.capacity.<path>.acl_administer_queue` or any
//!   parent's; unset, root's is `*` and a leaf's `" "`. We read the same keys for
//!   `root.<queue>` and `root` with the same defaults, so with nothing set every user
//!   administers the queue and the application ACLs refuse nobody, exactly as on a Java RM; an
//!   operator restricts root's (and the leaf's) ACL as there. (Java's FifoScheduler gives
//!   every queue ACL to `*` unconditionally.)
//! - ACLs are Hadoop's `AccessControlList` ([`ipc::authorize::AccessControlList`]); groups
//!   come from the [`GroupsMapping`], asked at most once per RPC, only when an ACL lists groups
//!   and did not name the user, and never under the applications' lock ([`Caller`]).
//! - Submission (`RMAppManager`, not `checkAccess`): the queue's SUBMIT_APPLICATIONS or
//!   ADMINISTER_QUEUE ACL, leaf or root (`…acl_submit_applications`, root's default `*`, a
//!   leaf's `" "`), must allow the caller ([`AclPolicy::may_submit`]); admins have no say.
//!
//! Refusals: `forceKillApplication` and `failApplicationAttempt` answer `YarnException` wrapping Java's
//! `AccessControlException` ([`denied_message`]), `submitApplication` the same wrapping Java's
//! submission text ([`submit_denied_message`]); `getApplicationReport` and
//! `getApplications` answer the reduced report of `RMAppImpl.createAndGetApplicationReport`
//! with `allowAccess=false` ([`crate::apps::reduced_report`]); `getQueueInfo` leaves the
//! application out.

use std::cell::Cell;

use hadoop_wire::pb::hadoop::yarn::{ApplicationAccessTypeProto, ApplicationAclMapProto};
use hadoop_wire::yarn::ids::AppId;
use ipc::authorize::{AccessControlList, GroupsMapping};

/// `yarn.acl.enable` (default false).
pub const ACL_ENABLE: &str = "yarn.acl.enable";
/// `yarn.admin.acl` (default `*`).
pub const ADMIN_ACL: &str = "yarn.admin.acl";
/// Java's `YarnConfiguration.DEFAULT_YARN_ADMIN_ACL`.
pub const DEFAULT_ADMIN_ACL: &str = "*";
/// The class a refused kill names (wrapped in a `YarnException`, as `RPCUtil` does).
pub const ACCESS_CONTROL_EXCEPTION: &str = "org.apache.hadoop.security.AccessControlException";

/// The capacity scheduler's key of `queue`'s ADMINISTER_QUEUE ACL (`root` or `root.<leaf>`).
pub fn administer_queue_key(path: &str) -> String {
    format!("yarn.scheduler.capacity.{path}.acl_administer_queue")
}

/// The capacity scheduler's key of `queue`'s SUBMIT_APPLICATIONS ACL (`root` or `root.<leaf>`).
pub fn submit_applications_key(path: &str) -> String {
    format!("yarn.scheduler.capacity.{path}.acl_submit_applications")
}

/// Java's refusal of a submission (`RMAppManager`: an `AccessControlException` wrapped in a
/// `YarnException`, whose message starts with the class as here).
pub fn submit_denied_message(user: &str, app: AppId, queue: &str) -> String {
    format!(
        "{ACCESS_CONTROL_EXCEPTION}: User {user} does not have permission to submit {app} to queue {queue}"
    )
}

/// `ApplicationAccessType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AccessType {
    ViewApp,
    ModifyApp,
}

impl AccessType {
    /// The enum constant's name, as Java's messages print it.
    pub fn name(self) -> &'static str {
        match self {
            AccessType::ViewApp => "VIEW_APP",
            AccessType::ModifyApp => "MODIFY_APP",
        }
    }
}

/// Java's refusal text for `user` wanting `access` on `app` (the `AccessControlException`'s
/// message), prefixed by the class as the wrapping `YarnException`'s message is.
pub fn denied_message(user: &str, access: AccessType, app: AppId) -> String {
    format!(
        "{ACCESS_CONTROL_EXCEPTION}: User {user} cannot perform operation {} on {app}",
        access.name()
    )
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Acl {
    text: String,
    acl: AccessControlList,
}

/// An application's ACLs as it was submitted with them (`application_ACLs`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AppAcls {
    view: Option<Acl>,
    modify: Option<Acl>,
}

impl AppAcls {
    /// From the launch context's entries. As Java's record (a map filled in order): a later
    /// entry for the same type wins; an entry without a type, or with one Java does not know,
    /// is `VIEW_APP` (the proto enum's default); one without an ACL is `" "` (nobody).
    pub fn from_protos(entries: &[ApplicationAclMapProto]) -> AppAcls {
        let mut out = AppAcls::default();
        for e in entries {
            let text = e.acl().to_string();
            let acl = Some(Acl {
                acl: AccessControlList::parse(&text),
                text,
            });
            match e
                .access_type
                .and_then(|t| ApplicationAccessTypeProto::try_from(t).ok())
            {
                Some(ApplicationAccessTypeProto::AppaccessModifyApp) => out.modify = acl,
                _ => out.view = acl,
            }
        }
        out
    }

    /// The entries again (for the state store, once the launch context is dropped).
    pub fn to_protos(&self) -> Vec<ApplicationAclMapProto> {
        let entry = |t: ApplicationAccessTypeProto, a: &Option<Acl>| {
            a.as_ref().map(|a| ApplicationAclMapProto {
                access_type: Some(t as i32),
                acl: Some(a.text.clone()),
            })
        };
        entry(ApplicationAccessTypeProto::AppaccessViewApp, &self.view)
            .into_iter()
            .chain(entry(
                ApplicationAccessTypeProto::AppaccessModifyApp,
                &self.modify,
            ))
            .collect()
    }

    /// Whether none was given.
    pub fn is_empty(&self) -> bool {
        self.view.is_none() && self.modify.is_none()
    }

    fn get(&self, t: AccessType) -> Option<&AccessControlList> {
        match t {
            AccessType::ViewApp => self.view.as_ref().map(|a| &a.acl),
            AccessType::ModifyApp => self.modify.as_ref().map(|a| &a.acl),
        }
    }
}

/// Who calls. Its groups are not looked up by the checks themselves (they run under the
/// applications' lock, and a name service lookup may be slow): a check that would need them
/// answers as if the caller had none and marks the caller ([`wants_groups`](Self::wants_groups));
/// the caller then gets its groups from [`AclPolicy::resolve_groups`], outside the lock, and
/// the checks run again ([`crate::app_service`] does so).
pub struct Caller<'a> {
    pub user: &'a str,
    groups: Option<Vec<String>>,
    wanted: Cell<bool>,
}

impl<'a> Caller<'a> {
    pub fn new(user: &'a str) -> Caller<'a> {
        Caller {
            user,
            groups: None,
            wanted: Cell::new(false),
        }
    }

    /// Whether a check needed the groups, which were not looked up yet.
    pub fn wants_groups(&self) -> bool {
        self.wanted.get()
    }
}

/// The ACL settings of an RM with `yarn.acl.enable=true`.
pub struct AclPolicy {
    /// Replaced whole by [`reload`](AclPolicy::reload) (`yarn rmadmin -refreshQueues`).
    lists: std::sync::RwLock<Lists>,
    daemon_user: Option<String>,
    groups: Box<dyn GroupsMapping>,
}

/// The ACLs an [`AclPolicy`] reads from the configuration.
#[derive(Debug)]
struct Lists {
    admin: AccessControlList,
    root_admin: AccessControlList,
    /// Each known queue's own ADMINISTER_QUEUE ACL (`root.<queue>`).
    queue_admin: Vec<(String, AccessControlList)>,
    root_submit: AccessControlList,
    /// Each known queue's own SUBMIT_APPLICATIONS ACL (`root.<queue>`).
    queue_submit: Vec<(String, AccessControlList)>,
}

impl Lists {
    fn from_conf(conf: &conf::Configuration, queues: &[String]) -> Result<Lists, crate::Error> {
        let acl = |key: &str, dflt: &str| -> Result<AccessControlList, crate::Error> {
            Ok(AccessControlList::parse(conf.try_get(key)?.unwrap_or(dflt)))
        };
        let mut queue_admin = Vec::with_capacity(queues.len());
        let mut queue_submit = Vec::with_capacity(queues.len());
        for q in queues {
            let path = format!("root.{q}");
            queue_admin.push((q.clone(), acl(&administer_queue_key(&path), " ")?));
            queue_submit.push((q.clone(), acl(&submit_applications_key(&path), " ")?));
        }
        Ok(Lists {
            admin: acl(ADMIN_ACL, DEFAULT_ADMIN_ACL)?,
            root_admin: acl(&administer_queue_key("root"), "*")?,
            queue_admin,
            root_submit: acl(&submit_applications_key("root"), "*")?,
            queue_submit,
        })
    }
}

impl std::fmt::Debug for AclPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AclPolicy")
            .field("lists", &*self.lists())
            .field("daemon_user", &self.daemon_user)
            .finish_non_exhaustive()
    }
}

impl AclPolicy {
    /// The policy of `conf`, or `None` when `yarn.acl.enable` is false (or unset). `queues`
    /// are the queues submissions may name; `daemon_user` is the RM's own short name (an
    /// admin whatever `yarn.admin.acl` says, as in Java).
    pub fn from_conf(
        conf: &conf::Configuration,
        queues: &[String],
        daemon_user: Option<String>,
        groups: Box<dyn GroupsMapping>,
    ) -> Result<Option<AclPolicy>, crate::Error> {
        let on = match conf.try_get(ACL_ENABLE)? {
            None => false,
            Some(_) => conf.get_bool(ACL_ENABLE)?,
        };
        if !on {
            return Ok(None);
        }
        Ok(Some(AclPolicy {
            lists: std::sync::RwLock::new(Lists::from_conf(conf, queues)?),
            daemon_user: daemon_user.filter(|u| !u.is_empty()),
            groups,
        }))
    }

    /// Re-reads `yarn.admin.acl` and the queue ACLs of `queues` from `conf` (Java's
    /// `refreshQueues` reinitializing the scheduler; `yarn.acl.enable` itself is not re-read).
    /// A bad value leaves the ACLs as they were.
    pub fn reload(
        &self,
        conf: &conf::Configuration,
        queues: &[String],
    ) -> Result<(), crate::Error> {
        let new = Lists::from_conf(conf, queues)?;
        *self.lists.write().unwrap_or_else(|p| p.into_inner()) = new;
        Ok(())
    }

    fn lists(&self) -> std::sync::RwLockReadGuard<'_, Lists> {
        self.lists.read().unwrap_or_else(|p| p.into_inner())
    }

    fn allows(&self, acl: &AccessControlList, who: &Caller<'_>) -> bool {
        let groups = |_: &str| match &who.groups {
            Some(g) => g.clone(),
            None => {
                who.wanted.set(true);
                Vec::new()
            }
        };
        acl.allows(who.user, &groups)
    }

    /// Looks up `who`'s groups (once; call it without holding the applications' lock).
    pub fn resolve_groups(&self, who: &mut Caller<'_>) {
        if who.groups.is_none() {
            who.groups = Some(self.groups.groups(who.user));
        }
    }

    /// `AdminACLsManager.isAdmin`.
    pub fn is_admin(&self, who: &Caller<'_>) -> bool {
        self.daemon_user.as_deref() == Some(who.user) || self.allows(&self.lists().admin, who)
    }

    /// Whether `who` may administer `queue` (the leaf's ACL, then root's).
    pub fn is_queue_admin(&self, who: &Caller<'_>, queue: &str) -> bool {
        let lists = self.lists();
        let leaf = lists
            .queue_admin
            .iter()
            .find(|(q, _)| q == queue)
            .is_some_and(|(_, a)| self.allows(a, who));
        leaf || self.allows(&lists.root_admin, who)
    }

    /// Whether `who` may submit to `queue`, as `RMAppManager` asks the capacity scheduler's
    /// authorizer: SUBMIT_APPLICATIONS on the leaf or root, else ADMINISTER_QUEUE on the leaf or
    /// root. (`yarn.admin.acl` plays no part.) Java asks only for a queue its scheduler has;
    /// the caller checks that.
    pub fn may_submit(&self, who: &Caller<'_>, queue: &str) -> bool {
        let (leaf, root) = {
            let lists = self.lists();
            let leaf = lists
                .queue_submit
                .iter()
                .find(|(q, _)| q == queue)
                .is_some_and(|(_, a)| self.allows(a, who));
            (leaf, self.allows(&lists.root_submit, who))
        };
        leaf || root || self.is_queue_admin(who, queue)
    }

    /// `ClientRMService.checkAccess`: the owner, an admin, the application's ACL for `access`,
    /// or the queue's administrators.
    pub fn check(
        &self,
        who: &Caller<'_>,
        owner: &str,
        queue: &str,
        acls: &AppAcls,
        access: AccessType,
    ) -> bool {
        who.user == owner
            || self.is_admin(who)
            || acls.get(access).is_some_and(|a| self.allows(a, who))
            || self.is_queue_admin(who, queue)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    struct Fixed(Arc<AtomicUsize>);
    impl GroupsMapping for Fixed {
        fn groups(&self, user: &str) -> Vec<String> {
            self.0.fetch_add(1, Ordering::Relaxed);
            match user {
                "dave" => vec!["dave".into(), "ops".into()],
                _ => vec![user.to_string()],
            }
        }
    }

    fn policy(sets: &[(&str, &str)]) -> (Option<AclPolicy>, Arc<AtomicUsize>) {
        let mut c = conf::Configuration::new();
        for (k, v) in sets {
            c.set(k, v);
        }
        let n = Arc::new(AtomicUsize::new(0));
        let p = AclPolicy::from_conf(
            &c,
            &["default".to_string()],
            Some("yarn".into()),
            Box::new(Fixed(n.clone())),
        )
        .unwrap();
        (p, n)
    }

    fn acls(view: &str, modify: Option<&str>) -> AppAcls {
        let mut v = vec![ApplicationAclMapProto {
            access_type: Some(ApplicationAccessTypeProto::AppaccessViewApp as i32),
            acl: Some(view.into()),
        }];
        if let Some(m) = modify {
            v.push(ApplicationAclMapProto {
                access_type: Some(ApplicationAccessTypeProto::AppaccessModifyApp as i32),
                acl: Some(m.into()),
            });
        }
        AppAcls::from_protos(&v)
    }

    const LOCKED_QUEUE: (&str, &str) = ("yarn.scheduler.capacity.root.acl_administer_queue", " ");

    #[test]
    fn off_by_default_and_when_false() {
        assert!(policy(&[]).0.is_none());
        assert!(policy(&[(ACL_ENABLE, "false")]).0.is_none());
        let mut c = conf::Configuration::new();
        c.set(ACL_ENABLE, "maybe");
        assert!(AclPolicy::from_conf(&c, &[], None, Box::new(Fixed(Default::default()))).is_err());
    }

    #[test]
    fn owner_admins_and_listed_users_pass_others_do_not() {
        let (p, _) = policy(&[(ACL_ENABLE, "true"), (ADMIN_ACL, "admin"), LOCKED_QUEUE]);
        let p = p.unwrap();
        let a = acls("bob", None);
        let check = |u: &str, t| p.check(&Caller::new(u), "alice", "default", &a, t);
        assert!(check("alice", AccessType::ModifyApp));
        assert!(check("admin", AccessType::ModifyApp));
        // the RM's own user is an admin whatever yarn.admin.acl says
        assert!(check("yarn", AccessType::ModifyApp));
        assert!(check("bob", AccessType::ViewApp));
        assert!(
            !check("bob", AccessType::ModifyApp),
            "no MODIFY_APP ACL: nobody"
        );
        assert!(!check("carol", AccessType::ViewApp));
        assert!(!check("carol", AccessType::ModifyApp));
    }

    #[test]
    fn groups_are_asked_once_per_caller_and_only_when_needed() {
        let (p, n) = policy(&[(ACL_ENABLE, "true"), (ADMIN_ACL, "admin"), LOCKED_QUEUE]);
        let p = p.unwrap();
        let a = acls("bob ops", Some("bob"));
        let mut dave = Caller::new("dave");
        // no lookup inside a check: dave has no groups yet, and is marked
        assert!(!p.check(&dave, "alice", "default", &a, AccessType::ViewApp));
        assert!(dave.wants_groups());
        assert_eq!(n.load(Ordering::Relaxed), 0);
        p.resolve_groups(&mut dave);
        p.resolve_groups(&mut dave);
        assert!(p.check(&dave, "alice", "default", &a, AccessType::ViewApp));
        assert!(!p.check(&dave, "alice", "default", &a, AccessType::ModifyApp));
        assert_eq!(n.load(Ordering::Relaxed), 1);
        let bob = Caller::new("bob");
        assert!(p.check(&bob, "alice", "default", &a, AccessType::ViewApp));
        assert!(!bob.wants_groups(), "bob is listed by name");
    }

    #[test]
    fn the_queue_admin_acl_defaults_to_everyone_as_javas_root_queue() {
        let (p, _) = policy(&[(ACL_ENABLE, "true"), (ADMIN_ACL, "admin")]);
        let p = p.unwrap();
        let a = acls("bob", None);
        assert!(p.check(
            &Caller::new("carol"),
            "alice",
            "default",
            &a,
            AccessType::ModifyApp
        ));
        // a leaf ACL adds to root's: root locked, the leaf names carol
        let (p, _) = policy(&[
            (ACL_ENABLE, "true"),
            (ADMIN_ACL, "admin"),
            LOCKED_QUEUE,
            (
                "yarn.scheduler.capacity.root.default.acl_administer_queue",
                "carol",
            ),
        ]);
        let p = p.unwrap();
        assert!(p.check(
            &Caller::new("carol"),
            "alice",
            "default",
            &a,
            AccessType::ModifyApp
        ));
        assert!(!p.check(
            &Caller::new("erin"),
            "alice",
            "default",
            &a,
            AccessType::ModifyApp
        ));
    }

    #[test]
    fn admin_acl_star_makes_everyone_admin_as_javas_default() {
        let (p, _) = policy(&[(ACL_ENABLE, "true"), LOCKED_QUEUE]);
        let p = p.unwrap();
        assert!(p.check(
            &Caller::new("carol"),
            "alice",
            "default",
            &AppAcls::default(),
            AccessType::ModifyApp
        ));
    }

    #[test]
    fn app_acls_round_trip_and_later_entries_win() {
        let v = vec![
            ApplicationAclMapProto {
                access_type: Some(ApplicationAccessTypeProto::AppaccessModifyApp as i32),
                acl: Some("x".into()),
            },
            ApplicationAclMapProto {
                access_type: Some(ApplicationAccessTypeProto::AppaccessModifyApp as i32),
                acl: Some("y grp".into()),
            },
            // no type: VIEW_APP; no ACL: " "
            ApplicationAclMapProto {
                access_type: None,
                acl: None,
            },
        ];
        let a = AppAcls::from_protos(&v);
        assert_eq!(
            a.to_protos(),
            vec![
                ApplicationAclMapProto {
                    access_type: Some(ApplicationAccessTypeProto::AppaccessViewApp as i32),
                    acl: Some(" ".into()),
                },
                ApplicationAclMapProto {
                    access_type: Some(ApplicationAccessTypeProto::AppaccessModifyApp as i32),
                    acl: Some("y grp".into()),
                },
            ]
        );
        assert_eq!(AppAcls::from_protos(&a.to_protos()), a);
        assert!(AppAcls::from_protos(&[]).is_empty());
    }

    #[test]
    fn submission_needs_submit_applications_or_administer_queue_on_the_leaf_or_root() {
        // Hadoop's defaults: root's SUBMIT_APPLICATIONS is `*`, everyone submits.
        let (p, _) = policy(&[(ACL_ENABLE, "true"), LOCKED_QUEUE]);
        assert!(p.unwrap().may_submit(&Caller::new("carol"), "default"));
        let locked = [
            (ACL_ENABLE, "true"),
            (ADMIN_ACL, "admin"),
            LOCKED_QUEUE,
            ("yarn.scheduler.capacity.root.acl_submit_applications", " "),
            (
                "yarn.scheduler.capacity.root.default.acl_submit_applications",
                "alice ops",
            ),
            (
                "yarn.scheduler.capacity.root.default.acl_administer_queue",
                "bob",
            ),
        ];
        let (p, _) = policy(&locked);
        let p = p.unwrap();
        assert!(p.may_submit(&Caller::new("alice"), "default"));
        assert!(
            p.may_submit(&Caller::new("bob"), "default"),
            "a queue admin"
        );
        assert!(
            !p.may_submit(&Caller::new("admin"), "default"),
            "yarn.admin.acl is not asked"
        );
        let mut dave = Caller::new("dave");
        assert!(!p.may_submit(&dave, "default"));
        assert!(dave.wants_groups());
        p.resolve_groups(&mut dave);
        assert!(p.may_submit(&dave, "default"), "dave is in ops");
        // root's list applies to every queue
        let mut root = locked.to_vec();
        root[3].1 = "erin";
        let (p, _) = policy(&root);
        assert!(p.unwrap().may_submit(&Caller::new("erin"), "default"));
    }

    #[test]
    fn the_refusal_is_javas_text() {
        assert_eq!(
            submit_denied_message("carol", AppId::new(1700000000000, 3), "default"),
            "org.apache.hadoop.security.AccessControlException: User carol does not have \
             permission to submit application_1700000000000_0003 to queue default"
        );
        assert_eq!(
            denied_message("carol", AccessType::ModifyApp, AppId::new(1700000000000, 3)),
            "org.apache.hadoop.security.AccessControlException: User carol cannot perform \
             operation MODIFY_APP on application_1700000000000_0003"
        );
    }
}
