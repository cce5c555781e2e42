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

/// netem's slotting: packets leave in bursts, at slot starts a uniformly
/// random `min`..`max` apart, at most `packets` / `bytes` per slot (0: no
/// cap) — the delivery pattern of Wi-Fi and cellular links (aggregation,
/// scheduling grants).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slot {
    /// Shortest gap between slot starts.
    pub min: Duration,
    /// Longest gap between slot starts.
    pub max: Duration,
    /// Most packets released per slot (0: any number).
    pub packets: u32,
    /// Most bytes released per slot (0: any number).
    pub bytes: u64,
}

/// A window during which the link delivers nothing (offsets from link start).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Blackout {
    /// Start of the outage.
    pub start: Duration,
    /// End of the outage (exclusive).
    pub end: Duration,
}

/// The access rules of a half-duplex shared radio channel (p-persistent CSMA,
/// as a KISS TNC applies them). Both directions of a path share one channel:
/// a station that transmits cannot receive, and frames that overlap on the air
/// are lost at every receiver. See [`crate::channel`] for the exact rules.
#[derive(Clone, Debug, PartialEq)]
pub struct CsmaParams {
    /// Key-up time before the first frame of a transmission (KISS TXDELAY):
    /// the carrier is on, no data yet.
    pub txdelay: Duration,
    /// Probability of transmitting at a slot boundary when the channel is
    /// sensed idle (KISS `P`: p = (P + 1) / 256).
    pub persist: f64,
    /// Time between persistence draws (KISS SLOTTIME).
    pub slot: Duration,
    /// Carrier kept on after the last frame (KISS TXTAIL).
    pub txtail: Duration,
    /// Carrier-detect latency: another station senses a transmission only
    /// this long after it keyed up. Two stations that key up within this
    /// window of each other collide.
    pub dcd: Duration,
    /// Most frames sent in one key-up (at least 1).
    pub maxframe: usize,
}

impl Default for CsmaParams {
    /// The KISS protocol's default timing (TXDELAY 50 = 500 ms, P 63 = 0.25,
    /// SLOTTIME 10 = 100 ms), a 10 ms tail, 10 ms carrier detect, 7 frames
    /// per key-up (AX.25's default window).
    fn default() -> Self {
        CsmaParams {
            txdelay: Duration::from_millis(500),
            persist: 0.25,
            slot: Duration::from_millis(100),
            txtail: Duration::from_millis(10),
            dcd: Duration::from_millis(10),
            maxframe: 7,
        }
    }
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
    /// If set, the path is a half-duplex shared radio channel with these
    /// access rules instead of two independent directions; `rate_bps` is then
    /// the channel's bit rate and `overhead` the framing bytes per frame.
    pub csma: Option<CsmaParams>,
    /// netem's slotting (see [`Slot`]), if set.
    pub slot: Option<Slot>,
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
            csma: None,
            slot: None,
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

impl CsmaParams {
    /// Checks every value; the error names the first bad one.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !(self.persist > 0.0 && self.persist <= 1.0) {
            return Err(ConfigError::new(
                "persist",
                self.persist,
                "must be a probability above 0 and at most 1 (0 would never transmit)",
            ));
        }
        if self.slot.is_zero() && self.persist < 1.0 {
            return Err(ConfigError::new(
                "slottime",
                "0ms",
                "must be above 0 unless persist is 1 (the station would redraw forever at one instant)",
            ));
        }
        if self.maxframe == 0 {
            return Err(ConfigError::new("maxframe", 0, "at least one frame per key-up"));
        }
        Ok(())
    }
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
        if let Some(c) = &self.csma {
            c.validate()?;
            if self.rate_bps == 0 {
                return Err(ConfigError::new("rate", 0, "a shared radio channel (csma) needs a bit rate"));
            }
            let unsupported = [
                ("jitter", !self.jitter.is_zero(), format!("{:?}", self.jitter)),
                ("duplicate", self.duplicate > 0.0, self.duplicate.to_string()),
                ("reorder", self.reorder > 0.0, self.reorder.to_string()),
                ("slot", self.slot.is_some(), String::new()),
            ];
            for (name, set, value) in unsupported {
                if set {
                    return Err(ConfigError::new(
                        name,
                        value,
                        "not modelled on a shared radio channel (csma)",
                    ));
                }
            }
        }
        if let Some(s) = &self.slot
            && (s.max < s.min || s.max.is_zero())
        {
            return Err(ConfigError::new(
                "slot",
                format!("{:?} {:?}", s.min, s.max),
                "needs 0 < MIN_DELAY <= MAX_DELAY",
            ));
        }
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
