//! Named link profiles.
//!
//! | name | what | rate | one-way delay | MTU | notes |
//! |---|---|---|---|---|---|
//! | `ethernet-10m` | 10BASE-T LAN | 10 Mbit/s | 50 µs | 1500 | overhead 38 B (preamble, header, FCS, gap) |
//! | `ethernet-100m` | Fast Ethernet | 100 Mbit/s | 50 µs | 1500 | overhead 38 B |
//! | `gigabit` | Gigabit Ethernet | 1 Gbit/s | 20 µs | 1500 | overhead 38 B |
//! | `fddi` | FDDI ring | 100 Mbit/s | 100 µs | 4352 | |
//! | `atm-140m` | the ATM LAN of seed 002 | 140 Mbit/s | 50 µs | 9180 | AAL5 MTU |
//! | `ds3-45m` | the DS-3 port with the delay box of seed 002 | 45 Mbit/s | 0 | 9180 | add `delay` to sweep the RTT |
//! | `leo` | low-earth-orbit satellite | 100 Mbit/s | 20 ms ± 5 ms | 1500 | 0.5 % loss |
//! | `geo` | geostationary satellite | 50 Mbit/s | 280 ms | 1500 | |
//! | `packet-radio-1200` / `packet-radio-9600` | AX.25 packet radio of seed 003 | 1,200 / 9,600 bit/s | 0 | 238 | half-duplex shared channel, p-persistent CSMA (see below) |
//!
//! The packet-radio profiles follow seed 003's set-up: two stations on one
//! FM channel, KISS-mode TNCs, 255-byte frames. A frame is the AX.25 header
//! (17 bytes, the seed's figure) plus the packet, so packets may be up to 238
//! bytes (`mtu 238`); on the air each frame also carries a 2-byte FCS and a
//! flag (`overhead 20`; HDLC bit stuffing is not modelled). Channel access
//! uses the KISS defaults ([`CsmaParams::default`]: TXDELAY 500 ms, p = 0.25,
//! SLOTTIME 100 ms) plus a 10 ms tail and 10 ms carrier detect, for both
//! rates — the seed used one radio at both rates and does not give its TNC
//! settings. Each station buffers 50 frames. Override any of these after the
//! profile: `profile packet-radio-9600 txdelay 100ms persist 50%`.

use xk_time::Duration;

use crate::params::{ConfigError, CsmaParams, LinkParams, Loss};

/// Names of all profiles.
pub const NAMES: [&str; 10] = [
    "ethernet-10m",
    "ethernet-100m",
    "gigabit",
    "fddi",
    "atm-140m",
    "ds3-45m",
    "leo",
    "geo",
    "packet-radio-1200",
    "packet-radio-9600",
];

/// The parameters of a named profile.
pub fn profile(name: &str) -> Result<LinkParams, ConfigError> {
    let base = |rate: u64, delay_us: u64, mtu: usize| LinkParams {
        rate_bps: rate,
        delay: Duration::from_micros(delay_us),
        mtu,
        limit_packets: 1000,
        ..LinkParams::default()
    };
    Ok(match name {
        "ethernet-10m" => LinkParams { overhead: 38, ..base(10_000_000, 50, 1500) },
        "ethernet-100m" => LinkParams { overhead: 38, ..base(100_000_000, 50, 1500) },
        "gigabit" => LinkParams { overhead: 38, ..base(1_000_000_000, 20, 1500) },
        "fddi" => base(100_000_000, 100, 4352),
        "atm-140m" => base(140_000_000, 50, 9180),
        "ds3-45m" => base(45_000_000, 0, 9180),
        "leo" => LinkParams {
            jitter: Duration::from_millis(5),
            loss: Loss::Bernoulli(0.005),
            ..base(100_000_000, 20_000, 1500)
        },
        "geo" => base(50_000_000, 280_000, 1500),
        "packet-radio-1200" | "packet-radio-9600" => LinkParams {
            overhead: 20,
            limit_packets: 50,
            csma: Some(CsmaParams::default()),
            ..base(if name.ends_with("1200") { 1200 } else { 9600 }, 0, 238)
        },
        _ => {
            return Err(ConfigError::new(
                "profile",
                name,
                format!("unknown profile (known: {})", NAMES.join(", ")),
            ));
        }
    })
}
