//! The shared radio channel against its rules (`xk_netemu::channel`): exact
//! timing, the geometric persistence wait, the collision probability of
//! p-persistent CSMA, carrier sense with its detect window, half duplex,
//! noise rates inside 99 % binomial intervals, determinism.

mod common;

use common::assert_binomial;
use xk_netemu::{Channel, CsmaParams, Fate, LinkParams, LinkSpec, Loss, Path, parse_line};
use xk_time::{Duration, Instant};

fn radio(persist: f64) -> LinkParams {
    LinkParams {
        rate_bps: 1200,
        overhead: 20,
        delay: Duration::from_millis(5),
        csma: Some(CsmaParams {
            txdelay: Duration::from_millis(500),
            persist,
            slot: Duration::from_millis(100),
            txtail: Duration::from_millis(10),
            dcd: Duration::from_millis(10),
            maxframe: 7,
        }),
        ..LinkParams::default()
    }
}

fn channel(p: LinkParams, seed: u64) -> Channel<Vec<u8>> {
    Channel::new([p.clone(), p], Instant::ZERO, seed, ["forward", "reverse"]).unwrap()
}

/// A delivery: direction, id, arrival time.
type Got = (usize, u64, Instant);

/// Offers `(time, station, len)` in time order, runs the channel event by
/// event until idle, returns every delivery.
fn drive(ch: &mut Channel<Vec<u8>>, offers: &[(Instant, usize, usize)]) -> Vec<Got> {
    let mut got = Vec::new();
    let mut i = 0;
    loop {
        let next = [offers.get(i).map(|o| o.0), ch.next_event()].into_iter().flatten().min();
        let Some(now) = next else { break };
        for dir in 0..2 {
            while let Some(d) = ch.poll(now, dir) {
                assert_eq!(d.at, now, "delivered exactly at its time");
                got.push((dir, d.id, d.at));
            }
        }
        while offers.get(i).is_some_and(|o| o.0 == now) {
            let (_, from, len) = offers[i];
            let fate = ch.send(now, from, vec![0; len]).fate;
            assert!(matches!(fate, Fate::Queued | Fate::Dropped(_)), "{fate:?}");
            i += 1;
        }
    }
    got
}

/// Airtime of a `len`-byte frame at 1,200 bit/s with 20 bytes of framing.
fn air(len: u64) -> Duration {
    Duration::from_nanos(((len + 20) * 8 * 1_000_000_000).div_ceil(1200))
}

#[test]
fn timing_is_exact_to_the_nanosecond() {
    let mut ch = channel(radio(1.0), 1);
    // Ten frames at once: one key-up carries seven, the next the other three.
    let offers: Vec<_> = (0..10).map(|_| (Instant::ZERO, 0, 100)).collect();
    let got = drive(&mut ch, &offers);
    assert_eq!(got.len(), 10);
    let txdelay = Duration::from_millis(500);
    let tail = Duration::from_millis(10);
    let first_end = Instant::ZERO + txdelay + air(100) * 7 + tail;
    for (k, &(dir, id, at)) in got.iter().enumerate() {
        assert_eq!((dir, id), (0, k as u64));
        let expect = if k < 7 {
            Instant::ZERO + txdelay + air(100) * (k as u32 + 1)
        } else {
            first_end + txdelay + air(100) * (k as u32 - 6)
        };
        assert_eq!(at, expect + Duration::from_millis(5), "frame {k}");
    }
    let s = ch.stats(0);
    assert_eq!((s.key_ups, s.delivered, s.drop_collision), (2, 10, 0));
    assert_eq!(ch.stats(1).offered, 0);
}

