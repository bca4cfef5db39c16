//! Meters (D17) and the Usage page's views.

use serde::{Deserialize, Serialize};

text_enum! {
    /// What a counter measures (D17).
    pub enum Meter ("meter") {
        /// Every invocation, success or failure.
        ToolCall = "tool_call",
        /// Handler wall time in ms.
        ToolCallMs = "tool_call_ms",
        /// Bytes sent and received by handlers and the curl proxy.
        EgressBytes = "egress_bytes",
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DayBar {
    pub day: String,
    pub succeeded: i64,
    pub failed: i64,
    pub denied: i64,
    pub other: i64,
    pub egress_bytes: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LatencyBar {
    pub tool: String,
    pub calls: i64,
    pub p50_ms: i64,
    pub p95_ms: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopRow {
    pub name: String,
    pub calls: i64,
    pub total_ms: i64,
    pub egress_bytes: i64,
}

/// One person's calls in the range (the Usage page's "By person").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserRow {
    pub email: String,
    pub calls: i64,
    pub failed: i64,
    /// Refused by a rate limit or quota.
    pub rate_limited: i64,
    pub p50_ms: i64,
    pub p95_ms: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UsageData {
    pub from: String,
    pub to: String,
    pub days: Vec<DayBar>,
    pub latency: Vec<LatencyBar>,
    pub top_tools: Vec<TopRow>,
    pub top_keys: Vec<TopRow>,
    /// The most active people first (a member: only themselves).
    pub by_user: Vec<UserRow>,
}
