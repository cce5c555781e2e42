//! How the link-model drivers ([`crate::relay`], [`crate::netns`]) meet their
//! release instants on a shared, busy machine.
//!
//! A release is late for four reasons, and each has its remedy here:
//!
//! * **The wake-up is late.** `poll`/`futex` timeouts carry the thread's
//!   timer slack (50 µs by default) and socket timeouts round to the kernel
//!   tick (4 ms at 250 Hz). [`Pacer`] sleeps on a `timerfd` (an exact
//!   hrtimer, no slack) in one `epoll` with the input descriptors, and
//!   [`prepare_thread`] sets the thread's timer slack to 1 ns for any other
//!   timed wait.
//! * **The thread is not running when its timer fires.** On two cores shared
//!   with both endpoints and whatever else runs, a normal thread waits for
//!   the scheduler's next slice — milliseconds. [`prepare_thread`] asks for
//!   `SCHED_FIFO`, so the forwarding thread preempts ordinary threads the
//!   moment its timer fires; without the privilege it says why and carries
//!   on at normal priority (the report says which it got).
//! * **The (virtual) CPU is asleep.** On this VM an idle vCPU halts, and
//!   waking it for a timer costs 80–200 µs more than waking a busy one.
//!   The endpoints' CPUs matter too: the kernel work inside a TUN write or
//!   loopback send wakes the receiver, slowly on a halted vCPU. [`KeepWarm`]
//!   pins the forwarding thread to its CPU and runs a `SCHED_IDLE` spinner
//!   on each CPU while releases are near: they take only time no other
//!   thread wants (the kernel runs `SCHED_IDLE` threads only on an
//!   otherwise idle CPU and preempts them at once), and keep the CPUs from
//!   halting. The spinner on the forwarding thread's own CPU naps while
//!   that thread is awake most of the time ([`BUSY_SHARE`]): then its CPU
//!   does not halt anyway, and an always-runnable fair-class thread there
//!   brings in the kernel's fair server, which stops the real-time thread
//!   for 50 ms.
//! * **The loop is busy elsewhere.** The drivers read at most one batch of
//!   arrivals between looks at the release queue, so a burst of arrivals
//!   does not hold up a release that falls due meanwhile.
//!
//! What is left — the time from the hrtimer interrupt until the thread runs —
//! is hidden by a bounded spin: the pacer wakes a margin before the deadline
//! and polls (clock and input, without blocking) for the rest. The margin
//! follows the wake-up lateness the pacer sees — at least `spin`, at most
//! [`MAX_SPIN`] —, because that lateness depends on how busy the machine is.
//! The spin is paid at every release at real-time priority, so it is
//! budgeted: at most [`SPIN_SHARE`] of the wall-clock time. At high packet
//! rates the spin windows would otherwise join up and the thread would hold
//! a whole core; past the budget the pacer sleeps to the deadline itself and
//! accepts the wake-up latency.
//!
//! [`LoopStats`] records what happened (wake-up lateness, how late each
//! release was found due and how long it took to hand over, time spun, the
//! thread's CPU time, read batch sizes), so a run that missed its instants
//! says where the time went.

use std::io;
use std::os::fd::BorrowedFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;

use nix::errno::Errno;
use nix::sys::epoll::{Epoll, EpollCreateFlags, EpollEvent, EpollFlags, EpollTimeout};
use nix::sys::time::TimeSpec;
use nix::sys::timerfd::{ClockId, Expiration, TimerFd, TimerFlags, TimerSetTimeFlags};
use serde_json::json;
use xk_time::{Duration, Instant, duration_nanos};

use crate::clock::Clock;

/// Default least spin margin before each release: with `SCHED_FIFO` and a
/// warm CPU the thread runs 15–50 µs after its timer here. At 45 Mbit/s,
/// 100 ms each way (about 5,600 releases/s in both directions), the spin
/// costs 5–8 % of one core (docs/PERF.md, "Release error at 45 Mbit/s").
pub const DEFAULT_SPIN: Duration = Duration::from_micros(30);

/// Longest spin margin, whatever the caller asks or the lateness suggests:
/// a spinning `SCHED_FIFO` thread takes its core from everything else.
pub const MAX_SPIN: Duration = Duration::from_micros(100);

/// Share of the wall-clock time the pacer may spend spinning (one core's
/// tenth): the endpoints on a 2-core machine keep the rest.
pub const SPIN_SHARE: f64 = 0.1;

/// Most spin time saved up while the loop sleeps long (so a quiet spell
/// does not buy a long stretch of spinning afterwards).
const SPIN_BURST: Duration = Duration::from_millis(2);

/// Added to the recent wake-up lateness for the margin: the clock read and
/// `epoll_wait` between waking and checking the deadline.
const MARGIN_SLACK_NS: u64 = 5_000;

/// `SCHED_FIFO` priority of the forwarding thread: above every normal
/// thread, below the kernel's own real-time threads (watchdog, migration at 99).
pub const FIFO_PRIORITY: u8 = 10;

/// How the forwarding thread is scheduled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Scheduling {
    /// `SCHED_FIFO` at this priority.
    Fifo(u8),
    /// The normal time-sharing policy, and why (not asked, or refused).
    Normal(String),
}

