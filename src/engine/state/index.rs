//! The per-message index: message id -> [`Msg`], stored densely where ids are dense.
//!
//! Ids are handed out in increasing order, and most messages live briefly in enqueue order,
//! so the live ids of a store are mostly a dense window. They are kept in pages of
//! [`PAGE`] consecutive ids: a page is an array of slots with no keys and no hashing, so a
//! pending message costs its 24-byte [`Msg`], and enqueue and lookup touch memory
//! sequentially. Ids that do not fit that shape live in a hash map (`sparse`):
//! - DLQ entries (kept for days, they would pin whole pages);
//! - the survivors of a page that has thinned out: when the pages hold more than four
//!   times as many slots as live entries, every closed page less than half full moves its
//!   entries to the map and is freed (each such sweep follows at least as many removals as
//!   it moves entries, so its cost is amortised);
//! - ids whose page was freed, or that arrive far from the window.
//!
//! Invariants:
//! - an id is in at most one place, its page or the map;
//! - a page exists only if it was created when no id of it existed anywhere, and while it
//!   exists every non-dead entry of its ids is in it (dead ones are always in the map);
//! - a page is created only above every page number ever used (`high`), so a freed page is
//!   never created again and its ids stay in the map.

use std::collections::VecDeque;

use super::{IdMap, Msg, Place};
use crate::engine::envelope::MessageId;

const PAGE_BITS: u32 = 10;
/// Ids per page.
pub const PAGE: usize = 1 << PAGE_BITS;
/// A new page this many pages or fewer past the window extends it; farther, the window
/// starts over there (its pages moving to the map).
const MAX_GAP: u64 = 64;

const _: () = assert!(std::mem::size_of::<Option<Msg>>() == std::mem::size_of::<Msg>());

struct Page {
    live: u32,
    slots: Box<[Option<Msg>]>,
}

impl Page {
    fn new() -> Page {
        Page {
            live: 0,
            slots: vec![None; PAGE].into_boxed_slice(),
        }
    }
}

fn split(id: MessageId) -> (u64, usize) {
    (id >> PAGE_BITS, (id as usize) & (PAGE - 1))
}

/// Message id -> [`Msg`]: pages of consecutive ids plus a hash map (see the module docs).
///
/// [`MsgIndex::get_mut`] must not move an entry to or from [`Place::Dead`]; that goes
/// through [`MsgIndex::insert`], which puts dead entries in the map.
#[derive(Default)]
pub struct MsgIndex {
    /// Page number of `pages[0]`.
    first_page: u64,
    /// The window of pages; `None` for a freed page (its ids, if any, are in `sparse`).
    pages: VecDeque<Option<Page>>,
    /// Pages that are `Some`.
    open_pages: usize,
    /// Entries held in pages.
    paged: usize,
    /// Entries not in a page.
    sparse: IdMap<MessageId, Msg>,
    /// The highest page number of any id inserted so far.
    high: Option<u64>,
}

impl std::fmt::Debug for MsgIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MsgIndex")
            .field("len", &self.len())
            .field("paged", &self.paged)
            .field("pages", &self.open_pages)
            .field("sparse", &self.sparse.len())
            .finish()
    }
}

impl MsgIndex {
    /// Entries.
    pub fn len(&self) -> usize {
        self.paged + self.sparse.len()
    }

    fn page(&self, p: u64) -> Option<&Page> {
        let i = usize::try_from(p.checked_sub(self.first_page)?).ok()?;
        self.pages.get(i)?.as_ref()
    }

    fn page_mut(&mut self, p: u64) -> Option<&mut Page> {
        let i = usize::try_from(p.checked_sub(self.first_page)?).ok()?;
        self.pages.get_mut(i)?.as_mut()
    }

    /// The entry of `id`.
    pub fn get(&self, id: &MessageId) -> Option<&Msg> {
        let (p, s) = split(*id);
        if let Some(m) = self.page(p).and_then(|page| page.slots[s].as_ref()) {
            return Some(m);
        }
        if self.sparse.is_empty() {
            return None;
        }
        self.sparse.get(id)
    }

    /// The entry of `id`, to change in place (not its place to or from dead).
    pub fn get_mut(&mut self, id: &MessageId) -> Option<&mut Msg> {
        let (p, s) = split(*id);
        let paged = self.page(p).is_some_and(|page| page.slots[s].is_some());
        if paged {
            return self.page_mut(p).and_then(|page| page.slots[s].as_mut());
        }
        self.sparse.get_mut(id)
    }

    /// True when `id` has an entry.
    pub fn contains_key(&self, id: &MessageId) -> bool {
        self.get(id).is_some()
    }

