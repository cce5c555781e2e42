//! "A new protocol = one module implementing the interface + one line in
//! the graph" (issue #16), checked on the sources: outside its own file,
//! the `tap` layer is named by exactly two lines of code in the framework,
//! the drivers and the applications — its `mod` line and its registry
//! line. Nothing else (the graph, the description parser, the compositions,
//! `xpress`) special-cases it: its counters reach `xpress` through the
//! uniform `Control::GetTraffic`, its placement through the generic service
//! checks.

use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Whether `line` names `word` as an identifier (not inside a longer one).
fn names(line: &str, word: &str) -> bool {
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    line.match_indices(word).any(|(i, _)| {
        !line[..i].chars().next_back().is_some_and(ident)
            && !line[i + word.len()..].chars().next().is_some_and(ident)
    })
}

#[test]
fn the_tap_is_one_file_plus_its_mod_line_plus_its_registry_line() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = Vec::new();
    for c in ["xk-core", "xk-msg", "xtp-proto", "xtp-testkit", "xk-driver", "xk-apps", "xpress", "xk-sim"] {
        rust_files(&crates.join(c).join("src"), &mut files);
    }
    let own = crates.join("xk-core/src/protocols/tap.rs");
    assert!(files.iter().any(|f| f == &own), "the tap's file is where the registry line says");
    let mut hits = Vec::new();
    // The direct engine's driver has a packet-capture hook of its own
    // called a tap (`Driver::set_tap`), unrelated to the graph's layer.
    let capture = crates.join("xk-driver/src/driver.rs");
    for f in files.iter().filter(|f| **f != own && **f != capture) {
        let text = std::fs::read_to_string(f).unwrap();
        // Code only: up to the unit tests, without comments.
        let code = text.split("#[cfg(test)]").next().unwrap_or("");
        for line in code.lines() {
            let l = line.split("//").next().unwrap_or("").trim();
            if names(l, "tap") || names(l, "Tap") {
                let rel = f.strip_prefix(&crates).unwrap_or(f).display().to_string();
                hits.push(format!("{rel}: {l}"));
            }
        }
    }
    hits.sort();
    assert_eq!(
        hits,
        [
            "xk-core/src/protocols/mod.rs: pub mod tap;",
            "xtp-proto/src/stack.rs: .protocol(xk_core::protocols::tap::KIND, xk_core::protocols::tap::make)",
        ],
        "code outside the tap's file that names it"
    );
}
