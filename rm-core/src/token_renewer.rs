//! Applications' delegation tokens kept alive by the RM: Java's `DelegationTokenRenewer`.
//!
//! On a secure cluster (the caller decides: Java does this only with security on) each
//! submission's `tokens` (the AM launch context's credentials) are handed to
//! [`DelegationTokenRenewer::add_application`] before the application is accepted:
//!
//! - Each token of a kind the [`TokenRenewal`] manages (HDFS delegation tokens) is renewed at
//!   once, with the RM's own Kerberos login. A token that cannot be renewed fails the
//!   application with Java's diagnostics, `Failed to renew token: Kind: …, Service: …, Ident:
//!   …` ([`renew_failure`]). Tokens of other kinds are left alone (Java's unmanaged tokens).
//! - Each renewed token is renewed again at 90 % of the time it had left (Java's `renewIn =
//!   expiration - expiresIn / 10`), for as long as the NameNode extends it: a failed renewal
//!   is logged and the token is renewed no more (Java's `RenewalTimerTask`), as is one whose
//!   time is already up.
//! - When the application ends, its tokens are cancelled after
//!   `yarn.resourcemanager.delayed.delegation-token.removal-interval-ms` (30 s, Java's delay
//!   for log aggregation), unless the submission said `cancel_tokens_when_complete = false`
//!   (MapReduce's `mapreduce.job.complete.cancel.delegation.tokens=false`) or another running
//!   application holds the same token. An application's end is found by polling
//!   [`Apps`] every second (Java gets an event).
//!
//! Differences from Java: the renewal at submission is synchronous in the client port's
//! handler (Java's runs on a thread pool and rejects the application afterwards); the RM's own
//! tokens (`yarn.resourcemanager.proxy-user-privileges`, `tokensConf`) are not handled.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use hadoop_wire::token::{Credentials, Token};
use hadoop_wire::yarn::ids::AppId;

use crate::apps::Apps;

/// `yarn.resourcemanager.delayed.delegation-token.removal-interval-ms`.
pub const REMOVAL_DELAY_KEY: &str =
    "yarn.resourcemanager.delayed.delegation-token.removal-interval-ms";
/// Its default.
pub const DEFAULT_REMOVAL_DELAY_MS: u64 = 30_000;

/// Renews and cancels tokens of the kinds it manages (the RM's HDFS client, logged in as the
/// RM).
pub trait TokenRenewal: Send + Sync {
    /// Whether tokens of `kind` are renewed (Java's `Token.isManaged`).
    fn manages(&self, kind: &str) -> bool;
    /// Renews `token`: its new expiry time, ms since the epoch; `Err`: why not (the remote
    /// exception's text).
    fn renew(&self, token: &Token) -> Result<i64, String>;
    /// Cancels `token`.
    fn cancel(&self, token: &Token) -> Result<(), String>;
    /// How Java's `Token.toString` shows `token`'s identifier.
    fn describe(&self, token: &Token) -> String;
}

/// Java's diagnostics for an application whose `token` could not be renewed at submission
/// (the `IOException`'s message, without its cause; the cause is logged).
pub fn renew_failure(renewal: &dyn TokenRenewal, token: &Token, cause: &str) -> String {
    let text = format!(
        "Failed to renew token: Kind: {}, Service: {}, Ident: {}",
        token.kind,
        token.service,
        renewal.describe(token)
    );
    tracing::warn!("{text}: {cause}");
    text
}

/// One token being kept alive.
struct Tracked {
    token: Token,
    /// When to renew next (ms since the epoch); `None`: no more renewals.
    due: Option<i64>,
    /// The applications holding it, and whether each wants it cancelled at its end.
    apps: BTreeMap<AppId, bool>,
}

#[derive(Default)]
struct State {
    /// By (kind, service, identifier).
    tokens: BTreeMap<(String, String, Vec<u8>), Tracked>,
    /// Applications ended, and when their tokens may go.
    ending: BTreeMap<AppId, i64>,
    /// Applications seen among the RM's (their tokens are renewed before they are accepted,
    /// so one not yet seen is being submitted, not gone).
    seen: std::collections::BTreeSet<AppId>,
    stop: bool,
}

/// The renewer: its state and its thread.
pub struct DelegationTokenRenewer {
    renewal: Arc<dyn TokenRenewal>,
    state: Arc<(Mutex<State>, Condvar)>,
    removal_delay_ms: i64,
    clock: fn() -> i64,
    thread: Mutex<Option<JoinHandle<()>>>,
    running: AtomicBool,
}

