//! The OpenID Connect relying party: discovery documents and signing keys (cached; the keys are
//! fetched again when a token names a key id not seen yet, so a provider can rotate its keys),
//! the authorization-code exchange (PKCE S256), refreshing (the background re-check), and ID
//! token validation (signature, issuer, audience, expiry, nonce). Every request goes through the guarded client (SSRF rules).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use base64::Engine as _;
use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::Deserialize;
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::egress::{FetchError, FetchRequest, GuardedClient};
use crate::{Error, Result};

/// How long a discovery document is believed.
const DISCOVERY_TTL_MS: i64 = 60 * 60 * 1000;
/// How long a key set is believed when every token names a known key.
const KEYS_TTL_MS: i64 = 24 * 60 * 60 * 1000;
/// A key set is fetched again for an unknown key id at most this often.
const KEYS_REFETCH_MS: i64 = 10 * 1000;
/// Clock skew allowed on `exp` and `nbf`.
const LEEWAY_S: u64 = 60;
const MAX_DOCUMENT_BYTES: usize = 256 * 1024;
/// The longest one request to a provider may take (the guarded client bounds only connecting).
const REQUEST_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(15);

/// The endpoints of a provider, from `<issuer>/.well-known/openid-configuration`.
#[derive(Debug, Clone, Deserialize)]
pub struct Discovery {
    pub issuer: String,
    pub authorization_endpoint: String,
    pub token_endpoint: String,
    pub jwks_uri: String,
    #[serde(default)]
    pub code_challenge_methods_supported: Option<Vec<String>>,
}

/// Who the provider says signed in.
#[derive(Debug, Clone)]
pub struct Identity {
    pub subject: String,
    pub email: Option<String>,
    pub email_verified: bool,
    /// Every claim of the ID token (the groups are read from it).
    pub claims: Value,
}

/// What a token endpoint answered.
#[derive(Debug)]
pub struct Tokens {
    pub id_token: Option<String>,
    pub refresh_token: Option<zeroize::Zeroizing<String>>,
}

/// How a refresh went.
#[derive(Debug)]
pub enum Refreshed {
    /// The provider refused the refresh token (`invalid_grant`): the person was disabled, or
    /// their grant revoked.
    Refused,
    Tokens(Tokens),
}

#[derive(Default)]
struct Cache {
    discovery: HashMap<String, (i64, Arc<Discovery>)>,
    /// By jwks_uri: when fetched, the keys.
    keys: HashMap<String, (i64, Arc<JwkSet>)>,
}

#[derive(Clone)]
pub struct Oidc {
    http: GuardedClient,
    cache: Arc<Mutex<Cache>>,
}

/// Signature algorithms accepted on ID tokens: asymmetric only (never `none` or a MAC keyed
/// with the client secret).
const ASYMMETRIC: &[Algorithm] = &[
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
    Algorithm::ES256,
    Algorithm::ES384,
    Algorithm::EdDSA,
];

/// Whether `url` may be an endpoint of a provider: https, or http to a loopback host (a
/// provider on the same machine).
pub fn endpoint_problem(url: &str) -> Option<String> {
    let Ok(u) = url::Url::parse(url) else {
        return Some(format!("{url:?} is not a URL"));
    };
    if u.fragment().is_some() || !u.username().is_empty() || u.password().is_some() {
        return Some(format!("{url:?} must not carry a fragment or credentials"));
    }
    let loopback = match u.host() {
        Some(url::Host::Domain(d)) => d == "localhost",
        Some(url::Host::Ipv4(a)) => a.is_loopback(),
        Some(url::Host::Ipv6(a)) => a.is_loopback(),
        None => return Some(format!("{url:?} has no host")),
    };
    match u.scheme() {
        "https" => None,
        "http" if loopback => None,
        _ => Some(format!(
            "{url:?} must be https (http only to a loopback address)"
        )),
    }
}

