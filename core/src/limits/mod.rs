//! Rate limits and quotas (issue 34), one limiter for all of them: a key's (or OAuth grant's)
//! own calls per minute, and the limits of the caller's policy, each counted per key, user or
//! project over a second, minute, hour, UTC day or UTC month, for every tool or the tools a
//! pattern matches.
//!
//! Calls are counted with leases (`leases.rs`): an instance claims a slice of a window's budget
//! in one database write and spends it in memory, so the common call costs no round trip, and
//! every instance on the database draws from one budget. A call is admitted only when every
//! limit that covers it has room; units spent on the others are given back when one refuses.
//!
//! Egress quotas (bytes a tool sent and received) are paid after the call, when its bytes are
//! known: each instance keeps the window's count as last seen, adds its own calls' bytes to it
//! at once and to the database in the background, and refuses once the count reaches the quota.
//! An instance reads the count once per window (its first call in it), so across instances a
//! quota can be passed by the calls in flight when it is reached.

mod leases;
mod windows;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::auth::Principal;
use crate::clock::Clock;
use crate::policy::limits::{covers, push_bucket_of};
use crate::policy::{Applied, Counted, Limit, Period};
use crate::store::{self, Db};
use crate::Result;

pub use windows::{seconds_until, window};

/// Buckets whose egress count this instance remembers at most.
const MAX_EGRESS_BUCKETS: usize = 50_000;

/// The limit that refused a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub retry_after_s: u64,
    /// The policy and its limit, or None: the key's own calls per minute.
    pub limit: Option<(String, Limit)>,
}

/// One counter of one window.
#[derive(Debug, Clone)]
struct Bucket {
    name: String,
    start: i64,
    end: i64,
    limit: i64,
    /// The positions of the policy (in `Applied::policies`) and of the limit it counts (None:
    /// the key's own); looked up only when the call is refused.
    of: Option<(usize, usize)>,
}

/// The egress quotas an admitted call pays into once its bytes are known.
#[derive(Debug, Default)]
pub struct Admitted {
    egress: Vec<Bucket>,
}

/// Appends who one count of a limit covers to a bucket's name.
fn push_subject(name: &mut String, who: &Principal, per: Counted) {
    match per {
        Counted::Key => match (&who.api_key_id, &who.oauth_grant_id) {
            (Some(key), _) => name.push_str(key),
            (None, Some(grant)) => name.push_str(grant),
            // A signed-in person's own calls (the portal) count as one "key" of theirs.
            (None, None) => {
                name.push_str("session:");
                name.push_str(&who.user_id);
            }
        },
        Counted::User => name.push_str(&who.user_id),
        Counted::Project => name.push_str(&who.project_id),
    }
}

/// A policy limit's bucket name for `who`: the policy, what the limit counts (`bucket_of`)
/// and whose calls.
fn bucket_name(policy_id: &str, l: &Limit, who: &Principal) -> String {
    let mut name = String::with_capacity(policy_id.len() + l.tools.len() + 48);
    name.push_str(policy_id);
    name.push(':');
    push_bucket_of(&mut name, l);
    name.push(':');
    push_subject(&mut name, who, l.per);
    name
}

#[derive(Clone)]
pub struct Limits {
    db: Db,
    clock: Arc<dyn Clock>,
    leases: Arc<leases::Leases>,
    /// Per egress bucket: the window it was seen in and its count then.
    egress: Arc<Mutex<HashMap<String, (i64, i64)>>>,
}

impl Limits {
    pub fn new(db: Db, clock: Arc<dyn Clock>) -> Limits {
        Limits {
            db,
            clock,
            leases: Arc::default(),
            egress: Arc::default(),
        }
    }

    /// The counters a call of `tool` by `who` under `policy` draws from: calls, then egress.
    fn buckets(
        &self,
        who: &Principal,
        policy: &Applied,
        tool: &str,
        now: i64,
    ) -> (Vec<Bucket>, Vec<Bucket>) {
        let mut calls = Vec::new();
        let mut egress = Vec::new();
        // A key and a grant count in their own windows (ids of both kinds never collide).
        if let (Some(limit), Some(key)) = (
            who.rate_limit_per_minute,
            who.api_key_id.as_deref().or(who.oauth_grant_id.as_deref()),
        ) {
            let (start, end) = window(Period::Minute, now);
            calls.push(Bucket {
                name: key.to_owned(),
                start,
                end,
                limit,
                of: None,
            });
        }
        for (pi, p) in policy.policies().enumerate() {
            for (li, l) in p.limits.iter().enumerate().filter(|(_, l)| covers(l, tool)) {
                let (start, end) = window(l.every, now);
                let b = Bucket {
                    name: bucket_name(&p.id, l, who),
                    start,
                    end,
                    limit: l.calls.or(l.egress_bytes).unwrap_or(0),
                    of: Some((pi, li)),
                };
                if l.calls.is_some() {
                    calls.push(b);
                } else {
                    egress.push(b);
                }
            }
        }
        (calls, egress)
    }

