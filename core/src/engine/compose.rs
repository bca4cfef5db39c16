//! execute_tools as a whole: plain batches, compose runs (sequential, each step may reference
//! earlier results, the first failure ends the run) and the `return` projection, with or
//! without compose. Seed 000, "Compose mode" and "Return projection".

use std::collections::{HashMap, HashSet};

use serde_json::{json, Map, Value};

use super::batch::{entry, ExecuteRequest};
use super::template::{self, Context, TemplateError};
use super::{CallOptions, Engine, Invocation, Scrubber, Steps, ToolError, RESULT_CAP_CHARS};
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
        TemplateError::BadRef(message) => ToolError::BadRef { message, ref_id: None },
        // `return` never resolves vault references, so this cannot happen; keep it a bad ref.
        TemplateError::UnknownSecret { message, .. } => ToolError::BadRef { message, ref_id: None },
    }
}

/// Caps the final answer (D6).
fn capped(result: Value) -> ExecuteOutcome {
    let body = json!({ "result": result });
    let size = body.to_string().chars().count();
    if size > RESULT_CAP_CHARS {
        ExecuteOutcome::Failed(ToolError::ResultTooLarge { size }.to_mcp())
    } else {
        ExecuteOutcome::Ok(body)
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
        if req.compose {
            return self.compose(who, req, opts).await;
        }
        let n = req.executions.len();
        let snapshot = self.snapshot(who);
        let mut entries: Vec<Option<Value>> = vec![None; n];
        let mut runnable = Vec::new();
        let ref_ids: Vec<Option<String>> = req.executions.iter().map(|e| e.ref_id.clone()).collect();
        for (i, e) in req.executions.into_iter().enumerate() {
            if let Some(integration) = only_integration {
                if !snapshot.get(&e.tool).is_some_and(|t| t.spec.integration == integration) {
                    let mut err = ToolError::NotFound { tool: e.tool.clone() }.to_mcp();
                    err["error"] = json!(format!("tool not found in integration {integration}: {}", e.tool));
                    entries[i] = Some(err);
                    continue;
                }
            }
            runnable.push((i, Invocation { tool: e.tool, args: e.args }));
        }
        let (slots, invocations): (Vec<usize>, Vec<Invocation>) = runnable.into_iter().unzip();
        let outcomes = self.run_batch(who, invocations, opts).await;
        let mut results: HashMap<String, Value> = HashMap::new();
        let mut failed: HashSet<String> = HashSet::new();
        let mut errors: Vec<Value> = Vec::new();
        for (slot, outcome) in slots.into_iter().zip(outcomes) {
            let e = entry(&outcome.result);
            match (&outcome.result, &ref_ids[slot]) {
                (Ok(v), Some(r)) => {
                    results.insert(r.clone(), v.clone());
                }
                (Err(_), Some(r)) => {
                    failed.insert(r.clone());
                }
                _ => {}
            }
            entries[slot] = Some(e);
        }
        let Some(template) = req.return_template else {
            let results: Vec<Value> = entries.into_iter().map(|e| e.unwrap_or(Value::Null)).collect();
            return ExecuteOutcome::Ok(json!({ "results": results }));
        };
        // Without compose, failed executions are listed, so a projection cannot hide them.
        for (i, e) in entries.iter().enumerate() {
            if let Some(e) = e.as_ref().filter(|e| e.get("error").is_some()) {
                let mut m = Map::new();
                m.insert("index".into(), json!(i));
                if let Some(r) = &ref_ids[i] {
                    m.insert("ref_id".into(), json!(r));
                }
                if let Value::Object(err) = e {
                    m.extend(err.clone());
                }
                errors.push(Value::Object(m));
            }
        }
        let ctx = Context { vault: None, steps: Some(&results), failed: &failed };
        match template::resolve(&template, &ctx) {
            Err(e) => {
                let mut err = bad_ref_in_return(e).to_mcp();
                if !errors.is_empty() {
                    err["errors"] = json!(errors);
                }
                ExecuteOutcome::Failed(err)
            }
            Ok(projection) => match capped(projection) {
                ExecuteOutcome::Ok(mut body) => {
                    if !errors.is_empty() {
                        body["errors"] = json!(errors);
                    }
                    ExecuteOutcome::Ok(body)
                }
                failed => failed,
            },
        }
    }

    /// Compose: steps in order, each through the whole pipeline with earlier results available
    /// to its references; the first failure ends the run and is the answer.
    async fn compose(&self, who: &Principal, req: ExecuteRequest, opts: &CallOptions) -> ExecuteOutcome {
        let mut results: HashMap<String, Value> = HashMap::new();
        let no_failures = HashSet::new();
        let mut last = Value::Null;
        let mut scrubber = Scrubber::new();
        for (i, e) in req.executions.into_iter().enumerate() {
            let ref_id = e.ref_id.clone().unwrap_or_default();
            let steps = Steps { results: Some(&results), failed: &no_failures };
            let outcome = self.run_step(who, Invocation { tool: e.tool, args: e.args }, opts, &steps, false, &mut scrubber).await;
            match outcome.result {
                Ok(v) => {
                    last = v.clone();
                    results.insert(ref_id, v);
                }
                Err(err) => {
                    let err = match err {
                        ToolError::BadRef { message, .. } => ToolError::BadRef { message, ref_id: Some(ref_id.clone()) },
                        other => other,
                    };
                    let mut body = err.to_mcp();
                    body["index"] = json!(i);
                    body["ref_id"] = json!(ref_id);
                    return ExecuteOutcome::Failed(body);
                }
            }
        }
        // A secret a later step used may sit in an earlier step's result: scrub the answer with
        // every secret of the run.
        match req.return_template {
            None => {
                scrubber.scrub(&mut last);
                capped(last)
            }
            Some(template) => {
                let ctx = Context { vault: None, steps: Some(&results), failed: &no_failures };
                match template::resolve(&template, &ctx) {
                    Ok(mut projection) => {
                        scrubber.scrub(&mut projection);
                        capped(projection)
                    }
                    Err(e) => ExecuteOutcome::Failed(bad_ref_in_return(e).to_mcp()),
                }
            }
        }
    }
}
