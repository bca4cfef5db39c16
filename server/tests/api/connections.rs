//! Integrations and connections (D9–D11): list_integrations, connect / get_auth_url,
//! wait_for_connection, the connect page with OAuth (PKCE, single-use state, iss), API key and
//! cookie forms, credential injection, token refresh, curl_session and the /c proxy.

use std::sync::atomic::Ordering;

use serde_json::{json, Value};
use workbench_core::auth::Role;

use crate::fake_provider::{self, FakeProvider, LINEAR_KEY, SUPERSET_COOKIE};
use crate::helpers::{admin_with_key, execute, mcp_call, Browser, Options, TestApp, PASSWORD};
use crate::{app, db_test};

async fn with_provider(
    backend: crate::helpers::Backend,
    issuer: bool,
) -> Option<(TestApp, FakeProvider)> {
    let fake = fake_provider::start().await;
    let issuer_value = fake.url("");
    let settings = fake.settings(issuer.then_some(issuer_value.as_str()));
    let app = crate::helpers::spawn_app_with(
        backend,
        Options {
            integrations: settings,
            ..Default::default()
        },
    )
    .await?;
    Some((app, fake))
}

pub(crate) fn location(res: &reqwest::Response) -> String {
    res.headers()
        .get("location")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default()
}

pub(crate) fn path_of(url: &str) -> String {
    let u = url::Url::parse(url).unwrap();
    match u.query() {
        Some(q) => format!("{}?{q}", u.path()),
        None => u.path().to_owned(),
    }
}

async fn connect(app: &TestApp, key: &str, integration: &str) -> Value {
    mcp_call(app, key, "connect", json!({ "integration": integration }))
        .await
        .0
}

/// Runs the OAuth dance in a signed-in browser for a connect link; returns the last page HTML.
pub(crate) async fn oauth_dance(app: &TestApp, b: &Browser, connect_url: &str) -> (String, String) {
    let res = b.get(&path_of(connect_url)).await;
    assert!(res.status().is_redirection(), "{}", res.status());
    let authorize = location(&res);
    let res = app.http().get(&authorize).send().await.unwrap();
    assert_eq!(res.status(), 303, "the provider approves");
    let callback = location(&res);
    let res = b.get(&path_of(&callback)).await;
    let landing = location(&res);
    let html = b.get(&landing).await.text().await.unwrap();
    (authorize, html)
}

async fn signed_in(app: &TestApp) -> Browser {
    let b = app.browser();
    assert!(b
        .sign_in("ada@example.com", PASSWORD)
        .await
        .status()
        .is_success());
    b
}

db_test!(
    list_integrations_reports_each_integration_and_connection_state,
    |backend| {
        let Some((app, _fake)) = with_provider(backend, false).await else {
            return;
        };
        let (_, key) = admin_with_key(&app).await;
        let (out, _) = mcp_call(&app, &key, "list_integrations", json!({})).await;
        let list = out["integrations"].as_array().unwrap();
        let get = |n: &str| list.iter().find(|i| i["name"] == n).unwrap().clone();
        assert_eq!(
            get("hackernews"),
            json!({ "name": "hackernews", "version": "1.0.0", "connected": true })
        );
        assert_eq!(get("github")["connected"], false);
        assert_eq!(get("superset")["connected"], false);
        assert_eq!(
            list[0].as_object().unwrap().len(),
            3,
            "leaner than /api/integrations"
        );
    }
);

db_test!(
    a_tool_of_an_unconnected_integration_answers_not_connected,
    |backend| {
        let Some((app, fake)) = with_provider(backend, false).await else {
            return;
        };
        let (_, key) = admin_with_key(&app).await;
        let out = execute(
            &app,
            &key,
            json!([{ "tool": "github_get_user", "args": {} }]),
        )
        .await;
        assert_eq!(out[0]["code"], "NOT_CONNECTED");
        assert_eq!(out[0]["integration"], "github");
        assert!(out[0]["error"].as_str().unwrap().contains("call connect"));
        assert_eq!(fake.state.api_requests.load(Ordering::SeqCst), 0);
    }
);

