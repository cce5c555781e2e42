//! The performance envelope on the paths XTP was made for, in the simulator:
//! long round trips, large bandwidth-delay products, random loss and
//! reordering. Deterministic (seeded, virtual time); each cell prints its
//! seed and numbers, and `XTP_PATHS_VERBOSE=1` prints passing cells too.
//!
//! Goodput is application bytes delivered per second over the second half of
//! each run (steady state; the first half includes slow start), against the
//! bottleneck's bit rate (XTP's 32-byte header per 1,400-byte packet caps it
//! at 97.8 %).

mod common;

use common::*;
use xk_netemu::{LinkParams, Loss};
use xk_time::{Duration, Instant};
use xtp_proto::{Congestion, ContextConfig, ContextStats};

/// One bulk transfer's outcome.
struct Run {
    /// Steady-state goodput, bit/s.
    goodput: f64,
    stats: ContextStats,
    /// The sender's reductions when the count began (None where the run
    /// was not made by `run_counting`).
    reductions_before_count: Option<u64>,
    seed: u64,
}

#[derive(Clone, Copy)]
struct Path {
    rate_bps: u64,
    rtt: Duration,
    /// Queue in packets (0 = unlimited: a lossless path).
    queue: usize,
    loss: f64,
    reorder: f64,
}

impl Path {
    fn bdp_bytes(&self) -> u64 {
        (self.rate_bps as f64 / 8.0 * self.rtt.as_secs_f64()) as u64
    }

    /// A queue of one bandwidth-delay product (at least 100 packets), as a
    /// router sized by the classic rule.
    fn bdp_queue(rate_bps: u64, rtt: Duration) -> usize {
        ((rate_bps as f64 / 8.0 * rtt.as_secs_f64() / 1432.0) as usize).max(100)
    }
}

impl std::fmt::Display for Path {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} Mbit/s, RTT {} ms, queue {}, loss {} %, reorder {} %",
            self.rate_bps / 1_000_000,
            self.rtt.as_millis(),
            self.queue,
            self.loss * 100.0,
            self.reorder * 100.0
        )
    }
}

fn run(seed: u64, path: Path, cfg: ContextConfig, secs: u64) -> Run {
    run_writing(seed, path, cfg, secs, 0)
}

/// [`run`] with the sink's receive buffer fixed at `window` bytes: the
/// most the sender may have in flight, so flow control bounds what queues.
fn run_windowed(seed: u64, path: Path, cfg: ContextConfig, window: usize, secs: u64) -> Run {
    let mut sink = ContextConfig::stream();
    sink.recv_buffer = window;
    sink.recv_buffer_max = window;
    let half = Duration::from_secs(secs / 2);
    run_counting(seed, path, cfg, sink, half, Duration::from_secs(secs) - half, 0)
}

/// [`run`] with the sender writing `write_size` bytes at a time (0: 1 MiB).
fn run_writing(seed: u64, path: Path, cfg: ContextConfig, secs: u64, write_size: usize) -> Run {
    let half = Duration::from_secs(secs / 2);
    run_counting(seed, path, cfg, ContextConfig::stream(), half, Duration::from_secs(secs) - half, write_size)
}

/// A run whose goodput counts the `count` after the first `omit`; the
/// sender uses `cfg`, the sink listens with `sink`.
fn run_counting(
    seed: u64,
    path: Path,
    cfg: ContextConfig,
    sink: ContextConfig,
    omit: Duration,
    count: Duration,
    write_size: usize,
) -> Run {
    let fwd = LinkParams {
        delay: path.rtt / 2,
        rate_bps: path.rate_bps,
        limit_packets: path.queue,
        loss: if path.loss > 0.0 { Loss::Bernoulli(path.loss) } else { Loss::None },
        reorder: path.reorder,
        ..LinkParams::default()
    };
    let back = LinkParams { delay: path.rtt / 2, rate_bps: path.rate_bps, ..LinkParams::default() };
    let (mut sim, c, s) =
        pair(seed, Role::Bulk { port: 7, cfg }, Role::Sink { port: 7, cfg: sink }, fwd, back);
    sim.node_mut(c).write_size = write_size;
    let half = Instant::ZERO + omit;
    sim.run_until(half, u64::MAX, |_| false).unwrap();
    let at_half = sim.node(s).sink_bytes;
    let reductions_before_count =
        sim.node(c).ep.context_stats(sim.node(c).ctx.unwrap()).unwrap().congestion_events;
    let end = half + count;
    sim.run_until(end, u64::MAX, |_| false).unwrap();
    let bytes = sim.node(s).sink_bytes - at_half;
    let goodput = bytes as f64 * 8.0 / (end - half).as_secs_f64();
    let stats = sim.node(c).ep.context_stats(sim.node(c).ctx.unwrap()).unwrap();
    if verbose() {
        eprintln!("receiver: {:?}", sim.node(s).ep.context_stats(sim.node(s).ctx.unwrap()));
    }
    Run { goodput, stats, reductions_before_count: Some(reductions_before_count), seed }
}

