//! Memory held per established, idle context (issue #13: a million
//! established idle contexts must fit a stated budget).
//!
//! A counting global allocator (`cap`) measures the heap of two endpoints joined by a
//! perfect wire. The client opens `N` stream contexts, writes one byte on
//! each, the server reads it, and both go quiet: every context established
//! (key exchange done, nothing unacknowledged, nothing unread). Dropping the
//! client endpoint separates the two sides' shares.
//!
//! `N` is 100,000 here; `XTP_MEMORY_N=1000000 cargo test --release -p
//! xtp-proto --test memory -- --nocapture` measures the million
//! (docs/PERF.md).

mod common;

use std::net::SocketAddr;

use bytes::Bytes;
use cap::Cap;
use common::Wire;
use xk_time::{Duration, Instant};
use xtp_proto::{ContextConfig, Endpoint, EndpointConfig, Event};

// Counts live heap bytes (the `cap` crate: the workspace forbids `unsafe`,
// which a hand-written counting allocator needs).
#[global_allocator]
static HEAP: Cap<std::alloc::System> = Cap::new(std::alloc::System, usize::MAX);

/// Bytes per context a server and a client may hold when established and
/// idle: 4 KiB, so 1,000,000 contexts fit in 4 GiB per side (measured about
/// 3.1 KB: the context itself is ~1.8 KB, held in a vector that grows by
/// doubling, plus its buffers' and tables' share; docs/PERF.md).
const BUDGET_PER_CONTEXT: usize = 4096;

#[test]
fn established_idle_contexts_fit_the_budget() {
    let n: usize = std::env::var("XTP_MEMORY_N").ok().and_then(|v| v.parse().ok()).unwrap_or(100_000);
    let ca: SocketAddr = "10.0.0.1:4000".parse().unwrap();
    let sa: SocketAddr = "10.0.0.2:3636".parse().unwrap();
    let cfg = EndpointConfig { max_contexts_per_peer: usize::MAX, ..EndpointConfig::default() };
    let before = HEAP.allocated();
    let client = Endpoint::new(cfg.clone(), 1);
    let mut server = Endpoint::new(cfg, 2);
    server.listen(7, ContextConfig::stream()).unwrap();
    let mut w = Wire::new(server, sa, client, ca, Instant::ZERO);
    // Open in batches so the wire's queues stay small.
    let mut read = 0usize;
    for batch in 0..n.div_ceil(1_000) {
        for _ in 0..(n - batch * 1_000).min(1_000) {
            let id = w.b.connect(w.now, sa, 7, ContextConfig::stream()).unwrap();
            w.b.write(w.now, id, Bytes::from_static(b"x"), true, None).unwrap();
        }
        w.run(Duration::from_millis(1));
        while let Some(ev) = w.a.poll_event() {
            if let Event::Readable { ctx } = ev {
                while let Some(c) = w.a.read(w.now, ctx) {
                    read += c.data.len();
                }
            }
        }
        while w.b.poll_event().is_some() {}
    }
    // Let acknowledgements settle (no timer is due this soon: keep-alive is
    // minutes away).
    w.run(Duration::from_millis(50));
    assert_eq!(read, n, "every context delivered its byte");
    assert_eq!(w.a.context_count(), n);
    assert_eq!(w.b.context_count(), n);
    let both = HEAP.allocated() - before;
    let Wire { a: server, b: client, .. } = w;
    drop(client);
    let server_bytes = HEAP.allocated() - before;
    let client_bytes = both - server_bytes;
    let (per_server, per_client) = (server_bytes / n, client_bytes / n);
    println!(
        "{n} established idle contexts: server {:.1} MiB ({per_server} B each), client {:.1} MiB ({per_client} B each)",
        server_bytes as f64 / (1 << 20) as f64,
        client_bytes as f64 / (1 << 20) as f64
    );
    assert!(per_server <= BUDGET_PER_CONTEXT, "server: {per_server} B per context");
    assert!(per_client <= BUDGET_PER_CONTEXT, "client: {per_client} B per context");
    drop(server);
}
