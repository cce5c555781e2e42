//! Least-squares fit of a fixed cost and a per-byte cost to measured
//! (size, time) points: how each δ/ρ pair of the model is calibrated.
//!
//! Every pair of the model is "a constant plus a per-byte slope" (δ_w and
//! ρ_w from the write path, T_0 and ρ_T from the engine's period, δ_0 and
//! ρ_δ from the end-to-end delay), so one ordinary least-squares line is the
//! whole fitting machinery; written here (a dozen lines of sums) rather than
//! pulled from a linear-algebra crate. The residuals are kept so the report
//! can show how well a straight line describes each measurement.

use serde::{Deserialize, Serialize};

/// A fitted line `time = intercept + slope · size` and how well it fits.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LineFit {
    /// Fixed cost, seconds (the δ or T_0 of a pair).
    pub intercept: f64,
    /// Per-byte cost, seconds per byte (the ρ of a pair).
    pub slope: f64,
    /// Coefficient of determination (1 is a perfect line; 1 too when every
    /// time is equal and the line goes through them).
    pub r2: f64,
    /// Per point: (size, measured, fitted, measured − fitted).
    pub residuals: Vec<(f64, f64, f64, f64)>,
}

impl LineFit {
    /// The fitted time at `size`.
    pub fn at(&self, size: f64) -> f64 {
        self.intercept + self.slope * size
    }

    /// The largest |residual| / measured over the points with a positive
    /// measurement (0 when there are none).
    pub fn max_relative_residual(&self) -> f64 {
        self.residuals.iter().filter(|r| r.1 > 0.0).map(|r| (r.3 / r.1).abs()).fold(0.0, f64::max)
    }
}

/// Fits `time = intercept + slope · size` to `points` by ordinary least
/// squares. `None` when there are fewer than two distinct sizes or a value
/// is not finite (no line is determined).
pub fn fit_line(points: &[(f64, f64)]) -> Option<LineFit> {
    if points.iter().any(|&(x, y)| !x.is_finite() || !y.is_finite()) {
        return None;
    }
    let n = points.len() as f64;
    if points.len() < 2 {
        return None;
    }
    let mx = points.iter().map(|p| p.0).sum::<f64>() / n;
    let my = points.iter().map(|p| p.1).sum::<f64>() / n;
    // Centred sums: numerically stable when sizes are large (64 KB) and
    // times small (µs).
    let sxx: f64 = points.iter().map(|p| (p.0 - mx) * (p.0 - mx)).sum();
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    if sxx <= 0.0 {
        return None;
    }
    let slope = sxy / sxx;
    let intercept = my - slope * mx;
    let residuals: Vec<_> = points
        .iter()
        .map(|&(x, y)| {
            let f = intercept + slope * x;
            (x, y, f, y - f)
        })
        .collect();
    let ss_res: f64 = residuals.iter().map(|r| r.3 * r.3).sum();
    let ss_tot: f64 = points.iter().map(|p| (p.1 - my) * (p.1 - my)).sum();
    let r2 = if ss_tot > 0.0 { 1.0 - ss_res / ss_tot } else { 1.0 };
    Some(LineFit { intercept, slope, r2, residuals })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recovers_an_exact_line() {
        // Seed 004's write path: δ_w = 392 µs, ρ_w = 279.45 ns/B.
        let pts: Vec<_> =
            [1.0, 1024.0, 8192.0, 65536.0].iter().map(|&l| (l, 392e-6 + 279.45e-9 * l)).collect();
        let f = fit_line(&pts).unwrap();
        assert!((f.intercept - 392e-6).abs() < 1e-12);
        assert!((f.slope - 279.45e-9).abs() < 1e-15);
        assert!((f.r2 - 1.0).abs() < 1e-12);
        assert!(f.max_relative_residual() < 1e-9);
    }

    #[test]
    fn residuals_show_the_noise() {
        // Steps, not a line: least squares gives slope 8/5 and intercept
        // 13 − 1.6 · 1.5 (worked by hand), residuals summing to zero.
        let pts = [(0.0, 11.0), (1.0, 11.0), (2.0, 15.0), (3.0, 15.0)];
        let f = fit_line(&pts).unwrap();
        let sum: f64 = f.residuals.iter().map(|r| r.3).sum();
        assert!(sum.abs() < 1e-12);
        assert!((f.slope - 1.6).abs() < 1e-12, "{}", f.slope);
        assert!((f.intercept - 10.6).abs() < 1e-12);
        assert!(f.r2 > 0.7 && f.r2 < 1.0);
        assert!((f.at(2.0) - 13.8).abs() < 1e-12);
    }

    #[test]
    fn undetermined_lines_are_refused() {
        assert!(fit_line(&[]).is_none());
        assert!(fit_line(&[(1.0, 2.0)]).is_none());
        assert!(fit_line(&[(1.0, 2.0), (1.0, 3.0)]).is_none());
        assert!(fit_line(&[(1.0, 2.0), (2.0, f64::NAN)]).is_none());
    }
}
