//! A churn of short contexts (connect, 1 KB, close; the server answers 8
//! bytes and closes, as `xpress serve`'s discard service does) against one
//! server endpoint over an instant wire, in virtual time. Asserted: every
//! context ends gracefully, the server holds no context once the shortest
//! linger has passed after the last one, and the bounded tables say when
//! they were full (G25).

mod common;

use std::net::SocketAddr;

use bytes::Bytes;
use common::*;
use xk_time::{Duration, Instant};
use xtp_proto::{CloseReason, ContextConfig, Endpoint, EndpointConfig, Event};

const PORT: u16 = 9;

/// Runs `total` contexts, at most `parallel` at a time, opening one every
/// `gap`; returns the wire after the last has closed on the client.
fn churn(total: u64, parallel: usize, gap: Duration, cfg: EndpointConfig) -> (Wire, u64) {
    churn_as(total, parallel, gap, cfg, false)
}

/// As [`churn`]; with `echo`, as `xpress ping -c 1` does: the server echoes
/// what it reads, and the client closes only once the echo is back (the
/// two sides' ENDs then cross).
fn churn_as(total: u64, parallel: usize, gap: Duration, cfg: EndpointConfig, echo: bool) -> (Wire, u64) {
    let aa: SocketAddr = "10.0.0.1:5000".parse().unwrap();
    let ba: SocketAddr = "10.0.0.2:3636".parse().unwrap();
    let client = Endpoint::new(cfg.clone(), 1);
    let mut server = Endpoint::new(cfg, 2);
    server.listen(PORT, ContextConfig::stream()).unwrap();
    let mut w = Wire::new(client, aa, server, ba, Instant::from_secs(1));
    let (mut opened, mut closed, mut graceful) = (0u64, 0u64, 0u64);
    let mut open = 0usize;
    let mut next_open = w.now;
    let payload = Bytes::from(vec![0x42u8; 1000]);
    for _ in 0..100_000_000u64 {
        while opened < total && open < parallel && next_open <= w.now {
            let c = w.a.connect(w.now, ba, PORT, ContextConfig::stream()).unwrap();
            w.a.write(w.now, c, payload.clone(), false, None).unwrap();
            if !echo {
                w.a.close(w.now, c);
            }
            opened += 1;
            open += 1;
            next_open += gap;
        }
        w.exchange();
        let mut busy = false;
        while let Some(ev) = w.b.poll_event() {
            busy = true;
            match ev {
                Event::Readable { ctx } => {
                    while let Some(c) = w.b.read(w.now, ctx) {
                        if echo {
                            let _ = w.b.write(w.now, ctx, c.data, c.eom, None);
                        }
                    }
                }
                Event::PeerFinished { ctx } => {
                    if !echo {
                        let _ = w.b.write(w.now, ctx, Bytes::from_static(&[0u8; 8]), true, None);
                    }
                    w.b.close(w.now, ctx);
                }
                _ => {}
            }
        }
        while let Some(ev) = w.a.poll_event() {
            busy = true;
            match ev {
                Event::Readable { ctx } => {
                    let mut got = 0;
                    while let Some(c) = w.a.read(w.now, ctx) {
                        got += c.data.len();
                    }
                    // The echo is back: done.
                    if echo && got > 0 {
                        w.a.close(w.now, ctx);
                    }
                }
                Event::Closed { reason, .. } => {
                    closed += 1;
                    open -= 1;
                    graceful += u64::from(reason == CloseReason::Graceful);
                }
                _ => {}
            }
        }
        if closed == total {
            break;
        }
        if busy {
            // What the application did may have output and events of its
            // own: settle them before time moves on.
            continue;
        }
        let timer = [w.a.poll_timeout(), w.b.poll_timeout()].into_iter().flatten().min();
        let next = match (opened < total && open < parallel).then_some(next_open) {
            Some(o) => timer.map_or(o, |t| t.min(o)),
            None => timer.expect("contexts open, so a timer is armed"),
        };
        if next > w.now {
            w.now = next;
        }
        w.a.handle_timeout(w.now);
        w.b.handle_timeout(w.now);
    }
    assert_eq!(closed, total, "every context ended");
    (w, graceful)
}

#[test]
fn a_churn_of_short_contexts_leaves_nothing_on_the_server() {
    let cfg = EndpointConfig::default();
    let total = 20_000;
    // 400 contexts/s from one client address: with the server's contexts
    // lingering 2 s after the END, 800 at a time, within
    // `max_contexts_per_peer` (1,024; G20).
    let (mut w, graceful) = churn(total, 256, Duration::from_micros(2_500), cfg.clone());
    let s = w.b.stats();
    println!(
        "{total} contexts by {}: {graceful} graceful; server: {} contexts, {} accepted, recent keys {} (forgotten early {}), per-peer refusals {}",
        w.now,
        w.b.context_count(),
        s.accepted,
        s.recent_keys,
        s.recent_keys_forgotten,
        s.refused_peer_limit
    );
    assert_eq!(graceful, total, "every context closed gracefully");
    assert_eq!(s.accepted, total);
    assert_eq!(s.refused_peer_limit, 0, "within max_contexts_per_peer");
    // The server is the END receiver here (the client's data is
    // acknowledged first): its contexts linger only `linger`, not the
    // peer's retry span (~100 s at the 200 ms RTO floor).
    w.run(cfg.linger + Duration::from_millis(1));
    assert_eq!(w.b.context_count(), 0, "nothing left on the server {:?} after the last close", cfg.linger);
    let s = w.b.stats();
    assert_eq!((s.half_open, s.half_open_bytes), (0, 0));
    assert_eq!(s.recent_keys, total, "every freed responder's key remembered (G25)");
    assert_eq!(s.unvalidated_datagrams_out, total, "one answer to each FIRST before validation");
}

#[test]
fn an_echo_churn_leaves_nothing_on_the_server_either() {
    // Both sides close on the other's close, so their ENDs cross; each must
    // still linger only `linger`, not the retry span (243 s: a newcomer saw
    // "16 contexts held" on `xpress serve` after 17 pings).
    let cfg = EndpointConfig::default();
    let total = 2_000;
    let (mut w, graceful) = churn_as(total, 64, Duration::from_micros(2_500), cfg.clone(), true);
    assert_eq!(graceful, total, "every context closed gracefully");
    w.run(cfg.linger + Duration::from_millis(1));
    assert_eq!(w.b.context_count(), 0, "the server holds nothing {:?} after the last close", cfg.linger);
    assert_eq!(w.a.context_count(), 0, "nor does the client");
}

#[test]
fn the_recent_key_table_says_when_a_churn_outruns_it() {
    let cfg = EndpointConfig { recent_keys_max: 1_000, ..EndpointConfig::default() };
    let (mut w, _) = churn(3_000, 64, Duration::from_micros(2_500), cfg.clone());
    w.run(cfg.linger + Duration::from_millis(1));
    let s = w.b.stats();
    assert_eq!(w.b.context_count(), 0);
    assert_eq!((s.recent_keys, s.recent_keys_forgotten), (1_000, 2_000), "{s:?}");
}
