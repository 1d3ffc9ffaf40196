//! The evaluator's state: the world being built, its span table, diagnostics, and where new
//! statements go. Expression and statement evaluation are `impl Builder` blocks in `eval`, `exec`
//! and `dsl`.

use rustc_hash::{FxHashMap, FxHashSet};
use tilec_ir::{
    Anchor, Cancellation, Code, ConstValue, Diagnostic, EntityId, EntityKind, Span, SpanTable,
    World,
};

/// An error that has already been reported (or, in lenient mode, deliberately ignored). Evaluation of
/// the current statement stops; the caller moves on to the next one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Stop;

pub(crate) type Eval<T> = Result<T, Stop>;

/// Where the statements being evaluated add their entities.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Block {
    Body(EntityId),
    Else(EntityId),
}

/// A call of a kernel factory (or `.compile`) in driver code, with its arguments as far as they are
/// known at compile time.
#[derive(Clone, Debug)]
pub(crate) struct RecordedCall {
    pub span: Span,
    pub kernel: String,
    pub positional: Vec<CallArg>,
    pub keywords: Vec<(String, CallArg)>,
    /// The call passes `*args` or `**kwargs` tilec could not expand: any parameter may be passed.
    pub open_ended: bool,
}

impl RecordedCall {
    /// How many arguments tilec could not evaluate: of two evaluations of one call site, the one
    /// that knows more is kept.
    pub(crate) fn unknown_count(&self) -> usize {
        let arguments = self
            .positional
            .iter()
            .chain(self.keywords.iter().map(|(_, arg)| arg));
        arguments
            .filter(|arg| matches!(arg, CallArg::Unknown))
            .count()
    }
}

/// One argument of a recorded call.
#[derive(Clone, Debug)]
pub(crate) enum CallArg {
    Known(ConstValue),
    /// A torch tensor, with what is known of its shape and dtype.
    Tensor(crate::torch::TensorValue),
    /// An object of a class of the evaluated code (a `@dataclass` config): the compile-time
    /// arguments it was made with, by field or `__init__` parameter name (`RunTime` for those
    /// only known when the program runs). The kernel builds its own object of the parameter's
    /// class from them.
    Object(Vec<(String, ConstValue)>),
    /// Something only known when the program runs.
    Unknown,
}

impl CallArg {
    pub(crate) fn of(value: &crate::value::Value<'_>) -> CallArg {
        match value {
            crate::value::Value::Tensor(tensor) => CallArg::Tensor((**tensor).clone()),
            crate::value::Value::Object(object) => {
                // A field only known at run time stays so: the kernel's object gets a generic
                // value for it, not its class's default.
                let fields: Vec<(String, ConstValue)> = object
                    .constructed_with
                    .iter()
                    .map(|(name, value)| {
                        (
                            name.clone(),
                            value.to_const().unwrap_or(ConstValue::RunTime),
                        )
                    })
                    .collect();
                if fields
                    .iter()
                    .all(|(_, value)| *value == ConstValue::RunTime)
                {
                    CallArg::Unknown
                } else {
                    CallArg::Object(fields)
                }
            }
            other => other.to_const().map_or(CallArg::Unknown, CallArg::Known),
        }
    }
}

/// How much compile-time evaluation one build may do, in units of work. Python loops at compile
/// time are bounded so that a `while True:` in a factory reports a diagnostic instead of hanging
/// the editor, and the bound counts work rather than statements: a statement or call costs
/// [`STEP_COST`], and every element of a list, tuple or string the evaluator creates costs
/// [`ELEMENT_COST`], so that `while True: x = [0] * (1 << 20)` ends as quickly as
/// `while True: pass` (both well under a second in a release build).
pub(crate) const WORK_BUDGET: u64 = STEP_COST * 2_000_000;

/// The work of one statement or call: the budget allows two million of them.
const STEP_COST: u64 = 8;

/// How much work passes between two questions whether the analysis is still wanted: a few
/// thousand statements, a fraction of a millisecond, so that an edit never waits for a long
/// evaluation to finish.
const CANCELLATION_INTERVAL: u64 = 1 << 15;

