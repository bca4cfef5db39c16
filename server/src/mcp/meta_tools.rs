//! The meta-tools as an MCP client sees them in tools/list: names, descriptions (seed 000's
//! wording) and input schemas. Everything else is reached through these.

use std::sync::Arc;

use rmcp::model::{Tool, ToolAnnotations};
use serde_json::{json, Value};

pub const SEARCH_TOOLS: &str = "search_tools";
pub const GET_TOOL_SCHEMA: &str = "get_tool_schema";
pub const EXECUTE_TOOLS: &str = "execute_tools";
pub const WHOAMI: &str = "whoami";
pub const LIST_INTEGRATIONS: &str = "list_integrations";
pub const CONNECT: &str = "connect";
pub const WAIT_FOR_CONNECTION: &str = "wait_for_connection";
pub const GET_AUTH_URL: &str = "get_auth_url";
pub const CURL_SESSION: &str = "curl_session";

const CURL_SESSION_DESCRIPTION: &str = "HIGH RISK — do not call without explicit user approval. Mints a short-lived proxy token (15 min by default; set expiresInSeconds for 60s–1h, and ask for no longer than the task needs) granting ARBITRARY API calls (GET/POST/PUT/PATCH/DELETE), including destructive writes, against the listed integration(s) — the proxy injects the user's real credential transparently at /c/<integration>/<path>, so anything reachable via that credential is reachable through this token. Before invoking, tell the user exactly which integration(s) and what action you intend to perform, and wait for their explicit go-ahead; do not mint speculatively or as a default first step. Only integrations that have curl proxy enabled are accepted.";

const EXECUTE_DESCRIPTION: &str = "Execute one or more tools in a single call. Runs them concurrently (bounded) and returns a results array in the same order as executions. A single tool failing does not abort the others — its entry carries an error instead of a result. For a single tool, pass a one-element executions array.\n\nref_id names an execution's result. With compose: true, executions run in order (at most 8, each with a unique ref_id) and each step's args can read earlier results with {{step:<ref_id>.<path>}} (path segments are keys or array indexes, e.g. {{step:list.files.0.id}}); a string that is exactly one reference keeps the value's type, an embedded reference is interpolated (non-strings as JSON), and a malformed reference fails as BAD_REF. The first failing step ends the run. Use compose when the middle of a workflow (file contents, CSV bodies) would only burn context or trip the 60,000-character result cap. {{vault:NAME}} inserts a project secret into args; secrets never appear in results.\n\nreturn is a template over results by ref_id whose shape is the response shape (a single ref returns one value, an object returns an object, an array an array); it is the only thing sent back, as { result }. Without compose, failed executions are listed under errors. Without return, compose answers { result } with the last execution's result.";

/// The operation of core's permission table each meta-tool performs (D21).
pub fn operation(name: &str) -> Option<workbench_core::auth::Operation> {
    use workbench_core::auth::Operation as Op;
    Some(match name {
        SEARCH_TOOLS | GET_TOOL_SCHEMA => Op::ToolsRead,
        EXECUTE_TOOLS => Op::ToolsRun,
        WHOAMI => Op::Identity,
        LIST_INTEGRATIONS => Op::IntegrationsRead,
        CONNECT | GET_AUTH_URL | WAIT_FOR_CONNECTION => Op::Connect,
        CURL_SESSION => Op::ProxyMint,
        _ => return None,
    })
}

fn object(v: Value) -> Arc<serde_json::Map<String, Value>> {
    match v {
        Value::Object(m) => Arc::new(m),
        _ => unreachable!("tool schemas are objects"),
    }
}

fn tool(name: &'static str, description: &'static str, schema: Value, read_only: bool) -> Tool {
    Tool::new(name, description, object(schema))
        .with_annotations(ToolAnnotations::new().read_only(read_only))
}

