//! Usage counters: meters summed per project, API key, tool and UTC day.

use super::Exec;
use crate::Result;

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

/// A tool's total of one meter.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct ToolTotal {
    pub tool: String,
    #[sqlx(try_from = "String")]
    pub meter: Meter,
    pub total: i64,
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
    if meters.is_empty() {
        return Ok(());
    }
    let mut sql = String::from("INSERT INTO usage_counters (project_id, api_key_id, tool, day, meter, value) VALUES ");
    for i in 0..meters.len() {
        let b = 5 + i * 2;
        if i > 0 {
            sql.push_str(", ");
        }
        sql.push_str(&format!("($1, $2, $3, $4, ${b}, ${})", b + 1));
    }
    sql.push_str(" ON CONFLICT (project_id, api_key_id, tool, day, meter) DO UPDATE SET value = usage_counters.value + excluded.value");
    let mut q = sqlx::query(&sql).bind(project_id).bind(api_key_id).bind(tool).bind(day);
    for (meter, value) in meters {
        q = q.bind(meter.as_str()).bind(*value);
    }
    q.execute(ex).await?;
    Ok(())
}

/// Each tool's total per meter for a project since `since_day` (inclusive, `YYYY-MM-DD`).
pub async fn totals_by_tool<'e>(ex: impl Exec<'e>, project_id: &str, since_day: &str) -> Result<Vec<ToolTotal>> {
    Ok(sqlx::query_as(
        "SELECT tool, meter, CAST(COALESCE(SUM(value), 0) AS BIGINT) AS total FROM usage_counters \
         WHERE project_id = $1 AND day >= $2 GROUP BY tool, meter",
    )
    .bind(project_id)
    .bind(since_day)
    .fetch_all(ex)
    .await?)
}

/// The counters of a project within `[from_day, to_day]`.
pub async fn rows<'e>(ex: impl Exec<'e>, project_id: &str, from_day: &str, to_day: &str) -> Result<Vec<UsageCounter>> {
    Ok(sqlx::query_as(
        "SELECT day, api_key_id, tool, meter, value FROM usage_counters \
         WHERE project_id = $1 AND day >= $2 AND day <= $3 ORDER BY day, api_key_id, tool, meter",
    )
    .bind(project_id)
    .bind(from_day)
    .bind(to_day)
    .fetch_all(ex)
    .await?)
}
