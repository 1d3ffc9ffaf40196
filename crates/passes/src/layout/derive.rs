//! Deriving one layout from another through an access: a loop's layout from a fragment it reads,
//! a fragment's from the loop that writes it, a reduction's destination from its source. Loop
//! iterators that an access does not use become replication, condensed to the threads they really
//! reach — decided by enumeration.

use tilec_ir::{ExprArena, ExprId, ExprProgram, VarId};

use super::fragment::{CHUNK_POINTS, FragmentLayout, flatten, for_each_chunk, fresh_vars, points};

/// Why a loop cannot run where a fragment's layout puts its data: one loop iteration would need
/// the elements of two different threads (a serial iterator the layout spreads over threads).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Witness {
    pub loop_point: Vec<i64>,
    pub serial_var: Option<VarId>,
    pub first: (Vec<i64>, i64),
    pub second: (Vec<i64>, i64),
}

/// `expr` with each variable of `map` replaced by its expression.
pub(super) fn substitute_vars(
    arena: &mut ExprArena,
    expr: ExprId,
    map: &[(VarId, ExprId)],
) -> ExprId {
    arena.substitute(expr, &|var| {
        map.iter().find(|(v, _)| *v == var).map(|(_, e)| *e)
    })
}

/// The loop layout that runs each iteration on the thread holding the element it accesses.
pub(super) fn loop_from_buffer(
    arena: &mut ExprArena,
    buffer: &FragmentLayout,
    indices: &[ExprId],
    loop_vars: &[VarId],
    loop_shape: &[i64],
    serial: &[(VarId, i64)],
) -> Result<FragmentLayout, Witness> {
    if let Some(renamed) = identity_rename(arena, buffer, indices, loop_vars, loop_shape) {
        return Ok(renamed);
    }
    let rep = arena.var("rep", Some(buffer.replicate));
    let rep_expr = arena.var_expr(rep);
    let mut map: Vec<(VarId, ExprId)> = buffer
        .vars
        .iter()
        .copied()
        .zip(indices.iter().copied())
        .collect();
    map.push((buffer.rep, rep_expr));
    let thread_full = substitute_vars(arena, buffer.thread, &map);
    check_serial_independence(
        arena,
        thread_full,
        indices,
        loop_vars,
        loop_shape,
        serial,
        rep,
        buffer.replicate,
    )?;
    let zero = arena.int(0);
    let serial_zero: Vec<(VarId, ExprId)> = serial.iter().map(|&(v, _)| (v, zero)).collect();
    let thread = substitute_vars(arena, thread_full, &serial_zero);
    let mut candidates = Vec::new();
    let from_buffer: Vec<ExprId> = buffer
        .index
        .iter()
        .map(|&e| {
            let through = substitute_vars(arena, e, &map);
            substitute_vars(arena, through, &serial_zero)
        })
        .collect();
    candidates.push(from_buffer);
    candidates.push(vec![flatten(arena, loop_vars, loop_shape)]);
    let base = FragmentLayout {
        shape: loop_shape.to_vec(),
        vars: loop_vars.to_vec(),
        rep,
        replicate: buffer.replicate,
        thread,
        index: Vec::new(),
    };
    Ok(best_index(arena, base, candidates))
}

/// When `indices` are exactly `target_vars` (an access `buf[i, j]` in a loop over `(i, j)` of the
/// same shape), the layout over `target_vars` is `layout` with its variables renamed: nothing needs
/// enumerating, since `layout` was already checked.
fn identity_rename(
    arena: &mut ExprArena,
    layout: &FragmentLayout,
    indices: &[ExprId],
    target_vars: &[VarId],
    target_shape: &[i64],
) -> Option<FragmentLayout> {
    let same_shape = layout.shape.as_slice() == target_shape && indices.len() == target_vars.len();
    let identity = same_shape
        && indices
            .iter()
            .zip(target_vars)
            .all(|(&index, &var)| arena.var_expr(var) == index);
    if !identity {
        return None;
    }
    let rep = arena.var("rep", Some(layout.replicate));
    let mut map: Vec<(VarId, ExprId)> = layout
        .vars
        .iter()
        .copied()
        .zip(indices.iter().copied())
        .collect();
    map.push((layout.rep, arena.var_expr(rep)));
    let thread = substitute_vars(arena, layout.thread, &map);
    let index = layout
        .index
        .iter()
        .map(|&e| substitute_vars(arena, e, &map))
        .collect();
    Some(FragmentLayout {
        shape: target_shape.to_vec(),
        vars: target_vars.to_vec(),
        rep,
        replicate: layout.replicate,
        thread,
        index,
    })
}

