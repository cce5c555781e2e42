//! The generic runner: the plan's steps in order (or one shard of them),
//! progress with time left, Ctrl-C → partial results, results.json, one CSV
//! per experiment, the HTML page with its figures, and the console summary.
//! Also `--replot`, `--compare` and `--merge`, which work from results.json
//! alone.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use serde_json::{Map, Value, json};

use crate::experiment::{Entry, Env, Run, Section, registry};
use crate::html::{self, Page};
use crate::plan::{Plan, PlotSpec};
use crate::progress::Progress;
use crate::stats;

/// What `xpress report` was asked for.
#[derive(Clone, Debug)]
pub struct ReportOptions {
    /// The quick plan (what CI runs) instead of the full one.
    pub quick: bool,
    /// Directory for report.html, results.json, the CSV and SVG files.
    pub out: PathBuf,
    /// Master seed of the simulated experiments.
    pub seed: u64,
    /// A plan file (TOML) applied on top of the built-in plan.
    pub plan: Option<PathBuf>,
    /// Run only the steps `k` with `k % count == index` (`--shard I/N`).
    pub shard: Option<(usize, usize)>,
}

fn machine() -> Value {
    let read = |p: &str| fs::read_to_string(p).unwrap_or_default();
    let cpu = read("/proc/cpuinfo")
        .lines()
        .find(|l| l.starts_with("model name"))
        .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string());
    json!({
        "cpu": cpu,
        "cores": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        "kernel": read("/proc/sys/kernel/osrelease").trim(),
        "loadavg": read("/proc/loadavg").trim(),
    })
}

/// UTC date and time of now, `YYYY-MM-DD HH:MM`.
fn utc_now() -> String {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let (days, rem) = ((secs / 86_400) as i64, secs % 86_400);
    // Civil date from days since 1970-01-01 (H. Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02} {:02}:{:02}", rem / 3600, rem % 3600 / 60)
}

/// The commit this binary was built from, if the working directory is its
/// repository (else "unknown").
fn commit() -> String {
    std::process::Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map_or("unknown".into(), |o| String::from_utf8_lossy(&o.stdout).trim().to_string())
}

fn write(path: &Path, text: &str) -> Result<(), String> {
    fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))
}

/// Runs the report. `stop` is set on Ctrl-C (by the caller): the runner
/// finishes the step under way and writes what it has, marked partial.
pub fn run(a: &ReportOptions, stop: Arc<AtomicBool>) -> Result<(), String> {
    if let Some((i, n)) = a.shard
        && (n == 0 || i >= n)
    {
        return Err(format!("--shard {i}/{n}: must be I/N with 0 <= I < N"));
    }
    let reg = registry();
    let text = match &a.plan {
        Some(p) => Some(fs::read_to_string(p).map_err(|e| format!("--plan {}: {e}", p.display()))?),
        None => None,
    };
    let name = a.plan.as_ref().map(|p| p.display().to_string()).unwrap_or_default();
    let plan = Plan::resolve(&reg, a.quick, text.as_deref().map(|t| (name.as_str(), t)))?;
    let mut exps = plan.build(&reg)?;
    fs::create_dir_all(&a.out).map_err(|e| format!("--out {}: {e}", a.out.display()))?;
    let env = Env { seed: a.seed, root: xk_driver::netns::is_root(), stop: stop.clone() };
    let before = machine();
    // Every step of the plan, numbered across experiments; a shard takes
    // every N-th, so N machines share a sweep and `--merge` reassembles it.
    let labels: Vec<Vec<String>> = exps.iter().map(|e| e.step_labels(&env)).collect();
    let mut todo = Vec::new();
    let mut k = 0;
    for (ei, ls) in labels.iter().enumerate() {
        for si in 0..ls.len() {
            if a.shard.is_none_or(|(i, n)| k % n == i) {
                todo.push((ei, si));
            }
            k += 1;
        }
    }
    eprintln!(
        "xpress report: seed {}, {} plan{}, {} steps, writing to {} (Ctrl-C: stop and keep partial results)",
        a.seed,
        if a.quick { "quick" } else { "full" },
        a.shard.map_or(String::new(), |(i, n)| format!(", shard {i}/{n}")),
        todo.len(),
        a.out.display()
    );
    let mut sections: Vec<Section> = exps
        .iter()
        .zip(&labels)
        .map(|(e, ls)| Section {
            title: e.title().to_string(),
            params: e.params_json(),
            notes: e.notes(&env),
            runs: Vec::new(),
            steps_total: ls.len(),
        })
        .collect();
    for s in &sections {
        for n in &s.notes {
            eprintln!("  note: {n}");
        }
    }
    let mut p = Progress::new(todo.len(), stop);
    let mut failed = 0;
    for &(ei, si) in &todo {
        let e = &mut exps[ei];
        if !p.step(&format!("{} {}", e.id(), labels[ei][si])) {
            break;
        }
        // A failed step is recorded and the run goes on: one broken point
        // must not cost the rest of a long sweep.
        let t0 = std::time::Instant::now();
        let mut run = e.run_step(si, &env).unwrap_or_else(|err| {
            eprintln!("  FAILED: {} step {si} ({}): {err}", e.id(), labels[ei][si]);
            failed += 1;
            Run {
                step: si,
                label: labels[ei][si].clone(),
                point: Value::Null,
                rows: Vec::new(),
                error: Some(err),
                seconds: 0.0,
            }
        });
        run.seconds = t0.elapsed().as_secs_f64();
        sections[ei].runs.push(run);
    }
    // What each experiment cost: the numbers to choose a plan's points by.
    let took: Vec<String> = exps
        .iter()
        .zip(&sections)
        .filter(|(_, s)| !s.runs.is_empty())
        .map(|(e, s)| format!("{} {:.0} s", e.id(), s.runs.iter().map(|r| r.seconds).sum::<f64>()))
        .collect();
    eprintln!("xpress report: time per experiment: {}", took.join(", "));
    let ran = sections.iter().map(|s| s.runs.len()).sum::<usize>();
    let partial = p.stopped() || a.shard.is_some() || ran < labels.iter().map(Vec::len).sum::<usize>();
    if p.stopped() {
        eprintln!("xpress report: stopped by Ctrl-C; writing the partial results");
    }
    let results = json!({
        "xpress": env!("CARGO_PKG_VERSION"),
        "commit": commit(),
        "date": utc_now(),
        "quick": a.quick,
        "partial": partial,
        "shard": a.shard.map(|(i, n)| json!({"index": i, "count": n})),
        "plan": plan.to_json(),
        "seed": a.seed,
        "machine_before": before,
        "machine_after": machine(),
        "experiments": exps.iter().zip(&sections).map(|(e, s)| (e.id().to_string(), json!(s))).collect::<Map<_, _>>(),
    });
    write_all(&a.out, &results, &reg)?;
    if failed > 0 {
        return Err(format!(
            "{failed} step(s) failed (listed above and in the report); everything else was written"
        ));
    }
    Ok(())
}

