//! What a model should produce, computed from the chain rather than by
//! walking it: the expected request rate and mean request size.
//!
//! Each automaton is a Markov chain whose states take a mean time (a delay
//! state: its distribution's mean; a macro state: its automaton's mean time
//! to terminate) and emit a mean number of requests (a request state: one; a
//! macro state: its automaton's mean). A user that reaches terminate and
//! begins again makes the chain recurrent (terminate → init); its
//! stationary distribution π gives, by the renewal-reward theorem,
//!
//!   rate = Σ π_s · requests_s / Σ π_s · time_s.
//!
//! Users that stop at terminate run at this rate while they are active.
//! Guarded transitions depend on the walk's history, which a chain cannot
//! see: the computation leaves them out and [`Prediction::note`] says so.

use crate::model::{Automaton, Kind, Model};

/// The analytic expectations of a model.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Prediction {
    /// Expected requests per second, all users together (while active).
    pub rate_per_s: f64,
    /// Expected size of a request, bytes.
    pub mean_size: f64,
    /// Expected offered load, bytes per second.
    pub bytes_per_s: f64,
    /// Per user group: (automaton, count, rate of one user, mean requests
    /// before terminate or None if it never terminates).
    pub groups: Vec<GroupPrediction>,
    /// What the computation left out.
    pub note: Option<String>,
}

/// One user group's expectations.
#[derive(Clone, Debug, serde::Serialize)]
pub struct GroupPrediction {
    /// Automaton name.
    pub automaton: String,
    /// Users in the group.
    pub count: u32,
    /// Requests per second of one user.
    pub rate_per_s: f64,
    /// Mean requests of one user before terminate (None: never ends).
    pub requests_per_run: Option<f64>,
}

/// Mean time, requests and bytes of one visit to each state.
struct Costs {
    time_ns: Vec<f64>,
    requests: Vec<f64>,
    bytes: Vec<f64>,
}

/// Solves `a x = b` in place by Gaussian elimination with partial pivoting;
/// None when the matrix is singular.
fn solve(mut a: Vec<Vec<f64>>, mut b: Vec<f64>) -> Option<Vec<f64>> {
    let n = b.len();
    for c in 0..n {
        let p = (c..n).max_by(|&i, &j| a[i][c].abs().total_cmp(&a[j][c].abs()))?;
        if a[p][c].abs() < 1e-14 {
            return None;
        }
        a.swap(c, p);
        b.swap(c, p);
        for r in c + 1..n {
            let f = a[r][c] / a[c][c];
            if f != 0.0 {
                let (top, rest) = a.split_at_mut(r);
                for (x, y) in rest[0][c..].iter_mut().zip(&top[c][c..]) {
                    *x -= f * y;
                }
                b[r] -= f * b[c];
            }
        }
    }
    let mut x = vec![0.0; n];
    for r in (0..n).rev() {
        let s: f64 = (r + 1..n).map(|k| a[r][k] * x[k]).sum();
        x[r] = (b[r] - s) / a[r][r];
    }
    Some(x)
}

/// Transition matrix of an automaton without guarded edges; `restart`
/// sends terminate back to init.
fn matrix(a: &Automaton, restart: bool) -> Vec<Vec<f64>> {
    let n = a.states.len();
    let mut p = vec![vec![0.0; n]; n];
    for (i, s) in a.states.iter().enumerate() {
        if matches!(s.kind, Kind::Terminate) {
            if restart {
                p[i][a.init] = 1.0;
            }
            continue;
        }
        for e in s.next.iter().filter(|e| e.guard.is_none()) {
            p[i][e.to] += e.p;
        }
    }
    p
}

/// Expected visits to each state in one run from init to terminate, or
/// None if terminate is not reached with probability 1.
fn visits_to_end(a: &Automaton) -> Option<Vec<f64>> {
    let n = a.states.len();
    let p = matrix(a, false);
    // v = e_init + v P over the transient states, i.e. (I − Pᵀ) v = e_init;
    // terminate states have no outgoing edges, so they absorb.
    let mut m = vec![vec![0.0; n]; n];
    for (i, row) in m.iter_mut().enumerate() {
        for (j, x) in row.iter_mut().enumerate() {
            *x = if i == j { 1.0 } else { 0.0 } - p[j][i];
        }
    }
    let mut b = vec![0.0; n];
    b[a.init] = 1.0;
    let v = solve(m, b)?;
    // Probability of ending: mass flowing into terminate states.
    let ended: f64 = a
        .states
        .iter()
        .enumerate()
        .filter(|(_, s)| matches!(s.kind, Kind::Terminate))
        .map(|(i, _)| v[i])
        .sum();
    if v.iter().any(|x| !x.is_finite() || *x < -1e-9) || (ended - 1.0).abs() > 1e-6 {
        return None;
    }
    Some(v)
}

/// Stationary distribution of the automaton with terminate → init.
fn stationary(a: &Automaton) -> Option<Vec<f64>> {
    let n = a.states.len();
    let p = matrix(a, true);
    // πᵀ (P − I) = 0 with one equation replaced by Σ π = 1.
    let mut m = vec![vec![0.0; n]; n];
    for (i, row) in m.iter_mut().enumerate() {
        for (j, x) in row.iter_mut().enumerate() {
            *x = p[j][i] - if i == j { 1.0 } else { 0.0 };
        }
    }
    m[n - 1] = vec![1.0; n];
    let mut b = vec![0.0; n];
    b[n - 1] = 1.0;
    solve(m, b)
}

