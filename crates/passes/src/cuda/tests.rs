//! Snapshots of printed kernels for hand-built thread programs, and the printer's behaviour on
//! malformed ones. The prelude is replaced by a marker in the snapshots; it is checked on its own.

use expect_test::expect;
use tilec_ir::data::{BinaryOp, CompareOp, Intrinsic};
use tilec_ir::thread::{
    AtomicOp, BufferDecl, BufferId, DescriptorSwizzle, Memory, ParamAccess, Place, ScalarParam,
    Stmt, TensorMap, TensorParam, TurnStep, UnaryOp, Value, ValueId,
};
use tilec_ir::{DType, ExprArena, ExprId, Target, ThreadProgram, VarId};

use super::{PRELUDE, PRELUDE_SM90, emit_cuda};

/// A thread program under construction, with shorthands for the nodes tests use.
struct Build {
    p: ThreadProgram,
}

impl Build {
    /// A program of one block dimension of `threads` threads and `grid` blocks along x; the thread
    /// variable is `tx`, the block variables `bx`, `by`, `bz`.
    fn new(name: &str, threads: i64, grid: Option<i64>) -> Build {
        let mut exprs = ExprArena::new();
        let thread = exprs.var("tx", Some(threads));
        let bx = exprs.var("bx", grid);
        let by = exprs.var("by", Some(1));
        let bz = exprs.var("bz", Some(1));
        let one = exprs.int(1);
        let gx = match grid {
            Some(n) => exprs.int(n),
            None => one,
        };
        Build {
            p: ThreadProgram {
                name: name.to_owned(),
                exprs,
                values: Vec::new(),
                buffers: Vec::new(),
                params: Vec::new(),
                scalars: Vec::new(),
                grid: [gx, one, one],
                block: [threads, 1, 1],
                thread,
                block_index: [bx, by, bz],
                persistent: None,
                shared_bytes: 0,
                tensor_maps: Vec::new(),
                extern_sources: Vec::new(),
                body: Vec::new(),
            },
        }
    }

    fn tx(&self) -> VarId {
        self.p.thread
    }

    fn bx(&self) -> VarId {
        self.p.block_index[0]
    }

    fn int(&mut self, value: i64) -> ExprId {
        self.p.exprs.int(value)
    }

    fn var(&mut self, v: VarId) -> ExprId {
        self.p.exprs.var_expr(v)
    }

    fn buffer(&mut self, name: &str, dtype: DType, memory: Memory, elements: i64) -> BufferId {
        let elements = self.p.exprs.int(elements);
        self.p.add_buffer(BufferDecl {
            name: name.to_owned(),
            dtype,
            memory,
            shape: vec![elements],
            elements,
            strides: None,
        })
    }

    fn param(&mut self, name: &str, dtype: DType, access: ParamAccess, elements: i64) -> BufferId {
        let param = self.p.params.len();
        let buffer = self.buffer(name, dtype, Memory::Global { param }, elements);
        self.p.params.push(TensorParam {
            name: name.to_owned(),
            buffer,
            access,
        });
        buffer
    }

    fn local(&mut self, name: &str, dtype: DType, elements: i64) -> BufferId {
        self.buffer(name, dtype, Memory::Local, elements)
    }

    fn shared(&mut self, name: &str, dtype: DType, offset: i64, elements: i64) -> BufferId {
        let end = offset + elements * i64::try_from(dtype.bytes()).expect("at most 8");
        self.p.shared_bytes = self.p.shared_bytes.max(end);
        self.buffer(name, dtype, Memory::Shared { offset }, elements)
    }

    fn value(&mut self, value: Value) -> ValueId {
        self.p.add_value(value)
    }

    fn load(&mut self, buffer: BufferId, index: ExprId) -> ValueId {
        self.value(Value::Load { buffer, index })
    }

    fn binary(&mut self, op: BinaryOp, lhs: ValueId, rhs: ValueId, dtype: DType) -> ValueId {
        self.value(Value::Binary {
            op,
            lhs,
            rhs,
            dtype,
        })
    }

    fn compare(&mut self, op: CompareOp, lhs: ValueId, rhs: ValueId) -> ValueId {
        self.value(Value::Compare { op, lhs, rhs })
    }

    fn index(&mut self, e: ExprId) -> ValueId {
        self.value(Value::Index(e))
    }

    fn store(&self, buffer: BufferId, index: ExprId, value: ValueId) -> Stmt {
        Stmt::Store {
            place: Place { buffer, index },
            value,
        }
    }

    /// The kernel without the prelude, for snapshots.
    fn emit(self) -> String {
        let text = emit_cuda(&self.p, &Target::Sm90);
        dump(&format!("{}.cu", self.p.name), &text);
        text.replace(PRELUDE, "<prelude>\n")
            .replace(PRELUDE_SM90, "<sm90 prelude>\n")
    }
}

fn block(label: &str, body: Vec<Stmt>) -> Stmt {
    Stmt::Block {
        origin: None,
        label: label.to_owned(),
        body,
    }
}

