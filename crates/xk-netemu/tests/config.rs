//! Configuration: the one-liner and TOML map to the same model; bad values are
//! refused with the parameter, the value and the reason.

use xk_netemu::{Corrupt, JitterDist, LinkParams, Loss, parse_line, parse_toml, profiles};
use xk_time::Duration;

#[test]
fn the_issue_example_parses() {
    let s = parse_line("delay 50ms 5ms rate 45mbit limit 1000 loss 1%").unwrap();
    assert_eq!(
        s.params,
        LinkParams {
            delay: Duration::from_millis(50),
            jitter: Duration::from_millis(5),
            rate_bps: 45_000_000,
            limit_packets: 1000,
            loss: Loss::Bernoulli(0.01),
            ..LinkParams::default()
        }
    );
    assert!(s.changes.is_empty());
}

#[test]
fn toml_and_one_liner_give_the_same_spec() {
    let line = "profile ds3-45m delay 100ms 2ms dist pareto jitter-reorders overhead 42 limit-bytes 64k \
                loss ge 1% 30% 90% 0.1% burst 8 ber 1e-7 duplicate 0.5% reorder 1% mtu 9000 \
                blackout 1s-2s blackout 5s-5.5s at 10s delay 20ms at 20s loss 0%";
    let toml = r#"
        profile = "ds3-45m"
        delay = "100ms 2ms"
        dist = "pareto"
        jitter_reorders = true
        overhead = 42
        limit_bytes = "64k"
        loss = "ge 1% 30% 90% 0.1% burst 8"
        ber = 1e-7
        duplicate = "0.5%"
        reorder = "1%"
        mtu = 9000
        blackout = ["1s-2s", "5s-5.5s"]
        [[at]]
        at = "10s"
        delay = "20ms"
        [[at]]
        at = "20s"
        loss = "0%"
    "#;
    let a = parse_line(line).unwrap();
    let b = parse_toml(toml).unwrap();
    assert_eq!(a, b);
    assert_eq!(a.params.rate_bps, 45_000_000, "profile applied");
    assert_eq!(a.params.jitter_dist, JitterDist::Pareto);
    assert_eq!(a.params.corrupt, Corrupt::BitErrorRate(1e-7));
    assert_eq!(
        a.params.loss,
        Loss::GilbertElliott { p: 0.01, r: 0.3, loss_bad: 0.9, loss_good: 0.001, max_burst: 8 }
    );
    assert_eq!(a.changes.len(), 2);
    assert_eq!(a.changes[1].params.delay, Duration::from_millis(20), "later changes inherit earlier ones");
    assert_eq!(a.changes[1].params.loss, Loss::Bernoulli(0.0));
}

#[test]
fn errors_name_parameter_value_and_reason() {
    let cases = [
        ("delay 50", "delay", "50", "unit"),
        ("delay 50 parsecs", "delay", "50", "unit"),
        ("rate 45mbps", "rate", "45mbps", "unknown rate unit"),
        ("loss 150%", "loss", "150%", "between 0% and 100%"),
        ("loss gemodel", "loss gemodel p", "", "missing value"),
        ("loss 1% 25%", "loss correlation", "25%", "correlation is not supported"),
        ("delay 100ms 10ms 25%", "delay correlation", "25%", "correlation is not supported"),
        ("reorder 25% 50%", "reorder correlation", "50%", "correlation is not supported"),
        ("delay 10ms reorder 25% gap 5", "reorder gap", "5", "gap is not supported"),
        ("delay 10ms 1ms distribution paretonormal", "distribution", "paretonormal", "not supported"),
        ("loss state 1%", "loss state", "", "4-state Markov model is not supported"),
        ("loss 1% ecn", "loss ecn", "", "ECN"),
        ("slot distribution pareto 1ms 100us", "slot distribution", "pareto", "not supported"),
        ("slot 2ms 1ms", "slot", "", "MIN_DELAY <= MAX_DELAY"),
        ("rate 10mbit -4", "rate packetoverhead", "-4", "negative"),
        ("rate 10mbit 20 53", "rate cellsize", "53", "cell sizes"),
        ("limit lots", "limit", "lots", "whole number"),
        ("blackout 2s-1s", "blackout[0]", "", "end must be after start"),
        ("dist zipf", "distribution", "zipf", "uniform, normal or pareto"),
        ("wobble 3", "keyword", "wobble", "unknown"),
        ("profile packet-radio-1200 persist 0", "persist", "0", "never transmit"),
        ("csma maxframe 0 rate 1200bit", "maxframe", "0", "at least one frame"),
        ("csma", "rate", "0", "needs a bit rate"),
        ("profile packet-radio-9600 delay 1s 100ms", "jitter", "", "not modelled on a shared radio channel"),
        ("csma rate 1200bit duplicate 1%", "duplicate", "", "not modelled"),
        ("rate 1200bit slottime 0ms", "slottime", "0ms", "above 0 unless persist is 1"),
        ("txdelay soon", "txdelay", "soon", "number with a unit"),
        ("profile token-ring", "profile", "token-ring", "unknown profile"),
        ("ber 0.7", "ber", "0.7", "bit error rate"),
        ("delay 1ms at 5s loss ge 1% 0%", "at[0].loss ge r", "0", "bad state forever"),
    ];
    for (line, param, value, reason) in cases {
        let e = parse_line(line).expect_err(line);
        assert_eq!(e.param, param, "{line}: {e}");
        if !value.is_empty() {
            assert_eq!(e.value, value, "{line}: {e}");
        }
        assert!(e.reason.contains(reason), "{line}: {e}");
        assert!(e.to_string().contains(param), "{line}: display names the parameter");
    }
    let e = parse_toml("delay = [1, 2]").unwrap_err();
    assert_eq!(e.param, "delay");
    assert!(parse_toml("delay = ").is_err());
}