/// Fails with a witness when the thread holding the accessed element changes with a serial
/// iterator inside the loop: one iteration would then need data from two threads.
#[allow(clippy::too_many_arguments)]
fn check_serial_independence(
    arena: &ExprArena,
    thread: ExprId,
    indices: &[ExprId],
    loop_vars: &[VarId],
    loop_shape: &[i64],
    serial: &[(VarId, i64)],
    rep: VarId,
    replicate: i64,
) -> Result<(), Witness> {
    let used: Vec<(VarId, i64)> = serial
        .iter()
        .copied()
        .filter(|(var, _)| indices.iter().any(|&i| arena.vars_of(i).contains(var)))
        .collect();
    if used.is_empty() {
        return Ok(());
    }
    let serial_shape: Vec<i64> = used.iter().map(|&(_, e)| e).collect();
    let serial_points = points(&serial_shape);
    let mut inputs: Vec<VarId> = loop_vars.to_vec();
    inputs.extend(used.iter().map(|&(v, _)| v));
    inputs.push(rep);
    let mut outputs = vec![thread];
    outputs.extend(indices);
    let mut program = ExprProgram::compile_zeroing(arena, &inputs, &outputs);
    let mut input = vec![0; inputs.len()];
    for point in points(loop_shape) {
        input[..point.len()].copy_from_slice(&point);
        for r in 0..replicate {
            input[inputs.len() - 1] = r;
            let mut first: Option<(Vec<i64>, i64)> = None;
            for values in &serial_points {
                input[loop_vars.len()..loop_vars.len() + values.len()].copy_from_slice(values);
                let Some(result) = program.run(&input) else {
                    continue;
                };
                let (t, element) = (result[0], &result[1..]);
                match &first {
                    None => first = Some((element.to_vec(), t)),
                    Some((first_element, first_thread)) if *first_thread != t => {
                        let var = used
                            .iter()
                            .zip(values)
                            .find(|(_, v)| **v != 0)
                            .map(|((var, _), _)| *var);
                        return Err(Witness {
                            loop_point: point.clone(),
                            serial_var: var,
                            first: (first_element.clone(), *first_thread),
                            second: (element.to_vec(), t),
                        });
                    }
                    Some(_) => {}
                }
            }
        }
    }
    Ok(())
}