/// Writes results.json, the CSV files, report.html and its figures, and
/// prints the summary.
fn write_all(out: &Path, results: &Value, reg: &[Entry]) -> Result<(), String> {
    fs::create_dir_all(out).map_err(|e| format!("{}: {e}", out.display()))?;
    let json_path = out.join("results.json");
    write(&json_path, &serde_json::to_string_pretty(results).map_err(|e| e.to_string())?)?;
    let mut csv_files = 0;
    // Registry order (the JSON object's own order is alphabetical).
    let sections = || reg.iter().filter_map(|e| results["experiments"].get(e.id).map(|s| (e, s)));
    for (entry, sec) in sections() {
        let id = entry.id;
        // One line per measured row (every repetition), step index first.
        let rows: Vec<Value> = sec["runs"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|r| {
                r["rows"].as_array().into_iter().flatten().map(move |row| {
                    let mut o = row.clone();
                    if let Some(m) = o.as_object_mut() {
                        m.insert("step".into(), r["step"].clone());
                    }
                    o
                })
            })
            .collect();
        if rows.is_empty() {
            continue;
        }
        let mut key = vec!["step"];
        key.extend_from_slice(entry.csv_key);
        write(&out.join(format!("results-{id}.csv")), &stats::csv(&rows, &key))?;
        csv_files += 1;
    }
    let machine_rows: Vec<Value> = ["before", "after"]
        .iter()
        .map(|w| {
            let mut m = results[format!("machine_{w}")].clone();
            m["when"] = json!(w);
            m
        })
        .collect();
    write(&out.join("results-machine.csv"), &stats::csv(&machine_rows, &["when"]))?;
    let mut page = Page::default();
    for (entry, sec) in sections() {
        let id = entry.id;
        let sec: Section = serde_json::from_value(sec.clone()).map_err(|e| format!("{id}: {e}"))?;
        page.section(id, &format!("{id} — {}", sec.title));
        if sec.runs.len() < sec.steps_total {
            page.note(&format!(
                "{} of {} steps measured (stopped early, or one shard).",
                sec.runs.len(),
                sec.steps_total
            ));
        }
        (entry.render)(&sec, &mut page)?;
        for r in sec.runs.iter().filter(|r| r.error.is_some()) {
            page.push(&format!(
                "<p class=\"bad\"><b>Step {} failed</b> ({}): {}</p>",
                r.step,
                crate::svg::esc(&r.label),
                crate::svg::esc(r.error.as_deref().unwrap_or(""))
            ));
        }
        for line in (entry.summary)(&sec)? {
            println!("{line}");
        }
    }
    let plots: Vec<PlotSpec> = serde_json::from_value(results["plan"]["plots"].clone()).unwrap_or_default();
    let (html, figures) = html::render(results, page, &plots);
    let html_path = out.join("report.html");
    write(&html_path, &html)?;
    for (name, svg) in &figures {
        write(&out.join(name), svg)?;
    }
    println!(
        "wrote {}, {}, {} figures and {} CSV files in {}{}",
        html_path.display(),
        json_path.display(),
        figures.len(),
        csv_files + 1,
        out.display(),
        if results["partial"].as_bool() == Some(true) { " (partial)" } else { "" }
    );
    Ok(())
}

