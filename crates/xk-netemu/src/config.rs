//! Link configuration as a netem-like one-liner or as TOML — both map to the
//! same [`LinkSpec`], through the same keyword handlers.
//!
//! One-liner grammar: `tc-netem`'s (numbers mean what they mean there —
//! `loss 1` is 1 %), plus keywords of our own (keywords in any order; `at T`
//! starts a scheduled change that inherits everything before it):
//!
//! ```text
//! delay|latency TIME [JITTER [0%]] [distribution|dist uniform|normal|pareto]
//! loss [random] PERCENT [0%]        loss gemodel P [R [1-H [1-K]]] [burst N]
//! corrupt PERCENT [0%]              duplicate PERCENT [0%]
//! reorder PERCENT [0%]              (needs a delay: the chosen packets skip it)
//! rate RATE [PACKETOVERHEAD [0]]    RATE = 1200bit, 64kbit, 45mbit, 10gbit
//! slot MIN [MAX] [packets N] [bytes N]   packets leave in bursts at slot starts
//! limit PACKETS
//! -- ours --
//! profile NAME                      start from a named profile
//! jitter J                          jitter alone
//! jitter-reorders | jitter-keeps-order   (default as netem: jitter reorders
//!                                   unless a rate is set)
//! overhead BYTES                    limit-bytes SIZE (1500, 64k, 1m)
//! ber X (e.g. 1e-6)                 mtu BYTES        blackout T1-T2 (repeatable)
//! csma                              half-duplex shared radio channel (both directions)
//! txdelay T  persist P  slottime T  txtail T  dcd T  maxframe N
//!                                   its access rules (any of them implies csma;
//!                                   persist is a probability, 0.25 or 25%)
//! at T ...                          change parameters T after start
//! ```
//!
//! Times take a unit (`ns`, `us`, `ms`, `s`); percentages are `1%` or `1`
//! (as netem reads them). What netem has and the model does not —
//! correlations other than 0, `loss state`, `ecn`, `distribution
//! paretonormal`, `reorder … gap`, cell sizes, negative overheads, `slot
//! distribution` —
//! is refused with a message naming it. `docs/NETEM.md` maps every netem
//! form to ours; a test parses each row. TOML uses the same keywords as
//! keys (`delay = "50ms"`, `loss = "gemodel 1% 30%"`, `blackout = ["1s-2s"]`,
//! `[[at]]` tables with an `at` key for changes).

use xk_time::Duration;

use crate::link::Change;
use crate::params::{Blackout, ConfigError, Corrupt, CsmaParams, JitterDist, LinkParams, Loss, Slot};
use crate::profiles;

/// A parsed configuration: base parameters and scheduled changes.
#[derive(Clone, Debug, PartialEq)]
pub struct LinkSpec {
    /// Parameters from the start.
    pub params: LinkParams,
    /// Later changes.
    pub changes: Vec<Change>,
}

/// Parses a time with unit: `50ms`, `1.5s`, `200us`, `100ns`.
pub fn parse_duration(param: &str, s: &str) -> Result<Duration, ConfigError> {
    let split = s.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let v: f64 =
        num.parse().map_err(|_| ConfigError::new(param, s, "expected a number with a unit, like 50ms"))?;
    let scale = match unit {
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        "" => return Err(ConfigError::new(param, s, "time needs a unit: ns, us, ms or s")),
        _ => return Err(ConfigError::new(param, s, "unknown time unit (use ns, us, ms or s)")),
    };
    let ns = v * scale;
    if !ns.is_finite() || ns < 0.0 || ns > u64::MAX as f64 {
        return Err(ConfigError::new(param, s, "time out of range"));
    }
    Ok(Duration::from_nanos(ns.round() as u64))
}

/// Parses a rate in bits per second: `45mbit`, `1200bit`, `10gbit`, `64kbit`.
pub fn parse_rate(param: &str, s: &str) -> Result<u64, ConfigError> {
    let split = s.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let v: f64 = num.parse().map_err(|_| ConfigError::new(param, s, "expected a rate like 45mbit"))?;
    let scale = match unit.to_ascii_lowercase().as_str() {
        "bit" => 1.0,
        "kbit" => 1e3,
        "mbit" => 1e6,
        "gbit" => 1e9,
        "tbit" => 1e12,
        "" => return Err(ConfigError::new(param, s, "rate needs a unit: bit, kbit, mbit or gbit")),
        _ => return Err(ConfigError::new(param, s, "unknown rate unit (use bit, kbit, mbit, gbit)")),
    };
    let bps = v * scale;
    if !bps.is_finite() || bps < 1.0 || bps > u64::MAX as f64 {
        return Err(ConfigError::new(param, s, "rate must be at least 1 bit/s"));
    }
    Ok(bps.round() as u64)
}

