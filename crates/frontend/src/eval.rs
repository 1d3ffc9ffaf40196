//! Evaluation of Python expressions: compile-time values, and IR built from symbolic ones.
//!
//! The rule is TileLang's: a Python value stays a Python value (so `if is_causal:` is decided at
//! compile time), while anything touching a loop variable, a block index or a tensor element becomes
//! IR — an index expression in the integer arena or a data expression.

use std::rc::Rc;

use ruff_python_ast::{
    BoolOp, CmpOp, Expr, ExprCall, InterpolatedStringElement, Number, Operator, UnaryOp,
};
use tilec_ir::data::{BinaryOp, CompareOp};
use tilec_ir::{Code, DType, DataExpr, DataId, EntityKind, ExprId, Region};

use crate::builder::{Builder, Eval, OpaqueLeniency, Stop};
use crate::outline::range_span;
use crate::value::{Builtin, Env, Function, FunctionBody, Value, lookup, range_len};
use tilec_ir::Span;

/// How deeply expressions may nest: deeper ones are a diagnostic, not a stack overflow.
const MAX_EXPR_DEPTH: u32 = 400;

/// The most nodes a data expression may have written out as a tree: far more than any kernel
/// writes by hand or unrolls, few enough that lowering, the emulator and the CUDA printer, which
/// walk expressions as trees, stay fast.
const MAX_DATA_TREE: u64 = 1 << 18;

/// How deep integer arithmetic on run-time reads is turned into index arithmetic; deeper than
/// any index a person writes, and a deeper one is bound as a whole.
const MAX_INDEX_DEPTH: u32 = 32;

/// The evaluated arguments of a call.
#[derive(Debug)]
pub(crate) struct Args<'a> {
    pub positional: Vec<(Value<'a>, Span)>,
    pub keywords: Vec<(String, Value<'a>, Span)>,
    pub span: Span,
}

impl<'a> Args<'a> {
    /// No arguments.
    pub(crate) fn empty(span: Span) -> Args<'a> {
        Args {
            positional: Vec::new(),
            keywords: Vec::new(),
            span,
        }
    }

    /// The argument at `index`, or the keyword `name`.
    pub(crate) fn get(&self, index: usize, name: &str) -> Option<&Value<'a>> {
        self.positional
            .get(index)
            .map(|(value, _)| value)
            .or_else(|| self.keyword(name))
    }

    pub(crate) fn keyword(&self, name: &str) -> Option<&Value<'a>> {
        self.keywords
            .iter()
            .find(|(key, _, _)| key == name)
            .map(|(_, value, _)| value)
    }

    /// Where the argument at `index` (or keyword `name`) was written, or the call itself.
    pub(crate) fn span_of(&self, index: usize, name: &str) -> Span {
        self.positional
            .get(index)
            .map(|(_, span)| *span)
            .or_else(|| {
                self.keywords
                    .iter()
                    .find(|(key, _, _)| key == name)
                    .map(|(_, _, span)| *span)
            })
            .unwrap_or(self.span)
    }
}

