//! Server functions of the MCP servers pages: list and register upstream servers, remote or
//! local (stdio) (with a picker of the project's vault secrets), refresh and delete them, review a server's tools
//! (approve a changed or new tool, override side effects).

use leptos::prelude::*;

use crate::AppError;
pub use workbench_model::catalog::SideEffects;
pub use workbench_model::upstream::{
    BreakerState, ItemKind, McpItemView, McpProcessView, McpServerDetail, McpServerView,
    McpServersData, McpToolView, ProcessState, ServerState, ToolState,
};

#[cfg(feature = "ssr")]
use crate::ssr;

#[cfg(feature = "ssr")]
fn view_of(s: workbench_core::upstream::ServerView) -> McpServerView {
    McpServerView {
        id: s.id,
        name: s.name,
        url: s.url,
        auth_type: s.auth_type.to_owned(),
        tool_prefix: s.tool_prefix,
        state: s.state,
        breaker: s.breaker,
        available: s.tool_counts.available,
        unavailable: s.tool_counts.unavailable,
        pending_review: s.tool_counts.pending_review,
        last_refresh_at: s.last_refresh_at,
        last_error: s.last_error,
    }
}

#[server(endpoint = "mcp_servers_page")]
pub async fn mcp_servers_page() -> Result<McpServersData, AppError> {
    let p = ssr::principal().await?;
    let wb = ssr::wb()?;
    let servers = wb
        .upstreams()
        .list(&p)
        .await?
        .into_iter()
        .map(view_of)
        .collect();
    let secrets = wb
        .vault()
        .list(&p)
        .await?
        .into_iter()
        .map(|s| s.name)
        .collect();
    Ok(McpServersData {
        servers,
        secrets,
        can_manage: p.allows(workbench_core::auth::Operation::McpServersManage),
    })
}

/// The `auth` object of a registration from the form's fields, as REST takes it: only what
/// the chosen kind uses, and only fields that were filled in, so that core's validation (the
/// same as REST's) names what is missing.
#[cfg(feature = "ssr")]
fn auth_of_form(
    kind: &str,
    secret: &str,
    client_id: &str,
    token_url: &str,
    scopes: &str,
) -> Result<Option<serde_json::Value>, String> {
    let (secret, client_id, token_url, scopes) = (
        secret.trim(),
        client_id.trim(),
        token_url.trim(),
        scopes.trim(),
    );
    let mut auth = serde_json::json!({ "type": kind });
    let mut put = |field: &str, value: &str| {
        if !value.is_empty() {
            auth[field] = serde_json::json!(value);
        }
    };
    match kind {
        "" | "none" => return Ok(None),
        "bearer" => put("secret_ref", secret),
        "oauth2" => {
            put("token_url", token_url);
            put("client_id", client_id);
            put("secret_ref", secret);
            put("scope", scopes);
        }
        "user_oauth" => {
            put("client_id", client_id);
            put("secret_ref", secret);
            if !scopes.is_empty() {
                auth["scopes"] = serde_json::json!(scopes.split_whitespace().collect::<Vec<_>>());
            }
        }
        other => return Err(format!("unknown authentication {other:?}")),
    }
    Ok(Some(auth))
}

/// The stdio fields of the registration form, trimmed.
#[cfg(feature = "ssr")]
struct StdioForm {
    command: String,
    /// One argument per line.
    args: String,
    /// `NAME=value` per line (`{{vault:SECRET}}` as a value refers to a vault secret).
    env: String,
    cwd: String,
    /// Paths, one per line.
    read: String,
    write: String,
    memory_mb: String,
    pool: String,
    start: String,
    idle_shutdown_s: String,
}

