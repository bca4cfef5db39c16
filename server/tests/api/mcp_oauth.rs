//! MCP authorization (issue 16): workbench as OAuth 2.1 protected resource and authorization
//! server for /mcp: metadata, dynamic registration with its limits, client ID metadata
//! documents, consent in the portal, PKCE S256, audience-bound access tokens, rotating refresh
//! tokens with reuse detection, revocation, and the negative cases.

use base64::Engine as _;
use serde_json::{json, Value};
use sha2::Digest;
use workbench_core::auth::Role;

use crate::connections::location;
use crate::helpers::{admin_with_key, mcp_request, Browser, Options, TestApp, PASSWORD};
use crate::{app, db_test};

const VERIFIER: &str = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
const REDIRECT: &str = "http://127.0.0.1:53682/callback";

fn challenge(verifier: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .encode(sha2::Sha256::digest(verifier.as_bytes()))
}

async fn register(app: &TestApp, body: Value) -> (u16, Value) {
    let res = app
        .http()
        .post(app.url("/oauth/register"))
        .json(&body)
        .send()
        .await
        .unwrap();
    (
        res.status().as_u16(),
        res.json().await.unwrap_or(Value::Null),
    )
}

pub(crate) async fn client(app: &TestApp) -> String {
    let (status, c) = register(
        app,
        json!({ "client_name": "Desk Assistant", "redirect_uris": [REDIRECT] }),
    )
    .await;
    assert_eq!(status, 201, "{c}");
    c["client_id"].as_str().unwrap().to_owned()
}

fn authorize_query(
    app: &TestApp,
    client_id: &str,
    extra: &[(&str, &str)],
) -> Vec<(String, String)> {
    let mut q: Vec<(String, String)> = vec![
        ("response_type".into(), "code".into()),
        ("client_id".into(), client_id.into()),
        ("redirect_uri".into(), REDIRECT.into()),
        ("code_challenge".into(), challenge(VERIFIER)),
        ("code_challenge_method".into(), "S256".into()),
        ("state".into(), "st-123".into()),
        ("resource".into(), app.url("/mcp")),
        ("scope".into(), "mcp".into()),
    ];
    for (k, v) in extra {
        q.retain(|(n, _)| n != k);
        if !v.is_empty() {
            q.push(((*k).into(), (*v).into()));
        }
    }
    q
}

fn path_with(q: &[(String, String)]) -> String {
    let query: String = url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(q)
        .finish();
    format!("/oauth/authorize?{query}")
}

/// The person's decision posted as the consent form does without JavaScript; the redirect.
async fn decide(b: &Browser, q: &[(String, String)], decision: &str, policy: &str) -> String {
    decide_with(b, q, decision, &[("policy_id", policy)]).await
}

/// `decide` with the admin's choices (`policy_id`, `rate_limit_per_minute`).
pub(crate) async fn decide_with(
    b: &Browser,
    q: &[(String, String)],
    decision: &str,
    choices: &[(&str, &str)],
) -> String {
    let mut form: Vec<(&str, &str)> = q.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    form.push(("decision", decision));
    form.extend_from_slice(choices);
    let res = b
        .client
        .post(format!("{}/api/oauth_decide", b.base))
        .header("accept", "text/html")
        .form(&form)
        .send()
        .await
        .unwrap();
    assert!(
        res.status().is_redirection(),
        "{} {}",
        res.status(),
        res.text().await.unwrap()
    );
    location(&res)
}

fn query_of(url: &str) -> std::collections::HashMap<String, String> {
    url::Url::parse(url)
        .unwrap()
        .query_pairs()
        .into_owned()
        .collect()
}

async fn token(app: &TestApp, form: &[(&str, &str)]) -> (u16, Value) {
    let res = app
        .http()
        .post(app.url("/oauth/token"))
        .form(form)
        .send()
        .await
        .unwrap();
    assert_eq!(
        res.headers()
            .get("cache-control")
            .map(|v| v.to_str().unwrap()),
        Some("no-store")
    );
    (res.status().as_u16(), res.json().await.unwrap())
}

pub(crate) async fn signed_in(app: &TestApp, email: &str) -> Browser {
    let b = app.browser();
    assert!(b.sign_in(email, PASSWORD).await.status().is_success());
    b
}

/// Registration, consent and code exchange: the token response.
pub(crate) async fn authorized(app: &TestApp, b: &Browser, client_id: &str) -> Value {
    authorized_with_policy(app, b, client_id, "").await
}

