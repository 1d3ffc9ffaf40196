//! What a file's evaluation may read beyond its own text: the facts of the GPU it is compiled for
//! (`driver.get_num_sms()`, `torch.cuda.get_device_capability()`), and the modules of its
//! workspace that it imports (`from .common import align`, `import pkg.utils as u`), which the same
//! evaluator runs.
//!
//! The front end does no I/O: the caller (the database) finds the imported files and hands their
//! importable statements in as [`Surroundings`]; this module only evaluates them.

use std::cell::RefCell;
use std::rc::Rc;

use ruff_python_ast::{ModModule, Stmt};
use ruff_text_size::Ranged;
use tilec_ir::{Span, Target};

use crate::builder::Builder;
use crate::outline::ContextSource;
use crate::syntax::{ParsedModule, normalized_text};
use crate::value::{Env, Value, bind, lookup, new_module_env};

/// The facts of the target GPU that Python code can ask for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TargetFacts {
    /// `torch.cuda.get_device_capability()`.
    pub compute_capability: (i64, i64),
    /// `driver.get_num_sms()`, `torch.cuda.get_device_properties(0).multi_processor_count`: the
    /// GPU tilec measures for the target (A100 SXM for sm_80, H100 SXM / H200 for sm_90).
    pub num_sms: i64,
    /// `torch.cuda.get_device_name()`.
    pub device_name: &'static str,
    /// `driver.get_max_dynamic_shared_size_bytes()`: shared memory a block may opt in to.
    pub max_dynamic_shared_bytes: i64,
    /// `torch.cuda.get_device_properties(0).shared_memory_per_multiprocessor`: what the blocks
    /// resident on one SM share (occupancy estimates divide it by a block's needs).
    pub shared_bytes_per_sm: i64,
    /// `L2_cache_size` of the device properties.
    pub l2_cache_bytes: i64,
}

impl TargetFacts {
    pub fn of(target: Target) -> TargetFacts {
        match target {
            Target::Sm80 => TargetFacts {
                compute_capability: (8, 0),
                num_sms: 108,
                device_name: "NVIDIA A100-SXM4-80GB",
                max_dynamic_shared_bytes: 163 * 1024,
                shared_bytes_per_sm: 164 * 1024,
                l2_cache_bytes: 40 * 1024 * 1024,
            },
            Target::Sm90 => TargetFacts {
                compute_capability: (9, 0),
                num_sms: 132,
                device_name: "NVIDIA H100 80GB HBM3",
                max_dynamic_shared_bytes: 227 * 1024,
                shared_bytes_per_sm: 228 * 1024,
                l2_cache_bytes: 50 * 1024 * 1024,
            },
        }
    }
}

impl Default for TargetFacts {
    fn default() -> TargetFacts {
        TargetFacts::of(Target::default())
    }
}

/// The functions of `driver` and `torch.cuda` that answer with the target's facts.
pub(crate) const DEVICE_QUERIES: [&str; 8] = [
    "get_num_sms",
    "get_device_capability",
    "get_device_name",
    "get_max_dynamic_shared_size_bytes",
    "get_device_properties",
    "is_available",
    "device_count",
    "current_device",
];

/// Whether a file asks the GPU anything ([`DEVICE_QUERIES`]): only then does its analysis depend
/// on the target's facts, so only then must changing the target re-evaluate it.
pub fn asks_the_device(parsed: &ParsedModule) -> bool {
    use ruff_python_ast::visitor::{Visitor, walk_expr};
    struct Finder(bool);
    impl<'a> Visitor<'a> for Finder {
        fn visit_expr(&mut self, expr: &'a ruff_python_ast::Expr) {
            let name = match expr {
                ruff_python_ast::Expr::Attribute(attribute) => Some(attribute.attr.as_str()),
                ruff_python_ast::Expr::Name(name) => Some(name.id.as_str()),
                _ => None,
            };
            self.0 |= name.is_some_and(|name| DEVICE_QUERIES.contains(&name));
            walk_expr(self, expr);
        }
    }
    let mut finder = Finder(false);
    finder.visit_body(&parsed.syntax().body);
    finder.0
}

/// Everything outside a file that its evaluation reads.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Surroundings {
    pub target: TargetFacts,
    /// The workspace modules the file imports, directly or through each other.
    pub modules: Vec<WorkspaceModule>,
    /// How the file's own imports resolve.
    pub imports: Vec<ResolvedImport>,
}

