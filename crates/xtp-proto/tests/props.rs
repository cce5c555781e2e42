//! Randomised end-to-end transfers under random impairments, one seed each.
//!
//! For every seed: a stream or transaction transfer of a random size (0 B to
//! 10 MB, log-uniform) cut into random messages, over links with random loss
//! (0–30 %), duplication, reordering, single-bit corruption, one-way delay
//! (0–500 ms), bandwidth (1 Mbit/s – 10 Gbit/s) and sometimes a blackout of a
//! few round trips. Checked: every byte arrives exactly once and in order,
//! with message boundaries and BTAGs intact; every corrupted packet is rejected
//! (checksum); both sides close gracefully; no context is left after the
//! linger; the sender never exceeds the receiver's advertised `alloc`. All at
//! the default retry limit (8). On seeds whose paths lose nothing (about
//! one in five), additionally: no WTIMER expiry on either side; on those
//! that also keep order, the transfer within a bound derived from the path
//! (`path_bound`: serialisation, slow start's doublings and 10 round trips).
//!
//! `cargo test -p xtp-proto --test props` runs 1,000 seeds (CI);
//! `cargo test --release -p xtp-proto --test props -- --ignored` runs the long
//! sweep (10,000 more seeds). `XTP_PROP_SEEDS=n` runs seeds `0..n` instead of
//! 1,000. A failure prints the seed; `XTP_PROP_SEED=n` reruns one.

mod common;

use common::*;
use xk_netemu::{Blackout, Corrupt, LinkParams, Loss};
use xk_rand::Rng;
use xk_time::{Duration, Instant};
use xtp_proto::{CloseReason, ContextConfig, EndpointConfig, Service};

struct Case {
    /// No loss, corruption, blackout or reordering in either direction
    /// (jitter that keeps order and duplication remain).
    lossless: bool,
    /// No loss, corruption or blackout (reordering may remain).
    loss_free: bool,
    /// Bottleneck rate (bit/s) and one-way delay.
    rate: u64,
    delay: Duration,
    client: Role,
    messages: Vec<Vec<u8>>,
    reply: Option<Vec<u8>>,
    ab: LinkParams,
    ba: LinkParams,
}

fn log_uniform(rng: &mut Rng, max: u64) -> u64 {
    if rng.chance(0.05) {
        return 0;
    }
    let x = rng.unit() * ((max + 1) as f64).ln();
    (x.exp() as u64).min(max)
}

fn link(rng: &mut Rng, rate: u64, delay: Duration, loss: f64, blackout: Option<Blackout>) -> LinkParams {
    LinkParams {
        delay,
        jitter: delay / 10,
        jitter_reorders: rng.chance(0.5),
        rate_bps: rate,
        limit_packets: 2000,
        loss: Loss::Bernoulli(loss),
        duplicate: rng.unit() * 0.05,
        corrupt: Corrupt::PerPacket(rng.unit() * 0.05),
        reorder: rng.unit() * 0.05,
        blackouts: blackout.into_iter().collect(),
        ..LinkParams::default()
    }
}

fn case(seed: u64) -> Case {
    let mut rng = Rng::derive(seed, "case");
    let total = log_uniform(&mut rng, 10_000_000) as usize;
    let mut messages = Vec::new();
    let mut left = total;
    let mut salt = seed;
    while left > 0 {
        let n = (log_uniform(&mut rng, left as u64) as usize).clamp(1, left);
        messages.push(pattern(n, salt));
        salt += 1;
        left -= n;
    }
    // Rate from 1 Mbit/s to 10 Gbit/s, log-uniform; smaller transfers on slow
    // links so every run stays within its virtual time budget.
    let mut rate = (1e6 * (rng.unit() * 4.0 * std::f64::consts::LN_10).exp()) as u64;
    rate = rate.max((total as u64 * 8) / 120);
    let delay = Duration::from_millis(rng.below(501));
    let loss = rng.unit() * 0.3;
    let rtt = delay * 2 + Duration::from_millis(1);
    let blackout = rng.chance(0.2).then(|| {
        let start = Duration::from_millis(rng.below(2000));
        Blackout { start, end: start + rtt * (1 + rng.below(3) as u32) }
    });
    let ab = link(&mut rng, rate, delay, loss, blackout);
    let loss_back = rng.unit() * 0.3;
    let ba = link(&mut rng, rate, delay, loss_back, blackout);
    let transaction = rng.chance(0.3);
    let (client, reply) = if transaction {
        let reply = pattern(log_uniform(&mut rng, 100_000) as usize, seed ^ 0xabc);
        let mut cfg = ContextConfig::new(Service::Transaction);
        cfg.fastnak = rng.chance(0.5);
        (Role::Client { port: 7, messages: messages.clone(), cfg }, (!reply.is_empty()).then_some(reply))
    } else {
        let mut cfg = ContextConfig::stream();
        cfg.fastnak = rng.chance(0.5);
        cfg.nocheck = false;
        (Role::Client { port: 7, messages: messages.clone(), cfg }, None)
    };
    // Drawn last, so every other draw (and so every earlier seed's case)
    // stays what it was: a fifth of the seeds lose nothing.
    // Half of those also keep packets in order. Every loss-free seed must
    // see no timeout; the time bound below holds for order-keeping paths
    // (a packet that skips a 270 ms delay line makes reordering costly).
    let lossless = rng.chance(0.2);
    let in_order = lossless && rng.chance(0.5);
    let (mut ab, mut ba) = (ab, ba);
    if lossless {
        for l in [&mut ab, &mut ba] {
            l.loss = Loss::None;
            l.corrupt = Corrupt::None;
            l.blackouts.clear();
            if in_order {
                l.reorder = 0.0;
                l.jitter_reorders = false;
            }
        }
    }
    Case { lossless: in_order, loss_free: lossless, rate, delay, client, messages, reply, ab, ba }
}

