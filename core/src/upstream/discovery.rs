//! How workbench, as an MCP client, learns to sign a user in to a remote MCP server (the MCP
//! authorization spec): the 401's `WWW-Authenticate` `resource_metadata` (RFC 9728, with the
//! well-known fallbacks), the authorization server's metadata (RFC 8414, then OpenID
//! discovery), PKCE S256 required, and the client registration in the spec's order: a
//! pre-registered client, workbench's client ID metadata document, dynamic registration
//! (RFC 7591). Every failure names the URL that failed and why, in words an admin can act on.

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use zeroize::Zeroizing;

use crate::egress::{FetchRequest, FetchResponse, GuardedClient};

/// Where workbench serves its client ID metadata document.
pub const CLIENT_METADATA_PATH: &str = "/oauth/client-metadata";

/// The largest metadata document or registration answer read.
const MAX_METADATA_BYTES: usize = 64 * 1024;

/// Why discovery stopped: the URL that failed and what was wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{url}: {why}")]
pub struct DiscoveryError {
    pub url: String,
    pub why: String,
}

fn fail(url: &str, why: impl Into<String>) -> DiscoveryError {
    DiscoveryError {
        url: url.to_owned(),
        why: why.into(),
    }
}

/// What discovery found out about a server and its authorization server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Discovered {
    /// The protected resource metadata document read.
    pub resource_metadata: String,
    /// The server's resource identifier, sent as `resource` (RFC 8707).
    pub resource: String,
    pub issuer: String,
    pub authorization_endpoint: String,
    pub token_endpoint: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revocation_endpoint: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registration_endpoint: Option<String>,
    #[serde(default)]
    pub client_id_metadata_document_supported: bool,
    /// The authorization server names itself (`iss`) in its answers (RFC 9207), so a
    /// callback from another one can be told apart.
    #[serde(default)]
    pub iss_parameter_supported: bool,
    /// The scopes the server asks for (the 401's `scope`, else the metadata's
    /// `scopes_supported`), used unless the admin named some.
    #[serde(default)]
    pub scopes: Vec<String>,
    /// The protected resource metadata's `scopes_supported`: what a step-up asks for when the
    /// server's `insufficient_scope` answer names none, and what dynamic registration asks to
    /// be allowed (so a later step-up is not refused for the client's registered scope).
    #[serde(default)]
    pub scopes_supported: Vec<String>,
    /// The authorization server metadata's `scopes_supported` (when it lists at most 50):
    /// dynamic registration asks to be allowed these too.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub authorization_server_scopes: Vec<String>,
}

/// How workbench is known to the authorization server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "method", rename_all = "snake_case")]
pub enum ClientRegistration {
    /// The admin's client; its secret (if any) is a vault secret of the project.
    PreRegistered {
        client_id: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        secret_ref: Option<String>,
    },
    /// workbench's client ID metadata document: the client id is its URL.
    MetadataDocument { client_id: String },
    /// Registered dynamically; a secret it was given is sealed in the vault under `secret_ref`.
    Dynamic {
        client_id: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        secret_ref: Option<String>,
    },
}

impl ClientRegistration {
    pub fn client_id(&self) -> &str {
        match self {
            ClientRegistration::PreRegistered { client_id, .. }
            | ClientRegistration::MetadataDocument { client_id }
            | ClientRegistration::Dynamic { client_id, .. } => client_id,
        }
    }

    pub fn secret_ref(&self) -> Option<&str> {
        match self {
            ClientRegistration::PreRegistered { secret_ref, .. }
            | ClientRegistration::Dynamic { secret_ref, .. } => secret_ref.as_deref(),
            ClientRegistration::MetadataDocument { .. } => None,
        }
    }

    pub fn method(&self) -> &'static str {
        match self {
            ClientRegistration::PreRegistered { .. } => "pre_registered",
            ClientRegistration::MetadataDocument { .. } => "metadata_document",
            ClientRegistration::Dynamic { .. } => "dynamic",
        }
    }
}

