//! Line plots as inline SVG, drawn here (no scripts, no external files):
//! logarithmic or linear axes, one coloured line with markers per series,
//! a legend on the right.

const COLORS: [&str; 6] = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"];

/// Escapes text for HTML and SVG.
pub(crate) fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

/// One axis: its range (in log10 units when logarithmic) and tick values.
struct Axis {
    log: bool,
    lo: f64,
    hi: f64,
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
    fn ticks(&self) -> Vec<(f64, String)> {
        if self.log {
            ((self.lo as i32)..=(self.hi as i32)).map(|d| (10f64.powi(d), format!("1e{d}"))).collect()
        } else {
            let step = nice_step(self.hi - self.lo);
            let n = ((self.hi - self.lo) / step).round() as i32;
            // As many decimals as the step needs (0.2 → 1, 50 → 0).
            let decimals = (-step.log10().floor()).max(0.0) as usize;
            (0..=n).map(|i| self.lo + step * f64::from(i)).map(|v| (v, format!("{v:.decimals$}"))).collect()
        }
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

/// A line plot; empty string when no series has a point to show.
pub(crate) fn plot(
    title: &str,
    (xl, yl): (&str, &str),
    series: &[(String, Vec<(f64, f64)>)],
    (log_x, log_y): (bool, bool),
) -> String {
    let (w, h, l, r, t, b) = (640.0, 380.0, 70.0, 190.0, 30.0, 50.0);
    let pts = || series.iter().flat_map(|(_, p)| p.iter().copied());
    let (Some(ax), Some(ay)) = (
        Axis::fit(log_x, pts().filter(|p| !log_y || p.1 > 0.0).map(|p| p.0)),
        Axis::fit(log_y, pts().filter(|p| !log_x || p.0 > 0.0).map(|p| p.1)),
    ) else {
        return String::new();
    };
    let sx = |v: f64| l + ax.pos(v) * (w - l - r);
    let sy = |v: f64| h - b - ay.pos(v) * (h - t - b);
    let mut s = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" class="plot"><rect width="{w}" height="{h}" fill="white"/><text x="{}" y="18" font-size="14" text-anchor="middle">{}</text>"#,
        (w - r + l) / 2.0,
        esc(title)
    );
    for (v, label) in ax.ticks() {
        let x = sx(v);
        s += &format!(
            r##"<line x1="{x}" y1="{t}" x2="{x}" y2="{}" stroke="#ddd"/><text x="{x}" y="{}" font-size="11" text-anchor="middle">{label}</text>"##,
            h - b,
            h - b + 15.0
        );
    }
    for (v, label) in ay.ticks() {
        let y = sy(v);
        s += &format!(
            r##"<line x1="{l}" y1="{y}" x2="{}" y2="{y}" stroke="#ddd"/><text x="{}" y="{}" font-size="11" text-anchor="end">{label}</text>"##,
            w - r,
            l - 5.0,
            y + 4.0
        );
    }
    s += &format!(
        r#"<text x="{}" y="{}" font-size="12" text-anchor="middle">{}</text>"#,
        (w - r + l) / 2.0,
        h - 12.0,
        esc(xl)
    );
    s += &format!(
        r#"<text x="14" y="{}" font-size="12" transform="rotate(-90 14 {})" text-anchor="middle">{}</text>"#,
        (h - b + t) / 2.0,
        (h - b + t) / 2.0,
        esc(yl)
    );
    for (i, (name, p)) in series.iter().enumerate() {
        let c = COLORS[i % COLORS.len()];
        let shown: Vec<(f64, f64)> = p.iter().copied().filter(|q| ax.shows(q.0) && ay.shows(q.1)).collect();
        let path: Vec<String> = shown.iter().map(|q| format!("{:.1},{:.1}", sx(q.0), sy(q.1))).collect();
        s += &format!(r#"<polyline fill="none" stroke="{c}" stroke-width="2" points="{}"/>"#, path.join(" "));
        for q in &shown {
            s += &format!(r#"<circle cx="{:.1}" cy="{:.1}" r="3" fill="{c}"/>"#, sx(q.0), sy(q.1));
        }
        let ly = t + 10.0 + 18.0 * i as f64;
        s += &format!(
            r#"<rect x="{}" y="{}" width="12" height="3" fill="{c}"/><text x="{}" y="{}" font-size="11">{}</text>"#,
            w - r + 10.0,
            ly - 3.0,
            w - r + 26.0,
            ly + 1.0,
            esc(name)
        );
    }
    s + "</svg>"
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
        assert_eq!(labels, ["0.0", "0.2", "0.4", "0.6"]);
        let g = Axis::fit(true, [0.0, 3.0, 470.0].into_iter()).unwrap();
        assert_eq!((g.lo, g.hi), (0.0, 3.0), "log axes skip non-positive values");
        assert!(plot("t", ("x", "y"), &[("s".into(), vec![(0.0, 0.0)])], (true, true)).is_empty());
        let svg = plot("t", ("x", "y"), &[("s".into(), vec![(1.0, 2.0), (2.0, 3.0)])], (false, false));
        assert!(svg.contains("<polyline") && svg.matches("<circle").count() == 2);
    }
}
