//! One progress line per report step: step k of n, elapsed time, and an
//! estimate of the time left from the average step so far. Knows about the
//! Ctrl-C flag: a step does not start once it is set.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

pub(crate) struct Progress {
    total: usize,
    done: usize,
    start: Instant,
    stop: Arc<AtomicBool>,
}

impl Progress {
    pub(crate) fn new(total: usize, stop: Arc<AtomicBool>) -> Self {
        Progress { total, done: 0, start: Instant::now(), stop }
    }

    pub(crate) fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// Announces the next step; false (and nothing printed) after Ctrl-C.
    pub(crate) fn step(&mut self, label: &str) -> bool {
        if self.stopped() {
            return false;
        }
        self.step_unchecked(label);
        true
    }

    /// Announces a step that runs whatever happens (inside a batch).
    pub(crate) fn step_unchecked(&mut self, label: &str) {
        let elapsed = self.start.elapsed().as_secs_f64();
        let left = if self.done == 0 {
            String::new()
        } else {
            let per = elapsed / self.done as f64;
            format!(", about {:.0} s left", per * (self.total.saturating_sub(self.done)) as f64)
        };
        self.done += 1;
        let width = 20;
        let filled = (self.done * width / self.total.max(1)).min(width);
        eprintln!(
            "  [{}{}] {:>2}/{} {label} ({elapsed:.0} s{left})",
            "#".repeat(filled),
            ".".repeat(width - filled),
            self.done,
            self.total
        );
    }
}
