//! Index expressions of the program's [`ExprArena`](tilec_ir::ExprArena) as C.
//!
//! Each node is computed as `int` when the arena's range analysis proves that it and its
//! subexpressions fit in 32 bits, and as `long long` otherwise (a symbolic dimension has no known
//! range): an operation whose operands are both `int` but whose result may not be casts its first
//! operand, so no intermediate result overflows where the emulator's `i64` arithmetic does not. Floor division and modulo print as C's `/` and `%`
//! when the ranges prove the dividend non-negative and the divisor positive (where both agree),
//! and as the prelude's `tl_floordiv` / `tl_floormod` otherwise.

use tilec_ir::{Expr, ExprId, VarId};

use super::Printer;
use super::literal::{int32_literal, long_literal};

/// The C type an index expression is computed in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum IndexType {
    Int,
    Long,
}

/// A printed index expression or subexpression.
#[derive(Clone, Debug)]
pub(super) struct Index {
    pub text: String,
    pub ty: IndexType,
    /// Whether the text is a single operand (a name, a call, a non-negative literal) that needs no
    /// parentheses anywhere.
    pub atomic: bool,
}

/// A subexpression with how tightly it binds.
#[derive(Clone, Debug)]
struct Printed {
    text: String,
    prec: u8,
    ty: IndexType,
}

impl Printed {
    /// The text, parenthesized when it binds looser than `min_prec`.
    fn at(&self, min_prec: u8) -> String {
        if self.prec < min_prec {
            format!("({})", self.text)
        } else {
            self.text.clone()
        }
    }

    /// The text as an operand of `long long` arithmetic: cast when it is an `int`.
    fn widened(&self, min_prec: u8) -> String {
        match self.ty {
            IndexType::Int => format!("(long long){}", self.at(PREC_ATOM)),
            IndexType::Long => self.at(min_prec),
        }
    }
}

/// C precedence levels of the printed forms, loosest first.
const PREC_SUM: u8 = 1;
const PREC_PRODUCT: u8 = 2;
const PREC_UNARY: u8 = 3;
const PREC_ATOM: u8 = 4;

