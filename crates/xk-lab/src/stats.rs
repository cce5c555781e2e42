//! Statistics of repeated measurements (grouping rows and summarising each
//! group with `xk_stats`' median and spread), and the CSV form of the results.
//!
//! A repeated measurement is kept whole: the grouped row carries the median
//! as its value, the spread (min, quartiles, max, n) beside it, and every
//! repetition's own row under `samples`, so each number in the report traces
//! to what was measured.

use serde_json::Value;

// The one median, percentile and spread helper of the workspace (the
// lab's summaries use its linear quantile).
pub(crate) use xk_stats::{Spread, median};

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

/// The rows a cell's median counts: its valid runs, or all its runs when
/// none is valid (the cell is marked then). An invalid run's timing is not
/// trustworthy, so it does not move a median that valid runs can give.
pub(crate) fn counted<R: Clone, K: PartialEq>(
    rows: &[R],
    cell: impl Fn(&R) -> K,
    valid: impl Fn(&R) -> bool,
) -> Vec<R> {
    rows.iter()
        .filter(|r| valid(r) || !rows.iter().any(|o| cell(o) == cell(r) && valid(o)))
        .cloned()
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
