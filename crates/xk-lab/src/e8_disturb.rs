//! The operating system's disturbances of one measured operation (issue
//! #18, item 3; seed 000's PATO filtered them out of its evaluation):
//! preemption (an involuntary context switch), page faults (minor and
//! major) and a migration to another CPU, each read on the measuring
//! thread just before and just after the operation.
//!
//! An operation during which any of them changed is *disturbed*: E8 keeps
//! it out of the profile statistics and counts it per cause instead, so a
//! preempted round trip neither inflates a median nor hides in an average.
//! The counters bracket the timed window (read before the first and after
//! the last timestamp), so their own cost (a `getrusage` system call, about
//! a microsecond, and `sched_getcpu`, a vDSO read) is not in the times.
//!
//! A cause that hits most operations of a run is not a disturbance but the
//! operation's own cost: a 64-KB message assembled in fresh heap pages can
//! page-fault on every round trip when the allocator gives the pages back
//! between messages (a quick run saw it on all of them; a full run on 10 %,
//! which then count as disturbances). Minor faults in more than half of a run's operations are
//! therefore kept in the statistics and reported as the operation's own
//! ([`settle`]); preemption, major faults and migration always disturb.
//!
//! Only the measuring (application) thread is watched per operation; the
//! engine thread's preemptions show in its `/proc` counters over a whole
//! run, not per operation.

use serde::{Deserialize, Serialize};

/// The counters at one instant.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Mark {
    /// Involuntary context switches of this thread.
    nivcsw: u64,
    /// Minor page faults of this thread.
    minflt: u64,
    /// Major page faults of this thread.
    majflt: u64,
    /// The CPU this thread runs on (−1 when unknown).
    cpu: i32,
}

impl Mark {
    /// This thread's counters now.
    pub(crate) fn now() -> Mark {
        use nix::sys::resource::{UsageWho, getrusage};
        let cpu = nix::sched::sched_getcpu().map_or(-1, |c| c as i32);
        getrusage(UsageWho::RUSAGE_THREAD).map_or(Mark { cpu, ..Mark::default() }, |u| Mark {
            nivcsw: u.involuntary_context_switches() as u64,
            minflt: u.minor_page_faults() as u64,
            majflt: u.major_page_faults() as u64,
            cpu,
        })
    }
}

/// What disturbed one operation (any number of causes at once).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Cause {
    preempted: bool,
    minor_fault: bool,
    major_fault: bool,
    migrated: bool,
}

impl Cause {
    /// The changes from `a` (before) to `b` (after).
    pub(crate) fn between(a: &Mark, b: &Mark) -> Cause {
        Cause {
            preempted: b.nivcsw != a.nivcsw,
            minor_fault: b.minflt != a.minflt,
            major_fault: b.majflt != a.majflt,
            migrated: a.cpu >= 0 && b.cpu >= 0 && a.cpu != b.cpu,
        }
    }

    /// Whether anything disturbed the operation.
    pub(crate) fn any(&self) -> bool {
        self.preempted || self.minor_fault || self.major_fault || self.migrated
    }
}

/// Operations measured and disturbed, per cause (an operation with two
/// causes counts under both and once in `disturbed`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Disturbed {
    /// Operations measured (disturbed or not).
    pub measured: usize,
    /// Operations disturbed by at least one cause (kept out of the
    /// statistics).
    pub disturbed: usize,
    /// Preempted (involuntary context switch).
    pub preempted: usize,
    /// Minor page fault.
    pub minor_faults: usize,
    /// Major page fault.
    pub major_faults: usize,
    /// Moved to another CPU.
    pub migrated: usize,
    /// Minor faults hit most operations: the operation's own (its memory
    /// use), kept in the statistics rather than set apart.
    #[serde(default)]
    pub own_minor_faults: bool,
}

