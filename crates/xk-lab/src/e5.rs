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
//! `Graph::receive` (demux and pop) of the `off` replay.
//!
//! Fig. 5.3's question, the share of demux time the cache saves for
//! back-to-back packets, against message size: each context writes one
//! message of `size` bytes (1 B to 64 KB: up to 47 packets of 1,400 B,
//! sent back to back before the client hears the server), and the server
//! receives the messages of the contexts in turn, each message's packets
//! back to back: with the cache the first packet of a message misses and
//! the rest hit; without it every packet is looked up. The demux times of a
//! message's packets are summed (the same graph meter), and
//! `saved_of_demux = (msg_off - msg_on) / msg_off`,
//! `saved_of_receive = (msg_off - msg_on) / msg_total` (whole receive of
//! the message's packets, cache off).

use std::cell::RefCell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Instant as Clock;

use xk_core::device::{ADDR_HEADER, write_addr};
use xk_core::{Addr, ArenaId, DemuxMeter, Event, Graph, Part, Participants};
use xk_msg::{Bytes, BytesMut, Msg, Rope};
use xk_time::{Duration, HeapQueue, Instant};
use xtp_proto::stack::XtpStack;
use xtp_proto::{Congestion, ContextConfig, Endpoint, EndpointConfig};

use crate::experiment::{Env, Experiment, Step};
use crate::html::Page;
use crate::svg::{loglog, plot};

/// One point.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Row {
    /// Contexts held by the server.
    pub contexts: usize,
    /// Message size: data bytes each context writes at once.
    pub size: usize,
    /// Packets the message took (back to back).
    pub pkts_per_msg: usize,
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
    /// Demux time per message, its packets back to back, messages of the
    /// contexts in turn, with the cache (summed over the packets), ns.
    pub msg_on_ns: f64,
    /// The same without the cache, ns.
    pub msg_off_ns: f64,
    /// Whole `Graph::receive` of a message's packets, cache off, ns.
    pub msg_total_ns: f64,
    /// `(msg_off - msg_on) / msg_off`: the share of demux time the cache
    /// saves.
    pub saved_of_demux: f64,
    /// `(msg_off - msg_on) / msg_total`: the share of the whole receive
    /// time the cache saves.
    pub saved_of_receive: f64,
    /// The clock's own cost subtracted from each demux time, ns.
    pub clock_ns: f64,
    /// Packets timed per mode.
    pub packets: usize,
}

/// E5's parameters.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// Numbers of contexts (Fig. 5.2's sweep, at `size`).
    pub contexts: Vec<usize>,
    /// Message size of the contexts sweep, bytes.
    pub size: usize,
    /// Message sizes of Fig. 5.3's sweep, bytes (1 to 65,536).
    pub msg_sizes: Vec<usize>,
    /// Contexts during the message-size sweep.
    pub msg_contexts: usize,
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

/// Captured XTP packets per context, in context order; each context's
/// packets in the order it sent them.
type Packets = Vec<Vec<Vec<u8>>>;

/// Groups `pkts` by their key (the header's first 8 bytes), in the order
/// the keys first appear.
fn by_context(pkts: Vec<Vec<u8>>) -> Packets {
    let mut index = std::collections::HashMap::new();
    let mut out: Packets = Vec::new();
    for p in pkts {
        let Some(key) = p.get(..8).map(|k| k.to_vec()) else { continue };
        let i = *index.entry(key).or_insert_with(|| {
            out.push(Vec::new());
            out.len() - 1
        });
        out[i].push(p);
    }
    out
}

