//! Isolation inside the daemon, without processes: a client's segment is
//! made here and written through raw ring producers, so that corrupt
//! records — which the real client never writes — can be posted. A
//! corrupt block is refused to its sender, a corrupt ring ends its
//! sender's session, and another session served by the same engine is
//! not disturbed; nothing panics.

use std::os::unix::net::UnixStream;
use std::sync::Arc;

use bytes::Bytes;
use nix::sys::eventfd::{EfdFlags, EventFd};
use xk_shm::{Producer, Segment};
use xtp_proto::{ContextConfig, EndpointConfig};

use super::codec;
use super::link::{self, ShmLink, ShmPort};
use crate::driver::UdpDriver;
use crate::engine::serve::{Engine, Port};
use crate::engine::{AppLink, BlockError, CtxHandle, EngineConfig, FromEngine, ToEngine};

const CAP: usize = 64 << 10;

fn bell() -> std::os::fd::OwnedFd {
    EventFd::from_flags(EfdFlags::EFD_NONBLOCK | EfdFlags::EFD_CLOEXEC).unwrap().into()
}

/// A client's segment with both ends on it.
fn pair() -> (Arc<Segment>, ShmPort, ShmLink) {
    let seg = Arc::new(Segment::create("xpress-test", link::segment_len(CAP)).unwrap());
    link::init_segment(&seg, CAP);
    let (daemon_fd, client_fd) = (bell(), bell());
    let (a, b) = UnixStream::pair().unwrap();
    let port = ShmPort::new(
        seg.clone(),
        CAP,
        daemon_fd.try_clone().unwrap(),
        client_fd.try_clone().unwrap(),
        a,
        1,
        0,
    )
    .unwrap();
    let app = ShmLink::new(seg.clone(), client_fd, daemon_fd, b, "/test.sock".into()).unwrap();
    (seg, port, app)
}

/// Posts a raw record on TN (as a client that ignores the codec would).
fn raw(seg: &Arc<Segment>, kind: u32, body: &[u8]) {
    let mut p = Producer::new(seg.clone(), link::layouts(CAP).0).unwrap();
    assert!(p.push(kind, &[body]).unwrap());
}

/// Posts a block through the codec with a raw producer.
fn post(seg: &Arc<Segment>, b: &ToEngine) {
    let (kind, w, payload) = codec::encode_to_engine(b);
    let mut p = Producer::new(seg.clone(), link::layouts(CAP).0).unwrap();
    let parts: Vec<&[u8]> = match payload {
        Some(d) => vec![&w.0, d],
        None => vec![&w.0],
    };
    assert!(p.push(kind, &parts).unwrap());
}

#[test]
fn every_block_crosses_the_shared_rings_intact() {
    let (_seg, mut port, mut app) = pair();
    let peer = "127.0.0.1:9".parse().unwrap();
    let mut cfg = ContextConfig::stream();
    cfg.sort = Some(7);
    cfg.send_window = Some(123_456);
    let blocks = vec![
        ToEngine::Connect { ctx: CtxHandle(1), peer, port: 7, cfg: cfg.clone() },
        ToEngine::Listen { port: 8, cfg },
        ToEngine::Datagram {
            ctx: CtxHandle(2),
            peer,
            port: 9,
            data: Bytes::from_static(b"dgram"),
            acknowledged: true,
        },
        ToEngine::Write { ctx: CtxHandle(1), data: Bytes::from(vec![7u8; 5000]), eom: true, btag: Some(99) },
        ToEngine::Credit { ctx: CtxHandle(1), bytes: 4096 },
        ToEngine::Close { ctx: CtxHandle(1) },
        ToEngine::Abort { ctx: CtxHandle(2) },
    ];
    for b in &blocks {
        let text = format!("{b:?}");
        let b = match b {
            ToEngine::Write { ctx, data, eom, btag } => {
                ToEngine::Write { ctx: *ctx, data: data.clone(), eom: *eom, btag: *btag }
            }
            ToEngine::Datagram { ctx, peer, port, data, acknowledged } => ToEngine::Datagram {
                ctx: *ctx,
                peer: *peer,
                port: *port,
                data: data.clone(),
                acknowledged: *acknowledged,
            },
            other => codec_roundtrip_copy(other),
        };
        assert!(AppLink::try_send(&mut app, b, true).is_ok());
        let got = port.try_recv().expect("a block").expect("decoded");
        assert_eq!(format!("{got:?}"), text);
    }
    let back = vec![
        FromEngine::Incoming { ctx: CtxHandle(1 << 63), peer, service: xtp_proto::Service::Stream, port: 7 },
        FromEngine::Data {
            ctx: CtxHandle(1),
            seq: 10,
            data: Bytes::from_static(b"data"),
            eom: true,
            btag: Some(3),
        },
        FromEngine::Acked { ctx: CtxHandle(1), bytes: 77 },
        FromEngine::PeerFinished { ctx: CtxHandle(1) },
        FromEngine::Closed {
            ctx: CtxHandle(1),
            reason: xtp_proto::CloseReason::Refused { code: 1, value: 2, text: "no listener".into() },
        },
        FromEngine::Listening { port: 8, result: Err("port in use".into()) },
        FromEngine::Failed { ctx: CtxHandle(5), error: BlockError::Corrupt("x".into()) },
    ];
    for b in back {
        let text = format!("{b:?}");
        assert!(Port::try_send(&mut port, b, true).is_ok());
        let got = AppLink::try_recv(&mut app).expect("a block");
        assert_eq!(format!("{got:?}"), text);
    }
}