impl std::fmt::Display for Scheduling {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Scheduling::Fifo(p) => write!(f, "SCHED_FIFO priority {p}"),
            Scheduling::Normal(why) => write!(f, "normal ({why})"),
        }
    }
}

/// Prepares the calling thread for release timing: timer slack 1 ns and,
/// if `realtime`, `SCHED_FIFO` at [`FIFO_PRIORITY`]. Never fails: what
/// could not be had is in the answer.
pub fn prepare_thread(realtime: bool) -> Scheduling {
    // Timer slack lets the kernel fire a sleeping thread's timers up to this
    // late to batch wake-ups; 1 ns is the smallest it accepts (0 means "the
    // default"). Failing to set it costs accuracy only.
    let _ = nix::sys::prctl::set_timerslack(1);
    if !realtime {
        return Scheduling::Normal("real-time priority not asked for".into());
    }
    use thread_priority::{
        RealtimeThreadSchedulePolicy, ThreadPriority, ThreadPriorityValue, ThreadSchedulePolicy,
        set_thread_priority_and_policy, thread_native_id,
    };
    let value = match ThreadPriorityValue::try_from(FIFO_PRIORITY) {
        Ok(v) => v,
        Err(e) => return Scheduling::Normal(format!("SCHED_FIFO priority {FIFO_PRIORITY}: {e}")),
    };
    let policy = ThreadSchedulePolicy::Realtime(RealtimeThreadSchedulePolicy::Fifo);
    match set_thread_priority_and_policy(thread_native_id(), ThreadPriority::Crossplatform(value), policy) {
        Ok(()) => Scheduling::Fifo(FIFO_PRIORITY),
        Err(thread_priority::Error::OS(code)) if code == Errno::EPERM as i32 => Scheduling::Normal(
            "SCHED_FIFO not permitted: needs root or CAP_SYS_NICE (or an RLIMIT_RTPRIO); \
             release timing then depends on the load of the machine"
                .into(),
        ),
        Err(e) => Scheduling::Normal(format!("SCHED_FIFO refused: {e}")),
    }
}

/// What the forwarding thread may ask of the machine (both by default).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pacing {
    /// Ask for `SCHED_FIFO` ([`prepare_thread`]).
    pub realtime: bool,
    /// Run [`KeepWarm`] spinners, when `SCHED_FIFO` was granted (pinning
    /// a normal-priority thread would keep it from moving away from load).
    pub keep_warm: bool,
}

impl Default for Pacing {
    fn default() -> Self {
        Pacing { realtime: true, keep_warm: true }
    }
}

/// Releases nearer than this keep the [`KeepWarm`] spinner spinning;
/// farther off it naps, so an idle link costs no CPU.
const HOT_WINDOW: Duration = Duration::from_millis(2);

/// `SCHED_IDLE` threads spinning on the CPUs while releases are near (see
/// the module documentation), the forwarding thread pinned to the CPU it
/// started on; stopped when dropped.
///
/// Every CPU of the process is kept warm, not only the forwarding thread's:
/// a TUN write or loopback send wakes the receiving endpoint, and waking
/// one on a halted vCPU made the kernel's work inside the write take
/// 450–630 µs at p99 on a quiet machine (40 µs on a busy one), enough for
/// the loop to fall behind. At most [`MAX_WARM_CPUS`] spinners.
pub struct KeepWarm {
    stop: Arc<AtomicBool>,
    hot: Arc<AtomicBool>,
    /// The forwarding thread is busy enough to keep its own CPU awake: the
    /// spinner there naps (see [`BUSY_SHARE`]).
    own_busy: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
    /// The CPU the forwarding thread is pinned to.
    pub cpu: usize,
    /// The CPUs with a spinner.
    pub warm: Vec<usize>,
}

/// Most CPUs kept warm (a spinner each).
pub const MAX_WARM_CPUS: usize = 8;

/// Share of a [`DUTY_WINDOW`] the forwarding thread spends awake (not
/// blocked in `epoll_wait`) above which the spinner on its own CPU naps.
///
/// Why: a `SCHED_FIFO` thread that keeps its CPU mostly busy while a
/// normal-class thread there is always runnable — the `SCHED_IDLE` spinner
/// is one: `SCHED_IDLE` is a weight of the fair class, not a class of its
/// own — makes the kernel's fair server (a deadline server, 50 ms of every
/// second for the fair class, Linux 6.12+) step in: it preempts the
/// real-time thread and runs the fair class for up to its 50 ms budget,
/// which the spinner, always runnable, helps use up. At 1 Gbit/s without
/// segmentation offload (XTP over raw IP: about 2.5 reads and one write
/// per packet) the thread was awake 0.8 of the time and every run had
/// 50–55 ms stalls (docs/PERF.md, "Session 18: the 1 Gbit/s column over
/// raw IP", with the scheduler trace). A thread that busy wakes up again
/// within a few µs of blocking, so its CPU has no time to halt and needs no
/// spinner.
///
/// Why one half: the measured loads were far from it on both sides (awake
/// about 0.8 at 1 Gbit/s over raw IP, under 0.2 at 45 Mbit/s), so any
/// value between works for them; one half was not tuned, and a load near
/// it is untested. There is no hysteresis: a load near one half can flip
/// the nap on and off every window, which [`LoopStats::busy_flips`]
/// counts.
pub const BUSY_SHARE: f64 = 0.5;

