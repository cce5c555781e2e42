//! GAR, the generator of abstract requests (seed 001): walks every virtual
//! user's automaton and hands out requests in order of their specified
//! time t_i. It never looks at a clock: time here is the model's own, in
//! nanoseconds from the start of the run; the scheduler maps it onto the
//! wall clock.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use xk_rand::Rng;

use crate::model::{Kind, MAX_SIZE, Model};

/// An abstract request: what to send and when.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Request {
    /// Specified execution time, ns from the start of the run.
    pub t_ns: u64,
    /// Sequence number in the run (0, 1, …), in order of `t_ns`.
    pub seq: u64,
    /// Payload size, bytes.
    pub size: u32,
    /// Which virtual user.
    pub user: u32,
    /// Template index ([`Model::requests`]).
    pub template: u16,
}

/// Most state changes one request may take: a loop of delays and macro
/// states that never reaches a request would otherwise hang the walk.
const MAX_STEPS: u32 = 1_000_000;

/// One virtual user walking its automaton.
#[derive(Clone, Debug)]
struct Walker {
    user: u32,
    top: usize,
    restart: bool,
    rng: Rng,
    vars: Vec<i64>,
    trace: Vec<usize>,
    /// Stack of (automaton, state); the last is the current state.
    stack: Vec<(usize, usize)>,
    /// Whether the current state has acted (entered) already.
    acted: bool,
    t_ns: f64,
}

impl Walker {
    fn new(model: &Model, user: u32, top: usize, restart: bool, rng: Rng) -> Walker {
        let mut w = Walker {
            user,
            top,
            restart,
            rng,
            vars: Vec::new(),
            trace: vec![0; model.slots],
            stack: Vec::new(),
            acted: false,
            t_ns: 0.0,
        };
        w.begin(model);
        w
    }

    fn begin(&mut self, model: &Model) {
        self.vars = model.vars.iter().map(|(_, v)| *v).collect();
        self.stack.clear();
        self.stack.push((self.top, model.automata[self.top].init));
        self.acted = false;
    }

    /// Walks to the next request: Ok(Some) with its time, size and
    /// template; Ok(None) when the user terminated for good.
    fn advance(&mut self, model: &Model) -> Result<Option<(u64, u32, u16)>, String> {
        for _ in 0..MAX_STEPS {
            let &(a, s) = self.stack.last().expect("a walker always has a state");
            let state = &model.automata[a].states[s];
            if !self.acted {
                self.acted = true;
                for &(v, x) in &state.set {
                    self.vars[v] = x;
                }
                for &(v, x) in &state.add {
                    self.vars[v] = self.vars[v].saturating_add(x);
                }
                match &state.kind {
                    Kind::Init => {}
                    Kind::Delay { sampler, scale_ns, .. } => {
                        let d =
                            sampler.sampler.sample(&mut self.rng, &mut self.trace[sampler.slot], &self.vars);
                        self.t_ns += d * scale_ns;
                    }
                    Kind::Request { template } => {
                        let t = &model.requests[*template].sampler;
                        let size = t.sampler.sample(&mut self.rng, &mut self.trace[t.slot], &self.vars);
                        // Half up by adding ½ and truncating: `f64::round` is a
                        // libm call on baseline x86-64 (no SSE4.1), 5 % of the
                        // null adapter's time per request. Sizes are never
                        // negative; a negative draw saturates to 0 as before.
                        let size = ((size + 0.5) as u64).min(u64::from(MAX_SIZE)) as u32;
                        return Ok(Some((self.t_ns as u64, size, *template as u16)));
                    }
                    Kind::Terminate => {
                        self.stack.pop();
                        if self.stack.is_empty() {
                            if !self.restart {
                                return Ok(None);
                            }
                            self.begin(model);
                        }
                        // Back in the macro state, which now leaves by its
                        // own transitions (it has acted: it was entered).
                        continue;
                    }
                    Kind::Macro { automaton } => {
                        self.stack.push((*automaton, model.automata[*automaton].init));
                        self.acted = false;
                        continue;
                    }
                }
            }
            // Leave the current state.
            let next = self.choose(&state.next);
            let top = self.stack.last_mut().expect("present");
            top.1 = next;
            self.acted = false;
        }
        Err(format!(
            "user {} took {MAX_STEPS} steps without a request (a loop of delays or macro states without requests?)",
            self.user
        ))
    }

    #[inline]
    fn choose(&mut self, next: &[crate::model::Edge]) -> usize {
        for e in next {
            match e.guard {
                Some(g) => {
                    if g.holds(&self.vars) && self.rng.chance(e.p) {
                        return e.to;
                    }
                }
                None => break,
            }
        }
        let unguarded = &next[next.iter().position(|e| e.guard.is_none()).unwrap_or(0)..];
        if let [only] = unguarded {
            return only.to;
        }
        let u = self.rng.unit();
        unguarded.iter().find(|e| u < e.cum).unwrap_or(&unguarded[unguarded.len() - 1]).to
    }
}

/// The generator: all users merged in order of specified time.
pub struct Gar {
    model: Model,
    walkers: Vec<Walker>,
    /// (time of the user's next request, walker) for every active walker
    /// but the one whose request is in `pending` order.
    heap: BinaryHeap<Reverse<(u64, usize)>>,
    pending: Vec<Option<(u64, u32, u16)>>,
    seq: u64,
    error: Option<String>,
}

