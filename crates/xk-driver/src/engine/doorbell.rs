//! The doorbell protocol, one copy for both kinds of rings: the engine
//! thread's in-process rings (`ring.rs`, the words in an `Arc`) and the
//! daemon's shared-memory rings (`daemon/link.rs`, the words in the
//! client's segment). Each side has an eventfd (so it can sleep on it
//! together with a socket) and a `parked` word saying what it sleeps for.
//!
//! The sleeper stores `parked`, a full fence, checks its condition again
//! ([`announce`]), and only then sleeps ([`sleep`]). The waker makes
//! something available (pushes or pops), a full fence, and writes the
//! eventfd only if `parked` asks for what it made available ([`ring`]).
//! One of the two always sees the other's store (the store-buffering litmus
//! with sequentially consistent fences), so no wake-up is lost, and a side
//! that is running costs its peer no system call: one wake-up per message
//! each way, not one per packet (seed 004's one interrupt per message).
//!
//! Where the words live is the caller's business; in a shared segment the
//! other process may write them, and they only ever decide whether to write
//! an eventfd.

use std::io;
use std::os::fd::BorrowedFd;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering, fence};

use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, ppoll};
use nix::sys::time::TimeSpec;
use xk_time::Duration;

/// A block arrived (any block).
pub(crate) const WANT_DATA: u32 = 1;
/// Room in the sending ring.
pub(crate) const WANT_SPACE: u32 = 2;
/// An urgent block (a message's end: a reader in `recv_message` need not
/// wake for each of its chunks).
pub(crate) const WANT_URGENT: u32 = 4;
/// Whatever it waits for.
pub(crate) const WANT_ALL: u32 = WANT_DATA | WANT_SPACE | WANT_URGENT;

/// The `parked` bits for a sleeper waiting for data (with `urgent_only`,
/// urgent data) and/or room.
pub(crate) fn want(data: bool, urgent_only: bool, space: bool) -> u32 {
    let d = match (data, urgent_only) {
        (false, _) => 0,
        (true, false) => WANT_DATA,
        (true, true) => WANT_URGENT,
    };
    d | if space { WANT_SPACE } else { 0 }
}

/// The waker's half: after making `what` available, wakes the owner of
/// `parked` if it sleeps for it (counting the wake-up in `rings`).
pub(crate) fn ring(parked: &AtomicU32, rings: &AtomicU64, bell: BorrowedFd<'_>, what: u32) {
    fence(Ordering::SeqCst);
    if parked.load(Ordering::Relaxed) & what == 0 {
        return;
    }
    let waited = parked.swap(0, Ordering::SeqCst);
    if waited != 0 {
        rings.fetch_add(1, Ordering::Relaxed);
        // Before the write, so the sleeper's wake latency is measured from
        // the moment it could first have woken. The sleeper's bits (the
        // event's documented `a`), not `what`.
        crate::trace::instant(xk_trace::Point::Bell, 0, u64::from(waited), 0);
        // Cannot fail short of the counter overflowing (2^64 - 2 rings).
        let _ = rustix::io::write(bell, &1u64.to_ne_bytes());
    }
}

/// The sleeper's half before it sleeps: announces `want`, then checks
/// `ready` again. True: it must not sleep after all (`parked` is cleared).
pub(crate) fn announce(parked: &AtomicU32, want: u32, ready: impl FnOnce() -> bool) -> bool {
    parked.store(want, Ordering::SeqCst);
    fence(Ordering::SeqCst);
    let ready = ready();
    if ready {
        parked.store(0, Ordering::SeqCst);
    }
    ready
}

/// The sleeper's half after it woke (or gave up waiting): clears `parked`
/// and empties the eventfd (EAGAIN when nobody rang). [`sleep`] ends with
/// it; the async API, which waits for the eventfd in tokio's reactor
/// instead of `ppoll`, calls it itself.
pub(crate) fn woken(parked: &AtomicU32, bell: BorrowedFd<'_>) {
    parked.store(0, Ordering::SeqCst);
    let mut b = [0u8; 8];
    let _ = rustix::io::read(bell, &mut b);
}

/// Sleeps (after [`announce`]) until the eventfd `bell` or one of `extra`
/// is readable or `timeout` passes (nanosecond resolution: the engine's
/// timers, pacing among them, need better than poll's milliseconds); then
/// clears `parked` and empties the eventfd. Returns which of `extra` are
/// readable; an interrupted sleep counts as a timeout.
pub(crate) fn sleep(
    parked: &AtomicU32,
    bell: BorrowedFd<'_>,
    extra: &[BorrowedFd<'_>],
    timeout: Option<Duration>,
) -> io::Result<Vec<bool>> {
    let ts = timeout.map(|d| TimeSpec::from_duration(std::time::Duration::from_nanos(d.as_nanos() as u64)));
    let mut fds: Vec<PollFd<'_>> = std::iter::once(bell)
        .chain(extra.iter().copied())
        .map(|fd| PollFd::new(fd, PollFlags::POLLIN))
        .collect();
    let t0 = crate::trace::span_start();
    let r = ppoll(&mut fds, ts, None);
    crate::trace::park_end(t0, timeout, &r, fds.iter().map(|p| p.any().unwrap_or(false)), 0..1);
    woken(parked, bell);
    match r {
        Ok(_) => Ok(fds[1..].iter().map(|p| p.any().unwrap_or(false)).collect()),
        Err(Errno::EINTR) => Ok(vec![false; extra.len()]),
        Err(e) => Err(io::Error::from(e)),
    }
}
