//! Binary-heap timer queue with lazy cancellation.
//!
//! Cancelling only frees the timer's slab slot; its heap item stays behind and is
//! recognised as stale (generation mismatch) when it reaches the top. Two rules
//! keep that cheap: the top of the heap is never stale (so `next_deadline` is
//! exact), and when stale items outnumber live ones the heap is rebuilt, so memory
//! stays proportional to the number of pending timers.

use core::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::slab::Slab;
use crate::{Expired, Instant, TimerId, TimerQueue};

/// Heap item: ordered by deadline, then scheduling sequence number.
#[derive(PartialEq, Eq, PartialOrd, Ord)]
struct Item {
    deadline: Instant,
    seq: u64,
    index: u32,
    generation: u32,
}

impl Item {
    fn id(&self) -> TimerId {
        TimerId { index: self.index, generation: self.generation }
    }
}

/// Timer queue on a binary heap (`std::collections::BinaryHeap`).
pub struct HeapQueue<T> {
    heap: BinaryHeap<Reverse<Item>>,
    slab: Slab<T>,
    next_seq: u64,
}

impl<T> Default for HeapQueue<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> HeapQueue<T> {
    /// An empty queue.
    pub fn new() -> Self {
        HeapQueue { heap: BinaryHeap::new(), slab: Slab::new(), next_seq: 0 }
    }

    /// Items in the heap, stale ones included (for tests of the rebuild rule).
    #[cfg(test)]
    pub(crate) fn heap_items(&self) -> usize {
        self.heap.len()
    }

    /// Pops stale items off the top so the top is always a live timer.
    fn drop_stale_top(&mut self) {
        while let Some(Reverse(top)) = self.heap.peek() {
            if self.slab.contains(top.id()) {
                break;
            }
            self.heap.pop();
        }
    }
}

impl<T> TimerQueue<T> for HeapQueue<T> {
    fn schedule(&mut self, deadline: Instant, value: T) -> TimerId {
        let id = self.slab.insert(value);
        let seq = self.next_seq;
        self.next_seq += 1;
        self.heap.push(Reverse(Item { deadline, seq, index: id.index, generation: id.generation }));
        id
    }

    fn cancel(&mut self, id: TimerId) -> Option<T> {
        let value = self.slab.remove(id)?;
        self.drop_stale_top();
        // Rebuild when more than half the heap is dead weight.
        if self.heap.len() > 64 && self.heap.len() > 2 * self.slab.len() {
            let slab = &self.slab;
            self.heap.retain(|Reverse(item)| slab.contains(item.id()));
        }
        Some(value)
    }

    fn next_deadline(&mut self) -> Option<Instant> {
        self.heap.peek().map(|Reverse(top)| top.deadline)
    }

    fn poll_expired(&mut self, now: Instant) -> Option<Expired<T>> {
        let Reverse(top) = self.heap.peek()?;
        if top.deadline > now {
            return None;
        }
        let Reverse(top) = self.heap.pop()?;
        let id = top.id();
        let value = self.slab.remove(id).expect("heap top is live");
        self.drop_stale_top();
        Some(Expired { id, deadline: top.deadline, value })
    }

    fn len(&self) -> usize {
        self.slab.len()
    }
}
