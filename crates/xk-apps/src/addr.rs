//! Addresses as users type them: `host`, `host:port`, `10.0.0.1`,
//! `[::1]:3636`, `::1` — host names resolved, the port defaulting to
//! [`DEFAULT_PORT`] (as `iperf3 -c host` defaults to 5201).

use std::net::{IpAddr, SocketAddr, ToSocketAddrs};

pub use xk_driver::driver::DEFAULT_PORT;

/// Resolves `s` for the flag `flag` (named in the error, with the value).
/// Of several addresses for one name the first IPv4 one is taken, then the
/// first IPv6 one: `localhost` then reaches `xpress serve`'s default
/// `127.0.0.1`.
pub fn resolve(flag: &str, s: &str) -> Result<SocketAddr, String> {
    parse(s).map_err(|reason| {
        if s.trim().is_empty() { format!("{flag}: {reason}") } else { format!("{flag} {s}: {reason}") }
    })
}

/// [`resolve`] with an error that gives the reason only (for a command-line
/// parser that names the flag and the value itself).
pub fn parse(s: &str) -> Result<SocketAddr, String> {
    let s = s.trim();
    if s.is_empty() {
        return Err(format!("empty address (give HOST[:PORT], e.g. 127.0.0.1:{DEFAULT_PORT})"));
    }
    if let Ok(a) = s.parse::<SocketAddr>() {
        return Ok(a);
    }
    let bare = s.strip_prefix('[').and_then(|r| r.strip_suffix(']')).unwrap_or(s);
    if let Ok(ip) = bare.parse::<IpAddr>() {
        return Ok(SocketAddr::new(ip, DEFAULT_PORT));
    }
    // `host:port`, or a host alone; a port that is not a number is an error
    // about the port, not a failed name lookup.
    let (host, port) = match s.rsplit_once(':') {
        Some((h, p)) => {
            let port = p.parse::<u16>().map_err(|_| format!("port {p:?} is not a number from 0 to 65535"))?;
            (h, port)
        }
        None => (s, DEFAULT_PORT),
    };
    if host.contains(':') {
        return Err("write an IPv6 address with a port as [ADDR]:PORT".into());
    }
    let all: Vec<SocketAddr> = (host, port)
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve host name {host:?}: {e}"))?
        .collect();
    all.iter()
        .find(|a| a.is_ipv4())
        .or(all.first())
        .copied()
        .ok_or_else(|| format!("host name {host:?} has no address"))
}

/// The unspecified address of `to`'s family, port 0: what a client binds
/// so it can reach `to` (an IPv4 socket cannot send to an IPv6 address).
pub fn any_for(to: SocketAddr) -> SocketAddr {
    match to {
        SocketAddr::V4(_) => SocketAddr::from(([0, 0, 0, 0], 0)),
        SocketAddr::V6(_) => SocketAddr::from(([0u16; 8], 0)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_names_default_port_and_ipv6() {
        assert_eq!(resolve("--to", "127.0.0.1:9").unwrap(), "127.0.0.1:9".parse().unwrap());
        assert_eq!(resolve("--to", "127.0.0.1").unwrap(), SocketAddr::from(([127, 0, 0, 1], DEFAULT_PORT)));
        assert_eq!(resolve("--to", "::1").unwrap(), format!("[::1]:{DEFAULT_PORT}").parse().unwrap());
        assert_eq!(resolve("--to", "[::1]").unwrap(), format!("[::1]:{DEFAULT_PORT}").parse().unwrap());
        assert_eq!(resolve("--to", "[::1]:7").unwrap(), "[::1]:7".parse().unwrap());
        let l = resolve("--to", "localhost:4000").unwrap();
        assert!(l.ip().is_loopback() && l.port() == 4000, "{l}");
        assert_eq!(resolve("--to", "localhost").unwrap().port(), DEFAULT_PORT);
        let e = resolve("--to", "localhost:http").unwrap_err();
        assert!(e.starts_with("--to localhost:http: port"), "{e}");
        let e = resolve("--to", "no-such-host.invalid").unwrap_err();
        assert!(e.contains("--to") && e.contains("cannot resolve"), "{e}");
        assert!(resolve("--via", "").unwrap_err().starts_with("--via: empty"));
    }
}