/// workbench as an OAuth client: the URL of its client ID metadata document and the redirect
/// URI its connect flow finishes at.
#[derive(Debug, Clone)]
pub struct OurClient {
    pub metadata_url: String,
    pub redirect_uri: String,
}

impl OurClient {
    /// Where a workbench at `public_url` serves its metadata document and finishes connects.
    pub fn for_public_url(public_url: &str) -> OurClient {
        let public = public_url.trim_end_matches('/');
        OurClient {
            metadata_url: format!("{public}{CLIENT_METADATA_PATH}"),
            redirect_uri: format!("{public}/oauth/callback"),
        }
    }

    /// The client ID metadata document served at `metadata_url`.
    pub fn metadata_document(&self, public_url: &str) -> Value {
        json!({
            "client_id": self.metadata_url,
            "client_name": "workbench",
            "client_uri": public_url,
            "redirect_uris": [self.redirect_uri],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": "none",
        })
    }
}

/// The parameters of a `WWW-Authenticate: Bearer …` challenge (RFC 6750 §3), names lowercased.
pub fn bearer_challenge(header: &str) -> Option<Vec<(String, String)>> {
    let rest = header.trim_start();
    let scheme_end = rest
        .find(|c: char| c.is_ascii_whitespace())
        .unwrap_or(rest.len());
    if !rest[..scheme_end].eq_ignore_ascii_case("bearer") {
        return None;
    }
    let mut params = Vec::new();
    let mut s = rest[scheme_end..].trim_start();
    while !s.is_empty() {
        let Some(eq) = s.find('=') else { break };
        let name = s[..eq]
            .trim()
            .trim_start_matches(',')
            .trim()
            .to_ascii_lowercase();
        s = s[eq + 1..].trim_start();
        let value;
        if let Some(quoted) = s.strip_prefix('"') {
            let mut out = String::new();
            let mut chars = quoted.char_indices();
            let mut end = quoted.len();
            while let Some((i, c)) = chars.next() {
                match c {
                    '\\' => {
                        if let Some((_, n)) = chars.next() {
                            out.push(n);
                        }
                    }
                    '"' => {
                        end = i + 1;
                        break;
                    }
                    c => out.push(c),
                }
            }
            value = out;
            s = &quoted[end.min(quoted.len())..];
        } else {
            let end = s.find(',').unwrap_or(s.len());
            value = s[..end].trim().to_owned();
            s = &s[end..];
        }
        s = s.trim_start().trim_start_matches(',').trim_start();
        if !name.is_empty() {
            params.push((name, value));
        }
    }
    Some(params)
}

/// Where RFC 9728 puts a resource's metadata when no challenge names it: the path-specific
/// URL, then the root one.
pub fn resource_metadata_urls(resource: &url::Url) -> Vec<String> {
    let origin = resource.origin().ascii_serialization();
    let path = resource.path().trim_end_matches('/');
    let mut out = Vec::new();
    if !path.is_empty() {
        out.push(format!(
            "{origin}/.well-known/oauth-protected-resource{path}"
        ));
    }
    out.push(format!("{origin}/.well-known/oauth-protected-resource"));
    out
}

/// Where an authorization server's metadata may be, in the MCP spec's order: RFC 8414 then
/// OpenID discovery, path-inserted first for an issuer with a path.
pub fn authorization_server_metadata_urls(issuer: &url::Url) -> Vec<String> {
    let origin = issuer.origin().ascii_serialization();
    let path = issuer.path().trim_end_matches('/');
    if path.is_empty() {
        vec![
            format!("{origin}/.well-known/oauth-authorization-server"),
            format!("{origin}/.well-known/openid-configuration"),
        ]
    } else {
        vec![
            format!("{origin}/.well-known/oauth-authorization-server{path}"),
            format!("{origin}/.well-known/openid-configuration{path}"),
            format!("{origin}{path}/.well-known/openid-configuration"),
        ]
    }
}

