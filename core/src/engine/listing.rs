//! What the caller's policy lets it see of the catalog (D2, D14): search_tools, tool and the
//! tool listings show only tools the policy lets the caller run, now or after a confirmation.

use std::sync::Arc;

use super::Engine;
use crate::auth::Principal;
use crate::catalog::{Tool, ToolStatus};
use crate::Result;

/// Most results search_tools returns.
pub const SEARCH_LIMIT_MAX: usize = 50;
pub const SEARCH_LIMIT_DEFAULT: usize = 10;

/// One search_tools match: the seed's fields, then whether the tool can run now and, when it
/// cannot, why (`Tool::availability`, the words every surface shows).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SearchResult {
    pub name: String,
    pub description: String,
    pub integration: String,
    /// The calibrated score, to three decimals (serialised as written, not as an f32 widened).
    pub score: f64,
    pub status: ToolStatus,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unavailable_reason: Option<String>,
}

/// What search_tools answers: the seed's `tools`, and whether no tool is likely to fit.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ToolSearch {
    pub tools: Vec<SearchResult>,
    /// Even the best match scores under the no-match line: the tools listed are the nearest
    /// ones, and none is likely to do what was asked.
    pub no_match: bool,
    /// When `no_match`, what the agent may do about it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
}

/// The tools a search matched, best first, each with its score (three decimals), and whether
/// no tool is likely to fit: what every surface that searches (search_tools, REST, the portal)
/// shapes its answer from.
pub struct Matches {
    pub tools: Vec<(Arc<Tool>, f64)>,
    pub no_match: bool,
}

impl Matches {
    /// When `no_match`, what the agent may do about it.
    pub fn hint(&self) -> Option<String> {
        self.no_match.then(|| {
            format!(
                "No tool this project can use is likely to do this (no score reaches {}). \
                 The tools listed are only the nearest; read their descriptions before calling \
                 one, try other words, or ask an admin to add the integration.",
                crate::catalog::search::calibrate::NO_MATCH_BELOW
            )
        })
    }
}

impl Engine {
    /// The tools `who` can run that best match `query` (D2), best first; `limit` is 1..=50.
    pub async fn matches(&self, who: &Principal, query: &str, limit: usize) -> Result<Matches> {
        if !(1..=SEARCH_LIMIT_MAX).contains(&limit) {
            return Err(crate::Error::invalid(format!(
                "limit must be between 1 and {SEARCH_LIMIT_MAX}"
            )));
        }
        if query.trim().is_empty() {
            return Err(crate::Error::invalid(
                "query is empty; describe what you want to do, e.g. \"send email\"",
            ));
        }
        if query.len() > 1000 {
            return Err(crate::Error::invalid(
                "query too long; use at most 1000 characters",
            ));
        }
        let policy = self.policies.applied(who).await?;
        let snapshot = self.snapshot(who);
        let (hits, no_match) = snapshot.search(query, limit, |t| policy.decide(t.name()).visible());
        let tools = hits
            .into_iter()
            .map(|(t, score)| (t, (f64::from(score) * 1000.0).round() / 1000.0))
            .collect();
        Ok(Matches { tools, no_match })
    }

    /// search_tools' answer: `matches` in the seed's shape.
    pub async fn search(&self, who: &Principal, query: &str, limit: usize) -> Result<ToolSearch> {
        let m = self.matches(who, query, limit).await?;
        let hint = m.hint();
        let tools = m
            .tools
            .into_iter()
            .map(|(t, score)| {
                let availability = t.availability();
                SearchResult {
                    name: t.spec.name.to_string(),
                    description: t.spec.description.clone(),
                    integration: t.spec.integration.clone(),
                    score,
                    status: availability.status(),
                    unavailable_reason: availability.reason().map(str::to_owned),
                }
            })
            .collect();
        Ok(ToolSearch {
            tools,
            no_match: m.no_match,
            hint,
        })
    }

    /// A tool `who` can run (now or after a confirmation), by name (D2: others are "not found").
    pub async fn tool(&self, who: &Principal, name: &str) -> Result<Option<Arc<Tool>>> {
        let policy = self.policies.applied(who).await?;
        Ok(self
            .snapshot(who)
            .get(name)
            .filter(|t| policy.decide(t.name()).visible())
            .cloned())
    }

    /// Of the tools named, each one `who` can run (now or after a confirmation), in the order
    /// asked (None: not in the catalog, or hidden by the caller's policy).
    pub async fn visible(&self, who: &Principal, names: &[&str]) -> Result<Vec<Option<Arc<Tool>>>> {
        let policy = self.policies.applied(who).await?;
        let snapshot = self.snapshot(who);
        Ok(names
            .iter()
            .map(|n| {
                snapshot
                    .get(n)
                    .filter(|t| policy.decide(t.name()).visible())
                    .cloned()
            })
            .collect())
    }

    /// Whether the caller's policies let it use each of `subjects` outright: things that are
    /// not catalog tools, such as an upstream server's prompts and resources
    /// (`prompt:<name>`, `resource:<uri>`). A subject that would need a confirmation is not
    /// allowed (nobody confirms a prompt or a read).
    pub async fn allows(&self, who: &Principal, subjects: &[String]) -> Result<Vec<bool>> {
        let policy = self.policies.applied(who).await?;
        Ok(subjects
            .iter()
            .map(|s| matches!(policy.decide(s), crate::policy::Decision::Run))
            .collect())
    }

    /// Every tool `who` can run (now or after a confirmation), in catalog order.
    pub async fn tools(&self, who: &Principal) -> Result<Vec<Arc<Tool>>> {
        let policy = self.policies.applied(who).await?;
        Ok(self
            .snapshot(who)
            .tools()
            .iter()
            .filter(|t| policy.decide(t.name()).visible())
            .cloned()
            .collect())
    }
}
