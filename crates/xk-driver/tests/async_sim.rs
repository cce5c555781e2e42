//! The async API's simulated backend (`aio::SimNet`) on its own: a stream
//! both ways over a lossy, rate-limited simulated link, byte-exact, in
//! virtual time; the same seed replays the same trace; addresses outside
//! the network and ports in use are refused with errors that say so.
//! (FTP's conformance suite runs over it in `xk-ftp`'s `tests/ftp.rs`.)
//!
//! Run with `cargo test -p xk-driver --features tokio --test async_sim`.
#![cfg(feature = "tokio")]

use std::net::SocketAddr;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use xk_driver::aio::{SimNet, SimReport};
use xk_netemu::{LinkParams, Loss};
use xk_time::Duration;

fn pattern(n: usize, salt: u8) -> Vec<u8> {
    (0..n).map(|i| (i as u8).wrapping_mul(31).wrapping_add(salt) ^ (i >> 11) as u8).collect()
}

/// 50 Mbit/s, 5 ms, 2 % loss, some reordering.
fn link() -> LinkParams {
    LinkParams {
        delay: Duration::from_millis(5),
        jitter: Duration::from_millis(1),
        jitter_reorders: true,
        rate_bps: 50_000_000,
        loss: Loss::Bernoulli(0.02),
        ..LinkParams::default()
    }
}

/// 1 MB to the server, which sends it back reversed; returns the network's
/// report and the virtual time taken.
fn echo(seed: u64) -> (SimReport, std::time::Duration) {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().start_paused(true).build().unwrap();
    rt.block_on(async {
        let net = SimNet::new(seed, link(), link()).unwrap();
        let start = tokio::time::Instant::now();
        let at = SocketAddr::new(net.server_ip(), 7000);
        let l = net.bind(at, 9).await.unwrap();
        assert_eq!(l.local_addr(), at);
        let server = tokio::spawn(async move {
            let (mut s, peer) = l.accept().await.unwrap();
            let mut got = Vec::new();
            s.read_to_end(&mut got).await.unwrap();
            got.reverse();
            s.write_all(&got).await.unwrap();
            s.shutdown().await.unwrap();
            peer
        });
        let data = pattern(1 << 20, 3);
        let mut c = net.connect(at, 9).await.unwrap();
        c.write_all(&data).await.unwrap();
        c.shutdown().await.unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        let mut back = Vec::new();
        c.read_to_end(&mut back).await.unwrap();
        let peer = server.await.unwrap();
        assert_eq!(peer.ip(), net.client_ip(), "the stream came from the client host");
        back.reverse();
        assert!(back == data, "seed {seed}: not byte-exact");
        let r = net.report();
        assert!(r.to_server.drop_loss > 0 && r.to_client.drop_loss > 0, "the link lost nothing: {r}");
        (r, start.elapsed())
    })
}

#[test]
fn a_stream_over_a_lossy_simulated_link_is_byte_exact_and_replays() {
    let (a, ta) = echo(5);
    eprintln!("{a}; {ta:?} virtual");
    // 2 MB at 50 Mbit/s takes 336 ms on the wire; virtual time, so the
    // test takes a fraction of that in wall time.
    assert!(ta >= std::time::Duration::from_millis(336), "{ta:?}");
    let (b, tb) = echo(5);
    assert_eq!((a.run.trace_hash, ta), (b.run.trace_hash, tb), "seed 5: two runs differ");
    let (c, _) = echo(6);
    assert_ne!(a.run.trace_hash, c.run.trace_hash);
}

#[tokio::test(start_paused = true)]
async fn addresses_outside_the_network_and_ports_in_use_are_refused() {
    let net = SimNet::new(1, LinkParams::default(), LinkParams::default()).unwrap();
    let e = net.connect("192.0.2.1:1".parse().unwrap(), 9).await.err().unwrap();
    assert!(e.to_string().contains("no simulated host at 192.0.2.1"), "{e}");
    let at = SocketAddr::new(net.server_ip(), 21);
    let _l = net.bind(at, 21).await.unwrap();
    let e = net.bind(at, 21).await.err().unwrap();
    assert_eq!(e.kind(), std::io::ErrorKind::AddrInUse, "{e}");
    let e = net.connect_from(net.client_ip(), SocketAddr::new(net.third_ip(), 1), 9).await.err().unwrap();
    assert!(e.to_string().contains("no simulated link"), "{e}");
}

/// A stream outliving its network fails with the reason, not a hang.
#[tokio::test(start_paused = true)]
async fn a_stream_whose_network_is_dropped_fails_instead_of_hanging() {
    let net = SimNet::new(2, LinkParams::default(), LinkParams::default()).unwrap();
    let at = SocketAddr::new(net.server_ip(), 7001);
    let l = net.bind(at, 9).await.unwrap();
    let mut c = net.connect(at, 9).await.unwrap();
    c.write_all(b"hello").await.unwrap();
    drop(net);
    drop(l);
    let mut buf = [0u8; 8];
    let r = tokio::time::timeout(std::time::Duration::from_secs(30), c.read(&mut buf)).await;
    let e = r.expect("the read ended, not hung").expect_err("the network is gone");
    assert!(e.to_string().contains("SimNet was dropped"), "{e}");
}
