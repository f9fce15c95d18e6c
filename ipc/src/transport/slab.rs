//! A slab of connections indexed by a small integer, with a generation per slot so that a
//! completion that names a closed-and-reused slot is recognised as stale.

pub(crate) struct Slab<T> {
    slots: Vec<Option<T>>,
    gens: Vec<u16>,
    free: Vec<u32>,
    len: usize,
}

impl<T> Slab<T> {
    pub(crate) fn new() -> Self {
        Self {
            slots: Vec::new(),
            gens: Vec::new(),
            free: Vec::new(),
            len: 0,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Inserts and returns (index, generation).
    pub(crate) fn insert(&mut self, make: impl FnOnce(u16) -> T) -> (u32, u16) {
        let idx = match self.free.pop() {
            Some(i) => i,
            None => {
                self.slots.push(None);
                self.gens.push(0);
                (self.slots.len() - 1) as u32
            }
        };
        let gen = self.gens[idx as usize];
        self.slots[idx as usize] = Some(make(gen));
        self.len += 1;
        (idx, gen)
    }

    /// The entry at `idx` if its generation is `gen`.
    pub(crate) fn get_mut(&mut self, idx: u32, gen: u16) -> Option<&mut T> {
        let i = idx as usize;
        if i < self.slots.len() && self.gens[i] == gen {
            self.slots[i].as_mut()
        } else {
            None
        }
    }

    pub(crate) fn get_mut_any(&mut self, idx: u32) -> Option<&mut T> {
        self.slots.get_mut(idx as usize).and_then(|s| s.as_mut())
    }

    /// Removes the entry; the slot's generation moves on.
    pub(crate) fn remove(&mut self, idx: u32) -> Option<T> {
        let i = idx as usize;
        let t = self.slots.get_mut(i)?.take()?;
        self.gens[i] = self.gens[i].wrapping_add(1);
        self.free.push(idx);
        self.len -= 1;
        Some(t)
    }

    /// Slots ever made (occupied or free): indexes below this are valid for
    /// [`Slab::get_mut_any`]. Removing entries does not lower it.
    pub(crate) fn slot_count(&self) -> u32 {
        self.slots.len() as u32
    }

    /// Indexes of occupied slots.
    pub(crate) fn indexes(&self) -> Vec<u32> {
        self.slots
            .iter()
            .enumerate()
            .filter(|(_, s)| s.is_some())
            .map(|(i, _)| i as u32)
            .collect()
    }
}
