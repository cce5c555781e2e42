//! The spread of repeated measurements: what a report prints beside a
//! median so a reader can judge it.

use crate::{quantile, sorted};

/// Median and spread of repeated measurements.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Spread {
    /// Samples.
    pub n: usize,
    /// Smallest.
    pub min: f64,
    /// First quartile.
    pub p25: f64,
    /// Median.
    pub median: f64,
    /// Third quartile.
    pub p75: f64,
    /// Largest.
    pub max: f64,
}

impl Spread {
    /// The spread of the finite `samples` (quartiles by [`quantile`]); None
    /// for none.
    pub fn of(samples: impl IntoIterator<Item = f64>) -> Option<Spread> {
        let v = sorted(samples);
        (!v.is_empty()).then(|| Spread {
            n: v.len(),
            min: v[0],
            p25: quantile(&v, 0.25),
            median: quantile(&v, 0.5),
            p75: quantile(&v, 0.75),
            max: v[v.len() - 1],
        })
    }

    /// `median (min–max, n)` when repeated, else the value; `prec` decimals
    /// (HTML: the range in a `src` span).
    pub fn html(&self, prec: usize) -> String {
        if self.n > 1 {
            format!(
                "{:.prec$} <span class=\"src\">({:.prec$}–{:.prec$}, n {})</span>",
                self.median, self.min, self.max, self.n
            )
        } else {
            format!("{:.prec$}", self.median)
        }
    }

    /// `median (n N, min–max)` for a console.
    pub fn text(&self, prec: usize) -> String {
        format!("{:.prec$} (n {}, {:.prec$}–{:.prec$})", self.median, self.n, self.min, self.max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spread_summarises_its_samples() {
        assert_eq!(
            Spread::of([20.0, 10.0, 30.0]),
            Some(Spread { n: 3, min: 10.0, p25: 15.0, median: 20.0, p75: 25.0, max: 30.0 })
        );
        assert_eq!(Spread::of([]), None);
        let s = Spread::of([1.0, 2.0]).unwrap();
        assert_eq!(s.text(1), "1.5 (n 2, 1.0–2.0)");
        assert_eq!(Spread::of([7.0]).unwrap().html(0), "7");
    }
}
