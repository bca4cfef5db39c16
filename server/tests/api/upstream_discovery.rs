//! Issue 31, part 1: workbench as an MCP OAuth client discovers how to sign a user in to a
//! remote MCP server: against a second workbench (a real MCP authorization server: RFC 9728
//! metadata named by its 401, RFC 8414 metadata, dynamic registration, client ID metadata
//! documents), and against loopback servers that get it wrong, whose errors must name the URL
//! that failed.

use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{json, Value};
use workbench_core::egress::{GuardedClient, PrivateAllowance};
use workbench_core::upstream::discovery::{self, OurClient};

use crate::helpers::{spawn_app_with, Backend, Options};

fn loopback_client() -> GuardedClient {
    GuardedClient::new(PrivateAllowance(vec!["127.0.0.1".parse().unwrap()]))
}

fn ours() -> OurClient {
    OurClient {
        metadata_url: "http://127.0.0.1:9/oauth/client-metadata".into(),
        redirect_uri: "http://127.0.0.1:9/oauth/callback".into(),
    }
}

/// A loopback server with the given routes; its base URL.
async fn serve(app: Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    format!("http://{addr}")
}

/// An MCP endpoint that answers 401 with `challenge`, PRM at the root well-known place and AS
/// metadata built by `asm(base)`.
async fn protected(
    challenge: Option<&'static str>,
    prm: fn(&str) -> Value,
    asm: fn(&str) -> Value,
) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let (b1, b2) = (base.clone(), base.clone());
    let app = Router::new()
        .route(
            "/mcp",
            post(move || async move {
                let mut res = StatusCode::UNAUTHORIZED.into_response();
                if let Some(c) = challenge {
                    res.headers_mut()
                        .insert(header::WWW_AUTHENTICATE, c.parse().unwrap());
                }
                res
            }),
        )
        .route(
            "/.well-known/oauth-protected-resource",
            get(move || async move { Json(prm(&b1)) }),
        )
        .route(
            "/.well-known/oauth-authorization-server",
            get(move || async move { Json(asm(&b2)) }),
        );
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    base
}

fn good_prm(base: &str) -> Value {
    json!({ "resource": format!("{base}/mcp"), "authorization_servers": [base], "scopes_supported": ["files"] })
}

fn good_asm(base: &str) -> Value {
    json!({
        "issuer": base,
        "authorization_endpoint": format!("{base}/authorize"),
        "token_endpoint": format!("{base}/token"),
        "code_challenge_methods_supported": ["S256"],
    })
}

#[tokio::test]
async fn a_workbench_upstream_is_discovered_from_its_401_and_registers_workbench_dynamically() {
    let Some(up) = spawn_app_with(Backend::Sqlite, Options::default()).await else {
        return;
    };
    let http = loopback_client();
    let server = url::Url::parse(&up.url("/mcp")).unwrap();
    let d = discovery::discover(&http, &server, "http").await.unwrap();
    assert_eq!(
        (
            d.resource_metadata.as_str(),
            d.resource.as_str(),
            d.issuer.as_str()
        ),
        (
            up.url("/.well-known/oauth-protected-resource/mcp").as_str(),
            up.url("/mcp").as_str(),
            up.base.as_str()
        ),
        "the metadata the 401 names, for this server"
    );
    assert_eq!(d.authorization_endpoint, up.url("/oauth/authorize"));
    assert_eq!(d.token_endpoint, up.url("/oauth/token"));
    assert_eq!(
        d.revocation_endpoint.as_deref(),
        Some(up.url("/oauth/revoke").as_str())
    );
    assert_eq!(
        d.registration_endpoint.as_deref(),
        Some(up.url("/oauth/register").as_str())
    );
    assert!(d.client_id_metadata_document_supported);
    assert_eq!(d.scopes, vec!["mcp".to_owned()]);

    let client = discovery::register_dynamically(
        &http,
        d.registration_endpoint.as_deref().unwrap(),
        &ours(),
        &d.scopes,
    )
    .await
    .unwrap();
    assert!(
        client.client_secret.is_none(),
        "a public client using PKCE gets no secret"
    );
    // The upstream knows the client now: its token endpoint judges the (bogus) code instead
    // of refusing the client, as it does for one never registered.
    let token = |client_id: String| {
        let up = &up;
        async move {
            let res = up
                .http()
                .post(up.url("/oauth/token"))
                .form(&[
                    ("grant_type", "authorization_code"),
                    ("code", "not-a-code"),
                    ("client_id", client_id.as_str()),
                    ("redirect_uri", ours().redirect_uri.as_str()),
                    (
                        "code_verifier",
                        "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk",
                    ),
                ])
                .send()
                .await
                .unwrap();
            res.json::<Value>().await.unwrap()["error"].clone()
        }
    };
    assert_eq!(token(client.client_id.clone()).await, "invalid_grant");
    assert_eq!(token("never-registered".into()).await, "invalid_client");
}