/// An https URL, or http to a loopback host (OAuth 2.1 allows nothing else for its endpoints).
fn secure_url(raw: &str, what: &str, found_at: &str) -> Result<url::Url, DiscoveryError> {
    let u = url::Url::parse(raw)
        .map_err(|e| fail(found_at, format!("{what} {raw:?} is not a URL: {e}")))?;
    let loopback = match u.host() {
        Some(url::Host::Domain(d)) => d == "localhost",
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    };
    if u.scheme() == "https" || (u.scheme() == "http" && loopback) {
        Ok(u)
    } else {
        Err(fail(found_at, format!("{what} {raw} must be an https URL")))
    }
}

fn same_url(a: &str, b: &str) -> bool {
    a.trim_end_matches('/') == b.trim_end_matches('/')
}

async fn get_json(
    http: &GuardedClient,
    url: &str,
) -> Result<Option<serde_json::Map<String, Value>>, DiscoveryError> {
    let res = send(http, reqwest::Method::GET, url, Vec::new(), None).await?;
    match res.status {
        200 => match serde_json::from_slice::<Value>(&res.body) {
            Ok(Value::Object(m)) => Ok(Some(m)),
            _ => Err(fail(url, "the answer is not a JSON object")),
        },
        404 | 405 | 410 => Ok(None),
        s => Err(fail(url, format!("answered HTTP {s}"))),
    }
}

/// The first of `urls` that answers a JSON object, with its URL; none: `missing`, naming all.
async fn first_document(
    http: &GuardedClient,
    urls: &[String],
    missing: &str,
) -> Result<(String, serde_json::Map<String, Value>), DiscoveryError> {
    for url in urls {
        if let Some(doc) = get_json(http, url).await? {
            return Ok((url.clone(), doc));
        }
    }
    Err(fail(&urls.join(", "), missing))
}

async fn send(
    http: &GuardedClient,
    method: reqwest::Method,
    url: &str,
    headers: Vec<(String, String)>,
    body: Option<Bytes>,
) -> Result<FetchResponse, DiscoveryError> {
    let mut headers = headers;
    headers.push(("accept".into(), "application/json".into()));
    http.fetch_configured(
        FetchRequest {
            method,
            url: url.to_owned(),
            headers,
            body,
            secret_headers: Vec::new(),
            secret_body: false,
        },
        MAX_METADATA_BYTES,
    )
    .await
    .map_err(|e| fail(url, e.to_string()))
}

