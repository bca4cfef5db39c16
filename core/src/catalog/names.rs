//! Tool names (D1): 1–64 characters of `[A-Za-z0-9_.-]`, starting with a letter. Plugin tools
//! are `<integration>_<action>`, built-ins dotted, upstream MCP tools `<prefix><name>`.

use std::fmt;

use crate::{Error, Result};

pub const MAX_TOOL_NAME_CHARS: usize = 64;

/// A character a tool name may hold: a letter, a digit, `_`, `.` or `-`.
pub fn name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-')
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ToolName(String);

impl ToolName {
    pub fn parse(raw: &str) -> Result<ToolName> {
        if raw.is_empty() || raw.len() > MAX_TOOL_NAME_CHARS {
            return Err(Error::invalid(format!(
                "invalid tool name {raw:?}; use 1 to {MAX_TOOL_NAME_CHARS} characters"
            )));
        }
        let mut chars = raw.chars();
        let first_ok = chars.next().is_some_and(|c| c.is_ascii_alphabetic());
        if !first_ok || !raw.chars().all(name_char) {
            return Err(Error::invalid(format!(
                "invalid tool name {raw:?}; start with a letter and use only letters, digits, '_', '.' and '-'"
            )));
        }
        Ok(ToolName(raw.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ToolName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_d1() {
        for ok in [
            "http.fetch",
            "github_create_pr",
            "crm.contact.get",
            "vault_set",
            "a",
        ] {
            assert!(ToolName::parse(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "1abc",
            "has space",
            "semi;colon",
            "ünicode",
            &"x".repeat(65),
        ] {
            assert!(ToolName::parse(bad).is_err(), "{bad}");
        }
        assert!(ToolName::parse(&"x".repeat(64)).is_ok());
    }
}
