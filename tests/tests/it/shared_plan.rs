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
