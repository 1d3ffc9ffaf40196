//! Building one kernel instance: binding its arguments, running the factory (or the eager function)
//! and instantiating the prim_func into a world, a span table and diagnostics.

use std::rc::Rc;

use ruff_python_ast::{Expr, Stmt, StmtClassDef, StmtFunctionDef};
use tilec_ir::{Anchor, Code, ConstValue, Diagnostic, EntityId, Span, SpanTable, World};

use crate::builder::{Builder, Eval, Stop};
use crate::eval::Args;
use crate::exec::Flow;
use crate::generic::declared_tensors;
use crate::instances::InstanceSpec;
use crate::modules::{ModuleTable, ParsedModules, Surroundings};
use crate::outline::{
    ContextSource, KernelSource, KernelStyle, Outline, definition_at, kernel_definitions,
    nested_eager_kernel, nested_functions, prim_func_depth, range_span,
};
use crate::syntax::ParsedModule;
use crate::value::{
    Env, Function, FunctionBody, Globals, Value, bind, call_frame, install_modules,
    keep_call_frames, lookup, new_env,
};

/// The position-bearing results of building an instance: where each entity was written and the
/// front end's diagnostics (anchored at file byte ranges).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KernelPositions {
    pub spans: SpanTable,
    pub diagnostics: Vec<Diagnostic>,
    /// False when the kernel could not be built (a syntax error inside it, or a missing argument).
    pub complete: bool,
}

/// What the caller of a build lends it: a way to abandon it, and a judge of whether a world
/// built with assumed values fits the hardware. The front end knows the language, not the GPU;
/// the judge (the checks' shared-memory count, lent by the query layer) keeps it that way.
#[derive(Clone, Copy)]
pub struct BuildHooks<'h> {
    /// Called now and then during evaluation; may unwind to abandon it.
    pub cancel: &'h dyn Fn(),
    /// False when a world's launches need more shared memory than any GPU's block has. Asked
    /// only of generic instances: sizes tilec assumed that overflow are retried smaller.
    pub fits: &'h dyn Fn(&World) -> bool,
}

impl std::fmt::Debug for BuildHooks<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BuildHooks").finish_non_exhaustive()
    }
}

impl BuildHooks<'static> {
    /// No cancellation, and every world fits.
    pub const NONE: BuildHooks<'static> = BuildHooks {
        cancel: &|| {},
        fits: &|_| true,
    };
}

/// Builds the position-free world of an instance from the normal forms of its kernel and context.
///
/// Only the world is kept: its spans point into the normal form, not the file. The same evaluation
/// on the real file text gives [`build_positions`], with the same entity ids.
///
/// `hooks.cancel` is called now and then during evaluation and may unwind to abandon it.
pub fn build_world(
    context: &ContextSource,
    kernel: &KernelSource,
    args: &[(String, ConstValue)],
    surroundings: &Surroundings,
    hooks: &BuildHooks<'_>,
) -> World {
    let modules = ParsedModules::parse(surroundings);
    let context_parsed = ParsedModule::parse(&context.normalized);
    let kernel_parsed = ParsedModule::parse(&kernel.normalized);
    // A function's source is its definition; a method's is its class's.
    let found = match &kernel.method {
        None => kernel_parsed
            .syntax()
            .body
            .iter()
            .find_map(|stmt| match stmt {
                Stmt::FunctionDef(def) => Some((def, None)),
                _ => None,
            }),
        Some(method) => kernel_definitions(kernel_parsed.syntax())
            .into_iter()
            .find(|found| {
                found
                    .class
                    .is_some_and(|class| class.name.as_str() == method.class)
                    && found.def.name.as_str() == method.method
            })
            .map(|found| (found.def, found.class)),
    };
    match found {
        Some((def, class)) if kernel_parsed.errors().is_empty() => {
            let context: Vec<&Stmt> = context_parsed.syntax().body.iter().collect();
            let request = BuildRequest {
                context: &context,
                modules: &modules,
                def,
                class,
                style: kernel.style,
                args,
                origin: None,
                unevaluated: &[],
            };
            build_instance(&request, hooks).world
        }
        _ => World {
            kernel_name: kernel.name.clone(),
            incomplete: true,
            ..World::default()
        },
    }
}

/// What one instance is built from.
struct BuildRequest<'r, 'a> {
    context: &'r [&'a Stmt],
    modules: &'a ParsedModules<'a>,
    def: &'a StmtFunctionDef,
    /// The class the kernel is a method of.
    class: Option<&'a StmtClassDef>,
    style: KernelStyle,
    args: &'r [(String, ConstValue)],
    origin: Option<Span>,
    unevaluated: &'r [String],
}