/// Blocks without payload are rebuilt field by field (they are not `Clone`).
fn codec_roundtrip_copy(b: &ToEngine) -> ToEngine {
    match b {
        ToEngine::Connect { ctx, peer, port, cfg } => {
            ToEngine::Connect { ctx: *ctx, peer: *peer, port: *port, cfg: cfg.clone() }
        }
        ToEngine::Listen { port, cfg } => ToEngine::Listen { port: *port, cfg: cfg.clone() },
        ToEngine::Credit { ctx, bytes } => ToEngine::Credit { ctx: *ctx, bytes: *bytes },
        ToEngine::Close { ctx } => ToEngine::Close { ctx: *ctx },
        ToEngine::Abort { ctx } => ToEngine::Abort { ctx: *ctx },
        _ => unreachable!("payload blocks are copied by the caller"),
    }
}

#[test]
fn corrupt_blocks_are_refused_and_the_ring_goes_on() {
    let (seg, mut port, _app) = pair();
    // An unknown kind.
    raw(&seg, 99, b"whatever");
    // A write cut short inside its fields (handle, then nothing).
    raw(&seg, 4, &5u64.to_le_bytes());
    // A connect whose mss is out of range.
    let mut cfg = ContextConfig::stream();
    cfg.mss = 1 << 20;
    post(&seg, &ToEngine::Connect { ctx: CtxHandle(3), peer: "127.0.0.1:9".parse().unwrap(), port: 7, cfg });
    // Then a good block.
    post(&seg, &ToEngine::Close { ctx: CtxHandle(4) });
    let mut got = Vec::new();
    while let Some(b) = port.try_recv() {
        got.push(b);
    }
    assert_eq!(got.len(), 4, "{got:?}");
    assert!(
        matches!(&got[0], Err((CtxHandle(0), BlockError::Corrupt(e))) if e.contains("unknown block kind 99"))
    );
    assert!(matches!(&got[1], Err((CtxHandle(5), BlockError::Corrupt(e))) if e.contains("eom")), "{got:?}");
    assert!(matches!(&got[2], Err((CtxHandle(3), BlockError::Corrupt(e))) if e.contains("mss")), "{got:?}");
    assert!(matches!(&got[3], Ok(ToEngine::Close { ctx: CtxHandle(4) })));
    assert!(!port.peer_gone());
}

#[test]
fn a_scribbled_ring_ends_that_session_only() {
    let d = UdpDriver::bind("127.0.0.1:0", EndpointConfig::default(), 1).unwrap();
    let mut e: Engine<_, ShmPort> = Engine::new(d, EngineConfig::default());
    let (bad_seg, bad_port, _bad_app) = pair();
    let (good_seg, good_port, mut good_app) = pair();
    e.add_session(1, bad_port);
    e.add_session(2, good_port);
    // The bad client: a corrupt block, then a head far past its ring.
    raw(&bad_seg, 42, b"?");
    let tn_head = link::layouts(CAP).0.head;
    // The good client: a listen, through the codec.
    post(&good_seg, &ToEngine::Listen { port: 5, cfg: ContextConfig::stream() });
    let posted = e.apply_posted();
    e.after_apply(posted).unwrap();
    bad_seg.u64_at(tn_head).store(u64::MAX / 2, std::sync::atomic::Ordering::SeqCst);
    let posted = e.apply_posted();
    e.after_apply(posted).unwrap();
    assert_eq!(e.gone_sessions(), vec![1], "the scribbling client's session ends");
    let bad = e.remove_session(1, true).unwrap();
    assert!(bad.broken.as_deref().is_some_and(|w| w.contains("head")), "{:?}", bad.broken);
    // The good one got its answer and still is served.
    let got = AppLink::try_recv(&mut good_app).expect("an answer");
    assert!(matches!(got, FromEngine::Listening { port: 5, result: Ok(()) }), "{got:?}");
    assert_eq!(e.counts(2).listening, 1);
    assert!(e.gone_sessions().is_empty());
}

