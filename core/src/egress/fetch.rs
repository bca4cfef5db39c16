//! The guarded HTTP client. DNS goes through a resolver that refuses the whole name if any of
//! its addresses is in a blocked range and hands reqwest only checked addresses, so the address
//! checked is the address dialled; IP-literal hosts (in any spelling the URL parser accepts:
//! decimal, hex, octal, IPv6-mapped) are checked before the request. No proxy from the
//! environment is used and redirects are followed here, one checked hop at a time.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use reqwest::dns::{Addrs, Name, Resolve, Resolving};

use super::allowlist::host_matches;
use super::ranges::PrivateAllowance;

pub const MAX_REDIRECTS: usize = 5;

#[derive(Debug, Clone)]
pub struct FetchRequest {
    pub method: reqwest::Method,
    pub url: String,
    pub headers: Vec<(String, String)>,
    pub body: Option<Bytes>,
    /// Headers (by name) whose value carries a secret: like `Authorization`, they are not sent
    /// to another origin after a redirect.
    pub secret_headers: Vec<String>,
    /// The body carries a secret: a 307/308 redirect to another origin is refused rather than
    /// re-sending it there.
    pub secret_body: bool,
}

/// Headers never sent to another origin after a redirect (as curl and browsers do).
const CREDENTIAL_HEADERS: &[&str] = &["authorization", "cookie", "proxy-authorization"];

#[derive(Debug, Clone)]
pub struct FetchResponse {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Bytes,
    pub final_url: String,
    /// Bytes sent and received (bodies), for metering.
    pub transferred: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FetchError {
    #[error("invalid url: {0}")]
    InvalidUrl(String),
    #[error(
        "{0} is not in this project's egress allowlist; an admin can add it on the Egress page"
    )]
    NotAllowlisted(String),
    #[error("refusing to connect to {host}: {reason}")]
    Blocked { host: String, reason: String },
    #[error("response larger than {0} bytes")]
    TooLarge(usize),
    #[error("more than {MAX_REDIRECTS} redirects")]
    TooManyRedirects,
    #[error("request failed: {0}")]
    Transport(String),
    #[error("refusing to send a body that carries a secret to another origin after a redirect")]
    SecretBodyRedirect,
}

#[derive(Debug)]
struct BlockedAddress {
    host: String,
    reason: String,
}

impl std::fmt::Display for BlockedAddress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} resolves to a {}", self.host, self.reason)
    }
}

impl std::error::Error for BlockedAddress {}

/// How names become addresses (the system resolver; tests substitute a scripted one).
type Lookup = Arc<
    dyn Fn(String) -> futures::future::BoxFuture<'static, std::io::Result<Vec<SocketAddr>>>
        + Send
        + Sync,
>;

fn system_lookup() -> Lookup {
    Arc::new(|host: String| {
        Box::pin(async move { Ok(tokio::net::lookup_host((host.as_str(), 0)).await?.collect()) })
    })
}

/// Resolves once per connection and hands reqwest only the addresses it checked, so a name
/// that answers a public address to a check and a private one to the dial (DNS rebinding)
/// cannot slip through: there is no second resolution.
struct CheckedResolver {
    allowance: Arc<PrivateAllowance>,
    lookup: Lookup,
}

impl CheckedResolver {
    async fn checked(
        allowance: Arc<PrivateAllowance>,
        lookup: Lookup,
        host: String,
    ) -> Result<Vec<SocketAddr>, Box<dyn std::error::Error + Send + Sync>> {
        let addrs: Vec<SocketAddr> = lookup(host.clone()).await?;
        if addrs.is_empty() {
            return Err(format!("{host} has no addresses").into());
        }
        for a in &addrs {
            if let Some(reason) = allowance.check(a.ip()) {
                return Err(Box::new(BlockedAddress {
                    host,
                    reason: reason.to_owned(),
                }));
            }
        }
        Ok(addrs)
    }
}

impl Resolve for CheckedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let allowance = self.allowance.clone();
        let lookup = self.lookup.clone();
        Box::pin(async move {
            let host = name.as_str().to_owned();
            let addrs = CheckedResolver::checked(allowance, lookup, host).await?;
            Ok(Box::new(addrs.into_iter()) as Addrs)
        })
    }
}

#[derive(Clone)]
pub struct GuardedClient {
    client: reqwest::Client,
    allowance: Arc<PrivateAllowance>,
}

