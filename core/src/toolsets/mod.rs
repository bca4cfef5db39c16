//! Tool sets (issue 33): an admin's curated list of the project's tools, published at its own
//! MCP endpoint (`/mcp/sets/{slug}`) where the tools are listed directly, each under the name,
//! description and fixed argument values chosen for the job. A set only maps names: every call
//! goes through the engine's one pipeline (policy, confirmations, vault, scrubbing, metering,
//! audit, which records the set). API keys may be limited to chosen sets (`limit_key`).

mod check;
mod items;
mod notices;

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

pub use check::{exposed_schema, valid_slug, MAX_ENTRIES};
pub use items::{ItemError, MAX_PROMPT_CHARS, MAX_READ_BYTES};
pub use notices::Heard;

use crate::audit::AuditLog;
use crate::auth::{Operation, Principal};
use crate::catalog::Tool;
use crate::clock::{rfc3339, Clock};
use crate::engine::{CallOptions, CallOutcome, Engine, FieldError, Invocation, ToolError};
use crate::ids::new_id;
use crate::store::{self, tool_sets::ToolSetRow, Db};
use crate::upstream::Upstreams;
use crate::{Error, Result};

/// Where a set's endpoint lives, below the public URL.
pub fn endpoint_path(slug: &str) -> String {
    format!("/mcp/sets/{slug}")
}

/// One tool of a set: the catalog tool, and how the set shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SetEntry {
    /// The tool's catalog name (`github.list_issues`).
    pub tool: String,
    /// The name the set's endpoint lists it under (default: the catalog name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The description the set's endpoint shows (default: the tool's own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Argument values every call through the set gets; the caller can neither see nor set them.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub fixed: Map<String, Value>,
}

impl SetEntry {
    /// The name the set's endpoint lists the tool under.
    pub fn exposed(&self) -> &str {
        self.name.as_deref().unwrap_or(&self.tool)
    }
}

/// A tool set as the API shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSet {
    pub id: String,
    pub object: String,
    pub slug: String,
    pub name: String,
    pub description: String,
    pub tools: Vec<SetEntry>,
    /// Whether the endpoint also publishes the prompts and resources of the MCP servers whose
    /// tools the set lists (`items.rs`).
    #[serde(default)]
    pub prompts_and_resources: bool,
    pub created_at: String,
    pub updated_at: String,
}

/// What an admin sends to create or replace a set (and a configuration file's entry).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolSetInput {
    pub slug: String,
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    pub tools: Vec<SetEntry>,
    /// Publish the prompts and resources of the MCP servers whose tools the set lists.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub prompts_and_resources: bool,
}

impl ToolSetInput {
    /// The set as it would be stored: names and descriptions trimmed, an empty description
    /// none (what a stored set reads back as, so a file and a project compare equal).
    pub fn normal(&self) -> ToolSetInput {
        let trimmed = |s: &str| s.trim().to_owned();
        ToolSetInput {
            slug: self.slug.clone(),
            name: trimmed(&self.name),
            description: trimmed(&self.description),
            tools: self
                .tools
                .iter()
                .map(|e| SetEntry {
                    tool: e.tool.clone(),
                    name: e.name.as_deref().map(trimmed),
                    description: e
                        .description
                        .as_deref()
                        .map(trimmed)
                        .filter(|d| !d.is_empty()),
                    fixed: e.fixed.clone(),
                })
                .collect(),
            prompts_and_resources: self.prompts_and_resources,
        }
    }
}

impl From<ToolSet> for ToolSetInput {
    fn from(s: ToolSet) -> ToolSetInput {
        ToolSetInput {
            slug: s.slug,
            name: s.name,
            description: s.description,
            tools: s.tools,
            prompts_and_resources: s.prompts_and_resources,
        }
    }
}

impl ToolSet {
    fn from_row(r: ToolSetRow) -> Result<ToolSet> {
        let tools: Vec<SetEntry> = serde_json::from_str(&r.tools)
            .map_err(|e| Error::internal(format!("tool set {} is unreadable: {e}", r.id)))?;
        Ok(ToolSet {
            id: r.id,
            object: "tool_set".into(),
            slug: r.slug,
            name: r.name,
            description: r.description,
            tools,
            prompts_and_resources: r.upstream_items != 0,
            created_at: rfc3339(r.created_at),
            updated_at: rfc3339(r.updated_at),
        })
    }

