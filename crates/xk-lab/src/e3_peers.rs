//! E3's servers and clients as processes: our FTP (`xpress ftp serve` /
//! `xpress ftp get`, over kernel TCP or XTP) and a standard pair, vsftpd
//! with curl — on loopback, or as the commands `xpress netns` starts on
//! each side of an emulated link.
//!
//! Every retrieval is one client process run by a small shell script
//! that prints what E3 needs as lines: `XPRESS_SIZE n rep` before each
//! retrieval, then the client's own result (`got N bytes in S s …` from
//! ours, `XPRESS_CURL bytes lookup total` from curl's `-w`), then,
//! when GNU time is installed, `XPRESS_TIME user system maxrss_kb` for the
//! client process alone. The same script runs on loopback and inside a
//! network namespace, so the two are measured the same way.
//!
//! Latency is the client's own timing from connecting to the last byte of
//! the file, login included and process start excluded — the same span
//! for both clients: ours prints it ("… s from connect"); curl's is
//! `time_total - time_namelookup` (the address is a literal, so the
//! lookup is nothing). curl has no mark after the login that would match
//! ours after it (its "pretransfer" comes after RETR's answer), so the
//! span without the login cannot be compared.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::serve_proc::Reaped;

/// The standard pair's name in E3's `transports`.
pub(crate) const PAIR: &str = "vsftpd-curl";
/// Our server's account.
const USER: &str = "lab";
/// vsftpd's binary.
const VSFTPD: &str = "/usr/sbin/vsftpd";
/// GNU time's binary.
const GNU_TIME: &str = "/usr/bin/time";

/// One retrieval as the script reported it.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Sample {
    pub(crate) size: u64,
    pub(crate) rep: u32,
    pub(crate) bytes: u64,
    pub(crate) latency_s: f64,
    /// The client's user and system CPU seconds and peak memory (kB), from
    /// GNU time; `None` without it.
    pub(crate) usage: Option<(f64, f64, u64)>,
    /// Our client's own peak memory report (kB), 0 for curl.
    pub(crate) self_peak_kb: u64,
}

/// Whether GNU time is installed (it measures each client process alone).
pub(crate) fn have_gnu_time() -> bool {
    Command::new(GNU_TIME).arg("--version").output().is_ok_and(|o| {
        String::from_utf8_lossy(&o.stdout).contains("GNU")
            || String::from_utf8_lossy(&o.stderr).contains("GNU")
    })
}

/// Whether the standard pair can run here, or why not.
pub(crate) fn pair_missing(root: bool) -> Option<String> {
    if !root {
        return Some("vsftpd needs root (it chroots to the served directory)".into());
    }
    if !Path::new(VSFTPD).exists() {
        return Some(format!("{VSFTPD} is not installed (Debian: apt-get install vsftpd)"));
    }
    if !Command::new("curl").arg("--version").output().is_ok_and(|o| o.status.success()) {
        return Some("curl is not installed".into());
    }
    None
}

/// The shell command that retrieves `/f{size}` from `addr` (`host:port`)
/// once per repetition for every size, printing the lines described above.
pub(crate) fn client_script(
    exe: &Path,
    transport: &str,
    addr: &str,
    sizes: &[u64],
    reps: u32,
    time: bool,
) -> String {
    let wrap = if time { format!("{GNU_TIME} -f 'XPRESS_TIME %U %S %M' ") } else { String::new() };
    let client = if transport == PAIR {
        format!(
            "curl -sS -o /dev/null -w 'XPRESS_CURL %{{size_download}} %{{time_namelookup}} %{{time_total}}\\n' ftp://{addr}/f$n"
        )
    } else {
        format!("{} ftp get ftp://{USER}:{USER}@{addr}/f$n /dev/null --transport {transport}", exe.display())
    };
    let sizes: Vec<String> = sizes.iter().map(u64::to_string).collect();
    format!(
        "for n in {}; do for r in $(seq 1 {reps}); do echo \"XPRESS_SIZE $n $r\"; {wrap}{client} 2>&1; done; done",
        sizes.join(" ")
    )
}

/// Reads the script's output; a retrieval without a result line is an
/// error naming what the client said.
pub(crate) fn parse(text: &str) -> Result<Vec<Sample>, String> {
    let mut out: Vec<Sample> = Vec::new();
    let mut said: Vec<&str> = Vec::new();
    let mut done = true;
    let unfinished = |s: &Sample, said: &[&str]| {
        format!("the {} B retrieval (repetition {}) gave no result: {}", s.size, s.rep, said.join(" / "))
    };
    for line in text.lines() {
        let w: Vec<&str> = line.split_whitespace().collect();
        let num = |i: usize| w.get(i).and_then(|v| v.parse::<f64>().ok());
        match w.first().copied() {
            Some("XPRESS_SIZE") => {
                if let Some(s) = out.last().filter(|_| !done) {
                    return Err(unfinished(s, &said));
                }
                said.clear();
                done = false;
                out.push(Sample {
                    size: num(1).ok_or("bad XPRESS_SIZE line")? as u64,
                    rep: num(2).ok_or("bad XPRESS_SIZE line")? as u32,
                    ..Sample::default()
                });
            }
            // "got N bytes in S s (R Mbit/s), T s from connect, peak memory K kB"
            Some("got") => {
                let s = out.last_mut().ok_or("a result before any XPRESS_SIZE")?;
                s.bytes = num(1).ok_or("bad result line")? as u64;
                s.latency_s = w
                    .iter()
                    .position(|x| *x == "from")
                    .and_then(|i| w.get(i.checked_sub(2)?)?.parse().ok())
                    .ok_or("bad result line (no time from connect)")?;
                s.self_peak_kb = w
                    .iter()
                    .position(|x| *x == "memory")
                    .and_then(|i| w.get(i + 1)?.parse().ok())
                    .unwrap_or(0);
                done = true;
            }
            Some("XPRESS_CURL") => {
                let s = out.last_mut().ok_or("a result before any XPRESS_SIZE")?;
                let (total, lookup) = (num(3).ok_or("bad curl line")?, num(2).ok_or("bad curl line")?);
                s.bytes = num(1).ok_or("bad curl line")? as u64;
                s.latency_s = total - lookup;
                done = true;
            }
            Some("XPRESS_TIME") => {
                let s = out.last_mut().ok_or("GNU time before any XPRESS_SIZE")?;
                s.usage = Some((
                    num(1).unwrap_or(f64::NAN),
                    num(2).unwrap_or(f64::NAN),
                    num(3).unwrap_or(0.0) as u64,
                ));
            }
            _ => said.push(line),
        }
    }
    match out.last() {
        Some(s) if !done => Err(unfinished(s, &said)),
        _ => Ok(out),
    }
}