/// Module-level code around the kernels (constants, configuration tables, helper definitions)
/// is evaluated again for every instance, so it gets a quarter of the budget: an endless loop at
/// the top of a file must not cost every instance a full budget.
pub(crate) const MODULE_WORK_BUDGET: u64 = WORK_BUDGET / 4;

/// The work of one element of a list, tuple or string the evaluator creates: creating and
/// dropping an element costs about a fifth of a step.
const ELEMENT_COST: u64 = 2;

/// Driver code (`main()`, benchmarks, argument parsing) is only read for the calls it makes, so it
/// gets a smaller budget: a benchmark loop must not cost the editor more than a few milliseconds.
pub(crate) const DRIVER_WORK_BUDGET: u64 = STEP_COST * 100_000;

/// Once module-level code has spent its budget (a long loop at the top of a file), each later
/// module-level statement still gets this much, so that the functions, imports and constants it
/// defines exist for the kernels: one loop must not empty the whole file.
const LATE_STATEMENT_ALLOWANCE: u64 = STEP_COST * 2_000;

/// The longest list, tuple or string the evaluator builds. Kernel factories build configuration
/// tables and names, never millions of elements; a larger value is reported where it is made
/// rather than allocated (a doubling loop would otherwise exhaust memory in a few steps).
pub(crate) const MAX_SEQUENCE_LEN: usize = 1 << 20;

const MAX_CALL_DEPTH: u32 = 64;