/// Asks the server for what it needs: an unauthenticated MCP request, whose 401 names the
/// metadata (or the well-known places are tried), then the authorization server's metadata.
pub async fn discover(
    http: &GuardedClient,
    server: &url::Url,
    transport: &str,
) -> Result<Discovered, DiscoveryError> {
    let (method, body) = if transport == "sse" {
        (reqwest::Method::GET, None)
    } else {
        (
            reqwest::Method::POST,
            Some(Bytes::from(
                json!({ "jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                    "protocolVersion": super::PROTOCOL_VERSION, "capabilities": {},
                    "clientInfo": { "name": "workbench", "version": env!("CARGO_PKG_VERSION") } } })
                .to_string(),
            )),
        )
    };
    let probe = send(
        http,
        method,
        server.as_str(),
        vec![
            ("content-type".into(), "application/json".into()),
            (
                "accept".into(),
                "application/json, text/event-stream".into(),
            ),
        ],
        body,
    )
    .await?;
    let challenge = (probe.status == 401)
        .then(|| {
            probe
                .headers
                .iter()
                .filter(|(k, _)| k.eq_ignore_ascii_case("www-authenticate"))
                .find_map(|(_, v)| bearer_challenge(v))
        })
        .flatten()
        .unwrap_or_default();
    if probe.status != 401 && probe.status != 403 {
        return Err(fail(
            server.as_str(),
            format!(
                "answered HTTP {} without a credential; a server that signs each user in answers 401 (register it with auth none or bearer instead)",
                probe.status
            ),
        ));
    }
    let param = |n: &str| {
        challenge
            .iter()
            .find(|(k, _)| k == n)
            .map(|(_, v)| v.clone())
    };
    let candidates = match param("resource_metadata") {
        Some(u) => vec![secure_url(&u, "resource_metadata", server.as_str())?.to_string()],
        None => resource_metadata_urls(server),
    };
    let (prm_url, prm) = first_document(
        http,
        &candidates,
        "no protected resource metadata (RFC 9728) was found there",
    )
    .await?;
    let resource = prm
        .get("resource")
        .and_then(Value::as_str)
        .ok_or_else(|| fail(&prm_url, "the metadata has no resource"))?
        .to_owned();
    let names_this_server = url::Url::parse(&resource).is_ok_and(|r| {
        let (at, of) = (
            server.path().trim_end_matches('/'),
            r.path().trim_end_matches('/'),
        );
        r.origin() == server.origin()
            && (at == of || at.starts_with(&format!("{of}/")) || of.is_empty())
    });
    if !names_this_server {
        return Err(fail(
            &prm_url,
            format!("the metadata is for the resource {resource}, not for {server}"),
        ));
    }
    let issuer_raw = prm
        .get("authorization_servers")
        .and_then(Value::as_array)
        .and_then(|a| a.iter().find_map(Value::as_str))
        .ok_or_else(|| fail(&prm_url, "the metadata names no authorization server"))?
        .to_owned();
    let issuer = secure_url(&issuer_raw, "the authorization server", &prm_url)?;
    let (asm_url, asm) = first_document(
        http,
        &authorization_server_metadata_urls(&issuer),
        "no authorization server metadata (RFC 8414 or OpenID discovery) was found there",
    )
    .await?;
    let text = |k: &str| asm.get(k).and_then(Value::as_str).map(str::to_owned);
    let said_issuer = text("issuer").unwrap_or_default();
    if !same_url(&said_issuer, &issuer_raw) {
        return Err(fail(
            &asm_url,
            format!("the metadata names the issuer {said_issuer:?}, not {issuer_raw}"),
        ));
    }
    let s256 = asm
        .get("code_challenge_methods_supported")
        .and_then(Value::as_array)
        .is_some_and(|m| m.iter().any(|v| v.as_str() == Some("S256")));
    if !s256 {
        return Err(fail(
            &asm_url,
            "the authorization server does not advertise PKCE S256 (code_challenge_methods_supported), which MCP requires; workbench will not sign users in without it",
        ));
    }
    let endpoint = |k: &str| -> Result<Option<String>, DiscoveryError> {
        text(k)
            .map(|u| secure_url(&u, k, &asm_url).map(|u| u.to_string()))
            .transpose()
    };
    let authorization_endpoint = endpoint("authorization_endpoint")?
        .ok_or_else(|| fail(&asm_url, "the metadata has no authorization_endpoint"))?;
    let token_endpoint = endpoint("token_endpoint")?
        .ok_or_else(|| fail(&asm_url, "the metadata has no token_endpoint"))?;
    let words = |v: Option<&Value>| -> Vec<String> {
        v.and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default()
    };
    let scopes_supported = words(prm.get("scopes_supported"));
    let scopes = match param("scope") {
        Some(s) => s.split_whitespace().map(str::to_owned).collect(),
        None => scopes_supported.clone(),
    };
    Ok(Discovered {
        resource_metadata: prm_url,
        resource,
        issuer: issuer_raw,
        authorization_endpoint,
        token_endpoint,
        revocation_endpoint: endpoint("revocation_endpoint")?,
        registration_endpoint: endpoint("registration_endpoint")?,
        client_id_metadata_document_supported: asm
            .get("client_id_metadata_document_supported")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        iss_parameter_supported: asm
            .get("authorization_response_iss_parameter_supported")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        scopes,
        scopes_supported,
        authorization_server_scopes: Some(words(asm.get("scopes_supported")))
            .filter(|s| s.len() <= 50)
            .unwrap_or_default(),
    })
}

/// A client dynamic registration gave: its id and, for a confidential client, its secret.
pub struct DynamicClient {
    pub client_id: String,
    pub client_secret: Option<Zeroizing<String>>,
}

