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

/// The fuzz target forges hostile traffic specs (a FIRST's, TCNTL's or
/// JCNTL's `maxdata`: 0, 1, 72, 73, u32::MAX, ... — G28): some of a fixed
/// set of generated inputs reach that forge (signature bit 24), and every
/// input still holds every invariant.
#[test]
fn generated_inputs_forge_hostile_maxdata_and_hold() {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut forged = 0;
    for _ in 0..400 {
        let input: Vec<u8> = (0..300).map(|_| next() as u8).collect();
        match xtp_proto::fuzzing::run(&input) {
            Ok(st) => forged += usize::from(st.signature & 1 << 24 != 0),
            Err(f) => panic!("input {input:?}: {f}"),
        }
    }
    assert!(forged > 0, "no generated input forged a traffic spec's maxdata");
}
