//! Per-thread counters of payload copies.

use std::cell::Cell;

/// Copies made by this thread since the last reset.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CopyStats {
    /// Number of payload copies (one per copied run of bytes).
    pub copies: u64,
    /// Payload bytes copied.
    pub bytes: u64,
    /// Header pull-ups (a header straddling chunks gathered into one piece).
    pub pullups: u64,
    /// Bytes gathered by pull-ups.
    pub pullup_bytes: u64,
}

thread_local! {
    static STATS: Cell<CopyStats> = const { Cell::new(CopyStats { copies: 0, bytes: 0, pullups: 0, pullup_bytes: 0 }) };
}

/// This thread's copy counters.
pub fn copy_stats() -> CopyStats {
    STATS.with(Cell::get)
}

/// Resets this thread's copy counters to zero.
pub fn reset_copy_stats() {
    STATS.with(|s| s.set(CopyStats::default()));
}

pub(crate) fn count_copy(bytes: usize) {
    if bytes == 0 {
        return;
    }
    STATS.with(|s| {
        let mut v = s.get();
        v.copies += 1;
        v.bytes += bytes as u64;
        s.set(v);
    });
}

pub(crate) fn count_pullup(bytes: usize) {
    STATS.with(|s| {
        let mut v = s.get();
        v.pullups += 1;
        v.pullup_bytes += bytes as u64;
        s.set(v);
    });
}
