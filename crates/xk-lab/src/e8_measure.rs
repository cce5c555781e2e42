//! E8's measurements: the per-phase profile of a message exchange in each
//! deployment mode (from the monitor's trace), the host's CPU time and
//! wake-ups per message, and the points seed 004's model is calibrated on
//! and checked against (engine-thread mode).
//!
//! Every time is on `CLOCK_MONOTONIC` (`xk_driver::trace::mono_ns`, the
//! clock trace events carry), so the lab's own timestamps and the trace's
//! line up. CPU time: the calling thread's `CLOCK_THREAD_CPUTIME_ID`; the
//! engine thread's and the daemon's from `/proc/…/schedstat` (nanoseconds
//! on the CPU, kept by the scheduler); wake-ups: the thread's voluntary
//! context switches (`getrusage(RUSAGE_THREAD)`) — each is one sleep and
//! the wake-up that ended it, the seed's "host interrupt".

use std::collections::BTreeSet;
use std::net::SocketAddr;

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use xk_driver::api::{Mode, Xtp};
use xk_driver::driver::UdpDriver;
use xk_driver::engine::{self, EngineConfig, FromEngine, ToEngine};
use xk_driver::trace::mono_ns;
use xk_time::Duration;
use xk_trace::{Phase, Point, Recording, ThreadEvents};
use xtp_proto::{ContextConfig, EndpointConfig, Event as XtpEvent};

/// The calling thread's CPU time, ns.
pub(crate) fn thread_cpu_ns() -> u64 {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_THREAD_CPUTIME_ID)
        .map_or(0, |t| t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64)
}

/// The calling thread's (voluntary, involuntary) context switches.
fn thread_switches() -> (u64, u64) {
    use nix::sys::resource::{UsageWho, getrusage};
    getrusage(UsageWho::RUSAGE_THREAD)
        .map_or((0, 0), |u| (u.voluntary_context_switches() as u64, u.involuntary_context_switches() as u64))
}

/// Nanoseconds on the CPU of one task (`/proc/<pid>/task/<tid>/schedstat`).
fn schedstat(path: &std::path::Path) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.split_whitespace().next()?.parse().ok()
}

/// Nanoseconds on the CPU of every thread of process `pid` (`self` for
/// this one), or of the listed threads only.
fn process_cpu_ns(pid: &str, only: Option<&BTreeSet<String>>) -> u64 {
    let dir = std::path::Path::new("/proc").join(pid).join("task");
    let Ok(entries) = std::fs::read_dir(&dir) else { return 0 };
    entries
        .filter_map(Result::ok)
        .filter(|e| only.is_none_or(|o| o.contains(&*e.file_name().to_string_lossy())))
        .filter_map(|e| schedstat(&e.path().join("schedstat")))
        .sum()
}

/// Thread ids of this process's engine threads (named `xtp-engine`).
fn engine_threads() -> BTreeSet<String> {
    let Ok(entries) = std::fs::read_dir("/proc/self/task") else { return BTreeSet::new() };
    entries
        .filter_map(Result::ok)
        .filter(|e| std::fs::read_to_string(e.path().join("comm")).is_ok_and(|c| c.trim() == "xtp-engine"))
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect()
}

/// Deployment mode of a profile step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ModeName {
    /// The endpoint in the application's thread.
    Integrated,
    /// On an engine thread, through in-process rings.
    EngineThread,
    /// In an `xpress daemon` process, through rings in shared memory.
    Daemon,
}

impl ModeName {
    /// Every mode, in report order.
    pub const ALL: [ModeName; 3] = [ModeName::Integrated, ModeName::EngineThread, ModeName::Daemon];

    /// As shown in tables.
    pub fn label(self) -> &'static str {
        match self {
            ModeName::Integrated => "integrated",
            ModeName::EngineThread => "engine thread",
            ModeName::Daemon => "daemon",
        }
    }
}

/// One phase of an operation: durations per occurrence, ns.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PhaseStat {
    /// What was timed.
    pub phase: String,
    /// Occurrences per round trip (one message each way).
    pub per_rt: f64,
    /// Shortest, ns.
    pub min: u64,
    /// Median (nearest rank), ns.
    pub median: u64,
    /// 99th percentile (nearest rank), ns.
    pub p99: u64,
    /// Longest, ns.
    pub max: u64,
}

fn phase(name: &str, per: usize, d: Vec<u64>) -> Option<PhaseStat> {
    let n = d.len();
    let p = xk_trace::profile::summarise(Point::AppWrite, d)?;
    Some(PhaseStat {
        phase: name.into(),
        per_rt: n as f64 / per.max(1) as f64,
        min: p.min,
        median: p.median,
        p99: p.p99,
        max: p.max,
    })
}

