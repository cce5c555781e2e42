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
//! The measuring (application) thread is read with `getrusage` (a system
//! call); since Session 20 every other thread an operation involves — the
//! engine thread, the daemon's threads, the echo server's — is read per
//! operation too, from `/proc/<pid>/task/<tid>/{stat,status}`
//! ([`Mark::of_task`]: the same four counters), before the operation's
//! first timestamp and after its last, and its disturbances are counted
//! per thread (the profile's per-thread table) and keep the operation out
//! of the statistics as the application thread's do — a preemption of any
//! of them included, however often it happens. (Session 20 tried keeping
//! preemptions that hit most of another thread's operations as the
//! operation's own and removed it: the cause was not verified, the label
//! flipped between lengths on one mechanism, and the round trips it set
//! apart were not slower — docs/PERF.md.)

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

impl Mark {
    /// Another thread's counters now, from its `/proc` task directory
    /// (`/proc/self/task/<tid>` or `/proc/<pid>/task/<tid>`): involuntary
    /// context switches (`status`), minor and major faults and the CPU it
    /// last ran on (`stat`). None when a file cannot be read or parsed
    /// (the thread gone).
    pub(crate) fn of_task(dir: &std::path::Path) -> Option<Mark> {
        let stat = std::fs::read_to_string(dir.join("stat")).ok()?;
        let status = std::fs::read_to_string(dir.join("status")).ok()?;
        Mark::parse(&stat, &status)
    }

    /// [`Mark::of_task`]'s parser: `stat` after the command's closing
    /// parenthesis holds field 3 on (minflt is field 10, majflt 12,
    /// processor 39); `status` a `nonvoluntary_ctxt_switches:` line.
    fn parse(stat: &str, status: &str) -> Option<Mark> {
        let rest = stat.rsplit_once(')')?.1;
        let f: Vec<&str> = rest.split_whitespace().collect();
        let field = |n: usize| f.get(n - 3).and_then(|v| v.parse::<i64>().ok());
        let nivcsw = status
            .lines()
            .find_map(|l| l.strip_prefix("nonvoluntary_ctxt_switches:"))
            .and_then(|v| v.trim().parse().ok())?;
        Some(Mark { nivcsw, minflt: field(10)? as u64, majflt: field(12)? as u64, cpu: field(39)? as i32 })
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
/// operation's own. Every operation disturbed leaves nothing undisturbed
/// to show, so then all are kept (the tally, every one disturbed, says so)
/// rather than none.
pub(crate) fn settle(causes: &[Cause]) -> (Vec<bool>, Disturbed) {
    let (hit, d) = tally(causes);
    let hit = if !causes.is_empty() && d.disturbed == causes.len() { vec![false; causes.len()] } else { hit };
    (hit, d)
}

/// [`settle`] without keeping everything when every operation was
/// disturbed: the operations disturbed, as they were, and the tally. For
/// callers that combine several threads' tallies and say themselves what
/// they keep when nothing is undisturbed.
pub(crate) fn tally(causes: &[Cause]) -> (Vec<bool>, Disturbed) {
    let own = 2 * causes.iter().filter(|c| c.minor_fault).count() > causes.len();
    let mut d = Disturbed { own_minor_faults: own, ..Disturbed::default() };
    let hit =
        causes.iter().map(|&c| d.count(if own { Cause { minor_fault: false, ..c } } else { c })).collect();
    if own {
        d.minor_faults = causes.iter().filter(|c| c.minor_fault).count();
    }
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
    fn another_threads_counters_are_read_from_proc() {
        // A command name with a space and a parenthesis, as comm allows.
        let stat = "123 (xtp (eng) 1) S 1 2 3 4 5 6 77 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 1";
        let status = "Name:\txtp\nvoluntary_ctxt_switches:\t50\nnonvoluntary_ctxt_switches:\t7\n";
        let m = Mark::parse(stat, status).unwrap();
        assert_eq!(m, Mark { nivcsw: 7, minflt: 77, majflt: 9, cpu: 1 });
        assert!(Mark::parse(stat, "Name:\txtp\n").is_none());
        assert!(Mark::parse("123 (x) S 1", status).is_none());
        // This thread through /proc agrees with getrusage on its faults.
        let tid = nix::unistd::gettid();
        let a = Mark::of_task(&std::path::Path::new("/proc/self/task").join(tid.to_string())).unwrap();
        let v = vec![1u8; 8 << 20];
        std::hint::black_box(&v);
        let b = Mark::of_task(&std::path::Path::new("/proc/self/task").join(tid.to_string())).unwrap();
        assert!(Cause::between(&a, &b).minor_fault, "{a:?} {b:?}");
    }

    #[test]
    fn another_threads_preemptions_disturb_however_often() {
        // Session 20 tried keeping preemptions that hit most of a thread's
        // operations as the operation's own; removed (docs/PERF.md). A
        // preemption disturbs on every thread, and `tally` does not keep
        // everything when everything was disturbed, as `settle` does.
        let p = Cause { preempted: true, ..Cause::default() };
        let f = Cause { major_fault: true, ..Cause::default() };
        let (hit, d) = tally(&[p, p, f]);
        assert_eq!(hit, vec![true, true, true]);
        assert_eq!((d.disturbed, d.preempted, d.major_faults), (3, 2, 1));
        assert_eq!(d.describe(), "3 of 3 (preempted 2, major faults 1)");
        let (hit, _) = settle(&[p, p, f]);
        assert_eq!(hit, vec![false, false, false]);
        let (hit, _) = tally(&[p, Cause::default(), Cause::default()]);
        assert_eq!(hit, vec![true, false, false]);
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
