//! Small maps of the index: a fast hasher for dense integer ids, and interned strings.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

/// A fast hasher for dense integer ids (a Fibonacci multiply).
#[derive(Default, Clone, Copy)]
pub struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ b as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (n ^ self.0).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
    fn write_u32(&mut self, n: u32) {
        self.write_u64(n as u64);
    }
}

/// HashMap keyed by ids.
pub type IdMap<K, V> = HashMap<K, V, BuildHasherDefault<IdHasher>>;

/// HashSet of ids.
pub type IdHashSet<K> = HashSet<K, BuildHasherDefault<IdHasher>>;

/// Interned strings (error kinds, worker names); id 0 is the empty string.
#[derive(Debug)]
pub struct Interner {
    names: Vec<String>,
    ids: HashMap<String, u32>,
}

impl Default for Interner {
    fn default() -> Self {
        Interner {
            names: vec![String::new()],
            ids: HashMap::from([(String::new(), 0)]),
        }
    }
}

impl Interner {
    /// The id of `s`, adding it if new.
    pub fn intern(&mut self, s: &str) -> u32 {
        if let Some(&id) = self.ids.get(s) {
            return id;
        }
        let id = self.names.len() as u32;
        self.names.push(s.to_string());
        self.ids.insert(s.to_string(), id);
        id
    }
    /// The id of `s` if known.
    pub fn get(&self, s: &str) -> Option<u32> {
        self.ids.get(s).copied()
    }
    /// Rebuilds an interner from its strings in id order.
    pub fn from_names(names: Vec<String>) -> Self {
        if names.first().map(String::as_str) != Some("") {
            let mut all = vec![String::new()];
            all.extend(names);
            return Self::from_names(all);
        }
        let ids = names
            .iter()
            .enumerate()
            .map(|(i, n)| (n.clone(), i as u32))
            .collect();
        Interner { names, ids }
    }

    /// Every string, in id order.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// The string of an id.
    pub fn name(&self, id: u32) -> &str {
        self.names
            .get(id as usize)
            .map(String::as_str)
            .unwrap_or("")
    }
}
