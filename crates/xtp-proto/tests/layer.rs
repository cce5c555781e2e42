//! XTP as an `xk-core` protocol (issue #16): two graphs, each XTP on a
//! datagram device, joined by the test kit's `GraphWire`; and the same
//! exchanges on the direct path, which must send the same packets.

use std::net::SocketAddr;

use bytes::Bytes;
use xk_core::device::ADDR_HEADER;
use xk_core::{
    Addr, ArenaId, Control, ControlReply, Event, Graph, GraphBuilder, Part, Participants, ProtocolId,
    PushError, SessionId,
};
use xk_msg::{BytesMut, Contig, Limit, Msg, Rope};
use xk_time::{DeltaList, Duration, HeapQueue, Instant, TimerQueue, TimingWheel};
use xtp_proto::{ContextConfig, Endpoint, EndpointConfig, NoTrace, XtpProtocol};
use xtp_testkit::{GraphWire, Wire};

fn addrs() -> (SocketAddr, SocketAddr) {
    ("10.0.0.1:1".parse().unwrap(), "10.0.0.2:1".parse().unwrap())
}

fn graph<M: Msg + 'static, Q: TimerQueue<ArenaId> + Default + 'static, const CACHE: bool>(
    ep: EndpointConfig,
    seed: u64,
) -> (Graph<M>, ProtocolId) {
    let mut b = GraphBuilder::<M>::new();
    let xtp = b.add(XtpProtocol::<M, Q, CACHE>::with_timer_queue(ep, ContextConfig::stream(), seed), &[]);
    (b.build().unwrap(), xtp)
}

/// A client graph (seed 1) and a server graph (seed 2) listening on XTP port 7.
fn wire<M: Msg + 'static, Q: TimerQueue<ArenaId> + Default + 'static, const CACHE: bool>(
    ep: EndpointConfig,
) -> GraphWire<M> {
    let (aa, ba) = addrs();
    let (a, xa) = graph::<M, Q, CACHE>(ep.clone(), 1);
    let (mut b, xb) = graph::<M, Q, CACHE>(ep, 2);
    b.open_enable(xb, &Participants::local(Part::top_first([Addr::Port(7)]))).unwrap();
    let mut w = GraphWire::new((a, xa, aa), (b, xb, ba), Instant::ZERO);
    w.step = Duration::from_micros(1);
    w
}

fn to_server(w: &GraphWire<impl Msg>) -> Participants {
    Participants::new(Part::new(), Part::top_first([Addr::Port(7), Addr::Inet(w.ba)]))
}

/// The server echoes what it receives; returns bytes (server got, client got).
fn pump<M: Msg>(w: &mut GraphWire<M>, server: &mut Option<SessionId>) -> (usize, usize) {
    let (mut s, mut c) = (0, 0);
    for _ in 0..100_000 {
        let mut moved = w.from_a() > 0;
        while let Some(ev) = w.b.poll_event() {
            match ev {
                Event::OpenDone { session, parts } => {
                    assert_eq!(parts.remote.peek(), Some(&Addr::Inet(w.aa)));
                    *server = Some(session);
                }
                Event::Deliver { session, msg, .. } => {
                    s += msg.len();
                    w.b.push(session, msg).unwrap();
                }
                Event::CloseDone { .. } => {}
            }
        }
        moved |= w.from_b() > 0;
        while let Some(ev) = w.a.poll_event() {
            if let Event::Deliver { msg, .. } = ev {
                c += msg.len();
            }
        }
        if !moved {
            return (s, c);
        }
    }
    panic!("the graphs never fell quiet");
}

fn ping_pong<M: Msg + 'static, Q: TimerQueue<ArenaId> + Default + 'static, const CACHE: bool>(
    ep: EndpointConfig,
) {
    let mut w = wire::<M, Q, CACHE>(ep);
    let (xa, parts) = (w.a_dev, to_server(&w));
    let s = w.a.open(xa, &parts).unwrap();
    let mut server = None;
    for size in [10usize, 1_000, 10_000, 100_000] {
        let payload: Vec<u8> = (0..size).map(|i| (i * 13) as u8).collect();
        w.a.push(s, M::from_payload(Bytes::from(payload.clone()), 0)).unwrap(); // Contig: one counted copy
        let (mut got_s, mut got_c) = pump(&mut w, &mut server);
        for _ in 0..1_000 {
            if got_c >= size {
                break;
            }
            assert!(w.fire_next_timer(None), "size {size}: stalled at {got_s}/{got_c}");
            let (a, b) = pump(&mut w, &mut server);
            (got_s, got_c) = (got_s + a, got_c + b);
        }
        assert_eq!((got_s, got_c), (size, size), "size {size}");
    }
    assert!(server.is_some(), "the server heard open_done");
    assert_eq!(w.stray, 0);
}

