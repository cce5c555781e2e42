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
//!   host keeps up to 4 MB (4–1,024 messages) outstanding — the seed's
//!   asynchronous mode never waits for a completion, and Session 14's
//!   64 messages made the short messages' period that window over a
//!   completion's round trip (1 B: 64 × 1.58 µs ≈ 101 µs, Little's law),
//!   not the pipeline's; the first ≥ 10 ms are discarded
//!   (start-up), and the period is the time between the k-th and the n-th
//!   completion over (n − k), the window ≥ `stream_ms` / 3 long — so
//!   neither the pipeline's filling nor the final acknowledgement is in it.
//!   The **processor's period T_0 + ρ_T·l** (seed 004's meaning: its time
//!   per message when streaming, below δ_0) is the engine thread's CPU time
//!   (`/proc/…/schedstat`) over the same window per message: the period it
//!   would have with a processor of its own, as the seed's was. Over the
//!   same windows: every thread's CPU time (U), their run-queue waits and
//!   times scheduled in (`schedstat`), and the machine's idle time and
//!   everyone else's CPU time (`/proc/stat`): where the cores' time went.
//!
//! The synchronous sends also split the host's CPU time into the write
//! call and the wait, count the doorbells rung, the sleeps and the blocks
//! taken per send, and cut the send's two wake-ups from the trace, so the
//! host-time check can say which of its terms misses.
//!
//! Each ping-pong round trip and synchronous send is bracketed by the
//! application thread's preemption, page-fault and CPU counters
//! ([`crate::e8_disturb`]): a disturbed one is counted per cause and kept
//! out of every statistic. CPU and wall times are read together at the
//! same boundaries ([`stamp`]). Every value of a row is a mean over the
//! undisturbed operations ([`mean`] says why not a median).

use std::net::SocketAddr;

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use xk_driver::driver::UdpDriver;
use xk_driver::engine::{self, CtxHandle, EngineClient, EngineConfig, FromEngine, ToEngine};
use xk_driver::trace::mono_ns;
use xk_time::Duration;
use xk_trace::{Point, Recording};
use xtp_proto::{ContextConfig, EndpointConfig};

