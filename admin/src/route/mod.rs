//! Route strategies: which single executor of a group receives a trigger, XXL-JOB style.
//!
//! The caller passes the group's online addresses sorted ascending (the order broadcast uses for
//! shard indexes). ROUND, LEAST_FREQUENTLY_USED and LEAST_RECENTLY_USED keep per-job state in a
//! [`Router`], per admin process as in XXL-JOB, and forget it every 24 hours. FAILOVER and
//! BUSYOVER probe executors through a closure the caller supplies, so this module does no I/O.
//!
//! An `avoid` set (addresses whose dispatch failed recently) narrows every single-target strategy
//! to the other executors, as long as at least one other executor exists.

mod ring;
mod strategy;

pub use strategy::{RouteStrategy, UnknownRouteStrategy};

use std::borrow::Borrow;
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::future::Future;
use std::hash::Hash;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use ring::Ring;

use crate::note::{Message, Note, NoteKind};

/// How long ROUND / LFU / LRU state lives before it is dropped, as in XXL-JOB.
const STATE_LIFETIME: Duration = Duration::from_secs(24 * 60 * 60);
/// ROUND and LFU counters restart (at a random value) beyond this, as in XXL-JOB.
const COUNTER_LIMIT: u32 = 1_000_000;
/// ROUND starts each job at a random count below this, so jobs do not all begin on one executor.
const ROUND_START_RANGE: u32 = 100;
/// Cached rings; beyond this the cache is dropped and rebuilt on demand.
const RING_CACHE_LIMIT: usize = 1024;

/// The executor a strategy chose.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteChoice {
    /// The chosen address.
    pub address: String,
    /// For FAILOVER / BUSYOVER, the probe log (one line per executor asked); `None` otherwise.
    pub message: Option<String>,
}

/// Why no executor was chosen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RouteError {
    /// The group has no online executor.
    NoExecutors,
    /// SHARDING_BROADCAST sends to every executor; the dispatcher fans out itself.
    Broadcast,
    /// FAILOVER / BUSYOVER need probes: call [`Router::choose_probed`].
    NeedsProbe(RouteStrategy),
    /// Every probe failed; the log says what each executor answered.
    ProbesFailed(String),
}

impl fmt::Display for RouteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RouteError::Broadcast => {
                f.write_str("SHARDING_BROADCAST dispatches to every executor, not to one")
            }
            RouteError::NeedsProbe(s) => write!(f, "{s} needs executor probes to choose"),
            // Those a fire keeps as its message: their text is their note's.
            RouteError::NoExecutors | RouteError::ProbesFailed(_) => {
                Message::from(self.clone()).fmt(f)
            }
        }
    }
}

impl From<RouteError> for Message {
    fn from(e: RouteError) -> Message {
        match e {
            RouteError::NoExecutors => NoteKind::NoExecutor.into(),
            RouteError::ProbesFailed(log) => {
                Note::new(NoteKind::ProbesFailed).with("log", log).into()
            }
            // Never a fire's message: the dispatcher asks for neither of these.
            other => Message::words(other.to_string()),
        }
    }
}

impl std::error::Error for RouteError {}

/// Per-job routing state (ROUND counters, LFU counts, LRU order) behind one short-held lock.
///
/// The lock is a `std::sync::Mutex`: every critical section is a few map operations and none
/// spans an `.await`, so an async mutex would only add cost.
pub struct Router {
    state: Mutex<State>,
    rings: Mutex<HashMap<Vec<String>, Arc<Ring>>>,
}

struct State {
    rng: StdRng,
    /// When the state is next dropped; `None` before first use.
    expires: Option<Instant>,
    round: HashMap<i64, u32>,
    lfu: HashMap<i64, HashMap<String, u32>>,
    /// Addresses of a job, least recently used first.
    lru: HashMap<i64, Vec<String>>,
}

impl fmt::Debug for Router {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Router").finish_non_exhaustive()
    }
}

impl Default for Router {
    fn default() -> Self {
        Self::new()
    }
}

impl Router {
    /// A router whose random starts come from the operating system.
    pub fn new() -> Self {
        Self::with_rng(StdRng::from_entropy())
    }

    /// A router with reproducible random starts, for tests and simulations.
    pub fn seeded(seed: u64) -> Self {
        Self::with_rng(StdRng::seed_from_u64(seed))
    }

    fn with_rng(rng: StdRng) -> Self {
        Router {
            state: Mutex::new(State {
                rng,
                expires: None,
                round: HashMap::new(),
                lfu: HashMap::new(),
                lru: HashMap::new(),
            }),
            rings: Mutex::new(HashMap::new()),
        }
    }

