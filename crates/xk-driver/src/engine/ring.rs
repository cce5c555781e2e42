//! A duplex pair of lock-free single-producer single-consumer rings (TN and
//! FN) with wake-ups only when the other side sleeps.
//!
//! The rings are `rtrb`'s (bounded, wait-free push and pop, already used by
//! `xk-loadgen`; its `unsafe` stays inside that crate). What this file adds
//! is each side's [`Doorbell`] — an eventfd and a `parked` word — for the
//! sleeping protocol of [`super::doorbell`] (shared with the daemon's
//! rings): a side wakes its peer only when the peer sleeps for what it just
//! made available, so a ping-pong costs one wake-up per message each way.

use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

use nix::sys::eventfd::{EfdFlags, EventFd};
use rtrb::{Consumer, Producer, RingBuffer};
use xk_time::Duration;

use crate::trace::RingTrace;

use super::doorbell::{self, WANT_ALL, WANT_DATA, WANT_SPACE, WANT_URGENT};

/// One side's wake-up: an eventfd and what the side sleeps for.
pub(crate) struct Doorbell {
    fd: EventFd,
    parked: AtomicU32,
    /// Times the other side rang (each is one wake-up of this side).
    rings: AtomicU64,
    /// Times this side went to sleep.
    sleeps: AtomicU64,
    /// The owner dropped its side (set before its last ring).
    gone: AtomicBool,
    /// Times the owner found its sending ring full.
    full: AtomicU64,
}

impl Doorbell {
    fn new() -> io::Result<Doorbell> {
        let fd =
            EventFd::from_flags(EfdFlags::EFD_NONBLOCK | EfdFlags::EFD_CLOEXEC).map_err(io::Error::from)?;
        Ok(Doorbell {
            fd,
            parked: AtomicU32::new(0),
            rings: AtomicU64::new(0),
            sleeps: AtomicU64::new(0),
            gone: AtomicBool::new(false),
            full: AtomicU64::new(0),
        })
    }

    /// Wakes the owner if it sleeps waiting for `what`.
    fn ring(&self, what: u32) {
        doorbell::ring(&self.parked, &self.rings, self.fd.as_fd(), what);
    }
}

/// Wake-up counters of a ring pair, as seen from one side.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RingStats {
    /// Times the engine rang the application's doorbell.
    pub app_wakeups: u64,
    /// Times the application went to sleep waiting for the engine.
    pub app_sleeps: u64,
    /// Times the application rang the engine's doorbell.
    pub engine_wakeups: u64,
    /// Times the engine went to sleep (on its socket and doorbell).
    pub engine_sleeps: u64,
    /// Times a post found the TN ring full.
    pub tn_full: u64,
    /// Times the engine found the FN ring full.
    pub fn_full: u64,
    /// Payload bytes the application's side copied to cross (daemon mode:
    /// writes copied into TN, and received data copied out of FN instead
    /// of viewed; the engine thread's rings copy nothing).
    pub app_copied: u64,
    /// Payload bytes the engine's side copied to cross (daemon mode: data
    /// copied into FN, writes copied out of TN instead of viewed).
    pub engine_copied: u64,
}

/// One side of the ring pair: sends `O`, receives `I`.
pub(crate) struct Link<O, I> {
    tx: Producer<O>,
    rx: Consumer<I>,
    mine: Arc<Doorbell>,
    theirs: Arc<Doorbell>,
    /// The application's side (for [`Link::stats`]).
    app: bool,
    /// The monitor's counts of the sending and receiving rings.
    tx_trace: RingTrace,
    rx_trace: RingTrace,
}

/// Ring numbers for the tracing monitor, process-wide.
static NEXT_RING: AtomicU64 = AtomicU64::new(1);

/// Makes the two sides: (application, engine). `slots` per ring.
pub(crate) fn pair<A, E>(slots: usize) -> io::Result<(Link<A, E>, Link<E, A>)> {
    let (tn_tx, tn_rx) = RingBuffer::new(slots);
    let (fn_tx, fn_rx) = RingBuffer::new(slots);
    let app_bell = Arc::new(Doorbell::new()?);
    let engine_bell = Arc::new(Doorbell::new()?);
    let tn = NEXT_RING.fetch_add(2, Ordering::Relaxed);
    let fnr = tn + 1;
    let app = Link {
        tx: tn_tx,
        rx: fn_rx,
        mine: app_bell.clone(),
        theirs: engine_bell.clone(),
        app: true,
        tx_trace: RingTrace::new(tn),
        rx_trace: RingTrace::new(fnr),
    };
    let engine = Link {
        tx: fn_tx,
        rx: tn_rx,
        mine: engine_bell,
        theirs: app_bell,
        app: false,
        tx_trace: RingTrace::new(fnr),
        rx_trace: RingTrace::new(tn),
    };
    Ok((app, engine))
}

