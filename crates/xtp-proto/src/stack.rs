//! XTP's kinds for graph descriptions, the registry of what an XTP graph
//! may hold, and an XTP stack built from a description (issue #16):
//! `app -> xtp -> udp`, `app -> xtp -> ip36`, `app -> xtp -> link`, and any
//! registered layer where its services fit (`app -> xtp -> census -> udp`).
//!
//! [`XtpStack::from_desc`] builds the run-time graph; [`XtpStack::compose`]
//! builds what the description's `compose` line asks for: the compiled
//! stack (`xk_core::compiled::Stack` over [`XtpProtocol`]) for the shape
//! `app -> xtp -> device` alone (`auto`, the default, or `compiled`), the
//! graph otherwise (`dynamic`, or any other shape under `auto`: the
//! compiled stack holds one protocol).

use xk_core::compiled::Stack;
use xk_core::device::GraphOn;
use xk_core::graph_desc::{APP, Catalogue, Compose, DescError, Kind, Service};
use xk_core::registry::Registry;
use xk_core::{ArenaId, Graph, Protocol, ProtocolId};
use xk_msg::Msg;
use xk_time::TimerQueue;

use crate::config::{ContextConfig, EndpointConfig};
use crate::layer::XtpProtocol;

/// XTP: transport sessions over a datagram device.
pub const XTP: Kind = Kind {
    name: "xtp",
    needs: &[Service::Datagram],
    offers: Some(Service::Sessions),
    device: false,
    needs_root: false,
    about: "XTP 4.0 (xtp_proto::XtpProtocol)",
};

/// A UDP socket as the device.
pub const UDP: Kind = Kind {
    name: "udp",
    needs: &[],
    offers: Some(Service::Datagram),
    device: true,
    needs_root: false,
    about: "a UDP socket (the driver)",
};

/// A raw IP socket, protocol 36 (XTP's IANA number), as the device.
pub const IP36: Kind = Kind {
    name: "ip36",
    needs: &[],
    offers: Some(Service::Datagram),
    device: true,
    needs_root: true,
    about: "a raw IP socket, protocol 36 (root)",
};

/// A simulated link (the simulator or the in-process wire) as the device.
pub const LINK: Kind = Kind {
    name: "link",
    needs: &[],
    offers: Some(Service::Datagram),
    device: true,
    needs_root: false,
    about: "a simulated link (xk-sim, xtp-testkit's GraphWire)",
};

/// What the registry's constructors are given: XTP's configuration.
#[derive(Clone, Debug)]
pub struct Env {
    /// The endpoint's.
    pub ep: EndpointConfig,
    /// Each context's.
    pub ctx: ContextConfig,
    /// The seed of XTP's random choices.
    pub seed: u64,
}

fn make_xtp<M: Msg + 'static, Q: TimerQueue<ArenaId> + Default + 'static, const CACHE: bool>(
    env: &Env,
) -> Result<Box<dyn Protocol<M>>, String> {
    Ok(Box::new(XtpProtocol::<M, Q, CACHE>::with_timer_queue(env.ep.clone(), env.ctx.clone(), env.seed)))
}

/// The registry of an XTP graph: the application, XTP (its timers in a
/// `Q`, its demux cache if `CACHE`), the devices, and every protocol a
/// graph may put between them — one line each (docs/ARCHITECTURE.md,
/// "Adding a protocol").
///
/// Not `xk-core`'s toys (`echo`, `mux`, `loop`): their frames carry no
/// peer address (`loop`'s 2-byte type header, not the device header), so
/// no datagram device here can drive them, and their services (ports,
/// link frames) meet nothing XTP offers or needs. A description naming one
/// is refused where it is parsed, by line. They run in graphs of their own
/// (`xk_core::protocols`, E9).
pub fn registry<M: Msg + 'static, Q: TimerQueue<ArenaId> + Default + 'static, const CACHE: bool>()
-> Registry<M, Env> {
    Registry::new()
        .protocol(XTP, make_xtp::<M, Q, CACHE>)
        .device(UDP)
        .device(IP36)
        .device(LINK)
        .protocol(xk_core::protocols::census::KIND, xk_core::protocols::census::make)
}

/// The kinds a description of an XTP graph may use ([`registry`]'s); the
/// list of known names in an "unknown protocol" error.
pub fn catalogue() -> Catalogue {
    registry::<xk_msg::Rope, xk_time::HeapQueue<ArenaId>, true>().catalogue()
}