/// `authorized`, the admin choosing the policy the client acts under (empty: none).
pub(crate) async fn authorized_with_policy(
    app: &TestApp,
    b: &Browser,
    client_id: &str,
    policy_id: &str,
) -> Value {
    authorized_with(app, b, client_id, &[("policy_id", policy_id)]).await
}

/// `authorized`, the admin making the given choices on the consent form.
pub(crate) async fn authorized_with(
    app: &TestApp,
    b: &Browser,
    client_id: &str,
    choices: &[(&str, &str)],
) -> Value {
    let q = authorize_query(app, client_id, &[]);
    let back = decide_with(b, &q, "approve", choices).await;
    let got = query_of(&back);
    assert_eq!(
        (got["state"].as_str(), got["iss"].as_str()),
        ("st-123", app.url("").as_str()),
        "{back}"
    );
    let (status, t) = token(
        app,
        &[
            ("grant_type", "authorization_code"),
            ("code", &got["code"]),
            ("redirect_uri", REDIRECT),
            ("client_id", client_id),
            ("code_verifier", VERIFIER),
            ("resource", &app.url("/mcp")),
        ],
    )
    .await;
    assert_eq!(status, 200, "{t}");
    t
}

pub(crate) async fn mcp_status(app: &TestApp, bearer: &str) -> u16 {
    mcp_request(app, bearer, "tools/list", json!({}))
        .await
        .status()
        .as_u16()
}

