//! Human confirmations (seed 004, D15): a gated call is validated, held, decided once by a
//! person or an unrestricted admin key (never the calling key), run once on approval, and its
//! identical repeats get the held call's state instead of a second confirmation.

use serde_json::{json, Value};
use workbench_core::auth::Role;

use crate::helpers::{admin_with_key, execute, TestApp, PASSWORD};
use crate::{app, db_test};

/// POSTs JSON with a bearer key: (status, body).
pub(crate) async fn post(app: &TestApp, key: &str, path: &str, body: Value) -> (u16, Value) {
    let res = app
        .http()
        .post(app.url(path))
        .bearer_auth(key)
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = res.status().as_u16();
    (status, res.json().await.unwrap_or(Value::Null))
}

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

/// An admin key, and an agent key whose policy gates `storage.put` behind a confirmation.
async fn gated(app: &TestApp) -> (String, String, String) {
    let (_, admin) = admin_with_key(app).await;
    let rules = json!({ "mode": "open", "require_confirmation": ["storage.put"] });
    let (status, pol) = post(
        app,
        &admin,
        "/v1/policies",
        json!({ "name": "careful", "tool_allowlist": rules }),
    )
    .await;
    assert_eq!(status, 201, "{pol}");
    let pol = pol["id"].as_str().unwrap().to_owned();
    let (status, key) = post(
        app,
        &admin,
        "/v1/api-keys",
        json!({ "name": "agent", "policy_id": pol }),
    )
    .await;
    assert_eq!(status, 201, "{key}");
    (admin, key["key"].as_str().unwrap().to_owned(), pol)
}

fn put(key: &str, content: &str) -> Value {
    json!({ "tool": "storage.put", "arguments": { "key": key, "content": content } })
}

/// Successful executions of a tool in the audit log (replays and decisions are other rows).
async fn executions(app: &TestApp, admin: &str, tool: &str) -> usize {
    let who = app.wb.accounts().authenticate_api_key(admin).await.unwrap();
    let page = app
        .wb
        .audit()
        .page(&who, &Default::default())
        .await
        .unwrap();
    page.entries
        .iter()
        .filter(|e| {
            e.tool.as_deref() == Some(tool)
                && e.action == "tool.execute"
                && e.status.as_str() == "succeeded"
        })
        .count()
}

