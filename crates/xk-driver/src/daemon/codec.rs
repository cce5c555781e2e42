//! The blocks of [`crate::engine::block`] as records in a shared ring.
//!
//! A record's kind says which block it is; its body is the block's fields
//! in order, little-endian, then the payload (`Write`, `Datagram`, `Data`)
//! to the end of the record. The payload is not copied out: the receiver
//! takes it as a view of the ring ([`xk_shm::Record::view`]) unless its
//! ring is more than half held by such views, when it copies (so a reader
//! that holds data long cannot stall the ring).
//!
//! Decoding never trusts the record: an unknown kind, a field running past
//! the end or a value out of range is a [`BlockError::Corrupt`] naming it.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV6};

use bytes::Bytes;
use xk_shm::Record;
use xk_time::Duration;
use xtp_proto::{CloseReason, Congestion, ContextConfig, Service};

use crate::engine::{BlockError, CtxHandle, FromEngine, ToEngine};

// TN kinds.
const CONNECT: u32 = 1;
const LISTEN: u32 = 2;
const DATAGRAM: u32 = 3;
const WRITE: u32 = 4;
const CREDIT: u32 = 5;
const CLOSE: u32 = 6;
const ABORT: u32 = 7;
// FN kinds.
const INCOMING: u32 = 16;
pub(crate) const DATA: u32 = 17;
const ACKED: u32 = 18;
const PEER_FINISHED: u32 = 19;
const CLOSED: u32 = 20;
const LISTENING: u32 = 21;
const FAILED: u32 = 22;

/// Whether a TN record of `kind` carries payload.
pub(crate) fn has_payload(kind: u32) -> bool {
    matches!(kind, DATAGRAM | WRITE)
}

/// Most bytes of fields a block has before its payload (the longest is a
/// `Connect`: handle, address, port, configuration).
pub(crate) const META_MAX: usize = 160;
/// Texts (DIAG text, refusals) are cut to this many bytes.
const TEXT_MAX: usize = 1024;

/// Appends fields.
#[derive(Default)]
pub(crate) struct Writer(pub(crate) Vec<u8>);

impl Writer {
    pub(crate) fn u8(&mut self, v: u8) -> &mut Self {
        self.0.push(v);
        self
    }
    pub(crate) fn u16(&mut self, v: u16) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub(crate) fn u32(&mut self, v: u32) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub(crate) fn u64(&mut self, v: u64) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn bool(&mut self, v: bool) -> &mut Self {
        self.u8(v as u8)
    }
    pub(crate) fn text(&mut self, s: &str) -> &mut Self {
        let mut n = s.len().min(TEXT_MAX);
        while !s.is_char_boundary(n) {
            n -= 1;
        }
        self.u32(n as u32);
        self.0.extend_from_slice(&s.as_bytes()[..n]);
        self
    }
    fn opt_u32(&mut self, v: Option<u32>) -> &mut Self {
        self.bool(v.is_some()).u32(v.unwrap_or(0))
    }
    fn opt_u64(&mut self, v: Option<u64>) -> &mut Self {
        self.bool(v.is_some()).u64(v.unwrap_or(0))
    }
    pub(crate) fn addr(&mut self, a: SocketAddr) -> &mut Self {
        match a {
            SocketAddr::V4(v) => {
                self.u8(4);
                self.0.extend_from_slice(&v.ip().octets());
                self.u16(v.port())
            }
            SocketAddr::V6(v) => {
                self.u8(6);
                self.0.extend_from_slice(&v.ip().octets());
                self.u16(v.port()).u32(v.flowinfo()).u32(v.scope_id())
            }
        }
    }
    fn config(&mut self, c: &ContextConfig) -> &mut Self {
        self.u8(c.service.code()).bool(c.nocheck).bool(c.fastnak).bool(c.noerr).bool(c.noflow);
        self.u64(c.mss as u64).u64(c.recv_buffer as u64).u64(c.recv_buffer_max as u64);
        self.u64(c.send_buffer as u64).u32(c.out_rate).u32(c.out_burst).u32(c.in_rate).u32(c.in_burst);
        self.bool(c.sort.is_some()).u16(c.sort.unwrap_or(0));
        let cong = match c.congestion {
            Congestion::Cubic => 0,
            Congestion::Bbr => 1,
            Congestion::NewReno => 2,
            Congestion::Disabled => 3,
        };
        self.u8(cong).u32(c.sreq_every).opt_u64(c.send_window)
    }
    fn reason(&mut self, r: &CloseReason) -> &mut Self {
        match r {
            CloseReason::Graceful => self.u8(0),
            CloseReason::LocalAbort => self.u8(1),
            CloseReason::PeerAbort { code, value, text } => {
                self.u8(2).opt_u32(*code).opt_u32(*value).text(text)
            }
            CloseReason::Timeout { acked } => self.u8(3).u64(*acked),
            CloseReason::NoAnswer { peer, after } => self.u8(4).addr(*peer).u64(after.as_nanos() as u64),
            CloseReason::Unconfirmed { peer, after } => self.u8(5).addr(*peer).u64(after.as_nanos() as u64),
            CloseReason::Unvalidated { limit } => self.u8(6).text(limit),
            CloseReason::Refused { code, value, text } => self.u8(7).u32(*code).u32(*value).text(text),
            CloseReason::SpecRefused { maxdata, floor } => self.u8(8).u32(*maxdata).u32(*floor),
        }
    }
    fn error(&mut self, e: &BlockError) -> &mut Self {
        match e {
            BlockError::UnknownContext => self.u8(0),
            BlockError::BadHandle => self.u8(1),
            BlockError::Open(s) => self.u8(2).text(s),
            BlockError::Closed => self.u8(3),
            BlockError::Corrupt(s) => self.u8(4).text(s),
            BlockError::OverWriteBound(n) => self.u8(5).u64(*n),
        }
    }
}

