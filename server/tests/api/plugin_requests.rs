//! Every shipped plugin tool against a recording fake of its provider on loopback: the request
//! it sends (method, path, query, body, the injected credential, the integration's fixed
//! headers) is the one the provider documents, and the reply is shaped as its definition says
//! (including Slack's `ok: false` and GraphQL's `errors` on HTTP 200).

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::{Json, Router};
use serde_json::{json, Value};
use workbench_core::connections::Credential;
use workbench_core::integrations::IntegrationSettings;

use crate::helpers::{admin_with_key, execute, Options};
use crate::{app, db_test};

#[derive(Debug, Clone)]
struct Seen {
    method: String,
    path: String,
    query: BTreeMap<String, String>,
    headers: HeaderMap,
    body: Option<Value>,
}

#[derive(Default)]
struct Recorder {
    seen: Mutex<Vec<Seen>>,
    /// "METHOD /path" → JSON reply (status 200).
    replies: Mutex<HashMap<String, Value>>,
}

async fn record(State(r): State<Arc<Recorder>>, method: Method, uri: Uri, headers: HeaderMap, body: Bytes) -> Response {
    let query = uri.query().map(|q| url::form_urlencoded::parse(q.as_bytes()).into_owned().collect()).unwrap_or_default();
    let body = (!body.is_empty()).then(|| serde_json::from_slice(&body).unwrap_or(Value::String(String::from_utf8_lossy(&body).into_owned())));
    r.seen.lock().unwrap().push(Seen { method: method.to_string(), path: uri.path().to_owned(), query, headers, body });
    match r.replies.lock().unwrap().get(&format!("{method} {}", uri.path())) {
        Some(v) => Json(v.clone()).into_response(),
        None => (StatusCode::NOT_FOUND, Json(json!({ "message": "Not Found" }))).into_response(),
    }
}

async fn start() -> (SocketAddr, Arc<Recorder>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let state = Arc::new(Recorder::default());
    let app = Router::new().fallback(record).with_state(state.clone());
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (addr, state)
}

struct Case {
    tool: &'static str,
    args: Value,
    method: &'static str,
    path: &'static str,
    query: &'static [(&'static str, &'static str)],
    body: Option<Value>,
    reply: Value,
    /// The tool's result, or the text its error must contain.
    expect: Result<Value, &'static str>,
}

fn case(tool: &'static str, args: Value, method: &'static str, path: &'static str) -> Case {
    Case { tool, args, method, path, query: &[], body: None, reply: json!({}), expect: Ok(json!({})) }
}

impl Case {
    fn query(mut self, q: &'static [(&'static str, &'static str)]) -> Self {
        self.query = q;
        self
    }
    fn body(mut self, b: Value) -> Self {
        self.body = Some(b);
        self
    }
    fn reply(mut self, r: Value, expect: Value) -> Self {
        self.reply = r;
        self.expect = Ok(expect);
        self
    }
    fn fails(mut self, r: Value, why: &'static str) -> Self {
        self.reply = r;
        self.expect = Err(why);
        self
    }
}

const GITHUB_TOKEN: &str = "gho_contract_token_1";
const SLACK_TOKEN: &str = "xoxb-contract-token-2";
const LINEAR_KEY: &str = "lin_api_contract_key_3";
const SUPERSET_SESSION: &str = "superset-contract-session-4";