fn unreachable(what: &str, e: FetchError) -> Error {
    Error::Invalid(format!(
        "the identity provider's {what} cannot be read: {e}"
    ))
}

/// base64url (no padding) of SHA-256 of the verifier: the S256 code challenge.
pub fn challenge_of(verifier: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()))
}

impl Oidc {
    pub fn new(http: GuardedClient) -> Oidc {
        Oidc {
            http,
            cache: Arc::default(),
        }
    }

    /// `fetch_configured` within `REQUEST_TIMEOUT`.
    async fn fetch(
        &self,
        req: FetchRequest,
    ) -> std::result::Result<crate::egress::FetchResponse, FetchError> {
        tokio::time::timeout(
            REQUEST_TIMEOUT,
            self.http.fetch_configured(req, MAX_DOCUMENT_BYTES),
        )
        .await
        .unwrap_or_else(|_| Err(FetchError::Transport("no answer in time".into())))
    }

    async fn get_json(&self, url: &str, what: &str) -> Result<Value> {
        let res = self
            .fetch(FetchRequest {
                method: reqwest::Method::GET,
                url: url.to_owned(),
                headers: vec![("accept".into(), "application/json".into())],
                body: None,
                secret_headers: vec![],
                secret_body: false,
            })
            .await
            .map_err(|e| unreachable(what, e))?;
        if res.status != 200 {
            return Err(Error::Invalid(format!(
                "the identity provider's {what} answered HTTP {}",
                res.status
            )));
        }
        serde_json::from_slice(&res.body)
            .map_err(|_| Error::Invalid(format!("the identity provider's {what} is not JSON")))
    }

    /// The provider's discovery document, read now (`fresh`) or from the cache. It must name
    /// exactly `issuer`, support S256 when it lists methods, and use acceptable endpoints.
    pub async fn discovery(&self, issuer: &str, now: i64, fresh: bool) -> Result<Arc<Discovery>> {
        if !fresh {
            let cache = self.cache.lock().expect("oidc cache lock");
            if let Some((at, d)) = cache.discovery.get(issuer) {
                if now - at < DISCOVERY_TTL_MS {
                    return Ok(d.clone());
                }
            }
        }
        let url = format!(
            "{}/.well-known/openid-configuration",
            issuer.trim_end_matches('/')
        );
        let doc = self.get_json(&url, "discovery document").await?;
        let d: Discovery = serde_json::from_value(doc).map_err(|e| {
            Error::Invalid(format!(
                "the identity provider's discovery document is incomplete: {e}"
            ))
        })?;
        if d.issuer != issuer {
            return Err(Error::Invalid(format!(
                "the discovery document names the issuer {:?}, not {issuer:?}",
                d.issuer
            )));
        }
        for u in [&d.authorization_endpoint, &d.token_endpoint, &d.jwks_uri] {
            if let Some(p) = endpoint_problem(u) {
                return Err(Error::Invalid(format!(
                    "the discovery document's endpoint {p}"
                )));
            }
        }
        if d.code_challenge_methods_supported
            .as_ref()
            .is_some_and(|m| !m.iter().any(|m| m == "S256"))
        {
            return Err(Error::Invalid(
                "the identity provider does not support PKCE with S256".into(),
            ));
        }
        let d = Arc::new(d);
        self.cache
            .lock()
            .expect("oidc cache lock")
            .discovery
            .insert(issuer.to_owned(), (now, d.clone()));
        Ok(d)
    }

    async fn keys(&self, jwks_uri: &str, now: i64, refetch: bool) -> Result<Arc<JwkSet>> {
        {
            let cache = self.cache.lock().expect("oidc cache lock");
            if let Some((at, k)) = cache.keys.get(jwks_uri) {
                let age = now - at;
                if age < KEYS_TTL_MS && (!refetch || age < KEYS_REFETCH_MS) {
                    return Ok(k.clone());
                }
            }
        }
        let doc = self.get_json(jwks_uri, "signing keys").await?;
        let set: JwkSet = serde_json::from_value(doc).map_err(|e| {
            Error::Invalid(format!(
                "the identity provider's signing keys are unreadable: {e}"
            ))
        })?;
        let set = Arc::new(set);
        self.cache
            .lock()
            .expect("oidc cache lock")
            .keys
            .insert(jwks_uri.to_owned(), (now, set.clone()));
        Ok(set)
    }