/// Reads fields, naming the one that runs past the end.
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
    pub(crate) pos: usize,
}

type R<T> = Result<T, BlockError>;

fn corrupt(what: &str) -> BlockError {
    BlockError::Corrupt(what.to_string())
}

impl<'a> Reader<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }
    fn take(&mut self, n: usize, what: &str) -> R<&'a [u8]> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.buf.len());
        let Some(end) = end else { return Err(corrupt(&format!("block ends inside its {what}"))) };
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }
    pub(crate) fn u8(&mut self, what: &str) -> R<u8> {
        Ok(self.take(1, what)?[0])
    }
    pub(crate) fn u16(&mut self, what: &str) -> R<u16> {
        let b = self.take(2, what)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }
    pub(crate) fn u32(&mut self, what: &str) -> R<u32> {
        let b = self.take(4, what)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    pub(crate) fn u64(&mut self, what: &str) -> R<u64> {
        let b = self.take(8, what)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }
    fn bool(&mut self, what: &str) -> R<bool> {
        match self.u8(what)? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(corrupt(&format!("{what} is not a boolean"))),
        }
    }
    pub(crate) fn text(&mut self, what: &str) -> R<String> {
        let n = self.u32(what)? as usize;
        if n > TEXT_MAX {
            return Err(corrupt(&format!("{what} longer than {TEXT_MAX} bytes")));
        }
        Ok(String::from_utf8_lossy(self.take(n, what)?).into_owned())
    }
    fn opt_u32(&mut self, what: &str) -> R<Option<u32>> {
        let some = self.bool(what)?;
        let v = self.u32(what)?;
        Ok(some.then_some(v))
    }
    fn opt_u64(&mut self, what: &str) -> R<Option<u64>> {
        let some = self.bool(what)?;
        let v = self.u64(what)?;
        Ok(some.then_some(v))
    }
    fn size(&mut self, what: &str, max: u64) -> R<usize> {
        let v = self.u64(what)?;
        if v > max {
            return Err(corrupt(&format!("{what} {v} out of range (at most {max})")));
        }
        Ok(v as usize)
    }
    pub(crate) fn addr(&mut self, what: &str) -> R<SocketAddr> {
        match self.u8(what)? {
            4 => {
                let b = self.take(4, what)?;
                let ip = Ipv4Addr::new(b[0], b[1], b[2], b[3]);
                Ok(SocketAddr::new(IpAddr::V4(ip), self.u16(what)?))
            }
            6 => {
                let mut o = [0u8; 16];
                o.copy_from_slice(self.take(16, what)?);
                let port = self.u16(what)?;
                let (flow, scope) = (self.u32(what)?, self.u32(what)?);
                Ok(SocketAddr::V6(SocketAddrV6::new(Ipv6Addr::from(o), port, flow, scope)))
            }
            _ => Err(corrupt(&format!("{what}: unknown address family"))),
        }
    }
    fn config(&mut self) -> R<ContextConfig> {
        let mut c = ContextConfig::new(Service::from_code(self.u8("service")?));
        c.nocheck = self.bool("nocheck")?;
        c.fastnak = self.bool("fastnak")?;
        c.noerr = self.bool("noerr")?;
        c.noflow = self.bool("noflow")?;
        // Ranges the engine handles: a client must not make the daemon
        // allocate without bound on its behalf.
        c.mss = self.size("mss", 65_535)?;
        c.recv_buffer = self.size("recv_buffer", 1 << 30)?;
        c.recv_buffer_max = self.size("recv_buffer_max", 1 << 30)?;
        c.send_buffer = self.size("send_buffer", 1 << 30)?;
        c.out_rate = self.u32("out_rate")?;
        c.out_burst = self.u32("out_burst")?;
        c.in_rate = self.u32("in_rate")?;
        c.in_burst = self.u32("in_burst")?;
        let sort = self.bool("sort")?;
        let prio = self.u16("sort")?;
        c.sort = sort.then_some(prio);
        c.congestion = match self.u8("congestion")? {
            0 => Congestion::Cubic,
            1 => Congestion::Bbr,
            2 => Congestion::NewReno,
            3 => Congestion::Disabled,
            _ => return Err(corrupt("unknown congestion controller")),
        };
        c.sreq_every = self.u32("sreq_every")?;
        c.send_window = self.opt_u64("send_window")?;
        Ok(c)
    }
    fn reason(&mut self) -> R<CloseReason> {
        Ok(match self.u8("close reason")? {
            0 => CloseReason::Graceful,
            1 => CloseReason::LocalAbort,
            2 => CloseReason::PeerAbort {
                code: self.opt_u32("DIAG code")?,
                value: self.opt_u32("DIAG value")?,
                text: self.text("DIAG text")?,
            },
            3 => CloseReason::Timeout { acked: self.u64("acked")? },
            4 => CloseReason::NoAnswer {
                peer: self.addr("peer")?,
                after: Duration::from_nanos(self.u64("after")?),
            },
            5 => CloseReason::Unconfirmed {
                peer: self.addr("peer")?,
                after: Duration::from_nanos(self.u64("after")?),
            },
            6 => CloseReason::Unvalidated { limit: static_limit(&self.text("limit")?) },
            7 => CloseReason::Refused {
                code: self.u32("DIAG code")?,
                value: self.u32("DIAG value")?,
                text: self.text("DIAG text")?,
            },
            8 => CloseReason::SpecRefused { maxdata: self.u32("maxdata")?, floor: self.u32("floor")? },
            _ => return Err(corrupt("unknown close reason")),
        })
    }
    fn error(&mut self) -> R<BlockError> {
        Ok(match self.u8("error")? {
            0 => BlockError::UnknownContext,
            1 => BlockError::BadHandle,
            2 => BlockError::Open(self.text("error text")?),
            3 => BlockError::Closed,
            4 => BlockError::Corrupt(self.text("error text")?),
            5 => BlockError::OverWriteBound(self.u64("write bound")?),
            _ => return Err(corrupt("unknown error kind")),
        })
    }
}

