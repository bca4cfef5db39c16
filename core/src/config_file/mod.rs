//! A project's configuration as a file kept in git (`workbench config export|apply`,
//! `GET /v1/config`, `POST /v1/config/apply`): its settings, egress allowlist, policies, custom
//! apps, MCP servers, tool sets and sign-in providers as YAML, secrets by vault name only. Applying a file checks every entry
//! first and changes nothing unless all pass; this module holds the file's shape, `plan` the
//! comparison and checks, `apply` the changes in order with their undo.

mod apply;
mod plan;

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

use crate::auth::{Operation, Principal};
use crate::integrations::bounded_yaml::{self, Bounds};
use crate::notify::WebhookConfig;
use crate::policy::ToolAllowlist;
use crate::toolsets::ToolSetInput;
use crate::upstream::DeclaredServer;
use crate::workbench::Workbench;
use crate::{Error, Result};

pub use apply::{apply, Outcome};
pub use plan::{Action, Change};

/// The file format's version; a file says which it is written in.
pub const VERSION: u32 = 1;
/// The largest file taken (an app may carry up to a hundred tools).
pub const MAX_FILE_BYTES: usize = 4 * 1024 * 1024;

/// A project's configuration. A section left out of a file is left alone when it is applied;
/// a section present is made to match exactly (an empty list removes everything in it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigFile {
    pub version: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settings: Option<Settings>,
    /// Host patterns the project's outbound requests may reach.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub egress: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policies: Option<Vec<PolicyEntry>>,
    /// Custom apps, each a definition in the plugin format.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub apps: Option<Vec<Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcp_servers: Option<Vec<DeclaredServer>>,
    /// Tool sets, each published at `/mcp/sets/<slug>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_sets: Option<Vec<ToolSetInput>>,
    /// Identity providers people sign in through (single sign-on), mapping policies by name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sign_in_providers: Option<Vec<ProviderEntry>>,
}

/// A sign-in provider as a file holds it: its mapping names policies by name, so a file
/// carries across instances (where ids differ).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderEntry {
    pub slug: String,
    pub name: String,
    pub issuer: String,
    pub client_id: String,
    /// `vault:NAME` or `env:WB_SSO_<SLUG>_SECRET`; none for a public client.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret_ref: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scopes: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub groups_claim: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mappings: Vec<MappingEntry>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_role: Option<crate::auth::Role>,
    /// The policy of a person in no mapped group, by name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_policy: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recheck_minutes: Option<i64>,
}

/// One rule of a provider's mapping, its policy by name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MappingEntry {
    pub group: String,
    pub role: crate::auth::Role,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<String>,
}

impl ProviderEntry {
    /// The entry with every default written out, as an export shows it.
    pub fn normal(&self) -> ProviderEntry {
        use workbench_model::sso::{DEFAULT_GROUPS_CLAIM, DEFAULT_RECHECK_MINUTES, DEFAULT_SCOPES};
        let mut e = self.clone();
        e.scopes
            .get_or_insert_with(|| DEFAULT_SCOPES.iter().map(|s| s.to_string()).collect());
        e.groups_claim
            .get_or_insert_with(|| DEFAULT_GROUPS_CLAIM.to_owned());
        e.recheck_minutes.get_or_insert(DEFAULT_RECHECK_MINUTES);
        e
    }

    /// The policy names the entry uses.
    pub fn policy_names(&self) -> impl Iterator<Item = &str> {
        self.mappings
            .iter()
            .filter_map(|m| m.policy.as_deref())
            .chain(self.default_policy.as_deref())
    }

    /// The registration, with policy names turned into ids by `id_of`.
    pub fn input(
        &self,
        mut id_of: impl FnMut(&str) -> Result<String>,
    ) -> Result<workbench_model::sso::ProviderInput> {
        let mut mappings = Vec::with_capacity(self.mappings.len());
        for m in &self.mappings {
            mappings.push(workbench_model::sso::GroupMapping {
                group: m.group.clone(),
                role: m.role,
                policy_id: m.policy.as_deref().map(&mut id_of).transpose()?,
            });
        }
        Ok(workbench_model::sso::ProviderInput {
            name: self.name.clone(),
            issuer: self.issuer.clone(),
            client_id: self.client_id.clone(),
            client_secret_ref: self.client_secret_ref.clone(),
            scopes: self.scopes.clone(),
            groups_claim: self.groups_claim.clone(),
            mappings,
            default_role: self.default_role,
            default_policy_id: self.default_policy.as_deref().map(&mut id_of).transpose()?,
            recheck_minutes: self.recheck_minutes,
        })
    }

    /// A registered provider as a file holds it, its policies named by `name_of`.
    pub fn of(
        p: workbench_model::sso::SsoProvider,
        name_of: impl Fn(&str) -> String,
    ) -> ProviderEntry {
        ProviderEntry {
            slug: p.slug,
            name: p.name,
            issuer: p.issuer,
            client_id: p.client_id,
            client_secret_ref: p.client_secret_ref,
            scopes: Some(p.scopes),
            groups_claim: Some(p.groups_claim),
            mappings: p
                .mappings
                .into_iter()
                .map(|m| MappingEntry {
                    group: m.group,
                    role: m.role,
                    policy: m.policy_id.as_deref().map(&name_of),
                })
                .collect(),
            default_role: p.default_role,
            default_policy: p.default_policy_id.as_deref().map(&name_of),
            recheck_minutes: Some(p.recheck_minutes),
        }
    }
}

