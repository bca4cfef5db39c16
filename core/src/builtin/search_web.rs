//! `search.web`: a web search through the provider the operator configured — a SearXNG
//! instance (its JSON API) or the Brave Search API — sent by the guarded client (address rules
//! on the provider and every redirect; the project's egress allowlist is for agents' own
//! destinations, not this one). Results come back in one shape whichever provider answered.

use async_trait::async_trait;
use serde_json::{json, Value};
use zeroize::Zeroizing;

use super::make_spec;
use crate::catalog::{CallContext, HandlerError, SideEffects, ToolHandler, ToolSpec};
use crate::egress::{FetchError, FetchRequest, GuardedClient};
use crate::Result;

/// The Brave Search API's web search endpoint.
pub const BRAVE_DEFAULT_URL: &str = "https://api.search.brave.com/res/v1/web/search";
/// Largest provider answer read.
const MAX_ANSWER_BYTES: usize = 2 * 1024 * 1024;
pub const MAX_COUNT: u64 = 20;

/// Which search service answers `search.web` (an operator setting).
#[derive(Clone)]
pub enum SearchProvider {
    /// A SearXNG instance, by its base URL (the JSON format must be enabled in its settings).
    Searxng { base_url: url::Url },
    /// The Brave Search API with a subscription token (from `BRAVE_SEARCH_API_KEY`).
    Brave {
        url: url::Url,
        api_key: Zeroizing<String>,
    },
}

impl std::fmt::Debug for SearchProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SearchProvider::Searxng { base_url } => write!(f, "Searxng({base_url})"),
            SearchProvider::Brave { url, .. } => write!(f, "Brave({url}, key hidden)"),
        }
    }
}

impl SearchProvider {
    /// A SearXNG instance at `base_url` (a path is kept: `https://host/searx/search`).
    pub fn searxng(mut base_url: url::Url) -> SearchProvider {
        if !base_url.path().ends_with('/') {
            let path = format!("{}/", base_url.path());
            base_url.set_path(&path);
        }
        SearchProvider::Searxng { base_url }
    }

    /// The Brave Search API at `url` with the subscription token `api_key`.
    pub fn brave(url: url::Url, api_key: String) -> SearchProvider {
        SearchProvider::Brave {
            url,
            api_key: Zeroizing::new(api_key),
        }
    }

    fn name(&self) -> &'static str {
        match self {
            SearchProvider::Searxng { .. } => "SearXNG",
            SearchProvider::Brave { .. } => "Brave Search",
        }
    }
}

pub fn spec() -> Result<ToolSpec> {
    make_spec(
        "search.web",
        "Search the web (internet search engine) for pages, news and articles about a query, optionally on one site or from the last day, \
         week or month: each result's title, url, a snippet of its text and when it was published, when known.",
        SideEffects::Network,
        json!({
            "type": "object",
            "required": ["query"],
            "additionalProperties": false,
            "properties": {
                "query": { "type": "string", "minLength": 1, "maxLength": 400, "description": "What to search for, as you would type it into a search engine." },
                "count": { "type": "integer", "minimum": 1, "maximum": MAX_COUNT, "default": 10, "description": "How many results to return." },
                "site": {
                    "type": "string", "minLength": 1, "maxLength": 253,
                    "pattern": "^[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*$",
                    "description": "Only results from this site, e.g. docs.rs"
                },
                "freshness": { "type": "string", "enum": ["day", "week", "month"], "description": "Only results from the last day, week or month." }
            }
        }),
        Some(json!({
            "type": "object",
            "properties": {
                "results": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "title": { "type": "string" }, "url": { "type": "string" },
                            "snippet": { "type": "string" }, "published": { "type": "string" }
                        }
                    }
                }
            }
        })),
    )
}

/// Why search.web is unavailable without a provider: what the catalog shows and a call answers.
pub(super) const NOT_CONFIGURED: &str = "no search provider is configured: the operator sets --searxng-url (WB_SEARXNG_URL, a SearXNG instance with the json format enabled) \
     or --brave-search-api-key (BRAVE_SEARCH_API_KEY, the Brave Search API) and restarts workbench";

pub struct SearchWeb {
    pub http: GuardedClient,
    pub provider: Option<SearchProvider>,
}

/// Removes HTML tags and decodes the common entities (providers mark the matched words up).
fn plain(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut in_tag = false;
    for c in s.chars() {
        match c {
            '<' => in_tag = true,
            '>' if in_tag => in_tag = false,
            c if !in_tag => out.push(c),
            _ => {}
        }
    }
    out.replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&#x27;", "'")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&nbsp;", " ")
        .replace("&amp;", "&")
}

fn text(v: &Value) -> Option<String> {
    v.as_str()
        .map(plain)
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
}

/// One result in the tool's shape, from the provider's fields.
fn result(title: &Value, url: &Value, snippet: &Value, published: &Value) -> Option<Value> {
    let url = url
        .as_str()
        .filter(|u| u.starts_with("http://") || u.starts_with("https://"))?;
    let mut o = json!({
        "title": text(title).unwrap_or_else(|| url.to_owned()),
        "url": url,
        "snippet": text(snippet).unwrap_or_default(),
    });
    if let Some(p) = published.as_str().filter(|p| !p.trim().is_empty()) {
        o["published"] = json!(p.trim());
    }
    Some(o)
}

