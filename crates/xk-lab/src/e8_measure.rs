//! E8's per-mode measurements: the per-phase profile of a message exchange
//! in each deployment mode (from the monitor's trace), the host's CPU time
//! and wake-ups per message; and the clock, `/proc` and trace helpers the
//! calibration sweep ([`crate::e8_calib`]) shares.
//!
//! Each round trip is bracketed by the application thread's preemption,
//! page-fault and CPU counters ([`crate::e8_disturb`]); one the operating
//! system disturbed is counted per cause and kept out of every per-phase
//! statistic (the trace's spans and crossings inside it too).
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

use serde::{Deserialize, Serialize};
use xk_driver::api::{Mode, Xtp};
use xk_driver::trace::mono_ns;
use xk_trace::{Phase, Point, Recording, ThreadEvents};

use crate::e8_disturb::{Cause, Disturbed, Mark, tally};

/// The calling thread's CPU time, ns.
pub(crate) fn thread_cpu_ns() -> u64 {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_THREAD_CPUTIME_ID)
        .map_or(0, |t| t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64)
}

/// The calling thread's (voluntary, involuntary) context switches.
pub(crate) fn thread_switches() -> (u64, u64) {
    use nix::sys::resource::{UsageWho, getrusage};
    getrusage(UsageWho::RUSAGE_THREAD)
        .map_or((0, 0), |u| (u.voluntary_context_switches() as u64, u.involuntary_context_switches() as u64))
}

/// Nanoseconds on the CPU of one task (`/proc/<pid>/task/<tid>/schedstat`).
pub(crate) fn schedstat(path: &std::path::Path) -> Option<u64> {
    schedstat3(path).map(|s| s[0])
}

/// All three of a task's scheduler figures (`schedstat`): ns on a CPU, ns
/// waiting on a run queue (runnable, no core free), times scheduled in.
pub(crate) fn schedstat3(path: &std::path::Path) -> Option<[u64; 3]> {
    let s = std::fs::read_to_string(path).ok()?;
    let mut it = s.split_whitespace().map(|v| v.parse::<u64>().ok());
    Some([it.next()??, it.next()??, it.next()??])
}

/// The whole machine's CPU time from `/proc/stat`'s first line, in clock
/// ticks ([`ticks_per_s`] a second, 100 here: 10 ms resolution, and each
/// read is up to a tick off per CPU, so it is read over windows of tens
/// of ms and pooled): (busy, idle + iowait, steal). `None` when the line
/// is missing, shorter than the eight fields used, or a field is not a
/// number — parsed strictly, so a bad field cannot shift the others.
pub(crate) fn machine_ticks() -> Option<[u64; 3]> {
    let s = std::fs::read_to_string("/proc/stat").ok()?;
    parse_cpu_line(s.lines().next()?)
}

fn parse_cpu_line(line: &str) -> Option<[u64; 3]> {
    let line = line.strip_prefix("cpu ")?;
    let v: Vec<u64> = line.split_whitespace().map(|x| x.parse().ok()).collect::<Option<_>>()?;
    if v.len() < 8 {
        return None;
    }
    // user nice system idle iowait irq softirq steal (guest times are
    // already inside user and nice).
    let (idle, steal) = (v[3] + v[4], v[7]);
    let busy = v[..7].iter().sum::<u64>() - idle;
    Some([busy, idle, steal])
}

/// Clock ticks per second of `/proc/stat` (`USER_HZ`, from
/// `sysconf(_SC_CLK_TCK)`; 100 on x86 and arm64 whatever the kernel's
/// internal tick rate, which is also the fallback should sysconf fail).
pub(crate) fn ticks_per_s() -> f64 {
    match nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK) {
        Ok(Some(t)) if t > 0 => t as f64,
        _ => 100.0,
    }
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
pub(crate) fn engine_threads() -> BTreeSet<String> {
    threads_named("xtp-engine")
}

