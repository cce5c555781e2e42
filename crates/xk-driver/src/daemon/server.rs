//! The daemon's loop: one UDP socket and one [`Engine`], a Unix socket
//! where clients register, and one [`ShmPort`] session per client.
//!
//! Each pass: look at the Unix sockets when they have something (a new
//! client, a hello, a client's socket closing), apply what the clients
//! posted, end the sessions of clients that went away, send and deliver,
//! then sleep on everything at once — each client's eventfd for the
//! daemon (one per client, rung by that client only), the UDP socket, the
//! Unix sockets — until the next timer.
//!
//! A client that went away in order (its side marked itself gone before
//! closing) has its contexts closed gracefully; one that died (the socket
//! closed without that) has them aborted, so its peers learn at once. Its
//! segment is unmapped when the last view of its data is dropped.

use std::io::{self, Read};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use nix::sys::eventfd::{EfdFlags, EventFd};
use xk_shm::Segment;
use xk_time::{Duration, Instant};

use super::DaemonConfig;
use super::handshake::{self, Ask, Welcome};
use super::link::{self, ShmPort};
use crate::driver::{DriverConfig, UdpDriver, WaitMode};
use crate::engine::serve::{Engine, SessionId, wait_readable};
use crate::transport::Transport;

/// A connection that has not said hello yet, and since when.
struct Pending {
    sock: UnixStream,
    pid: i32,
    uid: u32,
    since: Instant,
    /// Part of the hello has come: the socket stays readable, so it is
    /// looked at every [`LOOK_EVERY`] instead of waking every sleep.
    partial: bool,
}

/// How long a connection may take to say hello.
const HELLO_WAIT: Duration = Duration::from_secs(2);
/// How often a busy-polling daemon looks at its Unix sockets.
const LOOK_EVERY: Duration = Duration::from_millis(10);
/// How long `accept` rests after failing for want of a resource (out of
/// descriptors or memory): the pending connection keeps the listener
/// readable, so without a rest the daemon would spin on it.
const ACCEPT_REST: Duration = Duration::from_millis(100);
/// How long a status answer may take to be written: a reader that does
/// not read must not hold the daemon.
const STATUS_WRITE: std::time::Duration = std::time::Duration::from_millis(200);

pub(super) struct Daemon<T: Transport> {
    engine: Engine<T, ShmPort>,
    cfg: DaemonConfig,
    listener: UnixListener,
    pending: Vec<Pending>,
    next_session: SessionId,
    /// Clients served since the start (for the status).
    served: u64,
    euid: u32,
    /// `accept` failed for want of a resource: not before then again.
    accept_rest: Option<Instant>,
}

impl Daemon<crate::batch::BatchSocket> {
    /// Binds the UDP socket and the Unix socket (replacing a stale socket
    /// file; refusing if a daemon answers there).
    pub(super) fn bind(cfg: DaemonConfig) -> io::Result<Self> {
        let wait = if cfg.engine.busy_poll { WaitMode::BusyPoll } else { WaitMode::Blocking };
        let d = UdpDriver::bind_with(
            cfg.listen,
            cfg.endpoint.clone(),
            crate::clock::time_seed(),
            DriverConfig { wait, offload: true, ..DriverConfig::default() },
        )
        .map_err(|e| {
            io::Error::new(e.kind(), format!("xpress daemon: cannot bind UDP {}: {e}", cfg.listen))
        })?;
        if UnixStream::connect(&cfg.socket).is_ok() {
            return Err(io::Error::new(
                io::ErrorKind::AddrInUse,
                format!("an xpress daemon already serves {}", cfg.socket.display()),
            ));
        }
        let _ = std::fs::remove_file(&cfg.socket);
        let listener = UnixListener::bind(&cfg.socket).map_err(|e| {
            io::Error::new(e.kind(), format!("xpress daemon: cannot bind {}: {e}", cfg.socket.display()))
        })?;
        listener.set_nonblocking(true)?;
        let engine_cfg = cfg.engine;
        Ok(Daemon {
            engine: Engine::new(d, engine_cfg),
            cfg,
            listener,
            pending: Vec::new(),
            next_session: 1,
            served: 0,
            euid: rustix::process::geteuid().as_raw(),
            accept_rest: None,
        })
    }
}

impl<T: Transport> Daemon<T> {
    pub(super) fn local_addr(&self) -> io::Result<std::net::SocketAddr> {
        self.engine.driver_ref().local_addr()
    }

