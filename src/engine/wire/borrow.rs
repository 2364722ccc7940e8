//! serde deserializers that read strings out of the input instead of allocating them.
//!
//! bincode's owned `String` decoding allocates the length its prefix claims before it reads
//! the bytes, so a damaged length (behind a checksum that still passes, or in a crafted
//! file) would make it ask for any amount of memory and abort the process. A borrowed
//! `&str` is checked against the bytes that are actually there. Every string the wire
//! structs decode goes through here or is a borrowed `&str` field; byte strings are
//! borrowed `&[u8]` fields, and sequences are safe as they are (serde caps what it
//! reserves ahead). Decoding must use `bincode::serde::borrow_decode_from_slice`.

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde::de::{MapAccess, Visitor};
use serde::Deserializer;

/// A map of `String` to `String`, read as `&str`s (into the map directly: this is on the
/// path of every delivery).
pub(super) fn map<'de, 'a, D: Deserializer<'de>>(
    d: D,
) -> Result<Cow<'a, BTreeMap<String, String>>, D::Error> {
    struct Pairs;
    impl<'de> Visitor<'de> for Pairs {
        type Value = BTreeMap<String, String>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a map of strings")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Self::Value, A::Error> {
            let mut map = BTreeMap::new();
            while let Some((k, v)) = access.next_entry::<&'de str, &'de str>()? {
                map.insert(k.to_owned(), v.to_owned());
            }
            Ok(map)
        }
    }
    d.deserialize_map(Pairs).map(Cow::Owned)
}
