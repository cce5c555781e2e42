//! The wire forms: commands, replies, the address forms of PASV/EPSV and
//! PORT/EPRT, and directory listings (LIST in `ls -l` form, MLSD facts).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{SystemTime, UNIX_EPOCH};

/// Longest command line accepted (RFC 959 sets no limit; vsftpd: 4 KiB).
pub const MAX_LINE: usize = 4096;

/// A command: its verb (upper case) and argument (may be empty).
#[derive(Debug, PartialEq, Eq)]
pub struct Command {
    /// The verb, upper-cased.
    pub verb: String,
    /// The rest of the line after one space.
    pub arg: String,
}

/// Parses one command line (without CRLF). None for an empty line.
pub fn parse_command(line: &str) -> Option<Command> {
    let line = line.trim_end_matches(['\r', '\n']);
    if line.trim().is_empty() {
        return None;
    }
    let (verb, arg) = line.split_once(' ').unwrap_or((line, ""));
    Some(Command { verb: verb.trim().to_ascii_uppercase(), arg: arg.to_string() })
}

/// A reply: `code text` on one line, or the multi-line form for several.
pub fn reply(code: u16, text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    match lines.as_slice() {
        [] => format!("{code} \r\n"),
        [one] => format!("{code} {one}\r\n"),
        [first, middle @ .., last] => {
            let mut s = format!("{code}-{first}\r\n");
            for m in middle {
                // A continuation line must not look like an end line.
                s += &format!(" {m}\r\n");
            }
            s + &format!("{code} {last}\r\n")
        }
    }
}

/// `227 Entering Passive Mode (h1,h2,h3,h4,p1,p2)`'s address part.
pub fn pasv_text(addr: SocketAddr) -> Option<String> {
    let IpAddr::V4(ip) = addr.ip() else { return None };
    let o = ip.octets();
    Some(format!("{},{},{},{},{},{}", o[0], o[1], o[2], o[3], addr.port() >> 8, addr.port() & 0xff))
}

/// Parses six comma-separated numbers (PORT's argument, PASV's reply).
pub fn parse_hostport(s: &str) -> Option<SocketAddr> {
    let inner = s.trim().trim_start_matches('(').trim_end_matches(|c: char| !c.is_ascii_digit());
    let n: Vec<u8> = inner.split(',').map(|x| x.trim().parse().ok()).collect::<Option<_>>()?;
    let [a, b, c, d, p1, p2] = n.as_slice() else { return None };
    Some(SocketAddr::new(Ipv4Addr::new(*a, *b, *c, *d).into(), u16::from(*p1) << 8 | u16::from(*p2)))
}

/// Parses EPRT's `|proto|addr|port|`.
pub fn parse_eprt(s: &str) -> Option<SocketAddr> {
    let s = s.trim();
    let d = s.chars().next()?;
    let parts: Vec<&str> = s.split(d).collect();
    let [_, proto, addr, port, _] = parts.as_slice() else { return None };
    let ip: IpAddr = addr.parse().ok()?;
    match (*proto, ip) {
        ("1", IpAddr::V4(_)) | ("2", IpAddr::V6(_)) => Some(SocketAddr::new(ip, port.parse().ok()?)),
        _ => None,
    }
}

/// The port in EPSV's reply `229 Entering Extended Passive Mode (|||port|)`.
pub fn parse_epsv(reply: &str) -> Option<u16> {
    let open = reply.find('(')?;
    let inner = &reply[open + 1..reply[open..].find(')')? + open];
    let d = inner.chars().next()?;
    inner.split(d).nth(3)?.parse().ok()
}

/// A file's facts for listings.
pub struct Entry {
    /// Its name.
    pub name: String,
    /// A directory?
    pub dir: bool,
    /// Bytes.
    pub size: u64,
    /// Modified, seconds since 1970.
    pub mtime: u64,
}

impl Entry {
    /// Facts of `path` named `name`.
    pub fn of(name: String, meta: &std::fs::Metadata) -> Entry {
        let mtime =
            meta.modified().ok().and_then(|t| t.duration_since(UNIX_EPOCH).ok()).map_or(0, |d| d.as_secs());
        Entry { name, dir: meta.is_dir(), size: meta.len(), mtime }
    }

    /// One `ls -l` line (what LIST gives and clients parse).
    pub fn list_line(&self) -> String {
        let (y, mo, d, h, mi, _) = civil(self.mtime);
        let now_y = civil(SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())).0;
        const MONTHS: [&str; 12] =
            ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
        let when = if y == now_y {
            format!("{} {d:>2} {h:02}:{mi:02}", MONTHS[mo as usize - 1])
        } else {
            format!("{} {d:>2}  {y}", MONTHS[mo as usize - 1])
        };
        let mode = if self.dir { "drwxr-xr-x" } else { "-rw-r--r--" };
        format!("{mode} 1 ftp ftp {:>12} {when} {}\r\n", self.size, self.name)
    }

    /// One MLSD/MLST line (RFC 3659 facts).
    pub fn mlsd_line(&self) -> String {
        let kind = if self.dir { "dir" } else { "file" };
        format!(
            "type={kind};size={};modify={};perm={}; {}\r\n",
            self.size,
            mdtm(self.mtime),
            if self.dir { "el" } else { "r" },
            self.name
        )
    }
}

/// `YYYYMMDDHHMMSS` (MDTM, MLSD `modify`).
pub fn mdtm(secs: u64) -> String {
    let (y, mo, d, h, mi, s) = civil(secs);
    format!("{y:04}{mo:02}{d:02}{h:02}{mi:02}{s:02}")
}

/// UTC civil time of a Unix time (H. Hinnant's days-from-civil inverse).
fn civil(secs: u64) -> (i64, u32, u32, u64, u64, u64) {
    let (days, rem) = ((secs / 86_400) as i64, secs % 86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d, rem / 3600, rem % 3600 / 60, rem % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_and_replies() {
        assert_eq!(
            parse_command("retr a b.txt\r\n"),
            Some(Command { verb: "RETR".into(), arg: "a b.txt".into() })
        );
        assert_eq!(parse_command("NOOP"), Some(Command { verb: "NOOP".into(), arg: String::new() }));
        assert_eq!(parse_command("  \r\n"), None);
        assert_eq!(reply(200, "ok"), "200 ok\r\n");
        assert_eq!(reply(211, "Features:\nEPSV\nEnd"), "211-Features:\r\n EPSV\r\n211 End\r\n");
    }

    #[test]
    fn address_forms() {
        let a: SocketAddr = "127.0.0.1:50000".parse().unwrap();
        assert_eq!(pasv_text(a).unwrap(), "127,0,0,1,195,80");
        assert_eq!(parse_hostport("(127,0,0,1,195,80)."), Some(a));
        assert_eq!(parse_hostport("127,0,0,1,195"), None);
        assert_eq!(parse_eprt("|1|127.0.0.1|50000|"), Some(a));
        assert_eq!(parse_eprt("|2|::1|21|"), Some("[::1]:21".parse().unwrap()));
        assert_eq!(parse_eprt("|2|127.0.0.1|21|"), None, "family and address disagree");
        assert_eq!(parse_epsv("229 Entering Extended Passive Mode (|||50000|)"), Some(50000));
        assert_eq!(mdtm(0), "19700101000000");
        assert_eq!(mdtm(1_700_000_000), "20231114221320");
    }
}
