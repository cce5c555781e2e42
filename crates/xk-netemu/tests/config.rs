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
        ("loss ge 1%", "loss ge r", "", "missing value"),
        ("limit lots", "limit", "lots", "whole number"),
        ("blackout 2s-1s", "blackout[0]", "", "end must be after start"),
        ("dist zipf", "dist", "zipf", "uniform, normal or pareto"),
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
