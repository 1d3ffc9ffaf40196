//! The kernel-body subset of the DSL, end to end through the front end: each construct must become
//! the entities and formulas shown in the snapshots, with no diagnostics.

use expect_test::{Expect, expect};
use tilec_frontend::{
    BuildHooks, ParsedModule, Surroundings, build_positions, build_world, find_instances, outline,
};

/// Builds every instance of `source` and returns the worlds' text plus any diagnostics.
fn build(source: &str) -> String {
    let parsed = ParsedModule::parse(source);
    assert!(parsed.errors().is_empty(), "{:?}", parsed.errors());
    let outline = outline(&parsed, source);
    let mut out = String::new();
    for spec in find_instances(&parsed, &outline, &[], &Surroundings::default(), &|| {}) {
        let Some(kernel) = outline.kernel(&spec.kernel) else {
            continue;
        };
        let world = build_world(
            &outline.context,
            &kernel.source,
            &spec.args,
            &Surroundings::default(),
            &BuildHooks::NONE,
        );
        out.push_str(&world.pretty());
        let positions = build_positions(
            &parsed,
            &outline,
            &spec,
            &Surroundings::default(),
            &BuildHooks::NONE,
        );
        assert_eq!(
            positions.spans.len(),
            world.kinds.len(),
            "the span table covers every entity"
        );
        for diagnostic in &positions.diagnostics {
            let start = diagnostic_start(diagnostic);
            let line = source[..start as usize].matches('\n').count() + 1;
            out.push_str(&format!(
                "line {line}: {}: {}\n",
                diagnostic.code, diagnostic.message
            ));
        }
    }
    out
}

fn diagnostic_start(diagnostic: &tilec_ir::Diagnostic) -> u32 {
    match diagnostic.anchor {
        tilec_ir::Anchor::Span(span) => span.start,
        tilec_ir::Anchor::Entity(_) => 0,
    }
}

fn check(source: &str, expected: Expect) {
    expected.assert_eq(&build(source));
}

