//! Where `tilec run`, `tilec build` and the editor meet the tuning cache (`tilec_runtime::tuned`):
//! an instance whose configuration `tilec tune` measured gets the winner's values, with a note, and
//! `tilec lsp`'s tuning lenses read the winners through [`EditorTuning`].

use std::path::{Path, PathBuf};

use tilec_db::{Db, Instance};
use tilec_ide::tune::{MeasuredWinner, TunedResults, with_args};
use tilec_ir::{ConstValue, Target};
use tilec_runtime::tuned::{TunedFor, TunedInstance, TunedStore};

/// The tuning cache's identity of `instance` of the file at `path`.
pub(crate) fn tuned_instance<'a>(
    db: &'a dyn Db,
    path: &'a Path,
    instance: Instance<'a>,
) -> TunedInstance<'a> {
    TunedInstance {
        file: path,
        kernel: instance.kernel(db).name(db),
        args: instance.args(db),
    }
}

/// `instance` with its tuned configuration applied, when the tuning cache in `cache` has one for
/// `wanted`; prints a note saying so (to stderr, so outputs stay clean).
pub(crate) fn apply_tuned<'db>(
    db: &'db dyn Db,
    cache: &Path,
    path: &Path,
    instance: Instance<'db>,
    wanted: &TunedFor<'_>,
) -> Instance<'db> {
    let store = TunedStore::new(cache);
    match store.lookup(&tuned_instance(db, path, instance), wanted) {
        Some(record) => {
            eprintln!(
                "note: using the configuration `tilec tune` measured fastest on {}: {} \
                 (pass --with to override, or delete {})",
                record.device,
                crate::tune::config_text(&record.winner),
                store.dir().display()
            );
            with_args(db, instance, &record.winner)
        }
        None => instance,
    }
}

/// The tuning store as the language server reads it: the `.tilec-cache` folder nearest each
/// document (in its folder or above), looked up by the document's target. The server itself does
/// not read the store (it reaches it only through `tilec-ide`), so `tilec lsp` hands it this.
#[derive(Debug)]
pub(crate) struct EditorTuning;

impl TunedResults for EditorTuning {
    fn winner(
        &self,
        file: &Path,
        kernel: &str,
        args: &[(String, ConstValue)],
        target: Target,
    ) -> Option<MeasuredWinner> {
        let store = TunedStore::new(&nearest_cache(file)?);
        let identity = TunedInstance { file, kernel, args };
        let record = store.lookup(&identity, &TunedFor::Target(target))?;
        Some(MeasuredWinner {
            config: record.winner,
            device: record.device,
            median_ms: record.median_ms,
            measured: record.measured,
        })
    }
}

/// The `.tilec-cache` folder in the file's folder or the nearest one above it.
fn nearest_cache(file: &Path) -> Option<PathBuf> {
    file.ancestors()
        .skip(1)
        .map(|dir| dir.join(".tilec-cache"))
        .find(|dir| dir.is_dir())
}
