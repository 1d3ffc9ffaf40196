//! Barriers and run-time control flow, found by emulating TileLang's own examples: a loop that runs
//! no iteration or an `if` whose arm holds a barrier must not hide earlier shared-memory accesses
//! from the statements after it; the copies a pipeline issues ahead of their iteration compute the
//! run-time values their regions read for that iteration; a replicated loop that writes only shared
//! memory runs on one replica; `and`/`or` read their right side only where C would. Each kernel is
//! written for the test, lowered, and run on the emulator (which reports races, unbound variables
//! and unwritten reads) on inputs chosen here, against a reference computed here.

use tilec_ir::ThreadProgram;
use tilec_runtime::inputs::make_tensors;
use tilec_runtime::{HostTensor, run_program};
use tilec_tests::{assert_matches, describe_all, on_analysis_stack, run_pipeline, source_file};

/// The only launch of the first instance of `kernel` in `source`, which must check clean.
fn lowered(source: &str, kernel: &str) -> ThreadProgram {
    let db = tilec_db::RootDatabase::default();
    let file = source_file(&db, "/kernels/barriers.py", source);
    let diagnostics = run_pipeline(&db, file);
    assert!(
        diagnostics.is_empty(),
        "{}",
        describe_all(&db, file, &diagnostics)
    );
    let instance = tilec_tests::instance(&db, file, kernel, 0);
    match tilec_db::thread_programs(&db, instance).as_ref() {
        Ok(programs) => programs[0].clone(),
        Err(diagnostics) => panic!("{kernel}: cannot lower: {diagnostics:#?}"),
    }
}

/// Runs `program` with the integer tensor at `param` set to `values` (the others seeded random).
fn emulate(program: &ThreadProgram, param: usize, values: &[i64]) -> Vec<HostTensor> {
    let mut tensors = make_tensors(program, &[], 11, false).expect("shapes evaluate");
    tensors[param].values = values.iter().map(|&v| v as f64).collect();
    if let Err(error) = run_program(program, &mut tensors, &[]) {
        panic!("{}: emulator: {error}", program.name);
    }
    tensors
}

const LOOP_OF_RUN_TIME_EXTENT: &str = r#"
import tilelang.language as T

@T.prim_func
def zero_trips(A: T.Tensor((128,), "float32"), N: T.Tensor((1,), "int32"), B: T.Tensor((128,), "float32"), C: T.Tensor((128,), "float32")):
    with T.Kernel(1, threads=128) as bx:
        s = T.alloc_shared((128,), "float32")
        t = T.alloc_shared((128,), "float32")
        u = T.alloc_shared((128,), "float32")
        T.copy(A, s)
        T.clear(u)
        for k in T.serial(N[0]):
            for i in T.Parallel(128):
                t[i] = s[i] * 2.0
            for i in T.Parallel(128):
                u[i] = u[i] + t[127 - i]
        for i in T.Parallel(128):
            B[i] = s[127 - i]
        T.copy(u, C)
"#;

/// With no iteration, the read of `s` after the loop meets the copy before it: the barriers
/// inside the loop (which end with nothing of `s` pending) never run, so one must follow it.
#[test]
fn a_loop_that_may_run_no_iteration_keeps_what_came_before_pending() {
    on_analysis_stack(|| {
        let program = lowered(LOOP_OF_RUN_TIME_EXTENT, "zero_trips");
        for trips in [0, 1, 2] {
            let t = emulate(&program, 1, &[trips]);
            let a = &t[0].values;
            let reversed: Vec<f64> = (0..128).map(|i| a[127 - i]).collect();
            assert_matches(&format!("B after {trips} trips"), &t[2], reversed.clone());
            let sums: Vec<f64> = reversed.iter().map(|x| x * 2.0 * trips as f64).collect();
            assert_matches(&format!("C after {trips} trips"), &t[3], sums);
        }
    });
}

const BARRIER_IN_ONE_ARM: &str = r#"
import tilelang.language as T

