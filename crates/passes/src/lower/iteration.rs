//! How a laid-out loop runs on the threads: for each thread and each of its steps, which iteration
//! (and which replica) it executes.
//!
//! The loop layout maps an iteration and a replica to a thread; lowering needs the other direction.
//! Candidates are built in closed form — a bit permutation (every layout of power-of-two tiles that
//! inference produces: plans, tensor-core layouts, reductions, transposes) and TileLang's
//! PlanLoopPartition formula (any extent) — and each candidate is checked by enumeration: every
//! (iteration, replica) must be visited exactly once, by the thread the layout names. When no
//! candidate passes (a sparse thread map), every thread scans the iterations and keeps its own.

use tilec_ir::{ExprArena, ExprId, ExprProgram, VarId};

use crate::layout::FragmentLayout;
use crate::layout::fragment::CHUNK_POINTS;

/// The schedule of one laid-out loop.
#[derive(Clone, Debug)]
pub(crate) enum Iteration {
    /// Thread `t < threads` at step `s < steps` runs iteration `coords(t, s)`, replica `rep(t, s)`,
    /// when `bound` (an index that must stay below the given limit) holds.
    Closed {
        /// The step variable the closed forms are written over (extent `steps`).
        step: VarId,
        threads: i64,
        steps: i64,
        coords: Vec<ExprId>,
        rep: ExprId,
        bound: Option<(ExprId, i64)>,
    },
    /// Every thread walks all iterations and replicas and runs those the layout gives it.
    Scan,
}

/// The iteration schedule of `layout` on `block_threads` threads, written over `thread` and a
/// fresh step variable (made with its extent, which the arena's simplifier relies on).
pub(crate) fn schedule(
    arena: &mut ExprArena,
    layout: &FragmentLayout,
    block_threads: i64,
    thread: VarId,
) -> Iteration {
    if let Some(closed) = bit_permutation(arena, layout, thread)
        && visits_exactly_once(arena, layout, &closed, thread)
    {
        return closed;
    }
    for vector in [16, 8, 4, 2, 1] {
        if let Some(planned) = planned(arena, layout, block_threads, vector, thread)
            && visits_exactly_once(arena, layout, &planned, thread)
        {
            return planned;
        }
    }
    Iteration::Scan
}

fn log2_exact(value: i64) -> Option<u32> {
    (value > 0 && value & (value - 1) == 0).then(|| value.trailing_zeros())
}

/// The inverse of a layout whose (thread, local) word is a permutation of the bits of its
/// (iteration, replica) word.
fn bit_permutation(
    arena: &mut ExprArena,
    layout: &FragmentLayout,
    thread: VarId,
) -> Option<Iteration> {
    let dim_bits: Vec<u32> = layout
        .shape
        .iter()
        .map(|&e| log2_exact(e))
        .collect::<Option<_>>()?;
    let rep_bits = log2_exact(layout.replicate)?;
    let local_shape = layout.local_shape(arena);
    let local_size: i64 = local_shape.iter().product();
    let local_bits = log2_exact(local_size)?;
    let threads = layout.thread_extent(arena);
    let thread_bits = log2_exact(threads)?;
    let point_bits: u32 = dim_bits.iter().sum();
    if point_bits + rep_bits != local_bits + thread_bits || point_bits + rep_bits > 40 {
        return None;
    }
    let mut outputs = vec![layout.thread];
    outputs.extend(layout.index.iter().copied());
    let mut inputs = layout.vars.clone();
    inputs.push(layout.rep);
    let mut program = ExprProgram::compile(arena, &inputs, &outputs);
    let mut word_of = |input: u64| -> Option<u64> {
        let (point, rep) = split_input(input, &dim_bits, point_bits);
        let mut values = point;
        values.push(rep);
        let out = program.run(&values)?;
        let mut local = 0i64;
        for (&value, &extent) in out[1..].iter().zip(&local_shape) {
            local = local * extent + value;
        }
        u64::try_from(out[0] * local_size + local).ok()
    };
    if word_of(0)? != 0 {
        return None;
    }
    // Where each input bit goes: a single, distinct output bit.
    let total_bits = point_bits + rep_bits;
    let mut target = Vec::with_capacity(total_bits as usize);
    for bit in 0..total_bits {
        let image = word_of(1 << bit)?;
        if image.count_ones() != 1 || target.contains(&image.trailing_zeros()) {
            return None;
        }
        target.push(image.trailing_zeros());
    }
    let step = arena.var("step", Some(local_size));
    Some(closed_form(
        arena,
        &dim_bits,
        &target,
        [local_bits, thread_bits],
        [thread, step],
    ))
}

/// The coordinates and replica of input word `input` (the row-major point number in the low bits,
/// the replica above it).
// The caller enumerates words of at most 40 bits, so every field fits an i64.
#[allow(clippy::cast_possible_wrap)]
fn split_input(input: u64, dim_bits: &[u32], point_bits: u32) -> (Vec<i64>, i64) {
    let mut point = vec![0i64; dim_bits.len()];
    let mut rest = input & ((1u64 << point_bits) - 1);
    for (coord, &bits) in point.iter_mut().zip(dim_bits).rev() {
        *coord = (rest & ((1u64 << bits) - 1)) as i64;
        rest >>= bits;
    }
    (point, (input >> point_bits) as i64)
}

