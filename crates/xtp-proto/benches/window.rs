//! Per-packet protocol work against the window: does it stay flat from a
//! 1 MB window to 16 and 64 MB? (Issue #12: reassembly, span reporting and
//! report processing amortised O(1) or O(log n) at 16 MB+ windows.)
//!
//! A bulk transfer in the simulator over a 1 Gbit/s bottleneck with 1 %
//! random loss on the forward path and round trips of 8, 128 and 512 ms
//! (one BDP = 1, 16 and 64 MB). The sender runs pure XTP rate control
//! (`Disabled`, paced at 95 % of the bottleneck) and the receiver's window
//! is fixed at four times the BDP — a hole holds the window's left edge for
//! about two round trips (its loss found, its retransmission's way), so
//! with less the sender waits for flow control at the larger windows and
//! the windows are compared at different rates. About 1 % of what is in
//! flight is holes in the receiver's reassembly map and the sender's
//! recovery log at any time, and every report carries spans. The packets
//! each run sent are printed: near-equal counts mean equal operating
//! points. (A
//! loss-based controller would keep a window of a few packets at 1 % loss,
//! which tests nothing.)
//!
//! Measured: the two endpoints' own work — the host meter brackets each
//! datagram, timer and transmit, so the simulator's queues and delay lines
//! are outside — per data packet the sender sent, over two seconds of
//! virtual time after two seconds of start-up. Printed per window with its
//! ratio to the 1 MB window, in three rounds of alternating order (the
//! machine is shared; each round is its own baseline).
//!
//! `cargo bench -p xtp-proto --bench window`

// The workspace forbids the wall clock in protocol code; this benchmark's
// meter is the one place here that reads it.
#![allow(clippy::disallowed_methods, reason = "a benchmark times with the wall clock")]

use std::time::Duration as WallDuration;

use bytes::Bytes;
use xk_netemu::{LinkParams, Loss};
use xk_time::{Duration, Instant};
use xtp_proto::{Congestion, ContextConfig, ContextId, Endpoint, EndpointConfig, Event};
use xtp_testkit::{App, Host, Meter};

const RATE_BPS: u64 = 1_000_000_000;
const LOSS: f64 = 0.01;

/// Wall time spent inside the endpoints.
#[derive(Default)]
struct Clock {
    started: Option<std::time::Instant>,
    spent: WallDuration,
}

impl Meter for Clock {
    fn begin(&mut self) {
        self.started = Some(std::time::Instant::now());
    }
    fn end(&mut self) {
        if let Some(t) = self.started.take() {
            self.spent += t.elapsed();
        }
    }
}

/// The sender keeps twice the window queued; the sink reads everything.
struct Bulk {
    sender: bool,
    ctx: Option<ContextId>,
    data: Bytes,
    target: u64,
    read: u64,
}

impl App for Bulk {
    fn poll(&mut self, ep: &mut Endpoint, now: Instant) {
        while let Some(ev) = ep.poll_event() {
            match ev {
                Event::Incoming { ctx, .. } => self.ctx = Some(ctx),
                Event::Readable { ctx } => {
                    while let Some(c) = ep.read(now, ctx) {
                        self.read += c.data.len() as u64;
                    }
                }
                _ => {}
            }
        }
        if self.sender
            && let Some(ctx) = self.ctx
        {
            while ep.unacked_bytes(ctx) < self.target {
                if ep.write(now, ctx, self.data.clone(), false, None).is_err() {
                    break;
                }
            }
        }
    }
}

