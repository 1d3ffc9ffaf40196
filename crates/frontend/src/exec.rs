//! Execution of Python statements: compile-time control flow, and the kernel statements (loops,
//! launches, stores, runtime `if`) that become entities of the world.

use std::rc::Rc;

use ruff_python_ast::{Expr, Operator, Stmt, StmtFor, StmtIf, StmtWith};
use tilec_ir::{
    Access, AccessKind, Code, DType, EntityId, EntityKind, Launch, LoopInfo, LoopKind, Region,
    RegionDim, Scope, Store,
};

use crate::builder::{Block, Builder, Eval, Stop};
use crate::dsl::load_accesses;
use crate::eval::expr_span;
use crate::outline::{dotted_name, range_span};
use crate::value::{Env, FunctionBody, Module, PersistentTiles, Value, bind, lookup, rebind};
use tilec_ir::Span;

/// How a statement ended.
#[derive(Debug)]
pub(crate) enum Flow<'a> {
    Normal,
    Return(Value<'a>),
    Break,
    Continue,
}

impl Builder<'_> {
    /// Runs statements in order. A failing statement was reported; its targets are poisoned so that
    /// later uses fail silently, and execution goes on with the next statement.
    pub(crate) fn exec_body<'a>(&mut self, env: &Env<'a>, body: &'a [Stmt]) -> Eval<Flow<'a>> {
        for stmt in body {
            let saved_span = self.stmt_span;
            self.stmt_span = range_span(stmt);
            self.step(self.stmt_span)?;
            self.stmt_stack.push(self.stmt_span);
            let result = self.exec_stmt(env, stmt);
            self.stmt_stack.pop();
            self.stmt_span = saved_span;
            match result {
                Ok(Flow::Normal) => {}
                Ok(flow) => return Ok(flow),
                // Inside a called helper of kernel code a failure ends the call, as an exception
                // would in Python; in lenient code only a `raise` or a failed `assert` does.
                Err(Stop) if self.abort_on_error && (self.strict || raises(stmt)) => {
                    return Err(Stop);
                }
                // In kernel code the failure was reported, so later uses stay silent (Poison).
                Err(Stop) if self.strict => bind_targets(env, stmt, &Value::Poison),
                // Lenient code (module context, driver code) goes on: what tilec could not
                // evaluate makes only the statement's own targets unknown (Opaque, which says why
                // when used). A `return` that cannot be evaluated still returns, unknown.
                Err(Stop) => {
                    if let Stmt::Return(_) = stmt {
                        return Ok(Flow::Return(Value::Opaque(Rc::from(
                            "returned from an expression tilec could not evaluate at compile time",
                        ))));
                    }
                    if skips_code(stmt) {
                        self.path_lost = true;
                    }
                    bind_targets(
                        env,
                        stmt,
                        &Value::Opaque(Rc::from(
                            "assigned from an expression tilec could not evaluate at compile time",
                        )),
                    );
                }
            }
        }
        Ok(Flow::Normal)
    }

    fn exec_stmt<'a>(&mut self, env: &Env<'a>, stmt: &'a Stmt) -> Eval<Flow<'a>> {
        let span = range_span(stmt);
        match stmt {
            Stmt::Expr(expr) => {
                if let Some(flow) = self.list_mutation(env, &expr.value)? {
                    return Ok(flow);
                }
                self.eval(env, &expr.value)?;
            }
            Stmt::Assign(assign) => {
                let value = self.eval(env, &assign.value)?;
                for target in &assign.targets {
                    self.assign(env, target, value.clone())?;
                }
            }
            Stmt::AugAssign(aug) => self.aug_assign(env, &aug.target, aug.op, &aug.value, span)?,
            Stmt::AnnAssign(ann) => match &ann.value {
                Some(value) => {
                    let value = self.eval(env, value)?;
                    self.assign(env, &ann.target, value)?;
                }
                None => self.declare_tensor(env, &ann.target, &ann.annotation)?,
            },
            Stmt::For(for_stmt) => {
                self.snapshot_before_nested_stores(env, stmt, span)?;
                return self.exec_for(env, for_stmt);
            }
            Stmt::While(while_stmt) => {
                self.snapshot_before_nested_stores(env, stmt, span)?;
                let mut first = true;
                loop {
                    // Each iteration is work of its own: a body the parser recovered as empty
                    // (`batch, while, dim = q.shape`) runs no statement that would count it.
                    self.step(span)?;
                    let bindings = self.world.bindings.iter().count();
                    let test = self.eval(env, &while_stmt.test)?;
                    match test.truthy() {
                        Some(true) => match self.exec_body(env, &while_stmt.body)? {
                            Flow::Break => break,
                            Flow::Return(value) => return Ok(Flow::Return(value)),
                            Flow::Normal | Flow::Continue => {}
                        },
                        Some(false) => break,
                        None if first
                            && self.block.is_some()
                            && self.world.bindings.iter().count() == bindings =>
                        {
                            return self.runtime_while(env, while_stmt, test);
                        }
                        None => {
                            return Err(self.unsupported(
                                span,
                                "a `while` loop over a runtime condition that is not a kernel \
                                 statement of its own (it follows compile-time iterations, or \
                                 indexes memory with a run-time value)",
                            ));
                        }
                    }
                    first = false;
                }
            }
            Stmt::If(if_stmt) => {
                self.snapshot_before_nested_stores(env, stmt, span)?;
                return self.exec_if(env, if_stmt);
            }
            Stmt::With(with) => {
                self.snapshot_before_nested_stores(env, stmt, span)?;
                return self.exec_with(env, with);
            }
            Stmt::Return(ret) => {
                let value = match &ret.value {
                    Some(value) => self.eval(env, value)?,
                    None => Value::None,
                };
                self.last_return.clone_from(&self.stmt_stack);
                return Ok(Flow::Return(value));
            }
            Stmt::FunctionDef(def) => {
                let mut prim_func = false;
                for decorator in &def.decorator_list {
                    let name = dotted_name(&decorator.expression).unwrap_or_default();
                    prim_func |= name.ends_with("prim_func");
                }
                let mut function = self.define_function(env, FunctionBody::Def(def), prim_func)?;
                function.autotune_config = self.autotune_first_config(env, def).unwrap_or_default();
                bind(env, def.name.as_str(), Value::Function(Rc::new(function)));
            }
            Stmt::Assert(assert) => {
                // In lenient code an assertion tilec cannot evaluate is not known to fail: the
                // code after it runs where it holds.
                let test = match self.eval(env, &assert.test) {
                    Ok(test) => test,
                    Err(Stop) if !self.strict => {
                        self.narrow_by_assert(env, &assert.test);
                        return Ok(Flow::Normal);
                    }
                    Err(stop) => return Err(stop),
                };
                match test.truthy() {
                    Some(true) => {}
                    Some(false) => {
                        let message = match &assert.msg {
                            Some(msg) => self.eval(env, msg).map(|value| value.python_str()).ok(),
                            None => None,
                        };
                        let text = match message {
                            Some(message) => format!("assertion failed: {message}"),
                            None => "assertion failed".to_owned(),
                        };
                        self.reject_assumptions();
                        return Err(self.error(Code::AssertionFailed, span, text));
                    }
                    // Driver code asserts on tensors (`assert torch.allclose(...)`): nothing to
                    // learn there at compile time, unless it pins an unknown name to a value.
                    None if !self.strict => self.narrow_by_assert(env, &assert.test),
                    // A condition on the symbols of a generic instance (`hidden % 512 == 0` with
                    // `hidden` symbolic) is a precondition its callers meet, as TileLang only
                    // ever runs it with their values: the analysis assumes it, and says so.
                    None if self.over_generic_symbols(&test) => {
                        self.generic_preconditions += 1;
                    }
                    None => {
                        return Err(self.unsupported(
                            span,
                            "`assert` on a value only known when the kernel runs",
                        ));
                    }
                }
            }
            Stmt::Import(import) => {
                for alias in &import.names {
                    let module = alias.name.as_str();
                    let (name, written) = match &alias.asname {
                        Some(asname) => (asname.as_str(), module),
                        None => (module.split('.').next().unwrap_or(module), module),
                    };
                    let bound = if alias.asname.is_some() {
                        written
                    } else {
                        name
                    };
                    let value = match self.import_workspace_module(env, bound) {
                        Some(value) => value,
                        None => import_value(bound),
                    };
                    bind(env, name, value);
                }
            }
            Stmt::ImportFrom(import) => {
                let module = crate::modules::written_module(import);
                for alias in &import.names {
                    if alias.name.as_str() == "*" {
                        for (name, value) in self.import_star(env, &module).unwrap_or_default() {
                            bind(env, &name, value);
                        }
                        continue;
                    }
                    let name = alias.asname.as_ref().unwrap_or(&alias.name).as_str();
                    let value = match self.import_from_workspace(env, &module, alias.name.as_str())
                    {
                        Some(value) => value,
                        None => import_from_value(&module, alias.name.as_str()),
                    };
                    bind(env, name, value);
                }
            }
            // The body runs as if nothing raised; handlers are code for when something did.
            Stmt::Try(try_stmt) => {
                for body in [&try_stmt.body, &try_stmt.orelse, &try_stmt.finalbody] {
                    match self.exec_body(env, body)? {
                        Flow::Normal => {}
                        flow => return Ok(flow),
                    }
                }
            }
            Stmt::Pass(_) | Stmt::Global(_) | Stmt::Nonlocal(_) => {}
            Stmt::Break(_) => return Ok(Flow::Break),
            Stmt::Continue(_) => return Ok(Flow::Continue),
            Stmt::Raise(_) => {
                // As a failed `assert`: the branch that raises may be taken only for the values
                // tilec assumed (`if n_i % 2: raise ...` with `n_i` a representative).
                self.reject_assumptions();
                return Err(self.error(
                    Code::MetaError,
                    span,
                    "this `raise` runs at compile time for these arguments",
                ));
            }
            Stmt::ClassDef(class) => self.exec_class(env, class)?,
            _ => return Err(self.unsupported(span, "this statement")),
        }
        Ok(Flow::Normal)
    }

    /// `configs.append(item)` and `configs.extend(items)` on a list bound to a name: lists are
    /// values here, so the name is rebound to the longer list where it is defined. `None` when the
    /// statement is not such a call.
    fn list_mutation<'a>(&mut self, env: &Env<'a>, expr: &'a Expr) -> Eval<Option<Flow<'a>>> {
        let Expr::Call(call) = expr else {
            return Ok(None);
        };
        let Expr::Attribute(attribute) = &*call.func else {
            return Ok(None);
        };
        let (Expr::Name(name), method) = (&*attribute.value, attribute.attr.as_str()) else {
            return Ok(None);
        };
        if !matches!(method, "append" | "extend") {
            return Ok(None);
        }
        let Some(Value::List(items)) = lookup(env, name.id.as_str()) else {
            return Ok(None);
        };
        let args = self.eval_args(env, call)?;
        let added = match (method, args.positional.into_iter().next()) {
            ("append", Some((item, _))) => vec![item],
            ("extend", Some((more, span))) => self.iterate(more, span)?,
            _ => return Err(self.unsupported(range_span(call), "this list method call")),
        };
        let span = range_span(call);
        // The statement counted as a step, and `iterate` counted what `extend` adds.
        self.within_sequence_limit(items.len() as u128 + added.len() as u128, "list", span)?;
        // The name is unbound while the list grows, so that it is the only owner and grows in
        // place: a loop of `append`s must not copy the list at every step.
        rebind(env, name.id.as_str(), Value::None);
        let mut items = Rc::unwrap_or_clone(items);
        items.extend(added);
        rebind(env, name.id.as_str(), Value::List(Rc::new(items)));
        Ok(Some(Flow::Normal))
    }

    /// Binds `value` to an assignment target: a name, a tuple of targets, or a buffer element.
    pub(crate) fn assign<'a>(
        &mut self,
        env: &Env<'a>,
        target: &'a Expr,
        value: Value<'a>,
    ) -> Eval<()> {
        let span = expr_span(target);
        match target {
            Expr::Name(name) => {
                let name = name.id.as_str();
                // `tx = T.thread_binding(...)` enters the binding's frame for the rest of the
                // scope: the name is the bound index.
                let value = match value {
                    Value::ThreadBinding(index) => Value::Index(index),
                    other => other,
                };
                if let Some(Value::Buffer(var)) = lookup(env, name)
                    && self.world.kind(var) == Some(EntityKind::Var)
                    && !matches!(value, Value::Buffer(_))
                {
                    return self.store(
                        Region {
                            buffer: var,
                            dims: Vec::new(),
                        },
                        value,
                        span,
                    );
                }
                if let Value::Buffer(buffer) = value
                    && self.world.names.get(buffer).is_none()
                {
                    self.world.names.set(buffer, name.to_owned());
                }
                if self.block.is_some() {
                    self.read_names.insert(name.to_owned(), self.block);
                }
                bind(env, name, value);
                Ok(())
            }
            Expr::Tuple(tuple) => self.unpack(env, &tuple.elts, value, span),
            Expr::List(list) => self.unpack(env, &list.elts, value, span),
            Expr::Attribute(attribute) => match self.eval(env, &attribute.value)? {
                Value::Object(object) => {
                    object
                        .attrs
                        .borrow_mut()
                        .insert(attribute.attr.to_string(), value);
                    Ok(())
                }
                Value::Class(class) => {
                    bind(&class.namespace, attribute.attr.as_str(), value);
                    Ok(())
                }
                _ => Err(self.unsupported(span, "setting an attribute of this value")),
            },
            Expr::Subscript(subscript) => {
                let base = self.eval(env, &subscript.value)?;
                match self.subscript(env, base, &subscript.slice, span)? {
                    Value::Region(region) => {
                        self.snapshot_names_reading(env, region.buffer, span)?;
                        self.store(region, value, span)
                    }
                    _ => Err(self.unsupported(span, "assigning to an item of a Python container")),
                }
            }
            _ => Err(self.unsupported(span, "this assignment target")),
        }
    }

    /// Before a store to `buffer`: every name whose value still reads `buffer` (`v = s[i]`, or an
    /// expression of such loads) takes the value it has now, in a register of its own. A name
    /// bound to an element is otherwise read where it is used, and `v = s[i]; s[i] = s[j];
    /// s[j] = v` — a swap, as a bitonic sort writes it — would store the new `s[i]`. Python (and
    /// TileLang, whose assignment is a `LetStmt`) took the value at the assignment.
    fn snapshot_names_reading<'a>(
        &mut self,
        env: &Env<'a>,
        buffer: EntityId,
        span: Span,
    ) -> Eval<()> {
        let mut frame = Some(env.clone());
        while let Some(current) = frame {
            let reading: Vec<(String, Value<'a>)> = current
                .borrow()
                .vars
                .iter()
                .filter(|(name, value)| {
                    self.reads_buffer(value, buffer)
                        && self
                            .read_names
                            .get(name.as_str())
                            .is_some_and(|&block| self.encloses_current(block))
                })
                .map(|(name, value)| (name.clone(), value.clone()))
                .collect();
            for (name, value) in reading {
                let dtype = match &value {
                    Value::Data {
                        dtype: Some(dtype), ..
                    } => *dtype,
                    _ => self
                        .world
                        .dtypes
                        .get(buffer)
                        .copied()
                        .unwrap_or(DType::Float32),
                };
                let var =
                    self.add_kernel_entity(EntityKind::Var, "a value taken before a store", span)?;
                self.world.shapes.set(var, Vec::new());
                self.world.dtypes.set(var, dtype);
                self.world.scopes.set(var, Scope::LocalVar);
                self.world.names.set(var, name.clone());
                let target = Region {
                    buffer: var,
                    dims: Vec::new(),
                };
                self.store(target, value, span)?;
                bind(&current, &name, Value::Buffer(var));
            }
            frame = current.borrow().parent.clone();
        }
        Ok(())
    }

    /// Before a kernel statement with a body (a run-time `if`, a loop, a `with`): the names that
    /// read a buffer the body stores to (`buf[...] = ...`) take their values here, as
    /// [`Self::snapshot_names_reading`] does at a store. Taken at the store itself, inside one
    /// branch, the value would be missing on the other path: `mid = (lo[0] + hi[0]) >> 1`, then
    /// `if ...: lo[0] = mid + 1` `else: hi[0] = mid` (a binary search) must read the same `mid`
    /// in both branches.
    fn snapshot_before_nested_stores<'a>(
        &mut self,
        env: &Env<'a>,
        stmt: &'a Stmt,
        span: Span,
    ) -> Eval<()> {
        if self.block.is_none() || self.read_names.is_empty() {
            return Ok(());
        }
        let mut buffers = Vec::new();
        for name in nested_store_bases(stmt) {
            let buffer = match lookup(env, name) {
                Some(Value::Buffer(buffer)) => buffer,
                Some(Value::Region(region)) => region.buffer,
                _ => continue,
            };
            if !buffers.contains(&buffer) {
                buffers.push(buffer);
            }
        }
        for buffer in buffers {
            self.snapshot_names_reading(env, buffer, span)?;
        }
        Ok(())
    }

    /// Whether `value` is an element of `buffer` or an expression that loads from it.
    fn reads_buffer(&self, value: &Value<'_>, buffer: EntityId) -> bool {
        match value {
            Value::Region(region) => {
                region.buffer == buffer && region.dims.iter().all(|dim| dim.extent.is_none())
            }
            Value::Data { id, .. } => {
                let mut loads = Vec::new();
                self.world.data.loads(*id, &mut loads);
                loads.iter().any(|(loaded, _)| *loaded == buffer)
            }
            _ => false,
        }
    }

    fn unpack<'a>(
        &mut self,
        env: &Env<'a>,
        targets: &'a [Expr],
        value: Value<'a>,
        span: Span,
    ) -> Eval<()> {
        let items = self.iterate(value, span)?;
        if items.len() != targets.len() {
            return Err(self.error(
                Code::MetaError,
                span,
                format!(
                    "cannot unpack {} values into {} targets",
                    items.len(),
                    targets.len()
                ),
            ));
        }
        for (target, item) in targets.iter().zip(items) {
            self.assign(env, target, item)?;
        }
        Ok(())
    }

    fn aug_assign<'a>(
        &mut self,
        env: &Env<'a>,
        target: &'a Expr,
        op: Operator,
        value: &'a Expr,
        span: Span,
    ) -> Eval<()> {
        let current = self.eval(env, target)?;
        let rhs = self.eval(env, value)?;
        let updated = self.binary(op, current, rhs, span)?;
        self.assign(env, target, updated)
    }

    /// A store of one value to one buffer element (or to a `T.alloc_var` scalar).
    pub(crate) fn store(&mut self, target: Region, value: Value<'_>, span: Span) -> Eval<()> {
        if target.dims.iter().any(|dim| dim.extent.is_some()) {
            return Err(self.error(
                Code::NotAnalysed,
                span,
                "assigning to a slice is not supported: store element by element in `T.Parallel`, or use `T.copy` / `T.fill`",
            ));
        }
        let (value, _) = self.data_expr(&value, span)?;
        let entity = self.add_kernel_entity(EntityKind::Store, "a store to a buffer", span)?;
        let one = self.world.exprs.int(1);
        let write = Region {
            buffer: target.buffer,
            dims: target
                .dims
                .iter()
                .map(|dim| RegionDim {
                    start: dim.start,
                    extent: Some(one),
                })
                .collect(),
        };
        let mut accesses = load_accesses(&self.world.data, value);
        accesses.push(Access {
            kind: AccessKind::Write,
            region: write,
        });
        self.forget_bindings_written(&accesses);
        self.world.accesses.set(entity, accesses);
        let indices = target.dims.iter().map(|dim| dim.start).collect();
        self.world.stores.set(
            entity,
            Store {
                buffer: target.buffer,
                indices,
                value,
            },
        );
        Ok(())
    }

    /// Eager style: `A: T.Tensor((M, K), dtype)` declares the tensor parameter `A`.
    fn declare_tensor<'a>(
        &mut self,
        env: &Env<'a>,
        target: &'a Expr,
        annotation: &'a Expr,
    ) -> Eval<()> {
        let span = expr_span(target);
        let Expr::Name(name) = target else {
            return Err(self.unsupported(span, "this annotated statement"));
        };
        self.declare_tensor_named(env, name.id.as_str(), span, annotation)
    }

    /// Declares the eager kernel's tensor parameter `name` with its `T.Tensor` annotation (from
    /// the body, or from the signature: `def k(A: T.Tensor((64,), T.float16))`).
    pub(crate) fn declare_tensor_named<'a>(
        &mut self,
        env: &Env<'a>,
        name: &str,
        span: Span,
        annotation: &'a Expr,
    ) -> Eval<()> {
        let annotation = self.eval(env, annotation)?;
        let Value::TensorType {
            shape,
            dtype,
            strides,
        } = annotation
        else {
            return Ok(());
        };
        match lookup(env, name) {
            Some(Value::PendingTensor) => {}
            Some(_) => {
                return Err(self.error(
                    Code::InvalidCall,
                    span,
                    format!(
                        "`{name}` is declared as a tensor but is not a tensor parameter of the kernel"
                    ),
                ));
            }
            None => return Err(self.undefined_name(name, span)),
        }
        let shape = self.tensor_shape(&shape, span)?;
        let strides = match strides {
            Some(strides) => self.tensor_strides(&strides, &shape, span)?,
            None => None,
        };
        let param = self.add_param(shape, dtype);
        if let Some(strides) = strides {
            self.world.strides.set(param, strides);
        }
        self.world.names.set(param, name.to_owned());
        bind(env, name, Value::Buffer(param));
        Ok(())
    }

    pub(crate) fn tensor_shape(
        &mut self,
        shape: &[Value<'_>],
        span: Span,
    ) -> Eval<Vec<tilec_ir::ExprId>> {
        let mut extents = Vec::with_capacity(shape.len());
        for extent in shape {
            match self.index_expr(extent) {
                Some(id) => extents.push(id),
                None => {
                    let what = extent.describe();
                    return Err(self.error(
                        Code::ShapeMismatch,
                        span,
                        format!("a tensor's extents must be integers, found {what}"),
                    ));
                }
            }
        }
        Ok(extents)
    }

    /// The strides of a `T.StridedTensor`, one per dimension, as index expressions; `None` when
    /// they are the row-major strides of `shape` (the tensor is contiguous after all).
    pub(crate) fn tensor_strides(
        &mut self,
        strides: &[Value<'_>],
        shape: &[tilec_ir::ExprId],
        span: Span,
    ) -> Eval<Option<Vec<tilec_ir::ExprId>>> {
        if strides.len() != shape.len() {
            return Err(self.error(
                Code::ShapeMismatch,
                span,
                format!(
                    "a strided tensor needs one stride per dimension: {} for a shape of {}",
                    strides.len(),
                    shape.len()
                ),
            ));
        }
        let strides = self.tensor_shape(strides, span)?;
        let mut row_major = self.world.exprs.int(1);
        let mut contiguous = true;
        for (stride, extent) in strides.iter().zip(shape).rev() {
            contiguous &= *stride == row_major;
            row_major = self.world.exprs.mul(row_major, *extent);
        }
        Ok((!contiguous).then_some(strides))
    }

    fn exec_for<'a>(&mut self, env: &Env<'a>, for_stmt: &'a StmtFor) -> Eval<Flow<'a>> {
        let span = range_span(for_stmt);
        let iterable = self.eval(env, &for_stmt.iter)?;
        let (kind, extents, start, step) = match iterable {
            Value::LoopFrame {
                kind: LoopKind::Serial,
                extents,
                start: None,
                step: None,
            } if extents.len() > 1 => {
                return self.serial_nest(env, for_stmt, &extents);
            }
            Value::LoopFrame {
                kind,
                extents,
                start,
                step,
            } => (kind, extents, start, step),
            Value::Range { start, stop, step } if self.block.is_some() && step == 1 => {
                // Inside a kernel, `range` is `T.serial`, as in TileLang.
                let count = self.world.exprs.int((stop - start).max(0));
                let offset = (start != 0).then(|| self.world.exprs.int(start));
                (LoopKind::Serial, vec![count], offset, None)
            }
            Value::PersistentFrame(tiles) => return self.persistent_loop(env, for_stmt, &tiles),
            Value::ThreadBinding(index) => {
                // The launch already runs one thread (or block) per value of the binding: the
                // body runs once, with the bound index.
                self.assign(env, &for_stmt.target, Value::Index(index))?;
                return self.exec_body(env, &for_stmt.body);
            }
            Value::Poison => return Err(Stop),
            other => return self.unroll(env, for_stmt, other, span),
        };
        let names = self.loop_names(for_stmt, extents.len(), "loop ")?;
        let entity = self.add_kernel_entity(EntityKind::Loop, "a TileLang loop", span)?;
        let mut vars = Vec::new();
        for (name, &extent) in names.iter().zip(&extents) {
            let bound = self.world.exprs.as_int(extent);
            let var = self.world.exprs.var(name, bound);
            vars.push(var);
            let mut value = self.world.exprs.var_expr(var);
            if let Some(step) = step {
                value = self.world.exprs.mul(value, step);
            }
            if let Some(start) = start {
                value = self.world.exprs.add(value, start);
            }
            bind(env, name, Value::Index(value));
        }
        let (mut names, mut extents) = (names, extents);
        let mut body: &'a [Stmt] = &for_stmt.body;
        // Directly nested parallel loops are one nest, as TileLang merges them:
        // `for i in T.parallel(m): for j in T.parallel(n):` is `for i, j in T.Parallel(m, n)`.
        while kind == LoopKind::Parallel
            && start.is_none()
            && let [Stmt::For(inner)] = body
            && inner.orelse.is_empty()
            && !inner.is_async
        {
            let Value::LoopFrame {
                kind: LoopKind::Parallel,
                extents: inner_extents,
                start: None,
                step: None,
            } = self.eval(env, &inner.iter)?
            else {
                break;
            };
            let inner_names = loop_targets(&inner.target);
            let independent = inner_extents.iter().all(|&e| {
                self.world
                    .exprs
                    .vars_of(e)
                    .iter()
                    .all(|v| !vars.contains(v))
            });
            if inner_names.len() != inner_extents.len() || !independent {
                break;
            }
            for (name, &extent) in inner_names.iter().zip(&inner_extents) {
                let var = self.world.exprs.var(name, self.world.exprs.as_int(extent));
                vars.push(var);
                let value = self.world.exprs.var_expr(var);
                bind(env, name, Value::Index(value));
            }
            names.extend(inner_names);
            extents.extend(inner_extents);
            body = &inner.body;
        }
        self.world.names.set(entity, names.join(", "));
        if kind == LoopKind::Parallel {
            self.reject_oversized_loop(&extents);
        }
        self.world.loops.set(
            entity,
            LoopInfo {
                kind,
                vars,
                extents,
            },
        );
        self.in_block(Block::Body(entity), |builder| builder.exec_body(env, body))?;
        Ok(Flow::Normal)
    }

    /// `for i, j in T.grid(m, n):` — a serial loop per extent, each nested in the one before, as
    /// TIR builds it: the body runs in the innermost.
    fn serial_nest<'a>(
        &mut self,
        env: &Env<'a>,
        for_stmt: &'a StmtFor,
        extents: &[tilec_ir::ExprId],
    ) -> Eval<Flow<'a>> {
        let span = range_span(for_stmt);
        let names = self.loop_names(for_stmt, extents.len(), "loop ")?;
        let mut entered = Vec::new();
        for (name, &extent) in names.iter().zip(extents) {
            let entity = self.add_kernel_entity(EntityKind::Loop, "a TileLang loop", span)?;
            let var = self.world.exprs.var(name, self.world.exprs.as_int(extent));
            let value = self.world.exprs.var_expr(var);
            bind(env, name, Value::Index(value));
            self.world.names.set(entity, name.clone());
            self.world.loops.set(
                entity,
                LoopInfo {
                    kind: LoopKind::Serial,
                    vars: vec![var],
                    extents: vec![extent],
                },
            );
            entered.push(self.block.replace(Block::Body(entity)));
        }
        let result = self.exec_body(env, &for_stmt.body);
        if let Some(outer) = entered.into_iter().next() {
            self.block = outer;
        }
        result.map(|_| Flow::Normal)
    }

    /// `for c0, ..., cn in T.Persistent(domain, wave_size, index, group_size):` as TileLang builds
    /// it: the last dimension of the domain is split into groups of `g = max(1, min(group_size,
    /// D_last))` tiles, the grouped domain `[D0, ..., D_{n-2}, ceildiv(D_last, g), g]` is walked
    /// linearly, and block `index` of the `wave_size` that share the walk takes the linear tiles
    /// `w * wave_size + index` for `w` in `0..ceildiv(grouped size, wave_size)` (a serial loop),
    /// skipping those past the grouped domain or past `D_last` in a partial last group.
    fn persistent_loop<'a>(
        &mut self,
        env: &Env<'a>,
        for_stmt: &'a StmtFor,
        tiles: &PersistentTiles,
    ) -> Eval<Flow<'a>> {
        let span = range_span(for_stmt);
        let names = self.loop_names(for_stmt, tiles.domain.len(), "persistent loop ")?;
        let exprs = &mut self.world.exprs;
        let Some((&last, outer)) = tiles.domain.split_last() else {
            return Err(Stop);
        };
        let one = exprs.int(1);
        let capped = exprs.min(tiles.group_size, last);
        let group = exprs.max(one, capped);
        let groups = exprs.ceildiv(last, group);
        let mut grouped: Vec<tilec_ir::ExprId> = outer.to_vec();
        grouped.push(groups);
        grouped.push(group);
        let virtual_size = grouped
            .iter()
            .skip(1)
            .fold(grouped[0], |acc, &d| exprs.mul(acc, d));
        let domain_size = outer.iter().fold(last, |acc, &d| exprs.mul(acc, d));
        let waves = exprs.ceildiv(virtual_size, tiles.wave_size);
        let entity = self.add_kernel_entity(EntityKind::Loop, "a TileLang loop", span)?;
        let wave = self.world.exprs.var("w", self.world.exprs.as_int(waves));
        let exprs = &mut self.world.exprs;
        let w = exprs.var_expr(wave);
        let scaled = exprs.mul(w, tiles.wave_size);
        let linear = exprs.add(scaled, tiles.index);
        // Mixed radix, innermost (the offset within a group) first.
        let mut coords = vec![linear; grouped.len()];
        let mut rest = linear;
        for position in (1..grouped.len()).rev() {
            coords[position] = exprs.floormod(rest, grouped[position]);
            rest = exprs.floordiv(rest, grouped[position]);
        }
        coords[0] = rest;
        let group_start = exprs.mul(coords[grouped.len() - 2], group);
        let last_coord = exprs.add(group_start, coords[grouped.len() - 1]);
        let mut bound: Vec<tilec_ir::ExprId> = coords[..outer.len()].to_vec();
        bound.push(last_coord);
        for (name, &value) in names.iter().zip(&bound) {
            bind(env, name, Value::Index(value));
        }
        self.world.names.set(entity, names.join(", "));
        self.world.loops.set(
            entity,
            LoopInfo {
                kind: LoopKind::Serial,
                vars: vec![wave],
                extents: vec![waves],
            },
        );
        // The guards TileLang adds where they can fail: a last wave past the grouped domain, a
        // partial last group.
        let covered = self.world.exprs.mul(waves, tiles.wave_size);
        let mut guards = Vec::new();
        if covered != virtual_size {
            guards.push((linear, virtual_size));
        }
        if virtual_size != domain_size {
            guards.push((last_coord, last));
        }
        self.in_block(Block::Body(entity), |builder| {
            let Some(cond) = builder.index_guard(&guards) else {
                return builder.exec_body(env, &for_stmt.body);
            };
            let guard = builder.add_kernel_entity(EntityKind::If, "a runtime `if`", span)?;
            builder.world.conditions.set(guard, cond);
            builder.in_block(Block::Body(guard), |builder| {
                builder.exec_body(env, &for_stmt.body)
            })
        })?;
        Ok(Flow::Normal)
    }

    /// `a0 < b0 and a1 < b1 and ...` over index expressions, as a runtime condition.
    fn index_guard(
        &mut self,
        bounds: &[(tilec_ir::ExprId, tilec_ir::ExprId)],
    ) -> Option<tilec_ir::DataId> {
        let mut cond = None;
        for &(value, limit) in bounds {
            let data = &mut self.world.data;
            let lhs = data.push(tilec_ir::DataExpr::Index(value));
            let rhs = data.push(tilec_ir::DataExpr::Index(limit));
            let less = data.push(tilec_ir::DataExpr::Compare {
                op: tilec_ir::data::CompareOp::Lt,
                lhs,
                rhs,
            });
            cond = Some(match cond {
                None => less,
                Some(before) => data.push(tilec_ir::DataExpr::Binary {
                    op: tilec_ir::data::BinaryOp::And,
                    lhs: before,
                    rhs: less,
                }),
            });
        }
        cond
    }

    /// Iterating a Python list, tuple or range outside a TileLang loop unrolls at compile time.
    fn unroll<'a>(
        &mut self,
        env: &Env<'a>,
        for_stmt: &'a StmtFor,
        iterable: Value<'a>,
        span: Span,
    ) -> Eval<Flow<'a>> {
        for item in self.iterate(iterable, span)? {
            self.assign(env, &for_stmt.target, item)?;
            match self.exec_body(env, &for_stmt.body)? {
                Flow::Break => break,
                Flow::Return(value) => return Ok(Flow::Return(value)),
                Flow::Normal | Flow::Continue => {}
            }
        }
        Ok(Flow::Normal)
    }

    /// `while cond:` on a run-time condition in a kernel: a loop entity whose condition is read
    /// again before every iteration (its loads are evaluated where it stands). Its body runs once
    /// here, as a loop body does; leaving it early (`break`, `continue`, `return`) is not
    /// modelled.
    fn runtime_while<'a>(
        &mut self,
        env: &Env<'a>,
        while_stmt: &'a ruff_python_ast::StmtWhile,
        test: Value<'a>,
    ) -> Eval<Flow<'a>> {
        let span = range_span(while_stmt);
        if !while_stmt.orelse.is_empty() {
            return Err(self.unsupported(span, "a `while ... else` on a runtime condition"));
        }
        let (cond, _) = self.data_expr(&test, span)?;
        let entity = self.add_kernel_entity(EntityKind::Loop, "a runtime `while`", span)?;
        self.world.conditions.set(entity, cond);
        self.world.loops.set(
            entity,
            LoopInfo {
                kind: LoopKind::While,
                vars: Vec::new(),
                extents: Vec::new(),
            },
        );
        let flow = self.in_block(Block::Body(entity), |builder| {
            builder.exec_body(env, &while_stmt.body)
        })?;
        match flow {
            Flow::Normal => Ok(Flow::Normal),
            Flow::Break | Flow::Continue | Flow::Return(_) => Err(self.unsupported(
                span,
                "leaving a `while` on a runtime condition early (`break`, `continue`, `return`)",
            )),
        }
    }

    /// `with T.If(cond):` over `with T.Then(): a` and `with T.Else(): b` is `if cond: a else:
    /// b`; so is `with T.If(cond), T.Then(): a` without the else.
    fn exec_if_frame<'a>(
        &mut self,
        env: &Env<'a>,
        with: &'a StmtWith,
        rest: &'a [ruff_python_ast::WithItem],
        test: &Value<'a>,
        span: Span,
    ) -> Eval<Flow<'a>> {
        if let Some((then_item, inner)) = rest.split_first() {
            match self.eval(env, &then_item.context_expr)? {
                Value::BranchFrame(true) => {}
                _ => {
                    return Err(self.misused(
                        span,
                        "a `with T.If(cond)` whose next item is not `T.Then()`",
                    ));
                }
            }
            return self.exec_branches(env, test, span, &Branch::Items(with, inner), None);
        }
        let mut branches: [Option<&'a [Stmt]>; 2] = [None, None];
        for stmt in &with.body {
            let branch = match stmt {
                Stmt::With(inner) if inner.items.len() == 1 => {
                    match self.eval(env, &inner.items[0].context_expr)? {
                        Value::BranchFrame(then) => Some((usize::from(!then), &inner.body)),
                        _ => None,
                    }
                }
                _ => None,
            };
            match branch {
                Some((index, body)) if branches[index].is_none() => {
                    branches[index] = Some(body.as_slice());
                }
                _ => {
                    return Err(self.misused(
                        range_span(stmt),
                        "a statement in a `with T.If(cond):` other than one `with T.Then():` \
                         and one `with T.Else():`",
                    ));
                }
            }
        }
        let then = branches[0].map_or(Branch::Statements(&[]), Branch::Statements);
        let otherwise = branches[1].map(Branch::Statements);
        self.exec_branches(env, test, span, &then, otherwise.as_ref())
    }

    /// Runs `then` where `test` holds and `otherwise` where it does not: the branch itself when
    /// the test is known at compile time, a runtime `if` of the kernel otherwise.
    fn exec_branches<'a>(
        &mut self,
        env: &Env<'a>,
        test: &Value<'a>,
        span: Span,
        then: &Branch<'a>,
        otherwise: Option<&Branch<'a>>,
    ) -> Eval<Flow<'a>> {
        match test.truthy() {
            Some(true) => self.exec_branch(env, then, span),
            Some(false) => match otherwise {
                Some(otherwise) => self.exec_branch(env, otherwise, span),
                None => Ok(Flow::Normal),
            },
            None => {
                let (cond, _) = self.data_expr(test, span)?;
                let entity = self.add_kernel_entity(EntityKind::If, "a runtime `T.If`", span)?;
                self.world.conditions.set(entity, cond);
                self.in_block(Block::Body(entity), |builder| {
                    builder.exec_branch(env, then, span)
                })?;
                if let Some(otherwise) = otherwise {
                    self.in_block(Block::Else(entity), |builder| {
                        builder.exec_branch(env, otherwise, span)
                    })?;
                }
                Ok(Flow::Normal)
            }
        }
    }

    fn exec_branch<'a>(
        &mut self,
        env: &Env<'a>,
        branch: &Branch<'a>,
        span: Span,
    ) -> Eval<Flow<'a>> {
        match *branch {
            Branch::Statements(body) => self.exec_body(env, body),
            Branch::Items(with, items) => self.exec_with_items(env, with, items, span),
        }
    }

    /// The names a TileLang loop of `dimensions` binds, one per dimension (`what` names the
    /// loop in the error otherwise: "loop ", "persistent loop ").
    fn loop_names(
        &mut self,
        for_stmt: &StmtFor,
        dimensions: usize,
        what: &str,
    ) -> Eval<Vec<String>> {
        let names = loop_targets(&for_stmt.target);
        if names.len() != dimensions {
            return Err(self.error(
                Code::InvalidCall,
                expr_span(&for_stmt.target),
                format!(
                    "this {what}has {dimensions} dimension(s) but binds {} name(s)",
                    names.len()
                ),
            ));
        }
        Ok(names)
    }

    fn exec_if<'a>(&mut self, env: &Env<'a>, if_stmt: &'a StmtIf) -> Eval<Flow<'a>> {
        let test = self.eval(env, &if_stmt.test)?;
        match test.truthy() {
            Some(true) => self.exec_body(env, &if_stmt.body),
            Some(false) => {
                for clause in &if_stmt.elif_else_clauses {
                    let taken =
                        match &clause.test {
                            None => true,
                            Some(test) => {
                                let value = self.eval(env, test)?;
                                match value.truthy() {
                                    Some(taken) => taken,
                                    None => return Err(self.unsupported(
                                        range_span(clause),
                                        "an `elif` on a runtime value after compile-time branches",
                                    )),
                                }
                            }
                        };
                    if taken {
                        return self.exec_body(env, &clause.body);
                    }
                }
                Ok(Flow::Normal)
            }
            None => {
                let span = range_span(if_stmt);
                let (cond, _) = self.data_expr(&test, span)?;
                let entity = self.add_kernel_entity(EntityKind::If, "a runtime `if`", span)?;
                self.world.conditions.set(entity, cond);
                self.in_block(Block::Body(entity), |builder| {
                    builder.exec_body(env, &if_stmt.body)
                })?;
                if !if_stmt.elif_else_clauses.is_empty() {
                    self.in_block(Block::Else(entity), |builder| {
                        builder.exec_else_clauses(env, &if_stmt.elif_else_clauses)
                    })?;
                }
                Ok(Flow::Normal)
            }
        }
    }

    /// The `elif` / `else` clauses after a runtime `if`, in its else-branch: `elif c: a else: b`
    /// is `else: if c: a else: b`, each condition a runtime `if` of its own or, when known at
    /// compile time, the branch it picks.
    fn exec_else_clauses<'a>(
        &mut self,
        env: &Env<'a>,
        clauses: &'a [ruff_python_ast::ElifElseClause],
    ) -> Eval<Flow<'a>> {
        let Some((clause, rest)) = clauses.split_first() else {
            return Ok(Flow::Normal);
        };
        let Some(test) = &clause.test else {
            return self.exec_body(env, &clause.body);
        };
        let value = self.eval(env, test)?;
        match value.truthy() {
            Some(true) => self.exec_body(env, &clause.body),
            Some(false) => self.exec_else_clauses(env, rest),
            None => {
                let span = range_span(clause);
                let (cond, _) = self.data_expr(&value, span)?;
                let entity = self.add_kernel_entity(EntityKind::If, "a runtime `elif`", span)?;
                self.world.conditions.set(entity, cond);
                self.in_block(Block::Body(entity), |builder| {
                    builder.exec_body(env, &clause.body)
                })?;
                if !rest.is_empty() {
                    self.in_block(Block::Else(entity), |builder| {
                        builder.exec_else_clauses(env, rest)
                    })?;
                }
                Ok(Flow::Normal)
            }
        }
    }

    fn exec_with<'a>(&mut self, env: &Env<'a>, with: &'a StmtWith) -> Eval<Flow<'a>> {
        let span = range_span(with);
        self.exec_with_items(env, with, &with.items, span)
    }

    /// `with a, b: body` is `with a: with b: body`: each item is entered in order, inside the
    /// ones before it.
    fn exec_with_items<'a>(
        &mut self,
        env: &Env<'a>,
        with: &'a StmtWith,
        items: &'a [ruff_python_ast::WithItem],
        span: Span,
    ) -> Eval<Flow<'a>> {
        let Some((item, rest)) = items.split_first() else {
            return self.exec_body(env, &with.body);
        };
        let frame = self.eval(env, &item.context_expr)?;
        match frame {
            Value::NoOpFrame => return self.exec_with_items(env, with, rest, span),
            Value::ReduceScope(combiner) => {
                self.reduce_scopes.push(combiner);
                let flow = self.exec_with_items(env, with, rest, span);
                self.reduce_scopes.pop();
                return flow;
            }
            Value::IfFrame(test) => {
                return self.exec_if_frame(env, with, rest, &test, span);
            }
            Value::BranchFrame(_) => {
                return Err(self.misused(
                    span,
                    "`T.Then()` or `T.Else()` outside the body of a `with T.If(cond):`",
                ));
            }
            Value::GuardFrame(cond) => {
                let entity = self.add_kernel_entity(EntityKind::If, "`T.ws`", span)?;
                self.world.conditions.set(entity, cond);
                return self.in_block(Block::Body(entity), |builder| {
                    builder.exec_with_items(env, with, rest, span)
                });
            }
            _ => {}
        }
        let Value::KernelFrame {
            grid,
            threads,
            prelude,
        } = frame
        else {
            return Err(self.unsupported(span, "this `with` (tilec knows `with T.Kernel(...)`)"));
        };
        if self.block.is_some() {
            return Err(self.misused(span, "a `T.Kernel` nested in another kernel"));
        }
        let entity = self.add_entity(EntityKind::Kernel);
        self.world.names.set(entity, "kernel".to_owned());
        let names = item
            .optional_vars
            .as_deref()
            .map(loop_targets)
            .unwrap_or_default();
        let mut block_vars = Vec::new();
        for (dim, &extent) in grid.iter().enumerate() {
            let default_name = ["bx", "by", "bz"].get(dim).copied().unwrap_or("b");
            let name = names.get(dim).map_or(default_name, String::as_str);
            let var = self.world.exprs.var(name, self.world.exprs.as_int(extent));
            block_vars.push(var);
            if names.get(dim).is_some() {
                let value = self.world.exprs.var_expr(var);
                bind(env, name, Value::Index(value));
            }
        }
        if names.len() > grid.len() {
            return Err(self.error(
                Code::InvalidCall,
                span,
                format!(
                    "the grid has {} dimension(s) but {} block indices are bound",
                    grid.len(),
                    names.len()
                ),
            ));
        }
        self.world.launches.set(
            entity,
            Launch {
                grid,
                block_vars,
                threads,
                thread_var: None,
            },
        );
        self.in_block(Block::Body(entity), |builder| {
            if let Some(source) = prelude {
                let op = tilec_ir::TileOp::ImportSource {
                    source: source.map(|text| text.to_string()),
                };
                builder.add_tile_op(op, "`prelude=` of `T.Kernel`", span)?;
            }
            builder.exec_with_items(env, with, rest, span)
        })
    }

    /// Runs `f` with new statements going into `block`.
    pub(crate) fn in_block<T>(
        &mut self,
        block: Block,
        f: impl FnOnce(&mut Builder<'_>) -> Eval<T>,
    ) -> Eval<T> {
        let saved = self.block.replace(block);
        let result = f(self);
        self.block = saved;
        result
    }
}

