//! Server functions of the Policies page: the project's policies, saving one (create or
//! replace, from one pattern per line), deleting, and the preview of what a key may run.

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

use crate::AppError;

#[cfg(feature = "ssr")]
use crate::ssr;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PolicyItem {
    pub id: String,
    pub name: String,
    pub mode: String,
    pub allow: Vec<String>,
    pub deny: Vec<String>,
    pub require_confirmation: Vec<String>,
    pub default: bool,
    pub updated_at: String,
    /// Live keys using it, by name.
    pub keys: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyChoice {
    pub id: String,
    pub label: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoliciesData {
    pub policies: Vec<PolicyItem>,
    pub keys: Vec<KeyChoice>,
    pub can_manage: bool,
}

/// One tool as a key's policy sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PreviewRow {
    pub tool: String,
    /// `runs`, `confirm` or `denied`.
    pub decision: String,
    /// The deciding rule, e.g. `pol_… deny: crm.*`; empty when nothing decided (no policy).
    pub rule: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Preview {
    pub key: String,
    pub policy: String,
    pub rows: Vec<PreviewRow>,
}

#[server(endpoint = "policies_page")]
pub async fn policies_page() -> Result<PoliciesData, AppError> {
    let p = ssr::principal().await?;
    let wb = ssr::wb()?;
    let policies = wb.policies().list(&p).await?;
    let keys: Vec<_> = wb
        .accounts()
        .list_api_keys(&p)
        .await?
        .into_iter()
        .filter(|k| k.revoked_at.is_none())
        .collect();
    Ok(PoliciesData {
        policies: policies
            .into_iter()
            .map(|pol| PolicyItem {
                keys: keys
                    .iter()
                    .filter(|k| k.policy_id.as_deref() == Some(pol.id.as_str()))
                    .map(|k| k.name.clone())
                    .collect(),
                mode: serde_json::to_value(pol.tool_allowlist.mode)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default(),
                allow: pol.tool_allowlist.allow,
                deny: pol.tool_allowlist.deny,
                require_confirmation: pol.tool_allowlist.require_confirmation,
                id: pol.id,
                name: pol.name,
                default: pol.default,
                updated_at: pol.updated_at,
            })
            .collect(),
        keys: keys
            .into_iter()
            .map(|k| KeyChoice {
                label: format!("{} ({}…, {})", k.name, k.prefix, k.owner_email),
                id: k.id,
            })
            .collect(),
        can_manage: p.allows(workbench_core::auth::Operation::PoliciesManage),
    })
}

#[cfg(feature = "ssr")]
fn lines(text: &str) -> Vec<String> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Creates a policy (no `id`) or replaces one; patterns one per line.
#[server(endpoint = "save_policy")]
pub async fn save_policy(
    id: Option<String>,
    name: String,
    mode: String,
    allow: String,
    deny: String,
    require_confirmation: String,
    default: Option<String>,
) -> Result<(), AppError> {
    use workbench_core::policy::{Mode, PolicyInput, ToolAllowlist};
    let p = ssr::principal().await?;
    let mode = match mode.as_str() {
        "allowlist" => Mode::Allowlist,
        "open" => Mode::Open,
        _ => return Err(AppError::Message("mode must be allowlist or open".into())),
    };
    let input = PolicyInput {
        name,
        tool_allowlist: ToolAllowlist {
            mode,
            allow: lines(&allow),
            deny: lines(&deny),
            require_confirmation: lines(&require_confirmation),
        },
        default: default.is_some(),
    };
    let policies = ssr::wb()?.policies().clone();
    match id.filter(|i| !i.is_empty()) {
        Some(id) => policies.replace(&p, &id, &input).await?,
        None => policies.create(&p, &input).await?,
    };
    Ok(())
}

#[server(endpoint = "delete_policy")]
pub async fn delete_policy(id: String) -> Result<(), AppError> {
    let p = ssr::principal().await?;
    ssr::wb()?.policies().delete(&p, &id).await?;
    Ok(())
}

/// Attaches a policy to a key (empty: detach, the default applies).
#[server(endpoint = "set_key_policy")]
pub async fn set_key_policy(key_id: String, policy_id: String) -> Result<(), AppError> {
    let p = ssr::principal().await?;
    let policy = Some(policy_id).filter(|s| !s.is_empty());
    ssr::wb()?
        .policies()
        .attach(&p, &key_id, policy.as_deref())
        .await?;
    Ok(())
}

/// What a key of the project may run, must have confirmed, or is denied, with the rule.
#[server(endpoint = "policy_preview")]
pub async fn policy_preview(key_id: String) -> Result<Preview, AppError> {
    use workbench_core::policy::Decision;
    let p = ssr::principal().await?;
    p.require(workbench_core::auth::Operation::PoliciesManage)?;
    let wb = ssr::wb()?;
    let key = wb
        .accounts()
        .list_api_keys(&p)
        .await?
        .into_iter()
        .find(|k| k.id == key_id)
        .ok_or(workbench_core::Error::NotFound)?;
    let applied = wb
        .policies()
        .applied_to_key(&p.project_id, key.policy_id.as_deref())
        .await?;
    let rule = |r: &workbench_core::policy::Rule| {
        format!(
            "{} {}: {}",
            r.policy_id,
            r.list,
            r.pattern.clone().unwrap_or_else(|| "not listed".into())
        )
    };
    let rows = wb
        .engine()
        .snapshot(&p)
        .tools()
        .iter()
        .map(|t| {
            let (decision, rule) = match applied.decide(t.name()) {
                Decision::Run => ("runs", String::new()),
                Decision::Confirm(r) => ("confirm", rule(&r)),
                Decision::Deny(r) => ("denied", rule(&r)),
            };
            PreviewRow {
                tool: t.name().to_owned(),
                decision: decision.into(),
                rule,
            }
        })
        .collect();
    Ok(Preview {
        key: key.name,
        policy: applied
            .0
            .map(|p| format!("{} ({})", p.name, p.id))
            .unwrap_or_else(|| "no policy: every tool runs".into()),
        rows,
    })
}

/// What is wrong with one pattern list as typed (one pattern per line), for validation as you
/// type: `problems` would refuse the save; `unmatched` are valid patterns no tool of the
/// project has (yet), likely typos.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PatternCheck {
    pub problems: Vec<String>,
    pub unmatched: Vec<String>,
}

#[server(endpoint = "check_patterns")]
pub async fn check_patterns(text: String) -> Result<PatternCheck, AppError> {
    use workbench_core::policy::{pattern_matches, pattern_problem, MAX_PATTERNS};
    let p = ssr::principal().await?;
    let patterns = lines(&text);
    let mut check = PatternCheck::default();
    if patterns.len() > MAX_PATTERNS {
        check.problems.push(format!(
            "{} patterns; at most {MAX_PATTERNS}",
            patterns.len()
        ));
        return Ok(check);
    }
    let snapshot = ssr::wb()?.engine().snapshot(&p);
    for pattern in &patterns {
        match pattern_problem(pattern) {
            Some(problem) => check.problems.push(problem),
            None if !snapshot
                .tools()
                .iter()
                .any(|t| pattern_matches(pattern, t.name())) =>
            {
                check.unmatched.push(pattern.clone())
            }
            None => {}
        }
    }
    Ok(check)
}
