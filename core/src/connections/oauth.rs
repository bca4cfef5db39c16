//! The OAuth 2 authorization-code flow with PKCE S256 (via the oauth2 crate), token refresh,
//! and credential probes. The HTTP client follows no redirects.

use oauth2::basic::BasicClient;
use oauth2::{
    AuthUrl, AuthorizationCode, ClientId, ClientSecret, CsrfToken, PkceCodeChallenge,
    PkceCodeVerifier, RedirectUrl, RefreshToken, Scope, TokenResponse, TokenUrl,
};

use super::Credential;
use crate::integrations::definition::Probe;
use crate::integrations::{request, Integration, OAuthConfig};
use crate::{Error, Result};

/// Why an OAuth exchange or refresh did not give a token. Messages name no secret.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OAuthError {
    #[error("no OAuth client id is configured")]
    NoClientId,
    #[error("{0}")]
    BadUrl(String),
    #[error("the token endpoint refused: {0}")]
    Refused(String),
    #[error("the token endpoint is unreachable")]
    Unreachable,
    #[error("the token endpoint sent an unexpected answer")]
    UnexpectedAnswer,
    #[error("{0}")]
    Other(String),
    #[error("no refresh token")]
    NoRefreshToken,
    #[error("the vault secret {0} (the OAuth client secret) is missing")]
    MissingClientSecret(String),
    #[error("{0}")]
    Vault(String),
    /// The token endpoint's address is refused.
    #[error("{0}")]
    Destination(String),
}

/// Why a probe did not accept a credential.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProbeError {
    /// The API answered, with a non-2xx status.
    #[error("did not accept it: the check answered {0}")]
    Rejected(u16),
    /// The check could not be made (destination refused, unreachable).
    #[error("could not be checked: {0}")]
    Unchecked(String),
}

fn client_parts(
    cfg: &OAuthConfig,
) -> std::result::Result<(ClientId, Option<ClientSecret>, AuthUrl, TokenUrl), OAuthError> {
    let id = cfg.client_id.clone().ok_or(OAuthError::NoClientId)?;
    Ok((
        ClientId::new(id),
        cfg.client_secret.clone().map(ClientSecret::new),
        AuthUrl::new(cfg.authorize_url.clone()).map_err(|e| OAuthError::BadUrl(e.to_string()))?,
        TokenUrl::new(cfg.token_url.clone()).map_err(|e| OAuthError::BadUrl(e.to_string()))?,
    ))
}

/// The authorization URL, the state and the PKCE verifier for a new attempt.
pub fn authorization(
    cfg: &OAuthConfig,
    integration: &str,
    redirect_uri: &str,
) -> Result<(String, String, String)> {
    let (id, secret, auth, token) = client_parts(cfg).map_err(|why| {
        Error::invalid(format!(
            "{integration} is not configured for OAuth ({why}); an operator sets WB_INTEGRATION_{}_CLIENT_ID and _CLIENT_SECRET",
            integration.to_ascii_uppercase()
        ))
    })?;
    let mut client = BasicClient::new(id).set_auth_uri(auth).set_token_uri(token);
    if let Some(s) = secret {
        client = client.set_client_secret(s);
    }
    let client = client.set_redirect_uri(
        RedirectUrl::new(redirect_uri.to_owned()).map_err(|e| Error::internal(e.to_string()))?,
    );
    let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
    let state = crate::crypto::random_base62(43);
    let state_for_request = state.clone();
    let mut req = client
        .authorize_url(move || CsrfToken::new(state_for_request))
        .set_pkce_challenge(challenge);
    match &cfg.scope_separator {
        Some(sep) if !cfg.scopes.is_empty() => {
            req = req.add_extra_param("scope", cfg.scopes.join(sep))
        }
        _ => {
            for s in &cfg.scopes {
                req = req.add_scope(Scope::new(s.clone()));
            }
        }
    }
    if let Some(r) = &cfg.resource {
        req = req.add_extra_param("resource", r.clone());
    }
    let (url, _) = req.url();
    Ok((url.to_string(), state, verifier.secret().to_owned()))
}

/// The longest token lifetime believed: a provider's `expires_in` beyond it (even
/// `u64::MAX`) is taken as this, so `now + expires_in` never overflows.
const MAX_TOKEN_LIFETIME_MS: u128 = 10 * 365 * 24 * 3600 * 1000;

fn credential_of(t: &oauth2::basic::BasicTokenResponse, now: i64) -> Credential {
    Credential::Oauth2 {
        access_token: t.access_token().secret().to_owned(),
        refresh_token: t.refresh_token().map(|r| r.secret().to_owned()),
        expires_at: t.expires_in().map(|d| expiry(now, d)),
    }
}

/// When a token that lives `d` from `now` expires, clamped.
fn expiry(now: i64, d: std::time::Duration) -> i64 {
    now.saturating_add(d.as_millis().min(MAX_TOKEN_LIFETIME_MS) as i64)
}