/// An XTP graph built from a description.
pub struct XtpStack<M> {
    /// The graph.
    pub graph: Graph<M>,
    /// The XTP protocol.
    pub xtp: ProtocolId,
    /// The protocol the application sits on (XTP, today's only kind
    /// offering sessions).
    pub top: ProtocolId,
    /// The protocol on the device (XTP, or a layer between it and the
    /// device, e.g. a `census`).
    pub bottom: ProtocolId,
    /// The device at the bottom of the application's path.
    pub device: Kind,
    /// The layers from the application down to the device, by name.
    pub path: Vec<&'static str>,
}

impl<M> XtpStack<M> {
    /// The graph on its device, as a driver runs it (frames in and out at
    /// [`XtpStack::bottom`], the application's verbs at [`XtpStack::top`]).
    pub fn on_device(self) -> GraphOn<Graph<M>> {
        GraphOn { graph: self.graph, device: self.bottom, top: self.top, bad_frames: 0 }
    }
}

impl<M: Msg + 'static> XtpStack<M> {
    /// Parses `text` and builds it with XTP's timers in a `Q`, its demux
    /// map's one-entry cache if `CACHE`: [`XtpStack::from_registry`] with
    /// [`registry`].
    pub fn from_desc<Q: TimerQueue<ArenaId> + Default + 'static, const CACHE: bool>(
        text: &str,
        ep: EndpointConfig,
        ctx: ContextConfig,
        seed: u64,
    ) -> Result<Self, DescError> {
        Self::from_registry(&registry::<M, Q, CACHE>(), text, &Env { ep, ctx, seed })
    }

    /// Parses `text` against `reg` and builds it, each protocol by its
    /// registered constructor given `env`. The description must hold
    /// `xk-core`'s application on a path through `xtp` down to a device;
    /// any registered layer may sit where its services fit. A crate with a
    /// protocol of its own passes [`registry`] plus its line
    /// (`registry::<..>().protocol(KIND, make)`): nothing here names it.
    pub fn from_registry(reg: &Registry<M, Env>, text: &str, env: &Env) -> Result<Self, DescError> {
        let desc = reg.parse(text)?;
        let whole = |reason: String| DescError { line: 0, reason };
        let x = desc
            .find(XTP.name)
            .ok_or_else(|| whole("no `xtp` layer (write e.g. `app -> xtp -> udp`)".into()))?;
        let app = desc.find(APP.name).ok_or_else(|| {
            whole("nothing sits on `xtp`: the application needs `app -> xtp` (or a layer between)".into())
        })?;
        let path = desc.path_down(app);
        if !path.contains(&XTP.name) {
            return Err(whole(format!(
                "the application's path `{}` does not go through `xtp`",
                path.join(" -> ")
            )));
        }
        // A layer off that path would be built and wired but never given a
        // frame (the driver runs the path's device only): refused.
        if let Some(l) = desc.layers.iter().find(|l| !path.contains(&l.kind.name)) {
            return Err(DescError {
                line: l.line,
                reason: format!(
                    "`{}` is not on the application's path `{}`: an XTP graph is that one path",
                    l.kind.name,
                    path.join(" -> ")
                ),
            });
        }
        let mut down = desc.layers[app].below;
        let (mut top, mut bottom) = (None, None);
        while let Some(i) = down {
            let l = &desc.layers[i];
            if !l.kind.device {
                top = top.or(Some(i));
                bottom = Some(i);
            }
            down = l.below;
        }
        let root =
            desc.layers.iter().position(|l| l.kind.name == *path.last().expect("app")).expect("on the path");
        let device = desc.layers[root].kind;
        if !device.device {
            return Err(whole(format!(
                "`{}` at the bottom of `{}` is not a device",
                device.name,
                path.join(" -> ")
            )));
        }
        let built = reg.build(&desc, env)?;
        let id = |i: Option<usize>| i.and_then(|i| built.ids[i]).expect("checked: a protocol on the path");
        let (xtp, top, bottom) = (id(Some(x)), id(top), id(bottom));
        Ok(XtpStack { graph: built.graph, xtp, top, bottom, device, path })
    }
}

/// An XTP stack as its description asks to be composed.
// Built once and moved into its driver once: not boxed, so the compiled
// stack's verbs reach XTP without an indirection.
#[allow(clippy::large_enum_variant)]
pub enum Composed<M, Q: TimerQueue<ArenaId>, const CACHE: bool> {
    /// The run-time graph, XTP on the device.
    Graph(GraphOn<Graph<M>>),
    /// The compiled stack: the application over XTP over the device, XTP a
    /// type parameter (no dynamic dispatch).
    Compiled(Stack<M, XtpProtocol<M, Q, CACHE>>),
}

