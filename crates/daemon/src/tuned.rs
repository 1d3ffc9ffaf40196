//! Where `tilec run` and `tilec build` meet the tuning cache (`tilec_runtime::tuned`): an
//! instance whose configuration `tilec tune` measured gets the winner's values, with a note.

use std::path::Path;

use tilec_db::{Db, Instance};
use tilec_ide::tune::with_args;
use tilec_runtime::tuned::{TunedFor, TunedInstance, TunedStore};

/// The tuning cache's identity of `instance` of the file at `path`.
pub fn tuned_instance<'a>(
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
pub fn apply_tuned<'db>(
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
