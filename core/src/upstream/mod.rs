//! Upstream MCP servers (seed 004 "Registering an MCP server", D1, D16): a project admin
//! registers a remote server; its tools join that project's catalog as `<prefix><name>` with
//! source `mcp:<id>`, run through the one pipeline by `handler.rs` on a pooled session
//! (`live.rs`) behind a semaphore and a circuit breaker (`breaker.rs`). Refresh keeps vanished
//! tools as unavailable and holds changed or new ones for an admin's review (the rug-pull
//! guard). A catalog name belongs to the server that exposed it first, never to whichever
//! server is read first. See README.md in this folder.

pub mod breaker;
mod client;
mod connection;
mod declared;
pub mod discovery;
mod exchange;
mod handler;
mod items;
mod live;
mod overrides;
mod rpc_error;
mod sign_in;
mod sse;
pub mod stdio;
mod subscriptions;

pub use items::{
    exposed_uri, split_exposed, subject, template_matches, ItemChanges, ItemKind, McpItemView,
    PublishedItem,
};
pub use overrides::TextOverrides;
pub use subscriptions::{ResourceUpdated, Subscription};

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

pub use client::{RpcError, Session, PROTOCOL_VERSION};
pub use connection::Connection;
pub use live::{AuthConfig, UserOauth};
pub use workbench_model::upstream::{BreakerState, ServerState};

use crate::auth::{Operation, Principal};
use crate::catalog::{Catalog, SideEffects, Snapshot, Tool, ToolName, ToolSource, ToolSpec};
use crate::clock::{rfc3339, Clock};
use crate::connections::Connections;
use crate::crypto::sha256_hex;
use crate::egress::{GuardedClient, PrivateAllowance};
use crate::ids::new_id;
use crate::integrations::AppRegistry;
use crate::store::mcp_servers::{NameOwner, ServerRow, ToolRow, ToolState};
use crate::store::{self, Db};
use crate::vault::Vault;
use crate::{Error, Result};
pub use declared::{DeclaredServer, ReviewChange, ServerChange};
use handler::UpstreamTool;
use live::{Deps, Live};

/// The catalog source key of a project's upstream tools.
pub const SOURCE: &str = "mcp";
pub const DEFAULT_TIMEOUT_MS: u64 = 30_000;
pub const MAX_TIMEOUT_MS: u64 = 300_000;
pub const DEFAULT_MAX_CONCURRENCY: u64 = 10;
pub const MAX_MAX_CONCURRENCY: u64 = 1_000;
/// At most this many servers per project.
pub const MAX_SERVERS_PER_PROJECT: usize = 50;

/// `POST /v1/mcp/servers` as sent.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Registration {
    name: String,
    #[serde(default)]
    transport: Option<String>,
    /// Remote servers only.
    #[serde(default)]
    url: Option<String>,
    #[serde(default)]
    auth: Option<Value>,
    /// `transport: stdio` only: how to start the process.
    #[serde(default)]
    command: Option<String>,
    #[serde(default)]
    args: Option<Vec<String>>,
    #[serde(default)]
    env: Option<std::collections::BTreeMap<String, String>>,
    #[serde(default)]
    cwd: Option<String>,
    #[serde(default)]
    limits: Option<stdio::Limits>,
    #[serde(default)]
    filesystem: Option<stdio::Filesystem>,
    #[serde(default)]
    start: Option<stdio::Start>,
    #[serde(default)]
    pool: Option<u64>,
    #[serde(default)]
    idle_shutdown_s: Option<u64>,
    #[serde(default)]
    tool_prefix: Option<String>,
    #[serde(default)]
    timeout_ms: Option<u64>,
    #[serde(default)]
    max_concurrency: Option<u64>,
    #[serde(default)]
    auto_approve: Option<bool>,
}

impl Registration {
    /// The start settings a stdio registration gives, its defaults filled in (unchecked).
    fn stdio_config(&self, command: String) -> stdio::StdioConfig {
        stdio::StdioConfig {
            command,
            args: self.args.clone().unwrap_or_default(),
            cwd: self.cwd.clone(),
            env: self.env.clone().unwrap_or_default(),
            limits: self.limits.unwrap_or_default(),
            filesystem: self.filesystem.clone().unwrap_or_default(),
            start: self.start.unwrap_or_default(),
            pool: self.pool.unwrap_or(1),
            idle_shutdown_s: self.idle_shutdown_s.unwrap_or(0),
        }
    }
}

/// A server as the API shows it.
#[derive(Debug, Clone, Serialize)]
pub struct ServerView {
    pub id: String,
    pub object: &'static str,
    pub name: String,
    pub transport: String,
    pub url: String,
    pub auth_type: &'static str,
    pub tool_prefix: String,
    pub state: ServerState,
    pub breaker: BreakerState,
    pub tools_discovered: usize,
    pub tools: Vec<String>,
    /// The available ones among `tools`: what whoever may not review sees.
    #[serde(skip)]
    available_tools: Vec<String>,
    pub tool_counts: ToolCounts,
    pub timeout_ms: i64,
    pub max_concurrency: i64,
    pub auto_approve: bool,
    pub last_refresh_at: Option<String>,
    pub last_error: Option<String>,
    pub created_at: String,
    /// A stdio server's start settings (env values of vault references stay references).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stdio: Option<stdio::StdioConfig>,
    /// A stdio server's processes on the instance answering (`pool` of them).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub processes: Vec<stdio::supervisor::ProcessView>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<Skipped>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub changes: Option<Changes>,
}

impl ServerView {
    /// The view narrowed for `who` (D21): the URL without credentials, query or fragment and no
    /// refresh error text unless `who` may edit servers; only available tools unless `who` may
    /// review them.
    fn seen_by(mut self, who: &Principal) -> ServerView {
        if !who.allows(Operation::McpServersManage) {
            self.url = crate::egress::mask_url(&self.url);
            if self.last_error.is_some() {
                self.last_error = Some("the last refresh failed; an admin can see why".into());
            }
            // How a local server is started (arguments, environment) and what it wrote on
            // stderr are for whoever may edit servers.
            if let Some(c) = &mut self.stdio {
                c.args.clear();
                c.env.clear();
                c.cwd = None;
                c.filesystem = Default::default();
            }
            for p in &mut self.processes {
                p.stderr_tail.clear();
                p.last_exit = p
                    .last_exit
                    .as_ref()
                    .map(|_| "the process ended; an admin can see why".into());
            }
        }
        if !who.allows(Operation::McpServersReview) {
            self.tool_counts = ToolCounts {
                available: self.tool_counts.available,
                ..ToolCounts::default()
            };
            self.tools_discovered = self.tool_counts.available;
            self.tools = std::mem::take(&mut self.available_tools);
        }
        self
    }
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct ToolCounts {
    pub available: usize,
    pub unavailable: usize,
    pub pending_review: usize,
}

/// An upstream tool that cannot join the catalog, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Skipped {
    pub name: String,
    pub reason: String,
}

/// What a refresh found (upstream names).
#[derive(Debug, Clone, Default, Serialize)]
pub struct Changes {
    pub added: Vec<String>,
    pub removed: Vec<String>,
    pub changed: Vec<String>,
    /// What changed among the server's prompts (upstream names), when anything did.
    #[serde(skip_serializing_if = "ItemChanges::is_empty")]
    pub prompts: ItemChanges,
    /// What changed among its resources and resource templates (upstream URIs).
    #[serde(skip_serializing_if = "ItemChanges::is_empty")]
    pub resources: ItemChanges,
}

/// One upstream tool as an admin reviews it.
#[derive(Debug, Clone, Serialize)]
pub struct ToolView {
    pub name: String,
    pub catalog_name: String,
    /// An admin's project-wide name for the tool (after the server's prefix).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name_override: Option<String>,
    /// An admin's project-wide description, shown instead of the upstream's (`description`
    /// stays the upstream's own text, which the review compares).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description_override: Option<String>,
    pub status: ToolState,
    pub side_effects: SideEffects,
    pub side_effects_overridden: bool,
    pub description: String,
    pub input_schema: Value,
    pub annotations: Option<Value>,
    /// What an admin last approved, when the tool changed since.
    pub approved_description: Option<String>,
    pub approved_input_schema: Option<Value>,
    pub approved_annotations: Option<Value>,
    /// Why the tool is held whatever its review says: another tool has its catalog name (the
    /// server that exposed the name first keeps it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub collision: Option<String>,
    /// What the tool's text hashes to now (reviewers only): a configuration file approves a
    /// tool by it (`approved_tools`), so a file approves exactly what its author reviewed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fingerprint: Option<String>,
}

/// The annotations that say how a tool behaves: a change of any of them is reviewed like a
/// change of its description or schemas (a destructive tool must not turn itself read-only,
/// and so retryable and unconfirmed, unseen).
const HINTS: [&str; 4] = [
    "readOnlyHint",
    "destructiveHint",
    "idempotentHint",
    "openWorldHint",
];

/// Marks the fingerprint format that covers the annotation hints; a stored fingerprint
/// without it is the first format (description and schemas only).
const FINGERPRINT_V2: &str = "v2:";

