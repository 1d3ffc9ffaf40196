//! The files beside a document that decide how it is analysed: the tilec.toml that applies to a
//! file and the instances it lists for it. Shared by the language server and the CLI.

use std::path::{Path, PathBuf};

use tilec_frontend::ManifestInstance;
use tilec_frontend::manifest::{Manifest, parse_manifest};

/// The tilec.toml that applies to `file`: the nearest one in its folder or an ancestor, up to the
/// repository root (a folder with `.git`).
pub fn manifest_for(file: &Path) -> Option<PathBuf> {
    let absolute = std::path::absolute(file).ok()?;
    let mut folder = absolute.parent();
    while let Some(dir) = folder {
        let candidate = dir.join("tilec.toml");
        if candidate.is_file() {
            return Some(candidate);
        }
        if dir.join(".git").exists() {
            return None;
        }
        folder = dir.parent();
    }
    None
}

/// The tilec.toml instances listed for `file`, read afresh (a manifest that cannot be read or
/// parsed lists none; `tilec check` reports why).
pub fn manifest_instances(file: &Path) -> Vec<ManifestInstance> {
    let Some(manifest_path) = manifest_for(file) else {
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
