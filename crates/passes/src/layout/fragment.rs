//! Fragment layouts: which thread holds each element of a tile, and where in its registers.
//!
//! A [`FragmentLayout`] maps a logical index (one variable per dimension) plus a replica number to a
//! thread and a local (per-thread) index, as formulas in an [`ExprArena`]. Tile shapes are
//! compile-time constants, so every property — injectivity, containment, the per-thread register
//! count — is decided exactly by enumerating the domain, never by a prover that can answer
//! "unknown".

use rustc_hash::{FxHashMap, FxHashSet};
use tilec_ir::{ExprArena, ExprId, ExprProgram, VarId};

/// Points of a domain larger than this are not enumerated; such a tile is far beyond any register
/// budget anyway, and the check that needs the enumeration reports it as too large.
pub const MAX_POINTS: u64 = 1 << 22;

/// A fragment layout over a logical shape, with its formulas in the arena that owns them.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct FragmentLayout {
    pub shape: Vec<i64>,
    /// One variable per logical dimension, with the dimension's extent.
    pub vars: Vec<VarId>,
    /// The replica variable, ranging over `0..replicate`.
    pub rep: VarId,
    pub replicate: i64,
    /// The thread holding element `vars`, copy `rep`.
    pub thread: ExprId,
    /// The element's position in its thread's registers (one expression per local dimension); it
    /// does not depend on the replica.
    pub index: Vec<ExprId>,
}

/// The most (element, replica) pairs [`FragmentLayout::held_per_thread`] enumerates; the largest
/// fragment layout inference enumerates (2^20 elements) fits.
const HELD_ENUMERATION_LIMIT: i64 = 1 << 20;

/// Row-major strides of `shape`: the linear position of an index is its dot product with them.
fn row_major_strides(shape: &[i64]) -> Vec<i64> {
    let mut strides = vec![1i64; shape.len()];
    for k in (0..shape.len().saturating_sub(1)).rev() {
        strides[k] = strides[k + 1].saturating_mul(shape[k + 1]);
    }
    strides
}

/// Marks an [`Owners`] entry whose thread formula has no value.
pub const NO_THREAD: i64 = -1;

/// Which threads hold each element of a fragment: a table built once by enumeration, so that a
/// containment check costs one lookup per access.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Owners {
    replicate: usize,
    shape: Vec<i64>,
    /// `threads[e * replicate..][..replicate]`: the sorted owners of the element with row-major
    /// number `e`.
    threads: Vec<i64>,
}

impl Owners {
    /// The row-major number of `point`, or `None` when it lies outside the fragment.
    pub fn ordinal(&self, point: &[i64]) -> Option<usize> {
        if point.len() != self.shape.len() {
            return None;
        }
        let mut ordinal = 0usize;
        for (&index, &extent) in point.iter().zip(&self.shape) {
            if !(0..extent).contains(&index) {
                return None;
            }
            ordinal = ordinal * usize::try_from(extent).ok()? + usize::try_from(index).ok()?;
        }
        Some(ordinal)
    }

    /// The sorted threads holding the element with row-major number `ordinal`.
    pub fn of(&self, ordinal: usize) -> &[i64] {
        let start = ordinal * self.replicate;
        self.threads
            .get(start..start + self.replicate)
            .unwrap_or(&[])
    }

    pub fn replicate(&self) -> usize {
        self.replicate
    }

    pub fn shape(&self) -> &[i64] {
        &self.shape
    }

    pub fn elements(&self) -> usize {
        self.threads.len() / self.replicate.max(1)
    }
}

/// Two (element, replica) pairs that land in the same register of the same thread.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Collision {
    pub first: (Vec<i64>, i64),
    pub second: (Vec<i64>, i64),
    pub thread: i64,
    pub local: Vec<i64>,
}

