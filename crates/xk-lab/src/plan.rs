//! What a report run measures: the built-in full and quick plans, and plan
//! files (`xpress report --plan FILE`, TOML) that override any part of them.
//!
//! ```toml
//! experiments = ["E1", "E2", "MSG", "E6", "E4", "E9"]   # which to run
//! repetitions = 3                  # default repetitions of E2, MSG and E6 points
//! [E1]
//! sizes = [10, 1000, 10000]        # message bytes
//! simulated_count = 2000           # round trips per simulated row
//! udp_count = 5000                 # round trips per loopback row
//! [E2]
//! rtt_ms = [0, 50, 100, 200]       # round-trip delays
//! bytes = 4000000                  # per transfer
//! tcp = true                       # kernel TCP rows through `xpress netns` (root)
//! repetitions = 3                  # each point measured this often: median and spread
//! [MSG]
//! sizes = [64, 1024, 65536]        # message bytes
//! bytes = 100000000                # per run
//! repetitions = 3
//! peers = ["xtp", "tcp", "quic", "iperf3"]   # transports measured (iperf3 if installed)
//! [E6]
//! sizes = [1, 100, 1000, 10000]    # file bytes, over the simulated packet radio
//! rates = [1200, 9600]             # bit/s (packet-radio-1200 / -9600 profiles)
//! transfers = 5                    # retrievals per context (median latency)
//! repetitions = 3                  # seeds per point
//! [E4]
//! max_bindings = 1000000
//! lookups = 1000000
//! reps = 5
//!
//! [[plot]]                         # series to plot (replace the built-in list)
//! experiment = "E2"                # whose rows
//! rows = "rows"                    # or "tcp_rows" (E2's kernel TCP rows)
//! x = "rtt_ms"                     # column on the x axis
//! y = "mbit_per_s"                 # column on the y axis (the median, if repeated)
//! series = "nocheck"               # optional: one line per value of this column
//! scale = "linear"                 # linear, log-log, log-x or log-y
//! title = "XTP goodput vs RTT"     # optional
//! ```
//!
//! Every key is optional; an unknown key or a bad value is an error naming
//! the key, the value and the reason.

use serde_json::{Value, json};

/// The transports goodput vs message size can measure (iperf3 only when
/// installed).
pub(crate) const MSG_PEERS: [&str; 4] = ["xtp", "tcp", "quic", "iperf3"];

/// All experiments a plan may name.
pub(crate) const EXPERIMENTS: [&str; 6] = ["E1", "E2", "MSG", "E6", "E4", "E9"];

/// A plot the report draws from the results: `y` against `x` over the
/// experiment's rows, one line per value of `series`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct PlotSpec {
    pub(crate) experiment: String,
    pub(crate) rows: String,
    pub(crate) x: String,
    pub(crate) y: String,
    pub(crate) series: Option<String>,
    pub(crate) log_x: bool,
    pub(crate) log_y: bool,
    pub(crate) title: String,
}

impl PlotSpec {
    fn parse(file: &str, i: usize, v: &toml::Value) -> Result<PlotSpec, String> {
        let t = v
            .as_table()
            .ok_or_else(|| format!("plan {file}: plot[{i}] = {v}: must be a table ([[plot]])"))?;
        let field = |k: &str| -> Result<Option<String>, String> {
            match t.get(k) {
                None => Ok(None),
                Some(toml::Value::String(s)) if !s.is_empty() => Ok(Some(s.clone())),
                Some(v) => Err(format!("plan {file}: plot[{i}].{k} = {v}: must be a non-empty string")),
            }
        };
        let need = |k: &str| field(k)?.ok_or_else(|| format!("plan {file}: plot[{i}].{k}: missing"));
        for k in t.keys() {
            if !["experiment", "rows", "x", "y", "series", "scale", "title"].contains(&k.as_str()) {
                return Err(format!(
                    "plan {file}: plot[{i}].{k}: unknown key (known: experiment, rows, x, y, series, scale, title)"
                ));
            }
        }
        let experiment = need("experiment")?;
        if !EXPERIMENTS.contains(&experiment.as_str()) {
            return Err(format!(
                "plan {file}: plot[{i}].experiment = {experiment:?}: unknown experiment (known: {})",
                EXPERIMENTS.join(", ")
            ));
        }
        let rows = field("rows")?.unwrap_or_else(|| "rows".into());
        if rows != "rows" && rows != "tcp_rows" {
            return Err(format!("plan {file}: plot[{i}].rows = {rows:?}: must be \"rows\" or \"tcp_rows\""));
        }
        let scale = field("scale")?.unwrap_or_else(|| "linear".into());
        let (log_x, log_y) = match scale.as_str() {
            "linear" => (false, false),
            "log-log" => (true, true),
            "log-x" => (true, false),
            "log-y" => (false, true),
            _ => {
                return Err(format!(
                    "plan {file}: plot[{i}].scale = {scale:?}: must be linear, log-log, log-x or log-y"
                ));
            }
        };
        let (x, y) = (need("x")?, need("y")?);
        let title = field("title")?.unwrap_or_else(|| format!("{experiment}: {y} vs {x}"));
        Ok(PlotSpec { experiment, rows, x, y, series: field("series")?, log_x, log_y, title })
    }

