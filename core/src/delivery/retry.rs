//! The one retry policy of outbound deliveries: which outcomes are worth another attempt, and
//! when it comes. 2xx is delivered; 408, 429, any 5xx, a timeout and a connection or transport
//! failure are retried; every other status (other 4xx, 1xx, 3xx: redirects are never followed)
//! and a refused address are permanent. Retries wait 10 s, doubling to at most an hour, with up
//! to 10% jitter; after `MAX_ATTEMPTS` attempts (about 23 hours) the delivery is given up.

/// Attempts at most, the first included.
pub const MAX_ATTEMPTS: i64 = 32;
const FIRST_RETRY_MS: i64 = 10_000;
const MAX_RETRY_MS: i64 = 3600 * 1000;

/// What an answer, or its absence, means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Delivered,
    /// Another attempt may succeed.
    Retry,
    /// Another attempt would fail the same way.
    Permanent,
}

/// The verdict on an HTTP status.
pub fn classify_status(code: u16) -> Verdict {
    match code {
        200..=299 => Verdict::Delivered,
        408 | 429 | 500..=599 => Verdict::Retry,
        _ => Verdict::Permanent,
    }
}

/// The wait before retry number `attempt` (1 = after the first failure), jittered by up to 10%.
pub fn backoff_ms(attempt: i64) -> i64 {
    let base = FIRST_RETRY_MS
        .saturating_mul(1i64 << (attempt - 1).clamp(0, 20))
        .min(MAX_RETRY_MS);
    let jitter = u16::from_le_bytes(crate::crypto::random_bytes::<2>()) as i64 * base / 10 / 65_536;
    base + jitter
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_are_classified_4xx_permanent_except_408_and_429() {
        for (code, v) in [
            (200, Verdict::Delivered),
            (204, Verdict::Delivered),
            (301, Verdict::Permanent),
            (400, Verdict::Permanent),
            (401, Verdict::Permanent),
            (404, Verdict::Permanent),
            (408, Verdict::Retry),
            (410, Verdict::Permanent),
            (429, Verdict::Retry),
            (500, Verdict::Retry),
            (503, Verdict::Retry),
            (599, Verdict::Retry),
            (100, Verdict::Permanent),
        ] {
            assert_eq!(classify_status(code), v, "{code}");
        }
    }

    #[test]
    fn backoff_doubles_from_ten_seconds_to_an_hour() {
        for (attempt, base) in [
            (1, 10_000),
            (2, 20_000),
            (3, 40_000),
            (9, 2_560_000),
            (10, 3_600_000),
            (40, 3_600_000),
        ] {
            let d = backoff_ms(attempt);
            assert!(d >= base && d <= base + base / 10, "attempt {attempt}: {d}");
        }
    }

    #[test]
    fn all_attempts_span_about_a_day() {
        let least: i64 = (1..MAX_ATTEMPTS)
            .map(|a| {
                FIRST_RETRY_MS
                    .saturating_mul(1 << (a - 1).min(20))
                    .min(MAX_RETRY_MS)
            })
            .sum();
        assert!(
            (20 * 3600 * 1000..24 * 3600 * 1000).contains(&least),
            "{least} ms"
        );
    }
}
