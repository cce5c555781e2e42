//! The load model: user-behaviour automata (BVA, seed 001) in TOML, and the
//! validator that turns a file into a [`Model`] ready to walk.
//!
//! ```toml
//! name = "seed 001 example"
//! [[users]]                      # virtual users: each walks its own copy
//! automaton = "main"             # of an automaton with its own random
//! count = 1                      # stream
//! [requests.small]
//! size = { dist = "const", value = 64 }          # bytes
//! [automata.main.states.I]
//! kind = "init"
//! next = [{ to = "D", p = 1 }]
//! [automata.main.states.D]
//! kind = "delay"
//! delay = { dist = "const", value = 10 }         # in `unit`, default µs
//! next = [{ to = "R", p = 1 }]
//! [automata.main.states.R]
//! kind = "request"
//! request = "small"
//! next = [{ to = "D", p = 0.9999 }, { to = "T", p = 0.0001 }]
//! [automata.main.states.T]
//! kind = "terminate"
//! ```
//!
//! A state of kind `macro` runs another automaton (`automaton = "session"`)
//! from its init state to its terminate state, then leaves by its own
//! transitions: sessions inside a user, pages inside a session.
//!
//! Context variables (`[vars] n = 0`, integers, one set per user) change on
//! entering a state (`set = { n = 0 }`, `add = { n = 1 }`), guard
//! transitions (`when = "n >= 10"`) and can be a size (`dist = "var"`).
//! Guarded transitions are tried first, in order, each taken with its
//! probability when its condition holds; otherwise one of the unguarded
//! transitions is drawn — their probabilities must sum to 1.
//!
//! Every error names where it is (`automata.main.states.R.next`) and why.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::dist::{Dist, Sampler};

/// Largest request: one UDP datagram's payload over IPv4.
pub const MAX_SIZE: u32 = 65_507;

/// How far probabilities may be off 1 (decimal fractions in a file).
const SUM_TOLERANCE: f64 = 1e-9;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    vars: BTreeMap<String, i64>,
    users: Vec<UserFile>,
    #[serde(default)]
    requests: BTreeMap<String, RequestFile>,
    automata: BTreeMap<String, AutomatonFile>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct UserFile {
    automaton: String,
    #[serde(default = "one")]
    count: u32,
    /// On reaching terminate: begin again (true) or stop (false).
    #[serde(default)]
    restart: bool,
}

