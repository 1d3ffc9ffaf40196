//! Finding instances in the driver code people write: statements tilec cannot evaluate, call sites
//! evaluation does not reach, torch tensors, and kernels no call site instantiates (generic
//! instances). Each snapshot lists the instances with their arguments, what is symbolic and
//! assumed, and the front end's diagnostics.

use expect_test::{Expect, expect};
use tilec_frontend::{
    BuildHooks, ParsedModule, Surroundings, build_positions, build_world, find_instances, outline,
};

fn instances(source: &str) -> String {
    instances_with(source, &Surroundings::default())
}

fn instances_with(source: &str, surroundings: &Surroundings) -> String {
    let parsed = ParsedModule::parse(source);
    assert!(parsed.errors().is_empty(), "{:?}", parsed.errors());
    let outline = outline(&parsed, source);
    let mut out = String::new();
    for spec in find_instances(&parsed, &outline, &[], surroundings, &|| {}) {
        let Some(kernel) = outline.kernel(&spec.kernel) else {
            continue;
        };
        let world = build_world(
            &outline.context,
            &kernel.source,
            &spec.args,
            surroundings,
            &BuildHooks::NONE,
        );
        let origin = match spec.origin.span() {
            Some(span) => format!("line {}", line_of(source, span.start)),
            None => "no call site".to_owned(),
        };
        let args: Vec<String> = spec.args.iter().map(|(k, v)| format!("{k}={v}")).collect();
        out.push_str(&format!(
            "{} ({origin}): {}\n",
            spec.kernel,
            args.join(", ")
        ));
        if !world.symbolic_args.is_empty() {
            out.push_str(&format!("  symbolic: {}\n", world.symbolic_args.join(", ")));
        }
        for assumed in &world.assumed_args {
            let (name, value, source) = (&assumed.name, &assumed.value, &assumed.source);
            out.push_str(&format!("  assumed: {name} = {value} ({source})\n"));
        }
        let positions = build_positions(&parsed, &outline, &spec, surroundings, &BuildHooks::NONE);
        assert_eq!(
            positions.spans.len(),
            world.kinds.len(),
            "world and positions agree for {}",
            spec.kernel
        );
        for diagnostic in &positions.diagnostics {
            let start = match diagnostic.anchor {
                tilec_ir::Anchor::Span(span) => span.start,
                tilec_ir::Anchor::Entity(_) => 0,
            };
            out.push_str(&format!(
                "  line {}: {} {}\n",
                line_of(source, start),
                diagnostic.severity,
                diagnostic.code
            ));
        }
    }
    out
}

fn line_of(source: &str, offset: u32) -> usize {
    source[..offset as usize].matches('\n').count() + 1
}

fn check(source: &str, expected: Expect) {
    expected.assert_eq(&instances(source));
}

const SCALE: &str = r#"
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[1])
def scale(M, N, block_M, dtype="float16"):
    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            tile = T.alloc_fragment((block_M, N), dtype)
            T.copy(A[bx * block_M, 0], tile)
            T.copy(tile, B[bx * block_M, 0])

    return main
"#;

