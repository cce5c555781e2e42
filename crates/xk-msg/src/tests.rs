//! Model tests: both message forms against a plain `Vec<u8>`, plus the copy
//! accounting each form promises.

use bytes::{Bytes, BytesMut};
use proptest::prelude::*;

use crate::{Contig, Limit, Msg, Rope, TooShort, copy_stats, reset_copy_stats};

#[derive(Clone, Debug)]
enum Op {
    Push(Vec<u8>),
    Pop(usize),
    Peek(usize),
    Extend(Vec<u8>),
    Truncate(usize),
    /// Split off at `at`, keep the front or the tail.
    SplitOff {
        at: usize,
        keep_front: bool,
    },
    /// Split at `at` and join the two halves back.
    SplitRejoin(usize),
    /// Append a separately built message.
    JoinNew(Vec<u8>),
    /// Replace by a slice of itself.
    Slice(usize, usize),
}

fn op() -> impl Strategy<Value = Op> {
    let bytes = prop::collection::vec(any::<u8>(), 0..40);
    prop_oneof![
        bytes.clone().prop_map(Op::Push),
        (0usize..60).prop_map(Op::Pop),
        (0usize..60).prop_map(Op::Peek),
        bytes.clone().prop_map(Op::Extend),
        (0usize..200).prop_map(Op::Truncate),
        (0usize..200, any::<bool>()).prop_map(|(at, keep_front)| Op::SplitOff { at, keep_front }),
        (0usize..200).prop_map(Op::SplitRejoin),
        bytes.prop_map(Op::JoinNew),
        (0usize..200, 0usize..200).prop_map(|(a, b)| Op::Slice(a.min(b), a.max(b))),
    ]
}

fn apply<M: Msg>(m: &mut M, model: &mut Vec<u8>, op: &Op) -> Result<(), TestCaseError> {
    let len = model.len();
    match op {
        Op::Push(h) => {
            m.push(h.len()).copy_from_slice(h);
            model.splice(0..0, h.iter().copied());
        }
        Op::Pop(n) => {
            let got = m.pop(*n).map(<[u8]>::to_vec);
            if *n <= len {
                prop_assert_eq!(got.unwrap(), model.drain(..*n).collect::<Vec<_>>());
            } else {
                prop_assert_eq!(got, Err(TooShort { needed: *n, available: len }));
            }
        }
        Op::Peek(n) => {
            let got = m.peek(*n).map(<[u8]>::to_vec);
            if *n <= len {
                prop_assert_eq!(got.unwrap(), model[..*n].to_vec());
            } else {
                prop_assert!(got.is_err());
            }
        }
        Op::Extend(d) => {
            m.extend_from_slice(d);
            model.extend_from_slice(d);
        }
        Op::Truncate(n) => {
            m.truncate(*n);
            model.truncate(*n);
        }
        Op::SplitOff { at, keep_front } => {
            let r = m.split_off(*at);
            if *at > len {
                prop_assert!(r.is_err());
            } else {
                let tail = r.unwrap();
                let model_tail = model.split_off(*at);
                prop_assert_eq!(tail.to_vec(), model_tail.clone());
                if !keep_front {
                    *m = tail;
                    *model = model_tail;
                }
            }
        }
        Op::SplitRejoin(at) => {
            if *at <= len {
                let front = m.split_to(*at).unwrap();
                prop_assert_eq!(front.to_vec(), model[..*at].to_vec());
                let rest = std::mem::replace(m, front);
                m.join(rest);
            } else {
                prop_assert!(m.split_to(*at).is_err());
            }
        }
        Op::JoinNew(d) => {
            m.join(M::from_payload(Bytes::from(d.clone()), 16));
            model.extend_from_slice(d);
        }
        Op::Slice(a, b) => {
            if *b <= len {
                let s = m.slice(*a..*b).unwrap();
                *m = s;
                *model = model[*a..*b].to_vec();
            } else {
                prop_assert!(m.slice(*a..*b).is_err());
            }
        }
    }
    prop_assert_eq!(m.len(), model.len());
    prop_assert_eq!(m.to_vec(), model.clone());
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2_000, ..ProptestConfig::default() })]

    #[test]
    fn both_forms_behave_like_a_vec(
        init in prop::collection::vec(any::<u8>(), 0..100),
        received in any::<bool>(),
        ops in prop::collection::vec(op(), 0..40),
    ) {
        fn run<M: Msg>(init: &[u8], received: bool, ops: &[Op]) -> Result<(), TestCaseError> {
            let mut m = if received {
                M::from_received(BytesMut::from(init))
            } else {
                M::from_payload(Bytes::copy_from_slice(init), 32)
            };
            let mut model = init.to_vec();
            for op in ops {
                apply(&mut m, &mut model, op)?;
            }
            prop_assert_eq!(m.into_bytes().to_vec(), model);
            Ok(())
        }
        run::<Contig>(&init, received, &ops)?;
        run::<Rope>(&init, received, &ops)?;
    }
}

/// Pushes three headers, pops them again: the stack round trip.
fn header_round_trip<M: Msg>(payload: Bytes) -> M {
    let mut m = M::from_payload(payload, 64);
    m.push(8).copy_from_slice(b"ETHERNET");
    m.push(4).copy_from_slice(b"IPV4");
    m.push(2).copy_from_slice(b"TP");
    assert_eq!(m.pop(2).unwrap(), b"TP");
    assert_eq!(m.pop(4).unwrap(), b"IPV4");
    assert_eq!(m.pop(8).unwrap(), b"ETHERNET");
    m
}

