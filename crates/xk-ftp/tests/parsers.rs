//! Property tests of the wire forms: malformed command lines never panic
//! the parser nor stop a live server from answering, every reply our server
//! can build is well-formed and reads back whole, and no sequence of lines
//! from a server panics our client's reply parser.

mod common;

use proptest::prelude::*;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use xk_ftp::net::Net;
use xk_ftp::proto::{ReplyParser, parse_command, reply};

/// Lines a hostile or careless client might send: known verbs with odd
/// arguments, and arbitrary text.
fn command_line() -> impl Strategy<Value = String> {
    let verb = prop::sample::select(vec![
        "USER", "PASS", "CWD", "CDUP", "PWD", "MKD", "RMD", "DELE", "RNFR", "RNTO", "SIZE", "MDTM", "REST",
        "TYPE", "MODE", "STRU", "OPTS", "FEAT", "PORT", "EPRT", "LIST", "NLST", "MLST", "STAT", "HELP",
        "ALLO", "retr", "xyzzy", "",
    ]);
    prop_oneof![
        (verb, "[ -~\u{80}-\u{10ffff}\r]{0,40}").prop_map(|(v, a)| format!("{v} {a}")),
        "[\\PC\r\t ]{0,80}",
    ]
}

proptest! {
    #[test]
    fn command_parser_takes_anything(line in "\\PC{0,200}|[\\x00-\\x7f]{0,200}") {
        if let Some(c) = parse_command(&line) {
            prop_assert!(!c.verb.contains(' '));
            prop_assert_eq!(c.verb.clone(), c.verb.to_ascii_uppercase());
        }
    }

    #[test]
    fn replies_are_well_formed_and_read_back(code in 100u16..600, text in "[\\PC\r\n]{0,120}") {
        let r = reply(code, &text);
        prop_assert!(r.ends_with("\r\n"));
        let lines: Vec<&str> = r[..r.len() - 2].split("\r\n").collect();
        for l in &lines {
            prop_assert!(!l.contains('\n'), "a bare LF in {:?}", r);
            prop_assert!(l.match_indices('\r').all(|(i, _)| l[i + 1..].starts_with('\0')), "a bare CR in {:?}", r);
        }
        let (first, last) = (lines[0], lines[lines.len() - 1]);
        prop_assert!(last.starts_with(&format!("{code} ")), "{:?}", r);
        if lines.len() > 1 {
            prop_assert!(first.starts_with(&format!("{code}-")), "{:?}", r);
            prop_assert!(lines[1..lines.len() - 1].iter().all(|l| l.starts_with(' ')), "{:?}", r);
        }
        let mut p = ReplyParser::default();
        for (i, l) in lines.iter().enumerate() {
            let got = p.feed(&format!("{l}\r\n")).unwrap();
            prop_assert_eq!(got.is_some(), i == lines.len() - 1, "{:?}", r);
            if let Some((c, _)) = got {
                prop_assert_eq!(c, code);
            }
        }
    }

    #[test]
    fn reply_parser_takes_anything(lines in prop::collection::vec("[0-9]{0,4}[ -]?\\PC{0,20}|\\PC{0,30}", 0..20)) {
        let mut p = ReplyParser::default();
        for l in &lines {
            match p.feed(l) {
                Ok(Some((c, _))) => prop_assert!((100..600).contains(&c)),
                Ok(None) => {}
                Err(_) => p = ReplyParser::default(),
            }
        }
    }
}

proptest! {
    // Each case runs a server: few cases, each a batch of lines.
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]
    #[test]
    fn a_live_server_answers_every_line(lines in prop::collection::vec(command_line(), 1..12)) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let root = common::tempdir("props");
            let (addr, _stop) = common::start(Net::Tcp, &root, |c| c.login_delay = std::time::Duration::ZERO).await;
            let s = tokio::net::TcpStream::connect(addr).await.unwrap();
            let (r, mut w) = s.into_split();
            let mut r = BufReader::new(r);
            let read = async |r: &mut BufReader<tokio::net::tcp::OwnedReadHalf>| {
                let mut p = ReplyParser::default();
                let mut line = String::new();
                loop {
                    line.clear();
                    let n = tokio::time::timeout(std::time::Duration::from_secs(10), r.read_line(&mut line))
                        .await
                        .expect("a reply within 10 s")
                        .unwrap();
                    assert!(n > 0, "the server hung up");
                    if let Some(reply) = p.feed(&line).expect("a well-formed reply") {
                        return reply;
                    }
                }
            };
            assert_eq!(read(&mut r).await.0, 220);
            // Logged in, so the commands reach their handlers, not only
            // the "log in first" refusal.
            w.write_all(b"USER alice\r\nPASS secret\r\n").await.unwrap();
            read(&mut r).await;
            assert_eq!(read(&mut r).await.0, 230);
            for l in &lines {
                let l = l.replace('\n', " ");
                // An empty line gets no reply, QUIT ends the session, and
                // failed PASSes end it too (the login limit).
                if parse_command(&l).is_none_or(|c| c.verb == "QUIT" || c.verb == "PASS") {
                    continue;
                }
                w.write_all(format!("{l}\r\n").as_bytes()).await.unwrap();
                // A transfer after PORT/EPRT says 150 first, then 425.
                while read(&mut r).await.0 < 200 {}
            }
            w.write_all(b"NOOP\r\n").await.unwrap();
            assert_eq!(read(&mut r).await.0, 200, "alive after {lines:?}");
            let _ = std::fs::remove_dir_all(&root);
        });
    }
}