fn lock(m: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// When Java renews a token expiring at `expires` seen at `now`: at 90 % of the time left;
/// `None` when it has expired.
pub fn renew_at(expires: i64, now: i64) -> Option<i64> {
    let left = expires - now;
    (left > 0).then(|| expires - left / 10)
}

impl DelegationTokenRenewer {
    /// A renewer using `renewal`, cancelling `removal_delay_ms` after an application's end,
    /// reading the time from `clock` (ms since the epoch).
    pub fn new(
        renewal: Arc<dyn TokenRenewal>,
        removal_delay_ms: u64,
        clock: fn() -> i64,
    ) -> Arc<DelegationTokenRenewer> {
        Arc::new(DelegationTokenRenewer {
            renewal,
            state: Arc::new((Mutex::new(State::default()), Condvar::new())),
            removal_delay_ms: i64::try_from(removal_delay_ms).unwrap_or(i64::MAX),
            clock,
            thread: Mutex::new(None),
            running: AtomicBool::new(false),
        })
    }

    /// Starts the thread that renews when due and cancels after applications end (their state
    /// read from `apps` once a second).
    pub fn start(self: &Arc<Self>, apps: Arc<Mutex<Apps>>) -> std::io::Result<()> {
        if self.running.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        let me = self.clone();
        let h = std::thread::Builder::new()
            .name("hp-rm-dt-renew".into())
            .spawn(move || me.run(&apps))?;
        *self.thread.lock().unwrap_or_else(|p| p.into_inner()) = Some(h);
        Ok(())
    }

    /// A submission's tokens (`credentials`: the launch context's `tokens` bytes): each managed
    /// one renewed now and scheduled. `Err`: Java's diagnostics for the first that could not
    /// be renewed (the application must fail); nothing is kept then. No tokens (empty bytes,
    /// what a submission without `tokens` gives): nothing to do.
    pub fn add_application(
        &self,
        app: AppId,
        credentials: &[u8],
        cancel_at_end: bool,
    ) -> Result<usize, String> {
        if credentials.is_empty() {
            return Ok(0);
        }
        let creds = Credentials::read(credentials).map_err(|e| format!("bad tokens: {e}"))?;
        let mine: Vec<Token> = creds
            .tokens
            .into_iter()
            .map(|(_, t)| t)
            .filter(|t| self.renewal.manages(&t.kind))
            .collect();
        let mut renewed = Vec::with_capacity(mine.len());
        for t in mine {
            let expires = self
                .renewal
                .renew(&t)
                .map_err(|e| renew_failure(&*self.renewal, &t, &e))?;
            renewed.push((t, expires));
        }
        let now = (self.clock)();
        let n = renewed.len();
        let (m, cv) = &*self.state;
        let mut s = lock(m);
        for (t, expires) in renewed {
            let key = (t.kind.clone(), t.service.clone(), t.identifier.clone());
            let e = s.tokens.entry(key).or_insert_with(|| Tracked {
                token: t,
                due: None,
                apps: BTreeMap::new(),
            });
            e.due = renew_at(expires, now);
            e.apps.insert(app, cancel_at_end);
            tracing::info!(
                "application {app}: token {} renewed, expires at {expires}, next renewal at {:?}",
                self.renewal.describe(&e.token),
                e.due
            );
        }
        cv.notify_all();
        Ok(n)
    }

    /// `app` was never accepted (its submission was refused after its tokens were renewed):
    /// it holds its tokens no more, and they are not cancelled for it.
    pub fn forget_application(&self, app: AppId) {
        let mut s = lock(&self.state.0);
        s.seen.remove(&app);
        for t in s.tokens.values_mut() {
            t.apps.remove(&app);
        }
        s.tokens.retain(|_, t| !t.apps.is_empty());
    }

    /// `app` ended: its tokens go after the removal delay.
    pub fn application_finished(&self, app: AppId) {
        let (m, cv) = &*self.state;
        let mut s = lock(m);
        let at = (self.clock)().saturating_add(self.removal_delay_ms);
        s.ending.entry(app).or_insert(at);
        cv.notify_all();
    }

    /// The tokens kept alive now: (kind, service, next renewal).
    pub fn tracked(&self) -> Vec<(String, String, Option<i64>)> {
        lock(&self.state.0)
            .tokens
            .values()
            .map(|t| (t.token.kind.clone(), t.token.service.clone(), t.due))
            .collect()
    }

    /// One pass: renew what is due, drop (and maybe cancel) what ended applications held.
    /// Returns when the next renewal is due.
    pub fn tick(&self) -> Option<i64> {
        let now = (self.clock)();
        let (due, gone) = {
            let mut s = lock(&self.state.0);
            let due: Vec<(String, String, Vec<u8>)> = s
                .tokens
                .iter()
                .filter(|(_, t)| t.due.is_some_and(|d| d <= now))
                .map(|(k, _)| k.clone())
                .collect();
            let ended: Vec<AppId> = s
                .ending
                .iter()
                .filter(|(_, &at)| at <= now)
                .map(|(a, _)| *a)
                .collect();
            let mut gone = Vec::new();
            for a in ended {
                s.ending.remove(&a);
                s.seen.remove(&a);
                let keys: Vec<_> = s.tokens.keys().cloned().collect();
                for k in keys {
                    let Some(t) = s.tokens.get_mut(&k) else {
                        continue;
                    };
                    let Some(cancel) = t.apps.remove(&a) else {
                        continue;
                    };
                    if t.apps.is_empty() {
                        let t = s.tokens.remove(&k).expect("present");
                        gone.push((t.token, cancel));
                    }
                }
            }
            (
                due.into_iter()
                    .filter_map(|k| s.tokens.get(&k).map(|t| (k, t.token.clone())))
                    .collect::<Vec<_>>(),
                gone,
            )
        };
        for (token, cancel) in gone {
            let shown = self.renewal.describe(&token);
            if !cancel {
                tracing::info!("token {shown}: its applications ended; not cancelled (as asked)");
                continue;
            }
            match self.renewal.cancel(&token) {
                Ok(()) => tracing::info!("token {shown}: its applications ended; cancelled"),
                Err(e) => tracing::warn!("token {shown}: cancel failed: {e}"),
            }
        }
        for (k, token) in due {
            let shown = self.renewal.describe(&token);
            let next = match self.renewal.renew(&token) {
                Ok(expires) => {
                    let next = renew_at(expires, (self.clock)());
                    tracing::info!("token {shown} renewed, expires at {expires}, next at {next:?}");
                    next
                }
                Err(e) => {
                    tracing::warn!("token {shown}: renewal failed, not renewed again: {e}");
                    None
                }
            };
            if let Some(t) = lock(&self.state.0).tokens.get_mut(&k) {
                t.due = next;
            }
        }
        lock(&self.state.0)
            .tokens
            .values()
            .filter_map(|t| t.due)
            .min()
    }

    fn run(&self, apps: &Mutex<Apps>) {
        loop {
            // Ended applications (their tokens' holders), then what is due.
            let held: Vec<AppId> = {
                let s = lock(&self.state.0);
                let mut v: Vec<AppId> = s
                    .tokens
                    .values()
                    .flat_map(|t| t.apps.keys().copied())
                    .filter(|a| !s.ending.contains_key(a))
                    .collect();
                v.dedup();
                v
            };
            if !held.is_empty() {
                let (present, ended): (Vec<AppId>, Vec<AppId>) = {
                    let a = apps.lock().unwrap_or_else(|p| p.into_inner());
                    let seen = lock(&self.state.0).seen.clone();
                    let present = held.iter().copied().filter(|id| a.app(*id).is_some());
                    let ended = held.iter().copied().filter(|id| match a.app(*id) {
                        Some(x) => x.state.is_final(),
                        None => seen.contains(id),
                    });
                    (present.collect(), ended.collect())
                };
                lock(&self.state.0).seen.extend(present);
                for id in ended {
                    self.application_finished(id);
                }
            }
            let next = self.tick();
            let (m, cv) = &*self.state;
            let s = lock(m);
            if s.stop {
                return;
            }
            let now = (self.clock)();
            let wait = next
                .map(|n| n.saturating_sub(now).clamp(0, 1000))
                .unwrap_or(1000);
            let (s, _) = cv
                .wait_timeout(s, Duration::from_millis(wait as u64))
                .unwrap_or_else(|p| p.into_inner());
            if s.stop {
                return;
            }
        }
    }

    /// Stops the thread (tokens are neither renewed nor cancelled any more).
    pub fn shutdown(&self) {
        let (m, cv) = &*self.state;
        lock(m).stop = true;
        cv.notify_all();
        if let Some(h) = self.thread.lock().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = h.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hadoop_wire::token::credentials::Format;
    use std::sync::atomic::AtomicI64;

    static NOW: AtomicI64 = AtomicI64::new(1_000_000);

    fn now() -> i64 {
        NOW.load(Ordering::SeqCst)
    }

    /// A NameNode's answers: renewals extend by `period` up to `max`; `refused` kinds fail.
    #[derive(Default)]
    struct Nn {
        period: i64,
        renewals: Mutex<Vec<i64>>,
        cancels: Mutex<Vec<String>>,
    }

    impl TokenRenewal for Nn {
        fn manages(&self, kind: &str) -> bool {
            kind == "HDFS_DELEGATION_TOKEN"
        }
        fn renew(&self, t: &Token) -> Result<i64, String> {
            if t.service == "refuses" {
                return Err("org.apache.hadoop.security.AccessControlException: yarn tries to renew a token with renewer someone".into());
            }
            self.renewals.lock().unwrap().push(now());
            Ok(now() + self.period)
        }
        fn cancel(&self, t: &Token) -> Result<(), String> {
            self.cancels.lock().unwrap().push(t.service.clone());
            Ok(())
        }
        fn describe(&self, t: &Token) -> String {
            format!("(token for {})", t.service)
        }
    }

    fn creds(services: &[(&str, &str)]) -> Vec<u8> {
        Credentials {
            tokens: services
                .iter()
                .map(|(kind, svc)| {
                    (
                        svc.to_string(),
                        Token {
                            identifier: svc.as_bytes().to_vec(),
                            password: vec![1],
                            kind: kind.to_string(),
                            service: svc.to_string(),
                        },
                    )
                })
                .collect(),
            secrets: Vec::new(),
        }
        .write(Format::Writable)
    }

    fn app(n: i32) -> AppId {
        AppId {
            cluster_timestamp: 1,
            id: n,
        }
    }

    #[test]
    fn renewed_at_submission_then_at_ninety_percent_and_cancelled_after_the_end() {
        let nn = Arc::new(Nn {
            period: 10_000,
            ..Nn::default()
        });
        let r = DelegationTokenRenewer::new(nn.clone(), 500, now);
        let n = r
            .add_application(
                app(1),
                &creds(&[("HDFS_DELEGATION_TOKEN", "nn:8020"), ("OTHER", "x")]),
                true,
            )
            .unwrap();
        assert_eq!(n, 1, "only the managed kind");
        assert_eq!(nn.renewals.lock().unwrap().len(), 1);
        // due at 90 % of the 10 s left
        assert_eq!(r.tracked()[0].2, Some(now() + 9_000));
        assert_eq!(r.tick(), Some(now() + 9_000), "nothing due yet");
        NOW.fetch_add(9_000, Ordering::SeqCst);
        r.tick();
        assert_eq!(nn.renewals.lock().unwrap().len(), 2);
        assert_eq!(r.tracked()[0].2, Some(now() + 9_000));
        // The same token in a second application that keeps it: not cancelled while app 2 runs.
        r.add_application(
            app(2),
            &creds(&[("HDFS_DELEGATION_TOKEN", "nn:8020")]),
            false,
        )
        .unwrap();
        r.application_finished(app(1));
        NOW.fetch_add(500, Ordering::SeqCst);
        r.tick();
        assert!(
            nn.cancels.lock().unwrap().is_empty(),
            "app 2 still holds it"
        );
        assert_eq!(r.tracked().len(), 1);
        r.application_finished(app(2));
        NOW.fetch_add(499, Ordering::SeqCst);
        r.tick();
        assert_eq!(r.tracked().len(), 1, "the removal delay");
        NOW.fetch_add(1, Ordering::SeqCst);
        r.tick();
        assert!(r.tracked().is_empty());
        assert!(
            nn.cancels.lock().unwrap().is_empty(),
            "the last holder asked not to cancel"
        );
    }

    #[test]
    fn an_unrenewable_token_fails_the_submission_and_ended_apps_cancel() {
        let nn = Arc::new(Nn {
            period: 60_000,
            ..Nn::default()
        });
        let r = DelegationTokenRenewer::new(nn.clone(), 0, now);
        let e = r
            .add_application(
                app(3),
                &creds(&[("HDFS_DELEGATION_TOKEN", "refuses")]),
                true,
            )
            .unwrap_err();
        assert_eq!(
            e,
            "Failed to renew token: Kind: HDFS_DELEGATION_TOKEN, Service: refuses, Ident: \
             (token for refuses)"
        );
        assert!(r.tracked().is_empty());
        r.add_application(app(4), &creds(&[("HDFS_DELEGATION_TOKEN", "nn2")]), true)
            .unwrap();
        r.application_finished(app(4));
        r.tick();
        assert_eq!(*nn.cancels.lock().unwrap(), vec!["nn2".to_string()]);
        assert_eq!(renew_at(100, 200), None, "expired: not renewed");
        assert_eq!(renew_at(1_100, 100), Some(1_000));
    }
}
