//! The portal's Tools, Egress and Audit pages (their server functions and rendered HTML).

use serde_json::{json, Value};
use workbench_core::auth::Role;

use crate::helpers::{admin_with_key, execute, mcp_call, PASSWORD};
use crate::{app, db_test};

db_test!(the_tools_page_searches_like_search_tools, |backend| {
    let app = app!(backend);
    let (_, key) = admin_with_key(&app).await;
    let b = app.browser();
    b.sign_in("ada@example.com", PASSWORD).await;
    let first: Value = b.call("tools_page", &[]).await.json().await.unwrap();
    let total = first["total"].as_u64().unwrap() as usize;
    assert!(total > 200, "{first}");
    assert_eq!(
        (
            first["tools"].as_array().unwrap().len(),
            first["matching"].as_u64().unwrap() as usize,
            first["page"].as_u64(),
            first["pages"].as_u64().unwrap() as usize,
        ),
        (50, total, Some(1), total.div_ceil(50)),
        "fifty tools to a page"
    );
    let all = every_page(&b, &[]).await;
    let mut names: Vec<&str> = all["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names.len(), total, "the pages together list every tool");
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), total, "and each once");
    assert!(names.contains(&"http.fetch"));
    // Past the last page: the last page.
    let past: Value = b
        .call("tools_page", &[("page", "9999")])
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(past["page"], first["pages"]);
    assert!(!past["tools"].as_array().unwrap().is_empty());
    let res = b.call("tools_page", &[("page", "two")]).await;
    assert!(
        !res.status().is_success(),
        "a page that is not a number is refused"
    );
    let query = "read an object from storage";
    let hits: Value = b
        .call("tools_page", &[("query", query)])
        .await
        .json()
        .await
        .unwrap();
    // The same tools in the same order with the same scores as search_tools (at most 50).
    let (searched, _) = mcp_call(
        &app,
        &key,
        "search_tools",
        json!({ "query": query, "limit": 50 }),
    )
    .await;
    let pick = |v: &Value| -> Vec<(String, f64)> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|t| {
                (
                    t["name"].as_str().unwrap().to_owned(),
                    t["score"].as_f64().unwrap(),
                )
            })
            .collect()
    };
    assert_eq!(pick(&hits["tools"]), pick(&searched["tools"]));
    assert_eq!(hits["tools"][0]["name"], "storage.get");
    assert!(hits["tools"][0]["score"].as_f64().unwrap() > 0.0);
    assert!(hits["tools"][0]["input_schema"]
        .as_str()
        .unwrap()
        .contains("\"key\""));
    let html = b.get("/tools?q=fetch+url").await.text().await.unwrap();
    assert!(html.contains("http.fetch"));
    assert!(html.contains("Input schema"));
    // The rendered page links the next one, keeping the filters.
    let nav_of = |html: &str| {
        let nav = &html[html.find("tools-pages").expect("a page list")..];
        nav[..nav.find("</nav>").unwrap()].replace("&amp;", "&")
    };
    let nav = nav_of(&b.get("/tools?effects=write").await.text().await.unwrap());
    assert!(nav.contains("/tools?effects=write&page=2"), "{nav}");
    // With many pages, the first links the last and the last links back to the first.
    let all: Value = b.call("tools_page", &[]).await.json().await.unwrap();
    let pages = all["pages"].as_u64().unwrap();
    assert!(pages >= 3, "{pages} pages");
    let nav = nav_of(&b.get("/tools").await.text().await.unwrap());
    assert!(
        nav.contains(&format!("rel=\"last\" href=\"/tools?page={pages}\"")),
        "{nav}"
    );
    assert!(
        !nav.contains("rel=\"first\""),
        "page 1 does not link itself: {nav}"
    );
    let nav = nav_of(
        &b.get(&format!("/tools?page={pages}"))
            .await
            .text()
            .await
            .unwrap(),
    );
    assert!(
        nav.contains("rel=\"first\" href=\"/tools?page=1\"")
            && !nav.contains("rel=\"last\"")
            && !nav.contains("rel=\"next\""),
        "{nav}"
    );
});

