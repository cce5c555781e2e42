//! Repetitions and their summary, and the CSV form of the results.
//!
//! A repeated measurement is kept whole: the grouped row carries the median
//! as its value, the spread (min, quartiles, max, n) beside it, and every
//! repetition's own row under `samples`, so each number in the report traces
//! to what was measured.

use serde_json::{Map, Value, json};

/// The `q`-quantile (0..=1) of sorted samples, interpolating linearly
/// between neighbouring ranks (so the median of an even count is the mean of
/// the middle two).
fn quantile(sorted: &[f64], q: f64) -> f64 {
    let pos = (sorted.len() - 1) as f64 * q;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64)
}

/// Median and spread of `samples` (n, min, p25, median, p75, max); `null`
/// for no samples.
pub(crate) fn spread(samples: &[f64]) -> Value {
    let mut v: Vec<f64> = samples.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return Value::Null;
    }
    v.sort_by(f64::total_cmp);
    json!({
        "n": v.len(), "min": v[0], "p25": quantile(&v, 0.25), "median": quantile(&v, 0.5),
        "p75": quantile(&v, 0.75), "max": v[v.len() - 1],
    })
}

/// Groups rows whose `key` fields are equal (first-seen order). Each group
/// becomes one row: the key fields, `value` = the median of the group's
/// `value` fields, `<value>_spread`, and `samples` = the group's rows.
pub(crate) fn group(rows: Vec<Value>, key: &[&str], value: &str) -> Vec<Value> {
    let mut groups: Vec<(Vec<Value>, Vec<Value>)> = Vec::new();
    for r in rows {
        let k: Vec<Value> = key.iter().map(|f| r[*f].clone()).collect();
        match groups.iter_mut().find(|g| g.0 == k) {
            Some(g) => g.1.push(r),
            None => groups.push((k, vec![r])),
        }
    }
    groups
        .into_iter()
        .map(|(k, members)| {
            let samples: Vec<f64> = members.iter().filter_map(|m| m[value].as_f64()).collect();
            let s = spread(&samples);
            let mut out = Map::new();
            for (f, v) in key.iter().zip(k) {
                out.insert((*f).to_string(), v);
            }
            out.insert(value.to_string(), s["median"].clone());
            out.insert(format!("{value}_spread"), s);
            out.insert("samples".into(), Value::Array(members));
            Value::Object(out)
        })
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

    #[test]
    fn groups_keep_every_sample_and_summarise_them() {
        let rows = vec![
            json!({"rtt": 0, "mbit": 10.0, "s": 1.0}),
            json!({"rtt": 20, "mbit": 5.0, "s": 2.0}),
            json!({"rtt": 0, "mbit": 30.0, "s": 0.3}),
            json!({"rtt": 0, "mbit": 20.0, "s": 0.5}),
        ];
        let g = group(rows, &["rtt"], "mbit");
        assert_eq!(g.len(), 2);
        assert_eq!(g[0]["rtt"], 0);
        assert_eq!(g[0]["mbit"], 20.0);
        assert_eq!(
            g[0]["mbit_spread"],
            json!({"n": 3, "min": 10.0, "p25": 15.0, "median": 20.0, "p75": 25.0, "max": 30.0})
        );
        assert_eq!(g[0]["samples"].as_array().unwrap().len(), 3);
        assert_eq!(g[1]["mbit_spread"]["n"], 1);
        assert_eq!(spread(&[]), Value::Null);
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
