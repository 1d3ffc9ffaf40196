//! The layout algebra on fragments: building layouts from smaller ones (repeat, replicate,
//! condense, bind a thread range, compose with an index map) and deciding relations between them
//! (inverse, containment, equality).
//!
//! The builders mirror TileLang's `Fragment::Repeat`, `Replicate`, `CondenseReplicateVar`,
//! `BindThreadRange` and composition with access indices, so that a layout assembled here from
//! TileLang's recipe is the function TileLang builds. The relations are decided exactly by
//! enumerating the tile (shapes are compile-time constants): where TileLang asks an arithmetic
//! prover and may fail to prove a true fact, these answer yes or no, with a witness when no; the
//! only error is a tile too large to enumerate or a formula that cannot be evaluated.

use tilec_ir::{ExprArena, ExprId, VarId};

use super::fragment::{FragmentLayout, for_each_point, fresh_vars, unflatten};
use super::shared::{SharedLayout, enumerable};

/// The largest `threads × registers` table [`inverse`] builds.
const MAX_INVERSE_SLOTS: i64 = 1 << 24;
/// Marks a slot of the inverse table that no element occupies.
const EMPTY_SLOT: u64 = u64::MAX;

/// A map from the points of a domain to indices of some other shape, as arena formulas: the
/// general "layout" (logical index → index), used for access indices and storage layouts.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct IndexMap {
    pub shape: Vec<i64>,
    /// One variable per domain dimension, with the dimension's extent.
    pub vars: Vec<VarId>,
    /// One formula per output dimension.
    pub outputs: Vec<ExprId>,
}

impl IndexMap {
    /// The identity map of `shape`.
    pub fn identity(arena: &mut ExprArena, shape: &[i64]) -> IndexMap {
        IndexMap::from_fn(arena, shape, |_, indices| indices.to_vec())
    }

    /// The map whose outputs `build` writes in terms of fresh domain variables.
    pub fn from_fn(
        arena: &mut ExprArena,
        shape: &[i64],
        build: impl FnOnce(&mut ExprArena, &[ExprId]) -> Vec<ExprId>,
    ) -> IndexMap {
        let vars = fresh_vars(arena, shape);
        let indices: Vec<ExprId> = vars.iter().map(|&var| arena.var_expr(var)).collect();
        let outputs = build(arena, &indices);
        IndexMap {
            shape: shape.to_vec(),
            vars,
            outputs,
        }
    }

    /// The one-output map from a tile's logical index to its storage offset.
    pub fn of_shared_layout(
        arena: &mut ExprArena,
        layout: &SharedLayout,
    ) -> Result<IndexMap, String> {
        let vars = fresh_vars(arena, layout.shape());
        let indices: Vec<ExprId> = vars.iter().map(|&var| arena.var_expr(var)).collect();
        let offset = layout.offset_expr(arena, &indices)?;
        Ok(IndexMap {
            shape: layout.shape().to_vec(),
            vars,
            outputs: vec![offset],
        })
    }

    /// Writes the image of `point` into `out` (reusing its allocation); `None` when a formula
    /// cannot be evaluated.
    pub fn eval_into(&self, arena: &ExprArena, point: &[i64], out: &mut Vec<i64>) -> Option<()> {
        out.clear();
        let env = bind(&self.vars, point, None);
        for &output in &self.outputs {
            out.push(arena.eval(output, &env)?);
        }
        Some(())
    }
}

/// Where [`repeat`] puts the copies: on more threads, or in more registers of the same threads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RepeatOn {
    Threads,
    Registers,
}

/// How [`repeat`] numbers the copies of a multi-dimensional repeat: TileLang's
/// `lower_dim_first = true` is [`RepeatOrder::LastDimFastest`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RepeatOrder {
    LastDimFastest,
    FirstDimFastest,
}

/// TileLang's `Fragment::Repeat`: tiles the fragment `repeats[d]` times along each dimension.
///
/// Copy `c` (numbered per `order`) of element `x % shape` goes, with `RepeatOn::Threads`, to the
/// old thread plus `c × thread_extent`, or, with `RepeatOn::Registers`, to the old thread at
/// register `old + c × registers_per_thread` (a multi-dimensional local index is flattened
/// first; TileLang only repeats one-dimensional ones).
pub fn repeat(
    arena: &mut ExprArena,
    fragment: &FragmentLayout,
    repeats: &[i64],
    on: RepeatOn,
    order: RepeatOrder,
) -> Result<FragmentLayout, String> {
    let shape = repeated_shape(&fragment.shape, repeats)?;
    let vars = fresh_vars(arena, &shape);
    let (wrapped, copy) = tile_coordinates(arena, fragment, &vars, repeats, order);
    let (thread, index) = match on {
        RepeatOn::Threads => {
            let extent = arena.int(thread_extent(arena, fragment)?);
            let shift = arena.mul(extent, copy);
            let thread = substitute(arena, fragment.thread, &fragment.vars, &wrapped);
            let index = fragment
                .index
                .iter()
                .map(|&e| substitute(arena, e, &fragment.vars, &wrapped))
                .collect();
            (arena.add(thread, shift), index)
        }
        RepeatOn::Registers => {
            let (flat, registers) = flat_local_expr(arena, fragment)?;
            let registers = arena.int(registers);
            let shift = arena.mul(registers, copy);
            let local = substitute(arena, flat, &fragment.vars, &wrapped);
            let thread = substitute(arena, fragment.thread, &fragment.vars, &wrapped);
            (thread, vec![arena.add(local, shift)])
        }
    };
    Ok(FragmentLayout {
        shape,
        vars,
        rep: fragment.rep,
        replicate: fragment.replicate,
        thread,
        index,
    })
}

/// The shape of a repeat, checking the factors.
fn repeated_shape(shape: &[i64], repeats: &[i64]) -> Result<Vec<i64>, String> {
    if repeats.len() != shape.len() {
        return Err(format!(
            "a {}-dimensional fragment was given {} repeat factors",
            shape.len(),
            repeats.len()
        ));
    }
    if repeats.iter().any(|&r| r < 1) {
        return Err(format!(
            "repeat factors must be at least 1, not {repeats:?}"
        ));
    }
    let grown: Option<Vec<i64>> = shape
        .iter()
        .zip(repeats)
        .map(|(&n, &r)| n.checked_mul(r))
        .collect();
    let grown = grown.ok_or_else(|| format!("repeating {shape:?} by {repeats:?} overflows"))?;
    enumerable(&grown)?;
    Ok(grown)
}

