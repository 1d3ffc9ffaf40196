//! Element values as inline C expressions.
//!
//! A value prints where it is used, its operands inline (except the statement's temporaries, which
//! print by name, see `hoist.rs`). Values of the 16-bit and 8-bit float types are C `float`s holding
//! exactly a value of the type: loads widen exactly, and every result that can leave the type's
//! value set (arithmetic, casts, math functions) is rounded back with the prelude's `tl_round_*` at
//! once. Operations that cannot leave it on operands of the same type (negation, absolute value,
//! select, shuffle) are not rounded.

use tilec_ir::data::{BinaryOp, Intrinsic};
use tilec_ir::thread::{BufferId, FusedMultiplyAdd, Memory, UnaryOp, Value, ValueId};
use tilec_ir::{DType, ExprId};

use super::Printer;
use super::index::IndexType;
use super::literal::{double_literal, float_literal, int_literal, round_to_dtype};
use super::types::{compute_type, computes_as_float, is_small_int, nibble_load, packed, wrap_int};

/// A printed C expression.
#[derive(Clone, Debug)]
pub(super) struct CExpr {
    pub text: String,
    /// Whether the text is one operand (a name, a call, a subscript, a non-negative literal) that
    /// needs no parentheses in any context.
    pub atomic: bool,
    /// For `+ - * / %`, the operator's C precedence: an operand that binds at least as tightly
    /// needs no parentheses, so that `a + b + c` prints as written.
    pub prec: Option<u8>,
    /// For a result rounded to a type stored as bits, the text before rounding: a store narrows it
    /// directly, since narrowing a rounded value gives the same bits.
    pub unrounded: Option<String>,
    /// For a load of a type stored as bits, the element itself: a store of it to a buffer of the
    /// same type copies the bits instead of widening and narrowing them.
    pub stored: Option<String>,
}

impl CExpr {
    fn atom(text: String) -> Self {
        CExpr {
            text,
            atomic: true,
            prec: None,
            unrounded: None,
            stored: None,
        }
    }

    fn compound(text: String) -> Self {
        CExpr {
            text,
            atomic: false,
            prec: None,
            unrounded: None,
            stored: None,
        }
    }

    /// `lhs op rhs` for an arithmetic operator of precedence `prec`; C's operators associate to
    /// the left, so the right operand needs parentheses at equal precedence.
    fn arithmetic(lhs: &CExpr, op: &str, rhs: &CExpr, prec: u8) -> Self {
        CExpr {
            prec: Some(prec),
            ..CExpr::compound(format!("{} {op} {}", lhs.at(prec), rhs.at(prec + 1)))
        }
    }

    /// `inner` rounded by the prelude function `round`.
    fn rounded(round: &str, inner: String) -> Self {
        CExpr {
            text: format!("{round}({inner})"),
            atomic: true,
            prec: None,
            unrounded: Some(inner),
            stored: None,
        }
    }

    /// The text as an operand of an arithmetic operator of precedence `min_prec`.
    fn at(&self, min_prec: u8) -> String {
        if self.atomic || self.prec.is_some_and(|p| p >= min_prec) {
            self.text.clone()
        } else {
            format!("({})", self.text)
        }
    }

    /// The text for use as an operand of an operator, parenthesized unless atomic.
    pub(super) fn operand(&self) -> String {
        if self.atomic {
            self.text.clone()
        } else {
            format!("({})", self.text)
        }
    }
}

