//! The simulated backend: the async API's streams and listeners on hosts of
//! the deterministic simulator (`xk-sim`), joined by the link model
//! (`xk-netemu`), in virtual time. Applications written against
//! [`AsyncXtpStream`] / [`AsyncXtpListener`] (FTP) run unchanged over it.
//!
//! # How it works
//!
//! A [`SimNet`] is three simulator nodes — a server host, a client host and
//! a third party (for the attacks a server must refuse: another host taking
//! a passive data port) — the client and the third party each joined to
//! the server by a path (a link per direction, seeded from the net's seed;
//! the third party's path has the client's parameters).
//! A node is a *host*: it holds the sockets made on it — each a sans-I/O
//! [`xtp_proto::Endpoint`] inside the same per-socket state the integrated
//! backend uses — by UDP port, and demultiplexes the datagrams the
//! simulator delivers by destination port (the simulator routes by IP).
//! `bind` makes a socket on the host with the address's IP; `connect` one
//! on the other end of the server's path (the client to reach the server,
//! the server to reach the others), so a stream always crosses a link;
//! `connect_from` one on a host named.
//!
//! One task drives the whole network. It runs the simulator up to the
//! runtime's current time (every delivery and endpoint timer at its own
//! virtual instant, exactly), sets the [`VirtualClock`] every socket reads
//! for the application's calls, wakes the readers, writers and acceptors
//! concerned (the integrated backend's `dispatch`), and sleeps with
//! `tokio::time::sleep_until` until the simulator's next event — or, when
//! an application call has nudged it, until one millisecond (tokio's timer
//! tick) after the call. The engine never reads the wall clock.
//!
//! # Virtual time and determinism
//!
//! On a tokio `current_thread` runtime with its clock paused
//! (`#[tokio::test(start_paused = true)]`), tokio's clock only moves when
//! every task is idle, straight to the next timer: a transfer that takes a
//! second of virtual time takes what its computation costs in wall time.
//! Then the same seed gives the same run — the same packets at the same
//! virtual instants, folded into [`SimReport::run`]'s trace hash — because:
//!
//! * every random draw comes from the seed (links by label, endpoints by
//!   the order their sockets were made);
//! * application calls are never taken in the middle of an instant: a
//!   nudge makes the task process them at the next tick, so whatever runs
//!   at one instant (in a fixed order on one thread) has all run by then;
//! * tokio holds its clock still while a `spawn_blocking` job runs (the
//!   runtime's `test-util` feature; `tokio::fs` is such jobs), so a file
//!   read or write completes at the virtual instant it started, whatever it
//!   costs in wall time, and before the next tick.
//!
//! Application calls made at an instant act at that instant: they are
//! stamped with the virtual time of the last pass, which is the current
//! instant unless a timer of the application's own woke it first (then the
//! stamp is one tick early, the same way every run).
//!
//! On a runtime whose clock runs, the same code runs in real time (not
//! reproducible: tokio's wake-ups then depend on the machine).

use std::collections::BTreeMap;
use std::fmt;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use bytes::Bytes;
use tokio::sync::Notify;
use xk_netemu::{LinkParams, LinkStats};
use xk_sim::{Addr, Node, NodeId, RunReport, Sim};
use xk_time::{Duration, Instant};
use xtp_proto::{Endpoint, EndpointConfig};

use super::{AsyncXtpListener, AsyncXtpStream, Backend, Shared, State, udp};
use crate::api::Xtp;
use crate::clock::{TimeSource, VirtualClock};
use crate::trace::EngineTrace;

/// Events one pass may process: far above what one tick of any link
/// carries (a 10 Gbit/s link delivers under 1,000 packets per ms), so
/// only a livelock in the engine reaches it — then the network fails,
/// naming the seed, rather than hanging the test.
const PASS_EVENTS: u64 = 10_000_000;

/// Where an application call is taken after it nudges the task: tokio's
/// timer tick, the smallest step its clock takes.
const TICK: std::time::Duration = std::time::Duration::from_millis(1);

