//! Issue 31: a remote MCP server each user signs in to, end to end against a second workbench
//! (a real MCP OAuth 2.1 server): registration discovers it and introduces workbench with its
//! client ID metadata document, the admin's connection lists its tools, each user's calls
//! carry their own token (two users see two upstream identities), a user who has not
//! connected gets the not-connected answer, and a disconnected user is not connected again.

use std::time::Duration;

use serde_json::{json, Value};
use workbench_core::auth::{Principal, Role};

use crate::connections::{location, path_of};
use crate::helpers::{admin_with_key, execute, mcp_call, within, Options, TestApp, PASSWORD};
use crate::{app, db_test};

/// The person `upstream_user` signs in to the upstream and approves the consent its
/// authorization URL asks for; the redirect back to workbench.
async fn consent(up: &TestApp, upstream_user: &str, authorize: &str) -> String {
    let b = up.browser();
    assert!(b
        .sign_in(upstream_user, PASSWORD)
        .await
        .status()
        .is_success());
    let q: Vec<(String, String)> = url::Url::parse(authorize)
        .unwrap()
        .query_pairs()
        .into_owned()
        .collect();
    crate::mcp_oauth::decide_with(&b, &q, "approve", &[("policy_id", "")]).await
}

/// `user` (signed in to workbench as `email`) connects `integration` through the connect link
/// and signs in upstream as `upstream_user`; the `connect` answer.
async fn connect_as(
    app: &TestApp,
    up: &TestApp,
    key: &str,
    email: &str,
    upstream_user: &str,
) -> Value {
    let b = app.browser();
    assert!(b.sign_in(email, PASSWORD).await.status().is_success());
    connect_in(app, up, key, &b, upstream_user).await
}

/// The same for someone signed in to workbench in browser `b` however they signed in.
pub(crate) async fn connect_in(
    app: &TestApp,
    up: &TestApp,
    key: &str,
    b: &crate::helpers::Browser,
    upstream_user: &str,
) -> Value {
    let (link, _) = mcp_call(app, key, "connect", json!({ "integration": "remote" })).await;
    let url = link["url"].as_str().unwrap_or_else(|| panic!("{link}"));
    let res = b.get(&path_of(url)).await;
    assert!(res.status().is_redirection(), "{}", res.status());
    let authorize = location(&res);
    assert!(
        authorize.starts_with(&up.url("/oauth/authorize")),
        "{authorize}"
    );
    let q: std::collections::HashMap<String, String> = url::Url::parse(&authorize)
        .unwrap()
        .query_pairs()
        .into_owned()
        .collect();
    assert_eq!(q["resource"], up.url("/mcp"), "RFC 8707 resource");
    assert_eq!(
        q["client_id"],
        app.url("/oauth/client-metadata"),
        "the metadata document"
    );
    assert_eq!(q["code_challenge_method"], "S256");
    let back = consent(up, upstream_user, &authorize).await;
    assert!(back.starts_with(&app.url("/oauth/callback")), "{back}");
    let res = b.get(&path_of(&back)).await;
    assert!(res.status().is_redirection(), "{}", res.status());
    link
}

