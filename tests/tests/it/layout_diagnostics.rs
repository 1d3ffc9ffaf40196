//! The layout diagnostics that need no corpus file: invalid `T.annotate_layout` fragments (two
//! elements in one register, threads outside the block, a shape other than the buffer's) and
//! fragment loops that do not divide evenly among the threads. Each test checks the exact rendered
//! diagnostics (code, line, message), so a change of wording is a reviewed snapshot update.

use expect_test::{Expect, expect};
use tilec_db::RootDatabase;
use tilec_tests::{describe_all, on_analysis_stack, run_pipeline, source_file};

/// A kernel with a `(4, 32)` fragment over 64 threads, annotated with `layout` (the body of
/// `forward_fn`'s return) and a shape, then written and read by parallel loops.
fn annotated_kernel(annotation_shape: &str, layout: &str) -> String {
    format!(
        r#"import tilelang
import tilelang.language as T


def layout_fn(i, j):
    return {layout}


@tilelang.jit
def annotated():
    @T.prim_func
    def main(A: T.Tensor((4, 32), T.float32), B: T.Tensor((4, 32), T.float32)):
        with T.Kernel(1, threads=64):
            frag = T.alloc_fragment((4, 32), T.float32)
            T.annotate_layout({{frag: T.Fragment({annotation_shape}, forward_fn=layout_fn)}})
            for i, j in T.Parallel(4, 32):
                frag[i, j] = A[i, j]
            for i, j in T.Parallel(4, 32):
                B[i, j] = frag[i, j] * 2

    return main
"#
    )
}

fn check(text: String, expected: Expect) {
    let rendered = on_analysis_stack(move || {
        let db = RootDatabase::default();
        let file = source_file(&db, "kernel.py", text);
        let diagnostics = run_pipeline(&db, file);
        // expect-test strips the literal's common indentation, so the listing's is dropped too.
        describe_all(&db, file, &diagnostics)
            .lines()
            .map(|line| line.strip_prefix("    ").unwrap_or(line))
            .collect::<Vec<_>>()
            .join("\n")
    });
    expected.assert_eq(&rendered);
}

#[test]
fn a_valid_annotation_is_silent() {
    check(
        annotated_kernel("(4, 32)", "j % 16 + i // 2 * 16, i % 2 * 2 + j // 16"),
        expect!["(no diagnostics)"],
    );
}

#[test]
fn two_elements_in_one_register_are_an_invalid_layout() {
    check(
        annotated_kernel("(4, 32)", "j % 16 + i // 2 * 16, i % 2"),
        expect![
            "15:13 error invalid-layout [annotated#0] the annotated layout of `frag` puts frag[0, 0] and frag[0, 16] both in register [0] of thread 0: one would overwrite the other (help: give the elements a thread holds distinct local indices (the outputs after the thread))"
        ],
    );
}

#[test]
fn a_thread_outside_the_block_is_an_invalid_layout() {
    check(
        annotated_kernel("(4, 32)", "j + i * 32, 0"),
        expect![
            "15:13 error invalid-layout [annotated#0] the annotated layout of `frag` puts frag[2, 0] on thread 64, but the block has threads 0..64 (help: the thread formula must stay in 0..64 (the `threads=` of `T.Kernel`))"
        ],
    );
}

#[test]
fn an_annotation_of_another_shape_is_reported_once() {
    check(
        annotated_kernel("(4, 16)", "j + i // 2 * 16, i % 2"),
        expect![
            "15:13 error shape-mismatch [annotated#0] the layout annotated for `frag` has shape [4, 16], but the buffer's shape is [4, 32]"
        ],
    );
}

/// A fragment loop of `iterations` over `threads` threads.
fn uneven_kernel(iterations: i64, threads: i64) -> String {
    format!(
        r#"import tilelang
import tilelang.language as T


@tilelang.jit
def uneven():
    @T.prim_func
    def main(A: T.Tensor(({iterations},), T.float32), B: T.Tensor(({iterations},), T.float32)):
        with T.Kernel(1, threads={threads}):
            frag = T.alloc_fragment(({iterations},), T.float32)
            for i in T.Parallel({iterations}):
                frag[i] = A[i]
            for i in T.Parallel({iterations}):
                B[i] = frag[i] + 1

    return main
"#
    )
}

#[test]
fn fragment_loops_that_divide_evenly_are_silent() {
    check(uneven_kernel(256, 128), expect!["(no diagnostics)"]);
    check(uneven_kernel(32, 128), expect!["(no diagnostics)"]);
}

#[test]
fn fragment_loops_that_do_not_divide_evenly_warn() {
    check(
        uneven_kernel(200, 128),
        expect![
            "11:13 warning uneven-partition [uneven#0] this fragment loop's 200 iterations do not divide evenly among 128 threads: 72 threads take 2 and 56 take fewer, so every thread keeps registers for 2 and the rest are padding (help: make the loop a multiple of 128 iterations, or launch a thread count that divides 200)"
        ],
    );
}

