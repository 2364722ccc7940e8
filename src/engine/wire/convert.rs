//! How a wire value and the engine's value it stands for convert: [`Wire`] (read back into
//! the engine's value) and [`WireOf`] (written from it), for the values
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

/// A wire value, read back into an owned engine value.
pub(super) trait Wire<'a>: Sized {
    /// The engine's type it stands for.
    type Engine;
    /// The engine's value; `None` when what was read breaks an invariant of the engine's
    /// type (the record or checkpoint then does not decode).
    fn into_engine(self) -> Option<Self::Engine>;
}

/// A wire value that can be written from a borrowed engine value: every wire value of the
/// current version. A value only an older version has (one the current version changed) is
/// read-only, so the engine's types can grow past what it can express.
pub(super) trait WireOf<'a>: Wire<'a> {
    /// The wire form of `e`, borrowing from it (nothing is copied on the write path).
    fn of(e: &'a Self::Engine) -> Self;
}

/// Values written exactly as the engine holds them.
macro_rules! plain {
    ($($t:ty),*) => {$(
        impl Wire<'_> for $t {
            type Engine = $t;
            #[inline]
            fn into_engine(self) -> Option<$t> {
                Some(self)
            }
        }
        impl WireOf<'_> for $t {
            #[inline]
            fn of(e: &$t) -> $t {
                *e
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
            fn into_engine(self) -> Option<$e> {
                Some($into(self))
            }
        }
        impl<'a> WireOf<'a> for $w {
            #[inline]
            fn of(e: &'a $e) -> Self {
                $of(e)
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
    fn into_engine(self) -> Option<u32> {
        (self.0 < MAX_QUEUES).then_some(self.0)
    }
}

impl WireOf<'_> for Queue {
    #[inline]
    fn of(e: &u32) -> Self {
        Queue(*e)
    }
}

impl Wire<'_> for Option<Queue> {
    type Engine = Option<u32>;
    #[inline]
    fn into_engine(self) -> Option<Option<u32>> {
        self.map_or(Some(None), |q| q.into_engine().map(Some))
    }
}

impl WireOf<'_> for Option<Queue> {
    #[inline]
    fn of(e: &Option<u32>) -> Self {
        e.map(Queue)
    }
}

impl<'a, W: Wire<'a>> Wire<'a> for Vec<W> {
    type Engine = Vec<W::Engine>;
    #[inline]
    fn into_engine(self) -> Option<Vec<W::Engine>> {
        self.into_iter().map(W::into_engine).collect()
    }
}

impl<'a, W: WireOf<'a>> WireOf<'a> for Vec<W> {
    #[inline]
    fn of(e: &'a Vec<W::Engine>) -> Self {
        e.iter().map(W::of).collect()
    }
}

impl<'a, W: Wire<'a>> Wire<'a> for Box<W> {
    type Engine = Box<W::Engine>;
    #[inline]
    fn into_engine(self) -> Option<Box<W::Engine>> {
        (*self).into_engine().map(Box::new)
    }
}

impl<'a, W: WireOf<'a>> WireOf<'a> for Box<W> {
    #[inline]
    fn of(e: &'a Box<W::Engine>) -> Self {
        Box::new(W::of(e))
    }
}

impl<'a, A: Wire<'a>, B: Wire<'a>> Wire<'a> for (A, B) {
    type Engine = (A::Engine, B::Engine);
    #[inline]
    fn into_engine(self) -> Option<Self::Engine> {
        Some((self.0.into_engine()?, self.1.into_engine()?))
    }
}

impl<'a, A: WireOf<'a>, B: WireOf<'a>> WireOf<'a> for (A, B) {
    #[inline]
    fn of((a, b): &'a Self::Engine) -> Self {
        (A::of(a), B::of(b))
    }
}

impl<'a, A: WireOf<'a>, B: WireOf<'a>, C: WireOf<'a>> WireOf<'a> for (A, B, C) {
    #[inline]
    fn of((a, b, c): &'a Self::Engine) -> Self {
        (A::of(a), B::of(b), C::of(c))
    }
}

