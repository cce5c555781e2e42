//! xk-loadgen — a load generator after UniLoG (seed 001).
//!
//! Load is specified as user-behaviour automata ([`model`]: states init,
//! delay, request, terminate and macro, probabilistic and guarded
//! transitions, delay and size distributions, context variables), in a TOML
//! file checked by a validator whose errors name the state and field.
//! [`analytic`] predicts the mean rate and size from the chain's stationary
//! distribution. [`gar`] (the generator of abstract requests) walks the
//! automata of every virtual user and yields requests with their specified
//! times t_i. [`run`] executes them: [`sched`] waits for each t_i (busy,
//! sleep or hybrid; SCHED_FIFO and CPU affinity on request), [`adapt`]
//! executes at a real interface (null, UDP one-per-call / `sendmmsg` /
//! GSO, TCP, XTP datagram / stream / transaction), on one thread or with
//! GAR on a second thread behind a lock-free SPSC queue, and records every
//! miss time τ_i − t_i ([`stats`]). [`sink`] is the receiving end,
//! [`floor`] the raw system-call rates a run is compared with.
//!
//! # Contract
//!
//! The model, the analytic prediction and the generator are deterministic
//! for a given seed and read no clock. The run (scheduler and adapters)
//! does I/O and reads the monotonic clock: it is one of the workspace's I/O
//! crates.

pub mod adapt;
mod adapt_xtp;
pub mod analytic;
#[allow(unsafe_code)]
pub mod clock;
pub mod dist;
pub mod floor;
pub mod gar;
pub mod model;
pub mod run;
pub mod sched;
pub mod sink;
pub mod stats;

pub use analytic::{Prediction, predict};
pub use gar::{Gar, Request};
pub use model::Model;
pub use run::{RunConfig, RunReport, run};