/// One profile step: a ping-pong of `size`-byte messages in one mode.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ProfileRow {
    /// "profile".
    pub kind: String,
    /// Deployment mode.
    pub mode: ModeName,
    /// Message size, bytes.
    pub size: usize,
    /// Round trips measured.
    pub round_trips: usize,
    /// Median one-way latency (half a round trip), ns.
    pub latency_ns: f64,
    /// Median CPU time of the application thread in one `send_message`, ns.
    pub host_send_cpu_ns: f64,
    /// Median CPU time of the application thread in one `recv_message`, ns.
    pub host_recv_cpu_ns: f64,
    /// The application thread's CPU time per round trip (all of it), ns.
    pub host_cpu_per_rt_ns: f64,
    /// The engine thread's (engine mode) or the daemon's (daemon mode) CPU
    /// time per round trip, ns; 0 integrated (all in the application).
    pub protocol_cpu_per_rt_ns: f64,
    /// The application thread's sleeps (voluntary context switches) per
    /// round trip: each a wake-up.
    pub wakeups_per_rt: f64,
    /// Involuntary context switches of the application thread per round
    /// trip (preemptions: the operating system's disturbance).
    pub preemptions_per_rt: f64,
    /// Round trips whose time exceeded 5× the median (set apart in the
    /// reading rather than averaged in).
    pub outliers: usize,
    /// Per-phase profile.
    pub phases: Vec<PhaseStat>,
    /// Trace events lost to the recorder's budget (0 expected).
    pub trace_dropped: u64,
}

/// Spans of `point` on one thread, ns.
fn spans(t: &ThreadEvents, point: Point) -> Vec<u64> {
    let rec = Recording { threads: vec![t.clone()], dropped: 0 };
    xk_trace::profile::durations(&rec).remove(&point).unwrap_or_default()
}

/// For each `to` event, the time since the latest `from` event before it
/// (both lists sorted by time): a crossing between threads.
fn crossings(from: &[u64], to: &[u64]) -> Vec<u64> {
    let mut out = Vec::with_capacity(to.len());
    let mut i = 0;
    for &t in to {
        while i + 1 < from.len() && from[i + 1] <= t {
            i += 1;
        }
        if let Some(&f) = from.get(i).filter(|&&f| f <= t) {
            out.push(t - f);
        }
    }
    out
}

/// Times of `point` instants with argument `b` on the thread numbered
/// `tid` in the recording.
fn instants(rec: &Recording, tid: u32, point: Point, b: u32) -> Vec<u64> {
    let mut v: Vec<u64> = rec
        .threads
        .iter()
        .filter(|t| t.tid == tid)
        .flat_map(|t| t.events.iter())
        .filter(|e| e.point == point && e.phase == Phase::Instant && e.b == b)
        .map(|e| e.t)
        .collect();
    v.sort_unstable();
    v
}

/// The recording's number of the thread named `name` (the first).
fn thread_named(rec: &Recording, name: &str) -> Option<u32> {
    rec.threads.iter().find(|t| t.name == name).map(|t| t.tid)
}

/// The engine thread serving the application thread `app`: the one whose
/// ring pushes the application popped (same journey: ring and record
/// number), so that other engine threads in the process (a peer's, one
/// still closing) are not mistaken for it.
fn engine_of(rec: &Recording, app: u32) -> Option<u32> {
    let popped: BTreeSet<u64> = rec
        .threads
        .iter()
        .filter(|t| t.tid == app)
        .flat_map(|t| t.events.iter())
        .filter(|e| e.point == Point::RingPop && e.journey != 0)
        .map(|e| e.journey)
        .collect();
    rec.threads
        .iter()
        .filter(|t| t.tid != app)
        .find(|t| t.events.iter().any(|e| e.point == Point::RingPush && popped.contains(&e.journey)))
        .map(|t| t.tid)
}

/// Wake-up crossings: for each first pop of a batch on `to` (the first
/// after a gap of `gap` ns), the time since the latest push on `from`.
fn wake_crossings(rec: &Recording, from: u32, to: u32, ring: u32, gap: u64) -> Vec<u64> {
    let pushes = instants(rec, from, Point::RingPush, ring);
    let pops = instants(rec, to, Point::RingPop, ring);
    let mut firsts = Vec::new();
    let mut last: Option<u64> = None;
    for &p in &pops {
        if last.is_none_or(|l| p.saturating_sub(l) > gap) {
            firsts.push(p);
        }
        last = Some(p);
    }
    crossings(&pushes, &firsts)
}

