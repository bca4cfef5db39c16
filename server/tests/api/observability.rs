//! What operators see: Prometheus metrics at /metrics (off unless a token is set, and then only
//! with it), a request id on every response, and JSON log lines that carry it.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use serde_json::{json, Value};

use crate::helpers::{admin_with_key, execute, Options};
use crate::{app, db_test};

const TOKEN: &str = "metrics-token-0123456789";

async fn scrape(app: &crate::helpers::TestApp, token: Option<&str>) -> (u16, String) {
    let mut req = app.http().get(app.url("/metrics"));
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let res = req.send().await.unwrap();
    (res.status().as_u16(), res.text().await.unwrap())
}

db_test!(
    metrics_need_the_operators_token_and_count_calls_without_their_arguments,
    |backend| {
        let off = app!(backend);
        assert_eq!(
            scrape(&off, Some(TOKEN)).await.0,
            404,
            "off unless the operator sets a token"
        );

        let app = app!(
            backend,
            Options {
                metrics_token: Some(TOKEN.into()),
                ..Default::default()
            }
        );
        let (_, key) = admin_with_key(&app).await;
        assert_eq!(scrape(&app, None).await.0, 401);
        assert_eq!(scrape(&app, Some("metrics-token-0123456780")).await.0, 401);
        assert_eq!(
            scrape(&app, Some(&key)).await.0,
            401,
            "an API key is not the metrics token"
        );

        let secret_looking = "s3cr3t-argument-value-9f8e7d";
        let out = execute(
            &app,
            &key,
            json!([
                { "tool": "storage.put", "args": { "key": "m/a.txt", "content": secret_looking } },
                { "tool": "storage.put", "args": { "key": "m/b.txt", "content": "b" } },
                { "tool": "storage.get", "args": { "key": "m/missing.txt" } },
                { "tool": "no_such_tool_anywhere", "args": {} }
            ]),
        )
        .await;
        assert!(
            out[0]["result"].is_object() && out[2]["code"].is_string(),
            "{out:?}"
        );
        let (status, text) = scrape(&app, Some(TOKEN)).await;
        assert_eq!(status, 200, "{text}");
        assert!(
            text.contains(
                "workbench_tool_calls_total{tool=\"storage.put\",surface=\"mcp\",outcome=\"ok\"} 2"
            ),
            "{text}"
        );
        let failed = format!(
            "workbench_tool_calls_total{{tool=\"storage.get\",surface=\"mcp\",outcome=\"{}\"}} 1",
            out[2]["code"].as_str().unwrap()
        );
        assert!(text.contains(&failed), "{failed} not in {text}");
        assert!(
            text.contains("tool=\"(unknown tool)\""),
            "made-up names share one series: {text}"
        );
        assert!(!text.contains("no_such_tool_anywhere"));
        assert!(text.contains("workbench_tool_call_duration_seconds_bucket{tool=\"storage.put\",surface=\"mcp\",outcome=\"ok\",le=\"+Inf\"} 2"));
        for family in [
            "workbench_db_connections{state=\"idle\"}",
            "workbench_confirmations_pending 0",
            "workbench_callbacks_due 0",
            "workbench_record_write_failures_total",
        ] {
            assert!(text.contains(family), "{family} missing from {text}");
        }
        assert!(
            !text.contains(secret_looking),
            "arguments never reach /metrics"
        );
        assert!(!text.contains(&key));
    }
);

db_test!(
    every_response_answers_a_request_id_and_takes_a_plain_one_from_the_caller,
    |backend| {
        let app = app!(backend);
        let res = app.http().get(app.url("/v1/me")).send().await.unwrap();
        assert_eq!(res.status(), 401);
        let id = res
            .headers()
            .get("x-request-id")
            .unwrap()
            .to_str()
            .unwrap()
            .to_owned();
        assert!(id.starts_with("req_") && id.len() == 24, "{id}");
        let res = app
            .http()
            .get(app.url("/healthz"))
            .header("x-request-id", "trace-4bf92f35.1")
            .send()
            .await
            .unwrap();
        assert_eq!(
            res.headers().get("x-request-id").unwrap(),
            "trace-4bf92f35.1"
        );
        let res = app
            .http()
            .get(app.url("/healthz"))
            .header("x-request-id", "not a plain token")
            .send()
            .await
            .unwrap();
        assert!(res
            .headers()
            .get("x-request-id")
            .unwrap()
            .to_str()
            .unwrap()
            .starts_with("req_"));
    }
);

#[test]
fn json_logs_carry_the_request_id_of_the_request_they_belong_to() {
    let dir = std::env::temp_dir().join(format!(
        "wb-jsonlog-{}-{}",
        std::process::id(),
        workbench_core::crypto::random_base62(6)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_workbench"))
        .args([
            "serve",
            "--log-format",
            "json",
            "--bind",
            "127.0.0.1:0",
            "--data-dir",
        ])
        .arg(&dir)
        .arg("--database-url")
        .arg(format!("sqlite://{}?mode=rwc", dir.join("wb.db").display()))
        .env("WB_LOG", "warn,workbench_server=debug")
        .env_remove("WB_DATABASE_URL")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut addr = None;
    let mut seen = Vec::new();
    let mut found = None;
    for line in lines.by_ref() {
        let line = line.unwrap();
        let v: Value =
            serde_json::from_str(&line).unwrap_or_else(|e| panic!("not a JSON line ({e}): {line}"));
        seen.push(v.clone());
        if addr.is_none() {
            if let Some(a) = v["message"]
                .as_str()
                .and_then(|m| m.strip_prefix("workbench listening on http://"))
            {
                addr = Some(a.to_owned());
                let url = format!("http://{a}/healthz");
                std::thread::spawn(move || {
                    let rt = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                        .unwrap();
                    rt.block_on(async {
                        reqwest::Client::new()
                            .get(url)
                            .header("x-request-id", "jsonlog-probe-7")
                            .send()
                            .await
                            .unwrap()
                    });
                });
            }
        } else if v["message"] == "request finished" {
            found = Some(v);
            break;
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
    let line = found.unwrap_or_else(|| panic!("no access log line among {seen:#?}"));
    assert_eq!(line["span"]["request_id"], "jsonlog-probe-7", "{line}");
    assert_eq!(
        (line["span"]["path"].as_str(), line["status"].as_u64()),
        (Some("/healthz"), Some(200)),
        "{line}"
    );
    assert_eq!(line["level"], "DEBUG");
}
