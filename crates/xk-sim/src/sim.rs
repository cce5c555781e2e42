//! The simulator proper.

use core::fmt;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};

use xk_netemu::{ConfigError, LinkPacket, LinkParams, LinkSpec, LinkStats, Path};
use xk_time::{Duration, Instant};

/// A node's network address in the simulation (`10.0.x.y:port`, never used
/// for real traffic).
pub type Addr = SocketAddr;

/// Index of a node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(pub u16);

/// What the simulator needs from an endpoint: the quinn-proto shaped sans-I/O
/// interface.
pub trait Node {
    /// A datagram from `from` arrived at `now`. The buffer is handed over, so
    /// a node can keep slices of it (zero-copy receive).
    fn handle_datagram(&mut self, now: Instant, from: Addr, data: Vec<u8>);
    /// A timeout the node asked for (via `poll_timeout`) is due.
    fn handle_timeout(&mut self, now: Instant);
    /// The next datagram to send, with its destination.
    fn poll_transmit(&mut self, now: Instant) -> Option<(Addr, Vec<u8>)>;
    /// When the node next wants `handle_timeout`.
    fn poll_timeout(&mut self) -> Option<Instant>;

    /// As `poll_transmit`, with the source address: a node that is a host
    /// with several sockets (one per port, as the async API's simulated
    /// backend) says which one sent. `own` is the node's address, what
    /// every single-socket node sends from (the default).
    fn poll_transmit_from(&mut self, now: Instant, own: Addr) -> Option<(Addr, Addr, Vec<u8>)> {
        self.poll_transmit(now).map(|(to, data)| (own, to, data))
    }

    /// As `handle_datagram`, with the destination address, which a host
    /// with several sockets demultiplexes by port (the simulator routes by
    /// IP address). Default: `handle_datagram`.
    fn handle_datagram_to(&mut self, now: Instant, from: Addr, to: Addr, data: Vec<u8>) {
        let _ = to;
        self.handle_datagram(now, from, data);
    }
}

/// A datagram on a link: its bytes and both socket addresses (a node's
/// sockets share its IP address; the ports say which of them).
struct Datagram {
    from: Addr,
    to: Addr,
    data: Vec<u8>,
}

impl LinkPacket for Datagram {
    fn len(&self) -> usize {
        self.data.len()
    }
    fn flip_bit(&mut self, bit: usize) {
        self.data.flip_bit(bit);
    }
    fn duplicate(&self) -> Self {
        Datagram { from: self.from, to: self.to, data: self.data.clone() }
    }
}

/// A 64-bit FNV-1a accumulator over the events of a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TraceHasher(u64);

impl Default for TraceHasher {
    fn default() -> Self {
        TraceHasher(0xcbf2_9ce4_8422_2325)
    }
}

impl TraceHasher {
    /// Folds bytes into the hash.
    pub fn bytes(&mut self, b: &[u8]) {
        for &x in b {
            self.0 = (self.0 ^ u64::from(x)).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    /// Folds a number into the hash.
    pub fn u64(&mut self, v: u64) {
        self.bytes(&v.to_le_bytes());
    }
    /// The hash so far.
    pub fn value(&self) -> u64 {
        self.0
    }
}

/// Why a run stopped early.
#[derive(Debug)]
pub enum SimError {
    /// A node sent to an address with no link from it.
    NoRoute {
        /// The master seed of the run.
        seed: u64,
        /// Sender.
        from: Addr,
        /// Destination.
        to: Addr,
    },
    /// The event budget ran out before the stop condition held.
    EventBudget {
        /// The master seed of the run.
        seed: u64,
        /// Events processed.
        events: u64,
        /// Virtual time reached.
        now: Instant,
    },
    /// A link configuration was refused.
    Config(ConfigError),
}

impl fmt::Display for SimError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SimError::NoRoute { seed, from, to } => write!(f, "seed {seed}: no link from {from} to {to}"),
            SimError::EventBudget { seed, events, now } => {
                write!(f, "seed {seed}: stop condition not met after {events} events (virtual time {now})")
            }
            SimError::Config(e) => write!(f, "link configuration: {e}"),
        }
    }
}

impl std::error::Error for SimError {}