/// Thread ids of this process's threads named `name` (`/proc/self/task/*/comm`).
pub(crate) fn threads_named(name: &str) -> BTreeSet<String> {
    let Ok(entries) = std::fs::read_dir("/proc/self/task") else { return BTreeSet::new() };
    entries
        .filter_map(Result::ok)
        .filter(|e| std::fs::read_to_string(e.path().join("comm")).is_ok_and(|c| c.trim() == name))
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
    /// Undisturbed round trips whose time exceeded 5× the median: outliers
    /// the operating system's counters do not explain.
    pub outliers: usize,
    /// Round trips the operating system disturbed, per cause (kept out of
    /// every statistic but the means per round trip).
    #[serde(default)]
    pub disturbed: Disturbed,
    /// Per-phase profile.
    pub phases: Vec<PhaseStat>,
    /// Session 20: the operating system's disturbances per thread the
    /// round trips involve besides the application's (the engine thread,
    /// the daemon's threads, the echo server's), read per round trip from
    /// `/proc`; a round trip disturbed on any of them is kept out of the
    /// statistics as one disturbed on the application thread is (its
    /// causes in `disturbed` are the application thread's alone).
    #[serde(default)]
    pub threads: Vec<ThreadDisturbed>,
    /// Session 20: where single round trips' time went — the undisturbed
    /// round trips at the median, the 99th percentile and the longest,
    /// each cut into the phases its trace holds.
    #[serde(default)]
    pub journeys: Vec<Journey>,
    /// Every round trip was disturbed on some thread: the statistics (and
    /// `rtt_percentiles`, the journeys) are then over all of them, none set
    /// apart.
    #[serde(default)]
    pub all_disturbed: bool,
    /// The round trips the statistics are over (Session 20: undisturbed on
    /// every watched thread, or all of them when `all_disturbed`); 0 in
    /// results written before.
    #[serde(default)]
    pub kept: usize,
    /// Session 20: the undisturbed round trips' times at the 0th, 1st, …,
    /// 100th percentile (nearest rank), ns; and the disturbed ones' (any
    /// thread), for the profile's figure.
    #[serde(default)]
    pub rtt_percentiles: Vec<u64>,
    /// See `rtt_percentiles`.
    #[serde(default)]
    pub disturbed_rtt_percentiles: Vec<u64>,
    /// Trace events lost to the recorder's budget (0 expected).
    pub trace_dropped: u64,
}

/// One thread's disturbances over a profile's round trips.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ThreadDisturbed {
    /// Which thread ("engine thread", "daemon", "echo server", with its id).
    pub thread: String,
    /// Its tally (round trips measured and disturbed, per cause).
    pub disturbed: Disturbed,
}

/// One round trip cut into phases (durations inside its window, ns; a
/// phase that occurs several times in it summed).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Journey {
    /// "median", "p99" or "longest" (of the undisturbed round trips).
    pub which: String,
    /// Its round-trip time, ns.
    pub rtt_ns: u64,
    /// (phase, ns).
    pub parts: Vec<(String, u64)>,
}

/// The 0th…100th percentiles (nearest rank) of `v` (empty for none).
fn percentiles(mut v: Vec<u64>) -> Vec<u64> {
    if v.is_empty() {
        return Vec::new();
    }
    v.sort_unstable();
    (0..=100).map(|p| v[((p * (v.len() - 1)) as f64 / 100.0).round() as usize]).collect()
}

/// The threads a profile's round trips involve besides the application's:
/// (label, `/proc` task directory).
fn watched_threads(engine: &BTreeSet<String>, daemon_pid: Option<u32>) -> Vec<(String, std::path::PathBuf)> {
    let task = |pid: &str, tid: &str| std::path::Path::new("/proc").join(pid).join("task").join(tid);
    let mut v: Vec<(String, std::path::PathBuf)> =
        engine.iter().map(|t| (format!("engine thread {t}"), task("self", t))).collect();
    if let Some(pid) = daemon_pid {
        let dir = std::path::Path::new("/proc").join(pid.to_string()).join("task");
        if let Ok(entries) = std::fs::read_dir(&dir) {
            for e in entries.filter_map(Result::ok) {
                let t = e.file_name().to_string_lossy().into_owned();
                v.push((format!("daemon thread {t}"), e.path()));
            }
        }
    }
    for t in threads_named("lab-echo") {
        v.push((format!("echo server {t}"), task("self", &t)));
    }
    v
}