/// Calls `visit` with every point of `shape`, row-major, reusing one buffer (the hot loops of
/// inference enumerate tiles of thousands of points many times). Visits nothing when the domain is
/// empty or larger than [`MAX_POINTS`]. `visit` returns false to stop early.
pub fn for_each_point(shape: &[i64], mut visit: impl FnMut(&[i64]) -> bool) {
    let total = shape.iter().try_fold(1u64, |acc, &extent| {
        acc.checked_mul(u64::try_from(extent).ok()?)
    });
    match total {
        Some(total) if total > 0 && total <= MAX_POINTS => {}
        _ => return,
    }
    let mut point = vec![0i64; shape.len()];
    loop {
        if !visit(&point) {
            return;
        }
        let mut dim = shape.len();
        loop {
            if dim == 0 {
                return;
            }
            dim -= 1;
            point[dim] += 1;
            if point[dim] < shape[dim] {
                break;
            }
            point[dim] = 0;
        }
    }
}

/// Threads at or beyond this are no thread of any block: [`FragmentLayout::thread_histogram`]
/// does not count them.
const MAX_THREAD: i64 = 1 << 16;

/// Points per batch of [`for_each_chunk`]: enough to amortise a program's dispatch over many
/// points, few enough that the program's registers stay in cache.
pub const CHUNK_POINTS: usize = 1024;

/// Calls `visit(first, columns, len)` with the points of `shape` in row-major chunks of at most
/// [`CHUNK_POINTS`]: `columns[d][p]` is coordinate `d` of the chunk's point `p`, and `first` is
/// the row-major number of its first point. Visits nothing when the domain is empty or larger
/// than [`MAX_POINTS`]. `visit` returns false to stop early.
pub fn for_each_chunk(shape: &[i64], mut visit: impl FnMut(u64, &[&[i64]], usize) -> bool) {
    let total = shape.iter().try_fold(1u64, |acc, &extent| {
        acc.checked_mul(u64::try_from(extent).ok()?)
    });
    let total = match total {
        Some(total) if total > 0 && total <= MAX_POINTS => total,
        _ => return,
    };
    // strides[d]: how many consecutive points share coordinate d (row-major).
    let mut strides = vec![1u64; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        let Ok(extent) = u64::try_from(shape[d + 1]) else {
            return;
        };
        strides[d] = strides[d + 1] * extent;
    }
    let mut columns: Vec<Vec<i64>> = vec![Vec::with_capacity(CHUNK_POINTS); shape.len()];
    let mut first = 0u64;
    while first < total {
        let len =
            usize::try_from(total - first).map_or(CHUNK_POINTS, |rest| rest.min(CHUNK_POINTS));
        for ((column, &stride), &extent) in columns.iter_mut().zip(&strides).zip(shape) {
            fill_coordinate(column, first, len, stride, extent);
        }
        let refs: Vec<&[i64]> = columns.iter().map(Vec::as_slice).collect();
        if !visit(first, &refs, len) {
            return;
        }
        first += len as u64;
    }
}

/// The value of the one-output `program` (compiled over one variable per dimension of `shape`) at
/// every point of `shape`, row-major, evaluated in chunks. `None` when some point has no value, or
/// when the domain is empty or larger than [`MAX_POINTS`].
pub fn values_over(program: &mut ExprProgram, shape: &[i64]) -> Option<Vec<i64>> {
    let total = shape.iter().try_fold(1u64, |acc, &extent| {
        acc.checked_mul(u64::try_from(extent).ok()?)
    })?;
    if total == 0 || total > MAX_POINTS {
        return None;
    }
    let mut values = Vec::with_capacity(usize::try_from(total).ok()?);
    for_each_chunk(shape, |_, columns, len| {
        match program.run_batch(columns, len) {
            Some(batch) => {
                values.extend_from_slice(batch.column(0));
                true
            }
            None => false,
        }
    });
    (values.len() as u64 == total).then_some(values)
}

/// Writes coordinate values of points `first..first + len` for a dimension whose value changes
/// every `stride` points and wraps at `extent`, as runs of equal values.
fn fill_coordinate(column: &mut Vec<i64>, first: u64, len: usize, stride: u64, extent: i64) {
    column.clear();
    // The caller has checked that every extent is positive, so the remainder lies in
    // `0..extent` and fits an i64.
    #[allow(clippy::cast_possible_wrap, clippy::cast_sign_loss)]
    let mut value = ((first / stride) % extent as u64) as i64;
    let mut run = stride - first % stride;
    let mut left = len;
    while left > 0 {
        let take = usize::try_from(run).map_or(left, |run| run.min(left));
        column.extend(std::iter::repeat_n(value, take));
        left -= take;
        value = (value + 1) % extent;
        run = stride;
    }
}