fn show(path: &Path, cc: Congestion, r: &Run) -> String {
    let s = &r.stats;
    format!(
        "seed {} [{path}] {cc}: goodput {:.2} Mbit/s ({:.1} % of the bottleneck), timeouts {} (spurious {}), \
         retransmitted {} B (spurious {}), reductions {} (undone {}), tail probes {}, cwnd {}, srtt {:?}",
        r.seed,
        r.goodput / 1e6,
        r.goodput / path.rate_bps as f64 * 100.0,
        s.timeouts,
        s.spurious_timeouts,
        s.retransmitted,
        s.spurious_retransmitted,
        s.congestion_events,
        s.undone,
        s.tail_probes,
        s.cwnd,
        s.srtt
    )
}

fn verbose() -> bool {
    std::env::var_os("XTP_PATHS_VERBOSE").is_some()
}

/// A configuration for `cc` on `path`: "pure XTP 4.0" (`Disabled`) paces by
/// rate control at the bottleneck's payload rate, as its users would set it.
fn config(cc: Congestion, path: &Path) -> ContextConfig {
    let mut cfg = ContextConfig::stream();
    cfg.congestion = cc;
    if cc == Congestion::Disabled {
        cfg.out_rate = (path.rate_bps as f64 / 8.0 * 0.95) as u32;
        cfg.out_burst = 64 * 1432;
    }
    cfg
}

/// Checks `cells` and fails listing every cell that missed, with its seed.
fn check(cells: Vec<(Path, Congestion, Run, Result<(), String>)>) {
    let mut failed = Vec::new();
    for (path, cc, r, verdict) in &cells {
        let line = show(path, *cc, r);
        match verdict {
            Ok(()) if verbose() => eprintln!("ok   {line}"),
            Ok(()) => {}
            Err(why) => failed.push(format!("FAIL {line}: {why}")),
        }
    }
    assert!(failed.is_empty(), "{} of {} cells failed:\n{}", failed.len(), cells.len(), failed.join("\n"));
}

/// Lossless paths (no random loss, an unlimited queue; the receive window
/// sized to twice the path's BDP so flow control bounds what queues): no
/// WTIMER expiry and no retransmission with any controller, for round trips
/// of 0 to 2 s and a BDP up to 64 MB (1 Gbit/s × 500 ms); no tail-loss
/// probe either, but the initial one where the round trip exceeds 1 s.
#[test]
fn lossless_paths_no_timeouts_no_retransmissions() {
    lossless(&[Congestion::Cubic, Congestion::NewReno, Congestion::Disabled]);
}

/// The same for the BBR-style controller. (Its ProbeRTT shrinks the window
/// below the data already in flight; until the context asked for status
/// when a window shuts on unrequested packets, the 1 Gbit/s × 500 ms path
/// waited for WTIMER there.)
#[test]
fn lossless_paths_bbr() {
    lossless(&[Congestion::Bbr]);
}

fn lossless(controllers: &[Congestion]) {
    let mut cells = Vec::new();
    let paths = [
        (45_000_000u64, 0u64, 30u64),
        (45_000_000, 100, 30),
        (45_000_000, 500, 30),
        (45_000_000, 2000, 60),
        (1_000_000_000, 500, 20),
    ];
    for (i, &(rate, rtt_ms, secs)) in paths.iter().enumerate() {
        let rtt = Duration::from_millis(rtt_ms);
        let path = Path { rate_bps: rate, rtt, queue: 0, loss: 0.0, reorder: 0.0 };
        for &cc in controllers {
            let window = (2 * path.bdp_bytes()).max(1 << 20) as usize;
            let r = run_windowed(1000 + i as u64, path, config(cc, &path), window, secs);
            let s = &r.stats;
            let verdict = if s.timeouts > 0 || s.retransmitted > 0 {
                Err("a timeout or retransmission on a lossless path".into())
            } else if s.tail_probes > u64::from(rtt >= Duration::from_secs(1)) {
                // One is the initial probe when the first round trip is
                // longer than the initial timeout (1 s); beyond it, the
                // probe fires only when the sender falls quiet.
                Err("tail probes on a lossless path with data flowing".into())
            } else if r.goodput < 0.8 * rate as f64 {
                Err("goodput under 80 % of the bottleneck".into())
            } else {
                Ok(())
            };
            cells.push((path, cc, r, verdict));
        }
    }
    check(cells);
}

