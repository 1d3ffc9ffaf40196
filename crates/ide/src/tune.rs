//! Tile recommendation: which values of a kernel's tunable meta parameters to use, ranked by the
//! roofline estimate without running anything.
//!
//! A parameter is *tunable* when it shapes tiles only: changing it leaves every tensor parameter's
//! shape and dtype as they were, but changes the kernel (its buffers, threads or stages). That is
//! found by instantiating the kernel with the parameter doubled and halved, so it works for any
//! kernel, not a fixed template; no parameter name is special. Each tunable parameter gets a role
//! from what it changed (the launch's threads, a pipeline's stages, or tile shapes), and the role
//! decides which values are tried.
//!
//! Every candidate goes through tilec's own analyses (evaluation, layout inference, checks,
//! resources): one that fails them is rejected with the reason, the rest are ranked by the roofline
//! estimate ([`tilec_db::roofline_estimate`]). TileLang's recommender (Carver) works on a separate
//! template of the operator and cannot reject a configuration the real kernel fails on.

use std::collections::BTreeSet;
use std::path::Path;

use tilec_db::{
    Db, Estimate, Instance, Workload, instance_checks, kernel_positions, kernel_world, layouts,
    resources, roofline_estimate, workload,
};
use tilec_ir::{Code, ConstValue, LoopKind, Severity, Target, World};
use tilec_passes::hardware::GpuModel;

/// What a tunable parameter controls, which decides the values tried for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParamRole {
    /// The threads of a launch: 64 to 512.
    Threads,
    /// A pipeline's `num_stages`: 1 to 4.
    Stages,
    /// A tile extent (block sizes, split factors): powers of two around the current value.
    Tile,
}

impl ParamRole {
    pub fn name(self) -> &'static str {
        match self {
            ParamRole::Threads => "threads",
            ParamRole::Stages => "pipeline stages",
            ParamRole::Tile => "tile size",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TunableParam {
    pub name: String,
    pub role: ParamRole,
    pub current: i64,
}

/// One configuration: the tunable parameters' values, in the order of [`Recommendation::params`].
pub type Config = Vec<(String, i64)>;

#[derive(Clone, Debug)]
pub struct RankedCandidate {
    pub config: Config,
    pub estimate: Estimate,
    pub workload: Workload,
}

#[derive(Clone, Debug)]
pub struct RejectedCandidate {
    pub config: Config,
    pub reason: String,
}

/// Where a ranking's candidates came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CandidateSource {
    /// Values around the current ones, for each tunable parameter.
    Enumerated,
    /// The kernel's `@autotune(configs=...)` list, of this many configurations.
    Autotune(usize),
    /// The kernel has `@autotune` configs that cannot be evaluated (why); enumerated instead.
    AutotuneUnreadable(String),
}

/// The ranking for one instance on one GPU model.
#[derive(Clone, Debug)]
pub struct Recommendation {
    pub gpu: String,
    pub source: CandidateSource,
    pub params: Vec<TunableParam>,
    /// Fastest estimate first.
    pub ranked: Vec<RankedCandidate>,
    pub rejected: Vec<RejectedCandidate>,
}

impl Recommendation {
    /// The instance's own configuration: each parameter's current value.
    pub fn current_config(&self) -> Config {
        self.params
            .iter()
            .map(|p| (p.name.clone(), p.current))
            .collect()
    }

    /// The instance's own configuration's ranking, when it passed tilec's analyses.
    pub fn current(&self) -> Option<&RankedCandidate> {
        let current = self.current_config();
        self.ranked.iter().find(|c| c.config == current)
    }