fn run_seed(seed: u64) -> Result<(), String> {
    let c0 = case(seed);
    if std::env::var_os("XTP_TRACE").is_some() {
        let total: usize = c0.messages.iter().map(Vec::len).sum();
        eprintln!(
            "seed {seed}: {} messages, {total} bytes\n  ab {:?}\n  ba {:?}",
            c0.messages.len(),
            c0.ab,
            c0.ba
        );
    }
    // The default retry limit: no impairment in the sweep may make the
    // engine give up on a live peer.
    let cfg = EndpointConfig::default();
    let (lossless, loss_free, rate, delay) = (c0.lossless, c0.loss_free, c0.rate, c0.delay);
    let total: usize =
        c0.messages.iter().map(Vec::len).sum::<usize>() + c0.reply.as_ref().map_or(0, Vec::len);
    let (mut sim, c, s) =
        pair_with(seed, c0.client, Role::Server { port: 7, reply: c0.reply.clone() }, c0.ab, c0.ba, cfg);
    let fail = |msg: String, sim: &xk_sim::Sim<Host>| format!("seed {seed}: {msg} ({})", sim.report());
    sim.run_until(Instant::from_secs(12 * 3600), 50_000_000, |sim| {
        !sim.node(c).closed.is_empty() && !sim.node(s).closed.is_empty()
    })
    .map_err(|e| format!("seed {seed}: {e}"))?;
    let server = sim.node(s);
    let got = server.messages();
    if got.len() != c0.messages.len() {
        return Err(fail(format!("{} messages arrived, {} sent", got.len(), c0.messages.len()), &sim));
    }
    for (i, ((m, tag), want)) in got.iter().zip(&c0.messages).enumerate() {
        if m != want || *tag != Some(i as u64) {
            return Err(fail(
                format!("message {i} differs (len {} vs {}, tag {tag:?})", m.len(), want.len()),
                &sim,
            ));
        }
    }
    if let Some(reply) = &c0.reply
        && sim.node(c).messages() != vec![(reply.clone(), Some(7))]
    {
        return Err(fail("transaction reply differs".into(), &sim));
    }
    let dropped = |a, b| {
        let l = sim.link_stats(a, b).unwrap();
        l.drop_loss + l.drop_queue + l.drop_blackout + l.drop_mtu + l.corrupted
    };
    if loss_free && dropped(c, s) + dropped(s, c) == 0 {
        // Nothing was lost (no queue overflow either), so any timeout was
        // spurious, and the transfer is bounded by the path.
        let elapsed = sim.now() - Instant::ZERO;
        let bound = path_bound(total, rate, delay);
        if lossless && std::env::var_os("XTP_PROPS_VERBOSE").is_some() {
            // The per-seed numbers PERF quotes (Session 22): how much of the
            // bound each order-keeping loss-free seed used, and the round
            // trips it took beyond serialisation and slow start.
            let rtt = path_rtt(delay).as_secs_f64();
            let rounds = (elapsed.as_secs_f64() - serialisation(total, rate)) / rtt
                - slow_start_rounds(total, rate, delay);
            eprintln!(
                "BOUND seed {seed} total {total} rate {rate} delay_ms {} elapsed {:.3} bound {:.3} used {:.3} extra_rtts {rounds:.2}",
                delay.as_millis(),
                elapsed.as_secs_f64(),
                bound.as_secs_f64(),
                elapsed.as_secs_f64() / bound.as_secs_f64()
            );
            if std::env::var_os("XTP_TRACE").is_some() {
                let ctx = sim.node(c).ctx;
                eprintln!("  client {:?}", ctx.and_then(|x| sim.node(c).ep.context_stats(x)));
            }
        }
        for (who, n) in [("client", c), ("server", s)] {
            let ctx = sim.node(n).ctx;
            if let Some(st) = ctx.and_then(|x| sim.node(n).ep.context_stats(x))
                && st.timeouts > 0
            {
                return Err(fail(format!("{who}: {} timeouts on a loss-free path", st.timeouts), &sim));
            }
        }
        if lossless && elapsed > bound {
            return Err(fail(
                format!("{total} bytes took {elapsed:?} on a loss-free path (bound {bound:?})"),
                &sim,
            ));
        }
    }
    for (who, n) in [("client", c), ("server", s)] {
        // The one non-graceful end the anti-amplification bound (G27)
        // allows: the client finished gracefully (it has the reply and all
        // its data arrived, checked above) but every packet it sent after
        // the FIRST was lost, so the server, allowed 3x the FIRST's bytes,
        // ran out of probes and freed the context at half_open_timeout.
        let client_ok = sim.node(c).closed.first().map(|x| &x.1) == Some(&CloseReason::Graceful);
        if who == "server"
            && client_ok
            && matches!(
                sim.node(n).closed.first().map(|x| &x.1),
                Some(CloseReason::Unvalidated { limit: "half_open_timeout" })
            )
        {
            continue;
        }
        if sim.node(n).closed.first().map(|x| &x.1) != Some(&CloseReason::Graceful) {
            return Err(fail(format!("{who} closed with {:?}", sim.node(n).closed), &sim));
        }
        if let Some(v) = &sim.node(n).flow_violation {
            return Err(fail(format!("{who} exceeded alloc: {v}"), &sim));
        }
    }
    sim.run_for(Duration::from_secs(4 * 3600), 10_000_000).map_err(|e| format!("seed {seed}: {e}"))?;
    // Every corrupted packet delivered (all have been, after the linger) was
    // rejected by the checksum.
    let corrupted = sim.link_stats(c, s).unwrap().corrupted + sim.link_stats(s, c).unwrap().corrupted;
    let rejected = sim.node(c).ep.stats().malformed + sim.node(s).ep.stats().malformed;
    if corrupted != rejected {
        return Err(fail(format!("{corrupted} packets corrupted, {rejected} rejected"), &sim));
    }
    for (who, n) in [("client", c), ("server", s)] {
        if sim.node(n).ep.context_count() != 0 {
            return Err(fail(format!("{who} leaked {} contexts", sim.node(n).ep.context_count()), &sim));
        }
    }
    Ok(())
}