    /// Serves until `stop` is set (or the UDP socket fails).
    pub(super) fn run(mut self, stop: &AtomicBool) -> io::Result<()> {
        let mut last_look = self.engine.driver().now();
        let mut look = true;
        while !stop.load(Ordering::Relaxed) {
            let now = self.engine.driver().now();
            if look || now.saturating_since(last_look) >= LOOK_EVERY {
                self.look_at_sockets()?;
                last_look = now;
            }
            let posted = self.engine.apply_posted();
            for sid in self.engine.gone_sessions() {
                self.end_session(sid);
            }
            self.engine.after_apply(posted)?;
            if self.cfg.engine.busy_poll || self.engine.has_input() {
                self.engine.driver().poll_input()?;
                look = false;
                continue;
            }
            let sleep = self.engine.sleep_for();
            look = !sleep.is_zero() && self.sleep(sleep)?;
            self.engine.driver().poll_input()?;
        }
        let _ = std::fs::remove_file(&self.cfg.socket);
        Ok(())
    }

    /// Parks in every client's segment and sleeps on all the descriptors
    /// (each client's own eventfd among them); true if a Unix socket is
    /// readable.
    fn sleep(&mut self, sleep: Duration) -> io::Result<bool> {
        // Each session waits for room only if its own backlog needs it: an
        // idle session's free ring would otherwise count as "ready" and the
        // daemon would never sleep while any other session had a backlog.
        let mut ready = false;
        for (id, p) in self.engine.ports() {
            ready |= p.park(self.engine.session_backlogged(id), self.engine.session_paused(id));
        }
        let partial = self.pending.iter().any(|p| p.partial);
        let mut look = partial;
        let mut r = Ok(());
        if !ready {
            let (udp, ports) = self.engine.split_all();
            let ports: Vec<&ShmPort> = ports.map(|(_, p)| p).collect();
            let mut fds: Vec<BorrowedFd<'_>> = vec![udp];
            if self.accept_rest.is_none() {
                fds.push(self.listener.as_fd());
            }
            fds.extend(self.pending.iter().filter(|p| !p.partial).map(|p| p.sock.as_fd()));
            fds.extend(ports.iter().map(|p| p.sock.as_fd()));
            let bells = fds.len();
            // One eventfd per client, not one shared by all: a client can
            // then neither take another's wake-up (by reading a shared
            // eventfd) nor be woken for another's blocks.
            fds.extend(ports.iter().map(|p| p.mine.fd()));
            match wait_readable(&fds, bells, if partial { sleep.min(LOOK_EVERY) } else { sleep }) {
                Ok(rd) => {
                    look |= rd[1..bells].iter().any(|&b| b);
                    for (p, _) in ports.iter().zip(&rd[bells..]).filter(|(_, rung)| **rung) {
                        p.mine.drain();
                    }
                }
                Err(e) => r = Err(e),
            }
        }
        for (_, p) in self.engine.ports() {
            p.unpark();
        }
        r.map(|()| look)
    }

    /// Accepts new connections, reads hellos, notices closed sockets.
    fn look_at_sockets(&mut self) -> io::Result<()> {
        let now = self.engine.driver().now();
        if self.accept_rest.is_some_and(|t| now >= t) {
            self.accept_rest = None;
        }
        while self.accept_rest.is_none() {
            match self.listener.accept() {
                Ok((sock, _)) => self.admit(sock),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                // Out of descriptors and the like: not the end of the
                // daemon; the client waits in the backlog meanwhile.
                Err(e) => {
                    eprintln!(
                        "xpress daemon: cannot accept a client: {e} (trying again in {} ms)",
                        ACCEPT_REST.as_nanos() / 1_000_000
                    );
                    self.accept_rest = Some(now + ACCEPT_REST);
                }
            }
        }
        let mut k = 0;
        while k < self.pending.len() {
            let mut b = [0u8; 16];
            let p = &mut self.pending[k];
            let peeked = rustix::net::recv(&p.sock, &mut b, rustix::net::RecvFlags::PEEK)
                .map(|(n, _)| n)
                .map_err(io::Error::from);
            match peeked {
                Ok(16) => {
                    let p = self.pending.swap_remove(k);
                    let _ = (&p.sock).read_exact(&mut b);
                    self.hello(p, &b);
                }
                Ok(0) => {
                    self.pending.swap_remove(k);
                }
                Err(e)
                    if e.kind() == io::ErrorKind::WouldBlock
                        && now.saturating_since(p.since) < HELLO_WAIT =>
                {
                    k += 1
                }
                Ok(_) if now.saturating_since(p.since) < HELLO_WAIT => {
                    p.partial = true;
                    k += 1
                }
                _ => {
                    let p = self.pending.swap_remove(k);
                    handshake::send_refusal(&p.sock, "no hello within 2 s");
                }
            }
        }
        for (_, p) in self.engine.ports_mut() {
            if p.hung_up {
                continue;
            }
            let mut b = [0u8; 64];
            match (&p.sock).read(&mut b) {
                Ok(0) => p.hung_up = true,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock || e.kind() == io::ErrorKind::Interrupted => {
                }
                // The client sends nothing after its hello: anything else
                // is as good as a goodbye.
                _ => p.hung_up = true,
            }
        }
        Ok(())
    }

