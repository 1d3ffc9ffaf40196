//! Index expressions compiled to flat code, for evaluating the same formulas at many points.
//!
//! Layout inference decides every property by enumerating tile domains: a 128 × 128 accumulator is
//! 16 384 points, and each candidate layout is enumerated several times. Walking the interned
//! expression graph recursively, with a closure lookup per variable, costs far more than the
//! arithmetic itself. An [`ExprProgram`] does that walk once: shared subexpressions get one register,
//! constants are preloaded, and a run is a straight loop over instructions.

use rustc_hash::FxHashMap;

use crate::expr::{Expr, ExprArena, ExprId, VarId, floor_div, floor_mod};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Add,
    Sub,
    Mul,
    FloorDiv,
    FloorMod,
    Min,
    Max,
}

/// One step of a program. Most tile formulas divide, take remainders and scale by constants, and
/// most of those constants are powers of two, so operations with a constant right operand get
/// their own forms: a floor division by `2^k` is an arithmetic shift and a floor modulo a mask.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Instruction {
    Binary {
        op: Op,
        target: u32,
        left: u32,
        right: u32,
    },
    AddConstant {
        target: u32,
        left: u32,
        constant: i64,
    },
    MulConstant {
        target: u32,
        left: u32,
        constant: i64,
    },
    ShiftRight {
        target: u32,
        left: u32,
        bits: u32,
    },
    Mask {
        target: u32,
        left: u32,
        mask: i64,
    },
}

impl Instruction {
    fn execute(self, registers: &mut [i64]) -> Option<()> {
        let (target, value) = match self {
            Instruction::Binary {
                op,
                target,
                left,
                right,
            } => (
                target,
                apply(op, registers[left as usize], registers[right as usize])?,
            ),
            Instruction::AddConstant {
                target,
                left,
                constant,
            } => (target, registers[left as usize].checked_add(constant)?),
            Instruction::MulConstant {
                target,
                left,
                constant,
            } => (target, registers[left as usize].checked_mul(constant)?),
            // Two's complement makes both exact for negative operands too: `-3 >> 1` is
            // `-2 == -3 // 2`, and `-3 & 1` is `1 == -3 % 2`.
            Instruction::ShiftRight { target, left, bits } => {
                (target, registers[left as usize] >> bits)
            }
            Instruction::Mask { target, left, mask } => (target, registers[left as usize] & mask),
        };
        registers[target as usize] = value;
        Some(())
    }
}

/// Where a compiled node's value lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Slot {
    Register(u32),
    /// The node reads a variable that is not an input: it has no value.
    Unbound,
}

impl Slot {
    /// The register at `index`. A program with more than `u32::MAX` registers cannot be
    /// addressed; its node gets no value (the program then evaluates to `None`) rather than a
    /// truncated register number that would alias another node.
    fn register(index: usize) -> Slot {
        u32::try_from(index).map_or(Slot::Unbound, Slot::Register)
    }
}

/// Formulas over a fixed list of input variables, compiled to register code.
///
/// Registers `0..inputs` hold the inputs, then come the constants, then one register per distinct
/// operation. A run fails (returns `None`) where [`ExprArena::eval`] would: on a division by zero,
/// an overflow, or an output that reads a variable which is not an input.
#[derive(Clone, Debug)]
pub struct ExprProgram {
    inputs: usize,
    registers: Vec<i64>,
    code: Vec<Instruction>,
    outputs: Vec<Slot>,
    values: Vec<i64>,
    /// Registers of a batched run: register `r` of point `p` is `lanes[r * points + p]`.
    lanes: Vec<i64>,
}

impl ExprProgram {
    /// Compiles `outputs`, whose variables are read from `inputs` in order.
    pub fn compile(arena: &ExprArena, inputs: &[VarId], outputs: &[ExprId]) -> ExprProgram {
        Self::compile_with(arena, inputs, outputs, false)
    }

    /// Like [`ExprProgram::compile`], but variables that are not inputs read as zero: the lenient
    /// environment inference uses while sampling a formula with some variables pinned to zero.
    pub fn compile_zeroing(arena: &ExprArena, inputs: &[VarId], outputs: &[ExprId]) -> ExprProgram {
        Self::compile_with(arena, inputs, outputs, true)
    }