    /// Counts a call of `tool` against every limit that covers it. `Ok(Err(_))`: a limit has no
    /// room, the call must not run (and counts against none of them).
    pub async fn admit(
        &self,
        who: &Principal,
        policy: &Applied,
        tool: &str,
    ) -> Result<std::result::Result<Admitted, Refusal>> {
        use leases::{granted, slice, Local};
        let now = self.clock.now_ms();
        let (calls, egress) = self.buckets(who, policy, tool, now);
        let mut spent: Vec<&Bucket> = Vec::with_capacity(calls.len());
        let mut refused = None;
        for b in &calls {
            let ok = match self.leases.spend(&b.name, b.start, b.limit) {
                Local::Spent => true,
                Local::Refused => false,
                Local::Claim => {
                    let asked = slice(b.limit);
                    let count = match self.add(b, asked).await {
                        Ok(n) => n,
                        Err(e) => {
                            self.refund(&spent);
                            return Err(e);
                        }
                    };
                    let got = granted(asked, count, b.limit);
                    if got < asked {
                        // Give back what was not granted, so the window counts only granted
                        // units and a raised limit has room at once (once per window and
                        // instance: a refused lease is not claimed again).
                        if let Err(e) = self.add(b, got - asked).await {
                            tracing::warn!(error = ?e, "a limit's ungranted units cannot be given back");
                        }
                    }
                    self.leases.claimed(&b.name, b.start, b.limit, got)
                }
            };
            if !ok {
                refused = Some(b);
                break;
            }
            spent.push(b);
        }
        if refused.is_none() {
            for b in &egress {
                let seen = self.seen(&b.name, b.start);
                let count = match seen {
                    Some(n) => n,
                    None => {
                        let n = match self.add(b, 0).await {
                            Ok(n) => n,
                            Err(e) => {
                                self.refund(&spent);
                                return Err(e);
                            }
                        };
                        self.saw(&b.name, b.start, n, false);
                        n
                    }
                };
                if count >= b.limit {
                    refused = Some(b);
                    break;
                }
            }
        }
        match refused {
            Some(b) => {
                self.refund(&spent);
                let limit = b.of.and_then(|(pi, li)| {
                    let p = policy.policies().nth(pi)?;
                    Some((p.id.clone(), p.limits.get(li)?.clone()))
                });
                Ok(Err(Refusal {
                    retry_after_s: seconds_until(b.end, now),
                    limit,
                }))
            }
            None => Ok(Ok(Admitted { egress })),
        }
    }

    /// Adds `units` to `b`'s window in the database (0: reads it); the window's count.
    async fn add(&self, b: &Bucket, units: i64) -> Result<i64> {
        store::limit_windows::claim(self.db.pool(), &b.name, b.start, b.end, units).await
    }

    fn refund(&self, spent: &[&Bucket]) {
        for b in spent {
            self.leases.refund(&b.name, b.start, b.limit);
        }
    }

    /// The egress count of `bucket` this instance last saw in the window starting at `start`.
    fn seen(&self, bucket: &str, start: i64) -> Option<i64> {
        let map = self.egress.lock().unwrap_or_else(|e| e.into_inner());
        map.get(bucket)
            .filter(|(w, _)| *w == start)
            .map(|(_, n)| *n)
    }

    /// Records a count of `bucket` in the window at `start`: `add` adds it to what was seen,
    /// else it replaces what was seen when larger (a count read back from the database).
    fn saw(&self, bucket: &str, start: i64, n: i64, add: bool) {
        let mut map = self.egress.lock().unwrap_or_else(|e| e.into_inner());
        if map.len() >= MAX_EGRESS_BUCKETS && !map.contains_key(bucket) {
            map.retain(|_, (w, _)| *w >= start);
            if map.len() >= MAX_EGRESS_BUCKETS {
                map.clear();
            }
        }
        let e = map.entry(bucket.to_owned()).or_insert((start, 0));
        if e.0 != start {
            *e = (start, 0);
        }
        e.1 = if add { e.1 + n } else { e.1.max(n) };
    }

    /// Pays an admitted call's egress bytes into its quotas: at once in this instance's count,
    /// in the background in the database (whose answer, all instances' count, then replaces
    /// it when larger).
    pub fn spent(&self, admitted: Admitted, bytes: u64) {
        if admitted.egress.is_empty() || bytes == 0 {
            return;
        }
        let bytes = bytes.min(i64::MAX as u64) as i64;
        for b in &admitted.egress {
            self.saw(&b.name, b.start, bytes, true);
        }
        let this = self.clone();
        tokio::spawn(async move {
            for b in admitted.egress {
                match this.add(&b, bytes).await {
                    Ok(n) => this.saw(&b.name, b.start, n, false),
                    Err(e) => {
                        tracing::error!(error = ?e, bucket = %b.name, "an egress quota's count cannot be written")
                    }
                }
            }
        });
    }

    /// Forgets windows that ended over a minute ago.
    pub async fn purge_ended(&self) -> Result<u64> {
        store::limit_windows::delete_ended(self.db.pool(), self.clock.now_ms() - 60_000).await
    }
}
