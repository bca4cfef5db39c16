//! `superset_export_csv` as seed 000's compose example uses it: `{sql}` in, `{filename, csv,
//! row_count}` out. Running SQL takes several requests (the database when none is named, the
//! CSRF token a cookie session needs for a POST, then SQL Lab's execute) and the CSV is built
//! from the rows Superset answers, so no request template can express it. A chart's saved query
//! (`chart_id`) is still exported as Superset's own CSV.

use serde_json::{json, Value};

use super::get;
use crate::catalog::{CallContext, HandlerError};
use crate::integrations::request::{self, Body, Prepared};
use crate::plugins::client::Client;

/// `sql` or `chart_id`, exactly one.
pub async fn export_csv(
    tool: &Client,
    ctx: &CallContext<'_>,
    args: Value,
) -> Result<Value, HandlerError> {
    let sql = args.get("sql").and_then(Value::as_str);
    let chart = args.get("chart_id").and_then(Value::as_u64);
    match (sql, chart) {
        (Some(sql), None) => from_sql(tool, ctx, &args, sql).await,
        (None, Some(chart)) => from_chart(tool, ctx, chart).await,
        (Some(_), Some(_)) => Err(HandlerError::invalid(
            "/chart_id",
            "give sql or chart_id, not both",
        )),
        (None, None) => Err(HandlerError::invalid(
            "/sql",
            "is required (or chart_id to export a chart's saved query)",
        )),
    }
}

/// `GET /api/v1/chart/{id}/data/?format=csv`: the chart's query, run now, as Superset's CSV.
async fn from_chart(
    tool: &Client,
    ctx: &CallContext<'_>,
    chart: u64,
) -> Result<Value, HandlerError> {
    let base = tool.integration.base_url.clone();
    let mut url = request::join(&base, &format!("/api/v1/chart/{chart}/data/"));
    url.query_pairs_mut().append_pair("format", "csv");
    let prepared = Prepared {
        method: reqwest::Method::GET,
        url,
        headers: Vec::new(),
        body: None,
    };
    let csv = tool.text_of(tool.send_authorized(ctx, || Ok(prepared.clone())).await?)?;
    Ok(json!({
        "filename": format!("superset_chart_{chart}.csv"),
        "row_count": csv_rows(&csv),
        "csv": csv,
    }))
}

/// SQL Lab: `POST /api/v1/sqllab/execute/` (synchronously, `runAsync: false`) answers the rows
/// as `data` (one object per row) with their `columns`; the CSV is written from them, so the
/// query runs once and `row_count` counts exactly the rows in it.
async fn from_sql(
    tool: &Client,
    ctx: &CallContext<'_>,
    args: &Value,
    sql: &str,
) -> Result<Value, HandlerError> {
    let base = tool.integration.base_url.clone();
    let database_id = match args.get("database_id").and_then(Value::as_u64) {
        Some(id) => id,
        None => only_database(tool, ctx).await?,
    };
    // A session cookie is checked for CSRF on every POST; the token is the session's own.
    let csrf = tool.body_of(
        tool.send_authorized(ctx, || {
            request::prepare(&base, &get("/api/v1/security/csrf_token/"), &json!({}))
        })
        .await?,
    )?;
    let csrf = csrf
        .get("result")
        .and_then(Value::as_str)
        .ok_or_else(|| HandlerError::failed("Apache Superset did not answer a CSRF token"))?
        .to_owned();
    // Superset keeps a query under the client's id (at most 11 characters).
    let mut body = json!({
        "database_id": database_id,
        "sql": sql,
        "runAsync": false,
        "client_id": crate::crypto::random_base62(11),
    });
    if let Some(schema) = args.get("schema").and_then(Value::as_str) {
        body["schema"] = json!(schema);
    }
    let prepared = Prepared {
        method: reqwest::Method::POST,
        url: request::join(&base, "/api/v1/sqllab/execute/"),
        headers: vec![
            ("X-CSRFToken".into(), csrf),
            // Flask-WTF checks the Referer of a CSRF-protected request made over HTTPS.
            (
                "Referer".into(),
                request::join(&base, "/sqllab/").to_string(),
            ),
        ],
        body: Some(Body::Json(body)),
    };
    let reply = tool.send_authorized(ctx, || Ok(prepared.clone())).await?;
    if reply.status == 202 {
        return Err(HandlerError::failed(
            "Apache Superset runs this database's queries asynchronously; export a saved chart \
             with chart_id instead",
        ));
    }
    let answer = tool.body_of(reply)?;
    if answer.get("status").and_then(Value::as_str) != Some("success") {
        return Err(HandlerError::failed(format!(
            "Apache Superset did not run the query: {}",
            request::error_reason(answer.to_string().as_bytes())
        )));
    }
    let names: Vec<String> = answer
        .get("columns")
        .and_then(Value::as_array)
        .map(|cols| {
            cols.iter()
                .filter_map(|c| {
                    c.get("name")
                        .or_else(|| c.get("column_name"))
                        .and_then(Value::as_str)
                        .map(str::to_owned)
                })
                .collect()
        })
        .unwrap_or_default();
    let rows = answer
        .get("data")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut csv = csv_line(names.iter().map(|n| n.to_owned()));
    for row in &rows {
        csv.push_str(&csv_line(names.iter().map(|n| cell(row.get(n)))));
    }
    let query_id = answer
        .get("query_id")
        .and_then(Value::as_u64)
        .or_else(|| answer.pointer("/query/queryId").and_then(Value::as_u64));
    let filename = match query_id {
        Some(id) => format!("superset_query_{id}.csv"),
        None => "superset_query.csv".to_owned(),
    };
    Ok(json!({ "filename": filename, "csv": csv, "row_count": rows.len() }))
}

