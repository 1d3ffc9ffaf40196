//! The integer expression arena of the kernel IR.
//!
//! Index expressions, tile extents and layout formulas (a fragment layout's thread formula such as
//! `i // 16 * 32 + i % 8 * 4 + j % 8 // 2`) are all integer expressions over loop and thread
//! variables. They live in an [`ExprArena`] owned by one kernel world.
//!
//! Invariants:
//!
//! - **Hash-consed.** Every node is interned, so two structurally equal nodes of one arena have the
//!   same [`ExprId`], and comparing ids compares expressions.
//! - **Canonical.** Every public constructor returns a simplified node in one canonical form:
//!   sums are chains `t1 + t2 - t3 + k` of terms `atom * coef` in a fixed term order with the
//!   constant last, constants multiply from the right, and commutative operands are sorted. Two
//!   ways of writing the same sum therefore intern to the same id.
//! - **Exact.** Semantics are Python's (and TVM's): `//` is floor division, `%` is floor modulo
//!   (the result takes the divisor's sign), arithmetic is on `i64`. No rewrite changes the value
//!   of an expression at any point where the original is defined; range-aware rules only use the
//!   declared extents of variables (`0 <= v < extent`).
//! - **Never panics.** Arithmetic is checked everywhere. Where simplifying would overflow, the
//!   constructor keeps the node as written, and [`ExprArena::eval`] reports overflow, division by
//!   zero and unbound variables as `None`. Reassociating a sum can move an intermediate result
//!   past the `i64` limits where the original's stayed inside; evaluation then reports `None`,
//!   never a different value.

use std::cmp::Ordering;
use std::fmt;

use rustc_hash::FxHashMap;

/// The id of an interned expression in its [`ExprArena`].
///
/// Ids are only meaningful within the arena that made them; because the arena is hash-consed,
/// equal ids mean equal expressions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ExprId(u32);

impl ExprId {
    /// The position of this node in its arena, in creation order.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// The id of an integer variable (a loop index, a thread index, a symbolic size) in its arena.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct VarId(u32);

impl VarId {
    /// The position of this variable in its arena, in creation order.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// One node of an integer expression.
///
/// Nodes made by the simplifying constructors are canonical: `Sub` only appears inside a sum
/// chain with a positive right-hand term, a constant factor is always the right operand of `Mul`,
/// and a lone negated term is `Mul(x, Int(-1))` (printed `-x`). The exception is a node whose
/// rewrite would overflow `i64`, which is kept as written.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Expr {
    /// An integer constant.
    Int(i64),
    /// A variable.
    Var(VarId),
    /// `a + b`.
    Add(ExprId, ExprId),
    /// `a - b`.
    Sub(ExprId, ExprId),
    /// `a * b`.
    Mul(ExprId, ExprId),
    /// `a // b`, rounding toward negative infinity.
    FloorDiv(ExprId, ExprId),
    /// `a % b`, with the sign of `b`.
    FloorMod(ExprId, ExprId),
    /// `min(a, b)`.
    Min(ExprId, ExprId),
    /// `max(a, b)`.
    Max(ExprId, ExprId),
}

impl Expr {
    /// The two operands of a binary node, or `None` for a constant or a variable.
    pub fn operands(&self) -> Option<(ExprId, ExprId)> {
        match *self {
            Expr::Int(_) | Expr::Var(_) => None,
            Expr::Add(a, b)
            | Expr::Sub(a, b)
            | Expr::Mul(a, b)
            | Expr::FloorDiv(a, b)
            | Expr::FloorMod(a, b)
            | Expr::Min(a, b)
            | Expr::Max(a, b) => Some((a, b)),
        }
    }

    /// A rank per node kind, used to order terms deterministically.
    fn kind_rank(&self) -> u8 {
        match self {
            Expr::Int(_) => 0,
            Expr::Var(_) => 1,
            Expr::Mul(..) => 2,
            Expr::FloorDiv(..) => 3,
            Expr::FloorMod(..) => 4,
            Expr::Min(..) => 5,
            Expr::Max(..) => 6,
            Expr::Add(..) => 7,
            Expr::Sub(..) => 8,
        }
    }
}

/// What the arena knows about a variable.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct VarInfo {
    /// The name the variable prints as. Names may repeat; variables are told apart by id.
    pub name: String,
    /// When known, the variable ranges over `[0, extent)`.
    pub extent: Option<i64>,
}

/// Facts derived from a node when it is interned, so that simplification can ask for them
/// without walking the tree again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct NodeMeta {
    /// Inclusive range of the node's value over the variables' extents, when bounded.
    bounds: Option<(i64, i64)>,
    /// The smallest variable the node mentions; terms are ordered by it first.
    min_var: Option<VarId>,
}

/// The hash-consed arena of integer expressions and variables of one kernel world.
///
/// Equality compares the nodes and variables in creation order; the interning map and cached
/// facts are derived from them and left out.
#[derive(Clone, Debug, Default)]
pub struct ExprArena {
    nodes: Vec<Expr>,
    meta: Vec<NodeMeta>,
    vars: Vec<VarInfo>,
    interned: FxHashMap<Expr, ExprId>,
}

impl PartialEq for ExprArena {
    fn eq(&self, other: &Self) -> bool {
        self.nodes == other.nodes && self.vars == other.vars
    }
}

impl Eq for ExprArena {}

/// Floor division (Python's `//`): `None` when `b` is zero or the quotient overflows.
pub fn floor_div(a: i64, b: i64) -> Option<i64> {
    let quotient = a.checked_div(b)?;
    let remainder = a.checked_rem(b)?;
    // Truncation rounded toward zero; step down when the exact quotient was negative.
    if remainder != 0 && (remainder < 0) != (b < 0) {
        quotient.checked_sub(1)
    } else {
        Some(quotient)
    }
}

/// Floor modulo (Python's `%`): the result has the sign of `b`; `None` when `b` is zero.
pub fn floor_mod(a: i64, b: i64) -> Option<i64> {
    // `i64::MIN % -1` overflows in Rust although the mathematical result is 0.
    if b == -1 {
        return Some(0);
    }
    let remainder = a.checked_rem(b)?;
    if remainder != 0 && (remainder < 0) != (b < 0) {
        remainder.checked_add(b)
    } else {
        Some(remainder)
    }
}

/// The greatest common divisor of two magnitudes.
fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// `(-value, true)` for a negative value, so that it can be written as a subtraction, and
/// `(value, false)` otherwise (also for `i64::MIN`, whose magnitude does not fit).
fn signed_magnitude(value: i64) -> (i64, bool) {
    match value.checked_neg() {
        Some(magnitude) if value < 0 => (magnitude, true),
        _ => (value, false),
    }
}

/// `[lo, hi] * factor` as an inclusive range, `None` on overflow.
fn scale_range((lo, hi): (i64, i64), factor: i64) -> Option<(i64, i64)> {
    let (x, y) = (lo.checked_mul(factor)?, hi.checked_mul(factor)?);
    Some((x.min(y), x.max(y)))
}

/// The range of `f(x, y)` over two ranges for an `f` monotone in each argument, which attains its
/// extremes at the corners.
fn corner_range(
    (al, ah): (i64, i64),
    (bl, bh): (i64, i64),
    f: impl Fn(i64, i64) -> Option<i64>,
) -> Option<(i64, i64)> {
    let corners = [f(al, bl)?, f(al, bh)?, f(ah, bl)?, f(ah, bh)?];
    let lo = corners.iter().copied().min()?;
    let hi = corners.iter().copied().max()?;
    Some((lo, hi))
}

/// A sum `Σ coef * atom + constant`, the working form of the sum and product rules.
///
/// Atoms are nodes that are not sums, constants or constant multiples (variables, divisions,
/// products of non-constants, min/max). Coefficients are never zero.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Linear {
    terms: Vec<(ExprId, i64)>,
    constant: i64,
}

impl Linear {
    fn constant(value: i64) -> Self {
        Linear {
            terms: Vec::new(),
            constant: value,
        }
    }

    fn atom(atom: ExprId) -> Self {
        Linear {
            terms: vec![(atom, 1)],
            constant: 0,
        }
    }

    /// Adds `coef * atom`, merging it with a like term; `None` on overflow.
    fn add_term(&mut self, atom: ExprId, coef: i64) -> Option<()> {
        match self.terms.iter().position(|&(a, _)| a == atom) {
            Some(index) => {
                let merged = self.terms[index].1.checked_add(coef)?;
                if merged == 0 {
                    self.terms.remove(index);
                } else {
                    self.terms[index].1 = merged;
                }
            }
            None if coef != 0 => self.terms.push((atom, coef)),
            None => {}
        }
        Some(())
    }

    /// Adds `factor * other`; `None` on overflow.
    fn add_scaled(&mut self, other: &Linear, factor: i64) -> Option<()> {
        for &(atom, coef) in &other.terms {
            self.add_term(atom, coef.checked_mul(factor)?)?;
        }
        let shift = other.constant.checked_mul(factor)?;
        self.constant = self.constant.checked_add(shift)?;
        Some(())
    }

    fn scaled(&self, factor: i64) -> Option<Linear> {
        let mut result = Linear::default();
        result.add_scaled(self, factor)?;
        Some(result)
    }

    fn is_zero(&self) -> bool {
        self.terms.is_empty() && self.constant == 0
    }