/// A layer added by registration alone (`census`, issue #16) between XTP and
/// the device, on the in-process wire: data goes both ways (an echo of
/// 10 to 100,000 bytes), and each census's counters equal the frames the wire
/// moved from and to its graph.
#[test]
fn a_census_between_xtp_and_the_device_carries_both_ways_and_counts_every_frame() {
    use xtp_proto::stack::XtpStack;

    let (aa, ba) = addrs();
    let stack = |seed| {
        XtpStack::<Rope>::from_desc::<HeapQueue<ArenaId>, true>(
            "app -> xtp -> census -> link",
            EndpointConfig::default(),
            ContextConfig::stream(),
            seed,
        )
        .unwrap()
    };
    let (a, mut b) = (stack(1), stack(2));
    let (atop, btop) = (a.top, b.top);
    let (acensus, bcensus) = (a.bottom, b.bottom);
    assert_ne!(acensus, a.xtp, "the census, not XTP, is on the device");
    b.graph.open_enable(btop, &Participants::local(Part::top_first([Addr::Port(7)]))).unwrap();
    let mut w = GraphWire::new((a.graph, acensus, aa), (b.graph, bcensus, ba), Instant::ZERO);
    w.step = Duration::from_micros(1);
    let s = w.a.open(atop, &to_server(&w)).unwrap();
    let (mut a_to_b, mut b_to_a) = (0u64, 0u64);
    let mut server = None;
    for size in [10usize, 1_000, 10_000, 100_000] {
        let payload: Vec<u8> = (0..size).map(|i| (i * 13) as u8).collect();
        w.a.push(s, Rope::from_payload(Bytes::from(payload.clone()), 0)).unwrap();
        let mut back = Vec::new();
        for _ in 0..100_000 {
            let mut moved = 0;
            let n = w.from_a();
            a_to_b += n as u64;
            moved += n;
            while let Some(ev) = w.b.poll_event() {
                match ev {
                    Event::OpenDone { session, .. } => server = Some(session),
                    Event::Deliver { session, msg, .. } => w.b.push(session, msg).unwrap(),
                    Event::CloseDone { .. } => {}
                }
            }
            let n = w.from_b();
            b_to_a += n as u64;
            moved += n;
            while let Some(ev) = w.a.poll_event() {
                if let Event::Deliver { msg, .. } = ev {
                    back.extend_from_slice(&msg.to_vec());
                }
            }
            if back.len() >= size {
                break;
            }
            if moved == 0 {
                assert!(w.fire_next_timer(None), "size {size}: stalled at {}", back.len());
            }
        }
        assert!(back == payload, "size {size}: the echo differs");
    }
    assert!(server.is_some() && w.stray == 0);
    let traffic = |g: &mut Graph<Rope>, census| match g.control(census, None, Control::GetCounters) {
        Ok(ControlReply::Counters(c)) => Traffic::of(&c),
        other => panic!("{other:?}"),
    };
    let (ta, tb) = (traffic(&mut w.a, acensus), traffic(&mut w.b, bcensus));
    assert_eq!((ta.frames_down, ta.frames_up), (a_to_b, b_to_a), "client census vs the wire");
    assert_eq!((tb.frames_down, tb.frames_up), (b_to_a, a_to_b), "server census vs the wire");
    assert_eq!((ta.bytes_down, ta.bytes_up), (tb.bytes_up, tb.bytes_down));
    assert!(ta.bytes_down > 111_010 && ta.bytes_up > 111_010, "{ta:?}");
    // XTP's own count of what it popped is the census's (nothing lost between).
    assert_eq!(w.a.stats(a.xtp).popped, ta.frames_up);
}

#[test]
fn ping_pong_over_the_graph_in_both_message_forms_and_every_timer_queue() {
    let ep = EndpointConfig::default();
    ping_pong::<Rope, HeapQueue<ArenaId>, true>(ep.clone());
    ping_pong::<Contig, HeapQueue<ArenaId>, true>(ep.clone());
    ping_pong::<Rope, TimingWheel<ArenaId>, true>(ep.clone());
    ping_pong::<Rope, DeltaList<ArenaId>, true>(ep.clone());
    ping_pong::<Contig, HeapQueue<ArenaId>, false>(ep.clone());
    // The copying variant (seed 000's "Limit"): same packets, more copies.
    ping_pong::<Limit<10_000>, HeapQueue<ArenaId>, true>(ep);
}

