//! `--graph FILE` (issue #16): `xpress serve` and `xpress ping` as two real
//! processes over UDP on loopback, and over raw IP protocol 36 as root, XTP
//! running as an `xk-core` protocol in a graph built from a description;
//! the direct engine's client against the graph's server; bad descriptions
//! refused naming the line and the edge.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use common::{Reaped, X};

fn graph_file(name: &str, text: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("xpress-graph-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn ping_over_a_described_graph_on_real_udp() {
    let g = graph_file("udp.graph", "# XTP over UDP\napp -> xtp -> udp\n");
    let g = g.to_str().unwrap();
    let (_server, to, _out) = graph_server(g, "127.0.0.1:0");
    // Graph client against the graph server, with messages of several
    // packets: they leave in one GSO batch, and the receiving device must
    // still take them one datagram at a time (a GRO socket read a train as
    // one frame and the exchange hung).
    let out = Command::new(X)
        .args(["ping", "--graph", g, "--to", &to, "-c", "50", "-i", "0", "-l", "10000", "-J"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((v["sent"].as_u64(), v["received"].as_u64()), (Some(50), Some(50)), "{v}");
    assert_eq!(v["graph"], "app -> xtp -> udp");
    assert!(v["datagrams_sent"].as_u64().unwrap() >= 50, "{v}");
    assert_eq!(v["composition"], "compiled", "{v}");
    assert_eq!(v["drops"]["malformed"].as_u64(), Some(0), "{v}");
    // The text summary is the direct ping's closing block: loss,
    // min/avg/max, percentiles.
    let out = Command::new(X)
        .args(["ping", "--graph", g, "--to", &to, "-c", "20", "-i", "0", "-q"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && text.contains("20 replies received, 0% loss"), "{text}");
    assert!(text.contains("rtt min/avg/max/mdev = ") && text.contains("rtt p50/p90/p99 = "), "{text}");
    // bulk --graph at the graph's server: it has no discard, and says so.
    let out = Command::new(X).args(["bulk", "--graph", g, "--to", &to, "-n", "10k"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("no count came back from") && err.contains("`serve --graph` does not"), "{err}");
    // The direct engine's client against the graph server: same protocol.
    let out = Command::new(X).args(["ping", "--to", &to, "-c", "20", "-i", "0", "-q"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && text.contains("20 replies received"), "{text}");
    // A census under the client's XTP: the ping prints the layer's named
    // counters as it answered them, one request and one reply each of 20.
    let c = graph_file("census-ping.graph", "app -> xtp -> census -> udp\n");
    let out = Command::new(X)
        .args(["ping", "--graph", c.to_str().unwrap(), "--to", &to, "-c", "20", "-i", "0", "-l", "100", "-q"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && text.contains("20 replies received"), "{text}");
    let line =
        text.lines().find(|l| l.trim_start().starts_with("census: ")).unwrap_or_else(|| panic!("{text}"));
    let n = |name: &str| -> u64 {
        let v = line.split(&format!("{name}=")).nth(1).unwrap_or_else(|| panic!("{line}"));
        v.split(',').next().unwrap().trim().parse().unwrap()
    };
    assert!(n("frames_down") >= 20 && n("frames_up") >= 20 && n("bytes_down") > 20 * 100, "{line}");
}

#[test]
fn bulk_over_a_described_graph_to_the_direct_server() {
    // The direct engine's server (discard on XTP port 9) and the graph's
    // client in both compositions: the compiled stack (the default) and the
    // run-time graph (`compose dynamic`). The server's own count comes back.
    let server = common::serve(&[]);
    let to = server.addr.to_string();
    // And a registered layer between XTP and the socket (`census`): the
    // run-time graph under `auto`, its counts those of the device.
    for (text, how) in [
        ("app -> xtp -> udp\n", "compiled"),
        ("compose dynamic\napp -> xtp -> udp\n", "dynamic"),
        ("app -> xtp -> census -> udp\n", "dynamic"),
    ] {
        let g = graph_file(&format!("bulk-{how}-{}.graph", text.len()), text);
        let out = Command::new(X)
            .args(["bulk", "--graph", g.to_str().unwrap(), "--to", &to, "-n", "3m", "-l", "10000", "-J"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{how}: {}", String::from_utf8_lossy(&out.stderr));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["composition"], how, "{v}");
        assert_eq!(v["graph"], text.lines().last().unwrap(), "{v}");
        let layers = v["layers"].as_array().unwrap();
        if text.contains("census") {
            let t = &layers[..];
            assert!(t.len() == 1 && t[0]["layer"] == "census", "{v}");
            assert_eq!(t[0]["counters"]["frames_down"], v["datagrams_sent"], "{v}");
            assert_eq!(t[0]["counters"]["frames_up"], v["datagrams_received"], "{v}");
            assert!(t[0]["counters"]["bytes_down"].as_u64().unwrap() > 3 << 20, "{v}");
        } else {
            assert!(layers.is_empty(), "{v}");
        }
        assert_eq!((v["bytes"].as_u64(), v["server_bytes"].as_u64()), (Some(3 << 20), Some(3 << 20)), "{v}");
        assert!(v["datagrams_sent"].as_u64().unwrap() >= (3 << 20) / 1500, "{v}");
        assert_eq!(v["acknowledged"].as_u64(), Some(3 << 20), "{v}");
        assert_eq!(v["interrupted"], false, "{v}");
        for d in ["bad_frames", "demux_drops", "malformed", "send_errors"] {
            assert_eq!(v["drops"][d].as_u64(), Some(0), "{d}: {v}");
        }
    }
    // A flag the graph's bulk does not take is refused by name, before
    // anything is created (--trace's file, --pcap's).
    let g = graph_file("bulk-r.graph", "app -> xtp -> udp\n");
    let trace = std::env::temp_dir().join(format!("xpress-graph-test-{}.trace", std::process::id()));
    let trace = trace.to_str().unwrap();
    for (flag, name) in [
        (&["-R"][..], "-R"),
        (&["--via", "127.0.0.1:9"][..], "--via"),
        (&["--pcap", "x.pcap"][..], "--pcap"),
        (&["--no-offload"][..], "--no-offload"),
        (&["--quic-cert", "c.pem"][..], "--quic-cert"),
        (&["--trace", trace][..], "--trace"),
    ] {
        let out = Command::new(X)
            .args(["bulk", "--graph", g.to_str().unwrap(), "--to", &to, "-n", "1k"])
            .args(flag)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{name} accepted");
        assert!(err.contains(&format!("--graph: {name} does not apply")), "{name}: {err}");
    }
    assert!(!std::path::Path::new(trace).exists(), "--trace's file was created");
    for (cmd, flag) in [("ping", "--cc"), ("serve", "--cc")] {
        let out = Command::new(X).args([cmd, "--graph", g.to_str().unwrap(), flag, "bbr"]).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains("--graph: --cc does not apply"), "{cmd}: {err}");
    }
}

/// Starts `serve --graph g --listen listen`; the server, the address it
/// printed, and its output (kept open: a server whose stdout is closed
/// dies at its next line).
fn graph_server(g: &str, listen: &str) -> (Reaped, String, BufReader<std::process::ChildStdout>) {
    let mut child = Command::new(X)
        .args(["serve", "--graph", g, "--listen", listen, "--duration", "60"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("start xpress serve --graph");
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let server = Reaped(child);
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    let to = line.trim().strip_prefix("listening on ").expect("listening line").to_string();
    line.clear();
    out.read_line(&mut line).unwrap();
    assert!(line.contains("XTP echo over the graph"), "{line}");
    (server, to, out)
}

#[test]
fn ping_over_a_described_graph_on_raw_ip_36() {
    if !nix::unistd::geteuid().is_root() {
        println!("skipped: raw IP protocol 36 needs root (CAP_NET_RAW)");
        return;
    }
    let g = graph_file("ip36.graph", "app -> xtp -> ip36\n");
    let g = g.to_str().unwrap();
    // The server on 127.0.0.2, the clients on 127.0.0.1: a raw socket sees
    // every protocol-36 packet to its address, so each side needs its own.
    let (_server, to, _out) = graph_server(g, "127.0.0.2:0");
    let out = Command::new(X)
        .args([
            "ping",
            "--graph",
            g,
            "--raw",
            "127.0.0.1",
            "--to",
            &to,
            "-c",
            "30",
            "-i",
            "0",
            "-l",
            "1000",
            "-J",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((v["sent"].as_u64(), v["received"].as_u64()), (Some(30), Some(30)), "{v}");
    assert_eq!(v["graph"], "app -> xtp -> ip36");
    // The direct engine's raw-IP client against the graph server.
    let out = Command::new(X)
        .args(["ping", "--raw", "127.0.0.1", "--to", &to, "-c", "20", "-i", "0", "-q"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && text.contains("20 replies received"), "{text}");
}

#[test]
fn bad_descriptions_are_refused_by_line_and_edge() {
    for (text, want) in [
        ("app -> xtp\napp -> xtp -> tcp\n", "line 2: unknown protocol `tcp`"),
        ("app -> xtp -> app\n", "edge `xtp -> app`"),
        (
            "app -> xtp -> loop\n",
            "line 1: unknown protocol `loop` (known: app, xtp, udp, ip36, link, census)",
        ),
        ("app -> xtp -> censsu -> udp\n", "unknown protocol `censsu`, did you mean `census`?"),
        (
            "app -> xtp -> census -> census -> udp\n",
            "`census` cannot sit on itself (a graph holds one layer of each kind)",
        ),
        ("app -> xtp -> udp\ncensus -> link\n", "line 2: `link` is not on the application's path"),
        ("app -> census -> xtp -> udp\n", "edge `app -> census`: `app` cannot sit above `census`"),
        ("app -> xtp -> census\n", "line 1: `census` has no lower layer"),
        (
            "compose compiled\napp -> xtp -> census -> udp\n",
            "line 2: `compose compiled`: `census` sits between `xtp` and the device; \
             only `app -> xtp -> <device>` alone has a compiled form",
        ),
        ("app -> xpt -> udp\n", "unknown protocol `xpt`, did you mean `xtp`?"),
        ("app -> xtp\n", "line 1: `xtp` has no lower layer"),
        ("app -> xtp -> udp -> ip36\n", "edge `udp -> ip36`: `udp` is a root"),
        ("app -> xtp -> link\n", "device `link` is not driven on real sockets"),
        ("app -> xtp -> ip36\n", "the graph's ip36 device needs a local IPv4 address of its own (--raw"),
    ] {
        let g = graph_file("bad.graph", text);
        let out = Command::new(X)
            .args(["ping", "--graph", g.to_str().unwrap(), "--to", "127.0.0.1:9", "-c", "1"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{text:?} was accepted");
        assert!(err.contains(want), "{text:?}: {err}");
    }
}
