//! One client's shared segment and the two ends of its rings: the
//! client's ([`ShmLink`], an [`AppLink`] under the client's
//! `EngineClient`) and the daemon's ([`ShmPort`], a [`Port`] of the
//! daemon's engine).
//!
//! Segment layout (offsets in bytes; all words little-endian atomics):
//!
//! ```text
//!    0  magic "XPRSHM01"     8  ring capacity C (bytes, power of two)
//!   16  the rings' name for the tracing monitor (TN; FN is it + 1)
//!   64  TN head  (client)  128  TN tail  (daemon)
//!  192  FN head  (daemon)  256  FN tail  (client)
//!  320  client bell: parked u32, gone u32, rung u64, sleeps u64, full u64, copied u64
//!  384  daemon bell: parked u32, gone u32, rung u64, sleeps u64, full u64, copied u64
//! 4096  TN data [C]       4096+C  FN data [C]
//! ```
//!
//! Doorbells follow the one protocol of `engine::doorbell`, with the
//! words in the segment. The daemon has one eventfd per client (a client
//! can ring only its own, and reading it takes only its own wake-ups) and
//! parks in every client's segment before sleeping on all of them.
//!
//! The daemon trusts nothing in the segment: the client may write any
//! word. Ring positions are checked ([`xk_shm::Corrupt`] ends the
//! session), blocks are checked as they are decoded (a bad one is refused
//! to that client), and the bells' words only decide whether to write an
//! eventfd.

use std::cell::Cell;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, ppoll};
use nix::sys::time::TimeSpec;
use xk_shm::{Consumer, Corrupt, Producer, RingLayout, Segment};
use xk_time::Duration;

use super::codec;
use crate::engine::doorbell::{self, WANT_ALL, WANT_DATA, WANT_SPACE, WANT_URGENT};
use crate::engine::serve::Port;
use crate::engine::{AppLink, BlockError, CtxHandle, FromEngine, RingStats, ToEngine};
use crate::trace::RingTrace;

/// The monitor's counts of a segment's (TN, FN) rings.
fn ring_traces(seg: &Segment) -> (RingTrace, RingTrace) {
    let name = seg.u64_at(OFF_TRACE).load(Ordering::Relaxed);
    (RingTrace::new(name), RingTrace::new(name.wrapping_add(1)))
}

pub(crate) const MAGIC: u64 = u64::from_le_bytes(*b"XPRSHM01");
const OFF_MAGIC: usize = 0;
const OFF_CAP: usize = 8;
/// The monitor's name of the TN ring (FN's is one more): both processes
/// compute a block's journey from it ([`RingTrace`]). Only a name: a
/// client that writes another one only mislabels its own trace.
const OFF_TRACE: usize = 16;
const CLIENT_BELL: usize = 320;
const DAEMON_BELL: usize = 384;
const DATA: usize = 4096;

/// Bytes of a segment whose rings hold `cap` bytes each.
pub(crate) fn segment_len(cap: usize) -> usize {
    DATA + 2 * cap
}

/// The TN and FN rings of a segment of capacity `cap`.
pub(super) fn layouts(cap: usize) -> (RingLayout, RingLayout) {
    (
        RingLayout { head: 64, tail: 128, data: DATA, cap },
        RingLayout { head: 192, tail: 256, data: DATA + cap, cap },
    )
}

/// Writes the header of a fresh segment.
pub(crate) fn init_segment(seg: &Segment, cap: usize) {
    seg.u64_at(OFF_CAP).store(cap as u64, Ordering::SeqCst);
    // Unique across daemons (pid) and their sessions (count); even, so FN
    // (the name + 1) never names another session's TN.
    static SESSIONS: AtomicU64 = AtomicU64::new(0);
    let n = SESSIONS.fetch_add(1, Ordering::Relaxed);
    let name = xk_trace::journey(u64::from(std::process::id()), n) & !1;
    seg.u64_at(OFF_TRACE).store(name, Ordering::SeqCst);
    seg.u64_at(OFF_MAGIC).store(MAGIC, Ordering::SeqCst);
}

