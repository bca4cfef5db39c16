//! Integrations as data: the definition format (definition.rs), request templates
//! (request.rs), the outbound client every integration request goes through (outbound.rs), the
//! shipped plugin integrations loaded with the operator's settings, the registry of each
//! project's custom apps (registry.rs), and turning OpenAPI documents into app definitions
//! (openapi.rs, bounded_yaml.rs). Nothing here runs a tool or holds a credential store:
//! connections and the plugin tool handler sit above this layer.

pub(crate) mod bounded_yaml;
pub mod definition;
pub mod openapi;
mod outbound;
mod registry;
pub mod request;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

pub use definition::{AuthDef, IntegrationDef, ToolDef};
pub use outbound::{Outbound, SendError};
pub use registry::AppRegistry;

use crate::catalog::{ToolName, ToolSource, ToolSpec};
use crate::{Error, Result};

/// The plugin definitions that ship with workbench: every `core/plugins/*.json` (build.rs).
const BUILTIN_DEFINITIONS: &[(&str, &str)] = include!(concat!(env!("OUT_DIR"), "/plugins.rs"));

/// Operator settings for one integration (from `WB_INTEGRATION_<NAME>_<SETTING>`). Debug output
/// hides the client secret.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct IntegrationSettings {
    pub base_url: Option<String>,
    pub authorize_url: Option<String>,
    pub token_url: Option<String>,
    pub client_id: Option<String>,
    pub client_secret: Option<String>,
    /// The authorization server's issuer; when set, a callback's `iss` must equal it.
    pub issuer: Option<String>,
}

impl IntegrationSettings {
    /// Reads `WB_INTEGRATION_<NAME>_{BASE_URL,AUTHORIZE_URL,TOKEN_URL,CLIENT_ID,CLIENT_SECRET,ISSUER}`
    /// from the given variables.
    pub fn from_env(
        vars: impl IntoIterator<Item = (String, String)>,
    ) -> BTreeMap<String, IntegrationSettings> {
        let mut out: BTreeMap<String, IntegrationSettings> = BTreeMap::new();
        for (k, v) in vars {
            let Some(rest) = k.strip_prefix("WB_INTEGRATION_") else {
                continue;
            };
            for (suffix, field) in [
                ("_BASE_URL", 0),
                ("_AUTHORIZE_URL", 1),
                ("_TOKEN_URL", 2),
                ("_CLIENT_ID", 3),
                ("_CLIENT_SECRET", 4),
                ("_ISSUER", 5),
            ] {
                if let Some(name) = rest.strip_suffix(suffix) {
                    let s = out.entry(name.to_ascii_lowercase()).or_default();
                    let slot = match field {
                        0 => &mut s.base_url,
                        1 => &mut s.authorize_url,
                        2 => &mut s.token_url,
                        3 => &mut s.client_id,
                        4 => &mut s.client_secret,
                        _ => &mut s.issuer,
                    };
                    *slot = Some(v.clone());
                    break;
                }
            }
        }
        out
    }
}

fn redacted(secret: &Option<String>) -> &'static str {
    if secret.is_some() {
        "Some(***)"
    } else {
        "None"
    }
}

impl std::fmt::Debug for IntegrationSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IntegrationSettings")
            .field("base_url", &self.base_url)
            .field("authorize_url", &self.authorize_url)
            .field("token_url", &self.token_url)
            .field("client_id", &self.client_id)
            .field("client_secret", &redacted(&self.client_secret))
            .field("issuer", &self.issuer)
            .finish()
    }
}

impl std::fmt::Debug for OAuthConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OAuthConfig")
            .field("authorize_url", &self.authorize_url)
            .field("token_url", &self.token_url)
            .field("scopes", &self.scopes)
            .field("client_id", &self.client_id)
            .field("client_secret", &redacted(&self.client_secret))
            .field("client_secret_vault", &self.client_secret_vault)
            .field("issuer", &self.issuer)
            .field("resource", &self.resource)
            .field("revocation_url", &self.revocation_url)
            .finish()
    }
}

/// OAuth settings of an integration, with the operator's client credentials.
#[derive(Clone)]
pub struct OAuthConfig {
    pub authorize_url: String,
    pub token_url: String,
    pub scopes: Vec<String>,
    pub scope_separator: Option<String>,
    pub client_id: Option<String>,
    pub client_secret: Option<String>,
    /// A custom app's client secret lives in its project's vault under this name.
    pub client_secret_vault: Option<String>,
    pub issuer: Option<String>,
    /// The resource the tokens are for (RFC 8707), sent on authorization, exchange and
    /// refresh: an upstream MCP server's URL.
    pub resource: Option<String>,
    /// Where a disconnected user's tokens are revoked (RFC 7009), when the provider offers it.
    pub revocation_url: Option<String>,
}

