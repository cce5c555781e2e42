//! E5 (seed 003, §5.2, Figs. 5.2–5.3): demultiplexing time per packet
//! through the real XTP demux of the framework path, against the number of
//! contexts, with the one-entry cache hit, missed, or off.
//!
//! Method, per (contexts, message size) point: a client `Endpoint` opens `N`
//! contexts to a server graph (`app -> xtp -> link`, XTP as an `xk-core`
//! protocol, `Rope` messages) and writes one message on each; the server
//! accepts every FIRST. The client then writes `size` more bytes on each
//! context *before* it has heard the server: those DATA packets carry the
//! initiator's key without RTN, so the server finds their context through
//! the `(peer, key)` `DemuxMap` — the lookup the cache serves. (Once the key
//! exchange is over, the initiator addresses the responder by a return key
//! that embeds the context's slot, and XTP's demux is an array index with
//! no map at all: the `rtn` column.) The captured frames are replayed into
//! the server graph: `hit`, one context's packet back to back; `miss`, the
//! contexts' packets in turn (every lookup misses the one-entry cache; equal
//! to `hit` at one context); `off`, the same turn on a server built
//! without the cache (`XtpProtocol<_, _, false>`). The time of each `demux` call is
//! taken by the graph itself (`Graph::set_demux_meter`, the lab's clock
//! read right before and after the protocol's `demux`), less the clock's own
//! cost, measured the same way with nothing between (each time is the mean
//! of the central 98 % of the packets: the clock ticks in ~10 ns steps);
//! `total_ns` is the whole
//! `Graph::receive` (demux and pop) of the `off` replay, so
//! `(off - hit) / total` is the share of a packet's receive time the cache
//! saves (Fig. 5.3's question).

use std::cell::RefCell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Instant as Clock;

use xk_core::device::{ADDR_HEADER, write_addr};
use xk_core::{Addr, ArenaId, DemuxMeter, Event, Graph, Part, Participants};
use xk_msg::{Bytes, BytesMut, Msg, Rope};
use xk_time::{Duration, HeapQueue, Instant};
use xtp_proto::stack::XtpStack;
use xtp_proto::{ContextConfig, Endpoint, EndpointConfig};

use crate::experiment::{Env, Experiment, Step};
use crate::html::Page;
use crate::stats;
use crate::svg::loglog;

/// One point.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Row {
    /// Contexts held by the server.
    pub contexts: usize,
    /// Data bytes per replayed packet.
    pub size: usize,
    /// Demux time, one context back to back (cache hit), ns (mean of the
    /// central 98 % of the packets, as every time here).
    pub hit_ns: f64,
    /// Demux time, contexts in turn (cache miss), ns.
    pub miss_ns: f64,
    /// Demux time, contexts in turn, no cache, ns.
    pub off_ns: f64,
    /// Demux time of packets by return key (slot index, no map), ns.
    pub rtn_ns: f64,
    /// Time of a whole `Graph::receive` in the `off` replay, ns.
    pub total_ns: f64,
    /// `(off - hit) / total`: the share of a packet's receive time the
    /// cache saves.
    pub saved_share: f64,
    /// The clock's own cost subtracted from each demux time, ns.
    pub clock_ns: f64,
    /// Packets timed per mode.
    pub packets: usize,
}

/// E5's parameters.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// Numbers of contexts.
    pub contexts: Vec<usize>,
    /// Data bytes per packet.
    pub sizes: Vec<usize>,
    /// Packets timed per mode.
    pub packets: usize,
}

/// The lab's clock around each `demux` the graph runs.
struct Meter {
    start: Option<Clock>,
    samples: Rc<RefCell<Vec<u64>>>,
}

impl DemuxMeter for Meter {
    fn begin(&mut self) {
        self.start = Some(Clock::now());
    }
    fn end(&mut self) {
        if let Some(s) = self.start.take() {
            self.samples.borrow_mut().push(s.elapsed().as_nanos() as u64);
        }
    }
}

fn server(cache: bool) -> Result<XtpStack<Rope>, String> {
    let ep = EndpointConfig { max_contexts_per_peer: usize::MAX, ..EndpointConfig::default() };
    let (desc, ctx) = ("app -> xtp -> link", ContextConfig::stream());
    // The cache is a compile-time choice: two instances of the protocol.
    let mut s = if cache {
        XtpStack::<Rope>::from_desc::<HeapQueue<ArenaId>, true>(desc, ep, ctx, 2)
    } else {
        XtpStack::<Rope>::from_desc::<HeapQueue<ArenaId>, false>(desc, ep, ctx, 2)
    }
    .map_err(|e| e.to_string())?;
    s.graph
        .open_enable(s.xtp, &Participants::local(Part::top_first([Addr::Port(7)])))
        .map_err(|e| e.to_string())?;
    Ok(s)
}