#[test]
fn echoed_data_arrives_intact() {
    let mut w = wire::<Rope, HeapQueue<ArenaId>, true>(EndpointConfig::default());
    let (xa, parts) = (w.a_dev, to_server(&w));
    let s = w.a.open(xa, &parts).unwrap();
    let payload: Vec<u8> = (0..5_000u32).map(|i| (i % 251) as u8).collect();
    w.a.push(s, Rope::from_payload(Bytes::from(payload.clone()), 0)).unwrap();
    w.run(Duration::from_millis(50));
    let mut server = None;
    let mut got = Vec::new();
    while let Some(ev) = w.b.poll_event() {
        match ev {
            Event::OpenDone { session, .. } => server = Some(session),
            Event::Deliver { msg, .. } => got.extend(msg.to_vec()),
            Event::CloseDone { .. } => {}
        }
    }
    assert_eq!(got, payload);
    let server = server.expect("open_done");
    assert_eq!(
        w.b.control(w.b_dev, Some(server), Control::GetPeerAddr),
        Ok(ControlReply::Addr(Addr::Inet(w.aa)))
    );
    assert_eq!(w.b.control(w.b_dev, Some(server), Control::GetMyAddr), Ok(ControlReply::Addr(Addr::Port(7))));
    assert_eq!(w.a.control(w.a_dev, None, Control::GetSessionCount), Ok(ControlReply::Count(1)));
}

/// Both sides close; each application hears `close_done` once the context
/// ends (timers run through the graph), and the session id goes stale.
#[test]
fn close_reaches_both_applications_through_the_timers() {
    let mut w = wire::<Rope, TimingWheel<ArenaId>, true>(EndpointConfig::default());
    let (xa, parts) = (w.a_dev, to_server(&w));
    let s = w.a.open(xa, &parts).unwrap();
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
    assert_eq!(w.a.control(w.a_dev, None, Control::GetSessionCount), Ok(ControlReply::Count(0)));
}

/// Bad frames: too short for the device header (dropped by demux, counted by
/// the graph), and garbage behind a valid device header (handed to the
/// endpoint, which counts it malformed). Nothing is answered, nothing panics.
#[test]
fn bad_frames_are_counted_and_dropped() {
    let (mut g, xtp) = graph::<Contig, HeapQueue<ArenaId>, true>(EndpointConfig::default(), 1);
    g.receive(xtp, Contig::from_received(BytesMut::from(&[1u8; ADDR_HEADER - 1][..])));
    assert_eq!(g.stats(xtp).demux_drops, 1);
    let mut frame = vec![0u8; ADDR_HEADER + 40];
    xk_core::device::write_addr(&mut frame, "10.0.0.9:5".parse().unwrap());
    g.receive(xtp, Contig::from_received(BytesMut::from(&frame[..])));
    g.receive(xtp, Contig::from_received(BytesMut::from(&frame[..ADDR_HEADER + 3])));
    assert_eq!(g.stats(xtp).popped, 2, "handed to the endpoint");
    assert!(g.poll_transmit().is_none(), "nothing answered");
    assert!(g.poll_event().is_none());
}