#[derive(Debug)]
pub(crate) struct Builder<'c> {
    /// Asked now and then whether the analysis is still wanted; it unwinds when it is not (the
    /// database's cancellation, when an edit makes the result stale).
    pub cancellation: Cancellation<'c>,
    pub world: World,
    pub spans: SpanTable,
    pub diagnostics: Vec<Diagnostic>,
    /// Strict inside kernels and factories (errors are diagnostics); lenient in module context and
    /// driver code (errors just make a value unknown).
    pub strict: bool,
    pub block: Option<Block>,
    /// The statement being evaluated: new entities are located there.
    pub stmt_span: Span,
    /// Values of eager-style `T.const` symbols, from the instance's arguments.
    pub consts: FxHashMap<String, ConstValue>,
    /// Instantiating calls seen while evaluating driver code (only used when finding instances).
    pub calls: Vec<RecordedCall>,
    /// Parameters the instance's call passes but tilec could not evaluate (for messages).
    pub unevaluated: Vec<String>,
    /// `out_idx` of the kernel's decorator, applied once its parameters exist.
    pub pending_out_idx: Vec<i64>,
    reported_names: FxHashSet<String>,
    /// An operation that needs other hardware than the target's was reported in this build: the
    /// kernel's other such operations say nothing more.
    pub reported_hardware: bool,
    /// Work done so far against `work_budget` (see [`WORK_BUDGET`]).
    work: u64,
    pub work_budget: u64,
    /// The places where an analysis limit was reported in this build: each is reported once.
    reported_limits: Vec<Span>,
    pub depth: u32,
    pub expr_depth: u32,
    /// True while the body of a called helper runs: a failing statement ends the call.
    pub abort_on_error: bool,
    /// Generic parameters (no call site gives them) that the previous build showed must be known
    /// at compile time: this build gives them an assumed value instead of a symbol.
    pub concrete_generics: Vec<String>,
    /// The symbols of generic parameters kept symbolic, by variable.
    pub generic_vars: Vec<(tilec_ir::VarId, String)>,
    /// Values for generic parameters from the kernel's own configs (the first `@autotune` config,
    /// a module-level `get_configs()`), with where they came from.
    pub config_values: Vec<(String, ConstValue, String)>,
    /// What the call site's objects were made with, by `param.field`: a parameter whose argument
    /// is an object of a class of the evaluated code is rebuilt from these.
    pub object_fields: Vec<(String, ConstValue)>,
    /// The kernel has an `@autotune(configs=...)` decorator: the autotuner passes the parameters
    /// its configs name, so a call that leaves them out is not wrong.
    pub autotuned: bool,
    /// Lenient code only: a statement of the running function body failed in a way that skipped
    /// code (an `if` on an unknown value), so what the function returns is not known.
    pub path_lost: bool,
    /// The facts of the target GPU (`driver.get_num_sms()`).
    pub target: crate::modules::TargetFacts,
    /// The imported workspace module whose code runs (`None`: the file's own).
    pub current_module: Option<usize>,
    /// While code of another module runs, the place in this file that runs it (the call or the
    /// import): entities and diagnostics are located there, as spans into another text would be
    /// meaningless here.
    pub foreign_span: Option<Span>,
    /// The statements being executed, outermost first.
    pub stmt_stack: Vec<Span>,
    /// When an `assert` failed: the statements being executed then. A representative value they
    /// use is one the kernel rejects, and the next build tries another.
    pub rejected_statements: Vec<Span>,
    /// When the rejection is an extent below its least value (an empty grid or tile): the
    /// expression that computed it. The names it reads are the ones to move, and they move to
    /// larger values: such an extent is most often a size floor-divided by a larger one
    /// (`seq_len // chunk_size // group_chunks` with every size 128).
    pub rejected_small_extent: Option<Span>,
    /// Assumed parameters a rejection names directly, beyond those its statements use: the float
    /// dtypes an integer-only operation met (the dtype reaches it through a tensor's type).
    pub rejected_names: Vec<String>,
    /// When the rejection is launches whose shared buffers pass what any GPU's block holds: the
    /// allocations (`T.alloc_shared(...)` calls). The ints they read are the ones to move, and
    /// they move to smaller values.
    pub rejected_oversized_shared: Vec<Span>,
    /// The `T.alloc_shared(...)` calls of this build (see `rejected_oversized_shared`).
    pub shared_allocations: Vec<Span>,
    /// The prim_func being instantiated launches no `with T.Kernel(...)`: TIR written by hand.
    pub tir_level: bool,
    /// The combiners of the `with T.attr(T.comm_reducer(...), "reduce_scope", ...)` frames being
    /// executed, innermost last.
    pub reduce_scopes: Vec<tilec_ir::data::BinaryOp>,
    /// Set while an argument that may be the user's CUDA is evaluated (of `T.import_source`,
    /// `T.call_extern`, `prelude=` of `T.Kernel`): a name bound to a value tilec cannot know is
    /// then passed on as such instead of reported.
    pub opaque_arguments: bool,
    /// Which arguments of the call being made may be such values, for `eval_args` to take.
    pub opaque_leniency: OpaqueLeniency,
    /// The starting value each reducer's `T.reducer_init(acc, init)` gave, for its finalize.
    pub reducer_inits: Vec<(EntityId, Option<tilec_ir::DataId>)>,
    /// Where in `diagnostics` the failure that rejected the assumed values is (the diagnostic
    /// reported right after [`Self::rejected_statements`] was set).
    pub rejection_diagnostic: Option<usize>,
    /// The statements around the `return` that ran last (see `stmt_stack`): where a wrapper
    /// that returned before defining its kernel factory returned, so that the values assumed
    /// for its branch conditions can be rejected (`if op_kind == "prod": return other(...)`).
    pub last_return: Vec<Span>,
    /// The string literals the kernel's code compares each name with (see
    /// `generic::compared_strings`): the candidates of a generic text parameter.
    pub compared_strings: Vec<(String, Vec<String>)>,
    /// The ints the kernel compares each name with (`generic::compared_ints`): candidates of a
    /// generic int parameter after its representative choice.
    pub compared_ints: Vec<(String, Vec<i64>)>,
    /// The ints the kernel's own `assert`s allow each name (`generic::asserted_ints`): the only
    /// candidates of a generic int parameter they name.
    pub asserted_ints: Vec<(String, Vec<i64>)>,
    /// The fewest threads the kernel's thread-index tests need, by the name its launch takes
    /// its thread count from (`generic::thread_count_floors`): the first candidate of that name.
    pub thread_count_floors: Vec<(String, i64)>,
    /// How many `assert`s on the symbols of generic parameters were taken as preconditions.
    pub generic_preconditions: usize,
    /// How many representative values each generic parameter has been through.
    pub representative_rounds: Vec<(String, usize)>,
    /// The run-time scalars bound so far (`Offsets[bx]` used as a slice bound), so that the same
    /// read used again where its binding is still in scope and its buffer unwritten is the same
    /// index variable: `X[s : s + 64]` then has extent 64, not `(s' + 64) - s`.
    pub bound_scalars: Vec<BoundScalar>,
    /// The block each name bound to a read of a buffer (`v = s[i]`) was assigned in: a store to
    /// the buffer in that block or one nested in it takes the name's value first (see
    /// `snapshot_names_reading`); outside it the name's loop variables are out of scope.
    pub read_names: FxHashMap<String, Option<Block>>,
}

