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