#[test]
fn reading_a_second_accumulator_transposed_is_a_conflict() {
    // The loop takes the layout of `acc1`, which it writes; `acc2` has the same tensor-core layout,
    // so reading it transposed needs elements other threads hold.
    let text = r#"import tilelang
import tilelang.language as T


@tilelang.jit
def two_accumulators():
    @T.prim_func
    def main(A: T.Tensor((64, 32), T.float16), B: T.Tensor((32, 64), T.float16), C: T.Tensor((64, 64), T.float32)):
        with T.Kernel(1, threads=128):
            A_s = T.alloc_shared((64, 32), T.float16)
            B_s = T.alloc_shared((32, 64), T.float16)
            acc1 = T.alloc_fragment((64, 64), T.float32)
            acc2 = T.alloc_fragment((64, 64), T.float32)
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.gemm(A_s, B_s, acc1, clear_accum=True)
            T.gemm(A_s, B_s, acc2, clear_accum=True)
            for i, j in T.Parallel(64, 64):
                acc1[i, j] = acc1[i, j] + acc2[j, i]
            T.copy(acc1, C)

    return main
"#;
    check(
        text.to_owned(),
        expect![[r#"
            19:17 error layout-conflict [two_accumulators#0] iteration (i, j) = (0, 1) of this loop runs on thread 0 and accesses acc2[1, 0], but `T.gemm` gives it the tensor-core accumulator layout (thread = i // 16 * 32 + i % 8 * 4 + j % 8 // 2), which puts acc2[1, 0] on thread 4 (help: copy `acc2` to a shared buffer (`T.copy(acc2, acc2_shared)`) and access that, or annotate a layout for one of the fragments (`T.annotate_layout`) that agrees with the other)
            related 17:13 `acc2`'s layout is fixed here
            related 18:13 the loop's layout: it follows the layout of `acc1`"#]],
    );
}

/// A kernel whose 2-D fragment is seen through `view_call` (which names `frag`).
fn view_kernel(view_call: &str) -> String {
    format!(
        r#"import tilelang
import tilelang.language as T


@tilelang.jit
def viewed():
    @T.prim_func
    def main(A: T.Tensor((4, 32), T.float32), B: T.Tensor((128,), T.float32)):
        with T.Kernel(1, threads=64):
            frag = T.alloc_fragment((4, 32), T.float32)
            line = {view_call}
            T.copy(A, frag)
            for k in T.Parallel(128):
                B[k] = line[k]

    return main
"#
    )
}

#[test]
fn views_with_the_same_elements_are_silent_and_others_are_errors() {
    check(
        view_kernel("T.reshape(frag, (128,))"),
        expect!["(no diagnostics)"],
    );
    check(
        view_kernel("T.view(frag, (128,))"),
        expect!["(no diagnostics)"],
    );
    check(
        view_kernel("T.reshape(frag, (64,))"),
        expect![
            "11:36 error shape-mismatch [viewed#0] `T.reshape` to 64 elements of a buffer of 128 (`frag`): the shapes must hold the same number of elements"
        ],
    );
    check(
        view_kernel("T.view(frag, (128,), dtype=T.float16)"),
        expect![
            "11:41 not-analysed not-analysed [viewed#0] `T.view` to another dtype (float16) of a buffer outside shared memory reinterprets its bytes, which tilec does not support yet"
        ],
    );
}

/// A view of a shared tile to another dtype must take exactly the tile's bytes: 4×32 float32 is
/// 512 bytes, which 256 float16 take and 128 do not.
#[test]
fn a_view_of_shared_memory_to_another_dtype_takes_its_bytes() {
    let kernel = |view: &str| {
        format!(
            r#"import tilelang
import tilelang.language as T


@tilelang.jit
def viewed():
    @T.prim_func
    def main(A: T.Tensor((4, 32), T.float32), B: T.Tensor((4, 32), T.float32)):
        with T.Kernel(1, threads=64):
            tile = T.alloc_shared((4, 32), T.float32)
            T.copy(A, tile)
            T.copy(tile, B)
            halves = {view}
            for k in T.Parallel(2):
                halves[k] = 0

    return main
"#
        )
    };
    check(
        kernel("T.view(tile, (256,), dtype=T.float16)"),
        expect!["(no diagnostics)"],
    );
    check(
        kernel("T.view(tile, (128,), dtype=T.float16)"),
        expect![[r#"
            13:35 error shape-mismatch [viewed#0] `T.view` to 128 float16 elements (256 bytes) of `tile`, 128 float32 elements (512 bytes): a view must take exactly its buffer's bytes"#]],
    );
}

#[test]
fn a_reduction_into_a_view_must_agree_with_its_annotated_base() {
    // `acc` is annotated one element per thread; the reduction into its view `rows` needs each
    // row on all 16 threads that reduced it, so the two cannot be the same storage.
    check(
        r#"import tilelang
import tilelang.language as T


def one_per_thread(i, j):
    return i * 2 + j, 0


@tilelang.jit
def split():
    @T.prim_func
    def main(A: T.Tensor((4, 32), T.float32), B: T.Tensor((4,), T.float32)):
        with T.Kernel(1, threads=64):
            frag = T.alloc_fragment((4, 32), T.float32)
            acc = T.alloc_fragment((2, 2), T.float32)
            rows = T.reshape(acc, (4,))
            T.annotate_layout({acc: T.Fragment((2, 2), forward_fn=one_per_thread)})
            T.copy(A, frag)
            T.reduce_sum(frag, rows, dim=1)
            T.copy(rows, B)

    return main
"#
        .to_owned(),
        expect![
            "19:13 error layout-conflict [split#0] `T.reduce_sum` leaves each result of `frag` on thread i * 16 + rep | index (0) | replicate 16, but `rows` is already laid out as thread i // 2 * 2 + i % 2 | index (0) | replicate 1"
        ],
    );
}