/// Spans of `point` on one thread (a `Begin` and the next `End`, as
/// `xk_trace::profile::durations` pairs them): (start, duration), ns.
fn spans(t: &ThreadEvents, point: Point) -> Vec<(u64, u64)> {
    let mut open = Vec::new();
    let mut out = Vec::new();
    for e in t.events.iter().filter(|e| e.point == point) {
        match e.phase {
            Phase::Begin => open.push(e.t),
            Phase::End => {
                if let Some(b) = open.pop() {
                    out.push((b, e.t.saturating_sub(b)));
                }
            }
            Phase::Instant => {}
        }
    }
    out
}

/// The durations of the samples `(t, d)` whose time `t` falls inside an
/// undisturbed round trip of `windows` ((start, end, disturbed), sorted).
fn clean(windows: &[(u64, u64, bool)], samples: Vec<(u64, u64)>) -> Vec<u64> {
    samples
        .into_iter()
        .filter(|&(t, _)| {
            let i = windows.partition_point(|w| w.0 <= t);
            i > 0 && t <= windows[i - 1].1 && !windows[i - 1].2
        })
        .map(|s| s.1)
        .collect()
}

/// For each `to` event, the time since the latest `from` event before it
/// (both lists sorted by time): a crossing between threads, as (arrival,
/// duration).
fn crossings(from: &[u64], to: &[u64]) -> Vec<(u64, u64)> {
    let mut out = Vec::with_capacity(to.len());
    let mut i = 0;
    for &t in to {
        while i + 1 < from.len() && from[i + 1] <= t {
            i += 1;
        }
        if let Some(&f) = from.get(i).filter(|&&f| f <= t) {
            out.push((t, t - f));
        }
    }
    out
}

/// The (start, end) of every `point` span on the thread `tid`, sorted.
pub(crate) fn calls(rec: &Recording, tid: u32, point: Point) -> Vec<(u64, u64)> {
    let mut v: Vec<(u64, u64)> = rec
        .threads
        .iter()
        .filter(|t| t.tid == tid)
        .flat_map(|t| spans(t, point))
        .map(|(b, d)| (b, b + d))
        .collect();
    v.sort_unstable();
    v
}

/// A processor one way's socket crossing (Session 21): from the sending
/// engine's first send call (`sends`, its `SendCall` spans) starting in
/// [`from`, `upto`] to the end of the receiving engine's first receive
/// call (`recvs`) ending after that send call and by `upto` — the send
/// system call (on loopback it runs the delivery and the receiver's
/// wake-up), the receiving engine's wake-up and its receive call; None
/// when either is not traced.
pub(crate) fn crossing(sends: &[(u64, u64)], recvs: &[(u64, u64)], from: u64, upto: u64) -> Option<u64> {
    let i = sends.partition_point(|s| s.0 < from);
    let &(sb, s_end) = sends.get(i).filter(|s| s.0 <= upto)?;
    let j = recvs.partition_point(|r| r.1 < s_end);
    let &(_, r_end) = recvs.get(j).filter(|r| r.1 <= upto)?;
    Some(r_end - sb)
}

