//! Where a limit's counting window starts and ends: seconds, minutes and hours since the
//! epoch, UTC calendar days and months.

use time::{Date, Month, OffsetDateTime};

use crate::policy::Period;

/// The window of `period` that holds `now_ms`: `(start, end)` in ms, end exclusive.
pub fn window(period: Period, now_ms: i64) -> (i64, i64) {
    let fixed = |len: i64| {
        let start = now_ms - now_ms.rem_euclid(len);
        (start, start + len)
    };
    match period {
        Period::Second => fixed(1_000),
        Period::Minute => fixed(60_000),
        Period::Hour => fixed(3_600_000),
        Period::Day => fixed(86_400_000),
        Period::Month => {
            let at = OffsetDateTime::from_unix_timestamp(now_ms.div_euclid(1000))
                .unwrap_or(OffsetDateTime::UNIX_EPOCH);
            let first = |year: i32, month: Month| {
                Date::from_calendar_date(year, month, 1)
                    .map(|d| d.midnight().assume_utc().unix_timestamp() * 1000)
                    .unwrap_or(0)
            };
            let (year, month) = (at.year(), at.month());
            let next_year = if month == Month::December {
                year + 1
            } else {
                year
            };
            (first(year, month), first(next_year, month.next()))
        }
    }
}

/// Whole seconds from `now_ms` until `end` (at least 1): a `Retry-After`.
pub fn seconds_until(end: i64, now_ms: i64) -> u64 {
    ((end - now_ms + 999) / 1000).max(1) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_are_utc_calendar_periods_that_hold_the_instant() {
        // 2026-12-07T10:20:30.500Z
        let now = 1_796_638_830_500;
        assert_eq!(
            window(Period::Second, now),
            (1_796_638_830_000, 1_796_638_831_000)
        );
        assert_eq!(window(Period::Minute, now).0, 1_796_638_800_000);
        assert_eq!(
            window(Period::Day, now),
            (1_796_601_600_000, 1_796_688_000_000)
        );
        // December 2026 runs to 2027-01-01T00:00Z.
        assert_eq!(
            window(Period::Month, now),
            (1_796_083_200_000, 1_798_761_600_000)
        );
        assert_eq!(seconds_until(1_796_638_831_000, now), 1);
        assert_eq!(seconds_until(now + 61_000, now), 61);
    }
}
