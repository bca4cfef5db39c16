//! /mcp: authentication, origin and host checks, tools/list, and the meta-tools search_tools,
//! get_tool_schema and whoami.

use serde_json::{json, Value};

use crate::helpers::{admin_with_key, mcp_call, mcp_request};
use crate::{app, db_test};

db_test!(mcp_requires_a_valid_bearer_key, |backend| {
    let app = app!(backend);
    let res = mcp_request(
        &app,
        "wb_0123456789012345678901234567890123456789",
        "tools/list",
        json!({}),
    )
    .await;
    assert_eq!(res.status(), 401);
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["error"]["code"], "unauthorized");
    let res = app
        .http()
        .post(app.url("/mcp"))
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 401);
});

db_test!(mcp_refuses_a_foreign_origin_and_host, |backend| {
    let app = app!(backend);
    let (_, key) = admin_with_key(&app).await;
    let body = json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {} });
    let send = |origin: Option<&'static str>, host: Option<&'static str>| {
        let mut req = app
            .http()
            .post(app.url("/mcp"))
            .bearer_auth(&key)
            .header("accept", "application/json, text/event-stream")
            .json(&body);
        if let Some(o) = origin {
            req = req.header("origin", o);
        }
        if let Some(h) = host {
            req = req.header("host", h);
        }
        req.send()
    };
    assert_eq!(
        send(Some("https://evil.example"), None)
            .await
            .unwrap()
            .status(),
        403
    );
    assert_eq!(
        send(None, Some("evil.example")).await.unwrap().status(),
        403
    );
    assert_eq!(
        send(Some("http://127.0.0.1:1234"), None)
            .await
            .unwrap()
            .status(),
        200
    );
    assert_eq!(send(None, None).await.unwrap().status(), 200);
});

db_test!(
    tools_list_is_exactly_the_meta_tools_with_their_schemas,
    |backend| {
        let app = app!(backend);
        let (_, key) = admin_with_key(&app).await;
        let res = mcp_request(&app, &key, "tools/list", json!({})).await;
        assert_eq!(res.status(), 200);
        let body: Value = res.json().await.unwrap();
        let tools = body["result"]["tools"].as_array().unwrap();
        let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
        assert_eq!(
            names,
            [
                "search_tools",
                "get_tool_schema",
                "execute_tools",
                "whoami",
                "list_integrations",
                "connect",
                "wait_for_connection",
                "get_auth_url",
                "curl_session"
            ]
        );
        let search = &tools[0];
        assert!(search["description"]
            .as_str()
            .unwrap()
            .starts_with("Search available tools by what you want to do"));
        assert_eq!(search["inputSchema"]["required"], json!(["query"]));
        assert_eq!(search["inputSchema"]["properties"]["limit"]["maximum"], 50);
        assert_eq!(
            tools[1]["description"],
            "Get input schema for a specific tool"
        );
        assert!(tools[2]["description"]
            .as_str()
            .unwrap()
            .contains("returns a results array in the same order as executions"));
        assert_eq!(
            tools[2]["inputSchema"]["properties"]["executions"]["maxItems"],
            50
        );
        assert!(tools[3]["description"]
            .as_str()
            .unwrap()
            .starts_with("Return the current authenticated workbench user (id + email)"));
        assert_eq!(
            tools[4]["description"],
            "List all available integrations and connection status"
        );
        assert!(tools[5]["description"]
            .as_str()
            .unwrap()
            .ends_with("Call wait_for_connection afterward."));
        assert_eq!(tools[6]["description"], "Block until a connection started by connect() completes. Returns status CONNECTED, TIMEOUT, or EXPIRED.");
        assert_eq!(
            tools[7]["description"],
            "Deprecated alias of connect(). Get a URL to connect an integration."
        );
        let curl = tools[8]["description"].as_str().unwrap();
        assert!(curl.starts_with("HIGH RISK — do not call without explicit user approval."));
        assert!(curl.ends_with("Only integrations that have curl proxy enabled are accepted."));
        assert_eq!(
            tools[8]["inputSchema"]["properties"]["expiresInSeconds"]["maximum"],
            3600
        );
        // Built-in tools never appear in tools/list.
        assert!(!names.contains(&"storage.get"));
    }
);

db_test!(
    search_tools_says_when_no_tool_fits_and_still_lists_the_nearest,
    |backend| {
        let app = app!(backend);
        let (_, key) = admin_with_key(&app).await;
        let (out, is_error) = mcp_call(
            &app,
            &key,
            "search_tools",
            json!({ "query": "book a flight to Lisbon for next Tuesday" }),
        )
        .await;
        assert!(!is_error);
        assert_eq!(out["no_match"], true, "{out}");
        assert!(
            out["hint"].as_str().unwrap().contains("ask an admin"),
            "{out}"
        );
        let tools = out["tools"].as_array().unwrap();
        assert!(
            tools.iter().all(|t| t["score"].as_f64().unwrap() < 0.46),
            "{out}"
        );

        let (out, _) = mcp_call(
            &app,
            &key,
            "search_tools",
            json!({ "query": "create jira issue" }),
        )
        .await;
        assert_eq!(out["no_match"], false, "{out}");
        assert!(out.get("hint").is_none(), "{out}");
        assert!(out["tools"][0]["score"].as_f64().unwrap() >= 0.46, "{out}");
    }
);