/// Pure XTP 4.0 (`Disabled`) held by its own rate far below the link: a
/// lossless path must see no timeout and no probe. (A rate-limited sender
/// asked for status only on every 16th data packet and its probes waited
/// behind the rate bucket with the data: at 72 kB/s on a 50 ms path 16
/// packets took longer than the timeout, 94 spurious timeouts in 30 s.)
#[test]
fn rate_limited_pure_xtp_never_times_out() {
    let mut cells = Vec::new();
    for (i, (rtt_ms, rate)) in
        [(50u64, 72_000u32), (20, 90_000), (0, 100_000), (0, 1_000_000)].into_iter().enumerate()
    {
        let rtt = Duration::from_millis(rtt_ms);
        let path = Path { rate_bps: 100_000_000, rtt, queue: 0, loss: 0.0, reorder: 0.0 };
        let mut cfg = ContextConfig::stream();
        cfg.congestion = Congestion::Disabled;
        cfg.out_rate = rate;
        let r = run(9000 + i as u64, path, cfg, 30);
        let s = &r.stats;
        let verdict = if s.timeouts > 0 {
            Err("a timeout on a lossless path".into())
        } else if s.tail_probes > 0 {
            Err("a tail probe while data flows".into())
        } else if r.goodput < 0.9 * f64::from(rate) * 8.0 * 1400.0 / 1432.0 {
            Err("goodput under 90 % of the configured rate".into())
        } else {
            Ok(())
        };
        cells.push((path, Congestion::Disabled, r, verdict));
    }
    check(cells);
}

/// One context at line rate for an hour of virtual time (10 Mbit/s, 100 ms),
/// with every controller: it neither stalls nor gives up, and never times
/// out. (`Disabled` once had no RTT sample at all: WTIMER fired at 1, 3,
/// 7, … s and the context was abandoned after ~243 s at line rate.)
#[test]
fn an_hour_at_line_rate() {
    let rtt = Duration::from_millis(100);
    let path =
        Path { rate_bps: 10_000_000, rtt, queue: Path::bdp_queue(10_000_000, rtt), loss: 0.0, reorder: 0.0 };
    let mut cells = Vec::new();
    for (seed, cc) in
        [(7, Congestion::Cubic), (8, Congestion::NewReno), (9, Congestion::Bbr), (10, Congestion::Disabled)]
    {
        let r = run(seed, path, config(cc, &path), 3600);
        let verdict = if r.stats.timeouts > 0 {
            Err("a timeout".into())
        } else if r.goodput < 0.9 * path.rate_bps as f64 {
            Err("goodput under 90 % in the second half hour".into())
        } else {
            Ok(())
        };
        cells.push((path, cc, r, verdict));
    }
    check(cells);
}

/// The default controller keeps the bottleneck ≥ 90 % busy at every round
/// trip from 0 to 1 s, at 45 Mbit/s and 1 Gbit/s, with a BDP-sized drop-tail
/// queue and the default configuration (receive buffer right-sized).
#[test]
fn default_controller_fills_long_fat_pipes() {
    fills(&[0u64, 10, 50, 200, 500, 1000].map(|r| (45_000_000, r)));
}

/// The same at 1 Gbit/s (BDP up to 125 MB).
#[test]
fn default_controller_fills_gigabit_pipes() {
    fills(&[0u64, 10, 100, 1000].map(|r| (1_000_000_000, r)));
}

/// Issue #12's 1 Gbit/s, 200 ms, lossless cell as PATHS measures it through
/// `xpress netns`: a 1,000-packet queue (6 % of the 25 MB BDP, so slow start
/// overflows it with half the BDP in flight and HyStart++'s delay signal,
/// 11.5 ms of queue at most, never fires), goodput over 50 round trips after
/// ten left out for slow start (`netns_run::Timing::steady`), the default
/// controller. The exit must take the pipe the reports showed and refill it
/// at the window's rate: with β × the window and the refill at 1.25 × it,
/// this cell measured 80-84 %, a second loss in congestion avoidance 0.5 s
/// after the first and a W_max below the BDP.
#[test]
fn gigabit_shallow_queue_long_rtt() {
    shallow(&[(200, 8001)], Envelope { share: 0.9, reductions: None, retransmitted: None });
}

