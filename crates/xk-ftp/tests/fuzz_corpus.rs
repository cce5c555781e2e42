//! Replays the cargo-fuzz corpora of the FTP targets
//! (`fuzz/corpus/ftp_command`, `fuzz/corpus/ftp_reply`) through the same
//! checks as the fuzz targets, on stable Rust in every CI run.

fn replay(target: &str, check: fn(&[u8]), at_least: usize) {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus").join(target);
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        let data = std::fs::read(&path).unwrap();
        if let Err(p) = std::panic::catch_unwind(|| check(&data)) {
            std::panic::resume_unwind(Box::new(format!("{}: {p:?}", path.display())));
        }
        n += 1;
    }
    assert!(n >= at_least, "{target}: the corpus has only {n} inputs");
    eprintln!("{target}: replayed {n} corpus inputs");
}

#[test]
fn command_corpus_replays_cleanly() {
    replay("ftp_command", xk_ftp::fuzzing::check_command_bytes, 10);
}

#[test]
fn reply_corpus_replays_cleanly() {
    replay("ftp_reply", xk_ftp::fuzzing::check_reply_bytes, 10);
}
