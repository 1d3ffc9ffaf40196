//! Diagnostics of layout inference: conflicts with a concrete counterexample and a fix, races of
//! many iterations writing one element, and register pressure.

use tilec_ir::{
    Anchor, Code, Diagnostic, EntityId, EntityKind, Expr, ExprArena, ExprId, ExprProgram, Scope,
    VarId, World,
};

use super::derive::Witness;
use super::fragment::{FragmentLayout, for_each_chunk, for_each_point};
use super::infer::{Inferred, LoopView, Origin};
use super::validate::Misplaced;

fn element(world: &World, buffer: EntityId, index: &[i64]) -> String {
    let index: Vec<String> = index.iter().map(i64::to_string).collect();
    format!("{}[{}]", world.name(buffer), index.join(", "))
}

fn origin_words(world: &World, inferred: &Inferred) -> String {
    match &inferred.origin {
        Origin::Gemm => "`T.gemm` gives it the tensor-core accumulator layout".to_owned(),
        Origin::GemmOperand => {
            "`T.gemm` reads it as its A operand, in the tensor-core register layout".to_owned()
        }
        Origin::Annotation => "`T.annotate_layout` fixes it".to_owned(),
        Origin::Broadcast => "it is read at a constant index, so every thread holds it".to_owned(),
        Origin::ReadByEveryThread => {
            "it is read outside parallel loops, where every thread runs the read, so every thread \
             holds all of it"
                .to_owned()
        }
        Origin::Plan { vector } => format!("a loop planned with {vector}-wide vectors lays it out"),
        Origin::Propagated { from } => match world.kind(*from) {
            Some(EntityKind::Loop) => {
                "the `T.Parallel` loop that accesses it first lays it out".to_owned()
            }
            Some(EntityKind::TileOp) => "the `T.copy` that fills it lays it out".to_owned(),
            _ => format!("it follows the layout of `{}`", world.name(*from)),
        },
        Origin::Reduce { from } => format!("it is the result of reducing `{}`", world.name(*from)),
    }
}

/// One loop iteration needs elements two threads hold.
pub(super) fn conflict(
    world: &World,
    arena: &ExprArena,
    inferred: &Inferred,
    buffer: EntityId,
    statement: EntityId,
    witness: &Witness,
) -> Diagnostic {
    let name = world.name(buffer);
    let serial = witness
        .serial_var
        .map_or("an inner serial loop".to_owned(), |v| {
            format!("`{}`", arena.var_info(v).name)
        });
    let message = format!(
        "`{name}` is read with {serial} running serially inside this parallel loop, so one iteration needs both {} and {}; but {} (thread = {}), which puts them on threads {} and {}",
        element(world, buffer, &witness.first.0),
        element(world, buffer, &witness.second.0),
        origin_words(world, inferred),
        arena.display(inferred.layout.thread),
        witness.first.1,
        witness.second.1,
    );
    Diagnostic::error(Code::LayoutConflict, Anchor::Entity(statement), message)
        .with_related(Anchor::Entity(inferred.op), format!("`{name}`'s layout is fixed here"))
        .with_help(format!(
            "iterate {serial} with `T.Parallel` as well (`for i, j in T.Parallel(...)`), so each element is handled where it lives, or copy `{name}` to a shared buffer first (`T.copy({name}, {name}_shared)`) and read that"
        ))
}

/// The fragment access a loop makes on threads that do not hold the element (see
/// [`super::validate`]).
pub(super) struct MisplacedAccess<'a> {
    pub buffer: EntityId,
    pub inferred: &'a Inferred,
    pub statement: EntityId,
    pub loop_layout: &'a Inferred,
    pub misplaced: &'a Misplaced,
}