db_test!(
    connect_mints_a_workbench_link_and_contacts_no_provider,
    |backend| {
        let Some((app, fake)) = with_provider(backend, false).await else {
            return;
        };
        let (_, key) = admin_with_key(&app).await;
        for tool in ["connect", "get_auth_url"] {
            let (out, is_error) =
                mcp_call(&app, &key, tool, json!({ "integration": "github" })).await;
            assert!(!is_error);
            let id = out["connectionId"].as_str().unwrap();
            assert!(id.starts_with("conn_"));
            assert_eq!(out["url"], format!("{}/connect/{id}", app.base));
            assert_eq!(out["integration"], "github");
            assert_eq!(out["authType"], "oauth2");
            assert!(out["expiresAt"].as_str().unwrap().ends_with('Z'));
        }
        assert_eq!(
            fake.state.authorize_requests.load(Ordering::SeqCst)
                + fake.state.token_requests.load(Ordering::SeqCst),
            0
        );
        let (out, _) = connect(&app, &key, "hackernews").await.pipe_ok();
        assert_eq!(out, json!({ "status": "CONNECTED" }));
        let (out, is_error) =
            mcp_call(&app, &key, "connect", json!({ "integration": "nope" })).await;
        assert!(is_error);
        assert!(out["error"]
            .as_str()
            .unwrap()
            .contains("unknown integration nope"));
    }
);

trait PipeOk {
    fn pipe_ok(self) -> (Value, bool);
}
impl PipeOk for Value {
    fn pipe_ok(self) -> (Value, bool) {
        (self, false)
    }
}

db_test!(
    oauth_connects_with_pkce_and_the_token_reaches_the_api,
    |backend| {
        let Some((app, fake)) = with_provider(backend, true).await else {
            return;
        };
        let (_, key) = admin_with_key(&app).await;
        let b = signed_in(&app).await;
        let link = connect(&app, &key, "github").await;
        let id = link["connectionId"].as_str().unwrap().to_owned();
        let (authorize, html) = oauth_dance(&app, &b, link["url"].as_str().unwrap()).await;
        let q: std::collections::HashMap<String, String> = url::Url::parse(&authorize)
            .unwrap()
            .query_pairs()
            .into_owned()
            .collect();
        assert_eq!(q["code_challenge_method"], "S256");
        assert_eq!(q["client_id"], fake_provider::CLIENT_ID);
        assert_eq!(q["redirect_uri"], format!("{}/oauth/callback", app.base));
        assert_eq!(q["scope"], "repo read:user");
        assert!(q["state"].len() >= 32);
        assert!(html.contains("GitHub is connected"), "{html}");

        let (out, _) = mcp_call(
            &app,
            &key,
            "wait_for_connection",
            json!({ "connectionId": id, "timeoutSec": 5 }),
        )
        .await;
        assert_eq!(out, json!({ "status": "CONNECTED" }));
        let out = execute(
            &app,
            &key,
            json!([{ "tool": "github_get_user", "args": {} }]),
        )
        .await;
        assert_eq!(out[0]["result"]["login"], "octocat");
        assert!(
            out[0]["result"].get("site_admin").is_none(),
            "results are shaped"
        );
        let headers = fake.state.last_headers.lock().unwrap().clone().unwrap();
        let sent = headers
            .get("authorization")
            .unwrap()
            .to_str()
            .unwrap()
            .to_owned();
        assert!(fake
            .live_tokens()
            .iter()
            .any(|t| sent == format!("Bearer {t}")));
        assert_eq!(
            headers.get("accept").unwrap(),
            "application/vnd.github+json"
        );

        let created = execute(&app, &key, json!([{ "tool": "github_create_issue", "args": { "owner": "acme", "repo": "demo", "title": "Bug", "labels": ["x"] } }])).await;
        assert_eq!(created[0]["result"]["number"], 7);
        assert_eq!(
            *fake.state.last_body.lock().unwrap(),
            Some(json!({ "title": "Bug", "labels": ["x"] }))
        );
        let (out, _) = mcp_call(&app, &key, "list_integrations", json!({})).await;
        assert!(out["integrations"]
            .as_array()
            .unwrap()
            .iter()
            .any(|i| i["name"] == "github" && i["connected"] == true));
        // The access token never shows in results.
        let token = sent.trim_start_matches("Bearer ").to_owned();
        assert!(!serde_json::to_string(&out).unwrap().contains(&token));
    }
);

