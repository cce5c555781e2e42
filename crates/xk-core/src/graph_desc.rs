//! Graph descriptions: which protocols a graph holds and which sits on which,
//! as text, checked before anything is built (the x-kernel's `graph.comp`,
//! Click's configuration language, in a few lines).
//!
//! # Format
//!
//! One chain per line, highest layer first, layers joined by `->`; `#`
//! starts a comment; blank lines are ignored. A name may appear in several
//! chains (it is one node); chains are how a graph with branches is written.
//!
//! ```text
//! # XTP over UDP sockets
//! app -> xtp -> udp
//! ```
//!
//! A line `compose dynamic`, `compose compiled` or `compose auto` (the
//! default) says how the graph is to be composed: as a run-time
//! [`Graph`](crate::Graph) (rearrangeable, every layer a `dyn Protocol`) or
//! as a compiled [`Stack`](crate::compiled::Stack) (the fast path, for the
//! shapes a caller has a compiled type for: `auto` takes it when the shape
//! fits). Which shapes have a compiled form is the caller's to say
//! (`xtp_proto::stack`).
//!
//! Names are kinds from a [`Catalogue`] given by the caller (this crate knows
//! no protocol but its toys; `xtp_proto` brings XTP's). Each kind says which
//! services it needs below and which it offers above, so the checks are
//! generic:
//!
//! * an unknown name,
//! * an edge whose lower layer does not offer what the upper one needs
//!   ("cannot sit above"), including anything above a kind that offers
//!   nothing (the application) or below a root (a device),
//! * a layer that needs a lower layer and has none,
//! * a layer with two lower layers (every protocol here has one),
//! * a cycle,
//!
//! each reported with the line and the edge (or name) at fault.

use std::collections::HashMap;
use std::fmt;

/// What a layer offers to the layer above it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Service {
    /// Datagrams to and from peers named by socket address (a device: UDP,
    /// raw IP, a simulated link; see [`crate::device`]). The contract for a
    /// protocol offering it (a `census`): each frame starts with the device
    /// header (`crate::device::ADDR_HEADER`, the peer's address), which it
    /// keeps; it lets the one layer above open a session on it
    /// (`Graph::carry_frames`), takes that layer's frames by `push` and
    /// hands frames from below up with `deliver`.
    Datagram,
    /// Typed frames on one link (`LoopLink`).
    Frames,
    /// Messages demultiplexed by port (`Mux`).
    Ports,
    /// Transport sessions (XTP contexts).
    Sessions,
}

impl fmt::Display for Service {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Service::Datagram => "datagrams by socket address",
            Service::Frames => "typed link frames",
            Service::Ports => "port-demultiplexed messages",
            Service::Sessions => "transport sessions",
        })
    }
}

/// One kind of layer a description may name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Kind {
    /// The name used in descriptions.
    pub name: &'static str,
    /// Services it can sit on; empty: a root (nothing below it).
    pub needs: &'static [Service],
    /// What it offers above; `None`: nothing may sit on it (the application).
    pub offers: Option<Service>,
    /// A device (the driver below the graph), not a protocol object.
    pub device: bool,
    /// Opening it needs root (raw sockets).
    pub needs_root: bool,
    /// One line for error messages and `--help`.
    pub about: &'static str,
}

/// The kinds a description may use.
#[derive(Clone, Debug, Default)]
pub struct Catalogue {
    kinds: Vec<Kind>,
}

impl Catalogue {
    /// A catalogue of `kinds`.
    pub fn new(kinds: impl IntoIterator<Item = Kind>) -> Self {
        Catalogue { kinds: kinds.into_iter().collect() }
    }

    /// The kinds of `xk-core`'s own protocols: the application `app`, and
    /// the toy stack `echo` / `mux` / `loop` (`Echo`, `Mux`, `LoopLink`),
    /// as registered in [`crate::protocols::toys`].
    pub fn toys() -> Self {
        crate::protocols::toys::<xk_msg::Contig>().catalogue()
    }

    /// Adds kinds (a later kind of the same name replaces the earlier).
    pub fn with(mut self, kinds: impl IntoIterator<Item = Kind>) -> Self {
        for k in kinds {
            self.kinds.retain(|x| x.name != k.name);
            self.kinds.push(k);
        }
        self
    }

    /// The kind called `name`.
    pub fn get(&self, name: &str) -> Option<&Kind> {
        self.kinds.iter().find(|k| k.name == name)
    }

    /// Every name, in catalogue order.
    pub fn names(&self) -> Vec<&'static str> {
        self.kinds.iter().map(|k| k.name).collect()
    }
}

