//! One thread for every integrated endpoint that outlived its API objects.
//!
//! When the last `XtpStream`, listener or transaction of an integrated
//! endpoint is gone while contexts remain (closed but lingering, so that a
//! peer which missed our final acknowledgement still gets it), the endpoint
//! must go on answering until they end — what a kernel does for TCP's
//! TIME_WAIT. It used to get a thread of its own each time. A one-shot
//! [`super::transaction`] binds an endpoint per call, so a client running
//! transactions back to back left one thread per transaction turning its
//! endpoint while its context lingered (as the END sender, for the
//! server's retry span: 243 s at the initial RTO, G16) — thousands of
//! threads, whose wake-ups took the machine long after the client had
//! finished (found by the load generator's report, E7, where every row
//! after the transaction adapter's measured them instead of itself).
//!
//! Now they all go to one reaper thread, started on first use. It waits on
//! one epoll set holding every adopted driver's input descriptor and an
//! eventfd that announces new ones, for the earliest of their timers; on
//! waking it runs only the drivers with input and those whose timer is
//! due (timers in a heap, so the cost per wake-up does not grow with the
//! number of lingering endpoints). A driver leaves when its last context is
//! freed, or after ten minutes (the old bound).
//!
//! Each lingering endpoint holds its socket, so their number is bounded:
//! beyond [`max_lingering`] one is closed early and counted, as Linux
//! destroys TIME_WAIT sockets beyond `tcp_max_tw_buckets`: the oldest
//! whose contexts have all ended ([`xtp_proto::Endpoint::only_lingering`]),
//! so that an endpoint still delivering what a dropped stream wrote keeps
//! its data; only when none of the oldest [`EVICT_SCAN`] has ended is the
//! oldest closed whatever its state (counted apart: data lost). Without
//! the bound, transactions at 12,000/s held 20,000 descriptors within two
//! seconds and every later socket of the process failed with "Too many
//! open files" (E7's transaction rows, and the rows after them). An early
//! close costs only this: a server that missed the END retries into a
//! closed port and times out on a context whose data it already has.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex, OnceLock};

use nix::sys::epoll::{Epoll, EpollCreateFlags, EpollEvent, EpollFlags, EpollTimeout};
use nix::sys::eventfd::{EfdFlags, EventFd};

use crate::driver::UdpDriver;

/// The longest a lingering endpoint is kept.
const MAX_LINGER: std::time::Duration = std::time::Duration::from_secs(600);

/// Lingering endpoints (one socket each) kept at most: 4,096, or a quarter
/// of the process's descriptor limit if that is less (a soft limit of
/// 1,024 is common), so the application keeps the rest.
pub fn max_lingering() -> usize {
    static MAX: OnceLock<usize> = OnceLock::new();
    *MAX.get_or_init(|| {
        let soft = rustix::process::getrlimit(rustix::process::Resource::Nofile).current;
        soft.map_or(4096, |n| (n / 4).clamp(16, 4096) as usize)
    })
}

/// Lingering endpoints closed early because [`max_lingering`] were held.
static EVICTED: AtomicU64 = AtomicU64::new(0);
/// Of those, endpoints closed with a context that had not ended.
static EVICTED_LIVE: AtomicU64 = AtomicU64::new(0);
/// How many of the oldest endpoints are looked at for one whose contexts
/// have all ended, before the oldest is taken whatever its state (bounds
/// the work per adoption when all are still draining).
const EVICT_SCAN: usize = 64;
/// Lingering endpoints held now.
static LINGERING: AtomicU64 = AtomicU64::new(0);
/// Lingering endpoints dropped at once because no reaper could be had.
static LOST: AtomicU64 = AtomicU64::new(0);

/// What the reaper holds and has let go early.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LingerCounts {
    /// Endpoints lingering on the reaper now.
    pub lingering: u64,
    /// Closed early because [`max_lingering`] were held.
    pub evicted: u64,
    /// Of `evicted`, closed while a context had not ended (still sending,
    /// receiving or closing): what it had not delivered was lost.
    pub evicted_live: u64,
    /// Dropped at once: no reaper thread could be started (descriptors or
    /// threads exhausted).
    pub lost: u64,
}

