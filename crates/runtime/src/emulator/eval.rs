//! Values evaluated column-wise: one column of `f64` per value node, one entry per executing thread.
//!
//! A statement evaluates its values for all threads that execute it ("lanes", numbered by position in
//! the statement's thread list). Each node is evaluated once per statement (the memo) even when two
//! subtrees share it, which is also what makes [`Value::ShuffleXor`] lockstep-exact: the partner's
//! operand is the entry of the same column.
//!
//! A `Select` evaluates each side only for the lanes that pick it, as C's `?:` does, so a guarded
//! load in the unpicked side is never checked. Narrowing the lanes opens a scope: a column computed
//! in a scope covers all lanes of that scope, so it serves nested (smaller) scopes too, and it is
//! forgotten when its scope closes, before a sibling scope with other lanes could use it.

use std::borrow::Cow;

use tilec_ir::DType;
use tilec_ir::data::{BinaryOp, ShuffleKind};
use tilec_ir::thread::{FusedMultiplyAdd, Value, ValueId};

use super::Machine;
use super::arith;
use super::error::{ErrorKind, Fault};
use super::thread_u32;
use crate::tensor::round_to;

/// No column, no lane.
const NONE: u32 = u32::MAX;
/// How deeply value nodes may nest; deeper programs are refused rather than overflowing the stack.
const MAX_NESTING: u32 = 2048;

/// A user shuffle's kind, the columns of its value, lane, width and mask operands, and the
/// rounding to its dtype.
struct UserShuffle<R> {
    kind: ShuffleKind,
    columns: [usize; 4],
    round: R,
}

/// The per-statement evaluation state.
#[derive(Debug, Default)]
pub(super) struct Frame {
    /// Lanes of the running statement.
    lanes: usize,
    /// The column pool; the first `used` are this statement's.
    columns: Vec<Vec<f64>>,
    used: usize,
    /// Per value node, its column in this statement, or [`NONE`].
    memo: Vec<u32>,
    /// Memo entries made in this statement, with the scope depth they were made at.
    touched: Vec<(u32, u32)>,
    depth: u32,
    /// Per lane, the depth of the innermost open scope that contains it.
    in_scope: Vec<u32>,
    /// Per thread of the block, its lane in this statement (filled on first use by a shuffle).
    lane_of: Vec<u32>,
    lane_of_ready: bool,
}

impl Frame {
    pub(super) fn new(values: usize) -> Frame {
        Frame {
            memo: vec![NONE; values],
            ..Frame::default()
        }
    }

    /// Starts a statement executed by `lanes` threads.
    pub(super) fn begin(&mut self, lanes: usize) {
        for (value, _) in self.touched.drain(..) {
            if let Some(slot) = self.memo.get_mut(value as usize) {
                *slot = NONE;
            }
        }
        self.lanes = lanes;
        self.used = 0;
        self.depth = 0;
        self.in_scope.clear();
        self.in_scope.resize(lanes, 0);
        self.lane_of_ready = false;
    }

    /// A fresh column for this statement.
    fn alloc(&mut self) -> usize {
        if self.used == self.columns.len() {
            self.columns.push(Vec::new());
        }
        let column = self.used;
        self.columns[column].resize(self.lanes, 0.0);
        self.used += 1;
        column
    }

    fn lookup(&self, value: ValueId) -> Option<usize> {
        self.memo
            .get(value.index())
            .filter(|&&column| column != NONE)
            .map(|&column| column as usize)
    }

    fn remember(&mut self, value: ValueId, column: usize) {
        if let Some(slot) = self.memo.get_mut(value.index()) {
            // A column past `u32::MAX` is not remembered (it reads as `NONE`), never aliased.
            *slot = u32::try_from(column).unwrap_or(NONE);
            self.touched.push((value.0, self.depth));
        }
    }

    fn open_scope(&mut self, lanes: &[u32]) {
        self.depth += 1;
        for &lane in lanes {
            self.in_scope[lane as usize] = self.depth;
        }
    }

