//! The token endpoint's work: client authentication, redeeming a code with PKCE S256,
//! rotating refresh tokens with reuse detection (a reused refresh token revokes its family),
//! revocation (RFC 7009), and checking an access token on every `/mcp` request (its resource
//! must be this server's `/mcp`).

use base64::Engine as _;
use serde::Serialize;
use sha2::Digest;

use super::{
    resource_matches, OAuthContext, OAuthServer, ACCESS_TOKEN_PREFIX, REFRESH_TOKEN_PREFIX,
};
use crate::auth::Principal;
use crate::crypto::{ct_eq, random_base62, sha256_hex};
use crate::store::{self, oauth::TokenRow};
use crate::{Error, Result};

pub const ACCESS_TOKEN_TTL_SECS: i64 = 3600;
pub const REFRESH_TOKEN_TTL_SECS: i64 = 30 * 24 * 3600;
/// A grant's `last_used_at` is written at most this often (ms).
const GRANT_TOUCH_MS: i64 = 60_000;

/// A token request's parameters (form fields, plus HTTP Basic client credentials if sent).
#[derive(Debug, Clone, Default)]
pub struct TokenRequest {
    pub grant_type: Option<String>,
    pub client_id: Option<String>,
    pub client_secret: Option<String>,
    /// The client authenticated with HTTP Basic (client_secret_basic).
    pub basic: bool,
    pub code: Option<String>,
    pub redirect_uri: Option<String>,
    pub code_verifier: Option<String>,
    pub refresh_token: Option<String>,
    pub resource: Option<String>,
    /// For revocation.
    pub token: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct TokenResponse {
    pub access_token: String,
    pub token_type: &'static str,
    pub expires_in: i64,
    pub refresh_token: String,
    pub scope: &'static str,
}

/// An OAuth error response (RFC 6749 §5.2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenError {
    pub status: u16,
    pub error: &'static str,
    pub description: String,
}

impl TokenError {
    fn new(status: u16, error: &'static str, description: impl Into<String>) -> Self {
        TokenError {
            status,
            error,
            description: description.into(),
        }
    }
    fn grant(description: impl Into<String>) -> Self {
        TokenError::new(400, "invalid_grant", description)
    }
    fn request(description: impl Into<String>) -> Self {
        TokenError::new(400, "invalid_request", description)
    }
    fn client() -> Self {
        TokenError::new(401, "invalid_client", "client authentication failed")
    }
    fn server(e: Error) -> Self {
        tracing::error!(error = %e, "the OAuth token endpoint failed");
        match e.unavailable_reason() {
            Some(reason) => TokenError::new(
                503,
                "temporarily_unavailable",
                format!("{reason}; try again shortly"),
            ),
            None => TokenError::new(500, "server_error", "internal error"),
        }
    }
}