    /// How many candidates were analysed.
    pub fn analysed(&self) -> usize {
        self.ranked.len() + self.rejected.len()
    }
}

/// The parameters of `instance` that only shape tiles, with their roles.
pub fn tunable_params(db: &dyn Db, instance: Instance<'_>) -> Vec<TunableParam> {
    let base = kernel_world(db, instance);
    if base.incomplete {
        return Vec::new();
    }
    let mut params = Vec::new();
    for (name, value) in &base.args {
        let ConstValue::Int(current) = *value else {
            continue;
        };
        if current <= 0 {
            continue;
        }
        let mut roles = Vec::new();
        for probe in [current * 2, current / 2] {
            if probe <= 0 || probe == current {
                continue;
            }
            let world = kernel_world(db, with_args(db, instance, &[(name.clone(), probe)]));
            roles.push(role_of_change(base, world));
        }
        // Tunable only if no probe touched a tensor's signature and some probe changed the kernel.
        let role = roles
            .iter()
            .all(Option::is_some)
            .then(|| roles.into_iter().flatten().flatten().next())
            .flatten();
        if let Some(role) = role {
            params.push(TunableParam {
                name: name.clone(),
                role,
                current,
            });
        }
    }
    params
}

/// `None` when `changed` alters a tensor parameter (not a tile parameter); `Some(None)` when it
/// changes nothing that matters; `Some(Some(role))` otherwise.
fn role_of_change(base: &World, changed: &World) -> Option<Option<ParamRole>> {
    if changed.incomplete || signature(base) != signature(changed) {
        return None;
    }
    let threads =
        |w: &World| -> Vec<i64> { w.launches.iter().map(|(_, l)| l.thread_count()).collect() };
    if threads(base) != threads(changed) {
        return Some(Some(ParamRole::Threads));
    }
    if stages(base) != stages(changed) {
        return Some(Some(ParamRole::Stages));
    }
    if shapes(base) != shapes(changed) || grid(base) != grid(changed) {
        return Some(Some(ParamRole::Tile));
    }
    Some(None)
}

/// Shapes and dtypes of the tensor parameters: what a caller passes.
fn signature(world: &World) -> Vec<(Option<Vec<i64>>, Option<tilec_ir::DType>)> {
    world
        .params
        .iter()
        .map(|&p| (world.const_shape(p), world.dtypes.get(p).copied()))
        .collect()
}

fn stages(world: &World) -> Vec<i64> {
    world
        .loops
        .iter()
        .filter_map(|(_, info)| match info.kind {
            LoopKind::Pipelined { num_stages } => Some(num_stages),
            _ => None,
        })
        .collect()
}

fn shapes(world: &World) -> Vec<Option<Vec<i64>>> {
    world.entities().map(|e| world.const_shape(e)).collect()
}

fn grid(world: &World) -> Vec<Option<i64>> {
    world
        .launches
        .iter()
        .flat_map(|(_, l)| l.grid.iter().map(|&e| world.exprs.as_int(e)))
        .collect()
}

/// `instance` with some arguments replaced (or added, for parameters left at their defaults).
pub fn with_args<'db>(
    db: &'db dyn Db,
    instance: Instance<'db>,
    overrides: &[(String, i64)],
) -> Instance<'db> {
    let mut args = instance.args(db).clone();
    for (name, value) in overrides {
        match args.iter_mut().find(|(arg, _)| arg == name) {
            Some(slot) => slot.1 = ConstValue::Int(*value),
            None => args.push((name.clone(), ConstValue::Int(*value))),
        }
    }
    Instance::new(db, instance.kernel(db), instance.index(db), args)
}

/// The values tried for a parameter.
fn values_for(param: &TunableParam, tile_params: usize) -> Vec<i64> {
    let mut values: BTreeSet<i64> = BTreeSet::new();
    values.insert(param.current);
    match param.role {
        ParamRole::Threads => values.extend([64, 128, 256, 512]),
        ParamRole::Stages => values.extend([1, 2, 3, 4]),
        ParamRole::Tile => {
            // Two powers of two either side when there are few tile parameters, one otherwise,
            // so the product stays in the hundreds.
            let span = if tile_params <= 2 { 2 } else { 1 };
            for shift in 1..=span {
                values.insert(param.current << shift);
                if param.current >> shift >= 1 {
                    values.insert(param.current >> shift);
                }
            }
        }
    }
    values.into_iter().collect()
}