/// First port handed out for `bind` to port 0 (the dynamic range).
const EPHEMERAL: u16 = 49152;

/// A simulated socket: the endpoint and the address it is bound to.
pub(super) struct SimSocket {
    pub(super) ep: Endpoint<EngineTrace>,
    pub(super) local: SocketAddr,
}

/// A host of the simulated network: its sockets by UDP port.
struct Host {
    ip: IpAddr,
    sockets: BTreeMap<u16, Arc<Shared>>,
    next_port: u16,
    /// Datagrams to a port with no socket (as UDP, dropped; XTP's
    /// retransmissions or its connect timeout see to the rest).
    strays: u64,
    buf: Vec<u8>,
}

impl Host {
    fn new(ip: IpAddr) -> Host {
        Host { ip, sockets: BTreeMap::new(), next_port: EPHEMERAL, strays: 0, buf: vec![0; 1 << 16] }
    }

    /// A free port: `want`, or the next ephemeral one for 0.
    fn port(&mut self, want: u16) -> io::Result<u16> {
        if want != 0 {
            if self.sockets.contains_key(&want) {
                return Err(io::Error::new(
                    io::ErrorKind::AddrInUse,
                    format!("simulated host {}: UDP port {want} is in use", self.ip),
                ));
            }
            return Ok(want);
        }
        for _ in 0..=(u16::MAX - EPHEMERAL) {
            let p = self.next_port;
            self.next_port = if p == u16::MAX { EPHEMERAL } else { p + 1 };
            if !self.sockets.contains_key(&p) {
                return Ok(p);
            }
        }
        Err(io::Error::new(io::ErrorKind::AddrInUse, format!("simulated host {}: no free port", self.ip)))
    }

    /// Wakes the writers whose bytes have left and forgets the sockets
    /// whose handles and contexts are all gone (the integrated task's end,
    /// per socket: closed contexts linger as there).
    fn tidy(&mut self) {
        self.sockets.retain(|_, s| {
            let mut st = s.lock();
            udp::dispatch(&mut st);
            udp::wake_unsent_waiters(&mut st);
            let left = st.core.local_ep().map_or(0, |ep| ep.context_count());
            st.handles > 0 || left > 0
        });
    }
}

impl Node for Host {
    /// Every delivery names its port (`handle_datagram_to`); one without
    /// is a stray.
    fn handle_datagram(&mut self, _now: Instant, _from: Addr, _data: Vec<u8>) {
        self.strays += 1;
    }

    fn handle_datagram_to(&mut self, now: Instant, from: Addr, to: Addr, data: Vec<u8>) {
        let Some(s) = self.sockets.get(&to.port()) else {
            self.strays += 1;
            return;
        };
        let mut st = s.lock();
        let Some(ep) = st.core.local_ep() else { return };
        ep.handle_datagram(now, from, Bytes::from(data));
        udp::dispatch(&mut st);
    }

    fn handle_timeout(&mut self, now: Instant) {
        for s in self.sockets.values() {
            let mut st = s.lock();
            let Some(ep) = st.core.local_ep() else { continue };
            if ep.poll_timeout().is_some_and(|t| t <= now) {
                ep.handle_timeout(now);
                udp::dispatch(&mut st);
            }
        }
    }

    fn poll_transmit(&mut self, now: Instant) -> Option<(Addr, Vec<u8>)> {
        let own = SocketAddr::new(self.ip, 0);
        self.poll_transmit_from(now, own).map(|(_, to, data)| (to, data))
    }

    /// The sockets in port order (a fixed order: the same run every time).
    fn poll_transmit_from(&mut self, now: Instant, _own: Addr) -> Option<(Addr, Addr, Vec<u8>)> {
        let Host { ip, sockets, buf, .. } = self;
        for (&port, s) in sockets.iter() {
            let mut st = s.lock();
            let Some(ep) = st.core.local_ep() else { continue };
            if let Some(t) = ep.poll_transmit(now, buf) {
                return Some((SocketAddr::new(*ip, port), t.dst, buf[..t.len].to_vec()));
            }
        }
        None
    }

