//! Custom apps: a project's own integrations in the plugin format, through /v1/apps.

use serde_json::{json, Value};
use workbench_core::auth::Role;

use crate::fake_provider::{self, LINEAR_KEY};
use crate::fakes;
use crate::helpers::{admin_with_key, execute, mcp_call, Options, PASSWORD};
use crate::{app, db_test};

fn definition(name: &str, base: &str) -> Value {
    json!({
        "name": name,
        "display_name": "Echo service",
        "version": "2.1.0",
        "base_url": base,
        "auth": { "type": "none" },
        "tools": [{
            "name": format!("{name}_echo_message"),
            "description": "Echo a message back through the team's echo service.",
            "side_effects": "none",
            "input_schema": { "type": "object", "required": ["message"], "properties": { "message": { "type": "string" }, "loud": { "type": "boolean", "default": false } } },
            "request": { "method": "POST", "path": "/echo", "body": { "message": "$message", "loud": "$loud" } },
            "result": { "fields": ["method", "body"] }
        }]
    })
}

async fn post_app(app: &crate::helpers::TestApp, key: &str, def: &Value) -> (u16, Value) {
    let res = app
        .http()
        .post(app.url("/v1/apps"))
        .bearer_auth(key)
        .json(def)
        .send()
        .await
        .unwrap();
    (
        res.status().as_u16(),
        res.json().await.unwrap_or(Value::Null),
    )
}

db_test!(an_app_adds_tools_to_its_projects_catalog, |backend| {
    let app = app!(
        backend,
        Options {
            egress_allow_private: vec!["127.0.0.1"],
            ..Default::default()
        }
    );
    let (_, key) = admin_with_key(&app).await;
    let fake = fakes::start().await;
    let (status, created) = post_app(&app, &key, &definition("teamecho", &fake.url(""))).await;
    assert_eq!(status, 201, "{created}");
    let id = created["id"].as_str().unwrap().to_owned();
    assert!(id.starts_with("app_"));
    assert_eq!(created["tools"], json!(["teamecho_echo_message"]));

    let tool: Value = app
        .http()
        .get(app.url("/v1/tools/teamecho_echo_message"))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(tool["source"], format!("app:{id}"));
    assert_eq!(tool["integration"], "teamecho");
    let (found, _) = mcp_call(
        &app,
        &key,
        "search_tools",
        json!({ "query": "echo a message" }),
    )
    .await;
    assert_eq!(found["tools"][0]["name"], "teamecho_echo_message");
    let out = execute(
        &app,
        &key,
        json!([{ "tool": "teamecho_echo_message", "args": { "message": "hi" } }]),
    )
    .await;
    assert_eq!(out[0]["result"]["method"], "POST");
    let sent: Value = serde_json::from_str(out[0]["result"]["body"].as_str().unwrap()).unwrap();
    assert_eq!(
        sent,
        json!({ "message": "hi", "loud": false }),
        "defaults applied, $args filled"
    );
    let (listed, _) = mcp_call(&app, &key, "list_integrations", json!({})).await;
    assert!(listed["integrations"]
        .as_array()
        .unwrap()
        .iter()
        .any(|i| i["name"] == "teamecho" && i["version"] == "2.1.0" && i["connected"] == true));

    let b = app.browser();
    assert!(b
        .sign_in("ada@example.com", PASSWORD)
        .await
        .status()
        .is_success());
    let portal: Value = b.get("/api/integrations").await.json().await.unwrap();
    let mine = portal
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["name"] == "teamecho")
        .expect("the app is listed");
    assert_eq!(
        (
            mine["displayName"].as_str(),
            mine["authType"].as_str(),
            mine["toolCount"].as_u64()
        ),
        (Some("Echo service"), Some("none"), Some(1))
    );

    // Another project sees none of it.
    let eve = app.user_in("eve@example.com", "other", Role::Admin).await;
    let eve_key = app.api_key(&eve).await;
    let out = execute(
        &app,
        &eve_key,
        json!([{ "tool": "teamecho_echo_message", "args": { "message": "hi" } }]),
    )
    .await;
    assert_eq!(out[0]["code"], "TOOL_NOT_FOUND");

    let list: Value = app
        .http()
        .get(app.url("/v1/apps"))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(list["data"][0]["id"], id.as_str());
    let res = app
        .http()
        .delete(app.url(&format!("/v1/apps/{id}")))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 204);
    let out = execute(
        &app,
        &key,
        json!([{ "tool": "teamecho_echo_message", "args": { "message": "hi" } }]),
    )
    .await;
    assert_eq!(out[0]["code"], "TOOL_NOT_FOUND");
    let res = app
        .http()
        .delete(app.url(&format!("/v1/apps/{id}")))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 404);
});