/// A stdio registration's fields from the form, as REST takes them; core checks them.
#[cfg(feature = "ssr")]
fn stdio_of_form(f: &StdioForm) -> Result<Vec<(&'static str, serde_json::Value)>, String> {
    use serde_json::json;
    let lines = |s: &str| -> Vec<String> {
        s.lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(str::to_owned)
            .collect()
    };
    let number = |field: &str, v: &str| -> Result<Option<u64>, String> {
        if v.is_empty() {
            return Ok(None);
        }
        v.parse()
            .map(Some)
            .map_err(|_| format!("{field} must be a whole number"))
    };
    let mut out = vec![("command", json!(f.command))];
    let args: Vec<String> = f
        .args
        .lines()
        .map(|l| l.trim_end_matches('\r').to_owned())
        .filter(|l| !l.trim().is_empty())
        .collect();
    if !args.is_empty() {
        out.push(("args", json!(args)));
    }
    let mut env = serde_json::Map::new();
    for line in lines(&f.env) {
        let (k, v) = line
            .split_once('=')
            .ok_or_else(|| format!("environment line {line:?} must be VAR=value"))?;
        env.insert(k.trim().to_owned(), json!(v));
    }
    if !env.is_empty() {
        out.push(("env", serde_json::Value::Object(env)));
    }
    if !f.cwd.is_empty() {
        out.push(("cwd", json!(f.cwd)));
    }
    let (read, write) = (lines(&f.read), lines(&f.write));
    if !read.is_empty() || !write.is_empty() {
        out.push(("filesystem", json!({ "read": read, "write": write })));
    }
    if let Some(m) = number("memory limit", &f.memory_mb)? {
        out.push(("limits", json!({ "memory_mb": m })));
    }
    if let Some(n) = number("pool", &f.pool)? {
        out.push(("pool", json!(n)));
    }
    if !f.start.is_empty() {
        out.push(("start", json!(f.start)));
    }
    if let Some(n) = number("idle shutdown", &f.idle_shutdown_s)? {
        out.push(("idle_shutdown_s", json!(n)));
    }
    Ok(out)
}

/// Registers a server from the form, with every option REST offers.
#[allow(clippy::too_many_arguments)]
#[server(endpoint = "register_mcp_server")]
pub async fn register_mcp_server(
    name: String,
    url: Option<String>,
    transport: Option<String>,
    auth: Option<String>,
    secret: Option<String>,
    client_id: Option<String>,
    token_url: Option<String>,
    scopes: Option<String>,
    tool_prefix: Option<String>,
    timeout_ms: Option<String>,
    max_concurrency: Option<String>,
    auto_approve: Option<String>,
    command: Option<String>,
    args: Option<String>,
    env: Option<String>,
    cwd: Option<String>,
    filesystem_read: Option<String>,
    filesystem_write: Option<String>,
    memory_mb: Option<String>,
    pool: Option<String>,
    start: Option<String>,
    idle_shutdown_s: Option<String>,
) -> Result<(), AppError> {
    let p = ssr::principal().await?;
    let text = |v: &Option<String>| v.as_deref().unwrap_or_default().trim().to_owned();
    let transport = match text(&transport).as_str() {
        "" => "http".to_owned(),
        t => t.to_owned(),
    };
    let mut body = serde_json::json!({ "name": name.trim(), "transport": transport });
    if transport == "stdio" {
        let launch = stdio_of_form(&StdioForm {
            command: text(&command),
            args: text(&args),
            env: text(&env),
            cwd: text(&cwd),
            read: text(&filesystem_read),
            write: text(&filesystem_write),
            memory_mb: text(&memory_mb),
            pool: text(&pool),
            start: text(&start),
            idle_shutdown_s: text(&idle_shutdown_s),
        })
        .map_err(AppError::Message)?;
        for (k, v) in launch {
            body[k] = v;
        }
    } else {
        body["url"] = serde_json::json!(text(&url));
    }
    if let Some(a) = auth_of_form(
        &text(&auth),
        &text(&secret),
        &text(&client_id),
        &text(&token_url),
        &text(&scopes),
    )
    .map_err(AppError::Message)?
    {
        body["auth"] = a;
    }
    if !text(&tool_prefix).is_empty() {
        body["tool_prefix"] = serde_json::json!(text(&tool_prefix));
    }
    for (field, value) in [
        ("timeout_ms", text(&timeout_ms)),
        ("max_concurrency", text(&max_concurrency)),
    ] {
        if !value.is_empty() {
            let n: u64 = value
                .parse()
                .map_err(|_| AppError::Message(format!("{field} must be a whole number")))?;
            body[field] = serde_json::json!(n);
        }
    }
    if auto_approve.is_some_and(|v| v == "on" || v == "true") {
        body["auto_approve"] = serde_json::json!(true);
    }
    ssr::wb()?.upstreams().register(&p, &body).await?;
    Ok(())
}

#[server(endpoint = "refresh_mcp_server")]
pub async fn refresh_mcp_server(id: String) -> Result<(), AppError> {
    let p = ssr::principal().await?;
    ssr::wb()?.upstreams().refresh(&p, &id).await?;
    Ok(())
}

#[server(endpoint = "delete_mcp_server")]
pub async fn delete_mcp_server(id: String) -> Result<(), AppError> {
    let p = ssr::principal().await?;
    ssr::wb()?.upstreams().delete(&p, &id).await?;
    Ok(())
}

