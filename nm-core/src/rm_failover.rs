//! Which ResourceManager to call next and how long to wait, sans-IO: Java's
//! `ConfiguredRMFailoverProxyProvider` (round-robin over `yarn.resourcemanager.ha.rm-ids` in
//! configured order, staying on an RM until it fails) driven by the retry policy of
//! `RMProxy.createRetryPolicy` under HA, `RetryPolicies.failoverOnNetworkException`
//! (production.md §1.2–§1.3):
//!
//! - a network failure (connect refused, EOF, reset, timeout; a `StandbyException`) fails over
//!   to the next rm-id; the first failover of an outage is immediate, failover `n ≥ 1` sleeps
//!   `min(base · 2^n, max) · U[0.5, 1.5)`;
//! - a success ends the outage (Java counts failovers per call; every heartbeat is a call);
//! - the budget: Java gives up after `maxFailovers` = `yarn.client.failover-max-attempts`, else
//!   `connect.max-wait / base` (30 by default) failovers. With Java's defaults (base = max =
//!   the retry interval, 30 s) each hop after the first sleeps 15–45 s, so an agent whose first
//!   failover lands on an RM still becoming active waits that long.
//!
//! **Where the agent differs, on purpose** ([`FailoverPolicy::agent_default`]): unless
//! `yarn.client.failover-sleep-base-ms` is set, the sleeps use base 100 ms and max 2 s
//! (`hotpath.agent.rm-failover.sleep-base-ms` / `…sleep-max-ms`): the same doubling and jitter,
//! so at most ~10 connection attempts per second at the start of an outage and ~0.5 per second
//! after ~5 s (one connect each: no storm), and the budget is time — the agent gives up after
//! `connect.max-wait` of failing (Java's 30 hops of 15–45 s also come to ≈ 15 min). When
//! `yarn.client.failover-sleep-base-ms` is set, Java's arithmetic and hop count apply exactly.

use std::time::Duration;

/// The retry parameters (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailoverPolicy {
    /// `yarn.client.failover-sleep-base-ms`.
    pub base: Duration,
    /// `yarn.client.failover-sleep-max-ms`.
    pub max: Duration,
    /// The most failovers in one outage (`None`: no count limit).
    pub max_failovers: Option<u32>,
    /// Give up after failing this long (`None`: never; `connect.max-wait = -1`).
    pub max_wait: Option<Duration>,
}

impl FailoverPolicy {
    /// Java's policy (`RMProxy.createRetryPolicy`, HA branch) from the connect budget
    /// (`max_wait`, `None` = -1 = forever), the retry interval and the three optional
    /// `yarn.client.failover-*` keys. `max_wait < interval` means "try once": no failover.
    pub fn java(
        max_wait: Option<Duration>,
        interval: Duration,
        base: Option<Duration>,
        max: Option<Duration>,
        max_attempts: Option<u32>,
    ) -> Self {
        let base = base.unwrap_or(interval).max(Duration::from_millis(1));
        let max = max.unwrap_or(interval);
        let max_wait = max_wait.map(|w| if w < interval { Duration::ZERO } else { w });
        let max_failovers = match (max_attempts, max_wait) {
            (Some(n), _) => Some(n),
            (None, None) => None,
            (None, Some(w)) => {
                Some(u32::try_from(w.as_millis() / base.as_millis()).unwrap_or(u32::MAX))
            }
        };
        FailoverPolicy {
            base,
            max,
            max_failovers,
            max_wait: None,
        }
    }

    /// The agent's default (see the module docs): Java's doubling and jitter from `base` to
    /// `max`, the budget `max_wait` of failing.
    pub fn agent_default(max_wait: Option<Duration>, base: Duration, max: Duration) -> Self {
        FailoverPolicy {
            base: base.max(Duration::from_millis(1)),
            max: max.max(base),
            max_failovers: None,
            max_wait,
        }
    }

    /// The sleep before failover `n` (0-based) with jitter factor `u` in [0.5, 1.5):
    /// `0` for the first, else `min(base · 2^n, max) · u` (`RetryPolicies.calculateExponentialTime`).
    pub fn sleep(&self, n: u32, u: f64) -> Duration {
        if n == 0 {
            return Duration::ZERO;
        }
        let exp = self
            .base
            .checked_mul(1u32.checked_shl(n.min(31)).unwrap_or(u32::MAX))
            .unwrap_or(self.max);
        exp.min(self.max).mul_f64(u.clamp(0.5, 1.5))
    }
}

/// What to do after a failed call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Fail over to `to` (an index into the rm-ids) after sleeping `after`.
    FailOver { to: usize, after: Duration },
    /// The budget is spent: give up (Java's NM shuts down on the ConnectException).
    GiveUp,
}

/// Round-robin over `n` RMs with the policy's sleeps (see the module docs).
#[derive(Debug, Clone)]
pub struct RmFailover {
    policy: FailoverPolicy,
    n: usize,
    current: usize,
    /// Failovers in the current outage.
    failovers: u32,
    total_failovers: u64,
    rng: u64,
}

impl RmFailover {
    /// Starts on the first rm-id (Java's `ha.id = ids[0]`); `seed` seeds the jitter.
    pub fn new(policy: FailoverPolicy, n: usize, seed: u64) -> Self {
        RmFailover {
            policy,
            n: n.max(1),
            current: 0,
            failovers: 0,
            total_failovers: 0,
            rng: seed | 1,
        }
    }

