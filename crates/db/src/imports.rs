//! Imports within a workspace: which loaded file a module name of an import statement names, and
//! the surroundings (the target's facts, the imported modules) each file is evaluated with.
//!
//! Each file is its own input, and a file's surroundings read only the importable statements of
//! the modules it imports ([`module_exports`], cut off when they do not change), so editing a
//! helper module re-analyses the files that import it, and nothing else.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tilec_frontend::{ContextSource, ResolvedImport, Surroundings, TargetFacts, WorkspaceModule};

use crate::queries::{SourceFile, parse, target};
use crate::{Db, RootDatabase};

/// The files of the workspace that imports may name, by path. Callers register every file they
/// load (the ones they check and the modules those import); a file not registered is not found,
/// and its import stays opaque, as a third-party module's does.
#[salsa::input(singleton, debug)]
pub struct WorkspaceFiles {
    #[returns(ref)]
    pub files: Vec<(PathBuf, SourceFile)>,
}

/// Adds `files` to the workspace files that imports may name.
pub fn register_files(db: &mut RootDatabase, files: &[SourceFile]) {
    use salsa::Setter;
    let mut known: Vec<(PathBuf, SourceFile)> = match WorkspaceFiles::try_get(db) {
        Some(workspace) => workspace.files(db).clone(),
        None => Vec::new(),
    };
    let before = known.len();
    for &file in files {
        let path = file.path(db).clone();
        if !known.iter().any(|(existing, _)| *existing == path) {
            known.push((path, file));
        }
    }
    known.sort_by(|a, b| a.0.cmp(&b.0));
    match WorkspaceFiles::try_get(db) {
        Some(workspace) if known.len() != before => {
            workspace
                .set_files(db)
                .with_durability(salsa::Durability::MEDIUM)
                .to(known);
        }
        Some(_) => {}
        None => {
            let _singleton = WorkspaceFiles::builder(known)
                .durability(salsa::Durability::MEDIUM)
                .new(db);
        }
    }
}

/// The files a module name written in `importer` may be, most likely first: for `.x` / `..x`,
/// beside the importer or its parent package; for `a.b`, in the importer's folder and each folder
/// above it (a script's folder comes first on Python's path, a package's root further up), and
/// in the `src/` folder of each (a project in the src layout), as `a/b.py` or the package
/// `a/b/__init__.py`.
///
/// A folder that is itself a package (`is_package`: it has an `__init__.py`) is never a root of an
/// absolute import, as it is on no Python path: `import torch` in `pkg/quant/cast.py` must not
/// find a subpackage `pkg/torch/` of the project, which Python reaches only as `pkg.torch`.
pub fn import_candidates(
    importer: &Path,
    written: &str,
    is_package: &dyn Fn(&Path) -> bool,
) -> Vec<PathBuf> {
    let level = written.len() - written.trim_start_matches('.').len();
    let parts: Vec<&str> = written[level..]
        .split('.')
        .filter(|part| !part.is_empty())
        .collect();
    let Some(folder) = importer.parent() else {
        return Vec::new();
    };
    let as_files = |base: &Path| -> Vec<PathBuf> {
        let mut path = base.to_path_buf();
        for part in &parts {
            path.push(part);
        }
        if parts.is_empty() {
            return vec![path.join("__init__.py")];
        }
        vec![path.with_extension("py"), path.join("__init__.py")]
    };
    if level > 0 {
        let mut base = folder;
        for _ in 1..level {
            match base.parent() {
                Some(parent) => base = parent,
                None => return Vec::new(),
            }
        }
        return as_files(base);
    }
    // Each folder above the importer is a root, and so is its `src/` (the "src layout": a
    // project's tests and scripts import the package `src/pkg/` installed, as `pkg`).
    folder
        .ancestors()
        .filter(|base| !is_package(base))
        .flat_map(|base| {
            let src = base.join("src");
            let mut files = as_files(base);
            if !is_package(&src) && !folder.starts_with(&src) {
                files.extend(as_files(&src));
            }
            files
        })
        .collect()
}

/// The statements of `file` that a module importing it sees.
#[salsa::tracked(returns(ref))]
pub fn module_exports(db: &dyn Db, file: SourceFile) -> ContextSource {
    tilec_frontend::module_exports(parse(db, file), file.text(db))
}

