//! The wall clock as an [`xk_time::Instant`]: nanoseconds since the clock was
//! created (monotonic).
//!
//! Read from `CLOCK_MONOTONIC` directly (what `std::time::Instant` reads
//! on Linux) so the tracing monitor's timestamps, taken on the same clock,
//! relate to the engine's `now` exactly: [`Clock::epoch_ns`] + `now`.
//!
//! A simulation's time is the other [`TimeSource`]: [`VirtualClock`], which
//! the simulator sets and never reads from the system.

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

/// Virtual time, set by whoever runs a simulation (the async API's
/// simulated backend, `aio::sim`) and read by the calls made meanwhile:
/// shared, so every socket of one simulated network reads the same time.
#[derive(Clone, Debug, Default)]
pub struct VirtualClock(std::sync::Arc<std::sync::atomic::AtomicU64>);

impl VirtualClock {
    /// The time last set.
    pub fn now(&self) -> Instant {
        Instant::from_nanos(self.0.load(std::sync::atomic::Ordering::Acquire))
    }

    /// Moves the time to `t`.
    pub fn set(&self, t: Instant) {
        self.0.store(t.as_nanos(), std::sync::atomic::Ordering::Release);
    }
}

/// Where an endpoint's `now` comes from: the wall clock (real sockets) or
/// a simulation's virtual time. One type, so the code that drives an
/// endpoint is the same for both.
#[derive(Clone, Debug)]
pub enum TimeSource {
    /// The monotonic wall clock.
    Wall(Clock),
    /// A simulation's time.
    Virtual(VirtualClock),
}

impl TimeSource {
    /// The current time.
    pub fn now(&self) -> Instant {
        match self {
            TimeSource::Wall(c) => c.now(),
            TimeSource::Virtual(v) => v.now(),
        }
    }
}