fn cases() -> Vec<Case> {
    vec![
        // GitHub REST v3 (docs.github.com/rest)
        case("github_get_user", json!({}), "GET", "/user").reply(
            json!({ "login": "octocat", "id": 1, "name": "The Octocat", "email": "octo@example.com", "html_url": "https://github.com/octocat", "plan": { "name": "pro" } }),
            json!({ "login": "octocat", "id": 1, "name": "The Octocat", "email": "octo@example.com", "html_url": "https://github.com/octocat" }),
        ),
        case("github_list_repos", json!({ "visibility": "private", "per_page": 5 }), "GET", "/user/repos")
            .query(&[("per_page", "5"), ("sort", "updated"), ("visibility", "private")])
            .reply(
                json!([{ "full_name": "acme/demo", "private": true, "description": null, "default_branch": "main", "html_url": "h", "size": 10 }]),
                json!([{ "full_name": "acme/demo", "private": true, "description": null, "default_branch": "main", "html_url": "h" }]),
            ),
        case("github_list_prs", json!({ "owner": "acme", "repo": "demo", "state": "closed", "per_page": 2 }), "GET", "/repos/acme/demo/pulls")
            .query(&[("per_page", "2"), ("state", "closed")])
            .reply(
                json!([{ "number": 7, "title": "Fix", "state": "closed", "user": { "login": "ada" }, "head": { "ref": "fix" }, "base": { "ref": "main" }, "draft": false, "html_url": "h" }]),
                json!([{ "number": 7, "title": "Fix", "state": "closed", "user_login": "ada", "head_ref": "fix", "base_ref": "main", "draft": false, "html_url": "h" }]),
            ),
        case("github_get_pr", json!({ "owner": "acme", "repo": "demo", "number": 7 }), "GET", "/repos/acme/demo/pulls/7").reply(
            json!({ "number": 7, "title": "Fix", "state": "open", "body": "b", "user": { "login": "ada" }, "head": { "ref": "fix" }, "base": { "ref": "main" }, "mergeable": true, "merged": false, "html_url": "h" }),
            json!({ "number": 7, "title": "Fix", "state": "open", "body": "b", "user_login": "ada", "head_ref": "fix", "base_ref": "main", "mergeable": true, "merged": false, "html_url": "h" }),
        ),
        case("github_create_pr", json!({ "owner": "acme", "repo": "demo", "title": "Add X", "head": "feat-x", "base": "main" }), "POST", "/repos/acme/demo/pulls")
            .body(json!({ "title": "Add X", "head": "feat-x", "base": "main", "draft": false }))
            .reply(json!({ "number": 8, "title": "Add X", "state": "open", "html_url": "h", "id": 99 }), json!({ "number": 8, "title": "Add X", "state": "open", "html_url": "h" })),
        case("github_merge_pr", json!({ "owner": "acme", "repo": "demo", "number": 8, "merge_method": "squash" }), "PUT", "/repos/acme/demo/pulls/8/merge")
            .body(json!({ "merge_method": "squash" }))
            .reply(json!({ "merged": true, "sha": "abc", "message": "Pull Request successfully merged" }), json!({ "merged": true, "sha": "abc", "message": "Pull Request successfully merged" })),
        case("github_list_issues", json!({ "owner": "acme", "repo": "demo", "labels": "bug,ui" }), "GET", "/repos/acme/demo/issues")
            .query(&[("labels", "bug,ui"), ("per_page", "30"), ("state", "open")])
            .reply(json!([{ "number": 3, "title": "Crash", "state": "open", "user": { "login": "bob" }, "comments": 2, "html_url": "h" }]), json!([{ "number": 3, "title": "Crash", "state": "open", "user_login": "bob", "comments": 2, "html_url": "h" }])),
        case("github_create_issue", json!({ "owner": "acme", "repo": "demo", "title": "Bug", "labels": ["bug"], "assignees": ["ada"] }), "POST", "/repos/acme/demo/issues")
            .body(json!({ "title": "Bug", "labels": ["bug"], "assignees": ["ada"] }))
            .reply(json!({ "number": 4, "title": "Bug", "state": "open", "html_url": "h" }), json!({ "number": 4, "title": "Bug", "state": "open", "html_url": "h" })),
        case("github_add_issue_comment", json!({ "owner": "acme", "repo": "demo", "number": 4, "body": "On it" }), "POST", "/repos/acme/demo/issues/4/comments")
            .body(json!({ "body": "On it" }))
            .reply(json!({ "id": 11, "html_url": "h", "user": { "login": "ada" }, "body": "On it" }), json!({ "id": 11, "html_url": "h", "user_login": "ada" })),
        // A path argument cannot climb out of its segment.
        case("github_get_pr", json!({ "owner": "acme/../../admin", "repo": "demo", "number": 1 }), "GET", "/repos/acme%2F..%2F..%2Fadmin/demo/pulls/1")
            .fails(json!(null), "Not Found"),
        // Slack Web API (api.slack.com/methods): JSON bodies, errors as `ok: false` on HTTP 200.
        case("slack_send_message", json!({ "channel": "C123", "text": "Deploy done" }), "POST", "/api/chat.postMessage")
            .body(json!({ "channel": "C123", "text": "Deploy done" }))
            .reply(json!({ "ok": true, "channel": "C123", "ts": "1700000000.000100", "message": { "text": "Deploy done", "type": "message" } }), json!({ "channel": "C123", "ts": "1700000000.000100", "message_text": "Deploy done" })),
        case("slack_send_message", json!({ "channel": "C404", "text": "hi", "thread_ts": "1.2" }), "POST", "/api/chat.postMessage")
            .body(json!({ "channel": "C404", "text": "hi", "thread_ts": "1.2" }))
            .fails(json!({ "ok": false, "error": "channel_not_found" }), "Slack refused the request: channel_not_found"),
        case("slack_list_channels", json!({ "limit": 50 }), "GET", "/api/conversations.list")
            .query(&[("exclude_archived", "true"), ("limit", "50"), ("types", "public_channel,private_channel")])
            .reply(
                json!({ "ok": true, "channels": [{ "id": "C1", "name": "general", "is_private": false, "num_members": 9, "topic": {} }], "response_metadata": {} }),
                json!([{ "id": "C1", "name": "general", "is_private": false, "num_members": 9 }]),
            ),
        case("slack_get_user", json!({ "user": "U42" }), "GET", "/api/users.info").query(&[("user", "U42")]).reply(
            json!({ "ok": true, "user": { "id": "U42", "name": "ada", "real_name": "Ada L", "tz": "Europe/London", "profile": { "email": "ada@example.com" } } }),
            json!({ "id": "U42", "name": "ada", "real_name": "Ada L", "profile_email": "ada@example.com", "tz": "Europe/London" }),
        ),
        case("slack_add_reaction", json!({ "channel": "C1", "timestamp": "1.2", "name": "tada" }), "POST", "/api/reactions.add")
            .body(json!({ "channel": "C1", "timestamp": "1.2", "name": "tada" }))
            .reply(json!({ "ok": true }), json!({ "ok": true })),
        // Linear GraphQL (developers.linear.app): one endpoint, errors in `errors` on HTTP 200.
        case("linear_get_viewer", json!({}), "POST", "/graphql")
            .body(json!({ "query": "query { viewer { id name email } }" }))
            .reply(json!({ "data": { "viewer": { "id": "u1", "name": "Lin", "email": "lin@example.com" } } }), json!({ "id": "u1", "name": "Lin", "email": "lin@example.com" })),
        case("linear_list_teams", json!({}), "POST", "/graphql")
            .body(json!({ "query": "query { teams { nodes { id name key } } }" }))
            .reply(json!({ "data": { "teams": { "nodes": [{ "id": "t1", "name": "Eng", "key": "ENG" }] } } }), json!([{ "id": "t1", "name": "Eng", "key": "ENG" }])),
        case("linear_list_issues", json!({ "limit": 3 }), "POST", "/graphql")
            .body(json!({
                "query": "query Issues($first: Int) { issues(first: $first, orderBy: updatedAt) { nodes { id identifier title url state { name } } } }",
                "variables": { "first": 3 }
            }))
            .reply(
                json!({ "data": { "issues": { "nodes": [{ "id": "i1", "identifier": "ENG-1", "title": "T", "url": "u", "state": { "name": "Todo" } }] } } }),
                json!([{ "id": "i1", "identifier": "ENG-1", "title": "T", "url": "u", "state": { "name": "Todo" } }]),
            ),
        case("linear_create_issue", json!({ "team_id": "t1", "title": "Flaky test", "priority": 2 }), "POST", "/graphql")
            .body(json!({
                "query": "mutation IssueCreate($input: IssueCreateInput!) { issueCreate(input: $input) { success issue { id identifier title url } } }",
                "variables": { "input": { "teamId": "t1", "title": "Flaky test", "priority": 2 } }
            }))
            .reply(
                json!({ "data": { "issueCreate": { "success": true, "issue": { "id": "i1", "identifier": "ENG-1", "title": "Flaky test", "url": "u" } } } }),
                json!({ "id": "i1", "identifier": "ENG-1", "title": "Flaky test", "url": "u" }),
            ),
        case("linear_update_issue", json!({ "issue_id": "i404", "state_id": "s2" }), "POST", "/graphql")
            .body(json!({
                "query": "mutation IssueUpdate($id: String!, $input: IssueUpdateInput!) { issueUpdate(id: $id, input: $input) { success issue { id identifier title url state { name } } } }",
                "variables": { "id": "i404", "input": { "stateId": "s2" } }
            }))
            .fails(json!({ "data": null, "errors": [{ "message": "Entity not found: Issue" }] }), "Linear refused the request: Entity not found: Issue"),
        // Superset REST API (superset.apache.org/docs/api): rison `q`, session cookie.
        case("superset_list_dashboards", json!({}), "GET", "/api/v1/dashboard/")
            .query(&[("q", "(page:0,page_size:25)")])
            .reply(
                json!({ "count": 1, "result": [{ "id": 3, "dashboard_title": "Sales", "url": "/superset/dashboard/3/", "changed_on_delta_humanized": "a day ago", "owners": [] }] }),
                json!([{ "id": 3, "dashboard_title": "Sales", "url": "/superset/dashboard/3/", "changed_on_delta_humanized": "a day ago" }]),
            ),
        case("superset_list_charts", json!({ "page_size": 10 }), "GET", "/api/v1/chart/")
            .query(&[("q", "(page:0,page_size:10)")])
            .reply(json!({ "count": 1, "result": [{ "id": 5, "slice_name": "Revenue", "viz_type": "line", "owners": [] }] }), json!([{ "id": 5, "slice_name": "Revenue", "viz_type": "line" }])),
        case("superset_get_chart_data", json!({ "chart_id": 5 }), "GET", "/api/v1/chart/5/data/")
            .reply(json!({ "result": [{ "rowcount": 1, "data": [{ "x": 1 }] }] }), json!([{ "rowcount": 1, "data": [{ "x": 1 }] }])),
        case("superset_list_databases", json!({}), "GET", "/api/v1/database/")
            .reply(json!({ "result": [{ "id": 1, "database_name": "examples", "backend": "postgresql", "uuid": "x" }] }), json!([{ "id": 1, "database_name": "examples", "backend": "postgresql" }])),
        // Hacker News Firebase API (github.com/HackerNews/API): no credential.
        case("hackernews_get_item", json!({ "id": 8863 }), "GET", "/v0/item/8863.json").reply(
            json!({ "id": 8863, "type": "story", "by": "dhouston", "title": "My YC app", "url": "http://x", "score": 111, "time": 1175714200, "descendants": 71, "kids": [1, 2] }),
            json!({ "id": 8863, "type": "story", "by": "dhouston", "title": "My YC app", "url": "http://x", "score": 111, "time": 1175714200, "descendants": 71, "kids": [1, 2] }),
        ),
        case("hackernews_get_user", json!({ "username": "pg" }), "GET", "/v0/user/pg.json")
            .reply(json!({ "id": "pg", "karma": 155111, "about": "a", "created": 1160418092, "submitted": [1, 2] }), json!({ "id": "pg", "karma": 155111, "about": "a", "created": 1160418092 })),
    ]
}