impl Builder<'_> {
    pub(crate) fn eval<'a>(&mut self, env: &Env<'a>, expr: &'a Expr) -> Eval<Value<'a>> {
        let span = range_span(expr);
        if self.expr_depth >= MAX_EXPR_DEPTH {
            return Err(self.error(
                Code::MetaError,
                span,
                format!("expression nested more than {MAX_EXPR_DEPTH} levels deep"),
            ));
        }
        self.expr_depth += 1;
        let result = self.eval_inner(env, expr, span);
        self.expr_depth -= 1;
        result
    }

    fn eval_inner<'a>(&mut self, env: &Env<'a>, expr: &'a Expr, span: Span) -> Eval<Value<'a>> {
        match expr {
            Expr::Name(name) => self.lookup_name(env, name.id.as_str(), span),
            Expr::NumberLiteral(number) => match &number.value {
                Number::Int(value) => match value.as_i64() {
                    Some(value) => Ok(Value::Int(value)),
                    None => Err(self.error(
                        Code::MetaError,
                        span,
                        "integer literal does not fit in 64 bits",
                    )),
                },
                Number::Float(value) => Ok(Value::Float(*value)),
                Number::Complex { .. } => Err(self.unsupported(span, "complex numbers")),
            },
            Expr::StringLiteral(string) => Ok(Value::str(string.value.to_str())),
            Expr::BooleanLiteral(value) => Ok(Value::Bool(value.value)),
            Expr::NoneLiteral(_) => Ok(Value::None),
            Expr::FString(fstring) => {
                let mut text = String::new();
                for element in fstring.value.elements() {
                    match element {
                        InterpolatedStringElement::Literal(literal) => {
                            text.push_str(&literal.value)
                        }
                        InterpolatedStringElement::Interpolation(interpolation) => {
                            let value = self.eval(env, &interpolation.expression)?;
                            // An unknown part makes the whole string unknown, as `str()` does.
                            if let Value::Opaque(what) = value {
                                return Ok(Value::Opaque(what));
                            }
                            text.push_str(&value.python_str());
                        }
                    }
                    self.within_sequence_limit(text.len() as u128, "string", span)?;
                }
                self.allocate(text.len() as u128, "string", span)?;
                Ok(Value::str(&text))
            }
            Expr::Tuple(tuple) => Ok(Value::tuple(self.eval_list(env, &tuple.elts)?)),
            Expr::List(list) => Ok(Value::List(Rc::new(self.eval_list(env, &list.elts)?))),
            Expr::Dict(dict) => {
                let mut entries = Vec::new();
                for item in &dict.items {
                    let Some(key) = &item.key else {
                        return Err(self.unsupported(span, "`**` in a dict literal"));
                    };
                    entries.push((self.eval(env, key)?, self.eval(env, &item.value)?));
                }
                Ok(Value::Dict(Rc::new(entries)))
            }
            Expr::BinOp(binary) => {
                let lhs = self.eval(env, &binary.left)?;
                let rhs = self.eval(env, &binary.right)?;
                self.binary(binary.op, lhs, rhs, span)
            }
            Expr::UnaryOp(unary) => {
                let operand = self.eval(env, &unary.operand)?;
                self.unary(unary.op, operand, span)
            }
            Expr::BoolOp(bool_op) => self.bool_op(env, bool_op.op, &bool_op.values, span),
            Expr::Compare(compare) => {
                let mut lhs = self.eval(env, &compare.left)?;
                let mut result: Option<Value<'a>> = None;
                for (op, comparator) in compare.ops.iter().zip(compare.comparators.iter()) {
                    let rhs = self.eval(env, comparator)?;
                    let this = self.compare(*op, &lhs, &rhs, span)?;
                    result = Some(match result {
                        None => this,
                        Some(previous) => self.logical(BinaryOp::And, previous, this, span)?,
                    });
                    lhs = rhs;
                }
                result.ok_or(Stop)
            }
            Expr::If(if_expr) => {
                let test = self.eval(env, &if_expr.test)?;
                match test.truthy() {
                    Some(true) => self.eval(env, &if_expr.body),
                    Some(false) => self.eval(env, &if_expr.orelse),
                    None => {
                        let then = self.eval(env, &if_expr.body)?;
                        let otherwise = self.eval(env, &if_expr.orelse)?;
                        self.select(test, then, otherwise, span)
                    }
                }
            }
            Expr::Call(call) => self.call(env, call),
            Expr::Attribute(attribute) => {
                let base = self.eval(env, &attribute.value)?;
                self.attribute(env, base, attribute.attr.as_str(), span)
            }
            Expr::Subscript(subscript) => {
                let base = self.eval(env, &subscript.value)?;
                self.subscript(env, base, &subscript.slice, span)
            }
            Expr::Lambda(lambda) => {
                let function = self.define_function(env, FunctionBody::Lambda(lambda), false)?;
                Ok(Value::Function(Rc::new(function)))
            }
            Expr::ListComp(comp) => self
                .comprehension(env, &comp.elt, &comp.generators, span)
                .map(|items| Value::List(Rc::new(items))),
            Expr::Generator(comp) => self
                .comprehension(env, &comp.elt, &comp.generators, span)
                .map(Value::tuple),
            Expr::Starred(_) => Err(self.unsupported(span, "`*` outside a call's arguments")),
            _ => Err(self.unsupported(span, "this kind of expression")),
        }
    }

    /// A function value for a `def` or `lambda`, with its defaults evaluated now.
    pub(crate) fn define_function<'a>(
        &mut self,
        env: &Env<'a>,
        body: FunctionBody<'a>,
        prim_func: bool,
    ) -> Eval<Function<'a>> {
        let parameters = match body {
            FunctionBody::Def(def) => Some(&*def.parameters),
            FunctionBody::Lambda(lambda) => lambda.parameters.as_deref(),
        };
        let mut defaults = Vec::new();
        for param in parameters
            .into_iter()
            .flat_map(|p| p.iter_non_variadic_params())
        {
            if let Some(default) = &param.default {
                defaults.push((param.name().as_str().to_owned(), self.eval(env, default)?));
            }
        }
        Ok(Function {
            body,
            closure: env.clone(),
            prim_func,
            defaults,
            autotune_config: Vec::new(),
            module: self.current_module,
        })
    }

    /// Python that TileLang itself does not accept in a kernel (`unsupported-syntax`, an error),
    /// where [`Self::unsupported`] is what tilec does not evaluate yet (`not-analysed`).
    pub(crate) fn misused(&mut self, span: Span, what: &str) -> Stop {
        self.error(
            Code::UnsupportedSyntax,
            span,
            format!("{what} is not supported by tilec"),
        )
    }

    /// Python or a construct tilec does not evaluate yet: a limit of tilec's (`not-analysed`).
    pub(crate) fn unsupported(&mut self, span: Span, what: &str) -> Stop {
        self.error(
            Code::NotAnalysed,
            span,
            format!("{what} is not supported by tilec"),
        )
    }

    fn lookup_name<'a>(&mut self, env: &Env<'a>, name: &str, span: Span) -> Eval<Value<'a>> {
        match lookup(env, name) {
            Some(Value::Poison) => Err(Stop),
            Some(Value::Opaque(what))
                if self.strict && !self.opaque_arguments && !what.starts_with("module") =>
            {
                Err(self.error(
                    Code::NotAnalysed,
                    span,
                    format!("`{name}` cannot be used here: it is {what}"),
                ))
            }
            Some(value) => Ok(value),
            None => match name {
                "True" => Ok(Value::Bool(true)),
                "False" => Ok(Value::Bool(false)),
                "None" => Ok(Value::None),
                _ => match Builtin::from_name(name) {
                    Some(builtin) => Ok(Value::Builtin(builtin)),
                    None => Err(self.undefined_name(name, span)),
                },
            },
        }
    }

    pub(crate) fn eval_list<'a>(
        &mut self,
        env: &Env<'a>,
        exprs: &'a [Expr],
    ) -> Eval<Vec<Value<'a>>> {
        let mut values = Vec::with_capacity(exprs.len());
        for expr in exprs {
            if let Expr::Starred(starred) = expr {
                let value = self.eval(env, &starred.value)?;
                values.extend(self.iterate(value, range_span(expr))?);
            } else {
                values.push(self.eval(env, expr)?);
            }
        }
        Ok(values)
    }

    pub(crate) fn eval_args<'a>(&mut self, env: &Env<'a>, call: &'a ExprCall) -> Eval<Args<'a>> {
        let leniency = std::mem::take(&mut self.opaque_leniency);
        let outer = self.opaque_arguments;
        let args = self.eval_args_with(env, call, leniency);
        self.opaque_arguments = outer;
        args
    }

    /// [`Self::eval_args`], where `leniency` says which arguments may be values tilec cannot know.
    fn eval_args_with<'a>(
        &mut self,
        env: &Env<'a>,
        call: &'a ExprCall,
        leniency: OpaqueLeniency,
    ) -> Eval<Args<'a>> {
        self.opaque_arguments = leniency == OpaqueLeniency::All;
        let mut positional = Vec::new();
        for arg in call.arguments.args.iter() {
            if let Expr::Starred(starred) = arg {
                let value = self.eval(env, &starred.value)?;
                for item in self.iterate(value, range_span(arg))? {
                    positional.push((item, range_span(arg)));
                }
            } else {
                positional.push((self.eval(env, arg)?, range_span(arg)));
            }
        }
        let mut keywords = Vec::new();
        for keyword in &call.arguments.keywords {
            self.opaque_arguments = match leniency {
                OpaqueLeniency::All => true,
                OpaqueLeniency::Keyword(name) => keyword.arg.as_deref() == Some(name),
                OpaqueLeniency::None => false,
            };
            let value = self.eval(env, &keyword.value)?;
            match &keyword.arg {
                Some(name) => keywords.push((name.as_str().to_owned(), value, range_span(keyword))),
                None => match value {
                    Value::Dict(entries) => {
                        for (key, value) in entries.iter() {
                            let Value::Str(key) = key else {
                                return Err(self.error(
                                    Code::MetaError,
                                    range_span(keyword),
                                    "`**` needs a dict with string keys",
                                ));
                            };
                            keywords.push((key.to_string(), value.clone(), range_span(keyword)));
                        }
                    }
                    _ => {
                        return Err(self.error(
                            Code::MetaError,
                            range_span(keyword),
                            "`**` needs a dict",
                        ));
                    }
                },
            }
        }
        Ok(Args {
            positional,
            keywords,
            span: range_span(call),
        })
    }

    /// The items of a compile-time iterable (tuple, list, range, dict keys, string).
    pub(crate) fn iterate<'a>(&mut self, value: Value<'a>, span: Span) -> Eval<Vec<Value<'a>>> {
        match value {
            Value::Tuple(items) | Value::List(items) => {
                self.allocate(items.len() as u128, "list", span)?;
                Ok(items.to_vec())
            }
            Value::Range { start, stop, step } => {
                let count = range_len(start, stop, step);
                self.allocate(u128::try_from(count).unwrap_or(0), "range", span)?;
                Ok((0..count).map(|k| Value::Int(start + k * step)).collect())
            }
            Value::Dict(entries) => Ok(entries.iter().map(|(key, _)| key.clone()).collect()),
            Value::Str(text) => {
                self.allocate(text.len() as u128, "string", span)?;
                Ok(text.chars().map(|c| Value::str(&c.to_string())).collect())
            }
            // TileLang's dtypes are `str` subclasses: iterating one gives its name's characters
            // (`"".join(c for c in storage_dtype if c.isdigit())` reads a width).
            Value::DType(dtype) => Ok(dtype
                .name()
                .chars()
                .map(|c| Value::str(&c.to_string()))
                .collect()),
            Value::Poison => Err(Stop),
            other => {
                // An int tilec assumed for a parameter that is a list (`batch_sizes_list`) is
                // the assumption's failure: the build retries, and says so if nothing fits.
                self.reject_assumptions();
                Err(self.error(
                    Code::MetaError,
                    span,
                    format!("cannot iterate over {} at compile time", other.describe()),
                ))
            }
        }
    }

    fn comprehension<'a>(
        &mut self,
        env: &Env<'a>,
        element: &'a Expr,
        generators: &'a [ruff_python_ast::Comprehension],
        span: Span,
    ) -> Eval<Vec<Value<'a>>> {
        let scope = crate::value::new_env(Some(env.clone()));
        let mut out = Vec::new();
        self.comprehension_level(&scope, element, generators, span, &mut out)?;
        Ok(out)
    }

    fn comprehension_level<'a>(
        &mut self,
        scope: &Env<'a>,
        element: &'a Expr,
        generators: &'a [ruff_python_ast::Comprehension],
        span: Span,
        out: &mut Vec<Value<'a>>,
    ) -> Eval<()> {
        let Some((first, rest)) = generators.split_first() else {
            out.push(self.eval(scope, element)?);
            return Ok(());
        };
        let iterable = self.eval(scope, &first.iter)?;
        'items: for item in self.iterate(iterable, span)? {
            self.step(span)?;
            self.assign(scope, &first.target, item)?;
            for condition in &first.ifs {
                let keep = self.eval(scope, condition)?;
                match keep.truthy() {
                    Some(true) => {}
                    Some(false) => continue 'items,
                    None => {
                        return Err(self.error(
                            Code::MetaError,
                            span,
                            "a comprehension's condition must be known at compile time",
                        ));
                    }
                }
            }
            self.comprehension_level(scope, element, rest, span, out)?;
        }
        Ok(())
    }

    // ----- conversions ------------------------------------------------------------------------

    /// The value as an index expression, if it is an integer (constant or symbolic).
    pub(crate) fn index_expr(&mut self, value: &Value<'_>) -> Option<ExprId> {
        match value {
            Value::Int(value) => Some(self.world.exprs.int(*value)),
            Value::Bool(value) => Some(self.world.exprs.int(i64::from(*value))),
            Value::Index(id) => Some(*id),
            _ => None,
        }
    }

    /// The value as an index expression where a run-time integer may stand (an index, a slice
    /// bound, a loop extent, a `T.ceildiv` argument): as [`Builder::index_expr`], and besides an
    /// integer read from memory (`Indices[bz, i]`, `offsets[bx] + 1`, a `T.alloc_var`) becomes a
    /// fresh index variable, bound to the value by a [`EntityKind::Bind`] statement where the
    /// current statement stands. Outside a kernel there is nothing to bind it in: `None`.
    pub(crate) fn runtime_index(&mut self, value: &Value<'_>, span: Span) -> Option<ExprId> {
        if let Some(index) = self.index_expr(value) {
            return Some(index);
        }
        if self.block.is_none() || !self.is_runtime_integer(value) {
            return None;
        }
        let (data, _) = self.data_expr(value, span).ok()?;
        Some(self.data_index(data, 0))
    }

    /// Integer arithmetic on run-time reads as index arithmetic over their bound variables, so
    /// that the simplifier sees `s + 64 - s` as 64; a read, and what index arithmetic cannot say
    /// (a select, a call, a truncating division), is bound as a whole.
    fn data_index(&mut self, data: DataId, depth: u32) -> ExprId {
        if depth < MAX_INDEX_DEPTH
            && let Some(index) = self.data_index_node(data, depth)
        {
            return index;
        }
        self.bind_scalar(data)
    }

    fn data_index_node(&mut self, data: DataId, depth: u32) -> Option<ExprId> {
        // Index arithmetic is on integers: a float operand (`T.Cast(T.int32, x * 4.0)`) keeps
        // its expression whole, truncated where the cast stands.
        if !self.integer_data(data, depth) {
            return None;
        }
        match self.world.data.get(data).clone() {
            DataExpr::Int { value, .. } => Some(self.world.exprs.int(value)),
            DataExpr::Index(index) => Some(index),
            DataExpr::Cast {
                dtype: DType::Int32 | DType::Int64,
                value,
            } => Some(self.data_index(value, depth + 1)),
            DataExpr::Binary { op, lhs, rhs } => {
                let combine: fn(&mut tilec_ir::ExprArena, ExprId, ExprId) -> ExprId = match op {
                    BinaryOp::Add => tilec_ir::ExprArena::add,
                    BinaryOp::Sub => tilec_ir::ExprArena::sub,
                    BinaryOp::Mul => tilec_ir::ExprArena::mul,
                    BinaryOp::FloorDiv => tilec_ir::ExprArena::floordiv,
                    BinaryOp::Mod => tilec_ir::ExprArena::floormod,
                    BinaryOp::Min => tilec_ir::ExprArena::min,
                    BinaryOp::Max => tilec_ir::ExprArena::max,
                    BinaryOp::Div
                    | BinaryOp::Pow
                    | BinaryOp::BitAnd
                    | BinaryOp::BitOr
                    | BinaryOp::BitXor
                    | BinaryOp::Shl
                    | BinaryOp::Shr
                    | BinaryOp::And
                    | BinaryOp::Or
                    | BinaryOp::TruncMod
                    | BinaryOp::CopySign => return None,
                };
                let a = self.data_index(lhs, depth + 1);
                let b = self.data_index(rhs, depth + 1);
                Some(combine(&mut self.world.exprs, a, b))
            }
            DataExpr::Float { .. }
            | DataExpr::Load { .. }
            | DataExpr::ReadVar(_)
            | DataExpr::Neg(_)
            | DataExpr::Not(_)
            | DataExpr::Compare { .. }
            | DataExpr::Call { .. }
            | DataExpr::Cast { .. }
            | DataExpr::Select { .. }
            | DataExpr::Reinterpret { .. }
            | DataExpr::Shuffle { .. }
            | DataExpr::WarpReduce { .. }
            | DataExpr::Random(_) => None,
        }
    }

    /// Whether `data` computes an integer from integers only (literals, indices, integer reads
    /// and integer arithmetic), so that index arithmetic may stand for it; unknown dtypes of
    /// reads count as integers, as [`Builder::is_runtime_integer`] counts them.
    fn integer_data(&self, data: DataId, depth: u32) -> bool {
        if depth >= MAX_INDEX_DEPTH {
            return false;
        }
        let integer = |dtype: Option<&DType>| dtype.is_none_or(|dtype| dtype.is_int());
        match self.world.data.get(data) {
            DataExpr::Int { .. } | DataExpr::Index(_) => true,
            DataExpr::Load { buffer, .. } | DataExpr::ReadVar(buffer) => {
                integer(self.world.dtypes.get(*buffer))
            }
            DataExpr::Cast { dtype, value } => {
                dtype.is_int() && self.integer_data(*value, depth + 1)
            }
            DataExpr::Binary { lhs, rhs, .. } => {
                self.integer_data(*lhs, depth + 1) && self.integer_data(*rhs, depth + 1)
            }
            // A value another lane holds or a random draw is data to bind whole.
            DataExpr::Float { .. }
            | DataExpr::Neg(_)
            | DataExpr::Not(_)
            | DataExpr::Compare { .. }
            | DataExpr::Call { .. }
            | DataExpr::Select { .. }
            | DataExpr::Reinterpret { .. }
            | DataExpr::Shuffle { .. }
            | DataExpr::WarpReduce { .. }
            | DataExpr::Random(_) => false,
        }
    }

    /// A fresh index variable bound to `data` by a [`EntityKind::Bind`] statement where the
    /// current statement stands, or the one an earlier read of the same element already has where
    /// that binding is in scope and nothing has written the buffer since.
    fn bind_scalar(&mut self, data: DataId) -> ExprId {
        let read = self.world.data.get(data).clone();
        let reusable = matches!(read, DataExpr::Load { .. } | DataExpr::ReadVar(_));
        if reusable
            && let Some(bound) = self
                .bound_scalars
                .iter()
                .rev()
                .find(|bound| bound.read == read && self.encloses_current(bound.block))
        {
            return bound.index;
        }
        let name = self.binding_name(data);
        let var = self.world.exprs.var(&name, None);
        let entity = self.add_entity(EntityKind::Bind);
        let accesses = crate::dsl::load_accesses(&self.world.data, data);
        self.world.accesses.set(entity, accesses);
        self.world
            .bindings
            .set(entity, tilec_ir::Binding { var, value: data });
        let index = self.world.exprs.var_expr(var);
        if reusable {
            self.bound_scalars.push(crate::builder::BoundScalar {
                read,
                index,
                block: self.block,
            });
        }
        index
    }

    /// Whether statements added now are inside `block`: it is the current block or one that
    /// contains it.
    pub(crate) fn encloses_current(&self, block: Option<crate::builder::Block>) -> bool {
        use crate::builder::Block;
        let mut current = self.block;
        loop {
            if current == block {
                return true;
            }
            let Some(Block::Body(owner) | Block::Else(owner)) = current else {
                return false;
            };
            current = self.world.parents.get(owner).map(|&parent| {
                let in_else = self
                    .world
                    .else_bodies
                    .get(parent)
                    .is_some_and(|body| body.contains(&owner));
                if in_else {
                    Block::Else(parent)
                } else {
                    Block::Body(parent)
                }
            });
        }
    }

    /// Drops the remembered run-time scalars whose buffer a statement with `accesses` writes: a
    /// read after it may see another value.
    pub(crate) fn forget_bindings_written(&mut self, accesses: &[tilec_ir::Access]) {
        let written: Vec<tilec_ir::EntityId> = accesses
            .iter()
            .filter(|access| access.kind != tilec_ir::AccessKind::Read)
            .map(|access| access.region.buffer)
            .collect();
        self.bound_scalars.retain(|bound| match &bound.read {
            DataExpr::Load { buffer, .. } | DataExpr::ReadVar(buffer) => !written.contains(buffer),
            _ => false,
        });
    }

    /// Whether `value` is an integer only known when the kernel runs: integer data, one element of
    /// an integer buffer, or an integer `T.alloc_var`.
    fn is_runtime_integer(&self, value: &Value<'_>) -> bool {
        let integer = |dtype: Option<DType>| dtype.is_none_or(DType::is_int);
        match value {
            Value::Data { dtype, .. } => integer(*dtype),
            Value::Region(region) => {
                region.dims.iter().all(|dim| dim.extent.is_none())
                    && integer(self.world.dtypes.get(region.buffer).copied())
            }
            Value::Buffer(buffer) => {
                self.world.kind(*buffer) == Some(EntityKind::Var)
                    && integer(self.world.dtypes.get(*buffer).copied())
            }
            _ => false,
        }
    }

    /// The name a bound run-time scalar prints as: the buffer or variable it is read from, so that
    /// `Indices[bz, i]` used as an index reads `Indices_i0` in the IR and the CUDA.
    fn binding_name(&self, data: DataId) -> String {
        let source = match self.world.data.get(data) {
            DataExpr::Load { buffer, .. } | DataExpr::ReadVar(buffer) => {
                self.world.name(*buffer).to_owned()
            }
            _ => "rt".to_owned(),
        };
        let count = self.world.bindings.iter().count();
        format!("{source}_i{count}")
    }

    /// The value as a data expression: literals, indices, element loads and data all convert.
    pub(crate) fn data_expr(
        &mut self,
        value: &Value<'_>,
        span: Span,
    ) -> Eval<(DataId, Option<DType>)> {
        let node = match value {
            Value::Data { id, dtype } => return Ok((*id, *dtype)),
            Value::Int(value) => DataExpr::Int {
                value: *value,
                dtype: None,
            },
            Value::Bool(value) => DataExpr::Int {
                value: i64::from(*value),
                dtype: Some(DType::Bool),
            },
            Value::Float(value) => DataExpr::Float {
                bits: value.to_bits(),
                dtype: None,
            },
            Value::Index(id) => DataExpr::Index(*id),
            Value::Region(region) => return self.load(region, span),
            Value::Buffer(buffer) if self.world.kind(*buffer) == Some(EntityKind::Var) => {
                let dtype = self.world.dtypes.get(*buffer).copied();
                let id = self.world.data.push(DataExpr::ReadVar(*buffer));
                return Ok((id, dtype));
            }
            Value::Poison => return Err(Stop),
            other => {
                let what = other.describe();
                return Err(self.error(
                    Code::MetaError,
                    span,
                    format!("expected a number or tensor value, found {what}"),
                ));
            }
        };
        let dtype = match node {
            DataExpr::Index(_) => Some(DType::Int32),
            _ => None,
        };
        Ok((self.world.data.push(node), dtype))
    }

    fn load(&mut self, region: &Region, span: Span) -> Eval<(DataId, Option<DType>)> {
        if region.dims.iter().any(|dim| dim.extent.is_some()) {
            return Err(self.error(
                Code::UnsupportedSyntax,
                span,
                "a slice of a buffer is not a value; index every dimension, or move tiles with `T.copy`",
            ));
        }
        let indices = region.dims.iter().map(|dim| dim.start).collect();
        let dtype = self.world.dtypes.get(region.buffer).copied();
        let id = self.world.data.push(DataExpr::Load {
            buffer: region.buffer,
            indices,
        });
        Ok((id, dtype))
    }

    /// A data expression of `node`. One whose tree is larger than [`MAX_DATA_TREE`] (operands
    /// shared by doubling, `v = v + v` in a loop) is refused with an `analysis-limit` warning at
    /// the statement that built it, as every later pass walks it as a tree; its value is poison.
    pub(crate) fn data<'a>(&mut self, node: DataExpr, dtype: Option<DType>) -> Value<'a> {
        let id = self.world.data.push(node);
        let size = self.world.data.tree_size(id);
        if size > MAX_DATA_TREE {
            let span = self.stmt_span;
            let _ = self.limit(
                span,
                format!(
                    "this expression has {} terms when written out; tilec analyses expressions \
                     of up to {} terms",
                    crate::builder::thousands(size),
                    crate::builder::thousands(MAX_DATA_TREE)
                ),
            );
            return Value::Poison;
        }
        Value::Data { id, dtype }
    }

    // ----- operators --------------------------------------------------------------------------

    /// `items * count`, as Python repeats a list or tuple (a negative count gives an empty one).
    fn repeat<'a>(
        &mut self,
        items: &[Value<'a>],
        count: i64,
        what: &str,
        span: Span,
    ) -> Eval<Vec<Value<'a>>> {
        let count = usize::try_from(count).unwrap_or(0);
        self.allocate(items.len() as u128 * count as u128, what, span)?;
        let mut out = Vec::with_capacity(items.len() * count);
        for _ in 0..count {
            out.extend(items.iter().cloned());
        }
        Ok(out)
    }

    pub(crate) fn binary<'a>(
        &mut self,
        op: Operator,
        lhs: Value<'a>,
        rhs: Value<'a>,
        span: Span,
    ) -> Eval<Value<'a>> {
        if matches!(lhs, Value::Poison) || matches!(rhs, Value::Poison) {
            return Err(Stop);
        }
        if let Some(result) = self.meta_binary(op, &lhs, &rhs, span)? {
            return Ok(result);
        }
        if let Some(result) = crate::torch::elementwise(op, &lhs, &rhs) {
            return Ok(result);
        }
        let symbolic = matches!(lhs, Value::Index(_)) || matches!(rhs, Value::Index(_));
        if symbolic && let (Some(a), Some(b)) = (self.index_expr(&lhs), self.index_expr(&rhs)) {
            let divides = matches!(op, Operator::FloorDiv | Operator::Div | Operator::Mod);
            if divides && self.world.exprs.as_int(b) == Some(0) {
                self.reject_assumptions();
                return Err(self.error(
                    Code::MetaError,
                    span,
                    "integer division or modulo by zero",
                ));
            }
            let arena = &mut self.world.exprs;
            let result = match op {
                Operator::Add => Some(arena.add(a, b)),
                Operator::Sub => Some(arena.sub(a, b)),
                Operator::Mult => Some(arena.mul(a, b)),
                Operator::FloorDiv | Operator::Div => Some(arena.floordiv(a, b)),
                Operator::Mod => Some(arena.floormod(a, b)),
                Operator::LShift
                | Operator::RShift
                | Operator::BitAnd
                | Operator::BitOr
                | Operator::BitXor => crate::bitwise::index_bitwise(arena, op, a, b),
                _ => None,
            };
            if let Some(result) = result {
                return Ok(Value::Index(result));
            }
        }
        let data_op = match op {
            Operator::Add => BinaryOp::Add,
            Operator::Sub => BinaryOp::Sub,
            Operator::Mult => BinaryOp::Mul,
            Operator::Div => BinaryOp::Div,
            Operator::FloorDiv => BinaryOp::FloorDiv,
            Operator::Mod => BinaryOp::Mod,
            Operator::Pow => BinaryOp::Pow,
            Operator::BitAnd => BinaryOp::BitAnd,
            Operator::BitOr => BinaryOp::BitOr,
            Operator::BitXor => BinaryOp::BitXor,
            Operator::LShift => BinaryOp::Shl,
            Operator::RShift => BinaryOp::Shr,
            Operator::MatMult => {
                // TileLang has no `@` on tiles: the kernel's error, not a limit of tilec's.
                return Err(self.misused(span, "`@` (use `T.gemm` for matrix products)"));
            }
        };
        let both_data = is_runtime(&lhs) || is_runtime(&rhs);
        if !both_data {
            return Err(self.error(
                Code::MetaError,
                span,
                format!(
                    "unsupported operand types for `{}`: {} and {}",
                    data_op.symbol(),
                    lhs.describe(),
                    rhs.describe()
                ),
            ));
        }
        let (a, a_dtype) = self.data_expr(&lhs, span)?;
        let (b, b_dtype) = self.data_expr(&rhs, span)?;
        let dtype = promote(a_dtype, b_dtype);
        if matches!(
            data_op,
            BinaryOp::BitAnd | BinaryOp::BitOr | BinaryOp::BitXor | BinaryOp::Shl | BinaryOp::Shr
        ) {
            self.integer_operands(&format!("`{}`", data_op.symbol()), dtype, span)?;
        }
        Ok(self.data(
            DataExpr::Binary {
                op: data_op,
                lhs: a,
                rhs: b,
            },
            dtype,
        ))
    }

    /// Python semantics for compile-time operands; `None` when an operand is symbolic.
    fn meta_binary<'a>(
        &mut self,
        op: Operator,
        lhs: &Value<'a>,
        rhs: &Value<'a>,
        span: Span,
    ) -> Eval<Option<Value<'a>>> {
        use Value::{Bool, Float, Int, List, Str, Tuple};
        let as_int = |value: &Value<'_>| match value {
            Int(v) => Some(*v),
            Bool(v) => Some(i64::from(*v)),
            _ => None,
        };
        if let (Some(a), Some(b)) = (as_int(lhs), as_int(rhs)) {
            return self.int_binary(op, a, b, span).map(Some);
        }
        let as_float = |value: &Value<'_>| match value {
            Float(v) => Some(*v),
            Int(v) => Some(*v as f64),
            Bool(v) => Some(f64::from(u8::from(*v))),
            _ => None,
        };
        if let (Some(a), Some(b)) = (as_float(lhs), as_float(rhs)) {
            return self.float_binary(op, a, b, span).map(Some);
        }
        let joined_len = |a: usize, b: usize| a as u128 + b as u128;
        Ok(match (op, lhs, rhs) {
            (Operator::Add, Str(a), Str(b)) => {
                self.allocate(joined_len(a.len(), b.len()), "string", span)?;
                Some(Value::str(&format!("{a}{b}")))
            }
            (Operator::Add, Tuple(a), Tuple(b)) => {
                self.allocate(joined_len(a.len(), b.len()), "tuple", span)?;
                Some(Value::tuple(a.iter().chain(b.iter()).cloned().collect()))
            }
            (Operator::Add, List(a), List(b)) => {
                self.allocate(joined_len(a.len(), b.len()), "list", span)?;
                Some(List(Rc::new(a.iter().chain(b.iter()).cloned().collect())))
            }
            (Operator::Mult, Tuple(items), Int(n)) | (Operator::Mult, Int(n), Tuple(items)) => {
                Some(Value::tuple(self.repeat(items, *n, "tuple", span)?))
            }
            (Operator::Mult, List(items), Int(n)) | (Operator::Mult, Int(n), List(items)) => {
                Some(List(Rc::new(self.repeat(items, *n, "list", span)?)))
            }
            (Operator::Mult, Str(text), Int(n)) | (Operator::Mult, Int(n), Str(text)) => {
                let count = usize::try_from(*n).unwrap_or(0);
                self.allocate(text.len() as u128 * count as u128, "string", span)?;
                Some(Value::str(&text.repeat(count)))
            }
            _ => None,
        })
    }

    fn int_binary<'a>(&mut self, op: Operator, a: i64, b: i64, span: Span) -> Eval<Value<'a>> {
        let result = match op {
            Operator::Add => a.checked_add(b),
            Operator::Sub => a.checked_sub(b),
            Operator::Mult => a.checked_mul(b),
            Operator::Div => {
                if b == 0 {
                    return Err(self.error(Code::MetaError, span, "division by zero"));
                }
                return Ok(Value::Float(a as f64 / b as f64));
            }
            Operator::FloorDiv | Operator::Mod if b == 0 => {
                // A zero made of assumed values (`block // 256` with `block` = 128) is theirs.
                self.reject_assumptions();
                return Err(self.error(
                    Code::MetaError,
                    span,
                    "integer division or modulo by zero",
                ));
            }
            Operator::FloorDiv => python_floordiv(a, b),
            Operator::Mod => python_mod(a, b),
            Operator::Pow => {
                if b < 0 {
                    return Ok(Value::Float((a as f64).powf(b as f64)));
                }
                u32::try_from(b).ok().and_then(|b| a.checked_pow(b))
            }
            Operator::LShift => u32::try_from(b)
                .ok()
                .and_then(|b| a.checked_shl(b))
                .filter(|r| r >> b == a),
            Operator::RShift => u32::try_from(b).ok().map(|b| a >> b.min(63)),
            Operator::BitAnd => Some(a & b),
            Operator::BitOr => Some(a | b),
            Operator::BitXor => Some(a ^ b),
            Operator::MatMult => None,
        };
        match result {
            Some(value) => Ok(Value::Int(value)),
            None => Err(self.error(
                Code::MetaError,
                span,
                "integer overflow or invalid operand at compile time",
            )),
        }
    }

    fn float_binary<'a>(&mut self, op: Operator, a: f64, b: f64, span: Span) -> Eval<Value<'a>> {
        let divides = matches!(op, Operator::Div | Operator::FloorDiv | Operator::Mod);
        if divides && b == 0.0 {
            return Err(self.error(Code::MetaError, span, "float division by zero"));
        }
        let result = match op {
            Operator::Add => a + b,
            Operator::Sub => a - b,
            Operator::Mult => a * b,
            Operator::Div => a / b,
            Operator::FloorDiv => (a / b).floor(),
            Operator::Mod => a - b * (a / b).floor(),
            Operator::Pow => a.powf(b),
            _ => {
                return Err(self.error(
                    Code::MetaError,
                    span,
                    "unsupported operand types for floats",
                ));
            }
        };
        Ok(Value::Float(result))
    }

    fn unary<'a>(&mut self, op: UnaryOp, operand: Value<'a>, span: Span) -> Eval<Value<'a>> {
        match (op, &operand) {
            (_, Value::Poison) => Err(Stop),
            (UnaryOp::Not, value) if value.truthy().is_some() => {
                Ok(Value::Bool(!value.truthy().unwrap_or(false)))
            }
            (UnaryOp::UAdd, _) => Ok(operand),
            (UnaryOp::USub, Value::Int(v)) => v
                .checked_neg()
                .map(Value::Int)
                .ok_or_else(|| self.error(Code::MetaError, span, "integer overflow")),
            (UnaryOp::USub, Value::Bool(v)) => Ok(Value::Int(-i64::from(*v))),
            (UnaryOp::USub, Value::Float(v)) => Ok(Value::Float(-v)),
            (UnaryOp::Invert, Value::Int(v)) => Ok(Value::Int(!v)),
            (UnaryOp::USub, Value::Index(id)) => Ok(Value::Index(self.world.exprs.neg(*id))),
            (UnaryOp::USub, _) => {
                let (id, dtype) = self.data_expr(&operand, span)?;
                if let DataExpr::Float { bits, dtype } = self.world.data.get(id).clone() {
                    let negated = -f64::from_bits(bits);
                    return Ok(self.data(
                        DataExpr::Float {
                            bits: negated.to_bits(),
                            dtype,
                        },
                        dtype,
                    ));
                }
                Ok(self.data(DataExpr::Neg(id), dtype))
            }
            (UnaryOp::Not, _) => {
                let (id, _) = self.data_expr(&operand, span)?;
                Ok(self.data(DataExpr::Not(id), Some(DType::Bool)))
            }
            (UnaryOp::Invert, _) => self.invert_data(operand, span),
        }
    }

    /// `~x` on a run-time value: on an integer, its bits flipped, which is `x ^ -1` once the `-1`
    /// takes `x`'s dtype (all ones at any width, signed or not); on a `bool`, `not x`, as TVM has it.
    pub(crate) fn invert_data<'a>(&mut self, operand: Value<'a>, span: Span) -> Eval<Value<'a>> {
        let (id, dtype) = self.data_expr(&operand, span)?;
        match dtype {
            Some(DType::Bool) => Ok(self.data(DataExpr::Not(id), Some(DType::Bool))),
            Some(dtype) if dtype.is_int() => {
                let all_ones = self.world.data.push(DataExpr::Int {
                    value: -1,
                    dtype: None,
                });
                Ok(self.data(
                    DataExpr::Binary {
                        op: BinaryOp::BitXor,
                        lhs: id,
                        rhs: all_ones,
                    },
                    Some(dtype),
                ))
            }
            _ => Err(self.unsupported(span, "`~` on a run-time value that is not an integer")),
        }
    }

    fn bool_op<'a>(
        &mut self,
        env: &Env<'a>,
        op: BoolOp,
        values: &'a [Expr],
        span: Span,
    ) -> Eval<Value<'a>> {
        let mut result: Option<Value<'a>> = None;
        for expr in values {
            let value = self.eval(env, expr)?;
            result = Some(match result {
                None => value,
                Some(previous) => {
                    // Python short-circuits on compile-time values; runtime values build IR.
                    match (op, previous.truthy()) {
                        (BoolOp::And, Some(false)) | (BoolOp::Or, Some(true)) => {
                            return Ok(previous);
                        }
                        (_, Some(_)) => value,
                        (BoolOp::And, None) => {
                            self.logical(BinaryOp::And, previous, value, span)?
                        }
                        (BoolOp::Or, None) => self.logical(BinaryOp::Or, previous, value, span)?,
                    }
                }
            });
            if let Some(decided) = result.as_ref().and_then(Value::truthy)
                && ((op == BoolOp::And && !decided) || (op == BoolOp::Or && decided))
            {
                return result.ok_or(Stop);
            }
        }
        result.ok_or(Stop)
    }

    pub(crate) fn logical<'a>(
        &mut self,
        op: BinaryOp,
        lhs: Value<'a>,
        rhs: Value<'a>,
        span: Span,
    ) -> Eval<Value<'a>> {
        match (lhs.truthy(), rhs.truthy()) {
            (Some(a), Some(b)) => Ok(Value::Bool(if op == BinaryOp::And {
                a && b
            } else {
                a || b
            })),
            _ => {
                let (a, _) = self.data_expr(&lhs, span)?;
                let (b, _) = self.data_expr(&rhs, span)?;
                Ok(self.data(DataExpr::Binary { op, lhs: a, rhs: b }, Some(DType::Bool)))
            }
        }
    }

    /// `==` or `!=` of compile-time values tilec has no comparison for. Python never fails on
    /// these: objects of different kinds are unequal (a dtype and a dtype name tilec does not
    /// know as a dtype, `in_config.dtype == T.float8_e8m0fnu`). A value tilec could not evaluate
    /// may be anything, and an ordering of unlike values fails in Python too: those stay errors
    /// (which lenient code passes over).
    fn undecided_equality<'a>(
        &mut self,
        op: CompareOp,
        lhs: &Value<'a>,
        rhs: &Value<'a>,
        span: Span,
    ) -> Eval<Value<'a>> {
        if matches!(lhs, Value::Poison) || matches!(rhs, Value::Poison) {
            return Err(Stop);
        }
        let unknown = |value: &Value<'_>| matches!(value, Value::Opaque(_));
        let equality = matches!(op, CompareOp::Eq | CompareOp::Ne);
        if equality && !unknown(lhs) && !unknown(rhs) && lhs.describe() != rhs.describe() {
            return Ok(Value::Bool(op == CompareOp::Ne));
        }
        Err(self.error(
            Code::MetaError,
            span,
            format!("cannot compare {} and {}", lhs.describe(), rhs.describe()),
        ))
    }

    fn compare<'a>(
        &mut self,
        op: CmpOp,
        lhs: &Value<'a>,
        rhs: &Value<'a>,
        span: Span,
    ) -> Eval<Value<'a>> {
        if let Some(result) = meta_compare(op, lhs, rhs) {
            return Ok(Value::Bool(result));
        }
        let data_op = match op {
            CmpOp::Lt => CompareOp::Lt,
            CmpOp::LtE => CompareOp::Le,
            CmpOp::Gt => CompareOp::Gt,
            CmpOp::GtE => CompareOp::Ge,
            CmpOp::Eq => CompareOp::Eq,
            CmpOp::NotEq => CompareOp::Ne,
            _ => {
                return Err(self.error(
                    Code::MetaError,
                    span,
                    format!(
                        "cannot compare {} and {} with `{}` at compile time",
                        lhs.describe(),
                        rhs.describe(),
                        op.as_str()
                    ),
                ));
            }
        };
        if !is_runtime(lhs) && !is_runtime(rhs) {
            return self.undecided_equality(data_op, lhs, rhs, span);
        }
        let (a, _) = self.data_expr(lhs, span)?;
        let (b, _) = self.data_expr(rhs, span)?;
        Ok(self.data(
            DataExpr::Compare {
                op: data_op,
                lhs: a,
                rhs: b,
            },
            Some(DType::Bool),
        ))
    }

    /// `c ? a : b` where `c` is only known at run time.
    pub(crate) fn select<'a>(
        &mut self,
        cond: Value<'a>,
        then: Value<'a>,
        otherwise: Value<'a>,
        span: Span,
    ) -> Eval<Value<'a>> {
        if let Some(decided) = cond.truthy() {
            return Ok(if decided { then } else { otherwise });
        }
        let (c, _) = self.data_expr(&cond, span)?;
        let (a, a_dtype) = self.data_expr(&then, span)?;
        let (b, b_dtype) = self.data_expr(&otherwise, span)?;
        Ok(self.data(
            DataExpr::Select {
                cond: c,
                then: a,
                otherwise: b,
            },
            promote(a_dtype, b_dtype),
        ))
    }
}

