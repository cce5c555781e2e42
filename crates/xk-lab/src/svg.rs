//! Figures as SVG, drawn here: line plots (linear or logarithmic axes, one
//! line per series with its own colour, marker and dash pattern, error bars
//! from the spread of repetitions) and heatmaps with numbers in the cells.
//!
//! Hand-written rather than `plotters`: the figures must embed inline in a
//! self-contained page and stand alone as files, with text sizes, decimal
//! log ticks and "coincides with" notes under our control, in ~300 lines and
//! no dependency; each requirement of a paper figure is checked in the
//! tests below.

/// Escapes text for HTML and SVG.
pub(crate) fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

/// Colour-blind-safe palette (Okabe–Ito).
const COLORS: [&str; 8] =
    ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442"];
/// Dash patterns, so lines stay apart in grey print and where they overlap.
const DASHES: [&str; 5] = ["", "8 4", "2 3", "10 3 2 3", "4 4"];
const FONT: f64 = 14.0;

/// One point of a series: `y` and, when repeated, its range.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Pt {
    pub(crate) x: f64,
    pub(crate) y: f64,
    /// (low, high) of the repetitions: an error bar.
    pub(crate) range: Option<(f64, f64)>,
}

/// A named line.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Series {
    pub(crate) name: String,
    pub(crate) points: Vec<Pt>,
}

impl Series {
    /// A series without error bars.
    pub(crate) fn plain(name: &str, points: &[(f64, f64)]) -> Series {
        Series { name: name.into(), points: points.iter().map(|&(x, y)| Pt { x, y, range: None }).collect() }
    }
    /// A series of medians with the min–max range of their repetitions.
    pub(crate) fn spread(name: &str, points: &[(f64, crate::stats::Spread)]) -> Series {
        Series {
            name: name.into(),
            points: points
                .iter()
                .map(|(x, s)| Pt { x: *x, y: s.median, range: (s.n > 1).then_some((s.min, s.max)) })
                .collect(),
        }
    }
}

/// One axis: its range (in log10 units when logarithmic) and tick values.
struct Axis {
    log: bool,
    lo: f64,
    hi: f64,
}

/// A number as a tick label: decimal, thousands separated, no exponent.
fn label(v: f64) -> String {
    if v != 0.0 && (v.abs() < 1e-3 || v.abs() >= 1e9) {
        return format!("{v:e}");
    }
    let s = format!("{v:.4}");
    let s = if s.contains('.') { s.trim_end_matches('0').trim_end_matches('.').to_string() } else { s };
    let s = if s == "-0" { "0".to_string() } else { s };
    let (int, frac) = s.split_once('.').map_or((s.as_str(), ""), |(a, b)| (a, b));
    let (sign, digits) = int.strip_prefix('-').map_or(("", int), |d| ("-", d));
    let mut grouped = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            grouped.push(',');
        }
        grouped.push(c);
    }
    if frac.is_empty() { format!("{sign}{grouped}") } else { format!("{sign}{grouped}.{frac}") }
}

