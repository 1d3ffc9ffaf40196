//! How long the CPU emulator would take on an instance, estimated before it runs, and smaller
//! `--with` sizes that would take seconds: `tilec run` refuses an emulation of minutes or hours
//! rather than sit silent through it, or runs it at those sizes (`--shrink`).
//!
//! The estimate counts the statements every thread executes (loops multiplied out, a loop whose
//! extent grows with the block index at the grid's middle block, the longer arm of an `if`) times
//! the threads of the launch, at the rate the emulator runs them, plus the time to fill the
//! launch's tensors. It is meant to be right within a small factor, which is all a refusal with a
//! suggestion, or a choice of sizes, needs.

use tilec_db::{Db, Instance, thread_programs};
use tilec_ir::thread::Stmt;
use tilec_ir::{ConstValue, ThreadProgram};

/// Thread-statements the emulator executes per second (measured on `examples/row_softmax.py` and
/// `examples/tiled_gemm.py` on one core of a 2-core build machine, November 2026; a release and a
/// debug build run the emulator at the same speed, since the emulator's crates are optimised in
/// both).
const STATEMENTS_PER_SECOND: f64 = 20e6;

/// Statement weight of an `ldmatrix`: the emulator moves each thread's few words.
const LOAD_MATRIX_WEIGHT: f64 = 8.0;

/// Statement weight of one multiply-add of a tensor-core instruction, which the emulator runs in a
/// tight loop: `examples/tiled_gemm.py` at 2048³ (8.6e9 multiply-adds on m64n128k16 `wgmma`s)
/// took 23.3 s on one core of the 2-core build machine, November 2026 — about a sixteenth of a
/// statement each.
const MULTIPLY_ADD_WEIGHT: f64 = 1.0 / 16.0;

/// Above this many estimated seconds `tilec run` refuses to emulate without `--force`.
pub(crate) const REFUSE_SECONDS: f64 = 30.0;

/// The suggested `--with` sizes aim under this many estimated seconds, and so does `--shrink`
/// without a value.
pub(crate) const SUGGEST_SECONDS: f64 = 5.0;

/// Tensor elements the emulator fills with seeded random values (or zeros) per second, which a
/// launch pays before its first statement: a decode kernel that reads a little of a large cache
/// spends its time there.
const ELEMENTS_FILLED_PER_SECOND: f64 = 50e6;

/// The estimated seconds the emulator takes to run `programs`, in order, filling their tensors
/// included.
pub(crate) fn emulator_seconds(programs: &[ThreadProgram], scalars: &[i64]) -> Option<f64> {
    let mut statements = 0.0;
    for program in programs {
        let threads = crate::run::launch_threads(program, scalars).ok()? as f64;
        statements += threads * per_thread(program, scalars, &program.body);
    }
    let elements: f64 = match programs.first() {
        Some(program) => tilec_runtime::inputs::param_shapes(program, scalars)
            .ok()?
            .iter()
            .map(|shape| shape.iter().map(|&extent| extent as f64).product::<f64>())
            .sum(),
        None => 0.0,
    };
    Some(statements / STATEMENTS_PER_SECOND + elements / ELEMENTS_FILLED_PER_SECOND)
}

/// Statements one thread executes in `stmts`; a loop whose extent does not evaluate (or a
/// `while`) counts once.
fn per_thread(program: &ThreadProgram, scalars: &[i64], stmts: &[Stmt]) -> f64 {
    stmts
        .iter()
        .map(|stmt| statement_cost(program, scalars, stmt))
        .sum()
}

/// The value of `var` for estimating trip counts: a scalar parameter's value; for a block index,
/// the middle of its grid dimension, so that a causal or windowed loop whose extent grows with the
/// block counts its average trips; 0 for the thread index.
fn estimate_value(program: &ThreadProgram, scalars: &[i64], var: tilec_ir::VarId) -> Option<i64> {
    let scalar = |var| {
        program
            .scalars
            .iter()
            .position(|s| s.var == var)
            .and_then(|k| scalars.get(k).copied())
    };
    if let Some(value) = scalar(var) {
        return Some(value);
    }
    if var == program.thread {
        return Some(0);
    }
    let dim = program.block_index.iter().position(|&b| b == var)?;
    let blocks = program.exprs.eval(program.grid[dim], &scalar)?;
    Some(blocks / 2)
}