/// One run at round trip `rtt`: nanoseconds of endpoint work per data packet
/// sent in the measured stretch, and that count.
fn run(rtt: Duration, seed: u64) -> (f64, u64) {
    let bdp = (RATE_BPS as f64 / 8.0 * rtt.as_secs_f64()) as u64;
    let mut send = ContextConfig::stream();
    send.congestion = Congestion::Disabled;
    send.out_rate = (RATE_BPS as f64 / 8.0 * 0.95) as u32;
    send.out_burst = 64 * 1432;
    let mut sink = ContextConfig::stream();
    sink.recv_buffer = (4 * bdp) as usize;
    sink.recv_buffer_max = sink.recv_buffer;
    let ep = EndpointConfig::default();
    let app =
        |sender| Bulk { sender, ctx: None, data: Bytes::from(vec![7u8; 1 << 20]), target: 8 * bdp, read: 0 };
    let server = Host::metered(Endpoint::new(ep.clone(), seed ^ 1), app(false), Clock::default());
    let client = Host::metered(Endpoint::new(ep, seed ^ 2), app(true), Clock::default());
    let fwd = LinkParams {
        delay: rtt / 2,
        rate_bps: RATE_BPS,
        loss: Loss::Bernoulli(LOSS),
        ..LinkParams::default()
    };
    let back = LinkParams { delay: rtt / 2, rate_bps: RATE_BPS, ..LinkParams::default() };
    let xtp_testkit::Pair { mut sim, client: c, server: s, server_addr, .. } =
        xtp_testkit::pair(seed, client, server, fwd, back);
    sim.node_mut(s).ep.listen(7, sink).unwrap();
    let ctx = sim.node_mut(c).ep.connect(Instant::ZERO, server_addr, 7, send).unwrap();
    sim.node_mut(c).ctx = Some(ctx);
    let sent = |sim: &xk_sim::Sim<Host<Bulk, Clock>>| sim.node(c).ep.context_stats(ctx).unwrap().packets_sent;
    let spent = |sim: &xk_sim::Sim<Host<Bulk, Clock>>| sim.node(c).meter.spent + sim.node(s).meter.spent;
    let start = Instant::ZERO + Duration::from_secs(2);
    sim.run_until(start, u64::MAX, |_| false).unwrap();
    let (p0, t0) = (sent(&sim), spent(&sim));
    measured(&mut sim, start + Duration::from_secs(2));
    let (p1, t1) = (sent(&sim), spent(&sim));
    let read = sim.node(s).read;
    assert!(read > 0, "nothing delivered at RTT {rtt:?}");
    let packets = p1 - p0;
    ((t1 - t0).as_nanos() as f64 / packets as f64, packets)
}

/// The measured stretch, in a function of its own so that callgrind can
/// count instructions in it alone (`--collect-atstart=no
/// --toggle-collect='window::measured'`): instruction counts see
/// algorithmic growth where times also see the cache.
#[inline(never)]
fn measured(sim: &mut xk_sim::Sim<Host<Bulk, Clock>>, until: Instant) {
    sim.run_until(until, u64::MAX, |_| false).unwrap();
}

fn main() {
    // One window only (`WINDOW_RTT_MS=512`), for callgrind.
    if let Some(ms) = std::env::var("WINDOW_RTT_MS").ok().and_then(|v| v.parse().ok()) {
        let (ns, n) = run(Duration::from_millis(ms), 12);
        println!("RTT {ms} ms: {ns:.0} ns/packet, {n} packets sent");
        return;
    }
    // `cargo bench` passes `--bench`; without it (`cargo test --benches`)
    // one round at the smallest window checks that the benchmark runs. A
    // filter or `--list` is not supported.
    if std::env::args().any(|a| a == "--list") {
        println!("window: benchmark");
        return;
    }
    if !std::env::args().any(|a| a == "--bench") {
        let (ns, n) = run(Duration::from_millis(8), 12);
        assert!(n > 100_000, "{n} packets at 1 MB");
        println!("window (test mode): 1 MB window {ns:.0} ns/packet, {n} packets");
        return;
    }
    let rtts = [8u64, 128, 512];
    let seed = 12;
    println!(
        "seed {seed}, 1 Gbit/s, {} % loss forward, rate-paced sender, receive window 4 × BDP",
        LOSS * 100.0
    );
    for round in 0..3 {
        let mut order: Vec<u64> = rtts.to_vec();
        if round % 2 == 1 {
            order.reverse();
        }
        let mut ns = std::collections::BTreeMap::new();
        for &ms in &order {
            ns.insert(ms, run(Duration::from_millis(ms), seed));
        }
        let base = ns[&rtts[0]].0;
        let line: Vec<String> = rtts
            .iter()
            .map(|ms| {
                let (v, n) = ns[ms];
                let mb = RATE_BPS as f64 / 8.0 * *ms as f64 / 1e3 / 1e6;
                format!("{mb:.0} MB: {v:.0} ns/packet ({n} packets, ×{:.2})", v / base)
            })
            .collect();
        println!("round {}: {}", round + 1, line.join("; "));
    }
}