/// Summary of a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RunReport {
    /// The master seed.
    pub seed: u64,
    /// Virtual time at the end.
    pub now: Instant,
    /// Events processed (deliveries + timeouts).
    pub events: u64,
    /// Datagrams sent by nodes.
    pub sent: u64,
    /// Datagrams delivered to nodes.
    pub delivered: u64,
    /// Hash of every event; equal seeds give equal hashes.
    pub trace_hash: u64,
}

impl fmt::Display for RunReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "seed {} trace {:016x}: {} events, {} sent, {} delivered, virtual time {}",
            self.seed, self.trace_hash, self.events, self.sent, self.delivered, self.now
        )
    }
}

/// Two nodes joined by a path; direction 0 carries `ends[0]` → `ends[1]`.
struct Wire {
    ends: [NodeId; 2],
    path: Path<Datagram>,
}

impl Wire {
    /// The direction carrying `from` → `to`, if this wire joins them.
    fn direction(&self, from: NodeId, to: NodeId) -> Option<usize> {
        match self.ends {
            [a, b] if (a, b) == (from, to) => Some(0),
            [a, b] if (b, a) == (from, to) => Some(1),
            _ => None,
        }
    }
}

/// A simulated network of nodes and links.
pub struct Sim<N> {
    seed: u64,
    now: Instant,
    nodes: Vec<(Addr, N)>,
    wires: Vec<Wire>,
    hash: TraceHasher,
    events: u64,
    sent: u64,
    delivered: u64,
}

impl<N: Node> Sim<N> {
    /// An empty network; `seed` drives every random choice.
    pub fn new(seed: u64) -> Self {
        Sim {
            seed,
            now: Instant::ZERO,
            nodes: Vec::new(),
            wires: Vec::new(),
            hash: TraceHasher::default(),
            events: 0,
            sent: 0,
            delivered: 0,
        }
    }

    /// The master seed.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Current virtual time.
    pub fn now(&self) -> Instant {
        self.now
    }

    /// Adds a node; its address is `10.0.(i/250).(i%250+1):4000`. Datagrams
    /// are routed by IP address: a node answers for every port of its own.
    pub fn add_node(&mut self, node: N) -> (NodeId, Addr) {
        let i = self.nodes.len();
        let ip = Ipv4Addr::new(10, 0, (i / 250) as u8, (i % 250 + 1) as u8);
        let addr = SocketAddr::V4(SocketAddrV4::new(ip, 4000));
        self.nodes.push((addr, node));
        (NodeId(i as u16), addr)
    }

    /// The node with this id.
    pub fn node(&self, id: NodeId) -> &N {
        &self.nodes[id.0 as usize].1
    }

    /// Mutable access to a node (to issue commands between runs).
    pub fn node_mut(&mut self, id: NodeId) -> &mut N {
        &mut self.nodes[id.0 as usize].1
    }

    /// The address of a node.
    pub fn addr(&self, id: NodeId) -> Addr {
        self.nodes[id.0 as usize].0
    }

    /// Joins `a` and `b`: `ab` describes a → b, `ba` b → a. Two independent
    /// directions, or one half-duplex radio channel if the parameters say
    /// `csma` (both must then agree on it).
    pub fn connect(&mut self, a: NodeId, b: NodeId, ab: LinkParams, ba: LinkParams) -> Result<(), SimError> {
        let labels = [format!("link {}->{}", a.0, b.0), format!("link {}->{}", b.0, a.0)];
        let spec = |params| LinkSpec { params, changes: vec![] };
        let path = Path::new(&spec(ab), &spec(ba), self.now, self.seed, [&labels[0], &labels[1]])
            .map_err(SimError::Config)?;
        self.wires.push(Wire { ends: [a, b], path });
        Ok(())
    }

    /// Counters of the direction `from` → `to`.
    pub fn link_stats(&self, from: NodeId, to: NodeId) -> Option<LinkStats> {
        self.wires.iter().find_map(|w| Some(w.path.stats(w.direction(from, to)?)))
    }