    /// The index of the RM to call.
    pub fn current(&self) -> usize {
        self.current
    }

    /// Failovers in the current outage.
    pub fn failovers(&self) -> u32 {
        self.failovers
    }

    /// Failovers since the start.
    pub fn total_failovers(&self) -> u64 {
        self.total_failovers
    }

    pub fn policy(&self) -> &FailoverPolicy {
        &self.policy
    }

    /// A call succeeded: the outage (if any) is over; the next one starts with an immediate
    /// failover again.
    pub fn on_success(&mut self) {
        self.failovers = 0;
    }

    /// A call failed with a network error (or the RM is standby) after the agent has been
    /// failing for `failing_for`: fail over, or give up.
    pub fn on_failure(&mut self, failing_for: Duration) -> Decision {
        if self
            .policy
            .max_failovers
            .is_some_and(|m| self.failovers >= m)
            || self.policy.max_wait.is_some_and(|w| failing_for >= w)
        {
            return Decision::GiveUp;
        }
        let u = self.jitter();
        let after = self.policy.sleep(self.failovers, u);
        self.failovers = self.failovers.saturating_add(1);
        self.total_failovers += 1;
        self.current = (self.current + 1) % self.n;
        Decision::FailOver {
            to: self.current,
            after,
        }
    }

    /// U[0.5, 1.5) (splitmix64).
    fn jitter(&mut self) -> f64 {
        self.rng = self.rng.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        0.5 + (z >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn java_defaults_give_thirty_failovers_of_15_to_45_s() {
        let p = FailoverPolicy::java(Some(900 * S), 30 * S, None, None, None);
        assert_eq!(p.max_failovers, Some(30));
        assert_eq!(p.sleep(0, 1.0), Duration::ZERO);
        assert_eq!(p.sleep(1, 0.5), 15 * S);
        assert_eq!(p.sleep(5, 1.4999), (30 * S).mul_f64(1.4999));
        // forever; "try once"
        assert_eq!(
            FailoverPolicy::java(None, 30 * S, None, None, None).max_failovers,
            None
        );
        assert_eq!(
            FailoverPolicy::java(Some(10 * S), 30 * S, None, None, None).max_failovers,
            Some(0)
        );
        // explicit keys win
        let p = FailoverPolicy::java(Some(8 * S), S, Some(S), Some(S), Some(3));
        assert_eq!(p.max_failovers, Some(3));
    }

    #[test]
    fn exponential_then_capped() {
        let p = FailoverPolicy::agent_default(None, Duration::from_millis(100), 2 * S);
        let ms = |n| p.sleep(n, 1.0).as_millis();
        assert_eq!(
            (1..=6).map(ms).collect::<Vec<_>>(),
            [200, 400, 800, 1600, 2000, 2000]
        );
        assert_eq!(p.sleep(1000, 1.0), 2 * S, "no overflow");
    }

    #[test]
    fn round_robin_first_immediate_then_jittered_and_reset_on_success() {
        let p = FailoverPolicy::java(Some(8 * S), S, Some(S), Some(S), None);
        let mut f = RmFailover::new(p, 3, 42);
        assert_eq!(f.current(), 0);
        assert_eq!(
            f.on_failure(Duration::ZERO),
            Decision::FailOver {
                to: 1,
                after: Duration::ZERO
            }
        );
        let mut seen = Vec::new();
        for _ in 0..7 {
            match f.on_failure(Duration::ZERO) {
                Decision::FailOver { to, after } => {
                    assert!(after >= S / 2 && after < S * 3 / 2, "{after:?}");
                    seen.push(to);
                }
                Decision::GiveUp => panic!("gave up early"),
            }
        }
        assert_eq!(seen, [2, 0, 1, 2, 0, 1, 2]);
        // 8 failovers = 8 s / 1 s: the ninth failure gives up (Java's measured 8 failovers)
        assert_eq!(f.on_failure(Duration::ZERO), Decision::GiveUp);
        f.on_success();
        assert_eq!(
            f.on_failure(Duration::ZERO),
            Decision::FailOver {
                to: 0,
                after: Duration::ZERO
            },
            "a new outage starts with an immediate failover, from where it stands"
        );
        assert_eq!(f.total_failovers(), 9);
    }

    #[test]
    fn agent_default_gives_up_by_time() {
        let p = FailoverPolicy::agent_default(Some(5 * S), Duration::from_millis(100), 2 * S);
        let mut f = RmFailover::new(p, 2, 7);
        for _ in 0..100 {
            assert!(matches!(f.on_failure(S), Decision::FailOver { .. }));
        }
        assert_eq!(f.on_failure(5 * S), Decision::GiveUp);
    }

    #[test]
    fn jitter_is_uniform_enough() {
        let mut f = RmFailover::new(FailoverPolicy::agent_default(None, S, S), 2, 1);
        let xs: Vec<f64> = (0..10_000).map(|_| f.jitter()).collect();
        assert!(xs.iter().all(|&x| (0.5..1.5).contains(&x)));
        let mean = xs.iter().sum::<f64>() / xs.len() as f64;
        assert!((mean - 1.0).abs() < 0.02, "{mean}");
    }
}