fn settings(base: &str) -> BTreeMap<String, IntegrationSettings> {
    let mut m = BTreeMap::new();
    for (name, path) in [("github", ""), ("slack", "/api"), ("linear", ""), ("superset", ""), ("hackernews", "")] {
        m.insert(name.to_owned(), IntegrationSettings { base_url: Some(format!("{base}{path}")), ..Default::default() });
    }
    m
}

/// The credential each integration must carry, as (header, value).
fn credential_header(tool: &str) -> Option<(&'static str, String)> {
    match tool.split('_').next().unwrap() {
        "github" => Some(("authorization", format!("Bearer {GITHUB_TOKEN}"))),
        "slack" => Some(("authorization", format!("Bearer {SLACK_TOKEN}"))),
        "linear" => Some(("authorization", LINEAR_KEY.to_owned())),
        "superset" => Some(("cookie", format!("session={SUPERSET_SESSION}"))),
        _ => None,
    }
}

db_test!(every_plugin_tool_sends_its_providers_documented_request, |backend| {
    let (addr, recorder) = start().await;
    let app = app!(backend, Options { integrations: settings(&format!("http://{addr}")), ..Default::default() });
    let (who, key) = admin_with_key(&app).await;
    let oauth = |t: &str| Credential::Oauth2 { access_token: t.to_owned(), refresh_token: None, expires_at: None };
    for (name, c) in [
        ("github", oauth(GITHUB_TOKEN)),
        ("slack", oauth(SLACK_TOKEN)),
        ("linear", Credential::ApiKey { key: LINEAR_KEY.into() }),
        ("superset", Credential::Cookie { value: SUPERSET_SESSION.into() }),
    ] {
        app.wb.connections().store(&who.project_id, &who.user_id, name, &c).await.unwrap();
    }

    let all = cases();
    let covered: std::collections::BTreeSet<&str> = all.iter().map(|c| c.tool).collect();
    for i in app.wb.integrations().all() {
        for t in &i.def.tools {
            assert!(covered.contains(t.name.as_str()) || t.handler.is_some(), "{} has no request case", t.name);
        }
    }
    for c in all {
        recorder.seen.lock().unwrap().clear();
        // A null reply: the fake answers 404 `{"message": "Not Found"}`.
        *recorder.replies.lock().unwrap() =
            if c.reply.is_null() { HashMap::new() } else { HashMap::from([(format!("{} {}", c.method, c.path), c.reply.clone())]) };
        let out = execute(&app, &key, json!([{ "tool": c.tool, "args": c.args }])).await;
        let seen = recorder.seen.lock().unwrap().clone();
        assert_eq!(seen.len(), 1, "{}: one request, saw {seen:?}", c.tool);
        let s = &seen[0];
        assert_eq!((s.method.as_str(), s.path.as_str()), (c.method, c.path), "{}", c.tool);
        let query: BTreeMap<String, String> = c.query.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        assert_eq!(s.query, query, "{}: query", c.tool);
        assert_eq!(s.body, c.body, "{}: body", c.tool);
        match credential_header(c.tool) {
            Some((h, v)) => assert_eq!(s.headers.get(h).and_then(|x| x.to_str().ok()), Some(v.as_str()), "{}: credential", c.tool),
            None => assert!(s.headers.get("authorization").is_none() && s.headers.get("cookie").is_none(), "{}: no credential", c.tool),
        }
        if c.tool.starts_with("github_") {
            assert_eq!(s.headers.get("accept").unwrap(), "application/vnd.github+json");
            assert_eq!(s.headers.get("x-github-api-version").unwrap(), "2022-11-28");
        }
        if c.body.is_some() {
            assert!(s.headers.get("content-type").unwrap().to_str().unwrap().starts_with("application/json"), "{}", c.tool);
        }
        match c.expect {
            Ok(expected) => assert_eq!(out[0]["result"], expected, "{}: {:?}", c.tool, out[0]),
            Err(why) => {
                assert_eq!(out[0]["code"], "TOOL_ERROR", "{}: {:?}", c.tool, out[0]);
                let text = out[0]["handler_error"].as_str().unwrap_or_default();
                assert!(text.contains(why), "{}: {text:?} lacks {why:?}", c.tool);
            }
        }
    }
});