    fn poll_timeout(&mut self) -> Option<Instant> {
        self.sockets.values().filter_map(|s| s.lock().core.local_ep()?.poll_timeout()).min()
    }
}

/// The simulator and what the task needs beside it.
struct World {
    sim: Sim<Host>,
    server: NodeId,
    client: NodeId,
    third: NodeId,
    /// Tokio's instant of virtual time zero.
    epoch: tokio::time::Instant,
    /// Sockets made so far: each endpoint's seed derives from its number.
    made: u64,
    /// Why the network stopped (a simulator error), if it did.
    failed: Option<String>,
}

impl World {
    fn host(&mut self, id: NodeId) -> &mut Host {
        self.sim.node_mut(id)
    }

    /// The node whose IP is `ip`.
    fn node_at(&self, ip: IpAddr) -> Option<NodeId> {
        self.nodes().into_iter().find(|&n| self.sim.node(n).ip == ip)
    }

    fn nodes(&self) -> [NodeId; 3] {
        [self.server, self.client, self.third]
    }

    /// The hosts' addresses, for messages.
    fn named(&self) -> String {
        let ip = |n| self.sim.node(n).ip;
        format!(
            "the server is {}, the client {}, the third party {}",
            ip(self.server),
            ip(self.client),
            ip(self.third)
        )
    }
}

/// The network ends with its last [`SimNet`] handle: sockets still held
/// by streams or listeners then fail with the reason instead of waiting
/// for a network that is gone (review, session 14).
impl Drop for World {
    fn drop(&mut self) {
        if self.failed.is_none() {
            fail(self, "the SimNet was dropped while its sockets were in use".into());
        }
    }
}

struct Net {
    world: Mutex<World>,
    nudge: Arc<Notify>,
    clock: VirtualClock,
    seed: u64,
}

impl Net {
    fn lock(&self) -> MutexGuard<'_, World> {
        // A panic while holding the lock leaves the simulator as it was.
        self.world.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A simulated network of two hosts for the async API: see the module
/// documentation. Cheap to clone (one network, shared).
#[derive(Clone)]
pub struct SimNet(Arc<Net>);

impl fmt::Debug for SimNet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SimNet(seed {})", self.0.seed)
    }
}

/// What a simulated network has done so far.
#[derive(Clone, Copy, Debug)]
pub struct SimReport {
    /// The simulator's summary: seed, virtual time, events, datagrams, and
    /// the hash of every event (equal seeds, equal hashes).
    pub run: RunReport,
    /// The client → server direction's counters.
    pub to_server: LinkStats,
    /// The server → client direction's counters.
    pub to_client: LinkStats,
    /// Datagrams to a port with no socket.
    pub strays: u64,
    /// Why the network stopped, if it did.
    pub failed: bool,
}

impl fmt::Display for SimReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}; to server {} offered, {} lost; to client {} offered, {} lost",
            self.run,
            self.to_server.offered,
            self.to_server.drop_loss + self.to_server.drop_queue,
            self.to_client.offered,
            self.to_client.drop_loss + self.to_client.drop_queue
        )
    }
}

