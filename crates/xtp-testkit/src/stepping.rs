//! The clock of a perfect wire between two peers, one copy for [`Wire`]
//! (two endpoints) and [`GraphWire`] (two protocol graphs): move what each
//! peer sends until both are quiet, then jump to the earlier peer's next
//! timer, until a given virtual time.
//!
//! [`Wire`]: crate::Wire
//! [`GraphWire`]: crate::GraphWire

use xk_time::{Duration, Instant};

/// Two peers joined by a wire, as the clock steps them.
pub(crate) trait Stepped {
    /// Delivers what the first peer sends; how many datagrams.
    fn deliver_a(&mut self) -> usize;
    /// Delivers what the second peer sends; how many datagrams.
    fn deliver_b(&mut self) -> usize;
    /// The earlier of the two peers' next timers.
    fn next_timer(&mut self) -> Option<Instant>;
    /// Runs both peers' timers due at `now`.
    fn fire(&mut self, now: Instant);
    /// The wire's virtual time.
    fn now(&mut self) -> &mut Instant;
    /// Tells the peers time reached `end` without a timer (a no-op for
    /// peers that only learn the time from calls).
    fn idle_until(&mut self, _end: Instant) {}
}

/// Moves datagrams both ways until both peers are quiet (bounded: two peers
/// that never fall quiet end the test rather than hang it).
pub(crate) fn exchange(s: &mut impl Stepped) {
    for _ in 0..1_000_000 {
        if s.deliver_a() + s.deliver_b() == 0 {
            return;
        }
    }
}

/// Jumps to the earlier peer's next timer, if there is one no later than
/// `end`, and runs both peers' timers there; whether time moved to a timer.
pub(crate) fn fire_next_timer(s: &mut impl Stepped, end: Option<Instant>) -> bool {
    match s.next_timer() {
        Some(t) if end.is_none_or(|end| t <= end) => {
            let now = (*s.now()).max(t);
            *s.now() = now;
            s.fire(now);
            true
        }
        _ => false,
    }
}

/// Runs for `d` of virtual time, jumping between timers.
pub(crate) fn run(s: &mut impl Stepped, d: Duration) {
    let end = *s.now() + d;
    loop {
        exchange(s);
        if !fire_next_timer(s, Some(end)) {
            *s.now() = end;
            s.idle_until(end);
            return;
        }
    }
}