/// The database SQL runs on when the caller names none: the only one Superset lists.
async fn only_database(tool: &Client, ctx: &CallContext<'_>) -> Result<u64, HandlerError> {
    let base = tool.integration.base_url.clone();
    let list = tool.body_of(
        tool.send_authorized(ctx, || {
            request::prepare(&base, &get("/api/v1/database/"), &json!({}))
        })
        .await?,
    )?;
    let dbs: Vec<(u64, String)> = list
        .get("result")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|d| {
                    Some((
                        d.get("id")?.as_u64()?,
                        d.get("database_name")
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_owned(),
                    ))
                })
                .collect()
        })
        .unwrap_or_default();
    match dbs.as_slice() {
        [(id, _)] => Ok(*id),
        [] => Err(HandlerError::failed(
            "Apache Superset lists no database this account can query",
        )),
        many => Err(HandlerError::invalid(
            "/database_id",
            format!(
                "is required: Superset has {} databases ({}); see superset_list_databases",
                many.len(),
                many.iter()
                    .map(|(id, name)| format!("{id} {name}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )),
    }
}

/// One cell as CSV text: null is empty, strings as they are, anything else as JSON.
fn cell(v: Option<&Value>) -> String {
    match v {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    }
}

/// One RFC 4180 record ending in `\n`: a field holding a comma, quote or line break is quoted.
fn csv_line(fields: impl Iterator<Item = String>) -> String {
    let mut line = fields
        .map(|f| {
            if f.contains([',', '"', '\n', '\r']) {
                format!("\"{}\"", f.replace('"', "\"\""))
            } else {
                f
            }
        })
        .collect::<Vec<_>>()
        .join(",");
    line.push('\n');
    line
}

/// Data rows of a CSV text with a header: records, line breaks inside quotes not counted.
fn csv_rows(csv: &str) -> usize {
    let mut records: usize = 0;
    let mut quoted = false;
    for c in csv.chars() {
        match c {
            '"' => quoted = !quoted,
            '\n' if !quoted => records += 1,
            _ => {}
        }
    }
    if !csv.is_empty() && !csv.ends_with('\n') {
        records += 1;
    }
    records.saturating_sub(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_quotes_fields_holding_commas_quotes_or_line_breaks() {
        let line = csv_line(
            ["a", "b,c", "say \"hi\"", "two\nlines"]
                .into_iter()
                .map(str::to_owned),
        );
        assert_eq!(line, "a,\"b,c\",\"say \"\"hi\"\"\",\"two\nlines\"\n");
    }

    #[test]
    fn csv_rows_count_records_after_the_header() {
        assert_eq!(csv_rows("ds,revenue\n2024-09-01,1200\n2024-09-02,950\n"), 2);
        assert_eq!(csv_rows("ds,note\n2024-09-01,\"a\nb\"\n"), 1);
        assert_eq!(csv_rows("ds,revenue\n2024-09-01,1200"), 1);
        assert_eq!(csv_rows("ds,revenue\n"), 0);
        assert_eq!(csv_rows(""), 0);
    }
}
