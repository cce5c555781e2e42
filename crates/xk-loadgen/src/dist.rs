//! Distributions of delays and request attributes, as a model file writes
//! them (`{ dist = "exponential", mean = 100 }`), with their sampling and
//! their analytic mean (for `xpress loadgen check`).
//!
//! Values are plain numbers: a delay's unit is its state's `unit` (default
//! µs), a size is in bytes. Every sample is clamped to be non-negative: a
//! delay or a size below zero means nothing, and the normal distribution is
//! truncated at `min` (default 0) by rejection, so its mean is the truncated
//! one, computed below.

use serde::{Deserialize, Serialize};
use xk_rand::Rng;

/// A distribution as written in a model file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "dist", rename_all = "lowercase", deny_unknown_fields)]
pub enum Dist {
    /// Always `value`.
    Const {
        /// The value.
        value: f64,
    },
    /// Uniform in `[min, max]`.
    Uniform {
        /// Lower bound.
        min: f64,
        /// Upper bound.
        max: f64,
    },
    /// Exponential with mean `mean` (Poisson arrivals when used as a delay).
    Exponential {
        /// The mean.
        mean: f64,
    },
    /// Normal, truncated below at `min` (default 0).
    Normal {
        /// Mean before truncation.
        mean: f64,
        /// Standard deviation.
        sd: f64,
        /// Truncation point.
        #[serde(default)]
        min: f64,
    },
    /// Log-normal: `exp(N(mu, sigma²))`.
    Lognormal {
        /// Mean of the logarithm.
        mu: f64,
        /// Standard deviation of the logarithm.
        sigma: f64,
    },
    /// Pareto with scale `scale` (the least value) and shape `shape`.
    Pareto {
        /// The least value.
        scale: f64,
        /// Tail index.
        shape: f64,
    },
    /// Weibull with scale `scale` and shape `shape`.
    Weibull {
        /// Scale λ.
        scale: f64,
        /// Shape k.
        shape: f64,
    },
    /// Drawn from `values` with `weights` (equal when absent), or from the
    /// numbers in `file` (one a line, `#` comments), relative to the model.
    Empirical {
        /// The values.
        #[serde(default)]
        values: Vec<f64>,
        /// Their weights (same length), or empty for equal weights.
        #[serde(default)]
        weights: Vec<f64>,
        /// A file of values instead of `values`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        file: Option<String>,
    },
    /// `values` (or `file`) replayed in order, round and round: a trace.
    Trace {
        /// The values.
        #[serde(default)]
        values: Vec<f64>,
        /// A file of values instead of `values`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        file: Option<String>,
    },
    /// The current value of a context variable (times `scale`).
    Var {
        /// The variable's name.
        var: String,
        /// Multiplier.
        #[serde(default = "one")]
        scale: f64,
    },
}

fn one() -> f64 {
    1.0
}

/// A distribution ready to sample: files read, weights made cumulative,
/// variables resolved to indices.
#[derive(Clone, Debug)]
pub(crate) enum Sampler {
    Const(f64),
    Uniform(f64, f64),
    Exponential(f64),
    Normal {
        mean: f64,
        sd: f64,
        min: f64,
    },
    Lognormal(f64, f64),
    Pareto(f64, f64),
    Weibull(f64, f64),
    /// Values and cumulative weights (last = 1).
    Empirical(Vec<f64>, Vec<f64>),
    /// Values; the position is per walker (see [`crate::gar`]).
    Trace(Vec<f64>),
    Var(usize, f64),
}

/// Reads numbers from a file, one a line, blank lines and `#` comments skipped.
fn read_values(path: &std::path::Path) -> Result<Vec<f64>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let l = line.split('#').next().unwrap_or("").trim();
        if l.is_empty() {
            continue;
        }
        let v: f64 =
            l.parse().map_err(|_| format!("{} line {}: {l:?} is not a number", path.display(), i + 1))?;
        out.push(v);
    }
    if out.is_empty() {
        return Err(format!("{} holds no values", path.display()));
    }
    Ok(out)
}

