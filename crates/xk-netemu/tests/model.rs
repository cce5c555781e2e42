//! The link model against its specification: exact delay and rate, impairment
//! rates inside 99 % binomial intervals over 1M packets, Gilbert–Elliott burst
//! statistics, ordering rules, schedules and determinism.

mod common;

use common::assert_binomial;
use xk_netemu::{Corrupt, DropReason, Fate, JitterDist, Link, LinkParams, Loss, parse_line};
use xk_time::{Duration, Instant};

const N: u64 = 1_000_000;

fn link(params: LinkParams, seed: u64) -> Link<Vec<u8>> {
    Link::new(params, vec![], Instant::ZERO, seed, "test").unwrap()
}

/// Sends `n` small packets 1 µs apart and drains everything.
fn run(l: &mut Link<Vec<u8>>, n: u64, size: usize) -> Vec<(u64, Instant, bool, bool)> {
    let mut out = Vec::new();
    for i in 0..n {
        let now = Instant::from_micros(i);
        l.send(now, vec![0u8; size]);
        while let Some(d) = l.poll(now) {
            out.push((d.id, d.at, d.corrupted, d.duplicate));
        }
    }
    while let Some(d) = l.poll(Instant::MAX) {
        out.push((d.id, d.at, d.corrupted, d.duplicate));
    }
    out
}

#[test]
fn delay_is_exact_to_the_nanosecond() {
    let mut l = link(LinkParams { delay: Duration::from_nanos(12_345_678), ..LinkParams::default() }, 1);
    for i in 0..1000u64 {
        let now = Instant::from_nanos(i * 997);
        assert_eq!(l.send(now, vec![1; 100]).fate, Fate::Scheduled(now + Duration::from_nanos(12_345_678)));
    }
    let mut prev = Instant::ZERO;
    while let Some(d) = l.poll(Instant::MAX) {
        assert_eq!(d.at, Instant::from_nanos(d.id * 997 + 12_345_678));
        assert!(d.at >= prev);
        prev = d.at;
    }
}

#[test]
fn rate_is_exact_to_the_nanosecond() {
    // 1000 B + 24 B overhead at 8.192 Mbit/s = 1 ms per packet exactly;
    // 7 B at 3 bit/s = 56/3 s, rounded up to the next nanosecond.
    let p = LinkParams {
        rate_bps: 8_192_000,
        overhead: 24,
        delay: Duration::from_millis(5),
        ..LinkParams::default()
    };
    let mut l = link(p, 1);
    for k in 0..100u64 {
        let fate = l.send(Instant::ZERO, vec![0; 1000]).fate;
        assert_eq!(fate, Fate::Scheduled(Instant::from_millis(5 + k + 1)));
    }
    // After the queue drains, a packet starts at its own send time.
    assert_eq!(
        l.send(Instant::from_secs(1), vec![0; 1000]).fate,
        Fate::Scheduled(Instant::from_millis(1006))
    );
    let mut slow = link(LinkParams { rate_bps: 3, ..LinkParams::default() }, 1);
    assert_eq!(
        slow.send(Instant::ZERO, vec![0; 7]).fate,
        Fate::Scheduled(Instant::from_nanos(18_666_666_667))
    );
}

#[test]
fn queue_limit_tail_drops() {
    let p = LinkParams { rate_bps: 1_000_000, limit_packets: 5, ..LinkParams::default() };
    let mut l = link(p, 1);
    let fates: Vec<Fate> = (0..8).map(|_| l.send(Instant::ZERO, vec![0; 125]).fate).collect();
    assert!(fates[..5].iter().all(|f| matches!(f, Fate::Scheduled(_))));
    assert!(fates[5..].iter().all(|f| *f == Fate::Dropped(DropReason::QueueFull)));
    // 125 B at 1 Mbit/s = 1 ms each: at 2 ms two have left, two more fit.
    assert!(matches!(l.send(Instant::from_millis(2), vec![0; 125]).fate, Fate::Scheduled(_)));
    assert!(matches!(l.send(Instant::from_millis(2), vec![0; 125]).fate, Fate::Scheduled(_)));
    assert_eq!(l.send(Instant::from_millis(2), vec![0; 125]).fate, Fate::Dropped(DropReason::QueueFull));
    let pb = LinkParams { rate_bps: 1_000_000, limit_bytes: 1000, ..LinkParams::default() };
    let mut lb = link(pb, 1);
    assert!(matches!(lb.send(Instant::ZERO, vec![0; 600]).fate, Fate::Scheduled(_)));
    assert_eq!(lb.send(Instant::ZERO, vec![0; 600]).fate, Fate::Dropped(DropReason::QueueFull));
    assert!(matches!(lb.send(Instant::ZERO, vec![0; 400]).fate, Fate::Scheduled(_)));
    assert_eq!(l.stats().drop_queue, 4);
}