/// The profile of `count` round trips of `size` bytes in `mode` against
/// the echo server at `to`; `daemon_pid` for the daemon's CPU time.
pub(crate) fn profile(
    name: ModeName,
    mode: Mode,
    to: SocketAddr,
    size: usize,
    count: usize,
    daemon_pid: Option<u32>,
) -> Result<ProfileRow, String> {
    let what = format!("E8 {} {size} B", name.label());
    let before = engine_threads();
    let mut s = Xtp::new(mode).connect(to, 7).map_err(|e| format!("{what}: {e}"))?;
    s.set_timeout(Some(std::time::Duration::from_secs(5)));
    let msg = vec![0x42u8; size];
    let rt = |s: &mut xk_driver::api::XtpStream| -> Result<(), String> {
        s.send_message(&msg, None).map_err(|e| format!("{what}: {e}"))?;
        match s.recv_message().map_err(|e| format!("{what}: {e}"))? {
            Some(m) if m.data.len() == size => Ok(()),
            _ => Err(format!("{what}: the echo was cut short")),
        }
    };
    for _ in 0..(count / 10).clamp(5, 50) {
        rt(&mut s)?;
    }
    let engine: BTreeSet<String> = engine_threads().difference(&before).cloned().collect();
    let proto_cpu = || match (name, daemon_pid) {
        (ModeName::EngineThread, _) => process_cpu_ns("self", Some(&engine)),
        (ModeName::Daemon, Some(pid)) => process_cpu_ns(&pid.to_string(), None),
        _ => 0,
    };
    xk_trace::start(xk_trace::Config::default());
    xk_trace::name_thread("e8-app");
    let (p0, c0, (v0, i0)) = (proto_cpu(), thread_cpu_ns(), thread_switches());
    let mut cpu_send = Vec::with_capacity(count);
    let mut cpu_recv = Vec::with_capacity(count);
    let mut wait_recv = Vec::with_capacity(count);
    let mut rtt = Vec::with_capacity(count);
    for _ in 0..count {
        let (t0, a) = (mono_ns(), thread_cpu_ns());
        s.send_message(&msg, None).map_err(|e| format!("{what}: {e}"))?;
        let (t1, b) = (mono_ns(), thread_cpu_ns());
        let m = s.recv_message().map_err(|e| format!("{what}: {e}"))?;
        let (t2, c) = (mono_ns(), thread_cpu_ns());
        if m.map(|m| m.data.len()) != Some(size) {
            return Err(format!("{what}: the echo was cut short"));
        }
        cpu_send.push(b - a);
        cpu_recv.push(c - b);
        wait_recv.push((t2 - t1).saturating_sub(c - b));
        rtt.push(t2 - t0);
    }
    let (p1, c1, (v1, i1)) = (proto_cpu(), thread_cpu_ns(), thread_switches());
    let rec = xk_trace::finish();
    s.abort();
    let n = count as f64;
    let med = |v: &[u64]| xk_stats::median(v.iter().map(|&x| x as f64));
    let rtt_med = med(&rtt);
    let (send_med, recv_med) = (med(&cpu_send), med(&cpu_recv));
    let outliers = rtt.iter().filter(|&&r| r as f64 > 5.0 * rtt_med).count();
    let mut phases = Vec::new();
    let app = rec.threads.iter().find(|t| t.name == "e8-app");
    if let Some(app) = app {
        phases.extend(phase("send_message (application write)", count, spans(app, Point::AppWrite)));
        phases.extend(phase("recv_message (application read)", count, spans(app, Point::AppRead)));
    }
    phases.extend(phase("  of which host CPU in send_message", count, cpu_send));
    phases.extend(phase("  of which host CPU in recv_message", count, cpu_recv));
    phases.extend(phase("  of which waiting in recv_message", count, wait_recv));
    // System calls on the client's side: the application thread
    // (integrated) or the engine thread.
    for (thread, label) in [("e8-app", "application"), ("xtp-engine", "engine thread")] {
        let mut send = Vec::new();
        let mut recv = Vec::new();
        for t in rec.threads.iter().filter(|t| t.name == thread) {
            send.extend(spans(t, Point::SendCall));
            recv.extend(spans(t, Point::RecvCall));
        }
        phases.extend(phase(&format!("send system call ({label})"), count, send));
        phases.extend(phase(&format!("receive system call ({label})"), count, recv));
    }
    if let Some(app) = thread_named(&rec, "e8-app")
        && let Some(eng) = engine_of(&rec, app)
    {
        phases.extend(phase(
            "TN crossing: application push → engine pop (engine wake-up)",
            count,
            wake_crossings(&rec, app, eng, 0, 2_000),
        ));
        phases.extend(phase(
            "FN crossing: engine push → application pop (application wake-up)",
            count,
            wake_crossings(&rec, eng, app, 1, 2_000),
        ));
    }
    // The peer: the echo server's engine from its first packet of a
    // message in to its last echo out is the far side's share.
    Ok(ProfileRow {
        kind: "profile".into(),
        mode: name,
        size,
        round_trips: count,
        latency_ns: rtt_med / 2.0,
        host_send_cpu_ns: send_med,
        host_recv_cpu_ns: recv_med,
        host_cpu_per_rt_ns: (c1 - c0) as f64 / n,
        protocol_cpu_per_rt_ns: p1.saturating_sub(p0) as f64 / n,
        wakeups_per_rt: (v1 - v0) as f64 / n,
        preemptions_per_rt: (i1 - i0) as f64 / n,
        outliers,
        phases,
        trace_dropped: rec.dropped,
    })
}

