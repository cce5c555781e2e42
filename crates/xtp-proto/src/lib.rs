//! The XTP 4.0 protocol engine, sans-I/O.
//!
//! # Contract
//!
//! Like quinn-proto: no sockets, no clock, no threads, no global state.
//! An [`Endpoint`] is fed datagrams ([`Endpoint::handle_datagram`]) and time
//! ([`Endpoint::handle_timeout`]); it hands back datagrams to send
//! ([`Endpoint::poll_transmit`]), the next time it wants to be called
//! ([`Endpoint::poll_timeout`]) and application events
//! ([`Endpoint::poll_event`]). Randomness (context keys, hash seeds) comes from
//! the seed given at construction. Every significant protocol action is also
//! reported to a [`Subscriber`] type parameter, a no-op by default.
//!
//! Received payload reaches the application as slices of the received
//! datagram's `Bytes` ([`Chunk`]); data to send is held as the application's
//! `Bytes` until acknowledged, and copied once, into the transmit buffer.
//!
//! Behaviour follows `xtp4-digest.md` §4–§5; the decisions taken where the
//! digest is silent are recorded in `docs/PROTOCOL.md`. Context states and
//! transitions are in [`State`].

mod admission;
pub mod cc;
mod config;
mod context;
mod endpoint;
mod events;
pub mod fuzzing;
mod layer;
mod peers;
mod ranges;
pub mod rate;
pub mod rtt;
pub mod stack;

pub use config::{Congestion, ContextConfig, EndpointConfig};
pub use context::{Chunk, INITIAL_ALLOC, Input, MIN_MAXDATA, State};
pub use endpoint::{
    ConnectError, ContextId, ContextStats, CopyCount, Endpoint, EndpointStats, ListenError, Transmit,
    WriteError,
};
pub use events::{
    CloseReason, DropReason, Event, NoTrace, Recorder, Subscriber, TimerKind, Trace, WindowCause, Work,
};
pub use layer::XtpProtocol;
pub use peers::PeerChange;
pub use ranges::RangeSet;
pub use xtp_wire::Service;