db_test!(hacker_news_top_stories_reads_the_list_then_each_item, |backend| {
    let (addr, recorder) = start().await;
    let app = app!(backend, Options { integrations: settings(&format!("http://{addr}")), ..Default::default() });
    let (_, key) = admin_with_key(&app).await;
    {
        let mut r = recorder.replies.lock().unwrap();
        r.insert("GET /v0/newstories.json".into(), json!([30, 20, 10]));
        for (id, title) in [(30, "Thirty"), (20, "Twenty"), (10, "Ten")] {
            r.insert(format!("GET /v0/item/{id}.json"), json!({ "id": id, "title": title, "url": "u", "score": id, "by": "pg", "descendants": 1, "kids": [1] }));
        }
    }
    let out = execute(&app, &key, json!([{ "tool": "hackernews_top_stories", "args": { "list": "new", "limit": 2 } }])).await;
    assert_eq!(
        out[0]["result"],
        json!({ "stories": [
            { "id": 30, "title": "Thirty", "url": "u", "score": 30, "by": "pg", "comments": 1 },
            { "id": 20, "title": "Twenty", "url": "u", "score": 20, "by": "pg", "comments": 1 }
        ] }),
        "{:?}",
        out[0]
    );
    let mut paths: Vec<String> = recorder.seen.lock().unwrap().iter().map(|s| s.path.clone()).collect();
    paths.sort();
    assert_eq!(paths, ["/v0/item/20.json", "/v0/item/30.json", "/v0/newstories.json"], "only the first `limit` items are fetched");
    // A list name outside the schema's enum never reaches the API.
    recorder.seen.lock().unwrap().clear();
    let out = execute(&app, &key, json!([{ "tool": "hackernews_top_stories", "args": { "list": "../admin" } }])).await;
    assert_eq!(out[0]["code"], "INVALID_ARGUMENTS");
    assert!(recorder.seen.lock().unwrap().is_empty());
});