/// `CloseReason::Unvalidated` names its limit with a `&'static str`.
fn static_limit(s: &str) -> &'static str {
    ["half_open_timeout", "max_half_open", "half_open_memory"]
        .into_iter()
        .find(|l| *l == s)
        .unwrap_or("a limit")
}

/// A block as a record: its kind, its fields, its payload.
/// The fields of a `Write` block (its payload follows them to the end of
/// the record): kind [`WRITE`].
pub(crate) fn write_fields(ctx: CtxHandle, eom: bool, btag: Option<u64>) -> Writer {
    let mut w = Writer::default();
    w.u64(ctx.0).bool(eom).opt_u64(btag);
    w
}

/// The record kind of a `Write` block.
pub(crate) const WRITE_KIND: u32 = WRITE;

pub(crate) fn encode_to_engine(b: &ToEngine) -> (u32, Writer, Option<&Bytes>) {
    let mut w = Writer::default();
    let (kind, payload) = match b {
        ToEngine::Connect { ctx, peer, port, cfg } => {
            w.u64(ctx.0).addr(*peer).u16(*port).config(cfg);
            (CONNECT, None)
        }
        ToEngine::Listen { port, cfg } => {
            w.u16(*port).config(cfg);
            (LISTEN, None)
        }
        ToEngine::Datagram { ctx, peer, port, data, acknowledged } => {
            w.u64(ctx.0).addr(*peer).u16(*port).bool(*acknowledged);
            (DATAGRAM, Some(data))
        }
        ToEngine::Write { ctx, data, eom, btag } => {
            w = write_fields(*ctx, *eom, *btag);
            (WRITE, Some(data))
        }
        ToEngine::Credit { ctx, bytes } => {
            w.u64(ctx.0).u64(*bytes);
            (CREDIT, None)
        }
        ToEngine::Close { ctx } => {
            w.u64(ctx.0);
            (CLOSE, None)
        }
        ToEngine::Abort { ctx } => {
            w.u64(ctx.0);
            (ABORT, None)
        }
    };
    (kind, w, payload)
}

