//! A tool handler that panics fails its own call with TOOL_ERROR, recorded like any failure: the
//! caller gets an answer, the batch's other calls run, and the next call works.

#[path = "support/instance.rs"]
mod instance;

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{json, Value};
use workbench_core::catalog::{
    CallContext, HandlerError, SideEffects, Tool, ToolHandler, ToolName, ToolSource, ToolSpec,
};
use workbench_core::engine::{CallOptions, Invocation, Surface, ToolError};

struct Panics;

#[async_trait]
impl ToolHandler for Panics {
    async fn call(&self, _ctx: &CallContext<'_>, args: Value) -> Result<Value, HandlerError> {
        if args["panic"].as_bool().unwrap_or(false) {
            panic!("handler bug while holding {}", args["token"]);
        }
        Ok(json!({ "fine": true }))
    }
}

#[tokio::test]
async fn a_panicking_handler_fails_only_its_own_call() {
    let (wb, who) = instance::with_admin("panic").await;
    let spec = ToolSpec {
        name: ToolName::parse("buggy.tool").unwrap(),
        source: ToolSource::Mcp("mcps_test".into()),
        integration: "buggy".into(),
        description: "A tool whose handler panics when asked to".into(),
        input_schema: json!({ "type": "object" }),
        output_schema: None,
        side_effects: SideEffects::Write,
        literal_args: false,
        secret_arg: None,
        no_vault_refs: false,
    };
    wb.engine()
        .catalog()
        .set_source_tools(
            &who.project_id,
            "mcp:mcps_test",
            vec![Tool::new(spec, Arc::new(Panics)).unwrap()],
        )
        .unwrap();
    let opts = CallOptions::new(Surface::Rest);
    let inv = |args: Value| Invocation {
        tool: "buggy.tool".into(),
        args,
    };

    let out = wb
        .engine()
        .run(
            &who,
            inv(json!({ "panic": true, "token": "tok-123" })),
            &opts,
        )
        .await;
    match &out.result {
        Err(ToolError::Handler { handler_error }) => {
            assert!(handler_error.contains("internal error"), "{handler_error}");
            assert!(
                !handler_error.contains("tok-123"),
                "the panic's text is not shown: {handler_error}"
            );
        }
        other => panic!("expected TOOL_ERROR, got {other:?}"),
    }

    let outs = wb
        .engine()
        .run_batch(
            &who,
            vec![inv(json!({ "panic": true })), inv(json!({}))],
            &opts,
        )
        .await;
    assert!(
        matches!(outs[0].result, Err(ToolError::Handler { .. })),
        "{:?}",
        outs[0].result
    );
    assert_eq!(
        outs[1].result.as_ref().unwrap(),
        &json!({ "fine": true }),
        "the batch's other call ran"
    );

    // Both failures are recorded as finished failures, not left as calls still running.
    wb.flush_records().await;
    let page = wb.audit().page(&who, &Default::default()).await.unwrap();
    let failed = page
        .entries
        .iter()
        .filter(|e| e.tool.as_deref() == Some("buggy.tool") && e.status.as_str() == "failed")
        .count();
    assert_eq!(failed, 2, "{:?}", page.entries);
}