/// Builds an instance, keeping the parameters no call site gives symbolic where the kernel allows
/// it. A build whose symbols reach something that must be known at compile time (a tile's shape,
/// a `T.Parallel` extent) or that fails with them is repeated with those parameters assumed, until
/// nothing more is demanded; each round assumes at least one more, so this ends.
///
/// A build whose `assert` rejects a representative value is repeated with the next candidate for
/// a parameter the failing statements use (`assert dllm_block in (1, 2, 4, ..., 64)` rejects 128),
/// a bounded number of times. When no candidate is accepted, the first rejected build is the one
/// reported: it stands on the representative values, while the last stands on whatever the search
/// reached (sizes of 16384, or of 1) and may fail in ways the kernel's real sizes never would.
///
/// A generic instance whose launches do not fit a block's shared memory with the values assumed
/// is retried likewise, with smaller values of the ints its shared buffers read.
fn build_instance<'c>(request: &BuildRequest<'_, '_>, hooks: &BuildHooks<'c>) -> Builder<'c> {
    let mut concrete: Vec<String> = Vec::new();
    let mut rounds: Vec<(String, usize)> = Vec::new();
    let mut retries = 0;
    let mut first_rejected: Option<(Builder<'c>, Vec<String>)> = None;
    loop {
        let mut builder = Builder::new(true);
        builder.cancellation = tilec_ir::Cancellation::new(hooks.cancel);
        builder.world.kernel_name = request.def.name.to_string();
        builder.unevaluated = request.unevaluated.to_vec();
        builder.concrete_generics = concrete.clone();
        builder.representative_rounds = rounds.clone();
        builder.instantiate(request);
        let demanded: Vec<String> = builder
            .demanded_generics()
            .into_iter()
            .filter(|name| !concrete.contains(name))
            .collect();
        if !demanded.is_empty() {
            concrete.extend(demanded);
            continue;
        }
        if builder.rejected_statements.is_empty()
            && !builder.world.assumed_args.is_empty()
            && !(hooks.fits)(&builder.world)
        {
            builder.reject_oversized_shared();
        }
        if !builder.rejected_statements.is_empty() {
            let body = &request.def.body;
            let mut used = builder
                .rejected_small_extent
                .map(|span| names_in_expression(body, span))
                .or_else(|| {
                    let allocations = &builder.rejected_oversized_shared;
                    (!allocations.is_empty()).then(|| {
                        let mut names: Vec<String> = allocations
                            .iter()
                            .flat_map(|&span| names_in_expression(body, span))
                            .collect();
                        names.sort();
                        names.dedup();
                        names
                    })
                })
                .filter(|names| !names.is_empty())
                .map(|names| names_flowing_into(body, names))
                .unwrap_or_else(|| names_in_statements(body, &builder.rejected_statements));
            // A rejection that names the assumptions it met moves those alone.
            if !builder.rejected_names.is_empty() {
                used.clone_from(&builder.rejected_names);
            }
            if retries < MAX_REPRESENTATIVE_RETRIES
                && builder.next_representative(&used, &mut rounds)
            {
                retries += 1;
                first_rejected.get_or_insert((builder, used));
                continue;
            }
            if let Some((first, first_used)) = first_rejected.take() {
                (builder, used) = (first, first_used);
            }
            builder.blame_assumptions(&used);
        }
        builder.note_generic_instance(request.def, request.origin);
        mark_assumed_extent_loops(&mut builder, request.def);
        return builder;
    }
}

/// The hardware a TileLang target string names when it is not an NVIDIA GPU: AMD GPUs (`hip`,
/// `rocm`), Apple GPUs (`metal`) and CPUs (`c`, `llvm`, `cpu`).
fn foreign_hardware(target: &str) -> Option<&'static str> {
    let kind = target.split_whitespace().next().unwrap_or("");
    match kind {
        _ if kind.starts_with("hip") || kind.starts_with("rocm") => Some("AMD GPUs"),
        "metal" => Some("Apple GPUs"),
        "c" | "llvm" | "cpu" => Some("CPUs"),
        _ => None,
    }
}

/// The target other than an NVIDIA GPU that a kernel's code compiles for, written as a literal
/// (`@tilelang.jit(target="hip")`, `tilelang.compile(func, target="metal")`), with the hardware
/// it names and where it is written.
fn foreign_target(def: &StmtFunctionDef) -> Option<(String, &'static str, Span)> {
    use ruff_python_ast::visitor::{Visitor, walk_expr};
    struct Find(Option<(String, &'static str, Span)>);
    impl<'a> Visitor<'a> for Find {
        fn visit_expr(&mut self, expr: &'a Expr) {
            if self.0.is_some() {
                return;
            }
            if let Expr::Call(call) = expr {
                for keyword in &call.arguments.keywords {
                    if let (Some("target"), Expr::StringLiteral(text)) =
                        (keyword.arg.as_ref().map(|a| a.as_str()), &keyword.value)
                    {
                        let target = text.value.to_str();
                        if let Some(hardware) = foreign_hardware(target) {
                            self.0 = Some((target.to_owned(), hardware, range_span(keyword)));
                            return;
                        }
                    }
                }
            }
            walk_expr(self, expr);
        }
    }
    let mut find = Find(None);
    for decorator in &def.decorator_list {
        find.visit_expr(&decorator.expression);
    }
    for stmt in &def.body {
        find.visit_stmt(stmt);
    }
    find.0
}

/// Records the `T.Parallel` loops whose extents are computed from the ints tilec assumed
/// (`World::assumed_extent_loops`): the names in the loop's iterable (`T.Parallel(threads_arg,
/// npt_arg)`), followed back through the assignments of the kernel's code.
fn mark_assumed_extent_loops(builder: &mut Builder<'_>, def: &StmtFunctionDef) {
    use ruff_python_ast::visitor::{Visitor, walk_stmt};
    let assumed: Vec<&str> = builder
        .world
        .assumed_args
        .iter()
        .filter(|arg| matches!(arg.value, ConstValue::Int(_)))
        .map(|arg| arg.name.as_str())
        .collect();
    if assumed.is_empty() {
        return;
    }
    /// The span of every `for` statement, with its iterable.
    struct Loops<'a>(Vec<(Span, &'a Expr)>);
    impl<'a> Visitor<'a> for Loops<'a> {
        fn visit_stmt(&mut self, stmt: &'a Stmt) {
            if let Stmt::For(for_stmt) = stmt {
                self.0.push((range_span(stmt), &for_stmt.iter));
            }
            walk_stmt(self, stmt);
        }
    }
    let mut loops = Loops(Vec::new());
    for stmt in &def.body {
        loops.visit_stmt(stmt);
    }
    let world = &builder.world;
    let marked: Vec<EntityId> = (0..world.kinds.len())
        .map(EntityId::from_index)
        .filter(|&entity| {
            world
                .loops
                .get(entity)
                .is_some_and(|info| info.kind == tilec_ir::LoopKind::Parallel)
        })
        .filter(|&entity| {
            let Some(span) = builder.spans.get(entity) else {
                return false;
            };
            loops.0.iter().any(|(at, iter)| {
                *at == span
                    && names_flowing_into(&def.body, names_in_expr(iter))
                        .iter()
                        .any(|name| assumed.contains(&name.as_str()))
            })
        })
        .collect();
    builder.world.assumed_extent_loops = marked;
}

