//! Replays the committed fuzz corpus (`fuzz/corpus/endpoint`, written by
//! `xpress fuzz --save-corpus`) through the stateful fuzz
//! target: every input must still hold every invariant.

#[test]
fn corpus_replays_clean() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/endpoint");
    let mut entries: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(Result::ok)
        .map(|e| e.path())
        .collect();
    entries.sort();
    assert!(entries.len() >= 8, "the corpus has inputs: {}", entries.len());
    for path in entries {
        let input = std::fs::read(&path).unwrap();
        if let Err(f) = xtp_proto::fuzzing::run(&input) {
            panic!("{}: {f}", path.display());
        }
    }
}
