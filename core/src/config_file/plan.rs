//! What applying a configuration file would change, and whether every entry of it passes the
//! checks its own endpoint makes: all problems are found before anything changes.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use serde_json::Value;

use super::{export, ConfigFile, PolicyEntry, ProviderEntry};
use crate::auth::Principal;
use crate::egress::validate_pattern;
use crate::integrations::IntegrationDef;
use crate::notify::WebhookConfig;
use crate::plugins::MAX_APPS_PER_PROJECT;
use crate::policy::{Policies, PolicyInput};
use crate::toolsets::ToolSetInput;
use crate::upstream::{DeclaredServer, ServerChange, MAX_SERVERS_PER_PROJECT};
use crate::workbench::Workbench;
use crate::{Error, Result};

/// What a change does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    Create,
    Update,
    /// Deleted and created again (an MCP server whose tool prefix changes).
    Replace,
    Delete,
}

impl Action {
    fn sign(self) -> char {
        match self {
            Action::Create => '+',
            Action::Update => '~',
            Action::Replace => '!',
            Action::Delete => '-',
        }
    }
}

/// One change, as a dry run shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Change {
    pub action: Action,
    /// setting, egress, policy, app, mcp_server, mcp_server_review or tool_set.
    pub kind: &'static str,
    pub name: String,
    /// What differs (fields of an update, tools of a review).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub fields: Vec<String>,
}

impl Change {
    /// One line of the diff: `+ policy read-only`, `~ mcp_server crm: url, timeout_ms`.
    pub fn line(&self) -> String {
        let mut line = format!("{} {} {}", self.action.sign(), self.kind, self.name);
        if !self.fields.is_empty() {
            line.push_str(": ");
            line.push_str(&self.fields.join(", "));
        }
        line
    }
}

/// One step of applying a file, with what it replaces (for its undo).
#[derive(Debug, Clone)]
pub(super) enum Step {
    Retention {
        to: Option<i64>,
        from: Option<i64>,
    },
    Webhook {
        to: Option<WebhookConfig>,
        from: Option<WebhookConfig>,
    },
    EmailLimit {
        to: Option<i64>,
        from: Option<i64>,
    },
    EgressAdd(String),
    EgressRemove(String),
    PolicyCreate(PolicyEntry),
    PolicyUpdate {
        id: String,
        to: PolicyEntry,
        from: PolicyEntry,
        fields: Vec<String>,
    },
    PolicyDelete {
        id: String,
        name: String,
    },
    AppCreate {
        name: String,
        definition: Value,
    },
    AppReplace {
        name: String,
        to: Value,
        from: Value,
        fields: Vec<String>,
    },
    AppDelete {
        id: String,
        name: String,
    },
    ServerRegister(Box<DeclaredServer>),
    ServerUpdate {
        id: String,
        to: Box<DeclaredServer>,
        from: Box<DeclaredServer>,
        fields: Vec<String>,
    },
    ServerReplace {
        id: String,
        to: Box<DeclaredServer>,
        /// The server as it is, registered again should the replacement fail.
        from: Box<DeclaredServer>,
        fields: Vec<String>,
    },
    ServerReviews {
        entry: Box<DeclaredServer>,
        what: Vec<String>,
    },
    ServerDelete {
        id: String,
        name: String,
    },
    ToolSetCreate(ToolSetInput),
    ToolSetUpdate {
        id: String,
        to: ToolSetInput,
        from: ToolSetInput,
        fields: Vec<String>,
    },
    ToolSetDelete {
        id: String,
        slug: String,
    },
    /// Registers a sign-in provider, or replaces one (`from`).
    ProviderPut {
        entry: Box<ProviderEntry>,
        from: Option<Box<ProviderEntry>>,
        fields: Vec<String>,
    },
    ProviderDelete {
        before: Box<ProviderEntry>,
    },
}