    /// Moves every pending transmission of every node onto its link.
    fn collect_transmits(&mut self) -> Result<(), SimError> {
        for i in 0..self.nodes.len() {
            loop {
                let now = self.now;
                let own = self.nodes[i].0;
                let Some((from, to, data)) = self.nodes[i].1.poll_transmit_from(now, own) else { break };
                let Some(dst) = self.nodes.iter().position(|(a, _)| a.ip() == to.ip()) else {
                    return Err(SimError::NoRoute { seed: self.seed, from, to });
                };
                let (src, dst) = (NodeId(i as u16), NodeId(dst as u16));
                let (wire, dir) = self
                    .wires
                    .iter_mut()
                    .find_map(|w| w.direction(src, dst).map(|d| (w, d)))
                    .ok_or(SimError::NoRoute { seed: self.seed, from, to })?;
                self.sent += 1;
                self.hash.u64(1);
                self.hash.u64(now.as_nanos());
                self.hash.u64(i as u64);
                self.hash.u64(u64::from(from.port()) << 16 | u64::from(to.port()));
                self.hash.bytes(&data);
                wire.path.send(now, dir, Datagram { from, to, data });
            }
        }
        Ok(())
    }

    /// The next event time: the earliest link arrival or node timeout.
    ///
    /// Public for a driver that runs the simulator alongside other work
    /// in virtual time (the async API's simulated backend): it sleeps until
    /// then. What the nodes have queued to send since the last run is not
    /// taken here but at the start of the next run, at the time the
    /// simulator stands at: so when it is taken does not depend on when
    /// the driver happened to look.
    pub fn next_event(&mut self) -> Option<Instant> {
        let links = self.wires.iter().filter_map(|w| w.path.next_event());
        let timers = self.nodes.iter_mut().filter_map(|(_, n)| n.poll_timeout());
        links.chain(timers).min()
    }

    /// Processes one instant: all deliveries, then all due timeouts, then
    /// collects transmissions. Returns false when nothing is left to do.
    pub fn step(&mut self) -> Result<bool, SimError> {
        self.collect_transmits()?;
        let Some(t) = self.next_event() else { return Ok(false) };
        self.now = self.now.max(t);
        let now = self.now;
        for (w, dir) in (0..self.wires.len()).flat_map(|w| [(w, 0), (w, 1)]) {
            while let Some(d) = self.wires[w].path.poll(now, dir) {
                let to = self.wires[w].ends[1 - dir];
                let Datagram { from: src, to: dst, data } = d.packet;
                self.events += 1;
                self.delivered += 1;
                self.hash.u64(2);
                self.hash.u64(now.as_nanos());
                self.hash.u64(u64::from(to.0));
                self.hash.u64(u64::from(src.port()) << 16 | u64::from(dst.port()));
                self.hash.bytes(&data);
                self.nodes[to.0 as usize].1.handle_datagram_to(now, src, dst, data);
            }
        }
        for i in 0..self.nodes.len() {
            if self.nodes[i].1.poll_timeout().is_some_and(|t| t <= now) {
                self.events += 1;
                self.hash.u64(3);
                self.hash.u64(now.as_nanos());
                self.hash.u64(i as u64);
                self.nodes[i].1.handle_timeout(now);
            }
        }
        self.collect_transmits()?;
        Ok(true)
    }

    /// Runs until `done` holds (checked after every instant), nothing is left
    /// to do, virtual time passes `deadline`, or `max_events` is exceeded (an
    /// error naming the seed).
    pub fn run_until(
        &mut self,
        deadline: Instant,
        max_events: u64,
        mut done: impl FnMut(&Self) -> bool,
    ) -> Result<RunReport, SimError> {
        let start_events = self.events;
        while !done(self) {
            if self.events - start_events > max_events {
                return Err(SimError::EventBudget { seed: self.seed, events: self.events, now: self.now });
            }
            let next = {
                self.collect_transmits()?;
                self.next_event()
            };
            match next {
                Some(t) if t <= deadline => {
                    self.step()?;
                }
                _ => {
                    self.now = self.now.max(deadline.min(next.unwrap_or(deadline)));
                    break;
                }
            }
        }
        Ok(self.report())
    }

    /// Runs for `d` of virtual time (or until idle).
    pub fn run_for(&mut self, d: Duration, max_events: u64) -> Result<RunReport, SimError> {
        let deadline = self.now + d;
        self.run_until(deadline, max_events, |_| false)
    }

    /// The report so far.
    pub fn report(&self) -> RunReport {
        RunReport {
            seed: self.seed,
            now: self.now,
            events: self.events,
            sent: self.sent,
            delivered: self.delivered,
            trace_hash: self.hash.value(),
        }
    }
}
