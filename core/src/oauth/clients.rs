//! OAuth clients of the MCP authorization server: dynamic registration (RFC 7591) with its
//! limits, and client ID metadata documents (a client id that is an https URL whose JSON
//! document names the client; fetched through the egress guard, cached for an hour).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::OAuthServer;
use crate::egress::FetchRequest;
use crate::store::{self, oauth::ClientRow};
use crate::{Error, Result};

/// Registrations one address may make per hour.
pub const REGISTRATIONS_PER_HOUR: i64 = 20;
const MAX_REDIRECT_URIS: usize = 10;
const MAX_URI_CHARS: usize = 2000;
const MAX_NAME_CHARS: usize = 100;
const METADATA_MAX_BYTES: usize = 64 * 1024;
const METADATA_FRESH_MS: i64 = 60 * 60 * 1000;

/// A registration request (RFC 7591 §2); unknown members are ignored, as the RFC asks.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Registration {
    #[serde(default)]
    pub redirect_uris: Option<Value>,
    #[serde(default)]
    pub client_name: Option<Value>,
    #[serde(default)]
    pub token_endpoint_auth_method: Option<Value>,
    #[serde(default)]
    pub grant_types: Option<Value>,
    #[serde(default)]
    pub response_types: Option<Value>,
    #[serde(default)]
    pub client_uri: Option<Value>,
    #[serde(default)]
    pub scope: Option<Value>,
}

/// The registration response (RFC 7591 §3.2.1); the secret is shown this once.
#[derive(Debug, Clone, Serialize)]
pub struct RegisteredClient {
    pub client_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<String>,
    pub client_id_issued_at: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_secret_expires_at: Option<i64>,
    pub client_name: String,
    pub redirect_uris: Vec<String>,
    pub token_endpoint_auth_method: String,
    pub grant_types: Vec<&'static str>,
    pub response_types: Vec<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_uri: Option<String>,
    pub scope: &'static str,
}

/// A redirect URI a client may use: https, or http on a loopback host (native apps, RFC 8252);
/// absolute, no fragment, no credentials, no wildcard.
fn check_redirect_uri(raw: &str) -> Result<()> {
    let bad = |why: &str| Error::invalid(format!("redirect_uris: {raw:?} {why}"));
    if raw.len() > MAX_URI_CHARS {
        return Err(bad("is too long"));
    }
    if raw.contains('*') {
        return Err(bad("contains a wildcard; register exact URIs"));
    }
    let u = url::Url::parse(raw).map_err(|_| bad("is not an absolute URL"))?;
    if u.fragment().is_some() {
        return Err(bad("has a fragment"));
    }
    if !u.username().is_empty() || u.password().is_some() {
        return Err(bad("carries credentials"));
    }
    let loopback = matches!(u.host(), Some(url::Host::Domain("localhost")))
        || matches!(u.host(), Some(url::Host::Ipv4(ip)) if ip.is_loopback())
        || matches!(u.host(), Some(url::Host::Ipv6(ip)) if ip.is_loopback());
    match u.scheme() {
        "https" if u.host().is_some() => Ok(()),
        "http" if loopback => Ok(()),
        _ => Err(bad("must be https, or http on a loopback address")),
    }
}

fn text(v: &Option<Value>, field: &str) -> Result<Option<String>> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(Error::invalid(format!("{field} must be a string"))),
    }
}

fn strings(v: &Option<Value>, field: &str) -> Result<Option<Vec<String>>> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(a)) => a
            .iter()
            .map(|x| {
                x.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| Error::invalid(format!("{field} must be an array of strings")))
            })
            .collect::<Result<Vec<_>>>()
            .map(Some),
        Some(_) => Err(Error::invalid(format!(
            "{field} must be an array of strings"
        ))),
    }
}

fn check_name(name: Option<String>) -> Result<String> {
    let name = name
        .map(|n| n.trim().to_owned())
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| "Unnamed MCP client".into());
    if name.chars().count() > MAX_NAME_CHARS || name.chars().any(char::is_control) {
        return Err(Error::invalid(format!(
            "client_name must be at most {MAX_NAME_CHARS} characters of text"
        )));
    }
    Ok(name)
}

