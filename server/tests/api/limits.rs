//! Rate limits and quotas in policies (issue 34): counted per key, user or project over a
//! second to a calendar month, for every tool or a pattern's; a call over one answers 429 with
//! `Retry-After` on REST and RATE_LIMITED on MCP, naming the policy and the limit, and is on
//! record. Across instances: change_notices.rs.

use serde_json::{json, Value};
use workbench_core::auth::Role;

use crate::change_notices::rest;
use crate::fakes;
use crate::helpers::{admin_with_key, execute, Options, TestApp};
use crate::{app, db_test};

/// Creates a default policy (open, nothing denied) with `limits`; answers its id.
pub async fn default_policy_with(app: &TestApp, admin: &str, limits: Value) -> String {
    let (status, body) = rest(
        app,
        admin,
        "POST",
        "/v1/policies",
        json!({ "name": "limited", "default": true, "tool_allowlist": { "mode": "open" }, "limits": limits }),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    body["id"].as_str().unwrap().to_owned()
}

/// REST invoke of `tool` with `args`: the response.
async fn invoke(app: &TestApp, key: &str, tool: &str, args: Value) -> reqwest::Response {
    app.http()
        .post(app.url("/v1/tools/invoke"))
        .bearer_auth(key)
        .json(&json!({ "tool": tool, "arguments": args }))
        .send()
        .await
        .unwrap()
}

/// The status of a REST call of `tool` (vault_list or storage.put) with valid arguments.
async fn status(app: &TestApp, key: &str, tool: &str) -> u16 {
    let args = match tool {
        "storage.put" => json!({ "key": "k", "content": "v" }),
        _ => json!({}),
    };
    invoke(app, key, tool, args).await.status().as_u16()
}

/// Moves the test clock to just after the start of the next window of `len_ms`.
fn to_next_window(app: &TestApp, len_ms: i64) {
    let now = app.wb.clock().now_ms();
    app.clock.advance_ms(len_ms - now.rem_euclid(len_ms) + 1);
}

db_test!(
    a_policy_limit_refuses_calls_of_its_tools_over_it_naming_the_limit_until_the_next_window,
    |backend| {
        let app = app!(backend);
        let (_, admin) = admin_with_key(&app).await;
        let member = app.user("bo@example.com", Role::Member).await;
        let key = app.api_key(&member).await;
        let policy = default_policy_with(
            &app,
            &admin,
            json!([{ "tools": "vault_*", "calls": 2, "every": "minute", "per": "key" }]),
        )
        .await;
        // The key can read the limits it is counted against before any refusal.
        let (_, me) = rest(&app, &key, "GET", "/v1/me", Value::Null).await;
        assert_eq!(
            me["limits"],
            json!([{ "tools": "vault_*", "calls": 2, "every": "minute", "per": "key" }]),
            "{me}"
        );
        assert_eq!(me["rate_limit_per_minute"], Value::Null);
        to_next_window(&app, 60_000);
        assert_eq!(status(&app, &key, "vault_list").await, 200);
        assert_eq!(status(&app, &key, "vault_list").await, 200);
        let res = invoke(&app, &key, "vault_list", json!({})).await;
        assert_eq!(res.status(), 429);
        let retry: u64 = res.headers()["retry-after"]
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        assert!((1..=60).contains(&retry), "{retry}");
        let body: Value = res.json().await.unwrap();
        assert_eq!(body["error"]["code"], "rate_limited");
        assert_eq!(body["error"]["meta"]["policy_id"], policy);
        assert_eq!(
            body["error"]["meta"]["limit"],
            "2 calls per minute per key on vault_*"
        );
        assert!(
            body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("2 calls per minute per key on vault_*"),
            "{body}"
        );
        // MCP answers the same in the documented error shape.
        let out = execute(&app, &key, json!([{ "tool": "vault_list", "args": {} }])).await;
        assert_eq!(out[0]["code"], "RATE_LIMITED", "{out:?}");
        assert_eq!(out[0]["limit"], "2 calls per minute per key on vault_*");
        assert_eq!(out[0]["policy_id"], policy);
        assert!(out[0]["retry_after_s"].as_u64().unwrap() >= 1);
        // Tools the pattern does not match are not counted; nor are other keys.
        let other = app.api_key(&member).await;
        assert_eq!(status(&app, &key, "storage.put").await, 200);
        assert_eq!(status(&app, &other, "vault_list").await, 200);
        // The refused calls are on record with their code.
        let (_, audit) = rest(
            &app,
            &admin,
            "GET",
            "/v1/audit?tool=vault_list",
            Value::Null,
        )
        .await;
        let limited = audit["data"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["error_code"] == "RATE_LIMITED")
            .count();
        assert_eq!(limited, 2, "{audit}");
        // The next minute the budget is back.
        to_next_window(&app, 60_000);
        assert_eq!(status(&app, &key, "vault_list").await, 200);
    }
);

db_test!(
    a_per_user_limit_is_shared_by_the_users_keys_and_a_per_project_one_by_everyone,
    |backend| {
        let app = app!(backend);
        let (_, admin) = admin_with_key(&app).await;
        let bo = app.user("bo@example.com", Role::Member).await;
        let cy = app.user("cy@example.com", Role::Member).await;
        let (bo1, bo2, cy1) = (
            app.api_key(&bo).await,
            app.api_key(&bo).await,
            app.api_key(&cy).await,
        );
        default_policy_with(
            &app,
            &admin,
            json!([
                { "calls": 3, "every": "day", "per": "user" },
                { "calls": 5, "every": "day", "per": "project" }
            ]),
        )
        .await;
        to_next_window(&app, 86_400_000);
        assert_eq!(status(&app, &bo1, "vault_list").await, 200);
        assert_eq!(status(&app, &bo2, "vault_list").await, 200);
        assert_eq!(status(&app, &bo1, "storage.put").await, 200);
        // Bo's three calls of the day are spent, over both keys.
        let res = invoke(&app, &bo2, "vault_list", json!({})).await;
        assert_eq!(res.status(), 429);
        let body: Value = res.json().await.unwrap();
        assert_eq!(body["error"]["meta"]["limit"], "3 calls per day per user");
        // Cy has their own three, but the project has two left: 3 + 2 = 5.
        assert_eq!(status(&app, &cy1, "vault_list").await, 200);
        assert_eq!(status(&app, &cy1, "vault_list").await, 200);
        let res = invoke(&app, &cy1, "vault_list", json!({})).await;
        assert_eq!(res.status(), 429);
        let retry: u64 = res.headers()["retry-after"]
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        assert!(retry > 86_000, "until the next UTC day: {retry}");
        let body: Value = res.json().await.unwrap();
        assert_eq!(
            body["error"]["meta"]["limit"],
            "5 calls per day per project"
        );
        // A refused call counts against no limit: the admin (under the same default policy)
        // is refused by the project's limit, not by a user count it never spent.
        assert_eq!(status(&app, &admin, "vault_list").await, 429);
        to_next_window(&app, 86_400_000);
        assert_eq!(status(&app, &cy1, "vault_list").await, 200);
        assert_eq!(status(&app, &bo1, "vault_list").await, 200);
    }
);

db_test!(
    a_monthly_quota_lasts_until_the_first_of_the_next_utc_month,
    |backend| {
        let app = app!(backend);
        let (_, admin) = admin_with_key(&app).await;
        let bo = app.user("bo@example.com", Role::Member).await;
        let key = app.api_key(&bo).await;
        default_policy_with(
            &app,
            &admin,
            json!([{ "tools": "storage.put", "calls": 1, "every": "month", "per": "key" }]),
        )
        .await;
        let (start, end) = workbench_core::limits::window(
            workbench_core::policy::Period::Month,
            app.wb.clock().now_ms(),
        );
        app.clock
            .advance_ms(start + 2 * 86_400_000 - app.wb.clock().now_ms());
        assert_eq!(status(&app, &key, "storage.put").await, 200);
        // Days later, the same month: still refused.
        app.clock.advance_ms(20 * 86_400_000);
        let res = invoke(
            &app,
            &key,
            "storage.put",
            json!({ "key": "k", "content": "v" }),
        )
        .await;
        assert_eq!(res.status(), 429);
        let retry: i64 = res.headers()["retry-after"]
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(retry, (end - app.wb.clock().now_ms() + 999) / 1000);
        app.clock.advance_ms(end - app.wb.clock().now_ms());
        assert_eq!(status(&app, &key, "storage.put").await, 200);
    }
);

db_test!(
    an_egress_quota_refuses_calls_once_the_days_bytes_are_spent,
    |backend| {
        let app = app!(
            backend,
            Options {
                egress_allow_private: vec!["127.0.0.1"],
                ..Default::default()
            }
        );
        let (admin, admin_key) = admin_with_key(&app).await;
        let fake = fakes::start().await;
        app.wb
            .egress()
            .add(&admin, &format!("127.0.0.1:{}", fake.addr.port()))
            .await
            .unwrap();
        let bo = app.user("bo@example.com", Role::Member).await;
        let key = app.api_key(&bo).await;
        default_policy_with(
            &app,
            &admin_key,
            json!([{ "tools": "http.fetch", "egress_bytes": 1000, "every": "day", "per": "user" }]),
        )
        .await;
        to_next_window(&app, 86_400_000);
        let fetch = json!({ "url": fake.url("/echo"), "method": "POST", "body": "x".repeat(400) });
        // Each call sends 400 bytes and more: the third finds the quota spent.
        let mut ran = 0;
        let mut last = 0;
        for _ in 0..5 {
            last = invoke(&app, &key, "http.fetch", fetch.clone())
                .await
                .status()
                .as_u16();
            if last != 200 {
                break;
            }
            ran += 1;
        }
        assert_eq!(last, 429);
        assert!(
            (1..=2).contains(&ran),
            "{ran} calls ran under a 1000-byte quota"
        );
        // Other tools are not under it.
        assert_eq!(status(&app, &key, "vault_list").await, 200);
        to_next_window(&app, 86_400_000);
        assert_eq!(invoke(&app, &key, "http.fetch", fetch).await.status(), 200);
    }
);

db_test!(
    limits_that_cannot_be_counted_are_refused_whole_and_nothing_is_stored,
    |backend| {
        let app = app!(backend);
        let (_, admin) = admin_with_key(&app).await;
        for (limits, want) in [
            (
                json!([{ "calls": 0, "every": "minute", "per": "key" }]),
                "calls must be 1",
            ),
            (
                json!([{ "calls": 5, "every": "fortnight", "per": "key" }]),
                "fortnight",
            ),
            (
                json!([{ "calls": 5, "every": "minute", "per": "team" }]),
                "team",
            ),
            (
                json!([{ "egress_bytes": 5, "every": "second", "per": "key" }]),
                "hour, day or month",
            ),
            (
                json!([{ "calls": 5, "egress_bytes": 5, "every": "day", "per": "key" }]),
                "not both",
            ),
            (
                json!([{ "calls": 5, "every": "day", "per": "key", "tools": "a*b" }]),
                "tools:",
            ),
            (
                json!([{ "calls": 5, "every": "day", "per": "key", "burst": 9 }]),
                "burst",
            ),
            (json!({ "calls": 5 }), "limits"),
        ] {
            let (status, body) = rest(
                &app,
                &admin,
                "POST",
                "/v1/policies",
                json!({ "name": "p", "tool_allowlist": { "mode": "open" }, "limits": limits }),
            )
            .await;
            assert_eq!(status, 422, "{limits}: {body}");
            let message = body["error"]["message"].as_str().unwrap_or_default();
            assert!(message.contains(want), "{limits}: {message}");
        }
        let (_, list) = rest(&app, &admin, "GET", "/v1/policies", Value::Null).await;
        assert_eq!(list["data"].as_array().unwrap().len(), 0, "{list}");

        // A valid one reads back as written, and raising its number keeps the window's count.
        let id = default_policy_with(
            &app,
            &admin,
            json!([{ "calls": 2, "every": "hour", "per": "project" }]),
        )
        .await;
        let (_, got) = rest(
            &app,
            &admin,
            "GET",
            &format!("/v1/policies/{id}"),
            Value::Null,
        )
        .await;
        assert_eq!(
            got["limits"],
            json!([{ "tools": "*", "calls": 2, "every": "hour", "per": "project" }])
        );
        to_next_window(&app, 3_600_000);
        assert_eq!(status(&app, &admin, "vault_list").await, 200);
        assert_eq!(status(&app, &admin, "vault_list").await, 200);
        assert_eq!(status(&app, &admin, "vault_list").await, 429);
        let (s, body) = rest(
            &app,
            &admin,
            "PUT",
            &format!("/v1/policies/{id}"),
            json!({ "name": "limited", "default": true, "tool_allowlist": { "mode": "open" },
                    "limits": [{ "calls": 3, "every": "hour", "per": "project" }] }),
        )
        .await;
        assert_eq!(s, 200, "{body}");
        assert_eq!(status(&app, &admin, "vault_list").await, 200);
        assert_eq!(status(&app, &admin, "vault_list").await, 429);
    }
);

db_test!(
    the_policies_page_saves_and_shows_limits_written_one_per_line,
    |backend| {
        let app = app!(backend);
        let (_, key) = admin_with_key(&app).await;
        let b = app.browser();
        assert!(b
            .sign_in("ada@example.com", crate::helpers::PASSWORD)
            .await
            .status()
            .is_success());
        let form = |limits: &'static str| {
            vec![
                ("name", "portal"),
                ("mode", "open"),
                ("allow", ""),
                ("deny", ""),
                ("require_confirmation", ""),
                ("default", "on"),
                ("limits", limits),
            ]
        };
        let res = b
            .call("save_policy", &form("60 calls per fortnight per key"))
            .await;
        let text = res.text().await.unwrap();
        assert!(text.contains("fortnight"), "{text}");
        let res = b
            .call(
                "save_policy",
                &form(
                    "60 calls per minute per key on github.*\n1000 egress bytes per day per user",
                ),
            )
            .await;
        assert!(res.status().is_success(), "{}", res.text().await.unwrap());
        let page = b.call("policies_page", &[]).await.text().await.unwrap();
        assert!(
            page.contains("60 calls per minute per key on github.*")
                && page.contains("1000 egress bytes per day per user"),
            "{page}"
        );
        let (_, list) = rest(&app, &key, "GET", "/v1/policies", Value::Null).await;
        assert_eq!(
            list["data"][0]["limits"][1],
            json!({ "tools": "*", "egress_bytes": 1000, "every": "day", "per": "user" })
        );
    }
);

