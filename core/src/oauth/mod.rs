//! MCP authorization (OAuth 2.1, the MCP authorization specification): workbench is the
//! authorization server for its own `/mcp`. Clients register dynamically (RFC 7591) or name a
//! client ID metadata document; a signed-in person approves a client (a grant) on the consent
//! page; the client redeems a single-use code with PKCE S256 for an access token bound to the
//! `/mcp` resource (RFC 8707) and a rotating refresh token. A token acts as the person in their
//! project, under the project's default policy or the one an admin chose at consent.
//! Surfaces pass the issuer and resource (the server knows its public URL; core does not).

mod clients;
mod tokens;

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::auth::{Accounts, Principal};
use crate::clock::Clock;
use crate::egress::GuardedClient;
use crate::store::{self, Db};
use crate::{Error, Result};

pub use clients::{RegisteredClient, Registration, REGISTRATIONS_PER_HOUR};
pub use tokens::{
    TokenError, TokenRequest, TokenResponse, ACCESS_TOKEN_TTL_SECS, REFRESH_TOKEN_TTL_SECS,
};

/// Prefix of access tokens (distinct from API keys `wb_` and every other token kind).
pub const ACCESS_TOKEN_PREFIX: &str = "wbat_";
pub const REFRESH_TOKEN_PREFIX: &str = "wbrt_";
const CODE_PREFIX: &str = "wbac_";
/// How long an authorization code may be redeemed.
const CODE_TTL_MS: i64 = 60_000;

/// Who this authorization server is and what it protects: the public URL and `<public>/mcp`.
#[derive(Debug, Clone)]
pub struct OAuthContext {
    pub issuer: String,
    pub resource: String,
}

impl OAuthContext {
    /// The one place issuer and resource are derived from the public URL: the token endpoint
    /// (server) and the consent page (portal) must agree on them to the byte.
    pub fn for_public_url(public_url: &str) -> OAuthContext {
        let public = public_url.trim_end_matches('/');
        OAuthContext {
            issuer: public.to_owned(),
            resource: format!("{public}/mcp"),
        }
    }

    /// The same server, protecting a tool set's endpoint, `<public>/mcp/sets/<slug>`.
    pub fn for_set(&self, slug: &str) -> OAuthContext {
        OAuthContext {
            issuer: self.issuer.clone(),
            resource: format!("{}/sets/{slug}", self.resource),
        }
    }

    /// The resource a client names, as tokens are bound to it: this server's `/mcp` or a tool
    /// set's endpoint under it (with or without a trailing slash); None for anything else.
    pub fn resource_named(&self, r: &str) -> Option<String> {
        let r = r.strip_suffix('/').unwrap_or(r);
        if r == self.resource {
            return Some(r.to_owned());
        }
        let slug = r
            .strip_prefix(self.resource.as_str())?
            .strip_prefix("/sets/")?;
        store::tool_sets::valid_slug(slug).then(|| r.to_owned())
    }

    /// The tool set a resource of this server is the endpoint of (None: `/mcp` itself).
    pub fn set_of(&self, resource: &str) -> Option<String> {
        resource
            .strip_prefix(self.resource.as_str())?
            .strip_prefix("/sets/")
            .map(str::to_owned)
    }
}

#[derive(Clone)]
pub struct OAuthServer {
    db: Db,
    clock: Arc<dyn Clock>,
    accounts: Accounts,
    http: GuardedClient,
    /// Access-token hash → principal, with the token's expiry and resource, good while the
    /// database's change epoch stands (`auth/principals.rs`).
    access: Arc<crate::auth::principals::Principals<(i64, String)>>,
}

/// The query of `GET /oauth/authorize`, as the client sent it (declared in the model crate,
/// which the consent page shares).
pub use workbench_model::oauth::AuthorizeQuery as AuthorizeParams;

/// Why an authorization request cannot go on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthorizeError {
    /// The client or its redirect URI is not trustworthy: shown to the person, never redirected.
    Page(String),
    /// The client is known and the redirect URI is its own: send the person back with this URL
    /// (it carries `error`, `error_description`, `state` and `iss`).
    Redirect(String),
}

/// What the consent page shows about a checked request.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Consent {
    pub client_id: String,
    pub client_name: String,
    /// The host the person is sent back to (what they should recognise).
    pub redirect_host: String,
    pub redirect_uri: String,
    /// "registered" (dynamic registration) or "metadata" (a metadata document at client_id).
    pub kind: String,
    pub client_uri: Option<String>,
    /// What the client gets: `/mcp`, or a tool set's endpoint (its tokens work there only).
    pub resource: String,
}

