//! Writing a [`Recording`]: the Chrome JSON trace format (which the Perfetto
//! UI and `chrome://tracing` open) and JSON lines.
//!
//! Chrome JSON: one track per (thread, layer) — a thread's application
//! calls, ring crossings, engine events and system calls each get their own
//! row, named "thread/layer" — spans as `B`/`E` pairs, instants as
//! zero-length complete slices (`X`, so that flow arrows can bind to them),
//! and one flow (`s` … `t` … `f`) per journey that has more than one event,
//! in time order — a journey that goes on under another id (a `link`
//! event: a ring block written as data) is one flow with it, named by the
//! first id. Timestamps are microseconds with nanosecond decimals.
//!
//! JSON lines: one object per event, ordered by time, every field named —
//! for `jq`, pandas and scripts.

use std::collections::HashMap;
use std::io::{self, Write};

use crate::event::{Event, Phase, Point};
use crate::recorder::{Recording, ThreadEvents};

/// Which format [`write`] produces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Chrome JSON trace (Perfetto UI).
    Chrome,
    /// One JSON object per line.
    JsonLines,
}

impl Format {
    /// By file name: `.jsonl` / `.ndjson` are JSON lines, anything else the
    /// Chrome JSON trace.
    pub fn for_path(path: &std::path::Path) -> Format {
        match path.extension().and_then(|e| e.to_str()) {
            Some("jsonl" | "ndjson") => Format::JsonLines,
            _ => Format::Chrome,
        }
    }
}

/// Writes `rec` in `format`; `process` names the process (its pid is
/// `pid`) so traces of several processes can be loaded side by side.
pub fn write(rec: &Recording, format: Format, pid: u32, process: &str, out: impl Write) -> io::Result<()> {
    match format {
        Format::Chrome => chrome(rec, pid, process, out),
        Format::JsonLines => json_lines(rec, pid, out),
    }
}

fn us(t: u64) -> String {
    format!("{}.{:03}", t / 1000, t % 1000)
}

fn quoted(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"?\"".into())
}

/// Each journey's flow: the first id of the chain of `link` events it is
/// on (itself when none).
fn flow_roots(merged: &[(&ThreadEvents, Event)]) -> HashMap<u64, u64> {
    let mut up: HashMap<u64, u64> = HashMap::new();
    for (_, e) in merged {
        if e.point == Point::Link && e.journey != 0 && e.a != 0 && e.a != e.journey {
            up.entry(e.a).or_insert(e.journey);
        }
    }
    let mut roots = HashMap::new();
    // Each key's root is found on its own: the order does not matter.
    #[allow(clippy::iter_over_hash_type)]
    for &j in up.keys() {
        let mut r = j;
        // Bounded: a corrupt chain that loops ends somewhere.
        for _ in 0..64 {
            match up.get(&r) {
                Some(&u) if u != j => r = u,
                _ => break,
            }
        }
        roots.insert(j, r);
    }
    roots
}

fn track(t: &ThreadEvents, e: &Event) -> u64 {
    u64::from(t.tid) * 8 + e.point.layer() as u64
}

/// The Chrome JSON trace of `rec`.
pub fn chrome(rec: &Recording, pid: u32, process: &str, out: impl Write) -> io::Result<()> {
    let mut out = io::BufWriter::new(out);
    let merged = rec.merged();
    // Events per journey, to know each one's first and last.
    let roots = flow_roots(&merged);
    let flow = |j: u64| roots.get(&j).copied().unwrap_or(j);
    let mut count: HashMap<u64, (usize, usize)> = HashMap::new();
    for (_, e) in &merged {
        if e.journey != 0 {
            count.entry(flow(e.journey)).or_insert((0, 0)).0 += 1;
        }
    }
    writeln!(
        out,
        "{{\"displayTimeUnit\":\"ns\",\"otherData\":{{\"dropped_events\":{}}},\"traceEvents\":[",
        rec.dropped
    )?;
    write!(
        out,
        "{{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":{pid},\"args\":{{\"name\":{}}}}}",
        quoted(process)
    )?;
    let mut named = std::collections::BTreeSet::new();
    for (t, e) in &merged {
        let tr = track(t, e);
        if named.insert(tr) {
            let name = format!("{}/{}", t.name, e.point.layer().name());
            write!(
                out,
                ",\n{{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":{pid},\"tid\":{tr},\"args\":{{\"name\":{}}}}}",
                quoted(&name)
            )?;
            write!(
                out,
                ",\n{{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":{pid},\"tid\":{tr},\"args\":{{\"sort_index\":{tr}}}}}"
            )?;
        }
    }
    for (t, e) in &merged {
        let tr = track(t, e);
        let ts = us(e.t);
        let (name, cat) = (e.point.name(), e.point.layer().name());
        let args = format!("{{\"a\":{},\"b\":{},\"journey\":\"{:016x}\"}}", e.a, e.b, e.journey);
        match e.phase {
            Phase::Begin => write!(
                out,
                ",\n{{\"ph\":\"B\",\"name\":\"{name}\",\"cat\":\"{cat}\",\"ts\":{ts},\"pid\":{pid},\"tid\":{tr},\"args\":{args}}}"
            )?,
            Phase::End => write!(
                out,
                ",\n{{\"ph\":\"E\",\"name\":\"{name}\",\"cat\":\"{cat}\",\"ts\":{ts},\"pid\":{pid},\"tid\":{tr},\"args\":{args}}}"
            )?,
            Phase::Instant => write!(
                out,
                ",\n{{\"ph\":\"X\",\"name\":\"{name}\",\"cat\":\"{cat}\",\"ts\":{ts},\"dur\":0,\"pid\":{pid},\"tid\":{tr},\"args\":{args}}}"
            )?,
        }
        if e.journey != 0
            && let Some(c) = count.get_mut(&flow(e.journey))
            && c.0 > 1
        {
            c.1 += 1;
            let ph = match c.1 {
                1 => "s",
                n if n == c.0 => "f",
                _ => "t",
            };
            let bp = if ph == "f" { ",\"bp\":\"e\"" } else { "" };
            write!(
                out,
                ",\n{{\"ph\":\"{ph}\",\"name\":\"journey\",\"cat\":\"journey\",\"id\":\"0x{:x}\",\"ts\":{ts},\"pid\":{pid},\"tid\":{tr}{bp}}}",
                flow(e.journey)
            )?;
        }
    }
    writeln!(out, "\n]}}")?;
    out.flush()
}