/// The adapter adds no protocol behaviour: a ping-pong and a bulk transfer
/// send exactly as many datagrams each way over the graph as on the direct
/// path, and take as much virtual time.
#[test]
fn the_graph_sends_the_same_packets_as_the_direct_path() {
    let (aa, ba) = addrs();
    let ep = EndpointConfig::default();
    let mut d = Wire::new(
        Endpoint::<NoTrace>::new(ep.clone(), 1),
        aa,
        Endpoint::new(ep.clone(), 2),
        ba,
        Instant::ZERO,
    );
    d.step = Duration::from_micros(1);
    d.log = false;
    d.b.listen(7, ContextConfig::stream()).unwrap();
    let ctx = d.a.connect(d.now, ba, 7, ContextConfig::stream()).unwrap();
    let mut g = wire::<Rope, HeapQueue<ArenaId>, true>(ep);
    let (xa, parts) = (g.a_dev, to_server(&g));
    let s = g.a.open(xa, &parts).unwrap();
    let mut server = None;
    for (round, size) in [10usize, 1_000, 10_000, 1 << 20].into_iter().enumerate() {
        let data = Bytes::from(vec![7u8; size]);
        let echo = size < 1 << 20;
        // Direct: the same pump as the graph's (echo on the server).
        d.a.write(d.now, ctx, data.clone(), true, None).unwrap();
        let (mut dn_a, mut dn_b, mut got) = (0, 0, 0);
        let mut gn = (0, 0, 0);
        for _ in 0..10_000 {
            loop {
                let na = d.from_a();
                dn_a += na;
                while let Some(ev) = d.b.poll_event() {
                    if let xtp_proto::Event::Readable { ctx } = ev {
                        while let Some(c) = d.b.read(d.now, ctx) {
                            if echo {
                                d.b.write(d.now, ctx, c.data, c.eom, None).unwrap();
                            } else {
                                got += c.data.len();
                            }
                        }
                    }
                }
                let nb = d.from_b();
                dn_b += nb;
                while let Some(ev) = d.a.poll_event() {
                    if let xtp_proto::Event::Readable { ctx } = ev {
                        while let Some(c) = d.a.read(d.now, ctx) {
                            got += c.data.len();
                        }
                    }
                }
                if na + nb == 0 {
                    break;
                }
            }
            if got >= size || !d.fire_next_timer(None) {
                break;
            }
        }
        assert_eq!(got, size, "direct, round {round}");
        // Graph.
        g.a.push(s, Rope::from_payload(data, 0)).unwrap();
        for _ in 0..10_000 {
            loop {
                let na = g.from_a();
                gn.0 += na;
                while let Some(ev) = g.b.poll_event() {
                    match ev {
                        Event::OpenDone { session, .. } => server = Some(session),
                        Event::Deliver { session, msg, .. } if echo => g.b.push(session, msg).unwrap(),
                        Event::Deliver { msg, .. } => gn.2 += msg.len(),
                        Event::CloseDone { .. } => {}
                    }
                }
                let nb = g.from_b();
                gn.1 += nb;
                while let Some(ev) = g.a.poll_event() {
                    if let Event::Deliver { msg, .. } = ev {
                        gn.2 += msg.len();
                    }
                }
                if na + nb == 0 {
                    break;
                }
            }
            if gn.2 >= size || !g.fire_next_timer(None) {
                break;
            }
        }
        assert_eq!(gn.2, size, "graph, round {round}");
        assert_eq!((gn.0, gn.1), (dn_a, dn_b), "datagrams a->b, b->a in round {round} (size {size})");
        assert_eq!(g.now, d.now, "virtual time after round {round}");
    }
    assert!(server.is_some());
}

/// The server's or client's side of the simulated exchange: collects what
/// arrives, cut into messages at each `eom`; the server echoes each chunk
/// with its mark (`push_part`), so the client sees the sender's boundaries.
#[derive(Default)]
struct SimPeer {
    echo: bool,
    got: usize,
    messages: Vec<Vec<u8>>,
    partial: Vec<u8>,
    chunks: usize,
}

impl<S: xk_core::device::DeviceStack<Rope>> xtp_testkit::GraphApp<Rope, S> for SimPeer {
    fn poll(&mut self, g: &mut S) {
        while let Some(ev) = g.poll_event() {
            let Event::Deliver { session, msg, eom } = ev else { continue };
            self.chunks += 1;
            self.got += msg.len();
            self.partial.extend(msg.to_vec());
            if eom {
                self.messages.push(std::mem::take(&mut self.partial));
            }
            if self.echo {
                g.push_part(session, msg, eom).unwrap();
            }
        }
    }
}

