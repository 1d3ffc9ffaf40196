//! Tests of the emulator on small thread programs built by hand.

use tilec_ir::data::{BinaryOp, CompareOp};
use tilec_ir::thread::{
    BufferDecl, BufferId, Memory as MemoryKind, ParamAccess, Place, ScalarParam, Stmt, TensorParam,
    TurnStep, Value, ValueId,
};
use tilec_ir::{DType, EntityId, ExprArena, ExprId, ThreadProgram, VarId};

use super::{
    BlockedWait, EmulatorError, ErrorKind, MbarrierFault, RaceKind, WaitOn, run_program,
    run_program_within,
};
use crate::tensor::{HostTensor, round_to};

/// A test's small non-negative number as an index.
fn ix(value: i64) -> usize {
    usize::try_from(value).expect("a small non-negative number")
}

/// A test's small size as an integer of the IR.
fn int(value: usize) -> i64 {
    i64::try_from(value).expect("a small size")
}

/// A test input drawn as an f32 value, which `as f32` keeps exactly.
#[allow(clippy::cast_possible_truncation)]
fn f32_of(value: f64) -> f32 {
    value as f32
}

/// Builds thread programs with one-dimensional blocks.
struct Builder {
    p: ThreadProgram,
    origins: usize,
}

impl Builder {
    fn new(threads: i64) -> Builder {
        let mut exprs = ExprArena::new();
        let thread = exprs.var("tx", Some(threads));
        let block_index = [
            exprs.var("bx", None),
            exprs.var("by", None),
            exprs.var("bz", None),
        ];
        let one = exprs.int(1);
        let p = ThreadProgram {
            name: "kernel".to_owned(),
            exprs,
            values: Vec::new(),
            buffers: Vec::new(),
            params: Vec::new(),
            scalars: Vec::new(),
            grid: [one, one, one],
            block: [threads, 1, 1],
            thread,
            block_index,
            persistent: None,
            shared_bytes: 0,
            tensor_maps: Vec::new(),
            extern_sources: Vec::new(),
            body: Vec::new(),
        };
        Builder { p, origins: 0 }
    }

    fn int(&mut self, value: i64) -> ExprId {
        self.p.exprs.int(value)
    }

    fn tx(&mut self) -> ExprId {
        self.p.exprs.var_expr(self.p.thread)
    }

    /// `bx * threads + tx`.
    fn global_thread(&mut self) -> ExprId {
        let bx = self.p.exprs.var_expr(self.p.block_index[0]);
        let width = self.int(self.p.block[0]);
        let base = self.p.exprs.mul(bx, width);
        let tx = self.tx();
        self.p.exprs.add(base, tx)
    }

    fn scalar(&mut self, name: &str) -> ExprId {
        let var: VarId = self.p.exprs.var(name, None);
        self.p.scalars.push(ScalarParam {
            name: name.to_owned(),
            var,
        });
        self.p.exprs.var_expr(var)
    }

    fn param(
        &mut self,
        name: &str,
        dtype: DType,
        shape: Vec<ExprId>,
        access: ParamAccess,
    ) -> BufferId {
        let mut elements = self.int(1);
        for &extent in &shape {
            elements = self.p.exprs.mul(elements, extent);
        }
        let param = self.p.params.len();
        let memory = MemoryKind::Global { param };
        let buffer = self.p.add_buffer(BufferDecl {
            name: name.to_owned(),
            dtype,
            memory,
            shape,
            elements,
            strides: None,
        });
        self.p.params.push(TensorParam {
            name: name.to_owned(),
            buffer,
            access,
        });
        buffer
    }

    /// A shared buffer placed after the ones declared so far, at a 16-byte boundary.
    fn shared(&mut self, name: &str, dtype: DType, elements: i64) -> BufferId {
        let offset = (self.p.shared_bytes + 15) / 16 * 16;
        self.p.shared_bytes =
            offset + elements * i64::try_from(dtype.bytes()).expect("a few bytes");
        self.shared_at(name, dtype, elements, offset)
    }

    fn shared_at(&mut self, name: &str, dtype: DType, elements: i64, offset: i64) -> BufferId {
        let count = self.int(elements);
        let memory = MemoryKind::Shared { offset };
        self.p.add_buffer(BufferDecl {
            name: name.to_owned(),
            dtype,
            memory,
            shape: vec![count],
            elements: count,
            strides: None,
        })
    }

    fn local(&mut self, name: &str, dtype: DType, elements: i64) -> BufferId {
        let count = self.int(elements);
        let memory = MemoryKind::Local;
        self.p.add_buffer(BufferDecl {
            name: name.to_owned(),
            dtype,
            memory,
            shape: vec![count],
            elements: count,
            strides: None,
        })
    }

    fn value(&mut self, value: Value) -> ValueId {
        self.p.add_value(value)
    }

    fn load(&mut self, buffer: BufferId, index: ExprId) -> ValueId {
        self.value(Value::Load { buffer, index })
    }

    fn f32(&mut self, x: f64) -> ValueId {
        self.value(Value::Float {
            bits: x.to_bits(),
            dtype: DType::Float32,
        })
    }

    fn binary(&mut self, op: BinaryOp, lhs: ValueId, rhs: ValueId, dtype: DType) -> ValueId {
        self.value(Value::Binary {
            op,
            lhs,
            rhs,
            dtype,
        })
    }

    /// `a <op> b` on two indices.
    fn compare(&mut self, op: CompareOp, a: ExprId, b: ExprId) -> ValueId {
        let lhs = self.value(Value::Index(a));
        let rhs = self.value(Value::Index(b));
        self.value(Value::Compare { op, lhs, rhs })
    }

    /// A statement block with a fresh origin.
    fn block(&mut self, label: &str, body: Vec<Stmt>) -> Stmt {
        self.origins += 1;
        Stmt::Block {
            origin: Some(EntityId::from_index(self.origins)),
            label: label.to_owned(),
            body,
        }
    }

    fn finish(mut self, body: Vec<Stmt>) -> ThreadProgram {
        self.p.body = body;
        self.p
    }
}

fn store(buffer: BufferId, index: ExprId, value: ValueId) -> Stmt {
    Stmt::Store {
        place: Place { buffer, index },
        value,
    }
}

fn when(cond: ValueId, then: Vec<Stmt>) -> Stmt {
    Stmt::If {
        cond,
        then,
        otherwise: Vec::new(),
    }
}

fn err(result: Result<super::EmulatorReport, EmulatorError>) -> EmulatorError {
    match result {
        Ok(report) => panic!("expected an error, the program ran: {report}"),
        Err(error) => error,
    }
}

/// `C[i] = A[i] + B[i]` for `i = bx * 64 + tx < n`, over `ceildiv(n, 64)` blocks; `guard` adds the
/// bounds check and `constant` stores 1.0 instead of the sum.
fn elementwise(guard: bool, constant: bool) -> ThreadProgram {
    let mut b = Builder::new(64);
    let n = b.scalar("n");
    let a = b.param("A", DType::Float32, vec![n], ParamAccess::Read);
    let bb = b.param("B", DType::Float32, vec![n], ParamAccess::Read);
    let c = b.param("C", DType::Float32, vec![n], ParamAccess::Write);
    let width = b.int(64);
    b.p.grid[0] = b.p.exprs.ceildiv(n, width);
    let i = b.global_thread();
    let value = if constant {
        b.f32(1.0)
    } else {
        let (x, y) = (b.load(a, i), b.load(bb, i));
        b.binary(BinaryOp::Add, x, y, DType::Float32)
    };
    let mut body = vec![store(c, i, value)];
    if guard {
        let inside = b.compare(CompareOp::Lt, i, n);
        body = vec![when(inside, body)];
    }
    let stmt = b.block("C[i] = A[i] + B[i]", body);
    b.finish(vec![stmt])
}

fn elementwise_tensors(n: usize) -> Vec<HostTensor> {
    vec![
        HostTensor::random(DType::Float32, &[n], 1),
        HostTensor::random(DType::Float32, &[n], 2),
        HostTensor::zeros(DType::Float32, &[n]),
    ]
}

#[test]
fn elementwise_add_with_a_bounds_guard() {
    let program = elementwise(true, false);
    let mut tensors = elementwise_tensors(100);
    let report = run_program(&program, &mut tensors, &[100]).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(report.blocks, 2);
    assert_eq!(report.global_stores, 100);
    for k in 0..100 {
        let expected = round_to(DType::Float32, tensors[0].values[k] + tensors[1].values[k]);
        assert_eq!(tensors[2].values[k], expected, "element {k}");
    }
}

#[test]
fn out_of_bounds_store_names_buffer_index_and_thread() {
    let program = elementwise(false, true);
    let mut tensors = elementwise_tensors(100);
    let error = err(run_program(&program, &mut tensors, &[100]));
    assert_eq!(
        error.kind,
        ErrorKind::OutOfBounds {
            buffer: "C".to_owned(),
            index: 100,
            elements: 100
        }
    );
    assert_eq!(error.block, Some([1, 0, 0]));
    assert_eq!(error.thread, Some(36));
    assert_eq!(error.label.as_deref(), Some("C[i] = A[i] + B[i]"));
    assert_eq!(error.origin, Some(EntityId::from_index(1)));
    let message = error.to_string();
    assert!(
        message.contains("`C[100]`") && message.contains("thread 36"),
        "{message}"
    );
}

#[test]
fn arguments_are_checked_against_the_declarations() {
    let program = elementwise(true, false);
    let mut tensors = elementwise_tensors(100);
    let error = err(run_program(&program, &mut tensors, &[99]));
    assert!(
        matches!(&error.kind, ErrorKind::BadArgument { name, .. } if name == "A"),
        "{error}"
    );
    tensors[1] = HostTensor::zeros(DType::Float16, &[100]);
    let error = err(run_program(&program, &mut tensors, &[100]));
    assert!(
        matches!(&error.kind, ErrorKind::BadArgument { name, .. } if name == "B"),
        "{error}"
    );
    assert!(run_program(&program, &mut tensors, &[]).is_err());
}

#[test]
fn partly_unwritten_output_is_reported() {
    let mut b = Builder::new(64);
    let (rows, cols) = (b.int(4), b.int(25));
    let c = b.param("C", DType::Float32, vec![rows, cols], ParamAccess::Write);
    b.p.grid[0] = b.int(2);
    let i = b.global_thread();
    let limit = b.int(90);
    let inside = b.compare(CompareOp::Lt, i, limit);
    let one = b.f32(1.0);
    let program = b.finish(vec![when(inside, vec![store(c, i, one)])]);
    let mut tensors = vec![HostTensor::zeros(DType::Float32, &[4, 25])];
    let error = err(run_program(&program, &mut tensors, &[]));
    assert_eq!(
        error.kind,
        ErrorKind::Unwritten {
            param: "C".to_owned(),
            first: vec![3, 15],
            count: 10
        }
    );
    assert!(
        tensors[0].values[95].is_nan(),
        "unwritten float outputs are poisoned"
    );
}

