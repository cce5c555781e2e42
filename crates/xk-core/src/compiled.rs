//! The compiled stack: a composition fixed at compile time, for the shapes
//! known in advance (PIX's generated stacks, seed 003).
//!
//! [`Graph`](crate::Graph) composes protocols at run time: each is a
//! `Box<dyn Protocol>`, taken out of its table for each call, and every
//! message between layers goes through the dispatcher's queue. That is what
//! makes a graph rearrangeable from a description, and it costs a dozen
//! small steps per packet (docs/PERF.md, "Session 13: where the framework's
//! extra cost goes"). A [`Stack`] is the same uniform interface with the
//! composition as a type: `Stack<M, P>` is the application over protocol
//! `P` over a datagram device, `P` a type parameter, so every verb is a
//! direct (inlinable) call of `P`'s [`Layer`] implementation, monomorphised
//! for this stack's context [`DeviceCx`]:
//!
//! * no dynamic dispatch and no dispatcher queue: `receive` calls the
//!   protocol's [`Layer::receive`] (its `demux` and `pop` in one call, the
//!   x-kernel's `xDemux` calling `xPop`), `poll_transmit` calls `flush`, the
//!   application's `push` calls `push`;
//! * the application pulls its events ([`Cx::PULLS_EVENTS`]): `poll_event`
//!   returns what the protocol's [`Layer::poll_up`] takes from its own state,
//!   one event per call and no event queue between, as the direct driver's
//!   application reads its endpoint;
//! * the peer travels beside the frame, typed (`receive(from, frame)`,
//!   `poll_transmit() -> (to, frame)`), not in a device header
//!   ([`Cx::DEVICE_HEADER`] is 0 here); the source reaches the protocol as
//!   [`Layer::receive`]'s `from`, never stored in the context;
//! * the protocol's code is the one the graph runs: a protocol written
//!   against [`Cx`] implements [`Layer`] once, for both contexts.
//!
//! What it gives up: one protocol between the application and the device
//! (the shape `app -> P -> device`, which is every XTP stack of
//! `xtp_proto::stack`), no demux meter, no protocol-to-protocol verbs (a
//! protocol in a `Stack` has nothing below it but the device). A description
//! of that shape selects it (`xtp_proto::stack::AnyStack`); any other shape
//! builds a [`Graph`](crate::Graph).

use std::collections::VecDeque;
use std::net::SocketAddr;

use xk_msg::{BytesMut, Msg};
use xk_time::Instant;

use crate::addr::Participants;
use crate::graph::{Event, ProtocolStats};
use crate::upi::{
    CloseError, Control, ControlError, ControlReply, Cx, DemuxError, Layer, OpenError, ProtocolId, PushError,
    SessionId, Upper,
};

/// The context of the protocol in a [`Stack`]: the time, the queue of
/// events for the application, and the queue of frames for the device.
pub struct DeviceCx<M> {
    now: Instant,
    events: VecDeque<Event<M>>,
    /// The next frame for the device: a protocol that hands out one frame
    /// per `flush` (XTP) never needs more, and a slot is cheaper than a
    /// queue. Further frames wait in `more`, in order. `more` is empty
    /// whenever `next` is: so the device's poll tests `next` alone, once
    /// before asking the protocol and once after (two tests per empty
    /// poll, not four; docs/PERF.md, Session 22).
    next: Option<(SocketAddr, M)>,
    more: VecDeque<(SocketAddr, M)>,
}

impl<M> DeviceCx<M> {
    /// Takes the next queued frame, moving the one behind it (if any) into
    /// the slot (keeps `more` empty while `next` is).
    #[inline]
    fn take_next(&mut self) -> Option<(SocketAddr, M)> {
        let f = self.next.take();
        if !self.more.is_empty() {
            self.next = self.more.pop_front();
        }
        f
    }
}

impl<M: Msg> Cx<M> for DeviceCx<M> {
    const DEVICE_HEADER: usize = 0;
    const PULLS_EVENTS: bool = true;

    #[inline]
    fn now(&self) -> Instant {
        self.now
    }
    #[inline]
    fn me(&self) -> ProtocolId {
        STACK_PROTOCOL
    }
    #[inline]
    fn deliver(&mut self, _upper: Upper, session: SessionId, msg: M, eom: bool) {
        // The application is the only upper layer of a stack.
        self.events.push_back(Event::Deliver { session, msg, eom });
    }
    fn open_done(&mut self, _upper: Upper, session: SessionId, parts: Participants) {
        self.events.push_back(Event::OpenDone { session, parts: Box::new(parts) });
    }
    fn close_done(&mut self, _upper: Upper, session: SessionId) {
        self.events.push_back(Event::CloseDone { session });
    }
    #[inline]
    fn transmit_to(&mut self, peer: SocketAddr, frame: BytesMut) {
        let f = (peer, M::from_received(frame));
        if self.next.is_none() {
            self.next = Some(f);
        } else {
            self.more.push_back(f);
        }
    }
}