#[test]
fn bernoulli_loss_duplication_corruption_reordering_rates() {
    let p = LinkParams {
        loss: Loss::Bernoulli(0.01),
        duplicate: 0.02,
        corrupt: Corrupt::PerPacket(0.005),
        reorder: 0.03,
        delay: Duration::from_millis(1),
        ..LinkParams::default()
    };
    let mut l = link(p, 7);
    let out = run(&mut l, N, 20);
    let s = l.stats();
    assert_eq!(s.offered, N);
    assert_binomial("loss", s.drop_loss, N, 0.01);
    let kept = N - s.drop_loss;
    assert_binomial("duplicate", s.duplicated, kept, 0.02);
    let copies = kept + s.duplicated;
    assert_eq!(out.len() as u64, copies);
    assert_binomial("corrupt", s.corrupted, copies, 0.005);
    assert_binomial("reorder", s.reordered, copies, 0.03);
    assert_eq!(out.iter().filter(|o| o.2).count() as u64, s.corrupted);
    assert_eq!(out.iter().filter(|o| o.3).count() as u64, s.duplicated);
}

#[test]
fn bit_error_rate_flips_the_expected_number_of_bits() {
    let ber = 1e-4;
    let mut l = link(LinkParams { corrupt: Corrupt::BitErrorRate(ber), ..LinkParams::default() }, 3);
    let n = 100_000u64;
    let mut flipped = 0u64;
    for i in 0..n {
        let now = Instant::from_micros(i);
        l.send(now, vec![0u8; 125]);
        while let Some(d) = l.poll(now) {
            flipped += d.packet.iter().map(|b| u64::from(b.count_ones())).sum::<u64>();
        }
    }
    assert_binomial("bit errors", flipped, n * 1000, ber);
}

#[test]
fn gilbert_elliott_matches_the_model() {
    let (p, r) = (0.01, 0.25);
    let mut l = link(
        LinkParams {
            loss: Loss::GilbertElliott { p, r, loss_bad: 1.0, loss_good: 0.0, max_burst: 0 },
            ..LinkParams::default()
        },
        11,
    );
    let mut bursts: Vec<u32> = Vec::new();
    let mut run_len = 0;
    for i in 0..N {
        let lost = l.send(Instant::from_micros(i), vec![0; 10]).fate == Fate::Dropped(DropReason::Loss);
        if lost {
            run_len += 1;
        } else if run_len > 0 {
            bursts.push(run_len);
            run_len = 0;
        }
        let _ = l.poll(Instant::from_micros(i));
    }
    let loss_rate = l.stats().drop_loss as f64 / N as f64;
    let stationary = p / (p + r);
    assert!((loss_rate / stationary - 1.0).abs() < 0.05, "loss {loss_rate:.5}, model {stationary:.5}");
    let mean_burst = bursts.iter().map(|&b| f64::from(b)).sum::<f64>() / bursts.len() as f64;
    assert!((mean_burst * r - 1.0).abs() < 0.05, "mean burst {mean_burst:.3}, model {}", 1.0 / r);
    // Burst lengths are geometric: P(length = 1) = r.
    let ones = bursts.iter().filter(|&&b| b == 1).count() as f64 / bursts.len() as f64;
    assert!((ones - r).abs() < 0.02, "P(burst=1) = {ones:.3}, model {r}");

    // With a cap, no burst exceeds it.
    let mut capped = link(
        LinkParams {
            loss: Loss::GilbertElliott { p: 0.05, r: 0.01, loss_bad: 1.0, loss_good: 0.0, max_burst: 3 },
            ..LinkParams::default()
        },
        12,
    );
    let mut run_len = 0;
    for i in 0..100_000u64 {
        if capped.send(Instant::from_micros(i), vec![0; 10]).fate == Fate::Dropped(DropReason::Loss) {
            run_len += 1;
            assert!(run_len <= 3, "burst of {run_len} despite cap 3");
        } else {
            run_len = 0;
        }
    }
}