    fn compile_with(
        arena: &ExprArena,
        inputs: &[VarId],
        outputs: &[ExprId],
        unbound_as_zero: bool,
    ) -> ExprProgram {
        let mut compiler = Compiler {
            arena,
            inputs,
            unbound_as_zero,
            registers: vec![0; inputs.len()],
            code: Vec::new(),
            slots: FxHashMap::default(),
        };
        let outputs: Vec<Slot> = outputs.iter().map(|&e| compiler.slot(e)).collect();
        ExprProgram {
            inputs: inputs.len(),
            registers: compiler.registers,
            code: compiler.code,
            values: vec![0; outputs.len()],
            outputs,
            lanes: Vec::new(),
        }
    }

    /// Evaluates every output at `input` (one value per input variable, in compile order).
    pub fn run(&mut self, input: &[i64]) -> Option<&[i64]> {
        let count = self.inputs.min(input.len());
        self.registers[..count].copy_from_slice(&input[..count]);
        for instruction in &self.code {
            instruction.execute(&mut self.registers)?;
        }
        for (value, slot) in self.values.iter_mut().zip(&self.outputs) {
            match slot {
                Slot::Register(register) => *value = self.registers[*register as usize],
                Slot::Unbound => return None,
            }
        }
        Some(&self.values)
    }

    /// The single output of a one-output program at `input`.
    pub fn run_one(&mut self, input: &[i64]) -> Option<i64> {
        self.run(input)?.first().copied()
    }

    /// Evaluates at many points at once, which costs a few machine instructions per point and
    /// operation instead of a dispatch per point: `inputs[k]` is input `k`'s column, one value per
    /// point, and every column has `points` values. Output `k` is then
    /// `batch[k * points..(k + 1) * points]` of the returned slice. `None` where any point fails.
    pub fn run_batch(&mut self, inputs: &[&[i64]], points: usize) -> Option<BatchOutputs<'_>> {
        if inputs.len() < self.inputs || inputs.iter().any(|column| column.len() < points) {
            return None;
        }
        // Every register is written below before it is read, so the lanes are only grown, never
        // cleared (clearing them cost more than the whole evaluation).
        let needed = self.registers.len() * points;
        if self.lanes.len() < needed {
            self.lanes.resize(needed, 0);
        }
        for (register, &value) in self.registers.iter().enumerate() {
            let lanes = &mut self.lanes[register * points..(register + 1) * points];
            match inputs.get(register).filter(|_| register < self.inputs) {
                Some(column) => lanes.copy_from_slice(&column[..points]),
                None => lanes.fill(value),
            }
        }
        for instruction in &self.code {
            instruction.execute_lanes(&mut self.lanes, points)?;
        }
        let mut registers = Vec::with_capacity(self.outputs.len());
        for slot in &self.outputs {
            match slot {
                Slot::Register(register) => registers.push(*register as usize),
                Slot::Unbound => return None,
            }
        }
        Some(BatchOutputs {
            lanes: &self.lanes,
            registers,
            points,
        })
    }
}

/// The outputs of [`ExprProgram::run_batch`], one column per output.
#[derive(Debug)]
pub struct BatchOutputs<'a> {
    lanes: &'a [i64],
    registers: Vec<usize>,
    points: usize,
}

impl BatchOutputs<'_> {
    /// Output `k`'s value at every point of the batch.
    pub fn column(&self, k: usize) -> &[i64] {
        let start = self.registers[k] * self.points;
        &self.lanes[start..start + self.points]
    }

    pub fn outputs(&self) -> usize {
        self.registers.len()
    }
}

impl Instruction {
    /// Executes this instruction at every point of a batch: register `r` of point `p` is
    /// `lanes[r * points + p]`. Overflows are collected in a flag rather than checked one by one,
    /// so that the loops stay branch-free.
    fn execute_lanes(self, lanes: &mut [i64], points: usize) -> Option<()> {
        let (target, left) = match self {
            Instruction::Binary { target, left, .. }
            | Instruction::AddConstant { target, left, .. }
            | Instruction::MulConstant { target, left, .. }
            | Instruction::ShiftRight { target, left, .. }
            | Instruction::Mask { target, left, .. } => (target as usize, left as usize),
        };
        // The target register is always created after its operands, so it lies above them and
        // the slice can be split there.
        let (below, above) = lanes.split_at_mut(target * points);
        let out = &mut above[..points];
        let a = &below[left * points..(left + 1) * points];
        let mut overflow = false;
        match self {
            Instruction::Binary { op, right, .. } => {
                let b = &below[right as usize * points..(right as usize + 1) * points];
                return binary_lanes(op, a, b, out);
            }
            Instruction::AddConstant { constant, .. } => {
                for (out, &a) in out.iter_mut().zip(a) {
                    let (value, o) = a.overflowing_add(constant);
                    *out = value;
                    overflow |= o;
                }
            }
            Instruction::MulConstant { constant, .. } => {
                for (out, &a) in out.iter_mut().zip(a) {
                    let (value, o) = a.overflowing_mul(constant);
                    *out = value;
                    overflow |= o;
                }
            }
            Instruction::ShiftRight { bits, .. } => {
                for (out, &a) in out.iter_mut().zip(a) {
                    *out = a >> bits;
                }
            }
            Instruction::Mask { mask, .. } => {
                for (out, &a) in out.iter_mut().zip(a) {
                    *out = a & mask;
                }
            }
        }
        (!overflow).then_some(())
    }
}

