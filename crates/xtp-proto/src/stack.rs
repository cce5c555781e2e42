//! XTP's kinds for graph descriptions, and an XTP stack built from one
//! (issue #16): `app -> xtp -> udp`, `app -> xtp -> ip36`, `app -> xtp -> link`.
//!
//! [`XtpStack::from_desc`] builds the run-time graph; [`XtpStack::compose`]
//! builds what the description's `compose` line asks for: the compiled
//! stack (`xk_core::compiled::Stack` over [`XtpProtocol`]) for the shape
//! `app -> xtp -> device` alone (`auto`, the default, or `compiled`), the
//! graph otherwise (`dynamic`, or any other shape under `auto`).

use xk_core::compiled::Stack;
use xk_core::device::GraphOn;
use xk_core::graph_desc::{APP, Catalogue, Compose, DescError, GraphDesc, Kind, Service};
use xk_core::{ArenaId, Graph, ProtocolId};
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

/// The kinds a description of an XTP graph may use: the application, XTP
/// and its devices. Not `xk-core`'s toys (`echo`, `mux`, `loop`): no XTP
/// stack builds them, so a description naming one is refused where it is
/// parsed, by line, and the list of known names in that error is what an
/// XTP graph accepts.
pub fn catalogue() -> Catalogue {
    Catalogue::new([APP, XTP, UDP, IP36, LINK])
}

/// An XTP graph built from a description.
pub struct XtpStack<M> {
    /// The graph.
    pub graph: Graph<M>,
    /// The XTP protocol (the one on the device).
    pub xtp: ProtocolId,
    /// The device below XTP.
    pub device: Kind,
}

impl<M: Msg + 'static> XtpStack<M> {
    /// Parses `text` and builds it with XTP's timers in a `Q`, its demux
    /// map's one-entry cache if `CACHE`. The description must hold
    /// `xk-core`'s application on `xtp` on a device.
    pub fn from_desc<Q: TimerQueue<ArenaId> + Default + 'static, const CACHE: bool>(
        text: &str,
        ep: EndpointConfig,
        ctx: ContextConfig,
        seed: u64,
    ) -> Result<Self, DescError> {
        let desc = GraphDesc::parse(text, &catalogue())?;
        let whole = |reason: String| DescError { line: 0, reason };
        let x = desc
            .find(XTP.name)
            .ok_or_else(|| whole("no `xtp` layer (write e.g. `app -> xtp -> udp`)".into()))?;
        let device = desc.layers[desc.layers[x].below.expect("checked: xtp needs a lower layer")].kind;
        if !desc.layers.iter().any(|l| l.kind.name == "app" && l.below == Some(x)) {
            return Err(whole("nothing sits on `xtp`: the application needs `app -> xtp`".into()));
        }
        let built = desc.build::<M>(|k| match k.name {
            "xtp" => {
                Ok(Box::new(XtpProtocol::<M, Q, CACHE>::with_timer_queue(ep.clone(), ctx.clone(), seed)))
            }
            other => Err(format!("an XTP stack has no place for `{other}`")),
        })?;
        let xtp = built.ids[x].expect("xtp is a protocol");
        Ok(XtpStack { graph: built.graph, xtp, device })
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
    /// documentation), with the device named in it.
    pub fn compose<Q: TimerQueue<ArenaId> + Default + 'static, const CACHE: bool>(
        text: &str,
        ep: EndpointConfig,
        ctx: ContextConfig,
        seed: u64,
    ) -> Result<(Composed<M, Q, CACHE>, Kind), DescError> {
        let desc = GraphDesc::parse(text, &catalogue())?;
        let fits = desc.layers.len() == 3;
        let compiled = match desc.compose {
            Compose::Dynamic => false,
            Compose::Auto => fits,
            Compose::Compiled if fits => true,
            Compose::Compiled => {
                return Err(DescError {
                    line: 0,
                    reason: "`compose compiled`: only `app -> xtp -> <device>` alone has a compiled form \
                             (write `compose dynamic` or `compose auto` for this graph)"
                        .into(),
                });
            }
        };
        // The checks (an XTP layer, the application on it) are the graph's.
        let g = Self::from_desc::<Q, CACHE>(text, ep.clone(), ctx.clone(), seed)?;
        if !compiled {
            return Ok((Composed::Graph(GraphOn::new(g.graph, g.xtp)), g.device));
        }
        let xtp = XtpProtocol::<M, Q, CACHE>::with_timer_queue(ep, ctx, seed);
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
            loop_.contains("line 2: unknown protocol `echo` (known: app, xtp, udp, ip36, link)"),
            "{loop_}"
        );
        assert!(e("app -> xpt -> udp").contains("did you mean `xtp`?"), "{}", e("app -> xpt -> udp"));
        assert!(e("app -> xtp").contains("`xtp` has no lower layer"));
        assert!(e("app -> udp").contains("edge `app -> udp`: `app` cannot sit above `udp`"));
        assert!(e("xtp -> udp").contains("nothing sits on `xtp`"));
        assert!(e("app -> xtp -> udp -> ip36").contains("`udp` is a root"));
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
        // A graph beside XTP's has no compiled form.
        let two = "app -> xtp -> udp\nlink";
        assert!(
            compose(&format!("compose compiled\n{two}"))
                .unwrap_err()
                .contains("only `app -> xtp -> <device>`")
        );
        assert!(compose("compose fast\napp -> xtp -> udp").unwrap_err().contains("line 1: `compose fast`"));
        assert!(
            compose("compose auto\ncompose dynamic\napp -> xtp -> udp")
                .unwrap_err()
                .contains("a second `compose`")
        );
        assert!(compose("app -> xtp").unwrap_err().contains("`xtp` has no lower layer"));
    }
}
