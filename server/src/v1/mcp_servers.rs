//! Upstream MCP servers over REST (seed 004): `POST/GET /v1/mcp/servers`,
//! `GET/DELETE /v1/mcp/servers/{id}`, `POST /v1/mcp/servers/{id}/refresh`, the review
//! endpoints `GET /v1/mcp/servers/{id}/tools`, `…/prompts`, `…/resources` and
//! `POST /v1/mcp/servers/{id}/approve`, and
//! `PATCH /v1/mcp/servers/{id}/tools/{name}` for a side-effects override. Changing anything
//! needs an admin's key; a registration that does not validate or connect is 422.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};
use workbench_core::catalog::SideEffects;
use workbench_core::upstream::{ItemKind, TextOverrides};

use super::body::{invalid_request, object_as, unprocessable};
use super::JsonBody;
use crate::api_auth::ApiCaller;
use crate::api_error::ApiError;
use crate::state::AppState;

pub async fn create(
    State(state): State<AppState>,
    ApiCaller(who): ApiCaller,
    JsonBody(body): JsonBody,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let view = state
        .wb
        .upstreams()
        .register(&who, &body)
        .await
        .map_err(unprocessable)?;
    Ok((StatusCode::CREATED, Json(json!(view))))
}

pub async fn list(
    State(state): State<AppState>,
    ApiCaller(who): ApiCaller,
) -> Result<Json<Value>, ApiError> {
    let data = state.wb.upstreams().list(&who).await?;
    Ok(Json(json!({ "object": "list", "data": data })))
}

pub async fn get_one(
    State(state): State<AppState>,
    ApiCaller(who): ApiCaller,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    Ok(Json(json!(state.wb.upstreams().get(&who, &id).await?)))
}

pub async fn delete(
    State(state): State<AppState>,
    ApiCaller(who): ApiCaller,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    state.wb.upstreams().delete(&who, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}

pub async fn refresh(
    State(state): State<AppState>,
    ApiCaller(who): ApiCaller,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    Ok(Json(json!(state.wb.upstreams().refresh(&who, &id).await?)))
}

pub async fn tools(
    State(state): State<AppState>,
    ApiCaller(who): ApiCaller,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let data = state.wb.upstreams().tools(&who, &id).await?;
    Ok(Json(json!({ "object": "list", "data": data })))
}

/// A server's prompts (`prompts`) or its resources and resource templates (`resources`) for
/// review: status, what the upstream lists, and what was approved when an item changed.
pub async fn items(
    State(state): State<AppState>,
    ApiCaller(who): ApiCaller,
    Path((id, kind)): Path<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    let prompts = match kind.as_str() {
        "prompts" => true,
        "resources" => false,
        _ => return Err(workbench_core::Error::NotFound.into()),
    };
    let data: Vec<_> = state
        .wb
        .upstreams()
        .items(&who, &id)
        .await?
        .into_iter()
        .filter(|i| (i.kind == ItemKind::Prompt) == prompts)
        .map(|i| {
            let json = |s: &str| serde_json::from_str::<Value>(s).unwrap_or(Value::Null);
            let mut v = json!({
                "object": "mcp_server_item",
                "kind": i.kind,
                "key": i.key,
                "exposed": i.exposed,
                "status": i.status,
                "listed": json(&i.body),
            });
            if let Some(a) = &i.approved_body {
                v["approved"] = json(a);
            }
            v
        })
        .collect();
    Ok(Json(json!({ "object": "list", "data": data })))
}

/// What an approval names: tools, prompts and resources (templates among them), each by
/// its upstream name or URI or as agents see it; at least one.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Approval {
    #[serde(default)]
    tools: Vec<String>,
    #[serde(default)]
    prompts: Vec<String>,
    #[serde(default)]
    resources: Vec<String>,
}

pub async fn approve(
    State(state): State<AppState>,
    ApiCaller(who): ApiCaller,
    Path(id): Path<String>,
    JsonBody(body): JsonBody,
) -> Result<Json<Value>, ApiError> {
    const SHAPE: &str =
        r#"{"tools"?: [names], "prompts"?: [names], "resources"?: [uris]}, at least one non-empty"#;
    let a: Approval = object_as(body, SHAPE)?;
    if a.tools.is_empty() && a.prompts.is_empty() && a.resources.is_empty() {
        return Err(invalid_request(format!(
            "nothing to approve; the body is {SHAPE}"
        )));
    }
    let upstreams = state.wb.upstreams();
    let mut view = None;
    if !a.tools.is_empty() {
        view = Some(
            upstreams
                .approve(&who, &id, &a.tools)
                .await
                .map_err(unprocessable)?,
        );
    }
    for (kind, keys) in [
        (ItemKind::Prompt, &a.prompts),
        (ItemKind::Resource, &a.resources),
    ] {
        if !keys.is_empty() {
            view = Some(
                upstreams
                    .approve_items(&who, &id, kind, keys)
                    .await
                    .map_err(unprocessable)?,
            );
        }
    }
    Ok(Json(json!(view)))
}

/// `PATCH /v1/mcp/servers/{id}/tools/{name}`: any of `side_effects` (`none`, `network`,
/// `write`, `destructive`), `name` (the project-wide name after the server's prefix) and
/// `description`; `null` goes back to what the upstream says. Fields left out stay.
pub async fn patch_tool(
    State(state): State<AppState>,
    ApiCaller(who): ApiCaller,
    Path((id, name)): Path<(String, String)>,
    JsonBody(body): JsonBody,
) -> Result<Json<Value>, ApiError> {
    const SHAPE: &str = r#"{"side_effects"?: "none"|"network"|"write"|"destructive"|null, "name"?: string|null, "description"?: string|null}"#;
    let refuse = |why: &str| invalid_request(format!("expected {SHAPE}: {why}"));
    let fields = body
        .as_object()
        .ok_or_else(|| refuse("the body is not a JSON object"))?;
    if fields.is_empty() {
        return Err(refuse("no field was given"));
    }
    if let Some(k) = fields
        .keys()
        .find(|k| !matches!(k.as_str(), "side_effects" | "name" | "description"))
    {
        return Err(refuse(&format!("unknown field `{k}`")));
    }
    let text = |k: &str| -> Result<Option<Option<String>>, ApiError> {
        match fields.get(k) {
            None => Ok(None),
            Some(Value::Null) => Ok(Some(None)),
            Some(Value::String(s)) => Ok(Some(Some(s.clone()))),
            Some(_) => Err(refuse(&format!("`{k}` must be a string or null"))),
        }
    };
    let overrides = TextOverrides {
        name: text("name")?,
        description: text("description")?,
    };
    let upstreams = state.wb.upstreams();
    let mut view = None;
    if let Some(v) = fields.get("side_effects") {
        let side_effects: Option<SideEffects> =
            serde_json::from_value(v.clone()).map_err(|_| {
                refuse("`side_effects` must be none, network, write, destructive or null")
            })?;
        view = Some(
            upstreams
                .set_side_effects(&who, &id, &name, side_effects)
                .await?,
        );
    }
    if overrides.name.is_some() || overrides.description.is_some() {
        view = Some(
            upstreams
                .set_text(&who, &id, &name, overrides)
                .await
                .map_err(unprocessable)?,
        );
    }
    Ok(Json(json!(view)))
}
