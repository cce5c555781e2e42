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
//! | `packet-radio-1200` / `packet-radio-9600` | AX.25 radio of seed 003 | | | 255 | not yet implemented (half-duplex CSMA channel) |

use xk_time::Duration;

use crate::params::{ConfigError, LinkParams, Loss};

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
        "packet-radio-1200" | "packet-radio-9600" => {
            return Err(ConfigError::new(
                "profile",
                name,
                "not yet implemented: the half-duplex p-persistent CSMA radio channel is still to come",
            ));
        }
        _ => {
            return Err(ConfigError::new(
                "profile",
                name,
                format!("unknown profile (known: {})", NAMES.join(", ")),
            ));
        }
    })
}