/// For the new variables of a repeat: each old variable as `new % old_extent`, and the copy
/// number combined from the quotients `new // old_extent`.
fn tile_coordinates(
    arena: &mut ExprArena,
    fragment: &FragmentLayout,
    vars: &[VarId],
    repeats: &[i64],
    order: RepeatOrder,
) -> (Vec<ExprId>, ExprId) {
    let mut wrapped = Vec::with_capacity(vars.len());
    let mut quotients = Vec::with_capacity(vars.len());
    for (&var, &extent) in vars.iter().zip(&fragment.shape) {
        let var = arena.var_expr(var);
        let extent = arena.int(extent);
        wrapped.push(arena.floormod(var, extent));
        quotients.push(arena.floordiv(var, extent));
    }
    let mut dims: Vec<usize> = (0..vars.len()).collect();
    if order == RepeatOrder::LastDimFastest {
        dims.reverse();
    }
    let (mut copy, mut stride) = (arena.int(0), 1i64);
    for dim in dims {
        let scale = arena.int(stride);
        let term = arena.mul(quotients[dim], scale);
        copy = arena.add(copy, term);
        stride = stride.saturating_mul(repeats[dim]);
    }
    (wrapped, copy)
}

/// The fragment's local index flattened row-major, and the registers per thread.
fn flat_local_expr(
    arena: &mut ExprArena,
    fragment: &FragmentLayout,
) -> Result<(ExprId, i64), String> {
    enumerable(&fragment.shape)?;
    let local_shape = fragment.local_shape(arena);
    let registers: i64 = local_shape.iter().product();
    if registers <= 0 {
        return Err(format!(
            "the fragment `{}` holds no registers",
            fragment.describe(arena)
        ));
    }
    if let [single] = fragment.index.as_slice() {
        return Ok((*single, registers));
    }
    let mut flat = arena.int(0);
    for (&expr, &extent) in fragment.index.iter().zip(&local_shape) {
        let extent = arena.int(extent);
        let scaled = arena.mul(flat, extent);
        flat = arena.add(scaled, expr);
    }
    Ok((flat, registers))
}

/// TileLang's `Fragment::Replicate`: `factor` groups of threads each hold the whole fragment;
/// replica `r` is old replica `r % R` shifted by `r // R` whole thread extents.
pub fn replicate(
    arena: &mut ExprArena,
    fragment: &FragmentLayout,
    factor: i64,
) -> Result<FragmentLayout, String> {
    if factor < 1 {
        return Err(format!(
            "a replication factor must be at least 1, not {factor}"
        ));
    }
    if factor == 1 {
        return Ok(fragment.clone());
    }
    let extent = thread_extent(arena, fragment)?;
    let total = fragment
        .replicate
        .checked_mul(factor)
        .ok_or_else(|| format!("replicating {factor} times overflows"))?;
    let rep = arena.var("rep", Some(total));
    let rep_expr = arena.var_expr(rep);
    let old_count = arena.int(fragment.replicate);
    let old_rep = arena.floormod(rep_expr, old_count);
    let group = arena.floordiv(rep_expr, old_count);
    let thread = substitute(arena, fragment.thread, &[fragment.rep], &[old_rep]);
    let extent = arena.int(extent);
    let shift = arena.mul(extent, group);
    Ok(FragmentLayout {
        rep,
        replicate: total,
        thread: arena.add(thread, shift),
        ..fragment.clone()
    })
}

/// TileLang's `CondenseReplicateVar`: keeps only the replicas that put an element on a thread no
/// other kept replica does.
///
/// Replicas are dropped in one of two regular ways, whichever keeps fewest: when the thread only
/// depends on `rep % k` (replicas repeat with period `k`), or only on `rep // (R / k)` (runs of
/// `R / k` replicas share a thread). Both are checked on every element, so the holders of every
/// element stay the same.
pub fn condense_replicas(
    arena: &mut ExprArena,
    fragment: &FragmentLayout,
) -> Result<FragmentLayout, String> {
    enumerable(&fragment.shape)?;
    let total = fragment.replicate;
    for kept in (1..total).filter(|k| total % k == 0) {
        if replicas_repeat(arena, fragment, |r| r % kept)? {
            return Ok(with_replicas(arena, fragment, kept, 1));
        }
        let run = total / kept;
        if replicas_repeat(arena, fragment, |r| r / run * run)? {
            return Ok(with_replicas(arena, fragment, kept, run));
        }
    }
    Ok(fragment.clone())
}

/// True when replica `r` of every element sits on the thread of replica `canonical(r)`.
fn replicas_repeat(
    arena: &ExprArena,
    fragment: &FragmentLayout,
    canonical: impl Fn(i64) -> i64,
) -> Result<bool, String> {
    let differs = search(&fragment.shape, |point| {
        for rep in 0..fragment.replicate {
            let thread = thread_at(arena, fragment, point, rep)?;
            if thread != thread_at(arena, fragment, point, canonical(rep))? {
                return Ok(Some(()));
            }
        }
        Ok(None)
    })?;
    Ok(differs.is_none())
}

/// The fragment with `kept` replicas, replica `r` standing for the old replica `r × scale`.
fn with_replicas(
    arena: &mut ExprArena,
    fragment: &FragmentLayout,
    kept: i64,
    scale: i64,
) -> FragmentLayout {
    let rep = arena.var("rep", Some(kept));
    let rep_expr = arena.var_expr(rep);
    let scale = arena.int(scale);
    let old_rep = arena.mul(rep_expr, scale);
    FragmentLayout {
        rep,
        replicate: kept,
        thread: substitute(arena, fragment.thread, &[fragment.rep], &[old_rep]),
        ..fragment.clone()
    }
}