/// How often [`BUSY_SHARE`] is judged: short enough to follow a transfer
/// starting and stopping, long enough to span many releases.
pub const DUTY_WINDOW: Duration = Duration::from_millis(20);

impl KeepWarm {
    /// Pins the calling thread to the CPU it is running on and starts a
    /// spinner on each CPU it may use. Err says why not (then nothing runs).
    pub fn start() -> Result<KeepWarm, String> {
        use nix::sched::{CpuSet, sched_getaffinity, sched_getcpu, sched_setaffinity};
        use nix::unistd::Pid;
        let cpu = sched_getcpu().map_err(|e| format!("cannot tell this thread's CPU: {e}"))?;
        // Pid 0: the calling thread.
        let allowed =
            sched_getaffinity(Pid::from_raw(0)).map_err(|e| format!("cannot read CPU affinity: {e}"))?;
        let cpus: Vec<usize> = (0..CpuSet::count())
            .filter(|&c| allowed.is_set(c).unwrap_or(false))
            .take(MAX_WARM_CPUS)
            .collect();
        let one = |c: usize| {
            let mut set = CpuSet::new();
            set.set(c).map(|()| set).map_err(|e| format!("CPU {c}: {e}"))
        };
        sched_setaffinity(Pid::from_raw(0), &one(cpu)?)
            .map_err(|e| format!("cannot pin to CPU {cpu}: {e}"))?;
        let stop = Arc::new(AtomicBool::new(false));
        let hot = Arc::new(AtomicBool::new(false));
        let own_busy = Arc::new(AtomicBool::new(false));
        let mut warm = KeepWarm { stop, hot, own_busy, threads: Vec::new(), cpu, warm: cpus.clone() };
        let (tx, rx) = std::sync::mpsc::channel::<Result<(), String>>();
        for c in cpus {
            let set = one(c)?;
            let (stop, hot, tx) = (warm.stop.clone(), warm.hot.clone(), tx.clone());
            // Only the forwarding thread's own CPU naps while that thread is busy.
            let busy = (c == cpu).then(|| warm.own_busy.clone());
            let spawned = std::thread::Builder::new().name(format!("xk-keep-warm-{c}")).spawn(move || {
                use thread_priority::{
                    NormalThreadSchedulePolicy, ThreadPriority, ThreadSchedulePolicy,
                    set_thread_priority_and_policy, thread_native_id,
                };
                let ready = sched_setaffinity(Pid::from_raw(0), &set)
                    .map_err(|e| format!("cannot pin a spinner to CPU {c}: {e}"))
                    .and_then(|()| {
                        // Never spin at a priority that competes with anyone:
                        // without SCHED_IDLE the spinner does not run at all.
                        let idle = ThreadSchedulePolicy::Normal(NormalThreadSchedulePolicy::Idle);
                        set_thread_priority_and_policy(thread_native_id(), ThreadPriority::Min, idle)
                            .map_err(|e| format!("SCHED_IDLE refused: {e}"))
                    });
                let ok = ready.is_ok();
                let _ = tx.send(ready);
                if !ok {
                    return;
                }
                while !stop.load(Ordering::Relaxed) {
                    let napping = busy.as_ref().is_some_and(|b| b.load(Ordering::Relaxed));
                    if hot.load(Ordering::Relaxed) && !napping {
                        for _ in 0..256 {
                            std::hint::spin_loop();
                        }
                    } else {
                        std::thread::sleep(std::time::Duration::from_micros(200));
                    }
                }
            });
            match spawned {
                Ok(t) => warm.threads.push(t),
                Err(e) => {
                    warm.stop();
                    return Err(format!("cannot start a spinner thread: {e}"));
                }
            }
        }
        drop(tx);
        for _ in 0..warm.threads.len() {
            match rx.recv() {
                Ok(Ok(())) => {}
                Ok(Err(why)) => {
                    warm.stop();
                    return Err(why);
                }
                Err(_) => {
                    warm.stop();
                    return Err("a spinner thread ended at start".into());
                }
            }
        }
        Ok(warm)
    }

