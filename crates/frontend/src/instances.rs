//! Finding a file's kernel instances: calls in driver code, `tilec.toml` entries, and defaults.
//!
//! Driver code (`main()`, module-level `kernel = f.compile(...)`) is evaluated leniently with every
//! kernel name bound to a recorder, so that `M, N = 1024, 512; f(M, N)` or a call inside a list
//! literal yields its concrete arguments. Each call site is one instance, even inside a loop.

use std::rc::Rc;

use ruff_python_ast::{Expr, Stmt, StmtClassDef, StmtFunctionDef};
use rustc_hash::FxHashSet;
use tilec_ir::{ConstValue, Span};

use crate::build::module_env;
use crate::builder::{Builder, CallArg, RecordedCall};
use crate::eval::Args;
use crate::modules::{ParsedModules, Surroundings};
use crate::outline::{CallSite, EnclosingScope, KernelNames, Outline, call_sites, range_span};
use crate::syntax::ParsedModule;
use crate::value::{
    Env, Function, FunctionBody, Value, bind, call_frame, keep_call_frames, new_env,
};

/// One instance the file asks for.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct InstanceSpec {
    pub kernel: String,
    /// Arguments by parameter (or eager const) name, as written at the call site.
    pub args: Vec<(String, ConstValue)>,
    pub origin: InstanceOrigin,
    /// Parameters the call passes something for that cannot be evaluated without running Python
    /// (a tensor, `sys.argv`): the instance lacks their values, and diagnostics say why.
    pub unevaluated: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum InstanceOrigin {
    /// A call in the file, at this range.
    CallSite(Span),
    /// An `[[instance]]` of a tilec.toml.
    Manifest,
    /// No instantiation anywhere: the parameters' defaults, and the instance is generic over the
    /// parameters without one.
    Defaults,
}

impl InstanceOrigin {
    pub fn span(&self) -> Option<Span> {
        match self {
            InstanceOrigin::CallSite(span) => Some(*span),
            _ => None,
        }
    }
}

/// An instance listed in a tilec.toml for this file.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ManifestInstance {
    pub kernel: String,
    pub args: Vec<(String, ConstValue)>,
}

/// Every instance of every kernel of the file, grouped by kernel in file order, call sites first.
/// A kernel nothing instantiates still gets one instance: with its parameter defaults, and
/// generic over the parameters that have none (see `generic.rs`). `cancel` is called now and then
/// during evaluation and may unwind to abandon it (salsa's cancellation).
pub fn find_instances(
    parsed: &ParsedModule,
    outline: &Outline,
    manifest: &[ManifestInstance],
    surroundings: &Surroundings,
    cancel: &dyn Fn(),
) -> Vec<InstanceSpec> {
    let recorded = record_calls(parsed, outline, surroundings, cancel);
    let mut instances = Vec::new();
    for kernel in &outline.kernels {
        let before = instances.len();
        for call in recorded.iter().filter(|call| call.kernel == kernel.name()) {
            let (args, unevaluated) = bind_call_args(call, outline);
            instances.push(InstanceSpec {
                kernel: call.kernel.clone(),
                args,
                origin: InstanceOrigin::CallSite(call.span),
                unevaluated,
            });
        }
        for entry in manifest
            .iter()
            .filter(|entry| entry.kernel == kernel.name())
        {
            instances.push(InstanceSpec {
                kernel: entry.kernel.clone(),
                args: entry.args.clone(),
                origin: InstanceOrigin::Manifest,
                unevaluated: Vec::new(),
            });
        }
        if instances.len() == before {
            instances.push(InstanceSpec {
                kernel: kernel.name().to_owned(),
                args: Vec::new(),
                origin: InstanceOrigin::Defaults,
                unevaluated: Vec::new(),
            });
        }
    }
    instances
}