/// TileLang's `BindThreadRange`: the fragment run by threads `start .. start + extent` of the
/// block, its formula's thread 0 being thread `start`. The fragment must fit the range.
pub fn bind_thread_range(
    arena: &mut ExprArena,
    fragment: &FragmentLayout,
    start: i64,
    extent: i64,
) -> Result<FragmentLayout, String> {
    let (lowest, highest) = thread_bounds(arena, fragment)?;
    if start < 0 || extent <= 0 || lowest < 0 || highest >= extent {
        return Err(format!(
            "the fragment `{}` uses threads {lowest}..={highest}, which do not fit a range of \
             {extent} threads starting at {start}",
            fragment.describe(arena)
        ));
    }
    let start = arena.int(start);
    Ok(FragmentLayout {
        thread: arena.add(fragment.thread, start),
        ..fragment.clone()
    })
}

/// `fragment ∘ map`: the fragment over the map's domain that holds point `x` where `fragment`
/// holds `map(x)` (TileLang's loop layout from a buffer layout and access indices). Every image
/// must lie inside the fragment's shape.
pub fn compose(
    arena: &mut ExprArena,
    fragment: &FragmentLayout,
    map: &IndexMap,
) -> Result<FragmentLayout, String> {
    if map.outputs.len() != fragment.shape.len() {
        return Err(format!(
            "a map with {} outputs cannot index a {}-dimensional fragment",
            map.outputs.len(),
            fragment.shape.len()
        ));
    }
    enumerable(&map.shape)?;
    check_image_inside(arena, map, &fragment.shape)?;
    let thread = substitute(arena, fragment.thread, &fragment.vars, &map.outputs);
    let index = fragment
        .index
        .iter()
        .map(|&e| substitute(arena, e, &fragment.vars, &map.outputs))
        .collect();
    Ok(FragmentLayout {
        shape: map.shape.clone(),
        vars: map.vars.clone(),
        rep: fragment.rep,
        replicate: fragment.replicate,
        thread,
        index,
    })
}

/// An error naming the first domain point that `map` sends outside `shape`.
fn check_image_inside(arena: &ExprArena, map: &IndexMap, shape: &[i64]) -> Result<(), String> {
    let mut image = Vec::with_capacity(shape.len());
    let outside = search(&map.shape, |point| {
        map.eval_into(arena, point, &mut image)
            .ok_or_else(|| format!("the map cannot be evaluated at {point:?}"))?;
        Ok((!inside(&image, shape)).then(|| (point.to_vec(), image.clone())))
    })?;
    match outside {
        Some((point, image)) => Err(format!(
            "the map sends {point:?} to {image:?}, outside the fragment's shape {shape:?}"
        )),
        None => Ok(()),
    }
}

/// The inverse of an injective fragment: for each thread and register, the element and replica
/// stored there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FragmentInverse {
    shape: Vec<i64>,
    replicate: i64,
    threads: i64,
    local_shape: Vec<i64>,
    /// Indexed by `thread × registers + flat local index`: `ordinal × replicate + replica`, or
    /// [`EMPTY_SLOT`].
    slots: Vec<u64>,
}

impl FragmentInverse {
    /// Threads of the table: the fragment's largest thread plus one.
    pub fn threads(&self) -> i64 {
        self.threads
    }

    /// The per-thread register shape.
    pub fn local_shape(&self) -> &[i64] {
        &self.local_shape
    }

    /// The element (as a point) and replica at `thread`, register `local`; `None` for an empty
    /// slot or an index outside the table.
    pub fn element_at(&self, thread: i64, local: &[i64]) -> Option<(Vec<i64>, i64)> {
        if local.len() != self.local_shape.len() || !inside(local, &self.local_shape) {
            return None;
        }
        let flat = local
            .iter()
            .zip(&self.local_shape)
            .fold(0i64, |acc, (&x, &n)| acc * n + x);
        let (ordinal, replica) = self.ordinal_at(thread, flat)?;
        Some((unflatten(ordinal, &self.shape), replica))
    }

    /// Like [`Self::element_at`] with a flattened register and the element's row-major number,
    /// allocating nothing.
    pub fn ordinal_at(&self, thread: i64, flat_local: i64) -> Option<(u64, i64)> {
        let registers: i64 = self.local_shape.iter().product();
        if !(0..self.threads).contains(&thread) || !(0..registers).contains(&flat_local) {
            return None;
        }
        let slot = usize::try_from(thread * registers + flat_local).ok()?;
        let packed = *self.slots.get(slot)?;
        let replicate = u64::try_from(self.replicate).ok()?;
        if packed == EMPTY_SLOT {
            return None;
        }
        Some((packed / replicate, i64::try_from(packed % replicate).ok()?))
    }

    /// Slots no element occupies. A fragment with holes is injective but sparse in thread space
    /// (seed 001's third failure mode), which TileLang's affine inverse cannot always express.
    pub fn holes(&self) -> usize {
        self.slots
            .iter()
            .filter(|&&slot| slot == EMPTY_SLOT)
            .count()
    }
}

/// The inverse table of `fragment`; an error naming two elements when it is not injective, or
/// when a thread is negative.
pub fn inverse(arena: &ExprArena, fragment: &FragmentLayout) -> Result<FragmentInverse, String> {
    enumerable(&fragment.shape)?;
    let local_shape = fragment.local_shape(arena);
    let registers: i64 = local_shape.iter().product();
    let threads = thread_extent(arena, fragment)?;
    let slots = threads
        .checked_mul(registers)
        .filter(|&slots| slots <= MAX_INVERSE_SLOTS)
        .ok_or_else(|| {
            format!("{threads} threads × {registers} registers is too large to tabulate")
        })?;
    let mut table = FragmentInverse {
        shape: fragment.shape.clone(),
        replicate: fragment.replicate,
        threads,
        local_shape,
        slots: vec![EMPTY_SLOT; usize::try_from(slots).unwrap_or(0)],
    };
    fill_inverse(arena, fragment, &mut table)?;
    Ok(table)
}