/// One calibration point: every measured quantity at one message length,
/// engine-thread mode ("protocol processor" = the engine thread, "bus" =
/// the rings), and the protocol processor alone (the driver, no rings).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CalibRow {
    /// "calibration".
    pub kind: String,
    /// Message length l, bytes.
    pub size: usize,
    /// l_c: bytes of a control block (`ToEngine`).
    pub l_c: usize,
    /// l_a: bytes of an acknowledgment block (`FromEngine`).
    pub l_a: usize,
    /// Protocol processor alone: one-way latency (half a ping-pong round
    /// trip, driver to driver, no rings), ns — δ_0 + ρ_δ·l.
    pub proc_delay_ns: f64,
    /// Protocol processor alone: period of a synchronous send (write,
    /// turn until the sink's acknowledgement), ns — T_0 + ρ_T·l.
    pub proc_period_ns: f64,
    /// Protocol processor alone: time per message streaming back to back
    /// (the extended model's S_0 + σ·l), ns.
    pub proc_stream_ns: f64,
    /// Host write entry: copying the message into a buffer the engine owns
    /// and posting its block, ns — δ_w + ρ_w·(l_c + l).
    pub write_ns: f64,
    /// Host read entry: from the first pop of the woken application to the
    /// message copied out, ns — δ_r + ρ_r·(l_a + l).
    pub read_ns: f64,
    /// Wake-up of the application: the engine's last push to the
    /// application's first pop after sleeping, ns — δ_i.
    pub wake_ns: f64,
    /// The application thread's CPU time in waiting for the echo (going
    /// to sleep on the doorbell, being woken, taking the blocks): the
    /// host's cost of a wake-up, the extended model's δ_i^cpu, ns.
    pub wake_cpu_ns: f64,
    /// Wake-up of the engine: the application's push to the engine's pop
    /// (not in the seed's model), ns.
    pub engine_wake_ns: f64,
    /// User-level one-way latency (half a round trip between two
    /// applications, each on its engine thread), ns — δ(l).
    pub delay_ns: f64,
    /// User-level synchronous send: write and wait for the engine to report
    /// it acknowledged, ns — T_t(l).
    pub sync_period_ns: f64,
    /// User-level asynchronous (pipelined) time per message, ns.
    pub async_period_ns: f64,
    /// Host CPU time of a synchronous send, ns — H_t(l).
    pub host_send_ns: f64,
    /// The application thread's sleeps (each ended by a wake-up) per
    /// synchronous send.
    #[serde(default)]
    pub sync_wakeups: f64,
    /// Host CPU time of a receive (wake-up, read, copy out), ns — H_r(l).
    pub host_recv_ns: f64,
    /// Round trips / messages per measurement.
    pub count: usize,
    /// Messages of the pipelined runs.
    pub stream: usize,
}

fn median(v: &[u64]) -> f64 {
    xk_stats::median(v.iter().map(|&x| x as f64))
}

/// Turns `d` until the whole echo of a message arrived on `ctx`.
fn await_echo(d: &mut UdpDriver, ctx: xtp_proto::ContextId, size: usize, what: &str) -> Result<(), String> {
    let deadline = mono_ns() + 5_000_000_000;
    let mut got = 0;
    loop {
        let now = d.now();
        while let Some(c) = d.endpoint().read(now, ctx) {
            got += c.data.len();
            if c.eom {
                return if got == size { Ok(()) } else { Err(format!("{what}: echo of {got} B")) };
            }
        }
        if mono_ns() > deadline {
            return Err(format!("{what}: no echo within 5 s"));
        }
        d.turn(Duration::from_millis(20)).map_err(|e| format!("{what}: {e}"))?;
        while d.endpoint().poll_event().is_some() {}
    }
}

/// The protocol processor alone: the driver on this thread, no rings — a
/// context to the echo server (ping-pong) and one to the sink (streaming).
struct Processor {
    d: UdpDriver,
    echo: xtp_proto::ContextId,
    sink: xtp_proto::ContextId,
    /// Bytes the sink has acknowledged so far (cumulative per context).
    acked: u64,
    /// Bytes written to the sink so far.
    written: u64,
}

impl Processor {
    fn new(echo: SocketAddr, sink: SocketAddr) -> Result<Processor, String> {
        let what = "E8 processor";
        let mut d = UdpDriver::bind("127.0.0.1:0", EndpointConfig::default(), 81)
            .map_err(|e| format!("{what}: {e}"))?;
        let now = d.now();
        let ep = d.endpoint();
        let e = ep.connect(now, echo, 7, ContextConfig::stream()).map_err(|x| format!("{what}: {x}"))?;
        let s = ep.connect(now, sink, 7, ContextConfig::stream()).map_err(|x| format!("{what}: {x}"))?;
        Ok(Processor { d, echo: e, sink: s, acked: 0, written: 0 })
    }

    /// One round trip of `msg` through the echo server, ns.
    fn round_trip(&mut self, msg: &Bytes) -> Result<u64, String> {
        let what = format!("E8 processor {} B", msg.len());
        let t0 = mono_ns();
        let now = self.d.now();
        self.d
            .endpoint()
            .write(now, self.echo, msg.clone(), true, None)
            .map_err(|x| format!("{what}: {x:?}"))?;
        self.d.flush().map_err(|e| format!("{what}: {e}"))?;
        await_echo(&mut self.d, self.echo, msg.len(), &what)?;
        Ok(mono_ns() - t0)
    }

    /// Turns the driver until the sink acknowledged `target` bytes.
    fn await_acked(&mut self, target: u64, t0: u64, what: &str) -> Result<(), String> {
        while self.acked < target {
            self.d.turn(Duration::from_millis(5)).map_err(|e| format!("{what}: {e}"))?;
            self.take_acks();
            if mono_ns() > t0 + 20_000_000_000 {
                return Err(format!("{what}: not acknowledged within 20 s"));
            }
        }
        Ok(())
    }