/// Evaluates the driver code and returns the instantiating calls in source order, one per site.
///
/// Driver code never gives up as a whole: a statement tilec cannot evaluate makes only its own
/// targets unknown. Top-level functions nothing calls run once with their parameter defaults, and
/// a call site the evaluation never reached (the other branch of `if not tune:`, a lambda's body)
/// is evaluated in the last frame of the function around it.
fn record_calls(
    parsed: &ParsedModule,
    outline: &Outline,
    surroundings: &Surroundings,
    cancel: &dyn Fn(),
) -> Vec<RecordedCall> {
    let modules = ParsedModules::parse(surroundings);
    let module = parsed.syntax();
    let names: Vec<&str> = outline.kernels.iter().map(|kernel| kernel.name()).collect();
    let name_set = KernelNames::new(names.iter().copied());
    let mut builder = Builder::new(false);
    builder.cancellation = tilec_ir::Cancellation::new(cancel);
    builder.work_budget = crate::builder::DRIVER_WORK_BUDGET;
    let globals = module_env(&mut builder, &[], &modules);
    keep_call_frames(&globals);
    bind(&globals, "__name__", Value::str("__main__"));
    let is_kernel_def = |stmt: &Stmt| matches!(stmt, Stmt::FunctionDef(def) if name_set.contains(def.name.as_str()));
    // The whole module runs in order, as Python runs it, with the kernels as references that
    // record their calls.
    refer_kernels(&globals, &names);
    for stmt in module.body.iter().filter(|stmt| !is_kernel_def(stmt)) {
        builder.exec_module_statement(&globals, stmt);
        if matches!(
            stmt,
            Stmt::ClassDef(_) | Stmt::If(_) | Stmt::Try(_) | Stmt::With(_)
        ) {
            refer_kernels(&globals, &names);
        }
    }
    let context: FxHashSet<usize> = outline.context_statements.iter().copied().collect();
    let drivers: Vec<&Stmt> = module
        .body
        .iter()
        .enumerate()
        .filter(|(index, stmt)| !context.contains(index) && !is_kernel_def(stmt))
        .map(|(_, stmt)| stmt)
        .collect();
    // Driver functions nothing called (`main()` behind argparse, `test_*`, benchmarks) run once,
    // with their parameter defaults.
    for (def, class) in drivers.iter().flat_map(|stmt| driver_functions(stmt)) {
        if call_frame(&globals, def.range.start().to_u32()).is_none() {
            let receiver =
                class.and_then(|class| driver_receiver(&mut builder, &globals, class, def));
            run_with_defaults(&mut builder, &globals, def, receiver);
        }
    }
    let mut calls = std::mem::take(&mut builder.calls);
    // Of several evaluations of one call site, keep the one that knows the most.
    calls.sort_by_key(|call| (call.span.start, call.span.end, call.unknown_count()));
    let mut seen = FxHashSet::default();
    calls.retain(|call| seen.insert(call.span));
    for stmt in &drivers {
        for site in call_sites(stmt, &name_set) {
            let span = range_span(site.call);
            if seen.insert(span) {
                calls.push(evaluate_unreached(&mut builder, &globals, site));
            }
        }
    }
    calls.sort_by_key(|call| call.span.start);
    calls
}

