//! Usage counters: meters summed per project, API key, tool and UTC day.

use super::{script::Script, tool_calls::CallStatus, Exec};
use crate::Result;

pub use workbench_model::usage::Meter;

/// One stored counter.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct UsageCounter {
    pub day: String,
    pub api_key_id: String,
    pub tool: String,
    #[sqlx(try_from = "String")]
    pub meter: Meter,
    pub value: i64,
}

/// Adds several meters of one project, key, tool and day in one statement.
pub async fn add_many<'e>(
    ex: impl Exec<'e>,
    project_id: &str,
    api_key_id: &str,
    tool: &str,
    day: &str,
    meters: &[(Meter, i64)],
) -> Result<()> {
    let mut s = Script::separate();
    push_add(&mut s, project_id, api_key_id, tool, day, meters);
    s.execute(ex).await
}

/// Adds to `s` the upsert adding `meters` of one project, key, tool and day (none when
/// `meters` is empty).
pub fn push_add<'q>(
    s: &mut Script<'q>,
    project_id: &'q str,
    api_key_id: &'q str,
    tool: &'q str,
    day: &'q str,
    meters: &[(Meter, i64)],
) {
    if meters.is_empty() {
        return;
    }
    s.statement(
        "INSERT INTO usage_counters (project_id, api_key_id, tool, day, meter, value) VALUES ",
    );
    let key = s.reserve(4);
    let first = s.reserve(meters.len() * 2);
    let mut sql = String::with_capacity(meters.len() * 40);
    for i in 0..meters.len() {
        let b = first + i * 2;
        if i > 0 {
            sql.push_str(", ");
        }
        sql.push_str(&format!(
            "(${key}, ${}, ${}, ${}, ${b}, ${})",
            key + 1,
            key + 2,
            key + 3,
            b + 1
        ));
    }
    sql.push_str(" ON CONFLICT (project_id, api_key_id, tool, day, meter) DO UPDATE SET value = usage_counters.value + excluded.value");
    s.sql(&sql);
    s.bind(project_id);
    s.bind(api_key_id);
    s.bind(tool);
    s.bind(day);
    for (meter, value) in meters {
        s.bind(meter.as_str());
        s.bind(*value);
    }
}

/// Calls and handler milliseconds of each tool, in two windows: since `since_day` and all
/// time; of one project, or (None) of every project.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct LatencyTotals {
    pub tool: String,
    pub recent_calls: i64,
    pub recent_ms: i64,
    pub all_calls: i64,
    pub all_ms: i64,
}

pub async fn latency_totals<'e>(
    ex: impl Exec<'e>,
    project_id: Option<&str>,
    since_day: &str,
) -> Result<Vec<LatencyTotals>> {
    let project = if project_id.is_some() {
        " AND project_id = $2"
    } else {
        ""
    };
    let sum = |meter: Meter, recent: bool| {
        let when = if recent { " AND day >= $1" } else { "" };
        format!("CAST(COALESCE(SUM(CASE WHEN meter = '{meter}'{when} THEN value ELSE 0 END), 0) AS BIGINT)", meter = meter.as_str())
    };
    let sql = format!(
        "SELECT tool, {} AS recent_calls, {} AS recent_ms, {} AS all_calls, {} AS all_ms FROM usage_counters \
         WHERE meter IN ('{}', '{}'){project} GROUP BY tool",
        sum(Meter::ToolCall, true),
        sum(Meter::ToolCallMs, true),
        sum(Meter::ToolCall, false),
        sum(Meter::ToolCallMs, false),
        Meter::ToolCall.as_str(),
        Meter::ToolCallMs.as_str(),
    );
    let mut q = sqlx::query_as(&sql).bind(since_day);
    if let Some(p) = project_id {
        q = q.bind(p);
    }
    Ok(q.fetch_all(ex).await?)
}

/// The counters of a project within `[from_day, to_day]`; with `user_id`, only those of that
/// user's API keys.
pub async fn rows<'e>(
    ex: impl Exec<'e>,
    project_id: &str,
    from_day: &str,
    to_day: &str,
    user_id: Option<&str>,
) -> Result<Vec<UsageCounter>> {
    let own = if user_id.is_some() {
        " AND api_key_id IN (SELECT id FROM api_keys WHERE user_id = $4)"
    } else {
        ""
    };
    let sql = format!(
        "SELECT day, api_key_id, tool, meter, value FROM usage_counters \
         WHERE project_id = $1 AND day >= $2 AND day <= $3{own} ORDER BY day, api_key_id, tool, meter"
    );
    let mut q = sqlx::query_as(&sql)
        .bind(project_id)
        .bind(from_day)
        .bind(to_day);
    if let Some(u) = user_id {
        q = q.bind(u);
    }
    Ok(q.fetch_all(ex).await?)
}

