//! XTP in the compiled stack (`xk_core::compiled::Stack`, session 15): the
//! same `XtpProtocol` as in the dynamic graph, composed at compile time. It
//! must send the same packets as the graph, and both must hand the
//! application XTP's message boundaries (EOM).

use std::net::SocketAddr;

use bytes::Bytes;
use xk_core::compiled::Stack;
use xk_core::{
    Addr, ArenaId, Control, ControlReply, Event, Graph, GraphBuilder, Part, Participants, ProtocolId,
    PushError, SessionId,
};
use xk_msg::{Contig, Msg, Rope};
use xk_time::{Duration, HeapQueue, Instant};
use xtp_proto::{ContextConfig, EndpointConfig, XtpProtocol};
use xtp_testkit::{GraphWire, StackPair, StackWire};

type Xtp<M> = XtpProtocol<M, HeapQueue<ArenaId>>;

fn addrs() -> (SocketAddr, SocketAddr) {
    ("10.0.0.1:1".parse().unwrap(), "10.0.0.2:1".parse().unwrap())
}

fn listen() -> Participants {
    Participants::local(Part::top_first([Addr::Port(7)]))
}

fn to(ba: SocketAddr) -> Participants {
    Participants::new(Part::new(), Part::top_first([Addr::Port(7), Addr::Inet(ba)]))
}

fn graph_wire<M: Msg + 'static>() -> (GraphWire<M>, SessionId) {
    let (aa, ba) = addrs();
    let graph = |seed| -> (Graph<M>, ProtocolId) {
        let mut b = GraphBuilder::<M>::new();
        let x = b.add(Xtp::<M>::new(EndpointConfig::default(), ContextConfig::stream(), seed), &[]);
        (b.build().unwrap(), x)
    };
    let (a, xa) = graph(1);
    let (mut b, xb) = graph(2);
    b.open_enable(xb, &listen()).unwrap();
    let mut w = GraphWire::new((a, xa, aa), (b, xb, ba), Instant::ZERO);
    w.step = Duration::from_micros(1);
    let s = w.a.open(xa, &to(ba)).unwrap();
    (w, s)
}

fn stack_wire<M: Msg + 'static>() -> (StackWire<M, Xtp<M>>, SessionId) {
    let (aa, ba) = addrs();
    let stack =
        |seed| Stack::new(Xtp::<M>::new(EndpointConfig::default(), ContextConfig::stream(), seed)).unwrap();
    let (a, mut b) = (stack(1), stack(2));
    b.open_enable(&listen()).unwrap();
    let mut w = StackWire::new((a, aa), (b, ba), Instant::ZERO);
    w.step = Duration::from_micros(1);
    let s = w.a.open(&to(ba)).unwrap();
    (w, s)
}

/// What the application of each side saw: (session, length, eom) per
/// delivered piece, in order.
type Seen = Vec<(SessionId, usize, bool)>;

/// Moves what a's application wrote to b's (pumping, firing timers when
/// quiet); b echoes each piece if `echo`.
/// Returns (frames a->b, frames b->a, what b saw, bytes back at a).
fn run<M: Msg>(w: &mut impl StackPair<M>, want: usize, echo: bool) -> (usize, usize, Seen, usize) {
    let (mut na, mut nb, mut seen, mut back) = (0, 0, Vec::new(), 0);
    let got = |seen: &Seen| seen.iter().map(|s| s.1).sum::<usize>();
    for _ in 0..10_000 {
        loop {
            let a = w.deliver(true);
            na += a;
            while let Some(ev) = w.poll_event(false) {
                if let Event::Deliver { session, msg, eom } = ev {
                    seen.push((session, msg.len(), eom));
                    if echo {
                        w.push(false, session, msg).unwrap();
                    }
                }
            }
            let b = w.deliver(false);
            nb += b;
            while let Some(ev) = w.poll_event(true) {
                if let Event::Deliver { msg, .. } = ev {
                    back += msg.len();
                }
            }
            if a + b == 0 {
                break;
            }
        }
        if got(&seen) >= want && (!echo || back >= want) || !w.fire_next_timer(None) {
            break;
        }
    }
    (na, nb, seen, back)
}