/// Writes every (element, replica) into its slot, failing on the first collision.
fn fill_inverse(
    arena: &ExprArena,
    fragment: &FragmentLayout,
    table: &mut FragmentInverse,
) -> Result<(), String> {
    let registers: i64 = table.local_shape.iter().product();
    let replicate = u64::try_from(fragment.replicate).unwrap_or(1);
    let mut ordinal = 0u64;
    let collision = search(&fragment.shape, |point| {
        let local = flat_local_at(arena, fragment, point, &table.local_shape)?;
        for rep in 0..fragment.replicate {
            let thread = thread_at(arena, fragment, point, rep)?;
            if thread < 0 {
                return Err(format!(
                    "{point:?} (replica {rep}) is on negative thread {thread}"
                ));
            }
            let slot = usize::try_from(thread * registers + local).unwrap_or(usize::MAX);
            // `rep` counts up from 0 over the replicas.
            #[allow(clippy::cast_sign_loss)]
            let packed = ordinal * replicate + rep as u64;
            match table.slots.get_mut(slot) {
                Some(free) if *free == EMPTY_SLOT => *free = packed,
                Some(taken) => return Ok(Some((*taken, point.to_vec(), rep, thread))),
                None => return Err(format!("{point:?} falls outside the inverse table")),
            }
        }
        ordinal += 1;
        Ok(None)
    })?;
    match collision {
        Some((taken, point, rep, thread)) => Err(format!(
            "the fragment is not injective: {:?} (replica {}) and {point:?} (replica {rep}) \
             share a register of thread {thread}",
            unflatten(taken / replicate, &fragment.shape),
            taken % replicate
        )),
        None => Ok(()),
    }
}

/// One access of a fragment from a common domain (a parallel loop): the fragment, and the map
/// from domain points to the fragment's indices.
#[derive(Clone, Copy, Debug)]
pub struct Access<'a> {
    pub fragment: &'a FragmentLayout,
    pub indices: &'a IndexMap,
}

/// Why one fragment does not contain another, at the first domain point where it fails.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Uncontained {
    /// The small fragment's replica `replica` of the element at `point` is on `thread`, which
    /// does not hold it in the large fragment; `owners` are the threads that do.
    NotOwned {
        point: Vec<i64>,
        replica: i64,
        thread: i64,
        owners: Vec<i64>,
    },
    /// Both hold the element on the thread, in different registers.
    IndexMismatch {
        point: Vec<i64>,
        small_local: Vec<i64>,
        large_local: Vec<i64>,
    },
}

/// Seed 001's `ProveFragmentContains` with the identity access: true when every thread that
/// `small` puts an element on also holds that element in `large`.
pub fn contains(
    arena: &ExprArena,
    large: &FragmentLayout,
    small: &FragmentLayout,
) -> Result<bool, String> {
    if large.shape != small.shape {
        return Err(format!(
            "fragments over {:?} and {:?} cannot contain one another",
            large.shape, small.shape
        ));
    }
    let copy = |point: &[i64], out: &mut Vec<i64>| {
        out.clear();
        out.extend_from_slice(point);
        Some(())
    };
    let found = first_uncontained(arena, &large.shape, (large, &copy), (small, &copy), false)?;
    Ok(found.is_none())
}

/// Seed 001's `ProveFragmentContains(small, large, small_indices, large_indices)`, decided
/// exactly: for every domain point `x` and replica `r` of `small`, the thread
/// `small.thread(small_indices(x), r)` must hold `large_indices(x)` in `large` under some replica
/// (and, with `check_index`, both must use the same register). TileLang checks this by inverting
/// `large` at (register, thread) and recomputing the thread; for an injective `large` that is the
/// same condition. A read needs `large` (the buffer) to contain `small` (the loop); a write needs
/// both directions. `None` means contained; otherwise the first failure.
pub fn find_uncontained(
    arena: &ExprArena,
    large: Access<'_>,
    small: Access<'_>,
    check_index: bool,
) -> Result<Option<Uncontained>, String> {
    if large.indices.shape != small.indices.shape {
        return Err(format!(
            "accesses over the domains {:?} and {:?} cannot be compared",
            large.indices.shape, small.indices.shape
        ));
    }
    let large_map = |point: &[i64], out: &mut Vec<i64>| large.indices.eval_into(arena, point, out);
    let small_map = |point: &[i64], out: &mut Vec<i64>| small.indices.eval_into(arena, point, out);
    first_uncontained(
        arena,
        &large.indices.shape,
        (large.fragment, &large_map),
        (small.fragment, &small_map),
        check_index,
    )
}

/// How a domain point reaches a fragment's index: writes it into the buffer, `None` when it
/// cannot be evaluated.
type AccessFn<'a> = &'a dyn Fn(&[i64], &mut Vec<i64>) -> Option<()>;