/// An integration ready to serve: its definition with the operator's settings applied.
#[derive(Debug, Clone)]
pub struct Integration {
    pub def: IntegrationDef,
    pub base_url: url::Url,
    pub oauth: Option<OAuthConfig>,
    pub source: ToolSource,
    /// The client its requests go through (guarded for custom apps).
    pub outbound: Outbound,
    /// An upstream server users sign in to whose tools are not listed yet: the admin who
    /// registered it, the only one it is shown to until their connection lists them.
    pub awaiting_sign_in_by: Option<String>,
}

impl Integration {
    pub fn new(
        def: IntegrationDef,
        settings: Option<&IntegrationSettings>,
        source: ToolSource,
        outbound: Outbound,
    ) -> Result<Integration> {
        let s = settings.cloned().unwrap_or_default();
        let base = s.base_url.clone().unwrap_or_else(|| def.base_url.clone());
        let base_url = url::Url::parse(&base).map_err(|e| {
            Error::invalid(format!("integration {}: base url {base:?}: {e}", def.name))
        })?;
        let oauth = match &def.auth {
            AuthDef::Oauth2 {
                authorize_url,
                token_url,
                scopes,
                scope_separator,
                client_id,
                client_secret_vault,
                ..
            } => Some(OAuthConfig {
                authorize_url: s
                    .authorize_url
                    .clone()
                    .unwrap_or_else(|| authorize_url.clone()),
                token_url: s.token_url.clone().unwrap_or_else(|| token_url.clone()),
                scopes: scopes.clone(),
                scope_separator: scope_separator.clone(),
                client_id: s.client_id.clone().or_else(|| client_id.clone()),
                client_secret: s.client_secret.clone(),
                client_secret_vault: client_secret_vault.clone(),
                issuer: s.issuer.clone(),
                resource: None,
                revocation_url: None,
            }),
            _ => None,
        };
        Ok(Integration {
            def,
            base_url,
            oauth,
            source,
            outbound,
            awaiting_sign_in_by: None,
        })
    }

    pub fn name(&self) -> &str {
        &self.def.name
    }

    pub fn needs_connection(&self) -> bool {
        !matches!(self.def.auth, AuthDef::None)
    }

    /// Why nobody can connect this integration, when its configuration is missing: an OAuth
    /// integration without a client id cannot send anyone to the provider's consent nor refresh
    /// a token. Its tools are listed unavailable with these words.
    pub fn unconfigured(&self) -> Option<String> {
        let oauth = self.oauth.as_ref()?;
        if oauth.client_id.as_deref().is_some_and(|id| !id.is_empty()) {
            return None;
        }
        Some(match &self.source {
            ToolSource::App(_) => format!(
                "{} has no OAuth client id, so nobody can connect it; an admin sets auth.client_id in the app's definition",
                self.def.name
            ),
            _ => {
                let env = self.def.name.to_ascii_uppercase();
                format!(
                    "{} is not configured for OAuth: no client id, so nobody can connect it; the operator registers an OAuth client at the provider, sets WB_INTEGRATION_{env}_CLIENT_ID and WB_INTEGRATION_{env}_CLIENT_SECRET and restarts workbench",
                    self.def.name
                )
            }
        })
    }

    /// The tool specs this integration contributes to the catalog.
    pub fn specs(&self) -> Result<Vec<ToolSpec>> {
        self.def
            .tools
            .iter()
            .map(|t| {
                Ok(ToolSpec {
                    name: ToolName::parse(&t.name)?,
                    source: self.source.clone(),
                    integration: self.def.name.clone(),
                    description: t.description.clone(),
                    input_schema: t.input_schema.clone(),
                    output_schema: t.output_schema.clone(),
                    side_effects: t.side_effects,
                    literal_args: false,
                    secret_arg: None,
                    no_vault_refs: false,
                })
            })
            .collect()
    }
}

/// Every plugin integration, by name.
#[derive(Debug, Clone, Default)]
pub struct Integrations {
    list: Vec<Arc<Integration>>,
    by_name: HashMap<String, usize>,
}

