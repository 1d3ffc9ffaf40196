//! The TileLang front end: reads `.py` files without running Python.
//!
//! It parses a file with ruff's recovering parser, finds the kernels in every style (classic
//! factories returning a `@T.prim_func`, eager `@tilelang.jit` functions, wrappers that define
//! either one function further in, methods of classes), finds their instantiations, evaluates the
//! meta-level Python around and inside each kernel (classes, imported workspace modules, the
//! target's device facts included), and builds the kernel world of every instance.
//!
//! Invariants of this crate:
//! - It never does I/O: callers hand it source text (and tilec.toml text), and the importable
//!   statements of the workspace modules a file imports ([`Surroundings`]).
//! - It never panics on any input: every problem is a diagnostic with a source range, and a problem
//!   in one kernel never hides the results of the others.
//! - It lays out and lowers nothing; that is `tilec-passes`' work, on the world built here.
//! - Worlds are built from the position-free normal form of a kernel ([`KernelSource`]) and its
//!   module context ([`ContextSource`]); spans and diagnostics come from the same evaluation of the
//!   real file ([`build_positions`]), so both agree on entity ids.

mod barriers;
mod bitwise;
mod build;
mod builder;
mod call;
mod classes;
mod dsl;
mod eval;
mod exec;
mod generic;
mod instances;
pub mod manifest;
mod modules;
mod outline;
mod rewrite;
mod syntax;
mod torch;
mod value;

pub use build::{BuildHooks, KernelPositions, build_positions, build_world};
pub use builder::thousands;
pub use instances::{
    AutotuneConfig, InstanceOrigin, InstanceSpec, ManifestInstance, autotune_configs,
    find_instances,
};
pub use modules::{
    ImportStatement, ResolvedImport, Surroundings, TargetFacts, WorkspaceModule, asks_the_device,
    import_statements, imported_names, module_exports,
};
pub use outline::{
    ContextSource, KernelOutline, KernelSource, KernelStyle, MethodOutline, Outline, ParamOutline,
    outline,
};
pub use rewrite::{ArgumentEdit, set_call_arguments};
pub use syntax::{ParsedModule, SyntaxError};

/// The stack, in bytes, of every thread that analyses a file: the CLI's analysis thread, the
/// language server's workers and the tests that analyse files. The parser recurses as deep as
/// the source nests, and the evaluator and lowering recurse over the syntax tree and the programs
/// built from it; the evaluator bounds its own depth only so that deeper input is a diagnostic,
/// and in an unoptimised build a frame of it runs to kilobytes, so a machine-generated file needs
/// far more than a thread's default 2 MiB. 512 MiB leaves room for that. It costs address space,
/// not memory: a stack's pages are committed only when first touched, so a shallow file uses no
/// more memory on it than on a small stack, even in the language server's pool of workers.
pub const ANALYSIS_STACK_BYTES: usize = 512 << 20;

#[cfg(test)]
mod eval_tests;