impl Surroundings {
    /// The surroundings of a file that imports nothing from its workspace.
    pub fn of_target(target: Target) -> Surroundings {
        Surroundings {
            target: TargetFacts::of(target),
            ..Surroundings::default()
        }
    }
}

/// One imported module of the workspace.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct WorkspaceModule {
    /// Its dotted name, for messages (`pkg.utils`).
    pub name: String,
    /// The statements an importer sees, in normal form ([`module_exports`]).
    pub exports: ContextSource,
    /// How its own imports resolve.
    pub imports: Vec<ResolvedImport>,
}

/// An import as written (`.common`, `pkg.utils`), and the module of [`Surroundings::modules`] it
/// names.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ResolvedImport {
    pub written: String,
    pub module: usize,
}

/// The module names the import statements of a file may refer to, as written: the module of each
/// `import` and `from ... import`, with the leading dots of a relative import, the packages above
/// it (`import a.b.c` binds `a`), and the possible submodules of `from pkg import name`.
pub fn imported_names(parsed: &ParsedModule) -> Vec<String> {
    let mut names = Vec::new();
    collect_imports(&parsed.syntax().body, &mut names);
    names.sort();
    names.dedup();
    names
}

fn collect_imports(body: &[Stmt], names: &mut Vec<String>) {
    for stmt in body {
        match stmt {
            Stmt::Import(import) => {
                for alias in &import.names {
                    let mut prefix = String::new();
                    for part in alias.name.as_str().split('.') {
                        if !prefix.is_empty() {
                            prefix.push('.');
                        }
                        prefix.push_str(part);
                        names.push(prefix.clone());
                    }
                }
            }
            Stmt::ImportFrom(import) => {
                let module = written_module(import);
                for alias in &import.names {
                    if alias.name.as_str() != "*" {
                        names.push(submodule(&module, alias.name.as_str()));
                    }
                }
                // `from . import x` may name `x` in the package's `__init__.py`.
                names.push(module);
            }
            Stmt::FunctionDef(def) => collect_imports(&def.body, names),
            Stmt::ClassDef(class) => collect_imports(&class.body, names),
            other => {
                for inner in crate::outline::inner_bodies(other) {
                    collect_imports(inner, names);
                }
            }
        }
    }
}

/// An import statement of a file: where it is, the module names it may refer to (as
/// [`imported_names`] lists them), and whether it is relative (`from .common import align`), in
/// which case it must name a file of the workspace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImportStatement {
    pub span: Span,
    pub names: Vec<String>,
    pub relative: bool,
}

/// The import statements of a file, at any depth, in source order.
pub fn import_statements(parsed: &ParsedModule) -> Vec<ImportStatement> {
    use ruff_python_ast::visitor::{Visitor, walk_stmt};
    struct Finder(Vec<ImportStatement>);
    impl<'a> Visitor<'a> for Finder {
        fn visit_stmt(&mut self, stmt: &'a Stmt) {
            let found = match stmt {
                Stmt::ImportFrom(import) => {
                    let module = written_module(import);
                    let mut names: Vec<String> = import
                        .names
                        .iter()
                        .filter(|alias| alias.name.as_str() != "*")
                        .map(|alias| submodule(&module, alias.name.as_str()))
                        .collect();
                    names.push(module);
                    Some((import.range, names, import.level > 0))
                }
                Stmt::Import(import) => {
                    let mut names = Vec::new();
                    collect_imports(std::slice::from_ref(stmt), &mut names);
                    Some((import.range, names, false))
                }
                _ => None,
            };
            if let Some((range, names, relative)) = found {
                self.0.push(ImportStatement {
                    span: crate::syntax::span_of(range),
                    names,
                    relative,
                });
            }
            walk_stmt(self, stmt);
        }
    }
    let mut finder = Finder(Vec::new());
    finder.visit_body(&parsed.syntax().body);
    finder.0
}

/// `from ..pkg import x` is written `..pkg`; `from . import x` is `.`.
pub(crate) fn written_module(import: &ruff_python_ast::StmtImportFrom) -> String {
    let dots = ".".repeat(import.level as usize);
    let module = import.module.as_ref().map_or("", |module| module.as_str());
    format!("{dots}{module}")
}

/// The submodule `name` of the module written `module` (`.` and `x` give `.x`).
pub(crate) fn submodule(module: &str, name: &str) -> String {
    if module.ends_with('.') {
        format!("{module}{name}")
    } else {
        format!("{module}.{name}")
    }
}

