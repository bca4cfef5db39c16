//! The portal's Usage page: calls per day by outcome, latency per tool, egress, top tools and
//! keys for a date range, drawn as SVG on the server, and each chart's table as CSV.

use serde_json::{json, Value};
use workbench_core::auth::Role;

use crate::helpers::{admin_with_key, execute, PASSWORD};
use crate::{app, db_test};

db_test!(
    the_usage_page_draws_the_ranges_calls_and_exports_them_as_csv,
    |backend| {
        let app = app!(backend);
        let (_, key) = admin_with_key(&app).await;
        for i in 0..3 {
            execute(&app, &key, json!([{ "tool": "storage.put", "args": { "key": format!("k{i}"), "content": "v" } }])).await;
        }
        execute(
            &app,
            &key,
            json!([{ "tool": "storage.put", "args": { "key": 7 } }]),
        )
        .await;
        execute(
            &app,
            &key,
            json!([{ "tool": "storage.get", "args": { "key": "k0" } }]),
        )
        .await;
        let today = workbench_core::clock::rfc3339(app.wb.clock().now_ms())[..10].to_owned();

        let b = app.browser();
        b.sign_in("ada@example.com", PASSWORD).await;
        let data: Value = b
            .call("usage_page", &[("from", &today), ("to", &today)])
            .await
            .json()
            .await
            .unwrap();
        let day = &data["days"][0];
        assert_eq!(
            (
                day["day"].as_str(),
                day["succeeded"].as_i64(),
                day["failed"].as_i64()
            ),
            (Some(today.as_str()), Some(4), Some(1)),
            "{data}"
        );
        let put = data["top_tools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == "storage.put")
            .unwrap();
        assert_eq!(put["calls"], 4);
        assert!(data["latency"]
            .as_array()
            .unwrap()
            .iter()
            .any(|l| l["tool"] == "storage.get" && l["calls"] == 1));
        assert!(
            data["top_keys"][0]["name"]
                .as_str()
                .unwrap()
                .contains("test"),
            "keys are shown by name: {data}"
        );

        let html = b
            .get(&format!("/usage?from={today}&to={today}"))
            .await
            .text()
            .await
            .unwrap()
            // Leptos marks where a dynamic text ends with an empty comment (hydration reads it).
            .replace("<!>", "");
        assert!(
            html.contains("data-testid=\"calls-chart\"") && html.contains("<rect"),
            "the chart is in the page, no script needed"
        );
        assert!(html.contains("5 calls in the range"));
        // The charts label their axes: the day below, the scale on the left.
        assert!(
            html.contains(&format!("data-testid=\"axis-date\">{today}</text>")),
            "the date is labelled"
        );
        assert!(
            html.contains("calls</text>"),
            "the value axis says what it counts"
        );

        let res = b
            .client
            .get(format!(
                "{}/usage.csv?chart=calls&from={today}&to={today}",
                b.base
            ))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200);
        assert!(res.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/csv"));
        assert_eq!(
            res.text().await.unwrap(),
            format!("day,succeeded,failed,denied,other\r\n{today},4,1,0,0\r\n")
        );
        let tools = b
            .client
            .get(format!(
                "{}/usage.csv?chart=tools&from={today}&to={today}",
                b.base
            ))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        assert!(
            tools.starts_with("tool,tool_call,tool_call_ms,egress_bytes\r\n")
                && tools.contains("storage.put,4,"),
            "{tools}"
        );
        let bad = b
            .client
            .get(format!("{}/usage.csv?chart=pie", b.base))
            .send()
            .await
            .unwrap();
        assert_eq!(bad.status(), 400);
        let bad = b
            .client
            .get(format!(
                "{}/usage.csv?chart=calls&from=2026-02-01&to=2025-01-01",
                b.base
            ))
            .send()
            .await
            .unwrap();
        assert_eq!(bad.status(), 400);

        // Not signed in: nothing.
        let anon = app
            .http()
            .get(app.url(&format!("/usage.csv?chart=calls&from={today}&to={today}")))
            .send()
            .await
            .unwrap();
        assert_eq!(anon.status(), 401);
        // Another project's member sees their own project only.
        let (other, _) = app
            .wb
            .accounts()
            .create_user("zed@example.com", PASSWORD, Some("elsewhere"), Role::Admin)
            .await
            .unwrap();
        let _ = other;
        let z = app.browser();
        z.sign_in("zed@example.com", PASSWORD).await;
        let theirs: Value = z
            .call("usage_page", &[("from", &today), ("to", &today)])
            .await
            .json()
            .await
            .unwrap();
        assert_eq!(theirs["days"][0]["succeeded"], 0, "{theirs}");
    }
);
