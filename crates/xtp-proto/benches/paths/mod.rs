//! The paths the framework benchmarks compare (issue #16), shared by
//! `layer.rs` (criterion, each path timed on its own) and `layer_ab.rs`
//! (the direct and compiled paths timed in alternating batches): the same
//! ping-pong and bulk transfer as `engine.rs`, once on two `Endpoint`s over
//! the test kit's `Wire` (direct), once on two `xk-core` graphs holding
//! `XtpProtocol` over `GraphWire` (framework), once on two compiled
//! `Stack`s holding the same `XtpProtocol` over `StackWire` (compiled), in
//! each message form. The packets are the same on every path
//! (`tests/layer.rs`, `tests/compiled.rs` compare the packets themselves),
//! so the ratio is the framework's own cost. The benchmarks check counts
//! only: `layer.rs` the datagrams of every exchange against the direct
//! path's exchange of the same rank, `layer_ab.rs` one sum of datagrams
//! per timed batch against the direct batch of the same ranks (a
//! difference that cancels within a batch would pass it; `tests/layer.rs`
//! is the check on the packets).
//!
//! Copies: the direct wire has each endpoint write its packet into the
//! wire's transmit buffer and copies it once into a shared 64 KiB receive
//! arena (`Delivery::Arena`, as a driver sends from its buffer and the
//! kernel copies to the receiver). The compiled stack's wire does the same
//! (`StackWire::receive_copy`): XTP writes each packet into the buffer the
//! wire lends (`Stack::poll_transmit_into`, `Layer::flush_into`) and the
//! wire copies it into its receive arena — one pass over the bytes on both
//! paths, since Session 20. Before (Session 19), the compiled XTP wrote
//! into a scratch buffer and copied each packet into a frame of its own,
//! one pass more; before Session 19 the wire handed that frame over without
//! the receive copy, so the framework's copy stood in for the kernel's.
//! The graph's wire still hands its frames over (XTP copies each out of
//! its scratch buffer): one pass there, as on the direct path, but a
//! different one.
//!
//! The echoes pass each delivered chunk on with its end-of-message mark
//! (`push_part` on both framework paths, `write(.., eom, ..)` on the direct
//! one), so all three send the same packets.

use std::marker::PhantomData;

use bytes::Bytes;
use xk_core::compiled::Stack;
use xk_core::{Addr, ArenaId, Event as GEvent, GraphBuilder, Part, Participants, SessionId};
use xk_msg::{Contig, Msg, Rope};
use xk_time::{Duration, HeapQueue, Instant, TimerQueue};
use xtp_proto::{ContextConfig, ContextId, Endpoint, EndpointConfig, Event, NoTrace, XtpProtocol};
use xtp_testkit::{Delivery, GraphWire, StackPair, StackWire, Wire};

/// The direct pair: as `engine.rs`'s.
struct Direct {
    w: Wire,
    client: ContextId,
}

impl Direct {
    fn new(cfg: ContextConfig) -> Self {
        let ep = EndpointConfig::default();
        let mut a = Endpoint::<NoTrace>::new(ep.clone(), 1);
        let mut b = Endpoint::new(ep, 2);
        b.listen(7, cfg.clone()).unwrap();
        let (aa, ba) = ("10.0.0.1:1".parse().unwrap(), "10.0.0.2:1".parse().unwrap());
        let client = a.connect(Instant::ZERO, ba, 7, cfg).unwrap();
        let mut w = Wire::new(a, aa, b, ba, Instant::ZERO);
        w.step = Duration::from_micros(1);
        w.delivery = Delivery::Arena;
        w.log = false;
        Direct { w, client }
    }

    fn pump(&mut self, echo: bool) -> Moved {
        let (mut s, mut c, mut n) = (0, 0, 0);
        loop {
            let sent = self.w.from_a();
            n += sent;
            let mut moved = sent > 0;
            let (b, now) = (&mut self.w.b, self.w.now);
            while let Some(ev) = b.poll_event() {
                if let Event::Readable { ctx } = ev {
                    while let Some(ch) = b.read(now, ctx) {
                        s += ch.data.len();
                        if echo {
                            b.write(now, ctx, ch.data, ch.eom, None).unwrap();
                        }
                    }
                }
            }
            let sent = self.w.from_b();
            n += sent;
            moved |= sent > 0;
            let (a, now) = (&mut self.w.a, self.w.now);
            while let Some(ev) = a.poll_event() {
                if let Event::Readable { ctx } = ev {
                    while let Some(ch) = a.read(now, ctx) {
                        c += ch.data.len();
                    }
                }
            }
            if !moved {
                return Moved { server: s, client: c, datagrams: n };
            }
        }
    }
}

/// A framework pair: XTP in two graphs (`GraphWire`) or in two compiled
/// `Stack`s (`StackWire`: the composition a type, every call static, the
/// peer beside the frame). Both wires share the `StackPair` interface, so
/// one `Exchange` impl serves both, monomorphised for each.
struct Pair<M, W> {
    w: W,
    client: SessionId,
    _msg: PhantomData<M>,
}

/// XTP in two graphs.
fn framework<M: Msg + 'static, Q: TimerQueue<ArenaId> + Default + 'static>(
    cfg: ContextConfig,
) -> Pair<M, GraphWire<M>> {
    let ep = EndpointConfig::default();
    let graph = |seed| {
        let mut b = GraphBuilder::<M>::new();
        let x = b.add(XtpProtocol::<M, Q>::with_timer_queue(ep.clone(), cfg.clone(), seed), &[]);
        (b.build().unwrap(), x)
    };
    let (a, xa) = graph(1);
    let (mut b, xb) = graph(2);
    b.open_enable(xb, &Participants::local(Part::top_first([Addr::Port(7)]))).unwrap();
    let (aa, ba) = ("10.0.0.1:1".parse().unwrap(), "10.0.0.2:1".parse().unwrap());
    let mut w = GraphWire::new((a, xa, aa), (b, xb, ba), Instant::ZERO);
    w.step = Duration::from_micros(1);
    let remote = Part::top_first([Addr::Port(7), Addr::Inet(ba)]);
    let client = w.a.open(xa, &Participants::new(Part::new(), remote)).unwrap();
    Pair { w, client, _msg: PhantomData }
}