fn frame(from: SocketAddr, data: &[u8]) -> Rope {
    let mut f = BytesMut::with_capacity(ADDR_HEADER + data.len());
    f.resize(ADDR_HEADER, 0);
    write_addr(&mut f, from);
    f.extend_from_slice(data);
    Rope::from_received(f)
}

/// Empties the server's queues (answers to replayed duplicates), untimed.
fn drain(g: &mut Graph<Rope>) {
    while g.poll_transmit().is_some() {}
    while g.poll_event().is_some() {}
}

/// Captured XTP packets, one per context.
type Packets = Vec<Vec<u8>>;

/// The server graph with `n` contexts from one client, and per context one
/// DATA packet by the initiator's key and one by return key.
fn setup(n: usize, size: usize, cache: bool) -> Result<(XtpStack<Rope>, Packets, Packets), String> {
    let (ca, sa): (SocketAddr, SocketAddr) =
        ("10.0.0.1:1".parse().expect("literal"), "10.0.0.2:1".parse().expect("literal"));
    let mut s = server(cache)?;
    let ep = EndpointConfig { max_contexts_per_peer: usize::MAX, ..EndpointConfig::default() };
    let mut c = Endpoint::new(ep, 1);
    let mut now = Instant::ZERO;
    let mut buf = vec![0u8; 2048];
    let payload = Bytes::from(vec![0x5a; size.max(1)]);
    let ctxs: Vec<_> = (0..n)
        .map(|_| {
            let id = c.connect(now, sa, 7, ContextConfig::stream()).map_err(|e| e.to_string())?;
            c.write(now, id, Bytes::from_static(b"x"), true, None).map_err(|e| e.to_string())?;
            Ok(id)
        })
        .collect::<Result<_, String>>()?;
    // FIRSTs to the server; its answers held back, so the client still
    // addresses each context by its own key.
    while let Some(t) = c.poll_transmit(now, &mut buf) {
        now += Duration::from_micros(1);
        s.graph.advance(now);
        s.graph.receive(s.xtp, frame(ca, &buf[..t.len]));
    }
    let mut held = Vec::new();
    s.graph.advance(now);
    while let Some((_, mut f)) = s.graph.poll_transmit() {
        let _ = f.pop(ADDR_HEADER);
        held.push(f.to_vec());
    }
    let opened =
        std::iter::from_fn(|| s.graph.poll_event()).filter(|e| matches!(e, Event::OpenDone { .. })).count();
    if opened != n {
        return Err(format!("E5: the server accepted {opened} of {n} contexts"));
    }
    let capture =
        |c: &mut Endpoint, now: Instant, buf: &mut [u8], rtn: bool| -> Result<Vec<Vec<u8>>, String> {
            let mut out = Vec::with_capacity(n);
            for &id in &ctxs {
                c.write(now, id, payload.clone(), true, None).map_err(|e| e.to_string())?;
            }
            while let Some(t) = c.poll_transmit(now, buf) {
                let p = &buf[..t.len];
                // The key is the header's first 8 bytes; its top bit is RTN.
                let by_return_key = p.first().is_some_and(|b| b & 0x80 != 0);
                if by_return_key == rtn && out.len() < n {
                    out.push(p.to_vec());
                }
            }
            if out.len() < n {
                return Err(format!("E5: captured {} of {n} packets (rtn {rtn})", out.len()));
            }
            Ok(out)
        };
    let by_key = capture(&mut c, now, &mut buf, false)?;
    // Now let the client hear the server: it learns the return keys.
    for h in held {
        now += Duration::from_micros(1);
        c.handle_datagram(now, sa, Bytes::from(h));
    }
    let by_rtn = capture(&mut c, now, &mut buf, true)?;
    drain(&mut s.graph);
    Ok((s, by_key, by_rtn))
}

/// The mean of the samples between the 1st and 99th percentiles. Why not
/// the median: this machine's clock ticks in steps of about 10 ns, a
/// demux takes 10–200 ns, and the median of such samples sticks to a tick;
/// the mean of the central 98 % resolves below it and leaves out the
/// interrupts.
fn central_mean(samples: impl IntoIterator<Item = f64>) -> f64 {
    let v = xk_stats::sorted(samples);
    if v.is_empty() {
        return f64::NAN;
    }
    let (lo, hi) = (v.len() / 100, v.len() - v.len() / 100);
    let mid = &v[lo..hi.max(lo + 1)];
    mid.iter().sum::<f64>() / mid.len() as f64
}

