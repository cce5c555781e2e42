//! Generational slab shared by the timer queues.
//!
//! Every timer lives in a slot of a `Vec`; its [`TimerId`] is the slot index plus
//! the slot's generation, so a stale id (already fired or cancelled, slot reused)
//! is recognised instead of cancelling somebody else's timer.

use crate::TimerId;

/// "No slot": the end of an intrusive list.
pub(crate) const NIL: u32 = u32::MAX;

struct Slot<E> {
    generation: u32,
    entry: Option<E>,
}

pub(crate) struct Slab<E> {
    slots: Vec<Slot<E>>,
    free: Vec<u32>,
    len: usize,
}

impl<E> Slab<E> {
    pub(crate) fn new() -> Self {
        Slab { slots: Vec::new(), free: Vec::new(), len: 0 }
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn insert(&mut self, entry: E) -> TimerId {
        self.len += 1;
        if let Some(index) = self.free.pop() {
            let slot = &mut self.slots[index as usize];
            slot.entry = Some(entry);
            TimerId { index, generation: slot.generation }
        } else {
            let index = u32::try_from(self.slots.len()).expect("more than 2^32 timers");
            assert!(index != NIL, "more than 2^32 - 1 timers");
            self.slots.push(Slot { generation: 0, entry: Some(entry) });
            TimerId { index, generation: 0 }
        }
    }

    /// Whether `id` names a live entry.
    pub(crate) fn contains(&self, id: TimerId) -> bool {
        self.slots.get(id.index as usize).is_some_and(|s| s.generation == id.generation && s.entry.is_some())
    }

    /// Removes the entry named by `id`, if it is still live.
    pub(crate) fn remove(&mut self, id: TimerId) -> Option<E> {
        let slot = self.slots.get_mut(id.index as usize)?;
        if slot.generation != id.generation {
            return None;
        }
        let entry = slot.entry.take()?;
        slot.generation = slot.generation.wrapping_add(1);
        self.free.push(id.index);
        self.len -= 1;
        Some(entry)
    }

    /// The id of the live entry at `index`.
    pub(crate) fn id_at(&self, index: u32) -> TimerId {
        TimerId { index, generation: self.slots[index as usize].generation }
    }

    /// The live entry at `index`; the caller knows it is live (intrusive lists
    /// only hold live entries).
    pub(crate) fn at(&self, index: u32) -> &E {
        self.slots[index as usize].entry.as_ref().expect("list holds a freed slot")
    }

    pub(crate) fn at_mut(&mut self, index: u32) -> &mut E {
        self.slots[index as usize].entry.as_mut().expect("list holds a freed slot")
    }
}
