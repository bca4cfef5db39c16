//! Registering a project's identity providers: every field checked and the provider's
//! discovery document read before anything is stored (so a stored provider always loads), the
//! list, removal, and the preview of what a set of groups gets.

use std::sync::Arc;

use super::mapping::{self, Granted};
use super::{Sso, SECRET_ENV_PREFIX};
use crate::auth::{Operation, Principal, Role};
use crate::clock::rfc3339;
use crate::ids::new_id;
use crate::store::{self, sso::ProviderRow};
use crate::{Error, Result};
use workbench_model::sso::{
    GroupMapping, ProviderInput, SsoPreview, SsoProvider, DEFAULT_GROUPS_CLAIM,
    DEFAULT_RECHECK_MINUTES, DEFAULT_SCOPES,
};

const MAX_MAPPINGS: usize = 100;
const MAX_SCOPES: usize = 20;
const MAX_TEXT_CHARS: usize = 200;
pub const RECHECK_MINUTES: std::ops::RangeInclusive<i64> = 5..=1440;

/// A stored provider, read back: its settings with every default filled in.
#[derive(Debug, Clone)]
pub struct Provider {
    pub id: String,
    pub project_id: String,
    pub slug: String,
    pub name: String,
    pub issuer: String,
    pub client_id: String,
    pub client_secret_ref: Option<String>,
    pub scopes: Vec<String>,
    pub groups_claim: String,
    pub mappings: Vec<GroupMapping>,
    pub default_role: Option<crate::auth::Role>,
    pub default_policy_id: Option<String>,
    pub recheck_minutes: i64,
    pub created_at: i64,
    pub updated_at: i64,
}

impl Provider {
    pub(super) fn from_row(r: ProviderRow) -> Result<Provider> {
        let c: ProviderInput = serde_json::from_str(&r.config).map_err(|e| {
            Error::internal(format!("identity provider {} is unreadable: {e}", r.slug))
        })?;
        Ok(Provider {
            id: r.id,
            project_id: r.project_id,
            slug: r.slug,
            name: c.name,
            issuer: c.issuer,
            client_id: c.client_id,
            client_secret_ref: c.client_secret_ref,
            scopes: c
                .scopes
                .unwrap_or_else(|| DEFAULT_SCOPES.iter().map(|s| s.to_string()).collect()),
            groups_claim: c
                .groups_claim
                .unwrap_or_else(|| DEFAULT_GROUPS_CLAIM.to_owned()),
            mappings: c.mappings,
            default_role: c.default_role,
            default_policy_id: c.default_policy_id,
            recheck_minutes: c.recheck_minutes.unwrap_or(DEFAULT_RECHECK_MINUTES),
            created_at: r.created_at,
            updated_at: r.updated_at,
        })
    }

    /// How long after a check the next one is due, in ms.
    pub fn recheck_ms(&self) -> i64 {
        self.recheck_minutes * 60_000
    }

    /// What a person with `groups` gets from this provider.
    pub fn grant(&self, groups: &[String]) -> Option<Granted> {
        mapping::grant(
            &self.mappings,
            self.default_role,
            self.default_policy_id.as_deref(),
            groups,
        )
    }

    pub fn view(&self, public_url: &str) -> SsoProvider {
        SsoProvider {
            object: "sso_provider".into(),
            slug: self.slug.clone(),
            name: self.name.clone(),
            issuer: self.issuer.clone(),
            client_id: self.client_id.clone(),
            client_secret_ref: self.client_secret_ref.clone(),
            scopes: self.scopes.clone(),
            groups_claim: self.groups_claim.clone(),
            mappings: self.mappings.clone(),
            default_role: self.default_role,
            default_policy_id: self.default_policy_id.clone(),
            recheck_minutes: self.recheck_minutes,
            redirect_uri: redirect_uri(public_url, &self.slug),
            created_at: rfc3339(self.created_at),
            updated_at: rfc3339(self.updated_at),
        }
    }
}

/// The one server variable a provider's client secret may come from: `WB_SSO_<SLUG>_SECRET`
/// (slug upper-cased, `-` as `_`). Bound to the slug, so an admin of one project cannot have the
/// secret the operator set for another project's provider sent to a provider of their own.
pub fn secret_env_var(slug: &str) -> String {
    format!(
        "{SECRET_ENV_PREFIX}{}_SECRET",
        slug.to_ascii_uppercase().replace('-', "_")
    )
}

