//! Server functions of the portal: thin adapters that authenticate the session, make one core
//! call and map the result to a view type. No SQL and no business rules here.

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

use crate::AppError;

#[cfg(feature = "ssr")]
use crate::ssr;

/// The signed-in person as the layout shows them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ViewerInfo {
    pub email: String,
    pub project: String,
    pub is_admin: bool,
}

#[server(endpoint = "viewer")]
pub async fn viewer() -> Result<Option<ViewerInfo>, AppError> {
    match ssr::principal().await {
        Ok(p) => Ok(Some(ViewerInfo { is_admin: p.is_admin(), email: p.email, project: p.project_name })),
        Err(AppError::NotSignedIn) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Checks the credentials, starts a fresh session (new id) and goes to `next` or home.
#[server(endpoint = "sign_in")]
pub async fn sign_in(email: String, password: String, next: Option<String>) -> Result<(), AppError> {
    use workbench_core::auth::SESSION_USER_KEY;
    let wb = ssr::wb()?;
    let principal = wb.accounts().sign_in(&email, &password, ssr::client_ip()).await?;
    let session = ssr::session().await?;
    session.cycle_id().await.map_err(|_| AppError::Message("cannot start a session; try again".into()))?;
    session
        .insert(SESSION_USER_KEY, &principal.user_id)
        .await
        .map_err(|_| AppError::Message("cannot start a session; try again".into()))?;
    tracing::info!(user_id = %principal.user_id, "signed in");
    leptos_axum::redirect(ssr::safe_next(next.as_deref()));
    Ok(())
}

/// Ends the session on the server (the row is deleted, the cookie cleared).
#[server(endpoint = "sign_out")]
pub async fn sign_out() -> Result<(), AppError> {
    // Outstanding curl_session tokens of this person stop working too (D11).
    if let Ok(p) = ssr::principal().await {
        ssr::wb()?.proxy_tokens().revoke_all(&p.user_id).await?;
    }
    let session = ssr::session().await?;
    session.flush().await.map_err(|_| AppError::Message("cannot end the session; try again".into()))?;
    leptos_axum::redirect("/login");
    Ok(())
}

/// Creates the first admin and signs them in. Refused once anyone exists.
#[server(endpoint = "set_up")]
pub async fn set_up(email: String, password: String, project: String) -> Result<(), AppError> {
    use workbench_core::auth::SESSION_USER_KEY;
    let wb = ssr::wb()?;
    let principal = wb.accounts().setup_first_admin(&email, &password, &project).await?;
    let session = ssr::session().await?;
    session.cycle_id().await.map_err(|_| AppError::Message("cannot start a session; try again".into()))?;
    session
        .insert(SESSION_USER_KEY, &principal.user_id)
        .await
        .map_err(|_| AppError::Message("cannot start a session; try again".into()))?;
    leptos_axum::redirect("/");
    Ok(())
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApiKeyView {
    pub id: String,
    pub name: String,
    pub prefix: String,
    pub owner: String,
    pub created: String,
    pub last_used: Option<String>,
    pub revoked: Option<String>,
}

/// A key just created: the only time its secret is shown.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewApiKeyView {
    pub name: String,
    pub secret: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApiKeysData {
    pub keys: Vec<ApiKeyView>,
    /// A key created by a plain form post (no JavaScript), carried once through the session.
    pub just_created: Option<NewApiKeyView>,
}

#[cfg(feature = "ssr")]
const NEW_KEY_FLASH: &str = "flash_new_api_key";

#[server(endpoint = "api_keys_page")]
pub async fn api_keys_page() -> Result<ApiKeysData, AppError> {
    use workbench_core::clock::display_time;
    let p = ssr::principal().await?;
    let keys = ssr::wb()?
        .accounts()
        .list_api_keys(&p)
        .await?
        .into_iter()
        .map(|k| ApiKeyView {
            id: k.id,
            name: k.name,
            prefix: k.prefix,
            owner: k.owner_email,
            created: display_time(k.created_at),
            last_used: k.last_used_at.map(display_time),
            revoked: k.revoked_at.map(display_time),
        })
        .collect();
    let session = ssr::session().await?;
    let just_created = session.remove::<NewApiKeyView>(NEW_KEY_FLASH).await.ok().flatten();
    Ok(ApiKeysData { keys, just_created })
}

#[server(endpoint = "create_api_key")]
pub async fn create_api_key(name: String) -> Result<NewApiKeyView, AppError> {
    let p = ssr::principal().await?;
    let key = ssr::wb()?.accounts().create_api_key(&p, &name).await?;
    let view = NewApiKeyView { name: key.info.name, secret: key.secret.expose().to_owned() };
    if ssr::is_plain_form_post() {
        // Without JavaScript the browser is redirected back to the page, which shows this once.
        ssr::session()
            .await?
            .insert(NEW_KEY_FLASH, &view)
            .await
            .map_err(|_| AppError::Message("cannot keep the new key for display; try again".into()))?;
    }
    Ok(view)
}

#[server(endpoint = "revoke_api_key")]
pub async fn revoke_api_key(id: String) -> Result<(), AppError> {
    let p = ssr::principal().await?;
    ssr::wb()?.accounts().revoke_api_key(&p, &id).await?;
    Ok(())
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemberView {
    pub email: String,
    pub role: String,
    pub joined: String,
    pub is_you: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MembersData {
    pub members: Vec<MemberView>,
    pub can_manage: bool,
}

#[server(endpoint = "members_page")]
pub async fn members_page() -> Result<MembersData, AppError> {
    use workbench_core::clock::display_time;
    let p = ssr::principal().await?;
    let members = ssr::wb()?
        .accounts()
        .members(&p)
        .await?
        .into_iter()
        .map(|m| MemberView {
            is_you: m.user_id == p.user_id,
            email: m.email,
            role: m.role.as_str().to_owned(),
            joined: display_time(m.joined_at),
        })
        .collect();
    Ok(MembersData { members, can_manage: p.is_admin() })
}

#[server(endpoint = "add_member")]
pub async fn add_member(email: String, password: String, role: String) -> Result<(), AppError> {
    use workbench_core::auth::Role;
    let p = ssr::principal().await?;
    let role = Role::parse(&role).ok_or_else(|| AppError::Message("role must be admin or member".into()))?;
    ssr::wb()?.accounts().add_member(&p, &email, &password, role).await?;
    Ok(())
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolView {
    pub name: String,
    pub integration: String,
    pub source: String,
    pub description: String,
    pub side_effects: String,
    pub status: String,
    pub avg_latency_ms: Option<i64>,
    pub input_schema: String,
    pub score: Option<f32>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolsData {
    pub tools: Vec<ToolView>,
    pub total: usize,
}

/// The catalog as the signed-in person's project sees it; with a query, the search_tools
/// ranking (up to 50), otherwise every tool.
#[server(endpoint = "tools_page")]
pub async fn tools_page(query: Option<String>) -> Result<ToolsData, AppError> {
    let p = ssr::principal().await?;
    let wb = ssr::wb()?;
    let engine = wb.engine();
    let latency = engine.average_latency_ms(&p).await?;
    let all = engine.tools(&p);
    let total = all.len();
    let view = |t: &workbench_core::catalog::Tool, score: Option<f32>| ToolView {
        name: t.spec.name.to_string(),
        integration: t.spec.integration.clone(),
        source: t.spec.source.to_string(),
        description: t.spec.description.clone(),
        side_effects: t.spec.side_effects.as_str().to_owned(),
        status: if t.status == workbench_core::catalog::ToolStatus::Available { "available".into() } else { "unavailable".into() },
        avg_latency_ms: latency.get(t.name()).copied(),
        input_schema: serde_json::to_string_pretty(&t.spec.input_schema).unwrap_or_default(),
        score,
    };
    let tools = match query.as_deref().map(str::trim).filter(|q| !q.is_empty()) {
        Some(q) => engine
            .search(&p, q, workbench_core::engine::SEARCH_LIMIT_MAX)?
            .into_iter()
            .filter_map(|hit| engine.tool(&p, &hit.name).map(|t| view(&t, Some(hit.score))))
            .collect(),
        None => all.iter().map(|t| view(t, None)).collect(),
    };
    Ok(ToolsData { tools, total })
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EgressData {
    pub patterns: Vec<String>,
    pub can_manage: bool,
}

#[server(endpoint = "egress_page")]
pub async fn egress_page() -> Result<EgressData, AppError> {
    let p = ssr::principal().await?;
    let patterns = ssr::wb()?.egress().list(&p).await?;
    Ok(EgressData { patterns, can_manage: p.is_admin() })
}

#[server(endpoint = "add_egress_rule")]
pub async fn add_egress_rule(pattern: String) -> Result<(), AppError> {
    let p = ssr::principal().await?;
    ssr::wb()?.egress().add(&p, &pattern).await?;
    Ok(())
}

#[server(endpoint = "remove_egress_rule")]
pub async fn remove_egress_rule(pattern: String) -> Result<(), AppError> {
    let p = ssr::principal().await?;
    ssr::wb()?.egress().remove(&p, &pattern).await?;
    Ok(())
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditRowView {
    pub at: String,
    pub action: String,
    pub tool: String,
    pub status: String,
    pub error_code: String,
    pub duration_ms: Option<i64>,
    pub key: String,
    pub surface: String,
    pub call_id: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditData {
    pub rows: Vec<AuditRowView>,
    pub next: Option<String>,
    /// (id, label) of the keys the filter offers.
    pub keys: Vec<(String, String)>,
    pub is_admin: bool,
}

/// A page of the audit log, newest first; admins see the project, members their own calls.
#[server(endpoint = "audit_page")]
pub async fn audit_page(
    tool: Option<String>,
    status: Option<String>,
    key: Option<String>,
    cursor: Option<String>,
) -> Result<AuditData, AppError> {
    use workbench_core::audit::AuditQuery;
    use workbench_core::clock::display_time;
    let p = ssr::principal().await?;
    let wb = ssr::wb()?;
    let keys = wb.accounts().list_api_keys(&p).await?;
    let label = |id: &Option<String>| match id {
        Some(id) => keys.iter().find(|k| &k.id == id).map(|k| format!("{} ({})", k.name, k.prefix)).unwrap_or_else(|| id.clone()),
        None => "portal".to_owned(),
    };
    let page = wb.audit().page(&p, &AuditQuery { tool, status, api_key_id: key, cursor }).await?;
    let rows = page
        .entries
        .into_iter()
        .map(|e| AuditRowView {
            at: display_time(e.at_ms),
            key: label(&e.api_key_id),
            action: e.action,
            tool: e.tool.unwrap_or_default(),
            status: e.status,
            error_code: e.error_code.unwrap_or_default(),
            duration_ms: e.duration_ms,
            surface: e.surface,
            call_id: e.tool_call_id.unwrap_or_default(),
        })
        .collect();
    Ok(AuditData {
        rows,
        next: page.next,
        keys: keys.iter().map(|k| (k.id.clone(), format!("{} ({})", k.name, k.prefix))).collect(),
        is_admin: p.is_admin(),
    })
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SecretView {
    pub name: String,
    pub id: String,
    pub created: String,
    pub updated: String,
}

/// The project's vault as the portal lists it: names and times, never values.
#[server(endpoint = "vault_page")]
pub async fn vault_page() -> Result<Vec<SecretView>, AppError> {
    use workbench_core::clock::display_time;
    let p = ssr::principal().await?;
    let secrets = ssr::wb()?.vault().list(&p).await?;
    Ok(secrets
        .into_iter()
        .map(|s| SecretView { name: s.name, id: s.id, created: display_time(s.created_at_ms), updated: display_time(s.updated_at_ms) })
        .collect())
}

/// Creates a secret or replaces its value. The value is never sent back.
#[server(endpoint = "set_secret")]
pub async fn set_secret(name: String, value: String) -> Result<(), AppError> {
    let p = ssr::principal().await?;
    let value = zeroize_on_drop(value);
    ssr::wb()?.vault().set(&p, name.trim(), &value).await?;
    Ok(())
}

#[cfg(feature = "ssr")]
fn zeroize_on_drop(s: String) -> workbench_core::vault::Secret {
    workbench_core::vault::Secret::from(s)
}

#[server(endpoint = "delete_secret")]
pub async fn delete_secret(name: String) -> Result<(), AppError> {
    let p = ssr::principal().await?;
    ssr::wb()?.vault().delete(&p, &name).await?;
    Ok(())
}

/// What /connect/<id> shows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ConnectView {
    /// Not this user's, unknown or expired: all look the same.
    NotFound,
    /// Off to the provider (OAuth).
    Redirecting { display_name: String },
    /// A key or cookie form.
    Form { display_name: String, auth_type: String, label: String, help: Option<String> },
    Connected { display_name: String },
}

/// Redeems a connect link: the same signed-in user only. OAuth redirects to the provider with
/// PKCE and a fresh single-use state; API key and cookie integrations show a form.
#[server(endpoint = "open_connect_link")]
pub async fn open_connect_link(id: String) -> Result<ConnectView, AppError> {
    use workbench_core::plugins::AuthDef;
    let p = ssr::principal().await?;
    let wb = ssr::wb()?;
    let page = match wb.connections().link(&p.user_id, &id).await {
        Ok(page) => page,
        Err(workbench_core::Error::NotFound) => {
            ssr::not_found_status();
            return Ok(ConnectView::NotFound);
        }
        Err(e) => return Err(e.into()),
    };
    let display_name = page.integration.def.display_name.clone();
    if page.pending.status == "connected" {
        return Ok(ConnectView::Connected { display_name });
    }
    Ok(match &page.integration.def.auth {
        AuthDef::Oauth2 { .. } => {
            let url = wb.connections().authorization_url(&p.user_id, &id, &ssr::oauth_redirect_uri()?).await?;
            leptos_axum::redirect(&url);
            ConnectView::Redirecting { display_name }
        }
        AuthDef::ApiKey { label, help, .. } => ConnectView::Form {
            display_name,
            auth_type: "api_key".into(),
            label: label.clone().unwrap_or_else(|| "API key".into()),
            help: help.clone(),
        },
        AuthDef::Cookie { cookie_name, domain, help, .. } => ConnectView::Form {
            display_name,
            auth_type: "cookie".into(),
            label: format!("Value of the \"{cookie_name}\" cookie of {domain}"),
            help: help.clone(),
        },
        AuthDef::None => ConnectView::Connected { display_name },
    })
}

/// The API key / cookie form of a connect link; the value is checked by the integration's
/// probe before it is stored, and never shown again.
#[server(endpoint = "submit_connection")]
pub async fn submit_connection(id: String, value: String) -> Result<String, AppError> {
    let p = ssr::principal().await?;
    let value = workbench_core::vault::Secret::from(value);
    match ssr::wb()?.connections().submit_secret(&p.user_id, &id, &value).await {
        Err(workbench_core::Error::NotFound) => Err(AppError::Message("not found".into())),
        other => Ok(other?),
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IntegrationView {
    pub name: String,
    pub display_name: String,
    pub description: String,
    pub logo: Option<String>,
    pub auth_type: String,
    pub tool_count: usize,
    /// connected, expired, revoked, not connected, or "no account needed".
    pub status: String,
}

#[server(endpoint = "connections_page")]
pub async fn connections_page() -> Result<Vec<IntegrationView>, AppError> {
    let p = ssr::principal().await?;
    let wb = ssr::wb()?;
    let mine = wb.connections().list(&p).await?;
    Ok(wb
        .connections()
        .all_for(&p.project_id)
        .iter()
        .map(|i| IntegrationView {
            name: i.name().to_owned(),
            display_name: i.def.display_name.clone(),
            description: i.def.description.clone(),
            logo: i.def.logo.clone(),
            auth_type: i.def.auth.kind().to_owned(),
            tool_count: i.def.tools.len(),
            status: if !i.needs_connection() {
                "no account needed".into()
            } else {
                mine.iter().find(|c| c.integration == i.name()).map(|c| c.status.clone()).unwrap_or_else(|| "not connected".into())
            },
        })
        .collect())
}

/// Starts connecting from the portal: a pending connection, then its connect page.
#[server(endpoint = "start_connection")]
pub async fn start_connection(integration: String) -> Result<(), AppError> {
    let p = ssr::principal().await?;
    let wb = ssr::wb()?;
    let i = wb.connections().lookup(&p.project_id, &integration).ok_or_else(|| AppError::Message("unknown integration".into()))?;
    let pending = wb.connections().begin(&p, &i).await?;
    leptos_axum::redirect(&format!("/connect/{}", pending.id));
    Ok(())
}

#[server(endpoint = "disconnect")]
pub async fn disconnect(integration: String) -> Result<(), AppError> {
    let p = ssr::principal().await?;
    ssr::wb()?.connections().disconnect(&p, &integration).await?;
    Ok(())
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppView {
    pub id: String,
    pub name: String,
    pub display_name: String,
    pub auth_type: String,
    pub base_url: String,
    pub tools: Vec<String>,
    pub created_at: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppsData {
    pub apps: Vec<AppView>,
    pub can_manage: bool,
    /// What an OAuth app registers at its provider as redirect URI.
    pub redirect_uri: String,
}

#[server(endpoint = "apps_page")]
pub async fn apps_page() -> Result<AppsData, AppError> {
    let p = ssr::principal().await?;
    let apps = ssr::wb()?.apps().list(&p).await?;
    Ok(AppsData {
        apps: apps
            .into_iter()
            .map(|a| AppView {
                id: a.id,
                name: a.name,
                display_name: a.display_name,
                auth_type: a.auth_type.to_owned(),
                base_url: a.base_url,
                tools: a.tools,
                created_at: a.created_at,
            })
            .collect(),
        can_manage: p.is_admin(),
        redirect_uri: ssr::oauth_redirect_uri()?,
    })
}

/// Creates a custom app from its JSON definition (the plugin format).
#[server(endpoint = "create_app")]
pub async fn create_app(definition: String) -> Result<(), AppError> {
    let p = ssr::principal().await?;
    let value: serde_json::Value =
        serde_json::from_str(&definition).map_err(|e| AppError::Message(format!("the definition is not valid JSON: {e}")))?;
    ssr::wb()?.apps().create(&p, &value).await?;
    Ok(())
}

#[server(endpoint = "delete_app")]
pub async fn delete_app(id: String) -> Result<(), AppError> {
    let p = ssr::principal().await?;
    ssr::wb()?.apps().delete(&p, &id).await?;
    Ok(())
}