/// Ranks the tunable configurations of `instance` on `gpu`: the kernel's `@autotune` configs when
/// it declares them, values around the current ones otherwise. That search runs in two phases:
/// tile sizes and threads together (they decide registers per thread), then the stages of the
/// best few, since stages change shared memory and latency hiding but not the tile.
pub fn recommend(db: &dyn Db, instance: Instance<'_>, gpu: &GpuModel) -> Recommendation {
    let source = match tilec_db::autotune_configs(db, instance) {
        None => CandidateSource::Enumerated,
        Some(Ok(configs)) => return recommend_declared(db, instance, gpu, &configs),
        Some(Err(why)) => CandidateSource::AutotuneUnreadable(why),
    };
    recommend_enumerated(db, instance, gpu, source)
}

/// Ranks exactly the configurations of the kernel's `@autotune` decorator (plus the current
/// one). Their parameters are the decorator's keys; a value that is not an int rejects its
/// configuration, since tile parameters are ints.
fn recommend_declared(
    db: &dyn Db,
    instance: Instance<'_>,
    gpu: &GpuModel,
    configs: &[tilec_frontend::AutotuneConfig],
) -> Recommendation {
    let world = kernel_world(db, instance);
    let detected = tunable_params(db, instance);
    let mut params: Vec<TunableParam> = Vec::new();
    for (name, _) in configs.iter().flatten() {
        if params.iter().any(|p| &p.name == name) {
            continue;
        }
        let current = world
            .args
            .iter()
            .find(|(arg, _)| arg == name)
            .and_then(|(_, v)| match v {
                ConstValue::Int(value) => Some(*value),
                _ => None,
            });
        let role = detected
            .iter()
            .find(|p| &p.name == name)
            .map_or(ParamRole::Tile, |p| p.role);
        params.push(TunableParam {
            name: name.clone(),
            role,
            current: current.unwrap_or(0),
        });
    }
    let mut recommendation = Recommendation {
        gpu: gpu.name.clone(),
        source: CandidateSource::Autotune(configs.len()),
        params: params.clone(),
        ranked: Vec::new(),
        rejected: Vec::new(),
    };
    let current: Config = params.iter().map(|p| (p.name.clone(), p.current)).collect();
    let mut seen: BTreeSet<Config> = BTreeSet::new();
    for declared in configs {
        let mut config = current.clone();
        let mut not_int = None;
        for (name, value) in declared {
            match (value, config.iter_mut().find(|(n, _)| n == name)) {
                (ConstValue::Int(v), Some(slot)) => slot.1 = *v,
                _ => not_int = Some(name.clone()),
            }
        }
        match not_int {
            Some(name) => recommendation.rejected.push(RejectedCandidate {
                config,
                reason: format!("`{name}` is not an int: tilec tunes integer tile parameters"),
            }),
            None => evaluate(db, instance, gpu, config, &mut seen, &mut recommendation),
        }
    }
    evaluate(db, instance, gpu, current, &mut seen, &mut recommendation);
    finish(recommendation)
}

/// Ranks values around the current ones: see [`recommend`].
fn recommend_enumerated(
    db: &dyn Db,
    instance: Instance<'_>,
    gpu: &GpuModel,
    source: CandidateSource,
) -> Recommendation {
    const KEPT_FOR_STAGES: usize = 8;
    let params = tunable_params(db, instance);
    let tile_params = params.iter().filter(|p| p.role == ParamRole::Tile).count();
    let mut recommendation = Recommendation {
        gpu: gpu.name.clone(),
        source,
        params: params.clone(),
        ranked: Vec::new(),
        rejected: Vec::new(),
    };
    let current: Config = params.iter().map(|p| (p.name.clone(), p.current)).collect();
    let first: Vec<Config> = product(&params, tile_params, |p| p.role != ParamRole::Stages);
    let mut seen: BTreeSet<Config> = BTreeSet::new();
    for config in first {
        evaluate(db, instance, gpu, config, &mut seen, &mut recommendation);
    }
    sort_ranked(&mut recommendation.ranked, &current);
    let best: Vec<Config> = recommendation
        .ranked
        .iter()
        .take(KEPT_FOR_STAGES)
        .map(|c| c.config.clone())
        .collect();
    for config in best {
        for stage_config in vary_stages(&params, &config) {
            evaluate(
                db,
                instance,
                gpu,
                stage_config,
                &mut seen,
                &mut recommendation,
            );
        }
    }
    evaluate(db, instance, gpu, current, &mut seen, &mut recommendation);
    finish(recommendation)
}

