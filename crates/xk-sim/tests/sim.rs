//! The simulator with toy nodes: time jumps, routing, determinism by seed.

use std::collections::VecDeque;

use xk_netemu::{LinkParams, Loss, parse_line};
use xk_sim::{Addr, Node, Sim, SimError};
use xk_time::{Duration, Instant};

/// Sends `count` numbered datagrams to `peer`, one every `gap`, and records
/// every echo it gets back; echoes whatever it receives if it is the server.
struct Pinger {
    peer: Option<Addr>,
    count: u32,
    sent: u32,
    gap: Duration,
    next: Instant,
    out: VecDeque<(Addr, Vec<u8>)>,
    got: Vec<(Instant, u32)>,
}

impl Pinger {
    fn client(peer: Addr, count: u32, gap: Duration) -> Self {
        Pinger {
            peer: Some(peer),
            count,
            sent: 0,
            gap,
            next: Instant::ZERO,
            out: VecDeque::new(),
            got: vec![],
        }
    }
    fn server() -> Self {
        Pinger {
            peer: None,
            count: 0,
            sent: 0,
            gap: Duration::ZERO,
            next: Instant::MAX,
            out: VecDeque::new(),
            got: vec![],
        }
    }
}

impl Node for Pinger {
    fn handle_datagram(&mut self, now: Instant, from: Addr, data: Vec<u8>) {
        if self.peer.is_none() {
            self.out.push_back((from, data));
        } else {
            self.got.push((now, u32::from_be_bytes(data[..4].try_into().unwrap())));
        }
    }
    fn handle_timeout(&mut self, now: Instant) {
        if let Some(peer) = self.peer
            && self.sent < self.count
            && now >= self.next
        {
            self.out.push_back((peer, self.sent.to_be_bytes().to_vec()));
            self.sent += 1;
            self.next = now + self.gap;
        }
    }
    fn poll_transmit(&mut self, _now: Instant) -> Option<(Addr, Vec<u8>)> {
        self.out.pop_front()
    }
    fn poll_timeout(&mut self) -> Option<Instant> {
        (self.peer.is_some() && self.sent < self.count).then_some(self.next)
    }
}

fn pair(seed: u64, line: &str) -> (Sim<Pinger>, xk_sim::NodeId) {
    let mut sim = Sim::new(seed);
    let (s, saddr) = sim.add_node(Pinger::server());
    let (c, _) = sim.add_node(Pinger::client(saddr, 1000, Duration::from_millis(1)));
    let p = parse_line(line).unwrap().params;
    sim.connect(c, s, p.clone(), p).unwrap();
    (sim, c)
}

#[test]
fn round_trips_take_exactly_two_link_delays() {
    let (mut sim, c) = pair(1, "delay 10ms");
    let report = sim.run_for(Duration::from_secs(10), 1_000_000).unwrap();
    let got = &sim.node(c).got;
    assert_eq!(got.len(), 1000);
    for &(at, n) in got {
        assert_eq!(at, Instant::from_millis(u64::from(n) + 20), "echo {n}");
    }
    assert_eq!(report.sent, 2000);
    assert_eq!(report.delivered, 2000);
    // Time jumped: about one event per datagram and timer, not one per tick.
    assert!(report.events <= 3000, "{report}");
}

#[test]
fn same_seed_same_trace_hash_and_different_seed_differs() {
    let line = "delay 5ms 2ms loss 5% duplicate 1% reorder 2% rate 1mbit";
    let run = |seed| {
        let (mut sim, c) = pair(seed, line);
        let r = sim.run_for(Duration::from_secs(20), 1_000_000).unwrap();
        (r.trace_hash, sim.node(c).got.clone())
    };
    let (h1, g1) = run(42);
    let (h2, g2) = run(42);
    assert_eq!(h1, h2);
    assert_eq!(g1, g2);
    let (h3, _) = run(43);
    assert_ne!(h1, h3);
    assert!(g1.len() < 1000 && g1.len() > 800, "about 10% lost over two crossings: {}", g1.len());
}

#[test]
fn errors_name_the_seed() {
    let mut sim: Sim<Pinger> = Sim::new(777);
    let (s, saddr) = sim.add_node(Pinger::server());
    let (c, _) = sim.add_node(Pinger::client(saddr, 1000, Duration::from_millis(1)));
    let e = sim.run_for(Duration::from_secs(1), 100).unwrap_err();
    assert!(matches!(e, SimError::NoRoute { seed: 777, .. }));
    assert!(e.to_string().contains("seed 777"));
    sim.connect(
        c,
        s,
        LinkParams::default(),
        LinkParams { loss: Loss::Bernoulli(0.0), ..LinkParams::default() },
    )
    .unwrap();
    let e = sim.run_until(Instant::MAX, 50, |_| false).unwrap_err();
    assert!(matches!(e, SimError::EventBudget { seed: 777, .. }), "{e}");
}
