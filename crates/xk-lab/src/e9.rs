//! E9 (seed 000 §4.2): mechanism benchmark — the cost of single mechanisms of
//! the framework and engine, each timed in a loop (median of repetitions).

use std::hint::black_box;
use std::time::Instant as WallInstant;

use bytes::Bytes;
use xk_core::protocols::{Echo, LoopLink, Mux};
use xk_core::{Addr, Event as GraphEvent, GraphBuilder, Part, Participants};
use xk_msg::{Contig, Msg, Rope, copy_stats, reset_copy_stats};
use xk_time::{DeltaList, HeapQueue, Instant, TimerQueue, TimingWheel};
use xtp_proto::{ContextConfig, Endpoint, EndpointConfig};

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
    /// Payload copies per operation, where counted.
    pub copies: Option<f64>,
}

fn time(reps: usize, ops: usize, mut f: impl FnMut()) -> f64 {
    crate::stats::median(
        (0..reps)
            .map(|_| {
                let t = WallInstant::now();
                for _ in 0..ops {
                    f();
                }
                t.elapsed().as_nanos() as f64 / ops as f64
            }),
    )
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
        });
        let (ns, copies) = layers::<Contig>(size, ops, reps);
        out.push(Mechanism {
            name: "round trip through 2 × 2 layers (Contig)".into(),
            param: format!("{size} B"),
            ns,
            copies: Some(copies),
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
        out.push(Mechanism { name: name.into(), param: "1,000 pending".into(), ns, copies: None });
    }
    out
}

/// E9's parameters.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// Timed repetitions per mechanism (the median is kept).
    pub reps: usize,
    /// Operations per repetition, in units of the quick plan's counts.
    pub scale: usize,
}

/// E9 (seed 000 §4.2): mechanism benchmark.
pub struct E9(Params);

impl crate::experiment::Experiment for E9 {
    const ID: &'static str = "E9";
    const TITLE: &'static str = "Mechanism benchmark (seed 000 §4.2)";
    type Params = Params;
    type Point = ();
    type Row = Mechanism;

    fn defaults(quick: bool) -> Params {
        if quick { Params { reps: 3, scale: 1 } } else { Params { reps: 5, scale: 10 } }
    }
    fn check(p: &Params) -> Result<(), String> {
        if p.reps == 0 || !(1..=1000).contains(&p.scale) {
            return Err("reps at least 1, scale 1 to 1,000".into());
        }
        Ok(())
    }
    fn new(p: Params) -> Self {
        E9(p)
    }
    fn params(&self) -> &Params {
        &self.0
    }
    fn steps(&self, _env: &crate::experiment::Env) -> Vec<crate::experiment::Step<()>> {
        vec![crate::experiment::Step { label: "mechanisms".into(), point: () }]
    }
    fn run(&mut self, _: &(), _env: &crate::experiment::Env) -> Result<Vec<Mechanism>, String> {
        Ok(run(self.0.reps, self.0.scale))
    }
    fn csv_key() -> &'static [&'static str] {
        &["name", "param"]
    }
    fn render(_p: &Params, rows: &[Mechanism], _notes: &[String], page: &mut crate::html::Page) {
        let table: Vec<Vec<String>> = rows
            .iter()
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
        page.table(
            "Seed 000 §3–4 (1997): copies of a data packet",
            &["implementation", "copies"],
            &[
                vec!["SandiaXTP (central packet buffers)".into(), "4, end to end".into()],
                vec![
                    "Estelle specification (EC, PET/DINGO)".into(),
                    "7 on the way down, 7 on the way up".into(),
                ],
            ],
        );
        let rope =
            rows.iter().filter(|m| m.name.contains("Rope")).filter_map(|m| m.copies).fold(0.0, f64::max);
        let contig =
            rows.iter().filter(|m| m.name.contains("Contig")).filter_map(|m| m.copies).fold(0.0, f64::max);
        page.reading(&format!(
            "Through the toy two-layer graph, a message in the rope form is copied at most {rope:.2} times per round trip, in the contiguous form at most {contig:.2} times (building it behind its headroom). This counts copies in xk-msg only, not on the real XTP path through sockets; the seed counted copies, not nanoseconds, for these mechanisms."
        ));
    }
    fn summary(_p: &Params, rows: &[Mechanism]) -> Vec<String> {
        let mut out = vec!["E9 mechanisms:".to_string()];
        for m in rows {
            let copies = m.copies.map(|c| format!(", {c:.2} payload copies")).unwrap_or_default();
            out.push(format!("  {:>44} {:>14}: {:>10.1} ns{copies}", m.name, m.param, m.ns));
        }
        out
    }
    fn headline(m: &Mechanism) -> Option<(String, f64, &'static str)> {
        Some((format!("{} {}", m.name, m.param), m.ns, "ns"))
    }
}
