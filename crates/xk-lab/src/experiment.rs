//! An experiment as one unit, and the registry of them.
//!
//! An [`Experiment`] owns everything about itself: its id and title, its
//! typed parameters (with built-in full and quick values; a plan file's
//! `[ID]` table overrides any of them, checked by serde against the type),
//! the steps it will take (the unit of progress, Ctrl-C and sharding), the
//! run of one step (typed, serialisable rows), the CSV's leading columns,
//! its HTML section with figures and reading, and its console summary. The
//! runner ([`crate::runner`]) knows nothing else about it.
//!
//! Adding an experiment = one module implementing [`Experiment`] and one line
//! in [`registry`].

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::html::Page;

/// What every experiment may look at while it runs.
pub struct Env {
    /// Master seed of the simulated parts.
    pub seed: u64,
    /// Whether this process may create network namespaces (root).
    pub root: bool,
    /// Set on Ctrl-C: a long step may stop early and return what it has.
    pub stop: Arc<AtomicBool>,
}

impl Env {
    /// Whether Ctrl-C was pressed.
    pub fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }
}

/// One step of an experiment: a label for the progress line and the point
/// it measures (the experiment's own type, serialised so a step can be
/// recorded, sharded and re-run).
#[derive(Clone, Debug)]
pub struct Step<P> {
    /// What the progress line says.
    pub label: String,
    /// The point.
    pub point: P,
}

/// An experiment of the report.
pub trait Experiment: Sized + 'static {
    /// Short id: plan tables, results keys, CSV file names, anchors.
    const ID: &'static str;
    /// Title of its section.
    const TITLE: &'static str;
    /// Parameters: every field has a built-in value; a plan overrides any.
    type Params: Serialize + DeserializeOwned + Clone;
    /// What one step measures.
    type Point: Serialize + DeserializeOwned + Clone;
    /// One measured row (one repetition of one point, or one cell).
    type Row: Serialize + DeserializeOwned + Clone;

    /// Built-in parameters: the full plan, or the quick one (CI).
    fn defaults(quick: bool) -> Self::Params;
    /// Checks parameters a plan set; the error names the field and the reason.
    fn check(_p: &Self::Params) -> Result<(), String> {
        Ok(())
    }
    /// A new instance for one run (holds state across steps, e.g. a server).
    fn new(p: Self::Params) -> Self;
    /// The parameters.
    fn params(&self) -> &Self::Params;
    /// Every step, in order (the same on every machine for the same plan).
    fn steps(&self, env: &Env) -> Vec<Step<Self::Point>>;
    /// Notes on what the steps leave out and why (e.g. rows needing root).
    fn notes(&self, _env: &Env) -> Vec<String> {
        Vec::new()
    }
    /// Measures one step.
    fn run(&mut self, point: &Self::Point, env: &Env) -> Result<Vec<Self::Row>, String>;
    /// The columns the CSV starts with (the row's key).
    fn csv_key() -> &'static [&'static str];
    /// The HTML section (tables, figures, reading) from the rows.
    fn render(p: &Self::Params, rows: &[Self::Row], notes: &[String], page: &mut Page);
    /// Console summary lines.
    fn summary(p: &Self::Params, rows: &[Self::Row]) -> Vec<String>;
    /// For `--compare`: each row's key and headline value (with its unit).
    fn headline(row: &Self::Row) -> Option<Headline>;
}

/// One experiment's results as stored in results.json.
#[derive(Clone, Debug, Default, Serialize, serde::Deserialize)]
pub struct Section {
    /// Its title.
    pub title: String,
    /// The parameters it ran with.
    pub params: Value,
    /// Notes (rows skipped and why).
    pub notes: Vec<String>,
    /// Every step it ran: the step's index among all of its steps, its
    /// label, its point and its rows.
    pub runs: Vec<Run>,
    /// How many steps the plan has for it (a shard or a stop runs fewer).
    pub steps_total: usize,
}

/// One step's outcome.
#[derive(Clone, Debug, Serialize, serde::Deserialize)]
pub struct Run {
    /// Index among the experiment's steps.
    pub step: usize,
    /// The progress label.
    pub label: String,
    /// The point.
    pub point: Value,
    /// The rows it measured.
    pub rows: Vec<Value>,
    /// Why the step failed, if it did (its rows are then empty).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// How long the step took, set-up included (wall-clock seconds): what
    /// a plan's points cost, for choosing them.
    #[serde(default)]
    pub seconds: f64,
}

/// Reads an `f64` that may have been written as `null`: JSON has no NaN,
/// and serde_json writes a NaN ("not measured") as `null`.
pub(crate) fn f64_or_nan<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(<Option<f64> as serde::Deserialize>::deserialize(d)?.unwrap_or(f64::NAN))
}

/// NaN, the default of a measured value a row written before it existed
/// lacks ("not measured"; `--replot` of an older results.json).
pub(crate) fn nan() -> f64 {
    f64::NAN
}

