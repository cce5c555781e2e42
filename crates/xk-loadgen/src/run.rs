//! A run: GAR → SCHED → ADAPT, on one thread (the seed's cooperative
//! design) or on two (GAR on one, SCHED + ADAPT on the other, joined by a
//! lock-free single-producer single-consumer queue — the seed's future
//! work), and the honest account of it.
//!
//! For every request the run knows its specified time t_i (from the model)
//! and its execution time τ_i: the moment the adapter's call returned. The
//! miss time τ_i − t_i is never negative (SCHED never starts a request
//! early); under overload requests are executed late and counted late, not
//! skipped — unless a drop bound is set, and then they are counted dropped.
//!
//! Every run is bounded: by a request count, by the model time (`duration`:
//! no request specified at or after it is executed) and by the wall clock
//! (`duration` plus 10 % and 100 ms: a P_max run, or one that fell behind,
//! ends then).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde::{Deserialize, Serialize};

use crate::adapt::{AdapterSpec, Counts};
use crate::clock::RunClock;
use crate::gar::{Gar, Request};
use crate::model::Model;
use crate::sched::{Realtime, Wait};
use crate::stats::{Histogram, Summary};

/// Capacity of the queue between GAR and ADAPT (requests).
const QUEUE: usize = 1 << 16;

/// How a run is done.
#[derive(Clone, Debug)]
pub struct RunConfig {
    /// The adapter.
    pub adapter: AdapterSpec,
    /// 1: GAR, SCHED and ADAPT on one thread; 2: GAR on its own thread.
    pub threads: u8,
    /// How SCHED waits.
    pub wait: Wait,
    /// Rehearse the release path shortly before each request
    /// ([`Wait::until_warm`]); off only to measure what it does.
    pub warm: bool,
    /// Time the run with `CLOCK_MONOTONIC` even where the TSC would do
    /// ([`crate::clock`]); only to compare the two. Runs with transmit
    /// timestamps always use it: the kernel stamps in `CLOCK_REALTIME`,
    /// which runs at `CLOCK_MONOTONIC`'s rate, and the TSC's calibrated
    /// rate would drift from it by ~0.2 ppm, a share of a µs-sized miss.
    pub os_clock: bool,
    /// Most requests taken from the model.
    pub count: u64,
    /// Model time bound, ns.
    pub duration_ns: u64,
    /// A miss above this is late, ns.
    pub late_ns: u64,
    /// Requests later than this when due are dropped (and counted), ns.
    pub drop_late_ns: Option<u64>,
    /// Real-time measures for the SCHED + ADAPT thread.
    pub rt: Realtime,
    /// CPU for the GAR thread (two threads only).
    pub gar_cpu: Option<usize>,
    /// Seed of the users' random streams.
    pub seed: u64,
}

/// A run's result.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct RunReport {
    /// The model's name.
    pub model: String,
    /// The adapter.
    pub adapter: String,
    /// Target address.
    pub to: Option<String>,
    /// 1 or 2.
    pub threads: u8,
    /// How SCHED waited.
    pub wait: String,
    /// What the real-time measures came to (SCHED_FIFO, CPU).
    pub scheduling: String,
    /// Seed.
    pub seed: u64,
    /// Predicted rate (requests/s) from the model; None when unbounded
    /// (inter-arrival 0) or not computable.
    pub specified_rate_per_s: Option<f64>,
    /// Requests executed.
    pub requests: u64,
    /// Requests dropped by the drop bound.
    pub dropped: u64,
    /// What the adapter counted (sent, refused, bytes, calls).
    pub counts: Counts,
    /// Wall time from the start to the last execution, s.
    pub seconds: f64,
    /// Requests executed per second of wall time: P_max when the
    /// specified inter-arrival time is 0.
    pub rate_per_s: f64,
    /// Miss times τ_i − t_i: mean (VZ), median, p99, max, late share, CDF.
    pub miss: Summary,
    /// Requests executed before their time (must be 0).
    pub early: u64,
    /// Why the run ended.
    pub stopped: String,
    /// Two threads: how often ADAPT found the queue empty while GAR was
    /// still running (GAR could not keep up).
    pub queue_empty: u64,
    /// The model walk's own error, if it stopped one.
    pub model_error: Option<String>,
    /// The clock t_i and τ_i were read from ([`crate::clock`]).
    pub clock: String,
    /// That clock's reading minus `CLOCK_MONOTONIC`'s at the run's end, ns
    /// (what kernel timestamps are off by when compared with τ_i).
    pub clock_drift_ns: i64,
}