impl Integrations {
    /// Parses and validates the shipped definitions and applies operator settings. A broken
    /// definition stops start-up with a message naming it.
    /// `handler_exists` says whether a Rust handler of that name exists (the plugin layer
    /// above knows them).
    pub fn load(
        settings: &BTreeMap<String, IntegrationSettings>,
        http: &reqwest::Client,
        handler_exists: impl Fn(&str) -> bool,
    ) -> Result<Integrations> {
        let mut out = Integrations::default();
        for (file, json) in BUILTIN_DEFINITIONS {
            let def = IntegrationDef::parse(json, file)?;
            for t in &def.tools {
                if let Some(h) = &t.handler {
                    if !handler_exists(h) {
                        return Err(Error::invalid(format!(
                            "integration {} tool {}: no Rust handler named {h}",
                            def.name, t.name
                        )));
                    }
                }
            }
            let source = ToolSource::Plugin(def.name.clone());
            let settings = settings.get(&def.name);
            out.push(Integration::new(
                def,
                settings,
                source,
                Outbound::trusted(http.clone()),
            )?)?;
        }
        for name in settings.keys() {
            if !out.by_name.contains_key(name) {
                tracing::warn!(integration = %name, "settings for an unknown integration are ignored");
            }
        }
        Ok(out)
    }

    fn push(&mut self, i: Integration) -> Result<()> {
        if self.by_name.contains_key(i.name()) {
            return Err(Error::invalid(format!(
                "integration {} is defined twice",
                i.name()
            )));
        }
        self.by_name.insert(i.name().to_owned(), self.list.len());
        self.list.push(Arc::new(i));
        Ok(())
    }

    pub fn get(&self, name: &str) -> Option<&Arc<Integration>> {
        self.by_name.get(name).map(|i| &self.list[*i])
    }

    pub fn all(&self) -> &[Arc<Integration>] {
        &self.list
    }
}

/// The HTTP client for integration APIs: operator-configured destinations, no redirects
/// followed, no proxy from the environment.
pub fn api_client() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(std::time::Duration::from_secs(10))
        .user_agent(concat!("workbench/", env!("CARGO_PKG_VERSION")))
        .build()
        .expect("the HTTP client configuration is valid")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_definitions_load() {
        let all = Integrations::load(&BTreeMap::new(), &api_client(), |_| true).unwrap();
        for name in ["github", "slack", "linear", "superset", "hackernews"] {
            assert!(all.get(name).is_some(), "{name}");
        }
        let kinds: Vec<&str> = all.all().iter().map(|i| i.def.auth.kind()).collect();
        for kind in ["oauth2", "api_key", "cookie", "none"] {
            assert!(kinds.contains(&kind), "{kind}");
        }
    }

    #[test]
    fn settings_come_from_environment_variables() {
        let s = IntegrationSettings::from_env([
            (
                "WB_INTEGRATION_GITHUB_BASE_URL".to_string(),
                "http://127.0.0.1:9/".to_string(),
            ),
            (
                "WB_INTEGRATION_GITHUB_CLIENT_ID".to_string(),
                "id".to_string(),
            ),
            ("WB_OTHER".to_string(), "x".to_string()),
        ]);
        assert_eq!(s["github"].base_url.as_deref(), Some("http://127.0.0.1:9/"));
        assert_eq!(s["github"].client_id.as_deref(), Some("id"));
        let all = Integrations::load(&s, &api_client(), |_| true).unwrap();
        assert_eq!(
            all.get("github").unwrap().base_url.as_str(),
            "http://127.0.0.1:9/"
        );
    }

    #[test]
    fn a_broken_definition_is_refused_with_its_name() {
        let json = r#"{ "name": "demo", "display_name": "Demo", "version": "1", "base_url": "https://x.example",
            "auth": { "type": "none" }, "tools": [{ "name": "other_tool", "description": "d", "side_effects": "none",
            "input_schema": { "type": "object" }, "request": { "method": "GET", "path": "/x" } }] }"#;
        let err = IntegrationDef::parse(json, "demo.json")
            .unwrap_err()
            .to_string();
        assert!(err.contains("integration demo tool other_tool"), "{err}");
        let json = r#"{ "name": "demo", "display_name": "Demo", "version": "1", "base_url": "https://x.example",
            "auth": { "type": "none" }, "tools": [{ "name": "demo_x", "description": "d", "side_effects": "none",
            "input_schema": { "type": "object", "properties": {} }, "request": { "method": "GET", "path": "/x/{id}" } }] }"#;
        assert!(IntegrationDef::parse(json, "demo.json")
            .unwrap_err()
            .to_string()
            .contains("{id}"));
        assert!(IntegrationDef::parse("{", "bad.json")
            .unwrap_err()
            .to_string()
            .contains("bad.json"));
    }
}
