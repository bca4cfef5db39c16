//! The REST tool API of seed 004: catalog, invoke, calls, errors, /rest batch, usage, OpenAPI.

use serde_json::{json, Value};
use workbench_core::auth::Role;

use crate::fakes;
use crate::helpers::{admin_with_key, Options};
use crate::{app, db_test};

async fn invoke(app: &crate::helpers::TestApp, key: &str, body: Value) -> (u16, Value) {
    let res = app
        .http()
        .post(app.url("/v1/tools/invoke"))
        .bearer_auth(key)
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = res.status().as_u16();
    (status, res.json().await.unwrap())
}

db_test!(the_catalog_lists_tools_with_seed_fields, |backend| {
    let app = app!(backend);
    let (_, key) = admin_with_key(&app).await;
    let res = app
        .http()
        .get(app.url("/v1/tools"))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["object"], "list");
    let data = body["data"].as_array().unwrap();
    let fetch = data.iter().find(|t| t["name"] == "http.fetch").unwrap();
    assert_eq!(fetch["source"], "builtin");
    assert_eq!(fetch["side_effects"], "network");
    assert_eq!(
        fetch["description"],
        "Perform an HTTP request to an allowlisted destination."
    );
    assert_eq!(
        fetch["input_schema"],
        json!({
            "type": "object", "required": ["url"],
            "properties": {
                "url": { "type": "string", "format": "uri" },
                "method": { "type": "string", "enum": ["GET","POST","PUT","PATCH","DELETE"], "default": "GET" },
                "headers": { "type": "object" },
                "body": { "type": "string" }
            }
        })
    );
    assert_eq!(
        fetch["output_schema"]["properties"]["status"]["type"],
        "integer"
    );
    let get = data.iter().find(|t| t["name"] == "storage.get").unwrap();
    assert_eq!(get["side_effects"], "none");
    assert_eq!(get["status"], "available");
    let put = data.iter().find(|t| t["name"] == "storage.put").unwrap();
    assert_eq!(put["side_effects"], "write");

    let one: Value = app
        .http()
        .get(app.url("/v1/tools/storage.get"))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(one["name"], "storage.get");
    let res = app
        .http()
        .get(app.url("/v1/tools/nope"))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 404);
    assert_eq!(
        res.json::<Value>().await.unwrap()["error"]["code"],
        "tool_not_found"
    );
});

db_test!(invoke_returns_a_tool_call_and_measures_latency, |backend| {
    let app = app!(backend);
    let (_, key) = admin_with_key(&app).await;
    let (status, body) = invoke(&app, &key, json!({ "tool": "storage.put", "arguments": { "key": "k", "content": "v" }, "end_user_id": "eu_42" })).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["object"], "tool_call");
    assert_eq!(body["status"], "succeeded");
    assert_eq!(body["tool"], "storage.put");
    assert!(body["id"].as_str().unwrap().starts_with("tcall_"));
    assert_eq!(body["result"]["size"], 1);
    assert_eq!(body["usage"]["tool_call"], 1);
    assert_eq!(body["usage"]["tool_call_ms"], body["duration_ms"]);

    let id = body["id"].as_str().unwrap();
    let call: Value = app
        .http()
        .get(app.url(&format!("/v1/tools/calls/{id}")))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(call["id"], id);
    assert_eq!(call["status"], "succeeded");
    assert_eq!(call["end_user_id"], "eu_42");
    assert_eq!(call["result"]["size"], 1);

    // The usage counters behind the latency are written by the record writer after the answer.
    app.wb.flush_records().await;
    let tools: Value = app
        .http()
        .get(app.url("/v1/tools/storage.put"))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(
        tools["avg_latency_ms"].is_i64(),
        "latency is measured once the tool ran: {tools}"
    );
    let never: Value = app
        .http()
        .get(app.url("/v1/tools/http.fetch"))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(never["avg_latency_ms"].is_null());
});

