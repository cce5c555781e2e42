//! E8 (seed 004, §3.4–§4.5, Tables 1–4, Figs. 5–6): where the time of a
//! message goes in each deployment mode, what it costs the host, and seed
//! 004's analytic model of off-host protocol processing calibrated here and
//! checked against measurement.
//!
//! Method (see [`crate::e8_measure`] and [`crate::e8_calib`] for each
//! measurement):
//!
//! * **Profile** steps, one per (mode, size): a ping-pong of `size`-byte
//!   messages through the blocking API (`send_message` / `recv_message`, the
//!   SAFENET `SEND_MESSAGE` / `GET_MESSAGE`) in the integrated, engine-thread
//!   and daemon modes against one echo server thread on loopback, recorded
//!   by the monitor (`xk-trace`): per phase min / median / p99 / max, the
//!   host's CPU time per call, the CPU time of the engine thread or daemon,
//!   the application thread's wake-ups and preemptions per round trip.
//!   Each round trip is bracketed by the application thread's preemption,
//!   page-fault and CPU-migration counters; a disturbed one is counted per
//!   cause and kept out of the statistics ([`crate::e8_disturb`]);
//!   undisturbed round trips over 5× the median are counted as unexplained
//!   outliers.
//! * **Calibration** steps, one per message length, engine-thread mode
//!   (the engine thread is the "protocol processor", the rings and shared
//!   buffers the "bus"), between two applications each on its engine
//!   thread: the model's eleven parameters are fitted over the lengths
//!   (xk-model's relative-error least squares, residuals shown) from
//!   measurements of each part alone — the host's write and read entries,
//!   the wake-ups, and the processor's one-way time, period and completion
//!   from the engine threads' trace and CPU clocks — and the model's
//!   predictions (δ, τ_s, τ_a, H_t, H_r) are compared with the same
//!   quantities measured end to end (pipelined throughput in steady state);
//!   see [`crate::e8_calib`]. The model is calibrated twice (`e8/model.rs`):
//!   on every length (a fit) and on every other length within each
//!   regime, evaluated at the lengths held out; a line through each
//!   measured quantity itself, fitted on the same lengths, is the
//!   baseline those held-out errors are read against. Only H_t's terms
//!   come from another operation (the ping-pong); the other checks are
//!   decompositions of the operation they are checked on, and the reading
//!   says which is which.

use serde::{Deserialize, Serialize};
use xk_driver::api::Mode;

use crate::e1_modes::{DaemonProcess, EchoThread};
pub use crate::e8_calib::CalibRow;
use crate::e8_calib::sweep;
pub use crate::e8_disturb::Disturbed;
use crate::e8_measure::profile;
pub use crate::e8_measure::{ModeName, PhaseStat, ProfileRow};
use crate::e8_peer::PeerApp;
pub use crate::e8_place::Placement;
use crate::experiment::{Env, Experiment, Step};
use crate::html::Page;

mod cross;
pub(crate) mod model;
mod pato;
mod predict;
mod render;

/// One row: a profile of one mode at one size, or one calibration point.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(untagged)]
// A few dozen rows per run: their size does not matter, and boxing the
// calibration row would only add indirection to every use.
#[allow(clippy::large_enum_variant)]
pub enum Row {
    /// A (mode, size) profile.
    Profile(ProfileRow),
    /// A calibration point (engine-thread mode).
    Calibration(CalibRow),
}

