//! The evaluator's state: the world being built, its span table, diagnostics, and where new
//! statements go. Expression and statement evaluation are `impl Builder` blocks in `eval`, `exec`
//! and `dsl`.

use rustc_hash::{FxHashMap, FxHashSet};
use tilec_ir::{
    Anchor, Code, ConstValue, Diagnostic, EntityId, EntityKind, Span, SpanTable, World,
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
    /// Something only known when the program runs.
    Unknown,
}

impl CallArg {
    pub(crate) fn of(value: &crate::value::Value<'_>) -> CallArg {
        match value {
            crate::value::Value::Tensor(tensor) => CallArg::Tensor((**tensor).clone()),
            other => other.to_const().map_or(CallArg::Unknown, CallArg::Known),
        }
    }
}

/// How many statements and calls one build may evaluate: Python loops at compile time are bounded
/// so that a `while True:` in a factory reports an error instead of hanging the editor.
const STEP_BUDGET: u64 = 2_000_000;

/// Driver code (`main()`, benchmarks, argument parsing) is only read for the calls it makes, so it
/// gets a smaller budget: a benchmark loop must not cost the editor more than a few milliseconds.
pub(crate) const DRIVER_STEP_BUDGET: u64 = 100_000;
const MAX_CALL_DEPTH: u32 = 64;

#[derive(Debug)]
pub(crate) struct Builder {
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
    steps: u64,
    pub step_budget: u64,
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
    /// How many representative values each generic parameter has been through.
    pub representative_rounds: Vec<(String, usize)>,
}

impl Builder {
    pub(crate) fn new(strict: bool) -> Builder {
        Builder {
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
            steps: 0,
            step_budget: STEP_BUDGET,
            depth: 0,
            expr_depth: 0,
            abort_on_error: false,
            path_lost: false,
            concrete_generics: Vec::new(),
            generic_vars: Vec::new(),
            config_values: Vec::new(),
            autotuned: false,
            target: crate::modules::TargetFacts::default(),
            current_module: None,
            foreign_span: None,
            stmt_stack: Vec::new(),
            rejected_statements: Vec::new(),
            representative_rounds: Vec::new(),
        }
    }

    /// Reports an error (in strict mode) and returns the marker that stops the statement.
    pub(crate) fn error(&mut self, code: Code, span: Span, message: impl Into<String>) -> Stop {
        self.report(Diagnostic::error(code, Anchor::Span(span), message))
    }

    pub(crate) fn report(&mut self, mut diagnostic: Diagnostic) -> Stop {
        if let Some(span) = self.foreign_span {
            diagnostic.anchor = Anchor::Span(span);
        }
        if self.strict {
            if diagnostic.severity == tilec_ir::Severity::Error {
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
        self.steps += 1;
        if self.steps == self.step_budget {
            return Err(self.error(
                Code::MetaError,
                span,
                "compile-time evaluation did not finish (more than 2,000,000 steps): is there an endless loop?",
            ));
        }
        if self.steps > self.step_budget {
            return Err(Stop);
        }
        Ok(())
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
            return Err(self.error(
                Code::UnsupportedSyntax,
                span,
                format!("{what} is only allowed inside `with T.Kernel(...)`"),
            ));
        }
        Ok(self.add_entity(kind))
    }
}