impl<O, I> Link<O, I> {
    /// Posts a block; gives it back when the ring is full. A block that is
    /// not `urgent` does not wake a side sleeping for urgent blocks only.
    pub(crate) fn try_send(&mut self, block: O, urgent: bool) -> Result<(), O> {
        let at = crate::trace::span_start();
        match self.tx.push(block) {
            Ok(()) => {
                self.tx_trace.crossed(true, self.app, at);
                self.theirs.ring(if urgent { WANT_DATA | WANT_URGENT } else { WANT_DATA });
                Ok(())
            }
            Err(rtrb::PushError::Full(b)) => {
                self.mine.full.fetch_add(1, Ordering::Relaxed);
                Err(b)
            }
        }
    }

    /// Takes a block, if one is waiting.
    pub(crate) fn try_recv(&mut self) -> Option<I> {
        let b = self.rx.pop().ok()?;
        self.rx_trace.crossed(false, self.app, 0);
        // Only an atomic load unless the other side sleeps for space.
        self.theirs.ring(WANT_SPACE);
        Some(b)
    }

    /// Whether a block is waiting.
    pub(crate) fn has_input(&self) -> bool {
        !self.rx.is_empty()
    }

    /// Whether the sending ring is full.
    pub(crate) fn is_full(&self) -> bool {
        self.tx.is_full()
    }

    /// The other side has dropped its end (ended, or died).
    pub(crate) fn peer_gone(&self) -> bool {
        self.theirs.gone.load(Ordering::SeqCst)
    }

    /// Wakes the other side whatever it sleeps for (this side's sending
    /// ring is full: the other side must drain it).
    pub(crate) fn nudge(&self) {
        self.theirs.ring(WANT_ALL);
    }

    /// Sleeps until a block arrives (`data`; with `urgent_only`, a block
    /// sent as urgent — blocks already waiting end the sleep either way),
    /// the sending ring has room (`space`), `extra` is readable, or
    /// `timeout` passes. Returns whether `extra` is readable. Returns at
    /// once if a condition already holds or the other side is gone.
    pub(crate) fn park(
        &mut self,
        data: bool,
        urgent_only: bool,
        space: bool,
        extra: Option<BorrowedFd<'_>>,
        timeout: Option<Duration>,
    ) -> io::Result<bool> {
        let want = doorbell::want(data, urgent_only, space);
        let ready = || (data && !self.rx.is_empty()) || (space && !self.tx.is_full());
        // The application must not sleep on an engine that has ended; the
        // engine, lingering after the application left, sleeps on its
        // socket and timers as usual.
        if doorbell::announce(&self.mine.parked, want, || ready() || (self.app && self.peer_gone())) {
            return Ok(false);
        }
        self.mine.sleeps.fetch_add(1, Ordering::Relaxed);
        let extra: Vec<BorrowedFd<'_>> = extra.into_iter().collect();
        let r = doorbell::sleep(&self.mine.parked, self.mine.fd.as_fd(), &extra, timeout)?;
        Ok(r.first().copied().unwrap_or(false))
    }

    /// The first half of [`Link::park`] for a caller that waits for
    /// [`Link::bell_fd`] itself (the async API, in tokio's reactor):
    /// announces a sleep for data (and `space`); false if it must not sleep
    /// after all (a condition holds, or the engine is gone). A sleep that
    /// was announced ends with [`Link::disarm`].
    #[cfg(feature = "tokio")]
    pub(crate) fn arm(&mut self, space: bool) -> bool {
        let want = doorbell::want(true, false, space);
        let ready = || !self.rx.is_empty() || (space && !self.tx.is_full());
        if doorbell::announce(&self.mine.parked, want, || ready() || (self.app && self.peer_gone())) {
            return false;
        }
        self.mine.sleeps.fetch_add(1, Ordering::Relaxed);
        true
    }

    /// Ends a sleep announced by [`Link::arm`].
    #[cfg(feature = "tokio")]
    pub(crate) fn disarm(&self) {
        doorbell::woken(&self.mine.parked, self.mine.fd.as_fd());
    }

    /// The eventfd this side sleeps on.
    #[cfg(feature = "tokio")]
    pub(crate) fn bell_fd(&self) -> BorrowedFd<'_> {
        self.mine.fd.as_fd()
    }

    /// The wake-up counters of both sides.
    pub(crate) fn stats(&self) -> RingStats {
        let (app, engine) = if self.app { (&self.mine, &self.theirs) } else { (&self.theirs, &self.mine) };
        RingStats {
            app_wakeups: app.rings.load(Ordering::Relaxed),
            app_sleeps: app.sleeps.load(Ordering::Relaxed),
            engine_wakeups: engine.rings.load(Ordering::Relaxed),
            engine_sleeps: engine.sleeps.load(Ordering::Relaxed),
            tn_full: app.full.load(Ordering::Relaxed),
            fn_full: engine.full.load(Ordering::Relaxed),
            app_copied: 0,
            engine_copied: 0,
        }
    }
}

impl<O, I> Drop for Link<O, I> {
    /// Wakes the other side whatever it waits for: it finds this side gone.
    fn drop(&mut self) {
        self.mine.gone.store(true, Ordering::SeqCst);
        self.theirs.ring(WANT_DATA | WANT_SPACE);
    }
}