db_test!(
    the_limits_the_readme_shows_are_accepted_as_written,
    |backend| {
        let app = app!(backend);
        let (admin, key) = admin_with_key(&app).await;
        let body = crate::tool_sets::documented_body("README.md", "/v1/policies");
        let (status, out) = rest(&app, &key, "POST", "/v1/policies", body.clone()).await;
        assert_eq!(status, 201, "{out}");
        assert_eq!(out["limits"].as_array().unwrap().len(), 4, "{out}");
        let lines: Vec<String> = app
            .wb
            .policies()
            .get(&admin, out["id"].as_str().unwrap())
            .await
            .unwrap()
            .limits
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            lines,
            [
                "20 calls per second per key on github_*",
                "600 calls per minute per key on github_*",
                "5000 calls per day per user",
                "1000000000 egress bytes per month per project on http.fetch"
            ]
        );
    }
);

db_test!(
    usage_by_user_counts_outcomes_limit_refusals_and_latency_percentiles,
    |backend| {
        let app = app!(backend);
        let (_, admin) = admin_with_key(&app).await;
        let bo = app.user("bo@example.com", Role::Member).await;
        let cy = app.user("cy@example.com", Role::Member).await;
        let (bo_key, cy_key) = (app.api_key(&bo).await, app.api_key(&cy).await);
        default_policy_with(
            &app,
            &admin,
            json!([{ "tools": "vault_list", "calls": 2, "every": "hour", "per": "user" }]),
        )
        .await;
        // An hour's window: a jump of a day would also outlive the portal session below.
        to_next_window(&app, 3_600_000);
        for _ in 0..3 {
            status(&app, &bo_key, "vault_list").await;
        }
        assert_eq!(status(&app, &cy_key, "storage.put").await, 200);
        // A call that fails in its handler: no such object.
        let res = invoke(&app, &cy_key, "storage.get", json!({ "key": "missing" })).await;
        assert!(!res.status().is_success());
        let today = &workbench_core::clock::rfc3339(app.wb.clock().now_ms())[..10];
        let get = |key: &str, group: &str| {
            let path = format!("/v1/usage/calls?from={today}&to={today}&group_by={group}");
            let key = key.to_owned();
            let app = &app;
            async move { rest(app, &key, "GET", &path, Value::Null).await }
        };
        let (s, body) = get(&admin, "user").await;
        assert_eq!(s, 200, "{body}");
        let rows = body["data"].as_array().unwrap();
        let row = |email: &str| {
            rows.iter()
                .find(|r| r["email"] == email)
                .unwrap_or_else(|| panic!("{email} in {body}"))
                .clone()
        };
        let b = row("bo@example.com");
        assert_eq!(b["user"], bo.user_id);
        assert_eq!(
            (
                &b["calls"],
                &b["succeeded"],
                &b["failed"],
                &b["rate_limited"]
            ),
            (&json!(3), &json!(2), &json!(1), &json!(1)),
            "{b}"
        );
        assert!((b["error_rate"].as_f64().unwrap() - 1.0 / 3.0).abs() < 1e-9);
        let c = row("cy@example.com");
        assert_eq!(
            (&c["calls"], &c["failed"], &c["rate_limited"]),
            (&json!(2), &json!(1), &json!(0)),
            "{c}"
        );
        for r in rows {
            let (p50, p95, p99) = (
                r["p50_ms"].as_i64().unwrap(),
                r["p95_ms"].as_i64().unwrap(),
                r["p99_ms"].as_i64().unwrap(),
            );
            assert!(p50 <= p95 && p95 <= p99, "{r}");
        }
        // By tool, the refusals are on the tool; a member sees only their own calls.
        let (_, by_tool) = get(&admin, "tool").await;
        let vault = by_tool["data"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["tool"] == "vault_list")
            .unwrap()
            .clone();
        assert_eq!(vault["rate_limited"], 1, "{by_tool}");
        let (_, mine) = get(&cy_key, "user").await;
        let emails: Vec<&Value> = mine["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| &r["email"])
            .collect();
        assert_eq!(emails, [&json!("cy@example.com")], "{mine}");
        let (_, by_day) = get(&admin, "day").await;
        assert_eq!(by_day["data"][0]["day"], *today, "{by_day}");
        assert_eq!(by_day["data"][0]["calls"], 5);
        let (s, _) = get(&admin, "planet").await;
        assert_eq!(s, 400);
        // The Usage page's "By person" shows the same counts.
        let b = app.browser();
        assert!(b
            .sign_in("ada@example.com", crate::helpers::PASSWORD)
            .await
            .status()
            .is_success());
        let page: Value = b
            .call("usage_page", &[("from", today), ("to", today)])
            .await
            .json()
            .await
            .unwrap();
        let bo_row = page["by_user"]
            .as_array()
            .unwrap_or_else(|| panic!("{page}"))
            .iter()
            .find(|r| r["email"] == "bo@example.com")
            .unwrap_or_else(|| panic!("{page}"))
            .clone();
        assert_eq!(
            (&bo_row["calls"], &bo_row["rate_limited"]),
            (&json!(3), &json!(1)),
            "{bo_row}"
        );
    }
);

db_test!(
    a_configuration_file_carries_a_policys_limits_and_plans_their_change,
    |backend| {
        let app = app!(backend);
        let (_, key) = admin_with_key(&app).await;
        default_policy_with(
            &app,
            &key,
            json!([{ "tools": "vault_*", "calls": 2, "every": "minute", "per": "key" }]),
        )
        .await;
        let file = crate::config_file::export_json(&app, &key).await;
        assert_eq!(
            file["policies"][0]["limits"],
            json!([{ "tools": "vault_*", "calls": 2, "every": "minute", "per": "key" }]),
            "{file}"
        );
        let mut changed = file.clone();
        changed["policies"][0]["limits"][0]["calls"] = json!(5);
        let yaml = serde_json::to_string(&changed).unwrap();
        let (status, plan) = crate::config_file::apply(&app, &key, &yaml, true).await;
        assert_eq!(status, 200, "{plan}");
        assert_eq!(plan["diff"], "~ policy limited: limits\n", "{plan}");
        let mut bad = file.clone();
        bad["policies"][0]["limits"][0]["calls"] = json!(0);
        let (status, out) =
            crate::config_file::apply(&app, &key, &serde_json::to_string(&bad).unwrap(), false)
                .await;
        assert_eq!(status, 422, "{out}");
        assert!(out.to_string().contains("calls must be 1"), "{out}");
        let (status, out) = crate::config_file::apply(&app, &key, &yaml, false).await;
        assert_eq!(status, 200, "{out}");
        let file = crate::config_file::export_json(&app, &key).await;
        assert_eq!(file["policies"][0]["limits"][0]["calls"], 5);
    }
);