/// Parses a percentage as `tc` reads one: `1%` and `1` are both one
/// percent (netem's `loss 1` is 1 %, not 100 %). Returns the probability.
pub fn parse_percent(param: &str, s: &str) -> Result<f64, ConfigError> {
    let num = s.strip_suffix('%').unwrap_or(s);
    let v: f64 =
        num.parse().map_err(|_| ConfigError::new(param, s, "expected a percentage like 1% or 0.5"))?;
    if !(0.0..=100.0).contains(&v) {
        return Err(ConfigError::new(param, s, "must be between 0% and 100%"));
    }
    Ok(v / 100.0)
}

/// Parses a probability: `25%` or `0.25` (our own keywords: `persist`).
pub fn parse_prob(param: &str, s: &str) -> Result<f64, ConfigError> {
    let (num, pct) = match s.strip_suffix('%') {
        Some(n) => (n, true),
        None => (s, false),
    };
    let v: f64 =
        num.parse().map_err(|_| ConfigError::new(param, s, "expected a probability like 1% or 0.01"))?;
    let p = if pct { v / 100.0 } else { v };
    if !(0.0..=1.0).contains(&p) {
        return Err(ConfigError::new(param, s, "must be between 0% and 100%"));
    }
    Ok(p)
}

/// Parses a byte count: `1500`, `64k`, `1m`, `1g`, `2t` (powers of 1024, as
/// in `tc` and iperf3's `-n`; `kb`/`mb`/`gb`/`tb` and `b` also accepted,
/// any case). The one size parser of the project: the link model's
/// `limit-bytes` and the tools' `-n`/`-l`/`--window` all come here.
pub fn parse_bytes(param: &str, s: &str) -> Result<u64, ConfigError> {
    let lower = s.trim().to_ascii_lowercase();
    let body = lower.strip_suffix('b').unwrap_or(&lower);
    let (num, scale) = match body.char_indices().last() {
        Some((i, 'k')) => (&body[..i], 1u64 << 10),
        Some((i, 'm')) => (&body[..i], 1 << 20),
        Some((i, 'g')) => (&body[..i], 1 << 30),
        Some((i, 't')) => (&body[..i], 1 << 40),
        _ => (body, 1),
    };
    let bad = || ConfigError::new(param, s, "expected a size like 1500, 64k, 1m or 1g (k = 1024)");
    if num.is_empty() {
        return Err(bad());
    }
    // Whole numbers stay exact; a fraction is allowed with a unit (`1.5m`).
    if let Ok(v) = num.parse::<u64>() {
        return v.checked_mul(scale).ok_or_else(|| ConfigError::new(param, s, "size too large"));
    }
    let v: f64 = num.parse().map_err(|_| bad())?;
    let bytes = v * scale as f64;
    if !bytes.is_finite() || bytes < 0.0 || bytes >= u64::MAX as f64 {
        return Err(ConfigError::new(param, s, "size out of range"));
    }
    Ok(bytes.round() as u64)
}

/// [`parse_bytes`] for sizes held in memory (`usize`).
pub fn parse_size(param: &str, s: &str) -> Result<usize, ConfigError> {
    usize::try_from(parse_bytes(param, s)?).map_err(|_| ConfigError::new(param, s, "size too large"))
}

fn parse_count(param: &str, s: &str) -> Result<usize, ConfigError> {
    s.parse().map_err(|_| ConfigError::new(param, s, "expected a whole number"))
}

/// Token cursor with error context.
struct Tokens<'a> {
    toks: Vec<&'a str>,
    pos: usize,
}

impl<'a> Tokens<'a> {
    fn next(&mut self) -> Option<&'a str> {
        let t = self.toks.get(self.pos).copied();
        self.pos += 1;
        t
    }
    fn peek(&self) -> Option<&'a str> {
        self.toks.get(self.pos).copied()
    }
    fn value(&mut self, param: &str) -> Result<&'a str, ConfigError> {
        self.next().ok_or_else(|| ConfigError::new(param, "", "missing value"))
    }
    /// The next token if it looks like a value (not a keyword).
    fn optional_value(&mut self, looks: impl Fn(&str) -> bool) -> Option<&'a str> {
        let t = self.peek()?;
        if looks(t) {
            self.pos += 1;
            Some(t)
        } else {
            None
        }
    }
}

fn starts_numeric(t: &str) -> bool {
    t.starts_with(|c: char| c.is_ascii_digit() || c == '.')
}