/// The names an expression reads, at any depth.
fn names_in_expr(expr: &Expr) -> Vec<String> {
    use ruff_python_ast::visitor::{Visitor, walk_expr};
    struct Collect(Vec<String>);
    impl<'a> Visitor<'a> for Collect {
        fn visit_expr(&mut self, expr: &'a Expr) {
            if let Expr::Name(name) = expr {
                self.0.push(name.id.to_string());
            }
            walk_expr(self, expr);
        }
    }
    let mut collect = Collect(Vec::new());
    collect.visit_expr(expr);
    collect.0
}

/// How many builds an instance may take to find representative values its `assert`s accept.
const MAX_REPRESENTATIVE_RETRIES: usize = 24;

/// The names used by the statements of `body` (at any depth) located at `spans`: all of a simple
/// statement's, and the header's of a compound one (an `if`'s test, not its branches).
fn names_in_statements(body: &[Stmt], spans: &[Span]) -> Vec<String> {
    use ruff_python_ast::visitor::{Visitor, walk_expr, walk_stmt};
    struct Names<'s> {
        spans: &'s [Span],
        inside: usize,
        found: Vec<String>,
    }
    impl<'a> Visitor<'a> for Names<'_> {
        fn visit_stmt(&mut self, stmt: &'a Stmt) {
            let marked = self.spans.contains(&range_span(stmt));
            let header: Vec<&'a Expr> = match stmt {
                Stmt::If(if_stmt) => vec![&*if_stmt.test],
                Stmt::While(while_stmt) => vec![&*while_stmt.test],
                Stmt::For(for_stmt) => vec![&*for_stmt.iter],
                Stmt::With(with) => with.items.iter().map(|item| &item.context_expr).collect(),
                Stmt::FunctionDef(_) | Stmt::ClassDef(_) | Stmt::Try(_) | Stmt::Match(_) => {
                    Vec::new()
                }
                _ => {
                    self.inside += usize::from(marked);
                    walk_stmt(self, stmt);
                    self.inside -= usize::from(marked);
                    return;
                }
            };
            if marked {
                self.inside += 1;
                for expr in header {
                    self.visit_expr(expr);
                }
                self.inside -= 1;
            }
            walk_stmt(self, stmt);
        }
        fn visit_expr(&mut self, expr: &'a Expr) {
            if let (Expr::Name(name), true) = (expr, self.inside > 0) {
                self.found.push(name.id.to_string());
            }
            walk_expr(self, expr);
        }
    }
    let mut names = Names {
        spans,
        inside: 0,
        found: Vec::new(),
    };
    for stmt in body {
        names.visit_stmt(stmt);
    }
    let mut found = names.found;
    found.sort();
    found.dedup();
    names_flowing_into(body, found)
}

/// The names read by the expression of `body` written at `span` (none when no expression of
/// `body` is written there: it lies in a helper the kernel calls).
fn names_in_expression(body: &[Stmt], span: Span) -> Vec<String> {
    use ruff_python_ast::visitor::{Visitor, walk_expr};
    struct Find<'e> {
        span: Span,
        found: Option<&'e Expr>,
    }
    impl<'a> Visitor<'a> for Find<'a> {
        fn visit_expr(&mut self, expr: &'a Expr) {
            if self.found.is_none() && range_span(expr) == self.span {
                self.found = Some(expr);
                return;
            }
            walk_expr(self, expr);
        }
    }
    let mut find = Find { span, found: None };
    for stmt in body {
        find.visit_stmt(stmt);
    }
    let mut names = find.found.map(names_in_expr).unwrap_or_default();
    names.sort();
    names.dedup();
    names
}

/// `names` and every name they are computed from through the assignments of `body` (at any
/// depth), to a fixed point: a failing `T.Kernel(T.ceildiv(total, block_m))` rejects the
/// parameters `total = n * c_in * out_l` and `out_l = pool_output_dim(l_in, kernel_w, ...)` use,
/// not only the locals it names.
fn names_flowing_into(body: &[Stmt], mut names: Vec<String>) -> Vec<String> {
    use ruff_python_ast::visitor::{Visitor, walk_stmt};
    /// Each assignment's target names and the names its value reads.
    #[derive(Default)]
    struct Assignments {
        flows: Vec<(Vec<String>, Vec<String>)>,
    }
    impl<'a> Visitor<'a> for Assignments {
        fn visit_stmt(&mut self, stmt: &'a Stmt) {
            let flow = match stmt {
                Stmt::Assign(assign) => Some((
                    assign.targets.iter().flat_map(names_in_expr).collect(),
                    names_in_expr(&assign.value),
                )),
                Stmt::AnnAssign(assign) => assign
                    .value
                    .as_deref()
                    .map(|value| (names_in_expr(&assign.target), names_in_expr(value))),
                Stmt::AugAssign(assign) => {
                    Some((names_in_expr(&assign.target), names_in_expr(&assign.value)))
                }
                _ => None,
            };
            self.flows.extend(flow);
            walk_stmt(self, stmt);
        }
    }
    let mut assignments = Assignments::default();
    for stmt in body {
        assignments.visit_stmt(stmt);
    }
    loop {
        let before = names.len();
        for (targets, sources) in &assignments.flows {
            if targets.iter().any(|target| names.contains(target)) {
                for source in sources {
                    if !names.contains(source) {
                        names.push(source.clone());
                    }
                }
            }
        }
        if names.len() == before {
            return names;
        }
    }
}

