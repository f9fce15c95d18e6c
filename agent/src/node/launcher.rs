//! The launcher: the thread that turns accepted starts into processes and processes into exit
//! statuses (see `run`). Commands arrive over a channel from the ContainerManagementProtocol
//! handlers and from housekeeping (cleanup orders), so no IPC handler ever waits.

use std::sync::mpsc;

use nm_core::container_manager::{KillReason, LaunchOrder, Signal};
use nm_core::ids::{AppId, ContainerId};

/// Work for the launcher.
#[derive(Debug)]
pub enum LaunchCommand {
    /// Localize, prepare and start an accepted container.
    Launch(Box<LaunchOrder>),
    /// Kill a container's process group (SIGTERM, then SIGKILL after the delay).
    Kill(ContainerId, KillReason),
    /// `signalToContainer`.
    Signal(ContainerId, Signal),
    /// The application finished on this node: clean up its directories and caches.
    AppFinished(AppId),
}

/// The sending end of the launcher's channel.
#[derive(Debug, Clone)]
pub struct LauncherHandle {
    tx: mpsc::Sender<LaunchCommand>,
}

impl LauncherHandle {
    /// A handle and the receiving end for the launcher thread.
    pub fn channel() -> (LauncherHandle, mpsc::Receiver<LaunchCommand>) {
        let (tx, rx) = mpsc::channel();
        (LauncherHandle { tx }, rx)
    }

    /// Queues a command; if the launcher has ended (the agent is stopping) it is dropped with
    /// a warning.
    pub fn send(&self, c: LaunchCommand) {
        if let Err(e) = self.tx.send(c) {
            tracing::warn!("the launcher has stopped; dropped {:?}", e.0);
        }
    }
}
