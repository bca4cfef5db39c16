//! Tool allowlists as data (seed 004 "The tool allowlist", D14): patterns, their validation, and
//! the one evaluation every surface gets through the engine: `deny` wins; in `allowlist` mode
//! only tools matching `allow` or `require_confirmation` run; in `open` mode all but denied
//! ones; then `require_confirmation` gates.

use serde::{Deserialize, Serialize};

use crate::{Error, Result};

/// Longest pattern, as the longest tool name (D1).
pub const MAX_PATTERN_CHARS: usize = 64;
/// Most patterns in one list.
pub const MAX_PATTERNS: usize = 500;

pub use workbench_model::policy::Mode;

/// A policy's rules, as the API shows and takes them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolAllowlist {
    pub mode: Mode,
    #[serde(default)]
    pub allow: Vec<String>,
    #[serde(default)]
    pub deny: Vec<String>,
    #[serde(default)]
    pub require_confirmation: Vec<String>,
}

/// Which list of which policy decided, and by which pattern (`None`: the tool is on no list of
/// an allowlist-mode policy).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rule {
    pub policy_id: String,
    pub list: String,
    pub pattern: Option<String>,
}

/// What a policy says about one tool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Run,
    /// Runs once a person approves it.
    Confirm(Rule),
    Deny(Rule),
}

impl Decision {
    /// Visible to the caller (D2): runnable now or after a confirmation.
    pub fn visible(&self) -> bool {
        !matches!(self, Decision::Deny(_))
    }
}

/// Why a pattern is refused, or nothing: an exact tool name, or a prefix with one trailing `*`.
pub fn pattern_problem(p: &str) -> Option<String> {
    if p.is_empty() {
        return Some("a pattern is empty; use a tool name or a prefix ending in '*'".into());
    }
    if p.chars().count() > MAX_PATTERN_CHARS {
        return Some(format!(
            "pattern {p:?} is longer than {MAX_PATTERN_CHARS} characters"
        ));
    }
    let body = p.strip_suffix('*').unwrap_or(p);
    if body.contains('*') {
        return Some(format!("pattern {p:?} has a '*' that is not at the end; only a trailing '*' (prefix match) is allowed"));
    }
    if let Some(c) = body
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-' | ':' | '/')))
    {
        return Some(format!(
            "pattern {p:?} has the character {c:?}, which no tool name contains"
        ));
    }
    None
}

/// Whether a (valid) pattern covers a tool name.
pub fn pattern_matches(pattern: &str, tool: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => tool.starts_with(prefix),
        None => pattern == tool,
    }
}

fn first_match<'a>(list: &'a [String], tool: &str) -> Option<&'a str> {
    list.iter()
        .map(String::as_str)
        .find(|p| pattern_matches(p, tool))
}

