//! Custom apps: a project's own integrations, defined in the plugin format through
//! `POST /v1/apps` or the portal. Their tools join that project's catalog as `app:<id>`.
//! Their base URL is the project's choice, so their requests go through the SSRF guard
//! (private and metadata addresses refused unless the operator allows them).

use std::collections::HashMap;
use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;

use super::integration_tools;
use crate::auth::{Operation, Principal};
use crate::catalog::{Catalog, Tool, ToolSource};
use crate::clock::{rfc3339, Clock};
use crate::connections::Connections;
use crate::egress::GuardedClient;
use crate::ids::new_id;
use crate::integrations::{
    AppRegistry, AuthDef, Integration, IntegrationDef, Integrations, Outbound,
};
use crate::store::{self, apps::AppRow, Db};
use crate::vault::Vault;
use crate::{Error, Result};

/// At most this many apps per project, and tools per app: each rebuilds the project's catalog.
pub const MAX_APPS_PER_PROJECT: usize = 50;
pub const MAX_TOOLS_PER_APP: usize = 100;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AppInfo {
    pub id: String,
    pub object: &'static str,
    pub name: String,
    pub display_name: String,
    pub version: String,
    pub auth_type: &'static str,
    pub base_url: String,
    pub tools: Vec<String>,
    pub created_at: String,
    /// Why this stored app is not loaded (its tools are not in the catalog); `None` when it is.
    pub load_error: Option<String>,
}

fn info(row: &AppRow, def: &IntegrationDef, load_error: Option<String>) -> AppInfo {
    AppInfo {
        id: row.id.clone(),
        object: "app",
        name: def.name.clone(),
        display_name: def.display_name.clone(),
        version: def.version.clone(),
        auth_type: def.auth.kind(),
        base_url: def.base_url.clone(),
        tools: def.tools.iter().map(|t| t.name.clone()).collect(),
        created_at: rfc3339(row.created_at),
        load_error,
    }
}

/// A stored app whose definition no longer parses: shown by what the row still says.
fn unreadable(row: &AppRow, why: String) -> AppInfo {
    AppInfo {
        id: row.id.clone(),
        object: "app",
        name: row.name.clone(),
        display_name: row.name.clone(),
        version: String::new(),
        auth_type: "unknown",
        base_url: String::new(),
        tools: Vec::new(),
        created_at: rfc3339(row.created_at),
        load_error: Some(why),
    }
}

#[derive(Clone)]
pub struct Apps {
    db: Db,
    clock: Arc<dyn Clock>,
    registry: Arc<AppRegistry>,
    catalog: Arc<Catalog>,
    plugins: Arc<Integrations>,
    connections: Connections,
    vault: Vault,
    /// The guarded client every app talks through.
    outbound: Outbound,
    /// Fetches OpenAPI documents for import (address rules, checked redirects).
    fetcher: GuardedClient,
    /// One reload at a time, so an older read of the apps never overwrites a newer one.
    reloading: Arc<tokio::sync::Mutex<()>>,
}

impl Apps {
    /// The row a checked definition is stored as, under a new id.
    fn new_row(&self, admin: &Principal, def: &IntegrationDef) -> Result<AppRow> {
        Ok(AppRow {
            id: new_id("app"),
            project_id: admin.project_id.clone(),
            name: def.name.clone(),
            definition: serde_json::to_string(def).map_err(|e| Error::internal(e.to_string()))?,
            created_at: self.clock.now_ms(),
        })
    }

    #[allow(clippy::too_many_arguments)]
    pub fn new(
        db: Db,
        clock: Arc<dyn Clock>,
        registry: Arc<AppRegistry>,
        catalog: Arc<Catalog>,
        plugins: Arc<Integrations>,
        connections: Connections,
        vault: Vault,
        outbound: Outbound,
        fetcher: GuardedClient,
    ) -> Apps {
        Apps {
            db,
            clock,
            registry,
            catalog,
            plugins,
            connections,
            vault,
            outbound,
            fetcher,
            reloading: Arc::default(),
        }
    }

    pub(super) fn fetcher(&self) -> &GuardedClient {
        &self.fetcher
    }

    /// Whether a plugin or one of the project's apps is already called `name`.
    pub(super) fn name_taken(&self, project_id: &str, name: &str) -> bool {
        self.plugins.get(name).is_some() || self.registry.get(project_id, name).is_some()
    }