/// The largest value of `expr` over the box `vars` × `shape`, or `None` when some point has no
/// value or the domain is empty.
///
/// Layout formulas are mostly sums of terms over separate variables (`i // 16 * 8 + j % 8`), and the
/// maximum of such a sum is the sum of the terms' maxima, each found by enumerating only its own
/// variables: exact, and for a 128 × 128 tile 256 evaluations instead of 16 384.
pub fn max_over_domain(
    arena: &ExprArena,
    expr: ExprId,
    vars: &[VarId],
    shape: &[i64],
) -> Option<i64> {
    let mut terms = Vec::new();
    collect_terms(arena, expr, &mut terms);
    // Group the terms into components that share variables (a small union of var sets).
    let mut groups: Vec<(Vec<VarId>, Vec<ExprId>)> = Vec::new();
    for term in terms {
        let term_vars = arena.vars_of(term);
        let (mut joined, rest): (Vec<_>, Vec<_>) = groups
            .into_iter()
            .partition(|(group_vars, _)| group_vars.iter().any(|v| term_vars.contains(v)));
        let mut merged = (term_vars, vec![term]);
        for (group_vars, group_terms) in joined.drain(..) {
            for var in group_vars {
                if !merged.0.contains(&var) {
                    merged.0.push(var);
                }
            }
            merged.1.extend(group_terms);
        }
        groups = rest;
        groups.push(merged);
    }
    let mut total = 0i64;
    for (group_vars, group_terms) in groups {
        total = total.checked_add(max_of_terms(arena, &group_terms, &group_vars, vars, shape)?)?;
    }
    Some(total)
}

fn collect_terms(arena: &ExprArena, expr: ExprId, terms: &mut Vec<ExprId>) {
    match *arena.get(expr) {
        tilec_ir::Expr::Add(a, b) => {
            collect_terms(arena, a, terms);
            collect_terms(arena, b, terms);
        }
        _ => terms.push(expr),
    }
}

/// The largest value of the sum of `terms`, which read only `group_vars`, over those variables'
/// part of the domain.
fn max_of_terms(
    arena: &ExprArena,
    terms: &[ExprId],
    group_vars: &[VarId],
    vars: &[VarId],
    shape: &[i64],
) -> Option<i64> {
    let mut sub_shape = Vec::with_capacity(group_vars.len());
    for var in group_vars {
        let dim = vars.iter().position(|v| v == var)?;
        sub_shape.push(*shape.get(dim)?);
    }
    let mut program = ExprProgram::compile(arena, group_vars, terms);
    let mut largest: Option<i64> = None;
    let mut failed = false;
    let mut sums = Vec::new();
    let mut visit = |columns: &[&[i64]], len: usize| {
        let Some(batch) = program.run_batch(columns, len) else {
            failed = true;
            return false;
        };
        sums.clear();
        sums.resize(len, 0i64);
        for k in 0..terms.len() {
            for (sum, &value) in sums.iter_mut().zip(batch.column(k)) {
                *sum = sum.saturating_add(value);
            }
        }
        largest = largest.max(sums.iter().copied().max());
        true
    };
    if sub_shape.is_empty() {
        // Constant terms: one evaluation, at no point.
        visit(&[], 1);
    } else {
        for_each_chunk(&sub_shape, |_, columns, len| visit(columns, len));
    }
    if failed { None } else { largest }
}

/// Every point of `shape`, row-major. Empty when the domain is empty or larger than [`MAX_POINTS`].
pub fn points(shape: &[i64]) -> Vec<Vec<i64>> {
    let total = shape.iter().try_fold(1u64, |acc, &extent| {
        acc.checked_mul(u64::try_from(extent).ok()?)
    });
    match total {
        Some(total) if total > 0 && total <= MAX_POINTS => {}
        _ => return Vec::new(),
    }
    let mut out = Vec::new();
    let mut point = vec![0i64; shape.len()];
    loop {
        out.push(point.clone());
        let mut dim = shape.len();
        loop {
            if dim == 0 {
                return out;
            }
            dim -= 1;
            point[dim] += 1;
            if point[dim] < shape[dim] {
                break;
            }
            point[dim] = 0;
        }
    }
}

