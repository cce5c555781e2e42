//! "A new protocol = one module implementing the interface + one line in
//! the graph" (issue #16), checked two ways.
//!
//! In the workspace: outside its own file, the `census` layer is named by
//! exactly two lines of code in all the crates' sources — its `mod` line and
//! its registry line. Nothing else (the graph, the description parser, the
//! compositions, the drivers, `xpress`, `xk-lab`) special-cases it: its
//! counters reach `xpress` through the generic `Control::GetCounters`, its
//! placement through the generic service checks.
//!
//! Downstream: a protocol defined in this file (`scramble`), which no crate
//! of the workspace names, is registered by the caller
//! (`XtpStack::from_registry` with XTP's registry plus its line) and
//! carries XTP's traffic.

use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Whether `line` names `word` as an identifier (not inside a longer one).
fn names(line: &str, word: &str) -> bool {
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    line.match_indices(word).any(|(i, _)| {
        !line[..i].chars().next_back().is_some_and(ident)
            && !line[i + word.len()..].chars().next().is_some_and(ident)
    })
}

/// The code lines of `text` without comments and without its unit-test
/// modules (`#[cfg(test)] mod tests { .. }`, skipped to their closing
/// brace); any other `#[cfg(test)]` item is kept.
fn code_lines(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut skipping, mut cfg_test) = (0i64, false, false);
    for line in text.lines() {
        let l = line.split("//").next().unwrap_or("").trim();
        if skipping {
            depth += l.matches('{').count() as i64 - l.matches('}').count() as i64;
            skipping = depth > 0;
            continue;
        }
        if cfg_test && l.starts_with("mod ") && l.ends_with('{') {
            (depth, skipping) = (l.matches('{').count() as i64 - l.matches('}').count() as i64, true);
            cfg_test = false;
            continue;
        }
        // The attribute itself names nothing.
        cfg_test = l == "#[cfg(test)]";
        if !cfg_test {
            out.push(l);
        }
    }
    out
}

#[test]
fn code_lines_skip_test_modules_only() {
    let text = "#[cfg(test)]\nfn helper() { census }\nfn a() {}\n#[cfg(test)]\nmod tests {\n  fn t() { census }\n}\nfn b() {} // census";
    assert_eq!(code_lines(text), ["fn helper() { census }", "fn a() {}", "fn b() {}"]);
}

#[test]
fn the_census_is_one_file_plus_its_mod_line_plus_its_registry_line() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = Vec::new();
    for c in std::fs::read_dir(&crates).unwrap() {
        let src = c.unwrap().path().join("src");
        if src.is_dir() {
            rust_files(&src, &mut files);
        }
    }
    let own = crates.join("xk-core/src/protocols/census.rs");
    assert!(files.iter().any(|f| f == &own), "the census's file is where the registry line says");
    assert!(files.iter().any(|f| f.ends_with("xk-lab/src/e10.rs")), "xk-lab is scanned");
    let mut hits = Vec::new();
    for f in files.iter().filter(|f| **f != own) {
        let text = std::fs::read_to_string(f).unwrap();
        for l in code_lines(&text) {
            if names(l, "census") || names(l, "Census") {
                let rel = f.strip_prefix(&crates).unwrap_or(f).display().to_string();
                hits.push(format!("{rel}: {l}"));
            }
        }
    }
    hits.sort();
    assert_eq!(
        hits,
        [
            "xk-core/src/protocols/mod.rs: pub mod census;",
            "xtp-proto/src/stack.rs: .protocol(xk_core::protocols::census::KIND, xk_core::protocols::census::make)",
        ],
        "code outside the census's file that names it"
    );
}

/// A protocol defined here, downstream of `xk-core` and `xtp-proto` (one
/// module in this file): it scrambles every datagram (XOR 0x5a after the
/// device header) on the way down and unscrambles on the way up, and
/// answers `Control::GetCounters` with how many it did each way.
mod scramble {
    use xk_core::device::ADDR_HEADER;
    use xk_core::graph_desc::{Kind, Service};
    use xk_core::{
        ArenaId, CloseError, Control, ControlError, ControlReply, Ctx, DemuxError, Layer, OpenError,
        Participants, Protocol, PushError, SessionId, Upper,
    };
    use xk_msg::{Bytes, Msg};

    pub(super) const KIND: Kind = Kind {
        name: "scramble",
        needs: &[Service::Datagram],
        offers: Some(Service::Datagram),
        device: false,
        needs_root: false,
        about: "XORs each datagram with 0x5a (a test's protocol)",
    };

    pub(super) fn make<M: Msg, E>(_: &E) -> Result<Box<dyn Protocol<M>>, String> {
        Ok(Box::new(Scramble::default()))
    }

