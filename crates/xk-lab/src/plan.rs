//! What a report run measures: each experiment's built-in full or quick
//! parameters, with a plan file (`xpress report --plan FILE`, TOML) on top.
//!
//! ```toml
//! experiments = ["E1", "E2", "PATHS"]   # which to run (default: all)
//! repetitions = 3                  # every experiment's `repetitions`, where it has one
//! [E2]                             # an experiment's table: any of its parameters
//! rtt_ms = [0, 100, 200]
//! seconds = 15
//!
//! [[plot]]                         # extra plots of any experiment's rows
//! experiment = "E2"
//! x = "rtt_ms"                     # row field on the x axis
//! y = "mbit_per_s"                 # row field on the y axis (median of repetitions)
//! series = "setting"               # optional: one line per value of this field
//! scale = "linear"                 # linear, log-log, log-x or log-y
//! title = "Goodput vs RTT"         # optional
//! x_label = "round trip (ms)"      # optional axis labels (default: the field names)
//! y_label = "goodput (Mbit/s)"
//! ```
//!
//! `xpress report --list` prints every experiment's parameters with their
//! built-in values. Every key is optional; an unknown key or a bad value is
//! an error naming the key, the value and the reason.

use serde_json::{Map, Value, json};

use crate::experiment::{Dyn, Entry};

/// A plot the report draws from an experiment's rows: `y` against `x`, one
/// line per value of `series`.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PlotSpec {
    pub(crate) experiment: String,
    pub(crate) x: String,
    pub(crate) y: String,
    #[serde(default)]
    pub(crate) series: Option<String>,
    #[serde(default = "linear")]
    pub(crate) scale: String,
    #[serde(default)]
    pub(crate) title: Option<String>,
    #[serde(default)]
    pub(crate) x_label: Option<String>,
    #[serde(default)]
    pub(crate) y_label: Option<String>,
}

fn linear() -> String {
    "linear".into()
}

impl PlotSpec {
    pub(crate) fn logs(&self) -> (bool, bool) {
        match self.scale.as_str() {
            "log-log" => (true, true),
            "log-x" => (true, false),
            "log-y" => (false, true),
            _ => (false, false),
        }
    }
}