/// Where ADAPT takes requests from.
trait Source {
    /// Whether the next request is drawn before waiting for the current
    /// one's time (see `execute`).
    const DRAW_BEFORE_WAIT: bool;
    fn next(&mut self) -> Option<Request>;
}

/// GAR bounded by count and model time (one thread).
struct Bounded {
    gar: Gar,
    left: u64,
    duration_ns: u64,
    why: &'static str,
}

impl Bounded {
    #[inline]
    fn next(&mut self) -> Option<Request> {
        if self.left == 0 {
            self.why = "count reached";
            return None;
        }
        let Some(r) = self.gar.next_request() else {
            self.why = if self.gar.error().is_some() { "model error" } else { "every user terminated" };
            return None;
        };
        if r.t_ns >= self.duration_ns {
            self.why = "duration reached";
            return None;
        }
        self.left -= 1;
        Some(r)
    }
}

impl Source for Bounded {
    const DRAW_BEFORE_WAIT: bool = true;
    #[inline]
    fn next(&mut self) -> Option<Request> {
        Bounded::next(self)
    }
}

/// The consumer end of the queue (two threads).
struct Queue {
    rx: rtrb::Consumer<Request>,
    empty: u64,
}

impl Source for Queue {
    // The queue's `next` spins until GAR has pushed: drawing early would
    // make request i wait for GAR to produce request i + 1 whenever the
    // queue runs empty — GAR's work inside the miss again.
    const DRAW_BEFORE_WAIT: bool = false;
    #[inline]
    fn next(&mut self) -> Option<Request> {
        loop {
            if let Ok(r) = self.rx.pop() {
                return Some(r);
            }
            if self.rx.is_abandoned() {
                // Everything pushed before the producer went is visible now.
                return self.rx.pop().ok();
            }
            self.empty += 1;
            std::hint::spin_loop();
        }
    }
}

/// Progress, about once a second: (requests executed, wall ns).
pub type Progress<'a> = &'a mut (dyn FnMut(u64, u64) + Send);

/// What the execution loop measured.
struct Measured {
    hist: Histogram,
    requests: u64,
    dropped: u64,
    early: u64,
    last_ns: u64,
    /// The last miss recorded (the next one usually falls in its bucket).
    last_miss: u64,
    wall_stop: bool,
    counts: Counts,
    fatal: Option<String>,
}

