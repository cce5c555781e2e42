//! E9 (seed 000 §3 and §4.2): the cost of single mechanisms of the framework
//! and engine, each timed in a loop (median of repetitions), and the number
//! of times a payload byte is copied on the real XTP path from the sending
//! user to the receiving user (counted, see [`crate::copies`]), beside the
//! seed's counts: SandiaXTP 4 copies end to end, the Estelle implementations
//! 7 on the way down and 7 on the way up.

use std::hint::black_box;
use std::time::Instant as WallInstant;

use bytes::Bytes;
use xk_core::protocols::{Echo, LoopLink, Mux};
use xk_core::{Addr, Event as GraphEvent, GraphBuilder, Part, Participants};
use xk_msg::{Contig, Msg, Rope, copy_stats, reset_copy_stats};
use xk_time::{DeltaList, HeapQueue, Instant, TimerQueue, TimingWheel};
use xtp_proto::{ContextConfig, Endpoint, EndpointConfig};

use crate::copies::{Exchange, Form, Path};

/// One mechanism: name, parameter, ns per operation, and (if counted) payload
/// copies per operation.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Mechanism {
    /// What is timed.
    pub name: String,
    /// Its parameter (size, count).
    pub param: String,
    /// Median ns per operation.
    pub ns: f64,
    /// Payload copies per operation, where counted (on the real path: per
    /// payload byte, end to end).
    pub copies: Option<f64>,
    /// On the real path: the count stage by stage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<Path>,
}

/// Seed 000 §3.1 and §5: SandiaXTP copies a payload twice per side (into the
/// daemon's shared buffer, then into the operating system), four times end
/// to end.
const SANDIA_END_TO_END: u32 = 4;
/// Seed 000 §3.2: the Estelle implementations copy a data packet seven times
/// from the user module to the network, and seven times back up.
const ESTELLE_EACH_WAY: u32 = 7;

fn time(reps: usize, ops: usize, mut f: impl FnMut()) -> f64 {
    crate::stats::median((0..reps).map(|_| {
        let t = WallInstant::now();
        for _ in 0..ops {
            f();
        }
        t.elapsed().as_nanos() as f64 / ops as f64
    }))
}

/// A message pushed down App → Mux → LoopLink on one graph, carried to a
/// second graph and popped up LoopLink → Mux → Echo, echoed back down and up
/// again: four layer crossings each way per direction.
fn layers<M: Msg + 'static>(size: usize, ops: usize, reps: usize) -> (f64, f64) {
    let mut a = GraphBuilder::<M>::new();
    let link = a.add(LoopLink::new(65_535), &[]);
    let mux = a.add(Mux::new(0x0800, 1), &[link]);
    let mut a = a.build().expect("graph a");
    let mut b = GraphBuilder::<M>::new();
    let link_b = b.add(LoopLink::new(65_535), &[]);
    let mux_b = b.add(Mux::new(0x0800, 2), &[link_b]);
    b.add(Echo::new(7), &[mux_b]);
    let mut b = b.build().expect("graph b");
    let parts = Participants::new(Part::top_first([Addr::Port(5000)]), Part::top_first([Addr::Port(7)]));
    let s = a.open(mux, &parts).expect("open");
    let payload = Bytes::from(vec![0x42u8; size]);
    reset_copy_stats();
    let ns = time(reps, ops, || {
        let _ = a.push(s, M::from_payload(payload.clone(), 64));
        while let Some((_, f)) = a.poll_transmit() {
            b.receive(link_b, f);
        }
        while let Some((_, f)) = b.poll_transmit() {
            a.receive(link, f);
        }
        while let Some(ev) = a.poll_event() {
            if let GraphEvent::Deliver { msg, .. } = ev {
                black_box(msg.len());
            }
        }
    });
    let copies = copy_stats().copies as f64 / (ops * reps) as f64;
    (ns, copies)
}

