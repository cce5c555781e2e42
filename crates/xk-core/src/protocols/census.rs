//! `census`: a pass-through datagram layer that counts the frames and bytes it
//! carries each way — a counter a user puts anywhere datagrams flow, e.g.
//! under XTP: `app -> xtp -> census -> udp`.
//!
//! It offers what it needs (datagrams by socket address, frames carrying the
//! graph's device header, `crate::device`), so it fits between a protocol
//! on a datagram device and that device without either noticing: the layer
//! above opens one session on it (the graph does it, `Graph::carry_frames`),
//! its frames for the device arrive here by `push` and leave unchanged for
//! the device; frames from the device go up unchanged with `deliver`. The
//! counters are read with the generic `Control::GetCounters`.
//!
//! This file, its `mod` line (`protocols/mod.rs`) and its line in a registry
//! (`xtp_proto::stack::registry`) are the whole of adding it
//! (docs/ARCHITECTURE.md, "Adding a protocol"; `tests/registry.rs` checks it
//! on the sources).

use xk_msg::Msg;

use crate::addr::Participants;
use crate::arena::ArenaId;
use crate::device::ADDR_HEADER;
use crate::graph::Ctx;
use crate::graph_desc::{Kind, Service};
use crate::upi::{
    CloseError, Control, ControlError, ControlReply, DemuxError, Layer, OpenError, Protocol, PushError,
    SessionId, Upper,
};

/// The kind graph descriptions name it by.
pub const KIND: Kind = Kind {
    name: "census",
    needs: &[Service::Datagram],
    offers: Some(Service::Datagram),
    device: false,
    needs_root: false,
    about: "counts frames and bytes each way, passes them on unchanged",
};

/// Its constructor for a registry (it takes no parameters).
pub fn make<M: Msg, E>(_env: &E) -> Result<Box<dyn Protocol<M>>, String> {
    Ok(Box::new(Census::default()))
}

/// The census. See the module documentation.
#[derive(Debug, Default)]
pub struct Census {
    /// The layer above and the generation of its session: one upper layer,
    /// as a device has one protocol on it.
    upper: Option<(Upper, u32)>,
    opened: u32,
    frames_down: u64,
    bytes_down: u64,
    frames_up: u64,
    bytes_up: u64,
}

impl Census {
    /// What it counted so far, named (its answer to `Control::GetCounters`):
    /// datagrams and their bytes (without the device header) each way.
    pub fn counters(&self) -> crate::Counters {
        vec![
            ("frames_down", self.frames_down),
            ("bytes_down", self.bytes_down),
            ("frames_up", self.frames_up),
            ("bytes_up", self.bytes_up),
        ]
    }

    fn session(&self, cx: &Ctx<'_, impl Msg>) -> Option<(Upper, SessionId)> {
        let (up, generation) = self.upper?;
        Some((up, SessionId { protocol: cx.me(), slot: ArenaId::from_parts(0, generation) }))
    }
}

/// Bytes of the datagram in a frame (the frame starts with the device
/// header).
fn datagram_len(msg: &impl Msg) -> u64 {
    msg.len().saturating_sub(ADDR_HEADER) as u64
}

impl<'a, M: Msg> Layer<M, Ctx<'a, M>> for Census {
    fn name(&self) -> &'static str {
        KIND.name
    }

    fn open(
        &mut self,
        cx: &mut Ctx<'a, M>,
        upper: Upper,
        _parts: &Participants,
    ) -> Result<SessionId, OpenError> {
        if self.upper.is_some() {
            return Err(OpenError::Unsupported("a census carries one upper layer's frames"));
        }
        self.opened += 1;
        self.upper = Some((upper, self.opened));
        Ok(self.session(cx).expect("just set").1)
    }

    fn open_enable(&mut self, _: &mut Ctx<'a, M>, _: Upper, _: &Participants) -> Result<(), OpenError> {
        Err(OpenError::Unsupported("a census's one session is opened by the layer above it"))
    }

    fn open_disable(&mut self, _: &mut Ctx<'a, M>, _: Upper, _: &Participants) -> Result<(), OpenError> {
        Err(OpenError::Unsupported("a census's one session is opened by the layer above it"))
    }

    fn demux(
        &mut self,
        cx: &mut Ctx<'a, M>,
        _lower: Option<SessionId>,
        _msg: &mut M,
    ) -> Result<SessionId, DemuxError> {
        self.session(cx)
            .map(|(_, s)| s)
            .ok_or_else(|| DemuxError::NoBinding("nothing sits on the census".into()))
    }

    fn pop(
        &mut self,
        cx: &mut Ctx<'a, M>,
        session: SessionId,
        _lower: Option<SessionId>,
        msg: M,
    ) -> Result<(), DemuxError> {
        let (up, _) = self.session(cx).ok_or(DemuxError::StaleSession)?;
        self.frames_up += 1;
        self.bytes_up += datagram_len(&msg);
        cx.deliver(up, session, msg, true);
        Ok(())
    }

    fn push(&mut self, cx: &mut Ctx<'a, M>, session: SessionId, msg: M) -> Result<(), PushError> {
        if self.session(cx).map(|(_, s)| s) != Some(session) {
            return Err(PushError::NoSession);
        }
        self.frames_down += 1;
        self.bytes_down += datagram_len(&msg);
        cx.transmit(msg);
        Ok(())
    }

    fn control(
        &mut self,
        _cx: &mut Ctx<'a, M>,
        _session: Option<SessionId>,
        req: Control,
    ) -> Result<ControlReply, ControlError> {
        match req {
            Control::GetCounters => Ok(ControlReply::Counters(self.counters())),
            Control::GetHeaderLen => Ok(ControlReply::Size(0)),
            Control::GetSessionCount => Ok(ControlReply::Count(usize::from(self.upper.is_some()))),
            _ => Err(ControlError::Unsupported(req)),
        }
    }

    /// Refused: its one session is the graph's wiring
    /// (`Graph::carry_frames`), not the application's. Closing it would
    /// leave the layer above pushing on a session that no longer exists.
    fn close(&mut self, cx: &mut Ctx<'a, M>, session: SessionId) -> Result<(), CloseError> {
        match self.session(cx) {
            Some((_, s)) if s == session => {
                Err(CloseError::Unsupported("a census's session is the graph's wiring, not closed"))
            }
            _ => Err(CloseError::NoSession),
        }
    }
}