/// Which of a run's operations the operating system disturbed (in order),
/// and the tally; see the module's note on page faults that are the
/// operation's own.
pub(crate) fn settle(causes: &[Cause]) -> (Vec<bool>, Disturbed) {
    let own = 2 * causes.iter().filter(|c| c.minor_fault).count() > causes.len();
    let mut d = Disturbed { own_minor_faults: own, ..Disturbed::default() };
    let hit =
        causes.iter().map(|&c| d.count(if own { Cause { minor_fault: false, ..c } } else { c })).collect();
    if own {
        d.minor_faults = causes.iter().filter(|c| c.minor_fault).count();
    }
    // Every operation disturbed: nothing undisturbed to show, so all are
    // kept (the tally, every one disturbed, says so) rather than none.
    let hit = if !causes.is_empty() && d.disturbed == causes.len() { vec![false; causes.len()] } else { hit };
    (hit, d)
}

impl Disturbed {
    /// Counts one operation; true when it was disturbed.
    fn count(&mut self, c: Cause) -> bool {
        self.measured += 1;
        self.preempted += usize::from(c.preempted);
        self.minor_faults += usize::from(c.minor_fault);
        self.major_faults += usize::from(c.major_fault);
        self.migrated += usize::from(c.migrated);
        self.disturbed += usize::from(c.any());
        c.any()
    }

    /// Adds another tally.
    pub(crate) fn add(&mut self, o: &Disturbed) {
        self.measured += o.measured;
        self.disturbed += o.disturbed;
        self.preempted += o.preempted;
        self.minor_faults += o.minor_faults;
        self.major_faults += o.major_faults;
        self.migrated += o.migrated;
        self.own_minor_faults |= o.own_minor_faults;
    }

    /// "12 of 3,000 (preempted 10, minor faults 3, …)": the causes with a
    /// count, for tables and the reading.
    pub fn describe(&self) -> String {
        let minor =
            if self.own_minor_faults { "minor faults (kept: the operation's own)" } else { "minor faults" };
        let causes: Vec<String> = [
            ("preempted", self.preempted),
            (minor, self.minor_faults),
            ("major faults", self.major_faults),
            ("migrated", self.migrated),
        ]
        .iter()
        .filter(|c| c.1 > 0)
        .map(|(name, n)| format!("{name} {n}"))
        .collect();
        if causes.is_empty() {
            format!("0 of {}", self.measured)
        } else {
            format!("{} of {} ({})", self.disturbed, self.measured, causes.join(", "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn causes_are_the_counters_that_changed() {
        let a = Mark { nivcsw: 3, minflt: 10, majflt: 0, cpu: 0 };
        assert!(!Cause::between(&a, &a).any());
        let b = Mark { nivcsw: 4, cpu: 1, ..a };
        let c = Cause::between(&a, &b);
        assert!(c.preempted && c.migrated && !c.minor_fault && !c.major_fault);
        // An unknown CPU is no migration.
        assert!(!Cause::between(&Mark { cpu: -1, ..a }, &Mark { cpu: 1, ..a }).any());
        let (hit, d) = settle(&[c, Cause::default()]);
        assert_eq!(hit, vec![true, false]);
        assert_eq!((d.measured, d.disturbed, d.preempted, d.migrated), (2, 1, 1, 1));
        assert_eq!(d.describe(), "1 of 2 (preempted 1, migrated 1)");
    }

    #[test]
    fn faults_in_most_operations_are_their_own() {
        let fault = Cause { minor_fault: true, ..Cause::default() };
        let preempted = Cause { preempted: true, ..fault };
        let (hit, d) = settle(&[fault, fault, preempted]);
        assert_eq!(hit, vec![false, false, true]);
        assert!(d.own_minor_faults);
        assert_eq!((d.disturbed, d.minor_faults), (1, 3));
        assert_eq!(d.describe(), "1 of 3 (preempted 1, minor faults (kept: the operation's own) 3)");
        // All preempted: all kept, and counted.
        let (hit, d) = settle(&[preempted, preempted]);
        assert_eq!((hit, d.disturbed), (vec![false, false], 2));
        // A fault in one of three: a disturbance.
        let (hit, d) = settle(&[fault, Cause::default(), Cause::default()]);
        assert_eq!(hit, vec![true, false, false]);
        assert!(!d.own_minor_faults);
    }

    #[test]
    fn a_page_fault_is_seen() {
        let a = Mark::now();
        // Touch fresh pages: at least one minor fault.
        let v = vec![1u8; 8 << 20];
        std::hint::black_box(&v);
        let b = Mark::now();
        assert!(Cause::between(&a, &b).minor_fault, "{a:?} {b:?}");
    }
}