/// Checks a received segment's header and returns its ring capacity.
pub(crate) fn check_segment(seg: &Segment) -> io::Result<usize> {
    let bad =
        |what: &str| io::Error::new(io::ErrorKind::InvalidData, format!("daemon's shared segment: {what}"));
    if seg.len() < DATA || seg.u64_at(OFF_MAGIC).load(Ordering::SeqCst) != MAGIC {
        return Err(bad("wrong magic (another program, or another version of xpress?)"));
    }
    let cap = seg.u64_at(OFF_CAP).load(Ordering::SeqCst) as usize;
    if seg.len() != segment_len(cap) {
        return Err(bad("size does not match its rings"));
    }
    Ok(cap)
}

/// One side's doorbell: its words in the segment and its eventfd.
pub(crate) struct Bell {
    seg: Arc<Segment>,
    off: usize,
    fd: OwnedFd,
}

impl Bell {
    pub(crate) fn new(seg: Arc<Segment>, owner_is_client: bool, fd: OwnedFd) -> Bell {
        Bell { seg, off: if owner_is_client { CLIENT_BELL } else { DAEMON_BELL }, fd }
    }
    fn parked(&self) -> &AtomicU32 {
        self.seg.u32_at(self.off)
    }
    fn gone(&self) -> &AtomicU32 {
        self.seg.u32_at(self.off + 4)
    }
    fn counter(&self, k: usize) -> &AtomicU64 {
        self.seg.u64_at(self.off + 8 + 8 * k)
    }
    fn count(&self, k: usize) {
        self.add(k, 1);
    }
    fn add(&self, k: usize, n: u64) {
        self.counter(k).fetch_add(n, Ordering::Relaxed);
    }
    fn read(&self, k: usize) -> u64 {
        self.counter(k).load(Ordering::Relaxed)
    }

    /// Wakes the owner if it sleeps waiting for `what`.
    fn ring(&self, what: u32) {
        doorbell::ring(self.parked(), self.counter(0), self.fd.as_fd(), what);
    }

    pub(crate) fn fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// Empties the eventfd after a wake-up (EAGAIN when nobody rang).
    pub(crate) fn drain(&self) {
        let _ = rustix::io::read(&self.fd, &mut [0u8; 8]);
    }
}

fn stats(client: &Bell, daemon: &Bell) -> RingStats {
    RingStats {
        app_wakeups: client.read(0),
        app_sleeps: client.read(1),
        engine_wakeups: daemon.read(0),
        engine_sleeps: daemon.read(1),
        tn_full: client.read(2),
        fn_full: daemon.read(2),
        app_copied: client.read(3),
        engine_copied: daemon.read(3),
    }
}

/// Pushes an encoded block: its fields then its payload (a copy, whose
/// bytes are counted on `bell`).
fn push(
    tx: &mut Producer,
    kind: u32,
    w: &codec::Writer,
    payload: Option<&[u8]>,
    bell: &Bell,
) -> Result<bool, Corrupt> {
    match payload {
        Some(p) => {
            let pushed = tx.push(kind, &[&w.0, p]);
            if pushed == Ok(true) {
                bell.add(3, p.len() as u64);
            }
            pushed
        }
        None => tx.push(kind, &[&w.0]),
    }
}

/// The client's end: posts to TN, takes from FN.
pub(crate) struct ShmLink {
    tx: Producer,
    rx: Consumer,
    mine: Arc<Bell>,
    theirs: Arc<Bell>,
    /// The registration socket: the daemon never writes to it after the
    /// handshake, so readable means closed — the daemon went away.
    sock: UnixStream,
    path: PathBuf,
    cap: usize,
    /// The daemon went away (socket closed) or broke the rings.
    gone: Cell<Option<String>>,
    /// Calls to `peer_gone` since the socket was last looked at.
    looks: Cell<u32>,
    /// Room the last refused block needed (what "full" means while
    /// waiting for space: a large write needs more than a small block).
    need: usize,
    /// The monitor's counts of TN (pushed here) and FN (popped here).
    tn_trace: RingTrace,
    fn_trace: RingTrace,
}