db_test!(
    a_gated_call_waits_for_approval_then_runs_once_and_repeats_get_its_outcome,
    |backend| {
        let app = app!(backend);
        let (admin, agent, pol) = gated(&app).await;

        // Invalid arguments are refused at once, without asking anyone.
        let (status, bad) = post(
            &app,
            &agent,
            "/v1/tools/invoke",
            json!({ "tool": "storage.put", "arguments": { "key": 3 } }),
        )
        .await;
        assert_eq!(status, 422, "{bad}");
        assert_eq!(
            get(&app, &admin, "/v1/tools/confirmations").await.1["data"],
            json!([])
        );

        let (status, held) = post(
            &app,
            &agent,
            "/v1/tools/invoke",
            put("report", "q3 numbers"),
        )
        .await;
        assert_eq!(status, 202, "{held}");
        assert_eq!(
            (
                held["object"].as_str(),
                held["tool"].as_str(),
                held["status"].as_str()
            ),
            (
                Some("tool_call"),
                Some("storage.put"),
                Some("awaiting_confirmation")
            )
        );
        let call_id = held["id"].as_str().unwrap().to_owned();
        let conf = held["confirmation_id"].as_str().unwrap().to_owned();
        assert!(call_id.starts_with("tcall_") && conf.starts_with("conf_"));
        assert!(held["expires_at"].as_str().unwrap().ends_with('Z'));
        assert_eq!(
            get(&app, &agent, &format!("/v1/tools/calls/{call_id}"))
                .await
                .1["status"],
            "awaiting_confirmation"
        );

        // The identical call over MCP: the same confirmation, with the portal link; nothing ran.
        let out = execute(&app, &agent, json!([{ "tool": "storage.put", "args": { "content": "q3 numbers", "key": "report" } }])).await;
        assert_eq!(out[0]["code"], "AWAITING_CONFIRMATION", "{}", out[0]);
        assert_eq!(out[0]["confirmation_id"], conf.as_str());
        assert!(
            out[0]["url"]
                .as_str()
                .unwrap()
                .ends_with(&format!("/confirmations/{conf}")),
            "{}",
            out[0]
        );
        let (_, pending) = get(&app, &admin, "/v1/tools/confirmations?status=pending").await;
        assert_eq!(
            pending["data"].as_array().unwrap().len(),
            1,
            "one confirmation, not two: {pending}"
        );
        let c = &pending["data"][0];
        assert_eq!(
            (
                c["id"].as_str(),
                c["tool"].as_str(),
                c["status"].as_str(),
                c["policy_id"].as_str()
            ),
            (
                Some(conf.as_str()),
                Some("storage.put"),
                Some("pending"),
                Some(pol.as_str())
            )
        );
        assert_eq!(
            c["arguments"],
            json!({ "key": "report", "content": "q3 numbers" })
        );
        assert_eq!(executions(&app, &admin, "storage.put").await, 0);

        // Not the calling key, and no policy-limited key, may decide.
        let (status, _) = post(
            &app,
            &agent,
            &format!("/v1/tools/confirmations/{conf}"),
            json!({ "decision": "approve" }),
        )
        .await;
        assert_eq!(status, 403, "the key that made the call");
        assert_eq!(get(&app, &agent, "/v1/tools/confirmations").await.0, 403);
        assert_eq!(
            get(&app, &agent, &format!("/v1/tools/confirmations/{conf}"))
                .await
                .0,
            200,
            "the calling key may look at its own"
        );
        let member = app.user("mel@example.com", Role::Member).await;
        let member_key = app.api_key(&member).await;
        assert_eq!(
            post(
                &app,
                &member_key,
                &format!("/v1/tools/confirmations/{conf}"),
                json!({ "decision": "approve" })
            )
            .await
            .0,
            403
        );
        for bad in [
            json!({ "decision": "maybe" }),
            json!({}),
            json!({ "decision": "approve", "extra": 1 }),
        ] {
            assert_eq!(
                post(
                    &app,
                    &admin,
                    &format!("/v1/tools/confirmations/{conf}"),
                    bad.clone()
                )
                .await
                .0,
                422,
                "{bad}"
            );
        }
        assert_eq!(
            post(
                &app,
                &admin,
                "/v1/tools/confirmations/conf_nope",
                json!({ "decision": "approve" })
            )
            .await
            .0,
            404
        );

        // Approve: it runs now, once, and the answer is the finished call.
        let (status, done) = post(
            &app,
            &admin,
            &format!("/v1/tools/confirmations/{conf}"),
            json!({ "decision": "approve", "reason": "looks right" }),
        )
        .await;
        assert_eq!(status, 200, "{done}");
        assert_eq!(
            (done["id"].as_str(), done["status"].as_str()),
            (Some(call_id.as_str()), Some("succeeded"))
        );
        assert_eq!(done["result"]["key"], "report");
        assert_eq!(
            get(&app, &agent, &format!("/v1/tools/calls/{call_id}"))
                .await
                .1["status"],
            "succeeded"
        );
        let (status, again) = post(
            &app,
            &admin,
            &format!("/v1/tools/confirmations/{conf}"),
            json!({ "decision": "deny" }),
        )
        .await;
        assert_eq!(status, 409, "{again}");
        assert_eq!(again["error"]["meta"]["status"], "approved");
        let read = execute(
            &app,
            &agent,
            json!([{ "tool": "storage.get", "args": { "key": "report" } }]),
        )
        .await;
        assert_eq!(read[0]["result"]["content"], "q3 numbers", "{}", read[0]);

        // Repeats get the outcome, never a second execution.
        let (status, repeat) = post(
            &app,
            &agent,
            "/v1/tools/invoke",
            put("report", "q3 numbers"),
        )
        .await;
        assert_eq!(status, 200, "{repeat}");
        assert_eq!(repeat["id"], call_id.as_str());
        assert_eq!(repeat["result"]["key"], "report");
        let out = execute(&app, &agent, json!([{ "tool": "storage.put", "args": { "key": "report", "content": "q3 numbers" } }])).await;
        assert_eq!(out[0]["result"]["key"], "report", "{}", out[0]);
        assert_eq!(
            executions(&app, &admin, "storage.put").await,
            1,
            "approved once, ran once"
        );
        let (_, approved) = get(&app, &admin, "/v1/tools/confirmations?status=approved").await;
        assert_eq!(approved["data"][0]["reason"], "looks right");
        assert!(approved["data"][0]["decided_by"].is_string());

        // A different template is another call: another confirmation.
        let (status, other) = post(
            &app,
            &agent,
            "/v1/tools/invoke",
            put("report", "q4 numbers"),
        )
        .await;
        assert_eq!(status, 202);
        assert_ne!(other["confirmation_id"], conf.as_str());
    }
);

