//! Retry policies: how many deliveries a message gets and how long it waits between them.
//!
//! A policy only computes delays; the worker pool writes the resulting time into the log as
//! the message's visible-at, so nothing sleeps out a backoff and a restart resumes the
//! schedule where it was.

use std::cell::Cell;
use std::time::Duration;

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
/// full jitter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retry {
    /// The delay shape.
    pub backoff: Backoff,
    /// The longest delay.
    pub cap: Duration,
    /// The randomisation.
    pub jitter: Jitter,
    /// Deliveries before a message goes to the DLQ.
    pub max_attempts: u32,
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

    /// Sets the number of deliveries before the DLQ.
    pub fn max_attempts(mut self, n: u32) -> Self {
        self.max_attempts = n.max(1);
        self
    }

    /// Sets the longest delay.
    pub fn cap(mut self, cap: Duration) -> Self {
        self.cap = cap;
        self
    }

    /// Turns jitter off (exact delays).
    pub fn no_jitter(mut self) -> Self {
        self.jitter = Jitter::None;
        self
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

    /// The delay after failed attempt `attempt`, with jitter applied.
    pub fn delay(&self, attempt: u32) -> Duration {
        let d = self.base_delay(attempt);
        match self.jitter {
            Jitter::None => d,
            Jitter::Full => {
                let ms = d.as_millis() as u64;
                Duration::from_millis(if ms == 0 { 0 } else { random_u64() % (ms + 1) })
            }
        }
    }
}

thread_local! {
    static RNG: Cell<u64> = Cell::new(seed());
}

fn seed() -> u64 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0x2545_F491_4F6C_DD1D);
    let local = 0u8;
    t ^ (&local as *const u8 as u64).rotate_left(32) | 1
}

/// xorshift64*: fast, per thread, good enough to spread retries.
fn random_u64() -> u64 {
    RNG.with(|r| {
        let mut x = r.get();
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        r.set(x);
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_and_cap() {
        let ms = Duration::from_millis;
        let e = Retry::exponential(ms(100)).no_jitter().cap(ms(1000));
        assert_eq!(
            (1..=6).map(|a| e.delay(a)).collect::<Vec<_>>(),
            vec![ms(100), ms(200), ms(400), ms(800), ms(1000), ms(1000)]
        );
        let l = Retry::linear(ms(100)).no_jitter();
        assert_eq!(l.delay(3), ms(300));
        let f = Retry::fixed(ms(50)).no_jitter();
        assert_eq!(f.delay(9), ms(50));
        assert_eq!(
            Retry::exponential(ms(1)).no_jitter().delay(200),
            Duration::from_secs(300)
        );
    }

    #[test]
    fn full_jitter_stays_within_the_delay() {
        let r = Retry::exponential(Duration::from_millis(100));
        let mut seen_small = false;
        for _ in 0..1000 {
            let d = r.delay(3);
            assert!(d <= Duration::from_millis(400));
            seen_small |= d < Duration::from_millis(200);
        }
        assert!(seen_small, "jitter never went below half the delay");
    }
}
