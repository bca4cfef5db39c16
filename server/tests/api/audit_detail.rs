//! The audit log over REST and in the portal, one row in full (seed 004 "Metering"): outcome,
//! duration, result size, surface, key, Idempotency-Key, the arguments with secrets redacted,
//! and the confirmation with who decided; members see only their own rows; and retention, which
//! deletes old rows (and their call records) in batches, leaving the meters.

use serde_json::{json, Value};
use workbench_core::auth::Role;

use crate::helpers::{admin_with_key, Options, TestApp, PASSWORD};
use crate::{app, db_test};

async fn get(app: &TestApp, key: &str, path: &str) -> (u16, Value) {
    let res = app
        .http()
        .get(app.url(path))
        .bearer_auth(key)
        .send()
        .await
        .unwrap();
    let status = res.status().as_u16();
    (status, res.json().await.unwrap_or(Value::Null))
}

async fn send(
    app: &TestApp,
    key: &str,
    method: reqwest::Method,
    path: &str,
    body: Value,
) -> (u16, Value) {
    let res = app
        .http()
        .request(method, app.url(path))
        .bearer_auth(key)
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = res.status().as_u16();
    (status, res.json().await.unwrap_or(Value::Null))
}

const PASTED: &str = "pasted-Secret-9f8e7d6c5b4a";

db_test!(
    an_audit_entry_shows_the_call_in_full_and_never_a_secret,
    |backend| {
        let app = app!(backend);
        let (admin, key) = admin_with_key(&app).await;
        app.wb
            .vault()
            .set(&admin, "DEPLOY_TOKEN", PASTED)
            .await
            .unwrap();
        let res = app
        .http()
        .post(app.url("/v1/tools/invoke"))
        .bearer_auth(&key)
        .header("idempotency-key", "nightly-report-1")
        .json(&json!({ "tool": "storage.put", "end_user_id": "customer-7", "arguments": { "key": "report", "content": format!("token {PASTED} and {{{{vault:DEPLOY_TOKEN}}}}") } }))
        .send()
        .await
        .unwrap();
        assert_eq!(res.status(), 200);
        let call: Value = res.json().await.unwrap();

        let (status, list) = get(&app, &key, "/v1/audit?tool=storage.put").await;
        assert_eq!(status, 200, "{list}");
        let entry = &list["data"][0];
        assert_eq!(entry["tool_call_id"], call["id"]);
        let id = entry["id"].as_str().unwrap();
        let (status, d) = get(&app, &key, &format!("/v1/audit/{id}")).await;
        assert_eq!(status, 200, "{d}");
        assert_eq!(
            (
                d["object"].as_str(),
                d["status"].as_str(),
                d["surface"].as_str()
            ),
            (Some("audit_event"), Some("succeeded"), Some("rest"))
        );
        assert_eq!(d["end_user_id"], "customer-7");
        assert_eq!(d["user_email"], "ada@example.com");
        assert_eq!(d["api_key_name"], "test");
        assert_eq!(d["call"]["idempotency_key"], "nightly-report-1");
        let expected_bytes = call["result"].to_string().len() as i64;
        assert_eq!(
            d["call"]["result_bytes"].as_i64(),
            Some(expected_bytes),
            "{d}"
        );
        let args = d["call"]["arguments"]["content"].as_str().unwrap();
        assert!(
            args.contains("{{vault:DEPLOY_TOKEN}}"),
            "references stay references: {args}"
        );
        assert!(
            !d.to_string().contains(PASTED),
            "a pasted secret is redacted: {d}"
        );

        // A failed call shows its error, and the portal page shows the same row.
        let out = crate::helpers::execute(
            &app,
            &key,
            json!([{ "tool": "storage.get", "args": { "key": "no-such-object" } }]),
        )
        .await;
        assert!(out[0]["code"].is_string(), "{}", out[0]);
        let (_, list) = get(&app, &key, "/v1/audit?tool=storage.get").await;
        let failed = list["data"][0]["id"].as_str().unwrap().to_owned();
        let (_, fd) = get(&app, &key, &format!("/v1/audit/{failed}")).await;
        assert_eq!(fd["status"], "failed");
        assert_eq!(fd["call"]["error"]["code"], out[0]["code"], "{fd}");
        assert_eq!(fd["surface"], "mcp");

        let b = app.browser();
        b.sign_in("ada@example.com", PASSWORD).await;
        let html = b.get(&format!("/audit/{id}")).await.text().await.unwrap();
        assert!(
            html.contains("nightly-report-1") && html.contains("customer-7"),
            "the detail page shows the row"
        );
        assert!(!html.contains(PASTED));
        let list_html = b.get("/audit").await.text().await.unwrap();
        assert!(
            list_html.contains(&format!("href=\"/audit/{id}\"")),
            "the list links to the detail"
        );

        // Members see their own rows only; another project's or a made-up id is not found.
        let member = app.user("mel@example.com", Role::Member).await;
        let member_key = app.api_key(&member).await;
        assert_eq!(
            get(&app, &member_key, &format!("/v1/audit/{id}")).await.0,
            404
        );
        let (_, theirs) = get(&app, &member_key, "/v1/audit").await;
        assert_eq!(theirs["data"], json!([]), "{theirs}");
        let m = app.browser();
        m.sign_in("mel@example.com", PASSWORD).await;
        let page = m.call("audit_detail", &[("id", id)]).await;
        assert_ne!(
            page.status(),
            200,
            "a member cannot open an admin's row in the portal"
        );
        assert_eq!(get(&app, &key, "/v1/audit/aud_nope").await.0, 404);
        assert_eq!(get(&app, &key, "/v1/audit?cursor=garbage").await.0, 400);
    }
);