impl Axis {
    /// Fits the axis to `values` (only positive ones count on a log axis).
    fn fit(log: bool, values: impl Iterator<Item = f64>) -> Option<Axis> {
        let t = |v: f64| if log { v.log10() } else { v };
        let (lo, hi) = values
            .filter(|v| v.is_finite() && (!log || *v > 0.0))
            .map(t)
            .fold(None, |acc: Option<(f64, f64)>, v| {
                Some(acc.map_or((v, v), |(a, b)| (a.min(v), b.max(v))))
            })?;
        if log {
            return Some(Axis { log, lo: lo.floor(), hi: hi.ceil().max(lo.floor() + 1.0) });
        }
        // Linear: from 0 when all values are positive, rounded to a nice step.
        let lo = lo.min(0.0);
        let step = nice_step((hi - lo).max(f64::MIN_POSITIVE));
        Some(Axis { log, lo: (lo / step).floor() * step, hi: ((hi / step).ceil() * step).max(lo + step) })
    }
    fn pos(&self, v: f64) -> f64 {
        let v = if self.log { v.log10() } else { v };
        (v - self.lo) / (self.hi - self.lo)
    }
    /// Major ticks with labels.
    fn ticks(&self) -> Vec<(f64, String)> {
        if self.log {
            ((self.lo as i32)..=(self.hi as i32)).map(|d| 10f64.powi(d)).map(|v| (v, label(v))).collect()
        } else {
            let step = nice_step(self.hi - self.lo);
            let n = ((self.hi - self.lo) / step).round() as i32;
            (0..=n).map(|i| self.lo + step * f64::from(i)).map(|v| (v, label(v))).collect()
        }
    }
    /// Minor ticks: 2…9 × each decade on a log axis; none on a linear one.
    fn minor(&self) -> Vec<f64> {
        if !self.log {
            return Vec::new();
        }
        ((self.lo as i32)..(self.hi as i32))
            .flat_map(|d| (2..10).map(move |m| f64::from(m) * 10f64.powi(d)))
            .collect()
    }
    fn shows(&self, v: f64) -> bool {
        v.is_finite() && (!self.log || v > 0.0)
    }
}

/// A step of 1, 2 or 5 × 10^k giving about five intervals over `span`.
fn nice_step(span: f64) -> f64 {
    let raw = span / 5.0;
    let mag = 10f64.powf(raw.log10().floor());
    let m = raw / mag;
    mag * if m <= 1.0 {
        1.0
    } else if m <= 2.0 {
        2.0
    } else if m <= 5.0 {
        5.0
    } else {
        10.0
    }
}

