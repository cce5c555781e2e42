//! Link parameters: what one direction of an emulated link does to packets.

use core::fmt;

use xk_time::Duration;

/// Shape of the jitter added to the one-way delay.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JitterDist {
    /// Uniform in `[-jitter, +jitter]`.
    Uniform,
    /// Normal with standard deviation `jitter`.
    Normal,
    /// Heavy-tailed: Pareto with shape 3, shifted to mean zero, scaled to
    /// standard deviation `jitter` (never less than `-jitter·1/√3`).
    Pareto,
}

/// Packet loss process.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Loss {
    /// No loss.
    None,
    /// Each packet lost independently with probability `p`.
    Bernoulli(f64),
    /// Gilbert–Elliott: a good and a bad state.
    GilbertElliott {
        /// P(good → bad) per packet.
        p: f64,
        /// P(bad → good) per packet.
        r: f64,
        /// Loss probability in the bad state (netem's `1-h`).
        loss_bad: f64,
        /// Loss probability in the good state (netem's `1-k`).
        loss_good: f64,
        /// Longest run of consecutive losses allowed (0 = no cap); after it
        /// the next packet is delivered and the chain returns to good.
        max_burst: u32,
    },
}

/// Corruption process.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Corrupt {
    /// No corruption.
    None,
    /// Each packet has one random bit flipped with probability `p`.
    PerPacket(f64),
    /// Each bit flips independently with probability `ber`.
    BitErrorRate(f64),
}

/// A window during which the link delivers nothing (offsets from link start).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Blackout {
    /// Start of the outage.
    pub start: Duration,
    /// End of the outage (exclusive).
    pub end: Duration,
}

/// Everything one direction of a link does. Defaults: a perfect link.
#[derive(Clone, Debug, PartialEq)]
pub struct LinkParams {
    /// One-way base delay.
    pub delay: Duration,
    /// Jitter magnitude (see [`JitterDist`]).
    pub jitter: Duration,
    /// Jitter distribution.
    pub jitter_dist: JitterDist,
    /// If false (default), jitter never reorders packets: a packet never
    /// arrives before one sent earlier. If true, jitter may reorder.
    pub jitter_reorders: bool,
    /// Bottleneck rate in bits per second (0 = unlimited).
    pub rate_bps: u64,
    /// Bytes added to each packet when computing its serialisation time
    /// (framing the rate limit should account for, e.g. 42 for Ethernet+IP+UDP).
    pub overhead: u32,
    /// Queue limit in packets waiting for or in serialisation (0 = unlimited).
    pub limit_packets: usize,
    /// Queue limit in bytes (0 = unlimited).
    pub limit_bytes: usize,
    /// Loss process.
    pub loss: Loss,
    /// Corruption process.
    pub corrupt: Corrupt,
    /// Probability a packet is duplicated.
    pub duplicate: f64,
    /// Probability a packet skips the delay line (netem `reorder`): it arrives
    /// right after serialisation, ahead of packets sent before it.
    pub reorder: f64,
    /// Largest packet carried (0 = unlimited); larger ones are dropped.
    pub mtu: usize,
    /// Outages.
    pub blackouts: Vec<Blackout>,
}

impl Default for LinkParams {
    fn default() -> Self {
        LinkParams {
            delay: Duration::ZERO,
            jitter: Duration::ZERO,
            jitter_dist: JitterDist::Uniform,
            jitter_reorders: false,
            rate_bps: 0,
            overhead: 0,
            limit_packets: 0,
            limit_bytes: 0,
            loss: Loss::None,
            corrupt: Corrupt::None,
            duplicate: 0.0,
            reorder: 0.0,
            mtu: 0,
            blackouts: Vec::new(),
        }
    }
}

/// A parameter with a value it cannot take. Every message names the parameter,
/// the value and the reason.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    /// The parameter (`loss`, `rate`, `schedule[2].delay`, …).
    pub param: String,
    /// The offending value as written (or as stored).
    pub value: String,
    /// Why it is refused.
    pub reason: String,
}

impl ConfigError {
    pub(crate) fn new(param: impl Into<String>, value: impl fmt::Display, reason: impl Into<String>) -> Self {
        ConfigError { param: param.into(), value: value.to_string(), reason: reason.into() }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} = {:?}: {}", self.param, self.value, self.reason)
    }
}

impl std::error::Error for ConfigError {}

fn prob(param: &str, p: f64) -> Result<(), ConfigError> {
    if !(0.0..=1.0).contains(&p) || p.is_nan() {
        return Err(ConfigError::new(param, p, "must be a probability between 0 and 1 (0% to 100%)"));
    }
    Ok(())
}

impl LinkParams {
    /// Checks every value; the error names the first bad one.
    pub fn validate(&self) -> Result<(), ConfigError> {
        match self.loss {
            Loss::None => {}
            Loss::Bernoulli(p) => prob("loss", p)?,
            Loss::GilbertElliott { p, r, loss_bad, loss_good, .. } => {
                prob("loss ge p", p)?;
                prob("loss ge r", r)?;
                prob("loss ge loss_bad", loss_bad)?;
                prob("loss ge loss_good", loss_good)?;
                if r == 0.0 && p > 0.0 {
                    return Err(ConfigError::new(
                        "loss ge r",
                        r,
                        "0 would keep the chain in the bad state forever",
                    ));
                }
            }
        }
        match self.corrupt {
            Corrupt::None => {}
            Corrupt::PerPacket(p) => prob("corrupt", p)?,
            Corrupt::BitErrorRate(b) => {
                if !(0.0..0.5).contains(&b) {
                    return Err(ConfigError::new("ber", b, "bit error rate must be in [0, 0.5)"));
                }
            }
        }
        prob("duplicate", self.duplicate)?;
        prob("reorder", self.reorder)?;
        for (i, b) in self.blackouts.iter().enumerate() {
            if b.end <= b.start {
                return Err(ConfigError::new(
                    format!("blackout[{i}]"),
                    format!("{:?}-{:?}", b.start, b.end),
                    "end must be after start",
                ));
            }
        }
        Ok(())
    }
}
