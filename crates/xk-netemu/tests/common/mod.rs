//! What the statistical tests of the link model share.

/// Asserts `count` successes in `n` trials fit probability `p` at 99 %
/// (normal approximation of the binomial, z = 2.576).
pub(crate) fn assert_binomial(what: &str, count: u64, n: u64, p: f64) {
    let mean = n as f64 * p;
    let sd = (n as f64 * p * (1.0 - p)).sqrt();
    let (lo, hi) = (mean - 2.576 * sd, mean + 2.576 * sd);
    assert!(
        (lo..=hi).contains(&(count as f64)),
        "{what}: {count} of {n}, 99% interval for p={p} is [{lo:.0}, {hi:.0}]"
    );
}
