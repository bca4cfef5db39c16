//! The portal's Overview (issue 34): today's calls by outcome, calls a rate limit refused, held
//! calls waiting, upstream servers needing attention and connections to renew, each narrowed
//! to what the viewer may see.

use serde_json::{json, Value};
use workbench_core::auth::Role;

use crate::db_test;
use crate::helpers::{execute, PASSWORD};
use crate::policies::send;

db_test!(
    the_overview_counts_todays_calls_and_lists_what_needs_attention,
    |backend| {
        let Some((app, key, up, server)) = crate::upstream::registered(backend).await else {
            return;
        };
        // Calls today: the vault_set that registered() made, one more success, one failure.
        execute(
            &app,
            &key,
            json!([{ "tool": "storage.put", "args": { "key": "a", "content": "x" } }]),
        )
        .await;
        execute(
            &app,
            &key,
            json!([{ "tool": "storage.get", "args": { "key": 5 } }]),
        )
        .await;
        // A key limited to one call a minute, refused on its second.
        let (status, made) = send(
            &app,
            &key,
            reqwest::Method::POST,
            "/v1/api-keys",
            Some(json!({ "name": "slow", "rate_limit_per_minute": 1 })),
        )
        .await;
        assert_eq!(status, 201, "{made}");
        let slow = made["key"].as_str().unwrap();
        execute(
            &app,
            slow,
            json!([{ "tool": "storage.get", "args": { "key": "a" } }]),
        )
        .await;
        let refused = execute(
            &app,
            slow,
            json!([{ "tool": "storage.get", "args": { "key": "a" } }]),
        )
        .await;
        assert_eq!(refused[0]["code"], "RATE_LIMITED", "{refused:?}");
        // A held call.
        let (status, policy) = send(&app, &key, reqwest::Method::POST, "/v1/policies", Some(json!({ "name": "careful", "tool_allowlist": { "mode": "open", "require_confirmation": ["storage.put"] } }))).await;
        assert_eq!(status, 201, "{policy}");
        let (_, careful) = send(
            &app,
            &key,
            reqwest::Method::POST,
            "/v1/api-keys",
            Some(json!({ "name": "careful", "policy_id": policy["id"] })),
        )
        .await;
        let held = execute(
            &app,
            careful["key"].as_str().unwrap(),
            json!([{ "tool": "storage.put", "args": { "key": "b", "content": "y" } }]),
        )
        .await;
        assert_eq!(held[0]["code"], "AWAITING_CONFIRMATION", "{held:?}");
        // A tool awaiting review.
        up.set_tool(
            "translate",
            "Translate text.",
            json!({ "type": "object", "properties": {} }),
            true,
        );
        let id = server["id"].as_str().unwrap();
        let (status, _) = send(
            &app,
            &key,
            reqwest::Method::POST,
            &format!("/v1/mcp/servers/{id}/refresh"),
            Some(json!({})),
        )
        .await;
        assert_eq!(status, 200);
        app.wb.audit().flush().await;

        let b = app.browser();
        b.sign_in("ada@example.com", PASSWORD).await;
        let o: Value = b.call("overview_page", &[]).await.json().await.unwrap();
        assert_eq!(o["project_wide"], true);
        let by: std::collections::HashMap<String, i64> = o["calls_today"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| (p[0].as_str().unwrap().to_owned(), p[1].as_i64().unwrap()))
            .collect();
        // vault_set, storage.put, storage.get (ok); the invalid get and the refused one failed.
        assert_eq!(by.get("succeeded"), Some(&3), "{o}");
        assert_eq!(by.get("failed"), Some(&2), "{o}");
        assert_eq!(by.get("awaiting_confirmation"), Some(&1), "{o}");
        assert_eq!(o["calls_today_total"], 6);
        assert_eq!(o["rate_limited_today"], 1);
        assert_eq!(o["pending_confirmations"], 1);
        assert_eq!(o["awaiting_review"], json!([["fake", id, 1]]));
        assert_eq!(o["open_breakers"], json!([]));
        let html = b.get("/").await.text().await.unwrap();
        assert!(html.contains("1 tool awaiting review"), "the page lists it");

        // A member sees their own calls only, and no servers to review.
        app.user("mo@example.com", Role::Member).await;
        let m = app.browser();
        m.sign_in("mo@example.com", PASSWORD).await;
        let o: Value = m.call("overview_page", &[]).await.json().await.unwrap();
        assert_eq!(
            (o["project_wide"].as_bool(), o["calls_today_total"].as_i64()),
            (Some(false), Some(0)),
            "{o}"
        );
        assert_eq!(
            o["awaiting_review"],
            json!([]),
            "only reviewers see held tools: {o}"
        );
        // A signed-in member decides held calls (D15): the count is the navigation's.
        assert_eq!(o["pending_confirmations"], 1);
    }
);
