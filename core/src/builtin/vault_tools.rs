//! `vault_list`, `vault_set`, `vault_delete`, `vault_describe` (D8): manage the project's
//! secrets from a tool call. They take names (and values) literally: no `{{…}}` resolution
//! happens in their arguments, and the pipeline scrubs the value of `vault_set` from everything
//! it records or returns. No tool ever returns a value.

use async_trait::async_trait;
use serde_json::{json, Value};

use super::make_spec;
use crate::catalog::{CallContext, HandlerError, SecretArg, SideEffects, ToolHandler, ToolSpec};
use crate::vault::{SecretInfo, Vault, MIN_SECRET_CHARS};
use crate::{Error, Result};

fn name_schema() -> Value {
    json!({ "type": "string", "minLength": 1, "maxLength": 64, "pattern": "^[A-Za-z_][A-Za-z0-9_.-]*$", "description": "The secret's name, as used in {{vault:NAME}}" })
}

fn info(s: SecretInfo) -> Value {
    json!({ "id": s.id, "name": s.name, "created_at": s.created_at, "updated_at": s.updated_at })
}

fn failure(e: Error, name: &str) -> HandlerError {
    match e {
        Error::NotFound => {
            HandlerError::failed(format!("no vault secret named {name} in this project"))
        }
        Error::Invalid(m) => HandlerError::invalid("/value", m),
        Error::Forbidden(m) => HandlerError::failed(m),
        other => {
            tracing::error!(error = ?other, "vault tool failed");
            HandlerError::store_unavailable("the vault", &other)
        }
    }
}

/// What a vault tool does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VaultOp {
    List,
    Set,
    Delete,
    Describe,
}

/// The vault tools, each with its operation. Their arguments are literal, and `vault_set`'s
/// `value` is a secret named by `name`.
pub fn specs() -> Result<Vec<(ToolSpec, VaultOp)>> {
    let literal = |mut spec: ToolSpec, op: VaultOp| {
        spec.literal_args = true;
        if op == VaultOp::Set {
            spec.secret_arg = Some(SecretArg {
                name: "name",
                value: "value",
            });
        }
        (spec, op)
    };
    Ok(vec![
        literal(make_spec(
            "vault_list",
            "List the project's vault secrets: names, ids and when they were created and updated. Never values.",
            SideEffects::None,
            json!({ "type": "object", "properties": {}, "additionalProperties": false }),
            None,
        )?, VaultOp::List),
        literal(make_spec(
            "vault_set",
            "Store a secret in the project's vault under a name (replacing any value it had), for use as {{vault:NAME}} in tool arguments. The value is encrypted at rest and never shown again.",
            SideEffects::Write,
            json!({
                "type": "object", "required": ["name", "value"], "additionalProperties": false,
                "properties": {
                    "name": name_schema(),
                    "value": { "type": "string", "minLength": MIN_SECRET_CHARS, "maxLength": 65536, "description": "The secret value (at least 6 characters)" }
                }
            }),
            None,
        )?, VaultOp::Set),
        literal(make_spec(
            "vault_delete",
            "Delete a secret from the project's vault by name.",
            SideEffects::Destructive,
            json!({ "type": "object", "required": ["name"], "additionalProperties": false, "properties": { "name": name_schema() } }),
            None,
        )?, VaultOp::Delete),
        literal(make_spec(
            "vault_describe",
            "Describe one vault secret: its id, name and when it was created and updated. Never its value.",
            SideEffects::None,
            json!({ "type": "object", "required": ["name"], "additionalProperties": false, "properties": { "name": name_schema() } }),
            None,
        )?, VaultOp::Describe),
    ])
}

pub struct VaultTool {
    pub vault: Vault,
    pub op: VaultOp,
}

#[async_trait]
impl ToolHandler for VaultTool {
    async fn call(&self, ctx: &CallContext<'_>, args: Value) -> Result<Value, HandlerError> {
        let who = ctx.principal;
        let name = args.get("name").and_then(Value::as_str).unwrap_or_default();
        match self.op {
            VaultOp::List => {
                let all = self.vault.list(who).await.map_err(|e| failure(e, ""))?;
                Ok(json!({ "secrets": all.into_iter().map(info).collect::<Vec<_>>() }))
            }
            VaultOp::Set => {
                let value = args
                    .get("value")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                self.vault
                    .set(who, name, value)
                    .await
                    .map(info)
                    .map_err(|e| failure(e, name))
            }
            VaultOp::Delete => {
                self.vault
                    .delete(who, name)
                    .await
                    .map_err(|e| failure(e, name))?;
                Ok(json!({ "deleted": name }))
            }
            VaultOp::Describe => self
                .vault
                .describe(who, name)
                .await
                .map(info)
                .map_err(|e| failure(e, name)),
        }
    }
}