    /// Splits `self = divisor * quotient + rest` (`divisor >= 2`), where `quotient` takes every
    /// term whose coefficient `divisor` divides and the floor quotient of the constant, so that
    /// `rest` keeps the other terms and a constant in `[0, divisor)`.
    fn split_divisible(&self, divisor: i64) -> Option<(Linear, Linear)> {
        let mut quotient = Linear::default();
        let mut rest = Linear::default();
        for &(atom, coef) in &self.terms {
            if coef % divisor == 0 {
                quotient.terms.push((atom, coef / divisor));
            } else {
                rest.terms.push((atom, coef));
            }
        }
        quotient.constant = floor_div(self.constant, divisor)?;
        rest.constant = floor_mod(self.constant, divisor)?;
        Some((quotient, rest))
    }

    /// The greatest common divisor of every coefficient, the constant and `divisor`.
    fn content_gcd(&self, divisor: i64) -> i64 {
        let coefs = self
            .terms
            .iter()
            .map(|&(_, coef)| coef)
            .chain([self.constant]);
        let g = coefs.fold(divisor.unsigned_abs(), |g, c| gcd(g, c.unsigned_abs()));
        // `g` divides `divisor`, so it fits in an i64 unless the divisor was i64::MIN.
        i64::try_from(g).unwrap_or(1)
    }

    /// `self / g` for a `g` that divides every coefficient and the constant.
    fn divided(&self, g: i64) -> Linear {
        let terms = self
            .terms
            .iter()
            .map(|&(atom, coef)| (atom, coef / g))
            .collect();
        Linear {
            terms,
            constant: self.constant / g,
        }
    }
}

/// Which of `min`/`max` a shared helper builds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Extremum {
    Min,
    Max,
}

impl ExprArena {
    /// An empty arena.
    pub fn new() -> Self {
        Self::default()
    }

    /// Creates a fresh variable ranging over `[0, extent)` when the extent is known.
    ///
    /// Every call makes a new variable, even for a name already in use.
    pub fn var(&mut self, name: &str, extent: Option<i64>) -> VarId {
        let id = VarId(u32::try_from(self.vars.len()).unwrap_or(u32::MAX));
        self.vars.push(VarInfo {
            name: name.to_owned(),
            extent,
        });
        id
    }

    /// The name and extent of a variable of this arena.
    pub fn var_info(&self, v: VarId) -> &VarInfo {
        &self.vars[v.index()]
    }

    /// The number of variables created so far.
    pub fn num_vars(&self) -> usize {
        self.vars.len()
    }

    /// The constant `value`.
    pub fn int(&mut self, value: i64) -> ExprId {
        self.intern(Expr::Int(value))
    }

    /// The expression reading variable `v`.
    pub fn var_expr(&mut self, v: VarId) -> ExprId {
        self.intern(Expr::Var(v))
    }

    /// The node behind an id of this arena.
    ///
    /// Ids are only made by an arena, so an out-of-range id can only come from mixing up two
    /// arenas; indexing then panics like any slice, which points at that bug.
    pub fn get(&self, e: ExprId) -> &Expr {
        &self.nodes[e.index()]
    }

    /// The value of `e` when it is a constant.
    pub fn as_int(&self, e: ExprId) -> Option<i64> {
        match *self.get(e) {
            Expr::Int(value) => Some(value),
            _ => None,
        }
    }

    /// `e` as its constant term and the rest: `(None, c)` for a constant, `(Some(rest), c)` for a
    /// sum whose last term is the constant `c` (the canonical form puts it there), `(Some(e), 0)`
    /// otherwise.
    pub fn split_constant(&self, e: ExprId) -> (Option<ExprId>, i64) {
        match *self.get(e) {
            Expr::Int(c) => (None, c),
            Expr::Add(rest, c) => match self.as_int(c) {
                Some(c) => (Some(rest), c),
                None => (Some(e), 0),
            },
            Expr::Sub(rest, c) => match self.as_int(c).and_then(i64::checked_neg) {
                Some(c) => (Some(rest), c),
                None => (Some(e), 0),
            },
            _ => (Some(e), 0),
        }
    }

    /// The number of interned nodes.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// True when no node has been interned yet.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// The inclusive range `[lo, hi]` of `e` over the variables' extents, or `None` when some
    /// variable it depends on has no extent (or the range overflows).
    pub fn bounds(&self, e: ExprId) -> Option<(i64, i64)> {
        self.meta[e.index()].bounds
    }

    /// Interns a node exactly as given, without simplifying it.
    fn intern(&mut self, node: Expr) -> ExprId {
        if let Some(&id) = self.interned.get(&node) {
            return id;
        }
        // An arena runs out of memory long before it holds u32::MAX nodes.
        let id = ExprId(u32::try_from(self.nodes.len()).unwrap_or(u32::MAX));
        let meta = NodeMeta {
            bounds: self.node_bounds(&node),
            min_var: self.node_min_var(&node),
        };
        self.nodes.push(node.clone());
        self.meta.push(meta);
        self.interned.insert(node, id);
        id
    }
}

/// Range analysis, computed once per node when it is interned.
impl ExprArena {
    fn node_min_var(&self, node: &Expr) -> Option<VarId> {
        match *node {
            Expr::Int(_) => None,
            Expr::Var(v) => Some(v),
            _ => {
                let (a, b) = node.operands()?;
                let (va, vb) = (self.meta[a.index()].min_var, self.meta[b.index()].min_var);
                va.into_iter().chain(vb).min()
            }
        }
    }

    fn node_bounds(&self, node: &Expr) -> Option<(i64, i64)> {
        match *node {
            Expr::Int(value) => Some((value, value)),
            Expr::Var(v) => match self.var_info(v).extent {
                Some(extent) if extent >= 1 => Some((0, extent - 1)),
                _ => None,
            },
            Expr::Add(a, b) => {
                let ((al, ah), (bl, bh)) = (self.bounds(a)?, self.bounds(b)?);
                Some((al.checked_add(bl)?, ah.checked_add(bh)?))
            }
            Expr::Sub(a, b) => {
                let ((al, ah), (bl, bh)) = (self.bounds(a)?, self.bounds(b)?);
                Some((al.checked_sub(bh)?, ah.checked_sub(bl)?))
            }
            Expr::Mul(a, b) => corner_range(self.bounds(a)?, self.bounds(b)?, i64::checked_mul),
            Expr::FloorDiv(a, b) => self.div_bounds(a, b),
            Expr::FloorMod(a, b) => self.mod_bounds(a, b),
            Expr::Min(a, b) => {
                let ((al, ah), (bl, bh)) = (self.bounds(a)?, self.bounds(b)?);
                Some((al.min(bl), ah.min(bh)))
            }
            Expr::Max(a, b) => {
                let ((al, ah), (bl, bh)) = (self.bounds(a)?, self.bounds(b)?);
                Some((al.max(bl), ah.max(bh)))
            }
        }
    }

    /// The divisor range with zero removed from its ends, since dividing by zero has no value to
    /// bound. `None` when the divisor can take both signs (or only zero).
    fn nonzero_divisor_range(&self, b: ExprId) -> Option<(i64, i64)> {
        let (mut lo, mut hi) = self.bounds(b)?;
        if lo == 0 {
            lo = 1;
        }
        if hi == 0 {
            hi = -1;
        }
        (lo <= hi && (lo > 0 || hi < 0)).then_some((lo, hi))
    }

    fn div_bounds(&self, a: ExprId, b: ExprId) -> Option<(i64, i64)> {
        // With the divisor's sign fixed, `x // y` is monotone in each argument.
        corner_range(self.bounds(a)?, self.nonzero_divisor_range(b)?, floor_div)
    }

    fn mod_bounds(&self, a: ExprId, b: ExprId) -> Option<(i64, i64)> {
        let (bl, bh) = self.bounds(b)?;
        let a_bounds = self.bounds(a);
        if let Some((al, ah)) = a_bounds {
            // A constant divisor and a dividend within one period: the remainder is a shift.
            if bl == bh && bl != 0 && floor_div(al, bl) == floor_div(ah, bl) {
                let shift = floor_div(al, bl)?.checked_mul(bl)?;
                return Some((al.checked_sub(shift)?, ah.checked_sub(shift)?));
            }
            // A non-negative dividend below every positive divisor is its own remainder.
            if al >= 0 && ah < bl {
                return Some((al, ah));
            }
        }
        // The remainder has the divisor's sign and a smaller magnitude.
        let lo = bl.checked_add(1)?.min(0);
        let mut hi = bh.checked_sub(1)?.max(0);
        if let Some((al, ah)) = a_bounds
            && al >= 0
            && bl >= 1
        {
            hi = hi.min(ah);
        }
        Some((lo, hi))
    }

    /// The range of a linear form from the ranges of its atoms.
    fn linear_bounds(&self, lin: &Linear) -> Option<(i64, i64)> {
        let mut range = (lin.constant, lin.constant);
        for &(atom, coef) in &lin.terms {
            let (lo, hi) = scale_range(self.bounds(atom)?, coef)?;
            range = (range.0.checked_add(lo)?, range.1.checked_add(hi)?);
        }
        Some(range)
    }
}

/// Canonical ordering of terms, factors and commutative operands.
impl ExprArena {
    /// Orders atoms by the smallest variable they mention, then by structure, so that terms of
    /// one variable sit together and the order does not depend on construction order.
    fn term_order(&self, a: ExprId, b: ExprId) -> Ordering {
        let (va, vb) = (self.meta[a.index()].min_var, self.meta[b.index()].min_var);
        let by_var = match (va, vb) {
            (Some(x), Some(y)) => x.cmp(&y),
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (None, None) => Ordering::Equal,
        };
        by_var.then_with(|| self.structural_order(a, b))
    }

