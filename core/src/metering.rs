//! Metering reports (D17): usage counters of a project per day, key, tool and meter, and each
//! tool's measured mean latency. The counters themselves are written with each execution's
//! record (engine/record.rs) and by the curl proxy (audit/mod.rs), through the record writer;
//! reports flush it first.

use std::collections::HashMap;
use std::sync::Arc;

use serde::Serialize;

use crate::audit::Recorder;
use crate::auth::Principal;
use crate::clock::{rfc3339, Clock};
use crate::store::{self, Db};
use crate::Result;

pub use crate::store::usage::Meter;

/// One usage counter.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UsageRow {
    pub day: String,
    pub api_key_id: Option<String>,
    pub tool: String,
    pub meter: Meter,
    pub value: i64,
}

#[derive(Clone)]
pub struct Metering {
    db: Db,
    recorder: Recorder,
    clock: Arc<dyn Clock>,
}

impl Metering {
    pub fn new(db: Db, recorder: Recorder, clock: Arc<dyn Clock>) -> Metering {
        Metering { db, recorder, clock }
    }

    /// Measured mean handler time per tool over the last 30 days, in ms, for the project.
    pub async fn average_latency_ms(&self, who: &Principal) -> Result<HashMap<String, i64>> {
        let since = &rfc3339(self.clock.now_ms() - 30 * 86_400_000)[..10];
        let rows = store::usage::totals_by_tool(self.db.pool(), &who.project_id, since).await?;
        let mut calls = HashMap::<String, i64>::new();
        let mut ms = HashMap::<String, i64>::new();
        for r in rows {
            match r.meter {
                Meter::ToolCall => {
                    calls.insert(r.tool, r.total);
                }
                Meter::ToolCallMs => {
                    ms.insert(r.tool, r.total);
                }
                Meter::EgressBytes => {}
            }
        }
        Ok(calls
            .into_iter()
            .filter(|(_, n)| *n > 0)
            .map(|(tool, n)| {
                let total = ms.get(&tool).copied().unwrap_or(0);
                (tool, (total + n / 2) / n)
            })
            .collect())
    }

    /// Usage rows of the caller's project between two days (inclusive, `YYYY-MM-DD`).
    pub async fn usage(&self, who: &Principal, from_day: &str, to_day: &str) -> Result<Vec<UsageRow>> {
        self.recorder.flush().await;
        let rows = store::usage::rows(self.db.pool(), &who.project_id, from_day, to_day).await?;
        Ok(rows
            .into_iter()
            .map(|r| UsageRow {
                day: r.day,
                api_key_id: (!r.api_key_id.is_empty()).then_some(r.api_key_id),
                tool: r.tool,
                meter: r.meter,
                value: r.value,
            })
            .collect())
    }
}

/// What `GET /v1/usage?group_by=` sums by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupBy {
    Day,
    Tool,
    Key,
    Integration,
}

impl GroupBy {
    pub fn parse(s: &str) -> Option<GroupBy> {
        match s {
            "day" => Some(GroupBy::Day),
            "tool" => Some(GroupBy::Tool),
            "key" => Some(GroupBy::Key),
            "integration" => Some(GroupBy::Integration),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            GroupBy::Day => "day",
            GroupBy::Tool => "tool",
            GroupBy::Key => "key",
            GroupBy::Integration => "integration",
        }
    }
}

/// Every meter of one group (a day, a tool, a key or an integration).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct UsageGroup {
    /// The day, tool, key id (`""`: calls without a key) or integration.
    pub group: String,
    pub tool_call: i64,
    pub tool_call_ms: i64,
    pub egress_bytes: i64,
}

/// The integration a metered tool belongs to: `curl:<integration>` for proxy traffic, else
/// the catalog's answer, else the name's first segment (a tool since removed).
pub fn integration_of(tool: &str, catalog: impl Fn(&str) -> Option<String>) -> String {
    if let Some(i) = tool.strip_prefix("curl:") {
        return i.to_owned();
    }
    catalog(tool).unwrap_or_else(|| tool.split(['.', '_']).next().unwrap_or(tool).to_owned())
}

impl Metering {
    /// Usage of the caller's project between two days, summed per group, ordered by group.
    /// `integration` names a tool's integration (the caller knows the catalog).
    pub async fn grouped(&self, who: &Principal, from_day: &str, to_day: &str, by: GroupBy, integration: impl Fn(&str) -> String) -> Result<Vec<UsageGroup>> {
        let rows = self.usage(who, from_day, to_day).await?;
        let mut groups: std::collections::BTreeMap<String, UsageGroup> = Default::default();
        for r in rows {
            let key = match by {
                GroupBy::Day => r.day.clone(),
                GroupBy::Tool => r.tool.clone(),
                GroupBy::Key => r.api_key_id.clone().unwrap_or_default(),
                GroupBy::Integration => integration(&r.tool),
            };
            let g = groups.entry(key.clone()).or_insert_with(|| UsageGroup { group: key, ..Default::default() });
            match r.meter {
                Meter::ToolCall => g.tool_call += r.value,
                Meter::ToolCallMs => g.tool_call_ms += r.value,
                Meter::EgressBytes => g.egress_bytes += r.value,
            }
        }
        Ok(groups.into_values().collect())
    }
}
