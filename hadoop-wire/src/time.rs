//! Calendar arithmetic for the dates Java prints into the texts that cross the wire
//! (`Time.formatTime` in token errors, `Times.formatISO8601` and `ContainerImpl`'s diagnostics,
//! `Times.format` on the NodeManager's pages). One implementation, used by `token::delegation`,
//! `nm-core` and the agent; each caller keeps its own format string.

/// Days since 1970-01-01 → (year, month 1–12, day 1–31) in the proleptic Gregorian calendar
/// (Howard Hinnant's `civil_from_days`). Java's `GregorianCalendar` agrees from 1582-10-15 on.
pub fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::civil_from_days;

    #[test]
    fn known_dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
        assert_eq!(civil_from_days(59), (1970, 3, 1));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(civil_from_days(19_806), (2024, 3, 24));
        assert_eq!(civil_from_days(20_454), (2026, 1, 1));
        assert_eq!(civil_from_days(-141_427), (1582, 10, 15));
    }
}
