//! Calls, attribute access and subscripts: user functions, Python builtins, `math`, and the
//! dispatch to the DSL.

use std::borrow::Cow;
use std::rc::Rc;

use ruff_python_ast::{Expr, ExprCall, StmtFunctionDef};
use tilec_ir::{AssumedArg, Code, DType, EntityKind, Region, RegionDim, WarpPolicy};

use crate::builder::{Builder, CallArg, Eval, OpaqueLeniency, Stop};
use crate::eval::{Args, expr_span, python_floordiv, python_mod};
use crate::exec::Flow;
use crate::outline::range_span;
use crate::value::{
    Builtin, Env, Function, FunctionBody, Module, Value, bind, int_of_float, int_of_len, new_env,
    record_call_frame,
};
use tilec_ir::Span;

/// The most rows `itertools.product` builds at compile time (configuration lists are far smaller).
const MAX_PRODUCT_ROWS: u128 = 1 << 20;

impl Builder<'_> {
    pub(crate) fn call<'a>(&mut self, env: &Env<'a>, call: &'a ExprCall) -> Eval<Value<'a>> {
        let span = range_span(call);
        let callee = self.eval(env, &call.func)?;
        // The source and function name of the user's own CUDA may be values tilec cannot know
        // (built by another module): lowering reports that, checking does not need them.
        self.opaque_leniency = match &callee {
            Value::ModuleFn(Module::Language, name) => match &**name {
                "import_source" | "call_extern" => OpaqueLeniency::All,
                "Kernel" => OpaqueLeniency::Keyword("prelude"),
                _ => OpaqueLeniency::None,
            },
            _ => OpaqueLeniency::None,
        };
        let args = self.eval_args(env, call)?;
        self.step(span)?;
        if let Value::Builtin(builtin @ (Builtin::GetAttr | Builtin::HasAttr)) = callee {
            return self.getattr(env, builtin, args);
        }
        self.call_value(callee, args, span)
    }

    /// `any`, `all`, `sorted` and `reversed` of the items of an iterable.
    fn sequence_builtin<'a>(
        &mut self,
        builtin: Builtin,
        mut items: Vec<Value<'a>>,
        span: Span,
    ) -> Eval<Value<'a>> {
        match builtin {
            Builtin::Any | Builtin::All => {
                let want = builtin == Builtin::Any;
                for item in &items {
                    match item.truthy() {
                        Some(truth) if truth == want => return Ok(Value::Bool(want)),
                        Some(_) => {}
                        None => {
                            return Err(self.error(
                                Code::MetaError,
                                span,
                                format!(
                                    "`any`/`all` of {}, whose truth is not known at compile time",
                                    item.describe()
                                ),
                            ));
                        }
                    }
                }
                Ok(Value::Bool(!want))
            }
            Builtin::Reversed => {
                items.reverse();
                Ok(Value::List(Rc::new(items)))
            }
            _ => {
                let mut unordered = false;
                items.sort_by(|a, b| match (a, b) {
                    (Value::Int(x), Value::Int(y)) => x.cmp(y),
                    (Value::Str(x), Value::Str(y)) => x.cmp(y),
                    (Value::Int(_) | Value::Float(_), Value::Int(_) | Value::Float(_)) => {
                        let as_float = |v: &Value<'_>| match v {
                            Value::Int(i) => *i as f64,
                            Value::Float(f) => *f,
                            _ => 0.0,
                        };
                        as_float(a).total_cmp(&as_float(b))
                    }
                    _ => {
                        unordered = true;
                        std::cmp::Ordering::Equal
                    }
                });
                if unordered {
                    return Err(self.error(
                        Code::NotAnalysed,
                        span,
                        "`sorted` of values other than numbers or strings is not evaluated by \
                         tilec",
                    ));
                }
                Ok(Value::List(Rc::new(items)))
            }
        }
    }

    /// `getattr(obj, name[, default])` and `hasattr(obj, name)` with a name known at compile time
    /// (`getattr(T, "reduce_" + op)(...)`): the attribute as `obj.name` gives it. An attribute
    /// that does not exist gives the default (or `False`); with no default it is the error
    /// `obj.name` would be.
    fn getattr<'a>(&mut self, env: &Env<'a>, builtin: Builtin, args: Args<'a>) -> Eval<Value<'a>> {
        let span = args.span;
        let (Some(object), Some(name)) = (args.get(0, "object"), args.get(1, "name")) else {
            return Err(self.error(
                Code::InvalidCall,
                span,
                "`getattr` and `hasattr` take an object and an attribute name",
            ));
        };
        let Value::Str(name) = name else {
            return Err(self.error(
                Code::NotAnalysed,
                span,
                format!(
                    "`getattr` with {} as the attribute name, which tilec cannot know",
                    name.describe()
                ),
            ));
        };
        let default = args.positional.get(2).map(|(value, _)| value.clone());
        let lenient = builtin == Builtin::HasAttr || default.is_some();
        let wanted = self.strict && !lenient;
        let strict = std::mem::replace(&mut self.strict, wanted);
        let reported = self.diagnostics.len();
        let found = self.attribute(env, object.clone(), name, span);
        self.strict = strict;
        if lenient {
            // A missing attribute is an answer here, not a diagnostic.
            self.diagnostics.truncate(reported);
        }
        // An object's attribute that tilec did not see set is unknown rather than an error (it
        // may be set where tilec does not look); asked with a default, the attribute is taken
        // to be missing, as code that passes a default expects it may be.
        let of_object = matches!(object, Value::Object(_));
        match (builtin, found) {
            (Builtin::HasAttr, Ok(Value::Opaque(_))) if of_object => Ok(Value::Bool(false)),
            (Builtin::HasAttr, Ok(unknown @ Value::Opaque(_))) => Ok(unknown),
            (Builtin::HasAttr, found) => Ok(Value::Bool(found.is_ok())),
            (_, Ok(Value::Opaque(_))) if of_object && default.is_some() => default.ok_or(Stop),
            (_, Ok(value)) => Ok(value),
            (_, Err(stop)) => default.ok_or(stop),
        }
    }

    /// Calls an evaluated callee with evaluated arguments.
    pub(crate) fn call_value<'a>(
        &mut self,
        callee: Value<'a>,
        args: Args<'a>,
        span: Span,
    ) -> Eval<Value<'a>> {
        match callee {
            Value::Function(function) => self.call_function(&function, args, span),
            Value::Builtin(builtin) => self.builtin(builtin, args),
            Value::ModuleFn(Module::Language, name) => self.dsl_call(&name, args),
            Value::ModuleFn(Module::Math, name) => self.math_call(&name, args),
            Value::ModuleFn(Module::Itertools, name) => self.itertools_call(&name, args),
            Value::ModuleFn(Module::Tilelang, name) => self.tilelang_call(&name, args),
            Value::ModuleFn(Module::Torch, name) => self.torch_call(&name, args),
            Value::ModuleFn(Module::Functools, name) => self.functools_call(&name, args),
            // The environment is read as empty (see `Module::Os`): `getenv` gives its default.
            Value::ModuleFn(Module::Os, name) if &*name == "getenv" => Ok(args
                .get(1, "default")
                .cloned()
                .unwrap_or(Value::None)),
            Value::ModuleFn(Module::Os, name) => Err(self.error(
                Code::NotAnalysed,
                span,
                format!("tilec does not model `os.{name}`"),
            )),
            Value::ModuleFn(Module::Driver, name) => Ok(self.driver_call(&name)),
            Value::ModuleFn(Module::Iket, name) => Ok(iket_call(&name)),
            Value::ModuleFn(Module::Tir, name) => self.tir_call(&name, args, span),
            Value::ModuleFn(Module::Tvm, name) => Err(self.error(
                Code::NotAnalysed,
                span,
                format!("tilec does not model `tvm.{name}`"),
            )),
            Value::Partial(partial) => {
                let mut args = args;
                let bound = partial.positional.iter().map(|value| (value.clone(), span));
                args.positional.splice(0..0, bound);
                for (key, value) in &partial.keywords {
                    if args.keyword(key).is_none() {
                        args.keywords.push((key.clone(), value.clone(), span));
                    }
                }
                self.call_value(partial.function.clone(), args, span)
            }
            Value::Method(receiver, name) if matches!(*receiver, Value::Tensor(_)) => {
                let Value::Tensor(x) = *receiver else {
                    return Err(Stop);
                };
                self.tensor_method(&x, &name, args)
            }
            Value::ModuleFn(Module::Argparse, name) if &*name == "ArgumentParser" => {
                Ok(Value::ArgParser(Rc::new(std::cell::RefCell::new(Vec::new()))))
            }
            Value::Method(receiver, name) => self.method_call(*receiver, &name, args),
            Value::DType(dtype) => self.typed_constant(dtype, args),
            Value::Class(class) => self.instantiate_class(&class, args, span),
            Value::KernelRef { name } => {
                self.calls.push(crate::builder::RecordedCall {
                    span,
                    kernel: name.to_string(),
                    positional: args.positional.iter().map(|(value, _)| CallArg::of(value)).collect(),
                    keywords: args.keywords.iter().map(|(key, value, _)| (key.clone(), CallArg::of(value))).collect(),
                    open_ended: false,
                });
                Ok(Value::Opaque(Rc::from("a compiled kernel")))
            }
            Value::Poison => Err(Stop),
            Value::Opaque(what) => Err(self.error(
                Code::NotAnalysed,
                span,
                format!("cannot call {what} at compile time: tilec evaluates Python itself and only knows the TileLang DSL, builtins and `math`"),
            )),
            other => Err(self.error(Code::MetaError, span, format!("{} is not callable", other.describe()))),
        }
    }

    /// Calls a user-defined function or lambda: its body runs with the arguments bound, and any
    /// kernel statements it makes are inlined where it is called (this is also how `T.macro` works).
    pub(crate) fn call_function<'a>(
        &mut self,
        function: &Rc<Function<'a>>,
        args: Args<'a>,
        span: Span,
    ) -> Eval<Value<'a>> {
        if function.prim_func {
            return Err(self.error(
                Code::UnsupportedSyntax,
                span,
                "a `T.prim_func` cannot be called inside another kernel",
            ));
        }
        self.enter_call(span)?;
        // Code of another module is located at this call, the outermost one in this file.
        let module = std::mem::replace(&mut self.current_module, function.module);
        let foreign = self.foreign_span;
        if function.module.is_some() && foreign.is_none() {
            self.foreign_span = Some(span);
        }
        let result = self.run_function(function, args, span);
        self.foreign_span = foreign;
        self.current_module = module;
        self.depth -= 1;
        result
    }

    fn run_function<'a>(
        &mut self,
        function: &Rc<Function<'a>>,
        args: Args<'a>,
        span: Span,
    ) -> Eval<Value<'a>> {
        let frame = new_env(Some(function.closure.clone()));
        let parameters = match function.body {
            FunctionBody::Def(def) => Some(&*def.parameters),
            FunctionBody::Lambda(lambda) => lambda.parameters.as_deref(),
        };
        if let Some(parameters) = parameters {
            let defaults = match function.body {
                FunctionBody::Def(def) if !function.autotune_config.is_empty() => {
                    Cow::Owned(self.autotuned_defaults(function, def, &args))
                }
                _ => Cow::Borrowed(function.defaults.as_slice()),
            };
            self.bind_parameters(&frame, &defaults, parameters, args, span)?;
        }
        match function.body {
            FunctionBody::Lambda(lambda) => self.eval(&frame, &lambda.body),
            FunctionBody::Def(def) => {
                record_call_frame(&frame, def.range.start().to_u32());
                let abort = std::mem::replace(&mut self.abort_on_error, true);
                let path_lost = std::mem::replace(&mut self.path_lost, false);
                let result = self.exec_body(&frame, &def.body);
                self.abort_on_error = abort;
                let lost = std::mem::replace(&mut self.path_lost, path_lost);
                match result? {
                    // A skipped branch may have returned something else.
                    _ if lost => Ok(Value::Opaque(Rc::from(
                        "returned by a function tilec could not follow at compile time",
                    ))),
                    Flow::Return(value) => Ok(value),
                    _ => Ok(Value::None),
                }
            }
        }
    }

    /// The defaults a call of an autotuned function sees: the autotuner passes each config's
    /// values for the parameters the call leaves out, so a parameter without a default, or at a
    /// `None` one, takes the first config's value. That value is assumed (and said so): tilec
    /// analyses one configuration, not the one the tuner will choose.
    fn autotuned_defaults<'a>(
        &mut self,
        function: &Function<'a>,
        def: &StmtFunctionDef,
        args: &Args<'a>,
    ) -> Vec<(String, Value<'a>)> {
        let passed_positionally: Vec<&str> = def
            .parameters
            .posonlyargs
            .iter()
            .chain(&def.parameters.args)
            .take(args.positional.len())
            .map(|param| param.name().as_str())
            .collect();
        let mut defaults = function.defaults.clone();
        for (name, value) in &function.autotune_config {
            let is_param = def
                .parameters
                .iter_non_variadic_params()
                .any(|param| param.name().as_str() == name);
            let passed = passed_positionally.contains(&name.as_str())
                || args.keywords.iter().any(|(keyword, ..)| keyword == name);
            let default = defaults.iter_mut().find(|(param, _)| param == name);
            if !is_param
                || passed
                || default
                    .as_ref()
                    .is_some_and(|(_, v)| !matches!(v, Value::None))
            {
                continue;
            }
            match default {
                Some(slot) => slot.1 = value.clone(),
                None => defaults.push((name.clone(), value.clone())),
            }
            if let Some(constant) = value.to_const()
                && !self.world.args.iter().any(|(existing, _)| existing == name)
            {
                self.world.assumed_args.push(AssumedArg {
                    name: name.clone(),
                    value: constant.clone(),
                    source: format!("the first `@autotune` config of `{}`", def.name),
                });
                self.world.args.push((name.clone(), constant));
            }
        }
        defaults
    }

    /// Binds call arguments to parameters as Python does (positional, keywords, defaults,
    /// `*args`, `**kwargs`). Defaults were evaluated when the function was defined.
    pub(crate) fn bind_parameters<'a>(
        &mut self,
        frame: &Env<'a>,
        defaults: &[(String, Value<'a>)],
        parameters: &'a ruff_python_ast::Parameters,
        args: Args<'a>,
        span: Span,
    ) -> Eval<()> {
        let named: Vec<_> = parameters
            .posonlyargs
            .iter()
            .chain(&parameters.args)
            .collect();
        let mut positional = args.positional.into_iter();
        for (param, (value, _)) in named.iter().zip(positional.by_ref()) {
            bind(frame, param.name().as_str(), value);
        }
        let rest: Vec<Value<'a>> = positional.map(|(value, _)| value).collect();
        match &parameters.vararg {
            Some(vararg) => bind(frame, vararg.name.as_str(), Value::tuple(rest)),
            None if !rest.is_empty() => {
                return Err(self.error(
                    Code::InvalidCall,
                    span,
                    format!("too many positional arguments ({} extra)", rest.len()),
                ));
            }
            None => {}
        }
        let mut extra = Vec::new();
        for (name, value, _) in args.keywords {
            let known = parameters
                .iter_non_variadic_params()
                .any(|param| param.name().as_str() == name);
            if known {
                bind(frame, &name, value);
            } else {
                extra.push((Value::str(&name), value));
            }
        }
        match &parameters.kwarg {
            Some(kwarg) => bind(frame, kwarg.name.as_str(), Value::Dict(Rc::new(extra))),
            None if !extra.is_empty() => {
                let names: Vec<String> = extra.iter().map(|(key, _)| key.python_str()).collect();
                return Err(self.error(
                    Code::InvalidCall,
                    span,
                    format!("unexpected keyword argument `{}`", names.join("`, `")),
                ));
            }
            None => {}
        }
        for param in parameters.iter_non_variadic_params() {
            let name = param.name().as_str();
            if frame.borrow().vars.contains_key(name) {
                continue;
            }
            match defaults.iter().find(|(param, _)| param == name) {
                Some((_, value)) => bind(frame, name, value.clone()),
                None => {
                    return Err(self.error(
                        Code::InvalidCall,
                        span,
                        format!("missing argument `{name}`"),
                    ));
                }
            }
        }
        Ok(())
    }

    pub(crate) fn attribute<'a>(
        &mut self,
        env: &Env<'a>,
        base: Value<'a>,
        name: &str,
        span: Span,
    ) -> Eval<Value<'a>> {
        let value = match (&base, name) {
            (Value::Poison, _) => return Err(Stop),
            (Value::Module(Module::Language), _) => match crate::dsl::language_dtype(name) {
                Some(dtype) => Value::DType(dtype),
                None if name == "GemmWarpPolicy" => Value::PolicyEnum,
                None => Value::ModuleFn(Module::Language, Rc::from(name)),
            },
            (Value::Module(Module::Tilelang), "language") => Value::Module(Module::Language),
            // `tilelang.layout` holds `Fragment`, `Layout` and `make_swizzled_layout`, which the
            // language module's calls implement.
            (Value::Module(Module::Tilelang), "layout") => Value::Module(Module::Language),
            // `tilelang.math.next_power_of_2`: the helpers of `tilelang.math` live beside `cdiv`.
            (Value::Module(Module::Tilelang), "math") => Value::Module(Module::Tilelang),
            (Value::Module(Module::Tilelang), "PassConfigKey") => Value::PassConfigKeys,
            // `tilelang.tvm` is TileLang's bundled TVM (`tilelang.tvm.DataType(dtype).bits`).
            (Value::Module(Module::Tilelang), "tvm") => Value::Module(Module::Tvm),
            (Value::Module(Module::Tilelang), _) => {
                Value::ModuleFn(Module::Tilelang, Rc::from(name))
            }
            (Value::Module(Module::Math), "pi") => Value::Float(std::f64::consts::PI),
            (Value::Module(Module::Math), "e") => Value::Float(std::f64::consts::E),
            (Value::Module(Module::Math), "tau") => Value::Float(std::f64::consts::TAU),
            (Value::Module(Module::Math), "inf") => Value::Float(f64::INFINITY),
            (Value::Module(Module::Math), _) => Value::ModuleFn(Module::Math, Rc::from(name)),
            (Value::Module(Module::Itertools), _) => {
                Value::ModuleFn(Module::Itertools, Rc::from(name))
            }
            (Value::Module(Module::Torch), _) => self.torch_attribute(name),
            (Value::Module(Module::Driver), _) => Value::ModuleFn(Module::Driver, Rc::from(name)),
            (Value::Module(Module::Iket), _) => Value::ModuleFn(Module::Iket, Rc::from(name)),
            (Value::Module(Module::Tvm), "tirx" | "tir") => Value::Module(Module::Tir),
            (Value::Module(Module::Tvm), "DataType") => {
                Value::ModuleFn(Module::Language, Rc::from("dtype"))
            }
            (Value::Module(Module::Tvm), _) => Value::ModuleFn(Module::Tvm, Rc::from(name)),
            (Value::Module(Module::Tir), _) => Value::ModuleFn(Module::Tir, Rc::from(name)),
            (Value::Module(Module::Functools), _) => {
                Value::ModuleFn(Module::Functools, Rc::from(name))
            }
            (Value::Module(Module::Os), "environ") => Value::Dict(Rc::new(Vec::new())),
            (Value::Module(Module::Os), _) => Value::ModuleFn(Module::Os, Rc::from(name)),
            (Value::Tensor(x), _) => self.tensor_attribute(x, name),
            (Value::Object(object), _) => {
                let object = Rc::clone(object);
                return self.object_attribute(&object, name, span);
            }
            (Value::Class(class), _) => {
                let class = Rc::clone(class);
                self.class_attribute(&class, name)
            }
            (Value::UserModule(module), _) => {
                let module = Rc::clone(module);
                self.user_module_attribute(env, &module, name)
            }
            (Value::Module(Module::Argparse), _) => {
                Value::ModuleFn(Module::Argparse, Rc::from(name))
            }
            (Value::ArgParser(_), _) | (Value::Dict(_), "get" | "keys" | "values" | "items") => {
                Value::Method(Box::new(base.clone()), Rc::from(name))
            }
            (Value::Str(_), _) | (Value::Int(_), "bit_length") => {
                Value::Method(Box::new(base.clone()), Rc::from(name))
            }
            // TileLang's dtypes are `str` subclasses with TVM's `DataType` fields.
            (Value::DType(dtype), "bits") => Value::Int(crate::value::dtype_bytes(*dtype) * 8),
            (Value::DType(dtype), "itemsize" | "bytes") => {
                Value::Int(crate::value::dtype_bytes(*dtype))
            }
            // The parsed arguments of an `argparse` parser, or the GPU's properties: a field
            // missing from tilec's model of them is its limit (a parser feature it does not
            // follow, a property it does not know), not the code's error.
            (Value::Namespace(fields), _) => match fields.iter().find(|(field, _)| field == name) {
                Some((_, value)) => value.clone(),
                None => {
                    let known: Vec<String> = fields
                        .iter()
                        .map(|(field, _)| format!("`{field}`"))
                        .collect();
                    return Err(self.error(
                        Code::NotAnalysed,
                        span,
                        format!(
                            "`{name}` is not among the fields tilec knows of this object ({})",
                            known.join(", ")
                        ),
                    ));
                }
            },
            (Value::PolicyEnum, "Square") => Value::Policy(WarpPolicy::Square),
            (Value::PolicyEnum, "FullRow") => Value::Policy(WarpPolicy::FullRow),
            (Value::PolicyEnum, "FullCol") => Value::Policy(WarpPolicy::FullCol),
            (Value::PassConfigKeys, key) => Value::str(&pass_config_key(key)),
            (Value::Buffer(buffer), "dtype") => match self.world.dtypes.get(*buffer) {
                Some(dtype) => Value::DType(*dtype),
                None => return Err(Stop),
            },
            (Value::Buffer(buffer), "data") => Value::DataPointer(self.world.storage_of(*buffer)),
            (Value::Buffer(buffer), "shape") => {
                let shape = self.world.shapes.get(*buffer).cloned().unwrap_or_default();
                Value::tuple(
                    shape
                        .into_iter()
                        .map(|extent| self.index_value(extent))
                        .collect(),
                )
            }
            (
                Value::Data {
                    dtype: Some(dtype), ..
                },
                "dtype",
            ) => Value::DType(*dtype),
            // An element or a slice of a buffer has the buffer's dtype (`A_shared[0, 0].dtype`).
            (Value::Region(region), "dtype") => match self.world.dtypes.get(region.buffer) {
                Some(dtype) => Value::DType(*dtype),
                None => return Err(Stop),
            },
            // `x.astype(dtype)` on a run-time value or a loop index: a cast, as
            // `T.Cast(dtype, x)`.
            (Value::Region(_) | Value::Data { .. } | Value::Index(_), "astype") => {
                Value::Method(Box::new(base.clone()), Rc::from(name))
            }
            (Value::Buffer(buffer), "astype")
                if self.world.kind(*buffer) == Some(EntityKind::Var) =>
            {
                Value::Method(Box::new(base.clone()), Rc::from(name))
            }
            // `k.compile(...)`, `k.get_tir(...)` and `k.get_kernel_source(...)` instantiate `k`.
            (
                Value::KernelRef { name, .. },
                "compile" | "get_tir" | "get_kernel_source" | "par_compile",
            ) => Value::KernelRef { name: name.clone() },
            (Value::Opaque(what), _) => Value::Opaque(what.clone()),
            _ => {
                return Err(self.error(
                    Code::MetaError,
                    span,
                    format!(
                        "{} has no attribute `{name}` that tilec knows",
                        base.describe()
                    ),
                ));
            }
        };
        Ok(value)
    }

    /// An index expression as a value: a plain int when it is constant.
    pub(crate) fn index_value<'a>(&self, id: tilec_ir::ExprId) -> Value<'a> {
        match self.world.exprs.as_int(id) {
            Some(value) => Value::Int(value),
            None => Value::Index(id),
        }
    }

    pub(crate) fn subscript<'a>(
        &mut self,
        env: &Env<'a>,
        base: Value<'a>,
        slice: &'a Expr,
        span: Span,
    ) -> Eval<Value<'a>> {
        match base {
            Value::Buffer(buffer) => self
                .buffer_subscript(env, buffer, slice, span)
                .map(Value::Region),
            Value::ModuleFn(Module::Language, name)
                if matches!(&*name, "Tensor" | "Buffer" | "StridedTensor") =>
            {
                let Expr::Tuple(parts) = slice else {
                    return Err(self.error(
                        Code::InvalidCall,
                        span,
                        format!("write `T.{name}[shape, dtype]`"),
                    ));
                };
                let values = self.eval_list(env, &parts.elts)?;
                let args = Args {
                    positional: values.into_iter().map(|v| (v, span)).collect(),
                    keywords: Vec::new(),
                    span,
                };
                self.dsl_call(&name, args)
            }
            Value::Tuple(_) | Value::List(_) | Value::Str(_) if matches!(slice, Expr::Slice(_)) => {
                let Expr::Slice(range) = slice else {
                    return Err(Stop);
                };
                self.slice_sequence(env, base, range, span)
            }
            Value::Tuple(items) | Value::List(items) => {
                let key = self.eval(env, slice)?;
                sequence_index(self, &items, key, span)
            }
            Value::Dict(entries) => {
                let key = self.eval(env, slice)?;
                // Equality as `==` has it: a TileLang dtype is a `str` subclass, so `T.float16`
                // finds the key "float16" (`str2dtype[dtype]`).
                entries
                    .iter()
                    .find(|(k, _)| crate::eval::values_equal(&key, k) == Some(true))
                    .map(|(_, v)| v.clone())
                    .ok_or_else(|| {
                        self.error(
                            Code::MetaError,
                            span,
                            format!(
                                "key {} not found",
                                key.to_const()
                                    .map_or_else(|| key.python_str(), |k| k.to_string())
                            ),
                        )
                    })
            }
            Value::Poison => Err(Stop),
            Value::Opaque(what) => Ok(Value::Opaque(what)),
            other => Err(self.error(
                Code::MetaError,
                span,
                format!("{} cannot be indexed", other.describe()),
            )),
        }
    }

    /// `items[a:b:c]` of a compile-time tuple, list or string, with Python's clamping.
    fn slice_sequence<'a>(
        &mut self,
        env: &Env<'a>,
        base: Value<'a>,
        range: &'a ruff_python_ast::ExprSlice,
        span: Span,
    ) -> Eval<Value<'a>> {
        let bound = |this: &mut Builder<'_>, expr: &'a Option<Box<Expr>>| -> Eval<Option<i64>> {
            match expr {
                None => Ok(None),
                Some(expr) => match this.eval(env, expr)? {
                    Value::Int(value) => Ok(Some(value)),
                    Value::None => Ok(None),
                    _ => Err(this.error(Code::MetaError, span, "slice bounds must be ints")),
                },
            }
        };
        let lower = bound(self, &range.lower)?;
        let upper = bound(self, &range.upper)?;
        let step = bound(self, &range.step)?.unwrap_or(1);
        if step == 0 {
            return Err(self.error(Code::MetaError, span, "slice step cannot be zero"));
        }
        let items: Vec<Value<'a>> = match &base {
            Value::Tuple(items) | Value::List(items) => items.to_vec(),
            Value::Str(text) => text.chars().map(|c| Value::str(&c.to_string())).collect(),
            _ => return Err(Stop),
        };
        let len = int_of_len(items.len());
        let clamp = |index: Option<i64>, default: i64, low: i64, high: i64| {
            index.map_or(default, |i| {
                if i < 0 { i + len } else { i }.clamp(low, high)
            })
        };
        let picked: Vec<Value<'a>> = if step > 0 {
            let (start, stop) = (clamp(lower, 0, 0, len), clamp(upper, len, 0, len));
            (start..stop)
                .step_by(usize::try_from(step).unwrap_or(usize::MAX))
                .filter_map(|i| usize::try_from(i).ok().and_then(|i| items.get(i)).cloned())
                .collect()
        } else {
            let (start, stop) = (
                clamp(lower, len - 1, -1, len - 1),
                clamp(upper, -1, -1, len - 1),
            );
            let mut out = Vec::new();
            let mut i = start;
            while i > stop {
                out.extend(usize::try_from(i).ok().and_then(|i| items.get(i)).cloned());
                i += step;
            }
            out
        };
        Ok(match base {
            Value::Tuple(_) => Value::tuple(picked),
            Value::List(_) => Value::List(Rc::new(picked)),
            _ => {
                let text: String = picked.iter().map(Value::python_str).collect();
                Value::str(&text)
            }
        })
    }

    /// `A[i, j]`, `A[a:b, :]`: a region whose point dimensions have no extent yet.
    fn buffer_subscript<'a>(
        &mut self,
        env: &Env<'a>,
        buffer: tilec_ir::EntityId,
        slice: &'a Expr,
        span: Span,
    ) -> Eval<Region> {
        let parts: Vec<&'a Expr> = match slice {
            Expr::Tuple(tuple) => tuple.elts.iter().collect(),
            other => vec![other],
        };
        let shape = self.world.shapes.get(buffer).cloned().unwrap_or_default();
        if self.world.kind(buffer) == Some(EntityKind::Var) {
            return Err(self.error(
                Code::InvalidCall,
                span,
                "a `T.alloc_var` scalar is read and written by name, not indexed",
            ));
        }
        if parts.len() != shape.len() {
            let name = self.world.name(buffer).to_owned();
            return Err(self.error(
                Code::ShapeMismatch,
                span,
                format!(
                    "`{name}` has {} dimension(s) but is indexed with {}",
                    shape.len(),
                    parts.len()
                ),
            ));
        }
        let mut dims = Vec::with_capacity(parts.len());
        for (part, &extent) in parts.into_iter().zip(&shape) {
            dims.push(self.region_dim(env, part, extent)?);
        }
        Ok(Region { buffer, dims })
    }

    fn region_dim<'a>(
        &mut self,
        env: &Env<'a>,
        part: &'a Expr,
        extent: tilec_ir::ExprId,
    ) -> Eval<RegionDim> {
        let span = expr_span(part);
        let Expr::Slice(slice) = part else {
            let value = self.eval(env, part)?;
            let Some(start) = self.runtime_index(&value, span) else {
                return Err(self.error(
                    Code::UnsupportedSyntax,
                    span,
                    format!(
                        "an index must be an integer expression, found {}",
                        value.describe()
                    ),
                ));
            };
            return Ok(RegionDim {
                start,
                extent: None,
            });
        };
        if slice.step.is_some() {
            return Err(self.unsupported(span, "a slice with a step"));
        }
        let bound = |this: &mut Builder<'_>,
                     expr: &'a Option<Box<Expr>>|
         -> Eval<Option<tilec_ir::ExprId>> {
            match expr {
                None => Ok(None),
                Some(expr) => {
                    let value = this.eval(env, expr)?;
                    match this.runtime_index(&value, span) {
                        Some(id) => Ok(Some(id)),
                        None => Err(this.error(
                            Code::UnsupportedSyntax,
                            span,
                            "slice bounds must be integer expressions",
                        )),
                    }
                }
            }
        };
        let lower = bound(self, &slice.lower)?;
        let upper = bound(self, &slice.upper)?;
        let start = lower.unwrap_or_else(|| self.world.exprs.int(0));
        let stop = upper.unwrap_or(extent);
        let length = self.world.exprs.sub(stop, start);
        Ok(RegionDim {
            start,
            extent: Some(length),
        })
    }

    /// Methods of the values tilec models: an argument parser records `add_argument` defaults and
    /// `parse_args()` returns them, which is what a kernel gets when its script runs without flags.
    fn method_call<'a>(
        &mut self,
        receiver: Value<'a>,
        name: &str,
        args: Args<'a>,
    ) -> Eval<Value<'a>> {
        if let Value::Dict(entries) = &receiver {
            return Ok(dict_method(entries, name, &args));
        }
        if let Value::Str(text) = &receiver {
            return self.str_method(text, name, args);
        }
        if name == "astype"
            && matches!(
                receiver,
                Value::Region(_) | Value::Data { .. } | Value::Buffer(_) | Value::Index(_)
            )
        {
            let dtype = self.dtype_arg(&args, 0, "dtype")?;
            let (value, _) = self.data_expr(&receiver, args.span)?;
            return Ok(self.data(tilec_ir::DataExpr::Cast { dtype, value }, Some(dtype)));
        }
        if let (Value::Int(value), "bit_length") = (&receiver, name) {
            return Ok(Value::Int(i64::from(
                64 - value.unsigned_abs().leading_zeros(),
            )));
        }
        let Value::ArgParser(arguments) = receiver else {
            return Err(self.error(
                Code::NotAnalysed,
                args.span,
                format!("`.{name}(...)` is not supported by tilec"),
            ));
        };
        match name {
            "add_argument" => {
                let flags: Vec<String> = args
                    .positional
                    .iter()
                    .filter_map(|(value, _)| match value {
                        Value::Str(flag) => Some(flag.to_string()),
                        _ => None,
                    })
                    .collect();
                let dest = match args.keyword("dest") {
                    Some(Value::Str(dest)) => dest.to_string(),
                    _ => {
                        let long = flags
                            .iter()
                            .find(|flag| flag.starts_with("--"))
                            .or(flags.first());
                        long.map_or_else(String::new, |flag| {
                            flag.trim_start_matches('-').replace('-', "_")
                        })
                    }
                };
                let default = match args.keyword("default") {
                    Some(value) => value.clone(),
                    None if args
                        .keyword("action")
                        .is_some_and(|a| matches!(a, Value::Str(s) if &**s == "store_true")) =>
                    {
                        Value::Bool(false)
                    }
                    None => Value::None,
                };
                arguments.borrow_mut().push((dest, default));
                Ok(Value::None)
            }
            "parse_args" | "parse_known_args" => {
                let namespace = Value::Namespace(Rc::new(arguments.borrow().clone()));
                Ok(if name == "parse_args" {
                    namespace
                } else {
                    Value::tuple(vec![namespace, Value::List(Rc::new(Vec::new()))])
                })
            }
            _ => Ok(Value::None),
        }
    }

    /// `driver.get_num_sms()`, `torch.cuda.get_device_capability()` and their kin answer for the
    /// target GPU; what they do not tell is unknown.
    fn driver_call<'a>(&self, name: &str) -> Value<'a> {
        let facts = self.target;
        let capability = || {
            let (major, minor) = facts.compute_capability;
            Value::tuple(vec![Value::Int(major), Value::Int(minor)])
        };
        // Every name answered here is in `DEVICE_QUERIES`, which decides whether a file depends
        // on the target.
        match name {
            "get_num_sms" => Value::Int(facts.num_sms),
            "get_device_capability" => capability(),
            "get_device_name" => Value::str(facts.device_name),
            "get_max_dynamic_shared_size_bytes" => Value::Int(facts.max_dynamic_shared_bytes),
            "is_available" => Value::Bool(true),
            "device_count" => Value::Int(1),
            "current_device" => Value::Int(0),
            "get_device_properties" => device_properties(&facts),
            other => Value::Opaque(Rc::from(format!("the result of `{other}()`"))),
        }
    }

    /// `functools`: `lru_cache`, `cache` and `wraps` decorate without changing what a call
    /// computes, so they pass the function through; `partial` binds leading arguments.
    fn functools_call<'a>(&mut self, name: &str, args: Args<'a>) -> Eval<Value<'a>> {
        match name {
            "partial" => {
                let mut positional = args.positional.into_iter().map(|(value, _)| value);
                let Some(function) = positional.next() else {
                    return Err(self.error(
                        Code::InvalidCall,
                        args.span,
                        "`functools.partial` needs a function",
                    ));
                };
                Ok(Value::Partial(Rc::new(crate::value::Partial {
                    function,
                    positional: positional.collect(),
                    keywords: args
                        .keywords
                        .into_iter()
                        .map(|(key, value, _)| (key, value))
                        .collect(),
                })))
            }
            "lru_cache" | "cache" | "wraps" | "update_wrapper" => {
                match args.positional.into_iter().next() {
                    // `@lru_cache` bare, or `cache(f)`: the function itself.
                    Some((function @ (Value::Function(_) | Value::KernelRef { .. }), _))
                        if name != "wraps" =>
                    {
                        Ok(function)
                    }
                    // `@lru_cache(maxsize=1)`, `@wraps(f)`: a decorator that returns its argument.
                    _ => Ok(Value::ModuleFn(Module::Functools, Rc::from("cache"))),
                }
            }
            _ => Err(self.unsupported(args.span, &format!("`functools.{name}`"))),
        }
    }

    /// The `str` methods kernel factories use to build names and parse dtypes.
    fn str_method<'a>(&mut self, text: &str, name: &str, args: Args<'a>) -> Eval<Value<'a>> {
        let arg = |index: usize| match args.positional.get(index) {
            Some((Value::Str(s), _)) => Some(s.to_string()),
            _ => None,
        };
        let value = match name {
            "join" => {
                let items = match args.positional.first() {
                    Some((value, _)) => self.iterate(value.clone(), args.span)?,
                    None => Vec::new(),
                };
                let parts: Option<Vec<String>> = items
                    .iter()
                    .map(|item| match item {
                        Value::Str(part) => Some(part.to_string()),
                        Value::DType(dtype) => Some(dtype.name().to_owned()),
                        _ => None,
                    })
                    .collect();
                if let Some(parts) = &parts {
                    let len: u128 = parts.iter().map(|part| part.len() as u128).sum::<u128>()
                        + text.len() as u128 * parts.len() as u128;
                    self.allocate(len, "string", args.span)?;
                }
                parts.map(|parts| Value::str(&parts.join(text)))
            }
            "isdigit" | "isnumeric" | "isdecimal" => Some(Value::Bool(
                !text.is_empty() && text.chars().all(|c| c.is_ascii_digit()),
            )),
            "upper" => Some(Value::str(&text.to_uppercase())),
            "lower" => Some(Value::str(&text.to_lowercase())),
            "strip" => Some(Value::str(text.trim())),
            "startswith" => arg(0).map(|prefix| Value::Bool(text.starts_with(&prefix))),
            "endswith" => arg(0).map(|suffix| Value::Bool(text.ends_with(&suffix))),
            "replace" => match (arg(0), arg(1)) {
                (Some(from), Some(to)) => {
                    let matches = text.matches(from.as_str()).count() as u128;
                    let len = text.len() as u128 + matches * to.len() as u128;
                    self.allocate(len, "string", args.span)?;
                    Some(Value::str(&text.replace(&from, &to)))
                }
                _ => None,
            },
            "split" => {
                let parts: Vec<Value<'a>> = match arg(0) {
                    Some(separator) => text.split(separator.as_str()).map(Value::str).collect(),
                    None => text.split_whitespace().map(Value::str).collect(),
                };
                Some(Value::List(Rc::new(parts)))
            }
            _ => None,
        };
        value.ok_or_else(|| {
            self.error(
                Code::NotAnalysed,
                args.span,
                format!("`str.{name}` with these arguments is not supported by tilec"),
            )
        })
    }

    fn tilelang_call<'a>(&mut self, name: &str, args: Args<'a>) -> Eval<Value<'a>> {
        match name {
            "cdiv" => self.dsl_call("ceildiv", args),
            // `tilelang.DataType` is TVM's: a dtype from its name, with `.bits`.
            "DataType" => self.dsl_call("dtype", args),
            "next_power_of_2" => match args.positional.first() {
                Some((Value::Int(n), _)) => {
                    let n = (*n).max(1);
                    u64::try_from(n)
                        .ok()
                        .and_then(u64::checked_next_power_of_two)
                        .and_then(|p| i64::try_from(p).ok())
                        .map(Value::Int)
                        .ok_or_else(|| self.error(Code::MetaError, args.span, "integer overflow"))
                }
                _ => Err(self.error(
                    Code::MetaError,
                    args.span,
                    "`next_power_of_2` needs an int known at compile time",
                )),
            },
            // Decorators and compile calls are handled where kernels are found; evaluated elsewhere
            // (a nested helper decorated with `tilelang.jit`) they leave the function unchanged.
            "jit" | "autotune" | "compile" | "lazy_jit" => Ok(args
                .positional
                .into_iter()
                .next()
                .map_or(Value::None, |(v, _)| v)),
            _ => Err(self.error(
                Code::NotAnalysed,
                args.span,
                format!("`tilelang.{name}` is not supported by tilec"),
            )),
        }
    }

    /// `dict(pairs)`, `dict(**kwargs)`, `dict(mapping, key=value)`: later keys replace earlier ones.
    fn dict_builtin<'a>(&mut self, args: Args<'a>) -> Eval<Value<'a>> {
        let span = args.span;
        let mut entries: Vec<(Value<'a>, Value<'a>)> = Vec::new();
        let mut insert = |key: Value<'a>, value: Value<'a>| {
            let same = |k: &Value<'a>| match (k.to_const(), key.to_const()) {
                (Some(a), Some(b)) => a == b,
                _ => false,
            };
            match entries.iter_mut().find(|(k, _)| same(k)) {
                Some(slot) => slot.1 = value,
                None => entries.push((key, value)),
            }
        };
        if let Some((first, _)) = args.positional.into_iter().next() {
            let pairs = match first {
                Value::Dict(existing) => existing.to_vec(),
                other => {
                    let mut pairs = Vec::new();
                    for item in self.iterate(other, span)? {
                        let pair = self.iterate(item, span)?;
                        let [key, value]: [Value<'a>; 2] = pair.try_into().map_err(|_| {
                            self.error(Code::MetaError, span, "`dict` needs (key, value) pairs")
                        })?;
                        pairs.push((key, value));
                    }
                    pairs
                }
            };
            for (key, value) in pairs {
                insert(key, value);
            }
        }
        for (key, value, _) in args.keywords {
            insert(Value::str(&key), value);
        }
        Ok(Value::Dict(Rc::new(entries)))
    }

    /// `itertools.product(*iterables, repeat=1)`, the function autotune configuration helpers use.
    fn itertools_call<'a>(&mut self, name: &str, args: Args<'a>) -> Eval<Value<'a>> {
        let span = args.span;
        if name != "product" {
            return Err(self.unsupported(span, &format!("`itertools.{name}`")));
        }
        let repeat = args
            .keywords
            .iter()
            .find(|(key, ..)| key == "repeat")
            .map_or(Some(1), |(_, value, _)| match value {
                Value::Int(n) => usize::try_from(*n).ok(),
                _ => None,
            })
            .ok_or_else(|| {
                self.error(Code::MetaError, span, "`repeat` must be a non-negative int")
            })?;
        let mut pools = Vec::new();
        for (value, _) in args.positional {
            pools.push(self.iterate(value, span)?);
        }
        if pools.iter().any(Vec::is_empty) && repeat > 0 {
            return Ok(Value::List(Rc::new(Vec::new())));
        }
        // The result is sized before anything is built: `repeat=10**9` over one pool is a billion
        // copies of it, and its rows as many elements each. Each pool contributes `len ** repeat`
        // rows, computed as a power rather than by `repeat` multiplications (a one-element pool
        // repeated a billion times is one row, found at once).
        let rows_count = pools.iter().try_fold(1u128, |rows, pool| {
            let factor = match (pool.len(), repeat) {
                (_, 0) | (1, _) => 1,
                (len, repeat) => u32::try_from(repeat)
                    .ok()
                    .and_then(|repeat| (len as u128).checked_pow(repeat))?,
            };
            let rows = rows.saturating_mul(factor);
            (rows <= MAX_PRODUCT_ROWS).then_some(rows)
        });
        let Some(rows_count) = rows_count else {
            return Err(self.limit(
                span,
                format!(
                    "this product would have more than {} rows; tilec evaluates products of up \
                     to that many at compile time",
                    crate::builder::thousands_u128(MAX_PRODUCT_ROWS)
                ),
            ));
        };
        let row_len = (pools.len() as u128).saturating_mul(repeat as u128);
        let elements = rows_count.saturating_mul(row_len);
        self.allocate(elements.max(row_len), "product", span)?;
        let pools: Vec<Vec<Value<'a>>> = std::iter::repeat_n(pools, repeat).flatten().collect();
        let mut rows: Vec<Vec<Value<'a>>> = vec![Vec::new()];
        for pool in &pools {
            rows = rows
                .into_iter()
                .flat_map(|row| {
                    pool.iter().map(move |item| {
                        let mut next = row.clone();
                        next.push(item.clone());
                        next
                    })
                })
                .collect();
            if rows.len() > 1_000_000 {
                return Err(self.error(
                    Code::MetaError,
                    span,
                    "product too large to build at compile time",
                ));
            }
        }
        Ok(Value::List(Rc::new(
            rows.into_iter().map(Value::tuple).collect(),
        )))
    }

    fn math_call<'a>(&mut self, name: &str, args: Args<'a>) -> Eval<Value<'a>> {
        let span = args.span;
        if name == "prod" {
            let items = match args.positional.into_iter().next() {
                Some((value, _)) => self.iterate(value, span)?,
                None => Vec::new(),
            };
            let mut product = Value::Int(1);
            for item in items {
                product = self.binary(ruff_python_ast::Operator::Mult, product, item, span)?;
            }
            return Ok(product);
        }
        let numbers: Option<Vec<f64>> = args
            .positional
            .iter()
            .map(|(value, _)| match value {
                Value::Int(v) => Some(*v as f64),
                Value::Float(v) => Some(*v),
                Value::Bool(v) => Some(f64::from(u8::from(*v))),
                _ => None,
            })
            .collect();
        let Some(numbers) = numbers else {
            let runtime = args
                .positional
                .iter()
                .any(|(value, _)| crate::eval::is_runtime(value));
            let mut diagnostic = tilec_ir::Diagnostic::error(
                Code::UnsupportedSyntax,
                tilec_ir::Anchor::Span(span),
                format!(
                    "`math.{name}` is host-side Python: inside a kernel it cannot take a tensor value"
                ),
            );
            if runtime && tilec_ir::Intrinsic::from_name(name).is_some() {
                diagnostic = diagnostic.with_help(format!("use `T.{name}` instead"));
            } else if runtime {
                diagnostic = diagnostic.with_help(
                    "use the TileLang operation of the same name (`T.<name>`), if there is one",
                );
            }
            return Err(self.report(diagnostic));
        };
        // The arguments again, where they are ints (or bools), for the functions that must be
        // exact on them.
        let ints: Vec<i64> = args
            .positional
            .iter()
            .map_while(|(value, _)| match value {
                Value::Int(v) => Some(*v),
                Value::Bool(v) => Some(i64::from(*v)),
                _ => None,
            })
            .collect();
        let ints = if ints.len() == numbers.len() {
            ints
        } else {
            Vec::new()
        };
        if let ("ceil" | "floor" | "trunc", [x]) = (name, numbers.as_slice())
            && ints.is_empty()
        {
            let integral = match name {
                "ceil" => x.ceil(),
                "floor" => x.floor(),
                _ => x.trunc(),
            };
            return int_of_float(integral)
                .map(Value::Int)
                .ok_or_else(|| float_out_of_range(self, &format!("math.{name}"), *x, span));
        }
        let unary = |f: fn(f64) -> f64| numbers.first().map(|&x| Value::Float(f(x)));
        let result = match name {
            "sqrt" => unary(f64::sqrt),
            "exp" => unary(f64::exp),
            "log" if numbers.len() == 2 => Some(Value::Float(numbers[0].ln() / numbers[1].ln())),
            "log" => unary(f64::ln),
            "log2" => unary(f64::log2),
            "log10" => unary(f64::log10),
            "sin" => unary(f64::sin),
            "cos" => unary(f64::cos),
            "tanh" => unary(f64::tanh),
            "fabs" => unary(f64::abs),
            // An int is its own ceiling, floor and truncation, exactly (through `f64` it would
            // lose its low bits past 2^53).
            "ceil" | "floor" | "trunc" if ints.len() == 1 => Some(Value::Int(ints[0])),
            "pow" if numbers.len() == 2 => Some(Value::Float(numbers[0].powf(numbers[1]))),
            // Python's `isqrt` and `gcd` take ints only, and are computed on them exactly.
            "isqrt" if ints.len() == 1 => u64::try_from(ints[0])
                .ok()
                .and_then(|x| i64::try_from(x.isqrt()).ok())
                .map(Value::Int),
            "gcd" if ints.len() == numbers.len() => ints
                .iter()
                .try_fold(0i64, |a, &b| gcd(a, b))
                .map(Value::Int),
            "prod" => None,
            _ => None,
        };
        result.ok_or_else(|| {
            self.error(
                Code::NotAnalysed,
                span,
                format!("`math.{name}` with these arguments is not supported by tilec"),
            )
        })
    }

    fn builtin<'a>(&mut self, builtin: Builtin, args: Args<'a>) -> Eval<Value<'a>> {
        if builtin == Builtin::Dict {
            return self.dict_builtin(args);
        }
        let span = args.span;
        // `sorted(items, reverse=True)`: sorted, then reversed; a `key=` function is not followed.
        let mut reverse = false;
        if builtin == Builtin::Sorted {
            for (name, value, _) in &args.keywords {
                match (name.as_str(), value.truthy()) {
                    ("reverse", Some(flag)) => reverse = flag,
                    _ => {
                        return Err(self.error(
                            Code::NotAnalysed,
                            span,
                            format!("`sorted` with `{name}=` is not evaluated by tilec"),
                        ));
                    }
                }
            }
        }
        let mut values: Vec<Value<'a>> = args
            .positional
            .into_iter()
            .map(|(value, _)| value)
            .collect();
        match builtin {
            Builtin::Print => Ok(Value::None),
            Builtin::Any | Builtin::All | Builtin::Sorted | Builtin::Reversed => {
                let Some(iterable) = values.into_iter().next() else {
                    return Err(self.error(
                        Code::InvalidCall,
                        span,
                        "this builtin takes an iterable",
                    ));
                };
                let items = self.iterate(iterable, span)?;
                let result = self.sequence_builtin(builtin, items, span)?;
                match result {
                    Value::List(items) if reverse => {
                        Ok(Value::List(Rc::new(items.iter().rev().cloned().collect())))
                    }
                    other => Ok(other),
                }
            }
            // Called through `Builder::call`, which has the scope attributes need; reached here
            // only through an alias (`f = getattr; f(...)`), which tilec does not follow.
            Builtin::GetAttr | Builtin::HasAttr => Err(self.error(
                Code::NotAnalysed,
                span,
                "`getattr` and `hasattr` are followed only when called by name",
            )),
            Builtin::Len => match values.first() {
                Some(Value::Tuple(items) | Value::List(items)) => {
                    Ok(Value::Int(int_of_len(items.len())))
                }
                Some(Value::Dict(entries)) => Ok(Value::Int(int_of_len(entries.len()))),
                Some(Value::Str(text)) => Ok(Value::Int(int_of_len(text.chars().count()))),
                Some(Value::Range { start, stop, step }) => {
                    Ok(Value::Int(crate::value::range_len(*start, *stop, *step)))
                }
                Some(Value::Buffer(buffer)) => Ok(Value::Int(int_of_len(
                    self.world.shapes.get(*buffer).map_or(0, Vec::len),
                ))),
                Some(Value::Tensor(x)) => match x.shape.as_deref() {
                    Some([Some(first), ..]) => Ok(Value::Int(*first)),
                    _ => Err(self.error(
                        Code::MetaError,
                        span,
                        "the length of this tensor is not known at compile time",
                    )),
                },
                _ => Err(self.error(
                    Code::MetaError,
                    span,
                    "`len` needs a sequence known at compile time",
                )),
            },
            Builtin::Range => {
                let ints: Option<Vec<i64>> = values
                    .iter()
                    .map(|value| match value {
                        Value::Int(v) => Some(*v),
                        _ => None,
                    })
                    .collect();
                match ints.as_deref() {
                    Some([stop]) => Ok(Value::Range {
                        start: 0,
                        stop: *stop,
                        step: 1,
                    }),
                    Some([start, stop]) => Ok(Value::Range {
                        start: *start,
                        stop: *stop,
                        step: 1,
                    }),
                    Some([start, stop, step]) if *step != 0 => Ok(Value::Range {
                        start: *start,
                        stop: *stop,
                        step: *step,
                    }),
                    _ => self.dsl_call(
                        "serial",
                        Args {
                            positional: values.into_iter().map(|v| (v, span)).collect(),
                            keywords: Vec::new(),
                            span,
                        },
                    ),
                }
            }
            Builtin::Min | Builtin::Max => {
                if values.len() == 1 {
                    values = self.iterate(values.remove(0), span)?;
                }
                self.min_max(builtin == Builtin::Min, values, span)
            }
            Builtin::Abs => match values.first() {
                Some(Value::Int(v)) => Ok(Value::Int(v.saturating_abs())),
                Some(Value::Float(v)) => Ok(Value::Float(v.abs())),
                Some(_) => self.dsl_call(
                    "abs",
                    Args {
                        positional: values.into_iter().map(|v| (v, span)).collect(),
                        keywords: Vec::new(),
                        span,
                    },
                ),
                None => Err(self.error(Code::InvalidCall, span, "`abs` takes one argument")),
            },
            Builtin::Int => match values.first() {
                Some(Value::Int(v)) => Ok(Value::Int(*v)),
                Some(Value::Bool(v)) => Ok(Value::Int(i64::from(*v))),
                Some(Value::Float(v)) if v.is_finite() => int_of_float(v.trunc())
                    .map(Value::Int)
                    .ok_or_else(|| float_out_of_range(self, "int", *v, span)),
                Some(Value::Str(text)) => text.trim().parse().map(Value::Int).map_err(|_| {
                    self.error(
                        Code::MetaError,
                        span,
                        format!("invalid literal for int(): {text:?}"),
                    )
                }),
                Some(Value::Index(id)) => Ok(Value::Index(*id)),
                _ => Err(self.error(
                    Code::MetaError,
                    span,
                    "`int` needs a number known at compile time",
                )),
            },
            Builtin::Float => match values.first() {
                Some(Value::Int(v)) => Ok(Value::Float(*v as f64)),
                Some(Value::Float(v)) => Ok(Value::Float(*v)),
                Some(Value::Str(text)) => match text.trim() {
                    "inf" => Ok(Value::Float(f64::INFINITY)),
                    "-inf" => Ok(Value::Float(f64::NEG_INFINITY)),
                    other => other.parse().map(Value::Float).map_err(|_| {
                        self.error(
                            Code::MetaError,
                            span,
                            format!("could not convert string to float: {text:?}"),
                        )
                    }),
                },
                _ => Err(self.error(
                    Code::MetaError,
                    span,
                    "`float` needs a number known at compile time",
                )),
            },
            Builtin::Bool => match values.first().map(Value::truthy) {
                Some(Some(value)) => Ok(Value::Bool(value)),
                None => Ok(Value::Bool(false)),
                Some(None) => Err(self.error(
                    Code::MetaError,
                    span,
                    "`bool` of a runtime value is not known at compile time",
                )),
            },
            // `str()` of a value tilec cannot evaluate is unknown too: a made-up text such as
            // "<a value tilec cannot evaluate>" would flow on as if it were the program's own
            // string (a dtype name, say) and be reported as the user's error where it lands.
            Builtin::Str => match values.first() {
                Some(unknown @ Value::Opaque(_)) => Ok(unknown.clone()),
                value => Ok(Value::str(
                    &value.map(Value::python_str).unwrap_or_default(),
                )),
            },
            Builtin::Tuple | Builtin::List => {
                let items = match values.into_iter().next() {
                    Some(value) => self.iterate(value, span)?,
                    None => Vec::new(),
                };
                Ok(if builtin == Builtin::Tuple {
                    Value::tuple(items)
                } else {
                    Value::List(Rc::new(items))
                })
            }
            Builtin::Sum => {
                let items = match values.into_iter().next() {
                    Some(value) => self.iterate(value, span)?,
                    None => Vec::new(),
                };
                let mut total = Value::Int(0);
                for item in items {
                    total = self.binary(ruff_python_ast::Operator::Add, total, item, span)?;
                }
                Ok(total)
            }
            Builtin::Round => match values.first() {
                Some(Value::Float(v)) => int_of_float(v.round_ties_even())
                    .map(Value::Int)
                    .ok_or_else(|| float_out_of_range(self, "round", *v, span)),
                Some(Value::Int(v)) => Ok(Value::Int(*v)),
                _ => Err(self.error(
                    Code::MetaError,
                    span,
                    "`round` needs a number known at compile time",
                )),
            },
            Builtin::Pow => {
                let mut values = values.into_iter();
                match (values.next(), values.next()) {
                    (Some(base), Some(exponent)) => {
                        self.binary(ruff_python_ast::Operator::Pow, base, exponent, span)
                    }
                    _ => Err(self.error(Code::InvalidCall, span, "`pow` takes two arguments")),
                }
            }
            Builtin::Divmod => match (values.first(), values.get(1)) {
                (Some(Value::Int(a)), Some(Value::Int(b))) if *b != 0 => {
                    let quotient = python_floordiv(*a, *b).unwrap_or(0);
                    let remainder = python_mod(*a, *b).unwrap_or(0);
                    Ok(Value::tuple(vec![
                        Value::Int(quotient),
                        Value::Int(remainder),
                    ]))
                }
                _ => Err(self.error(
                    Code::MetaError,
                    span,
                    "`divmod` needs two non-zero ints known at compile time",
                )),
            },
            Builtin::Enumerate => {
                let items = match values.into_iter().next() {
                    Some(value) => self.iterate(value, span)?,
                    None => Vec::new(),
                };
                Ok(Value::List(Rc::new(
                    items
                        .into_iter()
                        .enumerate()
                        .map(|(k, v)| Value::tuple(vec![Value::Int(int_of_len(k)), v]))
                        .collect(),
                )))
            }
            Builtin::Zip => {
                let mut columns = Vec::new();
                for value in values {
                    columns.push(self.iterate(value, span)?);
                }
                let rows = columns.iter().map(Vec::len).min().unwrap_or(0);
                Ok(Value::List(Rc::new(
                    (0..rows)
                        .map(|row| {
                            Value::tuple(columns.iter().map(|column| column[row].clone()).collect())
                        })
                        .collect(),
                )))
            }
            Builtin::IsInstance => {
                let (Some(value), Some(types)) = (values.first(), values.get(1)) else {
                    return Err(self.error(
                        Code::InvalidCall,
                        span,
                        "`isinstance` takes two arguments",
                    ));
                };
                let types = match types {
                    Value::Tuple(items) | Value::List(items) => items.to_vec(),
                    single => vec![single.clone()],
                };
                let mut known = true;
                let found = types.iter().any(|ty| match is_instance(value, ty) {
                    Some(found) => found,
                    None => {
                        known = false;
                        false
                    }
                });
                if found || known {
                    Ok(Value::Bool(found))
                } else {
                    Err(self.error(
                        Code::MetaError,
                        span,
                        "`isinstance` of this value is not known at compile time",
                    ))
                }
            }
            // Handled before the arguments lose their keywords.
            Builtin::Dict => Err(Stop),
        }
    }

    pub(crate) fn min_max<'a>(
        &mut self,
        is_min: bool,
        values: Vec<Value<'a>>,
        span: Span,
    ) -> Eval<Value<'a>> {
        let mut values = values.into_iter();
        let Some(mut best) = values.next() else {
            return Err(self.error(Code::InvalidCall, span, "`min`/`max` of an empty sequence"));
        };
        for value in values {
            best = match (&best, &value) {
                (Value::Int(a), Value::Int(b)) => {
                    Value::Int(if is_min { *a.min(b) } else { *a.max(b) })
                }
                (Value::Int(_) | Value::Float(_), Value::Int(_) | Value::Float(_)) => {
                    let a = best.to_const().and_then(|c| c.as_f64()).unwrap_or(0.0);
                    let b = value.to_const().and_then(|c| c.as_f64()).unwrap_or(0.0);
                    if (is_min && b < a) || (!is_min && b > a) {
                        value
                    } else {
                        best
                    }
                }
                _ => match (self.index_expr(&best), self.index_expr(&value)) {
                    (Some(a), Some(b)) => Value::Index(if is_min {
                        self.world.exprs.min(a, b)
                    } else {
                        self.world.exprs.max(a, b)
                    }),
                    _ => {
                        let name = if is_min { "min" } else { "max" };
                        let args = Args {
                            positional: vec![(best, span), (value, span)],
                            keywords: Vec::new(),
                            span,
                        };
                        self.intrinsic(name, args)?
                    }
                },
            };
        }
        Ok(best)
    }
}

