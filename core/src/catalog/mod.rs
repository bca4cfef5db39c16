//! The tool catalog: one registry of every tool a project can reach, whatever its source
//! (built-in, plugin integration, upstream MCP server, custom app), with compiled input schemas
//! and a search index. Callers take an immutable `Snapshot` for a project and work on it, so a
//! registration never changes a catalog under a running request.

mod credential;
mod handler;
pub mod names;
pub mod search;

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, RwLock};

use serde_json::Value;

use crate::{Error, Result};
pub use credential::Credential;
pub use handler::{
    CallContext, ClientRelay, ConnectionSource, HandlerError, ScrubbedRelay, ToolHandler,
};
pub use names::{name_char, ToolName, MAX_TOOL_NAME_CHARS};
use search::{Found, SearchDoc, SearchIndex};

pub use workbench_model::catalog::{SideEffects, ToolStatus};

/// Characters of a description an admin writes for a tool (a tool set's, an override's), at
/// most.
pub const MAX_DESCRIPTION_CHARS: usize = 4000;

/// An admin's description of a tool or a tool set: at most `MAX_DESCRIPTION_CHARS` printable
/// characters (line breaks and tabs allowed); `field` names it in the refusal.
pub fn check_description(field: &str, s: &str) -> Result<()> {
    if s.chars().count() > MAX_DESCRIPTION_CHARS
        || s.chars().any(|c| c.is_control() && c != '\n' && c != '\t')
    {
        return Err(Error::invalid(format!(
            "{field} must be at most {MAX_DESCRIPTION_CHARS} printable characters"
        )));
    }
    Ok(())
}

/// Where a tool comes from; rendered as `builtin`, `plugin:<integration>`, `mcp:<server id>`,
/// `app:<app id>`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ToolSource {
    Builtin,
    Plugin(String),
    Mcp(String),
    App(String),
}

impl ToolSource {
    /// The tool is the same code on every project (a built-in or a plugin tool), unlike an
    /// upstream MCP server's or a custom app's, which are one project's own.
    pub fn is_shared(&self) -> bool {
        matches!(self, ToolSource::Builtin | ToolSource::Plugin(_))
    }
}

impl fmt::Display for ToolSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ToolSource::Builtin => f.write_str("builtin"),
            ToolSource::Plugin(i) => write!(f, "plugin:{i}"),
            ToolSource::Mcp(id) => write!(f, "mcp:{id}"),
            ToolSource::App(id) => write!(f, "app:{id}"),
        }
    }
}

/// A tool's public definition.
#[derive(Debug, Clone)]
pub struct ToolSpec {
    pub name: ToolName,
    pub source: ToolSource,
    /// The owning integration: what `connect` takes and `/rest/{integration}` selects.
    pub integration: String,
    pub description: String,
    pub input_schema: Value,
    pub output_schema: Option<Value>,
    pub side_effects: SideEffects,
    /// Arguments are taken literally: no `{{…}}` resolution (the vault tools take names and
    /// values as typed, D7/D8).
    pub literal_args: bool,
    /// An argument that carries a secret value, scrubbed from results and records under the
    /// name another argument gives (`vault_set`'s `value`, named by `name`).
    pub secret_arg: Option<SecretArg>,
    /// The arguments leave for recipients the project does not control (email.send): a
    /// `{{vault:…}}` reference is refused before anything runs, so no secret can be mailed out.
    pub no_vault_refs: bool,
}

/// Which arguments of a call name and carry a secret value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SecretArg {
    pub name: &'static str,
    pub value: &'static str,
}

/// Whether a tool can run now and, when it cannot, why: the status and the words every surface
/// (search_tools, get_tool_schema, REST, the portal, a call's UNAVAILABLE error) shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Availability {
    Available,
    /// Lowercase, saying why and, where someone can act, who and how (after a `;`).
    Unavailable(String),
}

impl Availability {
    pub fn status(&self) -> ToolStatus {
        match self {
            Availability::Available => ToolStatus::Available,
            Availability::Unavailable(_) => ToolStatus::Unavailable,
        }
    }