fn statement_cost(program: &ThreadProgram, scalars: &[i64], stmt: &Stmt) -> f64 {
    match stmt {
        Stmt::For { extent, body, .. } => {
            let env = |var| estimate_value(program, scalars, var);
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
        // A tensor-core instruction is emulated element by element: a multiply-add per element
        // of the product the thread's share covers, m·n·k over the threads that issue it — an
        // m16n8k16 `mma.sync` 64 a thread, an m64n128k16 `wgmma` 1,024, K being 32 bytes of the
        // operands.
        Stmt::Mma { a, .. } => {
            let k = tilec_ir::thread::mma_k(element_bytes(program, a.buffer)) as f64;
            16.0 * 8.0 * k / 32.0 * MULTIPLY_ADD_WEIGHT
        }
        Stmt::Wgmma { n, b, .. } => {
            let k = tilec_ir::thread::mma_k(element_bytes(program, b.buffer)) as f64;
            64.0 * f64::from(*n) * k / 128.0 * MULTIPLY_ADD_WEIGHT
        }
        Stmt::LoadMatrix { .. } => LOAD_MATRIX_WEIGHT,
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
        | Stmt::NamedBarrierArrive { .. }
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

/// Smaller sizes for an instance: the `--with` assignments that changed, the instance they make
/// and its estimate.
pub(crate) struct SmallerSizes<'db> {
    pub assignments: Vec<String>,
    pub instance: Instance<'db>,
    pub seconds: f64,
}

/// How many halvings [`smaller_sizes`] tries before giving up: enough to bring 2^20-sized
/// problems in several dimensions down to seconds.
const MOST_HALVINGS: usize = 64;

/// A halving counts as shrinking the problem only when it cuts the estimate at least this much:
/// halving a tile size, a thread count or a pipeline depth leaves the work about the same (more
/// blocks of half the work), halving a problem dimension halves it or better.
const PROBLEM_SIZE_GAIN: f64 = 1.5;

/// `--with` assignments that bring `instance` under `target_seconds` of emulation, or as close to
/// it as halving gets, with the instance they make and its estimate.
///
/// Integer arguments are halved one at a time, the largest first; a halving is kept when the
/// smaller instance still lowers and its estimate drops by [`PROBLEM_SIZE_GAIN`] — which tells a
/// problem dimension (`M`, `seq_len`, `batch`) from a tile size, a thread count or a stage count
/// without knowing the kernel. An argument whose halving is not kept is not tried again. When no
/// halving is kept any more (a persistent kernel's grid of one block per multiprocessor does its
/// fixed share however small the problem) the smallest instance reached is the answer: its
/// estimate says whether it is small enough. `None` when the instance does not lower with its
/// sizes bound.
pub(crate) fn smaller_sizes<'db>(
    db: &'db dyn Db,
    instance: Instance<'db>,
    target_seconds: f64,
) -> Option<SmallerSizes<'db>> {
    let (mut current, mut changed) = with_sizes_bound(db, instance);
    let mut seconds = instance_seconds(db, current)?;
    let mut not_sizes: Vec<String> = Vec::new();
    for _ in 0..MOST_HALVINGS {
        if seconds <= target_seconds {
            break;
        }
        let Some((names, candidate, smaller)) = halve_one(db, current, seconds, &mut not_sizes)
        else {
            break;
        };
        current = candidate;
        seconds = smaller;
        for name in names {
            if !changed.contains(&name) {
                changed.push(name);
            }
        }
    }
    let assignments = current
        .args(db)
        .iter()
        .filter(|(name, _)| changed.contains(name))
        .map(|(name, value)| format!("{name}={}", crate::render::const_json(value)))
        .collect();
    Some(SmallerSizes {
        assignments,
        instance: current,
        seconds,
    })
}

/// A value every size known only at run time starts from before [`smaller_sizes`] halves it: the
/// value the check assumes for a generic instance's parameters.
const RUN_TIME_SIZE: i64 = 128;

