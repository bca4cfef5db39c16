//! MCP servers as a configuration file holds them: the registration an export writes for a
//! stored server (defaults written out, secrets as vault names), how a file's entry compares
//! with it, and the in-place change applying one makes (same id, so tool reviews, side-effect
//! overrides and users' sign-ins stay).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use super::live::AuthConfig;
use super::TextOverrides;
use super::{
    approve, launch_of, retire, stdio, Registration, ServerView, Upstreams,
    DEFAULT_MAX_CONCURRENCY, DEFAULT_TIMEOUT_MS,
};
use crate::auth::{Operation, Principal};
use crate::catalog::SideEffects;
use crate::store::mcp_servers::{ServerRow, ToolState};
use crate::store::{self};
use crate::{Error, Result};

/// A server as a configuration file holds it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeclaredServer {
    /// What `POST /v1/mcp/servers` takes.
    #[serde(flatten)]
    pub registration: Map<String, Value>,
    /// Side-effect overrides an admin set, by the tool's upstream name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub side_effects: BTreeMap<String, SideEffects>,
    /// Project-wide names an admin gave tools (after the server's prefix), by upstream name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tool_names: BTreeMap<String, String>,
    /// Project-wide descriptions an admin gave tools, by upstream name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tool_descriptions: BTreeMap<String, String>,
    /// The reviewed tools: upstream name → fingerprint of what an admin approved. A tool whose
    /// upstream text has another fingerprint now is held for review. Absent: whatever the
    /// server lists when it is registered is approved, as registering it by hand does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approved_tools: Option<BTreeMap<String, String>>,
}

impl DeclaredServer {
    pub fn name(&self) -> &str {
        self.registration
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("")
    }
}

/// What applying an entry does to the stored server of its name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerChange {
    /// No server has its name: it is registered.
    Register,
    /// These settings differ and change in place.
    Update(Vec<String>),
    /// The tool prefix differs: the server is deleted and registered again (its users sign in
    /// again).
    Replace(Vec<String>),
    /// The settings match.
    Same,
}

/// How one entry's tool reviews differ from the stored server's.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReviewChange {
    /// Held tools the file approves as the server describes them now.
    pub approve: Vec<String>,
    /// Held tools the file approves with another fingerprint: they stay held.
    pub stale: Vec<String>,
    /// Side-effect overrides to set (`None` clears one).
    pub side_effects: Vec<(String, Option<SideEffects>)>,
    /// Names and descriptions to set or clear, by upstream name.
    pub text: Vec<(String, TextOverrides)>,
}

impl ReviewChange {
    pub fn is_empty(&self) -> bool {
        self.approve.is_empty() && self.side_effects.is_empty() && self.text.is_empty()
    }
}

/// The auth an admin gives, without what registration found out (discovery, the client it
/// registered, who registered it).
fn given_auth(auth: &AuthConfig) -> Value {
    let mut v = serde_json::to_value(auth).unwrap_or_else(|_| json!({ "type": "none" }));
    if let Some(m) = v.as_object_mut() {
        for k in ["discovered", "client", "registered_by"] {
            m.remove(k);
        }
    }
    v
}

/// A registration with every default written out, so a stored server and a file's entry
/// compare field by field.
#[allow(clippy::too_many_arguments)]
fn canonical(
    name: &str,
    transport: &str,
    url: &str,
    auth: &AuthConfig,
    launch: Option<&stdio::StdioConfig>,
    tool_prefix: &str,
    timeout_ms: u64,
    max_concurrency: u64,
    auto_approve: bool,
) -> Result<Map<String, Value>> {
    let mut m = Map::new();
    m.insert("name".into(), json!(name));
    m.insert("transport".into(), json!(transport));
    match launch {
        Some(l) => {
            let Value::Object(fields) =
                serde_json::to_value(l).map_err(|e| Error::internal(e.to_string()))?
            else {
                return Err(Error::internal("stdio settings are not an object"));
            };
            m.extend(fields);
        }
        None => {
            m.insert("url".into(), json!(url));
            m.insert("auth".into(), given_auth(auth));
        }
    }
    m.insert("tool_prefix".into(), json!(tool_prefix));
    m.insert("timeout_ms".into(), json!(timeout_ms));
    m.insert("max_concurrency".into(), json!(max_concurrency));
    m.insert("auto_approve".into(), json!(auto_approve));
    Ok(m)
}