    /// Posts `form` to the token endpoint with the client's authentication: the answer's
    /// status and JSON body.
    async fn token_request(
        &self,
        d: &Discovery,
        client_id: &str,
        client_secret: Option<&str>,
        mut form: Vec<(&str, &str)>,
    ) -> Result<(u16, Value)> {
        let mut headers = vec![
            (
                "content-type".to_owned(),
                "application/x-www-form-urlencoded".to_owned(),
            ),
            ("accept".to_owned(), "application/json".to_owned()),
        ];
        match client_secret {
            // RFC 6749 2.3.1: both form-encoded, then Basic.
            Some(secret) => {
                let enc = |s: &str| {
                    url::form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>()
                };
                let basic = base64::engine::general_purpose::STANDARD.encode(format!(
                    "{}:{}",
                    enc(client_id),
                    enc(secret)
                ));
                headers.push(("authorization".into(), format!("Basic {basic}")));
            }
            None => form.push(("client_id", client_id)),
        }
        let form = url::form_urlencoded::Serializer::new(String::new())
            .extend_pairs(form)
            .finish();
        let res = self
            .fetch(FetchRequest {
                method: reqwest::Method::POST,
                url: d.token_endpoint.clone(),
                headers,
                body: Some(form.into()),
                secret_headers: vec!["authorization".into()],
                secret_body: true,
            })
            .await
            .map_err(|e| {
                Error::invalid(format!(
                    "the identity provider's token endpoint cannot be reached: {e}"
                ))
            })?;
        Ok((
            res.status,
            serde_json::from_slice(&res.body).unwrap_or(Value::Null),
        ))
    }

    fn tokens(body: &Value) -> Tokens {
        Tokens {
            id_token: body["id_token"].as_str().map(str::to_owned),
            refresh_token: body["refresh_token"]
                .as_str()
                .filter(|t| !t.is_empty())
                .map(|t| zeroize::Zeroizing::new(t.to_owned())),
        }
    }

    /// Exchanges an authorization code: the ID token, and a refresh token if the provider
    /// sent one (the access token is not kept).
    pub async fn exchange(
        &self,
        d: &Discovery,
        client_id: &str,
        client_secret: Option<&str>,
        code: &str,
        verifier: &str,
        redirect_uri: &str,
    ) -> Result<(String, Option<zeroize::Zeroizing<String>>)> {
        let form = vec![
            ("grant_type", "authorization_code"),
            ("code", code),
            ("redirect_uri", redirect_uri),
            ("code_verifier", verifier),
        ];
        let (status, body) = self
            .token_request(d, client_id, client_secret, form)
            .await?;
        if status != 200 {
            let why = body["error"].as_str().unwrap_or("no reason given");
            return Err(Error::invalid(format!(
                "the identity provider refused the sign-in (HTTP {status}: {})",
                why.chars().take(100).collect::<String>()
            )));
        }
        let t = Self::tokens(&body);
        let id_token = t.id_token.ok_or_else(|| {
            Error::invalid("the identity provider sent no ID token; is the openid scope asked for?")
        })?;
        Ok((id_token, t.refresh_token))
    }