    fn take_acks(&mut self) {
        while let Some(ev) = self.d.endpoint().poll_event() {
            if let XtpEvent::Acked { ctx, bytes } = ev
                && ctx == self.sink
            {
                self.acked = self.acked.max(bytes);
            }
        }
    }

    /// One synchronous send of `msg` to the sink (write, wait for the
    /// acknowledgement): the processor's period, ns.
    fn sync_send(&mut self, msg: &Bytes) -> Result<u64, String> {
        let what = format!("E8 processor synchronous {} B", msg.len());
        let t0 = mono_ns();
        let now = self.d.now();
        self.d
            .endpoint()
            .write(now, self.sink, msg.clone(), true, None)
            .map_err(|x| format!("{what}: {x:?}"))?;
        self.d.flush().map_err(|e| format!("{what}: {e}"))?;
        self.written += msg.len() as u64;
        self.await_acked(self.written, t0, &what)?;
        Ok(mono_ns() - t0)
    }

    /// Streams `n` copies of `msg` to the sink back to back and waits for
    /// the acknowledgement of all: time per message, ns.
    fn stream(&mut self, msg: &Bytes, n: usize) -> Result<f64, String> {
        let what = format!("E8 processor stream {} B", msg.len());
        let e = |e: std::io::Error| format!("{what}: {e}");
        let t0 = mono_ns();
        let target = self.written + (msg.len() * n) as u64;
        let mut left = n;
        while self.acked < target {
            let now = self.d.now();
            while left > 0 && self.d.endpoint().writable(self.sink, 1 << 20) {
                self.d
                    .endpoint()
                    .write(now, self.sink, msg.clone(), true, None)
                    .map_err(|x| format!("{what}: {x:?}"))?;
                left -= 1;
            }
            self.d.flush().map_err(e)?;
            self.d.turn(Duration::from_millis(5)).map_err(e)?;
            self.take_acks();
            if mono_ns() > t0 + 20_000_000_000 {
                return Err(format!("{what}: not acknowledged within 20 s"));
            }
        }
        self.written = target;
        Ok((mono_ns() - t0) as f64 / n as f64)
    }
}

/// The samples of one calibration length, pooled over rounds.
#[derive(Default)]
struct Samples {
    proc_rtt: Vec<u64>,
    proc_period: Vec<u64>,
    proc_stream: Vec<f64>,
    write: Vec<u64>,
    read: Vec<u64>,
    wake: Vec<u64>,
    wake_cpu: Vec<u64>,
    engine_wake: Vec<u64>,
    rtt: Vec<u64>,
    host_recv: Vec<u64>,
    sync_period: Vec<u64>,
    host_send: Vec<u64>,
    async_period: Vec<f64>,
    /// The application thread's sleeps over `sync_sends` synchronous sends.
    sync_sleeps: u64,
    sync_sends: u64,
}

/// The engine thread's clients: one with the default settings (the
/// ping-pong, as the API uses it) and one that hears of every
/// acknowledgement (synchronous and pipelined sends).
struct Engines {
    pp: xk_driver::engine::EngineClient,
    pp_ctx: xk_driver::engine::CtxHandle,
    tx: xk_driver::engine::EngineClient,
    tx_ctx: xk_driver::engine::CtxHandle,
}

const WAIT: Duration = Duration::from_millis(50);
const FIVE_S: u64 = 5_000_000_000;

impl Engines {
    fn new(echo: SocketAddr, sink: SocketAddr) -> Result<Engines, String> {
        let e = |e: std::io::Error| format!("E8 engine thread: {e}");
        let d = UdpDriver::bind("127.0.0.1:0", EndpointConfig::default(), 82).map_err(e)?;
        let mut pp = engine::spawn(d, EngineConfig::default()).map_err(e)?;
        let pp_ctx = pp.connect(echo, 7, ContextConfig::stream()).map_err(e)?;
        // A write bound of 2 bytes: the engine reports every
        // acknowledgement (it reports once half the bound is outstanding),
        // the seed's one acknowledgment block per message — the local
        // completion a synchronous send waits for. In-process writes are
        // never held at the bound, so the pipelined run is not throttled.
        let d = UdpDriver::bind("127.0.0.1:0", EndpointConfig::default(), 83).map_err(e)?;
        let mut tx =
            engine::spawn(d, EngineConfig { write_bound: 2, ..EngineConfig::default() }).map_err(e)?;
        let tx_ctx = tx.connect(sink, 7, ContextConfig::stream()).map_err(e)?;
        Ok(Engines { pp, pp_ctx, tx, tx_ctx })
    }

