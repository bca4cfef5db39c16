//! The Audit pages' views: a page of rows and one row in full.

use serde::{Deserialize, Serialize};

use crate::calls::{CallStatus, ConfirmationStatus};

text_enum! {
    /// Where an audit row's action ended: a call's status, or a person's decision on a held
    /// call (`approved`; a refusal is `denied`, as a denied call's).
    pub enum AuditStatus ("audit status") {
        Running = "running",
        Succeeded = "succeeded",
        Failed = "failed",
        AwaitingConfirmation = "awaiting_confirmation",
        Denied = "denied",
        Expired = "expired",
        /// A person approved a held call (`confirmation.approve`).
        Approved = "approved",
    }
}

impl From<CallStatus> for AuditStatus {
    fn from(s: CallStatus) -> Self {
        match s {
            CallStatus::Running => AuditStatus::Running,
            CallStatus::Succeeded => AuditStatus::Succeeded,
            CallStatus::Failed => AuditStatus::Failed,
            CallStatus::AwaitingConfirmation => AuditStatus::AwaitingConfirmation,
            CallStatus::Denied => AuditStatus::Denied,
            CallStatus::Expired => AuditStatus::Expired,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditRowView {
    pub id: String,
    pub at: String,
    pub action: String,
    pub tool: String,
    pub status: AuditStatus,
    pub error_code: String,
    pub duration_ms: Option<i64>,
    pub key: String,
    pub surface: String,
    pub call_id: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditData {
    pub rows: Vec<AuditRowView>,
    pub next: Option<String>,
    /// (id, label) of the keys the filter offers.
    pub keys: Vec<(String, String)>,
    pub is_admin: bool,
    /// Days rows are kept (None: forever).
    pub retention_days: Option<i64>,
    /// May change the retention (an admin whose key has no policy).
    pub can_manage: bool,
}

/// One audit row in full, as the detail page shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditDetailView {
    pub id: String,
    pub at: String,
    pub action: String,
    pub tool: String,
    pub status: AuditStatus,
    pub error_code: String,
    pub duration_ms: Option<i64>,
    pub surface: String,
    pub user: String,
    pub key: String,
    pub end_user_id: Option<String>,
    pub detail: Option<String>,
    pub tool_call_id: Option<String>,
    /// Pretty JSON of the agent's arguments (references kept, secrets redacted).
    pub arguments: Option<String>,
    /// Pretty JSON of the error the caller got.
    pub error: Option<String>,
    pub result_bytes: Option<i64>,
    pub idempotency_key: Option<String>,
    pub confirmation_id: Option<String>,
    pub confirmation_status: Option<ConfirmationStatus>,
    pub decided_by: Option<String>,
    pub decided_at: Option<String>,
    pub decision_reason: Option<String>,
}
