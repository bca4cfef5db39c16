//! Usage counters: meters summed per project, API key, tool and UTC day.

use super::Exec;
use crate::Result;

pub async fn add<'e>(
    ex: impl Exec<'e>,
    project_id: &str,
    api_key_id: &str,
    tool: &str,
    day: &str,
    meter: &str,
    value: i64,
) -> Result<()> {
    sqlx::query(
        "INSERT INTO usage_counters (project_id, api_key_id, tool, day, meter, value) VALUES ($1, $2, $3, $4, $5, $6) \
         ON CONFLICT (project_id, api_key_id, tool, day, meter) DO UPDATE SET value = usage_counters.value + excluded.value",
    )
    .bind(project_id)
    .bind(api_key_id)
    .bind(tool)
    .bind(day)
    .bind(meter)
    .bind(value)
    .execute(ex)
    .await?;
    Ok(())
}

/// `(tool, meter, total)` for a project since `since_day` (inclusive, `YYYY-MM-DD`).
pub async fn totals_by_tool<'e>(ex: impl Exec<'e>, project_id: &str, since_day: &str) -> Result<Vec<(String, String, i64)>> {
    Ok(sqlx::query_as(
        "SELECT tool, meter, CAST(COALESCE(SUM(value), 0) AS BIGINT) FROM usage_counters \
         WHERE project_id = $1 AND day >= $2 GROUP BY tool, meter",
    )
    .bind(project_id)
    .bind(since_day)
    .fetch_all(ex)
    .await?)
}

/// Rows `(day, api_key_id, tool, meter, value)` of a project within `[from_day, to_day]`.
pub async fn rows<'e>(
    ex: impl Exec<'e>,
    project_id: &str,
    from_day: &str,
    to_day: &str,
) -> Result<Vec<(String, String, String, String, i64)>> {
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
