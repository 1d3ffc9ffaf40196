//! Vector accesses for laid-out loops: where a thread's consecutive steps touch consecutive
//! elements of a global or shared buffer, one access of up to 16 bytes replaces several scalar ones.
//!
//! The step counter of a loop is split into `chunk * V + lane`. A buffer is vectorized when every
//! access to it in the loop body runs unconditionally, reads or writes `base + lane` for a `base`
//! that does not depend on the lane, and `base` is a multiple of the lanes one access moves (so
//! every access is aligned: global tensors and the shared-memory plan are 16-byte aligned). Loads
//! then become one vector copy into a register array before the lanes run, and stores one vector
//! copy out of a register array after them. Both facts are decided by the arena's simplifier, so
//! whatever it cannot prove stays scalar: vectorization never changes what a program computes.
//!
//! Hoisting loads above the lanes and sinking stores below them reorders accesses of different
//! lanes only. Lanes are distinct iterations of a `T.Parallel` loop, which may not depend on each
//! other; a buffer the body both reads and writes is vectorized only when it does so at one base,
//! so each lane still reads its own element before writing it.

use rustc_hash::FxHashMap;
use tilec_ir::thread::{BufferDecl, BufferId, Memory, Place, Stmt, Value, ValueId};
use tilec_ir::{DType, ExprArena, ExprId, ThreadProgram, VarId};

use super::rewrite::{Leaves, Rewriter, substitute_stmts};

/// The widest single access, in bytes.
const MAX_ACCESS_BYTES: i64 = 16;

/// A loop whose step was split and whose vectorizable accesses were grouped.
pub(super) struct VectorLoop {
    /// The new step counter (`chunk`), running `steps / lanes` times.
    pub(super) chunk: VarId,
    pub(super) chunks: i64,
    pub(super) body: Vec<Stmt>,
}

/// One access to a global or shared buffer in a loop body.
#[derive(Clone, Copy)]
struct Access {
    buffer: BufferId,
    index: ExprId,
    is_store: bool,
    /// Whether the access runs every time the body does (not under an `if` or a select branch).
    unconditional: bool,
}

/// Splits the loop `for step in 0..steps { body }` into vector accesses when some buffer allows
/// it; `None` leaves the loop as it is.
pub(super) fn vectorize(
    program: &mut ThreadProgram,
    step: VarId,
    steps: i64,
    body: &[Stmt],
) -> Option<VectorLoop> {
    if let [
        Stmt::If {
            cond,
            then,
            otherwise,
        },
    ] = body
        && let Some(unswitched) = vectorize_guarded(program, (step, steps), *cond, then, otherwise)
    {
        return Some(unswitched);
    }
    let plan = best_plan(program, step, steps, body)?;
    Some(plan.build(program, body))
}

/// A body that is one `if` whose condition is the same for every lane of a vector (a copy's
/// bounds guard on a row, with the zero fill of the rows past the end in its `else`): the lanes
/// are split out of the condition, the `then` branch is vectorized as a whole body, and the `else`
/// branch runs lane by lane. Every lane would take the same branch, so this computes what the
/// scalar loop does.
fn vectorize_guarded(
    program: &mut ThreadProgram,
    (step, steps): (VarId, i64),
    cond: ValueId,
    then: &[Stmt],
    otherwise: &[Stmt],
) -> Option<VectorLoop> {
    let plan = best_plan(program, step, steps, then)?;
    let split = plan.split(&mut program.exprs);
    let lookup = |v: VarId| (v == step).then_some(split);
    let probe = [Stmt::If {
        cond,
        then: Vec::new(),
        otherwise: Vec::new(),
    }];
    let [Stmt::If { cond, .. }] = substitute_stmts(program, &probe, &lookup)[..] else {
        return None;
    };
    if value_mentions(program, cond, plan.lane) {
        return None;
    }
    let lane = plan.lane;
    let lanes = program.exprs.int(plan.lanes);
    let scalar = substitute_stmts(program, otherwise, &lookup);
    let vectorized = plan.build(program, then);
    let otherwise = if scalar.is_empty() {
        Vec::new()
    } else {
        vec![Stmt::For {
            var: lane,
            extent: lanes,
            unroll: true,
            body: scalar,
        }]
    };
    Some(VectorLoop {
        chunk: vectorized.chunk,
        chunks: vectorized.chunks,
        body: vec![Stmt::If {
            cond,
            then: vectorized.body,
            otherwise,
        }],
    })
}

