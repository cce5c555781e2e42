//! E6 (seed 003, §6.3, Tables 6.1–6.2, Fig. 6.4): file retrieval over packet
//! radio — 255-byte frames, 1,200 and 9,600 bit/s, one half-duplex channel
//! with p-persistent CSMA (the `packet-radio-*` profiles of `xk-netemu`).
//!
//! Method: in the simulator, a client asks for a file with a 20-byte request
//! and the server answers with the file, `transfers` times on one XTP context
//! (XTP sets the context up with its first packet, so the first retrieval
//! carries no extra handshake). Latency is request sent to last file byte
//! received, the seed's definition (requests, replies and file data; no
//! separate data connection). Throughput is file bits over latency,
//! normalised by the channel's bit rate (Table 6.2's measure). Packets are at
//! most 238 bytes (a 255-byte frame less the 17-byte AX.25 header).
//! Everything runs in virtual time, so the numbers are the protocol and the
//! channel, not this machine; each repetition uses another seed.

use serde_json::{Value, json};
use xk_netemu::parse_line;
use xtp_proto::EndpointConfig;

use crate::e1;

/// Seed 003, Table 6.1: throughput in bit/s for 1 B, 100 B, 1 KB, 10 KB files.
pub(crate) const SEED003_T61_BPS: [(u64, [f64; 4]); 2] =
    [(1200, [334.07, 375.21, 212.38, 220.26]), (9600, [758.86, 768.16, 240.92, 248.42])];
/// Seed 003, Table 6.2: normalised throughput, same columns.
pub(crate) const SEED003_T62_NORM: [(u64, [f64; 4]); 2] =
    [(1200, [0.28, 0.31, 0.18, 0.18]), (9600, [0.08, 0.08, 0.03, 0.03])];
/// The file sizes of the seed's columns.
pub(crate) const SEED003_SIZES: [usize; 4] = [1, 100, 1000, 10_000];

const REQUEST_BYTES: usize = 20;

/// One repetition: `transfers` retrievals of a `file`-byte file at `rate`.
pub(crate) fn point(rate: u64, file: usize, transfers: u32, seed: u64) -> Result<Value, String> {
    let spec = parse_line(&format!("profile packet-radio-{rate}")).map_err(|e| e.to_string())?;
    let cfg = EndpointConfig { max_packet: spec.params.mtu, ..EndpointConfig::default() };
    let (sim, [c, srv], _) = e1::exchange(spec.params, &cfg, (REQUEST_BYTES, file), transfers, seed)?;
    let lat = sim.node(c).rtts().to_vec();
    if lat.len() < transfers as usize {
        return Err(format!(
            "E6 {rate} bit/s, {file} B: {} of {transfers} retrievals (seed {seed})",
            lat.len()
        ));
    }
    let mut sorted = lat.clone();
    sorted.sort_unstable();
    let median_s = sorted[sorted.len() / 2] as f64 / 1e9;
    let bps = file as f64 * 8.0 / median_s;
    let (up, down) = (sim.link_stats(c, srv).unwrap_or_default(), sim.link_stats(srv, c).unwrap_or_default());
    Ok(json!({
        "rate_bps": rate, "file_bytes": file, "seed": seed,
        "latency_s": median_s, "bit_per_s": bps, "normalised": bps / rate as f64,
        "latencies_ns": lat,
        "key_ups": up.key_ups + down.key_ups,
        "collisions": up.drop_collision + down.drop_collision,
        "frames": up.offered + down.offered,
    }))
}
