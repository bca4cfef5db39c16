//! The API key secret: `wb_` followed by 40 base62 characters (238 random bits). Parsing
//! checks the shape before any database lookup; Debug never prints the secret.

use std::fmt;

use crate::crypto::{random_base62, sha256_hex};

pub const API_KEY_PREFIX: &str = "wb_";
const RANDOM_CHARS: usize = 40;
/// How much of a key the portal shows to tell keys apart (`wb_` + 6 characters).
const DISPLAY_PREFIX_CHARS: usize = 9;

#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    pub fn generate() -> ApiKey {
        ApiKey(format!("{API_KEY_PREFIX}{}", random_base62(RANDOM_CHARS)))
    }

    /// Accepts exactly the shape `generate` produces.
    pub fn parse(raw: &str) -> Option<ApiKey> {
        let rest = raw.strip_prefix(API_KEY_PREFIX)?;
        (rest.len() == RANDOM_CHARS && rest.bytes().all(|b| b.is_ascii_alphanumeric()))
            .then(|| ApiKey(raw.to_owned()))
    }

    pub fn expose(&self) -> &str {
        &self.0
    }

    pub fn hash(&self) -> String {
        sha256_hex(self.0.as_bytes())
    }

    pub fn display_prefix(&self) -> String {
        self.0[..DISPLAY_PREFIX_CHARS].to_owned()
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ApiKey({}…)", &self.0[..DISPLAY_PREFIX_CHARS])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_keys_parse_and_malformed_ones_do_not() {
        let k = ApiKey::generate();
        assert_eq!(ApiKey::parse(k.expose()), Some(k.clone()));
        assert!(!format!("{k:?}").contains(&k.expose()[10..]));
        for bad in [
            "",
            "wb_",
            "wb_short",
            "xx_0123456789012345678901234567890123456789",
        ] {
            assert!(ApiKey::parse(bad).is_none(), "{bad:?}");
        }
        let mut tampered = k.expose().to_string();
        tampered.push('!');
        assert!(ApiKey::parse(&tampered).is_none());
    }
}
