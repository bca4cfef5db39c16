//! Call budgets counted in memory, shared through the database: an instance claims a slice of
//! a bucket's budget for the current window in one write and spends it locally, so a limited
//! caller costs one round trip per slice instead of one per call.
//!
//! The database's window row counts what every instance has claimed, and a claim is granted only
//! as far as the budget has room, so all instances together never admit more calls in a window
//! than the limit. A single instance spends every unit it claims and so admits exactly the limit;
//! with several, a unit claimed by one instance is not spent by another, so near the end of a
//! busy window an instance may refuse while another still holds up to a slice less one unit.
//! A slice is a twentieth of the limit (at least one call). A changed limit takes effect on the
//! next call: units claimed under the old limit are dropped, and the database's count of the
//! window still bounds what is claimed under the new one.

use std::collections::HashMap;
use std::sync::Mutex;

/// Slices per window's budget.
const SLICES: i64 = 20;
/// Windows tracked at most; past this, windows other than the current one are forgotten.
const MAX_KEYS: usize = 50_000;

#[derive(Clone, Copy)]
struct Lease {
    window: i64,
    limit: i64,
    /// Units claimed and not yet spent.
    left: i64,
    /// The database refused a claim in this window: refuse without asking again.
    exhausted: bool,
}

/// The units of each bucket this instance holds in its current window.
#[derive(Default)]
pub(super) struct Leases {
    by_key: Mutex<HashMap<String, Lease>>,
}

/// How many units to claim at once under `limit`.
pub(super) fn slice(limit: i64) -> i64 {
    (limit / SLICES).max(1)
}

/// What a claim of `asked` units was granted when the window's count became `count` with it
/// (the count includes every claim, granted or not): never past `limit`.
pub(super) fn granted(asked: i64, count: i64, limit: i64) -> i64 {
    (limit - (count - asked)).clamp(0, asked)
}

/// What the held units decide about one call.
pub(super) enum Local {
    /// A held unit was spent: the call may run.
    Spent,
    /// The window's budget is gone: refuse.
    Refused,
    /// Nothing held: claim a slice from the database.
    Claim,
}

impl Leases {
    /// Spends a held unit of `key` in `window` under `limit`, if there is one.
    pub fn spend(&self, key: &str, window: i64, limit: i64) -> Local {
        let mut map = self.by_key.lock().unwrap_or_else(|e| e.into_inner());
        match map.get_mut(key) {
            Some(l) if l.window == window && l.limit == limit => {
                if l.left > 0 {
                    l.left -= 1;
                    Local::Spent
                } else if l.exhausted {
                    Local::Refused
                } else {
                    Local::Claim
                }
            }
            _ => Local::Claim,
        }
    }

    /// Gives back a unit spent by a call another limit then refused.
    pub fn refund(&self, key: &str, window: i64, limit: i64) {
        let mut map = self.by_key.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(l) = map.get_mut(key) {
            if l.window == window && l.limit == limit {
                l.left += 1;
            }
        }
    }

    /// Records a claim's answer: `granted` units of which the calling request spends one when
    /// any were granted. Answers whether the call may run.
    pub fn claimed(&self, key: &str, window: i64, limit: i64, granted: i64) -> bool {
        let mut map = self.by_key.lock().unwrap_or_else(|e| e.into_inner());
        if map.len() >= MAX_KEYS && !map.contains_key(key) {
            map.retain(|_, l| l.window >= window);
            if map.len() >= MAX_KEYS {
                map.clear();
            }
        }
        let fresh = Lease {
            window,
            limit,
            left: 0,
            exhausted: false,
        };
        let lease = map.entry(key.to_owned()).or_insert(fresh);
        if lease.window != window || lease.limit != limit {
            *lease = fresh;
        }
        if granted > 0 {
            lease.left += granted - 1;
            true
        } else {
            lease.exhausted = true;
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_claim_is_granted_only_as_far_as_the_budget_has_room() {
        assert_eq!(granted(5, 5, 100), 5);
        assert_eq!(granted(5, 102, 100), 3);
        assert_eq!(granted(5, 105, 100), 0);
        assert_eq!(granted(5, 400, 100), 0);
        assert_eq!(slice(3), 1);
        assert_eq!(slice(100), 5);
        assert_eq!(slice(100_000), 5_000);
    }

    #[test]
    fn held_units_are_spent_then_a_refused_window_stays_refused_until_the_limit_changes() {
        let l = Leases::default();
        assert!(matches!(l.spend("k", 0, 10), Local::Claim));
        assert!(l.claimed("k", 0, 10, 2));
        assert!(matches!(l.spend("k", 0, 10), Local::Spent));
        assert!(matches!(l.spend("k", 0, 10), Local::Claim));
        assert!(!l.claimed("k", 0, 10, 0));
        assert!(matches!(l.spend("k", 0, 10), Local::Refused));
        // A new limit or a new minute claims again; units of the old limit are gone.
        assert!(matches!(l.spend("k", 0, 20), Local::Claim));
        assert!(matches!(l.spend("k", 60_000, 10), Local::Claim));
        assert!(l.claimed("k", 0, 20, 3));
        assert!(matches!(l.spend("k", 0, 10), Local::Claim));
    }
}