#[tokio::test]
async fn without_a_challenge_the_well_known_places_are_tried_and_the_401_scope_wins() {
    let base = protected(None, good_prm, good_asm).await;
    let server = url::Url::parse(&format!("{base}/mcp")).unwrap();
    let d = discovery::discover(&loopback_client(), &server, "http")
        .await
        .unwrap();
    assert_eq!(
        d.resource_metadata,
        format!("{base}/.well-known/oauth-protected-resource"),
        "the path-specific place answered 404, the root one was used"
    );
    assert_eq!(d.scopes, vec!["files".to_owned()], "the metadata's scopes");
    assert!(!d.client_id_metadata_document_supported);
    assert_eq!(d.registration_endpoint, None);

    let base = protected(
        Some(r#"Bearer scope="files:read offline_access""#),
        good_prm,
        good_asm,
    )
    .await;
    let server = url::Url::parse(&format!("{base}/mcp")).unwrap();
    let d = discovery::discover(&loopback_client(), &server, "http")
        .await
        .unwrap();
    assert_eq!(d.scopes, vec!["files:read", "offline_access"]);
}

#[tokio::test]
async fn discovery_errors_name_the_url_that_failed_and_why() {
    let http = loopback_client();
    let at = |base: &str| url::Url::parse(&format!("{base}/mcp")).unwrap();

    // No PKCE S256: refused.
    let base = protected(None, good_prm, |b| {
        json!({ "issuer": b, "authorization_endpoint": format!("{b}/authorize"),
                "token_endpoint": format!("{b}/token"), "code_challenge_methods_supported": ["plain"] })
    })
    .await;
    let e = discovery::discover(&http, &at(&base), "http")
        .await
        .unwrap_err();
    assert_eq!(
        e.url,
        format!("{base}/.well-known/oauth-authorization-server")
    );
    assert!(e.why.contains("PKCE S256"), "{e}");

    // Metadata of another resource: refused.
    let base = protected(
        None,
        |b| json!({ "resource": format!("{b}/other"), "authorization_servers": [b] }),
        good_asm,
    )
    .await;
    let e = discovery::discover(&http, &at(&base), "http")
        .await
        .unwrap_err();
    assert!(e.why.contains("not for"), "{e}");

    // An issuer that does not match the authorization server's own metadata: refused.
    let base = protected(None, good_prm, |b| {
        json!({ "issuer": "https://evil.example", "authorization_endpoint": format!("{b}/authorize"),
                "token_endpoint": format!("{b}/token"), "code_challenge_methods_supported": ["S256"] })
    })
    .await;
    let e = discovery::discover(&http, &at(&base), "http")
        .await
        .unwrap_err();
    assert!(e.why.contains("issuer"), "{e}");

    // A token endpoint over plain http off loopback: refused.
    let base = protected(None, good_prm, |b| {
        json!({ "issuer": b, "authorization_endpoint": format!("{b}/authorize"),
                "token_endpoint": "http://auth.example/token", "code_challenge_methods_supported": ["S256"] })
    })
    .await;
    let e = discovery::discover(&http, &at(&base), "http")
        .await
        .unwrap_err();
    assert!(e.why.contains("https"), "{e}");

    // A server that does not ask for a credential at all.
    let open = serve(Router::new().route("/mcp", post(|| async { Json(json!({})) }))).await;
    let e = discovery::discover(&http, &at(&open), "http")
        .await
        .unwrap_err();
    assert_eq!(e.url, format!("{open}/mcp"));
    assert!(e.why.contains("HTTP 200"), "{e}");

    // No metadata anywhere.
    let bare =
        serve(Router::new().route("/mcp", post(|| async { StatusCode::UNAUTHORIZED }))).await;
    let e = discovery::discover(&http, &at(&bare), "http")
        .await
        .unwrap_err();
    assert!(
        e.url.contains("/.well-known/oauth-protected-resource/mcp"),
        "{e}"
    );
    assert!(e.why.contains("no protected resource metadata"), "{e}");

    // A private address the operator did not allow is never contacted.
    let guarded = GuardedClient::new(PrivateAllowance(Vec::new()));
    let e = discovery::discover(&guarded, &at(&bare), "http")
        .await
        .unwrap_err();
    assert!(e.why.contains("refusing to connect"), "{e}");
}
