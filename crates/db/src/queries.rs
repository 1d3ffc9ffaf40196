//! Inputs and tracked queries, from a file's text to each instance's world and checks.

use std::path::PathBuf;
use std::sync::Arc;

use tilec_frontend::{
    ContextSource, InstanceOrigin, InstanceSpec, KernelPositions, KernelSource, ManifestInstance,
    Outline, ParsedModule,
};
use tilec_ir::{ConstValue, Diagnostic, Target, World};
use tilec_passes::layout::Layouts;
use tilec_passes::resources::Resources;

use crate::Db;
use crate::imports::surroundings;

/// A Python source file and the tilec.toml instances that apply to it.
#[salsa::input(debug)]
pub struct SourceFile {
    #[returns(ref)]
    pub path: PathBuf,
    #[returns(ref)]
    pub text: String,
    #[returns(ref)]
    pub manifest: Vec<ManifestInstance>,
}

/// Settings that change rarely (set with high durability): the target, and pass configs that
/// apply to every kernel (from tilec.toml), over each kernel's own `pass_configs`.
#[salsa::input(singleton, debug)]
pub struct Settings {
    #[returns(copy)]
    pub target: Target,
    #[returns(ref)]
    pub pass_configs: Vec<(String, ConstValue)>,
}

/// The target of the current settings (sm_90 when none are set).
pub fn target(db: &dyn Db) -> Target {
    Settings::try_get(db).map_or(Target::default(), |settings| settings.target(db))
}

/// The recovered syntax tree. `no_eq`: every node carries byte offsets, so a parse is never equal
/// after an edit; cutoff happens one level down, on position-free results.
#[salsa::tracked(returns(ref), no_eq)]
pub fn parse(db: &dyn Db, file: SourceFile) -> ParsedModule {
    ParsedModule::parse(file.text(db))
}

#[salsa::tracked(returns(ref))]
pub fn outline(db: &dyn Db, file: SourceFile) -> Outline {
    tilec_frontend::outline(parse(db, file), file.text(db))
}

/// A kernel definition of a file, identified by its name. Its source is a tracked field, so a change
/// to one kernel invalidates only the queries that read that kernel's source.
#[salsa::tracked(debug)]
pub struct KernelDef<'db> {
    #[returns(copy)]
    pub file: SourceFile,
    #[returns(ref)]
    pub name: String,
    #[tracked]
    #[returns(ref)]
    pub source: KernelSource,
}

#[salsa::tracked(returns(ref))]
pub fn kernel_defs(db: &dyn Db, file: SourceFile) -> Vec<KernelDef<'_>> {
    outline(db, file)
        .kernels
        .iter()
        .map(|kernel| KernelDef::new(db, file, kernel.name().to_owned(), kernel.source.clone()))
        .collect()
}

/// The module-level context kernels may use, in normal form.
#[salsa::tracked(returns(ref))]
pub fn module_context(db: &dyn Db, file: SourceFile) -> ContextSource {
    outline(db, file).context.clone()
}

/// One kernel instance: a kernel, its index among that kernel's instances, and its arguments.
#[salsa::interned(debug)]
pub struct Instance<'db> {
    #[returns(copy)]
    pub kernel: KernelDef<'db>,
    #[returns(copy)]
    pub index: u32,
    #[returns(ref)]
    pub args: Vec<(String, ConstValue)>,
}

/// The instances of a file as the front end finds them, in kernel order, with where each came from
/// (parallel to [`instances`]).
#[salsa::tracked(returns(ref))]
pub fn instance_origins(db: &dyn Db, file: SourceFile) -> Vec<InstanceSpec> {
    tilec_frontend::find_instances(
        parse(db, file),
        outline(db, file),
        file.manifest(db),
        surroundings(db, file),
        &|| db.unwind_if_revision_cancelled(),
    )
}

#[salsa::tracked(returns(ref))]
pub fn instances(db: &dyn Db, file: SourceFile) -> Vec<Instance<'_>> {
    let defs = kernel_defs(db, file);
    // By name, through a map: a file may define thousands of kernels.
    let positions: std::collections::HashMap<&str, usize> = defs
        .iter()
        .enumerate()
        .map(|(position, def)| (def.name(db).as_str(), position))
        .collect();
    let mut counters: Vec<u32> = vec![0; defs.len()];
    let mut out = Vec::new();
    for spec in instance_origins(db, file) {
        let Some(&position) = positions.get(spec.kernel.as_str()) else {
            continue;
        };
        let index = counters[position];
        counters[position] += 1;
        out.push(Instance::new(db, defs[position], index, spec.args.clone()));
    }
    out
}

