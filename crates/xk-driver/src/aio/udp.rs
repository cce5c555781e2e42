//! The integrated mode's driver task: it flushes what the endpoint has,
//! then waits for the socket to become readable (tokio's readiness of a
//! duplicate of the socket), the endpoint's next timer, or a nudge from an
//! application call, whichever comes first, and takes everything waiting.

use std::io;
use std::sync::{Arc, Mutex};

use tokio::io::Interest;
use tokio::net::UdpSocket;
use tokio::sync::Notify;
use xk_time::Duration;
use xtp_proto::Event;

use super::{Backend, Shared, State, WRITE_BUFFER};
use crate::api::Cid;
use crate::clock::TimeSource;
use crate::driver::UdpDriver;

/// Starts the driver task for a bound driver.
pub(super) fn spawn(d: UdpDriver) -> io::Result<Arc<Shared>> {
    // The task learns of input through tokio's reactor, on a duplicate of
    // the driver's socket (the same socket: readiness only; every read and
    // write is the driver's own, non-blocking, batched).
    // Tokio wants it non-blocking (the flag is the socket's, shared with
    // the driver, which never blocks here: its reads and writes in this
    // mode all pass MSG_DONTWAIT).
    let dup = std::net::UdpSocket::from(d.input_fd().try_clone_to_owned()?);
    dup.set_nonblocking(true)?;
    let ready = UdpSocket::from_std(dup)?;
    let clock = d.clock();
    let shared = Arc::new(Shared {
        state: Mutex::new(State::new(Backend::Udp(d))),
        nudge: Arc::new(Notify::new()),
        clock: TimeSource::Wall(clock),
    });
    tokio::spawn(drive(ready, shared.clone()));
    Ok(shared)
}

/// Receive batches taken per wake-up before looking at timers and sends
/// again (each batch is up to the driver's `recvmmsg`/GRO size).
const RECV_ROUNDS: usize = 8;

async fn drive(ready: UdpSocket, shared: Arc<Shared>) {
    let mut more = false;
    loop {
        // Send everything queued (batched), then look at the clock.
        let (deadline, done) = {
            let mut st = shared.lock();
            let handles = st.handles;
            let Backend::Udp(d) = &mut st.core else { return };
            // A send error (a full buffer, an ICMP error) loses datagrams;
            // XTP recovers.
            let _ = d.flush();
            let (deadline, left) = (d.until_timeout(), d.endpoint().context_count());
            wake_unsent_waiters(&mut st);
            (deadline, handles == 0 && left == 0)
        };
        if done {
            return;
        }
        if !more {
            let sleep = deadline.unwrap_or(Duration::from_secs(3600));
            tokio::select! {
                _ = ready.readable() => {
                    // Tokio forgets the readiness only when an operation
                    // of its own would block; this one says so at once.
                    // Cleared before the socket is drained below, so a
                    // datagram arriving after it makes it ready again.
                    let _ = ready.try_io(Interest::READABLE, || Err::<(), _>(io::ErrorKind::WouldBlock.into()));
                }
                () = tokio::time::sleep(std::time::Duration::from_nanos(sleep.as_nanos() as u64)) => {}
                () = shared.nudge.notified() => {}
            }
        }
        let mut st = shared.lock();
        let Backend::Udp(d) = &mut st.core else { return };
        // Drain the socket (bounded: sends and timers get their turn).
        more = false;
        for round in 0..RECV_ROUNDS {
            match d.poll_input() {
                Ok(0) | Err(_) => break,
                Ok(_) => more = round + 1 == RECV_ROUNDS,
            }
        }
        let now = d.now();
        d.endpoint().handle_timeout(now);
        dispatch(&mut st);
    }
}

/// Wakes the writers whose unsent bytes have left (and who have room).
/// The endpoint's own backends (integrated, simulated).
pub(super) fn wake_unsent_waiters(st: &mut State) {
    let State { core, ctxs, unsent_waiters, .. } = st;
    let Some(ep) = core.local_ep() else { return };
    unsent_waiters.retain(|cid| {
        let Cid::Local(ctx) = *cid else { return false };
        if ep.writable(ctx, WRITE_BUFFER) || !ep.can_write(ctx) {
            // Room, or waiting on acknowledgements (or closed) now: either
            // way the Acked/Closed dispatch or this wake-up serves it.
            if let Some(w) = ctxs.get_mut(cid).and_then(|c| c.writer.take()) {
                w.wake();
            }
            false
        } else {
            true
        }
    });
}

/// Files the endpoint's events by context and wakes whoever waits on them.
/// The endpoint's own backends (integrated, simulated).
pub(super) fn dispatch(st: &mut State) {
    loop {
        let Some(ep) = st.core.local_ep() else { return };
        let Some(ev) = ep.poll_event() else { return };
        let (ctx, wake_all) = match ev {
            Event::Incoming { ctx, peer, .. } => {
                st.ctxs.entry(Cid::Local(ctx)).or_default();
                st.incoming.push_back((Cid::Local(ctx), peer));
                if let Some(w) = st.acceptor.take() {
                    w.wake();
                }
                continue;
            }
            Event::Readable { ctx } | Event::Gap { ctx, .. } => (ctx, false),
            Event::Acked { ctx, .. } => (ctx, true),
            Event::PeerFinished { ctx } => {
                st.ctxs.entry(Cid::Local(ctx)).or_default().peer_finished = true;
                (ctx, false)
            }
            Event::Closed { ctx, reason } => {
                st.ctxs.entry(Cid::Local(ctx)).or_default().closed = Some(reason);
                (ctx, true)
            }
        };
        let c = st.ctxs.entry(Cid::Local(ctx)).or_default();
        if let Some(w) = c.reader.take() {
            w.wake();
        }
        if wake_all && let Some(w) = c.writer.take() {
            w.wake();
        }
    }
}
