//! Hierarchical timing wheel at nanosecond resolution.
//!
//! Design note. The wheel keeps a cursor, `elapsed`, and files every pending timer
//! with a deadline after it by the highest base-64 digit in which the deadline
//! differs from `elapsed`: a timer differing only in the lowest 6 bits goes to
//! level 0 (one slot per nanosecond), one differing in bits 6..12 to level 1
//! (slots of 64 ns), and so on; 11 levels cover the whole `u64`. Invariant: every
//! timer at level `L` has a deadline whose digit `L` is greater than the cursor's,
//! with equal higher digits. Hence the earliest slot is the lowest set bit of the
//! lowest non-empty level, found with two bit scans.
//!
//! Advancing moves the cursor to the start of that slot and refiles its timers one
//! or more levels down; at level 0 a slot holds exactly one deadline and its
//! timers move to the `ready` queue. Every timer is refiled at most 10 times, so
//! expiry is O(1) amortised. Slots are intrusive doubly linked lists through the
//! slab, so cancel is O(1). Each slot list is kept in scheduling order and
//! refiling preserves it, which gives FIFO order among equal deadlines.
//!
//! `ready` holds timers due at or before the cursor, sorted by (deadline,
//! sequence). A timer scheduled at or before the cursor goes straight there.
//! Cancelling a ready timer removes its entry at once (found by binary search
//! on its unique (deadline, sequence)).
//!
//! Why not tombstones (issue #16): `next_deadline` must be exact, so it
//! cascades the earliest slot down to level 0 and leaves the cursor at that
//! deadline, often far ahead of the caller's `now` (an XTP context's
//! keep-alive lies seconds ahead). From then on every timer due before it
//! lands in `ready`. An engine that re-arms a timer per packet then left one
//! tombstone per packet behind a live front entry that would not fire for
//! seconds, and each sorted insert shifted all of them: a ping-pong went from
//! 1.7 µs to 51 µs per round trip (`cargo bench -p xtp-proto --bench engine
//! -- pingpong-timers`, docs/PERF.md). `ready` now holds live timers only.

use std::collections::VecDeque;

use crate::slab::{NIL, Slab};
use crate::{Expired, Instant, TimerId, TimerQueue};

const BITS: u32 = 6;
const SLOTS: usize = 1 << BITS;
const LEVELS: usize = 11; // 11 * 6 = 66 >= 64 bits

#[derive(Clone, Copy)]
enum Place {
    Slot { level: u8, slot: u8 },
    Ready,
}

struct Node<T> {
    value: T,
    deadline: u64,
    seq: u64,
    prev: u32,
    next: u32,
    place: Place,
}

struct Level {
    /// Bit `s` set iff slot `s` is non-empty.
    occupied: u64,
    head: [u32; SLOTS],
    tail: [u32; SLOTS],
}

impl Level {
    fn new() -> Self {
        Level { occupied: 0, head: [NIL; SLOTS], tail: [NIL; SLOTS] }
    }
}

#[derive(Clone, Copy)]
struct ReadyItem {
    deadline: u64,
    seq: u64,
    id: TimerId,
}

/// Timer queue on a hierarchical timing wheel.
pub struct TimingWheel<T> {
    slab: Slab<Node<T>>,
    levels: Vec<Level>,
    ready: VecDeque<ReadyItem>,
    elapsed: u64,
    next_seq: u64,
}

impl<T> Default for TimingWheel<T> {
    fn default() -> Self {
        Self::new()
    }
}

/// The level a deadline after `elapsed` belongs to.
fn level_for(elapsed: u64, deadline: u64) -> usize {
    debug_assert!(deadline > elapsed);
    let highest_diff = 63 - (elapsed ^ deadline).leading_zeros();
    (highest_diff / BITS) as usize
}

fn slot_for(deadline: u64, level: usize) -> usize {
    ((deadline >> (BITS as usize * level)) & (SLOTS as u64 - 1)) as usize
}

/// Start time of `slot` at `level`, within the block of the cursor.
fn slot_start(elapsed: u64, level: usize, slot: usize) -> u64 {
    let shift = BITS as usize * level;
    let upper = shift + BITS as usize;
    let base = if upper >= 64 { 0 } else { (elapsed >> upper) << upper };
    base | ((slot as u64) << shift)
}

impl<T> TimingWheel<T> {
    /// An empty wheel with its cursor at time zero.
    pub fn new() -> Self {
        TimingWheel {
            slab: Slab::new(),
            levels: (0..LEVELS).map(|_| Level::new()).collect(),
            ready: VecDeque::new(),
            elapsed: 0,
            next_seq: 0,
        }
    }

    fn link_tail(&mut self, index: u32, level: usize, slot: usize) {
        let lv = &mut self.levels[level];
        let old_tail = lv.tail[slot];
        lv.tail[slot] = index;
        if old_tail == NIL {
            lv.head[slot] = index;
            lv.occupied |= 1 << slot;
        }
        let node = self.slab.at_mut(index);
        node.prev = old_tail;
        node.next = NIL;
        node.place = Place::Slot { level: level as u8, slot: slot as u8 };
        if old_tail != NIL {
            self.slab.at_mut(old_tail).next = index;
        }
    }

