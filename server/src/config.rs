//! Server configuration: the `serve` flags (each with a `WB_…` variable) and what is derived
//! from them once at start (public origin, cookie security, proxy trust). Flags that do not
//! make a usable configuration are [`ConfigError`]s.
#![allow(clippy::result_large_err)] // ConfigError is made once, at start-up (see its doc).

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Args;
use url::Url;
use workbench_core::egress::AddrRange;

pub const DEFAULT_DATABASE_URL: &str = "sqlite://workbench.db";
pub const DEFAULT_DATA_DIR: &str = "workbench-data";
pub const DEFAULT_BIND: &str = "127.0.0.1:3000";

#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// Address and port to listen on.
    #[arg(long, env = "WB_BIND", default_value = DEFAULT_BIND)]
    pub bind: SocketAddr,
    /// Database URL: sqlite://FILE (embedded default, created if missing) or
    /// postgres://USER@HOST/DB (shared by several instances to scale out).
    #[arg(long, env = "WB_DATABASE_URL", default_value = DEFAULT_DATABASE_URL)]
    pub database_url: String,
    /// The URL people and agents reach workbench at (links in connect URLs, cookie security).
    /// Defaults to http://<bind>. An https URL turns on Secure, __Host- prefixed cookies.
    #[arg(long, env = "WB_PUBLIC_URL")]
    pub public_url: Option<Url>,
    /// This instance's own address as the other instances reach it (http(s)://host:port, e.g.
    /// the pod's IP): an MCP session lives on the instance that opened it, and the others
    /// forward its requests there. Unset: sessions are not forwarded (one instance, or a load
    /// balancer that routes on Mcp-Session-Id).
    #[arg(long, env = "WB_ADVERTISE_URL")]
    pub advertise_url: Option<Url>,
    /// Directory for key files (master key, token signing key), created with mode 0700; the
    /// files are created on first run with mode 0600 unless the keys come from the environment.
    #[arg(long, env = "WB_DATA_DIR", default_value = DEFAULT_DATA_DIR)]
    pub data_dir: PathBuf,
    /// Directory with the built portal assets (pkg/ with JS, WASM, CSS, plus public files).
    #[arg(long, env = "WB_SITE_ROOT", default_value = "target/site")]
    pub site_root: PathBuf,
    /// Trust the last X-Forwarded-For entry as the client address (only behind a proxy that
    /// sets it); otherwise the socket peer address is used for sign-in throttling.
    #[arg(long, env = "WB_TRUST_FORWARDED_FOR", default_value_t = false)]
    pub trust_forwarded_for: bool,
    /// Whether the portal accepts passwords: `off` when people sign in through an identity
    /// provider (single sign-on); break-glass accounts (`workbench admin create-user
    /// --break-glass`) still may.
    #[arg(long, env = "WB_PASSWORD_SIGN_IN", default_value = "on", value_parser = ["on", "off"])]
    pub password_sign_in: String,
    /// Where project storage (storage.put/get) keeps objects: file:///DIR, s3://BUCKET/PREFIX
    /// (AWS_* variables configure S3-compatible stores) or memory:///. Defaults to
    /// <data-dir>/objects.
    #[arg(long, env = "WB_OBJECT_STORE_URL")]
    pub object_store_url: Option<String>,
    /// Private addresses or CIDR blocks outbound requests (http.fetch) may reach anyway,
    /// comma-separated, e.g. 10.0.0.5,192.168.7.0/24. Off by default: private, loopback,
    /// link-local and metadata addresses are refused.
    #[arg(long, env = "WB_EGRESS_ALLOW_PRIVATE", value_delimiter = ',')]
    pub egress_allow_private: Vec<AddrRange>,
    /// Programs stdio MCP servers may run, comma-separated: absolute paths, or names looked up
    /// on PATH at start (e.g. npx,uvx,/opt/mcp/bin/server). Empty (the default): admins cannot
    /// register stdio servers. Each runs as this user, confined (see docs/features.md).
    #[arg(long, env = "WB_STDIO_COMMANDS", value_delimiter = ',')]
    pub stdio_commands: Vec<String>,
    /// Extra Host names /mcp accepts besides the public URL's host and loopback names
    /// (DNS-rebinding protection), comma-separated.
    #[arg(long, env = "WB_ALLOWED_HOSTS", value_delimiter = ',')]
    pub allowed_hosts: Vec<String>,
    /// How long a connect link (pending connection) stays valid, in seconds.
    #[arg(long, env = "CONNECT_TTL_SECONDS", default_value_t = 600, value_parser = clap::value_parser!(i64).range(30..=86400))]
    pub connect_ttl_seconds: i64,
    /// The largest result `POST /v1/tools/invoke` returns, in bytes of JSON; larger is 502.
    #[arg(long, env = "WB_REST_RESULT_MAX_BYTES", default_value_t = 10 * 1024 * 1024, value_parser = clap::value_parser!(u64).range(1024..=1024 * 1024 * 1024))]
    pub rest_result_max_bytes: u64,
    /// How long a call held for a person's confirmation waits for a decision, in seconds.
    #[arg(long, env = "CONFIRMATION_TTL_SECONDS", default_value_t = 900, value_parser = clap::value_parser!(i64).range(60..=604800))]
    pub confirmation_ttl_seconds: i64,
    /// The longest a curl proxy request (/c/…) may take, answer and body included, in seconds;
    /// past it the proxy answers 504 (or ends the stream).
    #[arg(long, env = "WB_PROXY_TIMEOUT_SECONDS", default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub proxy_timeout_seconds: u64,
    /// Curl proxy requests one user may have in flight at once; more answer 429.
    #[arg(long, env = "WB_PROXY_MAX_CONCURRENT_PER_USER", default_value_t = 8, value_parser = clap::value_parser!(u64).range(1..=1000))]
    pub proxy_max_concurrent_per_user: u64,
    /// A SearXNG instance search.web sends queries to (its JSON format enabled), e.g.
    /// http://searxng:8080. A private address must also be in --egress-allow-private.
    #[arg(long, env = "WB_SEARXNG_URL")]
    pub searxng_url: Option<Url>,
    /// A Brave Search API subscription token: search.web then uses the Brave Search API.
    #[arg(long, env = "BRAVE_SEARCH_API_KEY", hide_env_values = true)]
    pub brave_search_api_key: Option<String>,
    /// The Brave Search API endpoint (a proxy or a test double may stand in).
    #[arg(long, env = "WB_BRAVE_SEARCH_URL", default_value = workbench_core::builtin::BRAVE_DEFAULT_URL)]
    pub brave_search_url: Url,
    /// The SMTP server email.send delivers through: smtps://USER:PASSWORD@HOST:465 (TLS), or
    /// smtp://USER:PASSWORD@HOST:587?tls=required (STARTTLS). Unset: email.send is unavailable.
    #[arg(long, env = "WB_SMTP_URL", hide_env_values = true)]
    pub smtp_url: Option<String>,
    /// The DNS server sender-domain verification asks (IP or IP:PORT); defaults to the
    /// system's resolver (/etc/resolv.conf).
    #[arg(long, env = "WB_DNS_RESOLVER", value_parser = parse_dns_server)]
    pub dns_resolver: Option<SocketAddr>,
    /// Messages one project may send with email.send per rolling hour.
    #[arg(long, env = "WB_EMAIL_HOURLY_LIMIT", default_value_t = workbench_core::email::DEFAULT_HOURLY_LIMIT, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub email_hourly_limit: u32,
    /// Serve Prometheus metrics at /metrics to requests bearing this token
    /// (`Authorization: Bearer …`, at least 16 characters). Unset: /metrics is off.
    #[arg(long, env = "WB_METRICS_TOKEN", hide_env_values = true)]
    pub metrics_token: Option<String>,
    /// Export OpenTelemetry traces to this OTLP/HTTP collector, e.g. http://otel-collector:4318
    /// (spans go to <URL>/v1/traces, protobuf). Unset: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or
    /// OTEL_EXPORTER_OTLP_ENDPOINT when set, else no traces. OTEL_SERVICE_NAME overrides the
    /// service name (workbench).
    #[arg(long, env = "WB_OTLP_ENDPOINT")]
    pub otlp_endpoint: Option<String>,
}