fn binary_lanes(op: Op, a: &[i64], b: &[i64], out: &mut [i64]) -> Option<()> {
    let mut overflow = false;
    let lanes = out.iter_mut().zip(a.iter().zip(b));
    match op {
        Op::Add => lanes.for_each(|(out, (&a, &b))| {
            let (value, o) = a.overflowing_add(b);
            *out = value;
            overflow |= o;
        }),
        Op::Sub => lanes.for_each(|(out, (&a, &b))| {
            let (value, o) = a.overflowing_sub(b);
            *out = value;
            overflow |= o;
        }),
        Op::Mul => lanes.for_each(|(out, (&a, &b))| {
            let (value, o) = a.overflowing_mul(b);
            *out = value;
            overflow |= o;
        }),
        Op::Min => lanes.for_each(|(out, (&a, &b))| *out = a.min(b)),
        Op::Max => lanes.for_each(|(out, (&a, &b))| *out = a.max(b)),
        Op::FloorDiv | Op::FloorMod => {
            for (out, (&a, &b)) in lanes {
                *out = apply(op, a, b)?;
            }
        }
    }
    (!overflow).then_some(())
}

fn apply(op: Op, left: i64, right: i64) -> Option<i64> {
    match op {
        Op::Add => left.checked_add(right),
        Op::Sub => left.checked_sub(right),
        Op::Mul => left.checked_mul(right),
        Op::FloorDiv => floor_div(left, right),
        Op::FloorMod => floor_mod(left, right),
        Op::Min => Some(left.min(right)),
        Op::Max => Some(left.max(right)),
    }
}

struct Compiler<'a> {
    arena: &'a ExprArena,
    inputs: &'a [VarId],
    unbound_as_zero: bool,
    registers: Vec<i64>,
    code: Vec<Instruction>,
    slots: FxHashMap<ExprId, Slot>,
}

impl Compiler<'_> {
    /// The slot of `e`, emitting code for it and its operands the first time it is seen. The
    /// recursion is as deep as the expression, which the simplifier keeps small (tile formulas are
    /// a few dozen nodes).
    fn slot(&mut self, e: ExprId) -> Slot {
        if let Some(&slot) = self.slots.get(&e) {
            return slot;
        }
        let slot = match *self.arena.get(e) {
            Expr::Int(value) => self.constant(value),
            Expr::Var(var) => match self.inputs.iter().position(|&input| input == var) {
                Some(k) => Slot::register(k),
                None if self.unbound_as_zero => self.constant(0),
                None => Slot::Unbound,
            },
            Expr::Add(a, b) => self.binary(Op::Add, a, b),
            Expr::Sub(a, b) => self.binary(Op::Sub, a, b),
            Expr::Mul(a, b) => self.binary(Op::Mul, a, b),
            Expr::FloorDiv(a, b) => self.binary(Op::FloorDiv, a, b),
            Expr::FloorMod(a, b) => self.binary(Op::FloorMod, a, b),
            Expr::Min(a, b) => self.binary(Op::Min, a, b),
            Expr::Max(a, b) => self.binary(Op::Max, a, b),
        };
        self.slots.insert(e, slot);
        slot
    }

    fn constant(&mut self, value: i64) -> Slot {
        self.registers.push(value);
        Slot::register(self.registers.len() - 1)
    }

    fn binary(&mut self, op: Op, a: ExprId, b: ExprId) -> Slot {
        let (Slot::Register(left), Slot::Register(right)) = (self.slot(a), self.slot(b)) else {
            return Slot::Unbound;
        };
        self.registers.push(0);
        let Slot::Register(target) = Slot::register(self.registers.len() - 1) else {
            return Slot::Unbound;
        };
        let constant = match *self.arena.get(b) {
            Expr::Int(value) => Some(value),
            _ => None,
        };
        let instruction = match (op, constant) {
            (Op::Add, Some(constant)) => Instruction::AddConstant {
                target,
                left,
                constant,
            },
            (Op::Mul, Some(constant)) => Instruction::MulConstant {
                target,
                left,
                constant,
            },
            (Op::FloorDiv, Some(constant)) if constant > 0 && constant.count_ones() == 1 => {
                Instruction::ShiftRight {
                    target,
                    left,
                    bits: constant.trailing_zeros(),
                }
            }
            (Op::FloorMod, Some(constant)) if constant > 0 && constant.count_ones() == 1 => {
                Instruction::Mask {
                    target,
                    left,
                    mask: constant - 1,
                }
            }
            _ => Instruction::Binary {
                op,
                target,
                left,
                right,
            },
        };
        self.code.push(instruction);
        Slot::Register(target)
    }
}