/// Our server's command line (`exec`'d by a shell inside a namespace).
pub(crate) fn our_server_cmd(exe: &Path, root: &Path, listen: &str, transport: &str) -> String {
    format!(
        "exec {} ftp serve --root {} --listen {listen} --user {USER} --password {USER} --transport {transport}",
        exe.display(),
        root.display()
    )
}

/// Writes a vsftpd configuration serving `root` read-only to anonymous
/// users on `ip:port` (in the foreground, no sandbox that would need more
/// than the test machine has); returns its path.
pub(crate) fn vsftpd_conf(dir: &Path, root: &Path, ip: &str, port: u16) -> Result<PathBuf, String> {
    let empty = dir.join("vsftpd-empty");
    std::fs::create_dir_all(&empty).map_err(|e| e.to_string())?;
    let conf = dir.join(format!("vsftpd-{ip}-{port}.conf"));
    let text = format!(
        "listen=YES\nlisten_address={ip}\nlisten_port={port}\nbackground=NO\n\
         anonymous_enable=YES\nno_anon_password=YES\nanon_root={}\nlocal_enable=NO\nwrite_enable=NO\n\
         seccomp_sandbox=NO\nisolate=NO\nisolate_network=NO\nsecure_chroot_dir={}\n\
         xferlog_enable=NO\nconnect_from_port_20=NO\npasv_enable=YES\n",
        root.display(),
        empty.display()
    );
    std::fs::write(&conf, text).map_err(|e| e.to_string())?;
    Ok(conf)
}

/// vsftpd's command line for a configuration.
pub(crate) fn vsftpd_cmd(conf: &Path) -> String {
    format!("exec {VSFTPD} {}", conf.display())
}

/// Starts vsftpd on a free loopback port; returns it and its address.
pub(crate) fn vsftpd_loopback(dir: &Path, root: &Path) -> Result<(Reaped, String), String> {
    for _ in 0..5 {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| e.to_string())?
            .port();
        let conf = vsftpd_conf(dir, root, "127.0.0.1", port)?;
        let child = Command::new(VSFTPD)
            .arg(&conf)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("start vsftpd: {e}"))?;
        let p = Reaped(child);
        let addr = format!("127.0.0.1:{port}");
        // Up once it greets; another process may have taken the port.
        for _ in 0..50 {
            if let Ok(mut s) = std::net::TcpStream::connect(&addr) {
                use std::io::Read;
                let _ = s.set_read_timeout(Some(std::time::Duration::from_secs(2)));
                let mut b = [0u8; 64];
                if s.read(&mut b).is_ok_and(|n| b[..n].starts_with(b"220")) {
                    return Ok((p, addr));
                }
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
    Err("vsftpd did not come up on a loopback port in 5 tries".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scripts_output_is_read_per_retrieval() {
        let text = "XPRESS_SIZE 1000 1\ngot 1000 bytes in 0.002 s (3.9 Mbit/s), 0.004 s from connect, peak memory 6800 kB\n\
                    XPRESS_TIME 0.01 0.02 6900\nXPRESS_SIZE 1000 2\nXPRESS_CURL 1000 0.004 0.0065\n";
        let s = parse(text).unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!((s[0].size, s[0].rep, s[0].bytes, s[0].self_peak_kb), (1000, 1, 1000, 6800));
        assert_eq!(s[0].latency_s, 0.004);
        assert_eq!(s[0].usage, Some((0.01, 0.02, 6900)));
        assert!((s[1].latency_s - 0.0025).abs() < 1e-12);
        assert_eq!(s[1].usage, None);
    }

    #[test]
    fn a_retrieval_without_a_result_names_what_the_client_said() {
        let e =
            parse("XPRESS_SIZE 5 1\nxpress: error: 421 too many sessions\nXPRESS_SIZE 5 2\n").unwrap_err();
        assert!(e.contains("5 B retrieval (repetition 1)") && e.contains("421"), "{e}");
        let e = parse("XPRESS_SIZE 5 1\ncurl: (7) Failed to connect\n").unwrap_err();
        assert!(e.contains("Failed to connect"), "{e}");
    }
}
