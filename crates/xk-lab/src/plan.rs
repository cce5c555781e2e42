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
//! [E6]
//! sizes = [1, 100, 1000, 10000]    # file bytes, over the simulated packet radio
//! rates = [1200, 9600]             # bit/s (packet-radio-1200 / -9600 profiles)
//! transfers = 5                    # retrievals per context (median latency)
//! repetitions = 3                  # seeds per point
//! [E4]
//! max_bindings = 1000000
//! lookups = 1000000
//! reps = 5
//! ```
//!
//! Every key is optional; an unknown key or a bad value is an error naming
//! the key, the value and the reason.

use serde_json::{Value, json};

/// All experiments a plan may name.
pub(crate) const EXPERIMENTS: [&str; 6] = ["E1", "E2", "MSG", "E6", "E4", "E9"];

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
    pub(crate) e6_sizes: Vec<usize>,
    pub(crate) e6_rates: Vec<u64>,
    pub(crate) e6_transfers: u32,
    pub(crate) e6_reps: u32,
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
            e6_sizes: vec![1, 100, 1000, 10_000],
            e6_rates: vec![1200, 9600],
            e6_transfers: if quick { 2 } else { 5 },
            e6_reps: if quick { 1 } else { 3 },
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
                        "unknown key (known: experiments, repetitions, and tables [E1], [E2], [MSG], [E6], [E4])",
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
            "MSG": {"sizes": self.msg_sizes, "bytes": self.msg_bytes, "repetitions": self.msg_reps},
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
    fn bad_plans_name_the_key_the_value_and_the_reason() {
        let cases = [
            ("experiments = [\"E77\"]", "experiments = \"E77\": unknown experiment"),
            ("[E2]\nrtt_ms = [0, -5]", "E2.rtt_ms = -5: must be an integer from 0 to 10000"),
            ("[E2]\nrttms = [0]", "E2.rttms = [0]: unknown key"),
            ("[MSG]\nsizes = []", "MSG.sizes = []: must not be empty"),
            ("[E2]\ntcp = 1", "E2.tcp = 1: must be true or false"),
            ("repetitions = 0", "repetitions = 0: must be an integer from 1 to 100"),
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
