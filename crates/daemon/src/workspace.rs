//! Finding the files to check and the tilec.toml that applies to each, loading them into the
//! database, and choosing the kernel instance a command works on.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub(crate) use crate::discover::collect_python_files;
use anyhow::{Context, Result, bail};
use tilec_db::{Instance, RootDatabase, Settings, SourceFile};
use tilec_frontend::manifest::{Manifest, parse_manifest};
use tilec_ir::{ConstValue, Target};
pub(crate) use tilec_lsp::workspace::{instances_for, manifest_instances_within, manifest_within};

/// A problem with a tilec.toml, reported as a `config-error` diagnostic.
#[derive(Debug)]
pub(crate) struct ManifestProblem {
    pub path: PathBuf,
    pub text: String,
    pub message: String,
    pub span: Option<tilec_ir::Span>,
}

/// The files of a run, loaded into a database.
#[derive(Debug)]
pub(crate) struct Workspace {
    pub db: RootDatabase,
    pub files: Vec<SourceFile>,
    /// Files of the workspace that `files` import, loaded so that the imports resolve; they are
    /// not checked themselves.
    pub imported: Vec<SourceFile>,
    pub manifest_problems: Vec<ManifestProblem>,
    /// The target named by the first tilec.toml that sets one.
    pub manifest_target: Option<Target>,
    /// The `[cache] remote` named by the first tilec.toml that sets one.
    pub manifest_cache_remote: Option<String>,
    /// The `[pass_configs]` of the tilec.toml files, in the order they were read.
    pub manifest_pass_configs: Vec<(String, ConstValue)>,
    /// Files found under the paths that could not be read (not UTF-8, no permission), with why:
    /// the others are still analysed, and the command reports these and exits with 2.
    pub unreadable: Vec<(PathBuf, String)>,
}

/// `--target NAME`, parsed; an unknown name is an error that lists the known ones.
pub(crate) fn parse_target(name: Option<&str>) -> Result<Option<Target>> {
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
    pub(crate) fn apply_settings(&self, target: Target) -> Settings {
        Settings::builder(target, self.manifest_pass_configs.clone())
            .durability(salsa::Durability::HIGH)
            .new(&self.db)
    }
}

