//! Outbound HTTP that cannot be turned against us (SSRF-safe): every destination must match
//! the project's egress allowlist, every address a name resolves to is checked against private,
//! loopback, link-local, metadata, CGNAT, multicast and translation ranges before dialling, the
//! checked address is the one dialled, and redirects are followed by hand, each hop checked
//! again. See README.md in this folder. Requests to plugin APIs and upstreams carry the trace
//! context (`trace_context`).

mod allowlist;
mod fetch;
mod ranges;
mod rules;
pub mod trace_context;

pub use allowlist::{host_matches, validate_pattern};
pub use fetch::{
    blocked_cause, FetchError, FetchRequest, FetchResponse, GuardedClient, MAX_REDIRECTS,
};
pub use ranges::{blocked_reason, AddrRange, PrivateAllowance};
pub use rules::EgressRules;

/// A registered URL as shown to whoever may not edit it: scheme, host, port and path only
/// (credentials can sit in the userinfo, the query or the fragment).
pub fn mask_url(raw: &str) -> String {
    match url::Url::parse(raw) {
        Ok(mut u) => {
            let had_extra = !u.username().is_empty()
                || u.password().is_some()
                || u.query().is_some()
                || u.fragment().is_some();
            let _ = u.set_username("");
            let _ = u.set_password(None);
            u.set_query(None);
            u.set_fragment(None);
            let mut out = u.to_string();
            if had_extra {
                out.push_str(" (parts hidden)");
            }
            out
        }
        Err(_) => "(hidden)".into(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn masked_urls_keep_where_they_point_and_drop_what_can_carry_a_credential() {
        assert_eq!(
            super::mask_url("https://api.example.com/mcp"),
            "https://api.example.com/mcp"
        );
        let masked = super::mask_url("https://user:pw@api.example.com:8443/mcp?token=abc#frag");
        assert_eq!(masked, "https://api.example.com:8443/mcp (parts hidden)");
        assert!(!masked.contains("pw") && !masked.contains("abc"));
        assert_eq!(super::mask_url("not a url with secret"), "(hidden)");
    }
}