/// The id of the protocol of every [`Stack`] (its sessions carry it).
pub const STACK_PROTOCOL: ProtocolId = ProtocolId(0);

/// The application over protocol `P` over a datagram device, composed at
/// compile time. See the module documentation. The verbs are the
/// [`Graph`](crate::Graph)'s, without the protocol argument (there is one).
pub struct Stack<M, P> {
    proto: P,
    cx: DeviceCx<M>,
    stats: ProtocolStats,
    last_drop: Option<String>,
    /// Frames dropped for not fitting the device's transmit buffer.
    too_long: u64,
}

impl<M: Msg, P: Layer<M, DeviceCx<M>>> Stack<M, P> {
    /// A stack on `proto`, initialised (its `init` run).
    pub fn new(mut proto: P) -> Result<Self, OpenError> {
        let mut cx =
            DeviceCx { now: Instant::ZERO, events: VecDeque::new(), next: None, more: VecDeque::new() };
        proto.init(&mut cx)?;
        Ok(Stack { proto, cx, stats: ProtocolStats::default(), last_drop: None, too_long: 0 })
    }

    /// The protocol (its counters, its state).
    pub fn protocol(&self) -> &P {
        &self.proto
    }

    /// The protocol's name.
    pub fn name(&self) -> &'static str {
        self.proto.name()
    }

    /// Active open by the application.
    pub fn open(&mut self, parts: &Participants) -> Result<SessionId, OpenError> {
        self.proto.open(&mut self.cx, Upper::App, parts)
    }

    /// Passive open by the application.
    pub fn open_enable(&mut self, parts: &Participants) -> Result<(), OpenError> {
        self.proto.open_enable(&mut self.cx, Upper::App, parts)
    }

    /// Withdraws a passive open.
    pub fn open_disable(&mut self, parts: &Participants) -> Result<(), OpenError> {
        self.proto.open_disable(&mut self.cx, Upper::App, parts)
    }

    /// Sends `msg` on a session the application holds.
    #[inline]
    pub fn push(&mut self, session: SessionId, msg: M) -> Result<(), PushError> {
        let r = self.proto.push(&mut self.cx, session, msg);
        self.count_push(&r);
        r
    }

    /// Sends `msg` as a piece of a message, `eom` marking its end
    /// ([`Layer::push_part`]).
    #[inline]
    pub fn push_part(&mut self, session: SessionId, msg: M, eom: bool) -> Result<(), PushError> {
        let r = self.proto.push_part(&mut self.cx, session, msg, eom);
        self.count_push(&r);
        r
    }

    #[inline]
    fn count_push(&mut self, r: &Result<(), PushError>) {
        match r {
            Ok(()) => self.stats.pushed += 1,
            // Flow control, not a drop: the caller keeps the message and
            // pushes again (a sender filling its buffer meets it on every
            // write; no count, no string).
            Err(PushError::WouldBlock) => {}
            Err(e) => self.push_dropped(e),
        }
    }

    /// Counts a refused push. Out of line: its message string would keep
    /// every push from being inlined.
    #[cold]
    #[inline(never)]
    fn push_dropped(&mut self, e: &PushError) {
        self.stats.push_drops += 1;
        self.last_drop = Some(e.to_string());
    }

    /// Counts a frame the protocol refused (out of line, as `push_dropped`).
    #[cold]
    #[inline(never)]
    fn demux_dropped(&mut self, e: DemuxError) {
        self.stats.demux_drops += 1;
        self.last_drop = Some(e.to_string());
    }

    /// A control request (on `session` if given).
    pub fn control(
        &mut self,
        session: Option<SessionId>,
        req: Control,
    ) -> Result<ControlReply, ControlError> {
        self.proto.control(&mut self.cx, session, req)
    }

    /// Closes a session the application holds.
    pub fn close(&mut self, session: SessionId) -> Result<(), CloseError> {
        self.proto.close(&mut self.cx, session)
    }

    /// A frame from the device, sent by `from`: the protocol's
    /// [`Layer::receive`] (`demux` and `pop` in one direct call; no demux
    /// meter here to time `demux` alone), `from` its argument. A refused
    /// frame is counted ([`Stack::stats`], [`Stack::last_drop`]), never a
    /// panic.
    #[inline]
    pub fn receive(&mut self, from: SocketAddr, frame: M) {
        match self.proto.receive(&mut self.cx, None, Some(from), frame) {
            Ok(()) => self.stats.popped += 1,
            Err(e) => self.demux_dropped(e),
        }
    }

    /// The next frame for the device and its destination. When none is
    /// queued the protocol is asked to [`Layer::flush`] first.
    #[inline]
    pub fn poll_transmit(&mut self) -> Option<(SocketAddr, M)> {
        // The device polls until it gets nothing, so the empty case (a
        // flush that sends nothing) is as common as a frame: no store into
        // the slot and no read of it beyond its tag on that path.
        if self.cx.next.is_none() {
            self.proto.flush(&mut self.cx);
            // Nothing sent: return before `take` writes the slot.
            self.cx.next.as_ref()?;
        }
        self.cx.take_next()
    }

    /// The next frame written into the device's buffer `buf`, with its
    /// destination and length: the protocol writes it there itself
    /// ([`Layer::flush_into`]) when it can, as the direct endpoint writes
    /// into its driver's buffer, else a queued frame is copied in. `buf`
    /// must hold the largest datagram the device sends; a queued frame
    /// longer than `buf` is dropped and counted ([`Stack::too_long`],
    /// [`Stack::last_drop`] says which limit).
    #[inline]
    pub fn poll_transmit_into(&mut self, buf: &mut [u8]) -> Option<(SocketAddr, usize)> {
        if self.cx.next.is_none() {
            if let Some(sent) = self.proto.flush_into(&mut self.cx, buf) {
                return Some(sent);
            }
            // Nothing written and nothing queued (the common empty poll):
            // return before `take` writes the slot.
            self.cx.next.as_ref()?;
        }
        loop {
            let (dst, frame) = self.cx.take_next()?;
            match frame.frame_into(buf) {
                Ok(n) => return Some((dst, n)),
                Err(e) => self.oversize(e.needed, e.available),
            }
        }
    }

    /// Counts a frame too long for the device's buffer (out of line, as
    /// `push_dropped`).
    #[cold]
    #[inline(never)]
    fn oversize(&mut self, len: usize, room: usize) {
        self.too_long += 1;
        self.last_drop =
            Some(format!("a {len}-byte frame does not fit the device's {room}-byte transmit buffer"));
    }

    /// The next event for the application: one a verb handed up at once
    /// (`Cx::deliver`, for a protocol that does not pull), else the one the
    /// protocol's [`Layer::poll_up`] returns, taken from its own state with
    /// no queue between (the application pulls, as the direct application
    /// reads its endpoint).
    #[inline]
    pub fn poll_event(&mut self) -> Option<Event<M>> {
        if !self.cx.events.is_empty() {
            return self.cx.events.pop_front();
        }
        self.proto.poll_up(&mut self.cx)
    }

    /// Moves the stack's time to `now` (ignored if earlier).
    #[inline]
    pub fn advance(&mut self, now: Instant) {
        if now > self.cx.now {
            self.cx.now = now;
        }
    }

    /// The stack's time.
    pub fn now(&self) -> Instant {
        self.cx.now
    }

    /// When the protocol next wants [`Stack::handle_timeout`].
    pub fn poll_timeout(&mut self) -> Option<Instant> {
        self.proto.poll_timeout()
    }

    /// Advances to `now` and runs the protocol's timers due by then.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.advance(now);
        let now = self.cx.now;
        if self.proto.poll_timeout().is_some_and(|t| t <= now) {
            self.proto.handle_timeout(&mut self.cx, now);
        }
    }

    /// The protocol's counters, kept as the graph keeps them.
    pub fn stats(&self) -> ProtocolStats {
        self.stats
    }

    /// Frames dropped by [`Stack::poll_transmit_into`] for not fitting the
    /// device's buffer.
    pub fn too_long(&self) -> u64 {
        self.too_long
    }

    /// Why the stack last dropped a message, if it ever did.
    pub fn last_drop(&self) -> Option<&str> {
        self.last_drop.as_deref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::DeviceStack;
    use xk_msg::Contig;

    /// A protocol that sends each push as a frame to one peer, queued at
    /// once (`Cx::transmit_to`). With `fresh` it also writes one frame
    /// `fresh` straight into a lent buffer (`flush_into`, once); without,
    /// it keeps the default `flush_into`: what the stack does with a
    /// protocol that does not write into a lent buffer.
    struct Sender {
        fresh: bool,
    }

    const PEER: &str = "10.0.0.2:9";

    impl<M: Msg> Layer<M, DeviceCx<M>> for Sender {
        fn name(&self) -> &'static str {
            "sender"
        }
        fn flush_into(&mut self, cx: &mut DeviceCx<M>, buf: &mut [u8]) -> Option<(SocketAddr, usize)> {
            if !std::mem::take(&mut self.fresh) {
                self.flush(cx);
                return None;
            }
            buf[..5].copy_from_slice(b"fresh");
            Some((PEER.parse().unwrap(), 5))
        }
        fn open(&mut self, _: &mut DeviceCx<M>, _: Upper, _: &Participants) -> Result<SessionId, OpenError> {
            Ok(SessionId { protocol: STACK_PROTOCOL, slot: crate::ArenaId::from_parts(0, 0) })
        }
        fn open_enable(&mut self, _: &mut DeviceCx<M>, _: Upper, _: &Participants) -> Result<(), OpenError> {
            Ok(())
        }
        fn open_disable(&mut self, _: &mut DeviceCx<M>, _: Upper, _: &Participants) -> Result<(), OpenError> {
            Ok(())
        }
        fn demux(
            &mut self,
            _: &mut DeviceCx<M>,
            _: Option<SessionId>,
            _: &mut M,
        ) -> Result<SessionId, DemuxError> {
            Err(DemuxError::Malformed("a sender only"))
        }
        fn pop(
            &mut self,
            _: &mut DeviceCx<M>,
            _: SessionId,
            _: Option<SessionId>,
            _: M,
        ) -> Result<(), DemuxError> {
            Err(DemuxError::Malformed("a sender only"))
        }
        fn push(&mut self, cx: &mut DeviceCx<M>, _: SessionId, msg: M) -> Result<(), PushError> {
            let mut frame = BytesMut::with_capacity(msg.len());
            msg.for_each_chunk(|c| frame.extend_from_slice(c));
            cx.transmit_to(PEER.parse().unwrap(), frame);
            Ok(())
        }
        fn control(
            &mut self,
            _: &mut DeviceCx<M>,
            _: Option<SessionId>,
            req: Control,
        ) -> Result<ControlReply, ControlError> {
            Err(ControlError::Unsupported(req))
        }
        fn close(&mut self, _: &mut DeviceCx<M>, _: SessionId) -> Result<(), CloseError> {
            Ok(())
        }
    }

    /// A protocol without `flush_into` loses nothing: its queued frames are
    /// copied into the lent buffer in order, and one too long for it is
    /// dropped, counted and named with the limit, never a panic.
    #[test]
    fn queued_frames_are_copied_into_the_lent_buffer_and_a_long_one_is_counted() {
        let mut s = Stack::<Contig, _>::new(Sender { fresh: false }).unwrap();
        let session = s.open(&Participants::default()).unwrap();
        for m in [&b"first"[..], &[7u8; 200][..], &b"third"[..]] {
            s.push(session, Contig::from_shared(xk_msg::Bytes::copy_from_slice(m))).unwrap();
        }
        let mut buf = [0u8; 100];
        let (to, n) = s.poll_transmit_into(&mut buf).expect("the first frame");
        assert_eq!((to, &buf[..n]), (PEER.parse().unwrap(), &b"first"[..]));
        let (_, n) = s.poll_transmit_into(&mut buf).expect("the third frame, after the long one");
        assert_eq!(&buf[..n], b"third");
        assert_eq!(s.poll_transmit_into(&mut buf), None);
        assert_eq!(s.too_long(), 1);
        assert_eq!(DeviceStack::drops(&s).bad_frames, 1);
        let why = s.last_drop().unwrap();
        assert!(why.contains("200-byte frame") && why.contains("100-byte transmit buffer"), "{why}");
    }

    /// Three frames queued at once all leave through `poll_transmit`, in
    /// the order they were pushed: the slot is refilled from the queue
    /// behind it on each take (fails if `poll_transmit` takes the slot
    /// alone, `next.take()`, which strands the second and third frames).
    #[test]
    fn poll_transmit_returns_every_queued_frame_in_order() {
        let mut s = Stack::<Contig, _>::new(Sender { fresh: false }).unwrap();
        let session = s.open(&Participants::default()).unwrap();
        for m in [&b"one"[..], b"two", b"three"] {
            s.push(session, Contig::from_shared(xk_msg::Bytes::copy_from_slice(m))).unwrap();
        }
        let mut sent = Vec::new();
        while let Some((to, frame)) = s.poll_transmit() {
            assert_eq!(to, PEER.parse().unwrap());
            sent.push(frame.to_vec());
        }
        assert_eq!(sent, [&b"one"[..], b"two", b"three"]);
    }

    /// Frames queued before the device asks go out before anything the
    /// protocol writes into the lent buffer: a fresh packet never overtakes
    /// them (fails if `poll_transmit_into` asks `flush_into` first).
    #[test]
    fn queued_frames_leave_before_a_frame_written_into_the_lent_buffer() {
        let mut s = Stack::<Contig, _>::new(Sender { fresh: true }).unwrap();
        let session = s.open(&Participants::default()).unwrap();
        s.push(session, Contig::from_shared(xk_msg::Bytes::from_static(b"queued"))).unwrap();
        let mut buf = [0u8; 100];
        let mut sent = Vec::new();
        while let Some((_, n)) = s.poll_transmit_into(&mut buf) {
            sent.push(buf[..n].to_vec());
        }
        assert_eq!(sent, [&b"queued"[..], &b"fresh"[..]]);
    }
}
