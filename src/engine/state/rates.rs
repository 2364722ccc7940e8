//! Recent activity of one queue: how many messages were enqueued, acked, retried and
//! dead-lettered in each of the last [`RATE_BUCKETS`] periods of [`RATE_BUCKET_MS`], counted
//! as their records are applied (one addition each, under the index lock the apply holds
//! anyway). The API turns a window of them into rates (`QueueRates`).
//!
//! Invariants:
//! - a record is counted in the bucket of the latest time the index has seen
//!   (`State::latest_time`, which never goes back), so a clock set back cannot put counts
//!   into buckets that were already passed, and a reopen counts the records it replays by
//!   their own times (those older than the ring are not counted);
//! - only the [`RATE_BUCKETS`] periods up to the newest one are kept: moving to a newer
//!   period clears the buckets it skips, so the memory is fixed (allocated at a queue's
//!   first counted record);
//! - the ring is not part of checkpoints (no format change): after a reopen it holds what
//!   the log replayed after the checkpoint, and fills again as the store works.

/// Milliseconds in one bucket.
pub const RATE_BUCKET_MS: u64 = 5_000;

/// Buckets kept: five minutes.
pub const RATE_BUCKETS: usize = 60;

/// What a bucket counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activity {
    /// A message enqueued.
    Enqueued = 0,
    /// A delivery acked.
    Acked = 1,
    /// A failed delivery scheduled for another attempt.
    Retried = 2,
    /// A message moved to the DLQ.
    DeadLettered = 3,
}

/// Counts of one window: enqueued, acked, retried, dead-lettered (indexed by [`Activity`]).
pub type ActivityCounts = [u64; 4];

/// The ring of one queue.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecentActivity {
    /// `None` until the queue's first counted record.
    ring: Option<Box<Ring>>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Ring {
    /// Counts per bucket; bucket of period `p` is `p % RATE_BUCKETS`.
    buckets: [ActivityCounts; RATE_BUCKETS],
    /// The newest period counted (ms / RATE_BUCKET_MS).
    newest: u64,
}

impl RecentActivity {
    /// Counts `n` of `what` at `at_ms`.
    pub fn add(&mut self, what: Activity, n: u64, at_ms: u64) {
        let period = at_ms / RATE_BUCKET_MS;
        let ring = self.ring.get_or_insert_with(|| {
            Box::new(Ring {
                buckets: [[0; 4]; RATE_BUCKETS],
                newest: period,
            })
        });
        if period > ring.newest {
            let skipped = (period - ring.newest).min(RATE_BUCKETS as u64);
            for p in (period + 1 - skipped)..=period {
                ring.buckets[(p % RATE_BUCKETS as u64) as usize] = [0; 4];
            }
            ring.newest = period;
        } else if period + (RATE_BUCKETS as u64) <= ring.newest {
            // Older than the ring: not counted.
            return;
        }
        ring.buckets[(period % RATE_BUCKETS as u64) as usize][what as usize] += n;
    }

    /// The counts of the last `buckets` periods up to the one holding `now_ms` (the
    /// current one, partly elapsed, included), and how many milliseconds they cover: the
    /// whole periods before the current one and the part of it up to `now_ms`. A `now_ms`
    /// before the newest period counted reads as that period's end (a clock set back).
    pub fn window(&self, now_ms: u64, buckets: usize) -> (ActivityCounts, u64) {
        let buckets = buckets.clamp(1, RATE_BUCKETS) as u64;
        let mut now_period = now_ms / RATE_BUCKET_MS;
        let mut into = now_ms % RATE_BUCKET_MS + 1;
        let mut total = [0u64; 4];
        if let Some(ring) = &self.ring {
            if ring.newest > now_period {
                now_period = ring.newest;
                into = RATE_BUCKET_MS;
            }
            let oldest_kept = ring.newest.saturating_sub(RATE_BUCKETS as u64 - 1);
            let first = (now_period + 1).saturating_sub(buckets).max(oldest_kept);
            for p in first..=now_period.min(ring.newest) {
                let b = &ring.buckets[(p % RATE_BUCKETS as u64) as usize];
                for (t, n) in total.iter_mut().zip(b) {
                    *t += n;
                }
            }
        }
        let span = (buckets - 1) * RATE_BUCKET_MS + into;
        (total, span)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: u64 = 1_700_000_000_000; // a multiple of RATE_BUCKET_MS

    #[test]
    fn counts_fall_into_the_window_of_their_time() {
        let mut r = RecentActivity::default();
        r.add(Activity::Enqueued, 3, T0);
        r.add(Activity::Acked, 1, T0 + 4_999);
        r.add(Activity::Retried, 2, T0 + 5_000);
        // One bucket: the current one only.
        assert_eq!(r.window(T0 + 5_000, 1), ([0, 0, 2, 0], 1));
        // Two buckets: the previous one whole and one ms of the current.
        assert_eq!(r.window(T0 + 5_000, 2), ([3, 1, 2, 0], 5_001));
    }

    #[test]
    fn old_buckets_are_cleared_as_time_moves_on() {
        let mut r = RecentActivity::default();
        r.add(Activity::DeadLettered, 7, T0);
        let five_minutes = RATE_BUCKETS as u64 * RATE_BUCKET_MS;
        // Still in the five-minute window one bucket before it ends.
        assert_eq!(
            r.window(T0 + five_minutes - 1, RATE_BUCKETS).0,
            [0, 0, 0, 7]
        );
        // A new count a whole ring later reuses the same slot: the old count is gone.
        r.add(Activity::Enqueued, 1, T0 + five_minutes);
        assert_eq!(r.window(T0 + five_minutes, RATE_BUCKETS).0, [1, 0, 0, 0]);
        // Far later, nothing is left in any window.
        assert_eq!(r.window(T0 + 10 * five_minutes, RATE_BUCKETS).0, [0; 4]);
    }

    #[test]
    fn a_count_older_than_the_ring_is_not_kept() {
        let mut r = RecentActivity::default();
        let five_minutes = RATE_BUCKETS as u64 * RATE_BUCKET_MS;
        r.add(Activity::Acked, 1, T0 + five_minutes);
        r.add(Activity::Acked, 100, T0);
        assert_eq!(r.window(T0 + five_minutes, RATE_BUCKETS).0, [0, 1, 0, 0]);
    }

    #[test]
    fn a_clock_behind_the_newest_count_reads_up_to_it() {
        let mut r = RecentActivity::default();
        r.add(Activity::Enqueued, 4, T0 + 60_000);
        let (counts, span) = r.window(T0, 12);
        assert_eq!(counts, [4, 0, 0, 0]);
        assert_eq!(span, 60_000);
    }
}