/// Replays `order` (indices into `frames`) `packets` times in all and
/// returns the demux time and the whole-receive time per packet.
fn replay(
    s: &mut XtpStack<Rope>,
    frames: &[Vec<u8>],
    order: impl Fn(usize) -> usize,
    packets: usize,
) -> (f64, f64) {
    let ca: SocketAddr = "10.0.0.1:1".parse().expect("literal");
    let samples = Rc::new(RefCell::new(Vec::with_capacity(packets)));
    s.graph.set_demux_meter(Some(Box::new(Meter { start: None, samples: samples.clone() })));
    let mut total = Vec::with_capacity(packets);
    for i in 0..packets {
        let f = frame(ca, &frames[order(i)]);
        let t0 = Clock::now();
        s.graph.receive(s.xtp, f);
        total.push(t0.elapsed().as_nanos() as f64);
        if i % 64 == 63 {
            drain(&mut s.graph);
        }
    }
    drain(&mut s.graph);
    s.graph.set_demux_meter(None);
    let d = central_mean(samples.borrow().iter().map(|&v| v as f64));
    (d, central_mean(total))
}

/// The clock's own cost as the meter sees it: begin and end with nothing
/// between.
fn clock_cost(packets: usize) -> f64 {
    let samples = Rc::new(RefCell::new(Vec::with_capacity(packets)));
    let mut m = Meter { start: None, samples: samples.clone() };
    for _ in 0..packets {
        m.begin();
        m.end();
    }
    central_mean(samples.borrow().iter().map(|&v| v as f64))
}

/// Measures one point.
pub(crate) fn point(n: usize, size: usize, packets: usize) -> Result<Row, String> {
    let clock = clock_cost(packets);
    let (mut on, by_key, by_rtn) = setup(n, size, true)?;
    let (hit, _) = replay(&mut on, &by_key, |_| 0, packets);
    let (miss, _) = replay(&mut on, &by_key, |i| i % n, packets);
    let (rtn, _) = replay(&mut on, &by_rtn, |i| i % n, packets);
    let (mut off_s, by_key_off, _) = setup(n, size, false)?;
    let (off, total) = replay(&mut off_s, &by_key_off, |i| i % n, packets);
    let net = |v: f64| (v - clock).max(0.0);
    let (hit, miss, off, rtn) = (net(hit), net(miss), net(off), net(rtn));
    Ok(Row {
        contexts: n,
        size,
        hit_ns: hit,
        miss_ns: miss,
        off_ns: off,
        rtn_ns: rtn,
        total_ns: total,
        saved_share: if total > 0.0 { (off - hit) / total } else { 0.0 },
        clock_ns: clock,
        packets,
    })
}

/// E5: demux time against the number of contexts.
pub struct E5(Params);

impl Experiment for E5 {
    const ID: &'static str = "E5";
    const TITLE: &'static str = "Demultiplexing time per packet through XTP in the framework, against the number of contexts (seed 003)";
    type Params = Params;
    type Point = (usize, usize);
    type Row = Row;

