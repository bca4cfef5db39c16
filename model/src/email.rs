//! Sender domains' status and the Email page's views.

use serde::{Deserialize, Serialize};

text_enum! {
    /// Whether a sender domain may be sent from yet.
    pub enum DomainStatus ("email domain status") {
        Pending = "pending",
        Verified = "verified",
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EmailDomain {
    pub id: String,
    pub domain: String,
    pub status: DomainStatus,
    pub record_name: String,
    pub record_value: String,
    pub created_at: String,
    pub verified_at: Option<String>,
    pub last_checked_at: Option<String>,
    pub last_error: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EmailData {
    pub domains: Vec<EmailDomain>,
    pub configured: bool,
    pub sent_last_hour: i64,
    pub hourly_limit: u32,
    pub can_manage: bool,
}