/// The layout of a fragment accessed by a laid-out loop, when each of its indices is one loop or
/// serial variable: loop-indexed dimensions follow the loop's threads, serial-indexed ones stay in
/// registers, and loop variables the access does not use become replication.
pub(super) fn buffer_from_loop(
    arena: &mut ExprArena,
    loop_layout: &FragmentLayout,
    indices: &[ExprId],
    buffer_shape: &[i64],
    serial: &[(VarId, i64)],
) -> Option<FragmentLayout> {
    if indices.len() != buffer_shape.len() {
        return None;
    }
    let vars = fresh_vars(arena, buffer_shape);
    let identity = buffer_shape == loop_layout.shape.as_slice()
        && indices
            .iter()
            .zip(&loop_layout.vars)
            .all(|(&index, &var)| arena.var_expr(var) == index);
    if identity {
        // `buf[i, j]` in a loop over `(i, j)`: the buffer's layout is the loop's, renamed.
        let own: Vec<ExprId> = vars.iter().map(|&v| arena.var_expr(v)).collect();
        if let Some(renamed) = identity_rename(arena, loop_layout, &own, &vars, buffer_shape)
            && only_own_vars(arena, &renamed)
        {
            return Some(renamed);
        }
    }
    let mut to_buffer: Vec<(VarId, ExprId)> = Vec::new();
    let mut serial_dims = Vec::new();
    // Loop iterations that reach the same element (`j` and `j + 1` of `buf[i, j // 2]`) are told
    // apart by a fresh variable, which becomes replication as the unused loop variables do.
    let mut splits: Vec<(VarId, i64)> = Vec::new();
    for (dim, &index) in indices.iter().enumerate() {
        // A dimension of extent 1 takes index 0 in every iteration (a copy's loop runs over the
        // non-unit extents only): the layout does not depend on it.
        if buffer_shape[dim] == 1 && arena.as_int(index) == Some(0) {
            continue;
        }
        let [var] = arena.vars_of(index)[..] else {
            return None;
        };
        let buffer_var = arena.var_expr(vars[dim]);
        if let Some(position) = loop_layout.vars.iter().position(|&v| v == var) {
            if to_buffer.iter().any(|(v, _)| *v == var) {
                return None;
            }
            let inverse = if arena.var_expr(var) == index {
                buffer_var
            } else {
                let extent = loop_layout.shape[position];
                let (offset, per_element) = quotient_access(arena, index, var, extent)?;
                let split = arena.var("split", Some(per_element));
                splits.push((split, per_element));
                invert_quotient(arena, buffer_var, (offset, per_element), split)
            };
            to_buffer.push((var, inverse));
        } else if arena.var_expr(var) == index && serial.iter().any(|(v, _)| *v == var) {
            serial_dims.push(dim);
        } else {
            return None;
        }
    }
    let thread_expr = substitute_vars(arena, loop_layout.thread, &to_buffer);
    let mut free: Vec<(VarId, i64)> = loop_layout
        .vars
        .iter()
        .zip(&loop_layout.shape)
        .filter(|(v, _)| !to_buffer.iter().any(|(u, _)| u == *v))
        .map(|(&v, &e)| (v, e))
        .collect();
    free.extend(splits);
    free.push((loop_layout.rep, loop_layout.replicate));
    let (thread, rep, replicate) = condense(arena, thread_expr, &vars, buffer_shape, &free)?;
    // A loop's layout may follow an enclosing serial loop's variable (`x[i, jj * 4 + j]` puts
    // each `jj` on other threads); a buffer's cannot, so such a loop lays out no buffer.
    let foreign = |arena: &ExprArena, e: ExprId| {
        arena
            .vars_of(e)
            .iter()
            .any(|v| !vars.contains(v) && *v != rep)
    };
    if foreign(arena, thread) {
        return None;
    }
    let zero = arena.int(0);
    let mut map = to_buffer.clone();
    map.extend(free.iter().map(|&(v, _)| (v, zero)));
    // The split variables come in with the loop variables' inverses, after the substitution
    // that zeroes the free ones: each element's register is that of its first iteration.
    let splits_zero: Vec<(VarId, ExprId)> = free.iter().map(|&(v, _)| (v, zero)).collect();
    let mut from_loop: Vec<ExprId> = loop_layout
        .index
        .iter()
        .map(|&e| {
            let through = substitute_vars(arena, e, &map);
            substitute_vars(arena, through, &splits_zero)
        })
        .collect();
    if !serial_dims.is_empty() {
        let serial_vars: Vec<VarId> = serial_dims.iter().map(|&d| vars[d]).collect();
        let serial_shape: Vec<i64> = serial_dims.iter().map(|&d| buffer_shape[d]).collect();
        let inner = flatten(arena, &serial_vars, &serial_shape);
        let size = arena.int(serial_shape.iter().product());
        from_loop = from_loop
            .into_iter()
            .map(|e| {
                let scaled = arena.mul(e, size);
                arena.add(scaled, inner)
            })
            .collect();
    }
    let mut candidates = vec![vec![flatten(arena, &vars, buffer_shape)]];
    if !from_loop.iter().any(|&e| foreign(arena, e)) {
        candidates.insert(0, from_loop);
    }
    let base = FragmentLayout {
        shape: buffer_shape.to_vec(),
        vars,
        rep,
        replicate,
        thread,
        index: Vec::new(),
    };
    Some(best_index(arena, base, candidates))
}

/// Whether `index`, an expression of the single loop variable `var` over `0..extent`, reads
/// element `offset + var / per_element` (the packed byte `j // 2` of two 4-bit values, a shifted
/// window `j + 8`): every element is then reached by `per_element` consecutive iterations, which
/// is what lets a fragment's layout be read back from the loop's. Decided by enumeration.
fn quotient_access(
    arena: &ExprArena,
    index: ExprId,
    var: VarId,
    extent: i64,
) -> Option<(i64, i64)> {
    let at = |point: i64| arena.eval(index, &|v| (v == var).then_some(point));
    let offset = at(0)?;
    let per_element =
        i64::try_from((0..extent).take_while(|&p| at(p) == Some(offset)).count()).ok()?;
    if per_element == 0 || extent % per_element != 0 {
        return None;
    }
    let regular = (0..extent).all(|point| at(point) == Some(offset + point / per_element));
    regular.then_some((offset, per_element))
}

/// The loop iteration `(element - offset) * per_element + split` that reaches `element`, for the
/// `split`-th of the iterations [`quotient_access`] found reaching it.
fn invert_quotient(
    arena: &mut ExprArena,
    element: ExprId,
    (offset, per_element): (i64, i64),
    split: VarId,
) -> ExprId {
    let shift = arena.int(-offset);
    let shifted = arena.add(element, shift);
    let stride = arena.int(per_element);
    let first = arena.mul(shifted, stride);
    let split = arena.var_expr(split);
    arena.add(first, split)
}