pub(crate) fn run(reps: usize, scale: usize) -> Vec<Mechanism> {
    let mut out = Vec::new();
    // Context creation: connect on an endpoint that already holds n contexts.
    {
        let mut ep = Endpoint::new(EndpointConfig::default(), 3);
        let peer = "10.0.0.2:1".parse().expect("addr");
        let n = 2_000 * scale;
        let t = WallInstant::now();
        for _ in 0..n {
            black_box(ep.connect(Instant::ZERO, peer, 7, ContextConfig::stream()).ok());
        }
        out.push(Mechanism {
            name: "XTP context creation (connect)".into(),
            param: format!("{n} contexts"),
            ns: t.elapsed().as_nanos() as f64 / n as f64,
            copies: None,
            path: None,
        });
    }
    // Message transfer between layers, both message forms.
    for size in [10usize, 1000, 10_000] {
        let ops = 2_000 * scale;
        let (ns, copies) = layers::<Rope>(size, ops, reps);
        out.push(Mechanism {
            name: "round trip through 2 × 2 layers (Rope)".into(),
            param: format!("{size} B"),
            ns,
            copies: Some(copies),
            path: None,
        });
        let (ns, copies) = layers::<Contig>(size, ops, reps);
        out.push(Mechanism {
            name: "round trip through 2 × 2 layers (Contig)".into(),
            param: format!("{size} B"),
            ns,
            copies: Some(copies),
            path: None,
        });
    }
    // Timer operations: schedule + cancel with 1,000 pending.
    fn rearm<Q: TimerQueue<u32> + Default>(reps: usize, ops: usize) -> f64 {
        let mut q = Q::default();
        let mut ids: Vec<_> =
            (0..1000u64).map(|i| q.schedule(Instant::from_nanos(1_000_000 + i * 9_973), 0)).collect();
        let mut i = 0usize;
        let mut x = 1u64;
        time(reps, ops, || {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            q.cancel(ids[i]);
            ids[i] = q.schedule(Instant::from_nanos(1_000_000 + (x >> 40)), 0);
            i = (i + 1) % ids.len();
        })
    }
    let ops = 100_000 * scale;
    for (name, ns) in [
        ("timer cancel + schedule, binary heap", rearm::<HeapQueue<u32>>(reps, ops)),
        ("timer cancel + schedule, timing wheel", rearm::<TimingWheel<u32>>(reps, ops)),
        ("timer cancel + schedule, delta list", rearm::<DeltaList<u32>>(reps, ops / 100)),
    ] {
        out.push(Mechanism {
            name: name.into(),
            param: "1,000 pending".into(),
            ns,
            copies: None,
            path: None,
        });
    }
    out
}

/// The real path's rows for `size`: one way and echoed, both message
/// forms, `messages` each.
pub(crate) fn path_rows(size: usize, messages: u32) -> Result<Vec<Mechanism>, String> {
    let mut out = Vec::new();
    for exchange in [Exchange::OneWay, Exchange::Echo] {
        for form in [Form::Contiguous, Form::Rope] {
            let (counts, ns) = crate::copies::count(size, form, exchange, messages)?;
            let path = counts.path(size, form, exchange, messages);
            out.push(Mechanism {
                name: format!("message over XTP/UDP loopback, {} ({})", exchange.name(), form.name()),
                param: format!("{size} B"),
                ns,
                copies: Some(path.per_byte),
                path: Some(path),
            });
        }
    }
    Ok(out)
}

/// E9's parameters.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// Timed repetitions per mechanism (the median is kept).
    pub reps: usize,
    /// Operations per repetition, in units of the quick plan's counts.
    pub scale: usize,
    /// Message sizes whose copies are counted on the real path (bytes).
    /// (Defaults keep results written before these existed readable by
    /// `--replot` and `--compare`.)
    #[serde(default = "path_sizes")]
    pub path_sizes: Vec<usize>,
    /// Messages counted per size, exchange and form on the real path.
    #[serde(default = "path_messages")]
    pub path_messages: u32,
}

fn path_sizes() -> Vec<usize> {
    vec![10, 1000, 10_000]
}

fn path_messages() -> u32 {
    20
}

/// E9 (seed 000 §3, §4.2): mechanism benchmark and payload copies on the real path.
pub struct E9(Params);

impl crate::experiment::Experiment for E9 {
    const ID: &'static str = "E9";
    const TITLE: &'static str = "Mechanism benchmark and payload copies on the real path (seed 000 §3, §4.2)";
    type Params = Params;
    /// None: the mechanisms; a size: the real path's copies at that size.
    type Point = Option<usize>;
    type Row = Mechanism;

