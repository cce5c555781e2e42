//! Writes the digest's vectors V1–V7 to a pcap file (IPv4 protocol 36) so they
//! can be opened in Wireshark: `cargo run -p xtp-wire --example vectors_pcap -- out.pcap`.

use std::fs::File;
use std::io::BufWriter;
use std::net::Ipv4Addr;

use xtp_wire::pcap::PcapWriter;

const VECTORS: [&str; 7] = [
    "0000000000001234004000220000002ddf89000000000001000000000000000000100001c0000202c00002011b589c400018040100000578000f424000010000000f42400001000068656c6c6f",
    "800000000000123400000025000000289acf00000000000000000000000000000000000000000005000000000001000500000001000000000000000000abcdef0008040000000000",
    "8000000000abcdef004400200000000563180000000000020000000000000005776f726c64",
    "800000000000123400000023000000385b650000000000000000000000000000000000000000000a000000000001117000000002000000020000000000000014000000000000001e00000000000000280000000000000032",
    "8000000000abcdef0008002100000014b11c000000000000000000000000000a0000000000000000000000000001000000000000",
    "800000000000123400000028000000132074000000000000000000000000000000000001000000016e6f206c697374656e6572",
    "8000000000abcdef400100200000000b712e000000000000000000000000000a010203040506070878797a",
];

fn main() -> std::io::Result<()> {
    let path = std::env::args().nth(1).unwrap_or_else(|| "vectors.pcap".into());
    let mut w = PcapWriter::new(BufWriter::new(File::create(&path)?))?;
    for (i, v) in VECTORS.iter().enumerate() {
        let bytes: Vec<u8> =
            (0..v.len()).step_by(2).map(|j| u8::from_str_radix(&v[j..j + 2], 16).unwrap()).collect();
        println!("{}", xtp_wire::Pretty(&bytes));
        w.write_packet(
            i as u64 * 1_000_000,
            Ipv4Addr::new(192, 0, 2, 1),
            Ipv4Addr::new(192, 0, 2, 2),
            &bytes,
        )?;
    }
    w.into_inner()?;
    eprintln!("wrote {path}");
    Ok(())
}
