//! Server functions of the MCP client consent page (`/oauth/authorize`) and of the list of
//! clients a person approved: check the request, record the decision, revoke an approval.

use leptos::prelude::*;

use crate::AppError;
pub use workbench_model::oauth::{AuthorizeQuery, AuthorizedClientView, ClientKind, ConsentView};

#[cfg(feature = "ssr")]
use crate::ssr;

#[cfg(feature = "ssr")]
fn context() -> Result<workbench_core::oauth::OAuthContext, AppError> {
    let config = use_context::<ssr::PortalConfig>()
        .ok_or_else(|| AppError::Message("portal configuration missing".into()))?;
    Ok(workbench_core::oauth::OAuthContext::for_public_url(
        &config.public_url,
    ))
}

/// Checks the authorization request; a request that must go back to the client with an error
/// (bad PKCE, wrong resource) is redirected there at once.
#[server(endpoint = "oauth_consent")]
pub async fn oauth_consent(query: AuthorizeQuery) -> Result<ConsentView, AppError> {
    use workbench_core::oauth::AuthorizeError;
    tracing::debug!("consent: checking the request");
    let p = ssr::principal().await?;
    let wb = ssr::wb()?;
    let checked = wb.oauth().check(&context()?, &query).await;
    tracing::debug!(ok = checked.is_ok(), "consent: checked");
    match checked {
        Ok(c) => {
            let policies = if p.is_unrestricted_admin() {
                wb.policies().choices(&p).await?
            } else {
                Vec::new()
            };
            let admin = p.allows(workbench_core::auth::Operation::PoliciesManage);
            let tool_set = context()?.set_of(&c.resource);
            Ok(ConsentView::Ask {
                tool_set,
                client_name: c.client_name,
                client_id: c.client_id,
                redirect_host: c.redirect_host,
                kind: c.kind.parse()?,
                client_uri: c.client_uri,
                policies,
                admin,
                project_name: p.project_name,
            })
        }
        Err(AuthorizeError::Page(reason)) => Ok(ConsentView::Refused { reason }),
        Err(AuthorizeError::Redirect(url)) => {
            leptos_axum::redirect(&url);
            Ok(ConsentView::Refused {
                reason: "returning to the application".into(),
            })
        }
    }
}

/// The person's decision: approve (with a policy an admin chose, or the project default) or
/// deny; either way the browser goes back to the client. Its arguments are the consent form's
/// fields, named as the browser posts them (a struct would rename them `form[…]`).
#[allow(clippy::too_many_arguments)]
#[server(endpoint = "oauth_decide")]
pub async fn oauth_decide(
    response_type: Option<String>,
    client_id: Option<String>,
    redirect_uri: Option<String>,
    code_challenge: Option<String>,
    code_challenge_method: Option<String>,
    state: Option<String>,
    resource: Option<String>,
    scope: Option<String>,
    decision: String,
    policy_id: Option<String>,
    rate_limit_per_minute: Option<String>,
) -> Result<String, AppError> {
    use workbench_core::oauth::AuthorizeError;
    let p = ssr::principal().await?;
    let q = AuthorizeQuery {
        response_type,
        client_id,
        redirect_uri,
        code_challenge,
        code_challenge_method,
        state,
        resource,
        scope,
    };
    let oauth = ssr::wb()?.oauth().clone();
    let ctx = context()?;
    let outcome = match decision.as_str() {
        "approve" => {
            let limit = match rate_limit_per_minute
                .as_deref()
                .map(str::trim)
                .filter(|s| !s.is_empty())
            {
                None => None,
                Some(n) => Some(n.parse::<i64>().map_err(|_| {
                    AppError::Message(
                        "the rate limit must be a whole number of calls per minute".into(),
                    )
                })?),
            };
            oauth.approve(&ctx, &p, &q, policy_id, limit).await
        }
        "deny" => oauth.deny(&ctx, &q).await,
        _ => return Err(AppError::Message("choose approve or deny".into())),
    };
    match outcome {
        Ok(url) | Err(AuthorizeError::Redirect(url)) => {
            leptos_axum::redirect(&url);
            Ok(url)
        }
        Err(AuthorizeError::Page(reason)) => Err(AppError::Message(reason)),
    }
}

#[server(endpoint = "authorized_clients")]
pub async fn authorized_clients() -> Result<Vec<AuthorizedClientView>, AppError> {
    use workbench_core::clock::display_time;
    let p = ssr::principal().await?;
    let wb = ssr::wb()?;
    let policies: Vec<(String, String)> = wb
        .policies()
        .list(&p)
        .await
        .map(|l| l.into_iter().map(|pol| (pol.id, pol.name)).collect())
        .unwrap_or_default();
    Ok(wb
        .oauth()
        .grants(&p)
        .await?
        .into_iter()
        .map(|g| AuthorizedClientView {
            policy: g
                .policy_id
                .as_ref()
                .map(|id| {
                    policies
                        .iter()
                        .find(|(pid, _)| pid == id)
                        .map(|(_, n)| n.clone())
                        .unwrap_or_else(|| id.clone())
                })
                .unwrap_or_else(|| "project default".into()),
            id: g.id,
            client_name: g.client_name,
            client_id: g.client_id,
            redirect_host: g.redirect_host,
            approved: display_time(g.created_at),
            last_used: g.last_used_at.map(display_time),
        })
        .collect())
}

#[server(endpoint = "revoke_authorized_client")]
pub async fn revoke_authorized_client(id: String) -> Result<(), AppError> {
    let p = ssr::principal().await?;
    Ok(ssr::wb()?.oauth().revoke_grant(&p, &id).await?)
}