/// Whether `file` calls `driver.get_num_sms()`, `torch.cuda.get_device_capability()` or their kin.
#[salsa::tracked]
fn asks_device(db: &dyn Db, file: SourceFile) -> bool {
    tilec_frontend::asks_the_device(parse(db, file))
}

/// The imports of `file` that name a workspace file, as written, with the file.
#[salsa::tracked(returns(ref))]
pub fn resolved_imports(db: &dyn Db, file: SourceFile) -> Vec<(String, SourceFile)> {
    let Some(workspace) = WorkspaceFiles::try_get(db) else {
        return Vec::new();
    };
    let known = workspace.files(db);
    let importer = file.path(db);
    let is_known = |path: &Path| {
        known
            .binary_search_by(|(known, _)| known.as_path().cmp(path))
            .is_ok()
    };
    let is_package = |folder: &Path| is_known(&folder.join("__init__.py"));
    tilec_frontend::imported_names(parse(db, file))
        .into_iter()
        .filter_map(|written| {
            let found = import_candidates(importer, &written, &is_package)
                .into_iter()
                .find_map(|path| {
                    let at = known.binary_search_by(|(known, _)| known.cmp(&path)).ok()?;
                    Some(known[at].1)
                })?;
            Some((written, found))
        })
        .filter(|(_, found)| *found != file)
        .collect()
}

/// What `file` is evaluated with besides its own text: the target's facts, and the workspace
/// modules it imports, directly or through each other (an import cycle is cut where it closes).
#[salsa::tracked(returns(ref))]
pub fn surroundings(db: &dyn Db, file: SourceFile) -> Arc<Surroundings> {
    let mut order: Vec<(String, SourceFile)> = Vec::new();
    let index_of =
        |order: &mut Vec<(String, SourceFile)>, written: &str, module: SourceFile| match order
            .iter()
            .position(|(_, known)| *known == module)
        {
            Some(index) => index,
            None => {
                order.push((written.to_owned(), module));
                order.len() - 1
            }
        };
    let imports: Vec<ResolvedImport> = resolved_imports(db, file)
        .iter()
        .map(|(written, module)| ResolvedImport {
            written: written.clone(),
            module: index_of(&mut order, written, *module),
        })
        .collect();
    let mut modules: Vec<WorkspaceModule> = Vec::new();
    while modules.len() < order.len() {
        let (name, module) = order[modules.len()].clone();
        let imports = resolved_imports(db, module)
            .iter()
            .map(|(written, imported)| ResolvedImport {
                written: written.clone(),
                module: index_of(&mut order, written, *imported),
            })
            .collect();
        modules.push(WorkspaceModule {
            name,
            exports: module_exports(db, module).clone(),
            imports,
        });
    }
    // The target is read only where code asks the device, so that for every other file a new
    // target leaves the world as it was (early cutoff).
    let asks = std::iter::once(file)
        .chain(order.iter().map(|(_, module)| *module))
        .any(|file| *asks_device(db, file));
    Arc::new(Surroundings {
        target: if asks {
            TargetFacts::of(target(db))
        } else {
            TargetFacts::default()
        },
        modules,
        imports,
    })
}

/// Whether `file` imports `module`, directly or through other workspace modules.
pub fn imports_module(db: &dyn Db, file: SourceFile, module: SourceFile) -> bool {
    import_closure(db, file)
        .iter()
        .any(|(_, imported)| *imported == module)
}

/// The workspace modules `file` imports, directly or through each other, each once, in the order
/// they are first reached, with the name they were first imported by: everything besides the
/// file's own text that its evaluation reads from the workspace. The file itself is among them
/// only when an import cycle leads back to it.
pub fn import_closure(db: &dyn Db, file: SourceFile) -> Vec<(String, SourceFile)> {
    let mut closure: Vec<(String, SourceFile)> = Vec::new();
    let mut next = 0;
    let mut current = file;
    loop {
        for (written, imported) in resolved_imports(db, current) {
            if !closure.iter().any(|(_, known)| known == imported) {
                closure.push((written.clone(), *imported));
            }
        }
        let Some((_, module)) = closure.get(next) else {
            return closure;
        };
        current = *module;
        next += 1;
    }
}
