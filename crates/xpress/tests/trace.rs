//! `--trace FILE`: the monitor's recording of a real ping between two real
//! processes, read back by readers that are not ours — Python's `json`
//! module for the Chrome JSON trace and the JSON lines, tshark for the
//! packets of the same run (`--pcap`) — and checked for events, ordering
//! and journeys: every message the pinger wrote is followed by its journey
//! id through the pinger's packet, the server's reception and the server's
//! read, in time order.
//!
//! The pinger's stderr carries the per-phase profile and the operating
//! system's counters of the run.
//!
//! Without python3 or tshark the test says what it skipped, unless
//! `XPRESS_REQUIRE_TSHARK` is set (CI), where a missing tshark fails.

mod common;

use std::process::{Command, Stdio};

use common::*;

/// The independent reader: Python loads both traces and prints what it
/// found, or fails with the first broken rule.
const CHECK: &str = r#"
import json, sys, collections
chrome_client, lines_server, count = sys.argv[1], sys.argv[2], int(sys.argv[3])

doc = json.load(open(chrome_client))
evs = doc["traceEvents"]
names = {e["tid"]: e["args"]["name"] for e in evs if e.get("ph") == "M" and e["name"] == "thread_name"}
assert any(n.endswith("/engine") for n in names.values()), names
assert any(n.endswith("/driver") for n in names.values()), names
# Spans balance per track, in time order.
open_spans = collections.defaultdict(list)
for e in evs:
    if e["ph"] == "B":
        open_spans[(e["tid"], e["name"])].append(e["ts"])
    elif e["ph"] == "E":
        b = open_spans[(e["tid"], e["name"])].pop()
        assert b <= e["ts"], (b, e)
assert all(not v for v in open_spans.values()), open_spans
# Every track's slices are in time order as written.
last = {}
for e in evs:
    if e["ph"] in ("B", "E", "X"):
        assert e["ts"] >= last.get(e["tid"], 0), e
        last[e["tid"]] = e["ts"]
writes = [e for e in evs if e["ph"] == "X" and e["name"] == "write"]
assert len(writes) == count, (len(writes), count)
sent = {e["args"]["journey"]: e["ts"] for e in evs if e["ph"] == "X" and e["name"] == "packet_sent" and e["args"]["b"] > 0}
flows = collections.defaultdict(list)
for e in evs:
    if e.get("cat") == "journey":
        flows[e["id"]].append(e["ph"])
for w in writes:
    j = w["args"]["journey"]
    assert j in sent and sent[j] >= w["ts"], ("write without its packet", j)
    assert flows["0x" + j.lstrip("0")] == ["s", "f"], flows.get("0x" + j.lstrip("0"))
# Packets are built and parsed as spans, each with its checksum span
# inside (computed when built, b 0; verified when parsed, b 1), on the
# same track.
stack = collections.defaultdict(list)
spans = collections.Counter()
for e in evs:
    if e["ph"] == "B":
        if e["name"] == "checksum":
            outer = stack[e["tid"]][-1] if stack[e["tid"]] else None
            want = "packet_build" if e["args"]["b"] == 0 else "packet_parse"
            assert outer == want, ("checksum outside its packet span", e, outer)
        stack[e["tid"]].append(e["name"])
        spans[e["name"]] += 1
    elif e["ph"] == "E":
        assert stack[e["tid"]].pop() == e["name"], e
assert spans["packet_build"] >= count and spans["packet_parse"] >= count, spans
assert spans["checksum"] == spans["packet_build"] + spans["packet_parse"], spans
# Receive calls carry their bytes; flow control's decisions are there.
for e in evs:
    if e["ph"] == "E" and e["name"] == "recv_call":
        assert e["args"]["b"] >= 32 * e["args"]["a"] > 0, e
assert any(e["name"] == "flow_window" for e in evs), "no flow-control decision traced"
sends = sum(1 for e in evs if e["ph"] == "B" and e["name"] == "send_call")
recvs = sum(1 for e in evs if e["ph"] == "B" and e["name"] == "recv_call")
assert sends >= count and recvs >= count, (sends, recvs)