/// Builds an instance from the parsed file itself, for its spans and diagnostics.
pub fn build_positions(
    parsed: &ParsedModule,
    outline: &Outline,
    spec: &InstanceSpec,
    surroundings: &Surroundings,
    hooks: &BuildHooks<'_>,
) -> KernelPositions {
    let modules = ParsedModules::parse(surroundings);
    let kernel_name = spec.kernel.as_str();
    let module = parsed.syntax();
    let Some(kernel) = outline.kernel(kernel_name) else {
        return KernelPositions::default();
    };
    let broken = parsed
        .errors()
        .iter()
        .any(|error| kernel.span.start <= error.span.start && error.span.start < kernel.span.end);
    // Found by where the outline saw it: matching names would recompute every kernel's name,
    // once per instance, which is quadratic in a file of thousands of kernels.
    let Some((def, class)) = definition_at(module, kernel).filter(|_| !broken) else {
        return KernelPositions::default();
    };
    let context = outline.context_of(module);
    let request = BuildRequest {
        context: &context,
        modules: &modules,
        def,
        class,
        style: kernel.source.style,
        args: &spec.args,
        origin: spec.origin.span(),
        unevaluated: &spec.unevaluated,
    };
    let mut builder = build_instance(&request, hooks);
    if let Some(call) = spec.origin.span() {
        // The world is generic over what the call leaves out, as the world query builds it; the
        // call itself is still wrong, as Python would say.
        let receiver = usize::from(class.is_some() && crate::outline::has_receiver(def));
        report_omitted(&mut builder, def, receiver, &spec.args, call);
    }
    let complete = !builder.world.incomplete;
    KernelPositions {
        spans: builder.spans,
        diagnostics: builder.diagnostics,
        complete,
    }
}

/// A call that leaves out parameters without defaults fails in Python: an error at the call.
fn report_omitted(
    builder: &mut Builder<'_>,
    def: &StmtFunctionDef,
    receiver: usize,
    args: &[(String, ConstValue)],
    call: Span,
) {
    let tensors = declared_tensors(def);
    let omitted: Vec<String> = def
        .parameters
        .iter_non_variadic_params()
        .skip(receiver)
        .filter(|param| param.default.is_none())
        .map(|param| param.name().as_str())
        .filter(|name| !tensors.contains(name) && !args.iter().any(|(arg, _)| arg == name))
        .filter(|name| {
            // The autotuner passes what its configs name (all of it, as far as tilec can tell,
            // when the configs cannot be evaluated).
            let configured = builder.config_values.is_empty()
                || builder.config_values.iter().any(|(key, ..)| key == name);
            !(builder.autotuned && configured)
        })
        .map(|name| format!("`{name}`"))
        .collect();
    if omitted.is_empty() {
        return;
    }
    let message = format!(
        "this call of `{}` does not pass {}, which {} no default",
        def.name,
        omitted.join(", "),
        if omitted.len() == 1 { "has" } else { "have" }
    );
    let diagnostic = Diagnostic::error(Code::MissingArgument, Anchor::Span(call), message)
        .with_help("pass a value for each parameter without a default, as Python requires");
    builder.diagnostics.push(diagnostic);
}

/// Evaluates module-level statements leniently: what fails is simply unknown to the kernel. The
/// evaluation's frames live until the returned globals are dropped.
pub(crate) fn module_env<'a>(
    builder: &mut Builder<'_>,
    context: &[&'a Stmt],
    modules: &'a ParsedModules<'_>,
) -> Globals<'a> {
    let globals = Globals(new_env(None));
    builder.target = modules.target();
    install_modules(&globals, ModuleTable::new(modules));
    let strict = std::mem::replace(&mut builder.strict, false);
    let budget = builder.work_budget;
    builder.reset_budget(budget.min(crate::builder::MODULE_WORK_BUDGET));
    for stmt in context {
        builder.exec_module_statement(&globals, stmt);
    }
    builder.strict = strict;
    // The kernel gets a budget of its own: a module-level loop that spent the module's budget
    // has said so, and must not leave the kernel silently empty.
    builder.reset_budget(budget);
    globals
}