db_test!(
    a_denied_call_never_runs_and_its_repeats_are_told_so,
    |backend| {
        let app = app!(backend);
        let (admin, agent, _) = gated(&app).await;
        let (_, held) = post(&app, &agent, "/v1/tools/invoke", put("wipe", "nothing")).await;
        let conf = held["confirmation_id"].as_str().unwrap().to_owned();
        let call_id = held["id"].as_str().unwrap().to_owned();
        let (status, denied) = post(
            &app,
            &admin,
            &format!("/v1/tools/confirmations/{conf}"),
            json!({ "decision": "deny", "reason": "not today" }),
        )
        .await;
        assert_eq!(status, 200, "{denied}");
        assert_eq!(denied["status"], "denied");
        assert_eq!(
            get(&app, &agent, &format!("/v1/tools/calls/{call_id}"))
                .await
                .1["status"],
            "denied"
        );
        let (status, repeat) = post(&app, &agent, "/v1/tools/invoke", put("wipe", "nothing")).await;
        assert_eq!(status, 403, "{repeat}");
        assert_eq!(repeat["error"]["code"], "tool_not_allowed");
        assert_eq!(repeat["error"]["meta"]["reason"], "not today");
        let out = execute(
            &app,
            &agent,
            json!([{ "tool": "storage.put", "args": { "key": "wipe", "content": "nothing" } }]),
        )
        .await;
        assert_eq!(out[0]["code"], "NOT_ALLOWED");
        assert!(
            out[0]["error"].as_str().unwrap().contains("denied"),
            "{}",
            out[0]
        );
        let read = execute(
            &app,
            &agent,
            json!([{ "tool": "storage.get", "args": { "key": "wipe" } }]),
        )
        .await;
        assert!(
            read[0]["result"].is_null(),
            "nothing was stored: {}",
            read[0]
        );
        assert_eq!(executions(&app, &admin, "storage.put").await, 0);
        assert_eq!(
            get(&app, &admin, "/v1/tools/confirmations?status=denied")
                .await
                .1["data"]
                .as_array()
                .unwrap()
                .len(),
            1
        );
    }
);