/// A client a person approved, as their portal page lists it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct GrantView {
    pub id: String,
    pub client_id: String,
    pub client_name: String,
    pub redirect_host: String,
    pub policy_id: Option<String>,
    /// Milliseconds since the epoch.
    pub created_at: i64,
    pub last_used_at: Option<i64>,
}

fn host_of(uri: &str) -> String {
    url::Url::parse(uri)
        .ok()
        .and_then(|u| {
            u.host_str().map(|h| match u.port() {
                Some(p) => format!("{h}:{p}"),
                None => h.to_owned(),
            })
        })
        .unwrap_or_default()
}

/// `uri` with the query pairs added.
fn with_query(uri: &str, pairs: &[(&str, &str)]) -> String {
    let mut u = url::Url::parse(uri).expect("redirect URIs are checked absolute URLs");
    {
        let mut q = u.query_pairs_mut();
        for (k, v) in pairs {
            q.append_pair(k, v);
        }
    }
    u.to_string()
}

impl OAuthServer {
    pub fn new(db: Db, clock: Arc<dyn Clock>, accounts: Accounts, http: GuardedClient) -> Self {
        OAuthServer {
            db,
            clock,
            accounts,
            http,
            access: Arc::default(),
        }
    }

    fn error_redirect(
        ctx: &OAuthContext,
        redirect_uri: &str,
        state: Option<&str>,
        error: &str,
        description: &str,
    ) -> AuthorizeError {
        let mut pairs = vec![("error", error), ("error_description", description)];
        if let Some(s) = state {
            pairs.push(("state", s));
        }
        pairs.push(("iss", ctx.issuer.as_str()));
        AuthorizeError::Redirect(with_query(redirect_uri, &pairs))
    }

    /// Checks an authorization request completely: the client and its redirect URI first (a
    /// failure there is shown, not redirected), then PKCE S256, response type, resource, scope.
    pub async fn check(
        &self,
        ctx: &OAuthContext,
        p: &AuthorizeParams,
    ) -> std::result::Result<Consent, AuthorizeError> {
        let client_id = p
            .client_id
            .as_deref()
            .filter(|c| !c.is_empty())
            .ok_or_else(|| {
                AuthorizeError::Page("the request names no client (client_id is missing)".into())
            })?;
        let client = match self.client(client_id).await {
            Ok(Some(c)) => c,
            Ok(None) => {
                return Err(AuthorizeError::Page(
                    "this client is not registered with workbench".into(),
                ))
            }
            Err(Error::Invalid(m)) => return Err(AuthorizeError::Page(m)),
            Err(e) => {
                tracing::error!(error = %e, "loading an OAuth client failed");
                return Err(AuthorizeError::Page(
                    "workbench cannot check this client right now; try again".into(),
                ));
            }
        };
        let uris: Vec<String> = serde_json::from_str(&client.redirect_uris).unwrap_or_default();
        let redirect_uri = match p.redirect_uri.as_deref() {
            Some(r) if uris.iter().any(|u| u == r) => r.to_owned(),
            Some(_) => {
                return Err(AuthorizeError::Page(
                    "the redirect URI is not one this client registered".into(),
                ))
            }
            None if uris.len() == 1 => uris[0].clone(),
            None => {
                return Err(AuthorizeError::Page(
                    "the request names no redirect URI and the client registered several".into(),
                ))
            }
        };
        let state = p.state.as_deref();
        let fail = |error: &str, description: &str| {
            Self::error_redirect(ctx, &redirect_uri, state, error, description)
        };
        if p.response_type.as_deref() != Some("code") {
            return Err(fail(
                "unsupported_response_type",
                "only the authorization code flow (response_type=code) is supported",
            ));
        }
        let challenge = p.code_challenge.as_deref().unwrap_or("");
        if p.code_challenge_method.as_deref() != Some("S256") || !tokens::valid_challenge(challenge)
        {
            return Err(fail(
                "invalid_request",
                "PKCE with code_challenge_method=S256 and a code_challenge is required",
            ));
        }
        let resource = match p.resource.as_deref() {
            None => ctx.resource.clone(),
            Some(r) => ctx.resource_named(r).ok_or_else(|| {
                fail(
                    "invalid_target",
                    "the resource must be this server's /mcp endpoint or a tool set's under it",
                )
            })?,
        };
        if let Some(scope) = p.scope.as_deref() {
            if scope.split(' ').any(|s| !s.is_empty() && s != "mcp") {
                return Err(fail("invalid_scope", "the only scope is mcp"));
            }
        }
        Ok(Consent {
            client_id: client.client_id.clone(),
            client_name: client.client_name.clone(),
            redirect_host: host_of(&redirect_uri),
            redirect_uri,
            kind: client.kind.clone(),
            client_uri: client.client_uri.clone(),
            resource,
        })
    }

