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

#[derive(Clone)]
pub struct ProxyTokens {
    db: Db,
    clock: Arc<dyn Clock>,
    key: Arc<[u8; 32]>,
}

impl ProxyTokens {
    pub fn new(db: Db, clock: Arc<dyn Clock>, key: [u8; 32]) -> Self {
        ProxyTokens { db, clock, key: Arc::new(key) }
    }

    /// Mints a token for integrations the caller already validated.
    pub async fn mint(&self, who: &Principal, integrations: Vec<String>, ttl_secs: u64) -> Result<(String, ProxyClaims)> {
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
            },
        )
        .await?;
        let token = encode(&Header::new(Algorithm::HS256), &claims, &EncodingKey::from_secret(&*self.key))
            .map_err(|e| Error::internal(format!("token signing failed: {e}")))?;
        Ok((token, claims))
    }

    /// Checks signature, audience, expiry (no leeway) and the deny-list.
    pub async fn verify(&self, token: &str) -> Result<ProxyClaims> {
        const BAD: Error = Error::Unauthorized("invalid, expired or revoked proxy token");
        let mut v = Validation::new(Algorithm::HS256);
        v.set_audience(&[PROXY_AUDIENCE]);
        v.leeway = 0;
        v.validate_exp = false;
        v.set_required_spec_claims(&["exp", "aud", "sub"]);
        let claims = decode::<ProxyClaims>(token, &DecodingKey::from_secret(&*self.key), &v).map_err(|_| BAD)?.claims;
        if claims.exp * 1000 <= self.clock.now_ms() as u64 {
            return Err(BAD);
        }
        let row = store::proxy_tokens::get(self.db.pool(), &claims.jti).await?.ok_or(BAD)?;
        if row.revoked_at.is_some() || row.user_id != claims.sub {
            return Err(BAD);
        }
        Ok(claims)
    }

    /// Revokes every outstanding token of the user (sign-out).
    pub async fn revoke_all(&self, user_id: &str) -> Result<u64> {
        store::proxy_tokens::revoke_for_user(self.db.pool(), user_id, None, self.clock.now_ms()).await
    }
}