/// `isinstance(value, ty)` for the builtin types; `None` when tilec cannot tell.
fn is_instance<'a>(value: &Value<'a>, ty: &Value<'a>) -> Option<bool> {
    if let Value::Class(class) = ty {
        return match value {
            Value::Object(object) => Some(object.class.derives_from(class)),
            Value::Opaque(_) | Value::Poison => None,
            _ => Some(false),
        };
    }
    let Value::Builtin(ty) = ty else {
        return None;
    };
    Some(match (ty, value) {
        (Builtin::Int, Value::Int(_) | Value::Bool(_) | Value::Index(_)) => true,
        (Builtin::Bool, Value::Bool(_)) => true,
        (Builtin::Float, Value::Float(_)) => true,
        // TileLang's dtypes are `str` subclasses.
        (Builtin::Str, Value::Str(_) | Value::DType(_)) => true,
        (Builtin::Tuple, Value::Tuple(_)) => true,
        (Builtin::List, Value::List(_)) => true,
        (Builtin::Dict, Value::Dict(_)) => true,
        (_, Value::Opaque(_) | Value::Poison | Value::Tensor(_) | Value::Data { .. }) => {
            return None;
        }
        (Builtin::Int | Builtin::Bool | Builtin::Float | Builtin::Str, _) => false,
        (Builtin::Tuple | Builtin::List | Builtin::Dict, _) => false,
        _ => return None,
    })
}