/// `instance` with a value for every argument known only at run time (the one the check assumed
/// for it, else [`RUN_TIME_SIZE`]) and for every dynamic dimension of its launch no argument
/// binds (`T.dynamic`), as `--with` would give them; with the names it bound.
fn with_sizes_bound<'db>(db: &'db dyn Db, instance: Instance<'db>) -> (Instance<'db>, Vec<String>) {
    let world = tilec_db::kernel_world(db, instance);
    let mut args = instance.args(db).clone();
    let mut bound = Vec::new();
    for (name, value) in args.iter_mut() {
        if *value == ConstValue::RunTime {
            *value = world
                .assumed_args
                .iter()
                .find(|assumed| assumed.name == *name)
                .map_or(ConstValue::Int(RUN_TIME_SIZE), |assumed| {
                    assumed.value.clone()
                });
            bound.push(name.clone());
        }
    }
    let candidate = Instance::new(db, instance.kernel(db), instance.index(db), args.clone());
    if let Ok(programs) = thread_programs(db, candidate).as_ref()
        && let Some(program) = programs.first()
    {
        for scalar in &program.scalars {
            if !args.iter().any(|(name, _)| *name == scalar.name) {
                args.push((scalar.name.clone(), ConstValue::Int(RUN_TIME_SIZE)));
                bound.push(scalar.name.clone());
            }
        }
    }
    if bound.is_empty() {
        return (instance, bound);
    }
    let bound_instance = Instance::new(db, instance.kernel(db), instance.index(db), args);
    (bound_instance, bound)
}

/// The first halving of `instance`'s integer arguments (skipping `not_sizes`) that cuts its
/// estimate of `seconds` by [`PROBLEM_SIZE_GAIN`]: the names halved, the smaller instance and its
/// estimate. Sizes are tried from the largest value down; for each value, each argument alone,
/// then every argument of that value together — dimensions a kernel requires to agree
/// (`seq_q == seq_kv`) only shrink together. Arguments that shrink neither alone nor with their
/// equals are added to `not_sizes`.
fn halve_one<'db>(
    db: &'db dyn Db,
    instance: Instance<'db>,
    seconds: f64,
    not_sizes: &mut Vec<String>,
) -> Option<(Vec<String>, Instance<'db>, f64)> {
    let args = instance.args(db);
    let sizes: Vec<(&String, i64)> = args
        .iter()
        .filter_map(|(name, value)| match value {
            ConstValue::Int(size) if *size >= 2 && !not_sizes.contains(name) => Some((name, *size)),
            _ => None,
        })
        .collect();
    let mut values: Vec<i64> = sizes.iter().map(|&(_, size)| size).collect();
    values.sort_unstable_by_key(|&size| std::cmp::Reverse(size));
    values.dedup();
    for value in values {
        // In argument order, so that the choice is the same on every run.
        let names: Vec<&String> = sizes
            .iter()
            .filter(|&&(_, size)| size == value)
            .map(|&(name, _)| name)
            .collect();
        let mut attempts: Vec<Vec<&String>> = names.iter().map(|&name| vec![name]).collect();
        if names.len() > 1 {
            attempts.push(names.clone());
        }
        for halved in attempts {
            let mut smaller_args = args.clone();
            for (arg, size) in smaller_args.iter_mut() {
                if halved.contains(&&*arg) {
                    *size = ConstValue::Int(value / 2);
                }
            }
            let candidate =
                Instance::new(db, instance.kernel(db), instance.index(db), smaller_args);
            if let Some(smaller) = instance_seconds(db, candidate)
                && smaller * PROBLEM_SIZE_GAIN <= seconds
            {
                return Some((halved.into_iter().cloned().collect(), candidate, smaller));
            }
        }
        not_sizes.extend(names.into_iter().cloned());
    }
    None
}

/// The estimate for `instance`, or `None` when it does not lower, its launch does not evaluate,
/// or a tensor of it is empty (`heads // groups` halved to 0): that is not the kernel any more.
fn instance_seconds(db: &dyn Db, instance: Instance<'_>) -> Option<f64> {
    let Ok(programs) = thread_programs(db, instance).as_ref() else {
        return None;
    };
    let scalars = crate::run::scalar_values(db, instance, programs).ok()?;
    for program in programs {
        let shapes = tilec_runtime::inputs::param_shapes(program, &scalars).ok()?;
        if shapes.iter().flatten().any(|&extent| extent == 0) {
            return None;
        }
    }
    emulator_seconds(programs, &scalars)
}

/// The bytes of one element of `buffer` (4 for a buffer the program does not have).
fn element_bytes(program: &ThreadProgram, buffer: tilec_ir::thread::BufferId) -> i64 {
    program
        .buffers
        .get(buffer.index())
        .map_or(4, |decl| i64::try_from(decl.dtype.bytes()).unwrap_or(4))
}