/// A run-time scalar bound to an index variable by a [`EntityKind::Bind`] statement.
#[derive(Clone, Debug)]
pub(crate) struct BoundScalar {
    /// The read it binds: a [`tilec_ir::DataExpr::Load`] or [`tilec_ir::DataExpr::ReadVar`].
    pub read: tilec_ir::DataExpr,
    /// The bound variable, as an index expression.
    pub index: tilec_ir::ExprId,
    /// The block the binding statement stands in: it is visible there and in blocks nested in it.
    pub block: Option<Block>,
}

impl<'c> Builder<'c> {
    pub(crate) fn new(strict: bool) -> Builder<'c> {
        Builder {
            cancellation: Cancellation::default(),
            world: World::default(),
            spans: SpanTable::default(),
            diagnostics: Vec::new(),
            strict,
            block: None,
            stmt_span: Span::default(),
            consts: FxHashMap::default(),
            calls: Vec::new(),
            pending_out_idx: Vec::new(),
            unevaluated: Vec::new(),
            reported_names: FxHashSet::default(),
            reported_hardware: false,
            work: 0,
            work_budget: WORK_BUDGET,
            reported_limits: Vec::new(),
            depth: 0,
            expr_depth: 0,
            abort_on_error: false,
            path_lost: false,
            concrete_generics: Vec::new(),
            generic_vars: Vec::new(),
            config_values: Vec::new(),
            object_fields: Vec::new(),
            autotuned: false,
            target: crate::modules::TargetFacts::default(),
            current_module: None,
            foreign_span: None,
            stmt_stack: Vec::new(),
            rejected_statements: Vec::new(),
            rejected_small_extent: None,
            rejected_names: Vec::new(),
            rejected_oversized_shared: Vec::new(),
            shared_allocations: Vec::new(),
            tir_level: false,
            reduce_scopes: Vec::new(),
            opaque_arguments: false,
            opaque_leniency: OpaqueLeniency::None,
            reducer_inits: Vec::new(),
            rejection_diagnostic: None,
            last_return: Vec::new(),
            compared_strings: Vec::new(),
            compared_ints: Vec::new(),
            asserted_ints: Vec::new(),
            thread_count_floors: Vec::new(),
            generic_preconditions: 0,
            representative_rounds: Vec::new(),
            bound_scalars: Vec::new(),
            read_names: FxHashMap::default(),
        }
    }

    /// Reports an error (in strict mode) and returns the marker that stops the statement.
    /// A [`Code::NotAnalysed`] diagnostic gets its own severity: it is tilec's limit, not the
    /// kernel's error.
    pub(crate) fn error(&mut self, code: Code, span: Span, message: impl Into<String>) -> Stop {
        let diagnostic = match code {
            Code::NotAnalysed => Diagnostic::not_analysed(Anchor::Span(span), message),
            _ => Diagnostic::error(code, Anchor::Span(span), message),
        };
        self.report(diagnostic)
    }

    pub(crate) fn report(&mut self, mut diagnostic: Diagnostic) -> Stop {
        if let Some(span) = self.foreign_span {
            diagnostic.anchor = Anchor::Span(span);
        }
        if self.strict {
            if diagnostic.severity.stops_analysis() {
                self.world.incomplete = true;
            }
            self.diagnostics.push(diagnostic);
        }
        Stop
    }

    /// Reports an undefined name once per build, at its first use: later uses of the same name
    /// stop silently, so one typo gives one diagnostic.
    pub(crate) fn undefined_name(&mut self, name: &str, span: Span) -> Stop {
        // Lenient code reports nothing, so it must not count as the name's one report: a later
        // use in kernel code would then fail with no diagnostic at all.
        if !self.strict {
            return Stop;
        }
        if !self.reported_names.insert(name.to_owned()) {
            self.world.incomplete = true;
            return Stop;
        }
        if PYTHON_BUILTINS_NOT_MODELLED.contains(&name) {
            // The name exists in Python: that tilec does not evaluate it is tilec's limit.
            return self.report(Diagnostic::not_analysed(
                Anchor::Span(span),
                format!(
                    "the Python builtin `{name}` is not evaluated by tilec, which runs Python \
                     itself and models only the builtins kernel code commonly uses"
                ),
            ));
        }
        let mut diagnostic = Diagnostic::error(
            Code::UndefinedName,
            Anchor::Span(span),
            format!("name `{name}` is not defined"),
        );
        if name == "tl" || name == "T" {
            diagnostic = diagnostic.with_help("add `import tilelang.language as T`");
        }
        self.report(diagnostic)
    }

    /// Counts one evaluation step; fails once the budget is spent.
    pub(crate) fn step(&mut self, span: Span) -> Eval<()> {
        self.charge(STEP_COST, span)
    }

    /// Counts `units` of work (elements created, steps); fails once the budget is spent. The first
    /// failure is reported where it happened, whether or not the code is strict: a long loop at
    /// module level must say why what follows it is unknown.
    pub(crate) fn charge(&mut self, units: u64, span: Span) -> Eval<()> {
        let before = self.work;
        self.work = self.work.saturating_add(units);
        if before / CANCELLATION_INTERVAL != self.work / CANCELLATION_INTERVAL {
            self.cancellation.check();
        }
        if self.work <= self.work_budget {
            return Ok(());
        }
        if before <= self.work_budget {
            let steps = self.work_budget / STEP_COST;
            return Err(self.limit(
                span,
                format!(
                    "compile-time evaluation did not finish within tilec's budget ({} steps, \
                     fewer when it builds large lists): is there an endless loop?",
                    thousands(steps)
                ),
            ));
        }
        Err(Stop)
    }

    /// True once this build has spent its work budget.
    pub(crate) fn budget_spent(&self) -> bool {
        self.work > self.work_budget
    }

    /// Gives evaluation a fresh budget of `budget` units (a new phase: the kernel after its
    /// module, driver code after the module's definitions).
    pub(crate) fn reset_budget(&mut self, budget: u64) {
        self.work = 0;
        self.work_budget = budget;
    }

    /// Runs one module-level statement, with a small allowance of its own once the budget is
    /// spent (see [`LATE_STATEMENT_ALLOWANCE`]). Failures only make the statement's targets
    /// unknown, as everywhere in module context.
    pub(crate) fn exec_module_statement<'a>(
        &mut self,
        globals: &crate::value::Env<'a>,
        stmt: &'a ruff_python_ast::Stmt,
    ) {
        if self.budget_spent() {
            self.work = self.work_budget.saturating_sub(LATE_STATEMENT_ALLOWANCE);
        }
        let _ = self.exec_body(globals, std::slice::from_ref(stmt));
    }

    /// Fails with an `analysis-limit` warning unless `len` elements are within
    /// [`MAX_SEQUENCE_LEN`], and counts them as work otherwise. `what` names the value ("list",
    /// "string").
    pub(crate) fn allocate(&mut self, len: u128, what: &str, span: Span) -> Eval<()> {
        self.within_sequence_limit(len, what, span)?;
        let units = u64::try_from(len).unwrap_or(u64::MAX);
        self.charge(units.saturating_mul(ELEMENT_COST), span)
    }

    /// Fails with an `analysis-limit` warning unless a value of `len` elements is within
    /// [`MAX_SEQUENCE_LEN`]; counts no work (for a value that grows in place).
    pub(crate) fn within_sequence_limit(&mut self, len: u128, what: &str, span: Span) -> Eval<()> {
        if len > MAX_SEQUENCE_LEN as u128 {
            return Err(self.limit(
                span,
                format!(
                    "this {what} would have {} elements; tilec evaluates {what}s of up to {} \
                     elements at compile time",
                    thousands_u128(len),
                    thousands(MAX_SEQUENCE_LEN as u64)
                ),
            ));
        }
        Ok(())
    }

    /// Reports that analysis stops at `span` because of one of tilec's own limits (not an error in
    /// the code): an `analysis-limit` warning, once per place, in strict and lenient code alike.
    /// Kernel code that stops so leaves an incomplete world, which is never lowered.
    pub(crate) fn limit(&mut self, span: Span, message: String) -> Stop {
        let span = self.foreign_span.unwrap_or(span);
        if self.strict {
            self.world.incomplete = true;
        }
        if !self.reported_limits.contains(&span) {
            self.reported_limits.push(span);
            self.diagnostics.push(Diagnostic::warning(
                Code::AnalysisLimit,
                Anchor::Span(span),
                message,
            ));
        }
        Stop
    }

    pub(crate) fn enter_call(&mut self, span: Span) -> Eval<()> {
        if self.depth >= MAX_CALL_DEPTH {
            return Err(self.error(
                Code::MetaError,
                span,
                "compile-time calls nest too deeply (recursion?)",
            ));
        }
        self.depth += 1;
        Ok(())
    }

    /// Adds an entity where the current statement belongs and records its span.
    pub(crate) fn add_entity(&mut self, kind: EntityKind) -> EntityId {
        let id = match self.block {
            Some(Block::Body(parent)) => self.world.add_entity(kind, Some(parent)),
            Some(Block::Else(parent)) => self.world.add_else_entity(kind, parent),
            None => self.world.add_entity(kind, None),
        };
        self.spans
            .push(id, self.foreign_span.unwrap_or(self.stmt_span));
        id
    }

    /// Adds an entity that must be inside `with T.Kernel(...)`; `what` names it in the error.
    pub(crate) fn add_kernel_entity(
        &mut self,
        kind: EntityKind,
        what: &str,
        span: Span,
    ) -> Eval<EntityId> {
        if self.block.is_none() {
            return Err(self.outside_launch(span, what));
        }
        Ok(self.add_entity(kind))
    }

    /// `what` (a store, an allocation, `T.get_thread_binding()`) outside every `with
    /// T.Kernel(...)`: the user's error in a kernel that launches one; in a prim_func that
    /// launches none, TIR written by hand (thread bindings as loops, `T.match_buffer`), which
    /// tilec does not analyse yet.
    pub(crate) fn outside_launch(&mut self, span: Span, what: &str) -> Stop {
        if self.tir_level {
            return self.tir_level_limit(span, &format!("{what} outside `with T.Kernel(...)`"));
        }
        self.error(
            Code::UnsupportedSyntax,
            span,
            format!("{what} is only allowed inside `with T.Kernel(...)`"),
        )
    }

    /// `subject` of a prim_func that launches no `with T.Kernel(...)`, said as tilec's limit.
    pub(crate) fn tir_level_limit(&mut self, span: Span, subject: &str) -> Stop {
        self.error(
            Code::NotAnalysed,
            span,
            format!(
                "{subject}: this prim_func launches no `with T.Kernel(...)`, and tilec does not \
                 analyse kernels written at the TIR level (thread bindings as loops, \
                 `T.match_buffer`) yet"
            ),
        )
    }
}

/// Python's builtins that tilec does not model: using one is not an undefined name.
const PYTHON_BUILTINS_NOT_MODELLED: &[&str] = &[
    "ascii",
    "bin",
    "bytearray",
    "bytes",
    "callable",
    "chr",
    "compile",
    "complex",
    "delattr",
    "dir",
    "eval",
    "exec",
    "filter",
    "format",
    "frozenset",
    "globals",
    "hash",
    "hex",
    "id",
    "input",
    "iter",
    "locals",
    "map",
    "memoryview",
    "next",
    "object",
    "oct",
    "open",
    "ord",
    "repr",
    "set",
    "setattr",
    "slice",
    "super",
    "type",
    "vars",
];

/// `n` with thousands separators (`1,048,576`), as the diagnostics write limits and `tilec run` its
/// progress.
pub fn thousands(n: u64) -> String {
    thousands_u128(u128::from(n))
}

pub(crate) fn thousands_u128(n: u128) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (index, digit) in digits.chars().enumerate() {
        if index > 0 && (digits.len() - index).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

/// Which arguments of a call may be values tilec cannot know (see `Builder::opaque_arguments`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum OpaqueLeniency {
    #[default]
    None,
    All,
    Keyword(&'static str),
}
