//! `execute_tools` requests as every surface receives them (MCP execute_tools, REST
//! `/rest/{integration}`): parsing and checking the request shape (including the compose rules,
//! which are schema rules: nothing runs when they are broken), and the result entry shape.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::{ToolError, BATCH_MAX, COMPOSE_MAX};
use crate::args::Arg;

/// Ref ids: a letter or '_' then letters, digits, '_' or '-', up to 64 characters.
pub fn valid_ref_id(s: &str) -> bool {
    let mut chars = s.chars();
    s.len() <= 64
        && chars
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// One entry of `executions`.
#[derive(Debug, Clone)]
pub struct ExecutionSpec {
    pub tool: String,
    pub args: Value,
    pub ref_id: Option<String>,
}

/// A parsed execute_tools request.
#[derive(Debug, Clone)]
pub struct ExecuteRequest {
    pub executions: Vec<ExecutionSpec>,
    pub compose: bool,
    pub return_template: Option<Value>,
}

/// An execute_tools request as sent; `parse_request` checks it.
#[derive(Deserialize)]
struct RawRequest {
    #[serde(default)]
    executions: Option<Arg<Vec<Arg<RawExecution>>>>,
    #[serde(default)]
    compose: Option<Arg<bool>>,
    #[serde(default, rename = "return")]
    return_template: Option<Value>,
    #[serde(flatten)]
    unknown: BTreeMap<String, Value>,
}

/// One entry of `executions` as sent.
#[derive(Deserialize)]
struct RawExecution {
    #[serde(default)]
    tool: Option<Arg<String>>,
    #[serde(default)]
    args: Option<Arg<Map<String, Value>>>,
    #[serde(default)]
    ref_id: Option<Arg<String>>,
    #[serde(flatten)]
    unknown: BTreeMap<String, Value>,
}

/// Why an execute_tools request was refused before anything ran; the message says what to fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct RequestError(String);

impl From<String> for RequestError {
    fn from(s: String) -> Self {
        RequestError(s)
    }
}

impl From<&str> for RequestError {
    fn from(s: &str) -> Self {
        RequestError(s.to_owned())
    }
}

/// Checks the shape of an execute_tools request; the message says what to fix.
pub fn parse_request(args: &Value) -> Result<ExecuteRequest, RequestError> {
    let raw: RawRequest = serde_json::from_value(args.clone())
        .map_err(|_| "arguments must be an object with an executions array")?;
    if let Some(key) = raw.unknown.keys().next() {
        return Err(format!("unknown field {key:?}; expected executions, compose, return").into());
    }
    let list = raw
        .executions
        .and_then(Arg::ok)
        .ok_or("executions must be an array of { tool, args }")?;
    if list.is_empty() {
        return Err("executions is empty; pass at least one { tool, args }".into());
    }
    if list.len() > BATCH_MAX {
        return Err(format!(
            "too many executions: {} (at most {BATCH_MAX}); split the batch",
            list.len()
        )
        .into());
    }
    let compose = match raw.compose {
        None => false,
        Some(Arg::Ok(b)) => b,
        Some(Arg::Wrong(_)) => return Err("compose must be true or false".into()),
    };
    let mut executions = Vec::with_capacity(list.len());
    for (i, e) in list.into_iter().enumerate() {
        let e = e
            .ok()
            .ok_or_else(|| format!("executions[{i}] must be an object {{ tool, args }}"))?;
        if let Some(key) = e.unknown.keys().next() {
            return Err(format!(
                "executions[{i}]: unknown field {key:?}; expected tool, args, ref_id"
            )
            .into());
        }
        let tool = e
            .tool
            .and_then(Arg::ok)
            .filter(|t| !t.is_empty())
            .ok_or_else(|| format!("executions[{i}].tool must be a tool name"))?;
        let args = match e.args {
            None => Map::new(),
            Some(a) => a
                .ok()
                .ok_or_else(|| format!("executions[{i}].args must be an object"))?,
        };
        let ref_id = match e.ref_id {
            None => None,
            Some(Arg::Ok(r)) if valid_ref_id(&r) => Some(r),
            Some(_) => {
                return Err(format!("executions[{i}].ref_id must start with a letter or '_' and use letters, digits, '_' or '-' (at most 64)").into())
            }
        };
        executions.push(ExecutionSpec {
            tool,
            args: Value::Object(args),
            ref_id,
        });
    }
    if compose {
        if executions.len() > COMPOSE_MAX {
            return Err(format!(
                "too many executions for compose: {} (at most {COMPOSE_MAX})",
                executions.len()
            )
            .into());
        }
        if let Some(i) = executions.iter().position(|e| e.ref_id.is_none()) {
            return Err(format!(
                "executions[{i}] needs a ref_id: every execution of a compose run has one"
            )
            .into());
        }
    }
    let mut seen = std::collections::HashSet::new();
    for (i, e) in executions.iter().enumerate() {
        if let Some(r) = &e.ref_id {
            if !seen.insert(r.as_str()) {
                return Err(format!(
                    "executions[{i}].ref_id {r:?} is used twice; ref_id must be unique"
                )
                .into());
            }
        }
    }
    Ok(ExecuteRequest {
        executions,
        compose,
        return_template: raw.return_template,
    })
}

/// A result entry as execute_tools shows it.
pub fn entry(result: &Result<Value, ToolError>) -> Value {
    match result {
        Ok(v) => json!({ "result": v }),
        Err(e) => e.to_mcp(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_checked_before_anything_runs() {
        assert!(parse_request(&json!({ "executions": [{ "tool": "a", "args": {} }] })).is_ok());
        for (bad, needle) in [
            (json!([]), "object"),
            (json!({}), "executions must be an array"),
            (json!({ "executions": [] }), "empty"),
            (json!({ "executions": [{ "args": {} }] }), "tool must be"),
            (
                json!({ "executions": [{ "tool": "a", "args": 3 }] }),
                "args must be an object",
            ),
            (
                json!({ "executions": [{ "tool": "a", "extra": 1 }] }),
                "unknown field",
            ),
            (
                json!({ "executions": [{ "tool": "a" }], "bogus": 1 }),
                "unknown field",
            ),
            (
                json!({ "executions": [{ "tool": "a", "ref_id": "1x" }] }),
                "ref_id must start",
            ),
            (
                json!({ "executions": [{ "tool": "a", "ref_id": "x" }, { "tool": "b", "ref_id": "x" }] }),
                "used twice",
            ),
            (
                json!({ "executions": [{ "tool": "a" }], "compose": "yes" }),
                "compose must be",
            ),
        ] {
            let err = parse_request(&bad).unwrap_err().to_string();
            assert!(err.contains(needle), "{bad}: {err}");
        }
        let many: Vec<Value> = (0..51).map(|_| json!({ "tool": "a" })).collect();
        assert!(parse_request(&json!({ "executions": many }))
            .unwrap_err()
            .to_string()
            .contains("too many"));
        let nine: Vec<Value> = (0..9)
            .map(|i| json!({ "tool": "a", "ref_id": format!("s{i}") }))
            .collect();
        assert!(
            parse_request(&json!({ "compose": true, "executions": nine }))
                .unwrap_err()
                .to_string()
                .contains("at most 8")
        );
        let err = parse_request(&json!({ "compose": true, "executions": [{ "tool": "a", "ref_id": "x" }, { "tool": "b" }] })).unwrap_err().to_string();
        assert!(err.contains("executions[1] needs a ref_id"), "{err}");
        assert!(parse_request(
            &json!({ "executions": [{ "tool": "b" }] , "return": "{{step:x.y}}" })
        )
        .is_ok());
    }
}
