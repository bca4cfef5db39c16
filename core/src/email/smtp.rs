//! The operator's SMTP server (`--smtp-url`): checked once at start, one pooled connection set
//! shared by every project, and its failures sorted into "refused" (the server said no) and
//! "unreachable" (nothing was said). The URL's credentials never appear in what is shown.

use std::time::Duration;

use lettre::transport::smtp::Error as SmtpError;
use lettre::{AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};

/// How long one SMTP conversation may take, connect to final reply.
const SMTP_TIMEOUT: Duration = Duration::from_secs(30);

/// A checked `--smtp-url`. Its Debug form hides the credentials.
#[derive(Clone)]
pub struct SmtpUrl {
    url: String,
    /// `scheme://host[:port]`, for operators' logs and messages.
    shown: String,
}

impl std::fmt::Debug for SmtpUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("SmtpUrl").field(&self.shown).finish()
    }
}

impl SmtpUrl {
    /// The mail server of an `smtp://` (plain, or `?tls=required` / `?tls=opportunistic` for
    /// STARTTLS) or `smtps://` (TLS from the first byte) URL, with optional `user:password@`.
    /// Credentials over a connection that is never encrypted are refused unless the server is
    /// on loopback. The reason never repeats the password.
    pub fn parse(url: &str) -> Result<SmtpUrl, String> {
        let parsed = url::Url::parse(url.trim()).map_err(|e| format!("not a URL ({e})"))?;
        let tls = parsed
            .query_pairs()
            .find(|(k, _)| k == "tls")
            .map(|(_, v)| v.into_owned());
        match (parsed.scheme(), tls.as_deref()) {
            ("smtp", None | Some("required" | "opportunistic")) | ("smtps", None) => {}
            _ => return Err("expected smtp://host[:port] (add ?tls=required for STARTTLS) or smtps://host[:port]".into()),
        }
        let Some(host) = parsed.host_str().filter(|h| !h.is_empty()) else {
            return Err("the URL has no host".into());
        };
        let plain = parsed.scheme() == "smtp" && tls.is_none();
        let loopback = match parsed.host() {
            Some(url::Host::Ipv4(a)) => a.is_loopback(),
            Some(url::Host::Ipv6(a)) => a.is_loopback(),
            // smtp: is not a special scheme, so an address literal arrives as an opaque host.
            Some(url::Host::Domain(d)) => {
                d == "localhost"
                    || d.trim_start_matches('[')
                        .trim_end_matches(']')
                        .parse::<std::net::IpAddr>()
                        .is_ok_and(|a| a.is_loopback())
            }
            None => false,
        };
        if plain && parsed.password().is_some() && !loopback {
            return Err(
                "credentials would travel unencrypted; use smtps:// or add ?tls=required".into(),
            );
        }
        if !parsed.username().is_empty() && parsed.password().is_none() {
            return Err("a user name needs a password (smtp://user:password@host)".into());
        }
        // What lettre itself would refuse (a TLS setting it cannot build), refused now.
        AsyncSmtpTransport::<Tokio1Executor>::from_url(parsed.as_str())
            .map_err(|_| "lettre cannot use this URL".to_owned())?;
        let port = parsed.port().map(|p| format!(":{p}")).unwrap_or_default();
        Ok(SmtpUrl {
            url: parsed.to_string(),
            shown: format!("{}://{host}{port}", parsed.scheme()),
        })
    }

    /// The server without credentials, e.g. `smtps://mail.example.com:465`.
    pub fn shown(&self) -> &str {
        &self.shown
    }
}

/// The configured mail server: one pool of connections shared by every project.
#[derive(Clone)]
pub struct Mailer {
    transport: AsyncSmtpTransport<Tokio1Executor>,
    shown: String,
}

/// How sending failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SmtpFailure {
    /// The server answered no for good (5xx): the code and its text.
    Refused(String),
    /// The server answered "not now" (4xx).
    Deferred(String),
    /// No answer: connection, TLS or timeout.
    Unreachable,
}

impl Mailer {
    /// Starts the pool (its cleanup task needs a running Tokio runtime).
    pub fn new(url: &SmtpUrl) -> crate::Result<Mailer> {
        let transport = AsyncSmtpTransport::<Tokio1Executor>::from_url(&url.url)
            .map_err(|e| crate::Error::internal(format!("smtp transport for {}: {e}", url.shown)))?
            .timeout(Some(SMTP_TIMEOUT))
            .build();
        Ok(Mailer {
            transport,
            shown: url.shown.clone(),
        })
    }

    pub fn shown(&self) -> &str {
        &self.shown
    }

    /// Hands the message to the server; Ok once it has accepted it for delivery.
    pub async fn send(&self, message: Message) -> Result<(), SmtpFailure> {
        match self.transport.send(message).await {
            Ok(_) => Ok(()),
            Err(e) => Err(classify(&self.shown, &e)),
        }
    }
}

fn classify(server: &str, e: &SmtpError) -> SmtpFailure {
    let text = || {
        // "permanent error (550): mailbox unavailable" → "550 mailbox unavailable".
        let full = e.to_string();
        let reply = full
            .split_once("): ")
            .map(|(_, r)| r.trim().to_owned())
            .unwrap_or_default();
        let code = e.status().map(|c| c.to_string()).unwrap_or_default();
        let mut s = format!("{code} {reply}").trim().to_owned();
        s.truncate(300);
        s
    };
    if e.is_permanent() {
        SmtpFailure::Refused(text())
    } else if e.is_transient() {
        SmtpFailure::Deferred(text())
    } else {
        tracing::warn!(server, error = %e, "the mail server could not be reached");
        SmtpFailure::Unreachable
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn smtp_urls_are_checked_before_start() {
        assert_eq!(
            SmtpUrl::parse("smtps://u:p@mail.example.com:465")
                .unwrap()
                .shown(),
            "smtps://mail.example.com:465"
        );
        assert!(SmtpUrl::parse("smtp://u:p@mail.example.com?tls=required").is_ok());
        assert!(SmtpUrl::parse("smtp://u:p@127.0.0.1:2525").is_ok());
        let err = SmtpUrl::parse("smtp://u:secret-pass@mail.example.com").unwrap_err();
        assert!(
            err.contains("unencrypted") && !err.contains("secret-pass"),
            "{err}"
        );
        assert!(SmtpUrl::parse("http://mail.example.com").is_err());
        assert!(SmtpUrl::parse("smtp://mail.example.com?tls=maybe").is_err());
        assert!(SmtpUrl::parse("smtp://user@mail.example.com?tls=required").is_err());
        assert!(!format!(
            "{:?}",
            SmtpUrl::parse("smtps://u:hunter2@mail.example.com").unwrap()
        )
        .contains("hunter2"));
    }
}