#[test]
fn rope_never_copies_payload() {
    let payload = Bytes::from(vec![7u8; 10_000]);
    reset_copy_stats();
    let mut m: Rope = header_round_trip(payload.clone());
    let mut tail = m.split_off(4_000).unwrap();
    let s = tail.slice(10..20).unwrap();
    m.join(tail);
    m.join(s);
    assert_eq!(m.len(), 10_010);
    let stats = copy_stats();
    assert_eq!((stats.copies, stats.bytes, stats.pullups), (0, 0, 0), "{stats:?}");
}

#[test]
fn contig_copies_payload_once_to_build_and_not_for_headers() {
    let payload = Bytes::from(vec![7u8; 10_000]);
    reset_copy_stats();
    let m: Contig = header_round_trip(payload);
    assert_eq!((copy_stats().copies, copy_stats().bytes), (1, 10_000));
    assert_eq!(m.len(), 10_000);
}

#[test]
fn contig_split_and_rejoin_is_zero_copy_but_foreign_join_copies() {
    let mut m = Contig::from_received(BytesMut::from(&[1u8; 1000][..]));
    reset_copy_stats();
    let tail = m.split_off(300).unwrap();
    m.join(tail);
    assert_eq!(copy_stats().copies, 0);
    m.join(Contig::from_received(BytesMut::from(&[2u8; 50][..])));
    assert_eq!((copy_stats().copies, copy_stats().bytes), (1, 50));
    assert_eq!(m.len(), 1050);
}

#[test]
fn rope_header_straddling_chunks_is_pulled_up_and_counted() {
    let mut m = Rope::from_payload(Bytes::from_static(b"abc"), 0);
    m.join(Rope::from_payload(Bytes::from_static(b"defg"), 0));
    reset_copy_stats();
    assert_eq!(m.pop(5).unwrap(), b"abcde");
    assert_eq!((copy_stats().pullups, copy_stats().pullup_bytes, copy_stats().copies), (1, 5, 0));
    assert_eq!(m.to_vec(), b"fg");
}

#[test]
fn received_payload_reaches_the_user_without_copy() {
    let mut buf = BytesMut::new();
    buf.extend_from_slice(b"HDR:payload");
    let base = buf.as_ptr() as usize;
    for into in [
        |b: BytesMut| {
            let mut m = Rope::from_received(b);
            m.pop(4).unwrap();
            m.into_bytes()
        },
        |b: BytesMut| {
            let mut m = Contig::from_received(b);
            m.pop(4).unwrap();
            m.into_bytes()
        },
    ] {
        reset_copy_stats();
        let out = into(buf.clone());
        assert_eq!(&out[..], b"payload");
        assert_eq!(copy_stats().copies, 0);
        let _ = base;
    }
    // Same allocation: the payload Bytes points into the received buffer.
    let mut m = Rope::from_received(buf);
    m.pop(4).unwrap();
    assert_eq!(m.into_bytes().as_ptr() as usize, base + 4);
}

/// `from_shared` wraps a received slice without a copy in both forms, and
/// `into_bytes` gives the same allocation back; a header pushed onto a shared
/// `Contig` copies (once), a `Rope` does not.
#[test]
fn shared_payloads_are_not_copied() {
    fn check<M: Msg>(name: &str, push_copies: u64) {
        let payload = Bytes::from(vec![9u8; 1000]).slice(10..);
        reset_copy_stats();
        let m = M::from_shared(payload.clone());
        assert_eq!(m.len(), 990, "{name}");
        assert_eq!(m.into_bytes().as_ptr(), payload.as_ptr(), "{name}: same bytes back");
        assert_eq!(copy_stats().copies, 0, "{name}");
        let mut m = M::from_shared(payload.clone());
        m.push(4).copy_from_slice(b"hdr!");
        assert_eq!(&m.to_vec()[..4], b"hdr!", "{name}");
        assert_eq!(copy_stats().copies, push_copies, "{name}");
    }
    check::<Rope>("rope", 0);
    check::<Contig>("contig", 1);
}

/// `Limit<L>` copies a whole record of `max(L, len)` bytes at every
/// crossing (made from a payload, a shared chunk or a received buffer;
/// turned into `Bytes`) and keeps the message's bytes intact; inside a
/// protocol it is a `Contig` (headers in place, no copy).
#[test]
fn limit_copies_the_whole_record_at_every_crossing() {
    reset_copy_stats();
    let mut m = Limit::<1000>::from_payload(Bytes::from_static(b"0123456789"), 32);
    assert_eq!((copy_stats().copies, copy_stats().bytes), (1, 1000));
    m.push(3).copy_from_slice(b"hdr");
    assert_eq!(m.pop(3).unwrap(), b"hdr");
    assert_eq!(copy_stats().copies, 1, "a header in the headroom is not a crossing");
    let b = m.into_bytes();
    assert_eq!(&b[..], b"0123456789");
    assert_eq!((copy_stats().copies, copy_stats().bytes), (2, 2000));
    let m = Limit::<1000>::from_shared(b);
    let mut r = BytesMut::new();
    r.extend_from_slice(&m.to_vec());
    let m = Limit::<1000>::from_received(r);
    assert_eq!(m.to_vec(), b"0123456789");
    assert_eq!((copy_stats().copies, copy_stats().bytes), (4, 4000));
    // A message longer than the limit is copied at its own length.
    reset_copy_stats();
    let big = Limit::<10>::from_shared(Bytes::from(vec![7u8; 50]));
    assert_eq!((copy_stats().copies, copy_stats().bytes), (1, 50));
    assert_eq!(big.to_vec(), vec![7u8; 50]);
}
