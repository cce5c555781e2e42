//! E8's calibration sweep: every quantity seed 004's model is calibrated
//! on and checked against, per message length, in engine-thread mode (the
//! "protocol processor" is the engine thread, the "bus" its rings and
//! buffers), between two applications each on its own engine thread.
//!
//! What is measured, and how (issue #18's review fixed the method):
//!
//! * **Ping-pong** with an echo application, traced: the host's write and
//!   read entries (δ_w, ρ_w, δ_r, ρ_r), the application's and the engine's
//!   wake-ups (δ_i, δ_e), the host CPU time of a receive (H_r) and of a
//!   wake-up (δ_i^cpu), the user-level latency δ(l) — and, from the two
//!   engine threads' trace, the **processor's one-way time δ_0 + ρ_δ·l**:
//!   from the sending engine taking the write block off its ring to the
//!   receiving engine posting the message's last data block to its
//!   application (seed 004: "the protocol processor transmits a message end
//!   to end", top-level interface to top-level interface).
//! * **Synchronous sends** to a sink application (it reads and copies out
//!   every message, as GET_MESSAGE does), traced: the user-level period
//!   T_t(l) (write, wait for the local completion), the host's CPU time
//!   (H_t) and, from the engine thread's trace, the processor's completion
//!   C(l): taking the write block to posting its acknowledgment block.
//! * **Pipelined sends** to the sink application, in steady state: the
//!   host keeps 4–64 messages outstanding; the first ≥ 10 ms are discarded
//!   (start-up), and the period is the time between the k-th and the n-th
//!   completion over (n − k), the window ≥ `stream_ms` / 3 long — so
//!   neither the pipeline's filling nor the final acknowledgement is in it.
//!   The **processor's period T_0 + ρ_T·l** (seed 004's meaning: its time
//!   per message when streaming, below δ_0) is the engine thread's CPU time
//!   (`/proc/…/schedstat`) over the same window per message: the period it
//!   would have with a processor of its own, as the seed's was.
//!
//! Each ping-pong round trip and synchronous send is bracketed by the
//! application thread's preemption, page-fault and CPU counters
//! ([`crate::e8_disturb`]): a disturbed one is counted per cause and kept
//! out of every statistic. CPU and wall times are read together at the
//! same boundaries ([`stamp`]).

use std::net::SocketAddr;

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use xk_driver::driver::UdpDriver;
use xk_driver::engine::{self, CtxHandle, EngineClient, EngineConfig, FromEngine, Notice, ToEngine};
use xk_driver::trace::mono_ns;
use xk_time::Duration;
use xk_trace::{Point, Recording};
use xtp_proto::{ContextConfig, EndpointConfig};

use crate::e8_disturb::{Cause, Disturbed, Mark};
use crate::e8_measure::{
    engine_of, engine_threads, instants, schedstat, thread_cpu_ns, thread_named, thread_switches,
};

/// One calibration point: every measured quantity at one message length.
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
    /// The processor's one-way time, from the engine thread's trace: the
    /// sending engine's pop of the write block to the receiving engine's
    /// push of the message's last data block, ns — δ_0 + ρ_δ·l.
    pub proc_delay_ns: f64,
    /// The processor's period: the engine thread's CPU time per message
    /// in the pipelined run's steady-state window, ns — T_0 + ρ_T·l.
    pub proc_period_ns: f64,
    /// The processor's completion of a synchronous send, from the engine
    /// thread's trace: pop of the write block to push of its
    /// acknowledgment block, ns — the extended model's C_0 + γ·l.
    pub proc_complete_ns: f64,
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
    /// User-level synchronous send to a receiving application: write and
    /// wait for the engine to report it acknowledged, ns — T_t(l).
    pub sync_period_ns: f64,
    /// User-level asynchronous (pipelined) time per message in steady
    /// state, ns.
    pub async_period_ns: f64,
    /// Host CPU time of a synchronous send, ns — H_t(l).
    pub host_send_ns: f64,
    /// The application thread's sleeps (each ended by a wake-up) per
    /// synchronous send.
    #[serde(default)]
    pub sync_wakeups: f64,
    /// Host CPU time of a receive (wake-up, read, copy out), ns — H_r(l).
    pub host_recv_ns: f64,
    /// Undisturbed round trips kept.
    pub count: usize,
    /// Messages in the pipelined runs' steady-state windows, in all.
    pub stream: usize,
    /// Length of those windows, in all, ms.
    #[serde(default)]
    pub stream_ms: f64,
    /// Round trips and synchronous sends measured and disturbed by the
    /// operating system, per cause (kept out of the medians).
    #[serde(default)]
    pub disturbed: Disturbed,
}

