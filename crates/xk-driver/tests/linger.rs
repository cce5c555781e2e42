//! Endpoints that outlive their API objects linger on one reaper thread,
//! not a thread each: a client running one-shot transactions back to back
//! binds an endpoint per call, and each keeps its closed context lingering
//! (as the END sender, for the peer's retry span) so that a peer which
//! missed the END still gets it. Their number is bounded, as Linux bounds
//! TIME_WAIT sockets.

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use xk_driver::api::{XtpListener, linger_counts, max_lingering, transaction};
use xtp_proto::Service;

const PORT: u16 = 7;

/// Threads of this process named `name`.
fn threads_named(name: &str) -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|c| c.trim_end() == name)
        .count()
}

#[test]
fn back_to_back_transactions_linger_on_one_thread() {
    // A soft descriptor limit of 400 (this test binary runs this test
    // alone): the reaper then keeps at most 100 lingering endpoints, so 300
    // transactions make it close the oldest early — and none fails for want
    // of a descriptor, as they did when every lingering endpoint was kept.
    let mut lim = rustix::process::getrlimit(rustix::process::Resource::Nofile);
    lim.current = Some(400);
    rustix::process::setrlimit(rustix::process::Resource::Nofile, lim).unwrap();
    const N: usize = 300;
    let (tx, rx) = std::sync::mpsc::channel();
    let server = std::thread::spawn(move || {
        // The API objects are not Send: the listener lives on its thread.
        let mut l = XtpListener::bind("127.0.0.1:0", PORT).unwrap();
        tx.send(l.local_addr().unwrap()).unwrap();
        let mut served = 0;
        let t0 = Instant::now();
        while served < N && t0.elapsed() < Duration::from_secs(60) {
            let Ok((mut s, _, service)) = l.accept_timeout(Some(Duration::from_millis(20))) else { continue };
            assert_eq!(service, Service::Transaction);
            let mut req = Vec::new();
            s.read_to_end(&mut req).unwrap();
            s.write_all(&req.to_ascii_uppercase()).unwrap();
            s.close().unwrap();
            served += 1;
        }
        // The listener lingers too (its own contexts), on the same reaper.
        served
    });
    let addr = rx.recv().unwrap();
    let t0 = Instant::now();
    for i in 0..N {
        let req = format!("request {i}");
        let resp = transaction(addr, PORT, req.as_bytes(), Duration::from_secs(10)).unwrap();
        assert_eq!(resp, req.to_ascii_uppercase().as_bytes());
    }
    let took = t0.elapsed();
    // Every transaction's endpoint is lingering now (2 s linger; the loop
    // took less than that or its first ones are gone): one thread holds
    // them all. Before the reaper this was one thread per transaction.
    let lingering = threads_named("xtp-linger");
    assert_eq!(lingering, 1, "{lingering} linger threads after {N} transactions in {took:?}");
    assert_eq!(server.join().unwrap(), N);
    // Each client context sent the END, so it lingers the server's whole
    // retry span (G16; 243 s at the initial RTO): all would be held but for
    // the bound.
    assert_eq!(max_lingering(), 100);
    let (held, evicted) = linger_counts();
    assert_eq!(held, 100, "lingering endpoints held at the bound");
    assert!(evicted >= (N - 100) as u64, "{evicted} closed early of {N}");
    assert_eq!(threads_named("xtp-linger"), 1);
}