db_test!(
    apps_are_refused_when_they_collide_break_the_format_or_point_inward,
    |backend| {
        let app = app!(backend);
        let (_, key) = admin_with_key(&app).await;
        let (status, out) =
            post_app(&app, &key, &definition("github", "https://api.example.com")).await;
        assert_eq!(status, 409, "{out}");
        assert_eq!(
            post_app(
                &app,
                &key,
                &definition("teamecho", "https://api.example.com")
            )
            .await
            .0,
            201
        );
        assert_eq!(
            post_app(
                &app,
                &key,
                &definition("teamecho", "https://api.example.com")
            )
            .await
            .0,
            409
        );
        let mut broken = definition("broken", "https://api.example.com");
        broken["tools"][0]["name"] = json!("other_tool");
        let (status, out) = post_app(&app, &key, &broken).await;
        assert_eq!(status, 400);
        assert!(
            out["error"]["message"]
                .as_str()
                .unwrap()
                .contains("integration broken tool other_tool"),
            "{out}"
        );
        let mut oauth = definition("oauthy", "https://api.example.com");
        oauth["auth"] = json!({ "type": "oauth2", "authorize_url": "https://x.example/a", "token_url": "https://x.example/t" });
        let (status, out) = post_app(&app, &key, &oauth).await;
        assert_eq!(status, 400);
        assert!(
            out["error"]["message"]
                .as_str()
                .unwrap()
                .contains("auth.client_id"),
            "{out}"
        );
        oauth["auth"]["client_id"] = json!("cid");
        oauth["auth"]["client_secret_vault"] = json!("NOT_THERE");
        let (status, out) = post_app(&app, &key, &oauth).await;
        assert_eq!(status, 400);
        assert!(
            out["error"]["message"]
                .as_str()
                .unwrap()
                .contains("NOT_THERE, which is not in this project's vault"),
            "{out}"
        );
        oauth["auth"]["client_secret_vault"] = json!(null);
        oauth["auth"]["token_url"] = json!("http://10.0.0.8/token");
        let (status, out) = post_app(&app, &key, &oauth).await;
        assert_eq!(status, 400);
        assert!(
            out["error"]["message"]
                .as_str()
                .unwrap()
                .contains("auth.token_url points at a private"),
            "{out}"
        );
        let (status, out) =
            post_app(&app, &key, &definition("inward", "http://169.254.169.254/")).await;
        assert_eq!(status, 400);
        assert!(
            out["error"]["message"]
                .as_str()
                .unwrap()
                .contains("link-local"),
            "{out}"
        );
        let (status, _) = post_app(&app, &key, &json!({ "name": "x" })).await;
        assert_eq!(status, 400);
        let mut huge = definition("huge", "https://api.example.com");
        let tool = huge["tools"][0].clone();
        huge["tools"] = json!((0..101)
            .map(|i| {
                let mut t = tool.clone();
                t["name"] = json!(format!("huge_tool_{i}"));
                t
            })
            .collect::<Vec<_>>());
        let (status, out) = post_app(&app, &key, &huge).await;
        assert_eq!(status, 400);
        assert!(
            out["error"]["message"]
                .as_str()
                .unwrap()
                .contains("at most 100 tools"),
            "{out}"
        );
        let bob = app.user("bob@example.com", Role::Member).await;
        let bob_key = app.api_key(&bob).await;
        let (status, out) = post_app(
            &app,
            &bob_key,
            &definition("bobs", "https://api.example.com"),
        )
        .await;
        assert_eq!(status, 403, "{out}");
    }
);