/// Sorts the ranking once every candidate is in.
fn finish(mut recommendation: Recommendation) -> Recommendation {
    let current = recommendation.current_config();
    sort_ranked(&mut recommendation.ranked, &current);
    recommendation
}

/// Every combination of the values of the parameters `include` selects, the others at their
/// current values.
fn product(
    params: &[TunableParam],
    tile_params: usize,
    include: impl Fn(&TunableParam) -> bool,
) -> Vec<Config> {
    let mut configs: Vec<Config> = vec![Vec::new()];
    for param in params {
        let values = if include(param) {
            values_for(param, tile_params)
        } else {
            vec![param.current]
        };
        configs = configs
            .into_iter()
            .flat_map(|prefix| {
                values.iter().map(move |&v| {
                    let mut next = prefix.clone();
                    next.push((param.name.clone(), v));
                    next
                })
            })
            .collect();
    }
    configs
}

fn vary_stages(params: &[TunableParam], config: &Config) -> Vec<Config> {
    let mut configs = vec![config.clone()];
    for (index, param) in params.iter().enumerate() {
        if param.role != ParamRole::Stages {
            continue;
        }
        configs = configs
            .into_iter()
            .flat_map(|base| {
                values_for(param, 0).into_iter().map(move |v| {
                    let mut next = base.clone();
                    if let Some(slot) = next.get_mut(index) {
                        slot.1 = v;
                    }
                    next
                })
            })
            .collect();
    }
    configs
}

/// Estimates within this fraction of each other are ties: the model cannot tell them apart.
pub const TIE: f64 = 0.01;

/// Fastest estimate first; ties (within [`TIE`] of the fastest in their group) ordered by how
/// little they change the current configuration, so the model never recommends a change it
/// cannot justify.
fn sort_ranked(ranked: &mut [RankedCandidate], current: &Config) {
    ranked.sort_by(|a, b| a.estimate.seconds.total_cmp(&b.estimate.seconds));
    let mut start = 0;
    while start < ranked.len() {
        let limit = ranked[start].estimate.seconds * (1.0 + TIE);
        let end = ranked[start..]
            .iter()
            .position(|c| c.estimate.seconds > limit)
            .map_or(ranked.len(), |offset| start + offset);
        ranked[start..end]
            .sort_by(|a, b| distance(&a.config, current).total_cmp(&distance(&b.config, current)));
        start = end;
    }
}

/// How far `config` is from `current`: the sum of |log2| of each value's ratio.
fn distance(config: &Config, current: &Config) -> f64 {
    config
        .iter()
        .zip(current)
        .map(|((_, a), (_, b))| ((*a).max(1) as f64 / (*b).max(1) as f64).log2().abs())
        .sum()
}

/// Analyses one configuration (once) and files it as ranked or rejected.
fn evaluate(
    db: &dyn Db,
    instance: Instance<'_>,
    gpu: &GpuModel,
    config: Config,
    seen: &mut BTreeSet<Config>,
    into: &mut Recommendation,
) {
    if !seen.insert(config.clone()) {
        return;
    }
    let candidate = with_args(db, instance, &config);
    let verdict = rejection(db, candidate).map_or_else(
        || {
            let estimate = roofline_estimate(db, candidate, gpu)?;
            match workload(db, candidate).as_ref() {
                Ok(work) => Ok((estimate, work.clone())),
                Err(why) => Err(why.clone()),
            }
        },
        Err,
    );
    match verdict {
        Ok((estimate, workload)) => into.ranked.push(RankedCandidate {
            config,
            estimate,
            workload,
        }),
        Err(reason) => into.rejected.push(RejectedCandidate { config, reason }),
    }
}