impl Printer<'_> {
    /// The dtype of a value, or `None` for a dangling id.
    pub(super) fn dtype_of(&self, id: ValueId) -> Option<DType> {
        let program = self.program;
        let value = program.values.get(id.index())?;
        Some(match value {
            Value::Load { buffer, .. } => program.buffers.get(buffer.index())?.dtype,
            _ => program.dtype_of(id),
        })
    }

    /// `value` printed as the root of a statement's expression, with its dtype.
    pub(super) fn root_value(&mut self, id: ValueId) -> (CExpr, DType) {
        self.value(id)
    }

    /// An operand of value `parent`. Operands precede the values that use them, which also rules
    /// out cycles in a malformed program.
    fn operand(&mut self, parent: ValueId, id: ValueId) -> (CExpr, DType) {
        if id >= parent {
            return self.invalid_value("a value uses a value defined after it");
        }
        self.value(id)
    }

    fn value(&mut self, id: ValueId) -> (CExpr, DType) {
        let Some(dtype) = self.dtype_of(id) else {
            return self.invalid_value("a value or the buffer it loads is not in the program");
        };
        if let Some(name) = self.temporaries.get(&id) {
            return (CExpr::atom(name.clone()), dtype);
        }
        if !self.spend() || self.depth > super::MAX_DEPTH {
            return self.invalid_value("an expression is too large to print inline");
        }
        self.depth += 1;
        let expr = self.value_node(id, dtype);
        self.depth -= 1;
        (expr, dtype)
    }

    fn value_node(&mut self, id: ValueId, dtype: DType) -> CExpr {
        let program = self.program;
        match program.values[id.index()] {
            Value::Float { bits, .. } => self.float_const(f64::from_bits(bits), dtype),
            Value::Int { value, .. } => self.int_const(value, dtype),
            Value::Index(e) => self.index_value(e),
            Value::Load { buffer, index } => self.load(buffer, index),
            Value::Unary { op, arg, .. } => self.unary(id, op, arg, dtype),
            Value::Binary { op, lhs, rhs, .. } => self.binary_value(id, op, (lhs, rhs), dtype),
            Value::Compare { op, lhs, rhs } => {
                let (a, _) = self.operand(id, lhs);
                let (b, _) = self.operand(id, rhs);
                CExpr::compound(format!("{} {} {}", a.operand(), op.symbol(), b.operand()))
            }
            Value::Cast { value, .. } => {
                let (x, from) = self.operand(id, value);
                self.convert(x, from, dtype)
            }
            Value::Select {
                cond,
                then,
                otherwise,
                ..
            } => self.select(id, (cond, then, otherwise), dtype),
            Value::ShuffleXor { value, mask, .. } => self.shuffle(id, value, mask, dtype),
            Value::Shuffle {
                kind,
                value,
                lane,
                width,
                mask,
                ..
            } => self.user_shuffle(id, kind, [value, lane, width, mask], dtype),
            Value::Random(kind) => self.random(kind),
        }
    }

    /// A placeholder for a value that cannot be printed; the problem is reported.
    fn invalid_value(&mut self, message: &str) -> (CExpr, DType) {
        let comment = self.invalid(message);
        (CExpr::atom(format!("0 {comment}")), DType::Int32)
    }

    fn invalid_expr(&mut self, message: &str) -> CExpr {
        self.invalid_value(message).0
    }
}

