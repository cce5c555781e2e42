//! Peer lanes: a socket of its own for every validated peer, so that a flood
//! of spoofed datagrams at the shared socket cannot crowd it out.
//!
//! XTP 4.0 sets a context up with its first packet, so anyone can send a
//! server FIRSTs from forged addresses faster than one core reads them. The
//! engine sheds the state they create (`xtp_proto::admission`), but it never
//! sees what the kernel drops from a full socket buffer — and there the
//! datagrams of established peers are dropped with the flood's. Measured
//! before lanes (issue #13, FLOOD at 330,000 FIRSTs/s): the server read a
//! third of what arrived, and a legitimate bulk kept 0 % of its goodput.
//!
//! A lane is a UDP socket bound to the server's own address and port
//! (`SO_REUSEPORT`, which the kernel only allows within one user id) and
//! connected to one peer: Linux hands a datagram to the socket whose
//! binding matches it most exactly, so the peer's datagrams go to its lane,
//! with a receive buffer of its own, and everything else to the shared
//! socket. A lane opens when the endpoint has validated the peer (it
//! answered a packet only a receiver of ours could answer,
//! [`xtp_proto::PeerChange`]) — a spoofer off the path never gets one — and
//! closes when the peer's last context is freed (and goes to a peer that
//! was refused one at the limit). The driver reads the lanes with input,
//! as the epoll set reports them, before one batch of the shared socket. All descriptors sit in one
//! epoll set, whose descriptor is readable when any of them is: a loop that
//! waits on one descriptor ([`crate::driver::Driver::input_fd`]) still
//! waits on all.
//!
//! Sending needs no lane: the shared socket's datagrams carry the same
//! source address and port.

use std::collections::VecDeque;
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsFd, BorrowedFd};

use nix::sys::epoll::{Epoll, EpollCreateFlags, EpollEvent, EpollFlags, EpollTimeout};

use crate::transport::Transport;

/// What the lanes did, for counters and reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LaneCounters {
    /// Lanes open now.
    pub open: u64,
    /// Lanes opened in total.
    pub opened: u64,
    /// Validated peers left on the shared socket because `peer_lanes` lanes
    /// were open already (the limit named in `DriverConfig::peer_lanes`).
    pub at_limit: u64,
    /// Lanes the system refused (the error is not kept; the peer stays on
    /// the shared socket).
    pub failed: u64,
}

/// The lanes of one driver.
pub(crate) struct Lanes<T> {
    max: usize,
    epoll: Epoll,
    /// Open lanes: peer, epoll token (never 0: the shared socket's), socket.
    socks: Vec<(SocketAddr, u64, T)>,
    next_token: u64,
    /// Validated peers refused at the limit, oldest first: the next lane
    /// that closes goes to them (at most `max` remembered).
    waiting: VecDeque<SocketAddr>,
    /// `epoll_wait`'s output, kept between calls.
    events: Vec<EpollEvent>,
    counters: LaneCounters,
    /// The shared socket is out of the epoll set ([`crate::intake`]).
    shared_aside: bool,
}

/// The shared socket's epoll token.
const SHARED: u64 = 0;

impl<T: Transport> Lanes<T> {
    /// Up to `max` lanes beside `shared`, which joins the epoll set.
    pub(crate) fn new(max: usize, shared: &T) -> io::Result<Self> {
        let epoll = Epoll::new(EpollCreateFlags::EPOLL_CLOEXEC).map_err(io::Error::from)?;
        epoll.add(shared.fd(), EpollEvent::new(EpollFlags::EPOLLIN, SHARED)).map_err(io::Error::from)?;
        Ok(Lanes {
            max,
            epoll,
            socks: Vec::new(),
            next_token: SHARED + 1,
            waiting: VecDeque::new(),
            events: vec![EpollEvent::empty(); max + 1],
            counters: LaneCounters::default(),
            shared_aside: false,
        })
    }