db_test!(
    an_audit_entry_of_a_held_call_names_the_confirmation_and_who_decided,
    |backend| {
        let app = app!(backend);
        let (_, admin) = admin_with_key(&app).await;
        let rules = json!({ "mode": "open", "require_confirmation": ["storage.put"] });
        let (_, pol) = send(
            &app,
            &admin,
            reqwest::Method::POST,
            "/v1/policies",
            json!({ "name": "careful", "tool_allowlist": rules }),
        )
        .await;
        let (_, agent) = send(
            &app,
            &admin,
            reqwest::Method::POST,
            "/v1/api-keys",
            json!({ "name": "agent", "policy_id": pol["id"] }),
        )
        .await;
        let agent = agent["key"].as_str().unwrap().to_owned();
        let (status, held) = send(
            &app,
            &agent,
            reqwest::Method::POST,
            "/v1/tools/invoke",
            json!({ "tool": "storage.put", "arguments": { "key": "a", "content": "b" } }),
        )
        .await;
        assert_eq!(status, 202);
        let conf = held["confirmation_id"].as_str().unwrap();
        let (status, _) = send(
            &app,
            &admin,
            reqwest::Method::POST,
            &format!("/v1/tools/confirmations/{conf}"),
            json!({ "decision": "approve", "reason": "checked" }),
        )
        .await;
        assert_eq!(status, 200);
        let (_, list) = get(&app, &admin, "/v1/audit?tool=storage.put").await;
        let row = list["data"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["tool_call_id"] == held["id"] && r["status"] == "succeeded")
            .expect("the call's row")
            .clone();
        let (_, d) = get(
            &app,
            &admin,
            &format!("/v1/audit/{}", row["id"].as_str().unwrap()),
        )
        .await;
        assert_eq!(d["confirmation"]["id"], conf);
        assert_eq!(d["confirmation"]["status"], "approved");
        assert_eq!(d["confirmation"]["decided_by_email"], "ada@example.com");
        assert_eq!(d["confirmation"]["reason"], "checked");
        assert_eq!(d["api_key_name"], "agent");
    }
);