    /// A total order on nodes by kind, then by operands. Interning makes it total: distinct ids
    /// always differ somewhere in structure.
    fn structural_order(&self, a: ExprId, b: ExprId) -> Ordering {
        if a == b {
            return Ordering::Equal;
        }
        let (na, nb) = (self.get(a), self.get(b));
        na.kind_rank()
            .cmp(&nb.kind_rank())
            .then_with(|| match (na, nb) {
                (Expr::Int(x), Expr::Int(y)) => x.cmp(y),
                (Expr::Var(x), Expr::Var(y)) => x.cmp(y),
                _ => match (na.operands(), nb.operands()) {
                    (Some((a1, a2)), Some((b1, b2))) => self
                        .structural_order(a1, b1)
                        .then_with(|| self.structural_order(a2, b2)),
                    _ => Ordering::Equal,
                },
            })
    }

    /// Orders the terms of a sum: positive coefficients first, so that a sum prints as
    /// `i - j` rather than `-j + i`, then by [`Self::term_order`].
    fn sum_order(&self, (a, ca): (ExprId, i64), (b, cb): (ExprId, i64)) -> Ordering {
        (ca < 0).cmp(&(cb < 0)).then_with(|| self.term_order(a, b))
    }
}

/// Sums and products.
impl ExprArena {
    /// Reads a node as a linear form. A node whose form would overflow counts as an atom.
    fn linear_of(&self, e: ExprId) -> Linear {
        let combined = match *self.get(e) {
            Expr::Int(value) => return Linear::constant(value),
            Expr::Add(a, b) => self.linear_combination(a, b, 1),
            Expr::Sub(a, b) => self.linear_combination(a, b, -1),
            Expr::Mul(x, c) if self.as_int(c).is_some() => {
                self.as_int(c).and_then(|k| self.linear_of(x).scaled(k))
            }
            Expr::Mul(c, x) if self.as_int(c).is_some() => {
                self.as_int(c).and_then(|k| self.linear_of(x).scaled(k))
            }
            _ => None,
        };
        combined.unwrap_or_else(|| Linear::atom(e))
    }

    /// `a + sign * b` as a linear form; `None` on overflow.
    fn linear_combination(&self, a: ExprId, b: ExprId, sign: i64) -> Option<Linear> {
        let mut lin = self.linear_of(a);
        lin.add_scaled(&self.linear_of(b), sign)?;
        Some(lin)
    }

    /// Interns the canonical node of a linear form.
    fn build_linear(&mut self, mut lin: Linear) -> ExprId {
        lin.terms.sort_by(|&x, &y| self.sum_order(x, y));
        let mut sum = None;
        for (atom, coef) in lin.terms {
            sum = Some(match sum {
                None => self.scaled_atom(atom, coef),
                Some(prefix) => self.append_term(prefix, atom, coef),
            });
        }
        match sum {
            None => self.int(lin.constant),
            Some(prefix) => self.append_constant(prefix, lin.constant),
        }
    }

    /// `atom * coef`, leaving out a unit coefficient.
    fn scaled_atom(&mut self, atom: ExprId, coef: i64) -> ExprId {
        if coef == 1 {
            return atom;
        }
        let factor = self.int(coef);
        self.intern(Expr::Mul(atom, factor))
    }

    /// `prefix + coef * atom`, written as a subtraction when the coefficient is negative.
    fn append_term(&mut self, prefix: ExprId, atom: ExprId, coef: i64) -> ExprId {
        let (magnitude, subtract) = signed_magnitude(coef);
        let term = self.scaled_atom(atom, magnitude);
        self.append(prefix, term, subtract)
    }

    /// `prefix + constant`, written as a subtraction when the constant is negative.
    fn append_constant(&mut self, prefix: ExprId, constant: i64) -> ExprId {
        if constant == 0 {
            return prefix;
        }
        let (magnitude, subtract) = signed_magnitude(constant);
        let k = self.int(magnitude);
        self.append(prefix, k, subtract)
    }

    fn append(&mut self, prefix: ExprId, term: ExprId, subtract: bool) -> ExprId {
        if subtract {
            self.intern(Expr::Sub(prefix, term))
        } else {
            self.intern(Expr::Add(prefix, term))
        }
    }

    /// `a + b`, with like terms collected and constants folded.
    pub fn add(&mut self, a: ExprId, b: ExprId) -> ExprId {
        match self.linear_combination(a, b, 1) {
            Some(lin) => self.build_linear(lin),
            None => self.intern(Expr::Add(a, b)),
        }
    }

    /// `a - b`, with like terms collected and constants folded.
    pub fn sub(&mut self, a: ExprId, b: ExprId) -> ExprId {
        if a == b {
            return self.int(0);
        }
        match self.linear_combination(a, b, -1) {
            Some(lin) => self.build_linear(lin),
            None => self.intern(Expr::Sub(a, b)),
        }
    }

    /// `-a`.
    pub fn neg(&mut self, a: ExprId) -> ExprId {
        self.mul_const(a, -1)
    }

    /// `a * b`. A constant factor is distributed over a sum (`(i + 1) * 4` is `i * 4 + 4`), so
    /// that division rules see every term; products of non-constants are flattened and sorted.
    pub fn mul(&mut self, a: ExprId, b: ExprId) -> ExprId {
        match (self.as_int(a), self.as_int(b)) {
            (_, Some(k)) => self.mul_const(a, k),
            (Some(k), None) => self.mul_const(b, k),
            (None, None) => self.mul_nonconst(a, b),
        }
    }

    fn mul_const(&mut self, e: ExprId, k: i64) -> ExprId {
        match k {
            0 => self.int(0),
            1 => e,
            _ => match self.linear_of(e).scaled(k) {
                Some(lin) => self.build_linear(lin),
                None => {
                    let factor = self.int(k);
                    self.intern(Expr::Mul(e, factor))
                }
            },
        }
    }

    /// The product of two non-constants: `(i * 2) * (j * 3)` is `i * j * 6`.
    fn mul_nonconst(&mut self, a: ExprId, b: ExprId) -> ExprId {
        let (ca, fa) = self.split_coefficient(a);
        let (cb, fb) = self.split_coefficient(b);
        let Some(coef) = ca.checked_mul(cb) else {
            return self.intern(Expr::Mul(a, b));
        };
        let mut factors = Vec::new();
        self.collect_factors(fa, &mut factors);
        self.collect_factors(fb, &mut factors);
        factors.sort_by(|&x, &y| self.term_order(x, y));
        let mut iter = factors.into_iter();
        let Some(mut product) = iter.next() else {
            return self.int(coef);
        };
        for factor in iter {
            product = self.intern(Expr::Mul(product, factor));
        }
        self.mul_const(product, coef)
    }

    /// Splits a single term `atom * coef` into `(coef, atom)`; anything else is `(1, e)`.
    fn split_coefficient(&self, e: ExprId) -> (i64, ExprId) {
        match self.linear_of(e) {
            Linear { terms, constant: 0 } if terms.len() == 1 => (terms[0].1, terms[0].0),
            _ => (1, e),
        }
    }

    /// The non-constant factors of a product chain.
    fn collect_factors(&self, e: ExprId, out: &mut Vec<ExprId>) {
        match *self.get(e) {
            Expr::Mul(x, y) if self.as_int(x).is_none() && self.as_int(y).is_none() => {
                self.collect_factors(x, out);
                self.collect_factors(y, out);
            }
            _ => out.push(e),
        }
    }
}

/// Division and modulo.
impl ExprArena {
    /// `a // b` (floor division). With a positive constant divisor the dividend is split into the
    /// part the divisor divides and a remainder, and the remainder's range often decides the rest:
    /// with `0 <= j < 4`, `(i * 4 + j) // 4` is `i`.
    pub fn floordiv(&mut self, a: ExprId, b: ExprId) -> ExprId {
        match (self.as_int(a), self.as_int(b)) {
            (Some(x), Some(y)) => match floor_div(x, y) {
                Some(q) => self.int(q),
                None => self.intern(Expr::FloorDiv(a, b)),
            },
            (_, Some(1)) => a,
            (_, Some(-1)) => self.neg(a),
            (_, Some(c)) if c >= 2 => self.floordiv_const(a, c),
            _ => self.intern(Expr::FloorDiv(a, b)),
        }
    }

    /// `a // c` for `c >= 2`.
    fn floordiv_const(&mut self, a: ExprId, c: i64) -> ExprId {
        let Some((quotient, rest)) = self.linear_of(a).split_divisible(c) else {
            return self.floordiv_raw(a, c);
        };
        if quotient.is_zero() {
            return self.floordiv_remainder(a, &rest, c);
        }
        // a = c * quotient + rest, and c * quotient is a multiple of c.
        let whole = self.build_linear(quotient);
        let rest = self.build_linear(rest);
        let fraction = self.floordiv_const(rest, c);
        self.add(whole, fraction)
    }

    /// `a // c` where `a` (as `lin`) has no term `c` divides and a constant in `[0, c)`.
    fn floordiv_remainder(&mut self, a: ExprId, lin: &Linear, c: i64) -> ExprId {
        if let Some((lo, hi)) = self.linear_bounds(lin)
            && floor_div(lo, c) == floor_div(hi, c)
            && let Some(q) = floor_div(lo, c)
        {
            return self.int(q);
        }
        // (g * y) // (g * d) == y // d.
        let g = lin.content_gcd(c);
        if g > 1 {
            let reduced = self.build_linear(lin.divided(g));
            let divisor = self.int(c / g);
            return self.floordiv(reduced, divisor);
        }
        if let Some(nested) = self.merge_nested_div(lin, c) {
            return nested;
        }
        if let Some((high, _, d)) = self.split_low_part(lin, c) {
            let high = self.build_linear(high);
            let divisor = self.int(c / d);
            return self.floordiv(high, divisor);
        }
        self.floordiv_raw(a, c)
    }