    fn stop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Drop for KeepWarm {
    fn drop(&mut self) {
        self.stop();
    }
}

/// What the forwarding loop did, for finding where time went.
#[derive(Clone, Debug, Default)]
pub struct LoopStats {
    /// How the thread was scheduled.
    pub scheduling: Option<Scheduling>,
    /// Whether a [`KeepWarm`] spinner ran, and where (or why not).
    pub keep_warm: Option<String>,
    /// Least spin margin before each release, as applied (after [`MAX_SPIN`]).
    pub spin: Duration,
    /// Sum of the margins used (ns), for their mean.
    pub margin_ns: u64,
    /// Waits that used a margin.
    pub margins: u64,
    /// How late the thread ran after each timer expiry (ns, in order).
    pub wake_late_ns: Vec<u64>,
    /// Time spent spinning in all (ns).
    pub spin_ns: u64,
    /// Waits that slept to the deadline without spinning because the spin
    /// budget ([`SPIN_SHARE`]) was spent.
    pub spin_skipped: u64,
    /// Length of the run (ns).
    pub run_ns: u64,
    /// CPU time the forwarding thread used (user + system, ns), spinning
    /// and the kernel's work in its system calls included.
    pub cpu_ns: u64,
    /// Non-empty reads of arrivals, and the datagrams/packets they returned.
    pub reads: u64,
    /// Packets read in all.
    pub read_packets: u64,
    /// Largest batch taken in one turn of the loop.
    pub max_read_batch: u64,
    /// For each release: how late the loop found it due (ns) — the part
    /// of its release error spent before the loop looked at the queue
    /// (late wake-up, or busy reading).
    pub found_late_ns: Vec<u64>,
    /// For each release: the rest of its release error (ns) after any
    /// hold — the sends ahead of it in the same turn (and, in the relay,
    /// its own).
    pub handover_ns: Vec<u64>,
    /// netns only: for each release, how long it was held back after it
    /// fell due so that later packets could leave in the same write (ns;
    /// up to the batch span).
    pub held_ns: Vec<u64>,
    /// netns only: how long each TUN write took (ns) — the kernel running
    /// the other namespace's stack inside it.
    pub write_ns: Vec<u64>,
    /// [`DUTY_WINDOW`]s judged, and those in which the thread was awake
    /// more than [`BUSY_SHARE`] (busy: the spinner on its own CPU naps
    /// through the next window — if there is one; none runs without
    /// `SCHED_FIFO`, e.g. without root, or with `--no-keep-warm`).
    pub duty_windows: u64,
    /// See [`LoopStats::duty_windows`].
    pub busy_windows: u64,
    /// Windows judged busy after one judged idle or the other way round:
    /// how often the nap turned on or off (or would have, without a
    /// spinner). Many flips mean a load near [`BUSY_SHARE`].
    pub busy_flips: u64,
    /// `timerfd_settime` calls (a wait for the instant the timer is
    /// already armed for makes none).
    pub timer_sets: u64,
}

impl LoopStats {
    /// p99 of wake-up lateness, found-late, hand-over (with the TUN write
    /// time where there is one) and the batching hold, in µs: where a late
    /// run's time went.
    pub fn p99s_us(&self) -> (f64, f64, f64, f64) {
        let [wake] = Self::quantiles_us(&self.wake_late_ns, [0.99]);
        let [found] = Self::quantiles_us(&self.found_late_ns, [0.99]);
        let [hand] = Self::quantiles_us(&self.handover_ns, [0.99]);
        let [write] = Self::quantiles_us(&self.write_ns, [0.99]);
        let [held] = Self::quantiles_us(&self.held_ns, [0.99]);
        (wake, found, hand.max(write), held)
    }

    /// Quantiles `qs` of `v`, in µs.
    fn quantiles_us<const N: usize>(v: &[u64], qs: [f64; N]) -> [f64; N] {
        let mut v = v.to_vec();
        v.sort_unstable();
        qs.map(|q| xk_stats::closest(&v, q).map_or(0.0, |x| x as f64 / 1e3))
    }

    /// How many timer wake-ups came at least `late` after their timer, and
    /// the latest one.
    pub fn stalls(&self, late: Duration) -> (usize, Duration) {
        let late = duration_nanos(late);
        let n = self.wake_late_ns.iter().filter(|&&ns| ns >= late).count();
        let worst = self.wake_late_ns.iter().copied().max().unwrap_or(0);
        (n, Duration::from_nanos(worst))
    }

    /// Closes the record of a run that began at `start`: its length and
    /// the calling thread's CPU time.
    pub fn finish(&mut self, clock: &Clock, start: Instant) {
        self.run_ns = duration_nanos(clock.now().saturating_since(start));
        use nix::sys::resource::{UsageWho, getrusage};
        if let Ok(u) = getrusage(UsageWho::RUSAGE_THREAD) {
            let ns =
                |t: nix::sys::time::TimeVal| t.tv_sec() as u64 * 1_000_000_000 + t.tv_usec() as u64 * 1000;
            self.cpu_ns = ns(u.user_time()) + ns(u.system_time());
        }
    }

    /// Records one release: due at `at`, found due by the loop at `seen`,
    /// handed over at `sent`.
    pub fn release(&mut self, at: Instant, seen: Instant, sent: Instant) {
        self.found_late_ns.push(duration_nanos(seen.saturating_since(at)));
        self.handover_ns.push(duration_nanos(sent.saturating_since(seen.max(at))));
    }

    /// Records one release that may have been held for a batch: due at
    /// `at`, found due at `seen`, its batch flushed at `flushed`, its own
    /// write started at `sent`. The hold (`flushed` less when it was due
    /// and found) is counted apart from the hand-over after it.
    pub fn release_held(&mut self, at: Instant, seen: Instant, flushed: Instant, sent: Instant) {
        let ready = seen.max(at);
        self.found_late_ns.push(duration_nanos(seen.saturating_since(at)));
        self.held_ns.push(duration_nanos(flushed.saturating_since(ready)));
        self.handover_ns.push(duration_nanos(sent.saturating_since(flushed.max(ready))));
    }