/// The same at 50 ms, the cell where XTP trailed kernel CUBIC through
/// `xpress netns` (0.95-0.97; the queue is 23 % of the 6.25 MB BDP). Slow
/// start's window grows while the receiver's window holds the data in
/// flight at 4-8 MiB, the window opening lets a burst out at twice the
/// window's rate, and β × the 13.6 MB window at that loss (9.6 MB) is over
/// the 7.5 MB of pipe and queue: a second loss 0.1 s later, W_max under the
/// pipe and queue, and a congestion-avoidance loss at 3.8 s that costs β
/// again — 94.9 % over the counted 10 s and 3.75 MB retransmitted in three
/// reductions when the exit does not take the saturated pipe. With it: one
/// reduction, the link busy from 0.8 s, 1.58 MB retransmitted.
#[test]
fn gigabit_shallow_queue_50ms() {
    shallow(&[(50, 8003)], Envelope { share: 0.95, reductions: Some(1), retransmitted: Some(2_500_000) });
}

/// The same at 100 ms (queue 11 % of the BDP). The refill after the exit
/// must wait until the data in flight has fallen below the new window: the
/// overshoot still holds more than it, and ending the refill then lets the
/// gap that opens in recovery refill at 1.25 × into a standing queue, which
/// overflows; the second reduction leaves 8.6 MB of a 12.2 MB pipe (89.4 %
/// over the counted 10 s, 14.19 MB retransmitted). Waiting: one reduction,
/// 6.11 MB retransmitted. Since Session 19 slow start ends before the
/// overflow, on the full-pipe signal (the reports show the bottleneck
/// saturated and the window holds their rate for a minimum RTT). Session 20
/// keeps the 5 %-per-round probe on after that exit until a loss (a joiner
/// must not keep the share it read there: FAIR), so the probe meets pipe +
/// queue once, a 0.83 MB loss answered from the pipe the exit measured; with
/// β instead, 91.3 % and a second reduction.
#[test]
fn gigabit_shallow_queue_100ms() {
    shallow(&[(100, 8004)], Envelope { share: 0.96, reductions: Some(1), retransmitted: Some(1_000_000) });
}

/// The same at 500 ms (BDP 62.5 MB, the queue 2.3 % of it). Misses: the
/// slow-start exit is clean (97.8 % from 2 s after it), but CUBIC's convex
/// probe from the pipe reaches pipe + queue 14.5 s later (C·t³ = 1,000
/// packets at t = 13.6 s, whatever the RTT), inside the 25 s counted, and
/// RFC 9438's β = 0.7 then leaves 74 % of the BDP with K = 32 s to regrow:
/// 80 % over the window. Run with `--ignored` to see it.
#[test]
#[ignore = "misses the 90 % goal: a congestion-avoidance loss (RFC 9438 β) inside the 25 s counted"]
fn gigabit_shallow_queue_500ms() {
    shallow(&[(500, 8002)], Envelope { share: 0.9, reductions: None, retransmitted: None });
}

/// What a shallow-queue cell must meet: goodput at least `share` of the
/// bottleneck over PATHS' counted window, and at most `reductions` window
/// reductions in the whole run (the slow-start exit's included), and at
/// most `retransmitted` bytes sent again (an exit that keeps too large a
/// window shows as a second overflow's retransmissions before it shows in
/// goodput).
struct Envelope {
    share: f64,
    reductions: Option<u64>,
    retransmitted: Option<u64>,
}