/// `IP` (port 53) or `IP:PORT`.
fn parse_dns_server(s: &str) -> Result<SocketAddr, String> {
    let s = s.trim();
    if let Ok(a) = s.parse::<SocketAddr>() {
        return Ok(a);
    }
    s.trim_start_matches('[')
        .trim_end_matches(']')
        .parse::<std::net::IpAddr>()
        .map(|ip| SocketAddr::new(ip, 53))
        .map_err(|_| format!("{s:?} is not an IP address or IP:PORT"))
}

/// Why the `serve` flags do not make a usable configuration. Its variants quote the offending
/// URL whole; it is built once, at start-up, so its size costs nothing worth boxing for.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A program of --stdio-commands that is not an executable file.
    #[error("invalid --stdio-commands (WB_STDIO_COMMANDS) entry {entry:?}: {reason}")]
    StdioCommand { entry: String, reason: String },
    /// Several of the above at once, one per line.
    #[error("{}", .0.iter().map(|e| e.to_string()).collect::<Vec<_>>().join("\n"))]
    Several(Vec<ConfigError>),
    /// A metrics token too short to be a secret.
    #[error("--metrics-token must be at least 16 characters (it guards /metrics)")]
    MetricsToken,
    /// No `--public-url`, and `http://<bind>` does not parse as a URL.
    #[error("cannot derive a public url from --bind: {0}")]
    DerivePublicUrl(#[source] url::ParseError),
    /// The public URL is not `http(s)://host[:port]`.
    #[error("invalid --public-url {url}; expected http(s)://host[:port]")]
    InvalidPublicUrl { url: Url },
    /// The advertised URL is not `http(s)://host[:port]` with nothing after it.
    #[error("invalid --advertise-url {url}; expected http(s)://host[:port]")]
    InvalidAdvertiseUrl { url: Url },
    /// The data directory (for the default object store) cannot be made absolute.
    #[error("cannot resolve the data directory: {0}")]
    ResolveDataDir(#[source] std::io::Error),
    /// The default object store directory does not convert to a `file://` URL.
    #[error("cannot use {} as an object store directory", dir.display())]
    ObjectStoreDir { dir: PathBuf },
    /// Both search providers are configured.
    #[error("set one web search provider: --searxng-url (WB_SEARXNG_URL) or BRAVE_SEARCH_API_KEY, not both")]
    TwoSearchProviders,
    /// A search provider URL that search.web could never reach.
    #[error("invalid {flag} {url}: {reason}")]
    SearchProviderUrl {
        flag: &'static str,
        url: Url,
        reason: String,
    },
    /// An SMTP URL email.send could never use (the reason never repeats its password).
    #[error("invalid --smtp-url (WB_SMTP_URL): {0}")]
    SmtpUrl(String),
    /// An OTLP endpoint traces could never be sent to (the value is not repeated: it may be
    /// mistyped with a credential in it).
    #[error("invalid {source_name}: {reason}")]
    OtlpEndpoint {
        source_name: &'static str,
        reason: String,
    },
}

/// Where traces are exported, if anywhere: `--otlp-endpoint` / `WB_OTLP_ENDPOINT` (a collector's
/// base URL; `/v1/traces` is added unless the path already ends with it), else
/// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (used as is), else `OTEL_EXPORTER_OTLP_ENDPOINT` (a base
/// URL). `var` reads the environment. The URL must be http(s) with a host and no credentials
/// (headers go in `OTEL_EXPORTER_OTLP_HEADERS`).
pub fn otlp_traces_endpoint(
    args: &ServeArgs,
    var: impl Fn(&str) -> Option<String>,
) -> Result<Option<Url>, ConfigError> {
    let set = |v: Option<String>| v.map(|v| v.trim().to_owned()).filter(|v| !v.is_empty());
    let (source_name, value, base) = if let Some(v) = set(args.otlp_endpoint.clone()) {
        ("--otlp-endpoint (WB_OTLP_ENDPOINT)", v, true)
    } else if let Some(v) = set(var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")) {
        ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", v, false)
    } else if let Some(v) = set(var("OTEL_EXPORTER_OTLP_ENDPOINT")) {
        ("OTEL_EXPORTER_OTLP_ENDPOINT", v, true)
    } else {
        return Ok(None);
    };
    let bad = |reason: &str| ConfigError::OtlpEndpoint {
        source_name,
        reason: reason.to_owned(),
    };
    let mut url = Url::parse(&value).map_err(|_| {
        bad("not a URL; expected http(s)://host[:port], e.g. http://otel-collector:4318")
    })?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err(bad("expected http(s)://host[:port] of an OTLP/HTTP collector, e.g. http://otel-collector:4318"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(bad(
            "credentials do not belong in the url; put them in OTEL_EXPORTER_OTLP_HEADERS",
        ));
    }
    if base && !url.path().trim_end_matches('/').ends_with("/v1/traces") {
        let path = format!("{}/v1/traces", url.path().trim_end_matches('/'));
        url.set_path(&path);
    }
    Ok(Some(url))
}

/// What the running server needs from its configuration, derived once.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub bind: SocketAddr,
    pub public_url: Url,
    /// `scheme://host[:port]` of the public URL, as browsers send it in `Origin`.
    pub public_origin: String,
    pub secure_cookies: bool,
    pub trust_forwarded_for: bool,
    /// Whether the portal accepts passwords (off: break-glass accounts only).
    pub password_sign_in: bool,
    pub data_dir: PathBuf,
    pub site_root: PathBuf,
    pub object_store_url: String,
    pub egress_allow_private: Vec<AddrRange>,
    /// Host names /mcp answers to.
    pub allowed_hosts: Vec<String>,
    pub connect_ttl_secs: i64,
    pub confirmation_ttl_secs: i64,
    pub rest_result_max_bytes: usize,
    /// How often an instance picks up custom apps and MCP servers other instances added,
    /// changed or removed (10 s, so a change is everywhere within the documented 15 s).
    pub apps_reload_every: std::time::Duration,
    /// How often people signed in through identity providers are looked at for a re-check.
    pub sso_recheck_every: std::time::Duration,
    /// The longest a curl proxy request may take.
    pub proxy_timeout: std::time::Duration,
    /// Curl proxy requests one user may have in flight.
    pub proxy_max_concurrent_per_user: usize,
    /// Where search.web sends queries.
    pub web_search: Option<workbench_core::builtin::SearchProvider>,
    /// Whether this instance runs the delivery worker (due webhook events and scheduled
    /// callbacks, and retries; every instance does; tests drive delivery by hand).
    pub callback_worker: bool,
    /// The mail server, DNS server and hourly limit of email.send.
    pub email: workbench_core::email::EmailSettings,
    /// The bearer token /metrics requires; `None`: /metrics is off.
    pub metrics_token: Option<String>,
    /// The programs stdio MCP servers may run, and where they work.
    pub stdio: workbench_core::upstream::stdio::StdioSettings,
    /// Where traces are exported (the collector's `/v1/traces`); `None`: tracing is off.
    pub otlp_traces_endpoint: Option<Url>,
    /// This instance's address for the others (`scheme://host:port`), to which they forward
    /// the requests of MCP sessions it holds; `None`: no forwarding.
    pub advertise_url: Option<String>,
}

/// The search provider the flags select, checked the way search.web will use it: an
/// http(s) URL with a host, no credentials in it, and not an address the egress rules refuse.
fn web_search(
    args: &ServeArgs,
) -> Result<Option<workbench_core::builtin::SearchProvider>, ConfigError> {
    use workbench_core::builtin::SearchProvider;
    let key = args
        .brave_search_api_key
        .as_deref()
        .map(str::trim)
        .filter(|k| !k.is_empty());
    let (flag, url) = match (&args.searxng_url, key) {
        (Some(_), Some(_)) => return Err(ConfigError::TwoSearchProviders),
        (None, None) => return Ok(None),
        (Some(u), None) => ("--searxng-url", u),
        (None, Some(_)) => ("--brave-search-url", &args.brave_search_url),
    };
    let bad = |reason: String| {
        let mut shown = url.clone();
        let _ = shown.set_username("");
        let _ = shown.set_password(None);
        ConfigError::SearchProviderUrl {
            flag,
            url: shown,
            reason,
        }
    };
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err(bad("expected http(s)://host[:port][/path]".into()));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(bad("credentials do not belong in the url".into()));
    }
    let allowance = workbench_core::egress::PrivateAllowance(args.egress_allow_private.clone());
    if let Some(reason) = allowance.check_url_host(url) {
        return Err(bad(format!(
            "{reason}; add its address to --egress-allow-private to allow it"
        )));
    }
    Ok(Some(match key {
        Some(k) => SearchProvider::brave(url.clone(), k.to_owned()),
        None => SearchProvider::searxng(url.clone()),
    }))
}