/// `C = A + B` on fp16, eight elements per thread: 16-byte vector loads into register arrays, an
/// unrolled loop of rounded adds, a 16-byte vector store, all under a bounds check.
#[test]
fn fp16_elementwise_add() {
    let mut b = Build::new("add_f16", 128, Some(4));
    let n = 4000;
    let a = b.param("A", DType::Float16, ParamAccess::Read, n);
    let bb = b.param("B", DType::Float16, ParamAccess::Read, n);
    let c = b.param("C", DType::Float16, ParamAccess::Write, n);
    let a_local = b.local("A_local", DType::Float16, 8);
    let b_local = b.local("B_local", DType::Float16, 8);
    let c_local = b.local("C_local", DType::Float16, 8);
    let base = b.p.exprs.var("base", Some(4096));
    let i = b.p.exprs.var("i", Some(8));
    let (tx, bx) = (b.tx(), b.bx());
    let (tx, bx) = (b.var(tx), b.var(bx));
    let (k1024, k8) = (b.int(1024), b.int(8));
    let block_start = b.p.exprs.mul(bx, k1024);
    let thread_start = b.p.exprs.mul(tx, k8);
    let start = b.p.exprs.add(block_start, thread_start);
    let base_e = b.var(base);
    let i_e = b.var(i);
    let zero = b.int(0);
    let base_value = b.index(base_e);
    let limit = b.int(n);
    let limit = b.index(limit);
    let in_bounds = b.compare(CompareOp::Lt, base_value, limit);
    let x = b.load(a_local, i_e);
    let y = b.load(b_local, i_e);
    let sum = b.binary(BinaryOp::Add, x, y, DType::Float16);
    let copy = |dst, dst_index, src, src_index| Stmt::VectorCopy {
        dst: Place {
            buffer: dst,
            index: dst_index,
        },
        src: Place {
            buffer: src,
            index: src_index,
        },
        lanes: 8,
    };
    b.p.body = vec![block(
        "C[bx * 1024 + tx * 8 : +8] = A[..] + B[..]",
        vec![
            Stmt::Let {
                var: base,
                value: start,
            },
            Stmt::If {
                cond: in_bounds,
                then: vec![
                    copy(a_local, zero, a, base_e),
                    copy(b_local, zero, bb, base_e),
                    Stmt::For {
                        var: i,
                        extent: k8,
                        unroll: true,
                        body: vec![b.store(c_local, i_e, sum)],
                    },
                    copy(c, base_e, c_local, zero),
                ],
                otherwise: vec![],
            },
        ],
    )];
    expect![[r#"
        // Generated by tilec for sm_90: kernel `add_f16`.
        // Launch: grid (4, 1, 1), block (128, 1, 1), 0 bytes of dynamic shared memory.

        <prelude>

        extern "C" __global__ void __launch_bounds__(128) add_f16(
            const tl_half* __restrict__ A,
            const tl_half* __restrict__ B,
            tl_half* __restrict__ C) {
            const int tx = threadIdx.x;
            const int bx = blockIdx.x;
            const int by = blockIdx.y;
            const int bz = blockIdx.z;
            __align__(16) tl_half A_local[8];
            __align__(16) tl_half B_local[8];
            __align__(16) tl_half C_local[8];
            // C[bx * 1024 + tx * 8 : +8] = A[..] + B[..]
            {
                const int base = tx * 8 + bx * 1024;
                if (base < 4000) {
                    *(uint4*)(A_local + 0) = *(const uint4*)(A + base);
                    *(uint4*)(B_local + 0) = *(const uint4*)(B + base);
                    #pragma unroll
                    for (int i = 0; i < 8; ++i) {
                        C_local[i] = tl_float_to_half(tl_half_to_float(A_local[i]) + tl_half_to_float(B_local[i]));
                    }
                    *(uint4*)(C + base) = *(const uint4*)(C_local + 0);
                }
            }
        }
    "#]]
    .assert_eq(&b.emit());
}

/// A block-wide sum of 64 floats: a butterfly of XOR shuffles within each warp, the warps'
/// partials through shared memory, a barrier, and thread 0 adding them up.
#[test]
fn warp_and_shared_sum_reduction() {
    let mut b = Build::new("block_sum", 64, None);
    let input = b.param("x", DType::Float32, ParamAccess::Read, 1 << 20);
    let out = b.param("out", DType::Float32, ParamAccess::Write, 1 << 14);
    let partial = b.local("partial", DType::Float32, 1);
    let red = b.shared("red", DType::Float32, 0, 2);
    let (tx_var, bx_var) = (b.tx(), b.bx());
    let (tx, bx) = (b.var(tx_var), b.var(bx_var));
    let (zero, k32, k64) = (b.int(0), b.int(32), b.int(64));
    let row = b.p.exprs.mul(bx, k64);
    let element = b.p.exprs.add(row, tx);
    let first = b.load(input, element);
    let mut stmts = vec![b.store(partial, zero, first)];
    for mask in [16, 8, 4, 2, 1] {
        let mine = b.load(partial, zero);
        let theirs = b.value(Value::ShuffleXor {
            value: mine,
            mask,
            dtype: DType::Float32,
        });
        let sum = b.binary(BinaryOp::Add, mine, theirs, DType::Float32);
        stmts.push(b.store(partial, zero, sum));
    }
    let lane = b.p.exprs.floormod(tx, k32);
    let warp = b.p.exprs.floordiv(tx, k32);
    let lane_value = b.index(lane);
    let zero_value = b.index(zero);
    let is_leader = b.compare(CompareOp::Eq, lane_value, zero_value);
    let total = b.load(partial, zero);
    stmts.push(Stmt::If {
        cond: is_leader,
        then: vec![b.store(red, warp, total)],
        otherwise: vec![],
    });
    stmts.push(Stmt::Barrier);
    let tx_value = b.index(tx);
    let is_first = b.compare(CompareOp::Eq, tx_value, zero_value);
    let one = b.int(1);
    let left = b.load(red, zero);
    let right = b.load(red, one);
    let block_total = b.binary(BinaryOp::Add, left, right, DType::Float32);
    stmts.push(Stmt::If {
        cond: is_first,
        then: vec![b.store(out, bx, block_total)],
        otherwise: vec![],
    });
    b.p.body = vec![block("T.reduce_sum(x_frag, out_frag, dim=0)", stmts)];
    expect![[r#"
        // Generated by tilec for sm_90: kernel `block_sum`.
        // Launch: grid (1, 1, 1), block (64, 1, 1), 8 bytes of dynamic shared memory.

        <prelude>

        extern "C" __global__ void __launch_bounds__(64) block_sum(
            const float* __restrict__ x,
            float* __restrict__ out) {
            const int tx = threadIdx.x;
            const int bx = blockIdx.x;
            const int by = blockIdx.y;
            const int bz = blockIdx.z;
            extern __shared__ __align__(16) unsigned char tl_smem[];
            float partial[1];
            float* red = (float*)(tl_smem + 0);
            // T.reduce_sum(x_frag, out_frag, dim=0)
            {
                partial[0] = x[tx + (long long)bx * 64];
                partial[0] = partial[0] + __shfl_xor_sync(0xffffffffu, partial[0], 16, 32);
                partial[0] = partial[0] + __shfl_xor_sync(0xffffffffu, partial[0], 8, 32);
                partial[0] = partial[0] + __shfl_xor_sync(0xffffffffu, partial[0], 4, 32);
                partial[0] = partial[0] + __shfl_xor_sync(0xffffffffu, partial[0], 2, 32);
                partial[0] = partial[0] + __shfl_xor_sync(0xffffffffu, partial[0], 1, 32);
                if ((tx % 32) == 0) {
                    red[tx / 32] = partial[0];
                }
                __syncthreads();
                if (tx == 0) {
                    out[bx] = red[0] + red[1];
                }
            }
        }
    "#]]
    .assert_eq(&b.emit());
}

/// A float atomic add (the hardware instruction), an fp16 one (the prelude's compare-and-swap on
/// the containing word) and a float maximum in shared memory (compare-and-swap as well).
#[test]
fn float_and_fp16_atomics() {
    let mut b = Build::new("atomics", 32, Some(1));
    let x = b.param("x", DType::Float32, ParamAccess::Read, 32);
    let total = b.param("total", DType::Float32, ParamAccess::ReadWrite, 1);
    let buckets = b.param("buckets", DType::Float16, ParamAccess::ReadWrite, 4);
    let peak = b.shared("peak", DType::Float32, 0, 1);
    let tx_var = b.tx();
    let tx = b.var(tx_var);
    let (zero, k4) = (b.int(0), b.int(4));
    let bucket = b.p.exprs.floormod(tx, k4);
    let value = b.load(x, tx);
    let half = b.value(Value::Cast {
        dtype: DType::Float16,
        value,
    });
    let doubled = b.binary(BinaryOp::Mul, value, value, DType::Float32);
    b.p.body = vec![
        Stmt::Atomic {
            op: AtomicOp::Add,
            place: Place {
                buffer: total,
                index: zero,
            },
            value,
            old: None,
        },
        Stmt::Atomic {
            op: AtomicOp::Add,
            place: Place {
                buffer: buckets,
                index: bucket,
            },
            value: half,
            old: None,
        },
        Stmt::Atomic {
            op: AtomicOp::Max,
            place: Place {
                buffer: peak,
                index: zero,
            },
            value: doubled,
            old: None,
        },
    ];
    expect![[r#"
        // Generated by tilec for sm_90: kernel `atomics`.
        // Launch: grid (1, 1, 1), block (32, 1, 1), 4 bytes of dynamic shared memory.

        <prelude>

        extern "C" __global__ void __launch_bounds__(32) atomics(
            const float* __restrict__ x,
            float* __restrict__ total,
            tl_half* __restrict__ buckets) {
            const int tx = threadIdx.x;
            const int bx = blockIdx.x;
            const int by = blockIdx.y;
            const int bz = blockIdx.z;
            extern __shared__ __align__(16) unsigned char tl_smem[];
            float* peak = (float*)(tl_smem + 0);
            atomicAdd(&total[0], x[tx]);
            tl_atomic_cas_small(&buckets[tx % 4], tl_round_f16(x[tx]), tl_op_add());
            tl_atomic_cas_f32(&peak[0], __fmul_rn(x[tx], x[tx]), tl_op_max());
        }
    "#]]
    .assert_eq(&b.emit());
}

/// Floor division and modulo of an expression that may be negative use the prelude's helpers;
/// of one that cannot, C's operators. A symbolic size makes the arithmetic `long long`.
#[test]
fn floor_division_of_negative_values_uses_helpers() {
    let mut b = Build::new("floor_ops", 64, None);
    let out = b.param("out", DType::Int32, ParamAccess::Write, 1 << 20);
    let n_var = b.p.exprs.var("n", None);
    b.p.scalars.push(ScalarParam {
        name: "n".to_owned(),
        var: n_var,
    });
    let i = b.p.exprs.var("i", Some(8));
    let d = b.p.exprs.var("d", Some(8));
    let m = b.p.exprs.var("m", Some(8));
    let row = b.p.exprs.var("row", None);
    let (tx_var, bx_var) = (b.tx(), b.bx());
    let (tx, bx, n, i_e) = (b.var(tx_var), b.var(bx_var), b.var(n_var), b.var(i));
    let (k3, k4, k8) = (b.int(3), b.int(4), b.int(8));
    let (d_e, m_e, row_e) = (b.var(d), b.var(m), b.var(row));
    // i - tx % 8 lies in [-7, 7]: floor division and modulo need the helpers.
    let lane = b.p.exprs.floormod(tx, k8);
    let diff = b.p.exprs.sub(i_e, lane);
    let down = b.p.exprs.floordiv(diff, k3);
    let rem = b.p.exprs.floormod(diff, k3);
    // tx // 4 is non-negative: C's operators.
    let quarter = b.p.exprs.floordiv(tx, k4);
    // n - tx has no known range: long long, with the helpers.
    let from_end = b.p.exprs.sub(n, tx);
    let from_end_quarter = b.p.exprs.floordiv(from_end, k4);
    let n_quarter = b.p.exprs.floordiv(n, k4);
    let row_start = b.p.exprs.mul(bx, n);
    let offset = b.p.exprs.mul(i_e, k8);
    let at = b.p.exprs.add(row_e, offset);
    let at = b.p.exprs.add(at, quarter);
    let d_plus_m = b.p.exprs.add(d_e, m_e);
    let sum = b.index(d_plus_m);
    let at2 = b.p.exprs.add(row_e, n_quarter);
    let big = b.index(from_end_quarter);
    b.p.body = vec![
        Stmt::Let {
            var: row,
            value: row_start,
        },
        Stmt::For {
            var: i,
            extent: k8,
            unroll: false,
            body: vec![
                Stmt::Let {
                    var: d,
                    value: down,
                },
                Stmt::Let { var: m, value: rem },
                b.store(out, at, sum),
            ],
        },
        b.store(out, at2, big),
    ];
    expect![[r#"
        // Generated by tilec for sm_90: kernel `floor_ops`.
        // Launch: grid (1, 1, 1), block (64, 1, 1), 0 bytes of dynamic shared memory.

        <prelude>

        extern "C" __global__ void __launch_bounds__(64) floor_ops(
            int* __restrict__ out,
            int n) {
            const int tx = threadIdx.x;
            const int bx = blockIdx.x;
            const int by = blockIdx.y;
            const int bz = blockIdx.z;
            const long long row = (long long)bx * n;
            for (int i = 0; i < 8; ++i) {
                const int d = tl_floordiv(i - tx % 8, 3);
                const int m = tl_floormod(i - tx % 8, 3);
                out[tx / 4 + i * 8 + row] = d + m;
            }
            out[tl_floordiv(n, 4) + row] = (int)tl_floordiv<long long>((long long)n - tx, 4);
        }
    "#]]
    .assert_eq(&b.emit());
}

/// Programs that break the thread program's rules still print, without panicking: each problem is
/// marked where it occurs and listed as an `#error` at the top, so NVRTC refuses the text.
#[test]
fn malformed_programs_print_errors() {
    let mut b = Build::new("bad kernel", 2048, Some(1));
    let input = b.param("x", DType::Float32, ParamAccess::Read, 64);
    let regs = b.local("regs", DType::Float32, 8);
    let stranger = b.p.exprs.var("ghost", Some(4));
    let ghost = b.var(stranger);
    let zero = b.int(0);
    let loaded = b.load(input, zero);
    let dangling = ValueId(999);
    let later = ValueId(u32::try_from(b.p.values.len()).expect("a few values") + 1);
    let forward = b.binary(BinaryOp::Add, later, loaded, DType::Float32);
    let bitwise = b.binary(BinaryOp::BitAnd, loaded, loaded, DType::Float32);
    let max = b.value(Value::Unary {
        op: UnaryOp::Intrinsic(Intrinsic::Max),
        arg: loaded,
        dtype: DType::Float32,
    });
    b.p.body = vec![
        b.store(input, zero, loaded),
        b.store(regs, ghost, dangling),
        b.store(regs, zero, forward),
        b.store(regs, zero, bitwise),
        b.store(regs, zero, max),
        b.store(BufferId(77), zero, loaded),
        Stmt::VectorCopy {
            dst: Place {
                buffer: regs,
                index: zero,
            },
            src: Place {
                buffer: input,
                index: zero,
            },
            lanes: 8,
        },
        Stmt::Atomic {
            op: AtomicOp::Add,
            place: Place {
                buffer: regs,
                index: zero,
            },
            value: loaded,
            old: None,
        },
    ];
    expect![[r#"
        // Generated by tilec for sm_90: kernel `bad kernel`.
        // Launch: grid (1, 1, 1), block (2048, 1, 1), 0 bytes of dynamic shared memory.
        #error "tilec: invalid thread program: a block of 2048 x 1 x 1 threads is not launchable (1 to 1024 threads)"
        #error "tilec: invalid thread program: a store writes `x`, a read-only parameter"
        #error "tilec: invalid thread program: variable `ghost` is used where no statement binds it"
        #error "tilec: invalid thread program: a value or the buffer it loads is not in the program"
        #error "tilec: invalid thread program: a value uses a value defined after it"
        #error "tilec: invalid thread program: `&` on float32 values"
        #error "tilec: invalid thread program: `max` needs two operands and is printed as a unary operation"
        #error "tilec: invalid thread program: a store names a buffer that is not in the program"
        #error "tilec: invalid thread program: a vector copy of 8 x float32 (32 bytes) has no single access"
        #error "tilec: invalid thread program: an atomic on a register array"

        <prelude>

        extern "C" __global__ void __launch_bounds__(1) bad_kernel(
            const float* __restrict__ x) {
            const int tx = threadIdx.x;
            const int bx = blockIdx.x;
            const int by = blockIdx.y;
            const int bz = blockIdx.z;
            __align__(16) float regs[8];
            /* invalid: a store writes `x`, a read-only parameter */
            regs[0 /* invalid: variable `ghost` is used where no statement binds it */] = (float)0 /* invalid: a value or the buffer it loads is not in the program */;
            regs[0] = 0 /* invalid: a value uses a value defined after it */ + x[0];
            regs[0] = 0 /* invalid: `&` on float32 values */;
            regs[0] = 0 /* invalid: `max` needs two operands and is printed as a unary operation */;
            /* invalid: a store names a buffer that is not in the program */
            /* invalid: a vector copy of 8 x float32 (32 bytes) has no single access */
            /* invalid: an atomic on a register array */
        }
    "#]]
    .assert_eq(&b.emit());
}

/// Names from the program become unique C identifiers; a variable bound again while its first
/// binding is visible gets a new name; a three-dimensional block flattens the thread index.
#[test]
fn names_scopes_and_three_dimensional_blocks() {
    let mut b = Build::new("names", 64, Some(2));
    b.p.block = [16, 2, 2];
    let out = b.param("float", DType::Int32, ParamAccess::Write, 256);
    let tile = b.shared("A.shared", DType::Float16, 0, 64);
    let dup = b.shared("A_shared", DType::Float16, 128, 64);
    let j = b.p.exprs.var("j.inner", Some(4));
    let k = b.p.exprs.var("k", Some(4));
    let (tx_var, j_e, k_e) = (b.tx(), b.var(j), b.var(k));
    let tx = b.var(tx_var);
    let k4 = b.int(4);
    let jk = b.p.exprs.add(j_e, k_e);
    let value = b.index(jk);
    let from_tile = b.load(tile, tx);
    let to_int = b.value(Value::Cast {
        dtype: DType::Int32,
        value: from_tile,
    });
    b.p.body = vec![
        Stmt::For {
            var: j,
            extent: k4,
            unroll: false,
            body: vec![
                Stmt::Let { var: k, value: j_e },
                Stmt::Let { var: k, value: jk },
                b.store(out, k_e, value),
            ],
        },
        Stmt::For {
            var: j,
            extent: k4,
            unroll: false,
            body: vec![b.store(dup, j_e, from_tile)],
        },
        b.store(out, tx, to_int),
    ];
    expect![[r#"
        // Generated by tilec for sm_90: kernel `names`.
        // Launch: grid (2, 1, 1), block (16, 2, 2), 256 bytes of dynamic shared memory.

        <prelude>

        extern "C" __global__ void __launch_bounds__(64) names(
            int* __restrict__ v_float) {
            const int tx = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
            const int bx = blockIdx.x;
            const int by = blockIdx.y;
            const int bz = blockIdx.z;
            extern __shared__ __align__(16) unsigned char tl_smem[];
            tl_half* A_shared = (tl_half*)(tl_smem + 0);
            tl_half* A_shared_1 = (tl_half*)(tl_smem + 128);
            for (int j_inner = 0; j_inner < 4; ++j_inner) {
                const int k = j_inner;
                const int k_1 = j_inner + k;
                v_float[k_1] = j_inner + k_1;
            }
            for (int j_inner = 0; j_inner < 4; ++j_inner) {
                A_shared_1[j_inner] = A_shared[tx];
            }
            v_float[tx] = (int)tl_to_int64(tl_half_to_float(A_shared[tx]));
        }
    "#]]
    .assert_eq(&b.emit());
}

/// `ldmatrix` reads through a 32-bit shared-window address computed once per kernel: the buffer's
/// byte offset and the element offset are added to it, so ptxas can fold their constant parts
/// into the instruction instead of keeping a 64-bit pointer per operand.
#[test]
fn ldmatrix_addresses_the_shared_window() {
    let mut b = Build::new("fragments", 32, Some(1));
    let _first = b.shared("B_shared", DType::Float16, 0, 512);
    let tile = b.shared("A_shared", DType::Float16, 1024, 512);
    let regs = b.local("a_frag", DType::Float16, 16);
    let tx_var = b.tx();
    let tx = b.var(tx_var);
    let eight = b.int(8);
    let row = b.p.exprs.mul(tx, eight);
    let (src_index, dst_index) = (b.p.exprs.add(row, eight), b.int(8));
    b.p.body = vec![Stmt::LoadMatrix {
        matrices: 4,
        transpose: true,
        dst: Place {
            buffer: regs,
            index: dst_index,
        },
        src: Place {
            buffer: tile,
            index: src_index,
        },
    }];
    let text = b.emit();
    let kernel = &text[text.find("extern __shared__").unwrap_or(0)..];
    expect![[r#"
        extern __shared__ __align__(16) unsigned char tl_smem[];
            const unsigned int smem_window = tl_shared_address(tl_smem);
            tl_half* B_shared = (tl_half*)(tl_smem + 0);
            tl_half* A_shared = (tl_half*)(tl_smem + 1024);
            __align__(16) tl_half a_frag[16];
            tl_ldmatrix_x4_trans(a_frag + 8, smem_window + 1024u + (unsigned int)(tx * 8 + 8) * 2u);
        }
    "#]]
    .assert_eq(kernel);
}

/// Every dtype through every operation, conversion, shuffle, atomic and vector width: the program
/// must print without a single error. With `TILEC_CUDA_DUMP_DIR` set, the printed kernels of this
/// file are written there, for compiling them with NVRTC on a machine that has it.
#[test]
fn every_dtype_and_operation_prints_without_errors() {
    for target in Target::ALL {
        let text = emit_cuda(&coverage_program(), &target);
        assert!(!text.contains("invalid thread program"), "{text}");
        assert!(!text.contains("invalid"), "{text}");
        dump(&format!("coverage_{target}.cu"), &text);
    }
}

/// Writes `text` to `$TILEC_CUDA_DUMP_DIR/name` when the variable is set.
fn dump(name: &str, text: &str) {
    if let Some(dir) = std::env::var_os("TILEC_CUDA_DUMP_DIR") {
        let path = std::path::Path::new(&dir).join(name);
        std::fs::write(&path, text).unwrap_or_else(|e| panic!("writing {path:?}: {e}"));
    }
}

/// Buffers of one dtype in the coverage program.
struct Buffers {
    input: BufferId,
    output: BufferId,
    regs: BufferId,
    shared: BufferId,
}

fn coverage_program() -> ThreadProgram {
    let mut b = Build::new("coverage", 64, None);
    let n_var = b.p.exprs.var("n", None);
    b.p.scalars.push(ScalarParam {
        name: "n".to_owned(),
        var: n_var,
    });
    let mut offset = 0;
    let buffers: Vec<(DType, Buffers)> = DType::ALL
        .iter()
        .map(|&dtype| {
            let name = dtype.name();
            let input = b.param(&format!("in_{name}"), dtype, ParamAccess::Read, 64);
            let output = b.param(&format!("out_{name}"), dtype, ParamAccess::ReadWrite, 64);
            let regs = b.local(&format!("r_{name}"), dtype, 16);
            let shared = b.shared(&format!("s_{name}"), dtype, offset, 16);
            offset += 16 * 8;
            (
                dtype,
                Buffers {
                    input,
                    output,
                    regs,
                    shared,
                },
            )
        })
        .collect();
    let mut body = Vec::new();
    for (dtype, bufs) in &buffers {
        body.push(block(
            &format!("{dtype}"),
            coverage_of(&mut b, *dtype, bufs, &buffers, n_var),
        ));
    }
    b.p.body = body;
    b.p
}

/// The statements that exercise one dtype.
fn coverage_of(
    b: &mut Build,
    dtype: DType,
    bufs: &Buffers,
    all: &[(DType, Buffers)],
    n_var: VarId,
) -> Vec<Stmt> {
    let tx_var = b.tx();
    let tx = b.var(tx_var);
    let n = b.var(n_var);
    let (zero, k4) = (b.int(0), b.int(4));
    let x = b.load(bufs.input, tx);
    let y = b.load(bufs.regs, zero);
    let mut stmts = Vec::new();
    let mut out = |b: &mut Build, value: ValueId| {
        let store = b.store(bufs.output, tx, value);
        stmts.push(store);
    };
    // Constants, special floats included.
    for bits in [
        0.1f64,
        -0.0,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        1e-45,
        3e38,
        1e300,
    ]
    .map(f64::to_bits)
    {
        let constant = b.value(Value::Float { bits, dtype });
        out(b, constant);
    }
    for value in [-5, 300, i64::MIN, i64::from(i32::MIN)] {
        let constant = b.value(Value::Int { value, dtype });
        out(b, constant);
    }
    let one = b.value(Value::Int { value: 1, dtype });
    let float_ops = [
        BinaryOp::Add,
        BinaryOp::Sub,
        BinaryOp::Mul,
        BinaryOp::Div,
        BinaryOp::FloorDiv,
        BinaryOp::Mod,
        BinaryOp::Pow,
        BinaryOp::And,
        BinaryOp::Or,
    ];
    let int_ops = [
        BinaryOp::BitAnd,
        BinaryOp::BitOr,
        BinaryOp::BitXor,
        BinaryOp::Shl,
        BinaryOp::Shr,
    ];
    let ops = float_ops.iter().chain(if dtype.is_float() {
        &[][..]
    } else {
        &int_ops[..]
    });
    for &op in ops {
        let rhs = if matches!(op, BinaryOp::Shl | BinaryOp::Shr) {
            one
        } else {
            y
        };
        let result = b.binary(op, x, rhs, dtype);
        out(b, result);
    }
    let mut unary = vec![UnaryOp::Neg, UnaryOp::Not];
    if dtype.is_float() {
        unary.extend(
            [
                Intrinsic::Exp,
                Intrinsic::Exp2,
                Intrinsic::Log,
                Intrinsic::Log2,
                Intrinsic::Sqrt,
                Intrinsic::Rsqrt,
                Intrinsic::Abs,
                Intrinsic::Sigmoid,
                Intrinsic::Tanh,
                Intrinsic::Floor,
                Intrinsic::Ceil,
                Intrinsic::Trunc,
                Intrinsic::Round,
                Intrinsic::Erf,
                Intrinsic::Sin,
                Intrinsic::Cos,
                Intrinsic::Tan,
                Intrinsic::Sinh,
                Intrinsic::Cosh,
                Intrinsic::Asin,
                Intrinsic::Acos,
                Intrinsic::Atan,
                Intrinsic::Exp10,
                Intrinsic::Log10,
                Intrinsic::Log1p,
            ]
            .map(UnaryOp::Intrinsic),
        );
    } else {
        unary.push(UnaryOp::Intrinsic(Intrinsic::Abs));
    }
    for op in unary {
        let result = b.value(Value::Unary { op, arg: x, dtype });
        out(b, result);
    }
    for op in [
        CompareOp::Lt,
        CompareOp::Le,
        CompareOp::Gt,
        CompareOp::Ge,
        CompareOp::Eq,
        CompareOp::Ne,
    ] {
        let cond = b.compare(op, x, y);
        out(b, cond);
        let picked = b.value(Value::Select {
            cond,
            then: x,
            otherwise: y,
            dtype,
        });
        out(b, picked);
    }
    let shuffled = b.value(Value::ShuffleXor {
        value: x,
        mask: 1,
        dtype,
    });
    out(b, shuffled);
    let index = b.p.exprs.min(tx, n);
    let index = b.p.exprs.floordiv(index, k4);
    let index = b.index(index);
    out(b, index);
    for (to, to_bufs) in all {
        let cast = b.value(Value::Cast {
            dtype: *to,
            value: x,
        });
        stmts.push(b.store(to_bufs.output, tx, cast));
        stmts.push(b.store(to_bufs.regs, zero, x));
    }
    stmts.push(b.store(bufs.shared, zero, x));
    if dtype.is_sub_byte() {
        // 4-bit elements share bytes in memory: no atomics of them, and vector copies of an even
        // number of them only (whole bytes of packed memory).
        for lanes in [2, 4, 8, 16] {
            vector_copies(b, bufs, lanes, &mut stmts);
        }
        stmts.push(Stmt::Barrier);
        return stmts;
    }
    for op in [AtomicOp::Add, AtomicOp::Max, AtomicOp::Min] {
        for buffer in [bufs.output, bufs.shared] {
            let index = b.p.exprs.floormod(tx, k4);
            stmts.push(Stmt::Atomic {
                op,
                place: Place { buffer, index },
                value: x,
                old: None,
            });
        }
    }
    for lanes in [1, 2, 4, 8, 16] {
        if u64::from(lanes) * dtype.bytes() <= 16 {
            vector_copies(b, bufs, lanes, &mut stmts);
        }
    }
    stmts.push(Stmt::Barrier);
    stmts
}

/// Vector copies of `lanes` elements of one dtype: global → registers → shared → global.
fn vector_copies(b: &mut Build, bufs: &Buffers, lanes: u32, stmts: &mut Vec<Stmt>) {
    let tx_var = b.tx();
    let tx = b.var(tx_var);
    let zero = b.int(0);
    let lanes_e = b.int(i64::from(lanes));
    let at = b.p.exprs.mul(tx, lanes_e);
    let copy = |dst, dst_index, src, src_index| Stmt::VectorCopy {
        dst: Place {
            buffer: dst,
            index: dst_index,
        },
        src: Place {
            buffer: src,
            index: src_index,
        },
        lanes,
    };
    stmts.push(copy(bufs.regs, zero, bufs.input, at));
    stmts.push(copy(bufs.shared, zero, bufs.regs, zero));
    stmts.push(copy(bufs.output, at, bufs.shared, zero));
}

/// Deeply nested statements, a long chain of values and a value DAG that would expand
/// exponentially are reported, not followed until the stack or memory runs out.
#[test]
fn deep_and_exploding_programs_are_reported() {
    let mut b = Build::new("deep", 32, Some(1));
    let out = b.param("out", DType::Float32, ParamAccess::Write, 1);
    let zero = b.int(0);
    let mut chain = b.load(out, zero);
    for _ in 0..100_000 {
        chain = b.binary(BinaryOp::Add, chain, chain, DType::Float32);
    }
    let mut nested = vec![b.store(out, zero, chain)];
    for depth in 0..10_000 {
        nested = vec![block(&format!("level {depth}"), nested)];
    }
    b.p.body = nested;
    let text = emit_cuda(&b.p, &Target::Sm90);
    assert!(text.contains("is nested too deeply to print"), "{text}");
    assert!(text.len() < 1 << 20, "{} bytes", text.len());
    b.p.body = vec![b.store(out, zero, chain)];
    let text = emit_cuda(&b.p, &Target::Sm90);
    assert!(
        text.contains("an expression is too large to print inline"),
        "{text}"
    );
    assert!(text.len() < 1 << 20, "{} bytes", text.len());
}

/// A value used twice by a statement becomes a `const` temporary before it (the running maximum
/// of a reduction, a shuffled partial), unless only one side of a select uses it: C evaluates
/// only the side the condition picks, so a guarded load stays under its guard.
#[test]
fn shared_values_become_temporaries() {
    let mut b = Build::new("temporaries", 64, Some(1));
    let input = b.param("A", DType::Float32, ParamAccess::Read, 100);
    let out = b.param("out", DType::Float32, ParamAccess::Write, 64);
    let x = b.local("x", DType::Float32, 4);
    let m = b.local("m", DType::Float32, 1);
    let tx_var = b.tx();
    let tx = b.var(tx_var);
    let zero = b.int(0);
    let mut acc = b.value(Value::Float {
        bits: f64::NEG_INFINITY.to_bits(),
        dtype: DType::Float32,
    });
    for k in 0..4 {
        let at = b.int(k);
        let element = b.load(x, at);
        let greater = b.compare(CompareOp::Gt, acc, element);
        acc = b.value(Value::Select {
            cond: greater,
            then: acc,
            otherwise: element,
            dtype: DType::Float32,
        });
    }
    let mine = b.load(m, zero);
    let theirs = b.value(Value::ShuffleXor {
        value: mine,
        mask: 16,
        dtype: DType::Float32,
    });
    let greater = b.compare(CompareOp::Gt, mine, theirs);
    let warp_max = b.value(Value::Select {
        cond: greater,
        then: mine,
        otherwise: theirs,
        dtype: DType::Float32,
    });
    let thread = b.index(tx);
    let limit = b.int(100);
    let limit = b.index(limit);
    let in_bounds = b.compare(CompareOp::Lt, thread, limit);
    let element = b.load(input, tx);
    let square = b.binary(BinaryOp::Mul, element, element, DType::Float32);
    let twice = b.binary(BinaryOp::Add, square, square, DType::Float32);
    let nothing = b.value(Value::Float {
        bits: 0f64.to_bits(),
        dtype: DType::Float32,
    });
    let guarded = b.value(Value::Select {
        cond: in_bounds,
        then: twice,
        otherwise: nothing,
        dtype: DType::Float32,
    });
    b.p.body = vec![
        b.store(m, zero, acc),
        b.store(m, zero, warp_max),
        b.store(out, tx, guarded),
    ];
    expect![[r#"
        // Generated by tilec for sm_90: kernel `temporaries`.
        // Launch: grid (1, 1, 1), block (64, 1, 1), 0 bytes of dynamic shared memory.

        <prelude>

        extern "C" __global__ void __launch_bounds__(64) temporaries(
            const float* __restrict__ A,
            float* __restrict__ out) {
            const int tx = threadIdx.x;
            const int bx = blockIdx.x;
            const int by = blockIdx.y;
            const int bz = blockIdx.z;
            __align__(16) float x[4];
            float m[1];
            const float v3 = ((-tl_float_inf()) > x[0]) ? (-tl_float_inf()) : x[0];
            const float v6 = (v3 > x[1]) ? v3 : x[1];
            const float v9 = (v6 > x[2]) ? v6 : x[2];
            m[0] = (v9 > x[3]) ? v9 : x[3];
            const float v14 = __shfl_xor_sync(0xffffffffu, m[0], 16, 32);
            m[0] = (m[0] > v14) ? m[0] : v14;
            out[tx] = (tx < 100) ? fmaf(A[tx], A[tx], __fmul_rn(A[tx], A[tx])) : 0.0f;
        }
    "#]]
    .assert_eq(&b.emit());
}

/// A warp-specialized kernel: thread 0 initialises two mbarriers; 256 consumer threads raise their
/// register budget, wait for the TMA load, meet at a named barrier and release the stage; the
/// producer warpgroup lowers its budget and one of its threads issues the load through the tensor
/// map, which the kernel takes after the tensor and scalar parameters.
#[test]
fn tma_and_warp_specialization() {
    let mut b = Build::new("tma", 384, Some(2));
    let a = b.param("A", DType::Float16, ParamAccess::Read, 128 * 64);
    let out = b.param("C", DType::Float32, ParamAccess::Write, 128);
    let n_var = b.p.exprs.var("n", None);
    b.p.scalars.push(ScalarParam {
        name: "n".to_owned(),
        var: n_var,
    });
    b.p.tensor_maps.push(TensorMap {
        name: "A_map".to_owned(),
        buffer: a,
        box_dims: vec![64, 64],
        swizzle: Some(DescriptorSwizzle::Bytes128),
    });
    let tile = b.shared("A_shared", DType::Float16, 0, 64 * 64);
    let bars = b.shared("bars", DType::UInt64, 8192, 2);
    let (tx_var, bx_var) = (b.tx(), b.bx());
    let (tx, bx) = (b.var(tx_var), b.var(bx_var));
    let (zero, one, k64, k256) = (b.int(0), b.int(1), b.int(64), b.int(256));
    let row = b.p.exprs.mul(bx, k64);
    let thread = b.index(tx);
    let first = b.index(zero);
    let is_first = b.compare(CompareOp::Eq, thread, first);
    let producer_first = b.index(k256);
    let is_issuer = b.compare(CompareOp::Eq, thread, producer_first);
    let element = b.load(tile, tx);
    let widened = b.value(Value::Cast {
        dtype: DType::Float32,
        value: element,
    });
    let turn = |step| Stmt::WarpgroupTurn {
        step,
        warpgroups: 2,
        first_barrier: 2,
    };
    b.p.body = vec![
        Stmt::If {
            cond: is_first,
            then: vec![
                Stmt::MbarrierInit {
                    barrier: Place {
                        buffer: bars,
                        index: zero,
                    },
                    count: 1,
                },
                Stmt::MbarrierInit {
                    barrier: Place {
                        buffer: bars,
                        index: one,
                    },
                    count: 256,
                },
            ],
            otherwise: vec![],
        },
        Stmt::Barrier,
        Stmt::WarpRoles {
            consumers: 256,
            consumer: vec![
                Stmt::SetMaxRegisters {
                    count: 232,
                    increase: true,
                },
                Stmt::MbarrierWait {
                    barrier: Place {
                        buffer: bars,
                        index: zero,
                    },
                    parity: zero,
                },
                Stmt::NamedBarrier {
                    id: 1,
                    threads: 256,
                },
                turn(TurnStep::Start),
                turn(TurnStep::Take),
                b.store(out, tx, widened),
                turn(TurnStep::Pass),
                turn(TurnStep::End),
                Stmt::MbarrierArrive {
                    barrier: Place {
                        buffer: bars,
                        index: one,
                    },
                    expect_bytes: None,
                },
            ],
            producer: vec![
                Stmt::SetMaxRegisters {
                    count: 40,
                    increase: false,
                },
                Stmt::If {
                    cond: is_issuer,
                    then: vec![
                        Stmt::MbarrierArrive {
                            barrier: Place {
                                buffer: bars,
                                index: zero,
                            },
                            expect_bytes: Some(8192),
                        },
                        Stmt::TmaLoad {
                            map: 0,
                            dst: Place {
                                buffer: tile,
                                index: zero,
                            },
                            coords: vec![zero, row],
                            barrier: Place {
                                buffer: bars,
                                index: zero,
                            },
                        },
                    ],
                    otherwise: vec![],
                },
            ],
        },
    ];
    let text = emit_cuda(&b.p, &Target::Sm90);
    assert!(text.contains(PRELUDE_SM90));
    assert!(!text.contains("invalid"), "{text}");
    expect![[r#"
        // Generated by tilec for sm_90: kernel `tma`.
        // Launch: grid (2, 1, 1), block (384, 1, 1), 8208 bytes of dynamic shared memory.

        <prelude>

        <sm90 prelude>

        extern "C" __global__ void __launch_bounds__(384, 1) tma(
            const tl_half* __restrict__ A,
            float* __restrict__ C,
            int n,
            const __grid_constant__ tl_tensor_map A_map) {
            const int tx = threadIdx.x;
            const int bx = blockIdx.x;
            const int by = blockIdx.y;
            const int bz = blockIdx.z;
            extern __shared__ __align__(1024) unsigned char tl_smem[];
            tl_half* A_shared = (tl_half*)(tl_smem + 0);
            unsigned long long* bars = (unsigned long long*)(tl_smem + 8192);
            if (tx == 0) {
                tl_mbarrier_init(bars + 0, 1);
                tl_mbarrier_init(bars + 1, 256);
            }
            __syncthreads();
            if (tx < 256) {
                tl_setmaxnreg_inc<232>();
                tl_mbarrier_wait(bars + 0, 0);
                tl_named_barrier(1, 256);
                if (tx / 128 == 1) tl_named_barrier_arrive(2, 256); // the first turn goes to warpgroup 0
                tl_named_barrier(2 + tx / 128, 256); // take the turn
                C[tx] = tl_half_to_float(A_shared[tx]);
                tl_named_barrier_arrive(2 + (tx / 128 + 1) % 2, 256); // hand the turn on
                if (tx / 128 == 0) tl_named_barrier(2, 256); // the last turn handed on
                tl_mbarrier_arrive(bars + 1);
            } else {
                tl_setmaxnreg_dec<40>();
                if (tx == 256) {
                    tl_mbarrier_arrive_expect_tx(bars + 0, 8192);
                    tl_tma_load_2d(A_shared + 0, &A_map, bars + 0, 0, bx * 64);
                }
            }
        }
    "#]]
    .assert_eq(&b.emit());
}

/// Kernels without TMA, mbarriers or warp roles do not get the sm_90a prelude, which refuses
/// sm_80; a kernel that takes a tensor map does, even before it loads through it.
#[test]
fn the_sm90_prelude_is_printed_only_when_used() {
    let mut b = Build::new("plain", 32, Some(1));
    let out = b.param("out", DType::Float32, ParamAccess::Write, 32);
    let tx_var = b.tx();
    let tx = b.var(tx_var);
    let value = b.index(tx);
    b.p.body = vec![b.store(out, tx, value), Stmt::Barrier];
    assert!(!emit_cuda(&b.p, &Target::Sm80).contains(PRELUDE_SM90));
    b.p.tensor_maps.push(TensorMap {
        name: "out_map".to_owned(),
        buffer: out,
        box_dims: vec![32],
        swizzle: None,
    });
    let text = emit_cuda(&b.p, &Target::Sm90);
    assert!(text.contains(PRELUDE_SM90), "{text}");
    assert!(
        text.contains("    const __grid_constant__ tl_tensor_map out_map) {\n"),
        "{text}"
    );
    assert!(PRELUDE_SM90.contains("#error \"this tilec kernel needs sm_90a"));
}

/// What TMA, mbarriers and warp roles cannot be is reported, not printed: a rank TMA lacks, a
/// missing tensor map, a barrier that is not a shared uint64 word, register counts and barrier
/// ids out of range, and warp roles that are not whole warpgroups.
#[test]
fn malformed_tma_and_warp_roles_print_errors() {
    let mut b = Build::new("bad_tma", 256, Some(1));
    let a = b.param("A", DType::Float32, ParamAccess::Read, 64);
    b.p.tensor_maps.push(TensorMap {
        name: "A_map".to_owned(),
        buffer: BufferId(42),
        box_dims: vec![8, 8],
        swizzle: None,
    });
    let tile = b.shared("tile", DType::Float32, 0, 64);
    let bar = b.shared("bar", DType::UInt64, 256, 1);
    let wrong = b.shared("wrong", DType::UInt32, 264, 2);
    let zero = b.int(0);
    let load = |map, coords: Vec<ExprId>, dst| Stmt::TmaLoad {
        map,
        dst: Place {
            buffer: dst,
            index: zero,
        },
        coords,
        barrier: Place {
            buffer: bar,
            index: zero,
        },
    };
    b.p.body = vec![
        load(0, vec![zero; 6], tile),
        load(0, vec![zero; 1], tile),
        load(3, vec![zero; 2], tile),
        load(0, vec![zero; 2], a),
        Stmt::MbarrierInit {
            barrier: Place {
                buffer: wrong,
                index: zero,
            },
            count: 1,
        },
        Stmt::MbarrierInit {
            barrier: Place {
                buffer: bar,
                index: zero,
            },
            count: 0,
        },
        Stmt::MbarrierArrive {
            barrier: Place {
                buffer: bar,
                index: zero,
            },
            expect_bytes: Some(1 << 20),
        },
        Stmt::SetMaxRegisters {
            count: 20,
            increase: true,
        },
        Stmt::NamedBarrier {
            id: 16,
            threads: 100,
        },
        Stmt::WarpRoles {
            consumers: 64,
            consumer: vec![],
            producer: vec![],
        },
    ];
    expect![[r#"
        // Generated by tilec for sm_90: kernel `bad_tma`.
        // Launch: grid (1, 1, 1), block (256, 1, 1), 272 bytes of dynamic shared memory.
        #error "tilec: invalid thread program: tensor map `A_map` describes a buffer that is not a tensor parameter"
        #error "tilec: invalid thread program: a TMA load of rank 6 through tensor map `A_map` of rank 2 (TMA has ranks 1 to 5)"
        #error "tilec: invalid thread program: a TMA load of rank 1 through tensor map `A_map` of rank 2 (TMA has ranks 1 to 5)"
        #error "tilec: invalid thread program: a TMA load through tensor map 3, which does not exist"
        #error "tilec: invalid thread program: a TMA load whose destination is not in shared memory"
        #error "tilec: invalid thread program: an mbarrier that is not a uint64 element of a shared buffer"
        #error "tilec: invalid thread program: an mbarrier initialised for 0 arrivals (1 to 1048575)"
        #error "tilec: invalid thread program: an mbarrier arrival expecting 1048576 bytes (at most 1048575)"
        #error "tilec: invalid thread program: setmaxnreg to 20 registers (24 to 256 in steps of 8)"
        #error "tilec: invalid thread program: a named barrier 16 of 100 threads (ids 0 to 15, a positive multiple of 32 threads)"
        #error "tilec: invalid thread program: warp roles with 64 consumer threads in a block of 256 (a positive multiple of 128 below the block's threads)"
    "#]]
    .assert_eq(&errors_of(&b.p));
}

/// The `#error` lines of a printed program.
fn errors_of(program: &ThreadProgram) -> String {
    let text = emit_cuda(program, &Target::Sm90);
    let mut lines: Vec<&str> = text.lines().take_while(|line| !line.is_empty()).collect();
    lines.push("");
    lines.join("\n")
}

/// A kernel named after a C++ keyword or with a leading underscore is a valid Python name: the
/// printed kernel renames it, with no `#error`, to the name [`super::kernel_symbol`] gives, which is
/// what the launcher looks the compiled function up by.
#[test]
fn kernels_named_like_keywords_are_renamed_not_refused() {
    for (python, c) in [
        ("double", "v_double"),
        ("switch", "v_switch"),
        ("_layernorm_fwd", "layernorm_fwd"),
        ("rms_norm", "rms_norm"),
    ] {
        let mut b = Build::new(python, 32, Some(1));
        b.param("x", DType::Float32, ParamAccess::Read, 32);
        let text = emit_cuda(&b.p, &Target::Sm90);
        assert!(
            !text.contains("#error \"tilec: invalid"),
            "{python}:\n{text}"
        );
        assert!(
            text.contains(&format!("__launch_bounds__(32) {c}(")),
            "{python}:\n{text}"
        );
        assert_eq!(super::kernel_symbol(python), c);
    }
}
