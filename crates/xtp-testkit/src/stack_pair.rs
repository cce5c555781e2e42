//! What tests and benchmarks drive on two joined stacks, whichever
//! composition holds them: [`GraphWire`](crate::GraphWire) (run-time
//! graphs) and [`StackWire`](crate::StackWire) (compiled stacks). One
//! driver loop then serves both, instead of a copy per composition.

use xk_core::compiled::DeviceCx;
use xk_core::{Event, Layer, PushError, SessionId};
use xk_msg::Msg;
use xk_time::Instant;

use crate::{GraphWire, StackWire};

/// Two stacks, `a` and `b`, joined by a wire.
pub trait StackPair<M> {
    /// Delivers everything `a` (or `b`) sends to the other; returns how
    /// many frames.
    fn deliver(&mut self, from_a: bool) -> usize;
    /// The next event for the application at `a` (or `b`).
    fn poll_event(&mut self, at_a: bool) -> Option<Event<M>>;
    /// Sends `msg` as a whole message on `session` at `a` (or `b`).
    fn push(&mut self, at_a: bool, session: SessionId, msg: M) -> Result<(), PushError>;
    /// Sends `msg` as a piece of a message, ending it if `eom`.
    fn push_part(&mut self, at_a: bool, session: SessionId, msg: M, eom: bool) -> Result<(), PushError>;
    /// Jumps to the next timer no later than `end` and runs it.
    fn fire_next_timer(&mut self, end: Option<Instant>) -> bool;
}

/// The methods both wires have under the same names. Inline: the
/// benchmarks' loops call them per packet, and a call here would be
/// charged to whichever composition's loop it happened to land in.
macro_rules! forward {
    () => {
        #[inline]
        fn deliver(&mut self, from_a: bool) -> usize {
            if from_a { self.from_a() } else { self.from_b() }
        }
        #[inline]
        fn poll_event(&mut self, at_a: bool) -> Option<Event<M>> {
            if at_a { self.a.poll_event() } else { self.b.poll_event() }
        }
        #[inline]
        fn push(&mut self, at_a: bool, session: SessionId, msg: M) -> Result<(), PushError> {
            if at_a { self.a.push(session, msg) } else { self.b.push(session, msg) }
        }
        #[inline]
        fn push_part(&mut self, at_a: bool, session: SessionId, msg: M, eom: bool) -> Result<(), PushError> {
            if at_a { self.a.push_part(session, msg, eom) } else { self.b.push_part(session, msg, eom) }
        }
        #[inline]
        fn fire_next_timer(&mut self, end: Option<Instant>) -> bool {
            // The inherent method (it takes precedence over this one).
            Self::fire_next_timer(self, end)
        }
    };
}

impl<M: Msg> StackPair<M> for GraphWire<M> {
    forward!();
}

impl<M: Msg, P: Layer<M, DeviceCx<M>>> StackPair<M> for StackWire<M, P> {
    forward!();
}