impl SimNet {
    /// A network of a server host, a client host and a third party,
    /// `to_server` carrying client → server and `to_client` the other way
    /// (the third party's path the same); every random choice
    /// derives from `seed`. Starts its task: call it inside a tokio runtime
    /// (a paused `current_thread` one for virtual time).
    pub fn new(seed: u64, to_server: LinkParams, to_client: LinkParams) -> io::Result<SimNet> {
        let rt = tokio::runtime::Handle::try_current()
            .map_err(|_| io::Error::other("a simulated network needs a tokio runtime"))?;
        let mut sim = Sim::new(seed);
        // Placeholders until the addresses are known (`add_node` names them).
        let mut host = || {
            let (n, a) = sim.add_node(Host::new(IpAddr::from([0, 0, 0, 0])));
            sim.node_mut(n).ip = a.ip();
            n
        };
        let (server, client, third) = (host(), host(), host());
        let bad = |e: xk_sim::SimError| io::Error::new(io::ErrorKind::InvalidInput, e.to_string());
        sim.connect(client, server, to_server.clone(), to_client.clone()).map_err(bad)?;
        sim.connect(third, server, to_server, to_client).map_err(bad)?;
        let epoch = tokio::time::Instant::now();
        let world = World { sim, server, client, third, epoch, made: 0, failed: None };
        let net = Arc::new(Net {
            world: Mutex::new(world),
            nudge: Arc::new(Notify::new()),
            clock: VirtualClock::default(),
            seed,
        });
        rt.spawn(drive(Arc::downgrade(&net), net.nudge.clone()));
        Ok(SimNet(net))
    }

    /// Whether `other` is this network (a handle to the same one).
    pub fn same(&self, other: &SimNet) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// The master seed.
    pub fn seed(&self) -> u64 {
        self.0.seed
    }

    /// The server host's IP address.
    pub fn server_ip(&self) -> IpAddr {
        let w = self.0.lock();
        w.sim.node(w.server).ip
    }

    /// The client host's IP address.
    pub fn client_ip(&self) -> IpAddr {
        let w = self.0.lock();
        w.sim.node(w.client).ip
    }

    /// The third party's IP address (joined to the server only).
    pub fn third_ip(&self) -> IpAddr {
        let w = self.0.lock();
        w.sim.node(w.third).ip
    }

    /// Virtual time now (as the sockets see it).
    pub fn now(&self) -> Instant {
        self.0.clock.now()
    }

    /// The counters so far.
    pub fn report(&self) -> SimReport {
        let w = self.0.lock();
        let stats = |a, b| w.sim.link_stats(a, b).unwrap_or_default();
        SimReport {
            run: w.sim.report(),
            to_server: stats(w.client, w.server),
            to_client: stats(w.server, w.client),
            strays: w.nodes().iter().map(|&n| w.sim.node(n).strays).sum(),
            failed: w.failed.is_some(),
        }
    }

    /// As [`Xtp::bind_async`], on the host whose IP is `addr`'s (port 0: a
    /// free one).
    pub async fn bind(&self, addr: SocketAddr, port: u16) -> io::Result<AsyncXtpListener> {
        let shared = self.socket(addr, Place::At, Xtp::default().server_endpoint())?;
        super::listener(shared, port).await
    }

    /// As [`Xtp::connect_async`]: from the client host to the server, from
    /// the server to the others.
    pub async fn connect(&self, peer: SocketAddr, port: u16) -> io::Result<AsyncXtpStream> {
        let shared = self.socket(peer, Place::Reaching(None), Xtp::default().client_endpoint())?;
        super::open(shared, peer, port)
    }

    /// As [`SimNet::connect`], from the host at `from` (the server, or a
    /// host joined to it reaching the server).
    pub async fn connect_from(
        &self,
        from: IpAddr,
        peer: SocketAddr,
        port: u16,
    ) -> io::Result<AsyncXtpStream> {
        let shared = self.socket(peer, Place::Reaching(Some(from)), Xtp::default().client_endpoint())?;
        super::open(shared, peer, port)
    }