/// Times of `point` instants with argument `b` on the thread numbered
/// `tid` in the recording.
pub(crate) fn instants(rec: &Recording, tid: u32, point: Point, b: u32) -> Vec<u64> {
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
pub(crate) fn thread_named(rec: &Recording, name: &str) -> Option<u32> {
    rec.threads.iter().find(|t| t.name == name).map(|t| t.tid)
}

/// The engine thread serving the application thread `app`: the one whose
/// ring pushes the application popped (same journey: ring and record
/// number), so that other engine threads in the process (a peer's, one
/// still closing) are not mistaken for it.
pub(crate) fn engine_of(rec: &Recording, app: u32) -> Option<u32> {
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
fn wake_crossings(rec: &Recording, from: u32, to: u32, ring: u32, gap: u64) -> Vec<(u64, u64)> {
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
    let watched = watched_threads(&engine, daemon_pid);
    let marks = || -> Vec<Option<Mark>> { watched.iter().map(|w| Mark::of_task(&w.1)).collect() };
    let mut others: Vec<Vec<Cause>> = vec![Vec::with_capacity(count); watched.len()];
    xk_trace::start(xk_trace::Config::default());
    xk_trace::name_thread("e8-app");
    let (p0, c0, (v0, i0)) = (proto_cpu(), thread_cpu_ns(), thread_switches());
    let mut cpu_send = Vec::with_capacity(count);
    let mut cpu_recv = Vec::with_capacity(count);
    let mut wait_recv = Vec::with_capacity(count);
    let mut rtt = Vec::with_capacity(count);
    let mut spans_of_rt = Vec::with_capacity(count);
    let mut causes = Vec::with_capacity(count);
    for _ in 0..count {
        let o0 = marks();
        let m0 = Mark::now();
        let (t0, a) = (mono_ns(), thread_cpu_ns());
        s.send_message(&msg, None).map_err(|e| format!("{what}: {e}"))?;
        let (t1, b) = (mono_ns(), thread_cpu_ns());
        let m = s.recv_message().map_err(|e| format!("{what}: {e}"))?;
        let (t2, c) = (mono_ns(), thread_cpu_ns());
        causes.push(Cause::between(&m0, &Mark::now()));
        for ((v, before), after) in others.iter_mut().zip(&o0).zip(marks()) {
            // A thread whose counters could not be read (gone) counts as
            // undisturbed: there is nothing to attribute.
            v.push(match (before, after) {
                (Some(x), Some(y)) => Cause::between(x, &y),
                _ => Cause::default(),
            });
        }
        if m.map(|m| m.data.len()) != Some(size) {
            return Err(format!("{what}: the echo was cut short"));
        }
        spans_of_rt.push((t0, t1, t2, a, b, c));
    }
    let (mut hit, disturbed) = tally(&causes);
    let mut threads = Vec::with_capacity(watched.len());
    for (w, c) in watched.iter().zip(&others) {
        let (h, d) = tally(c);
        for (a, b) in hit.iter_mut().zip(h) {
            *a |= b;
        }
        threads.push(ThreadDisturbed { thread: w.0.clone(), disturbed: d });
    }
    // Every round trip disturbed on some thread leaves nothing undisturbed:
    // the statistics are then over all of them, and the row says so
    // (`all_disturbed`) — they are not relabelled undisturbed.
    let all_disturbed = !hit.is_empty() && hit.iter().all(|&h| h);
    let out: Vec<bool> = if all_disturbed { vec![false; hit.len()] } else { hit };
    let mut windows = Vec::with_capacity(count);
    let mut disturbed_rtt = Vec::new();
    for (&(t0, t1, t2, a, b, c), &out) in spans_of_rt.iter().zip(&out) {
        windows.push((t0, t2, out));
        if out {
            disturbed_rtt.push(t2 - t0);
        } else {
            cpu_send.push(b - a);
            cpu_recv.push(c - b);
            wait_recv.push((t2 - t1).saturating_sub(c - b));
            rtt.push(t2 - t0);
        }
    }
    let (p1, c1, (v1, i1)) = (proto_cpu(), thread_cpu_ns(), thread_switches());
    let rec = xk_trace::finish();
    s.abort();
    let n = count as f64;
    let med = |v: &[u64]| xk_stats::median(v.iter().map(|&x| x as f64));
    let rtt_med = med(&rtt);
    let (send_med, recv_med) = (med(&cpu_send), med(&cpu_recv));
    let outliers = rtt.iter().filter(|&&r| r as f64 > 5.0 * rtt_med).count();
    let kept = rtt.len();
    let mut phases = Vec::new();
    // Every traced phase's samples (start, duration), for the journeys.
    let mut timed: Vec<(String, Vec<(u64, u64)>)> = Vec::new();
    let app = rec.threads.iter().find(|t| t.name == "e8-app");
    if let Some(app) = app {
        let w = &windows;
        for (name, point) in [
            ("send_message (application write)", Point::AppWrite),
            ("recv_message (application read)", Point::AppRead),
        ] {
            let v = spans(app, point);
            phases.extend(phase(name, kept, clean(w, v.clone())));
            timed.push((name.into(), v));
        }
    }
    phases.extend(phase("  of which host CPU in send_message", kept, cpu_send));
    phases.extend(phase("  of which host CPU in recv_message", kept, cpu_recv));
    phases.extend(phase("  of which waiting in recv_message", kept, wait_recv));
    // System calls on the client's side: the application thread
    // (integrated) or the engine thread.
    for (thread, label) in [("e8-app", "application"), ("xtp-engine", "engine thread")] {
        let mut send = Vec::new();
        let mut recv = Vec::new();
        for t in rec.threads.iter().filter(|t| t.name == thread) {
            send.extend(spans(t, Point::SendCall));
            recv.extend(spans(t, Point::RecvCall));
        }
        timed.push((format!("send system calls ({label})"), send.clone()));
        timed.push((format!("receive system calls ({label})"), recv.clone()));
        phases.extend(phase(&format!("send system call ({label})"), kept, clean(&windows, send)));
        phases.extend(phase(&format!("receive system call ({label})"), kept, clean(&windows, recv)));
    }
    if let Some(app) = thread_named(&rec, "e8-app")
        && let Some(eng) = engine_of(&rec, app)
    {
        for (name, from, to, ring) in [
            ("TN crossing: application push → engine pop (engine wake-up)", app, eng, 0),
            ("FN crossing: engine push → application pop (application wake-up)", eng, app, 1),
        ] {
            // A crossing's sample is (arrival, duration): its start is the
            // arrival less the duration.
            let v: Vec<(u64, u64)> =
                wake_crossings(&rec, from, to, ring, 2_000).into_iter().map(|(t, d)| (t - d, d)).collect();
            phases.extend(phase(name, kept, clean(&windows, v.iter().map(|&(s, d)| (s + d, d)).collect())));
            timed.push((name.into(), v));
        }
    }
    let journeys = journeys_of(&spans_of_rt, &out, &timed);
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
        disturbed,
        phases,
        trace_dropped: rec.dropped,
        threads,
        journeys,
        all_disturbed,
        kept,
        rtt_percentiles: percentiles(rtt),
        disturbed_rtt_percentiles: percentiles(disturbed_rtt),
    })
}