fn one() -> u32 {
    1
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RequestFile {
    size: Dist,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AutomatonFile {
    states: BTreeMap<String, StateFile>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct StateFile {
    kind: String,
    #[serde(default)]
    next: Vec<EdgeFile>,
    #[serde(default)]
    delay: Option<Dist>,
    #[serde(default)]
    unit: Option<String>,
    #[serde(default)]
    request: Option<String>,
    #[serde(default)]
    automaton: Option<String>,
    #[serde(default)]
    set: BTreeMap<String, i64>,
    #[serde(default)]
    add: BTreeMap<String, i64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct EdgeFile {
    to: String,
    p: f64,
    #[serde(default)]
    when: Option<String>,
}

/// A comparison of a variable with a constant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cmp {
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
    /// `==`
    Eq,
    /// `!=`
    Ne,
}

/// A transition's condition: `var OP value`.
#[derive(Clone, Copy, Debug)]
pub struct Guard {
    /// Variable index.
    pub var: usize,
    /// Comparison.
    pub cmp: Cmp,
    /// Constant.
    pub value: i64,
}

impl Guard {
    /// Whether it holds for these variables.
    #[inline]
    pub fn holds(&self, vars: &[i64]) -> bool {
        let v = vars[self.var];
        match self.cmp {
            Cmp::Lt => v < self.value,
            Cmp::Le => v <= self.value,
            Cmp::Gt => v > self.value,
            Cmp::Ge => v >= self.value,
            Cmp::Eq => v == self.value,
            Cmp::Ne => v != self.value,
        }
    }
}

/// A transition.
#[derive(Clone, Debug)]
pub struct Edge {
    /// Target state index.
    pub to: usize,
    /// Probability.
    pub p: f64,
    /// Cumulative probability among the unguarded edges (for drawing).
    pub(crate) cum: f64,
    /// Condition, if any.
    pub guard: Option<Guard>,
}

/// What a state does.
#[derive(Clone, Debug)]
pub enum Kind {
    /// Where an automaton starts.
    Init,
    /// Waits a drawn time (`scale_ns` nanoseconds per unit of the sample).
    Delay {
        /// The distribution.
        dist: Dist,
        /// Compiled.
        #[doc(hidden)]
        sampler: SamplerSlot,
        /// Nanoseconds per unit.
        scale_ns: f64,
    },
    /// Emits a request of template `template`.
    Request {
        /// Index into [`Model::requests`].
        template: usize,
    },
    /// Ends the automaton (or the macro state that runs it).
    Terminate,
    /// Runs automaton `automaton` to its end.
    Macro {
        /// Index into [`Model::automata`].
        automaton: usize,
    },
}

/// A compiled distribution and its trace slot (a walker's position in a
/// trace is per distribution).
#[derive(Clone, Debug)]
pub struct SamplerSlot {
    pub(crate) sampler: Sampler,
    pub(crate) slot: usize,
}

/// A state.
#[derive(Clone, Debug)]
pub struct State {
    /// Its name.
    pub name: String,
    /// What it does.
    pub kind: Kind,
    /// Transitions: guarded ones first (file order), then unguarded.
    pub next: Vec<Edge>,
    /// Variables set on entry (index, value).
    pub set: Vec<(usize, i64)>,
    /// Variables incremented on entry (index, amount).
    pub add: Vec<(usize, i64)>,
}

/// An automaton.
#[derive(Clone, Debug)]
pub struct Automaton {
    /// Its name.
    pub name: String,
    /// Its states (sorted by name).
    pub states: Vec<State>,
    /// Index of the init state.
    pub init: usize,
}

/// A request template.
#[derive(Clone, Debug)]
pub struct Template {
    /// Its name.
    pub name: String,
    /// Size distribution (bytes).
    pub size: Dist,
    pub(crate) sampler: SamplerSlot,
}

/// A group of virtual users.
#[derive(Clone, Debug)]
pub struct Users {
    /// Automaton index.
    pub automaton: usize,
    /// How many.
    pub count: u32,
    /// Begin again after terminate.
    pub restart: bool,
}

/// A validated model.
#[derive(Clone, Debug)]
pub struct Model {
    /// Its name (the file's `name`, or the file name).
    pub name: String,
    /// Its description.
    pub description: String,
    /// Variable names and initial values.
    pub vars: Vec<(String, i64)>,
    /// User groups.
    pub users: Vec<Users>,
    /// Request templates.
    pub requests: Vec<Template>,
    /// Automata.
    pub automata: Vec<Automaton>,
    /// Number of trace slots (distributions).
    pub(crate) slots: usize,
    /// Whether any transition is guarded (the analytic rate then ignores
    /// guards, and says so).
    pub guarded: bool,
}

fn unit_ns(unit: &str) -> Option<f64> {
    Some(match unit {
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        _ => return None,
    })
}

fn parse_guard(text: &str, var: &dyn Fn(&str) -> Option<usize>) -> Result<Guard, String> {
    let ops =
        [("<=", Cmp::Le), (">=", Cmp::Ge), ("==", Cmp::Eq), ("!=", Cmp::Ne), ("<", Cmp::Lt), (">", Cmp::Gt)];
    for (op, cmp) in ops {
        if let Some((l, r)) = text.split_once(op) {
            let name = l.trim();
            let v =
                var(name).ok_or_else(|| format!("{text:?}: no variable {name:?} is declared in [vars]"))?;
            let value: i64 =
                r.trim().parse().map_err(|_| format!("{text:?}: {:?} is not an integer", r.trim()))?;
            return Ok(Guard { var: v, cmp, value });
        }
    }
    Err(format!("{text:?} is not of the form `variable OP integer` (OP one of < <= > >= == !=)"))
}

impl Model {
    /// Reads and validates a model file.
    pub fn load(path: &Path) -> Result<Model, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let base = path.parent().map(Path::to_path_buf).unwrap_or_else(|| PathBuf::from("."));
        let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("model");
        Model::parse(&text, &base, stem).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// Validates a model's text. `base` is where `file = ...` paths are
    /// relative to; `default_name` names a model without `name`.
    pub fn parse(text: &str, base: &Path, default_name: &str) -> Result<Model, String> {
        let f: File = toml::from_str(text).map_err(|e| e.to_string().trim_end().to_string())?;
        let vars: Vec<(String, i64)> = f.vars.into_iter().collect();
        let var_index = |name: &str| vars.iter().position(|(n, _)| n == name);
        let mut slots = 0usize;
        let mut compile = |d: &Dist, at: &str| -> Result<SamplerSlot, String> {
            let sampler = d.compile(base, &var_index).map_err(|e| format!("{at}: {e}"))?;
            slots += 1;
            Ok(SamplerSlot { sampler, slot: slots - 1 })
        };

        let mut requests = Vec::new();
        for (name, r) in &f.requests {
            let sampler = compile(&r.size, &format!("requests.{name}.size"))?;
            requests.push(Template { name: name.clone(), size: r.size.clone(), sampler });
        }
        if f.automata.is_empty() {
            return Err("automata: no automaton is defined".into());
        }
        let auto_names: Vec<&String> = f.automata.keys().collect();
        let mut automata = Vec::new();
        let mut guarded = false;
        for (aname, a) in &f.automata {
            let names: Vec<&String> = a.states.keys().collect();
            let at = |s: &str| format!("automata.{aname}.states.{s}");
            let mut states = Vec::new();
            let mut inits = Vec::new();
            for (sname, s) in &a.states {
                let here = at(sname);
                let allowed: &[&str] = match s.kind.as_str() {
                    "init" | "terminate" => &[],
                    "delay" => &["delay", "unit"],
                    "request" => &["request"],
                    "macro" => &["automaton"],
                    other => {
                        return Err(format!(
                            "{here}.kind: {other:?} is not a kind (init, delay, request, terminate, macro)"
                        ));
                    }
                };
                for (field, present) in [
                    ("delay", s.delay.is_some()),
                    ("unit", s.unit.is_some()),
                    ("request", s.request.is_some()),
                    ("automaton", s.automaton.is_some()),
                ] {
                    if present && !allowed.contains(&field) {
                        return Err(format!("{here}.{field}: a state of kind {} has no {field}", s.kind));
                    }
                }
                let kind = match s.kind.as_str() {
                    "init" => {
                        inits.push(states.len());
                        Kind::Init
                    }
                    "terminate" => {
                        if !s.next.is_empty() {
                            return Err(format!("{here}.next: a terminate state has no transitions"));
                        }
                        Kind::Terminate
                    }
                    "delay" => {
                        let dist = s
                            .delay
                            .clone()
                            .ok_or_else(|| format!("{here}.delay: a delay state needs one"))?;
                        let unit = s.unit.as_deref().unwrap_or("us");
                        let scale_ns = unit_ns(unit)
                            .ok_or_else(|| format!("{here}.unit: {unit:?} is not one of ns, us, ms, s"))?;
                        let sampler = compile(&dist, &format!("{here}.delay"))?;
                        Kind::Delay { dist, sampler, scale_ns }
                    }
                    "request" => {
                        let r = s.request.as_deref().ok_or_else(|| {
                            format!("{here}.request: a request state names a template from [requests]")
                        })?;
                        let template = f
                            .requests
                            .keys()
                            .position(|k| k == r)
                            .ok_or_else(|| format!("{here}.request: no template {r:?} in [requests]"))?;
                        Kind::Request { template }
                    }
                    _ => {
                        let m = s.automaton.as_deref().ok_or_else(|| {
                            format!("{here}.automaton: a macro state names the automaton it runs")
                        })?;
                        let automaton = auto_names
                            .iter()
                            .position(|k| *k == m)
                            .ok_or_else(|| format!("{here}.automaton: no automaton {m:?}"))?;
                        Kind::Macro { automaton }
                    }
                };
                if !matches!(kind, Kind::Terminate) && s.next.is_empty() {
                    return Err(format!("{here}.next: a {} state needs transitions", s.kind));
                }
                let mut next = Vec::new();
                let mut unguarded = Vec::new();
                let mut sum = 0.0;
                for (i, e) in s.next.iter().enumerate() {
                    let to = names.iter().position(|n| *n == &e.to).ok_or_else(|| {
                        format!("{here}.next[{i}].to: no state {:?} in automaton {aname}", e.to)
                    })?;
                    if !(e.p.is_finite() && (0.0..=1.0).contains(&e.p)) {
                        return Err(format!("{here}.next[{i}].p: {} is not a probability (0 to 1)", e.p));
                    }
                    let guard = match &e.when {
                        Some(w) => {
                            guarded = true;
                            Some(
                                parse_guard(w, &var_index)
                                    .map_err(|m| format!("{here}.next[{i}].when: {m}"))?,
                            )
                        }
                        None => None,
                    };
                    let edge = Edge { to, p: e.p, cum: 0.0, guard };
                    if edge.guard.is_some() {
                        next.push(edge);
                    } else {
                        sum += e.p;
                        unguarded.push(edge);
                    }
                }
                if !matches!(kind, Kind::Terminate) && (sum - 1.0).abs() > SUM_TOLERANCE {
                    return Err(format!(
                        "{here}.next: the probabilities of the unguarded transitions sum to {sum}, not 1"
                    ));
                }
                let mut acc = 0.0;
                for e in &mut unguarded {
                    acc += e.p / sum.max(f64::MIN_POSITIVE);
                    e.cum = acc;
                }
                if let Some(last) = unguarded.last_mut() {
                    last.cum = 1.0; // rounding never leaves a gap at the top
                }
                next.extend(unguarded);
                let resolve = |m: &BTreeMap<String, i64>, field: &str| -> Result<Vec<(usize, i64)>, String> {
                    m.iter()
                        .map(|(k, v)| {
                            var_index(k)
                                .map(|i| (i, *v))
                                .ok_or_else(|| format!("{here}.{field}.{k}: no variable {k:?} in [vars]"))
                        })
                        .collect()
                };
                states.push(State {
                    name: sname.clone(),
                    kind,
                    next,
                    set: resolve(&s.set, "set")?,
                    add: resolve(&s.add, "add")?,
                });
            }
            let init = match inits.as_slice() {
                [i] => *i,
                [] => return Err(format!("automata.{aname}: no state of kind init")),
                _ => return Err(format!("automata.{aname}: more than one state of kind init")),
            };
            for s in &states {
                if s.next.iter().any(|e| e.to == init) {
                    return Err(format!(
                        "{}.next: no transition may lead back to the init state",
                        at(&s.name)
                    ));
                }
            }
            automata.push(Automaton { name: aname.clone(), states, init });
        }

        if f.users.is_empty() {
            return Err("users: no [[users]] entry: who walks the automata?".into());
        }
        let mut users = Vec::new();
        for (i, u) in f.users.iter().enumerate() {
            let automaton = auto_names
                .iter()
                .position(|k| **k == u.automaton)
                .ok_or_else(|| format!("users[{i}].automaton: no automaton {:?}", u.automaton))?;
            if u.count == 0 || u.count > 1_000_000 {
                return Err(format!("users[{i}].count: {} is not 1 to 1,000,000", u.count));
            }
            users.push(Users { automaton, count: u.count, restart: u.restart });
        }
        let model = Model {
            name: f.name.unwrap_or_else(|| default_name.to_string()),
            description: f.description.unwrap_or_default(),
            vars,
            users,
            requests,
            automata,
            slots,
            guarded,
        };
        model.check_macros()?;
        Ok(model)
    }

    /// Macro states must not run their own automaton (directly or through
    /// others: the walk would never end), and a macro's automaton must be
    /// able to terminate.
    fn check_macros(&self) -> Result<(), String> {
        fn visit(m: &Model, a: usize, path: &mut Vec<usize>) -> Result<(), String> {
            if path.contains(&a) {
                let names: Vec<&str> =
                    path.iter().chain([&a]).map(|i| m.automata[*i].name.as_str()).collect();
                return Err(format!(
                    "automata: macro states run each other in a circle: {}",
                    names.join(" → ")
                ));
            }
            path.push(a);
            for s in &m.automata[a].states {
                if let Kind::Macro { automaton } = s.kind {
                    if !m.automata[automaton].states.iter().any(|s| matches!(s.kind, Kind::Terminate)) {
                        return Err(format!(
                            "automata.{}.states.{}.automaton: automaton {} has no terminate state, so the macro state would never end",
                            m.automata[a].name, s.name, m.automata[automaton].name
                        ));
                    }
                    visit(m, automaton, path)?;
                }
            }
            path.pop();
            Ok(())
        }
        for u in &self.users {
            visit(self, u.automaton, &mut Vec::new())?;
        }
        Ok(())
    }

    /// A constant-bit-rate model: one user sending `size`-byte requests
    /// every `gap_ns` nanoseconds (0: as fast as possible), without end.
    /// Built as text so it goes through the same validator as a file.
    pub fn constant(gap_ns: u64, size: u32) -> Model {
        let text = format!(
            "name = \"constant {gap_ns} ns, {size} B\"\n\
             [[users]]\nautomaton = \"cbr\"\n\
             [requests.r]\nsize = {{ dist = \"const\", value = {size} }}\n\
             [automata.cbr.states.I]\nkind = \"init\"\nnext = [{{ to = \"R\", p = 1 }}]\n\
             [automata.cbr.states.R]\nkind = \"request\"\nrequest = \"r\"\nnext = [{{ to = \"D\", p = 1 }}]\n\
             [automata.cbr.states.D]\nkind = \"delay\"\nunit = \"ns\"\n\
             delay = {{ dist = \"const\", value = {gap_ns} }}\nnext = [{{ to = \"R\", p = 1 }}]\n"
        );
        Model::parse(&text, Path::new("."), "constant").expect("the constant-rate model is valid")
    }

    /// Total number of virtual users.
    pub fn user_count(&self) -> u64 {
        self.users.iter().map(|u| u64::from(u.count)).sum()
    }

    /// The automaton as text: one line per state and transition (for
    /// `xpress loadgen check`).
    pub fn describe(&self) -> String {
        let mut out = String::new();
        for a in &self.automata {
            out += &format!("automaton {}\n", a.name);
            for s in &a.states {
                let what = match &s.kind {
                    Kind::Init => "init".to_string(),
                    Kind::Terminate => "terminate".to_string(),
                    Kind::Delay { dist, scale_ns, .. } => {
                        format!("delay {} (unit {} ns)", dist_text(dist), scale_ns)
                    }
                    Kind::Request { template } => format!(
                        "request {} (size {})",
                        self.requests[*template].name,
                        dist_text(&self.requests[*template].size)
                    ),
                    Kind::Macro { automaton } => format!("macro: runs {}", self.automata[*automaton].name),
                };
                out += &format!("  {:<12} {what}\n", s.name);
                for e in &s.next {
                    let when =
                        e.guard.map(|g| format!(" when {} {:?} {}", self.vars[g.var].0, g.cmp, g.value));
                    out += &format!(
                        "      → {:<10} p = {}{}\n",
                        a.states[e.to].name,
                        e.p,
                        when.unwrap_or_default()
                    );
                }
            }
        }
        out
    }
}

fn dist_text(d: &Dist) -> String {
    serde_json::to_string(d).unwrap_or_else(|_| format!("{d:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXAMPLE: &str = r#"
[[users]]
automaton = "main"
[requests.small]
size = { dist = "const", value = 64 }
[automata.main.states.I]
kind = "init"
next = [{ to = "D", p = 1 }]
[automata.main.states.D]
kind = "delay"
delay = { dist = "const", value = 10 }
next = [{ to = "R", p = 1 }]
[automata.main.states.R]
kind = "request"
request = "small"
next = [{ to = "D", p = 0.9999 }, { to = "T", p = 0.0001 }]
[automata.main.states.T]
kind = "terminate"
"#;

    fn parse(t: &str) -> Result<Model, String> {
        Model::parse(t, Path::new("."), "t")
    }

    #[test]
    fn the_seed_example_parses() {
        let m = parse(EXAMPLE).unwrap();
        assert_eq!(m.automata.len(), 1);
        assert_eq!(m.automata[0].states.len(), 4);
        assert!(m.describe().contains("p = 0.9999"));
    }

    #[test]
    fn errors_name_state_and_field() {
        let bad = EXAMPLE.replace("p = 0.9999", "p = 0.9");
        let e = parse(&bad).unwrap_err();
        assert!(e.contains("automata.main.states.R.next") && e.contains("sum to"), "{e}");

        let bad = EXAMPLE.replace("to = \"R\"", "to = \"X\"");
        let e = parse(&bad).unwrap_err();
        assert!(e.contains("automata.main.states.D.next[0].to") && e.contains("\"X\""), "{e}");

        let bad = EXAMPLE.replace("request = \"small\"", "request = \"big\"");
        let e = parse(&bad).unwrap_err();
        assert!(e.contains("states.R.request") && e.contains("big"), "{e}");

        let bad = EXAMPLE.replace("value = 10 }", "value = -3 }");
        let e = parse(&bad).unwrap_err();
        assert!(e.contains("states.D.delay") && e.contains("value = -3"), "{e}");

        let bad = EXAMPLE.replace("kind = \"delay\"", "kind = \"wait\"");
        let e = parse(&bad).unwrap_err();
        assert!(e.contains("states.D.kind") && e.contains("wait"), "{e}");

        let bad = EXAMPLE.replace("[[users]]", "[[userz]]");
        assert!(parse(&bad).is_err());

        let bad = format!(
            "{EXAMPLE}\n[automata.main.states.R2]\nkind = \"request\"\nrequest = \"small\"\nnext = [{{ to = \"I\", p = 1 }}]\n"
        );
        let e = parse(&bad).unwrap_err();
        assert!(e.contains("init"), "{e}");
    }

    #[test]
    fn macros_may_not_recurse() {
        let t = r#"
[[users]]
automaton = "a"
[automata.a.states.I]
kind = "init"
next = [{ to = "M", p = 1 }]
[automata.a.states.M]
kind = "macro"
automaton = "a"
next = [{ to = "T", p = 1 }]
[automata.a.states.T]
kind = "terminate"
"#;
        let e = parse(t).unwrap_err();
        assert!(e.contains("circle"), "{e}");
    }

    #[test]
    fn guards_parse_and_name_unknown_variables() {
        let t = EXAMPLE.replace(
            "{ to = \"T\", p = 0.0001 }",
            "{ to = \"T\", p = 0.0001 }, { to = \"T\", p = 1, when = \"n >= 5\" }",
        );
        let e = parse(&t).unwrap_err();
        assert!(e.contains("next[2].when") && e.contains("\"n\""), "{e}");
        let t = format!("[vars]\nn = 0\n{t}");
        let m = parse(&t).unwrap();
        assert!(m.guarded);
    }
}