/// The enumeration behind [`contains`] and [`find_uncontained`]. Every buffer is reused across
/// points; only a failure allocates.
fn first_uncontained(
    arena: &ExprArena,
    domain: &[i64],
    (large, large_access): (&FragmentLayout, AccessFn<'_>),
    (small, small_access): (&FragmentLayout, AccessFn<'_>),
    check_index: bool,
) -> Result<Option<Uncontained>, String> {
    enumerable(domain)?;
    let (mut large_point, mut small_point, mut owners) = (Vec::new(), Vec::new(), Vec::new());
    let (mut large_local, mut small_local) = (Vec::new(), Vec::new());
    search(domain, |point| {
        access(large_access, point, &mut large_point, &large.shape)?;
        access(small_access, point, &mut small_point, &small.shape)?;
        owner_set(arena, large, &large_point, &mut owners)?;
        if let Some((replica, thread)) = unowned_replica(arena, small, &small_point, &owners)? {
            return Ok(Some(Uncontained::NotOwned {
                point: point.to_vec(),
                replica,
                thread,
                owners: owners.clone(),
            }));
        }
        if !check_index {
            return Ok(None);
        }
        local_into(arena, small, &small_point, &mut small_local)?;
        local_into(arena, large, &large_point, &mut large_local)?;
        Ok(
            (small_local != large_local).then(|| Uncontained::IndexMismatch {
                point: point.to_vec(),
                small_local: small_local.clone(),
                large_local: large_local.clone(),
            }),
        )
    })
}

/// The first replica of `point` that `fragment` puts on a thread outside the sorted `owners`,
/// with that thread.
fn unowned_replica(
    arena: &ExprArena,
    fragment: &FragmentLayout,
    point: &[i64],
    owners: &[i64],
) -> Result<Option<(i64, i64)>, String> {
    for replica in 0..fragment.replicate {
        let thread = thread_at(arena, fragment, point, replica)?;
        if owners.binary_search(&thread).is_err() {
            return Ok(Some((replica, thread)));
        }
    }
    Ok(None)
}

/// Evaluates one access at `point` into `out`, checking it lands inside the fragment.
fn access(
    map: AccessFn<'_>,
    point: &[i64],
    out: &mut Vec<i64>,
    shape: &[i64],
) -> Result<(), String> {
    map(point, out).ok_or_else(|| format!("an access cannot be evaluated at {point:?}"))?;
    if out.len() != shape.len() || !inside(out, shape) {
        return Err(format!(
            "the access at {point:?} reads {out:?}, outside the fragment's shape {shape:?}"
        ));
    }
    Ok(())
}

/// True when both fragments, over the same shape, put every element in the same register of the
/// same set of threads. Replica numbering does not matter: this compares the functions, where
/// TileLang's `IsEqual` compares formulas.
pub fn equal_on_domain(
    arena: &ExprArena,
    first: &FragmentLayout,
    second: &FragmentLayout,
) -> Result<bool, String> {
    if first.shape != second.shape {
        return Ok(false);
    }
    Ok(first_difference(arena, first, second)?.is_none())
}

/// The first element (row-major) that the two fragments of one shape hold differently.
pub fn first_difference(
    arena: &ExprArena,
    first: &FragmentLayout,
    second: &FragmentLayout,
) -> Result<Option<Vec<i64>>, String> {
    if first.shape != second.shape {
        return Err(format!(
            "fragments over {:?} and {:?} cannot be compared",
            first.shape, second.shape
        ));
    }
    enumerable(&first.shape)?;
    let (mut first_owners, mut second_owners) = (Vec::new(), Vec::new());
    let (mut first_local, mut second_local) = (Vec::new(), Vec::new());
    search(&first.shape, |point| {
        owner_set(arena, first, point, &mut first_owners)?;
        owner_set(arena, second, point, &mut second_owners)?;
        local_into(arena, first, point, &mut first_local)?;
        local_into(arena, second, point, &mut second_local)?;
        let same = first_owners == second_owners && first_local == second_local;
        Ok((!same).then(|| point.to_vec()))
    })
}

/// The sorted, distinct threads holding `point`, written into `out`.
fn owner_set(
    arena: &ExprArena,
    fragment: &FragmentLayout,
    point: &[i64],
    out: &mut Vec<i64>,
) -> Result<(), String> {
    out.clear();
    for rep in 0..fragment.replicate {
        out.push(thread_at(arena, fragment, point, rep)?);
    }
    out.sort_unstable();
    out.dedup();
    Ok(())
}

/// Enumerates `shape` row-major until `visit` finds something or fails.
fn search<T>(
    shape: &[i64],
    mut visit: impl FnMut(&[i64]) -> Result<Option<T>, String>,
) -> Result<Option<T>, String> {
    let mut outcome = Ok(None);
    for_each_point(shape, |point| match visit(point) {
        Ok(None) => true,
        stop => {
            outcome = stop;
            false
        }
    });
    outcome
}

/// An environment binding `vars` to `point` (and the replica variable, when given).
fn bind<'a>(
    vars: &'a [VarId],
    point: &'a [i64],
    replica: Option<(VarId, i64)>,
) -> impl Fn(VarId) -> Option<i64> + 'a {
    move |var| match replica {
        Some((rep, value)) if rep == var => Some(value),
        _ => vars
            .iter()
            .position(|&v| v == var)
            .and_then(|dim| point.get(dim).copied()),
    }
}

/// The thread holding replica `rep` of `point`.
fn thread_at(
    arena: &ExprArena,
    fragment: &FragmentLayout,
    point: &[i64],
    rep: i64,
) -> Result<i64, String> {
    let env = bind(&fragment.vars, point, Some((fragment.rep, rep)));
    arena.eval(fragment.thread, &env).ok_or_else(|| {
        format!(
            "the thread of {point:?} (replica {rep}) in `{}` cannot be evaluated",
            fragment.describe(arena)
        )
    })
}

/// The local index of `point`, written into `out`.
fn local_into(
    arena: &ExprArena,
    fragment: &FragmentLayout,
    point: &[i64],
    out: &mut Vec<i64>,
) -> Result<(), String> {
    out.clear();
    let env = bind(&fragment.vars, point, None);
    for &expr in &fragment.index {
        let value = arena.eval(expr, &env).ok_or_else(|| {
            format!(
                "the register of {point:?} in `{}` cannot be evaluated",
                fragment.describe(arena)
            )
        })?;
        out.push(value);
    }
    Ok(())
}

/// The local index of `point` flattened over `local_shape`, without allocating.
fn flat_local_at(
    arena: &ExprArena,
    fragment: &FragmentLayout,
    point: &[i64],
    local_shape: &[i64],
) -> Result<i64, String> {
    let env = bind(&fragment.vars, point, None);
    let mut flat = 0i64;
    for (&expr, &extent) in fragment.index.iter().zip(local_shape) {
        match arena.eval(expr, &env) {
            Some(value) if (0..extent).contains(&value) => flat = flat * extent + value,
            _ => {
                return Err(format!(
                    "the register of {point:?} in `{}` is negative or cannot be evaluated",
                    fragment.describe(arena)
                ));
            }
        }
    }
    Ok(flat)
}

/// The smallest and largest thread the fragment uses.
fn thread_bounds(arena: &ExprArena, fragment: &FragmentLayout) -> Result<(i64, i64), String> {
    enumerable(&fragment.shape)?;
    let (mut lowest, mut highest) = (i64::MAX, i64::MIN);
    search(&fragment.shape, |point| {
        for rep in 0..fragment.replicate {
            let thread = thread_at(arena, fragment, point, rep)?;
            (lowest, highest) = (lowest.min(thread), highest.max(thread));
        }
        Ok(None::<()>)
    })?;
    if lowest > highest {
        return Err("the fragment holds no elements".to_owned());
    }
    Ok((lowest, highest))
}

