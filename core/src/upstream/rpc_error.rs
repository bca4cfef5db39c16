//! Why a request to an upstream MCP server gave no result, classified for the breaker and for
//! retries; shared by every transport and the conversation of a request (`exchange.rs`).

use serde_json::Value;

/// Why a request to an upstream did not give a result.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RpcError {
    /// Nothing was sent: the connection could not be made (safe to retry any call).
    #[error("{0}")]
    NotSent(String),
    /// Sent, but no answer in time.
    #[error("the server did not answer within {0} ms")]
    Timeout(u64),
    /// The connection broke after the request was sent.
    #[error("{0}")]
    Transport(String),
    /// HTTP 5xx.
    #[error("the server answered HTTP {0}")]
    ServerError(u16),
    /// The session id is no longer known to the server.
    #[error("the server no longer knows this session")]
    SessionGone,
    /// HTTP 401/403: the credential was refused.
    #[error("the server refused the credential (HTTP {0})")]
    Unauthorized(u16),
    /// HTTP 403 `insufficient_scope` (RFC 6750 §3.1): the credential is good but lacks
    /// access; `scopes` are what the challenge's `scope` asks for (may be empty).
    #[error("the credential lacks the access this needs (scopes: {})", .scopes.join(" "))]
    InsufficientScope { scopes: Vec<String> },
    /// A JSON-RPC error answer.
    #[error("{message} (JSON-RPC error {code})")]
    Remote { code: i64, message: String },
    /// Anything else that is not MCP.
    #[error("{0}")]
    Protocol(String),
}

impl RpcError {
    /// Counts toward opening the breaker (timeouts, 5xx, transport), unlike a refused argument.
    pub fn is_server_failure(&self) -> bool {
        matches!(
            self,
            RpcError::NotSent(_)
                | RpcError::Timeout(_)
                | RpcError::Transport(_)
                | RpcError::ServerError(_)
        )
    }
}

/// The result of a JSON-RPC answer, or its error.
pub(super) fn answer_of(answer: Value) -> Result<Value, RpcError> {
    if let Some(err) = answer.get("error") {
        return Err(RpcError::Remote {
            code: err.get("code").and_then(Value::as_i64).unwrap_or(0),
            message: err
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("error")
                .chars()
                .take(500)
                .collect(),
        });
    }
    answer
        .get("result")
        .cloned()
        .ok_or_else(|| RpcError::Protocol("the answer has neither result nor error".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_server_side_failures_count_for_the_breaker() {
        assert!(RpcError::Timeout(5).is_server_failure());
        assert!(RpcError::ServerError(502).is_server_failure());
        assert!(!RpcError::Remote {
            code: -32602,
            message: "bad".into()
        }
        .is_server_failure());
        assert!(!RpcError::Unauthorized(401).is_server_failure());
    }
}
