//! Finding the files to check and the tilec.toml that applies to each, loading them into the
//! database, and choosing the kernel instance a command works on.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub use crate::discover::collect_python_files;
use anyhow::{Context, Result, bail};
use tilec_db::{Instance, RootDatabase, Settings, SourceFile};
use tilec_frontend::manifest::{Manifest, parse_manifest};
use tilec_ir::{ConstValue, Target};
pub use tilec_lsp::workspace::{instances_for, manifest_instances_within, manifest_within};

/// A problem with a tilec.toml, reported as a `config-error` diagnostic.
#[derive(Debug)]
pub struct ManifestProblem {
    pub path: PathBuf,
    pub text: String,
    pub message: String,
    pub span: Option<tilec_ir::Span>,
}

/// The files of a run, loaded into a database.
#[derive(Debug)]
pub struct Workspace {
    pub db: RootDatabase,
    pub files: Vec<SourceFile>,
    /// Files of the workspace that `files` import, loaded so that the imports resolve; they are
    /// not checked themselves.
    pub imported: Vec<SourceFile>,
    pub manifest_problems: Vec<ManifestProblem>,
    /// The target named by the first tilec.toml that sets one.
    pub manifest_target: Option<Target>,
    /// The `[pass_configs]` of the tilec.toml files, in the order they were read.
    pub manifest_pass_configs: Vec<(String, ConstValue)>,
    /// Files found under the paths that could not be read (not UTF-8, no permission), with why:
    /// the others are still analysed, and the command reports these and exits with 2.
    pub unreadable: Vec<(PathBuf, String)>,
}

/// `--target NAME`, parsed; an unknown name is an error that lists the known ones.
pub fn parse_target(name: Option<&str>) -> Result<Option<Target>> {
    match name {
        None => Ok(None),
        Some(name) => match Target::from_name(name) {
            Some(target) => Ok(Some(target)),
            None => bail!("unknown target `{name}` (expected sm_80 or sm_90)"),
        },
    }
}

impl Workspace {
    /// Sets the database's settings for a command: `target` and the tilec.toml pass configs. The
    /// target rarely changes: high durability lets salsa skip re-validating what depends on it.
    pub fn apply_settings(&self, target: Target) -> Settings {
        Settings::builder(target, self.manifest_pass_configs.clone())
            .durability(salsa::Durability::HIGH)
            .new(&self.db)
    }
}

impl Workspace {
    /// Loads the `.py` files under `paths` and the tilec.toml files that apply to them (searched
    /// up to the workspace root of `paths`, see [`manifest_within`]). A file that cannot be read
    /// is listed in `unreadable` and the rest are loaded.
    pub fn load(paths: &[PathBuf]) -> Result<Workspace> {
        let files = collect_python_files(paths)?;
        let db = RootDatabase::default();
        let mut workspace = Workspace {
            db,
            files: Vec::new(),
            imported: Vec::new(),
            manifest_problems: Vec::new(),
            manifest_target: None,
            manifest_pass_configs: Vec::new(),
            unreadable: Vec::new(),
        };
        let mut manifests: BTreeMap<PathBuf, Option<Manifest>> = BTreeMap::new();
        for path in files {
            let text = match std::fs::read_to_string(&path) {
                Ok(text) => text,
                Err(error) => {
                    workspace.unreadable.push((path, error.to_string()));
                    continue;
                }
            };
            let manifest = match manifest_within(&path, paths) {
                Some(manifest_path) => {
                    let manifest = manifests
                        .entry(manifest_path.clone())
                        .or_insert_with(|| workspace.read_manifest(&manifest_path));
                    instances_for(manifest.as_ref(), &manifest_path, &path)
                }
                None => Vec::new(),
            };
            let file = SourceFile::new(&workspace.db, path, text, manifest);
            workspace.files.push(file);
        }
        let requested: std::collections::HashSet<PathBuf> = workspace
            .files
            .iter()
            .map(|file| file.path(&workspace.db).clone())
            .collect();
        workspace.imported = tilec_lsp::workspace::load_imported_files(
            &mut workspace.db,
            &workspace.files,
            &|path| requested.contains(path),
        );
        workspace.manifest_target = manifests
            .values()
            .flatten()
            .find_map(|manifest| manifest.target);
        workspace.manifest_pass_configs = manifests
            .values()
            .flatten()
            .flat_map(|manifest| manifest.pass_configs.iter().cloned())
            .collect();
        Ok(workspace)
    }