/// A kernel that reads a tensor of indices writes where they say: what it leaves unwritten keeps
/// the caller's values (as on the GPU) and is not an error.
#[test]
fn outputs_of_a_kernel_that_reads_indices_keep_what_it_does_not_write() {
    let mut b = Builder::new(4);
    let four = b.int(4);
    let one = b.int(1);
    let lengths = b.param("Lengths", DType::Int32, vec![one], ParamAccess::Read);
    let c = b.param("C", DType::Float32, vec![four], ParamAccess::Write);
    let tx = b.tx();
    let zero = b.int(0);
    let length = b.load(lengths, zero);
    let index = b.value(Value::Index(tx));
    let inside = b.value(Value::Compare {
        op: CompareOp::Lt,
        lhs: index,
        rhs: length,
    });
    let two = b.f32(2.0);
    let program = b.finish(vec![when(inside, vec![store(c, tx, two)])]);
    let mut tensors = vec![
        HostTensor::zeros(DType::Int32, &[1]),
        HostTensor::zeros(DType::Float32, &[4]),
    ];
    tensors[0].values[0] = 3.0;
    tensors[1].values[3] = 7.0;
    if let Err(error) = run_program(&program, &mut tensors, &[]) {
        panic!("{error}");
    }
    assert_eq!(tensors[1].values, vec![2.0, 2.0, 2.0, 7.0]);
}

/// Sums 64 values: butterfly shuffles within each warp, then the two warp sums through shared
/// memory, with or without the barrier between.
fn block_sum(barrier: bool) -> ThreadProgram {
    let mut b = Builder::new(64);
    let sixty_four = b.int(64);
    let one = b.int(1);
    let a = b.param("A", DType::Float32, vec![sixty_four], ParamAccess::Read);
    let out = b.param("Out", DType::Float32, vec![one], ParamAccess::Write);
    let partial = b.shared("partial", DType::Float32, 2);
    let acc = b.local("acc", DType::Float32, 1);
    let (zero, tx) = (b.int(0), b.tx());
    let x = b.load(a, tx);
    let mut warp = vec![store(acc, zero, x)];
    for mask in [16, 8, 4, 2, 1] {
        let mine = b.load(acc, zero);
        let theirs = b.value(Value::ShuffleXor {
            value: mine,
            mask,
            dtype: DType::Float32,
        });
        let sum = b.binary(BinaryOp::Add, mine, theirs, DType::Float32);
        warp.push(store(acc, zero, sum));
    }
    let warp_size = b.int(32);
    let lane = b.p.exprs.floormod(tx, warp_size);
    let warp_index = b.p.exprs.floordiv(tx, warp_size);
    let first_lane = b.compare(CompareOp::Eq, lane, zero);
    let total = b.load(acc, zero);
    warp.push(when(first_lane, vec![store(partial, warp_index, total)]));
    let warp_stmt = b.block("warp reduce", warp);
    let mut body = vec![warp_stmt];
    if barrier {
        body.push(Stmt::Barrier);
    }
    let first_thread = b.compare(CompareOp::Eq, tx, zero);
    let (s0, s1) = (b.load(partial, zero), b.load(partial, one));
    let sum = b.binary(BinaryOp::Add, s0, s1, DType::Float32);
    let final_stmt = b.block(
        "block reduce",
        vec![when(first_thread, vec![store(out, zero, sum)])],
    );
    body.push(final_stmt);
    b.finish(body)
}

/// The butterfly sum of one warp's 32 values in f32, as lane 0 computes it.
fn warp_sum(values: &[f64]) -> f64 {
    let mut lanes = values.to_vec();
    for mask in [16, 8, 4, 2, 1] {
        lanes = (0..32)
            .map(|l| round_to(DType::Float32, lanes[l] + lanes[l ^ mask]))
            .collect();
    }
    lanes[0]
}

#[test]
fn block_sum_with_shuffles_and_a_barrier_is_exact() {
    let program = block_sum(true);
    let mut tensors = vec![
        HostTensor::random(DType::Float32, &[64], 5),
        HostTensor::zeros(DType::Float32, &[1]),
    ];
    let report = run_program(&program, &mut tensors, &[]).unwrap_or_else(|e| panic!("{e}"));
    let values = &tensors[0].values;
    let expected = round_to(
        DType::Float32,
        warp_sum(&values[..32]) + warp_sum(&values[32..]),
    );
    assert_eq!(tensors[1].values[0], expected);
    assert_eq!(report.barriers, 1);
    assert_eq!(report.shared_stores, 2);
}

#[test]
fn block_sum_without_the_barrier_is_a_race() {
    let program = block_sum(false);
    let mut tensors = vec![
        HostTensor::random(DType::Float32, &[64], 5),
        HostTensor::zeros(DType::Float32, &[1]),
    ];
    let error = err(run_program(&program, &mut tensors, &[]));
    let expected = ErrorKind::Race {
        buffer: "partial".to_owned(),
        index: 1,
        kind: RaceKind::ReadAfterWrite,
        first: 32,
        second: 0,
    };
    assert_eq!(error.kind, expected);
    assert_eq!(error.label.as_deref(), Some("block reduce"));
    let message = error.to_string();
    assert!(
        message.contains("thread 32") && message.contains("thread 0"),
        "{message}"
    );
}

#[test]
fn storing_into_float16_rounds() {
    let mut b = Builder::new(1);
    let two = b.int(2);
    let out = b.param("Out", DType::Float16, vec![two], ParamAccess::Write);
    let (zero, one) = (b.int(0), b.int(1));
    let x = b.f32(1.0 + 1.0 / 4096.0);
    let tiny = b.value(Value::Float {
        bits: (1.0f64 / 4096.0).to_bits(),
        dtype: DType::Float16,
    });
    let h_one = b.value(Value::Float {
        bits: 1.0f64.to_bits(),
        dtype: DType::Float16,
    });
    let sum = b.binary(BinaryOp::Add, h_one, tiny, DType::Float16);
    let program = b.finish(vec![store(out, zero, x), store(out, one, sum)]);
    let mut tensors = vec![HostTensor::zeros(DType::Float16, &[2])];
    run_program(&program, &mut tensors, &[]).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(tensors[0].values, vec![1.0, 1.0]);
}

/// A float32 sum or difference of a float32 product rounds once, as CUDA's `fmaf` (what the printer
/// emits for it) does. With `x = 1 + 2^-12`, `x × x = 1 + 2^-11 + 2^-24` rounds to `1 + 2^-11`
/// alone, so the unfused `x × x - (1 + 2^-11)` would be 0; fused it is exactly `2^-24`. A product
/// subtracted from the addend (`c - x × x`) and a product added on the right (`c + x × x`) fuse
/// too; a product used elsewhere keeps its own rounding.
#[test]
fn float32_multiply_add_rounds_once() {
    let mut b = Builder::new(1);
    let four = b.int(4);
    let out = b.param("Out", DType::Float32, vec![four], ParamAccess::Write);
    let index: Vec<ExprId> = (0..4).map(|k| b.int(k)).collect();
    let x = b.f32(1.0 + 1.0 / 4096.0);
    let rounded_square = b.f32(1.0 + 1.0 / 2048.0);
    let square = b.binary(BinaryOp::Mul, x, x, DType::Float32);
    let difference = b.binary(BinaryOp::Sub, square, rounded_square, DType::Float32);
    let negated = b.binary(BinaryOp::Sub, rounded_square, square, DType::Float32);
    let minus = b.f32(-(1.0 + 1.0 / 2048.0));
    let sum = b.binary(BinaryOp::Add, minus, square, DType::Float32);
    let program = b.finish(vec![
        store(out, index[0], difference),
        store(out, index[1], negated),
        store(out, index[2], sum),
        store(out, index[3], square),
    ]);
    let mut tensors = vec![HostTensor::zeros(DType::Float32, &[4])];
    run_program(&program, &mut tensors, &[]).unwrap_or_else(|e| panic!("{e}"));
    let tiny = 2f64.powi(-24);
    assert_eq!(
        tensors[0].values,
        vec![tiny, -tiny, tiny, 1.0 + 1.0 / 2048.0]
    );
}

#[test]
fn barrier_under_a_thread_dependent_if_is_an_error() {
    let mut b = Builder::new(64);
    let (tx, half) = (b.tx(), b.int(32));
    let low = b.compare(CompareOp::Lt, tx, half);
    let stmt = b.block("divergent", vec![when(low, vec![Stmt::Barrier])]);
    let program = b.finish(vec![stmt]);
    let error = err(run_program(&program, &mut [], &[]));
    assert_eq!(
        error.kind,
        ErrorKind::DivergentBarrier {
            active: 32,
            threads: 64
        }
    );
    assert!(error.to_string().contains("barrier in divergent code"));
}

/// `S[4t..4t+4] = A[4t..4t+4]`, barrier, `C[4t..4t+4] = S[4u..4u+4]` with `u = (t + 1) % 64`;
/// `misalign` shifts the first source index by two elements.
fn vector_copy(misalign: bool, barrier: bool) -> ThreadProgram {
    let mut b = Builder::new(64);
    let n = b.int(256);
    let a = b.param("A", DType::Float32, vec![n], ParamAccess::Read);
    let c = b.param("C", DType::Float32, vec![n], ParamAccess::Write);
    let s = b.shared("S", DType::Float32, 256);
    let (tx, four, one, sixty_four) = (b.tx(), b.int(4), b.int(1), b.int(64));
    let mine = b.p.exprs.mul(tx, four);
    let source = if misalign {
        let two = b.int(2);
        b.p.exprs.add(mine, two)
    } else {
        mine
    };
    let next = b.p.exprs.add(tx, one);
    let next = b.p.exprs.floormod(next, sixty_four);
    let theirs = b.p.exprs.mul(next, four);
    let mut body = vec![Stmt::VectorCopy {
        dst: Place {
            buffer: s,
            index: mine,
        },
        src: Place {
            buffer: a,
            index: source,
        },
        lanes: 4,
    }];
    if barrier {
        body.push(Stmt::Barrier);
    }
    body.push(Stmt::VectorCopy {
        dst: Place {
            buffer: c,
            index: mine,
        },
        src: Place {
            buffer: s,
            index: theirs,
        },
        lanes: 4,
    });
    let stmt = b.block("copy", body);
    b.finish(vec![stmt])
}

#[test]
fn vector_copies_move_four_lanes() {
    let program = vector_copy(false, true);
    let mut tensors = vec![
        HostTensor::random(DType::Float32, &[256], 9),
        HostTensor::zeros(DType::Float32, &[256]),
    ];
    run_program(&program, &mut tensors, &[]).unwrap_or_else(|e| panic!("{e}"));
    for t in 0..64 {
        for l in 0..4 {
            assert_eq!(
                tensors[1].values[4 * t + l],
                tensors[0].values[4 * ((t + 1) % 64) + l]
            );
        }
    }
}