/// SCHED + ADAPT: takes requests, waits for each one's time, executes due
/// requests in batches, records misses.
fn execute<S: Source>(
    src: &mut S,
    cfg: &RunConfig,
    clock: &RunClock,
    stop: &AtomicBool,
    mut progress: Option<Progress<'_>>,
) -> Result<Measured, String> {
    let mut adapter = cfg.adapter.open().map_err(|e| e.to_string())?;
    // The wall clock at t = 0, for kernel timestamps (CLOCK_REALTIME): read
    // next to `start`'s monotonic reading, shifted by the time since.
    let since = clock.stamp() as i128;
    let real = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i128);
    adapter.begin(real - since);
    let max_batch = adapter.max_batch();
    let batching = adapter.batching();
    // The wall clock ends the run too: a P_max run (every t_i = 0) never
    // reaches the model-time bound, and a run that fell behind must not run
    // on unbounded. A stall near the end (preemption) gets 10 % + 100 ms of
    // grace so the requests specified before `duration` still go out.
    let wall_limit = cfg.duration_ns.saturating_add(cfg.duration_ns / 10 + 100_000_000);
    let mut m = Measured {
        hist: Histogram::default(),
        requests: 0,
        dropped: 0,
        early: 0,
        last_ns: 0,
        last_miss: 0,
        wall_stop: false,
        counts: Counts::default(),
        fatal: None,
    };
    let mut batch: Vec<Request> = Vec::with_capacity(max_batch);
    let mut now = 0u64;
    let mut next_progress = 1_000_000_000u64;
    let mut peek = src.next();
    while let Some(first) = peek.take() {
        // On one thread the next request is drawn before waiting, not
        // after: GAR's work (walking the automaton, sampling distributions)
        // would otherwise sit between t_i and the call, in every miss time.
        if S::DRAW_BEFORE_WAIT {
            peek = src.next();
        }
        if first.t_ns > now {
            if first.t_ns > now + 1_000_000 {
                adapter.idle();
            }
            now = if cfg.warm {
                cfg.wait.until_warm(clock, first.t_ns, || {
                    batch.push(first);
                    batch.clear();
                    std::hint::black_box(cfg.drop_late_ns);
                    m.hist.touch(m.last_miss);
                    adapter.warm();
                })
            } else {
                cfg.wait.until(clock, first.t_ns)
            };
        }
        if now > wall_limit {
            m.wall_stop = true;
            break;
        }
        if let Some(bound) = cfg.drop_late_ns
            && now - first.t_ns > bound
        {
            m.dropped += 1;
            if !S::DRAW_BEFORE_WAIT {
                peek = src.next();
            }
            continue;
        }
        batch.push(first);
        if !S::DRAW_BEFORE_WAIT {
            peek = src.next();
        }
        let limit = batching.limit(&first, max_batch);
        while batch.len() < limit {
            match peek {
                Some(r) if r.t_ns <= now && batching.joins(&first, &r) => {
                    batch.push(r);
                    peek = src.next();
                }
                _ => break,
            }
        }
        if let Err(e) = adapter.execute(&batch) {
            m.fatal = Some(e.to_string());
            break;
        }
        now = clock.stamp();
        // Every request of the batch gets its own τ_i − t_i; they share
        // τ_i, so the histogram keeps sum and maximum once per batch.
        m.early += m.hist.record_since(now, batch.iter().map(|r| r.t_ns));
        if let Some(last) = batch.last() {
            m.last_miss = now.saturating_sub(last.t_ns);
        }
        m.requests += batch.len() as u64;
        m.last_ns = now;
        batch.clear();
        if now >= next_progress {
            next_progress = now + 1_000_000_000;
            if let Some(p) = progress.as_mut() {
                p(m.requests, now);
            }
            if stop.load(Ordering::Relaxed) {
                break;
            }
        }
    }
    m.counts = adapter.finish();
    Ok(m)
}

