//! Server functions of the Policies page: the project's policies, saving one (create or
//! replace, from one pattern per line), deleting, and the preview of what a key may run.

use leptos::prelude::*;

use crate::AppError;
pub use workbench_model::policy::{
    KeyChoice, Mode, PatternCheck, PoliciesData, PolicyItem, Preview, PreviewRow, Verdict,
};

#[cfg(feature = "ssr")]
use crate::ssr;

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
                mode: pol.tool_allowlist.mode,
                allow: pol.tool_allowlist.allow,
                deny: pol.tool_allowlist.deny,
                require_confirmation: pol.tool_allowlist.require_confirmation,
                limits: pol.limits.iter().map(ToString::to_string).collect(),
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

/// Creates a policy (no `id`) or replaces one; patterns one per line, limits one per line
/// (`limits` left out: a replaced policy keeps its limits).
#[server(endpoint = "save_policy")]
#[allow(clippy::too_many_arguments)]
pub async fn save_policy(
    id: Option<String>,
    name: String,
    mode: String,
    allow: String,
    deny: String,
    require_confirmation: String,
    default: Option<String>,
    limits: Option<String>,
) -> Result<(), AppError> {
    use workbench_core::policy::{lines, Limit, PolicyInput, ToolAllowlist};
    let p = ssr::principal().await?;
    let mode = Mode::parse(&mode)
        .ok_or_else(|| AppError::Message("mode must be allowlist or open".into()))?;
    let id = id.filter(|i| !i.is_empty());
    let policies = ssr::wb()?.policies().clone();
    let limits = match (limits, &id) {
        (Some(text), _) => lines(&text)
            .iter()
            .map(|l| Limit::parse_line(l))
            .collect::<Result<Vec<_>, _>>()
            .map_err(AppError::Message)?,
        (None, Some(id)) => policies.get(&p, id).await?.limits,
        (None, None) => vec![],
    };
    let input = PolicyInput {
        name,
        tool_allowlist: ToolAllowlist {
            mode,
            allow: lines(&allow),
            deny: lines(&deny),
            require_confirmation: lines(&require_confirmation),
        },
        limits,
        default: default.is_some(),
    };
    match id {
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
    let p = ssr::principal().await?;
    let wb = ssr::wb()?;
    let snapshot = wb.engine().snapshot(&p);
    let tools: Vec<&str> = snapshot.tools().iter().map(|t| t.name()).collect();
    Ok(wb.policies().preview(&p, &key_id, &tools).await?)
}

/// What is wrong with one pattern list as typed, for validation as you type.
#[server(endpoint = "check_patterns")]
pub async fn check_patterns(text: String) -> Result<PatternCheck, AppError> {
    let p = ssr::principal().await?;
    let snapshot = ssr::wb()?.engine().snapshot(&p);
    let tools: Vec<&str> = snapshot.tools().iter().map(|t| t.name()).collect();
    Ok(workbench_core::policy::check_patterns(&text, &tools))
}
