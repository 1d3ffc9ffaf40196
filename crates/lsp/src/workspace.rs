//! The files beside a document that decide how it is analysed: the tilec.toml that applies to a
//! file and the instances it lists for it. Shared by the language server and the CLI.

use std::path::{Path, PathBuf};

use tilec_frontend::ManifestInstance;
use tilec_frontend::manifest::{Manifest, parse_manifest};

/// The tilec.toml that applies to `file`, searched up to the workspace root (see
/// [`manifest_within`]) with the current folder as the only root a command names.
pub fn manifest_for(file: &Path) -> Option<PathBuf> {
    manifest_within(file, &[])
}

/// The tilec.toml that applies to `file`: the nearest one in its folder or an ancestor, up to the
/// workspace root. That is the repository root (the nearest folder with `.git`) or, outside a
/// repository, the highest folder among `roots` and the current folder that holds the file (the
/// file's own folder when none does). A tilec.toml further up belongs to someone else (a shared
/// `/tmp`, a home folder) and must not change how the project is analysed.
pub fn manifest_within(file: &Path, roots: &[PathBuf]) -> Option<PathBuf> {
    let absolute = std::path::absolute(file).ok()?;
    let folder = absolute.parent()?;
    let limit = search_limit(folder, roots);
    folder
        .ancestors()
        .take_while(|dir| dir.starts_with(&limit))
        .map(|dir| dir.join("tilec.toml"))
        .find(|candidate| candidate.is_file())
}

/// The highest folder a tilec.toml search from `folder` may reach (see [`manifest_within`]).
fn search_limit(folder: &Path, roots: &[PathBuf]) -> PathBuf {
    if let Some(repository) = folder.ancestors().find(|dir| dir.join(".git").exists()) {
        return repository.to_owned();
    }
    let current = std::env::current_dir().ok();
    roots
        .iter()
        .filter_map(|root| std::path::absolute(root).ok())
        // A file a command names roots the search at its folder.
        .map(|root| {
            if root.is_file() {
                root.parent().map_or(root.clone(), Path::to_owned)
            } else {
                root
            }
        })
        .chain(current)
        .filter(|root| folder.starts_with(root))
        .min_by_key(|root| root.components().count())
        .unwrap_or_else(|| folder.to_owned())
}

/// The tilec.toml instances listed for `file`, read afresh (a manifest that cannot be read or
/// parsed lists none; `tilec check` reports why).
pub fn manifest_instances(file: &Path) -> Vec<ManifestInstance> {
    manifest_instances_within(file, &[])
}

/// [`manifest_instances`] with the tilec.toml searched up to the workspace root of `roots` (see
/// [`manifest_within`]).
pub fn manifest_instances_within(file: &Path, roots: &[PathBuf]) -> Vec<ManifestInstance> {
    let Some(manifest_path) = manifest_within(file, roots) else {
        return Vec::new();
    };
    let manifest = std::fs::read_to_string(&manifest_path)
        .ok()
        .and_then(|text| parse_manifest(&text).ok());
    instances_for(manifest.as_ref(), &manifest_path, file)
}

/// The `[[instance]]` entries of a manifest whose `file` is `file`.
pub fn instances_for(
    manifest: Option<&Manifest>,
    manifest_path: &Path,
    file: &Path,
) -> Vec<ManifestInstance> {
    let Some(manifest) = manifest else {
        return Vec::new();
    };
    let folder = manifest_path.parent().unwrap_or(Path::new("."));
    let file = std::path::absolute(file).unwrap_or_else(|_| file.to_owned());
    manifest
        .instances
        .iter()
        .filter(|entry| {
            std::path::absolute(folder.join(&entry.file)).is_ok_and(|listed| listed == file)
        })
        .map(|entry| entry.instance.clone())
        .collect()
}

/// The folder a file's imports are resolved within: the nearest folder at or above the file's
/// with `pyproject.toml`, `setup.py`, `.git` or `tilec.toml`; the file's own folder when none has.
pub fn workspace_root(file: &Path) -> PathBuf {
    let absolute = std::path::absolute(file).unwrap_or_else(|_| file.to_owned());
    let folder = absolute.parent().unwrap_or(Path::new("/"));
    folder
        .ancestors()
        .find(|dir| {
            ["pyproject.toml", "setup.py", ".git", "tilec.toml"]
                .iter()
                .any(|marker| dir.join(marker).exists())
        })
        .unwrap_or(folder)
        .to_path_buf()
}

/// The most files that following imports loads for one command or editor session: a package
/// that imports more is still analysed, with the rest of its imports opaque.
pub const MAX_IMPORTED_FILES: usize = 2000;

/// Loads the workspace files that `files` import, directly or through each other, from disk (a
/// candidate that `is_loaded` already is not read again), registers every file with the database
/// so that imports resolve, and returns the files it loaded. Only files inside each importer's
/// workspace root are read; third-party imports are never found there and stay opaque.
pub fn load_imported_files(
    db: &mut tilec_db::RootDatabase,
    files: &[tilec_db::SourceFile],
    is_loaded: &dyn Fn(&Path) -> bool,
) -> Vec<tilec_db::SourceFile> {
    let mut loaded: Vec<tilec_db::SourceFile> = Vec::new();
    let mut queue: Vec<tilec_db::SourceFile> = files.to_vec();
    let mut seen: std::collections::HashSet<PathBuf> = std::collections::HashSet::new();
    while let Some(file) = queue.pop() {
        if loaded.len() >= MAX_IMPORTED_FILES {
            break;
        }
        let importer = file.path(db).clone();
        let root = workspace_root(&importer);
        let names = tilec_frontend::imported_names(tilec_db::parse(db, file));
        for written in names {
            // The `__init__.py` files that make a folder a package are loaded too (below), so
            // that the database, which sees only loaded files, resolves as this loader does.
            let packages = std::cell::RefCell::new(Vec::new());
            let is_package = |folder: &Path| {
                let init = folder.join("__init__.py");
                let package = seen.contains(&init) || is_loaded(&init) || init.is_file();
                let inside = std::path::absolute(&init).is_ok_and(|init| init.starts_with(&root));
                if package && inside {
                    packages.borrow_mut().push(init);
                }
                package
            };
            let found = tilec_db::import_candidates(&importer, &written, &is_package)
                .into_iter()
                .filter(|path| {
                    std::path::absolute(path).is_ok_and(|absolute| absolute.starts_with(&root))
                })
                .find(|path| seen.contains(path) || is_loaded(path) || path.is_file());
            let packages = packages.into_inner();
            for path in found.into_iter().chain(packages) {
                if !seen.insert(path.clone()) || is_loaded(&path) {
                    continue;
                }
                let Ok(text) = std::fs::read_to_string(&path) else {
                    continue;
                };
                let module = tilec_db::SourceFile::new(db, path, text, Vec::new());
                loaded.push(module);
                queue.push(module);
            }
        }
    }
    let all: Vec<tilec_db::SourceFile> = files.iter().chain(&loaded).copied().collect();
    tilec_db::register_files(db, &all);
    loaded
}
