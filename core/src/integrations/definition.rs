//! The integration format: a declarative definition (name, display name, version, logo, auth,
//! API base URL, curl proxy switch, tools with JSON Schema inputs, HTTP request templates and
//! result shaping). Plugins ship as JSON files in `core/plugins/`; custom apps use the same
//! format through the API. `validate` refuses a broken definition with a message naming it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::catalog::{SideEffects, ToolName};
use crate::{Error, Result};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IntegrationDef {
    /// Lowercase identifier: what `connect` takes and tool names start with.
    pub name: String,
    pub display_name: String,
    pub version: String,
    #[serde(default)]
    pub description: String,
    /// Path of the logo under the site root (`/logos/<name>.svg`).
    #[serde(default)]
    pub logo: Option<String>,
    /// API base URL; operators override it per integration (tests point it at fakes).
    pub base_url: String,
    /// Whether curl_session may mint tokens for it.
    #[serde(default)]
    pub curl_proxy: bool,
    pub auth: AuthDef,
    /// Headers sent with every request (e.g. `Accept`).
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    pub tools: Vec<ToolDef>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum AuthDef {
    None,
    Oauth2 {
        authorize_url: String,
        token_url: String,
        #[serde(default)]
        scopes: Vec<String>,
        /// How scopes are joined in the authorize URL (space by default; Slack uses ',').
        #[serde(default)]
        scope_separator: Option<String>,
        #[serde(default)]
        inject: Inject,
        /// Custom apps: the OAuth client registered at the provider. Shipped plugins take theirs
        /// from the operator (`WB_INTEGRATION_<NAME>_CLIENT_ID`), which wins over this.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        client_id: Option<String>,
        /// Custom apps: the name of the project's vault secret that holds the client secret
        /// (read only when talking to the token endpoint; never stored in the definition).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        client_secret_vault: Option<String>,
    },
    ApiKey {
        #[serde(default)]
        inject: Inject,
        probe: Probe,
        /// What the form asks for ("API key", "Personal access token").
        #[serde(default)]
        label: Option<String>,
        /// Where to get one.
        #[serde(default)]
        help: Option<String>,
    },
    Cookie {
        cookie_name: String,
        /// The domain whose session cookie this is (shown on the form).
        domain: String,
        probe: Probe,
        #[serde(default)]
        help: Option<String>,
    },
}

impl AuthDef {
    pub fn kind(&self) -> &'static str {
        match self {
            AuthDef::None => "none",
            AuthDef::Oauth2 { .. } => "oauth2",
            AuthDef::ApiKey { .. } => "api_key",
            AuthDef::Cookie { .. } => "cookie",
        }
    }
}

/// Where a credential goes: a header with a format (`{token}` is replaced), or a query parameter.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Inject {
    #[serde(default = "default_header")]
    pub header: String,
    #[serde(default = "default_format")]
    pub format: String,
    #[serde(default)]
    pub query: Option<String>,
}

fn default_header() -> String {
    "Authorization".into()
}

fn default_format() -> String {
    "Bearer {token}".into()
}

impl Default for Inject {
    fn default() -> Self {
        Inject {
            header: default_header(),
            format: default_format(),
            query: None,
        }
    }
}

/// A request that answers 2xx only when a credential works.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Probe {
    #[serde(default = "default_get")]
    pub method: String,
    pub path: String,
    #[serde(default)]
    pub body: Option<Value>,
}