    /// The person approved: records the grant and answers the redirect carrying a single-use
    /// code. Only an admin may choose a policy (one of the project's; others get the default)
    /// and a rate limit in calls per minute (as an API key's; none by default).
    pub async fn approve(
        &self,
        ctx: &OAuthContext,
        who: &Principal,
        p: &AuthorizeParams,
        policy_id: Option<String>,
        rate_limit_per_minute: Option<i64>,
    ) -> std::result::Result<String, AuthorizeError> {
        let consent = self.check(ctx, p).await?;
        let policy_id = policy_id.filter(|s| !s.is_empty());
        let page = |m: &str| AuthorizeError::Page(m.to_owned());
        if policy_id.is_some() && !who.is_admin() {
            return Err(page(
                "only an admin can choose the policy a client acts under",
            ));
        }
        if rate_limit_per_minute.is_some() && !who.is_admin() {
            return Err(page("only an admin can set a client's rate limit"));
        }
        if rate_limit_per_minute.is_some_and(|n| !(1..=crate::auth::MAX_RATE_LIMIT).contains(&n)) {
            return Err(page(&format!(
                "the rate limit must be 1 to {} calls per minute, or empty for none",
                crate::auth::MAX_RATE_LIMIT
            )));
        }
        if let Some(id) = &policy_id {
            match store::policies::get(self.db.pool(), &who.project_id, id).await {
                Ok(Some(_)) => {}
                Ok(None) => return Err(page("that policy does not exist in your project")),
                Err(_) => {
                    return Err(page(
                        "workbench cannot record the approval right now; try again",
                    ))
                }
            }
        }
        let now = self.clock.now_ms();
        let existing = match store::oauth::live_grant_for(
            self.db.pool(),
            &consent.client_id,
            &who.user_id,
            &who.project_id,
        )
        .await
        {
            Ok(g) => g,
            Err(_) => {
                return Err(page(
                    "workbench cannot record the approval right now; try again",
                ))
            }
        };
        let grant = store::oauth::GrantRow {
            id: existing
                .as_ref()
                .map(|g| g.id.clone())
                .unwrap_or_else(|| crate::ids::new_id("ogr")),
            client_id: consent.client_id.clone(),
            user_id: who.user_id.clone(),
            project_id: who.project_id.clone(),
            policy_id,
            resource: consent.resource.clone(),
            created_at: now,
            last_used_at: None,
            revoked_at: None,
            rate_limit_per_minute,
        };
        let code = format!("{CODE_PREFIX}{}", crate::crypto::random_base62(40));
        let row = store::oauth::CodeRow {
            code_hash: crate::crypto::sha256_hex(code.as_bytes()),
            grant_id: grant.id.clone(),
            redirect_uri: consent.redirect_uri.clone(),
            code_challenge: p.code_challenge.clone().unwrap_or_default(),
            resource: consent.resource.clone(),
            expires_at: now + CODE_TTL_MS,
            used_at: None,
        };
        let stored = async {
            let mut tx = self.db.begin_write().await?;
            // Approving a client again keeps one grant (one row on the MCP clients page),
            // under the policy and rate limit chosen now.
            if existing.is_some() {
                store::oauth::set_grant_terms(
                    &mut *tx,
                    &grant.id,
                    grant.policy_id.as_deref(),
                    grant.rate_limit_per_minute,
                )
                .await?;
            } else {
                store::oauth::insert_grant(&mut *tx, &grant).await?;
            }
            store::oauth::insert_code(&mut *tx, &row).await?;
            tx.commit().await?;
            Ok::<_, Error>(())
        };
        if let Err(e) = stored.await {
            tracing::error!(error = %e, "recording an OAuth approval failed");
            return Err(page(
                "workbench cannot record the approval right now; try again",
            ));
        }
        // New terms for an existing grant hold for its live tokens from their next call.
        self.db.changed();
        tracing::info!(client_id = %consent.client_id, user_id = %who.user_id, grant = %grant.id, "an MCP client was approved");
        let mut pairs = vec![("code", code.as_str())];
        if let Some(s) = p.state.as_deref() {
            pairs.push(("state", s));
        }
        pairs.push(("iss", ctx.issuer.as_str()));
        Ok(with_query(&consent.redirect_uri, &pairs))
    }