impl Workspace {
    /// Loads the `.py` files under `paths` and the tilec.toml files that apply to them (searched
    /// up to the workspace root of `paths`, see [`manifest_within`]). A file that cannot be read
    /// is listed in `unreadable` and the rest are loaded.
    pub(crate) fn load(paths: &[PathBuf]) -> Result<Workspace> {
        let files = collect_python_files(paths)?;
        let db = RootDatabase::default();
        let mut workspace = Workspace {
            db,
            files: Vec::new(),
            imported: Vec::new(),
            manifest_problems: Vec::new(),
            manifest_target: None,
            manifest_cache_remote: None,
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
        workspace.manifest_cache_remote = manifests
            .values()
            .flatten()
            .find_map(|manifest| manifest.cache_remote.clone());
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

/// A request the command cannot serve as asked (a folder where one file is wanted, a file without
/// TileLang, a kernel, instance or fragment that is not there): `tilec` says what is wrong and exits
/// with 1, as for a kernel with errors, where a file it cannot read exits with 2.
#[derive(Debug)]
pub(crate) struct Refusal(pub String);

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Refusal {}

/// Returns early with a [`Refusal`] made of the `format!` arguments.
macro_rules! refuse {
    ($($arg:tt)*) => {
        return Err(anyhow::Error::new($crate::workspace::Refusal(format!($($arg)*))))
    };
}
pub(crate) use refuse;

/// Loads one file for a command that inspects it (`tilec ir`, `tilec layout`, `run`, `tune`): a
/// folder, a file that is not Python and a Python file without TileLang are refused, since whatever
/// the command printed for them would mean nothing.
pub(crate) fn load_one(path: &Path) -> Result<(Workspace, SourceFile)> {
    if path.is_dir() {
        refuse!(
            "{} is a folder; this command takes one `.py` file (`tilec check` and `tilec build` take folders)",
            path.display()
        );
    }
    let workspace = Workspace::load(&[path.to_owned()])
        .with_context(|| format!("cannot load {}", path.display()))?;
    if let Some((path, why)) = workspace.unreadable.first() {
        bail!("cannot read {}: {why}", path.display());
    }
    let Some(&file) = workspace.files.first() else {
        refuse!("{}: not a Python file", path.display())
    };
    if !tilec_db::outline(&workspace.db, file).uses_tilelang {
        refuse!(
            "{} does not use TileLang (it imports neither `tilelang` nor `tilelang.language`)",
            path.display()
        );
    }
    Ok((workspace, file))
}

/// The instances of `file` a command's `--kernel` and `--instance` select; a refusal names the
/// kernels when none matches, and how many instances the kernel has when `--instance` is past them.
pub(crate) fn selected_instances<'db>(
    db: &'db dyn tilec_db::Db,
    file: SourceFile,
    kernel: Option<&str>,
    instance: Option<u32>,
) -> Result<Vec<Instance<'db>>> {
    let of_kernel: Vec<_> = tilec_db::instances(db, file)
        .iter()
        .copied()
        .filter(|candidate| kernel.is_none_or(|wanted| wanted == candidate.kernel(db).name(db)))
        .collect();
    let selected: Vec<_> = of_kernel
        .iter()
        .copied()
        .filter(|candidate| instance.is_none_or(|wanted| wanted == candidate.index(db)))
        .collect();
    if !selected.is_empty() {
        return Ok(selected);
    }
    let path = file.path(db).display();
    if let (Some(wanted), false) = (instance, of_kernel.is_empty()) {
        refuse!(
            "no instance {wanted} in {path}: {}",
            instance_counts(db, &of_kernel)
        );
    }
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
    refuse!("no matching instance in {path} (kernels: {names})")
}

/// How many instances each kernel among `instances` has, in words: `` `gemm` has 2 instances (0 to
/// 1) ``.
fn instance_counts(db: &dyn tilec_db::Db, instances: &[Instance<'_>]) -> String {
    let mut counts: Vec<(&str, usize)> = Vec::new();
    for candidate in instances {
        let name = candidate.kernel(db).name(db).as_str();
        match counts.iter_mut().find(|(known, _)| *known == name) {
            Some((_, count)) => *count += 1,
            None => counts.push((name, 1)),
        }
    }
    let words: Vec<String> = counts
        .iter()
        .map(|&(name, count)| match count {
            1 => format!("`{name}` has 1 instance (0)"),
            _ => format!("`{name}` has {count} instances (0 to {})", count - 1),
        })
        .collect();
    words.join(", ")
}

/// Which kernel instance `tilec run`, `tune`, `build` and `layout` work on: `--kernel`,
/// `--instance` and `--with`, one set of flags for the four commands.
#[derive(clap::Args, Clone, Debug, Default)]
pub(crate) struct InstanceSelection {
    /// The kernel (the factory or jit function name); default: the first (`build`, `layout`:
    /// every one).
    #[arg(long)]
    pub kernel: Option<String>,
    /// Which instance of the kernel (0-based); default: the first (`build`, `layout`: every one).
    #[arg(long)]
    pub instance: Option<u32>,
    /// Override a factory argument or const by name: `--with M=256 --with dtype=float32`.
    #[arg(long = "with", value_name = "NAME=VALUE")]
    pub with: Vec<String>,
}

impl InstanceSelection {
    /// The instances of `file` that `--kernel` and `--instance` select (`--with` aside).
    pub(crate) fn selected<'db>(
        &self,
        db: &'db dyn tilec_db::Db,
        file: SourceFile,
    ) -> Result<Vec<Instance<'db>>> {
        selected_instances(db, file, self.kernel.as_deref(), self.instance)
    }

    /// The first selected instance (with a note when several match), its arguments overridden
    /// by `--with`.
    pub(crate) fn pick<'db>(
        &self,
        db: &'db dyn tilec_db::Db,
        file: SourceFile,
    ) -> Result<Instance<'db>> {
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
        let args = self.with_arguments(db, file, base)?;
        Ok(Instance::new(db, base.kernel(db), base.index(db), args))
    }

    /// Every selected instance, each with its arguments overridden by `--with` (`tilec layout`).
    pub(crate) fn selected_with<'db>(
        &self,
        db: &'db dyn tilec_db::Db,
        file: SourceFile,
    ) -> Result<Vec<Instance<'db>>> {
        self.selected(db, file)?
            .into_iter()
            .map(|base| {
                if self.with.is_empty() {
                    return Ok(base);
                }
                let args = self.with_arguments(db, file, base)?;
                Ok(Instance::new(db, base.kernel(db), base.index(db), args))
            })
            .collect()
    }

    /// `base`'s arguments with `--with` applied. A name the kernel does not have, and a value that
    /// does not read as the kind the argument holds (an integer for `M=4096`), is refused with the
    /// names it has: an override that silently does nothing would leave the user measuring the
    /// wrong instance.
    fn with_arguments(
        &self,
        db: &dyn tilec_db::Db,
        file: SourceFile,
        base: Instance<'_>,
    ) -> Result<Vec<(String, ConstValue)>> {
        let mut args = base.args(db).clone();
        let mut known = argument_names(db, file, base);
        // A run-time size may appear only once other arguments have values (`heads` given, the
        // launch sizes by `c_seq_len`): the names of the instance the other flags make count too.
        let others: Vec<(String, ConstValue)> = self
            .with
            .iter()
            .filter_map(|assignment| assignment.split_once('='))
            .filter(|(name, _)| known.iter().any(|known| known == name.trim()))
            .map(|(name, text)| (name.trim().to_owned(), parse_value(text.trim())))
            .collect();
        if others.len() < self.with.len() {
            let mut partial = args.clone();
            for (name, value) in others {
                match partial.iter_mut().find(|(arg, _)| *arg == name) {
                    Some(slot) => slot.1 = value,
                    None => partial.push((name, value)),
                }
            }
            let instance = Instance::new(db, base.kernel(db), base.index(db), partial);
            known.extend(run_time_sizes(db, instance));
        }
        for assignment in &self.with {
            let Some((name, text)) = assignment.split_once('=') else {
                refuse!("--with expects NAME=VALUE, got `{assignment}`");
            };
            let name = name.trim();
            if !known.iter().any(|known| known == name) {
                refuse!(
                    "--with {name}: `{}` has no argument `{name}`; its arguments: {}",
                    base.kernel(db).name(db),
                    if known.is_empty() {
                        "none".to_owned()
                    } else {
                        known.join(", ")
                    }
                );
            }
            let value = parse_value(text.trim());
            let slot = args.iter_mut().find(|(arg, _)| arg == name);
            if let Some((_, old)) = &slot
                && let Some(kind) = mismatched_kind(old, &value)
            {
                refuse!(
                    "--with {name}={}: `{name}` is {kind} here ({}), and `{}` is not one",
                    text.trim(),
                    crate::render::const_json(old),
                    text.trim()
                );
            }
            match slot {
                Some(slot) => slot.1 = value,
                None => args.push((name.to_owned(), value)),
            }
        }
        Ok(args)
    }
}