impl ShmLink {
    pub(crate) fn new(
        seg: Arc<Segment>,
        client_fd: OwnedFd,
        daemon_fd: OwnedFd,
        sock: UnixStream,
        path: PathBuf,
    ) -> io::Result<ShmLink> {
        let cap = check_segment(&seg)?;
        let (tn, fnr) = layouts(cap);
        let mine = Arc::new(Bell::new(seg.clone(), true, client_fd));
        let theirs = Arc::new(Bell::new(seg.clone(), false, daemon_fd));
        let wake = theirs.clone();
        let bad = |e: Corrupt| io::Error::new(io::ErrorKind::InvalidData, e.to_string());
        let rx = Consumer::new(seg.clone(), fnr, Box::new(move || wake.ring(WANT_SPACE))).map_err(bad)?;
        let (tn_trace, fn_trace) = ring_traces(&seg);
        let tx = Producer::new(seg, tn).map_err(bad)?;
        Ok(ShmLink {
            tn_trace,
            fn_trace,
            tx,
            rx,
            mine,
            theirs,
            sock,
            path,
            cap,
            gone: Cell::new(None),
            looks: Cell::new(0),
            need: codec::META_MAX + 64,
        })
    }

    fn set_gone(&self, why: String) {
        let prev = self.gone.take();
        self.gone.set(Some(prev.unwrap_or(why)));
    }

    /// Whether the registration socket says the daemon closed it (a look
    /// without waiting); reads the reason the daemon may have left there.
    fn look_at_socket(&self, timeout: Option<TimeSpec>) -> io::Result<bool> {
        let mut fds = [PollFd::new(self.sock.as_fd(), PollFlags::POLLIN)];
        match ppoll(&mut fds, timeout.or(Some(TimeSpec::new(0, 0))), None) {
            Ok(_) if fds[0].any().unwrap_or(false) => {
                let mut why = [0u8; 512];
                let n = rustix::io::read(&self.sock, &mut why).unwrap_or(0);
                let text = String::from_utf8_lossy(&why[..n]).trim().to_string();
                self.set_gone(text);
                Ok(true)
            }
            Ok(_) | Err(Errno::EINTR) => Ok(false),
            Err(e) => Err(io::Error::from(e)),
        }
    }
}

impl ShmLink {
    /// Pushes one record on TN and rings the daemon if it sleeps for it;
    /// false if TN is full (or broken: then the link is gone).
    fn push_block(&mut self, kind: u32, w: &codec::Writer, payload: Option<&[u8]>, urgent: bool) -> bool {
        match push(&mut self.tx, kind, w, payload, &self.mine) {
            Ok(true) => {
                self.tn_trace.crossed(true, true, 0);
                self.need = codec::META_MAX + 64;
                self.theirs.ring(if urgent { WANT_DATA | WANT_URGENT } else { WANT_DATA });
                true
            }
            Ok(false) => {
                // Twice the record: room for it even behind a pad.
                self.need = 2 * (16 + w.0.len() + payload.map_or(0, |p| p.len()));
                self.mine.count(2);
                false
            }
            Err(e) => {
                self.set_gone(e.to_string());
                false
            }
        }
    }
}

impl AppLink for ShmLink {
    fn try_send(&mut self, b: ToEngine, urgent: bool) -> Result<(), ToEngine> {
        let (kind, w, payload) = codec::encode_to_engine(&b);
        if self.push_block(kind, &w, payload.map(|p| &p[..]), urgent) { Ok(()) } else { Err(b) }
    }

    /// The caller's bytes go into the ring directly: the one copy this
    /// mode makes of a write, in place of the one into a `Bytes`.
    fn try_send_write(&mut self, ctx: CtxHandle, data: &[u8], eom: bool, btag: Option<u64>) -> bool {
        let w = codec::write_fields(ctx, eom, btag);
        self.push_block(codec::WRITE_KIND, &w, Some(data), true)
    }

    fn copies_payload(&self) -> bool {
        true
    }

    fn try_recv(&mut self) -> Option<FromEngine> {
        let rec = match self.rx.take() {
            Ok(r) => r?,
            Err(e) => {
                self.set_gone(e.to_string());
                return None;
            }
        };
        self.fn_trace.crossed(false, true, 0);
        // Zero copy unless views already hold half the ring.
        let view = self.rx.held() <= self.cap / 2;
        if !view && rec.kind == codec::DATA {
            self.mine.add(3, rec.len as u64);
        }
        match codec::decode_from_engine(rec, view) {
            Ok(b) => Some(b),
            Err(e) => {
                self.set_gone(e.to_string());
                None
            }
        }
    }