/// Every page of the Tools page with these filters, their tools in order and their group
/// headings merged (the first of each integration), as one `{tools, groups, total}`.
async fn every_page(b: &crate::helpers::Browser, args: &[(&str, &str)]) -> Value {
    let (mut tools, mut groups) = (Vec::new(), Vec::<Value>::new());
    let mut page = 1;
    loop {
        let n = page.to_string();
        let mut form = args.to_vec();
        form.push(("page", n.as_str()));
        let data: Value = b.call("tools_page", &form).await.json().await.unwrap();
        assert_eq!(data["page"], page, "{data}");
        assert!(data["tools"].as_array().unwrap().len() <= 50);
        tools.extend(data["tools"].as_array().unwrap().iter().cloned());
        for g in data["groups"].as_array().unwrap() {
            if !groups.iter().any(|h| h["integration"] == g["integration"]) {
                groups.push(g.clone());
            }
        }
        if page >= data["pages"].as_u64().unwrap() {
            return json!({ "tools": tools, "groups": groups, "total": data["total"] });
        }
        page += 1;
    }
}

db_test!(
    the_tools_page_groups_by_integration_and_filters_by_side_effects_and_connection,
    |backend| {
        let app = app!(backend);
        let (who, _) = admin_with_key(&app).await;
        let github = workbench_core::connections::Credential::Oauth2 {
            access_token: "gho_x".into(),
            refresh_token: None,
            expires_at: None,
        };
        app.wb
            .connections()
            .store(&who.project_id, &who.user_id, "github", &github)
            .await
            .unwrap();
        let b = app.browser();
        b.sign_in("ada@example.com", PASSWORD).await;
        let page = |args: &'static [(&'static str, &'static str)]| every_page(&b, args);
        let all = page(&[]).await;
        let groups = all["groups"].as_array().unwrap();
        let group = |name: &str| {
            groups
                .iter()
                .find(|g| g["integration"] == name)
                .cloned()
                .unwrap_or_else(|| panic!("no {name} group"))
        };
        assert_eq!(
            (
                group("github")["connection"].as_str(),
                group("github")["logo"].as_str()
            ),
            (Some("connected"), Some("/logos/github.svg"))
        );
        assert_eq!(group("jira")["connection"], "not connected");
        assert_eq!(group("http")["connection"], "no account needed");
        assert!(
            groups[0]["logo"].is_null(),
            "built-ins come first: {}",
            groups[0]
        );
        let counted: u64 = groups.iter().map(|g| g["count"].as_u64().unwrap()).sum();
        assert_eq!(
            (counted as usize, all["tools"].as_array().unwrap().len()),
            (
                all["total"].as_u64().unwrap() as usize,
                all["total"].as_u64().unwrap() as usize
            )
        );
        assert!(all["total"].as_u64().unwrap() >= 194 + 9);

        let names = |v: &Value| {
            v["tools"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t["name"].as_str().unwrap().to_owned())
                .collect::<Vec<_>>()
        };
        let destructive = page(&[("effects", "destructive")]).await;
        assert!(destructive["tools"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t["side_effects"] == "destructive"));
        assert!(
            names(&destructive).contains(&"github_merge_pr".to_owned())
                && !names(&destructive).contains(&"github_get_user".to_owned())
        );
        let ready = names(&page(&[("connection", "ready")]).await);
        assert!(
            ready.contains(&"github_get_user".to_owned())
                && ready.contains(&"http.fetch".to_owned())
        );
        assert!(!ready.iter().any(|n| n.starts_with("jira_")));
        let waiting = names(&page(&[("connection", "needs_connection")]).await);
        assert!(waiting.contains(&"jira_create_issue".to_owned()));
        assert!(!waiting
            .iter()
            .any(|n| n.starts_with("github_") || n == "http.fetch"));
        // Filters combine with search.
        let hits = page(&[
            ("query", "merge a pull request"),
            ("effects", "destructive"),
        ])
        .await;
        assert_eq!(hits["tools"][0]["name"], "github_merge_pr");

        let html = b
            .get("/tools?effects=destructive&connection=ready")
            .await
            .text()
            .await
            .unwrap();
        assert!(html.contains("github_merge_pr") && !html.contains("jira_delete_issue"));
        assert!(
            html.contains("data-testid=\"tool-group\"")
                && html.contains("data-testid=\"tool-params\"")
        );
        assert!(
            html.contains("merge_method"),
            "the inputs table names each input"
        );
    }
);