/// The point with row-major number `ordinal` in `shape`.
pub(super) fn unflatten(mut ordinal: u64, shape: &[i64]) -> Vec<i64> {
    let mut point = vec![0i64; shape.len()];
    for (slot, &extent) in point.iter_mut().zip(shape).rev() {
        let extent = u64::try_from(extent).unwrap_or(1).max(1);
        // `extent` came from an i64, so the remainder below it fits an i64.
        #[allow(clippy::cast_possible_wrap)]
        let coordinate = (ordinal % extent) as i64;
        *slot = coordinate;
        ordinal /= extent;
    }
    point
}

/// The row-major flat index of `indices` in the constant `shape`.
pub fn flatten_exprs(arena: &mut ExprArena, indices: &[ExprId], shape: &[i64]) -> ExprId {
    let shape = arena.ints(shape);
    arena.flatten_row_major(indices, &shape)
}

/// Row-major flattening of `vars` over `shape`, as an expression: `i * 64 + j`.
pub fn flatten(arena: &mut ExprArena, vars: &[VarId], shape: &[i64]) -> ExprId {
    let indices: Vec<ExprId> = vars.iter().map(|&v| arena.var_expr(v)).collect();
    flatten_exprs(arena, &indices, shape)
}

/// Fresh logical variables named `i, j, k, ...` with the given extents.
pub fn fresh_vars(arena: &mut ExprArena, shape: &[i64]) -> Vec<VarId> {
    const NAMES: [&str; 6] = ["i", "j", "k", "l", "m", "n"];
    shape
        .iter()
        .enumerate()
        .map(|(dim, &extent)| arena.var(NAMES.get(dim).copied().unwrap_or("x"), Some(extent)))
        .collect()
}

impl FragmentLayout {
    /// Every thread holds every element: `thread = rep`, `local = flattened index`.
    pub fn fully_replicated(arena: &mut ExprArena, shape: &[i64], threads: i64) -> FragmentLayout {
        let vars = fresh_vars(arena, shape);
        let rep = arena.var("rep", Some(threads));
        let thread = arena.var_expr(rep);
        let index = vec![flatten(arena, &vars, shape)];
        FragmentLayout {
            shape: shape.to_vec(),
            vars,
            rep,
            replicate: threads,
            thread,
            index,
        }
    }

    /// TileLang's PlanLoopPartition: the iteration space flattened row-major, chunks of `vector`
    /// consecutive elements dealt to consecutive threads, wrapping around. When there are fewer
    /// chunks than threads, the layout is replicated over the rest of the threads.
    pub fn plan(arena: &mut ExprArena, shape: &[i64], threads: i64, vector: i64) -> FragmentLayout {
        let vars = fresh_vars(arena, shape);
        let total: i64 = shape.iter().product();
        let vector = vector.max(1);
        let chunks = (total / vector).max(1);
        let flat = flatten(arena, &vars, shape);
        let v = arena.int(vector);
        let chunk = arena.floordiv(flat, v);
        let within = arena.floormod(flat, v);
        if chunks < threads && threads % chunks == 0 {
            let replicate = threads / chunks;
            let rep = arena.var("rep", Some(replicate));
            let rep_expr = arena.var_expr(rep);
            let stride = arena.int(chunks);
            let offset = arena.mul(rep_expr, stride);
            let thread = arena.add(chunk, offset);
            return FragmentLayout {
                shape: shape.to_vec(),
                vars,
                rep,
                replicate,
                thread,
                index: vec![within],
            };
        }
        let t = arena.int(threads);
        let thread = arena.floormod(chunk, t);
        let round = arena.floordiv(chunk, t);
        let round_base = arena.mul(round, v);
        let index = arena.add(round_base, within);
        let rep = arena.var("rep", Some(1));
        FragmentLayout {
            shape: shape.to_vec(),
            vars,
            rep,
            replicate: 1,
            thread,
            index: vec![index],
        }
    }

