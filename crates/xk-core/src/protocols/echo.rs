//! `Echo`: sends every message it receives back on the session it came from.
//!
//! It sits above a port-demultiplexing protocol, listens on one port (passive
//! open in `init`) and keeps one echo session per lower session announced by
//! `open_done`.

use xk_msg::Msg;

use crate::addr::{Addr, Part, Participants};
use crate::arena::{Arena, ArenaId};
use crate::graph::Ctx;
use crate::graph_desc::{Kind, Service};
use crate::map::DemuxMap;
use crate::upi::{
    CloseError, Control, ControlError, ControlReply, DemuxError, Layer, OpenError, PushError, SessionId,
    Upper,
};

/// The kind graph descriptions name it by.
pub(crate) const KIND: Kind = Kind {
    name: "echo",
    needs: &[Service::Ports],
    offers: None,
    device: false,
    needs_root: false,
    about: "echoes every message back (a server application)",
};

/// Its constructor for a registry: an echo on port 7.
pub(crate) fn make<M: Msg, E>(_env: &E) -> Result<Box<dyn crate::Protocol<M>>, String> {
    Ok(Box::new(Echo::new(7)))
}

/// An echo server on one port. See the module documentation.
pub struct Echo {
    port: u16,
    sessions: Arena<SessionId>,
    by_lower: DemuxMap<SessionId, ArenaId>,
    echoed: u64,
}

impl Echo {
    /// An echo server that will listen on `port` of the protocol below.
    pub fn new(port: u16) -> Self {
        Echo { port, sessions: Arena::new(), by_lower: DemuxMap::new(0xec), echoed: 0 }
    }
}

impl<'a, M: Msg> Layer<M, Ctx<'a, M>> for Echo {
    fn name(&self) -> &'static str {
        "echo"
    }

    fn init(&mut self, cx: &mut Ctx<'a, M>) -> Result<(), OpenError> {
        let parts = Participants::local(Part::top_first([Addr::Port(self.port)]));
        cx.open_enable(cx.lower()?, &parts)
    }

    fn open(
        &mut self,
        _cx: &mut Ctx<'_, M>,
        _upper: Upper,
        _parts: &Participants,
    ) -> Result<SessionId, OpenError> {
        Err(OpenError::Unsupported("echo is passive only"))
    }

    fn open_enable(
        &mut self,
        _cx: &mut Ctx<'_, M>,
        _upper: Upper,
        _parts: &Participants,
    ) -> Result<(), OpenError> {
        Err(OpenError::Unsupported("echo has nothing above it"))
    }

    fn open_disable(
        &mut self,
        _cx: &mut Ctx<'_, M>,
        _upper: Upper,
        _parts: &Participants,
    ) -> Result<(), OpenError> {
        Err(OpenError::Unsupported("echo has nothing above it"))
    }

    fn open_done(
        &mut self,
        _cx: &mut Ctx<'_, M>,
        lower: SessionId,
        _parts: &Participants,
    ) -> Result<(), OpenError> {
        let slot = self.sessions.insert(lower);
        self.by_lower.install(lower, slot);
        Ok(())
    }

    fn close_done(&mut self, _cx: &mut Ctx<'_, M>, lower: SessionId) {
        if let Some(slot) = self.by_lower.erase(&lower) {
            self.sessions.remove(slot);
        }
    }

    fn demux(
        &mut self,
        cx: &mut Ctx<'_, M>,
        lower: Option<SessionId>,
        _msg: &mut M,
    ) -> Result<SessionId, DemuxError> {
        let lower = lower.ok_or(DemuxError::Malformed("echo needs a lower session"))?;
        let slot = self.by_lower.resolve(&lower).ok_or(DemuxError::StaleSession)?;
        Ok(SessionId { protocol: cx.me(), slot })
    }

    fn pop(
        &mut self,
        cx: &mut Ctx<'_, M>,
        session: SessionId,
        _lower: Option<SessionId>,
        msg: M,
    ) -> Result<(), DemuxError> {
        let lower = *self.sessions.get(session.slot).ok_or(DemuxError::StaleSession)?;
        self.echoed += 1;
        cx.push(lower, msg);
        Ok(())
    }

    fn push(&mut self, _cx: &mut Ctx<'_, M>, _session: SessionId, _msg: M) -> Result<(), PushError> {
        Err(PushError::NoSession)
    }

    fn control(
        &mut self,
        _cx: &mut Ctx<'_, M>,
        _session: Option<SessionId>,
        req: Control,
    ) -> Result<ControlReply, ControlError> {
        match req {
            Control::GetSessionCount => Ok(ControlReply::Count(self.sessions.len())),
            _ => Err(ControlError::Unsupported(req)),
        }
    }

    fn close(&mut self, _cx: &mut Ctx<'_, M>, session: SessionId) -> Result<(), CloseError> {
        let lower = self.sessions.remove(session.slot).ok_or(CloseError::NoSession)?;
        self.by_lower.erase(&lower);
        Ok(())
    }
}
