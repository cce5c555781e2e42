//! The wall clock as an [`xk_time::Instant`]: nanoseconds since the clock was
//! created (monotonic).

use std::time::Instant as StdInstant;

use xk_time::Instant;

/// A monotonic clock whose epoch is its creation.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    epoch: StdInstant,
}

impl Default for Clock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock {
    /// A clock starting now.
    pub fn new() -> Self {
        Clock { epoch: StdInstant::now() }
    }

    /// Time since the epoch.
    pub fn now(&self) -> Instant {
        Instant::from_nanos(u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX))
    }
}

/// A seed for an endpoint's randomness (keys, jitter) from the wall clock:
/// real sockets need unpredictable keys, not reproducible ones.
pub fn time_seed() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(7, |d| d.as_nanos() as u64)
}