#[test]
fn persistence_wait_is_geometric_in_slots() {
    let p = 0.25;
    let mut ch = channel(radio(p), 7);
    let n = 100_000u64;
    let gap = Duration::from_secs(60); // each trial on an idle channel
    let offers: Vec<_> = (0..n).map(|i| (Instant::ZERO + gap * i as u32, 0, 10)).collect();
    let got = drive(&mut ch, &offers);
    assert_eq!(got.len() as u64, n);
    let fixed = Duration::from_millis(500) + air(10) + Duration::from_millis(5);
    let mut counts = [0u64; 4];
    let mut sum = 0u64;
    for &(_, id, at) in &got {
        let wait = at.saturating_since(Instant::ZERO + gap * id as u32) - fixed;
        let slots = wait.as_nanos() / 100_000_000;
        assert_eq!(wait.as_nanos() % 100_000_000, 0, "waits are whole slots");
        sum += slots as u64;
        if let Some(c) = counts.get_mut(slots as usize) {
            *c += 1;
        }
    }
    for (k, &c) in counts.iter().enumerate() {
        assert_binomial(&format!("wait of {k} slots"), c, n, p * (1.0 - p).powi(k as i32));
    }
    // Mean of the geometric: (1 - p) / p = 3 slots, variance (1 - p) / p² = 12.
    let mean = sum as f64 / n as f64;
    let half = 2.576 * (12.0 / n as f64).sqrt();
    assert!((mean - 3.0).abs() < half, "mean wait {mean} slots, expected 3 ± {half}");
    assert_eq!(ch.stats(0).key_ups, n);
}

#[test]
fn simultaneous_offers_collide_with_probability_p_over_2_minus_p() {
    // Both stations get a frame at the same instant on an idle channel. They
    // draw at the same slot boundaries; the first slot in which either
    // transmits decides: both (collision) with probability p² / (1 - (1-p)²).
    let p = 0.25;
    let mut ch = channel(radio(p), 11);
    let n = 50_000u64;
    let gap = Duration::from_secs(60);
    let mut offers = Vec::new();
    for i in 0..n {
        let t = Instant::ZERO + gap * i as u32;
        offers.push((t, 0, 50));
        offers.push((t, 1, 50));
    }
    let got = drive(&mut ch, &offers);
    let (a, b) = (ch.stats(0), ch.stats(1));
    assert_eq!(a.drop_collision, b.drop_collision, "a collision loses both frames");
    assert_eq!(got.len() as u64 + a.drop_collision + b.drop_collision, 2 * n);
    assert_binomial("collisions", a.drop_collision, n, p / (2.0 - p));
    // Without a collision, the later station waited for the end of the
    // earlier one's transmission: the frames never overlap on the air.
    let mut by_trial = std::collections::BTreeMap::<u64, Vec<(usize, Instant)>>::new();
    for &(dir, id, at) in &got {
        by_trial.entry(id).or_default().push((dir, at));
    }
    for (id, v) in by_trial {
        if v.len() == 2 {
            let gap = v[0].1.as_nanos().abs_diff(v[1].1.as_nanos());
            let min = (Duration::from_millis(500 + 10) + air(50)).as_nanos() as u64;
            assert!(gap >= min, "trial {id}: frames {gap} ns apart overlap");
        }
    }
}

#[test]
fn carrier_sense_and_the_detect_window() {
    let ms = Instant::from_millis;
    // Inside the 10 ms detect window, or exactly at its end: not sensed, so
    // both stations transmit and both frames are lost (half duplex).
    for t in [ms(5), ms(10)] {
        let mut ch = channel(radio(1.0), 3);
        let got = drive(&mut ch, &[(ms(0), 0, 100), (t, 1, 100)]);
        assert!(got.is_empty(), "offer at {t}: {got:?}");
        assert_eq!((ch.stats(0).drop_collision, ch.stats(1).drop_collision), (1, 1));
        // Each lost frame is reported once, with its id and the end of its airtime.
        let drops = ch.take_air_drops();
        let ends = [ms(500) + air(100), t + Duration::from_millis(500) + air(100)];
        assert_eq!(drops.len(), 2, "{drops:?}");
        for d in &drops {
            assert_eq!((d.id, d.reason, d.at), (0, xk_netemu::DropReason::Collision, ends[d.dir]));
        }
        assert!(ch.take_air_drops().is_empty());
    }
    // One nanosecond later the carrier is sensed: station 1 waits for the
    // end of station 0's transmission and keys up right then.
    let mut ch = channel(radio(1.0), 3);
    let late = ms(10) + Duration::from_nanos(1);
    let got = drive(&mut ch, &[(ms(0), 0, 100), (late, 1, 100)]);
    let end0 = ms(500) + air(100) + Duration::from_millis(10);
    assert_eq!(
        got,
        vec![
            (0, 0, ms(500) + air(100) + Duration::from_millis(5)),
            (1, 0, end0 + Duration::from_millis(500) + air(100) + Duration::from_millis(5)),
        ]
    );
    assert_eq!(ch.stats(1).drop_collision, 0);
}