/// Python's `a // b`: the quotient rounded towards negative infinity.
pub(crate) fn python_floordiv(a: i64, b: i64) -> Option<i64> {
    let quotient = a.checked_div(b)?;
    let remainder = a.checked_rem(b)?;
    if remainder != 0 && ((remainder < 0) != (b < 0)) {
        quotient.checked_sub(1)
    } else {
        Some(quotient)
    }
}

/// Python's `a % b`: the remainder with the sign of the divisor.
pub(crate) fn python_mod(a: i64, b: i64) -> Option<i64> {
    let remainder = a.checked_rem(b)?;
    if remainder != 0 && ((remainder < 0) != (b < 0)) {
        remainder.checked_add(b)
    } else {
        Some(remainder)
    }
}

/// True for values only known when the kernel runs (or symbolic at compile time).
pub(crate) fn is_runtime(value: &Value<'_>) -> bool {
    matches!(
        value,
        Value::Index(_) | Value::Data { .. } | Value::Region(_) | Value::Buffer(_)
    )
}

/// The wider of two dtypes, for the result of an arithmetic operation.
pub(crate) fn promote(a: Option<DType>, b: Option<DType>) -> Option<DType> {
    match (a, b) {
        (Some(a), Some(b)) if a == b => Some(a),
        (Some(a), Some(b)) => Some(if (a.is_float(), a.bytes()) >= (b.is_float(), b.bytes()) {
            a
        } else {
            b
        }),
        (Some(a), None) | (None, Some(a)) => Some(a),
        (None, None) => None,
    }
}