    /// Uses a refresh token: refused (the person is no longer active there), or new tokens.
    /// Anything else (unreachable, a server error) is an error: nothing can be concluded.
    pub async fn refresh(
        &self,
        d: &Discovery,
        client_id: &str,
        client_secret: Option<&str>,
        refresh_token: &str,
    ) -> Result<Refreshed> {
        let form = vec![
            ("grant_type", "refresh_token"),
            ("refresh_token", refresh_token),
        ];
        let (status, body) = self
            .token_request(d, client_id, client_secret, form)
            .await?;
        match status {
            200 => Ok(Refreshed::Tokens(Self::tokens(&body))),
            400 | 401 if body["error"] == "invalid_grant" => Ok(Refreshed::Refused),
            _ => Err(Error::invalid(format!(
                "the identity provider's token endpoint answered HTTP {status}"
            ))),
        }
    }

    /// Checks an ID token: an asymmetric signature by a key of the provider's set (fetched
    /// again, at most every few seconds, when the token names an unknown key), issuer,
    /// audience, expiry and the nonce of the attempt (None: a refreshed token, which carries
    /// none to compare).
    pub async fn validate(
        &self,
        d: &Discovery,
        client_id: &str,
        id_token: &str,
        nonce: Option<&str>,
        now: i64,
    ) -> Result<Identity> {
        let bad = |why: &str| Error::invalid(format!("the ID token is not valid: {why}"));
        let header = jsonwebtoken::decode_header(id_token).map_err(|_| bad("unreadable"))?;
        if !ASYMMETRIC.contains(&header.alg) {
            return Err(bad("it is not signed with an asymmetric algorithm"));
        }
        let mut set = self.keys(&d.jwks_uri, now, false).await?;
        let pick = |set: &JwkSet| match &header.kid {
            Some(kid) => set.find(kid).cloned(),
            None if set.keys.len() == 1 => set.keys.first().cloned(),
            None => None,
        };
        let jwk = match pick(&set) {
            Some(k) => k,
            None => {
                set = self.keys(&d.jwks_uri, now, true).await?;
                pick(&set)
                    .ok_or_else(|| bad("it is signed by a key the provider does not publish"))?
            }
        };
        let key = DecodingKey::from_jwk(&jwk).map_err(|_| bad("the provider's key is unusable"))?;
        let mut v = Validation::new(header.alg);
        v.set_issuer(&[&d.issuer]);
        v.set_audience(&[client_id]);
        v.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        v.leeway = LEEWAY_S;
        // Expiry is checked below against workbench's clock (tests move it).
        v.validate_exp = false;
        let data = jsonwebtoken::decode::<Value>(id_token, &key, &v).map_err(|e| {
            use jsonwebtoken::errors::ErrorKind as K;
            bad(match e.kind() {
                K::InvalidSignature => "bad signature",
                K::InvalidIssuer => "another issuer",
                K::InvalidAudience => "issued to another client",
                K::MissingRequiredClaim(_) => "a required claim is missing",
                _ => "it does not verify",
            })
        })?;
        let claims = data.claims;
        let exp = claims["exp"].as_i64().ok_or_else(|| bad("no expiry"))?;
        if exp.saturating_add(LEEWAY_S as i64).saturating_mul(1000) <= now {
            return Err(bad("it has expired"));
        }
        if let Some(azp) = claims.get("azp").and_then(Value::as_str) {
            if azp != client_id {
                return Err(bad("issued to another client"));
            }
        }
        if let Some(nonce) = nonce {
            let sent = claims["nonce"].as_str().unwrap_or_default();
            if !crate::crypto::ct_eq(sent.as_bytes(), nonce.as_bytes()) {
                return Err(bad("the nonce is not this sign-in's"));
            }
        }
        let subject = claims["sub"]
            .as_str()
            .filter(|s| !s.is_empty() && s.len() <= 255)
            .ok_or_else(|| bad("no subject"))?
            .to_owned();
        let email_verified = match &claims["email_verified"] {
            Value::Bool(b) => *b,
            Value::String(s) => s == "true",
            _ => false,
        };
        Ok(Identity {
            subject,
            email: claims["email"].as_str().map(str::to_owned),
            email_verified,
            claims,
        })
    }
}