/// The functions of a top-level statement that may drive kernels: a function, or the methods of
/// a class (an autograd `Function`'s `forward` and `backward`, an operator's `__call__`), which
/// instantiate kernels from their local tile sizes and the shapes of their tensors.
fn driver_functions(stmt: &Stmt) -> Vec<(&StmtFunctionDef, Option<&StmtClassDef>)> {
    match stmt {
        Stmt::FunctionDef(def) => vec![(def, None)],
        Stmt::ClassDef(class) => class
            .body
            .iter()
            .filter_map(|stmt| match stmt {
                Stmt::FunctionDef(def) if def.name.as_str() != "__init__" => {
                    Some((def, Some(class)))
                }
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// What a driver method runs with as its first argument: the class for a classmethod, nothing
/// for a staticmethod, else an object made by the class's `__init__` with its defaults (what
/// has none is unknown), so that `self.block_M` set there reaches the kernel.
fn driver_receiver<'a>(
    builder: &mut Builder<'_>,
    globals: &Env<'a>,
    class: &'a StmtClassDef,
    method: &'a StmtFunctionDef,
) -> Option<Value<'a>> {
    let Some(Value::Class(value)) = crate::value::lookup(globals, class.name.as_str()) else {
        return None;
    };
    match crate::classes::method_kind(method) {
        Some(crate::classes::MethodKind::StaticMethod) => return None,
        Some(crate::classes::MethodKind::ClassMethod) => return Some(Value::Class(value)),
        Some(crate::classes::MethodKind::Property) | None => {}
    }
    let span = range_span(&class.name);
    let init = class.body.iter().find_map(|stmt| match stmt {
        Stmt::FunctionDef(def) if def.name.as_str() == "__init__" => Some(def),
        _ => None,
    });
    let keywords = init
        .map(|init| {
            init.parameters
                .iter_non_variadic_params()
                .skip(1)
                .filter(|param| param.default().is_none())
                .map(|param| {
                    let unknown = Value::Opaque(Rc::from("a driver argument"));
                    (param.name().as_str().to_owned(), unknown, span)
                })
                .collect()
        })
        .unwrap_or_default();
    let args = Args {
        positional: Vec::new(),
        keywords,
        span,
    };
    builder.instantiate_class(&value, args, span).ok()
}

/// Makes every kernel a reference that records its calls: a function kernel's name in module
/// scope (also after a guarded definition ran and bound the function itself), and a method
/// kernel in its class (`self.build(M, N)`, `Op.build(...)`, `op.build(...)`).
fn refer_kernels(globals: &Env<'_>, names: &[&str]) {
    for name in names.iter().filter(|name| !name.contains('#')) {
        let reference = Value::KernelRef {
            name: Rc::from(*name),
        };
        match name.split_once('.') {
            None => bind(globals, name, reference),
            Some((class, method)) => {
                if let Some(Value::Class(value)) = crate::value::lookup(globals, class) {
                    bind(&value.namespace, method, reference);
                }
            }
        }
    }
}

/// Runs a driver function with its parameter defaults; a parameter without one is unknown.
fn run_with_defaults<'a>(
    builder: &mut Builder<'_>,
    globals: &Env<'a>,
    def: &'a StmtFunctionDef,
    receiver: Option<Value<'a>>,
) {
    let span = range_span(&def.name);
    let function = match builder.define_function(globals, FunctionBody::Def(def), false) {
        Ok(function) => function,
        Err(_) => Function {
            body: FunctionBody::Def(def),
            closure: globals.clone(),
            prim_func: false,
            defaults: Vec::new(),
            autotune_config: Vec::new(),
            module: None,
        },
    };
    let parametrized = first_parametrized_case(builder, globals, def);
    let keywords = def
        .parameters
        .iter_non_variadic_params()
        .skip(usize::from(receiver.is_some()))
        .filter_map(|param| {
            let name = param.name().as_str();
            if let Some((_, value)) = parametrized.iter().find(|(case, _)| case == name) {
                return Some((name.to_owned(), value.clone(), span));
            }
            let defaulted = function.defaults.iter().any(|(default, _)| default == name);
            let unknown = Value::Opaque(Rc::from("a driver argument"));
            (!defaulted).then(|| (name.to_owned(), unknown, span))
        })
        .collect();
    let args = Args {
        positional: receiver.into_iter().map(|value| (value, span)).collect(),
        keywords,
        span,
    };
    let _ = builder.call_function(&Rc::new(function), args, span);
}

/// The arguments pytest gives a test function in its first case: for each
/// `@pytest.mark.parametrize(names, cases)` decorator, the names (`"a, b"` or a sequence of
/// texts) bound to the items of the first case (`pytest.param(...)`'s arguments for one written
/// so). A test that builds its kernel from its parameters is then analysed with values it is
/// really run with, as an autotuned kernel is with its first config.
pub(crate) fn first_parametrized_case<'a>(
    builder: &mut Builder<'_>,
    globals: &Env<'a>,
    def: &'a StmtFunctionDef,
) -> Vec<(String, Value<'a>)> {
    let mut bound = Vec::new();
    for decorator in &def.decorator_list {
        let Expr::Call(call) = &decorator.expression else {
            continue;
        };
        if !crate::outline::dotted_name(&call.func).is_some_and(|n| n.ends_with("parametrize")) {
            continue;
        }
        let [names, cases, ..] = call.arguments.args.as_ref() else {
            continue;
        };
        let names: Vec<String> = match builder.eval(globals, names) {
            Ok(Value::Str(text)) => text.split(',').map(|n| n.trim().to_owned()).collect(),
            Ok(Value::Tuple(items) | Value::List(items)) => items
                .iter()
                .filter_map(|item| match item {
                    Value::Str(text) => Some(text.trim().to_owned()),
                    _ => None,
                })
                .collect(),
            _ => continue,
        };
        let Some(values) = first_case(builder, globals, cases, names.len()) else {
            continue;
        };
        bound.extend(names.into_iter().zip(values));
    }
    bound
}