impl Gar {
    /// A generator for `model`; user i's random stream is derived from
    /// `seed` and its index, so adding users does not change the others.
    pub fn new(model: Model, seed: u64) -> Gar {
        let mut walkers = Vec::new();
        let mut user = 0u32;
        for g in &model.users {
            for _ in 0..g.count {
                let rng = Rng::derive(seed, &format!("loadgen-user-{user}"));
                walkers.push(Walker::new(&model, user, g.automaton, g.restart, rng));
                user += 1;
            }
        }
        let mut gar = Gar {
            model,
            heap: BinaryHeap::new(),
            pending: vec![None; walkers.len()],
            walkers,
            seq: 0,
            error: None,
        };
        for i in 0..gar.walkers.len() {
            gar.refill(i);
        }
        gar
    }

    fn refill(&mut self, i: usize) {
        match self.walkers[i].advance(&self.model) {
            Ok(Some(r)) => {
                self.pending[i] = Some(r);
                self.heap.push(Reverse((r.0, i)));
            }
            Ok(None) => self.pending[i] = None,
            Err(e) => {
                self.pending[i] = None;
                self.error.get_or_insert(e);
            }
        }
    }

    /// The model.
    pub fn model(&self) -> &Model {
        &self.model
    }

    /// Why the walk stopped early, if it did.
    pub fn error(&self) -> Option<&str> {
        self.error.as_deref()
    }

    /// The next request in time order; None when every user terminated.
    #[inline]
    pub fn next_request(&mut self) -> Option<Request> {
        let (t, size, template, user) = if self.walkers.len() == 1 {
            // One user: no merging needed.
            let (t, size, template) = self.pending[0].take()?;
            let user = self.walkers[0].user;
            match self.walkers[0].advance(&self.model) {
                Ok(next) => self.pending[0] = next,
                Err(e) => {
                    self.error.get_or_insert(e);
                }
            }
            (t, size, template, user)
        } else {
            let Reverse((_, i)) = self.heap.pop()?;
            let (t, size, template) = self.pending[i].take().expect("queued walkers have a request");
            let user = self.walkers[i].user;
            self.refill(i);
            (t, size, template, user)
        };
        let seq = self.seq;
        self.seq += 1;
        Some(Request { t_ns: t, seq, size, user, template })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn model(name: &str) -> Model {
        Model::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../../models").join(name)).unwrap()
    }

    /// The walk's rate matches the analytic one, for every bundled model
    /// whose walk is long enough to average.
    #[test]
    fn simulated_rate_matches_the_analytic_rate() {
        for name in ["uniloG-example.toml", "cbr.toml", "poisson.toml", "onoff.toml", "web-session.toml"] {
            let m = model(name);
            let p = crate::analytic::predict(&m).unwrap();
            let users = m.user_count() as f64;
            let mut g = Gar::new(m, 7);
            let mut n = 0u64;
            let mut last = 0;
            let mut bytes = 0u64;
            while let Some(r) = g.next_request() {
                assert!(r.t_ns >= last, "{name}: out of order");
                last = r.t_ns;
                n += 1;
                bytes += u64::from(r.size);
                if n == 400_000 {
                    break;
                }
            }
            assert!(g.error().is_none());
            let rate = n as f64 / (last as f64 / 1e9);
            // The example ends after ~10,000 requests: it stops early and its
            // rate is measured over its life only.
            let tol = if name == "onoff.toml" || name == "web-session.toml" { 0.08 } else { 0.03 };
            assert!(
                (rate - p.rate_per_s).abs() / p.rate_per_s < tol,
                "{name}: walked {rate}/s, predicted {}/s ({users} users, {n} requests)",
                p.rate_per_s
            );
            let size = bytes as f64 / n as f64;
            assert!(
                (size - p.mean_size).abs() / p.mean_size < 0.05,
                "{name}: size {size}, predicted {}",
                p.mean_size
            );
        }
    }

    #[test]
    fn same_seed_same_requests() {
        let a: Vec<Request> = {
            let mut g = Gar::new(model("poisson.toml"), 1);
            (0..1000).map(|_| g.next_request().unwrap()).collect()
        };
        let b: Vec<Request> = {
            let mut g = Gar::new(model("poisson.toml"), 1);
            (0..1000).map(|_| g.next_request().unwrap()).collect()
        };
        assert_eq!(a, b);
        let mut g = Gar::new(model("poisson.toml"), 2);
        assert_ne!(a[10], g.nth(10));
    }

    #[test]
    fn the_example_terminates() {
        let mut g = Gar::new(model("uniloG-example.toml"), 3);
        let mut n = 0;
        while g.next_request().is_some() {
            n += 1;
            assert!(n < 1_000_000);
        }
        assert!(n > 0);
    }

    #[test]
    fn guards_end_sessions() {
        let mut g = Gar::new(model("web-session.toml"), 5);
        for _ in 0..10_000 {
            g.next_request().unwrap();
        }
        let pages = &g.walkers[0].vars;
        assert!(pages[0] <= 20, "{pages:?}");
    }

    impl Gar {
        fn nth(&mut self, n: usize) -> Request {
            for _ in 0..n {
                self.next_request();
            }
            self.next_request().unwrap()
        }
    }
}
