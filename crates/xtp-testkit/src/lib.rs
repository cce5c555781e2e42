//! The one test kit for XTP endpoints: what the protocol's tests, the lab's
//! simulated experiments and the engine benchmark share.
//!
//! * [`Host`]: an [`xtp_proto::Endpoint`] as an [`xk_sim::Node`], with an
//!   [`App`] on top that reads events and writes, and an optional [`Meter`]
//!   around the endpoint's own work (the lab times it; tests do not).
//! * [`pair`]: two hosts joined by two simulated links, the client's and the
//!   server's addresses known to each other.
//! * [`Wire`]: two endpoints joined by a perfect wire without the simulator
//!   (virtual time moves only when the caller or a timer moves it), for
//!   single-scenario tests and the benchmark.
//! * [`GraphWire`]: the same for two `xk-core` protocol graphs (XTP as a
//!   framework protocol, `xtp_proto::XtpProtocol`); [`GraphHost`]: any
//!   composition a device drives (such a graph, or the compiled stack) as
//!   a simulator node (the `link` device).
//!
//! # Contract
//!
//! Simulator code: no I/O, no wall clock, no randomness of its own (the
//! endpoints and the simulator take their seeds from the caller). The same
//! seeds give the same run. A [`Meter`] is the one door to the outside: the
//! caller may implement it with a clock; the kit itself never reads one.
//!
//! ```
//! use xtp_testkit::{App, Host, pair};
//! use xtp_proto::{ContextConfig, Endpoint, EndpointConfig, Event};
//! use xk_time::Instant;
//!
//! /// Counts the bytes it reads.
//! #[derive(Default)]
//! struct Sink(u64);
//! impl App for Sink {
//!     fn poll(&mut self, ep: &mut Endpoint, now: Instant) {
//!         while let Some(ev) = ep.poll_event() {
//!             if let Event::Readable { ctx } = ev {
//!                 while let Some(c) = ep.read(now, ctx) {
//!                     self.0 += c.data.len() as u64;
//!                 }
//!             }
//!         }
//!     }
//! }
//! let cfg = EndpointConfig::default();
//! let link = xk_netemu::LinkParams::default();
//! let mut p = pair(
//!     1,
//!     Host::new(Endpoint::new(cfg.clone(), 2), Sink::default()),
//!     Host::new(Endpoint::new(cfg, 3), Sink::default()),
//!     link.clone(),
//!     link,
//! );
//! p.sim.node_mut(p.server).ep.listen(7, ContextConfig::stream()).unwrap();
//! let client = p.sim.node_mut(p.client);
//! let ctx = client.ep.connect(Instant::ZERO, p.server_addr, 7, ContextConfig::stream()).unwrap();
//! client.ep.write(Instant::ZERO, ctx, bytes::Bytes::from_static(b"hello"), true, None).unwrap();
//! p.sim.run_until(Instant::from_secs(1), 10_000, |_| false).unwrap();
//! assert_eq!(p.sim.node(p.server).app.0, 5);
//! ```

mod graph_host;
mod graph_wire;
mod host;
mod stack_pair;
mod stack_wire;
mod stepping;
mod wire;

pub use graph_host::{GraphApp, GraphHost};

/// The largest UDP datagram: the size of the transmit buffer a node or a
/// wire lends a composition (`DeviceStack::poll_transmit_into`).
const MAX_DATAGRAM: usize = 65_535;
pub use graph_wire::GraphWire;
pub use host::{App, Host, Meter, NoMeter, Pair, pair};
pub use stack_pair::StackPair;
pub use stack_wire::StackWire;
pub use wire::{Delivery, Wire};