fn shallow(cells: &[(u64, u64)], want: Envelope) {
    let mut out = Vec::new();
    for &(rtt_ms, seed) in cells {
        let rtt = Duration::from_millis(rtt_ms);
        let path = Path { rate_bps: 1_000_000_000, rtt, queue: 1000, loss: 0.0, reorder: 0.0 };
        // PATHS' steady state: ten round trips (1-10 s) left out, fifty
        // counted, 10-25 s (`plans/paths-1g-long.toml`).
        let omit = Duration::from_millis((rtt_ms * 10).clamp(1000, 10_000));
        let count = (rtt * 50).clamp(Duration::from_secs(10), Duration::from_secs(25));
        let r = run_counting(seed, path, ContextConfig::stream(), ContextConfig::stream(), omit, count, 0);
        let verdict = if r.stats.timeouts > 0 {
            Err("a timeout".to_string())
        } else if r.goodput < want.share * path.rate_bps as f64 {
            Err(format!("goodput under {:.0} % over {count:?} after {omit:?}", want.share * 100.0))
        } else if let Some(n) = want.reductions
            && r.stats.congestion_events > n
        {
            Err(format!("more than {n} window reductions"))
        } else if let Some(b) = want.retransmitted
            && r.stats.retransmitted > b
        {
            Err(format!("more than {b} B retransmitted"))
        } else {
            Ok(())
        };
        out.push((path, Congestion::Cubic, r, verdict));
    }
    check(out);
}

fn fills(grid: &[(u64, u64)]) {
    let mut cells = Vec::new();
    for (i, &(rate, rtt_ms)) in grid.iter().enumerate() {
        let rtt = Duration::from_millis(rtt_ms);
        let path = Path { rate_bps: rate, rtt, queue: Path::bdp_queue(rate, rtt), loss: 0.0, reorder: 0.0 };
        let r = run(2000 + i as u64, path, ContextConfig::stream(), 60);
        let verdict = if r.goodput >= 0.9 * rate as f64 { Ok(()) } else { Err("goodput under 90 %".into()) };
        cells.push((path, Congestion::Cubic, r, verdict));
    }
    check(cells);
}

/// A loss in congestion avoidance at a long round trip must not empty the
/// pipe: while a retransmission is under way the receiver holds a window out
/// of order for a round trip and the sender goes on, so its buffer must be
/// about twice the window (45 Mbit/s × 1 s, a BDP queue, the window near
/// pipe + queue: 11-12 MB). The receiver sized it from its smoothed RTT,
/// which trails a growing queue by seconds (one sample per round trip): 14.6
/// MB at the first loss, the data in flight fell from 12 MB to 2 MB in the
/// recovery, and the counted half of this minute averaged 43.04 Mbit/s
/// (95.6 %) where the link is otherwise busy to the header limit (97.8 %).
/// The cell must reduce its window inside the counted 30-60 s (at 51 s
/// in Session 20's trace), or the count no longer covers a recovery.
#[test]
fn a_loss_at_one_second_keeps_the_bottleneck_busy() {
    let rtt = Duration::from_millis(1000);
    let rate = 45_000_000;
    let path = Path { rate_bps: rate, rtt, queue: Path::bdp_queue(rate, rtt), loss: 0.0, reorder: 0.0 };
    let r = run(2005, path, ContextConfig::stream(), 60);
    let counted = r.stats.congestion_events - r.reductions_before_count.expect("counted run");
    if verbose() {
        eprintln!("seed 2005: {counted} of {} reductions in the counted 30-60 s", r.stats.congestion_events);
    }
    let verdict = if counted == 0 {
        Err("no reduction in 30-60 s: the count no longer covers a recovery".to_string())
    } else if r.goodput < 0.97 * rate as f64 {
        Err("goodput under 97 % of the bottleneck over 30-60 s".to_string())
    } else {
        Ok(())
    };
    check(vec![(path, Congestion::Cubic, r, verdict)]);
}

/// Slow start into a deep buffer (1,000 packets, 5 × the BDP at 45 Mbit/s
/// and 50 ms): HyStart++ must leave early enough that a 3-second transfer
/// still averages ≥ 90 % of the bottleneck, slow start included. Before
/// CSS ended on a second RTT rise, the window reached 1.9 MB (6.8 × BDP)
/// and the overflow cost 84 %.
#[test]
fn slow_start_into_a_deep_buffer() {
    let mut cells = Vec::new();
    for (seed, cc) in [(7001, Congestion::Cubic), (7002, Congestion::NewReno)] {
        let path = Path {
            rate_bps: 45_000_000,
            rtt: Duration::from_millis(50),
            queue: 1000,
            loss: 0.0,
            reorder: 0.0,
        };
        let fwd = LinkParams {
            delay: path.rtt / 2,
            rate_bps: path.rate_bps,
            limit_packets: 1000,
            ..LinkParams::default()
        };
        let back = LinkParams { delay: path.rtt / 2, rate_bps: path.rate_bps, ..LinkParams::default() };
        let (mut sim, c, s) = pair(seed, Role::Bulk { port: 7, cfg: config(cc, &path) }, sink(7), fwd, back);
        sim.run_until(Instant::from_secs(3), u64::MAX, |_| false).unwrap();
        let goodput = sim.node(s).sink_bytes as f64 * 8.0 / 3.0;
        let stats = sim.node(c).ep.context_stats(sim.node(c).ctx.unwrap()).unwrap();
        let verdict = if goodput >= 0.9 * path.rate_bps as f64 {
            Ok(())
        } else {
            Err("under 90 % over 3 s".to_string())
        };
        cells.push((path, cc, Run { goodput, stats, reductions_before_count: None, seed }, verdict));
    }
    check(cells);
}

