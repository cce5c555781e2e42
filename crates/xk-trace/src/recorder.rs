//! Per-thread recording buffers and the collector they are handed to.
//!
//! Each thread records into its own `Vec<Event>`, reached through a
//! thread-local and guarded by a mutex no other thread takes while the
//! recording runs (uncontended: an atomic exchange each way). The vector is
//! allocated once, with [`Config::chunk`] slots, when the thread first
//! records (or when it calls [`name_thread`], which threads on the data
//! path do at start so the allocation is not on it). A full vector is set
//! aside and a fresh one takes its place — once per `chunk` events; past
//! [`Config::max_events`] the full vector is emptied instead and its events
//! counted as dropped, so a long run costs bounded memory and, once over
//! budget, no allocation at all. [`finish`], on any thread, takes every
//! thread's vectors under their locks: threads that sleep or never end (an
//! engine thread, a daemon) need not cooperate.

use std::cell::OnceCell;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

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
/// Bumped by every [`start`]: events a thread holds from an earlier
/// recording are discarded rather than mixed into this one.
static GENERATION: AtomicU64 = AtomicU64::new(0);
static NEXT_TID: AtomicU32 = AtomicU32::new(1);
/// Events kept in full buffers so far, against [`Config::max_events`].
static KEPT: AtomicUsize = AtomicUsize::new(0);
static DROPPED: AtomicU64 = AtomicU64::new(0);
static CONFIG: Mutex<Config> = Mutex::new(Config { chunk: 16_384, max_events: 4 << 20 });

/// One thread's recording state. Behind a mutex only its own thread takes
/// on the hot path (uncontended: two atomic operations), so that
/// [`finish`], on any thread, can collect from threads that are asleep or
/// never end (an engine thread, a daemon) without their help.
struct Buffer {
    tid: u32,
    name: String,
    generation: u64,
    chunk: usize,
    max_events: usize,
    buf: Vec<Event>,
    full: Vec<Vec<Event>>,
}

impl Buffer {
    /// Appends `events` (one, or a span's two edges) to the current
    /// recording, making room for all of them first: over the event budget
    /// `make_room` drops the partial buffer, and room made per event could
    /// drop a span's `begin` and keep its `end` alone.
    #[inline]
    fn push(&mut self, events: &[Event]) {
        let generation = GENERATION.load(Ordering::Relaxed);
        if self.buf.capacity() - self.buf.len() < events.len() || self.generation != generation {
            self.make_room(generation, events.len());
        }
        self.buf.extend_from_slice(events);
    }

    /// Makes room for `n` more events of recording `generation` (`n` is at
    /// most a few, far below the chunk size).
    #[cold]
    fn make_room(&mut self, generation: u64, n: usize) {
        if self.generation != generation {
            self.buf.clear();
            self.full.clear();
            self.generation = generation;
            if let Ok(c) = CONFIG.lock() {
                self.chunk = c.chunk.max(1);
                self.max_events = c.max_events;
            }
        }
        if self.buf.capacity() - self.buf.len() >= n {
            return;
        }
        if self.buf.is_empty() {
            self.buf.reserve_exact(self.chunk.max(n));
        } else if KEPT.fetch_add(self.buf.len(), Ordering::Relaxed) + self.buf.len() <= self.max_events {
            let full = std::mem::replace(&mut self.buf, Vec::with_capacity(self.chunk.max(n)));
            self.full.push(full);
        } else {
            KEPT.fetch_sub(self.buf.len(), Ordering::Relaxed);
            DROPPED.fetch_add(self.buf.len() as u64, Ordering::Relaxed);
            self.buf.clear();
        }
    }
}

type Shared = Arc<Mutex<Buffer>>;

static REGISTRY: Mutex<Vec<Shared>> = Mutex::new(Vec::new());

thread_local! {
    static LOCAL: OnceCell<Shared> = const { OnceCell::new() };
}

fn with_buffer(f: impl FnOnce(&mut Buffer)) {
    // `try_with`: a thread recording while its thread-locals are torn down
    // loses the event rather than panicking.
    let _ = LOCAL.try_with(|cell| {
        let shared = cell.get_or_init(|| {
            let tid = NEXT_TID.fetch_add(1, Ordering::Relaxed);
            let name = std::thread::current().name().map_or_else(|| format!("thread-{tid}"), str::to_owned);
            let b = Arc::new(Mutex::new(Buffer {
                tid,
                name,
                generation: u64::MAX,
                chunk: 1,
                max_events: 0,
                buf: Vec::new(),
                full: Vec::new(),
            }));
            if let Ok(mut r) = REGISTRY.lock() {
                r.push(b.clone());
            }
            b
        });
        if let Ok(mut b) = shared.lock() {
            f(&mut b);
        }
    });
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
    with_buffer(|b| b.push(&[event]));
}