/// `dict.get`, `keys`, `values` and `items` on a compile-time dict.
fn dict_method<'a>(entries: &[(Value<'a>, Value<'a>)], name: &str, args: &Args<'a>) -> Value<'a> {
    match name {
        "get" => {
            let found = args.get(0, "key").and_then(|needle| {
                entries
                    .iter()
                    .find(|(key, _)| crate::eval::values_equal(needle, key) == Some(true))
            });
            match found {
                Some((_, value)) => value.clone(),
                None => args.get(1, "default").cloned().unwrap_or(Value::None),
            }
        }
        "keys" => Value::List(Rc::new(
            entries.iter().map(|(key, _)| key.clone()).collect(),
        )),
        "values" => Value::List(Rc::new(
            entries.iter().map(|(_, value)| value.clone()).collect(),
        )),
        _ => Value::List(Rc::new(
            entries
                .iter()
                .map(|(key, value)| Value::tuple(vec![key.clone(), value.clone()]))
                .collect(),
        )),
    }
}

/// The error of `int(value)`, `round(value)` or `math.floor(value)` (`ceil`, `trunc`) where the float has no 64-bit int: Python raises
/// for NaN and the infinities, and past 64 bits has ints that tilec does not.
fn float_out_of_range(builder: &mut Builder<'_>, function: &str, value: f64, span: Span) -> Stop {
    builder.error(
        Code::MetaError,
        span,
        format!("`{function}({value})` is not an int tilec can hold (its ints are 64-bit)"),
    )
}