/// A row's key, headline value and unit (for `--compare`).
pub type Headline = (String, f64, &'static str);

/// The object-safe face of an experiment, for the runner.
pub trait Dyn {
    /// [`Experiment::ID`].
    fn id(&self) -> &'static str;
    /// [`Experiment::TITLE`].
    fn title(&self) -> &'static str;
    /// The parameters as JSON.
    fn params_json(&self) -> Value;
    /// Step labels.
    fn step_labels(&self, env: &Env) -> Vec<String>;
    /// Notes.
    fn notes(&self, env: &Env) -> Vec<String>;
    /// Runs step `i` (of [`Dyn::step_labels`]).
    fn run_step(&mut self, i: usize, env: &Env) -> Result<Run, String>;
    /// The CSV's leading columns.
    fn csv_key(&self) -> &'static [&'static str];
}

/// What the registry knows of an experiment type without an instance.
pub struct Entry {
    /// Its id.
    pub id: &'static str,
    /// Its title.
    pub title: &'static str,
    /// Built-in parameters as JSON.
    pub defaults: fn(bool) -> Value,
    /// Builds an instance from parameters as JSON (checked).
    pub build: fn(Value) -> Result<Box<dyn Dyn>, String>,
    /// Renders a stored section.
    pub render: fn(&Section, &mut Page) -> Result<(), String>,
    /// Console summary of a stored section.
    pub summary: fn(&Section) -> Result<Vec<String>, String>,
    /// Headline values of a stored section (for `--compare`).
    pub headlines: fn(&Section) -> Result<Vec<Headline>, String>,
    /// The CSV's leading columns.
    pub csv_key: &'static [&'static str],
}

struct Erased<E: Experiment>(E);

impl<E: Experiment> Dyn for Erased<E> {
    fn id(&self) -> &'static str {
        E::ID
    }
    fn title(&self) -> &'static str {
        E::TITLE
    }
    fn params_json(&self) -> Value {
        serde_json::to_value(self.0.params()).unwrap_or(Value::Null)
    }
    fn step_labels(&self, env: &Env) -> Vec<String> {
        self.0.steps(env).into_iter().map(|s| s.label).collect()
    }
    fn notes(&self, env: &Env) -> Vec<String> {
        self.0.notes(env)
    }
    fn run_step(&mut self, i: usize, env: &Env) -> Result<Run, String> {
        let step = self.0.steps(env).into_iter().nth(i).ok_or_else(|| format!("{}: no step {i}", E::ID))?;
        let rows = self.0.run(&step.point, env)?;
        Ok(Run {
            step: i,
            label: step.label,
            point: serde_json::to_value(&step.point).map_err(|e| e.to_string())?,
            rows: rows
                .iter()
                .map(serde_json::to_value)
                .collect::<Result<_, _>>()
                .map_err(|e| e.to_string())?,
            error: None,
            seconds: 0.0,
        })
    }
    fn csv_key(&self) -> &'static [&'static str] {
        E::csv_key()
    }
}

/// A stored section's parameters and rows, typed.
fn typed<E: Experiment>(s: &Section) -> Result<(E::Params, Vec<E::Row>), String> {
    let p = serde_json::from_value(s.params.clone()).map_err(|e| format!("{}: parameters: {e}", E::ID))?;
    let mut rows = Vec::new();
    for run in &s.runs {
        for r in &run.rows {
            rows.push(serde_json::from_value(r.clone()).map_err(|e| format!("{}: row: {e}", E::ID))?);
        }
    }
    Ok((p, rows))
}

/// The registry entry of `E`.
pub fn entry<E: Experiment>() -> Entry {
    Entry {
        id: E::ID,
        title: E::TITLE,
        defaults: |quick| serde_json::to_value(E::defaults(quick)).unwrap_or(Value::Null),
        build: |v| {
            let p: E::Params = serde_json::from_value(v).map_err(|e| format!("[{}] {e}", E::ID))?;
            E::check(&p).map_err(|e| format!("[{}] {e}", E::ID))?;
            Ok(Box::new(Erased(E::new(p))))
        },
        render: |s, page| {
            let (p, rows) = typed::<E>(s)?;
            E::render(&p, &rows, &s.notes, page);
            Ok(())
        },
        summary: |s| {
            let (p, rows) = typed::<E>(s)?;
            Ok(E::summary(&p, &rows))
        },
        headlines: |s| Ok(typed::<E>(s)?.1.iter().filter_map(E::headline).collect()),
        csv_key: E::csv_key(),
    }
}

/// Every experiment, in report order.
pub fn registry() -> Vec<Entry> {
    vec![
        entry::<crate::e1::E1>(),
        entry::<crate::e2::E2>(),
        entry::<crate::paths::Paths>(),
        entry::<crate::fairness::Fairness>(),
        entry::<crate::e3::E3>(),
        entry::<crate::msgsize::Msg>(),
        entry::<crate::e6::E6>(),
        entry::<crate::e4::E4>(),
        entry::<crate::e5::E5>(),
        entry::<crate::e8::E8>(),
        entry::<crate::e10::E10>(),
        entry::<crate::e9::E9>(),
        entry::<crate::e7::E7>(),
        entry::<crate::flood::Flood>(),
        entry::<crate::soak::Soak>(),
    ]
}