db_test!(invoke_maps_failures_to_seed_errors, |backend| {
    let app = app!(
        backend,
        Options {
            egress_allow_private: vec!["127.0.0.1"],
            ..Default::default()
        }
    );
    let (admin, key) = admin_with_key(&app).await;
    let (status, body) = invoke(&app, &key, json!({ "tool": "nope" })).await;
    assert_eq!(
        (status, body["error"]["code"].as_str().unwrap()),
        (404, "tool_not_found")
    );
    let (status, body) = invoke(
        &app,
        &key,
        json!({ "tool": "storage.put", "arguments": { "key": "k" } }),
    )
    .await;
    assert_eq!(
        (status, body["error"]["code"].as_str().unwrap()),
        (422, "tool_invalid_arguments")
    );
    assert_eq!(body["error"]["meta"]["errors"][0]["path"], "/content");
    let call_id = body["error"]["meta"]["tool_call_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let call: Value = app
        .http()
        .get(app.url(&format!("/v1/tools/calls/{call_id}")))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(call["status"], "failed");
    assert_eq!(call["error"]["code"], "INVALID_ARGUMENTS");
    let (status, body) = invoke(
        &app,
        &key,
        json!({ "tool": "storage.get", "arguments": { "key": "missing" } }),
    )
    .await;
    assert_eq!(
        (status, body["error"]["code"].as_str().unwrap()),
        (502, "tool_error")
    );
    assert!(body["error"]["meta"]["handler_error"]
        .as_str()
        .unwrap()
        .contains("no object"));

    let fake = fakes::start().await;
    app.wb
        .egress()
        .add(&admin, &format!("127.0.0.1:{}", fake.addr.port()))
        .await
        .unwrap();
    let (status, body) = invoke(&app, &key, json!({ "tool": "http.fetch", "arguments": { "url": fake.url("/delay?ms=3000") }, "timeout_ms": 100 })).await;
    assert_eq!(
        (status, body["error"]["code"].as_str().unwrap()),
        (504, "tool_timeout")
    );
    assert_eq!(body["error"]["meta"]["timeout_ms"], 100);
});

db_test!(
    invoke_refuses_malformed_bodies_with_the_error_shape,
    |backend| {
        let app = app!(backend);
        let (_, key) = admin_with_key(&app).await;
        for body in [
            json!({}),
            json!({ "tool": 5 }),
            json!({ "tool": "storage.get", "arguments": [] }),
            json!({ "tool": "storage.get", "timeout_ms": 300001 }),
            json!({ "tool": "storage.get", "timeout_ms": 0 }),
            json!({ "tool": "storage.get", "end_user_id": "" }),
            json!({ "tool": "storage.get", "surprise": 1 }),
            json!([1, 2]),
        ] {
            let (status, out) = invoke(&app, &key, body.clone()).await;
            assert_eq!(status, 400, "{body}");
            assert_eq!(out["error"]["code"], "bad_request", "{body}");
        }
        let res = app
            .http()
            .post(app.url("/v1/tools/invoke"))
            .bearer_auth(&key)
            .header("content-type", "application/json")
            .body("{oops")
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 400);
        assert!(res.json::<Value>().await.unwrap()["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("malformed JSON"));
        let huge = "x".repeat(5 * 1024 * 1024);
        let res = app
            .http()
            .post(app.url("/v1/tools/invoke"))
            .bearer_auth(&key)
            .header("content-type", "application/json")
            .body(huge)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 413);
        assert_eq!(
            res.json::<Value>().await.unwrap()["error"]["code"],
            "payload_too_large"
        );
    }
);

db_test!(calls_of_another_project_are_not_found, |backend| {
    let app = app!(backend);
    let (_, key) = admin_with_key(&app).await;
    let (_, body) = invoke(
        &app,
        &key,
        json!({ "tool": "storage.put", "arguments": { "key": "k", "content": "v" } }),
    )
    .await;
    let id = body["id"].as_str().unwrap();
    let eve = app.user_in("eve@example.com", "other", Role::Admin).await;
    let eve_key = app.api_key(&eve).await;
    let res = app
        .http()
        .get(app.url(&format!("/v1/tools/calls/{id}")))
        .bearer_auth(&eve_key)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 404);
});

db_test!(
    a_member_reads_only_their_own_calls_and_an_admin_reads_every_call,
    |backend| {
        let app = app!(backend);
        let (_, admin_key) = admin_with_key(&app).await;
        let bob = app.user("bob@example.com", Role::Member).await;
        let bob_key = app.api_key(&bob).await;
        let carol = app.user("carol@example.com", Role::Member).await;
        let carol_key = app.api_key(&carol).await;
        let (_, body) = invoke(&app, &bob_key, json!({ "tool": "storage.put", "arguments": { "key": "bobs", "content": "private notes" } })).await;
        let id = body["id"].as_str().unwrap();
        let get = |key: String| {
            app.http()
                .get(app.url(&format!("/v1/tools/calls/{id}")))
                .bearer_auth(key)
                .send()
        };
        assert_eq!(
            get(bob_key.clone()).await.unwrap().status(),
            200,
            "one's own call"
        );
        let res = get(carol_key.clone()).await.unwrap();
        assert_eq!(res.status(), 404, "another member's call is not found");
        assert!(!res.text().await.unwrap().contains("private"));
        assert_eq!(
            get(admin_key.clone()).await.unwrap().status(),
            200,
            "an admin sees every call of the project"
        );
    }
);

