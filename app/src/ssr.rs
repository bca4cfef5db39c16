//! Server-side helpers for server functions: the services handle, the session, and the
//! signed-in principal. Only compiled with the `ssr` feature.

use leptos::prelude::*;
use tower_sessions::Session;
use workbench_core::auth::{ClientIp, Principal, SESSION_USER_KEY};
use workbench_core::Workbench;

use crate::AppError;

pub fn wb() -> Result<Workbench, AppError> {
    use_context::<Workbench>().ok_or_else(|| AppError::Message("services unavailable".into()))
}

/// Starts a fresh session (new id, so a planted one is useless) for `user_id`. One that began
/// through an identity provider ends at `recheck_at` (ms), when the person signs in again. The
/// one way a portal session starts: password sign-in, first-run setup and single sign-on.
pub async fn begin_session(
    session: &Session,
    user_id: &str,
    recheck_at: Option<i64>,
) -> Result<(), tower_sessions::session::Error> {
    session.cycle_id().await?;
    session.insert(SESSION_USER_KEY, user_id).await?;
    if let Some(at) = recheck_at {
        session
            .insert(workbench_core::auth::SESSION_RECHECK_KEY, at)
            .await?;
    }
    Ok(())
}

pub async fn session() -> Result<Session, AppError> {
    leptos_axum::extract::<Session>()
        .await
        .map_err(|_| AppError::Message("no session; enable cookies for this site".into()))
}

/// The signed-in person in their project, or `NotSignedIn`. A server function's request
/// carries the principal the server's route table already resolved from the session; a page
/// render looks it up.
pub async fn principal() -> Result<Principal, AppError> {
    if let Some(who) =
        use_context::<http::request::Parts>().and_then(|p| p.extensions.get::<Principal>().cloned())
    {
        return Ok(who);
    }
    let session = session().await?;
    let user_id = session
        .get::<String>(SESSION_USER_KEY)
        .await
        .map_err(|_| AppError::NotSignedIn)?
        .ok_or(AppError::NotSignedIn)?;
    wb()?
        .accounts()
        .principal_for_user(&user_id)
        .await?
        .ok_or(AppError::NotSignedIn)
}

/// The project's members by user id, to show people by email.
pub struct Emails(Vec<workbench_core::auth::Member>);

impl Emails {
    /// The members `who` may list (none when the list cannot be read: ids are shown instead).
    pub async fn of(wb: &Workbench, who: &Principal) -> Emails {
        Emails(wb.accounts().members(who).await.unwrap_or_default())
    }

    /// The email of `user_id`, or the id when it is nobody's here any more.
    pub fn of_user(&self, user_id: &str) -> String {
        self.0
            .iter()
            .find(|m| m.user_id == user_id)
            .map(|m| m.email.clone())
            .unwrap_or_else(|| user_id.to_owned())
    }
}

pub fn client_ip() -> Option<std::net::IpAddr> {
    use_context::<http::request::Parts>()
        .and_then(|p| p.extensions.get::<ClientIp>().copied())
        .and_then(|c| c.0)
}

/// True when the request is a plain HTML form post (no JavaScript on the page), which is
/// answered with a redirect instead of data.
pub fn is_plain_form_post() -> bool {
    use_context::<http::request::Parts>()
        .and_then(|p| {
            p.headers
                .get(http::header::ACCEPT)
                .and_then(|v| v.to_str().ok())
                .map(|v| v.contains("text/html"))
        })
        .unwrap_or(false)
}

/// A redirect target from a `next` parameter: a path on our own origin, never another one
/// (see `workbench_core::auth::safe_next`).
pub fn safe_next(next: Option<&str>) -> String {
    let public_url = use_context::<PortalConfig>()
        .map(|c| c.public_url)
        .unwrap_or_else(|| "http://localhost/".into());
    workbench_core::auth::safe_next(next, &public_url)
}

/// Gives a failed server function's response its status (and Retry-After), unless the request
/// is a plain HTML form post (no JavaScript), which is answered with a redirect to the form.
pub fn error_status(status: u16, retry_after_secs: Option<u64>) {
    let form_post = use_context::<http::request::Parts>()
        .and_then(|p| {
            p.headers
                .get(http::header::ACCEPT)
                .and_then(|v| v.to_str().ok())
                .map(|a| a.contains("text/html"))
        })
        .unwrap_or(false);
    let Some(res) = use_context::<leptos_axum::ResponseOptions>() else {
        return;
    };
    if let Some(secs) = retry_after_secs {
        if let Ok(v) = http::HeaderValue::from_str(&secs.to_string()) {
            res.insert_header(http::header::RETRY_AFTER, v);
        }
    }
    if !form_post {
        if let Ok(code) = http::StatusCode::from_u16(status) {
            res.set_status(code);
        }
    }
}

/// Marks the response 404 (pages that show "not found").
pub fn not_found_status() {
    if let Some(res) = use_context::<leptos_axum::ResponseOptions>() {
        res.set_status(http::StatusCode::NOT_FOUND);
    }
}

/// Where OAuth providers send the browser back: `<public url>/oauth/callback`.
pub fn oauth_redirect_uri() -> Result<String, AppError> {
    use_context::<PortalConfig>()
        .map(|c| format!("{}/oauth/callback", c.public_url.trim_end_matches('/')))
        .ok_or_else(|| AppError::Message("portal configuration missing".into()))
}

/// What the server tells the portal about itself.
#[derive(Clone, Debug)]
pub struct PortalConfig {
    pub public_url: String,
}