/// A netem correlation after `what`'s value, if one is given: 0 is
/// accepted (none), anything else refused — the model draws each packet
/// independently.
fn no_correlation(what: &str, t: &mut Tokens<'_>) -> Result<(), ConfigError> {
    if let Some(c) = t.optional_value(starts_numeric) {
        let v = parse_percent(&format!("{what} correlation"), c)?;
        if v != 0.0 {
            return Err(ConfigError::new(
                format!("{what} correlation"),
                c,
                "correlation is not supported: the model draws each packet independently (give 0% or leave it out)",
            ));
        }
    }
    Ok(())
}

/// The shared-channel parameters, switched on with their defaults if needed
/// (any CSMA keyword implies `csma`).
fn csma(p: &mut LinkParams) -> &mut CsmaParams {
    p.csma.get_or_insert_with(CsmaParams::default)
}

/// Applies one keyword and its values to `p`.
fn apply(p: &mut LinkParams, kw: &str, t: &mut Tokens<'_>) -> Result<(), ConfigError> {
    match kw {
        "profile" => {
            let name = t.value("profile")?;
            *p = profiles::profile(name)?;
        }
        "delay" | "latency" => {
            p.delay = parse_duration("delay", t.value("delay")?)?;
            if let Some(j) = t.optional_value(starts_numeric) {
                p.jitter = parse_duration("jitter", j)?;
                no_correlation("delay", t)?;
            }
            if matches!(t.peek(), Some("dist" | "distribution")) {
                t.next();
                apply(p, "dist", t)?;
            }
        }
        "jitter" => p.jitter = parse_duration("jitter", t.value("jitter")?)?,
        "dist" | "distribution" => {
            let v = t.value("dist")?;
            p.jitter_dist = match v {
                "uniform" => JitterDist::Uniform,
                "normal" => JitterDist::Normal,
                "pareto" => JitterDist::Pareto,
                "paretonormal" => {
                    return Err(ConfigError::new(
                        "distribution",
                        v,
                        "paretonormal is not supported (uniform, normal or pareto)",
                    ));
                }
                _ => return Err(ConfigError::new("distribution", v, "expected uniform, normal or pareto")),
            };
        }
        "jitter-reorders" => p.jitter_reorders = true,
        "jitter-keeps-order" => p.jitter_reorders = false,
        "rate" => {
            p.rate_bps = parse_rate("rate", t.value("rate")?)?;
            // netem: rate RATE [PACKETOVERHEAD [CELLSIZE [CELLOVERHEAD]]].
            let signed = |s: &str| starts_numeric(s) || (s.starts_with('-') && s.len() > 1);
            if let Some(o) = t.optional_value(signed) {
                p.overhead = o.parse().map_err(|_| {
                    ConfigError::new(
                        "rate packetoverhead",
                        o,
                        "a negative or fractional overhead is not supported",
                    )
                })?;
                if let Some(c) = t.optional_value(signed)
                    && c != "0"
                {
                    return Err(ConfigError::new(
                        "rate cellsize",
                        c,
                        "cell sizes are not supported (give 0)",
                    ));
                }
                if let Some(c) = t.optional_value(signed)
                    && c != "0"
                {
                    return Err(ConfigError::new("rate celloverhead", c, "cell overheads are not supported"));
                }
            }
        }
        "overhead" => {
            let v = t.value("overhead")?;
            p.overhead =
                v.parse().map_err(|_| ConfigError::new("overhead", v, "expected bytes (0 to 4294967295)"))?;
        }
        "limit" => p.limit_packets = parse_count("limit", t.value("limit")?)?,
        "limit-bytes" => p.limit_bytes = parse_size("limit-bytes", t.value("limit-bytes")?)?,
        "loss" | "drop" => {
            let v = t.value("loss")?;
            p.loss = match v {
                "gemodel" | "ge" | "gilbert-elliott" => {
                    // netem: gemodel p [r [1-h [1-k]]], r = 1 - p unless given.
                    let gp = parse_percent("loss gemodel p", t.value("loss gemodel p")?)?;
                    let mut next = |name: &str, default: f64| match t.optional_value(starts_numeric) {
                        Some(s) => parse_percent(name, s),
                        None => Ok(default),
                    };
                    let r = next("loss gemodel r", 1.0 - gp)?;
                    let loss_bad = next("loss gemodel 1-h", 1.0)?;
                    let loss_good = next("loss gemodel 1-k", 0.0)?;
                    let mut max_burst = 0;
                    if t.peek() == Some("burst") {
                        t.next();
                        let b = t.value("loss gemodel burst")?;
                        max_burst = b.parse().map_err(|_| {
                            ConfigError::new("loss gemodel burst", b, "expected a whole number")
                        })?;
                    }
                    Loss::GilbertElliott { p: gp, r, loss_bad, loss_good, max_burst }
                }
                "state" => {
                    return Err(ConfigError::new(
                        "loss state",
                        "",
                        "the 4-state Markov model is not supported; use loss gemodel P R [1-H [1-K]]",
                    ));
                }
                "random" => {
                    let l = Loss::Bernoulli(parse_percent("loss", t.value("loss")?)?);
                    no_correlation("loss", t)?;
                    l
                }
                v => {
                    let l = Loss::Bernoulli(parse_percent("loss", v)?);
                    no_correlation("loss", t)?;
                    l
                }
            };
            if t.peek() == Some("ecn") {
                return Err(ConfigError::new(
                    "loss ecn",
                    "",
                    "ECN marking is not supported: the model drops",
                ));
            }
        }
        "corrupt" => {
            p.corrupt = Corrupt::PerPacket(parse_percent("corrupt", t.value("corrupt")?)?);
            no_correlation("corrupt", t)?;
        }
        "ber" => {
            let v = t.value("ber")?;
            let b: f64 = v.parse().map_err(|_| ConfigError::new("ber", v, "expected a number like 1e-6"))?;
            p.corrupt = Corrupt::BitErrorRate(b);
        }
        "duplicate" => {
            p.duplicate = parse_percent("duplicate", t.value("duplicate")?)?;
            no_correlation("duplicate", t)?;
        }
        "reorder" => {
            p.reorder = parse_percent("reorder", t.value("reorder")?)?;
            no_correlation("reorder", t)?;
            if t.peek() == Some("gap") {
                return Err(ConfigError::new(
                    "reorder gap",
                    t.toks.get(t.pos + 1).copied().unwrap_or(""),
                    "gap is not supported: the model reorders each packet with the probability alone",
                ));
            }
        }
        "slot" => {
            // netem: slot MIN_DELAY [MAX_DELAY] [packets N] [bytes N].
            let v = t.value("slot")?;
            if v == "distribution" || v == "dist" {
                return Err(ConfigError::new(
                    "slot distribution",
                    t.peek().unwrap_or(""),
                    "slot distributions are not supported; give slot MIN_DELAY [MAX_DELAY]",
                ));
            }
            let min = parse_duration("slot", v)?;
            let max = match t.optional_value(starts_numeric) {
                Some(m) => parse_duration("slot max", m)?,
                None => min,
            };
            let mut slot = Slot { min, max, packets: 0, bytes: 0 };
            loop {
                match t.peek() {
                    Some("packets") => {
                        t.next();
                        let n = t.value("slot packets")?;
                        slot.packets = n
                            .parse()
                            .map_err(|_| ConfigError::new("slot packets", n, "expected a whole number"))?;
                    }
                    Some("bytes") => {
                        t.next();
                        slot.bytes = parse_bytes("slot bytes", t.value("slot bytes")?)?;
                    }
                    _ => break,
                }
            }
            p.slot = Some(slot);
        }
        "ecn" => return Err(ConfigError::new("ecn", "", "ECN marking is not supported: the model drops")),
        "mtu" => p.mtu = parse_count("mtu", t.value("mtu")?)?,
        "blackout" => {
            let v = t.value("blackout")?;
            let (a, b) = v
                .split_once('-')
                .ok_or_else(|| ConfigError::new("blackout", v, "expected START-END, like 1s-2s"))?;
            p.blackouts.push(Blackout {
                start: parse_duration("blackout", a)?,
                end: parse_duration("blackout", b)?,
            });
        }
        "csma" => {
            p.csma.get_or_insert_with(CsmaParams::default);
        }
        "txdelay" => csma(p).txdelay = parse_duration("txdelay", t.value("txdelay")?)?,
        "persist" => csma(p).persist = parse_prob("persist", t.value("persist")?)?,
        "slottime" => csma(p).slot = parse_duration("slottime", t.value("slottime")?)?,
        "txtail" => csma(p).txtail = parse_duration("txtail", t.value("txtail")?)?,
        "dcd" => csma(p).dcd = parse_duration("dcd", t.value("dcd")?)?,
        "maxframe" => csma(p).maxframe = parse_count("maxframe", t.value("maxframe")?)?,
        other => {
            return Err(ConfigError::new(
                "keyword",
                other,
                "unknown (netem's: delay, distribution, loss, corrupt, duplicate, reorder, rate, slot, limit; ours: profile, jitter, jitter-reorders, jitter-keeps-order, overhead, limit-bytes, ber, mtu, blackout, csma, txdelay, persist, slottime, txtail, dcd, maxframe, at)",
            ));
        }
    }
    Ok(())
}