fn canonical_of_row(row: &ServerRow) -> Result<Map<String, Value>> {
    let auth: AuthConfig = serde_json::from_str(&row.auth)
        .map_err(|e| Error::internal(format!("stored server auth: {e}")))?;
    canonical(
        &row.name,
        &row.transport,
        &row.url,
        &auth,
        launch_of(row)?.as_ref(),
        &row.tool_prefix,
        row.timeout_ms.max(0) as u64,
        row.max_concurrency.max(0) as u64,
        row.auto_approve != 0,
    )
}

/// A file's entry with its defaults written out; checks its shape only (no vault, network or
/// address checks: `Upstreams::check` does those).
fn canonical_of_entry(entry: &DeclaredServer) -> Result<Map<String, Value>> {
    let reg: Registration = serde_json::from_value(Value::Object(entry.registration.clone()))
        .map_err(|e| Error::invalid(format!("invalid MCP server registration: {e}")))?;
    let transport = reg.transport.clone().unwrap_or_else(|| "http".into());
    let launch =
        (transport == "stdio").then(|| reg.stdio_config(reg.command.clone().unwrap_or_default()));
    let auth: AuthConfig = serde_json::from_value(
        reg.auth
            .clone()
            .unwrap_or_else(|| json!({ "type": "none" })),
    )
    .map_err(|e| Error::invalid(format!("invalid auth: {e}")))?;
    canonical(
        &reg.name,
        &transport,
        reg.url.as_deref().unwrap_or(""),
        &auth,
        launch.as_ref(),
        &reg.tool_prefix
            .clone()
            .unwrap_or_else(|| format!("{}.", reg.name)),
        reg.timeout_ms.unwrap_or(DEFAULT_TIMEOUT_MS),
        reg.max_concurrency.unwrap_or(DEFAULT_MAX_CONCURRENCY),
        reg.auto_approve.unwrap_or(false),
    )
}

impl Upstreams {
    /// Every server of the project as a configuration file holds it, by name.
    pub async fn declared(&self, admin: &Principal) -> Result<Vec<DeclaredServer>> {
        admin.require(Operation::McpServersManage)?;
        admin.require(Operation::McpServersReview)?;
        let mut out = Vec::new();
        for row in store::mcp_servers::list_servers(self.db.pool(), &admin.project_id).await? {
            let tools = store::mcp_servers::list_tools(self.db.pool(), &row.id).await?;
            out.push(DeclaredServer {
                registration: canonical_of_row(&row)?,
                side_effects: tools
                    .iter()
                    .filter_map(|t| {
                        let o = t.side_effects_override.as_deref()?;
                        Some((t.name.clone(), o.parse().ok()?))
                    })
                    .collect(),
                tool_names: tools
                    .iter()
                    .filter_map(|t| Some((t.name.clone(), t.name_override.clone()?)))
                    .collect(),
                tool_descriptions: tools
                    .iter()
                    .filter_map(|t| Some((t.name.clone(), t.description_override.clone()?)))
                    .collect(),
                approved_tools: Some(
                    tools
                        .iter()
                        .filter(|t| t.status == ToolState::Available)
                        .filter_map(|t| Some((t.name.clone(), t.approved_fingerprint.clone()?)))
                        .collect(),
                ),
            });
        }
        Ok(out)
    }

    /// Checks an entry completely, as registering it would (vault references, addresses, the
    /// programs the operator allows; a server each user signs in to is discovered), without
    /// storing anything or listing its tools.
    pub async fn check_declared(&self, admin: &Principal, entry: &DeclaredServer) -> Result<()> {
        admin.require(Operation::McpServersManage)?;
        canonical_of_entry(entry)?;
        self.check(admin, &Value::Object(entry.registration.clone()))
            .await
            .map(|_| ())
    }