/// Records a span's two edges, `begin` then `end`, into the calling
/// thread's buffer together if a recording runs: [`finish`] takes a
/// buffer under its lock, so it sees both edges or neither (two
/// [`record`] calls let it end the recording between them and keep a
/// begin without its end).
#[inline]
pub fn record_span(begin: Event, end: Event) {
    if !enabled() {
        return;
    }
    with_buffer(|b| b.push(&[begin, end]));
}

/// Names the calling thread in exports and, while a recording runs,
/// allocates its buffer now (call it when a thread on the data path starts,
/// so its first event does not allocate).
pub fn name_thread(name: &str) {
    with_buffer(|b| {
        name.clone_into(&mut b.name);
        if enabled() {
            let generation = GENERATION.load(Ordering::Relaxed);
            if b.buf.capacity() == 0 || b.generation != generation {
                b.make_room(generation, 1);
            }
        }
    });
}

/// Starts a recording (discarding anything an earlier one left).
pub fn start(cfg: Config) {
    if let Ok(mut c) = CONFIG.lock() {
        *c = cfg;
    }
    KEPT.store(0, Ordering::Relaxed);
    DROPPED.store(0, Ordering::Relaxed);
    GENERATION.fetch_add(1, Ordering::SeqCst);
    ON.store(true, Ordering::SeqCst);
}

/// Ends the recording and returns every thread's events (running threads
/// included: their buffers are taken under their locks). Threads that
/// have ended are forgotten.
pub fn finish() -> Recording {
    ON.store(false, Ordering::SeqCst);
    let generation = GENERATION.load(Ordering::SeqCst);
    let Ok(mut reg) = REGISTRY.lock() else { return Recording::default() };
    let mut threads = Vec::new();
    for shared in reg.iter() {
        let Ok(mut b) = shared.lock() else { continue };
        if b.generation != generation {
            continue;
        }
        let mut events: Vec<Event> =
            Vec::with_capacity(b.full.iter().map(Vec::len).sum::<usize>() + b.buf.len());
        for f in b.full.drain(..) {
            events.extend(f);
        }
        // Over budget the last partial buffer is dropped too.
        let kept = KEPT.load(Ordering::Relaxed);
        if kept + b.buf.len() <= b.max_events {
            KEPT.fetch_add(b.buf.len(), Ordering::Relaxed);
            events.append(&mut b.buf);
        } else {
            DROPPED.fetch_add(b.buf.len() as u64, Ordering::Relaxed);
            b.buf.clear();
        }
        if !events.is_empty() {
            threads.push(ThreadEvents { tid: b.tid, name: b.name.clone(), events });
        }
    }
    // A buffer only the registry holds belongs to an ended thread.
    reg.retain(|s| Arc::strong_count(s) > 1);
    threads.sort_by_key(|t| t.tid);
    Recording { threads, dropped: DROPPED.swap(0, Ordering::Relaxed) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{Phase, Point, journey};

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
        // At the budget a span keeps both edges or neither: chunks of 3,
        // budget 4. An instant and a span fill the first chunk (kept); the
        // next span starts the second; the third span's `end` would not fit
        // and making room drops the partial buffer — with room made per
        // edge the `end` went into the emptied buffer alone, and was kept.
        // (On a new thread: this one's buffer keeps its earlier capacity.)
        start(Config { chunk: 3, max_events: 4 });
        std::thread::Builder::new()
            .name("spans".into())
            .spawn(|| {
                name_thread("spans");
                record(Event::instant(1, Point::Read, 0, 0, 0));
                for n in 0..3u64 {
                    record_span(
                        Event::begin(10 * n, Point::PacketBuild, 0, n, 0),
                        Event::end(10 * n + 5, Point::PacketBuild, 0, n, 0),
                    );
                }
            })
            .unwrap()
            .join()
            .unwrap();
        let rec = finish();
        let main =
            rec.threads.iter().find(|t| t.name == "spans").expect("the span thread's first chunk kept");
        let phases: Vec<Phase> =
            main.events.iter().filter(|e| e.point == Point::PacketBuild).map(|e| e.phase).collect();
        assert!(!phases.is_empty() && phases.len().is_multiple_of(2), "span edges unpaired: {phases:?}");
        assert!(phases.chunks(2).all(|p| p == [Phase::Begin, Phase::End]), "span edges unpaired: {phases:?}");
        record(Event::instant(1, Point::Write, 0, 0, 0));
        assert!(finish().is_empty(), "nothing recorded between recordings");
    }
}