#[test]
fn misaligned_or_unsynchronised_vector_copies_are_errors() {
    let tensors = || {
        vec![
            HostTensor::random(DType::Float32, &[256], 9),
            HostTensor::zeros(DType::Float32, &[256]),
        ]
    };
    let error = err(run_program(&vector_copy(true, true), &mut tensors(), &[]));
    assert_eq!(
        error.kind,
        ErrorKind::Misaligned {
            buffer: "A".to_owned(),
            index: 2,
            lanes: 4
        }
    );
    assert_eq!(error.thread, Some(0));
    let error = err(run_program(&vector_copy(false, false), &mut tensors(), &[]));
    assert!(
        matches!(
            error.kind,
            ErrorKind::Race {
                first: 1,
                second: 0,
                ..
            }
        ),
        "{error}"
    );
}

#[test]
fn select_evaluates_only_the_picked_side() {
    let mut b = Builder::new(64);
    let (n, padded) = (b.int(100), b.int(128));
    let a = b.param("A", DType::Float32, vec![n], ParamAccess::Read);
    let c = b.param("C", DType::Float32, vec![padded], ParamAccess::Write);
    b.p.grid[0] = b.int(2);
    let i = b.global_thread();
    let inside = b.compare(CompareOp::Lt, i, n);
    let (x, zero) = (b.load(a, i), b.f32(0.0));
    let picked = b.value(Value::Select {
        cond: inside,
        then: x,
        otherwise: zero,
        dtype: DType::Float32,
    });
    let program = b.finish(vec![store(c, i, picked)]);
    let mut tensors = vec![
        HostTensor::random(DType::Float32, &[100], 3),
        HostTensor::zeros(DType::Float32, &[128]),
    ];
    run_program(&program, &mut tensors, &[]).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(tensors[1].values[..100], tensors[0].values[..]);
    assert!(tensors[1].values[100..].iter().all(|&v| v == 0.0));
}

#[test]
fn shuffle_from_an_inactive_lane_is_an_error() {
    let mut b = Builder::new(32);
    let n = b.int(32);
    let a = b.param("A", DType::Float32, vec![n], ParamAccess::Read);
    let c = b.param("C", DType::Float32, vec![n], ParamAccess::ReadWrite);
    let (tx, sixteen) = (b.tx(), b.int(16));
    let low = b.compare(CompareOp::Lt, tx, sixteen);
    let x = b.load(a, tx);
    let theirs = b.value(Value::ShuffleXor {
        value: x,
        mask: 16,
        dtype: DType::Float32,
    });
    let program = b.finish(vec![when(low, vec![store(c, tx, theirs)])]);
    let mut tensors = vec![
        HostTensor::random(DType::Float32, &[32], 3),
        HostTensor::zeros(DType::Float32, &[32]),
    ];
    let error = err(run_program(&program, &mut tensors, &[]));
    assert_eq!(
        error.kind,
        ErrorKind::ShuffleInactiveLane {
            partner: 16,
            mask: 16
        }
    );
    assert_eq!(error.thread, Some(0));
}

#[test]
fn loops_lets_and_per_thread_extents() {
    // for k in 0..4: let j = tx * 4 + k; C[j] = j (as float)
    let mut b = Builder::new(8);
    let n = b.int(32);
    let c = b.param("C", DType::Float32, vec![n], ParamAccess::Write);
    let (tx, four) = (b.tx(), b.int(4));
    let k = b.p.exprs.var("k", Some(4));
    let j = b.p.exprs.var("j", None);
    let (k_expr, j_expr) = (b.p.exprs.var_expr(k), b.p.exprs.var_expr(j));
    let base = b.p.exprs.mul(tx, four);
    let value = b.p.exprs.add(base, k_expr);
    let index = b.value(Value::Index(j_expr));
    let as_float = b.value(Value::Cast {
        dtype: DType::Float32,
        value: index,
    });
    let body = vec![Stmt::Let { var: j, value }, store(c, j_expr, as_float)];
    let program = b.finish(vec![Stmt::For {
        var: k,
        extent: four,
        unroll: false,
        body,
    }]);
    let mut tensors = vec![HostTensor::zeros(DType::Float32, &[32])];
    run_program(&program, &mut tensors, &[]).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        tensors[0].values,
        (0..32).map(f64::from).collect::<Vec<_>>()
    );

    // With an extent of `tx % 5`, thread t runs its own t % 5 iterations (a grid-stride loop's
    // shape): the elements past them stay as they were (so `C` is read and written).
    let mut program = program;
    program.params[0].access = ParamAccess::ReadWrite;
    let five = program.exprs.int(5);
    let per_thread = program.exprs.floormod(tx, five);
    if let Some(Stmt::For { extent, .. }) = program.body.first_mut() {
        *extent = per_thread;
    }
    let mut tensors = vec![HostTensor::zeros(DType::Float32, &[32])];
    run_program(&program, &mut tensors, &[]).unwrap_or_else(|e| panic!("{e}"));
    let expected: Vec<f64> = (0..32)
        .map(|j: i32| {
            if j % 4 < (j / 4) % 5 {
                f64::from(j)
            } else {
                0.0
            }
        })
        .collect();
    assert_eq!(tensors[0].values, expected);
}

#[test]
fn uninitialised_shared_and_poisoned_output_reads() {
    let mut b = Builder::new(4);
    let n = b.int(4);
    let c = b.param("C", DType::Float32, vec![n], ParamAccess::Write);
    let s = b.shared("S", DType::Float32, 4);
    let tx = b.tx();
    let x = b.load(s, tx);
    let program = b.finish(vec![store(c, tx, x)]);
    let mut tensors = vec![HostTensor::zeros(DType::Float32, &[4])];
    let error = err(run_program(&program, &mut tensors, &[]));
    assert_eq!(
        error.kind,
        ErrorKind::UninitializedShared {
            buffer: "S".to_owned(),
            index: 0
        }
    );

    let mut b = Builder::new(4);
    let n = b.int(4);
    let c = b.param("C", DType::Float32, vec![n], ParamAccess::Write);
    let tx = b.tx();
    let x = b.load(c, tx);
    let program = b.finish(vec![store(c, tx, x)]);
    let error = err(run_program(&program, &mut tensors, &[]));
    assert_eq!(
        error.kind,
        ErrorKind::PoisonedRead {
            buffer: "C".to_owned(),
            index: 0
        }
    );
}

#[test]
fn shared_bytes_reused_by_another_buffer_after_a_barrier() {
    // `S` (float32 × 4) and `H` (float16 × 8) share the same 16 bytes: S is written and read, then,
    // after a barrier, H is written and read. Reading S afterwards reads bytes written through H.
    let mut b = Builder::new(4);
    let (n, eight) = (b.int(4), b.int(8));
    let a = b.param("A", DType::Float32, vec![n], ParamAccess::Read);
    let c = b.param("C", DType::Float32, vec![n], ParamAccess::Write);
    let h_out = b.param("D", DType::Float16, vec![eight], ParamAccess::Write);
    b.p.shared_bytes = 16;
    let s = b.shared_at("S", DType::Float32, 4, 0);
    let h = b.shared_at("H", DType::Float16, 8, 0);
    let (tx, two, one) = (b.tx(), b.int(2), b.int(1));
    let x = b.load(a, tx);
    let from_s = b.load(s, tx);
    let even = b.p.exprs.mul(tx, two);
    let odd = b.p.exprs.add(even, one);
    let half = b.value(Value::Cast {
        dtype: DType::Float16,
        value: x,
    });
    let (h_even, h_odd) = (b.load(h, even), b.load(h, odd));
    let body = vec![
        store(s, tx, x),
        store(c, tx, from_s),
        Stmt::Barrier,
        store(h, even, half),
        store(h, odd, half),
        store(h_out, even, h_even),
        store(h_out, odd, h_odd),
    ];
    let program = b.finish(body.clone());
    let mut tensors = vec![
        HostTensor::random(DType::Float32, &[4], 4),
        HostTensor::zeros(DType::Float32, &[4]),
        HostTensor::zeros(DType::Float16, &[8]),
    ];
    run_program(&program, &mut tensors, &[]).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(tensors[1].values, tensors[0].values);

    let mut b2 = Builder {
        p: program,
        origins: 0,
    };
    let stale = b2.load(s, tx);
    let mut body = body;
    body.push(Stmt::Barrier);
    body.push(store(c, tx, stale));
    let program = b2.finish(body);
    let error = err(run_program(&program, &mut tensors, &[]));
    assert_eq!(
        error.kind,
        ErrorKind::SharedAlias {
            buffer: "S".to_owned(),
            index: 0,
            other: "H".to_owned()
        }
    );
}

#[test]
fn malformed_programs_are_errors_not_panics() {
    let mut program = elementwise(true, false);
    let forward = ValueId(u32::try_from(program.values.len()).expect("a small program") + 5);
    program.values.push(Value::Cast {
        dtype: DType::Float32,
        value: forward,
    });
    let error = err(run_program(&program, &mut elementwise_tensors(100), &[100]));
    assert!(matches!(error.kind, ErrorKind::Malformed(_)), "{error}");

    let mut program = elementwise(true, false);
    program.body.push(Stmt::Store {
        place: Place {
            buffer: BufferId(99),
            index: program.grid[0],
        },
        value: ValueId(0),
    });
    let error = err(run_program(&program, &mut elementwise_tensors(100), &[100]));
    assert!(matches!(error.kind, ErrorKind::Malformed(_)), "{error}");
}

#[test]
fn a_large_elementwise_grid_runs() {
    let program = elementwise(true, false);
    let n = 256 * 256;
    let mut tensors = elementwise_tensors(n);
    let start = std::time::Instant::now();
    let report = run_program(&program, &mut tensors, &[int(n)]).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(report.blocks, 1024);
    eprintln!("{report} in {:?}", start.elapsed());
}

