//! Issue 32: stdio servers that misbehave, run by workbench: garbage or oversized lines on
//! stdout, a handshake that never comes, a slow start, memory past the limit, a crash loop
//! that opens the breaker, tools that change under review, and workbench itself killed with
//! SIGKILL while its servers and their grandchildren run. The server is core's
//! `tests/fixtures/stdio/raw_server.py` on the system Python; processes are counted by a
//! marker in their environment.

use std::time::Duration;

use serde_json::{json, Value};

#[path = "../../../core/tests/support/processes.rs"]
mod processes;

use processes::marked;

use crate::cluster::{Cluster, ClusterOptions};
use crate::helpers::{admin_with_key, database_url, execute, within, Options, TestApp};
use crate::{app, db_test};

const PYTHON: &str = "/usr/bin/python3";

fn raw() -> String {
    let p = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../core/tests/fixtures/stdio/raw_server.py"
    );
    std::fs::canonicalize(p).unwrap().display().to_string()
}

/// A registration of the raw server with `flags`, its processes marked with `mark`.
fn raw_server(name: &str, flags: &[&str], mark: &str) -> Value {
    let mut args = vec!["-I".to_owned(), "-S".to_owned(), raw()];
    args.extend(flags.iter().map(|f| f.to_string()));
    json!({ "name": name, "transport": "stdio", "command": PYTHON, "args": args,
            "env": { "WB_TEST_MARK": mark }, "filesystem": { "read": [raw()] } })
}

fn with(mut base: Value, more: Value) -> Value {
    for (k, v) in more.as_object().unwrap() {
        base[k] = v.clone();
    }
    base
}

fn mark() -> String {
    workbench_core::crypto::random_base62(12)
}

async fn post(app: &TestApp, key: &str, body: Value) -> (u16, Value) {
    crate::confirmations::post(app, key, "/v1/mcp/servers", body).await
}

/// Registers `body` (which must succeed) and answers the server's id.
async fn registered(app: &TestApp, key: &str, body: Value) -> String {
    let (status, server) = post(app, key, body).await;
    assert_eq!(status, 201, "{server}");
    server["id"].as_str().unwrap().to_owned()
}

/// Calls `<tool>` (a raw server's echo) and answers the pid of the process that ran it.
async fn echo_pid(app: &TestApp, key: &str, tool: &str, text: &str) -> u64 {
    let out = execute(
        app,
        key,
        json!([{ "tool": tool, "args": { "text": text } }]),
    )
    .await;
    assert_eq!(out[0]["result"]["text"], text, "{}", out[0]);
    out[0]["result"]["pid"].as_u64().unwrap()
}

const METRICS: &str = "metrics-token-0123456789";

async fn scrape(app: &TestApp) -> String {
    let res = app
        .http()
        .get(app.url("/metrics"))
        .bearer_auth(METRICS)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    res.text().await.unwrap()
}