/// TileLang's `ThreadExtent`: the largest thread plus one; an error for a fragment on negative
/// threads or on none.
fn thread_extent(arena: &ExprArena, fragment: &FragmentLayout) -> Result<i64, String> {
    let (lowest, highest) = thread_bounds(arena, fragment)?;
    if lowest < 0 {
        return Err(format!(
            "the fragment `{}` puts elements on negative thread {lowest}",
            fragment.describe(arena)
        ));
    }
    Ok(highest + 1)
}

/// `e` with each variable of `from` replaced by the expression at the same position of `to`.
fn substitute(arena: &mut ExprArena, e: ExprId, from: &[VarId], to: &[ExprId]) -> ExprId {
    arena.substitute(e, &|var| {
        from.iter()
            .position(|&v| v == var)
            .and_then(|dim| to.get(dim).copied())
    })
}

/// True when `0 <= point[d] < shape[d]` for every dimension.
fn inside(point: &[i64], shape: &[i64]) -> bool {
    point.len() == shape.len() && point.iter().zip(shape).all(|(&x, &n)| 0 <= x && x < n)
}

#[cfg(test)]
mod tests {
    use tilec_ir::{ExprArena, ExprId};

    use super::{
        Access, IndexMap, RepeatOn, RepeatOrder, Uncontained, bind_thread_range, compose,
        condense_replicas, contains, equal_on_domain, find_uncontained, first_difference, inverse,
        repeat, replicate,
    };
    use crate::layout::fragment::{FragmentLayout, fresh_vars, points};
    use crate::layout::shared::SharedLayout;
    use crate::layout::tensor_core::accumulator_layout;

    /// A fragment whose thread and (one-dimensional) register `build` writes from the index
    /// expressions and the replica expression.
    fn fragment(
        arena: &mut ExprArena,
        shape: &[i64],
        replicate: i64,
        build: impl FnOnce(&mut ExprArena, &[ExprId], ExprId) -> (ExprId, ExprId),
    ) -> FragmentLayout {
        let vars = fresh_vars(arena, shape);
        let indices: Vec<ExprId> = vars.iter().map(|&v| arena.var_expr(v)).collect();
        let rep = arena.var("rep", Some(replicate));
        let rep_expr = arena.var_expr(rep);
        let (thread, index) = build(arena, &indices, rep_expr);
        FragmentLayout {
            shape: shape.to_vec(),
            vars,
            rep,
            replicate,
            thread,
            index: vec![index],
        }
    }

    /// `x // d * s` written in the arena.
    fn scaled(arena: &mut ExprArena, x: ExprId, d: i64, s: i64) -> ExprId {
        let d = arena.int(d);
        let q = arena.floordiv(x, d);
        let s = arena.int(s);
        arena.mul(q, s)
    }

    /// TileLang's 8×8 mma base fragment: thread `j // 2 + 4 * i`, register `j % 2`.
    fn base_8x8(arena: &mut ExprArena) -> FragmentLayout {
        fragment(arena, &[8, 8], 1, |arena, ix, _| {
            let col = scaled(arena, ix[1], 2, 1);
            let row = scaled(arena, ix[0], 1, 4);
            let two = arena.int(2);
            (arena.add(col, row), arena.floormod(ix[1], two))
        })
    }

    /// Thread `i * 16 + j`, register 0: seed 001's fragment over (4, 16) on 64 threads.
    fn one_per_thread(arena: &mut ExprArena) -> FragmentLayout {
        fragment(arena, &[4, 16], 1, |arena, ix, _| {
            let row = scaled(arena, ix[0], 1, 16);
            (arena.add(row, ix[1]), arena.int(0))
        })
    }

    fn at(arena: &ExprArena, layout: &FragmentLayout, point: &[i64], rep: i64) -> (i64, i64) {
        let thread = layout.thread_of(arena, point, rep).expect("thread");
        let local = layout.local_of(arena, point).expect("local");
        (thread, local[0])
    }

    #[test]
    fn repeat_on_registers_stacks_register_blocks() {
        let mut arena = ExprArena::new();
        let base = base_8x8(&mut arena);
        let tall = repeat(
            &mut arena,
            &base,
            &[2, 1],
            RepeatOn::Registers,
            RepeatOrder::LastDimFastest,
        )
        .expect("repeat");
        assert_eq!(tall.shape, vec![16, 8]);
        // (9, 3): thread 3 // 2 + 4 * (9 % 8) = 5, register 3 % 2 + 2 * (9 // 8) = 3.
        assert_eq!(at(&arena, &tall, &[9, 3], 0), (5, 3));
        assert_eq!(tall.local_size(&arena), 4);
        assert_eq!(tall.collision(&arena), None);
    }

    #[test]
    fn repeat_on_threads_numbers_copies_in_the_requested_order() {
        let mut arena = ExprArena::new();
        let base = base_8x8(&mut arena);
        let first = repeat(
            &mut arena,
            &base,
            &[2, 2],
            RepeatOn::Threads,
            RepeatOrder::FirstDimFastest,
        )
        .expect("repeat");
        let last = repeat(
            &mut arena,
            &base,
            &[2, 2],
            RepeatOn::Threads,
            RepeatOrder::LastDimFastest,
        )
        .expect("repeat");
        // (9, 10): base thread 10 % 8 // 2 + 4 * (9 % 8) = 5; copy (1, 1) is number 3 either way,
        // (9, 2) is copy 1 first-dim-fastest and copy 2 last-dim-fastest.
        assert_eq!(at(&arena, &first, &[9, 10], 0), (5 + 3 * 32, 0));
        assert_eq!(at(&arena, &first, &[9, 2], 0), (5 + 32, 0));
        assert_eq!(at(&arena, &last, &[9, 2], 0), (5 + 64, 0));
        assert_eq!(first.thread_extent(&arena), 128);
        assert!(
            repeat(
                &mut arena,
                &base,
                &[2],
                RepeatOn::Threads,
                RepeatOrder::LastDimFastest
            )
            .is_err()
        );
        assert!(
            repeat(
                &mut arena,
                &base,
                &[0, 1],
                RepeatOn::Threads,
                RepeatOrder::LastDimFastest
            )
            .is_err()
        );
    }

