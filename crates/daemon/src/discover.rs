//! Finding the `.py` files under the paths a command names, so that every real file is visited
//! once, whatever symbolic links lead to it, and nothing but regular files is ever opened.
//!
//! A folder tree may hold symbolic links to folders, and those may form loops (`kernels/up -> ..`).
//! Following links by path alone visits a looping tree until the kernel refuses to resolve the path
//! (40 links deep on Linux), and two loops in one folder double the paths at every level, which
//! never finishes. So every folder and file is identified by its device and inode: a folder already
//! walked is not walked again, and a file already found is not listed again. Links are followed
//! only after the real folders under the roots have been walked, so a file that is reachable both
//! directly and through a link keeps its direct path.
//!
//! A FIFO, socket or device named `*.py` is not source code, and opening a FIFO for reading blocks
//! until some other process writes to it: the file type is checked (through `stat`, which does not
//! open anything) before any file is read, and only regular files are listed.

use std::collections::{HashSet, VecDeque};
use std::fs::Metadata;
use std::path::{Path, PathBuf};

use anyhow::{Result, bail};

/// Folders that never hold a project's kernels, skipped by name with hidden folders.
const SKIPPED_FOLDERS: [&str; 4] = ["target", "node_modules", "__pycache__", "venv"];

/// What identifies a file or folder whatever path reaches it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct FileId {
    device: u64,
    inode: u64,
}

#[cfg(unix)]
fn id_of(_path: &Path, metadata: &Metadata) -> Option<FileId> {
    use std::os::unix::fs::MetadataExt;
    Some(FileId {
        device: metadata.dev(),
        inode: metadata.ino(),
    })
}

/// Without inode numbers, a canonical path stands in for one (hashed, to keep one key type).
#[cfg(not(unix))]
fn id_of(path: &Path, _metadata: &Metadata) -> Option<FileId> {
    use std::hash::{Hash, Hasher};
    let canonical = std::fs::canonicalize(path).ok()?;
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    canonical.hash(&mut hasher);
    Some(FileId {
        device: 0,
        inode: hasher.finish(),
    })
}

/// Whether `path` is a regular file (after following links): the only kind of file tilec reads.
/// Checked without opening it, since opening a FIFO blocks.
pub(crate) fn is_regular_file(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|metadata| metadata.is_file())
}

/// The identity of the file or folder at `path` (after following links), if it exists.
pub(crate) fn file_id(path: &Path) -> Option<FileId> {
    let metadata = std::fs::metadata(path).ok()?;
    id_of(path, &metadata)
}

/// The walk over the roots: what was visited, what was found, and the links still to follow.
#[derive(Default)]
struct Walk {
    folders: HashSet<FileId>,
    files: HashSet<FileId>,
    found: Vec<PathBuf>,
    links: VecDeque<PathBuf>,
}

/// Every `.py` file under `paths` (files as given, folders recursively, sorted), each real file
/// once, skipping hidden folders, virtual environments and anything that is not a regular file.
/// With no paths, the current folder. A path that does not exist, or names neither a regular file
/// nor a folder, is an error; a folder that cannot be read inside the tree is skipped.
pub(crate) fn collect_python_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let defaults = [PathBuf::from(".")];
    let paths = if paths.is_empty() {
        &defaults[..]
    } else {
        paths
    };
    let mut walk = Walk::default();
    for path in paths {
        walk.root(path)?;
    }
    // Links to folders are followed last, so that a direct path to a file wins over one through a
    // link; each followed folder may hold further links, which join the queue.
    while let Some(link) = walk.links.pop_front() {
        walk.folder(&link);
    }
    walk.found.sort();
    Ok(walk.found)
}

impl Walk {
    fn root(&mut self, path: &Path) -> Result<()> {
        let metadata = match std::fs::metadata(path) {
            Ok(metadata) => metadata,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                bail!("{}: no such file or folder", path.display())
            }
            Err(error) => bail!("{}: {error}", path.display()),
        };
        if metadata.is_dir() {
            if let Err(error) = std::fs::read_dir(path) {
                bail!("cannot read folder {}: {error}", path.display());
            }
            self.folder(path);
        } else if metadata.is_file() {
            self.file(path, &metadata);
        } else {
            bail!(
                "{}: not a regular file or folder (a FIFO, socket or device is never read)",
                path.display()
            );
        }
        Ok(())
    }

    /// Walks `folder` unless it was walked already (through another path or a loop).
    fn folder(&mut self, folder: &Path) {
        let Ok(metadata) = std::fs::metadata(folder) else {
            return;
        };
        let Some(id) = id_of(folder, &metadata) else {
            return;
        };
        if !self.folders.insert(id) {
            return;
        }
        let Ok(entries) = std::fs::read_dir(folder) else {
            return;
        };
        let mut entries: Vec<_> = entries.flatten().collect();
        entries.sort_by_key(std::fs::DirEntry::file_name);
        for entry in entries {
            self.entry(&entry);
        }
    }

    fn entry(&mut self, entry: &std::fs::DirEntry) {
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        // The entry's own type, without following a link; a dangling link has no target to stat.
        let Ok(own_type) = entry.file_type() else {
            return;
        };
        let Ok(metadata) = std::fs::metadata(&path) else {
            return;
        };
        if metadata.is_dir() {
            let skipped = name.starts_with('.') || SKIPPED_FOLDERS.contains(&name.as_ref());
            if skipped {
                return;
            }
            if own_type.is_symlink() {
                self.links.push_back(path);
            } else {
                self.folder(&path);
            }
        } else if metadata.is_file() && name.ends_with(".py") {
            self.file(&path, &metadata);
        }
    }

    fn file(&mut self, path: &Path, metadata: &Metadata) {
        let fresh = id_of(path, metadata).is_none_or(|id| self.files.insert(id));
        if fresh {
            self.found.push(path.to_owned());
        }
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[test]
    fn a_file_reached_directly_and_through_a_link_keeps_its_direct_path() {
        let dir = tempfile::tempdir().expect("temp dir");
        let kernels = dir.path().join("kernels");
        std::fs::create_dir(&kernels).expect("creates kernels");
        std::fs::write(kernels.join("k.py"), "import tilelang\n").expect("writes");
        // `aaa` sorts before `kernels`: were links followed in name order, it would win.
        std::os::unix::fs::symlink("kernels", dir.path().join("aaa")).expect("links");
        let found = collect_python_files(&[dir.path().to_owned()]).expect("walks");
        assert_eq!(found, [kernels.join("k.py")]);
    }
}
