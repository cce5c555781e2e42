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
//! beyond [`max_lingering`] the oldest is closed early and counted, as
//! Linux destroys TIME_WAIT sockets beyond `tcp_max_tw_buckets`. Without
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
use xk_time::{Duration, Instant};

use crate::driver::UdpDriver;

/// The longest a lingering endpoint is kept.
const MAX_LINGER: Duration = Duration::from_secs(600);

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
/// Lingering endpoints held now.
static LINGERING: AtomicU64 = AtomicU64::new(0);

/// Endpoints lingering now on the reaper, and those it closed early at
/// [`max_lingering`] since the process started.
pub fn linger_counts() -> (u64, u64) {
    (LINGERING.load(Ordering::Relaxed), EVICTED.load(Ordering::Relaxed))
}

/// The epoll token of the eventfd that announces adopted drivers.
const INBOX: u64 = u64::MAX;

struct Handle {
    tx: Sender<UdpDriver>,
    bell: Arc<EventFd>,
}

static REAPER: OnceLock<Option<Mutex<Handle>>> = OnceLock::new();

/// Hands `d` to the reaper thread, which turns it until its last context is
/// freed. If the thread cannot be had (no descriptors, no threads left), the
/// driver is dropped with its lingering contexts: the peer then times out on
/// a final acknowledgement, as after a crash.
pub(crate) fn adopt(d: UdpDriver) {
    let handle = REAPER.get_or_init(|| start().ok().map(Mutex::new));
    let Some(h) = handle else { return };
    let h = h.lock().unwrap_or_else(|p| p.into_inner());
    if h.tx.send(d).is_ok() {
        let _ = h.bell.write(1);
    }
}

fn start() -> std::io::Result<Handle> {
    let (tx, rx) = channel();
    let bell = Arc::new(EventFd::from_flags(EfdFlags::EFD_CLOEXEC | EfdFlags::EFD_NONBLOCK)?);
    let epoll = Epoll::new(EpollCreateFlags::EPOLL_CLOEXEC)?;
    epoll.add(bell.as_fd(), EpollEvent::new(EpollFlags::EPOLLIN, INBOX))?;
    let bell_rx = bell.clone();
    std::thread::Builder::new().name("xtp-linger".into()).spawn(move || run(rx, epoll, bell_rx))?;
    Ok(Handle { tx, bell })
}

struct Adopted {
    d: UdpDriver,
    /// When it gives up (its own clock).
    end: Instant,
}

fn run(rx: Receiver<UdpDriver>, epoll: Epoll, bell: Arc<EventFd>) {
    let mut drivers: HashMap<u64, Adopted> = HashMap::new();
    // (when, token): each driver's next timer, in the reaper's clock.
    let mut timers: BinaryHeap<Reverse<(std::time::Instant, u64)>> = BinaryHeap::new();
    let mut next_token = 0u64;
    // Tokens in the order adopted (some already gone), for eviction.
    let mut order: VecDeque<u64> = VecDeque::new();
    let mut events = vec![EpollEvent::empty(); 256];
    let mut due = Vec::new();
    loop {
        let wait =
            timers.peek().map(|Reverse((t, _))| t.saturating_duration_since(std::time::Instant::now()));
        let timeout = match wait {
            // Rounded up to a millisecond: a lingering context's timers are
            // seconds long; no need to spin on the last microseconds.
            Some(w) => EpollTimeout::from(w.as_millis().saturating_add(1).min(60_000) as u16),
            None => EpollTimeout::NONE,
        };
        let n = match epoll.wait(&mut events, timeout) {
            Ok(n) => n,
            Err(nix::errno::Errno::EINTR) => 0,
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
                        continue;
                    }
                    let end = d.now() + MAX_LINGER;
                    drivers.insert(token, Adopted { d, end });
                    order.push_back(token);
                    due.push(token);
                    while drivers.len() > max_lingering() {
                        let Some(old) = order.pop_front() else { break };
                        if let Some(a) = drivers.remove(&old) {
                            let _ = epoll.delete(a.d.input_fd());
                            EVICTED.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
            } else {
                due.push(e.data());
            }
        }
        let now = std::time::Instant::now();
        while let Some(&Reverse((t, token))) = timers.peek() {
            if t > now {
                break;
            }
            timers.pop();
            due.push(token);
        }
        due.sort_unstable();
        due.dedup();
        for &token in &due {
            let Some(a) = drivers.get_mut(&token) else { continue };
            let alive = a.d.poll_input().is_ok() && a.d.flush().is_ok();
            while a.d.endpoint().poll_event().is_some() {}
            if !alive || a.d.endpoint().context_count() == 0 || a.d.now() >= a.end {
                let a = drivers.remove(&token).expect("present");
                let _ = epoll.delete(a.d.input_fd());
                if order.len() > 2 * drivers.len() + 64 {
                    order.retain(|t| drivers.contains_key(t));
                }
                continue;
            }
            // A stale heap entry (the timer moved) fires early and finds
            // nothing due; the new one is pushed here.
            if let Some(left) = a.d.until_timeout() {
                timers.push(Reverse((now + std::time::Duration::from_nanos(left.as_nanos() as u64), token)));
            }
        }
        LINGERING.store(drivers.len() as u64, Ordering::Relaxed);
    }
}