/// As [`encode_to_engine`], the other way.
pub(crate) fn encode_from_engine(b: &FromEngine) -> (u32, Writer, Option<&Bytes>) {
    let mut w = Writer::default();
    let (kind, payload) = match b {
        FromEngine::Incoming { ctx, peer, service, port } => {
            w.u64(ctx.0).addr(*peer).u8(service.code()).u16(*port);
            (INCOMING, None)
        }
        FromEngine::Data { ctx, seq, data, eom, btag } => {
            w.u64(ctx.0).u64(*seq).bool(*eom).opt_u64(*btag);
            (DATA, Some(data))
        }
        FromEngine::Acked { ctx, bytes } => {
            w.u64(ctx.0).u64(*bytes);
            (ACKED, None)
        }
        FromEngine::PeerFinished { ctx } => {
            w.u64(ctx.0);
            (PEER_FINISHED, None)
        }
        FromEngine::Closed { ctx, reason } => {
            w.u64(ctx.0).reason(reason);
            (CLOSED, None)
        }
        FromEngine::Listening { port, result } => {
            w.u16(*port);
            match result {
                Ok(()) => w.u8(0),
                Err(e) => w.u8(1).text(e),
            };
            (LISTENING, None)
        }
        FromEngine::Failed { ctx, error } => {
            w.u64(ctx.0).error(error);
            (FAILED, None)
        }
    };
    (kind, w, payload)
}

/// The fields of `rec` (at most [`META_MAX`] bytes, or the whole record
/// when it carries no payload).
fn fields(rec: &Record, with_payload: bool) -> R<Vec<u8>> {
    let n = if with_payload { rec.len.min(META_MAX) } else { rec.len };
    if n > META_MAX + 3 * TEXT_MAX {
        return Err(corrupt("block longer than any block without payload"));
    }
    let mut v = vec![0u8; n];
    rec.read(0, &mut v).map_err(|e| corrupt(&e.to_string()))?;
    Ok(v)
}