    /// The entry listed under `exposed`.
    pub fn entry(&self, exposed: &str) -> Option<&SetEntry> {
        self.tools.iter().find(|e| e.exposed() == exposed)
    }
}

/// A tool of a set as its endpoint lists it, for one caller.
#[derive(Debug, Clone)]
pub struct ExposedTool {
    pub entry: SetEntry,
    pub tool: Arc<Tool>,
    /// The tool's input schema without the fixed arguments.
    pub input_schema: Value,
}

impl ExposedTool {
    pub fn name(&self) -> &str {
        self.entry.exposed()
    }

    pub fn description(&self) -> &str {
        self.entry
            .description
            .as_deref()
            .unwrap_or(&self.tool.spec.description)
    }
}

/// A project's sets by slug, as read at one policy generation.
type Cached = (i64, Arc<HashMap<String, Arc<ToolSet>>>);

#[derive(Clone)]
pub struct ToolSets {
    db: Db,
    clock: Arc<dyn Clock>,
    engine: Engine,
    /// Where the prompts and resources a set publishes come from.
    upstreams: Upstreams,
    audit: AuditLog,
    cache: Arc<RwLock<HashMap<String, Cached>>>,
}

impl ToolSets {
    pub fn new(
        db: Db,
        clock: Arc<dyn Clock>,
        engine: Engine,
        upstreams: Upstreams,
        audit: AuditLog,
    ) -> ToolSets {
        ToolSets {
            db,
            clock,
            engine,
            upstreams,
            audit,
            cache: Default::default(),
        }
    }