const FORBIDDEN_HEADERS: &[&str] = &[
    "host",
    "connection",
    "content-length",
    "transfer-encoding",
    "upgrade",
    "te",
    "trailer",
    "proxy-authorization",
    "proxy-connection",
    "keep-alive",
];

impl GuardedClient {
    pub fn new(allowance: PrivateAllowance) -> GuardedClient {
        let allowance = Arc::new(allowance);
        let client = reqwest::Client::builder()
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .dns_resolver(Arc::new(CheckedResolver {
                allowance: allowance.clone(),
                lookup: system_lookup(),
            }))
            .connect_timeout(Duration::from_secs(10))
            .user_agent(concat!("workbench/", env!("CARGO_PKG_VERSION")))
            .build()
            .expect("the HTTP client configuration is valid");
        GuardedClient { client, allowance }
    }

    /// The underlying client (checked resolver, no redirects, no proxy) for callers that build
    /// requests themselves; they must check IP-literal hosts on their own.
    pub fn reqwest(&self) -> reqwest::Client {
        self.client.clone()
    }

    /// Checks a URL against the allowlist and, for IP literals, the address ranges.
    pub fn check_url(&self, url: &url::Url, patterns: &[String]) -> Result<(), FetchError> {
        self.check_destination(url, Some(patterns))
    }

    /// `patterns: None` is a destination the operator configured (a search provider): no
    /// project allowlist applies, the address rules still do.
    fn check_destination(
        &self,
        url: &url::Url,
        patterns: Option<&[String]>,
    ) -> Result<(), FetchError> {
        if !matches!(url.scheme(), "http" | "https") {
            return Err(FetchError::InvalidUrl(
                "only http and https urls are allowed".into(),
            ));
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(FetchError::InvalidUrl(
                "credentials in the url are not allowed; send a header instead".into(),
            ));
        }
        let host = url
            .host()
            .ok_or_else(|| FetchError::InvalidUrl("the url has no host".into()))?;
        let port = url.port_or_known_default().unwrap_or(80);
        let name = match host {
            url::Host::Domain(d) => d.to_owned(),
            url::Host::Ipv4(v4) => v4.to_string(),
            url::Host::Ipv6(v6) => format!("[{v6}]"),
        };
        if patterns.is_some_and(|p| !host_matches(p, &name, port)) {
            return Err(FetchError::NotAllowlisted(if url.port().is_some() {
                format!("{name}:{port}")
            } else {
                name
            }));
        }
        if let Some(reason) = self.allowance.check_url_host(url) {
            return Err(FetchError::Blocked {
                host: name,
                reason: reason.to_owned(),
            });
        }
        Ok(())
    }

    /// Sends the request, following up to `MAX_REDIRECTS` redirects (each hop checked), and
    /// reads at most `max_body` bytes of the response.
    pub async fn fetch(
        &self,
        req: FetchRequest,
        patterns: &[String],
        max_body: usize,
    ) -> Result<FetchResponse, FetchError> {
        self.fetch_checked(req, Some(patterns), max_body).await
    }

    /// `fetch` to a destination the operator configured (not an agent's): the address rules
    /// apply to it and every redirect, the project's allowlist does not.
    pub async fn fetch_configured(
        &self,
        req: FetchRequest,
        max_body: usize,
    ) -> Result<FetchResponse, FetchError> {
        self.fetch_checked(req, None, max_body).await
    }

