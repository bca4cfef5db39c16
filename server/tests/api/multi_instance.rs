//! Two `workbench serve` processes on one fresh PostgreSQL database are one deployment: a flow
//! begun on one instance finishes on the other, as it does when a load balancer sends a user's
//! next request elsewhere. (Scheduled callbacks across processes: schedules.rs.)

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::cluster::{Cluster, ClusterOptions};
use crate::confirmations::post;
use crate::connections::{location, path_of};
use crate::fake_provider;
use crate::fake_upstream;
use crate::fakes;
use crate::helpers::{
    admin_with_key, execute, fresh_pg_database, mcp_call, within, Browser, TestApp, PASSWORD,
};

async fn cluster(options: ClusterOptions) -> Option<Cluster> {
    let url = fresh_pg_database().await?;
    Some(Cluster::start(&url, 2, options).await)
}

async fn signed_in(app: &TestApp) -> Browser {
    let b = app.browser();
    let res = b.sign_in("ada@example.com", PASSWORD).await;
    assert!(
        res.status().is_success(),
        "sign-in on {}: {}",
        app.base,
        res.status()
    );
    b
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_begun_on_one_instance_completes_on_the_other_and_the_wait_there_answers() {
    let fake = fake_provider::start().await;
    let issuer = fake.url("");
    let options = ClusterOptions {
        integrations: fake.settings(Some(&issuer)),
        ..Default::default()
    };
    let Some(c) = cluster(options).await else {
        return;
    };
    let (a, b) = (c.app(0), c.app(1));
    let (_, key) = admin_with_key(&a).await;

    let (link, _) = mcp_call(&a, &key, "connect", json!({ "integration": "github" })).await;
    let id = link["connectionId"].as_str().unwrap().to_owned();
    assert!(
        link["url"].as_str().unwrap().starts_with(&c.public_url),
        "{link}"
    );
    let waiting = {
        let (a, key, id) = (c.app(0), key.clone(), id.clone());
        tokio::spawn(async move {
            mcp_call(
                &a,
                &key,
                "wait_for_connection",
                json!({ "connectionId": id, "timeoutSec": 60 }),
            )
            .await
            .0
        })
    };

    // The person opens the link, consents at the provider and comes back, all on B.
    let browser = signed_in(&b).await;
    let res = browser.get(&path_of(link["url"].as_str().unwrap())).await;
    assert!(res.status().is_redirection(), "{}", res.status());
    let res = b.http().get(location(&res)).send().await.unwrap();
    assert_eq!(res.status(), 303, "the provider approves");
    let callback = location(&res);
    assert!(
        callback.starts_with(&format!("{}/oauth/callback", c.public_url)),
        "{callback}"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !waiting.is_finished(),
        "A's wait is still open before the callback"
    );
    let res = browser.get(&path_of(&callback)).await;
    let html = browser.get(&location(&res)).await.text().await.unwrap();
    assert!(html.contains("GitHub is connected"), "{html}");

    let out = tokio::time::timeout(Duration::from_secs(30), waiting)
        .await
        .expect("A's wait answered")
        .unwrap();
    assert_eq!(out, json!({ "status": "CONNECTED" }), "{}", c.logs());
    let got = execute(&a, &key, json!([{ "tool": "github_get_user", "args": {} }])).await;
    assert_eq!(
        got[0]["result"]["login"], "octocat",
        "the token B stored works on A: {}",
        got[0]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_server_registered_on_one_instance_is_callable_on_the_other_within_15_seconds() {
    let Some(c) = cluster(ClusterOptions::default()).await else {
        return;
    };
    let (a, b) = (c.app(0), c.app(1));
    let (_, key) = admin_with_key(&a).await;
    let up = fake_upstream::start().await;
    let out = execute(&a, &key, json!([{ "tool": "vault_set", "args": { "name": "FAKE_TOKEN", "value": "upstream-token-7f3a9c" } }])).await;
    assert!(out[0].get("result").is_some(), "{out:?}");
    let echo = json!([{ "tool": "fake.echo", "args": { "message": "from B" } }]);
    assert_eq!(
        execute(&b, &key, echo.clone()).await[0]["code"],
        "TOOL_NOT_FOUND",
        "not registered yet"
    );

    let body = json!({ "name": "fake", "transport": "http", "url": up.url(), "auth": { "type": "bearer", "secret_ref": "FAKE_TOKEN" }, "timeout_ms": 5000, "max_concurrency": 4 });
    let (status, server) = post(&a, &key, "/v1/mcp/servers", body).await;
    assert_eq!(status, 201, "{server}");
    let registered = Instant::now();
    assert_eq!(
        execute(&a, &key, echo.clone()).await[0]["result"],
        "Echo: from B",
        "callable on A at once"
    );
    let last = loop {
        let out = execute(&b, &key, echo.clone()).await.remove(0);
        if out.get("result").is_some() || registered.elapsed() > Duration::from_secs(15) {
            break out;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    assert_eq!(
        last["result"],
        "Echo: from B",
        "B runs the server's tools {:?} after registration: {last}",
        registered.elapsed()
    );
    assert_eq!(
        up.state.last_authorization.lock().unwrap().as_deref(),
        Some("Bearer upstream-token-7f3a9c"),
        "B resolved the vault secret"
    );
}

/// Polls `f` every 250 ms for up to 20 s (two of the instances' 15 s reload rounds, give or
/// take): whether it answered true.
async fn eventually(mut f: impl AsyncFnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(20) {
        if f().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    false
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_changed_in_place_on_one_instance_is_called_with_its_new_settings_on_the_other() {
    let Some(c) = cluster(ClusterOptions::default()).await else {
        return;
    };
    let (a, b) = (c.app(0), c.app(1));
    let (_, key) = admin_with_key(&a).await;
    let (first, second) = (fake_upstream::start().await, fake_upstream::start().await);
    let out = execute(&a, &key, json!([{ "tool": "vault_set", "args": { "name": "FAKE_TOKEN", "value": "upstream-token-7f3a9c" } }])).await;
    assert!(out[0].get("result").is_some(), "{out:?}");
    let body = json!({ "name": "fake", "transport": "http", "url": first.url(), "auth": { "type": "bearer", "secret_ref": "FAKE_TOKEN" }, "timeout_ms": 5000, "max_concurrency": 4 });
    let (status, server) = post(&a, &key, "/v1/mcp/servers", body).await;
    assert_eq!(status, 201, "{server}");
    let echo = json!([{ "tool": "fake.echo", "args": { "message": "from B" } }]);
    assert!(
        eventually(async || execute(&b, &key, echo.clone()).await[0]["result"] == "Echo: from B")
            .await,
        "B runs the server's tools on the first server"
    );
    assert!(first.state.calls.load(std::sync::atomic::Ordering::SeqCst) > 0);

    // The same server, moved to another address by a configuration file applied on A.
    let file: Value = a
        .http()
        .get(a.url("/v1/config?format=json"))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let mut moved = json!({ "version": 1, "mcp_servers": file["mcp_servers"] });
    moved["mcp_servers"][0]["url"] = json!(second.url());
    let (status, out) = post(&a, &key, "/v1/config/apply", moved).await;
    assert_eq!(status, 200, "{out}");
    assert_eq!(out["diff"], "~ mcp_server fake: url\n");
    assert!(
        eventually(async || {
            let out = execute(&b, &key, echo.clone()).await.remove(0);
            // A lists the second server's tools when it applies; only B calls one.
            out["result"] == "Echo: from B"
                && second.state.calls.load(std::sync::atomic::Ordering::SeqCst) > 0
        })
        .await,
        "B's calls reach the server at its new address, not the old session"
    );
    let listed: Value = b
        .http()
        .get(b.url("/v1/mcp/servers"))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        listed["data"][0]["id"], server["id"],
        "the same server, changed in place"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_held_on_one_instance_is_approved_in_the_other_instances_portal_and_its_repeat_gets_the_outcome(
) {
    let Some(c) = cluster(ClusterOptions::default()).await else {
        return;
    };
    let (a, b) = (c.app(0), c.app(1));
    let (_, admin) = admin_with_key(&a).await;
    let rules = json!({ "mode": "open", "require_confirmation": ["storage.put"] });
    let (status, pol) = post(
        &a,
        &admin,
        "/v1/policies",
        json!({ "name": "careful", "tool_allowlist": rules }),
    )
    .await;
    assert_eq!(status, 201, "{pol}");
    let (status, agent) = post(
        &a,
        &admin,
        "/v1/api-keys",
        json!({ "name": "agent", "policy_id": pol["id"] }),
    )
    .await;
    assert_eq!(status, 201, "{agent}");
    let agent = agent["key"].as_str().unwrap().to_owned();
    let put =
        json!({ "tool": "storage.put", "arguments": { "key": "report", "content": "q3 numbers" } });

    let (status, held) = post(&a, &agent, "/v1/tools/invoke", put.clone()).await;
    assert_eq!(status, 202, "{held}");
    let (call_id, conf) = (
        held["id"].as_str().unwrap().to_owned(),
        held["confirmation_id"].as_str().unwrap().to_owned(),
    );

    let browser = signed_in(&b).await;
    let page = browser.get(&format!("/confirmations/{conf}")).await;
    assert_eq!(page.status(), 200);
    assert!(
        page.text().await.unwrap().contains("storage.put"),
        "B's portal shows the held call"
    );
    let res = browser
        .call(
            "decide_confirmation",
            &[
                ("id", &conf),
                ("decision", "approve"),
                ("reason", "ok from B"),
            ],
        )
        .await;
    assert_eq!(res.status(), 200, "{}", res.text().await.unwrap());

    let (status, repeat) = post(&a, &agent, "/v1/tools/invoke", put).await;
    assert_eq!(status, 200, "{repeat}");
    assert_eq!(
        (repeat["id"].as_str(), repeat["status"].as_str()),
        (Some(call_id.as_str()), Some("succeeded")),
        "{repeat}"
    );
    assert_eq!(repeat["result"]["key"], "report");
    let out = execute(
        &a,
        &agent,
        json!([{ "tool": "storage.get", "args": { "key": "report" } }]),
    )
    .await;
    assert_eq!(
        out[0]["result"]["content"], "q3 numbers",
        "the approved call ran once, on B: {}",
        out[0]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_idempotency_key_sent_to_both_instances_at_once_executes_once() {
    let Some(c) = cluster(ClusterOptions::default()).await else {
        return;
    };
    let (admin, key) = admin_with_key(&c.app(0)).await;
    let api = fakes::start().await;
    c.wb.egress()
        .add(&admin, &format!("127.0.0.1:{}", api.addr.port()))
        .await
        .unwrap();
    let body = json!({ "tool": "http.fetch", "arguments": { "url": api.url("/delay?ms=400") } });
    let racers = (0..16).map(|i| {
        let (app, key, body) = (c.app(i % 2), key.clone(), body.clone());
        tokio::spawn(async move {
            let res = app
                .http()
                .post(app.url("/v1/tools/invoke"))
                .bearer_auth(&key)
                .header("idempotency-key", "race-7")
                .json(&body)
                .send()
                .await
                .unwrap();
            let replayed = res.headers().get("idempotent-replayed").is_some();
            (
                res.status().as_u16(),
                replayed,
                res.json::<Value>().await.unwrap(),
            )
        })
    });
    let mut fresh = 0;
    for r in racers {
        let (status, replayed, body) = r.await.unwrap();
        match (status, replayed) {
            (200, false) => fresh += 1,
            (200, true) => {}
            (409, _) => assert_eq!(body["error"]["code"], "idempotency_key_in_use", "{body}"),
            other => panic!("unexpected answer {other:?}: {body}"),
        }
    }
    assert_eq!(
        fresh, 1,
        "one request ran, the rest were refused or replayed"
    );
    assert_eq!(
        api.state.requests.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "the API was called once"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signing_out_on_one_instance_ends_the_session_on_the_other() {
    let Some(c) = cluster(ClusterOptions::default()).await else {
        return;
    };
    let (a, b) = (c.app(0), c.app(1));
    admin_with_key(&a).await;
    let on_a = a.browser();
    let res = on_a.sign_in("ada@example.com", PASSWORD).await;
    assert!(res.status().is_success(), "{}", res.status());
    let cookie = res
        .headers()
        .get("set-cookie")
        .unwrap()
        .to_str()
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_owned();
    // The browser's next request goes to B, with the same session cookie.
    let me = b
        .http()
        .get(b.url("/me"))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(me.status(), 200, "the session from A is valid on B");
    assert_eq!(
        me.json::<Value>().await.unwrap()["email"],
        "ada@example.com"
    );
    let out = on_a.call("sign_out", &[]).await;
    assert!(
        out.status().is_success() || out.status().is_redirection(),
        "{}",
        out.status()
    );
    let me = b
        .http()
        .get(b.url("/me"))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(
        me.status(),
        401,
        "signed out on A, the old cookie is refused on B"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_narrowed_or_revoked_on_one_instance_is_refused_on_the_other_once_its_notice_arrives()
{
    use crate::change_notices::{agent_key, metric_up, put, reads_only_policy, rest, set_key};
    const TOKEN: &str = "metrics-token-0123456789";
    let Some(c) = cluster(ClusterOptions {
        args: vec!["--metrics-token".into(), TOKEN.into()],
        ..Default::default()
    })
    .await
    else {
        return;
    };
    let (a, b) = (c.app(0), c.app(1));
    let (_, admin) = admin_with_key(&a).await;
    let (id, key) = agent_key(&a, &admin).await;
    // Both instances hear change notices, so both answer the key from memory.
    for app in [&a, &b] {
        within("the listener is up", Duration::from_secs(15), async || {
            metric_up(app, TOKEN).await == Some(true)
        })
        .await;
        assert_eq!(put(app, &key).await, 200);
        assert_eq!(put(app, &key).await, 200);
    }

    let pol = reads_only_policy(&a, &admin).await;
    set_key(&a, &admin, &id, json!({ "policy_id": pol })).await;
    assert_eq!(
        put(&a, &key).await,
        403,
        "the instance that changed it: the next call"
    );
    let took = within(
        "the policy holds on B",
        Duration::from_secs(5),
        async || put(&b, &key).await == 403,
    )
    .await;
    eprintln!("policy change reached the other instance in {took:?}");

    let (status, _) = rest(
        &a,
        &admin,
        "DELETE",
        &format!("/v1/api-keys/{id}"),
        Value::Null,
    )
    .await;
    assert_eq!(status, 204);
    assert_eq!(
        put(&a, &key).await,
        401,
        "the instance that revoked it: the next call"
    );
    let took = within(
        "the revocation holds on B",
        Duration::from_secs(5),
        async || put(&b, &key).await == 401,
    )
    .await;
    eprintln!("revocation reached the other instance in {took:?}");
    assert_eq!(put(&b, &admin).await, 200, "other keys are untouched");
    c.shutdown().await;
}

/// The names a set's endpoint on `app` lists for `key`, or the HTTP status when it refuses.
async fn set_tools(app: &TestApp, key: &str, slug: &str) -> Result<Vec<String>, u16> {
    let res = app
        .http()
        .post(app.url(&format!("/mcp/sets/{slug}")))
        .bearer_auth(key)
        .header("accept", "application/json, text/event-stream")
        .json(&json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {} }))
        .send()
        .await
        .unwrap();
    if res.status() != 200 {
        return Err(res.status().as_u16());
    }
    let body: Value = res.json().await.unwrap();
    Ok(body["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_set_or_a_keys_set_limit_changed_on_one_instance_holds_on_the_other_once_its_notice_arrives(
) {
    use crate::change_notices::{metric_up, rest};
    const TOKEN: &str = "metrics-token-0123456789";
    let Some(c) = cluster(ClusterOptions {
        args: vec!["--metrics-token".into(), TOKEN.into()],
        ..Default::default()
    })
    .await
    else {
        return;
    };
    let (a, b) = (c.app(0), c.app(1));
    let (_, admin) = admin_with_key(&a).await;
    let (status, set) = rest(&a, &admin, "POST", "/v1/tool-sets", json!({ "slug": "desk", "name": "Desk", "tools": [{ "tool": "storage.get", "name": "read" }] })).await;
    assert_eq!(status, 201, "{set}");
    let (status, made) = rest(
        &a,
        &admin,
        "POST",
        "/v1/api-keys",
        json!({ "name": "desk", "tool_sets": ["desk"] }),
    )
    .await;
    assert_eq!(status, 201, "{made}");
    let (key, key_id) = (
        made["key"].as_str().unwrap().to_owned(),
        made["id"].as_str().unwrap().to_owned(),
    );
    for app in [&a, &b] {
        within("the listener is up", Duration::from_secs(15), async || {
            metric_up(app, TOKEN).await == Some(true)
        })
        .await;
        // Twice: the second answer comes from memory.
        assert_eq!(
            set_tools(app, &key, "desk").await,
            Ok(vec!["read".to_owned()])
        );
        assert_eq!(
            set_tools(app, &key, "desk").await,
            Ok(vec!["read".to_owned()])
        );
    }

    // The set changes on A: A's next request lists the new tools, B's once the notice is in.
    let id = set["id"].as_str().unwrap();
    let (status, out) = rest(&a, &admin, "PUT", &format!("/v1/tool-sets/{id}"), json!({ "slug": "desk", "name": "Desk", "tools": [{ "tool": "storage.get", "name": "read" }, { "tool": "storage.put", "name": "list" }] })).await;
    assert_eq!(status, 200, "{out}");
    let both = Ok(vec!["read".to_owned(), "list".to_owned()]);
    assert_eq!(
        set_tools(&a, &key, "desk").await,
        both,
        "the instance that changed it"
    );
    let took = within("the new set on B", Duration::from_secs(5), async || {
        set_tools(&b, &key, "desk").await == both
    })
    .await;
    eprintln!("a set change reached the other instance in {took:?}");

    // The key's limit moves to another set on A: refused on both, the same way.
    let (status, _) = rest(
        &a,
        &admin,
        "POST",
        "/v1/tool-sets",
        json!({ "slug": "other", "name": "Other", "tools": [{ "tool": "vault_list" }] }),
    )
    .await;
    assert_eq!(status, 201);
    let (status, out) = rest(
        &a,
        &admin,
        "PATCH",
        &format!("/v1/api-keys/{key_id}"),
        json!({ "tool_sets": ["other"] }),
    )
    .await;
    assert_eq!(status, 200, "{out}");
    assert_eq!(
        set_tools(&a, &key, "desk").await,
        Err(404),
        "the instance that changed it"
    );
    let took = within("the new limit on B", Duration::from_secs(5), async || {
        set_tools(&b, &key, "desk").await == Err(404)
    })
    .await;
    eprintln!("a key's set limit reached the other instance in {took:?}");
    assert_eq!(
        set_tools(&b, &key, "other").await,
        Ok(vec!["vault_list".to_owned()])
    );
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_per_user_limit_of_a_policy_is_one_budget_across_two_processes() {
    use crate::change_notices::put;
    use workbench_core::auth::Role;
    let Some(c) = cluster(ClusterOptions::default()).await else {
        return;
    };
    let (a, b) = (c.app(0), c.app(1));
    let (_, admin) = admin_with_key(&a).await;
    // A month's window, so the real clocks of both processes stay in one.
    crate::limits::default_policy_with(
        &a,
        &admin,
        json!([{ "tools": "storage.put", "calls": 30, "every": "month", "per": "user" }]),
    )
    .await;
    let bo = a.user("bo@example.com", Role::Member).await;
    let keys = [a.api_key(&bo).await, a.api_key(&bo).await];
    // Both instances know the policy before counting starts.
    for app in [&a, &b] {
        within("the policy holds", Duration::from_secs(15), async || {
            put(app, &admin).await == 200
        })
        .await;
    }
    let mut ran = [0, 0];
    for i in 0..60 {
        let status = put([&a, &b][i % 2], &keys[(i / 2) % 2]).await;
        assert!(status == 200 || status == 429, "{status}");
        ran[i % 2] += (status == 200) as usize;
    }
    assert_eq!(
        ran[0] + ran[1],
        30,
        "two processes ran {ran:?} calls of one person under a limit of 30 a month"
    );
    assert!(ran[0] >= 14 && ran[1] >= 14, "{ran:?}");
    // Another person has a budget of their own on either instance.
    let cy = a.user("cy@example.com", Role::Member).await;
    let cy_key = a.api_key(&cy).await;
    assert_eq!(put(&b, &cy_key).await, 200);
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_session_opened_on_one_instance_is_served_and_asked_through_the_other() {
    let Some(c) = cluster(ClusterOptions::default()).await else {
        return;
    };
    let (a, b) = (c.app(0), c.app(1));
    let (_, key) = admin_with_key(&a).await;
    let up = fake_upstream::start().await;
    up.set_tool(
        "ask",
        "Asks who you are.",
        json!({ "type": "object" }),
        false,
    );
    let (status, server) = post(&a, &key, "/v1/mcp/servers", json!({ "name": "crm", "transport": "http", "url": up.url(), "tool_prefix": "crm.", "timeout_ms": 20000 })).await;
    assert_eq!(status, 201, "{server}");

    // A client that can be asked opens its session on A...
    let res = a
        .http()
        .post(a.url("/mcp"))
        .bearer_auth(&key)
        .header("accept", "application/json, text/event-stream")
        .json(&json!({ "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": { "elicitation": {} }, "clientInfo": { "name": "t", "version": "1" } } }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let session = res.headers()["mcp-session-id"].to_str().unwrap().to_owned();
    // ...and the load balancer sends everything after it to B.
    let res = crate::upstream_relay::in_session(
        &b,
        &key,
        &session,
        json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }),
    )
    .await;
    assert!(res.status().is_success(), "{}", res.status());
    let res = crate::upstream_relay::in_session(
        &b,
        &key,
        &session,
        json!({ "jsonrpc": "2.0", "id": 2, "method": "tools/list" }),
    )
    .await;
    assert_eq!(res.status(), 200);
    assert!(res.text().await.unwrap().contains("execute_tools"));
    // Another key is refused there too (the owner, A, decides).
    let other = a
        .user("mo@example.com", workbench_core::auth::Role::Admin)
        .await;
    let other_key = a.api_key(&other).await;
    let res = crate::upstream_relay::in_session(
        &b,
        &other_key,
        &session,
        json!({ "jsonrpc": "2.0", "id": 3, "method": "tools/list" }),
    )
    .await;
    assert_eq!(res.status(), 404);

    // A call through B whose upstream asks the client: the question arrives on the call's
    // stream through B, the answer goes back through B, and the call completes.
    let stream = Arc::new(std::sync::Mutex::new(String::new()));
    let reader = {
        let (b, key, session, stream) = (c.app(1), key.clone(), session.clone(), stream.clone());
        tokio::spawn(async move {
            let mut res = crate::upstream_relay::in_session(&b, &key, &session, json!({ "jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {
                "name": "execute_tools", "arguments": { "executions": [{ "tool": "crm.ask", "args": {} }] } } })).await;
            while let Ok(Some(chunk)) = res.chunk().await {
                stream
                    .lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&chunk));
            }
        })
    };
    let mut question = None;
    within(
        "the upstream's question reaches the client",
        Duration::from_secs(15),
        async || {
            let text = stream.lock().unwrap().clone();
            question = text
                .lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
                .find(|m| m["method"] == "elicitation/create");
            question.is_some()
        },
    )
    .await;
    let question = question.unwrap();
    assert!(
        question["params"]["message"]
            .as_str()
            .unwrap()
            .starts_with("Who are you?"),
        "{question}"
    );
    let res = crate::upstream_relay::in_session(&b, &key, &session, json!({ "jsonrpc": "2.0", "id": question["id"], "result": { "action": "accept", "content": { "name": "Ada" } } })).await;
    assert!(res.status().is_success(), "{}", res.status());
    within(
        "the call completes with the answer",
        Duration::from_secs(15),
        async || {
            let text = stream.lock().unwrap().clone();
            text.contains("answered:") && text.contains("Ada")
        },
    )
    .await;
    reader.abort();
    c.shutdown().await;
}