/// The destination layout of a reduction over `dim`: the source's, with the reduced dimension
/// folded into replication (every thread that held part of a row holds the row's result).
pub(super) fn reduce_layout(
    arena: &mut ExprArena,
    src: &FragmentLayout,
    dim: usize,
    keep_dim: bool,
) -> Option<FragmentLayout> {
    if dim >= src.shape.len() {
        return None;
    }
    // The result drops the reduced dimension (`[X, d, Y] -> [X, Y]`) or, when the destination has
    // the source's rank, keeps it with extent 1 (`[X, 1, Y]`), as TileLang accepts both.
    let mut shape = src.shape.clone();
    if keep_dim {
        shape[dim] = 1;
    } else {
        shape.remove(dim);
    }
    if shape.is_empty() {
        shape.push(1);
    }
    let vars = fresh_vars(arena, &shape);
    let mut map: Vec<(VarId, ExprId)> = Vec::new();
    let mut next = vars.iter();
    for (d, &var) in src.vars.iter().enumerate() {
        if keep_dim {
            if d != dim {
                map.push((var, arena.var_expr(vars[d])));
            }
        } else if d != dim
            && let Some(&dst_var) = next.next()
        {
            map.push((var, arena.var_expr(dst_var)));
        }
    }
    let thread_expr = substitute_vars(arena, src.thread, &map);
    let free = vec![(src.vars[dim], src.shape[dim]), (src.rep, src.replicate)];
    let (thread, rep, replicate) = condense(arena, thread_expr, &vars, &shape, &free)?;
    let zero = arena.int(0);
    let mut index_map = map.clone();
    index_map.push((src.vars[dim], zero));
    let from_src: Vec<ExprId> = src
        .index
        .iter()
        .map(|&e| substitute_vars(arena, e, &index_map))
        .collect();
    let candidates = vec![from_src, vec![flatten(arena, &vars, &shape)]];
    let base = FragmentLayout {
        shape,
        vars,
        rep,
        replicate,
        thread,
        index: Vec::new(),
    };
    Some(best_index(arena, base, candidates))
}

/// Rewrites `expr` so that the `free` variables become one replica variable over just the
/// distinct threads they reach: each free variable is sampled at the largest stride that still
/// reaches every thread it reaches in full. Returns `None` when the replicas would not be distinct
/// threads.
///
/// A variable whose threads no single stride reaches is split into two digits first: a Hopper
/// accumulator row is spread over `j % 8 // 2` (lanes) and `j // 32 * 128` (warpgroups), which
/// `j = hi * 8 + lo` samples as `lo` at stride 2 and `hi` at stride 4.
fn condense(
    arena: &mut ExprArena,
    expr: ExprId,
    vars: &[VarId],
    shape: &[i64],
    free: &[(VarId, i64)],
) -> Option<(ExprId, VarId, i64)> {
    if let Some(condensed) = condense_strided(arena, expr, vars, shape, free) {
        return Some(condensed);
    }
    for (position, &(var, extent)) in free.iter().enumerate() {
        let mut splits = divisors_descending(extent);
        splits.retain(|&low| 1 < low && low < extent);
        splits.reverse();
        for low in splits {
            let lo = arena.var("lo", Some(low));
            let hi = arena.var("hi", Some(extent / low));
            let hi_expr = arena.var_expr(hi);
            let low_expr = arena.int(low);
            let scaled = arena.mul(hi_expr, low_expr);
            let lo_expr = arena.var_expr(lo);
            let digits = arena.add(scaled, lo_expr);
            let split = substitute_vars(arena, expr, &[(var, digits)]);
            let mut split_free = free.to_vec();
            split_free.splice(position..=position, [(lo, low), (hi, extent / low)]);
            if let Some(condensed) = condense_strided(arena, split, vars, shape, &split_free) {
                return Some(condensed);
            }
        }
    }
    None
}

fn condense_strided(
    arena: &mut ExprArena,
    expr: ExprId,
    vars: &[VarId],
    shape: &[i64],
    free: &[(VarId, i64)],
) -> Option<(ExprId, VarId, i64)> {
    let elements = points(shape);
    let inputs: Vec<VarId> = vars
        .iter()
        .copied()
        .chain(free.iter().map(|&(v, _)| v))
        .collect();
    let mut program = ExprProgram::compile_zeroing(arena, &inputs, &[expr]);
    let used = arena.vars_of(expr);
    // Each free variable is sampled as `stride · m` for `m < count`; at first, all of its range,
    // except that a variable the formula does not read reaches one thread.
    let mut samples: Vec<(i64, i64)> = free
        .iter()
        .map(|&(var, extent)| (1, if used.contains(&var) { extent } else { 1 }))
        .collect();
    for position in 0..free.len() {
        let extent = free[position].1;
        if samples[position].1 == 1 {
            continue;
        }
        // Sampling only removes threads, so a sample reaches them all exactly when it reaches as
        // many. The smallest sample that can is as many values as this variable alone reaches
        // threads; larger strides come first (a periodic pattern such as `j // 4 % 256` needs a
        // prefix).
        let full = reach_counts(&mut program, &elements, &samples, None)?;
        let alone: Vec<(i64, i64)> = samples
            .iter()
            .enumerate()
            .map(|(other, &sample)| if other == position { sample } else { (1, 1) })
            .collect();
        let reached = reach_counts(&mut program, &elements, &alone, None)?;
        let needed = i64::try_from(reached.iter().copied().max().unwrap_or(1)).ok()?;
        let choice = divisors_descending(extent)
            .into_iter()
            .filter(|&stride| stride.saturating_mul(needed) <= extent)
            .find(|&stride| {
                let mut trial = samples.clone();
                trial[position] = (stride, needed);
                reach_counts(&mut program, &elements, &trial, Some(&full)).is_some()
            });
        samples[position] = choice.map_or((1, extent), |stride| (stride, needed));
    }
    let replicate: i64 = samples.iter().map(|&(_, count)| count).product();
    let rep = arena.var("rep", Some(replicate));
    let mut radix = 1;
    let mut map = Vec::new();
    for (&(var, _), &(stride, count)) in free.iter().zip(&samples) {
        let rep_expr = arena.var_expr(rep);
        let below = arena.int(radix);
        let count_expr = arena.int(count);
        let digit = arena.floordiv(rep_expr, below);
        let digit = arena.floormod(digit, count_expr);
        let stride_expr = arena.int(stride);
        map.push((var, arena.mul(digit, stride_expr)));
        radix *= count;
    }
    let thread = substitute_vars(arena, expr, &map);
    distinct_replicas(arena, thread, vars, &elements, rep, replicate)
        .then_some((thread, rep, replicate))
}

