//! Per-thread recording buffers and the collector they are handed to.
//!
//! Each thread records into its own `Vec<Event>` (a thread-local: no lock,
//! no sharing on the hot path). The vector is allocated once, with
//! [`Config::chunk`] slots, when the thread first records (or when it calls
//! [`name_thread`], which threads on the data path do at start so the
//! allocation is not on it). A full vector goes to the collector under its
//! lock and a fresh one takes its place — once per `chunk` events; past
//! [`Config::max_events`] the full vector is emptied instead and its events
//! counted as dropped, so a long run costs bounded memory and, once over
//! budget, no allocation at all. A thread's buffer reaches the collector
//! when it fills, when the thread calls [`flush_thread`], when the thread
//! ends (its thread-local is dropped), and, for the thread calling
//! [`finish`], then.

use std::cell::RefCell;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

use crate::event::Event;

/// Recording settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// Events per thread buffer (the unit handed to the collector).
    pub chunk: usize,
    /// Most events kept over all threads; later ones are counted in
    /// [`Recording::dropped`].
    pub max_events: usize,
}

impl Default for Config {
    /// 16,384-event chunks (512 KiB), at most 4 M events (128 MiB).
    fn default() -> Self {
        Config { chunk: 16_384, max_events: 4 << 20 }
    }
}

/// One thread's events, in the order it recorded them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ThreadEvents {
    /// Process-unique thread number (1, 2, … in order of first record).
    pub tid: u32,
    /// The thread's name ([`name_thread`], else its std name, else
    /// `thread-N`).
    pub name: String,
    /// The events.
    pub events: Vec<Event>,
}

/// What a recording collected.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Recording {
    /// Per thread, ordered by `tid`.
    pub threads: Vec<ThreadEvents>,
    /// Events recorded past [`Config::max_events`] and not kept.
    pub dropped: u64,
}

impl Recording {
    /// Every event with its thread, ordered by time (stable: a thread's
    /// events at one instant keep their order).
    pub fn merged(&self) -> Vec<(&ThreadEvents, Event)> {
        let mut all: Vec<_> =
            self.threads.iter().flat_map(|t| t.events.iter().map(move |e| (t, *e))).collect();
        all.sort_by_key(|(_, e)| e.t);
        all
    }

    /// Number of events kept.
    pub fn len(&self) -> usize {
        self.threads.iter().map(|t| t.events.len()).sum()
    }

    /// No events kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

static ON: AtomicBool = AtomicBool::new(false);
/// Bumped by every [`start`]: a buffer filled during an earlier recording
/// is discarded rather than mixed into this one.
static GENERATION: AtomicU64 = AtomicU64::new(0);
static NEXT_TID: AtomicU32 = AtomicU32::new(1);

struct Collector {
    cfg: Config,
    kept: usize,
    dropped: u64,
    chunks: Vec<(u32, String, Vec<Event>)>,
}

static COLLECTOR: Mutex<Collector> = Mutex::new(Collector {
    cfg: Config { chunk: 16_384, max_events: 4 << 20 },
    kept: 0,
    dropped: 0,
    chunks: Vec::new(),
});

struct Local {
    tid: u32,
    name: String,
    generation: u64,
    buf: Vec<Event>,
}

impl Local {
    const fn new() -> Local {
        Local { tid: 0, name: String::new(), generation: 0, buf: Vec::new() }
    }

    /// Makes sure the buffer has room for one more event of recording
    /// `generation`: allocates it on first use, drops what an earlier
    /// recording left, hands it over when full.
    #[cold]
    fn make_room(&mut self, generation: u64) {
        if self.generation != generation {
            self.buf.clear();
            self.generation = generation;
        }
        if self.tid == 0 {
            self.tid = NEXT_TID.fetch_add(1, Ordering::Relaxed);
            if self.name.is_empty() {
                self.name = std::thread::current()
                    .name()
                    .map_or_else(|| format!("thread-{}", self.tid), str::to_owned);
            }
        }
        if self.buf.len() == self.buf.capacity() {
            self.hand_over(true);
        }
    }