/// The resolved plan: which experiments, each one's parameters, the plots.
pub(crate) struct Plan {
    /// (id, parameters as JSON), in report order.
    pub(crate) experiments: Vec<(&'static str, Value)>,
    pub(crate) plots: Vec<PlotSpec>,
}

fn toml_to_json(v: &toml::Value) -> Value {
    match v {
        toml::Value::String(s) => json!(s),
        toml::Value::Integer(i) => json!(i),
        toml::Value::Float(f) => json!(f),
        toml::Value::Boolean(b) => json!(b),
        toml::Value::Datetime(d) => json!(d.to_string()),
        toml::Value::Array(a) => Value::Array(a.iter().map(toml_to_json).collect()),
        toml::Value::Table(t) => Value::Object(t.iter().map(|(k, v)| (k.clone(), toml_to_json(v))).collect()),
    }
}

impl Plan {
    /// The built-in plan (full, or quick) with `text` (a plan file named
    /// `file`) on top.
    pub(crate) fn resolve(
        registry: &[Entry],
        quick: bool,
        file: Option<(&str, &str)>,
    ) -> Result<Plan, String> {
        let ids: Vec<&str> = registry.iter().map(|e| e.id).collect();
        let mut chosen: Vec<&str> = ids.clone();
        let mut params: Vec<Value> = registry.iter().map(|e| (e.defaults)(quick)).collect();
        let mut plots = Vec::new();
        if let Some((file, text)) = file {
            let table: toml::Table = text.parse().map_err(|e| format!("plan {file}: not valid TOML: {e}"))?;
            let err =
                |key: &str, v: &dyn std::fmt::Display, why: &str| format!("plan {file}: {key} = {v}: {why}");
            // Tables first, so `repetitions` at the top applies only where an
            // experiment's table does not set its own.
            let mut reps = None;
            for (k, v) in &table {
                match (k.as_str(), v) {
                    ("experiments", v) => {
                        let a = v.as_array().ok_or_else(|| err(k, v, "must be a list of experiment ids"))?;
                        chosen.clear();
                        for x in a {
                            match x.as_str().and_then(|n| ids.iter().find(|i| **i == n)) {
                                Some(id) => chosen.push(id),
                                None => {
                                    return Err(err(
                                        k,
                                        x,
                                        &format!("unknown experiment (known: {})", ids.join(", ")),
                                    ));
                                }
                            }
                        }
                    }
                    ("repetitions", v) => match v.as_integer() {
                        Some(n) if (1..=100).contains(&n) => reps = Some(n),
                        _ => return Err(err(k, v, "must be an integer from 1 to 100")),
                    },
                    ("plot", toml::Value::Array(list)) => {
                        for (i, p) in list.iter().enumerate() {
                            let spec: PlotSpec = serde_json::from_value(toml_to_json(p))
                                .map_err(|e| format!("plan {file}: plot[{i}]: {e}"))?;
                            if !ids.contains(&spec.experiment.as_str()) {
                                return Err(format!(
                                    "plan {file}: plot[{i}].experiment = {:?}: unknown experiment (known: {})",
                                    spec.experiment,
                                    ids.join(", ")
                                ));
                            }
                            if !["linear", "log-log", "log-x", "log-y"].contains(&spec.scale.as_str()) {
                                return Err(format!(
                                    "plan {file}: plot[{i}].scale = {:?}: must be linear, log-log, log-x or log-y",
                                    spec.scale
                                ));
                            }
                            plots.push(spec);
                        }
                    }
                    (id, toml::Value::Table(_)) if ids.contains(&id) => {}
                    _ => {
                        return Err(err(
                            k,
                            v,
                            &format!(
                                "unknown key (known: experiments, repetitions, [[plot]], and a table per experiment: {})",
                                ids.join(", ")
                            ),
                        ));
                    }
                }
            }
            for (i, e) in registry.iter().enumerate() {
                let obj = params[i].as_object_mut().expect("parameters are a struct");
                if let (Some(n), Some(slot)) = (reps, obj.get_mut("repetitions")) {
                    *slot = json!(n);
                }
                let Some(toml::Value::Table(t)) = table.get(e.id) else { continue };
                for (key, v) in t {
                    let full = format!("{}.{key}", e.id);
                    if !obj.contains_key(key) {
                        let known: Vec<&str> = obj.keys().map(String::as_str).collect();
                        return Err(err(&full, v, &format!("unknown key (known: {})", known.join(", "))));
                    }
                    // Checked one key at a time, so a type error names its key.
                    let mut alone: Map<String, Value> = obj.clone();
                    alone.insert(key.clone(), toml_to_json(v));
                    if let Err(why) = (e.build)(Value::Object(alone)) {
                        let why = why.split_once("] ").map_or(why.as_str(), |(_, w)| w).to_string();
                        return Err(err(&full, v, &why));
                    }
                    obj.insert(key.clone(), toml_to_json(v));
                }
            }
        }
        let experiments = registry
            .iter()
            .zip(params)
            .filter(|(e, _)| chosen.contains(&e.id))
            .map(|(e, p)| (e.id, p))
            .collect();
        Ok(Plan { experiments, plots })
    }

    /// Instances of the chosen experiments.
    pub(crate) fn build(&self, registry: &[Entry]) -> Result<Vec<Box<dyn Dyn>>, String> {
        self.experiments
            .iter()
            .map(|(id, p)| {
                let e = registry.iter().find(|e| e.id == *id).expect("resolved from the registry");
                (e.build)(p.clone())
            })
            .collect()
    }

