//! Random bytes, from the caller.
//!
//! `hadoop-wire` does no I/O, so it never reads the OS RNG itself: whoever drives a state machine
//! that needs randomness (a DIGEST-MD5 nonce or cnonce, a master key) hands in an [`Entropy`].
//! The I/O crates provide the OS source (`ipc::OsEntropy`); tests use [`SeededEntropy`].

/// The random source failed.
#[derive(Debug, thiserror::Error)]
#[error("entropy: {0}")]
pub struct EntropyError(#[source] pub std::io::Error);

/// A source of random bytes.
pub trait Entropy: Send {
    fn fill(&mut self, buf: &mut [u8]) -> Result<(), EntropyError>;
}

impl<E: Entropy + ?Sized> Entropy for Box<E> {
    fn fill(&mut self, buf: &mut [u8]) -> Result<(), EntropyError> {
        (**self).fill(buf)
    }
}

/// A deterministic generator (xorshift64*) for tests and benches. Never for keys or nonces in
/// production.
#[derive(Debug, Clone)]
pub struct SeededEntropy(pub u64);

impl Entropy for SeededEntropy {
    fn fill(&mut self, buf: &mut [u8]) -> Result<(), EntropyError> {
        for b in buf {
            let mut x = self.0 | 1;
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            self.0 = x;
            *b = (x.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 56) as u8;
        }
        Ok(())
    }
}
