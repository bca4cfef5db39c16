//! A tool's measured mean latency (`avg_latency_ms` of the REST catalog), so a catalog handed to
//! a model carries a number wherever one was ever measured. The rule, first that has calls:
//! 1. the project's calls of the tool in the last 30 days;
//! 2. the project's calls of it ever (the usage counters are kept per day);
//! 3. for a tool that is the same code on every project (a built-in or a plugin tool), the
//!    instance's calls of it in the last 30 days, then ever;
//!
//! otherwise none (`null`). Tools of upstream MCP servers and custom apps are a project's own:
//! another project's tool of the same name is other code, and its timing is that project's
//! business, so they never take the instance's figure.
//!
//! The instance's figures are one query over every project's counters, kept for
//! [`INSTANCE_TTL_MS`]: a mean moves slowly, and a catalog read must not scan the whole table.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::auth::Principal;
use crate::clock::rfc3339;
use crate::store::{self, usage::LatencyTotals, Db};
use crate::Result;

/// The recent window.
const RECENT_DAYS: i64 = 30;
/// How long the instance's figures are reused.
pub const INSTANCE_TTL_MS: i64 = 5 * 60 * 1000;

/// Mean handler times in ms: (recent window, all time), each None without calls.
type Means = HashMap<String, (Option<i64>, Option<i64>)>;

fn means(rows: Vec<LatencyTotals>) -> Means {
    let mean = |calls: i64, ms: i64| (calls > 0).then(|| (ms + calls / 2) / calls);
    rows.into_iter()
        .map(|r| {
            (
                r.tool,
                (
                    mean(r.recent_calls, r.recent_ms),
                    mean(r.all_calls, r.all_ms),
                ),
            )
        })
        .collect()
}

/// The instance's figures and when they were read (ms).
type Stamped = Option<(i64, Arc<Means>)>;

/// The instance's figures, computed at most once per [`INSTANCE_TTL_MS`].
#[derive(Clone, Default)]
pub(super) struct Cache(Arc<Mutex<Stamped>>);

impl Cache {
    pub(super) async fn of(&self, db: &Db, now_ms: i64, who: &Principal) -> Result<Latencies> {
        let since = &rfc3339(now_ms - RECENT_DAYS * 86_400_000)[..10];
        let project =
            means(store::usage::latency_totals(db.pool(), Some(&who.project_id), since).await?);
        let cached = self
            .0
            .lock()
            .expect("latency cache")
            .as_ref()
            .filter(|(at, _)| now_ms - at < INSTANCE_TTL_MS)
            .map(|(_, m)| m.clone());
        let instance = match cached {
            Some(m) => m,
            None => {
                let m = Arc::new(means(
                    store::usage::latency_totals(db.pool(), None, since).await?,
                ));
                *self.0.lock().expect("latency cache") = Some((now_ms, m.clone()));
                m
            }
        };
        Ok(Latencies { project, instance })
    }
}

/// The measured means a catalog shows.
#[derive(Debug, Clone)]
pub struct Latencies {
    project: Means,
    instance: Arc<Means>,
}

impl Latencies {
    /// The mean latency of `tool` in ms by the rule above; `shared` says the tool is the same
    /// code on every project (a built-in or plugin tool).
    pub fn get(&self, tool: &str, shared: bool) -> Option<i64> {
        let pick = |m: &Means| m.get(tool).and_then(|(recent, all)| recent.or(*all));
        pick(&self.project).or_else(|| if shared { pick(&self.instance) } else { None })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn totals(tool: &str, recent: (i64, i64), all: (i64, i64)) -> LatencyTotals {
        LatencyTotals {
            tool: tool.into(),
            recent_calls: recent.0,
            recent_ms: recent.1,
            all_calls: all.0,
            all_ms: all.1,
        }
    }

    #[test]
    fn the_recent_mean_wins_then_all_time_then_the_instance_for_shared_tools_only() {
        let l = Latencies {
            project: means(vec![
                totals("storage.get", (2, 30), (10, 1_000)),
                totals("http.fetch", (0, 0), (4, 400)),
            ]),
            instance: Arc::new(means(vec![
                totals("search.web", (3, 900), (3, 900)),
                totals("crm.lookup", (1, 50), (1, 50)),
                totals("storage.get", (5, 5_000), (5, 5_000)),
            ])),
        };
        assert_eq!(
            l.get("storage.get", true),
            Some(15),
            "the project's recent mean"
        );
        assert_eq!(
            l.get("http.fetch", true),
            Some(100),
            "the project's all-time mean"
        );
        assert_eq!(
            l.get("search.web", true),
            Some(300),
            "the instance's, shared tool"
        );
        assert_eq!(
            l.get("crm.lookup", false),
            None,
            "never another project's own tool"
        );
        assert_eq!(l.get("email.send", true), None, "never measured anywhere");
    }
}