/// `, did you mean `x`?` for a known name one typo away from `name` (one
/// letter changed, added or dropped, or two neighbours swapped: `xpt`);
/// empty otherwise.
fn did_you_mean(name: &str, known: &[&str]) -> String {
    let near = |k: &str| {
        let (a, b): (Vec<char>, Vec<char>) = (name.chars().collect(), k.chars().collect());
        let (short, long) = if a.len() <= b.len() { (&a, &b) } else { (&b, &a) };
        match long.len() - short.len() {
            0 => {
                let diff: Vec<usize> = (0..a.len()).filter(|&i| a[i] != b[i]).collect();
                match diff[..] {
                    [_] => true,
                    [i, j] => j == i + 1 && a[i] == b[j] && a[j] == b[i],
                    _ => false,
                }
            }
            1 => (0..long.len()).any(|i| long[..i] == short[..i] && long[i + 1..] == short[i..]),
            _ => false,
        }
    };
    known.iter().find(|k| near(k)).map_or(String::new(), |k| format!(", did you mean `{k}`?"))
}

/// The application: the top of every graph, offering nothing.
pub const APP: Kind = Kind {
    name: "app",
    needs: &[Service::Sessions, Service::Ports],
    offers: None,
    device: false,
    needs_root: false,
    about: "the application",
};

/// Why a description was refused: the line (1-based; 0 when the whole
/// description is at fault) and what is wrong, naming the edge or layer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DescError {
    /// Line of the description.
    pub line: usize,
    /// What is wrong.
    pub reason: String,
}

impl fmt::Display for DescError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "graph description: {}", self.reason)
        } else {
            write!(f, "graph description, line {}: {}", self.line, self.reason)
        }
    }
}

impl std::error::Error for DescError {}

/// How a description asks to be composed (its `compose` line).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Compose {
    /// The compiled stack when the shape has one, else the graph.
    #[default]
    Auto,
    /// Always the run-time graph.
    Dynamic,
    /// The compiled stack; a shape without one is an error.
    Compiled,
}

/// A checked description.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GraphDesc {
    /// Layers in bottom-up order (every layer after the one below it).
    pub layers: Vec<Layer>,
    /// How it asks to be composed.
    pub compose: Compose,
}

/// One layer of a checked description.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layer {
    /// Its kind.
    pub kind: Kind,
    /// Index (in [`GraphDesc::layers`]) of the layer below, if any.
    pub below: Option<usize>,
    /// The line that first names it (for errors about the whole layer).
    pub line: usize,
}

