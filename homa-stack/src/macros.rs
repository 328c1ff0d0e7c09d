//! Internal logging macros routed to `log` or `defmt`, and the
//! `enum_with_unknown!` helper for protocol numbers.
//!
//! Normal events go out at TRACE, malformed or unexpected input at DEBUG;
//! nothing louder comes from the library. With neither feature the macros
//! still evaluate their arguments, so no variable becomes unused.

#[cfg(feature = "log")]
#[allow(unused_macros)]
macro_rules! net_log {
    (trace, $($arg:expr),*) => { log::trace!($($arg),*) };
    (debug, $($arg:expr),*) => { log::debug!($($arg),*) };
}

// defmt formats on the host from the raw values, so every argument is
// passed as itself: log lines use `{}` with arguments that are both
// `Display` (for `log`) and `defmt::Format`.
#[cfg(feature = "defmt")]
#[allow(unused_macros)]
macro_rules! net_log {
    (trace, $fmt:literal $(, $arg:expr)*) => { defmt::trace!($fmt $(, $arg)*) };
    (debug, $fmt:literal $(, $arg:expr)*) => { defmt::debug!($fmt $(, $arg)*) };
}

#[cfg(not(any(feature = "log", feature = "defmt")))]
#[allow(unused_macros)]
macro_rules! net_log {
    ($level:ident, $($arg:expr),*) => {{ $( let _ = &$arg; )* }};
}

/// A normal event.
#[allow(unused_macros)]
macro_rules! net_trace {
    ($($arg:expr),* $(,)?) => { net_log!(trace, $($arg),*) };
}

/// Malformed or unexpected input.
#[allow(unused_macros)]
macro_rules! net_debug {
    ($($arg:expr),* $(,)?) => { net_log!(debug, $($arg),*) };
}

/// Defines a protocol-number enum with an `Unknown(raw)` arm, so unknown codes
/// round-trip, and `From` conversions both ways.
macro_rules! enum_with_unknown {
    (
        $( #[$enum_attr:meta] )*
        pub enum $name:ident($ty:ty) {
            $(
              $( #[$variant_attr:meta] )*
              $variant:ident = $value:expr
            ),+ $(,)?
        }
    ) => {
        #[derive(Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Clone, Copy)]
        #[cfg_attr(feature = "defmt", derive(defmt::Format))]
        $( #[$enum_attr] )*
        pub enum $name {
            $(
              $( #[$variant_attr] )*
              $variant
            ),*,
            /// A value this crate does not know.
            Unknown($ty)
        }

        impl ::core::convert::From<$ty> for $name {
            fn from(value: $ty) -> Self {
                match value {
                    $( $value => $name::$variant ),*,
                    other => $name::Unknown(other)
                }
            }
        }

        impl ::core::convert::From<$name> for $ty {
            fn from(value: $name) -> Self {
                match value {
                    $( $name::$variant => $value ),*,
                    $name::Unknown(other) => other
                }
            }
        }
    }
}
