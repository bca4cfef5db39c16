//! What a sender domain is (a normalized DNS name, never an address literal) and the TXT record
//! that proves a project controls it.

use crate::crypto::random_base62;

/// Where the proof is published, under the domain.
pub const RECORD_LABEL: &str = "_workbench";
/// What the record's value starts with, before the project's token.
pub const RECORD_PREFIX: &str = "workbench-verification=";

/// The DNS name and value a project publishes to prove it controls `domain`.
pub fn txt_record(domain: &str, token: &str) -> (String, String) {
    (
        format!("{RECORD_LABEL}.{domain}"),
        format!("{RECORD_PREFIX}{token}"),
    )
}

pub fn new_token() -> String {
    random_base62(32)
}

/// `domain` as stored and compared: trimmed, without a trailing dot, lower-case, international
/// names in their ASCII (punycode) form. Refuses address literals, single labels and anything
/// that is not a DNS host name, saying why.
pub fn normalize(domain: &str) -> Result<String, String> {
    let text = domain.trim().trim_end_matches('.');
    if text.is_empty() {
        return Err("a domain is required, e.g. example.com".into());
    }
    if text.len() > 253 {
        return Err("a domain is at most 253 characters".into());
    }
    if text.contains(['@', '/', ':', ' ', '[', ']']) || text.chars().any(char::is_control) {
        return Err(format!(
            "{text:?} is not a domain name; give just the part after @, e.g. example.com"
        ));
    }
    let ascii = match url::Host::parse(text) {
        Ok(url::Host::Domain(d)) => d.to_ascii_lowercase(),
        Ok(_) => return Err(format!("{text} is an address, not a domain name")),
        Err(_) => return Err(format!("{text:?} is not a domain name")),
    };
    let labels: Vec<&str> = ascii.split('.').collect();
    if labels.len() < 2 {
        return Err(format!(
            "{ascii} is a single label; a sender domain has a dot, e.g. example.com"
        ));
    }
    for label in &labels {
        let ok = (1..=63).contains(&label.len())
            && label
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-')
            && !label.starts_with('-')
            && !label.ends_with('-');
        if !ok {
            return Err(format!("{ascii} is not a domain name (each part is 1 to 63 letters, digits or inner hyphens)"));
        }
    }
    if labels
        .last()
        .is_some_and(|tld| tld.bytes().all(|b| b.is_ascii_digit()))
    {
        return Err(format!("{ascii} is an address, not a domain name"));
    }
    Ok(ascii)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn domains_are_normalized_and_non_domains_refused() {
        assert_eq!(
            normalize(" Mail.Example.COM. ").unwrap(),
            "mail.example.com"
        );
        assert_eq!(
            normalize("bücher.example").unwrap(),
            "xn--bcher-kva.example"
        );
        for bad in [
            "",
            "localhost",
            "127.0.0.1",
            "[::1]",
            "user@example.com",
            "example.com/x",
            "-a.example",
            "a..example",
            "a b.example",
            "example.123",
        ] {
            assert!(normalize(bad).is_err(), "{bad:?} was accepted");
        }
        assert!(normalize(&format!("{}.example", "a".repeat(64))).is_err());
    }

    #[test]
    fn the_record_lives_under_the_domain_and_carries_the_token() {
        let (name, value) = txt_record("example.com", "tok");
        assert_eq!(name, "_workbench.example.com");
        assert_eq!(value, "workbench-verification=tok");
        assert_eq!(new_token().len(), 32);
    }
}