    /// The same layout seen through a buffer of another shape over the same elements (TileLang's
    /// `Fragment::Reshape`, what `T.reshape` and `T.view` aliases get): fresh variables over
    /// `shape`, flattened row-major and unflattened over the old shape. Thread and register of
    /// every element stay where they were. The element counts must agree.
    pub fn reshape(&self, arena: &mut ExprArena, shape: &[i64]) -> FragmentLayout {
        let vars = fresh_vars(arena, shape);
        let flat = flatten(arena, &vars, shape);
        let old_shape = arena.ints(&self.shape);
        let old_indices = arena.unflatten_row_major(flat, &old_shape);
        let bindings: Vec<(VarId, ExprId)> = self.vars.iter().copied().zip(old_indices).collect();
        let lookup = |v: VarId| bindings.iter().find(|(var, _)| *var == v).map(|(_, e)| *e);
        FragmentLayout {
            shape: shape.to_vec(),
            vars,
            rep: self.rep,
            replicate: self.replicate,
            thread: arena.substitute(self.thread, &lookup),
            index: self
                .index
                .iter()
                .map(|&e| arena.substitute(e, &lookup))
                .collect(),
        }
    }

    fn env<'a>(&'a self, point: &'a [i64], rep: i64) -> impl Fn(VarId) -> Option<i64> + 'a {
        move |var| {
            if var == self.rep {
                return Some(rep);
            }
            self.vars
                .iter()
                .position(|&v| v == var)
                .and_then(|dim| point.get(dim).copied())
        }
    }

    pub fn thread_of(&self, arena: &ExprArena, point: &[i64], rep: i64) -> Option<i64> {
        arena.eval(self.thread, &self.env(point, rep))
    }

    pub fn local_of(&self, arena: &ExprArena, point: &[i64]) -> Option<Vec<i64>> {
        let env = self.env(point, 0);
        self.index.iter().map(|&e| arena.eval(e, &env)).collect()
    }

    /// The per-thread local shape: for each local dimension, the largest index plus one.
    pub fn local_shape(&self, arena: &ExprArena) -> Vec<i64> {
        let separable: Option<Vec<i64>> = self
            .index
            .iter()
            .map(|&e| max_over_domain(arena, e, &self.vars, &self.shape).map(|max| max + 1))
            .collect();
        if let Some(shape) = separable {
            return shape;
        }
        let mut shape = vec![0i64; self.index.len()];
        let mut program = ExprProgram::compile(arena, &self.vars, &self.index);
        for_each_chunk(&self.shape, |_, columns, len| {
            if let Some(batch) = program.run_batch(columns, len) {
                for (k, extent) in shape.iter_mut().enumerate() {
                    let largest = batch.column(k).iter().copied().max().unwrap_or(-1);
                    *extent = (*extent).max(largest + 1);
                }
                return true;
            }
            // Some point fails (an index divides by zero): take each output where it has a value.
            for p in 0..len {
                let point: Vec<i64> = columns.iter().map(|column| column[p]).collect();
                for (extent, &expr) in shape.iter_mut().zip(&self.index) {
                    if let Some(value) = arena.eval(expr, &self.env(&point, 0)) {
                        *extent = (*extent).max(value + 1);
                    }
                }
            }
            true
        });
        shape
    }

    /// Elements each thread holds (what TileLang allocates as its local buffer).
    pub fn local_size(&self, arena: &ExprArena) -> i64 {
        self.local_shape(arena).iter().product()
    }

    /// Registers' worth of elements one thread actually holds: the most distinct local positions
    /// any thread has. Where the local index is sparse this is less than [`Self::local_size`],
    /// which counts the index's range: the row maximum of a 128-row tensor-core tile gives each
    /// thread 4 rows at local positions up to 33, and a thread spends registers on the 4 it uses
    /// (the CUDA compiler keeps only the elements a thread touches), not on 34.
    pub fn held_per_thread(&self, arena: &ExprArena) -> i64 {
        let local = self.local_size(arena);
        let pairs = self
            .shape
            .iter()
            .product::<i64>()
            .saturating_mul(self.replicate);
        // Without room for holes (every thread's positions filled) the range is the count, and a
        // domain past what layout inference enumerates keeps the range as a safe upper bound.
        let threads = self.thread_extent(arena);
        if threads.saturating_mul(local) <= pairs || pairs > HELD_ENUMERATION_LIMIT {
            return local;
        }
        let strides = row_major_strides(&self.local_shape(arena));
        let mut held: FxHashSet<(i64, i64)> = FxHashSet::default();
        let mut complete = true;
        self.for_each_chunk_mapped(arena, |_, len, threads, locals| {
            if locals.len() != strides.len() {
                complete = false;
                return false;
            }
            for p in 0..len {
                let position: i64 = locals.iter().zip(&strides).map(|(l, s)| l[p] * s).sum();
                for thread in threads.iter().filter_map(|replica| replica[p]) {
                    held.insert((thread, position));
                }
            }
            true
        });
        if !complete {
            return local;
        }
        let mut per_thread: FxHashMap<i64, i64> = FxHashMap::default();
        for (thread, _) in held {
            *per_thread.entry(thread).or_default() += 1;
        }
        per_thread.into_values().max().unwrap_or(local).min(local)
    }