db_test!(search_tools_ranks_matching_tools_with_scores, |backend| {
    let app = app!(backend);
    let (_, key) = admin_with_key(&app).await;
    let (out, is_error) = mcp_call(
        &app,
        &key,
        "search_tools",
        json!({ "query": "read an object from storage by its key" }),
    )
    .await;
    assert!(!is_error);
    let tools = out["tools"].as_array().unwrap();
    assert_eq!(tools[0]["name"], "storage.get");
    assert_eq!(tools[0]["integration"], "storage");
    assert!(tools[0]["description"].as_str().unwrap().len() > 10);
    let scores: Vec<f64> = tools.iter().map(|t| t["score"].as_f64().unwrap()).collect();
    assert!(scores.windows(2).all(|w| w[0] >= w[1]), "{scores:?}");
    assert!(scores.iter().all(|s| *s > 0.0 && *s <= 1.0));

    let (out, _) = mcp_call(
        &app,
        &key,
        "search_tools",
        json!({ "query": "fetch http url", "limit": 1 }),
    )
    .await;
    assert_eq!(out["tools"].as_array().unwrap().len(), 1);
    assert_eq!(out["tools"][0]["name"], "http.fetch");
    let (out, _) = mcp_call(
        &app,
        &key,
        "search_tools",
        json!({ "query": "stroage put" }),
    )
    .await;
    assert_eq!(
        out["tools"][0]["name"], "storage.put",
        "typos are tolerated"
    );
});

db_test!(
    search_tools_refuses_bad_limits_and_empty_queries,
    |backend| {
        let app = app!(backend);
        let (_, key) = admin_with_key(&app).await;
        for args in [
            json!({ "query": "x", "limit": 51 }),
            json!({ "query": "x", "limit": 0 }),
            json!({ "query": "x", "limit": "ten" }),
        ] {
            let (out, is_error) = mcp_call(&app, &key, "search_tools", args.clone()).await;
            assert!(is_error, "{args}");
            assert!(
                out["error"].as_str().unwrap().contains("limit must be"),
                "{out}"
            );
            assert_eq!(out["code"], "INVALID_ARGUMENTS");
        }
        let (out, is_error) = mcp_call(&app, &key, "search_tools", json!({ "query": "   " })).await;
        assert!(is_error);
        assert!(out["error"].as_str().unwrap().contains("query is empty"));
        let (out, _) = mcp_call(&app, &key, "search_tools", json!({})).await;
        assert!(out["error"]
            .as_str()
            .unwrap()
            .contains("query must be a string"));
    }
);

db_test!(
    get_tool_schema_returns_the_schema_or_tool_not_found,
    |backend| {
        let app = app!(backend);
        let (_, key) = admin_with_key(&app).await;
        let (out, is_error) = mcp_call(
            &app,
            &key,
            "get_tool_schema",
            json!({ "tool": "http.fetch" }),
        )
        .await;
        assert!(!is_error);
        assert_eq!(out["schema"]["required"], json!(["url"]));
        assert_eq!(out["schema"]["properties"]["method"]["default"], "GET");
        let (out, is_error) = mcp_call(
            &app,
            &key,
            "get_tool_schema",
            json!({ "tool": "nope_nothing" }),
        )
        .await;
        assert!(is_error);
        assert_eq!(out, json!({ "error": "Tool not found" }));
    }
);

db_test!(whoami_names_the_user_behind_the_key, |backend| {
    let app = app!(backend);
    let (ada, key) = admin_with_key(&app).await;
    let (out, is_error) = mcp_call(&app, &key, "whoami", json!({})).await;
    assert!(!is_error);
    assert_eq!(
        out,
        json!({ "id": ada.user_id, "email": "ada@example.com" })
    );
});

db_test!(
    unknown_meta_tools_and_malformed_requests_get_clear_errors,
    |backend| {
        let app = app!(backend);
        let (_, key) = admin_with_key(&app).await;
        let (out, is_error) = mcp_call(&app, &key, "storage.get", json!({ "key": "x" })).await;
        assert!(is_error);
        assert!(out["error"]
            .as_str()
            .unwrap()
            .contains("unknown tool storage.get"));
        let res = app
            .http()
            .post(app.url("/mcp"))
            .bearer_auth(&key)
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .body("{not json")
            .send()
            .await
            .unwrap();
        assert!(res.status().is_client_error(), "{}", res.status());
    }
);