db_test!(
    an_mcp_client_discovers_registers_is_approved_and_calls_mcp_with_its_token,
    |backend| {
        let app = app!(backend);
        admin_with_key(&app).await;

        // Discovery: the 401 names the resource metadata, which names this server as issuer.
        let res = app
            .http()
            .post(app.url("/mcp"))
            .header("accept", "application/json, text/event-stream")
            .json(&json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/list" }))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 401);
        let challenge_header = res
            .headers()
            .get("www-authenticate")
            .unwrap()
            .to_str()
            .unwrap()
            .to_owned();
        assert_eq!(
            challenge_header,
            format!(
                "Bearer resource_metadata=\"{}\"",
                app.url("/.well-known/oauth-protected-resource/mcp")
            )
        );
        for path in [
            "/.well-known/oauth-protected-resource/mcp",
            "/.well-known/oauth-protected-resource",
        ] {
            let prm: Value = app
                .http()
                .get(app.url(path))
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            assert_eq!(
                (
                    prm["resource"].as_str(),
                    prm["authorization_servers"][0].as_str()
                ),
                (Some(app.url("/mcp").as_str()), Some(app.url("").as_str())),
                "{prm}"
            );
        }
        let meta: Value = app
            .http()
            .get(app.url("/.well-known/oauth-authorization-server"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(meta["issuer"], app.url(""));
        assert_eq!(meta["code_challenge_methods_supported"], json!(["S256"]));
        assert_eq!(meta["token_endpoint"], app.url("/oauth/token"));
        assert_eq!(meta["registration_endpoint"], app.url("/oauth/register"));
        assert_eq!(meta["client_id_metadata_document_supported"], true);

        let client_id = client(&app).await;
        // The consent page: sign-in first, then who asks, where the person goes back, what it gets.
        let q = authorize_query(&app, &client_id, &[]);
        let anonymous = app.browser().get(&path_with(&q)).await;
        assert!(
            location(&anonymous).starts_with("/login?next=%2Foauth%2Fauthorize%3F"),
            "{}",
            location(&anonymous)
        );
        let b = signed_in(&app, "ada@example.com").await;
        let page = b.get(&path_with(&q)).await;
        assert_eq!(page.status(), 200);
        assert_eq!(
            page.headers().get("content-security-policy").unwrap(),
            "frame-ancestors 'none'"
        );
        let html = page.text().await.unwrap();
        for text in [
            "Desk Assistant wants to use workbench",
            "act as you on /mcp with your project",
            "127.0.0.1:53682",
            "oauth-approve",
            "oauth-deny",
        ] {
            assert!(html.contains(text), "{text} missing from the consent page");
        }

        let t = authorized(&app, &b, &client_id).await;
        let access = t["access_token"].as_str().unwrap().to_owned();
        assert!(
            access.starts_with("wbat_")
                && t["refresh_token"].as_str().unwrap().starts_with("wbrt_"),
            "{t}"
        );
        assert_eq!(
            (
                t["token_type"].as_str(),
                t["expires_in"].as_i64(),
                t["scope"].as_str()
            ),
            (Some("Bearer"), Some(3600), Some("mcp"))
        );
        let res = mcp_request(
            &app,
            &access,
            "tools/call",
            json!({ "name": "whoami", "arguments": {} }),
        )
        .await;
        let body: Value = res.json().await.unwrap();
        assert_eq!(
            body["result"]["structuredContent"]["email"], "ada@example.com",
            "{body}"
        );
        let listed: Value = mcp_request(&app, &access, "tools/list", json!({}))
            .await
            .json()
            .await
            .unwrap();
        assert_eq!(listed["result"]["tools"].as_array().unwrap().len(), 9);

        // The token is for /mcp only: /v1 refuses it, as it refuses any other token kind.
        let v1 = app
            .http()
            .get(app.url("/v1/me"))
            .bearer_auth(&access)
            .send()
            .await
            .unwrap();
        assert_eq!(v1.status(), 401);
        // A second client's token is not this one's: each grant is separate.
        let other = client(&app).await;
        let t2 = authorized(&app, &b, &other).await;
        assert_ne!(t2["access_token"], t["access_token"]);
        assert_eq!(
            mcp_status(&app, t2["access_token"].as_str().unwrap()).await,
            200
        );
    }
);

db_test!(
    refresh_tokens_rotate_and_a_reused_one_revokes_the_whole_family,
    |backend| {
        let app = app!(backend);
        admin_with_key(&app).await;
        let client_id = client(&app).await;
        let b = signed_in(&app, "ada@example.com").await;
        let first = authorized(&app, &b, &client_id).await;
        let refresh = first["refresh_token"].as_str().unwrap().to_owned();
        let (status, second) = token(
            &app,
            &[
                ("grant_type", "refresh_token"),
                ("refresh_token", &refresh),
                ("client_id", &client_id),
            ],
        )
        .await;
        assert_eq!(status, 200, "{second}");
        assert_ne!(second["refresh_token"], first["refresh_token"], "rotated");
        let newest = second["access_token"].as_str().unwrap().to_owned();
        assert_eq!(mcp_status(&app, &newest).await, 200);

        // The old refresh token again: refused, and every token of the sign-in is revoked.
        let (status, reuse) = token(
            &app,
            &[
                ("grant_type", "refresh_token"),
                ("refresh_token", &refresh),
                ("client_id", &client_id),
            ],
        )
        .await;
        assert_eq!(
            (status, reuse["error"].as_str()),
            (400, Some("invalid_grant")),
            "{reuse}"
        );
        assert_eq!(
            mcp_status(&app, &newest).await,
            401,
            "the newest access token is revoked too"
        );
        let (status, _) = token(
            &app,
            &[
                ("grant_type", "refresh_token"),
                ("refresh_token", second["refresh_token"].as_str().unwrap()),
                ("client_id", &client_id),
            ],
        )
        .await;
        assert_eq!(status, 400, "and the newest refresh token");

        // Revocation (RFC 7009) of a fresh sign-in's refresh token ends its access token as well.
        let third = authorized(&app, &b, &client_id).await;
        let res = app
            .http()
            .post(app.url("/oauth/revoke"))
            .form(&[
                ("token", third["refresh_token"].as_str().unwrap()),
                ("client_id", client_id.as_str()),
            ])
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200);
        assert_eq!(
            mcp_status(&app, third["access_token"].as_str().unwrap()).await,
            401
        );
        let res = app
            .http()
            .post(app.url("/oauth/revoke"))
            .form(&[("token", "wbat_unknown"), ("client_id", client_id.as_str())])
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200, "an unknown token is not an error");
    }
);

db_test!(
    codes_are_single_use_pkce_bound_and_tokens_expire_and_are_bound_to_mcp,
    |backend| {
        let app = app!(backend);
        admin_with_key(&app).await;
        let client_id = client(&app).await;
        let b = signed_in(&app, "ada@example.com").await;
        let q = authorize_query(&app, &client_id, &[]);
        let code = query_of(&decide(&b, &q, "approve", "").await)["code"].clone();
        let exchange = |verifier: &'static str, redirect: &'static str, resource: String| {
            let (code, client_id) = (code.clone(), client_id.clone());
            let app = &app;
            async move {
                token(
                    app,
                    &[
                        ("grant_type", "authorization_code"),
                        ("code", &code),
                        ("redirect_uri", redirect),
                        ("client_id", &client_id),
                        ("code_verifier", verifier),
                        ("resource", &resource),
                    ],
                )
                .await
            }
        };
        let other_verifier = "x".repeat(43);
        let (status, bad) = token(
            &app,
            &[
                ("grant_type", "authorization_code"),
                ("code", &code),
                ("redirect_uri", REDIRECT),
                ("client_id", &client_id),
                ("code_verifier", &other_verifier),
            ],
        )
        .await;
        assert_eq!(
            (status, bad["error"].as_str()),
            (400, Some("invalid_grant")),
            "wrong verifier: {bad}"
        );
        // The failed attempt used the code up: a code is redeemed at most once.
        let (status, again) = exchange(VERIFIER, REDIRECT, app.url("/mcp")).await;
        assert_eq!(
            (status, again["error"].as_str()),
            (400, Some("invalid_grant")),
            "{again}"
        );

        // A fresh code: a redirect URI mismatch, a foreign resource, a missing verifier are refused.
        let code2 = query_of(&decide(&b, &q, "approve", "").await)["code"].clone();
        let (status, e) = token(
            &app,
            &[
                ("grant_type", "authorization_code"),
                ("code", &code2),
                ("redirect_uri", "http://127.0.0.1:1/other"),
                ("client_id", &client_id),
                ("code_verifier", VERIFIER),
            ],
        )
        .await;
        assert_eq!(
            (status, e["error"].as_str()),
            (400, Some("invalid_grant")),
            "{e}"
        );
        let code3 = query_of(&decide(&b, &q, "approve", "").await)["code"].clone();
        let (status, e) = token(
            &app,
            &[
                ("grant_type", "authorization_code"),
                ("code", &code3),
                ("redirect_uri", REDIRECT),
                ("client_id", &client_id),
                ("code_verifier", VERIFIER),
                ("resource", "https://other.example/mcp"),
            ],
        )
        .await;
        assert_eq!(
            (status, e["error"].as_str()),
            (400, Some("invalid_target")),
            "{e}"
        );
        let code4 = query_of(&decide(&b, &q, "approve", "").await)["code"].clone();
        let (status, e) = token(
            &app,
            &[
                ("grant_type", "authorization_code"),
                ("code", &code4),
                ("redirect_uri", REDIRECT),
                ("client_id", &client_id),
            ],
        )
        .await;
        assert_eq!(
            (status, e["error"].as_str()),
            (400, Some("invalid_request")),
            "{e}"
        );

        // A good exchange; the access token expires after an hour.
        let t = authorized(&app, &b, &client_id).await;
        let access = t["access_token"].as_str().unwrap().to_owned();
        assert_eq!(mcp_status(&app, &access).await, 200);
        app.clock.advance_ms(3601 * 1000);
        let res = mcp_request(&app, &access, "tools/list", json!({})).await;
        assert_eq!(res.status(), 401);
        assert!(res
            .headers()
            .get("www-authenticate")
            .unwrap()
            .to_str()
            .unwrap()
            .starts_with("Bearer error=\"invalid_token\", resource_metadata="));
        // Another client cannot redeem this client's refresh token.
        let other = client(&app).await;
        let (status, e) = token(
            &app,
            &[
                ("grant_type", "refresh_token"),
                ("refresh_token", t["refresh_token"].as_str().unwrap()),
                ("client_id", &other),
            ],
        )
        .await;
        assert_eq!(
            (status, e["error"].as_str()),
            (400, Some("invalid_grant")),
            "{e}"
        );
    }
);

db_test!(
    authorization_requests_are_checked_before_anyone_is_asked,
    |backend| {
        let app = app!(backend);
        admin_with_key(&app).await;
        let client_id = client(&app).await;
        let b = signed_in(&app, "ada@example.com").await;
        // Not the client's redirect URI, or an unknown client: shown, never redirected.
        for q in [
            authorize_query(
                &app,
                &client_id,
                &[("redirect_uri", "https://evil.example/cb")],
            ),
            authorize_query(&app, "mcpc_unknown", &[]),
        ] {
            let res = b.get(&path_with(&q)).await;
            assert_eq!(res.status(), 200);
            let html = res.text().await.unwrap();
            assert!(
                html.contains("oauth-refused") && !html.contains("oauth-approve"),
                "refused in place"
            );
        }
        // No PKCE, plain PKCE, a foreign resource, another scope: back to the client with an error.
        for (extra, error) in [
            (vec![("code_challenge", "")], "invalid_request"),
            (vec![("code_challenge_method", "plain")], "invalid_request"),
            (
                vec![("resource", "https://other.example/mcp")],
                "invalid_target",
            ),
            (vec![("scope", "admin")], "invalid_scope"),
            (
                vec![("response_type", "token")],
                "unsupported_response_type",
            ),
        ] {
            let res = b
                .get(&path_with(&authorize_query(&app, &client_id, &extra)))
                .await;
            assert!(res.status().is_redirection(), "{extra:?}: {}", res.status());
            let got = query_of(&location(&res));
            assert!(location(&res).starts_with(REDIRECT), "{}", location(&res));
            assert_eq!(
                (got["error"].as_str(), got["state"].as_str()),
                (error, "st-123"),
                "{extra:?}"
            );
        }
        // Denying sends the person back with access_denied; approving then is a separate decision.
        let back = decide(&b, &authorize_query(&app, &client_id, &[]), "deny", "").await;
        assert_eq!(query_of(&back)["error"], "access_denied");
        assert!(!query_of(&back).contains_key("code"));
    }
);

db_test!(
    registration_is_validated_completely_and_rate_limited,
    |backend| {
        let app = app!(backend);
        for (body, error) in [
            (
                json!({ "redirect_uris": ["http://app.example/cb"] }),
                "invalid_redirect_uri",
            ),
            (
                json!({ "redirect_uris": ["https://*.example/cb"] }),
                "invalid_redirect_uri",
            ),
            (
                json!({ "redirect_uris": ["https://app.example/cb#frag"] }),
                "invalid_redirect_uri",
            ),
            (json!({ "redirect_uris": [] }), "invalid_redirect_uri"),
            (
                json!({ "redirect_uris": ["https://app.example/cb"], "grant_types": ["client_credentials"] }),
                "invalid_client_metadata",
            ),
            (
                json!({ "redirect_uris": ["https://app.example/cb"], "token_endpoint_auth_method": "private_key_jwt" }),
                "invalid_client_metadata",
            ),
            (
                json!({ "redirect_uris": ["https://app.example/cb"], "client_name": "x".repeat(101) }),
                "invalid_client_metadata",
            ),
            (json!(["not", "an", "object"]), "invalid_client_metadata"),
        ] {
            let (status, out) = register(&app, body.clone()).await;
            assert_eq!(
                (status, out["error"].as_str()),
                (400, Some(error)),
                "{body}: {out}"
            );
        }
        // A confidential client gets a secret once and must present it.
        let (status, c) = register(&app, json!({ "redirect_uris": ["https://app.example/cb"], "token_endpoint_auth_method": "client_secret_post", "client_name": "Server Agent" })).await;
        assert_eq!(status, 201, "{c}");
        let secret = c["client_secret"].as_str().unwrap().to_owned();
        let (status, e) = token(
            &app,
            &[
                ("grant_type", "refresh_token"),
                ("refresh_token", "wbrt_x"),
                ("client_id", c["client_id"].as_str().unwrap()),
                ("client_secret", "wrong"),
            ],
        )
        .await;
        assert_eq!((status, e["error"].as_str()), (401, Some("invalid_client")));
        let (status, e) = token(
            &app,
            &[
                ("grant_type", "refresh_token"),
                ("refresh_token", "wbrt_x"),
                ("client_id", c["client_id"].as_str().unwrap()),
                ("client_secret", &secret),
            ],
        )
        .await;
        assert_eq!(
            (status, e["error"].as_str()),
            (400, Some("invalid_grant")),
            "authenticated, then the token is checked"
        );
        // Twenty registrations an hour from one address.
        let mut last = 0;
        for _ in 0..20 {
            last = register(&app, json!({ "redirect_uris": [REDIRECT] }))
                .await
                .0;
        }
        assert_eq!(
            last, 429,
            "the 21st registration from this address within the hour is refused"
        );
    }
);

db_test!(
    an_admin_can_choose_the_policy_a_client_acts_under_and_revoking_it_ends_access,
    |backend| {
        let app = app!(backend);
        let (_, admin_key) = admin_with_key(&app).await;
        let res = app.http().post(app.url("/v1/policies")).bearer_auth(&admin_key).json(&json!({ "name": "read only", "tool_allowlist": { "mode": "allowlist", "allow": ["search_*"] } })).send().await.unwrap();
        let pol: Value = res.json().await.unwrap();
        let client_id = client(&app).await;
        let b = signed_in(&app, "ada@example.com").await;
        let q = authorize_query(&app, &client_id, &[]);
        let code =
            query_of(&decide(&b, &q, "approve", pol["id"].as_str().unwrap()).await)["code"].clone();
        let (_, t) = token(
            &app,
            &[
                ("grant_type", "authorization_code"),
                ("code", &code),
                ("redirect_uri", REDIRECT),
                ("client_id", &client_id),
                ("code_verifier", VERIFIER),
            ],
        )
        .await;
        let access = t["access_token"].as_str().unwrap().to_owned();
        let res = mcp_request(&app, &access, "tools/call", json!({ "name": "execute_tools", "arguments": { "executions": [{ "tool": "storage.put", "args": { "key": "k", "content": "x" } }] } })).await;
        let out: Value = res.json().await.unwrap();
        assert_eq!(
            out["result"]["structuredContent"]["results"][0]["code"], "NOT_ALLOWED",
            "the chosen policy applies: {out}"
        );

        // A member may approve for themselves, never choose a policy.
        app.user("mel@example.com", Role::Member).await;
        let mel = signed_in(&app, "mel@example.com").await;
        let mut form: Vec<(&str, &str)> = q.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        form.extend([
            ("decision", "approve"),
            ("policy_id", pol["id"].as_str().unwrap()),
        ]);
        let res = mel
            .client
            .post(format!("{}/api/oauth_decide", mel.base))
            .form(&form)
            .send()
            .await
            .unwrap();
        assert!(
            !res.status().is_redirection() && res.text().await.unwrap().contains("only an admin"),
            "a member cannot pick a policy"
        );

        // Approving the same client again keeps one approval; the page lists it once, with its
        // policy; revoking it ends the token at once.
        decide(&b, &q, "approve", pol["id"].as_str().unwrap()).await;
        let html = b.get("/mcp-clients").await.text().await.unwrap();
        assert_eq!(
            html.matches("data-testid=\"authorized-client-row\"")
                .count(),
            1,
            "one row per client"
        );
        assert!(
            html.contains("Desk Assistant") && html.contains("read only"),
            "listed with its policy"
        );
        let who = app
            .wb
            .accounts()
            .authenticate_api_key(&admin_key)
            .await
            .unwrap();
        let grants = app.wb.oauth().grants(&who).await.unwrap();
        assert_eq!(grants.len(), 1);
        assert_eq!(
            mcp_status(&app, &access).await,
            200,
            "the token works (and is now answered from memory)"
        );
        let res = b
            .call("revoke_authorized_client", &[("id", &grants[0].id)])
            .await;
        assert!(
            res.status().is_success() || res.status().is_redirection(),
            "{}",
            res.status()
        );
        assert_eq!(mcp_status(&app, &access).await, 401);
        assert!(app.wb.oauth().grants(&who).await.unwrap().is_empty());
        // Another user cannot revoke it (not found, not a leak).
        assert!(mel
            .call("revoke_authorized_client", &[("id", &grants[0].id)])
            .await
            .status()
            .is_client_error());
    }
);

db_test!(
    a_client_id_metadata_document_is_fetched_checked_and_used,
    |backend| {
        use axum::routing::get;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let doc_url = format!("http://{addr}/client.json");
        let doc = json!({ "client_id": doc_url, "client_name": "Hosted Connector", "redirect_uris": [REDIRECT], "token_endpoint_auth_method": "none" });
        let wrong = json!({ "client_id": "http://elsewhere.example/client.json", "client_name": "Impostor", "redirect_uris": [REDIRECT] });
        let router = axum::Router::new()
            .route("/client.json", get(move || async move { axum::Json(doc) }))
            .route("/wrong.json", get(move || async move { axum::Json(wrong) }));
        tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });

        let app = app!(
            backend,
            Options {
                egress_allow_private: vec!["127.0.0.1"],
                ..Default::default()
            }
        );
        admin_with_key(&app).await;
        let b = signed_in(&app, "ada@example.com").await;
        let q = authorize_query(&app, &doc_url, &[]);
        let html = b.get(&path_with(&q)).await.text().await.unwrap();
        assert!(
            html.contains("Hosted Connector wants to use workbench") && html.contains(&doc_url),
            "the document names the client"
        );
        let t = authorized(&app, &b, &doc_url).await;
        assert_eq!(
            mcp_status(&app, t["access_token"].as_str().unwrap()).await,
            200
        );
        // A document that names another client id is refused, shown in place.
        let html = b
            .get(&path_with(&authorize_query(
                &app,
                &format!("http://{addr}/wrong.json"),
                &[],
            )))
            .await
            .text()
            .await
            .unwrap();
        assert!(html.contains("must name its own URL") && !html.contains("oauth-approve"));

        // Without the operator allowing loopback, the egress guard refuses to fetch it.
        let guarded = app!(backend);
        admin_with_key(&guarded).await;
        let b = signed_in(&guarded, "ada@example.com").await;
        let html = b
            .get(&path_with(&authorize_query(&guarded, &doc_url, &[])))
            .await
            .text()
            .await
            .unwrap();
        assert!(
            html.contains("cannot be fetched") && !html.contains("oauth-approve"),
            "SSRF guard applies"
        );
    }
);

