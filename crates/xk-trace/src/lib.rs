//! The tracing monitor, after seed 000's PATO: typed tracepoints on the
//! data path, each with a monotonic timestamp and a journey id that follows
//! a packet or message across layers, threads and processes; recorded into
//! per-thread buffers; exported for Perfetto (Chrome JSON trace) and as
//! JSON lines; summarised into per-phase profiles.
//!
//! # Contract
//!
//! * **No clock here.** Every [`Event`] carries the time its caller gives
//!   (nanoseconds on `CLOCK_MONOTONIC`, so traces of two processes on one
//!   host line up). The protocol engine is handed `now` on every call and
//!   passes it on; the driver reads the clock it already reads, or a
//!   cheaper one it calibrates against it from the processor's tick
//!   counter, [`cycles`] (the one thing here that is not plain Rust).
//! * **Free when off, cheap when on.** Whether tracepoints exist at all is
//!   decided at compile time by the instrumented crate (`xtp-proto`'s
//!   `Subscriber::ENABLED`, `xk-driver`'s `trace` feature). Compiled in,
//!   [`record`] is one relaxed atomic load while no recording runs, and
//!   while one runs, a push into the calling thread's own buffer under that
//!   buffer's own, uncontended lock; no allocation (a full buffer is set
//!   aside and replaced once per [`Config::chunk`] events — or, past
//!   [`Config::max_events`], emptied and counted as dropped).
//! * **Journeys.** [`journey`] names a piece of data by two numbers both
//!   ends of a hand-off know without being told — (flow, sequence number)
//!   for data on an XTP context, (ring, record count) for a ring crossing —
//!   so no id needs to travel with the data.
//!
//! [`start`] begins a recording, [`finish`] ends it and returns every
//! thread's events ([`Recording`]); [`export`] writes them, [`profile()`]
//! summarises them.

mod cycles;
mod event;
pub mod export;
pub mod profile;
mod recorder;

pub use cycles::cycles;
pub use event::{Event, Layer, Phase, Point, cause, journey, wake};
pub use profile::{PhaseProfile, profile};
pub use recorder::{
    Config, Recording, ThreadEvents, enabled, finish, name_thread, record, record_span, start,
};
