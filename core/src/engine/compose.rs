//! execute_tools as a whole: plain batches, compose runs (sequential, each step may reference
//! earlier results, the first failure ends the run) and the `return` projection, with or
//! without compose. Seed 000, "Compose mode" and "Return projection".

use std::collections::{HashMap, HashSet};

use serde_json::{json, Map, Value};

use super::batch::{entry, ExecuteRequest};
use super::scope::{CallScope, Chain};
use super::template::{self, Context, TemplateError};
use super::{CallOptions, Engine, EntryContext, Invocation, ToolError, RESULT_CAP_CHARS};
use crate::auth::Principal;

/// What execute_tools answers: a response, or a failure of the whole call (a compose step, a
/// bad `return`), which MCP marks as an error result.
#[derive(Debug, Clone, PartialEq)]
pub enum ExecuteOutcome {
    Ok(Value),
    Failed(Value),
}

impl ExecuteOutcome {
    pub fn into_value(self) -> Value {
        match self {
            ExecuteOutcome::Ok(v) | ExecuteOutcome::Failed(v) => v,
        }
    }
}

fn bad_ref_in_return(e: TemplateError) -> ToolError {
    match e {
        TemplateError::BadRef(message) => ToolError::BadRef {
            message,
            ref_id: None,
        },
        // `return` never resolves vault references, so this cannot happen; keep it a bad ref.
        TemplateError::UnknownSecret { message, .. } => ToolError::BadRef {
            message,
            ref_id: None,
        },
    }
}

/// Caps the final answer (D6): `Ok` holds the result itself, to be sent as `{ result }`.
fn capped(result: Value) -> ExecuteOutcome {
    let size = json!({ "result": &result }).to_string().chars().count();
    if size > RESULT_CAP_CHARS {
        ExecuteOutcome::Failed(ToolError::ResultTooLarge { size }.to_mcp())
    } else {
        ExecuteOutcome::Ok(result)
    }
}

/// The compose / projection answer `{ result }`, or the failure as it is.
fn answer(outcome: ExecuteOutcome) -> ExecuteOutcome {
    match outcome {
        ExecuteOutcome::Ok(result) => ExecuteOutcome::Ok(json!({ "result": result })),
        failed => failed,
    }
}

impl Engine {
    /// Runs an execute_tools request. `only_integration` restricts the tools to one integration
    /// (REST `/rest/{integration}`, which also never sends compose or return).
    pub async fn execute_tools(
        &self,
        who: &Principal,
        req: ExecuteRequest,
        opts: &CallOptions,
        only_integration: Option<&str>,
    ) -> ExecuteOutcome {
        // The request's context, once: one catalog snapshot, whatever registers meanwhile, and
        // one scrubber and policy for every execution.
        let scope = self.scope(who, opts).await;
        if req.compose {
            return scope.compose(req).await;
        }
        let n = req.executions.len();
        let mut slots: Vec<Option<Result<Value, ToolError>>> = vec![None; n];
        let mut runnable = Vec::new();
        let ref_ids: Vec<Option<String>> =
            req.executions.iter().map(|e| e.ref_id.clone()).collect();
        for (i, e) in req.executions.into_iter().enumerate() {
            if let Some(integration) = only_integration {
                if scope
                    .snapshot
                    .get(&e.tool)
                    .is_none_or(|t| t.spec.integration != integration)
                {
                    slots[i] = Some(Err(ToolError::NotFound {
                        tool: e.tool,
                        integration: Some(integration.to_owned()),
                    }));
                    continue;
                }
            }
            runnable.push((
                i,
                Invocation {
                    tool: e.tool,
                    args: e.args,
                },
            ));
        }
        let (indexes, invocations): (Vec<usize>, Vec<Invocation>) = runnable.into_iter().unzip();
        let outcomes = scope.run_all(invocations).await;
        for (i, outcome) in indexes.into_iter().zip(outcomes) {
            slots[i] = Some(outcome.result);
        }
        let slots: Vec<Result<Value, ToolError>> = slots
            .into_iter()
            .map(|s| s.expect("every execution has an outcome"))
            .collect();
        let Some(template) = req.return_template else {
            let results: Vec<Value> = slots.iter().map(entry).collect();
            return ExecuteOutcome::Ok(json!({ "results": results }));
        };
        let mut results: HashMap<String, Value> = HashMap::new();
        let mut failed: HashSet<String> = HashSet::new();
        // Without compose, failed executions are listed, so a projection cannot hide them.
        let mut errors: Vec<Value> = Vec::new();
        for (i, (slot, ref_id)) in slots.into_iter().zip(ref_ids).enumerate() {
            match (slot, ref_id) {
                (Ok(v), Some(r)) => {
                    results.insert(r, v);
                }
                (Ok(_), None) => {}
                (Err(e), ref_id) => {
                    if let Some(r) = &ref_id {
                        failed.insert(r.clone());
                    }
                    errors.push(e.to_mcp_at(EntryContext {
                        index: Some(i),
                        ref_id,
                        errors: None,
                    }));
                }
            }
        }
        let ctx = Context {
            vault: None,
            steps: Some(&results),
            failed: &failed,
        };
        match template::resolve(&template, &ctx) {
            Err(e) => ExecuteOutcome::Failed(bad_ref_in_return(e).to_mcp_at(EntryContext {
                errors: Some(errors),
                ..Default::default()
            })),
            Ok(projection) => match capped(projection) {
                ExecuteOutcome::Ok(result) => {
                    let mut body = Map::new();
                    body.insert("result".into(), result);
                    if !errors.is_empty() {
                        body.insert("errors".into(), Value::Array(errors));
                    }
                    ExecuteOutcome::Ok(Value::Object(body))
                }
                failed => failed,
            },
        }
    }
}

