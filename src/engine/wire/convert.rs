//! How a wire value and the engine's value it stands for convert: [`Wire`], for the values
//! written as the engine holds them, strings and byte strings (borrowed from the engine's
//! value when writing, from the bytes when reading), a queue id bounded to what the index
//! holds ([`Queue`]), and sequences, boxes and tuples of them; and the two macros a format
//! version declares its wire structs and enums with,
//! field by field in the order bincode writes them, with their conversions both ways
//! ([`wire_struct!`], [`wire_enum!`]). A value whose engine type differs in shape (a map
//! written as a sequence, a newtype) implements [`Wire`] by hand, in its version's module.

use std::borrow::Cow;
use std::collections::BTreeMap;

use crate::engine::state::MAX_QUEUES;

/// A string: borrowed from the engine's value when encoding, from the body when decoding
/// (every container says `'de: 'a` for it).
pub(super) type Text<'a> = &'a str;

/// A wire value: written from a borrowed engine value, read back into an owned one.
pub(super) trait Wire<'a>: Sized {
    /// The engine's type it stands for.
    type Engine;
    /// The wire form of `e`, borrowing from it (nothing is copied on the write path).
    fn of(e: &'a Self::Engine) -> Self;
    /// The engine's value; `None` when what was read breaks an invariant of the engine's
    /// type (the record or checkpoint then does not decode).
    fn into_engine(self) -> Option<Self::Engine>;
}

/// Values written exactly as the engine holds them.
macro_rules! plain {
    ($($t:ty),*) => {$(
        impl Wire<'_> for $t {
            type Engine = $t;
            #[inline]
            fn of(e: &$t) -> $t {
                *e
            }
            #[inline]
            fn into_engine(self) -> Option<$t> {
                Some(self)
            }
        }
    )*};
}

plain!(u32, u64, bool, Option<u32>, Option<u64>, Option<(u64, u64)>);

/// Values borrowed from the engine's when writing (strings from the body when reading too:
/// their lengths are checked against it before anything is allocated), owned by the
/// engine's when read: `wire type => engine type, of, into`.
macro_rules! borrowed {
    ($($w:ty => $e:ty, $of:expr, $into:expr;)*) => {$(
        impl<'a> Wire<'a> for $w {
            type Engine = $e;
            #[inline]
            fn of(e: &'a $e) -> Self {
                $of(e)
            }
            #[inline]
            fn into_engine(self) -> Option<$e> {
                Some($into(self))
            }
        }
    )*};
}

borrowed! {
    &'a str => String, String::as_str, str::to_owned;
    Option<&'a str> => Option<String>, Option::as_deref, |w: Option<&str>| w.map(str::to_owned);
    &'a [u8] => Vec<u8>, Vec::as_slice, <[u8]>::to_vec;
    Option<&'a [u8]> => Option<Vec<u8>>, Option::as_deref, |w: Option<&[u8]>| w.map(<[u8]>::to_vec);
    // Ids: read as a sequence (serde caps what it reserves ahead).
    Cow<'a, [u64]> => Vec<u64>, |e: &'a Vec<u64>| Cow::Borrowed(e.as_slice()), Cow::into_owned;
    // A map of strings, read into the map directly (see `borrow::map`).
    Cow<'a, BTreeMap<String, String>> => BTreeMap<String, String>, Cow::Borrowed, Cow::into_owned;
}

/// A queue id, one the index can hold (below [`MAX_QUEUES`]: no store declares more, and
/// the index packs a queue id into 30 bits). A record or checkpoint that names another does
/// not decode.
#[derive(Clone, Copy, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub(super) struct Queue(pub(super) u32);

impl Wire<'_> for Queue {
    type Engine = u32;
    #[inline]
    fn of(e: &u32) -> Self {
        Queue(*e)
    }
    #[inline]
    fn into_engine(self) -> Option<u32> {
        (self.0 < MAX_QUEUES).then_some(self.0)
    }
}

