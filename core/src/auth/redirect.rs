//! Where a browser may be sent after signing in: a `next` parameter is honoured only when it is
//! a path on workbench's own origin. It is parsed with the URL parser against the public URL
//! (as a browser would resolve it) and the origins compared; control characters and
//! whitespace (which browsers strip, turning `/\t/evil.example` into `//evil.example`) and
//! backslashes are refused outright.

/// The local path (with query and fragment) to redirect to, or `/`.
pub fn safe_next(next: Option<&str>, public_url: &str) -> String {
    let Some(next) = next else { return "/".into() };
    if !next.starts_with('/')
        || next.contains('\\')
        || next.chars().any(|c| c.is_control() || c.is_whitespace())
    {
        return "/".into();
    }
    let Ok(base) = url::Url::parse(public_url) else {
        return "/".into();
    };
    let Ok(target) = base.join(next) else {
        return "/".into();
    };
    if target.origin() != base.origin() {
        return "/".into();
    }
    let mut out = target.path().to_owned();
    if out.starts_with("//") {
        return "/".into();
    }
    if let Some(q) = target.query() {
        out.push('?');
        out.push_str(q);
    }
    if let Some(f) = target.fragment() {
        out.push('#');
        out.push_str(f);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::safe_next;

    #[test]
    fn only_paths_on_our_own_origin_are_followed() {
        let base = "https://wb.example.com";
        for (next, expected) in [
            ("/api-keys", "/api-keys"),
            ("/audit?tool=x#top", "/audit?tool=x#top"),
            ("//evil.example/x", "/"),
            ("https://evil.example", "/"),
            ("/\\evil.example", "/"),
            ("/\t/evil.example", "/"),
            ("/\n/evil.example", "/"),
            ("/ /evil.example", "/"),
            ("/%09/evil.example", "/%09/evil.example"),
            ("/%2f%2fevil.example", "/%2f%2fevil.example"),
            ("javascript:alert(1)", "/"),
            ("", "/"),
        ] {
            assert_eq!(safe_next(Some(next), base), expected, "next={next:?}");
        }
        assert_eq!(safe_next(None, base), "/");
    }
}
