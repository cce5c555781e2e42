//! Time for the xpress framework: a nanosecond [`Instant`] and timer queues.
//!
//! # Contract
//!
//! Nothing here reads a clock. Time is a number handed in by the caller: the
//! simulator advances it event by event, a real driver reads the OS clock once per
//! loop and passes it down. That is what makes protocol runs reproducible.
//!
//! A [`TimerQueue`] holds pending timers, each a deadline and a value. All three
//! implementations obey the same rules, and a differential property test holds
//! them to it against a trivial sorted-map reference:
//!
//! * [`TimerQueue::poll_expired`]`(now)` returns the pending timer with the
//!   smallest deadline that is `<= now`; timers with equal deadlines fire in the
//!   order they were scheduled.
//! * [`TimerQueue::cancel`] of a pending timer returns its value; of a timer that
//!   fired or was cancelled already, `None` (ids carry a generation).
//! * [`TimerQueue::next_deadline`] is the exact smallest pending deadline.
//! * A deadline in the past is allowed; it fires on the next poll.
//!
//! | queue | schedule | cancel | expire | note |
//! |---|---|---|---|---|
//! | [`HeapQueue`] | O(log n) | O(1) amortised (lazy) | O(log n) | binary heap; cancelled entries are skipped when they surface |
//! | [`DeltaList`] | O(n) (O(1) at the tail) | O(1) | O(1) | x-kernel / PIX event manager: each node stores the gap to its predecessor |
//! | [`TimingWheel`] | O(1) | O(1) | O(1) amortised | hierarchical wheel, 11 levels of 64 slots at 1 ns resolution |

mod delta_list;
mod heap;
mod instant;
mod slab;
mod wheel;

pub use core::time::Duration;
pub use delta_list::DeltaList;
pub use heap::HeapQueue;
pub use instant::{Instant, duration_nanos};
pub use wheel::TimingWheel;

/// Names one scheduled timer. Ids of fired or cancelled timers become stale and
/// are recognised as such: the slot index is paired with a generation number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TimerId {
    index: u32,
    generation: u32,
}

/// A timer handed back by [`TimerQueue::poll_expired`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Expired<T> {
    /// The id returned when the timer was scheduled.
    pub id: TimerId,
    /// When the timer was due (at or before the `now` it was polled with).
    pub deadline: Instant,
    /// The value stored with the timer.
    pub value: T,
}

/// A set of pending timers ordered by deadline, then by scheduling order.
///
/// See the crate documentation for the rules every implementation follows.
pub trait TimerQueue<T> {
    /// Adds a timer that fires at `deadline`.
    fn schedule(&mut self, deadline: Instant, value: T) -> TimerId;

    /// Removes a pending timer and returns its value; `None` if it is not
    /// pending (fired, cancelled, or never issued by this queue).
    fn cancel(&mut self, id: TimerId) -> Option<T>;

    /// The earliest pending deadline. Takes `&mut self` because the lazy
    /// structures tidy themselves on the way (never changing what fires when).
    fn next_deadline(&mut self) -> Option<Instant>;

    /// Removes and returns the earliest timer due at or before `now`.
    ///
    /// `now` should not go backwards between calls; if it does, nothing is
    /// lost, but nothing fires until `now` catches up with the deadlines.
    fn poll_expired(&mut self, now: Instant) -> Option<Expired<T>>;

    /// Number of pending timers.
    fn len(&self) -> usize;

    /// Whether no timer is pending.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Calls `fire` for every timer due at or before `now`, in firing order.
    fn expire_all(&mut self, now: Instant, mut fire: impl FnMut(Expired<T>))
    where
        Self: Sized,
    {
        while let Some(e) = self.poll_expired(now) {
            fire(e);
        }
    }
}

#[cfg(test)]
mod tests;