/// Constants, loads and indices.
impl Printer<'_> {
    /// A float constant of `dtype`, rounded to the type first as the emulator holds it.
    fn float_const(&mut self, value: f64, dtype: DType) -> CExpr {
        if dtype == DType::Float64 {
            return special_or_literal(value, double_literal(value), "tl_double");
        }
        if computes_as_float(dtype) {
            // Already rounded to a type no wider than `f32`, so exact (or an infinity).
            #[allow(clippy::cast_possible_truncation)]
            let rounded = round_to_dtype(value, dtype) as f32;
            return special_or_literal(f64::from(rounded), float_literal(rounded), "tl_float");
        }
        let literal = self.float_const(value, DType::Float64);
        self.convert(literal, DType::Float64, dtype)
    }

    fn int_const(&mut self, value: i64, dtype: DType) -> CExpr {
        if dtype.is_float() {
            return self.float_const(value as f64, dtype);
        }
        if dtype == DType::Bool {
            return CExpr::atom(if value != 0 { "true" } else { "false" }.to_owned());
        }
        let text = int_literal(value, dtype);
        if text.starts_with('-') {
            CExpr::compound(text)
        } else {
            CExpr::atom(text)
        }
    }

    /// An index expression as an `int32` value.
    fn index_value(&mut self, e: ExprId) -> CExpr {
        let index = self.index(e);
        match (index.ty, index.atomic) {
            (IndexType::Long, true) => CExpr::compound(format!("(int){}", index.text)),
            (IndexType::Long, false) => CExpr::compound(format!("(int)({})", index.text)),
            (IndexType::Int, true) => CExpr::atom(index.text),
            (IndexType::Int, false) => CExpr::compound(index.text),
        }
    }

    /// `buffer[index]`, widened to float for the types stored as bits.
    fn load(&mut self, buffer: BufferId, index: ExprId) -> CExpr {
        // Packed 4-bit memory is read element by element through the prelude.
        let element = match self.packed_memory(buffer) {
            Some(_) => self.nibble_element(buffer, index),
            None => self.element(buffer, index),
        };
        let Some(element) = element else {
            return self.invalid_expr("a load from a buffer that could not be declared");
        };
        let dtype = self.program.buffers[buffer.index()].dtype;
        match packed(dtype) {
            Some(p) => CExpr {
                stored: Some(element.clone()),
                ..CExpr::atom(format!("{}({element})", p.to_float))
            },
            None => CExpr::atom(element),
        }
    }

    /// The dtype of `buffer` when it holds 4-bit elements packed two a byte (in global or shared
    /// memory; registers keep a byte per element).
    pub(super) fn packed_memory(&self, buffer: BufferId) -> Option<DType> {
        let decl = self.program.buffers.get(buffer.index())?;
        (decl.dtype.is_sub_byte() && decl.memory != Memory::Local).then_some(decl.dtype)
    }

    /// `tl_load_*(name, index)` for an element of packed 4-bit memory (an rvalue of the element's
    /// storage type); `None` for any other buffer, or one that could not be declared.
    pub(super) fn nibble_element(&mut self, buffer: BufferId, index: ExprId) -> Option<String> {
        let function = nibble_load(self.packed_memory(buffer)?)?;
        let name = self.buffers.get(buffer.index()).cloned().flatten()?;
        let index = self.index(index);
        Some(format!("{function}({name}, {})", index.text))
    }

    /// The lvalue `name[index]` of a buffer element; `None` for an undeclared buffer.
    pub(super) fn element(&mut self, buffer: BufferId, index: ExprId) -> Option<String> {
        let name = self.buffers.get(buffer.index()).cloned().flatten()?;
        let index = self.index(index);
        Some(format!("{name}[{}]", index.text))
    }
}

/// `value` as a literal, or through the prelude's constants for NaN and the infinities
/// (`tl_float_inf()`), which have no literal.
fn special_or_literal(value: f64, literal: Option<String>, prefix: &str) -> CExpr {
    match literal {
        Some(text) if text.starts_with('-') => CExpr::compound(text),
        Some(text) => CExpr::atom(text),
        None if value.is_nan() => CExpr::atom(format!("{prefix}_nan()")),
        None if value < 0.0 => CExpr::compound(format!("-{prefix}_inf()")),
        None => CExpr::atom(format!("{prefix}_inf()")),
    }
}