#[test]
fn jitter_preserves_order_unless_allowed_to_reorder() {
    for dist in [JitterDist::Uniform, JitterDist::Normal, JitterDist::Pareto] {
        let base = LinkParams {
            delay: Duration::from_millis(10),
            jitter: Duration::from_millis(3),
            jitter_dist: dist,
            ..LinkParams::default()
        };
        let mut l = link(base.clone(), 5);
        let out = run(&mut l, 20_000, 10);
        assert!(out.windows(2).all(|w| w[0].0 < w[1].0), "{dist:?}: order-preserving jitter reordered");
        let spread = out.iter().map(|o| o.1.as_nanos() - o.0 * 1000).max().unwrap();
        assert!(spread > 10_000_000, "{dist:?}: no jitter at all");
        let mut r = link(LinkParams { jitter_reorders: true, ..base }, 5);
        let out = run(&mut r, 20_000, 10);
        assert!(out.windows(2).any(|w| w[0].0 > w[1].0), "{dist:?}: reordering jitter never reordered");
        // Never earlier than the serialisation end (here: the send time).
        assert!(out.iter().all(|o| o.1.as_nanos() >= o.0 * 1000));
    }
}

#[test]
fn mtu_blackouts_and_schedules() {
    let spec = parse_line("mtu 1500 blackout 1s-2s delay 1ms at 3s delay 50ms").unwrap();
    let mut l = Link::new(spec.params, spec.changes, Instant::ZERO, 1, "x").unwrap();
    assert_eq!(l.send(Instant::ZERO, vec![0; 1501]).fate, Fate::Dropped(DropReason::Mtu));
    assert_eq!(l.send(Instant::from_millis(1500), vec![0; 10]).fate, Fate::Dropped(DropReason::Blackout));
    assert_eq!(
        l.send(Instant::from_millis(2500), vec![0; 10]).fate,
        Fate::Scheduled(Instant::from_millis(2501))
    );
    assert_eq!(l.send(Instant::from_secs(3), vec![0; 10]).fate, Fate::Scheduled(Instant::from_millis(3050)));
    assert_eq!(l.params().mtu, 1500, "changes inherit earlier settings");
}

#[test]
fn same_seed_same_trace() {
    let p = parse_line("delay 20ms 5ms dist normal loss 2% duplicate 1% reorder 1% corrupt 1% rate 10mbit")
        .unwrap()
        .params;
    let trace = |seed: u64, label: &str| {
        let mut l = Link::new(p.clone(), vec![], Instant::ZERO, seed, label).unwrap();
        run(&mut l, 10_000, 200)
    };
    assert_eq!(trace(9, "a"), trace(9, "a"));
    assert_ne!(trace(9, "a"), trace(10, "a"));
    assert_ne!(trace(9, "a"), trace(9, "b"));
}

/// netem's `slot`: packets leave only at slot starts, at most `packets` per
/// slot, and none waits longer than it must.
#[test]
fn slotting_releases_packets_in_bursts_at_slot_starts() {
    let p = parse_line("delay 10ms slot 1ms packets 3").unwrap().params;
    let mut l = link(p, 7);
    // One packet every 100 µs for 20 ms.
    for i in 0..200u64 {
        let _ = l.send(Instant::from_nanos(i * 100_000), vec![0u8; 100]);
    }
    let mut out: Vec<u64> = Vec::new();
    let mut now = Instant::ZERO;
    while let Some(t) = l.next_arrival() {
        now = now.max(t);
        match l.poll(now) {
            Some(d) => {
                assert!(d.at <= now, "a delivery says it left after it was polled");
                out.push(d.at.as_nanos());
            }
            None => {
                // A slot was drawn: ask again.
                if l.next_arrival() == Some(t) {
                    now += Duration::from_nanos(1);
                }
            }
        }
        assert!(out.len() <= 200 && now < Instant::from_nanos(10_000_000_000), "runaway");
    }
    assert_eq!(out.len(), 200, "every packet leaves");
    // Bursts: release instants repeat, at most 3 packets at one instant.
    let mut per_instant = std::collections::BTreeMap::new();
    for t in &out {
        *per_instant.entry(*t).or_insert(0) += 1;
    }
    assert!(per_instant.values().all(|&n| n <= 3), "{per_instant:?}");
    assert!(per_instant.len() < 200, "no bursts at all");
    // Nothing leaves before its 10 ms delay.
    assert!(out[0] >= 10_000_000, "{}", out[0]);
}