/// The programs of --stdio-commands as absolute paths of executable files (names are looked
/// up on PATH now), and `<data-dir>/stdio` as the servers' working root.
fn stdio_settings(
    entries: &[String],
    data_dir: &std::path::Path,
) -> Result<workbench_core::upstream::stdio::StdioSettings, ConfigError> {
    use std::os::unix::fs::PermissionsExt;
    let mut commands = Vec::new();
    for entry in entries.iter().map(|e| e.trim()).filter(|e| !e.is_empty()) {
        let bad = |reason: &str| ConfigError::StdioCommand {
            entry: entry.to_owned(),
            reason: reason.to_owned(),
        };
        let path = if entry.contains('/') {
            let p = PathBuf::from(entry);
            if !p.is_absolute() {
                return Err(bad("give an absolute path or a bare program name"));
            }
            p
        } else {
            std::env::var_os("PATH")
                .iter()
                .flat_map(std::env::split_paths)
                .map(|d| d.join(entry))
                .find(|p| p.is_file())
                .ok_or_else(|| bad("not found on PATH"))?
        };
        let meta = std::fs::metadata(&path).map_err(|e| bad(&e.to_string()))?;
        if !meta.is_file() || meta.permissions().mode() & 0o111 == 0 {
            return Err(bad("not an executable file"));
        }
        commands.push(path);
    }
    let work_root =
        std::path::absolute(data_dir.join("stdio")).map_err(ConfigError::ResolveDataDir)?;
    Ok(workbench_core::upstream::stdio::StdioSettings {
        commands,
        work_root,
    })
}