#[cfg(test)]
mod tests {
    use xk_msg::{Bytes, Rope};

    use super::*;
    use crate::device::{read_addr, write_addr};
    use crate::{GraphBuilder, Part};

    /// A protocol on the device that sends what the application pushes to a
    /// fixed peer and hands up what arrives: enough to put a census under.
    struct Raw;
    impl<'a> Layer<Rope, Ctx<'a, Rope>> for Raw {
        fn name(&self) -> &'static str {
            "raw"
        }
        fn open(
            &mut self,
            cx: &mut Ctx<'a, Rope>,
            _: Upper,
            _: &Participants,
        ) -> Result<SessionId, OpenError> {
            Ok(SessionId { protocol: cx.me(), slot: ArenaId::from_parts(0, 1) })
        }
        fn open_enable(
            &mut self,
            _: &mut Ctx<'a, Rope>,
            _: Upper,
            _: &Participants,
        ) -> Result<(), OpenError> {
            Ok(())
        }
        fn open_disable(
            &mut self,
            _: &mut Ctx<'a, Rope>,
            _: Upper,
            _: &Participants,
        ) -> Result<(), OpenError> {
            Ok(())
        }
        fn demux(
            &mut self,
            cx: &mut Ctx<'a, Rope>,
            _: Option<SessionId>,
            _: &mut Rope,
        ) -> Result<SessionId, DemuxError> {
            Ok(SessionId { protocol: cx.me(), slot: ArenaId::from_parts(0, 1) })
        }
        fn pop(
            &mut self,
            cx: &mut Ctx<'a, Rope>,
            s: SessionId,
            _: Option<SessionId>,
            mut msg: Rope,
        ) -> Result<(), DemuxError> {
            msg.pop(ADDR_HEADER)?;
            cx.deliver(Upper::App, s, msg, true);
            Ok(())
        }
        fn push(&mut self, cx: &mut Ctx<'a, Rope>, _: SessionId, mut msg: Rope) -> Result<(), PushError> {
            write_addr(msg.push(ADDR_HEADER), "10.0.0.2:9".parse().unwrap());
            cx.transmit(msg);
            Ok(())
        }
        fn control(
            &mut self,
            _: &mut Ctx<'a, Rope>,
            _: Option<SessionId>,
            req: Control,
        ) -> Result<ControlReply, ControlError> {
            Err(ControlError::Unsupported(req))
        }
        fn close(&mut self, _: &mut Ctx<'a, Rope>, _: SessionId) -> Result<(), CloseError> {
            Ok(())
        }
    }

    #[test]
    fn a_census_passes_frames_both_ways_unchanged_and_counts_them() {
        let mut b = GraphBuilder::<Rope>::new();
        let census = b.add(Census::default(), &[]);
        let raw = b.add(Raw, &[census]);
        let lone = b.add(Census::default(), &[]);
        let mut g = b.build().unwrap();
        g.carry_frames(raw, census).unwrap();
        let s = g.open(raw, &Participants::new(Part::new(), Part::new())).unwrap();
        for len in [1usize, 100, 1_000] {
            g.push(s, Rope::from_payload(Bytes::from(vec![7u8; len]), 64)).unwrap();
            let (from, mut f) = g.poll_transmit().expect("the frame reaches the device");
            assert_eq!(from, census, "the census hands the frame to the device");
            assert_eq!(read_addr(&f.to_vec()), Some("10.0.0.2:9".parse().unwrap()));
            assert!(g.poll_transmit().is_none());
            f.pop(ADDR_HEADER).unwrap();
            assert_eq!(f.to_vec(), vec![7u8; len]);
        }
        let mut f = vec![0u8; ADDR_HEADER];
        f.extend_from_slice(b"back");
        g.receive(census, Rope::from_payload(Bytes::from(f), 0));
        match g.poll_event() {
            Some(crate::Event::Deliver { msg, .. }) => assert_eq!(msg.to_vec(), b"back"),
            other => panic!("expected the frame at the application, got {other:?}"),
        }
        let t = match g.control(census, None, Control::GetCounters) {
            Ok(ControlReply::Counters(t)) => t,
            other => panic!("{other:?}"),
        };
        assert_eq!(t, [("frames_down", 3), ("bytes_down", 1_101), ("frames_up", 1), ("bytes_up", 4)]);
        // A second upper layer is refused, and so is wiring a protocol to
        // one not configured below it (itself: it would loop).
        assert!(g.carry_frames(raw, census).is_err());
        assert!(matches!(g.carry_frames(lone, lone), Err(OpenError::Unsupported(_))));
        assert!(matches!(g.carry_frames(census, raw), Err(OpenError::Unsupported(_))));
        // Its session is the wiring: closing it is refused and it still carries.
        let wiring = SessionId { protocol: census, slot: ArenaId::from_parts(0, 1) };
        assert!(matches!(g.close(wiring), Err(CloseError::Unsupported(_))));
        g.push(s, Rope::from_payload(Bytes::from(vec![1u8; 5]), 64)).unwrap();
        assert!(g.poll_transmit().is_some(), "still carried after the refused close");
    }
}
