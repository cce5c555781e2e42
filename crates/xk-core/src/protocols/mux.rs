//! `Mux`: a UDP-like port demultiplexer, written the way x-kernel's `udpDemux`
//! works — active map first, then the passive map, which creates a session.
//!
//! Header: source port (2 bytes), destination port (2 bytes), big-endian.
//! Active key: local port ++ remote port (4 bytes); passive key: local port.

use xk_msg::Msg;

use crate::addr::{Addr, Part, Participants};
use crate::arena::Arena;
use crate::graph::Ctx;
use crate::graph_desc::{Kind, Service};
use crate::map::DemuxMap;
use crate::upi::{
    CloseError, Control, ControlError, ControlReply, DemuxError, Layer, OpenError, PushError, SessionId,
    Upper,
};

const HEADER: usize = 4;

struct Session {
    local: u16,
    remote: u16,
    upper: Upper,
    lower: SessionId,
}

/// The kind graph descriptions name it by.
pub(crate) const KIND: Kind = Kind {
    name: "mux",
    needs: &[Service::Frames],
    offers: Some(Service::Ports),
    device: false,
    needs_root: false,
    about: "port demultiplexing",
};

/// Its constructor for a registry: link type 0x0800, its demux map seeded
/// with the host's number `host`.
pub(crate) fn make<M: Msg>(host: &u64) -> Result<Box<dyn crate::Protocol<M>>, String> {
    Ok(Box::new(Mux::new(0x0800, *host)))
}

/// A port demultiplexer above a link. See the module documentation.
pub struct Mux {
    link_type: u16,
    lower: Option<SessionId>,
    sessions: Arena<Session>,
    active: DemuxMap<[u8; 4], SessionId>,
    passive: DemuxMap<[u8; 2], Upper>,
}

fn port(part: &Part, what: &'static str) -> Result<u16, OpenError> {
    match part.peek() {
        Some(Addr::Port(p)) => Ok(*p),
        _ => Err(OpenError::MissingAddr(what)),
    }
}

fn key(local: u16, remote: u16) -> [u8; 4] {
    let [a, b] = local.to_be_bytes();
    let [c, d] = remote.to_be_bytes();
    [a, b, c, d]
}

impl Mux {
    /// A mux that registers itself with its link under `link_type`.
    pub fn new(link_type: u16, seed: u64) -> Self {
        Mux {
            link_type,
            lower: None,
            sessions: Arena::new(),
            active: DemuxMap::new(seed),
            passive: DemuxMap::new(seed ^ 0x5a5a),
        }
    }

    fn link_parts(&self) -> Participants {
        Participants::local(Part::top_first([Addr::Type(self.link_type)]))
    }

    fn lower_session<M: Msg>(&mut self, cx: &mut Ctx<'_, M>) -> Result<SessionId, OpenError> {
        if let Some(s) = self.lower {
            return Ok(s);
        }
        let parts = self.link_parts();
        let s = cx.open(cx.lower()?, &parts).map_err(|e| OpenError::Lower(Box::new(e)))?;
        self.lower = Some(s);
        Ok(s)
    }

    fn new_session<M: Msg>(
        &mut self,
        cx: &Ctx<'_, M>,
        local: u16,
        remote: u16,
        upper: Upper,
        lower: SessionId,
    ) -> SessionId {
        let slot = self.sessions.insert(Session { local, remote, upper, lower });
        let sid = SessionId { protocol: cx.me(), slot };
        self.active.install(key(local, remote), sid);
        sid
    }
}