db_test!(
    the_oauth_state_is_single_use_and_bound_to_the_user,
    |backend| {
        let Some((app, _fake)) = with_provider(backend, false).await else {
            return;
        };
        let (_, key) = admin_with_key(&app).await;
        app.user("bob@example.com", Role::Member).await;
        let b = signed_in(&app).await;
        let link = connect(&app, &key, "github").await;
        let res = b.get(&path_of(link["url"].as_str().unwrap())).await;
        let authorize = location(&res);
        let callback = location(&app.http().get(&authorize).send().await.unwrap());
        // Bob cannot finish Ada's flow.
        let bob = app.browser();
        bob.sign_in("bob@example.com", PASSWORD).await;
        let res = bob.get(&path_of(&callback)).await;
        assert!(
            location(&res).starts_with("/connected?error="),
            "{}",
            location(&res)
        );
        // The state was consumed by Bob's attempt: Ada's replay fails too.
        let res = b.get(&path_of(&callback)).await;
        assert!(location(&res).starts_with("/connected?error="));
        let (out, _) = mcp_call(&app, &key, "list_integrations", json!({})).await;
        assert!(out["integrations"]
            .as_array()
            .unwrap()
            .iter()
            .any(|i| i["name"] == "github" && i["connected"] == false));
    }
);

db_test!(a_callback_from_the_wrong_issuer_is_refused, |backend| {
    let fake = fake_provider::start().await;
    let settings = fake.settings(Some("https://issuer.example"));
    let app = app!(
        backend,
        Options {
            integrations: settings,
            ..Default::default()
        }
    );
    let (_, key) = admin_with_key(&app).await;
    let b = signed_in(&app).await;
    let link = connect(&app, &key, "github").await;
    let res = b.get(&path_of(link["url"].as_str().unwrap())).await;
    let callback = location(&app.http().get(location(&res)).send().await.unwrap());
    let res = b.get(&path_of(&callback)).await;
    let landing = location(&res);
    assert!(landing.contains("issuer"), "{landing}");
    assert_eq!(
        fake.state.token_requests.load(Ordering::SeqCst),
        0,
        "no code exchange"
    );
});

db_test!(
    connect_links_are_not_found_for_another_user_unknown_or_expired_ids,
    |backend| {
        let Some((app, _fake)) = with_provider(backend, false).await else {
            return;
        };
        let (_, key) = admin_with_key(&app).await;
        app.user("bob@example.com", Role::Member).await;
        let link = connect(&app, &key, "github").await;
        let path = path_of(link["url"].as_str().unwrap());
        let bob = app.browser();
        bob.sign_in("bob@example.com", PASSWORD).await;
        let other = bob.get(&path).await;
        assert_eq!(other.status(), 404);
        let other_html = other.text().await.unwrap();
        let unknown = bob.get("/connect/conn_0000000000000000000000").await;
        assert_eq!(unknown.status(), 404);
        assert!(other_html.contains("This connection link does not exist"));
        assert_eq!(
            body_text(&other_html),
            body_text(&unknown.text().await.unwrap())
        );
        // Signed out: sign in first, then back to the link.
        let res = app.browser().get(&path).await;
        assert!(location(&res).starts_with("/login?next=%2Fconnect%2F"));
        // Expired.
        app.clock.advance_ms(601_000);
        let ada = signed_in(&app).await;
        assert_eq!(ada.get(&path).await.status(), 404);
    }
);