    fn unlink(&mut self, index: u32, level: usize, slot: usize) {
        let (prev, next) = {
            let n = self.slab.at(index);
            (n.prev, n.next)
        };
        let lv = &mut self.levels[level];
        if prev == NIL {
            lv.head[slot] = next;
        } else {
            self.slab.at_mut(prev).next = next;
        }
        let lv = &mut self.levels[level];
        if next == NIL {
            lv.tail[slot] = prev;
        } else {
            self.slab.at_mut(next).prev = prev;
        }
        let lv = &mut self.levels[level];
        if lv.head[slot] == NIL {
            lv.occupied &= !(1 << slot);
        }
    }

    /// Files a live node: into `ready` if due at or before the cursor, else into
    /// its wheel slot. Callers that file several due nodes do so in order.
    fn file(&mut self, index: u32) {
        let (deadline, seq) = {
            let n = self.slab.at(index);
            (n.deadline, n.seq)
        };
        if deadline <= self.elapsed {
            let id = self.slab.id_at(index);
            self.slab.at_mut(index).place = Place::Ready;
            let item = ReadyItem { deadline, seq, id };
            // Sorted insert; the usual case appends.
            let pos = self.ready.partition_point(|r| (r.deadline, r.seq) <= (deadline, seq));
            self.ready.insert(pos, item);
        } else {
            let level = level_for(self.elapsed, deadline);
            self.link_tail(index, level, slot_for(deadline, level));
        }
    }

    /// The earliest non-empty slot, as (level, slot, start time).
    fn earliest_slot(&self) -> Option<(usize, usize, u64)> {
        let level = self.levels.iter().position(|l| l.occupied != 0)?;
        let slot = self.levels[level].occupied.trailing_zeros() as usize;
        Some((level, slot, slot_start(self.elapsed, level, slot)))
    }

    /// Moves the cursor to the start of a slot and refiles its timers.
    fn process_slot(&mut self, level: usize, slot: usize, start: u64) {
        debug_assert!(start >= self.elapsed);
        self.elapsed = start;
        let lv = &mut self.levels[level];
        let mut cur = lv.head[slot];
        lv.head[slot] = NIL;
        lv.tail[slot] = NIL;
        lv.occupied &= !(1 << slot);
        while cur != NIL {
            let next = self.slab.at(cur).next;
            self.file(cur);
            cur = next;
        }
    }

    /// Entries in `ready` (tests: it must hold live timers only).
    #[cfg(test)]
    pub(crate) fn ready_len(&self) -> usize {
        self.ready.len()
    }
}

impl<T> TimerQueue<T> for TimingWheel<T> {
    fn schedule(&mut self, deadline: Instant, value: T) -> TimerId {
        let seq = self.next_seq;
        self.next_seq += 1;
        let id = self.slab.insert(Node {
            value,
            deadline: deadline.as_nanos(),
            seq,
            prev: NIL,
            next: NIL,
            place: Place::Ready,
        });
        self.file(id.index);
        id
    }

    fn cancel(&mut self, id: TimerId) -> Option<T> {
        if !self.slab.contains(id) {
            return None;
        }
        match self.slab.at(id.index).place {
            Place::Slot { level, slot } => self.unlink(id.index, level as usize, slot as usize),
            Place::Ready => {
                let (deadline, seq) = {
                    let n = self.slab.at(id.index);
                    (n.deadline, n.seq)
                };
                let pos = self.ready.partition_point(|r| (r.deadline, r.seq) < (deadline, seq));
                if self.ready.get(pos).is_some_and(|r| r.id == id) {
                    self.ready.remove(pos);
                }
            }
        }
        self.slab.remove(id).map(|n| n.value)
    }

    fn next_deadline(&mut self) -> Option<Instant> {
        loop {
            if let Some(front) = self.ready.front() {
                return Some(Instant::from_nanos(front.deadline));
            }
            let (level, slot, start) = self.earliest_slot()?;
            if level == 0 {
                return Some(Instant::from_nanos(start));
            }
            // A higher-level slot holds several deadlines; refile it (the cursor
            // moves to the slot start, which is <= every pending deadline).
            self.process_slot(level, slot, start);
        }
    }

    fn poll_expired(&mut self, now: Instant) -> Option<Expired<T>> {
        let now = now.as_nanos();
        loop {
            if let Some(front) = self.ready.front().copied() {
                if front.deadline > now {
                    return None; // everything in the wheel is later still
                }
                self.ready.pop_front();
                let node = self.slab.remove(front.id).expect("ready front is live");
                return Some(Expired {
                    id: front.id,
                    deadline: Instant::from_nanos(front.deadline),
                    value: node.value,
                });
            }
            let Some((level, slot, start)) = self.earliest_slot() else {
                self.elapsed = self.elapsed.max(now);
                return None;
            };
            if start > now {
                // Safe to move the cursor up to `now`: it stays below every
                // occupied slot and keeps their higher digits.
                self.elapsed = self.elapsed.max(now);
                return None;
            }
            self.process_slot(level, slot, start);
        }
    }

    fn len(&self) -> usize {
        self.slab.len()
    }
}
