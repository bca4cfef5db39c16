//! Tool allowlists' words (a policy's mode, a tool's fate under it) and the Policies page's
//! views: the policies, the preview of what a key may run, and a pattern list's check.

use serde::{Deserialize, Serialize};

text_enum! {
    /// How a policy's `allow` list is read (D14).
    pub enum Mode ("policy mode") {
        /// Only tools matching `allow` (or `require_confirmation`) run.
        Allowlist = "allowlist",
        /// Every tool not denied runs.
        Open = "open",
    }
}

text_enum! {
    /// What a policy does with one tool, as the preview shows it.
    pub enum Verdict ("policy verdict") {
        Runs = "runs",
        /// Held for a person's confirmation.
        Confirm = "confirm",
        Denied = "denied",
    }
}

/// One policy on the Policies page.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PolicyItem {
    pub id: String,
    pub name: String,
    pub mode: Mode,
    pub allow: Vec<String>,
    pub deny: Vec<String>,
    pub require_confirmation: Vec<String>,
    /// Rate limits and quotas, one line each (`Limit`'s `Display`).
    pub limits: Vec<String>,
    pub default: bool,
    pub updated_at: String,
    /// Live keys using it, by name.
    pub keys: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyChoice {
    pub id: String,
    pub label: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoliciesData {
    pub policies: Vec<PolicyItem>,
    pub keys: Vec<KeyChoice>,
    pub can_manage: bool,
}

/// One tool as a key's policy sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PreviewRow {
    pub tool: String,
    pub decision: Verdict,
    /// The deciding rule, e.g. `pol_… deny: crm.*`; empty when nothing decided (no policy).
    pub rule: String,
}

/// What one API key may run, must have confirmed, or is denied.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Preview {
    pub key: String,
    pub policy: String,
    pub rows: Vec<PreviewRow>,
}

/// What is wrong with one pattern list as typed (one pattern per line), for validation as you
/// type: `problems` would refuse the save; `unmatched` are valid patterns no tool of the
/// project has (yet), likely typos.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PatternCheck {
    pub problems: Vec<String>,
    pub unmatched: Vec<String>,
}

text_enum! {
    /// The window a limit counts in (UTC calendar days and months).
    pub enum Period ("limit period") {
        Second = "second",
        Minute = "minute",
        Hour = "hour",
        Day = "day",
        Month = "month",
    }
}

text_enum! {
    /// Whose calls one count of a limit covers.
    pub enum Counted ("limit scope") {
        /// Each API key (or MCP OAuth grant) on its own.
        Key = "key",
        /// Each person, over all their keys and grants.
        User = "user",
        /// The whole project.
        Project = "project",
    }
}

/// One rate limit or quota of a policy: at most `calls` calls (or `egress_bytes` bytes sent and
/// received) of the tools `tools` matches, every `every`, counted per `per`. A burst is the
/// wider of two limits: `20 per second` beside `600 per minute` lets 20 calls through at once
/// while holding the average to 10 a second.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Limit {
    /// A tool name or a prefix ending in `*`; `*` (the default) is every tool.
    #[serde(default = "every_tool")]
    pub tools: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calls: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub egress_bytes: Option<i64>,
    pub every: Period,
    pub per: Counted,
}

fn every_tool() -> String {
    "*".into()
}

impl std::fmt::Display for Limit {
    /// The line the portal shows and reads back (`Limit::parse_line`).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.calls, self.egress_bytes) {
            (Some(n), _) => write!(f, "{n} calls")?,
            (None, Some(n)) => write!(f, "{n} egress bytes")?,
            (None, None) => f.write_str("0 calls")?,
        }
        write!(f, " per {} per {}", self.every, self.per)?;
        if self.tools != "*" {
            write!(f, " on {}", self.tools)?;
        }
        Ok(())
    }
}

impl Limit {
    /// Reads one line as `Display` writes it: `<n> calls per <period> per <key|user|project>
    /// [on <tools>]` or `<n> egress bytes per <day|month> per … [on <tools>]`. Checks only the
    /// shape; the policy checks the numbers and the pattern.
    pub fn parse_line(line: &str) -> Result<Limit, String> {
        let words: Vec<&str> = line.split_whitespace().collect();
        let shape = || {
            format!(
                "{line:?} is not a limit; write e.g. \"60 calls per minute per key on github.*\" \
                 or \"100000000 egress bytes per day per project\""
            )
        };
        let n: i64 = words
            .first()
            .and_then(|w| w.replace('_', "").parse().ok())
            .ok_or_else(shape)?;
        let (calls, rest) = match words.get(1..) {
            Some(["calls", rest @ ..]) | Some(["call", rest @ ..]) => (true, rest),
            Some(["egress", "bytes", rest @ ..]) => (false, rest),
            _ => return Err(shape()),
        };
        let (every, per, tools) = match rest {
            ["per", every, "per", per] => (every, per, "*"),
            ["per", every, "per", per, "on", tools] => (every, per, *tools),
            _ => return Err(shape()),
        };
        let every = Period::parse(every).ok_or_else(|| {
            format!("{every:?} is not a period; use second, minute, hour, day or month")
        })?;
        let per = Counted::parse(per).ok_or_else(|| {
            format!("{per:?} is not what a limit counts per; use key, user or project")
        })?;
        Ok(Limit {
            tools: tools.to_owned(),
            calls: calls.then_some(n),
            egress_bytes: (!calls).then_some(n),
            every,
            per,
        })
    }
}