    /// Calls `visit(first, len, threads, locals)` per chunk of the domain, where `threads[r][p]`
    /// is the thread of the chunk's point `p`, replica `r` (`None` where it has no value) and
    /// `locals[k][p]` its local index `k` (empty where some index has no value).
    fn for_each_chunk_mapped(
        &self,
        arena: &ExprArena,
        mut visit: impl FnMut(u64, usize, &[Vec<Option<i64>>], &[Vec<i64>]) -> bool,
    ) {
        let mut inputs = self.vars.clone();
        inputs.push(self.rep);
        let mut thread = ExprProgram::compile(arena, &inputs, &[self.thread]);
        let mut index = ExprProgram::compile(arena, &self.vars, &self.index);
        let mut rep_column = Vec::with_capacity(CHUNK_POINTS);
        for_each_chunk(&self.shape, |first, columns, len| {
            let locals: Vec<Vec<i64>> = match index.run_batch(columns, len) {
                Some(batch) => (0..batch.outputs())
                    .map(|k| batch.column(k).to_vec())
                    .collect(),
                None => Vec::new(),
            };
            let threads: Vec<Vec<Option<i64>>> = (0..self.replicate)
                .map(|rep| {
                    rep_column.clear();
                    rep_column.resize(len, rep);
                    let mut with_rep = columns.to_vec();
                    with_rep.push(&rep_column);
                    match thread.run_batch(&with_rep, len) {
                        Some(batch) => batch.column(0).iter().map(|&t| Some(t)).collect(),
                        None => (0..len)
                            .map(|p| {
                                let point: Vec<i64> = columns.iter().map(|c| c[p]).collect();
                                self.thread_of(arena, &point, rep)
                            })
                            .collect(),
                    }
                })
                .collect();
            visit(first, len, &threads, &locals)
        });
    }

    /// The number of threads the layout uses: the largest thread plus one. The largest thread is
    /// found term by term where the formula is separable (`max_over_domain`), which is much
    /// cheaper than the histogram's pass over every element.
    pub fn thread_extent(&self, arena: &ExprArena) -> i64 {
        let mut vars = self.vars.clone();
        vars.push(self.rep);
        let mut domain = self.shape.clone();
        domain.push(self.replicate);
        match max_over_domain(arena, self.thread, &vars, &domain) {
            Some(largest) if (0..MAX_THREAD).contains(&largest) => largest + 1,
            // The histogram counts only threads below `MAX_THREAD`, so its length fits an i64.
            #[allow(clippy::cast_possible_wrap)]
            _ => self.thread_histogram(arena).len() as i64,
        }
    }

    /// How many (element, replica) pairs each thread `0..threads` holds; pairs on other threads
    /// are not counted.
    pub fn thread_loads(&self, arena: &ExprArena, threads: i64) -> Vec<u64> {
        let mut loads = self.thread_histogram(arena);
        loads.resize(usize::try_from(threads).unwrap_or(0), 0);
        loads
    }