impl Step {
    pub(super) fn change(&self) -> Change {
        let c = |action, kind, name: &str, fields: &[String]| Change {
            action,
            kind,
            name: name.to_owned(),
            fields: fields.to_vec(),
        };
        match self {
            Step::Retention { .. } => c(Action::Update, "setting", "audit_retention_days", &[]),
            Step::Webhook { .. } => c(Action::Update, "setting", "webhook", &[]),
            Step::EmailLimit { .. } => c(Action::Update, "setting", "email_hourly_limit", &[]),
            Step::EgressAdd(p) => c(Action::Create, "egress", p, &[]),
            Step::EgressRemove(p) => c(Action::Delete, "egress", p, &[]),
            Step::PolicyCreate(p) => c(Action::Create, "policy", &p.name, &[]),
            Step::PolicyUpdate { to, fields, .. } => c(Action::Update, "policy", &to.name, fields),
            Step::PolicyDelete { name, .. } => c(Action::Delete, "policy", name, &[]),
            Step::AppCreate { name, .. } => c(Action::Create, "app", name, &[]),
            Step::AppReplace { name, fields, .. } => c(Action::Update, "app", name, fields),
            Step::AppDelete { name, .. } => c(Action::Delete, "app", name, &[]),
            Step::ServerRegister(s) => c(Action::Create, "mcp_server", s.name(), &[]),
            Step::ServerUpdate { to, fields, .. } => {
                c(Action::Update, "mcp_server", to.name(), fields)
            }
            Step::ServerReplace { to, fields, .. } => {
                c(Action::Replace, "mcp_server", to.name(), fields)
            }
            Step::ServerReviews { entry, what } => {
                c(Action::Update, "mcp_server_review", entry.name(), what)
            }
            Step::ServerDelete { name, .. } => c(Action::Delete, "mcp_server", name, &[]),
            Step::ToolSetCreate(t) => c(Action::Create, "tool_set", &t.slug, &[]),
            Step::ToolSetUpdate { to, fields, .. } => {
                c(Action::Update, "tool_set", &to.slug, fields)
            }
            Step::ToolSetDelete { slug, .. } => c(Action::Delete, "tool_set", slug, &[]),
            Step::ProviderPut {
                entry,
                from,
                fields,
            } => c(
                if from.is_some() {
                    Action::Update
                } else {
                    Action::Create
                },
                "sign_in_provider",
                &entry.slug,
                fields,
            ),
            Step::ProviderDelete { before } => {
                c(Action::Delete, "sign_in_provider", &before.slug, &[])
            }
        }
    }
}

/// The steps that make the project match a file, in the order they run: everything that can
/// be undone first (settings, additions, changes), deletions last.
pub(super) struct Plan {
    pub steps: Vec<Step>,
    pub unchanged: usize,
    /// What the file asks that stays as it is, and why.
    pub notes: Vec<String>,
}

fn duplicates<'a>(names: impl Iterator<Item = &'a str>) -> Vec<&'a str> {
    let mut seen = BTreeSet::new();
    let mut twice = BTreeSet::new();
    for n in names {
        if !seen.insert(n) {
            twice.insert(n);
        }
    }
    twice.into_iter().collect()
}

/// Top-level keys whose values differ between two JSON objects.
fn differing(a: &Value, b: &Value) -> Vec<String> {
    let (Some(a), Some(b)) = (a.as_object(), b.as_object()) else {
        return vec!["definition".into()];
    };
    let keys: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    keys.into_iter()
        .filter(|k| a.get(*k) != b.get(*k))
        .cloned()
        .collect()
}

