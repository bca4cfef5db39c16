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
        ("429", "rate_limited (meta.retry_after_s and a Retry-After header): the key is over its calls per minute, or over a limit of its policy (meta.policy_id, meta.limit)"),
        ("502", "tool_error (meta.handler_error; also a result over the server's REST ceiling, 10 MiB by default)"),
        ("503", "tool_unavailable"),
        ("504", "tool_timeout"),
    ]);
    invoke_responses["200"] = json!({ "description": "the finished call", "content": { "application/json": { "schema": { "$ref": "#/components/schemas/ToolCall" } } } });
    invoke_responses["202"] = json!({ "description": "held for a person's confirmation: { id, object: tool_call, tool, status: awaiting_confirmation, confirmation_id, expires_at, url }" });
    let id_param =
        json!({ "name": "id", "in": "path", "required": true, "schema": { "type": "string" } });
    let pattern = json!({ "type": "string", "minLength": 1, "maxLength": 64, "description": "a tool name, or a prefix followed by one trailing '*'" });
    let tool_set_schema = json!({
        "type": "object", "required": ["slug", "name", "tools"], "additionalProperties": false,
        "properties": {
            "slug": { "type": "string", "pattern": "^[a-z0-9]([a-z0-9-]{0,46}[a-z0-9])?$" },
            "name": { "type": "string", "minLength": 1, "maxLength": 100 },
            "description": { "type": "string", "maxLength": 4000 },
            "tools": { "type": "array", "minItems": 1, "maxItems": 200, "items": {
                "type": "object", "required": ["tool"], "additionalProperties": false,
                "properties": {
                    "tool": { "type": "string", "description": "the catalog tool" },
                    "name": { "type": "string", "pattern": "^[A-Za-z0-9_.-]{1,64}$", "description": "the name the set lists it under (default: the catalog name)" },
                    "description": { "type": "string", "maxLength": 4000 },
                    "fixed": { "type": "object", "description": "argument values every call through the set gets; hidden from the set's schema" }
                }
            } }
        }
    });
    let policy_schema = json!({
        "type": "object", "required": ["name", "tool_allowlist"], "additionalProperties": false,
        "properties": {
            "name": { "type": "string", "minLength": 1, "maxLength": 100 },
            "default": { "type": "boolean", "default": false, "description": "applies to keys without a policy; at most one per project" },
            "tool_allowlist": {
                "type": "object", "required": ["mode"],
                "properties": {
                    "mode": { "enum": ["allowlist", "open"] },
                    "allow": { "type": "array", "items": pattern.clone() },
                    "deny": { "type": "array", "items": pattern.clone() },
                    "require_confirmation": { "type": "array", "items": pattern.clone() }
                }
            },
            "limits": {
                "type": "array", "maxItems": 20,
                "description": "rate limits and quotas: at most `calls` calls (or `egress_bytes` bytes sent and received) of the tools `tools` matches, every `every`, counted per `per` (each key or OAuth grant, each user, or the project); a call over any answers 429 rate_limited",
                "items": {
                    "type": "object", "required": ["every", "per"], "additionalProperties": false,
                    "properties": {
                        "tools": { "type": "string", "default": "*", "description": "a tool name or a prefix ending in '*'" },
                        "calls": { "type": "integer", "minimum": 1, "maximum": 1_000_000_000_i64 },
                        "egress_bytes": { "type": "integer", "minimum": 1, "description": "per hour, day or month only" },
                        "every": { "enum": ["second", "minute", "hour", "day", "month"], "description": "UTC windows; day and month are calendar days and months" },
                        "per": { "enum": ["key", "user", "project"] }
                    }
                }
            }
        }
    });
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
                "responses": { "200": { "description": "user, project and key, policy_id (the key's) and user_policy_id (the cap the user's groups give them at single sign-on; both must allow a call), and the limits its calls are counted against: rate_limit_per_minute (the key's own) and limits (of the policies it runs under)" }, "401": error_response("unauthorized") }
            }},
            "/v1/tools": { "get": {
                "summary": "List the catalog: every tool this key may run; with q, search it as search_tools does",
                "parameters": [
                    { "name": "q", "in": "query", "required": false, "schema": { "type": "string", "minLength": 1, "maxLength": 1000 },
                      "description": "what you want to do; the answer is the best matches first, each with its score" },
                    { "name": "limit", "in": "query", "required": false, "schema": { "type": "integer", "minimum": 1, "maximum": 50, "default": 10 },
                      "description": "most matches, with q only" }
                ],
                "responses": {
                    "200": { "description": "the catalog, or the matches", "content": { "application/json": { "schema": {
                        "type": "object", "required": ["object", "data"],
                        "properties": {
                            "object": { "const": "list" },
                            "data": { "type": "array", "items": { "$ref": "#/components/schemas/Tool" } },
                            "no_match": { "type": "boolean", "description": "with q: even the best match is unlikely to fit" },
                            "hint": { "type": "string" }
                        }
                    }}}},
                    "400": error_response("invalid_request"),
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
                "summary": "Metered usage per day, key, tool and meter (tool_call, tool_call_ms, egress_gb with egress_bytes beside it), or summed by group_by",
                "parameters": [
                    { "name": "from", "in": "query", "schema": { "type": "string", "format": "date" } },
                    { "name": "to", "in": "query", "schema": { "type": "string", "format": "date" } },
                    { "name": "group_by", "in": "query", "schema": { "enum": ["day", "tool", "key", "integration"] } }
                ],
                "responses": { "200": { "description": "usage rows" }, "400": error_response("bad_request"), "401": error_response("unauthorized") }
            }},
            "/v1/usage/calls": { "get": {
                "summary": "Calls per tool, user, key or day: how they ended, how many a rate limit or quota refused, the error rate and handler-time percentiles (a member sees their own calls)",
                "parameters": [
                    { "name": "from", "in": "query", "schema": { "type": "string", "format": "date" } },
                    { "name": "to", "in": "query", "schema": { "type": "string", "format": "date" } },
                    { "name": "group_by", "in": "query", "schema": { "enum": ["tool", "user", "key", "day"], "default": "tool" } }
                ],
                "responses": { "200": { "description": "{ object: list, from, to, group_by, data: [{ <group_by>, email (by user), calls, succeeded, failed, denied, other, rate_limited, error_rate, p50_ms, p95_ms, p99_ms }] }" }, "400": error_response("bad_request"), "401": error_response("unauthorized") }
            }},
            "/v1/apps": {
                "get": { "summary": "The project's custom apps, each with load_error when a stored app does not load", "responses": { "200": { "description": "{ object: list, data }" }, "401": error_response("unauthorized") } },
                "post": {
                    "summary": "Create a custom app from a definition in the plugin format (admin key)",
                    "requestBody": { "required": true, "content": { "application/json": { "schema": { "type": "object" } } } },
                    "responses": { "201": { "description": "the app" }, "400": error_response("bad_request"), "403": error_response("forbidden"), "409": error_response("conflict") }
                }
            },
            "/v1/apps/import": { "post": {
                "summary": "Turn an OpenAPI 3.0/3.1 document (JSON or YAML, inline or by url, at most 5 MiB) into an app definition to review: one tool per selected operation, local $refs only (admin key; nothing stored)",
                "requestBody": { "required": true, "content": { "application/json": { "schema": {
                    "type": "object", "required": ["name"],
                    "properties": {
                        "name": { "type": "string" }, "display_name": { "type": "string" }, "base_url": { "type": "string" },
                        "auth": { "type": "object" }, "document": { "type": ["string", "object"] }, "url": { "type": "string" },
                        "filter": { "type": "object", "properties": { "tags": { "type": "array", "items": { "type": "string" } }, "operation_ids": { "type": "array", "items": { "type": "string" } }, "methods": { "type": "array", "items": { "type": "string" } } } }
                    }
                } } } },
                "responses": { "200": { "description": "{ object: app_import, definition, tools, operations: [{ operation_id, method, path, tool, selected, skipped }], warnings, problem }" }, "400": error_response("bad_request"), "403": error_response("forbidden"), "409": error_response("conflict"), "413": error_response("payload_too_large") }
            }},
            "/v1/apps/{id}": { "delete": {
                "summary": "Delete a custom app, every user's credential for it and its proxy tokens (admin key)",
                "parameters": [{ "name": "id", "in": "path", "required": true, "schema": { "type": "string" } }],
                "responses": { "204": { "description": "deleted" }, "403": error_response("forbidden"), "404": error_response("not_found") }
            }},
            "/v1/mcp/servers": {
                "get": { "summary": "Registered upstream MCP servers with state, breaker, last refresh, last error and tool counts", "responses": { "200": { "description": "{ object: list, data: [McpServer] }" }, "401": error_response("unauthorized") } },
                "post": {
                    "summary": "Register an upstream MCP server (admin key): connects, initializes and lists its tools before storing",
                    "requestBody": { "required": true, "content": { "application/json": { "schema": {
                        "type": "object", "required": ["name", "url"], "additionalProperties": false,
                        "properties": {
                            "name": { "type": "string" },
                            "transport": { "enum": ["http", "sse"], "default": "http" },
                            "url": { "type": "string", "format": "uri" },
                            "auth": { "type": "object", "description": "{type: none} | {type: bearer, secret_ref} | {type: oauth2, token_url, client_id, secret_ref, scope?}; credentials are secret refs, never inline" },
                            "tool_prefix": { "type": "string", "description": "defaults to <name>." },
                            "timeout_ms": { "type": "integer", "minimum": 1, "maximum": 300000, "default": 30000 },
                            "max_concurrency": { "type": "integer", "minimum": 1, "maximum": 1000, "default": 10 },
                            "auto_approve": { "type": "boolean", "default": false }
                        }
                    }}}},
                    "responses": { "201": { "description": "the server, its tools and any skipped tools" }, "403": error_response("forbidden"), "409": error_response("conflict"), "422": error_response("invalid_request") }
                }
            },
            "/v1/mcp/servers/{id}": {
                "get": { "summary": "One server", "parameters": [{ "name": "id", "in": "path", "required": true, "schema": { "type": "string" } }], "responses": { "200": { "description": "the server" }, "404": error_response("not_found") } },
                "delete": { "summary": "Deregister (admin key); its tools leave the catalog at once", "parameters": [{ "name": "id", "in": "path", "required": true, "schema": { "type": "string" } }], "responses": { "204": { "description": "deleted" }, "404": error_response("not_found") } }
            },
            "/v1/mcp/servers/{id}/refresh": { "post": {
                "summary": "Re-read the tool list (admin key): vanished tools become unavailable, changed and new ones wait for review",
                "parameters": [{ "name": "id", "in": "path", "required": true, "schema": { "type": "string" } }],
                "responses": { "200": { "description": "the server plus changes: {added, removed, changed}" }, "404": error_response("not_found") }
            }},
            "/v1/mcp/servers/{id}/tools": { "get": {
                "summary": "A server's tools for review: status, side effects, and what was approved when a tool changed",
                "parameters": [{ "name": "id", "in": "path", "required": true, "schema": { "type": "string" } }],
                "responses": { "200": { "description": "{ object: list, data }" }, "404": error_response("not_found") }
            }},
            "/v1/mcp/servers/{id}/{kind}": { "get": {
                "summary": "A server's prompts (kind: prompts) or resources and resource templates (kind: resources) for review: status, what the upstream lists, and what was approved when an item changed",
                "parameters": [
                    { "name": "id", "in": "path", "required": true, "schema": { "type": "string" } },
                    { "name": "kind", "in": "path", "required": true, "schema": { "enum": ["prompts", "resources"] } }
                ],
                "responses": { "200": { "description": "{ object: list, data: [{object: mcp_server_item, kind, key, exposed, status, listed, approved?}] }" }, "404": error_response("not_found") }
            }},
            "/v1/mcp/servers/{id}/approve": { "post": {
                "summary": "Approve tools, prompts and resources held for review (admin key)",
                "parameters": [{ "name": "id", "in": "path", "required": true, "schema": { "type": "string" } }],
                "requestBody": { "required": true, "content": { "application/json": { "schema": { "type": "object", "minProperties": 1, "additionalProperties": false, "properties": { "tools": { "type": "array", "items": { "type": "string" } }, "prompts": { "type": "array", "items": { "type": "string" } }, "resources": { "type": "array", "items": { "type": "string" } } } } } } },
                "responses": { "200": { "description": "the server" }, "404": error_response("not_found"), "422": error_response("invalid_request") }
            }},
            "/v1/mcp/servers/{id}/tools/{name}": { "patch": {
                "summary": "Override a tool's side effects, its project-wide name (after the server's prefix) and description (admin key); null goes back to the upstream's; fields left out stay",
                "parameters": [
                    { "name": "id", "in": "path", "required": true, "schema": { "type": "string" } },
                    { "name": "name", "in": "path", "required": true, "schema": { "type": "string" } }
                ],
                "requestBody": { "required": true, "content": { "application/json": { "schema": { "type": "object", "minProperties": 1, "additionalProperties": false, "properties": { "side_effects": { "enum": ["none", "network", "write", "destructive", null] }, "name": { "type": ["string", "null"] }, "description": { "type": ["string", "null"], "maxLength": 4000 } } } } } },
                "responses": { "200": { "description": "the tool" }, "404": error_response("not_found"), "409": error_response("conflict (the name belongs to another tool)"), "422": error_response("invalid_request") }
            }},
            "/v1/policies": {
                "get": { "summary": "The project's tool allowlist policies (admin key)", "responses": { "200": { "description": "{ object: list, data: [Policy] }" }, "403": error_response("forbidden") } },
                "post": {
                    "summary": "Create a policy (admin key with no policy attached); patterns are tool names or a prefix ending in one '*'",
                    "requestBody": { "required": true, "content": { "application/json": { "schema": policy_schema.clone() } } },
                    "responses": { "201": { "description": "the policy: { id: pol_…, object: policy, name, tool_allowlist, limits, default, created_at, updated_at }" }, "403": error_response("forbidden"), "409": error_response("conflict"), "422": error_response("invalid_request") }
                }
            },
            "/v1/policies/{id}": {
                "get": { "summary": "One policy", "parameters": [id_param.clone()], "responses": { "200": { "description": "the policy" }, "404": error_response("not_found") } },
                "put": { "summary": "Replace a policy's name, rules and default flag", "parameters": [id_param.clone()], "requestBody": { "required": true, "content": { "application/json": { "schema": policy_schema } } }, "responses": { "200": { "description": "the policy" }, "404": error_response("not_found"), "422": error_response("invalid_request") } },
                "delete": { "summary": "Delete a policy no live key uses", "parameters": [id_param.clone()], "responses": { "204": { "description": "deleted" }, "404": error_response("not_found"), "409": error_response("conflict (names the keys using it)") } }
            },
            "/v1/tool-sets": {
                "get": { "summary": "The project's tool sets with their endpoints (fixed values for admins only)", "responses": { "200": { "description": "{ object: list, data: [ToolSet] }" }, "403": error_response("forbidden") } },
                "post": {
                    "summary": "Create a tool set, published at /mcp/sets/{slug} (admin key with no policy attached); checked whole against the project's catalog",
                    "requestBody": { "required": true, "content": { "application/json": { "schema": tool_set_schema.clone() } } },
                    "responses": { "201": { "description": "the set: { id: tset_…, object: tool_set, slug, name, description, tools, endpoint, created_at, updated_at }" }, "403": error_response("forbidden"), "409": error_response("conflict (the slug is taken)"), "422": error_response("invalid_request") }
                }
            },
            "/v1/tool-sets/{id}": {
                "get": { "summary": "One tool set", "parameters": [id_param.clone()], "responses": { "200": { "description": "the set" }, "404": error_response("not_found") } },
                "put": { "summary": "Replace a set's name, description and tools (its slug stays)", "parameters": [id_param.clone()], "requestBody": { "required": true, "content": { "application/json": { "schema": tool_set_schema } } }, "responses": { "200": { "description": "the set" }, "404": error_response("not_found"), "422": error_response("invalid_request") } },
                "delete": { "summary": "Delete a set no live key is limited to", "parameters": [id_param.clone()], "responses": { "204": { "description": "deleted" }, "404": error_response("not_found"), "409": error_response("conflict (names the keys limited to it)") } }
            },
            "/v1/sso/providers": {
                "get": { "summary": "The project's sign-in providers (OpenID Connect): settings, mapping and the redirect URI to register; never the client secret (admin key with no policy attached)", "responses": { "200": { "description": "{ object: list, data: [SsoProvider] }" }, "403": error_response("forbidden") } }
            },
            "/v1/sso/providers/{slug}": {
                "put": {
                    "summary": "Register or replace a sign-in provider; checked whole, its discovery document read, before it is stored",
                    "parameters": [{ "name": "slug", "in": "path", "required": true, "schema": { "type": "string", "pattern": "^[a-z0-9]([a-z0-9-]{0,46}[a-z0-9])?$" } }],
                    "requestBody": { "required": true, "content": { "application/json": { "schema": {
                        "type": "object", "required": ["name", "issuer", "client_id"], "additionalProperties": false,
                        "properties": {
                            "name": { "type": "string", "minLength": 1, "maxLength": 200 },
                            "issuer": { "type": "string", "description": "https URL (http only to loopback); <issuer>/.well-known/openid-configuration must name exactly it" },
                            "client_id": { "type": "string" },
                            "client_secret_ref": { "type": ["string", "null"], "description": "vault:NAME (this project's vault) or env:WB_SSO_<SLUG>_SECRET (the server's variable for this provider); null: a public client" },
                            "scopes": { "type": "array", "items": { "type": "string" }, "description": "must include openid (default: openid email profile)" },
                            "groups_claim": { "type": "string", "description": "the ID token claim listing groups (default: groups)" },
                            "mappings": { "type": "array", "maxItems": 100, "description": "first match wins", "items": { "type": "object", "required": ["group", "role"], "additionalProperties": false, "properties": { "group": { "type": "string" }, "role": { "enum": ["admin", "member"] }, "policy_id": { "type": ["string", "null"] } } } },
                            "default_role": { "enum": ["admin", "member", null], "description": "a person in no mapped group: this role, or (null) no sign-in" },
                            "default_policy_id": { "type": ["string", "null"] },
                            "recheck_minutes": { "type": "integer", "minimum": 5, "maximum": 1440, "description": "the portal session of a person signed in through the provider ends after this long (default 60)" }
                        }
                    } } } },
                    "responses": { "200": { "description": "the provider, replaced" }, "201": { "description": "the provider: { object: sso_provider, slug, …, redirect_uri }" }, "403": error_response("forbidden"), "409": error_response("conflict (the slug is another project's)"), "422": error_response("invalid_request (also: discovery failed)") }
                },
                "delete": { "summary": "Remove a sign-in provider (people it signed in keep their accounts)", "parameters": [{ "name": "slug", "in": "path", "required": true, "schema": { "type": "string" } }], "responses": { "204": { "description": "removed" }, "404": error_response("not_found") } }
            },
            "/v1/sso/providers/{slug}/preview": {
                "post": {
                    "summary": "What a person with these groups would get from the provider's mapping",
                    "parameters": [{ "name": "slug", "in": "path", "required": true, "schema": { "type": "string" } }],
                    "requestBody": { "required": true, "content": { "application/json": { "schema": { "type": "object", "required": ["groups"], "additionalProperties": false, "properties": { "groups": { "type": "array", "items": { "type": "string" } } } } } } },
                    "responses": { "200": { "description": "{ object: sso_preview, signs_in, role, policy_id, matched }" }, "404": error_response("not_found"), "422": error_response("invalid_request") }
                }
            },
            "/v1/api-keys": {
                "get": { "summary": "The project's API keys, never their secrets (admin key with no policy attached)", "responses": { "200": { "description": "{ object: list, data: [ApiKey] }" }, "403": error_response("forbidden") } },
                "post": {
                    "summary": "Create a key for yourself; the secret is in this answer only",
                    "requestBody": { "required": true, "content": { "application/json": { "schema": { "type": "object", "required": ["name"], "additionalProperties": false, "properties": { "name": { "type": "string" }, "policy_id": { "type": ["string", "null"] }, "rate_limit_per_minute": { "type": ["integer", "null"], "minimum": 1, "maximum": 100000 }, "tool_sets": { "type": ["array", "null"], "items": { "type": "string" }, "minItems": 1, "description": "limit the key to these tool sets' endpoints" } } } } } },
                    "responses": { "201": { "description": "{ id, object: api_key, name, policy_id, rate_limit_per_minute, tool_sets, key, created_at }" }, "403": error_response("forbidden"), "422": error_response("invalid_request") }
                }
            },
            "/v1/api-keys/{id}": {
                "patch": { "summary": "Attach a policy to a key (null detaches), set its rate limit in calls per minute (null lifts it) and/or limit it to tool sets (null lifts it)", "parameters": [id_param.clone()], "requestBody": { "required": true, "content": { "application/json": { "schema": { "type": "object", "minProperties": 1, "additionalProperties": false, "properties": { "policy_id": { "type": ["string", "null"] }, "rate_limit_per_minute": { "type": ["integer", "null"], "minimum": 1, "maximum": 100000 }, "tool_sets": { "type": ["array", "null"], "items": { "type": "string" }, "minItems": 1 } } } } } }, "responses": { "200": { "description": "the key" }, "404": error_response("not_found"), "422": error_response("invalid_request") } },
                "delete": { "summary": "Revoke a key", "parameters": [id_param.clone()], "responses": { "204": { "description": "revoked" }, "404": error_response("not_found") } }
            },
            "/v1/tools/confirmations": { "get": {
                "summary": "Calls held for a person's confirmation, newest first (admin key with no policy attached)",
                "parameters": [{ "name": "status", "in": "query", "required": false, "schema": { "enum": ["pending", "approved", "denied", "expired"] } }],
                "responses": { "200": { "description": "{ object: list, data: [Confirmation] }" }, "400": error_response("bad_request"), "403": error_response("forbidden") }
            }},
            "/v1/tools/confirmations/{id}": {
                "get": { "summary": "One confirmation (also for the key that made the call)", "parameters": [id_param.clone()], "responses": { "200": { "description": "the confirmation" }, "404": error_response("not_found") } },
                "post": {
                    "summary": "Approve (runs the held call once and answers the finished tool_call) or deny; never by the key that made the call",
                    "parameters": [id_param],
                    "requestBody": { "required": true, "content": { "application/json": { "schema": { "type": "object", "required": ["decision"], "additionalProperties": false, "properties": { "decision": { "enum": ["approve", "deny"] }, "reason": { "type": "string", "maxLength": 1000 } } } } } },
                    "responses": { "200": { "description": "the tool_call: succeeded, failed or denied" }, "403": error_response("forbidden"), "404": error_response("not_found"), "409": error_response("confirmation_closed (meta.status: approved, denied or expired)"), "422": error_response("invalid_request") }
                }
            },
            "/v1/audit": { "get": {
                "summary": "The audit log, newest first (members: their own rows), 50 per page",
                "parameters": [
                    { "name": "tool", "in": "query", "schema": { "type": "string" } },
                    { "name": "tool_set", "in": "query", "description": "only calls made through this tool set (its slug)", "schema": { "type": "string" } },
                    { "name": "status", "in": "query", "schema": { "type": "string" } },
                    { "name": "api_key_id", "in": "query", "schema": { "type": "string" } },
                    { "name": "cursor", "in": "query", "description": "next_cursor of the previous page", "schema": { "type": "string" } }
                ],
                "responses": { "200": { "description": "{ object: list, data: [entry], next_cursor }" }, "400": error_response("bad_request"), "401": error_response("unauthorized") }
            }},
            "/v1/audit/{id}": { "get": {
                "summary": "One audit row in full: outcome, error, duration, result size, surface, key, end_user_id, Idempotency-Key, redacted arguments, and the confirmation with who decided",
                "parameters": [{ "name": "id", "in": "path", "required": true, "schema": { "type": "string" } }],
                "responses": { "200": { "description": "{ id, object: audit_event, ..., call, confirmation }" }, "404": error_response("not_found") }
            }},
            "/v1/settings": {
                "get": { "summary": "Project settings (admin key): audit_retention_days, the confirmation webhook and the email hourly limit", "responses": { "200": { "description": "{ object: project_settings, audit_retention_days, webhook, email_hourly_limit (null: the operator's), email_hourly_limit_max (the operator's) }" }, "403": error_response("forbidden") } },
                "patch": {
                    "summary": "Change project settings (admin key with no policy attached); everything is checked before anything changes",
                    "requestBody": { "required": true, "content": { "application/json": { "schema": { "type": "object", "additionalProperties": false, "properties": {
                        "audit_retention_days": { "type": ["integer", "null"], "minimum": 1, "maximum": 3650 },
                        "email_hourly_limit": { "type": ["integer", "null"], "minimum": 1, "description": "messages email.send may send per rolling hour, at most the operator's --email-hourly-limit; null: that limit" },
                        "webhook": { "oneOf": [{ "type": "null" }, { "type": "object", "required": ["url", "secret_ref"], "additionalProperties": false, "properties": { "url": { "type": "string", "format": "uri" }, "secret_ref": { "type": "string", "description": "a vault secret (name or sec_ id) deliveries are signed with: Workbench-Signature: t=<unix>,v1=<hex HMAC-SHA256 of \"<t>.<body>\"> (docs/deliveries.md)" } } }] }
                    } } } } },
                    "responses": { "200": { "description": "the settings" }, "403": error_response("forbidden"), "422": error_response("invalid_request") }
                }
            },
            "/v1/webhooks/deliveries": { "get": {
                "summary": "The newest webhook deliveries and how they went (admin key)",
                "responses": { "200": { "description": "{ object: list, data: [{ id, event, subject_id, url, status, attempts, response_status, error }] }" }, "403": error_response("forbidden") }
            }},
            "/v1/egress": {
                "get": {
                    "summary": "The project's egress allowlist: host patterns outbound calls (custom apps, webhooks, http.fetch, callbacks) may reach",
                    "responses": { "200": { "description": "{ object: list, data: [{ object: egress_rule, pattern }] }" } }
                },
                "post": {
                    "summary": "Allow a host pattern (admin key with no policy): a host name or *.domain; stored normalised, adding one that exists is not an error",
                    "requestBody": { "required": true, "content": { "application/json": { "schema": {
                        "type": "object", "required": ["pattern"], "additionalProperties": false,
                        "properties": { "pattern": { "type": "string", "examples": ["api.example.com", "*.example.com"] } }
                    } } } },
                    "responses": { "201": { "description": "{ object: egress_rule, pattern }, the pattern as stored" }, "403": error_response("forbidden"), "422": error_response("invalid_request") }
                }
            },
            "/v1/egress/{pattern}": { "delete": {
                "summary": "Remove a host pattern (admin key with no policy); outbound calls to it are refused at once",
                "parameters": [{ "name": "pattern", "in": "path", "required": true, "description": "as listed, URL-encoded", "schema": { "type": "string" } }],
                "responses": { "204": { "description": "removed" }, "403": error_response("forbidden"), "404": error_response("not_found") }
            }},
            "/v1/config": { "get": {
                "summary": "The project's configuration as a file (admin key with no policy): settings, egress allowlist, policies, custom apps, MCP servers with their tool reviews, and tool sets; secrets by vault name only",
                "parameters": [{ "name": "format", "in": "query", "required": false, "schema": { "type": "string", "enum": ["yaml", "json"], "default": "yaml" } }],
                "responses": { "200": { "description": "the file (application/yaml, or JSON with format=json)" }, "403": error_response("forbidden") }
            }},
            "/v1/config/apply": { "post": {
                "summary": "Make the project match a configuration file (admin key with no policy). Every entry is checked first and nothing changes unless all pass; a section left out is left alone, a section present is matched exactly. With dry_run=true nothing changes and the answer says what would",
                "parameters": [{ "name": "dry_run", "in": "query", "required": false, "schema": { "type": "boolean", "default": false } }],
                "requestBody": { "required": true, "content": { "application/yaml": { "schema": { "type": "string" } }, "application/json": { "schema": { "type": "object" } } } },
                "responses": { "200": { "description": "{ object: config_apply, dry_run, changes: [{ action: create|update|replace|delete, kind, name, fields? }], unchanged, notes, diff }" }, "400": error_response("bad_request"), "403": error_response("forbidden"), "413": error_response("payload_too_large"), "422": error_response("invalid_request (every problem of the file, listed)") }
            }},
            "/v1/members": {
                "get": {
                    "summary": "The project's members",
                    "responses": { "200": { "description": "{ object: list, data: [{ object: member, id, email, role: admin|member, joined_at (ms) }] }" } }
                },
                "post": {
                    "summary": "Add a person to the project with a password they sign in with (admin key with no policy)",
                    "requestBody": { "required": true, "content": { "application/json": { "schema": {
                        "type": "object", "required": ["email", "password", "role"], "additionalProperties": false,
                        "properties": { "email": { "type": "string", "format": "email" }, "password": { "type": "string", "minLength": 10 }, "role": { "type": "string", "enum": ["admin", "member"] } }
                    } } } },
                    "responses": { "201": { "description": "the member" }, "403": error_response("forbidden"), "409": error_response("conflict (a user with that email exists)"), "422": error_response("invalid_request") }
                }
            },
            "/v1/members/{id}": { "delete": {
                "summary": "Remove a member (admin key with no policy): their API keys, MCP client grants, proxy tokens and connections end with it; an admin cannot remove themselves",
                "parameters": [{ "name": "id", "in": "path", "required": true, "schema": { "type": "string" } }],
                "responses": { "204": { "description": "removed" }, "403": error_response("forbidden"), "404": error_response("not_found"), "422": error_response("invalid_request") }
            }},
            "/v1/schedules": { "get": {
                "summary": "Scheduled callbacks (schedule.callback), newest first; members see their own",
                "parameters": [
                    { "name": "status", "in": "query", "schema": { "type": "string", "enum": ["scheduled", "delivered", "failed", "cancelled"] } },
                    { "name": "cursor", "in": "query", "schema": { "type": "string" } }
                ],
                "responses": { "200": { "description": "{ object: list, data: [{ id, object: scheduled_callback, url, method, payload, scheduled_for, status, attempts, next_attempt_at?, last_response_status, last_error, delivered_at, created_at, created_by }], next_cursor }" }, "400": error_response("bad_request") }
            }},
            "/v1/schedules/signing-secret": { "get": {
                "summary": "The secret callbacks are signed with (admin key): Workbench-Signature: t=<unix>,v1=<hex HMAC-SHA256 of \"<t>.<body>\">",
                "responses": { "200": { "description": "{ object: callback_signing_secret, secret, header }" }, "403": error_response("forbidden") }
            }},
            "/v1/schedules/{id}": {
                "get": {
                    "summary": "One scheduled callback with each delivery attempt",
                    "parameters": [{ "name": "id", "in": "path", "required": true, "schema": { "type": "string" } }],
                    "responses": { "200": { "description": "the callback with deliveries: [{ attempt, started_at, duration_ms, response_status, error }]" }, "404": error_response("not_found") }
                },
                "delete": {
                    "summary": "Cancel a callback still scheduled",
                    "parameters": [{ "name": "id", "in": "path", "required": true, "schema": { "type": "string" } }],
                    "responses": { "204": { "description": "cancelled" }, "404": error_response("not_found"), "409": error_response("conflict (already delivered, failed or cancelled)") }
                }
            },
            "/v1/email/domains": {
                "get": {
                    "summary": "The project's sender domains for email.send, and how much of the hour's sending allowance is used",
                    "responses": { "200": { "description": "{ object: list, data: [email_domain], sending: { configured, sent_last_hour, hourly_limit } }; email_domain: { id, object: email_domain, domain, status: pending|verified, dns_record: { type: TXT, name: _workbench.<domain>, value: workbench-verification=<token> }, created_at, verified_at, last_checked_at, last_error }" } }
                },
                "post": {
                    "summary": "Add a sender domain (admin key); it is pending until its TXT record is verified",
                    "requestBody": { "required": true, "content": { "application/json": { "schema": {
                        "type": "object", "required": ["domain"], "additionalProperties": false,
                        "properties": { "domain": { "type": "string", "examples": ["example.com"] } }
                    } } } },
                    "responses": { "201": { "description": "the email_domain with the record to publish" }, "403": error_response("forbidden"), "409": error_response("conflict (already added)"), "422": error_response("invalid_request") }
                }
            },
            "/v1/email/domains/{id}": {
                "get": {
                    "summary": "One sender domain",
                    "parameters": [{ "name": "id", "in": "path", "required": true, "schema": { "type": "string" } }],
                    "responses": { "200": { "description": "the email_domain" }, "404": error_response("not_found") }
                },
                "delete": {
                    "summary": "Remove a sender domain (admin key); email.send stops sending from it at once",
                    "parameters": [{ "name": "id", "in": "path", "required": true, "schema": { "type": "string" } }],
                    "responses": { "204": { "description": "removed" }, "403": error_response("forbidden"), "404": error_response("not_found") }
                }
            },
            "/v1/email/domains/{id}/verify": { "post": {
                "summary": "Look up the domain's TXT record (admin key); verified once it holds the project's token",
                "parameters": [{ "name": "id", "in": "path", "required": true, "schema": { "type": "string" } }],
                "responses": { "200": { "description": "the email_domain, verified" }, "403": error_response("forbidden"), "404": error_response("not_found"), "422": error_response("verification_failed (the record is missing or holds another value; the message says what DNS holds)"), "503": error_response("dns_unavailable") }
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
                        "status": { "enum": ["available", "unavailable"] },
                        "unavailable_reason": { "type": "string" },
                        "score": { "type": "number", "description": "with q: the estimated probability that the tool fits, in (0, 1]" }
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