/// The payload: the rest of the record after `at`, as a view or copied.
fn payload(rec: Record, at: usize, view: bool) -> R<Bytes> {
    let len = rec.len - at;
    let r = if view { rec.view(at, len) } else { rec.copy(at, len) };
    r.map_err(|e| corrupt(&e.to_string()))
}

/// Reads a TN record. `Err` carries the context the block named when its
/// handle could be read.
pub(crate) fn decode_to_engine(rec: Record, view: bool) -> Result<ToEngine, (CtxHandle, BlockError)> {
    let kind = rec.kind;
    if !(CONNECT..=ABORT).contains(&kind) {
        return Err((CtxHandle(0), corrupt(&format!("unknown block kind {kind}"))));
    }
    let with_payload = matches!(kind, DATAGRAM | WRITE);
    let f = fields(&rec, with_payload).map_err(|e| (CtxHandle(0), e))?;
    let mut r = Reader::new(&f);
    let ctx = if kind == LISTEN {
        CtxHandle(0)
    } else {
        CtxHandle(r.u64("handle").map_err(|e| (CtxHandle(0), e))?)
    };
    let fail = |e| (ctx, e);
    Ok(match kind {
        CONNECT => ToEngine::Connect {
            ctx,
            peer: r.addr("peer").map_err(fail)?,
            port: r.u16("port").map_err(fail)?,
            cfg: r.config().map_err(fail)?,
        },
        LISTEN => ToEngine::Listen { port: r.u16("port").map_err(fail)?, cfg: r.config().map_err(fail)? },
        DATAGRAM => {
            let peer = r.addr("peer").map_err(fail)?;
            let port = r.u16("port").map_err(fail)?;
            let acknowledged = r.bool("acknowledged").map_err(fail)?;
            let at = r.pos;
            ToEngine::Datagram { ctx, peer, port, acknowledged, data: payload(rec, at, view).map_err(fail)? }
        }
        WRITE => {
            let eom = r.bool("eom").map_err(fail)?;
            let btag = r.opt_u64("btag").map_err(fail)?;
            let at = r.pos;
            ToEngine::Write { ctx, eom, btag, data: payload(rec, at, view).map_err(fail)? }
        }
        CREDIT => ToEngine::Credit { ctx, bytes: r.u64("bytes").map_err(fail)? },
        CLOSE => ToEngine::Close { ctx },
        ABORT => ToEngine::Abort { ctx },
        k => return Err((ctx, corrupt(&format!("unknown block kind {k}")))),
    })
}

/// Reads an FN record.
pub(crate) fn decode_from_engine(rec: Record, view: bool) -> R<FromEngine> {
    let kind = rec.kind;
    let f = fields(&rec, kind == DATA)?;
    let mut r = Reader::new(&f);
    Ok(match kind {
        INCOMING => FromEngine::Incoming {
            ctx: CtxHandle(r.u64("handle")?),
            peer: r.addr("peer")?,
            service: Service::from_code(r.u8("service")?),
            port: r.u16("port")?,
        },
        DATA => {
            let ctx = CtxHandle(r.u64("handle")?);
            let seq = r.u64("seq")?;
            let eom = r.bool("eom")?;
            let btag = r.opt_u64("btag")?;
            let at = r.pos;
            FromEngine::Data { ctx, seq, eom, btag, data: payload(rec, at, view)? }
        }
        ACKED => FromEngine::Acked { ctx: CtxHandle(r.u64("handle")?), bytes: r.u64("bytes")? },
        PEER_FINISHED => FromEngine::PeerFinished { ctx: CtxHandle(r.u64("handle")?) },
        CLOSED => FromEngine::Closed { ctx: CtxHandle(r.u64("handle")?), reason: r.reason()? },
        LISTENING => {
            let port = r.u16("port")?;
            let result = match r.u8("result")? {
                0 => Ok(()),
                _ => Err(r.text("refusal")?),
            };
            FromEngine::Listening { port, result }
        }
        FAILED => FromEngine::Failed { ctx: CtxHandle(r.u64("handle")?), error: r.error()? },
        k => return Err(corrupt(&format!("unknown block kind {k}"))),
    })
}