/// What an admin reviews of a tool: its description, schemas and annotation hints, as the
/// upstream says them (an absent hint and a non-boolean one are distinct values too).
fn fingerprint(
    description: &str,
    input_schema: &str,
    output_schema: Option<&str>,
    annotations: Option<&str>,
) -> String {
    let annotations = annotations.and_then(|a| serde_json::from_str::<Value>(a).ok());
    let hints: Vec<Value> = HINTS
        .iter()
        .map(|h| {
            annotations
                .as_ref()
                .and_then(|a| a.get(*h))
                .cloned()
                .unwrap_or(Value::Null)
        })
        .collect();
    let text = format!(
        "{description}\u{1f}{input_schema}\u{1f}{}\u{1f}{}",
        output_schema.unwrap_or(""),
        Value::Array(hints)
    );
    format!("{FINGERPRINT_V2}{}", sha256_hex(text.as_bytes()))
}

/// The first format, before annotations were reviewed: only to recognise stored fingerprints.
fn legacy_fingerprint(
    description: &str,
    input_schema: &str,
    output_schema: Option<&str>,
) -> String {
    sha256_hex(
        format!(
            "{description}\u{1f}{input_schema}\u{1f}{}",
            output_schema.unwrap_or("")
        )
        .as_bytes(),
    )
}

/// Brings a row stored with a first-format fingerprint to the current one (its first refresh
/// after the upgrade), so that an upgrade holds nothing that did not change. When the stored
/// fingerprint is the first formula of the stored content and is what an admin approved, the
/// tool was approved as last seen: the approval carries over with the annotations last seen,
/// and only a change since then holds it. Any other first-format approval (the tool was already
/// held for a change) is left as it is: it matches no current fingerprint, so the tool stays
/// held until an admin approves it, since which annotations were approved is unknown.
fn upgrade_fingerprint(row: &mut ToolRow) {
    if row.fingerprint.starts_with(FINGERPRINT_V2) {
        return;
    }
    let legacy = legacy_fingerprint(
        &row.description,
        &row.input_schema,
        row.output_schema.as_deref(),
    );
    let current = fingerprint(
        &row.description,
        &row.input_schema,
        row.output_schema.as_deref(),
        row.annotations.as_deref(),
    );
    if row.fingerprint == legacy && row.approved_fingerprint.as_deref() == Some(legacy.as_str()) {
        row.approved_fingerprint = Some(current.clone());
        row.approved_annotations = row.annotations.clone();
    }
    row.fingerprint = current;
}

/// A tool's catalog name: the server's prefix and the upstream name, or the name an admin gave
/// it project-wide (`overrides.rs`).
fn catalog_name(server: &ServerRow, tool: &ToolRow) -> String {
    format!("{}{}", server.tool_prefix, exposed(tool))
}

/// The name a tool shows under after the server's prefix: an admin's rename, else the
/// upstream's own.
fn exposed(tool: &ToolRow) -> &str {
    tool.name_override.as_deref().unwrap_or(&tool.name)
}

/// The upstream name of `server`'s tool named `name` as the upstream names it or as the
/// catalog shows it (with the server's prefix, and an admin's rename); the upstream name wins
/// when both match.
fn upstream_name(server: &ServerRow, tools: &[ToolRow], name: &str) -> Option<String> {
    if tools.iter().any(|t| t.name == name) {
        return Some(name.to_owned());
    }
    tools
        .iter()
        .find(|t| catalog_name(server, t) == name)
        .map(|t| t.name.clone())
}

/// Who owns each upstream tool name of a project, by catalog name.
type Owners = HashMap<String, NameOwner>;

fn owners_of(rows: Vec<NameOwner>) -> Owners {
    rows.into_iter().map(|o| (o.name.clone(), o)).collect()
}

/// The owner of the name `server`'s tool `tool` would take, when that is another tool.
fn taken_by<'a>(owners: &'a Owners, server: &ServerRow, tool: &ToolRow) -> Option<&'a NameOwner> {
    owners
        .get(&catalog_name(server, tool))
        .filter(|o| o.server_id != server.id || o.tool != tool.name)
}

/// What a tool whose name another server owns collides with. `servers` names the project's
/// servers by id.
fn collision_with(owner: &NameOwner, servers: &HashMap<String, String>) -> String {
    let server = servers
        .get(&owner.server_id)
        .map(String::as_str)
        .unwrap_or(owner.server_id.as_str());
    format!(
        "collides with MCP server {server}'s tool {}, which exposed the name {} first",
        owner.tool, owner.name
    )
}

/// The source of a tool that is no upstream tool (built-in, plugin, custom app) and has `name`.
fn other_source(snapshot: &Snapshot, name: &str) -> Option<ToolSource> {
    snapshot
        .get(name)
        .filter(|t| !matches!(t.spec.source, ToolSource::Mcp(_)))
        .map(|t| t.spec.source.clone())
}

/// The status a tool is shown with: held for review as well when another tool has its name.
fn shown_status(row: &ToolRow, taken: bool) -> ToolState {
    if taken && row.status != ToolState::PendingReview {
        ToolState::PendingReview
    } else {
        row.status
    }
}

/// Annotations are hints: read-only → none, destructive → destructive, otherwise write.
fn derived_side_effects(annotations: Option<&Value>) -> SideEffects {
    let hint = |k: &str| annotations.and_then(|a| a.get(k)).and_then(Value::as_bool);
    if hint("readOnlyHint") == Some(true) {
        SideEffects::None
    } else if hint("destructiveHint") == Some(true) {
        SideEffects::Destructive
    } else {
        SideEffects::Write
    }
}

fn side_effects_of(row: &ToolRow) -> SideEffects {
    let annotations = row
        .annotations
        .as_deref()
        .and_then(|a| serde_json::from_str::<Value>(a).ok());
    row.side_effects_override
        .as_deref()
        .and_then(|o| serde_json::from_value(Value::String(o.to_owned())).ok())
        .unwrap_or_else(|| derived_side_effects(annotations.as_ref()))
}

/// A listed upstream tool as a row (status decided by the caller).
fn row_of(server_id: &str, t: &Value, now: i64) -> Option<ToolRow> {
    let name = t.get("name")?.as_str()?.to_owned();
    let description = t
        .get("description")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    let input_schema = t
        .get("inputSchema")
        .cloned()
        .unwrap_or_else(|| json!({ "type": "object" }))
        .to_string();
    let output_schema = t
        .get("outputSchema")
        .filter(|v| !v.is_null())
        .map(Value::to_string);
    let annotations = t
        .get("annotations")
        .filter(|v| !v.is_null())
        .map(Value::to_string);
    let fp = fingerprint(
        &description,
        &input_schema,
        output_schema.as_deref(),
        annotations.as_deref(),
    );
    Some(ToolRow {
        server_id: server_id.to_owned(),
        name,
        description,
        input_schema,
        output_schema,
        annotations,
        side_effects_override: None,
        name_override: None,
        description_override: None,
        status: ToolState::Available,
        fingerprint: fp,
        approved_fingerprint: None,
        approved_description: None,
        approved_input_schema: None,
        updated_at: now,
        approved_annotations: None,
    })
}

fn approve(row: &mut ToolRow) {
    row.approved_fingerprint = Some(row.fingerprint.clone());
    row.approved_description = Some(row.description.clone());
    row.approved_input_schema = Some(row.input_schema.clone());
    row.approved_annotations = row.annotations.clone();
    row.status = ToolState::Available;
}

/// Whether what the upstream says of a tool now is what an admin approved (a runnable tool
/// is, by the review rule).
fn approved_as_is(row: &ToolRow) -> bool {
    row.status == ToolState::Available
        || row.approved_fingerprint.as_deref() == Some(row.fingerprint.as_str())
}

/// Why a tool of `server` that is in the catalog cannot run, or `None` when it can.
fn unavailable_reason(server: &ServerRow, row: &ToolRow) -> Option<String> {
    let approve = format!(
        "an admin approves it on the MCP servers page (or POST /v1/mcp/servers/{}/approve)",
        server.id
    );
    match row.status {
        ToolState::Available => None,
        ToolState::Unavailable => Some(format!(
            "the MCP server {} no longer offers it: its last tool list left it out; it returns when the server offers it again",
            server.name
        )),
        ToolState::PendingReview if row.approved_fingerprint.is_some() => Some(format!(
            "held for review: its description, schema or annotations changed on the MCP server {} since an admin approved it; {approve}",
            server.name
        )),
        ToolState::PendingReview => Some(format!(
            "held for review: it is new on the MCP server {} and no admin has approved it yet; {approve}",
            server.name
        )),
    }
}

/// The prefixed catalog tool of a row, or why it cannot be one. A tool that is not runnable
/// stays listed as unavailable with its reason, showing only what an admin approved of it:
/// a changed description or schema is what nobody reviewed yet (a rug pull can put
/// instructions to agents there), so agents see the last approved ones, or none.
fn build_tool(
    live: &Arc<Live>,
    server: &ServerRow,
    row: &ToolRow,
) -> std::result::Result<Tool, String> {
    let name = ToolName::parse(&catalog_name(server, row)).map_err(|e| e.to_string())?;
    if !approved_as_is(row) {
        return held_tool(live, server, row, name);
    }
    let input_schema: Value =
        serde_json::from_str(&row.input_schema).map_err(|e| format!("input schema: {e}"))?;
    let output_schema = row
        .output_schema
        .as_deref()
        .and_then(|o| serde_json::from_str(o).ok());
    let side_effects = side_effects_of(row);
    let spec = ToolSpec {
        name,
        source: ToolSource::Mcp(server.id.clone()),
        integration: server.name.clone(),
        description: row
            .description_override
            .clone()
            .unwrap_or_else(|| row.description.clone()),
        input_schema,
        output_schema,
        side_effects,
        literal_args: false,
        secret_arg: None,
        no_vault_refs: false,
    };
    let handler = UpstreamTool {
        live: live.clone(),
        name: row.name.clone(),
        retryable: side_effects == SideEffects::None,
    };
    let mut tool = Tool::new(spec, Arc::new(handler)).map_err(|e| e.to_string())?;
    if let Some(source) = &live.sign_in {
        tool = tool.with_connection(source.clone());
    }
    Ok(match unavailable_reason(server, row) {
        Some(reason) => tool.unavailable_because(reason),
        None => tool,
    })
}