    fn defaults(quick: bool) -> Params {
        if quick {
            Params { reps: 3, scale: 1, path_sizes: path_sizes(), path_messages: path_messages() }
        } else {
            Params { reps: 5, scale: 10, path_sizes: path_sizes(), path_messages: 200 }
        }
    }
    fn check(p: &Params) -> Result<(), String> {
        if p.reps == 0 || !(1..=1000).contains(&p.scale) {
            return Err("reps at least 1, scale 1 to 1,000".into());
        }
        if p.path_sizes.iter().any(|&s| s == 0 || s > 1_000_000) || !(1..=100_000).contains(&p.path_messages)
        {
            return Err("path_sizes: 1 to 1,000,000 bytes each; path_messages: 1 to 100,000".into());
        }
        Ok(())
    }
    fn new(p: Params) -> Self {
        E9(p)
    }
    fn params(&self) -> &Params {
        &self.0
    }
    fn steps(&self, _env: &crate::experiment::Env) -> Vec<crate::experiment::Step<Option<usize>>> {
        let mut steps = vec![crate::experiment::Step { label: "mechanisms".into(), point: None }];
        for &size in &self.0.path_sizes {
            steps.push(crate::experiment::Step {
                label: format!("{size} B: payload copies on the real path (UDP loopback)"),
                point: Some(size),
            });
        }
        steps
    }
    fn run(
        &mut self,
        point: &Option<usize>,
        _env: &crate::experiment::Env,
    ) -> Result<Vec<Mechanism>, String> {
        match *point {
            None => Ok(run(self.0.reps, self.0.scale)),
            Some(size) => path_rows(size, self.0.path_messages),
        }
    }
    fn csv_key() -> &'static [&'static str] {
        &["name", "param"]
    }
    fn render(_p: &Params, rows: &[Mechanism], _notes: &[String], page: &mut crate::html::Page) {
        let table: Vec<Vec<String>> = rows
            .iter()
            .filter(|m| m.path.is_none())
            .map(|m| {
                vec![
                    format!("<span style=\"float:left\">{}</span>", crate::svg::esc(&m.name)),
                    crate::svg::esc(&m.param),
                    format!("{:.1}", m.ns),
                    m.copies.map_or("—".to_string(), |c| format!("{c:.2}")),
                ]
            })
            .collect();
        page.table(
            "Measured here (median ns per operation)",
            &["mechanism", "parameter", "ns", "payload copies per operation"],
            &table,
        );
        let path: Vec<Vec<String>> = rows
            .iter()
            .filter_map(|m| m.path.as_ref().map(|p| (m, p)))
            .map(|(m, p)| {
                let f = |v: f64| format!("{v:.2}");
                vec![
                    p.size.to_string(),
                    crate::svg::esc(&p.exchange),
                    crate::svg::esc(&p.form),
                    format!("{:.0}", p.packets_per_message),
                    f(p.join),
                    f(p.into_packet),
                    f(p.relaid),
                    f(p.to_kernel),
                    f(p.from_kernel),
                    f(p.read_join),
                    format!("<b>{:.2}</b>", p.per_byte),
                    format!("{:.1}", p.ops_per_message),
                    format!("{:.2}", p.ops_per_packet),
                    format!("{:.1}", m.ns / 1e3),
                ]
            })
            .collect();
        if !path.is_empty() {
            page.table(
                "Measured here: payload copies on the real path, user write → user read over XTP/UDP on loopback (copies per payload byte at each stage, both ends counted; an echoed message crosses twice, so its counts cover the round trip; user write → send buffer and packet → receive buffer → user read copy nothing: the endpoint takes and hands out `Bytes`)",
                &[
                    "bytes",
                    "exchange",
                    "form",
                    "DATA packets per message",
                    "pieces joined into a packet",
                    "into the packet",
                    "driver re-layout",
                    "into the kernel (sendmsg)",
                    "out of the kernel (recvmsg)",
                    "reader joins chunks",
                    "copies per byte, end to end",
                    "copy operations per message",
                    "copy operations per packet",
                    "µs per message",
                ],
                &path,
            );
        }
        page.table(
            "Seed 000 §3 and §4.2 (1997): copies of a data packet",
            &["implementation", "copies"],
            &[
                vec![
                    "SandiaXTP (central packet buffers)".into(),
                    format!(
                        "{SANDIA_END_TO_END}, end to end ({} per side: into the daemon's shared buffer, into the operating system)",
                        SANDIA_END_TO_END / 2
                    ),
                ],
                vec![
                    "Estelle specification (EC, PET/DINGO)".into(),
                    format!(
                        "{ESTELLE_EACH_WAY} on the way down, {ESTELLE_EACH_WAY} on the way up ({} end to end)",
                        2 * ESTELLE_EACH_WAY
                    ),
                ],
            ],
        );
        page.reading(&reading(rows));
    }
    fn summary(_p: &Params, rows: &[Mechanism]) -> Vec<String> {
        let mut out = vec!["E9 mechanisms:".to_string()];
        for m in rows.iter().filter(|m| m.path.is_none()) {
            let copies = m.copies.map(|c| format!(", {c:.2} payload copies")).unwrap_or_default();
            out.push(format!("  {:>44} {:>14}: {:>10.1} ns{copies}", m.name, m.param, m.ns));
        }
        out.push("E9 payload copies on the real path (per byte, end to end; seed 000: SandiaXTP 4, Estelle 7 each way):".into());
        for p in rows.iter().filter_map(|m| m.path.as_ref()) {
            out.push(format!(
                "  {:>6} B {:<18} {:<10}: {:.2} per byte, {:.1} copy operations per message, {:.2} per packet",
                p.size, p.exchange, p.form, p.per_byte, p.ops_per_message, p.ops_per_packet
            ));
        }
        out
    }
    fn headline(m: &Mechanism) -> Option<(String, f64, &'static str)> {
        // A path row's headline is its count: what a regression there means.
        match &m.path {
            Some(p) => Some((format!("{} {}", m.name, m.param), p.per_byte, "copies per byte")),
            None => Some((format!("{} {}", m.name, m.param), m.ns, "ns")),
        }
    }
}