/// Where a provider sends the browser back: `<public url>/sso/<slug>/callback`.
pub fn redirect_uri(public_url: &str, slug: &str) -> String {
    format!("{}/sso/{slug}/callback", public_url.trim_end_matches('/'))
}

fn text_problem(what: &str, v: &str) -> Option<String> {
    (v.trim().is_empty() || v.chars().count() > MAX_TEXT_CHARS || v.chars().any(char::is_control))
        .then(|| format!("{what} must be 1 to {MAX_TEXT_CHARS} printable characters"))
}

/// Everything wrong with a provider's settings that can be told without the database or the
/// network.
pub fn problems(slug: &str, c: &ProviderInput) -> Vec<String> {
    let mut out = Vec::new();
    if !store::tool_sets::valid_slug(slug) {
        out.push(format!(
            "slug {slug:?} must be lowercase letters, digits and inner hyphens, 1 to {} characters",
            store::tool_sets::MAX_SLUG_CHARS
        ));
    }
    out.extend(text_problem("name", &c.name));
    out.extend(text_problem("client_id", &c.client_id));
    if c.issuer.trim() != c.issuer {
        out.push("issuer must not have surrounding spaces".into());
    } else if let Some(p) = super::oidc::endpoint_problem(&c.issuer) {
        out.push(format!("issuer {p}"));
    } else if c.issuer.contains('?') {
        out.push("issuer must not carry a query".into());
    }
    match c.client_secret_ref.as_deref() {
        None => {}
        Some(r) => match r.split_once(':') {
            Some(("vault", name)) if crate::vault::validate_name(name).is_ok() => {}
            Some(("env", var)) if var == secret_env_var(slug) => {}
            // The value is not repeated: a secret pasted here by mistake stays out of answers.
            _ => out.push(format!("client_secret_ref must be vault:NAME (a secret of this project) or env:{} (the server's variable for this provider)", secret_env_var(slug))),
        },
    }
    if let Some(scopes) = &c.scopes {
        if scopes.len() > MAX_SCOPES {
            out.push(format!("at most {MAX_SCOPES} scopes"));
        }
        if !scopes.iter().any(|s| s == "openid") {
            out.push("scopes must include \"openid\"".into());
        }
        if let Some(s) = scopes.iter().find(|s| {
            s.is_empty()
                || s.len() > 100
                || !s
                    .bytes()
                    .all(|b| (0x21..=0x7e).contains(&b) && b != b'"' && b != b'\\')
        }) {
            out.push(format!("scope {s:?} is not a valid scope token"));
        }
    }
    if let Some(claim) = &c.groups_claim {
        out.extend(text_problem("groups_claim", claim));
    }
    if c.mappings.len() > MAX_MAPPINGS {
        out.push(format!("at most {MAX_MAPPINGS} mappings"));
    }
    for m in &c.mappings {
        if let Some(p) = text_problem("a mapping's group", &m.group) {
            out.push(p);
            break;
        }
    }
    // Admins manage policies, so a cap on an admin would not hold: refused rather than pretended.
    if c.mappings
        .iter()
        .any(|m| m.role == Role::Admin && m.policy_id.is_some())
        || (c.default_role == Some(Role::Admin) && c.default_policy_id.is_some())
    {
        out.push("an admin cannot be capped by a policy (admins manage policies); map admins without policy_id".into());
    }
    if let Some(n) = c.recheck_minutes {
        if !RECHECK_MINUTES.contains(&n) {
            out.push(format!(
                "recheck_minutes must be {} to {}",
                RECHECK_MINUTES.start(),
                RECHECK_MINUTES.end()
            ));
        }
    }
    out
}

