//! Shared memory between xpress processes: what the daemon deployment
//! (`xk_driver::daemon`) uses to talk to its client processes.
//!
//! * [`Segment`]: a `memfd` (sealed against resizing) mapped shared; its
//!   file descriptor is what crosses to the other process (`SCM_RIGHTS`).
//! * [`Producer`] / [`Consumer`]: a single-producer single-consumer ring of
//!   variable-length records in a segment, safe against a peer that
//!   scribbles on it (its mistakes are [`Corrupt`], never an out-of-bounds
//!   access), with zero-copy [`bytes::Bytes`] views of a record's body
//!   ([`Record::view`]) whose space is released when the last clone drops.
//!
//! This is the workspace's only `unsafe` code, all of it in the private
//! `segment` module (mapping, atomic words, bounds-checked copies, the view
//! slice), each block with its SAFETY argument.

mod ring;
mod segment;

pub use ring::{Consumer, Corrupt, PAD, Producer, Record, RingLayout};
pub use segment::{Segment, View};