/// The catalog entry of a tool whose current text no admin approved: the approved
/// description and input schema (none before a first approval), no output schema, side effects
/// from the override or the approved annotations; never runnable.
fn held_tool(
    live: &Arc<Live>,
    server: &ServerRow,
    row: &ToolRow,
    name: ToolName,
) -> std::result::Result<Tool, String> {
    let approved_annotations = row
        .approved_annotations
        .as_deref()
        .and_then(|a| serde_json::from_str::<Value>(a).ok());
    let side_effects = row
        .side_effects_override
        .as_deref()
        .and_then(SideEffects::parse)
        .unwrap_or_else(|| derived_side_effects(approved_annotations.as_ref()));
    let input_schema = row
        .approved_input_schema
        .as_deref()
        .and_then(|s| serde_json::from_str::<Value>(s).ok())
        .filter(|s| s.get("type").and_then(Value::as_str) == Some("object"))
        .unwrap_or_else(|| json!({ "type": "object" }));
    let spec = |input_schema| ToolSpec {
        name: name.clone(),
        source: ToolSource::Mcp(server.id.clone()),
        integration: server.name.clone(),
        // An admin's own description is what they reviewed; else the approved one, or none.
        description: row
            .description_override
            .clone()
            .or_else(|| row.approved_description.clone())
            .unwrap_or_default(),
        input_schema,
        output_schema: None,
        side_effects,
        literal_args: false,
        secret_arg: None,
        no_vault_refs: false,
    };
    let handler = Arc::new(UpstreamTool {
        live: live.clone(),
        name: row.name.clone(),
        retryable: false,
    });
    let reason = unavailable_reason(server, row)
        .unwrap_or_else(|| "held for review; an admin approves it on the MCP servers page".into());
    // An approved schema that no longer compiles still leaves the tool listed, as an object.
    let tool = Tool::new(spec(input_schema), handler.clone())
        .or_else(|_| Tool::new(spec(json!({ "type": "object" })), handler))
        .map_err(|e| e.to_string())?;
    Ok(tool.unavailable_because(reason))
}

fn breaker_note(live: Option<&Arc<Live>>, now: i64) -> BreakerState {
    live.map(|l| l.breaker.state(now))
        .unwrap_or(BreakerState::Closed)
}

/// (server id, its `updated_at`): the version of a server a catalog was built from.
type ServerVersion = (String, i64);

/// What a server exposes, digested per list: (tools, prompts, resources and templates).
type Exposed = [String; 3];

/// A server whose tools, prompts or resources changed as this instance sees them (after any
/// reload: a refresh, an approval, an upstream's list_changed, a change made on another
/// instance). Set endpoints pass it on to their listening clients.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListChanged {
    pub project_id: String,
    pub server_id: String,
    pub tools: bool,
    pub prompts: bool,
    pub resources: bool,
}

/// How many notices a slow listener may fall behind before it hears "everything changed".
const NOTICE_BACKLOG: usize = 256;

/// The digests of what a server exposes: its tools' names, review state and overrides, and
/// its available prompts and resources as approved.
fn exposed_digest(tools: &[ToolRow], items: &[store::mcp_items::ItemRow]) -> Exposed {
    let tools: Vec<String> = tools
        .iter()
        .map(|t| {
            format!(
                "{}\u{1f}{}\u{1f}{}\u{1f}{:?}\u{1f}{:?}\u{1f}{:?}",
                t.name,
                t.status,
                t.approved_fingerprint.as_deref().unwrap_or(""),
                t.name_override,
                t.description_override,
                t.side_effects_override
            )
        })
        .collect();
    let items_of = |prompts: bool| -> String {
        let v: Vec<String> = items
            .iter()
            .filter(|i| (i.kind == ItemKind::Prompt) == prompts)
            .filter(|i| i.status == ToolState::Available)
            .map(|i| {
                format!(
                    "{}\u{1f}{}\u{1f}{}",
                    i.kind,
                    i.item_key,
                    i.approved_fingerprint.as_deref().unwrap_or("")
                )
            })
            .collect();
        sha256_hex(v.join("\n").as_bytes())
    };
    [
        sha256_hex(tools.join("\n").as_bytes()),
        items_of(true),
        items_of(false),
    ]
}

#[derive(Clone)]
pub struct Upstreams {
    db: Db,
    clock: Arc<dyn Clock>,
    catalog: Arc<Catalog>,
    vault: Vault,
    allowance: PrivateAllowance,
    deps: Deps,
    /// The guarded client discovery and client registration go through.
    guarded: GuardedClient,
    /// Servers users sign in to are integrations of their project there.
    connections: Connections,
    registry: Arc<AppRegistry>,
    /// workbench as an OAuth client: its metadata document URL and redirect URI.
    ours: discovery::OurClient,
    /// What stdio servers the operator allows.
    stdio: Arc<stdio::StdioSettings>,
    /// Servers this instance runs, by id (kept across reloads: sessions and breakers live on).
    live: Arc<RwLock<HashMap<String, Arc<Live>>>>,
    /// Servers that said their tool list changed: (project, server id), refreshed in turn.
    changed: tokio::sync::mpsc::UnboundedSender<(String, String)>,
    /// Per project: the (server id, updated_at) its catalog tools were built from.
    loaded: Arc<RwLock<HashMap<String, Vec<ServerVersion>>>>,
    reloading: Arc<tokio::sync::Mutex<()>>,
    /// Per server: what it exposed at the last reload (to tell listeners what changed).
    exposed: Arc<RwLock<HashMap<String, (String, Exposed)>>>,
    notices: tokio::sync::broadcast::Sender<ListChanged>,
    /// Resource updates servers send (`subscriptions.rs`).
    updates: tokio::sync::broadcast::Sender<subscriptions::ResourceUpdated>,
}

/// What servers users sign in to need from the rest of workbench.
pub struct SignInParts {
    pub connections: Connections,
    pub registry: Arc<AppRegistry>,
    pub ours: discovery::OurClient,
}

/// A stdio server's start settings, as stored.
fn launch_of(row: &ServerRow) -> Result<Option<stdio::StdioConfig>> {
    row.launch
        .as_deref()
        .map(serde_json::from_str)
        .transpose()
        .map_err(|e| Error::internal(format!("stored stdio settings: {e}")))
}

/// The program a stdio server runs, for messages.
fn stdio_command(row: &ServerRow) -> String {
    launch_of(row)
        .ok()
        .flatten()
        .map(|c| c.command)
        .unwrap_or_default()
}

/// What a live session is built from, digested: the stored settings of its server.
fn settings_digest(row: &ServerRow) -> String {
    crate::crypto::sha256_hex(
        format!(
            "{}\n{}\n{}\n{}\n{}\n{}",
            row.transport,
            row.url,
            row.auth,
            row.launch.as_deref().unwrap_or(""),
            row.timeout_ms,
            row.max_concurrency
        )
        .as_bytes(),
    )
}

/// What removing a server from this instance does to it: a stdio server's process stops and
/// never starts again.
fn retire(live: &Live) {
    if let Some(s) = &live.stdio {
        s.retire();
    }
}

/// What /metrics shows of one upstream server this instance runs.
#[derive(Debug, Clone)]
pub struct UpstreamGauge {
    pub server_id: String,
    pub name: String,
    pub breaker: BreakerState,
    pub in_flight: usize,
    /// A stdio server's processes on this instance.
    pub processes: Vec<stdio::supervisor::ProcessView>,
}

impl Upstreams {
    /// The breaker state, in-flight calls and (stdio) processes of every server this
    /// instance runs.
    pub async fn gauges(&self) -> Vec<UpstreamGauge> {
        let now = self.clock.now_ms();
        let live: Vec<(String, Arc<Live>)> = self
            .live
            .read()
            .expect("upstreams lock")
            .iter()
            .map(|(id, l)| (id.clone(), l.clone()))
            .collect();
        let mut out = Vec::with_capacity(live.len());
        for (id, l) in live {
            let processes = match &l.stdio {
                Some(p) => p.view().await,
                None => Vec::new(),
            };
            out.push(UpstreamGauge {
                server_id: id,
                name: l.name.clone(),
                breaker: l.breaker.state(now),
                in_flight: l
                    .max_concurrency
                    .saturating_sub(l.limit.available_permits()),
                processes,
            });
        }
        out.sort_by(|a, b| a.server_id.cmp(&b.server_id));
        out
    }

