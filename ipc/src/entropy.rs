//! The OS random source for the sans-IO state machines (DIGEST-MD5 nonces and cnonces).

use hadoop_wire::entropy::{Entropy, EntropyError};

/// `getrandom(2)` (the kernel's CSPRNG, blocking only before it is seeded at boot).
#[derive(Debug, Default, Clone, Copy)]
pub struct OsEntropy;

impl Entropy for OsEntropy {
    fn fill(&mut self, buf: &mut [u8]) -> Result<(), EntropyError> {
        let mut done = 0;
        while done < buf.len() {
            let rest = &mut buf[done..];
            // SAFETY: `rest` is a valid, writable buffer of `rest.len()` bytes for the whole call.
            let n = unsafe { libc::getrandom(rest.as_mut_ptr().cast(), rest.len(), 0) };
            if n < 0 {
                let e = std::io::Error::last_os_error();
                if e.kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(EntropyError(e));
            }
            done += n as usize;
        }
        Ok(())
    }
}