/// E8's parameters.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// Message sizes of the per-mode profiles (the seed: 1 B and 64 KB).
    pub profile_sizes: Vec<usize>,
    /// Round trips per profile.
    pub profile_round_trips: usize,
    /// Message lengths of the calibration sweep.
    pub sizes: Vec<usize>,
    /// Round trips (and synchronous sends) per calibration length, in all.
    pub count: usize,
    /// Steady-state time of the pipelined (asynchronous) runs per
    /// calibration length, in all (`windows` windows, each after 10 ms of
    /// start-up), ms.
    pub stream_ms: u64,
    /// Pipelined windows per calibration length (lengths interleaved):
    /// the period of one window moves by up to 2× with where the four
    /// threads land, so τ_a's value is a mean over several.
    #[serde(default = "three")]
    pub windows: usize,
    /// Rounds the calibration lengths are interleaved in (each round
    /// measures every length with 1/rounds of the counts).
    pub rounds: usize,
    /// Before each calibration operation, read where its engine thread
    /// last ran (`/proc`, some µs outside the timed window, but it
    /// perturbs what follows), and split the write calls that rang the
    /// doorbell by whether the wake-up crossed CPUs. Off by default;
    /// `plans/e8-placement.toml`.
    #[serde(default)]
    pub placement_probe: bool,
    /// How long the sink's engine holds an acknowledgement back for the
    /// sink application's answer (which never comes), µs; unset: the
    /// engine's default (`EngineConfig::reply_hold`, 50 µs). A synchronous
    /// send's completion waits for part of it (Session 16,
    /// `plans/e8-hold.toml`).
    #[serde(default)]
    pub sink_reply_hold_us: Option<u64>,
    /// Where the calibration's threads run: `"split"` (the application
    /// threads on one CPU, the engine threads on another, as seed 004's
    /// host and protocol processor were), `"hosts"` (the measuring
    /// application and its engines on one CPU, the peers on another),
    /// `"free"` (the scheduler's choice) or `"hosts_free"` (the default:
    /// hosts for the ping-pong and the synchronous sends, free for the
    /// pipelined windows; free on a machine with one CPU). The profiles
    /// are never pinned.
    #[serde(default)]
    pub placement: Placement,
}

fn three() -> usize {
    3
}

/// What one step measures.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Point {
    /// A profile of `mode` at `size`.
    Profile {
        /// Deployment mode.
        mode: ModeName,
        /// Message size, bytes.
        size: usize,
    },
    /// The calibration sweep: every length, interleaved.
    Calibration {
        /// Message lengths, bytes.
        sizes: Vec<usize>,
    },
}

/// E8: the servers it keeps across steps.
pub struct E8 {
    p: Params,
    echo: Option<EchoThread>,
    app_echo: Option<PeerApp>,
    app_sink: Option<PeerApp>,
    daemon: Option<DaemonProcess>,
}

impl E8 {
    fn echo(&mut self) -> Result<std::net::SocketAddr, String> {
        if self.echo.is_none() {
            self.echo = Some(EchoThread::start()?);
        }
        Ok(self.echo.as_ref().map(|e| e.addr).expect("just set"))
    }
}

impl Experiment for E8 {
    const ID: &'static str = "E8";
    const TITLE: &'static str =
        "E8 — Where the time of a message goes, and seed 004's model calibrated and checked";
    type Params = Params;
    type Point = Point;
    type Row = Row;

    fn defaults(quick: bool) -> Params {
        if quick {
            Params {
                profile_sizes: vec![1, 65_536],
                profile_round_trips: 100,
                sizes: vec![1, 4_096, 65_536],
                count: 60,
                stream_ms: 30,
                windows: 3,
                rounds: 3,
                placement_probe: false,
                sink_reply_hold_us: None,
                placement: Placement::default(),
            }
        } else {
            Params {
                profile_sizes: vec![1, 65_536],
                profile_round_trips: 3_000,
                // 1,200 B (Session 19): between glibc's per-thread cache
                // limit (1,032 B) and one packet (1,400 B), so that the
                // write entry's step is placed on one side or the other.
                // 5,400 per length (was 6,000 over nine) keeps the step
                // within its time.
                sizes: vec![1, 64, 256, 1_024, 1_200, 4_096, 8_192, 16_384, 32_768, 65_536],
                count: 5_400,
                stream_ms: 600,
                windows: 15,
                rounds: 40,
                placement_probe: false,
                sink_reply_hold_us: None,
                placement: Placement::default(),
            }
        }
    }

