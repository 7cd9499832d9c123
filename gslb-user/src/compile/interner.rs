//! Numbering of values in order of first appearance (signatures, outcomes, answers, view
//! vectors).

use ahash::AHashMap as HashMap;

/// Values numbered in order of first appearance: equal values get one number, which stays put
/// while the interner lives (outcomes, signatures and answers keep theirs between compilations).
#[derive(Debug)]
pub(super) struct Interner<T> {
    values: Vec<T>,
    ids: HashMap<T, u32>,
}

impl<T: Clone + Eq + std::hash::Hash> Interner<T> {
    pub(super) fn new() -> Self {
        Interner {
            values: Vec::new(),
            ids: HashMap::new(),
        }
    }

    /// An interner whose number 0 is `first`.
    pub(super) fn with(first: T) -> Self {
        let mut interner = Interner::new();
        interner.id(first);
        interner
    }

    pub(super) fn id(&mut self, value: T) -> u32 {
        if let Some(&id) = self.ids.get(&value) {
            return id;
        }
        let id = self.values.len() as u32;
        self.values.push(value.clone());
        self.ids.insert(value, id);
        id
    }

    pub(super) fn len(&self) -> usize {
        self.values.len()
    }

    /// The values, by number.
    pub(super) fn values(&self) -> &[T] {
        &self.values
    }
}

impl<T> std::ops::Index<u32> for Interner<T> {
    type Output = T;
    fn index(&self, id: u32) -> &T {
        &self.values[id as usize]
    }
}