fn check_client_uri(uri: Option<String>) -> Result<Option<String>> {
    match uri {
        None => Ok(None),
        Some(u) => match url::Url::parse(&u) {
            Ok(p) if p.scheme() == "https" && u.len() <= MAX_URI_CHARS => Ok(Some(u)),
            _ => Err(Error::invalid("client_uri must be an https URL")),
        },
    }
}

fn check_redirect_uris(v: &Option<Value>) -> Result<Vec<String>> {
    let uris = strings(v, "redirect_uris")?.unwrap_or_default();
    if uris.is_empty() || uris.len() > MAX_REDIRECT_URIS {
        return Err(Error::invalid(format!(
            "redirect_uris must list 1 to {MAX_REDIRECT_URIS} URIs"
        )));
    }
    for u in &uris {
        check_redirect_uri(u)?;
    }
    Ok(uris)
}

impl OAuthServer {
    /// Registers a client (RFC 7591), checked completely before anything is stored; at most
    /// `REGISTRATIONS_PER_HOUR` per address.
    pub async fn register(&self, req: Registration, from: &str) -> Result<RegisteredClient> {
        let redirect_uris = check_redirect_uris(&req.redirect_uris)?;
        let client_name = check_name(text(&req.client_name, "client_name")?)?;
        let method = text(
            &req.token_endpoint_auth_method,
            "token_endpoint_auth_method",
        )?
        .unwrap_or_else(|| "none".into());
        if !matches!(
            method.as_str(),
            "none" | "client_secret_post" | "client_secret_basic"
        ) {
            return Err(Error::invalid("token_endpoint_auth_method must be none, client_secret_post or client_secret_basic"));
        }
        if let Some(g) = strings(&req.grant_types, "grant_types")? {
            if g.iter()
                .any(|t| t != "authorization_code" && t != "refresh_token")
            {
                return Err(Error::invalid(
                    "grant_types may only hold authorization_code and refresh_token",
                ));
            }
        }
        if let Some(r) = strings(&req.response_types, "response_types")? {
            if r.iter().any(|t| t != "code") {
                return Err(Error::invalid("response_types may only hold code"));
            }
        }
        let client_uri = check_client_uri(text(&req.client_uri, "client_uri")?)?;
        let now = self.clock.now_ms();
        let recent =
            store::oauth::count_registered_from(self.db.pool(), from, now - 60 * 60 * 1000).await?;
        if recent >= REGISTRATIONS_PER_HOUR {
            return Err(Error::Throttled {
                retry_after_secs: 3600,
            });
        }
        let secret =
            (method != "none").then(|| format!("wbcs_{}", crate::crypto::random_base62(40)));
        let row = ClientRow {
            client_id: crate::ids::new_id("mcpc"),
            kind: "registered".into(),
            client_name: client_name.clone(),
            redirect_uris: serde_json::to_string(&redirect_uris).expect("strings serialize"),
            token_endpoint_auth_method: method.clone(),
            client_secret_hash: secret
                .as_deref()
                .map(|s| crate::crypto::sha256_hex(s.as_bytes())),
            client_uri: client_uri.clone(),
            registered_from: Some(from.to_owned()),
            created_at: now,
            fetched_at: None,
        };
        store::oauth::insert_client(self.db.pool(), &row).await?;
        tracing::info!(client_id = %row.client_id, name = %client_name, "an MCP client registered");
        Ok(RegisteredClient {
            client_id: row.client_id,
            client_secret_expires_at: secret.as_ref().map(|_| 0),
            client_secret: secret,
            client_id_issued_at: now / 1000,
            client_name,
            redirect_uris,
            token_endpoint_auth_method: method,
            grant_types: vec!["authorization_code", "refresh_token"],
            response_types: vec!["code"],
            client_uri,
            scope: "mcp",
        })
    }