/// A tiled GEMM `C = A × B` of `size × size` float32 matrices: 64 × 64 tiles of C per block of 128
/// threads, K in steps of 32 through shared memory, 32 register accumulators per thread.
fn gemm(size: i64) -> ThreadProgram {
    let mut b = Builder::new(128);
    let n = b.int(size);
    let a = b.param("A", DType::Float32, vec![n, n], ParamAccess::Read);
    let bm = b.param("B", DType::Float32, vec![n, n], ParamAccess::Read);
    let c = b.param("C", DType::Float32, vec![n, n], ParamAccess::Write);
    let a_s = b.shared("As", DType::Float32, 64 * 32);
    let b_s = b.shared("Bs", DType::Float32, 32 * 64);
    let acc = b.local("acc", DType::Float32, 32);
    b.p.grid = [b.int(size / 64), b.int(size / 64), b.int(1)];
    let (tx, bx, by) = (b.tx(), b.p.block_index[0], b.p.block_index[1]);
    let e = &mut b.p.exprs;
    let (bx, by) = (e.var_expr(bx), e.var_expr(by));
    let (ko, ki, r, el) = (
        e.var("ko", None),
        e.var("ki", Some(32)),
        e.var("r", Some(32)),
        e.var("e", Some(16)),
    );
    let (ko_e, ki_e, r_e, el_e) = (
        e.var_expr(ko),
        e.var_expr(ki),
        e.var_expr(r),
        e.var_expr(el),
    );
    let (c16, c32, c64, c128) = (e.int(16), e.int(32), e.int(64), e.int(128));
    // Tile loads: element `idx = e * 128 + tx` of the 64 × 32 A tile and of the 32 × 64 B tile.
    let idx = e.mul(el_e, c128);
    let idx = e.add(idx, tx);
    let (by64, bx64, ko32) = (e.mul(by, c64), e.mul(bx, c64), e.mul(ko_e, c32));
    let (row_a, col_a) = (e.floordiv(idx, c32), e.floormod(idx, c32));
    let row_a = e.add(by64, row_a);
    let row_a = e.mul(row_a, n);
    let col_a = e.add(ko32, col_a);
    let global_a = e.add(row_a, col_a);
    let (row_b, col_b) = (e.floordiv(idx, c64), e.floormod(idx, c64));
    let row_b = e.add(ko32, row_b);
    let row_b = e.mul(row_b, n);
    let col_b = e.add(bx64, col_b);
    let global_b = e.add(row_b, col_b);
    // Accumulator `r` of a thread is element `r * 128 + tx` of the 64 × 64 C tile.
    let element = e.mul(r_e, c128);
    let element = e.add(element, tx);
    let (row, col) = (e.floordiv(element, c64), e.floormod(element, c64));
    let row32 = e.mul(row, c32);
    let a_index = e.add(row32, ki_e);
    let ki64 = e.mul(ki_e, c64);
    let b_index = e.add(ki64, col);
    let row_c = e.add(by64, row);
    let row_c = e.mul(row_c, n);
    let col_c = e.add(bx64, col);
    let global_c = e.add(row_c, col_c);
    let k_steps = e.int(size / 32);
    let zero = b.f32(0.0);
    let init = Stmt::For {
        var: r,
        extent: c32,
        unroll: true,
        body: vec![store(acc, r_e, zero)],
    };
    let (from_a, from_b) = (b.load(a, global_a), b.load(bm, global_b));
    let tile_loads = vec![store(a_s, idx, from_a), store(b_s, idx, from_b)];
    let loads = Stmt::For {
        var: el,
        extent: c16,
        unroll: true,
        body: tile_loads,
    };
    let (x, y, old) = (b.load(a_s, a_index), b.load(b_s, b_index), b.load(acc, r_e));
    let product = b.binary(BinaryOp::Mul, x, y, DType::Float32);
    let sum = b.binary(BinaryOp::Add, old, product, DType::Float32);
    let accumulate = Stmt::For {
        var: r,
        extent: c32,
        unroll: true,
        body: vec![store(acc, r_e, sum)],
    };
    let mac = Stmt::For {
        var: ki,
        extent: c32,
        unroll: false,
        body: vec![accumulate],
    };
    let body = vec![loads, Stmt::Barrier, mac, Stmt::Barrier];
    let main = Stmt::For {
        var: ko,
        extent: k_steps,
        unroll: false,
        body,
    };
    let result = b.load(acc, r_e);
    let write = Stmt::For {
        var: r,
        extent: c32,
        unroll: true,
        body: vec![store(c, global_c, result)],
    };
    let stmt = b.block("gemm", vec![init, main, write]);
    b.finish(vec![stmt])
}

/// Each step `acc + a × b` is one float32 fused multiply-add (`FusedMultiplyAdd`), so the
/// reference folds `fmaf`s in k order.
#[test]
fn tiled_gemm_matches_sequential_float32_multiply_adds() {
    let size = 128;
    let program = gemm(int(size));
    let mut tensors = vec![
        HostTensor::random(DType::Float32, &[size, size], 1),
        HostTensor::random(DType::Float32, &[size, size], 2),
        HostTensor::zeros(DType::Float32, &[size, size]),
    ];
    let report = run_program(&program, &mut tensors, &[]).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!((report.blocks, report.barriers), (4, 4 * 8));
    for i in 0..size {
        for j in 0..size {
            let (a, b) = (&tensors[0].values, &tensors[1].values);
            let sum = (0..size).fold(0.0f32, |s, k| {
                f32_of(a[i * size + k]).mul_add(f32_of(b[k * size + j]), s)
            });
            let sum = f64::from(sum);
            assert_eq!(tensors[2].values[i * size + j], sum, "C[{i}, {j}]");
        }
    }
}

/// A run past its time budget stops with `OutOfTime` (whose message says it is not an error in
/// the program), and the same run with time to spare finishes.
#[test]
fn a_run_past_its_budget_stops_and_one_within_it_finishes() {
    let size = 128;
    let program = gemm(int(size));
    let tensors = || {
        vec![
            HostTensor::random(DType::Float32, &[size, size], 1),
            HostTensor::random(DType::Float32, &[size, size], 2),
            HostTensor::zeros(DType::Float32, &[size, size]),
        ]
    };
    let budget = std::time::Duration::ZERO;
    let error = err(run_program_within(
        &program,
        &mut tensors(),
        &[],
        Some(budget),
    ));
    assert_eq!(error.kind, ErrorKind::OutOfTime { budget }, "{error}");
    assert!(
        error.to_string().contains("time budget of 0.0 s"),
        "{error}"
    );
    let budget = Some(std::time::Duration::from_secs(600));
    let report = run_program_within(&program, &mut tensors(), &[], budget);
    assert_eq!(report.map(|r| r.blocks), Ok(4));
}

#[test]
fn deep_value_chains_are_refused_not_overflowing() {
    for (depth, ok) in [(1000, true), (5000, false)] {
        let mut b = Builder::new(32);
        let n = b.int(32);
        let c = b.param("C", DType::Float32, vec![n], ParamAccess::Write);
        let mut value = b.f32(1.0);
        for _ in 0..depth {
            value = b.value(Value::Unary {
                op: tilec_ir::thread::UnaryOp::Neg,
                arg: value,
                dtype: DType::Float32,
            });
        }
        let tx = b.tx();
        let program = b.finish(vec![store(c, tx, value)]);
        let mut tensors = vec![HostTensor::zeros(DType::Float32, &[32])];
        let result = run_program(&program, &mut tensors, &[]);
        assert_eq!(result.is_ok(), ok, "{depth}: {result:?}");
    }
}

#[test]
fn atomics_accumulate_in_global_and_shared_memory() {
    let mut b = Builder::new(64);
    let two = b.int(2);
    let out = b.param("Out", DType::Float32, vec![two], ParamAccess::ReadWrite);
    let s = b.shared("S", DType::Float32, 1);
    b.p.grid[0] = b.int(2);
    let (tx, zero, one) = (b.tx(), b.int(0), b.int(1));
    let first = b.compare(CompareOp::Eq, tx, zero);
    let (unit, ten) = (b.f32(1.0), b.f32(10.0));
    let total = b.load(s, zero);
    let atomic = |buffer, index| Stmt::Atomic {
        op: tilec_ir::thread::AtomicOp::Add,
        place: Place { buffer, index },
        value: unit,
        old: None,
    };
    let body = vec![
        atomic(out, zero),
        when(first, vec![store(s, zero, ten)]),
        Stmt::Barrier,
        atomic(s, zero),
        Stmt::Barrier,
        when(first, vec![store(out, one, total)]),
    ];
    let program = b.finish(body);
    let mut tensors = vec![HostTensor::zeros(DType::Float32, &[2])];
    let report = run_program(&program, &mut tensors, &[]).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(tensors[0].values, vec![128.0, 74.0]);
    assert_eq!(report.atomics, 256);
}

#[test]
fn races_between_overlapping_shared_buffers_are_found() {
    // `S` (float32 × 4) and `H` (float16 × 8) share 16 bytes. Thread t reads S[t], then, with no
    // barrier, writes H[2 (t + 1) % 8], the low half of S[(t + 1) % 4], which thread t + 1 read.
    let mut b = Builder::new(4);
    let n = b.int(4);
    let a = b.param("A", DType::Float32, vec![n], ParamAccess::Read);
    let c = b.param("C", DType::Float32, vec![n], ParamAccess::Write);
    b.p.shared_bytes = 16;
    let s = b.shared_at("S", DType::Float32, 4, 0);
    let h = b.shared_at("H", DType::Float16, 8, 0);
    let (tx, one, two, eight) = (b.tx(), b.int(1), b.int(2), b.int(8));
    let next = b.p.exprs.add(tx, one);
    let next = b.p.exprs.mul(next, two);
    let next = b.p.exprs.floormod(next, eight);
    let (x, from_s) = (b.load(a, tx), b.load(s, tx));
    let half = b.value(Value::Cast {
        dtype: DType::Float16,
        value: x,
    });
    let body = vec![
        store(s, tx, x),
        Stmt::Barrier,
        store(c, tx, from_s),
        store(h, next, half),
    ];
    let program = b.finish(body);
    let mut tensors = vec![
        HostTensor::random(DType::Float32, &[4], 4),
        HostTensor::zeros(DType::Float32, &[4]),
    ];
    let error = err(run_program(&program, &mut tensors, &[]));
    let expected = ErrorKind::Race {
        buffer: "H".to_owned(),
        index: 2,
        kind: RaceKind::WriteAfterRead,
        first: 1,
        second: 0,
    };
    assert_eq!(error.kind, expected);
}

#[test]
fn integer_values_follow_c_and_python_semantics() {
    // C[t] = (t - 8) / 3 (truncating) and D[t] = (t - 8) // 3 (floor), as int32 values.
    let mut b = Builder::new(16);
    let n = b.int(16);
    let c = b.param("C", DType::Int32, vec![n], ParamAccess::Write);
    let d = b.param("D", DType::Int32, vec![n], ParamAccess::Write);
    let (tx, eight) = (b.tx(), b.int(8));
    let shifted = b.p.exprs.sub(tx, eight);
    let x = b.value(Value::Index(shifted));
    let three = b.value(Value::Int {
        value: 3,
        dtype: DType::Int32,
    });
    let truncated = b.binary(BinaryOp::Div, x, three, DType::Int32);
    let floored = b.binary(BinaryOp::FloorDiv, x, three, DType::Int32);
    let program = b.finish(vec![store(c, tx, truncated), store(d, tx, floored)]);
    let mut tensors = vec![
        HostTensor::zeros(DType::Int32, &[16]),
        HostTensor::zeros(DType::Int32, &[16]),
    ];
    run_program(&program, &mut tensors, &[]).unwrap_or_else(|e| panic!("{e}"));
    for t in 0..16i32 {
        assert_eq!(tensors[0].values[ix(i64::from(t))], f64::from((t - 8) / 3));
        assert_eq!(
            tensors[1].values[ix(i64::from(t))],
            f64::from((t - 8).div_euclid(3))
        );
    }
}