/// The values of the first of `cases` for `count` names: as written when the cases are a
/// literal list (seeing through `pytest.param(1, 2, marks=...)`), else the first item of the
/// evaluated sequence; a case for several names is a tuple of values.
fn first_case<'a>(
    builder: &mut Builder<'_>,
    globals: &Env<'a>,
    cases: &'a Expr,
    count: usize,
) -> Option<Vec<Value<'a>>> {
    let written = match cases {
        Expr::List(list) => list.elts.first(),
        Expr::Tuple(tuple) => tuple.elts.first(),
        _ => None,
    };
    let first = match written {
        Some(Expr::Call(call))
            if crate::outline::dotted_name(&call.func).is_some_and(|n| n.ends_with("param")) =>
        {
            let values: Option<Vec<Value<'a>>> = call
                .arguments
                .args
                .iter()
                .map(|arg| builder.eval(globals, arg).ok())
                .collect();
            return values.filter(|values| values.len() == count);
        }
        Some(first) => builder.eval(globals, first).ok()?,
        None => match builder.eval(globals, cases).ok()? {
            Value::List(items) | Value::Tuple(items) => items.first()?.clone(),
            _ => return None,
        },
    };
    match (count, first) {
        (1, only) => Some(vec![only]),
        (_, Value::Tuple(items) | Value::List(items)) => Some(items.to_vec()),
        _ => None,
    }
}

/// A call site evaluation never reached: its arguments are evaluated, each on its own, in the last
/// frame of the innermost function around it that ran (the module if none did), with the names of
/// the scopes in between (a lambda's parameters, a comprehension's targets) unknown.
fn evaluate_unreached<'a>(
    builder: &mut Builder<'_>,
    globals: &Env<'a>,
    site: CallSite<'a>,
) -> RecordedCall {
    let ran = site.scopes.iter().rposition(|scope| match scope {
        EnclosingScope::Function(def) => call_frame(globals, def.range.start().to_u32()).is_some(),
        EnclosingScope::Lambda(_) | EnclosingScope::Comprehension(_) => false,
    });
    let mut scope = match ran.map(|index| &site.scopes[index]) {
        Some(EnclosingScope::Function(def)) => {
            call_frame(globals, def.range.start().to_u32()).unwrap_or_else(|| globals.clone())
        }
        _ => Env::clone(globals),
    };
    let inner = ran.map_or(0, |index| index + 1);
    for enclosing in &site.scopes[inner..] {
        scope = new_env(Some(scope));
        for name in scope_names(enclosing) {
            bind(
                &scope,
                &name,
                Value::Opaque(Rc::from("a value tilec cannot follow here")),
            );
        }
    }
    let saved_calls = std::mem::take(&mut builder.calls);
    let guarded = names_guarded_not_none(&site);
    // A name the branch around the call tests for `None` (`if num_local is not None:
    // make_kernel(num_local)`) is not `None` there, whatever the run that skipped the branch
    // bound it to (its default): it is unknown.
    let argument = |arg: &Expr, value: &Value<'_>| match (arg, value) {
        (Expr::Name(name), Value::None) if guarded.contains(&name.id.to_string()) => {
            CallArg::Unknown
        }
        (_, value) => CallArg::of(value),
    };
    let mut positional = Vec::new();
    let mut keywords = Vec::new();
    let mut open_ended = false;
    for arg in &site.call.arguments.args {
        match arg {
            Expr::Starred(starred) => match builder.eval(&scope, &starred.value) {
                Ok(Value::Tuple(items) | Value::List(items)) => {
                    positional.extend(items.iter().map(CallArg::of));
                }
                _ => open_ended = true,
            },
            other => positional.push(match builder.eval(&scope, other) {
                Ok(value) => argument(other, &value),
                Err(_) => CallArg::Unknown,
            }),
        }
    }
    for keyword in &site.call.arguments.keywords {
        let value = builder.eval(&scope, &keyword.value);
        match (&keyword.arg, value) {
            (Some(name), Ok(value)) => {
                keywords.push((name.as_str().to_owned(), argument(&keyword.value, &value)))
            }
            (Some(name), Err(_)) => keywords.push((name.as_str().to_owned(), CallArg::Unknown)),
            (None, Ok(Value::Dict(entries))) => {
                for (key, value) in entries.iter() {
                    match key {
                        Value::Str(key) => keywords.push((key.to_string(), CallArg::of(value))),
                        _ => open_ended = true,
                    }
                }
            }
            (None, _) => open_ended = true,
        }
    }
    builder.calls = saved_calls;
    RecordedCall {
        span: range_span(site.call),
        kernel: site.kernel,
        positional,
        keywords,
        open_ended,
    }
}