/// JSON lines: one object per event, ordered by time.
pub fn json_lines(rec: &Recording, pid: u32, out: impl Write) -> io::Result<()> {
    let mut out = io::BufWriter::new(out);
    for (t, e) in rec.merged() {
        let phase = match e.phase {
            Phase::Begin => "B",
            Phase::End => "E",
            Phase::Instant => "i",
        };
        writeln!(
            out,
            "{{\"t_ns\":{},\"pid\":{pid},\"tid\":{},\"thread\":{},\"layer\":\"{}\",\"point\":\"{}\",\"phase\":\"{phase}\",\"journey\":\"{:016x}\",\"a\":{},\"b\":{}}}",
            e.t,
            t.tid,
            quoted(&t.name),
            e.point.layer().name(),
            e.point.name(),
            e.journey,
            e.a,
            e.b
        )?;
    }
    out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::journey;

    fn sample() -> Recording {
        let j = journey(5, 0);
        Recording {
            threads: vec![
                ThreadEvents {
                    tid: 1,
                    name: "app \"1\"".into(),
                    events: vec![
                        Event::begin(1_000, Point::AppWrite, 0, 10, 1),
                        Event::instant(1_500, Point::RingPush, j, 0, 0),
                        Event::end(2_000, Point::AppWrite, 0, 10, 1),
                    ],
                },
                ThreadEvents {
                    tid: 2,
                    name: "engine".into(),
                    events: vec![Event::instant(1_700, Point::RingPop, j, 0, 0)],
                },
            ],
            dropped: 0,
        }
    }

    #[test]
    fn chrome_is_json_with_tracks_and_a_flow() {
        let mut v = Vec::new();
        chrome(&sample(), 42, "test", &mut v).unwrap();
        let doc: serde_json::Value = serde_json::from_slice(&v).unwrap();
        let evs = doc["traceEvents"].as_array().unwrap();
        let flows: Vec<&str> =
            evs.iter().filter(|e| e["cat"] == "journey").map(|e| e["ph"].as_str().unwrap()).collect();
        assert_eq!(flows, ["s", "f"]);
        let names: Vec<&str> = evs
            .iter()
            .filter(|e| e["name"] == "thread_name")
            .map(|e| e["args"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["app \"1\"/app", "app \"1\"/ring", "engine/ring"]);
        assert!(evs.iter().any(|e| e["ph"] == "B" && e["ts"] == 1.0));
    }

    #[test]
    fn a_linked_journey_is_one_flow() {
        let (ring, data, other) = (journey(5, 0), journey(77, 0), journey(78, 0));
        let rec = Recording {
            threads: vec![ThreadEvents {
                tid: 1,
                name: "engine".into(),
                events: vec![
                    Event::instant(1_000, Point::RingPop, ring, 0, 0),
                    Event::instant(1_100, Point::Link, ring, data, 0),
                    Event::instant(1_200, Point::Write, data, 0, 10),
                    Event::instant(1_300, Point::PacketSent, data, 0, 10),
                    Event::instant(1_400, Point::PacketSent, other, 0, 10),
                    Event::instant(1_500, Point::Read, other, 0, 10),
                ],
            }],
            dropped: 0,
        };
        let mut v = Vec::new();
        chrome(&rec, 1, "t", &mut v).unwrap();
        let doc: serde_json::Value = serde_json::from_slice(&v).unwrap();
        let flows: Vec<(String, String)> = doc["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["cat"] == "journey")
            .map(|e| (e["id"].as_str().unwrap().to_owned(), e["ph"].as_str().unwrap().to_owned()))
            .collect();
        let r = format!("0x{ring:x}");
        let o = format!("0x{other:x}");
        let want: Vec<(String, String)> = [(&r, "s"), (&r, "t"), (&r, "t"), (&r, "f"), (&o, "s"), (&o, "f")]
            .iter()
            .map(|(a, b)| ((*a).clone(), (*b).to_owned()))
            .collect();
        assert_eq!(flows, want);
    }

    #[test]
    fn json_lines_one_object_per_event_in_time_order() {
        let mut v = Vec::new();
        json_lines(&sample(), 1, &mut v).unwrap();
        let lines: Vec<serde_json::Value> =
            String::from_utf8(v).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        let ts: Vec<u64> = lines.iter().map(|l| l["t_ns"].as_u64().unwrap()).collect();
        assert_eq!(ts, [1_000, 1_500, 1_700, 2_000]);
        assert_eq!(lines[2]["point"], "ring_pop");
        assert_eq!(lines[1]["journey"], lines[2]["journey"]);
        assert_eq!(Format::for_path("x.jsonl".as_ref()), Format::JsonLines);
        assert_eq!(Format::for_path("x.json".as_ref()), Format::Chrome);
    }
}