use crate::e8_disturb::{Cause, Disturbed, Mark, settle};
use crate::e8_measure::{
    calls, crossing, engine_of, engine_threads, instants, machine_ticks, schedstat3, thread_cpu_ns,
    thread_named, thread_switches, ticks_per_s,
};
use crate::e8_peer::PeerApp;
use crate::e8_place::{Pinned, Placement};

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
    #[serde(deserialize_with = "crate::experiment::f64_or_nan")]
    pub proc_delay_ns: f64,
    /// The processor's period: the engine thread's CPU time per message
    /// in the pipelined run's steady-state window, ns — T_0 + ρ_T·l.
    #[serde(deserialize_with = "crate::experiment::f64_or_nan")]
    pub proc_period_ns: f64,
    /// The processor's completion of a synchronous send, from the engine
    /// thread's trace: pop of the write block to push of its
    /// acknowledgment block, ns — the extended model's C_0 + γ·l.
    #[serde(deserialize_with = "crate::experiment::f64_or_nan")]
    pub proc_complete_ns: f64,
    /// Host write entry: copying the message into a buffer the engine owns
    /// and posting its block (the write call's start to its ring push,
    /// trace), ns — δ_w + ρ_w·(l_c + l).
    #[serde(deserialize_with = "crate::experiment::f64_or_nan")]
    pub write_ns: f64,
    /// The host CPU time of the rest of the write call: ringing the
    /// sleeping engine's doorbell (the call's CPU time less the post), ns,
    /// over the ping-pong writes that rang it (found the engine asleep) —
    /// the extended model's δ_d.
    #[serde(default, deserialize_with = "crate::experiment::f64_or_nan")]
    pub doorbell_ns: f64,
    /// The fraction of ping-pong writes that rang the engine's doorbell
    /// (the rest found it awake: no system call).
    #[serde(default, deserialize_with = "crate::experiment::f64_or_nan")]
    pub pp_rings: f64,
    /// Doorbells rung per synchronous send.
    #[serde(default, deserialize_with = "crate::experiment::f64_or_nan")]
    pub sync_rings: f64,
    /// CPU time of every thread of the pipelined transfer (the sending
    /// application and engine, the receiving engine and application) per
    /// message over the steady-state windows, ns — the extended model's
    /// U_0 + υ·l.
    #[serde(default, deserialize_with = "crate::experiment::f64_or_nan")]
    pub all_cpu_ns: f64,
    /// Processors this machine offers those threads.
    #[serde(default)]
    pub cores: usize,
    /// Largest user data in one packet (the context's mss), bytes: where
    /// the pipelined period's two regimes meet.
    #[serde(default)]
    pub mss: usize,
    /// Host read entry: from the first pop of the woken application to the
    /// message copied out, ns — δ_r + ρ_r·(l_a + l).
    #[serde(deserialize_with = "crate::experiment::f64_or_nan")]
    pub read_ns: f64,
    /// Wake-up of the application: the engine's last push to the
    /// application's first pop after sleeping, ns — δ_i.
    #[serde(deserialize_with = "crate::experiment::f64_or_nan")]
    pub wake_ns: f64,
    /// The application thread's CPU time in waiting for the echo (going
    /// to sleep on the doorbell, being woken, taking the blocks): the
    /// host's cost of a wake-up, the extended model's δ_i^cpu, ns.
    #[serde(deserialize_with = "crate::experiment::f64_or_nan")]
    pub wake_cpu_ns: f64,
    /// Wake-up of the engine: the application's push to the engine's pop
    /// (not in the seed's model), ns.
    #[serde(deserialize_with = "crate::experiment::f64_or_nan")]
    pub engine_wake_ns: f64,
    /// User-level one-way latency (half a round trip between two
    /// applications, each on its engine thread), ns — δ(l).
    #[serde(deserialize_with = "crate::experiment::f64_or_nan")]
    pub delay_ns: f64,
    /// User-level synchronous send to a receiving application: write and
    /// wait for the engine to report it acknowledged, ns — T_t(l).
    #[serde(deserialize_with = "crate::experiment::f64_or_nan")]
    pub sync_period_ns: f64,
    /// User-level asynchronous (pipelined) time per message in steady
    /// state, ns.
    #[serde(deserialize_with = "crate::experiment::f64_or_nan")]
    pub async_period_ns: f64,
    /// Host CPU time of a synchronous send, ns — H_t(l).
    #[serde(deserialize_with = "crate::experiment::f64_or_nan")]
    pub host_send_ns: f64,
    /// The application thread's sleeps (each ended by a wake-up) per
    /// synchronous send.
    #[serde(default, deserialize_with = "crate::experiment::f64_or_nan")]
    pub sync_wakeups: f64,
    /// Host CPU time of a receive (wake-up, read, copy out), ns — H_r(l).
    #[serde(deserialize_with = "crate::experiment::f64_or_nan")]
    pub host_recv_ns: f64,
    /// Of a synchronous send's host CPU time: the write call (copy in,
    /// post, doorbell), ns.
    #[serde(default, deserialize_with = "crate::experiment::f64_or_nan")]
    pub send_write_cpu_ns: f64,
    /// Of a synchronous send's host CPU time: the wait for its completion
    /// (sleep, wake-up, taking the acknowledgment block), ns.
    #[serde(default, deserialize_with = "crate::experiment::f64_or_nan")]
    pub send_wait_cpu_ns: f64,
    /// The application thread's sleeps per ping-pong round trip.
    #[serde(default, deserialize_with = "crate::experiment::f64_or_nan")]
    pub pp_sleeps: f64,
    /// Data blocks the application took off its completion ring per
    /// undisturbed ping-pong receive, from the write's return to the echo
    /// read whole (trace): how many blocks H_r's wait takes.
    #[serde(default = "crate::experiment::nan", deserialize_with = "crate::experiment::f64_or_nan")]
    pub pp_blocks: f64,
    /// The monitor's own cost (Session 19): the CPU time one read of the
    /// thread's CPU clock (`CLOCK_THREAD_CPUTIME_ID`, a system call here)
    /// adds to a CPU-time interval it bounds — back-to-back reads, the
    /// mean difference of consecutive ones, a few dozen per round — ns.
    /// Every host time the sweep measures per operation is bounded by
    /// such reads, so each holds some of them.
    #[serde(default = "crate::experiment::nan", deserialize_with = "crate::experiment::f64_or_nan")]
    pub clock_read_ns: f64,
    /// Waits (`wait_for` calls) per undisturbed ping-pong receive: the
    /// receive's CPU time is bounded by 2·waits + 1 of the thread-CPU
    /// clock reads above (each wait bracketed by two, the write's return
    /// and the echo read whole by one each), its waits' CPU time by
    /// `waits` of them.
    #[serde(default = "crate::experiment::nan", deserialize_with = "crate::experiment::f64_or_nan")]
    pub pp_waits: f64,
    /// The sink application thread's CPU time per synchronous send
    /// (`schedstat` over each round's sends, every send of the round):
    /// a receive after a sleep — woken, the message's blocks taken,
    /// copied out — on another thread and operation than the ping-pong's
    /// receive, with no per-operation clock read inside, ns.
    #[serde(default = "crate::experiment::nan", deserialize_with = "crate::experiment::f64_or_nan")]
    pub sync_sink_cpu_ns: f64,
    /// Session 20: the two engine threads' CPU time (the sending
    /// application's engine and the sink's; `schedstat` over each round's
    /// sends) per synchronous send, ns — with the host's (`host_send_ns`)
    /// and the sink application's (`sync_sink_cpu_ns`), the four threads'
    /// work per message on another operation than the pipelined stream.
    #[serde(default = "crate::experiment::nan", deserialize_with = "crate::experiment::f64_or_nan")]
    pub sync_engines_cpu_ns: f64,
    /// Session 20: a synchronous send's one-way time to the application:
    /// from the write call's start to the sink application having the
    /// message copied out (its `CLOCK_MONOTONIC` stamp after the last
    /// chunk), ns — the user-level latency measured on another operation
    /// than the ping-pong (the sender sleeps through the acknowledgement,
    /// the sink through a whole send's period).
    #[serde(default = "crate::experiment::nan", deserialize_with = "crate::experiment::f64_or_nan")]
    pub sync_oneway_ns: f64,
    /// Session 20: the fraction of synchronous sends whose sink
    /// application took a block of the message before its engine posted
    /// the message's last block (trace): the receiver woken mid-message,
    /// sharing its engine's CPU while the rest of the message is taken in.
    #[serde(default = "crate::experiment::nan", deserialize_with = "crate::experiment::f64_or_nan")]
    pub sync_mid_wake: f64,
    /// The same for the ping-pong's echo application (trace).
    #[serde(default = "crate::experiment::nan", deserialize_with = "crate::experiment::f64_or_nan")]
    pub pp_mid_wake: f64,
    /// Session 20: the sink application's wake-up in a synchronous send,
    /// cut as the ping-pong's δ_i (its engine's last push of the message →
    /// its first pop after it; trace), ns.
    #[serde(default = "crate::experiment::nan", deserialize_with = "crate::experiment::f64_or_nan")]
    pub sync_sink_wake_ns: f64,
    /// Session 20: the processor's one way in a synchronous send, cut as
    /// the ping-pong's δ_0 + ρ_δ·l (the sending engine takes the write
    /// block → the sink's engine posts the message's last block; trace), ns.
    #[serde(default = "crate::experiment::nan", deserialize_with = "crate::experiment::f64_or_nan")]
    pub sync_proc_oneway_ns: f64,
    /// Session 21: the processor one way's socket crossing
    /// (`e8_measure::crossing`: send call's start → the receiving engine's
    /// receive call's end) in the ping-pong's way out (application's
    /// engine → echo's), ns; traced.
    #[serde(default = "crate::experiment::nan", deserialize_with = "crate::experiment::f64_or_nan")]
    pub pp_cross_out_ns: f64,
    /// Session 21: the ping-pong's way back's socket crossing, ns.
    #[serde(default = "crate::experiment::nan", deserialize_with = "crate::experiment::f64_or_nan")]
    pub pp_cross_back_ns: f64,
    /// Session 21: a synchronous send's socket crossing, ns.
    #[serde(default = "crate::experiment::nan", deserialize_with = "crate::experiment::f64_or_nan")]
    pub sync_cross_ns: f64,
    /// Blocks the application took off its completion ring per
    /// undisturbed synchronous send (trace).
    #[serde(default, deserialize_with = "crate::experiment::f64_or_nan")]
    pub sync_blocks: f64,
    /// With the placement probe (`placement_probe`; None without): the
    /// write call's CPU time over the ping-pong writes that rang the
    /// engine when it had last run on the application's CPU, ns.
    #[serde(default)]
    pub probe_pp_local_ns: Option<f64>,
    /// … when it had last run on another CPU (the wake-up crosses CPUs), ns.
    #[serde(default)]
    pub probe_pp_remote_ns: Option<f64>,
    /// The fraction of those ringing ping-pong writes that were local.
    #[serde(default)]
    pub probe_pp_local: Option<f64>,
    /// The same three for the synchronous sends' write calls.
    #[serde(default)]
    pub probe_sync_local_ns: Option<f64>,
    /// See `probe_pp_remote_ns`.
    #[serde(default)]
    pub probe_sync_remote_ns: Option<f64>,
    /// See `probe_pp_local`.
    #[serde(default)]
    pub probe_sync_local: Option<f64>,
    /// The processor's completion C over the synchronous sends that took
    /// one acknowledgment block (one acknowledgement round), ns — the
    /// extended model's C_1(l) = C_0 + γ·l.
    #[serde(default = "crate::experiment::nan", deserialize_with = "crate::experiment::f64_or_nan")]
    pub proc_complete_one_ns: f64,
    /// The same over the sends that took more than one block (the message
    /// completed in more than one acknowledgement round), ns.
    #[serde(default = "crate::experiment::nan", deserialize_with = "crate::experiment::f64_or_nan")]
    pub proc_complete_multi_ns: f64,
    /// Blocks those sends took, per send (≥ 2; NaN when there were none).
    #[serde(default = "crate::experiment::nan", deserialize_with = "crate::experiment::f64_or_nan")]
    pub multi_blocks: f64,
    /// How many undisturbed sends took more than one block.
    #[serde(default)]
    pub multi_sends: usize,
    /// The engine's wake-up in a synchronous send (application push →
    /// engine pop, trace), ns: δ_e in that context.
    #[serde(default, deserialize_with = "crate::experiment::f64_or_nan")]
    pub sync_engine_wake_ns: f64,
    /// The application's wake-up in a synchronous send (the engine's push
    /// of the acknowledgment block → the application's pop, trace), ns: δ_i
    /// in that context.
    #[serde(default, deserialize_with = "crate::experiment::f64_or_nan")]
    pub sync_wake_ns: f64,
    /// Pipelined, per message over the steady-state windows: the sending
    /// application thread's CPU time, ns.
    #[serde(default, deserialize_with = "crate::experiment::f64_or_nan")]
    pub pipe_host_cpu_ns: f64,
    /// Pipelined, per message over the steady-state windows: the receiving
    /// application thread's CPU time (taking the message's blocks and
    /// copying it out; it seldom sleeps while the stream flows), ns — the
    /// receive's work measured on another operation and thread than the
    /// ping-pong's receive loop H_r is checked on (Session 16).
    #[serde(default = "crate::experiment::nan", deserialize_with = "crate::experiment::f64_or_nan")]
    pub pipe_sink_cpu_ns: f64,
    /// Pipelined, per message: the time the transfer's four threads spent
    /// runnable but waiting for a core (`schedstat` run-queue delay), ns.
    #[serde(default, deserialize_with = "crate::experiment::f64_or_nan")]
    pub pipe_runq_ns: f64,
    /// Pipelined, per message: times the four threads were scheduled in
    /// (wake-ups and preemptions).
    #[serde(default, deserialize_with = "crate::experiment::f64_or_nan")]
    pub pipe_slices: f64,
    /// Pipelined, per message: CPU time of everything else on the machine
    /// (all CPUs' busy time from `/proc/stat` less the four threads'), ns;
    /// ticks pooled over the windows. Not clamped: negative when the
    /// ticks (± `pipe_tick_ns`) under-count the threads' own CPU time.
    #[serde(default, deserialize_with = "crate::experiment::f64_or_nan")]
    pub pipe_other_cpu_ns: f64,
    /// Pipelined, per message: the machine's idle CPU time, ns (`/proc/stat`).
    #[serde(default, deserialize_with = "crate::experiment::f64_or_nan")]
    pub pipe_idle_ns: f64,
    /// With a fixed placement (`placement` not free; None when free):
    /// pipelined, per message, the CPU time of the threads pinned to the
    /// busier of the two CPUs (per window, pooled), ns — the period that
    /// CPU allows, which replaces (U + I)/cores in τ_a' (the work can no
    /// longer spread over the cores).
    #[serde(default)]
    pub pipe_busiest_cpu_ns: Option<f64>,
    /// The sink's engine's reply hold in force, µs (the plan's
    /// `sink_reply_hold_us`, else the engine's default): it changes the
    /// synchronous sends' completion and the pipelined stream, so a row
    /// carries it. None in results written before it was recorded.
    #[serde(default)]
    pub sink_reply_hold_us: Option<u64>,
    /// Pipelined, per message: CPU time the hypervisor gave to other
    /// guests while this one was runnable (`/proc/stat` steal), ns.
    #[serde(default, deserialize_with = "crate::experiment::f64_or_nan")]
    pub pipe_steal_ns: f64,
    /// Pipelined, per message: the resolution of the `/proc/stat` figures
    /// above — each read is up to a tick off per CPU, so a window's
    /// difference is within ± cores ticks; over the windows, per message.
    #[serde(default, deserialize_with = "crate::experiment::f64_or_nan")]
    pub pipe_tick_ns: f64,
    /// Undisturbed round trips kept.
    pub count: usize,
    /// Messages in the pipelined runs' steady-state windows, in all.
    pub stream: usize,
    /// Length of those windows, in all, ms.
    #[serde(default, deserialize_with = "crate::experiment::f64_or_nan")]
    pub stream_ms: f64,
    /// Round trips and synchronous sends measured and disturbed by the
    /// operating system, per cause (kept out of the means).
    #[serde(default)]
    pub disturbed: Disturbed,
    /// The measurement's own repeatability (Session 17): per quantity
    /// (named as its field above, without `_ns`), its mean in each round
    /// of the sweep (ping-pong and synchronous quantities) or each
    /// pipelined window (`async_period`, `proc_period`, `all_cpu`), ns, in
    /// the order measured. Empty in results written before.
    #[serde(default)]
    pub repeats: std::collections::BTreeMap<String, Vec<f64>>,
    /// Where the calibration's threads ran (the plan's `placement` as
    /// applied: the default runs free on one CPU); None in results
    /// written before Session 17. The one source the model and the
    /// reading take it from.
    #[serde(default)]
    pub placement: Option<Placement>,
}