/// How the front end found an instance (its call site, if any).
pub fn instance_spec<'db>(db: &'db dyn Db, instance: Instance<'db>) -> Option<&'db InstanceSpec> {
    let file = instance.kernel(db).file(db);
    let position = instances(db, file)
        .iter()
        .position(|candidate| *candidate == instance)?;
    instance_origins(db, file).get(position)
}

/// Where an instance came from (its call site, if any).
pub fn instance_origin<'db>(db: &'db dyn Db, instance: Instance<'db>) -> InstanceOrigin {
    instance_spec(db, instance).map_or(InstanceOrigin::Defaults, |spec| spec.origin.clone())
}

/// What a build borrows from the query layer: salsa's cancellation, and the checks' count of
/// shared memory to judge the sizes it assumed for a generic instance.
fn build_hooks(cancel: &dyn Fn()) -> tilec_frontend::BuildHooks<'_> {
    tilec_frontend::BuildHooks {
        cancel,
        fits: &tilec_passes::check::fits_shared_memory,
    }
}

/// The position-free world of an instance: what every pass reads.
#[salsa::tracked(returns(ref))]
pub fn kernel_world<'db>(db: &'db dyn Db, instance: Instance<'db>) -> Arc<World> {
    let kernel = instance.kernel(db);
    let context = module_context(db, kernel.file(db));
    Arc::new(tilec_frontend::build_world(
        context,
        kernel.source(db),
        instance.args(db),
        surroundings(db, kernel.file(db)),
        &build_hooks(&|| db.unwind_if_revision_cancelled()),
    ))
}

/// Where each entity of the instance's world was written, and the front end's diagnostics.
#[salsa::tracked(returns(ref))]
pub fn kernel_positions<'db>(db: &'db dyn Db, instance: Instance<'db>) -> KernelPositions {
    let file = instance.kernel(db).file(db);
    if let Some(spec) = instance_spec(db, instance) {
        return tilec_frontend::build_positions(
            parse(db, file),
            outline(db, file),
            spec,
            surroundings(db, file),
            &build_hooks(&|| db.unwind_if_revision_cancelled()),
        );
    }
    // An instance that `--with` or `tilec tune` derived from one of the file's is positioned by
    // evaluating its own arguments, from the call site of the instance it was derived from, so
    // that its diagnostics keep their ranges.
    let kernel = instance.kernel(db);
    let base = instances(db, file)
        .iter()
        .position(|c| c.kernel(db) == kernel && c.index(db) == instance.index(db))
        .and_then(|position| instance_origins(db, file).get(position));
    let mut spec = base.cloned().unwrap_or_else(|| InstanceSpec {
        kernel: kernel.name(db).clone(),
        args: Vec::new(),
        origin: InstanceOrigin::Defaults,
        unevaluated: Vec::new(),
    });
    spec.args = instance.args(db).clone();
    tilec_frontend::build_positions(
        parse(db, file),
        outline(db, file),
        &spec,
        surroundings(db, file),
        &build_hooks(&|| db.unwind_if_revision_cancelled()),
    )
}

/// The pass configs an instance is compiled with: its `@tilelang.jit(pass_configs=...)`, with the
/// project-wide settings taking precedence key by key.
#[salsa::tracked(returns(ref))]
pub fn effective_pass_configs<'db>(
    db: &'db dyn Db,
    instance: Instance<'db>,
) -> Vec<(String, ConstValue)> {
    let mut configs = kernel_world(db, instance).pass_configs.clone();
    if let Some(settings) = Settings::try_get(db) {
        for (key, value) in settings.pass_configs(db) {
            configs.retain(|(existing, _)| existing != key);
            configs.push((key.clone(), value.clone()));
        }
    }
    configs
}

/// The architecture and Hopper switches an instance is compiled with: the configured target under
/// its effective pass configs.
#[salsa::tracked]
pub fn codegen_options<'db>(
    db: &'db dyn Db,
    instance: Instance<'db>,
) -> tilec_passes::CodegenOptions {
    tilec_passes::CodegenOptions::new(target(db), effective_pass_configs(db, instance))
}

