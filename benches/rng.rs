//! Shared by the benches that make their own data (each includes it with `mod rng;`); not a
//! bench itself.

/// xorshift64: reproducible pseudo-random numbers without a dependency.
pub(crate) struct Rng(pub u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}