/// What a branch of a `T.If` frame runs: the body of its `with T.Then():` (or `T.Else()`), or,
/// for `with T.If(c), T.Then(), more: body`, the items after `T.Then()` and then the body.
enum Branch<'a> {
    Statements(&'a [Stmt]),
    Items(&'a StmtWith, &'a [ruff_python_ast::WithItem]),
}

/// The names a `for` or `with ... as` binds: `i`, `(i, j)`, `(bx)`.
fn loop_targets(target: &Expr) -> Vec<String> {
    match target {
        Expr::Name(name) => vec![name.id.to_string()],
        Expr::Tuple(tuple) => tuple.elts.iter().flat_map(loop_targets).collect(),
        Expr::List(list) => list.elts.iter().flat_map(loop_targets).collect(),
        _ => Vec::new(),
    }
}

/// A statement whose failure is an exception in Python too, so it ends the enclosing call even in
/// lenient code.
fn raises(stmt: &Stmt) -> bool {
    matches!(stmt, Stmt::Raise(_) | Stmt::Assert(_))
}

/// A statement whose failure skips code that may assign or return: after it, what the enclosing
/// function returns is no longer known.
fn skips_code(stmt: &Stmt) -> bool {
    match stmt {
        Stmt::If(_) | Stmt::For(_) | Stmt::While(_) | Stmt::With(_) | Stmt::Try(_) => true,
        Stmt::Match(_) | Stmt::ClassDef(_) => true,
        Stmt::FunctionDef(_) | Stmt::Return(_) | Stmt::Delete(_) | Stmt::TypeAlias(_) => false,
        Stmt::Assign(_) | Stmt::AugAssign(_) | Stmt::AnnAssign(_) => false,
        Stmt::Raise(_) | Stmt::Assert(_) | Stmt::Import(_) | Stmt::ImportFrom(_) => false,
        Stmt::Global(_) | Stmt::Nonlocal(_) | Stmt::Expr(_) | Stmt::Pass(_) => false,
        Stmt::Break(_) | Stmt::Continue(_) | Stmt::IpyEscapeCommand(_) => false,
    }
}