impl<M: Msg + 'static> XtpStack<M> {
    /// Parses `text` and builds what it asks for (see the module
    /// documentation), with the device named in it: [`XtpStack::compose_from`]
    /// with [`registry`].
    pub fn compose<Q: TimerQueue<ArenaId> + Default + 'static, const CACHE: bool>(
        text: &str,
        ep: EndpointConfig,
        ctx: ContextConfig,
        seed: u64,
    ) -> Result<(Composed<M, Q, CACHE>, Kind), DescError> {
        Self::compose_from(&registry::<M, Q, CACHE>(), text, Env { ep, ctx, seed })
    }

    /// [`XtpStack::compose`] against a caller's registry (see
    /// [`XtpStack::from_registry`]); the compiled form, if chosen, is XTP
    /// with timers in a `Q`, demux cache if `CACHE`.
    pub fn compose_from<Q: TimerQueue<ArenaId> + Default + 'static, const CACHE: bool>(
        reg: &Registry<M, Env>,
        text: &str,
        env: Env,
    ) -> Result<(Composed<M, Q, CACHE>, Kind), DescError> {
        let desc = reg.parse(text)?;
        // The checks (an XTP layer, the application's path through it to a
        // device) are the graph's.
        let g = Self::from_registry(reg, text, &env)?;
        // The compiled stack holds the application, one protocol and the
        // device: nothing else in the description (and the checks put the
        // application, `xtp` and a device on it).
        let fits = desc.layers.len() == 3;
        let compiled = match desc.compose {
            Compose::Dynamic => false,
            Compose::Auto => fits,
            Compose::Compiled if fits => true,
            Compose::Compiled => {
                // The layer at fault is the first one on the application's
                // path, from the top, that is neither the application,
                // `xtp` nor the device (the checks above put every layer
                // on that path), with where it sits: above `xtp` (a
                // caller's kind that needs and offers sessions) or below
                // it. Its line, as every other refusal gives one.
                let mut extra = None;
                let (mut at, mut above_xtp) = (desc.find(APP.name), true);
                while let Some(i) = at {
                    let l = &desc.layers[i];
                    if l.kind.name == XTP.name {
                        above_xtp = false;
                    } else if l.kind.name != APP.name && !l.kind.device {
                        extra = Some((l, above_xtp));
                        break;
                    }
                    at = l.below;
                }
                return Err(DescError {
                    line: extra.map_or(0, |(l, _)| l.line),
                    reason: format!(
                        "`compose compiled`: {}only `app -> xtp -> <device>` alone has a compiled form, \
                         the compiled stack holding one protocol (this graph: {}); \
                         write `compose dynamic` or `compose auto` for this graph",
                        extra.map_or(String::new(), |(l, above)| format!(
                            "`{}` sits between {}; ",
                            l.kind.name,
                            if above { "the application and `xtp`" } else { "`xtp` and the device" }
                        )),
                        g.path.join(", ")
                    ),
                });
            }
        };
        if !compiled {
            let device = g.device;
            return Ok((Composed::Graph(g.on_device()), device));
        }
        let xtp = XtpProtocol::<M, Q, CACHE>::with_timer_queue(env.ep, env.ctx, env.seed);
        let stack = Stack::new(xtp).map_err(|e| DescError { line: 0, reason: format!("xtp: {e}") })?;
        Ok((Composed::Compiled(stack), g.device))
    }
}

#[cfg(test)]
mod tests {
    use xk_msg::Rope;
    use xk_time::HeapQueue;

    use super::*;

    fn build(text: &str) -> Result<XtpStack<Rope>, DescError> {
        XtpStack::from_desc::<HeapQueue<ArenaId>, true>(
            text,
            EndpointConfig::default(),
            ContextConfig::stream(),
            1,
        )
    }

