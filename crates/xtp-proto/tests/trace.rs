//! The tracing hook: a subscriber that wants events gets every one, with
//! (flow, seq) naming the same bytes at both ends; `NoTrace` declares
//! itself disabled so the engine builds none.

use std::net::SocketAddr;

use bytes::Bytes;
use xk_time::{Duration, Instant};
use xtp_proto::{ContextConfig, Endpoint, EndpointConfig, Event, NoTrace, Recorder, Subscriber, Trace};

fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

/// Two recording endpoints, `a` connected to `b`'s port 7 at 1 s (the
/// FIRST not yet sent): `(a, a's address, b, b's address, a's context)`.
fn recorded_pair() -> (Endpoint<Recorder>, SocketAddr, Endpoint<Recorder>, SocketAddr, xtp_proto::ContextId) {
    let (aa, ba) = (addr("10.0.0.1:1"), addr("10.0.0.2:1"));
    let mut a = Endpoint::with_subscriber(EndpointConfig::default(), 1, Recorder::default());
    let mut b = Endpoint::with_subscriber(EndpointConfig::default(), 2, Recorder::default());
    b.listen(7, ContextConfig::stream()).unwrap();
    let ctx = a.connect(Instant::from_secs(1), ba, 7, ContextConfig::stream()).unwrap();
    (a, aa, b, ba, ctx)
}

/// Moves every datagram `from` has to `to`; returns how many.
fn carry(from: &mut Endpoint<Recorder>, fa: SocketAddr, to: &mut Endpoint<Recorder>, now: Instant) -> usize {
    let mut buf = vec![0u8; 2048];
    let mut n = 0;
    while let Some(t) = from.poll_transmit(now, &mut buf) {
        to.handle_datagram(now, fa, Bytes::copy_from_slice(&buf[..t.len]));
        n += 1;
    }
    n
}

#[test]
fn recorder_sees_both_ends_of_every_byte_with_the_same_flow_and_seq() {
    let (mut a, aa, mut b, ba, ctx) = recorded_pair();
    let mut now = Instant::from_secs(1);
    a.write(now, ctx, Bytes::from(vec![7u8; 3000]), true, None).unwrap();
    let mut got = 0;
    for _ in 0..100 {
        now += Duration::from_micros(10);
        let moved = carry(&mut a, aa, &mut b, now) + carry(&mut b, ba, &mut a, now);
        while let Some(ev) = b.poll_event() {
            if let Event::Incoming { ctx, .. } | Event::Readable { ctx } = ev {
                while let Some(c) = b.read(now, ctx) {
                    got += c.data.len();
                }
            }
        }
        while a.poll_event().is_some() {}
        if moved == 0 && got == 3000 {
            break;
        }
    }
    assert_eq!(got, 3000);
    let ta = &a.subscriber().events;
    let tb = &b.subscriber().events;
    // The writer's write, its packets' (flow, seq), the reader's reads.
    let Some(Trace::Write { flow, seq: 0, len: 3000, eom: true, .. }) =
        ta.iter().map(|e| &e.1).find(|t| matches!(t, Trace::Write { .. })).cloned()
    else {
        panic!("no write traced: {ta:?}")
    };
    let sent: Vec<u64> = ta
        .iter()
        .filter_map(|(_, t)| match t {
            Trace::PacketSent { flow: f, seq, data, .. } if *f == flow && *data > 0 => Some(*seq),
            _ => None,
        })
        .collect();
    assert!(sent.len() >= 3, "3,000 bytes in several packets: {sent:?}");
    let received: Vec<(u64, usize)> = tb
        .iter()
        .filter_map(|(_, t)| match t {
            Trace::PacketReceived { flow: f, seq, len, .. } if *f == flow => Some((*seq, *len)),
            _ => None,
        })
        .collect();
    // Each data packet arrives with the length it left with (bytes on the
    // wire at both ends).
    let sent_len: Vec<(u64, usize)> = ta
        .iter()
        .filter_map(|(_, t)| match t {
            Trace::PacketSent { flow: f, seq, data, len, .. } if *f == flow && *data > 0 => {
                Some((*seq, *len))
            }
            _ => None,
        })
        .collect();
    for s in &sent_len {
        assert!(s.1 > 0, "{s:?}");
        assert!(
            received.contains(s),
            "packet at seq {} ({} B) of flow {flow:x} not traced at the receiver: {received:?}",
            s.0,
            s.1
        );
    }
    assert_eq!(sent.len(), sent_len.len());
    let reads: Vec<(u64, usize)> = tb
        .iter()
        .filter_map(|(_, t)| match t {
            Trace::Read { flow: f, seq, len, .. } if *f == flow => Some((*seq, *len)),
            _ => None,
        })
        .collect();
    assert_eq!(reads.iter().map(|r| r.1).sum::<usize>(), 3000);
    assert_eq!(reads[0].0, 0);
    // The other direction is another flow: the responder's control packets.
    assert!(tb.iter().any(|(_, t)| matches!(t, Trace::PacketSent { flow: f, .. } if *f != flow && *f != 0)));
    // Timestamps never go backwards.
    assert!(ta.windows(2).all(|w| w[0].0 <= w[1].0));
}

#[test]
fn only_no_trace_is_disabled() {
    const { assert!(!NoTrace::ENABLED) };
    const { assert!(Recorder::ENABLED) };
}

/// Every span edge in `events`, as (work, begin), in order.
fn spans(events: &[(Instant, Trace)]) -> Vec<(xtp_proto::Work, bool)> {
    events
        .iter()
        .filter_map(|(_, t)| match t {
            Trace::Span { work, begin, .. } => Some((*work, *begin)),
            _ => None,
        })
        .collect()
}