    fn read_manifest(&mut self, path: &Path) -> Option<Manifest> {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(error) => {
                self.manifest_problems.push(ManifestProblem {
                    path: path.to_owned(),
                    text: String::new(),
                    message: error.to_string(),
                    span: None,
                });
                return None;
            }
        };
        match parse_manifest(&text) {
            Ok(manifest) => Some(manifest),
            Err(error) => {
                self.manifest_problems.push(ManifestProblem {
                    path: path.to_owned(),
                    text,
                    message: error.message,
                    span: error.span,
                });
                None
            }
        }
    }
}

/// Loads one file for a command that inspects it (`tilec ir`, `tilec layout`).
pub fn load_one(path: &Path) -> Result<(Workspace, SourceFile)> {
    let workspace = Workspace::load(&[path.to_owned()])
        .with_context(|| format!("cannot load {}", path.display()))?;
    if let Some((path, why)) = workspace.unreadable.first() {
        bail!("cannot read {}: {why}", path.display());
    }
    let Some(&file) = workspace.files.first() else {
        bail!("{}: not a Python file", path.display())
    };
    Ok((workspace, file))
}

/// The instances of `file` a command's `--kernel` and `--instance` select; an error names the
/// kernels when none matches.
pub fn selected_instances<'db>(
    db: &'db dyn tilec_db::Db,
    file: SourceFile,
    kernel: Option<&str>,
    instance: Option<u32>,
) -> Result<Vec<Instance<'db>>> {
    let selected: Vec<_> = tilec_db::instances(db, file)
        .iter()
        .copied()
        .filter(|candidate| {
            kernel.is_none_or(|wanted| wanted == candidate.kernel(db).name(db))
                && instance.is_none_or(|wanted| wanted == candidate.index(db))
        })
        .collect();
    if selected.is_empty() {
        let names: Vec<&str> = tilec_db::outline(db, file)
            .kernels
            .iter()
            .map(|k| k.name())
            .collect();
        let names = if names.is_empty() {
            "none".to_owned()
        } else {
            names.join(", ")
        };
        bail!(
            "no matching instance in {} (kernels: {names})",
            file.path(db).display()
        );
    }
    Ok(selected)
}

/// Which kernel instance `tilec run`, `tune` and `build` work on: `--kernel`, `--instance` and
/// `--with`, one set of flags for the three commands.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct InstanceSelection {
    /// The kernel (the factory or jit function name); default: the first (`build`: every one).
    #[arg(long)]
    pub kernel: Option<String>,
    /// Which instance of the kernel (0-based); default: the first (`build`: every one).
    #[arg(long)]
    pub instance: Option<u32>,
    /// Override a factory argument or const by name: `--with M=256 --with dtype=float32`.
    #[arg(long = "with", value_name = "NAME=VALUE")]
    pub with: Vec<String>,
}

impl InstanceSelection {
    /// The instances of `file` that `--kernel` and `--instance` select (`--with` aside).
    pub fn selected<'db>(
        &self,
        db: &'db dyn tilec_db::Db,
        file: SourceFile,
    ) -> Result<Vec<Instance<'db>>> {
        selected_instances(db, file, self.kernel.as_deref(), self.instance)
    }

    /// The first selected instance (with a note when several match), its arguments overridden
    /// by `--with`.
    pub fn pick<'db>(&self, db: &'db dyn tilec_db::Db, file: SourceFile) -> Result<Instance<'db>> {
        let selected = self.selected(db, file)?;
        let base = *selected.first().context("no instance selected")?;
        if selected.len() > 1 {
            eprintln!(
                "note: {} instances match; running `{}` instance {} (choose with --kernel and \
                 --instance)",
                selected.len(),
                base.kernel(db).name(db),
                base.index(db)
            );
        }
        if self.with.is_empty() {
            return Ok(base);
        }
        let mut args = base.args(db).clone();
        for assignment in &self.with {
            let (name, value) = assignment
                .split_once('=')
                .with_context(|| format!("--with expects NAME=VALUE, got `{assignment}`"))?;
            let value = parse_value(value.trim());
            match args.iter_mut().find(|(arg, _)| arg == name.trim()) {
                Some(slot) => slot.1 = value,
                None => args.push((name.trim().to_owned(), value)),
            }
        }
        Ok(Instance::new(db, base.kernel(db), base.index(db), args))
    }
}

/// A `--with` value as Python would read the literal: int, float, bool, None or a string.
fn parse_value(text: &str) -> ConstValue {
    if let Ok(int) = text.parse::<i64>() {
        return ConstValue::Int(int);
    }
    if let Ok(float) = text.parse::<f64>() {
        return ConstValue::float(float);
    }
    match text {
        "True" | "true" => ConstValue::Bool(true),
        "False" | "false" => ConstValue::Bool(false),
        "None" => ConstValue::None,
        _ => ConstValue::Str(text.trim_matches(|c| c == '"' || c == '\'').to_owned()),
    }
}