    fn close_scope(&mut self, lanes: &[u32]) {
        while let Some(&(value, depth)) = self.touched.last() {
            if depth < self.depth {
                break;
            }
            self.memo[value as usize] = NONE;
            self.touched.pop();
        }
        self.depth -= 1;
        for &lane in lanes {
            self.in_scope[lane as usize] = self.depth;
        }
    }

    /// The values of `column`, one per lane.
    pub(super) fn column(&self, column: usize) -> &[f64] {
        self.columns.get(column).map_or(&[], Vec::as_slice)
    }

    /// Takes a column out of the pool to fill it (put it back with [`Frame::put`]).
    fn take(&mut self, column: usize) -> Vec<f64> {
        std::mem::take(&mut self.columns[column])
    }

    fn put(&mut self, column: usize, values: Vec<f64>) {
        self.columns[column] = values;
    }
}

impl Machine<'_, '_> {
    /// Evaluates `value` for every lane of a statement executed by `active`.
    pub(super) fn eval_all(&mut self, value: ValueId, active: &[u32]) -> Result<usize, Fault> {
        let lanes: Vec<u32> = (0..thread_u32(active.len())).collect();
        self.eval(value, active, &lanes, MAX_NESTING)
    }

    /// Evaluates `value` for the lanes `sel`, which are exactly the lanes of the innermost open scope;
    /// returns its column.
    fn eval(
        &mut self,
        value: ValueId,
        active: &[u32],
        sel: &[u32],
        nesting: u32,
    ) -> Result<usize, Fault> {
        if let Some(column) = self.frame.lookup(value) {
            return Ok(column);
        }
        let nesting = nesting.checked_sub(1).ok_or_else(|| {
            self.fault(ErrorKind::Malformed("values nest too deeply".into()), None)
        })?;
        let program = self.program;
        let node = program.values.get(value.index()).ok_or_else(|| {
            self.fault(
                ErrorKind::Malformed(format!("value id {} out of range", value.index())),
                None,
            )
        })?;
        if let Some(fused) = program.fused_multiply_add(value) {
            let column = self.fused_multiply_add(fused, active, sel, nesting)?;
            self.frame.remember(value, column);
            return Ok(column);
        }
        let column = match *node {
            Value::Float { bits, dtype } => {
                self.constant(sel, round_to(dtype, f64::from_bits(bits)))
            }
            Value::Int { value, dtype } => self.constant(sel, arith::int_constant(dtype, value)),
            Value::Index(e) => self.index_value(e, active, sel)?,
            Value::Load { buffer, index } => self.load(buffer.index(), index, active, sel)?,
            Value::Unary { op, arg, dtype } => {
                let arg = self.eval(arg, active, sel, nesting)?;
                self.map1(arg, active, sel, |x| arith::unary(op, dtype, x))?
            }
            Value::Binary {
                op: op @ (BinaryOp::And | BinaryOp::Or),
                lhs,
                rhs,
                dtype,
            } => self.short_circuit(op, [lhs, rhs], active, sel, (nesting, dtype))?,
            Value::Binary {
                op,
                lhs,
                rhs,
                dtype,
            } => {
                let lhs = self.eval(lhs, active, sel, nesting)?;
                let rhs = self.eval(rhs, active, sel, nesting)?;
                match arith::fast_binary(op, dtype) {
                    Some(fast) => self.map2_fast(lhs, rhs, sel, fast),
                    None => {
                        self.map2(lhs, rhs, active, sel, |a, b| arith::binary(op, dtype, a, b))?
                    }
                }
            }
            Value::Compare { op, lhs, rhs } => {
                let lhs = self.eval(lhs, active, sel, nesting)?;
                let rhs = self.eval(rhs, active, sel, nesting)?;
                self.map2(lhs, rhs, active, sel, |a, b| Ok(arith::compare(op, a, b)))?
            }
            Value::Cast { dtype, value } => {
                let value = self.eval(value, active, sel, nesting)?;
                self.map1(value, active, sel, |x| Ok(arith::cast(dtype, x)))?
            }
            Value::Select {
                cond,
                then,
                otherwise,
                dtype,
            } => self.select(
                [cond, then, otherwise],
                active,
                sel,
                nesting,
                arith::rounder(dtype),
            )?,
            Value::ShuffleXor { value, mask, dtype } => {
                let operand = self.eval(value, active, sel, nesting)?;
                self.shuffle(operand, mask, active, sel, arith::rounder(dtype))?
            }
            Value::Shuffle {
                kind,
                value,
                lane,
                width,
                mask,
                dtype,
            } => {
                let mut columns = [0; 4];
                for (slot, operand) in columns.iter_mut().zip([value, lane, width, mask]) {
                    *slot = self.eval(operand, active, sel, nesting)?;
                }
                let operands = UserShuffle {
                    kind,
                    columns,
                    round: arith::rounder(dtype),
                };
                self.user_shuffle(operands, active, sel)?
            }
            Value::Random(kind) => {
                let threads = Self::threads_of(active, sel);
                let drawn = self.draw_random(kind, &threads)?;
                let column = self.frame.alloc();
                let mut out = self.frame.take(column);
                for (&lane, value) in sel.iter().zip(drawn) {
                    out[lane as usize] = value;
                }
                self.frame.put(column, out);
                column
            }
        };
        self.frame.remember(value, column);
        Ok(column)
    }