/// Operators.
impl Printer<'_> {
    fn unary(&mut self, id: ValueId, op: UnaryOp, arg: ValueId, dtype: DType) -> CExpr {
        let (x, from) = self.operand(id, arg);
        match op {
            UnaryOp::Neg => {
                let negated = CExpr::compound(format!("-{}", x.operand()));
                self.finish_exact(negated, from, dtype)
            }
            UnaryOp::Not if dtype.is_int() => {
                wrap_small(CExpr::compound(format!("~{}", x.operand())), dtype)
            }
            // On `bool`, and leniently on floats as the emulator allows, `not` is `x == 0`.
            UnaryOp::Not => {
                let not = CExpr::compound(format!("!{}", x.operand()));
                self.convert(not, DType::Bool, dtype)
            }
            UnaryOp::Intrinsic(intrinsic) => self.intrinsic(intrinsic, x, from, dtype),
            UnaryOp::Reinterpret { from } => {
                let text = super::reinterpret::reinterpret(&x.operand(), from, dtype);
                CExpr::atom(format!("({text})"))
            }
        }
    }

    /// The result of an operation that is exact on operands of its own type: rounding is needed
    /// only where the operand had another type. Small integers are wrapped after promotion.
    fn finish_exact(&mut self, result: CExpr, from: DType, dtype: DType) -> CExpr {
        if from == dtype {
            wrap_small(result, dtype)
        } else {
            round(wrap_small(result, dtype), dtype)
        }
    }

    fn intrinsic(&mut self, intrinsic: Intrinsic, x: CExpr, from: DType, dtype: DType) -> CExpr {
        if intrinsic.arity() != 1 {
            return self.invalid_expr(&format!(
                "`{}` needs two operands and is printed as a unary operation",
                intrinsic.name()
            ));
        }
        if !dtype.is_float() {
            return self.integer_intrinsic(intrinsic, x, from, dtype);
        }
        // The function is applied in `float` (`double` for `float64`) to the operand as it is,
        // and the result rounded to the node's type, as the emulator does.
        let single = dtype != DType::Float64;
        let wide = if single {
            DType::Float32
        } else {
            DType::Float64
        };
        let x = self.convert(x, from, wide);
        let result = math_call(intrinsic, &x, single);
        if intrinsic == Intrinsic::Abs {
            self.finish_exact(result, from, dtype)
        } else {
            round(result, dtype)
        }
    }

    /// Math on an integer or bool value, as the emulator allows it: `abs` exactly, the others in
    /// `double` and converted back like a cast.
    fn integer_intrinsic(
        &mut self,
        intrinsic: Intrinsic,
        x: CExpr,
        from: DType,
        dtype: DType,
    ) -> CExpr {
        if intrinsic == Intrinsic::Abs {
            let x = self.convert(x, from, dtype);
            return CExpr::atom(format!("tl_abs<{}>({})", compute_type(dtype), x.text));
        }
        let wide = self.convert(x, from, DType::Float64);
        let result = math_call(intrinsic, &wide, false);
        self.convert(result, DType::Float64, dtype)
    }

    fn binary_value(
        &mut self,
        id: ValueId,
        op: BinaryOp,
        (lhs, rhs): (ValueId, ValueId),
        dtype: DType,
    ) -> CExpr {
        if let Some(fused) = self.program.fused_multiply_add(id) {
            return self.fused_multiply_add(id, fused);
        }
        let (mut a, a_dtype) = self.operand(id, lhs);
        let (mut b, b_dtype) = self.operand(id, rhs);
        if dtype == DType::Float64 {
            // C would compute in `float` if both operands were narrower; the emulator does not.
            a = self.convert(a, a_dtype, dtype);
            b = self.convert(b, b_dtype, dtype);
        }
        if let BinaryOp::And | BinaryOp::Or = op {
            // Logical operators give 0 or 1 in the node's type, floats included.
            let symbol = if op == BinaryOp::And { "&&" } else { "||" };
            let logical = CExpr::compound(format!("{} {symbol} {}", a.operand(), b.operand()));
            return self.convert(logical, DType::Bool, dtype);
        }
        if dtype.is_float() {
            self.float_binary(op, (a, b), dtype)
        } else {
            int_binary(op, (a, b), dtype)
        }
    }

    /// `fmaf(a, b, c)` with the signs folded into its operands: a `float32` sum or difference of a
    /// `float32` product, computed with one rounding as the emulator computes it (see
    /// [`tilec_ir::thread::FusedMultiplyAdd`]).
    fn fused_multiply_add(&mut self, id: ValueId, fused: FusedMultiplyAdd) -> CExpr {
        let (a, _) = self.operand(id, fused.a);
        let (b, _) = self.operand(id, fused.b);
        let (c, _) = self.operand(id, fused.c);
        let signed = |negate: bool, e: &CExpr| match negate {
            true => format!("-{}", e.operand()),
            false => e.text.clone(),
        };
        CExpr::atom(format!(
            "fmaf({}, {}, {})",
            signed(fused.negate_product, &a),
            b.text,
            signed(fused.negate_addend, &c)
        ))
    }

    /// Float arithmetic in `float` (`double` for `float64`), rounded to the node's type. A product
    /// of `float` or `double` type is `__fmul_rn` / `__dmul_rn`, which the compiler never fuses into
    /// a multiply-add on its own: the multiply-adds tilec wants are explicit `fmaf`s (above), and
    /// the emulator rounds every other product before a sum uses it. Floor division and
    /// modulo are computed in `double` as the emulator does, because `floorf` of a quotient rounded
    /// to `float` can land on the next integer. A `float` quotient is the prelude's `tl_div`, IEEE
    /// division from a reciprocal shared by the quotients of one divisor (a softmax's or a norm's
    /// row), which saves a special-function-unit reciprocal per element.
    fn float_binary(&mut self, op: BinaryOp, (a, b): (CExpr, CExpr), dtype: DType) -> CExpr {
        let double = dtype == DType::Float64;
        let (x, y) = (a.operand(), b.operand());
        let result = match op {
            BinaryOp::Mul if double => CExpr::atom(format!("__dmul_rn({}, {})", a.text, b.text)),
            BinaryOp::Mul if dtype == DType::Float32 => {
                CExpr::atom(format!("__fmul_rn({}, {})", a.text, b.text))
            }
            BinaryOp::Div if !double => CExpr::atom(format!("tl_div({}, {})", a.text, b.text)),
            BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Div => {
                CExpr::arithmetic(&a, op.symbol(), &b, arithmetic_prec(op))
            }
            BinaryOp::Max | BinaryOp::Min => {
                let name = match (op == BinaryOp::Max, double) {
                    (true, false) => "fmaxf",
                    (true, true) => "fmax",
                    (false, false) => "fminf",
                    (false, true) => "fmin",
                };
                CExpr::atom(format!("{name}({}, {})", a.text, b.text))
            }
            BinaryOp::Pow if double => CExpr::atom(format!("pow({}, {})", a.text, b.text)),
            BinaryOp::Pow => CExpr::atom(format!("powf({}, {})", a.text, b.text)),
            BinaryOp::CopySign if double => {
                CExpr::atom(format!("copysign({}, {})", a.text, b.text))
            }
            BinaryOp::CopySign => CExpr::atom(format!("copysignf({}, {})", a.text, b.text)),
            BinaryOp::FloorDiv if double => CExpr::atom(format!("floor({x} / {y})")),
            BinaryOp::FloorDiv => {
                let quotient = CExpr::atom(format!("floor((double){x} / (double){y})"));
                return round_double(quotient, dtype);
            }
            BinaryOp::Mod if double => CExpr::atom(format!("tl_floormod({}, {})", a.text, b.text)),
            BinaryOp::Mod => {
                let remainder = CExpr::atom(format!("tl_floormod((double){x}, (double){y})"));
                return round_double(remainder, dtype);
            }
            _ => {
                return self.invalid_expr(&format!("`{}` on {dtype} values", op.symbol()));
            }
        };
        round(result, dtype)
    }

    fn select(
        &mut self,
        id: ValueId,
        (cond, then, otherwise): (ValueId, ValueId, ValueId),
        dtype: DType,
    ) -> CExpr {
        let (c, _) = self.operand(id, cond);
        let (a, a_dtype) = self.operand(id, then);
        let (b, b_dtype) = self.operand(id, otherwise);
        let stored = self.stored_select(&c, (&a, a_dtype), otherwise, dtype);
        let a = self.convert(a, a_dtype, dtype);
        let b = self.convert(b, b_dtype, dtype);
        CExpr {
            stored,
            ..CExpr::compound(format!(
                "{} ? {} : {}",
                c.operand(),
                a.operand(),
                b.operand()
            ))
        }
    }

    /// For a guarded load of a type stored as bits (`in_bounds ? load : 0`, which lowering makes
    /// for a global load that may leave its buffer), the select over the stored elements, so that
    /// a store of it to a buffer of the same type copies bits instead of widening and narrowing.
    fn stored_select(
        &self,
        cond: &CExpr,
        (then, then_dtype): (&CExpr, DType),
        otherwise: ValueId,
        dtype: DType,
    ) -> Option<String> {
        let element = then.stored.as_ref().filter(|_| then_dtype == dtype)?;
        let storage = packed(dtype)?.storage;
        let is_zero = matches!(
            self.program.values.get(otherwise.index()),
            Some(Value::Float { bits: 0, dtype: zero_dtype }) if *zero_dtype == dtype
        );
        is_zero.then(|| format!("({} ? {element} : {storage}{{0}})", cond.operand()))
    }

    /// `__shfl_xor_sync` over the whole warp. It has no overload below `int`, so small types go
    /// through `int` and back.
    fn shuffle(&mut self, id: ValueId, value: ValueId, mask: u32, dtype: DType) -> CExpr {
        let (x, from) = self.operand(id, value);
        if mask >= 32 {
            return self.invalid_expr(&format!("shuffle mask {mask} is not a lane of a warp"));
        }
        let x = self.convert(x, from, dtype);
        if is_small_int(dtype) {
            let shuffled = format!(
                "__shfl_xor_sync(0xffffffffu, (int){}, {mask}, 32)",
                x.operand()
            );
            CExpr::compound(wrap_int(dtype, &shuffled))
        } else {
            CExpr::atom(format!(
                "__shfl_xor_sync(0xffffffffu, {}, {mask}, 32)",
                x.text
            ))
        }
    }
}

