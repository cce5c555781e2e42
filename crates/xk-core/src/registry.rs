//! The protocol registry: the kinds a graph description may name, each with
//! the constructor that builds it (the x-kernel's protocol table that
//! `graph.comp` is compiled against; Click's element classes).
//!
//! A protocol module exports its [`Kind`] (name, services needed below and
//! offered above) and a constructor, a [`Maker`]; one line
//! `.protocol(KIND, make)` registers it. From then on a description may put
//! it wherever the services match — the checks ([`GraphDesc::parse`]) and
//! the wiring ([`GraphDesc::build`]) are generic — and an error names the
//! bad line and edge, with the registry's names (and a did-you-mean) for an
//! unknown one. `E` is what constructors are given (the stack's
//! configuration: `xtp_proto::stack::Env`); a protocol without parameters
//! ignores it.

use xk_msg::Msg;

use crate::Protocol;
use crate::graph_desc::{APP, Built, Catalogue, DescError, GraphDesc, Kind};

/// Builds one protocol object from the environment `E` (an `Err` says what
/// was wrong, e.g. a bad parameter).
pub type Maker<M, E> = fn(&E) -> Result<Box<dyn Protocol<M>>, String>;

/// Registered kinds and their constructors. See the module documentation.
pub struct Registry<M, E> {
    /// `(kind, constructor)`; no constructor for the application and the
    /// devices (the driver, not protocol objects).
    entries: Vec<(Kind, Option<Maker<M, E>>)>,
}

impl<M: Msg, E> Default for Registry<M, E> {
    fn default() -> Self {
        Self::new()
    }
}

impl<M: Msg, E> Registry<M, E> {
    /// A registry holding the application `app` only.
    pub fn new() -> Self {
        Registry { entries: vec![(APP, None)] }
    }

    /// Registers a protocol (a later kind of the same name replaces the
    /// earlier).
    pub fn protocol(self, kind: Kind, make: Maker<M, E>) -> Self {
        assert!(!kind.device, "`{}` is a device: register it with `device`", kind.name);
        self.put(kind, Some(make))
    }

    /// Registers a device: a root a driver provides, nothing to construct.
    pub fn device(self, kind: Kind) -> Self {
        assert!(kind.device && kind.needs.is_empty(), "`{}` is not a device", kind.name);
        self.put(kind, None)
    }

    fn put(mut self, kind: Kind, make: Option<Maker<M, E>>) -> Self {
        self.entries.retain(|(k, _)| k.name != kind.name);
        self.entries.push((kind, make));
        self
    }

    /// The kinds, for parsing.
    pub fn catalogue(&self) -> Catalogue {
        Catalogue::new(self.entries.iter().map(|(k, _)| *k))
    }

    /// Parses and checks `text` against the registered kinds.
    pub fn parse(&self, text: &str) -> Result<GraphDesc, DescError> {
        GraphDesc::parse(text, &self.catalogue())
    }

    /// Builds `desc`, each protocol by its registered constructor given `env`.
    pub fn build(&self, desc: &GraphDesc, env: &E) -> Result<Built<M>, DescError> {
        desc.build(|k| match self.entries.iter().find(|(r, _)| r.name == k.name) {
            Some((_, Some(make))) => make(env),
            _ => Err("not a registered protocol (a device or the application has no object)".into()),
        })
    }
}

#[cfg(test)]
mod tests {
    use xk_msg::Rope;

    use super::*;
    use crate::graph_desc::Service;
    use crate::protocols::census;

    /// "One module + one line": a kind written here, in the test, with its
    /// constructor, registered by one `.protocol` line, is accepted by the
    /// parser where its services fit and built into the graph — nothing else
    /// in the framework names it.
    mod stamp {
        use super::*;
        pub(super) const KIND: Kind = Kind {
            name: "stamp",
            needs: &[Service::Datagram],
            offers: Some(Service::Datagram),
            device: false,
            needs_root: false,
            about: "a test's protocol",
        };
        pub(super) fn make<M: Msg>(_: &u8) -> Result<Box<dyn Protocol<M>>, String> {
            Ok(Box::new(census::Census::default()))
        }
    }

    const DEV: Kind = Kind {
        name: "dev",
        needs: &[],
        offers: Some(Service::Datagram),
        device: true,
        needs_root: false,
        about: "",
    };

    #[test]
    fn a_registered_kind_is_named_parsed_and_built_where_services_fit() {
        let base = || Registry::<Rope, u8>::new().device(DEV).protocol(census::KIND, census::make);
        let e = base().parse("stamp -> dev").unwrap_err();
        assert!(e.reason.contains("unknown protocol `stamp` (known: app, dev, census)"), "{e}");
        let reg = base().protocol(stamp::KIND, stamp::make);
        let d = reg.parse("# two meters\nstamp -> census -> dev").unwrap();
        let built = reg.build(&d, &0).unwrap();
        let names: Vec<_> = built.graph.protocols().map(|(_, n)| n).collect();
        assert_eq!(names, ["census", "census"], "both built, bottom first");
        // The device has no object; each protocol's id is its place in the graph.
        let ids: Vec<_> = built.graph.protocols().map(|(p, _)| Some(p)).collect();
        assert_eq!(built.ids, [None, ids[0], ids[1]]);
        let e = reg.parse("app -> stamp -> dev").unwrap_err();
        assert!(e.reason.contains("edge `app -> stamp`: `app` cannot sit above `stamp`"), "{e}");
        let e = reg.parse("stamp -> cennsus -> dev").unwrap_err();
        assert!(e.reason.contains("did you mean `census`?"), "{e}");
        assert_eq!(reg.catalogue().names(), ["app", "dev", "census", "stamp"]);
        // Registering a name again replaces the earlier kind (and moves it last).
        let again = reg.protocol(Kind { about: "again", ..census::KIND }, census::make);
        assert_eq!(again.catalogue().names(), ["app", "dev", "stamp", "census"]);
        assert!(again.parse("census -> dev").is_ok());
    }
}
