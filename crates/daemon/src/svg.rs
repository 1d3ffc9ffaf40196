//! `tilec layout --svg`: writes the pictures of fragment layouts that `tilec_ide::svg` draws, one
//! file per fragment, where `--svg` says.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use tilec_ide::svg::{Picture, fragment_svg};

/// Writes the pictures: one picture goes to `out` itself, or into it when `out` is an existing
/// folder; several go into the folder `out` (created if missing), one file each, named by
/// [`Picture::file_name`]. Returns the paths written, in the order of `pictures`.
pub(crate) fn write_pictures(out: &Path, pictures: &[Picture<'_>]) -> Result<Vec<PathBuf>> {
    match pictures {
        [] => bail!("there is no fragment to draw"),
        [only] => {
            let path = if out.is_dir() {
                out.join(only.file_name())
            } else {
                out.to_path_buf()
            };
            std::fs::write(&path, fragment_svg(only))
                .with_context(|| format!("cannot write {}", path.display()))?;
            Ok(vec![path])
        }
        many => {
            std::fs::create_dir_all(out).with_context(|| {
                format!(
                    "{} fragments are selected, so --svg names a folder, and {} cannot be \
                     created (narrow the selection with --kernel, --instance or --buffer to \
                     write a single file)",
                    many.len(),
                    out.display()
                )
            })?;
            many.iter()
                .map(|picture| {
                    let path = out.join(picture.file_name());
                    std::fs::write(&path, fragment_svg(picture))
                        .with_context(|| format!("cannot write {}", path.display()))?;
                    Ok(path)
                })
                .collect()
        }
    }
}