/// Parses a netem-like one-liner.
pub fn parse_line(line: &str) -> Result<LinkSpec, ConfigError> {
    let mut t = Tokens { toks: line.split_whitespace().collect(), pos: 0 };
    let mut params = LinkParams::default();
    let mut changes: Vec<Change> = Vec::new();
    // Whether jitter may reorder, where the line says so (base, then each
    // change); unsaid, netem's rule decides below.
    let mut order_said = vec![false];
    while let Some(kw) = t.next() {
        if kw == "at" {
            let at = parse_duration("at", t.value("at")?)?;
            let base = changes.last().map_or(&params, |c| &c.params).clone();
            changes.push(Change { at, params: base });
            order_said.push(order_said[order_said.len() - 1]);
            continue;
        }
        let target = match changes.last_mut() {
            Some(c) => &mut c.params,
            None => &mut params,
        };
        if matches!(kw, "jitter-reorders" | "jitter-keeps-order") {
            *order_said.last_mut().unwrap_or(&mut false) = true;
        }
        apply(target, kw, &mut t)?;
    }
    // netem's rule: jitter reorders packets, except under a rate limit
    // (netem then queues each packet behind the previous one).
    let all = std::iter::once(&mut params).chain(changes.iter_mut().map(|c| &mut c.params));
    for (p, said) in all.zip(&order_said) {
        if !said {
            p.jitter_reorders = p.rate_bps == 0;
        }
    }
    params.validate()?;
    for (i, c) in changes.iter().enumerate() {
        c.params.validate().map_err(|e| ConfigError { param: format!("at[{i}].{}", e.param), ..e })?;
    }
    Ok(LinkSpec { params, changes })
}

