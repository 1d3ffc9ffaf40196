//! The salsa database: inputs (source files, settings) and the queries that call the front end and
//! the passes, down to the diagnostics of a file.
//!
//! Invariants of this crate:
//! - It holds no compiler logic beyond gluing: every query calls one function of `tilec-frontend` or
//!   `tilec-passes` on its inputs.
//! - It never does I/O; the daemon and the language server read files and set inputs.
//! - Queries recurse over syntax trees, so callers run them on a thread with a large stack (the CLI
//!   uses 512 MiB, of which only the pages touched are committed); the evaluator bounds nesting and
//!   call depth, but a default 2 MiB thread is not enough for a debug build on adversarial input.
//! - Early cutoff is designed in: parsing is `no_eq` (its result is full of positions), a kernel's
//!   world is built from the position-free normal form of its source, and positions come from their
//!   own query. Editing one kernel re-runs the world and checks of that kernel only; a comment-only
//!   edit re-runs nothing past the position tables.
//! - Imports reach only files registered with [`register_files`], and a file's evaluation reads
//!   other files only through [`surroundings`]: the importable statements of what it imports.

mod diagnostics;
mod imports;
mod queries;
#[cfg(test)]
mod tests;

use std::sync::{Arc, Mutex};

pub use diagnostics::{
    FileDiagnostic, InstanceReport, RelatedLocation, file_diagnostics, instance_reports,
    line_column, lowering_diagnostics,
};
pub use imports::{
    WorkspaceFiles, import_candidates, import_closure, imports_module, module_exports,
    register_files, resolved_imports, surroundings,
};
pub use queries::*;
/// The roofline model's results, for callers that rank instances with [`roofline_estimate`]
/// without reaching into the pass that computes them.
pub use tilec_passes::roofline::{Estimate, Workload};

/// The database trait every query takes.
#[salsa::db]
pub trait Db: salsa::Database {}

/// One query execution, as recorded by the event log of a [`RootDatabase`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Executed {
    pub query: String,
    pub key: salsa::Id,
}

/// The concrete database of the CLI, the daemon and the language server.
#[salsa::db]
#[derive(Clone, Default)]
pub struct RootDatabase {
    storage: salsa::Storage<Self>,
    /// Present when the database records which queries execute (tests of incrementality).
    events: Option<Arc<Mutex<Vec<salsa::Event>>>>,
}

impl std::fmt::Debug for RootDatabase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RootDatabase").finish_non_exhaustive()
    }
}

#[salsa::db]
impl salsa::Database for RootDatabase {}

#[salsa::db]
impl Db for RootDatabase {}

impl RootDatabase {
    /// A database that records every query execution, for tests.
    pub fn with_event_log() -> RootDatabase {
        let events: Arc<Mutex<Vec<salsa::Event>>> = Arc::default();
        let sink = Arc::clone(&events);
        let storage = salsa::Storage::new(Some(Box::new(move |event: salsa::Event| {
            if matches!(event.kind, salsa::EventKind::WillExecute { .. })
                && let Ok(mut log) = sink.lock()
            {
                log.push(event);
            }
        })));
        RootDatabase {
            storage,
            events: Some(events),
        }
    }

    /// Drains the event log: which queries executed since the last call, with their keys.
    pub fn take_executed(&self) -> Vec<Executed> {
        use salsa::Database as _;
        let Some(events) = &self.events else {
            return Vec::new();
        };
        let drained = match events.lock() {
            Ok(mut log) => std::mem::take(&mut *log),
            Err(_) => return Vec::new(),
        };
        drained
            .into_iter()
            .filter_map(|event| match event.kind {
                salsa::EventKind::WillExecute { database_key } => Some(Executed {
                    query: self
                        .ingredient_debug_name(database_key.ingredient_index())
                        .into_owned(),
                    key: database_key.key_index(),
                }),
                _ => None,
            })
            .collect()
    }
}