impl ToolAllowlist {
    /// Every problem of the lists, each naming the list and the pattern.
    pub fn problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        for (name, list) in [
            ("allow", &self.allow),
            ("deny", &self.deny),
            ("require_confirmation", &self.require_confirmation),
        ] {
            if list.len() > MAX_PATTERNS {
                out.push(format!(
                    "{name} has {} patterns; at most {MAX_PATTERNS}",
                    list.len()
                ));
            }
            for p in list {
                if let Some(problem) = pattern_problem(p) {
                    out.push(format!("{name}: {problem}"));
                }
            }
        }
        out
    }

    /// `problems` as one invalid-request error, or nothing.
    pub fn check(&self) -> Result<()> {
        let problems = self.problems();
        if problems.is_empty() {
            Ok(())
        } else {
            Err(Error::invalid(problems.join("; ")))
        }
    }

    /// What this policy (`policy_id`) says about `tool`.
    pub fn decide(&self, policy_id: &str, tool: &str) -> Decision {
        let rule = |list: &str, pattern: Option<&str>| Rule {
            policy_id: policy_id.to_owned(),
            list: list.to_owned(),
            pattern: pattern.map(str::to_owned),
        };
        if let Some(p) = first_match(&self.deny, tool) {
            return Decision::Deny(rule("deny", Some(p)));
        }
        let confirm = first_match(&self.require_confirmation, tool);
        if self.mode == Mode::Allowlist
            && confirm.is_none()
            && first_match(&self.allow, tool).is_none()
        {
            return Decision::Deny(rule("allow", None));
        }
        match confirm {
            Some(p) => Decision::Confirm(rule("require_confirmation", Some(p))),
            None => Decision::Run,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seed_policy() -> ToolAllowlist {
        ToolAllowlist {
            mode: Mode::Allowlist,
            allow: vec![
                "crm.contact.get".into(),
                "crm.deal.list".into(),
                "search.web".into(),
                "ticket.*".into(),
            ],
            deny: vec!["crm.contact.delete".into()],
            require_confirmation: vec!["email.send".into()],
        }
    }

    #[test]
    fn the_seed_policy_decides_as_the_seed_says() {
        let p = seed_policy();
        assert_eq!(p.decide("pol_1", "crm.contact.get"), Decision::Run);
        assert_eq!(
            p.decide("pol_1", "ticket.create"),
            Decision::Run,
            "prefix match"
        );
        assert_eq!(
            p.decide("pol_1", "ticketing"),
            Decision::Deny(Rule {
                policy_id: "pol_1".into(),
                list: "allow".into(),
                pattern: None
            })
        );
        assert_eq!(
            p.decide("pol_1", "crm.contact.delete"),
            Decision::Deny(Rule {
                policy_id: "pol_1".into(),
                list: "deny".into(),
                pattern: Some("crm.contact.delete".into())
            })
        );
        assert!(
            matches!(p.decide("pol_1", "email.send"), Decision::Confirm(r) if r.pattern.as_deref() == Some("email.send")),
            "confirmation-only tools run after approval"
        );
        assert!(!p.decide("pol_1", "http.fetch").visible());
        assert!(p.decide("pol_1", "email.send").visible());
    }

    #[test]
    fn deny_wins_over_allow_and_confirmation_and_open_mode_runs_the_rest() {
        let p = ToolAllowlist {
            mode: Mode::Open,
            allow: vec![],
            deny: vec!["github_*".into()],
            require_confirmation: vec!["github_merge_pr".into(), "slack_*".into()],
        };
        assert!(
            matches!(p.decide("p", "github_merge_pr"), Decision::Deny(r) if r.list == "deny" && r.pattern.as_deref() == Some("github_*"))
        );
        assert_eq!(p.decide("p", "http.fetch"), Decision::Run);
        assert!(matches!(
            p.decide("p", "slack_send_message"),
            Decision::Confirm(_)
        ));
    }

    #[test]
    fn only_names_and_trailing_star_prefixes_are_patterns() {
        for ok in [
            "http.fetch",
            "ticket.*",
            "*",
            "fake.echo",
            "github_create_pr",
        ] {
            assert_eq!(pattern_problem(ok), None, "{ok}");
        }
        for (bad, needle) in [
            ("", "empty"),
            ("a*b", "not at the end"),
            ("**", "not at the end"),
            ("a b", "character"),
            (&"x".repeat(65), "longer than 64"),
        ] {
            assert!(
                pattern_problem(bad).is_some_and(|m| m.contains(needle)),
                "{bad}: {:?}",
                pattern_problem(bad)
            );
        }
        let p = ToolAllowlist {
            mode: Mode::Open,
            allow: vec![],
            deny: vec!["a*b".into()],
            require_confirmation: vec!["".into()],
        };
        let problems = p.problems();
        assert_eq!(problems.len(), 2);
        assert!(
            problems[0].starts_with("deny: ") && problems[0].contains("\"a*b\""),
            "{problems:?}"
        );
        assert!(
            problems[1].starts_with("require_confirmation: "),
            "{problems:?}"
        );
    }
}