    fn to_json(&self) -> Value {
        json!({"experiment": self.experiment, "rows": self.rows, "x": self.x, "y": self.y, "series": self.series,
            "log_x": self.log_x, "log_y": self.log_y, "title": self.title})
    }
}

/// The parameters of one run.
#[derive(Clone, Debug)]
pub(crate) struct Plan {
    pub(crate) experiments: Vec<String>,
    pub(crate) e1_sizes: Vec<usize>,
    pub(crate) e1_sim_count: u32,
    pub(crate) e1_udp_count: u32,
    pub(crate) e2_rtts: Vec<u64>,
    pub(crate) e2_bytes: u64,
    pub(crate) e2_tcp: bool,
    pub(crate) e2_reps: u32,
    pub(crate) msg_sizes: Vec<usize>,
    pub(crate) msg_bytes: u64,
    pub(crate) msg_reps: u32,
    pub(crate) msg_peers: Vec<String>,
    pub(crate) e6_sizes: Vec<usize>,
    pub(crate) e6_rates: Vec<u64>,
    pub(crate) e6_transfers: u32,
    pub(crate) e6_reps: u32,
    pub(crate) plots: Vec<PlotSpec>,
    pub(crate) e4_max_bindings: usize,
    pub(crate) e4_lookups: usize,
    pub(crate) e4_reps: usize,
}

impl Plan {
    /// The built-in plan: full, or quick (CI).
    pub(crate) fn builtin(quick: bool) -> Plan {
        Plan {
            experiments: EXPERIMENTS.iter().map(|s| s.to_string()).collect(),
            e1_sizes: vec![10, 1000, 10_000],
            e1_sim_count: if quick { 200 } else { 2000 },
            e1_udp_count: if quick { 500 } else { 5000 },
            e2_rtts: if quick { vec![0, 100, 200] } else { (0..=200).step_by(20).collect() },
            e2_bytes: if quick { 2_000_000 } else { 4_000_000 },
            e2_tcp: true,
            e2_reps: if quick { 1 } else { 3 },
            msg_reps: if quick { 2 } else { 3 },
            msg_peers: MSG_PEERS.iter().map(|s| s.to_string()).collect(),
            e6_sizes: vec![1, 100, 1000, 10_000],
            e6_rates: vec![1200, 9600],
            e6_transfers: if quick { 2 } else { 5 },
            e6_reps: if quick { 1 } else { 3 },
            plots: vec![PlotSpec {
                experiment: "E6".into(),
                rows: "rows".into(),
                x: "file_bytes".into(),
                y: "normalised".into(),
                series: Some("rate_bps".into()),
                log_x: true,
                log_y: false,
                title: "E6 normalised throughput vs file size over packet radio (by bit rate)".into(),
            }],
            msg_sizes: if quick {
                vec![64, 1024, 65_536]
            } else {
                vec![16, 64, 256, 1024, 4096, 16_384, 65_536]
            },
            msg_bytes: if quick { 20_000_000 } else { 100_000_000 },
            e4_max_bindings: if quick { 10_000 } else { 1_000_000 },
            e4_lookups: if quick { 200_000 } else { 1_000_000 },
            e4_reps: if quick { 3 } else { 5 },
        }
    }

    pub(crate) fn runs(&self, e: &str) -> bool {
        self.experiments.iter().any(|x| x == e)
    }