impl<'a, A: Wire<'a>, B: Wire<'a>, C: Wire<'a>> Wire<'a> for (A, B, C) {
    type Engine = (A::Engine, B::Engine, C::Engine);
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
/// the engine's struct of the same field names, and the conversions between them: every
/// field through its own. `fill { field: value }` gives the engine's fields the format
/// does not hold. `read_only struct` declares one the current version no longer writes (an
/// older version's, for a type the current version changed): it converts into the engine's
/// type only ([`Wire`], not [`WireOf`]).
macro_rules! wire_struct {
    (
        $(#[$meta:meta])*
        $(read_only $($read_only:lifetime)?)? struct $name:ident $(<$a:lifetime>)? : $($engine:ident)::+ {
            $( $(#[$fmeta:meta])* $field:ident: $ty:ty ),* $(,)?
        }
        $( fill { $( $extra:ident: $value:expr ),* $(,)? } )?
    ) => {
        #[derive(serde::Serialize, serde::Deserialize)]
        $(#[$meta])*
        pub(in crate::engine::wire) struct $name $(<$a>)? { $( $(#[$fmeta])* $field: $ty ),* }

        $crate::engine::wire::convert::wire_struct!(@read [$($a)? 'w]
            $name $(<$a>)?, $($engine)::+, [$($field: $ty),*], [$($($extra: $value),*)?]);
        $crate::engine::wire::convert::wire_struct!(@write [$($($read_only)? read_only)?] [$($a)? 'w]
            $name $(<$a>)?, $($engine)::+, [$($field: $ty),*]);
    };
    (@read [$a:lifetime $($unused:lifetime)?] $t:ty, $($engine:ident)::+,
        [$($field:ident: $ty:ty),*], [$($extra:ident: $value:expr),*]) => {
        impl<$a> $crate::engine::wire::convert::Wire<$a> for $t {
            type Engine = $($engine)::+;
            #[inline]
            fn into_engine(self) -> Option<$($engine)::+> {
                Some($($engine)::+ {
                    $( $field: <$ty as $crate::engine::wire::convert::Wire<$a>>::into_engine(self.$field)?, )*
                    $( $extra: $value, )*
                })
            }
        }
    };
    (@write [read_only] $($rest:tt)*) => {};
    (@write [] [$a:lifetime $($unused:lifetime)?] $t:ty, $($engine:ident)::+,
        [$($field:ident: $ty:ty),*]) => {
        impl<$a> $crate::engine::wire::convert::WireOf<$a> for $t {
            #[inline]
            fn of(e: &$a $($engine)::+) -> Self {
                Self { $( $field: <$ty as $crate::engine::wire::convert::WireOf<$a>>::of(&e.$field) ),* }
            }
        }
    };
}

/// Declares a wire enum (serde's derives, its variants in the order of their indexes) for
/// the engine's enum of the same variants and field names, and the conversions between
/// them. A variant is a unit, has named fields (`V { a: T }`), or positional ones, named
/// here for the conversion (`V(a: T)`); bincode writes both kinds alike. `read_only enum`
/// declares one the current version no longer writes (see [`wire_struct!`]): the engine's
/// enum may then have variants it lacks.
macro_rules! wire_enum {
    (
        $(#[$meta:meta])*
        $(read_only $($read_only:lifetime)?)? enum $name:ident $(<$a:lifetime>)? : $($engine:ident)::+ {
            $( $(#[$vmeta:meta])* $variant:ident
                $( { $( $field:ident: $fty:ty ),* $(,)? } )?
                $( ( $( $pos:ident: $pty:ty ),* $(,)? ) )?
            ),* $(,)?
        }
    ) => {
        #[derive(serde::Serialize, serde::Deserialize)]
        $(#[$meta])*
        pub(in crate::engine::wire) enum $name $(<$a>)? {
            $( $(#[$vmeta])* $variant $( { $( $field: $fty ),* } )? $( ( $( $pty ),* ) )? ),*
        }

        $crate::engine::wire::convert::wire_enum!(@read [$($a)? 'w] $name $(<$a>)?,
            $($engine)::+, [$( $variant $( { $( $field: $fty ),* } )? $( ( $( $pos: $pty ),* ) )? ),*]);
        $crate::engine::wire::convert::wire_enum!(@write [$($($read_only)? read_only)?] [$($a)? 'w] $name $(<$a>)?,
            $($engine)::+, [$( $variant $( { $( $field: $fty ),* } )? $( ( $( $pos: $pty ),* ) )? ),*]);
    };
    (@read [$a:lifetime $($unused:lifetime)?] $t:ty, $($engine:ident)::+, [$( $variant:ident
        $( { $( $field:ident: $fty:ty ),* } )?
        $( ( $( $pos:ident: $pty:ty ),* ) )?
    ),*]) => {
        impl<$a> $crate::engine::wire::convert::Wire<$a> for $t {
            type Engine = $($engine)::+;
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
    (@write [read_only] $($rest:tt)*) => {};
    (@write [] [$a:lifetime $($unused:lifetime)?] $t:ty, $($engine:ident)::+, [$( $variant:ident
        $( { $( $field:ident: $fty:ty ),* } )?
        $( ( $( $pos:ident: $pty:ty ),* ) )?
    ),*]) => {
        impl<$a> $crate::engine::wire::convert::WireOf<$a> for $t {
            #[inline]
            fn of(e: &$a $($engine)::+) -> Self {
                type E = $($engine)::+;
                match e {
                    $( E::$variant $( { $( $field ),* } )? $( ( $( $pos ),* ) )? => {
                        Self::$variant
                            $( { $( $field: <$fty as $crate::engine::wire::convert::WireOf<$a>>::of($field) ),* } )?
                            $( ( $( <$pty as $crate::engine::wire::convert::WireOf<$a>>::of($pos) ),* ) )?
                    } )*
                }
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
        pub(in crate::engine::wire) struct $name($inner);

        impl $crate::engine::wire::convert::Wire<'_> for $name {
            type Engine = $engine;
            fn into_engine(self) -> Option<$engine> {
                let into: fn($inner) -> Option<$engine> = $into;
                into(self.0)
            }
        }

        impl $crate::engine::wire::convert::WireOf<'_> for $name {
            fn of(e: &$engine) -> Self {
                let of: fn(&$engine) -> $inner = $of;
                $name(of(e))
            }
        }
    };
}

pub(super) use {wire_enum, wire_newtype, wire_struct};
