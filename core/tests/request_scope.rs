//! A batch runs in one request scope: every execution resolves against the catalog snapshot and
//! is decided by the policy the request started with, even when the first call unregisters the
//! tool and denies it meanwhile, and each execution is still its own recorded call.

#[path = "support/instance.rs"]
mod instance;

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{json, Value};
use tokio::sync::Semaphore;
use workbench_core::auth::Principal;
use workbench_core::catalog::{
    CallContext, Catalog, HandlerError, SideEffects, Tool, ToolHandler, ToolName, ToolSource,
    ToolSpec,
};
use workbench_core::engine::{parse_request, CallOptions, ExecuteOutcome, Surface, POOL_SIZE};
use workbench_core::policy::{Decision, Mode, Policies, PolicyInput, ToolAllowlist};
use workbench_core::store::audit::AuditStatus;

const SOURCE: &str = "mcp:mcps_scope";

/// The first call (`{"first": true}`) unregisters the tool and makes a default policy denying
/// it; every other call waits until that is done before it answers.
struct Shifty {
    catalog: Arc<Catalog>,
    policies: Policies,
    who: Principal,
    changed: Arc<Semaphore>,
}

#[async_trait]
impl ToolHandler for Shifty {
    async fn call(&self, _ctx: &CallContext<'_>, args: Value) -> Result<Value, HandlerError> {
        if args["first"].as_bool().unwrap_or(false) {
            self.catalog
                .set_source_tools(&self.who.project_id, SOURCE, vec![])
                .unwrap();
            let deny = PolicyInput {
                limits: vec![],
                name: "no shifty".into(),
                tool_allowlist: ToolAllowlist {
                    mode: Mode::Open,
                    allow: vec![],
                    deny: vec!["shifty.tool".into()],
                    require_confirmation: vec![],
                },
                default: true,
            };
            self.policies.create(&self.who, &deny).await.unwrap();
            self.changed.add_permits(1000);
        } else {
            let _ = self.changed.acquire().await.unwrap();
        }
        Ok(json!({ "n": args["n"] }))
    }
}

fn spec() -> ToolSpec {
    ToolSpec {
        name: ToolName::parse("shifty.tool").unwrap(),
        source: ToolSource::Mcp("mcps_scope".into()),
        integration: "shifty".into(),
        description: "A tool whose first call unregisters and denies it".into(),
        input_schema: json!({ "type": "object" }),
        output_schema: None,
        side_effects: SideEffects::None,
        literal_args: false,
        secret_arg: None,
        no_vault_refs: false,
    }
}

#[tokio::test]
async fn a_batch_keeps_its_snapshot_and_policy_and_records_each_call() {
    let (wb, who) = instance::with_admin("scope").await;
    let handler = Shifty {
        catalog: wb.engine().catalog().clone(),
        policies: wb.policies().clone(),
        who: who.clone(),
        changed: Arc::new(Semaphore::new(0)),
    };
    wb.engine()
        .catalog()
        .set_source_tools(
            &who.project_id,
            SOURCE,
            vec![Tool::new(spec(), Arc::new(handler)).unwrap()],
        )
        .unwrap();

    // More executions than the pool runs at once: the last ones start only after the first
    // call has unregistered and denied the tool.
    let n = POOL_SIZE + 4;
    let executions: Vec<Value> = (0..n)
        .map(|i| json!({ "tool": "shifty.tool", "args": { "first": i == 0, "n": i } }))
        .collect();
    let req = parse_request(&json!({ "executions": executions })).unwrap();
    let opts = CallOptions::new(Surface::Mcp);
    let ExecuteOutcome::Ok(body) = wb.engine().execute_tools(&who, req, &opts, None).await else {
        panic!("a batch answers Ok");
    };
    let results = body["results"].as_array().unwrap();
    assert_eq!(results.len(), n);
    for (i, r) in results.iter().enumerate() {
        assert_eq!(r, &json!({ "result": { "n": i } }), "execution {i}");
    }

    // The change was real: the next request sees it.
    let who = wb
        .accounts()
        .principal_for_user(&who.user_id)
        .await
        .unwrap()
        .unwrap();
    let req = parse_request(&json!({ "executions": [{ "tool": "shifty.tool" }] })).unwrap();
    let after = wb
        .engine()
        .execute_tools(&who, req, &opts, None)
        .await
        .into_value();
    assert_eq!(after["results"][0]["code"], "TOOL_NOT_FOUND", "{after}");
    let policy = wb.engine().policy(&who).await.unwrap();
    assert!(matches!(policy.decide("shifty.tool"), Decision::Deny(_)));

    // One record per execution, each under its own call id.
    wb.flush_records().await;
    let page = wb.audit().page(&who, &Default::default()).await.unwrap();
    let mut ids: Vec<&str> = page
        .entries
        .iter()
        .filter(|e| e.tool.as_deref() == Some("shifty.tool") && e.status == AuditStatus::Succeeded)
        .filter_map(|e| e.tool_call_id.as_deref())
        .collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), n, "{:?}", page.entries);
}
