//! The one error of a tool execution: its code, message and details, rendered here as the flat
//! MCP entry of D3 (`{ "error", "code", ...details }`); the REST surface renders the same parts
//! as seed 004's `{ "error": { "code", "message", "meta" } }` with `rest_status_and_code`.

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use crate::catalog::HandlerError;
use crate::store::tool_calls::CallStatus;

/// A schema violation: where (a JSON Pointer into the arguments) and what.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FieldError {
    pub path: String,
    pub message: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ToolError {
    NotFound {
        tool: String,
        /// Set when the call was limited to one integration (`/rest/{integration}`).
        #[serde(default)]
        integration: Option<String>,
    },
    NotAllowed {
        tool: String,
        rule: crate::policy::Rule,
    },
    /// A person denied the held call (D15).
    Denied {
        tool: String,
        confirmation_id: String,
        reason: Option<String>,
    },
    NotConnected {
        integration: String,
        /// The connection existed but its token could not be refreshed.
        #[serde(default)]
        expired: bool,
    },
    /// Connected, but the API asked for access the user did not grant: connecting again asks
    /// for `scopes` too (a step-up).
    ScopeNeeded {
        integration: String,
        scopes: Vec<String>,
    },
    InvalidArguments {
        errors: Vec<FieldError>,
    },
    AwaitingConfirmation {
        confirmation_id: String,
        expires_at: String,
        url: String,
    },
    Timeout {
        timeout_ms: u64,
    },
    /// Over a limit: the key's own calls per minute (`policy_id` None), or a rate limit or
    /// quota of the caller's policy (its id, and the limit as a line).
    RateLimited {
        retry_after_s: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        policy_id: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        limit: Option<String>,
    },
    Unavailable {
        reason: String,
    },
    Handler {
        handler_error: String,
    },
    BadRef {
        message: String,
        ref_id: Option<String>,
    },
    ResultTooLarge {
        size: usize,
    },
}

impl From<HandlerError> for ToolError {
    fn from(e: HandlerError) -> ToolError {
        match e {
            HandlerError::Failed(handler_error) => ToolError::Handler { handler_error },
            HandlerError::Unavailable(reason) => ToolError::Unavailable { reason },
            HandlerError::InvalidArgument { path, message } => ToolError::InvalidArguments {
                errors: vec![FieldError { path, message }],
            },
            HandlerError::NotConnected {
                integration,
                expired,
            } => ToolError::NotConnected {
                integration,
                expired,
            },
            HandlerError::ScopeNeeded {
                integration,
                scopes,
            } => ToolError::ScopeNeeded {
                integration,
                scopes,
            },
            HandlerError::Timeout { timeout_ms } => ToolError::Timeout { timeout_ms },
        }
    }
}

/// Where an execute_tools error entry happened (see `ToolError::to_mcp_at`).
#[derive(Debug, Clone, Default)]
pub struct EntryContext {
    pub index: Option<usize>,
    pub ref_id: Option<String>,
    pub errors: Option<Vec<Value>>,
}

/// Results above this many characters of JSON are replaced by `RESULT_TOO_LARGE` (D6).
pub const RESULT_CAP_CHARS: usize = 60_000;