    /// Applies a plan file's text on top of `self`; `file` names it in errors.
    pub(crate) fn apply(&mut self, file: &str, text: &str) -> Result<(), String> {
        let table: toml::Table = text.parse().map_err(|e| format!("plan {file}: not valid TOML: {e}"))?;
        let err = |key: &str, v: &toml::Value, why: &str| format!("plan {file}: {key} = {v}: {why}");
        let uint = |key: &str, v: &toml::Value, lo: u64, hi: u64| -> Result<u64, String> {
            match v.as_integer() {
                Some(i) if i >= 0 && (lo..=hi).contains(&(i as u64)) => Ok(i as u64),
                _ => Err(err(key, v, &format!("must be an integer from {lo} to {hi}"))),
            }
        };
        let list = |key: &str, v: &toml::Value, lo: u64, hi: u64| -> Result<Vec<u64>, String> {
            let a = v.as_array().ok_or_else(|| err(key, v, "must be a list"))?;
            if a.is_empty() {
                return Err(err(key, v, "must not be empty"));
            }
            a.iter().map(|x| uint(key, x, lo, hi)).collect()
        };
        for (k, v) in &table {
            match (k.as_str(), v) {
                ("experiments", v) => {
                    let a = v.as_array().ok_or_else(|| err(k, v, "must be a list of experiment names"))?;
                    let mut names = Vec::new();
                    for x in a {
                        match x.as_str() {
                            Some(n) if EXPERIMENTS.contains(&n) => names.push(n.to_string()),
                            _ => {
                                return Err(err(
                                    k,
                                    x,
                                    &format!("unknown experiment (known: {})", EXPERIMENTS.join(", ")),
                                ));
                            }
                        }
                    }
                    self.experiments = names;
                }
                ("plot", toml::Value::Array(list)) => {
                    self.plots = list
                        .iter()
                        .enumerate()
                        .map(|(i, v)| PlotSpec::parse(file, i, v))
                        .collect::<Result<_, _>>()?;
                }
                ("repetitions", v) => {
                    let n = uint(k, v, 1, 100)? as u32;
                    (self.e2_reps, self.msg_reps, self.e6_reps) = (n, n, n);
                }
                (section, toml::Value::Table(t)) if EXPERIMENTS.contains(&section) && section != "E9" => {
                    for (key, v) in t {
                        let full = format!("{section}.{key}");
                        match (section, key.as_str()) {
                            ("E1", "sizes") => {
                                self.e1_sizes =
                                    list(&full, v, 1, 1_000_000)?.into_iter().map(|x| x as usize).collect()
                            }
                            ("E1", "simulated_count") => {
                                self.e1_sim_count = uint(&full, v, 1, 1_000_000)? as u32
                            }
                            ("E1", "udp_count") => self.e1_udp_count = uint(&full, v, 1, 1_000_000)? as u32,
                            ("E2", "rtt_ms") => self.e2_rtts = list(&full, v, 0, 10_000)?,
                            ("E2", "bytes") => self.e2_bytes = uint(&full, v, 1, 10_000_000_000)?,
                            ("E2", "tcp") => {
                                self.e2_tcp =
                                    v.as_bool().ok_or_else(|| err(&full, v, "must be true or false"))?
                            }
                            ("MSG", "sizes") => {
                                self.msg_sizes =
                                    list(&full, v, 1, 1 << 20)?.into_iter().map(|x| x as usize).collect()
                            }
                            ("MSG", "bytes") => self.msg_bytes = uint(&full, v, 1, 100_000_000_000)?,
                            ("E2", "repetitions") => self.e2_reps = uint(&full, v, 1, 100)? as u32,
                            ("MSG", "repetitions") => self.msg_reps = uint(&full, v, 1, 100)? as u32,
                            ("MSG", "peers") => {
                                let a = v.as_array().filter(|a| !a.is_empty()).ok_or_else(|| {
                                    err(
                                        &full,
                                        v,
                                        &format!("must be a non-empty list of {}", MSG_PEERS.join(", ")),
                                    )
                                })?;
                                let mut peers = Vec::new();
                                for x in a {
                                    match x.as_str() {
                                        Some(n) if MSG_PEERS.contains(&n) => peers.push(n.to_string()),
                                        _ => {
                                            return Err(err(
                                                &full,
                                                x,
                                                &format!("unknown peer (known: {})", MSG_PEERS.join(", ")),
                                            ));
                                        }
                                    }
                                }
                                self.msg_peers = peers;
                            }
                            ("E6", "repetitions") => self.e6_reps = uint(&full, v, 1, 100)? as u32,
                            ("E6", "sizes") => {
                                self.e6_sizes =
                                    list(&full, v, 1, 1_000_000)?.into_iter().map(|x| x as usize).collect()
                            }
                            ("E6", "rates") => {
                                self.e6_rates = list(&full, v, 1200, 9600)?;
                                if let Some(r) = self.e6_rates.iter().find(|r| !matches!(r, 1200 | 9600)) {
                                    return Err(err(
                                        &full,
                                        v,
                                        &format!("{r}: the packet-radio profiles are 1200 and 9600 bit/s"),
                                    ));
                                }
                            }
                            ("E6", "transfers") => self.e6_transfers = uint(&full, v, 1, 1000)? as u32,
                            ("E4", "max_bindings") => {
                                self.e4_max_bindings = uint(&full, v, 100, 10_000_000)? as usize
                            }
                            ("E4", "lookups") => self.e4_lookups = uint(&full, v, 1, 100_000_000)? as usize,
                            ("E4", "reps") => self.e4_reps = uint(&full, v, 1, 100)? as usize,
                            _ => return Err(err(&full, v, "unknown key")),
                        }
                    }
                }
                _ => {
                    return Err(err(
                        k,
                        v,
                        "unknown key (known: experiments, repetitions, [[plot]], and tables [E1], [E2], [MSG], [E6], [E4])",
                    ));
                }
            }
        }
        Ok(())
    }