    /// `n` ping-pongs of `msg`, traced; into `s` when `keep`.
    fn ping_pong(&mut self, msg: &[u8], n: usize, s: &mut Samples, keep: bool) -> Result<(), String> {
        let size = msg.len();
        let what = format!("E8 engine thread {size} B");
        let e = |e: std::io::Error| format!("{what}: {e}");
        let (c, ctx) = (&mut self.pp, self.pp_ctx);
        let mut out = Vec::with_capacity(size);
        let mut marks = Vec::with_capacity(n);
        if keep {
            xk_trace::start(xk_trace::Config::default());
            xk_trace::name_thread("e8-app");
        }
        for _ in 0..n {
            let t0 = mono_ns();
            c.write(ctx, Bytes::copy_from_slice(msg), true, None).map_err(e)?;
            let (t1, c1) = (mono_ns(), thread_cpu_ns());
            out.clear();
            let mut wait_cpu = 0;
            'echo: loop {
                let w0 = thread_cpu_ns();
                c.wait_for(WAIT, true).map_err(e)?;
                wait_cpu += thread_cpu_ns() - w0;
                while let Some(ch) = c.read_chunk(ctx) {
                    out.extend_from_slice(&ch.data);
                    if ch.eom {
                        break 'echo;
                    }
                }
                if mono_ns() > t0 + FIVE_S {
                    return Err(format!("{what}: no echo within 5 s"));
                }
            }
            let (t2, c2) = (mono_ns(), thread_cpu_ns());
            if out.len() != size {
                return Err(format!("{what}: echo of {} B", out.len()));
            }
            marks.push((t0, t1, t2));
            if keep {
                s.write.push(t1 - t0);
                s.rtt.push(t2 - t0);
                s.host_recv.push(c2 - c1);
                s.wake_cpu.push(wait_cpu);
            }
        }
        if !keep {
            return Ok(());
        }
        let rec = xk_trace::finish();
        let Some(app) = thread_named(&rec, "e8-app") else { return Ok(()) };
        let Some(eng) = engine_of(&rec, app) else { return Ok(()) };
        // Per round trip: the application's first pop after its write
        // (woken) and the engine's last push before it; the engine's first
        // pop after the application's push.
        let app_pops = instants(&rec, app, Point::RingPop, 1);
        let eng_pushes = instants(&rec, eng, Point::RingPush, 1);
        let app_pushes = instants(&rec, app, Point::RingPush, 0);
        let eng_pops = instants(&rec, eng, Point::RingPop, 0);
        for &(t0, t1, t2) in &marks {
            if let Some(&pop) = app_pops.iter().find(|&&p| p > t1 && p <= t2) {
                s.read.push(t2 - pop);
                if let Some(&push) = eng_pushes.iter().rev().find(|&&p| p <= pop && p > t1) {
                    s.wake.push(pop - push);
                }
            }
            if let Some(&push) = app_pushes.iter().find(|&&p| p >= t0 && p <= t1)
                && let Some(&pop) = eng_pops.iter().find(|&&p| p >= push && p <= t2)
            {
                s.engine_wake.push(pop - push);
            }
        }
        Ok(())
    }

    /// Waits until the sink acknowledged everything written.
    fn drain(&mut self, t0: u64, what: &str) -> Result<(), String> {
        while self.tx.unacked_bytes(self.tx_ctx) > 0 {
            self.tx.wait(WAIT).map_err(|e| format!("{what}: {e}"))?;
            if mono_ns() > t0 + 4 * FIVE_S {
                return Err(format!("{what}: not acknowledged within 20 s"));
            }
        }
        Ok(())
    }

    /// `n` synchronous sends (write, wait for the acknowledgement).
    fn sync_sends(&mut self, msg: &[u8], n: usize, s: &mut Samples, keep: bool) -> Result<(), String> {
        let what = format!("E8 engine thread synchronous {} B", msg.len());
        let (v0, _) = thread_switches();
        for _ in 0..n {
            let (t0, c0) = (mono_ns(), thread_cpu_ns());
            self.tx
                .write(self.tx_ctx, Bytes::copy_from_slice(msg), true, None)
                .map_err(|e| format!("{what}: {e}"))?;
            self.drain(t0, &what)?;
            if keep {
                s.sync_period.push(mono_ns() - t0);
                s.host_send.push(thread_cpu_ns() - c0);
            }
        }
        if keep {
            s.sync_sleeps += thread_switches().0 - v0;
            s.sync_sends += n as u64;
        }
        Ok(())
    }

    /// `n` pipelined sends, then the wait for all their
    /// acknowledgements: time per message, ns.
    fn async_sends(&mut self, msg: &[u8], n: usize) -> Result<f64, String> {
        let what = format!("E8 engine thread pipelined {} B", msg.len());
        let t0 = mono_ns();
        for _ in 0..n {
            self.tx
                .write(self.tx_ctx, Bytes::copy_from_slice(msg), true, None)
                .map_err(|e| format!("{what}: {e}"))?;
            self.tx.collect();
        }
        self.drain(t0, &what)?;
        Ok((mono_ns() - t0) as f64 / n as f64)
    }

    fn end(mut self) {
        let _ = self.pp.abort(self.pp_ctx);
        let _ = self.tx.abort(self.tx_ctx);
        let _ = self.pp.wait(Duration::from_millis(1));
        let _ = self.tx.wait(Duration::from_millis(1));
    }
}

