//! Numbers people can read: three significant figures and a unit chosen so
//! the number stays between 1 and 999 (`9.87 Mbit/s`, `40.4 ms`, `1.25 GiB`).
//!
//! Rates are decimal bits per second (as `tc`, iperf3 and link datasheets
//! say them); sizes are binary bytes (as `-n 1G` is read, powers of 1024).

/// `x` to three significant figures: `0.00123`, `1.23`, `12.3`, `123`, `1230`.
pub fn sig3(x: f64) -> String {
    if x == 0.0 || !x.is_finite() {
        return format!("{x}");
    }
    let digits = |v: f64| v.abs().log10().floor() as i32;
    // Round to three figures first: 9.996 becomes 10.0, which has one more
    // digit before the point and so one fewer after it.
    let step = 10f64.powi(digits(x) - 2);
    let rounded = (x / step).round() * step;
    let decimals = (2 - digits(rounded)).max(0) as usize;
    format!("{rounded:.decimals$}")
}

fn scaled(x: f64, units: &[(&str, f64)]) -> String {
    // The largest unit the value reaches after rounding to three figures.
    let (name, scale) = units.iter().rev().find(|(_, s)| x.abs() >= s * 0.9995).copied().unwrap_or(units[0]);
    format!("{} {name}", sig3(x / scale))
}

/// A rate in bits per second: `9.87 Mbit/s`.
pub fn rate(bits_per_s: f64) -> String {
    scaled(bits_per_s, &[("bit/s", 1.0), ("kbit/s", 1e3), ("Mbit/s", 1e6), ("Gbit/s", 1e9), ("Tbit/s", 1e12)])
}

/// A byte count: `512 B`, `97.7 KiB`, `1.00 GiB`.
pub fn bytes(n: u64) -> String {
    if n < 1024 {
        return format!("{n} B");
    }
    scaled(
        n as f64,
        &[("B", 1.0), ("KiB", 1024.0), ("MiB", 1048576.0), ("GiB", 1073741824.0), ("TiB", 1099511627776.0)],
    )
}

/// A time span in seconds: `16.8 µs`, `40.4 ms`, `3.00 s`.
pub fn secs(s: f64) -> String {
    scaled(s, &[("ns", 1e-9), ("µs", 1e-6), ("ms", 1e-3), ("s", 1.0)])
}

/// `1 request`, `2 requests`: a count with its noun in the right number.
pub fn count(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_take_the_noun_in_the_right_number() {
        assert_eq!(count(1, "request", "requests"), "1 request");
        assert_eq!(count(0, "reply", "replies"), "0 replies");
        assert_eq!(count(2, "reply", "replies"), "2 replies");
    }

    #[test]
    fn three_significant_figures_and_a_readable_unit() {
        assert_eq!(sig3(1.234), "1.23");
        assert_eq!(sig3(12.34), "12.3");
        assert_eq!(sig3(123.4), "123");
        assert_eq!(sig3(1234.0), "1230");
        assert_eq!(sig3(0.001234), "0.00123");
        assert_eq!(sig3(9.996), "10.0");
        assert_eq!(rate(5_000_000.0), "5.00 Mbit/s");
        assert_eq!(rate(9_870_000_000.0), "9.87 Gbit/s");
        assert_eq!(rate(999_999.0), "1.00 Mbit/s");
        assert_eq!(rate(1200.0), "1.20 kbit/s");
        assert_eq!(secs(40.4249e-3), "40.4 ms");
        assert_eq!(secs(16.8e-6), "16.8 µs");
        assert_eq!(secs(3.0), "3.00 s");
        assert_eq!(secs(250e-9), "250 ns");
        assert_eq!(bytes(512), "512 B");
        assert_eq!(bytes(100_000), "97.7 KiB");
        assert_eq!(bytes(1 << 30), "1.00 GiB");
        assert_eq!(bytes(100_000_000), "95.4 MiB");
    }
}