/// The greatest common divisor, never negative as in Python; `None` only for `gcd(-2^63, 0)`
/// and `gcd(-2^63, -2^63)`, whose `2^63` is past tilec's 64-bit ints (`abs` and `%` overflowed
/// there).
fn gcd(a: i64, b: i64) -> Option<i64> {
    let (mut a, mut b) = (a.unsigned_abs(), b.unsigned_abs());
    while b != 0 {
        (a, b) = (b, a % b);
    }
    i64::try_from(a).ok()
}

fn sequence_index<'a>(
    builder: &mut Builder<'_>,
    items: &[Value<'a>],
    key: Value<'a>,
    span: Span,
) -> Eval<Value<'a>> {
    match key {
        Value::Int(index) => {
            let len = int_of_len(items.len());
            let position = if index < 0 { index + len } else { index };
            usize::try_from(position)
                .ok()
                .and_then(|position| items.get(position))
                .cloned()
                .ok_or_else(|| {
                    builder.error(
                        Code::MetaError,
                        span,
                        format!("index {index} out of range for a sequence of length {len}"),
                    )
                })
        }
        other => Err(builder.error(
            Code::MetaError,
            span,
            format!(
                "sequence indices must be ints known at compile time, found {}",
                other.describe()
            ),
        )),
    }
}