/// Runs `model` as `cfg` says. `stop` ends it early (Ctrl-C).
pub fn run(
    model: &Model,
    cfg: &RunConfig,
    stop: Arc<AtomicBool>,
    progress: Option<Progress<'_>>,
) -> Result<RunReport, String> {
    if !(1..=2).contains(&cfg.threads) {
        return Err(format!("--threads {}: 1 or 2", cfg.threads));
    }
    let specified = crate::analytic::predict(model).ok().map(|p| p.rate_per_s).filter(|r| r.is_finite());
    let mut report = RunReport {
        model: model.name.clone(),
        adapter: cfg.adapter.kind.name().to_string(),
        to: cfg.adapter.to.map(|a| a.to_string()),
        threads: cfg.threads,
        wait: cfg.wait.name(),
        seed: cfg.seed,
        specified_rate_per_s: specified,
        ..RunReport::default()
    };
    let gar = Gar::new(model.clone(), cfg.seed);
    let (m, why, model_error) = if cfg.threads == 1 {
        report.scheduling = crate::sched::apply(&cfg.rt)?;
        let mut src = Bounded { gar, left: cfg.count, duration_ns: cfg.duration_ns, why: "" };
        let clock = RunClock::start(cfg.os_clock || cfg.adapter.tx_timestamps);
        let m = execute(&mut src, cfg, &clock, &stop, progress)?;
        (report.clock, report.clock_drift_ns) = (clock.name(), clock.drift_ns());
        (m, src.why.to_string(), src.gar.error().map(str::to_string))
    } else {
        let (mut tx, rx) = rtrb::RingBuffer::<Request>::new(QUEUE);
        let gar_stop = Arc::new(AtomicBool::new(false));
        let gar_rt = Realtime { fifo: false, cpu: cfg.gar_cpu };
        let (count, duration_ns) = (cfg.count, cfg.duration_ns);
        let gs = gar_stop.clone();
        let producer = std::thread::Builder::new()
            .name("loadgen-gar".into())
            .spawn(move || -> Result<(String, Option<String>), String> {
                crate::sched::apply(&gar_rt)?;
                let mut src = Bounded { gar, left: count, duration_ns, why: "" };
                'outer: while let Some(r) = src.next() {
                    let mut r = r;
                    loop {
                        match tx.push(r) {
                            Ok(()) => break,
                            Err(rtrb::PushError::Full(back)) => {
                                if gs.load(Ordering::Relaxed) {
                                    break 'outer;
                                }
                                r = back;
                                std::hint::spin_loop();
                            }
                        }
                    }
                }
                Ok((src.why.to_string(), src.gar.error().map(str::to_string)))
            })
            .map_err(|e| format!("cannot start the GAR thread: {e}"))?;
        report.scheduling = crate::sched::apply(&cfg.rt)?;
        if let Some(c) = cfg.gar_cpu {
            report.scheduling += &format!("; GAR on cpu {c}");
        }
        let mut src = Queue { rx, empty: 0 };
        let clock = RunClock::start(cfg.os_clock || cfg.adapter.tx_timestamps);
        let m = execute(&mut src, cfg, &clock, &stop, progress);
        (report.clock, report.clock_drift_ns) = (clock.name(), clock.drift_ns());
        // Whatever ended ADAPT, GAR must not wait on a full queue forever.
        gar_stop.store(true, Ordering::Relaxed);
        drop(src.rx);
        let (why, err) = producer.join().map_err(|_| "the GAR thread panicked".to_string())??;
        report.queue_empty = src.empty;
        (m?, why, err)
    };
    report.requests = m.requests;
    report.dropped = m.dropped;
    report.early = m.early;
    report.seconds = m.last_ns as f64 / 1e9;
    report.rate_per_s = if m.last_ns > 0 { m.requests as f64 / report.seconds } else { 0.0 };
    report.miss = m.hist.summary(cfg.late_ns);
    report.counts = m.counts;
    report.model_error = model_error;
    report.stopped = if let Some(f) = m.fatal {
        format!("adapter failed: {f}")
    } else if m.wall_stop {
        "duration reached (wall clock)".into()
    } else if stop.load(Ordering::Relaxed) {
        "stopped".into()
    } else {
        why
    };
    Ok(report)
}