/// After a failed statement, binds its assignment targets to `value`, so that later uses do not
/// report the problem again as an undefined name.
/// The names `stmt`'s nested statements store through (`lo[0] = ...`, `acc[i] += ...`), not
/// counting the bodies of functions and classes it defines.
fn nested_store_bases(stmt: &Stmt) -> Vec<&str> {
    use ruff_python_ast::visitor::{Visitor, walk_stmt};
    struct Stores<'s>(Vec<&'s str>);
    impl<'s> Visitor<'s> for Stores<'s> {
        fn visit_stmt(&mut self, stmt: &'s Stmt) {
            let targets: Vec<&Expr> = match stmt {
                Stmt::FunctionDef(_) | Stmt::ClassDef(_) => return,
                Stmt::Assign(assign) => assign.targets.iter().collect(),
                Stmt::AugAssign(aug) => vec![&*aug.target],
                Stmt::AnnAssign(ann) => vec![&*ann.target],
                _ => Vec::new(),
            };
            for target in targets {
                if let Expr::Subscript(subscript) = target
                    && let Expr::Name(name) = &*subscript.value
                {
                    self.0.push(name.id.as_str());
                }
            }
            walk_stmt(self, stmt);
        }
    }
    let mut stores = Stores(Vec::new());
    stores.visit_stmt(stmt);
    stores.0
}