/// The body of a page without per-response nonces.
fn body_text(html: &str) -> String {
    let start = html.find("<body").unwrap_or(0);
    html[start..]
        .split("nonce=\"")
        .map(|p| p.split_once('"').map(|(_, r)| r).unwrap_or(p))
        .collect::<Vec<_>>()
        .join("")
}

db_test!(
    wait_for_connection_times_out_expires_and_hides_other_users_ids,
    |backend| {
        let Some((app, _fake)) = with_provider(backend, false).await else {
            return;
        };
        let (_, key) = admin_with_key(&app).await;
        let bob = app.user("bob@example.com", Role::Member).await;
        let bob_key = app.api_key(&bob).await;
        let link = connect(&app, &key, "github").await;
        let id = link["connectionId"].as_str().unwrap().to_owned();
        let (out, is_error) = mcp_call(
            &app,
            &bob_key,
            "wait_for_connection",
            json!({ "connectionId": id, "timeoutSec": 1 }),
        )
        .await;
        assert!(is_error);
        assert_eq!(out, json!({ "error": "Unknown connectionId" }));
        let (out, _) = mcp_call(
            &app,
            &key,
            "wait_for_connection",
            json!({ "connectionId": "conn_nope", "timeoutSec": 1 }),
        )
        .await;
        assert_eq!(out, json!({ "error": "Unknown connectionId" }));
        let (out, _) = mcp_call(
            &app,
            &key,
            "wait_for_connection",
            json!({ "connectionId": id, "timeoutSec": 1 }),
        )
        .await;
        assert_eq!(out, json!({ "status": "TIMEOUT" }));
        let (out, _) = mcp_call(
            &app,
            &key,
            "wait_for_connection",
            json!({ "connectionId": id, "timeoutSec": 1 }),
        )
        .await;
        assert_eq!(
            out,
            json!({ "error": "Unknown connectionId" }),
            "the timeout reaped the pending record"
        );
        let link = connect(&app, &key, "github").await;
        app.clock.advance_ms(601_000);
        let (out, _) = mcp_call(
            &app,
            &key,
            "wait_for_connection",
            json!({ "connectionId": link["connectionId"], "timeoutSec": 3 }),
        )
        .await;
        assert_eq!(out, json!({ "status": "EXPIRED" }));
        let (out, is_error) = mcp_call(
            &app,
            &key,
            "wait_for_connection",
            json!({ "connectionId": "x", "timeoutSec": 601 }),
        )
        .await;
        assert!(is_error && out["error"].as_str().unwrap().contains("timeoutSec"));
    }
);

db_test!(
    tokens_refresh_before_expiry_and_once_after_a_401,
    |backend| {
        let Some((app, fake)) = with_provider(backend, false).await else {
            return;
        };
        let (_, key) = admin_with_key(&app).await;
        let b = signed_in(&app).await;
        fake.state.expires_in.store(30, Ordering::SeqCst);
        let link = connect(&app, &key, "github").await;
        oauth_dance(&app, &b, link["url"].as_str().unwrap()).await;
        // Expires within the refresh margin: the next call refreshes first.
        let out = execute(
            &app,
            &key,
            json!([{ "tool": "github_get_user", "args": {} }]),
        )
        .await;
        assert_eq!(out[0]["result"]["login"], "octocat");
        assert_eq!(fake.state.refresh_grants.load(Ordering::SeqCst), 1);
        // A 401 (token revoked at the provider): refresh once and retry.
        fake.state.expires_in.store(3600, Ordering::SeqCst);
        execute(
            &app,
            &key,
            json!([{ "tool": "github_get_user", "args": {} }]),
        )
        .await;
        let before = fake.state.refresh_grants.load(Ordering::SeqCst);
        fake.revoke_all_access_tokens();
        let out = execute(
            &app,
            &key,
            json!([{ "tool": "github_get_user", "args": {} }]),
        )
        .await;
        assert_eq!(out[0]["result"]["login"], "octocat", "{:?}", out[0]);
        assert_eq!(fake.state.refresh_grants.load(Ordering::SeqCst), before + 1);
        // The refresh fails: the connection expires and says so.
        fake.state.fail_refresh.store(true, Ordering::SeqCst);
        fake.revoke_all_access_tokens();
        let out = execute(
            &app,
            &key,
            json!([{ "tool": "github_get_user", "args": {} }]),
        )
        .await;
        assert_eq!(out[0]["code"], "NOT_CONNECTED");
        assert!(out[0]["error"].as_str().unwrap().contains("expired"));
        let again = execute(
            &app,
            &key,
            json!([{ "tool": "github_get_user", "args": {} }]),
        )
        .await;
        assert_eq!(again[0]["code"], "NOT_CONNECTED");
        let (out, _) = mcp_call(&app, &key, "list_integrations", json!({})).await;
        assert!(out["integrations"]
            .as_array()
            .unwrap()
            .iter()
            .any(|i| i["name"] == "github" && i["connected"] == false));
    }
);