/// A composition's layers that answer `Control::GetCounters`, with their
/// named counters (`DeviceStack::counters`).
type Layers = Vec<(&'static str, xk_core::Counters)>;

/// A counting layer's four counters, by the names it answers.
#[derive(Debug, Default, PartialEq, Eq)]
struct Traffic {
    frames_down: u64,
    bytes_down: u64,
    frames_up: u64,
    bytes_up: u64,
}

impl Traffic {
    fn of(c: &xk_core::Counters) -> Self {
        let get = |name| {
            c.iter().find(|(n, _)| *n == name).map(|c| c.1).unwrap_or_else(|| panic!("no `{name}` in {c:?}"))
        };
        Traffic {
            frames_down: get("frames_down"),
            bytes_down: get("bytes_down"),
            frames_up: get("frames_up"),
            bytes_up: get("bytes_up"),
        }
    }
}

/// Runs the lossy exchange between two compositions of the same kind;
/// returns the messages each side received and the chunks they came in.
/// What a lossy exchange left: the messages at the server and the client,
/// the chunks delivered, and per side the traffic counters of its layers
/// (`DeviceStack::counters`) beside the link's counts of the datagrams it
/// sent (`offered`) and the ones it received (`delivered`).
struct Lossy {
    at_server: Vec<Vec<u8>>,
    at_client: Vec<Vec<u8>>,
    chunks: usize,
    /// `(client's layers, server's layers)`.
    traffic: (Layers, Layers),
    /// The links client -> server and server -> client.
    links: (xk_netemu::LinkStats, xk_netemu::LinkStats),
}

fn lossy_exchange<S: xk_core::device::DeviceStack<Rope>>(
    client: S,
    mut server: S,
    sent: &[Vec<u8>],
) -> Lossy {
    use xk_netemu::{LinkParams, Loss};
    use xk_sim::Sim;
    use xtp_testkit::GraphHost;

    server.open_enable(&Participants::local(Part::top_first([Addr::Port(7)]))).unwrap();
    let mut sim = Sim::new(7);
    let (sid, saddr) = sim.add_node(GraphHost::new(server, SimPeer { echo: true, ..SimPeer::default() }));
    let (cid, _) = sim.add_node(GraphHost::new(client, SimPeer::default()));
    let link =
        LinkParams { delay: Duration::from_millis(5), loss: Loss::Bernoulli(0.02), ..LinkParams::default() };
    sim.connect(cid, sid, link.clone(), link).unwrap();
    {
        let client = sim.node_mut(cid);
        let parts = Participants::new(Part::new(), Part::top_first([Addr::Port(7), Addr::Inet(saddr)]));
        let session = client.stack.open(&parts).unwrap();
        for m in sent {
            client.stack.push(session, Rope::from_payload(Bytes::from(m.clone()), 0)).unwrap();
        }
    }
    let n: usize = sent.iter().map(Vec::len).sum();
    sim.run_until(Instant::from_secs(60), 4_000_000, |sim| sim.node(cid).app.got >= n).unwrap();
    let link = sim.link_stats(cid, sid).unwrap();
    assert!(link.drop_loss > 0, "the link lost nothing: {link:?}");
    let back = sim.link_stats(sid, cid).unwrap();
    let traffic = (sim.node_mut(cid).stack.counters(), sim.node_mut(sid).stack.counters());
    let (c, s) = (sim.node(cid), sim.node(sid));
    assert_eq!(c.stack.drops(), xk_core::device::DeviceDrops::default());
    assert_eq!(s.stack.drops(), xk_core::device::DeviceDrops::default());
    Lossy {
        at_server: s.app.messages.clone(),
        at_client: c.app.messages.clone(),
        chunks: c.app.chunks + s.app.chunks,
        traffic,
        links: (link, back),
    }
}

/// The same described stack in the simulator (`app -> xtp -> link`), in
/// both compositions (the run-time graph and the compiled stack): a client
/// sends 120 messages of 1 to 4,000 bytes (many spanning packets) over a
/// 5 ms link losing 2 % each way, the server echoes each chunk with its
/// end-of-message mark; every byte comes back in order, and both sides see
/// exactly the sender's message boundaries (EOM) through the losses and
/// retransmissions.
#[test]
fn a_described_stack_runs_in_the_simulator_over_a_lossy_link() {
    use xtp_proto::stack::{Composed, XtpStack};

    let sent: Vec<Vec<u8>> = (0..120u32)
        .map(|i| {
            let len = 1 + (i as usize * 1_237) % 4_000;
            (0..len).map(|k| (k as u32 * 7 + i) as u8).collect()
        })
        .collect();
    // `census`: a registered layer between XTP and the device (issue #16's
    // "one module + one line"); `auto` composes it as the graph.
    for (how, graph) in [
        ("dynamic", "app -> xtp -> link"),
        ("compiled", "app -> xtp -> link"),
        ("auto", "app -> xtp -> census -> link"),
    ] {
        let stack = |seed| {
            XtpStack::<Rope>::compose::<TimingWheel<ArenaId>, true>(
                &format!("# the simulator's stack\ncompose {how}\n{graph}"),
                EndpointConfig::default(),
                ContextConfig::stream(),
                seed,
            )
            .unwrap()
        };
        let ((c, dev), (s, _)) = (stack(1), stack(2));
        assert_eq!(dev.name, "link");
        let r = match (c, s) {
            (Composed::Graph(c), Composed::Graph(s)) => lossy_exchange(c, s, &sent),
            (Composed::Compiled(c), Composed::Compiled(s)) => {
                assert_ne!(how, "auto", "a census has no compiled form");
                lossy_exchange(c, s, &sent)
            }
            _ => unreachable!("one description, one composition"),
        };
        let Lossy { at_server, at_client, chunks, traffic: (tc, ts), links: (up, back) } = r;
        if graph.contains("census") {
            // Each side's census saw every datagram its side sent onto the
            // link and every one the link delivered to it, bytes too.
            let (tc, ts) = (tc.as_slice(), ts.as_slice());
            let (t, u) = match (tc, ts) {
                ([("census", t)], [("census", u)]) => (Traffic::of(t), Traffic::of(u)),
                other => panic!("one census each side: {other:?}"),
            };
            assert_eq!(
                (t.frames_down, t.bytes_down),
                (up.offered, up.offered_bytes),
                "client census vs link"
            );
            assert_eq!(
                (u.frames_up, u.bytes_up),
                (up.delivered, up.delivered_bytes),
                "server census vs link"
            );
            assert_eq!((u.frames_down, u.bytes_down), (back.offered, back.offered_bytes), "server census");
            assert_eq!((t.frames_up, t.bytes_up), (back.delivered, back.delivered_bytes), "client census");
            assert!(t.frames_down > 120 && u.frames_down > 120 && up.delivered < up.offered);
        } else {
            assert!(tc.is_empty() && ts.is_empty(), "no census, no counters: {tc:?} {ts:?}");
        }
        assert_eq!(at_server.len(), sent.len(), "{how}: messages at the server");
        assert!(at_server == sent, "{how}: the server's message boundaries differ from the sender's");
        assert!(at_client == sent, "{how}: the echo's message boundaries differ from the sender's");
        // Boundaries, not whole messages per chunk: some came in pieces.
        assert!(chunks > 2 * sent.len(), "{how}: {chunks} chunks for {} messages each way", sent.len());
    }
}

/// The compiled stack's `receive` with frames no XTP packet fits: empty,
/// shorter than the header, garbage of a header's length and longer. Each is
/// counted (the endpoint's `malformed`, read through `Control`) and
/// dropped; nothing panics (debug build: overflow checks on), and the stack
/// still works after them.
#[test]
fn the_compiled_stack_counts_and_drops_malformed_frames() {
    use xk_core::compiled::Stack;
    use xk_core::device::DeviceStack;

    let (aa, ba) = addrs();
    let mut st = Stack::<Rope, _>::new(XtpProtocol::<Rope>::new(
        EndpointConfig::default(),
        ContextConfig::stream(),
        1,
    ))
    .unwrap();
    st.open_enable(&Participants::local(Part::top_first([Addr::Port(7)]))).unwrap();
    let mut frames: Vec<Vec<u8>> = vec![Vec::new(), vec![0], vec![0xff; 10], vec![0xa5; 31]];
    let mut x = 0x1234_5678u32;
    for len in [32usize, 33, 64, 1_500, 9_000] {
        frames.push(
            (0..len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 17;
                    x ^= x << 5;
                    x as u8
                })
                .collect(),
        );
    }
    for f in &frames {
        st.receive(aa, Rope::from_payload(Bytes::from(f.clone()), 0));
        assert!(st.poll_transmit().is_none(), "a malformed frame was answered");
        assert!(st.poll_event().is_none());
    }
    let malformed = match st.control(None, Control::GetMalformedCount) {
        Ok(ControlReply::Count(n)) => n,
        other => panic!("{other:?}"),
    };
    let refused = st.stats().demux_drops;
    assert_eq!(malformed as u64 + refused, frames.len() as u64, "every frame counted once");
    assert_eq!(malformed, frames.len(), "the endpoint parses and refuses each");
    assert_eq!(DeviceStack::drops(&st).demux_drops, refused);
    // Still works: an open sends a FIRST.
    let parts = Participants::new(Part::new(), Part::top_first([Addr::Port(7), Addr::Inet(ba)]));
    st.open(&parts).unwrap();
    assert!(st.poll_transmit().is_some_and(|(to, f)| to == ba && f.len() >= 32));
}