    /// A client by id: a registered one, or the client a metadata document at an https
    /// `client_id` describes (fetched now unless fetched within the hour). Invalid: the document
    /// cannot be fetched or does not describe a usable client (the message says why).
    pub(super) async fn client(&self, client_id: &str) -> Result<Option<ClientRow>> {
        let known = store::oauth::get_client(self.db.pool(), client_id).await?;
        if !is_metadata_url(client_id) {
            return Ok(known.filter(|c| c.kind == "registered"));
        }
        let now = self.clock.now_ms();
        if let Some(c) = &known {
            if c.fetched_at.is_some_and(|t| t > now - METADATA_FRESH_MS) {
                return Ok(known);
            }
        }
        let row = self.fetch_metadata(client_id, now).await?;
        store::oauth::upsert_metadata_client(self.db.pool(), &row).await?;
        Ok(Some(row))
    }

    async fn fetch_metadata(&self, client_id: &str, now: i64) -> Result<ClientRow> {
        let req = FetchRequest {
            method: reqwest::Method::GET,
            url: client_id.to_owned(),
            headers: vec![("accept".into(), "application/json".into())],
            body: None,
            secret_headers: Vec::new(),
            secret_body: false,
        };
        let res = self
            .http
            .fetch_configured(req, METADATA_MAX_BYTES)
            .await
            .map_err(|e| {
                Error::invalid(format!(
                    "the client's metadata document at {client_id} cannot be fetched: {e}"
                ))
            })?;
        if res.status != 200 || res.final_url != client_id {
            return Err(Error::invalid(format!("the client's metadata document at {client_id} answered {} (it must answer 200 itself, without redirects)", res.status)));
        }
        let doc: Registration = serde_json::from_slice(&res.body).map_err(|_| {
            Error::invalid(format!(
                "the client's metadata document at {client_id} is not a JSON object"
            ))
        })?;
        let raw: Value = serde_json::from_slice(&res.body).unwrap_or(Value::Null);
        if raw.get("client_id").and_then(Value::as_str) != Some(client_id) {
            return Err(Error::invalid(
                "the client's metadata document must name its own URL as client_id",
            ));
        }
        let method = text(
            &doc.token_endpoint_auth_method,
            "token_endpoint_auth_method",
        )?
        .unwrap_or_else(|| "none".into());
        if method != "none" {
            return Err(Error::invalid("a client identified by a metadata document authenticates with token_endpoint_auth_method none (PKCE)"));
        }
        let redirect_uris = check_redirect_uris(&doc.redirect_uris)?;
        Ok(ClientRow {
            client_id: client_id.to_owned(),
            kind: "metadata".into(),
            client_name: check_name(text(&doc.client_name, "client_name")?)?,
            redirect_uris: serde_json::to_string(&redirect_uris).expect("strings serialize"),
            token_endpoint_auth_method: method,
            client_secret_hash: None,
            client_uri: check_client_uri(text(&doc.client_uri, "client_uri")?).unwrap_or(None),
            registered_from: None,
            created_at: now,
            fetched_at: Some(now),
        })
    }
}

/// A client id that names a metadata document: an https URL with a path, or http on a loopback
/// address (development; the egress guard still decides whether it may be fetched).
fn is_metadata_url(client_id: &str) -> bool {
    let Ok(u) = url::Url::parse(client_id) else {
        return false;
    };
    let loopback = matches!(u.host(), Some(url::Host::Ipv4(ip)) if ip.is_loopback());
    (u.scheme() == "https" || (u.scheme() == "http" && loopback))
        && u.path() != "/"
        && u.fragment().is_none()
        && u.username().is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redirect_uris_are_https_or_loopback_and_exact() {
        for ok in [
            "https://app.example/cb",
            "http://127.0.0.1:8123/callback",
            "http://localhost:3000/cb",
            "http://[::1]:9/cb",
        ] {
            assert!(check_redirect_uri(ok).is_ok(), "{ok}");
        }
        for bad in [
            "http://app.example/cb",
            "https://*.example/cb",
            "https://app.example/cb#x",
            "https://u:p@app.example/cb",
            "myapp://cb",
            "/relative",
            "javascript:alert(1)",
        ] {
            assert!(check_redirect_uri(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn metadata_client_ids_are_https_urls_with_a_path() {
        assert!(is_metadata_url(
            "https://client.example/oauth/metadata.json"
        ));
        assert!(!is_metadata_url("https://client.example/"));
        assert!(!is_metadata_url("http://client.example/meta.json"));
        assert!(!is_metadata_url("mcpc_abc"));
    }
}