impl Builder<'_> {
    fn instantiate<'a>(&mut self, request: &BuildRequest<'_, 'a>) {
        let (def, style, args) = (request.def, request.style, request.args);
        let globals = module_env(self, request.context, request.modules);
        if let Some((target, hardware, span)) = foreign_target(def) {
            let message = format!(
                "this kernel is compiled for {hardware} (`target=\"{target}\"`), and tilec \
                 targets NVIDIA GPUs: its layouts and code are not analysed"
            );
            let _ = self.error(Code::NotAnalysed, span, message);
            return;
        }
        self.read_decorators(&globals, def);
        self.read_configs(&globals, def);
        self.compared_strings =
            crate::generic::compared_strings_through_calls(&def.body, request.context);
        self.compared_ints = crate::generic::compared_ints(&def.body);
        self.asserted_ints = crate::generic::asserted_ints(&def.body);
        self.thread_count_floors = crate::generic::thread_count_floors(&def.body);
        let receiver = match request.class {
            Some(class) => self.generic_receiver(&globals, class, def, args),
            None => None,
        };
        self.stmt_span = range_span(&def.name);
        let _ = match style {
            KernelStyle::PrimFunc => {
                let function = Function {
                    body: FunctionBody::Def(def),
                    closure: Env::clone(&globals),
                    prim_func: true,
                    defaults: Vec::new(),
                    autotune_config: Vec::new(),
                    module: None,
                };
                self.instantiate_prim_func(&function)
            }
            KernelStyle::Classic | KernelStyle::Eager => {
                self.run_factory(&globals, def, style, args, receiver)
            }
            KernelStyle::Wrapper => self.run_wrapper(&globals, def, args, receiver),
        };
    }

    /// Binds the factory's parameters and runs its body: a classic factory returns the prim_func to
    /// instantiate, an eager function is the kernel itself.
    fn run_factory<'a>(
        &mut self,
        globals: &Env<'a>,
        def: &'a StmtFunctionDef,
        style: KernelStyle,
        args: &[(String, ConstValue)],
        receiver: Option<Value<'a>>,
    ) -> Eval<()> {
        let frame = self.bind_factory_params(globals, def, style, args, receiver)?;
        if style == KernelStyle::Eager {
            let params: Vec<&str> = def
                .parameters
                .iter_non_variadic_params()
                .map(|p| p.name().as_str())
                .collect();
            // A symbol passed only at run time stays unbound: `T.const` makes it generic.
            for (name, value) in args.iter().filter(|(name, value)| {
                !params.contains(&name.as_str()) && *value != ConstValue::RunTime
            }) {
                self.consts.insert(name.clone(), value.clone());
                self.world.args.push((name.clone(), value.clone()));
            }
            // Tensors annotated in the signature are declared before the body runs, as Python
            // evaluates annotations where the function is defined.
            for param in def.parameters.iter_non_variadic_params() {
                if let Some(annotation) = param.annotation()
                    && crate::generic::is_tensor_type(annotation)
                {
                    let span = range_span(param);
                    self.declare_tensor_named(&frame, param.name().as_str(), span, annotation)?;
                }
            }
            self.exec_body(&frame, &def.body)?;
            return Ok(());
        }
        // A function that compiles its kernel in place (`kernel = tilelang.compile(main)`, then
        // runs it) is the kernel up to the prim_func's definition; what follows is host code
        // that uses the compiled kernel, not part of it.
        if let Some((end, name)) = compiled_in_place(def) {
            if let Stmt::FunctionDef(inner) = &def.body[end]
                && !crate::outline::contains_kernel_launch(&inner.body)
            {
                // TIR written by hand, or TVM's own script (`tir.block`s built by `tvm.build`).
                self.tir_level = true;
                return Err(self.tir_level_limit(range_span(&inner.name), &format!("`{name}`")));
            }
            self.exec_body(&frame, &def.body[..=end])?;
            return match lookup(&frame, name) {
                Some(Value::Function(function)) if function.prim_func => {
                    self.instantiate_prim_func(&function)
                }
                _ => Err(Stop),
            };
        }
        match self.exec_body(&frame, &def.body)? {
            Flow::Return(Value::Function(function)) if function.prim_func => {
                self.instantiate_prim_func(&function)
            }
            Flow::Return(Value::Poison) => Err(Stop),
            _ => Err(self.error(
                Code::InvalidCall,
                range_span(&def.name),
                format!("the factory `{}` must return its `@T.prim_func`", def.name),
            )),
        }
    }

    /// Binds a factory's parameters in a new frame: the call's arguments, else the defaults, else
    /// generic values. A method's first parameter is its receiver (`self`, `cls`).
    fn bind_factory_params<'a>(
        &mut self,
        globals: &Env<'a>,
        def: &'a StmtFunctionDef,
        style: KernelStyle,
        args: &[(String, ConstValue)],
        receiver: Option<Value<'a>>,
    ) -> Eval<Env<'a>> {
        let frame = new_env(Some(globals.clone()));
        let tensors = declared_tensors(def);
        self.object_fields = args
            .iter()
            .filter(|(name, _)| name.contains('.') && !name.starts_with("self."))
            .cloned()
            .collect();
        // A pytest test that builds its kernel itself runs with its first parametrized case.
        let parametrized = crate::instances::first_parametrized_case(self, globals, def);
        let mut params = def.parameters.iter_non_variadic_params().peekable();
        if let Some(receiver) = receiver
            && let Some(first) = params.next()
        {
            bind(&frame, first.name().as_str(), receiver);
        }
        for param in params {
            let name = param.name().as_str();
            let passed = args.iter().find(|(key, _)| key == name).map(|(_, v)| v);
            let value = match (passed, &param.default) {
                // A tensor of an eager kernel is declared by its `T.Tensor` annotation.
                (_, _) if style == KernelStyle::Eager && tensors.contains(&name) => {
                    Value::PendingTensor
                }
                (Some(ConstValue::RunTime), Some(default)) => {
                    match self.float_default(globals, name, default)? {
                        Some(value) => value,
                        None => self.generic_param(globals, name, param.annotation()),
                    }
                }
                (Some(ConstValue::RunTime), None) => {
                    self.generic_param(globals, name, param.annotation())
                }
                (Some(ConstValue::Callable(path)), _) => match callable_arg(globals, path) {
                    Some(function) => function,
                    None => self.generic_param(globals, name, param.annotation()),
                },
                (Some(value), _) => Value::from_const(value),
                // `BLOCK_N=None` in an autotuned kernel: the autotuner gives every config key a
                // value before the kernel is built, so the default is never what it sees.
                (None, Some(default)) => match self.eval(globals, default)? {
                    Value::None
                        if self.autotuned
                            && self.config_values.iter().any(|(key, ..)| key == name) =>
                    {
                        self.generic_param(globals, name, param.annotation())
                    }
                    value => value,
                },
                (None, None) => match parametrized.iter().find(|(case, _)| case == name) {
                    Some((_, value)) => value.clone(),
                    None => self.generic_param(globals, name, param.annotation()),
                },
            };
            if let Some(value) = value.to_const()
                && !self.world.args.iter().any(|(existing, _)| existing == name)
            {
                self.world.args.push((name.to_owned(), value));
            }
            bind(&frame, name, value);
        }
        if style == KernelStyle::Eager {
            bind_shape_symbols(&frame, def, args);
        }
        Ok(frame)
    }

    /// A float parameter the call passes only at run time (`eps=eps` from a module's forward)
    /// takes its default, as an assumption the instance reports: TileLang compiles the value in
    /// (a float is never a symbolic size), and the default is the value the author meant.
    fn float_default<'a>(
        &mut self,
        globals: &Env<'a>,
        name: &str,
        default: &'a Expr,
    ) -> Eval<Option<Value<'a>>> {
        let value = self.eval(globals, default)?;
        let Some(constant @ ConstValue::Float(_)) = value.to_const() else {
            return Ok(None);
        };
        self.world.assumed_args.push(tilec_ir::AssumedArg {
            name: name.to_owned(),
            value: constant,
            source: "its default: the call passes a value known only at run time".to_owned(),
        });
        Ok(Some(value))
    }

    /// A wrapper runs as driver code (what it cannot evaluate is only unknown, since an autotuner
    /// or a profiler around the kernel is none of tilec's business). When it returns a prim_func,
    /// that is the kernel; otherwise the nested factory it defined is called, with generic values
    /// for what it is not given.
    fn run_wrapper<'a>(
        &mut self,
        globals: &Env<'a>,
        def: &'a StmtFunctionDef,
        args: &[(String, ConstValue)],
        receiver: Option<Value<'a>>,
    ) -> Eval<()> {
        let frame = self.bind_factory_params(globals, def, KernelStyle::Wrapper, args, receiver)?;
        keep_call_frames(&frame);
        let strict = std::mem::replace(&mut self.strict, false);
        let returned = self.exec_body(&frame, &def.body);
        self.strict = strict;
        if let Ok(Flow::Return(Value::Function(function))) = &returned
            && function.prim_func
        {
            return self.instantiate_prim_func(function);
        }
        if prim_func_depth(&def.body).is_none()
            && let Some(inner) = nested_eager_kernel(&def.body)
        {
            return self.run_nested_eager(&frame, def, inner);
        }
        let returned_early = matches!(returned, Ok(Flow::Return(_)));
        // The statements around that `return`, without the `return` itself: the branches
        // that led to it say why it was taken, and its own arguments do not.
        let mut returned_at = std::mem::take(&mut self.last_return);
        returned_at.pop();
        let reported = self.diagnostics.len();
        let prim_func = self.nested_prim_func(&frame, def);
        // A wrapper that returned before it defined its factory took a branch for another
        // kernel (`if op_kind == "prod": return _prod_kernel(...)`): with assumed values, the
        // build is retried with the next candidates of the names that branch tests.
        if prim_func.is_err()
            && returned_early
            && !self.world.assumed_args.is_empty()
            && self.rejected_statements.is_empty()
            && !returned_at.is_empty()
            && self.diagnostics.len() > reported
        {
            self.rejected_statements = returned_at;
            self.rejection_diagnostic = Some(reported);
        }
        let prim_func = prim_func?;
        self.instantiate_prim_func(&prim_func)
    }

    /// An eager kernel defined inside the wrapper (a closure over its arguments): it runs in the
    /// frame that defined it, with generic values for the parameters nothing passes.
    fn run_nested_eager<'a>(
        &mut self,
        frame: &Env<'a>,
        def: &'a StmtFunctionDef,
        inner: &'a StmtFunctionDef,
    ) -> Eval<()> {
        // The frame that defined it: the wrapper's own, or that of the function around it.
        let scope = std::iter::once(frame.clone())
            .chain(
                nested_functions(&def.body)
                    .into_iter()
                    .filter_map(|f| call_frame(frame, f.range.start().to_u32())),
            )
            .find(|scope| {
                matches!(lookup(scope, inner.name.as_str()),
                    Some(Value::Function(function)) if matches!(function.body, FunctionBody::Def(d) if d.range == inner.range))
            });
        let Some(scope) = scope else {
            return Err(self.error(
                Code::NotAnalysed,
                range_span(&inner.name),
                format!(
                    "`{}` is the kernel, but tilec could not follow `{}` to its definition",
                    inner.name, def.name
                ),
            ));
        };
        self.read_decorators(&scope, inner);
        self.run_factory(&scope, inner, KernelStyle::Eager, &[], None)
    }

    /// The prim_func that the nested factory of `def` builds, called in the frame `def` last ran
    /// in with generic values for the parameters without a usable default.
    fn nested_prim_func<'a>(
        &mut self,
        frame: &Env<'a>,
        def: &'a StmtFunctionDef,
    ) -> Eval<Rc<Function<'a>>> {
        let span = range_span(&def.name);
        let mut factories: Vec<(usize, &'a StmtFunctionDef)> = nested_functions(&def.body)
            .into_iter()
            .filter_map(|inner| Some((prim_func_depth(&inner.body)?, inner)))
            .collect();
        factories.sort_by_key(|(depth, _)| *depth);
        // Branches may define the factory twice under one name (`if is_fp8: def kernel ... else:
        // def kernel ...`): the one the run bound is the one to call.
        let bound = |inner: &StmtFunctionDef| {
            matches!(lookup(frame, inner.name.as_str()),
                Some(Value::Function(function)) if matches!(function.body, FunctionBody::Def(d) if d.range == inner.range))
        };
        let chosen = factories
            .iter()
            .find(|(_, inner)| bound(inner))
            .or(factories.first())
            .map(|(_, inner)| *inner);
        let Some(inner) = chosen else {
            return Err(self.error(
                Code::NotAnalysed,
                span,
                format!(
                    "tilec cannot tell which function of `{}` builds its `@T.prim_func`",
                    def.name
                ),
            ));
        };
        let defined = match lookup(frame, inner.name.as_str()) {
            Some(Value::Function(function)) if matches!(function.body, FunctionBody::Def(d) if d.range == inner.range) => {
                function
            }
            _ => {
                return Err(self.error(
                    Code::NotAnalysed,
                    range_span(&inner.name),
                    format!(
                        "`{}` builds the kernel's `@T.prim_func`, but tilec could not follow `{}` to its definition",
                        inner.name, def.name
                    ),
                ));
            }
        };
        let call_span = range_span(&inner.name);
        let args = Args {
            positional: Vec::new(),
            keywords: self.generic_arguments(&defined, inner, 0, &|_| false, call_span),
            span: call_span,
        };
        // The factory that defines the prim_func itself is kernel code; one further out is not.
        let direct = prim_func_depth(&inner.body) == Some(0);
        let inner_strict = self.strict && direct;
        let strict = std::mem::replace(&mut self.strict, inner_strict);
        let returned = self.call_function(&defined, args, call_span);
        self.strict = strict;
        match returned? {
            Value::Function(function) if function.prim_func => Ok(function),
            Value::Poison => Err(Stop),
            _ if !direct => match call_frame(frame, inner.range.start().to_u32()) {
                Some(inner_frame) => self.nested_prim_func(&inner_frame, inner),
                None => Err(Stop),
            },
            _ => Err(self.error(
                Code::InvalidCall,
                call_span,
                format!(
                    "the factory `{}` must return its `@T.prim_func`",
                    inner.name
                ),
            )),
        }
    }

    /// Keyword arguments for a call no call site gives: a generic value for each parameter without
    /// a default, or whose default is `None` (the autotuner fills those in). A method's receiver
    /// (`skip` = 1) is left to the caller.
    pub(crate) fn generic_arguments<'a>(
        &mut self,
        function: &Function<'a>,
        def: &'a StmtFunctionDef,
        skip: usize,
        given: &dyn Fn(&str) -> bool,
        span: Span,
    ) -> Vec<(String, Value<'a>, Span)> {
        let floors = self.thread_count_floors.clone();
        def.parameters
            .iter_non_variadic_params()
            .skip(skip)
            .filter(|param| !given(param.name().as_str()))
            .filter(|param| {
                let name = param.name().as_str();
                // A thread count below what the kernel's own thread-index tests need
                // (`threads=128` where `elif tx >= 256:` gives a third warpgroup work) is not
                // what the kernel runs with: it is assumed as a generic one is.
                let floor = floors
                    .iter()
                    .find(|(n, _)| n == name)
                    .map(|(_, least)| *least);
                !function.defaults.iter().any(|(default, value)| {
                    default == name
                        && !matches!(value, Value::None)
                        && !matches!((value, floor), (Value::Int(v), Some(least)) if *v < least)
                })
            })
            .map(|param| {
                let name = param.name().as_str();
                (
                    name.to_owned(),
                    self.generic_value(name, param.annotation()),
                    span,
                )
            })
            .collect()
    }

    /// Creates the tensor parameters from the prim_func's annotations, then runs its body.
    fn instantiate_prim_func<'a>(&mut self, function: &Function<'a>) -> Eval<()> {
        let FunctionBody::Def(def) = function.body else {
            return Err(Stop);
        };
        self.tir_level = !crate::outline::contains_kernel_launch(&def.body);
        let frame = new_env(Some(function.closure.clone()));
        // A parameter may be declared in the body instead (`A: T.Tensor[[M, N], dtype]`, TileLang's
        // lazy style): it becomes a tensor where that statement runs.
        let declared_in_body = declared_tensors(def);
        for param in def.parameters.iter_non_variadic_params() {
            self.stmt_span = range_span(param);
            let name = param.name().as_str();
            if param.annotation().is_none() && declared_in_body.contains(&name) {
                bind(&frame, name, Value::PendingTensor);
                continue;
            }
            let Some(annotation) = param.annotation() else {
                return Err(self.error(
                    Code::InvalidCall,
                    range_span(param),
                    format!("the kernel parameter `{name}` needs an annotation such as `T.Tensor((M, N), dtype)`"),
                ));
            };
            let value = self.eval(&function.closure, annotation)?;
            let bound = self.kernel_param(name, value, range_span(param))?;
            bind(&frame, name, bound);
        }
        let outputs = std::mem::take(&mut self.world.outputs);
        self.world.outputs = self.resolve_out_idx(outputs);
        self.stmt_span = range_span(&def.name);
        self.exec_body(&frame, &def.body)?;
        Ok(())
    }

    fn kernel_param<'a>(
        &mut self,
        name: &str,
        annotation: Value<'a>,
        span: Span,
    ) -> Eval<Value<'a>> {
        match annotation {
            Value::TensorType {
                shape,
                dtype,
                strides,
            } => {
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
                Ok(Value::Buffer(param))
            }
            Value::DType(dtype) => {
                let param = self.add_param(Vec::new(), dtype);
                self.world.names.set(param, name.to_owned());
                if dtype.is_int() {
                    let var = self.world.exprs.var(name, None);
                    self.world.scalar_params.set(param, var);
                    Ok(Value::Index(self.world.exprs.var_expr(var)))
                } else {
                    Ok(self.data(tilec_ir::DataExpr::ReadVar(param), Some(dtype)))
                }
            }
            Value::Poison => Err(Stop),
            // `A_ptr: T.handle` bound by `T.match_buffer` in the body: TIR written by hand.
            _ if self.tir_level => {
                Err(self.tir_level_limit(span, &format!("the parameter `{name}`")))
            }
            other => Err(self.error(
                Code::InvalidCall,
                span,
                format!("the kernel parameter `{name}` is annotated with {}; expected `T.Tensor(shape, dtype)` or a dtype", other.describe()),
            )),
        }
    }

    /// Reads `out_idx` and `pass_configs` from `@tilelang.jit(...)`; they are evaluated leniently
    /// (a computed config tilec cannot evaluate is left out rather than failing the kernel).
    fn read_decorators<'a>(&mut self, globals: &Env<'a>, def: &'a StmtFunctionDef) {
        let strict = std::mem::replace(&mut self.strict, false);
        for decorator in &def.decorator_list {
            let Expr::Call(call) = &decorator.expression else {
                continue;
            };
            for keyword in &call.arguments.keywords {
                let Some(name) = &keyword.arg else { continue };
                let Ok(value) = self.eval(globals, &keyword.value) else {
                    continue;
                };
                match (name.as_str(), value) {
                    ("out_idx", Value::Int(index)) => self.pending_out_idx.push(index),
                    ("out_idx", Value::List(items) | Value::Tuple(items)) => {
                        self.pending_out_idx
                            .extend(items.iter().filter_map(|item| match item {
                                Value::Int(index) => Some(*index),
                                _ => None,
                            }));
                    }
                    ("pass_configs", Value::Dict(entries)) => {
                        for (key, value) in entries.iter() {
                            if let (Value::Str(key), Some(value)) = (key, value.to_const()) {
                                self.world.pass_configs.push((key.to_string(), value));
                            }
                        }
                    }
                    _ => {}
                }
            }
        }
        self.strict = strict;
    }

    fn resolve_out_idx(&mut self, mut outputs: Vec<EntityId>) -> Vec<EntityId> {
        // `out_idx` counts the function's own parameters, which workspaces and the tensors
        // reached through pointers are not.
        let own = self.world.params.len()
            - self.world.workspaces.len()
            - self.world.pointer_tensors.iter().count();
        let count = crate::value::int_of_len(own);
        for &index in &self.pending_out_idx {
            let position = if index < 0 { index + count } else { index };
            if let Some(param) = usize::try_from(position)
                .ok()
                .and_then(|p| self.world.params.get(p))
            {
                outputs.push(*param);
            }
        }
        outputs
    }
}