fn default_get() -> String {
    "GET".into()
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolDef {
    pub name: String,
    pub description: String,
    pub side_effects: SideEffects,
    pub input_schema: Value,
    #[serde(default)]
    pub output_schema: Option<Value>,
    /// The HTTP request this tool makes.
    #[serde(default)]
    pub request: Option<RequestDef>,
    /// A Rust handler registered under this name, for tools that need logic.
    #[serde(default)]
    pub handler: Option<String>,
    #[serde(default)]
    pub result: Option<ResultDef>,
}

/// The placeholder a request template uses for the caller's end user (REST `end_user_id`):
/// `{workbench.end_user_id}` in the path, a query value or a header, `"$workbench.end_user_id"`
/// in the body; absent when the call names none (a path that needs it is then refused).
pub const END_USER: &str = "workbench.end_user_id";

/// `path` and `query` values use `{arg}` placeholders (a path placeholder is one
/// percent-encoded segment, `{+arg}` several; absent arguments drop the query parameter); in
/// `body`, a string that is exactly `$arg` is replaced by the argument's value (type kept) and
/// dropped when the argument is absent. The body goes as JSON or as a form. The caller's end
/// user fills `{workbench.end_user_id}` / `"$workbench.end_user_id"` (`END_USER`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RequestDef {
    pub method: String,
    pub path: String,
    #[serde(default)]
    pub query: BTreeMap<String, String>,
    #[serde(default)]
    pub body: Option<Value>,
    #[serde(default, skip_serializing_if = "BodyEncoding::is_json")]
    pub body_encoding: BodyEncoding,
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
}

/// How a request body is sent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BodyEncoding {
    /// `application/json`.
    #[default]
    Json,
    /// `application/x-www-form-urlencoded`, nested values flattened as `a[b]=v`, `a[0]=v`.
    Form,
}

impl BodyEncoding {
    fn is_json(&self) -> bool {
        *self == BodyEncoding::Json
    }
}

/// Shapes the response: take the value at `path` (dotted), keep only `fields` (dotted paths,
/// applied to each element of an array), and treat `{ error_field: false }` bodies as failures.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResultDef {
    #[serde(default)]
    pub path: Option<String>,
    #[serde(default)]
    pub fields: Vec<String>,
    /// A boolean field that is `false` on failure (Slack's `ok`), with the message field.
    #[serde(default)]
    pub ok_field: Option<String>,
    #[serde(default)]
    pub error_field: Option<String>,
    /// Read the body as text (never as JSON) and answer `{<text_as>: text}` (CSV exports).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text_as: Option<String>,
    /// The answer is one page of a list: `{items, next_cursor | next_page}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<NextDef>,
}

/// Where a paginated list says how to get its next page.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NextDef {
    pub from: NextFrom,
    /// The body's dotted path (with `from: body`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// When the value is a URL, this query parameter of it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub param: Option<String>,
    #[serde(default, rename = "as")]
    pub as_: NextAs,
    /// With `from: offset`: the input property holding this page's offset; with `from: page`,
    /// this page's number (counted from 0). Absent means 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<String>,
    /// With `from: offset`, `page` or `last`: the input property holding the page size; only a
    /// full page has a next one (unless `more` or `total` says otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<String>,
    /// A body path that must be `true` for there to be a next page (Stripe's `has_more`,
    /// PagerDuty's `more`); it overrides the full-page test of `from: offset`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub more: Option<String>,
    /// With `from: offset` or `page`: a body path holding how many items the whole list has
    /// (Superset's `count`); there is a next page while the pages so far hold fewer. It
    /// overrides the full-page test; `more` overrides it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NextFrom {
    /// A value in the response body.
    Body,
    /// The `rel="next"` URL of the `Link` header.
    Link,
    /// A field (`path`) of the list's last item: APIs that page by "after this id" and answer
    /// no cursor (Discord). An empty list has no next page.
    Last,
    /// Offset paging that answers no next position (Jira's user search, PagerDuty): this
    /// page's offset (`start`) plus the items it holds, when the page is full (`size`).
    Offset,
    /// Numbered pages, counted from 0, that answer no next page (Superset): this page's number
    /// (`start`) plus one, while `total` (or `more`, or a full page of `size`) says more remain.
    Page,
}

/// How the next page is answered: `next_cursor` (a string) or `next_page` (an integer).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NextAs {
    #[default]
    Cursor,
    Page,
}

const METHODS: &[&str] = &["GET", "POST", "PUT", "PATCH", "DELETE"];