/// Python comparison of compile-time values; `None` when either side is symbolic.
fn meta_compare(op: CmpOp, lhs: &Value<'_>, rhs: &Value<'_>) -> Option<bool> {
    use Value::{Bool, Float, Int};
    let number = |value: &Value<'_>| match value {
        Int(v) => Some(*v as f64),
        Bool(v) => Some(f64::from(u8::from(*v))),
        Float(v) => Some(*v),
        _ => None,
    };
    if let (Some(a), Some(b)) = (number(lhs), number(rhs)) {
        if let (Int(a), Int(b)) = (lhs, rhs) {
            return Some(match op {
                CmpOp::Eq | CmpOp::Is => a == b,
                CmpOp::NotEq | CmpOp::IsNot => a != b,
                CmpOp::Lt => a < b,
                CmpOp::LtE => a <= b,
                CmpOp::Gt => a > b,
                CmpOp::GtE => a >= b,
                CmpOp::In | CmpOp::NotIn => return None,
            });
        }
        return Some(match op {
            CmpOp::Eq | CmpOp::Is => a == b,
            CmpOp::NotEq | CmpOp::IsNot => a != b,
            CmpOp::Lt => a < b,
            CmpOp::LtE => a <= b,
            CmpOp::Gt => a > b,
            CmpOp::GtE => a >= b,
            CmpOp::In | CmpOp::NotIn => return None,
        });
    }
    match op {
        CmpOp::In | CmpOp::NotIn => {
            lhs.to_const()?;
            let found = match rhs {
                Value::Tuple(items) | Value::List(items) => items
                    .iter()
                    .any(|item| values_equal(lhs, item) == Some(true)),
                Value::Dict(entries) => entries
                    .iter()
                    .any(|(key, _)| values_equal(lhs, key) == Some(true)),
                Value::Str(text) => match lhs {
                    Value::Str(part) => text.contains(&**part),
                    _ => return None,
                },
                _ => return None,
            };
            Some(if op == CmpOp::In { found } else { !found })
        }
        CmpOp::Eq | CmpOp::NotEq | CmpOp::Is | CmpOp::IsNot => {
            let equal = values_equal(lhs, rhs)?;
            Some(if matches!(op, CmpOp::Eq | CmpOp::Is) {
                equal
            } else {
                !equal
            })
        }
        _ => match (lhs, rhs) {
            (Value::Str(a), Value::Str(b)) => Some(match op {
                CmpOp::Lt => a < b,
                CmpOp::LtE => a <= b,
                CmpOp::Gt => a > b,
                _ => a >= b,
            }),
            _ => None,
        },
    }
}

/// Python `==` of compile-time values; TileLang's dtypes are `str` subclasses, so a dtype equals
/// its name (`"float16" in [T.float16, T.bfloat16]` is true). `None` when either is symbolic.
pub(crate) fn values_equal(lhs: &Value<'_>, rhs: &Value<'_>) -> Option<bool> {
    Some(match (lhs, rhs) {
        (Value::DType(a), Value::DType(b)) => a == b,
        (Value::DType(a), Value::Str(b)) | (Value::Str(b), Value::DType(a)) => {
            DType::from_name(b) == Some(*a)
        }
        (Value::Policy(a), Value::Policy(b)) => a == b,
        _ => lhs.to_const()? == rhs.to_const()?,
    })
}

pub(crate) fn expr_span(expr: &Expr) -> Span {
    range_span(expr)
}