/// The inferred layouts of an instance's fragments and parallel loops, with their provenance.
#[salsa::tracked(returns(ref))]
pub fn layouts<'db>(db: &'db dyn Db, instance: Instance<'db>) -> Arc<Layouts> {
    Arc::new(tilec_passes::layout::infer_layouts(
        kernel_world(db, instance),
        *codegen_options(db, instance),
        tilec_ir::Cancellation::new(&|| db.unwind_if_revision_cancelled()),
    ))
}

/// How each laid-out loop's iterations go to threads: what lowering needs, apart from `layouts`
/// so that diagnostics and hovers do not wait for it.
#[salsa::tracked(returns(ref))]
pub fn loop_plans<'db>(
    db: &'db dyn Db,
    instance: Instance<'db>,
) -> Arc<std::collections::BTreeMap<tilec_ir::EntityId, tilec_passes::layout::LoopPlan>> {
    Arc::new(tilec_passes::layout::plan_loops(layouts(db, instance)))
}

/// Registers per fragment and per launch from the layouts, shared memory and occupancy for the
/// configured target.
#[salsa::tracked(returns(ref))]
pub fn resources<'db>(db: &'db dyn Db, instance: Instance<'db>) -> Arc<Resources> {
    Arc::new(tilec_passes::resources::estimate_resources(
        kernel_world(db, instance),
        layouts(db, instance),
        target(db),
    ))
}

/// The semantic checks of an instance for the configured target.
#[salsa::tracked(returns(ref))]
pub fn instance_checks<'db>(db: &'db dyn Db, instance: Instance<'db>) -> Vec<Diagnostic> {
    tilec_passes::check_world(kernel_world(db, instance), target(db))
}

/// The thread programs of an instance (one per launch), or why it cannot be lowered. Lowering
/// failures are not file diagnostics: a kernel that cannot run yet still checks clean. An
/// instance whose checks report errors is not lowered at all: those errors are why, and lowering
/// may assume what the checks establish (a tile that fits in shared memory, say, rather than one
/// of 2^45 elements it would enumerate).
#[salsa::tracked(returns(ref))]
pub fn thread_programs<'db>(
    db: &'db dyn Db,
    instance: Instance<'db>,
) -> Arc<Result<Vec<tilec_ir::ThreadProgram>, Vec<Diagnostic>>> {
    lower_checked(
        db,
        instance,
        instance_checks(db, instance),
        layouts(db, instance),
        *codegen_options(db, instance),
    )
}

/// What lowering an instance gives: its thread programs, or the errors that stop it.
pub type Lowered = Arc<Result<Vec<tilec_ir::ThreadProgram>, Vec<Diagnostic>>>;

/// Lowers an instance's world with `layouts` and `options`, unless `checks` (for the same target)
/// report an error: the one body of [`thread_programs`] and [`thread_programs_for`].
fn lower_checked(
    db: &dyn Db,
    instance: Instance<'_>,
    checks: &[Diagnostic],
    layouts: &Layouts,
    options: tilec_passes::CodegenOptions,
) -> Lowered {
    let errors: Vec<Diagnostic> = checks
        .iter()
        .filter(|d| d.severity.stops_analysis())
        .cloned()
        .collect();
    if !errors.is_empty() {
        return Arc::new(Err(errors));
    }
    Arc::new(tilec_passes::lower::lower_world(
        kernel_world(db, instance),
        layouts,
        options,
        tilec_ir::Cancellation::new(&|| db.unwind_if_revision_cancelled()),
    ))
}

/// The thread programs of an instance lowered for `target`: [`thread_programs`] itself when
/// `target` is the configured one (so the memoized lowering is shared), otherwise the same steps
/// (checks, options, layouts, lowering) for that target, memoized per instance and target.
pub fn thread_programs_for<'db>(
    db: &'db dyn Db,
    instance: Instance<'db>,
    target: Target,
) -> &'db Lowered {
    if target == self::target(db) {
        thread_programs(db, instance)
    } else {
        thread_programs_for_target(db, instance, target)
    }
}