/// Project settings. A setting left out is left alone; `null` sets it to its default.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    /// Days audit rows are kept (`null`: forever).
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub audit_retention_days: Option<Option<i64>>,
    /// Where held calls are announced, signed with a vault secret (`null`: nowhere).
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub webhook: Option<Option<WebhookConfig>>,
    /// Messages `email.send` may send per hour (`null`: the operator's limit).
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub email_hourly_limit: Option<Option<i64>>,
}

/// A setting that is present, `null` or not: `Some(None)` for `null`.
fn present<'de, D, T>(d: D) -> std::result::Result<Option<Option<T>>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(d).map(Some)
}

/// A policy, by name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyEntry {
    pub name: String,
    /// Whether keys without a policy of their own get this one.
    #[serde(default)]
    pub default: bool,
    pub tool_allowlist: ToolAllowlist,
    /// Rate limits and quotas (none when left out).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub limits: Vec<crate::policy::Limit>,
}

impl ConfigFile {
    /// A file from YAML (or JSON, which is YAML): bounded like every YAML workbench reads, and
    /// refused whole on an unknown key or a wrong type, with where.
    pub fn parse(text: &str) -> Result<ConfigFile> {
        if text.len() > MAX_FILE_BYTES {
            return Err(Error::invalid(format!(
                "a configuration file may be at most {MAX_FILE_BYTES} bytes"
            )));
        }
        let value = bounded_yaml::parse(text, Bounds::default()).map_err(|e| match e {
            bounded_yaml::ParseError::TooLarge(m) => Error::invalid(m),
            bounded_yaml::ParseError::Invalid(m) => {
                Error::invalid(format!("the file is not valid YAML: {m}"))
            }
        })?;
        Self::from_value(value)
    }

    pub fn from_value(value: Value) -> Result<ConfigFile> {
        if !value.is_object() {
            return Err(Error::invalid(
                "a configuration file is a mapping with version, settings, egress, policies, apps, mcp_servers, tool_sets and sign_in_providers",
            ));
        }
        let file: ConfigFile = serde_json::from_value(value).map_err(|e| {
            Error::invalid(format!("the file does not read as a configuration: {e}"))
        })?;
        if file.version != VERSION {
            return Err(Error::invalid(format!(
                "version {} is not one this workbench reads (it reads {VERSION})",
                file.version
            )));
        }
        Ok(file)
    }

    /// The file as YAML, with a header saying what it is.
    pub fn to_yaml(&self) -> Result<String> {
        let value = serde_json::to_value(self).map_err(|e| Error::internal(e.to_string()))?;
        let body = serde_norway::to_string(&value).map_err(|e| Error::internal(e.to_string()))?;
        Ok(format!(
            "# workbench project configuration: `workbench config apply FILE` makes a project match it.\n# Secrets are vault names; set their values in each instance's vault.\n{body}"
        ))
    }
}

/// The caller's project as a file: every section, secrets as vault names only.
pub async fn export(wb: &Workbench, who: &Principal) -> Result<ConfigFile> {
    who.require(Operation::ConfigExport)?;
    let mut egress = wb.egress().list(who).await?;
    egress.sort();
    let all_policies = wb.policies().list(who).await?;
    let name_of = |id: &str| {
        all_policies
            .iter()
            .find(|p| p.id == id)
            .map_or_else(|| id.to_owned(), |p| p.name.clone())
    };
    let sign_in_providers = wb
        .sso()
        .list(who)
        .await?
        .into_iter()
        .map(|p| ProviderEntry::of(p, name_of))
        .collect();
    let mut policies: Vec<PolicyEntry> = all_policies
        .clone()
        .into_iter()
        .map(|p| PolicyEntry {
            name: p.name,
            default: p.default,
            tool_allowlist: p.tool_allowlist,
            limits: p.limits,
        })
        .collect();
    policies.sort_by(|a, b| a.name.cmp(&b.name));
    let mut apps = wb.apps().definitions(who).await?;
    apps.sort_by(|a, b| a.0.cmp(&b.0));
    let mut servers = wb.upstreams().declared(who).await?;
    servers.sort_by(|a, b| a.name().cmp(b.name()));
    let tool_sets = wb
        .tool_sets()
        .list(who)
        .await?
        .into_iter()
        .map(ToolSetInput::from)
        .collect();
    Ok(ConfigFile {
        version: VERSION,
        settings: Some(Settings {
            audit_retention_days: Some(wb.audit().retention_days(who).await?),
            webhook: Some(wb.webhooks().get(who).await?),
            email_hourly_limit: Some(wb.email().project_hourly_limit(who).await?.map(i64::from)),
        }),
        egress: Some(egress),
        policies: Some(policies),
        apps: Some(apps.into_iter().map(|(_, v)| v).collect()),
        mcp_servers: Some(servers),
        tool_sets: Some(tool_sets),
        sign_in_providers: Some(sign_in_providers),
    })
}
