//! Paths as the client sees them, confined to the server's root.
//!
//! A session's working directory is a virtual absolute path (`/`, `/a/b`).
//! A client's path argument is resolved against it and normalised component
//! by component; `..` above the root, NUL, and any component that is not
//! plain text are refused, never clamped silently. The result is checked
//! again on disk: the real path, symlinks resolved, must still lie under the
//! canonical root (a symlink inside the root that points outside is
//! refused).

use std::path::{Component, Path, PathBuf};

/// Why a path was refused (the reply text says it).
#[derive(Debug, PartialEq, Eq)]
pub struct Refused(pub String);

/// `arg` resolved against the virtual directory `cwd`: a virtual absolute
/// path, normalised (`/` separated, no `.` or `..`).
pub fn resolve(cwd: &str, arg: &str) -> Result<String, Refused> {
    if arg.contains('\0') {
        return Err(Refused("path contains NUL".into()));
    }
    let mut parts: Vec<&str> = if arg.starts_with('/') { Vec::new() } else { split(cwd) };
    for c in arg.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                if parts.pop().is_none() {
                    return Err(Refused(format!("{arg}: outside the root")));
                }
            }
            c => parts.push(c),
        }
    }
    Ok(format!("/{}", parts.join("/")))
}

fn split(v: &str) -> Vec<&str> {
    v.split('/').filter(|c| !c.is_empty()).collect()
}

/// The real path of the virtual path `v` under `root` (`root` canonical).
/// The deepest existing ancestor is canonicalised (symlinks resolved) and
/// must lie under `root`; so must the path itself if it exists.
pub fn real(root: &Path, v: &str) -> Result<PathBuf, Refused> {
    let mut p = root.to_path_buf();
    for c in split(v) {
        let comp = Path::new(c).components().next();
        if !matches!(comp, Some(Component::Normal(_))) || Path::new(c).components().count() != 1 {
            return Err(Refused(format!("{c:?}: not a plain name")));
        }
        p.push(c);
    }
    // Check the longest prefix that exists, symlinks resolved.
    let mut probe = p.clone();
    loop {
        match probe.canonicalize() {
            Ok(c) => {
                if !c.starts_with(root) {
                    return Err(Refused(format!("{v}: outside the root")));
                }
                break;
            }
            Err(_) => {
                if !probe.pop() {
                    return Err(Refused(format!("{v}: no such path")));
                }
            }
        }
    }
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolution_normalises_and_refuses_escapes() {
        assert_eq!(resolve("/", "a/b/../c").unwrap(), "/a/c");
        assert_eq!(resolve("/a/b", "..").unwrap(), "/a");
        assert_eq!(resolve("/a/b", "/x/./y//z").unwrap(), "/x/y/z");
        assert_eq!(resolve("/a", "").unwrap(), "/a");
        assert!(resolve("/", "..").is_err());
        assert!(resolve("/a", "../../etc/passwd").is_err());
        assert!(resolve("/", "/../etc").is_err());
        assert!(resolve("/", "a\0b").is_err());
    }

    #[test]
    fn real_paths_stay_under_the_root_even_through_symlinks() {
        let base = std::env::temp_dir().join(format!("xk-ftp-vpath-{}", std::process::id()));
        let root = base.join("root");
        std::fs::create_dir_all(root.join("d")).unwrap();
        std::fs::write(base.join("secret"), "x").unwrap();
        std::os::unix::fs::symlink(base.join("secret"), root.join("link")).unwrap();
        std::os::unix::fs::symlink(&base, root.join("up")).unwrap();
        let root = root.canonicalize().unwrap();
        assert_eq!(real(&root, "/d").unwrap(), root.join("d"));
        assert_eq!(real(&root, "/d/new-file").unwrap(), root.join("d/new-file"), "a new file in the root");
        assert!(real(&root, "/link").is_err(), "a symlink to a file outside");
        assert!(real(&root, "/up/secret").is_err(), "a symlink to a directory outside");
        assert!(real(&root, "/up/new").is_err(), "a new file through a symlink outside");
        let _ = std::fs::remove_dir_all(&base);
    }
}