impl ToolError {
    /// The MCP code (D3).
    pub fn code(&self) -> &'static str {
        match self {
            ToolError::NotFound { .. } => "TOOL_NOT_FOUND",
            ToolError::NotAllowed { .. } | ToolError::Denied { .. } => "NOT_ALLOWED",
            ToolError::NotConnected { .. } | ToolError::ScopeNeeded { .. } => "NOT_CONNECTED",
            ToolError::InvalidArguments { .. } => "INVALID_ARGUMENTS",
            ToolError::AwaitingConfirmation { .. } => "AWAITING_CONFIRMATION",
            ToolError::Timeout { .. } => "TIMEOUT",
            ToolError::RateLimited { .. } => "RATE_LIMITED",
            ToolError::Unavailable { .. } => "UNAVAILABLE",
            ToolError::Handler { .. } => "TOOL_ERROR",
            ToolError::BadRef { .. } => "BAD_REF",
            ToolError::ResultTooLarge { .. } => "RESULT_TOO_LARGE",
        }
    }

    /// Lowercase, with a hint after `;` where the caller can act.
    pub fn message(&self) -> String {
        match self {
            ToolError::NotFound { tool, integration: None } => format!("tool not found: {tool}; use search_tools to find available tools"),
            ToolError::NotFound { tool, integration: Some(i) } => format!("tool not found in integration {i}: {tool}"),
            ToolError::NotAllowed { tool, rule } => match (rule.list.as_str(), &rule.pattern) {
                ("allow", None) => format!("tool {tool} is not on the allowlist of this key's policy {}", rule.policy_id),
                (list, Some(p)) => format!("tool {tool} is blocked by policy {} ({list}: {p})", rule.policy_id),
                (list, None) => format!("tool {tool} is blocked by policy {} ({list})", rule.policy_id),
            },
            ToolError::Denied { tool, reason: Some(r), .. } => format!("a person denied this call of {tool}: {r}"),
            ToolError::Denied { tool, reason: None, .. } => format!("a person denied this call of {tool}"),
            ToolError::NotConnected { integration, expired: false } => format!(
                "integration {integration} is not connected; call connect with integration \"{integration}\" and ask the user to open the link"
            ),
            ToolError::NotConnected { integration, expired: true } => format!(
                "the connection to {integration} expired and could not be refreshed; call connect with integration \"{integration}\" to reconnect"
            ),
            ToolError::ScopeNeeded { integration, scopes } if scopes.is_empty() => format!(
                "{integration} needs access the user has not granted; call connect with integration \"{integration}\" and ask the user to open the link and grant it"
            ),
            ToolError::ScopeNeeded { integration, scopes } => format!(
                "{integration} needs access the user has not granted (scopes: {}); call connect with integration \"{integration}\" and ask the user to open the link and grant it",
                scopes.join(" ")
            ),
            ToolError::InvalidArguments { errors } => match errors.first() {
                Some(e) if errors.len() == 1 => format!("invalid arguments: {} at {}", e.message, display_path(&e.path)),
                _ => format!("invalid arguments ({} problems); see errors", errors.len()),
            },
            ToolError::AwaitingConfirmation { .. } => {
                "this call needs a person's confirmation; ask the user to open the url and approve it".into()
            }
            ToolError::Timeout { timeout_ms } => format!("tool timed out after {timeout_ms} ms"),
            ToolError::RateLimited { retry_after_s, policy_id: Some(policy), limit: Some(limit) } => format!("over the limit \"{limit}\" of policy {policy}; retry in {retry_after_s} s"),
            ToolError::RateLimited { retry_after_s, .. } => format!("this key made too many calls this minute; retry in {retry_after_s} s"),
            ToolError::Unavailable { reason } => format!("tool unavailable: {reason}"),
            ToolError::Handler { .. } => "tool failed; see handler_error".into(),
            ToolError::BadRef { message, .. } => message.clone(),
            ToolError::ResultTooLarge { size } => format!(
                "result too large: {size} characters (limit {RESULT_CAP_CHARS}); use compose mode and a return projection to send back only what you need"
            ),
        }
    }

    /// The error's details: the MCP entry's extra fields, the REST error's `meta`.
    pub fn details(&self) -> Map<String, Value> {
        let mut m = Map::new();
        match self {
            ToolError::NotFound { tool, .. } => {
                m.insert("tool".into(), json!(tool));
            }
            ToolError::NotAllowed { rule, .. } => {
                m.insert("rule".into(), json!(rule));
            }
            ToolError::RateLimited {
                retry_after_s,
                policy_id,
                limit,
            } => {
                m.insert("retry_after_s".into(), json!(retry_after_s));
                if let (Some(policy), Some(limit)) = (policy_id, limit) {
                    m.insert("policy_id".into(), json!(policy));
                    m.insert("limit".into(), json!(limit));
                }
            }
            ToolError::Denied {
                confirmation_id,
                reason,
                ..
            } => {
                m.insert("confirmation_id".into(), json!(confirmation_id));
                m.insert("reason".into(), json!(reason));
            }
            ToolError::NotConnected { integration, .. } => {
                m.insert("integration".into(), json!(integration));
            }
            ToolError::ScopeNeeded {
                integration,
                scopes,
            } => {
                m.insert("integration".into(), json!(integration));
                m.insert("required_scopes".into(), json!(scopes));
            }
            ToolError::InvalidArguments { errors } => {
                m.insert("errors".into(), json!(errors));
            }
            ToolError::AwaitingConfirmation {
                confirmation_id,
                expires_at,
                url,
            } => {
                m.insert("confirmation_id".into(), json!(confirmation_id));
                m.insert("expires_at".into(), json!(expires_at));
                m.insert("url".into(), json!(url));
            }
            ToolError::Timeout { timeout_ms } => {
                m.insert("timeout_ms".into(), json!(timeout_ms));
            }
            ToolError::Unavailable { .. } => {}
            ToolError::Handler { handler_error } => {
                m.insert("handler_error".into(), json!(handler_error));
            }
            ToolError::BadRef { ref_id, .. } => {
                if let Some(r) = ref_id {
                    m.insert("ref_id".into(), json!(r));
                }
            }
            ToolError::ResultTooLarge { size } => {
                m.insert("size".into(), json!(size));
            }
        }
        m
    }

    /// The flat MCP error entry of D3.
    pub fn to_mcp(&self) -> Value {
        self.to_mcp_at(EntryContext::default())
    }

    /// The flat MCP error entry with where it happened: a compose step's `index` and `ref_id`,
    /// and the failed executions a projection lists under `errors`.
    pub fn to_mcp_at(&self, at: EntryContext) -> Value {
        let mut m = Map::new();
        m.insert("error".into(), json!(self.message()));
        m.insert("code".into(), json!(self.code()));
        m.extend(self.details());
        if let Some(i) = at.index {
            m.insert("index".into(), json!(i));
        }
        if let Some(r) = at.ref_id {
            m.insert("ref_id".into(), json!(r));
        }
        if let Some(errors) = at.errors.filter(|e| !e.is_empty()) {
            m.insert("errors".into(), Value::Array(errors));
        }
        Value::Object(m)
    }

    /// REST status and code (seed 004 / D4).
    pub fn rest_status_and_code(&self) -> (u16, &'static str) {
        match self {
            ToolError::NotFound { .. } => (404, "tool_not_found"),
            ToolError::NotAllowed { .. } | ToolError::Denied { .. } => (403, "tool_not_allowed"),
            ToolError::NotConnected { .. } | ToolError::ScopeNeeded { .. } => {
                (409, "not_connected")
            }
            ToolError::InvalidArguments { .. } => (422, "tool_invalid_arguments"),
            ToolError::AwaitingConfirmation { .. } => (202, "awaiting_confirmation"),
            ToolError::Timeout { .. } => (504, "tool_timeout"),
            ToolError::RateLimited { .. } => (429, "rate_limited"),
            ToolError::Unavailable { .. } => (503, "tool_unavailable"),
            ToolError::Handler { .. } => (502, "tool_error"),
            ToolError::BadRef { .. } => (400, "bad_request"),
            // Only MCP caps results by characters; REST has its own ceiling (a handler failure).
            ToolError::ResultTooLarge { .. } => (502, "tool_error"),
        }
    }

    /// Redacts secrets from every text the error carries.
    pub fn scrub(&mut self, scrubber: &super::Scrubber) {
        if scrubber.is_empty() {
            return;
        }
        if let Ok(mut v) = serde_json::to_value(&*self) {
            scrubber.scrub(&mut v);
            *self = serde_json::from_value(v).unwrap_or(ToolError::Handler {
                handler_error: "[redacted]".into(),
            });
        }
    }

    /// The tool_call status this outcome leaves.
    pub fn call_status(&self) -> CallStatus {
        match self {
            ToolError::NotAllowed { .. } | ToolError::Denied { .. } => CallStatus::Denied,
            ToolError::AwaitingConfirmation { .. } => CallStatus::AwaitingConfirmation,
            _ => CallStatus::Failed,
        }
    }
}

