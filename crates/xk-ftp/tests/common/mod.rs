//! What the FTP tests share: scratch directories, test files and their
//! SHA-256, our server on loopback (or a simulated network's server host),
//! a simulated network to run a test on in virtual time, and outside
//! programs run with a time limit and ended by their id when dropped.

// Each test binary uses a different part of these helpers.
#![allow(dead_code, unreachable_pub)]

use std::io::Read;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use tokio::sync::watch;
use xk_driver::aio::SimNet;
use xk_ftp::net::Net;
use xk_ftp::server::{self, Config};
use xk_netemu::{LinkParams, Loss};

/// A fresh, empty directory for this test process.
pub fn tempdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("xk-ftp-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// `n` bytes that differ with `salt` and have no period a short
/// misplaced copy could hide in.
pub fn pattern(n: usize, salt: u8) -> Vec<u8> {
    (0..n).map(|i| (i as u64).wrapping_mul(2_654_435_761).wrapping_add(u64::from(salt)) as u8).collect()
}

/// SHA-256 of bytes, in hex.
pub fn sha(b: &[u8]) -> String {
    hex(&Sha256::digest(b))
}

/// SHA-256 of a file, in hex ("absent" when it cannot be read, so a
/// comparison fails with a readable message).
pub fn sha_file(p: &Path) -> String {
    let Ok(mut f) = std::fs::File::open(p) else { return "absent".into() };
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        match f.read(&mut buf) {
            Ok(0) => return hex(&h.finalize()),
            Ok(n) => h.update(&buf[..n]),
            Err(_) => return "unreadable".into(),
        }
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Bytes of a file (0 when absent).
pub fn len(p: &Path) -> u64 {
    std::fs::metadata(p).map_or(0, |m| m.len())
}

/// Our server's defaults for tests: `alice`/`secret`, loopback, any port,
/// a short delay after a failed login; `tweak` changes the rest.
pub fn config(net: Net, root: &Path, tweak: impl FnOnce(&mut Config)) -> Config {
    let mut cfg = Config::new(root.to_path_buf());
    // A simulated network's server host; loopback otherwise.
    cfg.listen = match &net {
        Net::Sim(s) => SocketAddr::new(s.server_ip(), 21),
        _ => "127.0.0.1:0".parse().unwrap(),
    };
    cfg.net = net;
    cfg.users = vec![("alice".into(), "secret".into())];
    cfg.login_delay = Duration::from_millis(50);
    tweak(&mut cfg);
    cfg
}

/// Our server on the current runtime; it stops when the sender drops.
pub async fn start(
    net: Net,
    root: &Path,
    tweak: impl FnOnce(&mut Config),
) -> (SocketAddr, watch::Sender<bool>) {
    let (tx, rx) = watch::channel(false);
    let addr = server::spawn(config(net, root, tweak), rx).await.unwrap();
    (addr, tx)
}

/// Our server over kernel TCP on a runtime of its own, for tests whose
/// clients are blocking child processes.
pub struct Ours {
    /// Its control address.
    pub addr: SocketAddr,
    _stop: watch::Sender<bool>,
    _rt: tokio::runtime::Runtime,
}

impl Ours {
    /// Serves `root` as `alice`/`secret`.
    pub fn start(root: &Path) -> Ours {
        Ours::start_with(root, |_| {})
    }

    /// Serves `root` as `alice`/`secret`, FTPS required, with a
    /// self-signed certificate for 127.0.0.1.
    pub fn start_tls(root: &Path) -> Ours {
        let (mut tls, _) = xk_ftp::tls::ServerTls::self_signed(&["127.0.0.1".into()]).unwrap();
        tls.required = true;
        Ours::start_with(root, |c| c.tls = Some(tls))
    }

    fn start_with(root: &Path, tweak: impl FnOnce(&mut Config)) -> Ours {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        let (addr, stop) = rt.block_on(start(Net::Tcp, root, tweak));
        Ours { addr, _stop: stop, _rt: rt }
    }
}

/// Whether an outside program can be run (`--version` or `-v` answered).
/// When it cannot, the check is skipped with the reason printed, unless
/// `XPRESS_REQUIRE_FTP_INTEROP` is set (CI sets it after installing them):
/// then a missing program fails the test.
pub fn have(program: &str, probe: &[&str]) -> bool {
    let ok = Command::new(program)
        .args(probe)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok();
    if !ok {
        assert!(
            std::env::var_os("XPRESS_REQUIRE_FTP_INTEROP").is_none(),
            "XPRESS_REQUIRE_FTP_INTEROP is set but {program} cannot be run"
        );
        eprintln!("SKIPPED: {program} is not installed");
    }
    ok
}

/// A child process ended (by its id) when dropped.
pub struct Reaped(pub Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Runs `cmd` to its end or for `limit` at most (then kills it): its
/// output and whether it finished in time. Output is read by threads, so
/// a chatty child never blocks on a full pipe.
pub fn run_for(cmd: &mut Command, limit: Duration) -> (Output, bool) {
    let mut child = Reaped(
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("{cmd:?}: {e}")),
    );
    let drain = |r: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            if let Some(mut r) = r {
                let _ = r.read_to_end(&mut v);
            }
            v
        })
    };
    let out = drain(child.0.stdout.take().map(|s| Box::new(s) as Box<dyn Read + Send>));
    let err = drain(child.0.stderr.take().map(|s| Box::new(s) as Box<dyn Read + Send>));
    let t0 = Instant::now();
    let (status, in_time) = loop {
        if let Some(s) = child.0.try_wait().unwrap() {
            break (s, true);
        }
        if t0.elapsed() > limit {
            let _ = child.0.kill();
            break (child.0.wait().unwrap(), false);
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let o = Output { status, stdout: out.join().unwrap(), stderr: err.join().unwrap() };
    (o, in_time)
}

/// Runs `cmd` (at most `limit`) and requires success; returns its stdout.
pub fn run_ok(what: &str, cmd: &mut Command, limit: Duration) -> String {
    let (o, in_time) = run_for(cmd, limit);
    assert!(in_time, "{what}: still running after {limit:?}");
    assert!(
        o.status.success(),
        "{what}: {}\nstdout: {}\nstderr: {}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The simulated link of one direction: 100 Mbit/s, 10 ms (a 20 ms round
/// trip), Ethernet + IP + UDP framing (42 B a packet), a 1,000-packet
/// queue, and `loss` of the packets lost at random.
pub fn sim_link(loss: f64) -> LinkParams {
    LinkParams {
        delay: xk_time::Duration::from_millis(10),
        rate_bps: 100_000_000,
        overhead: 42,
        limit_packets: 1000,
        loss: if loss > 0.0 { Loss::Bernoulli(loss) } else { Loss::None },
        ..LinkParams::default()
    }
}

/// The seed of the simulator tests: `XPRESS_SIM_SEED` or a fixed one.
pub fn sim_seed() -> u64 {
    std::env::var("XPRESS_SIM_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(19)
}

/// Virtual time a simulator test may take (the lossy round trip takes
/// about 20 s).
pub const SIM_LIMIT: Duration = Duration::from_secs(300);

/// Runs `f` on a simulated network of `seed` with `loss` each way, on a
/// runtime of its own whose clock is paused (virtual time, see
/// `xk_driver::aio::sim`). Prints the seed.
pub fn in_sim<F: std::future::Future>(seed: u64, loss: f64, f: impl FnOnce(Net) -> F) -> F::Output {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().start_paused(true).build().unwrap();
    rt.block_on(async {
        let net = SimNet::new(seed, sim_link(loss), sim_link(loss)).unwrap();
        eprintln!("simulated network: seed {seed} (set XPRESS_SIM_SEED to change it), loss {loss} each way");
        // A test stuck in virtual time would spin through it for ever
        // (timers keep firing): bounded, naming the seed.
        match tokio::time::timeout(SIM_LIMIT, f(Net::Sim(net.clone()))).await {
            Ok(r) => r,
            Err(_) => panic!("seed {seed}: not done within {SIM_LIMIT:?} of virtual time; {}", net.report()),
        }
    })
}