/// `remote` in the caller's list_integrations: whether they are connected, or None if absent.
async fn remote_status(app: &TestApp, key: &str) -> Option<bool> {
    let (listed, _) = mcp_call(app, key, "list_integrations", json!({})).await;
    listed["integrations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["name"] == "remote")
        .map(|i| i["connected"].as_bool().unwrap())
}

pub(crate) async fn whoami(app: &TestApp, key: &str) -> Value {
    execute(app, key, json!([{ "tool": "remote.whoami", "args": {} }])).await[0].clone()
}

/// The admin registers the second workbench as `remote`, in user_oauth mode: it awaits their
/// sign-in; the server's id.
pub(crate) async fn register(app: &TestApp, up: &TestApp, key: &str) -> String {
    let res = app
        .http()
        .post(app.url("/v1/mcp/servers"))
        .bearer_auth(key)
        .json(
            &json!({ "name": "remote", "url": up.url("/mcp"), "auth": { "type": "user_oauth" },
                           "tool_prefix": "remote." }),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201);
    let server: Value = res.json().await.unwrap();
    assert_eq!(
        (
            server["auth_type"].as_str(),
            server["state"].as_str(),
            server["tools_discovered"].as_u64()
        ),
        (Some("user_oauth"), Some("awaiting_sign_in"), Some(0)),
        "{server}"
    );
    server["id"].as_str().unwrap().to_owned()
}

/// The admin (ada, upstream ada@upstream.test) connects: the tools are listed with their
/// connection and, that first listing being the registration's, reach the catalog approved.
pub(crate) async fn admin_connects(app: &TestApp, up: &TestApp, key: &str, id: &str) {
    let link = connect_as(app, up, key, "ada@example.com", "ada@upstream.test").await;
    let (waited, _) = mcp_call(
        app,
        key,
        "wait_for_connection",
        json!({ "connectionId": link["connectionId"], "timeoutSec": 5 }),
    )
    .await;
    assert_eq!(waited, json!({ "status": "CONNECTED" }));
    within(
        "the tools listed with the admin's connection",
        Duration::from_secs(20),
        async || {
            let v: Value = app
                .http()
                .get(app.url(&format!("/v1/mcp/servers/{id}")))
                .bearer_auth(key)
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            let listed = v["state"] == "connected" && v["tools_discovered"].as_u64() == Some(9);
            // … and in the catalog, which is rebuilt right after the listing is stored.
            let schema = app
                .http()
                .get(app.url("/v1/tools/remote.whoami"))
                .bearer_auth(key)
                .send()
                .await
                .unwrap();
            listed && schema.status() == 200
        },
    )
    .await;
}

/// How many tokens the upstream issued workbench for `upstream_user` are still live (revoking
/// them is how they are counted: the test ends with them).
pub(crate) async fn live_upstream_tokens(
    app: &TestApp,
    up: &TestApp,
    upstream_user: &Principal,
) -> u64 {
    let grants = up.wb.oauth().grants(upstream_user).await.unwrap();
    assert_eq!(grants.len(), 1);
    assert_eq!(grants[0].client_id, app.url("/oauth/client-metadata"));
    workbench_core::store::oauth::revoke_grant_tokens(
        up.wb.db().pool(),
        &grants[0].id,
        workbench_core::clock::Clock::now_ms(&up.clock),
    )
    .await
    .unwrap()
}

db_test!(
    two_users_signed_in_to_a_remote_server_each_call_it_as_themselves,
    |backend| {
        let up = app!(backend, Options::loopback());
        up.user("ada@upstream.test", Role::Admin).await;
        let bob_up = up.user("bob@upstream.test", Role::Admin).await;
        let app = app!(backend, Options::loopback());
        let (_, key) = admin_with_key(&app).await;
        let bob = app.user("bob@example.com", Role::Member).await;
        let bob_key = app.api_key(&bob).await;

        let id = register(&app, &up, &key).await;

        // Until its admin connected, only they see it (nobody else can judge it by its tools).
        assert_eq!(remote_status(&app, &key).await, Some(false));
        assert_eq!(remote_status(&app, &bob_key).await, None);
        let (refused, is_error) = mcp_call(
            &app,
            &bob_key,
            "connect",
            json!({ "integration": "remote" }),
        )
        .await;
        assert!(is_error, "{refused}");

        admin_connects(&app, &up, &key, &id).await;
        let ada_out = whoami(&app, &key).await;
        assert_eq!(ada_out["result"]["email"], "ada@upstream.test", "{ada_out}");
        assert_eq!(remote_status(&app, &key).await, Some(true));
        assert_eq!(remote_status(&app, &bob_key).await, Some(false));

        // Bob has not signed in: his call answers not connected, never with ada's token.
        let bob_out = whoami(&app, &bob_key).await;
        assert_eq!(bob_out["code"], "NOT_CONNECTED", "{bob_out}");

        connect_as(&app, &up, &bob_key, "bob@example.com", "bob@upstream.test").await;
        let bob_out = whoami(&app, &bob_key).await;
        assert_eq!(bob_out["result"]["email"], "bob@upstream.test", "{bob_out}");
        let ada_out = whoami(&app, &key).await;
        assert_eq!(ada_out["result"]["email"], "ada@upstream.test");

        // The upstream's clock passes the access tokens' hour: it refuses them (401); each
        // call refreshes once (RFC 8707 resource sent again) and is made again.
        up.clock.advance_ms(3_700_000);
        let ada_out = whoami(&app, &key).await;
        assert_eq!(ada_out["result"]["email"], "ada@upstream.test", "{ada_out}");
        let bob_out = whoami(&app, &bob_key).await;
        assert_eq!(bob_out["result"]["email"], "bob@upstream.test", "{bob_out}");
        // workbench's clock passes them too: the tokens are refreshed before use.
        app.clock.advance_ms(3_700_000);
        up.clock.advance_ms(3_700_000);
        let ada_out = whoami(&app, &key).await;
        assert_eq!(ada_out["result"]["email"], "ada@upstream.test", "{ada_out}");

        // Bob disconnects: his next call is not connected.
        let b = app.browser();
        assert!(b
            .sign_in("bob@example.com", PASSWORD)
            .await
            .status()
            .is_success());
        let res = b.call("disconnect", &[("integration", "remote")]).await;
        assert!(res.status().is_success(), "{}", res.status());
        let bob_out = whoami(&app, &bob_key).await;
        assert_eq!(bob_out["code"], "NOT_CONNECTED", "{bob_out}");
        // … and the upstream revoked every token it issued him (RFC 7009): none is left live.
        assert_eq!(live_upstream_tokens(&app, &up, &bob_up).await, 0);
    }
);

db_test!(
    user_oauth_settings_are_checked_before_anything_is_contacted_or_stored,
    |backend| {
        let app = app!(backend, Options::loopback());
        let (_, key) = admin_with_key(&app).await;
        let long = "x".repeat(2049);
        for (auth, says) in [
            (
                json!({ "type": "user_oauth", "client_id": "" }),
                "auth.client_id",
            ),
            (
                json!({ "type": "user_oauth", "client_id": long }),
                "auth.client_id",
            ),
            (
                json!({ "type": "user_oauth", "client_id": "a b" }),
                "auth.client_id",
            ),
            (
                json!({ "type": "user_oauth", "scopes": ["a\"b"] }),
                "auth.scopes",
            ),
            (
                json!({ "type": "user_oauth", "secret_ref": "X" }),
                "auth.client_id too",
            ),
            (
                json!({ "type": "user_oauth", "client_id": "c", "secret_ref": "NOPE" }),
                "names no secret",
            ),
            (
                json!({ "type": "user_oauth", "registered_by": "usr_x" }),
                "the rest is discovered",
            ),
            (
                json!({ "type": "user_oauth", "token": "t" }),
                "never inline",
            ),
        ] {
            let res = app
                .http()
                .post(app.url("/v1/mcp/servers"))
                .bearer_auth(&key)
                .json(&json!({ "name": "remote", "url": "http://127.0.0.1:9/mcp", "auth": auth }))
                .send()
                .await
                .unwrap();
            assert_eq!(res.status(), 422, "{auth}");
            let body: Value = res.json().await.unwrap();
            let message = body["error"]["message"].as_str().unwrap_or_default();
            assert!(message.contains(says), "{auth}: {body}");
        }
        let listed: Value = app
            .http()
            .get(app.url("/v1/mcp/servers"))
            .bearer_auth(&key)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(listed["data"], json!([]), "nothing stored: {listed}");
    }
);

db_test!(
    removing_a_member_revokes_their_tokens_at_the_remote_server,
    |backend| {
        let up = app!(backend, Options::loopback());
        up.user("ada@upstream.test", Role::Admin).await;
        let carol_up = up.user("carol@upstream.test", Role::Member).await;
        let app = app!(backend, Options::loopback());
        let (ada, key) = admin_with_key(&app).await;
        let carol = app.user("carol@example.com", Role::Member).await;
        let carol_key = app.api_key(&carol).await;
        let id = register(&app, &up, &key).await;
        admin_connects(&app, &up, &key, &id).await;
        connect_as(
            &app,
            &up,
            &carol_key,
            "carol@example.com",
            "carol@upstream.test",
        )
        .await;
        let out = whoami(&app, &carol_key).await;
        assert_eq!(out["result"]["email"], "carol@upstream.test", "{out}");

        app.wb.remove_member(&ada, &carol.user_id).await.unwrap();
        assert_eq!(
            live_upstream_tokens(&app, &up, &carol_up).await,
            0,
            "tokens still live upstream after the member was removed"
        );
        let res = app
            .http()
            .get(app.url("/v1/tools"))
            .bearer_auth(&carol_key)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 401, "the removed member's key");
        // The admin's own connection is untouched.
        let out = whoami(&app, &key).await;
        assert_eq!(out["result"]["email"], "ada@upstream.test", "{out}");
    }
);
