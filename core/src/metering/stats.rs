//! Call statistics by tool, user, key or day (issue 34, `GET /v1/usage/calls`): how many calls
//! ended how, how many a rate limit or quota refused, the error rate, and exact handler-time
//! percentiles, read from the audit log as a histogram (one row per distinct time, not per call).

use serde::Serialize;

use super::{day_range_ms, days_between, own, Metering};
use crate::auth::Principal;
use crate::clock::rfc3339;
use crate::store::{self, tool_calls::CallStatus, usage::CallGroup};
use crate::Result;

pub use crate::store::usage::CallGroup as StatsBy;

/// The calls of one group.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct CallStats {
    /// The tool, user id, key id (`""`: calls without a key) or day.
    pub group: String,
    /// The user's email when grouped by user.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub email: Option<String>,
    pub calls: i64,
    pub succeeded: i64,
    pub failed: i64,
    pub denied: i64,
    /// Held for a confirmation, expired, still running.
    pub other: i64,
    /// Refused by a rate limit or quota (counted among `failed`).
    pub rate_limited: i64,
    /// `failed / calls`.
    pub error_rate: f64,
    /// Handler times of finished (succeeded or failed) calls, nearest rank.
    pub p50_ms: i64,
    pub p95_ms: i64,
    pub p99_ms: i64,
}

/// The value at quantile `p` of a histogram sorted by value: `(value, count)`.
fn quantile(sorted: &[(i64, i64)], total: i64, p: f64) -> i64 {
    if total == 0 {
        return 0;
    }
    let rank = (((total - 1) as f64) * p).round() as i64;
    let mut seen = 0;
    for (v, n) in sorted {
        seen += n;
        if seen > rank {
            return *v;
        }
    }
    sorted.last().map_or(0, |(v, _)| *v)
}

impl Metering {
    /// Calls of the caller's project (a member: their own) between two days, inclusive, per
    /// group, ordered by group.
    pub async fn call_stats(
        &self,
        who: &Principal,
        from: &str,
        to: &str,
        by: CallGroup,
    ) -> Result<Vec<CallStats>> {
        days_between(from, to, 366)?;
        self.recorder.flush().await;
        let (from_ms, to_ms) = day_range_ms(from, to);
        let bars = store::usage::call_histogram(
            self.db.pool(),
            &who.project_id,
            from_ms,
            to_ms,
            by,
            own(who),
        )
        .await?;
        let mut out: Vec<CallStats> = Vec::new();
        let mut times: Vec<(i64, i64)> = Vec::new();
        let finish = |s: &mut CallStats, times: &mut Vec<(i64, i64)>| {
            times.sort_unstable();
            let finished: i64 = times.iter().map(|(_, n)| n).sum();
            s.p50_ms = quantile(times, finished, 0.5);
            s.p95_ms = quantile(times, finished, 0.95);
            s.p99_ms = quantile(times, finished, 0.99);
            s.error_rate = if s.calls == 0 {
                0.0
            } else {
                s.failed as f64 / s.calls as f64
            };
            times.clear();
        };
        for b in bars {
            if out.last().is_none_or(|s| s.group != b.grp) {
                if let Some(last) = out.last_mut() {
                    finish(last, &mut times);
                }
                out.push(CallStats {
                    group: b.grp.clone(),
                    email: (by == CallGroup::User).then(|| b.label.clone()),
                    ..Default::default()
                });
            }
            let s = out.last_mut().expect("pushed above");
            s.calls += b.n;
            s.rate_limited += b.limited * b.n;
            match CallStatus::parse(&b.status) {
                Some(CallStatus::Succeeded) => s.succeeded += b.n,
                Some(CallStatus::Failed) => s.failed += b.n,
                Some(CallStatus::Denied) => s.denied += b.n,
                _ => s.other += b.n,
            }
            if matches!(
                CallStatus::parse(&b.status),
                Some(CallStatus::Succeeded | CallStatus::Failed)
            ) && b.limited == 0
            {
                times.push((b.duration_ms, b.n));
            }
        }
        if let Some(last) = out.last_mut() {
            finish(last, &mut times);
        }
        if by == CallGroup::Day {
            for s in &mut out {
                if let Ok(d) = s.group.parse::<i64>() {
                    s.group = rfc3339(d * 86_400_000)[..10].to_owned();
                }
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::quantile;

    #[test]
    fn quantiles_of_a_histogram_are_those_of_the_values_it_counts() {
        // 1, 2, 2, 2, 10 (sorted), as a histogram.
        let h = [(1, 1), (2, 3), (10, 1)];
        assert_eq!(quantile(&h, 5, 0.0), 1);
        assert_eq!(quantile(&h, 5, 0.5), 2);
        assert_eq!(quantile(&h, 5, 0.95), 10);
        assert_eq!(quantile(&[], 0, 0.5), 0);
    }
}
