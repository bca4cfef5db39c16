//! Metering reports (D17): usage counters of a project per day, key, tool and meter, and each
//! tool's measured mean latency (`latency.rs`). The counters themselves are written with each execution's
//! record (engine/record.rs) and by the curl proxy (audit/mod.rs), through the record writer;
//! reports flush it first.

use std::collections::HashMap;
use std::sync::Arc;

use serde::Serialize;

use crate::audit::Recorder;
use crate::auth::Principal;
use crate::clock::{rfc3339, Clock};
use crate::store::{self, tool_calls::CallStatus, Db};
use crate::Result;

pub use crate::store::usage::Meter;
pub use latency::Latencies;
pub use stats::{CallStats, StatsBy};

mod latency;
mod stats;

/// Whose usage `who` sees (D21): everyone's for an admin, else its own user's.
fn own(who: &Principal) -> Option<&str> {
    (!who.sees_project_records()).then_some(who.user_id.as_str())
}

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
    latency: latency::Cache,
}

impl Metering {
    /// Calls counted in this process since it started (for /metrics).
    pub fn calls(&self) -> &crate::metrics::CallMetrics {
        self.recorder.metrics()
    }

    pub fn new(db: Db, recorder: Recorder, clock: Arc<dyn Clock>) -> Metering {
        Metering {
            db,
            recorder,
            clock,
            latency: latency::Cache::default(),
        }
    }

    /// Measured mean handler times of the tools `who`'s project may see (`latency.rs`).
    pub async fn latencies(&self, who: &Principal) -> Result<Latencies> {
        self.latency.of(&self.db, self.clock.now_ms(), who).await
    }

    /// Usage rows of the caller's project between two days (inclusive, `YYYY-MM-DD`).
    pub async fn usage(
        &self,
        who: &Principal,
        from_day: &str,
        to_day: &str,
    ) -> Result<Vec<UsageRow>> {
        self.recorder.flush().await;
        let rows =
            store::usage::rows(self.db.pool(), &who.project_id, from_day, to_day, own(who)).await?;
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
    pub async fn grouped(
        &self,
        who: &Principal,
        from_day: &str,
        to_day: &str,
        by: GroupBy,
        integration: impl Fn(&str) -> String,
    ) -> Result<Vec<UsageGroup>> {
        let rows = self.usage(who, from_day, to_day).await?;
        let mut groups: std::collections::BTreeMap<String, UsageGroup> = Default::default();
        for r in rows {
            let key = match by {
                GroupBy::Day => r.day.clone(),
                GroupBy::Tool => r.tool.clone(),
                GroupBy::Key => r.api_key_id.clone().unwrap_or_default(),
                GroupBy::Integration => integration(&r.tool),
            };
            let g = groups.entry(key.clone()).or_insert_with(|| UsageGroup {
                group: key,
                ..Default::default()
            });
            match r.meter {
                Meter::ToolCall => g.tool_call += r.value,
                Meter::ToolCallMs => g.tool_call_ms += r.value,
                Meter::EgressBytes => g.egress_bytes += r.value,
            }
        }
        Ok(groups.into_values().collect())
    }
}

/// Calls that latency percentiles are computed over, at most (the newest in the range).
pub const LATENCY_SAMPLE: i64 = 20_000;

/// One day of executions by outcome.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct DayOutcomes {
    pub day: String,
    pub succeeded: i64,
    pub failed: i64,
    pub denied: i64,
    /// Held for confirmation, running, or anything else.
    pub other: i64,
}

/// A tool's handler-time percentiles over the range.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ToolLatency {
    pub tool: String,
    pub calls: i64,
    pub p50_ms: i64,
    pub p95_ms: i64,
}

/// What the Usage page draws: calls per day by outcome, latency per tool, egress per day, and
/// the busiest tools and keys, over `[from, to]` (days, inclusive).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UsageReport {
    pub from: String,
    pub to: String,
    pub days: Vec<DayOutcomes>,
    pub latency: Vec<ToolLatency>,
    /// `(day, egress bytes)`, every day of the range.
    pub egress: Vec<(String, i64)>,
    /// The busiest tools and keys by calls, at most 10 each.
    pub top_tools: Vec<UsageGroup>,
    pub top_keys: Vec<UsageGroup>,
}

/// The instants of a range of days (`YYYY-MM-DD`, inclusive, already checked by
/// `days_between`): `[first midnight, midnight after the last)` in ms, UTC.
fn day_range_ms(from: &str, to: &str) -> (i64, i64) {
    let day_ms = |day: &str| -> i64 {
        let fmt = time::macros::format_description!("[year]-[month]-[day]");
        time::Date::parse(day, fmt)
            .map(|d| d.midnight().assume_utc().unix_timestamp() * 1000)
            .unwrap_or(0)
    };
    (day_ms(from), day_ms(to) + 86_400_000)
}

/// The days of `[from, to]`, at most `max` (YYYY-MM-DD).
fn days_between(from: &str, to: &str, max: usize) -> Result<Vec<String>> {
    let fmt = time::macros::format_description!("[year]-[month]-[day]");
    let bad = || crate::Error::invalid("from and to must be days as YYYY-MM-DD, from not after to");
    let (mut d, end) = (
        time::Date::parse(from, fmt).map_err(|_| bad())?,
        time::Date::parse(to, fmt).map_err(|_| bad())?,
    );
    if d > end {
        return Err(bad());
    }
    let mut out = Vec::new();
    while d <= end {
        if out.len() == max {
            return Err(crate::Error::invalid(format!(
                "a range of at most {max} days"
            )));
        }
        out.push(d.format(fmt).map_err(|_| bad())?);
        d = d.next_day().ok_or_else(bad)?;
    }
    Ok(out)
}