/// `TL_DISABLE_TMA_LOWER` → `tl.disable_tma_lower`, the string form of a pass config key.
fn pass_config_key(attribute: &str) -> String {
    match attribute.strip_prefix("TL_") {
        Some(rest) => format!("tl.{}", rest.to_ascii_lowercase()),
        None => attribute.to_ascii_lowercase(),
    }
}

/// `iket.*`: TileLang's in-kernel event tracing. Inside a kernel `iket.range(name)` opens a timed
/// range and `iket.mark(name, payload=iket.payload(x))` records an event; both write timestamps to
/// a trace buffer for a profiler and change no value of the kernel, so tilec enters the range for
/// no effect and drops the marks (its CUDA records no trace). `iket.session(...)` in driver code is
/// entered the same way; what the session reports afterwards (`event_table()`, `output_dir()`) is
/// known only once it has run.
impl Builder<'_> {
    /// A call into TVM's IR namespace (`tirx.const(1, "uint16")`, `tirx.Select(c, a, b)`), as the
    /// language operation of the same meaning. Its classes used as annotations (`tirx.PrimExpr`)
    /// are never called; calling one, or any other name, is reported as not modelled.
    fn tir_call<'a>(&mut self, name: &str, args: Args<'a>, span: Span) -> Eval<Value<'a>> {
        let language = match name {
            // `tir.const(value, dtype)` is the dtype's typed constant; its dtype defaults to
            // int32 or float32 by the value, as the language's literals do.
            "const" => {
                let dtype = match (args.get(1, "dtype"), args.get(0, "value")) {
                    (Some(_), _) => self.dtype_arg(&args, 1, "dtype")?,
                    (None, Some(Value::Float(_))) => DType::Float32,
                    (None, _) => DType::Int32,
                };
                let mut args = args;
                args.positional.truncate(1);
                args.keywords.retain(|(key, _, _)| key != "dtype");
                return self.typed_constant(dtype, args);
            }
            "Select" => "if_then_else",
            "Cast" => "Cast",
            "reinterpret" => "reinterpret",
            "Min" => "min",
            "Max" => "max",
            "if_then_else" | "max_value" | "min_value" | "infinity" => name,
            _ => {
                return Err(self.error(
                    Code::NotAnalysed,
                    span,
                    format!("tilec does not model `tir.{name}`"),
                ));
            }
        };
        self.dsl_call(language, args)
    }
}