db_test!(
    an_apps_requests_to_private_names_are_refused_at_call_time,
    |backend| {
        let app = app!(backend);
        let (_, key) = admin_with_key(&app).await;
        let fake = fakes::start().await;
        let (status, _) = post_app(
            &app,
            &key,
            &definition("local", &format!("http://localhost:{}", fake.addr.port())),
        )
        .await;
        assert_eq!(status, 201);
        let out = execute(
            &app,
            &key,
            json!([{ "tool": "local_echo_message", "args": { "message": "hi" } }]),
        )
        .await;
        assert_eq!(out[0]["code"], "TOOL_ERROR");
        assert!(
            out[0]["handler_error"]
                .as_str()
                .unwrap()
                .contains("refusing to connect"),
            "{:?}",
            out[0]
        );
        assert!(
            fake.state.last.lock().unwrap().is_none(),
            "nothing reached the service"
        );
    }
);

fn keyed_definition(base: &str) -> Value {
    json!({
        "name": "teamgraph",
        "display_name": "Team graph",
        "version": "1.0.0",
        "base_url": base,
        "curl_proxy": true,
        "auth": {
            "type": "api_key",
            "inject": { "header": "Authorization", "format": "{token}" },
            "probe": { "method": "POST", "path": "/graphql", "body": { "query": "{ viewer { id } }" } },
            "label": "Team graph key"
        },
        "tools": [{
            "name": "teamgraph_viewer",
            "description": "Get the signed-in viewer of the team graph.",
            "side_effects": "none",
            "input_schema": { "type": "object", "properties": {} },
            "request": { "method": "POST", "path": "/graphql", "body": { "query": "{ viewer { id name } }" } },
            "result": { "path": "data.viewer" }
        }]
    })
}