fn costs(model: &Model, a: usize, memo: &mut Vec<Option<(f64, f64, f64)>>) -> Result<Costs, String> {
    let auto = &model.automata[a];
    let mut c = Costs { time_ns: vec![], requests: vec![], bytes: vec![] };
    for s in &auto.states {
        let (t, r, b) = match &s.kind {
            Kind::Init | Kind::Terminate => (0.0, 0.0, 0.0),
            Kind::Delay { sampler, scale_ns, .. } => {
                let m = sampler
                    .sampler
                    .mean()
                    .map_err(|e| format!("automata.{}.states.{}.delay: {e}", auto.name, s.name))?;
                (m * scale_ns, 0.0, 0.0)
            }
            Kind::Request { template } => {
                let t = &model.requests[*template];
                let m = t.sampler.sampler.mean().map_err(|e| format!("requests.{}.size: {e}", t.name))?;
                (0.0, 1.0, m.round().min(f64::from(crate::model::MAX_SIZE)))
            }
            Kind::Macro { automaton } => run_costs(model, *automaton, memo)
                .map_err(|e| format!("automata.{}.states.{}: {e}", auto.name, s.name))?,
        };
        c.time_ns.push(t);
        c.requests.push(r);
        c.bytes.push(b);
    }
    Ok(c)
}

/// Mean (time, requests, bytes) of one run of automaton `a` to terminate.
fn run_costs(
    model: &Model,
    a: usize,
    memo: &mut Vec<Option<(f64, f64, f64)>>,
) -> Result<(f64, f64, f64), String> {
    if let Some(x) = memo[a] {
        return Ok(x);
    }
    let auto = &model.automata[a];
    let v = visits_to_end(auto)
        .ok_or_else(|| format!("automaton {} does not reach terminate with probability 1", auto.name))?;
    let c = costs(model, a, memo)?;
    let dot = |x: &[f64]| v.iter().zip(x).map(|(a, b)| a * b).sum::<f64>();
    let out = (dot(&c.time_ns), dot(&c.requests), dot(&c.bytes));
    memo[a] = Some(out);
    Ok(out)
}

/// The model's analytic expectations.
pub fn predict(model: &Model) -> Result<Prediction, String> {
    let mut memo = vec![None; model.automata.len()];
    let mut groups = Vec::new();
    let (mut rate, mut bytes) = (0.0, 0.0);
    for u in &model.users {
        let auto = &model.automata[u.automaton];
        let c = costs(model, u.automaton, &mut memo)?;
        let pi = stationary(auto).ok_or_else(|| {
            format!("automaton {}: the chain has no single stationary distribution (states that cannot reach each other?)", auto.name)
        })?;
        let dot = |x: &[f64]| pi.iter().zip(x).map(|(a, b)| a * b).sum::<f64>();
        let (t, r, b) = (dot(&c.time_ns), dot(&c.requests), dot(&c.bytes));
        let one = if r == 0.0 {
            0.0
        } else if t <= 0.0 {
            f64::INFINITY
        } else {
            r / t * 1e9
        };
        let bps = if r == 0.0 {
            0.0
        } else if t <= 0.0 {
            f64::INFINITY
        } else {
            b / t * 1e9
        };
        let requests_per_run =
            visits_to_end(auto).map(|v| v.iter().zip(&c.requests).map(|(a, b)| a * b).sum());
        rate += one * f64::from(u.count);
        bytes += bps * f64::from(u.count);
        groups.push(GroupPrediction {
            automaton: auto.name.clone(),
            count: u.count,
            rate_per_s: one,
            requests_per_run,
        });
    }
    let mean_size = if rate.is_finite() && rate > 0.0 {
        bytes / rate
    } else {
        // Zero-delay models: the size mean still follows from the chain.
        let mut num = 0.0;
        let mut den = 0.0;
        for u in &model.users {
            let c = costs(model, u.automaton, &mut memo)?;
            if let Some(pi) = stationary(&model.automata[u.automaton]) {
                num += pi.iter().zip(&c.bytes).map(|(a, b)| a * b).sum::<f64>() * f64::from(u.count);
                den += pi.iter().zip(&c.requests).map(|(a, b)| a * b).sum::<f64>() * f64::from(u.count);
            }
        }
        if den > 0.0 { num / den } else { 0.0 }
    };
    Ok(Prediction {
        rate_per_s: rate,
        mean_size,
        bytes_per_s: bytes,
        groups,
        note: model.guarded.then(|| {
            "the model has guarded transitions; the analytic figures assume no guard fires".to_string()
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn constant_rate_is_one_over_the_gap() {
        let p = predict(&Model::constant(10_000, 64)).unwrap();
        assert!((p.rate_per_s - 100_000.0).abs() < 1e-6, "{}", p.rate_per_s);
        assert!((p.mean_size - 64.0).abs() < 1e-9);
        assert!(predict(&Model::constant(0, 64)).unwrap().rate_per_s.is_infinite());
    }

    #[test]
    fn the_seed_example_runs_at_one_request_per_delay() {
        let m = Model::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../../models/uniloG-example.toml"))
            .unwrap();
        let p = predict(&m).unwrap();
        // One 10 µs delay per request: 100,000/s; 10,000 requests per run.
        assert!((p.rate_per_s - 100_000.0).abs() / 100_000.0 < 1e-6, "{}", p.rate_per_s);
        let r = p.groups[0].requests_per_run.unwrap();
        assert!((r - 10_000.0).abs() < 1e-3, "{r}");
    }
}
