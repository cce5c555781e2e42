//! Endpoints that outlive their API objects linger on one reaper thread,
//! not a thread each: a client running one-shot transactions back to back
//! binds an endpoint per call, and each keeps its closed context for the
//! linger (2 s) so that a peer which missed the final acknowledgement
//! still gets it.

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use xk_driver::api::{XtpListener, transaction};
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
    // And they are freed: the reaper stays, idle (no thread per endpoint
    // appears or remains).
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(threads_named("xtp-linger"), 1);
}