/// The reaper's counts since the process started.
pub fn linger_counts() -> LingerCounts {
    LingerCounts {
        lingering: LINGERING.load(Ordering::Relaxed),
        evicted: EVICTED.load(Ordering::Relaxed),
        evicted_live: EVICTED_LIVE.load(Ordering::Relaxed),
        lost: LOST.load(Ordering::Relaxed),
    }
}

/// The epoll token of the eventfd that announces adopted drivers.
const INBOX: u64 = u64::MAX;

struct Handle {
    tx: Sender<UdpDriver>,
    bell: Arc<EventFd>,
    /// The process that started it: a child after `fork` has the handle but
    /// not the thread, and starts its own.
    pid: u32,
}

/// The reaper, started on first use and again if its thread ended (an
/// epoll failure, a panic in endpoint code) or could not be had before.
static REAPER: Mutex<Option<Handle>> = Mutex::new(None);

/// Hands `d` to the reaper thread, which turns it until its last context is
/// freed. If no reaper thread can be had (no descriptors, no threads left),
/// the driver is dropped with its lingering contexts and counted
/// ([`LingerCounts::lost`]): the peer then times out on a final
/// acknowledgement, as after a crash.
pub(crate) fn adopt(d: UdpDriver) {
    let mut slot = REAPER.lock().unwrap_or_else(|p| p.into_inner());
    let mut d = Some(d);
    for _ in 0..2 {
        if slot.as_ref().is_none_or(|h| h.pid != std::process::id()) {
            *slot = start().ok();
        }
        let Some(h) = slot.as_ref() else { break };
        match h.tx.send(d.take().expect("present")) {
            Ok(()) => {
                let _ = h.bell.write(1);
                return;
            }
            // The thread is gone: start another and try once more.
            Err(back) => {
                d = Some(back.0);
                *slot = None;
            }
        }
    }
    LOST.fetch_add(1, Ordering::Relaxed);
}

fn start() -> std::io::Result<Handle> {
    let (tx, rx) = channel();
    let bell = Arc::new(EventFd::from_flags(EfdFlags::EFD_CLOEXEC | EfdFlags::EFD_NONBLOCK)?);
    let epoll = Epoll::new(EpollCreateFlags::EPOLL_CLOEXEC)?;
    epoll.add(bell.as_fd(), EpollEvent::new(EpollFlags::EPOLLIN, INBOX))?;
    let bell_rx = bell.clone();
    std::thread::Builder::new().name("xtp-linger".into()).spawn(move || run(rx, epoll, bell_rx))?;
    Ok(Handle { tx, bell, pid: std::process::id() })
}

type Clock = std::time::Instant;

struct Adopted {
    d: UdpDriver,
    /// When it gives up, even with a context left.
    end: Clock,
    /// Its entry in the timer heap that counts (earlier entries were
    /// superseded and are skipped when they come up).
    scheduled: Option<Clock>,
}

/// Takes the endpoint to close early: the oldest of the first
/// [`EVICT_SCAN`] in `order` whose contexts have all ended, else the oldest.
fn evict(drivers: &mut HashMap<u64, Adopted>, order: &mut VecDeque<u64>) -> Option<Adopted> {
    // Tokens of endpoints already gone are skipped (and dropped at the
    // front); `run` prunes the rest now and then.
    while order.front().is_some_and(|t| !drivers.contains_key(t)) {
        order.pop_front();
    }
    // The first EVICT_SCAN endpoints still held (gone ones do not count).
    let ended = order
        .iter()
        .enumerate()
        .filter_map(|(i, t)| drivers.get(t).map(|a| (i, a)))
        .take(EVICT_SCAN)
        .find(|(_, a)| a.d.endpoint_ref().only_lingering())
        .map(|(i, _)| i);
    let token = order.remove(ended.unwrap_or(0))?;
    if ended.is_none() {
        EVICTED_LIVE.fetch_add(1, Ordering::Relaxed);
    }
    EVICTED.fetch_add(1, Ordering::Relaxed);
    drivers.remove(&token)
}