impl MisplacedAccess<'_> {
    pub(super) fn diagnostic(&self, world: &World, arena: &ExprArena) -> Diagnostic {
        let name = world.name(self.buffer);
        let at = element(world, self.buffer, &self.misplaced.element);
        let owners: Vec<String> = self.misplaced.owners.iter().map(i64::to_string).collect();
        let origin = origin_words(world, self.inferred);
        let formula = arena.display(self.inferred.layout.thread);
        let message = if self.misplaced.stale_owner {
            format!(
                "this loop writes {at}, but never on thread {}, which also holds it: {origin} (thread = {formula}), so that copy keeps a stale value",
                self.misplaced.thread,
            )
        } else {
            let names: Vec<String> = self
                .misplaced
                .variables
                .iter()
                .map(|&v| arena.var_info(v).name.clone())
                .collect();
            let values: Vec<String> = self
                .misplaced
                .iteration
                .iter()
                .map(i64::to_string)
                .collect();
            format!(
                "iteration ({}) = ({}) of this loop runs on thread {} and accesses {at}, but {origin} (thread = {formula}), which puts {at} on thread {}",
                names.join(", "),
                values.join(", "),
                self.misplaced.thread,
                owners.join(", "),
            )
        };
        Diagnostic::error(Code::LayoutConflict, Anchor::Entity(self.statement), message)
            .with_related(
                Anchor::Entity(self.inferred.op),
                format!("`{name}`'s layout is fixed here"),
            )
            .with_related(
                Anchor::Entity(self.loop_layout.op),
                format!("the loop's layout: {}", origin_words(world, self.loop_layout)),
            )
            .with_help(format!(
                "copy `{name}` to a shared buffer (`T.copy({name}, {name}_shared)`) and access that, or annotate a layout for one of the fragments (`T.annotate_layout`) that agrees with the other"
            ))
    }
}