impl GraphDesc {
    /// Parses and checks `text` against `catalogue`.
    pub fn parse(text: &str, catalogue: &Catalogue) -> Result<GraphDesc, DescError> {
        // name -> (kind, lower name, line of the edge that set it)
        let mut nodes: Vec<(Kind, usize)> = Vec::new(); // (kind, first line)
        let mut index: HashMap<&'static str, usize> = HashMap::new();
        let mut lower: Vec<Option<(usize, usize)>> = Vec::new(); // (lower node, line)
        let mut compose: Option<(Compose, usize)> = None;
        for (i, raw) in text.lines().enumerate() {
            let line = i + 1;
            let body = raw.split('#').next().unwrap_or("").trim();
            if body.is_empty() {
                continue;
            }
            if let Some(how) = body.strip_prefix("compose").filter(|r| !r.contains("->")) {
                let how = match how.trim() {
                    "auto" => Compose::Auto,
                    "dynamic" => Compose::Dynamic,
                    "compiled" => Compose::Compiled,
                    other => {
                        return Err(DescError {
                            line,
                            reason: format!("`compose {other}`: say `auto`, `dynamic` or `compiled`"),
                        });
                    }
                };
                if let Some((_, at)) = compose {
                    return Err(DescError {
                        line,
                        reason: format!("a second `compose` line (the first: line {at})"),
                    });
                }
                compose = Some((how, line));
                continue;
            }
            let mut prev: Option<usize> = None;
            for name in body.split("->").map(str::trim) {
                if name.is_empty() {
                    return Err(DescError {
                        line,
                        reason: format!("`{body}`: a layer name is missing around `->`"),
                    });
                }
                let kind = catalogue.get(name).copied().ok_or_else(|| DescError {
                    line,
                    reason: format!(
                        "unknown protocol `{name}`{} (known: {})",
                        did_you_mean(name, &catalogue.names()),
                        catalogue.names().join(", ")
                    ),
                })?;
                let node = *index.entry(kind.name).or_insert_with(|| {
                    nodes.push((kind, line));
                    lower.push(None);
                    nodes.len() - 1
                });
                if let Some(up) = prev {
                    let (upk, lowk) = (nodes[up].0, nodes[node].0);
                    let edge = format!("`{} -> {}`", upk.name, lowk.name);
                    let fits = lowk.offers.is_some_and(|s| upk.needs.contains(&s));
                    if !fits {
                        let reason = match (upk.needs.is_empty(), lowk.offers) {
                            (true, _) => {
                                format!("edge {edge}: `{}` is a root, nothing sits below it", upk.name)
                            }
                            (_, None) => format!("edge {edge}: nothing can sit above `{}`", lowk.name),
                            (_, Some(s)) => format!(
                                "edge {edge}: `{}` cannot sit above `{}` (it needs {}; `{}` offers {s})",
                                upk.name,
                                lowk.name,
                                list(upk.needs),
                                lowk.name
                            ),
                        };
                        return Err(DescError { line, reason });
                    }
                    match lower[up] {
                        Some((l, _)) if l == node => {}
                        Some((l, at)) => {
                            return Err(DescError {
                                line,
                                reason: format!(
                                    "edge {edge}: `{}` already sits on `{}` (line {at}); a layer has one lower layer",
                                    upk.name, nodes[l].0.name
                                ),
                            });
                        }
                        None => {
                            // A name is one node: `census -> census` is
                            // one layer on itself, not two layers.
                            if up == node {
                                return Err(DescError {
                                    line,
                                    reason: format!(
                                        "edge {edge}: a name stands for one layer, so `{}` cannot sit on \
                                         itself (a graph holds one layer of each kind)",
                                        upk.name
                                    ),
                                });
                            }
                            // A cycle: walking down from the new lower layer
                            // reaches the upper one.
                            let mut at = Some(node);
                            while let Some(n) = at {
                                if n == up {
                                    return Err(DescError {
                                        line,
                                        reason: format!(
                                            "edge {edge} closes a cycle (a name stands for one layer: \
                                             a graph holds one layer of each kind)"
                                        ),
                                    });
                                }
                                at = lower[n].map(|(l, _)| l);
                            }
                            lower[up] = Some((node, line));
                        }
                    }
                }
                prev = Some(node);
            }
        }
        if nodes.is_empty() {
            return Err(DescError { line: 0, reason: "no layers (write e.g. `app -> xtp -> udp`)".into() });
        }
        for (n, (k, line)) in nodes.iter().enumerate() {
            if !k.needs.is_empty() && lower[n].is_none() {
                return Err(DescError {
                    line: *line,
                    reason: format!("`{}` has no lower layer: it needs {} below it", k.name, list(k.needs)),
                });
            }
        }
        // Bottom-up order: depth from the root, stable within a depth.
        let depth = |mut n: usize| {
            let mut d = 0;
            while let Some((l, _)) = lower[n] {
                n = l;
                d += 1;
            }
            d
        };
        let mut order: Vec<usize> = (0..nodes.len()).collect();
        order.sort_by_key(|&n| depth(n));
        let pos: HashMap<usize, usize> = order.iter().enumerate().map(|(p, &n)| (n, p)).collect();
        let layers = order
            .iter()
            .map(|&n| Layer { kind: nodes[n].0, below: lower[n].map(|(l, _)| pos[&l]), line: nodes[n].1 })
            .collect();
        Ok(GraphDesc { layers, compose: compose.map_or(Compose::Auto, |c| c.0) })
    }

    /// The layer of kind `name`.
    pub fn find(&self, name: &str) -> Option<usize> {
        self.layers.iter().position(|l| l.kind.name == name)
    }

    /// The layers from `top` down to the root, by name.
    pub fn path_down(&self, top: usize) -> Vec<&'static str> {
        let mut out = Vec::new();
        let mut at = Some(top);
        while let Some(n) = at {
            out.push(self.layers[n].kind.name);
            at = self.layers[n].below;
        }
        out
    }
}

/// A graph built from a description: the graph and, for each layer of the
/// description, its protocol id (`None` for the application and devices).
pub struct Built<M> {
    /// The running graph.
    pub graph: crate::Graph<M>,
    /// `ids[i]`: the protocol of `desc.layers[i]`.
    pub ids: Vec<Option<crate::ProtocolId>>,
}