db_test!(
    rest_batch_runs_one_integrations_tools_and_refuses_compose,
    |backend| {
        let app = app!(backend);
        let (_, key) = admin_with_key(&app).await;
        let post = |path: &'static str, body: Value| {
            let req = app.http().post(app.url(path)).bearer_auth(&key).json(&body);
            async move {
                let res = req.send().await.unwrap();
                (res.status().as_u16(), res.json::<Value>().await.unwrap())
            }
        };
        let (status, out) = post(
            "/rest/storage",
            json!({ "executions": [
            { "tool": "storage.put", "args": { "key": "r", "content": "rest" } },
            { "tool": "http.fetch", "args": { "url": "https://example.org" } },
            { "tool": "storage.get", "args": { "key": "r" } }
        ] }),
        )
        .await;
        assert_eq!(status, 200, "{out}");
        let results = out["results"].as_array().unwrap();
        assert_eq!(results[0]["result"]["key"], "r");
        assert_eq!(results[1]["code"], "TOOL_NOT_FOUND");
        assert!(results[1]["error"]
            .as_str()
            .unwrap()
            .contains("integration storage"));
        assert!(results[2]["result"].is_object() || results[2]["code"].is_string());
        for body in [
            json!({ "compose": true, "executions": [{ "tool": "storage.get", "args": { "key": "r" }, "ref_id": "a" }] }),
            json!({ "executions": [{ "tool": "storage.get", "args": { "key": "r" }, "ref_id": "a" }], "return": "{{step:a.content}}" }),
            json!({ "executions": [] }),
        ] {
            let (status, out) = post("/rest/storage", body.clone()).await;
            assert_eq!(status, 400, "{body}");
            assert_eq!(out["error"]["code"], "bad_request");
        }
    }
);

db_test!(usage_reports_meters_per_day_key_and_tool, |backend| {
    let app = app!(backend);
    let (_, key) = admin_with_key(&app).await;
    for _ in 0..3 {
        invoke(
            &app,
            &key,
            json!({ "tool": "storage.put", "arguments": { "key": "k", "content": "v" } }),
        )
        .await;
    }
    let body: Value = app
        .http()
        .get(app.url("/v1/usage?from=2000-01-01&to=2999-12-31"))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let rows = body["data"].as_array().unwrap();
    let calls = rows
        .iter()
        .find(|r| r["meter"] == "tool_call" && r["tool"] == "storage.put")
        .unwrap();
    assert_eq!(calls["value"], 3);
    assert!(calls["api_key_id"].as_str().unwrap().starts_with("key_"));
    let res = app
        .http()
        .get(app.url("/v1/usage?from=yesterday"))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 400);
    let res = app
        .http()
        .get(app.url("/v1/usage?group_by=week"))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 400);
});