impl<'a, M: Msg> Layer<M, Ctx<'a, M>> for Mux {
    fn name(&self) -> &'static str {
        "mux"
    }

    fn init(&mut self, cx: &mut Ctx<'a, M>) -> Result<(), OpenError> {
        let parts = self.link_parts();
        cx.open_enable(cx.lower()?, &parts)
    }

    fn open(
        &mut self,
        cx: &mut Ctx<'_, M>,
        upper: Upper,
        parts: &Participants,
    ) -> Result<SessionId, OpenError> {
        let local = port(&parts.local, "local port")?;
        let remote = port(&parts.remote, "remote port")?;
        if self.active.contains(&key(local, remote)) {
            return Err(OpenError::InUse(Addr::Port(local)));
        }
        let lower = self.lower_session(cx)?;
        Ok(self.new_session(cx, local, remote, upper, lower))
    }

    fn open_enable(
        &mut self,
        _cx: &mut Ctx<'_, M>,
        upper: Upper,
        parts: &Participants,
    ) -> Result<(), OpenError> {
        let local = port(&parts.local, "local port")?;
        if self.passive.contains(&local.to_be_bytes()) {
            return Err(OpenError::InUse(Addr::Port(local)));
        }
        self.passive.install(local.to_be_bytes(), upper);
        Ok(())
    }

    fn open_disable(
        &mut self,
        _cx: &mut Ctx<'_, M>,
        _upper: Upper,
        parts: &Participants,
    ) -> Result<(), OpenError> {
        let local = port(&parts.local, "local port")?;
        self.passive.erase(&local.to_be_bytes()).map(|_| ()).ok_or(OpenError::NotEnabled(Addr::Port(local)))
    }

    fn demux(
        &mut self,
        cx: &mut Ctx<'_, M>,
        lower: Option<SessionId>,
        msg: &mut M,
    ) -> Result<SessionId, DemuxError> {
        let h = msg.peek(HEADER)?;
        let (src, dst) = (u16::from_be_bytes([h[0], h[1]]), u16::from_be_bytes([h[2], h[3]]));
        if let Some(s) = self.active.resolve(&key(dst, src)) {
            return Ok(s);
        }
        let upper = self
            .passive
            .resolve(&dst.to_be_bytes())
            .ok_or_else(|| DemuxError::NoBinding(format!("no session or listener for port {dst}")))?;
        let lower = lower.ok_or(DemuxError::Malformed("mux needs a lower session"))?;
        self.lower.get_or_insert(lower);
        let sid = self.new_session(cx, dst, src, upper, lower);
        let parts = Participants::new(Part::top_first([Addr::Port(dst)]), Part::top_first([Addr::Port(src)]));
        cx.open_done(upper, sid, parts);
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
        let s = self.sessions.get(session.slot).ok_or(PushError::NoSession)?;
        msg.push(HEADER).copy_from_slice(&key(s.local, s.remote));
        cx.push(s.lower, msg);
        Ok(())
    }

    fn control(
        &mut self,
        cx: &mut Ctx<'_, M>,
        session: Option<SessionId>,
        req: Control,
    ) -> Result<ControlReply, ControlError> {
        match req {
            Control::GetHeaderLen => Ok(ControlReply::Size(HEADER)),
            Control::GetSessionCount => Ok(ControlReply::Count(self.sessions.len())),
            Control::GetMaxPacket => {
                let lower = cx.lower().map_err(|_| ControlError::Unsupported(req))?;
                match cx.control(lower, self.lower, req)? {
                    ControlReply::Size(n) => Ok(ControlReply::Size(n.saturating_sub(HEADER))),
                    other => Ok(other),
                }
            }
            Control::GetMyAddr | Control::GetPeerAddr => {
                let s = session.and_then(|s| self.sessions.get(s.slot)).ok_or(ControlError::NoSession)?;
                let p = if req == Control::GetMyAddr { s.local } else { s.remote };
                Ok(ControlReply::Addr(Addr::Port(p)))
            }
            // Anything else, a request added later included: not this
            // protocol's (its refusals are the dispatcher's `demux_drops`).
            _ => Err(ControlError::Unsupported(req)),
        }
    }

    fn close(&mut self, cx: &mut Ctx<'_, M>, session: SessionId) -> Result<(), CloseError> {
        let s = self.sessions.remove(session.slot).ok_or(CloseError::NoSession)?;
        self.active.erase(&key(s.local, s.remote));
        cx.close_done(s.upper, session);
        Ok(())
    }
}