    fn check(p: &Params) -> Result<(), String> {
        let sizes_ok = |v: &[usize]| !v.is_empty() && v.iter().all(|&s| (1..=1 << 20).contains(&s));
        if !sizes_ok(&p.profile_sizes) {
            return Err("profile_sizes: 1 B to 1 MiB each, at least one".into());
        }
        if !sizes_ok(&p.sizes) || p.sizes.iter().collect::<std::collections::BTreeSet<_>>().len() < 2 {
            return Err(
                "sizes: 1 B to 1 MiB each, at least two different (a line is fitted over them)".into()
            );
        }
        if !(10..=100_000).contains(&p.profile_round_trips) {
            return Err("profile_round_trips: 10 to 100,000".into());
        }
        if !(10..=100_000).contains(&p.count) {
            return Err("count: 10 to 100,000".into());
        }
        if !(1..=100).contains(&p.windows) {
            return Err("windows: 1 to 100".into());
        }
        if !(15..=60_000).contains(&p.stream_ms) || p.stream_ms < 5 * p.windows as u64 {
            return Err("stream_ms: 15 to 60,000, and at least 5 ms per window".into());
        }
        if !(1..=100).contains(&p.rounds) || p.rounds > p.count {
            return Err("rounds: 1 to 100, and at most count".into());
        }
        if p.sink_reply_hold_us.is_some_and(|h| h > 10_000) {
            return Err("sink_reply_hold_us: 0 to 10,000 µs".into());
        }
        Ok(())
    }

    fn new(p: Params) -> Self {
        E8 { p, echo: None, app_echo: None, app_sink: None, daemon: None }
    }

    fn params(&self) -> &Params {
        &self.p
    }

    fn steps(&self, _env: &Env) -> Vec<Step<Point>> {
        let mut out = Vec::new();
        for &mode in &ModeName::ALL {
            for &size in &self.p.profile_sizes {
                out.push(Step {
                    label: format!("profile, {}, {size} B", mode.label()),
                    point: Point::Profile { mode, size },
                });
            }
        }
        out.push(Step {
            label: format!("calibration, {} lengths × {} rounds", self.p.sizes.len(), self.p.rounds),
            point: Point::Calibration { sizes: self.p.sizes.clone() },
        });
        out
    }

    fn run(&mut self, point: &Point, _env: &Env) -> Result<Vec<Row>, String> {
        match point {
            &Point::Profile { mode, size } => {
                let to = self.echo()?;
                let (m, pid) = match mode {
                    ModeName::Integrated => (Mode::integrated(), None),
                    ModeName::EngineThread => (Mode::engine_thread(), None),
                    ModeName::Daemon => {
                        if self.daemon.is_none() {
                            self.daemon = Some(DaemonProcess::start()?);
                        }
                        let d = self.daemon.as_ref().expect("just set");
                        (Mode::daemon(&d.socket), Some(d.pid()))
                    }
                };
                Ok(vec![Row::Profile(profile(mode, m, to, size, self.p.profile_round_trips, pid)?)])
            }
            Point::Calibration { sizes } => {
                if self.app_echo.is_none() {
                    self.app_echo = Some(PeerApp::echo()?);
                }
                if self.app_sink.is_none() {
                    let hold = self.p.sink_reply_hold_us.map(xk_time::Duration::from_micros);
                    self.app_sink = Some(PeerApp::sink(hold)?);
                }
                let echo = self.app_echo.as_ref().expect("just set");
                let sink = self.app_sink.as_ref().expect("just set");
                let p = &self.p;
                let rows = sweep(
                    echo,
                    sink,
                    sizes,
                    p.count,
                    p.stream_ms,
                    p.rounds,
                    p.placement_probe,
                    p.placement,
                    p.windows,
                )?;
                Ok(rows.into_iter().map(Row::Calibration).collect())
            }
        }
    }

    fn csv_key() -> &'static [&'static str] {
        &["kind", "mode", "size"]
    }

    fn render(p: &Params, rows: &[Row], notes: &[String], page: &mut Page) {
        render::render(p, rows, notes, page);
    }

    fn summary(_p: &Params, rows: &[Row]) -> Vec<String> {
        render::summary(rows)
    }

    fn headline(row: &Row) -> Option<(String, f64, &'static str)> {
        match row {
            Row::Profile(r) => Some((format!("{} {} B latency", r.mode.label(), r.size), r.latency_ns, "ns")),
            Row::Calibration(r) => Some((format!("engine thread {} B latency", r.size), r.delay_ns, "ns")),
        }
    }
}