db_test!(
    usage_sums_by_day_tool_key_and_integration_with_egress_in_gb,
    |backend| {
        let app = app!(
            backend,
            crate::helpers::Options {
                egress_allow_private: vec!["127.0.0.1"],
                ..Default::default()
            }
        );
        let (admin, key) = admin_with_key(&app).await;
        let fake = crate::fakes::start().await;
        app.wb
            .egress()
            .add(&admin, &format!("127.0.0.1:{}", fake.addr.port()))
            .await
            .unwrap();
        for _ in 0..2 {
            invoke(
                &app,
                &key,
                json!({ "tool": "storage.put", "arguments": { "key": "k", "content": "v" } }),
            )
            .await;
        }
        invoke(
            &app,
            &key,
            json!({ "tool": "storage.get", "arguments": { "key": "k" } }),
        )
        .await;
        invoke(
            &app,
            &key,
            json!({ "tool": "http.fetch", "arguments": { "url": fake.url("/delay?ms=0") } }),
        )
        .await;
        invoke(
            &app,
            &key,
            json!({ "tool": "made_up_tool", "arguments": {} }),
        )
        .await;
        let get = |q: &'static str| {
            let req = app
                .http()
                .get(app.url(&format!(
                    "/v1/usage?from=2000-01-01&to=2999-12-31&group_by={q}"
                )))
                .bearer_auth(&key);
            async move { req.send().await.unwrap().json::<Value>().await.unwrap() }
        };
        let by_tool = get("tool").await;
        assert_eq!(by_tool["group_by"], "tool");
        let tool = |name: &str| {
            by_tool["data"]
                .as_array()
                .unwrap()
                .iter()
                .find(|r| r["tool"] == name)
                .cloned()
                .unwrap_or(Value::Null)
        };
        assert_eq!(tool("storage.put")["tool_call"], 2);
        assert_eq!(tool("storage.get")["tool_call"], 1);
        assert_eq!(tool("(unknown tool)")["tool_call"], 1, "{by_tool}");
        let fetch = tool("http.fetch");
        assert!(fetch["egress_bytes"].as_i64().unwrap() > 0, "{fetch}");
        assert_eq!(
            fetch["egress_gb"].as_f64().unwrap(),
            fetch["egress_bytes"].as_f64().unwrap() / 1e9
        );
        let by_integration = get("integration").await;
        let storage = by_integration["data"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["integration"] == "storage")
            .unwrap();
        assert_eq!(storage["tool_call"], 3, "{by_integration}");
        let by_key = get("key").await;
        assert_eq!(by_key["data"].as_array().unwrap().len(), 1);
        assert!(by_key["data"][0]["key"]
            .as_str()
            .unwrap()
            .starts_with("key_"));
        assert_eq!(by_key["data"][0]["tool_call"], 5);
        let by_day = get("day").await;
        assert_eq!(by_day["data"][0]["tool_call"], 5);
        // Ungrouped, egress is the seed's meter egress_gb with the bytes beside it.
        let raw: Value = app
            .http()
            .get(app.url("/v1/usage?from=2000-01-01&to=2999-12-31"))
            .bearer_auth(&key)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let egress = raw["data"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["meter"] == "egress_gb")
            .unwrap();
        assert!(
            egress["egress_bytes"].as_i64().unwrap() > 0 && egress["value"].as_f64().unwrap() > 0.0,
            "{egress}"
        );
    }
);

db_test!(the_openapi_document_describes_every_route, |backend| {
    let app = app!(backend);
    let (_, key) = admin_with_key(&app).await;
    let doc: Value = app
        .http()
        .get(app.url("/v1/openapi.json"))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(doc["openapi"], "3.1.0");
    // Every REST route the router mounts (the route table, not a hand list) is documented, with
    // its method.
    let table = workbench_server::route_table(app.state());
    let mut documented = 0;
    for route in table
        .iter()
        .filter(|r| r.path.starts_with("/v1/") || r.path.starts_with("/rest/"))
    {
        if route.path.contains("{*rest}") || route.path == "/v1/openapi.json" {
            continue;
        }
        let method = route.method.to_ascii_lowercase();
        assert!(
            doc["paths"][route.path][method.as_str()].is_object(),
            "{} {} is not in the OpenAPI document",
            route.method,
            route.path
        );
        documented += 1;
    }
    assert!(documented >= 45, "{documented} routes checked");
    // And nothing is documented that the router does not mount.
    for (path, ops) in doc["paths"].as_object().unwrap() {
        for method in ops.as_object().unwrap().keys() {
            assert!(
                table
                    .iter()
                    .any(|r| r.path == path && r.method.eq_ignore_ascii_case(method)),
                "{method} {path} is documented but not in the route table"
            );
        }
    }
    assert_eq!(
        doc["paths"]["/v1/tools/invoke"]["post"]["requestBody"]["content"]["application/json"]
            ["schema"]["properties"]["timeout_ms"]["maximum"],
        300000
    );
});

db_test!(
    the_rest_tool_list_declares_storage_get_and_vector_query_read_only_per_d26,
    |backend| {
        // Seed 004's built-in table lists these four as `write`; D26 declares what each does.
        let app = app!(backend);
        let (_, key) = admin_with_key(&app).await;
        let body: Value = app
            .http()
            .get(app.url("/v1/tools"))
            .bearer_auth(&key)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let declared = |name: &str| {
            body["data"]
                .as_array()
                .unwrap()
                .iter()
                .find(|t| t["name"] == name)
                .unwrap_or_else(|| panic!("{name} is not listed"))["side_effects"]
                .clone()
        };
        for (tool, side_effects) in [
            ("storage.get", "none"),
            ("vector.query", "none"),
            ("storage.put", "write"),
            ("vector.upsert", "write"),
        ] {
            assert_eq!(declared(tool), side_effects, "{tool}");
        }
    }
);