/// The names that the `if`s around a call site, in the innermost function around it, test to be
/// not `None` on the way to it (`if x is not None:`, `if x is not None and ...:`, or the `else`
/// of `if x is None:`).
fn names_guarded_not_none(site: &CallSite<'_>) -> Vec<String> {
    use ruff_python_ast::{CmpOp, Expr};
    let Some(def) = site.scopes.iter().rev().find_map(|scope| match scope {
        EnclosingScope::Function(def) => Some(*def),
        EnclosingScope::Lambda(_) | EnclosingScope::Comprehension(_) => None,
    }) else {
        return Vec::new();
    };
    /// The names `test` says are not `None` (`is_not`) or are `None` (`!is_not`) when it holds.
    fn tested(test: &Expr, is_not: bool, found: &mut Vec<String>) {
        match test {
            Expr::Compare(compare) => {
                if let (Expr::Name(name), [op], [Expr::NoneLiteral(_)]) =
                    (&*compare.left, &compare.ops[..], &compare.comparators[..])
                    && ((*op == CmpOp::IsNot) == is_not)
                    && matches!(op, CmpOp::IsNot | CmpOp::Is)
                {
                    found.push(name.id.to_string());
                }
            }
            Expr::BoolOp(bool_op) if is_not && bool_op.op == ruff_python_ast::BoolOp::And => {
                for value in &bool_op.values {
                    tested(value, is_not, found);
                }
            }
            _ => {}
        }
    }
    fn walk(body: &[Stmt], call: ruff_text_size::TextRange, found: &mut Vec<String>) {
        use ruff_text_size::Ranged;
        for stmt in body {
            if !stmt.range().contains_range(call) {
                continue;
            }
            if let Stmt::If(if_stmt) = stmt {
                if if_stmt.body.iter().any(|s| s.range().contains_range(call)) {
                    tested(&if_stmt.test, true, found);
                } else if let Some(clause) = if_stmt.elif_else_clauses.last()
                    && clause.test.is_none()
                    && clause.body.iter().any(|s| s.range().contains_range(call))
                    && if_stmt.elif_else_clauses.len() == 1
                {
                    tested(&if_stmt.test, false, found);
                }
            }
            for inner in crate::outline::inner_bodies(stmt) {
                walk(inner, call, found);
            }
        }
    }
    let mut found = Vec::new();
    walk(
        &def.body,
        ruff_text_size::Ranged::range(site.call),
        &mut found,
    );
    found
}

/// The names a scope binds: a function's or lambda's parameters, a comprehension's targets.
fn scope_names(scope: &EnclosingScope<'_>) -> Vec<String> {
    let parameters = match scope {
        EnclosingScope::Function(def) => Some(&*def.parameters),
        EnclosingScope::Lambda(lambda) => lambda.parameters.as_deref(),
        EnclosingScope::Comprehension(generators) => {
            return generators
                .iter()
                .flat_map(|generator| target_names(&generator.target))
                .collect();
        }
    };
    parameters
        .into_iter()
        .flat_map(|parameters| parameters.iter())
        .map(|param| param.name().as_str().to_owned())
        .collect()
}

fn target_names(target: &Expr) -> Vec<String> {
    match target {
        Expr::Name(name) => vec![name.id.to_string()],
        Expr::Tuple(tuple) => tuple.elts.iter().flat_map(target_names).collect(),
        Expr::List(list) => list.elts.iter().flat_map(target_names).collect(),
        _ => Vec::new(),
    }
}