impl RunConfig {
    /// A configuration with the usual defaults: one thread, busy wait, a
    /// million requests, 10 s.
    pub fn new(adapter: AdapterSpec) -> RunConfig {
        RunConfig {
            adapter,
            threads: 1,
            wait: Wait::Busy,
            warm: true,
            os_clock: false,
            count: 1_000_000,
            duration_ns: 10_000_000_000,
            late_ns: 1_000,
            drop_late_ns: None,
            rt: Realtime::default(),
            gar_cpu: None,
            seed: 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adapt::Kind;

    fn spec(kind: Kind) -> AdapterSpec {
        AdapterSpec { kind, to: None, xtp_port: 9, tx_timestamps: false }
    }

    #[test]
    fn null_runs_are_bounded_and_never_early() {
        for threads in [1, 2] {
            let mut cfg = RunConfig::new(spec(Kind::Null));
            cfg.threads = threads;
            cfg.count = 200_000;
            let r = run(&Model::constant(0, 64), &cfg, Arc::new(AtomicBool::new(false)), None).unwrap();
            assert_eq!(r.requests, 200_000, "{r:?}");
            assert_eq!(r.early, 0);
            assert_eq!(r.stopped, "count reached");
            assert!(r.rate_per_s > 0.0);
            assert_eq!(r.miss.n, 200_000);
        }
    }

    #[test]
    fn paced_runs_hold_their_schedule() {
        // 10 µs gaps for 20 ms of model time: 2,000 requests, none early.
        let mut cfg = RunConfig::new(spec(Kind::Null1));
        cfg.duration_ns = 20_000_000;
        let r = run(&Model::constant(10_000, 64), &cfg, Arc::new(AtomicBool::new(false)), None).unwrap();
        assert_eq!(r.requests, 2_000, "{r:?}");
        assert_eq!(r.stopped, "duration reached");
        assert!(r.seconds >= 0.019, "{}", r.seconds);
        assert_eq!(r.early, 0);
    }

    #[test]
    fn late_requests_can_be_dropped_and_are_counted() {
        let mut cfg = RunConfig::new(spec(Kind::Null));
        cfg.wait = Wait::Sleep;
        cfg.duration_ns = 5_000_000;
        cfg.drop_late_ns = Some(0);
        // 100 ns gaps under sleep: nearly everything is late by more than 0.
        let r = run(&Model::constant(100, 64), &cfg, Arc::new(AtomicBool::new(false)), None).unwrap();
        // The wall clock may end the run before the model time does (both
        // are 5 ms); whatever was taken is either executed or dropped.
        assert!(r.requests + r.dropped <= 50_000 && r.requests + r.dropped > 1_000, "{r:?}");
        assert!(r.dropped > 0, "{r:?}");
    }
}

#[cfg(test)]
mod io_tests {
    use super::*;
    use crate::adapt::Kind;
    use crate::sink::{Proto, Sink, SinkConfig};
    use std::time::Duration;

    /// What one adapter sent at 20 µs gaps arrives whole at a loopback sink.
    fn through_sink(kind: Kind, proto: Proto, n: u64) -> (RunReport, crate::sink::SinkReport) {
        let cfg = SinkConfig {
            proto,
            xtp_port: 9,
            duration: Duration::from_secs(10),
            idle: Duration::from_millis(500),
            count: n,
        };
        // The XTP listener lives on one thread: bind it there.
        let (tx, rx) = std::sync::mpsc::channel();
        let h = std::thread::spawn(move || {
            let sink = Sink::bind("127.0.0.1:0".parse().unwrap(), cfg).unwrap();
            tx.send(sink.local_addr().unwrap()).unwrap();
            sink.run(Arc::new(AtomicBool::new(false))).unwrap()
        });
        let addr = rx.recv().unwrap();
        let mut rc = RunConfig::new(AdapterSpec { kind, to: Some(addr), xtp_port: 9, tx_timestamps: false });
        rc.count = n;
        let r = run(&Model::constant(20_000, 100), &rc, Arc::new(AtomicBool::new(false)), None).unwrap();
        (r, h.join().unwrap())
    }

    #[test]
    fn udp_adapters_deliver_every_request() {
        for kind in [Kind::Udp, Kind::UdpMmsg, Kind::UdpGso] {
            let (r, s) = through_sink(kind, Proto::Udp, 2_000);
            assert_eq!(r.counts.sent, 2_000, "{kind:?}: {r:?}");
            assert_eq!(s.received, 2_000, "{kind:?}: {s:?}");
            assert_eq!((s.lost, s.bytes), (0, 200_000), "{kind:?}");
        }
    }

    #[test]
    fn tcp_and_xtp_stream_deliver_every_byte() {
        let (r, s) = through_sink(Kind::Tcp, Proto::Tcp, 500);
        assert_eq!((r.counts.sent, s.bytes), (500, 50_000), "{s:?}");
        let (r, s) = through_sink(Kind::XtpStream, Proto::XtpStream, 200);
        assert_eq!((r.counts.sent, s.received, s.bytes), (200, 200, 20_000), "{r:?} {s:?}");
    }

    #[test]
    fn kernel_transmit_timestamps_are_paired_with_requests() {
        let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut rc = RunConfig::new(AdapterSpec {
            kind: Kind::Udp,
            to: Some(sock.local_addr().unwrap()),
            xtp_port: 9,
            tx_timestamps: true,
        });
        rc.count = 500;
        let r = run(&Model::constant(20_000, 64), &rc, Arc::new(AtomicBool::new(false)), None).unwrap();
        let tx = r.counts.tx_miss.expect("timestamps asked for");
        assert!(tx.n > 400, "{tx:?}");
        // The kernel stamps the datagram before the call returns.
        assert!(tx.median_ns <= r.miss.median_ns + 1_000, "{tx:?} vs {:?}", r.miss);
    }

    #[test]
    fn xtp_datagrams_arrive() {
        let (r, s) = through_sink(Kind::Xtp, Proto::Xtp, 200);
        assert_eq!(r.counts.sent, 200, "{r:?}");
        assert_eq!(s.received, 200, "{s:?}");
    }
}