fn read_results(dir: &Path) -> Result<Value, String> {
    let path = dir.join("results.json");
    let text = fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{}: not a results file: {e}", path.display()))
}

/// `--replot DIR`: rebuilds the HTML, figures and CSV from DIR/results.json
/// without measuring.
pub fn replot(dir: &Path) -> Result<(), String> {
    let results = read_results(dir)?;
    write_all(dir, &results, &registry())
}

/// `--merge DIR… --out DIR`: the shards of one plan as one report. Every
/// shard must come from the same plan and seed; a step measured twice is an
/// error.
pub fn merge(dirs: &[PathBuf], out: &Path) -> Result<(), String> {
    let mut merged: Option<Value> = None;
    for d in dirs {
        let r = read_results(d)?;
        let Some(m) = merged.as_mut() else {
            merged = Some(r);
            continue;
        };
        if m["plan"] != r["plan"] || m["seed"] != r["seed"] || m["quick"] != r["quick"] {
            return Err(format!(
                "{}: another plan, seed or quick flag than {}",
                d.display(),
                dirs[0].display()
            ));
        }
        for (id, sec) in r["experiments"].as_object().into_iter().flatten() {
            let runs = m["experiments"][id]["runs"].as_array_mut().ok_or(format!("{id}: no runs"))?;
            for run in sec["runs"].as_array().into_iter().flatten() {
                if runs.iter().any(|x| x["step"] == run["step"]) {
                    return Err(format!("{id} step {} is in two shards", run["step"]));
                }
                runs.push(run.clone());
            }
            runs.sort_by_key(|x| x["step"].as_u64());
        }
    }
    let mut m = merged.ok_or("--merge: give at least one directory")?;
    let complete = m["experiments"].as_object().into_iter().flatten().all(|(_, s)| {
        s["runs"].as_array().map_or(0, Vec::len) as u64 == s["steps_total"].as_u64().unwrap_or(0)
    });
    m["partial"] = json!(!complete);
    m["shard"] = Value::Null;
    write_all(out, &m, &registry())
}

/// `--compare A B`: every row's headline value in A and B and their ratio.
pub fn compare(a: &Path, b: &Path) -> Result<(), String> {
    let (ra, rb) = (read_results(a)?, read_results(b)?);
    let reg = registry();
    println!("{:<8} {:<56} {:>12} {:>12} {:>7}", "exp", "row", a.display(), b.display(), "B/A");
    for entry in &reg {
        let get = |r: &Value| -> Result<Vec<crate::experiment::Headline>, String> {
            match r["experiments"].get(entry.id) {
                Some(s) => (entry.headlines)(&serde_json::from_value(s.clone()).map_err(|e| e.to_string())?),
                None => Ok(Vec::new()),
            }
        };
        let (ha, hb) = (get(&ra)?, get(&rb)?);
        let mut keys: Vec<&String> = ha.iter().chain(&hb).map(|h| &h.0).collect();
        keys.dedup();
        let mut seen = Vec::new();
        for k in keys {
            if seen.contains(&k) {
                continue;
            }
            seen.push(k);
            let med = |h: &[crate::experiment::Headline]| {
                let v: Vec<f64> = h.iter().filter(|x| &x.0 == k).map(|x| x.1).collect();
                (!v.is_empty()).then(|| stats::median(v))
            };
            let unit = ha.iter().chain(&hb).find(|x| &x.0 == k).map_or("", |x| x.2);
            let (va, vb) = (med(&ha), med(&hb));
            let show = |v: Option<f64>| v.map_or("—".to_string(), |v| format!("{v:.4}"));
            let ratio = match (va, vb) {
                (Some(x), Some(y)) if x != 0.0 => format!("{:.3}", y / x),
                _ => "—".into(),
            };
            println!(
                "{:<8} {:<56} {:>12} {:>12} {:>7}",
                entry.id,
                format!("{k} ({unit})"),
                show(va),
                show(vb),
                ratio
            );
        }
    }
    Ok(())
}

/// `--list`: every experiment with its parameters' built-in values, as TOML.
pub fn list(quick: bool) -> String {
    let mut out = format!(
        "# built-in {} plan; a plan file may set any of these\n",
        if quick { "quick" } else { "full" }
    );
    for e in registry() {
        out += &format!("\n[{}]   # {}\n", e.id, e.title);
        let v = (e.defaults)(quick);
        let t: Result<toml::Value, _> = serde_json::from_value::<toml::Value>(v.clone());
        match t.ok().and_then(|t| toml::to_string(&t).ok()) {
            Some(s) => out += &s,
            None => out += &format!("# {v}\n"),
        }
    }
    out
}
