//! `xpress netns` (root): kernel TCP between two namespaces joined by the
//! emulator measures the configured RTT within 1 ms at 20 / 100 / 200 ms and
//! a 100 Mbit/s rate within 5 %; iperf3 runs through it when installed; and
//! afterwards no namespace, device or process of the run is left. Without
//! root the command must refuse, saying why.

use std::process::{Command, Output};

const X: &str = env!("CARGO_BIN_EXE_xpress");

/// The root tests check that no namespace is left behind, so they must not
/// overlap: one at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn is_root() -> bool {
    Command::new("id").arg("-u").output().is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// Runs `xpress netns` with a server in A and `b` in B; returns the output
/// after checking the emulator's own report (release error, TUN drops).
fn netns(link: &str, a: &str, b: &str) -> Output {
    let report = std::env::temp_dir().join(format!("xpress-netns-report-{}.json", std::process::id()));
    let out = Command::new(X)
        .args(["netns", "--link", link, "--a", a, "--b", b, "--report"])
        .arg(&report)
        .output()
        .expect("run xpress netns");
    assert!(
        out.status.success(),
        "xpress netns failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    torn_down(&out);
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    let _ = std::fs::remove_file(&report);
    assert!(r["kernel_drops"].is_u64(), "TUN drop counters not read: {r}");
    assert!(r["forward"]["release_error_p99_us"].as_f64().unwrap() < 1000.0, "{r}");
    // The verdict and what it rests on are in the report; as root the
    // forwarding thread gets its real-time priority.
    assert_eq!(r["max_p99_release_error_us"].as_f64(), Some(200.0), "{r}");
    assert!(r["valid"].is_boolean() && r["invalid_reasons"].is_array(), "{r}");
    let sched = r["timing"]["scheduling"].as_str().unwrap_or_default();
    assert!(sched.starts_with("SCHED_FIFO"), "forwarding thread not real-time: {r}");
    // A person reads the same counts on stderr, one line per direction.
    let err = String::from_utf8_lossy(&out.stderr);
    for (dir, key) in [("A -> B", "forward"), ("B -> A", "reverse")] {
        let want = format!("{dir}: {} packets in, {} delivered", r[key]["offered"], r[key]["delivered"]);
        assert!(err.contains(&want), "no summary line `{want}` in:\n{err}");
    }
    out
}

/// The first JSON object line of `out`'s stdout.
fn json(out: &Output) -> serde_json::Value {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.starts_with('{').then(|| serde_json::from_str(l).ok()).flatten())
        .unwrap_or_else(|| panic!("no JSON in: {}", String::from_utf8_lossy(&out.stdout)))
}

/// The run says nothing of its own namespaces outliving it (so a leak is
/// pinned on the run that made it, with what `ip` said).
fn torn_down(out: &Output) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !err.contains("teardown"),
        "xpress netns did not tear down cleanly:\n{}",
        err.lines().filter(|l| l.contains("teardown")).collect::<Vec<_>>().join("\n")
    );
}

fn assert_clean(marker: &str) {
    let ns = Command::new("ip").args(["netns", "list"]).output().unwrap();
    let ns = String::from_utf8_lossy(&ns.stdout);
    assert!(!ns.contains("xpns"), "namespaces left behind: {ns}");
    let links = Command::new("ip").args(["link", "show"]).output().unwrap();
    let links = String::from_utf8_lossy(&links.stdout);
    assert!(!links.contains("xpns"), "devices left behind: {links}");
    // The servers carry a marker no other process has.
    let ps = Command::new("pgrep").args(["-f", marker]).output().unwrap();
    assert!(ps.stdout.is_empty(), "processes left behind: {}", String::from_utf8_lossy(&ps.stdout));
}

#[test]
fn netns_refuses_without_root() {
    let mut cmd = if is_root() {
        let mut c = Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all", X]);
        c
    } else {
        Command::new(X)
    };
    let Ok(out) = cmd.args(["netns", "--b", "true"]).output() else {
        eprintln!("skipped: cannot run as an unprivileged user here");
        return;
    };
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("needs root") && err.contains("xpress emulate"), "unclear refusal: {err}");
}