/// The placeholders of a template string: `{name}` and `{+name}` → name.
pub fn placeholders(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = s;
    while let Some(i) = rest.find('{') {
        let tail = &rest[i + 1..];
        match tail.find('}') {
            Some(j) => {
                out.push(tail[..j].strip_prefix('+').unwrap_or(&tail[..j]));
                rest = &tail[j + 1..];
            }
            None => break,
        }
    }
    out
}

impl IntegrationDef {
    pub fn parse(json: &str, origin: &str) -> Result<IntegrationDef> {
        let def: IntegrationDef = serde_json::from_str(json)
            .map_err(|e| Error::invalid(format!("integration definition {origin}: {e}")))?;
        def.validate()?;
        Ok(def)
    }

    /// An integration name: lowercase letters, digits and '_', starting with a letter, at most 40.
    pub fn check_name(name: &str) -> Result<()> {
        let ok = !name.is_empty()
            && name.len() <= 40
            && name.chars().next().is_some_and(|c| c.is_ascii_lowercase())
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
        if ok {
            Ok(())
        } else {
            Err(Error::invalid(format!("integration {name}: name must be lowercase letters, digits and '_' (starting with a letter, at most 40)")))
        }
    }

    /// Checks everything the loader relies on; the message names the integration and tool.
    pub fn validate(&self) -> Result<()> {
        let bad = |what: String| Error::invalid(format!("integration {}: {what}", self.name));
        IntegrationDef::check_name(&self.name)?;
        if self.display_name.trim().is_empty() || self.version.trim().is_empty() {
            return Err(bad("display_name and version are required".into()));
        }
        let base = url::Url::parse(&self.base_url).map_err(|e| bad(format!("base_url: {e}")))?;
        if !matches!(base.scheme(), "http" | "https") || base.host_str().is_none() {
            return Err(bad("base_url must be an http(s) URL".into()));
        }
        match &self.auth {
            AuthDef::Oauth2 {
                authorize_url,
                token_url,
                ..
            } => {
                for (what, u) in [("authorize_url", authorize_url), ("token_url", token_url)] {
                    let u = url::Url::parse(u).map_err(|e| bad(format!("{what}: {e}")))?;
                    if !matches!(u.scheme(), "http" | "https") || u.host_str().is_none() {
                        return Err(bad(format!("{what} must be an http(s) URL")));
                    }
                }
            }
            AuthDef::ApiKey { probe, inject, .. } => {
                check_request_line(&probe.method, &probe.path)
                    .map_err(|m| bad(format!("probe: {m}")))?;
                if !inject.format.contains("{token}") {
                    return Err(bad("inject.format must contain {token}".into()));
                }
            }
            AuthDef::Cookie {
                probe, cookie_name, ..
            } => {
                check_request_line(&probe.method, &probe.path)
                    .map_err(|m| bad(format!("probe: {m}")))?;
                if cookie_name.is_empty() || cookie_name.contains(['=', ';', ' ']) {
                    return Err(bad("cookie_name is not a valid cookie name".into()));
                }
            }
            AuthDef::None => {}
        }
        if self.tools.is_empty() {
            return Err(bad("has no tools".into()));
        }
        let mut seen = std::collections::HashSet::new();
        for t in &self.tools {
            let tbad = |what: String| {
                Error::invalid(format!("integration {} tool {}: {what}", self.name, t.name))
            };
            ToolName::parse(&t.name).map_err(|e| tbad(e.to_string()))?;
            if !t.name.starts_with(&format!("{}_", self.name)) {
                return Err(tbad(format!(
                    "tool names must start with \"{}_\"",
                    self.name
                )));
            }
            if !seen.insert(&t.name) {
                return Err(tbad("defined twice".into()));
            }
            if t.description.trim().is_empty() {
                return Err(tbad("description is required".into()));
            }
            if t.input_schema.get("type").and_then(Value::as_str) != Some("object") {
                return Err(tbad(
                    "input_schema must be a JSON Schema of type object".into(),
                ));
            }
            match (&t.request, &t.handler) {
                (Some(r), None) => {
                    check_request_line(&r.method, &r.path).map_err(tbad)?;
                    let props = t.input_schema.get("properties").and_then(Value::as_object);
                    let known = |p: &str| p == END_USER || props.is_some_and(|m| m.contains_key(p));
                    for p in placeholders(&r.path)
                        .into_iter()
                        .chain(r.query.values().flat_map(|v| placeholders(v)))
                    {
                        if !known(p) {
                            return Err(tbad(format!(
                                "request uses {{{p}}} but the input schema has no such property"
                            )));
                        }
                    }
                }
                (None, Some(_)) => {}
                _ => return Err(tbad("needs exactly one of request or handler".into())),
            }
            if let Some(r) = &t.result {
                let props = t.input_schema.get("properties").and_then(Value::as_object);
                check_result(r, |p| props.is_some_and(|m| m.contains_key(p))).map_err(tbad)?;
            }
        }
        Ok(())
    }