impl Wire<'_> for Option<Queue> {
    type Engine = Option<u32>;
    #[inline]
    fn of(e: &Option<u32>) -> Self {
        e.map(Queue)
    }
    #[inline]
    fn into_engine(self) -> Option<Option<u32>> {
        self.map_or(Some(None), |q| q.into_engine().map(Some))
    }
}

impl<'a, W: Wire<'a>> Wire<'a> for Vec<W> {
    type Engine = Vec<W::Engine>;
    #[inline]
    fn of(e: &'a Vec<W::Engine>) -> Self {
        e.iter().map(W::of).collect()
    }
    #[inline]
    fn into_engine(self) -> Option<Vec<W::Engine>> {
        self.into_iter().map(W::into_engine).collect()
    }
}

impl<'a, W: Wire<'a>> Wire<'a> for Box<W> {
    type Engine = Box<W::Engine>;
    #[inline]
    fn of(e: &'a Box<W::Engine>) -> Self {
        Box::new(W::of(e))
    }
    #[inline]
    fn into_engine(self) -> Option<Box<W::Engine>> {
        (*self).into_engine().map(Box::new)
    }
}

impl<'a, A: Wire<'a>, B: Wire<'a>> Wire<'a> for (A, B) {
    type Engine = (A::Engine, B::Engine);
    #[inline]
    fn of((a, b): &'a Self::Engine) -> Self {
        (A::of(a), B::of(b))
    }
    #[inline]
    fn into_engine(self) -> Option<Self::Engine> {
        Some((self.0.into_engine()?, self.1.into_engine()?))
    }
}

impl<'a, A: Wire<'a>, B: Wire<'a>, C: Wire<'a>> Wire<'a> for (A, B, C) {
    type Engine = (A::Engine, B::Engine, C::Engine);
    #[inline]
    fn of((a, b, c): &'a Self::Engine) -> Self {
        (A::of(a), B::of(b), C::of(c))
    }
    #[inline]
    fn into_engine(self) -> Option<Self::Engine> {
        Some((
            self.0.into_engine()?,
            self.1.into_engine()?,
            self.2.into_engine()?,
        ))
    }
}