#[test]
fn kernel_tcp_sees_the_emulated_rtt_and_rate() {
    if !is_root() {
        eprintln!("skipped: xpress netns needs root (namespaces, TUN); CI runs this as root");
        return;
    }
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let marker = "--duration 61.5";
    let server = format!("exec {X} serve --listen 10.200.0.1:3636 {marker}");
    for rtt_ms in [20u64, 100, 200] {
        let out = netns(
            &format!("delay {}ms", rtt_ms / 2),
            &server,
            &format!("{X} ping --to 10.200.0.1:3636 --transport tcp -l 100 -c 10 -i 0 -J"),
        );
        let p50_ms = json(&out)["rtt_us"]["p50"].as_f64().unwrap() / 1000.0;
        eprintln!("RTT {rtt_ms} ms: kernel TCP ping p50 {p50_ms:.3} ms");
        assert!((p50_ms - rtt_ms as f64).abs() <= 1.0, "RTT {rtt_ms} ms measured as {p50_ms:.3} ms");
    }
    assert_clean(marker);

    // 50 MB over kernel TCP through a 100 Mbit/s link (10 ms RTT). The link
    // limits IP packets; TCP's goodput is 1448 of every 1500 bytes.
    let out = netns(
        "delay 5ms rate 100mbit",
        &server,
        &format!("{X} bulk --to 10.200.0.1:3636 --transport tcp -n 50000000 -J"),
    );
    let goodput = json(&out)["gbit_per_s"].as_f64().unwrap() * 1000.0;
    let ip_rate = goodput * 1500.0 / 1448.0;
    eprintln!("100 Mbit/s link: TCP goodput {goodput:.2} Mbit/s, IP rate {ip_rate:.2} Mbit/s");
    assert!((ip_rate - 100.0).abs() <= 5.0, "IP rate {ip_rate:.2} Mbit/s, goodput {goodput:.2}");
    assert_clean(marker);

    let have_iperf3 = Command::new("iperf3").arg("--version").output().is_ok();
    if !have_iperf3 {
        eprintln!("iperf3 not installed: its run through the router skipped");
        return;
    }
    let out = netns(
        "delay 5ms rate 100mbit",
        "exec iperf3 -s -1 -B 10.200.0.1 >/dev/null",
        "iperf3 -c 10.200.0.1 -t 3 -J",
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let start = text.find('{').expect("iperf3 JSON");
    let v: serde_json::Value = serde_json::from_str(&text[start..]).expect("iperf3 JSON parses");
    let mbit = v["end"]["sum_received"]["bits_per_second"].as_f64().unwrap() / 1e6;
    eprintln!("iperf3 through the router at 100 Mbit/s: {mbit:.2} Mbit/s");
    assert!(mbit > 85.0 && mbit < 101.0, "iperf3 {mbit:.2} Mbit/s");
    assert_clean("iperf3 -s -1 -B 10.200.0.1");
}

#[test]
fn kernel_tcp_over_the_packet_radio_channel() {
    if !is_root() {
        eprintln!("skipped: xpress netns needs root (namespaces, TUN); CI runs this as root");
        return;
    }
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // The TUN devices take the profile's 238-byte MTU, so kernel TCP sizes
    // its segments to fit one radio frame; data and ACKs share the channel.
    let marker = "--duration 61.75";
    let server = format!("exec {X} serve --listen 10.200.0.1:3636 {marker}");
    let report = std::env::temp_dir().join(format!("xpress-radio-report-{}.json", std::process::id()));
    let out = Command::new(X)
        .args(["netns", "--link", "profile packet-radio-9600 txdelay 50ms", "--a", &server, "--b"])
        .arg(format!("{X} bulk --to 10.200.0.1:3636 --transport tcp -n 5000 -J"))
        .arg("--report")
        .arg(&report)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    torn_down(&out);
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    let _ = std::fs::remove_file(&report);
    let bits = json(&out)["gbit_per_s"].as_f64().unwrap() * 1e9;
    eprintln!("5 KB of kernel TCP over packet-radio-9600: {bits:.0} bit/s goodput; emulator: {r}");
    assert!(bits > 1000.0 && bits < 9600.0, "goodput {bits:.0} bit/s on a 9,600 bit/s channel");
    let (f, v) = (&r["forward"], &r["reverse"]);
    assert_eq!(f["drop_mtu"].as_u64(), Some(0), "TCP segments fit the 238-byte MTU: {r}");
    assert!(f["key_ups"].as_u64().unwrap() > 0 && v["key_ups"].as_u64().unwrap() > 0, "{r}");
    assert_clean(marker);
}

/// XTP over the same channel with no `--mss`: the client sizes its packets
/// from the route's MTU (238, the TUN's: 178 bytes of data per packet over
/// UDP, 186 over raw IP) and its FIRST tells the server, so no packet is
/// dropped for size either way. Before Session 22 the client's 1,472-byte
/// packets never reached the link: the kernel refused the send ("socket:
/// Message too long (os error 90)", the TUN's MTU being 238) and the run
/// ended at once; the link dropped nothing. Over UDP and over raw IP 36.
#[test]
fn xtp_over_the_packet_radio_channel_without_mss() {
    if !is_root() {
        eprintln!("skipped: xpress netns needs root (namespaces, TUN); CI runs this as root");
        return;
    }
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    for (raw, marker) in [(false, "--duration 61.5"), (true, "--duration 61.625")] {
        let (serve_raw, bulk_raw) = if raw { (" --raw", " --raw 10.200.0.2") } else { ("", "") };
        let server = format!("exec {X} serve --listen 10.200.0.1:3636{serve_raw} {marker}");
        let report = std::env::temp_dir().join(format!("xpress-radio-xtp-{}-{raw}.json", std::process::id()));
        let out = Command::new(X)
            .args(["netns", "--link", "profile packet-radio-9600 txdelay 50ms", "--a", &server, "--b"])
            .arg(format!("{X} bulk --to 10.200.0.1:3636{bulk_raw} -n 5000 -J"))
            .arg("--report")
            .arg(&report)
            .output()
            .unwrap();
        assert!(out.status.success(), "raw {raw}: {}", String::from_utf8_lossy(&out.stderr));
        torn_down(&out);
        let r: serde_json::Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
        let _ = std::fs::remove_file(&report);
        let bits = json(&out)["gbit_per_s"].as_f64().unwrap() * 1e9;
        eprintln!("5 KB of XTP (raw {raw}) over packet-radio-9600: {bits:.0} bit/s goodput; emulator: {r}");
        let (f, v) = (&r["forward"], &r["reverse"]);
        assert_eq!(f["drop_mtu"].as_u64(), Some(0), "raw {raw}: XTP packets fit the 238-byte MTU: {r}");
        assert_eq!(v["drop_mtu"].as_u64(), Some(0), "raw {raw}: and the server's: {r}");
        assert!(
            bits > 1000.0 && bits < 9600.0,
            "raw {raw}: goodput {bits:.0} bit/s on a 9,600 bit/s channel"
        );
        assert_clean(marker);
    }
}

/// `netns --pcap`: what crossed the link, as IP packets stock tshark reads.
#[test]
fn netns_pcap_holds_the_packets_that_crossed_the_link() {
    if !is_root() {
        eprintln!("skipped: xpress netns needs root (namespaces, TUN); CI runs this as root");
        return;
    }
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let marker = "--duration 61.25";
    let pcap = std::env::temp_dir().join(format!("xpress-netns-{}.pcap", std::process::id()));
    let out = Command::new(X)
        .args(["netns", "--link", "delay 1ms", "--pcap"])
        .arg(&pcap)
        .args(["--a", &format!("exec {X} serve --listen 10.200.0.1:3636 {marker}"), "--b"])
        .arg(format!("{X} bulk --to 10.200.0.1:3636 --transport tcp -n 300000 -J"))
        .args(["--report", "/dev/null"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    torn_down(&out);
    assert_clean(marker);
    let Ok(t) = Command::new("tshark").arg("-r").arg(&pcap).args(["-Y", "tcp"]).output() else {
        eprintln!("skipped the decoding: tshark is not installed (CI installs it)");
        let _ = std::fs::remove_file(&pcap);
        return;
    };
    let tcp = String::from_utf8_lossy(&t.stdout).lines().count();
    let bad = Command::new("tshark")
        .arg("-r")
        .arg(&pcap)
        .args(["-Y", "_ws.malformed || _ws.expert.severity >= error"])
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&pcap);
    // 300 KB is about 210 full segments one way, plus the ACKs.
    assert!(tcp > 200, "only {tcp} TCP packets in the capture");
    assert!(String::from_utf8_lossy(&bad.stdout).trim().is_empty(), "malformed packets in the capture");
}

#[test]
fn sigterm_to_netns_ends_bs_command_and_tears_down() {
    if !is_root() {
        eprintln!("skipped: xpress netns needs root (namespaces, TUN); CI runs this as root");
        return;
    }
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // B's command would outlive the test by far; the marker finds it.
    let marker = "sleep 97.25";
    let child = Command::new(X)
        .args(["netns", "--link", "delay 1ms", "--b", marker, "--report", "/dev/null"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_secs(2));
    let t0 = std::time::Instant::now();
    let _ = Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
    let out = child.wait_with_output().unwrap();
    assert!(t0.elapsed() < std::time::Duration::from_secs(5), "netns took {:?} to stop", t0.elapsed());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "an interrupted run succeeded: {err}");
    assert!(err.contains("interrupted: B's command was ended"), "{err}");
    torn_down(&out);
    assert_clean(marker);
}

/// FTP over XTP through the emulator with loss (issue #19): our server in
/// namespace A, our client in B, across a link losing 2 % each way; a
/// 3 MB file retrieved and a 1 MB file stored, both byte-exact.
#[test]
fn ftp_over_xtp_through_a_lossy_link_is_byte_exact() {
    if !is_root() {
        eprintln!("skipped: xpress netns needs root (namespaces, TUN); CI runs this as root");
        return;
    }
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = std::env::temp_dir().join(format!("xpress-ftp-lossy-{}", std::process::id()));
    let root = dir.join("root");
    std::fs::create_dir_all(&root).unwrap();
    let pattern = |n: usize, salt: u64| -> Vec<u8> {
        (0..n).map(|i| ((i as u64 ^ salt).wrapping_mul(2_654_435_761) >> 11) as u8).collect()
    };
    let (down, up) = (pattern(3_000_000, 1), pattern(1_000_000, 2));
    std::fs::write(root.join("big"), &down).unwrap();
    std::fs::write(dir.join("up"), &up).unwrap();
    let (r, d) = (root.display(), dir.display());
    let url = "ftp://u:p@10.200.0.1:2121";
    let a = format!(
        "exec {X} ftp serve --root {r} --listen 10.200.0.1:2121 --user u --password p --transport xtp"
    );
    let b = format!(
        "{X} ftp get {url}/big {d}/got --transport xtp && {X} ftp put {d}/up {url}/up --transport xtp"
    );
    let out = Command::new(X)
        .args(["netns", "--link", "delay 5ms rate 50mbit loss 2%", "--a", &a, "--b", &b, "--duration", "120"])
        .output()
        .expect("run xpress netns");
    let text = format!("{}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "FTP over XTP through the lossy link failed:\n{text}");
    torn_down(&out);
    let got = std::fs::read(dir.join("got")).unwrap_or_default();
    let stored = std::fs::read(root.join("up")).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(got == down, "retrieved {} of {} bytes, or different ones:\n{text}", got.len(), down.len());
    assert!(stored == up, "stored {} of {} bytes, or different ones:\n{text}", stored.len(), up.len());
}

/// Batched forwarding (TUN segmentation offloads): 40 MB over kernel TCP
/// (FTP) through a 1 Gbit/s link that loses 1 % of its packets and corrupts
/// 0.5 % (one bit each). The sending
/// stack hands the emulator 64 KB super-packets; each loss falls inside one
/// (almost always in the middle), so the emulator must split it there and
/// write the segments around the hole as separate coalesced packets, with
/// lengths, sequence numbers and checksums right — the receiving stack
/// trusts a coalesced packet's checksum, so a wrong split would corrupt the
/// file rather than be retransmitted. A corrupted segment must not be
/// coalesced (its checksum would no longer be checked) but written alone.
/// Checks the file byte for byte, that segments were lost and corrupted,
/// and that the emulator wrote fewer times than it released packets (it
/// does one write per packet without batching).
#[test]
fn kernel_tcp_through_a_lossy_gigabit_link_is_batched_and_byte_exact() {
    if !is_root() {
        eprintln!("skipped: xpress netns needs root (namespaces, TUN); CI runs this as root");
        return;
    }
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = std::env::temp_dir().join(format!("xpress-gso-lossy-{}", std::process::id()));
    let root = dir.join("root");
    std::fs::create_dir_all(&root).unwrap();
    let data: Vec<u8> = (0..40_000_000u64).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
    std::fs::write(root.join("big"), &data).unwrap();
    let (r, d) = (root.display(), dir.display());
    let url = "ftp://u:p@10.200.0.1:2121";
    let a = format!("exec {X} ftp serve --root {r} --listen 10.200.0.1:2121 --user u --password p");
    let b = format!("{X} ftp get {url}/big {d}/got");
    let report = dir.join("report.json");
    let out = Command::new(X)
        .args([
            "netns",
            "--link",
            "delay 1ms rate 1gbit loss 1% corrupt 0.5%",
            "--a",
            &a,
            "--b",
            &b,
            "--duration",
            "120",
        ])
        .arg("--report")
        .arg(&report)
        .output()
        .expect("run xpress netns");
    let text = format!("{}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "FTP over kernel TCP through the lossy gigabit link failed:\n{text}");
    torn_down(&out);
    let got = std::fs::read(dir.join("got")).unwrap_or_default();
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(got == data, "retrieved {} of {} bytes, or different ones:\n{text}", got.len(), data.len());
    if !text.contains("TUN offloads: TCP") {
        eprintln!("the kernel refused TUN offloads here: batching not checked\n{text}");
        return;
    }
    // Data flows A -> B: the forward direction.
    let lost = r["forward"]["drop_loss"].as_u64().unwrap();
    let corrupted = r["forward"]["corrupted"].as_u64().unwrap();
    let released = r["forward"]["delivered"].as_u64().unwrap() + r["reverse"]["delivered"].as_u64().unwrap();
    let writes = r["send_calls"].as_u64().unwrap();
    eprintln!(
        "1 Gbit/s, 1 % loss, 0.5 % corruption: {lost} data segments lost, {corrupted} corrupted, \
         {released} packets released in {writes} writes; valid {} {}, p99 {} / {} us",
        r["valid"],
        r["invalid_reasons"],
        r["forward"]["release_error_p99_us"],
        r["reverse"]["release_error_p99_us"]
    );
    assert!(lost > 100, "too few losses to have split super-packets: {r}");
    assert!(corrupted > 50, "too few corrupted segments to have tested them: {r}");
    assert!(writes * 2 < released, "{writes} writes for {released} packets: not batched: {r}");
    held_up(&r);
}

/// The emulator kept up: the kernel dropped nothing on the devices, every
/// read was split into packets, and the release error stayed far from the
/// 53 ms stalls of the per-packet loop at 1 Gbit/s. The 200 µs validity
/// limit itself is judged by the report's runs in a release build
/// (PERF.md); this debug build on a shared 2-core machine can miss it by
/// scheduling alone. The bound here is 5 ms, a tenth of those stalls: a
/// local CI run saw a p99 of 2.7 ms when the virtual CPU was descheduled
/// for 4.3 ms (the report said so), which a 1 ms bound failed.
fn held_up(r: &serde_json::Value) {
    let reasons = r["invalid_reasons"].to_string();
    match r["kernel_drops"].as_u64() {
        Some(n) => assert_eq!(n, 0, "the kernel dropped {n} packets on the devices: {reasons}\n{r}"),
        None => eprintln!("the devices' drop counters could not be read: drops not checked"),
    }
    assert!(!reasons.contains("could not be split"), "{reasons}\n{r}");
    for dir in ["forward", "reverse"] {
        let p99 = r[dir]["release_error_p99_us"].as_f64().unwrap();
        assert!(p99 < 5_000.0, "{dir} release error p99 {p99} µs: {reasons}\n{r}");
    }
}

/// A small TCP MSS (the receiver advertises 200 bytes) through the batched
/// emulator: the sender's TSO super-packets then hold far more segments
/// than at 1,500 bytes (64 KB / 188 B is 348), more than the emulator has
/// buffers to split one into. The device's `gso_max_segs` keeps the stack
/// under that; without it every read of a large super-packet fails and the
/// flow stalls on refused retransmissions. Checks 4 MB arrive byte for byte
/// and the run is valid (no read counted as malformed).
#[test]
fn kernel_tcp_with_a_small_mss_is_split_and_byte_exact() {
    if !is_root() {
        eprintln!("skipped: xpress netns needs root (namespaces, TUN); CI runs this as root");
        return;
    }
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = std::env::temp_dir().join(format!("xpress-gso-mss-{}", std::process::id()));
    let root = dir.join("root");
    std::fs::create_dir_all(&root).unwrap();
    let data: Vec<u8> = (0..4_000_000u64).map(|i| (i.wrapping_mul(2_654_435_761) >> 11) as u8).collect();
    std::fs::write(root.join("big"), &data).unwrap();
    let (r, d) = (root.display(), dir.display());
    let url = "ftp://u:p@10.200.0.1:2121";
    let a = format!("exec {X} ftp serve --root {r} --listen 10.200.0.1:2121 --user u --password p");
    // B's route to A advertises MSS 200 (A's TCP sends 188-byte segments
    // with timestamps).
    let b = format!(
        "dev=$(ip -o route get $XPRESS_PEER | awk '{{print $3}}') && \
         ip route replace $XPRESS_PEER dev $dev src 10.200.0.2 advmss 200 && \
         {X} ftp get {url}/big {d}/got"
    );
    let report = dir.join("report.json");
    let out = Command::new(X)
        .args(["netns", "--link", "delay 1ms rate 100mbit", "--a", &a, "--b", &b, "--duration", "60"])
        .arg("--report")
        .arg(&report)
        .output()
        .expect("run xpress netns");
    let text = format!("{}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "FTP with MSS 200 through the emulator failed:\n{text}");
    torn_down(&out);
    let got = std::fs::read(dir.join("got")).unwrap_or_default();
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(got == data, "retrieved {} of {} bytes, or different ones:\n{text}", got.len(), data.len());
    held_up(&r);
    // 4 MB in 188-byte segments: the small MSS was in force.
    let delivered = r["forward"]["delivered"].as_u64().unwrap();
    assert!(delivered > 20_000, "{delivered} packets for 4 MB: MSS 200 not in force: {r}");
}

/// Reordering survives batching: 10 MB over kernel TCP (FTP) through a
/// 1 Gbit/s link whose 30 µs jitter reorders neighbouring segments (12 µs
/// apart), most of them within one batch. tun-rs's GRO, given a whole
/// batch, would put them back in order (it prepends a segment to the one
/// it precedes); the emulator writes a reordered segment alone. The
/// receiver's out-of-order arrivals (`TcpExtTCPOFOQueue` in B, by `nstat`)
/// must be at least 60 % of the data segments the emulator released after
/// a later one (from its `--log`): about 90 % with the fix, about 25 % when
/// GRO was given the whole batch.
#[test]
fn reordering_inside_a_batch_reaches_the_receiver() {
    if !is_root() {
        eprintln!("skipped: xpress netns needs root (namespaces, TUN); CI runs this as root");
        return;
    }
    if Command::new("nstat").arg("-V").output().is_err() {
        eprintln!("skipped: nstat (iproute2) is not installed");
        return;
    }
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = std::env::temp_dir().join(format!("xpress-gso-reorder-{}", std::process::id()));
    let root = dir.join("root");
    std::fs::create_dir_all(&root).unwrap();
    let data: Vec<u8> = (0..10_000_000u64).map(|i| (i.wrapping_mul(2_654_435_761) >> 7) as u8).collect();
    std::fs::write(root.join("big"), &data).unwrap();
    let (r, d) = (root.display(), dir.display());
    let url = "ftp://u:p@10.200.0.1:2121";
    let a = format!("exec {X} ftp serve --root {r} --listen 10.200.0.1:2121 --user u --password p");
    let b = format!("{X} ftp get {url}/big {d}/got && nstat -az TcpExtTCPOFOQueue");
    let log = dir.join("log.jsonl");
    let out = Command::new(X)
        .args(["netns", "--link", "delay 1ms 30us jitter-reorders rate 1gbit", "--a", &a, "--b", &b])
        .args(["--duration", "60", "--log"])
        .arg(&log)
        .output()
        .expect("run xpress netns");
    let text = format!("{}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "FTP through the reordering link failed:\n{text}");
    torn_down(&out);
    let got = std::fs::read(dir.join("got")).unwrap_or_default();
    let events = std::fs::read_to_string(&log).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(got == data, "retrieved {} of {} bytes, or different ones:\n{text}", got.len(), data.len());
    if !text.contains("TUN offloads: TCP") {
        eprintln!("the kernel refused TUN offloads here: nothing is batched, nothing to check\n{text}");
        return;
    }
    // Data segments (A -> B) released after a later one.
    let (mut newest, mut late) = (None, 0u64);
    for e in events.lines().filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok()) {
        if e["event"] != "release" || e["dir"] != "forward" || e["len"].as_u64().unwrap_or(0) < 500 {
            continue;
        }
        let id = e["id"].as_u64().unwrap();
        if newest.is_some_and(|n| id < n) {
            late += 1;
        }
        newest = newest.max(Some(id));
    }
    let ofo: u64 = String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("TcpExtTCPOFOQueue")?.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no TcpExtTCPOFOQueue from nstat:\n{text}"));
    eprintln!("jitter 30 us at 1 Gbit/s: {late} data segments released late, {ofo} arrived out of order");
    assert!(late > 500, "too little reordering to test: {late}");
    assert!(
        ofo * 10 >= late * 6,
        "{late} segments released out of order, {ofo} arrived so: GRO put them back"
    );
}

/// `max` of a `tcp_rmem` / `tcp_wmem` line.
fn buffer_max(line: &str) -> u64 {
    line.split_whitespace()
        .nth(2)
        .and_then(|w| w.parse().ok())
        .unwrap_or_else(|| panic!("not a triple: {line:?}"))
}

/// Kernel TCP in the namespaces may fill the emulated path: at 1 Gbit/s and
/// 200 ms (25 MB in flight) `tcp_rmem` / `tcp_wmem`'s maximum inside them is
/// at least twice that, the host's own values are untouched, and
/// `--keep-tcp-buffers` leaves the host's in the namespaces. (Before, a
/// namespace kept the host's 4 MiB `tcp_wmem`: 3.67 MB per round trip.)
#[test]
fn tcp_buffers_in_the_namespaces_fit_the_path() {
    if !is_root() {
        eprintln!("skipped: xpress netns needs root");
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let host = |k: &str| std::fs::read_to_string(format!("/proc/sys/net/ipv4/{k}")).unwrap();
    let (host_r, host_w) = (host("tcp_rmem"), host("tcp_wmem"));
    let read = "cat /proc/sys/net/ipv4/tcp_rmem /proc/sys/net/ipv4/tcp_wmem";
    let run = |extra: &[&str]| {
        let out = Command::new(X)
            .args(["netns", "--link", "rate 1000mbit delay 100ms limit 1000", "--b", read, "--settle", "0"])
            .args(extra)
            .output()
            .expect("run xpress netns");
        assert!(out.status.success(), "xpress netns failed: {}", String::from_utf8_lossy(&out.stderr));
        torn_down(&out);
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        (buffer_max(lines[0]), buffer_max(lines[1]), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let (r, w, err) = run(&[]);
    let bdp = 1_000_000_000u64 / 8 / 5; // 1 Gbit/s x 200 ms
    assert!(r >= 2 * bdp && w >= 2 * bdp, "namespace tcp_rmem max {r}, tcp_wmem max {w}: under 2 x {bdp}");
    assert!(r >= buffer_max(&host_r) && w >= buffer_max(&host_w), "below the host's: {r} {w}");
    assert!(
        err.contains(&format!("tcp_wmem max {} -> {w}", buffer_max(&host_w))),
        "startup line missing:\n{err}"
    );
    assert_eq!(
        (host("tcp_rmem"), host("tcp_wmem")),
        (host_r.clone(), host_w.clone()),
        "the host's values changed"
    );
    let (r, w, err) = run(&["--keep-tcp-buffers"]);
    assert_eq!((r, w), (buffer_max(&host_r), buffer_max(&host_w)), "--keep-tcp-buffers changed them");
    assert!(err.contains("the host's kept"), "{err}");
}