fn run(rx: Receiver<UdpDriver>, epoll: Epoll, bell: Arc<EventFd>) {
    let mut drivers: HashMap<u64, Adopted> = HashMap::new();
    // (when, token): each driver's next wake-up (its next timer, or its end).
    let mut timers: BinaryHeap<Reverse<(Clock, u64)>> = BinaryHeap::new();
    let mut next_token = 0u64;
    // Tokens in the order adopted (some already gone), for eviction.
    let mut order: VecDeque<u64> = VecDeque::new();
    let mut events = vec![EpollEvent::empty(); 256];
    let mut due = Vec::new();
    loop {
        let wait = timers.peek().map(|Reverse((t, _))| t.saturating_duration_since(Clock::now()));
        let timeout = match wait {
            // Rounded up to a millisecond: a lingering context's timers are
            // seconds long; no need to spin on the last microseconds.
            Some(w) => EpollTimeout::from(w.as_millis().saturating_add(1).min(60_000) as u16),
            None => EpollTimeout::NONE,
        };
        let n = match epoll.wait(&mut events, timeout) {
            Ok(n) => n,
            Err(nix::errno::Errno::EINTR) => 0,
            // The next `adopt` finds the channel closed and starts another.
            Err(_) => return,
        };
        due.clear();
        for e in &events[..n] {
            if e.data() == INBOX {
                let _ = bell.read();
                for d in rx.try_iter() {
                    let token = next_token;
                    next_token += 1;
                    if epoll.add(d.input_fd(), EpollEvent::new(EpollFlags::EPOLLIN, token)).is_err() {
                        LOST.fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                    drivers.insert(token, Adopted { d, end: Clock::now() + MAX_LINGER, scheduled: None });
                    order.push_back(token);
                    due.push(token);
                    while drivers.len() > max_lingering() {
                        let Some(a) = evict(&mut drivers, &mut order) else { break };
                        let _ = epoll.delete(a.d.input_fd());
                    }
                }
            } else {
                due.push(e.data());
            }
        }
        let now = Clock::now();
        while let Some(&Reverse((t, token))) = timers.peek() {
            if t > now {
                break;
            }
            timers.pop();
            if let Some(a) = drivers.get_mut(&token)
                && a.scheduled == Some(t)
            {
                a.scheduled = None;
                due.push(token);
            }
        }
        due.sort_unstable();
        due.dedup();
        for &token in &due {
            let Some(a) = drivers.get_mut(&token) else { continue };
            let alive = a.d.poll_input().is_ok() && a.d.flush().is_ok();
            while a.d.endpoint().poll_event().is_some() {}
            if !alive || a.d.endpoint().context_count() == 0 || now >= a.end {
                let a = drivers.remove(&token).expect("present");
                let _ = epoll.delete(a.d.input_fd());
                if order.len() > 2 * drivers.len() + 64 {
                    order.retain(|t| drivers.contains_key(t));
                }
                continue;
            }
            // Wake for its next timer, or at its end if it has none (a
            // context with no timer would otherwise be polled only on
            // input, and never reach its end).
            let timer =
                a.d.until_timeout().map(|left| now + std::time::Duration::from_nanos(left.as_nanos() as u64));
            let next = timer.map_or(a.end, |t| t.min(a.end));
            // An earlier entry that still counts fires first and finds
            // nothing due, then files the real one; a later one is
            // superseded (skipped when it comes up).
            if a.scheduled.is_none_or(|s| next < s) {
                a.scheduled = Some(next);
                timers.push(Reverse((next, token)));
            }
        }
        // Superseded entries, when they pile up, are dropped.
        if timers.len() > 2 * drivers.len() + 64 {
            timers = drivers.iter().filter_map(|(&k, a)| a.scheduled.map(|t| Reverse((t, k)))).collect();
        }
        LINGERING.store(drivers.len() as u64, Ordering::Relaxed);
    }
}
