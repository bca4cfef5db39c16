//! `/oauth/callback`: where OAuth providers send the browser back. The state is single-use and
//! must belong to the signed-in user; the code is exchanged (PKCE) by core. The browser lands
//! on the connect page (now "connected") or on /connected with a reason.

use axum::extract::{Query, State};
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;
use tower_sessions::Session;
use workbench_core::auth::SESSION_USER_KEY;

use crate::state::AppState;

#[derive(Debug, Deserialize)]
pub struct CallbackQuery {
    code: Option<String>,
    state: Option<String>,
    error: Option<String>,
    error_description: Option<String>,
    iss: Option<String>,
}

fn failed(reason: &str) -> Response {
    let q: String = url::form_urlencoded::Serializer::new(String::new())
        .append_pair("error", reason)
        .finish();
    Redirect::to(&format!("/connected?{q}")).into_response()
}

pub async fn callback(
    State(state): State<AppState>,
    session: Session,
    uri: axum::http::Uri,
    Query(q): Query<CallbackQuery>,
) -> Response {
    let Some(user_id) = session.get::<String>(SESSION_USER_KEY).await.ok().flatten() else {
        let back = uri.path_and_query().map(|p| p.as_str()).unwrap_or("/");
        let next: String = url::form_urlencoded::byte_serialize(back.as_bytes()).collect();
        return Redirect::to(&format!("/login?next={next}")).into_response();
    };
    if let Some(err) = &q.error {
        let detail = q.error_description.as_deref().unwrap_or(err);
        return failed(&format!(
            "the provider did not grant access: {}",
            detail.chars().take(200).collect::<String>()
        ));
    }
    let (Some(code), Some(oauth_state)) = (q.code.as_deref(), q.state.as_deref()) else {
        return failed("the provider's answer is missing the code or state");
    };
    let redirect_uri = state.config.public_link("/oauth/callback");
    match state
        .wb
        .connections()
        .complete_oauth(&user_id, oauth_state, code, q.iss.as_deref(), &redirect_uri)
        .await
    {
        Ok(pending_id) => Redirect::to(&format!("/connect/{pending_id}")).into_response(),
        Err(workbench_core::Error::NotFound) => failed(
            "this connection attempt is unknown, expired, already used, or belongs to someone else",
        ),
        Err(workbench_core::Error::Invalid(m)) => failed(&m),
        Err(e) => {
            tracing::error!(error = ?e, "oauth callback failed");
            failed("something went wrong on our side; try again")
        }
    }
}
