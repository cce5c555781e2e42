//! Where E8's calibration threads run: left to the scheduler, or fixed as
//! seed 004's architecture had it — the applications on one processor,
//! the protocol processors (here the engine threads) on another.
//!
//! Session 15's placement probe found a doorbell's host cost bimodal by
//! placement (a wake-up within one CPU 3.0–4.0 µs, across CPUs 7.7–9.3 µs,
//! ping-pong), and which of the two an operation pays changes from run to
//! run when the scheduler chooses.
//! `Split` makes every wake-up between an application and its engine
//! cross CPUs, always; `Hosts` keeps every such wake-up on one CPU (each
//! side of the transfer a host of its own); `Free` is the scheduler's
//! choice; `HostsFree` is `Hosts` for the ping-pong and the synchronous
//! sends and `Free` for the pipelined windows. Every thread
//! pinned gets its mask back when the [`Pinned`] guard is released or
//! dropped (`crate::affinity`): other experiments of the report run on
//! the runner thread afterwards, and the echo's and sink's threads stay
//! alive, idle, until E8 ends.

use serde::{Deserialize, Serialize};

use crate::affinity::{Affinity, usable_cpus};

/// E8's calibration threads' placement (plan option `placement`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Placement {
    /// The scheduler places every thread (no affinity set).
    Free,
    /// The application threads (the measuring one, the echo's and the
    /// sink's) on the first CPU this process may use, the engine threads
    /// (the "protocol processors") on the second.
    Split,
    /// Each side a host of its own: the measuring application and its
    /// engine threads on the first CPU, the peers (the echo's and the
    /// sink's applications and engines) on the second — every wake-up
    /// between an application and its engine stays on one CPU.
    Hosts,
    /// `Hosts` for the ping-pong and the synchronous sends (their host
    /// times and wake-ups are then of one kind, not a mix of within-CPU
    /// and across-CPU wake-ups whose share changes from round to round),
    /// `Free` for the pipelined windows (the transfer runs as it would
    /// unpinned, its work spread over the cores as the scheduler puts it).
    /// τ_a's check is close to an identity either way — pinned, the busier
    /// CPU's work restates the period; free, /proc/stat's accounting makes
    /// U + I + the rest of the machine the cores' time, so (U + I)/cores
    /// is the period less the rest's small share — and is no test of the
    /// model under either. On a machine with one CPU it runs as `Free`,
    /// and the rows say so.
    #[default]
    HostsFree,
}

impl Placement {
    /// As written in a plan.
    pub fn name(self) -> &'static str {
        match self {
            Placement::Free => "free",
            Placement::Split => "split",
            Placement::Hosts => "hosts",
            Placement::HostsFree => "hosts_free",
        }
    }

    /// How the report names it.
    pub fn label(self) -> &'static str {
        match self {
            Placement::Free => "free (the scheduler places every thread)",
            Placement::Split => {
                "split (the applications on one CPU, the engine threads on the other, sched_setaffinity)"
            }
            Placement::Hosts => {
                "hosts (the measuring application and its engines on one CPU, the peers and theirs on the other, sched_setaffinity)"
            }
            Placement::HostsFree => {
                "hosts_free (the ping-pong and the synchronous sends as hosts — the measuring application and its engines on one CPU, the peers and theirs on the other, sched_setaffinity — and the pipelined windows free)"
            }
        }
    }

    /// The placement of the ping-pong and the synchronous sends.
    pub(crate) fn for_rounds(self) -> Placement {
        if self == Placement::HostsFree { Placement::Hosts } else { self }
    }

    /// The placement of the pipelined windows.
    pub(crate) fn for_stream(self) -> Placement {
        if self == Placement::HostsFree { Placement::Free } else { self }
    }

    /// The placement a sweep applies here: `HostsFree`, the default, runs
    /// as `Free` on fewer than two CPUs (a fixed placement a plan names is
    /// refused there instead, by [`Pinned::apply`]).
    pub(crate) fn here(self) -> Placement {
        let two = usable_cpus().is_ok_and(|c| c.len() >= 2);
        if self == Placement::HostsFree && !two { Placement::Free } else { self }
    }
}

/// The threads' affinities set for part of a calibration sweep; released
/// or dropped, every thread pinned gets its former mask back.
pub(crate) struct Pinned {
    guard: Affinity,
}

impl Pinned {
    /// Applies a fixed placement: the calling thread and `first` on one
    /// CPU, `second` on another (thread ids; `Free` sets nothing). Needs
    /// two CPUs and every thread's id; the error names the plan's field
    /// with the value the plan gave (`plan`: `hosts_free` applies `hosts`
    /// for part of the sweep, and the reader wrote `hosts_free`).
    pub(crate) fn apply(
        placement: Placement,
        plan: Placement,
        first: &[Option<&String>],
        second: &[Option<&String>],
    ) -> Result<Pinned, String> {
        let mut guard = Affinity::default();
        if placement == Placement::Free {
            return Ok(Pinned { guard });
        }
        let field = format!("E8.placement = \"{}\"", plan.name());
        let cpus = usable_cpus().map_err(|e| format!("{field}: {e}"))?;
        if cpus.len() < 2 {
            return Err(format!(
                "{field}: needs two CPUs, this thread may use {} (use placement = \"free\")",
                cpus.len()
            ));
        }
        let tid = |t: Option<&String>| {
            t.and_then(|t| t.parse::<i32>().ok())
                .ok_or_else(|| format!("{field}: a calibration thread's id is unknown"))
        };
        let err = |e: nix::Error| format!("{field}: sched_setaffinity: {e}");
        // Every id first, so that an unknown one pins nothing.
        let first: Vec<i32> = first.iter().map(|&t| tid(t)).collect::<Result<_, _>>()?;
        let second: Vec<i32> = second.iter().map(|&t| tid(t)).collect::<Result<_, _>>()?;
        guard.pin(0, cpus[0]).map_err(err)?;
        for &t in &first {
            guard.pin(t, cpus[0]).map_err(err)?;
        }
        for &t in &second {
            guard.pin(t, cpus[1]).map_err(err)?;
        }
        Ok(Pinned { guard })
    }