db_test!(
    admins_manage_the_egress_allowlist_in_the_portal,
    |backend| {
        let app = app!(backend);
        admin_with_key(&app).await;
        app.user("bob@example.com", Role::Member).await;
        let a = app.browser();
        a.sign_in("ada@example.com", PASSWORD).await;
        assert_eq!(
            a.call("add_egress_rule", &[("pattern", "api.example.com")])
                .await
                .status(),
            200
        );
        let res = a
            .call("add_egress_rule", &[("pattern", "http://nope/")])
            .await;
        assert!(res.text().await.unwrap().contains("invalid egress pattern"));
        let page: Value = a.call("egress_page", &[]).await.json().await.unwrap();
        assert_eq!(
            page,
            json!({ "patterns": ["api.example.com"], "can_manage": true })
        );
        assert!(a
            .get("/egress")
            .await
            .text()
            .await
            .unwrap()
            .contains("api.example.com"));

        let b = app.browser();
        b.sign_in("bob@example.com", PASSWORD).await;
        let res = b
            .call("remove_egress_rule", &[("pattern", "api.example.com")])
            .await;
        assert!(res.text().await.unwrap().contains("only project admins"));
        let page: Value = b.call("egress_page", &[]).await.json().await.unwrap();
        assert_eq!(page["can_manage"], false);

        assert_eq!(
            a.call("remove_egress_rule", &[("pattern", "api.example.com")])
                .await
                .status(),
            200
        );
        let page: Value = a.call("egress_page", &[]).await.json().await.unwrap();
        assert_eq!(page["patterns"], json!([]));
    }
);

db_test!(
    the_audit_page_filters_pages_and_limits_members_to_their_own_calls,
    |backend| {
        let app = app!(backend);
        let (_, key) = admin_with_key(&app).await;
        let bob = app.user("bob@example.com", Role::Member).await;
        let bob_key = app.api_key(&bob).await;
        for i in 0..55 {
            execute(&app, &key, json!([{ "tool": "storage.put", "args": { "key": format!("k{i}"), "content": "x" } }])).await;
            app.clock.advance_ms(1);
        }
        execute(
            &app,
            &key,
            json!([{ "tool": "storage.get", "args": { "key": "missing" } }]),
        )
        .await;
        app.clock.advance_ms(1);
        execute(
            &app,
            &bob_key,
            json!([{ "tool": "storage.put", "args": { "key": "bob", "content": "x" } }]),
        )
        .await;

        let a = app.browser();
        a.sign_in("ada@example.com", PASSWORD).await;
        let first: Value = a.call("audit_page", &[]).await.json().await.unwrap();
        assert_eq!(first["rows"].as_array().unwrap().len(), 50);
        assert_eq!(
            first["rows"][0]["tool"], "storage.put",
            "newest first: bob's call"
        );
        let cursor = first["next"].as_str().unwrap().to_owned();
        let second: Value = a
            .call("audit_page", &[("cursor", cursor.as_str())])
            .await
            .json()
            .await
            .unwrap();
        assert_eq!(second["rows"].as_array().unwrap().len(), 7);
        assert!(second["next"].is_null());
        let failed: Value = a
            .call("audit_page", &[("status", "failed")])
            .await
            .json()
            .await
            .unwrap();
        assert_eq!(failed["rows"].as_array().unwrap().len(), 1);
        assert_eq!(failed["rows"][0]["tool"], "storage.get");
        assert_eq!(failed["rows"][0]["error_code"], "TOOL_ERROR");
        let by_tool: Value = a
            .call("audit_page", &[("tool", "storage.get")])
            .await
            .json()
            .await
            .unwrap();
        assert_eq!(by_tool["rows"].as_array().unwrap().len(), 1);
        let bob_key_id = app
            .wb
            .accounts()
            .authenticate_api_key(&bob_key)
            .await
            .unwrap()
            .api_key_id
            .unwrap();
        let by_key: Value = a
            .call("audit_page", &[("key", bob_key_id.as_str())])
            .await
            .json()
            .await
            .unwrap();
        assert_eq!(by_key["rows"].as_array().unwrap().len(), 1);
        let res = a.call("audit_page", &[("cursor", "garbage")]).await;
        assert!(res.text().await.unwrap().contains("invalid cursor"));
        let html = a.get("/audit?status=failed").await.text().await.unwrap();
        assert!(html.contains("TOOL_ERROR"));

        let b = app.browser();
        b.sign_in("bob@example.com", PASSWORD).await;
        let own: Value = b.call("audit_page", &[]).await.json().await.unwrap();
        assert_eq!(
            own["rows"].as_array().unwrap().len(),
            1,
            "members see their own calls only"
        );
    }
);