/// Whether the value `id` reads the variable `var` in an index or an address.
fn value_mentions(program: &ThreadProgram, id: ValueId, var: VarId) -> bool {
    let mut stack = vec![id];
    let mut seen = vec![false; program.values.len()];
    while let Some(id) = stack.pop() {
        match seen.get_mut(id.index()) {
            Some(visited) if !*visited => *visited = true,
            _ => continue,
        }
        let value = program.value(id);
        if let Value::Index(e) | Value::Load { index: e, .. } = value
            && program.exprs.vars_of(*e).contains(&var)
        {
            return true;
        }
        stack.extend(value.operands());
    }
    false
}

/// The split that vectorizes the most buffers of `body`, if any does.
fn best_plan(program: &mut ThreadProgram, step: VarId, steps: i64, body: &[Stmt]) -> Option<Plan> {
    let mut accesses = Vec::new();
    for stmt in body {
        collect_stmt(program, stmt, true, &mut accesses)?;
    }
    let narrowest = accesses
        .iter()
        .map(|a| element_bytes(program, a.buffer))
        .min()?;
    let mut best: Option<(usize, Plan)> = None;
    let mut lanes = MAX_ACCESS_BYTES / narrowest;
    while lanes >= 2 {
        if steps % lanes == 0 {
            let plan = Plan::new(program, step, steps, lanes, &accesses);
            let score = plan.vectorized.len();
            if score > 0 && best.as_ref().is_none_or(|(s, _)| score > *s) {
                best = Some((score, plan));
            }
        }
        lanes /= 2;
    }
    best.map(|(_, plan)| plan)
}

/// The bytes of one element of `buffer`: one for the 4-bit types, which the printer moves in
/// whole bytes of packed memory (an even number of lanes from an even index; see
/// `nibble_vector_copy` in the CUDA printer), so that their vectors are as long as a byte type's.
fn element_bytes(program: &ThreadProgram, buffer: BufferId) -> i64 {
    i64::try_from(program.buffer(buffer).dtype.bytes()).unwrap_or(i64::MAX)
}

/// Records the accesses of `stmt`; `None` when the statement is of a kind the split does not
/// handle (loops, barriers, atomics, copies), which leaves the whole loop scalar.
fn collect_stmt(
    program: &ThreadProgram,
    stmt: &Stmt,
    unconditional: bool,
    out: &mut Vec<Access>,
) -> Option<()> {
    match stmt {
        Stmt::Store {
            place: Place { buffer, index },
            value,
        } => {
            collect_value(program, *value, unconditional, out);
            push_access(program, out, *buffer, *index, true, unconditional);
        }
        Stmt::If {
            cond,
            then,
            otherwise,
        } => {
            collect_value(program, *cond, unconditional, out);
            for nested in then.iter().chain(otherwise) {
                collect_stmt(program, nested, false, out)?;
            }
        }
        _ => return None,
    }
    Some(())
}

/// Records the loads in the value `id`; the branches of a select count as conditional.
fn collect_value(program: &ThreadProgram, id: ValueId, unconditional: bool, out: &mut Vec<Access>) {
    match program.value(id) {
        Value::Load { buffer, index } => {
            push_access(program, out, *buffer, *index, false, unconditional);
        }
        Value::Unary { arg, .. } => collect_value(program, *arg, unconditional, out),
        Value::Cast { value, .. } | Value::ShuffleXor { value, .. } => {
            collect_value(program, *value, unconditional, out);
        }
        Value::Shuffle { .. } => {
            for operand in program.value(id).operands() {
                collect_value(program, operand, unconditional, out);
            }
        }
        Value::Binary { lhs, rhs, .. } | Value::Compare { lhs, rhs, .. } => {
            collect_value(program, *lhs, unconditional, out);
            collect_value(program, *rhs, unconditional, out);
        }
        Value::Select {
            cond,
            then,
            otherwise,
            ..
        } => {
            collect_value(program, *cond, unconditional, out);
            collect_value(program, *then, false, out);
            collect_value(program, *otherwise, false, out);
        }
        Value::Float { .. } | Value::Int { .. } | Value::Index(_) | Value::Random(_) => {}
    }
}

fn push_access(
    program: &ThreadProgram,
    out: &mut Vec<Access>,
    buffer: BufferId,
    index: ExprId,
    is_store: bool,
    unconditional: bool,
) {
    if program.buffer(buffer).memory != Memory::Local {
        out.push(Access {
            buffer,
            index,
            is_store,
            unconditional,
        });
    }
}

/// A candidate split: the lane count and the buffers it vectorizes.
struct Plan {
    step: VarId,
    lanes: i64,
    chunk: VarId,
    chunks: i64,
    lane: VarId,
    vectorized: Vec<BufferId>,
}