/// Names a call's arguments by the kernel's parameters. An argument only known at run time is
/// `RunTime` (the instance is generic over it), except an eager kernel's tensors, which are not
/// meta arguments: a tensor of known shape binds the `T.const` symbols of its annotation instead.
/// The second list names the run-time arguments, for messages.
fn bind_call_args(
    call: &RecordedCall,
    outline: &Outline,
) -> (Vec<(String, ConstValue)>, Vec<String>) {
    let kernel = outline.kernel(&call.kernel);
    let params = kernel
        .map(|kernel| kernel.params.as_slice())
        .unwrap_or_default();
    let tensors = kernel
        .map(|kernel| kernel.tensors.as_slice())
        .unwrap_or_default();
    let named = params
        .iter()
        .map(|param| &param.name)
        .zip(&call.positional)
        .chain(call.keywords.iter().map(|(name, value)| (name, value)));
    let mut args: Vec<(String, ConstValue)> = Vec::new();
    let mut unevaluated: Vec<String> = Vec::new();
    let mut shapes: Vec<(String, i64)> = Vec::new();
    for (name, value) in named {
        args.retain(|(existing, _)| existing != name);
        unevaluated.retain(|existing| existing != name);
        let extents = tensors.iter().find(|(tensor, _)| tensor == name);
        match (value, extents) {
            (CallArg::Tensor(tensor), Some((_, extents))) => {
                bind_extents(&mut shapes, extents, tensor);
            }
            // An eager kernel's tensor parameter: no meta argument, whatever was passed.
            (_, Some(_)) => {}
            (CallArg::Known(value), None) => args.push((name.clone(), value.clone())),
            // The parameter's object is made again where the kernel is built, from what the call
            // site's object was made with (`out_config.sf_block=(32, 1)`).
            (CallArg::Object(fields), None) => {
                let prefix = format!("{name}.");
                args.retain(|(existing, _)| !existing.starts_with(&prefix));
                args.push((name.clone(), ConstValue::RunTime));
                for (field, value) in fields {
                    args.push((format!("{prefix}{field}"), value.clone()));
                }
            }
            (CallArg::Tensor(_) | CallArg::Unknown, None) => {
                args.push((name.clone(), ConstValue::RunTime));
                unevaluated.push(name.clone());
            }
        }
    }
    for (symbol, extent) in shapes {
        if !args.iter().any(|(name, _)| *name == symbol) {
            args.push((symbol, ConstValue::Int(extent)));
        }
    }
    if call.open_ended {
        // `f(*rest, **config)` may pass any parameter: those not seen are only known at run time.
        for param in params {
            let tensor = tensors.iter().any(|(name, _)| *name == param.name);
            if !tensor && !args.iter().any(|(name, _)| *name == param.name) {
                args.push((param.name.clone(), ConstValue::RunTime));
                unevaluated.push(param.name.clone());
            }
        }
    }
    (args, unevaluated)
}

/// Binds the `T.const` symbols of a tensor annotation from a tensor of known shape. A symbol two
/// tensors give different extents is left unbound: TileLang would reject that call.
fn bind_extents(
    shapes: &mut Vec<(String, i64)>,
    extents: &[Option<String>],
    tensor: &crate::torch::TensorValue,
) {
    let Some(shape) = &tensor.shape else {
        return;
    };
    if shape.len() != extents.len() {
        return;
    }
    for (symbol, extent) in extents.iter().zip(shape) {
        let (Some(symbol), Some(extent)) = (symbol, extent) else {
            continue;
        };
        match shapes.iter().position(|(name, _)| name == symbol) {
            Some(index) if shapes[index].1 != *extent => {
                shapes[index].1 = -1;
            }
            Some(_) => {}
            None => shapes.push((symbol.clone(), *extent)),
        }
    }
    shapes.retain(|(_, extent)| *extent >= 0);
}

/// One `@autotune` configuration: parameter values by name.
pub type AutotuneConfig = Vec<(String, ConstValue)>;

