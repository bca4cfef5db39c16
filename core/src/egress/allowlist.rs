//! Egress allowlist patterns: `api.example.com`, `*.example.com` (subdomains only), either with
//! an optional `:port`; IP literals too (`10.0.0.5:8080`), still subject to the address checks.

use crate::{Error, Result};

/// Normalises and checks a pattern an admin entered.
pub fn validate_pattern(raw: &str) -> Result<String> {
    let p = raw.trim().to_ascii_lowercase();
    let bad = || {
        Error::invalid(format!(
            "invalid egress pattern {raw:?}; use host, *.domain, optionally with :port"
        ))
    };
    if p.is_empty() || p.len() > 260 {
        return Err(bad());
    }
    let (host, port) = split_port(&p).ok_or_else(bad)?;
    let name = host.strip_prefix("*.").unwrap_or(host);
    let is_ip = name
        .trim_start_matches('[')
        .trim_end_matches(']')
        .parse::<std::net::IpAddr>()
        .is_ok();
    let valid_name = !name.is_empty()
        && name.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        });
    if (host.starts_with("*.") && is_ip) || !(valid_name || is_ip) {
        return Err(bad());
    }
    let _ = port;
    Ok(p)
}

fn split_port(p: &str) -> Option<(&str, Option<u16>)> {
    if p.starts_with('[') {
        // [v6]:port
        let end = p.find(']')?;
        let host = &p[..=end];
        return match &p[end + 1..] {
            "" => Some((host, None)),
            rest => rest
                .strip_prefix(':')?
                .parse()
                .ok()
                .map(|port| (host, Some(port))),
        };
    }
    match p.rsplit_once(':') {
        Some((h, port)) if !h.contains(':') => port.parse().ok().map(|port| (h, Some(port))),
        Some(_) => Some((p, None)),
        None => Some((p, None)),
    }
}

/// True when `host:port` (host as the URL parser normalised it) matches one of the patterns.
pub fn host_matches(patterns: &[String], host: &str, port: u16) -> bool {
    let host = host.to_ascii_lowercase();
    patterns.iter().any(|pattern| {
        let Some((p_host, p_port)) = split_port(pattern) else {
            return false;
        };
        if p_port.is_some_and(|pp| pp != port) {
            return false;
        }
        match p_host.strip_prefix("*.") {
            Some(suffix) => {
                host.len() > suffix.len() + 1
                    && host.ends_with(suffix)
                    && host.as_bytes()[host.len() - suffix.len() - 1] == b'.'
            }
            None => p_host == host,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_match_hosts_and_ports() {
        let p = vec![
            "api.example.com".to_string(),
            "*.corp.example".to_string(),
            "127.0.0.1:8080".to_string(),
        ];
        assert!(host_matches(&p, "api.example.com", 443));
        assert!(host_matches(&p, "API.example.com", 80));
        assert!(!host_matches(&p, "evil.api.example.com", 443));
        assert!(!host_matches(&p, "api.example.com.evil", 443));
        assert!(host_matches(&p, "git.corp.example", 443));
        assert!(!host_matches(&p, "corp.example", 443));
        assert!(!host_matches(&p, "evilcorp.example", 443));
        assert!(host_matches(&p, "127.0.0.1", 8080));
        assert!(!host_matches(&p, "127.0.0.1", 8081));
    }

    #[test]
    fn patterns_are_validated() {
        assert_eq!(
            validate_pattern(" API.Example.com ").unwrap(),
            "api.example.com"
        );
        for ok in [
            "*.example.com",
            "example.com:8443",
            "10.0.0.5",
            "127.0.0.1:9000",
            "[::1]:80",
        ] {
            assert!(validate_pattern(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "*",
            "*.",
            "http://x.com",
            "x.com/path",
            "a..b",
            "-a.com",
            "x.com:99999",
            "*.10.0.0.1",
            "a b.com",
        ] {
            assert!(validate_pattern(bad).is_err(), "{bad}");
        }
    }
}
