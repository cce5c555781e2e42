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
use xk_msg::{Contig, Limit, Msg, Rope};
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

/// The wire's receive copy (the stand-in for a socket's copy that the
/// benchmarks turn on, `StackWire::receive_copy`) changes nothing the
/// stacks do: the same datagrams, pieces and echoes as frames handed over,
/// in both message forms, up to a 1 MiB message.
fn receive_copy_changes_nothing<M: Msg + 'static>() {
    let (mut plain, ps) = stack_wire::<M>();
    let (mut copied, cs) = stack_wire::<M>();
    copied.receive_copy = true;
    for size in [10usize, 1_000, 10_000, 1 << 20] {
        let data = Bytes::from((0..size).map(|i| (i % 251) as u8).collect::<Vec<u8>>());
        let echo = size < 1 << 20;
        plain.a.push(ps, M::from_shared(data.clone())).unwrap();
        copied.a.push(cs, M::from_shared(data)).unwrap();
        let (rp, rc) = (run(&mut plain, size, echo), run(&mut copied, size, echo));
        assert_eq!(rc.2.iter().map(|p| p.1).sum::<usize>(), size, "size {size}");
        assert_eq!(rc, rp, "size {size}: datagrams, pieces and echo with and without the copy");
        assert_eq!(copied.now, plain.now, "virtual time after size {size}");
    }
    assert_eq!(copied.b.stats().demux_drops, 0);
    // The copy is made, once per frame, at its length: what the plain wire
    // handed over as frames, the copying wire moved as bytes; and XTP wrote
    // each of those packets where the wire lent it room (no frame of its
    // own), where the plain wire's frames were each copied out of XTP's
    // scratch buffer.
    let plain_frames = plain.a.protocol().frames_copied() + plain.b.protocol().frames_copied();
    assert!(plain_frames > 0);
    assert_eq!(copied.a.protocol().frames_copied() + copied.b.protocol().frames_copied(), 0);
    assert_eq!((copied.copied, plain.copied), (copied.moved, 0), "bytes copied: every frame's, once");
    assert_eq!(copied.moved, plain.moved, "the same bytes crossed both wires");
}

#[test]
fn the_wires_receive_copy_changes_nothing() {
    receive_copy_changes_nothing::<Contig>();
    receive_copy_changes_nothing::<Rope>();
}