db_test!(
    the_vault_page_saves_replaces_and_deletes_without_showing_values,
    |backend| {
        let app = app!(backend);
        let (_, key) = admin_with_key(&app).await;
        let b = app.browser();
        b.sign_in("ada@example.com", PASSWORD).await;
        assert_eq!(
            b.call(
                "set_secret",
                &[("name", "GITHUB_TOKEN"), ("value", "ghp_portal_value_1")]
            )
            .await
            .status(),
            200
        );
        let res = b
            .call("set_secret", &[("name", "SHORT"), ("value", "12345")])
            .await;
        assert!(res.text().await.unwrap().contains("too short"));
        let page: Value = b.call("vault_page", &[]).await.json().await.unwrap();
        assert_eq!(page.as_array().unwrap().len(), 1);
        assert_eq!(page[0]["name"], "GITHUB_TOKEN");
        let first_id = page[0]["id"].as_str().unwrap().to_owned();
        assert_eq!(
            b.call(
                "set_secret",
                &[("name", "GITHUB_TOKEN"), ("value", "ghp_portal_value_2")]
            )
            .await
            .status(),
            200
        );
        let page: Value = b.call("vault_page", &[]).await.json().await.unwrap();
        assert_eq!(
            page[0]["id"],
            first_id.as_str(),
            "replacing keeps the secret's id"
        );
        let html = b.get("/vault").await.text().await.unwrap();
        assert!(html.contains("GITHUB_TOKEN"));
        assert!(!html.contains("ghp_portal_value"), "values are never shown");
        assert!(!page.to_string().contains("ghp_portal_value"));
        // Agents see the new value: the replaced one is no longer a secret, the new one is.
        let out = execute(&app, &key, json!([{ "tool": "storage.put", "args": { "key": "t", "content": "ghp_portal_value_2" } }])).await;
        assert_eq!(
            out[0]["result"]["redacted"],
            json!(["GITHUB_TOKEN"]),
            "{out:?}"
        );
        let out = execute(&app, &key, json!([{ "tool": "storage.put", "args": { "key": "t", "content": "ghp_portal_value_1" } }])).await;
        assert!(out[0]["result"]["redacted"].is_null(), "{out:?}");
        assert_eq!(
            b.call("delete_secret", &[("name", "GITHUB_TOKEN")])
                .await
                .status(),
            200
        );
        let page: Value = b.call("vault_page", &[]).await.json().await.unwrap();
        assert_eq!(page, json!([]));
    }
);

db_test!(
    the_audit_log_exports_as_csv_with_the_pages_filters_and_members_see_their_own,
    |backend| {
        let app = app!(backend);
        let (_, key) = admin_with_key(&app).await;
        let bob = app.user("bob@example.com", Role::Member).await;
        let bob_key = app.api_key(&bob).await;
        execute(
            &app,
            &key,
            json!([{ "tool": "storage.put", "args": { "key": "report", "content": "v" } }]),
        )
        .await;
        execute(
            &app,
            &key,
            json!([{ "tool": "storage.put", "args": { "key": 1 } }]),
        )
        .await;
        execute(
            &app,
            &bob_key,
            json!([{ "tool": "vault_list", "args": {} }]),
        )
        .await;

        let a = app.browser();
        a.sign_in("ada@example.com", PASSWORD).await;
        let res = a
            .client
            .get(format!("{}/audit.csv", a.base))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200);
        assert!(res.headers()["content-disposition"]
            .to_str()
            .unwrap()
            .contains("audit.csv"));
        let all = res.text().await.unwrap();
        let lines: Vec<&str> = all.trim_end().split("\r\n").collect();
        assert_eq!(
            lines[0],
            "at,action,tool,status,error_code,duration_ms,api_key_id,user_id,surface,tool_call_id,tool_set"
        );
        assert_eq!(lines.len(), 4, "{all}");
        assert!(
            lines.iter().any(|l| l.contains("vault_list")),
            "an admin sees the project"
        );
        let failed = a
            .client
            .get(format!("{}/audit.csv?status=failed", a.base))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        assert_eq!(failed.trim_end().split("\r\n").count(), 2, "{failed}");
        assert!(failed.contains("INVALID_ARGUMENTS"));
        let html = a.get("/audit").await.text().await.unwrap();
        assert!(
            html.contains("href=\"/audit.csv\""),
            "the page links its export"
        );

        let b = app.browser();
        b.sign_in("bob@example.com", PASSWORD).await;
        let own = b
            .client
            .get(format!("{}/audit.csv", b.base))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        assert_eq!(
            own.trim_end().split("\r\n").count(),
            2,
            "a member gets their own rows: {own}"
        );
        assert!(own.contains("vault_list") && !own.contains("storage.put"));
        assert_eq!(
            app.http()
                .get(app.url("/audit.csv"))
                .send()
                .await
                .unwrap()
                .status(),
            401
        );
    }
);
