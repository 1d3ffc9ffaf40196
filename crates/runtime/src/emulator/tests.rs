//! Tests of the emulator on small thread programs built by hand.

use tilec_ir::data::{BinaryOp, CompareOp};
use tilec_ir::thread::{
    BufferDecl, BufferId, Memory as MemoryKind, ParamAccess, ScalarParam, Stmt, TensorParam, Value,
    ValueId,
};
use tilec_ir::{DType, EntityId, ExprArena, ExprId, ThreadProgram, VarId};

use super::{EmulatorError, ErrorKind, RaceKind, run_program};
use crate::tensor::{HostTensor, round_to};

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
            shared_bytes: 0,
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
        self.p.shared_bytes = offset + elements * dtype.bytes() as i64;
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
        buffer,
        index,
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
        dst: s,
        dst_index: mine,
        src: a,
        src_index: source,
        lanes: 4,
    }];
    if barrier {
        body.push(Stmt::Barrier);
    }
    body.push(Stmt::VectorCopy {
        dst: c,
        dst_index: mine,
        src: s,
        src_index: theirs,
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
fn loops_lets_and_thread_dependent_extents() {
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

    let mut program = program;
    if let Some(Stmt::For { extent, .. }) = program.body.first_mut() {
        *extent = tx;
    }
    let error = err(run_program(&program, &mut tensors, &[]));
    assert_eq!(error.kind, ErrorKind::ThreadDependentExtent);
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
    let forward = ValueId(program.values.len() as u32 + 5);
    program.values.push(Value::Cast {
        dtype: DType::Float32,
        value: forward,
    });
    let error = err(run_program(&program, &mut elementwise_tensors(100), &[100]));
    assert!(matches!(error.kind, ErrorKind::Malformed(_)), "{error}");

    let mut program = elementwise(true, false);
    program.body.push(Stmt::Store {
        buffer: BufferId(99),
        index: program.grid[0],
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
    let report = run_program(&program, &mut tensors, &[n as i64]).unwrap_or_else(|e| panic!("{e}"));
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

#[test]
fn tiled_gemm_matches_sequential_float32_sums() {
    let size = 128;
    let program = gemm(size as i64);
    let mut tensors = vec![
        HostTensor::random(DType::Float32, &[size, size], 1),
        HostTensor::random(DType::Float32, &[size, size], 2),
        HostTensor::zeros(DType::Float32, &[size, size]),
    ];
    let report = run_program(&program, &mut tensors, &[]).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!((report.blocks, report.barriers), (4, 4 * 8));
    let f32_round = |x: f64| round_to(DType::Float32, x);
    for i in 0..size {
        for j in 0..size {
            let (a, b) = (&tensors[0].values, &tensors[1].values);
            let sum = (0..size).fold(0.0, |s, k| {
                f32_round(s + f32_round(a[i * size + k] * b[k * size + j]))
            });
            assert_eq!(tensors[2].values[i * size + j], sum, "C[{i}, {j}]");
        }
    }
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
        buffer,
        index,
        value: unit,
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
        assert_eq!(tensors[0].values[t as usize], f64::from((t - 8) / 3));
        assert_eq!(
            tensors[1].values[t as usize],
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
            dst: s,
            dst_index: mine,
            src: a,
            src_index: mine,
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
        dst: c,
        dst_index: mine,
        src: s,
        src_index: theirs,
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
            dst: a_regs,
            dst_index: zero,
            src: s,
            src_index,
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
        a: a_regs,
        a_index: zero,
        b: b_regs,
        b_index: zero,
        c: c_regs,
        c_index: zero,
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
            c,
            c_index,
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