fn display_path(p: &str) -> &str {
    if p.is_empty() {
        "/"
    } else {
        p
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mcp_entries_are_flat_with_details() {
        let e = ToolError::NotConnected {
            integration: "github".into(),
            expired: false,
        }
        .to_mcp();
        assert_eq!(e["code"], "NOT_CONNECTED");
        assert_eq!(e["integration"], "github");
        assert!(e["error"]
            .as_str()
            .unwrap()
            .starts_with("integration github is not connected"));
        let e = ToolError::InvalidArguments {
            errors: vec![FieldError {
                path: "/owner".into(),
                message: "\"owner\" is a required property".into(),
            }],
        }
        .to_mcp();
        assert_eq!(e["errors"][0]["path"], "/owner");
        let e = ToolError::Handler {
            handler_error: "boom".into(),
        }
        .to_mcp();
        assert_eq!(e["handler_error"], "boom");
        for err in [e, ToolError::ResultTooLarge { size: 70_000 }.to_mcp()] {
            let msg = err["error"].as_str().unwrap();
            assert_eq!(msg, msg.to_lowercase(), "messages are lowercase");
            assert!(!msg.ends_with('.'));
        }
    }

    #[test]
    fn rest_errors_follow_seed_004() {
        let rule = crate::policy::Rule {
            policy_id: "pol_1".into(),
            list: "deny".into(),
            pattern: Some("x".into()),
        };
        let e = ToolError::NotAllowed {
            tool: "x".into(),
            rule,
        };
        assert_eq!(e.rest_status_and_code(), (403, "tool_not_allowed"));
        assert_eq!(
            e.details()["rule"],
            json!({ "policy_id": "pol_1", "list": "deny", "pattern": "x" })
        );
        assert_eq!(
            e.to_mcp()["error"],
            "tool x is blocked by policy pol_1 (deny: x)"
        );
        assert_eq!(
            ToolError::Timeout { timeout_ms: 5 }.rest_status_and_code(),
            (504, "tool_timeout")
        );
        assert_eq!(
            ToolError::Unavailable { reason: "r".into() }.rest_status_and_code(),
            (503, "tool_unavailable")
        );
    }
}