/// Wall and CPU time of the calling thread, read together (the same
/// boundary for both windows), ns.
pub(crate) fn stamp() -> (u64, u64) {
    (mono_ns(), thread_cpu_ns())
}

fn median(v: &[u64]) -> f64 {
    xk_stats::median(v.iter().map(|&x| x as f64))
}

/// The samples of one calibration length, pooled over rounds.
#[derive(Default)]
struct Samples {
    proc_oneway: Vec<u64>,
    proc_complete: Vec<u64>,
    proc_period: Vec<f64>,
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
    stream_msgs: usize,
    stream_ns: u64,
    /// The application thread's sleeps over `sync_sends` synchronous sends.
    sync_sleeps: u64,
    sync_sends: u64,
    disturbed: Disturbed,
}

/// The engine thread's clients: one with the default settings (the
/// ping-pong, as the API uses it) and one that hears of every
/// acknowledgement (synchronous and pipelined sends).
struct Engines {
    pp: EngineClient,
    pp_ctx: CtxHandle,
    tx: EngineClient,
    tx_ctx: CtxHandle,
    /// The sending engine thread's id (`/proc/self/task/<tid>`).
    tx_tid: Option<String>,
}

const WAIT: Duration = Duration::from_millis(50);
const FIVE_S: u64 = 5_000_000_000;
/// Start-up of a pipelined run discarded before its window opens, ns.
const WARM_NS: u64 = 10_000_000;

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
        let before = engine_threads();
        let d = UdpDriver::bind("127.0.0.1:0", EndpointConfig::default(), 83).map_err(e)?;
        let mut tx =
            engine::spawn(d, EngineConfig { write_bound: 2, ..EngineConfig::default() }).map_err(e)?;
        let tx_tid = engine_threads().difference(&before).next().cloned();
        let tx_ctx = tx.connect(sink, 7, ContextConfig::stream()).map_err(e)?;
        Ok(Engines { pp, pp_ctx, tx, tx_ctx, tx_tid })
    }

    /// The sending engine thread's CPU time, ns (0 when unknown).
    fn tx_cpu(&self) -> u64 {
        self.tx_tid
            .as_ref()
            .and_then(|t| schedstat(&std::path::Path::new("/proc/self/task").join(t).join("schedstat")))
            .unwrap_or(0)
    }

    /// `n` ping-pongs of `msg`, traced; into `s` when `keep`.
    fn ping_pong(&mut self, msg: &[u8], n: usize, s: &mut Samples, keep: bool) -> Result<(), String> {
        let size = msg.len();
        let what = format!("E8 engine thread {size} B");
        let e = |e: std::io::Error| format!("{what}: {e}");
        let (c, ctx) = (&mut self.pp, self.pp_ctx);
        let mut out = Vec::with_capacity(size);
        // (t0, t1, t2) of the undisturbed round trips.
        let mut marks = Vec::with_capacity(n);
        if keep {
            xk_trace::start(xk_trace::Config::default());
            xk_trace::name_thread("e8-app");
        }
        for _ in 0..n {
            let m0 = Mark::now();
            let (t0, _) = stamp();
            c.write(ctx, Bytes::copy_from_slice(msg), true, None).map_err(e)?;
            let (t1, c1) = stamp();
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
            let (t2, c2) = stamp();
            let cause = Cause::between(&m0, &Mark::now());
            if out.len() != size {
                return Err(format!("{what}: echo of {} B", out.len()));
            }
            if keep && !s.disturbed.count(cause) {
                marks.push((t0, t1, t2));
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
        let peer = thread_named(&rec, "e8-echo-app").and_then(|p| engine_of(&rec, p).map(|e| (p, e)));
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
        if let Some((_, peer_eng)) = peer {
            s.proc_oneway.extend(one_way(&rec, eng, peer_eng, &marks));
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

    /// `n` synchronous sends (write, wait for the acknowledgement), traced
    /// when `keep`.
    fn sync_sends(&mut self, msg: &[u8], n: usize, s: &mut Samples, keep: bool) -> Result<(), String> {
        let what = format!("E8 engine thread synchronous {} B", msg.len());
        if keep {
            xk_trace::start(xk_trace::Config::default());
            xk_trace::name_thread("e8-app");
        }
        let (v0, _) = thread_switches();
        let mut marks = Vec::with_capacity(n);
        for _ in 0..n {
            let m0 = Mark::now();
            let (t0, c0) = stamp();
            self.tx
                .write(self.tx_ctx, Bytes::copy_from_slice(msg), true, None)
                .map_err(|e| format!("{what}: {e}"))?;
            self.drain(t0, &what)?;
            let (t1, c1) = stamp();
            if keep && !s.disturbed.count(Cause::between(&m0, &Mark::now())) {
                marks.push((t0, t1));
                s.sync_period.push(t1 - t0);
                s.host_send.push(c1 - c0);
            }
        }
        if !keep {
            return Ok(());
        }
        s.sync_sleeps += thread_switches().0 - v0;
        s.sync_sends += n as u64;
        let rec = xk_trace::finish();
        if let Some(app) = thread_named(&rec, "e8-app")
            && let Some(eng) = engine_of(&rec, app)
        {
            let pops = instants(&rec, eng, Point::RingPop, 0);
            let pushes = instants(&rec, eng, Point::RingPush, 1);
            for &(t0, t1) in &marks {
                if let Some(&pop) = pops.iter().find(|&&p| p >= t0 && p <= t1)
                    && let Some(&push) = pushes.iter().rev().find(|&&p| p >= pop && p <= t1)
                {
                    s.proc_complete.push(push - pop);
                }
            }
        }
        Ok(())
    }

    /// A pipelined run of `msg` to the sink in steady state: the host keeps
    /// up to `outstanding` messages unacknowledged; after `WARM_NS` the
    /// window opens at a completion and closes at the first completion
    /// `min_ns` later. Returns (wall ns per message, the engine thread's CPU
    /// ns per message, messages, window ns) over the window.
    fn pipelined(&mut self, msg: &[u8], min_ns: u64) -> Result<(f64, f64, usize, u64), String> {
        let what = format!("E8 engine thread pipelined {} B", msg.len());
        let l = msg.len() as u64;
        // Enough in flight that the engine never waits for the host, few
        // enough that the queue drains quickly after the window.
        let outstanding = (1u64 << 20).div_ceil(l).clamp(4, 64);
        let base = self.tx.unacked_bytes(self.tx_ctx);
        if base != 0 {
            return Err(format!("{what}: {base} B unacknowledged before the run"));
        }
        let data = Bytes::copy_from_slice(msg);
        let t_start = mono_ns();
        let mut written = 0u64;
        let mut first: Option<(u64, u64, u64)> = None;
        let last = loop {
            let done = written - self.tx.unacked_bytes(self.tx_ctx).div_ceil(l);
            let now = mono_ns();
            match first {
                None if now - t_start >= WARM_NS && done >= 8 => first = Some((now, self.tx_cpu(), done)),
                Some(f) if now - f.0 >= min_ns && done >= f.2 + 8 => break (now, self.tx_cpu(), done),
                _ => {}
            }
            if now > t_start + 4 * FIVE_S {
                return Err(format!("{what}: no steady state within 20 s"));
            }
            if written - done < outstanding {
                // Each write its own buffer, as an application's would be.
                self.tx
                    .write(self.tx_ctx, Bytes::copy_from_slice(&data), true, None)
                    .map_err(|e| format!("{what}: {e}"))?;
                written += 1;
                self.tx.collect();
            } else {
                self.tx.wait(WAIT).map_err(|e| format!("{what}: {e}"))?;
            }
        };
        self.drain(t_start, &what)?;
        let f = first.expect("the window opened before it closed");
        let k = (last.2 - f.2) as f64;
        Ok((
            (last.0 - f.0) as f64 / k,
            last.1.saturating_sub(f.1) as f64 / k,
            (last.2 - f.2) as usize,
            last.0 - f.0,
        ))
    }

    fn end(mut self) {
        let _ = self.pp.abort(self.pp_ctx);
        let _ = self.tx.abort(self.tx_ctx);
        let _ = self.pp.wait(Duration::from_millis(1));
        let _ = self.tx.wait(Duration::from_millis(1));
    }
}

/// The processor's one-way times of the round trips `marks` (t0, t1, t2):
/// the sending engine `eng`'s first pop of the application's block after
/// t0, to the receiving engine `peer`'s last push to its application
/// before it takes the echo's write block (the message delivered whole).
fn one_way(rec: &Recording, eng: u32, peer: u32, marks: &[(u64, u64, u64)]) -> Vec<u64> {
    let pops = instants(rec, eng, Point::RingPop, 0);
    let peer_pushes = instants(rec, peer, Point::RingPush, 1);
    let peer_pops = instants(rec, peer, Point::RingPop, 0);
    let mut out = Vec::with_capacity(marks.len());
    for &(t0, _, t2) in marks {
        let Some(&took) = pops.iter().find(|&&p| p >= t0 && p <= t2) else { continue };
        let Some(&echo) = peer_pops.iter().find(|&&p| p > took && p <= t2) else { continue };
        if let Some(&delivered) = peer_pushes.iter().rev().find(|&&p| p > took && p <= echo) {
            out.push(delivered - took);
        }
    }
    out
}

/// The calibration sweep against two applications on their own engine
/// threads, `echo` (the ping-pong's far end) and `sink` (the synchronous
/// and pipelined sends' receiver): every length of `sizes` measured in
/// each of `rounds` rounds (lengths interleaved, in alternating order, so
/// that a change of the machine's load falls on all of them alike rather
/// than on a few), `count` round trips and synchronous sends per length in
/// all; then three pipelined windows per length of ≥ `stream_ms` / 3 each.
pub(crate) fn calibrate(
    echo: SocketAddr,
    sink: SocketAddr,
    sizes: &[usize],
    count: usize,
    stream_ms: u64,
    rounds: usize,
) -> Result<Vec<CalibRow>, String> {
    let mut eng = Engines::new(echo, sink)?;
    let msgs: Vec<Vec<u8>> = sizes.iter().map(|&l| vec![0x42u8; l]).collect();
    let mut samples: Vec<Samples> = sizes.iter().map(|_| Samples::default()).collect();
    let rounds = rounds.max(1);
    let per = count.div_ceil(rounds);
    for round in 0..=rounds {
        // Round 0 warms every path up and is not kept.
        let keep = round > 0;
        let n = if keep { per } else { 5 };
        let order: Vec<usize> =
            if round % 2 == 0 { (0..sizes.len()).collect() } else { (0..sizes.len()).rev().collect() };
        for i in order {
            let (m, s) = (&msgs[i], &mut samples[i]);
            eng.ping_pong(m, n, s, keep)?;
            eng.sync_sends(m, n, s, keep)?;
        }
    }
    const WINDOWS: usize = 3;
    let window_ns = (stream_ms * 1_000_000).div_ceil(WINDOWS as u64);
    for w in 0..WINDOWS {
        let order: Vec<usize> =
            if w % 2 == 0 { (0..sizes.len()).collect() } else { (0..sizes.len()).rev().collect() };
        for i in order {
            let (wall, cpu, k, ns) = eng.pipelined(&msgs[i], window_ns)?;
            let s = &mut samples[i];
            s.async_period.push(wall);
            s.proc_period.push(cpu);
            s.stream_msgs += k;
            s.stream_ns += ns;
        }
    }
    eng.end();
    let medf = |v: &[f64]| xk_stats::median(v.iter().copied());
    Ok(sizes
        .iter()
        .zip(samples)
        .map(|(&size, s)| CalibRow {
            kind: "calibration".into(),
            size,
            l_c: std::mem::size_of::<ToEngine>(),
            l_a: std::mem::size_of::<FromEngine>(),
            proc_delay_ns: median(&s.proc_oneway),
            proc_period_ns: medf(&s.proc_period),
            proc_complete_ns: median(&s.proc_complete),
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
            stream: s.stream_msgs,
            stream_ms: s.stream_ns as f64 / 1e6,
            disturbed: s.disturbed,
        })
        .collect())
}

/// An application on its own engine thread, the far host of the
/// user-level measurements (seed 004 measured between two applications,
/// each with its protocol processor): it reads each whole message
/// (copying it out, as `recv_message` does) and, as the echo, writes it
/// back (copying it in); as the sink, drops it. Until dropped.
pub(crate) struct PeerApp {
    pub(crate) addr: SocketAddr,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl PeerApp {
    /// The echo (thread `e8-echo-app`, found by name in traces).
    pub(crate) fn echo() -> Result<PeerApp, String> {
        PeerApp::start(true)
    }

    /// The sink (thread `e8-sink-app`).
    pub(crate) fn sink() -> Result<PeerApp, String> {
        PeerApp::start(false)
    }

    fn start(echo: bool) -> Result<PeerApp, String> {
        use std::sync::atomic::{AtomicBool, Ordering};
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let halt = stop.clone();
        let (tx, rx) = std::sync::mpsc::channel();
        let name = if echo { "e8-echo-app" } else { "e8-sink-app" };
        let thread = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                let e = |e: std::io::Error| format!("E8 {name}: {e}");
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
                let mut open: Vec<(CtxHandle, Vec<u8>)> = Vec::new();
                while !halt.load(Ordering::Relaxed) {
                    if c.wait_for(Duration::from_millis(20), true).is_err() {
                        return;
                    }
                    while let Some(n) = c.next_notice() {
                        match n {
                            Notice::Incoming { ctx, .. } => open.push((ctx, Vec::new())),
                            Notice::Closed { ctx, .. } => open.retain(|o| o.0 != ctx),
                            _ => {}
                        }
                    }
                    for (ctx, buf) in &mut open {
                        while let Some(ch) = c.read_chunk(*ctx) {
                            buf.extend_from_slice(&ch.data);
                            if ch.eom {
                                if echo {
                                    let _ = c.write(*ctx, Bytes::copy_from_slice(buf), true, None);
                                }
                                buf.clear();
                            }
                        }
                    }
                }
            })
            .map_err(|e| format!("E8: start {name}: {e}"))?;
        let addr = rx.recv().map_err(|_| format!("E8: {name} ended before it started"))??;
        Ok(PeerApp { addr, stop, thread: Some(thread) })
    }
}

impl Drop for PeerApp {
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
    use xk_trace::{Event, ThreadEvents};

    #[test]
    fn one_way_runs_from_the_senders_pop_to_the_receivers_last_delivery() {
        let mk = |tid: u32, evs: Vec<Event>| ThreadEvents { tid, name: "xtp-engine".into(), events: evs };
        let rec = Recording {
            threads: vec![
                mk(1, vec![Event::instant(110, Point::RingPop, 0, 0, 0)]),
                mk(
                    2,
                    vec![
                        Event::instant(150, Point::RingPush, 0, 0, 1),
                        Event::instant(170, Point::RingPush, 0, 0, 1),
                        Event::instant(200, Point::RingPop, 0, 0, 0),
                        Event::instant(230, Point::RingPush, 0, 0, 1),
                    ],
                ),
            ],
            dropped: 0,
        };
        assert_eq!(one_way(&rec, 1, 2, &[(100, 105, 300)]), vec![60]);
        // No echo taken within the round trip: no sample.
        assert!(one_way(&rec, 1, 2, &[(100, 105, 190)]).is_empty());
    }

    /// The real thing, small: every quantity measured and positive.
    #[test]
    fn calibration_measures_on_loopback() {
        let _one = crate::e8_measure::TRACE_TESTS.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let (echo, sink) = (PeerApp::echo().unwrap(), PeerApp::sink().unwrap());
        let rows = calibrate(echo.addr, sink.addr, &[1, 8_192], 20, 30, 2).unwrap();
        assert_eq!(rows.len(), 2);
        for r in &rows {
            for (name, v) in [
                ("proc_delay", r.proc_delay_ns),
                ("proc_period", r.proc_period_ns),
                ("proc_complete", r.proc_complete_ns),
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
            // Every round trip measured, disturbed or kept.
            assert_eq!(r.disturbed.measured, 2 * 20);
            assert!(r.count <= 20 && r.count + r.disturbed.disturbed >= 20, "{r:?}");
            // Application to application costs more than processor to
            // processor; a window of ≥ 10 ms of pipelined messages.
            assert!(r.delay_ns > r.proc_delay_ns, "{r:?}");
            assert!(r.stream > 8 && r.stream_ms >= 9.0, "{r:?}");
        }
    }
}