    /// The app's base URL and (OAuth) token URL parse and are not on an address the SSRF
    /// guard refuses.
    pub(super) fn check_destinations(&self, def: &IntegrationDef) -> Result<()> {
        let mut destinations = vec![("base_url", def.base_url.as_str())];
        if let AuthDef::Oauth2 { token_url, .. } = &def.auth {
            destinations.push(("auth.token_url", token_url.as_str()));
        }
        for (what, dest) in destinations {
            let u = url::Url::parse(dest).map_err(|e| Error::invalid(format!("{what}: {e}")))?;
            if let Some(reason) = self.outbound.blocked_reason(&u) {
                return Err(Error::invalid(format!(
                    "{what} points at a {reason}; apps must call public APIs"
                )));
            }
        }
        Ok(())
    }

    /// An app's integration and its catalog tools (input schemas compiled): everything that
    /// can fail about a definition fails here, before it is stored or when it is loaded.
    fn build(&self, app_id: &str, def: IntegrationDef) -> Result<(Arc<Integration>, Vec<Tool>)> {
        let integration = Arc::new(Integration::new(
            def,
            None,
            ToolSource::App(app_id.to_owned()),
            self.outbound.clone(),
        )?);
        let tools = integration_tools(&integration, &self.connections)?;
        Ok((integration, tools))
    }

    fn load(&self, row: &AppRow) -> Result<(Arc<Integration>, Vec<Tool>)> {
        let def = IntegrationDef::parse(&row.definition, &format!("app {}", row.id))?;
        self.build(&row.id, def)
    }

    /// Rebuilds a project's catalog from its apps in the database. An app that fails to load
    /// (a definition that no longer validates, a name another integration or tool now has) is
    /// skipped and its error kept for the Apps page and `GET /v1/apps`; the others load.
    pub async fn reload_project(&self, project_id: &str) -> Result<()> {
        let _one_at_a_time = self.reloading.lock().await;
        let rows = store::apps::list(self.db.pool(), project_id).await?;
        // Names taken by everything but this project's apps (built-ins, plugins, its MCP servers).
        let taken: std::collections::HashSet<String> = self
            .catalog
            .snapshot(project_id)
            .tools()
            .iter()
            .filter(|t| !matches!(t.spec.source, ToolSource::App(_)))
            .map(|t| t.name().to_owned())
            .collect();
        let mut integrations: Vec<Arc<Integration>> = Vec::new();
        let mut tools: Vec<Tool> = Vec::new();
        let mut failures = HashMap::new();
        for row in &rows {
            let loaded = self.load(row).and_then(|(i, app_tools)| {
                if self.plugins.get(i.name()).is_some()
                    || integrations.iter().any(|o| o.name() == i.name())
                {
                    return Err(Error::Conflict(format!(
                        "an integration named {} already exists",
                        i.name()
                    )));
                }
                if let Some(t) = app_tools.iter().find(|t| {
                    taken.contains(t.name()) || tools.iter().any(|o| o.name() == t.name())
                }) {
                    return Err(Error::Conflict(format!(
                        "a tool named {} already exists in this project",
                        t.name()
                    )));
                }
                Ok((i, app_tools))
            });
            match loaded {
                Ok((i, app_tools)) => {
                    tools.extend(app_tools);
                    integrations.push(i);
                }
                Err(e) => {
                    tracing::error!(app = %row.id, project = %project_id, error = %e, "custom app skipped");
                    failures.insert(row.id.clone(), e.to_string());
                }
            }
        }
        self.catalog.set_project_tools(project_id, tools)?;
        let mut ids: Vec<String> = rows.iter().map(|r| r.id.clone()).collect();
        ids.sort();
        self.registry.set(project_id, ids, integrations, failures);
        Ok(())
    }