#[test]
fn the_compiled_stack_sends_the_same_packets_as_the_graph() {
    let (mut g, gs) = graph_wire::<Contig>();
    let (mut s, ss) = stack_wire::<Contig>();
    for (round, size) in [10usize, 1_000, 10_000, 1 << 20].into_iter().enumerate() {
        let data = Bytes::from(vec![7u8; size]);
        let echo = size < 1 << 20;
        g.a.push(gs, Contig::from_shared(data.clone())).unwrap();
        let rg = run(&mut g, size, echo);
        s.a.push(ss, Contig::from_shared(data)).unwrap();
        let rs = run(&mut s, size, echo);
        let bytes = |r: &(usize, usize, Seen, usize)| r.2.iter().map(|p| p.1).sum::<usize>();
        assert_eq!(bytes(&rg), size, "graph, round {round}");
        assert_eq!(bytes(&rs), size, "stack, round {round}");
        if echo {
            assert_eq!((rg.3, rs.3), (size, size), "echo, round {round}");
        }
        assert_eq!((rs.0, rs.1), (rg.0, rg.1), "datagrams a->b, b->a in round {round} (size {size})");
        assert_eq!(s.now, g.now, "virtual time after round {round}");
    }
    assert_eq!(s.stray + g.stray, 0);
    assert_eq!(s.b.stats().demux_drops, 0);
}

/// Cuts what the application saw into messages at each EOM.
fn messages(seen: &Seen) -> Vec<usize> {
    let (mut out, mut cur) = (Vec::new(), 0);
    for &(_, len, eom) in seen {
        cur += len;
        if eom {
            out.push(cur);
            cur = 0;
        }
    }
    assert_eq!(cur, 0, "data after the last EOM: {seen:?}");
    out
}

fn boundaries<M: Msg + 'static>() {
    // Messages longer than a packet (so they arrive in several pieces) and
    // one shorter, written back to back.
    let sizes = [3_000usize, 10, 5_000, 1_500];
    let total: usize = sizes.iter().sum();
    let (mut g, gs) = graph_wire::<M>();
    let (mut s, ss) = stack_wire::<M>();
    for (i, &n) in sizes.iter().enumerate() {
        let data = Bytes::from(vec![i as u8; n]);
        g.a.push(gs, M::from_shared(data.clone())).unwrap();
        s.a.push(ss, M::from_shared(data)).unwrap();
    }
    for (name, seen) in [("graph", run(&mut g, total, false).2), ("stack", run(&mut s, total, false).2)] {
        assert!(seen.len() > sizes.len(), "{name}: some message arrived in pieces: {seen:?}");
        assert!(seen.iter().any(|p| !p.2), "{name}: a piece without EOM: {seen:?}");
        assert_eq!(messages(&seen), sizes, "{name}: the messages, cut at EOM");
    }
}

#[test]
fn the_application_sees_message_boundaries_in_both_compositions() {
    boundaries::<Contig>();
    boundaries::<Rope>();
}