fn bind_targets<'a>(env: &Env<'a>, stmt: &'a Stmt, value: &Value<'a>) {
    let targets: Vec<&Expr> = match stmt {
        Stmt::Assign(assign) => assign.targets.iter().collect(),
        Stmt::AnnAssign(ann) => vec![&ann.target],
        Stmt::AugAssign(aug) => vec![&aug.target],
        Stmt::For(for_stmt) => vec![&for_stmt.target],
        Stmt::With(with) => with
            .items
            .iter()
            .filter_map(|item| item.optional_vars.as_deref())
            .collect(),
        _ => Vec::new(),
    };
    for target in targets {
        for name in loop_targets(target) {
            bind(env, &name, value.clone());
        }
    }
}

impl<'a> Builder<'_> {
    /// After `assert x == 576` (or `576 == x`, or several joined by `and`) on a name the driver
    /// does not know (a size read from a tensor's shape), the name is that value: the code after
    /// the assertion only runs when it holds. Library code pins its supported sizes and formats
    /// this way, and a wrapper the types of its tensors: `assert x.dtype == torch.bfloat16` and
    /// `assert x.dim() == 2` make an unknown `x` a tensor of that dtype and rank, and `assert fmt
    /// in ("e4m3", "e5m2")` makes `fmt` the first value it allows.
    fn narrow_by_assert(&mut self, env: &Env<'a>, test: &'a Expr) {
        use ruff_python_ast::CmpOp;
        match test {
            Expr::BoolOp(bool_op) if bool_op.op == ruff_python_ast::BoolOp::And => {
                for value in &bool_op.values {
                    self.narrow_by_assert(env, value);
                }
            }
            Expr::Compare(compare) if compare.ops.len() == 1 => {
                let (left, right) = (&*compare.left, &compare.comparators[0]);
                match compare.ops[0] {
                    CmpOp::Eq => {
                        for (target, other) in [(left, right), (right, left)] {
                            if let Some(value) = self.narrowing_value(env, other)
                                && self.narrow_to(env, target, value)
                            {
                                return;
                            }
                        }
                    }
                    CmpOp::In => {
                        if let Some(first) = self.first_allowed(env, right) {
                            self.narrow_to(env, left, first);
                        }
                    }
                    _ => {}
                }
            }
            _ => {}
        }
    }