    /// Records one turn's batch of `n` arrivals.
    pub fn read_batch(&mut self, n: usize) {
        if n > 0 {
            self.reads += 1;
            self.read_packets += n as u64;
            self.max_read_batch = self.max_read_batch.max(n as u64);
        }
    }

    /// The statistics as a JSON object (times in µs).
    pub fn to_json(&self) -> serde_json::Value {
        let [p50, p99, max] = Self::quantiles_us(&self.wake_late_ns, [0.5, 0.99, 1.0]);
        let [found50, found99] = Self::quantiles_us(&self.found_late_ns, [0.5, 0.99]);
        let [hand50, hand99] = Self::quantiles_us(&self.handover_ns, [0.5, 0.99]);
        let [write50, write99] = Self::quantiles_us(&self.write_ns, [0.5, 0.99]);
        let [held50, held99] = Self::quantiles_us(&self.held_ns, [0.5, 0.99]);
        json!({
            "scheduling": self.scheduling.as_ref().map(ToString::to_string),
            "keep_warm": self.keep_warm,
            "spin_us": self.spin.as_secs_f64() * 1e6,
            "timer_wakes": self.wake_late_ns.len(),
            "wake_late_p50_us": p50,
            "wake_late_p99_us": p99,
            "wake_late_max_us": max,
            "spin_skipped": self.spin_skipped,
            "mean_margin_us": if self.margins == 0 { 0.0 } else { self.margin_ns as f64 / self.margins as f64 / 1e3 },
            "thread_cpu_fraction": if self.run_ns == 0 { 0.0 } else { self.cpu_ns as f64 / self.run_ns as f64 },
            "spin_cpu_fraction": if self.run_ns == 0 { 0.0 } else { self.spin_ns as f64 / self.run_ns as f64 },
            "found_late_p50_us": found50,
            "found_late_p99_us": found99,
            "handover_p50_us": hand50,
            "handover_p99_us": hand99,
            "held_p50_us": held50,
            "held_p99_us": held99,
            "write_p50_us": write50,
            "write_p99_us": write99,
            "reads": self.reads,
            "mean_read_batch": if self.reads == 0 { 0.0 } else { self.read_packets as f64 / self.reads as f64 },
            "max_read_batch": self.max_read_batch,
            "duty_windows": self.duty_windows,
            "busy_windows": self.busy_windows,
            "busy_flips": self.busy_flips,
            "timer_sets": self.timer_sets,
        })
    }
}

/// Why [`Pacer::wait_until`] returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Woke {
    /// The deadline has come.
    Due,
    /// An input descriptor is readable (the deadline may not have come).
    Readable,
}

/// `epoll` token of the timer; input descriptor `i` gets `i + 1`.
const TIMER: u64 = 0;

/// Sleeps until a deadline or input, whichever comes first: a `timerfd`
/// armed `spin` before the deadline and the input descriptors in one
/// `epoll`, then a bounded spin.
pub struct Pacer {
    epoll: Epoll,
    timer: TimerFd,
    spin: Duration,
    /// Spin time that may still be spent (ns), refilled at [`SPIN_SHARE`].
    budget_ns: u64,
    /// When the budget was last refilled.
    refilled: Option<Instant>,
    /// Recent wake-up lateness (ns): follows a later wake-up at once and
    /// decays toward earlier ones, so the margin covers the recent worst.
    late_est_ns: u64,
    events: [EpollEvent; 8],
    warm: Option<KeepWarm>,
    /// The instant the timer was last armed for, until a wait sees it
    /// fire. A wait for that instant while it is still ahead (the last wait
    /// ended on input) leaves the timer armed instead of paying a
    /// `timerfd_settime` again. The expiry may also have passed unseen (the
    /// loop was busy past it); then this is stale but never reused, since a
    /// wait arms only instants still ahead, and arming another instant
    /// clears the left-over expiry.
    armed: Option<Instant>,
    /// How busy the thread is (see [`BUSY_SHARE`]).
    duty: Duty,
    /// What the waits did.
    pub stats: LoopStats,
}