/// Reordering alone (1–5 % of packets overtake the rest, netem style, at
/// 45 Mbit/s and 20 ms): no window reduction stands (any taken is undone) and
/// goodput stays ≥ 90 %. The sink's window is fixed at 512 KiB (~4.7 BDP)
/// so the unlimited queue (no drop may be mistaken for reordering) stays
/// bounded and the reordering is not buried under seconds of queueing.
#[test]
fn reordering_is_not_loss() {
    let mut cells = Vec::new();
    for (i, reorder) in [0.01, 0.03, 0.05].into_iter().enumerate() {
        let rtt = Duration::from_millis(20);
        let path = Path { rate_bps: 45_000_000, rtt, queue: 0, loss: 0.0, reorder };
        let r = run_windowed(3000 + i as u64, path, ContextConfig::stream(), 512 << 10, 30);
        let s = &r.stats;
        let verdict = if s.congestion_events > s.undone {
            Err("a window reduction for reordering".into())
        } else if r.goodput < 0.9 * path.rate_bps as f64 {
            Err("goodput under 90 %".into())
        } else {
            Ok(())
        };
        cells.push((path, Congestion::Cubic, r, verdict));
    }
    check(cells);
}

/// Goodput (bit/s) by the Reno response function (Mathis et al. 1997):
/// MSS/RTT × sqrt(3/2) / sqrt(p).
fn mathis(p: f64, rtt: Duration) -> f64 {
    1400.0 * 8.0 / rtt.as_secs_f64() * (1.5f64).sqrt() / p.sqrt()
}

/// RFC 9438's average CUBIC window under random loss (§5, in segments):
/// the larger of the cubic estimate and the Reno-friendly one — CUBIC's
/// AIMD(3(1−β)/(1+β), β) has Reno's average, sqrt(3/2)/sqrt(p).
fn cubic_estimate(p: f64, rtt: Duration) -> f64 {
    let (c, beta) = (0.4f64, 0.7f64);
    let r = rtt.as_secs_f64();
    let w_cubic = (c * (3.0 + beta) / (4.0 * (1.0 - beta))).powf(0.25) * r.powf(0.75) / p.powf(0.75);
    let w_reno = (1.5f64).sqrt() / p.sqrt();
    w_cubic.max(w_reno) * 1400.0 * 8.0 / r
}

