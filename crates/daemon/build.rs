//! Fingerprints the source code tilec is built from, for the build cache's instance entries.
//!
//! An instance entry (`cache.rs`) records what lowering a kernel instance gave, keyed by the
//! inputs of that lowering, so that a later build skips the lowering. The lowering itself is one
//! of those inputs: two builds of tilec with the same version number but different code must not
//! share such entries. The fingerprint is the SHA-256 of every file under the workspace crates'
//! `src` folders and of `Cargo.lock`, each named by its path relative to the workspace, so that
//! two machines building the same sources (a CI fleet) get the same fingerprint wherever the
//! checkout lies, and any change to the compiler's code gives another.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let workspace = manifest.join("../..");
    let mut files = Vec::new();
    let crates = workspace.join("crates");
    if let Ok(entries) = std::fs::read_dir(&crates) {
        for entry in entries.flatten() {
            let src = entry.path().join("src");
            if src.is_dir() {
                println!("cargo:rerun-if-changed={}", src.display());
                collect_files(&src, &mut files);
            }
        }
    }
    let lock = workspace.join("Cargo.lock");
    if lock.is_file() {
        println!("cargo:rerun-if-changed={}", lock.display());
        files.push(lock);
    }
    files.sort();
    let mut hasher = Sha256::new();
    for file in &files {
        let name = file.strip_prefix(&workspace).unwrap_or(file);
        let name = name.to_string_lossy().replace('\\', "/");
        let contents = std::fs::read(file).unwrap_or_default();
        hasher.update((name.len() as u64).to_le_bytes());
        hasher.update(name.as_bytes());
        hasher.update((contents.len() as u64).to_le_bytes());
        hasher.update(&contents);
    }
    let digest: String = hasher
        .finalize()
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect();
    // A packaged crate without the workspace around it still builds; its version alone keys it.
    let fingerprint = if files.is_empty() {
        "no sources"
    } else {
        &digest[..16]
    };
    println!("cargo:rustc-env=TILEC_SOURCE_FINGERPRINT={fingerprint}");
}

/// Every file below `folder`, recursively.
fn collect_files(folder: &Path, files: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(folder) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect_files(&path, files);
        } else {
            files.push(path);
        }
    }
}