    /// How applying `entry` changes the stored server `current` (None: there is none).
    pub fn compare_declared(
        &self,
        current: Option<&DeclaredServer>,
        entry: &DeclaredServer,
    ) -> Result<ServerChange> {
        let Some(current) = current else {
            return Ok(ServerChange::Register);
        };
        let want = canonical_of_entry(entry)?;
        let mut fields: Vec<String> = want
            .iter()
            .filter(|(k, v)| current.registration.get(*k) != Some(*v))
            .map(|(k, _)| k.clone())
            .chain(
                current
                    .registration
                    .keys()
                    .filter(|k| !want.contains_key(*k))
                    .cloned(),
            )
            .collect();
        fields.sort();
        fields.dedup();
        Ok(if fields.is_empty() {
            ServerChange::Same
        } else if fields.iter().any(|f| f == "tool_prefix") {
            ServerChange::Replace(fields)
        } else {
            ServerChange::Update(fields)
        })
    }

    /// How the reviews of the stored server named like `entry` differ from the file's.
    pub async fn compare_reviews(
        &self,
        admin: &Principal,
        entry: &DeclaredServer,
    ) -> Result<ReviewChange> {
        let Some(row) = self.named(admin, entry.name()).await? else {
            return Ok(ReviewChange::default());
        };
        let tools = store::mcp_servers::list_tools(self.db.pool(), &row.id).await?;
        let mut change = ReviewChange::default();
        if let Some(approved) = &entry.approved_tools {
            for t in tools
                .iter()
                .filter(|t| t.status == ToolState::PendingReview)
            {
                match approved.get(&t.name) {
                    Some(fp) if *fp == t.fingerprint => change.approve.push(t.name.clone()),
                    Some(_) => change.stale.push(t.name.clone()),
                    None => {}
                }
            }
        }
        for t in &tools {
            let now: Option<SideEffects> = t
                .side_effects_override
                .as_deref()
                .and_then(|o| o.parse().ok());
            let want = entry.side_effects.get(&t.name).copied();
            if now != want {
                change.side_effects.push((t.name.clone(), want));
            }
            let (name, description) = (
                entry.tool_names.get(&t.name).cloned(),
                entry.tool_descriptions.get(&t.name).cloned(),
            );
            let text = TextOverrides {
                name: (name != t.name_override).then_some(name),
                description: (description != t.description_override).then_some(description),
            };
            if text.name.is_some() || text.description.is_some() {
                change.text.push((t.name.clone(), text));
            }
        }
        Ok(change)
    }

    async fn named(&self, admin: &Principal, name: &str) -> Result<Option<ServerRow>> {
        Ok(
            store::mcp_servers::list_servers(self.db.pool(), &admin.project_id)
                .await?
                .into_iter()
                .find(|s| s.name == name),
        )
    }

    /// The id of the project's server called `name`.
    pub async fn id_of(&self, admin: &Principal, name: &str) -> Result<Option<String>> {
        Ok(self.named(admin, name).await?.map(|r| r.id))
    }

    /// Registers a file's entry: tools are approved only as the file approved them (when it
    /// says), then its side-effect overrides are set.
    pub async fn register_declared(
        &self,
        admin: &Principal,
        entry: &DeclaredServer,
    ) -> Result<ServerView> {
        let view = self
            .register_approving(
                admin,
                &Value::Object(entry.registration.clone()),
                entry.approved_tools.as_ref(),
            )
            .await?;
        self.apply_reviews(admin, entry).await?;
        self.get(admin, &view.id).await
    }

