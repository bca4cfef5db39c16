//! Upstream MCP servers of a project, the tools each offers (what the upstream last said, what
//! an admin last approved, and the tool's status), and which server owns each exposed tool name.

use sqlx::FromRow;

use super::Exec;
use crate::Result;

#[derive(Debug, Clone, FromRow)]
pub struct ServerRow {
    pub id: String,
    pub project_id: String,
    pub name: String,
    pub transport: String,
    pub url: String,
    /// JSON: `{type: none}` | `{type: bearer, secret_ref}` | `{type: oauth2, token_url, client_id, secret_ref, scope?}`.
    pub auth: String,
    pub tool_prefix: String,
    pub timeout_ms: i64,
    pub max_concurrency: i64,
    pub auto_approve: i64,
    pub last_refresh_at: Option<i64>,
    pub last_error: Option<String>,
    pub created_at: i64,
    pub updated_at: i64,
    /// A stdio server's start settings (JSON), else NULL.
    pub launch: Option<String>,
}

const SERVER_COLUMNS: &str =
    "id, project_id, name, transport, url, auth, tool_prefix, timeout_ms, max_concurrency, \
    auto_approve, last_refresh_at, last_error, created_at, updated_at, launch";

pub use workbench_model::upstream::ToolState;

#[derive(Debug, Clone, FromRow)]
pub struct ToolRow {
    pub server_id: String,
    pub name: String,
    pub description: String,
    pub input_schema: String,
    pub output_schema: Option<String>,
    pub annotations: Option<String>,
    pub side_effects_override: Option<String>,
    #[sqlx(try_from = "String")]
    pub status: ToolState,
    pub fingerprint: String,
    pub approved_fingerprint: Option<String>,
    pub approved_description: Option<String>,
    pub approved_input_schema: Option<String>,
    pub updated_at: i64,
    /// The annotations as an admin last approved them (JSON).
    pub approved_annotations: Option<String>,
    /// An admin's project-wide name for the tool (after the server's prefix).
    pub name_override: Option<String>,
    /// An admin's project-wide description of the tool.
    pub description_override: Option<String>,
}

const TOOL_COLUMNS: &str = "server_id, name, description, input_schema, output_schema, annotations, side_effects_override, \
    status, fingerprint, approved_fingerprint, approved_description, approved_input_schema, updated_at, approved_annotations, \
    name_override, description_override";

/// Which server owns an exposed catalog name (`<tool_prefix><tool>`) of a project.
#[derive(Debug, Clone, PartialEq, Eq, FromRow)]
pub struct NameOwner {
    pub name: String,
    pub server_id: String,
    /// The tool's name at the upstream.
    pub tool: String,
}

pub async fn insert_server<'e>(ex: impl Exec<'e>, r: &ServerRow) -> Result<()> {
    sqlx::query(&format!("INSERT INTO mcp_servers ({SERVER_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)"))
        .bind(&r.id)
        .bind(&r.project_id)
        .bind(&r.name)
        .bind(&r.transport)
        .bind(&r.url)
        .bind(&r.auth)
        .bind(&r.tool_prefix)
        .bind(r.timeout_ms)
        .bind(r.max_concurrency)
        .bind(r.auto_approve)
        .bind(r.last_refresh_at)
        .bind(&r.last_error)
        .bind(r.created_at)
        .bind(r.updated_at)
        .bind(&r.launch)
        .execute(ex)
        .await?;
    Ok(())
}

pub async fn list_servers<'e>(ex: impl Exec<'e>, project_id: &str) -> Result<Vec<ServerRow>> {
    Ok(sqlx::query_as(&format!(
        "SELECT {SERVER_COLUMNS} FROM mcp_servers WHERE project_id = $1 ORDER BY name"
    ))
    .bind(project_id)
    .fetch_all(ex)
    .await?)
}

pub async fn get_server<'e>(
    ex: impl Exec<'e>,
    project_id: &str,
    id: &str,
) -> Result<Option<ServerRow>> {
    Ok(sqlx::query_as(&format!(
        "SELECT {SERVER_COLUMNS} FROM mcp_servers WHERE project_id = $1 AND id = $2"
    ))
    .bind(project_id)
    .bind(id)
    .fetch_optional(ex)
    .await?)
}

pub async fn delete_server<'e>(ex: impl Exec<'e>, project_id: &str, id: &str) -> Result<bool> {
    let r = sqlx::query("DELETE FROM mcp_servers WHERE project_id = $1 AND id = $2")
        .bind(project_id)
        .bind(id)
        .execute(ex)
        .await?;
    Ok(r.rows_affected() == 1)
}

/// What every instance compares to decide whether to rebuild a project's upstream tools: each
/// server's id and last change.
pub async fn versions<'e>(ex: impl Exec<'e>) -> Result<Vec<(String, String, i64)>> {
    Ok(
        sqlx::query_as(
            "SELECT project_id, id, updated_at FROM mcp_servers ORDER BY project_id, id",
        )
        .fetch_all(ex)
        .await?,
    )
}