    /// Checks a new connection's credentials: the daemon's user or root.
    fn admit(&mut self, sock: UnixStream) {
        let cred = match rustix::net::sockopt::socket_peercred(&sock) {
            Ok(c) => c,
            Err(e) => {
                return handshake::send_refusal(&sock, &format!("cannot read the peer's credentials: {e}"));
            }
        };
        let uid = cred.uid.as_raw();
        if uid != self.euid && uid != 0 {
            return handshake::send_refusal(
                &sock,
                &format!("uid {uid} may not use this daemon (it serves uid {} and root)", self.euid),
            );
        }
        if sock.set_nonblocking(true).is_err() {
            return;
        }
        let since = self.engine.driver().now();
        self.pending.push(Pending { sock, pid: cred.pid.as_raw_nonzero().get(), uid, since, partial: false });
    }

    fn hello(&mut self, p: Pending, b: &[u8; 16]) {
        match handshake::parse_hello(b) {
            Err(text) => handshake::send_refusal(&p.sock, &text),
            Ok(Ask::Status) => {
                let _ = p.sock.set_nonblocking(false);
                let _ = p.sock.set_write_timeout(Some(STATUS_WRITE));
                let _ = (&p.sock).write_all_text(&self.status_json());
            }
            Ok(Ask::Register) => {
                if let Err(e) = self.register(p) {
                    eprintln!("xpress daemon: a client could not register: {e}");
                }
            }
        }
    }

    /// Creates the client's segment and session and sends the welcome.
    fn register(&mut self, p: Pending) -> io::Result<()> {
        let cap = self.cfg.ring_bytes;
        let refuse = |sock: &UnixStream, e: &dyn std::fmt::Display| {
            handshake::send_refusal(sock, &format!("cannot make the shared segment: {e}"));
        };
        let seg = match Segment::create("xpress-client", link::segment_len(cap)) {
            Ok(s) => Arc::new(s),
            Err(e) => {
                refuse(&p.sock, &e);
                return Err(e);
            }
        };
        link::init_segment(&seg, cap);
        let client_bell: OwnedFd =
            EventFd::from_flags(EfdFlags::EFD_NONBLOCK | EfdFlags::EFD_CLOEXEC)?.into();
        let daemon_bell: OwnedFd =
            EventFd::from_flags(EfdFlags::EFD_NONBLOCK | EfdFlags::EFD_CLOEXEC)?.into();
        let session = self.next_session;
        let welcome = Welcome {
            session,
            local: self.local_addr()?,
            read_credit: self.cfg.engine.read_credit,
            write_bound: self.cfg.engine.write_bound,
        };
        // The port reads its starting ring positions now, while only the
        // daemon can write the segment: the client gets it after.
        let (client_fd, daemon_fd) = (client_bell.try_clone()?, daemon_bell.try_clone()?);
        let port = ShmPort::new(seg.clone(), cap, daemon_bell, client_bell, p.sock, p.pid, p.uid)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
        handshake::send_welcome(&port.sock, &welcome, seg.fd(), client_fd.as_fd(), daemon_fd.as_fd())?;
        self.next_session += 1;
        self.served += 1;
        self.engine.add_session(session, port);
        Ok(())
    }

    /// Ends a session whose client went away (or broke its rings).
    fn end_session(&mut self, sid: SessionId) {
        let abort = self.engine.ports().find(|(id, _)| *id == sid).is_none_or(|(_, p)| !p.left_in_order());
        if let Some(port) = self.engine.remove_session(sid, abort)
            && let Some(why) = &port.broken
        {
            // Tell the client why before the socket closes (it may still
            // be alive, merely buggy).
            handshake::send_refusal_raw(&port.sock, why);
        }
    }

    fn status_json(&mut self) -> String {
        let sessions: Vec<serde_json::Value> = self
            .engine
            .ports()
            .map(|(id, p)| (id, p.pid, p.uid))
            .collect::<Vec<_>>()
            .into_iter()
            .map(|(id, pid, uid)| {
                let c = self.engine.counts(id);
                serde_json::json!({"session": id, "pid": pid, "uid": uid, "contexts": c.contexts, "listening": c.listening})
            })
            .collect();
        let v = serde_json::json!({
            "udp": self.local_addr().map(|a| a.to_string()).unwrap_or_default(),
            "clients": sessions.len(),
            "served": self.served,
            "contexts": self.engine.live_contexts(),
            "endpoint_contexts": self.engine.context_count(),
            "sessions": sessions,
        });
        format!("{v}\n")
    }
}

/// Writing a whole text to a blocking stream.
trait WriteText {
    fn write_all_text(self, s: &str) -> io::Result<()>;
}

impl WriteText for &UnixStream {
    fn write_all_text(mut self, s: &str) -> io::Result<()> {
        io::Write::write_all(&mut self, s.as_bytes())
    }
}
