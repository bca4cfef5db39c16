//! The REST API (tier 0, seed 004) under /v1, and the batch form `/rest/{integration}`. Every
//! route needs a bearer API key and declares its operation (see `crate::routes`); bodies are
//! JSON and errors use the API's error shape.

mod api_keys;
mod apps;
mod audit;
mod body;
mod config;
mod confirmations;
mod egress;
mod email;
mod mcp_servers;
mod members;
mod openapi;
mod policies;
mod rest_batch;
mod schedules;
mod settings;
mod sso;
mod tool_sets;
mod tools;
mod usage;

use axum::extract::{DefaultBodyLimit, State};
use axum::http::Method;
use axum::{Json, Router};
use serde_json::{json, Value};
use workbench_core::auth::Operation;

pub use body::JsonBody;

use crate::api_auth::ApiCaller;
use crate::api_error::ApiError;
use crate::routes::{Credential, Routes};
use crate::state::AppState;

/// Largest request body /v1 and /rest accept.
pub const MAX_BODY_BYTES: usize = 4 * 1024 * 1024;

/// The REST routes, each with its credential and operation (D21): the route table's checks
/// run before a handler, so a handler sees only callers its operation allows.
pub fn routes(state: &AppState) -> Routes {
    use Credential::{ApiKey, None as Public};
    use Method as M;
    use Operation as Op;
    Routes::new(state)
        .add(M::GET, "/v1/me", ApiKey, Op::Identity, me)
        .add(M::GET, "/v1/openapi.json", Public, Op::Discovery, openapi::document)
        .add(M::GET, "/v1/tools", ApiKey, Op::ToolsRead, tools::list)
        .add(M::POST, "/v1/tools/invoke", ApiKey, Op::ToolsRun, tools::invoke)
        .add(M::GET, "/v1/tools/calls/{id}", ApiKey, Op::CallsRead, tools::get_call)
        .add(M::GET, "/v1/tools/confirmations", ApiKey, Op::ConfirmationsDecide, confirmations::list)
        // A key may read the confirmation of its own held call; core narrows the rest.
        .add(M::GET, "/v1/tools/confirmations/{id}", ApiKey, Op::CallsRead, confirmations::get_one)
        .add(M::POST, "/v1/tools/confirmations/{id}", ApiKey, Op::ConfirmationsDecide, confirmations::decide)
        .add(M::GET, "/v1/tools/{name}", ApiKey, Op::ToolsRead, tools::get_one)
        .add(M::GET, "/v1/usage", ApiKey, Op::UsageRead, usage::usage)
        .add(M::GET, "/v1/usage/calls", ApiKey, Op::UsageRead, usage::calls)
        .add(M::GET, "/v1/apps", ApiKey, Op::AppsRead, apps::list)
        .add(M::POST, "/v1/apps", ApiKey, Op::AppsManage, apps::create)
        .add(M::POST, "/v1/apps/import", ApiKey, Op::AppsManage, apps::import)
        .add(M::DELETE, "/v1/apps/{id}", ApiKey, Op::AppsManage, apps::delete)
        .add(M::GET, "/v1/mcp/servers", ApiKey, Op::McpServersRead, mcp_servers::list)
        .add(M::POST, "/v1/mcp/servers", ApiKey, Op::McpServersManage, mcp_servers::create)
        .add(M::GET, "/v1/mcp/servers/{id}", ApiKey, Op::McpServersRead, mcp_servers::get_one)
        .add(M::DELETE, "/v1/mcp/servers/{id}", ApiKey, Op::McpServersManage, mcp_servers::delete)
        .add(M::POST, "/v1/mcp/servers/{id}/refresh", ApiKey, Op::McpServersManage, mcp_servers::refresh)
        .add(M::POST, "/v1/mcp/servers/{id}/approve", ApiKey, Op::McpServersReview, mcp_servers::approve)
        .add(M::GET, "/v1/mcp/servers/{id}/tools", ApiKey, Op::McpServersRead, mcp_servers::tools)
        .add(M::GET, "/v1/mcp/servers/{id}/{kind}", ApiKey, Op::McpServersRead, mcp_servers::items)
        .add(M::PATCH, "/v1/mcp/servers/{id}/tools/{name}", ApiKey, Op::McpServersReview, mcp_servers::patch_tool)
        .add(M::GET, "/v1/policies", ApiKey, Op::PoliciesManage, policies::list)
        .add(M::POST, "/v1/policies", ApiKey, Op::PoliciesManage, policies::create)
        .add(M::GET, "/v1/policies/{id}", ApiKey, Op::PoliciesManage, policies::get_one)
        .add(M::PUT, "/v1/policies/{id}", ApiKey, Op::PoliciesManage, policies::replace)
        .add(M::DELETE, "/v1/policies/{id}", ApiKey, Op::PoliciesManage, policies::delete)
        .add(M::GET, "/v1/sso/providers", ApiKey, Op::SsoManage, sso::list)
        .add(M::PUT, "/v1/sso/providers/{slug}", ApiKey, Op::SsoManage, sso::put)
        .add(M::DELETE, "/v1/sso/providers/{slug}", ApiKey, Op::SsoManage, sso::delete)
        .add(M::POST, "/v1/sso/providers/{slug}/preview", ApiKey, Op::SsoManage, sso::preview)
        .add(M::GET, "/v1/tool-sets", ApiKey, Op::ToolSetsRead, tool_sets::list)
        .add(M::POST, "/v1/tool-sets", ApiKey, Op::ToolSetsManage, tool_sets::create)
        .add(M::GET, "/v1/tool-sets/{id}", ApiKey, Op::ToolSetsRead, tool_sets::get_one)
        .add(M::PUT, "/v1/tool-sets/{id}", ApiKey, Op::ToolSetsManage, tool_sets::replace)
        .add(M::DELETE, "/v1/tool-sets/{id}", ApiKey, Op::ToolSetsManage, tool_sets::delete)
        .add(M::GET, "/v1/api-keys", ApiKey, Op::ApiKeysManage, api_keys::list)
        .add(M::POST, "/v1/api-keys", ApiKey, Op::ApiKeysManage, api_keys::create)
        .add(M::PATCH, "/v1/api-keys/{id}", ApiKey, Op::ApiKeysManage, api_keys::patch)
        .add(M::DELETE, "/v1/api-keys/{id}", ApiKey, Op::ApiKeysManage, api_keys::revoke)
        .add(M::GET, "/v1/audit", ApiKey, Op::AuditRead, audit::list)
        .add(M::GET, "/v1/audit/{id}", ApiKey, Op::AuditRead, audit::get_one)
        .add(M::GET, "/v1/settings", ApiKey, Op::SettingsManage, settings::get)
        .add(M::PATCH, "/v1/settings", ApiKey, Op::SettingsManage, settings::patch)
        .add(M::GET, "/v1/webhooks/deliveries", ApiKey, Op::SettingsManage, settings::deliveries)
        .add(M::GET, "/v1/egress", ApiKey, Op::EgressRead, egress::list)
        .add(M::POST, "/v1/egress", ApiKey, Op::EgressManage, egress::create)
        .add(M::DELETE, "/v1/egress/{pattern}", ApiKey, Op::EgressManage, egress::delete)
        .add(M::GET, "/v1/config", ApiKey, Op::ConfigExport, config::export)
        .add(M::POST, "/v1/config/apply", ApiKey, Op::ConfigApply, config::apply)
        .add(M::GET, "/v1/members", ApiKey, Op::MembersRead, members::list)
        .add(M::POST, "/v1/members", ApiKey, Op::MembersManage, members::create)
        .add(M::DELETE, "/v1/members/{id}", ApiKey, Op::MembersManage, members::delete)
        .add(M::GET, "/v1/schedules", ApiKey, Op::SchedulesRead, schedules::list)
        .add(M::GET, "/v1/schedules/signing-secret", ApiKey, Op::SigningSecretRead, schedules::signing_secret)
        .add(M::GET, "/v1/schedules/{id}", ApiKey, Op::SchedulesRead, schedules::get_one)
        .add(M::DELETE, "/v1/schedules/{id}", ApiKey, Op::SchedulesRead, schedules::cancel)
        .add(M::GET, "/v1/email/domains", ApiKey, Op::EmailDomainsRead, email::list)
        .add(M::POST, "/v1/email/domains", ApiKey, Op::EmailDomainsManage, email::create)
        .add(M::GET, "/v1/email/domains/{id}", ApiKey, Op::EmailDomainsRead, email::get_one)
        .add(M::DELETE, "/v1/email/domains/{id}", ApiKey, Op::EmailDomainsManage, email::delete)
        .add(M::POST, "/v1/email/domains/{id}/verify", ApiKey, Op::EmailDomainsManage, email::verify)
        .add(M::POST, "/rest/{integration}", ApiKey, Op::ToolsRun, rest_batch::execute)
        // Unknown /v1 paths: authenticate first (so the API's shape is not probeable without a
        // key), then 404 in the API's error shape.
        .add(M::GET, "/v1", ApiKey, Op::Identity, not_found)
        .add(M::GET, "/v1/{*rest}", ApiKey, Op::Identity, not_found)
        .add(M::POST, "/v1/{*rest}", ApiKey, Op::Identity, not_found)
        .add(M::PUT, "/v1/{*rest}", ApiKey, Op::Identity, not_found)
        .add(M::PATCH, "/v1/{*rest}", ApiKey, Op::Identity, not_found)
        .add(M::DELETE, "/v1/{*rest}", ApiKey, Op::Identity, not_found)
}