impl GraphDesc {
    /// Builds the graph: `make` gives the protocol object of each layer that
    /// is neither the application nor a device, bottom first (an `Err` names
    /// what it could not make, e.g. a bad parameter).
    pub fn build<M: xk_msg::Msg>(
        &self,
        mut make: impl FnMut(&Kind) -> Result<Box<dyn crate::Protocol<M>>, String>,
    ) -> Result<Built<M>, DescError> {
        let mut b = crate::GraphBuilder::<M>::new();
        let mut ids = Vec::with_capacity(self.layers.len());
        for l in &self.layers {
            if l.kind.device || l.kind.name == APP.name {
                ids.push(None);
                continue;
            }
            let p = make(&l.kind)
                .map_err(|e| DescError { line: l.line, reason: format!("`{}`: {e}", l.kind.name) })?;
            let below: Vec<_> = l.below.and_then(|i| ids[i]).into_iter().collect();
            ids.push(Some(b.add_boxed(p, &below)));
        }
        let mut graph = b.build().map_err(|(p, e)| DescError {
            line: 0,
            reason: format!("protocol {} refused to start: {e}", p.index()),
        })?;
        // A protocol on a protocol that offers datagrams (a `census` under
        // XTP) sends its frames through it, not to the device.
        for (l, layer) in self.layers.iter().enumerate() {
            let Some(i) = layer.below else { continue };
            if let (Some(up), Some(low), Some(Service::Datagram)) =
                (ids[l], ids[i], self.layers[i].kind.offers)
            {
                graph.carry_frames(up, low).map_err(|e| DescError {
                    line: layer.line,
                    reason: format!("edge `{} -> {}`: {e}", layer.kind.name, self.layers[i].kind.name),
                })?;
            }
        }
        Ok(Built { graph, ids })
    }
}

fn list(s: &[Service]) -> String {
    s.iter().map(ToString::to_string).collect::<Vec<_>>().join(" or ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cat() -> Catalogue {
        Catalogue::toys().with([
            Kind {
                name: "xtp",
                needs: &[Service::Datagram],
                offers: Some(Service::Sessions),
                device: false,
                needs_root: false,
                about: "",
            },
            Kind {
                name: "udp",
                needs: &[],
                offers: Some(Service::Datagram),
                device: true,
                needs_root: false,
                about: "",
            },
        ])
    }

    fn err(text: &str) -> DescError {
        GraphDesc::parse(text, &cat()).unwrap_err()
    }

    #[test]
    fn a_stack_parses_bottom_up() {
        let d = GraphDesc::parse("# XTP\n\napp -> xtp -> udp  # sockets\n", &cat()).unwrap();
        let names: Vec<_> = d.layers.iter().map(|l| l.kind.name).collect();
        assert_eq!(names, ["udp", "xtp", "app"]);
        assert_eq!(d.layers[1].below, Some(0));
        assert_eq!(d.path_down(d.find("app").unwrap()), ["app", "xtp", "udp"]);
        // Chains may share layers; the same edge twice is fine.
        let d = GraphDesc::parse("echo -> mux\nmux -> loop\necho -> mux", &cat()).unwrap();
        assert_eq!(d.path_down(d.find("echo").unwrap()), ["echo", "mux", "loop"]);
    }

    #[test]
    fn errors_name_the_line_and_the_edge() {
        let e = err("app -> xtp\n\napp -> xtpp -> udp");
        assert_eq!(e.line, 3);
        assert!(e.reason.contains("unknown protocol `xtpp`") && e.reason.contains("udp"), "{e}");
        let e = err("app -> mux -> udp");
        assert!(e.reason.contains("edge `mux -> udp`: `mux` cannot sit above `udp`"), "{e}");
        assert!(e.reason.contains("typed link frames"), "{e}");
        let e = err("xtp -> app");
        assert!(e.reason.contains("edge `xtp -> app`: nothing can sit above `app`"), "{e}");
        let e = err("udp -> xtp");
        assert!(e.reason.contains("`udp` is a root"), "{e}");
        let e = err("app -> xtp");
        assert_eq!(e.line, 1);
        assert!(e.reason.contains("`xtp` has no lower layer"), "{e}");
        let e = err("app -> xtp -> udp\napp -> mux -> loop");
        assert_eq!(e.line, 2);
        assert!(e.reason.contains("edge `app -> mux`: `app` already sits on `xtp` (line 1)"), "{e}");
        let e = err("app -> -> udp");
        assert!(e.reason.contains("missing"), "{e}");
        assert_eq!(err("# nothing\n").line, 0);
        assert!(err("").to_string().starts_with("graph description: no layers"));
    }

    #[test]
    fn cycles_are_refused_naming_the_closing_edge() {
        // A catalogue where a cycle type-checks: two kinds offering what the
        // other needs.
        const A: Kind = Kind {
            name: "a",
            needs: &[Service::Ports],
            offers: Some(Service::Frames),
            device: false,
            needs_root: false,
            about: "",
        };
        const B: Kind = Kind {
            name: "b",
            needs: &[Service::Frames],
            offers: Some(Service::Ports),
            device: false,
            needs_root: false,
            about: "",
        };
        let c = Catalogue::new([A, B]);
        let e = GraphDesc::parse("a -> b\nb -> a", &c).unwrap_err();
        assert_eq!(e.line, 2);
        assert!(e.reason.contains("edge `b -> a` closes a cycle"), "{e}");
        let e = GraphDesc::parse("a -> b -> a", &c).unwrap_err();
        assert!(e.reason.contains("closes a cycle"), "{e}");
    }
}