    fn has_input(&self) -> bool {
        self.rx.has_input()
    }

    fn is_full(&self) -> bool {
        self.tx.free().map_or(true, |f| f < self.need)
    }

    fn peer_gone(&self) -> bool {
        let gone = self.gone.take();
        let is = gone.is_some();
        self.gone.set(gone);
        if is || self.theirs.gone().load(Ordering::SeqCst) != 0 {
            return true;
        }
        // A spinning caller (busy-poll) never parks: look at the socket
        // every so often so that a dead daemon is still noticed.
        let n = self.looks.get() + 1;
        self.looks.set(n % 4096);
        n == 4096 && self.look_at_socket(None).unwrap_or(false)
    }

    fn park(&mut self, data: bool, urgent_only: bool, space: bool, timeout: Duration) -> io::Result<()> {
        let want = doorbell::want(data, urgent_only, space);
        let ready = || (data && self.rx.has_input()) || (space && !self.is_full());
        if doorbell::announce(self.mine.parked(), want, || ready() || self.peer_gone()) {
            return Ok(());
        }
        self.mine.count(1);
        // The registration socket too: a daemon that dies wakes us at once.
        let r = doorbell::sleep(self.mine.parked(), self.mine.fd(), &[self.sock.as_fd()], Some(timeout))?;
        if r.first().copied().unwrap_or(false) {
            self.look_at_socket(None)?;
        }
        Ok(())
    }

    fn stats(&self) -> RingStats {
        stats(&self.mine, &self.theirs)
    }

    #[cfg(feature = "tokio")]
    fn bell_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.mine.fd()
    }

    #[cfg(feature = "tokio")]
    fn gone_fd(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        Some(self.sock.as_fd())
    }

    #[cfg(feature = "tokio")]
    fn arm(&mut self, space: bool) -> bool {
        let want = doorbell::want(true, false, space);
        let ready = || self.rx.has_input() || (space && !self.is_full());
        if doorbell::announce(self.mine.parked(), want, || ready() || self.peer_gone()) {
            return false;
        }
        self.mine.count(1);
        true
    }

    #[cfg(feature = "tokio")]
    fn disarm(&mut self) {
        doorbell::woken(self.mine.parked(), self.mine.fd());
    }

    #[cfg(feature = "tokio")]
    fn look_gone(&self) -> bool {
        self.look_at_socket(None).unwrap_or(false) || self.peer_gone()
    }

    fn gone_error(&self) -> io::Error {
        let why = self.gone.take();
        self.gone.set(why.clone());
        let why = why.filter(|w| !w.is_empty()).map(|w| format!(": {w}")).unwrap_or_default();
        io::Error::new(
            io::ErrorKind::BrokenPipe,
            format!("xpress daemon at {} went away{why}", self.path.display()),
        )
    }

    fn max_payload(&self) -> usize {
        self.tx.layout().max_body() - codec::META_MAX
    }
}

impl Drop for ShmLink {
    /// Tells the daemon this client left in order (its contexts then close
    /// gracefully; a client that dies without this has them aborted).
    fn drop(&mut self) {
        self.mine.gone().store(1, Ordering::SeqCst);
        self.theirs.ring(WANT_ALL);
    }
}

/// The daemon's end of one client: takes from TN, posts to FN.
pub(crate) struct ShmPort {
    rx: Consumer,
    tx: Producer,
    /// The daemon's bell in this client's segment, with the eventfd the
    /// daemon keeps for this client alone.
    pub(crate) mine: Arc<Bell>,
    theirs: Arc<Bell>,
    cap: usize,
    /// The registration socket (closed by the client's exit).
    pub(crate) sock: UnixStream,
    /// Who the client is (SO_PEERCRED).
    pub(crate) pid: i32,
    pub(crate) uid: u32,
    /// The socket was closed.
    pub(crate) hung_up: bool,
    /// Why the client's rings are unusable, if they are.
    pub(crate) broken: Option<String>,
    /// The monitor's counts of TN (popped here) and FN (pushed here).
    tn_trace: RingTrace,
    fn_trace: RingTrace,
}