    /// A value an assertion may pin an unknown to: a number, text, flag or dtype it evaluates to.
    fn narrowing_value(&mut self, env: &Env<'a>, expr: &'a Expr) -> Option<Value<'a>> {
        self.eval(env, expr).ok().filter(|value| {
            matches!(
                value,
                Value::Int(_) | Value::Str(_) | Value::Bool(_) | Value::DType(_)
            )
        })
    }

    /// The first value `x in allowed` lets through, when `allowed` is a sequence of them.
    fn first_allowed(&mut self, env: &Env<'a>, allowed: &'a Expr) -> Option<Value<'a>> {
        let first = match allowed {
            Expr::List(list) => list.elts.first()?,
            Expr::Tuple(tuple) => tuple.elts.first()?,
            Expr::Set(set) => set.elts.first()?,
            _ => {
                return match self.eval(env, allowed).ok()? {
                    Value::List(items) | Value::Tuple(items) => items.first().cloned(),
                    _ => None,
                };
            }
        };
        self.narrowing_value(env, first)
    }

    /// Rebinds what `target` names so that it has `value`: an unknown name becomes the value, an
    /// unknown (or partly known) tensor's `.dtype` the dtype and its `.dim()`, `.ndim` or
    /// `len(x.shape)` the rank. False when `target` is none of these, or already known.
    fn narrow_to(&mut self, env: &Env<'a>, target: &'a Expr, value: Value<'a>) -> bool {
        if let Expr::Name(name) = target {
            if matches!(lookup(env, name.id.as_str()), Some(Value::Opaque(_))) {
                rebind(env, name.id.as_str(), value);
                return true;
            }
            return false;
        }
        let Some((tensor, property)) = tensor_property(target) else {
            return false;
        };
        let known = match lookup(env, tensor) {
            Some(Value::Opaque(_)) => crate::torch::TensorValue::default(),
            Some(Value::Tensor(known)) => (*known).clone(),
            _ => return false,
        };
        let narrowed = match (property, value) {
            (TensorProperty::DType, Value::DType(dtype)) if known.dtype.is_none() => {
                crate::torch::TensorValue {
                    dtype: Some(dtype),
                    ..known
                }
            }
            (TensorProperty::Rank, Value::Int(rank)) if known.shape.is_none() => {
                // A rank past any tensor's (PyTorch allows 64 dimensions) narrows nothing: the
                // assertion fails at run time, and its value must not size an allocation.
                let Some(rank) = usize::try_from(rank).ok().filter(|&rank| rank <= 64) else {
                    return false;
                };
                crate::torch::TensorValue {
                    shape: Some(vec![None; rank]),
                    ..known
                }
            }
            _ => return false,
        };
        rebind(env, tensor, Value::Tensor(Rc::new(narrowed)));
        true
    }
}