db_test!(an_api_key_app_connects_through_its_probe_its_proxy_injects_the_key_and_deleting_it_forgets_the_key, |backend| {
    let app = app!(backend, Options { egress_allow_private: vec!["127.0.0.1"], ..Default::default() });
    let (_, key) = admin_with_key(&app).await;
    let fake = fake_provider::start().await;
    let (status, created) = post_app(&app, &key, &keyed_definition(&fake.url(""))).await;
    assert_eq!(status, 201, "{created}");
    let out = execute(&app, &key, json!([{ "tool": "teamgraph_viewer", "args": {} }])).await;
    assert_eq!(out[0]["code"], "NOT_CONNECTED");
    assert_eq!(out[0]["integration"], "teamgraph");

    let (link, _) = mcp_call(&app, &key, "connect", json!({ "integration": "teamgraph" })).await;
    assert_eq!(link["authType"], "api_key");
    let id = link["connectionId"].as_str().unwrap().to_owned();
    let b = app.browser();
    assert!(b.sign_in("ada@example.com", PASSWORD).await.status().is_success());
    let path = url::Url::parse(link["url"].as_str().unwrap()).unwrap().path().to_owned();
    assert!(b.get(&path).await.text().await.unwrap().contains("Team graph key"));
    assert!(b.call("submit_connection", &[("id", &id), ("value", "not-the-key")]).await.text().await.unwrap().contains("did not accept it"));
    assert_eq!(b.call("submit_connection", &[("id", &id), ("value", LINEAR_KEY)]).await.status(), 200);
    let (out, _) = mcp_call(&app, &key, "wait_for_connection", json!({ "connectionId": id, "timeoutSec": 2 })).await;
    assert_eq!(out["status"], "CONNECTED");

    let out = execute(&app, &key, json!([{ "tool": "teamgraph_viewer", "args": {} }])).await;
    assert_eq!(out[0]["result"]["name"], "Lin Ear", "{out:?}");
    let (session, is_error) = mcp_call(&app, &key, "curl_session", json!({ "integrations": ["teamgraph"] })).await;
    assert!(!is_error, "{session}");
    let token = session["token"].as_str().unwrap();
    let res = app
        .http()
        .post(app.url("/c/teamgraph/graphql"))
        .bearer_auth(token)
        .header("authorization-extra", "x")
        .json(&json!({ "query": "{ viewer { email } }" }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["data"]["viewer"]["email"], "lin@example.com");
    assert_eq!(fake.state.last_headers.lock().unwrap().as_ref().unwrap().get("authorization").unwrap(), LINEAR_KEY);

    // Deleting the app forgets the key and revokes the proxy token; an app of the same name
    // created later starts unconnected.
    let id = created["id"].as_str().unwrap();
    assert_eq!(app.http().delete(app.url(&format!("/v1/apps/{id}"))).bearer_auth(&key).send().await.unwrap().status(), 204);
    let res = app.http().post(app.url("/c/teamgraph/graphql")).bearer_auth(token).json(&json!({})).send().await.unwrap();
    assert_eq!(res.status(), 401);
    let who = app.wb.accounts().authenticate_api_key(&key).await.unwrap();
    assert!(workbench_core::store::connections::get(app.wb.db().pool(), &who.project_id, &who.user_id, "teamgraph").await.unwrap().is_none());
    assert_eq!(post_app(&app, &key, &keyed_definition(&fake.url(""))).await.0, 201);
    let out = execute(&app, &key, json!([{ "tool": "teamgraph_viewer", "args": {} }])).await;
    assert_eq!(out[0]["code"], "NOT_CONNECTED");
});

db_test!(
    an_apps_probe_and_proxy_refuse_private_destinations,
    |backend| {
        let app = app!(backend);
        let (_, key) = admin_with_key(&app).await;
        let fake = fake_provider::start().await;
        let base = format!("http://localhost:{}", fake.addr.port());
        assert_eq!(post_app(&app, &key, &keyed_definition(&base)).await.0, 201);
        let (link, _) =
            mcp_call(&app, &key, "connect", json!({ "integration": "teamgraph" })).await;
        let id = link["connectionId"].as_str().unwrap().to_owned();
        let b = app.browser();
        assert!(b
            .sign_in("ada@example.com", PASSWORD)
            .await
            .status()
            .is_success());
        let text = b
            .call("submit_connection", &[("id", &id), ("value", LINEAR_KEY)])
            .await
            .text()
            .await
            .unwrap();
        assert!(
            text.contains("Team graph could not be checked: refusing to connect to localhost"),
            "{text}"
        );
        assert!(
            fake.state.last_headers.lock().unwrap().is_none(),
            "the key never left workbench"
        );
        let (out, _) = mcp_call(
            &app,
            &key,
            "wait_for_connection",
            json!({ "connectionId": id, "timeoutSec": 1 }),
        )
        .await;
        assert_eq!(out["status"], "TIMEOUT");

        // Even with a stored key, neither a tool nor the proxy reaches the private address.
        let who = app.wb.accounts().authenticate_api_key(&key).await.unwrap();
        let credential = workbench_core::connections::Credential::ApiKey {
            key: LINEAR_KEY.into(),
        };
        app.wb
            .connections()
            .store(&who.project_id, &who.user_id, "teamgraph", &credential)
            .await
            .unwrap();
        let out = execute(
            &app,
            &key,
            json!([{ "tool": "teamgraph_viewer", "args": {} }]),
        )
        .await;
        assert!(
            out[0]["handler_error"]
                .as_str()
                .unwrap()
                .contains("refusing to connect to localhost"),
            "{out:?}"
        );
        let (session, is_error) = mcp_call(
            &app,
            &key,
            "curl_session",
            json!({ "integrations": ["teamgraph"] }),
        )
        .await;
        assert!(!is_error, "{session}");
        let res = app
            .http()
            .post(app.url("/c/teamgraph/graphql"))
            .bearer_auth(session["token"].as_str().unwrap())
            .json(&json!({}))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 403);
        let body: Value = res.json().await.unwrap();
        assert!(
            body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("refusing to connect to localhost"),
            "{body}"
        );
        assert!(
            fake.state.last_headers.lock().unwrap().is_none(),
            "the key never left workbench"
        );
    }
);

