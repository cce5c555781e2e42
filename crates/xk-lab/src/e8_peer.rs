//! E8's far hosts: an application on its own engine thread, as the echo
//! of the ping-pong or the sink of the synchronous and pipelined sends
//! (split out of `e8_calib.rs`, Session 20, which had passed 1,400 lines).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use xk_driver::driver::UdpDriver;
use xk_driver::engine::{self, CtxHandle, EngineConfig, Notice};
use xk_driver::trace::mono_ns;
use xk_time::Duration;
use xtp_proto::{ContextConfig, EndpointConfig};

use crate::e8_measure::{engine_threads, threads_named};

/// An application on its own engine thread, the far host of the
/// user-level measurements (seed 004 measured between two applications,
/// each with its protocol processor): it reads each whole message
/// (copying it out, as `recv_message` does) and, as the echo, writes it
/// back (copying it in); as the sink, drops it. Until dropped.
pub(crate) struct PeerApp {
    pub(crate) addr: SocketAddr,
    /// Its thread's and its engine thread's ids.
    pub(crate) tids: Vec<String>,
    /// Its thread's id alone.
    pub(crate) app_tid: Option<String>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
    /// Its engine's reply hold in force, µs (recorded in the rows).
    pub(crate) reply_hold_us: u64,
    /// While on: the application stamps `CLOCK_MONOTONIC` (vDSO, ~20 ns)
    /// after copying out each whole message (Session 20: the synchronous
    /// sends' one-way time to the application, the latency measured on
    /// another operation than the ping-pong).
    stamping: Arc<AtomicBool>,
    /// Those stamps, ns, in order.
    done: Arc<Mutex<Vec<u64>>>,
}

impl PeerApp {
    /// Starts stamping each whole message copied out (the stamps before
    /// are dropped).
    pub(crate) fn start_stamps(&self) {
        self.done.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clear();
        self.stamping.store(true, Ordering::Release);
    }

    /// Stops stamping once `n` messages were stamped or `within` passed,
    /// and returns the stamps.
    pub(crate) fn take_stamps(&self, n: usize, within: std::time::Duration) -> Vec<u64> {
        let until = std::time::Instant::now() + within;
        loop {
            let have = self.done.lock().unwrap_or_else(std::sync::PoisonError::into_inner).len();
            if have >= n || std::time::Instant::now() >= until {
                break;
            }
            std::thread::sleep(std::time::Duration::from_micros(200));
        }
        self.stamping.store(false, Ordering::Release);
        std::mem::take(&mut *self.done.lock().unwrap_or_else(std::sync::PoisonError::into_inner))
    }

    /// Its engine thread's id (None when not found).
    pub(crate) fn engine_tid(&self) -> Option<&String> {
        self.tids.iter().find(|t| Some(*t) != self.app_tid.as_ref())
    }

    /// The echo (thread `e8-echo-app`, found by name in traces).
    pub(crate) fn echo() -> Result<PeerApp, String> {
        PeerApp::start(true, None)
    }

    /// The sink (thread `e8-sink-app`); `reply_hold`: how long its engine
    /// holds an acknowledgement back for an answer the sink never gives
    /// (None: the engine's default).
    pub(crate) fn sink(reply_hold: Option<Duration>) -> Result<PeerApp, String> {
        PeerApp::start(false, reply_hold)
    }

    fn start(echo: bool, reply_hold: Option<Duration>) -> Result<PeerApp, String> {
        let stop = Arc::new(AtomicBool::new(false));
        let halt = stop.clone();
        let stamping = Arc::new(AtomicBool::new(false));
        let done = Arc::new(Mutex::new(Vec::with_capacity(4096)));
        let (stamp_on, stamps) = (stamping.clone(), done.clone());
        let (tx, rx) = std::sync::mpsc::channel();
        let name = if echo { "e8-echo-app" } else { "e8-sink-app" };
        // Its engine: the engine thread that appears while it starts (E8
        // starts one thing at a time).
        let before = engine_threads();
        let thread = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                let e = |e: std::io::Error| format!("E8 {name}: {e}");
                let made = (|| {
                    let d = UdpDriver::bind("127.0.0.1:0", EndpointConfig::default(), 85).map_err(e)?;
                    let addr = d.local_addr().map_err(e)?;
                    let def = EngineConfig::default();
                    let cfg = EngineConfig { reply_hold: reply_hold.unwrap_or(def.reply_hold), ..def };
                    let mut c = engine::spawn(d, cfg).map_err(e)?;
                    c.listen(7, ContextConfig::stream()).map_err(e)?;
                    Ok::<_, String>((c, addr))
                })();
                let mut c = match made {
                    Ok((c, addr)) => {
                        let _ = tx.send(Ok(addr));
                        c
                    }
                    Err(err) => {
                        let _ = tx.send(Err(err));
                        return;
                    }
                };
                let mut open: Vec<(CtxHandle, Vec<u8>)> = Vec::new();
                while !halt.load(Ordering::Relaxed) {
                    if c.wait_for(Duration::from_millis(20), true).is_err() {
                        return;
                    }
                    while let Some(n) = c.next_notice() {
                        match n {
                            Notice::Incoming { ctx, .. } => open.push((ctx, Vec::new())),
                            Notice::Closed { ctx, .. } => open.retain(|o| o.0 != ctx),
                            _ => {}
                        }
                    }
                    for (ctx, buf) in &mut open {
                        while let Some(ch) = c.read_chunk(*ctx) {
                            buf.extend_from_slice(&ch.data);
                            if ch.eom {
                                if stamp_on.load(Ordering::Acquire) {
                                    let t = mono_ns();
                                    stamps.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(t);
                                }
                                if echo {
                                    let _ = c.write(*ctx, Bytes::copy_from_slice(buf), true, None);
                                }
                                buf.clear();
                            }
                        }
                    }
                }
            })
            .map_err(|e| format!("E8: start {name}: {e}"))?;
        let addr = rx.recv().map_err(|_| format!("E8: {name} ended before it started"))??;
        let mut tids: Vec<String> = engine_threads().difference(&before).cloned().collect();
        let app: Vec<String> = threads_named(name).into_iter().collect();
        let app_tid = (app.len() == 1).then(|| app[0].clone());
        tids.extend(app);
        let hold = reply_hold.unwrap_or(EngineConfig::default().reply_hold);
        let reply_hold_us = u64::try_from(hold.as_micros()).unwrap_or(u64::MAX);
        Ok(PeerApp { addr, tids, app_tid, stop, thread: Some(thread), reply_hold_us, stamping, done })
    }
}

impl Drop for PeerApp {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