/// Each thread `cp.async`s four floats into shared memory, then every thread reads its neighbour's:
/// correct only with the commit, the wait and a barrier after the wait.
fn async_copy(wait: bool, barrier: bool) -> ThreadProgram {
    let mut b = Builder::new(64);
    let n = b.int(256);
    let a = b.param("A", DType::Float32, vec![n], ParamAccess::Read);
    let c = b.param("C", DType::Float32, vec![n], ParamAccess::Write);
    let s = b.shared("S", DType::Float32, 256);
    let (tx, four, one, sixty_four) = (b.tx(), b.int(4), b.int(1), b.int(64));
    let mine = b.p.exprs.mul(tx, four);
    let next = b.p.exprs.add(tx, one);
    let next = b.p.exprs.floormod(next, sixty_four);
    let theirs = b.p.exprs.mul(next, four);
    let mut body = vec![
        Stmt::AsyncCopy {
            dst: Place {
                buffer: s,
                index: mine,
            },
            src: Place {
                buffer: a,
                index: mine,
            },
            lanes: 4,
        },
        Stmt::AsyncCommit,
    ];
    if wait {
        body.push(Stmt::AsyncWait { pending: 0 });
    }
    if barrier {
        body.push(Stmt::Barrier);
    }
    body.push(Stmt::VectorCopy {
        dst: Place {
            buffer: c,
            index: mine,
        },
        src: Place {
            buffer: s,
            index: theirs,
        },
        lanes: 4,
    });
    let stmt = b.block("async copy", body);
    b.finish(vec![stmt])
}

#[test]
fn async_copies_land_at_their_wait_and_need_a_barrier() {
    let tensors = || {
        vec![
            HostTensor::random(DType::Float32, &[256], 3),
            HostTensor::zeros(DType::Float32, &[256]),
        ]
    };
    let mut ok = tensors();
    run_program(&async_copy(true, true), &mut ok, &[]).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(ok[1].values[0..4], ok[0].values[4..8]);
    // Without the wait the copy is still in flight when the neighbour reads it.
    let error = err(run_program(&async_copy(false, true), &mut tensors(), &[]));
    assert_eq!(
        error.kind,
        ErrorKind::AsyncInFlight {
            buffer: "S".to_owned(),
            index: 4
        },
        "{error}"
    );
    // Without the barrier the landing (a write by the issuing thread) races with the read.
    let error = err(run_program(&async_copy(true, false), &mut tensors(), &[]));
    assert!(matches!(error.kind, ErrorKind::Race { .. }), "{error}");
}

/// One warp: lane `l` writes the PTX fragment registers of A (16×16), B (16×8) and C (16×8) from
/// row-major global tensors with the ownership of `mma.sync.m16n8k16`, runs one mma and stores D back
/// the same way; `ldmatrix` is exercised by loading A from shared memory instead when `via_ldmatrix`.
fn single_mma(via_ldmatrix: bool) -> ThreadProgram {
    let mut b = Builder::new(32);
    let (n256, n128) = (b.int(256), b.int(128));
    let a = b.param("A", DType::Float16, vec![n256], ParamAccess::Read);
    let bb = b.param("B", DType::Float16, vec![n128], ParamAccess::Read);
    let d = b.param("D", DType::Float32, vec![n128], ParamAccess::Write);
    let s = b.shared("S", DType::Float16, 256);
    let a_regs = b.local("a_frag", DType::Float16, 8);
    let b_regs = b.local("b_frag", DType::Float16, 4);
    let c_regs = b.local("c_frag", DType::Float32, 4);
    let lane = b.tx();
    let (four, two, eight) = (b.int(4), b.int(2), b.int(8));
    let g = b.p.exprs.floordiv(lane, four);
    let t = b.p.exprs.floormod(lane, four);
    let t2 = b.p.exprs.mul(t, two);
    let mut body = Vec::new();
    let at = |b: &mut Builder, row: ExprId, row_add: i64, col: ExprId, col_add: i64, width: i64| {
        let (ra, ca, w) = (b.int(row_add), b.int(col_add), b.int(width));
        let r = b.p.exprs.add(row, ra);
        let c = b.p.exprs.add(col, ca);
        let r = b.p.exprs.mul(r, w);
        b.p.exprs.add(r, c)
    };
    for r in 0..8i64 {
        let (pair, e) = (r / 2, r % 2);
        let index = at(&mut b, g, 8 * (pair % 2), t2, e + 8 * (pair / 2), 16);
        let value = b.p.add_value(Value::Load { buffer: a, index });
        let slot = b.int(r);
        body.push(store(a_regs, slot, value));
    }
    if via_ldmatrix {
        // Stage A in shared memory and load it back with ldmatrix.x4 over the registers above.
        let mut stage = Vec::new();
        for r in 0..8 {
            let (pair, e) = (r / 2, r % 2);
            let index = at(&mut b, g, 8 * (pair % 2), t2, e + 8 * (pair / 2), 16);
            let slot = b.int(r);
            let value = b.p.add_value(Value::Load {
                buffer: a_regs,
                index: slot,
            });
            stage.push(store(s, index, value));
        }
        body.extend(stage);
        body.push(Stmt::Barrier);
        let q = b.p.exprs.floordiv(lane, eight);
        let row = b.p.exprs.floormod(lane, eight);
        let half = b.p.exprs.floormod(q, two);
        let col_half = b.p.exprs.floordiv(q, two);
        let row = {
            let h8 = b.p.exprs.mul(half, eight);
            b.p.exprs.add(row, h8)
        };
        let col = b.p.exprs.mul(col_half, eight);
        let src_index = at(&mut b, row, 0, col, 0, 16);
        let zero = b.int(0);
        body.push(Stmt::LoadMatrix {
            matrices: 4,
            transpose: false,
            dst: Place {
                buffer: a_regs,
                index: zero,
            },
            src: Place {
                buffer: s,
                index: src_index,
            },
        });
    }
    for r in 0..4i64 {
        let index = at(&mut b, t2, r % 2 + 8 * (r / 2), g, 0, 8);
        let value = b.p.add_value(Value::Load { buffer: bb, index });
        let slot = b.int(r);
        body.push(store(b_regs, slot, value));
        let zero = b.f32(0.0);
        body.push(store(c_regs, slot, zero));
    }
    let zero = b.int(0);
    body.push(Stmt::Mma {
        a: Place {
            buffer: a_regs,
            index: zero,
        },
        b: Place {
            buffer: b_regs,
            index: zero,
        },
        c: Place {
            buffer: c_regs,
            index: zero,
        },
    });
    for r in 0..4i64 {
        let index = at(&mut b, g, 8 * (r / 2), t2, r % 2, 8);
        let slot = b.int(r);
        let value = b.p.add_value(Value::Load {
            buffer: c_regs,
            index: slot,
        });
        body.push(store(d, index, value));
    }
    let stmt = b.block("mma", body);
    b.finish(vec![stmt])
}

#[test]
fn mma_and_ldmatrix_follow_the_ptx_fragment_layouts() {
    for via_ldmatrix in [false, true] {
        let mut tensors = vec![
            HostTensor::random(DType::Float16, &[256], 5),
            HostTensor::random(DType::Float16, &[128], 6),
            HostTensor::zeros(DType::Float32, &[128]),
        ];
        run_program(&single_mma(via_ldmatrix), &mut tensors, &[]).unwrap_or_else(|e| panic!("{e}"));
        for i in 0..16 {
            for j in 0..8 {
                let want: f64 = (0..16)
                    .map(|k| tensors[0].values[i * 16 + k] * tensors[1].values[k * 8 + j])
                    .sum();
                let got = tensors[2].values[i * 8 + j];
                assert!(
                    (got - want).abs() <= 1e-5 * want.abs().max(1.0),
                    "D[{i}][{j}] = {got}, want {want}"
                );
            }
        }
    }
}

/// Where a one-warpgroup wgmma's wait goes, relative to the store of its accumulator.
#[derive(Clone, Copy, PartialEq)]
enum WgmmaWait {
    BeforeTheStore,
    AfterTheStore,
    Never,
}

/// 128 threads fill a 64×16 A and a 16×8 B in shared memory with ones, multiply them with one
/// `wgmma.m64n8k16` into a zeroed accumulator, and store each thread's first register.
fn ones_wgmma(wait: WgmmaWait) -> ThreadProgram {
    use tilec_ir::thread::{DescriptorLayout, DescriptorSwizzle, Major, MatrixDescriptor, WgmmaA};
    let mut b = Builder::new(128);
    let n = b.int(128);
    let out = b.param("out", DType::Float32, vec![n], ParamAccess::Write);
    let a_shared = b.shared("a", DType::Float16, 64 * 16);
    let b_shared = b.shared("b", DType::Float16, 16 * 8);
    let c = b.local("c", DType::Float32, 4);
    let one = b.value(Value::Float {
        bits: 1f64.to_bits(),
        dtype: DType::Float16,
    });
    let zero = b.f32(0.0);
    let tx = b.tx();
    let eight = b.int(8);
    let row_start = b.p.exprs.mul(tx, eight);
    let mut body = Vec::new();
    for r in 0..8 {
        let offset = b.int(r);
        let index = b.p.exprs.add(row_start, offset);
        body.push(store(a_shared, index, one));
    }
    body.push(store(b_shared, tx, one));
    for r in 0..4 {
        let index = b.int(r);
        body.push(store(c, index, zero));
    }
    body.push(Stmt::Barrier);
    let layout = DescriptorLayout {
        leading_bytes: 16,
        stride_bytes: 256,
        swizzle: DescriptorSwizzle::Bytes32,
        major: Major::K,
    };
    let start = b.int(0);
    let descriptor = |buffer| MatrixDescriptor {
        buffer,
        start,
        layout,
    };
    let c_index = b.int(0);
    body.extend([
        Stmt::WgmmaFence,
        Stmt::Wgmma {
            n: 8,
            a: WgmmaA::Shared(descriptor(a_shared)),
            b: descriptor(b_shared),
            c: Place {
                buffer: c,
                index: c_index,
            },
        },
        Stmt::WgmmaCommit,
    ]);
    let first = b.load(c, c_index);
    let result = store(out, tx, first);
    match wait {
        WgmmaWait::BeforeTheStore => body.extend([Stmt::WgmmaWait { pending: 0 }, result]),
        WgmmaWait::AfterTheStore => body.extend([result, Stmt::WgmmaWait { pending: 0 }]),
        WgmmaWait::Never => body.push(result),
    }
    b.finish(body)
}

#[test]
fn wgmma_results_arrive_at_the_wait() {
    let run = |wait| {
        let mut tensors = vec![HostTensor::zeros(DType::Float32, &[128])];
        run_program(&ones_wgmma(wait), &mut tensors, &[]).map(|_| tensors[0].values.clone())
    };
    let waited = run(WgmmaWait::BeforeTheStore).unwrap_or_else(|e| panic!("{e}"));
    assert!(waited.iter().all(|&x| x == 16.0), "{waited:?}");
    // Read before the wait, the accumulator still holds its old value: a wrong answer, as on
    // the GPU, rather than the product.
    let early = run(WgmmaWait::AfterTheStore).unwrap_or_else(|e| panic!("{e}"));
    assert!(early.iter().all(|&x| x == 0.0), "{early:?}");
    let error = err(run(WgmmaWait::Never).map(|_| Default::default()));
    assert_eq!(error.kind, ErrorKind::WgmmaNeverWaited { count: 1 });
}