#[cfg(test)]
mod tests {
    use super::ExprProgram;
    use crate::expr::ExprArena;

    #[test]
    fn programs_agree_with_the_recursive_evaluator() {
        let mut arena = ExprArena::new();
        let i = arena.var("i", Some(16));
        let j = arena.var("j", Some(32));
        let (ie, je) = (arena.var_expr(i), arena.var_expr(j));
        let eight = arena.int(8);
        let four = arena.int(4);
        let quotient = arena.floordiv(je, eight);
        let thread = arena.add(quotient, ie);
        let scaled = arena.mul(thread, four);
        let remainder = arena.floormod(je, four);
        let index = arena.sub(remainder, scaled);
        let mut program = ExprProgram::compile(&arena, &[i, j], &[thread, index]);
        for a in -16..16 {
            for b in -32..32 {
                let env = |v| Some(if v == i { a } else { b });
                let expected = [arena.eval(thread, &env), arena.eval(index, &env)];
                let got = program.run(&[a, b]).map(<[i64]>::to_vec);
                assert_eq!(got, expected.into_iter().collect::<Option<Vec<_>>>());
            }
        }
    }

    #[test]
    fn batches_agree_with_single_runs() {
        let mut arena = ExprArena::new();
        let i = arena.var("i", Some(8));
        let j = arena.var("j", Some(8));
        let (ie, je) = (arena.var_expr(i), arena.var_expr(j));
        let three = arena.int(3);
        let four = arena.int(4);
        let quotient = arena.floordiv(je, three);
        let masked = arena.floormod(ie, four);
        let product = arena.mul(ie, je);
        let sum = arena.add(quotient, product);
        let smaller = arena.min(sum, masked);
        let outputs = [sum, smaller, masked];
        let mut program = ExprProgram::compile(&arena, &[i, j], &outputs);
        let (mut is, mut js) = (Vec::new(), Vec::new());
        for a in -8..8 {
            for b in -8..8 {
                is.push(a);
                js.push(b);
            }
        }
        let expected: Vec<Vec<i64>> = is
            .iter()
            .zip(&js)
            .map(|(&a, &b)| program.clone().run(&[a, b]).map(<[i64]>::to_vec))
            .collect::<Option<_>>()
            .expect("every point evaluates");
        let batch = program
            .run_batch(&[&is, &js], is.len())
            .expect("the batch evaluates");
        for (point, values) in expected.iter().enumerate() {
            for (k, &value) in values.iter().enumerate() {
                assert_eq!(batch.column(k)[point], value, "output {k} at point {point}");
            }
        }
    }

    #[test]
    fn unbound_variables_and_division_by_zero_fail() {
        let mut arena = ExprArena::new();
        let i = arena.var("i", Some(4));
        let k = arena.var("k", None);
        let (ie, ke) = (arena.var_expr(i), arena.var_expr(k));
        let sum = arena.add(ie, ke);
        assert_eq!(ExprProgram::compile(&arena, &[i], &[sum]).run(&[1]), None);
        let divided = arena.floordiv(ie, ke);
        let mut program = ExprProgram::compile(&arena, &[i, k], &[divided]);
        assert_eq!(program.run_one(&[3, 0]), None);
        assert_eq!(program.run_one(&[-3, 2]), Some(-2));
        assert!(program.run_batch(&[&[1, 2], &[1, 0]], 2).is_none());
    }
}