fn connect_schema() -> Value {
    json!({
        "type": "object",
        "properties": { "integration": { "type": "string", "description": "Integration name, as list_integrations or search_tools returned it" } },
        "required": ["integration"]
    })
}

/// The meta-tools, in the order tools/list returns them.
pub fn list() -> Vec<Tool> {
    vec![
        tool(
            SEARCH_TOOLS,
            "Search available tools by what you want to do, e.g. \"create jira issue\" or \"send email\". Matches words in any order, tolerates typos and common synonyms, and returns the best matches first with a relevance score. Returns the top 10 by default; pass limit (max 50) for more.",
            json!({
                "type": "object",
                "properties": {
                    "query": { "type": "string", "description": "What you want to do, in a few words" },
                    "limit": { "type": "integer", "minimum": 1, "maximum": 50, "default": 10, "description": "How many results (max 50)" }
                },
                "required": ["query"]
            }),
            true,
        ),
        tool(
            GET_TOOL_SCHEMA,
            "Get input schema for a specific tool",
            json!({
                "type": "object",
                "properties": { "tool": { "type": "string", "description": "The tool's name, as search_tools returned it" } },
                "required": ["tool"]
            }),
            true,
        ),
        tool(
            EXECUTE_TOOLS,
            EXECUTE_DESCRIPTION,
            json!({
                "type": "object",
                "properties": {
                    "executions": {
                        "type": "array",
                        "minItems": 1,
                        "maxItems": 50,
                        "description": "The tools to run, each { tool, args }",
                        "items": {
                            "type": "object",
                            "properties": {
                                "tool": { "type": "string", "description": "Tool name" },
                                "args": { "type": "object", "description": "Arguments matching the tool's input schema" },
                                "ref_id": { "type": "string", "description": "Name for this execution's result, used by {{step:<ref_id>.<path>}} and return" }
                            },
                            "required": ["tool"],
                            "additionalProperties": false
                        }
                    },
                    "compose": { "type": "boolean", "default": false, "description": "Run executions in order, letting later args reference earlier results" },
                    "return": { "description": "A template over results by ref_id; its shape is the response shape" }
                },
                "required": ["executions"],
                "additionalProperties": false
            }),
            false,
        ),
        tool(
            WHOAMI,
            "Return the current authenticated workbench user (id + email). Like /me — identity only, not connected integrations.",
            json!({ "type": "object", "properties": {} }),
            true,
        ),
        tool(
            LIST_INTEGRATIONS,
            "List all available integrations and connection status",
            json!({ "type": "object", "properties": {} }),
            true,
        ),
        tool(
            CONNECT,
            "Begin connecting an integration. Returns a connectionId and a workbench URL for the user to open. The user must be signed in to workbench as the same account this agent is connected to; the link will not work for anyone else. Call wait_for_connection afterward.",
            connect_schema(),
            false,
        ),
        tool(
            WAIT_FOR_CONNECTION,
            "Block until a connection started by connect() completes. Returns status CONNECTED, TIMEOUT, or EXPIRED.",
            json!({
                "type": "object",
                "properties": {
                    "connectionId": { "type": "string", "description": "The connectionId connect returned" },
                    "timeoutSec": { "type": "integer", "minimum": 1, "maximum": 600, "default": 600, "description": "How long to wait (max 600)" }
                },
                "required": ["connectionId"]
            }),
            true,
        ),
        tool(GET_AUTH_URL, "Deprecated alias of connect(). Get a URL to connect an integration.", connect_schema(), false),
        tool(
            CURL_SESSION,
            CURL_SESSION_DESCRIPTION,
            json!({
                "type": "object",
                "properties": {
                    "integrations": { "type": "array", "items": { "type": "string" }, "minItems": 1, "description": "Integrations the token may reach" },
                    "expiresInSeconds": { "type": "integer", "minimum": 60, "maximum": 3600, "default": 900, "description": "Token lifetime (60–3600 s)" }
                },
                "required": ["integrations"]
            }),
            false,
        ),
    ]
}