/// A code challenge is 43 base64url characters (a SHA-256).
pub(super) fn valid_challenge(c: &str) -> bool {
    c.len() == 43
        && c.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// RFC 7636: 43 to 128 unreserved characters.
fn valid_verifier(v: &str) -> bool {
    (43..=128).contains(&v.len())
        && v.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~'))
}

fn challenge_of(verifier: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .encode(sha2::Sha256::digest(verifier.as_bytes()))
}

impl OAuthServer {
    /// The client of a token or revocation request, authenticated as it registered.
    async fn authenticate_client(
        &self,
        req: &TokenRequest,
    ) -> std::result::Result<store::oauth::ClientRow, TokenError> {
        let id = req
            .client_id
            .as_deref()
            .filter(|s| !s.is_empty())
            .ok_or_else(|| TokenError::request("client_id is required"))?;
        // Only clients already known: a metadata document was fetched when the person was asked,
        // so an unauthenticated token request never makes workbench fetch a URL.
        let client = match store::oauth::get_client(self.db.pool(), id).await {
            Ok(Some(c)) => c,
            Ok(None) => return Err(TokenError::client()),
            Err(e) => return Err(TokenError::server(e)),
        };
        match (
            client.token_endpoint_auth_method.as_str(),
            &client.client_secret_hash,
            req.client_secret.as_deref(),
        ) {
            ("none", _, None) => Ok(client),
            ("client_secret_basic", Some(hash), Some(secret))
                if req.basic
                    && ct_eq(sha256_hex(secret.as_bytes()).as_bytes(), hash.as_bytes()) =>
            {
                Ok(client)
            }
            ("client_secret_post", Some(hash), Some(secret))
                if !req.basic
                    && ct_eq(sha256_hex(secret.as_bytes()).as_bytes(), hash.as_bytes()) =>
            {
                Ok(client)
            }
            _ => Err(TokenError::client()),
        }
    }

    /// New tokens of a grant, bound to `resource` (the one its code or refresh token was).
    async fn issue(
        &self,
        resource: &str,
        grant_id: &str,
        family_id: &str,
    ) -> std::result::Result<TokenResponse, TokenError> {
        let now = self.clock.now_ms();
        let access = format!("{ACCESS_TOKEN_PREFIX}{}", random_base62(40));
        let refresh = format!("{REFRESH_TOKEN_PREFIX}{}", random_base62(40));
        let row = |token: &str, kind: &str, ttl: i64| TokenRow {
            token_hash: sha256_hex(token.as_bytes()),
            kind: kind.into(),
            grant_id: grant_id.to_owned(),
            family_id: family_id.to_owned(),
            resource: resource.to_owned(),
            created_at: now,
            expires_at: now + ttl * 1000,
            used_at: None,
            revoked_at: None,
        };
        let stored = async {
            let mut tx = self.db.begin_write().await?;
            store::oauth::insert_token(&mut *tx, &row(&access, "access", ACCESS_TOKEN_TTL_SECS))
                .await?;
            store::oauth::insert_token(&mut *tx, &row(&refresh, "refresh", REFRESH_TOKEN_TTL_SECS))
                .await?;
            tx.commit().await?;
            Ok::<_, Error>(())
        };
        stored.await.map_err(TokenError::server)?;
        Ok(TokenResponse {
            access_token: access,
            token_type: "Bearer",
            expires_in: ACCESS_TOKEN_TTL_SECS,
            refresh_token: refresh,
            scope: "mcp",
        })
    }

    /// `POST /oauth/token`: `authorization_code` or `refresh_token`.
    pub async fn token(
        &self,
        ctx: &OAuthContext,
        req: &TokenRequest,
    ) -> std::result::Result<TokenResponse, TokenError> {
        match req.grant_type.as_deref() {
            Some("authorization_code") => self.redeem_code(ctx, req).await,
            Some("refresh_token") => self.refresh(ctx, req).await,
            Some(_) => Err(TokenError::new(
                400,
                "unsupported_grant_type",
                "grant_type must be authorization_code or refresh_token",
            )),
            None => Err(TokenError::request("grant_type is required")),
        }
    }

    async fn redeem_code(
        &self,
        ctx: &OAuthContext,
        req: &TokenRequest,
    ) -> std::result::Result<TokenResponse, TokenError> {
        let client = self.authenticate_client(req).await?;
        let code = req
            .code
            .as_deref()
            .ok_or_else(|| TokenError::request("code is required"))?;
        let hash = sha256_hex(code.as_bytes());
        let now = self.clock.now_ms();
        let row = store::oauth::get_code(self.db.pool(), &hash)
            .await
            .map_err(TokenError::server)?
            .ok_or_else(|| TokenError::grant("the code is unknown"))?;
        let grant = store::oauth::get_grant(self.db.pool(), &row.grant_id)
            .await
            .map_err(TokenError::server)?
            .ok_or_else(|| TokenError::grant("the code is unknown"))?;
        if grant.client_id != client.client_id {
            return Err(TokenError::grant("the code was issued to another client"));
        }
        if !store::oauth::redeem_code(self.db.pool(), &hash, now)
            .await
            .map_err(TokenError::server)?
        {
            // A replayed code: whoever holds it is not to be trusted with what it gave.
            let _ = store::oauth::revoke_grant_tokens(self.db.pool(), &grant.id, now).await;
            self.db.changed();
            return Err(TokenError::grant(
                "the code was already used; the tokens it gave are revoked",
            ));
        }
        if row.expires_at < now {
            return Err(TokenError::grant(
                "the code expired; start the authorization again",
            ));
        }
        if grant.revoked_at.is_some() {
            return Err(TokenError::grant("the approval was revoked"));
        }
        if req.redirect_uri.as_deref() != Some(row.redirect_uri.as_str()) {
            return Err(TokenError::grant(
                "redirect_uri does not match the authorization request",
            ));
        }
        let verifier = req
            .code_verifier
            .as_deref()
            .ok_or_else(|| TokenError::request("code_verifier is required (PKCE)"))?;
        if !valid_verifier(verifier)
            || !ct_eq(
                challenge_of(verifier).as_bytes(),
                row.code_challenge.as_bytes(),
            )
        {
            return Err(TokenError::grant(
                "the code_verifier does not match the code_challenge",
            ));
        }
        if let Some(r) = req.resource.as_deref() {
            if !resource_matches(ctx, r, &row.resource) {
                return Err(TokenError::new(
                    400,
                    "invalid_target",
                    "the resource must be the one the authorization request named",
                ));
            }
        }
        self.issue(&row.resource, &grant.id, &crate::ids::new_id("ofam"))
            .await
    }

    async fn refresh(
        &self,
        ctx: &OAuthContext,
        req: &TokenRequest,
    ) -> std::result::Result<TokenResponse, TokenError> {
        let client = self.authenticate_client(req).await?;
        let token = req
            .refresh_token
            .as_deref()
            .ok_or_else(|| TokenError::request("refresh_token is required"))?;
        let hash = sha256_hex(token.as_bytes());
        let now = self.clock.now_ms();
        let row = store::oauth::get_token(self.db.pool(), &hash)
            .await
            .map_err(TokenError::server)?
            .filter(|t| t.kind == "refresh")
            .ok_or_else(|| TokenError::grant("the refresh token is unknown"))?;
        let grant = store::oauth::get_grant(self.db.pool(), &row.grant_id)
            .await
            .map_err(TokenError::server)?
            .ok_or_else(|| TokenError::grant("the refresh token is unknown"))?;
        if grant.client_id != client.client_id {
            return Err(TokenError::grant(
                "the refresh token was issued to another client",
            ));
        }
        if row.revoked_at.is_some() || grant.revoked_at.is_some() {
            return Err(TokenError::grant("the refresh token was revoked"));
        }
        if row.expires_at < now {
            return Err(TokenError::grant(
                "the refresh token expired; authorize again",
            ));
        }
        if let Some(r) = req.resource.as_deref() {
            if !resource_matches(ctx, r, &row.resource) {
                return Err(TokenError::new(
                    400,
                    "invalid_target",
                    "the resource must be the one the refresh token was issued for",
                ));
            }
        }
        if !store::oauth::use_refresh_token(self.db.pool(), &hash, now)
            .await
            .map_err(TokenError::server)?
        {
            // Rotated before: a copy is in someone else's hands. End the whole family.
            let n = store::oauth::revoke_family(self.db.pool(), &row.family_id, now)
                .await
                .unwrap_or(0);
            self.db.changed();
            tracing::warn!(grant = %grant.id, revoked = n, "a refresh token was reused; its token family is revoked");
            return Err(TokenError::grant(
                "the refresh token was already used; every token of this sign-in is revoked",
            ));
        }
        self.issue(&row.resource, &grant.id, &row.family_id).await
    }

    /// `POST /oauth/revoke` (RFC 7009): revokes the client's own token (a refresh token with its
    /// whole family); an unknown token is not an error.
    pub async fn revoke(&self, req: &TokenRequest) -> std::result::Result<(), TokenError> {
        let client = self.authenticate_client(req).await?;
        let token = req
            .token
            .as_deref()
            .ok_or_else(|| TokenError::request("token is required"))?;
        let hash = sha256_hex(token.as_bytes());
        let now = self.clock.now_ms();
        let Some(row) = store::oauth::get_token(self.db.pool(), &hash)
            .await
            .map_err(TokenError::server)?
        else {
            return Ok(());
        };
        let Some(grant) = store::oauth::get_grant(self.db.pool(), &row.grant_id)
            .await
            .map_err(TokenError::server)?
        else {
            return Ok(());
        };
        if grant.client_id != client.client_id {
            return Ok(());
        }
        match row.kind.as_str() {
            "refresh" => store::oauth::revoke_family(self.db.pool(), &row.family_id, now)
                .await
                .map(|_| ()),
            _ => store::oauth::revoke_token(self.db.pool(), &hash, now).await,
        }
        .map_err(TokenError::server)?;
        self.db.changed();
        Ok(())
    }

    /// The principal a live grant acts as (see `Accounts::principal_for_grant`).
    pub async fn principal_for_grant(&self, grant_id: &str) -> Result<Option<Principal>> {
        self.accounts.principal_for_grant(grant_id).await
    }

    /// The person an access token acts for, for a request to `ctx.resource`: the token must be
    /// live, unexpired, issued for this resource, and its grant not revoked. Answered from
    /// memory while the database's change epoch stands (`auth/principals.rs`).
    pub async fn authenticate(&self, ctx: &OAuthContext, token: &str) -> Result<Principal> {
        let refused = || Error::Unauthorized("invalid or expired access token; authorize again");
        let elsewhere = || Error::Unauthorized("this access token was issued for another resource");
        if !token.starts_with(ACCESS_TOKEN_PREFIX) {
            return Err(refused());
        }
        let now = self.clock.now_ms();
        let hash = sha256_hex(token.as_bytes());
        // Taken before the reads: a change committed meanwhile makes the entry stale at once.
        let epoch = self.db.changes().snapshot();
        if let Some(hit) = epoch.and_then(|e| self.access.get(&hash, e)) {
            let (expires_at, resource) = &hit.extra;
            if *expires_at <= now {
                return Err(refused());
            }
            if *resource != ctx.resource {
                return Err(elsewhere());
            }
            let who = hit.principal.clone().ok_or_else(refused)?;
            if hit.touch_due(now, GRANT_TOUCH_MS) {
                let (db, id) = (
                    self.db.clone(),
                    who.oauth_grant_id.clone().unwrap_or_default(),
                );
                tokio::spawn(async move {
                    let _ = store::oauth::touch_grant(db.pool(), &id, now).await;
                });
            }
            return Ok(who);
        }
        let row = store::oauth::get_token(self.db.pool(), &hash)
            .await?
            .ok_or_else(refused)?;
        if row.kind != "access" {
            return Err(refused());
        }
        let grant = match row.revoked_at {
            Some(_) => None,
            None => store::oauth::get_grant(self.db.pool(), &row.grant_id).await?,
        };
        let who = match &grant {
            Some(g) => self.accounts.grant_principal(g).await?,
            None => None,
        };
        let (due, touched) = crate::auth::principals::touch_from(
            grant.as_ref().and_then(|g| g.last_used_at),
            now,
            GRANT_TOUCH_MS,
        );
        if let Some(e) = epoch {
            self.access.put(
                hash,
                e,
                who.clone(),
                (row.expires_at, row.resource.clone()),
                touched,
            );
        }
        if row.expires_at <= now {
            return Err(refused());
        }
        if row.resource != ctx.resource {
            return Err(elsewhere());
        }
        let who = who.ok_or_else(refused)?;
        if due {
            let _ = store::oauth::touch_grant(self.db.pool(), &row.grant_id, now).await;
        }
        Ok(who)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pkce_s256_matches_the_rfc_7636_example() {
        let verifier = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
        assert!(valid_verifier(verifier));
        assert_eq!(
            challenge_of(verifier),
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        );
        assert!(valid_challenge(
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        ));
        assert!(!valid_verifier("short"));
    }
}