#[test]
fn noise_applies_after_the_channel_at_its_rate() {
    let mut p = radio(1.0);
    p.rate_bps = 1_000_000_000;
    p.loss = Loss::Bernoulli(0.1);
    p.corrupt = xk_netemu::Corrupt::PerPacket(0.05);
    p.csma.as_mut().unwrap().txdelay = Duration::ZERO;
    let mut ch = channel(p, 5);
    let n = 1_000_000u64;
    let offers: Vec<_> = (0..n).map(|i| (Instant::from_micros(i), 0, 20)).collect();
    let got = drive(&mut ch, &offers);
    let s = ch.stats(0);
    assert_eq!(s.drop_collision, 0);
    assert_binomial("loss", s.drop_loss, n, 0.1);
    assert_binomial("corruption", s.corrupted, n - s.drop_loss, 0.05);
    assert_eq!(got.len() as u64, n - s.drop_loss);
}

#[test]
fn queue_mtu_and_blackout_drop_at_the_station() {
    let mut p = radio(1.0);
    p.limit_packets = 3;
    p.mtu = 238;
    p.blackouts =
        vec![xk_netemu::Blackout { start: Duration::from_secs(100), end: Duration::from_secs(101) }];
    let mut ch = channel(p, 1);
    let o: Vec<_> = (0..5).map(|_| (Instant::ZERO, 0, 100)).collect();
    assert_eq!(drive(&mut ch, &o).len(), 3);
    assert_eq!(ch.stats(0).drop_queue, 2);
    assert!(matches!(ch.send(Instant::from_secs(50), 0, vec![0; 239]).fate, Fate::Dropped(_)));
    assert!(matches!(ch.send(Instant::from_secs(100), 1, vec![0; 10]).fate, Fate::Dropped(_)));
    assert_eq!((ch.stats(0).drop_mtu, ch.stats(1).drop_blackout), (1, 1));
}

#[test]
fn same_seed_same_trace_and_path_picks_the_model() {
    let busy = |seed| {
        let mut ch = channel(radio(0.5), seed);
        let offers: Vec<_> = (0..400)
            .map(|i| (Instant::from_millis(i * 700), (i % 3 == 0) as usize, 30 + (i as usize % 200)))
            .collect();
        drive(&mut ch, &offers)
    };
    assert_eq!(busy(9), busy(9));
    assert_ne!(busy(9), busy(10));

    let spec = |line: &str| parse_line(line).unwrap();
    let radio = spec("profile packet-radio-9600");
    let path: Path<Vec<u8>> = Path::new(&radio, &radio, Instant::ZERO, 1, ["f", "r"]).unwrap();
    assert!(path.is_shared());
    let wired = spec("delay 1ms");
    let path: Path<Vec<u8>> = Path::new(&wired, &wired, Instant::ZERO, 1, ["f", "r"]).unwrap();
    assert!(!path.is_shared());
    // One channel: both directions must agree on its rules and rate.
    let e = Path::<Vec<u8>>::new(&radio, &wired, Instant::ZERO, 1, ["f", "r"]).err().unwrap();
    assert_eq!(e.param, "csma");
    let other = spec("profile packet-radio-1200");
    let e = Path::<Vec<u8>>::new(&radio, &other, Instant::ZERO, 1, ["f", "r"]).err().unwrap();
    assert_eq!(e.param, "rate");
    let sched: LinkSpec = spec("profile packet-radio-9600 at 1s loss 1%");
    let e = Path::<Vec<u8>>::new(&sched, &radio, Instant::ZERO, 1, ["f", "r"]).err().unwrap();
    assert!(e.reason.contains("schedules"), "{e}");
    // A Link alone refuses the shared channel.
    assert!(xk_netemu::Link::<Vec<u8>>::new(radio.params, vec![], Instant::ZERO, 1, "x").is_err());
}
