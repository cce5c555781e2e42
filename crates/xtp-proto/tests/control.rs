//! Rate control and FASTNAK, measured in the simulator.

mod common;

use common::*;
use xk_netemu::{LinkParams, parse_line};
use xk_time::{Duration, Instant};
use xtp_proto::{Congestion, ContextConfig};

/// RATE 1,000,000 B/s: over 10 s of virtual time the bytes put on the wire
/// (XTP packets, headers included) are within 2 % of 10,000,000.
#[test]
fn rate_control_holds_the_configured_rate() {
    let mut cfg = ContextConfig::stream();
    cfg.out_rate = 1_000_000;
    cfg.out_burst = 16_384;
    let client = Role::Client { port: 7, messages: vec![pattern(30_000_000, 3)], cfg };
    let fast = parse_line("delay 2ms rate 1gbit").unwrap().params;
    let (mut sim, c, s) = pair(21, client, Role::Server { port: 7, reply: None }, fast.clone(), fast);
    sim.run_until(Instant::from_secs(2), 10_000_000, |_| false).unwrap();
    let before = sim.link_stats(c, s).unwrap().offered_bytes;
    sim.run_until(Instant::from_secs(12), 10_000_000, |_| false).unwrap();
    let after = sim.link_stats(c, s).unwrap().offered_bytes;
    let rate = (after - before) as f64 / 10.0;
    assert!((rate / 1_000_000.0 - 1.0).abs() < 0.02, "achieved {rate:.0} B/s on the wire for RATE 1,000,000");
}

/// 2 MB over a lossy path with and without FASTNAK, 20 seeds, in "pure XTP
/// 4.0" (no congestion window; RATE paces the sender below the bottleneck)
/// with `sreq_every` 1,024. Since Session 21 data asks for status at least
/// once a round trip whatever `sreq_every` says, so without FASTNAK a loss
/// is learnt within about a round trip too (before, only from the next
/// status reply every 1,024 packets or a tail probe: FASTNAK then saved 2 %
/// of the time and timeouts). What FASTNAK must show now: recovery without
/// a timeout, at no cost in time (measured: 11.16 s with it against 11.05 s
/// without, 29,265 against 29,270 datagrams).
#[test]
fn fastnak_recovers_without_timeouts_at_no_cost() {
    let mut totals = [Duration::ZERO; 2];
    let mut retx = [0u64; 2];
    let mut timeouts = [0u64; 2];
    for seed in 0..20u64 {
        for (i, fastnak) in [false, true].into_iter().enumerate() {
            let mut cfg = ContextConfig::stream();
            cfg.fastnak = fastnak;
            cfg.sreq_every = 1024;
            cfg.congestion = Congestion::Disabled;
            cfg.out_rate = 5_000_000;
            cfg.out_burst = 64_000;
            let client = Role::Client { port: 7, messages: vec![pattern(2_000_000, seed)], cfg };
            let lossy: LinkParams = parse_line("delay 25ms rate 50mbit loss 2% limit 1000").unwrap().params;
            let (mut sim, c, s) =
                pair(100 + seed, client, Role::Server { port: 7, reply: None }, lossy.clone(), lossy);
            let r = sim
                .run_until(Instant::from_secs(3600), 10_000_000, |sim| {
                    !sim.node(c).closed.is_empty() && !sim.node(s).closed.is_empty()
                })
                .unwrap();
            assert_eq!(sim.node(s).received().len(), 2_000_000, "{r}");
            totals[i] += r.now - Instant::ZERO;
            retx[i] += sim.node(c).ep.stats().datagrams_out;
            timeouts[i] += sim.node(c).ep.context_stats(sim.node(c).ctx.unwrap()).map_or(0, |s| s.timeouts);
        }
    }
    eprintln!(
        "FASTNAK off: {:.3} s total, {} datagrams, {} timeouts; on: {:.3} s, {} datagrams, {} timeouts \
         (20 transfers of 2 MB, 25 ms, 50 Mbit/s, 2 % loss)",
        totals[0].as_secs_f64(),
        retx[0],
        timeouts[0],
        totals[1].as_secs_f64(),
        retx[1],
        timeouts[1]
    );
    assert_eq!(timeouts[1], 0, "FASTNAK {} timeouts (without: {})", timeouts[1], timeouts[0]);
    assert!(
        totals[1].as_secs_f64() <= totals[0].as_secs_f64() * 1.01,
        "FASTNAK {:?} vs without {:?}",
        totals[1],
        totals[0]
    );
}

/// Ping-pong (a message each way, as `xpress ping -i 0` sends; each
/// datagram takes 10 µs): four packets per round trip — the request, its
/// report, the reply, its report. Each side's reports asked for status too
/// (an RTT probe meant for pure receivers, although each side gets a sample
/// from its own data every round trip), and the answers made six: 1.65x the
/// engine's instructions per round trip against session 3's (issue #13).
#[test]
fn ping_pong_costs_four_packets_per_round_trip() {
    use bytes::Bytes;
    use xtp_proto::{Endpoint, EndpointConfig, Event};
    let aa: std::net::SocketAddr = "10.0.0.1:1".parse().unwrap();
    let ba: std::net::SocketAddr = "10.0.0.2:1".parse().unwrap();
    let mut a = Endpoint::new(EndpointConfig::default(), 1);
    let mut b = Endpoint::new(EndpointConfig::default(), 2);
    b.listen(7, ContextConfig::stream()).unwrap();
    let c = a.connect(Instant::ZERO, ba, 7, ContextConfig::stream()).unwrap();
    let mut now = Instant::ZERO;
    let mut buf = vec![0u8; 2048];
    let (mut packets, mut start) = (0u64, 0u64);
    for round in 0..105 {
        if round == 5 {
            start = packets;
        }
        a.write(now, c, Bytes::from_static(b"0123456789"), true, None).unwrap();
        let mut back = 0;
        for _ in 0..1000 {
            let mut moved = false;
            while let Some(t) = a.poll_transmit(now, &mut buf) {
                now += Duration::from_micros(10);
                packets += 1;
                b.handle_datagram(now, aa, Bytes::copy_from_slice(&buf[..t.len]));
                moved = true;
            }
            while let Some(ev) = b.poll_event() {
                if let Event::Readable { ctx } = ev {
                    while let Some(ch) = b.read(now, ctx) {
                        b.write(now, ctx, ch.data, ch.eom, None).unwrap();
                    }
                }
            }
            while let Some(t) = b.poll_transmit(now, &mut buf) {
                now += Duration::from_micros(10);
                packets += 1;
                a.handle_datagram(now, ba, Bytes::copy_from_slice(&buf[..t.len]));
                moved = true;
            }
            while let Some(ev) = a.poll_event() {
                if let Event::Readable { ctx } = ev {
                    while let Some(ch) = a.read(now, ctx) {
                        back += ch.data.len();
                    }
                }
            }
            if !moved && back == 10 {
                break;
            }
            if !moved {
                let next = [a.poll_timeout(), b.poll_timeout()].into_iter().flatten().min().unwrap();
                now = now.max(next);
                a.handle_timeout(now);
                b.handle_timeout(now);
            }
        }
        assert_eq!(back, 10, "round {round}");
    }
    let per = (packets - start) as f64 / 100.0;
    assert!(per <= 4.05, "{per} packets per ping-pong round trip");
}