/// Writes each coordinate (and the replica) as a sum of bit fields of the thread and step
/// variables, merging runs of consecutive bits into one field.
fn closed_form(
    arena: &mut ExprArena,
    dim_bits: &[u32],
    target: &[u32],
    [local_bits, thread_bits]: [u32; 2],
    [thread, step]: [VarId; 2],
) -> Iteration {
    let point_bits: u32 = dim_bits.iter().sum();
    // Input bit ranges, lowest first: the last coordinate, ..., the first, then the replica.
    let mut fields: Vec<(u32, u32)> = Vec::new();
    let mut low = 0;
    for &bits in dim_bits.iter().rev() {
        fields.push((low, bits));
        low += bits;
    }
    // `target` has one entry per input bit, at most 40.
    #[allow(clippy::cast_possible_truncation)]
    let target_bits = target.len() as u32;
    fields.push((point_bits, target_bits - point_bits));
    let mut values: Vec<ExprId> = fields
        .iter()
        .map(|&(low, bits)| field_expr(arena, target, low, bits, local_bits, [thread, step]))
        .collect();
    let rep = values.pop().unwrap_or_else(|| arena.int(0));
    values.reverse();
    Iteration::Closed {
        step,
        threads: 1 << thread_bits,
        steps: 1 << local_bits,
        coords: values,
        rep,
        bound: None,
    }
}

/// The value of input bits `low..low + bits` given where each input bit lands in the output word
/// (step bits below `local_bits`, thread bits above).
fn field_expr(
    arena: &mut ExprArena,
    target: &[u32],
    low: u32,
    bits: u32,
    local_bits: u32,
    [thread, step]: [VarId; 2],
) -> ExprId {
    let mut sum = arena.int(0);
    let mut bit = 0;
    while bit < bits {
        let out = target[(low + bit) as usize];
        let mut run = 1;
        while bit + run < bits
            && target[(low + bit + run) as usize] == out + run
            && (out + run < local_bits) == (out < local_bits)
        {
            run += 1;
        }
        let (source, shift) = if out < local_bits {
            (step, out)
        } else {
            (thread, out - local_bits)
        };
        let source = arena.var_expr(source);
        let divisor = arena.int(1 << shift);
        let shifted = arena.floordiv(source, divisor);
        let modulus = arena.int(1 << run);
        let field = arena.floormod(shifted, modulus);
        let scale = arena.int(1 << bit);
        let term = arena.mul(field, scale);
        sum = arena.add(sum, term);
        bit += run;
    }
    sum
}

/// PlanLoopPartition's inverse: chunk `c` of `vector` consecutive iterations is on thread
/// `c mod threads` (or, with fewer chunks than threads, replicated over the rest).
fn planned(
    arena: &mut ExprArena,
    layout: &FragmentLayout,
    block_threads: i64,
    vector: i64,
    thread: VarId,
) -> Option<Iteration> {
    let total: i64 = layout.shape.iter().product();
    // An empty layout has no iterations to hand out (the front end rejects one; a world built
    // some other way must not divide by zero here).
    if total <= 0 || vector <= 0 || total % vector != 0 {
        return None;
    }
    let chunks = total / vector;
    let t = arena.var_expr(thread);
    let v = arena.int(vector);
    let replicated = chunks < block_threads
        && block_threads % chunks == 0
        && layout.replicate == block_threads / chunks;
    let threads = if replicated {
        block_threads
    } else {
        block_threads.min(chunks)
    };
    let rounds = (chunks + threads - 1) / threads;
    let step = arena.var(
        "step",
        Some(if replicated { vector } else { rounds * vector }),
    );
    let s = arena.var_expr(step);
    let (flat, rep, threads, steps, bound) = if replicated {
        let c = arena.int(chunks);
        let chunk = arena.floormod(t, c);
        let rep = arena.floordiv(t, c);
        let base = arena.mul(chunk, v);
        (arena.add(base, s), rep, block_threads, vector, None)
    } else if layout.replicate == 1 {
        let tt = arena.int(threads);
        let round = arena.floordiv(s, v);
        let within = arena.floormod(s, v);
        let chunk_base = arena.mul(round, tt);
        let chunk = arena.add(chunk_base, t);
        let base = arena.mul(chunk, v);
        let flat = arena.add(base, within);
        let bound = (rounds * threads != chunks).then_some((flat, total));
        (flat, arena.int(0), threads, rounds * vector, bound)
    } else {
        return None;
    };
    let coords = unflatten_expr(arena, flat, &layout.shape);
    Some(Iteration::Closed {
        step,
        threads,
        steps,
        coords,
        rep,
        bound,
    })
}

