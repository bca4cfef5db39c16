//! `POST /sso/{slug}/start` and `GET /sso/{slug}/callback`: the browser's two stops of a sign-in through
//! an identity provider. The attempt (state, nonce, PKCE verifier, where to go next) waits in
//! the person's session and is taken out, once, by the callback; core checks the rest. A
//! successful sign-in gets a fresh session that ends at the provider's re-check time (the
//! session store keeps no session past `SESSION_RECHECK_KEY`). Failures land on /login with a
//! reason.

use axum::extract::{Form, Path, Query, State};
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;
use tower_sessions::Session;
use workbench_core::auth::safe_next;
use workbench_core::sso::Pending;

use crate::state::AppState;

const PENDING_KEY: &str = "sso_pending";

fn failed(reason: &str) -> Response {
    let q: String = url::form_urlencoded::Serializer::new(String::new())
        .append_pair("sso_error", &reason.chars().take(300).collect::<String>())
        .finish();
    Redirect::to(&format!("/login?{q}")).into_response()
}

fn shown(e: workbench_core::Error) -> Response {
    match e {
        workbench_core::Error::Invalid(m) => failed(&m),
        e => {
            tracing::error!(error = ?e, "single sign-on failed");
            failed("something went wrong on our side; try again")
        }
    }
}

#[derive(Debug, Deserialize)]
pub struct StartForm {
    next: Option<String>,
}

/// A POST from the sign-in page (so the CSRF layer refuses one started by another site: a
/// browser led through someone else's provider would end up signed in as them).
pub async fn start(
    State(state): State<AppState>,
    session: Session,
    Path(slug): Path<String>,
    Form(q): Form<StartForm>,
) -> Response {
    let next = safe_next(q.next.as_deref(), state.config.public_url.as_str());
    let (url, pending) = match state.wb.sso().start(&slug, &next).await {
        Ok(started) => started,
        Err(e) => return shown(e),
    };
    if session.insert(PENDING_KEY, &pending).await.is_err() {
        return failed("cannot start the sign-in; try again");
    }
    Redirect::to(&url).into_response()
}

#[derive(Debug, Deserialize)]
pub struct CallbackQuery {
    code: Option<String>,
    state: Option<String>,
    error: Option<String>,
    error_description: Option<String>,
}

pub async fn callback(
    State(state): State<AppState>,
    session: Session,
    Path(slug): Path<String>,
    Query(q): Query<CallbackQuery>,
) -> Response {
    // Taken out whatever happens next: an attempt answers once.
    let pending: Option<Pending> = session.remove(PENDING_KEY).await.ok().flatten();
    let Some(pending) = pending.filter(|p| p.slug == slug) else {
        return failed("this browser started no sign-in with this provider, or it was already used; start again");
    };
    if let Some(err) = &q.error {
        let detail = q.error_description.as_deref().unwrap_or(err);
        return failed(&format!(
            "the identity provider did not sign you in: {}",
            detail.chars().take(200).collect::<String>()
        ));
    }
    let (Some(code), Some(answer_state)) = (q.code.as_deref(), q.state.as_deref()) else {
        return failed("the identity provider's answer is missing the code or state");
    };
    let signed_in = match state.wb.sso().complete(&pending, answer_state, code).await {
        Ok(s) => s,
        Err(e) => return shown(e),
    };
    // A fresh session that ends at the re-check.
    let started =
        workbench_app::begin_session(&session, &signed_in.user_id, Some(signed_in.recheck_at))
            .await
            .is_ok();
    if !started {
        return failed("cannot start a session; try again");
    }
    Redirect::to(&signed_in.next).into_response()
}