    /// Why the tool cannot run; `None` when it can.
    pub fn reason(&self) -> Option<&str> {
        match self {
            Availability::Available => None,
            Availability::Unavailable(r) => Some(r),
        }
    }
}

/// A tool ready to run: its spec, compiled input validator and handler.
pub struct Tool {
    pub spec: ToolSpec,
    /// Why the tool cannot run whatever happens meanwhile, as its source decided when it built
    /// it (vanished upstream, held for review, its configuration missing).
    unavailable: Option<String>,
    pub(crate) validator: jsonschema::Validator,
    pub(crate) handler: Arc<dyn ToolHandler>,
    /// The user's connection this tool needs before it can run (plugins and apps with auth).
    pub(crate) connection: Option<Arc<dyn ConnectionSource>>,
}

impl fmt::Debug for Tool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tool")
            .field("name", &self.spec.name)
            .field("unavailable", &self.unavailable)
            .finish()
    }
}

impl Tool {
    /// Compiles the input schema (remote and file `$ref`s are never fetched) and pairs it with
    /// the handler. A schema that does not compile is refused with the tool's name.
    pub fn new(spec: ToolSpec, handler: Arc<dyn ToolHandler>) -> Result<Tool> {
        if spec.input_schema.get("type").and_then(Value::as_str) != Some("object") {
            return Err(Error::invalid(format!(
                "tool {}: input_schema must be a JSON Schema of type object",
                spec.name
            )));
        }
        let validator = jsonschema::options()
            .should_validate_formats(true)
            .build(&spec.input_schema)
            .map_err(|e| {
                Error::invalid(format!("tool {}: invalid input_schema: {e}", spec.name))
            })?;
        Ok(Tool {
            spec,
            unavailable: None,
            validator,
            handler,
            connection: None,
        })
    }

    /// The tool needs the user's connection from `source` before it runs.
    pub fn with_connection(mut self, source: Arc<dyn ConnectionSource>) -> Tool {
        self.connection = Some(source);
        self
    }

    /// The integration whose connection the tool needs, if any.
    pub fn connection(&self) -> Option<&Arc<dyn ConnectionSource>> {
        self.connection.as_ref()
    }

    pub fn name(&self) -> &str {
        self.spec.name.as_str()
    }

    /// The tool stays in the catalog but cannot run, for `reason` (lowercase; what someone
    /// must do after a `;`). A call answers UNAVAILABLE with it.
    pub fn unavailable_because(mut self, reason: impl Into<String>) -> Tool {
        self.unavailable = Some(reason.into());
        self
    }

    /// Whether the tool can run right now, and why not: what its source decided when it built
    /// the tool first, then what its handler says now (an upstream server whose circuit
    /// breaker is open).
    pub fn availability(&self) -> Availability {
        match self
            .unavailable
            .clone()
            .or_else(|| self.handler.unavailable())
        {
            Some(reason) => Availability::Unavailable(reason),
            None => Availability::Available,
        }
    }

    /// The status right now (`availability` without the reason).
    pub fn current_status(&self) -> ToolStatus {
        self.availability().status()
    }
}

/// An immutable view of the tools one project can reach, with their search index.
pub struct Snapshot {
    tools: Vec<Arc<Tool>>,
    by_name: HashMap<String, usize>,
    index: SearchIndex,
}

impl Snapshot {
    fn build(tools: Vec<Arc<Tool>>) -> Result<Snapshot> {
        let mut by_name = HashMap::with_capacity(tools.len());
        for (i, t) in tools.iter().enumerate() {
            if by_name.insert(t.name().to_owned(), i).is_some() {
                return Err(Error::Conflict(format!(
                    "tool name {} is registered twice",
                    t.name()
                )));
            }
        }
        let params: Vec<String> = tools
            .iter()
            .map(|t| search::param_text(&t.spec.input_schema))
            .collect();
        let docs: Vec<SearchDoc> = tools
            .iter()
            .zip(&params)
            .map(|(t, params)| SearchDoc {
                name: t.spec.name.as_str(),
                integration: &t.spec.integration,
                description: &t.spec.description,
                params,
            })
            .collect();
        let index = SearchIndex::build(&docs);
        Ok(Snapshot {
            tools,
            by_name,
            index,
        })
    }

