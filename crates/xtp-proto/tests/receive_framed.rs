//! `XtpProtocol`'s `Layer::receive` without the peer beside the frame: the
//! path no composition takes today (the graph calls `demux` and `pop`
//! itself; the compiled stack passes the peer), kept out of line as
//! `receive_framed`. A composition that calls `receive` with the peer in
//! the device header must get exactly `demux` then `pop`; one with neither
//! a header nor a peer must get the frame refused with the reason, never a
//! panic.

use std::net::SocketAddr;

use bytes::{Bytes, BytesMut};
use xk_core::device::{ADDR_HEADER, write_addr};
use xk_core::{Addr, ArenaId, Cx, DemuxError, Layer, Part, Participants, ProtocolId, SessionId, Upper};
use xk_msg::{Contig, Msg};
use xk_time::{HeapQueue, Instant};
use xtp_proto::{ContextConfig, EndpointConfig, XtpProtocol};

type Xtp = XtpProtocol<Contig, HeapQueue<ArenaId>>;

/// A context recording what the protocol hands up and down. `H` is its
/// device header: `ADDR_HEADER` as in the graph, or 0 as in the compiled
/// stack.
#[derive(Default)]
struct Rec<const H: usize> {
    frames: Vec<(SocketAddr, BytesMut)>,
    opened: Vec<SessionId>,
    data: Vec<u8>,
}

impl<const H: usize> Cx<Contig> for Rec<H> {
    const DEVICE_HEADER: usize = H;
    const PULLS_EVENTS: bool = false;

    fn now(&self) -> Instant {
        Instant::ZERO
    }
    fn me(&self) -> ProtocolId {
        xk_core::compiled::STACK_PROTOCOL
    }
    fn deliver(&mut self, _: Upper, _: SessionId, msg: Contig, _: bool) {
        msg.for_each_chunk(|c| self.data.extend_from_slice(c));
    }
    fn open_done(&mut self, _: Upper, session: SessionId, _: Participants) {
        self.opened.push(session);
    }
    fn close_done(&mut self, _: Upper, _: SessionId) {}
    fn transmit_to(&mut self, peer: SocketAddr, frame: BytesMut) {
        self.frames.push((peer, frame));
    }
}

fn addrs() -> (SocketAddr, SocketAddr) {
    ("10.0.0.1:1".parse().unwrap(), "10.0.0.2:1".parse().unwrap())
}

fn xtp(seed: u64) -> Xtp {
    XtpProtocol::new(EndpointConfig::default(), ContextConfig::stream(), seed)
}

/// Moves every frame `from` (at `fa`) sends into `to` through `receive`
/// with no peer beside it: the device header carries the source, as the
/// graph's device writes it. Returns how many frames.
fn pass(
    from: &mut Xtp,
    fcx: &mut Rec<ADDR_HEADER>,
    fa: SocketAddr,
    to: &mut Xtp,
    tcx: &mut Rec<ADDR_HEADER>,
) -> usize {
    Layer::flush(from, fcx);
    let frames = std::mem::take(&mut fcx.frames);
    let n = frames.len();
    for (_, mut frame) in frames {
        write_addr(&mut frame[..ADDR_HEADER], fa);
        Layer::receive(to, tcx, None, None, Contig::from_received(frame)).expect("a well-formed frame");
    }
    n
}

/// With the source in the device header and no `from`, `receive` demuxes
/// and pops: the server accepts the connection and its application gets
/// the client's bytes. Fails if the fallback drops or refuses the frame.
#[test]
fn receive_without_a_peer_reads_it_from_the_device_header() {
    let (aa, ba) = addrs();
    let (mut a, mut b) = (xtp(1), xtp(2));
    let (mut acx, mut bcx) = (Rec::<ADDR_HEADER>::default(), Rec::<ADDR_HEADER>::default());
    Layer::init(&mut a, &mut acx).unwrap();
    Layer::init(&mut b, &mut bcx).unwrap();
    Layer::open_enable(&mut b, &mut bcx, Upper::App, &Participants::local(Part::top_first([Addr::Port(7)])))
        .unwrap();
    let remote = Part::top_first([Addr::Port(7), Addr::Inet(ba)]);
    let s = Layer::open(&mut a, &mut acx, Upper::App, &Participants::new(Part::new(), remote)).unwrap();
    Layer::push(&mut a, &mut acx, s, Contig::from_shared(Bytes::from_static(b"framed hello"))).unwrap();
    for _ in 0..50 {
        let n = pass(&mut a, &mut acx, aa, &mut b, &mut bcx) + pass(&mut b, &mut bcx, ba, &mut a, &mut acx);
        if n == 0 {
            break;
        }
    }
    assert_eq!(bcx.opened.len(), 1, "the server's application was told of the connection");
    assert_eq!(bcx.data, b"framed hello");
    assert_eq!(b.endpoint().stats().malformed, 0);
}

/// Without a device header and without `from` there is no source to find
/// the context by: the frame is refused with the reason (`pop`'s), and
/// nothing is handed up.
#[test]
fn receive_without_a_peer_or_a_header_is_refused_with_the_reason() {
    let (_, ba) = addrs();
    let (mut a, mut b) = (xtp(1), xtp(2));
    let (mut acx, mut bcx) = (Rec::<0>::default(), Rec::<0>::default());
    Layer::init(&mut a, &mut acx).unwrap();
    Layer::init(&mut b, &mut bcx).unwrap();
    Layer::open_enable(&mut b, &mut bcx, Upper::App, &Participants::local(Part::top_first([Addr::Port(7)])))
        .unwrap();
    let remote = Part::top_first([Addr::Port(7), Addr::Inet(ba)]);
    Layer::open(&mut a, &mut acx, Upper::App, &Participants::new(Part::new(), remote)).unwrap();
    Layer::flush(&mut a, &mut acx);
    let (_, frame) = acx.frames.pop().expect("the client's FIRST");
    let r = Layer::receive(&mut b, &mut bcx, None, None, Contig::from_received(frame));
    assert!(matches!(r, Err(DemuxError::Malformed(w)) if w.contains("source address")), "{r:?}");
    assert!(bcx.opened.is_empty());
}
