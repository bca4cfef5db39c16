//! The official MCP Python SDK as the client: initialize, tools/list and tools/call against the
//! real server. The SDK lives in `.venv` (made by scripts/setup.sh); `WB_TEST_MCP_SDK=required`
//! (set by the test script) turns a missing SDK into a failure instead of a skip.

use std::process::Command;

use serde_json::{json, Value};

use crate::helpers::admin_with_key;
use crate::{app, db_test};

/// The `.venv` interpreter when it can import the MCP SDK (and its OAuth client); None (skip)
/// otherwise, unless the SDK is required.
pub(crate) fn python() -> Option<std::path::PathBuf> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap();
    let py = root.join(".venv/bin/python");
    let ok = py.exists()
        && Command::new(&py)
            .args(["-c", "import mcp, mcp.client.auth"])
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false);
    if ok {
        return Some(py);
    }
    if std::env::var("WB_TEST_MCP_SDK").as_deref() == Ok("required") {
        panic!("the MCP Python SDK is required (WB_TEST_MCP_SDK=required) but .venv/bin/python cannot import mcp; run scripts/setup.sh");
    }
    crate::helpers::skipped("no MCP Python SDK in .venv (run scripts/setup.sh)");
    None
}

pub(crate) async fn run_client(url: String, key: String, script: Value) -> Value {
    run_script("client.py", url, key, script).await
}

/// Runs `tests/mcp_sdk/<script>` with the URL, key and steps; its JSON report (Null: skipped).
pub(crate) async fn run_script(
    script_file: &str,
    url: String,
    key: String,
    script: Value,
) -> Value {
    let Some(py) = python() else {
        return Value::Null;
    };
    let client = format!("{}/tests/mcp_sdk/{script_file}", env!("CARGO_MANIFEST_DIR"));
    let out = tokio::task::spawn_blocking(move || {
        Command::new(py)
            .arg(client)
            .arg(url)
            .arg(key)
            .arg(script.to_string())
            .output()
    })
    .await
    .unwrap()
    .unwrap();
    assert!(
        out.status.success(),
        "python client failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

db_test!(the_official_python_sdk_drives_the_meta_tools, |backend| {
    let app = app!(backend);
    let (ada, key) = admin_with_key(&app).await;
    let script = json!([
        ["whoami", {}],
        ["search_tools", { "query": "save a file to storage" }],
        ["get_tool_schema", { "tool": "storage.put" }],
        ["execute_tools", { "executions": [{ "tool": "storage.put", "args": { "key": "sdk.txt", "content": "from python" } }] }],
        ["execute_tools", { "executions": [
            { "tool": "storage.get", "args": { "key": "sdk.txt" } },
            { "tool": "no_such_tool", "args": {} }
        ] }],
        ["get_tool_schema", { "tool": "no_such_tool" }]
    ]);
    let report = run_client(app.url("/mcp"), key, script).await;
    if report.is_null() {
        return;
    }
    assert_eq!(report["server"]["name"], "workbench");
    let names: Vec<&str> = report["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names.len(), 9, "{names:?}");
    assert_eq!(
        &names[..4],
        ["search_tools", "get_tool_schema", "execute_tools", "whoami"]
    );
    let calls = report["calls"].as_array().unwrap();
    for c in calls {
        assert_eq!(
            c["structured"], c["text"],
            "structured content equals the JSON text"
        );
    }
    assert_eq!(
        calls[0]["structured"],
        json!({ "id": ada.user_id, "email": "ada@example.com" })
    );
    assert_eq!(calls[1]["structured"]["tools"][0]["name"], "storage.put");
    assert_eq!(
        calls[2]["structured"]["schema"]["required"],
        json!(["key", "content"])
    );
    assert_eq!(calls[3]["structured"]["results"][0]["result"]["size"], 11);
    let results = calls[4]["structured"]["results"].as_array().unwrap();
    assert_eq!(results[0]["result"]["content"], "from python");
    assert_eq!(results[1]["code"], "TOOL_NOT_FOUND");
    assert!(!calls[4]["is_error"].as_bool().unwrap());
    assert!(calls[5]["is_error"].as_bool().unwrap());
    assert_eq!(calls[5]["structured"], json!({ "error": "Tool not found" }));
});
