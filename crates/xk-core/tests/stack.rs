//! A working stack: messages pushed down one graph, carried to another and
//! popped up through it, for both message forms.

use xk_core::protocols::{Echo, LoopLink, Mux};
use xk_core::{
    Addr, Control, ControlReply, Event, Graph, GraphBuilder, OpenError, Part, Participants, ProtocolId,
    PushError,
};
use xk_msg::{Bytes, BytesMut, Contig, Msg, Rope, copy_stats, reset_copy_stats};

struct Host<M> {
    g: Graph<M>,
    link: ProtocolId,
    mux: ProtocolId,
}

fn host<M: Msg + 'static>(echo_port: Option<u16>, mtu: usize) -> Host<M> {
    let mut b = GraphBuilder::<M>::new();
    let link = b.add(LoopLink::new(mtu), &[]);
    let mux = b.add(Mux::new(0x0800, 42), &[link]);
    if let Some(p) = echo_port {
        b.add(Echo::new(p), &[mux]);
    }
    Host { g: b.build().unwrap(), link, mux }
}

/// Moves frames both ways until neither graph has anything to send.
fn wire<M: Msg>(a: &mut Host<M>, b: &mut Host<M>) -> usize {
    let mut frames = 0;
    loop {
        let mut moved = false;
        while let Some((_, f)) = a.g.poll_transmit() {
            b.g.receive(b.link, f);
            moved = true;
            frames += 1;
        }
        while let Some((_, f)) = b.g.poll_transmit() {
            a.g.receive(a.link, f);
            moved = true;
            frames += 1;
        }
        if !moved {
            return frames;
        }
    }
}

fn ports(local: u16, remote: u16) -> Participants {
    Participants::new(Part::top_first([Addr::Port(local)]), Part::top_first([Addr::Port(remote)]))
}

fn echo_round_trip<M: Msg + 'static>() {
    let mut a = host::<M>(None, 65_535);
    let mut b = host::<M>(Some(7), 65_535);
    let s = a.g.open(a.mux, &ports(5000, 7)).unwrap();
    for size in [0usize, 10, 1_000, 10_000] {
        let payload: Vec<u8> = (0..size).map(|i| (i * 7) as u8).collect();
        a.g.push(s, M::from_payload(Bytes::from(payload.clone()), 64)).unwrap();
        assert_eq!(wire(&mut a, &mut b), 2, "one frame each way");
        match a.g.poll_event() {
            Some(Event::Deliver { session, msg, .. }) => {
                assert_eq!(session, s);
                assert_eq!(msg.to_vec(), payload, "size {size}");
            }
            other => panic!("size {size}: expected the echo, got {other:?}"),
        }
        assert!(a.g.poll_event().is_none());
    }
    assert_eq!(a.g.stats(a.mux).popped, 4);
    assert_eq!(b.g.stats(b.mux).pushed, 4);
}

#[test]
fn echo_round_trip_contig() {
    echo_round_trip::<Contig>();
}

#[test]
fn echo_round_trip_rope() {
    echo_round_trip::<Rope>();
}

#[test]
fn rope_stack_copies_no_payload() {
    let mut a = host::<Rope>(None, 65_535);
    let mut b = host::<Rope>(Some(7), 65_535);
    let s = a.g.open(a.mux, &ports(5000, 7)).unwrap();
    let payload = Bytes::from(vec![1u8; 10_000]);
    reset_copy_stats();
    a.g.push(s, Rope::from_payload(payload.clone(), 64)).unwrap();
    wire(&mut a, &mut b);
    let Some(Event::Deliver { msg, .. }) = a.g.poll_event() else { panic!("no echo") };
    // Headers were pushed in headroom and popped again: the payload is the
    // application's own allocation, never copied.
    assert_eq!(copy_stats().copies, 0, "{:?}", copy_stats());
    assert_eq!(msg.into_bytes().as_ptr(), payload.as_ptr());
}

