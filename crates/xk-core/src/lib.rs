//! The x-kernel uniform protocol interface in Rust.
//!
//! # Layer contract
//!
//! * A protocol owns its sessions (in an [`Arena`], named by generational
//!   ids) and implements the UPI verbs ([`Layer`]): `open`, `open_enable`,
//!   `open_disable`, `demux`, `pop`, `push`, `control`, `close`, plus the
//!   `open_done` / `close_done` events (see [`upi`] for the table mapping
//!   them to the x-kernel). `Layer<M, C>` is generic over the context `C` of
//!   the composition; a [`Protocol`] is a layer of the run-time [`Graph`];
//!   a protocol written against [`Cx`] runs in both compositions.
//! * [`compiled::Stack`] is the composition fixed at compile time (the
//!   application over one protocol, a type parameter, over a device): every
//!   verb a direct call, for the shapes known in advance; the graph stays
//!   for everything rearrangeable. [`device::DeviceStack`] is what a driver
//!   needs of either.
//! * A [`Graph`] (built with a [`GraphBuilder`], bottom-up) owns the protocols
//!   and runs a dispatcher queue on the caller's thread. Frames for the device
//!   come out of [`Graph::poll_transmit`] and go in with [`Graph::receive`];
//!   application events come out of [`Graph::poll_event`].
//! * Participants ([`Participants`], [`Addr`]) and control requests
//!   ([`Control`]) are typed; errors are one small enum per operation.
//! * [`DemuxMap`] is the demultiplexing map with the one-entry cache.
//! * [`graph_desc`] parses and checks a graph description (`app -> xtp ->
//!   udp`) against a catalogue of kinds; [`registry`] holds each kind with
//!   its constructor (a new protocol: its module plus one registry line);
//!   [`device`] is the frame format between a graph and a datagram device
//!   below it.
//! * Time is handed in ([`Graph::advance`]); each protocol may keep timers
//!   ([`Layer::poll_timeout`], [`Graph::handle_timeout`]).
//! * No I/O, no clock, no threads, no global state: this crate can sit under the
//!   simulator, a socket driver or a fuzzer unchanged.
//!
//! # Example: an echo exchange between two graphs
//!
//! ```
//! use xk_core::protocols::{Echo, LoopLink, Mux};
//! use xk_core::{Addr, Event, GraphBuilder, Part, Participants};
//! use xk_msg::{Bytes, Msg, Rope};
//!
//! // Host A: application over Mux over LoopLink. Host B: Echo on port 7.
//! let mut a = GraphBuilder::<Rope>::new();
//! let link = a.add(LoopLink::new(1500), &[]);
//! let mux = a.add(Mux::new(0x0800, 1), &[link]);
//! let mut a = a.build().unwrap();
//! let mut b = GraphBuilder::<Rope>::new();
//! let link_b = b.add(LoopLink::new(1500), &[]);
//! let mux_b = b.add(Mux::new(0x0800, 2), &[link_b]);
//! b.add(Echo::new(7), &[mux_b]);
//! let mut b = b.build().unwrap();
//!
//! let parts = Participants::new(Part::top_first([Addr::Port(5000)]), Part::top_first([Addr::Port(7)]));
//! let s = a.open(mux, &parts).unwrap();
//! a.push(s, Rope::from_payload(Bytes::from_static(b"hello"), 64)).unwrap();
//! // The "wire": move frames between the two graphs until both are quiet.
//! loop {
//!     let mut moved = false;
//!     while let Some((_, f)) = a.poll_transmit() { b.receive(link_b, f); moved = true; }
//!     while let Some((_, f)) = b.poll_transmit() { a.receive(link, f); moved = true; }
//!     if !moved { break; }
//! }
//! match a.poll_event() {
//!     Some(Event::Deliver { session, msg, .. }) => {
//!         assert_eq!(session, s);
//!         assert_eq!(msg.to_vec(), b"hello");
//!     }
//!     other => panic!("expected the echo, got {other:?}"),
//! }
//! ```

mod addr;
mod arena;
pub mod compiled;
pub mod device;
mod graph;
pub mod graph_desc;
pub mod keys;
mod map;
pub mod protocols;
pub mod registry;
pub mod upi;

pub use addr::{Addr, Part, Participants};
pub use arena::{Arena, ArenaId};
pub use graph::{Ctx, DemuxMeter, Event, Graph, GraphBuilder, ProtocolStats};
pub use keys::WordKey;
pub use map::DemuxMap;
pub use upi::{
    CloseError, Control, ControlError, ControlReply, Counters, Cx, DemuxError, Layer, OpenError, Protocol,
    ProtocolId, PushError, SessionId, Upper, demux_then_pop,
};