/// Shuffles the user wrote and random draws.
impl Printer<'_> {
    /// `__shfl*_sync(mask, value, lane, width)`; 8- and 16-bit integers travel as `int`, as
    /// [`Printer::shuffle`] does.
    fn user_shuffle(
        &mut self,
        id: ValueId,
        kind: tilec_ir::data::ShuffleKind,
        [value, lane, width, mask]: [ValueId; 4],
        dtype: DType,
    ) -> CExpr {
        let (x, from) = self.operand(id, value);
        let x = self.convert(x, from, dtype);
        let (lane, _) = self.operand(id, lane);
        let (width, _) = self.operand(id, width);
        let (mask, _) = self.operand(id, mask);
        let intrinsic = kind.intrinsic();
        if is_small_int(dtype) {
            let shuffled = format!(
                "({intrinsic}({}, (int){}, {}, {}))",
                mask.text,
                x.operand(),
                lane.text,
                width.text
            );
            CExpr::compound(wrap_int(dtype, &shuffled))
        } else {
            CExpr::atom(format!(
                "{intrinsic}({}, {}, {}, {})",
                mask.text, x.text, lane.text, width.text
            ))
        }
    }

    /// The next number of the thread's generator.
    fn random(&mut self, kind: tilec_ir::data::RandomKind) -> CExpr {
        let Some(state) = self.rng_state.clone() else {
            return self.invalid_expr("a random draw without a generator");
        };
        let function = match kind {
            tilec_ir::data::RandomKind::Bits => "tl_rng_rand",
            tilec_ir::data::RandomKind::Uniform => "tl_rng_uniform",
        };
        CExpr::atom(format!("{function}(&{state})"))
    }
}

