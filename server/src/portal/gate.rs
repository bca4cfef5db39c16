//! The sign-in gate in front of portal pages: before the first admin exists every page leads to
//! /setup; afterwards a visitor without a session is sent to /login (and back afterwards), and a
//! signed-in person is sent away from /login and /setup. Server functions check on their own.

use axum::extract::{Request, State};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use tower_sessions::Session;
use workbench_core::auth::SESSION_USER_KEY;

use crate::state::AppState;

pub async fn layer(
    State(state): State<AppState>,
    session: Session,
    req: Request,
    next: Next,
) -> Response {
    let path = req.uri().path().to_owned();
    if req.method() != Method::GET || path.starts_with("/api/") {
        return next.run(req).await;
    }
    if !state.is_set_up().await {
        return if path == "/setup" {
            next.run(req).await
        } else {
            Redirect::to("/setup").into_response()
        };
    }
    let signed_in = match session.get::<String>(SESSION_USER_KEY).await {
        Ok(Some(user_id)) => state
            .wb
            .accounts()
            .principal_for_user(&user_id)
            .await
            .ok()
            .flatten()
            .is_some(),
        _ => false,
    };
    match path.as_str() {
        "/setup" => Redirect::to(if signed_in { "/" } else { "/login" }).into_response(),
        "/login" if signed_in => Redirect::to("/").into_response(),
        "/login" => next.run(req).await,
        _ if signed_in => next.run(req).await,
        _ => {
            let target = req
                .uri()
                .path_and_query()
                .map(|p| p.as_str())
                .unwrap_or("/");
            let location = if target == "/" {
                "/login".to_string()
            } else {
                format!(
                    "/login?next={}",
                    url::form_urlencoded::byte_serialize(target.as_bytes()).collect::<String>()
                )
            };
            Redirect::to(&location).into_response()
        }
    }
}