/// Where a path row's copies are, stage by stage (the stages that copy).
fn stages(p: &Path) -> String {
    let named = [
        ("pieces joined into a packet", p.join),
        ("into the packet", p.into_packet),
        ("driver re-layout", p.relaid),
        ("into the kernel", p.to_kernel),
        ("out of the kernel", p.from_kernel),
        ("reader joins chunks", p.read_join),
    ];
    named.iter().filter(|(_, v)| *v > 0.0).map(|(n, v)| format!("{n} {v:.2}")).collect::<Vec<_>>().join(", ")
}

/// E9's reading: the real path's count per form and size, where the
/// copies of the largest message are, the seed's counts, and the toy
/// graph's. Every number comes from the rows (checked by a test).
pub(crate) fn reading(rows: &[Mechanism]) -> String {
    let paths: Vec<&Path> = rows.iter().filter_map(|m| m.path.as_ref()).collect();
    // Per form: the count at each size, and where the largest size's are.
    let per_form = |exchange: &str| {
        let mut forms = Vec::new();
        for form in ["contiguous", "rope"] {
            let mine: Vec<&&Path> =
                paths.iter().filter(|p| p.exchange == exchange && p.form == form).collect();
            let Some(big) = mine.iter().max_by_key(|p| p.size) else { continue };
            let counts: Vec<String> =
                mine.iter().map(|p| format!("{:.2} at {} bytes", p.per_byte, p.size)).collect();
            forms.push(format!("{form}: {} (at {} bytes: {})", counts.join(", "), big.size, stages(big)));
        }
        forms.join("; ")
    };
    let mut text = String::new();
    let one_way = per_form(Exchange::OneWay.name());
    if !one_way.is_empty() {
        text += &format!(
            "On the real path (user write to user read over XTP/UDP on loopback, the kernel's copy in and copy out included) a payload byte is copied, one way — {one_way}. Seed 000: SandiaXTP {SANDIA_END_TO_END} times end to end, the Estelle implementations {ESTELLE_EACH_WAY} times each way ({} end to end). ",
            2 * ESTELLE_EACH_WAY
        );
    }
    let echo = per_form(Exchange::Echo.name());
    if !echo.is_empty() {
        text += &format!(
            "In E1's ping-pong (the message echoed back), per round trip — {echo}: the reply leaves in one batch with the status report it owes, and the driver copies the batch again to put the longer DATA first. "
        );
    }
    if paths.iter().any(|p| p.retransmitted > 0) {
        text += "Some counts include retransmitted data (see the rows). ";
    }
    let toy = |form: &str| {
        rows.iter()
            .filter(|m| m.path.is_none() && m.name.contains(form))
            .filter_map(|m| m.copies)
            .fold(0.0, f64::max)
    };
    text += &format!(
        "Through the toy two-layer graph (xk-msg alone), a message in the rope form is copied at most {:.2} times per round trip, in the contiguous form at most {:.2} times (building it behind its headroom).",
        toy("Rope"),
        toy("Contig")
    );
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(size: usize, exchange: Exchange, form: &str, per: [f64; 6]) -> Mechanism {
        let [join, into_packet, relaid, to_kernel, from_kernel, read_join] = per;
        Mechanism {
            name: format!("message, {} ({form})", exchange.name()),
            param: format!("{size} B"),
            ns: 1000.0,
            copies: Some(per.iter().sum()),
            path: Some(Path {
                size,
                form: form.into(),
                exchange: exchange.name().into(),
                messages: 5,
                packets_per_message: 1.0,
                join,
                into_packet,
                relaid,
                to_kernel,
                from_kernel,
                read_join,
                per_byte: per.iter().sum(),
                ops_per_message: 3.0,
                ops_per_packet: 3.0,
                retransmitted: 0,
            }),
        }
    }

    #[test]
    fn results_from_before_the_path_count_still_read() {
        let p: Params = serde_json::from_value(serde_json::json!({"reps": 3, "scale": 1})).unwrap();
        assert_eq!((p.path_sizes, p.path_messages), (vec![10, 1000, 10_000], 20));
        let m: Mechanism =
            serde_json::from_value(serde_json::json!({"name": "x", "param": "y", "ns": 1.0, "copies": null}))
                .unwrap();
        assert!(m.path.is_none());
    }

    #[test]
    fn the_reading_quotes_the_rows_it_came_from() {
        let toy = |name: &str, c: f64| Mechanism {
            name: name.into(),
            param: "10 B".into(),
            ns: 5.0,
            copies: Some(c),
            path: None,
        };
        let rows = [
            toy("round trip through 2 × 2 layers (Rope)", 0.0),
            toy("round trip through 2 × 2 layers (Contig)", 1.0),
            path(10, Exchange::OneWay, "contiguous", [0.0, 1.0, 0.0, 1.0, 1.0, 0.0]),
            path(10_000, Exchange::OneWay, "contiguous", [0.0, 1.0, 0.0, 1.0, 1.0, 1.0]),
            path(10_000, Exchange::OneWay, "rope", [0.28, 1.0, 0.0, 1.0, 1.0, 0.0]),
            path(1000, Exchange::Echo, "contiguous", [0.0, 2.0, 1.0, 2.0, 2.0, 0.0]),
        ];
        let text = reading(&rows);
        for quoted in [
            "contiguous: 3.00 at 10 bytes, 4.00 at 10000 bytes (at 10000 bytes: into the packet 1.00, into the kernel 1.00, out of the kernel 1.00, reader joins chunks 1.00)",
            "rope: 3.28 at 10000 bytes (at 10000 bytes: pieces joined into a packet 0.28, into the packet 1.00, into the kernel 1.00, out of the kernel 1.00)",
            "SandiaXTP 4 times end to end, the Estelle implementations 7 times each way (14 end to end)",
            "per round trip — contiguous: 7.00 at 1000 bytes (at 1000 bytes: into the packet 2.00, driver re-layout 1.00, into the kernel 2.00, out of the kernel 2.00)",
            "rope form is copied at most 0.00 times",
            "contiguous form at most 1.00 times",
        ] {
            assert!(text.contains(quoted), "{quoted:?} not in {text}");
        }
        assert!(!text.contains("retransmitted"));
    }
}