db_test!(
    an_access_token_is_refused_by_a_deployment_it_was_not_issued_for,
    |backend| {
        // Two deployments on one database (as a misconfigured or hostile second site would be):
        // a token minted for A's /mcp names A's resource, so B refuses it.
        let a = app!(backend);
        admin_with_key(&a).await;
        let b_app = app!(
            backend,
            Options {
                database_url: Some(a.database_url.clone()),
                data_dir: Some(a.data_dir.clone()),
                public_url: Some("https://other.example".into()),
                ..Default::default()
            }
        );
        let client_id = client(&a).await;
        let browser = signed_in(&a, "ada@example.com").await;
        let t = authorized(&a, &browser, &client_id).await;
        let access = t["access_token"].as_str().unwrap().to_owned();
        assert_eq!(mcp_status(&a, &access).await, 200);
        let res = b_app
            .http()
            .post(b_app.url("/mcp"))
            .bearer_auth(&access)
            .header("accept", "application/json, text/event-stream")
            .json(&json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/list" }))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 401, "wrong audience");
        let body: Value = res.json().await.unwrap();
        assert!(body.to_string().contains("another resource"), "{body}");
    }
);

db_test!(
    a_registration_nobody_approves_within_a_day_is_purged_and_an_approved_client_stays,
    |backend| {
        let app = app!(backend);
        admin_with_key(&app).await;
        let approved = client(&app).await;
        let abandoned = client(&app).await;
        let b = signed_in(&app, "ada@example.com").await;
        let t = authorized(&app, &b, &approved).await;
        // The token endpoint tells a known client (a bad code: invalid_grant) from an unknown one
        // (invalid_client); portal sessions expire on the same clock, so it is asked directly.
        let known = |id: String| {
            let app = &app;
            async move {
                let (status, body) = token(
                    app,
                    &[
                        ("grant_type", "authorization_code"),
                        ("code", "wbac_not_a_code"),
                        ("redirect_uri", REDIRECT),
                        ("client_id", &id),
                        ("code_verifier", VERIFIER),
                    ],
                )
                .await;
                match body["error"].as_str() {
                    Some("invalid_grant") => true,
                    Some("invalid_client") => false,
                    _ => panic!("{status} {body}"),
                }
            }
        };

        // Within the day both stay.
        app.clock.advance_ms(23 * 3600 * 1000);
        app.wb.oauth().purge_expired().await.unwrap();
        assert!(
            known(approved.clone()).await && known(abandoned.clone()).await,
            "both known after 23 hours"
        );
        // After it, the registration nobody approved is gone (its client is told it is unknown and
        // registers again); the approved one keeps working, refresh included.
        app.clock.advance_ms(2 * 3600 * 1000);
        assert!(app.wb.oauth().purge_expired().await.unwrap() >= 1);
        assert!(
            !known(abandoned.clone()).await,
            "the abandoned registration is unknown"
        );
        assert!(known(approved.clone()).await, "the approved client is kept");
        let (status, refreshed) = token(
            &app,
            &[
                ("grant_type", "refresh_token"),
                ("refresh_token", t["refresh_token"].as_str().unwrap()),
                ("client_id", &approved),
            ],
        )
        .await;
        assert_eq!(status, 200, "{refreshed}");
    }
);

db_test!(
    a_client_authorized_for_a_tool_set_reaches_that_set_and_nothing_else,
    |backend| {
        let app = app!(backend);
        let (_, key) = admin_with_key(&app).await;
        for (slug, tool) in [("vault", "vault_list"), ("other", "vault_list")] {
            let res = app
                .http()
                .post(app.url("/v1/tool-sets"))
                .bearer_auth(&key)
                .json(&json!({ "slug": slug, "name": slug, "tools": [{ "tool": tool }] }))
                .send()
                .await
                .unwrap();
            assert_eq!(res.status(), 201);
        }
        let set_url = app.url("/mcp/sets/vault");
        let set_call = |bearer: String, url: String| {
            let http = app.http();
            async move {
                http.post(url)
                    .bearer_auth(bearer)
                    .header("accept", "application/json, text/event-stream")
                    .json(
                        &json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {} }),
                    )
                    .send()
                    .await
                    .unwrap()
            }
        };

        // Discovery: the set's own 401 names the set's own resource metadata.
        let res = app
            .http()
            .post(&set_url)
            .header("accept", "application/json, text/event-stream")
            .json(&json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/list" }))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 401);
        let metadata = app.url("/.well-known/oauth-protected-resource/mcp/sets/vault");
        assert_eq!(
            res.headers()["www-authenticate"].to_str().unwrap(),
            format!("Bearer resource_metadata=\"{metadata}\"")
        );
        let meta: Value = app
            .http()
            .get(&metadata)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(meta["resource"], set_url);
        assert_eq!(meta["authorization_servers"], json!([app.url("")]));
        let res = app
            .http()
            .get(app.url("/.well-known/oauth-protected-resource/mcp/sets/Not%20A%20Slug"))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 404);

        // Consent names the set; the code and its tokens are bound to the set's endpoint.
        let client_id = client(&app).await;
        let b = signed_in(&app, "ada@example.com").await;
        let q = authorize_query(&app, &client_id, &[("resource", &set_url)]);
        let page = b.get(&path_with(&q)).await.text().await.unwrap();
        assert!(
            page.contains("act as you on the tool set vault (/mcp/sets/vault)"),
            "the consent page names the set"
        );
        let back = decide(&b, &q, "approve", "").await;
        let code = query_of(&back)["code"].clone();
        // Redeeming it for /mcp is refused; for the set, tokens.
        let mut form = vec![
            ("grant_type", "authorization_code"),
            ("code", code.as_str()),
            ("redirect_uri", REDIRECT),
            ("client_id", client_id.as_str()),
            ("code_verifier", VERIFIER),
        ];
        let mcp_url = app.url("/mcp");
        let mut wrong = form.clone();
        wrong.push(("resource", mcp_url.as_str()));
        let (status, out) = token(&app, &wrong).await;
        assert_eq!(
            (status, out["error"].as_str()),
            (400, Some("invalid_target")),
            "{out}"
        );
        // (A code is spent by its first redemption, right or wrong: approve again.)
        let back = decide(&b, &q, "approve", "").await;
        let code = query_of(&back)["code"].clone();
        form[1] = ("code", code.as_str());
        form.push(("resource", set_url.as_str()));
        let (status, t) = token(&app, &form).await;
        assert_eq!(status, 200, "{t}");
        let access = t["access_token"].as_str().unwrap().to_owned();

        let res = set_call(access.clone(), set_url.clone()).await;
        assert_eq!(res.status(), 200);
        let body: Value = res.json().await.unwrap();
        assert_eq!(body["result"]["tools"][0]["name"], "vault_list");
        assert_eq!(mcp_status(&app, &access).await, 401, "not on /mcp");
        let res = set_call(access.clone(), app.url("/mcp/sets/other")).await;
        assert_eq!(res.status(), 401, "not on another set");
        let res = app
            .http()
            .get(app.url("/v1/me"))
            .bearer_auth(&access)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 401, "not on REST");

        // A refresh keeps the binding; asking it for /mcp is refused.
        let refresh = t["refresh_token"].as_str().unwrap();
        let (status, out) = token(
            &app,
            &[
                ("grant_type", "refresh_token"),
                ("refresh_token", refresh),
                ("client_id", client_id.as_str()),
                ("resource", mcp_url.as_str()),
            ],
        )
        .await;
        assert_eq!(
            (status, out["error"].as_str()),
            (400, Some("invalid_target")),
            "{out}"
        );
        let (status, again) = token(
            &app,
            &[
                ("grant_type", "refresh_token"),
                ("refresh_token", refresh),
                ("client_id", client_id.as_str()),
            ],
        )
        .await;
        assert_eq!(status, 200, "{again}");
        let res = set_call(
            again["access_token"].as_str().unwrap().to_owned(),
            set_url.clone(),
        )
        .await;
        assert_eq!(res.status(), 200);

        // A token for /mcp is refused at the set's endpoint.
        let grant = authorized(&app, &b, &client_id).await;
        let res = set_call(
            grant["access_token"].as_str().unwrap().to_owned(),
            set_url.clone(),
        )
        .await;
        assert_eq!(res.status(), 401);

        // A resource that is no endpoint of this server is refused at authorization.
        let bad = app.url("/mcp/sets/Bad Slug");
        let q = authorize_query(&app, &client_id, &[("resource", &bad)]);
        let back = decide(&b, &q, "approve", "").await;
        assert_eq!(query_of(&back)["error"], "invalid_target", "{back}");
    }
);