/// Every replica of every element must be a different thread.
fn distinct_replicas(
    arena: &ExprArena,
    thread: ExprId,
    vars: &[VarId],
    elements: &[Vec<i64>],
    rep: VarId,
    replicate: i64,
) -> bool {
    let mut inputs = vars.to_vec();
    inputs.push(rep);
    let mut program = ExprProgram::compile_zeroing(arena, &inputs, &[thread]);
    let replicas = vec![(0..replicate).collect::<Vec<i64>>()];
    let mut scratch = Vec::new();
    let mut distinct = true;
    let evaluated = for_each_group(&mut program, elements, &replicas, |_, threads| {
        distinct = distinct_count(threads, &mut scratch) == threads.len();
        distinct
    });
    evaluated.is_some() && distinct
}

/// Evaluates the one-output `program`, whose inputs are an element's coordinates followed by
/// extra values, at every element and every row of the extras, in batches; calls
/// `visit(element, values)` with one element's values, one per row. `extra_columns[d][r]` is extra
/// input `d` of row `r`. `None` where the program fails; stops early when `visit` returns false.
fn for_each_group(
    program: &mut ExprProgram,
    elements: &[Vec<i64>],
    extra_columns: &[Vec<i64>],
    mut visit: impl FnMut(usize, &[i64]) -> bool,
) -> Option<()> {
    let Some(first) = elements.first() else {
        return Some(());
    };
    // Without extra inputs there is one row: the element itself.
    let rows = extra_columns.first().map_or(1, Vec::len);
    if rows == 0 {
        return Some(());
    }
    let dims = first.len();
    let mut columns: Vec<Vec<i64>> = vec![Vec::new(); dims + extra_columns.len()];
    let per_chunk = (CHUNK_POINTS / rows).max(1);
    let mut values = Vec::new();
    for (chunk_number, chunk) in elements.chunks(per_chunk).enumerate() {
        columns.iter_mut().for_each(Vec::clear);
        for element in chunk {
            for (column, &value) in columns.iter_mut().zip(element) {
                column.extend(std::iter::repeat_n(value, rows));
            }
            for (column, extra) in columns[dims..].iter_mut().zip(extra_columns) {
                column.extend_from_slice(extra);
            }
        }
        let refs: Vec<&[i64]> = columns.iter().map(Vec::as_slice).collect();
        let batch = program.run_batch(&refs, chunk.len() * rows)?;
        values.clear();
        values.extend_from_slice(batch.column(0));
        for (k, group) in values.chunks(rows).enumerate() {
            if !visit(chunk_number * per_chunk + k, group) {
                return Some(());
            }
        }
    }
    Some(())
}

/// How many distinct values `values` holds. Thread numbers are small, so they are counted in a
/// bitmap (`scratch`, reused between calls and left all zero); other values are sorted.
fn distinct_count(values: &[i64], scratch: &mut Vec<u64>) -> usize {
    const BITMAP_VALUES: i64 = 1 << 12;
    if values.iter().all(|&v| (0..BITMAP_VALUES).contains(&v)) {
        // Every value was just checked to lie in `0..BITMAP_VALUES`, so each word number is in
        // `0..BITMAP_VALUES / 64` and fits usize.
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let word_of = |v: i64| (v / 64) as usize;
        scratch.resize(word_of(BITMAP_VALUES), 0);
        let mut count = 0;
        for &v in values {
            let (word, bit) = (word_of(v), 1u64 << (v % 64));
            count += usize::from(scratch[word] & bit == 0);
            scratch[word] |= bit;
        }
        for &v in values {
            scratch[word_of(v)] = 0;
        }
        return count;
    }
    let mut sorted = values.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    sorted.len()
}