    /// Splits `lin = d * high + low` for a `d >= 2` dividing `c` with `0 <= low < d`, trying the
    /// common factors of `c` with each coefficient, largest first. Then, with `c = d * e`,
    /// `lin // c == high // e` and `lin % c == (high % e) * d + low`: this is what turns a split
    /// loop counter `(chunk * 4 + lane) // 16` back into `chunk // 4`.
    fn split_low_part(&self, lin: &Linear, c: i64) -> Option<(Linear, Linear, i64)> {
        let mut candidates: Vec<i64> = lin
            .terms
            .iter()
            .filter_map(|&(_, coef)| i64::try_from(gcd(coef.unsigned_abs(), c.unsigned_abs())).ok())
            .filter(|&d| d >= 2 && d < c)
            .collect();
        candidates.sort_unstable_by(|a, b| b.cmp(a));
        candidates.dedup();
        candidates.into_iter().find_map(|d| {
            let (high, low) = lin.split_divisible(d)?;
            let (lo, hi) = self.linear_bounds(&low)?;
            (lo >= 0 && hi < d).then_some((high, low, d))
        })
    }

    /// `(x // d + r) // c == (x + r * d) // (d * c)` for positive `d` and `c`.
    fn merge_nested_div(&mut self, lin: &Linear, c: i64) -> Option<ExprId> {
        let [(atom, 1)] = lin.terms[..] else {
            return None;
        };
        let Expr::FloorDiv(x, d) = *self.get(atom) else {
            return None;
        };
        let d = self.as_int(d).filter(|&d| d > 0)?;
        let divisor = d.checked_mul(c)?;
        let shift = lin.constant.checked_mul(d)?;
        let shift = self.int(shift);
        let dividend = self.add(x, shift);
        let divisor = self.int(divisor);
        Some(self.floordiv(dividend, divisor))
    }

    fn floordiv_raw(&mut self, a: ExprId, c: i64) -> ExprId {
        let divisor = self.int(c);
        self.intern(Expr::FloorDiv(a, divisor))
    }

    /// `a % b` (floor modulo, with the sign of `b`). With a positive constant divisor, terms the
    /// divisor divides are dropped and the remainder's range often decides the rest: with
    /// `0 <= j < 4`, `(i * 4 + j) % 4` is `j`.
    pub fn floormod(&mut self, a: ExprId, b: ExprId) -> ExprId {
        match (self.as_int(a), self.as_int(b)) {
            (Some(x), Some(y)) => match floor_mod(x, y) {
                Some(r) => self.int(r),
                None => self.intern(Expr::FloorMod(a, b)),
            },
            (_, Some(1 | -1)) => self.int(0),
            (_, Some(c)) if c >= 2 => self.floormod_const(a, c),
            _ => self.intern(Expr::FloorMod(a, b)),
        }
    }

    /// `a % c` for `c >= 2`.
    fn floormod_const(&mut self, a: ExprId, c: i64) -> ExprId {
        let Some((_, rest)) = self.linear_of(a).split_divisible(c) else {
            let divisor = self.int(c);
            return self.intern(Expr::FloorMod(a, divisor));
        };
        if let Some(stripped) = self.strip_inner_mods(&rest, c) {
            let dividend = self.build_linear(stripped);
            return self.floormod_const(dividend, c);
        }
        if let Some(shifted) = self.mod_by_range(&rest, c) {
            return shifted;
        }
        if let Some((high, low, d)) = self.split_low_part(&rest, c) {
            let high = self.build_linear(high);
            let divisor = self.int(c / d);
            let wrapped = self.floormod(high, divisor);
            let factor = self.int(d);
            let scaled = self.mul(wrapped, factor);
            let low = self.build_linear(low);
            return self.add(scaled, low);
        }
        // (g * y) % (g * d) == (y % d) * g.
        let g = rest.content_gcd(c);
        if g > 1 {
            let reduced = self.build_linear(rest.divided(g));
            let divisor = self.int(c / g);
            let inner = self.floormod(reduced, divisor);
            let scale = self.int(g);
            return self.mul(inner, scale);
        }
        let dividend = self.build_linear(rest);
        let divisor = self.int(c);
        self.intern(Expr::FloorMod(dividend, divisor))
    }

    /// Replaces each term `y % d` with `y` where `c` divides `d`: the two differ by a multiple of
    /// `d`, hence of `c`. `None` when there is no such term (or on overflow).
    fn strip_inner_mods(&self, lin: &Linear, c: i64) -> Option<Linear> {
        let mut stripped = Linear::constant(lin.constant);
        let mut changed = false;
        for &(atom, coef) in &lin.terms {
            match *self.get(atom) {
                Expr::FloorMod(y, d) if self.as_int(d).is_some_and(|d| d > 0 && d % c == 0) => {
                    stripped.add_scaled(&self.linear_of(y), coef)?;
                    changed = true;
                }
                _ => stripped.add_term(atom, coef)?,
            }
        }
        changed.then_some(stripped)
    }

    /// `lin % c` when the range of `lin` lies within one period `[m * c, (m + 1) * c)`: it is
    /// then `lin - m * c`.
    fn mod_by_range(&mut self, lin: &Linear, c: i64) -> Option<ExprId> {
        let (lo, hi) = self.linear_bounds(lin)?;
        let m = floor_div(lo, c)?;
        if floor_div(hi, c)? != m {
            return None;
        }
        let mut shifted = lin.clone();
        shifted.constant = shifted.constant.checked_sub(m.checked_mul(c)?)?;
        Some(self.build_linear(shifted))
    }

    /// `ceil(a / b)` for a positive `b`, written `(a + b - 1) // b` and folded when constant.
    pub fn ceildiv(&mut self, a: ExprId, b: ExprId) -> ExprId {
        let one = self.int(1);
        let b_minus_one = self.sub(b, one);
        let dividend = self.add(a, b_minus_one);
        self.floordiv(dividend, b)
    }
}

/// Minimum and maximum.
impl ExprArena {
    /// `min(a, b)`, folded when the ranges decide it (`min(i, i + 1)` is `i`).
    pub fn min(&mut self, a: ExprId, b: ExprId) -> ExprId {
        self.extremum(a, b, Extremum::Min)
    }

    /// `max(a, b)`, folded when the ranges decide it.
    pub fn max(&mut self, a: ExprId, b: ExprId) -> ExprId {
        self.extremum(a, b, Extremum::Max)
    }

    fn extremum(&mut self, a: ExprId, b: ExprId, which: Extremum) -> ExprId {
        if let Some(ordering) = self.provable_order(a, b) {
            let a_is_smaller = ordering != Ordering::Greater;
            return if a_is_smaller == (which == Extremum::Min) {
                a
            } else {
                b
            };
        }
        // Both are commutative: sort the operands so that min(a, b) and min(b, a) intern alike.
        let (x, y) = match self.term_order(a, b) {
            Ordering::Greater => (b, a),
            _ => (a, b),
        };
        match which {
            Extremum::Min => self.intern(Expr::Min(x, y)),
            Extremum::Max => self.intern(Expr::Max(x, y)),
        }
    }

    /// `Less` when `a <= b` everywhere, `Greater` when `a >= b` everywhere. Judged first by the
    /// range of `a - b` with like terms cancelled (`i <= i + 1`), and where that difference
    /// overflows by the ranges of `a` and `b` themselves.
    fn provable_order(&self, a: ExprId, b: ExprId) -> Option<Ordering> {
        if a == b {
            return Some(Ordering::Equal);
        }
        let by_difference = self
            .linear_combination(a, b, -1)
            .and_then(|difference| self.linear_bounds(&difference))
            .and_then(|(lo, hi)| sign_of_range(lo, hi));
        by_difference.or_else(|| {
            let ((al, ah), (bl, bh)) = (self.bounds(a)?, self.bounds(b)?);
            if ah <= bl {
                Some(Ordering::Less)
            } else if al >= bh {
                Some(Ordering::Greater)
            } else {
                None
            }
        })
    }
}

/// `Less` when all of `[lo, hi]` is at most zero, `Greater` when all of it is at least zero.
fn sign_of_range(lo: i64, hi: i64) -> Option<Ordering> {
    if hi <= 0 {
        Some(Ordering::Less)
    } else if lo >= 0 {
        Some(Ordering::Greater)
    } else {
        None
    }
}

/// Evaluation, substitution and traversal.
impl ExprArena {
    /// The exact value of `e` with variables bound by `env`: `None` for an unbound variable,
    /// division by zero or overflow.
    pub fn eval(&self, e: ExprId, env: &dyn Fn(VarId) -> Option<i64>) -> Option<i64> {
        let node = self.get(e);
        if let Expr::Int(value) = *node {
            return Some(value);
        }
        if let Expr::Var(v) = *node {
            return env(v);
        }
        let (a, b) = node.operands()?;
        let (x, y) = (self.eval(a, env)?, self.eval(b, env)?);
        match node {
            Expr::Add(..) => x.checked_add(y),
            Expr::Sub(..) => x.checked_sub(y),
            Expr::Mul(..) => x.checked_mul(y),
            Expr::FloorDiv(..) => floor_div(x, y),
            Expr::FloorMod(..) => floor_mod(x, y),
            Expr::Min(..) => Some(x.min(y)),
            Expr::Max(..) => Some(x.max(y)),
            Expr::Int(_) | Expr::Var(_) => None,
        }
    }

    /// Replaces the variables `map` maps and rebuilds through the simplifying constructors, so
    /// the result is simplified again (`(i * 4 + j) // 4` with `j := 0` is `i`).
    pub fn substitute(&mut self, e: ExprId, map: &dyn Fn(VarId) -> Option<ExprId>) -> ExprId {
        let mut memo = FxHashMap::default();
        self.substitute_memo(e, map, &mut memo)
    }