    /// Chooses one executor for a trigger of `job_id` with a strategy that needs no probe.
    ///
    /// `addresses` are the online executors, sorted ascending; `avoid` are addresses to skip
    /// while another executor exists. An empty group gives [`RouteError::NoExecutors`]; otherwise
    /// FAILOVER and BUSYOVER give [`RouteError::NeedsProbe`] and SHARDING_BROADCAST gives
    /// [`RouteError::Broadcast`].
    pub fn choose<A, S>(
        &self,
        strategy: RouteStrategy,
        job_id: i64,
        addresses: &[A],
        avoid: &HashSet<S>,
    ) -> Result<RouteChoice, RouteError>
    where
        A: AsRef<str>,
        S: Borrow<str> + Hash + Eq,
    {
        self.choose_at(strategy, job_id, addresses, avoid, Instant::now())
    }

    /// Like [`Router::choose`], and for FAILOVER / BUSYOVER asks `probe` about each candidate in
    /// address order (the caller's closure calls `/beat` or `/idleBeat`). The first `Ok` wins and
    /// the probe log becomes the choice's message; if every probe fails, the error carries the log.
    pub async fn choose_probed<A, S, P, Fut>(
        &self,
        strategy: RouteStrategy,
        job_id: i64,
        addresses: &[A],
        avoid: &HashSet<S>,
        probe: P,
    ) -> Result<RouteChoice, RouteError>
    where
        A: AsRef<str>,
        S: Borrow<str> + Hash + Eq,
        P: Fn(&str) -> Fut,
        Fut: Future<Output = Result<(), String>>,
    {
        if !strategy.needs_probe() {
            return self.choose(strategy, job_id, addresses, avoid);
        }
        let candidates = candidates(addresses, avoid)?;
        let what = match strategy {
            RouteStrategy::Busyover => "idleBeat",
            _ => "beat",
        };
        let mut log = Vec::with_capacity(candidates.len());
        for address in candidates {
            match probe(address).await {
                Ok(()) => {
                    log.push(format!("{what} {address}: ok"));
                    return Ok(RouteChoice {
                        address: address.to_string(),
                        message: Some(log.join("\n")),
                    });
                }
                Err(reason) => log.push(format!("{what} {address}: {reason}")),
            }
        }
        Err(RouteError::ProbesFailed(log.join("\n")))
    }

    fn choose_at<A, S>(
        &self,
        strategy: RouteStrategy,
        job_id: i64,
        addresses: &[A],
        avoid: &HashSet<S>,
        now: Instant,
    ) -> Result<RouteChoice, RouteError>
    where
        A: AsRef<str>,
        S: Borrow<str> + Hash + Eq,
    {
        let candidates = candidates(addresses, avoid)?;
        let chosen = match strategy {
            RouteStrategy::ShardingBroadcast => return Err(RouteError::Broadcast),
            RouteStrategy::Failover | RouteStrategy::Busyover => {
                return Err(RouteError::NeedsProbe(strategy))
            }
            RouteStrategy::First => candidates[0],
            RouteStrategy::Last => candidates[candidates.len() - 1],
            RouteStrategy::Random => {
                let i = self.lock_state(now).rng.gen_range(0..candidates.len());
                candidates[i]
            }
            RouteStrategy::ConsistentHash => {
                let ring = self.ring(&candidates);
                // A ring over a non-empty list is never empty.
                candidates[ring.owner(job_id).unwrap_or(0)]
            }
            RouteStrategy::Round => self.lock_state(now).round(job_id, &candidates),
            RouteStrategy::LeastFrequentlyUsed => {
                self.lock_state(now).lfu(job_id, addresses, &candidates)
            }
            RouteStrategy::LeastRecentlyUsed => {
                self.lock_state(now).lru(job_id, addresses, &candidates)
            }
        };
        Ok(RouteChoice {
            address: chosen.to_string(),
            message: None,
        })
    }

    /// The state, dropped first if its 24 hours are over. A poisoned lock is taken over: the
    /// state is only counters, and a half-updated counter is harmless.
    fn lock_state(&self, now: Instant) -> MutexGuard<'_, State> {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if state.expires.is_none_or(|at| now > at) {
            state.round.clear();
            state.lfu.clear();
            state.lru.clear();
            state.expires = Some(now + STATE_LIFETIME);
        }
        state
    }

    /// The ring of `candidates`, built outside the lock on a cache miss.
    fn ring(&self, candidates: &[&str]) -> Arc<Ring> {
        let key: Vec<String> = candidates.iter().map(|a| a.to_string()).collect();
        if let Some(ring) = self
            .rings
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
        {
            return Arc::clone(ring);
        }
        let ring = Arc::new(Ring::new(candidates));
        let mut rings = self.rings.lock().unwrap_or_else(|e| e.into_inner());
        if rings.len() >= RING_CACHE_LIMIT {
            rings.clear();
        }
        rings.insert(key, Arc::clone(&ring));
        ring
    }
}