/// What an assertion may say of a tensor a name holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TensorProperty {
    DType,
    Rank,
}

/// `x.dtype`, `x.dim()`, `x.ndim` or `len(x.shape)`: the name and what it reads.
fn tensor_property(expr: &Expr) -> Option<(&str, TensorProperty)> {
    fn attribute_of_name(expr: &Expr) -> Option<(&str, &str)> {
        let Expr::Attribute(attribute) = expr else {
            return None;
        };
        match &*attribute.value {
            Expr::Name(name) => Some((name.id.as_str(), attribute.attr.as_str())),
            _ => None,
        }
    }
    match expr {
        Expr::Attribute(_) => match attribute_of_name(expr)? {
            (name, "dtype") => Some((name, TensorProperty::DType)),
            (name, "ndim") => Some((name, TensorProperty::Rank)),
            _ => None,
        },
        Expr::Call(call) if call.arguments.is_empty() => match attribute_of_name(&call.func)? {
            (name, "dim" | "ndimension") => Some((name, TensorProperty::Rank)),
            _ => None,
        },
        Expr::Call(call)
            if call.arguments.args.len() == 1 && call.arguments.keywords.is_empty() =>
        {
            let Expr::Name(function) = &*call.func else {
                return None;
            };
            match (
                function.id.as_str(),
                attribute_of_name(&call.arguments.args[0])?,
            ) {
                ("len", (name, "shape")) => Some((name, TensorProperty::Rank)),
                _ => None,
            }
        }
        _ => None,
    }
}

