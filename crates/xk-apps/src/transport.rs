//! The transports the tools measure: XTP and the peers it is compared with.

use serde::Serialize;

/// The transport a tool measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Transport {
    /// XTP over UDP or raw IP (this project).
    Xtp,
    /// Raw UDP datagrams (ping only): the floor.
    Udp,
    /// Kernel TCP.
    Tcp,
    /// QUIC (quinn), bulk only.
    Quic,
}

impl Transport {
    /// Every transport, by name, as the command line spells them.
    pub const NAMES: [&'static str; 4] = ["xtp", "udp", "tcp", "quic"];

    /// The name, as in JSON results and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Transport::Xtp => "xtp",
            Transport::Udp => "udp",
            Transport::Tcp => "tcp",
            Transport::Quic => "quic",
        }
    }
}

impl std::str::FromStr for Transport {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "xtp" => Ok(Transport::Xtp),
            "udp" => Ok(Transport::Udp),
            "tcp" => Ok(Transport::Tcp),
            "quic" => Ok(Transport::Quic),
            _ => Err(format!("--transport {s}: use xtp, udp, tcp or quic")),
        }
    }
}

/// Why `--via` cannot carry kernel TCP: the relay forwards UDP datagrams.
pub const TCP_VIA_REFUSAL: &str = "--via with --transport tcp: the emulator relays UDP datagrams only; \
     run kernel TCP under an emulated link with `xpress netns` (root)";