impl ShmPort {
    pub(crate) fn new(
        seg: Arc<Segment>,
        cap: usize,
        daemon_fd: OwnedFd,
        client_fd: OwnedFd,
        sock: UnixStream,
        pid: i32,
        uid: u32,
    ) -> Result<ShmPort, Corrupt> {
        let (tn, fnr) = layouts(cap);
        let mine = Arc::new(Bell::new(seg.clone(), false, daemon_fd));
        let theirs = Arc::new(Bell::new(seg.clone(), true, client_fd));
        let wake = theirs.clone();
        let rx = Consumer::new(seg.clone(), tn, Box::new(move || wake.ring(WANT_SPACE)))?;
        let (tn_trace, fn_trace) = ring_traces(&seg);
        let tx = Producer::new(seg, fnr)?;
        Ok(ShmPort {
            rx,
            tx,
            mine,
            theirs,
            cap,
            sock,
            pid,
            uid,
            hung_up: false,
            broken: None,
            tn_trace,
            fn_trace,
        })
    }

    /// The client said goodbye before its socket closed.
    pub(crate) fn left_in_order(&self) -> bool {
        self.theirs.gone().load(Ordering::SeqCst) != 0
    }

    /// Stores what the daemon sleeps for in this segment; true if it need
    /// not sleep after all (input waiting, or room where it wanted room).
    ///
    /// A `paused` session (its backlog full, `engine::serve`) is not read
    /// until its client makes room in FN: the daemon sleeps for that room
    /// only, not for its TN blocks (which would keep it awake, spinning).
    pub(crate) fn park(&self, space: bool, paused: bool) -> bool {
        let want = if paused { WANT_SPACE } else { doorbell::want(true, false, space) | WANT_URGENT };
        self.mine.count(1);
        let room = || self.tx.free().is_ok_and(|f| f > self.cap / 2);
        doorbell::announce(self.mine.parked(), want, || {
            (!paused && self.has_input()) || ((space || paused) && room())
        })
    }

    pub(crate) fn unpark(&self) {
        self.mine.parked().store(0, Ordering::SeqCst);
    }

    /// Stops serving: the rings are unusable for `why`.
    fn break_with(&mut self, why: String) {
        if self.broken.is_none() {
            self.broken = Some(why);
        }
    }
}

impl Port for ShmPort {
    fn try_recv(&mut self) -> Option<Result<ToEngine, (CtxHandle, BlockError)>> {
        if self.broken.is_some() {
            return None;
        }
        let rec = match self.rx.take() {
            Ok(r) => r?,
            Err(e) => {
                self.break_with(e.to_string());
                return None;
            }
        };
        self.tn_trace.crossed(false, false, 0);
        let view = self.rx.held() <= self.cap / 2;
        if !view && codec::has_payload(rec.kind) {
            self.mine.add(3, rec.len as u64);
        }
        Some(codec::decode_to_engine(rec, view))
    }

    fn try_send(&mut self, b: FromEngine, urgent: bool) -> Result<(), FromEngine> {
        if self.broken.is_some() {
            return Ok(()); // the session is being ended
        }
        let (kind, w, payload) = codec::encode_from_engine(&b);
        match push(&mut self.tx, kind, &w, payload.map(|p| &p[..]), &self.mine) {
            Ok(true) => {
                self.fn_trace.crossed(true, false, 0);
                self.theirs.ring(if urgent { WANT_DATA | WANT_URGENT } else { WANT_DATA });
                Ok(())
            }
            Ok(false) => {
                self.mine.count(2);
                Err(b)
            }
            Err(e) => {
                self.break_with(e.to_string());
                Ok(())
            }
        }
    }

    fn has_input(&self) -> bool {
        self.broken.is_none() && self.rx.has_input()
    }

    fn peer_gone(&self) -> bool {
        self.hung_up || self.broken.is_some()
    }

    fn nudge(&self) {
        self.theirs.ring(WANT_ALL);
    }

    fn max_payload(&self) -> u64 {
        // What the client's `ShmLink::max_payload` splits writes into.
        (self.rx.layout().max_body() - codec::META_MAX) as u64
    }
}