/// Conversions.
impl Printer<'_> {
    /// A value of `from` converted to `to` as `Value::Cast` defines it: floats narrow with
    /// rounding to nearest even, floats become integers by truncation through a 64-bit integer
    /// (then wrapping, as the emulator's `as i64 as iN` does), integers wrap.
    pub(super) fn convert(&mut self, x: CExpr, from: DType, to: DType) -> CExpr {
        if from == to {
            return x;
        }
        if let Some(p) = packed(to) {
            return CExpr::rounded(p.round, widen_exactly(x, from).text);
        }
        match to {
            DType::Float32 if computes_as_float(from) => x,
            _ if to.is_int() && from.is_float() => float_to_int(x, to),
            DType::Int4 | DType::UInt4 => CExpr::compound(wrap_int(to, &x.operand())),
            _ => CExpr::compound(format!("({}){}", compute_type(to), x.operand())),
        }
    }

    /// A value of `from` as it is stored in a buffer of `to`: the bit-pattern types narrow with the
    /// prelude's round-to-nearest-even conversion, the others convert as a cast does.
    pub(super) fn stored_as(&mut self, x: CExpr, from: DType, to: DType) -> CExpr {
        let Some(p) = packed(to) else {
            return self.convert(x, from, to);
        };
        if let Some(element) = x.stored.as_ref().filter(|_| from == to) {
            return CExpr::atom(element.clone());
        }
        let wide = match x.unrounded {
            Some(inner) if from == to => inner,
            _ => widen_exactly(x, from).text,
        };
        CExpr::atom(format!("{}({wide})", p.from_float))
    }
}

