//! The x-kernel / PIX "delta list" event manager.
//!
//! Timers sit in one doubly linked list sorted by deadline. Each node stores the
//! gap (`delta`) between its deadline and its predecessor's; the head's delta is
//! its absolute deadline. Expiry only ever looks at the head, and cancel adds the
//! node's delta to its successor, both O(1). Scheduling walks the list from the
//! head, O(n) — the price the original design paid, measured by benchmark E9.
//! One addition to the classic design: a timer at or after the current tail (the
//! common re-arm pattern) is appended in O(1).

use crate::slab::{NIL, Slab};
use crate::{Expired, Instant, TimerId, TimerQueue};

struct Node<T> {
    value: T,
    delta: u64,
    prev: u32,
    next: u32,
}

/// Timer queue on a delta list.
pub struct DeltaList<T> {
    slab: Slab<Node<T>>,
    head: u32,
    tail: u32,
    /// Absolute deadline of the tail (meaningless when empty).
    tail_deadline: u64,
}

impl<T> Default for DeltaList<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> DeltaList<T> {
    /// An empty list.
    pub fn new() -> Self {
        DeltaList { slab: Slab::new(), head: NIL, tail: NIL, tail_deadline: 0 }
    }

    fn link_after(&mut self, prev: u32, index: u32) {
        let next = if prev == NIL { self.head } else { self.slab.at(prev).next };
        {
            let node = self.slab.at_mut(index);
            node.prev = prev;
            node.next = next;
        }
        if prev == NIL {
            self.head = index;
        } else {
            self.slab.at_mut(prev).next = index;
        }
        if next == NIL {
            self.tail = index;
        } else {
            self.slab.at_mut(next).prev = index;
        }
    }

    /// Unlinks `index`, handing its delta on to its successor.
    fn unlink(&mut self, index: u32) {
        let (prev, next, delta) = {
            let n = self.slab.at(index);
            (n.prev, n.next, n.delta)
        };
        if prev == NIL {
            self.head = next;
        } else {
            self.slab.at_mut(prev).next = next;
        }
        if next == NIL {
            self.tail = prev;
            self.tail_deadline -= delta;
        } else {
            let n = self.slab.at_mut(next);
            n.prev = prev;
            n.delta += delta;
        }
    }
}

impl<T> TimerQueue<T> for DeltaList<T> {
    fn schedule(&mut self, deadline: Instant, value: T) -> TimerId {
        let d = deadline.as_nanos();
        let id = self.slab.insert(Node { value, delta: 0, prev: NIL, next: NIL });
        if self.tail == NIL || d >= self.tail_deadline {
            // Append: at or after every pending deadline (ties go last).
            let base = if self.tail == NIL { 0 } else { self.tail_deadline };
            self.slab.at_mut(id.index).delta = d - base;
            self.link_after(self.tail, id.index);
            self.tail_deadline = d;
            return id;
        }
        // Walk from the head past every node due at or before `d`.
        let mut acc = 0u64;
        let mut prev = NIL;
        let mut cur = self.head;
        while cur != NIL {
            let n = self.slab.at(cur);
            if acc + n.delta > d {
                break;
            }
            acc += n.delta;
            prev = cur;
            cur = n.next;
        }
        // `cur` is not NIL: d < tail_deadline, so the walk stopped early.
        let delta = d - acc;
        self.slab.at_mut(id.index).delta = delta;
        self.slab.at_mut(cur).delta -= delta;
        self.link_after(prev, id.index);
        id
    }

    fn cancel(&mut self, id: TimerId) -> Option<T> {
        if !self.slab.contains(id) {
            return None;
        }
        self.unlink(id.index);
        self.slab.remove(id).map(|n| n.value)
    }

    fn next_deadline(&mut self) -> Option<Instant> {
        (self.head != NIL).then(|| Instant::from_nanos(self.slab.at(self.head).delta))
    }

    fn poll_expired(&mut self, now: Instant) -> Option<Expired<T>> {
        if self.head == NIL {
            return None;
        }
        let head = self.head;
        let deadline = self.slab.at(head).delta;
        if deadline > now.as_nanos() {
            return None;
        }
        self.unlink(head);
        let id = self.slab.id_at(head);
        let node = self.slab.remove(id).expect("head is live");
        Some(Expired { id, deadline: Instant::from_nanos(deadline), value: node.value })
    }

    fn len(&self) -> usize {
        self.slab.len()
    }
}