/// Compares `file` with the caller's project and checks every entry that would change; any
/// problem refuses the whole file, with all problems listed.
pub(super) async fn plan(wb: &Workbench, who: &Principal, file: &ConfigFile) -> Result<Plan> {
    let current = export(wb, who).await?;
    let mut problems: Vec<String> = Vec::new();
    let mut steps: Vec<Step> = Vec::new();
    let mut deletions: Vec<Step> = Vec::new();
    let mut notes: Vec<String> = Vec::new();
    let mut unchanged = 0usize;

    if let Some(s) = &file.settings {
        let now = current.settings.clone().unwrap_or_default();
        if let Some(days) = s.audit_retention_days {
            match crate::audit::check_retention_days(days) {
                Err(e) => problems.push(format!("settings.audit_retention_days: {e}")),
                Ok(()) if now.audit_retention_days.flatten() != days => {
                    steps.push(Step::Retention {
                        to: days,
                        from: now.audit_retention_days.flatten(),
                    })
                }
                Ok(()) => unchanged += 1,
            }
        }
        if let Some(webhook) = &s.webhook {
            let checked = match webhook {
                None => Ok(None),
                Some(w) => wb.webhooks().check(who, w).await.map(Some),
            };
            match checked {
                Err(e) => problems.push(format!("settings.webhook: {e}")),
                Ok(w) if now.webhook.clone().flatten() != w => steps.push(Step::Webhook {
                    to: w,
                    from: now.webhook.flatten(),
                }),
                Ok(_) => unchanged += 1,
            }
        }
        if let Some(limit) = s.email_hourly_limit {
            match wb.email().check_hourly_limit(limit) {
                Err(e) => problems.push(format!("settings.email_hourly_limit: {e}")),
                Ok(()) if now.email_hourly_limit.flatten() != limit => {
                    steps.push(Step::EmailLimit {
                        to: limit,
                        from: now.email_hourly_limit.flatten(),
                    })
                }
                Ok(()) => unchanged += 1,
            }
        }
    }

    if let Some(patterns) = &file.egress {
        let have: BTreeSet<String> = current
            .egress
            .clone()
            .unwrap_or_default()
            .into_iter()
            .collect();
        let mut want = BTreeSet::new();
        for p in patterns {
            match validate_pattern(p) {
                Ok(p) => {
                    if !want.insert(p.clone()) {
                        problems.push(format!("egress: {p} is listed twice"));
                    }
                }
                Err(e) => problems.push(format!("egress {p:?}: {e}")),
            }
        }
        for p in &want {
            if have.contains(p) {
                unchanged += 1;
            } else {
                steps.push(Step::EgressAdd(p.clone()));
            }
        }
        for p in have.difference(&want) {
            deletions.push(Step::EgressRemove(p.clone()));
        }
    }

    if let Some(policies) = &file.policies {
        for name in duplicates(policies.iter().map(|p| p.name.as_str())) {
            problems.push(format!("policies: {name} is listed twice"));
        }
        if policies.iter().filter(|p| p.default).count() > 1 {
            problems.push("policies: more than one is the default".into());
        }
        let have = wb.policies().list(who).await?;
        for p in policies {
            let input = PolicyInput {
                name: p.name.clone(),
                tool_allowlist: p.tool_allowlist.clone(),
                limits: p.limits.clone(),
                default: p.default,
            };
            if let Err(e) = Policies::checked(&input) {
                problems.push(format!("policy {}: {e}", p.name));
                continue;
            }
            match have.iter().find(|h| h.name == p.name) {
                None => steps.push(Step::PolicyCreate(p.clone())),
                Some(h) => {
                    let from = PolicyEntry {
                        name: h.name.clone(),
                        default: h.default,
                        tool_allowlist: h.tool_allowlist.clone(),
                        limits: h.limits.clone(),
                    };
                    let mut fields = Vec::new();
                    if from.default != p.default {
                        fields.push("default".to_owned());
                    }
                    if from.tool_allowlist != p.tool_allowlist {
                        fields.push("tool_allowlist".to_owned());
                    }
                    if from.limits != p.limits {
                        fields.push("limits".to_owned());
                    }
                    if fields.is_empty() {
                        unchanged += 1;
                    } else {
                        steps.push(Step::PolicyUpdate {
                            id: h.id.clone(),
                            to: p.clone(),
                            from,
                            fields,
                        });
                    }
                }
            }
        }
        for h in have
            .iter()
            .filter(|h| !policies.iter().any(|p| p.name == h.name))
        {
            let keys = wb.policies().keys_using(who, &h.id).await?;
            if keys.is_empty() {
                deletions.push(Step::PolicyDelete {
                    id: h.id.clone(),
                    name: h.name.clone(),
                });
            } else {
                let names: Vec<String> = keys.iter().map(|(id, n)| format!("{n} ({id})")).collect();
                problems.push(format!(
                    "policy {} is not in the file but keys use it ({}): attach another policy to them first, or keep it in the file",
                    h.name,
                    names.join(", ")
                ));
            }
        }
    }

    if let Some(apps) = &file.apps {
        let have: BTreeMap<String, Value> = wb.apps().definitions(who).await?.into_iter().collect();
        let mut names = Vec::new();
        for (i, definition) in apps.iter().enumerate() {
            let def: IntegrationDef = match serde_json::from_value(definition.clone()) {
                Ok(d) => d,
                Err(e) => {
                    problems.push(format!("apps[{i}]: invalid app definition: {e}"));
                    continue;
                }
            };
            names.push(def.name.clone());
            let normal = serde_json::to_value(&def).map_err(|e| Error::internal(e.to_string()))?;
            match have.get(&def.name) {
                Some(stored) if *stored == normal => unchanged += 1,
                existing => {
                    let replacing = existing.map(|_| def.name.as_str());
                    if let Err(e) = wb.apps().check_definition(who, &normal, replacing).await {
                        problems.push(format!("app {}: {e}", def.name));
                        continue;
                    }
                    steps.push(match existing {
                        None => Step::AppCreate {
                            name: def.name.clone(),
                            definition: normal,
                        },
                        Some(stored) => Step::AppReplace {
                            name: def.name.clone(),
                            fields: differing(stored, &normal),
                            to: normal,
                            from: stored.clone(),
                        },
                    });
                }
            }
        }
        for name in duplicates(names.iter().map(String::as_str)) {
            problems.push(format!("apps: {name} is listed twice"));
        }
        if names.len() > MAX_APPS_PER_PROJECT {
            problems.push(format!(
                "apps: a project has at most {MAX_APPS_PER_PROJECT} apps; the file has {}",
                names.len()
            ));
        }
        for (name, _) in have.iter().filter(|(n, _)| !names.contains(n)) {
            if let Some(id) = wb.apps().id_of(who, name).await? {
                deletions.push(Step::AppDelete {
                    id,
                    name: name.clone(),
                });
            }
        }
    }

    if let Some(servers) = &file.mcp_servers {
        for name in duplicates(servers.iter().map(DeclaredServer::name)) {
            problems.push(format!("mcp_servers: {name} is listed twice"));
        }
        if servers.len() > MAX_SERVERS_PER_PROJECT {
            problems.push(format!(
                "mcp_servers: a project has at most {MAX_SERVERS_PER_PROJECT} servers; the file has {}",
                servers.len()
            ));
        }
        let have = current.mcp_servers.clone().unwrap_or_default();
        for entry in servers {
            let name = entry.name();
            let existing = have.iter().find(|h| h.name() == name);
            let change = match wb.upstreams().compare_declared(existing, entry) {
                Ok(c) => c,
                Err(e) => {
                    problems.push(format!("mcp_server {name}: {e}"));
                    continue;
                }
            };
            if change != ServerChange::Same {
                if let Err(e) = wb.upstreams().check_declared(who, entry).await {
                    problems.push(format!("mcp_server {name}: {e}"));
                    continue;
                }
            }
            let id = match existing {
                Some(_) => wb.upstreams().id_of(who, name).await?,
                None => None,
            };
            match (change, id) {
                (ServerChange::Register, _) => {
                    steps.push(Step::ServerRegister(Box::new(entry.clone())));
                    continue;
                }
                (ServerChange::Replace(fields), Some(id)) => {
                    steps.push(Step::ServerReplace {
                        id,
                        to: Box::new(entry.clone()),
                        from: Box::new(existing.cloned().expect("an existing server")),
                        fields,
                    });
                    continue;
                }
                (ServerChange::Update(fields), Some(id)) => steps.push(Step::ServerUpdate {
                    id,
                    to: Box::new(entry.clone()),
                    from: Box::new(existing.cloned().expect("an existing server")),
                    fields,
                }),
                (ServerChange::Same, _) => unchanged += 1,
                (_, None) => {
                    return Err(Error::Conflict(format!(
                        "the MCP server {name} was deleted meanwhile; apply again"
                    )))
                }
            }
            let reviews = wb.upstreams().compare_reviews(who, entry).await?;
            for tool in &reviews.stale {
                notes.push(format!("mcp_server {name}: {tool} changed on the server since the file approved it; it stays held for review"));
            }
            if !reviews.is_empty() {
                let mut what: Vec<String> = reviews
                    .approve
                    .iter()
                    .map(|t| format!("approve {t}"))
                    .collect();
                what.extend(reviews.side_effects.iter().map(|(t, s)| match s {
                    Some(s) => format!("{t} side_effects {}", s.as_str()),
                    None => format!("{t} side_effects as annotated"),
                }));
                what.extend(reviews.text.iter().flat_map(|(t, o)| {
                    let name = o.name.as_ref().map(|n| match n {
                        Some(n) => format!("{t} named {n}"),
                        None => format!("{t} named as upstream"),
                    });
                    let description = o.description.as_ref().map(|d| match d {
                        Some(_) => format!("{t} description"),
                        None => format!("{t} description as upstream"),
                    });
                    name.into_iter().chain(description)
                }));
                steps.push(Step::ServerReviews {
                    entry: Box::new(entry.clone()),
                    what,
                });
            }
        }
        for h in have
            .iter()
            .filter(|h| !servers.iter().any(|s| s.name() == h.name()))
        {
            if let Some(id) = wb.upstreams().id_of(who, h.name()).await? {
                deletions.push(Step::ServerDelete {
                    id,
                    name: h.name().to_owned(),
                });
            }
        }
    }

    if let Some(sets) = &file.tool_sets {
        for slug in duplicates(sets.iter().map(|s| s.slug.as_str())) {
            problems.push(format!("tool_sets: {slug} is listed twice"));
        }
        // Apps and servers the file creates or changes bring tools a set may name: such a set
        // is checked again when it is made, after them (and the apply is undone if it fails).
        let catalog_changes = steps.iter().any(|s| {
            matches!(
                s,
                Step::AppCreate { .. }
                    | Step::AppReplace { .. }
                    | Step::ServerRegister(_)
                    | Step::ServerUpdate { .. }
                    | Step::ServerReplace { .. }
                    | Step::ServerReviews { .. }
            )
        });
        // The project's sets by id, as a file holds them.
        let have: Vec<(String, ToolSetInput)> = wb
            .tool_sets()
            .list(who)
            .await?
            .into_iter()
            .map(|s| (s.id.clone(), ToolSetInput::from(s)))
            .collect();
        for set in sets {
            let set = set.normal();
            let existing = have.iter().find(|(_, h)| h.slug == set.slug);
            if existing.is_some_and(|(_, h)| *h == set) {
                unchanged += 1;
                continue;
            }
            if let Err(e) = wb.tool_sets().check(who, &set) {
                if catalog_changes {
                    notes.push(format!("tool_set {}: checked again after the apps and MCP servers above are applied ({e})", set.slug));
                } else {
                    problems.push(format!("tool_set {}: {e}", set.slug));
                    continue;
                }
            }
            match existing {
                Some((id, from)) => {
                    let mut fields = Vec::new();
                    if from.name != set.name {
                        fields.push("name".to_owned());
                    }
                    if from.description != set.description {
                        fields.push("description".to_owned());
                    }
                    if from.tools != set.tools {
                        fields.push("tools".to_owned());
                    }
                    steps.push(Step::ToolSetUpdate {
                        id: id.clone(),
                        to: set.clone(),
                        from: from.clone(),
                        fields,
                    });
                }
                None => steps.push(Step::ToolSetCreate(set.clone())),
            }
        }
        for (id, h) in have
            .iter()
            .filter(|(_, h)| !sets.iter().any(|s| s.slug == h.slug))
        {
            let keys = wb.tool_sets().keys_limited_to(who, &h.slug).await?;
            if !keys.is_empty() {
                let names: Vec<String> = keys.iter().map(|(id, n)| format!("{n} ({id})")).collect();
                problems.push(format!(
                    "tool_set {} is not in the file but keys are limited to it ({}): change or revoke them first, or keep it in the file",
                    h.slug,
                    names.join(", ")
                ));
            } else {
                deletions.push(Step::ToolSetDelete {
                    id: id.clone(),
                    slug: h.slug.clone(),
                });
            }
        }
    }

    if let Some(providers) = &file.sign_in_providers {
        for slug in duplicates(providers.iter().map(|p| p.slug.as_str())) {
            problems.push(format!("sign_in_providers: {slug} is listed twice"));
        }
        // The policies there will be: the file's, if it lists them, else the project's.
        let policy_names: BTreeSet<String> = match &file.policies {
            Some(ps) => ps.iter().map(|p| p.name.clone()).collect(),
            None => wb
                .policies()
                .list(who)
                .await?
                .into_iter()
                .map(|p| p.name)
                .collect(),
        };
        let have = current.sign_in_providers.clone().unwrap_or_default();
        for entry in providers {
            let entry = entry.normal();
            let mut ok = true;
            for name in entry.policy_names() {
                if !policy_names.contains(name) {
                    problems.push(format!(
                        "sign_in_provider {}: no policy is named {name:?}",
                        entry.slug
                    ));
                    ok = false;
                }
            }
            // The checks that need neither the database nor the provider (the registration
            // itself reads the provider's discovery document when it is applied).
            let input = entry.input(|name| Ok(name.to_owned()))?;
            for p in crate::sso::problems(&entry.slug, &input) {
                problems.push(format!("sign_in_provider {}: {p}", entry.slug));
                ok = false;
            }
            if !ok {
                continue;
            }
            match have.iter().find(|h| h.slug == entry.slug) {
                Some(h) if *h == entry => unchanged += 1,
                existing => {
                    let fields = match existing {
                        Some(h) => differing(
                            &serde_json::to_value(h).map_err(|e| Error::internal(e.to_string()))?,
                            &serde_json::to_value(&entry)
                                .map_err(|e| Error::internal(e.to_string()))?,
                        ),
                        None => Vec::new(),
                    };
                    steps.push(Step::ProviderPut {
                        entry: Box::new(entry.clone()),
                        from: existing.cloned().map(Box::new),
                        fields,
                    });
                }
            }
        }
        for h in have
            .iter()
            .filter(|h| !providers.iter().any(|p| p.slug == h.slug))
        {
            deletions.push(Step::ProviderDelete {
                before: Box::new(h.clone()),
            });
        }
    }

    if !problems.is_empty() {
        let n = problems.len();
        return Err(Error::invalid(format!(
            "the file was not applied ({n} problem{}): {}",
            if n == 1 { "" } else { "s" },
            problems.join("; ")
        )));
    }
    // Deletions run last: tool sets first (before the tools they name go), then servers
    // (their tools leave the catalog before apps' names are freed), sign-in providers (they may
    // map a policy that goes), policies after the keys' new policies exist.
    deletions.sort_by_key(|s| match s {
        Step::ToolSetDelete { .. } => 0,
        Step::ServerDelete { .. } => 1,
        Step::AppDelete { .. } => 2,
        Step::ProviderDelete { .. } => 3,
        Step::PolicyDelete { .. } => 4,
        _ => 5,
    });
    steps.extend(deletions);
    Ok(Plan {
        steps,
        unchanged,
        notes,
    })
}
