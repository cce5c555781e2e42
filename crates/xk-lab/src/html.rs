//! The HTML page: a header table, a table of contents, one section per
//! experiment (written by the experiment itself through [`Page`]) and the
//! plan's extra plots. Every figure is also written as its own SVG file next
//! to the page.

use serde_json::Value;

use crate::plan::PlotSpec;
use crate::svg::{esc, plot};

/// A page under construction.
#[derive(Default)]
pub struct Page {
    pub(crate) body: String,
    toc: Vec<(String, String)>,
    /// (file name, SVG) of every figure, in order.
    pub(crate) figures: Vec<(String, String)>,
    section: String,
}

impl Page {
    /// Starts a section (an entry in the table of contents).
    pub fn section(&mut self, id: &str, title: &str) {
        self.section = id.to_lowercase();
        self.toc.push((self.section.clone(), title.to_string()));
        self.body += &format!("<h2 id=\"{}\">{}</h2>", self.section, esc(title));
    }

    /// Appends HTML.
    pub fn push(&mut self, html: &str) {
        self.body += html;
    }

    /// A paragraph of small print (sources, methods).
    pub fn note(&mut self, text: &str) {
        self.body += &format!("<p class=\"src\">{}</p>", esc(text));
    }

    /// The reading: what the numbers say, generated from them.
    pub fn reading(&mut self, text: &str) {
        self.body += &format!("<p><b>Reading.</b> {}</p>", esc(text));
    }

    /// A figure: the SVG inline with a caption, and as its own file
    /// `fig-<section>-<n>.svg`. Nothing when the SVG is empty (no data).
    pub fn figure(&mut self, svg: String, caption: &str) {
        if svg.is_empty() {
            self.note(&format!("(No data to plot for: {caption})"));
            return;
        }
        let n =
            self.figures.iter().filter(|f| f.0.starts_with(&format!("fig-{}-", self.section))).count() + 1;
        let name = format!("fig-{}-{n}.svg", self.section);
        self.body += &format!(
            "<figure>{svg}<figcaption>{} <a href=\"{name}\">({name})</a></figcaption></figure>",
            esc(caption)
        );
        self.figures.push((name, svg));
    }

    /// A table: caption, header cells, rows of cells (already HTML).
    pub fn table(&mut self, caption: &str, header: &[&str], rows: &[Vec<String>]) {
        let mut h = format!("<table><caption>{}</caption><tr>", esc(caption));
        for c in header {
            h += &format!("<th>{}</th>", esc(c));
        }
        h += "</tr>";
        for r in rows {
            h += "<tr>";
            for c in r {
                h += &format!("<td>{c}</td>");
            }
            h += "</tr>";
        }
        self.body += &(h + "</table>");
    }
}

/// The whole page: header, contents, the sections, the plan's plots.
pub(crate) fn render(results: &Value, sections: Page, plots: &[PlotSpec]) -> (String, Vec<(String, String)>) {
    let mut page = sections;
    if !plots.is_empty() {
        page.section("plots", "Plots from the plan");
        for spec in plots {
            let rows: Vec<&Value> = results["experiments"][&spec.experiment]["runs"]
                .as_array()
                .into_iter()
                .flatten()
                .flat_map(|r| r["rows"].as_array().into_iter().flatten())
                .collect();
            let label = |v: &Value| match v {
                Value::String(t) => t.clone(),
                Value::Null => String::new(),
                other => other.to_string(),
            };
            let mut series: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
            for row in rows {
                let (Some(px), Some(py)) = (row[&spec.x].as_f64(), row[&spec.y].as_f64()) else { continue };
                let name = match &spec.series {
                    Some(col) => format!("{col} = {}", label(&row[col])),
                    None => spec.y.clone(),
                };
                match series.iter_mut().find(|(n, _)| *n == name) {
                    Some((_, pts)) => pts.push((px, py)),
                    None => series.push((name, vec![(px, py)])),
                }
            }
            for (_, pts) in &mut series {
                pts.sort_by(|a, b| a.0.total_cmp(&b.0));
            }
            let title = spec
                .title
                .clone()
                .unwrap_or_else(|| format!("{}: {} vs {}", spec.experiment, spec.y, spec.x));
            let xl = spec.x_label.clone().unwrap_or_else(|| spec.x.clone());
            let yl = spec.y_label.clone().unwrap_or_else(|| spec.y.clone());
            let svg = plot(&title, (&xl, &yl), &series, spec.logs());
            page.figure(svg, &format!("{title} (rows of {}, every repetition a point)", spec.experiment));
        }
    }
    let mut h = String::from(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>xpress report</title><style>body{font-family:sans-serif;max-width:1000px;margin:2em auto;color:#222;font-size:15px}table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}th{background:#f4f4f4}caption{text-align:left;font-weight:bold}.src{color:#555;font-size:92%}figure{margin:1em 0}figcaption{font-size:92%;color:#333}.bad{background:#fdd}</style></head><body>",
    );
    h += "<h1>xpress report</h1>";
    if results["partial"].as_bool() == Some(true) {
        h += "<p style=\"background:#fee;padding:6px\"><b>Partial results:</b> the run was stopped (Ctrl-C) or ran one shard of the plan; what is shown was measured.</p>";
    }
    let m = &results["machine_before"];
    let s = |v: &Value| match v {
        Value::String(t) => esc(t),
        Value::Null => "—".into(),
        other => esc(&other.to_string()),
    };
    let shard = match results["shard"].as_object() {
        Some(o) => format!("{} of {}", o["index"], o["count"]),
        None => "whole plan".into(),
    };
    h += &format!(
        "<table><caption>Run</caption><tr><th>date (UTC)</th><td>{}</td></tr><tr><th>xpress</th><td>{} (commit {})</td></tr><tr><th>plan</th><td>{} · seed {} · {}</td></tr><tr><th>machine</th><td>{} · {} cores · Linux {}</td></tr><tr><th>load average before / after</th><td>{} / {}</td></tr></table>",
        s(&results["date"]),
        s(&results["xpress"]),
        s(&results["commit"]),
        if results["quick"].as_bool() == Some(true) { "quick" } else { "full" },
        results["seed"],
        shard,
        s(&m["cpu"]),
        m["cores"],
        s(&m["kernel"]),
        s(&m["loadavg"]),
        s(&results["machine_after"]["loadavg"]),
    );
    h += "<p class=\"src\">Every number below is computed from the raw rows in results.json, except the seeds' historical numbers, each labelled with its source.</p><nav><b>Contents</b><ul>";
    for (id, title) in &page.toc {
        h += &format!("<li><a href=\"#{id}\">{}</a></li>", esc(title));
    }
    h += "</ul></nav>";
    h += &page.body;
    (h + "</body></html>", page.figures)
}