db_test!(
    api_key_and_cookie_forms_check_the_value_before_storing_it,
    |backend| {
        let Some((app, fake)) = with_provider(backend, false).await else {
            return;
        };
        let (_, key) = admin_with_key(&app).await;
        let b = signed_in(&app).await;
        let link = connect(&app, &key, "linear").await;
        assert_eq!(link["authType"], "api_key");
        let id = link["connectionId"].as_str().unwrap().to_owned();
        let page = b.get(&path_of(link["url"].as_str().unwrap())).await;
        assert_eq!(page.status(), 200);
        assert!(page.text().await.unwrap().contains("Personal API key"));
        let res = b
            .call(
                "submit_connection",
                &[("id", &id), ("value", "wrong-key-value")],
            )
            .await;
        assert!(res.text().await.unwrap().contains("did not accept it"));
        let res = b
            .call("submit_connection", &[("id", &id), ("value", LINEAR_KEY)])
            .await;
        assert_eq!(res.status(), 200);
        let (out, _) = mcp_call(
            &app,
            &key,
            "wait_for_connection",
            json!({ "connectionId": id, "timeoutSec": 2 }),
        )
        .await;
        assert_eq!(out["status"], "CONNECTED");
        let out = execute(
            &app,
            &key,
            json!([{ "tool": "linear_get_viewer", "args": {} }]),
        )
        .await;
        assert_eq!(out[0]["result"]["name"], "Lin Ear");
        assert_eq!(
            fake.state
                .last_headers
                .lock()
                .unwrap()
                .as_ref()
                .unwrap()
                .get("authorization")
                .unwrap(),
            LINEAR_KEY
        );

        let link = connect(&app, &key, "superset").await;
        assert_eq!(link["authType"], "cookie");
        let id = link["connectionId"].as_str().unwrap().to_owned();
        assert_eq!(
            b.call(
                "submit_connection",
                &[("id", &id), ("value", SUPERSET_COOKIE)]
            )
            .await
            .status(),
            200
        );
        let out = execute(
            &app,
            &key,
            json!([{ "tool": "superset_list_dashboards", "args": {} }]),
        )
        .await;
        assert_eq!(
            out[0]["result"]["items"][0]["dashboard_title"], "Sales",
            "{out:?}"
        );
        assert_eq!(
            fake.state.last_query.lock().unwrap().as_deref(),
            Some("q=%28page%3A0%2Cpage_size%3A25%29")
        );
        let (out, _) = mcp_call(&app, &key, "list_integrations", json!({})).await;
        assert!(out["integrations"]
            .as_array()
            .unwrap()
            .iter()
            .any(|i| i["name"] == "superset" && i["connected"] == true));
        // A cookie integration's `connected` is a live check.
        fake.state.cookie_valid.store(false, Ordering::SeqCst);
        let (out, _) = mcp_call(&app, &key, "list_integrations", json!({})).await;
        assert!(out["integrations"]
            .as_array()
            .unwrap()
            .iter()
            .any(|i| i["name"] == "superset" && i["connected"] == false));
    }
);