fn divisors_descending(n: i64) -> Vec<i64> {
    (1..=n.max(1)).rev().filter(|d| n % d == 0).collect()
}

/// For each element, how many distinct threads `expr` reaches when free variable `k` takes the
/// values `stride · m` for `m < count`, with `(stride, count) = samples[k]`. With `expected`, stops
/// (returning `None`) at the first element whose count differs from it.
fn reach_counts(
    program: &mut ExprProgram,
    elements: &[Vec<i64>],
    samples: &[(i64, i64)],
    expected: Option<&[usize]>,
) -> Option<Vec<usize>> {
    let sample_shape: Vec<i64> = samples.iter().map(|&(_, count)| count).collect();
    // One column per free variable: its sampled value in each combination, row-major.
    let mut choices: Vec<Vec<i64>> = vec![Vec::new(); samples.len()];
    for_each_chunk(&sample_shape, |_, columns, _| {
        for ((choice, column), &(stride, _)) in choices.iter_mut().zip(columns).zip(samples) {
            choice.extend(column.iter().map(|&m| m * stride));
        }
        true
    });
    let mut counts = Vec::with_capacity(elements.len());
    let mut scratch = Vec::new();
    let mut matches = true;
    for_each_group(program, elements, &choices, |element, threads| {
        let count = distinct_count(threads, &mut scratch);
        matches = expected.is_none_or(|expected| expected.get(element) == Some(&count));
        counts.push(count);
        matches
    })?;
    (matches && counts.len() == elements.len()).then_some(counts)
}

/// Completes `base` with the candidate local index that is collision-free and smallest, after
/// dividing each candidate's expressions by the gcd of their values.
fn best_index(
    arena: &mut ExprArena,
    base: FragmentLayout,
    candidates: Vec<Vec<ExprId>>,
) -> FragmentLayout {
    if let Some(layout) = smallest_without_collision(arena, &base, candidates.clone())
        && !has_gaps(arena, &layout)
    {
        return layout;
    }
    // Each candidate also in its dense form: the register index of a layout derived through a
    // reduction or a sparser loop keeps strides of the one it came from (`i // 64 * 32 + i % 16
    // // 8` for a row of a gemm accumulator), and every stride past the digits below it is a
    // register the thread allocates and never uses. Tried only when no plain candidate is dense,
    // as each costs enumerations of the tile.
    let dense: Vec<Vec<ExprId>> = candidates
        .iter()
        .filter_map(|candidate| {
            candidate
                .iter()
                .map(|&e| dense_digits(arena, e, &base))
                .collect::<Option<Vec<ExprId>>>()
        })
        .collect();
    let within = within_thread_index(arena, &base);
    let all = candidates.into_iter().chain(dense).chain(within).collect();
    smallest_without_collision(arena, &base, all).unwrap_or_else(|| {
        let index = vec![flatten(arena, &base.vars, &base.shape)];
        FragmentLayout { index, ..base }
    })
}

/// The candidate index with the fewest registers that tells each thread's elements apart.
fn smallest_without_collision(
    arena: &mut ExprArena,
    base: &FragmentLayout,
    candidates: Vec<Vec<ExprId>>,
) -> Option<FragmentLayout> {
    let mut sized: Vec<(i64, FragmentLayout)> = candidates
        .into_iter()
        .map(|candidate| {
            let index = candidate
                .into_iter()
                .map(|e| compact(arena, e, base))
                .collect();
            let layout = FragmentLayout {
                index,
                ..base.clone()
            };
            (layout.local_size(arena), layout)
        })
        .collect();
    // Smallest first: the first one without a collision is the answer, and the larger ones are
    // never enumerated.
    sized.sort_by_key(|(size, _)| *size);
    sized
        .into_iter()
        .map(|(_, layout)| layout)
        .find(|layout| layout.collision(arena).is_none())
}

/// Whether a thread's registers outnumber its elements: the index leaves registers unused.
fn has_gaps(arena: &ExprArena, layout: &FragmentLayout) -> bool {
    let points: i64 = layout.shape.iter().product();
    let threads = layout.thread_extent(arena).max(1);
    let per_thread = points.saturating_mul(layout.replicate) / threads;
    layout.local_size(arena) > per_thread.max(1)
}

