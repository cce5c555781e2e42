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

/// Removes Telnet commands from a control line in place (RFC 959: the
/// control connection speaks Telnet). Clients put IAC IP and IAC DM (Synch)
/// before ABOR; IAC WILL/WONT/DO/DONT take an option byte; IAC IAC is a
/// data byte 255.
pub fn strip_telnet(line: &mut Vec<u8>) {
    const IAC: u8 = 255;
    let mut out = Vec::with_capacity(line.len());
    let mut i = 0;
    while i < line.len() {
        match (line[i], line.get(i + 1)) {
            (IAC, Some(&IAC)) => {
                out.push(IAC);
                i += 2;
            }
            (IAC, Some(251..=254)) => i += 3,
            (IAC, Some(_)) => i += 2,
            (IAC, None) => i += 1,
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    *line = out;
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

/// The path of a LIST or NLST argument: clients put `ls` options first
/// (`LIST -la`, `LIST -a sub`), as vsftpd and pyftpdlib accept; a name
/// that starts with `-` cannot be listed, as with them.
pub fn list_target(arg: &str) -> &str {
    let mut rest = arg.trim_start();
    while rest.starts_with('-') {
        rest = rest.split_once(' ').map_or("", |(_, r)| r).trim_start();
    }
    rest
}

/// A reply: `code text` on one line, or the multi-line form for several.
///
/// The text may hold anything a client sent (a path): a CR inside a line
/// goes out as CR NUL (RFC 2640 §3.1), so every reply line ends at its one
/// CR LF and no client can be made to see a line the server did not send.
pub fn reply(code: u16, text: &str) -> String {
    let text = text.replace('\r', "\r\0");
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

/// Bytes of reply text a client keeps (a server could send continuation
/// lines for ever).
pub const MAX_REPLY_TEXT: usize = 1 << 20;

/// Reads a reply line by line (RFC 959 §4.2): `ddd text`, or `ddd-text`,
/// any lines, and `ddd text` with the same code. Untrusted input: a line
/// that fits no form is an error, never a panic.
#[derive(Debug, Default)]
pub struct ReplyParser {
    code: Option<u16>,
    text: Vec<String>,
    bytes: usize,
}

impl ReplyParser {
    /// Takes one line (CR LF optional); the whole reply, code and text
    /// (lines joined by `\n`), once its last line has come.
    pub fn feed(&mut self, line: &str) -> Result<Option<(u16, String)>, String> {
        let l = line.trim_end_matches(['\r', '\n']);
        let code = l.get(..3).filter(|c| c.bytes().all(|b| b.is_ascii_digit())).and_then(|c| c.parse().ok());
        let sep = l.as_bytes().get(3).copied();
        self.bytes += l.len();
        if self.bytes > MAX_REPLY_TEXT {
            return Err(format!("a reply longer than {MAX_REPLY_TEXT} bytes"));
        }
        match (self.code, code, sep) {
            (None, Some(c @ 100..=599), Some(b' ') | None) => Ok(Some((c, l.get(4..).unwrap_or("").into()))),
            (None, Some(c @ 100..=599), Some(b'-')) => {
                self.code = Some(c);
                self.text.push(l[4..].to_string());
                Ok(None)
            }
            (None, ..) => Err(format!("not an FTP reply: {l:?}")),
            // The end line repeats the first line's code.
            (Some(first), Some(c), Some(b' ') | None) if c == first => {
                self.text.push(l.get(4..).unwrap_or("").to_string());
                self.code = None;
                self.bytes = 0;
                Ok(Some((c, std::mem::take(&mut self.text).join("\n"))))
            }
            (Some(_), ..) => {
                self.text.push(l.trim_start().to_string());
                Ok(None)
            }
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

    /// One MLSD/MLST line with the chosen facts (RFC 3659 §7).
    pub fn mlsd_line(&self, facts: Facts) -> String {
        let mut s = String::new();
        if facts.0[0] {
            s += if self.dir { "type=dir;" } else { "type=file;" };
        }
        if facts.0[1] {
            s += &format!("size={};", self.size);
        }
        if facts.0[2] {
            s += &format!("modify={};", mdtm(self.mtime));
        }
        if facts.0[3] {
            s += if self.dir { "perm=el;" } else { "perm=r;" };
        }
        format!("{s} {}\r\n", self.name)
    }
}

/// Which of the facts `type`, `size`, `modify`, `perm` MLSD and MLST give:
/// all at first, then what the client chose with `OPTS MLST` (RFC 3659
/// §7.9; Python's ftplib sends it before every MLSD and fails on a refusal).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Facts(pub [bool; 4]);

impl Facts {
    const NAMES: [&str; 4] = ["type", "size", "modify", "perm"];
    /// Every fact we know.
    pub const ALL: Facts = Facts([true; 4]);

    /// `OPTS MLST`'s argument: facts separated by `;`, case-insensitive;
    /// unknown ones are ignored and an empty list selects none (§7.9).
    pub fn parse(arg: &str) -> Facts {
        let mut f = [false; 4];
        for want in arg.split(';').map(str::trim) {
            if let Some(i) = Self::NAMES.iter().position(|n| n.eq_ignore_ascii_case(want)) {
                f[i] = true;
            }
        }
        Facts(f)
    }

    /// The chosen facts as `OPTS MLST`'s reply names them (`type;size;`).
    pub fn chosen(self) -> String {
        Self::NAMES.iter().zip(self.0).filter(|(_, on)| *on).map(|(n, _)| format!("{n};")).collect()
    }

    /// FEAT's `MLST` line: every fact, the chosen ones starred.
    pub fn feat(self) -> String {
        let facts: String = Self::NAMES
            .iter()
            .zip(self.0)
            .map(|(n, on)| format!("{n}{};", if on { "*" } else { "" }))
            .collect();
        format!("MLST {facts}")
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
        let mut abor = b"\xff\xf4\xff\xf2ABOR\r\n".to_vec();
        strip_telnet(&mut abor);
        assert_eq!(abor, b"ABOR\r\n");
        let mut odd = b"\xff\xfb\x01A\xff\xffB\xff".to_vec();
        strip_telnet(&mut odd);
        assert_eq!(odd, b"A\xffB");
        assert_eq!(reply(200, "ok"), "200 ok\r\n");
        // A CR from a client's path cannot end a reply line early.
        assert_eq!(reply(257, "\"/a\rb\" created"), "257 \"/a\r\0b\" created\r\n");
        assert_eq!(list_target("-la"), "");
        assert_eq!(list_target("-a -l sub dir"), "sub dir");
        assert_eq!(list_target("sub"), "sub");
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

    #[test]
    fn mlst_facts_follow_opts() {
        let e = Entry { name: "a b".into(), dir: false, size: 7, mtime: 0 };
        assert_eq!(e.mlsd_line(Facts::ALL), "type=file;size=7;modify=19700101000000;perm=r; a b\r\n");
        let f = Facts::parse("Type;SIZE;unknown;");
        assert_eq!(f.chosen(), "type;size;");
        assert_eq!(e.mlsd_line(f), "type=file;size=7; a b\r\n");
        assert_eq!(f.feat(), "MLST type*;size*;modify;perm;");
        assert_eq!(e.mlsd_line(Facts::parse("")), " a b\r\n");
    }
}
