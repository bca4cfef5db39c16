//! Tool allowlists' words (a policy's mode, a tool's fate under it) and the Policies page's
//! views: the policies, the preview of what a key may run, and a pattern list's check.

use serde::{Deserialize, Serialize};

text_enum! {
    /// How a policy's `allow` list is read (D14).
    pub enum Mode ("policy mode") {
        /// Only tools matching `allow` (or `require_confirmation`) run.
        Allowlist = "allowlist",
        /// Every tool not denied runs.
        Open = "open",
    }
}

text_enum! {
    /// What a policy does with one tool, as the preview shows it.
    pub enum Verdict ("policy verdict") {
        Runs = "runs",
        /// Held for a person's confirmation.
        Confirm = "confirm",
        Denied = "denied",
    }
}

/// One policy on the Policies page.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PolicyItem {
    pub id: String,
    pub name: String,
    pub mode: Mode,
    pub allow: Vec<String>,
    pub deny: Vec<String>,
    pub require_confirmation: Vec<String>,
    pub default: bool,
    pub updated_at: String,
    /// Live keys using it, by name.
    pub keys: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyChoice {
    pub id: String,
    pub label: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoliciesData {
    pub policies: Vec<PolicyItem>,
    pub keys: Vec<KeyChoice>,
    pub can_manage: bool,
}

/// One tool as a key's policy sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PreviewRow {
    pub tool: String,
    pub decision: Verdict,
    /// The deciding rule, e.g. `pol_… deny: crm.*`; empty when nothing decided (no policy).
    pub rule: String,
}

/// What one API key may run, must have confirmed, or is denied.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Preview {
    pub key: String,
    pub policy: String,
    pub rows: Vec<PreviewRow>,
}

/// What is wrong with one pattern list as typed (one pattern per line), for validation as you
/// type: `problems` would refuse the save; `unmatched` are valid patterns no tool of the
/// project has (yet), likely typos.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PatternCheck {
    pub problems: Vec<String>,
    pub unmatched: Vec<String>,
}