    fn substitute_memo(
        &mut self,
        e: ExprId,
        map: &dyn Fn(VarId) -> Option<ExprId>,
        memo: &mut FxHashMap<ExprId, ExprId>,
    ) -> ExprId {
        if let Some(&done) = memo.get(&e) {
            return done;
        }
        let node = self.get(e).clone();
        let result = match node {
            Expr::Int(_) => e,
            Expr::Var(v) => map(v).unwrap_or(e),
            _ => match node.operands() {
                Some((a, b)) => {
                    let a = self.substitute_memo(a, map, memo);
                    let b = self.substitute_memo(b, map, memo);
                    self.rebuild(&node, a, b)
                }
                None => e,
            },
        };
        memo.insert(e, result);
        result
    }

    /// Builds a node of the same kind as `node` from new operands, simplifying.
    fn rebuild(&mut self, node: &Expr, a: ExprId, b: ExprId) -> ExprId {
        match node {
            Expr::Add(..) => self.add(a, b),
            Expr::Sub(..) => self.sub(a, b),
            Expr::Mul(..) => self.mul(a, b),
            Expr::FloorDiv(..) => self.floordiv(a, b),
            Expr::FloorMod(..) => self.floormod(a, b),
            Expr::Min(..) => self.min(a, b),
            Expr::Max(..) => self.max(a, b),
            Expr::Int(_) | Expr::Var(_) => self.intern(node.clone()),
        }
    }

    /// The row-major flat index of `indices` in `shape`; missing leading indices count as zero
    /// (`x[i]` of a `(1, n)` buffer is its element `i`).
    pub fn flatten_row_major(&mut self, indices: &[ExprId], shape: &[ExprId]) -> ExprId {
        let skip = shape.len().saturating_sub(indices.len());
        let mut flat = self.int(0);
        for (&index, &extent) in indices.iter().zip(&shape[skip..]) {
            let scaled = self.mul(flat, extent);
            flat = self.add(scaled, index);
        }
        flat
    }

    /// The row-major coordinates of the flat index `flat` in `shape`. The first coordinate is
    /// not wrapped, so a flat index past the end stays past the end (and a bounds check sees it).
    pub fn unflatten_row_major(&mut self, flat: ExprId, shape: &[ExprId]) -> Vec<ExprId> {
        let mut coords = Vec::with_capacity(shape.len());
        let mut rest = flat;
        for (position, &extent) in shape.iter().enumerate().rev() {
            if position == 0 {
                coords.push(rest);
            } else {
                coords.push(self.floormod(rest, extent));
                rest = self.floordiv(rest, extent);
            }
        }
        coords.reverse();
        coords
    }

    /// Constant extents as expressions.
    pub fn ints(&mut self, values: &[i64]) -> Vec<ExprId> {
        values.iter().map(|&v| self.int(v)).collect()
    }

    /// The variables `e` mentions, sorted and without repeats.
    pub fn vars_of(&self, e: ExprId) -> Vec<VarId> {
        let mut seen = vec![false; self.nodes.len()];
        let mut stack = vec![e];
        let mut vars = Vec::new();
        while let Some(next) = stack.pop() {
            if std::mem::replace(&mut seen[next.index()], true) {
                continue;
            }
            match *self.get(next) {
                Expr::Int(_) => {}
                Expr::Var(v) => vars.push(v),
                ref node => {
                    stack.extend(node.operands().map(|(a, b)| [a, b]).into_iter().flatten())
                }
            }
        }
        vars.sort_unstable();
        vars.dedup();
        vars
    }

    /// A printable view of `e` in Python syntax, as TileLang prints layouts.
    pub fn display(&self, e: ExprId) -> ExprDisplay<'_> {
        ExprDisplay {
            arena: self,
            expr: e,
        }
    }
}

/// Prints an expression in Python syntax with the fewest parentheses precedence allows.
#[derive(Clone, Copy, Debug)]
pub struct ExprDisplay<'a> {
    arena: &'a ExprArena,
    expr: ExprId,
}

/// Python precedence levels, loosest first.
const PREC_SUM: u8 = 1;
const PREC_PRODUCT: u8 = 2;
const PREC_UNARY: u8 = 3;
const PREC_ATOM: u8 = 4;

impl ExprDisplay<'_> {
    /// How tightly the printed form of `e` binds.
    fn precedence(&self, e: ExprId) -> u8 {
        match *self.arena.get(e) {
            Expr::Int(value) if value < 0 => PREC_UNARY,
            Expr::Int(_) | Expr::Var(_) | Expr::Min(..) | Expr::Max(..) => PREC_ATOM,
            Expr::Mul(_, c) if self.arena.as_int(c) == Some(-1) => PREC_UNARY,
            Expr::Add(..) | Expr::Sub(..) => PREC_SUM,
            Expr::Mul(..) | Expr::FloorDiv(..) | Expr::FloorMod(..) => PREC_PRODUCT,
        }
    }

    /// Writes `e`, parenthesized when it binds looser than `min_prec`.
    fn write_at(&self, f: &mut fmt::Formatter<'_>, e: ExprId, min_prec: u8) -> fmt::Result {
        if self.precedence(e) < min_prec {
            f.write_str("(")?;
            self.write(f, e)?;
            f.write_str(")")
        } else {
            self.write(f, e)
        }
    }

    /// Writes a left-associative binary operation.
    fn write_binary(
        &self,
        f: &mut fmt::Formatter<'_>,
        (a, b): (ExprId, ExprId),
        op: &str,
        prec: u8,
    ) -> fmt::Result {
        // Python reads `-i // 4` as `(-i) // 4`, which a person easily misreads as
        // `-(i // 4)`; the parentheses are redundant but spell out what is meant.
        let spelled_out = matches!(op, " // " | " % ") && self.precedence(a) == PREC_UNARY;
        self.write_at(f, a, if spelled_out { PREC_ATOM } else { prec })?;
        f.write_str(op)?;
        self.write_at(f, b, prec + 1)
    }

    fn write_call(
        &self,
        f: &mut fmt::Formatter<'_>,
        name: &str,
        (a, b): (ExprId, ExprId),
    ) -> fmt::Result {
        write!(f, "{name}(")?;
        self.write(f, a)?;
        f.write_str(", ")?;
        self.write(f, b)?;
        f.write_str(")")
    }

    fn write(&self, f: &mut fmt::Formatter<'_>, e: ExprId) -> fmt::Result {
        match *self.arena.get(e) {
            Expr::Int(value) => write!(f, "{value}"),
            Expr::Var(v) => f.write_str(&self.arena.var_info(v).name),
            Expr::Mul(x, c) if self.arena.as_int(c) == Some(-1) => {
                f.write_str("-")?;
                self.write_at(f, x, PREC_ATOM)
            }
            Expr::Add(a, b) => self.write_binary(f, (a, b), " + ", PREC_SUM),
            Expr::Sub(a, b) => self.write_binary(f, (a, b), " - ", PREC_SUM),
            Expr::Mul(a, b) => self.write_binary(f, (a, b), " * ", PREC_PRODUCT),
            Expr::FloorDiv(a, b) => self.write_binary(f, (a, b), " // ", PREC_PRODUCT),
            Expr::FloorMod(a, b) => self.write_binary(f, (a, b), " % ", PREC_PRODUCT),
            Expr::Min(a, b) => self.write_call(f, "min", (a, b)),
            Expr::Max(a, b) => self.write_call(f, "max", (a, b)),
        }
    }
}