@T.prim_func
def one_arm(A: T.Tensor((128,), "float32"), N: T.Tensor((1,), "int32"), B: T.Tensor((128,), "float32"), C: T.Tensor((128,), "float32")):
    with T.Kernel(1, threads=128) as bx:
        s = T.alloc_shared((128,), "float32")
        t = T.alloc_shared((128,), "float32")
        u = T.alloc_shared((128,), "float32")
        T.copy(A, s)
        T.clear(u)
        if N[0] > 0:
            for i in T.Parallel(128):
                t[i] = s[127 - i]
            for i in T.Parallel(128):
                u[i] = t[127 - i] + 1.0
        for i in T.Parallel(128):
            B[i] = s[127 - i]
        T.copy(u, C)
"#;

/// The arm that is not taken does not separate the copy into `s` from the read after the `if`.
#[test]
fn a_barrier_in_one_arm_of_an_if_does_not_cover_the_other() {
    on_analysis_stack(|| {
        let program = lowered(BARRIER_IN_ONE_ARM, "one_arm");
        for n in [0, 1] {
            let t = emulate(&program, 1, &[n]);
            let a = &t[0].values;
            let reversed: Vec<f64> = (0..128).map(|i| a[127 - i]).collect();
            assert_matches(&format!("B with N = {n}"), &t[2], reversed);
            let taken: Vec<f64> = a
                .iter()
                .map(|x| if n > 0 { x + 1.0 } else { 0.0 })
                .collect();
            assert_matches(&format!("C with N = {n}"), &t[3], taken);
        }
    });
}

const PAGED_PIPELINE: &str = r#"
import tilelang.language as T

@T.prim_func
def paged(K: T.Tensor((256, 32), "float16"), Table: T.Tensor((4,), "int32"), Out: T.Tensor((256, 32), "float16")):
    with T.Kernel(1, threads=128) as bx:
        K_shared = T.alloc_shared((64, 32), "float16")
        for k in T.Pipelined(4, num_stages=2):
            start = Table[k] * 64
            T.copy(K[start : start + 64, :], K_shared)
            T.copy(K_shared, Out[k * 64 : (k + 1) * 64, :])
"#;

/// The copy issued a stage ahead reads `Table[k + 1]`, not the consumer's `Table[k]`, and not an
/// unbound variable.
#[test]
fn a_pipelined_copy_at_a_run_time_offset_computes_it_for_its_own_iteration() {
    on_analysis_stack(|| {
        let program = lowered(PAGED_PIPELINE, "paged");
        let table = [3, 0, 2, 1];
        let t = emulate(&program, 1, &table);
        let expected: Vec<f64> = table
            .iter()
            .flat_map(|&page| {
                let page = usize::try_from(page).unwrap_or_default();
                t[0].values[page * 64 * 32..(page + 1) * 64 * 32].to_vec()
            })
            .collect();
        assert_matches("Out", &t[2], expected);
    });
}

const GUARDED_SWAP: &str = r#"
import tilelang.language as T

@T.prim_func
def pairs(A: T.Tensor((64,), "float32"), N: T.Tensor((1,), "int32"), B: T.Tensor((64,), "float32")):
    with T.Kernel(1, threads=128) as bx:
        s = T.alloc_shared((64,), "float32")
        T.copy(A, s)
        for i in T.Parallel(64):
            j = i ^ 1
            if i < j and s[j] < s[i]:
                v = s[i]
                s[i] = s[j]
                s[j] = v
        T.copy(s, B)
"#;

/// A bitonic step: the odd thread of a pair reads nothing (`and` does not evaluate its right side
/// where `i < j` fails), and of the loop's two replicas over 128 threads only the first runs it.
#[test]
fn a_guarded_swap_reads_only_where_its_guard_holds_and_runs_on_one_replica() {
    on_analysis_stack(|| {
        let program = lowered(GUARDED_SWAP, "pairs");
        let t = emulate(&program, 1, &[0]);
        let a = &t[0].values;
        let expected: Vec<f64> = (0..64)
            .map(|i| {
                let (low, high) = (a[i & !1], a[i | 1]);
                if i % 2 == 0 {
                    low.min(high)
                } else {
                    low.max(high)
                }
            })
            .collect();
        assert_matches("B", &t[2], expected);
    });
}