    /// The person declined: the redirect telling the client so.
    pub async fn deny(
        &self,
        ctx: &OAuthContext,
        p: &AuthorizeParams,
    ) -> std::result::Result<String, AuthorizeError> {
        let consent = self.check(ctx, p).await?;
        match Self::error_redirect(
            ctx,
            &consent.redirect_uri,
            p.state.as_deref(),
            "access_denied",
            "the person declined",
        ) {
            AuthorizeError::Redirect(u) => Ok(u),
            other => Err(other),
        }
    }

    /// The clients this person approved and has not revoked.
    pub async fn grants(&self, who: &Principal) -> Result<Vec<GrantView>> {
        let rows = store::oauth::live_grants_of_user(self.db.pool(), &who.user_id).await?;
        Ok(rows
            .into_iter()
            .filter(|(g, _, _)| g.project_id == who.project_id)
            .map(|(g, name, uris)| {
                let first = serde_json::from_str::<Vec<String>>(&uris)
                    .ok()
                    .and_then(|u| u.into_iter().next())
                    .unwrap_or_default();
                GrantView {
                    id: g.id,
                    client_id: g.client_id,
                    client_name: name,
                    redirect_host: host_of(&first),
                    policy_id: g.policy_id,
                    created_at: g.created_at,
                    last_used_at: g.last_used_at,
                }
            })
            .collect())
    }

    /// Revokes one of this person's grants and every token it issued.
    pub async fn revoke_grant(&self, who: &Principal, id: &str) -> Result<()> {
        let now = self.clock.now_ms();
        if !store::oauth::revoke_grant(self.db.pool(), id, &who.user_id, now).await? {
            return Err(Error::NotFound);
        }
        store::oauth::revoke_grant_tokens(self.db.pool(), id, now).await?;
        self.db.changed();
        tracing::info!(grant = %id, user_id = %who.user_id, "an MCP client's access was revoked");
        Ok(())
    }

    /// Removes codes and tokens expired for a day and clients nobody approved within a day of
    /// registering (upkeep; an MCP client registers right before it asks for consent).
    pub async fn purge_expired(&self) -> Result<u64> {
        store::oauth::delete_expired(self.db.pool(), self.clock.now_ms() - 24 * 60 * 60 * 1000)
            .await
    }
}

/// The resource a client names at the token endpoint is the one its code or refresh token is
/// bound to.
fn resource_matches(ctx: &OAuthContext, r: &str, bound: &str) -> bool {
    ctx.resource_named(r).as_deref() == Some(bound)
}

#[cfg(test)]
mod tests {
    use super::OAuthContext;

    #[test]
    fn a_resource_is_mcp_or_a_tool_sets_endpoint_under_it() {
        let ctx = OAuthContext::for_public_url("https://wb.example.com/");
        let named = |r: &str| ctx.resource_named(r);
        assert_eq!(
            named("https://wb.example.com/mcp/").as_deref(),
            Some("https://wb.example.com/mcp")
        );
        assert_eq!(
            named("https://wb.example.com/mcp/sets/support").as_deref(),
            Some("https://wb.example.com/mcp/sets/support")
        );
        assert_eq!(
            ctx.for_set("support").resource,
            "https://wb.example.com/mcp/sets/support"
        );
        assert_eq!(
            ctx.set_of("https://wb.example.com/mcp/sets/support")
                .as_deref(),
            Some("support")
        );
        assert_eq!(ctx.set_of("https://wb.example.com/mcp"), None);
        for bad in [
            "https://wb.example.com/mcpx",
            "https://wb.example.com/mcp/sets/",
            "https://wb.example.com/mcp/sets/Bad",
            "https://wb.example.com/mcp/sets/a/b",
            "https://evil.example.com/mcp",
            "https://wb.example.com/mcp/other",
        ] {
            assert_eq!(named(bad), None, "{bad}");
        }
    }
}