/// The CPU `tid` (a thread of this process) last ran on (`stat`'s 39th
/// field), −1 when unknown. A file read, some µs: only with the placement
/// probe, outside the timed window.
fn last_cpu(tid: Option<&String>) -> i64 {
    let Some(t) = tid else { return -1 };
    let stat = std::fs::read_to_string(format!("/proc/self/task/{t}/stat")).unwrap_or_default();
    // After the command name's closing parenthesis: field 3 onwards.
    let rest = stat.rsplit(')').next().unwrap_or("");
    rest.split_whitespace().nth(36).and_then(|v| v.parse().ok()).unwrap_or(-1)
}

/// Whether `tid` last ran on the calling thread's CPU (None: unknown).
fn shares_cpu(tid: Option<&String>) -> Option<bool> {
    let me = nix::sched::sched_getcpu().ok()? as i64;
    let it = last_cpu(tid);
    (it >= 0).then_some(it == me)
}

/// A thread of this process by its id: its schedstat (CPU time, run-queue
/// wait, timeslices), None where it cannot be read (the thread gone). The
/// one reader for the pipelined snapshots and the sink's receives.
fn task_cpu(tid: &str) -> Option<[u64; 3]> {
    schedstat3(&std::path::Path::new("/proc/self/task").join(tid).join("schedstat"))
}

/// Wall and CPU time of the calling thread, read together (the same
/// boundary for both windows), ns.
pub(crate) fn stamp() -> (u64, u64) {
    (mono_ns(), thread_cpu_ns())
}

/// The mean of the samples (NaN for none). The model adds times along a
/// path, and the mean of a sum is the sum of the means while a median of a
/// sum is not the sum of medians (a wake-up's latency is bimodal here: a
/// few µs when a core is idle, tens when it is not); seed 004 too
/// calibrated on time averages. The operating system's disturbances are
/// already out of the samples.
fn mean(v: &[u64]) -> f64 {
    if v.is_empty() { f64::NAN } else { v.iter().map(|&x| x as f64).sum::<f64>() / v.len() as f64 }
}

/// k of n as a fraction (NaN for none).
fn frac_of((k, n): (u64, u64)) -> f64 {
    if n == 0 { f64::NAN } else { k as f64 / n as f64 }
}

/// The samples of one calibration length, pooled over rounds.
#[derive(Default)]
struct Samples {
    proc_oneway: Vec<u64>,
    proc_complete: Vec<u64>,
    write: Vec<u64>,
    doorbell: Vec<u64>,
    read: Vec<u64>,
    wake: Vec<u64>,
    wake_cpu: Vec<u64>,
    engine_wake: Vec<u64>,
    pp_rings: (u64, u64),
    sync_rings: (u64, u64),
    rtt: Vec<u64>,
    host_recv: Vec<u64>,
    sync_period: Vec<u64>,
    host_send: Vec<u64>,
    stream_msgs: usize,
    stream_ns: u64,
    stream_cpu_ns: u64,
    stream_all_cpu_ns: u64,
    /// Pipelined windows: [host CPU, run-queue delay, slices] of the four
    /// threads, and the machine's [busy, idle, steal] ticks.
    stream_sched: [u64; 3],
    stream_host_cpu_ns: u64,
    stream_sink_cpu_ns: u64,
    stream_ticks: [u64; 3],
    /// Fixed placement: the busier CPU's pinned threads' CPU time.
    stream_busiest_ns: u64,
    send_write_cpu: Vec<u64>,
    send_wait_cpu: Vec<u64>,
    pp_sleeps: u64,
    pp_rts: u64,
    /// Blocks taken per synchronous send (trace).
    sync_blocks: Vec<u64>,
    /// Blocks taken per ping-pong receive (trace).
    pp_blocks: Vec<u64>,
    /// Waits per undisturbed ping-pong receive.
    pp_waits: Vec<u64>,
    /// Per kept round: a thread-CPU clock read's cost, ns (×1/32 units:
    /// the sum over 32 reads, so that the mean keeps its fraction).
    clock_read: Vec<u64>,
    /// The sink application's CPU ns over the kept synchronous sends, and
    /// those sends.
    sync_sink_cpu: (u64, u64),
    /// The two engines' CPU ns over the kept synchronous sends, and those
    /// sends.
    sync_engines_cpu: (u64, u64),
    /// Per undisturbed synchronous send: its start to the sink
    /// application's message copied out, ns.
    sync_oneway: Vec<u64>,
    /// (sends, of those traced) whose sink application was woken
    /// mid-message; the same for the ping-pong's echo application.
    sync_mid_wake: (u64, u64),
    pp_mid_wake: (u64, u64),
    /// The sink application's wake-up per synchronous send (trace), ns.
    sync_sink_wake: Vec<u64>,
    /// The processor's one way per synchronous send (trace), ns.
    sync_proc_oneway: Vec<u64>,
    /// Socket crossings (trace), ns: the ping-pong's out and back, a send's.
    pp_cross: [Vec<u64>; 2],
    sync_cross: Vec<u64>,
    /// C of the sends that took one block; (C, blocks) of those that took
    /// more.
    complete_one: Vec<u64>,
    complete_multi: Vec<(u64, u64)>,
    sync_engine_wake: Vec<u64>,
    sync_wake: Vec<u64>,
    /// Placement probe: write call CPU of ringing writes, [ping-pong,
    /// synchronous][remote, local].
    probe: [[Vec<u64>; 2]; 2],
    /// The application thread's sleeps over `sync_sends` synchronous sends.
    sync_sleeps: u64,
    sync_sends: u64,
    disturbed: Disturbed,
    /// Per tracked quantity ([`TRACKED`], then the pipelined ones), its
    /// mean in each kept round or window: the row's `repeats`.
    repeats: std::collections::BTreeMap<String, Vec<f64>>,
}

/// The names of the series in a row's `repeats` (each its field's name
/// without `_ns`): the one spelling the sweep writes and the model reads.
pub(crate) mod series {
    pub(crate) const DELAY: &str = "delay";
    pub(crate) const SYNC_PERIOD: &str = "sync_period";
    pub(crate) const HOST_SEND: &str = "host_send";
    pub(crate) const HOST_RECV: &str = "host_recv";
    /// Per pipelined window, as the next two.
    pub(crate) const ASYNC_PERIOD: &str = "async_period";
    pub(crate) const PROC_PERIOD: &str = "proc_period";
    pub(crate) const ALL_CPU: &str = "all_cpu";
}

