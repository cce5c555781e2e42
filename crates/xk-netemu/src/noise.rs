//! The loss and corruption processes, shared by a dedicated link direction
//! ([`crate::Link`]) and the shared radio channel ([`crate::Channel`]) so the
//! two apply exactly the same statistics.

use xk_rand::Rng;

use crate::link::LinkPacket;
use crate::params::{Corrupt, Loss};

/// A loss process with its own random stream and Gilbert–Elliott state.
pub(crate) struct LossProcess {
    rng: Rng,
    bad: bool,
    run: u32,
}

impl LossProcess {
    pub(crate) fn new(rng: Rng) -> Self {
        LossProcess { rng, bad: false, run: 0 }
    }

    /// Whether the next packet is lost.
    pub(crate) fn lose(&mut self, loss: &Loss) -> bool {
        match *loss {
            Loss::None => false,
            Loss::Bernoulli(p) => self.rng.chance(p),
            Loss::GilbertElliott { p, r, loss_bad, loss_good, max_burst } => {
                // Transition first, then decide in the new state (netem order).
                let flip = if self.bad { r } else { p };
                if self.rng.chance(flip) {
                    self.bad = !self.bad;
                }
                let lost = self.rng.chance(if self.bad { loss_bad } else { loss_good });
                if lost && max_burst > 0 && self.run >= max_burst {
                    self.bad = false;
                    self.run = 0;
                    return false;
                }
                self.run = if lost { self.run + 1 } else { 0 };
                lost
            }
        }
    }
}

/// Applies the corruption process to `packet`; returns whether bits flipped.
pub(crate) fn corrupt<P: LinkPacket>(rng: &mut Rng, how: &Corrupt, packet: &mut P) -> bool {
    let bits = packet.len() * 8;
    if bits == 0 {
        return false;
    }
    match *how {
        Corrupt::None => false,
        Corrupt::PerPacket(p) => {
            if rng.chance(p) {
                packet.flip_bit(rng.below(bits as u64) as usize);
                true
            } else {
                false
            }
        }
        Corrupt::BitErrorRate(ber) => {
            if ber <= 0.0 {
                return false;
            }
            // Jump from error to error with geometric gaps.
            let ln_q = (1.0 - ber).ln();
            let mut pos = 0usize;
            let mut any = false;
            loop {
                let u = 1.0 - rng.unit();
                let gap = (u.ln() / ln_q).floor();
                if !gap.is_finite() || gap >= (bits - pos) as f64 {
                    break;
                }
                pos += gap as usize;
                packet.flip_bit(pos);
                any = true;
                pos += 1;
                if pos >= bits {
                    break;
                }
            }
            any
        }
    }
}

/// Serialisation time of `len + overhead` bytes at `rate_bps`, rounded up to
/// the nanosecond.
pub(crate) fn serialisation_ns(len: usize, overhead: u32, rate_bps: u64) -> u64 {
    let bits = (len as u128 + u128::from(overhead)) * 8;
    let ns = (bits * 1_000_000_000).div_ceil(u128::from(rate_bps));
    u64::try_from(ns).unwrap_or(u64::MAX)
}
