//! Tool calls and held calls: their statuses and the Confirmations pages' views.

use serde::{Deserialize, Serialize};

use crate::catalog::SideEffects;

text_enum! {
    /// Where a tool call (`tcall_`) stands; an audit row carries its call's status.
    pub enum CallStatus ("call status") {
        /// A side-effecting call, before its handler.
        Running = "running",
        Succeeded = "succeeded",
        Failed = "failed",
        /// Held for a person's decision (D15).
        AwaitingConfirmation = "awaiting_confirmation",
        /// Refused by a policy or by a person.
        Denied = "denied",
        /// Held, and nobody decided before the confirmation expired.
        Expired = "expired",
    }
}

text_enum! {
    /// Where a held call (`conf_`) stands.
    pub enum ConfirmationStatus ("confirmation status") {
        Pending = "pending",
        Approved = "approved",
        Denied = "denied",
        Expired = "expired",
    }
}

impl ConfirmationStatus {
    /// The status at `now_ms`: a pending confirmation whose time ran out is expired, whether
    /// or not a sweep has written that yet.
    pub fn as_of(self, expires_at_ms: i64, now_ms: i64) -> Self {
        if self == ConfirmationStatus::Pending && expires_at_ms <= now_ms {
            ConfirmationStatus::Expired
        } else {
            self
        }
    }
}

/// One held call as the pages show it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConfirmationItem {
    pub id: String,
    pub tool: String,
    /// None: the tool is no longer in the catalog.
    #[serde(with = "side_effects_or_unknown")]
    pub side_effects: Option<SideEffects>,
    pub status: ConfirmationStatus,
    /// The agent's arguments, pretty JSON; vault references as references, secrets redacted.
    pub arguments: String,
    pub api_key: String,
    pub requested_by: String,
    pub end_user_id: Option<String>,
    pub surface: String,
    pub created_at: String,
    pub expires_at: String,
    pub expires_at_ms: i64,
    pub decided_by: Option<String>,
    pub decided_at: Option<String>,
    pub reason: Option<String>,
    pub tool_call_id: String,
}

impl ConfirmationItem {
    /// The side effects as the pages show them.
    pub fn side_effects_text(&self) -> &'static str {
        side_effects_or_unknown::text(self.side_effects)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConfirmationsData {
    pub pending: Vec<ConfirmationItem>,
    pub history: Vec<ConfirmationItem>,
    pub now_ms: i64,
}

/// A held call's side effects on the wire: the class, or `unknown` when its tool is gone.
mod side_effects_or_unknown {
    use serde::{Deserialize, Deserializer, Serializer};

    use crate::catalog::SideEffects;

    const UNKNOWN: &str = "unknown";

    pub fn text(v: Option<SideEffects>) -> &'static str {
        v.map_or(UNKNOWN, SideEffects::as_str)
    }

    pub fn serialize<S: Serializer>(v: &Option<SideEffects>, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(text(*v))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<SideEffects>, D::Error> {
        let s = String::deserialize(d)?;
        Ok(SideEffects::parse(&s))
    }
}