db_test!(
    a_hold_expires_and_keeps_vault_references_as_references,
    |backend| {
        let app = app!(backend);
        let (admin, agent, _) = gated(&app).await;
        let set = execute(&app, &admin, json!([{ "tool": "vault_set", "args": { "name": "NOTE", "value": "s3cr3t-note-value" } }])).await;
        assert!(set[0].get("result").is_some(), "{set:?}");
        let (_, held) = post(
            &app,
            &agent,
            "/v1/tools/invoke",
            put("note", "{{vault:NOTE}}"),
        )
        .await;
        let conf = held["confirmation_id"].as_str().unwrap().to_owned();
        let (_, c) = get(&app, &admin, &format!("/v1/tools/confirmations/{conf}")).await;
        assert_eq!(
            c["arguments"]["content"], "{{vault:NOTE}}",
            "the reference, never its value"
        );

        // Past its expiry nobody can decide it, and the identical call asks again.
        app.clock.advance_ms(16 * 60 * 1000);
        let (status, late) = post(
            &app,
            &admin,
            &format!("/v1/tools/confirmations/{conf}"),
            json!({ "decision": "approve" }),
        )
        .await;
        assert_eq!(status, 409, "{late}");
        assert_eq!(late["error"]["meta"]["status"], "expired");
        assert_eq!(
            get(&app, &admin, "/v1/tools/confirmations?status=expired")
                .await
                .1["data"][0]["id"],
            conf.as_str()
        );
        let (status, again) = post(
            &app,
            &agent,
            "/v1/tools/invoke",
            put("note", "{{vault:NOTE}}"),
        )
        .await;
        assert_eq!(status, 202);
        let fresh = again["confirmation_id"].as_str().unwrap().to_owned();
        assert_ne!(fresh, conf);

        // Approved, the reference is resolved when it runs, and the value does not come back.
        let (status, done) = post(
            &app,
            &admin,
            &format!("/v1/tools/confirmations/{fresh}"),
            json!({ "decision": "approve" }),
        )
        .await;
        assert_eq!(status, 200, "{done}");
        assert_eq!(done["status"], "succeeded");
        assert!(!done.to_string().contains("s3cr3t-note-value"));
        assert_eq!(
            get(&app, &admin, "/v1/tools/confirmations?status=bogus")
                .await
                .0,
            400
        );
        let read = execute(
            &app,
            &admin,
            json!([{ "tool": "storage.get", "args": { "key": "note" } }]),
        )
        .await;
        assert_eq!(
            read[0]["result"]["content"], "[redacted:NOTE]",
            "the value was stored, and is scrubbed on the way out: {}",
            read[0]
        );
    }
);

db_test!(
    an_idempotent_replay_of_a_held_invoke_answers_the_calls_current_state,
    |backend| {
        let app = app!(backend);
        let (admin, agent, _) = gated(&app).await;
        let send = || {
            app.http()
                .post(app.url("/v1/tools/invoke"))
                .bearer_auth(&agent)
                .header("idempotency-key", "k-1")
                .json(&put("idem", "v"))
                .send()
        };
        let first = send().await.unwrap();
        assert_eq!(first.status(), 202);
        let held: Value = first.json().await.unwrap();
        let replay = send().await.unwrap();
        assert_eq!(replay.status(), 202);
        assert_eq!(replay.headers()["idempotent-replayed"], "true");
        let conf = held["confirmation_id"].as_str().unwrap();
        assert_eq!(
            post(
                &app,
                &admin,
                &format!("/v1/tools/confirmations/{conf}"),
                json!({ "decision": "approve" })
            )
            .await
            .0,
            200
        );
        let after = send().await.unwrap();
        assert_eq!(after.status(), 200);
        let body: Value = after.json().await.unwrap();
        assert_eq!(
            (body["id"].as_str(), body["status"].as_str()),
            (held["id"].as_str(), Some("succeeded")),
            "{body}"
        );
    }
);

