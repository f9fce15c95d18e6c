//! Clocks and process set-up shared by the servers, the executor and the zygote pools: the
//! wall clock the agent stamps events with, CPU affinity masks, and what a container's first
//! process (or a zygote) does between fork and exec. A leaf: it uses no other module of the
//! crate.

use std::ffi::CString;
use std::io;
use std::time::{SystemTime, UNIX_EPOCH};

/// Wall-clock milliseconds since the epoch.
pub fn wall_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// Why a CPU list cannot be an affinity mask.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CpuSetError {
    #[error("no CPU to run containers on")]
    NoCpus,
    #[error("CPU {0} is beyond what an affinity mask can hold")]
    OutOfRange(u32),
}

/// An affinity mask of `cpus`.
pub fn cpu_set(cpus: &[u32]) -> Result<libc::cpu_set_t, CpuSetError> {
    if cpus.is_empty() {
        return Err(CpuSetError::NoCpus);
    }
    // SAFETY: cpu_set_t is a plain bit array; all zeroes is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let max = 8 * std::mem::size_of::<libc::cpu_set_t>() as u32;
    for &c in cpus {
        if c >= max {
            return Err(CpuSetError::OutOfRange(c));
        }
        // SAFETY: c is below the set's capacity (checked above).
        unsafe { libc::CPU_SET(c as usize, &mut set) };
    }
    Ok(set)
}

/// `cpus` as a cpuset list (`0,2,3`).
pub fn cpu_list(cpus: &[u32]) -> String {
    cpus.iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// The child's setup between fork and exec. Only async-signal-safe calls.
pub fn child_setup(
    procs: &[CString],
    set: &libc::cpu_set_t,
    rlimit_data: Option<u64>,
) -> io::Result<()> {
    // SAFETY: setsid has no memory effects; it fails only if we already lead a group.
    if unsafe { libc::setsid() } < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: getpid cannot fail.
    let pid = unsafe { libc::getpid() };
    let mut buf = [0u8; 24];
    let mut i = buf.len();
    let mut n = pid as u32;
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    let digits = &buf[i..];
    for p in procs {
        // SAFETY: p is a NUL-terminated path made before the fork.
        let fd = unsafe { libc::open(p.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: digits is a valid buffer of that length; fd is open.
        let w = unsafe { libc::write(fd, digits.as_ptr().cast(), digits.len()) };
        let e = io::Error::last_os_error();
        // SAFETY: fd is ours and open.
        unsafe { libc::close(fd) };
        if w < 0 {
            return Err(e);
        }
    }
    // SAFETY: set is a valid cpu_set_t of the size passed.
    if unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), set) } < 0 {
        return Err(io::Error::last_os_error());
    }
    if let Some(bytes) = rlimit_data {
        let lim = libc::rlimit {
            rlim_cur: bytes as libc::rlim_t,
            rlim_max: bytes as libc::rlim_t,
        };
        // SAFETY: lim is a valid rlimit.
        if unsafe { libc::setrlimit(libc::RLIMIT_DATA, &lim) } < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}
