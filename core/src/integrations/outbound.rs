//! Requests to an integration's API, built in one place: the integration's fixed headers, the
//! user's credential injected per auth type, the trace context when tracing is on, and for
//! custom apps (whose base URL the operator did not choose) the SSRF guard. Plugin tools,
//! connection probes and the curl proxy all send through here.

use crate::catalog::Credential;
use crate::egress::trace_context::{is_trace_header, trace_headers};
use crate::egress::{blocked_cause, PrivateAllowance};

use super::request::{self, Prepared};
use super::{AuthDef, Integration};

/// The HTTP client an integration talks through.
#[derive(Debug, Clone)]
pub struct Outbound {
    http: reqwest::Client,
    /// Custom apps: IP-literal hosts in blocked ranges are refused here; names are refused by
    /// the guarded client's resolver.
    guard: Option<PrivateAllowance>,
}

impl Outbound {
    /// For shipped plugins: the operator configured their base URLs.
    pub fn trusted(http: reqwest::Client) -> Outbound {
        Outbound { http, guard: None }
    }

    /// For custom apps: `http` must be the guarded client (checked resolver, no redirects).
    pub fn guarded(http: reqwest::Client, allowance: PrivateAllowance) -> Outbound {
        Outbound {
            http,
            guard: Some(allowance),
        }
    }

    /// Why `url` may not be reached when its host is a blocked IP literal (guarded only).
    pub fn blocked_reason(&self, url: &url::Url) -> Option<&'static str> {
        self.guard.as_ref()?.check_url_host(url)
    }

    fn check(&self, url: &url::Url) -> Result<(), SendError> {
        match self.blocked_reason(url) {
            Some(reason) => Err(SendError::Blocked(format!(
                "refusing to connect to {}: {reason}",
                url.host_str().unwrap_or_default()
            ))),
            None => Ok(()),
        }
    }
}

/// Why a request did not get an answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SendError {
    /// The destination is on a blocked address (custom apps only).
    Blocked(String),
    /// Transport failure: refused, timed out, reset.
    Unreachable(String),
}

impl std::fmt::Display for SendError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SendError::Blocked(m) | SendError::Unreachable(m) => f.write_str(m),
        }
    }
}

impl Integration {
    /// Adds the credential where the integration's auth type puts it.
    pub fn authorize(&self, p: &mut Prepared, credential: &Credential) {
        match &self.def.auth {
            AuthDef::Oauth2 { inject, .. } | AuthDef::ApiKey { inject, .. } => {
                request::inject(p, inject, credential.token())
            }
            AuthDef::Cookie { cookie_name, .. } => p.headers.push((
                "Cookie".into(),
                format!("{cookie_name}={}", credential.token()),
            )),
            AuthDef::None => {}
        }
    }

    /// The client for the OAuth token endpoint (exchange and refresh), after the same check.
    pub fn token_client(&self, token_url: &str) -> Result<&reqwest::Client, SendError> {
        let url = url::Url::parse(token_url)
            .map_err(|e| SendError::Unreachable(format!("token URL: {e}")))?;
        self.outbound.check(&url)?;
        Ok(&self.outbound.http)
    }

    /// A request builder for `p` (method, URL, the integration's headers, then `p`'s); the body
    /// is the caller's. A header `p` sets replaces the integration's default of that name (an
    /// `Accept` sent through the curl proxy wins over GitHub's), repeated ones in `p` are kept.
    /// Refuses blocked IP-literal destinations of custom apps. With tracing on, the request
    /// carries the current trace context, replacing any `traceparent` / `tracestate` in `p`.
    pub fn builder(&self, p: &Prepared) -> Result<reqwest::RequestBuilder, SendError> {
        self.outbound.check(&p.url)?;
        let mut builder = self.outbound.http.request(p.method.clone(), p.url.clone());
        let trace = trace_headers();
        let replaced = |name: &str| !trace.is_empty() && is_trace_header(name);
        for (k, v) in &self.def.headers {
            if !p
                .headers
                .iter()
                .any(|(name, _)| name.eq_ignore_ascii_case(k))
                && !replaced(k)
            {
                builder = builder.header(k, v);
            }
        }
        for (k, v) in p.headers.iter().filter(|(k, _)| !replaced(k)) {
            builder = builder.header(k, v);
        }
        for (k, v) in trace {
            builder = builder.header(k, v);
        }
        Ok(builder)
    }

    /// Sends `builder`, naming a refused destination or a transport failure without the URL
    /// (which can carry a credential in its query).
    pub async fn send(
        &self,
        builder: reqwest::RequestBuilder,
    ) -> Result<reqwest::Response, SendError> {
        builder.send().await.map_err(|e| {
            if let Some((host, reason)) = blocked_cause(&e) {
                return SendError::Blocked(format!("refusing to connect to {host}: {reason}"));
            }
            let why = if e.is_timeout() {
                "timed out".to_string()
            } else if e.is_connect() {
                "cannot connect".to_string()
            } else {
                e.without_url().to_string()
            };
            SendError::Unreachable(format!("{} is unreachable: {why}", self.def.display_name))
        })
    }
}