/// Stages of the warp-specialized pipeline below.
const STAGES: i64 = 3;
/// Elements of one TMA box of the pipeline: 8 rows of 64 fp16 columns (1024 bytes).
const BOX: i64 = 512;

/// What a warp-specialized pipeline gets wrong, if anything.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PipelineFault {
    None,
    /// The producer does not wait for the consumers to release a stage.
    NoEmptyWait,
    /// The consumers read a stage without waiting for its copy.
    NoFullWait,
    /// The consumers wait for the wrong phase of the full barriers.
    WrongParity,
    /// The consumers stop one iteration early, leaving the last copy unwaited.
    ShortConsumer,
    /// The consumers release a stage (arrive on its empty barrier) before they read it.
    EarlyRelease,
}

/// `x` as a float32 value.
fn to_f32(b: &mut Builder, x: ValueId) -> ValueId {
    b.value(Value::Cast {
        dtype: DType::Float32,
        value: x,
    })
}

/// The mbarriers of the pipeline: thread 0 initialises `full[s]` for the producer's one arrival
/// and `empty[s]` for the 128 consumers' arrivals, then a barrier publishes them.
fn init_pipeline_barriers(b: &mut Builder, full: BufferId, empty: BufferId) -> Vec<Stmt> {
    let (tx, zero) = (b.tx(), b.int(0));
    let first = b.compare(CompareOp::Eq, tx, zero);
    let mut init = Vec::new();
    for s in 0..STAGES {
        let index = b.int(s);
        init.push(Stmt::MbarrierInit {
            barrier: Place {
                buffer: full,
                index,
            },
            count: 1,
        });
        init.push(Stmt::MbarrierInit {
            barrier: Place {
                buffer: empty,
                index,
            },
            count: 128,
        });
    }
    vec![
        b.block("init barriers", vec![when(first, init)]),
        Stmt::Barrier,
    ]
}

/// A warp-specialized pipeline over `iterations` boxes of `A` (`[iterations × 8, 64]` fp16): 256
/// threads, consumers 0..128 and producers 128..256. Thread 128 loads box `ko` into stage
/// `ko % 3` with TMA; consumer `t` adds elements `4t..4t + 4` of each box into a float32 register
/// and finally stores it to `out[t]`.
fn pipeline(iterations: i64, fault: PipelineFault) -> ThreadProgram {
    let mut b = Builder::new(256);
    let (rows, cols, threads) = (b.int(iterations * 8), b.int(64), b.int(128));
    let a = b.param("A", DType::Float16, vec![rows, cols], ParamAccess::Read);
    let out = b.param("out", DType::Float32, vec![threads], ParamAccess::Write);
    let stages = b.shared("stages", DType::Float16, STAGES * BOX);
    let full = b.shared("full", DType::UInt64, STAGES);
    let empty = b.shared("empty", DType::UInt64, STAGES);
    b.p.tensor_maps.push(tilec_ir::thread::TensorMap {
        name: "A_map".to_owned(),
        buffer: a,
        box_dims: vec![64, 8],
        swizzle: None,
    });
    let acc = b.local("acc", DType::Float32, 1);
    let mut body = init_pipeline_barriers(&mut b, full, empty);
    // Both roles name their loop variable `ko`: each task binds it in its own environment.
    let ko = b.p.exprs.var("ko", Some(iterations));
    let ko_expr = b.p.exprs.var_expr(ko);
    let (three, two, one, zero) = (b.int(STAGES), b.int(2), b.int(1), b.int(0));
    let stage = b.p.exprs.floormod(ko_expr, three);
    let round = b.p.exprs.floordiv(ko_expr, three);
    let parity = b.p.exprs.floormod(round, two);
    let flipped = b.p.exprs.sub(one, parity);

    let mut consume = Vec::new();
    if fault != PipelineFault::NoFullWait {
        let parity = if fault == PipelineFault::WrongParity {
            flipped
        } else {
            parity
        };
        consume.push(Stmt::MbarrierWait {
            barrier: Place {
                buffer: full,
                index: stage,
            },
            parity,
        });
    }
    let release = Stmt::MbarrierArrive {
        barrier: Place {
            buffer: empty,
            index: stage,
        },
        expect_bytes: None,
    };
    if fault == PipelineFault::EarlyRelease {
        consume.push(release.clone());
    }
    let (box_elements, four, tx) = (b.int(BOX), b.int(4), b.tx());
    let stage_start = b.p.exprs.mul(stage, box_elements);
    let mine = b.p.exprs.mul(tx, four);
    let mine = b.p.exprs.add(stage_start, mine);
    for j in 0..4 {
        let offset = b.int(j);
        let index = b.p.exprs.add(mine, offset);
        let x = b.load(stages, index);
        let x = to_f32(&mut b, x);
        let sum = b.load(acc, zero);
        let sum = b.binary(BinaryOp::Add, sum, x, DType::Float32);
        consume.push(store(acc, zero, sum));
    }
    if fault != PipelineFault::EarlyRelease {
        consume.push(release);
    }
    consume.push(Stmt::NamedBarrier {
        id: 1,
        threads: 128,
    });
    let consumed = if fault == PipelineFault::ShortConsumer {
        iterations - 1
    } else {
        iterations
    };
    let (zero_value, consumed, result) = (b.f32(0.0), b.int(consumed), b.load(acc, zero));
    let consumer = vec![
        Stmt::SetMaxRegisters {
            count: 240,
            increase: true,
        },
        store(acc, zero, zero_value),
        Stmt::For {
            var: ko,
            extent: consumed,
            unroll: false,
            body: consume,
        },
        store(out, tx, result),
    ];

    let (issuer, eight) = (b.int(128), b.int(8));
    let is_issuer = b.compare(CompareOp::Eq, tx, issuer);
    let row = b.p.exprs.mul(ko_expr, eight);
    let issue = vec![
        Stmt::MbarrierArrive {
            barrier: Place {
                buffer: full,
                index: stage,
            },
            expect_bytes: Some(1024),
        },
        Stmt::TmaLoad {
            map: 0,
            dst: Place {
                buffer: stages,
                index: stage_start,
            },
            coords: vec![zero, row],
            barrier: Place {
                buffer: full,
                index: stage,
            },
        },
    ];
    let mut produce = Vec::new();
    if fault != PipelineFault::NoEmptyWait {
        produce.push(Stmt::MbarrierWait {
            barrier: Place {
                buffer: empty,
                index: stage,
            },
            parity: flipped,
        });
    }
    produce.push(when(is_issuer, issue));
    let extent = b.int(iterations);
    let producer = vec![
        Stmt::SetMaxRegisters {
            count: 40,
            increase: false,
        },
        Stmt::For {
            var: ko,
            extent,
            unroll: false,
            body: produce,
        },
    ];
    let roles = Stmt::WarpRoles {
        consumers: 128,
        consumer,
        producer,
    };
    body.push(b.block("pipeline", vec![roles]));
    b.finish(body)
}

fn pipeline_tensors(iterations: i64) -> Vec<HostTensor> {
    vec![
        HostTensor::random(DType::Float16, &[ix(iterations) * 8, 64], 11),
        HostTensor::zeros(DType::Float32, &[128]),
    ]
}

#[test]
fn a_warp_specialized_tma_pipeline_computes_exact_sums() {
    let iterations = 7;
    let mut tensors = pipeline_tensors(iterations);
    let program = pipeline(iterations, PipelineFault::None);
    let report = run_program(&program, &mut tensors, &[]).unwrap_or_else(|e| panic!("{e}"));
    let a = &tensors[0].values;
    for t in 0..128 {
        let mut sum = 0.0;
        for ko in 0..ix(iterations) {
            for j in 0..4 {
                sum = round_to(DType::Float32, sum + a[ko * ix(BOX) + 4 * t + j]);
            }
        }
        assert_eq!(tensors[1].values[t], sum, "out[{t}]");
    }
    // One block barrier and one named barrier per consumer iteration.
    assert_eq!(
        report.barriers,
        1 + u64::try_from(iterations).expect("positive")
    );
    assert_eq!(
        report.shared_stores,
        u64::try_from(iterations * BOX).expect("positive")
    );
}

#[test]
fn pipeline_protocol_mistakes_are_reported() {
    let run = |fault| {
        let mut tensors = pipeline_tensors(6);
        err(run_program(&pipeline(6, fault), &mut tensors, &[]))
    };
    // Without the empty wait the producer runs ahead into stage 0 while its first copy is still
    // in flight.
    let error = run(PipelineFault::NoEmptyWait);
    let in_flight = ErrorKind::TmaInFlight {
        buffer: "stages".to_owned(),
        index: 0,
    };
    assert_eq!(error.kind, in_flight, "{error}");
    assert_eq!(error.thread, Some(128));
    // Without the full wait the consumers read a copy that has not landed.
    let error = run(PipelineFault::NoFullWait);
    assert_eq!(error.kind, in_flight, "{error}");
    assert_eq!(error.thread, Some(0));
    let error = run(PipelineFault::WrongParity);
    let waits = vec![
        BlockedWait {
            role: "producer",
            on: WaitOn::Mbarrier {
                barrier: "empty".to_owned(),
                index: 0,
                parity: 0,
            },
        },
        BlockedWait {
            role: "consumer",
            on: WaitOn::Mbarrier {
                barrier: "full".to_owned(),
                index: 0,
                parity: 1,
            },
        },
    ];
    assert_eq!(error.kind, ErrorKind::MbarrierDeadlock { waits }, "{error}");
    assert_eq!(error.label.as_deref(), Some("pipeline"));
    let message = error.to_string();
    assert!(
        message.contains("the consumer waits for parity 1 of `full[0]`"),
        "{message}"
    );
    // Released before it is read, a stage may be overwritten while the consumers read it, although
    // the producer, which runs first, only overwrites it after the reads here.
    let error = run(PipelineFault::EarlyRelease);
    let unordered = ErrorKind::UnorderedTma {
        buffer: "stages".to_owned(),
        index: 0,
        other: 0,
    };
    assert_eq!(error.kind, unordered, "{error}");
    assert_eq!(error.thread, Some(128));
    let error = run(PipelineFault::ShortConsumer);
    let never = ErrorKind::TmaNeverWaited {
        barrier: "full".to_owned(),
        index: 2,
        copies: 1,
    };
    assert_eq!(error.kind, never, "{error}");
}

