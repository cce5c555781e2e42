//! `LoopLink`: the bottom of a test stack, an Ethernet-like link layer.
//!
//! Header: a 2-byte big-endian protocol type. One session per type; a type is
//! bound either by an active `open` or by `open_enable`, after which an arriving
//! frame of that type creates the session and announces it with `open_done`.
//! Frames leave through the graph's device queue; the driver (for a test: the
//! code that connects two graphs) feeds them to the peer graph's `receive`.

use xk_msg::Msg;

use crate::addr::{Addr, Participants};
use crate::arena::Arena;
use crate::graph::Ctx;
use crate::graph_desc::{Kind, Service};
use crate::map::DemuxMap;
use crate::upi::{
    CloseError, Control, ControlError, ControlReply, DemuxError, Layer, OpenError, PushError, SessionId,
    Upper,
};

const HEADER: usize = 2;

struct Session {
    ty: u16,
    upper: Upper,
}

/// The kind graph descriptions name it by.
pub(crate) const KIND: Kind = Kind {
    name: "loop",
    needs: &[],
    offers: Some(Service::Frames),
    device: false,
    needs_root: false,
    about: "a link protocol whose frames the caller carries",
};

/// Its constructor for a registry: a 1,500-byte MTU.
pub(crate) fn make<M: Msg, E>(_env: &E) -> Result<Box<dyn crate::Protocol<M>>, String> {
    Ok(Box::new(LoopLink::new(1500)))
}

/// An in-memory Ethernet-like link layer. See the module documentation.
pub struct LoopLink {
    mtu: usize,
    sessions: Arena<Session>,
    active: DemuxMap<[u8; 2], SessionId>,
    passive: DemuxMap<[u8; 2], Upper>,
}

impl LoopLink {
    /// A link carrying frames of up to `mtu` bytes (header included).
    pub fn new(mtu: usize) -> Self {
        LoopLink { mtu, sessions: Arena::new(), active: DemuxMap::new(0x11), passive: DemuxMap::new(0x12) }
    }

    fn take_type(parts: &Participants) -> Result<u16, OpenError> {
        match parts.local.peek().or(parts.remote.peek()) {
            Some(Addr::Type(t)) => Ok(*t),
            _ => Err(OpenError::MissingAddr("link type")),
        }
    }

    fn new_session<M: Msg>(&mut self, cx: &Ctx<'_, M>, ty: u16, upper: Upper) -> SessionId {
        let sid = SessionId { protocol: cx.me(), slot: self.sessions.insert(Session { ty, upper }) };
        self.active.install(ty.to_be_bytes(), sid);
        sid
    }
}

impl<'a, M: Msg> Layer<M, Ctx<'a, M>> for LoopLink {
    fn name(&self) -> &'static str {
        "looplink"
    }

    fn open(
        &mut self,
        cx: &mut Ctx<'_, M>,
        upper: Upper,
        parts: &Participants,
    ) -> Result<SessionId, OpenError> {
        let ty = Self::take_type(parts)?;
        if let Some(s) = self.active.resolve(&ty.to_be_bytes()) {
            return Ok(s); // one session per type, shared by its openers
        }
        Ok(self.new_session(cx, ty, upper))
    }

    fn open_enable(
        &mut self,
        _cx: &mut Ctx<'_, M>,
        upper: Upper,
        parts: &Participants,
    ) -> Result<(), OpenError> {
        let ty = Self::take_type(parts)?;
        if self.passive.contains(&ty.to_be_bytes()) {
            return Err(OpenError::InUse(Addr::Type(ty)));
        }
        self.passive.install(ty.to_be_bytes(), upper);
        Ok(())
    }

    fn open_disable(
        &mut self,
        _cx: &mut Ctx<'_, M>,
        _upper: Upper,
        parts: &Participants,
    ) -> Result<(), OpenError> {
        let ty = Self::take_type(parts)?;
        self.passive.erase(&ty.to_be_bytes()).map(|_| ()).ok_or(OpenError::NotEnabled(Addr::Type(ty)))
    }

    fn demux(
        &mut self,
        cx: &mut Ctx<'_, M>,
        _lower: Option<SessionId>,
        msg: &mut M,
    ) -> Result<SessionId, DemuxError> {
        let key: [u8; 2] = msg.peek(HEADER)?.try_into().map_err(|_| DemuxError::Malformed("type"))?;
        if let Some(s) = self.active.resolve(&key) {
            return Ok(s);
        }
        let upper = self.passive.resolve(&key).ok_or_else(|| {
            DemuxError::NoBinding(format!(
                "no session or listener for link type {:#06x}",
                u16::from_be_bytes(key)
            ))
        })?;
        let ty = u16::from_be_bytes(key);
        let sid = self.new_session(cx, ty, upper);
        cx.open_done(upper, sid, Participants::local(crate::Part::top_first([Addr::Type(ty)])));
        Ok(sid)
    }

    fn pop(
        &mut self,
        cx: &mut Ctx<'_, M>,
        session: SessionId,
        _lower: Option<SessionId>,
        mut msg: M,
    ) -> Result<(), DemuxError> {
        let upper = self.sessions.get(session.slot).ok_or(DemuxError::StaleSession)?.upper;
        msg.pop(HEADER)?;
        cx.deliver(upper, session, msg, true);
        Ok(())
    }

    fn push(&mut self, cx: &mut Ctx<'_, M>, session: SessionId, mut msg: M) -> Result<(), PushError> {
        let ty = self.sessions.get(session.slot).ok_or(PushError::NoSession)?.ty;
        if msg.len() + HEADER > self.mtu {
            return Err(PushError::TooLong { len: msg.len(), max: self.mtu - HEADER });
        }
        msg.push(HEADER).copy_from_slice(&ty.to_be_bytes());
        cx.transmit(msg);
        Ok(())
    }

    fn control(
        &mut self,
        _cx: &mut Ctx<'_, M>,
        session: Option<SessionId>,
        req: Control,
    ) -> Result<ControlReply, ControlError> {
        match req {
            Control::GetMaxPacket => Ok(ControlReply::Size(self.mtu - HEADER)),
            Control::GetHeaderLen => Ok(ControlReply::Size(HEADER)),
            Control::GetSessionCount => Ok(ControlReply::Count(self.sessions.len())),
            Control::GetMyAddr | Control::GetPeerAddr => {
                let s = session.and_then(|s| self.sessions.get(s.slot)).ok_or(ControlError::NoSession)?;
                Ok(ControlReply::Addr(Addr::Type(s.ty)))
            }
            // Anything else, a request added later included: not this
            // protocol's (its refusals are the dispatcher's `demux_drops`).
            _ => Err(ControlError::Unsupported(req)),
        }
    }

    fn close(&mut self, cx: &mut Ctx<'_, M>, session: SessionId) -> Result<(), CloseError> {
        let s = self.sessions.remove(session.slot).ok_or(CloseError::NoSession)?;
        self.active.erase(&s.ty.to_be_bytes());
        cx.close_done(s.upper, session);
        Ok(())
    }
}