/// Stores that several iterations of one parallel loop make to the same element.
pub(super) fn races(world: &World, loops: &[LoopView<'_>], arena: &ExprArena) -> Vec<Diagnostic> {
    let mut found = Vec::new();
    for view in loops {
        for &(buffer, indices, statement) in &view.writes {
            // A reducer's updates are combined, not overwritten (`T.alloc_reducer`); a local
            // buffer allocated in the loop's body is each iteration's own.
            if world.kind(statement) != Some(EntityKind::Store)
                || world.reducers.get(buffer).is_some()
                || allocated_within(world, buffer, view.entity)
                || found.iter().any(|(s, _)| *s == statement)
            {
                continue;
            }
            if let Some(diagnostic) = race(world, arena, view, buffer, indices, statement) {
                found.push((statement, diagnostic));
            }
        }
    }
    found.into_iter().map(|(_, d)| d).collect()
}

/// Whether the register buffer `buffer` is allocated inside `scope` (a `T.alloc_local` in a
/// `T.Parallel` body, or in a macro it calls): then every iteration has one of its own.
fn allocated_within(world: &World, buffer: EntityId, scope: EntityId) -> bool {
    if !matches!(world.scopes.get(buffer), Some(Scope::Local)) {
        return false;
    }
    let mut entity = buffer;
    while let Some(&parent) = world.parents.get(entity) {
        if parent == scope {
            return true;
        }
        entity = parent;
    }
    false
}

fn race(
    world: &World,
    arena: &ExprArena,
    view: &LoopView<'_>,
    buffer: EntityId,
    indices: &[ExprId],
    statement: EntityId,
) -> Option<Diagnostic> {
    let loop_var = |v: VarId| view.vars.contains(&v);
    if indices.iter().any(|&i| {
        arena
            .vars_of(i)
            .into_iter()
            .any(|v| !loop_var(v) && arena.var_info(v).extent.is_some() && !is_block_var(world, v))
    }) {
        return None;
    }
    if writes_each_element_once(arena, view, indices) {
        return None;
    }
    let mut program = ExprProgram::compile_zeroing(arena, view.vars, indices);
    // Every element written, one column per index, for the whole loop.
    let mut written: Vec<Vec<i64>> = vec![Vec::new(); indices.len()];
    let mut failed = false;
    for_each_chunk(view.shape, |_, columns, len| {
        let Some(batch) = program.run_batch(columns, len) else {
            failed = true;
            return false;
        };
        for (k, column) in written.iter_mut().enumerate() {
            column.extend_from_slice(batch.column(k));
        }
        true
    });
    if failed {
        return None;
    }
    let (element, count) = most_written(&written)?;
    if count < 2 {
        return None;
    }
    let message = format!(
        "{count} iterations of this `T.Parallel` loop write `{}`: which value is left depends on which thread writes last",
        self::element(world, buffer, &element),
    );
    Some(
        Diagnostic::warning(Code::DataRace, Anchor::Entity(statement), message)
            .with_help("reduce into it with `T.reduce_sum`/`T.reduce_max`, accumulate with `T.atomic_add`, or index the store with every loop variable"),
    )
}

/// The element written most often (the first in row-major order among equals) and its count.
/// Elements are counted in a dense table over their bounding box, which is small for any tile.
fn most_written(written: &[Vec<i64>]) -> Option<(Vec<i64>, u32)> {
    const MAX_BOX: i64 = 1 << 24;
    let bounds: Vec<(i64, i64)> = written
        .iter()
        .map(|column| Some((*column.iter().min()?, *column.iter().max()?)))
        .collect::<Option<_>>()?;
    let extents: Vec<i64> = bounds
        .iter()
        .map(|&(low, high)| high.checked_sub(low).and_then(|d| d.checked_add(1)))
        .collect::<Option<_>>()?;
    let volume = extents
        .iter()
        .try_fold(1i64, |acc, &e| acc.checked_mul(e))
        .filter(|&v| v <= MAX_BOX)?;
    let points = written.first().map_or(0, Vec::len);
    let mut ordinals = vec![0i64; points];
    for ((column, &(low, _)), &extent) in written.iter().zip(&bounds).zip(&extents) {
        for (ordinal, &index) in ordinals.iter_mut().zip(column) {
            *ordinal = *ordinal * extent + (index - low);
        }
    }
    let mut counts = vec![0u32; usize::try_from(volume).ok()?];
    for &ordinal in &ordinals {
        counts[usize::try_from(ordinal).ok()?] += 1;
    }
    let (best, &count) = counts
        .iter()
        .enumerate()
        .max_by_key(|&(ordinal, &count)| (count, std::cmp::Reverse(ordinal)))?;
    let mut rest = i64::try_from(best).ok()?;
    let mut element = vec![0i64; extents.len()];
    for ((slot, &extent), &(low, _)) in element.iter_mut().zip(&extents).zip(&bounds).rev() {
        *slot = low + rest % extent;
        rest /= extent;
    }
    Some((element, count))
}

/// The loop variable `v` when `index` is `v` plus terms without loop variables (block offsets such
/// as `by * 128 + i`), which makes the index a one-to-one function of `v`.
fn offset_loop_var(arena: &ExprArena, loop_vars: &[VarId], index: ExprId) -> Option<VarId> {
    let free_of_loop_vars = |e: ExprId| arena.vars_of(e).iter().all(|v| !loop_vars.contains(v));
    match *arena.get(index) {
        Expr::Var(var) if loop_vars.contains(&var) => Some(var),
        Expr::Add(a, b) if free_of_loop_vars(a) => offset_loop_var(arena, loop_vars, b),
        Expr::Add(a, b) if free_of_loop_vars(b) => offset_loop_var(arena, loop_vars, a),
        _ => None,
    }
}

/// Whether the store is indexed by distinct loop variables (each plus an offset free of loop
/// variables), one per dimension, that together are
/// every loop variable with more than one value: then each iteration writes its own element, and
/// no enumeration is needed.
fn writes_each_element_once(arena: &ExprArena, view: &LoopView<'_>, indices: &[ExprId]) -> bool {
    let mut used = Vec::with_capacity(indices.len());
    for &index in indices {
        match offset_loop_var(arena, view.vars, index) {
            Some(var) if !used.contains(&var) => used.push(var),
            _ => return false,
        }
    }
    view.vars
        .iter()
        .zip(view.shape)
        .all(|(var, &extent)| extent <= 1 || used.contains(var))
}

fn is_block_var(world: &World, var: VarId) -> bool {
    world
        .launches
        .iter()
        .any(|(_, launch)| launch.block_vars.contains(&var))
}

/// Validates a `T.annotate_layout` fragment before inference trusts it.
pub(super) struct AnnotationCheck {
    pub annotation: EntityId,
    pub buffer: EntityId,
    pub threads: i64,
}

impl AnnotationCheck {
    /// Why the annotated `layout` cannot be the buffer's layout, if it cannot: a thread outside
    /// the block, or two elements in one register of one thread. (An annotation of another shape
    /// is a `shape-mismatch` the checks report.)
    pub(super) fn problem(
        &self,
        world: &World,
        arena: &ExprArena,
        layout: &FragmentLayout,
    ) -> Option<Diagnostic> {
        let name = world.name(self.buffer);
        if let Some((point, thread)) = thread_outside(arena, layout, self.threads) {
            let message = format!(
                "the annotated layout of `{name}` puts {} on thread {thread}, but the block has threads 0..{}",
                element(world, self.buffer, &point),
                self.threads,
            );
            return Some(self.error(message).with_help(format!(
                "the thread formula must stay in 0..{} (the `threads=` of `T.Kernel`)",
                self.threads
            )));
        }
        let collision = layout.collision(arena)?;
        let message = format!(
            "the annotated layout of `{name}` puts {} and {} both in register {:?} of thread {}: one would overwrite the other",
            element(world, self.buffer, &collision.first.0),
            element(world, self.buffer, &collision.second.0),
            collision.local,
            collision.thread,
        );
        Some(self.error(message).with_help(
            "give the elements a thread holds distinct local indices (the outputs after the thread)",
        ))
    }

    fn error(&self, message: String) -> Diagnostic {
        Diagnostic::error(
            Code::InvalidLayout,
            Anchor::Entity(self.annotation),
            message,
        )
    }
}

/// The first element whose thread is negative or not below `threads`.
fn thread_outside(
    arena: &ExprArena,
    layout: &FragmentLayout,
    threads: i64,
) -> Option<(Vec<i64>, i64)> {
    let mut found = None;
    for_each_point(&layout.shape, |point| {
        for rep in 0..layout.replicate {
            if let Some(thread) = layout.thread_of(arena, point, rep)
                && !(0..threads).contains(&thread)
            {
                found = Some((point.to_vec(), thread));
                return false;
            }
        }
        true
    });
    found
}

/// Planned fragment loops whose iterations do not divide evenly among the threads that run
/// them (`threads_of`: the block's, or those of the warpgroup a thread-index test gives the loop
/// to).
pub(super) fn uneven_partitions(
    loops: &[LoopView<'_>],
    layouts: &std::collections::BTreeMap<EntityId, (Inferred, i64)>,
    arena: &ExprArena,
    threads_of: &dyn Fn(EntityId) -> i64,
) -> Vec<Diagnostic> {
    let mut found = Vec::new();
    for view in loops.iter().filter(|view| view.touches_fragment) {
        let Some((inferred, _)) = layouts.get(&view.entity) else {
            continue;
        };
        let threads = threads_of(view.entity);
        if !matches!(inferred.origin, Origin::Plan { .. }) {
            continue;
        }
        let loads = inferred.layout.thread_loads(arena, threads);
        let (Some(&most), Some(&fewest)) = (loads.iter().max(), loads.iter().min()) else {
            continue;
        };
        if most == fewest {
            continue;
        }
        let iterations: i64 = view.shape.iter().product();
        let heavy = loads.iter().filter(|&&load| load == most).count();
        let message = format!(
            "this fragment loop's {iterations} iterations do not divide evenly among {threads} threads: {heavy} threads take {most} and {} take fewer, so every thread keeps registers for {most} and the rest are padding",
            loads.len() - heavy,
        );
        let help = format!(
            "make the loop a multiple of {threads} iterations, or launch a thread count that divides {iterations}"
        );
        found.push(
            Diagnostic::warning(Code::UnevenPartition, Anchor::Entity(view.entity), message)
                .with_help(help),
        );
    }
    found
}

/// In a generic instance, a layout conflict in a loop whose extents come from the values tilec
/// assumed may be their doing (a factory's `threads_arg` = 128 where its callers pass the 256
/// that sized the tiles): it is reported as not analysed, naming the values, never as the
/// kernel's error. A call site or
/// `tilec.toml` with the real values settles it.
pub(crate) fn blame_assumed_values(world: &World, diagnostics: &mut [Diagnostic]) {
    if world.assumed_extent_loops.is_empty() {
        return;
    }
    let in_assumed_loop = |diagnostic: &Diagnostic| {
        let Anchor::Entity(mut entity) = diagnostic.anchor else {
            return false;
        };
        // The conflict is the innermost parallel loop's around the anchor (or the anchor's
        // own, when it is that loop): a serial loop further out does not lay anything out.
        loop {
            if world
                .loops
                .get(entity)
                .is_some_and(|info| info.kind == tilec_ir::LoopKind::Parallel)
            {
                return world.assumed_extent_loops.contains(&entity);
            }
            match world.parents.get(entity) {
                Some(&parent) => entity = parent,
                None => return false,
            }
        }
    };
    let assumed: Vec<String> = world
        .assumed_args
        .iter()
        .map(|arg| format!("`{}` = {}", arg.name, arg.value))
        .collect();
    for diagnostic in diagnostics.iter_mut().filter(|d| {
        d.code == Code::LayoutConflict && d.severity.stops_analysis() && in_assumed_loop(d)
    }) {
        let message = format!(
            "{}, with the values tilec assumed for this generic instance ({})",
            diagnostic.message,
            assumed.join(", ")
        );
        let mut blamed = Diagnostic::not_analysed(diagnostic.anchor, message).with_help(
            "pass the values at a call site, or list the instance in tilec.toml, to analyse it \
             with yours",
        );
        blamed.related = std::mem::take(&mut diagnostic.related);
        *diagnostic = blamed;
    }
}