    #[derive(Default)]
    pub(super) struct Scramble {
        upper: Option<Upper>,
        down: u64,
        up: u64,
    }

    fn session(cx: &Ctx<'_, impl Msg>) -> SessionId {
        SessionId { protocol: cx.me(), slot: ArenaId::from_parts(0, 1) }
    }

    fn flip<M: Msg>(msg: &M) -> M {
        let mut v = msg.to_vec();
        for b in v.iter_mut().skip(ADDR_HEADER) {
            *b ^= 0x5a;
        }
        M::from_payload(Bytes::from(v), 0)
    }

    impl<'a, M: Msg> Layer<M, Ctx<'a, M>> for Scramble {
        fn name(&self) -> &'static str {
            KIND.name
        }
        fn open(&mut self, cx: &mut Ctx<'a, M>, up: Upper, _: &Participants) -> Result<SessionId, OpenError> {
            if self.upper.replace(up).is_some() {
                return Err(OpenError::Unsupported("one upper layer"));
            }
            Ok(session(cx))
        }
        fn open_enable(&mut self, _: &mut Ctx<'a, M>, _: Upper, _: &Participants) -> Result<(), OpenError> {
            Err(OpenError::Unsupported("opened by the layer above"))
        }
        fn open_disable(&mut self, _: &mut Ctx<'a, M>, _: Upper, _: &Participants) -> Result<(), OpenError> {
            Err(OpenError::Unsupported("opened by the layer above"))
        }
        fn demux(
            &mut self,
            cx: &mut Ctx<'a, M>,
            _: Option<SessionId>,
            _: &mut M,
        ) -> Result<SessionId, DemuxError> {
            self.upper.map(|_| session(cx)).ok_or_else(|| DemuxError::NoBinding("nothing above".into()))
        }
        fn pop(
            &mut self,
            cx: &mut Ctx<'a, M>,
            s: SessionId,
            _: Option<SessionId>,
            msg: M,
        ) -> Result<(), DemuxError> {
            let up = self.upper.ok_or(DemuxError::StaleSession)?;
            self.up += 1;
            cx.deliver(up, s, flip(&msg), true);
            Ok(())
        }
        fn push(&mut self, cx: &mut Ctx<'a, M>, _: SessionId, msg: M) -> Result<(), PushError> {
            self.down += 1;
            cx.transmit(flip(&msg));
            Ok(())
        }
        fn control(
            &mut self,
            _: &mut Ctx<'a, M>,
            _: Option<SessionId>,
            req: Control,
        ) -> Result<ControlReply, ControlError> {
            match req {
                Control::GetCounters => {
                    Ok(ControlReply::Counters(vec![("scrambled", self.down), ("unscrambled", self.up)]))
                }
                _ => Err(ControlError::Unsupported(req)),
            }
        }
        fn close(&mut self, _: &mut Ctx<'a, M>, _: SessionId) -> Result<(), CloseError> {
            Err(CloseError::NoSession)
        }
    }
}