#[test]
fn every_profile_loads() {
    for name in profiles::NAMES {
        let p = profiles::profile(name).unwrap_or_else(|e| panic!("{name}: {e}"));
        p.validate().unwrap();
        assert!(p.rate_bps > 0 && p.mtu > 0, "{name}");
        assert_eq!(p.csma.is_some(), name.starts_with("packet-radio"), "{name}");
    }
}

#[test]
fn radio_keywords_refine_the_profile() {
    let s = parse_line(
        "profile packet-radio-9600 txdelay 100ms persist 50% slottime 20ms txtail 5ms dcd 2ms maxframe 2",
    )
    .unwrap();
    let c = s.params.csma.unwrap();
    assert_eq!(s.params.rate_bps, 9600);
    assert_eq!(s.params.mtu, 238);
    assert_eq!(
        (c.txdelay, c.persist, c.slot, c.txtail, c.dcd, c.maxframe),
        (
            Duration::from_millis(100),
            0.5,
            Duration::from_millis(20),
            Duration::from_millis(5),
            Duration::from_millis(2),
            2
        )
    );
    let t = parse_toml("profile = \"packet-radio-1200\"\npersist = \"100%\"\n").unwrap();
    assert_eq!(t.params.rate_bps, 1200);
    assert_eq!(t.params.csma.unwrap().persist, 1.0);
    assert!(parse_line("rate 1mbit").unwrap().params.csma.is_none());
}

/// The one size parser (the tools' `-n`, `-l`, `--window` and the link's
/// `limit-bytes`): powers of 1024 as in `tc` and iperf3, exact for whole
/// numbers, and a refusal naming the flag otherwise.
#[test]
fn byte_sizes_use_binary_units_and_refuse_nonsense() {
    use xk_netemu::parse_bytes;
    for (text, bytes) in [
        ("1500", 1500u64),
        ("64k", 65_536),
        ("64K", 65_536),
        ("64kb", 65_536),
        ("1m", 1 << 20),
        ("1.5m", 3 << 19),
        ("1G", 1 << 30),
        ("2t", 2 << 40),
        ("100000000", 100_000_000),
        ("10b", 10),
    ] {
        assert_eq!(parse_bytes("-n", text).unwrap(), bytes, "{text}");
    }
    for bad in ["", "k", "ten", "-1", "1x", "99999999999t"] {
        let e = parse_bytes("-n", bad).unwrap_err().to_string();
        assert!(e.starts_with("-n = "), "{bad}: {e}");
    }
    assert_eq!(xk_netemu::parse_rate("--rate", "10mbit").unwrap(), 10_000_000);
    let e = xk_netemu::parse_rate("--rate", "1000000").unwrap_err().to_string();
    assert!(e.contains("--rate") && e.contains("unit"), "{e}");
}

