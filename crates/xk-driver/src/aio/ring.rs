//! The ring modes' task (engine thread, daemon): the endpoint runs
//! elsewhere, and this task only waits for the application side's doorbell
//! — its eventfd, registered with tokio's reactor (`AsyncFd`) — and files
//! the FN blocks by context, waking whoever waits on them.
//!
//! The doorbell protocol is the blocking API's (`engine::doorbell`): the
//! task announces what it sleeps for (FN data; TN room while a writer
//! waits for it), re-checks the rings, and only then awaits the eventfd,
//! which the engine writes only if the announcement asks for what it just
//! made available. So the task costs the engine no system call while it
//! runs, and one wake-up takes a whole batch of completions. In the daemon
//! mode it also awaits the registration socket, which becomes readable
//! only when the daemon goes away, so a dead daemon fails the waiting calls
//! at once instead of leaving them pending.
//!
//! Application calls take FN blocks themselves too ([`pump`] under the
//! lock) before deciding to wait, so a call never waits for the task to be
//! scheduled to see what has already arrived.

use std::io;
use std::os::fd::OwnedFd;
use std::sync::{Arc, Mutex};

use tokio::io::unix::AsyncFd;
use tokio::sync::Notify;

use super::{Backend, Shared, State};
use crate::api::Cid;
use crate::clock::{Clock, TimeSource};
use crate::engine::{BlockError, EngineClient, Notice};

/// Longest wait before the task looks around anyway (the engine's end is
/// signalled through the doorbell or the socket; this is a safety net).
const LOOK_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// Starts the task for the application's side of an engine or daemon.
pub(super) fn spawn(c: EngineClient) -> io::Result<Arc<Shared>> {
    // Duplicates: the same eventfd and socket, owned by the reactor's
    // registrations (the originals stay the link's).
    let bell = register(c.bell_fd().try_clone_to_owned()?)?;
    let gone = match c.gone_fd() {
        Some(fd) => Some(register(fd.try_clone_to_owned()?)?),
        None => None,
    };
    let shared = Arc::new(Shared {
        state: Mutex::new(State::new(Backend::Ring(c))),
        nudge: Arc::new(Notify::new()),
        clock: TimeSource::Wall(Clock::new()),
    });
    tokio::spawn(drive(shared.clone(), bell, gone));
    Ok(shared)
}

/// Registers a descriptor with tokio's reactor. `AsyncFd::new` is
/// deprecated in favour of the `unsafe` `AsyncFd::register`, whose one
/// condition — the descriptor stays open, and the same, for the `AsyncFd`'s
/// life — an `OwnedFd` meets by construction; this crate forbids `unsafe`,
/// so the safe (deprecated) form is used, on `OwnedFd` only.
#[allow(deprecated)]
fn register(fd: OwnedFd) -> io::Result<AsyncFd<OwnedFd>> {
    AsyncFd::new(fd)
}

async fn drive(shared: Arc<Shared>, bell: AsyncFd<OwnedFd>, gone: Option<AsyncFd<OwnedFd>>) {
    loop {
        let sleep = {
            let mut st = shared.lock();
            st.pump();
            // Ends when every handle is gone: dropping the client tells the
            // engine, which closes what is left and lingers by itself. And
            // when the engine is gone (everyone waiting was woken with it).
            if st.handles == 0 || st.gone.is_some() {
                return;
            }
            let writing = st.ctxs.values().any(|c| c.writer.is_some());
            let Backend::Ring(c) = &mut st.core else { return };
            // TN room only matters to a writer waiting (for it).
            let space = writing && c.is_full();
            c.arm(space)
        };
        if !sleep {
            // Something came between the pump and the announcement.
            tokio::task::yield_now().await;
            continue;
        }
        let mut look = false;
        tokio::select! {
            r = bell.readable() => {
                // Cleared before the eventfd is emptied (by `disarm`), so
                // a ring after that makes it ready again.
                if let Ok(mut g) = r {
                    g.clear_ready();
                }
            }
            r = async {
                match &gone {
                    Some(fd) => fd.readable().await.map(|mut g| g.clear_ready()),
                    None => std::future::pending().await,
                }
            } => look = r.is_ok(),
            () = shared.nudge.notified() => {}
            () = tokio::time::sleep(LOOK_EVERY) => look = true,
        }
        let mut st = shared.lock();
        let Backend::Ring(c) = &mut st.core else { return };
        c.disarm();
        if look {
            let _ = c.look_gone();
        }
    }
}

/// Takes every FN block waiting, files notices by context, and wakes the
/// readers with data, the writers with room, the acceptor, and — when the
/// engine has gone — everyone, with the error.
// The order of the wake-ups does not matter (each waker only schedules).
#[allow(clippy::iter_over_hash_type)]
pub(super) fn pump(st: &mut State) {
    let State { core, ctxs, incoming, acceptor, gone, .. } = st;
    let Backend::Ring(c) = core else { return };
    let took = c.has_input();
    c.collect();
    while let Some(n) = c.next_notice() {
        let cs = match n {
            Notice::Incoming { ctx, peer, .. } => {
                ctxs.entry(Cid::Remote(ctx)).or_default();
                incoming.push_back((Cid::Remote(ctx), peer));
                if let Some(w) = acceptor.take() {
                    w.wake();
                }
                continue;
            }
            Notice::PeerFinished { ctx } => {
                let Some(cs) = ctxs.get_mut(&Cid::Remote(ctx)) else { continue };
                cs.peer_finished = true;
                cs
            }
            Notice::Closed { ctx, reason } => {
                let Some(cs) = ctxs.get_mut(&Cid::Remote(ctx)) else { continue };
                cs.closed = Some(reason);
                cs
            }
            // Only for a context still in use and not over (a close racing
            // the engine's `Closed` is no error). A write refused because
            // the context closed (say, the peer refused it) is no error of
            // its own either: the `Closed` block, which may come after the
            // refusal, says why, and that is the error the caller gets.
            Notice::Failed { ctx, error } => {
                let Some(cs) = ctxs.get_mut(&Cid::Remote(ctx)) else { continue };
                if cs.closed.is_none() && error != BlockError::Closed {
                    cs.failed = Some(error.to_string());
                }
                cs
            }
        };
        for w in [cs.reader.take(), cs.writer.take()].into_iter().flatten() {
            w.wake();
        }
    }
    // Data and acknowledgements arrive without a notice (and may have been
    // taken by a `post` waiting for TN room rather than here): wake the
    // readers with data and the writers with room, whoever took them.
    for (cid, cs) in ctxs.iter_mut() {
        let Cid::Remote(h) = *cid else { continue };
        if c.has_chunk(h)
            && let Some(w) = cs.reader.take()
        {
            w.wake();
        }
        if c.has_room(h)
            && !c.is_full()
            && let Some(w) = cs.writer.take()
        {
            w.wake();
        }
    }
    // A `Listening` answer, which a binding listener waits for in the
    // acceptor's place.
    if took && let Some(w) = acceptor.take() {
        w.wake();
    }
    if gone.is_none() && !c.has_input() && c.peer_gone() {
        let e = c.gone_error();
        *gone = Some((e.kind(), e.to_string()));
        st.wake_all();
    }
}
