//! Spoofed-FIRST floods in the simulator (G27): a server receives FIRSTs
//! from random, never-answering addresses while a legitimate client runs a
//! bulk transfer to it. The flood is injected at the server (as if it came
//! in from the network); what the server sends to spoofed addresses is
//! counted and dropped. Asserted: contexts bounded, every spoofed context
//! freed within `half_open_timeout`, bytes sent to spoofed sources at most
//! 3× the bytes received from them, and the legitimate goodput kept.

mod common;

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};

use common::*;
use xk_netemu::LinkParams;
use xk_sim::Sim;
use xk_time::{Duration, Instant};
use xtp_proto::{ContextConfig, Endpoint, EndpointConfig};
use xtp_testkit::{App, Host, Pair};
use xtp_wire::Options;

struct Flood {
    /// FIRSTs still to inject, and one every `gap`.
    left: u64,
    gap: Duration,
    next: Instant,
    rng: u64,
    rx: u64,
    tx: u64,
    tx_packets: u64,
    /// Largest number of contexts the server held.
    peak_contexts: usize,
}

impl Flood {
    fn spoofed(a: &SocketAddr) -> bool {
        matches!(a, SocketAddr::V4(v) if v.ip().octets()[0] == 172)
    }

    fn next_u64(&mut self) -> u64 {
        // SplitMix64: a seeded stream of addresses and keys.
        self.rng = self.rng.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

/// A host's script with, at the server, a flood injected as if from the
/// network; what the server sends to spoofed sources is counted and dropped.
struct Flooded {
    script: Script,
    flood: Option<Flood>,
}

impl App for Flooded {
    fn poll(&mut self, ep: &mut Endpoint, now: Instant) {
        self.script.poll(ep, now);
    }
    fn on_datagram(&mut self, now: Instant, from: SocketAddr, packet: &[u8]) {
        self.script.on_datagram(now, from, packet);
    }
    fn on_timeout(&mut self, ep: &mut Endpoint, now: Instant) {
        if let Some(f) = &mut self.flood {
            while f.left > 0 && f.next <= now {
                let r = f.next_u64();
                let ip = Ipv4Addr::new(172, 16 + (r >> 60) as u8, (r >> 8) as u8, r as u8);
                let from = SocketAddr::V4(SocketAddrV4::new(ip, (r >> 16) as u16 | 1024));
                let key = (f.next_u64() & 0x7fff_ffff_ffff_ffff) | 1 << 32;
                let p = first_packet(key, 0, 7, &[0x5a; 100], Options::SREQ);
                f.rx += p.len() as u64;
                ep.handle_datagram(now, from, p);
                f.left -= 1;
                f.next += f.gap;
            }
            f.peak_contexts = f.peak_contexts.max(ep.context_count());
        }
    }
    fn on_transmit(&mut self, ep: &mut Endpoint, now: Instant, dst: SocketAddr, packet: &[u8]) -> bool {
        let keep = self.script.on_transmit(ep, now, dst, packet);
        match &mut self.flood {
            Some(f) if Flood::spoofed(&dst) => {
                f.tx += packet.len() as u64;
                f.tx_packets += 1;
                false
            }
            _ => keep,
        }
    }
    fn poll_timeout(&self) -> Option<Instant> {
        self.flood.as_ref().filter(|f| f.left > 0).map(|f| f.next)
    }
}

struct Outcome {
    goodput_bps: f64,
    flood: Option<Flood>,
    contexts_after: usize,
    stats: xtp_proto::EndpointStats,
}

/// A 20 Mbit/s, 20 ms RTT path; bulk for `secs` (goodput measured over
/// the flood's span, from 1 s), then run on until `until`.
fn run(seed: u64, firsts: u64, over: Duration, until: Instant) -> Outcome {
    println!("seed {seed}: {firsts} spoofed FIRSTs over {over:?}");
    let link = LinkParams {
        delay: Duration::from_millis(10),
        rate_bps: 20_000_000,
        limit_packets: 200,
        ..LinkParams::default()
    };
    let flood = (firsts > 0).then(|| Flood {
        left: firsts,
        gap: over / firsts.max(1) as u32,
        next: Instant::from_secs(1),
        rng: seed,
        rx: 0,
        tx: 0,
        tx_packets: 0,
        peak_contexts: 0,
    });
    let cfg = EndpointConfig::default();
    let host = |role, seed, flood| {
        Host::new(Endpoint::new(cfg.clone(), seed), Flooded { script: Script::new(role), flood })
    };
    let server = host(sink(7), seed ^ 1, flood);
    let client = host(Role::Bulk { port: 7, cfg: ContextConfig::stream() }, seed ^ 2, None);
    let Pair { mut sim, client: c, server: s, client_addr, server_addr } =
        xtp_testkit::pair(seed, client, server, link.clone(), link);
    sim.node_mut(c).script.peer = Some(server_addr);
    sim.node_mut(s).script.peer = Some(client_addr);
    for n in [s, c] {
        sim.node_mut(n).with(|f, ep| f.script.start(ep, Instant::ZERO));
    }
    let t1 = Instant::from_secs(1);
    sim.run_until(t1, u64::MAX, |_| false).unwrap();
    // The legitimate transfer only (the sink also reads the spoofed FIRSTs'
    // data): what the server acknowledged to the client.
    let acked = |sim: &Sim<xtp_testkit::Host<Flooded>>| {
        let h = sim.node(c);
        h.ep.context_stats(h.script.ctx.unwrap()).map_or(0, |st| st.bytes_acked)
    };
    let at = acked(&sim);
    let t2 = t1 + over.max(Duration::from_secs(5));
    sim.run_until(t2, u64::MAX, |_| false).unwrap();
    let goodput_bps = (acked(&sim) - at) as f64 * 8.0 / (t2 - t1).as_secs_f64();
    sim.run_until(until, u64::MAX, |_| false).unwrap();
    let node = sim.node_mut(s);
    Outcome {
        goodput_bps,
        contexts_after: node.ep.context_count(),
        stats: node.ep.stats(),
        flood: node.app.flood.take(),
    }
}

fn check(firsts: u64, over: Duration) {
    let seed = 0x13_f100d ^ firsts;
    let base = run(seed, 0, over, Instant::from_secs(8));
    let cfg = EndpointConfig::default();
    let until = Instant::from_secs(1) + over + cfg.half_open_timeout + Duration::from_secs(2);
    let o = run(seed, firsts, over, until);
    let f = o.flood.as_ref().unwrap();
    let s = o.stats;
    println!(
        "goodput {:.1} Mbit/s with the flood, {:.1} without; peak contexts {}; at {}: {} contexts",
        o.goodput_bps / 1e6,
        base.goodput_bps / 1e6,
        f.peak_contexts,
        until,
        o.contexts_after
    );
    println!(
        "spoofed: {} B in, {} B ({} packets) out = {:.2}x; evicted {}, expired {}, refused {}/{}, refusal DIAGs suppressed {}, blocked by amplification {}",
        f.rx,
        f.tx,
        f.tx_packets,
        f.tx as f64 / f.rx as f64,
        s.half_open_evicted,
        s.half_open_expired,
        s.refused_max_contexts,
        s.refused_peer_limit,
        s.refusals_suppressed,
        s.amplification_blocked
    );
    assert!(f.peak_contexts <= cfg.max_half_open + 2, "contexts bounded: {}", f.peak_contexts);
    assert!(
        o.contexts_after <= 1,
        "every spoofed context freed within half_open_timeout: {} left",
        o.contexts_after
    );
    assert!(f.tx <= 3 * f.rx, "amplification: {} B out for {} B in", f.tx, f.rx);
    assert!(
        o.goodput_bps >= 0.9 * base.goodput_bps,
        "legitimate goodput kept: {:.1} vs {:.1} Mbit/s",
        o.goodput_bps / 1e6,
        base.goodput_bps / 1e6
    );
    assert!(base.goodput_bps > 15e6, "the path is used: {:.1} Mbit/s", base.goodput_bps / 1e6);
    assert_eq!(s.half_open_evicted + s.half_open_expired + s.refused_max_contexts, firsts, "{s:?}");
}

#[test]
fn five_thousand_spoofed_firsts() {
    check(5_000, Duration::from_secs(5));
}

#[test]
fn a_hundred_thousand_spoofed_firsts() {
    check(100_000, Duration::from_secs(5));
}