async fn view(app: &TestApp, key: &str, id: &str) -> Value {
    app.http()
        .get(app.url(&format!("/v1/mcp/servers/{id}")))
        .bearer_auth(key)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

fn python_app_options() -> Options {
    Options {
        stdio_commands: vec![PYTHON.to_owned()],
        ..Default::default()
    }
}

db_test!(
    a_stdio_server_that_writes_garbage_or_huge_lines_or_never_answers_is_refused_clearly_and_stopped,
    |backend| {
        let app = app!(backend, python_app_options());
        let (_, key) = admin_with_key(&app).await;
        let m = mark();
        for (flags, timeout, needle) in [
            (vec!["--garbage"], 10_000, "a line that is not JSON-RPC on stdout"),
            (vec!["--huge", "12"], 10_000, "a line of more than"),
            (vec!["--silent"], 1_500, "did not answer initialize within 1500 ms"),
        ] {
            let (status, out) = post(
                &app,
                &key,
                with(raw_server("bad", &flags, &m), json!({ "timeout_ms": timeout })),
            )
            .await;
            assert_eq!(status, 422, "{flags:?}: {out}");
            let said = out["error"]["message"].as_str().unwrap();
            assert!(said.contains(needle), "{flags:?}: {said}");
            // Its stderr reaches the admin once read: certain after the silent handshake's wait.
            assert!(
                flags != ["--silent"] || said.contains("raw server ready"),
                "its stderr is shown to the admin: {said}"
            );
            within("the refused process to end", Duration::from_secs(10), async || {
                marked(&m).is_empty()
            })
            .await;
        }
        let list: Value = app
            .http()
            .get(app.url("/v1/mcp/servers"))
            .bearer_auth(&key)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(list["data"], json!([]), "nothing refused was stored");
        // Under Landlock, a script nobody declared readable cannot even be opened; the error
        // says what the process may read.
        let mut undeclared = raw_server("hidden", &[], &m);
        undeclared["filesystem"] = json!({ "read": [] });
        let (status, out) = post(&app, &key, undeclared).await;
        assert_eq!(status, 422, "{out}");
        if workbench_core::upstream::stdio::landlock::abi().is_some() {
            let said = out["error"]["message"].as_str().unwrap();
            assert!(said.contains("Permission denied") && said.contains("filesystem.read"), "{said}");
        }
        // A slow start within the timeout is no fault.
        let (status, out) = post(
            &app,
            &key,
            with(raw_server("slow", &["--slow-start", "1.5"], &m), json!({ "timeout_ms": 10_000 })),
        )
        .await;
        assert_eq!(status, 201, "{out}");
    }
);

db_test!(
    a_stdio_server_past_its_memory_limit_is_killed_and_reported_and_the_breaker_follows,
    |backend| {
        let app = app!(
            backend,
            Options {
                metrics_token: Some(METRICS.into()),
                ..python_app_options()
            }
        );
        let (_, key) = admin_with_key(&app).await;
        let m = mark();
        let id = registered(
            &app,
            &key,
            with(
                raw_server("local", &[], &m),
                json!({ "limits": { "memory_mb": 64 } }),
            ),
        )
        .await;
        let first = echo_pid(&app, &key, "local.echo", "a").await;
        // It takes 256 MiB and holds it: workbench kills it within its next look.
        execute(
            &app,
            &key,
            json!([{ "tool": "local.hog", "args": { "mib": 256 } }]),
        )
        .await;
        within(
            "the process to be killed for its memory",
            Duration::from_secs(10),
            async || {
                view(&app, &key, &id).await["processes"][0]["last_exit"]
                    .as_str()
                    .is_some_and(|e| e.contains("past its limit of 64 MiB"))
            },
        )
        .await;
        let seen = view(&app, &key, &id).await;
        assert_eq!(seen["processes"][0]["restarts"], 1, "{seen}");
        assert!(
            !std::path::Path::new(&format!("/proc/{first}")).exists(),
            "{seen}"
        );
        // While it waits out the backoff, calls fail at once and open the breaker.
        for i in 0..5 {
            let out = execute(
                &app,
                &key,
                json!([{ "tool": "local.echo", "args": { "text": "b" } }]),
            )
            .await;
            assert_eq!(out[0]["code"], "UNAVAILABLE", "{}", out[0]);
            if i == 0 {
                assert!(out[0].to_string().contains("memory"), "{}", out[0]);
            }
        }
        let seen = view(&app, &key, &id).await;
        assert_eq!(seen["breaker"], "open", "{seen}");
        assert_eq!(seen["processes"][0]["state"], "restarting", "{seen}");
        let labels = format!("server=\"{id}\",name=\"local\",slot=\"0\"");
        let metrics = scrape(&app).await;
        for line in [
            format!("workbench_stdio_process_state{{{labels},state=\"restarting\"}} 1"),
            format!("workbench_stdio_process_restarts{{{labels}}} 1"),
            format!("workbench_upstream_breaker_state{{server=\"{id}\",name=\"local\",state=\"open\"}} 1"),
        ] {
            assert!(metrics.lines().any(|l| l == line), "{line} in:\n{metrics}");
        }
        // Workbench serves meanwhile, and once the breaker lets a probe through, the server
        // is back on a new process.
        let other = execute(&app, &key, json!([{ "tool": "vault_list", "args": {} }])).await;
        assert!(other[0].get("result").is_some(), "{}", other[0]);
        app.clock.advance_ms(31_000);
        let out = execute(
            &app,
            &key,
            json!([{ "tool": "local.echo", "args": { "text": "c" } }]),
        )
        .await;
        assert_eq!(out[0]["result"]["text"], "c", "{}", out[0]);
        assert_ne!(out[0]["result"]["pid"].as_u64().unwrap(), first);
        assert_eq!(view(&app, &key, &id).await["breaker"], "closed");
        let metrics = scrape(&app).await;
        assert!(
            metrics
                .lines()
                .any(|l| l
                    == format!("workbench_stdio_process_state{{{labels},state=\"running\"}} 1")),
            "{metrics}"
        );
        let memory = metrics
            .lines()
            .find_map(|l| {
                l.strip_prefix(&format!(
                    "workbench_stdio_process_memory_bytes{{{labels}}} "
                ))
            })
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap();
        assert!(memory > 1e6 && memory < 64.0 * 1024.0 * 1024.0, "{memory}");
    }
);

db_test!(
    a_tool_a_stdio_server_adds_later_waits_for_review,
    |backend| {
        let app = app!(backend, python_app_options());
        let (_, key) = admin_with_key(&app).await;
        let flag = crate::helpers::temp_dir("stdio-review").join("extra");
        let m = mark();
        let mut reg = raw_server("local", &["--extra-if", &flag.display().to_string()], &m);
        reg["filesystem"]["read"]
            .as_array_mut()
            .unwrap()
            .push(json!(flag.parent().unwrap().display().to_string()));
        let (status, server) = post(&app, &key, reg).await;
        assert_eq!(status, 201, "{server}");
        let id = server["id"].as_str().unwrap().to_owned();
        std::fs::write(&flag, "").unwrap();
        let refreshed: Value = app
            .http()
            .post(app.url(&format!("/v1/mcp/servers/{id}/refresh")))
            .bearer_auth(&key)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(
            refreshed["changes"]["added"],
            json!(["extra"]),
            "{refreshed}"
        );
        let out = execute(&app, &key, json!([{ "tool": "local.extra", "args": {} }])).await;
        assert_eq!(out[0]["code"], "UNAVAILABLE", "held for review: {}", out[0]);
        let res = app
            .http()
            .post(app.url(&format!("/v1/mcp/servers/{id}/approve")))
            .bearer_auth(&key)
            .json(&json!({ "tools": ["extra"] }))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200);
        let out = execute(&app, &key, json!([{ "tool": "local.extra", "args": {} }])).await;
        assert_eq!(out[0]["result"], json!({ "extra": true }), "{}", out[0]);
    }
);