    #[test]
    fn replicate_adds_whole_thread_groups() {
        let mut arena = ExprArena::new();
        let base = base_8x8(&mut arena);
        let twice = replicate(&mut arena, &base, 2).expect("replicate");
        let four = replicate(&mut arena, &twice, 2).expect("replicate");
        assert_eq!(twice.replicate, 2);
        assert_eq!(twice.threads_of(&arena, &[1, 2]), vec![5, 37]);
        // Replicating a replicated layout spreads whole groups of 64 threads.
        assert_eq!(four.threads_of(&arena, &[1, 2]), vec![5, 37, 69, 101]);
        assert_eq!(four.collision(&arena), None);
        assert!(replicate(&mut arena, &base, 0).is_err());
    }

    #[test]
    fn condensing_drops_replicas_that_repeat_threads() {
        let mut arena = ExprArena::new();
        // Thread `lane + 32 * (rep % 2)` over four replicas: replicas 2 and 3 repeat 0 and 1.
        let periodic = fragment(&mut arena, &[32], 4, |arena, ix, rep| {
            let two = arena.int(2);
            let low = arena.floormod(rep, two);
            let shift = scaled(arena, low, 1, 32);
            (arena.add(ix[0], shift), arena.int(0))
        });
        let condensed = condense_replicas(&mut arena, &periodic).expect("condense");
        assert_eq!(condensed.replicate, 2);
        assert_eq!(condensed.threads_of(&arena, &[3]), vec![3, 35]);
        // Thread `lane + 32 * (rep // 2)`: runs of two replicas share a thread.
        let blocked = fragment(&mut arena, &[32], 4, |arena, ix, rep| {
            let shift = scaled(arena, rep, 2, 32);
            (arena.add(ix[0], shift), arena.int(0))
        });
        let condensed = condense_replicas(&mut arena, &blocked).expect("condense");
        assert_eq!(condensed.replicate, 2);
        assert_eq!(condensed.threads_of(&arena, &[3]), vec![3, 35]);
        assert_eq!(equal_on_domain(&arena, &condensed, &blocked), Ok(true));
        // Every replica on its own thread: nothing to drop.
        let base = base_8x8(&mut arena);
        let spread = replicate(&mut arena, &base, 4).expect("replicate");
        let kept = condense_replicas(&mut arena, &spread).expect("condense");
        assert_eq!(kept.replicate, 4);
    }

    #[test]
    fn binding_a_thread_range_shifts_threads() {
        let mut arena = ExprArena::new();
        let base = base_8x8(&mut arena);
        let bound = bind_thread_range(&mut arena, &base, 128, 32).expect("bind");
        assert_eq!(at(&arena, &bound, &[1, 2], 0), (133, 0));
        let Err(message) = bind_thread_range(&mut arena, &base, 0, 16) else {
            panic!("a 32-thread layout does not fit 16 threads");
        };
        assert!(message.contains("threads 0..=31"), "{message}");
    }

    #[test]
    fn composing_with_access_indices_gives_seed_001s_sparse_layout() {
        // Seed 001: `B[row] = fragment[group * 2 + row_in_group, 0]` over T.Parallel(2, 2) with
        // the fragment on thread `row * 16 + col`: the loop lands on threads 0, 16, 32, 48.
        let mut arena = ExprArena::new();
        let buffer = one_per_thread(&mut arena);
        let access = IndexMap::from_fn(&mut arena, &[2, 2], |arena, ix| {
            let group = scaled(arena, ix[0], 1, 2);
            vec![arena.add(group, ix[1]), arena.int(0)]
        });
        let looped = compose(&mut arena, &buffer, &access).expect("compose");
        let threads: Vec<i64> = points(&looped.shape)
            .iter()
            .map(|p| at(&arena, &looped, p, 0).0)
            .collect();
        assert_eq!(threads, vec![0, 16, 32, 48]);
        // Injective, but 45 of the 49 (thread, register) slots up to thread 48 are holes.
        let table = inverse(&arena, &looped).expect("inverse");
        assert_eq!(table.threads(), 49);
        assert_eq!(table.holes(), 45);
        assert_eq!(table.element_at(32, &[0]), Some((vec![1, 0], 0)));
        assert_eq!(table.element_at(1, &[0]), None);
        let outside = IndexMap::from_fn(&mut arena, &[5], |arena, ix| vec![ix[0], arena.int(0)]);
        assert!(compose(&mut arena, &buffer, &outside).is_err());
    }

    #[test]
    fn composing_with_a_shared_layout_reads_storage_ownership() {
        // A copy spreads 512 storage elements over 64 threads, 8 consecutive each; through a
        // full-bank swizzle, element (1, 0) is stored at 72 and so belongs to thread 9.
        let mut arena = ExprArena::new();
        let storage = FragmentLayout::plan(&mut arena, &[512], 64, 8);
        let swizzle = SharedLayout::full_bank(8, 64, 16).expect("swizzle");
        let map = IndexMap::of_shared_layout(&mut arena, &swizzle).expect("map");
        let logical = compose(&mut arena, &storage, &map).expect("compose");
        assert_eq!(at(&arena, &logical, &[1, 0], 0), (9, 0));
        assert_eq!(at(&arena, &logical, &[6, 9], 0), (441 / 8, 1));
        assert_eq!(logical.collision(&arena), None);
    }

    #[test]
    fn inverse_round_trips_accumulators_and_rejects_collisions() -> Result<(), String> {
        let mut arena = ExprArena::new();
        let accumulator =
            accumulator_layout(&mut arena, 64, 64, 128, tilec_ir::WarpPolicy::Square)?;
        let table = inverse(&arena, &accumulator)?;
        assert_eq!(table.threads(), 128);
        assert_eq!(table.local_shape(), &[32]);
        assert_eq!(table.holes(), 0);
        for point in points(&accumulator.shape) {
            let (thread, local) = at(&arena, &accumulator, &point, 0);
            assert_eq!(table.element_at(thread, &[local]), Some((point, 0)));
        }
        let base = base_8x8(&mut arena);
        let replicated = replicate(&mut arena, &base, 3)?;
        let table = inverse(&arena, &replicated)?;
        assert_eq!(table.element_at(37, &[1]), Some((vec![1, 3], 1)));
        let mut squashed = base.clone();
        squashed.index = vec![arena.int(0)];
        let Err(message) = inverse(&arena, &squashed) else {
            panic!("a layout with one register per thread for two elements is not injective");
        };
        assert!(
            message.contains("[0, 0] (replica 0) and [0, 1] (replica 0)"),
            "{message}"
        );
        Ok(())
    }