    /// How many (element, replica) pairs each thread holds, for threads `0..=largest`, in one
    /// batched pass over the domain extended by the replica. Negative threads, and threads beyond
    /// any block, are not counted.
    pub fn thread_histogram(&self, arena: &ExprArena) -> Vec<u64> {
        let mut domain = self.shape.clone();
        domain.push(self.replicate);
        let mut inputs = self.vars.clone();
        inputs.push(self.rep);
        let mut program = ExprProgram::compile(arena, &inputs, &[self.thread]);
        let mut histogram: Vec<u64> = Vec::new();
        let mut count = |thread: i64| {
            if (0..MAX_THREAD).contains(&thread) {
                // Checked to lie in `0..MAX_THREAD` just above.
                #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
                let slot = thread as usize;
                if slot >= histogram.len() {
                    histogram.resize(slot + 1, 0);
                }
                histogram[slot] += 1;
            }
        };
        for_each_chunk(&domain, |_, columns, len| {
            match program.run_batch(columns, len) {
                Some(batch) => batch.column(0).iter().for_each(|&t| count(t)),
                None => {
                    for p in 0..len {
                        let point: Vec<i64> = columns.iter().map(|column| column[p]).collect();
                        if let Some(thread) = program.run_one(&point) {
                            count(thread);
                        }
                    }
                }
            }
            true
        });
        histogram
    }

    /// The threads holding each element, as a table for containment checks.
    pub fn owners(&self, arena: &ExprArena) -> Owners {
        let replicate = usize::try_from(self.replicate).unwrap_or(0);
        let size = self
            .shape
            .iter()
            .try_fold(1usize, |acc, &e| acc.checked_mul(usize::try_from(e).ok()?))
            .unwrap_or(0);
        let mut threads = vec![NO_THREAD; size.saturating_mul(replicate)];
        self.for_each_chunk_mapped(arena, |first, len, per_replica, _| {
            for (rep, column) in per_replica.iter().enumerate() {
                for (p, thread) in column.iter().enumerate().take(len) {
                    // `first` is below the domain's size, at most `MAX_POINTS`, which fits usize.
                    #[allow(clippy::cast_possible_truncation)]
                    let slot = (first as usize + p) * replicate + rep;
                    if let (Some(thread), Some(entry)) = (thread, threads.get_mut(slot)) {
                        *entry = *thread;
                    }
                }
            }
            true
        });
        for group in threads.chunks_mut(replicate.max(1)) {
            group.sort_unstable();
        }
        Owners {
            replicate,
            shape: self.shape.clone(),
            threads,
        }
    }

    /// The first pair of (element, replica) that shares a thread and a register, if any.
    pub fn collision(&self, arena: &ExprArena) -> Option<Collision> {
        let local_shape = self.local_shape(arena);
        // Keys are (thread, flattened register); values the row-major number of the element, so the
        // hot loop allocates nothing per point.
        let mut seen: FxHashMap<(i64, i64), (u64, i64)> = FxHashMap::default();
        let mut found = None;
        self.for_each_chunk_mapped(arena, |first, len, threads, locals| {
            if locals.len() != self.index.len() {
                // A register index without a value is not a collision; such a layout is
                // rejected elsewhere.
                return true;
            }
            for p in 0..len {
                let flat = locals
                    .iter()
                    .zip(&local_shape)
                    .fold(0i64, |flat, (column, &extent)| {
                        flat * extent.max(1) + column[p]
                    });
                for (rep, column) in threads.iter().enumerate() {
                    // A replica's number is below the fragment's i64 replica count.
                    #[allow(clippy::cast_possible_wrap)]
                    let rep = rep as i64;
                    let Some(thread) = column[p] else {
                        continue;
                    };
                    let ordinal = first + p as u64;
                    if let Some((earlier, earlier_rep)) =
                        seen.insert((thread, flat), (ordinal, rep))
                    {
                        found = Some(Collision {
                            first: (unflatten(earlier, &self.shape), earlier_rep),
                            second: (unflatten(ordinal, &self.shape), rep),
                            thread,
                            local: locals.iter().map(|column| column[p]).collect(),
                        });
                        return false;
                    }
                }
            }
            true
        });
        found
    }

    /// `thread ... | index (...) | replicate r`: the layout on one line, for tests and messages.
    pub fn describe(&self, arena: &ExprArena) -> String {
        let index: Vec<String> = self
            .index
            .iter()
            .map(|&e| arena.display(e).to_string())
            .collect();
        format!(
            "thread {} | index ({}) | replicate {}",
            arena.display(self.thread),
            index.join(", "),
            self.replicate
        )
    }

