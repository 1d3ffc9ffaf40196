//! How long the CPU emulator would take on an instance, estimated before it runs, and smaller
//! `--with` sizes that would take seconds: `tilec run` refuses an emulation of minutes or hours
//! rather than sit silent through it.
//!
//! The estimate counts the statements every thread executes (loops multiplied out, the longer arm
//! of an `if`) times the threads of the launch, at the rate the emulator runs them. It is meant to
//! be right within a small factor, which is all a refusal with a suggestion needs.

use tilec_db::{Db, Instance, thread_programs};
use tilec_ir::thread::Stmt;
use tilec_ir::{ConstValue, ThreadProgram};

/// Thread-statements the emulator executes per second (measured on `examples/row_softmax.py` and
/// `examples/tiled_gemm.py` on one core of a 2-core build machine, November 2026; a release and a
/// debug build run the emulator at the same speed, since the emulator's crates are optimised in
/// both).
const STATEMENTS_PER_SECOND: f64 = 20e6;

/// Statement weight of a tensor-core instruction: one `mma.sync` or `wgmma` is emulated element
/// by element, a multiply-add per element of the tile the thread's share covers.
const MATRIX_STATEMENT_WEIGHT: f64 = 64.0;

/// Above this many estimated seconds `tilec run` refuses to emulate without `--force`.
pub(crate) const REFUSE_SECONDS: f64 = 30.0;

/// The suggested `--with` sizes aim under this many estimated seconds.
const SUGGEST_SECONDS: f64 = 5.0;

/// An argument is not shrunk below this: tile and block sizes sit under it, and the point of the
/// suggestion is a smaller problem, not a different tiling.
const SMALLEST_SUGGESTED_SIZE: i64 = 256;

/// The estimated seconds the emulator takes to run `programs`, in order.
pub(crate) fn emulator_seconds(programs: &[ThreadProgram], scalars: &[i64]) -> Option<f64> {
    let mut statements = 0.0;
    for program in programs {
        let threads = crate::run::launch_threads(program, scalars).ok()? as f64;
        statements += threads * per_thread(program, scalars, &program.body);
    }
    Some(statements / STATEMENTS_PER_SECOND)
}

/// Statements one thread executes in `stmts`; a loop whose extent does not evaluate (or a
/// `while`) counts once.
fn per_thread(program: &ThreadProgram, scalars: &[i64], stmts: &[Stmt]) -> f64 {
    stmts
        .iter()
        .map(|stmt| statement_cost(program, scalars, stmt))
        .sum()
}

fn statement_cost(program: &ThreadProgram, scalars: &[i64], stmt: &Stmt) -> f64 {
    match stmt {
        Stmt::For { extent, body, .. } => {
            let env = |var| {
                program
                    .scalars
                    .iter()
                    .position(|s| s.var == var)
                    .and_then(|k| scalars.get(k).copied())
            };
            let trips = program.exprs.eval(*extent, &env).unwrap_or(1).max(0) as f64;
            1.0 + trips * per_thread(program, scalars, body)
        }
        Stmt::Block { body, .. } => per_thread(program, scalars, body),
        // Its trips are only known when it runs: counted once, as a loop whose extent does not
        // evaluate is.
        Stmt::While { body, .. } => 1.0 + per_thread(program, scalars, body),
        Stmt::If {
            then, otherwise, ..
        } => {
            let then = per_thread(program, scalars, then);
            1.0 + then.max(per_thread(program, scalars, otherwise))
        }
        Stmt::WarpRoles {
            consumer, producer, ..
        } => per_thread(program, scalars, consumer).max(per_thread(program, scalars, producer)),
        Stmt::Mma { .. } | Stmt::Wgmma { .. } | Stmt::LoadMatrix { .. } => MATRIX_STATEMENT_WEIGHT,
        Stmt::Let { .. }
        | Stmt::Bind { .. }
        | Stmt::Store { .. }
        | Stmt::VectorCopy { .. }
        | Stmt::Atomic { .. }
        | Stmt::Barrier
        | Stmt::AsyncCopy { .. }
        | Stmt::AsyncCommit
        | Stmt::AsyncWait { .. }
        | Stmt::WgmmaFence
        | Stmt::WgmmaCommit
        | Stmt::WgmmaWait { .. }
        | Stmt::FenceProxyAsync
        | Stmt::MbarrierInit { .. }
        | Stmt::MbarrierInval { .. }
        | Stmt::MbarrierArrive { .. }
        | Stmt::MbarrierExpectTx { .. }
        | Stmt::MbarrierWait { .. }
        | Stmt::TmaLoad { .. }
        | Stmt::TmaStore { .. }
        | Stmt::TmaStoreWait
        | Stmt::SetMaxRegisters { .. }
        | Stmt::NamedBarrier { .. }
        | Stmt::WarpgroupTurn { .. }
        | Stmt::SyncWarp
        | Stmt::Return
        | Stmt::Assert { .. }
        | Stmt::GridDependencyWait
        | Stmt::LaunchDependents
        | Stmt::CallExtern { .. }
        | Stmt::RngInit { .. }
        | Stmt::GridSync => 1.0,
    }
}

/// `--with` assignments that bring `instance` under a few seconds of emulation, with the estimate
/// for them: the largest integer argument is halved (down to [`SMALLEST_SUGGESTED_SIZE`]) until the
/// estimate fits. `None` when no such halving gets there or the smaller instance does not lower.
pub(crate) fn smaller_sizes(db: &dyn Db, instance: Instance<'_>) -> Option<(Vec<String>, f64)> {
    let mut args = instance.args(db).clone();
    let mut changed: Vec<String> = Vec::new();
    for _ in 0..64 {
        let candidate = Instance::new(db, instance.kernel(db), instance.index(db), args.clone());
        let Ok(programs) = thread_programs(db, candidate).as_ref() else {
            return None;
        };
        let scalars = crate::run::scalar_values(db, candidate, programs).ok()?;
        let seconds = emulator_seconds(programs, &scalars)?;
        if seconds <= SUGGEST_SECONDS {
            let assignments = args
                .iter()
                .filter(|(name, _)| changed.contains(name))
                .map(|(name, value)| format!("{name}={}", crate::render::const_json(value)))
                .collect();
            return Some((assignments, seconds));
        }
        let (name, value) = args
            .iter_mut()
            .filter_map(|(name, value)| match value {
                ConstValue::Int(size) if *size >= 2 * SMALLEST_SUGGESTED_SIZE => Some((name, size)),
                _ => None,
            })
            .max_by_key(|(_, size)| **size)?;
        *value /= 2;
        if !changed.contains(name) {
            changed.push(name.clone());
        }
    }
    None
}
