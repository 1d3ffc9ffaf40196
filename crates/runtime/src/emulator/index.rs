//! Index expressions evaluated for many threads at once.
//!
//! Every index of a statement is evaluated for all threads that execute it. Each distinct expression
//! is compiled once into an [`ExprProgram`] over exactly the variables it reads, and a statement then
//! runs it as one batch over its threads, which costs a few machine instructions per thread and node
//! instead of a recursive walk per thread. Only when a batch fails is the expression walked again
//! thread by thread, to say which thread failed and why.

use tilec_ir::expr::{Expr, floor_div, floor_mod};
use tilec_ir::{ExprArena, ExprId, ExprProgram, VarId};

use super::error::IndexFault;

/// What a variable stands for while a block runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Binding {
    Unbound,
    /// The same value in every thread: a scalar parameter, a block index, a loop variable, or a
    /// `let` whose value does not depend on the thread.
    Uniform(i64),
    /// The flat thread index itself.
    Thread,
    /// One value per thread of the block (indexed by thread), from a thread-dependent `let`.
    PerThread(Vec<i64>),
}

impl Binding {
    fn at(&self, thread: u32) -> Option<i64> {
        match self {
            Binding::Unbound => None,
            Binding::Uniform(value) => Some(*value),
            Binding::Thread => Some(i64::from(thread)),
            Binding::PerThread(values) => values.get(thread as usize).copied(),
        }
    }

    fn is_uniform(&self) -> bool {
        matches!(self, Binding::Uniform(_) | Binding::Unbound)
    }
}

/// The bindings of all variables of the program's arena, by variable index.
#[derive(Clone, Debug, Default)]
pub(super) struct Env {
    pub vars: Vec<Binding>,
}

impl Env {
    pub(super) fn new(vars: usize) -> Env {
        Env {
            vars: vec![Binding::Unbound; vars],
        }
    }

    fn get(&self, var: VarId) -> &Binding {
        self.vars.get(var.index()).unwrap_or(&Binding::Unbound)
    }
}

/// Why an index that must be the same in every thread has no value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum UniformFault {
    Fault(IndexFault),
    ThreadDependent,
    /// The expression id is not one of the arena's.
    BadId,
}

/// Why a batch of indices failed: the fault, the thread it happened in when one is to blame, or a bad
/// expression id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum BatchFault {
    Fault(IndexFault, Option<u32>),
    BadId,
}

#[derive(Debug)]
struct Compiled {
    program: ExprProgram,
    vars: Vec<VarId>,
}

/// The compiled form of every index expression evaluated so far.
#[derive(Debug)]
pub(super) struct Indexer<'p> {
    arena: &'p ExprArena,
    compiled: Vec<Option<Compiled>>,
}