db_test!(
    an_app_created_on_one_instance_reaches_another_on_its_next_reload,
    |backend| {
        let a = app!(backend);
        let b = app!(
            backend,
            Options {
                database_url: Some(a.database_url.clone()),
                ..Default::default()
            }
        );
        let (_, key) = admin_with_key(&a).await;
        let (status, created) = post_app(
            &a,
            &key,
            &definition("teamecho", "https://echo.example.com"),
        )
        .await;
        assert_eq!(status, 201);
        let found = |app: &crate::helpers::TestApp| {
            let app = app
                .http()
                .get(app.url("/v1/tools/teamecho_echo_message"))
                .bearer_auth(&key)
                .send();
            async move { app.await.unwrap().status().as_u16() }
        };
        assert_eq!(found(&b).await, 404, "B has not reloaded yet");
        assert_eq!(b.wb.apps().reload_all().await.unwrap(), 1);
        assert_eq!(found(&b).await, 200);
        assert_eq!(
            b.wb.apps().reload_all().await.unwrap(),
            0,
            "nothing changed: nothing rebuilt"
        );
        let id = created["id"].as_str().unwrap();
        assert_eq!(
            a.http()
                .delete(a.url(&format!("/v1/apps/{id}")))
                .bearer_auth(&key)
                .send()
                .await
                .unwrap()
                .status(),
            204
        );
        assert_eq!(b.wb.apps().reload_all().await.unwrap(), 1);
        assert_eq!(found(&b).await, 404);
        assert_eq!(b.wb.apps().reload_all().await.unwrap(), 0);
    }
);