/// The journeys of a profile: its undisturbed round trips at the median,
/// the 99th percentile and the longest (nearest rank), each with the time
/// of every traced phase that started inside it ([`Journey`]; the
/// application's write and read cover the round trip, the other phases
/// lie inside them).
fn journeys_of(
    rts: &[(u64, u64, u64, u64, u64, u64)],
    hit: &[bool],
    timed: &[(String, Vec<(u64, u64)>)],
) -> Vec<Journey> {
    let mut kept: Vec<(u64, u64, u64)> =
        rts.iter().zip(hit).filter(|(_, h)| !**h).map(|(r, _)| (r.2 - r.0, r.0, r.2)).collect();
    if kept.is_empty() {
        return Vec::new();
    }
    kept.sort_unstable();
    let at = |q: f64| kept[((kept.len() - 1) as f64 * q).round() as usize];
    [("median", at(0.5)), ("p99", at(0.99)), ("longest", at(1.0))]
        .into_iter()
        .map(|(which, (rtt, t0, t2))| Journey {
            which: which.into(),
            rtt_ns: rtt,
            parts: timed
                .iter()
                .map(|(name, v)| {
                    (name.clone(), v.iter().filter(|s| s.0 >= t0 && s.0 <= t2).map(|s| s.1).sum())
                })
                .filter(|p| p.1 > 0)
                .collect(),
        })
        .collect()
}

/// The monitor records process-wide: tests that start and finish a
/// recording take this lock so that one's `finish` does not end another's.
#[cfg(test)]
pub(crate) static TRACE_TESTS: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[cfg(test)]
mod tests {
    use super::*;
    use xk_trace::Event;

    #[test]
    fn a_crossing_runs_from_the_send_call_to_the_first_receive_ending_after_it() {
        // Send calls (start, end) and receive calls: the first send call
        // at or after `from`, the first receive ending after it, by `upto`.
        let sends = [(10, 15), (100, 110), (300, 320)];
        let recvs = [(5, 12), (90, 112), (105, 130), (400, 420)];
        assert_eq!(crossing(&sends, &recvs, 50, 200), Some(112 - 100));
        // A receive ending before the send call ended is not its arrival.
        assert_eq!(crossing(&sends, &recvs, 0, 200), Some(112 - 10));
        // Nothing received by `upto`, no send call in the window: None.
        assert_eq!(crossing(&sends, &recvs, 250, 350), None);
        assert_eq!(crossing(&sends, &recvs, 330, 500), None);
    }