/// Why tilec's own analyses refuse a configuration: the first error, or register pressure (the
/// kernel would spill).
fn rejection(db: &dyn Db, instance: Instance<'_>) -> Option<String> {
    let positions = kernel_positions(db, instance);
    let mut all = positions
        .diagnostics
        .iter()
        .chain(instance_checks(db, instance))
        .chain(&layouts(db, instance).diagnostics)
        .chain(&resources(db, instance).diagnostics);
    let found = all.find(|d| d.severity == Severity::Error || d.code == Code::RegisterPressure);
    if let Some(diagnostic) = found {
        return Some(format!(
            "{}: {}",
            diagnostic.code.name(),
            diagnostic.message
        ));
    }
    // Instances made here have no call site, so the front end's own diagnostics (which need one
    // for their positions) are not available; the world still says whether evaluation finished.
    kernel_world(db, instance)
        .incomplete
        .then(|| "the kernel could not be evaluated with these values".to_owned())
}

/// A measured winner from the tuning cache, as the editor passes it in (this crate does no I/O).
#[derive(Clone, Debug, PartialEq)]
pub struct MeasuredWinner {
    pub config: Config,
    pub device: String,
    pub median_ms: f64,
    /// Every configuration measured, with its median in milliseconds.
    pub measured: Vec<(Config, f64)>,
}

/// Where the editor finds what `tilec tune` measured. The tuning store is files on disk, and this
/// crate does no I/O, so the front door that reads them (the `tilec` binary, through
/// `tilec_runtime::tuned`) implements this and hands it to the language server, which passes it
/// to [`editor_tune_lenses`].
pub trait TunedResults: Send + Sync + std::fmt::Debug {
    /// The winner `tilec tune` stored for the instance of `kernel` with `args` (as written at its
    /// call site) in `file`, measured on a GPU of `target`; `None` when it stored none.
    fn winner(
        &self,
        file: &Path,
        kernel: &str,
        args: &[(String, ConstValue)],
        target: Target,
    ) -> Option<MeasuredWinner>;
}

/// The tuning lenses the editor shows for `file` when it compiles for `target`: the
/// recommendation on the target's default hardware model and, where `tuned` has one, the winner
/// `tilec tune` measured on a GPU of that target. None for a file without TileLang, or a target
/// without a hardware model.
pub fn editor_tune_lenses(
    db: &dyn Db,
    file: tilec_db::SourceFile,
    target: Target,
    tuned: Option<&dyn TunedResults>,
) -> Vec<TuneLens> {
    if !tilec_db::outline(db, file).uses_tilelang {
        return Vec::new();
    }
    let Some(gpu) = GpuModel::default_for(target) else {
        return Vec::new();
    };
    let path = file.path(db);
    let measured = |instance: Instance<'_>| {
        tuned?.winner(
            path,
            instance.kernel(db).name(db),
            instance.args(db),
            target,
        )
    };
    tune_lenses(db, file, &gpu, &measured)
}

/// A code lens over a tunable instance's call site: what the model recommends, or what
/// `tilec tune` measured fastest, with the edits that rewrite the call's arguments to it.
#[derive(Clone, Debug, PartialEq)]
pub struct TuneLens {
    pub span: tilec_ir::Span,
    pub title: String,
    pub edits: Vec<crate::TextEdit>,
}