impl Printer<'_> {
    /// `e` printed for use on its own: a subscript, a loop bound, a `let` value.
    pub(super) fn index(&mut self, e: ExprId) -> Index {
        if e.index() >= self.program.exprs.len() {
            let text = format!(
                "0 {}",
                self.invalid("an index expression is not in the arena")
            );
            return Index {
                text,
                ty: IndexType::Int,
                atomic: true,
            };
        }
        self.fits_memo.clear();
        let printed = self.print(e);
        Index {
            atomic: printed.prec == PREC_ATOM,
            text: printed.text,
            ty: printed.ty,
        }
    }

    /// Whether `e` and all its subexpressions can be computed in `int` without overflow: their
    /// variables are declared `int`, and every other node's range fits (or, where a range is
    /// unknown, it is a floor division, modulo, minimum or maximum, which cannot leave its operands'
    /// type).
    fn fits_int(&mut self, e: ExprId, depth: usize) -> bool {
        if let Some(&fits) = self.fits_memo.get(&e) {
            return fits;
        }
        if !self.spend() || depth > super::MAX_DEPTH {
            return false;
        }
        let fits = self.fits_int_node(e, depth);
        self.fits_memo.insert(e, fits);
        fits
    }

    fn fits_int_node(&mut self, e: ExprId, depth: usize) -> bool {
        let arena = &self.program.exprs;
        let in_range = arena
            .bounds(e)
            .is_some_and(|(lo, hi)| lo >= i64::from(i32::MIN) && hi <= i64::from(i32::MAX));
        let closed = match *arena.get(e) {
            Expr::Var(v) => return self.declared_int(v),
            Expr::Int(_) => return in_range,
            // `INT_MIN / -1` is the one quotient of two ints that is not an int.
            Expr::FloorDiv(_, b) => arena.as_int(b).is_some_and(|d| d != -1 && d != 0),
            Expr::FloorMod(..) | Expr::Min(..) | Expr::Max(..) => true,
            Expr::Add(..) | Expr::Sub(..) | Expr::Mul(..) => false,
        };
        match arena.get(e).operands() {
            Some((a, b)) if in_range || closed => {
                self.fits_int(a, depth + 1) && self.fits_int(b, depth + 1)
            }
            _ => false,
        }
    }

    /// Whether variable `v` is bound here to a C `int` (every variable but a `let` of a value
    /// that may not fit one).
    fn declared_int(&self, v: VarId) -> bool {
        match self.visible.get(v.index()) {
            Some(Some(name)) => !self.long_names.contains(name),
            _ => false,
        }
    }

    /// Whether C's truncating `/` and `%` agree with floor division here: the ranges prove the
    /// dividend non-negative and the divisor positive.
    fn plain_division(&self, a: ExprId, b: ExprId) -> bool {
        let arena = &self.program.exprs;
        let dividend = arena.bounds(a).is_some_and(|(lo, _)| lo >= 0);
        let divisor = arena.bounds(b).is_some_and(|(lo, _)| lo >= 1);
        dividend && divisor
    }

    fn print(&mut self, e: ExprId) -> Printed {
        if !self.spend() || self.depth > super::MAX_DEPTH {
            let comment = self.invalid("an index expression is too large to print");
            return Printed {
                text: format!("0 {comment}"),
                prec: PREC_ATOM,
                ty: IndexType::Int,
            };
        }
        self.depth += 1;
        let ty = if self.fits_int(e, 0) {
            IndexType::Int
        } else {
            IndexType::Long
        };
        let printed = self.print_node(e, ty);
        self.depth -= 1;
        printed
    }

    fn print_node(&mut self, e: ExprId, ty: IndexType) -> Printed {
        let arena = &self.program.exprs;
        let (text, prec) = match *arena.get(e) {
            Expr::Int(value) => return constant(value, ty),
            Expr::Var(v) => return self.var_ref(v),
            Expr::Mul(x, c) if arena.as_int(c) == Some(-1) => {
                let x = self.print(x);
                let operand = match ty {
                    IndexType::Long => x.widened(PREC_ATOM),
                    IndexType::Int => x.at(PREC_ATOM),
                };
                (format!("-{operand}"), PREC_UNARY)
            }
            Expr::Add(a, b) => self.binary((a, b), ty, " + ", PREC_SUM),
            Expr::Sub(a, b) => self.binary((a, b), ty, " - ", PREC_SUM),
            Expr::Mul(a, b) => self.binary((a, b), ty, " * ", PREC_PRODUCT),
            Expr::FloorDiv(a, b) if self.plain_division(a, b) => {
                self.binary((a, b), ty, " / ", PREC_PRODUCT)
            }
            Expr::FloorMod(a, b) if self.plain_division(a, b) => {
                self.binary((a, b), ty, " % ", PREC_PRODUCT)
            }
            Expr::FloorDiv(a, b) => self.call("tl_floordiv", (a, b), ty),
            Expr::FloorMod(a, b) => self.call("tl_floormod", (a, b), ty),
            Expr::Min(a, b) => self.call("tl_min", (a, b), ty),
            Expr::Max(a, b) => self.call("tl_max", (a, b), ty),
        };
        Printed { text, prec, ty }
    }

    /// A left-associative binary operation. In `long long` arithmetic with two `int` operands, the
    /// first is cast so that C computes in `long long`.
    fn binary(
        &mut self,
        (a, b): (ExprId, ExprId),
        ty: IndexType,
        op: &str,
        prec: u8,
    ) -> (String, u8) {
        let (a, b) = (self.print(a), self.print(b));
        let both_int = a.ty == IndexType::Int && b.ty == IndexType::Int;
        let lhs = if ty == IndexType::Long && both_int {
            a.widened(prec)
        } else {
            a.at(prec)
        };
        (format!("{lhs}{op}{}", b.at(prec + 1)), prec)
    }

    /// A prelude helper; in `long long` arithmetic it names the type, because an operand may still
    /// be an `int` and template deduction would fail.
    fn call(&mut self, name: &str, (a, b): (ExprId, ExprId), ty: IndexType) -> (String, u8) {
        let (a, b) = (self.print(a), self.print(b));
        let text = match ty {
            IndexType::Int => format!("{name}({}, {})", a.text, b.text),
            IndexType::Long => format!("{name}<long long>({}, {})", a.text, b.text),
        };
        (text, PREC_ATOM)
    }

    /// A variable by its C name, with the type it was declared with.
    fn var_ref(&mut self, v: VarId) -> Printed {
        let ty = if self.declared_int(v) {
            IndexType::Int
        } else {
            IndexType::Long
        };
        let name = self.visible.get(v.index()).cloned().flatten();
        let text = match name {
            Some(name) => name,
            None => {
                let wanted = if v.index() < self.program.exprs.num_vars() {
                    self.program.exprs.var_info(v).name.clone()
                } else {
                    format!("#{}", v.index())
                };
                let comment = self.invalid(&format!(
                    "variable `{wanted}` is used where no statement binds it"
                ));
                format!("0 {comment}")
            }
        };
        Printed {
            text,
            prec: PREC_ATOM,
            ty,
        }
    }
}

/// An integer constant: an `int` literal when it fits, a `long long` one otherwise.
fn constant(value: i64, ty: IndexType) -> Printed {
    // `ty` is `Int` only where the value was found to fit; a constant that does not is still
    // printed whole, as a `long long`, never truncated.
    let text = match (ty, i32::try_from(value)) {
        (IndexType::Int, Ok(value)) => int32_literal(value),
        _ => long_literal(value),
    };
    let prec = if text.starts_with('-') {
        PREC_UNARY
    } else {
        PREC_ATOM
    };
    Printed { text, prec, ty }
}
