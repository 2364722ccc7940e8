//! Retry policies: how many deliveries a message gets and how long it waits between them.
//!
//! A policy only computes delays; the worker pool writes the resulting time into the log as
//! the message's visible-at, so nothing sleeps out a backoff and a restart resumes the
//! schedule where it was.
//!
//! Jitter draws from a seedable generator: a pool whose policy has a
//! [`Retry::jitter_seed`] gives each worker a generator derived from that seed, so its
//! delays can be reproduced; [`Retry::delay_with`] takes any source of random bits.

use std::cell::RefCell;
use std::time::Duration;

use crate::rng::{scale, SplitMix64};

/// The shape of the delay between attempts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backoff {
    /// The same delay every time.
    Fixed(Duration),
    /// `step * attempt`.
    Linear(Duration),
    /// `base * 2^(attempt - 1)`.
    Exponential(Duration),
}

/// How the delay is randomised.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Jitter {
    /// Exactly the computed delay.
    None,
    /// A uniformly random delay between zero and the computed one ("full jitter"), which
    /// spreads retries of many failing messages apart.
    Full,
}

/// A retry policy. The default: 5 attempts, exponential from 100 ms, capped at 5 minutes,
/// full jitter from an unseeded generator. A [`WorkerPool`](crate::WorkerPool) uses it to
/// schedule the next attempt after a transient failure, and its `max_attempts` as the
/// queue's.
///
/// ```
/// use std::time::Duration;
/// use deadletter::pool::Retry;
///
/// let ms = Duration::from_millis;
/// let policy = Retry::exponential(ms(100)).cap(ms(1_000)).max_attempts(6);
/// let delays: Vec<Duration> = (1..=5).map(|attempt| policy.base_delay(attempt)).collect();
/// assert_eq!(delays, [ms(100), ms(200), ms(400), ms(800), ms(1_000)]);
///
/// // Full jitter (the default) waits a random time up to that delay, so that many failing
/// // messages do not all come back at once.
/// assert!(policy.delay(3) <= ms(400));
/// // Jitter from a generator of your own (here, half of the range).
/// assert_eq!(policy.delay_with(3, || u64::MAX / 2), ms(200));
/// // Or exact delays.
/// assert_eq!(Retry::linear(ms(250)).no_jitter().delay(3), ms(750));
/// assert_eq!(Retry::fixed(ms(50)).no_jitter().delay(9), ms(50));
/// // A pool whose policy has a seed draws the same delays in every run.
/// let reproducible = Retry::default().jitter_seed(42);
/// assert_eq!(reproducible.jitter_seed, Some(42));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Retry {
    /// The delay shape.
    pub backoff: Backoff,
    /// The longest delay.
    pub cap: Duration,
    /// The randomisation.
    pub jitter: Jitter,
    /// Deliveries before a message goes to the DLQ.
    pub max_attempts: u32,
    /// The seed of the jitter's generator (`None`: seeded from the clock).
    pub jitter_seed: Option<u64>,
}

impl Default for Retry {
    fn default() -> Self {
        Retry::exponential(Duration::from_millis(100))
    }
}

impl Retry {
    fn with(backoff: Backoff) -> Self {
        Retry {
            backoff,
            cap: Duration::from_secs(300),
            jitter: Jitter::Full,
            max_attempts: 5,
            jitter_seed: None,
        }
    }

    /// Exponential backoff from `base`.
    pub fn exponential(base: Duration) -> Self {
        Self::with(Backoff::Exponential(base))
    }

    /// Linear backoff by `step`.
    pub fn linear(step: Duration) -> Self {
        Self::with(Backoff::Linear(step))
    }

    /// A fixed delay.
    pub fn fixed(delay: Duration) -> Self {
        Self::with(Backoff::Fixed(delay))
    }

    setters! {
        /// Sets the number of deliveries before the DLQ.
        max_attempts(n: u32) => max_attempts = n.max(1);
        /// Sets the longest delay.
        cap(cap: Duration) => cap = cap;
        /// Turns jitter off (exact delays).
        no_jitter() => jitter = Jitter::None;
        /// Seeds the jitter, so that delays can be reproduced: a worker pool gives each of
        /// its workers a generator derived from `seed` and the worker's index.
        jitter_seed(seed: u64) => jitter_seed = Some(seed);
    }

    /// The delay before the attempt after failed attempt number `attempt` (1 for the first),
    /// before jitter.
    pub fn base_delay(&self, attempt: u32) -> Duration {
        let attempt = attempt.max(1);
        let d = match self.backoff {
            Backoff::Fixed(d) => d,
            Backoff::Linear(step) => step.saturating_mul(attempt),
            Backoff::Exponential(base) => {
                let factor = 1u32.checked_shl(attempt - 1).unwrap_or(u32::MAX);
                base.saturating_mul(factor)
            }
        };
        d.min(self.cap)
    }

    /// The delay after failed attempt `attempt`, with jitter drawn from this thread's
    /// generator (seeded from the clock when the thread first draws).
    pub fn delay(&self, attempt: u32) -> Duration {
        thread_local! {
            static RNG: RefCell<SplitMix64> = RefCell::new(SplitMix64::from_time());
        }
        RNG.with(|rng| self.delay_with(attempt, || rng.borrow_mut().next_u64()))
    }

    /// The delay after failed attempt `attempt`, with jitter drawn from `random`, a source
    /// of uniformly random 64-bit numbers (called at most once).
    pub fn delay_with(&self, attempt: u32, mut random: impl FnMut() -> u64) -> Duration {
        let d = self.base_delay(attempt);
        match self.jitter {
            Jitter::None => d,
            Jitter::Full => {
                let ms = d.as_millis() as u64;
                if ms == 0 {
                    return Duration::ZERO;
                }
                Duration::from_millis(scale(random(), ms + 1))
            }
        }
    }

    /// The generator of worker `index` of a pool with this policy: derived from
    /// [`Retry::jitter_seed`] when set, from the clock otherwise.
    pub(crate) fn worker_rng(&self, index: usize) -> SplitMix64 {
        match self.jitter_seed {
            Some(seed) => {
                SplitMix64::new(seed ^ (index as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15))
            }
            None => SplitMix64::from_time(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seeded_generator_gives_the_same_delays_again() {
        let r = Retry::exponential(Duration::from_millis(1000)).jitter_seed(42);
        let draw = |index| {
            let mut rng = r.worker_rng(index);
            (1..=5)
                .map(|a| r.delay_with(a, || rng.next_u64()))
                .collect::<Vec<_>>()
        };
        assert_eq!(draw(0), draw(0));
        assert_ne!(draw(0), draw(1), "workers draw different delays");
        for (a, d) in (1..=5).zip(draw(3)) {
            assert!(d <= r.base_delay(a));
        }
        let mut zero = || 0;
        assert_eq!(r.delay_with(4, &mut zero), Duration::ZERO);
        let mut top = || u64::MAX;
        assert!(r.delay_with(1, &mut top) >= Duration::from_millis(999));
    }
}