impl Pacer {
    /// A pacer watching `inputs` for readability. The descriptors must stay
    /// open as long as the pacer lives (the drivers own both; the epoll set
    /// drops a closed one by itself).
    pub fn new(inputs: &[BorrowedFd<'_>], spin: Duration) -> io::Result<Pacer> {
        let epoll = Epoll::new(EpollCreateFlags::EPOLL_CLOEXEC).map_err(io::Error::from)?;
        let timer =
            TimerFd::new(ClockId::CLOCK_MONOTONIC, TimerFlags::TFD_NONBLOCK | TimerFlags::TFD_CLOEXEC)
                .map_err(io::Error::from)?;
        epoll.add(&timer, EpollEvent::new(EpollFlags::EPOLLIN, TIMER)).map_err(io::Error::from)?;
        for (i, fd) in inputs.iter().enumerate() {
            let ev = EpollEvent::new(EpollFlags::EPOLLIN, i as u64 + 1);
            epoll.add(fd, ev).map_err(io::Error::from)?;
        }
        let spin = spin.min(MAX_SPIN);
        let stats = LoopStats { spin, ..LoopStats::default() };
        let budget_ns = duration_nanos(SPIN_BURST);
        Ok(Pacer {
            epoll,
            timer,
            spin,
            budget_ns,
            refilled: None,
            late_est_ns: 0,
            events: [EpollEvent::empty(); 8],
            warm: None,
            armed: None,
            duty: Duty::default(),
            stats,
        })
    }

    /// Applies `pacing` to the calling thread — the scheduling policy, and a
    /// [`KeepWarm`] spinner on its CPU when asked and the policy is
    /// `SCHED_FIFO` —, recording what it got in the stats.
    pub fn prepare(&mut self, pacing: Pacing) {
        let scheduling = prepare_thread(pacing.realtime);
        let fifo = matches!(scheduling, Scheduling::Fifo(_));
        self.stats.scheduling = Some(scheduling);
        self.stats.keep_warm = Some(if !pacing.keep_warm {
            "off: not asked for".into()
        } else if !fifo {
            "off: needs SCHED_FIFO".into()
        } else {
            self.keep_warm()
        });
    }

    fn keep_warm(&mut self) -> String {
        match KeepWarm::start() {
            Ok(w) => {
                let text =
                    format!("SCHED_IDLE spinner on CPU {} (the forwarding thread pinned there)", w.cpu);
                self.warm = Some(w);
                text
            }
            Err(why) => format!("off: {why}"),
        }
    }

    /// Waits until `deadline` or until an input is readable. Sleeps in the
    /// kernel until `spin` before the deadline, then polls without blocking.
    pub fn wait_until(&mut self, clock: &Clock, deadline: Instant) -> io::Result<Woke> {
        let now = clock.now();
        if let Some(w) = &self.warm {
            w.hot.store(deadline.saturating_since(now) <= HOT_WINDOW, Ordering::Relaxed);
        }
        if now >= deadline {
            return Ok(Woke::Due);
        }
        let since = self.refilled.map_or(0, |t| duration_nanos(now.saturating_since(t)));
        self.budget_ns =
            (self.budget_ns + (since as f64 * SPIN_SHARE) as u64).min(duration_nanos(SPIN_BURST));
        self.refilled = Some(now);
        // The margin: the recent wake-up lateness plus a little, within
        // [spin, MAX_SPIN]; none at all once the spin budget is spent.
        let want =
            (self.late_est_ns + MARGIN_SLACK_NS).clamp(duration_nanos(self.spin), duration_nanos(MAX_SPIN));
        let spin = if self.budget_ns >= want {
            self.stats.margin_ns += want;
            self.stats.margins += 1;
            Duration::from_nanos(want)
        } else {
            self.stats.spin_skipped += 1;
            Duration::ZERO
        };
        let wake_at = Instant::from_nanos(deadline.as_nanos().saturating_sub(duration_nanos(spin)));
        if wake_at > now {
            if self.armed != Some(wake_at) {
                let rel = wake_at.saturating_since(now);
                let ts = TimeSpec::from_duration(rel);
                // Arming also clears an expiry left over from an earlier wait
                // that ended on input instead.
                self.timer
                    .set(Expiration::OneShot(ts), TimerSetTimeFlags::empty())
                    .map_err(io::Error::from)?;
                self.armed = Some(wake_at);
                self.stats.timer_sets += 1;
            }
            // Only the time inside epoll_wait counts as asleep, not the
            // arming before it.
            let asleep = clock.now();
            let (fired, readable) = self.poll(EpollTimeout::NONE)?;
            let woke = clock.now();
            self.duty.slept(duration_nanos(woke.saturating_since(asleep)));
            if fired {
                self.armed = None;
                let _ = self.timer.wait(); // consume the expiry (non-blocking)
                let late = duration_nanos(woke.saturating_since(wake_at));
                self.stats.wake_late_ns.push(late);
                // Wake-ups later than the cap (a stalled machine) would only
                // pin the margin at the cap: count them at the cap.
                let late = late.min(duration_nanos(MAX_SPIN));
                self.late_est_ns = if late > self.late_est_ns {
                    late
                } else {
                    self.late_est_ns - (self.late_est_ns - late) / 32
                };
            }
            if readable {
                return Ok(Woke::Readable);
            }
            if !fired {
                return Ok(Woke::Readable); // interrupted: let the caller look again
            }
        }
        // The final stretch: watch the clock and the inputs without sleeping.
        let spin_from = clock.now();
        let woke = loop {
            let now = clock.now();
            if now >= deadline {
                break Woke::Due;
            }
            if self.poll(EpollTimeout::ZERO)?.1 {
                break Woke::Readable;
            }
            std::hint::spin_loop();
        };
        let spun = duration_nanos(clock.now().saturating_since(spin_from));
        self.stats.spin_ns += spun;
        self.budget_ns = self.budget_ns.saturating_sub(spun);
        Ok(woke)
    }

    /// Called once per turn of the forwarding loop, whether or not the
    /// turn waits (a saturated loop reads turn after turn without waiting):
    /// closes the [`DUTY_WINDOW`] if it is over and tells the spinner on
    /// this thread's CPU whether to nap through the next ([`BUSY_SHARE`]).
    pub fn turn(&mut self, now: Instant) {
        let Some(busy) = self.duty.judge(now) else {
            return;
        };
        self.stats.duty_windows += 1;
        self.stats.busy_windows += u64::from(busy.busy);
        self.stats.busy_flips += u64::from(busy.flipped);
        if let Some(w) = &self.warm {
            w.own_busy.store(busy.busy, Ordering::Relaxed);
        }
    }

    /// One `epoll_wait`: (timer fired, an input is readable).
    fn poll(&mut self, timeout: EpollTimeout) -> io::Result<(bool, bool)> {
        let n = match self.epoll.wait(&mut self.events, timeout) {
            Ok(n) => n,
            Err(Errno::EINTR) => 0,
            Err(e) => return Err(e.into()),
        };
        let fired = self.events[..n].iter().any(|e| e.data() == TIMER);
        let readable = self.events[..n].iter().any(|e| e.data() != TIMER);
        Ok((fired, readable))
    }
}

/// The forwarding thread's time asleep in [`DUTY_WINDOW`]s: whether it was
/// busy in the last one closed.
#[derive(Clone, Debug, Default)]
struct Duty {
    /// Start of the current window (none before the first turn).
    since: Option<Instant>,
    /// Time blocked in `epoll_wait` in it (ns).
    slept_ns: u64,
    /// The last closed window's verdict.
    busy: bool,
}

/// A closed [`DUTY_WINDOW`]'s verdict.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Verdict {
    busy: bool,
    /// Differs from the window before's (the first window counts as after
    /// an idle one).
    flipped: bool,
}

