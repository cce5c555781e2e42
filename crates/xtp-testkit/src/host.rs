//! An endpoint as a simulator node, and two of them joined by links.
//!
//! Call order per simulator callback (the same for every user, so tests,
//! lab and benchmark drive the endpoint alike):
//!
//! * datagram: [`App::on_datagram`] sees it, the endpoint handles it,
//!   [`App::poll`] runs;
//! * timeout: [`App::on_timeout`] (the application's own timers), the
//!   endpoint's timers, [`App::poll`];
//! * transmit: the endpoint fills the host's buffer, [`App::on_transmit`]
//!   sees the packet and may withhold it (then the next one is taken), the
//!   packet is copied out for the simulator.
//!
//! The [`Meter`] brackets the endpoint's and the application's work in the
//! first two and only the endpoint's `poll_transmit` in the third: the copy
//! into the simulator's own packet is the simulator's work, not ours.

use std::net::SocketAddr;
use std::ops::{Deref, DerefMut};

use bytes::Bytes;
use xk_netemu::LinkParams;
use xk_sim::{Node, NodeId, Sim};
use xk_time::Instant;
use xtp_proto::Endpoint;

/// What runs on top of an endpoint: reads its events, reads and writes data.
/// Only [`App::poll`] is required; the other hooks watch or shape traffic.
pub trait App {
    /// After every input the endpoint handled: take its events, read, write.
    fn poll(&mut self, ep: &mut Endpoint, now: Instant);
    /// A datagram from `from`, before the endpoint handles it (to watch what
    /// the peer sends).
    fn on_datagram(&mut self, _now: Instant, _from: SocketAddr, _packet: &[u8]) {}
    /// A packet the endpoint sent to `dst`; false withholds it from the
    /// network (counted and dropped, e.g. replies to spoofed sources).
    fn on_transmit(&mut self, _ep: &mut Endpoint, _now: Instant, _dst: SocketAddr, _packet: &[u8]) -> bool {
        true
    }
    /// A timeout: the application's own timer (see [`App::poll_timeout`]) or
    /// the endpoint's may be due; runs before the endpoint's timers.
    fn on_timeout(&mut self, _ep: &mut Endpoint, _now: Instant) {}
    /// When the application's own timer is next due.
    fn poll_timeout(&self) -> Option<Instant> {
        None
    }
}

/// Brackets the work a host does for the simulator. The kit reads no
/// clock; an implementation may (the lab times the protocol's own cost).
pub trait Meter {
    /// Work starts.
    fn begin(&mut self) {}
    /// Work ends.
    fn end(&mut self) {}
}

/// Measures nothing.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoMeter;

impl Meter for NoMeter {}

/// An endpoint with an application on top, as a simulator node.
///
/// The host dereferences to its application, so a test reads
/// `sim.node(c).chunks` for the application's record and
/// `sim.node(c).ep` for the endpoint.
pub struct Host<A, M = NoMeter> {
    /// The protocol.
    pub ep: Endpoint,
    /// What runs on it.
    pub app: A,
    /// What brackets its work.
    pub meter: M,
    buf: Vec<u8>,
}

impl<A: App> Host<A> {
    /// `app` on `ep`, unmetered.
    pub fn new(ep: Endpoint, app: A) -> Self {
        Host::metered(ep, app, NoMeter)
    }
}

impl<A: App, M: Meter> Host<A, M> {
    /// `app` on `ep`, its work bracketed by `meter`.
    pub fn metered(ep: Endpoint, app: A, meter: M) -> Self {
        // Room for the largest packet the endpoint emits (a 1,500-byte MTU's).
        Host { ep, app, meter, buf: vec![0u8; 2048] }
    }

    /// Runs `f` on the application and the endpoint together (a step a
    /// test takes between simulator runs).
    pub fn with<R>(&mut self, f: impl FnOnce(&mut A, &mut Endpoint) -> R) -> R {
        f(&mut self.app, &mut self.ep)
    }
}

impl<A, M> Deref for Host<A, M> {
    type Target = A;
    fn deref(&self) -> &A {
        &self.app
    }
}

impl<A, M> DerefMut for Host<A, M> {
    fn deref_mut(&mut self) -> &mut A {
        &mut self.app
    }
}

impl<A: App, M: Meter> Node for Host<A, M> {
    fn handle_datagram(&mut self, now: Instant, from: SocketAddr, data: Vec<u8>) {
        self.meter.begin();
        self.app.on_datagram(now, from, &data);
        // The simulator hands the buffer over: the endpoint keeps slices of
        // it without a copy, as it does of the UDP driver's receive buffer.
        self.ep.handle_datagram(now, from, Bytes::from(data));
        self.app.poll(&mut self.ep, now);
        self.meter.end();
    }