fn import_value<'a>(module: &str) -> Value<'a> {
    match module {
        "tilelang" => Value::Module(Module::Tilelang),
        "tilelang.language" | "tilelang.layout" => Value::Module(Module::Language),
        "math" => Value::Module(Module::Math),
        "argparse" => Value::Module(Module::Argparse),
        "itertools" => Value::Module(Module::Itertools),
        "torch" => Value::Module(Module::Torch),
        "functools" => Value::Module(Module::Functools),
        "os" => Value::Module(Module::Os),
        "tilelang.tools.cuda.iket" => Value::Module(Module::Iket),
        "tvm" => Value::Module(Module::Tvm),
        "tvm.tirx" | "tvm.tir" => Value::Module(Module::Tir),
        other => Value::Opaque(Rc::from(format!("module `{other}`"))),
    }
}

fn import_from_value<'a>(module: &str, name: &str) -> Value<'a> {
    match (module, name) {
        ("tilelang", "language") => Value::Module(Module::Language),
        ("tilelang", "tvm") => Value::Module(Module::Tvm),
        // `tilelang.PassConfigKey` is defined in `tilelang.transform`, where code imports it from.
        ("tilelang" | "tilelang.transform", "PassConfigKey") => Value::PassConfigKeys,
        ("tilelang.layout", _) => Value::ModuleFn(Module::Language, Rc::from(name)),
        ("tilelang.language", "GemmWarpPolicy") => Value::PolicyEnum,
        ("tilelang.language", _) => match crate::dsl::language_dtype(name) {
            Some(dtype) => Value::DType(dtype),
            None => Value::ModuleFn(Module::Language, Rc::from(name)),
        },
        ("math", _) => Value::ModuleFn(Module::Math, Rc::from(name)),
        ("itertools", _) => Value::ModuleFn(Module::Itertools, Rc::from(name)),
        ("functools", _) => Value::ModuleFn(Module::Functools, Rc::from(name)),
        ("os", "environ") => Value::Dict(Rc::new(Vec::new())),
        ("os", _) => Value::ModuleFn(Module::Os, Rc::from(name)),
        ("torch", _) => match crate::torch::torch_dtype(name) {
            Some(dtype) => Value::DType(dtype),
            None => Value::ModuleFn(Module::Torch, Rc::from(name)),
        },
        ("tilelang.tools.cuda", "iket") | ("tilelang.tools.cuda.iket", _) => match module {
            "tilelang.tools.cuda" => Value::Module(Module::Iket),
            _ => Value::ModuleFn(Module::Iket, Rc::from(name)),
        },
        ("tvm", "DataType") | ("tvm.runtime", "DataType") => {
            Value::ModuleFn(Module::Language, Rc::from("dtype"))
        }
        ("tvm", "tirx" | "tir") => Value::Module(Module::Tir),
        // The language's own submodules, by their full path.
        ("tilelang.language.fp8", _) => Value::ModuleFn(Module::Language, Rc::from(name)),
        // TileLang's tensor-core intrinsics package: its layout helpers are modelled.
        (
            "tilelang.cuda.intrinsics"
            | "tilelang.cuda.intrinsics.layout"
            | "tilelang.cuda.intrinsics.layout.mma_layout"
            | "tilelang.intrinsics"
            | "tilelang.intrinsics.mma_layout",
            "make_mma_swizzle_layout" | "get_swizzle_layout",
        ) => Value::ModuleFn(Module::Language, Rc::from(name)),
        ("tilelang.tileop" | "tilelang.tileop.base", "GemmWarpPolicy") => Value::PolicyEnum,
        ("tvm.tirx" | "tvm.tir", _) => Value::ModuleFn(Module::Tir, Rc::from(name)),
        // The target's facts: `driver.get_num_sms()`.
        ("tilelang.carver.arch", "driver") | ("tilelang.carver.arch.driver", _) => {
            Value::Module(Module::Driver)
        }
        ("tilelang", _)
        | ("tilelang.autotuner", _)
        | ("tilelang.jit", _)
        | ("tilelang.math", _) => Value::ModuleFn(Module::Tilelang, Rc::from(name)),
        _ => Value::Opaque(Rc::from(format!("`{name}` from module `{module}`"))),
    }
}
