//! The crate's one random number generator: SplitMix64, seeded by one `u64`.
//!
//! Two things need random numbers: the worker pool's retry jitter, and the test machinery
//! of the `sim` feature (which faults to inject, where a power cut tears a write). Both
//! need a generator they can seed, so that a run can be reproduced from its seed, and
//! neither needs cryptographic quality. SplitMix64 is ten lines, fast, and has good enough
//! statistics for spreading delays and choosing faults, so it is written here rather than
//! taken from `rand`: the core library then needs no dependency for it.

/// Maps 64 random bits `r` to a number in `0..n` (0 when `n` is 0) by multiply-shift:
/// unbiased enough for jitter and simulation, and it never divides.
pub(crate) fn scale(r: u64, n: u64) -> u64 {
    ((r as u128 * n as u128) >> 64) as u64
}

/// A random 128-bit number, never 0: a new store's id (see `docs/FORMAT.md`, store
/// identity). Two generators seeded from the clock, the stack's address, the process id
/// and a counter of this process's calls each give 64 bits: stores created anywhere, at
/// any time, get different ids with overwhelming odds, which is all an id needs (it tells
/// a store's files from another store's, it guards no secret).
pub(crate) fn random_u128() -> u128 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static CALLS: AtomicU64 = AtomicU64::new(0);
    loop {
        let n = CALLS.fetch_add(1, Ordering::Relaxed);
        let pid = u64::from(std::process::id());
        let mut a = SplitMix64::from_time();
        let mut b = SplitMix64::new(a.next_u64() ^ pid.rotate_left(17) ^ n.rotate_left(41));
        let id = (u128::from(a.next_u64() ^ n) << 64) | u128::from(b.next_u64());
        if id != 0 {
            return id;
        }
    }
}

/// SplitMix64: fast, 64 bits of state, good enough statistical quality for choosing faults.
#[derive(Debug, Clone)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// A generator for `seed`. Equal seeds give equal sequences on every platform.
    pub fn new(seed: u64) -> Self {
        SplitMix64 {
            state: seed ^ 0x5DEE_CE66_D1CE_4E5B,
        }
    }

    /// A generator seeded from the clock and the address of a local variable: differs
    /// between processes and threads, for when no seed was given.
    pub fn from_time() -> Self {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0x2545_F491_4F6C_DD1D);
        let local = 0u8;
        SplitMix64::new(t ^ (&local as *const u8 as u64).rotate_left(32))
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// Helpers for the test machinery (`sim`): ranges, probabilities, bytes, choices.
#[cfg(any(test, feature = "sim"))]
#[cfg_attr(not(feature = "sim"), allow(dead_code))]
impl SplitMix64 {
    /// A number in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        scale(self.next_u64(), n)
    }

    /// An independent generator derived from this one (for a sub-system that must not
    /// shift the parent's sequence when it draws more or fewer numbers).
    pub fn fork(&mut self) -> SplitMix64 {
        SplitMix64::new(self.next_u64())
    }

    /// A number in `lo..hi` (`lo` when the range is empty).
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi.saturating_sub(lo))
    }

    /// An index into a collection of `len` items (0 when empty).
    pub fn index(&mut self, len: usize) -> usize {
        self.below(len as u64) as usize
    }

    /// True with probability `p` (clamped to `[0, 1]`).
    pub fn chance(&mut self, p: f64) -> bool {
        if p <= 0.0 {
            return false;
        }
        if p >= 1.0 {
            return true;
        }
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }

    /// Fills `buf` with random bytes.
    pub fn fill(&mut self, buf: &mut [u8]) {
        for chunk in buf.chunks_mut(8) {
            let r = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&r[..chunk.len()]);
        }
    }

    /// `n` random bytes.
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        let mut v = vec![0u8; n];
        self.fill(&mut v);
        v
    }

    /// A random element of `items`, if any.
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> Option<&'a T> {
        if items.is_empty() {
            None
        } else {
            Some(&items[self.index(items.len())])
        }
    }
}