# The server's JSON lines: ordered by time, and each client journey is
# received and read there, reception first.
srv = [json.loads(l) for l in open(lines_server)]
ts = [l["t_ns"] for l in srv]
assert ts == sorted(ts)
by = collections.defaultdict(dict)
for l in srv:
    if l["journey"] != "0" * 16:
        by[l["journey"]].setdefault(l["point"], l["t_ns"])
for w in writes:
    j = w["args"]["journey"]
    seen = by.get(j, {})
    assert "packet_received" in seen and "read" in seen, ("journey lost at the server", j, seen)
    assert seen["packet_received"] <= seen["read"]
    # One clock (CLOCK_MONOTONIC) in both processes: the server received after the client sent.
    assert seen["packet_received"] >= sent[j] * 1000 - 1000, (seen, sent[j])
# The server parsed each datagram it accepted inside a parse span.
parses = [l for l in srv if l["point"] == "packet_parse"]
assert [l["phase"] for l in parses[:2]] == ["B", "E"], parses[:2]
assert sum(1 for l in parses if l["phase"] == "E") >= sum(1 for l in srv if l["point"] == "packet_received")
assert any(l["point"] == "checksum" and l["b"] == 1 for l in srv)
packets = sum(1 for e in evs if e["ph"] == "X" and e["name"] in ("packet_sent", "packet_received"))
print(len(evs), len(srv), packets)
"#;

fn python() -> Option<()> {
    Command::new("python3").arg("--version").stdout(Stdio::null()).status().ok()?.success().then_some(())
}

#[test]
fn traces_of_a_ping_read_back_with_independent_readers() {
    let dir = std::env::temp_dir().join(format!("xpress-trace-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = |name: &str| dir.join(name).display().to_string();
    let (client, server_lines, pcap) = (f("ping.json"), f("serve.jsonl"), f("ping.pcap"));
    let server = serve(&["--trace", &server_lines]);
    let count = 12;
    let o = Command::new(X)
        .args(["ping", "--to", &server.addr.to_string(), "-c", &count.to_string(), "-i", "0.02", "-q"])
        .args(["--trace", &client, "--pcap", &pcap])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("trace:") && err.contains("events in"), "{err}");
    // The per-phase profile and the operating system's counters, apart.
    assert!(
        err.lines().any(|l| l.contains("send_call") && l.contains("median") && l.contains("p99")),
        "{err}"
    );
    assert!(
        err.contains("involuntary context switches (preemptions)") && err.contains("page faults"),
        "{err}"
    );
    interrupt(server.child); // writes its trace as it stops
    assert!(std::fs::metadata(&server_lines).unwrap().len() > 0);

    if python().is_none() {
        eprintln!("skipped reading the traces back: python3 is not installed");
        return;
    }
    let o = Command::new("python3")
        .args(["-c", CHECK, &client, &server_lines, &count.to_string()])
        .output()
        .unwrap();
    assert!(o.status.success(), "python3 check failed:\n{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8_lossy(&o.stdout);
    let packets: usize = out.split_whitespace().nth(2).unwrap().parse().unwrap();

    // The packets of the same run as tshark decodes them: as many as the
    // engine traced sending and accepting, every one XTP.
    let Ok(t) = Command::new("tshark").args(["-r", &pcap, "-T", "fields", "-e", "ip.proto"]).output() else {
        assert!(
            std::env::var_os("XPRESS_REQUIRE_TSHARK").is_none(),
            "XPRESS_REQUIRE_TSHARK is set but tshark cannot be run"
        );
        eprintln!("skipped the pcap check: tshark is not installed");
        return;
    };
    assert!(t.status.success(), "{}", String::from_utf8_lossy(&t.stderr));
    let protos: Vec<String> = String::from_utf8_lossy(&t.stdout).lines().map(str::to_owned).collect();
    assert!(protos.iter().all(|p| p == "36"), "{protos:?}");
    assert_eq!(protos.len(), packets, "pcap packets vs traced packets");
    let _ = std::fs::remove_dir_all(&dir);
}