    /// Loads the apps of every project whose set of apps differs from what this instance has
    /// loaded (at start, and periodically so instances converge; apps are never edited in
    /// place, so ids tell). Returns how many projects were reloaded.
    pub async fn reload_all(&self) -> Result<usize> {
        let mut stored: HashMap<String, Vec<String>> = HashMap::new();
        for (project, id) in store::apps::ids(self.db.pool()).await? {
            stored.entry(project).or_default().push(id);
        }
        let loaded = self.registry.loaded_ids();
        let mut changed: Vec<&String> = stored
            .iter()
            .filter(|(p, ids)| loaded.get(*p) != Some(ids))
            .map(|(p, _)| p)
            .collect();
        changed.extend(loaded.keys().filter(|p| !stored.contains_key(*p)));
        for p in &changed {
            self.reload_project(p).await?;
        }
        Ok(changed.len())
    }

    /// Creates an app from a definition. Refused: an OAuth app without its client id, or naming
    /// a client secret missing from the project's vault; a name or tool name that collides with
    /// the project's catalog (409); a base or token URL on a blocked address.
    pub async fn create(&self, admin: &Principal, definition: &Value) -> Result<AppInfo> {
        admin.require(Operation::AppsManage)?;
        let def = self.check_definition(admin, definition, None).await?;
        if store::apps::list(self.db.pool(), &admin.project_id)
            .await?
            .len()
            >= MAX_APPS_PER_PROJECT
        {
            return Err(Error::Conflict(format!("this project already has {MAX_APPS_PER_PROJECT} apps, the most it may have; delete one first")));
        }
        let row = self.new_row(admin, &def)?;
        store::apps::insert(self.db.pool(), &row)
            .await
            .map_err(|e| {
                if e.is_unique_violation() {
                    Error::Conflict(format!("an integration named {} already exists", def.name))
                } else {
                    e
                }
            })?;
        self.reload_project(&admin.project_id).await?;
        tracing::info!(app = %row.id, name = %def.name, by = %admin.user_id, "custom app created");
        Ok(info(
            &row,
            &def,
            self.registry.failure(&admin.project_id, &row.id),
        ))
    }

    /// Everything that can be wrong with a definition, checked before it is stored: its shape
    /// and tools (input schemas compiled), an OAuth client and its vault secret, its addresses,
    /// and names no other integration or tool of the project has (`replacing`: the app of the
    /// same name it replaces, whose names it may keep).
    pub async fn check_definition(
        &self,
        admin: &Principal,
        definition: &Value,
        replacing: Option<&str>,
    ) -> Result<IntegrationDef> {
        admin.require(Operation::AppsManage)?;
        let def: IntegrationDef = serde_json::from_value(definition.clone())
            .map_err(|e| Error::invalid(format!("invalid app definition: {e}")))?;
        def.validate()?;
        if def.tools.len() > MAX_TOOLS_PER_APP {
            return Err(Error::invalid(format!(
                "an app has at most {MAX_TOOLS_PER_APP} tools; this one has {}",
                def.tools.len()
            )));
        }
        if let AuthDef::Oauth2 {
            client_id,
            client_secret_vault,
            ..
        } = &def.auth
        {
            if client_id.as_deref().is_none_or(str::is_empty) {
                return Err(Error::invalid(
                    "an OAuth app needs auth.client_id (the client registered at the provider)",
                ));
            }
            if let Some(name) = client_secret_vault {
                if self
                    .vault
                    .reveal(&admin.project_id, std::slice::from_ref(name))
                    .await?
                    .is_empty()
                {
                    return Err(Error::invalid(format!(
                        "auth.client_secret_vault names {name}, which is not in this project's vault; add it on the Vault page first"
                    )));
                }
            }
        }
        if let Some(t) = def.tools.iter().find(|t| t.handler.is_some()) {
            return Err(Error::invalid(format!(
                "tool {}: custom apps describe requests; Rust handlers are for shipped plugins",
                t.name
            )));
        }
        self.check_destinations(&def)?;
        let replaced_id = match replacing {
            Some(name) if name == def.name => {
                store::apps::named(self.db.pool(), &admin.project_id, name)
                    .await?
                    .map(|r| r.id)
            }
            _ => None,
        };
        if replaced_id.is_none() && self.name_taken(&admin.project_id, &def.name) {
            return Err(Error::Conflict(format!(
                "an integration named {} already exists",
                def.name
            )));
        }
        let snapshot = self.catalog.snapshot(&admin.project_id);
        if let Some(t) = def.tools.iter().find(|t| {
            snapshot.get(&t.name).is_some_and(|existing| {
                !matches!((&existing.spec.source, &replaced_id), (ToolSource::App(a), Some(r)) if a == r)
            })
        }) {
            return Err(Error::Conflict(format!(
                "a tool named {} already exists in this project",
                t.name
            )));
        }
        // Validate completely (input schemas compiled) before anything is stored.
        self.build("app_check", def.clone())?;
        Ok(def)
    }