    #[test]
    fn the_three_stacks_build_and_bad_ones_are_named() {
        for (text, dev) in
            [("app -> xtp -> udp", "udp"), ("app -> xtp -> ip36", "ip36"), ("app->xtp->link", "link")]
        {
            let s = build(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(s.device.name, dev);
        }
        assert!(build("app -> xtp -> udp").unwrap().device.device);
        let e = |t| build(t).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(e("app -> xtp -> tcp").contains("unknown protocol `tcp`"));
        assert!(e("app -> xtp -> app").contains("edge `xtp -> app`"), "{}", e("app -> xtp -> app"));
        let loop_ = e("app -> xtp -> udp\necho -> mux -> loop");
        assert!(
            loop_.contains("line 2: unknown protocol `echo` (known: app, xtp, udp, ip36, link, census)"),
            "{loop_}"
        );
        assert!(e("app -> xpt -> udp").contains("did you mean `xtp`?"), "{}", e("app -> xpt -> udp"));
        assert!(e("app -> xtp").contains("`xtp` has no lower layer"));
        assert!(e("app -> udp").contains("edge `app -> udp`: `app` cannot sit above `udp`"));
        assert!(e("xtp -> udp").contains("nothing sits on `xtp`"));
        assert!(e("app -> xtp -> udp -> ip36").contains("`udp` is a root"));
        // A registered layer goes where its services fit, and nowhere else.
        let s = build("app -> xtp -> census -> udp").unwrap();
        assert_eq!(s.path, ["app", "xtp", "census", "udp"]);
        assert_eq!((s.top, s.device.name), (s.xtp, "udp"));
        assert_eq!(s.graph.protocols().find(|&(p, _)| p == s.bottom).map(|p| p.1), Some("census"));
        assert!(
            e("app -> census -> xtp -> udp")
                .contains("edge `app -> census`: `app` cannot sit above `census`"),
            "{}",
            e("app -> census -> xtp -> udp")
        );
        assert!(
            e("app -> xtp -> cenus -> udp")
                .contains("line 1: unknown protocol `cenus`, did you mean `census`?")
        );
        assert!(e("app -> xtp -> census").contains("`census` has no lower layer"));
        assert!(
            e("app -> xtp -> udp\ncensus -> link")
                .contains("line 2: `link` is not on the application's path `app -> xtp -> udp`"),
            "{}",
            e("app -> xtp -> udp\ncensus -> link")
        );
        assert!(
            e("app -> xtp -> census -> census -> udp").contains(
                "line 1: edge `census -> census`: a name stands for one layer, so `census` cannot sit on itself"
            ),
            "{}",
            e("app -> xtp -> census -> census -> udp")
        );
        assert!(
            e("app -> xtp -> udp\nxtp -> census -> link")
                .contains("line 2: edge `xtp -> census`: `xtp` already sits on `udp`")
        );
    }

    fn compose(text: &str) -> Result<&'static str, String> {
        let r = XtpStack::<Rope>::compose::<HeapQueue<ArenaId>, true>(
            text,
            EndpointConfig::default(),
            ContextConfig::stream(),
            1,
        );
        match r {
            Ok((Composed::Graph(_), _)) => Ok("graph"),
            Ok((Composed::Compiled(_), _)) => Ok("compiled"),
            Err(e) => Err(e.to_string()),
        }
    }

    #[test]
    fn the_description_selects_the_composition() {
        assert_eq!(compose("app -> xtp -> udp"), Ok("compiled"));
        assert_eq!(compose("compose compiled\napp -> xtp -> ip36"), Ok("compiled"));
        assert_eq!(compose("compose dynamic\napp -> xtp -> udp"), Ok("graph"));
        // A layer beside XTP's path is refused, by line, whatever the mode.
        let two = "app -> xtp -> udp\nlink";
        for mode in ["compiled", "dynamic", "auto"] {
            let e = compose(&format!("compose {mode}\n{two}")).unwrap_err();
            assert!(e.contains("line 3: `link` is not on the application's path `app -> xtp -> udp`"), "{e}");
        }
        assert!(compose("compose fast\napp -> xtp -> udp").unwrap_err().contains("line 1: `compose fast`"));
        assert!(
            compose("compose auto\ncompose dynamic\napp -> xtp -> udp")
                .unwrap_err()
                .contains("a second `compose`")
        );
        assert!(compose("app -> xtp").unwrap_err().contains("`xtp` has no lower layer"));
        // A layer between XTP and the device: the graph under `auto`, a
        // refusal naming the layers under `compiled`.
        assert_eq!(compose("app -> xtp -> census -> udp"), Ok("graph"));
        let e = compose("compose compiled\napp -> xtp -> census -> udp").unwrap_err();
        assert!(e.contains("only `app -> xtp -> <device>`") && e.contains("app, xtp, census, udp"), "{e}");
        // By line, as every other refusal: the line naming the layer that
        // has no place in the compiled stack (here not the first line
        // naming a layer, nor the `compose` line).
        assert!(e.contains("line 2: `compose compiled`: `census` sits between `xtp` and the device"), "{e}");
        let e = compose("app -> xtp\ncompose compiled\n\nxtp -> census -> udp").unwrap_err();
        assert!(e.contains("line 4: `compose compiled`: `census` sits between"), "{e}");
    }
}