    /// The plan as recorded in results.json.
    pub(crate) fn to_json(&self) -> Value {
        json!({
            "experiments": self.experiments,
            "E1": {"sizes": self.e1_sizes, "simulated_count": self.e1_sim_count, "udp_count": self.e1_udp_count},
            "E2": {"rtt_ms": self.e2_rtts, "bytes": self.e2_bytes, "tcp": self.e2_tcp, "repetitions": self.e2_reps},
            "MSG": {"sizes": self.msg_sizes, "bytes": self.msg_bytes, "repetitions": self.msg_reps, "peers": self.msg_peers},
            "plots": self.plots.iter().map(PlotSpec::to_json).collect::<Vec<_>>(),
            "E6": {"sizes": self.e6_sizes, "rates": self.e6_rates, "transfers": self.e6_transfers, "repetitions": self.e6_reps},
            "E4": {"max_bindings": self.e4_max_bindings, "lookups": self.e4_lookups, "reps": self.e4_reps},
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plan_file_overrides_what_it_names() {
        let mut p = Plan::builtin(true);
        p.apply("t.toml", "experiments = [\"E2\", \"E4\"]\n[E2]\nrtt_ms = [0, 50]\ntcp = false\n").unwrap();
        assert_eq!(p.experiments, ["E2", "E4"]);
        assert_eq!(p.e2_rtts, [0, 50]);
        assert!(!p.e2_tcp);
        assert_eq!(p.e2_bytes, Plan::builtin(true).e2_bytes, "untouched keys keep the built-in value");
    }

    #[test]
    fn plots_from_the_plan_replace_the_built_in_list() {
        let mut p = Plan::builtin(true);
        assert_eq!(p.plots.len(), 1);
        let text = "[[plot]]\nexperiment = \"E2\"\nrows = \"tcp_rows\"\nx = \"rtt_ms\"\ny = \"mbit_per_s\"\nseries = \"window_64k\"\nscale = \"log-y\"\n";
        p.apply("t.toml", text).unwrap();
        assert_eq!(p.plots.len(), 1);
        let q = &p.plots[0];
        assert_eq!(
            (q.experiment.as_str(), q.rows.as_str(), q.log_x, q.log_y),
            ("E2", "tcp_rows", false, true)
        );
        assert_eq!(q.series.as_deref(), Some("window_64k"));
        assert_eq!(q.title, "E2: mbit_per_s vs rtt_ms");
    }

    #[test]
    fn bad_plans_name_the_key_the_value_and_the_reason() {
        let cases = [
            ("experiments = [\"E77\"]", "experiments = \"E77\": unknown experiment"),
            ("[E2]\nrtt_ms = [0, -5]", "E2.rtt_ms = -5: must be an integer from 0 to 10000"),
            ("[E2]\nrttms = [0]", "E2.rttms = [0]: unknown key"),
            ("[MSG]\nsizes = []", "MSG.sizes = []: must not be empty"),
            ("[E2]\ntcp = 1", "E2.tcp = 1: must be true or false"),
            ("repetitions = 0", "repetitions = 0: must be an integer from 1 to 100"),
            ("[[plot]]\nexperiment = \"E2\"\nx = \"rtt_ms\"", "plot[0].y: missing"),
            (
                "[[plot]]\nexperiment = \"E5\"\nx = \"a\"\ny = \"b\"",
                "plot[0].experiment = \"E5\": unknown experiment",
            ),
            (
                "[[plot]]\nexperiment = \"E2\"\nx = \"a\"\ny = \"b\"\nscale = \"cubic\"",
                "plot[0].scale = \"cubic\": must be linear",
            ),
            (
                "[[plot]]\nexperiment = \"E2\"\nx = \"a\"\ny = \"b\"\ncolour = \"red\"",
                "plot[0].colour: unknown key",
            ),
            ("plot = 3", "plot = 3: unknown key"),
            (
                "[MSG]\npeers = [\"sctp\"]",
                "MSG.peers = \"sctp\": unknown peer (known: xtp, tcp, quic, iperf3)",
            ),
            ("[E6]\nrates = [100]", "E6.rates = 100: must be an integer from 1200 to 9600"),
            ("[E6]\nrates = [2400]", "the packet-radio profiles are 1200 and 9600"),
            ("seed = 3", "seed = 3: unknown key"),
            ("[E1\n", "not valid TOML"),
        ];
        for (text, want) in cases {
            let e = Plan::builtin(true).apply("p.toml", text).unwrap_err();
            assert!(e.contains(want) && e.starts_with("plan p.toml: "), "{text:?} -> {e}");
        }
    }
}
