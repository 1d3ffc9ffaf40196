//! Fragment layouts: which thread holds each element of a tile, and where in its registers.
//!
//! A [`FragmentLayout`] maps a logical index (one variable per dimension) plus a replica number to a
//! thread and a local (per-thread) index, as formulas in an [`ExprArena`]. Tile shapes are
//! compile-time constants, so every property — injectivity, containment, the per-thread register
//! count — is decided exactly by enumerating the domain, never by a prover that can answer
//! "unknown".

use tilec_ir::{ExprArena, ExprId, VarId};

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
fn unflatten(mut ordinal: u64, shape: &[i64]) -> Vec<i64> {
    let mut point = vec![0i64; shape.len()];
    for (slot, &extent) in point.iter_mut().zip(shape).rev() {
        let extent = u64::try_from(extent).unwrap_or(1).max(1);
        *slot = (ordinal % extent) as i64;
        ordinal /= extent;
    }
    point
}

/// Row-major flattening of `vars` over `shape`, as an expression: `i * 64 + j`.
pub fn flatten(arena: &mut ExprArena, vars: &[VarId], shape: &[i64]) -> ExprId {
    let mut flat = arena.int(0);
    for (&var, &extent) in vars.iter().zip(shape) {
        let extent = arena.int(extent);
        let scaled = arena.mul(flat, extent);
        let term = arena.var_expr(var);
        flat = arena.add(scaled, term);
    }
    flat
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
        let mut shape = vec![0i64; self.index.len()];
        for_each_point(&self.shape, |point| {
            let env = self.env(point, 0);
            for (extent, &expr) in shape.iter_mut().zip(&self.index) {
                if let Some(value) = arena.eval(expr, &env) {
                    *extent = (*extent).max(value + 1);
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

    /// The number of threads the layout uses: the largest thread plus one.
    pub fn thread_extent(&self, arena: &ExprArena) -> i64 {
        let mut extent = 0;
        for_each_point(&self.shape, |point| {
            for rep in 0..self.replicate {
                if let Some(thread) = self.thread_of(arena, point, rep) {
                    extent = extent.max(thread + 1);
                }
            }
            true
        });
        extent
    }

    /// The first pair of (element, replica) that shares a thread and a register, if any.
    pub fn collision(&self, arena: &ExprArena) -> Option<Collision> {
        let local_shape = self.local_shape(arena);
        // Keys are (thread, flattened register); values the row-major number of the element, so the
        // hot loop allocates nothing per point.
        let mut seen: rustc_hash::FxHashMap<(i64, i64), (u64, i64)> =
            rustc_hash::FxHashMap::default();
        let mut ordinal = 0u64;
        let mut found = None;
        for_each_point(&self.shape, |point| {
            let env = self.env(point, 0);
            let mut flat = 0i64;
            for (&expr, &extent) in self.index.iter().zip(&local_shape) {
                let Some(value) = arena.eval(expr, &env) else {
                    return true;
                };
                flat = flat * extent.max(1) + value;
            }
            for rep in 0..self.replicate {
                let Some(thread) = self.thread_of(arena, point, rep) else {
                    continue;
                };
                if let Some((first, first_rep)) = seen.insert((thread, flat), (ordinal, rep)) {
                    let local = self.local_of(arena, point).unwrap_or_default();
                    let first = (unflatten(first, &self.shape), first_rep);
                    found = Some(Collision {
                        first,
                        second: (point.to_vec(), rep),
                        thread,
                        local,
                    });
                    return false;
                }
            }
            ordinal += 1;
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