    /// The epoll set's descriptor: readable when any socket is.
    pub(crate) fn fd(&self) -> BorrowedFd<'_> {
        self.epoll.0.as_fd()
    }

    /// Opens a lane to `peer` from `shared` (a no-op if one is open); at
    /// the limit the peer waits for a lane to close.
    pub(crate) fn open(&mut self, shared: &T, peer: SocketAddr) {
        if self.socks.iter().any(|(p, _, _)| *p == peer) {
            return;
        }
        if self.socks.len() >= self.max {
            self.counters.at_limit += 1;
            if self.waiting.len() >= self.max {
                self.waiting.pop_front();
            }
            self.waiting.push_back(peer);
            return;
        }
        let token = self.next_token;
        let lane = shared.open_lane(peer).and_then(|s| {
            self.epoll.add(s.fd(), EpollEvent::new(EpollFlags::EPOLLIN, token)).map_err(io::Error::from)?;
            Ok(s)
        });
        match lane {
            Ok(s) => {
                self.next_token += 1;
                self.socks.push((peer, token, s));
                self.counters.opened += 1;
            }
            Err(_) => self.counters.failed += 1,
        }
    }

    /// Closes the lane to `peer`, if open, and gives it to the peer that
    /// has waited longest. Datagrams still queued in it are lost: the
    /// peer's contexts are all gone, and a new one's FIRST is retransmitted
    /// to the shared socket.
    pub(crate) fn close(&mut self, shared: &T, peer: SocketAddr) {
        self.waiting.retain(|p| *p != peer);
        if let Some(i) = self.socks.iter().position(|(p, _, _)| *p == peer) {
            let (_, _, s) = self.socks.swap_remove(i);
            let _ = self.epoll.delete(s.fd());
            if let Some(next) = self.waiting.pop_front() {
                self.open(shared, next);
            }
        }
    }

    /// Calls `read` with each lane that has input (asking the epoll set,
    /// not every socket: idle lanes cost nothing); returns whether the
    /// shared socket has input too.
    pub(crate) fn read_ready(&mut self, mut read: impl FnMut(&mut T) -> io::Result<()>) -> io::Result<bool> {
        let n = match self.epoll.wait(&mut self.events, EpollTimeout::ZERO) {
            Ok(n) => n,
            Err(nix::errno::Errno::EINTR) => 0,
            Err(e) => return Err(e.into()),
        };
        let mut shared = false;
        for e in &self.events[..n] {
            let token = e.data();
            if token == SHARED {
                shared = true;
            } else if let Some((_, _, s)) = self.socks.iter_mut().find(|(_, t, _)| *t == token) {
                read(s)?;
            }
        }
        Ok(shared)
    }

    /// Whether `peer` is validated but was left on the shared socket at the
    /// lane limit (the most recent `max` such peers are remembered).
    pub(crate) fn is_waiting(&self, peer: &SocketAddr) -> bool {
        self.waiting.contains(peer)
    }

    /// Whether the shared socket is set aside (see [`Lanes::set_aside`]).
    pub(crate) fn shared_aside(&self) -> bool {
        self.shared_aside
    }

    /// Takes the shared socket out of the epoll set (`aside`) or puts it
    /// back: while the intake budget is spent, its level-triggered
    /// readiness would otherwise wake every wait at once.
    pub(crate) fn set_aside(&mut self, shared: &T, aside: bool) -> io::Result<()> {
        if aside != self.shared_aside {
            let flags = if aside { EpollFlags::empty() } else { EpollFlags::EPOLLIN };
            self.epoll.modify(shared.fd(), &mut EpollEvent::new(flags, SHARED)).map_err(io::Error::from)?;
            self.shared_aside = aside;
        }
        Ok(())
    }

    pub(crate) fn counters(&self) -> LaneCounters {
        LaneCounters { open: self.socks.len() as u64, ..self.counters }
    }
}