    /// Sets the entry of `id`; returns the previous one.
    pub fn insert(&mut self, id: MessageId, msg: Msg) -> Option<Msg> {
        let (p, s) = split(id);
        let above = self.high.is_none_or(|h| p > h);
        self.high = Some(self.high.map_or(p, |h| h.max(p)));
        if msg.place() == Place::Dead {
            let paged = self.take_paged(p, s);
            if paged.is_some() {
                self.after_page_removal(p);
            }
            let sparse = self.sparse.insert(id, msg);
            return paged.or(sparse);
        }
        if above {
            self.create_page(p);
        }
        if let Some(page) = self.page_mut(p) {
            let old = page.slots[s].replace(msg);
            if old.is_some() {
                return old;
            }
            page.live += 1;
            self.paged += 1;
            // A dead entry moving back to its (existing) page.
            if self.sparse.is_empty() {
                return None;
            }
            return self.sparse.remove(&id);
        }
        self.sparse.insert(id, msg)
    }

    /// Removes the entry of `id`; returns it.
    pub fn remove(&mut self, id: &MessageId) -> Option<Msg> {
        let (p, s) = split(*id);
        if let Some(old) = self.take_paged(p, s) {
            self.after_page_removal(p);
            return Some(old);
        }
        if self.sparse.is_empty() {
            return None;
        }
        self.sparse.remove(id)
    }