impl Dist {
    /// Checks the parameters and prepares a sampler. `base` is the model
    /// file's directory (for `file`), `var` resolves variable names. The
    /// error says which parameter is wrong and why.
    pub(crate) fn compile(
        &self,
        base: &std::path::Path,
        var: &dyn Fn(&str) -> Option<usize>,
    ) -> Result<Sampler, String> {
        let finite = |name: &str, v: f64| {
            if v.is_finite() { Ok(v) } else { Err(format!("{name} = {v} is not a finite number")) }
        };
        let positive = |name: &str, v: f64| {
            if v.is_finite() && v > 0.0 { Ok(v) } else { Err(format!("{name} = {v} must be above 0")) }
        };
        let nonneg = |name: &str, v: f64| {
            if v.is_finite() && v >= 0.0 { Ok(v) } else { Err(format!("{name} = {v} must be 0 or more")) }
        };
        Ok(match self {
            Dist::Const { value } => Sampler::Const(nonneg("value", *value)?),
            Dist::Uniform { min, max } => {
                let (a, b) = (nonneg("min", *min)?, nonneg("max", *max)?);
                if a > b {
                    return Err(format!("min = {a} is above max = {b}"));
                }
                Sampler::Uniform(a, b)
            }
            Dist::Exponential { mean } => Sampler::Exponential(positive("mean", *mean)?),
            Dist::Normal { mean, sd, min } => Sampler::Normal {
                mean: finite("mean", *mean)?,
                sd: nonneg("sd", *sd)?,
                min: nonneg("min", *min)?,
            },
            Dist::Lognormal { mu, sigma } => Sampler::Lognormal(finite("mu", *mu)?, nonneg("sigma", *sigma)?),
            Dist::Pareto { scale, shape } => {
                Sampler::Pareto(positive("scale", *scale)?, positive("shape", *shape)?)
            }
            Dist::Weibull { scale, shape } => {
                Sampler::Weibull(positive("scale", *scale)?, positive("shape", *shape)?)
            }
            Dist::Empirical { values, weights, file } => {
                let values = match (file, values.is_empty()) {
                    (Some(f), true) => read_values(&base.join(f))?,
                    (None, false) => values.clone(),
                    (Some(_), false) => return Err("give values or file, not both".into()),
                    (None, true) => return Err("values is empty and no file is given".into()),
                };
                for v in &values {
                    nonneg("a value", *v)?;
                }
                let weights = if weights.is_empty() { vec![1.0; values.len()] } else { weights.clone() };
                if weights.len() != values.len() {
                    return Err(format!("{} weights for {} values", weights.len(), values.len()));
                }
                for w in &weights {
                    nonneg("a weight", *w)?;
                }
                let total: f64 = weights.iter().sum();
                if total <= 0.0 {
                    return Err("the weights sum to 0".into());
                }
                let mut acc = 0.0;
                let cum = weights
                    .iter()
                    .map(|w| {
                        acc += w / total;
                        acc
                    })
                    .collect();
                Sampler::Empirical(values, cum)
            }
            Dist::Trace { values, file } => {
                let values = match (file, values.is_empty()) {
                    (Some(f), true) => read_values(&base.join(f))?,
                    (None, false) => values.clone(),
                    (Some(_), false) => return Err("give values or file, not both".into()),
                    (None, true) => return Err("values is empty and no file is given".into()),
                };
                for v in &values {
                    nonneg("a value", *v)?;
                }
                Sampler::Trace(values)
            }
            Dist::Var { var: name, scale } => {
                let i = var(name).ok_or_else(|| format!("no variable {name:?} is declared"))?;
                Sampler::Var(i, finite("scale", *scale)?)
            }
        })
    }
}

impl Sampler {
    /// One sample (never negative). `trace_pos` is the walker's position in
    /// a trace, `vars` its context variables.
    #[inline]
    pub(crate) fn sample(&self, rng: &mut Rng, trace_pos: &mut usize, vars: &[i64]) -> f64 {
        let v = match self {
            Sampler::Const(v) => *v,
            Sampler::Uniform(a, b) => a + (b - a) * rng.unit(),
            Sampler::Exponential(m) => -m * (1.0 - rng.unit()).ln(),
            Sampler::Normal { mean, sd, min } => {
                // Rejection keeps the shape above `min`; after 64 misses (a
                // mean far below `min`) the bound itself is returned.
                let mut x = *min;
                for _ in 0..64 {
                    let y = mean + sd * rng.normal();
                    if y >= *min {
                        x = y;
                        break;
                    }
                }
                x
            }
            Sampler::Lognormal(mu, sigma) => (mu + sigma * rng.normal()).exp(),
            Sampler::Pareto(xm, a) => rng.pareto(*xm, *a),
            Sampler::Weibull(l, k) => l * (-(1.0 - rng.unit()).ln()).powf(1.0 / k),
            Sampler::Empirical(vals, cum) => {
                let u = rng.unit();
                let i = cum.partition_point(|c| *c <= u).min(vals.len() - 1);
                vals[i]
            }
            Sampler::Trace(vals) => {
                let v = vals[*trace_pos % vals.len()];
                *trace_pos = (*trace_pos + 1) % vals.len();
                v
            }
            Sampler::Var(i, s) => vars[*i] as f64 * s,
        };
        if v.is_finite() { v.max(0.0) } else { 0.0 }
    }