/// Declares a wire struct (serde's derives, its fields in the order they are written) for
/// the engine's struct of the same field names, and the [`Wire`] conversion between them:
/// every field through its own. `fill { field: value }` gives the engine's fields the format
/// does not hold.
macro_rules! wire_struct {
    (
        $(#[$meta:meta])*
        struct $name:ident $(<$a:lifetime>)? : $($engine:ident)::+ {
            $( $(#[$fmeta:meta])* $field:ident: $ty:ty ),* $(,)?
        }
        $( fill { $( $extra:ident: $value:expr ),* $(,)? } )?
    ) => {
        #[derive(serde::Serialize, serde::Deserialize)]
        $(#[$meta])*
        pub(super) struct $name $(<$a>)? { $( $(#[$fmeta])* $field: $ty ),* }

        $crate::engine::wire::convert::wire_struct!(@impl [$($a)? 'w]
            $name $(<$a>)?, $($engine)::+, [$($field: $ty),*], [$($($extra: $value),*)?]);
    };
    (@impl [$a:lifetime $($unused:lifetime)?] $t:ty, $($engine:ident)::+,
        [$($field:ident: $ty:ty),*], [$($extra:ident: $value:expr),*]) => {
        impl<$a> $crate::engine::wire::convert::Wire<$a> for $t {
            type Engine = $($engine)::+;
            #[inline]
            fn of(e: &$a $($engine)::+) -> Self {
                Self { $( $field: <$ty as $crate::engine::wire::convert::Wire<$a>>::of(&e.$field) ),* }
            }
            #[inline]
            fn into_engine(self) -> Option<$($engine)::+> {
                Some($($engine)::+ {
                    $( $field: <$ty as $crate::engine::wire::convert::Wire<$a>>::into_engine(self.$field)?, )*
                    $( $extra: $value, )*
                })
            }
        }
    };
}

/// Declares a wire enum (serde's derives, its variants in the order of their indexes) for
/// the engine's enum of the same variants and field names, and the [`Wire`] conversion
/// between them. A variant is a unit, has named fields (`V { a: T }`), or positional ones,
/// named here for the conversion (`V(a: T)`); bincode writes both kinds alike.
macro_rules! wire_enum {
    (
        $(#[$meta:meta])*
        enum $name:ident $(<$a:lifetime>)? : $($engine:ident)::+ {
            $( $(#[$vmeta:meta])* $variant:ident
                $( { $( $field:ident: $fty:ty ),* $(,)? } )?
                $( ( $( $pos:ident: $pty:ty ),* $(,)? ) )?
            ),* $(,)?
        }
    ) => {
        #[derive(serde::Serialize, serde::Deserialize)]
        $(#[$meta])*
        pub(super) enum $name $(<$a>)? {
            $( $(#[$vmeta])* $variant $( { $( $field: $fty ),* } )? $( ( $( $pty ),* ) )? ),*
        }

        $crate::engine::wire::convert::wire_enum!(@impl [$($a)? 'w] $name $(<$a>)?,
            $($engine)::+, [$( $variant $( { $( $field: $fty ),* } )? $( ( $( $pos: $pty ),* ) )? ),*]);
    };
    (@impl [$a:lifetime $($unused:lifetime)?] $t:ty, $($engine:ident)::+, [$( $variant:ident
        $( { $( $field:ident: $fty:ty ),* } )?
        $( ( $( $pos:ident: $pty:ty ),* ) )?
    ),*]) => {
        impl<$a> $crate::engine::wire::convert::Wire<$a> for $t {
            type Engine = $($engine)::+;
            #[inline]
            fn of(e: &$a $($engine)::+) -> Self {
                type E = $($engine)::+;
                match e {
                    $( E::$variant $( { $( $field ),* } )? $( ( $( $pos ),* ) )? => {
                        Self::$variant
                            $( { $( $field: <$fty as $crate::engine::wire::convert::Wire<$a>>::of($field) ),* } )?
                            $( ( $( <$pty as $crate::engine::wire::convert::Wire<$a>>::of($pos) ),* ) )?
                    } )*
                }
            }
            #[inline]
            fn into_engine(self) -> Option<$($engine)::+> {
                type E = $($engine)::+;
                Some(match self {
                    $( Self::$variant $( { $( $field ),* } )? $( ( $( $pos ),* ) )? => {
                        E::$variant
                            $( { $( $field: <$fty as $crate::engine::wire::convert::Wire<$a>>::into_engine($field)? ),* } )?
                            $( ( $( <$pty as $crate::engine::wire::convert::Wire<$a>>::into_engine($pos)? ),* ) )?
                    } )*
                })
            }
        }
    };
}

/// Declares a wire newtype (serde-transparent: the bytes of its inner value) for an engine
/// type whose shape differs from what is written, with the two conversions: `of` takes the
/// engine's value to the inner one, `into` the inner one back (`None`: it breaks an
/// invariant of the engine's type).
macro_rules! wire_newtype {
    (
        $(#[$meta:meta])*
        struct $name:ident($inner:ty): $engine:ty { of: $of:expr, into: $into:expr $(,)? }
    ) => {
        $(#[$meta])*
        #[derive(serde::Serialize, serde::Deserialize)]
        #[serde(transparent)]
        pub(super) struct $name($inner);

        impl $crate::engine::wire::convert::Wire<'_> for $name {
            type Engine = $engine;
            fn of(e: &$engine) -> Self {
                let of: fn(&$engine) -> $inner = $of;
                $name(of(e))
            }
            fn into_engine(self) -> Option<$engine> {
                let into: fn($inner) -> Option<$engine> = $into;
                into(self.0)
            }
        }
    };
}

pub(super) use {wire_enum, wire_newtype, wire_struct};