impl Plan {
    fn new(
        program: &mut ThreadProgram,
        step: VarId,
        steps: i64,
        lanes: i64,
        accesses: &[Access],
    ) -> Plan {
        let chunks = steps / lanes;
        let chunk = program.exprs.var("chunk", Some(chunks));
        let lane = program.exprs.var("lane", Some(lanes));
        let mut plan = Plan {
            step,
            lanes,
            chunk,
            chunks,
            lane,
            vectorized: Vec::new(),
        };
        let mut verdicts: FxHashMap<BufferId, BufferVerdict> = FxHashMap::default();
        for access in accesses {
            let per_access = plan.access_base(program, access);
            let verdict = verdicts.entry(access.buffer).or_default();
            verdict.add(access.is_store, per_access);
        }
        let mut vectorized: Vec<BufferId> = verdicts
            .into_iter()
            .filter(|(_, verdict)| verdict.allows())
            .map(|(buffer, _)| buffer)
            .collect();
        vectorized.sort();
        plan.vectorized = vectorized;
        plan
    }

    /// `step` as `chunk * lanes + lane`.
    fn split(&self, arena: &mut ExprArena) -> ExprId {
        let chunk = arena.var_expr(self.chunk);
        let lanes = arena.int(self.lanes);
        let scaled = arena.mul(chunk, lanes);
        let lane = arena.var_expr(self.lane);
        arena.add(scaled, lane)
    }

    /// The base of a vectorizable access (its index at lane 0), or `None` when the access is
    /// conditional, not contiguous in the lane, or not aligned to one access.
    fn access_base(&self, program: &mut ThreadProgram, access: &Access) -> Option<ExprId> {
        if !access.unconditional {
            return None;
        }
        let arena = &mut program.exprs;
        let split = self.split(arena);
        let index = arena.substitute(access.index, &|v| (v == self.step).then_some(split));
        let base = self.base_of(arena, index);
        let offset = arena.sub(index, base);
        if offset != arena.var_expr(self.lane) {
            return None;
        }
        let per_access = self.lanes_per_access(program, access.buffer);
        let arena = &mut program.exprs;
        let modulus = arena.int(per_access);
        let misalignment = arena.floormod(base, modulus);
        (arena.as_int(misalignment) == Some(0)).then_some(base)
    }

    /// `index` at lane 0.
    fn base_of(&self, arena: &mut ExprArena, index: ExprId) -> ExprId {
        let zero = arena.int(0);
        arena.substitute(index, &|v| (v == self.lane).then_some(zero))
    }

    /// How many lanes one access of at most 16 bytes moves.
    fn lanes_per_access(&self, program: &ThreadProgram, buffer: BufferId) -> i64 {
        (MAX_ACCESS_BYTES / element_bytes(program, buffer)).clamp(1, self.lanes)
    }

    /// The loop with the step split, vectorized buffers going through register arrays.
    fn build(self, program: &mut ThreadProgram, body: &[Stmt]) -> VectorLoop {
        let split = self.split(&mut program.exprs);
        let step = self.step;
        let body = substitute_stmts(program, body, &|v| (v == step).then_some(split));
        let sources = self
            .vectorized
            .iter()
            .map(|&b| {
                let decl = program.buffer(b);
                (b, (decl.name.clone(), decl.dtype))
            })
            .collect();
        let mut staging = Staging {
            plan: &self,
            sources,
            next_id: program.buffers.len(),
            loads: Vec::new(),
            stores: Vec::new(),
            temps: FxHashMap::default(),
            written_first: rustc_hash::FxHashSet::default(),
            new_buffers: Vec::new(),
        };
        let lane_body = Rewriter::new(program, &mut staging).stmts(&body);
        let Staging {
            loads,
            stores,
            new_buffers,
            ..
        } = staging;
        let mut out = Vec::new();
        for decl in new_buffers {
            let name = program.unique_buffer_name(&decl.name);
            program.add_buffer(BufferDecl { name, ..decl });
        }
        for &(buffer, base, temp) in &loads {
            self.copies(program, (temp, None), (buffer, Some(base)), &mut out);
        }
        let lanes = program.exprs.int(self.lanes);
        out.push(Stmt::For {
            var: self.lane,
            extent: lanes,
            unroll: true,
            body: lane_body,
        });
        for &(buffer, base, temp) in &stores {
            self.copies(program, (buffer, Some(base)), (temp, None), &mut out);
        }
        VectorLoop {
            chunk: self.chunk,
            chunks: self.chunks,
            body: out,
        }
    }