    /// Gives the buffer's events to the collector (or counts them dropped);
    /// `refill`: leave a buffer with `chunk` free slots behind.
    fn hand_over(&mut self, refill: bool) {
        let generation = GENERATION.load(Ordering::Relaxed);
        let Ok(mut c) = COLLECTOR.lock() else { return };
        let chunk = c.cfg.chunk.max(1);
        if self.generation != generation {
            // Left over from an earlier recording: the buffer only ever
            // holds events of `self.generation`.
            self.buf.clear();
            self.generation = generation;
        }
        if !self.buf.is_empty() {
            if c.kept + self.buf.len() <= c.cfg.max_events {
                c.kept += self.buf.len();
                let full = std::mem::replace(
                    &mut self.buf,
                    if refill { Vec::with_capacity(chunk) } else { Vec::new() },
                );
                c.chunks.push((self.tid, self.name.clone(), full));
            } else {
                c.dropped += self.buf.len() as u64;
                self.buf.clear();
            }
        }
        if refill && self.buf.capacity() == 0 {
            self.buf.reserve_exact(chunk);
        }
    }
}

impl Drop for Local {
    fn drop(&mut self) {
        if !self.buf.is_empty() {
            self.hand_over(false);
        }
    }
}

thread_local! {
    static LOCAL: RefCell<Local> = const { RefCell::new(Local::new()) };
}

/// Whether a recording runs (one relaxed load; instrumented code tests it
/// before reading the clock for an event).
#[inline(always)]
pub fn enabled() -> bool {
    ON.load(Ordering::Relaxed)
}

/// Records `event` into the calling thread's buffer if a recording runs.
#[inline]
pub fn record(event: Event) {
    if !enabled() {
        return;
    }
    // `try_with`: a thread recording while its thread-locals are torn down
    // loses the event rather than panicking.
    let _ = LOCAL.try_with(|l| {
        let Ok(mut l) = l.try_borrow_mut() else { return };
        let generation = GENERATION.load(Ordering::Relaxed);
        if l.buf.len() == l.buf.capacity() || l.generation != generation {
            l.make_room(generation);
        }
        l.buf.push(event);
    });
}

/// Names the calling thread in exports and allocates its buffer now (call
/// it when a thread on the data path starts, so its first event does not
/// allocate).
pub fn name_thread(name: &str) {
    let _ = LOCAL.try_with(|l| {
        let Ok(mut l) = l.try_borrow_mut() else { return };
        name.clone_into(&mut l.name);
        let generation = GENERATION.load(Ordering::Relaxed);
        if l.buf.capacity() == 0 || l.tid == 0 || l.generation != generation {
            l.make_room(generation);
        }
    });
}

/// Hands the calling thread's events to the collector now (a long-lived
/// thread that should appear in a [`finish`] called from another thread).
pub fn flush_thread() {
    let _ = LOCAL.try_with(|l| {
        if let Ok(mut l) = l.try_borrow_mut()
            && !l.buf.is_empty()
        {
            l.hand_over(true);
        }
    });
}

/// Starts a recording (discarding anything an earlier one left).
pub fn start(cfg: Config) {
    if let Ok(mut c) = COLLECTOR.lock() {
        c.cfg = cfg;
        c.kept = 0;
        c.dropped = 0;
        c.chunks.clear();
    }
    GENERATION.fetch_add(1, Ordering::Relaxed);
    ON.store(true, Ordering::SeqCst);
}

/// Ends the recording: flushes the calling thread and returns what every
/// thread handed over (threads still running keep what they have not
/// flushed).
pub fn finish() -> Recording {
    flush_thread();
    ON.store(false, Ordering::SeqCst);
    let Ok(mut c) = COLLECTOR.lock() else { return Recording::default() };
    let mut threads: Vec<ThreadEvents> = Vec::new();
    for (tid, name, events) in c.chunks.drain(..) {
        match threads.iter_mut().find(|t| t.tid == tid) {
            Some(t) => t.events.extend(events),
            None => threads.push(ThreadEvents { tid, name, events }),
        }
    }
    threads.sort_by_key(|t| t.tid);
    let rec = Recording { threads, dropped: c.dropped };
    c.kept = 0;
    c.dropped = 0;
    rec
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{Point, journey};

    /// One test for the process-global recorder (tests run in parallel).
    #[test]
    fn threads_record_into_their_own_buffers_and_budget_is_kept() {
        record(Event::instant(1, Point::Write, 0, 0, 0)); // not recording: ignored
        start(Config { chunk: 4, max_events: 30 });
        name_thread("main-test");
        let handles: Vec<_> = (0..2)
            .map(|i| {
                std::thread::Builder::new()
                    .name(format!("w{i}"))
                    .spawn(move || {
                        for n in 0..10u64 {
                            record(Event::instant(100 + n, Point::PacketSent, journey(i, n), n, 0));
                        }
                    })
                    .unwrap()
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        for n in 0..5u64 {
            record(Event::begin(50 + n, Point::AppWrite, 0, n, 0));
        }
        let rec = finish();
        assert_eq!(rec.len(), 25);
        assert_eq!(rec.dropped, 0);
        let main = rec.threads.iter().find(|t| t.name == "main-test").unwrap();
        assert_eq!(main.events.len(), 5);
        for i in 0..2 {
            let w = rec.threads.iter().find(|t| t.name == format!("w{i}")).unwrap();
            let seqs: Vec<u64> = w.events.iter().map(|e| e.a).collect();
            assert_eq!(seqs, (0..10).collect::<Vec<_>>(), "a thread's events stay in order across chunks");
        }
        let merged = rec.merged();
        assert!(merged.windows(2).all(|w| w[0].1.t <= w[1].1.t));
        // Over budget: 40 events, 30 kept at most, the rest counted.
        start(Config { chunk: 10, max_events: 30 });
        for n in 0..40u64 {
            record(Event::instant(n, Point::Read, 0, n, 0));
        }
        let rec = finish();
        assert_eq!(rec.len() as u64 + rec.dropped, 40);
        assert!(rec.len() <= 30);
        record(Event::instant(1, Point::Write, 0, 0, 0));
        assert!(finish().is_empty(), "nothing recorded between recordings");
    }
}