/// The server graph with `n` contexts from one client, and per context one
/// message of `size` bytes sent by the initiator's key and one by return key.
fn setup(n: usize, size: usize, cache: bool) -> Result<(XtpStack<Rope>, Packets, Packets), String> {
    let (ca, sa): (SocketAddr, SocketAddr) =
        ("10.0.0.1:1".parse().expect("literal"), "10.0.0.2:1".parse().expect("literal"));
    let mut s = server(cache)?;
    let ep = EndpointConfig { max_contexts_per_peer: usize::MAX, ..EndpointConfig::default() };
    let mut c = Endpoint::new(ep, 1);
    // No congestion window and no wait for the server's allocation: a whole
    // message leaves back to back before the client hears the server.
    let cfg = ContextConfig { congestion: Congestion::Disabled, noflow: true, ..ContextConfig::stream() };
    let mut now = Instant::ZERO;
    let mut buf = vec![0u8; 2048];
    let payload = Bytes::from(vec![0x5a; size.max(1)]);
    let ctxs: Vec<_> = (0..n)
        .map(|_| {
            let id = c.connect(now, sa, 7, cfg.clone()).map_err(|e| e.to_string())?;
            c.write(now, id, Bytes::from_static(b"x"), true, None).map_err(|e| e.to_string())?;
            Ok(id)
        })
        .collect::<Result<_, String>>()?;
    // FIRSTs to the server; its answers held back, so the client still
    // addresses each context by its own key.
    while let Some(t) = c.poll_transmit(now, &mut buf) {
        now += Duration::from_micros(1);
        s.graph.advance(now);
        s.graph.receive(s.bottom, frame(ca, &buf[..t.len]));
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
    let want = size.max(1).div_ceil(cfg.mss);
    let capture = |c: &mut Endpoint, now: Instant, buf: &mut [u8], rtn: bool| -> Result<Packets, String> {
        let mut out = Vec::new();
        for &id in &ctxs {
            c.write(now, id, payload.clone(), true, None).map_err(|e| e.to_string())?;
        }
        while let Some(t) = c.poll_transmit(now, buf) {
            let p = &buf[..t.len];
            // The key is the header's first 8 bytes; its top bit is RTN.
            let by_return_key = p.first().is_some_and(|b| b & 0x80 != 0);
            if by_return_key == rtn {
                out.push(p.to_vec());
            }
        }
        let mut g = by_context(out);
        for m in &mut g {
            m.truncate(want);
        }
        if g.len() < n || g.iter().any(|m| m.len() != want) {
            let got = g.iter().map(Vec::len).min().unwrap_or(0);
            return Err(format!(
                "E5: captured {} of {n} messages, at least {got} of {want} packets each (rtn {rtn})",
                g.len()
            ));
        }
        g.truncate(n);
        Ok(g)
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

/// Replays `cycle` (frames, over and over) in groups of `per_msg` packets,
/// `packets` packets at least, and returns the demux time and the
/// whole-receive time per group (each summed over the group's packets,
/// then the central mean over the groups).
fn replay(s: &mut XtpStack<Rope>, cycle: &[&[u8]], per_msg: usize, packets: usize) -> (f64, f64) {
    let ca: SocketAddr = "10.0.0.1:1".parse().expect("literal");
    let per_msg = per_msg.max(1);
    let msgs = packets.div_ceil(per_msg).max(100);
    let samples = Rc::new(RefCell::new(Vec::with_capacity(4)));
    s.graph.set_demux_meter(Some(Box::new(Meter { start: None, samples: samples.clone() })));
    let (mut demux, mut total) = (Vec::with_capacity(msgs), Vec::with_capacity(msgs));
    let mut i = 0usize;
    for _ in 0..msgs {
        let (mut d, mut t) = (0u64, 0u64);
        for _ in 0..per_msg {
            let f = frame(ca, cycle[i % cycle.len()]);
            samples.borrow_mut().clear();
            let t0 = Clock::now();
            s.graph.receive(s.bottom, f);
            t += t0.elapsed().as_nanos() as u64;
            // XTP's demux is the first the receive runs (the layers above
            // may demux too).
            d += samples.borrow().first().copied().unwrap_or(0);
            i += 1;
            if i.is_multiple_of(64) {
                drain(&mut s.graph);
            }
        }
        demux.push(d as f64);
        total.push(t as f64);
    }
    drain(&mut s.graph);
    s.graph.set_demux_meter(None);
    (central_mean(demux), central_mean(total))
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

fn refs(v: &[Vec<u8>]) -> Vec<&[u8]> {
    v.iter().map(Vec::as_slice).collect()
}

/// Measures one point.
pub(crate) fn point(n: usize, size: usize, packets: usize) -> Result<Row, String> {
    let clock = clock_cost(packets);
    let first = |g: &Packets| -> Vec<Vec<u8>> { g.iter().map(|m| m[0].clone()).collect() };
    let (mut on, by_key, by_rtn) = setup(n, size, true)?;
    let k = by_key[0].len();
    let (firsts, rtn_firsts) = (first(&by_key), first(&by_rtn));
    let all: Vec<&[u8]> = by_key.iter().flatten().map(Vec::as_slice).collect();
    let (hit, _) = replay(&mut on, &refs(&firsts[..1]), 1, packets);
    let (miss, _) = replay(&mut on, &refs(&firsts), 1, packets);
    let (rtn, _) = replay(&mut on, &refs(&rtn_firsts), 1, packets);
    let (msg_on, _) = replay(&mut on, &all, k, packets);
    drop(on);
    let (mut off_s, by_key_off, _) = setup(n, size, false)?;
    let firsts_off = first(&by_key_off);
    let all_off: Vec<&[u8]> = by_key_off.iter().flatten().map(Vec::as_slice).collect();
    let (off, total) = replay(&mut off_s, &refs(&firsts_off), 1, packets);
    let (msg_off, msg_total) = replay(&mut off_s, &all_off, k, packets);
    let net = |v: f64| (v - clock).max(0.0);
    let (hit, miss, off, rtn) = (net(hit), net(miss), net(off), net(rtn));
    // The clock's cost once per packet of the message.
    let msg_net = |v: f64| (v - k as f64 * clock).max(0.0);
    let (msg_on, msg_off) = (msg_net(msg_on), msg_net(msg_off));
    let share = |den: f64| if den > 0.0 { (msg_off - msg_on) / den } else { 0.0 };
    Ok(Row {
        contexts: n,
        size,
        pkts_per_msg: k,
        hit_ns: hit,
        miss_ns: miss,
        off_ns: off,
        rtn_ns: rtn,
        total_ns: total,
        msg_on_ns: msg_on,
        msg_off_ns: msg_off,
        msg_total_ns: msg_total,
        saved_of_demux: share(msg_off),
        saved_of_receive: share(msg_total),
        clock_ns: clock,
        packets,
    })
}

/// E5: demux time against the number of contexts.
pub struct E5(Params);

impl E5 {
    /// The points: the contexts sweep at `size`, then the message sizes at
    /// `msg_contexts` (a point both sweeps share is measured once).
    fn points(p: &Params) -> Vec<(usize, usize)> {
        let mut out: Vec<(usize, usize)> = p.contexts.iter().map(|&n| (n, p.size)).collect();
        for &s in &p.msg_sizes {
            if !out.contains(&(p.msg_contexts, s)) {
                out.push((p.msg_contexts, s));
            }
        }
        out
    }
}

impl Experiment for E5 {
    const ID: &'static str = "E5";
    const TITLE: &'static str = "Demultiplexing time per packet through XTP in the framework, against the number of contexts and the message size (seed 003)";
    type Params = Params;
    type Point = (usize, usize);
    type Row = Row;

    fn defaults(quick: bool) -> Params {
        Params {
            contexts: if quick { vec![1, 100, 10_000] } else { vec![1, 10, 100, 1_000, 10_000] },
            size: 10,
            msg_sizes: if quick { vec![1, 65_536] } else { vec![1, 1_400, 4_096, 16_384, 65_536] },
            msg_contexts: 100,
            packets: if quick { 20_000 } else { 200_000 },
        }
    }
    fn check(p: &Params) -> Result<(), String> {
        if p.contexts.is_empty() || p.contexts.iter().any(|&n| n == 0 || n > 100_000) {
            return Err("contexts: 1 to 100,000 each, at least one".into());
        }
        if p.size == 0 || p.size > 65_536 {
            return Err("size: 1 to 65,536 bytes".into());
        }
        if p.msg_sizes.iter().any(|&s| s == 0 || s > 65_536) {
            return Err("msg_sizes: 1 to 65,536 bytes each".into());
        }
        if p.msg_contexts == 0 || p.msg_contexts > 1_000 {
            return Err("msg_contexts: 1 to 1,000 (each holds a whole message of packets)".into());
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
        E5::points(&self.0)
            .into_iter()
            .map(|(n, size)| Step { label: format!("{n} contexts, {size} B messages"), point: (n, size) })
            .collect()
    }
    fn run(&mut self, &(n, size): &(usize, usize), _env: &Env) -> Result<Vec<Row>, String> {
        Ok(vec![point(n, size, self.0.packets)?])
    }
    fn csv_key() -> &'static [&'static str] {
        &["size", "contexts"]
    }
    fn render(p: &Params, rows: &[Row], _notes: &[String], page: &mut Page) {
        let table: Vec<Vec<String>> = rows
            .iter()
            .map(|r| {
                vec![
                    r.contexts.to_string(),
                    r.size.to_string(),
                    r.pkts_per_msg.to_string(),
                    format!("{:.1}", r.hit_ns),
                    format!("{:.1}", r.miss_ns),
                    format!("{:.1}", r.off_ns),
                    format!("{:.1}", r.rtn_ns),
                    format!("{:.0}", r.total_ns),
                    format!("{:.0}", r.msg_on_ns),
                    format!("{:.0}", r.msg_off_ns),
                    format!("{:.0}", r.msg_total_ns),
                    format!("{:.1} %", 100.0 * r.saved_of_demux),
                    format!("{:.2} %", 100.0 * r.saved_of_receive),
                ]
            })
            .collect();
        page.table(
            "Measured here (framework path, the graph's own timestamps, the clock's cost subtracted; each time the mean of the central 98 %). Per packet, ns: hit = one context's packet back to back; miss = contexts in turn; cache off; return key (slot index, no map); whole receive (cache off). Per message, ns (its packets back to back, messages of the contexts in turn, demux times summed over the packets): demux with cache, demux without, whole receive without; then the share the cache saves of the message's demux time, (off − on)/off, and of its whole receive time, (off − on)/receive",
            &[
                "contexts",
                "message bytes",
                "packets / message",
                "hit",
                "miss",
                "cache off",
                "return key",
                "whole receive (off)",
                "msg demux, cache",
                "msg demux, no cache",
                "msg whole receive (no cache)",
                "saved, share of demux",
                "saved, share of receive",
            ],
            &table,
        );
        page.note("Seed 003 (Li 2003), Figs. 5.2–5.3: demux time of the PIX XTP stack against the number of clients, with and without the one-entry cache (Pentium III, 547 MHz): microseconds, here nanoseconds; compare shapes. The seed's cache saves most for back-to-back packets of one client; here it applies only to packets that carry the initiator's key — XTP's return keys name the context's slot and need no map.");
        let curve = |f: fn(&Row) -> f64| -> Vec<(f64, f64)> {
            rows.iter().filter(|r| r.size == p.size).map(|r| (r.contexts as f64, f(r).max(0.1))).collect()
        };
        page.figure(
            loglog(
                &format!("E5 demux time vs contexts, {} B messages (cf. seed 003 Fig. 5.2)", p.size),
                "contexts",
                "demux time per packet (ns)",
                &[
                    ("cache hit".to_string(), curve(|r| r.hit_ns)),
                    ("cache miss".to_string(), curve(|r| r.miss_ns)),
                    ("cache off".to_string(), curve(|r| r.off_ns)),
                    ("return key".to_string(), curve(|r| r.rtn_ns)),
                ],
            ),
            "E5: demux time per packet against the number of contexts.",
        );
        let mut by_size: Vec<&Row> = rows.iter().filter(|r| r.contexts == p.msg_contexts).collect();
        by_size.sort_by_key(|r| r.size);
        let share = |f: fn(&Row) -> f64| -> Vec<(f64, f64)> {
            by_size.iter().map(|r| (r.size as f64, 100.0 * f(r))).collect()
        };
        page.figure(
            plot(
                &format!(
                    "E5 share the cache saves vs message size, {} contexts in turn (cf. seed 003 Fig. 5.3)",
                    p.msg_contexts
                ),
                ("message size (bytes; packets of 1,400 B back to back)", "saved by the cache (%)"),
                &[
                    ("of the message's demux time, (off − on)/off".to_string(), share(|r| r.saved_of_demux)),
                    (
                        "of the message's whole receive time, (off − on)/receive".to_string(),
                        share(|r| r.saved_of_receive),
                    ),
                ],
                (true, false),
            ),
            "E5: the share of time the one-entry cache saves when each message's packets arrive back to back and the contexts take turns: the first packet of a message misses the cache, the rest hit.",
        );
        let spread = |v: &[f64]| {
            (
                v.iter().copied().fold(f64::INFINITY, f64::min),
                v.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            )
        };
        let sweep: Vec<&Row> = rows.iter().filter(|r| r.size == p.size).collect();
        let (h0, h1) = spread(&sweep.iter().map(|r| r.hit_ns).collect::<Vec<_>>());
        // At one context a "miss" is a hit: the misses are the other counts'.
        let (m0, m1) =
            spread(&sweep.iter().filter(|r| r.contexts > 1).map(|r| r.miss_ns).collect::<Vec<_>>());
        let mut text = format!(
            "Over {}–{} contexts a cache hit costs {h0:.0}–{h1:.0} ns per packet and a miss (two or more contexts) {m0:.0}–{m1:.0} ns.",
            sweep.first().map_or(0, |r| r.contexts),
            sweep.last().map_or(0, |r| r.contexts),
        );
        if let (Some(a), Some(b)) = (by_size.first(), by_size.last()) {
            text += &format!(
                " With {} contexts taking turns, a {} B message ({} packet{}) has {:.0} % of its demux time saved by the cache ({:.2} % of its whole receive time); a {} B message ({} packets back to back), {:.0} % ({:.2} %).",
                p.msg_contexts,
                a.size,
                a.pkts_per_msg,
                if a.pkts_per_msg == 1 { "" } else { "s" },
                100.0 * a.saved_of_demux,
                100.0 * a.saved_of_receive,
                b.size,
                b.pkts_per_msg,
                100.0 * b.saved_of_demux,
                100.0 * b.saved_of_receive,
            );
            // With one packet per message and several contexts both servers
            // look every packet up: what they differ by is this run's noise
            // between two separately built servers.
            let noise = rows
                .iter()
                .filter(|r| r.pkts_per_msg == 1 && r.contexts > 1)
                .map(|r| r.saved_of_demux.abs())
                .fold(0.0, f64::max);
            text += &format!(
                " Where a message is one packet and the contexts take turns, both servers look every packet up, and they differ by up to {:.0} % of the demux time in this run: read the saving at several packets per message against that.",
                100.0 * noise
            );
            let most = by_size.iter().map(|r| r.saved_of_receive).fold(f64::NEG_INFINITY, f64::max);
            text += &format!(
                " In the message-size sweep at most {:.2} % of a message's whole receive time is saved{}. Packets by return key (the steady state of every context) need no lookup.",
                100.0 * most,
                if most < 0.1 {
                    ": beside checksumming and processing the packets, the hash lookup is small"
                } else {
                    ""
                }
            );
        }
        page.reading(&text);
    }
    fn summary(_p: &Params, rows: &[Row]) -> Vec<String> {
        let mut out = vec![
            "E5 demux time (ns per packet: hit / miss / off / return key; per message with / without cache; saved share of demux, of receive):".to_string(),
        ];
        for r in rows {
            out.push(format!(
                "  {:>6} contexts {:>5} B ({} pkts): {:.1} / {:.1} / {:.1} / {:.1}; {:.0} / {:.0}; {:.1} %, {:.2} %",
                r.contexts,
                r.size,
                r.pkts_per_msg,
                r.hit_ns,
                r.miss_ns,
                r.off_ns,
                r.rtn_ns,
                r.msg_on_ns,
                r.msg_off_ns,
                100.0 * r.saved_of_demux,
                100.0 * r.saved_of_receive
            ));
        }
        out
    }
    fn headline(r: &Row) -> Option<(String, f64, &'static str)> {
        Some((format!("{} contexts {} B miss", r.contexts, r.size), r.miss_ns, "ns"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_large_message_is_timed_packet_by_packet_and_the_cache_saves_a_share_of_its_demux() {
        // 64 KB in 47 packets of 1,400 B, 3 contexts taking turns: the
        // first packet of each message misses, 46 hit.
        let r = point(3, 65_536, 2_000).unwrap();
        assert_eq!(r.pkts_per_msg, 47, "{r:?}");
        assert!(r.msg_off_ns > 0.0 && r.msg_total_ns > r.msg_off_ns, "{r:?}");
        assert!(r.saved_of_demux < 1.0 && r.saved_of_receive < r.saved_of_demux.max(0.0) + 1e-9, "{r:?}");
        // One packet per message: the same measurement, one packet.
        let one = point(3, 10, 2_000).unwrap();
        assert_eq!(one.pkts_per_msg, 1, "{one:?}");
        assert!(one.msg_total_ns < r.msg_total_ns, "{one:?} vs {r:?}");
    }

    #[test]
    fn the_sweeps_share_a_point_once() {
        let p = E5::defaults(true);
        let pts = E5::points(&p);
        assert_eq!(pts, vec![(1, 10), (100, 10), (10_000, 10), (100, 1), (100, 65_536)]);
        let bad = Params { msg_sizes: vec![70_000], ..p };
        assert!(E5::check(&bad).unwrap_err().starts_with("msg_sizes"));
    }
}