db_test!(identical_calls_at_once_share_one_confirmation, |backend| {
    let app = app!(backend);
    let (admin, agent, _) = gated(&app).await;
    let calls = (0..6).map(|_| post(&app, &agent, "/v1/tools/invoke", put("race", "same")));
    let answers = futures::future::join_all(calls).await;
    let ids: std::collections::BTreeSet<String> = answers
        .iter()
        .map(|(status, body)| {
            assert_eq!(*status, 202, "{body}");
            body["confirmation_id"].as_str().unwrap().to_owned()
        })
        .collect();
    assert_eq!(
        ids.len(),
        1,
        "one confirmation for the identical call: {ids:?}"
    );
    assert_eq!(
        get(&app, &admin, "/v1/tools/confirmations?status=pending")
            .await
            .1["data"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
});

db_test!(
    a_secret_typed_into_a_held_call_is_redacted_wherever_the_confirmation_is_shown,
    |backend| {
        let app = app!(backend);
        let (admin, agent, _) = gated(&app).await;
        let set = execute(&app, &admin, json!([{ "tool": "vault_set", "args": { "name": "PASTED", "value": "pasted-secret-9f2c41" } }])).await;
        assert!(set[0].get("result").is_some(), "{set:?}");
        let (status, held) = post(
            &app,
            &agent,
            "/v1/tools/invoke",
            put("note", "pasted-secret-9f2c41"),
        )
        .await;
        assert_eq!(status, 202, "{held}");
        let conf = held["confirmation_id"].as_str().unwrap().to_owned();
        for path in [
            format!("/v1/tools/confirmations/{conf}"),
            "/v1/tools/confirmations".to_owned(),
        ] {
            let (_, shown) = get(&app, &admin, &path).await;
            assert!(
                !shown.to_string().contains("pasted-secret-9f2c41"),
                "{path}: {shown}"
            );
            assert!(
                shown.to_string().contains("[redacted:PASTED]"),
                "{path}: {shown}"
            );
        }
        let (_, own) = get(&app, &agent, &format!("/v1/tools/confirmations/{conf}")).await;
        assert!(!own.to_string().contains("pasted-secret-9f2c41"), "{own}");
    }
);

db_test!(
    the_audit_log_lists_a_decision_on_a_held_call_and_filters_by_it,
    |backend| {
        let app = app!(backend);
        let (admin, agent, _) = gated(&app).await;
        let (status, held) = post(&app, &agent, "/v1/tools/invoke", put("q4", "numbers")).await;
        assert_eq!(status, 202, "{held}");
        let conf = held["confirmation_id"].as_str().unwrap().to_owned();
        let (status, done) = post(
            &app,
            &admin,
            &format!("/v1/tools/confirmations/{conf}"),
            json!({ "decision": "approve" }),
        )
        .await;
        assert_eq!(status, 200, "{done}");

        // The decision row says `approved`, a word no call has: the REST log, its filter and
        // the portal's Audit page all show it.
        let (status, approved) = get(&app, &admin, "/v1/audit?status=approved").await;
        assert_eq!(status, 200, "{approved}");
        let rows = approved["data"].as_array().expect("a list");
        assert_eq!(rows.len(), 1, "{approved}");
        assert_eq!(rows[0]["action"], "confirmation.approve");
        let a = app.browser();
        a.sign_in("ada@example.com", PASSWORD).await;
        let page: Value = a.call("audit_page", &[]).await.json().await.unwrap();
        let statuses: Vec<&str> = page["rows"]
            .as_array()
            .unwrap_or_else(|| panic!("the Audit page loads: {page}"))
            .iter()
            .map(|r| r["status"].as_str().unwrap())
            .collect();
        assert!(statuses.contains(&"approved"), "{statuses:?}");
        assert!(statuses.contains(&"succeeded"), "{statuses:?}");
        let filtered: Value = a
            .call("audit_page", &[("status", "approved")])
            .await
            .json()
            .await
            .unwrap();
        assert_eq!(filtered["rows"].as_array().map(Vec::len), Some(1));

        // A status that is none of the words is refused with the error shape, not an empty page.
        let (status, bad) = get(&app, &admin, "/v1/audit?status=approvedish").await;
        assert_eq!(status, 400, "{bad}");
        assert_eq!(bad["error"]["code"], "bad_request", "{bad}");
        assert!(
            bad["error"]["message"]
                .as_str()
                .unwrap()
                .contains("awaiting_confirmation"),
            "{bad}"
        );
    }
);