db_test!(
    killing_workbench_with_sigkill_leaves_no_stdio_server_or_grandchild,
    |backend| {
        let Some(url) = database_url(backend).await else {
            return;
        };
        let mut c = Cluster::start(
            &url,
            1,
            ClusterOptions {
                args: vec!["--stdio-commands".into(), PYTHON.into()],
                ..Default::default()
            },
        )
        .await;
        let app = c.app(0);
        let (_, key) = admin_with_key(&app).await;
        let m = mark();
        // Two processes that each leave two grandchildren (one in a new session) and ignore
        // stdin closing: the guard must signal them.
        let (status, server) = post(
            &app,
            &key,
            with(
                raw_server("local", &["--fork", "2", "--ignore-eof"], &m),
                json!({ "pool": 2 }),
            ),
        )
        .await;
        assert_eq!(status, 201, "{server}");
        let mut pids = std::collections::BTreeSet::new();
        for i in 0..4 {
            let out = execute(
                &app,
                &key,
                json!([{ "tool": "local.echo", "args": { "text": i.to_string() } }]),
            )
            .await;
            pids.insert(out[0]["result"]["pid"].as_u64().unwrap());
        }
        assert_eq!(pids.len(), 2, "a pool of two processes");
        within(
            "both servers and their four grandchildren",
            Duration::from_secs(10),
            async || marked(&m).len() == 6,
        )
        .await;
        c.instances[0].kill();
        let took = within(
            "every marked process to end",
            Duration::from_secs(15),
            async || marked(&m).is_empty(),
        )
        .await;
        eprintln!("all six processes gone {took:?} after SIGKILL");
        c.shutdown().await;
    }
);