    #[allow(clippy::too_many_arguments)]
    pub fn new(
        db: Db,
        clock: Arc<dyn Clock>,
        catalog: Arc<Catalog>,
        vault: Vault,
        guarded: GuardedClient,
        allowance: PrivateAllowance,
        sign_in: SignInParts,
        stdio: stdio::StdioSettings,
    ) -> Upstreams {
        let deps = Deps {
            vault: vault.clone(),
            clock: clock.clone(),
            http: guarded.reqwest(),
        };
        let (changed, mut heard) = tokio::sync::mpsc::unbounded_channel::<(String, String)>();
        let upstreams = Upstreams {
            db,
            clock,
            catalog,
            vault,
            allowance,
            deps,
            guarded,
            connections: sign_in.connections,
            registry: sign_in.registry,
            ours: sign_in.ours,
            stdio: Arc::new(stdio),
            live: Arc::default(),
            changed,
            loaded: Arc::default(),
            reloading: Arc::default(),
            exposed: Arc::default(),
            notices: tokio::sync::broadcast::channel(NOTICE_BACKLOG).0,
            updates: tokio::sync::broadcast::channel(subscriptions::UPDATE_BACKLOG).0,
        };
        // The tools of a server users sign in to are listed once its admin connected it.
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            let (tx, mut connected) = tokio::sync::mpsc::unbounded_channel::<[String; 3]>();
            upstreams.connections.on_connected(Arc::new(move |p, i, u| {
                let _ = tx.send([p.to_owned(), i.to_owned(), u.to_owned()]);
            }));
            let me = upstreams.clone();
            rt.spawn(async move {
                while let Some([project, name, user]) = connected.recv().await {
                    if let Err(e) = me.connected(&project, &name, &user).await {
                        tracing::warn!(server = %name, error = %e, "listing the tools of a server just signed in to failed");
                    }
                }
            });
        }
        // `notifications/tools/list_changed` triggers the same refresh an admin would.
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            let me = upstreams.clone();
            rt.spawn(async move {
                while let Some((project, id)) = heard.recv().await {
                    match store::mcp_servers::get_server(me.db.pool(), &project, &id).await {
                        Ok(Some(row)) => {
                            if let Err(e) = me.refresh_row(&row).await {
                                tracing::warn!(server = %id, error = %e, "refresh after list_changed failed");
                            }
                        }
                        Ok(None) => {}
                        Err(e) => tracing::warn!(server = %id, error = %e, "refresh after list_changed failed"),
                    }
                }
            });
        }
        upstreams
    }

    fn now(&self) -> i64 {
        self.clock.now_ms()
    }

    /// Hears every server whose tools, prompts or resources change from now on.
    pub fn notices(&self) -> tokio::sync::broadcast::Receiver<ListChanged> {
        self.notices.subscribe()
    }

    /// What each of the project's servers exposes now, digested (`announce` compares it with
    /// the last reload): its tool rows, and its available prompts and resources, read in one
    /// query. None when they cannot be read (listeners are then not told this time).
    async fn exposed_now(
        &self,
        project_id: &str,
        servers: &[ServerRow],
        tools: &[Vec<ToolRow>],
    ) -> Option<Vec<(String, Exposed)>> {
        let items = match store::mcp_items::available_in_project(self.db.pool(), project_id).await {
            Ok(i) => i,
            Err(e) => {
                tracing::warn!(project = %project_id, error = %e, "the servers' items cannot be read; listeners are not told");
                return None;
            }
        };
        Some(
            servers
                .iter()
                .zip(tools)
                .map(|(server, rows)| {
                    let own: Vec<_> = items
                        .iter()
                        .filter(|i| i.server_id == server.id)
                        .cloned()
                        .collect();
                    (server.id.clone(), exposed_digest(rows, &own))
                })
                .collect(),
        )
    }

    /// Tells listeners what changed since the last reload of the project's servers (`now`, of
    /// the servers in `servers`): nothing on a server's first load, everything when it is gone.
    fn announce(&self, project_id: &str, servers: &[ServerRow], now: Vec<(String, Exposed)>) {
        let mut notices = Vec::new();
        {
            let mut exposed = self.exposed.write().expect("upstreams lock");
            for (id, digest) in &now {
                let before = exposed.insert(id.clone(), (project_id.to_owned(), digest.clone()));
                if let Some((_, before)) = before {
                    let changed = |i: usize| before[i] != digest[i];
                    if changed(0) || changed(1) || changed(2) {
                        notices.push(ListChanged {
                            project_id: project_id.to_owned(),
                            server_id: id.clone(),
                            tools: changed(0),
                            prompts: changed(1),
                            resources: changed(2),
                        });
                    }
                }
            }
            let gone: Vec<String> = exposed
                .iter()
                .filter(|(id, (p, _))| p == project_id && !servers.iter().any(|s| &s.id == *id))
                .map(|(id, _)| id.clone())
                .collect();
            for id in gone {
                exposed.remove(&id);
                notices.push(ListChanged {
                    project_id: project_id.to_owned(),
                    server_id: id,
                    tools: true,
                    prompts: true,
                    resources: true,
                });
            }
        }
        for n in notices {
            tracing::debug!(server = %n.server_id, tools = n.tools, prompts = n.prompts, resources = n.resources, "MCP server lists changed");
            // Nobody listening is fine.
            let _ = self.notices.send(n);
        }
    }

    fn live_for(&self, row: &ServerRow) -> Result<Arc<Live>> {
        if let Some(l) = self.live.read().expect("upstreams lock").get(&row.id) {
            if l.built_from == settings_digest(row) {
                return Ok(l.clone());
            }
        }
        let url = url::Url::parse(&row.url)
            .map_err(|e| Error::internal(format!("stored server url: {e}")))?;
        let auth: AuthConfig = serde_json::from_str(&row.auth)
            .map_err(|e| Error::internal(format!("stored server auth: {e}")))?;
        let launch = launch_of(row)?;
        let live = self.new_live(row, url, auth, launch);
        if let Some(before) = self
            .live
            .write()
            .expect("upstreams lock")
            .insert(row.id.clone(), live.clone())
        {
            // Its settings were changed in place, here or on another instance.
            tracing::info!(server = %row.id, name = %row.name, "MCP server settings changed: new session");
            retire(&before);
        }
        Ok(live)
    }

    fn new_live(
        &self,
        row: &ServerRow,
        url: url::Url,
        auth: AuthConfig,
        launch: Option<stdio::StdioConfig>,
    ) -> Arc<Live> {
        let (tx, project, id) = (self.changed.clone(), row.project_id.clone(), row.id.clone());
        let updates = self.updates.clone();
        let on_changed: client::OnToolsChanged = Arc::new(move |notice: &Value| {
            if notice["method"] == "notifications/resources/updated" {
                if let Some(uri) = notice.pointer("/params/uri").and_then(Value::as_str) {
                    let _ = updates.send(subscriptions::ResourceUpdated {
                        project_id: project.clone(),
                        server_id: id.clone(),
                        uri: uri.to_owned(),
                    });
                }
                return;
            }
            let _ = tx.send((project.clone(), id.clone()));
        });
        let sign_in = auth
            .user_oauth()
            .and_then(|u| self.integration_of(row, u, false))
            .map(|i| self.connections.source_for(i));
        let mut live = Live::new(
            row.project_id.clone(),
            row.name.clone(),
            row.transport.clone(),
            url,
            auth,
            Duration::from_millis(row.timeout_ms as u64),
            row.max_concurrency as usize,
            self.deps.clone(),
            on_changed,
        );
        live.sign_in = sign_in;
        live.built_from = settings_digest(row);
        live.stdio = launch.map(|config| {
            stdio::pool::Pool::new(
                config,
                stdio::supervisor::Context {
                    project_id: &row.project_id,
                    server_id: &row.id,
                    name: &row.name,
                    settings: &self.stdio,
                    vault: self.vault.clone(),
                    clock: self.clock.clone(),
                    timeout: Duration::from_millis(row.timeout_ms as u64),
                    on_changed: live.on_changed(),
                },
            )
        });
        Arc::new(live)
    }

    /// Checks a registration completely (nothing is stored by this): the shape, the URL against
    /// the SSRF rules, credentials as vault references only.
    async fn check(
        &self,
        admin: &Principal,
        body: &Value,
    ) -> Result<(
        Registration,
        AuthConfig,
        url::Url,
        Option<stdio::StdioConfig>,
    )> {
        let inline = |v: &Value| {
            v.as_object().is_some_and(|m| {
                m.keys().any(|k| {
                    matches!(
                        k.as_str(),
                        "token"
                            | "password"
                            | "secret"
                            | "client_secret"
                            | "api_key"
                            | "key"
                            | "value"
                            | "access_token"
                            | "bearer"
                    )
                })
            })
        };
        if let Some(auth) = body.get("auth") {
            if inline(auth) {
                return Err(Error::invalid("credentials are secret refs, never inline; put the credential in the vault and name it in auth.secret_ref"));
            }
        }
        let reg: Registration = serde_json::from_value(body.clone())
            .map_err(|e| Error::invalid(format!("invalid MCP server registration: {e}")))?;
        let name_ok = !reg.name.is_empty()
            && reg.name.len() <= 40
            && reg
                .name
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_lowercase())
            && reg
                .name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '_'));
        if !name_ok {
            return Err(Error::invalid("name must be 1 to 40 lowercase letters, digits, '-' or '_', starting with a letter"));
        }
        let launch = match reg.transport.as_deref().unwrap_or("http") {
            "http" | "sse" => {
                if reg.command.is_some()
                    || reg.args.is_some()
                    || reg.env.is_some()
                    || reg.cwd.is_some()
                    || reg.limits.is_some()
                    || reg.filesystem.is_some()
                    || reg.start.is_some()
                    || reg.pool.is_some()
                    || reg.idle_shutdown_s.is_some()
                {
                    return Err(Error::invalid(
                        "command, args, env, cwd, limits, filesystem, start, pool and idle_shutdown_s are for transport stdio",
                    ));
                }
                None
            }
            "stdio" => Some(self.check_stdio(admin, &reg).await?),
            other => {
                return Err(Error::invalid(format!(
                    "transport must be http (streamable HTTP), sse (HTTP+SSE) or stdio (a local program), not {other:?}"
                )))
            }
        };
        let url = match (&launch, &reg.url) {
            (Some(_), None) => url::Url::parse(stdio::STDIO_URL).expect("a url"),
            (Some(_), Some(_)) => {
                return Err(Error::invalid(
                    "a stdio server has no url: it is started from command",
                ))
            }
            (None, None) => return Err(Error::invalid("url is required")),
            (None, Some(u)) => self
                .allowance
                .check_registered_url(u, "an http(s) URL of the server's MCP endpoint")?,
        };
        if let Some(p) = &reg.tool_prefix {
            if p.len() > 32
                || !p
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
                || !p.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
            {
                return Err(Error::invalid("tool_prefix must be up to 32 letters, digits, '_', '.' or '-', starting with a letter"));
            }
        }
        if let Some(t) = reg.timeout_ms {
            if !(1..=MAX_TIMEOUT_MS).contains(&t) {
                return Err(Error::invalid(format!(
                    "timeout_ms must be from 1 to {MAX_TIMEOUT_MS}"
                )));
            }
        }
        if let Some(c) = reg.max_concurrency {
            if !(1..=MAX_MAX_CONCURRENCY).contains(&c) {
                return Err(Error::invalid(format!(
                    "max_concurrency must be from 1 to {MAX_MAX_CONCURRENCY}"
                )));
            }
        }
        let auth_value = reg
            .auth
            .clone()
            .unwrap_or_else(|| json!({ "type": "none" }));
        let mut auth: AuthConfig = serde_json::from_value(auth_value)
            .map_err(|e| Error::invalid(format!("invalid auth: {e}")))?;
        if launch.is_some() && auth != AuthConfig::None {
            return Err(Error::invalid(
                "a stdio server takes no auth: give it credentials as env values referring to vault secrets ({{vault:NAME}})",
            ));
        }
        let secret_ref = match &mut auth {
            AuthConfig::None => None,
            AuthConfig::UserOauth(u) => {
                let transport = reg.transport.as_deref().unwrap_or("http");
                self.prepare_sign_in(admin, &reg.name, &url, transport, u)
                    .await?;
                None
            }
            AuthConfig::Bearer { secret_ref } => Some(secret_ref),
            AuthConfig::Oauth2 {
                secret_ref,
                token_url,
                ..
            } => {
                let u = url::Url::parse(token_url)
                    .map_err(|e| Error::invalid(format!("auth.token_url: {e}")))?;
                if let Some(reason) = self.allowance.check_url_host(&u) {
                    return Err(Error::invalid(format!(
                        "auth.token_url points at a {reason}"
                    )));
                }
                Some(secret_ref)
            }
        };
        if let Some(r) = secret_ref {
            let name = self
                .vault
                .name_of(&admin.project_id, r)
                .await?
                .ok_or_else(|| Error::invalid(format!("auth.secret_ref {r:?} names no secret in this project's vault; add it on the Vault page first")))?;
            *r = name;
        }
        Ok((reg, auth, url, launch))
    }

    /// A stdio registration's start settings, checked completely: the program against what
    /// the operator allows, every vault reference against the project's vault.
    async fn check_stdio(
        &self,
        admin: &Principal,
        reg: &Registration,
    ) -> Result<stdio::StdioConfig> {
        let command = reg
            .command
            .clone()
            .ok_or_else(|| Error::invalid("a stdio server needs command (the program to start)"))?;
        let mut config = reg.stdio_config(command);
        config.check(&self.stdio)?;
        let refs: Vec<(String, String)> = config
            .vault_refs()
            .map(|(k, n)| (k.to_owned(), n.to_owned()))
            .collect();
        for (k, n) in refs {
            let name = self
                .vault
                .name_of(&admin.project_id, &n)
                .await?
                .ok_or_else(|| Error::invalid(format!("env {k} refers to {{{{vault:{n}}}}}, which names no secret in this project's vault; add it on the Vault page first")))?;
            config.env.insert(k, format!("{{{{vault:{name}}}}}"));
        }
        Ok(config)
    }

    /// Registers a server: checks, connects, initializes and lists its tools; stores it only
    /// when all of that worked and no name collides (409).
    pub async fn register(&self, admin: &Principal, body: &Value) -> Result<ServerView> {
        self.register_approving(admin, body, None).await
    }

    /// `register`, approving only the listed tools whose fingerprint `approved` names (all of
    /// them when `None`); the others are held for review.
    async fn register_approving(
        &self,
        admin: &Principal,
        body: &Value,
        approved: Option<&std::collections::BTreeMap<String, String>>,
    ) -> Result<ServerView> {
        admin.require(Operation::McpServersManage)?;
        let (reg, auth, url, launch) = self.check(admin, body).await?;
        let existing = store::mcp_servers::list_servers(self.db.pool(), &admin.project_id).await?;
        if existing.iter().any(|s| s.name == reg.name) {
            return Err(Error::Conflict(format!(
                "an MCP server named {} already exists in this project",
                reg.name
            )));
        }
        if existing.len() >= MAX_SERVERS_PER_PROJECT {
            return Err(Error::Conflict(format!("this project already has {MAX_SERVERS_PER_PROJECT} MCP servers, the most it may have")));
        }
        let now = self.now();
        let row = ServerRow {
            id: new_id("mcps"),
            project_id: admin.project_id.clone(),
            name: reg.name.clone(),
            transport: reg.transport.clone().unwrap_or_else(|| "http".into()),
            url: url.to_string(),
            auth: serde_json::to_string(&auth).map_err(|e| Error::internal(e.to_string()))?,
            tool_prefix: reg
                .tool_prefix
                .clone()
                .unwrap_or_else(|| format!("{}.", reg.name)),
            timeout_ms: reg.timeout_ms.unwrap_or(DEFAULT_TIMEOUT_MS) as i64,
            max_concurrency: reg.max_concurrency.unwrap_or(DEFAULT_MAX_CONCURRENCY) as i64,
            auto_approve: reg.auto_approve.unwrap_or(false) as i64,
            last_refresh_at: Some(now),
            last_error: None,
            created_at: now,
            updated_at: now,
            launch: launch
                .as_ref()
                .map(serde_json::to_string)
                .transpose()
                .map_err(|e| Error::internal(e.to_string()))?,
        };
        // A live server for the check only; it is kept once the row is stored. A server each
        // user signs in to is listed once its admin connected (nobody has yet).
        let signs_in = auth.user_oauth().is_some();
        let live = self.new_live(&row, url, auth, launch);
        let listed = if signs_in {
            Vec::new()
        } else {
            let target = match &live.stdio {
                Some(_) => format!("{} (started as {})", row.name, stdio_command(&row)),
                None => row.url.clone(),
            };
            // The admin registering it may read what the process wrote on stderr.
            let stderr = |why: &str| {
                let Some(s) = &live.stdio else {
                    return String::new();
                };
                let last = s
                    .last_stderr()
                    .map(|l| format!("; its last stderr line: {l}"))
                    .unwrap_or_default();
                // A program that dies at start under Landlock most often missed a path.
                let hint = if stdio::landlock::abi().is_some() && why.contains("closed its stdout")
                {
                    " (it runs confined: it may read the system directories, its program's installation, its working directory and filesystem.read, and write only its working directory and filesystem.write)"
                } else {
                    ""
                };
                format!("{last}{hint}")
            };
            self.listing(&row, &live).await.map_err(|e| match e {
                Error::Invalid(why) => {
                    Error::invalid(format!("cannot register {target}: {why}{}", stderr(&why)))
                }
                other => other,
            })?
        };
        // A configuration file approves tools by fingerprint; its server's prompts and
        // resources wait for an admin.
        let items = if signs_in {
            Vec::new()
        } else {
            self.list_items(&row, &live).await
        };
        let mut rows: Vec<ToolRow> = listed
            .iter()
            .filter_map(|t| row_of(&row.id, t, now))
            .collect();
        rows.iter_mut()
            .for_each(|r| declared::approve_as_declared(r, approved));
        let snapshot = self.catalog.snapshot(&admin.project_id);
        // A name another server owns is taken even while its tool is held for review (and so
        // out of the catalog).
        let owners =
            owners_of(store::mcp_servers::name_owners(self.db.pool(), &admin.project_id).await?);
        let taken = |name: &str| {
            Error::Conflict(format!(
                "a tool named {name} already exists in this project; choose another tool_prefix"
            ))
        };
        let mut skipped = Vec::new();
        let mut names: Vec<NameOwner> = Vec::new();
        // A tool held for review takes no name (as on a refresh).
        for r in rows.iter().filter(|r| r.status == ToolState::Available) {
            match build_tool(&live, &row, r) {
                Ok(t) => {
                    // Names of upstream tools are taken by their owners (a tool held for
                    // review under a name nobody owns yet is listed but does not keep it).
                    if other_source(&snapshot, t.name()).is_some()
                        || owners.contains_key(t.name())
                        || names.iter().any(|n| n.name == t.name())
                    {
                        return Err(taken(t.name()));
                    }
                    names.push(NameOwner {
                        name: t.name().to_owned(),
                        server_id: row.id.clone(),
                        tool: r.name.clone(),
                    });
                }
                Err(reason) => skipped.push(Skipped {
                    name: r.name.clone(),
                    reason,
                }),
            }
        }
        let mut tx = self.db.begin_write().await?;
        store::mcp_servers::insert_server(&mut *tx, &row)
            .await
            .map_err(|e| {
                if e.is_unique_violation() {
                    Error::Conflict(format!(
                        "an MCP server named {} already exists in this project",
                        row.name
                    ))
                } else {
                    e
                }
            })?;
        for r in &rows {
            store::mcp_servers::upsert_tool(&mut *tx, r).await?;
        }
        let review = items::Review {
            first: approved.is_none(),
            auto_approve: false,
        };
        self.store_items(&mut tx, &row.id, &items, review, now)
            .await?;
        // The server's names are its own from now on; one another server claimed meanwhile
        // refuses the registration (nothing is stored).
        for n in &names {
            if !store::mcp_servers::claim_name(&mut *tx, &row.project_id, n, now).await? {
                return Err(taken(&n.name));
            }
        }
        tx.commit().await?;
        self.live
            .write()
            .expect("upstreams lock")
            .insert(row.id.clone(), live);
        self.reload_project(&admin.project_id).await?;
        tracing::info!(server = %row.id, name = %row.name, by = %admin.user_id, tools = rows.len(), "MCP server registered");
        let mut view = self.view(&row).await?;
        view.skipped = skipped;
        Ok(view)
    }

    /// The server's tool list, or why not, scrubbed of the project's secrets and the server's
    /// token before anything is stored or shown: a server that echoes the credential it was
    /// sent (in a description, a schema or an error) must not hand it to agents or admins.
    /// An unanswered listing is `Error::Invalid` with the (scrubbed) reason.
    async fn listing(&self, row: &ServerRow, live: &Live) -> Result<Vec<Value>> {
        let mut scrubber = self.vault.scrubber(&live.project_id).await?;
        let listed = if live.auth.user_oauth().is_some() {
            let (user, token) = self.lister_token(row, live).await?;
            scrubber.add(&format!("{}_credential", live.name), &token);
            live.list_tools_as(&user, &token).await
        } else {
            live.list_tools().await
        };
        live.scrub_token_into(&mut scrubber);
        match listed {
            Ok(mut tools) => {
                tools.iter_mut().for_each(|t| scrubber.scrub(t));
                Ok(tools)
            }
            Err(e) => {
                let message = e.to_string();
                Err(Error::Invalid(
                    scrubber.scrub_str(&message).unwrap_or(message),
                ))
            }
        }
    }

    async fn view(&self, row: &ServerRow) -> Result<ServerView> {
        let tools = store::mcp_servers::list_tools(self.db.pool(), &row.id).await?;
        let owners =
            owners_of(store::mcp_servers::name_owners(self.db.pool(), &row.project_id).await?);
        let snapshot = self.catalog.snapshot(&row.project_id);
        let live = self
            .live
            .read()
            .expect("upstreams lock")
            .get(&row.id)
            .cloned();
        let mut counts = ToolCounts::default();
        let mut shown = Vec::with_capacity(tools.len());
        for t in &tools {
            let taken = taken_by(&owners, row, t).is_some()
                || other_source(&snapshot, &catalog_name(row, t)).is_some();
            let status = shown_status(t, taken);
            match status {
                ToolState::Available => counts.available += 1,
                ToolState::Unavailable => counts.unavailable += 1,
                ToolState::PendingReview => counts.pending_review += 1,
            }
            shown.push((catalog_name(row, t), status));
        }
        let auth: AuthConfig = serde_json::from_str(&row.auth).unwrap_or(AuthConfig::None);
        let breaker = breaker_note(live.as_ref(), self.now());
        Ok(ServerView {
            id: row.id.clone(),
            object: "mcp_server",
            name: row.name.clone(),
            transport: row.transport.clone(),
            url: row.url.clone(),
            auth_type: auth.kind(),
            tool_prefix: row.tool_prefix.clone(),
            state: if auth.user_oauth().is_some() && tools.is_empty() {
                ServerState::AwaitingSignIn
            } else if row.last_error.is_some() {
                ServerState::Error
            } else if breaker == BreakerState::Open {
                ServerState::Degraded
            } else {
                ServerState::Connected
            },
            breaker,
            tools_discovered: tools.len(),
            tools: shown
                .iter()
                .filter(|(_, s)| *s != ToolState::PendingReview)
                .map(|(n, _)| n.clone())
                .collect(),
            available_tools: shown
                .iter()
                .filter(|(_, s)| *s == ToolState::Available)
                .map(|(n, _)| n.clone())
                .collect(),
            tool_counts: counts,
            timeout_ms: row.timeout_ms,
            max_concurrency: row.max_concurrency,
            auto_approve: row.auto_approve != 0,
            last_refresh_at: row.last_refresh_at.map(rfc3339),
            last_error: row.last_error.clone(),
            created_at: rfc3339(row.created_at),
            stdio: launch_of(row).ok().flatten(),
            processes: match live.as_ref().and_then(|l| l.stdio.clone()) {
                Some(s) => s.view().await,
                None => Vec::new(),
            },
            skipped: Vec::new(),
            changes: None,
        })
    }

    async fn server(&self, who: &Principal, id: &str) -> Result<ServerRow> {
        store::mcp_servers::get_server(self.db.pool(), &who.project_id, id)
            .await?
            .ok_or(Error::NotFound)
    }

    /// The registry as `who` may see it (D21): URLs and refresh errors masked for whoever may
    /// not edit servers, held and vanished tools left out for whoever may not review them.
    pub async fn list(&self, who: &Principal) -> Result<Vec<ServerView>> {
        who.require(Operation::McpServersRead)?;
        let mut out = Vec::new();
        for row in store::mcp_servers::list_servers(self.db.pool(), &who.project_id).await? {
            out.push(self.view(&row).await?.seen_by(who));
        }
        Ok(out)
    }

    pub async fn get(&self, who: &Principal, id: &str) -> Result<ServerView> {
        who.require(Operation::McpServersRead)?;
        let row = self.server(who, id).await?;
        Ok(self.view(&row).await?.seen_by(who))
    }

    /// A server's tools as an admin reviews them; others see the available ones only.
    pub async fn tools(&self, who: &Principal, id: &str) -> Result<Vec<ToolView>> {
        who.require(Operation::McpServersRead)?;
        let reviewer = who.allows(Operation::McpServersReview);
        let row = self.server(who, id).await?;
        let tools = store::mcp_servers::list_tools(self.db.pool(), &row.id).await?;
        let owners =
            owners_of(store::mcp_servers::name_owners(self.db.pool(), &row.project_id).await?);
        let servers: HashMap<String, String> =
            store::mcp_servers::list_servers(self.db.pool(), &row.project_id)
                .await?
                .into_iter()
                .map(|s| (s.id, s.name))
                .collect();
        let snapshot = self.catalog.snapshot(&row.project_id);
        let json = |s: Option<&str>| s.and_then(|s| serde_json::from_str::<Value>(s).ok());
        Ok(tools
            .iter()
            .filter_map(|t| {
                let name = catalog_name(&row, t);
                let collision = match taken_by(&owners, &row, t) {
                    Some(owner) => Some(format!("{}; held while that server has it", collision_with(owner, &servers))),
                    None => other_source(&snapshot, &name).map(|source| format!("collides with the tool {name} from {source}; held while this project has it")),
                };
                let status = shown_status(t, collision.is_some());
                if !reviewer && status != ToolState::Available {
                    return None;
                }
                let changed = t.approved_fingerprint.as_deref().is_some_and(|a| a != t.fingerprint);
                Some(ToolView {
                    name: t.name.clone(),
                    catalog_name: name,
                    name_override: t.name_override.clone(),
                    description_override: t.description_override.clone(),
                    status,
                    side_effects: side_effects_of(t),
                    side_effects_overridden: t.side_effects_override.is_some(),
                    description: t.description.clone(),
                    input_schema: json(Some(&t.input_schema)).unwrap_or(Value::Null),
                    annotations: json(t.annotations.as_deref()),
                    approved_description: changed.then(|| t.approved_description.clone()).flatten(),
                    approved_input_schema: changed.then(|| json(t.approved_input_schema.as_deref())).flatten(),
                    approved_annotations: changed.then(|| json(t.approved_annotations.as_deref())).flatten(),
                    collision,
                    fingerprint: reviewer.then(|| t.fingerprint.clone()),
                })
            })
            .collect())
    }

    pub async fn delete(&self, admin: &Principal, id: &str) -> Result<()> {
        admin.require(Operation::McpServersManage)?;
        if !store::mcp_servers::delete_server(self.db.pool(), &admin.project_id, id).await? {
            return Err(Error::NotFound);
        }
        if let Some(l) = self.live.write().expect("upstreams lock").remove(id) {
            retire(&l);
        }
        self.reload_project(&admin.project_id).await?;
        tracing::info!(server = %id, by = %admin.user_id, "MCP server deleted");
        Ok(())
    }

    /// Re-reads a server's tool list: vanished tools are kept as unavailable, changed ones are
    /// held for review, new ones too unless the server auto-approves.
    pub async fn refresh(&self, admin: &Principal, id: &str) -> Result<ServerView> {
        admin.require(Operation::McpServersManage)?;
        let row = self.server(admin, id).await?;
        let changes = self.refresh_row(&row).await?;
        let mut view = self.get(admin, id).await?;
        view.changes = Some(changes);
        Ok(view)
    }

    /// The refresh itself, whoever asked (an admin, or the server's list_changed).
    async fn refresh_row(&self, row: &ServerRow) -> Result<Changes> {
        let live = self.live_for(row)?;
        let now = self.now();
        let listed = match self.listing(row, &live).await {
            Ok(l) => l,
            Err(Error::Invalid(why)) => {
                store::mcp_servers::set_refreshed(self.db.pool(), &row.id, now, Some(&why)).await?;
                self.reload_project(&row.project_id).await?;
                return Ok(Changes::default());
            }
            Err(other) => return Err(other),
        };
        let items = self.list_items(row, &live).await;
        let existing = store::mcp_servers::list_tools(self.db.pool(), &row.id).await?;
        let mut by_name: HashMap<String, ToolRow> =
            existing.into_iter().map(|t| (t.name.clone(), t)).collect();
        // A server each user signs in to is first listed when its admin connects: that listing
        // is its registration, approved as registering any other server approves what it lists.
        let first_listing = by_name.is_empty() && live.auth.user_oauth().is_some();
        let mut changes = Changes::default();
        let mut tx = self.db.begin_write().await?;
        // Read within the write, so a name claimed elsewhere meanwhile is seen (or, racing on
        // PostgreSQL, the claim below loses at the unique key).
        let owners = owners_of(store::mcp_servers::name_owners(&mut *tx, &row.project_id).await?);
        for t in &listed {
            let Some(mut fresh) = row_of(&row.id, t, now) else {
                continue;
            };
            if let Some(old) = by_name.get(&fresh.name) {
                fresh.name_override = old.name_override.clone();
                fresh.description_override = old.description_override.clone();
            }
            let taken = taken_by(&owners, row, &fresh).is_some();
            let is_new = match by_name.remove(&fresh.name) {
                Some(mut old) => {
                    upgrade_fingerprint(&mut old);
                    if old.fingerprint != fresh.fingerprint {
                        changes.changed.push(fresh.name.clone());
                    }
                    fresh.side_effects_override = old.side_effects_override.clone();
                    fresh.approved_fingerprint = old.approved_fingerprint.clone();
                    fresh.approved_description = old.approved_description.clone();
                    fresh.approved_input_schema = old.approved_input_schema.clone();
                    fresh.approved_annotations = old.approved_annotations.clone();
                    fresh.status = if old.approved_fingerprint.as_deref()
                        == Some(fresh.fingerprint.as_str())
                    {
                        ToolState::Available
                    } else {
                        ToolState::PendingReview
                    };
                    false
                }
                None => {
                    changes.added.push(fresh.name.clone());
                    // A new tool whose name another server owns is never approved on its own:
                    // held, and once the name is free an admin decides.
                    if (row.auto_approve != 0 || first_listing) && !taken {
                        approve(&mut fresh);
                    } else {
                        fresh.status = ToolState::PendingReview;
                    }
                    true
                }
            };
            // An approved tool whose name nobody owns takes it now; a new one that loses the
            // name to a claim made meanwhile is held like any colliding tool.
            let name = catalog_name(row, &fresh);
            if fresh.status == ToolState::Available
                && !owners.contains_key(&name)
                && ToolName::parse(&name).is_ok()
            {
                let claim = NameOwner {
                    name,
                    server_id: row.id.clone(),
                    tool: fresh.name.clone(),
                };
                if !store::mcp_servers::claim_name(&mut *tx, &row.project_id, &claim, now).await?
                    && is_new
                {
                    fresh.status = ToolState::PendingReview;
                    fresh.approved_fingerprint = None;
                    fresh.approved_description = None;
                    fresh.approved_input_schema = None;
                    fresh.approved_annotations = None;
                }
            }
            store::mcp_servers::upsert_tool(&mut *tx, &fresh).await?;
        }
        for (_, mut gone) in by_name {
            if gone.status != ToolState::Unavailable {
                changes.removed.push(gone.name.clone());
            }
            gone.status = ToolState::Unavailable;
            gone.updated_at = now;
            store::mcp_servers::upsert_tool(&mut *tx, &gone).await?;
        }
        let review = items::Review {
            first: first_listing,
            auto_approve: row.auto_approve != 0,
        };
        (changes.prompts, changes.resources) = self
            .store_items(&mut tx, &row.id, &items, review, now)
            .await?;
        store::mcp_servers::set_refreshed(&mut *tx, &row.id, now, None).await?;
        tx.commit().await?;
        self.reload_project(&row.project_id).await?;
        Ok(changes)
    }

    /// Approves tools held for review, named as the upstream names them (`lookup`) or as the
    /// catalog, agents and the portal show them (`crm.lookup`): they join the catalog as they
    /// are now.
    pub async fn approve(
        &self,
        admin: &Principal,
        id: &str,
        tools: &[String],
    ) -> Result<ServerView> {
        admin.require(Operation::McpServersReview)?;
        let row = self.server(admin, id).await?;
        let existing = store::mcp_servers::list_tools(self.db.pool(), &row.id).await?;
        let tools = tools
            .iter()
            .map(|n| {
                upstream_name(&row, &existing, n)
                    .ok_or_else(|| Error::invalid(format!("{id} has no tool named {n}")))
            })
            .collect::<Result<Vec<String>>>()?;
        let now = self.now();
        let mut tx = self.db.begin_write().await?;
        // A tool whose name another tool has stays held, approved or not: the server that
        // exposed the name first keeps it.
        let owners = owners_of(store::mcp_servers::name_owners(&mut *tx, &row.project_id).await?);
        let snapshot = self.catalog.snapshot(&row.project_id);
        for tool in &tools {
            let t = existing
                .iter()
                .find(|t| &t.name == tool)
                .ok_or(Error::NotFound)?;
            if let Some(owner) = taken_by(&owners, &row, t) {
                let servers: HashMap<String, String> =
                    store::mcp_servers::list_servers(&mut *tx, &row.project_id)
                        .await?
                        .into_iter()
                        .map(|s| (s.id, s.name))
                        .collect();
                return Err(Error::Conflict(format!(
                    "{tool} cannot be approved: it {}",
                    collision_with(owner, &servers)
                )));
            }
            let name = catalog_name(&row, t);
            if let Some(source) = other_source(&snapshot, &name) {
                return Err(Error::Conflict(format!(
                    "{tool} cannot be approved: it collides with the tool {name} from {source}"
                )));
            }
        }
        for mut t in existing
            .into_iter()
            .filter(|t| tools.contains(&t.name) && t.status == ToolState::PendingReview)
        {
            approve(&mut t);
            t.updated_at = now;
            store::mcp_servers::upsert_tool(&mut *tx, &t).await?;
            let name = catalog_name(&row, &t);
            if !owners.contains_key(&name) && ToolName::parse(&name).is_ok() {
                let claim = NameOwner {
                    name,
                    server_id: row.id.clone(),
                    tool: t.name.clone(),
                };
                if !store::mcp_servers::claim_name(&mut *tx, &row.project_id, &claim, now).await? {
                    return Err(Error::Conflict(format!(
                        "{} cannot be approved: another MCP server took the name {} a moment ago",
                        t.name, claim.name
                    )));
                }
            }
        }
        store::mcp_servers::touch(&mut *tx, &row.id, now).await?;
        tx.commit().await?;
        tracing::info!(server = %id, by = %admin.user_id, ?tools, "MCP tools approved");
        self.reload_project(&admin.project_id).await?;
        self.get(admin, id).await
    }

    /// An admin's side-effects override for one tool (`None` clears it).
    pub async fn set_side_effects(
        &self,
        admin: &Principal,
        id: &str,
        tool: &str,
        side_effects: Option<SideEffects>,
    ) -> Result<ToolView> {
        admin.require(Operation::McpServersReview)?;
        let row = self.server(admin, id).await?;
        let existing = store::mcp_servers::list_tools(self.db.pool(), &row.id).await?;
        let tool = &upstream_name(&row, &existing, tool).ok_or(Error::NotFound)?;
        let mut t = existing
            .into_iter()
            .find(|t| &t.name == tool)
            .ok_or(Error::NotFound)?;
        t.side_effects_override = side_effects.map(|s| s.as_str().to_owned());
        let now = self.now();
        t.updated_at = now;
        let mut tx = self.db.begin_write().await?;
        store::mcp_servers::upsert_tool(&mut *tx, &t).await?;
        store::mcp_servers::touch(&mut *tx, &row.id, now).await?;
        tx.commit().await?;
        self.reload_project(&admin.project_id).await?;
        self.tools(admin, id)
            .await?
            .into_iter()
            .find(|v| &v.name == tool)
            .ok_or(Error::NotFound)
    }

    /// Rebuilds a project's upstream tools from the database. A tool shows under its name only
    /// when its server owns the name: names nobody owns yet (kept from before owners were
    /// recorded, or freed by a deleted server) go first to the earliest registered server
    /// whose tool may show. A server or tool that cannot be built (a stored row that no longer
    /// validates, a name another source now has) is left out and logged; it never stops the
    /// others.
    pub async fn reload_project(&self, project_id: &str) -> Result<()> {
        let _one_at_a_time = self.reloading.lock().await;
        let mut servers = store::mcp_servers::list_servers(self.db.pool(), project_id).await?;
        servers.sort_by(|a, b| (a.created_at, &a.id).cmp(&(b.created_at, &b.id)));
        let mut rows = Vec::with_capacity(servers.len());
        for server in &servers {
            rows.push(store::mcp_servers::list_tools(self.db.pool(), &server.id).await?);
        }
        let owners = self.claim_free_names(project_id, &servers, &rows).await?;
        // Told once the catalog has the new tools, so a listener that lists again sees them.
        let exposed = self.exposed_now(project_id, &servers, &rows).await;
        let others: Vec<String> = self
            .catalog
            .snapshot(project_id)
            .tools()
            .iter()
            .filter(|t| !matches!(t.spec.source, ToolSource::Mcp(_)))
            .map(|t| t.name().to_owned())
            .collect();
        let sign_ins = servers
            .iter()
            .zip(&rows)
            .filter_map(|(s, tools)| {
                let auth: AuthConfig = serde_json::from_str(&s.auth).ok()?;
                self.integration_of(s, auth.user_oauth()?, tools.is_empty())
            })
            .collect();
        let mut tools: Vec<Tool> = Vec::new();
        let mut versions = Vec::new();
        for (server, rows) in servers.iter().zip(rows) {
            versions.push((server.id.clone(), server.updated_at));
            let live = match self.live_for(server) {
                Ok(l) => l,
                Err(e) => {
                    tracing::error!(server = %server.id, error = %e, "MCP server skipped");
                    continue;
                }
            };
            for row in rows {
                // A tool held for review stays listed (unavailable, with why) under a name it
                // owns or nobody owns yet; one whose name another tool has is that tool's.
                let owner = owners.get(&catalog_name(server, &row));
                let own = owner.is_some_and(|o| o.server_id == server.id && o.tool == row.name);
                let held = row.status == ToolState::PendingReview;
                let listed = own || (held && owner.is_none());
                if !listed {
                    if !held {
                        tracing::warn!(server = %server.id, tool = %row.name, owner = ?owner.map(|o| &o.server_id), "MCP tool left out: another server owns its name");
                    }
                    continue;
                }
                match build_tool(&live, server, &row) {
                    Ok(t)
                        if others.iter().any(|o| o == t.name())
                            || tools.iter().any(|o| o.name() == t.name()) =>
                    {
                        tracing::warn!(server = %server.id, tool = %t.name(), "MCP tool left out: the name is taken");
                    }
                    Ok(t) => tools.push(t),
                    Err(reason) => {
                        tracing::debug!(server = %server.id, tool = %row.name, %reason, "MCP tool left out")
                    }
                }
            }
        }
        versions.sort();
        self.registry.set_servers(project_id, sign_ins);
        self.catalog.set_source_tools(project_id, SOURCE, tools)?;
        if let Some(now) = exposed {
            self.announce(project_id, &servers, now);
        }
        let ids: Vec<&String> = servers.iter().map(|s| &s.id).collect();
        self.live.write().expect("upstreams lock").retain(|id, l| {
            let keep = l.project_id != project_id || ids.contains(&id);
            if !keep {
                retire(l);
            }
            keep
        });
        let mut loaded = self.loaded.write().expect("upstreams lock");
        if versions.is_empty() {
            loaded.remove(project_id);
        } else {
            loaded.insert(project_id.to_owned(), versions);
        }
        Ok(())
    }

    /// The owners of a project's upstream tool names, after claiming the names nobody owns for
    /// the tools that may show under them (not held for review), servers in registration order.
    /// A claim that cannot be written is logged: that tool stays out until a later reload.
    async fn claim_free_names(
        &self,
        project_id: &str,
        servers: &[ServerRow],
        rows: &[Vec<ToolRow>],
    ) -> Result<Owners> {
        let mut owners =
            owners_of(store::mcp_servers::name_owners(self.db.pool(), project_id).await?);
        let now = self.now();
        let mut claimed = false;
        for (server, rows) in servers.iter().zip(rows) {
            for row in rows.iter().filter(|r| r.status != ToolState::PendingReview) {
                let name = catalog_name(server, row);
                if owners.contains_key(&name) || ToolName::parse(&name).is_err() {
                    continue;
                }
                let claim = NameOwner {
                    name: name.clone(),
                    server_id: server.id.clone(),
                    tool: row.name.clone(),
                };
                match store::mcp_servers::claim_name(self.db.pool(), project_id, &claim, now).await
                {
                    Ok(_) => claimed = true,
                    Err(e) => {
                        tracing::warn!(server = %server.id, tool = %row.name, error = %e, "the MCP tool's name cannot be claimed")
                    }
                }
                // Taken, by this claim or by one another instance made first (re-read below).
                owners.insert(name, claim);
            }
        }
        if claimed {
            owners = owners_of(store::mcp_servers::name_owners(self.db.pool(), project_id).await?);
        }
        Ok(owners)
    }

    /// Rebuilds every project whose servers changed on any instance (registered, deleted,
    /// refreshed, approved). Returns how many projects were rebuilt.
    pub async fn reload_all(&self) -> Result<usize> {
        let mut stored: HashMap<String, Vec<(String, i64)>> = HashMap::new();
        for (project, id, at) in store::mcp_servers::versions(self.db.pool()).await? {
            stored.entry(project).or_default().push((id, at));
        }
        // Compared as sorted here, as `reload_project` keeps them (the database's text order
        // need not be Rust's).
        stored.values_mut().for_each(|v| v.sort());
        let loaded = self.loaded.read().expect("upstreams lock").clone();
        let mut changed: Vec<String> = stored
            .iter()
            .filter(|(p, v)| loaded.get(*p) != Some(v))
            .map(|(p, _)| p.clone())
            .collect();
        changed.extend(loaded.keys().filter(|p| !stored.contains_key(*p)).cloned());
        for p in &changed {
            if let Err(e) = self.reload_project(p).await {
                tracing::error!(project = %p, error = %e, "reloading MCP servers failed");
            }
        }
        Ok(changed.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(description: &str, annotations: Option<&str>) -> ToolRow {
        ToolRow {
            server_id: "mcps_1".into(),
            name: "delete_all".into(),
            description: description.into(),
            input_schema: r#"{"type":"object"}"#.into(),
            output_schema: None,
            annotations: annotations.map(str::to_owned),
            side_effects_override: None,
            name_override: None,
            description_override: None,
            status: ToolState::Available,
            fingerprint: String::new(),
            approved_fingerprint: None,
            approved_description: None,
            approved_input_schema: None,
            updated_at: 0,
            approved_annotations: None,
        }
    }

    #[test]
    fn every_annotation_hint_is_part_of_the_fingerprint_and_nothing_else_of_them() {
        let fp =
            |a: Option<&str>| fingerprint("Deletes everything.", r#"{"type":"object"}"#, None, a);
        let destructive = fp(Some(r#"{"destructiveHint":true}"#));
        for other in [
            None,
            Some(r#"{"destructiveHint":false}"#),
            Some(r#"{"destructiveHint":true,"readOnlyHint":true}"#),
            Some(r#"{"destructiveHint":true,"idempotentHint":true}"#),
            Some(r#"{"destructiveHint":true,"openWorldHint":false}"#),
            Some(r#"{"destructiveHint":"yes"}"#),
        ] {
            assert_ne!(fp(other), destructive, "{other:?}");
        }
        assert_eq!(
            fp(Some(r#"{"title":"Delete all","destructiveHint":true}"#)),
            destructive,
            "a title is no hint"
        );
        assert!(destructive.starts_with(FINGERPRINT_V2));
        assert_ne!(
            fp(None),
            fingerprint("Deletes everything!", r#"{"type":"object"}"#, None, None),
            "the description still counts"
        );
    }

    #[test]
    fn a_first_format_approval_carries_over_only_for_a_tool_approved_as_last_seen() {
        let annotations = Some(r#"{"destructiveHint":true}"#);
        // Approved as last seen: the approval carries over, with the annotations last seen.
        let mut approved = row("Deletes everything.", annotations);
        let legacy = legacy_fingerprint(&approved.description, &approved.input_schema, None);
        approved.fingerprint = legacy.clone();
        approved.approved_fingerprint = Some(legacy.clone());
        upgrade_fingerprint(&mut approved);
        let current = fingerprint(
            "Deletes everything.",
            r#"{"type":"object"}"#,
            None,
            annotations,
        );
        assert_eq!(
            (
                approved.fingerprint.as_str(),
                approved.approved_fingerprint.as_deref()
            ),
            (current.as_str(), Some(current.as_str()))
        );
        assert_eq!(approved.approved_annotations.as_deref(), annotations);
        // Already held for a change: the old approval matches nothing current, so it stays held.
        let mut held = row("Deletes everything, and more.", annotations);
        held.fingerprint = legacy_fingerprint(&held.description, &held.input_schema, None);
        held.approved_fingerprint = Some(legacy.clone());
        upgrade_fingerprint(&mut held);
        assert!(held.fingerprint.starts_with(FINGERPRINT_V2));
        assert_eq!(held.approved_fingerprint.as_deref(), Some(legacy.as_str()));
        // A stored fingerprint that is not the first formula of the stored content carries
        // nothing over.
        let mut odd = row("Deletes everything.", annotations);
        odd.fingerprint = "0".repeat(64);
        odd.approved_fingerprint = Some("0".repeat(64));
        upgrade_fingerprint(&mut odd);
        assert_ne!(
            odd.approved_fingerprint.as_deref(),
            Some(odd.fingerprint.as_str())
        );
        // A current fingerprint is left as it is.
        let mut now = row("Deletes everything.", annotations);
        now.fingerprint = current.clone();
        now.approved_fingerprint = Some("v2:something else".into());
        upgrade_fingerprint(&mut now);
        assert_eq!(
            now.approved_fingerprint.as_deref(),
            Some("v2:something else")
        );
    }
}