    #[test]
    fn cpu_line_is_parsed_strictly() {
        assert_eq!(parse_cpu_line("cpu  10 1 5 100 3 2 4 7 0 0"), Some([22, 103, 7]));
        // A short line or a field that is not a number is refused rather
        // than shifting the fields after it.
        assert_eq!(parse_cpu_line("cpu  10 1 5 100 3 2 4"), None);
        assert_eq!(parse_cpu_line("cpu  10 x 5 100 3 2 4 7"), None);
        assert_eq!(parse_cpu_line("cpu0 10 1 5 100 3 2 4 7"), None);
        assert!(ticks_per_s() >= 1.0);
    }

    #[test]
    fn crossings_pair_each_arrival_with_the_latest_departure() {
        assert_eq!(crossings(&[10, 20, 50], &[15, 25, 60, 5]), vec![(15, 5), (25, 5), (60, 10)]);
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
        assert_eq!(wake_crossings(&rec, 1, 2, 0, 2_000), vec![(130, 30), (10_070, 70)]);
    }

    #[test]
    fn disturbed_round_trips_drop_their_samples() {
        let w = [(100, 200, false), (300, 400, true), (500, 600, false)];
        let got = clean(&w, vec![(50, 1), (150, 2), (350, 3), (450, 4), (600, 5)]);
        assert_eq!(got, vec![2, 5]);
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

    /// The real thing, small: the ring modes' profiles hold the ring
    /// crossings from the trace, and every round trip is counted, kept or
    /// disturbed.
    #[test]
    fn profiles_measure_on_loopback() {
        use crate::e1_modes::EchoThread;
        let _one = TRACE_TESTS.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let echo = EchoThread::start().unwrap();
        let p = profile(ModeName::EngineThread, Mode::engine_thread(), echo.addr, 1, 30, None).unwrap();
        assert_eq!(p.trace_dropped, 0);
        assert_eq!(p.disturbed.measured, 30);
        assert!(p.protocol_cpu_per_rt_ns > 0.0, "{p:?}");
        assert!(p.phases.iter().any(|ph| ph.phase.starts_with("FN crossing") && ph.per_rt > 0.5), "{p:?}");
        // Session 20: the engine thread and the echo server watched per
        // round trip, every round trip counted on each; three journeys
        // whose write and read lie inside their round trip; percentiles.
        assert!(p.threads.iter().any(|t| t.thread.starts_with("engine thread")), "{:?}", p.threads);
        assert!(p.threads.iter().any(|t| t.thread.starts_with("echo server")), "{:?}", p.threads);
        assert!(p.threads.iter().all(|t| t.disturbed.measured == 30), "{:?}", p.threads);
        assert_eq!(
            p.journeys.iter().map(|j| j.which.as_str()).collect::<Vec<_>>(),
            ["median", "p99", "longest"]
        );
        for j in &p.journeys {
            let write = j.parts.iter().find(|x| x.0.starts_with("send_message")).map_or(0, |x| x.1);
            assert!(write > 0 && write < j.rtt_ns, "{j:?}");
        }
        assert!(p.journeys[0].rtt_ns <= p.journeys[2].rtt_ns);
        assert_eq!(p.rtt_percentiles.len(), 101);
        assert!(p.kept > 0 && p.kept <= p.round_trips, "{} of {}", p.kept, p.round_trips);
        assert!(!p.all_disturbed || p.kept == p.round_trips);
        assert!(p.rtt_percentiles.windows(2).all(|w| w[0] <= w[1]));
        let q = profile(ModeName::Integrated, Mode::integrated(), echo.addr, 1, 30, None).unwrap();
        assert!(q.phases.iter().any(|ph| ph.phase.starts_with("send system call (application)")), "{q:?}");
    }
}