db_test!(a_project_has_at_most_fifty_apps, |backend| {
    let app = app!(backend);
    let (_, key) = admin_with_key(&app).await;
    for i in 0..50 {
        let (status, out) = post_app(
            &app,
            &key,
            &definition(&format!("app{i}"), "https://api.example.com"),
        )
        .await;
        assert_eq!(status, 201, "{out}");
    }
    let (status, out) = post_app(&app, &key, &definition("app50", "https://api.example.com")).await;
    assert_eq!(status, 409);
    assert!(
        out["error"]["message"]
            .as_str()
            .unwrap()
            .contains("already has 50 apps"),
        "{out}"
    );
    let tools: Value = app
        .http()
        .get(app.url("/v1/tools"))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let names: Vec<&str> = tools["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(names.contains(&"app0_echo_message") && names.contains(&"app49_echo_message"));
});

fn oauth_definition(fake: &fake_provider::FakeProvider, secret: Option<&str>) -> Value {
    json!({
        "name": "teamhub",
        "display_name": "Team hub",
        "version": "1.0.0",
        "base_url": fake.url(""),
        "auth": {
            "type": "oauth2",
            "authorize_url": fake.url("/authorize"),
            "token_url": fake.url("/token"),
            "scopes": ["read:user"],
            "client_id": fake_provider::CLIENT_ID,
            "client_secret_vault": secret
        },
        "tools": [{
            "name": "teamhub_whoami",
            "description": "Get the team hub account the user connected.",
            "side_effects": "none",
            "input_schema": { "type": "object", "properties": {} },
            "request": { "method": "GET", "path": "/user" },
            "result": { "fields": ["login", "name"] }
        }]
    })
}

db_test!(
    an_oauth_app_connects_with_its_own_client_and_the_secret_from_the_vault,
    |backend| {
        let app = app!(
            backend,
            Options {
                egress_allow_private: vec!["127.0.0.1"],
                ..Default::default()
            }
        );
        let (admin, key) = admin_with_key(&app).await;
        let fake = fake_provider::start().await;
        app.wb
            .vault()
            .set(
                &admin,
                "TEAMHUB_CLIENT_SECRET",
                fake_provider::CLIENT_SECRET,
            )
            .await
            .unwrap();
        let (status, created) = post_app(
            &app,
            &key,
            &oauth_definition(&fake, Some("TEAMHUB_CLIENT_SECRET")),
        )
        .await;
        assert_eq!(status, 201, "{created}");
        assert_eq!(created["auth_type"], "oauth2");
        let listed: Value = app
            .http()
            .get(app.url("/v1/apps"))
            .bearer_auth(&key)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert!(
            !listed.to_string().contains(fake_provider::CLIENT_SECRET),
            "the secret is only named"
        );

        let (link, _) = mcp_call(&app, &key, "connect", json!({ "integration": "teamhub" })).await;
        assert_eq!(link["authType"], "oauth2");
        let b = app.browser();
        assert!(b
            .sign_in("ada@example.com", PASSWORD)
            .await
            .status()
            .is_success());
        let (authorize, _) =
            crate::connections::oauth_dance(&app, &b, link["url"].as_str().unwrap()).await;
        assert!(
            authorize.contains(&format!("client_id={}", fake_provider::CLIENT_ID))
                && authorize.contains("code_challenge_method=S256")
        );
        let (out, _) = mcp_call(
            &app,
            &key,
            "wait_for_connection",
            json!({ "connectionId": link["connectionId"], "timeoutSec": 2 }),
        )
        .await;
        assert_eq!(
            out["status"], "CONNECTED",
            "the token endpoint accepted the vaulted client secret"
        );
        let out = execute(
            &app,
            &key,
            json!([{ "tool": "teamhub_whoami", "args": {} }]),
        )
        .await;
        assert_eq!(
            out[0]["result"],
            json!({ "login": "octocat", "name": "The Octocat" }),
            "{out:?}"
        );

        // A 401 refreshes once, with the same vaulted secret.
        fake.revoke_all_access_tokens();
        let out = execute(
            &app,
            &key,
            json!([{ "tool": "teamhub_whoami", "args": {} }]),
        )
        .await;
        assert_eq!(out[0]["result"]["login"], "octocat", "{out:?}");
        assert_eq!(
            fake.state
                .refresh_grants
                .load(std::sync::atomic::Ordering::SeqCst),
            1
        );

        // A member cannot swap or delete a secret an app depends on; an admin can.
        let member = app.user("mel@example.com", Role::Member).await;
        let member_key = app.api_key(&member).await;
        for args in [
            json!({ "tool": "vault_set", "args": { "name": "TEAMHUB_CLIENT_SECRET", "value": "attacker-secret" } }),
            json!({ "tool": "vault_delete", "args": { "name": "TEAMHUB_CLIENT_SECRET" } }),
        ] {
            let out = execute(&app, &member_key, json!([args])).await.remove(0);
            assert_eq!(out["code"], "TOOL_ERROR", "{out}");
            assert!(
                out["handler_error"]
                    .as_str()
                    .unwrap()
                    .contains("only an admin"),
                "{out}"
            );
        }
        let b2 = app.browser();
        assert!(b2
            .sign_in("mel@example.com", PASSWORD)
            .await
            .status()
            .is_success());
        assert_eq!(
            b2.call("delete_secret", &[("name", "TEAMHUB_CLIENT_SECRET")])
                .await
                .status(),
            403
        );
        assert!(
            app.wb
                .vault()
                .describe(&admin, "TEAMHUB_CLIENT_SECRET")
                .await
                .is_ok(),
            "still there"
        );
        // Other secrets stay a member's to manage.
        let out = execute(
            &app,
            &member_key,
            json!([{ "tool": "vault_set", "args": { "name": "MY_OWN", "value": "value-123456" } }]),
        )
        .await
        .remove(0);
        assert!(out.get("result").is_some(), "{out}");

        // Without the secret the next refresh fails and the connection says it needs reconnecting.
        app.wb
            .vault()
            .delete(&admin, "TEAMHUB_CLIENT_SECRET")
            .await
            .unwrap();
        fake.revoke_all_access_tokens();
        let out = execute(
            &app,
            &key,
            json!([{ "tool": "teamhub_whoami", "args": {} }]),
        )
        .await;
        assert_eq!(out[0]["code"], "NOT_CONNECTED", "{out:?}");
        assert_eq!(out[0]["integration"], "teamhub");
        assert_eq!(
            fake.state
                .refresh_grants
                .load(std::sync::atomic::Ordering::SeqCst),
            1,
            "no token request without the secret"
        );
    }
);

db_test!(
    an_app_whose_schema_does_not_compile_is_refused_and_nothing_is_stored,
    |backend| {
        let app = app!(backend);
        let (_, key) = admin_with_key(&app).await;
        let mut bad = definition("badschema", "https://echo.example.com");
        bad["tools"][0]["input_schema"]["properties"]["message"]["maximum"] = json!("some text");
        let (status, out) = post_app(&app, &key, &bad).await;
        assert_eq!(status, 400, "{out}");
        assert!(
            out["error"]["message"]
                .as_str()
                .unwrap()
                .contains("badschema_echo_message"),
            "{out}"
        );
        let listed: Value = app
            .http()
            .get(app.url("/v1/apps"))
            .bearer_auth(&key)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(listed["data"], json!([]), "nothing was stored");
        // The project is not stuck: the next app is created as usual.
        let (status, out) = post_app(
            &app,
            &key,
            &definition("teamecho", "https://echo.example.com"),
        )
        .await;
        assert_eq!(status, 201, "{out}");
        assert_eq!(out["load_error"], Value::Null);
    }
);

db_test!(
    a_stored_app_that_fails_to_load_is_skipped_and_shown_never_stopping_start_up,
    |backend| {
        let app = app!(backend);
        let (admin, key) = admin_with_key(&app).await;
        let (status, _) = post_app(
            &app,
            &key,
            &definition("teamecho", "https://echo.example.com"),
        )
        .await;
        assert_eq!(status, 201);
        // What an upgrade that tightens validation could leave behind: a stored definition that no
        // longer loads.
        let mut broken = definition("oldapp", "https://old.example.com");
        broken["tools"][0]["input_schema"]["properties"]["message"]["maximum"] = json!("some text");
        let row = workbench_core::store::apps::AppRow {
            id: "app_stored_before_an_upgrade".into(),
            project_id: admin.project_id.clone(),
            name: "oldapp".into(),
            definition: broken.to_string(),
            created_at: 0,
        };
        workbench_core::store::apps::insert(app.wb.db().pool(), &row)
            .await
            .unwrap();
        // The reload loop and a fresh start both go on.
        app.wb
            .apps()
            .reload_all()
            .await
            .expect("the reload loop survives a broken app");
        let b = app!(
            backend,
            Options {
                database_url: Some(app.database_url.clone()),
                ..Default::default()
            }
        );
        for instance in [&app, &b] {
            let listed: Value = instance
                .http()
                .get(instance.url("/v1/apps"))
                .bearer_auth(&key)
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            let data = listed["data"].as_array().unwrap();
            assert_eq!(data.len(), 2, "{listed}");
            let old = data
                .iter()
                .find(|a| a["id"] == "app_stored_before_an_upgrade")
                .unwrap();
            assert!(
                old["load_error"]
                    .as_str()
                    .unwrap()
                    .contains("invalid input_schema"),
                "{old}"
            );
            let good = data.iter().find(|a| a["name"] == "teamecho").unwrap();
            assert_eq!(good["load_error"], Value::Null);
            let tool = |name: &str| {
                instance
                    .http()
                    .get(instance.url(&format!("/v1/tools/{name}")))
                    .bearer_auth(&key)
                    .send()
            };
            assert_eq!(
                tool("teamecho_echo_message").await.unwrap().status(),
                200,
                "the other apps load"
            );
            assert_eq!(
                tool("oldapp_echo_message").await.unwrap().status(),
                404,
                "the broken app's tools are not offered"
            );
        }
        // Other projects are untouched, and the portal's Apps page says what is wrong.
        let other = app.user_in("grace@example.com", "other", Role::Admin).await;
        assert_ne!(other.project_id, admin.project_id);
        let other_key = app.api_key(&other).await;
        let theirs: Value = app
            .http()
            .get(app.url("/v1/apps"))
            .bearer_auth(&other_key)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(theirs["data"], json!([]));
        let browser = app.browser();
        assert!(browser
            .sign_in("ada@example.com", PASSWORD)
            .await
            .status()
            .is_success());
        let page = browser.get("/apps").await.text().await.unwrap();
        assert!(
            page.contains("Not loaded: ") && page.contains("invalid input_schema"),
            "the Apps page shows the error"
        );
    }
);

db_test!(
    avg_latency_ms_falls_back_to_older_and_shared_measurements_but_never_to_another_projects_tool,
    |backend| {
        let app = app!(
            backend,
            Options {
                egress_allow_private: vec!["127.0.0.1"],
                ..Default::default()
            }
        );
        let (_, key) = admin_with_key(&app).await;
        let fake = fakes::start().await;
        let (status, created) = post_app(&app, &key, &definition("teamecho", &fake.url(""))).await;
        assert_eq!(status, 201, "{created}");
        let eve = app.user_in("eve@example.com", "other", Role::Admin).await;
        let eve_key = app.api_key(&eve).await;
        let (status, created) =
            post_app(&app, &eve_key, &definition("teamecho", &fake.url(""))).await;
        assert_eq!(
            status, 201,
            "the other project's own app of the same name: {created}"
        );

        // Ada's project runs a built-in and its app's tool; then 40 days pass.
        let out = execute(
            &app,
            &key,
            json!([
                { "tool": "storage.put", "args": { "key": "k", "content": "x" } },
                { "tool": "teamecho_echo_message", "args": { "message": "hi" } }
            ]),
        )
        .await;
        assert!(out.iter().all(|o| o.get("result").is_some()), "{out:?}");
        // The usage counters are written by the record writer after the answer.
        app.wb.flush_records().await;
        app.clock.advance_ms(40 * 86_400_000);

        let latency = |key: String, tool: &'static str| {
            let app = &app;
            async move {
                let v: Value = app
                    .http()
                    .get(app.url(&format!("/v1/tools/{tool}")))
                    .bearer_auth(&key)
                    .send()
                    .await
                    .unwrap()
                    .json()
                    .await
                    .unwrap();
                v["avg_latency_ms"].clone()
            }
        };
        assert!(
            latency(key.clone(), "storage.put").await.is_i64(),
            "the project's older calls still measure it"
        );
        assert!(
            latency(key.clone(), "teamecho_echo_message").await.is_i64(),
            "its own app tool too"
        );
        assert!(
            latency(eve_key.clone(), "storage.put").await.is_i64(),
            "a built-in is the same code everywhere: the instance's measurement"
        );
        assert!(
            latency(eve_key.clone(), "teamecho_echo_message")
                .await
                .is_null(),
            "another project's tool of the same name is other code"
        );
        assert!(
            latency(key, "http.fetch").await.is_null(),
            "never measured anywhere"
        );
    }
);

