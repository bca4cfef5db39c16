//! What a policy does with the project's tools, for an admin deciding what to attach: the
//! preview of one API key, and the check of a pattern list as it is typed. In core, so the
//! portal and any REST route give the same answer.

use workbench_model::policy::{PatternCheck, Preview, PreviewRow, Verdict};

use super::{pattern_matches, pattern_problem, Decision, Policies, Rule, MAX_PATTERNS};
use crate::auth::{Operation, Principal};
use crate::store;
use crate::{Error, Result};

/// A pattern list as typed: one pattern a line, surrounding blanks and empty lines dropped.
pub fn lines(text: &str) -> Vec<String> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect()
}

/// What is wrong with one pattern list as typed: `problems` would refuse the save;
/// `unmatched` are valid patterns none of `tools` (the project's tool names) matches.
pub fn check_patterns(text: &str, tools: &[&str]) -> PatternCheck {
    let patterns = lines(text);
    let mut check = PatternCheck::default();
    if patterns.len() > MAX_PATTERNS {
        check.problems.push(format!(
            "{} patterns; at most {MAX_PATTERNS}",
            patterns.len()
        ));
        return check;
    }
    for pattern in patterns {
        match pattern_problem(&pattern) {
            Some(problem) => check.problems.push(problem),
            None if !tools.iter().any(|t| pattern_matches(&pattern, t)) => {
                check.unmatched.push(pattern)
            }
            None => {}
        }
    }
    check
}

impl Policies {
    /// The project's policies as `(id, label)` choices for attaching one, the default marked.
    pub async fn choices(&self, who: &Principal) -> Result<Vec<(String, String)>> {
        Ok(self
            .list(who)
            .await?
            .into_iter()
            .map(|pol| {
                let label = if pol.default {
                    format!("{} (default)", pol.name)
                } else {
                    pol.name
                };
                (pol.id, label)
            })
            .collect())
    }

    /// What API key `key_id` of `who`'s project may run among `tools` (the project's tool
    /// names), must have confirmed, or is denied, each with the deciding rule.
    pub async fn preview(&self, who: &Principal, key_id: &str, tools: &[&str]) -> Result<Preview> {
        who.require(Operation::PoliciesManage)?;
        let key = store::api_keys::by_id(self.db.pool(), &who.project_id, key_id)
            .await?
            .ok_or(Error::NotFound)?;
        // The owner's cap (their groups' policy) decides too.
        let cap = store::projects::membership(self.db.pool(), &who.project_id, &key.user_id)
            .await?
            .and_then(|m| m.policy_id);
        let applied = self
            .applied_to_key(&who.project_id, key.policy_id.as_deref(), cap.as_deref())
            .await?;
        let rule = |r: &Rule| {
            format!(
                "{} {}: {}",
                r.policy_id,
                r.list,
                r.pattern.clone().unwrap_or_else(|| "not listed".into())
            )
        };
        let rows = tools
            .iter()
            .map(|tool| {
                let (decision, rule) = match applied.decide(tool) {
                    Decision::Run => (Verdict::Runs, String::new()),
                    Decision::Confirm(r) => (Verdict::Confirm, rule(&r)),
                    Decision::Deny(r) => (Verdict::Denied, rule(&r)),
                };
                PreviewRow {
                    tool: (*tool).to_owned(),
                    decision,
                    rule,
                }
            })
            .collect();
        Ok(Preview {
            key: key.name,
            policy: {
                let own = applied
                    .policy
                    .as_ref()
                    .map(|p| format!("{} ({})", p.name, p.id))
                    .unwrap_or_else(|| "no policy: every tool runs".into());
                match &applied.cap {
                    Some(c) => format!(
                        "{own}; capped by the owner's group policy {} ({})",
                        c.name, c.id
                    ),
                    None => own,
                }
            },
            rows,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pattern_list_reports_bad_patterns_and_those_no_tool_matches() {
        let tools = ["github_create_pr", "http.fetch"];
        let check = check_patterns("github_*\n\n  nothing_*  \nbad*pattern*\n", &tools);
        assert_eq!(check.unmatched, vec!["nothing_*".to_owned()]);
        assert_eq!(check.problems.len(), 1, "{:?}", check.problems);
        assert!(check_patterns("", &tools).problems.is_empty());
    }
}