/// Executions of a project per UTC day (days since the epoch) and outcome, within
/// `[from_ms, to_ms)`, from the audit log; with `user_id`, only that user's.
pub async fn outcomes_per_day<'e>(
    ex: impl Exec<'e>,
    project_id: &str,
    from_ms: i64,
    to_ms: i64,
    user_id: Option<&str>,
) -> Result<Vec<(i64, Option<CallStatus>, i64)>> {
    let own = if user_id.is_some() {
        " AND user_id = $4"
    } else {
        ""
    };
    let sql = format!(
        "SELECT CAST(created_at / 86400000 AS BIGINT) AS d, status, CAST(COUNT(*) AS BIGINT) AS n FROM audit_events \
         WHERE project_id = $1 AND action = 'tool.execute' AND created_at >= $2 AND created_at < $3{own} \
         GROUP BY CAST(created_at / 86400000 AS BIGINT), status ORDER BY d, status"
    );
    let mut q = sqlx::query_as(&sql)
        .bind(project_id)
        .bind(from_ms)
        .bind(to_ms);
    if let Some(u) = user_id {
        q = q.bind(u);
    }
    let rows: Vec<(i64, String, i64)> = q.fetch_all(ex).await?;
    Ok(rows
        .into_iter()
        .map(|(d, status, n)| (d, CallStatus::parse(&status), n))
        .collect())
}

/// Handler times of a project's finished calls within `[from_ms, to_ms)`, newest first, at most
/// `limit`: `(tool, duration_ms)`; with `user_id`, only that user's.
pub async fn durations<'e>(
    ex: impl Exec<'e>,
    project_id: &str,
    from_ms: i64,
    to_ms: i64,
    limit: i64,
    user_id: Option<&str>,
) -> Result<Vec<(String, i64)>> {
    let own = if user_id.is_some() {
        " AND user_id = $5"
    } else {
        ""
    };
    let sql = format!(
        "SELECT tool, duration_ms FROM tool_calls WHERE project_id = $1 AND created_at >= $2 AND created_at < $3 \
         AND status IN ('succeeded', 'failed'){own} ORDER BY created_at DESC LIMIT $4"
    );
    let mut q = sqlx::query_as(&sql)
        .bind(project_id)
        .bind(from_ms)
        .bind(to_ms)
        .bind(limit);
    if let Some(u) = user_id {
        q = q.bind(u);
    }
    Ok(q.fetch_all(ex).await?)
}

/// What `call_histogram` groups a project's calls by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallGroup {
    Tool,
    /// The person (with their email as the label).
    User,
    Key,
    /// The UTC day, as days since the epoch.
    Day,
}

impl CallGroup {
    pub fn parse(s: &str) -> Option<CallGroup> {
        match s {
            "tool" => Some(CallGroup::Tool),
            "user" => Some(CallGroup::User),
            "key" => Some(CallGroup::Key),
            "day" => Some(CallGroup::Day),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            CallGroup::Tool => "tool",
            CallGroup::User => "user",
            CallGroup::Key => "key",
            CallGroup::Day => "day",
        }
    }
}

/// One bar of `call_histogram`.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct CallBar {
    pub grp: String,
    /// The user's email when grouped by user, else empty.
    pub label: String,
    pub status: String,
    /// 1 when refused by a rate limit or quota.
    pub limited: i64,
    pub duration_ms: i64,
    pub n: i64,
}

/// A project's calls within `[from_ms, to_ms)` counted per group, status, limit refusal and
/// handler time in ms: a histogram exact percentiles are read from, bounded by the distinct
/// times rather than the calls. With `user_id`, only that user's.
pub async fn call_histogram<'e>(
    ex: impl Exec<'e>,
    project_id: &str,
    from_ms: i64,
    to_ms: i64,
    by: CallGroup,
    user_id: Option<&str>,
) -> Result<Vec<CallBar>> {
    let (grp, label) = match by {
        CallGroup::Tool => ("COALESCE(a.tool, '')", "''"),
        CallGroup::User => ("COALESCE(a.user_id, '')", "COALESCE(u.email, '')"),
        CallGroup::Key => ("COALESCE(a.api_key_id, '')", "''"),
        CallGroup::Day => (
            "CAST(CAST(a.created_at / 86400000 AS BIGINT) AS TEXT)",
            "''",
        ),
    };
    // PostgreSQL refuses a constant in GROUP BY: only a real label is grouped by.
    let label_group = if label == "''" {
        String::new()
    } else {
        format!(", {label}")
    };
    let own = if user_id.is_some() {
        " AND a.user_id = $4"
    } else {
        ""
    };
    let sql = format!(
        "SELECT {grp} AS grp, {label} AS label, a.status AS status, \
         CAST(CASE WHEN a.error_code = 'RATE_LIMITED' THEN 1 ELSE 0 END AS BIGINT) AS limited, \
         CAST(COALESCE(a.duration_ms, 0) AS BIGINT) AS duration_ms, CAST(COUNT(*) AS BIGINT) AS n \
         FROM audit_events a LEFT JOIN users u ON u.id = a.user_id \
         WHERE a.project_id = $1 AND a.action = 'tool.execute' AND a.created_at >= $2 AND a.created_at < $3{own} \
         GROUP BY {grp}{label_group}, a.status, CASE WHEN a.error_code = 'RATE_LIMITED' THEN 1 ELSE 0 END, COALESCE(a.duration_ms, 0) \
         ORDER BY 1"
    );
    let mut q = sqlx::query_as(&sql)
        .bind(project_id)
        .bind(from_ms)
        .bind(to_ms);
    if let Some(u) = user_id {
        q = q.bind(u);
    }
    Ok(q.fetch_all(ex).await?)
}