    /// Copies `lanes` elements from `src` to `dst` in accesses of at most 16 bytes; a `None` base
    /// is a register array's start.
    fn copies(
        &self,
        program: &mut ThreadProgram,
        dst: (BufferId, Option<ExprId>),
        src: (BufferId, Option<ExprId>),
        out: &mut Vec<Stmt>,
    ) {
        let global = if dst.1.is_some() { dst.0 } else { src.0 };
        let per_access = self.lanes_per_access(program, global);
        let arena = &mut program.exprs;
        let mut at = |base: Option<ExprId>, offset: i64| {
            let offset = arena.int(offset);
            match base {
                Some(base) => arena.add(base, offset),
                None => offset,
            }
        };
        let mut offset = 0;
        while offset < self.lanes {
            out.push(Stmt::VectorCopy {
                dst: Place {
                    buffer: dst.0,
                    index: at(dst.1, offset),
                },
                src: Place {
                    buffer: src.0,
                    index: at(src.1, offset),
                },
                lanes: u32::try_from(per_access).unwrap_or(1),
            });
            offset += per_access;
        }
    }
}

/// Whether every access to one buffer allows vectorizing it.
#[derive(Default)]
struct BufferVerdict {
    bases: Vec<ExprId>,
    loads: bool,
    stores: bool,
    refused: bool,
}

impl BufferVerdict {
    fn add(&mut self, is_store: bool, base: Option<ExprId>) {
        match base {
            Some(base) if !self.bases.contains(&base) => self.bases.push(base),
            Some(_) => {}
            None => self.refused = true,
        }
        if is_store {
            self.stores = true;
        } else {
            self.loads = true;
        }
    }

    /// Read-only and write-only buffers at any bases; a buffer both read and written at one.
    fn allows(&self) -> bool {
        !self.refused && (!(self.loads && self.stores) || self.bases.len() == 1)
    }
}

/// The register arrays a vectorized loop stages its accesses in.
struct Staging<'p> {
    plan: &'p Plan,
    /// Name and dtype of each vectorized buffer, for its register arrays.
    sources: FxHashMap<BufferId, (String, DType)>,
    /// The id the next register array gets: they are appended to the program after the rewrite,
    /// in the order they were handed out.
    next_id: usize,
    /// `(buffer, base, register array)` to fill before the lanes run, in first-use order.
    loads: Vec<(BufferId, ExprId, BufferId)>,
    /// `(buffer, base, register array)` to write back after them.
    stores: Vec<(BufferId, ExprId, BufferId)>,
    temps: FxHashMap<(BufferId, ExprId), BufferId>,
    /// The register arrays whose first access in the body is a store: every lane writes its
    /// element before it reads it (a `T.Parallel` body that stores `buf[i, j]` and reads it back),
    /// so nothing is loaded into them first. Loading would read memory no thread wrote yet.
    written_first: rustc_hash::FxHashSet<BufferId>,
    new_buffers: Vec<BufferDecl>,
}

impl Staging<'_> {
    /// Redirects an access of a vectorized buffer to lane `lane` of its register array.
    fn stage(
        &mut self,
        arena: &mut ExprArena,
        buffer: BufferId,
        index: ExprId,
        is_store: bool,
    ) -> (BufferId, ExprId) {
        let Some((name, dtype)) = self.sources.get(&buffer).cloned() else {
            return (buffer, index);
        };
        let base = self.plan.base_of(arena, index);
        let temp = match self.temps.get(&(buffer, base)) {
            Some(&temp) => temp,
            None => {
                let temp = BufferId(u32::try_from(self.next_id).unwrap_or(u32::MAX));
                self.next_id += 1;
                let elements = arena.int(self.plan.lanes);
                self.new_buffers.push(BufferDecl {
                    name: format!("{name}_vec"),
                    dtype,
                    memory: Memory::Local,
                    shape: vec![elements],
                    elements,
                    strides: None,
                });
                self.temps.insert((buffer, base), temp);
                // Every access of a vectorized buffer is unconditional (the plan allows no
                // other), so a store met first writes each lane before any read of it.
                if is_store {
                    self.written_first.insert(temp);
                }
                temp
            }
        };
        if !is_store && self.written_first.contains(&temp) {
            return (temp, arena.var_expr(self.plan.lane));
        }
        let list = if is_store {
            &mut self.stores
        } else {
            &mut self.loads
        };
        if !list.iter().any(|&(_, _, t)| t == temp) {
            list.push((buffer, base, temp));
        }
        (temp, arena.var_expr(self.plan.lane))
    }
}

impl Leaves for &mut Staging<'_> {
    fn expr(&mut self, _arena: &mut ExprArena, e: ExprId) -> ExprId {
        e
    }

    fn load(
        &mut self,
        arena: &mut ExprArena,
        buffer: BufferId,
        index: ExprId,
    ) -> (BufferId, ExprId) {
        self.stage(arena, buffer, index, false)
    }

    fn store(
        &mut self,
        arena: &mut ExprArena,
        buffer: BufferId,
        index: ExprId,
    ) -> (BufferId, ExprId) {
        self.stage(arena, buffer, index, true)
    }
}