/// One tracked series: (name, where its samples are, scale).
type Tracked = (&'static str, fn(&Samples) -> &Vec<u64>, f64);

/// The per-round quantities whose repeatability a row records: the
/// checked quantities and the terms that predict them. The latency is
/// half a round trip.
const TRACKED: [Tracked; 15] = [
    (series::DELAY, |s| &s.rtt, 0.5),
    (series::SYNC_PERIOD, |s| &s.sync_period, 1.0),
    (series::HOST_SEND, |s| &s.host_send, 1.0),
    (series::HOST_RECV, |s| &s.host_recv, 1.0),
    ("proc_delay", |s| &s.proc_oneway, 1.0),
    ("proc_complete_one", |s| &s.complete_one, 1.0),
    ("write", |s| &s.write, 1.0),
    ("read", |s| &s.read, 1.0),
    ("wake", |s| &s.wake, 1.0),
    ("wake_cpu", |s| &s.wake_cpu, 1.0),
    ("engine_wake", |s| &s.engine_wake, 1.0),
    ("doorbell", |s| &s.doorbell, 1.0),
    ("send_write_cpu", |s| &s.send_write_cpu, 1.0),
    ("send_wait_cpu", |s| &s.send_wait_cpu, 1.0),
    ("sync_oneway", |s| &s.sync_oneway, 1.0),
];

impl Samples {
    /// Where each tracked series stands (at a round's start).
    fn marks(&self) -> [usize; TRACKED.len()] {
        TRACKED.map(|t| t.1(self).len())
    }

    /// Records each tracked series' mean over the samples since `from`.
    fn round_done(&mut self, from: [usize; TRACKED.len()]) {
        for (&(name, f, scale), start) in TRACKED.iter().zip(from) {
            let m = mean(&f(self)[start..]) * scale;
            if m.is_finite() {
                self.repeats.entry(name.into()).or_default().push(m);
            }
        }
    }
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
    /// The ping-pong's engine thread's id.
    pp_tid: Option<String>,
    /// Whether to probe where the engine last ran before each operation.
    probe: bool,
    /// The receiving side's threads (its application and engine).
    sink_tids: Vec<String>,
    /// The receiving application's thread.
    sink_app_tid: Option<String>,
}

/// The pipelined transfer's threads and the machine at one instant (see
/// [`Engines::cpu`]).
#[derive(Clone, Copy, Default)]
struct Snap {
    /// The sending engine thread's CPU time, ns.
    eng: u64,
    /// Every thread's of the transfer, ns.
    all: u64,
    /// This (the sending application's) thread's, ns.
    host: u64,
    /// The receiving application thread's, ns.
    sink_app: u64,
    /// The four threads' `schedstat` summed: CPU ns, run-queue ns, slices.
    sched: [u64; 3],
    /// The machine's busy, idle and steal ticks.
    ticks: [u64; 3],
}

impl Snap {
    /// What happened from `self` to `later`.
    fn since(&self, later: &Snap) -> Snap {
        let d = |a: [u64; 3], b: [u64; 3]| [0, 1, 2].map(|i| b[i].saturating_sub(a[i]));
        Snap {
            eng: later.eng.saturating_sub(self.eng),
            all: later.all.saturating_sub(self.all),
            host: later.host.saturating_sub(self.host),
            sink_app: later.sink_app.saturating_sub(self.sink_app),
            sched: d(self.sched, later.sched),
            ticks: d(self.ticks, later.ticks),
        }
    }
}

const WAIT: Duration = Duration::from_millis(50);
const FIVE_S: u64 = 5_000_000_000;
/// Start-up of a pipelined run discarded before its window opens, ns.
const WARM_NS: u64 = 10_000_000;

impl Engines {
    fn new(echo: SocketAddr, sink: &PeerApp, probe: bool) -> Result<Engines, String> {
        let e = |e: std::io::Error| format!("E8 engine thread: {e}");
        let before = engine_threads();
        let d = UdpDriver::bind("127.0.0.1:0", EndpointConfig::default(), 82).map_err(e)?;
        let mut pp = engine::spawn(d, EngineConfig::default()).map_err(e)?;
        let pp_tid = engine_threads().difference(&before).next().cloned();
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
        let tx_ctx = tx.connect(sink.addr, 7, ContextConfig::stream()).map_err(e)?;
        Ok(Engines {
            pp,
            pp_ctx,
            tx,
            tx_ctx,
            tx_tid,
            pp_tid,
            probe,
            sink_tids: sink.tids.clone(),
            sink_app_tid: sink.app_tid.clone(),
        })
    }

    /// The pipelined transfer's threads and the machine now.
    fn cpu(&self) -> Snap {
        let eng = self.tx_tid.as_deref().and_then(task_cpu).unwrap_or([0; 3]);
        let host = thread_cpu_ns();
        let me = schedstat3(std::path::Path::new("/proc/thread-self/schedstat")).unwrap_or([0; 3]);
        let mut sched = [0u64; 3];
        for t in self.sink_tids.iter().filter_map(|t| task_cpu(t)).chain([eng, me]) {
            for (a, b) in sched.iter_mut().zip(t) {
                *a += b;
            }
        }
        let sink: u64 = self.sink_tids.iter().filter_map(|t| task_cpu(t)).map(|t| t[0]).sum();
        let sink_app = self.sink_app_tid.as_deref().and_then(task_cpu).map_or(0, |t| t[0]);
        Snap {
            eng: eng[0],
            all: eng[0] + sink + host,
            host,
            sink_app,
            sched,
            ticks: machine_ticks().unwrap_or([0; 3]),
        }
    }

    /// `n` ping-pongs of `msg`, traced; into `s` when `keep`.
    fn ping_pong(&mut self, msg: &[u8], n: usize, s: &mut Samples, keep: bool) -> Result<(), String> {
        let size = msg.len();
        let what = format!("E8 engine thread {size} B");
        let e = |e: std::io::Error| format!("{what}: {e}");
        let (c, ctx) = (&mut self.pp, self.pp_ctx);
        let mut out = Vec::with_capacity(size);
        // (t0, t1, t2) of the undisturbed round trips, and the CPU time of
        // their write calls.
        let mut marks = Vec::with_capacity(n);
        let mut write_cpu = Vec::with_capacity(n);
        let mut ops = Vec::with_capacity(n);
        let mut causes = Vec::with_capacity(n);
        if keep {
            xk_trace::start(xk_trace::Config::default());
            xk_trace::name_thread("e8-app");
        }
        if keep {
            s.clock_read.push(clock_reads_32());
        }
        let (v0, _) = thread_switches();
        for _ in 0..n {
            let m0 = Mark::now();
            let local = if self.probe { shares_cpu(self.pp_tid.as_ref()) } else { None };
            let rung = c.stats().engine_wakeups;
            let (t0, c0) = stamp();
            c.write(ctx, Bytes::copy_from_slice(msg), true, None).map_err(e)?;
            let (t1, c1) = stamp();
            let rang = c.stats().engine_wakeups != rung;
            if let Some(local) = local.filter(|_| keep && rang) {
                s.probe[0][usize::from(local)].push(c1 - c0);
            }
            out.clear();
            let (mut wait_cpu, mut waits) = (0, 0u64);
            'echo: loop {
                waits += 1;
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
            causes.push(Cause::between(&m0, &Mark::now()));
            if out.len() != size {
                return Err(format!("{what}: echo of {} B", out.len()));
            }
            ops.push((t0, t1, t2, c0, c1, c2, wait_cpu, rang, waits));
        }
        if !keep {
            return Ok(());
        }
        s.pp_sleeps += thread_switches().0 - v0;
        s.pp_rts += n as u64;
        let (hit, d) = settle(&causes);
        s.disturbed.add(&d);
        for (&(t0, t1, t2, c0, c1, c2, wait_cpu, rang, waits), _) in ops.iter().zip(&hit).filter(|o| !o.1) {
            marks.push((t0, t1, t2));
            write_cpu.push((c1 - c0, rang));
            s.pp_rings.0 += u64::from(rang);
            s.pp_rings.1 += 1;
            s.rtt.push(t2 - t0);
            s.host_recv.push(c2 - c1);
            s.wake_cpu.push(wait_cpu);
            s.pp_waits.push(waits);
        }
        let rec = xk_trace::finish();
        let Some(app) = thread_named(&rec, "e8-app") else { return Ok(()) };
        let Some(eng) = engine_of(&rec, app) else { return Ok(()) };
        let Some((pa, pe)) =
            thread_named(&rec, "e8-echo-app").and_then(|p| engine_of(&rec, p).map(|e| (p, e)))
        else {
            return Ok(());
        };
        // Both directions of every round trip: the latency is half a round
        // trip, so each of δ_e, δ_0 and δ_i is the mean of its two
        // crossings (the seed too measured round trips and halved them),
        // and the pieces of a round trip add up to it.
        let ev = Crossings::new(&rec, app, eng, pa, pe);
        // The two engines' send and receive calls, for the socket crossings.
        let x = (
            calls(&rec, eng, Point::SendCall),
            calls(&rec, eng, Point::RecvCall),
            calls(&rec, pe, Point::SendCall),
            calls(&rec, pe, Point::RecvCall),
        );
        for (&(t0, t1, t2), &(cpu, rang)) in marks.iter().zip(&write_cpu) {
            let Some(c) = ev.chain(t0, t1, t2) else { continue };
            s.write.push(c.a_push - t0);
            // The doorbell's host CPU: the write call's CPU time less the
            // post (copying and pushing, all on the CPU), over the writes
            // that found the engine asleep and rang it — a write that
            // finds it awake makes no system call, and how many do
            // depends on the traffic (a synchronous send always finds it
            // asleep; a ping-pong's write often finds it still busy).
            if rang {
                s.doorbell.push(cpu.saturating_sub(c.a_push - t0));
            }
            s.read.push(t2 - c.a_pop);
            s.pp_blocks.push(blocks_taken(&ev.a_pop, t1, t2));
            s.engine_wake.extend([c.e_pop - c.a_push, c.pe_pop - c.pa_push]);
            // The echo application woken mid-message: it took a block of
            // the message before the last one was posted.
            s.pp_mid_wake.0 += u64::from(ev.pa_pop.iter().any(|&p| p > c.e_pop && p < c.delivered));
            s.pp_mid_wake.1 += 1;
            s.proc_oneway.extend([c.delivered - c.e_pop, c.back - c.pe_pop]);
            if let (Some(out), Some(back)) =
                (crossing(&x.0, &x.3, c.e_pop, c.delivered), crossing(&x.2, &x.1, c.pe_pop, c.back))
            {
                s.pp_cross[0].push(out);
                s.pp_cross[1].push(back);
            }
            s.wake.extend([c.pa_pop - c.delivered, c.a_pop - c.back]);
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
    fn sync_sends(
        &mut self,
        msg: &[u8],
        n: usize,
        s: &mut Samples,
        keep: bool,
        sink: &PeerApp,
    ) -> Result<(), String> {
        let what = format!("E8 engine thread synchronous {} B", msg.len());
        if keep {
            xk_trace::start(xk_trace::Config::default());
            xk_trace::name_thread("e8-app");
            sink.start_stamps();
        }
        let sink_tid = self.sink_app_tid.clone();
        let sink_cpu = || sink_tid.as_deref().and_then(task_cpu).map(|v| v[0]);
        // The two engines' CPU time over the round (schedstat, as the
        // sink's): the sending engine and the sink's (Session 20, the
        // four threads' work per synchronous send that τ_a's prediction
        // from other operations takes its growth with length from).
        let engine_tids: Vec<String> = self
            .tx_tid
            .iter()
            .cloned()
            .chain(self.sink_tids.iter().filter(|t| Some(*t) != self.sink_app_tid.as_ref()).cloned())
            .collect();
        let engines_cpu = || -> Option<u64> {
            let v: Vec<u64> = engine_tids.iter().filter_map(|t| task_cpu(t)).map(|v| v[0]).collect();
            (v.len() == 2).then(|| v.iter().sum())
        };
        let sink0 = if keep { sink_cpu() } else { None };
        let engines0 = if keep { engines_cpu() } else { None };
        let (v0, _) = thread_switches();
        let mut marks = Vec::with_capacity(n);
        let mut ops = Vec::with_capacity(n);
        let mut causes = Vec::with_capacity(n);
        for _ in 0..n {
            let m0 = Mark::now();
            let local = if self.probe { shares_cpu(self.tx_tid.as_ref()) } else { None };
            let rung = self.tx.stats().engine_wakeups;
            let (t0, c0) = stamp();
            self.tx
                .write(self.tx_ctx, Bytes::copy_from_slice(msg), true, None)
                .map_err(|e| format!("{what}: {e}"))?;
            let cw = thread_cpu_ns();
            let rang = self.tx.stats().engine_wakeups != rung;
            if let Some(local) = local.filter(|_| keep && rang) {
                s.probe[1][usize::from(local)].push(cw - c0);
            }
            self.drain(t0, &what)?;
            let (t1, c1) = stamp();
            causes.push(Cause::between(&m0, &Mark::now()));
            ops.push((t0, t1, c0, cw, c1, rang));
        }
        if !keep {
            return Ok(());
        }
        // The sink's receives of this round's sends: its CPU time over
        // them, read once before and once after (no read per send: that
        // would put the measuring thread's file reads between the sends).
        if let (Some(a), Some(b)) = (sink0, sink_cpu()) {
            s.sync_sink_cpu.0 += b.saturating_sub(a);
            s.sync_sink_cpu.1 += n as u64;
        }
        if let (Some(a), Some(b)) = (engines0, engines_cpu()) {
            s.sync_engines_cpu.0 += b.saturating_sub(a);
            s.sync_engines_cpu.1 += n as u64;
        }
        // The sink's stamps of the messages copied out: each send's is the
        // first at or after its start and before the next send's start (a
        // send whose message has no stamp there is left out).
        let stamps = sink.take_stamps(n, std::time::Duration::from_millis(50));
        let (hit, d) = settle(&causes);
        s.disturbed.add(&d);
        let mut dones = Vec::with_capacity(n);
        for (k, (&(t0, t1, c0, cw, c1, rang), _)) in ops.iter().zip(&hit).enumerate().filter(|o| !(o.1).1) {
            let next = ops.get(k + 1).map_or(u64::MAX, |o| o.0);
            let done = stamps.iter().copied().find(|&t| t >= t0 && t < next);
            if let Some(done) = done {
                s.sync_oneway.push(done - t0);
            }
            dones.push(done);
            s.sync_rings.0 += u64::from(rang);
            s.sync_rings.1 += 1;
            marks.push((t0, t1));
            s.sync_period.push(t1 - t0);
            s.host_send.push(c1 - c0);
            s.send_write_cpu.push(cw - c0);
            s.send_wait_cpu.push(c1 - cw);
        }
        s.sync_sleeps += thread_switches().0 - v0;
        s.sync_sends += n as u64;
        let rec = xk_trace::finish();
        // Whether the sink application took a block of the message before
        // its engine posted the message's last one (woken mid-message):
        // its first pop after the send's start against its engine's last
        // push up to the message copied out.
        let mut sink_last: Vec<(u64, u64)> = Vec::new();
        let sink_eng = thread_named(&rec, "e8-sink-app").and_then(|sa| engine_of(&rec, sa));
        if let Some(sa) = thread_named(&rec, "e8-sink-app")
            && let Some(se) = engine_of(&rec, sa)
        {
            let (pops, pushes) =
                (instants(&rec, sa, Point::RingPop, 1), instants(&rec, se, Point::RingPush, 1));
            for (&(t0, _), done) in marks.iter().zip(&dones) {
                let Some(done) = *done else { continue };
                let first = pops.iter().copied().find(|&p| p >= t0 && p <= done);
                let last = pushes.iter().rev().copied().find(|&p| p >= t0 && p <= done);
                if let (Some(first), Some(last)) = (first, last) {
                    s.sync_mid_wake.0 += u64::from(first < last);
                    s.sync_mid_wake.1 += 1;
                    // The sink's wake-up, cut as the ping-pong's δ_i: its
                    // engine's last push → its first pop after it.
                    if let Some(&pop) = pops.iter().find(|&&p| p >= last && p <= done) {
                        s.sync_sink_wake.push(pop - last);
                    }
                    sink_last.push((t0, last));
                }
            }
        }
        if let Some(app) = thread_named(&rec, "e8-app")
            && let Some(eng) = engine_of(&rec, app)
        {
            let pops = instants(&rec, eng, Point::RingPop, 0);
            let pushes = instants(&rec, eng, Point::RingPush, 1);
            let taken = instants(&rec, app, Point::RingPop, 1);
            let posted = instants(&rec, app, Point::RingPush, 0);
            let sends = calls(&rec, eng, Point::SendCall);
            let sink_recvs = sink_eng.map_or_else(Vec::new, |se| calls(&rec, se, Point::RecvCall));
            for &(t0, t1) in &marks {
                let blocks = taken.iter().filter(|&&p| p >= t0 && p <= t1).count() as u64;
                s.sync_blocks.push(blocks);
                // The two wake-ups of this send, as the ping-pong's δ_e and
                // δ_i are cut: post → engine's pop; the engine's last push
                // before the application's first pop → that pop.
                let within = |v: &[u64], from: u64| v.iter().copied().find(|&p| p >= from && p <= t1);
                if let Some(a_push) = within(&posted, t0)
                    && let Some(e_pop) = within(&pops, a_push)
                    && let Some(a_pop) = within(&taken, e_pop)
                    && let Some(&e_push) = pushes.iter().rev().find(|&&p| p >= e_pop && p <= a_pop)
                {
                    s.sync_engine_wake.push(e_pop - a_push);
                    s.sync_wake.push(a_pop - e_push);
                }
                // The processor's one way in a synchronous send: the
                // sending engine takes the write block → the sink's engine
                // posts the message's last block (as δ_0 in the ping-pong).
                if let Some(&(_, last)) = sink_last.iter().find(|x| x.0 == t0)
                    && let Some(e_pop) = within(&pops, t0)
                    && last > e_pop
                {
                    s.sync_proc_oneway.push(last - e_pop);
                    if let Some(x) = crossing(&sends, &sink_recvs, e_pop, last) {
                        s.sync_cross.push(x);
                    }
                }
                if let Some(&pop) = pops.iter().find(|&&p| p >= t0 && p <= t1)
                    && let Some(&push) = pushes.iter().rev().find(|&&p| p >= pop && p <= t1)
                {
                    s.proc_complete.push(push - pop);
                    // Split by acknowledgement rounds: a send whose message
                    // was acknowledged in parts took a block per part.
                    // A send with no block traced (the trace lost it) is
                    // in neither: it is not known to be one round.
                    if blocks == 1 {
                        s.complete_one.push(push - pop);
                    } else if blocks > 1 {
                        s.complete_multi.push((push - pop, blocks));
                    }
                }
            }
        }
        Ok(())
    }

    /// A pipelined run of `msg` to the sink in steady state: the host keeps
    /// up to `outstanding` messages unacknowledged; after `WARM_NS` the
    /// window opens at a completion and closes at the first completion
    /// `min_ns` later. Returns (messages, wall ns, what the threads and the
    /// machine did) over the window.
    fn pipelined(&mut self, msg: &[u8], min_ns: u64) -> Result<(usize, u64, Snap), String> {
        let what = format!("E8 engine thread pipelined {} B", msg.len());
        let l = msg.len() as u64;
        // Enough in flight that the pipeline, not the host's window over a
        // completion's round trip, sets the period (Little's law: 64
        // messages of 1 B over a ~100 µs completion bound it at 1.6 µs,
        // three times the pipeline's); few enough that the queue drains
        // within milliseconds after the window.
        let outstanding = (4u64 << 20).div_ceil(l).clamp(4, 1024);
        let base = self.tx.unacked_bytes(self.tx_ctx);
        if base != 0 {
            return Err(format!("{what}: {base} B unacknowledged before the run"));
        }
        let data = Bytes::copy_from_slice(msg);
        let t_start = mono_ns();
        let mut written = 0u64;
        let mut first: Option<(u64, Snap, u64)> = None;
        let last = loop {
            let done = written - self.tx.unacked_bytes(self.tx_ctx).div_ceil(l);
            let now = mono_ns();
            match first {
                None if now - t_start >= WARM_NS && done >= 8 => first = Some((now, self.cpu(), done)),
                Some(f) if now - f.0 >= min_ns && done >= f.2 + 8 => break (now, self.cpu(), done),
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
        Ok(((last.2 - f.2) as usize, last.0 - f.0, f.1.since(&last.1)))
    }

    fn end(mut self) {
        let _ = self.pp.abort(self.pp_ctx);
        let _ = self.tx.abort(self.tx_ctx);
        let _ = self.pp.wait(Duration::from_millis(1));
        let _ = self.tx.wait(Duration::from_millis(1));
    }
}

/// The ring crossings of a traced ping-pong: the application (`a`), its
/// engine (`e`), the echo application (`pa`) and its engine (`pe`); ring
/// 0 towards an engine, 1 from it.
struct Crossings {
    a_push: Vec<u64>,
    a_pop: Vec<u64>,
    e_pop: Vec<u64>,
    e_push: Vec<u64>,
    pa_pop: Vec<u64>,
    pa_push: Vec<u64>,
    pe_pop: Vec<u64>,
    pe_push: Vec<u64>,
}

/// One round trip's crossings, in time order (ns on `CLOCK_MONOTONIC`).
#[derive(Debug, PartialEq, Eq)]
struct Chain {
    /// The application posts its message.
    a_push: u64,
    /// Its engine takes it (woken by the doorbell: δ_e).
    e_pop: u64,
    /// The echo's engine posts the message's last block (δ_0 since e_pop).
    delivered: u64,
    /// The echo application takes it (woken: δ_i).
    pa_pop: u64,
    /// The echo application posts the echo.
    pa_push: u64,
    /// Its engine takes it (δ_e).
    pe_pop: u64,
    /// The application's engine posts the echo's last block (δ_0).
    back: u64,
    /// The application takes it (δ_i).
    a_pop: u64,
}

impl Crossings {
    fn new(rec: &Recording, a: u32, e: u32, pa: u32, pe: u32) -> Crossings {
        Crossings {
            a_push: instants(rec, a, Point::RingPush, 0),
            a_pop: instants(rec, a, Point::RingPop, 1),
            e_pop: instants(rec, e, Point::RingPop, 0),
            e_push: instants(rec, e, Point::RingPush, 1),
            pa_pop: instants(rec, pa, Point::RingPop, 1),
            pa_push: instants(rec, pa, Point::RingPush, 0),
            pe_pop: instants(rec, pe, Point::RingPop, 0),
            pe_push: instants(rec, pe, Point::RingPush, 1),
        }
    }

    /// The crossings of the round trip that began at `t0`, whose write
    /// returned at `t1` and whose echo was read whole at `t2`; None when
    /// one is missing (the round trip is then not used for any crossing).
    fn chain(&self, t0: u64, t1: u64, t2: u64) -> Option<Chain> {
        let first = |v: &[u64], after: u64| v.iter().copied().find(|&p| p >= after && p <= t2);
        let last =
            |v: &[u64], after: u64, upto: u64| v.iter().rev().copied().find(|&p| p > after && p <= upto);
        let a_push = first(&self.a_push, t0).filter(|&p| p <= t1)?;
        let e_pop = first(&self.e_pop, a_push)?;
        // The echo's engine takes the echo's write only once the message
        // was delivered whole: its last push before that is the delivery.
        let pe_pop = first(&self.pe_pop, e_pop + 1)?;
        let pa_push = last(&self.pa_push, e_pop, pe_pop)?;
        let delivered = last(&self.pe_push, e_pop, pa_push)?;
        let pa_pop = first(&self.pa_pop, delivered).filter(|&p| p <= pa_push)?;
        let a_pop = first(&self.a_pop, t1.max(pe_pop))?;
        let back = last(&self.e_push, pe_pop, a_pop)?;
        Some(Chain { a_push, e_pop, delivered, pa_pop, pa_push, pe_pop, back, a_pop })
    }
}

/// The calibration sweep against two applications on their own engine
/// threads, `echo` (the ping-pong's far end) and `sink` (the synchronous
/// and pipelined sends' receiver): every length of `sizes` measured in
/// each of `rounds` rounds (lengths interleaved, in alternating order, so
/// that a change of the machine's load falls on all of them alike rather
/// than on a few), `count` round trips and synchronous sends per length in
/// all; then `windows` pipelined windows per length of ≥ `stream_ms` /
/// `windows` each (lengths interleaved, in alternating order). The
/// ping-pong and synchronous sends run under `placement.for_rounds()`,
/// the windows under `placement.for_stream()`; every mask is put back
/// when the sweep returns.
#[allow(clippy::too_many_arguments)]
pub(crate) fn sweep(
    echo: &PeerApp,
    sink: &PeerApp,
    sizes: &[usize],
    count: usize,
    stream_ms: u64,
    rounds: usize,
    probe: bool,
    placement: Placement,
    windows: usize,
) -> Result<Vec<CalibRow>, String> {
    let mut eng = Engines::new(echo.addr, sink, probe)?;
    // Pinned as `placement` says for each part; every thread's mask is put
    // back when the sweep ends (the runner's and the peers', which outlive it).
    let (pp_tid, tx_tid) = (eng.pp_tid.clone(), eng.tx_tid.clone());
    let (apps, mine) = ([echo.app_tid.as_ref(), sink.app_tid.as_ref()], [pp_tid.as_ref(), tx_tid.as_ref()]);
    let peers = [echo.engine_tid(), sink.engine_tid()];
    // Errors name the plan's value (`hosts_free` pins as `hosts`).
    let plan = placement;
    let placement = placement.here();
    let pin = |p: Placement| match p {
        Placement::Hosts => Pinned::apply(p, plan, &mine, &[apps, peers].concat()),
        _ => Pinned::apply(p, plan, &apps, &[mine, peers].concat()),
    };
    let mut pinned = pin(placement.for_rounds())?;
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
            let from = s.marks();
            eng.ping_pong(m, n, s, keep)?;
            eng.sync_sends(m, n, s, keep, sink)?;
            if keep {
                s.round_done(from);
            }
        }
    }
    let stream_placement = placement.for_stream();
    if stream_placement != placement.for_rounds() {
        pinned.release();
        pinned = pin(stream_placement)?;
    }
    let windows = windows.max(1);
    let window_ns = (stream_ms * 1_000_000).div_ceil(windows as u64);
    for w in 0..windows {
        let order: Vec<usize> =
            if w % 2 == 0 { (0..sizes.len()).collect() } else { (0..sizes.len()).rev().collect() };
        for i in order {
            let (k, ns, d) = eng.pipelined(&msgs[i], window_ns)?;
            let s = &mut samples[i];
            if k > 0 {
                for (name, v) in
                    [(series::ASYNC_PERIOD, ns), (series::PROC_PERIOD, d.eng), (series::ALL_CPU, d.all)]
                {
                    s.repeats.entry(name.into()).or_default().push(v as f64 / k as f64);
                }
            }
            s.stream_msgs += k;
            s.stream_ns += ns;
            s.stream_cpu_ns += d.eng;
            s.stream_all_cpu_ns += d.all;
            s.stream_host_cpu_ns += d.host;
            s.stream_sink_cpu_ns += d.sink_app;
            // The two CPUs' pinned threads (the sink's engine is what is
            // left of `all`): split, the applications against the engines;
            // hosts, the measuring side against the peers.
            let first = match stream_placement {
                Placement::Split => d.host + d.sink_app,
                _ => d.host + d.eng,
            };
            s.stream_busiest_ns += first.max(d.all.saturating_sub(first));
            for j in 0..3 {
                s.stream_sched[j] += d.sched[j];
                s.stream_ticks[j] += d.ticks[j];
            }
        }
    }
    // Every mask back while the engines' threads still run (once they
    // end, their ids may be reused); on an error above, `pinned` is
    // dropped before `eng`, declared earlier.
    pinned.release();
    eng.end();
    // The probe's local share of the ringing writes (NaN without probe).
    let frac = |v: &[Vec<u64>; 2]| {
        let n = v[0].len() + v[1].len();
        if n == 0 { f64::NAN } else { v[1].len() as f64 / n as f64 }
    };
    // A probe's value, None without the probe or without a sample (JSON
    // has no NaN).
    let probed = |v: f64| v.is_finite().then_some(v);
    // Pipelined: pooled over the windows, time over messages.
    let per_msg_f = |ns: f64, k: usize| if k == 0 { f64::NAN } else { ns / k as f64 };
    let per_msg = |ns: u64, k: usize| per_msg_f(ns as f64, k);
    let tick_ns = 1e9 / ticks_per_s();
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    Ok(sizes
        .iter()
        .zip(samples)
        .map(|(&size, s)| CalibRow {
            kind: "calibration".into(),
            size,
            l_c: std::mem::size_of::<ToEngine>(),
            l_a: std::mem::size_of::<FromEngine>(),
            proc_delay_ns: mean(&s.proc_oneway),
            proc_period_ns: per_msg(s.stream_cpu_ns, s.stream_msgs),
            proc_complete_ns: mean(&s.proc_complete),
            write_ns: mean(&s.write),
            doorbell_ns: mean(&s.doorbell),
            all_cpu_ns: per_msg(s.stream_all_cpu_ns, s.stream_msgs),
            cores,
            mss: ContextConfig::stream().mss,
            read_ns: mean(&s.read),
            wake_ns: mean(&s.wake),
            wake_cpu_ns: mean(&s.wake_cpu),
            engine_wake_ns: mean(&s.engine_wake),
            delay_ns: mean(&s.rtt) / 2.0,
            sync_period_ns: mean(&s.sync_period),
            async_period_ns: per_msg(s.stream_ns, s.stream_msgs),
            host_send_ns: mean(&s.host_send),
            sync_wakeups: s.sync_sleeps as f64 / s.sync_sends.max(1) as f64,
            host_recv_ns: mean(&s.host_recv),
            send_write_cpu_ns: mean(&s.send_write_cpu),
            send_wait_cpu_ns: mean(&s.send_wait_cpu),
            pp_sleeps: s.pp_sleeps as f64 / s.pp_rts.max(1) as f64,
            sync_blocks: mean(&s.sync_blocks),
            pp_blocks: mean(&s.pp_blocks),
            clock_read_ns: mean(&s.clock_read) / 32.0,
            pp_waits: mean(&s.pp_waits),
            sync_sink_cpu_ns: per_msg(s.sync_sink_cpu.0, s.sync_sink_cpu.1 as usize),
            sync_engines_cpu_ns: per_msg(s.sync_engines_cpu.0, s.sync_engines_cpu.1 as usize),
            sync_oneway_ns: mean(&s.sync_oneway),
            sync_mid_wake: frac_of(s.sync_mid_wake),
            pp_mid_wake: frac_of(s.pp_mid_wake),
            sync_sink_wake_ns: mean(&s.sync_sink_wake),
            sync_proc_oneway_ns: mean(&s.sync_proc_oneway),
            pp_cross_out_ns: mean(&s.pp_cross[0]),
            pp_cross_back_ns: mean(&s.pp_cross[1]),
            sync_cross_ns: mean(&s.sync_cross),
            probe_pp_local_ns: probed(mean(&s.probe[0][1])),
            probe_pp_remote_ns: probed(mean(&s.probe[0][0])),
            probe_pp_local: probed(frac(&s.probe[0])),
            probe_sync_local_ns: probed(mean(&s.probe[1][1])),
            probe_sync_remote_ns: probed(mean(&s.probe[1][0])),
            probe_sync_local: probed(frac(&s.probe[1])),
            proc_complete_one_ns: mean(&s.complete_one),
            proc_complete_multi_ns: mean(&s.complete_multi.iter().map(|m| m.0).collect::<Vec<_>>()),
            multi_blocks: mean(&s.complete_multi.iter().map(|m| m.1).collect::<Vec<_>>()),
            multi_sends: s.complete_multi.len(),
            sync_engine_wake_ns: mean(&s.sync_engine_wake),
            sync_wake_ns: mean(&s.sync_wake),
            pp_rings: s.pp_rings.0 as f64 / s.pp_rings.1.max(1) as f64,
            sync_rings: s.sync_rings.0 as f64 / s.sync_rings.1.max(1) as f64,
            pipe_host_cpu_ns: per_msg(s.stream_host_cpu_ns, s.stream_msgs),
            pipe_sink_cpu_ns: per_msg(s.stream_sink_cpu_ns, s.stream_msgs),
            pipe_runq_ns: per_msg(s.stream_sched[1], s.stream_msgs),
            pipe_slices: s.stream_sched[2] as f64 / s.stream_msgs.max(1) as f64,
            pipe_other_cpu_ns: per_msg_f(
                s.stream_ticks[0] as f64 * tick_ns - s.stream_all_cpu_ns as f64,
                s.stream_msgs,
            ),
            pipe_idle_ns: per_msg_f(s.stream_ticks[1] as f64 * tick_ns, s.stream_msgs),
            pipe_busiest_cpu_ns: (stream_placement != Placement::Free)
                .then(|| per_msg(s.stream_busiest_ns, s.stream_msgs))
                .filter(|v| v.is_finite()),
            sink_reply_hold_us: Some(sink.reply_hold_us),
            pipe_steal_ns: per_msg_f(s.stream_ticks[2] as f64 * tick_ns, s.stream_msgs),
            pipe_tick_ns: per_msg_f((windows * cores) as f64 * tick_ns, s.stream_msgs),
            count: s.rtt.len(),
            stream: s.stream_msgs,
            stream_ms: s.stream_ns as f64 / 1e6,
            disturbed: s.disturbed,
            repeats: s.repeats,
            placement: Some(placement),
        })
        .collect())
}

/// 32 reads of this thread's CPU clock back to back: the CPU time they
/// add over 32, in all (the monitor's cost per read is this over 32). The
/// first read only opens the interval; each later one adds one whole read
/// (the part of a read after it samples the clock, and the next one's
/// part before), which is what a read adds to any interval it bounds.
fn clock_reads_32() -> u64 {
    let first = thread_cpu_ns();
    let mut last = first;
    for _ in 0..32 {
        last = thread_cpu_ns();
    }
    last.saturating_sub(first)
}

/// The blocks the application popped after its write returned (`t1`) up
/// to the echo read whole (`t2`): the receive's data blocks, one per
/// packet (an acknowledgement popped before the write returned is not the
/// receive's).
fn blocks_taken(pops: &[u64], t1: u64, t2: u64) -> u64 {
    pops.iter().filter(|&&p| p > t1 && p <= t2).count() as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use xk_trace::{Event, ThreadEvents};

    #[test]
    fn a_receive_counts_the_blocks_between_the_write_and_the_echo() {
        // Popped: an acknowledgement at 100, at the write's return (110),
        // three echo blocks, and the next round's block after the read.
        let pops = [100, 110, 300, 350, 400, 401];
        assert_eq!(blocks_taken(&pops, 110, 400), 3);
        assert_eq!(blocks_taken(&pops, 90, 400), 5);
        assert_eq!(blocks_taken(&pops, 400, 500), 1);
        assert_eq!(blocks_taken(&[], 0, 500), 0);
    }

    #[test]
    fn a_round_trip_is_cut_at_its_ring_crossings() {
        let ev = |t: u64, point: Point, ring: u32| Event::instant(t, point, 0, 0, ring);
        let mk = |tid: u32, evs: Vec<Event>| ThreadEvents { tid, name: "t".into(), events: evs };
        let rec = Recording {
            threads: vec![
                // The application: posts at 101, takes the echo at 400.
                mk(1, vec![ev(101, Point::RingPush, 0), ev(400, Point::RingPop, 1)]),
                // Its engine: takes at 120, an acknowledgement at 200 (not
                // the echo), the echo's two blocks at 350 and 380.
                mk(
                    2,
                    vec![
                        ev(120, Point::RingPop, 0),
                        ev(200, Point::RingPush, 1),
                        ev(350, Point::RingPush, 1),
                        ev(380, Point::RingPush, 1),
                    ],
                ),
                // The echo application: takes at 240 (and a second block
                // at 241), posts the echo at 250.
                mk(
                    3,
                    vec![ev(240, Point::RingPop, 1), ev(241, Point::RingPop, 1), ev(250, Point::RingPush, 0)],
                ),
                // Its engine: delivers in two blocks (150, 220), takes the
                // echo at 270.
                mk(
                    4,
                    vec![
                        ev(150, Point::RingPush, 1),
                        ev(220, Point::RingPush, 1),
                        ev(270, Point::RingPop, 0),
                    ],
                ),
            ],
            dropped: 0,
        };
        let c = Crossings::new(&rec, 1, 2, 3, 4);
        let want = Chain {
            a_push: 101,
            e_pop: 120,
            delivered: 220,
            pa_pop: 240,
            pa_push: 250,
            pe_pop: 270,
            back: 380,
            a_pop: 400,
        };
        assert_eq!(c.chain(100, 110, 410), Some(want));
        // The echo not read within the round trip: nothing.
        assert_eq!(c.chain(100, 110, 390), None);
    }

    /// The real thing, small: every quantity measured and positive.
    #[test]
    fn calibration_measures_on_loopback() {
        let _one = crate::e8_measure::TRACE_TESTS.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let (echo, sink) = (PeerApp::echo().unwrap(), PeerApp::sink(None).unwrap());
        assert_eq!(sink.tids.len(), 2, "{:?}", sink.tids);
        // Every thread's mask before: the sweep pins (two CPUs) and must
        // give each back — this thread's and the peers', which outlive it.
        let mask =
            |t: &str| nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(t.parse().unwrap())).ok();
        let tids: Vec<String> = [nix::unistd::gettid().as_raw().to_string()]
            .into_iter()
            .chain(echo.tids.clone())
            .chain(sink.tids.clone())
            .collect();
        let before: Vec<_> = tids.iter().map(|t| mask(t)).collect();
        // Four rounds of six, three windows: each repeated series has a
        // value per round or window (a round whose every operation was
        // disturbed has none, hence at least two).
        let rows = sweep(&echo, &sink, &[1, 8_192], 24, 30, 4, true, Placement::default(), 3).unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(tids.iter().map(|t| mask(t)).collect::<Vec<_>>(), before, "{tids:?}");
        for r in &rows {
            assert_eq!(r.placement, Some(Placement::default().here()), "{r:?}");
            for name in crate::e8::model::REPEATED {
                let n = r.repeats.get(name).map_or(0, Vec::len);
                assert!(n >= 2, "{} B {name}: {n} values, {:?}", r.size, r.repeats);
                assert!(crate::e8::model::repeat_se(r, name).is_some(), "{} B {name}", r.size);
            }
        }
        // The engine's default hold, recorded in every row.
        assert!(rows.iter().all(|r| r.sink_reply_hold_us == Some(50)));
        for r in &rows {
            for (name, v) in [
                ("proc_delay", r.proc_delay_ns),
                ("proc_period", r.proc_period_ns),
                ("proc_complete", r.proc_complete_ns),
                ("write", r.write_ns),
                ("all_cpu", r.all_cpu_ns),
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
            // The doorbell is measured over the writes that rang: none
            // may have (the engine still awake on a busy machine), and
            // then it has no value rather than a made-up one.
            if r.pp_rings > 0.0 {
                assert!(r.doorbell_ns > 0.0 && r.doorbell_ns < 1e9, "{r:?}");
            } else {
                assert!(r.doorbell_ns.is_nan(), "{r:?}");
            }
            // /proc/stat's figures: steal never negative, a resolution.
            assert!(r.pipe_steal_ns >= 0.0 && r.pipe_tick_ns > 0.0, "{r:?}");
            // Every round trip measured, disturbed or kept.
            assert_eq!(r.disturbed.measured, 2 * 24);
            assert!(r.count <= 24 && r.count + r.disturbed.disturbed >= 24, "{r:?}");
            // Application to application costs more than processor to
            // processor; a window of ≥ 10 ms of pipelined messages.
            assert!(r.delay_ns > r.proc_delay_ns, "{r:?}");
            assert!(r.stream > 8 && r.stream_ms >= 9.0, "{r:?}");
            // Each synchronous send takes at least its acknowledgment
            // block and rings at most one doorbell; the pipelined
            // application spends CPU on every message.
            assert!(r.sync_blocks >= 1.0 && (0.0..=1.0).contains(&r.sync_rings), "{r:?}");
            assert!(r.pipe_host_cpu_ns > 0.0 && r.pipe_slices >= 0.0, "{r:?}");
            assert!(r.pipe_sink_cpu_ns > 0.0, "{r:?}");
            // The monitor's clock read (a system call: tens of ns at the
            // least), one wait or more per receive, the sink's receives.
            assert!(r.clock_read_ns > 10.0 && r.clock_read_ns < 100_000.0, "{r:?}");
            assert!(r.pp_waits >= 1.0, "{r:?}");
            assert!(r.sync_sink_cpu_ns > 0.0, "{r:?}");
            // Session 20: the sends' one way to the sink's copy-out lies
            // inside their period; the engines worked; the mid-message
            // wake-ups are fractions.
            assert!(r.sync_oneway_ns > 0.0 && r.sync_oneway_ns < r.sync_period_ns, "{r:?}");
            assert!(r.sync_engines_cpu_ns > 0.0 && r.sync_sink_wake_ns > 0.0, "{r:?}");
            assert!(r.sync_proc_oneway_ns > 0.0 && r.sync_proc_oneway_ns < r.sync_oneway_ns, "{r:?}");
            // Session 21: each socket crossing was recorded. (That one lies
            // inside its one way holds by construction — the crossing is cut
            // from inside the one way — so it is not asserted: it cannot fail.)
            assert!(r.sync_cross_ns > 0.0, "{r:?}");
            assert!(r.pp_cross_out_ns > 0.0 && r.pp_cross_back_ns > 0.0, "{r:?}");
            assert!((0.0..=1.0).contains(&r.sync_mid_wake) && (0.0..=1.0).contains(&r.pp_mid_wake), "{r:?}");
            // A ping-pong receive takes one data block per packet: 1 B one,
            // 8 KB ⌈8192/mss⌉ (an occasional block more or fewer: a mean).
            let want = if r.mss > 0 { r.size.div_ceil(r.mss) as f64 } else { 1.0 };
            assert!(
                (r.pp_blocks - want).abs() < 0.2,
                "{} B: {} blocks per receive, want {want}",
                r.size,
                r.pp_blocks
            );
            assert!(r.send_write_cpu_ns > 0.0 && r.send_wait_cpu_ns > 0.0, "{r:?}");
            // The placement probe saw the ringing writes, each local or not.
            assert!(r.probe_sync_local.is_some_and(|f| (0.0..=1.0).contains(&f)), "{r:?}");
        }
    }
}
