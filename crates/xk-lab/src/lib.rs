//! xk-lab — the laboratory behind `xpress report`: the seeds' experiments
//! measured here and now, next to the seeds' own tables.
//!
//! # Contract
//!
//! Each experiment is one module implementing [`experiment::Experiment`] and
//! one line in [`experiment::registry`]. The [`runner`] resolves a plan (each
//! experiment's built-in full or quick parameters, a TOML plan file on top),
//! numbers every step of every chosen experiment, runs them in order (or one
//! shard of them), and writes `results.json` (plan, machine before and after,
//! date, commit, every step's rows), one CSV per experiment (one line per
//! measured row), `report.html` with one standalone SVG per figure, and a
//! console summary. Results can be re-rendered (`--replot`), compared
//! (`--compare`) and merged from shards (`--merge`) without measuring.
//!
//! This crate may read the wall clock, open sockets and start processes
//! (`xpress netns` for kernel TCP as root, `xpress serve` where separate
//! processes are the point); the protocol crates it measures do none of that.
//!
//! Ctrl-C stops after the step under way and still writes everything, marked
//! partial.

mod affinity;
pub mod churn;
pub mod copies;
pub mod e1;
pub mod e10;
mod e1_modes;
pub mod e2;
pub mod e3;
mod e3_peers;
pub mod e4;
pub mod e5;
pub mod e6;
pub mod e7;
pub mod e8;
mod e8_calib;
mod e8_disturb;
mod e8_measure;
mod e8_peer;
mod e8_place;
pub mod e9;
pub mod experiment;
pub mod fairness;
pub mod flood;
pub mod html;
pub mod msgsize;
pub mod netns_run;
pub mod paths;
mod plan;
mod progress;
pub mod runner;
pub mod serve_proc;
pub mod soak;
pub mod spoof;
mod stats;
mod svg;

pub use runner::{ReportOptions, compare, merge, replot, run};