#[test]
fn passive_open_announces_the_session_to_the_app() {
    let mut a = host::<Rope>(None, 1500);
    let mut b = host::<Rope>(None, 1500);
    b.g.open_enable(b.mux, &Participants::local(Part::top_first([Addr::Port(9)]))).unwrap();
    assert!(matches!(
        b.g.open_enable(b.mux, &Participants::local(Part::top_first([Addr::Port(9)]))),
        Err(OpenError::InUse(Addr::Port(9)))
    ));
    let s = a.g.open(a.mux, &ports(4000, 9)).unwrap();
    a.g.push(s, Rope::from_payload(Bytes::from_static(b"ping"), 64)).unwrap();
    wire(&mut a, &mut b);
    let Some(Event::OpenDone { session: server, parts }) = b.g.poll_event() else { panic!("no open_done") };
    assert_eq!(parts.remote.peek(), Some(&Addr::Port(4000)));
    let Some(Event::Deliver { session, msg, .. }) = b.g.poll_event() else { panic!("no delivery") };
    assert_eq!((session, msg.to_vec()), (server, b"ping".to_vec()));
    b.g.push(server, Rope::from_payload(Bytes::from_static(b"pong"), 64)).unwrap();
    wire(&mut a, &mut b);
    let Some(Event::Deliver { msg, .. }) = a.g.poll_event() else { panic!("no reply") };
    assert_eq!(msg.to_vec(), b"pong");
    assert_eq!(
        b.g.control(b.mux, Some(server), Control::GetPeerAddr),
        Ok(ControlReply::Addr(Addr::Port(4000)))
    );
    // Close: the app hears close_done, the session id goes stale.
    b.g.close(server).unwrap();
    assert!(matches!(b.g.poll_event(), Some(Event::CloseDone { session }) if session == server));
    assert_eq!(b.g.push(server, Rope::from_payload(Bytes::from_static(b"x"), 64)), Err(PushError::NoSession));
}

#[test]
fn bad_frames_are_counted_and_dropped() {
    let mut b = host::<Contig>(Some(7), 1500);
    // Truncated link header, unknown link type, truncated mux header, no listener.
    b.g.receive(b.link, Contig::from_received(BytesMut::from(&[0x08u8][..])));
    b.g.receive(b.link, Contig::from_received(BytesMut::from(&[0x86u8, 0xdd, 1, 2][..])));
    assert_eq!(b.g.stats(b.link).demux_drops, 2);
    b.g.receive(b.link, Contig::from_received(BytesMut::from(&[0x08u8, 0x00, 1][..])));
    assert_eq!(b.g.stats(b.mux).demux_drops, 1);
    b.g.receive(b.link, Contig::from_received(BytesMut::from(&[0x08u8, 0x00, 0, 1, 0, 99, b'x'][..])));
    assert_eq!(b.g.stats(b.mux).demux_drops, 2);
    assert!(b.g.last_drop(b.mux).unwrap().contains("port 99"), "{:?}", b.g.last_drop(b.mux));
    assert!(b.g.poll_transmit().is_none(), "nothing answered a bad frame");
}

#[test]
fn control_and_limits_travel_through_the_graph() {
    let mut a = host::<Rope>(None, 1500);
    assert_eq!(a.g.control(a.mux, None, Control::GetMaxPacket), Ok(ControlReply::Size(1500 - 2 - 4)));
    let s = a.g.open(a.mux, &ports(1, 2)).unwrap();
    // The mux accepts it; the link refuses and counts the drop.
    a.g.push(s, Rope::from_payload(Bytes::from(vec![0u8; 1495]), 64)).unwrap();
    assert_eq!(a.g.stats(a.link).push_drops, 1);
    assert!(a.g.poll_transmit().is_none());
    assert!(a.g.to_dot().contains("p1 -> p0"));
    assert!(matches!(a.g.open(a.mux, &ports(1, 2)), Err(OpenError::InUse(_))));
}

/// The toy stack from a graph description (issue #16): `echo -> mux ->
/// loop` on one side, `app -> mux -> loop` on the other, built through
/// the toys' registry (`xk_core::protocols::toys`), echoes a message.
#[test]
fn a_described_stack_echoes() {
    fn build(text: &str, seed: u64) -> Host<Rope> {
        let reg = xk_core::protocols::toys::<Rope>();
        let desc = reg.parse(text).unwrap();
        let built = reg.build(&desc, &seed).unwrap();
        let id = |name| built.ids[desc.find(name).unwrap()].unwrap();
        Host { link: id("loop"), mux: id("mux"), g: built.graph }
    }
    let mut a = build("app -> mux -> loop", 1);
    let mut b = build("# the server\necho -> mux\nmux -> loop", 2);
    let s = a.g.open(a.mux, &ports(5000, 7)).unwrap();
    a.g.push(s, Rope::from_payload(Bytes::from_static(b"described"), 64)).unwrap();
    assert_eq!(wire(&mut a, &mut b), 2);
    let Some(Event::Deliver { msg, .. }) = a.g.poll_event() else { panic!("no echo") };
    assert_eq!(msg.to_vec(), b"described");
    assert!(b.g.to_dot().contains("label=\"echo\""));
}

#[test]
fn an_event_is_no_larger_than_a_delivery() {
    // Every delivery crosses to the application as an `Event` by value; the
    // rare open keeps its participants boxed so it does not set the size
    // (72 bytes unboxed, 64 boxed: the delivery's session, message and
    // end mark).
    let (event, delivery) =
        (std::mem::size_of::<Event<Contig>>(), std::mem::size_of::<(xk_core::SessionId, Contig, bool)>());
    assert!(event <= delivery, "Event<Contig> {event} bytes, a delivery's fields {delivery}");
}
