//! The reaper's bound closes ended endpoints first: an endpoint whose
//! stream was dropped before its close completed (a timeout) still has a
//! peer waiting on it, and must outlive the one-shot transactions that
//! crowd the reaper after it. (A test binary of its own: it lowers the
//! process's descriptor limit, which fixes the reaper's bound for the
//! process.)

use std::io::{Read, Write};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use xk_driver::api::{XtpListener, XtpStream, linger_counts, max_lingering, transaction};

const ECHO: u16 = 7;
const SLOW: u16 = 9;

#[test]
fn a_stream_still_closing_outlives_the_bound_ended_ones_are_closed_first() {
    // Soft limit 200: the reaper keeps at most 50 lingering endpoints.
    let mut lim = rustix::process::getrlimit(rustix::process::Resource::Nofile);
    lim.current = Some(200);
    rustix::process::setrlimit(rustix::process::Resource::Nofile, lim).unwrap();
    assert_eq!(max_lingering(), 50);
    const N: usize = 120;
    const BYTES: usize = 256 * 1024;

    // A transaction server (uppercase echo).
    let (tx, rx) = mpsc::channel();
    let echo = std::thread::spawn(move || {
        let mut l = XtpListener::bind("127.0.0.1:0", ECHO).unwrap();
        tx.send(l.local_addr().unwrap()).unwrap();
        let (mut served, t0) = (0, Instant::now());
        while served < N && t0.elapsed() < Duration::from_secs(60) {
            let Ok((mut s, _, _)) = l.accept_timeout(Some(Duration::from_millis(20))) else { continue };
            let mut req = Vec::new();
            s.read_to_end(&mut req).unwrap();
            s.write_all(&req.to_ascii_uppercase()).unwrap();
            s.close().unwrap();
            served += 1;
        }
        served
    });
    let echo_addr = rx.recv().unwrap();

    // A slow server: accepts, then reads only when told to, then closes.
    let (tx, rx) = mpsc::channel();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let slow = std::thread::spawn(move || {
        let mut l = XtpListener::bind("127.0.0.1:0", SLOW).unwrap();
        tx.send(l.local_addr().unwrap()).unwrap();
        let (mut s, _, _) = l.accept_timeout(Some(Duration::from_secs(10))).unwrap();
        go_rx.recv().unwrap();
        let mut got = Vec::new();
        s.set_timeout(Some(Duration::from_secs(10)));
        let read = s.read_to_end(&mut got).map(|_| got.len());
        // Graceful close needs the client's endpoint to acknowledge.
        let closed = s.close();
        (read.map_err(|e| e.to_string()), closed.map_err(|e| e.to_string()))
    });
    let slow_addr = rx.recv().unwrap();

    // The client writes, then drops its stream while the server is not
    // reading: its close times out and the endpoint goes to the reaper
    // with a context that has not ended.
    let mut c = XtpStream::connect(slow_addr, SLOW).unwrap();
    c.write_all(&vec![7u8; BYTES]).unwrap();
    c.set_timeout(Some(Duration::from_millis(300)));
    drop(c);

    // Then enough back-to-back transactions to push the reaper past its
    // bound more than twice over: each leaves an ended endpoint.
    for i in 0..N {
        let req = format!("request {i}");
        let resp = transaction(echo_addr, ECHO, req.as_bytes(), Duration::from_secs(10)).unwrap();
        assert_eq!(resp, req.to_ascii_uppercase().as_bytes());
    }
    assert_eq!(echo.join().unwrap(), N);
    let t0 = Instant::now();
    let mut counts = linger_counts();
    while counts.evicted < (N - 50) as u64 && t0.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
        counts = linger_counts();
    }
    assert!(counts.evicted >= (N - 50) as u64, "{counts:?}");

    // Now the server reads: everything arrives and its close completes,
    // answered by the client's endpoint on the reaper.
    go_tx.send(()).unwrap();
    let (read, closed) = slow.join().unwrap();
    assert_eq!(read, Ok(BYTES));
    assert_eq!(closed, Ok(()));
    assert_eq!(counts.evicted_live, 0, "the closing endpoint was closed early: {counts:?}");
}