/// For a function that defines its `@T.prim_func` as a statement of its own body and never
/// returns it (a test or script that compiles and runs the kernel where it defines it: `kernel =
/// tilelang.compile(main, ...)`, `kernel(a)`): the index of that statement and the kernel's name.
fn compiled_in_place(def: &StmtFunctionDef) -> Option<(usize, &str)> {
    use ruff_python_ast::visitor::{Visitor, walk_stmt};
    /// Whether a `return` outside nested functions returns `name`.
    struct Returns<'n> {
        name: &'n str,
        found: bool,
    }
    impl<'a> Visitor<'a> for Returns<'_> {
        fn visit_stmt(&mut self, stmt: &'a Stmt) {
            match stmt {
                Stmt::FunctionDef(_) | Stmt::ClassDef(_) => {}
                Stmt::Return(ret) => {
                    let returned = ret.value.as_deref().map(names_in_expr).unwrap_or_default();
                    self.found |= returned.iter().any(|n| n == self.name);
                }
                other => walk_stmt(self, other),
            }
        }
    }
    let (end, kernel) = def
        .body
        .iter()
        .enumerate()
        .find_map(|(at, stmt)| match stmt {
            Stmt::FunctionDef(inner) if crate::outline::is_prim_func(inner) => Some((at, inner)),
            _ => None,
        })?;
    let name = kernel.name.as_str();
    let mut returns = Returns { name, found: false };
    for stmt in &def.body {
        returns.visit_stmt(stmt);
    }
    (!returns.found).then_some((end, name))
}