/// The longest round trip of a seed's path: its delay plus the most its
/// jitter (a tenth of the delay, see `link`) adds, each way.
fn path_rtt(delay: Duration) -> Duration {
    (delay + delay / 10) * 2
}

/// Seconds to put `total` bytes on the wire at `rate` bit/s: XTP's 32-byte
/// header per 1,400 data bytes.
fn serialisation(total: usize, rate: u64) -> f64 {
    total as f64 * 8.0 / rate as f64 * 1432.0 / 1400.0
}

/// Slow start's doublings from the initial window (10 packets) to the
/// smaller of the transfer and the path's bandwidth-delay product: past the
/// BDP the window no longer limits, the bottleneck does (serialisation).
fn slow_start_rounds(total: usize, rate: u64, delay: Duration) -> f64 {
    let packets = total.div_ceil(1400).max(1) as f64;
    let bdp = rate as f64 / 8.0 * path_rtt(delay).as_secs_f64() / 1432.0;
    (packets.min(bdp) / 10.0).max(1.0).log2()
}

/// The longest a transfer of `total` bytes may take on a loss-free,
/// order-keeping path of `rate` bit/s and `delay` each way, from the first
/// packet to both sides closed: its serialisation with 10 % to spare, plus
/// one round trip (with the path's jitter) per doubling of slow start,
/// plus OVERHEAD_RTTS round trips and 50 ms (see the constant).
fn path_bound(total: usize, rate: u64, delay: Duration) -> Duration {
    let rtt = path_rtt(delay).as_secs_f64();
    Duration::from_secs_f64(
        1.1 * serialisation(total, rate)
            + (slow_start_rounds(total, rate, delay) + OVERHEAD_RTTS) * rtt
            + 0.05,
    )
}