pub async fn set_refreshed<'e>(
    ex: impl Exec<'e>,
    id: &str,
    at: i64,
    error: Option<&str>,
) -> Result<()> {
    sqlx::query("UPDATE mcp_servers SET last_refresh_at = $1, last_error = $2, updated_at = $1 WHERE id = $3")
        .bind(at)
        .bind(error)
        .bind(id)
        .execute(ex)
        .await?;
    Ok(())
}

/// Replaces a server's connection settings in place (same id, name and tool prefix).
pub async fn update_settings<'e>(ex: impl Exec<'e>, r: &ServerRow) -> Result<bool> {
    let done = sqlx::query(
        "UPDATE mcp_servers SET transport = $1, url = $2, auth = $3, timeout_ms = $4, \
         max_concurrency = $5, auto_approve = $6, launch = $7, last_error = NULL, updated_at = $8 \
         WHERE project_id = $9 AND id = $10",
    )
    .bind(&r.transport)
    .bind(&r.url)
    .bind(&r.auth)
    .bind(r.timeout_ms)
    .bind(r.max_concurrency)
    .bind(r.auto_approve)
    .bind(&r.launch)
    .bind(r.updated_at)
    .bind(&r.project_id)
    .bind(&r.id)
    .execute(ex)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Marks a server changed (its tools were approved or overridden) so other instances rebuild.
pub async fn touch<'e>(ex: impl Exec<'e>, id: &str, at: i64) -> Result<()> {
    sqlx::query("UPDATE mcp_servers SET updated_at = $1 WHERE id = $2")
        .bind(at)
        .bind(id)
        .execute(ex)
        .await?;
    Ok(())
}

pub async fn list_tools<'e>(ex: impl Exec<'e>, server_id: &str) -> Result<Vec<ToolRow>> {
    Ok(sqlx::query_as(&format!(
        "SELECT {TOOL_COLUMNS} FROM mcp_server_tools WHERE server_id = $1 ORDER BY name"
    ))
    .bind(server_id)
    .fetch_all(ex)
    .await?)
}

/// Inserts or replaces one tool row.
pub async fn upsert_tool<'e>(ex: impl Exec<'e>, r: &ToolRow) -> Result<()> {
    sqlx::query(&format!(
        "INSERT INTO mcp_server_tools ({TOOL_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16) \
         ON CONFLICT (server_id, name) DO UPDATE SET description = excluded.description, input_schema = excluded.input_schema, \
         output_schema = excluded.output_schema, annotations = excluded.annotations, side_effects_override = excluded.side_effects_override, \
         status = excluded.status, fingerprint = excluded.fingerprint, approved_fingerprint = excluded.approved_fingerprint, \
         approved_description = excluded.approved_description, approved_input_schema = excluded.approved_input_schema, \
         updated_at = excluded.updated_at, approved_annotations = excluded.approved_annotations, \
         name_override = excluded.name_override, description_override = excluded.description_override"
    ))
    .bind(&r.server_id)
    .bind(&r.name)
    .bind(&r.description)
    .bind(&r.input_schema)
    .bind(&r.output_schema)
    .bind(&r.annotations)
    .bind(&r.side_effects_override)
    .bind(r.status.as_str())
    .bind(&r.fingerprint)
    .bind(&r.approved_fingerprint)
    .bind(&r.approved_description)
    .bind(&r.approved_input_schema)
    .bind(r.updated_at)
    .bind(&r.approved_annotations)
    .bind(&r.name_override)
    .bind(&r.description_override)
    .execute(ex)
    .await?;
    Ok(())
}

/// Every owned upstream tool name of a project.
pub async fn name_owners<'e>(ex: impl Exec<'e>, project_id: &str) -> Result<Vec<NameOwner>> {
    Ok(sqlx::query_as(
        "SELECT name, server_id, tool FROM mcp_tool_names WHERE project_id = $1 ORDER BY name",
    )
    .bind(project_id)
    .fetch_all(ex)
    .await?)
}

/// Gives up the names a server's tool owns (before it takes another: an admin renamed it).
pub async fn release_names<'e>(ex: impl Exec<'e>, server_id: &str, tool: &str) -> Result<()> {
    sqlx::query("DELETE FROM mcp_tool_names WHERE server_id = $1 AND tool = $2")
        .bind(server_id)
        .bind(tool)
        .execute(ex)
        .await?;
    Ok(())
}

/// Claims a catalog name for a server's tool unless some server owns it already; true when
/// this call claimed it. A name stays claimed until its server is deleted.
pub async fn claim_name<'e>(
    ex: impl Exec<'e>,
    project_id: &str,
    owner: &NameOwner,
    at: i64,
) -> Result<bool> {
    let r = sqlx::query(
        "INSERT INTO mcp_tool_names (project_id, name, server_id, tool, claimed_at) VALUES ($1, $2, $3, $4, $5) \
         ON CONFLICT (project_id, name) DO NOTHING",
    )
    .bind(project_id)
    .bind(&owner.name)
    .bind(&owner.server_id)
    .bind(&owner.tool)
    .bind(at)
    .execute(ex)
    .await?;
    Ok(r.rows_affected() == 1)
}