/// `expr` with its digits packed: when it is a sum of terms `c * g` whose `g` each take the
/// values `0..r` (a digit), the same digits with strides that leave no gap, in the order of
/// their coefficients. `None` when a term is not such a digit or nothing would change. Whether
/// the packed index still tells a thread's elements apart is for the caller to check.
fn dense_digits(arena: &mut ExprArena, expr: ExprId, layout: &FragmentLayout) -> Option<ExprId> {
    let mut terms = Vec::new();
    sum_terms(arena, expr, &mut terms)?;
    let mut digits = Vec::with_capacity(terms.len());
    for (coefficient, inner) in terms {
        if coefficient <= 0 {
            return None;
        }
        let range = digit_range(arena, inner, layout)?;
        digits.push((coefficient, inner, range));
    }
    digits.sort_by_key(|&(coefficient, ..)| coefficient);
    let mut stride = 1i64;
    let mut packed = arena.int(0);
    let mut changed = false;
    for (coefficient, inner, range) in digits {
        changed |= coefficient != stride;
        let scale = arena.int(stride);
        let term = arena.mul(inner, scale);
        packed = arena.add(packed, term);
        stride = stride.checked_mul(range)?;
    }
    changed.then_some(packed)
}

/// Whether `layout`'s thread and index formulas read only its own variables and replica.
fn only_own_vars(arena: &ExprArena, layout: &FragmentLayout) -> bool {
    std::iter::once(layout.thread)
        .chain(layout.index.iter().copied())
        .flat_map(|e| arena.vars_of(e))
        .all(|v| layout.vars.contains(&v) || v == layout.rep)
}

/// The index of an element among its thread's: the buffer's coordinates row-major, less the
/// digits of each coordinate that the thread formula already reads (`i // 16` and `i % 8` leave
/// `i % 16 // 8`; a coordinate read whole drops out). A layout whose thread is `i` (one row per
/// thread) then indexes a row's `j`, not `i * n + j`, which would give every thread the whole
/// tile's registers. `None` when the thread formula reads no digit that way.
fn within_thread_index(arena: &mut ExprArena, layout: &FragmentLayout) -> Option<Vec<ExprId>> {
    let mut parts = Vec::new();
    let mut extents = Vec::new();
    let mut changed = false;
    for (&var, &extent) in layout.vars.iter().zip(&layout.shape) {
        let mut uses = Vec::new();
        thread_uses(arena, layout.thread, var, extent, &mut uses);
        let own = arena.var_expr(var);
        let leftover = uses
            .iter()
            .copied()
            .collect::<Option<Vec<(i64, i64)>>>()
            .filter(|read| !read.is_empty())
            .and_then(|read| unread_digits(&read, extent));
        let Some(leftover) = leftover else {
            parts.push(own);
            extents.push(extent);
            continue;
        };
        changed = true;
        for (low, high) in leftover {
            let high_expr = arena.int(high);
            let low_expr = arena.int(low);
            let below = arena.floormod(own, high_expr);
            parts.push(arena.floordiv(below, low_expr));
            extents.push(high / low);
        }
    }
    if !changed {
        return None;
    }
    let extents: Vec<ExprId> = arena.ints(&extents);
    Some(vec![arena.flatten_row_major(&parts, &extents)])
}

/// The digit ranges `[low, high)` of a coordinate of `extent` that no range in `read` covers,
/// each the coordinate's `x % high // low`; `None` unless every bound divides the next.
fn unread_digits(read: &[(i64, i64)], extent: i64) -> Option<Vec<(i64, i64)>> {
    let mut bounds: Vec<i64> = read.iter().flat_map(|&(low, high)| [low, high]).collect();
    bounds.extend([1, extent]);
    bounds.sort_unstable();
    bounds.dedup();
    if bounds.windows(2).any(|pair| pair[1] % pair[0] != 0) {
        return None;
    }
    let mut leftover = Vec::new();
    for pair in bounds.windows(2) {
        let (low, high) = (pair[0], pair[1]);
        let covered = read.iter().any(|&(a, b)| a <= low && high <= b);
        if !covered {
            leftover.push((low, high));
        }
    }
    Some(leftover)
}