fn iket_call<'a>(name: &str) -> Value<'a> {
    match name {
        "range" | "session" => Value::NoOpFrame,
        "mark" | "payload" => Value::None,
        _ => Value::Opaque(Rc::from(format!("the result of `iket.{name}`"))),
    }
}

/// `torch.cuda.get_device_properties(i)`: the fields kernels size themselves by, as PyTorch
/// reports them for the target's GPU.
fn device_properties<'a>(facts: &crate::modules::TargetFacts) -> Value<'a> {
    let (major, minor) = facts.compute_capability;
    let fields = [
        ("multi_processor_count", Value::Int(facts.num_sms)),
        ("name", Value::str(facts.device_name)),
        ("major", Value::Int(major)),
        ("minor", Value::Int(minor)),
        ("shared_memory_per_block", Value::Int(48 * 1024)),
        (
            "shared_memory_per_block_optin",
            Value::Int(facts.max_dynamic_shared_bytes),
        ),
        (
            "shared_memory_per_multiprocessor",
            Value::Int(facts.shared_bytes_per_sm),
        ),
        ("regs_per_multiprocessor", Value::Int(65536)),
        ("max_threads_per_multi_processor", Value::Int(2048)),
        ("warp_size", Value::Int(32)),
        ("L2_cache_size", Value::Int(facts.l2_cache_bytes)),
        ("total_memory", Value::Int(80 * 1024 * 1024 * 1024)),
    ];
    Value::Namespace(Rc::new(
        fields
            .into_iter()
            .map(|(name, value)| (name.to_owned(), value))
            .collect(),
    ))
}
