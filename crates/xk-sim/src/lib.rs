//! A discrete-event network simulator in virtual time.
//!
//! # Contract
//!
//! Nodes are sans-I/O state machines ([`Node`]): the simulator hands them
//! datagrams and timeouts and collects what they want to send. Nodes are joined
//! by [`xk_netemu::Link`]s, one per direction — the same link model the
//! real-time emulator uses. Time jumps straight to the next event (a link
//! delivery or a node timeout); nothing is polled on a fixed tick.
//!
//! Determinism: every random choice derives from one master seed (each link
//! direction gets its own stream, labelled by its endpoints), events at the
//! same instant are processed in a fixed order, and every run folds each event
//! into a 64-bit trace hash. The same seed gives the same hash; the seed is part
//! of every report and every error message.

mod sim;

pub use sim::{Addr, Node, NodeId, RunReport, Sim, SimError, TraceHasher};