/// netem's numbers and its rule for jitter: `loss 1` is 1 %; jitter
/// reorders unless a rate is set or the line says otherwise.
#[test]
fn numbers_and_jitter_mean_what_they_mean_in_netem() {
    assert_eq!(parse_line("loss 1").unwrap().params.loss, Loss::Bernoulli(0.01));
    assert_eq!(parse_line("loss random 0.5").unwrap().params.loss, Loss::Bernoulli(0.005));
    assert_eq!(parse_line("duplicate 2").unwrap().params.duplicate, 0.02);
    let ge = parse_line("loss gemodel 1% 10%").unwrap().params.loss;
    assert_eq!(ge, Loss::GilbertElliott { p: 0.01, r: 0.1, loss_bad: 1.0, loss_good: 0.0, max_burst: 0 });
    let ge = parse_line("loss gemodel 10").unwrap().params.loss;
    assert_eq!(
        ge,
        Loss::GilbertElliott { p: 0.1, r: 0.9, loss_bad: 1.0, loss_good: 0.0, max_burst: 0 },
        "r = 1 - p"
    );
    assert!(parse_line("delay 10ms 2ms").unwrap().params.jitter_reorders);
    assert!(!parse_line("delay 10ms 2ms rate 10mbit").unwrap().params.jitter_reorders);
    assert!(!parse_line("delay 10ms 2ms jitter-keeps-order").unwrap().params.jitter_reorders);
    assert!(parse_line("delay 10ms 2ms rate 10mbit jitter-reorders").unwrap().params.jitter_reorders);
    let s = parse_line("delay 10ms 2ms jitter-keeps-order at 1s rate 1mbit at 2s delay 5ms").unwrap();
    assert!(s.changes.iter().all(|c| !c.params.jitter_reorders), "a change inherits what the line said");
    assert_eq!(parse_line("rate 10mbit 42").unwrap().params.overhead, 42);
    assert_eq!(parse_line("delay 10ms 1ms 0% loss 1% 0").unwrap().params.jitter, Duration::from_millis(1));
}

/// Every row of the netem table in `docs/NETEM.md`: the netem form parses
/// to what the row says, or is refused naming what the row says.
#[test]
fn every_row_of_the_netem_table_parses_as_documented() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/NETEM.md")).unwrap();
    let mut rows = 0;
    for line in doc.lines().filter(|l| l.starts_with("| `")) {
        let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
        let netem = cells[0].trim_matches('`');
        let ours = cells[1];
        rows += 1;
        match ours.strip_prefix("refused: ") {
            Some(named) => {
                let e = parse_line(netem).expect_err(netem);
                let named = named.trim_matches('`');
                assert!(e.to_string().contains(named), "{netem}: refusal {e} does not name {named:?}");
            }
            None => {
                let ours = ours.trim_matches('`');
                let a = parse_line(netem).unwrap_or_else(|e| panic!("{netem}: {e}"));
                let b = parse_line(ours).unwrap_or_else(|e| panic!("{ours}: {e}"));
                assert_eq!(a, b, "{netem} should mean {ours}");
            }
        }
    }
    assert!(rows >= 20, "only {rows} rows in the table");
}

/// What `emulate` and `netns` print parses back to the same link.
#[test]
fn a_link_is_printed_in_its_own_words_and_parses_back() {
    for line in [
        "delay 20ms rate 100mbit loss 1%",
        "delay 100ms 10ms distribution normal",
        "delay 100ms 10ms rate 45mbit 42 limit 1000 jitter-reorders",
        "loss gemodel 1% 10% 70% 0.1% burst 4 corrupt 0.5% duplicate 1% delay 5ms reorder 2%",
        "ber 1e-6 mtu 1400 limit-bytes 64k blackout 1s-1500ms",
        "profile packet-radio-9600 txdelay 50ms",
        "delay 1ms at 5s delay 50ms at 10s loss 3%",
        "delay 5ms slot 1ms 2ms packets 4 bytes 6000",
    ] {
        let a = parse_line(line).unwrap();
        let shown = a.to_string();
        let b = parse_line(&shown).unwrap_or_else(|e| panic!("{line} -> {shown}: {e}"));
        assert_eq!(b.to_string(), shown, "{line}");
        assert_eq!(a.params.delay, b.params.delay);
        assert_eq!(a.changes.len(), b.changes.len());
    }
    assert_eq!(
        parse_line("delay 20ms rate 100mbit loss 1").unwrap().to_string(),
        "delay 20ms loss 1% rate 100mbit"
    );
    assert_eq!(parse_line("").unwrap().to_string(), "none (a perfect link)");
}
