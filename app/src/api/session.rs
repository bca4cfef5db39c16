//! Server functions of sign-in and the layout: who is signed in, sign in, sign out, first-admin set-up.

use leptos::prelude::*;

use crate::AppError;
pub use workbench_model::accounts::ViewerInfo;

#[cfg(feature = "ssr")]
use crate::ssr;

#[server(endpoint = "viewer")]
pub async fn viewer() -> Result<Option<ViewerInfo>, AppError> {
    match ssr::principal().await {
        Ok(p) => Ok(Some(ViewerInfo {
            is_admin: p.is_admin(),
            email: p.email,
            project: p.project_name,
        })),
        Err(AppError::NotSignedIn) => Ok(None),
        Err(e) => Err(e),
    }
}

/// A fresh session for the signed-in user (`ssr::begin_session`).
#[cfg(feature = "ssr")]
async fn start_session(user_id: &str) -> Result<(), AppError> {
    let session = ssr::session().await?;
    ssr::begin_session(&session, user_id, None)
        .await
        .map_err(|_| AppError::Message("cannot start a session; try again".into()))
}

/// Checks the credentials, starts a fresh session (new id) and goes to `next` or home.
#[server(endpoint = "sign_in")]
pub async fn sign_in(
    email: String,
    password: String,
    next: Option<String>,
) -> Result<(), AppError> {
    let wb = ssr::wb()?;
    let principal = wb
        .accounts()
        .sign_in(&email, &password, ssr::client_ip())
        .await?;
    start_session(&principal.user_id).await?;
    tracing::info!(user_id = %principal.user_id, "signed in");
    leptos_axum::redirect(&ssr::safe_next(next.as_deref()));
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
    session
        .flush()
        .await
        .map_err(|_| AppError::Message("cannot end the session; try again".into()))?;
    leptos_axum::redirect("/login");
    Ok(())
}

/// Creates the first admin and signs them in. Refused once anyone exists.
#[server(endpoint = "set_up")]
pub async fn set_up(email: String, password: String, project: String) -> Result<(), AppError> {
    let wb = ssr::wb()?;
    let principal = wb
        .accounts()
        .setup_first_admin(&email, &password, &project)
        .await?;
    start_session(&principal.user_id).await?;
    leptos_axum::redirect("/");
    Ok(())
}
