//! A link written back in the one-liner's words, as `tc qdisc show` writes
//! a netem qdisc: `xpress emulate` and `xpress netns` print what they parsed,
//! so a typo that still parses (a rate in the wrong unit) is seen at once.
//! What is written parses back to the same link.

use std::fmt;

use xk_time::Duration;

use crate::config::LinkSpec;
use crate::params::{Corrupt, JitterDist, LinkParams, Loss};

/// A time in the largest unit that keeps it whole: `20ms`, `1500us`.
fn time(d: Duration) -> String {
    let ns = d.as_nanos() as u64;
    for (unit, scale) in [("s", 1_000_000_000u64), ("ms", 1_000_000), ("us", 1_000)] {
        if ns >= scale && ns.is_multiple_of(scale) {
            return format!("{}{unit}", ns / scale);
        }
    }
    format!("{ns}ns")
}

/// A rate in the largest unit that keeps it whole: `45mbit`, `1200bit`.
fn rate(bps: u64) -> String {
    for (unit, scale) in [("gbit", 1_000_000_000u64), ("mbit", 1_000_000), ("kbit", 1_000)] {
        if bps >= scale && bps.is_multiple_of(scale) {
            return format!("{}{unit}", bps / scale);
        }
    }
    format!("{bps}bit")
}

/// A probability as a percentage, up to 6 significant digits: `1%`, `0.1%`.
fn pct(p: f64) -> String {
    let s = format!("{:.6}", p * 100.0);
    let s = s.trim_end_matches('0').trim_end_matches('.');
    format!("{s}%")
}

impl fmt::Display for LinkParams {
    /// netem's words where netem has them, ours after; nothing for a
    /// perfect link.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut w: Vec<String> = Vec::new();
        if !self.delay.is_zero() || !self.jitter.is_zero() {
            w.push(format!("delay {}", time(self.delay)));
            if !self.jitter.is_zero() {
                w.push(time(self.jitter));
                let dist = match self.jitter_dist {
                    JitterDist::Uniform => "uniform",
                    JitterDist::Normal => "normal",
                    JitterDist::Pareto => "pareto",
                };
                w.push(format!("distribution {dist}"));
            }
        }
        match self.loss {
            Loss::None => {}
            Loss::Bernoulli(p) => w.push(format!("loss {}", pct(p))),
            Loss::GilbertElliott { p, r, loss_bad, loss_good, max_burst } => {
                w.push(format!("loss gemodel {} {} {} {}", pct(p), pct(r), pct(loss_bad), pct(loss_good)));
                if max_burst > 0 {
                    w.push(format!("burst {max_burst}"));
                }
            }
        }
        match self.corrupt {
            Corrupt::None => {}
            Corrupt::PerPacket(p) => w.push(format!("corrupt {}", pct(p))),
            Corrupt::BitErrorRate(b) => w.push(format!("ber {b:e}")),
        }
        if self.duplicate > 0.0 {
            w.push(format!("duplicate {}", pct(self.duplicate)));
        }
        if self.reorder > 0.0 {
            w.push(format!("reorder {}", pct(self.reorder)));
        }
        if self.rate_bps > 0 {
            w.push(format!("rate {}", rate(self.rate_bps)));
        }
        if self.overhead > 0 {
            w.push(format!("overhead {}", self.overhead));
        }
        if let Some(s) = &self.slot {
            w.push(format!("slot {} {}", time(s.min), time(s.max)));
            if s.packets > 0 {
                w.push(format!("packets {}", s.packets));
            }
            if s.bytes > 0 {
                w.push(format!("bytes {}", s.bytes));
            }
        }
        if self.limit_packets > 0 {
            w.push(format!("limit {}", self.limit_packets));
        }
        if self.limit_bytes > 0 {
            w.push(format!("limit-bytes {}", self.limit_bytes));
        }
        // Ours: always said when there is jitter, since the default depends
        // on the rate.
        if !self.jitter.is_zero() {
            w.push(if self.jitter_reorders { "jitter-reorders" } else { "jitter-keeps-order" }.into());
        }
        if self.mtu > 0 {
            w.push(format!("mtu {}", self.mtu));
        }
        for b in &self.blackouts {
            w.push(format!("blackout {}-{}", time(b.start), time(b.end)));
        }
        if let Some(c) = &self.csma {
            w.push(format!(
                "csma txdelay {} persist {} slottime {} txtail {} dcd {} maxframe {}",
                time(c.txdelay),
                pct(c.persist),
                time(c.slot),
                time(c.txtail),
                time(c.dcd),
                c.maxframe
            ));
        }
        write!(f, "{}", w.join(" "))
    }
}

impl fmt::Display for LinkSpec {
    /// The base link, then each scheduled change in full (`at T …`);
    /// `none (a perfect link)` for a link that does nothing.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let base = self.params.to_string();
        if base.is_empty() && self.changes.is_empty() {
            return write!(f, "none (a perfect link)");
        }
        let mut parts = vec![base];
        for c in &self.changes {
            parts.push(format!("at {} {}", time(c.at), c.params));
        }
        write!(f, "{}", parts.join(" ").trim_start())
    }
}