/// The copying form (seed 000's Limit) keeps its device crossing when the
/// device lends its buffer: XTP still makes each packet a message (whose
/// making copies a record), so the crossing the form exists to show is
/// not optimised away; the packets are the other forms'.
#[test]
fn the_copying_form_still_crosses_to_the_device_as_a_message() {
    let (mut w, s) = stack_wire::<Limit<2_000>>();
    w.receive_copy = true;
    w.a.push(s, Limit::from_shared(Bytes::from_static(b"ten bytes!"))).unwrap();
    let r = run(&mut w, 10, true);
    assert_eq!(r.3, 10, "the echo came back");
    let frames = w.a.protocol().frames_copied() + w.b.protocol().frames_copied();
    assert_eq!(frames as usize, r.0 + r.1, "every datagram was a frame of its own");
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

/// Every event b's application has seen since the last call.
fn drain<M: Msg>(w: &mut StackWire<M, Xtp<M>>) -> Vec<Event<M>> {
    std::iter::from_fn(|| w.b.poll_event()).collect()
}

/// `open_disable` withdraws a passive open: a FIRST arriving after it makes
/// no context and reaches no application; `open_enable` again accepts. Both
/// through the compiled stack's verbs and the graph's (the two wrappers).
#[test]
fn open_disable_refuses_a_first_and_open_enable_accepts_again() {
    // The compiled stack.
    let (aa, ba) = addrs();
    let stack = |seed| {
        Stack::new(Xtp::<Rope>::new(EndpointConfig::default(), ContextConfig::stream(), seed)).unwrap()
    };
    let mut w = StackWire::new((stack(1), aa), (stack(2), ba), Instant::ZERO);
    w.step = Duration::from_micros(1);
    w.b.open_enable(&listen()).unwrap();
    w.b.open_disable(&listen()).unwrap();
    assert!(w.b.open_disable(&listen()).is_err(), "a second open_disable: nothing is enabled");
    let s = w.a.open(&to(ba)).unwrap();
    w.a.push(s, Rope::from_payload(Bytes::from_static(b"refused"), 0)).unwrap();
    w.run(Duration::from_millis(50));
    assert!(w.from_a() == 0 && w.stray == 0);
    let seen = drain(&mut w);
    assert!(seen.is_empty(), "b's application heard {} events after open_disable", seen.len());
    assert_eq!(w.b.protocol().endpoint().context_count(), 0, "no context for the refused FIRST");
    assert_eq!(w.b.control(None, Control::GetSessionCount), Ok(ControlReply::Count(0)));

    w.b.open_enable(&listen()).unwrap();
    let s = w.a.open(&to(ba)).unwrap();
    w.a.push(s, Rope::from_payload(Bytes::from_static(b"accepted"), 0)).unwrap();
    w.run(Duration::from_millis(50));
    let mut got = Vec::new();
    let mut opened = false;
    for ev in drain(&mut w) {
        match ev {
            Event::OpenDone { .. } => opened = true,
            Event::Deliver { msg, .. } => got.extend(msg.to_vec()),
            Event::CloseDone { .. } => {}
        }
    }
    assert!(opened, "open_done after open_enable again");
    assert_eq!(got, b"accepted");

    // The graph: the same verbs through `Graph::open_disable`.
    let (mut g, _) = graph_wire::<Rope>();
    let (xb, parts) = (g.b_dev, listen());
    g.b.open_disable(xb, &parts).unwrap();
    let s = g.a.open(g.a_dev, &to(g.ba)).unwrap();
    g.a.push(s, Rope::from_payload(Bytes::from_static(b"refused"), 0)).unwrap();
    g.run(Duration::from_millis(50));
    assert!(g.b.poll_event().is_none(), "the graph's application heard nothing");
    assert_eq!(g.b.control(xb, None, Control::GetSessionCount), Ok(ControlReply::Count(0)));
    g.b.open_enable(xb, &parts).unwrap();
    let s = g.a.open(g.a_dev, &to(g.ba)).unwrap();
    g.a.push(s, Rope::from_payload(Bytes::from_static(b"accepted"), 0)).unwrap();
    g.run(Duration::from_millis(50));
    let got: Vec<u8> = std::iter::from_fn(|| g.b.poll_event())
        .filter_map(|e| if let Event::Deliver { msg, .. } = e { Some(msg.to_vec()) } else { None })
        .flatten()
        .collect();
    assert_eq!(got, b"accepted");
}

/// The receive path copies no payload: b's application gets chunks that lie
/// inside the buffer the device handed in (an arena holding the frame behind
/// other bytes, as a batched receive fills one), with no xk-msg copy and no
/// copy counted by b's endpoint.
fn receive_is_zero_copy<M: Msg + 'static>() {
    let (aa, ba) = addrs();
    let stack =
        |seed| Stack::new(Xtp::<M>::new(EndpointConfig::default(), ContextConfig::stream(), seed)).unwrap();
    let mut w = StackWire::new((stack(1), aa), (stack(2), ba), Instant::ZERO);
    w.step = Duration::from_micros(1);
    w.b.open_enable(&listen()).unwrap();
    let s = w.a.open(&to(ba)).unwrap();
    w.a.push(s, M::from_shared(Bytes::from_static(b"hello"))).unwrap();
    w.exchange();
    let server = drain(&mut w)
        .into_iter()
        .find_map(|e| if let Event::OpenDone { session, .. } = e { Some(session) } else { None })
        .expect("open_done");
    let before = w.b.protocol().endpoint().context_stats(Xtp::<M>::context(server)).unwrap();
    let payload: Vec<u8> = (0..1_000u32).map(|i| (i % 251) as u8).collect();
    w.a.advance(w.now);
    w.b.advance(w.now);
    w.a.push(s, M::from_shared(Bytes::from(payload.clone()))).unwrap();
    // The packet carrying the 1,000 bytes (a may wait for a timer first,
    // and may send control packets, which go over unchanged).
    let mut frame = None;
    for _ in 0..100 {
        match w.a.poll_transmit() {
            Some((_, f)) if f.len() > 1_000 => {
                frame = Some(f);
                break;
            }
            Some((_, f)) => w.b.receive(aa, f),
            None => {
                let t = w.a.poll_timeout().expect("a timer to wait for");
                w.a.handle_timeout(t);
                w.b.advance(t);
            }
        }
    }
    let frame = frame.expect("a data packet");
    assert!(w.a.poll_transmit().is_none(), "one packet carries the 1,000 bytes");
    // The device's receive buffer: the frame lands 100 bytes in.
    let mut arena = xk_msg::BytesMut::with_capacity(4096);
    arena.extend_from_slice(&[0xee; 100]);
    arena.extend_from_slice(&frame.to_vec());
    let mut buf = arena.split_off(100);
    let range = buf.as_ptr() as usize..buf.as_ptr() as usize + buf.len();
    buf.truncate(frame.len());
    xk_msg::reset_copy_stats();
    w.b.receive(aa, M::from_received(buf));
    let mut got = Vec::new();
    let mut chunks = 0;
    for ev in drain(&mut w) {
        if let Event::Deliver { msg, .. } = ev {
            msg.for_each_chunk(|c| {
                let p = c.as_ptr() as usize;
                assert!(
                    range.contains(&p) && p + c.len() <= range.end,
                    "a delivered chunk outside the device's buffer"
                );
                chunks += 1;
            });
            got.extend(msg.to_vec());
        }
    }
    let copies = xk_msg::copy_stats();
    assert_eq!(got, payload);
    assert!(chunks > 0);
    assert_eq!((copies.copies, copies.bytes, copies.pullups), (0, 0, 0), "{copies:?}");
    let after = w.b.protocol().endpoint().context_stats(Xtp::<M>::context(server)).unwrap();
    assert_eq!(after.bytes_received - before.bytes_received, 1_000);
    assert_eq!(after.copied_joining.since(before.copied_joining).ops, 0);
    assert_eq!(after.copied_into_packets.since(before.copied_into_packets).ops, 0);
}

#[test]
fn the_receive_path_is_zero_copy_from_the_device_buffer() {
    receive_is_zero_copy::<Rope>();
    receive_is_zero_copy::<Contig>();
}