db_test!(
    retention_deletes_rows_older_than_the_setting_in_batches_and_keeps_the_rest,
    |backend| {
        let app = app!(backend);
        let (admin, key) = admin_with_key(&app).await;
        // Settings: admins only, an unrestricted one to change them, and checked completely.
        let (status, s) = get(&app, &key, "/v1/settings").await;
        assert_eq!(status, 200, "{s}");
        assert_eq!(
            s,
            json!({ "object": "project_settings", "audit_retention_days": null, "webhook": null, "email_hourly_limit": null, "email_hourly_limit_max": 100 })
        );
        for bad in [
            json!({ "audit_retention_days": 0 }),
            json!({ "audit_retention_days": 3651 }),
            json!({ "audit_retention_days": "30" }),
            json!({ "retention": 30 }),
            json!([1]),
        ] {
            let (status, e) = send(
                &app,
                &key,
                reqwest::Method::PATCH,
                "/v1/settings",
                bad.clone(),
            )
            .await;
            assert_eq!(status, 422, "{bad}: {e}");
        }
        let member = app.user("mel@example.com", Role::Member).await;
        let member_key = app.api_key(&member).await;
        assert_eq!(
            send(
                &app,
                &member_key,
                reqwest::Method::PATCH,
                "/v1/settings",
                json!({ "audit_retention_days": 1 })
            )
            .await
            .0,
            403
        );
        assert_eq!(get(&app, &member_key, "/v1/settings").await.0, 403);
        let (_, pol) = send(
            &app,
            &key,
            reqwest::Method::POST,
            "/v1/policies",
            json!({ "name": "open", "tool_allowlist": { "mode": "open" } }),
        )
        .await;
        let (_, limited) = send(
            &app,
            &key,
            reqwest::Method::POST,
            "/v1/api-keys",
            json!({ "name": "limited admin", "policy_id": pol["id"] }),
        )
        .await;
        let limited = limited["key"].as_str().unwrap().to_owned();
        assert_eq!(
            send(
                &app,
                &limited,
                reqwest::Method::PATCH,
                "/v1/settings",
                json!({ "audit_retention_days": 1 })
            )
            .await
            .0,
            403,
            "a limited key cannot shorten the log of what it did"
        );

        // 40 days ago: three calls, and 1,200 proxy rows (more than two delete batches).
        let day_ms = 24 * 60 * 60 * 1000;
        app.clock.advance_ms(-40 * day_ms);
        let then = workbench_core::clock::Clock::now_ms(&app.clock);
        for i in 0..3 {
            crate::helpers::execute(&app, &key, json!([{ "tool": "storage.put", "args": { "key": format!("old{i}"), "content": "x" } }])).await;
        }
        let old_call = get(&app, &key, "/v1/audit?tool=storage.put").await.1["data"][0]
            ["tool_call_id"]
            .as_str()
            .unwrap()
            .to_owned();
        for i in 0..1200 {
            let e = workbench_core::audit::ProxyEvent {
                who: &admin,
                integration: "github",
                method: "GET",
                path: "/user",
                status: 200,
                egress_bytes: 10,
                duration_ms: 1,
                at_ms: then + i,
            };
            app.wb.audit().record_proxy(&e).await;
        }
        app.clock.advance_ms(40 * day_ms);
        crate::helpers::execute(
            &app,
            &key,
            json!([{ "tool": "storage.put", "args": { "key": "fresh", "content": "x" } }]),
        )
        .await;
        let fresh_call = get(&app, &key, "/v1/audit?tool=storage.put").await.1["data"][0]
            ["tool_call_id"]
            .as_str()
            .unwrap()
            .to_owned();
        let report = app.wb.audit().apply_retention().await.unwrap();
        assert_eq!(report.audit_rows, 0, "no retention set: nothing goes");

        let (status, s) = send(
            &app,
            &key,
            reqwest::Method::PATCH,
            "/v1/settings",
            json!({ "audit_retention_days": 30 }),
        )
        .await;
        assert_eq!(status, 200, "{s}");
        assert_eq!(s["audit_retention_days"], 30);
        let report = app.wb.audit().apply_retention().await.unwrap();
        assert_eq!(
            (report.audit_rows, report.tool_calls),
            (1203, 3),
            "{report:?}"
        );
        let (_, left) = get(&app, &key, "/v1/audit").await;
        let left = left["data"].as_array().unwrap();
        assert!(!left.is_empty() && left.iter().all(|r| r["tool"] == "storage.put" && r["tool_call_id"] == fresh_call.as_str()), "today's rows stay: {left:?}");
        assert_eq!(
            get(&app, &key, &format!("/v1/tools/calls/{old_call}"))
                .await
                .0,
            404,
            "the old call record went with its row"
        );
        assert_eq!(
            get(&app, &key, &format!("/v1/tools/calls/{fresh_call}"))
                .await
                .0,
            200
        );
        let old_day = workbench_core::clock::rfc3339(then)[..10].to_owned();
        let usage = app
            .wb
            .metering()
            .usage(&admin, &old_day, &old_day)
            .await
            .unwrap();
        let calls: i64 = usage
            .iter()
            .filter(|u| {
                u.tool == "storage.put" && u.meter == workbench_core::store::usage::Meter::ToolCall
            })
            .map(|u| u.value)
            .sum();
        assert_eq!(calls, 3, "the meters keep the old calls: {usage:?}");
        assert_eq!(
            app.wb.audit().apply_retention().await.unwrap().audit_rows,
            0,
            "a second pass has nothing left to do"
        );

        let (_, s) = send(
            &app,
            &key,
            reqwest::Method::PATCH,
            "/v1/settings",
            json!({ "audit_retention_days": null }),
        )
        .await;
        assert_eq!(s["audit_retention_days"], Value::Null);
    }
);