    async fn fetch_checked(
        &self,
        req: FetchRequest,
        patterns: Option<&[String]>,
        max_body: usize,
    ) -> Result<FetchResponse, FetchError> {
        let mut url =
            url::Url::parse(&req.url).map_err(|e| FetchError::InvalidUrl(e.to_string()))?;
        let origin = url.origin();
        let mut method = req.method.clone();
        let mut body = req.body.clone();
        let mut transferred: u64 = 0;
        for _hop in 0..=MAX_REDIRECTS {
            self.check_destination(&url, patterns)?;
            let cross_origin = url.origin() != origin;
            let mut builder = self.client.request(method.clone(), url.clone());
            for (k, v) in &req.headers {
                let name = k.to_ascii_lowercase();
                if FORBIDDEN_HEADERS.contains(&name.as_str()) {
                    continue;
                }
                if cross_origin
                    && (CREDENTIAL_HEADERS.contains(&name.as_str())
                        || req.secret_headers.iter().any(|h| h.eq_ignore_ascii_case(k)))
                {
                    continue;
                }
                builder = builder.header(k, v);
            }
            if cross_origin && body.is_some() && req.secret_body {
                return Err(FetchError::SecretBodyRedirect);
            }
            if let Some(b) = &body {
                transferred += b.len() as u64;
                builder = builder.body(b.clone());
            }
            let mut res = builder.send().await.map_err(|e| classify(&url, e))?;
            let status = res.status();
            if status.is_redirection() {
                if let Some(loc) = res
                    .headers()
                    .get(reqwest::header::LOCATION)
                    .and_then(|v| v.to_str().ok())
                {
                    url = url.join(loc).map_err(|e| {
                        FetchError::InvalidUrl(format!("bad redirect location: {e}"))
                    })?;
                    if matches!(status.as_u16(), 301..=303) && method != reqwest::Method::HEAD {
                        method = reqwest::Method::GET;
                        body = None;
                    }
                    continue;
                }
            }
            let headers = res
                .headers()
                .iter()
                .filter_map(|(k, v)| {
                    v.to_str()
                        .ok()
                        .map(|v| (k.as_str().to_owned(), v.to_owned()))
                })
                .collect();
            let mut buf = BytesMut::new();
            while let Some(chunk) = res.chunk().await.map_err(|e| classify(&url, e))? {
                transferred += chunk.len() as u64;
                if buf.len() + chunk.len() > max_body {
                    return Err(FetchError::TooLarge(max_body));
                }
                buf.extend_from_slice(&chunk);
            }
            return Ok(FetchResponse {
                status: status.as_u16(),
                headers,
                body: buf.freeze(),
                final_url: url.to_string(),
                transferred,
            });
        }
        Err(FetchError::TooManyRedirects)
    }
}

/// The host and reason when a request failed because the checked resolver refused the name.
pub fn blocked_cause(e: &reqwest::Error) -> Option<(String, String)> {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = source {
        if let Some(b) = err.downcast_ref::<BlockedAddress>() {
            return Some((b.host.clone(), b.reason.clone()));
        }
        source = err.source();
    }
    None
}

fn classify(url: &url::Url, e: reqwest::Error) -> FetchError {
    if let Some((host, reason)) = blocked_cause(&e) {
        return FetchError::Blocked { host, reason };
    }
    let host = url.host_str().unwrap_or("the host");
    if e.is_timeout() {
        FetchError::Transport(format!("{host} timed out"))
    } else if e.is_connect() {
        FetchError::Transport(format!("cannot connect to {host}"))
    } else {
        FetchError::Transport(format!("{host}: {}", e.without_url()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[tokio::test]
    async fn a_name_rebinding_to_a_private_address_is_refused_at_the_resolution_that_dials() {
        // The name answers a public address first, then loopback (as a rebinding DNS server
        // would between a check and a connect).
        let calls = Arc::new(AtomicUsize::new(0));
        let seen = calls.clone();
        let lookup: Lookup = Arc::new(move |_host: String| {
            let n = seen.fetch_add(1, Ordering::SeqCst);
            Box::pin(async move {
                let ip = if n == 0 { "93.184.216.34" } else { "127.0.0.1" };
                Ok(vec![SocketAddr::new(ip.parse().unwrap(), 0)])
            })
        });
        let allowance = Arc::new(PrivateAllowance(Vec::new()));
        let first =
            CheckedResolver::checked(allowance.clone(), lookup.clone(), "rebind.example".into())
                .await
                .unwrap();
        assert_eq!(
            first,
            vec![SocketAddr::new("93.184.216.34".parse().unwrap(), 0)],
            "what reqwest dials is exactly what was checked"
        );
        let second =
            CheckedResolver::checked(allowance.clone(), lookup.clone(), "rebind.example".into())
                .await
                .unwrap_err();
        assert!(
            second.to_string().contains("rebind.example resolves to a"),
            "{second}"
        );
        // A mixed answer is refused whole, not filtered.
        let mixed: Lookup = Arc::new(|_h: String| {
            Box::pin(async {
                Ok(vec![
                    SocketAddr::new("93.184.216.34".parse().unwrap(), 0),
                    SocketAddr::new("10.0.0.7".parse().unwrap(), 0),
                ])
            })
        });
        assert!(
            CheckedResolver::checked(allowance, mixed, "mixed.example".into())
                .await
                .is_err()
        );
        assert_eq!(
            calls.load(Ordering::SeqCst),
            2,
            "one lookup per resolution, never a second one behind the check"
        );
    }
}
