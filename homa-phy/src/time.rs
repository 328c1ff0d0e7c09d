//! Time as a value: the stack never reads a clock, every entry point takes `now`.
//!
//! Both types count nanoseconds in a `u64`: pacing at 100 Gbit/s needs
//! sub-microsecond steps (a 1500-byte frame takes 121 ns), and 2^64 ns is
//! about 584 years, so a monotonic clock started at zero never wraps.

use core::fmt;
use core::ops::{Add, AddAssign, Sub, SubAssign};

/// A point in time, in nanoseconds since an arbitrary epoch chosen by the caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Instant {
    nanos: u64,
}

/// A span of time in nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Duration {
    nanos: u64,
}

impl Instant {
    /// The epoch.
    pub const ZERO: Instant = Instant { nanos: 0 };
    /// The latest representable instant; used as "never".
    pub const MAX: Instant = Instant { nanos: u64::MAX };

    /// An instant `nanos` nanoseconds after the epoch.
    pub const fn from_nanos(nanos: u64) -> Instant {
        Instant { nanos }
    }
    /// An instant `micros` microseconds after the epoch (saturating).
    pub const fn from_micros(micros: u64) -> Instant {
        Instant {
            nanos: micros.saturating_mul(1_000),
        }
    }
    /// An instant `millis` milliseconds after the epoch (saturating).
    pub const fn from_millis(millis: u64) -> Instant {
        Instant {
            nanos: millis.saturating_mul(1_000_000),
        }
    }
    /// An instant `secs` seconds after the epoch (saturating).
    pub const fn from_secs(secs: u64) -> Instant {
        Instant {
            nanos: secs.saturating_mul(1_000_000_000),
        }
    }
    /// Nanoseconds since the epoch.
    pub const fn total_nanos(self) -> u64 {
        self.nanos
    }
    /// Whole microseconds since the epoch.
    pub const fn total_micros(self) -> u64 {
        self.nanos / 1_000
    }
    /// Whole milliseconds since the epoch.
    pub const fn total_millis(self) -> u64 {
        self.nanos / 1_000_000
    }
    /// The time from `earlier` to `self`, or zero if `earlier` is later.
    pub const fn saturating_duration_since(self, earlier: Instant) -> Duration {
        Duration {
            nanos: self.nanos.saturating_sub(earlier.nanos),
        }
    }
}

impl Duration {
    /// No time at all.
    pub const ZERO: Duration = Duration { nanos: 0 };
    /// The longest representable span.
    pub const MAX: Duration = Duration { nanos: u64::MAX };

    /// A span of `nanos` nanoseconds.
    pub const fn from_nanos(nanos: u64) -> Duration {
        Duration { nanos }
    }
    /// A span of `micros` microseconds (saturating).
    pub const fn from_micros(micros: u64) -> Duration {
        Duration {
            nanos: micros.saturating_mul(1_000),
        }
    }
    /// A span of `millis` milliseconds (saturating).
    pub const fn from_millis(millis: u64) -> Duration {
        Duration {
            nanos: millis.saturating_mul(1_000_000),
        }
    }
    /// A span of `secs` seconds (saturating).
    pub const fn from_secs(secs: u64) -> Duration {
        Duration {
            nanos: secs.saturating_mul(1_000_000_000),
        }
    }
    /// The span in nanoseconds.
    pub const fn total_nanos(self) -> u64 {
        self.nanos
    }
    /// The span in whole microseconds.
    pub const fn total_micros(self) -> u64 {
        self.nanos / 1_000
    }
    /// The span in whole milliseconds.
    pub const fn total_millis(self) -> u64 {
        self.nanos / 1_000_000
    }
}

impl Add<Duration> for Instant {
    type Output = Instant;
    /// Saturates at [`Instant::MAX`] rather than overflowing.
    #[cfg_attr(target_os = "none", inline(never))]
    fn add(self, rhs: Duration) -> Instant {
        Instant {
            nanos: self.nanos.saturating_add(rhs.nanos),
        }
    }
}
impl AddAssign<Duration> for Instant {
    fn add_assign(&mut self, rhs: Duration) {
        *self = *self + rhs;
    }
}
impl Sub<Duration> for Instant {
    type Output = Instant;
    /// Saturates at [`Instant::ZERO`].
    fn sub(self, rhs: Duration) -> Instant {
        Instant {
            nanos: self.nanos.saturating_sub(rhs.nanos),
        }
    }
}
impl SubAssign<Duration> for Instant {
    fn sub_assign(&mut self, rhs: Duration) {
        *self = *self - rhs;
    }
}
impl Sub<Instant> for Instant {
    type Output = Duration;
    /// Saturates at [`Duration::ZERO`] when `rhs` is later.
    fn sub(self, rhs: Instant) -> Duration {
        self.saturating_duration_since(rhs)
    }
}
impl Add for Duration {
    type Output = Duration;
    fn add(self, rhs: Duration) -> Duration {
        Duration {
            nanos: self.nanos.saturating_add(rhs.nanos),
        }
    }
}
impl AddAssign for Duration {
    fn add_assign(&mut self, rhs: Duration) {
        *self = *self + rhs;
    }
}
impl Sub for Duration {
    type Output = Duration;
    fn sub(self, rhs: Duration) -> Duration {
        Duration {
            nanos: self.nanos.saturating_sub(rhs.nanos),
        }
    }
}

impl fmt::Display for Instant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}.{:06}s",
            self.nanos / 1_000_000_000,
            (self.nanos / 1_000) % 1_000_000
        )
    }
}
impl fmt::Display for Duration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.nanos < 10_000 {
            write!(f, "{}ns", self.nanos)
        } else if self.nanos < 10_000_000 {
            write!(f, "{}us", self.nanos / 1_000)
        } else {
            write!(f, "{}ms", self.nanos / 1_000_000)
        }
    }
}

#[cfg(feature = "std")]
impl From<Duration> for std::time::Duration {
    fn from(d: Duration) -> std::time::Duration {
        std::time::Duration::from_nanos(d.nanos)
    }
}
#[cfg(feature = "std")]
impl From<std::time::Duration> for Duration {
    fn from(d: std::time::Duration) -> Duration {
        Duration {
            nanos: u64::try_from(d.as_nanos()).unwrap_or(u64::MAX),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_saturates_instead_of_wrapping() {
        assert_eq!(Instant::MAX + Duration::from_secs(1), Instant::MAX);
        assert_eq!(Instant::ZERO - Duration::from_secs(1), Instant::ZERO);
        assert_eq!(
            Instant::from_millis(1) - Instant::from_millis(2),
            Duration::ZERO
        );
        assert_eq!(
            Instant::from_millis(3) - Instant::from_millis(1),
            Duration::from_millis(2)
        );
    }

    #[test]
    fn units_convert() {
        assert_eq!(Instant::from_micros(1500).total_millis(), 1);
        assert_eq!(Duration::from_millis(2).total_micros(), 2000);
        assert_eq!(format!("{}", Duration::from_nanos(121)), "121ns");
        assert_eq!(format!("{}", Instant::from_micros(1_500_001)), "1.500001s");
    }
}