/// The function a call site passed by name (`T.exp`, or `relu` defined by the module), in the
/// module's globals; `None` when the name is not a function there (a nested `def` of the caller),
/// and the parameter is generic.
fn callable_arg<'a>(globals: &Env<'a>, path: &str) -> Option<Value<'a>> {
    if path.starts_with("T.") {
        return Some(Value::from_const(&ConstValue::Callable(path.to_owned())));
    }
    match lookup(globals, path)? {
        Value::Function(function) if !function.prim_func => Some(Value::Function(function)),
        _ => None,
    }
}

/// An eager kernel's arguments that are not its parameters name the extents of its tensor
/// annotations (`X: T.Tensor([M, N], dtype)`), bound from the shapes of the tensors the call
/// passes or by `--with`. They shadow module-level values of the same name in the kernel's frame,
/// so that the instance's shape is the one its arguments say, as a `T.const` symbol's is.
fn bind_shape_symbols<'a>(frame: &Env<'a>, def: &StmtFunctionDef, args: &[(String, ConstValue)]) {
    for (name, value) in args {
        let is_param = def
            .parameters
            .iter_non_variadic_params()
            .any(|param| param.name().as_str() == name);
        if !is_param && matches!(value, ConstValue::Int(_)) {
            bind(frame, name, Value::from_const(value));
        }
    }
}
