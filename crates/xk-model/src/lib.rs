//! Seed 004's analytic model of off-host protocol processing, and the
//! least-squares fit that calibrates it from measurements.
//!
//! Seed 004 (the SAFENET XTP on an attached VMEbus processor) predicts what
//! an application sees — end-to-end latency, the period of a send and of a
//! receive, synchronous and asynchronous throughput, host processing time —
//! from eleven parameters that are easy to measure or read off a data sheet
//! (its Table 3). Here the "host" is the application's thread, the "protocol
//! processor" the engine thread (or the daemon) and the "bus" the ring and
//! shared memory between them; the formulas are the seed's, unchanged.
//! [`Extended`] adds the terms an engine thread on a general-purpose
//! machine needs (the processor's wake-up, its completion of a synchronous
//! send, the doorbells, the pipeline's slowest stage with the cores' idle
//! time, a receive's host time as the CPU time inside and outside its
//! wait, the write entry beyond one packet),
//! each named, so that the seed's form and the extended form can be shown
//! side by side.
//!
//! # Contract
//!
//! Pure arithmetic: no I/O, no clock, no randomness. Times are `f64`
//! seconds, per-byte costs `f64` seconds per byte, lengths `f64` bytes.
//! [`Params::validate`] refuses a parameter that is negative or not finite,
//! naming it; the predictions themselves never panic (a zero-length message
//! has zero throughput, not a division by zero).
//!
//! ```
//! use xk_model::Params;
//! let p = Params::SEED_004;
//! // The seed: "1.4 ms for a one-byte message and 19.5 ms for a 64-KB message".
//! assert!((p.host_send(1.0) - 1.352e-3).abs() < 1e-6);
//! assert!((p.host_send(65536.0) - 19.665e-3).abs() < 1e-5);
//! ```

mod extended;
mod fit;
mod params;

pub use extended::Extended;
pub use fit::{LineFit, fit_line, fit_line_relative};
pub use params::{Params, Prediction};