/// The calibration sweep against the echo servers (`echo` integrated, the
/// processor's peer; `app_echo` an application on its engine thread, the
/// user level's) and the sink: every length
/// of `sizes` measured in each of `rounds` rounds (lengths interleaved, in
/// alternating order, so that a change of the machine's load falls on all
/// of them alike rather than on a few), `count` round trips and
/// synchronous sends and `stream` pipelined messages per length in all.
pub(crate) fn calibrate(
    echo: SocketAddr,
    app_echo: SocketAddr,
    sink: SocketAddr,
    sizes: &[usize],
    count: usize,
    stream: usize,
    rounds: usize,
) -> Result<Vec<CalibRow>, String> {
    let mut proc = Processor::new(echo, sink)?;
    let mut eng = Engines::new(app_echo, sink)?;
    let msgs: Vec<Vec<u8>> = sizes.iter().map(|&l| vec![0x42u8; l]).collect();
    let mut samples: Vec<Samples> = sizes.iter().map(|_| Samples::default()).collect();
    let rounds = rounds.max(1);
    let (per, per_stream) = (count.div_ceil(rounds), stream.div_ceil(rounds).max(2));
    for round in 0..=rounds {
        // Round 0 warms every path up and is not kept.
        let keep = round > 0;
        let (n, ns) = if keep { (per, per_stream) } else { (5, 5) };
        let order: Vec<usize> =
            if round % 2 == 0 { (0..sizes.len()).collect() } else { (0..sizes.len()).rev().collect() };
        for i in order {
            let (m, s) = (&msgs[i], &mut samples[i]);
            let b = Bytes::copy_from_slice(m);
            for _ in 0..n {
                let r = proc.round_trip(&b)?;
                let p = proc.sync_send(&b)?;
                if keep {
                    s.proc_rtt.push(r);
                    s.proc_period.push(p);
                }
            }
            let p = proc.stream(&b, ns)?;
            eng.ping_pong(m, n, s, keep)?;
            eng.sync_sends(m, n, s, keep)?;
            let a = eng.async_sends(m, ns)?;
            if keep {
                s.proc_stream.push(p);
                s.async_period.push(a);
            }
        }
    }
    eng.end();
    let medf = |v: &[f64]| xk_stats::median(v.iter().copied());
    Ok(sizes
        .iter()
        .zip(&samples)
        .map(|(&size, s)| CalibRow {
            kind: "calibration".into(),
            size,
            l_c: std::mem::size_of::<ToEngine>(),
            l_a: std::mem::size_of::<FromEngine>(),
            proc_delay_ns: median(&s.proc_rtt) / 2.0,
            proc_period_ns: median(&s.proc_period),
            proc_stream_ns: medf(&s.proc_stream),
            write_ns: median(&s.write),
            read_ns: median(&s.read),
            wake_ns: median(&s.wake),
            wake_cpu_ns: median(&s.wake_cpu),
            engine_wake_ns: median(&s.engine_wake),
            delay_ns: median(&s.rtt) / 2.0,
            sync_period_ns: median(&s.sync_period),
            async_period_ns: medf(&s.async_period),
            host_send_ns: median(&s.host_send),
            sync_wakeups: s.sync_sleeps as f64 / s.sync_sends.max(1) as f64,
            host_recv_ns: median(&s.host_recv),
            count: s.rtt.len(),
            stream: s.async_period.len() * per_stream,
        })
        .collect())
}

/// An echo application on its own engine thread: the far host of the
/// user-level latency (seed 004 measured between two applications, each
/// with its protocol processor). It reads each whole message (copying it
/// out, as `recv_message` does) and writes it back (copying it in), until
/// dropped.
pub(crate) struct EngineEcho {
    pub(crate) addr: SocketAddr,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl EngineEcho {
    pub(crate) fn start() -> Result<EngineEcho, String> {
        use std::sync::atomic::{AtomicBool, Ordering};
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let halt = stop.clone();
        let (tx, rx) = std::sync::mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("e8-echo-app".into())
            .spawn(move || {
                let e = |e: std::io::Error| format!("E8 echo application: {e}");
                let made = (|| {
                    let d = UdpDriver::bind("127.0.0.1:0", EndpointConfig::default(), 85).map_err(e)?;
                    let addr = d.local_addr().map_err(e)?;
                    let mut c = engine::spawn(d, EngineConfig::default()).map_err(e)?;
                    c.listen(7, ContextConfig::stream()).map_err(e)?;
                    Ok::<_, String>((c, addr))
                })();
                let mut c = match made {
                    Ok((c, addr)) => {
                        let _ = tx.send(Ok(addr));
                        c
                    }
                    Err(err) => {
                        let _ = tx.send(Err(err));
                        return;
                    }
                };
                let mut open: Vec<(xk_driver::engine::CtxHandle, Vec<u8>)> = Vec::new();
                while !halt.load(Ordering::Relaxed) {
                    if c.wait_for(Duration::from_millis(20), true).is_err() {
                        return;
                    }
                    while let Some(n) = c.next_notice() {
                        match n {
                            xk_driver::engine::Notice::Incoming { ctx, .. } => open.push((ctx, Vec::new())),
                            xk_driver::engine::Notice::Closed { ctx, .. } => open.retain(|o| o.0 != ctx),
                            _ => {}
                        }
                    }
                    for (ctx, buf) in &mut open {
                        while let Some(ch) = c.read_chunk(*ctx) {
                            buf.extend_from_slice(&ch.data);
                            if ch.eom {
                                let _ = c.write(*ctx, Bytes::copy_from_slice(buf), true, None);
                                buf.clear();
                            }
                        }
                    }
                }
            })
            .map_err(|e| format!("E8: start the echo application: {e}"))?;
        let addr =
            rx.recv().map_err(|_| "E8: the echo application ended before it started".to_string())??;
        Ok(EngineEcho { addr, stop, thread: Some(thread) })
    }
}

impl Drop for EngineEcho {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use xk_trace::Event;

