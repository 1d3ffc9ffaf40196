//! Writing files that other processes read: atomically, and, in a folder several users share,
//! with permissions that let them read it.
//!
//! A file is written to a temporary file in its own folder and renamed over its name, so a reader
//! (a build of the same output, a tool watching the output folder, another user of a shared
//! cache) sees the old contents or the new, never a truncated mix, and a link planted at the name
//! is replaced rather than written through.
//!
//! The temporary file is created private (mode 0o600), which suits a secret but not a cache that
//! a team shares. Such a folder's owner decides who may read it by the folder's own permissions
//! (`chgrp team cache && chmod 2775 cache`), while each user's umask is often stricter or looser
//! than that: so files written into a shared folder take their read bits from the folder, and
//! folders made inside it take the folder's permissions, whatever the writer's umask.

use std::io::Write;
use std::path::Path;

/// Who may read a file written by [`write_atomically`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Readers {
    /// As `std::fs::write` would make a new file: mode 0o666 less the umask.
    Umask,
    /// Exactly these permission bits (Unix mode), whatever the umask.
    Mode(u32),
}

/// Writes `contents` to `path` through a temporary file in the same folder, renamed into place.
pub fn write_atomically(path: &Path, contents: &[u8], readers: Readers) -> std::io::Result<()> {
    let folder = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        Some(_) | None => Path::new("."),
    };
    let mut builder = tempfile::Builder::new();
    builder.prefix(".tilec-").suffix(".tmp");
    set_creation_mode(&mut builder);
    let mut file = builder.tempfile_in(folder)?;
    file.write_all(contents)?;
    file.as_file().sync_all()?;
    if let Readers::Mode(mode) = readers {
        set_mode(file.path(), mode)?;
    }
    file.persist(path).map_err(|error| error.error)?;
    Ok(())
}

/// The mode of a file written into the shared folder `folder`: read and write for its owner, read
/// for the group and for others where the folder grants them read.
pub fn shared_file_mode(folder: &Path) -> Readers {
    match folder_mode(folder) {
        Some(mode) => Readers::Mode(0o600 | (mode & 0o044)),
        None => Readers::Umask,
    }
}

/// Creates `folder` (and missing parents) inside the shared folder `root`, giving each folder it
/// creates `root`'s permissions (setgid included, so the group carries on). A folder that exists
/// already is left as it is: another user may own it.
pub fn create_shared_folder(folder: &Path, root: &Path) -> std::io::Result<()> {
    if folder.is_dir() {
        return Ok(());
    }
    let missing: Vec<&Path> = folder.ancestors().take_while(|dir| !dir.exists()).collect();
    std::fs::create_dir_all(folder)?;
    if let Some(mode) = folder_mode(root) {
        for dir in missing {
            // A folder another build created at the same moment belongs to that user, who set it.
            let _ = set_mode(dir, mode & 0o7777);
        }
    }
    Ok(())
}

#[cfg(unix)]
fn set_creation_mode(builder: &mut tempfile::Builder<'_, '_>) {
    use std::os::unix::fs::PermissionsExt;
    builder.permissions(std::fs::Permissions::from_mode(0o666));
}

#[cfg(not(unix))]
fn set_creation_mode(_builder: &mut tempfile::Builder<'_, '_>) {}

#[cfg(unix)]
fn folder_mode(folder: &Path) -> Option<u32> {
    use std::os::unix::fs::PermissionsExt;
    let metadata = std::fs::metadata(folder).ok()?;
    Some(metadata.permissions().mode())
}

#[cfg(not(unix))]
fn folder_mode(_folder: &Path) -> Option<u32> {
    None
}

#[cfg(unix)]
fn set_mode(path: &Path, mode: u32) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
}

#[cfg(not(unix))]
fn set_mode(_path: &Path, _mode: u32) -> std::io::Result<()> {
    Ok(())
}

#[cfg(all(test, unix))]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn mode(path: &Path) -> u32 {
        std::fs::symlink_metadata(path)
            .expect("exists")
            .permissions()
            .mode()
            & 0o7777
    }

    #[test]
    fn a_write_replaces_a_planted_link_instead_of_writing_through_it() {
        let dir = tempfile::tempdir().expect("temp dir");
        let victim = dir.path().join("victim.txt");
        std::fs::write(&victim, "keep me").expect("writes");
        let target = dir.path().join("out.cu");
        std::os::unix::fs::symlink(&victim, &target).expect("links");
        write_atomically(&target, b"new", Readers::Umask).expect("writes");
        assert_eq!(std::fs::read_to_string(&victim).expect("reads"), "keep me");
        assert_eq!(std::fs::read_to_string(&target).expect("reads"), "new");
        assert!(
            !std::fs::symlink_metadata(&target)
                .expect("exists")
                .is_symlink()
        );
    }

    #[test]
    fn files_and_folders_in_a_shared_folder_take_its_permissions() {
        let dir = tempfile::tempdir().expect("temp dir");
        let root = dir.path().join("cache");
        std::fs::create_dir(&root).expect("creates");
        std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o2770)).expect("chmod");
        let shard = root.join("ab");
        create_shared_folder(&shard, &root).expect("creates the shard");
        assert_eq!(mode(&shard), 0o2770);
        let entry = shard.join("abcd");
        write_atomically(&entry, b"payload", shared_file_mode(&root)).expect("writes");
        assert_eq!(mode(&entry), 0o640);
    }
}