impl State {
    /// XXL-JOB's ROUND: the first trigger of a job starts at a random count in `0..100`, later
    /// ones add one; the executor is `count % candidates`.
    fn round<'a>(&mut self, job_id: i64, candidates: &[&'a str]) -> &'a str {
        let count = match self.round.get(&job_id) {
            Some(&c) if c <= COUNTER_LIMIT => c + 1,
            _ => self.rng.gen_range(0..ROUND_START_RANGE),
        };
        self.round.insert(job_id, count);
        candidates[count as usize % candidates.len()]
    }

    /// XXL-JOB's LEAST_FREQUENTLY_USED: counts per (job, address); a new address (or one past the
    /// counter limit) starts at a random count below the group size so a fresh executor does not
    /// take every trigger; gone addresses are dropped. Ties go to the lowest address (XXL-JOB
    /// leaves them to `HashMap` order).
    fn lfu<'a, A: AsRef<str>>(
        &mut self,
        job_id: i64,
        addresses: &[A],
        candidates: &[&'a str],
    ) -> &'a str {
        let State { rng, lfu, .. } = self;
        let counts = lfu.entry(job_id).or_default();
        let online: HashSet<&str> = addresses.iter().map(AsRef::as_ref).collect();
        counts.retain(|address, _| online.contains(address.as_str()));
        let start_range = u32::try_from(addresses.len()).unwrap_or(u32::MAX);
        // In address order, so a seeded router draws the same starts on every run.
        for address in addresses {
            let address = address.as_ref();
            match counts.get(address) {
                Some(&c) if c <= COUNTER_LIMIT => {}
                _ => {
                    counts.insert(address.to_string(), rng.gen_range(0..start_range));
                }
            }
        }
        // min_by_key keeps the first of equal minimums: the lowest address.
        let chosen = candidates
            .iter()
            .copied()
            .min_by_key(|a| counts.get(*a).copied().unwrap_or(0))
            .unwrap_or(candidates[0]);
        if let Some(c) = counts.get_mut(chosen) {
            *c += 1;
        }
        chosen
    }

    /// XXL-JOB's LEAST_RECENTLY_USED: addresses in access order, new ones appended in address
    /// order, gone ones dropped; the eldest candidate is chosen and moved to the back.
    fn lru<'a, A: AsRef<str>>(
        &mut self,
        job_id: i64,
        addresses: &[A],
        candidates: &[&'a str],
    ) -> &'a str {
        let order = self.lru.entry(job_id).or_default();
        let online: HashSet<&str> = addresses.iter().map(AsRef::as_ref).collect();
        order.retain(|address| online.contains(address.as_str()));
        let mut known: HashSet<String> = order.iter().cloned().collect();
        for address in addresses {
            let address = address.as_ref();
            if known.insert(address.to_string()) {
                order.push(address.to_string());
            }
        }
        let eligible: HashSet<&str> = candidates.iter().copied().collect();
        let eldest = order
            .iter()
            .position(|a| eligible.contains(a.as_str()))
            .unwrap_or(0);
        let touched = order.remove(eldest);
        let chosen = candidates
            .iter()
            .copied()
            .find(|c| *c == touched)
            .unwrap_or(candidates[0]);
        order.push(touched);
        chosen
    }
}

/// The addresses a single-target strategy may pick: all of them minus `avoid`, unless that
/// leaves none, in which case all of them.
fn candidates<'a, A, S>(addresses: &'a [A], avoid: &HashSet<S>) -> Result<Vec<&'a str>, RouteError>
where
    A: AsRef<str>,
    S: Borrow<str> + Hash + Eq,
{
    if addresses.is_empty() {
        return Err(RouteError::NoExecutors);
    }
    let preferred: Vec<&str> = addresses
        .iter()
        .map(AsRef::as_ref)
        .filter(|a| !avoid.contains(*a))
        .collect();
    if preferred.is_empty() {
        Ok(addresses.iter().map(AsRef::as_ref).collect())
    } else {
        Ok(preferred)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn state_is_dropped_after_a_day() {
        let router = Router::seeded(7);
        let none: HashSet<String> = HashSet::new();
        let addresses = list(&["a", "b", "c"]);
        let t0 = Instant::now();
        for _ in 0..3 {
            router
                .choose_at(RouteStrategy::Round, 1, &addresses, &none, t0)
                .unwrap();
            router
                .choose_at(RouteStrategy::LeastRecentlyUsed, 1, &addresses, &none, t0)
                .unwrap();
        }
        {
            let state = router.lock_state(t0 + STATE_LIFETIME);
            assert_eq!(state.round.len(), 1, "still within the day");
            assert_eq!(state.lru.len(), 1);
        }
        let state = router.lock_state(t0 + STATE_LIFETIME + Duration::from_millis(1));
        assert!(state.round.is_empty() && state.lru.is_empty() && state.lfu.is_empty());
        assert_eq!(
            state.expires,
            Some(t0 + STATE_LIFETIME * 2 + Duration::from_millis(1))
        );
    }

    #[test]
    fn round_restarts_past_the_counter_limit() {
        let router = Router::seeded(1);
        let none: HashSet<String> = HashSet::new();
        let addresses = list(&["a", "b"]);
        router
            .lock_state(Instant::now())
            .round
            .insert(5, COUNTER_LIMIT + 1);
        router
            .choose(RouteStrategy::Round, 5, &addresses, &none)
            .unwrap();
        let count = router.lock_state(Instant::now()).round[&5];
        assert!(count < ROUND_START_RANGE, "restarted at {count}");
    }
}