    #[test]
    fn crossings_pair_each_arrival_with_the_latest_departure() {
        assert_eq!(crossings(&[10, 20, 50], &[15, 25, 60, 5]), vec![5, 5, 10]);
        assert!(crossings(&[], &[1]).is_empty());
    }

    #[test]
    fn cpu_clocks_advance() {
        let a = thread_cpu_ns();
        let mut x = 0u64;
        for i in 0..2_000_000u64 {
            x = x.wrapping_add(i * i);
        }
        std::hint::black_box(x);
        assert!(thread_cpu_ns() > a);
        assert!(process_cpu_ns("self", None) > 0);
    }

    #[test]
    fn wake_crossings_take_the_first_pop_of_a_batch() {
        let mk = |tid: u32, evs: Vec<Event>| ThreadEvents { tid, name: "t".into(), events: evs };
        let rec = Recording {
            threads: vec![
                mk(
                    1,
                    vec![
                        Event::instant(100, Point::RingPush, 0, 0, 0),
                        Event::instant(10_000, Point::RingPush, 0, 0, 0),
                    ],
                ),
                mk(
                    2,
                    vec![
                        Event::instant(130, Point::RingPop, 0, 0, 0),
                        Event::instant(140, Point::RingPop, 0, 0, 0),
                        Event::instant(10_070, Point::RingPop, 0, 0, 0),
                    ],
                ),
            ],
            dropped: 0,
        };
        assert_eq!(wake_crossings(&rec, 1, 2, 0, 2_000), vec![30, 70]);
    }

    #[test]
    fn the_engine_of_an_application_is_the_one_whose_pushes_it_pops() {
        let j = xk_trace::journey(7, 3);
        let mk = |tid: u32, name: &str, evs: Vec<Event>| ThreadEvents { tid, name: name.into(), events: evs };
        let rec = Recording {
            threads: vec![
                mk(1, "e8-app", vec![Event::instant(20, Point::RingPop, j, 3, 1)]),
                mk(2, "xtp-engine", vec![Event::instant(5, Point::RingPush, xk_trace::journey(9, 3), 3, 1)]),
                mk(3, "xtp-engine", vec![Event::instant(10, Point::RingPush, j, 3, 1)]),
            ],
            dropped: 0,
        };
        assert_eq!(thread_named(&rec, "e8-app"), Some(1));
        assert_eq!(engine_of(&rec, 1), Some(3));
        assert_eq!(engine_of(&rec, 2), None);
    }

    /// The real thing, small: every quantity measured, positive, and the
    /// ring modes' profiles hold the ring crossings from the trace.
    #[test]
    fn calibration_and_profiles_measure_on_loopback() {
        use crate::e1_modes::EchoThread;
        let (echo, sink, app) =
            (EchoThread::start().unwrap(), EchoThread::sink().unwrap(), EngineEcho::start().unwrap());
        let rows = calibrate(echo.addr, app.addr, sink.addr, &[1, 8_192], 20, 20, 2).unwrap();
        assert_eq!(rows.len(), 2);
        for r in &rows {
            for (name, v) in [
                ("proc_delay", r.proc_delay_ns),
                ("proc_period", r.proc_period_ns),
                ("proc_stream", r.proc_stream_ns),
                ("write", r.write_ns),
                ("read", r.read_ns),
                ("wake", r.wake_ns),
                ("engine_wake", r.engine_wake_ns),
                ("delay", r.delay_ns),
                ("sync", r.sync_period_ns),
                ("async", r.async_period_ns),
                ("host_send", r.host_send_ns),
                ("host_recv", r.host_recv_ns),
            ] {
                assert!(v > 0.0 && v < 1e9, "{} B {name}: {v}", r.size);
            }
            assert_eq!(r.count, 20);
            // Application to application costs more than processor to processor.
            assert!(r.delay_ns > r.proc_delay_ns, "{r:?}");
        }
        let p = profile(ModeName::EngineThread, Mode::engine_thread(), echo.addr, 1, 30, None).unwrap();
        assert_eq!(p.trace_dropped, 0);
        assert!(p.protocol_cpu_per_rt_ns > 0.0, "{p:?}");
        assert!(p.phases.iter().any(|ph| ph.phase.starts_with("FN crossing") && ph.per_rt > 0.5), "{p:?}");
        let q = profile(ModeName::Integrated, Mode::integrated(), echo.addr, 1, 30, None).unwrap();
        assert!(q.phases.iter().any(|ph| ph.phase.starts_with("send system call (application)")), "{q:?}");
    }
}
