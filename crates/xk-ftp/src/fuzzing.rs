//! The checks of the FTP fuzz targets (`fuzz/fuzz_targets/ftp_command.rs`
//! and `ftp_reply.rs`), here so that `tests/fuzz_corpus.rs` replays the
//! committed corpora through the same code on stable Rust.
//!
//! Each function takes arbitrary bytes and panics only when an invariant
//! fails; a panic inside a parser is a failure too.

use crate::proto::{self, Facts, MAX_LINE, ReplyParser};
use crate::vpath;

/// A control line as the server takes it: Telnet commands stripped, UTF-8
/// required, then the verb and argument, and every parser a command's
/// argument reaches (paths, addresses, listing options, MLST facts). The
/// reply that would echo the argument must read back whole, with the same
/// code, through the client's parser.
pub fn check_command_bytes(data: &[u8]) {
    let mut line = data[..data.len().min(MAX_LINE + 1)].to_vec();
    proto::strip_telnet(&mut line);
    assert!(!line.contains(&255) || data.contains(&255), "strip_telnet made an IAC");
    let Ok(text) = std::str::from_utf8(&line) else { return };
    let Some(cmd) = proto::parse_command(text) else { return };
    assert!(!cmd.verb.contains(' ') && cmd.verb == cmd.verb.to_ascii_uppercase(), "verb {:?}", cmd.verb);
    let arg = cmd.arg.as_str();
    // Paths: a resolved path is absolute, normalised, never above the root.
    for cwd in ["/", "/a/b"] {
        if let Ok(v) = vpath::resolve(cwd, arg) {
            assert!(v.starts_with('/'), "{arg:?} resolved to {v:?}");
            assert!(!v.split('/').any(|c| c == ".." || c == "."), "{arg:?} resolved to {v:?}");
            assert!(!v.contains('\0'), "{arg:?} resolved to {v:?}");
        }
    }
    let target = proto::list_target(arg);
    assert!(arg.ends_with(target), "LIST target {target:?} is not a suffix of {arg:?}");
    if let Some(a) = proto::parse_hostport(arg) {
        // What PORT accepted, PASV's reply form gives back.
        assert_eq!(proto::parse_hostport(&proto::pasv_text(a).expect("IPv4")), Some(a));
    }
    let _ = proto::parse_eprt(arg);
    let facts = Facts::parse(arg);
    assert_eq!(Facts::parse(&facts.chosen()), facts, "OPTS MLST {arg:?}");
    // Replies echo arguments (paths): they must still be one reply.
    let code = 550;
    let r = proto::reply(code, arg);
    let mut p = ReplyParser::default();
    let mut got = None;
    for l in r.split_inclusive("\r\n") {
        assert!(got.is_none(), "reply of {arg:?} went on after its end: {r:?}");
        got = p.feed(l).unwrap_or_else(|e| panic!("our reply of {arg:?} did not parse: {e}: {r:?}"));
    }
    assert_eq!(got.map(|(c, _)| c), Some(code), "reply of {arg:?}: {r:?}");
}

/// Lines from a server, as the client reads them (split at LF, at most
/// [`MAX_LINE`] bytes each, lossily decoded): the reply parser must never
/// panic, a whole reply has a code in 100..=599 and bounded text, and the
/// address parsers of EPSV and PASV replies take any text.
pub fn check_reply_bytes(data: &[u8]) {
    let mut p = ReplyParser::default();
    for raw in data.split_inclusive(|&b| b == b'\n') {
        for chunk in raw.chunks(MAX_LINE) {
            let line = String::from_utf8_lossy(chunk);
            let _ = proto::parse_epsv(&line);
            let _ = proto::parse_hostport(line.split('(').nth(1).unwrap_or(&line));
            match p.feed(&line) {
                Ok(Some((code, text))) => {
                    assert!((100..=599).contains(&code), "code {code}");
                    assert!(text.len() <= proto::MAX_REPLY_TEXT + text.matches('\n').count(), "text length");
                }
                Ok(None) => {}
                // A malformed reply ends the client's session: start over
                // as a new connection would.
                Err(_) => p = ReplyParser::default(),
            }
        }
    }
}
