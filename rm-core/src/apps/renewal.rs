//! An application failed at submission because a token of it could not be renewed
//! ([`crate::token_renewer`]): Java's `APP_REJECTED`, the application FAILED with the
//! renewer's diagnostics.

use hadoop_wire::pb::hadoop::yarn::FinalApplicationStatusProto;
use hadoop_wire::yarn::ids::AppId;

use super::{AppState, Apps, AttemptState};

impl Apps {
    /// Fails `id` (just submitted) with `diagnostics`, its attempt (and any AM container it
    /// got) with it. False for an unknown or already ended application.
    pub fn reject(&mut self, id: AppId, diagnostics: &str, now_ms: u64) -> bool {
        let Some(app) = self.apps.get_mut(&id.id).filter(|a| a.id == id) else {
            return false;
        };
        if app.state.is_final() {
            return false;
        }
        app.final_status = FinalApplicationStatusProto::AppFailed;
        if let Some(a) = app.current().map(|a| a.id) {
            self.end_attempt(a, AttemptState::Failed, diagnostics.to_string(), now_ms);
        }
        self.finish_app(id, AppState::Failed, Some(diagnostics.to_string()), now_ms);
        true
    }
}