/// Random loss 0.1–2 % (a BDP drop-tail queue): CUBIC, the default, at
/// least RFC 9438's estimate; NewReno at least the Reno response function
/// with C = sqrt(3/2) ≈ 1.22 (each capped at 90 % of the bottleneck).
/// sqrt(3/2) is Mathis et al.'s (1997) constant for periodic loss; for
/// random loss they give C ≈ 1.31 (several losses in one window cost one
/// reduction), which is why independent per-packet loss sits above
/// sqrt(3/2) — the medians measured 1.001-1.114 × it in Session 22, the
/// 20 ms, 0.1 % cell lowest with ~56 loss events in its counted 30 s; the
/// run length now gives every cell's counted half ~120 expected losses
/// (up to 4 minutes). The median of three seeds per cell: one run's
/// sawtooth is too few loss events for a mean. Before proportional
/// rate reduction, status requests every 1/16 window and CUBIC's α = 1
/// after the Reno-friendly estimate recovers, 14 of 24 cells were at
/// 80–98 %.
#[test]
fn random_loss_meets_the_response_functions() {
    let mut cells = Vec::new();
    let mut seed = 4000;
    for rtt_ms in [20u64, 50, 200] {
        for loss in [0.001, 0.005, 0.01, 0.02] {
            let rtt = Duration::from_millis(rtt_ms);
            let path = Path {
                rate_bps: 45_000_000,
                rtt,
                queue: Path::bdp_queue(45_000_000, rtt),
                loss,
                reorder: 0.0,
            };
            // The models' RTT is the round trip a full packet sees: the
            // propagation delay plus its serialization at the bottleneck.
            let model_rtt = rtt + Duration::from_nanos(1432 * 8 * 1_000_000_000 / path.rate_bps);
            // Enough loss events for a mean: at 200 ms a minute holds only
            // a handful of sawtooth cycles, and at 0.1 % loss the counted
            // half of a minute at 20 ms only ~56 (1.001 x Mathis, Session
            // 22): the counted half should expect 120 losses (the Reno
            // model's packets/s times p), up to 4 minutes a run.
            let losses_per_s =
                mathis(loss, model_rtt).min(0.9 * path.rate_bps as f64) / (1400.0 * 8.0) * loss;
            let for_losses = ((2.0 * 120.0 / losses_per_s).ceil() as u64).min(240);
            let secs = (rtt_ms * 3).max(60).max(for_losses);
            for (cc, model) in [
                (Congestion::NewReno, mathis(loss, model_rtt)),
                (Congestion::Cubic, cubic_estimate(loss, model_rtt)),
            ] {
                let mut runs: Vec<Run> = (0..3)
                    .map(|_| {
                        seed += 1;
                        run(seed, path, config(cc, &path), secs)
                    })
                    .collect();
                runs.sort_by(|a, b| a.goodput.total_cmp(&b.goodput));
                let r = runs.swap_remove(1);
                let want = model.min(0.9 * path.rate_bps as f64);
                let verdict = if r.goodput >= want {
                    Ok(())
                } else {
                    Err(format!("under the model: {:.2} Mbit/s", want / 1e6))
                };
                cells.push((path, cc, r, verdict));
            }
        }
    }
    check(cells);
}

/// A sender that writes in small pieces (as `xpress bulk -t` tops its queue
/// up by what each report freed) still sends full packets, and goodput does
/// not suffer. Each packet is one loss draw, so half-size packets double the
/// loss per byte: before writes were coalesced, CUBIC through a real 30 ms,
/// 0.3 % path sent 938-byte packets on average and fell 11 % behind NewReno
/// (whose whole-packet window made its pieces packet-sized).
#[test]
fn small_writes_still_fill_packets() {
    let rtt = Duration::from_millis(30);
    let path = Path {
        rate_bps: 45_000_000,
        rtt,
        queue: Path::bdp_queue(45_000_000, rtt),
        loss: 0.003,
        reorder: 0.0,
    };
    let model_rtt = rtt + Duration::from_nanos(1432 * 8 * 1_000_000_000 / path.rate_bps);
    let model = cubic_estimate(path.loss, model_rtt).min(0.9 * path.rate_bps as f64);
    let mut cells = Vec::new();
    let mut seed = 5000;
    for write_size in [300, 700, 1_900] {
        // The median of three seeds, as the random-loss test takes.
        let mut runs: Vec<Run> = (0..3)
            .map(|_| {
                seed += 1;
                run_writing(seed, path, config(Congestion::Cubic, &path), 60, write_size)
            })
            .collect();
        runs.sort_by(|a, b| a.goodput.total_cmp(&b.goodput));
        let r = runs.swap_remove(1);
        // Control packets (a few status requests) count too: 95 % leaves
        // room for them, a packet per write would be 21-95 %.
        let per_packet = r.stats.bytes_sent as f64 / r.stats.packets_sent.max(1) as f64;
        let verdict = if per_packet < 0.95 * 1400.0 {
            Err(format!("{write_size}-byte writes: {per_packet:.0} bytes of data per packet"))
        } else if r.goodput < model {
            Err(format!("{write_size}-byte writes: under RFC 9438's estimate {:.2} Mbit/s", model / 1e6))
        } else {
            Ok(())
        };
        cells.push((path, Congestion::Cubic, r, verdict));
    }
    check(cells);
}

/// A fixed send window binds whatever the peer offers: seed 002 ran XTP
/// with 1 MB, which caps it at one window per round trip (the E2 setting).
#[test]
fn a_fixed_send_window_caps_goodput_at_one_window_per_round_trip() {
    let rtt = Duration::from_millis(200);
    let path = Path { rate_bps: 45_000_000, rtt, queue: 0, loss: 0.0, reorder: 0.0 };
    let window = 256u64 << 10;
    let cap = window as f64 * 8.0 / rtt.as_secs_f64();
    let mut cells = Vec::new();
    for (seed, cc) in [(6001, Congestion::Disabled), (6002, Congestion::Cubic)] {
        let mut cfg = config(cc, &path);
        cfg.send_window = Some(window);
        let r = run(seed, path, cfg, 20);
        let verdict = if r.goodput > 1.02 * cap || r.goodput < 0.85 * cap {
            Err(format!("not near {:.2} Mbit/s (256 KiB per 200 ms)", cap / 1e6))
        } else {
            Ok(())
        };
        cells.push((path, cc, r, verdict));
    }
    check(cells);
}

