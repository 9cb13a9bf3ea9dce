//! Reproducible pseudo-random data.

/// SplitMix64: a fixed seed gives the same sequence on every run, without a
/// dependency.
pub struct Rng(pub u64);

/// The seed of a randomized scenario: `STRATA_SEED` if set (to replay a
/// failure), otherwise the clock; printed either way.
pub fn seed() -> u64 {
    let seed = std::env::var("STRATA_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64)
        });
    eprintln!("seed: {seed} (STRATA_SEED={seed} replays it)");
    seed
}

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A value in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    /// `len` bytes, one from each value's low byte.
    pub fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.next_u64() as u8).collect()
    }
}