impl CallScope<'_> {
    /// Compose: steps in order, each through the whole pipeline with earlier results available
    /// to its references; the first failure ends the run and is the answer.
    async fn compose(&self, req: ExecuteRequest) -> ExecuteOutcome {
        let mut results: HashMap<String, Value> = HashMap::new();
        let no_failures = HashSet::new();
        let mut last = Value::Null;
        // The run's scrubber: every secret any step uses joins it.
        let mut scrubber = match &self.base {
            Ok(base) => base.scrubber.clone(),
            Err(_) => {
                // Nothing runs: the first step is refused and recorded, and is the answer.
                let first = req
                    .executions
                    .into_iter()
                    .next()
                    .map(|e| e.tool)
                    .unwrap_or_default();
                let inv = Invocation {
                    tool: first,
                    args: Value::Null,
                };
                let err = self.run(inv, None).await.result.unwrap_err();
                return ExecuteOutcome::Failed(err.to_mcp_at(EntryContext {
                    index: Some(0),
                    ..Default::default()
                }));
            }
        };
        for (i, e) in req.executions.into_iter().enumerate() {
            let ref_id = e.ref_id.clone().unwrap_or_default();
            let inv = Invocation {
                tool: e.tool,
                args: e.args,
            };
            let chain = Chain {
                results: &results,
                scrubber: &mut scrubber,
            };
            let outcome = self.run(inv, Some(chain)).await;
            match outcome.result {
                Ok(v) => {
                    last = v.clone();
                    results.insert(ref_id, v);
                }
                Err(err) => {
                    let err = match err {
                        ToolError::BadRef { message, .. } => ToolError::BadRef {
                            message,
                            ref_id: Some(ref_id.clone()),
                        },
                        other => other,
                    };
                    return ExecuteOutcome::Failed(err.to_mcp_at(EntryContext {
                        index: Some(i),
                        ref_id: Some(ref_id),
                        errors: None,
                    }));
                }
            }
        }
        // A secret a later step used may sit in an earlier step's result: scrub the answer with
        // every secret of the run.
        match req.return_template {
            None => {
                scrubber.scrub(&mut last);
                answer(capped(last))
            }
            Some(template) => {
                let ctx = Context {
                    vault: None,
                    steps: Some(&results),
                    failed: &no_failures,
                };
                match template::resolve(&template, &ctx) {
                    Ok(mut projection) => {
                        scrubber.scrub(&mut projection);
                        answer(capped(projection))
                    }
                    Err(e) => ExecuteOutcome::Failed(bad_ref_in_return(e).to_mcp()),
                }
            }
        }
    }
}