    /// Replaces the definition of the app called `name` (checked as creating it is). Users'
    /// connections to it stay; the app gets a new id, which tells every instance to reload it.
    pub async fn replace(
        &self,
        admin: &Principal,
        name: &str,
        definition: &Value,
    ) -> Result<AppInfo> {
        let def = self.check_definition(admin, definition, Some(name)).await?;
        if def.name != name {
            return Err(Error::invalid(format!(
                "the definition is called {}, not {name}",
                def.name
            )));
        }
        let row = self.new_row(admin, &def)?;
        let mut tx = self.db.begin_write().await?;
        let old = store::apps::named(&mut *tx, &admin.project_id, name)
            .await?
            .ok_or(Error::NotFound)?;
        store::apps::delete(&mut tx, &admin.project_id, &old.id).await?;
        store::apps::insert(&mut *tx, &row).await?;
        tx.commit().await?;
        self.reload_project(&admin.project_id).await?;
        tracing::info!(app = %row.id, replaced = %old.id, name = %def.name, by = %admin.user_id, "custom app replaced");
        Ok(info(
            &row,
            &def,
            self.registry.failure(&admin.project_id, &row.id),
        ))
    }

    /// Every app's definition as stored (parsed), by name: what a configuration export holds.
    pub async fn definitions(&self, admin: &Principal) -> Result<Vec<(String, Value)>> {
        admin.require(Operation::AppsManage)?;
        store::apps::list(self.db.pool(), &admin.project_id)
            .await?
            .into_iter()
            .map(|r| {
                let v: Value = serde_json::from_str(&r.definition).map_err(|e| {
                    Error::internal(format!(
                        "app {}: the stored definition does not parse: {e}",
                        r.id
                    ))
                })?;
                Ok((r.name, v))
            })
            .collect()
    }

    /// The id of the app called `name`.
    pub async fn id_of(&self, admin: &Principal, name: &str) -> Result<Option<String>> {
        admin.require(Operation::AppsRead)?;
        Ok(store::apps::named(self.db.pool(), &admin.project_id, name)
            .await?
            .map(|r| r.id))
    }

    /// The project's apps; whoever may not manage apps sees base URLs without userinfo,
    /// query or fragment and no load error text (D21).
    pub async fn list(&self, who: &Principal) -> Result<Vec<AppInfo>> {
        who.require(Operation::AppsRead)?;
        let manager = who.allows(Operation::AppsManage);
        let rows = store::apps::list(self.db.pool(), &who.project_id).await?;
        Ok(rows
            .iter()
            .map(
                |r| match serde_json::from_str::<IntegrationDef>(&r.definition) {
                    Ok(d) => info(r, &d, self.registry.failure(&who.project_id, &r.id)),
                    Err(e) => unreadable(
                        r,
                        format!("app {}: the stored definition does not parse: {e}", r.id),
                    ),
                },
            )
            .map(|mut a| {
                if !manager {
                    a.base_url = crate::egress::mask_url(&a.base_url);
                    if a.load_error.is_some() {
                        a.load_error = Some("this app does not load; an admin can see why".into());
                    }
                }
                a
            })
            .collect())
    }

    /// Deletes an app, every user's connection to it and its live proxy tokens.
    pub async fn delete(&self, admin: &Principal, id: &str) -> Result<()> {
        admin.require(Operation::AppsManage)?;
        let mut tx = self.db.begin_write().await?;
        let name = store::apps::delete(&mut tx, &admin.project_id, id)
            .await?
            .ok_or(Error::NotFound)?;
        // Credentials for an integration that no longer exists must not linger (nor come back
        // if an app of the same name is created later).
        let forgotten = store::connections::forget_integration(
            &mut tx,
            &admin.project_id,
            &name,
            self.clock.now_ms(),
        )
        .await?;
        tx.commit().await?;
        tracing::info!(app = %id, %name, by = %admin.user_id, connections = forgotten, "custom app deleted");
        self.reload_project(&admin.project_id).await
    }
}