/// The statements of a module that an importer sees, in normal form: everything at module level
/// but bare expression statements (a call of `main()`, a docstring) and the `__main__` guard.
pub fn module_exports(parsed: &ParsedModule, text: &str) -> ContextSource {
    let mut normalized = String::new();
    for stmt in exported_statements(parsed.syntax()) {
        normalized.push_str(&normalized_text(parsed, text, stmt.range()));
    }
    ContextSource { normalized }
}

fn exported_statements(module: &ModModule) -> impl Iterator<Item = &Stmt> {
    module.body.iter().filter(|stmt| match stmt {
        Stmt::Expr(_) => false,
        Stmt::If(if_stmt) => !crate::outline::is_main_guard(&if_stmt.test),
        _ => true,
    })
}

/// The imported modules of one evaluation, parsed; they outlive the evaluation's frames.
pub(crate) struct ParsedModules<'s> {
    surroundings: &'s Surroundings,
    parsed: Vec<ParsedModule>,
}

impl<'s> ParsedModules<'s> {
    pub(crate) fn target(&self) -> TargetFacts {
        self.surroundings.target
    }

    pub(crate) fn parse(surroundings: &'s Surroundings) -> ParsedModules<'s> {
        let parsed = surroundings
            .modules
            .iter()
            .map(|module| ParsedModule::parse(&module.exports.normalized))
            .collect();
        ParsedModules {
            surroundings,
            parsed,
        }
    }
}

/// The imported modules as an evaluation sees them: each is run the first time it is imported.
pub(crate) struct ModuleTable<'a> {
    surroundings: &'a Surroundings,
    bodies: Vec<&'a [Stmt]>,
    states: RefCell<Vec<ModuleState<'a>>>,
}

impl std::fmt::Debug for ModuleTable<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModuleTable")
            .field("modules", &self.bodies.len())
            .finish()
    }
}

impl<'a> ModuleTable<'a> {
    pub(crate) fn new(modules: &'a ParsedModules<'_>) -> ModuleTable<'a> {
        ModuleTable {
            surroundings: modules.surroundings,
            bodies: modules
                .parsed
                .iter()
                .map(|parsed| parsed.syntax().body.as_slice())
                .collect(),
            states: RefCell::new(vec![ModuleState::Unloaded; modules.parsed.len()]),
        }
    }

    /// The module that `written` names in the module `importer` (the file itself when `None`).
    fn resolve(&self, importer: Option<usize>, written: &str) -> Option<usize> {
        let imports = match importer {
            None => &self.surroundings.imports,
            Some(index) => &self.surroundings.modules.get(index)?.imports,
        };
        imports
            .iter()
            .find(|import| import.written == written)
            .map(|import| import.module)
    }
}

#[derive(Clone, Debug)]
enum ModuleState<'a> {
    Unloaded,
    /// Being run: importing it again is an import cycle.
    Loading,
    Loaded(Env<'a>),
}

/// A workspace module as a value: `import pkg.utils as u` binds `u` to it.
#[derive(Clone, Debug)]
pub(crate) struct UserModule {
    pub index: usize,
    /// The name it was imported by, and by which module: its submodules resolve from there.
    pub written: Rc<str>,
    pub importer: Option<usize>,
}