/// A marker of kind `k` at (x, y).
fn marker(k: usize, x: f64, y: f64, c: &str) -> String {
    let r = 4.5;
    match k % 5 {
        0 => format!(r#"<circle cx="{x:.1}" cy="{y:.1}" r="{r}" fill="{c}"/>"#),
        1 => format!(
            r#"<rect x="{:.1}" y="{:.1}" width="{}" height="{}" fill="{c}"/>"#,
            x - r,
            y - r,
            2.0 * r,
            2.0 * r
        ),
        2 => format!(
            r#"<polygon points="{:.1},{:.1} {:.1},{:.1} {:.1},{:.1}" fill="{c}"/>"#,
            x,
            y - r * 1.2,
            x - r * 1.1,
            y + r * 0.8,
            x + r * 1.1,
            y + r * 0.8
        ),
        3 => format!(
            r#"<polygon points="{x:.1},{:.1} {:.1},{y:.1} {x:.1},{:.1} {:.1},{y:.1}" fill="white" stroke="{c}" stroke-width="2"/>"#,
            y - r * 1.3,
            x + r * 1.3,
            y + r * 1.3,
            x - r * 1.3
        ),
        _ => format!(
            r#"<path d="M{:.1},{:.1}L{:.1},{:.1}M{:.1},{:.1}L{:.1},{:.1}" stroke="{c}" stroke-width="2.5"/>"#,
            x - r,
            y - r,
            x + r,
            y + r,
            x - r,
            y + r,
            x + r,
            y - r
        ),
    }
}

/// A line plot; empty string when no series has a point to show. Series
/// with identical points are drawn once each (distinct dashes and markers)
/// and the legend says which coincide.
pub(crate) fn plot_series(
    title: &str,
    (xl, yl): (&str, &str),
    series: &[Series],
    (log_x, log_y): (bool, bool),
) -> String {
    let legend_w =
        series.iter().map(|s| s.name.chars().count()).max().unwrap_or(0) as f64 * FONT * 0.55 + 40.0;
    let (l, r, t, b) = (80.0, legend_w.clamp(120.0, 380.0), 36.0, 56.0);
    let (w, h) = (560.0 + r, 420.0);
    let pts = || series.iter().flat_map(|s| s.points.iter().copied());
    let ys = || pts().flat_map(|p| [Some(p.y), p.range.map(|r| r.0), p.range.map(|r| r.1)]).flatten();
    let (Some(ax), Some(ay)) = (Axis::fit(log_x, pts().map(|p| p.x)), Axis::fit(log_y, ys())) else {
        return String::new();
    };
    if !pts().any(|p| ax.shows(p.x) && ay.shows(p.y)) {
        return String::new();
    }
    let sx = |v: f64| l + ax.pos(v) * (w - l - r);
    let sy = |v: f64| h - b - ay.pos(v) * (h - t - b);
    let mut s = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" class="plot" font-family="sans-serif"><rect width="{w}" height="{h}" fill="white"/><text x="{}" y="22" font-size="{}" text-anchor="middle">{}</text>"#,
        (w - r + l) / 2.0,
        FONT + 2.0,
        esc(title)
    );
    let (x0, x1, y0, y1) = (l, w - r, t, h - b);
    for v in ax.minor().into_iter().filter(|v| ax.pos(*v) > 0.0 && ax.pos(*v) < 1.0) {
        let x = sx(v);
        s += &format!(
            r##"<line x1="{x:.1}" y1="{y1}" x2="{x:.1}" y2="{}" stroke="#444"/><line x1="{x:.1}" y1="{y0}" x2="{x:.1}" y2="{y1}" stroke="#f2f2f2"/>"##,
            y1 + 4.0
        );
    }
    for v in ay.minor().into_iter().filter(|v| ay.pos(*v) > 0.0 && ay.pos(*v) < 1.0) {
        let y = sy(v);
        s += &format!(
            r##"<line x1="{}" y1="{y:.1}" x2="{x0}" y2="{y:.1}" stroke="#444"/><line x1="{x0}" y1="{y:.1}" x2="{x1}" y2="{y:.1}" stroke="#f2f2f2"/>"##,
            x0 - 4.0
        );
    }
    for (v, lab) in ax.ticks() {
        let x = sx(v);
        s += &format!(
            r##"<line x1="{x:.1}" y1="{y0}" x2="{x:.1}" y2="{y1}" stroke="#ddd"/><line x1="{x:.1}" y1="{y1}" x2="{x:.1}" y2="{}" stroke="#222"/><text x="{x:.1}" y="{}" font-size="{FONT}" text-anchor="middle">{lab}</text>"##,
            y1 + 7.0,
            y1 + 23.0
        );
    }
    for (v, lab) in ay.ticks() {
        let y = sy(v);
        s += &format!(
            r##"<line x1="{x0}" y1="{y:.1}" x2="{x1}" y2="{y:.1}" stroke="#ddd"/><line x1="{}" y1="{y:.1}" x2="{x0}" y2="{y:.1}" stroke="#222"/><text x="{}" y="{:.1}" font-size="{FONT}" text-anchor="end">{lab}</text>"##,
            x0 - 7.0,
            x0 - 10.0,
            y + 5.0
        );
    }
    s += &format!(
        r##"<rect x="{x0}" y="{y0}" width="{}" height="{}" fill="none" stroke="#222"/>"##,
        x1 - x0,
        y1 - y0
    );
    s += &format!(
        r#"<text x="{}" y="{}" font-size="{FONT}" text-anchor="middle">{}</text>"#,
        (x0 + x1) / 2.0,
        h - 12.0,
        esc(xl)
    );
    s += &format!(
        r#"<text x="18" y="{m}" font-size="{FONT}" transform="rotate(-90 18 {m})" text-anchor="middle">{}</text>"#,
        esc(yl),
        m = (y0 + y1) / 2.0
    );
    let mut legend_y = t + 12.0;
    for (i, se) in series.iter().enumerate() {
        let (c, dash) = (COLORS[i % COLORS.len()], DASHES[i % DASHES.len()]);
        let shown: Vec<Pt> = se.points.iter().copied().filter(|q| ax.shows(q.x) && ay.shows(q.y)).collect();
        let path: Vec<String> = shown.iter().map(|q| format!("{:.1},{:.1}", sx(q.x), sy(q.y))).collect();
        s += &format!(
            r#"<polyline fill="none" stroke="{c}" stroke-width="2" stroke-dasharray="{dash}" points="{}"/>"#,
            path.join(" ")
        );
        for q in &shown {
            if let Some((lo, hi)) = q.range.filter(|(lo, hi)| ay.shows(*lo) && ay.shows(*hi)) {
                let x = sx(q.x);
                s += &format!(
                    r#"<path d="M{x:.1},{:.1}V{:.1}M{:.1},{:.1}h8M{:.1},{:.1}h8" stroke="{c}" stroke-width="1.5"/>"#,
                    sy(lo),
                    sy(hi),
                    x - 4.0,
                    sy(lo),
                    x - 4.0,
                    sy(hi)
                );
            }
            s += &marker(i, sx(q.x), sy(q.y), c);
        }
        let twin = series[..i].iter().find(|o| o.points == se.points && !se.points.is_empty());
        let name = match twin {
            Some(o) => format!("{} (coincides with {})", se.name, o.name),
            None => se.name.clone(),
        };
        let lx = x1 + 12.0;
        s += &format!(
            r#"<line x1="{lx}" y1="{legend_y}" x2="{}" y2="{legend_y}" stroke="{c}" stroke-width="2" stroke-dasharray="{dash}"/>{}<text x="{}" y="{}" font-size="{}">{}</text>"#,
            lx + 28.0,
            marker(i, lx + 14.0, legend_y, c),
            lx + 34.0,
            legend_y + 5.0,
            FONT - 1.0,
            esc(&name)
        );
        legend_y += 22.0;
    }
    s + "</svg>"
}