/// XTP in two compiled `Stack`s.
fn compiled<M: Msg + 'static>(
    cfg: ContextConfig,
) -> Pair<M, StackWire<M, XtpProtocol<M, HeapQueue<ArenaId>>>> {
    let ep = EndpointConfig::default();
    let stack = |seed| Stack::new(XtpProtocol::<M>::new(ep.clone(), cfg.clone(), seed)).unwrap();
    let (a, mut b) = (stack(1), stack(2));
    b.open_enable(&Participants::local(Part::top_first([Addr::Port(7)]))).unwrap();
    let (aa, ba) = ("10.0.0.1:1".parse().unwrap(), "10.0.0.2:1".parse().unwrap());
    let mut w = StackWire::new((a, aa), (b, ba), Instant::ZERO);
    w.step = Duration::from_micros(1);
    w.receive_copy = true;
    let remote = Part::top_first([Addr::Port(7), Addr::Inet(ba)]);
    let client = w.a.open(&Participants::new(Part::new(), remote)).unwrap();
    Pair { w, client, _msg: PhantomData }
}

/// Moves frames both ways until both stacks are quiet; b echoes what it
/// receives if `echo`, each chunk with its mark as the direct echo does.
/// One copy for both compositions, monomorphised for each.
fn pump_pair<M: Msg>(w: &mut impl StackPair<M>, echo: bool) -> Moved {
    let (mut s, mut c, mut n) = (0, 0, 0);
    loop {
        let sent = w.deliver(true);
        n += sent;
        let mut moved = sent > 0;
        while let Some(ev) = w.poll_event(false) {
            if let GEvent::Deliver { session, msg, eom } = ev {
                s += msg.len();
                if echo {
                    w.push_part(false, session, msg, eom).unwrap();
                }
            }
        }
        let sent = w.deliver(false);
        n += sent;
        moved |= sent > 0;
        while let Some(ev) = w.poll_event(true) {
            if let GEvent::Deliver { msg, .. } = ev {
                c += msg.len();
            }
        }
        if !moved {
            return Moved { server: s, client: c, datagrams: n };
        }
    }
}

/// What one exchange (or one pump) moved: the bytes the server and the
/// client read, and the datagrams that crossed the wire either way.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Moved {
    pub(crate) server: usize,
    pub(crate) client: usize,
    pub(crate) datagrams: usize,
}

pub(crate) trait Exchange {
    fn send(&mut self, data: &Bytes);
    /// Delivers what is in flight.
    fn pump(&mut self, echo: bool) -> Moved;
    /// Fires the next timer (false: none left).
    fn fire_next_timer(&mut self) -> bool;

    /// A transfer of `data`, echoed or not: pumps until both sides have
    /// read what they should, firing timers when the path falls quiet
    /// first.
    fn exchange(&mut self, data: &Bytes, echo: bool) -> Moved {
        self.send(data);
        let mut m = self.pump(echo);
        let want = (data.len(), if echo { data.len() } else { 0 });
        for _ in 0..10_000 {
            if m.server >= want.0 && m.client >= want.1 || !self.fire_next_timer() {
                break;
            }
            let d = self.pump(echo);
            m = Moved {
                server: m.server + d.server,
                client: m.client + d.client,
                datagrams: m.datagrams + d.datagrams,
            };
        }
        m
    }
}

impl Exchange for Direct {
    fn send(&mut self, data: &Bytes) {
        self.w.a.write(self.w.now, self.client, data.clone(), true, None).unwrap();
    }
    fn pump(&mut self, echo: bool) -> Moved {
        Direct::pump(self, echo)
    }
    fn fire_next_timer(&mut self) -> bool {
        self.w.fire_next_timer(None)
    }
}

impl<M: Msg + 'static, W: StackPair<M>> Exchange for Pair<M, W> {
    fn send(&mut self, data: &Bytes) {
        // The application hands a shared payload: no copy in either form.
        self.w.push(true, self.client, M::from_shared(data.clone())).unwrap();
    }
    fn pump(&mut self, echo: bool) -> Moved {
        pump_pair(&mut self.w, echo)
    }
    fn fire_next_timer(&mut self) -> bool {
        self.w.fire_next_timer(None)
    }
}

/// The paths' names, in the order `layer.rs` times them (direct first: it
/// records the datagram counts the others are checked against); `make`
/// builds any of them.
pub(crate) const NAMES: [&str; 5] = ["direct", "compiled-contig", "compiled-rope", "rope", "contig"];

/// A new instance of the path `name` (one of `NAMES`; `None` for another
/// name): direct; the compiled stack with contiguous messages and with
/// ropes; the dynamic graph with each.
pub(crate) fn make(name: &str) -> Option<Box<dyn Exchange>> {
    let cfg = ContextConfig::stream();
    Some(match name {
        "direct" => Box::new(Direct::new(cfg)),
        "compiled-contig" => Box::new(compiled::<Contig>(cfg)),
        "compiled-rope" => Box::new(compiled::<Rope>(cfg)),
        "rope" => Box::new(framework::<Rope, HeapQueue<ArenaId>>(cfg)),
        "contig" => Box::new(framework::<Contig, HeapQueue<ArenaId>>(cfg)),
        _ => return None,
    })
}