impl Duty {
    /// Adds time spent blocked.
    fn slept(&mut self, ns: u64) {
        self.slept_ns += ns;
    }

    /// At `now`: the verdict on the window if it is over (a new one starts
    /// at `now`), else none.
    fn judge(&mut self, now: Instant) -> Option<Verdict> {
        let Some(since) = self.since else {
            self.since = Some(now);
            return None;
        };
        let span = duration_nanos(now.saturating_since(since));
        if span < duration_nanos(DUTY_WINDOW) {
            return None;
        }
        let busy = is_busy(self.slept_ns, span);
        let flipped = busy != self.busy;
        self.busy = busy;
        self.since = Some(now);
        self.slept_ns = 0;
        Some(Verdict { busy, flipped })
    }
}

/// Whether a thread that slept `slept_ns` of `span_ns` was awake more than
/// [`BUSY_SHARE`] of it.
fn is_busy(slept_ns: u64, span_ns: u64) -> bool {
    span_ns > 0 && (span_ns.saturating_sub(slept_ns)) as f64 > BUSY_SHARE * span_ns as f64
}

#[cfg(test)]
mod tests {
    use std::net::UdpSocket;
    use std::os::fd::AsFd;

    use super::*;

    #[test]
    fn spin_is_capped() {
        let p = Pacer::new(&[], Duration::from_millis(5)).unwrap();
        assert_eq!(p.stats.spin, MAX_SPIN);
    }

    /// Timed waits end on time: not early, and late only by the machine's
    /// wake-up latency (bound generous for a loaded CI machine at normal
    /// priority; the real measurements are in docs/PERF.md).
    #[test]
    fn waits_end_at_their_deadline() {
        let scheduling = prepare_thread(false);
        assert!(matches!(scheduling, Scheduling::Normal(_)));
        let clock = Clock::new();
        let mut p = Pacer::new(&[], DEFAULT_SPIN).unwrap();
        let mut late = Vec::new();
        for i in 0..200u64 {
            let deadline = clock.now() + Duration::from_micros(300 + 7 * i);
            assert_eq!(p.wait_until(&clock, deadline).unwrap(), Woke::Due);
            let now = clock.now();
            assert!(now >= deadline, "woke {:?} early", deadline.saturating_since(now));
            late.push(now.saturating_since(deadline));
        }
        late.sort_unstable();
        let p50 = late[late.len() / 2];
        eprintln!("lateness p50 {p50:?} max {:?}; {}", late[late.len() - 1], p.stats.to_json());
        assert!(p50 < Duration::from_millis(2), "lateness p50 {p50:?}");
        assert!(p.stats.wake_late_ns.len() >= 150, "most waits should sleep on the timer");
    }

    /// The spinner starts on this thread's CPU (any user may run a
    /// `SCHED_IDLE` thread), pins this thread there, and stops when dropped.
    #[test]
    fn keep_warm_pins_and_stops() {
        let w = KeepWarm::start().expect("SCHED_IDLE and pinning are open to every user");
        assert_eq!(nix::sched::sched_getcpu().unwrap(), w.cpu);
        w.hot.store(true, Ordering::Relaxed);
        std::thread::sleep(std::time::Duration::from_millis(5));
        drop(w); // joins the spinner: a hang here fails the test by timeout
    }