async fn curl(app: &TestApp, key: &str, args: Value) -> (Value, bool) {
    mcp_call(app, key, "curl_session", args).await
}

db_test!(
    curl_session_validates_every_name_and_the_lifetime,
    |backend| {
        let Some((app, _fake)) = with_provider(backend, false).await else {
            return;
        };
        let (_, key) = admin_with_key(&app).await;
        let (out, is_error) = curl(
            &app,
            &key,
            json!({ "integrations": ["github", "nope", "hackernews"] }),
        )
        .await;
        assert!(is_error);
        assert_eq!(
        out["error"],
        "github is not connected; call connect first; unknown integration nope; hackernews does not have the curl proxy enabled"
    );
        for ttl in [30, 3601] {
            let (out, is_error) = curl(
                &app,
                &key,
                json!({ "integrations": ["linear"], "expiresInSeconds": ttl }),
            )
            .await;
            assert!(is_error);
            assert!(out["error"]
                .as_str()
                .unwrap()
                .contains("expiresInSeconds must be an integer from 60 to 3600"));
        }
    }
);

db_test!(
    the_curl_proxy_injects_the_credential_and_stays_on_the_integrations_origin,
    |backend| {
        let Some((app, fake)) = with_provider(backend, false).await else {
            return;
        };
        let (admin, key) = admin_with_key(&app).await;
        let b = signed_in(&app).await;
        let link = connect(&app, &key, "github").await;
        oauth_dance(&app, &b, link["url"].as_str().unwrap()).await;
        let (out, is_error) = curl(
            &app,
            &key,
            json!({ "integrations": ["github"], "expiresInSeconds": 120 }),
        )
        .await;
        assert!(!is_error, "{out}");
        assert_eq!(out["expiresIn"], 120);
        assert_eq!(out["proxyBaseUrl"], format!("{}/c", app.base));
        assert!(out["usage"]
            .as_str()
            .unwrap()
            .contains("/c/<integration>/<path>"));
        let token = out["token"].as_str().unwrap().to_owned();
        let claims: Value = {
            use base64::Engine as _;
            let payload = token.split('.').nth(1).unwrap();
            serde_json::from_slice(
                &base64::engine::general_purpose::URL_SAFE_NO_PAD
                    .decode(payload)
                    .unwrap(),
            )
            .unwrap()
        };
        assert_eq!(claims["aud"], "workbench:curl-proxy");
        assert_eq!(claims["sub"], admin.user_id.as_str());
        assert_eq!(claims["integrations"], json!(["github"]));
        assert!(claims["jti"].is_string() && claims["exp"].is_u64());

        let res = app
            .http()
            .get(app.url("/c/github/user?x=1"))
            .bearer_auth(&token)
            .header("cookie", "mine=1")
            .header("x-forwarded-for", "1.2.3.4")
            .header("x-custom", "kept")
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200);
        assert_eq!(res.json::<Value>().await.unwrap()["login"], "octocat");
        let headers = fake.state.last_headers.lock().unwrap().clone().unwrap();
        assert!(
            headers.get("authorization").unwrap().to_str().unwrap() != format!("Bearer {token}"),
            "the caller's token is replaced"
        );
        assert!(headers.get("cookie").is_none() && headers.get("x-forwarded-for").is_none());
        assert_eq!(headers.get("x-custom").unwrap(), "kept");
        assert_eq!(
            fake.state.last_query.lock().unwrap().as_deref(),
            Some("x=1")
        );
        // A header the caller sets replaces the integration's default of that name.
        let res = app
            .http()
            .get(app.url("/c/github/user"))
            .bearer_auth(&token)
            .header("accept", "application/vnd.github.raw+json")
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200);
        let headers = fake.state.last_headers.lock().unwrap().clone().unwrap();
        let accept: Vec<_> = headers
            .get_all("accept")
            .iter()
            .map(|v| v.to_str().unwrap().to_owned())
            .collect();
        assert_eq!(accept, ["application/vnd.github.raw+json"]);
        assert_eq!(
            headers.get("x-github-api-version").unwrap(),
            "2022-11-28",
            "other defaults stay"
        );

        // Redirects come back to the caller, unfollowed.
        let res = app
            .http()
            .get(app.url("/c/github/moved"))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 307);
        assert!(res
            .headers()
            .get("location")
            .unwrap()
            .to_str()
            .unwrap()
            .contains("169.254.169.254"));
        // Path tricks are refused before anything is sent.
        let before = fake.state.api_requests.load(Ordering::SeqCst);
        for path in [
            "/c/github/..%2fadmin",
            "/c/github/%2e%2e/user",
            "/c/github//evil.example/x",
            "/c/github/a%5Cb",
        ] {
            let res = app
                .http()
                .get(format!("{}{path}", app.base))
                .bearer_auth(&token)
                .send()
                .await
                .unwrap();
            // 400 from the proxy, or 403 when the client itself normalised the dots away.
            assert!(
                matches!(res.status().as_u16(), 400 | 403),
                "{path}: {}",
                res.status()
            );
        }
        assert_eq!(fake.state.api_requests.load(Ordering::SeqCst), before);
        // Only the listed integrations, only valid tokens.
        let res = app
            .http()
            .get(app.url("/c/linear/graphql"))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 403);
        let res = app
            .http()
            .get(app.url("/c/github/user"))
            .bearer_auth(&key)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 401, "an API key is not a proxy token");
        let mut tampered = token.clone();
        tampered.push('x');
        assert_eq!(
            app.http()
                .get(app.url("/c/github/user"))
                .bearer_auth(&tampered)
                .send()
                .await
                .unwrap()
                .status(),
            401
        );
        // Metered and audited.
        let usage = app
            .wb
            .metering()
            .usage(&admin, "2000-01-01", "2999-12-31")
            .await
            .unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        let usage_after = app
            .wb
            .metering()
            .usage(&admin, "2000-01-01", "2999-12-31")
            .await
            .unwrap();
        let egress: i64 = usage_after
            .iter()
            .filter(|u| u.tool == "curl:github" && u.meter.as_str() == "egress_bytes")
            .map(|u| u.value)
            .sum();
        assert!(egress > 0, "{usage:?} {usage_after:?}");
        app.wb.flush_records().await;
        let audit = workbench_core::store::audit::list(
            app.wb.db().pool(),
            &admin.project_id,
            &Default::default(),
            100,
        )
        .await
        .unwrap();
        assert!(audit.iter().any(|r| r.action == "proxy.request"
            && r.detail.as_deref().unwrap_or("").starts_with("GET /user")));
        assert!(!audit.iter().any(|r| format!("{r:?}").contains(&token)));
        // Expired tokens are refused (no leeway).
        app.clock.advance_ms(121_000);
        assert_eq!(
            app.http()
                .get(app.url("/c/github/user"))
                .bearer_auth(&token)
                .send()
                .await
                .unwrap()
                .status(),
            401
        );
    }
);