/// The tuning lenses of `file`: for each instance instantiated at a call site with tunable
/// parameters, the model's top recommendation on `gpu` and, when `measured` finds one, the
/// measured winner; each only where it changes the call's values and saves at least
/// [`WORTH_CHANGING`] of the time, since a lens on every call would be noise.
pub fn tune_lenses(
    db: &dyn Db,
    file: tilec_db::SourceFile,
    gpu: &GpuModel,
    measured: &dyn Fn(Instance<'_>) -> Option<MeasuredWinner>,
) -> Vec<TuneLens> {
    let mut lenses = Vec::new();
    for &instance in tilec_db::instances(db, file) {
        let tilec_frontend::InstanceOrigin::CallSite(span) =
            tilec_db::instance_origin(db, instance)
        else {
            continue;
        };
        let recommendation = recommend(db, instance, gpu);
        let (Some(best), Some(current)) = (recommendation.ranked.first(), recommendation.current())
        else {
            continue;
        };
        let edits = call_edits(db, file, instance, span, &best.config);
        if !edits.is_empty() && worth_changing(best.estimate.seconds, current.estimate.seconds) {
            let title = format!(
                "tilec: recommend {} (est. {} vs {} now on the {}) - apply",
                changed(&best.config, &current.config),
                short_ms(best.estimate.seconds * 1e3),
                short_ms(current.estimate.seconds * 1e3),
                gpu.name
            );
            lenses.push(TuneLens { span, title, edits });
        }
        if let Some(lens) = measured_lens(db, file, instance, span, &current.config, measured) {
            lenses.push(lens);
        }
    }
    lenses
}

/// The lens of the winner `tilec tune` measured for `instance`, when it is another configuration
/// than the call's and, where the call's own configuration was measured too, at least
/// [`WORTH_CHANGING`] faster than it.
fn measured_lens(
    db: &dyn Db,
    file: tilec_db::SourceFile,
    instance: Instance<'_>,
    span: tilec_ir::Span,
    current: &Config,
    measured: &dyn Fn(Instance<'_>) -> Option<MeasuredWinner>,
) -> Option<TuneLens> {
    let winner = measured(instance)?;
    let edits = call_edits(db, file, instance, span, &winner.config);
    if edits.is_empty() {
        return None;
    }
    let now = winner
        .measured
        .iter()
        .find(|(config, _)| config == current)
        .map(|(_, ms)| *ms);
    if now.is_some_and(|ms| !worth_changing(winner.median_ms, ms)) {
        return None;
    }
    let versus = now.map_or(String::new(), |ms| format!(" vs {} now", short_ms(ms)));
    Some(TuneLens {
        span,
        title: format!(
            "tilec tune: {} measured fastest on {}: {}{versus} - apply",
            changed(&winner.config, current),
            winner.device,
            short_ms(winner.median_ms)
        ),
        edits,
    })
}

/// The least saving, as a fraction of the current time, that a lens offers a change for: below
/// it the estimate (or the measurement's noise) does not justify editing the call.
const WORTH_CHANGING: f64 = 0.05;

/// Whether taking `proposed` instead of `now` (both times, in one unit) saves at least
/// [`WORTH_CHANGING`] of the time.
fn worth_changing(proposed: f64, now: f64) -> bool {
    proposed <= now * (1.0 - WORTH_CHANGING)
}

/// The edits that give the call at `span` the values of `config`.
fn call_edits(
    db: &dyn Db,
    file: tilec_db::SourceFile,
    instance: Instance<'_>,
    span: tilec_ir::Span,
    config: &Config,
) -> Vec<crate::TextEdit> {
    let params: Vec<String> = kernel_world(db, instance)
        .args
        .iter()
        .map(|(name, _)| name.clone())
        .collect();
    tilec_frontend::set_call_arguments(file.text(db), span, &params, config)
        .unwrap_or_default()
        .into_iter()
        .map(|edit| crate::TextEdit {
            span: edit.span,
            new_text: edit.new_text,
        })
        .collect()
}

/// `name=value` for each value of `config` that differs from `current`.
fn changed(config: &Config, current: &Config) -> String {
    let parts: Vec<String> = config
        .iter()
        .filter(|entry| !current.contains(entry))
        .map(|(name, value)| format!("{name}={value}"))
        .collect();
    parts.join(" ")
}

fn short_ms(ms: f64) -> String {
    if ms < 1.0 {
        format!("{:.1} µs", ms * 1e3)
    } else {
        format!("{ms:.2} ms")
    }
}
