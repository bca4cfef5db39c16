//! Applying a checked plan: each step through the service that owns it (so every check,
//! cache reload and cross-instance notice is the one its endpoint makes), and, when a step
//! fails (an MCP server that stopped answering between check and registration), the steps
//! already made undone in reverse order.

use serde::Serialize;
use serde_json::Value;

use super::plan::{plan, Change, Step};
use super::ConfigFile;
use crate::auth::{Operation, Principal};
use crate::policy::PolicyInput;
use crate::toolsets::ToolSetInput;
use crate::upstream::DeclaredServer;
use crate::workbench::Workbench;
use crate::{Error, Result};

/// What applying a file did (or, on a dry run, would do).
#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    pub object: &'static str,
    pub dry_run: bool,
    pub changes: Vec<Change>,
    pub unchanged: usize,
    /// What the file asks that stays as it is, and why.
    pub notes: Vec<String>,
    /// The changes as a diff, one line each (`+` create, `~` update, `!` replace, `-` delete).
    pub diff: String,
}

fn policy_input(p: &super::PolicyEntry) -> PolicyInput {
    PolicyInput {
        name: p.name.clone(),
        tool_allowlist: p.tool_allowlist.clone(),
        limits: p.limits.clone(),
        default: p.default,
    }
}

/// The registration body of a file's entry.
fn body(s: &DeclaredServer) -> Value {
    Value::Object(s.registration.clone())
}

/// Makes the caller's project match `file` (or, with `dry_run`, says what that would change).
/// Every entry is checked before anything changes; a step that fails after that undoes the
/// steps before it.
pub async fn apply(
    wb: &Workbench,
    who: &Principal,
    file: &ConfigFile,
    dry_run: bool,
) -> Result<Outcome> {
    who.require(Operation::ConfigApply)?;
    let plan = plan(wb, who, file).await?;
    let changes: Vec<Change> = plan.steps.iter().map(Step::change).collect();
    let diff = changes
        .iter()
        .map(|c| format!("{}\n", c.line()))
        .collect::<String>();
    if !dry_run {
        let mut done: Vec<Undo> = Vec::new();
        for step in &plan.steps {
            match run(wb, who, step).await {
                Ok(undo) => done.push(undo),
                Err(e) => {
                    let change = step.change().line();
                    let mut undone = 0usize;
                    let mut stuck = Vec::new();
                    while let Some(u) = done.pop() {
                        match undo(wb, who, u).await {
                            Ok(()) => undone += 1,
                            Err(why) => stuck.push(why.to_string()),
                        }
                    }
                    tracing::warn!(by = %who.user_id, step = %change, error = %e, undone, "configuration apply failed and was undone");
                    let tail = if stuck.is_empty() {
                        format!("the {undone} changes made before it were undone")
                    } else {
                        format!(
                            "{undone} changes made before it were undone; these could not be: {}",
                            stuck.join("; ")
                        )
                    };
                    return Err(match e {
                        Error::Invalid(why) => Error::invalid(format!("{change}: {why}; {tail}")),
                        Error::Conflict(why) => Error::Conflict(format!("{change}: {why}; {tail}")),
                        other => Error::internal(format!("{change}: {other}; {tail}")),
                    });
                }
            }
        }
        tracing::info!(by = %who.user_id, changes = changes.len(), "configuration applied");
    }
    Ok(Outcome {
        object: "config_apply",
        dry_run,
        changes,
        unchanged: plan.unchanged,
        notes: plan.notes,
        diff,
    })
}

/// How to take one applied step back.
enum Undo {
    Nothing,
    Retention(Option<i64>),
    Webhook(Option<crate::notify::WebhookConfig>),
    EmailLimit(Option<i64>),
    EgressRemove(String),
    PolicyDelete(String),
    PolicyRestore(String, super::PolicyEntry),
    AppDelete(String),
    AppRestore(String, Value),
    ServerDelete(String),
    ServerRestore(String, Box<DeclaredServer>),
    /// A replaced server: the replacement is deleted and the server registered as it was.
    ServerReplaced(String, Box<DeclaredServer>),
    ToolSetDelete(String),
    ToolSetRestore(String, ToolSetInput),
    ToolSetCreate(ToolSetInput),
    ProviderDelete(String),
    ProviderRestore(Box<super::ProviderEntry>),
}

/// Registers (or replaces) a sign-in provider from a file entry, its policies looked up by name
/// now (the file may have just created them).
async fn put_provider(wb: &Workbench, who: &Principal, entry: &super::ProviderEntry) -> Result<()> {
    let policies = wb.policies().list(who).await?;
    let input = entry.input(|name| {
        policies
            .iter()
            .find(|p| p.name == name)
            .map(|p| p.id.clone())
            .ok_or_else(|| Error::invalid(format!("no policy is named {name:?}")))
    })?;
    wb.sso().put(who, &entry.slug, input).await.map(|_| ())
}