    /// A wait that ended on input leaves the timer armed; the next wait for
    /// the same instant uses it instead of arming it again (one
    /// `timerfd_settime` fewer per wait that ended on input and was followed
    /// by one for the same instant), and still ends on time.
    #[test]
    fn a_timer_armed_for_the_same_instant_is_not_armed_again() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let clock = Clock::new();
        let mut p = Pacer::new(&[rx.as_fd()], Duration::ZERO).unwrap();
        let deadline = clock.now() + Duration::from_millis(50);
        tx.send_to(b"x", rx.local_addr().unwrap()).unwrap();
        assert_eq!(p.wait_until(&clock, deadline).unwrap(), Woke::Readable);
        let mut buf = [0u8; 8];
        rx.recv(&mut buf).unwrap();
        assert_eq!(p.stats.timer_sets, 1);
        assert_eq!(p.wait_until(&clock, deadline).unwrap(), Woke::Due);
        assert!(clock.now() >= deadline);
        assert_eq!(p.stats.timer_sets, 1, "the second wait re-armed the timer for the same instant");
        // A new instant arms it again.
        let later = clock.now() + Duration::from_millis(1);
        assert_eq!(p.wait_until(&clock, later).unwrap(), Woke::Due);
        assert_eq!(p.stats.timer_sets, 2);
    }

    /// The threshold alone: awake more than [`BUSY_SHARE`] of a window is
    /// busy (that the spinner then naps is [`Pacer::turn`]'s part).
    #[test]
    fn busy_means_awake_more_than_the_busy_share() {
        assert!(is_busy(100, 1_000), "awake 0.9");
        assert!(!is_busy(600, 1_000), "awake 0.4");
        assert!(!is_busy(0, 0), "an empty window is not busy");
    }

    /// The window logic with made-up instants: no verdict before a
    /// [`DUTY_WINDOW`] has passed; the time asleep in the window decides;
    /// each window starts afresh; flips are told.
    #[test]
    fn duty_windows_judge_the_time_asleep_in_each() {
        let t0 = Instant::from_nanos(1_000_000_000);
        let ms = |n: u64| t0 + Duration::from_millis(n);
        let mut d = Duty::default();
        assert_eq!(d.judge(t0), None, "the first turn opens the first window");
        // Asleep 15 of 20 ms: awake 0.25.
        d.slept(duration_nanos(Duration::from_millis(15)));
        assert_eq!(d.judge(ms(19)), None, "19 ms is not yet a window");
        assert_eq!(d.judge(ms(20)), Some(Verdict { busy: false, flipped: false }));
        // Asleep 2 of the next 20 ms: awake 0.9; the 15 ms before no longer count.
        d.slept(duration_nanos(Duration::from_millis(2)));
        assert_eq!(d.judge(ms(40)), Some(Verdict { busy: true, flipped: true }));
        // Nothing slept: a loop that never waits is busy window after window.
        assert_eq!(d.judge(ms(60)), Some(Verdict { busy: true, flipped: false }));
        // Asleep 15 of 25 ms: awake 0.4.
        d.slept(duration_nanos(Duration::from_millis(15)));
        assert_eq!(d.judge(ms(85)), Some(Verdict { busy: false, flipped: true }));
    }

    /// A loop that never waits (reads turn after turn) is judged busy
    /// through [`Pacer::turn`] alone, and the flag of the spinner on its CPU
    /// is set; a flip back is counted.
    #[test]
    fn a_loop_that_never_waits_is_busy() {
        let mut p = Pacer::new(&[], Duration::ZERO).unwrap();
        p.warm = Some(KeepWarm::start().expect("SCHED_IDLE and pinning are open to every user"));
        let t0 = Instant::from_nanos(1_000_000_000);
        for i in 0..=10u64 {
            p.turn(t0 + Duration::from_millis(5 * i));
        }
        assert_eq!((p.stats.duty_windows, p.stats.busy_windows, p.stats.busy_flips), (2, 2, 1));
        assert!(p.warm.as_ref().unwrap().own_busy.load(Ordering::Relaxed));
        p.duty.slept(duration_nanos(Duration::from_millis(20)));
        p.turn(t0 + Duration::from_millis(70));
        assert_eq!((p.stats.duty_windows, p.stats.busy_windows, p.stats.busy_flips), (3, 2, 2));
        assert!(!p.warm.as_ref().unwrap().own_busy.load(Ordering::Relaxed));
    }

    /// Input ends a wait before its deadline.
    #[test]
    fn readable_input_ends_the_wait() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let clock = Clock::new();
        let mut p = Pacer::new(&[rx.as_fd()], Duration::ZERO).unwrap();
        let to = rx.local_addr().unwrap();
        let sender = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(20));
            tx.send_to(b"x", to).unwrap();
        });
        let t0 = clock.now();
        let deadline = t0 + Duration::from_secs(5);
        // The timer is armed at most this far ahead by the drivers; loop as they do.
        let woke = loop {
            match p.wait_until(&clock, deadline.min(clock.now() + Duration::from_millis(10))).unwrap() {
                Woke::Readable => break Woke::Readable,
                Woke::Due if clock.now() >= deadline => break Woke::Due,
                Woke::Due => {}
            }
        };
        sender.join().unwrap();
        assert_eq!(woke, Woke::Readable);
        assert!(clock.now().saturating_since(t0) < Duration::from_secs(2));
    }
}