    /// Approves the held tools the file approves as they are now, and sets the side-effect
    /// overrides the file gives (clearing the others).
    pub async fn apply_reviews(&self, admin: &Principal, entry: &DeclaredServer) -> Result<()> {
        let change = self.compare_reviews(admin, entry).await?;
        if change.is_empty() {
            return Ok(());
        }
        let id = self
            .id_of(admin, entry.name())
            .await?
            .ok_or(Error::NotFound)?;
        if !change.approve.is_empty() {
            self.approve(admin, &id, &change.approve).await?;
        }
        for (tool, side_effects) in &change.side_effects {
            self.set_side_effects(admin, &id, tool, *side_effects)
                .await?;
        }
        for (tool, text) in change.text {
            self.set_text(admin, &id, &tool, text).await?;
        }
        Ok(())
    }

    /// Changes a server's settings in place: same id, name and tool prefix, so its tools'
    /// reviews, side-effect overrides and users' sign-ins stay. The new settings are checked
    /// as a registration is, and (unless each user signs in to it) the server must list its
    /// tools with them, before anything is stored; its tools are then refreshed.
    pub async fn update(&self, admin: &Principal, id: &str, body: &Value) -> Result<ServerView> {
        admin.require(Operation::McpServersManage)?;
        let old = self.server(admin, id).await?;
        let (reg, mut auth, url, launch) = self.check(admin, body).await?;
        if reg.name != old.name {
            return Err(Error::invalid(
                "name cannot change: register the server under its new name and delete this one",
            ));
        }
        let prefix = reg
            .tool_prefix
            .clone()
            .unwrap_or_else(|| format!("{}.", reg.name));
        if prefix != old.tool_prefix {
            return Err(Error::invalid(
                "tool_prefix cannot change in place (agents and policies know its tools by name): delete the server and register it again",
            ));
        }
        // Who registered a server each user signs in to lists its tools; that stays.
        if let (AuthConfig::UserOauth(new), Ok(AuthConfig::UserOauth(before))) =
            (&mut auth, serde_json::from_str::<AuthConfig>(&old.auth))
        {
            if new.registered_by.is_none() {
                new.registered_by = before.registered_by.clone();
            }
        }
        let now = self.now();
        let row = ServerRow {
            transport: reg.transport.clone().unwrap_or_else(|| "http".into()),
            url: url.to_string(),
            auth: serde_json::to_string(&auth).map_err(|e| Error::internal(e.to_string()))?,
            timeout_ms: reg.timeout_ms.unwrap_or(DEFAULT_TIMEOUT_MS) as i64,
            max_concurrency: reg.max_concurrency.unwrap_or(DEFAULT_MAX_CONCURRENCY) as i64,
            auto_approve: reg.auto_approve.unwrap_or(false) as i64,
            launch: launch
                .as_ref()
                .map(serde_json::to_string)
                .transpose()
                .map_err(|e| Error::internal(e.to_string()))?,
            last_error: None,
            updated_at: now,
            ..old.clone()
        };
        let signs_in = auth.user_oauth().is_some();
        let live = self.new_live(&row, url, auth, launch);
        if !signs_in {
            if let Err(e) = self.listing(&row, &live).await {
                retire(&live);
                return Err(match e {
                    Error::Invalid(why) => Error::invalid(format!(
                        "cannot reach {} with the new settings: {why}",
                        row.name
                    )),
                    other => other,
                });
            }
        }
        if !store::mcp_servers::update_settings(self.db.pool(), &row).await? {
            retire(&live);
            return Err(Error::NotFound);
        }
        if let Some(before) = self
            .live
            .write()
            .expect("upstreams lock")
            .insert(row.id.clone(), live)
        {
            retire(&before);
        }
        tracing::info!(server = %row.id, name = %row.name, by = %admin.user_id, "MCP server settings changed");
        if !signs_in {
            self.refresh_row(&row).await?;
        } else {
            self.reload_project(&row.project_id).await?;
        }
        self.get(admin, id).await
    }
}

/// Approves a freshly listed tool when the file approved it as it is (or says nothing).
pub(super) fn approve_as_declared(
    row: &mut store::mcp_servers::ToolRow,
    approved: Option<&BTreeMap<String, String>>,
) {
    match approved {
        None => approve(row),
        Some(m) if m.get(&row.name) == Some(&row.fingerprint) => approve(row),
        Some(_) => row.status = ToolState::PendingReview,
    }
}