fn percentile(sorted: &[i64], p: f64) -> i64 {
    if sorted.is_empty() {
        return 0;
    }
    sorted[(((sorted.len() - 1) as f64) * p).round() as usize]
}

impl Metering {
    /// A reporting range as asked, each end defaulting to this month so far: `from` to the
    /// month's first day, `to` to today (UTC).
    pub fn range_or_this_month(
        &self,
        from: Option<String>,
        to: Option<String>,
    ) -> (String, String) {
        let today = rfc3339(self.clock.now_ms())[..10].to_owned();
        let from = from.unwrap_or_else(|| format!("{}-01", &today[..7]));
        let to = to.unwrap_or(today);
        (from, to)
    }

    /// The Usage page's report for the caller's project (at most 366 days).
    pub async fn report(&self, who: &Principal, from: &str, to: &str) -> Result<UsageReport> {
        let days = days_between(from, to, 366)?;
        self.recorder.flush().await;
        let (from_ms, to_ms) = day_range_ms(from, to);
        let mut per_day: std::collections::BTreeMap<String, DayOutcomes> = days
            .iter()
            .map(|d| {
                (
                    d.clone(),
                    DayOutcomes {
                        day: d.clone(),
                        ..Default::default()
                    },
                )
            })
            .collect();
        for (d, status, n) in store::usage::outcomes_per_day(
            self.db.pool(),
            &who.project_id,
            from_ms,
            to_ms,
            own(who),
        )
        .await?
        {
            let day = rfc3339(d * 86_400_000)[..10].to_owned();
            if let Some(o) = per_day.get_mut(&day) {
                match status {
                    Some(CallStatus::Succeeded) => o.succeeded += n,
                    Some(CallStatus::Failed) => o.failed += n,
                    Some(CallStatus::Denied) => o.denied += n,
                    _ => o.other += n,
                }
            }
        }
        let mut by_tool: HashMap<String, Vec<i64>> = HashMap::new();
        for (tool, ms) in store::usage::durations(
            self.db.pool(),
            &who.project_id,
            from_ms,
            to_ms,
            LATENCY_SAMPLE,
            own(who),
        )
        .await?
        {
            by_tool.entry(tool).or_default().push(ms);
        }
        let mut latency: Vec<ToolLatency> = by_tool
            .into_iter()
            .map(|(tool, mut ms)| {
                ms.sort_unstable();
                ToolLatency {
                    tool,
                    calls: ms.len() as i64,
                    p50_ms: percentile(&ms, 0.5),
                    p95_ms: percentile(&ms, 0.95),
                }
            })
            .collect();
        latency.sort_by(|a, b| b.p95_ms.cmp(&a.p95_ms).then(a.tool.cmp(&b.tool)));
        latency.truncate(20);
        let rows = store::usage::rows(self.db.pool(), &who.project_id, from, to, own(who)).await?;
        let mut egress: std::collections::BTreeMap<String, i64> =
            days.iter().map(|d| (d.clone(), 0)).collect();
        let mut tools: HashMap<String, UsageGroup> = HashMap::new();
        let mut keys: HashMap<String, UsageGroup> = HashMap::new();
        for r in rows {
            if r.meter == Meter::EgressBytes {
                *egress.entry(r.day.clone()).or_default() += r.value;
            }
            for (map, group) in [
                (&mut tools, r.tool.clone()),
                (&mut keys, r.api_key_id.clone()),
            ] {
                let g = map.entry(group.clone()).or_insert_with(|| UsageGroup {
                    group,
                    ..Default::default()
                });
                match r.meter {
                    Meter::ToolCall => g.tool_call += r.value,
                    Meter::ToolCallMs => g.tool_call_ms += r.value,
                    Meter::EgressBytes => g.egress_bytes += r.value,
                }
            }
        }
        let top = |m: HashMap<String, UsageGroup>| {
            let mut v: Vec<UsageGroup> = m.into_values().collect();
            v.sort_by(|a, b| b.tool_call.cmp(&a.tool_call).then(a.group.cmp(&b.group)));
            v.truncate(10);
            v
        };
        Ok(UsageReport {
            from: from.to_owned(),
            to: to.to_owned(),
            days: per_day.into_values().collect(),
            latency,
            egress: egress.into_iter().collect(),
            top_tools: top(tools),
            top_keys: top(keys),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_are_whole_days_and_bounded() {
        assert_eq!(
            days_between("2026-02-27", "2026-03-02", 366).unwrap(),
            vec!["2026-02-27", "2026-02-28", "2026-03-01", "2026-03-02"]
        );
        assert!(days_between("2026-03-02", "2026-03-01", 366).is_err());
        assert!(days_between("2026-03-0x", "2026-03-01", 366).is_err());
        assert!(days_between("2020-01-01", "2026-01-01", 366)
            .unwrap_err()
            .to_string()
            .contains("366"));
        assert_eq!(percentile(&[1, 2, 3, 4, 100], 0.5), 3);
        assert_eq!(percentile(&[1, 2, 3, 4, 100], 0.95), 100);
    }
}