/// Round trips a loss-free transfer spends beyond its serialisation and
/// slow start's doublings. Two are the path's: the last data's report and
/// the close (912 of the 930 bounded long-sweep seeds with delay >= 20 ms
/// need at most 2). The other 8 are an allowance, not a model: on these
/// paths (jitter ±10 % of the delay, up to 84 ms per round trip against
/// HyStart++'s 4-16 ms threshold) CUBIC's round-minimum delay test fires on
/// jitter and it leaves slow start at 110-260 packets, with no congestion
/// event, far below the BDP, then grows linearly — a controller defect
/// (PERF Session 22), open. Seeds 7015, 7840 and 8257 of `long_sweep` need
/// 10.2-11.1 and fail the bound until it is fixed; the allowance is not
/// widened to hide them.
const OVERHEAD_RTTS: f64 = 10.0;

fn sweep(seeds: std::ops::Range<u64>) {
    sweep_seeds(seeds);
}

fn sweep_seeds(seeds: impl Iterator<Item = u64>) {
    let failures: Vec<String> = seeds.filter_map(|s| run_seed(s).err()).collect();
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn thousand_seeds() {
    if let Ok(one) = std::env::var("XTP_PROP_SEED") {
        let seed: u64 = one.parse().expect("XTP_PROP_SEED must be a number");
        run_seed(seed).unwrap_or_else(|e| panic!("{e}"));
        return;
    }
    let n: u64 = std::env::var("XTP_PROP_SEEDS").ok().and_then(|v| v.parse().ok()).unwrap_or(1_000);
    sweep(0..n);
}

/// Seeds of the long sweep that once failed, kept in CI: 817 (a first RTT
/// sample of 2 ms from a packet that skipped a 270 ms delay line: a
/// spurious timeout), 1183 (a half-open context that had delivered its data
/// was freed at 60 s and its initiator's FIRST probe at 185 s, past the
/// 120 s recent-key hold, delivered the message twice), 7060 (an END
/// sender's linger, computed from its own 0.5 s timeout, ended before its
/// peer's retries).
#[test]
fn seeds_that_once_failed() {
    sweep_seeds([817, 1183, 7060].into_iter());
}

#[test]
#[ignore]
fn long_sweep() {
    sweep(1_000..11_000);
}

/// NOERR: what arrives is intact and in order, what does not is reported as
/// a gap, and delivered + gaps account for every byte sent.
fn run_noerr(seed: u64) -> Result<(), String> {
    let mut rng = Rng::derive(seed, "noerr");
    let total = 1 + log_uniform(&mut rng, 2_000_000) as usize;
    let data = pattern(total, seed);
    let mut cfg = ContextConfig::stream();
    cfg.noerr = true;
    let loss = rng.unit() * 0.3;
    let p = LinkParams {
        delay: Duration::from_millis(rng.below(200)),
        loss: Loss::Bernoulli(loss),
        ..LinkParams::default()
    };
    let back = LinkParams { loss: Loss::Bernoulli(rng.unit() * 0.3), ..p.clone() };
    let ep = EndpointConfig { max_retries: 30, ..EndpointConfig::default() };
    let client = Role::Client { port: 7, messages: vec![data.clone()], cfg };
    let (mut sim, _c, s) = pair_with(seed, client, Role::Server { port: 7, reply: None }, p, back, ep);
    sim.run_until(Instant::from_secs(12 * 3600), 50_000_000, |sim| !sim.node(s).closed.is_empty())
        .map_err(|e| format!("seed {seed}: {e}"))?;
    let server = sim.node(s);
    let mut delivered = 0u64;
    let mut at = 0u64;
    for c in &server.chunks {
        let (s0, e0) = (c.seq as usize, c.seq as usize + c.data.len());
        if c.seq < at || e0 > total || c.data[..] != data[s0..e0] {
            return Err(format!(
                "seed {seed}: chunk at {} ({} bytes) is not the data sent there",
                c.seq,
                c.data.len()
            ));
        }
        at = e0 as u64;
        delivered += c.data.len() as u64;
    }
    if delivered + server.gaps != total as u64 {
        return Err(format!("seed {seed}: {delivered} delivered + {} in gaps != {total} sent", server.gaps));
    }
    if loss > 0.05 && total > 100_000 && server.gaps == 0 {
        return Err(format!("seed {seed}: no gap at {loss:.2} loss"));
    }
    Ok(())
}

#[test]
fn noerr_delivers_only_intact_data_and_reports_gaps() {
    let failures: Vec<String> = (0..200).filter_map(|s| run_noerr(s).err()).collect();
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}