/// The REST router: the routes above with the body limit.
pub fn router(state: &AppState) -> Router<AppState> {
    routes(state)
        .into_router()
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
}

/// Who the caller is, and the limits its calls are counted against (its key's own calls per
/// minute and the rate limits and quotas of the policy it runs under), so an agent can pace
/// itself before a refusal tells it. `user_policy_id`: the policy the user's groups cap them
/// with (single sign-on), whose limits count too.
async fn me(
    State(state): State<AppState>,
    ApiCaller(p): ApiCaller,
) -> Result<Json<Value>, ApiError> {
    let applied = state.wb.policies().applied(&p).await?;
    let limits: Vec<_> = applied
        .policies()
        .flat_map(|policy| policy.limits.iter().cloned())
        .collect();
    Ok(Json(json!({
        "id": p.user_id,
        "email": p.email,
        "project": { "id": p.project_id, "name": p.project_name },
        "role": p.role,
        "api_key_id": p.api_key_id,
        "policy_id": p.policy_id,
        "user_policy_id": p.user_policy_id,
        "rate_limit_per_minute": p.rate_limit_per_minute,
        "limits": limits,
    })))
}

/// Unknown /v1 paths answer 404 in the API's error shape.
async fn not_found(_caller: ApiCaller) -> ApiError {
    ApiError::not_found()
}
