//! Feeds arbitrary bytes to every XTP parser and the pretty printer; parsed
//! packets must survive an emit → parse round trip. Built with `--cfg fuzzing`,
//! so checksums always verify and the fuzzer reaches the segment parsers.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    xtp_wire::fuzzing::check_packet_bytes(data);
});
