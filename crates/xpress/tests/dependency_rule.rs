//! The architecture's dependency rule, checked on the real dependency graph:
//! protocol and framework crates pull in no socket or async runtime crate, may
//! not read the wall clock (clippy `disallowed-methods`, configured at the
//! workspace root and not overridden), and do not switch that lint off.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// Crates allowed to do I/O and read the clock.
const IO_CRATES: &[&str] = &["xpress", "xk-driver", "xk-shm", "xk-lab", "xk-apps", "xk-ftp", "xk-loadgen"];

/// Crates that must never appear under a protocol or framework crate.
const FORBIDDEN: &[&str] =
    &["tokio", "mio", "async-std", "async-io", "smol", "polling", "socket2", "nix", "quinn-udp", "libc"];

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

fn metadata() -> Value {
    let out = Command::new(env!("CARGO"))
        .args(["metadata", "--format-version", "1"])
        .current_dir(workspace_root())
        .output()
        .expect("run cargo metadata");
    assert!(out.status.success(), "cargo metadata failed: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Names of every crate reachable from `id` through normal (non-dev, non-build)
/// dependencies.
fn normal_closure(
    id: &str,
    nodes: &HashMap<String, &Value>,
    names: &HashMap<String, String>,
) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut stack = vec![id.to_string()];
    let mut out = BTreeSet::new();
    while let Some(cur) = stack.pop() {
        if !seen.insert(cur.clone()) {
            continue;
        }
        for dep in nodes[&cur]["deps"].as_array().unwrap() {
            let normal = dep["dep_kinds"].as_array().unwrap().iter().any(|k| k["kind"].is_null());
            if normal {
                let pkg = dep["pkg"].as_str().unwrap().to_string();
                out.insert(names[&pkg].clone());
                stack.push(pkg);
            }
        }
    }
    out
}

#[test]
fn protocol_and_framework_crates_have_no_io_dependencies() {
    let meta = metadata();
    let names: HashMap<String, String> = meta["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["id"].as_str().unwrap().to_string(), p["name"].as_str().unwrap().to_string()))
        .collect();
    let nodes: HashMap<String, &Value> = meta["resolve"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| (n["id"].as_str().unwrap().to_string(), n))
        .collect();
    let members: Vec<String> = meta["workspace_members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m.as_str().unwrap().to_string())
        .collect();
    let mut checked = 0;
    for id in &members {
        let name = &names[id];
        if IO_CRATES.contains(&name.as_str()) {
            continue;
        }
        let deps = normal_closure(id, &nodes, &names);
        let bad: Vec<_> = deps.iter().filter(|d| FORBIDDEN.contains(&d.as_str())).collect();
        assert!(bad.is_empty(), "{name} depends on I/O crates {bad:?} (full closure: {deps:?})");
        checked += 1;
    }
    assert!(checked >= 3, "expected to check the framework crates, checked {checked}");
}

#[test]
fn wall_clock_is_a_clippy_error_outside_io_crates() {
    let root = workspace_root();
    let conf = std::fs::read_to_string(root.join("clippy.toml")).unwrap();
    for path in ["std::time::Instant::now", "std::time::SystemTime::now"] {
        assert!(conf.contains(path), "root clippy.toml must disallow {path}");
    }
    for entry in std::fs::read_dir(root.join("crates")).unwrap() {
        let dir = entry.unwrap().path();
        let name = dir.file_name().unwrap().to_str().unwrap().to_string();
        if IO_CRATES.contains(&name.as_str()) {
            continue;
        }
        assert!(
            !dir.join("clippy.toml").exists() && !dir.join(".clippy.toml").exists(),
            "{name} overrides the root clippy.toml"
        );
        let mut stack = vec![dir.clone()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    stack.push(p);
                } else if p.extension().is_some_and(|x| x == "rs") {
                    let src = std::fs::read_to_string(&p).unwrap();
                    // The one exemption: a benchmark times with the wall
                    // clock (it never runs inside the protocol), so a file
                    // under a crate's `benches/` may allow the lint, with
                    // its reason stated in the attribute.
                    let bench = p.strip_prefix(&dir).unwrap().starts_with("benches");
                    let allowed = bench
                        && src.lines().all(|l| {
                            !l.contains("disallowed_methods")
                                || l.trim_start().starts_with("//")
                                || l.contains("reason = ")
                        });
                    assert!(
                        allowed || !src.contains("disallowed_methods"),
                        "{} switches off the wall-clock lint{}",
                        p.display(),
                        if bench { " without a stated reason" } else { "" }
                    );
                }
            }
        }
    }
}