db_test!(
    the_fast_path_answers_tools_call_exactly_as_rmcp_does,
    |backend| {
        let app = app!(backend);
        let (_, key) = admin_with_key(&app).await;
        // A request with an Origin header always goes through rmcp; without one, a plain
        // tools/call is answered by the fast path. Both must say the same, byte for byte in JSON.
        let origin = app.base.clone();
        let send = |body: Value, origin: Option<String>, version: Option<&'static str>| {
            let mut req = app
                .http()
                .post(app.url("/mcp"))
                .bearer_auth(&key)
                .header("accept", "application/json, text/event-stream")
                .json(&body);
            if let Some(o) = origin {
                req = req.header("origin", o);
            }
            if let Some(v) = version {
                req = req.header("mcp-protocol-version", v);
            }
            async move {
                let res = req.send().await.unwrap();
                let status = res.status().as_u16();
                let ct = res
                    .headers()
                    .get("content-type")
                    .map(|v| v.to_str().unwrap().to_owned());
                (status, ct, res.json::<Value>().await.unwrap())
            }
        };
        let call = |id: Value, name: &str, args: Value| json!({ "jsonrpc": "2.0", "id": id, "method": "tools/call", "params": { "name": name, "arguments": args } });
        let cases = [
            (
                call(
                    json!(1),
                    "search_tools",
                    json!({ "query": "fetch a url", "limit": 3 }),
                ),
                None,
            ),
            (
                call(json!("req-a"), "whoami", json!({})),
                Some("2025-06-18"),
            ),
            (
                call(
                    json!(7),
                    "execute_tools",
                    json!({ "executions": [{ "tool": "storage.get", "args": { "key": "missing.txt" } }] }),
                ),
                Some("2025-03-26"),
            ),
            (
                call(
                    json!(8),
                    "execute_tools",
                    json!({ "executions": [{ "tool": "storage.get", "args": { "key": 5 } }] }),
                ),
                None,
            ),
            (
                call(json!(9), "get_tool_schema", json!({ "tool": "nope.tool" })),
                Some("2025-11-25"),
            ),
            (call(json!(10), "no_such_meta_tool", json!({})), None),
        ];
        for (body, version) in cases {
            let before = workbench_server::mcp::fast_path_answered();
            let fast = send(body.clone(), None, version).await;
            assert!(
                workbench_server::mcp::fast_path_answered() > before,
                "{body} was not answered by the fast path"
            );
            let slow = send(body.clone(), Some(origin.clone()), version).await;
            assert_eq!(fast, slow, "{body}");
            assert_eq!(fast.0, 200);
            assert_eq!(fast.1.as_deref(), Some("application/json"));
        }
        // What the fast path does not take, rmcp still answers (and refuses) as before.
        let (status, _, list) = send(
            json!({ "jsonrpc": "2.0", "id": 2, "method": "tools/list" }),
            None,
            None,
        )
        .await;
        assert_eq!(status, 200);
        assert_eq!(list["result"]["tools"].as_array().unwrap().len(), 9);
        let res = app
            .http()
            .post(app.url("/mcp"))
            .bearer_auth(&key)
            .header("accept", "application/json")
            .json(&call(json!(3), "whoami", json!({})))
            .send()
            .await
            .unwrap();
        assert_eq!(
            res.status(),
            406,
            "an Accept without text/event-stream is refused, as rmcp refuses it"
        );
    }
);

db_test!(
    a_refusal_sent_before_the_body_arrived_closes_the_connection_and_says_so,
    |backend| {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let app = app!(backend);
        let (_, key) = admin_with_key(&app).await;
        let addr = app
            .url("")
            .trim_start_matches("http://")
            .trim_end_matches('/')
            .to_owned();
        // Headers announcing a body that has not been sent: the 401 goes out first, and the
        // connection cannot be reused, so the response must say so (a pooling client would
        // otherwise send its next request into a closing socket).
        let mut tcp = tokio::net::TcpStream::connect(&addr).await.unwrap();
        let head = format!("POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: 64\r\n\r\n");
        tcp.write_all(head.as_bytes()).await.unwrap();
        let mut got = Vec::new();
        let read_all = async {
            let mut buf = [0u8; 4096];
            loop {
                let n = tcp.read(&mut buf).await.unwrap();
                if n == 0 {
                    break;
                }
                got.extend_from_slice(&buf[..n]);
            }
        };
        tokio::time::timeout(std::time::Duration::from_secs(30), read_all)
            .await
            .expect("the server closes the connection after answering");
        let text = String::from_utf8_lossy(&got).to_ascii_lowercase();
        assert!(text.starts_with("http/1.1 401"), "{text}");
        assert!(
            text.contains("\r\nconnection: close\r\n"),
            "the refusal says the connection closes: {text}"
        );

        // A request whose body was read keeps its connection.
        let res = mcp_request(&app, &key, "tools/list", json!({})).await;
        assert_eq!(res.status(), 200);
        assert_eq!(
            res.headers().get("connection"),
            None,
            "a served request keeps the connection open"
        );
    }
);