/// The engine with one session (id 1) on a fresh segment.
fn engine_with(cfg: EngineConfig) -> (Engine<crate::batch::BatchSocket, ShmPort>, Arc<Segment>, ShmLink) {
    let d = UdpDriver::bind("127.0.0.1:0", EndpointConfig::default(), 1).unwrap();
    let mut e = Engine::new(d, cfg);
    let (seg, port, app) = pair();
    e.add_session(1, port);
    (e, seg, app)
}

/// Posts a block through the codec if TN has room; false if it is full.
fn try_post(tn: &mut Producer, b: &ToEngine) -> bool {
    let (kind, w, payload) = codec::encode_to_engine(b);
    let parts: Vec<&[u8]> = match payload {
        Some(d) => vec![&w.0, d],
        None => vec![&w.0],
    };
    tn.push(kind, &parts).unwrap()
}

/// A client that posts and never reads FN cannot grow the daemon's
/// backlog past `BACKLOG_PAUSE`: every bad block is answered with a refusal,
/// and once the refusals pile up the session is no longer read (its TN
/// fills and the client waits). Nothing is lost: once it reads, every
/// block is answered.
#[test]
fn a_client_that_never_reads_is_paused_not_buffered() {
    let (mut e, seg, mut app) = engine_with(EngineConfig::default());
    let mut tn = Producer::new(seg.clone(), link::layouts(CAP).0).unwrap();
    let mut posted = 0u64;
    let mut most = 0;
    let mut last_round = 0;
    for _ in 0..50 {
        let before = posted;
        while try_post(&mut tn, &ToEngine::Close { ctx: CtxHandle(1000 + posted) }) {
            posted += 1;
        }
        last_round = posted - before;
        let any = e.apply_posted();
        e.after_apply(any).unwrap();
        most = most.max(e.backlog_len(1));
    }
    assert_eq!(last_round, 0, "TN was still being read: no backpressure ({posted} blocks posted)");
    assert!(most <= 1024, "backlog reached {most} blocks");
    // Paused, its unread blocks must not keep the daemon awake: they are
    // not input, and parking sleeps for FN room only (a spin otherwise).
    assert!(e.session_paused(1));
    assert!(!e.has_input(), "a paused session's blocks count as input: the loop would spin");
    let (space, paused) = (e.session_backlogged(1), e.session_paused(1));
    let would_wake = e.ports().any(|(_, p)| p.park(space, paused));
    assert!(!would_wake, "parking a paused session returns at once: the loop would spin");
    for (_, p) in e.ports() {
        p.unpark();
    }
    assert!(most >= 1000, "the backlog never filled ({most}): the test tests nothing");
    // Now it reads: every block gets its refusal, in order.
    let mut answered = 0u64;
    for _ in 0..10_000 {
        while let Some(b) = AppLink::try_recv(&mut app) {
            match b {
                FromEngine::Failed { ctx, error: BlockError::UnknownContext } => {
                    assert_eq!(ctx, CtxHandle(1000 + answered));
                    answered += 1;
                }
                other => panic!("{other:?}"),
            }
        }
        if answered == posted {
            break;
        }
        let any = e.apply_posted();
        e.after_apply(any).unwrap();
    }
    assert_eq!(answered, posted);
}

/// A `Credit` block cannot raise a context's credit above the configured
/// read credit (an honest client returns only what it read), so a client
/// cannot make the engine deliver more than that into its backlog.
#[test]
fn credit_never_exceeds_the_read_credit() {
    let cfg = EngineConfig { read_credit: 10_000, ..EngineConfig::default() };
    let (mut e, seg, _app) = engine_with(cfg);
    let mut tn = Producer::new(seg.clone(), link::layouts(CAP).0).unwrap();
    let peer = "127.0.0.1:9".parse().unwrap();
    let h = CtxHandle(1);
    assert!(try_post(&mut tn, &ToEngine::Connect { ctx: h, peer, port: 7, cfg: ContextConfig::stream() }));
    assert!(try_post(&mut tn, &ToEngine::Credit { ctx: h, bytes: u64::MAX / 2 }));
    assert!(try_post(&mut tn, &ToEngine::Credit { ctx: h, bytes: u64::MAX / 2 }));
    let any = e.apply_posted();
    e.after_apply(any).unwrap();
    assert_eq!(e.credit(1, h), Some(10_000));
}