/// A bulk transfer with one data packet lost: the congestion controller's
/// growth on acknowledgements and its reduction on the loss, the peer's
/// allocation advancing, the pacer's decisions, and every packet built and
/// parsed as a span with its checksum inside.
#[test]
fn decisions_and_spans_are_traced() {
    use xtp_proto::{WindowCause, Work};
    let (mut a, aa, mut b, ba, ctx) = recorded_pair();
    let mut now = Instant::from_secs(1);
    let total = 400_000usize;
    let (mut written, mut got, mut sent_data, mut parsed) = (0, 0, 0, 0);
    let mut buf = vec![0u8; 2048];
    for _ in 0..20_000 {
        now += Duration::from_micros(200);
        for e in [&mut a, &mut b] {
            if e.poll_timeout().is_some_and(|t| t <= now) {
                e.handle_timeout(now);
            }
        }
        while written < total && a.can_write(ctx) {
            a.write(now, ctx, Bytes::from(vec![1u8; 8000]), false, None).unwrap();
            written += 8000;
        }
        // a → b, the 40th data packet lost.
        while let Some(t) = a.poll_transmit(now, &mut buf) {
            if t.len > 1000 {
                sent_data += 1;
                if sent_data == 40 {
                    continue;
                }
            }
            b.handle_datagram(now, aa, Bytes::copy_from_slice(&buf[..t.len]));
            parsed += 1;
        }
        while let Some(t) = b.poll_transmit(now, &mut buf) {
            a.handle_datagram(now, ba, Bytes::copy_from_slice(&buf[..t.len]));
        }
        while let Some(ev) = b.poll_event() {
            if let Event::Incoming { ctx, .. } | Event::Readable { ctx } = ev {
                while let Some(c) = b.read(now, ctx) {
                    got += c.data.len();
                }
            }
        }
        while a.poll_event().is_some() {}
        if got == total {
            break;
        }
    }
    assert_eq!(got, total);
    let ta = &a.subscriber().events;
    let tb = &b.subscriber().events;
    let windows: Vec<(WindowCause, u64, u64)> = ta
        .iter()
        .filter_map(|(_, t)| match t {
            Trace::WindowChange { cause, cwnd, ssthresh, .. } => Some((*cause, *cwnd, *ssthresh)),
            _ => None,
        })
        .collect();
    let acks: Vec<u64> = windows.iter().filter(|w| w.0 == WindowCause::Ack).map(|w| w.1).collect();
    assert!(acks.len() > 5 && acks.windows(2).any(|w| w[1] > w[0]), "no growth traced: {windows:?}");
    let loss = windows.iter().find(|w| w.0 == WindowCause::Loss).expect("the loss's reduction traced");
    assert!(loss.2 < u64::MAX && loss.1 < *acks.iter().max().unwrap(), "{loss:?}");
    let allocs: Vec<u64> = ta
        .iter()
        .filter_map(|(_, t)| match t {
            Trace::FlowWindow { alloc, window, .. } => Some((*alloc, *window)),
            _ => None,
        })
        .map(|(alloc, window)| {
            assert!(window <= alloc);
            alloc
        })
        .collect();
    assert!(allocs.len() > 3 && allocs.windows(2).all(|w| w[1] > w[0]), "{allocs:?}");
    assert!(*allocs.last().unwrap() >= total as u64, "the peer let every byte in");
    assert!(
        ta.iter().any(|(_, t)| matches!(t, Trace::RateDecision { rate, .. } if *rate > 0)),
        "no pacing decision traced"
    );
    // Every packet built: Build, checksum begin/end, Build end — with the
    // packet's own event inside the build span.
    let sent = ta.iter().filter(|(_, t)| matches!(t, Trace::PacketSent { .. })).count();
    let want: Vec<(Work, bool)> = [
        (Work::Build, true),
        (Work::ChecksumCompute, true),
        (Work::ChecksumCompute, false),
        (Work::Build, false),
    ]
    .repeat(sent);
    assert_eq!(
        spans(ta).iter().filter(|s| s.0 != Work::Parse && s.0 != Work::ChecksumVerify).count(),
        want.len()
    );
    let built: Vec<_> =
        spans(ta).into_iter().filter(|s| matches!(s.0, Work::Build | Work::ChecksumCompute)).collect();
    assert_eq!(built, want);
    let mut inside = false;
    for (_, t) in ta {
        match t {
            Trace::Span { work: Work::Build, begin, .. } => inside = *begin,
            Trace::PacketSent { .. } => assert!(inside, "a packet event outside its build span"),
            _ => {}
        }
    }
    // Every datagram b was handed was parsed as a span, its checksum verified inside.
    let p: Vec<_> =
        spans(tb).into_iter().filter(|s| matches!(s.0, Work::Parse | Work::ChecksumVerify)).collect();
    assert_eq!(
        p,
        [
            (Work::Parse, true),
            (Work::ChecksumVerify, true),
            (Work::ChecksumVerify, false),
            (Work::Parse, false)
        ]
        .repeat(parsed)
    );
    let lens: Vec<usize> = tb
        .iter()
        .filter_map(|(_, t)| match t {
            Trace::Span { work: Work::Parse, begin: true, len } => Some(*len),
            _ => None,
        })
        .collect();
    assert!(lens.iter().filter(|l| **l > 1000).count() > 100, "data packets' lengths");
}