async fn run(wb: &Workbench, who: &Principal, step: &Step) -> Result<Undo> {
    Ok(match step {
        Step::Retention { to, from } => {
            wb.audit().set_retention_days(who, *to).await?;
            Undo::Retention(*from)
        }
        Step::Webhook { to, from } => {
            wb.webhooks().set(who, to.clone()).await?;
            Undo::Webhook(from.clone())
        }
        Step::EmailLimit { to, from } => {
            wb.email().set_hourly_limit(who, *to).await?;
            Undo::EmailLimit(*from)
        }
        Step::EgressAdd(p) => Undo::EgressRemove(wb.egress().add(who, p).await?),
        Step::EgressRemove(p) => {
            wb.egress().remove(who, p).await?;
            Undo::Nothing
        }
        Step::PolicyCreate(p) => {
            Undo::PolicyDelete(wb.policies().create(who, &policy_input(p)).await?.id)
        }
        Step::PolicyUpdate { id, to, from, .. } => {
            wb.policies().replace(who, id, &policy_input(to)).await?;
            Undo::PolicyRestore(id.clone(), from.clone())
        }
        Step::PolicyDelete { id, .. } => {
            wb.policies().delete(who, id).await?;
            Undo::Nothing
        }
        Step::AppCreate { definition, .. } => {
            Undo::AppDelete(wb.apps().create(who, definition).await?.id)
        }
        Step::AppReplace { name, to, from, .. } => {
            wb.apps().replace(who, name, to).await?;
            Undo::AppRestore(name.clone(), from.clone())
        }
        Step::AppDelete { id, .. } => {
            wb.apps().delete(who, id).await?;
            Undo::Nothing
        }
        Step::ServerRegister(entry) => {
            Undo::ServerDelete(wb.upstreams().register_declared(who, entry).await?.id)
        }
        Step::ServerUpdate { id, to, from, .. } => {
            wb.upstreams().update(who, id, &body(to)).await?;
            wb.upstreams().apply_reviews(who, to).await?;
            Undo::ServerRestore(id.clone(), from.clone())
        }
        Step::ServerReplace { id, to, from, .. } => {
            // Its users sign in again: the dry run said so (`!`).
            wb.upstreams().delete(who, id).await?;
            match wb.upstreams().register_declared(who, to).await {
                Ok(view) => Undo::ServerReplaced(view.id, from.clone()),
                Err(e) => {
                    // Not half-applied: the server comes back as it was (reviews included).
                    if let Err(again) = wb.upstreams().register_declared(who, from).await {
                        return Err(Error::internal(format!(
                            "{e}; and registering {} again as it was failed: {again}",
                            from.name()
                        )));
                    }
                    return Err(e);
                }
            }
        }
        Step::ServerReviews { entry, .. } => {
            wb.upstreams().apply_reviews(who, entry).await?;
            Undo::Nothing
        }
        Step::ServerDelete { id, .. } => {
            wb.upstreams().delete(who, id).await?;
            Undo::Nothing
        }
        Step::ToolSetCreate(set) => Undo::ToolSetDelete(wb.tool_sets().create(who, set).await?.id),
        Step::ToolSetUpdate { id, to, from, .. } => {
            wb.tool_sets().replace(who, id, to).await?;
            Undo::ToolSetRestore(id.clone(), from.clone())
        }
        Step::ToolSetDelete { id, .. } => {
            let before = wb.tool_sets().get(who, id).await?;
            wb.tool_sets().delete(who, id).await?;
            Undo::ToolSetCreate(before.into())
        }
        Step::ProviderPut { entry, from, .. } => {
            put_provider(wb, who, entry).await?;
            match from {
                Some(before) => Undo::ProviderRestore(before.clone()),
                None => Undo::ProviderDelete(entry.slug.clone()),
            }
        }
        Step::ProviderDelete { before } => {
            wb.sso().delete(who, &before.slug).await?;
            Undo::ProviderRestore(before.clone())
        }
    })
}

async fn undo(wb: &Workbench, who: &Principal, u: Undo) -> Result<()> {
    match u {
        Undo::Nothing => Ok(()),
        Undo::Retention(days) => wb.audit().set_retention_days(who, days).await,
        Undo::Webhook(w) => wb.webhooks().set(who, w).await.map(|_| ()),
        Undo::EmailLimit(l) => wb.email().set_hourly_limit(who, l).await,
        Undo::EgressRemove(p) => wb.egress().remove(who, &p).await,
        Undo::PolicyDelete(id) => wb.policies().delete(who, &id).await,
        Undo::PolicyRestore(id, p) => wb
            .policies()
            .replace(who, &id, &policy_input(&p))
            .await
            .map(|_| ()),
        Undo::AppDelete(id) => wb.apps().delete(who, &id).await,
        Undo::AppRestore(name, definition) => {
            wb.apps().replace(who, &name, &definition).await.map(|_| ())
        }
        Undo::ServerDelete(id) => wb.upstreams().delete(who, &id).await,
        Undo::ServerReplaced(id, before) => {
            wb.upstreams().delete(who, &id).await?;
            wb.upstreams()
                .register_declared(who, &before)
                .await
                .map(|_| ())
        }
        Undo::ServerRestore(id, before) => {
            wb.upstreams().update(who, &id, &body(&before)).await?;
            wb.upstreams().apply_reviews(who, &before).await
        }
        Undo::ToolSetDelete(id) => wb.tool_sets().delete(who, &id).await,
        Undo::ToolSetRestore(id, before) => {
            wb.tool_sets().replace(who, &id, &before).await.map(|_| ())
        }
        Undo::ToolSetCreate(before) => wb.tool_sets().create(who, &before).await.map(|_| ()),
        Undo::ProviderDelete(slug) => wb.sso().delete(who, &slug).await,
        Undo::ProviderRestore(before) => put_provider(wb, who, &before).await,
    }
}
