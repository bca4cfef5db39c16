//! curl_session tokens (D11): HS256 JWTs with their own audience, 60–3600 s, listing the
//! integrations they may reach. Every token is also recorded by `jti`, so disconnecting or
//! signing out revokes the outstanding ones (a deny-list checked on each proxy request).

use std::sync::Arc;

use jsonwebtoken::{decode, encode, Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};

use crate::auth::Principal;
use crate::clock::Clock;
use crate::crypto::random_base62;
use crate::store::{self, proxy_tokens::ProxyTokenRow, Db};
use crate::{Error, Result};

/// The audience no other token kind uses.
pub const PROXY_AUDIENCE: &str = "workbench:curl-proxy";
pub const MIN_TTL_SECS: u64 = 60;
pub const MAX_TTL_SECS: u64 = 3600;
pub const DEFAULT_TTL_SECS: u64 = 900;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProxyClaims {
    pub aud: String,
    pub sub: String,
    pub prj: String,
    pub integrations: Vec<String>,
    pub exp: u64,
    pub iat: u64,
    pub jti: String,
}

/// What minted a proxy token: every `/c` request acts as it, as it is now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProxyBinding {
    ApiKey(String),
    OAuthGrant(String),
}

#[derive(Clone)]
pub struct ProxyTokens {
    db: Db,
    clock: Arc<dyn Clock>,
    key: Arc<[u8; 32]>,
}

impl ProxyTokens {
    pub fn new(db: Db, clock: Arc<dyn Clock>, key: [u8; 32]) -> Self {
        ProxyTokens {
            db,
            clock,
            key: Arc::new(key),
        }
    }

    /// Mints a token for integrations the caller already validated, bound to the API key or
    /// OAuth grant `who` came through (a person's session mints none).
    pub async fn mint(
        &self,
        who: &Principal,
        integrations: Vec<String>,
        ttl_secs: u64,
    ) -> Result<(String, ProxyClaims)> {
        if who.api_key_id.is_none() && who.oauth_grant_id.is_none() {
            return Err(Error::Forbidden(
                "proxy tokens are minted for an API key or an MCP OAuth grant",
            ));
        }
        let now_ms = self.clock.now_ms();
        let now = (now_ms / 1000) as u64;
        let claims = ProxyClaims {
            aud: PROXY_AUDIENCE.into(),
            sub: who.user_id.clone(),
            prj: who.project_id.clone(),
            integrations,
            exp: now + ttl_secs,
            iat: now,
            jti: random_base62(22),
        };
        store::proxy_tokens::insert(
            self.db.pool(),
            &ProxyTokenRow {
                jti: claims.jti.clone(),
                project_id: claims.prj.clone(),
                user_id: claims.sub.clone(),
                integrations: claims.integrations.join(","),
                expires_at: claims.exp as i64 * 1000,
                revoked_at: None,
                created_at: now_ms,
                api_key_id: who.api_key_id.clone(),
                oauth_grant_id: who.oauth_grant_id.clone(),
            },
        )
        .await?;
        let token = encode(
            &Header::new(Algorithm::HS256),
            &claims,
            &EncodingKey::from_secret(&*self.key),
        )
        .map_err(|e| Error::internal(format!("token signing failed: {e}")))?;
        Ok((token, claims))
    }

    /// Checks signature, audience, expiry (no leeway) and the deny-list; answers the claims and
    /// what minted the token. A token bound to neither a key nor a grant is refused.
    pub async fn verify(&self, token: &str) -> Result<(ProxyClaims, ProxyBinding)> {
        const BAD: Error = Error::Unauthorized("invalid, expired or revoked proxy token");
        let mut v = Validation::new(Algorithm::HS256);
        v.set_audience(&[PROXY_AUDIENCE]);
        v.leeway = 0;
        v.validate_exp = false;
        v.set_required_spec_claims(&["exp", "aud", "sub"]);
        let claims = decode::<ProxyClaims>(token, &DecodingKey::from_secret(&*self.key), &v)
            .map_err(|_| BAD)?
            .claims;
        if claims.exp * 1000 <= self.clock.now_ms() as u64 {
            return Err(BAD);
        }
        let row = store::proxy_tokens::get(self.db.pool(), &claims.jti)
            .await?
            .ok_or(BAD)?;
        if row.revoked_at.is_some() || row.user_id != claims.sub {
            return Err(BAD);
        }
        let binding = match (row.api_key_id, row.oauth_grant_id) {
            (Some(key), _) => ProxyBinding::ApiKey(key),
            (None, Some(grant)) => ProxyBinding::OAuthGrant(grant),
            (None, None) => return Err(BAD),
        };
        Ok((claims, binding))
    }

    /// Revokes every outstanding token of the user (sign-out).
    pub async fn revoke_all(&self, user_id: &str) -> Result<u64> {
        store::proxy_tokens::revoke_for_user(self.db.pool(), user_id, None, self.clock.now_ms())
            .await
    }
}