/// The configurations of a kernel's `@autotune(configs=...)` / `@tilelang.autotune(configs=...)`
/// decorator, evaluated in module scope (a literal list of dicts, or a helper such as
/// `get_configs()` that builds them with `itertools.product`). `None` when the kernel has no such
/// decorator; `Some(Err(why))` when its configs cannot be evaluated without running Python.
pub fn autotune_configs(
    parsed: &ParsedModule,
    outline: &Outline,
    kernel: &str,
    surroundings: &Surroundings,
) -> Option<Result<Vec<AutotuneConfig>, String>> {
    let modules = ParsedModules::parse(surroundings);
    let module = parsed.syntax();
    let def = crate::outline::kernel_definitions(module)
        .into_iter()
        .find(|found| found.name == kernel)
        .map(|found| found.def)?;
    let configs = def.decorator_list.iter().find_map(|decorator| {
        let Expr::Call(call) = &decorator.expression else {
            return None;
        };
        let name = crate::outline::dotted_name(&call.func)?;
        if name != "autotune" && !name.ends_with(".autotune") {
            return None;
        }
        call.arguments
            .keywords
            .iter()
            .find(|k| k.arg.as_ref().is_some_and(|a| a.as_str() == "configs"))
            .map(|k| &k.value)
    })?;
    let context = outline.context_of(module);
    let mut builder = Builder::new(false);
    builder.work_budget = crate::builder::DRIVER_WORK_BUDGET;
    let globals = module_env(&mut builder, &context, &modules);
    let value = builder
        .eval(&globals, configs)
        .ok()
        .and_then(|value| value.to_const());
    Some(configs_from(value))
}

/// A list of `{name: value}` dicts as configurations.
fn configs_from(value: Option<ConstValue>) -> Result<Vec<AutotuneConfig>, String> {
    let Some(ConstValue::List(items) | ConstValue::Tuple(items)) = value else {
        return Err(
            "the autotune configs do not evaluate to a list without running Python".to_owned(),
        );
    };
    items
        .into_iter()
        .map(|item| match item {
            ConstValue::Dict(entries) => entries
                .into_iter()
                .map(|(key, value)| match key {
                    ConstValue::Str(name) => Ok((name, value)),
                    other => Err(format!("an autotune config key is not a name: {other:?}")),
                })
                .collect(),
            other => Err(format!("an autotune config is not a dict: {other:?}")),
        })
        .collect()
}

#[cfg(test)]
mod autotune_tests {
    use super::*;

    const TUNED: &str = r#"
import itertools
import tilelang
import tilelang.language as T
from tilelang.autotuner import autotune


def get_configs():
    iter_params = dict(block_M=[64, 128], threads=[128, 256])
    return [dict(zip(iter_params, values)) for values in itertools.product(*iter_params.values())]


@autotune(configs=get_configs(), warmup=10, rep=10)
@tilelang.jit(out_idx=[1])
def scale(M, block_M=64, threads=128):
    @T.prim_func
    def main(A: T.Tensor((M,), "float32"), B: T.Tensor((M,), "float32")):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            for i in T.Parallel(block_M):
                B[bx * block_M + i] = A[bx * block_M + i] * 2.0

    return main


@tilelang.autotune(configs=[{"block_M": 32}, {"block_M": 16, "threads": 32}])
@tilelang.jit(out_idx=[1])
def literal(M, block_M=64, threads=128):
    @T.prim_func
    def main(A: T.Tensor((M,), "float32"), B: T.Tensor((M,), "float32")):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            for i in T.Parallel(block_M):
                B[bx * block_M + i] = A[bx * block_M + i]

    return main
"#;

    fn configs(kernel: &str) -> Option<Result<Vec<AutotuneConfig>, String>> {
        let parsed = ParsedModule::parse(TUNED);
        let outline = crate::outline(&parsed, TUNED);
        autotune_configs(&parsed, &outline, kernel, &Surroundings::default())
    }

    #[test]
    fn configs_built_by_a_helper_with_itertools_product_are_evaluated() {
        let int = |name: &str, v: i64| (name.to_owned(), ConstValue::Int(v));
        assert_eq!(
            configs("scale"),
            Some(Ok(vec![
                vec![int("block_M", 64), int("threads", 128)],
                vec![int("block_M", 64), int("threads", 256)],
                vec![int("block_M", 128), int("threads", 128)],
                vec![int("block_M", 128), int("threads", 256)],
            ]))
        );
        assert_eq!(
            configs("literal"),
            Some(Ok(vec![
                vec![int("block_M", 32)],
                vec![int("block_M", 16), int("threads", 32)],
            ]))
        );
    }
}