impl fmt::Display for ExprDisplay<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write(f, self.expr)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use expect_test::expect;

    /// An unsimplified expression tree: the reference the simplifier is checked against, and a
    /// compact way to write test inputs.
    #[derive(Clone, Debug)]
    enum T {
        Int(i64),
        Var(usize),
        Neg(Box<T>),
        Bin(Op, Box<T>, Box<T>),
    }

    #[derive(Clone, Copy, Debug)]
    enum Op {
        Add,
        Sub,
        Mul,
        Div,
        Mod,
        Min,
        Max,
        CeilDiv,
    }

    impl Op {
        fn apply(self, x: i64, y: i64) -> Option<i64> {
            match self {
                Op::Add => x.checked_add(y),
                Op::Sub => x.checked_sub(y),
                Op::Mul => x.checked_mul(y),
                Op::Div => floor_div(x, y),
                Op::Mod => floor_mod(x, y),
                Op::Min => Some(x.min(y)),
                Op::Max => Some(x.max(y)),
                Op::CeilDiv => floor_div(x.checked_add(y)?.checked_sub(1)?, y),
            }
        }
    }

    impl T {
        /// Evaluates the tree as written, with checked arithmetic.
        fn eval(&self, env: &[i64]) -> Option<i64> {
            match self {
                T::Int(value) => Some(*value),
                T::Var(index) => Some(env[*index]),
                T::Neg(a) => a.eval(env)?.checked_neg(),
                T::Bin(op, a, b) => op.apply(a.eval(env)?, b.eval(env)?),
            }
        }

        /// Builds the tree through the arena's simplifying constructors.
        fn build(&self, ar: &mut ExprArena, vars: &[VarId]) -> ExprId {
            match self {
                T::Int(value) => ar.int(*value),
                T::Var(index) => ar.var_expr(vars[*index]),
                T::Neg(a) => {
                    let a = a.build(ar, vars);
                    ar.neg(a)
                }
                T::Bin(op, a, b) => {
                    let (a, b) = (a.build(ar, vars), b.build(ar, vars));
                    match op {
                        Op::Add => ar.add(a, b),
                        Op::Sub => ar.sub(a, b),
                        Op::Mul => ar.mul(a, b),
                        Op::Div => ar.floordiv(a, b),
                        Op::Mod => ar.floormod(a, b),
                        Op::Min => ar.min(a, b),
                        Op::Max => ar.max(a, b),
                        Op::CeilDiv => ar.ceildiv(a, b),
                    }
                }
            }
        }
    }

    fn bin(op: Op, a: T, b: T) -> T {
        T::Bin(op, Box::new(a), Box::new(b))
    }

    impl std::ops::Add for T {
        type Output = T;
        fn add(self, b: T) -> T {
            bin(Op::Add, self, b)
        }
    }

    impl std::ops::Sub for T {
        type Output = T;
        fn sub(self, b: T) -> T {
            bin(Op::Sub, self, b)
        }
    }

    impl std::ops::Mul for T {
        type Output = T;
        fn mul(self, b: T) -> T {
            bin(Op::Mul, self, b)
        }
    }

    /// `/` stands for floor division in test inputs.
    impl std::ops::Div for T {
        type Output = T;
        fn div(self, b: T) -> T {
            bin(Op::Div, self, b)
        }
    }

    /// `%` stands for floor modulo in test inputs.
    impl std::ops::Rem for T {
        type Output = T;
        fn rem(self, b: T) -> T {
            bin(Op::Mod, self, b)
        }
    }

    impl std::ops::Neg for T {
        type Output = T;
        fn neg(self) -> T {
            T::Neg(Box::new(self))
        }
    }

    fn c(value: i64) -> T {
        T::Int(value)
    }

    fn min(a: T, b: T) -> T {
        bin(Op::Min, a, b)
    }

    fn max(a: T, b: T) -> T {
        bin(Op::Max, a, b)
    }

    fn ceildiv(a: T, b: T) -> T {
        bin(Op::CeilDiv, a, b)
    }

    /// `0 <= i < 8`.
    fn i() -> T {
        T::Var(0)
    }

    /// `0 <= j < 4`.
    fn j() -> T {
        T::Var(1)
    }

    /// `0 <= k < 16`.
    fn k() -> T {
        T::Var(2)
    }

    /// Unbounded.
    fn n() -> T {
        T::Var(3)
    }

    fn setup() -> (ExprArena, Vec<VarId>) {
        let mut ar = ExprArena::new();
        let vars = vec![
            ar.var("i", Some(8)),
            ar.var("j", Some(4)),
            ar.var("k", Some(16)),
            ar.var("n", None),
        ];
        (ar, vars)
    }

    /// Builds `t` in a fresh arena and prints the simplified result.
    fn show(t: T) -> String {
        let (mut ar, vars) = setup();
        let e = t.build(&mut ar, &vars);
        ar.display(e).to_string()
    }

    /// True when both trees simplify to the same id in one arena.
    fn same_id(a: T, b: T) -> bool {
        let (mut ar, vars) = setup();
        a.build(&mut ar, &vars) == b.build(&mut ar, &vars)
    }

    #[test]
    fn floor_helpers_match_the_definition() {
        for a in -40..=40_i64 {
            for b in (-9..=9_i64).filter(|&b| b != 0) {
                let (q, r) = (floor_div(a, b), floor_mod(a, b));
                // Operands within ±40 are exact in f64, and so is their floored quotient.
                #[allow(clippy::cast_possible_truncation)]
                let expected_q = (a as f64 / b as f64).floor() as i64;
                assert_eq!(q, Some(expected_q), "{a} // {b}");
                assert_eq!(r, Some(a - b * expected_q), "{a} % {b}");
            }
            assert_eq!(floor_div(a, 0), None);
            assert_eq!(floor_mod(a, 0), None);
        }
        assert_eq!(floor_div(i64::MIN, -1), None);
        assert_eq!(floor_mod(i64::MIN, -1), Some(0));
        assert_eq!(floor_div(i64::MIN, 2), Some(i64::MIN / 2));
        assert_eq!(floor_mod(i64::MAX, i64::MIN), Some(-1));
    }

    #[test]
    fn folds_constants() {
        expect!["5"].assert_eq(&show(c(2) + c(3)));
        expect!["-4"].assert_eq(&show(c(5) - c(9)));
        expect!["42"].assert_eq(&show(c(6) * c(7)));
        expect!["-4"].assert_eq(&show(c(-7) / c(2)));
        expect!["1"].assert_eq(&show(c(-7) % c(2)));
        expect!["-1"].assert_eq(&show(c(7) % c(-2)));
        expect!["-4"].assert_eq(&show(c(7) / c(-2)));
        expect!["-2"].assert_eq(&show(min(c(3), c(-2))));
        expect!["3"].assert_eq(&show(max(c(3), c(-2))));
        expect!["3"].assert_eq(&show(ceildiv(c(10), c(4))));
        expect!["-3"].assert_eq(&show(-c(3)));
        expect!["12"].assert_eq(&show((c(1) + c(2)) * (c(10) - c(6))));
    }

    #[test]
    fn applies_identities() {
        expect!["i"].assert_eq(&show(i() + c(0)));
        expect!["i"].assert_eq(&show(c(0) + i()));
        expect!["n"].assert_eq(&show(n() * c(1)));
        expect!["0"].assert_eq(&show(n() * c(0)));
        expect!["n"].assert_eq(&show(n() / c(1)));
        expect!["0"].assert_eq(&show(n() % c(1)));
        expect!["0"].assert_eq(&show(n() - n()));
        expect!["0"].assert_eq(&show(n() * i() - i() * n()));
        expect!["n"].assert_eq(&show(-(-n())));
    }

    #[test]
    fn collects_like_terms() {
        expect!["i * 2"].assert_eq(&show(i() + i()));
        expect!["0"].assert_eq(&show(i() * c(4) - i() * c(4)));
        expect!["i + 3"].assert_eq(&show(c(3) + i()));
        expect!["i + j"].assert_eq(&show((i() + c(3)) + (j() - c(3))));
        expect!["i - j"].assert_eq(&show(i() - j()));
        expect!["i - 4"].assert_eq(&show(i() - c(4)));
        expect!["j - i * 3"].assert_eq(&show(j() - i() * c(3)));
        expect!["-i"].assert_eq(&show((i() + j()) - (i() * c(2) + j())));
        expect!["i + n"].assert_eq(&show(n() * c(2) + i() - n()));
        expect!["-i - j"].assert_eq(&show(c(0) - j() - i()));
        expect!["i * -3 + 4"].assert_eq(&show(c(4) - i() * c(3)));
    }

    #[test]
    fn commutative_forms_intern_to_one_id() {
        assert!(same_id(i() + j(), j() + i()));
        assert!(same_id((i() + j()) + k(), i() + (j() + k())));
        assert!(same_id((k() + i()) + j(), i() + (j() + k())));
        assert!(same_id(i() * n(), n() * i()));
        assert!(same_id((i() * j()) * k(), k() * (j() * i())));
        assert!(same_id(min(i(), n()), min(n(), i())));
        assert!(same_id(max(i(), n()), max(n(), i())));
        assert!(same_id(i() * c(4) + c(4), (i() + c(1)) * c(4)));
        assert!(!same_id(i() - j(), j() - i()));
    }

    #[test]
    fn simplifies_products() {
        expect!["i * 32"].assert_eq(&show((i() * c(4)) * c(8)));
        expect!["i * 16"].assert_eq(&show(c(16) * i()));
        expect!["i * 4 + 4"].assert_eq(&show((i() + c(1)) * c(4)));
        expect!["i * n * 6"].assert_eq(&show((i() * c(2)) * (n() * c(3))));
        expect!["(i + 1) * n"].assert_eq(&show(n() * (i() + c(1))));
        expect!["n * -2"].assert_eq(&show(-(n() * c(2))));
        expect!["i * i"].assert_eq(&show(i() * i()));
    }

    #[test]
    fn uses_ranges_in_division_and_modulo() {
        expect!["0"].assert_eq(&show(j() / c(4)));
        expect!["j"].assert_eq(&show(j() % c(4)));
        expect!["i"].assert_eq(&show((i() * c(4) + j()) / c(4)));
        expect!["j"].assert_eq(&show((i() * c(4) + j()) % c(4)));
        expect!["0"].assert_eq(&show((i() * c(16)) % c(8)));
        expect!["i * 2"].assert_eq(&show((i() * c(16) + j()) / c(8)));
        expect!["j"].assert_eq(&show((i() * c(16) + j()) % c(8)));
        expect!["n"].assert_eq(&show((n() * c(4) + j()) / c(4)));
        expect!["j"].assert_eq(&show((n() * c(4) + j()) % c(4)));
        expect!["n"].assert_eq(&show((n() * c(4) + c(1)) / c(4)));
        expect!["k // 4 + n"].assert_eq(&show((n() * c(4) + k()) / c(4)));
        expect!["i + k // 8"].assert_eq(&show((i() * c(8) + k()) / c(8)));
        expect!["k // 4"].assert_eq(&show(k() / c(4)));
        expect!["1"].assert_eq(&show((j() + c(4)) / c(4)));
        expect!["-1"].assert_eq(&show((j() - c(4)) / c(4)));
        expect!["j"].assert_eq(&show((j() - c(4)) % c(4)));
        expect!["n - 1"].assert_eq(&show((n() * c(4) - c(1)) / c(4)));
        expect!["3"].assert_eq(&show((n() * c(4) - c(1)) % c(4)));
        expect!["j + 1"].assert_eq(&show((j() + c(9)) % c(8)));
    }

    #[test]
    fn splits_off_a_low_part_smaller_than_a_factor_of_the_divisor() {
        // A split loop counter: `step = n * 4 + j` with `0 <= j < 4`.
        expect!["n // 4"].assert_eq(&show((n() * c(4) + j()) / c(16)));
        expect!["j + n % 4 * 4"].assert_eq(&show((n() * c(4) + j()) % c(16)));
        expect!["n % 4"].assert_eq(&show((n() * c(4) + j()) / c(4) % c(4)));
        expect!["n // 2"].assert_eq(&show((n() * c(8) + i()) / c(16)));
        expect!["i + n % 2 * 8"].assert_eq(&show((n() * c(8) + i()) % c(16)));
        // A low part that may reach the factor is left alone.
        expect!["(k + n * 4) // 16"].assert_eq(&show((n() * c(4) + k()) / c(16)));
    }

    #[test]
    fn merges_nested_division_and_modulo() {
        expect!["n // 32"].assert_eq(&show((n() / c(4)) / c(8)));
        expect!["n % 8"].assert_eq(&show((n() % c(32)) % c(8)));
        expect!["n % 4 * 4"].assert_eq(&show((n() * c(4)) % c(16)));
        expect!["(k * 2 + n) // 4"].assert_eq(&show((n() * c(2) + k() * c(4)) / c(8)));
        expect!["(n + 4) // 8"].assert_eq(&show((n() / c(4) + c(1)) / c(2)));
        expect!["n % 16 // 4"].assert_eq(&show((n() % c(16)) / c(4)));
        expect!["n % 8"].assert_eq(&show((n() % c(8)) % c(16)));
        expect!["(n + 8) % 16"].assert_eq(&show((n() % c(16) + c(8)) % c(16)));
        expect!["n % 4"].assert_eq(&show((n() * c(4)) % c(16) / c(4)));
    }

    #[test]
    fn evaluates_negative_operands_with_floor_semantics() {
        let (mut ar, vars) = setup();
        let n = ar.var_expr(vars[3]);
        let (two, minus_two) = (ar.int(2), ar.int(-2));
        let div = ar.floordiv(n, two);
        let rem = ar.floormod(n, two);
        let div_neg = ar.floordiv(n, minus_two);
        let rem_neg = ar.floormod(n, minus_two);
        let at = |value: i64| move |_: VarId| Some(value);
        assert_eq!(ar.eval(div, &at(-7)), Some(-4));
        assert_eq!(ar.eval(rem, &at(-7)), Some(1));
        assert_eq!(ar.eval(div_neg, &at(7)), Some(-4));
        assert_eq!(ar.eval(rem_neg, &at(7)), Some(-1));
        assert_eq!(ar.eval(rem_neg, &at(-7)), Some(-1));
        expect!["n // -2"].assert_eq(&ar.display(div_neg).to_string());
    }

    #[test]
    fn prints_a_fragment_layout_formula() {
        let mut ar = ExprArena::new();
        let vars = [ar.var("i", Some(64)), ar.var("j", Some(16))];
        let (i, j) = (T::Var(0), T::Var(1));
        let formula = i.clone() / c(16) * c(32) + i.clone() % c(8) * c(4) + j.clone() % c(8) / c(2);
        let shuffled = j % c(8) / c(2) + (i.clone() % c(8) * c(4) + c(32) * (i / c(16)));
        let e = formula.build(&mut ar, &vars);
        assert_eq!(shuffled.build(&mut ar, &vars), e);
        expect!["i // 16 * 32 + i % 8 * 4 + j % 8 // 2"].assert_eq(&ar.display(e).to_string());
    }

    #[test]
    fn prints_with_minimal_parentheses() {
        expect!["(i + 1) // 2"].assert_eq(&show((i() + c(1)) / c(2)));
        expect!["i // (n * 2)"].assert_eq(&show(i() / (n() * c(2))));
        expect!["n % 3 * (n % 5)"].assert_eq(&show((n() % c(3)) * (n() % c(5))));
        expect!["min(i, n) + 1"].assert_eq(&show(min(i(), n()) + c(1)));
        expect!["max(i - 1, n)"].assert_eq(&show(max(n(), i() - c(1))));
        expect!["-(n // 4)"].assert_eq(&show(-(n() / c(4))));
        expect!["(n + 2) % 3"].assert_eq(&show((n() - c(1)) % c(3)));
        expect!["(i - n) // 3"].assert_eq(&show((i() - n()) / c(3)));
        expect!["n - n // 4 * 4"].assert_eq(&show(n() - n() / c(4) * c(4)));
        expect!["n // (n - 1)"].assert_eq(&show(n() / (n() - c(1))));
        expect!["(-n) // 4"].assert_eq(&show(-n() / c(4)));
        expect!["(-4) % n"].assert_eq(&show(c(-4) % n()));
        expect!["n // -4"].assert_eq(&show(n() / c(-4)));
        expect!["-(n * n)"].assert_eq(&show(-n() * n()));
    }

    #[test]
    fn substitutes_and_resimplifies() {
        let (mut ar, vars) = setup();
        let [vi, vj, vk, _] = vars[..] else {
            panic!("four vars")
        };
        let e = ((i() * c(4) + j()) / c(4)).build(&mut ar, &vars);
        expect!["i"].assert_eq(&ar.display(e).to_string());

        let linear = (i() * c(4) + j()).build(&mut ar, &vars);
        let k_plus_one = (k() + c(1)).build(&mut ar, &vars);
        let moved = ar.substitute(linear, &|v| (v == vi).then_some(k_plus_one));
        expect!["j + k * 4 + 4"].assert_eq(&ar.display(moved).to_string());

        let modulo = ((n() * c(4) + j()) % c(4)).build(&mut ar, &vars);
        let zero = ar.int(0);
        let dropped = ar.substitute(modulo, &|v| (v == vj).then_some(zero));
        expect!["0"].assert_eq(&ar.display(dropped).to_string());

        let all = (i() * k() + j() / c(2)).build(&mut ar, &vars);
        let three = ar.int(3);
        let folded = ar.substitute(all, &|v| (v != vk).then_some(three));
        expect!["k * 3 + 1"].assert_eq(&ar.display(folded).to_string());
        assert_eq!(ar.substitute(all, &|_| None), all);
    }

    #[test]
    fn eval_reports_unbound_division_by_zero_and_overflow() {
        let (mut ar, vars) = setup();
        let i = ar.var_expr(vars[0]);
        assert_eq!(ar.eval(i, &|_| None), None);
        assert_eq!(ar.eval(i, &|_| Some(5)), Some(5));

        let by_zero = (n() / (j() - j())).build(&mut ar, &vars);
        let mod_zero = (n() % c(0)).build(&mut ar, &vars);
        assert_eq!(ar.eval(by_zero, &|_| Some(3)), None);
        assert_eq!(ar.eval(mod_zero, &|_| Some(3)), None);
        let const_zero = (c(1) / c(0)).build(&mut ar, &vars);
        assert_eq!(ar.eval(const_zero, &|_| None), None);

        let max_plus_one = (c(i64::MAX) + c(1)).build(&mut ar, &vars);
        assert_eq!(ar.eval(max_plus_one, &|_| None), None);
        let doubled = (n() * c(2)).build(&mut ar, &vars);
        assert_eq!(ar.eval(doubled, &|_| Some(i64::MAX)), None);
        let min_div = (c(i64::MIN) / c(-1)).build(&mut ar, &vars);
        assert_eq!(ar.eval(min_div, &|_| None), None);
        let huge = (n() * c(i64::MAX) * c(4)).build(&mut ar, &vars);
        assert_eq!(ar.eval(huge, &|_| Some(0)), Some(0));
        assert_eq!(ar.eval(huge, &|_| Some(1)), None);
    }

    #[test]
    fn computes_bounds_and_vars() {
        let (mut ar, vars) = setup();
        let mut bounds = |t: T| {
            let e = t.build(&mut ar, &vars);
            ar.bounds(e)
        };
        assert_eq!(bounds(i() * c(4) + j()), Some((0, 31)));
        assert_eq!(bounds(i() - j()), Some((-3, 7)));
        assert_eq!(bounds(n()), None);
        assert_eq!(bounds(n() % c(8)), Some((0, 7)));
        assert_eq!(bounds(n() % c(-8)), Some((-7, 0)));
        assert_eq!(bounds(k() / c(4)), Some((0, 3)));
        assert_eq!(bounds(i() * j()), Some((0, 21)));
        assert_eq!(bounds(k() / j()), Some((0, 15)));
        assert_eq!(bounds(min(i(), j() + c(5))), Some((0, 7)));

        let e = (n() + i() * j() + n() * c(2)).build(&mut ar, &vars);
        assert_eq!(ar.vars_of(e), vec![vars[0], vars[1], vars[3]]);
    }

    #[test]
    fn folds_min_and_max_by_range() {
        expect!["j"].assert_eq(&show(min(j(), c(4))));
        expect!["4"].assert_eq(&show(max(j(), c(4))));
        expect!["i"].assert_eq(&show(min(i(), i() + c(1))));
        expect!["n"].assert_eq(&show(max(n(), n() - c(2))));
        expect!["i + 4"].assert_eq(&show(max(j(), i() + c(4))));
        expect!["min(i, n)"].assert_eq(&show(min(n(), i())));
        expect!["min(i, j)"].assert_eq(&show(min(i(), j())));
        // The difference of these overflows; their ranges still decide.
        expect!["-9223372036854775808"].assert_eq(&show(min(c(i64::MIN), c(1))));
        expect!["9223372036854775807"].assert_eq(&show(max(c(-1), c(i64::MAX))));
    }

    #[test]
    fn builds_ceildiv() {
        expect!["(n + 3) // 4"].assert_eq(&show(ceildiv(n(), c(4))));
        expect!["i"].assert_eq(&show(ceildiv(i() * c(4), c(4))));
        expect!["i + 1"].assert_eq(&show(ceildiv(i() * c(4) + j() + c(1), c(4))));
        expect!["-2"].assert_eq(&show(ceildiv(c(-7), c(3))));
    }

    #[test]
    fn arenas_compare_by_nodes_and_vars() {
        let build = |order: &[usize]| {
            let (mut ar, vars) = setup();
            for &index in order {
                T::Var(index).build(&mut ar, &vars);
            }
            ar
        };
        let a = build(&[0, 1, 2]);
        assert_eq!(a, build(&[0, 1, 2]));
        assert_eq!(a, a.clone());
        assert_ne!(a, build(&[1, 0, 2]));
        assert_eq!(a.len(), 3);
        assert!(!a.is_empty());
        assert!(ExprArena::new().is_empty());
    }

    /// A small deterministic generator (SplitMix64), so failures reproduce.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        }

        fn below(&mut self, n: usize) -> usize {
            usize::try_from(self.next() % n as u64).expect("a remainder below n fits in usize")
        }

        fn pick<V: Copy>(&mut self, values: &[V]) -> V {
            values[self.below(values.len())]
        }
    }

    const CONSTANTS: [i64; 16] = [0, 1, 2, 3, 4, 5, 7, 8, 12, 16, 32, -1, -2, -3, -4, -8];
    const DIVISORS: [i64; 13] = [1, 2, 3, 4, 4, 8, 8, 16, -1, -2, -3, -4, 0];

    fn random_leaf(rng: &mut Rng, vars: usize) -> T {
        if rng.below(2) == 0 {
            T::Var(rng.below(vars))
        } else {
            c(rng.pick(&CONSTANTS))
        }
    }

    /// A random tree biased toward the shapes layouts have: scaled sums under `//` and `%`.
    fn random_tree(rng: &mut Rng, depth: usize, vars: usize) -> T {
        if depth == 0 || rng.below(5) == 0 {
            return random_leaf(rng, vars);
        }
        let mut sub = |rng: &mut Rng| random_tree(rng, depth - 1, vars);
        let divisor = |rng: &mut Rng, sub: &mut dyn FnMut(&mut Rng) -> T| {
            if rng.below(4) == 0 {
                sub(rng)
            } else {
                c(rng.pick(&DIVISORS))
            }
        };
        match rng.below(12) {
            10 => {
                // The shape of a layout formula: a scaled index plus an offset, divided.
                let scaled = T::Var(rng.below(vars)) * c(rng.pick(&[2, 4, 8, 16, -4]));
                let dividend = scaled + sub(rng);
                let divisor = c(rng.pick(&[2, 4, 8, 3]));
                if rng.below(2) == 0 {
                    dividend / divisor
                } else {
                    dividend % divisor
                }
            }
            0 | 1 => sub(rng) + sub(rng),
            2 => sub(rng) - sub(rng),
            3 => sub(rng) * c(rng.pick(&CONSTANTS)),
            4 => sub(rng) * sub(rng),
            5 | 6 => sub(rng) / divisor(rng, &mut sub),
            7 => sub(rng) % divisor(rng, &mut sub),
            8 => min(sub(rng), sub(rng)),
            9 => max(sub(rng), sub(rng)),
            _ if rng.below(2) == 0 => -sub(rng),
            _ => ceildiv(sub(rng), divisor(rng, &mut sub)),
        }
    }

    /// Every point of the domain: vars with an extent range over it, the others over -6..=6.
    fn domain(extents: &[Option<i64>]) -> Vec<Vec<i64>> {
        let mut points = vec![Vec::new()];
        for extent in extents {
            let values: Vec<i64> = match extent {
                Some(e) => (0..*e).collect(),
                None => (-6..=6).collect(),
            };
            points = points
                .iter()
                .flat_map(|p| values.iter().map(move |&v| [p.clone(), vec![v]].concat()))
                .collect();
        }
        points
    }

    #[test]
    fn split_constant_takes_the_constant_term_of_a_sum() {
        let mut ar = ExprArena::new();
        let i = ar.var("i", Some(4));
        let x = ar.var_expr(i);
        let k = ar.int(8);
        let scaled = ar.mul(x, k);
        let c = ar.int(32);
        let plus = ar.add(scaled, c);
        assert_eq!(ar.split_constant(plus), (Some(scaled), 32));
        let minus = ar.sub(scaled, c);
        assert_eq!(ar.split_constant(minus), (Some(scaled), -32));
        assert_eq!(ar.split_constant(c), (None, 32));
        assert_eq!(ar.split_constant(scaled), (Some(scaled), 0));
    }

    #[test]
    fn simplifier_is_exact_on_random_expressions() {
        let mut rng = Rng(0x7i64 as u64);
        let names = ["i", "j", "n"];
        let mut checked_points = 0_usize;
        for case in 0..3000 {
            let nvars = 2 + rng.below(2);
            let mut extents: Vec<Option<i64>> = (0..nvars)
                .map(|_| Some(1 + i64::try_from(rng.below(6)).expect("below 6")))
                .collect();
            // Some cases leave the last variable unbounded, so that rules relying on ranges are
            // also tested where they must not fire.
            if nvars == 3 && rng.below(2) == 0 {
                extents[2] = None;
            }
            let mut ar = ExprArena::new();
            let vars: Vec<VarId> = extents
                .iter()
                .enumerate()
                .map(|(index, &e)| ar.var(names[index], e))
                .collect();
            let tree = random_tree(&mut rng, 5, nvars);
            let e = tree.build(&mut ar, &vars);
            let printed = ar.display(e).to_string();
            let context = format!("case {case}: {tree:?} => {printed} (extents {extents:?})");
            assert_eq!(
                tree.build(&mut ar, &vars),
                e,
                "not deterministic: {context}"
            );
            assert_eq!(ar.substitute(e, &|_| None), e, "not idempotent: {context}");
            let reparsed = parse(&printed, &names);
            for point in domain(&extents) {
                let Some(expected) = tree.eval(&point) else {
                    continue;
                };
                checked_points += 1;
                let got = ar.eval(e, &|v| point.get(v.index()).copied());
                assert_eq!(got, Some(expected), "wrong value at {point:?}: {context}");
                assert_eq!(
                    reparsed.eval(&point),
                    got,
                    "misprinted at {point:?}: {context}"
                );
                if let Some((lo, hi)) = ar.bounds(e) {
                    assert!(
                        lo <= expected && expected <= hi,
                        "bounds {lo}..={hi}: {context}"
                    );
                }
            }
        }
        assert!(
            checked_points > 100_000,
            "only {checked_points} points checked"
        );
    }

    /// Parses printed Python back into a tree, to check that printing keeps the meaning.
    fn parse(text: &str, names: &[&str]) -> T {
        let mut parser = Parser {
            tokens: tokenize(text),
            pos: 0,
            names,
        };
        let tree = parser.sum();
        assert_eq!(parser.pos, parser.tokens.len(), "trailing input in {text}");
        tree
    }

    fn tokenize(text: &str) -> Vec<String> {
        let mut tokens = Vec::new();
        let mut chars = text.chars().peekable();
        while let Some(ch) = chars.next() {
            if ch.is_whitespace() {
                continue;
            }
            let mut token = ch.to_string();
            let continues = |c: char| {
                if ch.is_ascii_alphanumeric() {
                    c.is_ascii_alphanumeric()
                } else {
                    ch == '/' && c == '/'
                }
            };
            while let Some(&next) = chars.peek().filter(|&&c| continues(c)) {
                token.push(next);
                chars.next();
            }
            tokens.push(token);
        }
        tokens
    }

    struct Parser<'a> {
        tokens: Vec<String>,
        pos: usize,
        names: &'a [&'a str],
    }

    impl Parser<'_> {
        fn peek(&self) -> &str {
            self.tokens.get(self.pos).map_or("", String::as_str)
        }

        fn eat(&mut self, token: &str) -> bool {
            let found = self.peek() == token;
            self.pos += usize::from(found);
            found
        }

        fn sum(&mut self) -> T {
            let mut lhs = self.product();
            loop {
                if self.eat("+") {
                    lhs = lhs + self.product();
                } else if self.eat("-") {
                    lhs = lhs - self.product();
                } else {
                    return lhs;
                }
            }
        }

        fn product(&mut self) -> T {
            let mut lhs = self.unary();
            loop {
                if self.eat("*") {
                    lhs = lhs * self.unary();
                } else if self.eat("//") {
                    lhs = lhs / self.unary();
                } else if self.eat("%") {
                    lhs = lhs % self.unary();
                } else {
                    return lhs;
                }
            }
        }

        fn unary(&mut self) -> T {
            if self.eat("-") {
                -self.unary()
            } else {
                self.atom()
            }
        }

        fn atom(&mut self) -> T {
            let token = self.peek().to_owned();
            self.pos += 1;
            if token == "(" {
                let inner = self.sum();
                assert!(self.eat(")"), "expected )");
                return inner;
            }
            if token == "min" || token == "max" {
                assert!(self.eat("("), "expected (");
                let a = self.sum();
                assert!(self.eat(","), "expected ,");
                let b = self.sum();
                assert!(self.eat(")"), "expected )");
                return if token == "min" { min(a, b) } else { max(a, b) };
            }
            if let Ok(value) = token.parse::<i64>() {
                return c(value);
            }
            match self.names.iter().position(|&name| name == token) {
                Some(index) => T::Var(index),
                None => panic!("unexpected token {token:?}"),
            }
        }
    }
}