impl<'p> Indexer<'p> {
    pub(super) fn new(arena: &'p ExprArena) -> Indexer<'p> {
        let mut compiled = Vec::new();
        compiled.resize_with(arena.len(), || None);
        Indexer { arena, compiled }
    }

    /// The compiled program of `e`, compiling it on first use; `None` for an id of another arena.
    fn compiled(&mut self, e: ExprId) -> Option<&mut Compiled> {
        let slot = self.compiled.get_mut(e.index())?;
        let arena = self.arena;
        Some(slot.get_or_insert_with(|| {
            let vars = arena.vars_of(e);
            Compiled {
                program: ExprProgram::compile(arena, &vars, &[e]),
                vars,
            }
        }))
    }

    /// Whether `e` reads the thread index, directly or through a thread-dependent `let`.
    pub(super) fn depends_on_thread(&mut self, env: &Env, e: ExprId) -> bool {
        match self.compiled(e) {
            Some(compiled) => compiled.vars.iter().any(|&var| !env.get(var).is_uniform()),
            None => false,
        }
    }

    /// The value of `e`, which must not depend on the thread.
    pub(super) fn eval_uniform(&mut self, env: &Env, e: ExprId) -> Result<i64, UniformFault> {
        let arena = self.arena;
        let compiled = self.compiled(e).ok_or(UniformFault::BadId)?;
        let mut inputs = Vec::with_capacity(compiled.vars.len());
        for &var in &compiled.vars {
            match env.get(var) {
                Binding::Uniform(value) => inputs.push(*value),
                Binding::Unbound => {
                    return Err(UniformFault::Fault(IndexFault::Unbound(var_name(
                        arena, var,
                    ))));
                }
                Binding::Thread | Binding::PerThread(_) => {
                    return Err(UniformFault::ThreadDependent);
                }
            }
        }
        match compiled.program.run_one(&inputs) {
            Some(value) => Ok(value),
            None => Err(UniformFault::Fault(
                diagnose(arena, env, e, 0)
                    .err()
                    .unwrap_or(IndexFault::Overflow),
            )),
        }
    }

    /// The value of `e` in each of `threads`, in order.
    pub(super) fn eval(
        &mut self,
        env: &Env,
        e: ExprId,
        threads: &[u32],
    ) -> Result<Vec<i64>, BatchFault> {
        let arena = self.arena;
        let compiled = self.compiled(e).ok_or(BatchFault::BadId)?;
        if let Some(&var) = compiled
            .vars
            .iter()
            .find(|&&var| env.get(var) == &Binding::Unbound)
        {
            return Err(BatchFault::Fault(
                IndexFault::Unbound(var_name(arena, var)),
                None,
            ));
        }
        if threads.is_empty() {
            return Ok(Vec::new());
        }
        // An index that is the same in every thread is computed once.
        if compiled.vars.iter().all(|&var| env.get(var).is_uniform()) {
            let inputs: Vec<i64> = compiled
                .vars
                .iter()
                .map(|&var| env.get(var).at(0).unwrap_or(0))
                .collect();
            return match compiled.program.run_one(&inputs) {
                Some(value) => Ok(vec![value; threads.len()]),
                None => Err(first_failure(arena, env, e, &threads[..1])),
            };
        }
        let columns: Vec<Vec<i64>> = compiled
            .vars
            .iter()
            .map(|&var| column(env.get(var), threads))
            .collect();
        let inputs: Vec<&[i64]> = columns.iter().map(Vec::as_slice).collect();
        if let Some(outputs) = compiled.program.run_batch(&inputs, threads.len()) {
            return Ok(outputs.column(0).to_vec());
        }
        Err(first_failure(arena, env, e, threads))
    }
}

/// The name of a variable, or its number when the arena does not know it.
pub(super) fn var_name(arena: &ExprArena, var: VarId) -> String {
    if var.index() < arena.num_vars() {
        arena.var_info(var).name.clone()
    } else {
        format!("#{}", var.index())
    }
}

/// The values of a variable in each of `threads`.
fn column(binding: &Binding, threads: &[u32]) -> Vec<i64> {
    match binding {
        Binding::Uniform(value) => vec![*value; threads.len()],
        Binding::Thread => threads.iter().map(|&t| i64::from(t)).collect(),
        Binding::PerThread(_) | Binding::Unbound => threads
            .iter()
            .map(|&t| binding.at(t).unwrap_or(0))
            .collect(),
    }
}

/// The first thread in which `e` fails, and why.
fn first_failure(arena: &ExprArena, env: &Env, e: ExprId, threads: &[u32]) -> BatchFault {
    for &thread in threads {
        if let Err(fault) = diagnose(arena, env, e, thread) {
            return BatchFault::Fault(fault, Some(thread));
        }
    }
    // The batch and the walk implement the same arithmetic, so this is not reached; overflow is
    // the only fault a batch can have that a walk might not see in the same order.
    BatchFault::Fault(IndexFault::Overflow, None)
}

/// Evaluates `e` in one thread by walking the expression, telling the kinds of failure apart. The
/// recursion is as deep as the expression, which the arena's simplifier keeps shallow.
fn diagnose(arena: &ExprArena, env: &Env, e: ExprId, thread: u32) -> Result<i64, IndexFault> {
    let node = arena.get(e);
    let (a, b) = match *node {
        Expr::Int(value) => return Ok(value),
        Expr::Var(var) => {
            let unbound = || IndexFault::Unbound(var_name(arena, var));
            return env.get(var).at(thread).ok_or_else(unbound);
        }
        _ => node.operands().ok_or(IndexFault::Overflow)?,
    };
    let x = diagnose(arena, env, a, thread)?;
    let y = diagnose(arena, env, b, thread)?;
    let value = match node {
        Expr::Add(..) => x.checked_add(y),
        Expr::Sub(..) => x.checked_sub(y),
        Expr::Mul(..) => x.checked_mul(y),
        Expr::FloorDiv(..) | Expr::FloorMod(..) if y == 0 => {
            return Err(IndexFault::DivisionByZero);
        }
        Expr::FloorDiv(..) => floor_div(x, y),
        Expr::FloorMod(..) => floor_mod(x, y),
        Expr::Min(..) => Some(x.min(y)),
        Expr::Max(..) => Some(x.max(y)),
        Expr::Int(_) | Expr::Var(_) => None,
    };
    value.ok_or(IndexFault::Overflow)
}