    /// The project's sets: from memory while the project's policy generation (which every set
    /// change bumps, and which the caller's key was read with) stands.
    async fn project(&self, who: &Principal) -> Result<Arc<HashMap<String, Arc<ToolSet>>>> {
        let generation = match who.policy_generation {
            Some(g) => g,
            None => store::policies::generation(self.db.pool(), &who.project_id).await?,
        };
        if let Some((g, sets)) = self
            .cache
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&who.project_id)
        {
            if *g == generation {
                return Ok(sets.clone());
            }
        }
        let mut sets = HashMap::new();
        for row in store::tool_sets::list(self.db.pool(), &who.project_id).await? {
            match ToolSet::from_row(row) {
                Ok(s) => {
                    sets.insert(s.slug.clone(), Arc::new(s));
                }
                // Sets are checked before they are stored; one that no longer reads is logged
                // and its endpoint answers not found.
                Err(e) => tracing::error!(error = %e, "a stored tool set cannot be read"),
            }
        }
        let sets = Arc::new(sets);
        let mut cache = self.cache.write().unwrap_or_else(|e| e.into_inner());
        if cache
            .get(&who.project_id)
            .is_none_or(|(g, _)| *g <= generation)
        {
            cache.insert(who.project_id.clone(), (generation, sets.clone()));
        }
        Ok(sets)
    }

    /// The set at `slug` as `who` may use it: `NotFound` when there is none, or when the
    /// caller's key is limited to other sets (the same answer, so a limited key cannot probe).
    pub async fn endpoint(&self, who: &Principal, slug: &str) -> Result<Arc<ToolSet>> {
        who.require(Operation::ToolSetCall)?;
        if who
            .tool_sets
            .as_ref()
            .is_some_and(|only| !only.iter().any(|s| s == slug))
        {
            return Err(Error::NotFound);
        }
        self.project(who)
            .await?
            .get(slug)
            .cloned()
            .ok_or(Error::NotFound)
    }

    /// The set's tools `who` may run (now or after a confirmation), in the set's order: tools
    /// gone from the catalog or hidden by the caller's policy are left out.
    pub async fn tools(&self, who: &Principal, set: &ToolSet) -> Result<Vec<ExposedTool>> {
        let names: Vec<&str> = set.tools.iter().map(|e| e.tool.as_str()).collect();
        let found = self.engine.visible(who, &names).await?;
        Ok(set
            .tools
            .iter()
            .zip(found)
            .filter_map(|(entry, tool)| {
                let tool = tool?;
                Some(ExposedTool {
                    input_schema: exposed_schema(&tool.spec.input_schema, &entry.fixed),
                    entry: entry.clone(),
                    tool,
                })
            })
            .collect())
    }

    /// Runs the set's tool listed as `exposed` with the caller's arguments and the set's fixed
    /// values, through the engine's pipeline; the record names the set. A name the set does not
    /// list, or a fixed argument the caller tries to set, never reaches the engine.
    pub async fn call(
        &self,
        who: &Principal,
        set: &ToolSet,
        exposed: &str,
        args: Map<String, Value>,
        mut opts: CallOptions,
    ) -> std::result::Result<CallOutcome, ToolError> {
        let Some(entry) = set.entry(exposed) else {
            return Err(ToolError::NotFound {
                tool: exposed.to_owned(),
                integration: None,
            });
        };
        let mut merged = args;
        if let Some(k) = entry.fixed.keys().find(|k| merged.contains_key(*k)) {
            return Err(ToolError::InvalidArguments {
                errors: vec![FieldError {
                    path: format!("/{}", k.replace('~', "~0").replace('/', "~1")),
                    message: format!("{k:?} is set by this tool set and cannot be given"),
                }],
            });
        }
        merged.extend(entry.fixed.clone());
        opts.tool_set = Some(set.slug.clone());
        Ok(self
            .engine
            .run(
                who,
                Invocation {
                    tool: entry.tool.clone(),
                    args: Value::Object(merged),
                },
                &opts,
            )
            .await)
    }

    pub async fn list(&self, who: &Principal) -> Result<Vec<ToolSet>> {
        who.require(Operation::ToolSetsRead)?;
        let mut sets: Vec<ToolSet> = self
            .project(who)
            .await?
            .values()
            .map(|s| ToolSet::clone(s))
            .collect();
        sets.sort_by(|a, b| a.slug.cmp(&b.slug));
        Ok(sets)
    }

    pub async fn get(&self, who: &Principal, id: &str) -> Result<ToolSet> {
        who.require(Operation::ToolSetsRead)?;
        ToolSet::from_row(
            store::tool_sets::get(self.db.pool(), &who.project_id, id)
                .await?
                .ok_or(Error::NotFound)?,
        )
    }

    /// Checks a set whole against the project's catalog as `who` sees it.
    fn checked(&self, who: &Principal, input: &ToolSetInput) -> Result<check::Checked> {
        check::input(input, &self.engine.snapshot(who))
    }

    /// Whether `create` or `replace` would take `input` (a configuration file's check).
    pub fn check(&self, who: &Principal, input: &ToolSetInput) -> Result<()> {
        who.require(Operation::ToolSetsManage)?;
        self.checked(who, input).map(|_| ())
    }

    /// The live keys limited to the set at `slug`: `(id, name)`.
    pub async fn keys_limited_to(
        &self,
        who: &Principal,
        slug: &str,
    ) -> Result<Vec<(String, String)>> {
        store::tool_sets::keys_limited_to(self.db.pool(), &who.project_id, slug).await
    }

    pub async fn create(&self, who: &Principal, input: &ToolSetInput) -> Result<ToolSet> {
        who.require(Operation::ToolSetsManage)?;
        let c = self.checked(who, input)?;
        let now = self.clock.now_ms();
        let row = ToolSetRow {
            id: new_id("tset"),
            project_id: who.project_id.clone(),
            slug: c.slug,
            name: c.name,
            description: c.description,
            tools: c.tools,
            created_at: now,
            updated_at: now,
            upstream_items: c.prompts_and_resources as i64,
        };
        let mut tx = self.db.begin_write().await?;
        if store::tool_sets::list(&mut *tx, &who.project_id)
            .await?
            .iter()
            .any(|s| s.slug == row.slug)
        {
            return Err(Error::Conflict(format!(
                "a tool set at /mcp/sets/{} exists; pick another slug",
                row.slug
            )));
        }
        store::tool_sets::insert(&mut *tx, &row).await?;
        store::policies::bump_generation(&mut *tx, &who.project_id).await?;
        tx.commit().await?;
        self.db.changed();
        tracing::info!(tool_set = %row.slug, by = %who.user_id, "tool set created");
        ToolSet::from_row(row)
    }

    /// Replaces a set's name, description and tools (PUT). The slug is the endpoint's address
    /// and what keys are limited to, so it cannot change.
    pub async fn replace(
        &self,
        who: &Principal,
        id: &str,
        input: &ToolSetInput,
    ) -> Result<ToolSet> {
        who.require(Operation::ToolSetsManage)?;
        let c = self.checked(who, input)?;
        let mut tx = self.db.begin_write().await?;
        let existing = store::tool_sets::get(&mut *tx, &who.project_id, id)
            .await?
            .ok_or(Error::NotFound)?;
        if existing.slug != c.slug {
            return Err(Error::invalid(format!(
                "slug cannot change (it is the endpoint's address, /mcp/sets/{}); create a new set instead",
                existing.slug
            )));
        }
        let row = ToolSetRow {
            name: c.name,
            description: c.description,
            tools: c.tools,
            updated_at: self.clock.now_ms(),
            upstream_items: c.prompts_and_resources as i64,
            ..existing
        };
        store::tool_sets::update(&mut *tx, &row).await?;
        store::policies::bump_generation(&mut *tx, &who.project_id).await?;
        tx.commit().await?;
        self.db.changed();
        tracing::info!(tool_set = %row.slug, by = %who.user_id, "tool set replaced");
        ToolSet::from_row(row)
    }

    /// Deletes a set; refused while a live key is limited to it.
    pub async fn delete(&self, who: &Principal, id: &str) -> Result<()> {
        who.require(Operation::ToolSetsManage)?;
        let mut tx = self.db.begin_write().await?;
        let existing = store::tool_sets::get(&mut *tx, &who.project_id, id)
            .await?
            .ok_or(Error::NotFound)?;
        let users: Vec<String> =
            store::tool_sets::keys_limited_to(&mut *tx, &who.project_id, &existing.slug)
                .await?
                .into_iter()
                .map(|(id, name)| format!("{name} ({id})"))
                .collect();
        if !users.is_empty() {
            return Err(Error::Conflict(format!(
                "keys are limited to this set: {}; change or revoke them first",
                users.join(", ")
            )));
        }
        store::tool_sets::delete(&mut *tx, &who.project_id, id).await?;
        store::policies::bump_generation(&mut *tx, &who.project_id).await?;
        tx.commit().await?;
        self.db.changed();
        tracing::info!(tool_set = %existing.slug, by = %who.user_id, "tool set deleted");
        Ok(())
    }

    /// Checks that every slug names a set of the project (before a key is made with them).
    pub async fn check_slugs(&self, who: &Principal, slugs: &[String]) -> Result<()> {
        if slugs.is_empty() || slugs.len() > MAX_ENTRIES {
            return Err(Error::invalid(format!(
                "tool_sets must list 1 to {MAX_ENTRIES} set slugs, or be null for no limit"
            )));
        }
        let sets = store::tool_sets::list(self.db.pool(), &who.project_id).await?;
        for slug in slugs {
            if !sets.iter().any(|s| &s.slug == slug) {
                return Err(Error::invalid(format!("no tool set has the slug {slug:?}")));
            }
        }
        Ok(())
    }

    /// Limits a key to the sets in `slugs` (`None`: no limit). The next call of the key, on
    /// any instance, is under the new limit.
    pub async fn limit_key(
        &self,
        who: &Principal,
        key_id: &str,
        slugs: Option<&[String]>,
    ) -> Result<()> {
        who.require(Operation::ApiKeysManage)?;
        let json = match slugs {
            Some(s) => {
                self.check_slugs(who, s).await?;
                let mut s = s.to_vec();
                s.sort();
                s.dedup();
                Some(serde_json::to_string(&s).map_err(|e| Error::internal(e.to_string()))?)
            }
            None => None,
        };
        if !store::tool_sets::limit_key(self.db.pool(), &who.project_id, key_id, json.as_deref())
            .await?
        {
            return Err(Error::NotFound);
        }
        self.db.changed();
        tracing::info!(key_id, tool_sets = ?slugs, by = %who.user_id, "key's tool sets changed");
        Ok(())
    }
}
