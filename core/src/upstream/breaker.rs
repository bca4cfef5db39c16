//! The circuit breaker of one upstream MCP server (D16): it opens after 5 consecutive server
//! failures (timeouts, 5xx, transport errors; a tool's own `isError` or a refused argument do
//! not count), answers at once while open, and after 30 s lets one probe call through
//! (half-open): its success closes the breaker, its failure opens it again.

use std::sync::Mutex;

pub use workbench_model::upstream::BreakerState;

pub const FAILURES_TO_OPEN: u32 = 5;
pub const OPEN_FOR_MS: i64 = 30_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Closed { failures: u32 },
    Open { until_ms: i64 },
    HalfOpen { probing: bool },
}

#[derive(Debug)]
pub struct Breaker {
    state: Mutex<State>,
}

impl Default for Breaker {
    fn default() -> Self {
        Breaker {
            state: Mutex::new(State::Closed { failures: 0 }),
        }
    }
}

/// Whether a call may go to the server now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    Go,
    /// The one call that tests a half-open breaker.
    Probe,
    /// Open: refused, retry after this many ms.
    Refused {
        retry_in_ms: i64,
    },
}

impl Breaker {
    pub fn admit(&self, now_ms: i64) -> Admission {
        let mut s = self.state.lock().expect("breaker lock");
        match *s {
            State::Closed { .. } => Admission::Go,
            State::Open { until_ms } if now_ms < until_ms => Admission::Refused {
                retry_in_ms: until_ms - now_ms,
            },
            State::Open { .. } | State::HalfOpen { probing: false } => {
                *s = State::HalfOpen { probing: true };
                Admission::Probe
            }
            State::HalfOpen { probing: true } => Admission::Refused { retry_in_ms: 1000 },
        }
    }

    /// The outcome of an admitted call; `server_failure` is whether it counts against the server.
    pub fn record(&self, admission: Admission, server_failure: bool, now_ms: i64) {
        let mut s = self.state.lock().expect("breaker lock");
        *s = match (*s, admission, server_failure) {
            (_, Admission::Probe, false) => State::Closed { failures: 0 },
            (_, Admission::Probe, true) => State::Open {
                until_ms: now_ms + OPEN_FOR_MS,
            },
            (State::Closed { .. }, _, false) => State::Closed { failures: 0 },
            (State::Closed { failures }, _, true) if failures + 1 >= FAILURES_TO_OPEN => {
                State::Open {
                    until_ms: now_ms + OPEN_FOR_MS,
                }
            }
            (State::Closed { failures }, _, true) => State::Closed {
                failures: failures + 1,
            },
            (other, _, _) => other,
        };
    }

    /// Closed, open or half-open, as the API shows it.
    pub fn state(&self, now_ms: i64) -> BreakerState {
        match *self.state.lock().expect("breaker lock") {
            State::Closed { .. } => BreakerState::Closed,
            State::Open { until_ms } if now_ms < until_ms => BreakerState::Open,
            State::Open { .. } | State::HalfOpen { .. } => BreakerState::HalfOpen,
        }
    }

    pub fn is_open(&self, now_ms: i64) -> bool {
        self.state(now_ms) == BreakerState::Open
    }

    /// While open: how long until it lets a probe through.
    pub fn open_for_ms(&self, now_ms: i64) -> Option<i64> {
        match *self.state.lock().expect("breaker lock") {
            State::Open { until_ms } if now_ms < until_ms => Some(until_ms - now_ms),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn five_failures_open_it_and_one_probe_decides_after_thirty_seconds() {
        let b = Breaker::default();
        for _ in 0..4 {
            assert_eq!(b.admit(0), Admission::Go);
            b.record(Admission::Go, true, 0);
        }
        assert_eq!(b.state(0), BreakerState::Closed);
        b.record(Admission::Go, false, 0);
        for _ in 0..5 {
            b.record(Admission::Go, true, 0);
        }
        assert_eq!(b.state(1), BreakerState::Open);
        assert!(matches!(b.admit(29_999), Admission::Refused { .. }));
        assert_eq!(b.admit(30_000), Admission::Probe);
        assert!(
            matches!(b.admit(30_001), Admission::Refused { .. }),
            "one probe at a time"
        );
        b.record(Admission::Probe, true, 30_002);
        assert!(
            matches!(b.admit(30_003), Admission::Refused { .. }),
            "a failed probe opens it again"
        );
        assert_eq!(b.admit(60_002), Admission::Probe);
        b.record(Admission::Probe, false, 60_003);
        assert_eq!(b.state(60_004), BreakerState::Closed);
        assert_eq!(b.admit(60_004), Admission::Go);
    }
}