db_test!(
    a_boot_server_runs_before_any_call_and_comes_back_after_a_kill_and_an_idle_one_stops,
    |backend| {
        let app = app!(backend, python_app_options());
        let (_, key) = admin_with_key(&app).await;
        let m = mark();
        let id = registered(
            &app,
            &key,
            with(raw_server("boot", &[], &m), json!({ "start": "boot" })),
        )
        .await;
        // Nobody calls it: it is started because it is a boot server.
        within(
            "the boot server to run",
            Duration::from_secs(10),
            async || view(&app, &key, &id).await["processes"][0]["state"] == "running",
        )
        .await;
        let pid = view(&app, &key, &id).await["processes"][0]["pid"]
            .as_u64()
            .unwrap();
        let killed = std::process::Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status()
            .unwrap();
        assert!(killed.success());
        within("the kill to be seen", Duration::from_secs(10), async || {
            view(&app, &key, &id).await["processes"][0]["state"] == "restarting"
        })
        .await;
        app.clock.advance_ms(1_000);
        within(
            "the boot server to be back",
            Duration::from_secs(10),
            async || {
                let v = view(&app, &key, &id).await;
                v["processes"][0]["state"] == "running" && v["processes"][0]["pid"] != pid
            },
        )
        .await;
        let v = view(&app, &key, &id).await;
        assert_eq!(v["processes"][0]["restarts"], 1, "{v}");
        assert!(
            v["processes"][0]["last_exit"]
                .as_str()
                .unwrap()
                .contains("killed by signal 9"),
            "{v}"
        );

        let idle = registered(
            &app,
            &key,
            with(
                raw_server("idle", &[], &m),
                json!({ "idle_shutdown_s": 60 }),
            ),
        )
        .await;
        let idle_pid = echo_pid(&app, &key, "idle.echo", "x").await;
        app.clock.advance_ms(61_000);
        within(
            "the idle server to stop",
            Duration::from_secs(10),
            async || {
                view(&app, &key, &idle).await["processes"][0]["state"] == "stopped"
                    && !std::path::Path::new(&format!("/proc/{idle_pid}")).exists()
            },
        )
        .await;
        let v = view(&app, &key, &idle).await;
        assert_eq!(
            v["processes"][0]["restarts"], 0,
            "an idle stop is no crash: {v}"
        );
        // The next call starts it again.
        let out = execute(
            &app,
            &key,
            json!([{ "tool": "idle.echo", "args": { "text": "y" } }]),
        )
        .await;
        assert_eq!(out[0]["result"]["text"], "y", "{}", out[0]);
    }
);

db_test!(
    a_stdio_server_that_writes_garbage_mid_session_is_stopped_with_that_reason,
    |backend| {
        let app = app!(backend, python_app_options());
        let (_, key) = admin_with_key(&app).await;
        let m = mark();
        let id = registered(&app, &key, raw_server("local", &[], &m)).await;
        let pid = echo_pid(&app, &key, "local.echo", "before").await;
        let out = execute(&app, &key, json!([{ "tool": "local.garble", "args": {} }])).await;
        assert!(out[0].get("result").is_none(), "{}", out[0]);
        // No further call: the process is stopped and the view says why.
        within(
            "the broken process to stop",
            Duration::from_secs(15),
            async || {
                let v = view(&app, &key, &id).await;
                v["processes"][0]["last_exit"]
                    .as_str()
                    .is_some_and(|e| e.contains("not JSON-RPC"))
                    && !std::path::Path::new(&format!("/proc/{pid}")).exists()
            },
        )
        .await;
        let v = view(&app, &key, &id).await;
        assert_eq!(v["processes"][0]["restarts"], 1, "{v}");
        app.clock.advance_ms(1_000);
        assert_ne!(echo_pid(&app, &key, "local.echo", "after").await, pid);
    }
);