/// 64 threads: thread 0 initialises an mbarrier (a barrier publishes it when `publish`), then
/// loads rows 8..16 of `A` (`[16, 64]` fp16) with one TMA box `{64, 8}` stored with the 128-byte
/// swizzle; every thread waits for parity `parity` and copies eight elements of the tile, in
/// shared-memory order, to `out`.
fn swizzled_tile(parity: i64, publish: bool) -> ThreadProgram {
    use tilec_ir::thread::{DescriptorSwizzle, TensorMap};
    let mut b = Builder::new(64);
    let (rows, cols, n) = (b.int(16), b.int(64), b.int(BOX));
    let a = b.param("A", DType::Float16, vec![rows, cols], ParamAccess::Read);
    let out = b.param("out", DType::Float16, vec![n], ParamAccess::Write);
    let tile = b.shared("tile", DType::Float16, BOX);
    let bar = b.shared("bar", DType::UInt64, 1);
    b.p.tensor_maps.push(TensorMap {
        name: "A_map".to_owned(),
        buffer: a,
        box_dims: vec![64, 8],
        swizzle: Some(DescriptorSwizzle::Bytes128),
    });
    let (tx, zero, eight) = (b.tx(), b.int(0), b.int(8));
    let first = b.compare(CompareOp::Eq, tx, zero);
    let init = Stmt::MbarrierInit {
        barrier: Place {
            buffer: bar,
            index: zero,
        },
        count: 1,
    };
    let load = vec![
        Stmt::MbarrierArrive {
            barrier: Place {
                buffer: bar,
                index: zero,
            },
            expect_bytes: Some(1024),
        },
        Stmt::TmaLoad {
            map: 0,
            dst: Place {
                buffer: tile,
                index: zero,
            },
            coords: vec![zero, eight],
            barrier: Place {
                buffer: bar,
                index: zero,
            },
        },
    ];
    let mut body = vec![when(first, vec![init])];
    if publish {
        body.push(Stmt::Barrier);
    }
    let parity = b.int(parity);
    body.extend([
        when(first, load),
        Stmt::MbarrierWait {
            barrier: Place {
                buffer: bar,
                index: zero,
            },
            parity,
        },
    ]);
    let start = b.p.exprs.mul(tx, eight);
    for j in 0..8 {
        let offset = b.int(j);
        let index = b.p.exprs.add(start, offset);
        let x = b.load(tile, index);
        body.push(store(out, index, x));
    }
    let stmt = b.block("tile", body);
    b.finish(vec![stmt])
}

#[test]
fn tma_boxes_land_at_swizzled_addresses() {
    use tilec_ir::thread::DescriptorSwizzle;
    let mut tensors = vec![
        HostTensor::random(DType::Float16, &[16, 64], 12),
        HostTensor::zeros(DType::Float16, &[ix(BOX)]),
    ];
    run_program(&swizzled_tile(0, true), &mut tensors, &[]).unwrap_or_else(|e| panic!("{e}"));
    let mut moved = 0;
    for position in 0..BOX {
        let element = DescriptorSwizzle::Bytes128.apply(position * 2) / 2;
        moved += usize::from(element != position);
        let (row, col) = (8 + position / 64, position % 64);
        let want = tensors[0].values[ix(row * 64 + col)];
        assert_eq!(tensors[1].values[ix(element)], want, "box {position}");
    }
    assert!(moved > 0, "the swizzle moves elements");
}

#[test]
fn mbarrier_misuse_is_reported() {
    let tensors = || {
        vec![
            HostTensor::random(DType::Float16, &[16, 64], 12),
            HostTensor::zeros(DType::Float16, &[ix(BOX)]),
        ]
    };
    // Waiting for the phase after the one the copy completes: nothing else can complete it.
    let error = err(run_program(&swizzled_tile(1, true), &mut tensors(), &[]));
    let waits = vec![BlockedWait {
        role: "block",
        on: WaitOn::Mbarrier {
            barrier: "bar".to_owned(),
            index: 0,
            parity: 1,
        },
    }];
    assert_eq!(error.kind, ErrorKind::MbarrierDeadlock { waits }, "{error}");
    // Without a barrier after the initialisation, thread 1 may see an uninitialised mbarrier.
    let error = err(run_program(&swizzled_tile(0, false), &mut tensors(), &[]));
    let unpublished = ErrorKind::Mbarrier {
        barrier: "bar".to_owned(),
        index: 0,
        fault: MbarrierFault::Unpublished { initializer: 0 },
    };
    assert_eq!(error.kind, unpublished, "{error}");
    assert_eq!(error.thread, Some(1));
    // Without the initialisation.
    let mut program = swizzled_tile(0, true);
    if let Some(Stmt::Block { body, .. }) = program.body.first_mut() {
        body.remove(0);
    }
    let error = err(run_program(&program, &mut tensors(), &[]));
    assert!(
        matches!(
            error.kind,
            ErrorKind::Mbarrier {
                fault: MbarrierFault::Uninitialized,
                ..
            }
        ),
        "{error}"
    );
}

/// Two TMA boxes `{8, 4}` of a `[6, 12]` float32 tensor that reach past its edges, issued before
/// the `expect_tx` that announces their bytes (the transaction count goes negative first); 64
/// threads then copy both tiles to `out`.
#[test]
fn tma_fills_outside_the_tensor_with_zeros() {
    use tilec_ir::thread::TensorMap;
    let mut b = Builder::new(64);
    let (rows, cols, n) = (b.int(6), b.int(12), b.int(64));
    let a = b.param("A", DType::Float32, vec![rows, cols], ParamAccess::Read);
    let out = b.param("out", DType::Float32, vec![n], ParamAccess::Write);
    let tiles = b.shared("tiles", DType::Float32, 64);
    let bar = b.shared("bar", DType::UInt64, 1);
    b.p.tensor_maps.push(TensorMap {
        name: "A_map".to_owned(),
        buffer: a,
        box_dims: vec![8, 4],
        swizzle: None,
    });
    let (tx, zero) = (b.tx(), b.int(0));
    let first = b.compare(CompareOp::Eq, tx, zero);
    let origins = [(8, 4, 0), (-4, -2, 32)];
    let mut load = Vec::new();
    for (col, row, dst) in origins {
        let (col, row, dst_index) = (b.int(col), b.int(row), b.int(dst));
        load.push(Stmt::TmaLoad {
            map: 0,
            dst: Place {
                buffer: tiles,
                index: dst_index,
            },
            coords: vec![col, row],
            barrier: Place {
                buffer: bar,
                index: zero,
            },
        });
    }
    load.push(Stmt::MbarrierArrive {
        barrier: Place {
            buffer: bar,
            index: zero,
        },
        expect_bytes: Some(256),
    });
    let x = b.load(tiles, tx);
    let body = vec![
        when(
            first,
            vec![Stmt::MbarrierInit {
                barrier: Place {
                    buffer: bar,
                    index: zero,
                },
                count: 1,
            }],
        ),
        Stmt::Barrier,
        when(first, load),
        Stmt::MbarrierWait {
            barrier: Place {
                buffer: bar,
                index: zero,
            },
            parity: zero,
        },
        store(out, tx, x),
    ];
    let program = b.finish(body);
    let mut tensors = vec![
        HostTensor::random(DType::Float32, &[6, 12], 13),
        HostTensor::zeros(DType::Float32, &[64]),
    ];
    run_program(&program, &mut tensors, &[]).unwrap_or_else(|e| panic!("{e}"));
    for (k, (col0, row0, dst)) in origins.into_iter().enumerate() {
        for position in 0..32i64 {
            let (row, col) = (row0 + position / 8, col0 + position % 8);
            let inside = (0..6).contains(&row) && (0..12).contains(&col);
            let want = if inside {
                tensors[0].values[ix(row * 12 + col)]
            } else {
                0.0
            };
            let got = tensors[1].values[ix(dst + position)];
            assert_eq!(got, want, "box {k} element {position}");
        }
    }
}

#[test]
fn named_barriers_and_setmaxnreg_check_their_threads() {
    let b = Builder::new(128);
    let program = b.finish(vec![Stmt::NamedBarrier { id: 1, threads: 64 }]);
    let error = err(run_program(&program, &mut [], &[]));
    let expected = ErrorKind::DivergentNamedBarrier {
        id: 1,
        active: 128,
        threads: 64,
    };
    assert_eq!(error.kind, expected);

    let mut b = Builder::new(128);
    let (tx, half) = (b.tx(), b.int(64));
    let low = b.compare(CompareOp::Lt, tx, half);
    let setmaxnreg = Stmt::SetMaxRegisters {
        count: 232,
        increase: true,
    };
    let program = b.finish(vec![when(low, vec![setmaxnreg])]);
    let error = err(run_program(&program, &mut [], &[]));
    assert!(
        matches!(error.kind, ErrorKind::PartialWarp { warp: 0, .. }),
        "{error}"
    );
}

/// 64 threads without warp roles load two boxes `{64, 8}` of `A` (`[16, 64]` fp16) one after the
/// other into one stage, thread 0 issuing and every thread waiting, and copy each to `out`; with
/// `barrier`, a block barrier protects the reuse of the stage.
fn reused_stage(barrier: bool) -> ThreadProgram {
    use tilec_ir::thread::TensorMap;
    let mut b = Builder::new(64);
    let (rows, cols, n) = (b.int(16), b.int(64), b.int(2 * BOX));
    let a = b.param("A", DType::Float16, vec![rows, cols], ParamAccess::Read);
    let out = b.param("out", DType::Float16, vec![n], ParamAccess::Write);
    let tile = b.shared("tile", DType::Float16, BOX);
    let bar = b.shared("bar", DType::UInt64, 1);
    b.p.tensor_maps.push(TensorMap {
        name: "A_map".to_owned(),
        buffer: a,
        box_dims: vec![64, 8],
        swizzle: None,
    });
    let (tx, zero, eight, two) = (b.tx(), b.int(0), b.int(8), b.int(2));
    let first = b.compare(CompareOp::Eq, tx, zero);
    let it = b.p.exprs.var("it", Some(2));
    let it_expr = b.p.exprs.var_expr(it);
    let row = b.p.exprs.mul(it_expr, eight);
    let parity = b.p.exprs.floormod(it_expr, two);
    let load = vec![
        Stmt::MbarrierArrive {
            barrier: Place {
                buffer: bar,
                index: zero,
            },
            expect_bytes: Some(1024),
        },
        Stmt::TmaLoad {
            map: 0,
            dst: Place {
                buffer: tile,
                index: zero,
            },
            coords: vec![zero, row],
            barrier: Place {
                buffer: bar,
                index: zero,
            },
        },
    ];
    let mut step = vec![
        when(first, load),
        Stmt::MbarrierWait {
            barrier: Place {
                buffer: bar,
                index: zero,
            },
            parity,
        },
    ];
    let (box_elements, start) = (b.int(BOX), b.p.exprs.mul(tx, eight));
    let out_start = b.p.exprs.mul(it_expr, box_elements);
    let out_start = b.p.exprs.add(out_start, start);
    for j in 0..8 {
        let offset = b.int(j);
        let index = b.p.exprs.add(start, offset);
        let out_index = b.p.exprs.add(out_start, offset);
        let x = b.load(tile, index);
        step.push(store(out, out_index, x));
    }
    if barrier {
        step.push(Stmt::Barrier);
    }
    let init = Stmt::MbarrierInit {
        barrier: Place {
            buffer: bar,
            index: zero,
        },
        count: 1,
    };
    let body = vec![
        when(first, vec![init]),
        Stmt::Barrier,
        Stmt::For {
            var: it,
            extent: two,
            unroll: false,
            body: step,
        },
    ];
    b.finish(body)
}