impl Sso {
    /// Registers or replaces the project's provider `slug`: true when it was created. Checked
    /// whole (fields, policies, the secret's presence, the discovery document) before storing.
    pub async fn put(
        &self,
        who: &Principal,
        slug: &str,
        c: ProviderInput,
    ) -> Result<(SsoProvider, bool)> {
        who.require(Operation::SsoManage)?;
        let mut problems = problems(slug, &c);
        let policies = store::policies::list(self.db.pool(), &who.project_id).await?;
        let known = |id: &str| policies.iter().any(|p| p.id == id);
        for id in c
            .mappings
            .iter()
            .filter_map(|m| m.policy_id.as_deref())
            .chain(c.default_policy_id.as_deref())
        {
            if !known(id) {
                problems.push(format!("policy_id {id:?} is not a policy of this project"));
            }
        }
        if let Some(("vault", name)) = c
            .client_secret_ref
            .as_deref()
            .and_then(|r| r.split_once(':'))
        {
            if crate::vault::validate_name(name).is_ok()
                && self.vault.name_of(&who.project_id, name).await?.is_none()
            {
                problems.push(format!(
                    "the vault has no secret {name:?}; add it on the Vault page first"
                ));
            }
        }
        if let Some(("env", var)) = c
            .client_secret_ref
            .as_deref()
            .and_then(|r| r.split_once(':'))
        {
            if std::env::var(var).map_or(true, |v| v.is_empty()) {
                problems.push(format!("the server has no environment variable {var}"));
            }
        }
        if !problems.is_empty() {
            return Err(Error::invalid(problems.join("; ")));
        }
        let now = self.now();
        self.oidc.discovery(&c.issuer, now, true).await?;
        let existing = store::sso::provider_by_slug(self.db.pool(), slug).await?;
        let row = ProviderRow {
            id: existing
                .as_ref()
                .map_or_else(|| new_id("idp"), |r| r.id.clone()),
            project_id: who.project_id.clone(),
            slug: slug.to_owned(),
            config: serde_json::to_string(&c).map_err(|e| Error::internal(e.to_string()))?,
            created_at: existing.as_ref().map_or(now, |r| r.created_at),
            updated_at: now,
        };
        let mut tx = self.db.begin_write().await?;
        if !store::sso::upsert_provider(&mut *tx, &row).await? {
            return Err(Error::Conflict(format!(
                "the sign-in slug {slug:?} is taken; choose another"
            )));
        }
        // Another issuer or client names other people by the same subjects, and must not get
        // the old provider's refresh tokens: its identities are forgotten.
        if let Some(before) = existing.clone().and_then(|r| Provider::from_row(r).ok()) {
            if before.issuer != c.issuer || before.client_id != c.client_id {
                let n = store::sso::forget_identities(&mut *tx, &row.id).await?;
                tracing::info!(
                    slug,
                    forgotten = n,
                    "identity provider's issuer or client changed"
                );
            }
        }
        tx.commit().await?;
        self.db.changed();
        tracing::info!(slug, by = %who.user_id, "identity provider saved");
        let stored = Provider::from_row(row)?;
        Ok((stored.view(&self.public_url), existing.is_none()))
    }

    /// The project's providers.
    pub async fn list(&self, who: &Principal) -> Result<Vec<SsoProvider>> {
        who.require(Operation::SsoManage)?;
        let rows = store::sso::providers(self.db.pool(), &who.project_id).await?;
        let mut out = Vec::with_capacity(rows.len());
        for r in rows {
            match Provider::from_row(r) {
                Ok(p) => out.push(p.view(&self.public_url)),
                Err(e) => tracing::error!(error = %e, "an identity provider cannot be read"),
            }
        }
        Ok(out)
    }

    pub async fn delete(&self, who: &Principal, slug: &str) -> Result<()> {
        who.require(Operation::SsoManage)?;
        if !store::sso::delete_provider(self.db.pool(), &who.project_id, slug).await? {
            return Err(Error::NotFound);
        }
        self.db.changed();
        tracing::info!(slug, by = %who.user_id, "identity provider removed");
        Ok(())
    }

    /// The project's provider `slug`, for its admins.
    pub(super) async fn project_provider(
        &self,
        who: &Principal,
        slug: &str,
    ) -> Result<Arc<Provider>> {
        who.require(Operation::SsoManage)?;
        match store::sso::provider_by_slug(self.db.pool(), slug).await? {
            Some(r) if r.project_id == who.project_id => Ok(Arc::new(Provider::from_row(r)?)),
            _ => Err(Error::NotFound),
        }
    }

    /// What a person with `groups` would get from the project's provider `slug`.
    pub async fn preview(
        &self,
        who: &Principal,
        slug: &str,
        groups: &[String],
    ) -> Result<SsoPreview> {
        let p = self.project_provider(who, slug).await?;
        let g = p.grant(groups);
        Ok(SsoPreview {
            object: "sso_preview".into(),
            signs_in: g.is_some(),
            role: g.as_ref().map(|g| g.role),
            policy_id: g.as_ref().and_then(|g| g.policy_id.clone()),
            matched: g.and_then(|g| g.matched),
        })
    }
}
