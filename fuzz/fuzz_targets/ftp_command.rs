//! Feeds arbitrary bytes to the FTP server's command path: Telnet
//! stripping, the command parser and every parser an argument reaches;
//! replies that echo the argument must read back whole. See
//! `xk_ftp::fuzzing::check_command_bytes`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    xk_ftp::fuzzing::check_command_bytes(data);
});