#[test]
fn reusing_a_tma_stage_outside_roles_needs_a_barrier() {
    let tensors = || {
        vec![
            HostTensor::random(DType::Float16, &[16, 64], 14),
            HostTensor::zeros(DType::Float16, &[2 * ix(BOX)]),
        ]
    };
    let mut ok = tensors();
    run_program(&reused_stage(true), &mut ok, &[]).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(ok[1].values, ok[0].values);
    let error = err(run_program(&reused_stage(false), &mut tensors(), &[]));
    let race = ErrorKind::Race {
        buffer: "tile".to_owned(),
        index: 8,
        kind: RaceKind::WriteAfterRead,
        first: 1,
        second: 0,
    };
    assert_eq!(error.kind, race, "{error}");
}

/// The turn-taking of two warpgroups (256 threads): `steps` run by all of them in order, then,
/// with `partial`, a `Take` run by the threads below it only.
fn turns(steps: &[TurnStep], partial: Option<i64>) -> ThreadProgram {
    let mut b = Builder::new(256);
    let turn = |step| Stmt::WarpgroupTurn {
        step,
        warpgroups: 2,
        first_barrier: 2,
    };
    let mut body: Vec<Stmt> = steps.iter().map(|&step| turn(step)).collect();
    if let Some(limit) = partial {
        let (tx, limit) = (b.tx(), b.int(limit));
        let low = b.compare(CompareOp::Lt, tx, limit);
        body.push(when(low, vec![turn(TurnStep::Take)]));
    }
    b.finish(body)
}

#[test]
fn warpgroup_turns_that_could_deadlock_are_reported() {
    use TurnStep::{End, Pass, Start, Take};
    let fine = turns(&[Start, Take, Pass, Take, Pass, End], None);
    let report = run_program(&fine, &mut [], &[]).expect("a balanced turn-taking runs");
    assert_eq!(report.barriers, 4, "one barrier per take and per pass");

    let cases: [(&[TurnStep], Option<i64>, &str); 6] = [
        (&[Take, Pass], None, "Take with no Start before it"),
        (
            &[Start, Take, Take],
            None,
            "Take by warpgroup 0 on named barrier 2",
        ),
        (
            &[Start, Pass],
            None,
            "Pass by warpgroup 0 on named barrier 3",
        ),
        (
            &[Start, Take, End],
            None,
            "End while warpgroup 0 holds the turn",
        ),
        (&[Start, Take, Pass], None, "still running (no End)"),
        (&[Start], Some(128), "Take executed by 128 threads"),
    ];
    for (steps, partial, message) in cases {
        let error = err(run_program(&turns(steps, partial), &mut [], &[]));
        assert!(
            matches!(&error.kind, ErrorKind::WarpgroupTurn(text) if text.contains(message)),
            "{steps:?}: {error}"
        );
    }
}

#[test]
fn single_precision_exp2_flushes_what_the_gpu_flushes() {
    use tilec_ir::Intrinsic;
    use tilec_ir::thread::UnaryOp;
    let mut b = Builder::new(4);
    let four = b.int(4);
    let input = b.param("x", DType::Float32, vec![four], ParamAccess::Read);
    let out = b.param("out", DType::Float32, vec![four], ParamAccess::Write);
    let tx = b.tx();
    let x = b.load(input, tx);
    let y = b.value(Value::Unary {
        op: UnaryOp::Intrinsic(Intrinsic::Exp2),
        arg: x,
        dtype: DType::Float32,
    });
    let program = b.finish(vec![store(out, tx, y)]);
    let subnormal = f64::from(f32::MIN_POSITIVE) / 4.0;
    let mut tensors = vec![
        HostTensor {
            dtype: DType::Float32,
            shape: vec![4],
            values: vec![-127.0, -126.0, subnormal, 3.0],
        },
        HostTensor::zeros(DType::Float32, &[4]),
    ];
    run_program(&program, &mut tensors, &[]).expect("runs");
    let want = [0.0, f64::from(f32::MIN_POSITIVE), 1.0, 8.0];
    assert_eq!(tensors[1].values, want);
}

/// 64 threads write an 8 × 64 fp16 tile into shared memory (thread `t` writes column `t` of every
/// row, the value `A[r][t]`), then thread 0 stores the tile with one TMA box at row `first_row` of
/// `Out` (`[rows, 64]`), with or without a barrier between the writes and the store.
fn tma_store_tile(rows: i64, first_row: i64, barrier: bool) -> ThreadProgram {
    let mut b = Builder::new(64);
    let (eight, sixty_four, rows) = (b.int(8), b.int(64), b.int(rows));
    let a = b.param(
        "A",
        DType::Float16,
        vec![eight, sixty_four],
        ParamAccess::Read,
    );
    let out = b.param(
        "Out",
        DType::Float16,
        vec![rows, sixty_four],
        ParamAccess::ReadWrite,
    );
    let tile = b.shared("tile", DType::Float16, 512);
    b.p.tensor_maps.push(tilec_ir::thread::TensorMap {
        name: "Out_map".to_owned(),
        buffer: out,
        box_dims: vec![64, 8],
        swizzle: None,
    });
    let (zero, tx) = (b.int(0), b.tx());
    let mut writes = Vec::new();
    for r in 0..8 {
        let row = b.int(r * 64);
        let index = b.p.exprs.add(row, tx);
        let value = b.load(a, index);
        writes.push(store(tile, index, value));
    }
    let mut body = vec![b.block("fill the tile", writes)];
    if barrier {
        body.push(Stmt::FenceProxyAsync);
        body.push(Stmt::Barrier);
    }
    let first = b.compare(CompareOp::Eq, tx, zero);
    let first_row = b.int(first_row);
    let issue = vec![
        Stmt::TmaStore {
            map: 0,
            src: Place {
                buffer: tile,
                index: zero,
            },
            coords: vec![zero, first_row],
        },
        Stmt::TmaStoreWait,
    ];
    body.push(b.block("store the tile", vec![when(first, issue)]));
    b.finish(body)
}

#[test]
fn a_tma_store_writes_the_box_and_skips_rows_outside_the_tensor() {
    // Rows 0..8 of the box land at rows 4..12 of a 10-row tensor: box rows 6 and 7 are skipped,
    // and rows 0..4 of the output keep their values.
    let program = tma_store_tile(10, 4, true);
    let mut tensors = vec![
        HostTensor::random(DType::Float16, &[8, 64], 3),
        HostTensor::random(DType::Float16, &[10, 64], 4),
    ];
    let before = tensors[1].values.clone();
    run_program(&program, &mut tensors, &[]).unwrap_or_else(|e| panic!("{e}"));
    let (a, out) = (&tensors[0].values, &tensors[1].values);
    assert_eq!(out[..4 * 64], before[..4 * 64]);
    assert_eq!(out[4 * 64..], a[..6 * 64]);
}

#[test]
fn a_tma_store_without_a_barrier_after_the_writes_is_a_race() {
    let program = tma_store_tile(8, 0, false);
    let mut tensors = vec![
        HostTensor::random(DType::Float16, &[8, 64], 3),
        HostTensor::zeros(DType::Float16, &[8, 64]),
    ];
    let error = err(run_program(&program, &mut tensors, &[]));
    assert!(
        matches!(&error.kind, ErrorKind::Race { buffer, kind: RaceKind::ReadAfterWrite, second: 0, .. } if buffer == "tile"),
        "{error}"
    );
    assert_eq!(error.label.as_deref(), Some("store the tile"));
}

/// 64 threads store `S[tx] = A[tx]`, then (with `sync` a `__syncwarp`, under `16` lanes' `if`
/// when `divergent`) read `S[partner(tx)]` into `Out[tx]`: the neighbour in the same warp, or
/// with `across` the thread 32 away, in the other warp.
fn warp_exchange(sync: bool, across: bool, divergent: bool) -> ThreadProgram {
    let mut b = Builder::new(64);
    let sixty_four = b.int(64);
    let a = b.param("A", DType::Float32, vec![sixty_four], ParamAccess::Read);
    let out = b.param("Out", DType::Float32, vec![sixty_four], ParamAccess::Write);
    let s = b.shared("S", DType::Float32, 64);
    let tx = b.tx();
    let x = b.load(a, tx);
    let mut body = vec![store(s, tx, x)];
    if sync && divergent {
        let sixteen = b.int(16);
        let low = b.compare(CompareOp::Lt, tx, sixteen);
        body.push(when(low, vec![Stmt::SyncWarp]));
    } else if sync {
        body.push(Stmt::SyncWarp);
    }
    let partner = if across {
        let thirty_two = b.int(32);
        let shifted = b.p.exprs.add(tx, thirty_two);
        b.p.exprs.floormod(shifted, sixty_four)
    } else {
        // tx ^ 1: the other thread of the pair.
        let two = b.int(2);
        let parity = b.p.exprs.floormod(tx, two);
        let even = b.p.exprs.sub(tx, parity);
        let one = b.int(1);
        let other = b.p.exprs.sub(one, parity);
        b.p.exprs.add(even, other)
    };
    let y = b.load(s, partner);
    body.push(store(out, tx, y));
    b.finish(body)
}

#[test]
fn syncwarp_orders_a_warps_shared_accesses_and_nothing_else() {
    let run = |program: &ThreadProgram| {
        let mut tensors = vec![
            HostTensor::random(DType::Float32, &[64], 9),
            HostTensor::zeros(DType::Float32, &[64]),
        ];
        run_program(program, &mut tensors, &[]).map(|_| tensors)
    };
    let tensors = run(&warp_exchange(true, false, false)).unwrap_or_else(|e| panic!("{e}"));
    let expected: Vec<f64> = (0..64).map(|t| tensors[0].values[t ^ 1]).collect();
    assert_eq!(tensors[1].values, expected);
    // Without the warp sync, the neighbour's store is unordered.
    let error = run(&warp_exchange(false, false, false)).expect_err("a race");
    assert!(
        matches!(
            error.kind,
            ErrorKind::Race {
                kind: RaceKind::ReadAfterWrite,
                ..
            }
        ),
        "{error}"
    );
    // A warp sync orders nothing between warps.
    let error = run(&warp_exchange(true, true, false)).expect_err("a race");
    assert!(
        matches!(
            error.kind,
            ErrorKind::Race {
                kind: RaceKind::ReadAfterWrite,
                first: 32,
                second: 0,
                ..
            }
        ),
        "{error}"
    );
    // Half a warp at a warp sync is divergent.
    let error = run(&warp_exchange(true, false, true)).expect_err("divergent");
    assert_eq!(
        error.kind,
        ErrorKind::DivergentWarpSync {
            warp: 0,
            active: 16,
            lanes: 32
        }
    );
}