    /// Makes a socket where `place` says, relative to `addr`.
    fn socket(&self, addr: SocketAddr, place: Place, cfg: EndpointConfig) -> io::Result<Arc<Shared>> {
        let mut w = self.0.lock();
        if let Some(why) = &w.failed {
            return Err(io::Error::other(why.clone()));
        }
        let unknown = |w: &World, ip: IpAddr| {
            let why = format!("no simulated host at {ip} ({})", w.named());
            io::Error::new(io::ErrorKind::AddrNotAvailable, why)
        };
        let Some(at) = w.node_at(addr.ip()) else { return Err(unknown(&w, addr.ip())) };
        let (node, want) = match place {
            Place::At => (at, addr.port()),
            Place::Reaching(None) => (if at == w.server { w.client } else { w.server }, 0),
            Place::Reaching(Some(ip)) => {
                let Some(n) = w.node_at(ip) else { return Err(unknown(&w, ip)) };
                // Only the server's paths exist.
                if n == at || (n != w.server && at != w.server) {
                    let why = format!("no simulated link from {ip} to {} ({})", addr.ip(), w.named());
                    return Err(io::Error::new(io::ErrorKind::AddrNotAvailable, why));
                }
                (n, 0)
            }
        };
        w.made += 1;
        // Distinct, reproducible endpoint seeds (keys, jitter).
        let seed = self.0.seed ^ w.made.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        let host = w.host(node);
        let port = host.port(want)?;
        let local = SocketAddr::new(host.ip, port);
        let ep = Endpoint::with_subscriber(cfg, seed, EngineTrace::virtual_time());
        let shared = Arc::new(Shared {
            state: Mutex::new(State::new(Backend::Sim(SimSocket { ep, local }))),
            nudge: self.0.nudge.clone(),
            clock: TimeSource::Virtual(self.0.clock.clone()),
        });
        host.sockets.insert(port, shared.clone());
        Ok(shared)
    }
}

/// Where [`SimNet::socket`] makes a socket.
enum Place {
    /// At the address given (`bind`).
    At,
    /// On a host that reaches the address, any port (`connect`): the one
    /// named, or the other end of the server's path.
    Reaching(Option<IpAddr>),
}

/// The network's task: see the module documentation. Ends with the last
/// [`SimNet`] handle (whose drop fails the sockets left), or when the
/// simulator fails.
async fn drive(net: Weak<Net>, nudge: Arc<Notify>) {
    // An application call is waiting to be taken at the next tick.
    let mut nudged = false;
    loop {
        let wake = {
            let Some(net) = net.upgrade() else { return };
            let mut w = net.lock();
            // Not `run_until`'s first step, which also takes what the
            // sockets have queued: that waits for the pass (see above).
            let next = w.sim.next_event().map(|t| w.epoch + std::time::Duration::from_nanos(t.as_nanos()));
            // Never at the current tick, even for an event due now: the
            // application's work at this instant (and the file I/O it
            // waits for) is taken whole, at the next one.
            let tick = tokio::time::Instant::now() + TICK;
            [next, nudged.then_some(tick)].into_iter().flatten().min().map(|t| t.max(tick))
        };
        tokio::select! {
            // Fixed order (tokio's default picks at random): reproducible.
            biased;
            () = nudge.notified() => {
                nudged = true;
                continue;
            }
            () = sleep_until(wake) => {}
        }
        nudged = false;
        let Some(net) = net.upgrade() else { return };
        let mut w = net.lock();
        let target = w.epoch.elapsed();
        let target = Instant::ZERO + Duration::from_nanos(target.as_nanos() as u64);
        let target = target.max(w.sim.now());
        if let Err(e) = w.sim.run_until(target, PASS_EVENTS, |_| false) {
            return fail(&mut w, e.to_string());
        }
        net.clock.set(w.sim.now());
        for n in w.nodes() {
            w.host(n).tidy();
        }
    }
}

/// Sleeps until `t`, or for ever.
async fn sleep_until(t: Option<tokio::time::Instant>) {
    match t {
        Some(t) => tokio::time::sleep_until(t).await,
        None => std::future::pending().await,
    }
}

/// Stops the network: every socket's calls fail with `why` (which names
/// the seed), and whoever waits is woken to see it.
fn fail(w: &mut World, why: String) {
    w.failed = Some(why.clone());
    for n in w.nodes() {
        for sock in w.host(n).sockets.values() {
            let mut st = sock.lock();
            st.gone = Some((io::ErrorKind::Other, format!("simulated network: {why}")));
            st.wake_all();
        }
    }
}
