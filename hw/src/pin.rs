//! Pinning threads to the CPUs of a [`Plan`](crate::Plan), and checking the kernel did it.
//!
//! [`pin_current_thread`] sets a one-CPU affinity mask with `core_affinity`, then asks the
//! kernel where the thread runs now (`sched_getcpu`) and what its mask is. `sched_setaffinity`
//! migrates the caller before it returns, so a mismatch means something else (a cpuset
//! change, a hotplug) got in the way; either failure is a typed [`Error`].
//!
//! [`spawn_pinned`] starts a named thread, pins it, and only runs the body once the pin has
//! been verified, so the caller learns about a refused CPU at spawn time.
//!
//! [`PinPolicy`] is the one rule for a refused CPU, chosen per thread: `Required` (the
//! caller fails: the RM's shards and housekeeping thread, a client reader told to pin) or
//! `BestEffort` (one warning naming the thread, which then runs unpinned: the transport's ring
//! threads, the agent's threads).

use std::sync::mpsc;
use std::thread::{self, JoinHandle, Thread};

use crate::{Error, Role};

/// Linux keeps 15 bytes of a thread name (`TASK_COMM_LEN` − 1).
pub const MAX_THREAD_NAME: usize = 15;

/// The thread name for `role` on `cpu`: `hp-<short role>-<cpu>`, e.g. `hp-ring0-1`,
/// `hp-shard1-3`, `hp-hk-0`, `hp-hdfs-2`. It is what `top -H`, `ps -L` and `perf` show.
/// Never longer than [`MAX_THREAD_NAME`] bytes: the role part is cut if a huge index and CPU
/// number would not fit, the CPU number never is.
pub fn thread_name(role: &Role, cpu: u32) -> String {
    let cpu = cpu.to_string();
    let mut short = role.short_name();
    let budget = MAX_THREAD_NAME - "hp-".len() - 1 - cpu.len();
    short.truncate(budget);
    format!("hp-{short}-{cpu}")
}

/// The CPU the calling thread is running on right now.
pub fn current_cpu() -> Result<u32, Error> {
    // SAFETY: sched_getcpu takes no arguments and touches no memory of ours; it only
    // returns an int (or -1 with errno set).
    let r = unsafe { libc::sched_getcpu() };
    if r < 0 {
        return Err(Error::SchedGetCpu(std::io::Error::last_os_error()));
    }
    Ok(r as u32)
}

/// Pins the calling thread to logical CPU `cpu` and verifies it.
///
/// Errors: [`Error::PinRefused`] if `sched_setaffinity` fails (the CPU is offline, outside
/// the cpuset, or does not exist), [`Error::PinNotEffective`] if the kernel accepted but the
/// thread's mask or location is not `{cpu}` afterwards.
pub fn pin_current_thread(cpu: u32) -> Result<(), Error> {
    if cpu as usize >= libc::CPU_SETSIZE as usize {
        return Err(Error::PinRefused {
            cpu,
            source: std::io::Error::from_raw_os_error(libc::EINVAL),
        });
    }
    if !core_affinity::set_for_current(core_affinity::CoreId { id: cpu as usize }) {
        // core_affinity returns right after the syscall: errno is still the syscall's.
        return Err(Error::PinRefused {
            cpu,
            source: std::io::Error::last_os_error(),
        });
    }
    let mask = crate::affinity::current_cpus()?;
    if mask != [cpu] {
        return Err(Error::PinNotEffective {
            cpu,
            running_on: current_cpu().ok(),
            mask: crate::cpulist::format(&mask),
        });
    }
    let mut on = current_cpu()?;
    if on != cpu {
        // Give the scheduler one chance to finish the migration.
        thread::yield_now();
        on = current_cpu()?;
    }
    if on != cpu {
        return Err(Error::PinNotEffective {
            cpu,
            running_on: Some(on),
            mask: crate::cpulist::format(&mask),
        });
    }
    Ok(())
}

/// What a thread does when its CPU is refused (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PinPolicy {
    /// The pin must hold: the error goes back to the caller.
    Required,
    /// Warn once, naming the thread, and run unpinned.
    BestEffort,
}

impl PinPolicy {
    /// Pins the calling thread to `cpu` under this policy. `Ok(true)`: pinned and verified;
    /// `Ok(false)`: refused under `BestEffort` (warned); `Err`: refused under `Required`.
    pub fn pin_current_thread(self, cpu: u32) -> Result<bool, Error> {
        match (pin_current_thread(cpu), self) {
            (Ok(()), _) => Ok(true),
            (Err(e), PinPolicy::Required) => Err(e),
            (Err(e), PinPolicy::BestEffort) => {
                let t = thread::current();
                let name = t.name().unwrap_or("a thread");
                tracing::warn!(
                    "{name}: pinning to CPU {cpu} failed ({e}); the thread runs unpinned"
                );
                Ok(false)
            }
        }
    }
}

/// A thread started by [`spawn_pinned`], already pinned and verified.
#[derive(Debug)]
pub struct PinnedThread<T> {
    handle: JoinHandle<Option<T>>,
    role: Role,
    cpu: u32,
}

impl<T> PinnedThread<T> {
    /// Waits for the body to finish. `Err` carries the panic payload, as `JoinHandle::join`.
    pub fn join(self) -> thread::Result<T> {
        self.handle.join().map(|r| {
            r.expect("the body runs only after a successful pin, which spawn_pinned returned")
        })
    }

    /// The underlying thread (name, id, unpark).
    pub fn thread(&self) -> &Thread {
        self.handle.thread()
    }

    /// The role it plays.
    pub fn role(&self) -> &Role {
        &self.role
    }

    /// The CPU it is pinned to.
    pub fn cpu(&self) -> u32 {
        self.cpu
    }
}

/// Spawns a thread named [`thread_name`]`(role, cpu)`, pins it to `cpu`, verifies the pin,
/// and then runs `f` on it. If the pin fails, `f` never runs, the thread exits and the error
/// comes back here.
pub fn spawn_pinned<F, T>(role: Role, cpu: u32, f: F) -> Result<PinnedThread<T>, Error>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let name = thread_name(&role, cpu);
    let (tx, rx) = mpsc::sync_channel::<Result<(), Error>>(1);
    let handle = thread::Builder::new()
        .name(name.clone())
        .spawn(move || match PinPolicy::Required.pin_current_thread(cpu) {
            Ok(_) => {
                // The receiver waits for exactly this message; it cannot be gone.
                let _ = tx.send(Ok(()));
                Some(f())
            }
            Err(e) => {
                let _ = tx.send(Err(e));
                None
            }
        })
        .map_err(|source| Error::Spawn { name, source })?;
    match rx.recv() {
        Ok(Ok(())) => Ok(PinnedThread { handle, role, cpu }),
        Ok(Err(e)) => {
            let _ = handle.join();
            Err(e)
        }
        // The thread died before reporting (it can only panic inside pinning).
        Err(_) => {
            let _ = handle.join();
            Err(Error::PinNotEffective {
                cpu,
                running_on: None,
                mask: String::from("(thread died while pinning)"),
            })
        }
    }
}