/// A line plot of plain series.
pub(crate) fn plot(
    title: &str,
    labels: (&str, &str),
    series: &[(String, Vec<(f64, f64)>)],
    logs: (bool, bool),
) -> String {
    let s: Vec<Series> = series.iter().map(|(n, p)| Series::plain(n, p)).collect();
    plot_series(title, labels, &s, logs)
}

/// A log–log line plot (the seeds' figures).
pub(crate) fn loglog(title: &str, xl: &str, yl: &str, series: &[(String, Vec<(f64, f64)>)]) -> String {
    plot(title, (xl, yl), series, (true, true))
}

/// A heatmap of ratios with the number in each cell: rows × columns,
/// green at ≥ 1, shading to red towards 0.5 and below; `None` cells grey.
pub(crate) fn heatmap(
    title: &str,
    (xl, yl): (&str, &str),
    rows: &[String],
    cols: &[String],
    cells: &[Vec<Option<f64>>],
) -> String {
    if rows.is_empty() || cols.is_empty() || cells.iter().flatten().all(Option::is_none) {
        return String::new();
    }
    let (cw, ch, l, t) = (110.0, 44.0, 110.0, 60.0);
    let (w, h) = (l + cw * cols.len() as f64 + 20.0, t + ch * rows.len() as f64 + 50.0);
    let mut s = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" class="plot" font-family="sans-serif"><rect width="{w}" height="{h}" fill="white"/><text x="{}" y="22" font-size="15" text-anchor="middle">{}</text><text x="{}" y="46" font-size="13" text-anchor="middle">{}</text><text x="16" y="{}" font-size="13" transform="rotate(-90 16 {})" text-anchor="middle">{}</text>"#,
        w / 2.0,
        esc(title),
        l + cw * cols.len() as f64 / 2.0,
        esc(xl),
        t + ch * rows.len() as f64 / 2.0,
        t + ch * rows.len() as f64 / 2.0,
        esc(yl)
    );
    for (j, c) in cols.iter().enumerate() {
        s += &format!(
            r#"<text x="{}" y="{}" font-size="13" text-anchor="middle">{}</text>"#,
            l + cw * (j as f64 + 0.5),
            t + ch * rows.len() as f64 + 20.0,
            esc(c)
        );
    }
    for (i, r) in rows.iter().enumerate() {
        let y = t + ch * i as f64;
        s += &format!(
            r#"<text x="{}" y="{}" font-size="13" text-anchor="end">{}</text>"#,
            l - 8.0,
            y + ch / 2.0 + 5.0,
            esc(r)
        );
        for (j, v) in cells.get(i).into_iter().flatten().enumerate() {
            let x = l + cw * j as f64;
            let (fill, text) = match v {
                Some(v) => {
                    // 1.0 and above: green; 0.5 and below: red; between: blend.
                    let f = ((v - 0.5) / 0.5).clamp(0.0, 1.0);
                    let (r, g, b) = (230.0 - 130.0 * f, 120.0 + 100.0 * f, 110.0 + 10.0 * f);
                    (format!("rgb({r:.0},{g:.0},{b:.0})"), format!("{v:.2}"))
                }
                None => ("#ddd".to_string(), "—".to_string()),
            };
            s += &format!(
                r#"<rect x="{x}" y="{y}" width="{cw}" height="{ch}" fill="{fill}" stroke="white"/><text x="{}" y="{}" font-size="15" text-anchor="middle">{text}</text>"#,
                x + cw / 2.0,
                y + ch / 2.0 + 5.0
            );
        }
    }
    s + "</svg>"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axes_fit_and_tick() {
        let a = Axis::fit(false, [3.0, 47.0].into_iter()).unwrap();
        assert_eq!((a.lo, a.hi), (0.0, 50.0));
        assert_eq!(a.ticks().len(), 6);
        let labels: Vec<String> =
            Axis::fit(false, [0.0, 0.57].into_iter()).unwrap().ticks().into_iter().map(|t| t.1).collect();
        assert_eq!(labels, ["0", "0.2", "0.4", "0.6"]);
        let g = Axis::fit(true, [0.0, 3.0, 470.0].into_iter()).unwrap();
        assert_eq!((g.lo, g.hi), (0.0, 3.0), "log axes skip non-positive values");
        let labels: Vec<String> = g.ticks().into_iter().map(|t| t.1).collect();
        assert_eq!(labels, ["1", "10", "100", "1,000"], "decimal labels, no exponents");
        assert_eq!(g.minor().len(), 24, "2…9 in each of three decades");
        assert!(plot("t", ("x", "y"), &[("s".into(), vec![(0.0, 0.0)])], (true, true)).is_empty());
        let svg = plot("t", ("x", "y"), &[("s".into(), vec![(1.0, 2.0), (2.0, 3.0)])], (false, false));
        assert!(svg.contains("<polyline") && svg.matches("<circle").count() == 3, "2 points + legend marker");
    }

    #[test]
    fn figures_are_readable_and_distinguishable() {
        let a = Series::plain("a", &[(0.0, 1.0), (10.0, 2.0)]);
        let b = Series::plain("b", &[(0.0, 1.0), (10.0, 2.0)]);
        let spread = crate::stats::Spread { n: 3, min: 1.0, p25: 1.5, median: 2.0, p75: 2.5, max: 3.0 };
        let c = Series::spread("c", &[(5.0, spread)]);
        let svg = plot_series("t", ("x (ms)", "y (Mbit/s)"), &[a, b, c], (false, false));
        assert!(svg.contains("b (coincides with a)"), "overlapping series are named");
        assert!(svg.contains("stroke-dasharray=\"8 4\""), "distinct dash patterns");
        assert!(svg.contains("<rect x=") && svg.contains("<polygon"), "distinct markers");
        assert!(svg.contains("V"), "an error bar for the repeated point");
        let sizes: Vec<f64> = svg
            .split("font-size=\"")
            .skip(1)
            .map(|s| s.split('"').next().unwrap().parse().unwrap())
            .collect();
        assert!(sizes.iter().all(|&f| f >= 12.0), "text at least 12 px: {sizes:?}");
        assert!(svg.contains(">0</text>"), "zero is on a linear axis");
    }
}
