//! The wall clock as an [`xk_time::Instant`]: nanoseconds since the clock was
//! created (monotonic).
//!
//! Read from `CLOCK_MONOTONIC` directly (what `std::time::Instant` reads
//! on Linux) so the tracing monitor's timestamps, taken on the same clock,
//! relate to the engine's `now` exactly: [`Clock::epoch_ns`] + `now`.

use xk_time::Instant;

use crate::trace::mono_ns;

/// A monotonic clock whose epoch is its creation.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    epoch: u64,
}

impl Default for Clock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock {
    /// A clock starting now.
    pub fn new() -> Self {
        Clock { epoch: mono_ns() }
    }

    /// Time since the epoch.
    pub fn now(&self) -> Instant {
        Instant::from_nanos(mono_ns().saturating_sub(self.epoch))
    }

    /// The epoch, in nanoseconds on `CLOCK_MONOTONIC`.
    pub fn epoch_ns(&self) -> u64 {
        self.epoch
    }
}

/// A seed for an endpoint's randomness (keys, jitter) from the wall clock:
/// real sockets need unpredictable keys, not reproducible ones.
pub fn time_seed() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(7, |d| d.as_nanos() as u64)
}
