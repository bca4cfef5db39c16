//! Single sign-on through OpenID Connect providers: a provider's settings as an admin registers
//! them (REST, the portal's Sign-in page, the configuration file) and what its group mapping
//! gives a person, shared by core and the portal.

use serde::{Deserialize, Serialize};

use crate::accounts::Role;

/// Scopes asked for when a provider names none.
pub const DEFAULT_SCOPES: &[&str] = &["openid", "email", "profile"];
/// The ID token claim read for groups when a provider names none.
pub const DEFAULT_GROUPS_CLAIM: &str = "groups";
/// How often, in minutes, a person signed in through a provider is checked again when it says
/// nothing: their portal session ends and they sign in through the provider again.
pub const DEFAULT_RECHECK_MINUTES: i64 = 60;

/// One rule of a provider's mapping: people in `group` get `role` in the provider's project,
/// capped by `policy_id` (None: no cap beyond the project's). The first rule whose group the
/// person is in decides.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GroupMapping {
    pub group: String,
    pub role: Role,
    #[serde(default)]
    pub policy_id: Option<String>,
}

/// What an admin sends to register or replace a provider.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderInput {
    pub name: String,
    /// The issuer URL; discovery is read from `<issuer>/.well-known/openid-configuration`.
    pub issuer: String,
    pub client_id: String,
    /// Where the client secret is: `vault:NAME` (a secret of the project's vault) or
    /// `env:VARIABLE` (the server's environment); None: a public client (PKCE only).
    #[serde(default)]
    pub client_secret_ref: Option<String>,
    #[serde(default)]
    pub scopes: Option<Vec<String>>,
    #[serde(default)]
    pub groups_claim: Option<String>,
    #[serde(default)]
    pub mappings: Vec<GroupMapping>,
    /// The role of a person in no mapped group; None: such a person cannot sign in.
    #[serde(default)]
    pub default_role: Option<Role>,
    #[serde(default)]
    pub default_policy_id: Option<String>,
    #[serde(default)]
    pub recheck_minutes: Option<i64>,
}

/// A registered provider as the API and the portal show it: never the secret, only where it is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SsoProvider {
    pub object: String,
    pub slug: String,
    pub name: String,
    pub issuer: String,
    pub client_id: String,
    pub client_secret_ref: Option<String>,
    pub scopes: Vec<String>,
    pub groups_claim: String,
    pub mappings: Vec<GroupMapping>,
    pub default_role: Option<Role>,
    pub default_policy_id: Option<String>,
    pub recheck_minutes: i64,
    /// The callback URL to register at the provider.
    pub redirect_uri: String,
    pub created_at: String,
    pub updated_at: String,
}

/// What a person with some groups gets from a provider's mapping.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SsoPreview {
    pub object: String,
    pub signs_in: bool,
    pub role: Option<Role>,
    pub policy_id: Option<String>,
    /// The group of the rule that decided (None: the default, or no sign-in).
    pub matched: Option<String>,
}

/// A provider as the sign-in page offers it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SignInProvider {
    pub slug: String,
    pub name: String,
}

/// What the sign-in page offers: the providers, and whether passwords are accepted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SignInChoices {
    pub providers: Vec<SignInProvider>,
    pub password_sign_in: bool,
}

/// The portal's Sign-in page: the project's providers and the names of its policies.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SsoPageData {
    pub providers: Vec<SsoProvider>,
    /// `(id, name)` of the project's policies, to show mappings by name.
    pub policies: Vec<(String, String)>,
    /// Whether the portal accepts passwords (the operator's setting).
    pub password_sign_in: bool,
}