/// The value, or `None` with its problem noted.
fn keep<T>(problems: &mut Vec<ConfigError>, r: Result<T, ConfigError>) -> Option<T> {
    r.map_err(|e| problems.push(e)).ok()
}

impl ConfigError {
    /// One problem as itself, several as `Several`.
    fn all(mut problems: Vec<ConfigError>) -> ConfigError {
        if problems.len() == 1 {
            problems.remove(0)
        } else {
            ConfigError::Several(problems)
        }
    }
}

impl ServerConfig {
    /// The configuration the flags describe, or every problem with them (one message each).
    pub fn from_args(args: &ServeArgs) -> Result<ServerConfig, ConfigError> {
        // Each setting is checked on its own: a problem is noted and the next setting checked.
        let mut problems: Vec<ConfigError> = Vec::new();
        let public_url = match &args.public_url {
            Some(u) => Ok(u.clone()),
            None => {
                Url::parse(&format!("http://{}", args.bind)).map_err(ConfigError::DerivePublicUrl)
            }
        }
        .and_then(|u| match u.scheme() {
            "http" | "https" if u.host_str().is_some() => Ok(u),
            _ => Err(ConfigError::InvalidPublicUrl { url: u }),
        });
        let public_url = keep(&mut problems, public_url);
        let advertise_url = match &args.advertise_url {
            Some(u)
                if matches!(u.scheme(), "http" | "https")
                    && u.host_str().is_some()
                    && u.path() == "/"
                    && u.query().is_none()
                    && u.username().is_empty()
                    && u.password().is_none() =>
            {
                Some(u.origin().ascii_serialization())
            }
            Some(u) => keep(
                &mut problems,
                Err(ConfigError::InvalidAdvertiseUrl { url: u.clone() }),
            ),
            None => None,
        };
        let object_store_url = match &args.object_store_url {
            Some(u) => Ok(u.clone()),
            None => std::path::absolute(args.data_dir.join("objects"))
                .map_err(ConfigError::ResolveDataDir)
                .and_then(|dir| {
                    Url::from_directory_path(&dir)
                        .map(|u| u.to_string())
                        .map_err(|_| ConfigError::ObjectStoreDir { dir: dir.clone() })
                }),
        };
        let object_store_url = keep(&mut problems, object_store_url);
        let web_search = keep(&mut problems, web_search(args)).flatten();
        let smtp = match args
            .smtp_url
            .as_deref()
            .map(str::trim)
            .filter(|u| !u.is_empty())
        {
            Some(u) => keep(
                &mut problems,
                workbench_core::email::SmtpUrl::parse(u).map_err(ConfigError::SmtpUrl),
            ),
            None => None,
        };
        let metrics_token = match args
            .metrics_token
            .as_deref()
            .map(str::trim)
            .filter(|t| !t.is_empty())
        {
            Some(t) if t.chars().count() < 16 => {
                keep(&mut problems, Err(ConfigError::MetricsToken))
            }
            Some(t) => Some(t.to_owned()),
            None => None,
        };
        let otlp_traces_endpoint = keep(
            &mut problems,
            otlp_traces_endpoint(args, |k| std::env::var(k).ok()),
        )
        .flatten();
        let (Some(public_url), Some(object_store_url)) = (public_url, object_store_url) else {
            return Err(ConfigError::all(problems));
        };
        if !problems.is_empty() {
            return Err(ConfigError::all(problems));
        }
        let public_origin = public_url.origin().ascii_serialization();
        let mut allowed_hosts: Vec<String> =
            vec!["localhost".into(), "127.0.0.1".into(), "::1".into()];
        if let Some(h) = public_url.host_str() {
            allowed_hosts.push(h.trim_start_matches('[').trim_end_matches(']').to_owned());
        }
        allowed_hosts.extend(
            args.allowed_hosts
                .iter()
                .map(|h| h.trim().to_owned())
                .filter(|h| !h.is_empty()),
        );
        let stdio = stdio_settings(&args.stdio_commands, &args.data_dir)?;
        Ok(ServerConfig {
            advertise_url,
            stdio,
            metrics_token,
            otlp_traces_endpoint,
            web_search,
            email: workbench_core::email::EmailSettings {
                smtp,
                dns_server: args.dns_resolver,
                hourly_limit: args.email_hourly_limit,
            },
            callback_worker: true,
            object_store_url,
            egress_allow_private: args.egress_allow_private.clone(),
            allowed_hosts,
            connect_ttl_secs: args.connect_ttl_seconds,
            confirmation_ttl_secs: args.confirmation_ttl_seconds,
            rest_result_max_bytes: args.rest_result_max_bytes as usize,
            apps_reload_every: std::time::Duration::from_secs(10),
            sso_recheck_every: std::time::Duration::from_secs(60),
            proxy_timeout: std::time::Duration::from_secs(args.proxy_timeout_seconds),
            proxy_max_concurrent_per_user: args.proxy_max_concurrent_per_user as usize,
            bind: args.bind,
            secure_cookies: public_url.scheme() == "https",
            public_url,
            public_origin,
            trust_forwarded_for: args.trust_forwarded_for,
            password_sign_in: args.password_sign_in != "off",
            data_dir: args.data_dir.clone(),
            site_root: args.site_root.clone(),
        })
    }

    /// The public URL joined with an absolute path, without a doubled slash.
    pub fn public_link(&self, path: &str) -> String {
        format!("{}{}", self.public_url.as_str().trim_end_matches('/'), path)
    }

    /// This deployment as the authorization server of its own /mcp: the issuer is the public
    /// URL, the protected resource `<public>/mcp`.
    pub fn oauth_context(&self) -> workbench_core::oauth::OAuthContext {
        workbench_core::oauth::OAuthContext::for_public_url(self.public_url.as_str())
    }
}