    pub fn tool(&self, name: &str) -> Option<&ToolDef> {
        self.tools.iter().find(|t| t.name == name)
    }
}

fn check_result(
    r: &ResultDef,
    input_has: impl Fn(&str) -> bool,
) -> std::result::Result<(), String> {
    if r.text_as.as_deref().is_some_and(|k| k.is_empty()) {
        return Err("result.text_as must name a field".into());
    }
    if let Some(n) = &r.next {
        if r.text_as.is_some() {
            return Err("result.text_as and result.next do not go together".into());
        }
        match (n.from, n.path.as_deref()) {
            (NextFrom::Body, None | Some("")) => {
                return Err("result.next from the body needs a path".into())
            }
            (NextFrom::Last, None | Some("")) => {
                return Err("result.next from the last item needs a path".into())
            }
            (NextFrom::Link | NextFrom::Offset | NextFrom::Page, Some(_)) => {
                return Err(format!("result.next from {:?} takes no path", n.from))
            }
            _ => {}
        }
        if n.param.as_deref().is_some_and(|p| p.is_empty()) {
            return Err("result.next.param must not be empty".into());
        }
        if n.more.as_deref().is_some_and(|p| p.is_empty()) {
            return Err("result.next.more must not be empty".into());
        }
        if n.total.as_deref().is_some_and(|p| p.is_empty()) {
            return Err("result.next.total must not be empty".into());
        }
        let counted = matches!(n.from, NextFrom::Offset | NextFrom::Page);
        if counted != n.start.is_some()
            || (n.size.is_some() && !(counted || n.from == NextFrom::Last))
            || (n.total.is_some() && !counted)
        {
            return Err(
                "result.next.start goes with from: offset or page (which need it), size with offset, page or last, total with offset or page"
                    .into(),
            );
        }
        if counted && n.as_ != NextAs::Page {
            return Err(format!(
                "result.next from {:?} answers next_page (as: page)",
                n.from
            ));
        }
        if counted && n.size.is_none() && n.more.is_none() && n.total.is_none() {
            return Err(format!(
                "result.next from {:?} needs size, more or total to know a page is not the last",
                n.from
            ));
        }
        if n.from == NextFrom::Page && n.total.is_some() && n.size.is_none() {
            return Err("result.next from page with total needs size".into());
        }
        for a in [&n.start, &n.size].into_iter().flatten() {
            if !input_has(a) {
                return Err(format!(
                    "result.next names {a:?} but the input schema has no such property"
                ));
            }
        }
    }
    Ok(())
}

fn check_request_line(method: &str, path: &str) -> std::result::Result<(), String> {
    if !METHODS.contains(&method) {
        return Err(format!("method {method:?} is not one of {METHODS:?}"));
    }
    if !path.starts_with('/') || path.contains("..") || path.contains("//") {
        return Err(format!(
            "path {path:?} must start with '/' and contain no '..' or '//'"
        ));
    }
    Ok(())
}