/// A float converted to an integer type: truncated to a 64-bit integer by the prelude, which
/// saturates (and gives 0 for NaN) where a C cast of an out-of-range value would be undefined, then
/// wrapped to the type, as the emulator's `as i64 as iN` does.
fn float_to_int(x: CExpr, to: DType) -> CExpr {
    let target = if to == DType::UInt64 {
        "tl_to_uint64"
    } else {
        "tl_to_int64"
    };
    let wide = CExpr::atom(format!("{target}({})", x.text));
    match to {
        DType::Int64 | DType::UInt64 => wide,
        _ => CExpr::compound(wrap_int(to, &wide.text)),
    }
}

/// A value as a `float` or `double` that holds it exactly, for the prelude's narrowing functions,
/// which have overloads for both. Integers wider than 16 bits go through `double`, because `float`
/// would round them once before the narrowing rounds again.
fn widen_exactly(x: CExpr, from: DType) -> CExpr {
    if computes_as_float(from) || from == DType::Float64 {
        x
    } else if is_small_int(from) {
        CExpr::compound(format!("(float){}", x.operand()))
    } else {
        CExpr::compound(format!("(double){}", x.operand()))
    }
}

/// `result` rounded to `dtype` when it is a type stored as bits.
fn round(result: CExpr, dtype: DType) -> CExpr {
    match packed(dtype) {
        Some(p) => CExpr::rounded(p.round, result.text),
        None => result,
    }
}

/// A `double` result rounded once to the float type `dtype`, computed as `float` (the prelude's
/// `tl_round_*` have `double` overloads that round without passing through a rounded `float`).
fn round_double(result: CExpr, dtype: DType) -> CExpr {
    match packed(dtype) {
        Some(p) => CExpr::rounded(p.round, result.text),
        None => CExpr::compound(format!("(float){}", result.text)),
    }
}

/// Integer arithmetic happens in `int` for types narrower than it; the result is converted back
/// so that it wraps into the type's range.
fn wrap_small(result: CExpr, dtype: DType) -> CExpr {
    if is_small_int(dtype) {
        CExpr::compound(wrap_int(dtype, &result.operand()))
    } else {
        result
    }
}

/// Integer and bool operations: C operators, with Python's floor division and modulo and an
/// integer power from the prelude. The prelude's templates are given the type explicitly, since
/// an operand may be a literal of another integer type.
fn int_binary(op: BinaryOp, (a, b): (CExpr, CExpr), dtype: DType) -> CExpr {
    let ty = compute_type(dtype);
    let helper = |name: &str| CExpr::atom(format!("{name}<{ty}>({}, {})", a.text, b.text));
    match op {
        BinaryOp::FloorDiv => helper("tl_floordiv"),
        BinaryOp::Mod => helper("tl_floormod"),
        BinaryOp::Pow => helper("tl_ipow"),
        BinaryOp::Max => helper("tl_max"),
        BinaryOp::Min => helper("tl_min"),
        // C leaves shifting a negative value left undefined, so signed values shift as unsigned.
        BinaryOp::Shl if signed(dtype) => {
            let unsigned = if dtype == DType::Int64 {
                "unsigned long long"
            } else {
                "unsigned int"
            };
            CExpr::compound(format!(
                "({ty})(({unsigned}){} << {})",
                a.operand(),
                b.operand()
            ))
        }
        BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Div => wrap_small(
            CExpr::arithmetic(&a, op.symbol(), &b, arithmetic_prec(op)),
            dtype,
        ),
        // C's `%` on integers truncates, as TVM's `truncmod` does.
        BinaryOp::TruncMod => wrap_small(
            CExpr::compound(format!("{} % {}", a.operand(), b.operand())),
            dtype,
        ),
        _ => wrap_small(
            CExpr::compound(format!("{} {} {}", a.operand(), op.symbol(), b.operand())),
            dtype,
        ),
    }
}