/// BBR's gain-1.0 phases pace at the bottleneck rate it measured. That rate
/// counts data; the pacer counts wire bytes (headers too), so the rate must
/// be scaled to them, or the sender runs 2.2 % slow (1,400 data bytes in
/// 1,432) and the link idles that much: measured 97.7 % busy before the
/// fix. Between ProbeRTTs (5-8 s) the link must be ≥ 99.5 % busy.
#[test]
fn bbr_keeps_the_bottleneck_busy_between_probes() {
    let rate = 45_000_000u64;
    let rtt = Duration::from_millis(50);
    let fwd = LinkParams { delay: rtt / 2, rate_bps: rate, limit_packets: 1000, ..LinkParams::default() };
    let back = LinkParams { delay: rtt / 2, rate_bps: rate, ..LinkParams::default() };
    let path = Path { rate_bps: rate, rtt, queue: 1000, loss: 0.0, reorder: 0.0 };
    let (mut sim, c, s) =
        pair(5050, Role::Bulk { port: 7, cfg: config(Congestion::Bbr, &path) }, sink(7), fwd, back);
    sim.run_until(Instant::from_secs(5), u64::MAX, |_| false).unwrap();
    let before = sim.link_stats(c, s).unwrap().delivered_bytes;
    sim.run_until(Instant::from_secs(8), u64::MAX, |_| false).unwrap();
    let busy = (sim.link_stats(c, s).unwrap().delivered_bytes - before) as f64 / (rate as f64 / 8.0 * 3.0);
    println!("seed 5050: link {:.4} busy from 5 to 8 s", busy);
    assert!(busy >= 0.995, "seed 5050: the link was {:.2} % idle under BBR", (1.0 - busy) * 100.0);
}

/// Issue #12's 45 Mbit/s, 0 ms, 2 % random-loss cell with BBR, over 28 s
/// after slow start. BBR keeps the round trip near its 0.26 ms floor, and
/// the receiver used to ask for an RTT sample every round trip to size a
/// buffer that was never near its limit: each answer is a control packet on
/// the sender's side of the bottleneck, 33,000 of them beside 119,000 data
/// packets (1 % of the link), and goodput was 96.45 % of the bottleneck
/// where CUBIC's (longer RTT, fewer probes) was 97.5 %. XTP's headers cap
/// it at 97.77 %.
#[test]
fn bbr_fills_a_short_lossy_path() {
    let rate = 45_000_000u64;
    let path = Path { rate_bps: rate, rtt: Duration::ZERO, queue: 1000, loss: 0.02, reorder: 0.0 };
    let fwd = LinkParams {
        rate_bps: rate,
        limit_packets: path.queue,
        loss: Loss::Bernoulli(path.loss),
        ..LinkParams::default()
    };
    let back = LinkParams { rate_bps: rate, ..LinkParams::default() };
    let seed = 5060;
    let (mut sim, c, s) =
        pair(seed, Role::Bulk { port: 7, cfg: config(Congestion::Bbr, &path) }, sink(7), fwd, back);
    sim.run_until(Instant::from_secs(2), u64::MAX, |_| false).unwrap();
    let sink_before = sim.node(s).sink_bytes;
    sim.run_until(Instant::from_secs(30), u64::MAX, |_| false).unwrap();
    let goodput = (sim.node(s).sink_bytes - sink_before) as f64 * 8.0 / 28.0;
    let stats = sim.node(c).ep.context_stats(sim.node(c).ctx.unwrap()).unwrap();
    let r = Run { goodput, stats, reductions_before_count: None, seed };
    let line = show(&path, Congestion::Bbr, &r);
    println!("{line}");
    let control = r.stats.packets_sent - r.stats.copied_into_packets.ops;
    assert!(
        control * 100 < r.stats.copied_into_packets.ops,
        "{line}: {control} control packets beside {} data packets",
        r.stats.copied_into_packets.ops
    );
    assert!(goodput >= 0.975 * rate as f64, "{line}: under 97.5 % of the bottleneck (ceiling 97.8 %)");
}
