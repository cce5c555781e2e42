//! Feeds arbitrary bytes, as lines from a server, to the FTP client's reply
//! parser and the EPSV/PASV address parsers. See
//! `xk_ftp::fuzzing::check_reply_bytes`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    xk_ftp::fuzzing::check_reply_bytes(data);
});
