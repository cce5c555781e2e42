//! Where E8's calibration threads run: left to the scheduler, or fixed as
//! seed 004's architecture had it — the applications on one processor,
//! the protocol processors (here the engine threads) on another.
//!
//! Session 15's placement probe found a doorbell's host cost bimodal by
//! placement (a wake-up within one CPU 3.0–4.0 µs, across CPUs 7.7–9.3 µs,
//! ping-pong), and which of the two an operation pays changes from run to
//! run when the scheduler chooses. `Split` makes every wake-up between an
//! application and its engine cross CPUs, always; `Hosts` keeps every such
//! wake-up on one CPU (each side of the transfer a host of its own);
//! `Free` is the scheduler's choice. The calling (runner) thread's own affinity is put
//! back when the [`Pinned`] guard is dropped: other experiments of the
//! report run on that thread afterwards.

use nix::sched::{CpuSet, sched_getaffinity, sched_setaffinity};
use nix::unistd::Pid;
use serde::{Deserialize, Serialize};

/// E8's calibration threads' placement (plan option `placement`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Placement {
    /// The scheduler places every thread (no affinity set).
    #[default]
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
}

impl Placement {
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
        }
    }
}

/// The threads' affinities set for a calibration sweep; dropping it gives
/// the calling thread its affinity back (the other threads end with the
/// sweep or belong to it).
pub(crate) struct Pinned {
    restore: Option<CpuSet>,
}

impl Pinned {
    /// Applies a fixed placement: the calling thread and `first` on one
    /// CPU, `second` on another (thread ids; `Free` sets nothing). Needs
    /// two CPUs and every thread's id.
    pub(crate) fn apply(
        placement: Placement,
        first: &[Option<&String>],
        second: &[Option<&String>],
    ) -> Result<Pinned, String> {
        if placement == Placement::Free {
            return Ok(Pinned { restore: None });
        }
        let err = |e: nix::Error| format!("E8 placement {placement:?}: {e}");
        let mine = sched_getaffinity(Pid::from_raw(0)).map_err(err)?;
        let cpus: Vec<usize> = (0..CpuSet::count()).filter(|&c| mine.is_set(c).unwrap_or(false)).collect();
        if cpus.len() < 2 {
            return Err(format!(
                "E8 placement {placement:?}: needs two CPUs, this thread may use {} (use placement = \"free\")",
                cpus.len()
            ));
        }
        let one = |cpu: usize| {
            let mut s = CpuSet::new();
            s.set(cpu).map(|()| s)
        };
        let (a, b) = (one(cpus[0]).map_err(err)?, one(cpus[1]).map_err(err)?);
        let tid = |t: Option<&String>| {
            t.and_then(|t| t.parse::<i32>().ok())
                .map(Pid::from_raw)
                .ok_or_else(|| format!("E8 placement {placement:?}: a calibration thread's id is unknown"))
        };
        let guard = Pinned { restore: Some(mine) };
        sched_setaffinity(Pid::from_raw(0), &a).map_err(err)?;
        for &t in first {
            sched_setaffinity(tid(t)?, &a).map_err(err)?;
        }
        for &t in second {
            sched_setaffinity(tid(t)?, &b).map_err(err)?;
        }
        Ok(guard)
    }
}

impl Drop for Pinned {
    fn drop(&mut self) {
        if let Some(s) = self.restore.take() {
            // Best effort: failing leaves the runner on one CPU, which
            // slows the report's later experiments but breaks nothing.
            let _ = sched_setaffinity(Pid::from_raw(0), &s);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Split pins a thread to one CPU and gives the caller its mask back.
    #[test]
    fn split_pins_and_restores() {
        let before = sched_getaffinity(Pid::from_raw(0)).unwrap();
        let n = (0..CpuSet::count()).filter(|&c| before.is_set(c).unwrap()).count();
        if n < 2 {
            assert!(Pinned::apply(Placement::Split, &[], &[]).is_err());
            return;
        }
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
        {
            let _g = Pinned::apply(Placement::Split, &[], &[Some(&tid)]).unwrap();
            let me = sched_getaffinity(Pid::from_raw(0)).unwrap();
            let it = sched_getaffinity(Pid::from_raw(tid.parse().unwrap())).unwrap();
            let set = |s: &CpuSet| (0..CpuSet::count()).filter(|&c| s.is_set(c).unwrap()).collect::<Vec<_>>();
            assert_eq!(set(&me).len(), 1);
            assert_eq!(set(&it).len(), 1);
            assert_ne!(set(&me), set(&it));
        }
        assert_eq!(sched_getaffinity(Pid::from_raw(0)).unwrap(), before);
        assert!(Pinned::apply(Placement::Split, &[None], &[]).is_err());
        assert_eq!(sched_getaffinity(Pid::from_raw(0)).unwrap(), before);
        drop(stop_tx);
        t.join().unwrap();
    }
}