    pub fn get(&self, name: &str) -> Option<&Arc<Tool>> {
        self.by_name.get(name).map(|i| &self.tools[*i])
    }

    pub fn tools(&self) -> &[Arc<Tool>] {
        &self.tools
    }

    /// Search among the tools `visible` admits: the hits best first, with their calibrated
    /// scores, and whether even the best is unlikely to fit.
    pub fn search(
        &self,
        query: &str,
        limit: usize,
        visible: impl Fn(&Tool) -> bool,
    ) -> (Vec<(Arc<Tool>, f32)>, bool) {
        let Found { hits, no_match } = self.index.search(query, limit, |d| visible(&self.tools[d]));
        let hits = hits
            .into_iter()
            .map(|h| (self.tools[h.doc].clone(), h.score))
            .collect();
        (hits, no_match)
    }
}

/// The registry. Global tools (built-ins, plugins) are shared by every project; per-project
/// sources (its custom apps, its upstream MCP servers) register on top of them, each replaced
/// as a whole when it changes.
pub struct Catalog {
    global: RwLock<Arc<Snapshot>>,
    /// Projects with tools of their own: each source's tools, and the snapshot of global tools
    /// plus all of them.
    projects: RwLock<HashMap<String, ProjectTools>>,
    /// Held by whoever replaces a project's tools: changes are made one at a time, while
    /// searches and calls go on reading the current snapshots.
    writer: std::sync::Mutex<()>,
}

struct ProjectTools {
    sources: std::collections::BTreeMap<String, Vec<Arc<Tool>>>,
    snapshot: Arc<Snapshot>,
}

/// The source key of a project's custom apps.
pub const APPS_SOURCE: &str = "apps";

impl Catalog {
    pub fn new(tools: Vec<Tool>) -> Result<Catalog> {
        let snapshot = Snapshot::build(tools.into_iter().map(Arc::new).collect())?;
        Ok(Catalog {
            global: RwLock::new(Arc::new(snapshot)),
            projects: RwLock::new(HashMap::new()),
            writer: std::sync::Mutex::new(()),
        })
    }

    /// The tools `project_id` can reach right now.
    pub fn snapshot(&self, project_id: &str) -> Arc<Snapshot> {
        if let Some(p) = self
            .projects
            .read()
            .expect("catalog lock poisoned")
            .get(project_id)
        {
            return p.snapshot.clone();
        }
        self.global.read().expect("catalog lock poisoned").clone()
    }

    /// Replaces a project's custom-app tools.
    pub fn set_project_tools(&self, project_id: &str, tools: Vec<Tool>) -> Result<()> {
        self.set_source_tools(project_id, APPS_SOURCE, tools)
    }

    /// Replaces the tools one source of a project contributes (none: the source is gone). A
    /// name that collides with another tool of the project is refused and nothing changes.
    pub fn set_source_tools(&self, project_id: &str, source: &str, tools: Vec<Tool>) -> Result<()> {
        let _writer = self.writer.lock().expect("catalog lock poisoned");
        let global = self.global.read().expect("catalog lock poisoned").clone();
        let mut sources = self
            .projects
            .read()
            .expect("catalog lock poisoned")
            .get(project_id)
            .map(|p| p.sources.clone())
            .unwrap_or_default();
        if tools.is_empty() {
            sources.remove(source);
        } else {
            sources.insert(source.to_owned(), tools.into_iter().map(Arc::new).collect());
        }
        if sources.is_empty() {
            self.projects
                .write()
                .expect("catalog lock poisoned")
                .remove(project_id);
            return Ok(());
        }
        let mut all: Vec<Arc<Tool>> = global.tools().to_vec();
        for t in sources.values() {
            all.extend(t.iter().cloned());
        }
        // Built (search index included) without holding the lock readers take.
        let snapshot = Arc::new(Snapshot::build(all)?);
        self.projects
            .write()
            .expect("catalog lock poisoned")
            .insert(project_id.to_owned(), ProjectTools { sources, snapshot });
        Ok(())
    }
}