    fn handle_timeout(&mut self, now: Instant) {
        self.meter.begin();
        self.app.on_timeout(&mut self.ep, now);
        self.ep.handle_timeout(now);
        self.app.poll(&mut self.ep, now);
        self.meter.end();
    }

    fn poll_transmit(&mut self, now: Instant) -> Option<(SocketAddr, Vec<u8>)> {
        loop {
            self.meter.begin();
            let t = self.ep.poll_transmit(now, &mut self.buf);
            self.meter.end();
            let t = t?;
            let packet = &self.buf[..t.len];
            if self.app.on_transmit(&mut self.ep, now, t.dst, packet) {
                return Some((t.dst, self.buf[..t.len].to_vec()));
            }
        }
    }

    fn poll_timeout(&mut self) -> Option<Instant> {
        match (self.ep.poll_timeout(), self.app.poll_timeout()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

/// Two hosts in one simulator: node ids and addresses of both.
pub struct Pair<A, M = NoMeter> {
    /// The simulator.
    pub sim: Sim<Host<A, M>>,
    /// The client's node.
    pub client: NodeId,
    /// The server's node.
    pub server: NodeId,
    /// The client's address.
    pub client_addr: SocketAddr,
    /// The server's address.
    pub server_addr: SocketAddr,
}

/// `client` and `server` in a simulator seeded with `seed`, joined by `ab`
/// (client → server) and `ba`. The server is added first (so its address
/// and node id come first, the same in every run).
pub fn pair<A: App, M: Meter>(
    seed: u64,
    client: Host<A, M>,
    server: Host<A, M>,
    ab: LinkParams,
    ba: LinkParams,
) -> Pair<A, M> {
    let mut sim = Sim::new(seed);
    let (s, server_addr) = sim.add_node(server);
    let (c, client_addr) = sim.add_node(client);
    // Two fresh nodes are always joinable; a refusal would be a simulator bug.
    sim.connect(c, s, ab, ba).expect("join two new nodes");
    Pair { sim, client: c, server: s, client_addr, server_addr }
}

#[cfg(test)]
mod tests {
    use super::*;
    use xtp_proto::{ContextConfig, EndpointConfig, Event};

    /// Echoes what it reads; withholds every packet when `mute`.
    #[derive(Default)]
    struct Echo {
        got: usize,
        sent: usize,
        mute: bool,
        ticks: u32,
    }

    impl App for Echo {
        fn poll(&mut self, ep: &mut Endpoint, now: Instant) {
            while let Some(ev) = ep.poll_event() {
                if let Event::Readable { ctx } = ev {
                    while let Some(c) = ep.read(now, ctx) {
                        self.got += c.data.len();
                    }
                }
            }
        }
        fn on_transmit(&mut self, _: &mut Endpoint, _: Instant, _: SocketAddr, _: &[u8]) -> bool {
            self.sent += 1;
            !self.mute
        }
        fn on_timeout(&mut self, _: &mut Endpoint, now: Instant) {
            // Called on the endpoint's timeouts too: count only our own.
            if self.poll_timeout().is_some_and(|t| t <= now) {
                self.ticks += 1;
            }
        }
        fn poll_timeout(&self) -> Option<Instant> {
            (self.ticks < 3).then(|| Instant::from_millis(100 * u64::from(self.ticks + 1)))
        }
    }

    fn run(mute: bool) -> Pair<Echo> {
        let cfg = EndpointConfig::default();
        let link = LinkParams::default();
        let client = Host::new(Endpoint::new(cfg.clone(), 2), Echo { mute, ..Echo::default() });
        let mut p = pair(9, client, Host::new(Endpoint::new(cfg, 3), Echo::default()), link.clone(), link);
        p.sim.node_mut(p.server).ep.listen(7, ContextConfig::stream()).unwrap();
        let to = p.server_addr;
        p.sim.node_mut(p.client).with(|_, ep| {
            let ctx = ep.connect(Instant::ZERO, to, 7, ContextConfig::stream()).unwrap();
            ep.write(Instant::ZERO, ctx, Bytes::from(vec![1u8; 3000]), true, None).unwrap();
        });
        p.sim.run_until(Instant::from_secs(1), 100_000, |_| false).unwrap();
        p
    }

    #[test]
    fn data_crosses_and_hooks_run() {
        let p = run(false);
        assert_eq!(p.sim.node(p.server).got, 3000);
        assert!(p.sim.node(p.client).sent >= 3, "every packet seen");
        assert_eq!(p.sim.node(p.client).ticks, 3, "the application's own timers fired");
    }

    #[test]
    fn a_withheld_packet_never_arrives() {
        let p = run(true);
        assert_eq!(p.sim.node(p.server).got, 0);
        assert_eq!(p.sim.node(p.server).ep.stats().datagrams_in, 0);
        assert!(p.sim.node(p.client).sent > 0);
    }
}