    fn defaults(quick: bool) -> Params {
        Params {
            contexts: if quick { vec![1, 100, 10_000] } else { vec![1, 10, 100, 1_000, 10_000] },
            sizes: if quick { vec![10] } else { vec![10, 1000] },
            packets: if quick { 20_000 } else { 200_000 },
        }
    }
    fn check(p: &Params) -> Result<(), String> {
        if p.contexts.is_empty() || p.contexts.iter().any(|&n| n == 0 || n > 100_000) {
            return Err("contexts: 1 to 100,000 each, at least one".into());
        }
        if p.sizes.is_empty() || p.sizes.iter().any(|&s| s == 0 || s > 1400) {
            return Err("sizes: 1 to 1,400 bytes each (one packet), at least one".into());
        }
        if !(100..=10_000_000).contains(&p.packets) {
            return Err("packets: 100 to 10,000,000".into());
        }
        Ok(())
    }
    fn new(p: Params) -> Self {
        E5(p)
    }
    fn params(&self) -> &Params {
        &self.0
    }
    fn steps(&self, _env: &Env) -> Vec<Step<(usize, usize)>> {
        let mut out = Vec::new();
        for &size in &self.0.sizes {
            for &n in &self.0.contexts {
                out.push(Step { label: format!("{n} contexts, {size} B packets"), point: (n, size) });
            }
        }
        out
    }
    fn run(&mut self, &(n, size): &(usize, usize), _env: &Env) -> Result<Vec<Row>, String> {
        Ok(vec![point(n, size, self.0.packets)?])
    }
    fn csv_key() -> &'static [&'static str] {
        &["size", "contexts"]
    }
    fn render(_p: &Params, rows: &[Row], _notes: &[String], page: &mut Page) {
        let table: Vec<Vec<String>> = rows
            .iter()
            .map(|r| {
                vec![
                    r.contexts.to_string(),
                    r.size.to_string(),
                    format!("{:.1}", r.hit_ns),
                    format!("{:.1}", r.miss_ns),
                    format!("{:.1}", r.off_ns),
                    format!("{:.1}", r.rtn_ns),
                    format!("{:.0}", r.total_ns),
                    format!("{:.1} %", 100.0 * r.saved_share),
                ]
            })
            .collect();
        page.table(
            "Measured here: ns per packet in XTP's demux (mean of the central 98 %) (framework path, the graph's own timestamps, the clock's cost subtracted)",
            &["contexts", "bytes", "hit", "miss", "cache off", "return key", "whole receive (off)", "saved by the cache"],
            &table,
        );
        page.note("Seed 003 (Li 2003), Figs. 5.2–5.3: demux time of the PIX XTP stack against the number of clients, with and without the one-entry cache (Pentium III, 547 MHz): microseconds, here nanoseconds; compare shapes. The seed's cache saves most for back-to-back packets of one client; here it applies only to packets that carry the initiator's key — XTP's return keys name the context's slot and need no map.");
        let sizes: Vec<usize> =
            stats::group(rows, |r| r.size, |r| r.hit_ns).into_iter().map(|(s, _, _)| s).collect();
        if let Some(&size) = sizes.first() {
            let curve = |f: fn(&Row) -> f64| -> Vec<(f64, f64)> {
                rows.iter().filter(|r| r.size == size).map(|r| (r.contexts as f64, f(r).max(0.1))).collect()
            };
            page.figure(
                loglog(
                    &format!("E5 demux time vs contexts, {size} B packets (cf. seed 003 Fig. 5.2)"),
                    "contexts",
                    "demux time (ns)",
                    &[
                        ("cache hit".to_string(), curve(|r| r.hit_ns)),
                        ("cache miss".to_string(), curve(|r| r.miss_ns)),
                        ("cache off".to_string(), curve(|r| r.off_ns)),
                        ("return key".to_string(), curve(|r| r.rtn_ns)),
                    ],
                ),
                "E5: demux time per packet against the number of contexts.",
            );
        }
        let worst = rows.iter().map(|r| r.saved_share).fold(f64::NAN, f64::max);
        let spread = |f: fn(&Row) -> f64| {
            let v: Vec<f64> = rows.iter().map(f).collect();
            (
                v.iter().copied().fold(f64::INFINITY, f64::min),
                v.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            )
        };
        let (h0, h1) = spread(|r| r.hit_ns);
        let (m0, m1) = spread(|r| r.miss_ns);
        page.reading(&format!(
            "A cache hit costs {h0:.0}–{h1:.0} ns whatever the number of contexts; a miss {m0:.0}–{m1:.0} ns, growing with the table as it leaves the processor's caches. At most {:.1} % of a packet's receive time is what the cache saves: the hash lookup is small beside parsing, checksumming and processing the packet. Packets by return key (the steady state of every context) need no lookup.",
            100.0 * worst
        ));
    }
    fn summary(_p: &Params, rows: &[Row]) -> Vec<String> {
        let mut out =
            vec!["E5 demux time per packet (ns: hit / miss / off / return key; share saved):".to_string()];
        for r in rows {
            out.push(format!(
                "  {:>6} contexts {:>5} B: {:.1} / {:.1} / {:.1} / {:.1}; {:.1} %",
                r.contexts,
                r.size,
                r.hit_ns,
                r.miss_ns,
                r.off_ns,
                r.rtn_ns,
                100.0 * r.saved_share
            ));
        }
        out
    }
    fn headline(r: &Row) -> Option<(String, f64, &'static str)> {
        Some((format!("{} contexts {} B miss", r.contexts, r.size), r.miss_ns, "ns"))
    }
}
