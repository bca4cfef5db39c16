//! Built-in tools (D8) that run in-process. Each declares its side effects honestly and gets
//! the services it needs at construction.

mod email_send;
mod http_fetch;
mod schedule_callback;
mod search_web;
mod storage;
mod vault_tools;
pub mod vector;

use std::sync::Arc;

use serde_json::Value;

pub use search_web::{SearchProvider, BRAVE_DEFAULT_URL};
pub use storage::{ObjectStorage, MAX_OBJECT_BYTES};
pub use vector::Namespaces as VectorNamespaces;

use crate::catalog::{SideEffects, Tool, ToolHandler, ToolName, ToolSource, ToolSpec};
use crate::egress::GuardedClient;
use crate::store::Db;
use crate::vault::Vault;
use crate::Result;

/// What the built-ins run on.
pub struct BuiltinServices {
    pub db: Db,
    pub http: GuardedClient,
    pub storage: Arc<ObjectStorage>,
    pub vault: Vault,
    pub vectors: Arc<VectorNamespaces>,
    pub schedules: Arc<crate::schedule::Schedules>,
    pub email: Arc<crate::email::Email>,
    /// Where search.web sends queries (none: it is listed unavailable, saying what to set).
    pub search: Option<SearchProvider>,
}

fn make_spec(
    name: &str,
    description: &str,
    side_effects: SideEffects,
    input: Value,
    output: Option<Value>,
) -> Result<ToolSpec> {
    let integration = name.split(['.', '_']).next().unwrap_or(name).to_owned();
    Ok(ToolSpec {
        name: ToolName::parse(name)?,
        source: ToolSource::Builtin,
        integration,
        description: description.to_owned(),
        input_schema: input,
        output_schema: output,
        side_effects,
        literal_args: false,
        secret_arg: None,
        no_vault_refs: false,
    })
}

fn tool(spec: ToolSpec, handler: impl ToolHandler) -> Result<Tool> {
    Tool::new(spec, Arc::new(handler))
}

/// `tool`, listed as unavailable for `reason` when `missing` (its configuration is not set).
fn unless(missing: bool, reason: &str, tool: Tool) -> Tool {
    if missing {
        tool.unavailable_because(reason)
    } else {
        tool
    }
}

/// Every built-in tool's spec (name, description, schemas), without the services that run them:
/// what search and the docs see.
pub fn specs() -> Result<Vec<ToolSpec>> {
    let mut out = vec![
        http_fetch::spec()?,
        email_send::spec()?,
        search_web::spec()?,
        schedule_callback::spec()?,
        storage::get_spec()?,
        storage::put_spec()?,
        vector::upsert_spec()?,
        vector::query_spec()?,
        vector::delete_spec()?,
    ];
    out.extend(vault_tools::specs()?.into_iter().map(|(spec, _)| spec));
    Ok(out)
}

/// Every built-in tool, ready for the catalog.
pub fn tools(services: &BuiltinServices) -> Result<Vec<Tool>> {
    let mut tools = vec![
        tool(
            http_fetch::spec()?,
            http_fetch::HttpFetch {
                db: services.db.clone(),
                http: services.http.clone(),
            },
        )?,
        unless(
            !services.email.configured(),
            email_send::NOT_CONFIGURED,
            tool(
                email_send::spec()?,
                email_send::EmailSend {
                    email: services.email.clone(),
                    storage: services.storage.clone(),
                    vault: services.vault.clone(),
                },
            )?,
        ),
        unless(
            services.search.is_none(),
            search_web::NOT_CONFIGURED,
            tool(
                search_web::spec()?,
                search_web::SearchWeb {
                    http: services.http.clone(),
                    provider: services.search.clone(),
                },
            )?,
        ),
        tool(
            schedule_callback::spec()?,
            schedule_callback::ScheduleCallback(services.schedules.clone()),
        )?,
        tool(
            storage::get_spec()?,
            storage::StorageGet(services.storage.clone()),
        )?,
        tool(
            storage::put_spec()?,
            storage::StoragePut {
                storage: services.storage.clone(),
                vault: services.vault.clone(),
            },
        )?,
        tool(
            vector::upsert_spec()?,
            vector::VectorUpsert(services.vectors.clone()),
        )?,
        tool(
            vector::query_spec()?,
            vector::VectorQuery(services.vectors.clone()),
        )?,
        tool(
            vector::delete_spec()?,
            vector::VectorDelete(services.vectors.clone()),
        )?,
    ];
    for (spec, op) in vault_tools::specs()? {
        tools.push(tool(
            spec,
            vault_tools::VaultTool {
                vault: services.vault.clone(),
                op,
            },
        )?);
    }
    Ok(tools)
}