/// Registers workbench with the authorization server (RFC 7591) as a public client using
/// PKCE, redirecting to `ours.redirect_uri`.
pub async fn register_dynamically(
    http: &GuardedClient,
    endpoint: &str,
    ours: &OurClient,
    scopes: &[String],
) -> Result<DynamicClient, DiscoveryError> {
    let mut body = json!({
        "client_name": "workbench",
        "redirect_uris": [ours.redirect_uri],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
    });
    if !scopes.is_empty() {
        body["scope"] = json!(scopes.join(" "));
    }
    let res = send(
        http,
        reqwest::Method::POST,
        endpoint,
        vec![("content-type".into(), "application/json".into())],
        Some(Bytes::from(body.to_string())),
    )
    .await?;
    let doc: Value = serde_json::from_slice(&res.body).unwrap_or(Value::Null);
    if !(200..300).contains(&res.status) {
        let said = doc
            .get("error_description")
            .or_else(|| doc.get("error"))
            .and_then(Value::as_str)
            .map(|s| format!(": {}", s.chars().take(300).collect::<String>()))
            .unwrap_or_default();
        return Err(fail(
            endpoint,
            format!("refused the registration (HTTP {}){said}", res.status),
        ));
    }
    let client_id = doc
        .get("client_id")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty() && s.len() <= 2048)
        .ok_or_else(|| fail(endpoint, "the registration answer has no client_id"))?
        .to_owned();
    Ok(DynamicClient {
        client_id,
        client_secret: doc
            .get("client_secret")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(|s| Zeroizing::new(s.to_owned())),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bearer_challenge_yields_its_parameters_quoted_or_not() {
        let p = bearer_challenge(
            r#"Bearer error="invalid_token", resource_metadata="https://mcp.example/.well-known/oauth-protected-resource/mcp", scope="files:read files:write",realm=x"#,
        )
        .unwrap();
        assert_eq!(
            p,
            vec![
                ("error".to_owned(), "invalid_token".to_owned()),
                (
                    "resource_metadata".to_owned(),
                    "https://mcp.example/.well-known/oauth-protected-resource/mcp".to_owned()
                ),
                ("scope".to_owned(), "files:read files:write".to_owned()),
                ("realm".to_owned(), "x".to_owned()),
            ]
        );
        assert_eq!(
            bearer_challenge(r#"bearer realm="a \"b\", c""#).unwrap(),
            vec![("realm".to_owned(), r#"a "b", c"#.to_owned())]
        );
        assert!(bearer_challenge(r#"Basic realm="x""#).is_none());
        assert_eq!(bearer_challenge("Bearer").unwrap(), vec![]);
    }

    #[test]
    fn well_known_urls_follow_rfc_9728_and_the_mcp_discovery_order() {
        let u = url::Url::parse("https://api.example/v1/mcp/").unwrap();
        assert_eq!(
            resource_metadata_urls(&u),
            vec![
                "https://api.example/.well-known/oauth-protected-resource/v1/mcp",
                "https://api.example/.well-known/oauth-protected-resource",
            ]
        );
        let root = url::Url::parse("https://auth.example").unwrap();
        assert_eq!(
            authorization_server_metadata_urls(&root),
            vec![
                "https://auth.example/.well-known/oauth-authorization-server",
                "https://auth.example/.well-known/openid-configuration",
            ]
        );
        let tenant = url::Url::parse("https://auth.example/tenant1").unwrap();
        assert_eq!(
            authorization_server_metadata_urls(&tenant),
            vec![
                "https://auth.example/.well-known/oauth-authorization-server/tenant1",
                "https://auth.example/.well-known/openid-configuration/tenant1",
                "https://auth.example/tenant1/.well-known/openid-configuration",
            ]
        );
    }

    #[test]
    fn endpoints_must_be_https_unless_on_loopback() {
        assert!(secure_url("https://auth.example/token", "token_endpoint", "m").is_ok());
        assert!(secure_url("http://127.0.0.1:9/token", "token_endpoint", "m").is_ok());
        assert!(secure_url("http://localhost:9/token", "token_endpoint", "m").is_ok());
        let e = secure_url("http://auth.example/token", "token_endpoint", "https://m").unwrap_err();
        assert_eq!(e.url, "https://m");
        assert!(e.why.contains("must be an https URL"), "{e}");
    }
}