fn toml_tokens(key: &str, v: &toml::Value) -> Result<Vec<String>, ConfigError> {
    let scalar = |v: &toml::Value| -> Result<String, ConfigError> {
        match v {
            toml::Value::String(s) => Ok(s.clone()),
            toml::Value::Integer(i) => Ok(i.to_string()),
            toml::Value::Float(f) => Ok(f.to_string()),
            toml::Value::Boolean(b) => Ok(b.to_string()),
            other => Err(ConfigError::new(key, other, "expected a string or a number")),
        }
    };
    match (key, v) {
        ("jitter-reorders" | "jitter_reorders", toml::Value::Boolean(b)) => {
            Ok(vec![if *b { "jitter-reorders" } else { "jitter-keeps-order" }.into()])
        }
        ("blackout" | "blackouts", toml::Value::Array(items)) => {
            let mut out = Vec::new();
            for it in items {
                out.push("blackout".into());
                out.push(scalar(it)?);
            }
            Ok(out)
        }
        _ => {
            let kw = key.replace('_', "-");
            let mut out = vec![kw];
            out.extend(scalar(v)?.split_whitespace().map(str::to_string));
            Ok(out)
        }
    }
}

fn table_line(table: &toml::Table, skip_at: bool) -> Result<String, ConfigError> {
    let mut words: Vec<String> = Vec::new();
    // `profile` first so other keys refine it.
    if let Some(v) = table.get("profile") {
        words.extend(toml_tokens("profile", v)?);
    }
    for (k, v) in table {
        if k == "profile" || (skip_at && k == "at") || (k == "at" && v.is_array()) {
            continue;
        }
        if k == "at" {
            continue;
        }
        words.extend(toml_tokens(k, v)?);
    }
    Ok(words.join(" "))
}

/// Parses TOML; keys are the one-liner keywords, `[[at]]` tables carry
/// scheduled changes (each with an `at = "5s"` key).
pub fn parse_toml(text: &str) -> Result<LinkSpec, ConfigError> {
    let table: toml::Table = text.parse().map_err(|e: toml::de::Error| {
        ConfigError::new("toml", e.message().lines().next().unwrap_or(""), "not valid TOML")
    })?;
    let mut line = table_line(&table, false)?;
    if let Some(at) = table.get("at") {
        let list = at.as_array().ok_or_else(|| ConfigError::new("at", at, "expected [[at]] tables"))?;
        for (i, item) in list.iter().enumerate() {
            let t = item
                .as_table()
                .ok_or_else(|| ConfigError::new(format!("at[{i}]"), item, "expected a table"))?;
            let when = t.get("at").and_then(toml::Value::as_str).ok_or_else(|| {
                ConfigError::new(format!("at[{i}].at"), "", "missing time, like at = \"5s\"")
            })?;
            line.push_str(&format!(" at {when} {}", table_line(t, true)?));
        }
    }
    parse_line(&line)
}