    #[test]
    fn containment_follows_seed_001() {
        let mut arena = ExprArena::new();
        let buffer = one_per_thread(&mut arena);
        let same = one_per_thread(&mut arena);
        assert_eq!(contains(&arena, &buffer, &same), Ok(true));
        // Candidate thread(i, j) = i: thread 0 would read (0, 1), which thread 1 holds.
        let by_row = fragment(&mut arena, &[4, 16], 1, |_, ix, _| (ix[0], ix[1]));
        assert_eq!(contains(&arena, &buffer, &by_row), Ok(false));
        let loop_domain = IndexMap::identity(&mut arena, &[4, 16]);
        let found = find_uncontained(
            &arena,
            Access {
                fragment: &buffer,
                indices: &loop_domain,
            },
            Access {
                fragment: &by_row,
                indices: &loop_domain,
            },
            false,
        );
        assert_eq!(
            found,
            Ok(Some(Uncontained::NotOwned {
                point: vec![0, 1],
                replica: 0,
                thread: 0,
                owners: vec![1],
            }))
        );
    }

    #[test]
    fn writes_need_containment_both_ways() {
        // Seed 001's write example over T.Parallel(2, 2): the buffer on thread `i * 2 + j`, the
        // candidate on thread `i` with register `j`. Neither contains the other.
        let mut arena = ExprArena::new();
        let buffer = fragment(&mut arena, &[2, 2], 1, |arena, ix, _| {
            let row = scaled(arena, ix[0], 1, 2);
            (arena.add(row, ix[1]), arena.int(0))
        });
        let candidate = fragment(&mut arena, &[2, 2], 1, |_, ix, _| (ix[0], ix[1]));
        assert_eq!(contains(&arena, &buffer, &candidate), Ok(false));
        assert_eq!(contains(&arena, &candidate, &buffer), Ok(false));
        // A fully replicated buffer holds everything on every thread of its range, and nothing
        // beyond it.
        let everywhere = FragmentLayout::fully_replicated(&mut arena, &[2, 2], 4);
        assert_eq!(contains(&arena, &everywhere, &candidate), Ok(true));
        assert_eq!(contains(&arena, &candidate, &everywhere), Ok(false));
        let beyond = bind_thread_range(&mut arena, &candidate, 8, 2).expect("bind");
        assert_eq!(contains(&arena, &everywhere, &beyond), Ok(false));
    }

    #[test]
    fn containment_through_access_indices_and_registers() {
        // A loop over four rows reading `fragment[i, 0]` of seed 001's buffer.
        let mut arena = ExprArena::new();
        let buffer = one_per_thread(&mut arena);
        let reads = IndexMap::from_fn(&mut arena, &[4], |arena, ix| vec![ix[0], arena.int(0)]);
        let rows = IndexMap::identity(&mut arena, &[4]);
        let on_owner = fragment(&mut arena, &[4], 1, |arena, ix, _| {
            (scaled(arena, ix[0], 1, 16), arena.int(0))
        });
        let on_row = fragment(&mut arena, &[4], 1, |arena, ix, _| (ix[0], arena.int(0)));
        let buffer_access = Access {
            fragment: &buffer,
            indices: &reads,
        };
        let owner = Access {
            fragment: &on_owner,
            indices: &rows,
        };
        let row = Access {
            fragment: &on_row,
            indices: &rows,
        };
        assert_eq!(
            find_uncontained(&arena, buffer_access, owner, true),
            Ok(None)
        );
        let failure = find_uncontained(&arena, buffer_access, row, false).expect("decided");
        let Some(Uncontained::NotOwned { point, thread, .. }) = failure else {
            panic!("thread 1 does not hold row 1's element: {failure:?}");
        };
        assert_eq!((point, thread), (vec![1], 1));
        // Same threads, another register: contained, but not with the registers checked.
        let shifted = fragment(&mut arena, &[4], 1, |arena, ix, _| {
            (scaled(arena, ix[0], 1, 16), arena.int(1))
        });
        let shifted = Access {
            fragment: &shifted,
            indices: &rows,
        };
        assert_eq!(
            find_uncontained(&arena, buffer_access, shifted, false),
            Ok(None)
        );
        assert_eq!(
            find_uncontained(&arena, buffer_access, shifted, true),
            Ok(Some(Uncontained::IndexMismatch {
                point: vec![0],
                small_local: vec![1],
                large_local: vec![0],
            }))
        );
    }

    #[test]
    fn equality_compares_functions_not_formulas() {
        let mut arena = ExprArena::new();
        let planned = FragmentLayout::plan(&mut arena, &[4, 16], 64, 1);
        let written = one_per_thread(&mut arena);
        assert_eq!(equal_on_domain(&arena, &planned, &written), Ok(true));
        // Replicas numbered the other way round hold the same data in the same places.
        let base = base_8x8(&mut arena);
        let forward = replicate(&mut arena, &base, 2).expect("replicate");
        let mut backward = forward.clone();
        let rep = arena.var_expr(forward.rep);
        let one = arena.int(1);
        let flipped = arena.sub(one, rep);
        backward.thread =
            arena.substitute(forward.thread, &|v| (v == forward.rep).then_some(flipped));
        assert_eq!(equal_on_domain(&arena, &forward, &backward), Ok(true));
        let by_row = fragment(&mut arena, &[4, 16], 1, |_, ix, _| (ix[0], ix[1]));
        assert_eq!(equal_on_domain(&arena, &planned, &by_row), Ok(false));
        assert_eq!(
            first_difference(&arena, &planned, &by_row),
            Ok(Some(vec![0, 1]))
        );
        assert_eq!(equal_on_domain(&arena, &planned, &base), Ok(false));
    }
}