/// The names `--with` may set on `instance`: the kernel's parameters, the arguments the instance
/// was evaluated with, and the extents an eager kernel's tensors name.
fn argument_names(db: &dyn tilec_db::Db, file: SourceFile, instance: Instance<'_>) -> Vec<String> {
    let kernel = instance.kernel(db).name(db);
    let mut names: Vec<String> = instance
        .args(db)
        .iter()
        .map(|(name, _)| name.clone())
        .collect();
    if let Some(outline) = tilec_db::outline(db, file)
        .kernels
        .iter()
        .find(|candidate| candidate.name() == kernel.as_str())
    {
        let tensors: Vec<&str> = outline
            .tensors
            .iter()
            .map(|(name, _)| name.as_str())
            .collect();
        let params = outline
            .params
            .iter()
            .filter(|param| !tensors.contains(&param.name.as_str()))
            .map(|param| param.name.clone());
        names.extend(params);
    }
    // A tensor extent is a name to override only where it is a symbol (below): a module-level
    // `M = 8192` in `T.Tensor([M, N])` is a constant, and an override of it would do nothing.
    // The symbols the kernel declares itself (`M, N, K = T.const("M, N, K")`) size it too, and
    // so do the dynamic sizes of its tensors and grid (`T.dynamic("seqlen")`, `T.symbolic`), which
    // the launch takes by value: `tilec run` asks for them with `--with`.
    let world = tilec_db::kernel_world(db, instance);
    names.extend(world.symbolic_args.iter().cloned());
    let shapes = world
        .params
        .iter()
        .filter_map(|&param| world.shapes.get(param));
    let grids = world.launches.iter().map(|(_, launch)| &launch.grid);
    for extent in shapes.chain(grids).flatten() {
        for var in world.exprs.vars_of(*extent) {
            names.push(world.exprs.var_info(var).name.clone());
        }
    }
    // And every size the launch takes at run time, wherever the kernel uses it (a loop extent, an
    // index): `tilec run` asks for each of them by this name.
    names.extend(run_time_sizes(db, instance));
    let mut seen = std::collections::HashSet::new();
    names.retain(|name| seen.insert(name.clone()));
    names
}

/// The sizes `instance`'s launches take at run time, by name; none when it does not lower.
fn run_time_sizes(db: &dyn tilec_db::Db, instance: Instance<'_>) -> Vec<String> {
    match tilec_db::thread_programs(db, instance).as_ref() {
        Ok(programs) => programs
            .iter()
            .flat_map(|program| program.scalars.iter().map(|scalar| scalar.name.clone()))
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// What an argument holding `old` must be that `new` is not, if so: an integer stays an integer,
/// a float takes any number, a bool a bool; strings, dtypes and `None` take anything.
fn mismatched_kind(old: &ConstValue, new: &ConstValue) -> Option<&'static str> {
    match (old, new) {
        (ConstValue::Int(_), ConstValue::Int(_))
        | (ConstValue::Float(_), ConstValue::Int(_) | ConstValue::Float(_))
        | (ConstValue::Bool(_), ConstValue::Bool(_)) => None,
        (ConstValue::Int(_), _) => Some("an integer"),
        (ConstValue::Float(_), _) => Some("a number"),
        (ConstValue::Bool(_), _) => Some("a bool (True or False)"),
        _ => None,
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
