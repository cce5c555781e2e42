//! The engine thread's loop: the [`Engine`] serving one session, the
//! application in the same process, through the in-process rings of
//! [`super::ring`].
//!
//! Each pass: apply the posted blocks, send and deliver
//! ([`Engine::after_apply`]), then wait — on the socket, the doorbell and
//! the next timer together (blocking), or not at all (busy-poll). When the
//! application's side is gone the engine closes the contexts left open,
//! serves them until they are over (at most [`LINGER`]) and ends.

use std::io;

use xk_time::{Duration, Instant};

use super::EngineConfig;
use super::block::{BlockError, CtxHandle, FromEngine, ToEngine};
use super::ring::Link;
use super::serve::{Engine, Port};
use crate::driver::Driver;
use crate::transport::Transport;

/// How long the engine keeps serving after the application left, for the
/// contexts it left to close (TCP's TIME_WAIT in user space).
const LINGER: Duration = Duration::from_secs(600);

/// The in-process rings as the engine's port: blocks cross as they are.
impl Port for Link<FromEngine, ToEngine> {
    fn try_recv(&mut self) -> Option<Result<ToEngine, (CtxHandle, BlockError)>> {
        Link::try_recv(self).map(Ok)
    }
    fn try_send(&mut self, b: FromEngine, urgent: bool) -> Result<(), FromEngine> {
        Link::try_send(self, b, urgent)
    }
    fn has_input(&self) -> bool {
        Link::has_input(self)
    }
    fn peer_gone(&self) -> bool {
        Link::peer_gone(self)
    }
    fn nudge(&self) {
        Link::nudge(self)
    }
    fn max_payload(&self) -> u64 {
        // The application is this process: its writes are not split, and
        // not checked against the bound either.
        u64::MAX
    }
}

/// Runs until the application has left and every context is over (or the
/// linger ran out), or the socket fails.
pub(super) fn run<T: Transport>(
    d: Driver<T>,
    link: Link<FromEngine, ToEngine>,
    cfg: EngineConfig,
) -> io::Result<()> {
    let mut e = Engine::new(d, cfg);
    e.add_session(0, link);
    let mut left_at: Option<Instant> = None;
    loop {
        let posted = e.apply_posted();
        if left_at.is_none() && !e.gone_sessions().is_empty() {
            left_at = Some(e.driver().now());
            // Kept (not returned) so the loop can still sleep on its doorbell.
            e.remove_session(0, false);
        }
        e.after_apply(posted)?;
        if let Some(t) = left_at
            && (e.context_count() == 0 || e.driver().now().saturating_since(t) >= LINGER)
        {
            return Ok(());
        }
        if cfg.busy_poll || e.has_input() {
            e.driver().poll_input()?;
            continue;
        }
        let sleep = e.sleep_for();
        let space = e.backlogged();
        // A paused session's blocks wait in TN until the application makes
        // room in FN: sleep for that room, not for its blocks.
        let data = left_at.is_none() && !e.session_paused(0);
        // A zero wait still looks at the socket (without sleeping).
        if !sleep.is_zero() {
            sleep_on(&mut e, data, space, sleep)?;
        }
        e.driver().poll_input()?;
    }
}

/// Parks on the session's doorbell and the socket (the socket alone once
/// the application left).
fn sleep_on<T: Transport>(
    e: &mut Engine<T, Link<FromEngine, ToEngine>>,
    data: bool,
    space: bool,
    sleep: Duration,
) -> io::Result<()> {
    match e.split(0) {
        (fd, Some(link)) => link.park(data, false, space, Some(fd), Some(sleep)).map(|_| ()),
        (fd, None) => {
            // The socket alone: doorbells would start at `fds.len()` (none).
            let fds = [fd];
            super::serve::wait_readable(&fds, fds.len(), sleep).map(|_| ())
        }
    }
}