db_test!(
    retention_keeps_the_rows_of_a_call_a_live_confirmation_still_holds,
    |backend| {
        let day_ms = 24 * 60 * 60 * 1000;
        let app = app!(
            backend,
            Options {
                confirmation_ttl_secs: Some(3 * 24 * 3600),
                ..Default::default()
            }
        );
        let (_, admin) = admin_with_key(&app).await;
        let rules = json!({ "mode": "open", "require_confirmation": ["storage.put"] });
        let (_, pol) = send(
            &app,
            &admin,
            reqwest::Method::POST,
            "/v1/policies",
            json!({ "name": "careful", "tool_allowlist": rules }),
        )
        .await;
        let (_, agent) = send(
            &app,
            &admin,
            reqwest::Method::POST,
            "/v1/api-keys",
            json!({ "name": "agent", "policy_id": pol["id"] }),
        )
        .await;
        let agent = agent["key"].as_str().unwrap().to_owned();
        let (status, held) = send(
            &app,
            &agent,
            reqwest::Method::POST,
            "/v1/tools/invoke",
            json!({ "tool": "storage.put", "arguments": { "key": "a", "content": "b" } }),
        )
        .await;
        assert_eq!(status, 202);
        crate::helpers::execute(
            &app,
            &admin,
            json!([{ "tool": "storage.put", "args": { "key": "other", "content": "x" } }]),
        )
        .await;
        send(
            &app,
            &admin,
            reqwest::Method::PATCH,
            "/v1/settings",
            json!({ "audit_retention_days": 1 }),
        )
        .await;

        // Two days on: the ordinary call's rows go; the held call (pending for a third day) stays.
        app.clock.advance_ms(2 * day_ms);
        let report = app.wb.audit().apply_retention().await.unwrap();
        assert!(
            report.audit_rows >= 1 && report.tool_calls == 1 && report.confirmations == 0,
            "{report:?}"
        );
        let conf = held["confirmation_id"].as_str().unwrap();
        let (status, done) = send(
            &app,
            &admin,
            reqwest::Method::POST,
            &format!("/v1/tools/confirmations/{conf}"),
            json!({ "decision": "approve" }),
        )
        .await;
        assert_eq!(
            (status, done["status"].as_str()),
            (200, Some("succeeded")),
            "{done}"
        );
        let (_, list) = get(&app, &admin, "/v1/audit?tool=storage.put&status=succeeded").await;
        assert!(
            list["data"]
                .as_array()
                .unwrap()
                .iter()
                .any(|r| r["tool_call_id"] == held["id"] && r["action"] == "tool.execute"),
            "the held call's row was kept and finished: {list}"
        );
    }
);
