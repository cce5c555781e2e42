//! Where threads run, for the experiments that fix it (E8's calibration
//! placements, E10's UDP rows): the one copy of pinning a thread to a CPU
//! and of giving every pinned thread its former mask back.
//!
//! A pinned thread that outlives its step would keep its CPU for the rest
//! of the report (the next experiments' scheduling would depend on which
//! ran before), so every pin goes through an [`Affinity`] guard that
//! restores each thread's mask when it is released or dropped.

use nix::sched::{CpuSet, sched_getaffinity, sched_setaffinity};
use nix::unistd::Pid;

/// The CPUs the calling thread may use, in order.
pub(crate) fn usable_cpus() -> Result<Vec<usize>, String> {
    let mine = sched_getaffinity(Pid::from_raw(0)).map_err(|e| format!("sched_getaffinity: {e}"))?;
    Ok((0..CpuSet::count()).filter(|&c| mine.is_set(c).unwrap_or(false)).collect())
}

fn one(cpu: usize) -> nix::Result<CpuSet> {
    let mut s = CpuSet::new();
    s.set(cpu)?;
    Ok(s)
}

/// Pins the calling thread to `cpu` (for threads that end with the step
/// they serve; anything that outlives it goes through [`Affinity`]).
pub(crate) fn pin_self(cpu: usize) -> nix::Result<()> {
    sched_setaffinity(Pid::from_raw(0), &one(cpu)?)
}

/// Threads pinned, each with the mask it had before; released (every mask
/// put back, best effort) by [`Affinity::release`] or on drop.
#[derive(Default)]
pub(crate) struct Affinity {
    restore: Vec<(Pid, CpuSet)>,
}

impl Affinity {
    /// Pins thread `tid` (0: the calling thread) to `cpu`, remembering
    /// its mask the first time it is pinned. The calling thread is
    /// remembered by its own id, not 0: a guard released or dropped on
    /// another thread must restore the thread it pinned, not its releaser.
    pub(crate) fn pin(&mut self, tid: i32, cpu: usize) -> nix::Result<()> {
        let pid = if tid == 0 { nix::unistd::gettid() } else { Pid::from_raw(tid) };
        if !self.restore.iter().any(|r| r.0 == pid) {
            self.restore.push((pid, sched_getaffinity(pid)?));
        }
        sched_setaffinity(pid, &one(cpu)?)
    }

    /// Gives every pinned thread its former mask back. Best effort: a
    /// thread that has ended cannot be restored and needs not be, and a
    /// failure leaves a thread on one CPU, which slows what runs after it
    /// but breaks nothing.
    pub(crate) fn release(&mut self) {
        for (pid, set) in self.restore.drain(..).rev() {
            let _ = sched_setaffinity(pid, &set);
        }
    }
}

impl Drop for Affinity {
    fn drop(&mut self) {
        self.release();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pinning another thread and the caller, then releasing, gives both
    /// their masks back.
    #[test]
    fn release_restores_every_pinned_thread() {
        let cpus = usable_cpus().unwrap();
        let before = sched_getaffinity(Pid::from_raw(0)).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let (stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();
        let t = std::thread::spawn(move || {
            tx.send(nix::unistd::gettid().as_raw()).unwrap();
            let _ = stop_rx.recv();
        });
        let tid = rx.recv().unwrap();
        let theirs = sched_getaffinity(Pid::from_raw(tid)).unwrap();
        let cpu = *cpus.last().unwrap();
        let mut a = Affinity::default();
        a.pin(0, cpu).unwrap();
        a.pin(tid, cpu).unwrap();
        a.pin(tid, cpu).unwrap();
        assert_eq!(sched_getaffinity(Pid::from_raw(tid)).unwrap(), one(cpu).unwrap());
        assert_eq!(sched_getaffinity(Pid::from_raw(0)).unwrap(), one(cpu).unwrap());
        a.release();
        assert!(a.restore.is_empty());
        assert_eq!(sched_getaffinity(Pid::from_raw(0)).unwrap(), before);
        assert_eq!(sched_getaffinity(Pid::from_raw(tid)).unwrap(), theirs);
        drop(stop_tx);
        t.join().unwrap();
    }

    /// A thread that pins itself (tid 0) and hands the guard to another
    /// gets its own mask back when that other thread releases it; the
    /// releaser's mask is left alone.
    #[test]
    fn release_on_another_thread_restores_the_pinned_one() {
        let cpus = usable_cpus().unwrap();
        let mine = sched_getaffinity(Pid::from_raw(0)).unwrap();
        let cpu = *cpus.last().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let (stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();
        let t = std::thread::spawn(move || {
            let theirs = sched_getaffinity(Pid::from_raw(0)).unwrap();
            let mut a = Affinity::default();
            a.pin(0, cpu).unwrap();
            tx.send((nix::unistd::gettid().as_raw(), theirs, a)).unwrap();
            let _ = stop_rx.recv();
        });
        let (tid, theirs, mut a) = rx.recv().unwrap();
        assert_eq!(sched_getaffinity(Pid::from_raw(tid)).unwrap(), one(cpu).unwrap());
        a.release();
        assert_eq!(sched_getaffinity(Pid::from_raw(tid)).unwrap(), theirs);
        assert_eq!(sched_getaffinity(Pid::from_raw(0)).unwrap(), mine);
        drop(stop_tx);
        t.join().unwrap();
    }
}