db_test!(
    disconnecting_and_signing_out_revoke_proxy_tokens,
    |backend| {
        let Some((app, _fake)) = with_provider(backend, false).await else {
            return;
        };
        let (_, key) = admin_with_key(&app).await;
        let b = signed_in(&app).await;
        let link = connect(&app, &key, "linear").await;
        let id = link["connectionId"].as_str().unwrap().to_owned();
        b.call("submit_connection", &[("id", &id), ("value", LINEAR_KEY)])
            .await;
        let token = curl(&app, &key, json!({ "integrations": ["linear"] }))
            .await
            .0["token"]
            .as_str()
            .unwrap()
            .to_owned();
        let post = |t: String| {
            app.http()
                .post(app.url("/c/linear/graphql"))
                .bearer_auth(t)
                .json(&json!({ "query": "{ viewer { id } }" }))
                .send()
        };
        assert_eq!(post(token.clone()).await.unwrap().status(), 200);
        assert_eq!(
            b.call("disconnect", &[("integration", "linear")])
                .await
                .status(),
            200
        );
        assert_eq!(
            post(token.clone()).await.unwrap().status(),
            401,
            "disconnect revoked the token"
        );
        let out = execute(
            &app,
            &key,
            json!([{ "tool": "linear_get_viewer", "args": {} }]),
        )
        .await;
        assert_eq!(out[0]["code"], "NOT_CONNECTED");

        let link = connect(&app, &key, "linear").await;
        b.call(
            "submit_connection",
            &[
                ("id", link["connectionId"].as_str().unwrap()),
                ("value", LINEAR_KEY),
            ],
        )
        .await;
        let token = curl(&app, &key, json!({ "integrations": ["linear"] }))
            .await
            .0["token"]
            .as_str()
            .unwrap()
            .to_owned();
        assert_eq!(post(token.clone()).await.unwrap().status(), 200);
        b.call("sign_out", &[]).await;
        assert_eq!(
            post(token).await.unwrap().status(),
            401,
            "sign-out revoked the token"
        );
    }
);

