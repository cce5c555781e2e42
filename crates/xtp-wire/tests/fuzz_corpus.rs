//! Replays the cargo-fuzz corpus (`fuzz/corpus/packet_parser`) through the same
//! checks as the fuzz target, on stable Rust and in every CI run.

#[test]
fn fuzz_corpus_replays_cleanly() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/packet_parser");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        let data = std::fs::read(&path).unwrap();
        xtp_wire::fuzzing::check_packet_bytes(&data);
        n += 1;
    }
    assert!(n >= 9, "corpus has only {n} inputs");
    eprintln!("replayed {n} corpus inputs");
}