    fn constant(&mut self, sel: &[u32], value: f64) -> usize {
        let column = self.frame.alloc();
        let mut out = self.frame.take(column);
        for &lane in sel {
            out[lane as usize] = value;
        }
        self.frame.put(column, out);
        column
    }

    /// The threads of the lanes `sel`: `active` itself when `sel` is every lane.
    fn threads_of<'a>(active: &'a [u32], sel: &[u32]) -> Cow<'a, [u32]> {
        if sel.len() == active.len() {
            // `sel` is a subset of the lanes in ascending order, so all of them in order.
            return Cow::Borrowed(active);
        }
        let threads = sel
            .iter()
            .map(|&lane| active.get(lane as usize).copied().unwrap_or(0));
        Cow::Owned(threads.collect())
    }

    fn index_value(
        &mut self,
        e: tilec_ir::ExprId,
        active: &[u32],
        sel: &[u32],
    ) -> Result<usize, Fault> {
        let threads = Self::threads_of(active, sel);
        let indices = self.index(e, &threads, None)?;
        let column = self.frame.alloc();
        let mut out = self.frame.take(column);
        for (&lane, &index) in sel.iter().zip(&indices) {
            out[lane as usize] = arith::wrap_int(DType::Int32, index) as f64;
        }
        self.frame.put(column, out);
        Ok(column)
    }

    fn load(
        &mut self,
        buffer: usize,
        e: tilec_ir::ExprId,
        active: &[u32],
        sel: &[u32],
    ) -> Result<usize, Fault> {
        let threads = Self::threads_of(active, sel);
        let indices = self.index(e, &threads, Some(buffer))?;
        let Some(info) = self.buffers.get(buffer) else {
            let message = format!("buffer id {buffer} out of range");
            return Err(self.fault(ErrorKind::Malformed(message), None));
        };
        let column = self.frame.alloc();
        let mut out = self.frame.take(column);
        let loaded = self
            .memory
            .load_lanes(info, &threads, &indices, sel, &mut out);
        self.frame.put(column, out);
        loaded.map_err(|(kind, thread)| self.fault(kind, Some(thread)))?;
        Ok(column)
    }

    /// A new column with `f` applied to `arg` in every lane of `sel`.
    fn map1(
        &mut self,
        arg: usize,
        active: &[u32],
        sel: &[u32],
        f: impl Fn(f64) -> Result<f64, String>,
    ) -> Result<usize, Fault> {
        let column = self.frame.alloc();
        let mut out = self.frame.take(column);
        let a = self.frame.column(arg);
        for &lane in sel {
            let lane = lane as usize;
            out[lane] = f(a[lane]).map_err(|message| self.arithmetic(message, active, lane))?;
        }
        self.frame.put(column, out);
        Ok(column)
    }

    fn map2(
        &mut self,
        lhs: usize,
        rhs: usize,
        active: &[u32],
        sel: &[u32],
        f: impl Fn(f64, f64) -> Result<f64, String>,
    ) -> Result<usize, Fault> {
        let column = self.frame.alloc();
        let mut out = self.frame.take(column);
        let (a, b) = (self.frame.column(lhs), self.frame.column(rhs));
        for &lane in sel {
            let lane = lane as usize;
            out[lane] =
                f(a[lane], b[lane]).map_err(|message| self.arithmetic(message, active, lane))?;
        }
        self.frame.put(column, out);
        Ok(column)
    }

    /// `±(a × b) ± c` in single precision with one rounding, as CUDA's `fmaf` computes it: the
    /// operands are converted to `f32` first, as C converts `fmaf`'s arguments.
    fn fused_multiply_add(
        &mut self,
        fused: FusedMultiplyAdd,
        active: &[u32],
        sel: &[u32],
        nesting: u32,
    ) -> Result<usize, Fault> {
        let a = self.eval(fused.a, active, sel, nesting)?;
        let b = self.eval(fused.b, active, sel, nesting)?;
        let c = self.eval(fused.c, active, sel, nesting)?;
        let product_sign = if fused.negate_product { -1.0f32 } else { 1.0 };
        let addend_sign = if fused.negate_addend { -1.0f32 } else { 1.0 };
        let column = self.frame.alloc();
        let mut out = self.frame.take(column);
        let (a, b, c) = (
            self.frame.column(a),
            self.frame.column(b),
            self.frame.column(c),
        );
        for &lane in sel {
            let lane = lane as usize;
            // The operands are f32 values, which `as f32` keeps exactly.
            #[allow(clippy::cast_possible_truncation)]
            let (x, y, z) = (a[lane] as f32, b[lane] as f32, c[lane] as f32);
            out[lane] = f64::from((product_sign * x).mul_add(y, addend_sign * z));
        }
        self.frame.put(column, out);
        Ok(column)
    }

    /// [`Machine::map2`] for an operation that cannot fail, in a plain loop.
    fn map2_fast(&mut self, lhs: usize, rhs: usize, sel: &[u32], f: fn(f64, f64) -> f64) -> usize {
        let column = self.frame.alloc();
        let mut out = self.frame.take(column);
        let (a, b) = (self.frame.column(lhs), self.frame.column(rhs));
        if a.len() == out.len() && b.len() == out.len() {
            let mut k = 0;
            while k < sel.len() {
                let lane = sel[k] as usize;
                out[lane] = f(a[lane], b[lane]);
                k += 1;
            }
        }
        self.frame.put(column, out);
        column
    }

    fn arithmetic(&self, message: String, active: &[u32], lane: usize) -> Fault {
        self.fault(ErrorKind::Arithmetic(message), active.get(lane).copied())
    }

    /// `cond ? then : otherwise`, evaluating each side only in the lanes that pick it.
    fn select(
        &mut self,
        [cond, then, otherwise]: [ValueId; 3],
        active: &[u32],
        sel: &[u32],
        nesting: u32,
        round: impl Fn(f64) -> f64,
    ) -> Result<usize, Fault> {
        let cond = self.eval(cond, active, sel, nesting)?;
        let picks = self.frame.column(cond);
        let (yes, no): (Vec<u32>, Vec<u32>) =
            sel.iter().partition(|&&lane| picks[lane as usize] != 0.0);
        let then = self.eval_in_scope(then, active, sel, &yes, nesting)?;
        let otherwise = self.eval_in_scope(otherwise, active, sel, &no, nesting)?;
        let column = self.frame.alloc();
        let mut out = self.frame.take(column);
        for (lanes, side) in [(&yes, then), (&no, otherwise)] {
            let Some(side) = side else { continue };
            let values = self.frame.column(side);
            for &lane in lanes {
                out[lane as usize] = round(values[lane as usize]);
            }
        }
        self.frame.put(column, out);
        Ok(column)
    }

    /// `lhs && rhs` and `lhs || rhs` as C evaluates them: `rhs` only on the lanes `lhs` does not
    /// decide, so that a guard such as `i < j && buf[j] > buf[i]` reads nothing where it fails
    /// (the race detector and the bounds checks see the accesses the GPU makes).
    fn short_circuit(
        &mut self,
        op: BinaryOp,
        [lhs, rhs]: [ValueId; 2],
        active: &[u32],
        sel: &[u32],
        (nesting, dtype): (u32, DType),
    ) -> Result<usize, Fault> {
        let lhs = self.eval(lhs, active, sel, nesting)?;
        let decided_by_lhs = if op == BinaryOp::And { 0.0 } else { 1.0 };
        let values = self.frame.column(lhs);
        let (undecided, decided): (Vec<u32>, Vec<u32>) = sel
            .iter()
            .partition(|&&lane| (values[lane as usize] != 0.0) == (op == BinaryOp::And));
        let rhs = self.eval_in_scope(rhs, active, sel, &undecided, nesting)?;
        let column = self.frame.alloc();
        let mut out = self.frame.take(column);
        for &lane in &decided {
            out[lane as usize] = round_to(dtype, decided_by_lhs);
        }
        if let Some(rhs) = rhs {
            let values = self.frame.column(rhs);
            for &lane in &undecided {
                let truth = f64::from(u8::from(values[lane as usize] != 0.0));
                out[lane as usize] = round_to(dtype, truth);
            }
        }
        self.frame.put(column, out);
        Ok(column)
    }

    /// Evaluates `value` for `sub`, a subset of the current scope's lanes `sel`, opening a narrower
    /// scope when it is a proper subset; `None` when `sub` is empty.
    fn eval_in_scope(
        &mut self,
        value: ValueId,
        active: &[u32],
        sel: &[u32],
        sub: &[u32],
        nesting: u32,
    ) -> Result<Option<usize>, Fault> {
        if sub.is_empty() {
            return Ok(None);
        }
        if sub.len() == sel.len() {
            return self.eval(value, active, sel, nesting).map(Some);
        }
        self.frame.open_scope(sub);
        let column = self.eval(value, active, sub, nesting);
        self.frame.close_scope(sub);
        column.map(Some)
    }

    /// Lane `t` gets `operand` of thread `t ^ mask` of its warp, which must be executing too.
    fn shuffle(
        &mut self,
        operand: usize,
        mask: u32,
        active: &[u32],
        sel: &[u32],
        round: impl Fn(f64) -> f64,
    ) -> Result<usize, Fault> {
        self.fill_lane_of(active);
        let column = self.frame.alloc();
        let mut out = self.frame.take(column);
        let values = self.frame.column(operand);
        for &lane in sel {
            let thread = active.get(lane as usize).copied().unwrap_or(0);
            let partner = (thread & !31) | ((thread & 31) ^ mask);
            let partner_lane = self
                .frame
                .lane_of
                .get(partner as usize)
                .copied()
                .unwrap_or(NONE);
            let in_scope = self
                .frame
                .in_scope
                .get(partner_lane as usize)
                .is_some_and(|&d| d == self.frame.depth);
            if !in_scope {
                let kind = ErrorKind::ShuffleInactiveLane {
                    partner: i64::from(partner),
                    mask,
                };
                return Err(self.fault(kind, Some(thread)));
            }
            out[lane as usize] = round(values[partner_lane as usize]);
        }
        self.frame.put(column, out);
        Ok(column)
    }

    /// A shuffle the user wrote: each lane of `sel` reads the value column of the lane that
    /// [`ShuffleKind::source_lane`] picks. CUDA requires every thread of the lane mask to execute
    /// the shuffle, the executing thread to be in its own mask, a power-of-two width up to 32 and
    /// a source lane that executes it; anything else is undefined on the GPU and reported here.
    /// Lanes of the mask past the block's last thread do not exist and count as exited.
    fn user_shuffle(
        &mut self,
        shuffle: UserShuffle<impl Fn(f64) -> f64>,
        active: &[u32],
        sel: &[u32],
    ) -> Result<usize, Fault> {
        self.fill_lane_of(active);
        let intrinsic = shuffle.kind.intrinsic();
        let [values, lanes, widths, masks] = shuffle.columns;
        let column = self.frame.alloc();
        let mut out = self.frame.take(column);
        for &lane in sel {
            let thread = active.get(lane as usize).copied().unwrap_or(0);
            let at = |c: usize| {
                self.frame
                    .column(c)
                    .get(lane as usize)
                    .copied()
                    .unwrap_or(0.0)
            };
            // The operands are whole numbers of integer types, exact in i64. A mask is 32 bits
            // whatever its type, so a negative int32 mask keeps its bits, as on the GPU.
            #[allow(
                clippy::cast_possible_truncation,
                clippy::cast_sign_loss,
                clippy::cast_possible_wrap
            )]
            let (mask, width, operand) =
                (at(masks) as i64 as u32, at(widths) as i64, at(lanes) as i64);
            let own = thread & 31;
            let operand_fault = |message: String| ErrorKind::ShuffleOperands { intrinsic, message };
            if !matches!(width, 1 | 2 | 4 | 8 | 16 | 32) {
                let message = format!("width {width} is not a power of two from 1 to 32");
                return Err(self.fault(operand_fault(message), Some(thread)));
            }
            if mask & (1 << own) == 0 {
                let message = format!("the executing lane {own} is not in the mask {mask:#010x}");
                return Err(self.fault(operand_fault(message), Some(thread)));
            }
            let warp = thread & !31;
            for bit in (0..32).filter(|bit| mask & (1 << bit) != 0) {
                let member = warp + bit;
                if self.shuffle_lane(member).is_none() && self.is_live(member) {
                    let kind = ErrorKind::ShuffleDivergent {
                        intrinsic,
                        mask,
                        missing: i64::from(member),
                    };
                    return Err(self.fault(kind, Some(thread)));
                }
            }
            // The width was checked to be a power of two from 1 to 32 above.
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
            let source = warp + shuffle.kind.source_lane(own, operand, width as u32);
            let source_lane = self
                .shuffle_lane(source)
                .filter(|_| mask & (1 << (source & 31)) != 0);
            let Some(source_lane) = source_lane else {
                let kind = ErrorKind::ShuffleSource {
                    intrinsic,
                    source: i64::from(source),
                };
                return Err(self.fault(kind, Some(thread)));
            };
            let value = self.frame.column(values)[source_lane];
            out[lane as usize] = (shuffle.round)(value);
        }
        self.frame.put(column, out);
        Ok(column)
    }

    /// The lane of the running statement through which `thread` evaluates the current node, if
    /// it does (it executes the statement and is in the innermost scope).
    fn shuffle_lane(&self, thread: u32) -> Option<usize> {
        let lane = *self.frame.lane_of.get(thread as usize)?;
        let in_scope = self
            .frame
            .in_scope
            .get(lane as usize)
            .is_some_and(|&depth| depth == self.frame.depth);
        in_scope.then_some(lane as usize)
    }

    /// Whether `thread` exists in the block and has not returned.
    fn is_live(&self, thread: u32) -> bool {
        (thread as usize) < self.threads
            && !self.exited.get(thread as usize).copied().unwrap_or(true)
    }

    /// Fills the thread → lane map of the running statement.
    fn fill_lane_of(&mut self, active: &[u32]) {
        if self.frame.lane_of_ready {
            return;
        }
        self.frame.lane_of.clear();
        self.frame.lane_of.resize(self.threads, NONE);
        for (lane, &thread) in active.iter().enumerate() {
            if let Some(slot) = self.frame.lane_of.get_mut(thread as usize) {
                *slot = thread_u32(lane);
            }
        }
        self.frame.lane_of_ready = true;
    }
}