    /// The plan as recorded in results.json.
    pub(crate) fn to_json(&self) -> Value {
        json!({
            "experiments": self.experiments.iter().map(|(id, _)| *id).collect::<Vec<_>>(),
            "params": self.experiments.iter().map(|(id, p)| (id.to_string(), p.clone())).collect::<Map<_, _>>(),
            "plots": self.plots,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::registry;

    fn resolve(text: &str) -> Result<Plan, String> {
        Plan::resolve(&registry(), true, Some(("p.toml", text)))
    }

    #[test]
    fn a_plan_file_overrides_what_it_names() {
        let p = resolve("experiments = [\"E2\", \"E4\"]\n[E2]\nrtt_ms = [0, 50]\ntcp = false\n").unwrap();
        let ids: Vec<&str> = p.experiments.iter().map(|e| e.0).collect();
        assert_eq!(ids, ["E2", "E4"]);
        assert_eq!(p.experiments[0].1["rtt_ms"], json!([0, 50]));
        assert_eq!(p.experiments[0].1["tcp"], json!(false));
        let builtin = Plan::resolve(&registry(), true, None).unwrap();
        let e2 = builtin.experiments.iter().find(|e| e.0 == "E2").unwrap();
        assert_eq!(p.experiments[0].1["seconds"], e2.1["seconds"], "untouched keys keep the built-in value");
    }

    #[test]
    fn the_plan_files_in_plans_resolve() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../plans");
        let mut n = 0;
        for f in std::fs::read_dir(&dir).unwrap() {
            let f = f.unwrap().path();
            let text = std::fs::read_to_string(&f).unwrap();
            let plan = Plan::resolve(&registry(), false, Some((&f.display().to_string(), &text)));
            plan.and_then(|p| p.build(&registry())).unwrap_or_else(|e| panic!("{e}"));
            n += 1;
        }
        assert!(n >= 3, "plans/ holds the full sweeps");
    }

    #[test]
    fn every_experiment_builds_from_its_defaults() {
        for quick in [true, false] {
            let p = Plan::resolve(&registry(), quick, None).unwrap();
            assert_eq!(p.build(&registry()).unwrap().len(), registry().len());
        }
    }

    #[test]
    fn bad_plans_name_the_key_the_value_and_the_reason() {
        let cases = [
            ("experiments = [\"E77\"]", "experiments = \"E77\": unknown experiment"),
            ("[E2]\nrtt_ms = [0, -5]", "E2.rtt_ms = [0, -5]: invalid value: integer `-5`"),
            ("[E2]\nrttms = [0]", "E2.rttms = [0]: unknown key (known: "),
            ("[MSG]\nsizes = []", "MSG.sizes = []: sizes: must not be empty"),
            ("[E2]\ntcp = 1", "E2.tcp = 1: invalid type"),
            ("repetitions = 0", "repetitions = 0: must be an integer from 1 to 100"),
            ("[[plot]]\nexperiment = \"E2\"\nx = \"rtt_ms\"", "plot[0]: missing field `y`"),
            (
                "[[plot]]\nexperiment = \"E88\"\nx = \"a\"\ny = \"b\"",
                "plot[0].experiment = \"E88\": unknown experiment",
            ),
            (
                "[[plot]]\nexperiment = \"E2\"\nx = \"a\"\ny = \"b\"\nscale = \"cubic\"",
                "plot[0].scale = \"cubic\"",
            ),
            (
                "[[plot]]\nexperiment = \"E2\"\nx = \"a\"\ny = \"b\"\ncolour = \"red\"",
                "unknown field `colour`",
            ),
            ("plot = 3", "plot = 3: unknown key"),
            (
                "[MSG]\npeers = [\"sctp\"]",
                "MSG.peers = [\"sctp\"]: unknown peer \"sctp\" (known: xtp, tcp, quic, iperf3)",
            ),
            ("[E8]\nplacement = \"bogus\"", "E8.placement = \"bogus\": unknown variant `bogus`"),
            ("[E6]\nrates = [2400]", "E6.rates = [2400]: 2400: the packet-radio profiles are 1200 and 9600"),
            ("seed = 3", "seed = 3: unknown key"),
            ("[E1\n", "not valid TOML"),
        ];
        for (text, want) in cases {
            let e = resolve(text).err().unwrap_or_default();
            assert!(e.contains(want) && e.starts_with("plan p.toml: "), "{text:?} -> {e}");
        }
    }
}