    /// The analytic mean, or why there is none (an infinite mean, a value
    /// that depends on variables).
    pub(crate) fn mean(&self) -> Result<f64, String> {
        Ok(match self {
            Sampler::Const(v) => *v,
            Sampler::Uniform(a, b) => (a + b) / 2.0,
            Sampler::Exponential(m) => *m,
            Sampler::Normal { mean, sd, min } => {
                if *sd == 0.0 {
                    mean.max(*min)
                } else {
                    // Mean of a normal truncated below at `min`:
                    // μ + σ φ(α) / (1 − Φ(α)), α = (min − μ) / σ.
                    let a = (min - mean) / sd;
                    let tail = 0.5 * erfc(a / std::f64::consts::SQRT_2);
                    if tail < 1e-300 {
                        *min
                    } else {
                        let phi = (-0.5 * a * a).exp() / (2.0 * std::f64::consts::PI).sqrt();
                        mean + sd * phi / tail
                    }
                }
            }
            Sampler::Lognormal(mu, s) => (mu + s * s / 2.0).exp(),
            Sampler::Pareto(xm, a) => {
                if *a <= 1.0 {
                    return Err(format!("a Pareto distribution with shape {a} ≤ 1 has no finite mean"));
                }
                xm * a / (a - 1.0)
            }
            Sampler::Weibull(l, k) => l * gamma(1.0 + 1.0 / k),
            Sampler::Empirical(vals, cum) => {
                let mut prev = 0.0;
                vals.iter()
                    .zip(cum)
                    .map(|(v, c)| {
                        let w = c - prev;
                        prev = *c;
                        v * w
                    })
                    .sum()
            }
            Sampler::Trace(vals) => vals.iter().sum::<f64>() / vals.len() as f64,
            Sampler::Var(..) => return Err("it depends on a context variable".into()),
        })
    }
}

/// Complementary error function (W. J. Cody's rational approximation as in
/// Numerical Recipes' `erfcc`, relative error below 1.2e-7: enough for a
/// predicted rate).
fn erfc(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let r = t
        * (-z * z - 1.265_512_23
            + t * (1.000_023_68
                + t * (0.374_091_96
                    + t * (0.096_784_18
                        + t * (-0.186_288_06
                            + t * (0.278_868_07
                                + t * (-1.135_203_98
                                    + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77)))))))))
            .exp();
    if x >= 0.0 { r } else { 2.0 - r }
}

/// The gamma function (Lanczos approximation, g = 7), for the Weibull mean.
fn gamma(x: f64) -> f64 {
    const G: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        return std::f64::consts::PI / ((std::f64::consts::PI * x).sin() * gamma(1.0 - x));
    }
    let x = x - 1.0;
    let mut a = G[0];
    let t = x + 7.5;
    for (i, g) in G.iter().enumerate().skip(1) {
        a += g / (x + i as f64);
    }
    (2.0 * std::f64::consts::PI).sqrt() * t.powf(x + 0.5) * (-t).exp() * a
}

#[cfg(test)]
mod tests {
    use super::*;

    fn compiled(d: Dist) -> Sampler {
        d.compile(std::path::Path::new("."), &|_| None).unwrap()
    }

    /// Every distribution's sample mean is near its analytic mean.
    #[test]
    fn sample_means_match_analytic_means() {
        let cases = [
            Dist::Const { value: 5.0 },
            Dist::Uniform { min: 2.0, max: 10.0 },
            Dist::Exponential { mean: 7.0 },
            Dist::Normal { mean: 1.0, sd: 3.0, min: 0.0 },
            Dist::Lognormal { mu: 1.0, sigma: 0.5 },
            Dist::Pareto { scale: 2.0, shape: 3.5 },
            Dist::Weibull { scale: 4.0, shape: 1.5 },
            Dist::Empirical { values: vec![1.0, 10.0], weights: vec![3.0, 1.0], file: None },
            Dist::Trace { values: vec![1.0, 2.0, 6.0], file: None },
        ];
        for d in cases {
            let s = compiled(d.clone());
            let mut rng = Rng::new(3);
            let mut pos = 0;
            let n = 400_000;
            let m = (0..n).map(|_| s.sample(&mut rng, &mut pos, &[])).sum::<f64>() / n as f64;
            let want = s.mean().unwrap();
            assert!((m - want).abs() / want < 0.02, "{d:?}: sample mean {m}, analytic {want}");
        }
    }

    #[test]
    fn bad_parameters_name_the_parameter() {
        let e =
            Dist::Uniform { min: 5.0, max: 1.0 }.compile(std::path::Path::new("."), &|_| None).unwrap_err();
        assert!(e.contains("min = 5") && e.contains("max = 1"), "{e}");
        let e = Dist::Exponential { mean: -1.0 }.compile(std::path::Path::new("."), &|_| None).unwrap_err();
        assert!(e.contains("mean"), "{e}");
        let e = compiled(Dist::Pareto { scale: 1.0, shape: 0.8 }).mean().unwrap_err();
        assert!(e.contains("no finite mean"), "{e}");
        assert!((gamma(5.0) - 24.0).abs() < 1e-9);
    }
}