impl Builder<'_> {
    /// `import a.b.c` / `import a.b.c as m`: the workspace module bound, or `None` when the name is
    /// not a module of the workspace.
    pub(crate) fn import_workspace_module<'a>(
        &mut self,
        env: &Env<'a>,
        written: &str,
    ) -> Option<Value<'a>> {
        let table = crate::value::module_table(env)?;
        let index = table.resolve(self.current_module, written)?;
        Some(Value::UserModule(Rc::new(UserModule {
            index,
            written: Rc::from(written),
            importer: self.current_module,
        })))
    }

    /// `from module import name`: the value from a workspace module, or `None` when `module` is
    /// not one.
    pub(crate) fn import_from_workspace<'a>(
        &mut self,
        env: &Env<'a>,
        module: &str,
        name: &str,
    ) -> Option<Value<'a>> {
        let table = crate::value::module_table(env)?;
        let importer = self.current_module;
        let written = submodule(module, name);
        let as_submodule = |index| {
            Value::UserModule(Rc::new(UserModule {
                index,
                written: Rc::from(written.as_str()),
                importer,
            }))
        };
        if let Some(index) = table.resolve(importer, module) {
            let module_env = self.load_module(env, &table, index);
            if let Some(value) = module_env.as_ref().and_then(|scope| lookup(scope, name)) {
                return Some(value);
            }
            // As Python does, a name the package does not (yet) bind is its submodule: `from .
            // import passes` in a module the package's `__init__.py` is importing finds
            // `passes.py`, however far the package itself has run.
            if let Some(index) = table.resolve(importer, &written) {
                return Some(as_submodule(index));
            }
            if module_env.is_none() {
                return Some(Value::Opaque(Rc::from(format!(
                    "`{name}` from module `{module}`, which is part of an import cycle tilec does not follow"
                ))));
            }
        }
        if let Some(index) = table.resolve(importer, &written) {
            return Some(as_submodule(index));
        }
        table.resolve(importer, module).map(|_| {
            Value::Opaque(Rc::from(format!(
                "`{name}`, which module `{module}` does not define"
            )))
        })
    }

    /// `from module import *`: the public names of a workspace module, or `None` when `module` is
    /// not one.
    pub(crate) fn import_star<'a>(
        &mut self,
        env: &Env<'a>,
        module: &str,
    ) -> Option<Vec<(String, Value<'a>)>> {
        let table = crate::value::module_table(env)?;
        let index = table.resolve(self.current_module, module)?;
        let scope = self.load_module(env, &table, index)?;
        let frame = scope.borrow();
        let mut names: Vec<(String, Value<'a>)> = frame
            .vars
            .iter()
            .filter(|(name, _)| !name.starts_with('_'))
            .map(|(name, value)| (name.clone(), value.clone()))
            .collect();
        names.sort_by(|a, b| a.0.cmp(&b.0));
        Some(names)
    }

    /// `m.name` on a workspace module: its variable, else its submodule.
    pub(crate) fn user_module_attribute<'a>(
        &mut self,
        env_of_evaluation: &Env<'a>,
        module: &UserModule,
        name: &str,
    ) -> Value<'a> {
        let Some(table) = crate::value::module_table(env_of_evaluation) else {
            return Value::Opaque(Rc::from(format!("`{}.{name}`", module.written)));
        };
        let scope = self.load_module(env_of_evaluation, &table, module.index);
        if let Some(value) = scope.as_ref().and_then(|scope| lookup(scope, name)) {
            return value;
        }
        let written = submodule(&module.written, name);
        match table.resolve(module.importer, &written) {
            Some(index) => Value::UserModule(Rc::new(UserModule {
                index,
                written: Rc::from(written),
                importer: module.importer,
            })),
            None => Value::Opaque(Rc::from(format!(
                "`{name}`, which module `{}` does not define",
                module.written
            ))),
        }
    }

    /// Runs module `index` the first time it is imported (leniently, as module context is run)
    /// and returns its scope; `None` inside an import cycle.
    fn load_module<'a>(
        &mut self,
        env: &Env<'a>,
        table: &ModuleTable<'a>,
        index: usize,
    ) -> Option<Env<'a>> {
        let state = table.states.borrow().get(index).cloned()?;
        match state {
            ModuleState::Loaded(scope) => return Some(scope),
            ModuleState::Loading => return None,
            ModuleState::Unloaded => {}
        }
        table.states.borrow_mut()[index] = ModuleState::Loading;
        let scope = new_module_env(env);
        let name = &table.surroundings.modules[index].name;
        bind(&scope, "__name__", Value::str(name));
        let saved_module = self.current_module.replace(index);
        let strict = std::mem::replace(&mut self.strict, false);
        let abort = std::mem::replace(&mut self.abort_on_error, false);
        let span = self.stmt_span;
        for stmt in table.bodies[index] {
            let _ = self.exec_body(&scope, std::slice::from_ref(stmt));
        }
        // Spans inside another module's text mean nothing in this file: what it reports is
        // attributed to the import.
        self.stmt_span = span;
        self.abort_on_error = abort;
        self.strict = strict;
        self.current_module = saved_module;
        table.states.borrow_mut()[index] = ModuleState::Loaded(Rc::clone(&scope));
        Some(scope)
    }
}

/// Lets go of the scopes of an evaluation's imported modules; their frames are registered with
/// the evaluation, which empties them all when it ends (see `release_frames`).
pub(crate) fn release_modules(table: &ModuleTable<'_>) {
    let states = std::mem::take(&mut *table.states.borrow_mut());
    drop(states);
}