db_test!(the_portal_lists_integrations_and_connections, |backend| {
    let Some((app, _fake)) = with_provider(backend, false).await else {
        return;
    };
    let (_, key) = admin_with_key(&app).await;
    let b = signed_in(&app).await;
    let list: Value = b.get("/api/integrations").await.json().await.unwrap();
    let github = list
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["name"] == "github")
        .unwrap();
    assert_eq!(github["displayName"], "GitHub");
    assert_eq!(github["authType"], "oauth2");
    assert_eq!(github["logo"], "/logos/github.svg");
    assert!(github["toolCount"].as_u64().unwrap() >= 5);
    assert_eq!(github["connected"], false);
    assert_eq!(
        app.http()
            .get(app.url("/api/integrations"))
            .bearer_auth(&key)
            .send()
            .await
            .unwrap()
            .status(),
        401
    );
    let page: Value = b.call("connections_page", &[]).await.json().await.unwrap();
    let hn = page
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["name"] == "hackernews")
        .unwrap();
    assert_eq!(hn["status"], "no account needed");
    let res = b
        .client
        .post(format!("{}/api/start_connection", b.base))
        .header("accept", "text/html")
        .form(&[("integration", "linear")])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 302);
    assert!(location(&res).starts_with("/connect/conn_"));
    let html = b.get("/connections").await.text().await.unwrap();
    assert!(html.contains("Hacker News") && html.contains("Linear"));
});

db_test!(
    a_token_response_with_a_huge_expires_in_is_clamped,
    |backend| {
        let Some((app, fake)) = with_provider(backend, false).await else {
            return;
        };
        let (_, key) = admin_with_key(&app).await;
        fake.state.expires_in.store(u64::MAX, Ordering::SeqCst);
        let b = signed_in(&app).await;
        let link = connect(&app, &key, "github").await;
        oauth_dance(&app, &b, link["url"].as_str().unwrap()).await;
        let (out, _) = mcp_call(
            &app,
            &key,
            "wait_for_connection",
            json!({ "connectionId": link["connectionId"], "timeoutSec": 2 }),
        )
        .await;
        assert_eq!(out["status"], "CONNECTED", "{out}");
        let out = execute(
            &app,
            &key,
            json!([{ "tool": "github_get_user", "args": {} }]),
        )
        .await;
        assert_eq!(
            out[0]["result"]["login"], "octocat",
            "the token is used, not refreshed as if expired: {out:?}"
        );
        assert_eq!(fake.state.refresh_grants.load(Ordering::SeqCst), 0);
    }
);
