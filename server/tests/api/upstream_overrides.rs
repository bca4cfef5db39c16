//! Overrides on upstream tools (issue 33): an admin renames and re-describes a tool of an MCP
//! server project-wide; agents, REST, search and tool sets see the override, the upstream is
//! still called by its own name, and the review keeps comparing the upstream's own text.

use serde_json::{json, Value};
use workbench_core::auth::Role;

use crate::db_test;
use crate::helpers::{execute, mcp_call};
use crate::policies::send;

async fn patch(
    app: &crate::helpers::TestApp,
    key: &str,
    id: &str,
    tool: &str,
    body: Value,
) -> (u16, Value) {
    send(
        app,
        key,
        reqwest::Method::PATCH,
        &format!("/v1/mcp/servers/{id}/tools/{tool}"),
        Some(body),
    )
    .await
}

db_test!(
    a_renamed_and_redescribed_upstream_tool_is_what_agents_see_and_still_runs,
    |backend| {
        let Some((app, key, up, server)) = crate::upstream::registered(backend).await else {
            return;
        };
        let id = server["id"].as_str().unwrap().to_owned();
        let (status, view) = patch(
            &app,
            &key,
            &id,
            "add",
            json!({ "name": "sum", "description": "Add two integers for the billing team." }),
        )
        .await;
        assert_eq!(status, 200, "{view}");
        assert_eq!(view["catalog_name"], "fake.sum");
        assert_eq!(view["name_override"], "sum");
        assert_eq!(
            view["description"], "Add two numbers.",
            "the upstream's own text stays"
        );
        assert_eq!(
            view["description_override"],
            "Add two integers for the billing team."
        );

        // REST and MCP show the new name and description; the old name is gone.
        let (status, tool) =
            send(&app, &key, reqwest::Method::GET, "/v1/tools/fake.sum", None).await;
        assert_eq!(status, 200, "{tool}");
        assert_eq!(
            tool["description"],
            "Add two integers for the billing team."
        );
        let (status, _) = send(&app, &key, reqwest::Method::GET, "/v1/tools/fake.add", None).await;
        assert_eq!(status, 404);
        let (found, _) = mcp_call(
            &app,
            &key,
            "search_tools",
            json!({ "query": "billing team integers" }),
        )
        .await;
        assert_eq!(found["tools"][0]["name"], "fake.sum", "{found}");
        // It runs, and the upstream is asked for its own tool.
        let out = execute(
            &app,
            &key,
            json!([{ "tool": "fake.sum", "args": { "a": 1, "b": 2 } }]),
        )
        .await;
        assert_eq!(out[0]["result"], json!({ "sum": 3 }), "{out:?}");
        // The portal's and REST's approve take the new catalog name too; a tool set can list it.
        let (status, set) = send(
            &app,
            &key,
            reqwest::Method::POST,
            "/v1/tool-sets",
            Some(
                json!({ "slug": "billing", "name": "Billing", "tools": [{ "tool": "fake.sum" }] }),
            ),
        )
        .await;
        assert_eq!(status, 201, "{set}");

        // The upstream changes the tool: held for review on its own text, under the admin's
        // name and description; approving by the catalog name brings it back.
        up.set_tool("add", "Add two numbers, and tell everyone.", json!({ "type": "object", "properties": { "a": { "type": "integer" }, "b": { "type": "integer" } } }), false);
        let (status, refreshed) = send(
            &app,
            &key,
            reqwest::Method::POST,
            &format!("/v1/mcp/servers/{id}/refresh"),
            Some(json!({})),
        )
        .await;
        assert_eq!(status, 200, "{refreshed}");
        let (_, tools) = send(
            &app,
            &key,
            reqwest::Method::GET,
            &format!("/v1/mcp/servers/{id}/tools"),
            None,
        )
        .await;
        let add = tools["data"]
            .as_array()
            .or(tools.as_array())
            .unwrap()
            .iter()
            .find(|t| t["name"] == "add")
            .unwrap_or_else(|| panic!("{tools}"))
            .clone();
        assert_eq!(add["status"], "pending_review", "{add}");
        assert_eq!(add["approved_description"], "Add two numbers.", "{add}");
        assert_eq!(add["description"], "Add two numbers, and tell everyone.");
        let (_, tool) = send(&app, &key, reqwest::Method::GET, "/v1/tools/fake.sum", None).await;
        assert_eq!(
            tool["description"], "Add two integers for the billing team.",
            "{tool}"
        );
        assert_eq!(tool["status"], "unavailable", "{tool}");
        let (status, out) = send(
            &app,
            &key,
            reqwest::Method::POST,
            &format!("/v1/mcp/servers/{id}/approve"),
            Some(json!({ "tools": ["fake.sum"] })),
        )
        .await;
        assert_eq!(status, 200, "{out}");
        let out = execute(
            &app,
            &key,
            json!([{ "tool": "fake.sum", "args": { "a": 2, "b": 2 } }]),
        )
        .await;
        assert_eq!(out[0]["result"], json!({ "sum": 4 }), "{out:?}");

        // null goes back to the upstream's name and description.
        let (status, view) = patch(
            &app,
            &key,
            &id,
            "fake.sum",
            json!({ "name": null, "description": null }),
        )
        .await;
        assert_eq!(status, 200, "{view}");
        assert_eq!(view["catalog_name"], "fake.add");
        assert!(view.get("name_override").is_none(), "{view}");
        let (status, _) = send(&app, &key, reqwest::Method::GET, "/v1/tools/fake.add", None).await;
        assert_eq!(status, 200);
        let (status, _) = send(&app, &key, reqwest::Method::GET, "/v1/tools/fake.sum", None).await;
        assert_eq!(status, 404);
    }
);