/// A client that posts writes past the write bound it was told (plus one
/// block) — the client library waits for acknowledgements instead — has
/// the write refused and the context aborted, rather than the daemon
/// holding its data without limit. Nothing acknowledges here (no XTP peer
/// at the address), so every byte posted would otherwise wait in memory.
#[test]
fn writes_past_the_bound_are_refused_and_the_context_aborted() {
    let cfg = EngineConfig { write_bound: 32 << 10, ..EngineConfig::default() };
    let (mut e, seg, mut app) = engine_with(cfg);
    let mut tn = Producer::new(seg.clone(), link::layouts(CAP).0).unwrap();
    let peer = "127.0.0.1:9".parse().unwrap();
    let h = CtxHandle(1);
    assert!(try_post(&mut tn, &ToEngine::Connect { ctx: h, peer, port: 7, cfg: ContextConfig::stream() }));
    let limit = (32 << 10) + (link::layouts(CAP).0.max_body() - codec::META_MAX) as u64;
    let piece = Bytes::from(vec![1u8; 8 << 10]);
    let mut written = 0u64;
    let mut refused = None;
    let mut closed = None;
    for _ in 0..20 {
        assert!(try_post(&mut tn, &ToEngine::Write { ctx: h, data: piece.clone(), eom: false, btag: None }));
        written += piece.len() as u64;
        let any = e.apply_posted();
        e.after_apply(any).unwrap();
        while let Some(b) = AppLink::try_recv(&mut app) {
            match b {
                FromEngine::Failed { ctx, error } => {
                    assert_eq!(ctx, h);
                    refused = Some((written, error));
                }
                FromEngine::Closed { ctx, reason } => closed = Some((ctx, reason)),
                _ => {}
            }
        }
        if refused.is_some() {
            break;
        }
    }
    let (at, error) = refused.expect("no write was refused");
    assert_eq!(error, BlockError::OverWriteBound(32 << 10));
    assert!(at > limit && at <= limit + (8 << 10), "refused at {at} bytes, limit {limit}");
    // And the context is aborted (its stream has a hole now).
    for _ in 0..100 {
        if closed.is_some() {
            break;
        }
        let any = e.apply_posted();
        e.after_apply(any).unwrap();
        while let Some(b) = AppLink::try_recv(&mut app) {
            if let FromEngine::Closed { ctx, reason } = b {
                closed = Some((ctx, reason));
            }
        }
    }
    let (ctx, reason) = closed.expect("the context was not closed after the refusal");
    assert_eq!(ctx, h);
    assert_ne!(reason, xtp_proto::CloseReason::Graceful, "{reason:?}");
}

/// The monitor on the daemon's shared rings: the client's push and the
/// daemon's pop of a block carry one journey (each side computes it from
/// the ring's name in the segment and its own count), in both directions,
/// and two sessions' rings are named apart. The engine-thread mode's rings
/// are checked end to end in `tests/trace.rs`.
#[cfg(feature = "trace")]
#[test]
fn ring_crossings_carry_one_journey_across_the_segment() {
    use xk_trace::{Point, Recording};
    xk_trace::start(xk_trace::Config::default());
    let (_s1, mut port, mut app) = pair();
    let (_s2, mut port2, mut app2) = pair();
    for i in 0..3u8 {
        assert!(app.try_send_write(CtxHandle(1), &[i; 100], true, None));
    }
    assert!(app2.try_send_write(CtxHandle(1), &[9; 10], true, None));
    for _ in 0..3 {
        assert!(matches!(port.try_recv(), Some(Ok(ToEngine::Write { .. }))));
    }
    assert!(port2.try_recv().is_some());
    port.try_send(FromEngine::Listening { port: 8, result: Ok(()) }, true).unwrap();
    assert!(app.try_recv().is_some());
    let rec: Recording = xk_trace::finish();
    // This test's thread only: the recorder is process-wide, and the other
    // daemon tests running beside it push and pop blocks of their own.
    let me = std::thread::current().name().unwrap_or_default().to_string();
    let all: Vec<_> = rec.merged().into_iter().filter(|(t, _)| t.name == me).map(|(_, e)| e).collect();
    let of = |p: Point, b: u32| {
        all.iter().filter(|e| e.point == p && e.b == b).map(|e| e.journey).collect::<Vec<_>>()
    };
    let (pushed, popped) = (of(Point::RingPush, 0), of(Point::RingPop, 0));
    assert_eq!(pushed.len(), 4);
    assert!(pushed.iter().all(|j| *j != 0));
    // The same blocks, in order per session; session 2's block is its own.
    let mut p = pushed.clone();
    let mut q = popped.clone();
    p.sort_unstable();
    q.sort_unstable();
    assert_eq!(p, q);
    assert_eq!(pushed.iter().collect::<std::collections::HashSet<_>>().len(), 4);
    assert_eq!(of(Point::RingPush, 1), of(Point::RingPop, 1), "FN: the daemon's push is the client's pop");
    assert_eq!(of(Point::RingPush, 1).len(), 1);
}