#[test]
fn control_flow_macros_and_scalars() {
    check(
        r#"
import tilelang
import tilelang.language as T

@T.macro
def scale_row(buf, row, factor):
    for j in T.serial(2, 6):
        buf[row, j] = buf[row, j] * factor

@tilelang.jit
def kernel(n_steps=3, use_mask=True):
    @T.prim_func
    def main(A: T.Tensor[(8, 8), "float32"], limit: T.int32):
        with T.Kernel(1, threads=32) as bx:
            acc = T.alloc_var("float32")
            tile = T.alloc_local((8, 8), T.float32)
            acc = 0.0
            for i in range(n_steps):
                if i < limit:
                    acc += A[i, 0]
                else:
                    acc = T.max(acc, A[i, 1])
            for u in T.unroll(2):
                scale_row(tile, u, 2.0)
            if use_mask:
                A[0, 0] = T.if_then_else(bx == 0, acc, -T.infinity("float32"))

    return main

kernel()
"#,
        expect![[r#"
            kernel kernel(n_steps=3, use_mask=True)
              #0 param A: float32[8, 8] global
              #1 param limit: int32[] global
              #2 launch grid (1) threads (32) as (bx)
                #3 buffer acc: float32[] local.var
                #4 buffer tile: float32[8, 8] local
                #5 acc[] = 0.0
                #6 for i in serial(3)
                  #7 if i < limit
                    #8 acc[] = acc + A[i, 0]
                  else:
                    #9 acc[] = T.max(acc, A[i, 1])
                #10 for u in unroll(2)
                  #11 for j in serial(4)
                    #12 tile[u, j + 2] = tile[u, j + 2] * 2.0
                #13 A[0, 0] = T.if_then_else(bx == 0, acc, T.float32(-inf))
        "#]],
    );
}

#[test]
fn tile_ops_and_symbolic_shapes() {
    check(
        r#"
import tilelang
import tilelang.language as T

@tilelang.jit
def ops(block=64, threads=128):
    n = T.dynamic("n")

    @T.prim_func
    def main(X: T.Tensor((n, block), "float16"), S: T.Tensor((n,), "float32"), C: T.Tensor((n, block), "float32")):
        with T.Kernel(T.ceildiv(n, block), threads=threads) as bx:
            T.use_swizzle(8, order="column")
            x = T.alloc_shared((block, block), "float16")
            f = T.alloc_fragment((block, block), "float32")
            m = T.alloc_fragment((block,), "float32")
            T.copy(X[bx * block : (bx + 1) * block, :], x)
            T.copy(x, f)
            T.cumsum(f, dim=1, reverse=True)
            T.reduce_absmax(f, m, dim=1)
            T.fill(f, 1.5)
            T.copy(m, S[bx * block])
            T.atomic_add(C[bx * block, 0], f)

    return main

ops()
"#,
        expect![[r#"
            kernel ops(block=64, threads=128)
              #0 param X: float16[n, 64] global
              #1 param S: float32[n] global
              #2 param C: float32[n, 64] global
              #3 launch grid ((n + 63) // 64) threads (128) as (bx)
                #4 use_swizzle(panel_size=8, column_major=true, enable=true)
                #5 buffer x: float16[64, 64] shared
                #6 buffer f: float32[64, 64] local.fragment
                #7 buffer m: float32[64] local.fragment
                #8 copy X[bx * 64:bx * 64 + 64, :] -> x[:, :]
                #9 copy x[:, :] -> f[:, :]
                #10 cumsum f[:, :] -> f[:, :] (dim=1, reverse=true)
                #11 reduce_absmax f[:, :] -> m[:] (dim=1, clear=true)
                #12 fill f[:, :] with 1.5
                #13 copy m[:] -> S[bx * 64]
                #14 atomic_add C[bx * 64, 0] += f[:, :]
        "#]],
    );
}

/// A negative `dim` counts from the end, and the front end normalises it once: the world holds the
/// plain index the passes read. One out of range is kept as written, for the shape check to report.
#[test]
fn negative_dims_count_from_the_end() {
    check(
        r#"
import tilelang
import tilelang.language as T

@tilelang.jit
def dims():
    @T.prim_func
    def main(S: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=128):
            f = T.alloc_fragment((64, 32), "float32")
            m = T.alloc_fragment((64,), "float32")
            T.cumsum(f, dim=-1)
            T.cumsum(f, dim=-2)
            T.reduce_max(f, m)
            T.reduce_sum(f, m, dim=-3)
            T.copy(m, S)

    return main

dims()
"#,
        expect![[r#"
            kernel dims()
              #0 param S: float32[64] global
              #1 launch grid (1) threads (128) as (bx)
                #2 buffer f: float32[64, 32] local.fragment
                #3 buffer m: float32[64] local.fragment
                #4 cumsum f[:, :] -> f[:, :] (dim=1, reverse=false)
                #5 cumsum f[:, :] -> f[:, :] (dim=0, reverse=false)
                #6 reduce_max f[:, :] -> m[:] (dim=1, clear=true)
                #7 reduce_sum f[:, :] -> m[:] (dim=-3, clear=true)
                #8 copy m[:] -> S[:]
        "#]],
    );
}

#[test]
fn problems_point_at_their_line_and_spare_other_kernels() {
    check(
        r#"
import tilelang
import tilelang.language as T

@tilelang.jit
def bad(N, dtype="float17"):
    @T.prim_func
    def main(A: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=2048):
            x = T.alloc_fragment((N,), dtype)

    return main

@tilelang.jit
def good(N):
    @T.prim_func
    def main(A: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=128):
            for i in T.Parallel(N):
                A[i] = A[i] * 2.0

    return main

bad(16)
good(16)
good()
"#,
        expect![[r#"
            kernel bad(N=16, dtype='float17')
              (incomplete: the front end reported an error)
              #0 param A: float32[16] global
            line 9: invalid-call: a block has between 1 and 1024 threads
            kernel good(N=16)
              #0 param A: float32[16] global
              #1 launch grid (1) threads (128) as (bx)
                #2 for i in Parallel(16)
                  #3 A[i] = A[i] * 2.0
            kernel good(N=128)
              #0 param A: float32[128] global
              #1 launch grid (1) threads (128) as (bx)
                #2 for i in Parallel(128)
                  #3 A[i] = A[i] * 2.0
            line 26: generic-instance: `good` is analysed as a generic instance, without compile-time values for some parameters: `N` = 128 (a representative choice) assumed
            line 26: missing-argument: this call of `good` does not pass `N`, which has no default
        "#]],
    );
}

#[test]
fn invalid_geometry_is_a_diagnostic_at_its_source() {
    let kernel = |grid: &str, body: &str| {
        format!(
            r#"
import tilelang
import tilelang.language as T


@tilelang.jit
def k(N=64):
    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
        with T.Kernel({grid}, threads=128) as bx:
            {body}

    return main


k()
"#
        )
    };
    let copy = "for i in T.Parallel(N):\n                B[i] = A[i]";
    let cases = [
        kernel("1", "for i in T.Parallel(0):\n                B[i] = A[i]"),
        kernel("1", "for i in T.Parallel(-4):\n                B[i] = A[i]"),
        kernel("-3", copy),
        kernel("2**40", copy),
        kernel("1, 70000", copy),
        kernel(
            "1",
            "for i in T.Parallel(N):\n                B[i] = A[i // 0]",
        ),
        kernel(
            "1",
            &format!("x = T.alloc_shared((0, 4), 'float32')\n            {copy}"),
        ),
        kernel(
            "1",
            &format!("x = T.alloc_fragment((-16,), 'float32')\n            {copy}"),
        ),
    ];
    let found: Vec<String> = cases.iter().map(|source| build(source)).collect();
    expect![[r#"
        [
            "kernel k(N=64)\n  (incomplete: the front end reported an error)\n  #0 param A: float32[64] global\n  #1 param B: float32[64] global\n  #2 launch grid (1) threads (128) as (bx)\nline 11: invalid-call: a loop extent must be at least 1, found 0\n",
            "kernel k(N=64)\n  (incomplete: the front end reported an error)\n  #0 param A: float32[64] global\n  #1 param B: float32[64] global\n  #2 launch grid (1) threads (128) as (bx)\nline 11: invalid-call: a loop extent must be at least 1, found -4\n",
            "kernel k(N=64)\n  (incomplete: the front end reported an error)\n  #0 param A: float32[64] global\n  #1 param B: float32[64] global\nline 10: invalid-call: a grid extent must be at least 1, found -3\n",
            "kernel k(N=64)\n  #0 param A: float32[64] global\n  #1 param B: float32[64] global\n  #2 launch grid (1099511627776) threads (128) as (bx)\n    #3 for i in Parallel(64)\n      #4 B[i] = A[i]\nline 10: invalid-call: this grid has 1099511627776 blocks along x, but CUDA launches at most 2147483647: launching it fails\n",
            "kernel k(N=64)\n  #0 param A: float32[64] global\n  #1 param B: float32[64] global\n  #2 launch grid (1, 70000) threads (128) as (bx, by)\n    #3 for i in Parallel(64)\n      #4 B[i] = A[i]\nline 10: invalid-call: this grid has 70000 blocks along y, but CUDA launches at most 65535: launching it fails\n",
            "kernel k(N=64)\n  (incomplete: the front end reported an error)\n  #0 param A: float32[64] global\n  #1 param B: float32[64] global\n  #2 launch grid (1) threads (128) as (bx)\n    #3 for i in Parallel(64)\nline 12: meta-error: integer division or modulo by zero\n",
            "kernel k(N=64)\n  (incomplete: the front end reported an error)\n  #0 param A: float32[64] global\n  #1 param B: float32[64] global\n  #2 launch grid (1) threads (128) as (bx)\n    #3 for i in Parallel(64)\n      #4 B[i] = A[i]\nline 11: invalid-call: a buffer extent must be at least 1, found 0\n",
            "kernel k(N=64)\n  (incomplete: the front end reported an error)\n  #0 param A: float32[64] global\n  #1 param B: float32[64] global\n  #2 launch grid (1) threads (128) as (bx)\n    #3 for i in Parallel(64)\n      #4 B[i] = A[i]\nline 11: invalid-call: a buffer extent must be at least 1, found -16\n",
        ]
    "#]].assert_debug_eq(&found);
}