    /// Gives every pinned thread its former mask back now.
    pub(crate) fn release(&mut self) {
        self.guard.release();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nix::sched::{CpuSet, sched_getaffinity};
    use nix::unistd::Pid;

    /// On one CPU (this thread pinned to one first, so that the branch
    /// runs on any machine) the default runs free and a fixed placement
    /// is refused by name; the thread's mask comes back after.
    #[test]
    fn one_cpu_runs_free_and_refuses_a_fixed_placement() {
        let before = sched_getaffinity(Pid::from_raw(0)).unwrap();
        let mut one = Affinity::default();
        one.pin(0, usable_cpus().unwrap()[0]).unwrap();
        assert_eq!(usable_cpus().unwrap().len(), 1);
        assert_eq!(Placement::HostsFree.here(), Placement::Free);
        assert_eq!(Placement::Split.here(), Placement::Split);
        let e = Pinned::apply(Placement::Split, Placement::Split, &[], &[]).err().unwrap();
        assert!(e.contains("E8.placement = \"split\": needs two CPUs, this thread may use 1"), "{e}");
        one.release();
        assert_eq!(sched_getaffinity(Pid::from_raw(0)).unwrap(), before);
    }

    /// Split pins a thread to one CPU and, released, gives it and the
    /// caller their masks back; an error names the plan's value.
    #[test]
    fn split_pins_and_restores() {
        let before = sched_getaffinity(Pid::from_raw(0)).unwrap();
        if usable_cpus().unwrap().len() < 2 {
            // The one-CPU case is tested by pinning, above.
            return;
        }
        assert_eq!(Placement::HostsFree.here(), Placement::HostsFree);
        let (tx, rx) = std::sync::mpsc::channel();
        let (stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();
        let t = std::thread::Builder::new()
            .name("e8-place-test".into())
            .spawn(move || {
                tx.send(()).unwrap();
                let _ = stop_rx.recv();
            })
            .unwrap();
        rx.recv().unwrap();
        let tid = crate::e8_measure::threads_named("e8-place-test").into_iter().next().unwrap();
        let pid = Pid::from_raw(tid.parse().unwrap());
        let theirs = sched_getaffinity(pid).unwrap();
        let set = |s: &CpuSet| (0..CpuSet::count()).filter(|&c| s.is_set(c).unwrap()).collect::<Vec<_>>();
        let mut g = Pinned::apply(Placement::Split, Placement::Split, &[], &[Some(&tid)]).unwrap();
        let me = sched_getaffinity(Pid::from_raw(0)).unwrap();
        let it = sched_getaffinity(pid).unwrap();
        assert_eq!(set(&me).len(), 1);
        assert_eq!(set(&it).len(), 1);
        assert_ne!(set(&me), set(&it));
        g.release();
        // Both back, the other thread too (it outlives the sweep).
        assert_eq!(sched_getaffinity(Pid::from_raw(0)).unwrap(), before);
        assert_eq!(sched_getaffinity(pid).unwrap(), theirs);
        // Dropping does the same.
        drop(Pinned::apply(Placement::Hosts, Placement::Hosts, &[Some(&tid)], &[]).unwrap());
        assert_eq!(sched_getaffinity(pid).unwrap(), theirs);
        assert_eq!(sched_getaffinity(Pid::from_raw(0)).unwrap(), before);
        let e = Pinned::apply(Placement::Split, Placement::Split, &[None], &[]).err().unwrap();
        assert!(e.starts_with("E8.placement = \"split\""), "{e}");
        // Under the default, the part pinned as hosts names the plan's
        // value, not the one applied.
        let e = Pinned::apply(Placement::Hosts, Placement::HostsFree, &[None], &[]).err().unwrap();
        assert!(e.starts_with("E8.placement = \"hosts_free\": "), "{e}");
        assert_eq!(sched_getaffinity(Pid::from_raw(0)).unwrap(), before);
        drop(stop_tx);
        t.join().unwrap();
    }

    #[test]
    fn hosts_free_is_hosts_then_free() {
        assert_eq!(Placement::default(), Placement::HostsFree);
        assert_eq!(Placement::HostsFree.for_rounds(), Placement::Hosts);
        assert_eq!(Placement::HostsFree.for_stream(), Placement::Free);
        for p in [Placement::Free, Placement::Split, Placement::Hosts] {
            assert_eq!((p.for_rounds(), p.for_stream()), (p, p));
        }
        let back: Placement = serde_json::from_str("\"hosts_free\"").unwrap();
        assert_eq!(back, Placement::HostsFree);
    }
}