/// How `expr` reads `var` (of `extent`): `Some((low, high))` for each read of its digits
/// `var % high // low` (`var` itself is `(1, extent)`, `var // d` is `(d, extent)`, `var % m` is
/// `(1, m)`), `None` for any other use (a product of variables), which keeps the coordinate whole.
fn thread_uses(
    arena: &ExprArena,
    expr: ExprId,
    var: VarId,
    extent: i64,
    out: &mut Vec<Option<(i64, i64)>>,
) {
    let is_var = |e: ExprId| *arena.get(e) == tilec_ir::Expr::Var(var);
    let positive = |e: ExprId| arena.as_int(e).filter(|&c| c > 0);
    match *arena.get(expr) {
        tilec_ir::Expr::Var(v) if v == var => out.push(Some((1, extent))),
        tilec_ir::Expr::FloorDiv(a, b) if is_var(a) => {
            out.push(positive(b).map(|d| (d, extent)));
        }
        tilec_ir::Expr::FloorMod(a, b) if is_var(a) => {
            out.push(positive(b).map(|m| (1, m.min(extent))));
        }
        tilec_ir::Expr::FloorDiv(a, b) if matches!(*arena.get(a), tilec_ir::Expr::FloorMod(x, _) if is_var(x)) =>
        {
            let tilec_ir::Expr::FloorMod(_, m) = *arena.get(a) else {
                return;
            };
            out.push(
                positive(b)
                    .zip(positive(m))
                    .map(|(d, m)| (d, m.min(extent))),
            );
        }
        tilec_ir::Expr::Int(_) | tilec_ir::Expr::Var(_) => {}
        tilec_ir::Expr::Add(a, b) | tilec_ir::Expr::Sub(a, b) => {
            thread_uses(arena, a, var, extent, out);
            thread_uses(arena, b, var, extent, out);
        }
        tilec_ir::Expr::Mul(a, b) if arena.as_int(b).is_some() => {
            thread_uses(arena, a, var, extent, out);
        }
        tilec_ir::Expr::Mul(..)
        | tilec_ir::Expr::FloorDiv(..)
        | tilec_ir::Expr::FloorMod(..)
        | tilec_ir::Expr::Min(..)
        | tilec_ir::Expr::Max(..) => {
            if arena.vars_of(expr).contains(&var) {
                out.push(None);
            }
        }
    }
}

/// The additive terms of `expr` as `(constant coefficient, expression)`; `None` for a
/// subtraction or a constant offset, which a register index never has.
fn sum_terms(arena: &ExprArena, expr: ExprId, out: &mut Vec<(i64, ExprId)>) -> Option<()> {
    match *arena.get(expr) {
        tilec_ir::Expr::Add(a, b) => {
            sum_terms(arena, a, out)?;
            sum_terms(arena, b, out)
        }
        tilec_ir::Expr::Mul(a, b) => match arena.as_int(b) {
            Some(coefficient) => {
                out.push((coefficient, a));
                Some(())
            }
            None => {
                out.push((1, expr));
                Some(())
            }
        },
        tilec_ir::Expr::Int(_) | tilec_ir::Expr::Sub(..) => None,
        tilec_ir::Expr::Var(_)
        | tilec_ir::Expr::FloorDiv(..)
        | tilec_ir::Expr::FloorMod(..)
        | tilec_ir::Expr::Min(..)
        | tilec_ir::Expr::Max(..) => {
            out.push((1, expr));
            Some(())
        }
    }
}

/// `r` when `expr` takes exactly the values `0..r` over the layout's domain, by enumeration.
fn digit_range(arena: &ExprArena, expr: ExprId, layout: &FragmentLayout) -> Option<i64> {
    const MAX_DIGIT: usize = 1 << 16;
    let mut seen = vec![false; 0];
    let mut failed = false;
    let mut program = ExprProgram::compile_zeroing(arena, &layout.vars, &[expr]);
    for_each_chunk(&layout.shape, |_, columns, len| {
        let Some(batch) = program.run_batch(columns, len) else {
            failed = true;
            return false;
        };
        for &value in batch.column(0) {
            let Ok(value) = usize::try_from(value) else {
                failed = true;
                return false;
            };
            if value >= MAX_DIGIT {
                failed = true;
                return false;
            }
            if value >= seen.len() {
                seen.resize(value + 1, false);
            }
            seen[value] = true;
        }
        true
    });
    if failed || seen.is_empty() || !seen.iter().all(|&hit| hit) {
        return None;
    }
    i64::try_from(seen.len()).ok()
}

/// `e // g` where `g` is the gcd of every value `e` takes over the layout's domain.
fn compact(arena: &mut ExprArena, expr: ExprId, layout: &FragmentLayout) -> ExprId {
    let mut g = 0i64;
    let mut program = ExprProgram::compile_zeroing(arena, &layout.vars, &[expr]);
    for_each_chunk(&layout.shape, |_, columns, len| {
        match program.run_batch(columns, len) {
            Some(batch) => g = batch.column(0).iter().fold(g, |g, &value| gcd(g, value)),
            None => {
                // Some point has no value (a division by zero): the gcd of those that do.
                for p in 0..len {
                    let point: Vec<i64> = columns.iter().map(|column| column[p]).collect();
                    if let Some(value) = program.run_one(&point) {
                        g = gcd(g, value);
                    }
                }
            }
        }
        g != 1
    });
    if g > 1 {
        let divisor = arena.int(g);
        arena.floordiv(expr, divisor)
    } else if g == 0 {
        arena.int(0)
    } else {
        expr
    }
}

fn gcd(a: i64, b: i64) -> i64 {
    if b == 0 { a.abs() } else { gcd(b, a % b) }
}