#[async_trait]
impl ToolHandler for SearchWeb {
    async fn call(&self, ctx: &CallContext<'_>, args: Value) -> Result<Value, HandlerError> {
        let Some(provider) = &self.provider else {
            return Err(HandlerError::Unavailable(NOT_CONFIGURED.into()));
        };
        let mut query = args["query"].as_str().unwrap_or_default().trim().to_owned();
        if query.is_empty() {
            return Err(HandlerError::invalid("/query", "the query is empty"));
        }
        if let Some(site) = args["site"].as_str() {
            query.push_str(&format!(" site:{site}"));
        }
        let count = args["count"].as_u64().unwrap_or(10).clamp(1, MAX_COUNT) as usize;
        let freshness = args["freshness"].as_str();
        let (url, headers) = match provider {
            SearchProvider::Searxng { base_url } => {
                let mut url = base_url.join("search").map_err(|e| {
                    HandlerError::Unavailable(format!("the SearXNG url is unusable: {e}"))
                })?;
                {
                    let mut q = url.query_pairs_mut();
                    q.append_pair("q", &query).append_pair("format", "json");
                    if let Some(f) = freshness {
                        q.append_pair("time_range", f);
                    }
                }
                (
                    url,
                    vec![("accept".to_owned(), "application/json".to_owned())],
                )
            }
            SearchProvider::Brave { url, api_key } => {
                let mut url = url.clone();
                {
                    let mut q = url.query_pairs_mut();
                    q.append_pair("q", &query)
                        .append_pair("count", &count.to_string());
                    if let Some(f) = freshness {
                        q.append_pair(
                            "freshness",
                            match f {
                                "day" => "pd",
                                "week" => "pw",
                                _ => "pm",
                            },
                        );
                    }
                }
                (
                    url,
                    vec![
                        ("accept".to_owned(), "application/json".to_owned()),
                        ("x-subscription-token".to_owned(), api_key.to_string()),
                    ],
                )
            }
        };
        let request = FetchRequest {
            method: reqwest::Method::GET,
            url: url.to_string(),
            headers,
            body: None,
            secret_headers: vec!["x-subscription-token".into()],
            secret_body: false,
        };
        let name = provider.name();
        let res = self.http.fetch_configured(request, MAX_ANSWER_BYTES).await.map_err(|e| match e {
            FetchError::Blocked { host, reason } => HandlerError::failed(format!(
                "refusing to connect to the search provider {host}: {reason}; the operator can allow its address with --egress-allow-private"
            )),
            FetchError::TooLarge(n) => HandlerError::failed(format!("the {name} answer was larger than {n} bytes")),
            other => HandlerError::failed(format!("the search provider {name} could not be reached: {other}")),
        })?;
        ctx.add_egress(res.transferred);
        if !(200..300).contains(&res.status) {
            let hint = match (provider, res.status) {
                (SearchProvider::Searxng { .. }, 403) => "; enable the json format in SearXNG's settings.yml (search: formats: [html, json])",
                (SearchProvider::Brave { .. }, 401 | 403) => "; check BRAVE_SEARCH_API_KEY",
                (_, 429) => "; the provider's rate limit was reached, try again later",
                _ => "",
            };
            return Err(HandlerError::failed(format!(
                "the search provider {name} answered HTTP {}{hint}",
                res.status
            )));
        }
        let answer: Value = serde_json::from_slice(&res.body).map_err(|_| {
            HandlerError::failed(format!(
                "the search provider {name} answered something that is not JSON"
            ))
        })?;
        let results: Vec<Value> = match provider {
            SearchProvider::Searxng { .. } => answer["results"]
                .as_array()
                .map(|list| {
                    list.iter()
                        .filter_map(|r| {
                            result(&r["title"], &r["url"], &r["content"], &r["publishedDate"])
                        })
                        .collect()
                })
                .unwrap_or_default(),
            SearchProvider::Brave { .. } => answer["web"]["results"]
                .as_array()
                .map(|list| {
                    list.iter()
                        .filter_map(|r| {
                            result(&r["title"], &r["url"], &r["description"], &r["page_age"])
                        })
                        .collect()
                })
                .unwrap_or_default(),
        };
        Ok(json!({ "results": results.into_iter().take(count).collect::<Vec<_>>() }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_is_removed_from_snippets() {
        assert_eq!(
            plain("Use <strong>tokio</strong> &amp; <em>axum</em> &lt;3"),
            "Use tokio & axum <3"
        );
    }

    #[test]
    fn a_result_without_an_http_url_is_dropped_and_a_missing_title_falls_back_to_the_url() {
        assert!(result(
            &json!("t"),
            &json!("javascript:alert(1)"),
            &json!(""),
            &Value::Null
        )
        .is_none());
        let r = result(
            &Value::Null,
            &json!("https://x.example/"),
            &Value::Null,
            &json!(""),
        )
        .unwrap();
        assert_eq!(
            r,
            json!({ "title": "https://x.example/", "url": "https://x.example/", "snippet": "" })
        );
    }
}