#[test]
fn a_statement_tilec_cannot_evaluate_does_not_lose_the_rest_of_the_function() {
    let source = format!(
        "{SCALE}{}",
        r#"
import torch


def main(M=4096, N=1024, tune=False):
    torch.manual_seed(0)
    a = torch.randn(M, N).cuda().half()
    assert a.is_contiguous()
    if not tune:
        kernel = scale(M, N, 64)
    else:
        kernel = scale(M, N, 128, dtype="bfloat16")
    profiler = kernel.get_profiler()
    bench = lambda: scale(M, 2 * N, 32)(a)


if __name__ == "__main__":
    main()
"#
    );
    check(
        &source,
        expect![[r#"
            scale (line 25): M=4096, N=1024, block_M=64
            scale (line 27): M=4096, N=1024, block_M=128, dtype='bfloat16'
            scale (line 29): M=4096, N=2048, block_M=32
        "#]],
    );
}

#[test]
fn sizes_read_from_tensors_bind_and_unknown_ones_stay_symbolic() {
    let source = format!(
        "{SCALE}{}",
        r#"
import torch


def run(x, y):
    a = torch.empty((x.shape[0], 256), dtype=torch.float16, device="cuda")
    first = scale(a.shape[0], a.shape[1], 64, dtype=a.dtype)
    second = scale(y.size(0), y.size(1), 64)
"#
    );
    check(
        &source,
        expect![[r#"
            scale (line 22): M=<run time>, N=256, block_M=64, dtype=T.float16
              symbolic: M
              line 22: info generic-instance
            scale (line 23): M=<run time>, N=<run time>, block_M=64
              symbolic: M
              assumed: N = 128 (a representative choice)
              line 23: info generic-instance
        "#]],
    );
}

#[test]
fn a_value_passed_only_at_run_time_never_becomes_the_default() {
    let source = format!(
        "{SCALE}{}",
        r#"
def determine_dtype():
    import os
    return os.environ.get("KERNEL_DTYPE", "float16")


def run(M, N):
    return scale(M, N, 64, dtype=determine_dtype())
"#
    );
    check(
        &source,
        expect![[r#"
            scale (line 23): M=<run time>, N=<run time>, block_M=64, dtype='float16'
              symbolic: M
              assumed: N = 128 (a representative choice)
              line 23: info generic-instance
        "#]],
    );
}

#[test]
fn a_kernel_nothing_calls_is_generic_with_its_autotune_config() {
    let source = r#"
import tilelang
import tilelang.language as T
from tilelang.autotuner import autotune


@autotune(configs=[{"block_M": 64, "threads": 256}, {"block_M": 128, "threads": 128}])
@tilelang.jit(out_idx=[1])
def scale(M, N, block_M, threads, dtype):
    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            for i, j in T.Parallel(block_M, 8):
                B[bx * block_M + i, j] = A[bx * block_M + i, j]

    return main
"#;
    check(
        source,
        expect![[r#"
            scale (no call site): 
              symbolic: M, N
              assumed: block_M = 64 (the first `@autotune` config)
              assumed: threads = 256 (the first `@autotune` config)
              assumed: dtype = T.float16 (a representative choice)
              line 9: info generic-instance
        "#]],
    );
}

#[test]
fn eager_kernels_bind_their_symbols_from_tensor_arguments() {
    let source = r#"
import torch
import tilelang
import tilelang.language as T
from functools import partial


@tilelang.jit
def matmul(A, B, block_M, block_N, dtype=T.float16):
    M, N, K = T.const("M, N, K")
    A: T.Tensor((M, K), dtype)
    B: T.Tensor((K, N), dtype)
    C = T.empty((M, N), dtype)
    with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
        C_local = T.alloc_fragment((block_M, block_N), T.float32)
        T.clear(C_local)
        T.copy(C_local, C[by * block_M, bx * block_N])
    return C


def main():
    a = torch.randn(512, 256, dtype=torch.float16).cuda()
    b = torch.randn(256, 1024).cuda().half()
    run = partial(matmul, block_M=64)
    c = matmul(a, b, 64, 128)
    d = matmul(a, b.t(), 64, 128)


main()
"#;
    check(
        source,
        expect![[r#"
            matmul (line 25): block_M=64, block_N=128, M=512, K=256, N=1024
            matmul (line 26): block_M=64, block_N=128, M=512, N=256
              symbolic: K
              line 26: info generic-instance
        "#]],
    );
}

#[test]
fn string_and_int_helpers_of_factories_evaluate() {
    let source = r#"
import tilelang
import tilelang.language as T


def pick(dtype, sizes):
    assert isinstance(sizes, (list, tuple))
    assert "float16" in [T.float16, T.bfloat16]
    name = "_".join(["k", dtype, str(len(sizes[1:]))])
    assert name == "k_float16_2" and "12".isdigit()
    return tilelang.cdiv(sizes[-1], 8) * (sizes[0].bit_length()) + tilelang.math.next_power_of_2(5)


@tilelang.jit(out_idx=[1])
def copy(N, dtype="float16"):
    width = pick(dtype, [4, 2, 64])

    @T.prim_func
    def main(A: T.Tensor((N, width), dtype), B: T.Tensor((N, width), dtype)):
        with T.Kernel(1, threads=128) as bx:
            T.copy(A[0, 0], B[0, 0])

    return main


copy(16)
"#;
    check(
        source,
        expect![[r#"
            copy (line 26): N=16
        "#]],
    );
}

#[test]
fn kernels_at_any_depth_are_found() {
    let source = r#"
import torch


def two_level(M, N, dtype="float16"):
    def kernel_func(block_M, threads):
        @T.prim_func
        def main(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype)):
            with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
                tile = T.alloc_fragment((block_M, N), dtype)
                T.copy(A[bx * block_M, 0], tile)
                T.copy(tile, B[bx * block_M, 0])

        return main

    return kernel_func(64, 128)


def best_config(M, N):
    def kernel(block_M=None, threads=None):
        @T.prim_func
        def main(A: T.Tensor((M, N), "float16"), B: T.Tensor((M, N), "float16")):
            with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
                for i, j in T.Parallel(block_M, 4):
                    B[bx * block_M + i, j] = A[bx * block_M + i, j]

        return main

    autotuner = AutoTuner.from_kernel(kernel=kernel, configs=[])
    return autotuner.run(warmup=3)


def branchy(N, wide):
    if wide:
        @T.prim_func
        def wide_main(A: T.Tensor((N, 8), "float32")):
            with T.Kernel(1, threads=128) as bx:
                T.clear(A[0, 0])

        return wide_main
    else:
        @T.prim_func
        def narrow_main(A: T.Tensor((N, 4), "float32")):
            with T.Kernel(1, threads=128) as bx:
                T.clear(A[0, 0])

        return narrow_main


try:
    import tilelang
    import tilelang.language as T

    @tilelang.jit
    def guarded(N):
        @T.prim_func
        def main(A: T.Tensor((N,), "float32")):
            with T.Kernel(1, threads=128) as bx:
                T.clear(A[0])

        return main
except ImportError:
    guarded = None


def run():
    two_level(1024, 32)
    best_config(4096, 64)
    branchy(64, True)
    branchy(64, False)
    guarded(256)
"#;
    check(
        source,
        expect![[r#"
            two_level (line 67): M=1024, N=32
            best_config (line 68): M=4096, N=64
              assumed: block_M = 128 (a representative choice)
              assumed: threads = 128 (a representative choice)
              line 68: info generic-instance
            branchy (line 69): N=64, wide=True
            branchy (line 70): N=64, wide=False
            guarded (line 71): N=256
        "#]],
    );
    // Each instance builds the prim_func its arguments select.
    let parsed = ParsedModule::parse(source);
    let outline = outline(&parsed, source);
    let shapes: Vec<String> =
        find_instances(&parsed, &outline, &[], &Surroundings::default(), &|| {})
            .iter()
            .map(|spec| {
                let kernel = outline.kernel(&spec.kernel).expect("found kernel");
                let world = build_world(
                    &outline.context,
                    &kernel.source,
                    &spec.args,
                    &Surroundings::default(),
                    &BuildHooks::NONE,
                );
                let first = world.params[0];
                let dims: Vec<String> = world
                    .shapes
                    .get(first)
                    .expect("a tensor")
                    .iter()
                    .map(|dim| format!("{:?}", world.exprs.as_int(*dim)))
                    .collect();
                format!("{}: {}", spec.kernel, dims.join(" x "))
            })
            .collect();
    expect![[r#"
        [
            "two_level: Some(1024) x Some(32)",
            "best_config: Some(4096) x Some(64)",
            "branchy: Some(64) x Some(8)",
            "branchy: Some(64) x Some(4)",
            "guarded: Some(256)",
        ]
    "#]]
    .assert_debug_eq(&shapes);
}

#[test]
fn device_queries_answer_for_the_target() {
    let source = format!(
        "{SCALE}{}",
        r#"
import torch
from tilelang.carver.arch import driver


def run(M=4096):
    sms = driver.get_num_sms()
    major, minor = torch.cuda.get_device_capability()
    dtype = "float16" if torch.version.hip is None else "bfloat16"
    props = torch.cuda.get_device_properties(0)
    assert props.multi_processor_count == sms
    scale(M, sms, 64 if major >= 9 else 32, dtype=dtype)
"#
    );
    check(
        &source,
        expect![[r#"
            scale (line 27): M=4096, N=132, block_M=64, dtype='float16'
        "#]],
    );
    let ampere = Surroundings::of_target(tilec_ir::Target::Sm80);
    expect![[r#"
        scale (line 27): M=4096, N=108, block_M=32, dtype='float16'
    "#]]
    .assert_eq(&instances_with(&source, &ampere));
}

#[test]
fn methods_of_operator_classes_are_kernels() {
    let source = r#"
import tilelang
import tilelang.language as T
from dataclasses import dataclass


@dataclass
class Config:
    block_M: int = 64
    threads: int = 128


class ScaleOp:
    def __init__(self, N, dtype="float16", config=Config()):
        self.N = N
        self.dtype = dtype
        self.config = config

    def kernel(self, M):
        cfg = self.config

        @T.prim_func
        def main(A: T.Tensor((M, self.N), self.dtype), B: T.Tensor((M, self.N), self.dtype)):
            with T.Kernel(T.ceildiv(M, cfg.block_M), threads=cfg.threads) as bx:
                tile = T.alloc_fragment((cfg.block_M, self.N), self.dtype)
                T.copy(A[bx * cfg.block_M, 0], tile)
                T.copy(tile, B[bx * cfg.block_M, 0])

        return main

    def forward(self, x):
        return self.kernel(x.shape[0])(x)

    @staticmethod
    @tilelang.jit
    def zeros(N, block):
        @T.prim_func
        def main(A: T.Tensor((N,), "float32")):
            with T.Kernel(T.ceildiv(N, block), threads=128) as bx:
                for i in T.Parallel(block):
                    A[bx * block + i] = 0.0

        return main


ScaleOp.zeros(1024, 128)
op = ScaleOp(256)
op.kernel(4096)
"#;
    check(
        source,
        expect![[r#"
        ScaleOp.kernel (line 32): M=<run time>
          symbolic: M
          assumed: N = 128 (a representative choice)
          line 32: info generic-instance
        ScaleOp.kernel (line 48): M=4096, self.N=256
        ScaleOp.zeros (line 46): N=1024, block=128
    "#]],
    );
}

#[test]
fn an_eager_kernel_closed_over_by_a_function_is_found() {
    let source = r#"
import tilelang
import tilelang.language as T


def make_scale(block_M=64):
    @tilelang.jit
    def scale(A, B, dtype=T.float16):
        M, N = T.const("M, N")
        A: T.Tensor((M, N), dtype)
        B: T.Tensor((M, N), dtype)
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            tile = T.alloc_fragment((block_M, N), dtype)
            T.copy(A[bx * block_M, 0], tile)
            T.copy(tile, B[bx * block_M, 0])

    return scale


make_scale(32)
"#;
    check(
        source,
        expect![[r#"
        make_scale (line 20): block_M=32
          symbolic: M
          assumed: N = 128 (a representative choice)
          line 20: info generic-instance
    "#]],
    );
}

#[test]
fn methods_of_classes_nothing_calls_drive_kernels_with_their_local_tile_sizes() {
    // An autograd Function (under a decorator tilec does not model) instantiates the kernel in
    // `forward` from the input's shape and its own tile size, as operator libraries do.
    let source = format!(
        "{SCALE}{}",
        r#"
import torch


@torch.compile
class _Scale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        M, N = x.shape
        block_M = 32
        kernel = scale(M, N, block_M, dtype=T.bfloat16)
        return kernel(x)
"#
    );
    check(
        &source,
        expect![[r#"
            scale (line 26): M=<run time>, N=<run time>, block_M=32, dtype=T.bfloat16
              symbolic: M
              assumed: N = 128 (a representative choice)
              line 26: info generic-instance
        "#]],
    );
}

#[test]
fn an_assertion_pins_a_size_read_from_a_tensor_and_an_unknown_one_does_not_stop_the_driver() {
    // DeepSeek-V3.2's sparse MLA interface checks the head size it supports on the input's
    // shape, then derives the tile sizes from it; `q.is_contiguous()` cannot be known.
    let source = format!(
        "{SCALE}{}",
        r#"
def interface(q, kv):
    assert q.is_contiguous() and kv.is_contiguous()
    rows, full = q.shape
    assert full == 576 and kv.shape[0] == rows, "you should assign dim otherwise"
    dim = 512
    return scale(rows, dim, full - dim)
"#
    );
    check(
        &source,
        expect![[r#"
            scale (line 22): M=<run time>, N=512, block_M=64
              symbolic: M
              line 22: info generic-instance
        "#]],
    );
}

#[test]
fn a_module_method_runs_on_an_object_its_init_made_with_defaults() {
    // An operator library's module: the tile size and dtype are set in `__init__`, the sizes
    // come from the input in `forward`.
    let source = format!(
        "{SCALE}{}",
        r#"
import torch


class ScaleOp(torch.nn.Module):
    def __init__(self, in_features, block_M=32, dtype=torch.bfloat16):
        super().__init__()
        self.in_features = in_features
        self.block_M = block_M
        self.dtype = dtype

    def forward(self, x):
        kernel = scale(x.shape[0], self.in_features, self.block_M, dtype=self.dtype)
        return kernel(x)
"#
    );
    check(
        &source,
        expect![[r#"
            scale (line 28): M=<run time>, N=<run time>, block_M=32, dtype=T.bfloat16
              symbolic: M
              assumed: N = 128 (a representative choice)
              line 28: info generic-instance
        "#]],
    );
}

/// Library code passes values it computes at run time: a kernel factory called from an operator
/// class with `self.dtype_str`, a property that formats a torch dtype tilec cannot know. `str()`
/// of an unknown value stays unknown, so the parameter is generic, not a made-up dtype name.
#[test]
fn the_string_of_an_unknown_value_stays_unknown() {
    let source = format!(
        "{SCALE}{}",
        r#"

class ScaleOp:
    def __init__(self, M, N, dtype):
        self.dtype = dtype
        self.kernel = scale(M, N, 64, self.dtype_str)

    @property
    def dtype_str(self):
        return str(self.dtype).split(".")[-1]

    def label(self):
        return f"scale-{self.dtype}"
"#
    );
    check(
        &source,
        expect![[r#"
            scale (line 21): M=<run time>, N=<run time>, block_M=64, dtype=<run time>
              symbolic: M
              assumed: N = 128 (a representative choice)
              assumed: dtype = T.float16 (a representative choice)
              line 21: info generic-instance
        "#]],
    );
}

/// A parameter annotated with a configuration class of the file is an object of that class, made
/// from the defaults of its fields, so `cfg.block` and `cfg.dtype` (a property) have values.
#[test]
fn a_parameter_annotated_with_a_dataclass_is_an_object_of_its_defaults() {
    let source = r#"
from dataclasses import dataclass
import torch
import tilelang
import tilelang.language as T


@dataclass(frozen=True)
class Config:
    torch_dtype: torch.dtype = torch.bfloat16
    block: tuple[int, int] = (64, 128)
    rows: int

    @property
    def dtype(self):
        return T.dtype(self.torch_dtype) if self.torch_dtype != torch.int8 else T.float16


@tilelang.jit
def kernel_for(hidden: int, config: Config):
    block_m, block_n = config.block

    @T.prim_func
    def main(A: T.Tensor((config.rows, hidden), config.dtype)):
        with T.Kernel(T.ceildiv(hidden, block_n), threads=128) as bx:
            tile = T.alloc_fragment((block_m, block_n), config.dtype)
            T.copy(A[0, bx * block_n], tile)
            T.copy(tile, A[0, bx * block_n])

    return main
"#;
    check(
        source,
        expect![[r#"
            kernel_for (no call site): 
              symbolic: hidden, config.rows
              assumed: config = 'Config(...)' (an object made with the defaults of its class)
              line 20: info generic-instance
        "#]],
    );
}

/// An `assert` of a factory on parameters kept symbolic is a precondition its callers meet: it is
/// taken as true (and said so) rather than forcing the parameters to assumed values it rejects.
#[test]
fn an_assert_on_symbolic_parameters_is_a_precondition() {
    let source = r#"
import tilelang
import tilelang.language as T


@tilelang.jit
def reduce_rows(hidden_size: int, rows: int):
    block = 512
    assert hidden_size % block == 0 and hidden_size >= block
    tiles = hidden_size // block

    @T.prim_func
    def main(A: T.Tensor((rows, hidden_size), "float32"), B: T.Tensor((hidden_size,), "float32")):
        with T.Kernel(tiles, threads=128) as bx:
            acc = T.alloc_fragment((block,), "float32")
            T.copy(B[bx * block], acc)
            T.copy(acc, B[bx * block])

    return main
"#;
    check(
        source,
        expect![[r#"
            reduce_rows (no call site): 
              symbolic: hidden_size, rows
              line 7: info generic-instance
        "#]],
    );
}

/// PyTorch's names for the hyperparameters of pooling and convolution get their conventional
/// values (stride and dilation 1, padding 0, a window of 3): 128 for each would make a window
/// larger than its input and an empty grid.
#[test]
fn pooling_hyperparameters_get_conventional_representatives() {
    let source = r#"
import tilelang
import tilelang.language as T


def output_size(size, kernel_size, stride, padding, dilation, ceil_mode):
    out = (size + 2 * padding - dilation * (kernel_size - 1) - 1) // stride + 1
    if ceil_mode and out > 0 and (out - 1) * stride >= size + padding:
        out -= 1
    return max(out, 0)


def max_pool1d(n, l_in, kernel_w, stride_w, pad_w, dilation_w, ceil_mode, dtype="float16"):
    out_l = output_size(l_in, kernel_w, stride_w, pad_w, dilation_w, ceil_mode)
    total = n * out_l

    @T.prim_func
    def main(x: T.Tensor((n, l_in), dtype), y: T.Tensor((n, out_l), dtype)):
        with T.Kernel(T.ceildiv(total, 128), threads=128) as bx:
            for i in T.Parallel(128):
                y[(bx * 128 + i) // out_l, (bx * 128 + i) % out_l] = x[(bx * 128 + i) // out_l, 0]

    return main


def pool(x, kernel_w, stride_w, pad_w, dilation_w):
    return max_pool1d(x.shape[0], x.shape[1], kernel_w, stride_w, pad_w, dilation_w, True)
"#;
    check(
        source,
        expect![[r#"
            max_pool1d (line 27): n=<run time>, l_in=<run time>, kernel_w=<run time>, stride_w=<run time>, pad_w=<run time>, dilation_w=<run time>, ceil_mode=True
              assumed: n = 128 (a representative choice)
              assumed: l_in = 128 (a representative choice)
              assumed: kernel_w = 3 (a representative choice)
              assumed: stride_w = 1 (a representative choice)
              assumed: pad_w = 0 (a representative choice)
              assumed: dilation_w = 1 (a representative choice)
              line 27: info generic-instance
        "#]],
    );
}

/// A fragment that no GPU holds with the values tilec assumed (a 128×128×128 tile where the
/// kernel is called with a hidden size of 4) sends the build back for smaller candidates.
#[test]
fn a_fragment_too_large_for_any_gpu_retries_the_assumed_values() {
    let source = r#"
import tilelang
import tilelang.language as T


@tilelang.jit
def sinkhorn(hidden_size: int, token_block_size: int):
    num_tokens = T.dynamic("num_tokens")

    @T.prim_func
    def main(x: T.Tensor((num_tokens, hidden_size, hidden_size), "float32")):
        with T.Kernel(T.ceildiv(num_tokens, token_block_size)) as bx:
            tile = T.alloc_fragment((token_block_size, hidden_size, hidden_size), "float32")
            T.copy(x[bx * token_block_size, 0, 0], tile)
            T.copy(tile, x[bx * token_block_size, 0, 0])

    return main
"#;
    check(
        source,
        expect![[r#"
            sinkhorn (no call site): 
              assumed: hidden_size = 64 (a representative choice the kernel accepts)
              assumed: token_block_size = 128 (a representative choice)
              line 7: info generic-instance
        "#]],
    );
}

/// `T.StridedTensor[shape, strides, dtype]`, subscripted as TileLang's own kernels write it: the
/// strides are the second item and the dtype the third.
#[test]
fn strided_tensors_take_their_dtype_after_the_strides() {
    let source = r#"
import tilelang
import tilelang.language as T


@tilelang.jit
def gate(hidden: int, k_stride: int):
    num_tokens = T.dynamic("num_tokens")

    @T.prim_func
    def main(
        k: T.StridedTensor[(num_tokens, hidden), (k_stride, 1), T.bfloat16],
        out: T.StridedTensor((num_tokens, hidden), (hidden, 1), T.float32),
    ):
        with T.Kernel(num_tokens, threads=128) as bx:
            row = T.alloc_fragment((hidden,), T.float32)
            T.copy(k[bx, 0], row)
            T.copy(row, out[bx, 0])

    return main
"#;
    check(
        source,
        expect![[r#"
            gate (no call site): 
              symbolic: k_stride
              assumed: hidden = 128 (a representative choice)
              line 7: info generic-instance
        "#]],
    );
}

/// A failure that only the values tilec assumed cause (the defaults of a configuration object the
/// kernel's `assert` rejects, with no other candidate to try) is tilec's limit, reported as not
/// analysed with the values named, never as the kernel's failed assertion.
#[test]
fn a_failure_of_assumed_values_alone_is_not_analysed() {
    let source = r#"
from dataclasses import dataclass
import tilelang
import tilelang.language as T


@dataclass
class Config:
    block: tuple[int, int] = (1, 1)


@tilelang.jit
def cast(hidden: int, config: Config):
    per_token, per_channel = config.block
    assert per_token == 128

    @T.prim_func
    def main(A: T.Tensor((per_token, hidden), "float32")):
        with T.Kernel(1, threads=128) as bx:
            pass

    return main
"#;
    check(
        source,
        expect![[r#"
            cast (no call site): 
              assumed: hidden = 128 (a representative choice)
              assumed: config = 'Config(...)' (an object made with the defaults of its class)
              line 15: not-analysed not-analysed
              line 13: info generic-instance
        "#]],
    );
}

/// A parameter the kernel compares with texts (`op_kind == "sum"`) is a text, tried with those
/// texts in the order the code names them: an int there took no branch and left the accumulator
/// unwritten.
#[test]
fn a_parameter_compared_with_texts_is_one_of_them() {
    let source = r#"
import tilelang
import tilelang.language as T


def reduce_rows(M, N, op_kind, block_m=64):
    @T.prim_func
    def main(x: T.Tensor((M, N), "float32"), out: T.Tensor((M,), "float32")):
        with T.Kernel(T.ceildiv(M, block_m), threads=128) as bx:
            tile = T.alloc_fragment((block_m, N), "float32")
            acc = T.alloc_fragment((block_m,), "float32")
            T.copy(x[bx * block_m, 0], tile)
            if op_kind == "sum":
                T.reduce_sum(tile, acc, dim=1)
            elif op_kind in ("amax", "max"):
                T.reduce_max(tile, acc, dim=1)
            T.copy(acc, out[bx * block_m])

    return main
"#;
    check(
        source,
        expect![[r#"
            reduce_rows (no call site): 
              symbolic: M
              assumed: N = 128 (a representative choice)
              assumed: op_kind = 'sum' (a representative choice)
              line 6: info generic-instance
        "#]],
    );
}

/// An `@autotune(configs=...)` factory nested in a wrapper and called there without arguments
/// (`return kernel()`) gets the first config's values, as the autotuner passes them: its `None`
/// defaults were what the kernel saw, and `T.ceildiv(N, None)` failed.
#[test]
fn a_nested_autotuned_factory_called_bare_takes_its_first_config() {
    let source = r#"
import itertools
import tilelang
import tilelang.language as T
from tilelang.autotuner import autotune


def get_configs():
    return [{"block_M": m, "threads": t} for m, t in itertools.product([64, 128], [128, 256])]


def scale(M, N):
    @autotune(configs=get_configs(), warmup=3, rep=5)
    @tilelang.jit(out_idx=[1])
    def kernel(block_M=None, threads=None):
        @T.prim_func
        def main(A: T.Tensor((M, N), "float16"), B: T.Tensor((M, N), "float16")):
            with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
                for i, j in T.Parallel(block_M, N):
                    B[bx * block_M + i, j] = A[bx * block_M + i, j] * 2

        return main

    return kernel()


scale(1024, 64)
"#;
    check(
        source,
        expect![[r#"
            scale (line 27): M=1024, N=64
              assumed: block_M = 64 (the first `@autotune` config of `kernel`)
              assumed: threads = 128 (the first `@autotune` config of `kernel`)
              line 27: info generic-instance
        "#]],
    );
}

/// `with T.If(c):` over `with T.Then():` and `with T.Else():` is an `if` at run time (or the
/// branch itself when `c` is known); `with T.If(c), T.Then():` has no else. A `T.Then` outside a
/// `T.If` is the user's error.
#[test]
fn if_then_else_frames_are_if_statements() {
    let source = r#"
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[1])
def tail(N=100, block=32):
    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, block), threads=block) as bx:
            for i in T.Parallel(block):
                with T.If(bx * block + i < N):
                    with T.Then():
                        B[bx * block + i] = A[bx * block + i] + 1.0
                    with T.Else():
                        T.evaluate(0)
            with T.If(block == 32), T.Then():
                B[0] = 0.0

    return main


@tilelang.jit(out_idx=[1])
def stray(N=64):
    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=64) as bx:
            with T.Then():
                B[0] = A[0]

    return main


tail()
stray()
"#;
    check(
        source,
        expect![[r#"
            tail (line 34): 
            stray (line 35): 
              line 28: error unsupported-syntax
        "#]],
    );
}

/// Values the kernel's own checks single out are tried when the representatives are rejected:
/// `assert threads == 384` accepts only 384; a wrapper whose first text candidate returns another
/// kernel before defining its factory (`if op_kind == "prod": return ...`) is retried with the
/// next; and a factory defined in both branches of an `if` is the one the run bound.
#[test]
fn values_the_kernel_singles_out_are_candidates() {
    let source = r#"
import tilelang
import tilelang.language as T


def warp_specialized(M, threads):
    assert threads == 384, f"needs 1 producer + 2 consumer warpgroups, got {threads}"

    @T.prim_func
    def main(A: T.Tensor((M,), "float32"), B: T.Tensor((M,), "float32")):
        with T.Kernel(T.ceildiv(M, threads), threads=threads) as bx:
            for i in T.Parallel(threads):
                B[bx * threads + i] = A[bx * threads + i]

    return main


def _other(M):
    return None


def reduce_kernel(M, op_kind, wide=False):
    if op_kind == "prod":
        return _other(M)

    if wide:
        @tilelang.jit(out_idx=[1])
        def _func(block):
            @T.prim_func
            def main(x: T.Tensor((M,), "float32"), out: T.Tensor((M,), "float32")):
                with T.Kernel(T.ceildiv(M, block), threads=128) as bx:
                    for i in T.Parallel(block):
                        out[bx * block + i] = x[bx * block + i] * 2

            return main
    else:
        @tilelang.jit(out_idx=[1])
        def _func(block):
            @T.prim_func
            def main(x: T.Tensor((M,), "float32"), out: T.Tensor((M,), "float32")):
                with T.Kernel(T.ceildiv(M, block), threads=128) as bx:
                    for i in T.Parallel(block):
                        if op_kind == "sum":
                            out[bx * block + i] = x[bx * block + i]

            return main

    return _func
"#;
    check(
        source,
        expect![[r#"
            warp_specialized (no call site): 
              symbolic: M
              assumed: threads = 384 (the first value the kernel's `assert` allows)
              line 6: info generic-instance
            reduce_kernel (no call site): 
              assumed: M = 128 (a representative choice)
              assumed: op_kind = 'sum' (a representative choice the kernel accepts)
              assumed: block = 128 (a representative choice)
              line 22: info generic-instance
        "#]],
    );
}

/// A kernel compiled for AMD GPUs (`@tilelang.jit(target="hip")`, also on a factory nested in
/// a wrapper) gets one not-analysed diagnostic naming the target, not the conflicts of layouts
/// and instructions that are NVIDIA's.
#[test]
fn a_kernel_compiled_for_amd_is_said_to_be_out_of_reach() {
    let source = r#"
import tilelang
import tilelang.language as T


def matmul(M, N, K):
    @tilelang.jit(out_idx=[2], target="hip")
    def kernel(block_M=64, block_N=64):
        @T.prim_func
        def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((N, K), "float16"), C: T.Tensor((M, N), "float16")):
            with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=256) as (bx, by):
                T.clear(C[by * block_M, bx * block_N])

        return main

    return kernel()


matmul(1024, 1024, 1024)
"#;
    check(
        source,
        expect![[r#"
            matmul (line 19): M=1024, N=1024, K=1024
              line 7: not-analysed not-analysed
        "#]],
    );
}

/// `T.GemmWarpPolicy` is an `IntEnum`: a policy imported from `tilelang.language` and passed to a
/// factory arrives as its int, and `T.gemm` takes the int as the member (no diagnostic). A
/// factory nothing calls assumes the first policy for a parameter named `policy`.
#[test]
fn warp_policies_pass_through_factories_as_their_ints() {
    let source = r#"
import tilelang
import tilelang.language as T
from tilelang.language import GemmWarpPolicy


def matmul(M, N, K, policy):
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128) as bx:
            A_shared = T.alloc_shared((M, K), "float16")
            B_shared = T.alloc_shared((K, N), "float16")
            C_frag = T.alloc_fragment((M, N), "float32")
            T.copy(A, A_shared)
            T.copy(B, B_shared)
            T.gemm(A_shared, B_shared, C_frag, policy=policy, clear_accum=True)
            T.copy(C_frag, C)

    return main


def unused(M, N, K, policy):
    return matmul(M, N, K, policy)


matmul(64, 64, 32, GemmWarpPolicy.FullRow)
matmul(64, 64, 32, T.GemmWarpPolicy.FullCol)
matmul(64, 64, 32, 0)
"#;
    check(
        source,
        expect![[r#"
            matmul (line 23): M=<run time>, N=<run time>, K=<run time>, policy=<run time>
              assumed: M = 128 (a representative choice)
              assumed: N = 128 (a representative choice)
              assumed: K = 128 (a representative choice)
              assumed: policy = 0 (a representative choice)
              line 23: info generic-instance
            matmul (line 26): M=64, N=64, K=32, policy=1
            matmul (line 27): M=64, N=64, K=32, policy=2
            matmul (line 28): M=64, N=64, K=32, policy=0
        "#]],
    );
}

/// A pytest test that builds its kernel itself (a `T.prim_func` inside the test, compiled there) is
/// the kernel's factory: nothing calls it, so it runs with the first case of its
/// `@pytest.mark.parametrize` (`nbit=2`, a list of values whose `len` sizes the tensors) instead of
/// assumed values.
#[test]
fn a_parametrized_test_that_builds_its_kernel_takes_its_first_case() {
    let source = r#"
import math

import pytest
import tilelang
import tilelang.language as T


@pytest.mark.parametrize(
    "nbit,values",
    [
        (2, [-2, -1, 0, 1]),
        (4, list(range(-8, 8))),
    ],
)
def test_decode(nbit, values):
    lanes_per_word = 32 // nbit
    num_words = math.ceil(len(values) / lanes_per_word)
    num_values = len(values)

    @T.prim_func
    def main(packed: T.Tensor((num_words,), "uint32"), decoded: T.Tensor((num_values,), "float32")):
        with T.Kernel(1, threads=1) as _:
            for i in T.serial(num_values):
                decoded[i] = T.Cast("float32", packed[i // lanes_per_word])

    kernel = tilelang.compile(main, target="cuda")
"#;
    check(
        source,
        expect![[r#"
            test_decode (no call site): 
        "#]],
    );
    let parsed = ParsedModule::parse(source);
    let outline = outline(&parsed, source);
    let surroundings = Surroundings::default();
    let specs = find_instances(&parsed, &outline, &[], &surroundings, &|| {});
    let kernel = outline
        .kernel(&specs[0].kernel)
        .expect("the test is a kernel");
    let world = build_world(
        &outline.context,
        &kernel.source,
        &specs[0].args,
        &surroundings,
        &BuildHooks::NONE,
    );
    let shapes: Vec<Option<Vec<i64>>> = world
        .params
        .iter()
        .map(|&param| world.const_shape(param))
        .collect();
    // Four values of two bits: one 32-bit word.
    assert_eq!(shapes, vec![Some(vec![1]), Some(vec![4])]);
}

/// Parameters a launch could not learn at run time are assumed rather than kept symbolic: a
/// `float` (a scale, assumed 1.0) and a size seen only in a product (`groups * group_size`),
/// while `M`, a dimension of its own, stays symbolic. A remainder on an assumed float dtype
/// rejects that dtype alone, and the first integer candidate is taken.
#[test]
fn symbols_no_tensor_dimension_gives_are_assumed() {
    let source = r#"
import tilelang
import tilelang.language as T


@tilelang.jit
def scaled(M: int, groups: int, group_size: int, scale: float):
    @T.prim_func
    def main(X: T.Tensor((M, groups * group_size), "float32")):
        with T.Kernel(T.ceildiv(M, 64), threads=64) as bx:
            for i, j in T.Parallel(64, 4):
                X[bx * 64 + i, j] = X[bx * 64 + i, j] * scale

    return main


@tilelang.jit
def remainder(M: int, dtype: T.dtype):
    @T.prim_func
    def main(I: T.Tensor((M,), dtype)):
        with T.Kernel(T.ceildiv(M, 64), threads=64) as bx:
            for i in T.Parallel(64):
                I[bx * 64 + i] = T.truncmod(I[bx * 64 + i], 7)

    return main
"#;
    check(
        source,
        expect![[r#"
            scaled (no call site): 
              symbolic: M
              assumed: groups = 128 (a representative choice)
              assumed: group_size = 128 (a representative choice)
              assumed: scale = 1.0 (a representative choice)
              line 7: info generic-instance
            remainder (no call site): 
              assumed: M = 128 (a representative choice)
              assumed: dtype = T.int8 (a representative choice the kernel accepts)
              line 18: info generic-instance
        "#]],
    );
}

/// A `T.Parallel` loop whose (iteration, thread) pairs the assumed sizes push past what layout
/// inference lays out (2^24) rejects them: the first candidates that fit are taken instead of
/// leaving the kernel without layouts (`hidden` = 128 made 128 × 128 × 128 iterations).
#[test]
fn a_parallel_loop_too_large_for_layout_inference_rejects_the_assumed_sizes() {
    let source = r#"
import tilelang
import tilelang.language as T


@tilelang.jit
def sinkhorn(num_tokens: int, hidden: int, block: int):
    @T.prim_func
    def main(X: T.Tensor((num_tokens, hidden, hidden), "float32")):
        with T.Kernel(T.ceildiv(num_tokens, block)) as bx:
            frag = T.alloc_fragment((block, hidden, hidden), "float32")
            T.copy(X[bx * block, 0, 0], frag)
            for i, j, k in T.Parallel(block, hidden, hidden):
                frag[i, j, k] = frag[i, j, k] * 2.0
            T.copy(frag, X[bx * block, 0, 0])

    return main
"#;
    check(
        source,
        expect![[r#"
            sinkhorn (no call site): 
              symbolic: num_tokens
              assumed: hidden = 32 (a representative choice the kernel accepts)
              assumed: block = 128 (a representative choice)
              line 7: info generic-instance
        "#]],
    );
}

/// Kernels compiled for Apple GPUs or CPUs (`target="metal"`, `"c"`, `"llvm ..."`) are said to be
/// out of reach as AMD ones are, naming the hardware.
#[test]
fn kernels_compiled_for_cpus_and_apple_gpus_are_out_of_reach_too() {
    for (target, hardware) in [
        ("metal", "Apple GPUs"),
        ("c", "CPUs"),
        ("llvm -mcpu=skylake", "CPUs"),
    ] {
        let source = format!(
            r#"
import tilelang
import tilelang.language as T


@tilelang.jit(target="{target}")
def scale(N=64):
    @T.prim_func
    def main(A: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            for i in T.Parallel(N):
                A[i] = A[i] * 2.0

    return main
"#
        );
        let parsed = ParsedModule::parse(&source);
        let outline = outline(&parsed, &source);
        let surroundings = Surroundings::default();
        let specs = find_instances(&parsed, &outline, &[], &surroundings, &|| {});
        let [spec] = &specs[..] else {
            panic!("one instance of {target}");
        };
        let positions = build_positions(&parsed, &outline, spec, &surroundings, &BuildHooks::NONE);
        let messages: Vec<String> = positions
            .diagnostics
            .iter()
            .map(|d| format!("{}: {}", d.code, d.message))
            .collect();
        assert_eq!(
            messages,
            vec![format!(
                "not-analysed: this kernel is compiled for {hardware} (`target=\"{target}\"`), and \
                 tilec targets NVIDIA GPUs: its layouts and code are not analysed"
            )]
        );
    }
}

/// A call site the run skipped because its branch tests a parameter for `None` (`if num_local
/// is not None:`, with `None` its default) is evaluated with that parameter unknown, not `None`:
/// `num_local + 1` failed. (Seen only as `num_local + 1` in a shape, no launch could learn it, so
/// it is assumed.) A `None` passed where nothing tests it stays `None`.
#[test]
fn a_name_the_branch_tests_for_none_is_unknown_at_the_skipped_call() {
    let source = r#"
import tilelang
import tilelang.language as T


def make_scan(numel, num_local):
    @T.prim_func
    def main(ids: T.Tensor((numel,), "int32"), offsets: T.Tensor((num_local + 1,), "int32")):
        with T.Kernel(1, threads=32) as bx:
            for i in T.serial(num_local + 1):
                offsets[i] = 0

    return main


class Permute:
    def __init__(self, numel, num_local=None):
        if num_local is not None and num_local > 0:
            self.scan = make_scan(numel, num_local)
        else:
            self.scan = None


Permute(1024)
"#;
    check(
        source,
        expect![[r#"
            make_scan (line 19): numel=1024, num_local=<run time>
              assumed: num_local = 128 (a representative choice)
              line 19: info generic-instance
        "#]],
    );
}

/// Settings read from the environment with a default (`int(os.environ.get("NUM_SMS", "132"))`,
/// `os.getenv("BLOCK", "64")`) are their defaults: tilec reads the environment as empty, so the
/// analysis never depends on the shell it runs in.
#[test]
fn settings_from_the_environment_are_their_defaults() {
    let source = r#"
import os
import tilelang
import tilelang.language as T

NUM_SMS = int(os.environ.get("NUM_SMS", "132"))
BLOCK = int(os.getenv("BLOCK", "64"))
DEBUG = "TILEC_DEBUG" in os.environ


@tilelang.jit(out_idx=[1])
def persistent(N=1 << 20):
    assert NUM_SMS == 132 and BLOCK == 64 and not DEBUG

    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(NUM_SMS, threads=BLOCK) as bx:
            for i in T.serial(T.ceildiv(N, NUM_SMS * BLOCK)):
                for j in T.Parallel(BLOCK):
                    if not DEBUG and (i * NUM_SMS + bx) * BLOCK + j < N:
                        B[(i * NUM_SMS + bx) * BLOCK + j] = A[(i * NUM_SMS + bx) * BLOCK + j]

    return main


persistent()
"#;
    check(
        source,
        expect![[r#"
            persistent (line 26): 
        "#]],
    );
}

/// BLAS's `trans_A` is a flag (`assert not trans_A` accepted none of the ints); `tilelang.tvm`
/// is TileLang's TVM (`tilelang.tvm.DataType(dtype).bits`); and a parameter that is a list
/// (`sum(batch_sizes_list)`), for which tilec could only assume ints, is not-analysed, not the
/// user's error.
#[test]
fn flags_bundled_tvm_and_list_parameters() {
    let source = r#"
import tilelang
import tilelang.language as T


def gemm_flags(M, trans_A, dtype="float16"):
    assert not trans_A
    vec = 128 // tilelang.tvm.DataType(dtype).bits

    @T.prim_func
    def main(A: T.Tensor((M, 64), dtype), B: T.Tensor((M, 64), dtype)):
        with T.Kernel(T.ceildiv(M, 64), threads=128) as bx:
            for i, j in T.Parallel(64, 64 // vec * vec):
                B[bx * 64 + i, j] = A[bx * 64 + i, j]

    return main


def grouped(batch_sizes_list, N=64):
    total = sum(batch_sizes_list)

    @T.prim_func
    def main(A: T.Tensor((total, N), "float16"), B: T.Tensor((total, N), "float16")):
        with T.Kernel(T.ceildiv(total, 64), threads=128) as bx:
            for i, j in T.Parallel(64, N):
                B[bx * 64 + i, j] = A[bx * 64 + i, j]

    return main
"#;
    check(
        source,
        expect![[r#"
            gemm_flags (no call site): 
              symbolic: M
              assumed: trans_A = False (a representative choice)
              line 6: info generic-instance
            grouped (no call site): 
              assumed: batch_sizes_list = 128 (a representative choice)
              line 20: not-analysed not-analysed
              line 19: info generic-instance
        "#]],
    );
}

/// A parameter the kernel hands to a helper of the module that picks an operation by name
/// (`_act_fn(activation)`, comparing its `name` with "silu_and_mul") is one of the helper's
/// texts: an int there reached the helper's `raise`.
#[test]
fn a_name_a_helper_compares_with_texts_is_one_of_them() {
    let source = r#"
import tilelang
import tilelang.language as T


def _act_fn(name):
    if name == "silu_and_mul":
        return lambda gate, up: gate / (1.0 + T.exp(-gate)) * up
    if name == "gelu_and_mul":
        return lambda gate, up: 0.5 * gate * (1.0 + T.erf(gate * 0.7071067811865476)) * up
    raise ValueError(f"unsupported activation {name!r}")


def fused(M, activation):
    act = _act_fn(activation)

    @T.prim_func
    def main(G: T.Tensor((M,), "float32"), U: T.Tensor((M,), "float32"), Y: T.Tensor((M,), "float32")):
        with T.Kernel(T.ceildiv(M, 128), threads=128) as bx:
            for i in T.Parallel(128):
                Y[bx * 128 + i] = act(G[bx * 128 + i], U[bx * 128 + i])

    return main
"#;
    check(
        source,
        expect![[r#"
            fused (no call site): 
              symbolic: M
              assumed: activation = 'silu_and_mul' (a representative choice)
              line 14: info generic-instance
        "#]],
    );
}

/// An empty grid made of assumed sizes (`seq_len // chunk_size // group_chunks` with every size
/// 128) retries with larger values of the names that grid's expression reads, not of every name
/// its statement reads (`batch`, `head` stay as they were), and is analysed with the first it
/// accepts. When no value helps (the divisor is a literal larger than any candidate), the
/// representative values are the ones reported, as not analysed.
#[test]
fn an_empty_grid_of_assumed_sizes_retries_with_larger_sizes() {
    let source = r#"
import tilelang
import tilelang.language as T


def grouped_scan(batch, head, seq_len, chunk_size, group_chunks, dtype="float16"):
    num_chunks = seq_len // chunk_size
    num_groups = num_chunks // group_chunks

    @T.prim_func
    def main(A: T.Tensor((batch, head, num_groups, 64), dtype), B: T.Tensor((batch, head, num_groups, 64), dtype)):
        with T.Kernel(num_groups, batch, head, threads=128) as (g, b, h):
            carry = T.alloc_fragment((num_chunks,), "float32")
            group = T.alloc_fragment((group_chunks,), "float32")
            T.clear(carry)
            T.clear(group)
            for i in T.Parallel(64):
                B[b, h, g, i] = A[b, h, g, i]

    return main


def hopeless(batch, seq_len, dtype="float16"):
    num_groups = seq_len // 1000000

    @T.prim_func
    def main(A: T.Tensor((batch, num_groups, 64), dtype), B: T.Tensor((batch, num_groups, 64), dtype)):
        with T.Kernel(num_groups, batch, threads=128) as (g, b):
            rows = T.alloc_fragment((seq_len,), "float32")
            T.clear(rows)
            for i in T.Parallel(64):
                B[b, g, i] = A[b, g, i]

    return main
"#;
    check(
        source,
        expect![[r#"
        grouped_scan (no call site): 
          assumed: batch = 128 (a representative choice)
          assumed: head = 128 (a representative choice)
          assumed: seq_len = 16384 (a representative choice the kernel accepts)
          assumed: chunk_size = 128 (a representative choice)
          assumed: group_chunks = 128 (a representative choice)
          line 6: info generic-instance
        hopeless (no call site): 
          assumed: batch = 128 (a representative choice)
          assumed: seq_len = 128 (a representative choice)
          line 28: not-analysed not-analysed
          line 23: info generic-instance
    "#]],
    );
}

/// `T.async_copy` is a `cp.async`: from global to shared memory only. The other direction is the
/// user's error, at the call.
#[test]
fn an_async_copy_goes_from_global_to_shared_memory() {
    let source = r#"
import tilelang
import tilelang.language as T


@tilelang.jit
def store_back(N=128):
    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            s = T.alloc_shared((N,), "float32")
            T.async_copy(A, s)
            T.ptx_wait_group(0)
            T.async_copy(s, B)

    return main


store_back()
"#;
    check(
        source,
        expect![[r#"
        store_back (line 19): 
          line 14: error invalid-call
    "#]],
    );
}

/// A test that defines its kernel, compiles it in place and runs it (`kernel =
/// tilelang.compile(main)`, `kernel(a)`, `kernel.get_kernel_source()`) is the kernel up to the
/// definition: the host code after it is not the kernel's, and raises nothing. Its pytest
/// parameters take their first case, a function passed by name included (`T.exp`, or `relu`
/// that the module defines), and `T.Kernel(threads=32)` is a grid of one block.
#[test]
fn tests_that_compile_in_place_with_parametrized_functions() {
    let source = r#"
import pytest
import torch
import tilelang
import tilelang.language as T

OPS = [("exp", T.exp), ("log", T.log)]


def run_op(name, op_func, N=64):
    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(threads=32):
            for i in T.Parallel(N):
                B[i] = op_func(A[i])

    kernel = tilelang.compile(main, out_idx=[1], target="cuda")
    assert name in kernel.get_kernel_source()
    a = torch.randn(N, device="cuda")
    torch.testing.assert_close(kernel(a), torch.exp(a))


@pytest.mark.parametrize(("name", "func"), OPS)
def test_op(name, func):
    run_op(name, func)


def relu(x):
    return T.max(x, 0.0)


def test_relu():
    run_op("relu", relu)


@pytest.mark.parametrize("N", [pytest.param(96, marks=pytest.mark.slow), 128])
def test_sizes(N):
    run_op("exp", T.exp, N)
"#;
    check(
        source,
        expect![[r#"
            run_op (line 25): name='exp', op_func=T.exp
            run_op (line 33): name='relu', op_func=relu
            run_op (line 38): name='exp', op_func=T.exp, N=96
        "#]],
    );
}

/// A prim_func that launches no `with T.Kernel(...)` is TIR written by hand (a `T.handle` bound by
/// `T.match_buffer`, thread bindings as loops, or TileLang's own pass tests): tilec says it does
/// not analyse it yet, once per cause, rather than calling each statement the user's error, also
/// when a test compiles it in place. With a `T.Kernel`, the same statement outside it is the
/// user's error.
#[test]
fn a_prim_func_without_a_kernel_launch_is_not_analysed() {
    let source = r#"
import tilelang
import tilelang.language as T


@T.prim_func
def by_hand(A_ptr: T.handle):
    A = T.match_buffer(A_ptr, (16, 16), dtype=T.float32)
    for bx in T.thread_binding(1, thread="blockIdx.x"):
        A[0, 0] = 1.0


@T.prim_func
def no_launch():
    A = T.alloc_fragment((1,), T.float16)
    A[0] = 0


@T.prim_func
def store_outside(A: T.Tensor((16,), T.float32)):
    A[0] = 1.0
    with T.Kernel(1, threads=32):
        A[1] = 2.0


def test_compiled_by_hand():
    @T.prim_func
    def main(A: T.Tensor((16,), T.float32)):
        for i in T.serial(16):
            A[i] = 0.0

    kernel = tilelang.compile(main)
    assert "for" in kernel.get_kernel_source()
"#;
    check(
        source,
        expect![[r#"
            by_hand (no call site): 
              line 7: not-analysed not-analysed
            no_launch (no call site): 
              line 15: not-analysed not-analysed
            store_outside (no call site): 
              line 21: error unsupported-syntax
            test_compiled_by_hand (no call site): 
              line 28: not-analysed not-analysed
        "#]],
    );
}

/// A wrapper's own `assert`s say what it passes: `x.dtype == torch.bfloat16` makes the unknown
/// tensor `x` a bf16 tensor, `fmt == "e4m3"` and `n in [32, 128]` pin the unknown names, and a
/// config object the wrapper makes from them reaches the kernel as the wrapper made it (its
/// field only known at run time stays generic, not its class's default). A factory's own
/// `assert mode in (0, 64)` gives the only candidates for a parameter no one passes.
#[test]
fn a_wrappers_assertions_and_config_objects_reach_the_kernel() {
    let source = r#"
import torch
import tilelang
import tilelang.language as T
from dataclasses import dataclass


@dataclass(frozen=True)
class Cfg:
    torch_dtype: torch.dtype = torch.float16
    block: tuple[int, int] = (1, 1)
    scale: float = 1.0

    @property
    def dtype(self):
        return T.dtype(self.torch_dtype)


def make_cfg(fmt: str, block: tuple[int, int], scale: float) -> Cfg:
    assert fmt in ("e5m2", "e4m3")
    table = {"e5m2": torch.float8_e5m2, "e4m3": torch.float8_e4m3fn}
    return Cfg(torch_dtype=table[fmt], block=block, scale=scale)


@tilelang.jit
def get_kernel(hidden: int, in_dtype: T.dtype, cfg: Cfg, mode: int):
    n, _ = cfg.block
    assert n in [32, 128]
    assert mode in (0, 64)
    rows = 128 if mode == 0 else 64
    tokens = T.dynamic("tokens")

    @T.prim_func
    def kernel(x: T.Tensor[(tokens, hidden), in_dtype], y: T.Tensor[(tokens, hidden), cfg.dtype]):
        with T.Kernel(T.ceildiv(tokens, rows), threads=128) as bx:
            for i, j in T.Parallel(rows, 64):
                y[bx * rows + i, j] = x[bx * rows + i, j] * cfg.scale

    return kernel


def wrapper(x: torch.Tensor, fmt: str, n: int, scale: float):
    assert x.dim() == 2 and x.is_contiguous()
    assert x.dtype == torch.bfloat16
    tokens, hidden = x.shape
    assert fmt == "e4m3"
    assert n in [32, 128]
    cfg = make_cfg(fmt, (n, 1), scale)
    return get_kernel(hidden, T.dtype(x.dtype), cfg, hidden % 128)
"#;
    check(
        source,
        expect![[r#"
        get_kernel (line 49): hidden=<run time>, in_dtype=T.bfloat16, cfg=<run time>, cfg.torch_dtype=T.float8_e4m3, cfg.block=(32, 1), cfg.scale=<run time>, mode=<run time>
          symbolic: hidden
          assumed: cfg.scale = 1.0 (its class's default; the call site's is known at run time)
          assumed: mode = 0 (the first value the kernel's `assert` allows)
          line 49: info generic-instance
    "#]],
    );
}

/// An assertion on a tensor's rank that no tensor meets (`x.dim() == 1 << 40`, as a mutation
/// fuzzer wrote it) narrows nothing and allocates nothing: the wrapper's call stays unknown.
#[test]
fn an_impossible_rank_in_an_assertion_narrows_nothing() {
    let source = r#"
import torch
import tilelang
import tilelang.language as T


@tilelang.jit
def scale(M, dtype):
    @T.prim_func
    def main(A: T.Tensor((M,), dtype), B: T.Tensor((M,), dtype)):
        with T.Kernel(T.ceildiv(M, 128), threads=128) as bx:
            for i in T.Parallel(128):
                B[bx * 128 + i] = A[bx * 128 + i] * 2

    return main


def wrapper(x: torch.Tensor):
    assert x.dim() == 1 << 40 and x.dtype == torch.float32
    return scale(x.shape[0], T.dtype(x.dtype))
"#;
    check(
        source,
        expect![[r#"
        scale (line 20): M=<run time>, dtype=T.float32
          symbolic: M
          line 20: info generic-instance
    "#]],
    );
}