#[server(endpoint = "mcp_server_page")]
pub async fn mcp_server_page(id: String) -> Result<McpServerDetail, AppError> {
    let p = ssr::principal().await?;
    let wb = ssr::wb()?;
    let full = match wb.upstreams().get(&p, &id).await {
        Ok(s) => s,
        Err(workbench_core::Error::NotFound) => {
            ssr::not_found_status();
            return Err(AppError::Message("not found".into()));
        }
        Err(e) => return Err(e.into()),
    };
    let command_line = full
        .stdio
        .as_ref()
        .filter(|_| p.allows(workbench_core::auth::Operation::McpServersManage))
        .map(|c| {
            std::iter::once(c.command.as_str())
                .chain(c.args.iter().map(String::as_str))
                .collect::<Vec<_>>()
                .join(" ")
        });
    let processes = full
        .processes
        .iter()
        .map(|v| McpProcessView {
            state: v.state,
            pid: v.pid,
            restarts: v.restarts,
            uptime_ms: v.uptime_ms,
            memory_bytes: v.memory_bytes,
            last_exit: v.last_exit.clone(),
            next_start_in_ms: v.next_start_in_ms,
            confinement: v.confinement.clone(),
            stderr_tail: v.stderr_tail.clone(),
        })
        .collect();
    let server = view_of(full);
    let pretty = |v: &serde_json::Value| serde_json::to_string_pretty(v).unwrap_or_default();
    let tools = wb
        .upstreams()
        .tools(&p, &id)
        .await?
        .into_iter()
        .map(|t| McpToolView {
            name: t.name,
            catalog_name: t.catalog_name,
            status: t.status,
            side_effects: t.side_effects,
            side_effects_overridden: t.side_effects_overridden,
            description: t.description,
            input_schema: pretty(&t.input_schema),
            approved_description: t.approved_description,
            approved_input_schema: t.approved_input_schema.as_ref().map(pretty),
            collision: t.collision,
            name_override: t.name_override,
            description_override: t.description_override,
        })
        .collect();
    let reindent = |s: String| {
        serde_json::from_str::<serde_json::Value>(&s)
            .map(|v| pretty(&v))
            .unwrap_or(s)
    };
    let items = wb
        .upstreams()
        .items(&p, &id)
        .await?
        .into_iter()
        .map(|mut i| {
            i.body = reindent(i.body);
            i.approved_body = i.approved_body.map(reindent);
            i
        })
        .collect();
    Ok(McpServerDetail {
        server,
        tools,
        can_manage: p.allows(workbench_core::auth::Operation::McpServersReview),
        command_line,
        processes,
        items,
    })
}

/// Approves one held prompt, resource or resource template (`kind`: prompt, resource or
/// resource_template; `key`: its upstream name or URI).
#[server(endpoint = "approve_mcp_item")]
pub async fn approve_mcp_item(id: String, kind: String, key: String) -> Result<(), AppError> {
    let p = ssr::principal().await?;
    let kind =
        ItemKind::parse(&kind).ok_or_else(|| AppError::Message("unknown item kind".into()))?;
    ssr::wb()?
        .upstreams()
        .approve_items(&p, &id, kind, std::slice::from_ref(&key))
        .await?;
    Ok(())
}

#[server(endpoint = "approve_mcp_tool")]
pub async fn approve_mcp_tool(id: String, tool: String) -> Result<(), AppError> {
    let p = ssr::principal().await?;
    ssr::wb()?
        .upstreams()
        .approve(&p, &id, std::slice::from_ref(&tool))
        .await?;
    Ok(())
}

/// `side_effects` empty clears the override.
#[server(endpoint = "set_mcp_tool_side_effects")]
pub async fn set_mcp_tool_side_effects(
    id: String,
    tool: String,
    side_effects: String,
) -> Result<(), AppError> {
    let p = ssr::principal().await?;
    let value = match side_effects.as_str() {
        "" => None,
        other => Some(SideEffects::parse(other).ok_or_else(|| {
            AppError::Message("side effects must be none, network, write or destructive".into())
        })?),
    };
    ssr::wb()?
        .upstreams()
        .set_side_effects(&p, &id, &tool, value)
        .await?;
    Ok(())
}

/// Renames and/or re-describes a tool project-wide; an empty field goes back to the upstream's.
#[server(endpoint = "set_mcp_tool_text")]
pub async fn set_mcp_tool_text(
    id: String,
    tool: String,
    name: String,
    description: String,
) -> Result<(), AppError> {
    let p = ssr::principal().await?;
    let given = |s: String| Some(Some(s).filter(|s| !s.trim().is_empty()));
    ssr::wb()?
        .upstreams()
        .set_text(
            &p,
            &id,
            &tool,
            workbench_core::upstream::TextOverrides {
                name: given(name),
                description: given(description),
            },
        )
        .await?;
    Ok(())
}
