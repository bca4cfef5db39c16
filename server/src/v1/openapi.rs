//! `GET /v1/openapi.json`: the OpenAPI 3.1 description of the REST API, written by hand next to
//! the handlers it describes (and checked against them by the API tests).

use axum::Json;
use serde_json::{json, Value};

fn error_response(description: &str) -> Value {
    json!({ "description": description, "content": { "application/json": { "schema": { "$ref": "#/components/schemas/Error" } } } })
}

pub async fn document() -> Json<Value> {
    let errors = |codes: &[(&str, &str)]| {
        let mut m = serde_json::Map::new();
        for (status, text) in codes {
            m.insert((*status).into(), error_response(text));
        }
        Value::Object(m)
    };
    let mut invoke_responses = errors(&[
        ("400", "bad_request: malformed body"),
        ("401", "unauthorized"),
        ("404", "tool_not_found"),
        ("403", "tool_not_allowed (meta.rule)"),
        ("409", "not_connected (meta.integration)"),
        ("422", "tool_invalid_arguments (meta.errors)"),
        ("502", "tool_error (meta.handler_error) or tool_result_too_large (meta.size)"),
        ("503", "tool_unavailable"),
        ("504", "tool_timeout"),
    ]);
    invoke_responses["200"] = json!({ "description": "the finished call", "content": { "application/json": { "schema": { "$ref": "#/components/schemas/ToolCall" } } } });
    Json(json!({
        "openapi": "3.1.0",
        "info": {
            "title": "workbench REST API",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Tier 0: the tool catalog, invocation and usage. Authenticate with Authorization: Bearer <api key>."
        },
        "servers": [{ "url": "/" }],
        "security": [{ "bearer": [] }],
        "paths": {
            "/v1/me": { "get": {
                "summary": "The identity behind the API key",
                "responses": { "200": { "description": "user, project and key" }, "401": error_response("unauthorized") }
            }},
            "/v1/tools": { "get": {
                "summary": "List the catalog: every tool this key may run",
                "responses": {
                    "200": { "description": "the catalog", "content": { "application/json": { "schema": {
                        "type": "object", "required": ["object", "data"],
                        "properties": { "object": { "const": "list" }, "data": { "type": "array", "items": { "$ref": "#/components/schemas/Tool" } } }
                    }}}},
                    "401": error_response("unauthorized")
                }
            }},
            "/v1/tools/{name}": { "get": {
                "summary": "Read one tool's schema",
                "parameters": [{ "name": "name", "in": "path", "required": true, "schema": { "type": "string", "maxLength": 64 } }],
                "responses": {
                    "200": { "description": "the tool", "content": { "application/json": { "schema": { "$ref": "#/components/schemas/Tool" } } } },
                    "401": error_response("unauthorized"),
                    "404": error_response("tool_not_found")
                }
            }},
            "/v1/tools/invoke": { "post": {
                "summary": "Invoke a tool",
                "requestBody": { "required": true, "content": { "application/json": { "schema": {
                    "type": "object", "required": ["tool"], "additionalProperties": false,
                    "properties": {
                        "tool": { "type": "string" },
                        "arguments": { "type": "object" },
                        "end_user_id": { "type": "string", "maxLength": 256 },
                        "timeout_ms": { "type": "integer", "minimum": 1, "maximum": 300000 }
                    }
                }}}},
                "responses": invoke_responses
            }},
            "/v1/tools/calls/{id}": { "get": {
                "summary": "Read a recorded tool call",
                "parameters": [{ "name": "id", "in": "path", "required": true, "schema": { "type": "string" } }],
                "responses": {
                    "200": { "description": "the call", "content": { "application/json": { "schema": { "$ref": "#/components/schemas/ToolCall" } } } },
                    "401": error_response("unauthorized"),
                    "404": error_response("not_found")
                }
            }},
            "/v1/usage": { "get": {
                "summary": "Metered usage per day, key, tool and meter (tool_call, tool_call_ms, egress_bytes)",
                "parameters": [
                    { "name": "from", "in": "query", "schema": { "type": "string", "format": "date" } },
                    { "name": "to", "in": "query", "schema": { "type": "string", "format": "date" } }
                ],
                "responses": { "200": { "description": "usage rows" }, "400": error_response("bad_request"), "401": error_response("unauthorized") }
            }},
            "/rest/{integration}": { "post": {
                "summary": "Run a batch of one integration's tools (execute_tools without compose or return)",
                "parameters": [{ "name": "integration", "in": "path", "required": true, "schema": { "type": "string" } }],
                "requestBody": { "required": true, "content": { "application/json": { "schema": {
                    "type": "object", "required": ["executions"], "additionalProperties": false,
                    "properties": { "executions": { "type": "array", "minItems": 1, "maxItems": 50, "items": {
                        "type": "object", "required": ["tool"],
                        "properties": { "tool": { "type": "string" }, "args": { "type": "object" } }
                    }}}
                }}}},
                "responses": {
                    "200": { "description": "index-aligned results: { result } or a flat error entry" },
                    "400": error_response("bad_request (also for compose or return)"),
                    "401": error_response("unauthorized")
                }
            }}
        },
        "components": {
            "securitySchemes": { "bearer": { "type": "http", "scheme": "bearer" } },
            "schemas": {
                "Error": {
                    "type": "object", "required": ["error"],
                    "properties": { "error": { "type": "object", "required": ["code", "message", "meta"], "properties": {
                        "code": { "type": "string" }, "message": { "type": "string" }, "meta": { "type": "object" }
                    }}}
                },
                "Tool": {
                    "type": "object",
                    "required": ["name", "source", "description", "input_schema", "side_effects"],
                    "properties": {
                        "name": { "type": "string" },
                        "source": { "type": "string", "description": "builtin, plugin:<integration>, mcp:<server id> or app:<app id>" },
                        "integration": { "type": "string" },
                        "description": { "type": "string" },
                        "input_schema": { "type": "object" },
                        "output_schema": { "type": "object" },
                        "side_effects": { "enum": ["none", "network", "write", "destructive"] },
                        "avg_latency_ms": { "type": ["integer", "null"] },
                        "status": { "enum": ["available", "unavailable"] }
                    }
                },
                "ToolCall": {
                    "type": "object", "required": ["id", "object", "tool", "status"],
                    "properties": {
                        "id": { "type": "string" }, "object": { "const": "tool_call" }, "tool": { "type": "string" },
                        "status": { "enum": ["succeeded", "failed", "awaiting_confirmation", "denied", "expired"] },
                        "result": {}, "error": { "type": "object" }, "duration_ms": { "type": "integer" },
                        "usage": { "type": "object", "properties": { "tool_call": { "type": "integer" }, "tool_call_ms": { "type": "integer" } } }
                    }
                }
            }
        }
    }))
}