    /// Every entry, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (MessageId, &Msg)> + '_ {
        let first = self.first_page;
        self.pages
            .iter()
            .enumerate()
            .filter_map(move |(i, page)| page.as_ref().map(|page| (first + i as u64, page)))
            .flat_map(|(p, page)| {
                page.slots
                    .iter()
                    .enumerate()
                    .filter_map(move |(s, m)| m.as_ref().map(|m| ((p << PAGE_BITS) | s as u64, m)))
            })
            .chain(self.sparse.iter().map(|(id, m)| (*id, m)))
    }

    /// An estimate of the heap memory held, in bytes.
    #[cfg(any(test, feature = "sim"))]
    pub fn heap_bytes(&self) -> u64 {
        let sparse = super::table_bytes(&self.sparse);
        let window = self.pages.capacity() * std::mem::size_of::<Option<Page>>();
        let pages = self.open_pages * PAGE * std::mem::size_of::<Option<Msg>>();
        (sparse + window + pages) as u64
    }

    fn take_paged(&mut self, p: u64, s: usize) -> Option<Msg> {
        let page = self.page_mut(p)?;
        let old = page.slots[s].take()?;
        page.live -= 1;
        self.paged -= 1;
        Some(old)
    }

    /// After an entry left page `p`: frees the page if it is empty and closed (no new id
    /// can land in it), and sweeps thinned-out pages when they hold too many empty slots.
    fn after_page_removal(&mut self, p: u64) {
        let closed = self.high.is_some_and(|h| p < h);
        if closed && self.page(p).is_some_and(|page| page.live == 0) {
            self.free_page(p);
        }
        if self.open_pages * PAGE > 4 * self.paged + 4 * PAGE {
            self.sweep();
        }
    }

    fn free_page(&mut self, p: u64) {
        let i = (p - self.first_page) as usize;
        if self.pages[i].take().is_some() {
            self.open_pages -= 1;
        }
        self.drop_freed_front();
    }

    /// Moves the window's start past its freed pages.
    fn drop_freed_front(&mut self) {
        while let Some(None) = self.pages.front() {
            self.pages.pop_front();
            self.first_page += 1;
        }
    }

    /// Moves the entries of page `p` to the map and frees it.
    fn retire_page(&mut self, p: u64) {
        let i = (p - self.first_page) as usize;
        let Some(page) = self.pages[i].take() else {
            return;
        };
        self.open_pages -= 1;
        self.paged -= page.live as usize;
        let base = p << PAGE_BITS;
        let live = page.slots.iter().enumerate();
        self.sparse
            .extend(live.filter_map(|(s, m)| Some((base | s as u64, (*m)?))));
    }

    /// Retires every closed page less than half full.
    fn sweep(&mut self) {
        let high = self.high.unwrap_or(0);
        for i in 0..self.pages.len() {
            let p = self.first_page + i as u64;
            let thin = self.pages[i]
                .as_ref()
                .is_some_and(|page| (page.live as usize) * 2 < PAGE);
            if thin && p < high {
                self.retire_page(p);
            }
        }
        self.drop_freed_front();
    }

    /// Creates page `p`, above every page used so far.
    fn create_page(&mut self, p: u64) {
        // The page that was last is closed now: free it if it is empty.
        if matches!(self.pages.back(), Some(Some(last)) if last.live == 0) {
            let last_p = self.first_page + self.pages.len() as u64 - 1;
            self.free_page(last_p);
        }
        if self.open_pages == 0 {
            self.pages.clear();
            self.first_page = p;
        } else {
            let end = self.first_page + self.pages.len() as u64;
            debug_assert!(p >= end);
            if p - end > MAX_GAP {
                // Far from the window: start a new one here.
                for i in 0..self.pages.len() {
                    self.retire_page(self.first_page + i as u64);
                }
                self.pages.clear();
                self.first_page = p;
            } else {
                self.pages.extend((end..p).map(|_| None));
            }
        }
        self.pages.push_back(Some(Page::new()));
        self.open_pages += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn msg(pos: u64, place: Place) -> Msg {
        Msg::new(pos, pos * 3, (pos % 3) as u32, (pos % 5) as u32, place)
    }

    /// Random operations against a plain map.
    #[test]
    fn agrees_with_a_hash_map() {
        let mut index = MsgIndex::default();
        let mut model: HashMap<MessageId, Msg> = HashMap::new();
        let mut rng = crate::rng::SplitMix64::new(0x9E37_79B9_7F4A_7C15);
        let mut next_id: u64 = 0;
        for step in 0..400_000u64 {
            let r = rng.next_u64();
            match r % 16 {
                // Enqueue a run of new ids (sometimes after a jump).
                0..=5 => {
                    if r.is_multiple_of(997) {
                        next_id += PAGE as u64 * (r % 200);
                    }
                    for _ in 0..(r >> 8) % 8 {
                        let m = msg(step, Place::Ready);
                        assert_eq!(index.insert(next_id, m), model.insert(next_id, m));
                        next_id += 1;
                    }
                }
                // Remove: mostly the oldest-ish, sometimes anywhere.
                6..=10 => {
                    let id = if r.is_multiple_of(4) {
                        (r >> 8) % (next_id + 1)
                    } else {
                        next_id.saturating_sub((r >> 8) % 3000)
                    };
                    assert_eq!(index.remove(&id), model.remove(&id));
                }
                // Dead-letter or replay an existing id.
                11..=12 => {
                    let id = (r >> 8) % (next_id + 1);
                    if let Some(old) = model.get(&id).copied() {
                        let place = if old.place() == Place::Dead {
                            Place::Ready
                        } else {
                            Place::Dead
                        };
                        let m = old.with_place(place);
                        assert_eq!(index.insert(id, m), model.insert(id, m));
                    }
                }
                // Change in place.
                13 => {
                    let id = next_id.saturating_sub((r >> 8) % 2000);
                    let a = index.get_mut(&id).map(|m| {
                        m.attempts += 1;
                        *m
                    });
                    let b = model.get_mut(&id).map(|m| {
                        m.attempts += 1;
                        *m
                    });
                    assert_eq!(a, b);
                }
                _ => {
                    let id = (r >> 8) % (next_id + 2);
                    assert_eq!(index.get(&id), model.get(&id));
                    assert_eq!(index.contains_key(&id), model.contains_key(&id));
                }
            }
            assert_eq!(index.len(), model.len());
            if step % 20_000 == 0 {
                let mut all: Vec<(MessageId, Msg)> = index.iter().map(|(i, m)| (i, *m)).collect();
                all.sort_by_key(|e| e.0);
                let mut want: Vec<(MessageId, Msg)> = model.iter().map(|(i, m)| (*i, *m)).collect();
                want.sort_by_key(|e| e.0);
                assert_eq!(all, want);
                // Memory stays within a small factor of the live entries.
                assert!(index.heap_bytes() <= 256 * model.len() as u64 + (16 * PAGE * 32) as u64);
            }
        }
    }

    #[test]
    fn thinned_out_pages_move_to_the_map() {
        let mut index = MsgIndex::default();
        let n = 64 * PAGE as u64;
        for id in 0..n {
            index.insert(id, msg(id, Place::Ready));
        }
        // One message in eight stays (a slow queue next to a fast one).
        for id in (0..n).filter(|id| id % 8 != 0) {
            index.remove(&id).unwrap();
        }
        assert_eq!(index.len() as u64, n / 8);
        assert!(
            index.sparse.len() as u64 > n / 16,
            "thin pages were retired"
        );
        assert!(index.open_pages * PAGE <= 4 * index.paged + 4 * PAGE);
        assert!(index.heap_bytes() <= 128 * index.len() as u64);
        for id in 0..n {
            let want = (id % 8 == 0).then(|| msg(id, Place::Ready));
            assert_eq!(index.get(&id).copied(), want);
        }
        // New ids still go to pages.
        let before = index.sparse.len();
        for id in n..n + 4 * PAGE as u64 {
            index.insert(id, msg(id, Place::Ready));
        }
        assert_eq!(index.sparse.len(), before);
        assert_eq!(index.len() as u64, n / 8 + 4 * PAGE as u64);
    }

    #[test]
    fn a_dense_backlog_costs_one_slot_per_message() {
        let mut index = MsgIndex::default();
        let n = 100 * PAGE as u64;
        for id in 0..n {
            index.insert(id, msg(id, Place::Ready));
        }
        assert_eq!(index.sparse.len(), 0);
        assert!(index.heap_bytes() <= n * 25);
        // Drained in order, every page is freed.
        for id in 0..n {
            index.remove(&id).unwrap();
        }
        assert_eq!(index.len(), 0);
        assert!(index.open_pages <= 1);
    }
}