/// The row-major coordinates of flat index `flat` in the constant `shape`.
pub(crate) fn unflatten_expr(arena: &mut ExprArena, flat: ExprId, shape: &[i64]) -> Vec<ExprId> {
    let shape = arena.ints(shape);
    arena.unflatten_row_major(flat, &shape)
}

/// Whether the closed form visits every (iteration, replica) exactly once, on the layout's thread.
fn visits_exactly_once(
    arena: &mut ExprArena,
    layout: &FragmentLayout,
    iteration: &Iteration,
    thread: VarId,
) -> bool {
    let Iteration::Closed {
        step,
        threads,
        steps,
        coords,
        rep,
        bound,
    } = iteration
    else {
        return false;
    };
    // Shapes come from user code: the products are checked, and a domain past 2^24 points is
    // not enumerated (the caller then keeps the general, guarded iteration).
    let slots = layout
        .shape
        .iter()
        .try_fold(layout.replicate, |acc, &extent| acc.checked_mul(extent));
    let points = threads.checked_mul(*steps);
    let (Some(slots), Some(points)) = (slots, points) else {
        return false;
    };
    if !(0..=(1 << 24)).contains(&slots) || !(0..=(1 << 24)).contains(&points) {
        return false;
    }
    let mut outputs = coords.clone();
    outputs.push(*rep);
    outputs.push(bound.map_or_else(|| arena.int(0), |(e, _)| e));
    let mut check = VisitCheck {
        inverse: ExprProgram::compile(arena, &[thread, *step], &outputs),
        forward: {
            let mut inputs = layout.vars.clone();
            inputs.push(layout.rep);
            ExprProgram::compile(arena, &inputs, &[layout.thread])
        },
        shape: &layout.shape,
        replicate: layout.replicate,
        limit: bound.map_or(i64::MAX, |(_, limit)| limit),
        // `slots` was checked to lie in `0..=2^24` above.
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        seen: vec![false; slots as usize],
        visited: 0,
    };
    // Chunked by hand rather than with `for_each_chunk`, whose domain limit is lower than the
    // 2^24 points this check accepts.
    let chunk = super::table_int(CHUNK_POINTS);
    let mut first = 0;
    while first < points {
        let (thread_column, step_column): (Vec<i64>, Vec<i64>) = (first..points.min(first + chunk))
            .map(|point| (point / steps, point % steps))
            .unzip();
        if check.batch(&thread_column, &step_column).is_none() {
            return false;
        }
        first += chunk;
    }
    check.visited == slots
}

/// The state of [`visits_exactly_once`]: the schedule's inverse and the layout's forward map,
/// compiled, and which (iteration, replica) slots were visited so far.
struct VisitCheck<'a> {
    inverse: ExprProgram,
    forward: ExprProgram,
    shape: &'a [i64],
    replicate: i64,
    limit: i64,
    seen: Vec<bool>,
    visited: i64,
}

impl VisitCheck<'_> {
    /// Checks one chunk of (thread, step) points; `None` on the first point that leaves the
    /// domain, lands on another thread or repeats a slot.
    fn batch(&mut self, threads: &[i64], step_column: &[i64]) -> Option<()> {
        let rank = self.shape.len();
        let VisitCheck {
            inverse, forward, ..
        } = self;
        let out = inverse.run_batch(&[threads, step_column], threads.len())?;
        let outputs: Vec<&[i64]> = (0..rank + 2).map(|k| out.column(k)).collect();
        // The visited (iteration, replica) of each point inside the bound: forward's inputs.
        let bound = outputs[rank + 1];
        let kept: Vec<usize> = (0..threads.len())
            .filter(|&k| bound[k] < self.limit)
            .collect();
        let filtered: Vec<Vec<i64>>;
        let (columns, owners): (Vec<&[i64]>, Vec<i64>) = if kept.len() == threads.len() {
            (outputs[..=rank].to_vec(), threads.to_vec())
        } else {
            filtered = outputs[..=rank]
                .iter()
                .map(|column| kept.iter().map(|&k| column[k]).collect())
                .collect();
            let owners = kept.iter().map(|&k| threads[k]).collect();
            (filtered.iter().map(Vec::as_slice).collect(), owners)
        };
        let kept = owners.len();
        let named = forward.run_batch(&columns, kept)?;
        let named = named.column(0);
        let total: i64 = self.shape.iter().product();
        for k in 0..kept {
            let replica = columns[rank][k];
            let mut ordinal = 0i64;
            for (dim, &extent) in self.shape.iter().enumerate() {
                let c = columns[dim][k];
                if !(0..extent).contains(&c) {
                    return None;
                }
                ordinal = ordinal * extent + c;
            }
            if !(0..self.replicate).contains(&replica) || named[k] != owners[k] {
                return None;
            }
            let slot = usize::try_from(replica * total + ordinal).ok()?;
            if std::mem::replace(&mut self.seen[slot], true) {
                return None;
            }
            self.visited += 1;
        }
        Some(())
    }
}