db_test!(
    a_rename_is_refused_when_the_name_is_taken_or_not_a_tool_name,
    |backend| {
        let Some((app, key, _up, server)) = crate::upstream::registered(backend).await else {
            return;
        };
        let id = server["id"].as_str().unwrap().to_owned();
        // Side effects alone still work, and a rename leaves them as they are.
        let (status, view) = patch(
            &app,
            &key,
            &id,
            "add",
            json!({ "side_effects": "destructive" }),
        )
        .await;
        assert_eq!(status, 200, "{view}");
        let (status, view) = patch(&app, &key, &id, "add", json!({ "name": "plus" })).await;
        assert_eq!(status, 200, "{view}");
        assert_eq!(
            (view["side_effects"].as_str(), view["catalog_name"].as_str()),
            (Some("destructive"), Some("fake.plus"))
        );

        let (status, out) = patch(&app, &key, &id, "add", json!({ "name": "echo" })).await;
        assert_eq!(
            status, 409,
            "another tool of the server is called that: {out}"
        );
        for bad in [
            json!({ "name": "has space" }),
            json!({ "name": "" }),
            json!({ "name": 5 }),
            json!({ "description": "x".repeat(4001) }),
            json!({ "colour": "red" }),
            json!({}),
            json!(["name"]),
        ] {
            let (status, out) = patch(&app, &key, &id, "add", bad.clone()).await;
            assert_eq!(status, 422, "{bad}: {out}");
        }
        let (status, _) = patch(&app, &key, &id, "no_such_tool", json!({ "name": "x" })).await;
        assert_eq!(status, 404);
        let (_, tool) = send(
            &app,
            &key,
            reqwest::Method::GET,
            "/v1/tools/fake.plus",
            None,
        )
        .await;
        assert_eq!(tool["name"], "fake.plus", "nothing changed: {tool}");

        // Only an unrestricted admin renames.
        let member = app.user("mo@example.com", Role::Member).await;
        let member_key = app.api_key(&member).await;
        let (status, _) = patch(&app, &member_key, &id, "add", json!({ "name": "mine" })).await;
        assert_eq!(status, 403);
    }
);

db_test!(
    the_mcp_server_page_renames_and_describes_a_tool_and_shows_what_agents_see,
    |backend| {
        let Some((app, key, _up, server)) = crate::upstream::registered(backend).await else {
            return;
        };
        let id = server["id"].as_str().unwrap().to_owned();
        let b = app.browser();
        b.sign_in("ada@example.com", crate::helpers::PASSWORD).await;
        let res = b
            .call(
                "set_mcp_tool_text",
                &[
                    ("id", &id),
                    ("tool", "echo"),
                    ("name", "say"),
                    ("description", "Say it back."),
                ],
            )
            .await;
        assert!(res.status().is_success(), "{}", res.text().await.unwrap());
        let page: Value = b
            .call("mcp_server_page", &[("id", &id)])
            .await
            .json()
            .await
            .unwrap();
        let echo = page["tools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == "echo")
            .unwrap_or_else(|| panic!("{page}"));
        assert_eq!(
            (
                echo["catalog_name"].as_str(),
                echo["name_override"].as_str()
            ),
            (Some("fake.say"), Some("say"))
        );
        assert_eq!(echo["description_override"], "Say it back.");
        assert_eq!(echo["description"], "Echo a message back.");
        let html = b
            .get(&format!("/mcp-servers/{id}"))
            .await
            .text()
            .await
            .unwrap();
        assert!(
            html.contains("Say it back."),
            "the page shows what agents see"
        );
        let (status, tool) =
            send(&app, &key, reqwest::Method::GET, "/v1/tools/fake.say", None).await;
        assert_eq!(
            (status, tool["description"].as_str()),
            (200, Some("Say it back."))
        );
        // Empty fields go back to the upstream's own.
        let res = b
            .call(
                "set_mcp_tool_text",
                &[
                    ("id", &id),
                    ("tool", "echo"),
                    ("name", ""),
                    ("description", ""),
                ],
            )
            .await;
        assert!(res.status().is_success());
        let (status, tool) = send(
            &app,
            &key,
            reqwest::Method::GET,
            "/v1/tools/fake.echo",
            None,
        )
        .await;
        assert_eq!(
            (status, tool["description"].as_str()),
            (200, Some("Echo a message back."))
        );
        // A member cannot.
        app.user("mo@example.com", Role::Member).await;
        let m = app.browser();
        m.sign_in("mo@example.com", crate::helpers::PASSWORD).await;
        let res = m
            .call(
                "set_mcp_tool_text",
                &[
                    ("id", &id),
                    ("tool", "echo"),
                    ("name", "mine"),
                    ("description", ""),
                ],
            )
            .await;
        assert_eq!(res.status(), 403);
    }
);
