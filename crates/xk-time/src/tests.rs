//! Differential tests: the three queues against a sorted-map reference.

use std::collections::BTreeMap;

use proptest::prelude::*;

use crate::{DeltaList, Expired, HeapQueue, Instant, TimerId, TimerQueue, TimingWheel};

/// The trivially correct queue: a map ordered by (deadline, sequence).
#[derive(Default)]
struct Reference {
    map: BTreeMap<(u64, u64), u32>,
    seq: u64,
}

impl Reference {
    fn schedule(&mut self, deadline: u64, value: u32) -> (u64, u64) {
        let key = (deadline, self.seq);
        self.seq += 1;
        self.map.insert(key, value);
        key
    }
    fn cancel(&mut self, key: (u64, u64)) -> Option<u32> {
        self.map.remove(&key)
    }
    fn next_deadline(&self) -> Option<u64> {
        self.map.keys().next().map(|k| k.0)
    }
    fn poll_expired(&mut self, now: u64) -> Option<(u64, u32)> {
        let (&key, _) = self.map.iter().next()?;
        if key.0 > now {
            return None;
        }
        let v = self.map.remove(&key)?;
        Some((key.0, v))
    }
}

#[derive(Clone, Debug)]
enum Op {
    /// Schedule at `now + delta` (or `now - delta` when `past`).
    Schedule { delta: u64, past: bool },
    /// Cancel the `pick`-th timer ever scheduled (may have fired already).
    Cancel { pick: usize },
    /// Move `now` forward and fire everything due.
    Advance { delta: u64 },
    /// Compare `next_deadline`.
    Peek,
}

fn delta() -> impl Strategy<Value = u64> {
    prop_oneof![0..4u64, 0..70u64, 0..5_000u64, 0..(1u64 << 20), 0..(1u64 << 40), any::<u64>(),]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (delta(), proptest::bool::weighted(0.1)).prop_map(|(delta, past)| Op::Schedule { delta, past }),
        2 => any::<usize>().prop_map(|pick| Op::Cancel { pick }),
        3 => delta().prop_map(|delta| Op::Advance { delta }),
        1 => Just(Op::Peek),
    ]
}

/// Runs `ops` on one queue and the reference, asserting identical behaviour.
fn check<Q: TimerQueue<u32>>(mut q: Q, start: u64, ops: &[Op]) -> Result<(), TestCaseError> {
    let mut reference = Reference::default();
    let mut issued: Vec<((u64, u64), TimerId)> = Vec::new();
    let mut now = start;
    for (i, op) in ops.iter().enumerate() {
        let value = i as u32;
        match *op {
            Op::Schedule { delta, past } => {
                let deadline = if past { now.saturating_sub(delta) } else { now.saturating_add(delta) };
                let key = reference.schedule(deadline, value);
                let id = q.schedule(Instant::from_nanos(deadline), value);
                issued.push((key, id));
            }
            Op::Cancel { pick } => {
                if issued.is_empty() {
                    continue;
                }
                let (key, id) = issued[pick % issued.len()];
                prop_assert_eq!(q.cancel(id), reference.cancel(key), "cancel at op {}", i);
            }
            Op::Advance { delta } => {
                now = now.saturating_add(delta);
                loop {
                    let got = q.poll_expired(Instant::from_nanos(now));
                    let want = reference.poll_expired(now);
                    let got = got.map(|Expired { deadline, value, .. }| (deadline.as_nanos(), value));
                    prop_assert_eq!(got, want, "expiry at op {} now {}", i, now);
                    if want.is_none() {
                        break;
                    }
                }
            }
            Op::Peek => {
                prop_assert_eq!(
                    q.next_deadline().map(Instant::as_nanos),
                    reference.next_deadline(),
                    "next_deadline at op {}",
                    i
                );
            }
        }
        prop_assert_eq!(q.len(), reference.map.len());
    }
    // Drain everything; the order must still agree.
    loop {
        let got = q.poll_expired(Instant::MAX).map(|e| (e.deadline.as_nanos(), e.value));
        let want = reference.poll_expired(u64::MAX);
        prop_assert_eq!(got, want, "final drain");
        if want.is_none() {
            break;
        }
    }
    prop_assert!(q.is_empty());
    Ok(())
}

