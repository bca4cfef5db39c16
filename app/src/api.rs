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