/// A downstream crate adds a protocol without editing `xtp-proto` or
/// `xk-core`: its module (above) plus one registry line, passed to
/// `XtpStack::from_registry`. The scrambled graphs carry an XTP echo both
/// ways, the layer's counters reach the generic `DeviceStack::counters`,
/// and it is really on the path: a graph without it on the other end gets
/// nothing through (its XTP counts the scrambled frames malformed).
#[test]
fn a_protocol_defined_downstream_is_registered_by_the_caller_and_carries_xtp() {
    use xk_core::device::DeviceStack;
    use xk_core::{Addr, ArenaId, Event, Part, Participants};
    use xk_msg::{Bytes, Msg, Rope};
    use xk_time::{Duration, HeapQueue, Instant};
    use xtp_proto::stack::{Env, XtpStack, registry};
    use xtp_proto::{ContextConfig, EndpointConfig};
    use xtp_testkit::GraphWire;

    let reg = registry::<Rope, HeapQueue<ArenaId>, true>().protocol(scramble::KIND, scramble::make);
    let env = |seed| Env { ep: EndpointConfig::default(), ctx: ContextConfig::stream(), seed };
    let e = XtpStack::<Rope>::from_desc::<HeapQueue<ArenaId>, true>(
        "app -> xtp -> scramble -> link",
        EndpointConfig::default(),
        ContextConfig::stream(),
        1,
    )
    .err()
    .map(|e| e.to_string())
    .unwrap_or_default();
    assert!(e.contains("unknown protocol `scramble`"), "XTP's own registry does not know it: {e}");
    let run = |server_text: &str| {
        let a = XtpStack::<Rope>::from_registry(&reg, "app -> xtp -> scramble -> link", &env(1)).unwrap();
        let mut b = XtpStack::<Rope>::from_registry(&reg, server_text, &env(2)).unwrap();
        b.graph.open_enable(b.top, &Participants::local(Part::top_first([Addr::Port(7)]))).unwrap();
        let (aa, ba) = ("10.0.0.1:1".parse().unwrap(), "10.0.0.2:1".parse().unwrap());
        let (atop, abottom) = (a.top, a.bottom);
        let mut w = GraphWire::new((a.graph, abottom, aa), (b.graph, b.bottom, ba), Instant::ZERO);
        w.step = Duration::from_micros(1);
        let parts = Participants::new(Part::new(), Part::top_first([Addr::Port(7), Addr::Inet(ba)]));
        let s = w.a.open(atop, &parts).unwrap();
        let payload: Vec<u8> = (0..20_000).map(|i| (i * 7) as u8).collect();
        w.a.push(s, Rope::from_payload(Bytes::from(payload.clone()), 0)).unwrap();
        let mut back = Vec::new();
        for _ in 0..2_000 {
            w.exchange();
            while let Some(ev) = w.b.poll_event() {
                if let Event::Deliver { session, msg, .. } = ev {
                    w.b.push(session, msg).unwrap();
                }
            }
            w.exchange();
            while let Some(ev) = w.a.poll_event() {
                if let Event::Deliver { msg, .. } = ev {
                    back.extend_from_slice(&msg.to_vec());
                }
            }
            if back.len() >= payload.len() || !w.fire_next_timer(Some(Instant::from_secs(5))) {
                break;
            }
        }
        let mut a = xk_core::device::GraphOn { graph: w.a, device: abottom, top: atop, bad_frames: 0 };
        (back == payload, a.counters())
    };
    let (echoed, counters) = run("app -> xtp -> scramble -> link");
    assert!(echoed, "the echo came back whole through two scramble layers");
    match counters.as_slice() {
        [("scramble", c)] => {
            assert_eq!(c[0].0, "scrambled");
            assert!(c[0].1 > 10 && c[1].1 > 10, "{c:?}");
        }
        other => panic!("one scramble layer's counters: {other:?}"),
    }
    let (echoed, _) = run("app -> xtp -> link");
    assert!(!echoed, "a peer without the layer understood scrambled frames: it is not on the path");
}

/// `compose compiled` names the layer that has no place in the compiled
/// stack and where it sits on the application's path: a caller's kind
/// above XTP (one that needs and offers sessions) sits between the
/// application and `xtp`, not between `xtp` and the device.
#[test]
fn compose_compiled_says_where_a_callers_layer_sits() {
    use xk_core::ArenaId;
    use xk_core::graph_desc::{Kind, Service};
    use xk_msg::Rope;
    use xk_time::HeapQueue;
    use xtp_proto::stack::{Composed, Env, XtpStack, registry};
    use xtp_proto::{ContextConfig, EndpointConfig};

    const OVER: Kind = Kind {
        name: "over",
        needs: &[Service::Sessions],
        offers: Some(Service::Sessions),
        device: false,
        needs_root: false,
        about: "sessions over XTP's sessions (a test's kind)",
    };
    // Only a kind's services place its layer, and these descriptions are
    // refused (or built, under `auto`) before any frame moves: the object
    // behind `over` is scramble's, never run.
    let reg = registry::<Rope, HeapQueue<ArenaId>, true>()
        .protocol(OVER, scramble::make)
        .protocol(scramble::KIND, scramble::make);
    let compose = |text: &str| {
        let env = Env { ep: EndpointConfig::default(), ctx: ContextConfig::stream(), seed: 1 };
        match XtpStack::<Rope>::compose_from::<HeapQueue<ArenaId>, true>(&reg, text, env) {
            Ok((Composed::Graph(_), _)) => "graph".to_string(),
            Ok((Composed::Compiled(_), _)) => "compiled".to_string(),
            Err(e) => e.to_string(),
        }
    };
    assert_eq!(compose("app -> over\nover -> xtp -> udp"), "graph", "the shape builds, as a graph");
    let e = compose("compose compiled\napp -> over\nover -> xtp -> udp");
    assert!(
        e.contains(
            "line 2: `compose compiled`: `over` sits between the application and `xtp`; \
             only `app -> xtp -> <device>` alone has a compiled form"
        ) && e.contains("(this graph: app, over, xtp, udp)"),
        "{e}"
    );
    // Below XTP, a caller's kind as the census: between `xtp` and the device.
    let e = compose("compose compiled\napp -> xtp -> scramble -> link");
    assert!(e.contains("line 2: `compose compiled`: `scramble` sits between `xtp` and the device"), "{e}");
    // One above and one below: the first from the top is named.
    let e = compose("compose compiled\napp -> over -> xtp\nxtp -> scramble -> udp");
    assert!(e.contains("line 2: `compose compiled`: `over` sits between the application and `xtp`"), "{e}");
}