/// The options an instance is compiled with for `target`: [`codegen_options`] for a target that
/// need not be the configured one.
#[salsa::tracked]
pub fn codegen_options_for<'db>(
    db: &'db dyn Db,
    instance: Instance<'db>,
    target: Target,
) -> tilec_passes::CodegenOptions {
    tilec_passes::CodegenOptions::new(target, effective_pass_configs(db, instance))
}

/// [`layouts`] for a target other than the configured one.
#[salsa::tracked(returns(ref))]
fn layouts_for_target<'db>(
    db: &'db dyn Db,
    instance: Instance<'db>,
    target: Target,
) -> Arc<Layouts> {
    Arc::new(tilec_passes::layout::infer_layouts(
        kernel_world(db, instance),
        *codegen_options_for(db, instance, target),
        tilec_ir::Cancellation::new(&|| db.unwind_if_revision_cancelled()),
    ))
}

/// [`instance_checks`] for a target other than the configured one.
#[salsa::tracked(returns(ref))]
fn instance_checks_for_target<'db>(
    db: &'db dyn Db,
    instance: Instance<'db>,
    target: Target,
) -> Vec<Diagnostic> {
    tilec_passes::check_world(kernel_world(db, instance), target)
}

/// [`thread_programs`] for a target other than the configured one; see [`thread_programs_for`].
#[salsa::tracked(returns(ref))]
fn thread_programs_for_target<'db>(
    db: &'db dyn Db,
    instance: Instance<'db>,
    target: Target,
) -> Lowered {
    lower_checked(
        db,
        instance,
        instance_checks_for_target(db, instance, target),
        layouts_for_target(db, instance, target),
        *codegen_options_for(db, instance, target),
    )
}

/// The CUDA C of each launch of an instance, lowered and printed for `target`: the printer gets
/// the target the thread programs were lowered for (with that target's options), never another.
/// Keyed by instance and target, so two targets memoize side by side; `None` when the instance
/// does not lower for `target` ([`thread_programs_for`] says why). A caller that keeps the result
/// can tell an unchanged instance by the same `Arc` coming back: the query re-runs only when the
/// instance's thread programs (or the configured target) changed.
#[salsa::tracked(returns(ref))]
pub fn cuda_source<'db>(
    db: &'db dyn Db,
    instance: Instance<'db>,
    target: Target,
) -> Option<Arc<[String]>> {
    let programs = thread_programs_for(db, instance, target)
        .as_ref()
        .as_ref()
        .ok()?;
    Some(
        programs
            .iter()
            .map(|program| tilec_passes::cuda::emit_cuda(program, &target))
            .collect(),
    )
}

/// What the instance asks of any GPU (blocks, bytes, FLOPs, registers), for the roofline estimate
/// that ranks tile configurations; `Err` says why it cannot be known.
#[salsa::tracked(returns(ref))]
pub fn workload<'db>(
    db: &'db dyn Db,
    instance: Instance<'db>,
) -> Arc<Result<tilec_passes::roofline::Workload, String>> {
    Arc::new(tilec_passes::roofline::workload(
        kernel_world(db, instance),
        resources(db, instance),
    ))
}

/// The roofline estimate of an instance on `gpu`, from its memoized [`workload`]. Not a query of
/// its own: the estimate is arithmetic over the workload, and a hardware model (rates as floats)
/// cannot key one.
pub fn roofline_estimate(
    db: &dyn Db,
    instance: Instance<'_>,
    gpu: &tilec_passes::hardware::GpuModel,
) -> Result<tilec_passes::roofline::Estimate, String> {
    match workload(db, instance).as_ref() {
        Ok(work) => tilec_passes::roofline::estimate(work, gpu),
        Err(why) => Err(why.clone()),
    }
}

/// The configurations of the instance's kernel's `@autotune(configs=...)` decorator: `None`
/// without one, `Some(Err(why))` when they cannot be evaluated without running Python.
pub fn autotune_configs(
    db: &dyn Db,
    instance: Instance<'_>,
) -> Option<Result<Vec<tilec_frontend::AutotuneConfig>, String>> {
    let kernel = instance.kernel(db);
    let file = kernel.file(db);
    tilec_frontend::autotune_configs(
        parse(db, file),
        outline(db, file),
        kernel.name(db),
        surroundings(db, file),
    )
}
