//! `--pcap`: what the tools write decodes in stock tshark as XTP, every
//! packet type the tools produce, none malformed. The traffic: a transfer
//! through the emulator with loss (DATA, CNTL, FIRST, TCNTL, ECNTL) and a
//! ping whose server is replaced midway (the new one answers the old
//! context with DIAG); the emulator's capture of what crossed its link
//! too; and a ping over IPv6, framed as IPv6. JCNTL (multicast join) is
//! not produced by the tools.
//! Without tshark the test checks that the files were written and says it
//! skipped the decoding.

mod common;

use std::collections::BTreeSet;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::*;

fn tshark(args: &[&str]) -> Option<String> {
    let out = Command::new("tshark").args(args).stderr(Stdio::null()).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

#[test]
fn pcap_files_decode_as_xtp_in_stock_tshark() {
    let dir = std::env::temp_dir().join(format!("xpress-pcap-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = |name: &str| dir.join(name).display().to_string();
    let (spcap, bpcap, ppcap, epcap) = (f("serve.pcap"), f("bulk.pcap"), f("ping.pcap"), f("emulate.pcap"));
    let v6pcap = f("ping6.pcap");

    // A transfer through a lossy emulated path: losses make ECNTL.
    let server = serve(&["--pcap", &spcap]);
    let (relay, via) = emulate(server.addr, "delay 2ms loss 5%", &["--pcap", &epcap]);
    let o = Command::new(X)
        .args(["bulk", "--to", &server.addr.to_string(), "--via", &via.to_string()])
        .args(["-n", "1m", "--pcap", &bpcap])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    interrupt(relay);
    interrupt(server.child); // its capture is complete once it has stopped

    // A ping whose server is replaced: the new one does not know the
    // context and says so with DIAG.
    let first = serve(&[]);
    let addr = first.addr.to_string();
    let mut ping = Reaped(
        Command::new(X)
            .args(["ping", "--to", &addr, "-c", "8", "-i", "0.1", "-W", "0.3"])
            .args(["--pcap", &ppcap])
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    );
    std::thread::sleep(Duration::from_millis(350));
    drop(first);
    let _second = serve_on(&addr, &[]);
    let t0 = std::time::Instant::now();
    while ping.0.try_wait().unwrap().is_none() {
        assert!(t0.elapsed() < Duration::from_secs(20), "ping did not end");
        std::thread::sleep(Duration::from_millis(50));
    }

    // IPv6: the same, framed as IPv6 with next header 36.
    let v6 = serve_on("[::1]:0", &[]);
    let o = Command::new(X)
        .args(["ping", "--to", &v6.addr.to_string(), "-c", "3", "-i", "0.05", "--pcap", &v6pcap])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    drop(v6);

    for p in [&spcap, &bpcap, &ppcap, &epcap, &v6pcap] {
        let len = std::fs::metadata(p).unwrap().len();
        assert!(len > 24 + 100, "{p}: {len} bytes, no packets");
    }
    if tshark(&["--version"]).is_none() {
        eprintln!("skipped the decoding: tshark is not installed (CI installs it)");
        return;
    }
    let mut types = BTreeSet::new();
    for p in [&spcap, &bpcap, &ppcap, &epcap, &v6pcap] {
        let all = tshark(&["-r", p]).unwrap().lines().count();
        let xtp = tshark(&["-r", p, "-Y", "xtp"]).unwrap().lines().count();
        let bad = tshark(&["-r", p, "-Y", "_ws.malformed || _ws.expert.severity >= error"]).unwrap();
        assert!(all > 0 && xtp == all, "{p}: {xtp} of {all} packets decoded as XTP");
        assert!(bad.trim().is_empty(), "{p}: malformed packets:\n{bad}");
        let t = tshark(&["-r", p, "-T", "fields", "-e", "xtp.cmd.ptype.pformat"]).unwrap();
        types.extend(t.lines().map(|l| l.trim().to_string()));
    }
    let v6 = tshark(&["-r", &v6pcap, "-Y", "ipv6.nxt == 36 && xtp"]).unwrap().lines().count();
    assert!(v6 >= 6, "{v6} IPv6 XTP packets in the IPv6 ping's capture");
    // DATA 0, CNTL 1, FIRST 2, ECNTL 3, TCNTL 5, DIAG 8.
    let want: BTreeSet<String> = ["0", "1", "2", "3", "5", "8"].iter().map(|s| s.to_string()).collect();
    assert!(want.is_subset(&types), "packet types seen {types:?}, want {want:?}");
    let _ = std::fs::remove_dir_all(&dir);
}