/// A one-operand intrinsic applied to `x`, in `float` when `single`, else in `double`.
fn math_call(intrinsic: Intrinsic, x: &CExpr, single: bool) -> CExpr {
    match math_function(intrinsic, single) {
        Some(function) => CExpr::atom(format!("{function}({})", x.text)),
        None if single => CExpr::compound(format!("1.0f / (1.0f + expf(-{}))", x.operand())),
        None => CExpr::compound(format!("1.0 / (1.0 + exp(-{}))", x.operand())),
    }
}

/// C precedence of the arithmetic operators (`*` and `/` bind tighter than `+` and `-`).
fn arithmetic_prec(op: BinaryOp) -> u8 {
    match op {
        BinaryOp::Mul | BinaryOp::Div => 13,
        _ => 12,
    }
}

fn signed(dtype: DType) -> bool {
    matches!(
        dtype,
        DType::Int8 | DType::Int16 | DType::Int32 | DType::Int64
    )
}

/// The C math function of a one-operand intrinsic (`expf` or `exp`), `None` for sigmoid, which has
/// none. These are the IEEE versions, never the fast-math intrinsics such as `__expf`, with one
/// exception: single-precision `exp2` is `tl_exp2`, the bare `ex2.approx.ftz.f32` instruction.
/// `exp2f` compiles to the same instruction (both are within 2 ulp), wrapped in four more that only
/// keep results below 2^-126 subnormal instead of zero; attention's softmax calls `exp2` on every
/// score, where those instructions cost a fifth of the loop.
fn math_function(intrinsic: Intrinsic, single: bool) -> Option<&'static str> {
    let (float, double) = match intrinsic {
        Intrinsic::Exp => ("expf", "exp"),
        Intrinsic::Exp2 => ("tl_exp2", "exp2"),
        Intrinsic::Log => ("logf", "log"),
        Intrinsic::Log2 => ("log2f", "log2"),
        Intrinsic::Sqrt => ("sqrtf", "sqrt"),
        Intrinsic::Rsqrt => ("rsqrtf", "rsqrt"),
        Intrinsic::Abs => ("fabsf", "fabs"),
        Intrinsic::Tanh => ("tanhf", "tanh"),
        Intrinsic::Floor => ("floorf", "floor"),
        Intrinsic::Ceil => ("ceilf", "ceil"),
        Intrinsic::Trunc => ("truncf", "trunc"),
        Intrinsic::Round => ("roundf", "round"),
        Intrinsic::Max => ("fmaxf", "fmax"),
        Intrinsic::Min => ("fminf", "fmin"),
        Intrinsic::Erf => ("erff", "erf"),
        Intrinsic::Sin => ("sinf", "sin"),
        Intrinsic::Cos => ("cosf", "cos"),
        Intrinsic::Tan => ("tanf", "tan"),
        Intrinsic::Sinh => ("sinhf", "sinh"),
        Intrinsic::Cosh => ("coshf", "cosh"),
        Intrinsic::Asin => ("asinf", "asin"),
        Intrinsic::Acos => ("acosf", "acos"),
        Intrinsic::Atan => ("atanf", "atan"),
        Intrinsic::Exp10 => ("exp10f", "exp10"),
        Intrinsic::Log10 => ("log10f", "log10"),
        Intrinsic::Log1p => ("log1pf", "log1p"),
        Intrinsic::Pow => ("powf", "pow"),
        Intrinsic::CopySign => ("copysignf", "copysign"),
        // Integer operations, written as their binary nodes (never a math call).
        Intrinsic::TruncDiv | Intrinsic::TruncMod => return None,
        Intrinsic::Sigmoid => return None,
    };
    Some(if single { float } else { double })
}