pub async fn exchange(
    http: &reqwest::Client,
    cfg: &OAuthConfig,
    code: &str,
    verifier: &str,
    redirect_uri: &str,
    now: i64,
) -> std::result::Result<Credential, OAuthError> {
    let (id, secret, auth, token) = client_parts(cfg)?;
    let mut client = BasicClient::new(id).set_auth_uri(auth).set_token_uri(token);
    if let Some(s) = secret {
        client = client.set_client_secret(s);
    }
    let client = client.set_redirect_uri(
        RedirectUrl::new(redirect_uri.to_owned()).map_err(|e| OAuthError::BadUrl(e.to_string()))?,
    );
    let mut req = client
        .exchange_code(AuthorizationCode::new(code.to_owned()))
        .set_pkce_verifier(PkceCodeVerifier::new(verifier.to_owned()));
    if let Some(r) = &cfg.resource {
        req = req.add_extra_param("resource", r.clone());
    }
    let t = req.request_async(http).await.map_err(describe)?;
    Ok(credential_of(&t, now))
}

pub async fn refresh(
    http: &reqwest::Client,
    cfg: &OAuthConfig,
    refresh_token: &str,
    now: i64,
) -> std::result::Result<Credential, OAuthError> {
    let (id, secret, auth, token) = client_parts(cfg)?;
    let mut client = BasicClient::new(id).set_auth_uri(auth).set_token_uri(token);
    if let Some(s) = secret {
        client = client.set_client_secret(s);
    }
    let rt = RefreshToken::new(refresh_token.to_owned());
    let mut req = client.exchange_refresh_token(&rt);
    if let Some(r) = &cfg.resource {
        req = req.add_extra_param("resource", r.clone());
    }
    let t = req.request_async(http).await.map_err(describe)?;
    Ok(credential_of(&t, now))
}

/// Asks the provider to revoke `token` (RFC 7009); the answer's body is not read (the RFC
/// has the server answer 200 for tokens it does not know too).
pub async fn revoke(
    http: &reqwest::Client,
    cfg: &OAuthConfig,
    url: &str,
    token: &str,
    hint: &str,
) -> std::result::Result<(), OAuthError> {
    let client_id = cfg.client_id.clone().ok_or(OAuthError::NoClientId)?;
    let mut form = vec![("token", token), ("token_type_hint", hint)];
    let mut req = http.post(url);
    match &cfg.client_secret {
        Some(secret) => req = req.basic_auth(&client_id, Some(secret)),
        None => form.push(("client_id", client_id.as_str())),
    }
    let res = req
        .form(&form)
        .send()
        .await
        .map_err(|_| OAuthError::Unreachable)?;
    if res.status().is_success() {
        Ok(())
    } else {
        Err(OAuthError::Refused(format!(
            "HTTP {}",
            res.status().as_u16()
        )))
    }
}

fn describe<RE: std::error::Error + 'static, T: oauth2::ErrorResponse + 'static>(
    e: oauth2::RequestTokenError<RE, T>,
) -> OAuthError {
    match e {
        oauth2::RequestTokenError::ServerResponse(r) => {
            OAuthError::Refused(serde_json::to_string(&r).unwrap_or_default())
        }
        oauth2::RequestTokenError::Request(_) => OAuthError::Unreachable,
        oauth2::RequestTokenError::Parse(_, _) => OAuthError::UnexpectedAnswer,
        oauth2::RequestTokenError::Other(m) => OAuthError::Other(m),
    }
}

/// Sends the integration's probe with the credential; Ok for a 2xx answer, else why not.
pub async fn probe(
    i: &Integration,
    probe: &Probe,
    c: &Credential,
) -> std::result::Result<(), ProbeError> {
    let mut p = request::Prepared {
        method: reqwest::Method::from_bytes(probe.method.as_bytes())
            .unwrap_or(reqwest::Method::GET),
        url: request::join(&i.base_url, &probe.path),
        headers: Vec::new(),
        body: probe.body.clone().map(request::Body::Json),
    };
    i.authorize(&mut p, c);
    let mut b = i
        .builder(&p)
        .map_err(|e| ProbeError::Unchecked(e.to_string()))?;
    if let Some(body) = &p.body {
        let (content_type, bytes) = body.encode();
        b = b.header("content-type", content_type).body(bytes);
    }
    let res = i
        .send(b)
        .await
        .map_err(|e| ProbeError::Unchecked(e.to_string()))?;
    if res.status().is_success() {
        Ok(())
    } else {
        Err(ProbeError::Rejected(res.status().as_u16()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_huge_expires_in_is_clamped_instead_of_overflowing() {
        let now = 1_764_000_000_000;
        assert_eq!(
            expiry(now, std::time::Duration::from_secs(3600)),
            now + 3_600_000
        );
        let far = expiry(now, std::time::Duration::from_secs(u64::MAX));
        assert_eq!(far, now + MAX_TOKEN_LIFETIME_MS as i64);
        assert_eq!(
            expiry(i64::MAX - 5, std::time::Duration::from_secs(60)),
            i64::MAX
        );
    }
}
