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
pub(crate) struct Mechanism {
    pub(crate) name: String,
    pub(crate) param: String,
    pub(crate) ns: f64,
    pub(crate) copies: Option<f64>,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn time(reps: usize, ops: usize, mut f: impl FnMut()) -> f64 {
    median(
        (0..reps)
            .map(|_| {
                let t = WallInstant::now();
                for _ in 0..ops {
                    f();
                }
                t.elapsed().as_nanos() as f64 / ops as f64
            })
            .collect(),
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

pub(crate) fn run(quick: bool) -> Vec<Mechanism> {
    let (reps, scale) = if quick { (3, 1) } else { (5, 10) };
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
