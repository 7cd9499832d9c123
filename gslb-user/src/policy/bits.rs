//! Bit sets over a domain's member positions.

/// A set of service positions within one domain; inline up to 128 positions, so a decision
/// over a domain of that size allocates only its result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Bits {
    small: [u64; 2],
    large: Vec<u64>,
}

impl Bits {
    pub(super) fn new(len: usize) -> Bits {
        let large = if len <= 128 {
            Vec::new()
        } else {
            vec![0; len.div_ceil(64)]
        };
        Bits {
            small: [0; 2],
            large,
        }
    }

    pub(super) fn words(&self) -> &[u64] {
        if self.large.is_empty() {
            &self.small
        } else {
            &self.large
        }
    }

    pub(super) fn words_mut(&mut self) -> &mut [u64] {
        if self.large.is_empty() {
            &mut self.small
        } else {
            &mut self.large
        }
    }

    pub(super) fn set(&mut self, i: usize) {
        self.words_mut()[i / 64] |= 1 << (i % 64);
    }

    pub(super) fn clear(&mut self) {
        self.words_mut().fill(0);
    }

    pub(super) fn is_empty(&self) -> bool {
        self.words().iter().all(|&w| w == 0)
    }

    pub(super) fn intersects(&self, other: &Bits) -> bool {
        self.words()
            .iter()
            .zip(other.words())
            .any(|(a, b)| a & b != 0)
    }

    pub(super) fn intersect(&mut self, other: &Bits) {
        for (a, b) in self.words_mut().iter_mut().zip(other.words()) {
            *a &= b;
        }
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        self.words().iter().enumerate().flat_map(|(i, &w)| {
            let mut w = w;
            std::iter::from_fn(move || {
                (w != 0).then(|| {
                    let bit = w.trailing_zeros() as usize;
                    w &= w - 1;
                    i * 64 + bit
                })
            })
        })
    }
}
