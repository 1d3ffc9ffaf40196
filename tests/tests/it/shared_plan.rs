//! How lowering fits a launch into a block's shared memory: rows padded against bank conflicts
//! (a buffer a `T.copy` exchanges with a fragment) are an optimization, and a launch they push
//! past the limit runs with those rows unpadded, with the same results.

use tilec_ir::Target;
use tilec_runtime::inputs::make_tensors;
use tilec_runtime::run_program;
use tilec_tests::{assert_matches, lower_first};

/// 224,000 bytes of row-major staging and a 64×64 half tile exchanged with fragments: 232,192
/// bytes unpadded, 233,216 with the exchange tile's rows padded to 72 halfs, against the 232,448
/// a block may use on sm_90.
const PADDING_PAST_THE_LIMIT: &str =
    include_str!("../../fixtures/kernels/padding_past_the_limit.py");

#[test]
fn padding_that_would_not_fit_is_dropped() {
    let program = lower_first("/kernels/shared_plan.py", PADDING_PAST_THE_LIMIT);
    let limit = i64::try_from(Target::Sm90.shared_memory_per_block()).expect("a small limit");
    assert!(
        program.shared_bytes <= limit,
        "{} bytes of shared memory, more than {limit}",
        program.shared_bytes
    );
    assert!(
        program.shared_bytes >= 224_000 + 8_192,
        "{}",
        program.shared_bytes
    );
    let mut tensors = make_tensors(&program, &[], 3, false).expect("shapes evaluate");
    run_program(&program, &mut tensors, &[]).expect("the emulator runs it");
    let halves = |values: &[f64]| -> Vec<f64> {
        values
            .iter()
            .map(|&v| f64::from(half::f16::from_f64(v)))
            .collect()
    };
    let expected_y = halves(&tensors[1].values);
    assert_matches("y", &tensors[2], expected_y);
    let expected_out = tensors[0].values.clone();
    assert_matches("out", &tensors[3], expected_out);
}

/// The branches of an `if` on the thread index run at the same time on different threads (warp
/// roles): a shared buffer one role reads and one the other writes are live together, whatever
/// the order of the branches in the program, so the plan gives them separate bytes.
const CONCURRENT_ROLES: &str = include_str!("../../fixtures/kernels/concurrent_roles.py");

#[test]
fn buffers_of_concurrent_roles_get_separate_bytes() {
    let program = lower_first("/kernels/roles.py", CONCURRENT_ROLES);
    let placed = |name: &str| {
        program
            .buffers
            .iter()
            .find(|buffer| buffer.name == name)
            .and_then(|buffer| match buffer.memory {
                tilec_ir::thread::Memory::Shared { offset } => {
                    let bytes = program.exprs.as_int(buffer.elements)? * 4;
                    Some((offset, offset + bytes))
                }
                tilec_ir::thread::Memory::Global { .. } | tilec_ir::thread::Memory::Local => None,
            })
            .unwrap_or_else(|| panic!("`{name}` is not in shared memory"))
    };
    let (table, tile) = (placed("t_shared"), placed("tile"));
    assert!(
        table.1 <= tile.0 || tile.1 <= table.0,
        "`t_shared` at {table:?} and `tile` at {tile:?} share bytes"
    );
    let mut tensors = make_tensors(&program, &[], 5, false).expect("shapes evaluate");
    run_program(&program, &mut tensors, &[]).expect("the emulator runs it");
    let doubled = tensors[0].values.iter().map(|x| x * 2.0).collect();
    assert_matches("scaled", &tensors[2], doubled);
    let copied = tensors[1].values.clone();
    assert_matches("B", &tensors[3], copied);
}
