//! A generational arena: objects addressed by index + generation instead of
//! pointers and reference counts (x-kernel sessions were refcounted pointers).

/// Names one object in an [`Arena`]. Stale after the object is removed: the
/// slot's generation moves on, so a late packet or timer holding the old id
/// finds nothing instead of a stranger.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ArenaId {
    index: u32,
    generation: u32,
}

impl ArenaId {
    /// The slot index (stable while the object lives; reused after).
    pub fn index(self) -> u32 {
        self.index
    }

    /// The generation of the slot when the id was issued.
    pub fn generation(self) -> u32 {
        self.generation
    }

    /// Rebuilds an id from its parts (for wire keys that embed a slot index).
    pub const fn from_parts(index: u32, generation: u32) -> Self {
        ArenaId { index, generation }
    }
}

enum Slot<T> {
    Occupied { generation: u32, value: T },
    Vacant { generation: u32, next_free: u32 },
}

const NONE: u32 = u32::MAX;

/// Objects of one type with O(1) insert, lookup and removal by [`ArenaId`].
pub struct Arena<T> {
    slots: Vec<Slot<T>>,
    free_head: u32,
    len: usize,
}

impl<T> Default for Arena<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> Arena<T> {
    /// An empty arena.
    pub fn new() -> Self {
        Arena { slots: Vec::new(), free_head: NONE, len: 0 }
    }

    /// Number of live objects.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the arena holds no object.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Stores `value` and returns its id.
    pub fn insert(&mut self, value: T) -> ArenaId {
        self.len += 1;
        if self.free_head != NONE {
            let index = self.free_head;
            let slot = &mut self.slots[index as usize];
            let Slot::Vacant { generation, next_free } = *slot else {
                unreachable!("free list points at an occupied slot")
            };
            self.free_head = next_free;
            *slot = Slot::Occupied { generation, value };
            ArenaId { index, generation }
        } else {
            let index = u32::try_from(self.slots.len()).expect("arena holds 2^32 objects");
            assert!(index != NONE, "arena full");
            self.slots.push(Slot::Occupied { generation: 0, value });
            ArenaId { index, generation: 0 }
        }
    }

    /// The object named by `id`, if it is still alive.
    pub fn get(&self, id: ArenaId) -> Option<&T> {
        match self.slots.get(id.index as usize)? {
            Slot::Occupied { generation, value } if *generation == id.generation => Some(value),
            _ => None,
        }
    }

    /// Mutable access to the object named by `id`, if it is still alive.
    pub fn get_mut(&mut self, id: ArenaId) -> Option<&mut T> {
        match self.slots.get_mut(id.index as usize)? {
            Slot::Occupied { generation, value } if *generation == id.generation => Some(value),
            _ => None,
        }
    }

    /// The live object at slot `index`, whatever its generation.
    pub fn get_by_index(&self, index: u32) -> Option<(ArenaId, &T)> {
        match self.slots.get(index as usize)? {
            Slot::Occupied { generation, value } => Some((ArenaId { index, generation: *generation }, value)),
            Slot::Vacant { .. } => None,
        }
    }

    /// Removes and returns the object named by `id`.
    pub fn remove(&mut self, id: ArenaId) -> Option<T> {
        let slot = self.slots.get_mut(id.index as usize)?;
        match slot {
            Slot::Occupied { generation, .. } if *generation == id.generation => {
                let next = Slot::Vacant { generation: generation.wrapping_add(1), next_free: self.free_head };
                let Slot::Occupied { value, .. } = std::mem::replace(slot, next) else {
                    unreachable!("matched occupied")
                };
                self.free_head = id.index;
                self.len -= 1;
                Some(value)
            }
            _ => None,
        }
    }

    /// Live objects in slot order (deterministic).
    pub fn iter(&self) -> impl Iterator<Item = (ArenaId, &T)> {
        self.slots.iter().enumerate().filter_map(|(i, s)| match s {
            Slot::Occupied { generation, value } => {
                Some((ArenaId { index: i as u32, generation: *generation }, value))
            }
            Slot::Vacant { .. } => None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_go_stale_when_slots_are_reused() {
        let mut a = Arena::new();
        let x = a.insert("x");
        let y = a.insert("y");
        assert_eq!(a.remove(x), Some("x"));
        let z = a.insert("z");
        assert_eq!(z.index(), x.index());
        assert_eq!(a.get(x), None);
        assert_eq!(a.get(z), Some(&"z"));
        assert_eq!(a.remove(x), None);
        assert_eq!(a.iter().map(|(_, v)| *v).collect::<Vec<_>>(), vec!["z", "y"]);
        assert_eq!(a.len(), 2);
        assert_eq!(a.get_by_index(y.index()).map(|(id, _)| id), Some(y));
    }
}