db_test!(
    an_apps_request_carries_the_callers_end_user_and_no_argument_can_pose_as_it,
    |backend| {
        let app = app!(
            backend,
            Options {
                egress_allow_private: vec!["127.0.0.1"],
                ..Default::default()
            }
        );
        let (_, key) = admin_with_key(&app).await;
        let fake = fakes::start().await;
        let mut def = definition("orders", &fake.url(""));
        def["tools"][0]["request"] = json!({
            "method": "POST", "path": "/echo",
            "headers": { "X-End-User": "{workbench.end_user_id}" },
            "body": { "message": "$message", "for": "$workbench.end_user_id" }
        });
        def["tools"][0]["input_schema"]["properties"]["workbench.end_user_id"] =
            json!({ "type": "string" });
        let (status, created) = post_app(&app, &key, &def).await;
        assert_eq!(status, 201, "{created}");

        let invoke = |body: Value| {
            let (app, key) = (&app, &key);
            async move {
                let res = app
                    .http()
                    .post(app.url("/v1/tools/invoke"))
                    .bearer_auth(key)
                    .json(&body)
                    .send()
                    .await
                    .unwrap();
                assert_eq!(res.status(), 200);
            }
        };
        let sent = || {
            let (headers, body) = fake.state.last.lock().unwrap().clone().unwrap();
            let header = headers
                .get("x-end-user")
                .map(|v| v.to_str().unwrap().to_owned());
            (header, serde_json::from_str::<Value>(&body).unwrap())
        };
        invoke(
            json!({ "tool": "orders_echo_message", "end_user_id": "eu_customer_4821",
                       "arguments": { "message": "hi", "workbench.end_user_id": "eu_admin" } }),
        )
        .await;
        assert_eq!(
            sent(),
            (
                Some("eu_customer_4821".to_owned()),
                json!({ "message": "hi", "for": "eu_customer_4821" })
            )
        );
        // No end user: nothing is sent in its place, whatever the arguments say.
        invoke(json!({ "tool": "orders_echo_message",
                       "arguments": { "message": "hi", "workbench.end_user_id": "eu_admin" } }))
        .await;
        assert_eq!(sent(), (None, json!({ "message": "hi" })));
    }
);