fn start() -> impl Strategy<Value = u64> {
    prop_oneof![Just(0u64), any::<u64>(), (u64::MAX - (1 << 20))..=u64::MAX]
}

proptest! {
    // 10,000 random sequences, each run through all three queues.
    #![proptest_config(ProptestConfig { cases: 10_000, ..ProptestConfig::default() })]

    #[test]
    fn queues_agree_with_reference(start in start(), ops in prop::collection::vec(op(), 0..120)) {
        check(HeapQueue::new(), start, &ops)?;
        check(DeltaList::new(), start, &ops)?;
        check(TimingWheel::new(), start, &ops)?;
    }
}

fn all_queues() -> Vec<(&'static str, Box<dyn TimerQueue<u32>>)> {
    vec![
        ("heap", Box::new(HeapQueue::new())),
        ("delta", Box::new(DeltaList::new())),
        ("wheel", Box::new(TimingWheel::new())),
    ]
}

#[test]
fn equal_deadlines_fire_in_scheduling_order() {
    for (name, mut q) in all_queues() {
        for v in 0..10 {
            q.schedule(Instant::from_nanos(1_000_000), v);
        }
        let fired: Vec<u32> = std::iter::from_fn(|| q.poll_expired(Instant::MAX).map(|e| e.value)).collect();
        assert_eq!(fired, (0..10).collect::<Vec<_>>(), "{name}");
    }
}

#[test]
fn stale_ids_are_rejected_after_slot_reuse() {
    for (name, mut q) in all_queues() {
        let a = q.schedule(Instant::from_nanos(10), 1);
        assert_eq!(q.cancel(a), Some(1), "{name}");
        let b = q.schedule(Instant::from_nanos(20), 2); // reuses a's slot
        assert_eq!(q.cancel(a), None, "{name}: stale id cancelled a new timer");
        assert_eq!(q.next_deadline(), Some(Instant::from_nanos(20)), "{name}");
        assert_eq!(q.poll_expired(Instant::from_nanos(19)), None, "{name}");
        let e = q.poll_expired(Instant::from_nanos(20)).unwrap();
        assert_eq!((e.id, e.value), (b, 2), "{name}");
        assert_eq!(q.cancel(b), None, "{name}: fired timer cancelled");
    }
}

#[test]
fn heap_does_not_grow_with_cancelled_timers() {
    let mut q = HeapQueue::new();
    q.schedule(Instant::from_nanos(1), 0u32);
    for i in 0..100_000u64 {
        let id = q.schedule(Instant::from_nanos(10 + i), 1);
        q.cancel(id);
    }
    assert!(q.heap_items() < 200, "heap kept {} stale items", q.heap_items());
}

/// Issue #16: `next_deadline` leaves the wheel's cursor at the earliest
/// deadline, far ahead of `now`; timers re-armed behind it go to `ready`.
/// Cancelled ones must leave it at once, or a live front entry holds every
/// tombstone back and each sorted insert shifts them all (a ping-pong over
/// the wheel was 30x slower than over the heap).
#[test]
fn wheel_ready_list_does_not_keep_cancelled_timers() {
    let mut q = TimingWheel::new();
    q.schedule(Instant::from_nanos(10_000_000_000), 0u32); // a keep-alive, 10 s out
    assert_eq!(q.next_deadline(), Some(Instant::from_nanos(10_000_000_000)));
    q.schedule(Instant::from_nanos(1_000_000), 1); // a live timer at the front
    for i in 0..100_000u64 {
        let id = q.schedule(Instant::from_nanos(2_000_000 + i), 2);
        assert_eq!(q.cancel(id), Some(2));
    }
    assert!(q.ready_len() <= 2, "ready kept {} entries for 2 live timers", q.ready_len());
    assert_eq!(q.poll_expired(Instant::from_nanos(1_000_000)).map(|e| e.value), Some(1));
    assert_eq!(q.next_deadline(), Some(Instant::from_nanos(10_000_000_000)));
}
