//! Prefixed random identifiers (`usr_…`, `prj_…`, …): 22 base62 characters carry 130 bits,
//! so ids are unguessable and can double as capability-free references in URLs.

use crate::crypto::random_base62;

pub const ID_RANDOM_CHARS: usize = 22;

pub fn new_id(prefix: &str) -> String {
    format!("{prefix}_{}", random_base62(ID_RANDOM_CHARS))
}

/// True when `s` looks like an id with this prefix (cheap shape check before a lookup).
pub fn has_shape(s: &str, prefix: &str) -> bool {
    s.strip_prefix(prefix)
        .and_then(|r| r.strip_prefix('_'))
        .is_some_and(|r| r.len() == ID_RANDOM_CHARS && r.bytes().all(|b| b.is_ascii_alphanumeric()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_carry_prefix_and_enough_randomness() {
        let id = new_id("usr");
        assert!(has_shape(&id, "usr"));
        assert!(!has_shape(&id, "prj"));
        // 62^22 > 2^130
        assert!((ID_RANDOM_CHARS as f64) * 62f64.log2() >= 128.0);
    }
}