    /// The threads holding `point` (one per replica).
    pub fn threads_of(&self, arena: &ExprArena, point: &[i64]) -> Vec<i64> {
        (0..self.replicate)
            .filter_map(|rep| self.thread_of(arena, point, rep))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use tilec_ir::ExprArena;

    use super::FragmentLayout;

    #[test]
    fn plan_matches_tilelang_for_softmax_rows() {
        // softmax.py: x is (2, 4096) over 256 threads with 8-wide vectors; TileLang prints
        // Thread: _j % 2048 // 8, Index: _i * 16 + _j // 2048 * 8 + _j % 8.
        let mut arena = ExprArena::new();
        let layout = FragmentLayout::plan(&mut arena, &[2, 4096], 256, 8);
        assert_eq!(
            layout.describe(&arena),
            "thread j // 8 % 256 | index (i * 16 + j // 2048 * 8 + j % 8) | replicate 1"
        );
        assert_eq!(layout.local_size(&arena), 32);
        assert_eq!(layout.thread_extent(&arena), 256);
        assert_eq!(layout.collision(&arena), None);
    }

    #[test]
    fn plan_replicates_when_there_are_fewer_chunks_than_threads() {
        let mut arena = ExprArena::new();
        let layout = FragmentLayout::plan(&mut arena, &[8], 128, 1);
        assert_eq!(
            layout.describe(&arena),
            "thread i + rep * 8 | index (0) | replicate 16"
        );
        assert_eq!(layout.collision(&arena), None);
    }

    #[test]
    fn collisions_name_two_elements_and_their_thread() {
        let mut arena = ExprArena::new();
        let mut layout = FragmentLayout::plan(&mut arena, &[4, 4], 4, 1);
        // Dropping the register index makes every thread hold four elements in one register.
        layout.index = vec![arena.int(0)];
        let collision = layout
            .collision(&arena)
            .map(|c| (c.first.0, c.second.0, c.thread));
        assert_eq!(collision, Some((vec![0, 0], vec![1, 0], 0)));
    }

    #[test]
    fn chunks_list_the_points_in_row_major_order() {
        for shape in [vec![3, 700, 2], vec![5], vec![1, 1], vec![4, 1, 1030]] {
            let mut expected = Vec::new();
            super::for_each_point(&shape, |point| {
                expected.push(point.to_vec());
                true
            });
            let mut chunked = Vec::new();
            super::for_each_chunk(&shape, |first, columns, len| {
                assert_eq!(first, chunked.len() as u64);
                for p in 0..len {
                    chunked.push(columns.iter().map(|column| column[p]).collect::<Vec<_>>());
                }
                true
            });
            assert_eq!(chunked, expected, "shape {shape:?}");
        }
    }

    #[test]
    fn separable_maxima_equal_brute_force() {
        let mut arena = ExprArena::new();
        let shape = [6, 10, 4];
        let vars = super::fresh_vars(&mut arena, &shape);
        let [i, j, k] = [0, 1, 2].map(|d| arena.var_expr(vars[d]));
        let (two, three, five, minus) = (arena.int(2), arena.int(3), arena.int(5), arena.int(-7));
        let j_mod = arena.floormod(j, three);
        let i_div = arena.floordiv(i, two);
        let scaled = arena.mul(i_div, five);
        let mixed = arena.mul(i, k);
        let negative = arena.mul(j, minus);
        let sum1 = arena.add(scaled, j_mod);
        let sum2 = arena.add(sum1, mixed);
        let sum3 = arena.add(sum2, negative);
        let sum4 = arena.add(sum3, i);
        for expr in [j_mod, sum1, sum2, sum3, sum4, five] {
            let mut brute = None;
            super::for_each_point(&shape, |point| {
                let env = |v| vars.iter().position(|&u| u == v).map(|d| point[d]);
                brute = brute.max(arena.eval(expr, &env));
                true
            });
            let got = super::max_over_domain(&arena, expr, &vars, &shape);
            assert_eq!(got, brute, "{}", arena.display(expr));
        }
    }

    #[test]
    fn fully_replicated_holds_everything_everywhere() {
        let mut arena = ExprArena::new();
        let layout = FragmentLayout::fully_replicated(&mut arena, &[2], 128);
        assert_eq!(
            layout.describe(&arena),
            "thread rep | index (i) | replicate 128"
        );
        assert_eq!(layout.threads_of(&arena, &[1]).len(), 128);
        assert_eq!(layout.local_size(&arena), 2);
    }
}
