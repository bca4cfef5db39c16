//! A policy's rate limits and quotas as data (issue 34): their validation, which of them count
//! a call of one tool, and a stable name for each one's counter. Counting is `limits`' job.

use super::rules::{pattern_matches, pattern_problem};
use crate::{Error, Result};

pub use workbench_model::policy::{Counted, Limit, Period};

/// Most limits in one policy.
pub const MAX_LIMITS: usize = 20;
/// The highest count of calls a limit may allow.
pub const MAX_CALLS: i64 = 1_000_000_000;
/// The highest egress quota, in bytes (1 PB).
pub const MAX_EGRESS_BYTES: i64 = 1_000_000_000_000_000;

/// Every problem of a policy's limits, each naming the limit by its position (from 1).
pub fn problems(limits: &[Limit]) -> Vec<String> {
    let mut out = Vec::new();
    if limits.len() > MAX_LIMITS {
        out.push(format!(
            "limits has {} entries; at most {MAX_LIMITS}",
            limits.len()
        ));
    }
    for (i, l) in limits.iter().enumerate() {
        let at = format!("limits[{}]", i + 1);
        if let Some(problem) = pattern_problem(&l.tools) {
            out.push(format!("{at}: tools: {problem}"));
        }
        match (l.calls, l.egress_bytes) {
            (Some(_), Some(_)) | (None, None) => out.push(format!(
                "{at}: give either calls or egress_bytes, not both or neither"
            )),
            (Some(n), None) if !(1..=MAX_CALLS).contains(&n) => {
                out.push(format!("{at}: calls must be 1 to {MAX_CALLS}"))
            }
            (None, Some(n)) if !(1..=MAX_EGRESS_BYTES).contains(&n) => out.push(format!(
                "{at}: egress_bytes must be 1 to {MAX_EGRESS_BYTES}"
            )),
            (None, Some(_)) if matches!(l.every, Period::Second | Period::Minute) => {
                out.push(format!(
                    "{at}: an egress quota counts per hour, day or month, not per {}",
                    l.every
                ))
            }
            _ => {}
        }
    }
    for (i, a) in limits.iter().enumerate() {
        if limits[..i].iter().any(|b| bucket_of(b) == bucket_of(a)) {
            out.push(format!(
                "limits[{}]: another limit counts the same thing ({}); keep the one you mean",
                i + 1,
                a
            ));
        }
    }
    out
}

/// `problems` as one invalid-request error, or nothing.
pub fn check(limits: &[Limit]) -> Result<()> {
    let problems = problems(limits);
    if problems.is_empty() {
        Ok(())
    } else {
        Err(Error::invalid(problems.join("; ")))
    }
}

/// Whether a limit counts calls of `tool` (`*`, the default, is a prefix every name has).
pub fn covers(l: &Limit, tool: &str) -> bool {
    pattern_matches(&l.tools, tool)
}

/// What a limit's counter is named by: what it counts, its period, whose calls and its tools.
/// The number is not part of it, so raising a limit keeps what was counted in the window.
pub fn bucket_of(l: &Limit) -> String {
    let mut out = String::with_capacity(l.tools.len() + 24);
    push_bucket_of(&mut out, l);
    out
}

/// Appends `bucket_of(l)` to `out` (the limiter builds a counter's whole name in one buffer).
pub fn push_bucket_of(out: &mut String, l: &Limit) {
    out.push_str(if l.calls.is_some() { "c" } else { "e" });
    for part in [l.every.as_str(), l.per.as_str(), l.tools.as_str()] {
        out.push(':');
        out.push_str(part);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limit(line: &str) -> Limit {
        Limit::parse_line(line).unwrap()
    }

    #[test]
    fn a_limit_line_reads_back_as_it_is_written() {
        for line in [
            "60 calls per minute per key on github.*",
            "5 calls per second per user",
            "100000000 egress bytes per day per project on http.fetch",
        ] {
            assert_eq!(limit(line).to_string(), line);
        }
        assert!(Limit::parse_line("60 per minute").is_err());
        assert!(Limit::parse_line("60 calls per fortnight per key")
            .unwrap_err()
            .contains("fortnight"));
        assert!(Limit::parse_line("60 calls per minute per team")
            .unwrap_err()
            .contains("team"));
    }

    #[test]
    fn limits_that_cannot_be_counted_are_refused_with_their_position() {
        let mut egress_per_minute = limit("1000 egress bytes per day per key");
        egress_per_minute.every = Period::Minute;
        let mut both = limit("10 calls per minute per key");
        both.egress_bytes = Some(5);
        let cases = [
            (limit("0 calls per minute per key"), "calls must be 1"),
            (limit("10 calls per minute per key on git*hub"), "tools:"),
            (egress_per_minute, "per hour, day or month"),
            (both, "either calls or egress_bytes"),
        ];
        for (l, want) in cases {
            let p = problems(&[limit("1 calls per day per user"), l.clone()]);
            assert!(
                p.len() == 1 && p[0].starts_with("limits[2]") && p[0].contains(want),
                "{l}: {p:?}"
            );
        }
        let twice = [
            limit("5 calls per minute per key"),
            limit("9 calls per minute per key"),
        ];
        assert!(problems(&twice)[0].contains("same thing"));
        assert!(problems(&vec![limit("1 calls per day per key"); 21])
            .iter()
            .any(|p| p.contains("at most 20")));
        assert!(problems(&[
            limit("5 calls per minute per key"),
            limit("5 calls per minute per user")
        ])
        .is_empty());
    }

    #[test]
    fn a_limit_covers_the_tools_its_pattern_matches() {
        let all = limit("5 calls per minute per key");
        let github = limit("5 calls per minute per key on github.*");
        assert!(covers(&all, "slack.post") && covers(&github, "github.merge"));
        assert!(!covers(&github, "slack.post"));
    }
}