/// The application pulls one event at a time while session A keeps
/// streaming: a second session B, opened meanwhile, still gets its
/// `OpenDone` and its data up (issue #16 review). A context being read
/// must not hold the endpoint's other events back for as long as its
/// data keeps coming.
#[test]
fn a_streaming_session_does_not_starve_another_in_the_compiled_stack() {
    let (mut w, sa) = stack_wire::<Contig>();
    let ba = w.ba;
    let piece = || Contig::from_shared(Bytes::from_static(b"0123456789"));
    w.run(Duration::from_millis(1));
    let server_a = std::iter::from_fn(|| w.b.poll_event())
        .find_map(|e| match e {
            Event::OpenDone { session, .. } => Some(session),
            _ => None,
        })
        .expect("A's OpenDone");
    // A backlog on A, then B opens and sends once.
    for _ in 0..4 {
        w.a.push(sa, piece()).unwrap();
    }
    w.run(Duration::from_millis(1));
    let first = w.b.poll_event();
    assert!(matches!(first, Some(Event::Deliver { session, .. }) if session == server_a), "{first:?}");
    let sb = w.a.open(&to(ba)).unwrap();
    w.a.push(sb, Contig::from_shared(Bytes::from_static(b"B"))).unwrap();
    let (mut b_open, mut b_data, mut a_data) = (None, false, 1);
    for _ in 0..50 {
        w.a.push(sa, piece()).unwrap();
        w.run(Duration::from_millis(1));
        match w.b.poll_event() {
            Some(Event::OpenDone { session, .. }) => b_open = Some(session),
            Some(Event::Deliver { session, msg, .. }) if session == server_a => {
                assert_eq!(msg.len(), 10);
                a_data += 1;
            }
            Some(Event::Deliver { session, msg, .. }) => {
                assert_eq!((Some(session), msg.len()), (b_open, 1), "B's data after B's OpenDone");
                b_data = true;
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert!(b_open.is_some(), "B's OpenDone came up while A streamed ({a_data} pieces of A did)");
    assert!(b_data, "B's data came up while A streamed ({a_data} pieces of A did)");
    // Nothing of A was lost or reordered into a gap: the rest follows.
    while let Some(ev) = w.b.poll_event() {
        if let Event::Deliver { session, .. } = ev {
            assert_eq!(session, server_a);
            a_data += 1;
        }
    }
    assert_eq!(a_data, 4 + 50, "every piece of A came up");
}

/// `tests/layer.rs::close_reaches_both_applications_through_the_timers` in
/// the compiled stack, where the application pulls: the server's
/// `OpenDone` and both sides' `CloseDone` come up through `poll_event`.
#[test]
fn close_reaches_both_applications_in_the_compiled_stack() {
    let (mut w, s) = stack_wire::<Rope>();
    w.a.push(s, Rope::from_payload(Bytes::from_static(b"bye"), 0)).unwrap();
    w.run(Duration::from_millis(10));
    let mut server = None;
    while let Some(ev) = w.b.poll_event() {
        if let Event::OpenDone { session, .. } = ev {
            server = Some(session);
        }
    }
    let server = server.expect("open_done");
    w.a.close(s).unwrap();
    w.b.close(server).unwrap();
    w.run(Duration::from_secs(10));
    assert!(
        std::iter::from_fn(|| w.a.poll_event())
            .any(|e| matches!(e, Event::CloseDone { session } if session == s))
    );
    assert!(
        std::iter::from_fn(|| w.b.poll_event())
            .any(|e| matches!(e, Event::CloseDone { session } if session == server))
    );
    assert_eq!(w.a.push(s, Rope::from_payload(Bytes::from_static(b"x"), 0)), Err(PushError::NoSession));
    assert_eq!(w.a.control(None, Control::GetSessionCount), Ok(ControlReply::Count(0)));
}

/// A session's context ends while the application is not polling, and the
/// application opens another before it polls: the new context takes the
/// freed arena slot. The first session's `CloseDone` must still come up
/// (it was lost when the new session's upper overwrote the slot's).
#[test]
fn close_done_survives_the_slot_being_reused_before_the_application_polls() {
    let (mut w, s) = stack_wire::<Contig>();
    let ba = w.ba;
    w.run(Duration::from_millis(10));
    let server = std::iter::from_fn(|| w.b.poll_event())
        .find_map(|e| match e {
            Event::OpenDone { session, .. } => Some(session),
            _ => None,
        })
        .expect("open_done");
    w.a.close(s).unwrap();
    w.b.close(server).unwrap();
    for _ in 0..1_000 {
        if w.a.control(None, Control::GetSessionCount) == Ok(ControlReply::Count(0)) {
            break;
        }
        w.exchange();
        if !w.fire_next_timer(None) {
            break;
        }
    }
    assert_eq!(w.a.control(None, Control::GetSessionCount), Ok(ControlReply::Count(0)), "a's context freed");
    let again = w.a.open(&to(ba)).unwrap();
    assert_eq!(again.slot.index(), s.slot.index(), "the test needs the slot reused");
    let seen: Vec<_> = std::iter::from_fn(|| w.a.poll_event()).collect();
    assert!(
        seen.iter().any(|e| matches!(e, Event::CloseDone { session } if *session == s)),
        "the first session's CloseDone: {seen:?}"
    );
    assert!(
        !seen.iter().any(|e| matches!(e, Event::CloseDone { session } if *session == again)),
        "the new session is not closed: {seen:?}"
    );
}
