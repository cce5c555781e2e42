//! Statistics of repeated measurements (the lab's one median, percentile and
//! spread), and the CSV form of the results.
//!
//! A repeated measurement is kept whole: the grouped row carries the median
//! as its value, the spread (min, quartiles, max, n) beside it, and every
//! repetition's own row under `samples`, so each number in the report traces
//! to what was measured.

use serde_json::Value;

/// The `q`-quantile (0..=1) of sorted samples, interpolating linearly
/// between neighbouring ranks (so the median of an even count is the mean of
/// the middle two). The one percentile helper of the lab.
pub(crate) fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let pos = (sorted.len() - 1) as f64 * q.clamp(0.0, 1.0);
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64)
}

/// Sorted copy of the finite samples.
pub(crate) fn sorted(samples: impl IntoIterator<Item = f64>) -> Vec<f64> {
    let mut v: Vec<f64> = samples.into_iter().filter(|x| x.is_finite()).collect();
    v.sort_by(f64::total_cmp);
    v
}

/// The median of samples (NaN for none).
pub(crate) fn median(samples: impl IntoIterator<Item = f64>) -> f64 {
    quantile(&sorted(samples), 0.5)
}

/// Median and spread of repeated measurements.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Spread {
    pub(crate) n: usize,
    pub(crate) min: f64,
    pub(crate) p25: f64,
    pub(crate) median: f64,
    pub(crate) p75: f64,
    pub(crate) max: f64,
}

impl Spread {
    /// The spread of `samples`; None for none.
    pub(crate) fn of(samples: impl IntoIterator<Item = f64>) -> Option<Spread> {
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

    /// `median (min–max, n)` when repeated, else the value; `prec` decimals.
    pub(crate) fn html(&self, prec: usize) -> String {
        if self.n > 1 {
            format!(
                "{:.prec$} <span class=\"src\">({:.prec$}–{:.prec$}, n {})</span>",
                self.median, self.min, self.max, self.n
            )
        } else {
            format!("{:.prec$}", self.median)
        }
    }

    /// `median (n N, min–max)` for the console.
    pub(crate) fn text(&self, prec: usize) -> String {
        format!("{:.prec$} (n {}, {:.prec$}–{:.prec$})", self.median, self.n, self.min, self.max)
    }
}

/// Groups rows by `key` (first-seen order), each group with the spread of
/// `value` over its rows.
pub(crate) fn group<R, K: PartialEq>(
    rows: &[R],
    key: impl Fn(&R) -> K,
    value: impl Fn(&R) -> f64,
) -> Vec<(K, Spread, Vec<&R>)> {
    let mut groups: Vec<(K, Vec<&R>)> = Vec::new();
    for r in rows {
        let k = key(r);
        match groups.iter_mut().find(|g| g.0 == k) {
            Some(g) => g.1.push(r),
            None => groups.push((k, vec![r])),
        }
    }
    groups
        .into_iter()
        .filter_map(|(k, members)| Spread::of(members.iter().map(|r| value(r))).map(|s| (k, s, members)))
        .collect()
}

fn csv_field(v: &Value) -> String {
    let s = match v {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    if s.contains([',', '"', '\n']) { format!("\"{}\"", s.replace('"', "\"\"")) } else { s }
}

/// Rows as CSV: one column per scalar field (objects one level deep become
/// `field.sub` columns), the `first` columns leading; lists — the raw
/// samples — stay in the JSON.
pub(crate) fn csv(rows: &[Value], first: &[&str]) -> String {
    let flat: Vec<Vec<(String, Value)>> = rows
        .iter()
        .map(|r| {
            let mut cols = Vec::new();
            for (k, v) in r.as_object().into_iter().flatten() {
                match v {
                    Value::Array(_) => {}
                    Value::Object(o) => {
                        for (sk, sv) in o.iter().filter(|(_, sv)| !sv.is_array() && !sv.is_object()) {
                            cols.push((format!("{k}.{sk}"), sv.clone()));
                        }
                    }
                    v => cols.push((k.clone(), v.clone())),
                }
            }
            cols
        })
        .collect();
    let mut header: Vec<String> = Vec::new();
    for f in first {
        if flat.iter().flatten().any(|c| c.0 == *f) {
            header.push((*f).to_string());
        }
    }
    for c in flat.iter().flatten() {
        if !header.contains(&c.0) {
            header.push(c.0.clone());
        }
    }
    let mut out = header.iter().map(|h| csv_field(&Value::String(h.clone()))).collect::<Vec<_>>().join(",");
    out.push('\n');
    for cols in &flat {
        let line: Vec<String> = header
            .iter()
            .map(|h| cols.iter().find(|c| &c.0 == h).map_or(String::new(), |c| csv_field(&c.1)))
            .collect();
        out += &line.join(",");
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn groups_keep_every_sample_and_summarise_them() {
        let rows = [(0, 10.0), (20, 5.0), (0, 30.0), (0, 20.0)];
        let g = group(&rows, |r| r.0, |r| r.1);
        assert_eq!(g.len(), 2);
        assert_eq!(g[0].0, 0);
        assert_eq!(g[0].1, Spread { n: 3, min: 10.0, p25: 15.0, median: 20.0, p75: 25.0, max: 30.0 });
        assert_eq!(g[0].2.len(), 3);
        assert_eq!(g[1].1.n, 1);
        assert_eq!(Spread::of([]), None);
        assert!(median([]).is_nan());
        assert_eq!(median([3.0, 1.0]), 2.0);
    }

    #[test]
    fn csv_has_one_column_per_scalar_and_quotes_what_needs_it() {
        let rows = vec![
            json!({"a": 1, "b": "x,y", "s": {"min": 1.5, "max": 2}, "raw": [1, 2]}),
            json!({"a": 2, "c": true}),
        ];
        assert_eq!(csv(&rows, &[]), "a,b,s.max,s.min,c\n1,\"x,y\",2,1.5,\n2,,,,true\n");
        assert_eq!(csv(&rows, &["c", "zz"]), "c,a,b,s.max,s.min\n,1,\"x,y\",2,1.5\ntrue,2,,,\n");
    }
}
