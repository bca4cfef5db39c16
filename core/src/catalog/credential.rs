//! What a connection holds: an OAuth token set, an API key or a session cookie. Serialized,
//! sealed with the master key ring (associated data binds project, user and integration), and
//! never printed.

use serde::{Deserialize, Serialize};
use zeroize::{Zeroize, ZeroizeOnDrop};

#[derive(Clone, PartialEq, Eq, Serialize, Deserialize, Zeroize, ZeroizeOnDrop)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Credential {
    Oauth2 {
        access_token: String,
        #[serde(default)]
        refresh_token: Option<String>,
        /// Unix ms when the access token expires, if the provider said.
        #[serde(default)]
        expires_at: Option<i64>,
    },
    ApiKey {
        key: String,
    },
    Cookie {
        value: String,
    },
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self {
            Credential::Oauth2 { .. } => "oauth2",
            Credential::ApiKey { .. } => "api_key",
            Credential::Cookie { .. } => "cookie",
        };
        write!(f, "Credential({kind}, ***)")
    }
}

impl Credential {
    /// The value injected into requests.
    pub fn token(&self) -> &str {
        match self {
            Credential::Oauth2 { access_token, .. } => access_token,
            Credential::ApiKey { key } => key,
            Credential::Cookie { value } => value,
        }
    }

    /// Every secret in it, for scrubbing.
    pub fn secrets(&self) -> Vec<&str> {
        match self {
            Credential::Oauth2 {
                access_token,
                refresh_token,
                ..
            } => {
                let mut v = vec![access_token.as_str()];
                if let Some(r) = refresh_token {
                    v.push(r);
                }
                v
            }
            other => vec![other.token()],
        }
    }

    pub fn expires_at(&self) -> Option<i64> {
        match self {
            Credential::Oauth2 { expires_at, .. } => *expires_at,
            _ => None,
        }
    }
}
