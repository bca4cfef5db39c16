//! Who is calling: users and their passwords, project memberships and roles, API keys, and
//! sign-in with throttling. Surfaces authenticate through `Accounts` and then carry a
//! `Principal` into every other core call.

mod accounts;
mod api_key;
mod password;
mod redirect;

pub use accounts::{require_admin, Accounts, ApiKeyInfo, Member, NewApiKey, User, MAX_RATE_LIMIT};
pub use api_key::ApiKey;
pub use password::{hash_password, validate_password, verify_password};
pub use redirect::safe_next;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Admin,
    Member,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Admin => "admin",
            Role::Member => "member",
        }
    }

    pub fn parse(s: &str) -> Option<Role> {
        match s {
            "admin" => Some(Role::Admin),
            "member" => Some(Role::Member),
            _ => None,
        }
    }
}

/// An authenticated caller acting in one project: a signed-in person (no `api_key_id`) or a
/// program holding one of that person's API keys.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Principal {
    pub user_id: String,
    pub email: String,
    pub project_id: String,
    pub project_name: String,
    pub role: Role,
    pub api_key_id: Option<String>,
    /// The policy attached to the caller's key; None: the project's default (if any) applies.
    #[serde(default)]
    pub policy_id: Option<String>,
    /// The project's policy generation as read with the key (spares a query per request).
    #[serde(skip)]
    pub policy_generation: Option<i64>,
    /// The project's vault generation as read with the key: the scrubber's cached patterns are
    /// current when it matches (spares a query per request).
    #[serde(skip)]
    pub vault_generation: Option<i64>,
    /// The caller's credentials generation as read with the key: their cached credentials (for
    /// scrubbing) are current when it matches.
    #[serde(skip)]
    pub credentials_generation: Option<i64>,
    /// Calls per minute the key may make (None: no limit).
    #[serde(default)]
    pub rate_limit_per_minute: Option<i64>,
}

impl Principal {
    pub fn is_admin(&self) -> bool {
        self.role == Role::Admin
    }

    /// May manage keys, policies and confirmations (D20): an admin whose key has no policy
    /// attached (a signed-in admin has no key).
    pub fn is_unrestricted_admin(&self) -> bool {
        self.is_admin() && self.policy_id.is_none()
    }
}

/// Normalises and checks an email address: trimmed, lowercase, one `@`, a dotted domain.
pub fn normalize_email(raw: &str) -> crate::Result<String> {
    let email = raw.trim().to_lowercase();
    let valid = email.len() <= 254
        && !email.chars().any(|c| c.is_whitespace() || c.is_control())
        && match email.split_once('@') {
            Some((local, domain)) => {
                !local.is_empty()
                    && !domain.contains('@')
                    && domain.contains('.')
                    && !domain.starts_with('.')
                    && !domain.ends_with('.')
            }
            None => false,
        };
    if valid {
        Ok(email)
    } else {
        Err(crate::Error::invalid("invalid email address; expected name@example.com"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emails_are_normalised_and_checked() {
        assert_eq!(normalize_email("  Ada@Example.COM ").unwrap(), "ada@example.com");
        for bad in ["", "ada", "ada@", "@example.com", "ada@example", "a b@example.com", "a@b@c.de"] {
            assert!(normalize_email(bad).is_err(), "{bad:?} accepted");
        }
    }
}

/// The client address a request came from (after the operator's proxy-trust setting), used to
/// throttle sign-in per address. Surfaces put it in request extensions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientIp(pub Option<std::net::IpAddr>);

/// The portal session entry that holds the signed-in user's id.
pub const SESSION_USER_KEY: &str = "user_id";
