//! Generic instances: kernels analysed without a call site that gives every parameter a value.
//!
//! Library code builds kernels from sizes it reads off tensors at run time, so most parameters of
//! such a kernel have no compile-time value anywhere in the file. A missing (or run-time) integer
//! parameter stays a symbol, as a `T.dynamic` size would, for as long as the kernel allows: global
//! tensor shapes, grids and loops over global data are symbolic. What tilec must know to lay out
//! tiles (a fragment's shape, a `T.Parallel` extent, a dtype, a branch taken at compile time) is
//! assumed instead, from the kernel's own configs if it has any, else from a documented
//! representative choice. Every symbol and assumption is recorded in the world and reported as an
//! `info`, so the user sees what the analysis stands on.

use ruff_python_ast::{Expr, Stmt, StmtFunctionDef};
use rustc_hash::FxHashSet;
use tilec_ir::{
    Anchor, AssumedArg, Code, ConstValue, DType, DataExpr, Diagnostic, LoopKind, Scope, Span,
};

use crate::builder::Builder;
use crate::outline::{dotted_name, range_span};
use crate::value::{Env, Value};

/// The int a generic parameter is assumed to be when nothing else gives it, unless its name says
/// it counts pipeline stages (2) or splits (1). Tile sizes, head dimensions and thread counts of
/// real kernels are most often 128, and 128 keeps every layout check meaningful.
const REPRESENTATIVE_INT: i64 = 128;

/// The values a parameter no call site gives is tried with, in order: the first is the
/// representative choice, the others are for when the kernel's own `assert`s reject it.
fn representatives(name: &str, kind: GenericKind) -> Vec<ConstValue> {
    let lower = name.to_ascii_lowercase();
    let ints = |values: &[i64]| values.iter().map(|v| ConstValue::Int(*v)).collect();
    match kind {
        // An accumulator is float32 in every TileLang example and in TileLang's own defaults.
        GenericKind::DType if lower.contains("accum") => {
            vec![
                ConstValue::DType(DType::Float32),
                ConstValue::DType(DType::Float16),
            ]
        }
        // The dtype of sequence offsets, indices and lengths is an integer one: a float there
        // makes every index read from such a tensor a float (`seq_start = seq_map[b]`).
        GenericKind::DType
            if ["seqlen", "idx", "index", "indices", "offset", "position"]
                .iter()
                .any(|word| lower.contains(word)) =>
        {
            vec![
                ConstValue::DType(DType::Int32),
                ConstValue::DType(DType::Int64),
                ConstValue::DType(DType::Int8),
                ConstValue::DType(DType::UInt8),
            ]
        }
        // A mask is a flag per element.
        GenericKind::DType if lower.contains("mask") => vec![
            ConstValue::DType(DType::Bool),
            ConstValue::DType(DType::Int8),
            ConstValue::DType(DType::UInt8),
            ConstValue::DType(DType::Int32),
        ],
        // Past the floats come the dtypes of quantized kernels, whose helpers assert them.
        GenericKind::DType => vec![
            ConstValue::DType(DType::Float16),
            ConstValue::DType(DType::BFloat16),
            ConstValue::DType(DType::Float32),
            ConstValue::DType(DType::Int8),
            ConstValue::DType(DType::Float8E4M3),
            ConstValue::DType(DType::Int32),
        ],
        GenericKind::Bool => vec![ConstValue::Bool(false), ConstValue::Bool(true)],
        // A scale, an epsilon, a clamp bound: a float the kernel computes with, never a size.
        GenericKind::Float => vec![ConstValue::float(1.0), ConstValue::float(0.5)],
        // Never assumed (see `generic_value`); `None` keeps the list non-empty all the same.
        GenericKind::Function => vec![ConstValue::None],
        // Taken from the code by `Builder::candidates`; a plain text otherwise.
        GenericKind::Text => vec![ConstValue::Str(String::new())],
        // A `T.GemmWarpPolicy` passed as its int (the enum is an `IntEnum`): Square, FullRow,
        // FullCol.
        GenericKind::Int if lower == "policy" || lower.ends_with("_policy") => ints(&[0, 1, 2]),
        GenericKind::Int if lower.contains("stage") => ints(&[2, 1, 3, 4]),
        GenericKind::Int if lower.contains("split") => ints(&[1, 2, 4, 8]),
        // The hyperparameters of convolutions and pooling, by PyTorch's names (`stride_w`,
        // `dilation`, `pad_h`, `padding`, `kernel_size`, `kernel_w`): 128 for each makes a window
        // larger than its input and an empty output.
        GenericKind::Int if lower.contains("stride") || lower.contains("dilation") => ints(&[1, 2]),
        // (`max_seqlen_pad`, a padded length, is a size: only names that start with `pad`.)
        GenericKind::Int if lower.starts_with("pad") => ints(&[0, 1]),
        GenericKind::Int if lower.starts_with("kernel") || lower.starts_with("ksize") => {
            ints(&[3, 1, 2, 4, 5, 7])
        }
        // The larger values past 256 are for an empty grid or tile, which a size floor-divided
        // by larger ones gives (`seq_len // chunk_size // group_chunks`): see
        // `Builder::next_representative`.
        GenericKind::Int => ints(&[REPRESENTATIVE_INT, 64, 32, 16, 8, 4, 2, 1, 256, 1024, 16384]),
    }
}

/// What a generic parameter holds, as far as its annotation and name tell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum GenericKind {
    Int,
    DType,
    Bool,
    /// A parameter annotated `float`.
    Float,
    /// A function the caller passes (`op_func`, `score_fn`, annotated `Callable`).
    Function,
    /// A string the kernel compares with literals (`if op_kind == "sum":`): those literals are
    /// its candidates, in the order the code names them.
    Text,
}

fn generic_kind(name: &str, annotation: Option<&Expr>) -> GenericKind {
    let annotated = annotation.and_then(dotted_name);
    match annotated.as_deref() {
        Some("bool") => return GenericKind::Bool,
        Some("int") => return GenericKind::Int,
        Some("float") => return GenericKind::Float,
        Some(other) if other.ends_with("dtype") || other.ends_with("DataType") => {
            return GenericKind::DType;
        }
        Some(other) if other.ends_with("Callable") => return GenericKind::Function,
        _ => {}
    }
    let lower = name.to_ascii_lowercase();
    // PyTorch's flags of pooling, interpolation and attention are bools by name.
    let torch_flag = [
        "ceil_mode",
        "count_include_pad",
        "return_indices",
        "align_corners",
        "inplace",
        "causal",
    ]
    .iter()
    .any(|flag| lower == *flag || lower.ends_with(&format!("_{flag}")));
    let function = lower.ends_with("func") || lower.ends_with("_fn") || lower == "fn";
    if lower.contains("dtype") {
        GenericKind::DType
    } else if function {
        GenericKind::Function
    } else if torch_flag
        || ["is_", "use_", "enable_", "has_", "with_", "do_"]
            .iter()
            .any(|prefix| lower.starts_with(prefix))
        // A gemm's `trans_A`, `transpose_b` (BLAS's flags).
        || lower.starts_with("trans")
    {
        GenericKind::Bool
    } else {
        GenericKind::Int
    }
}

/// The parameters an eager kernel declares as tensors (`A: T.Tensor((M, K), dtype)` at the top
/// of its body): they are tensors, not meta parameters.
pub(crate) fn declared_tensors(def: &StmtFunctionDef) -> Vec<&str> {
    tensor_annotations(def)
        .into_iter()
        .map(|(name, _)| name)
        .collect()
}

/// For each declared tensor of an eager kernel, the name written for each of its extents, if the
/// extent is a plain name (`(M, K)` gives `M` and `K`): a call with a tensor of known shape binds
/// those `T.const` symbols. A name the body makes an alias of another (`KH, KW = K, K`) stands
/// for that other, so the call binds the symbol itself.
pub(crate) fn tensor_extent_names(def: &StmtFunctionDef) -> Vec<(String, Vec<Option<String>>)> {
    let aliases = body_aliases(def);
    let resolved = |expr: &Expr| {
        let mut name = plain_name(expr)?;
        // A chain of aliases is at most as long as the list of them.
        for _ in 0..aliases.len() {
            match aliases.iter().find(|(alias, _)| *alias == name) {
                Some((_, target)) => name.clone_from(target),
                None => break,
            }
        }
        Some(name)
    };
    tensor_annotations(def)
        .into_iter()
        .map(|(name, annotation)| {
            let extents = tensor_shape_expr(annotation)
                .map(|shape| match shape {
                    Expr::Tuple(tuple) => tuple.elts.iter().map(resolved).collect(),
                    Expr::List(list) => list.elts.iter().map(resolved).collect(),
                    single => vec![resolved(single)],
                })
                .unwrap_or_default();
            (name.to_owned(), extents)
        })
        .collect()
}

/// The plain aliases the kernel body's top level assigns: `KH = K` and `KH, KW = K, K` give
/// `(KH, K)` and `(KW, K)`.
fn body_aliases(def: &StmtFunctionDef) -> Vec<(String, String)> {
    let mut aliases = Vec::new();
    for stmt in &def.body {
        let Stmt::Assign(assign) = stmt else {
            continue;
        };
        let [target] = assign.targets.as_slice() else {
            continue;
        };
        let pairs: Vec<(&Expr, &Expr)> = match (target, &*assign.value) {
            (Expr::Tuple(targets), Expr::Tuple(values))
                if targets.elts.len() == values.elts.len() =>
            {
                targets.elts.iter().zip(&values.elts).collect()
            }
            (target, value) => vec![(target, value)],
        };
        for (target, value) in pairs {
            if let (Some(alias), Some(name)) = (plain_name(target), plain_name(value)) {
                aliases.push((alias, name));
            }
        }
    }
    aliases
}

fn plain_name(expr: &Expr) -> Option<String> {
    match expr {
        Expr::Name(name) => Some(name.id.to_string()),
        _ => None,
    }
}

/// The tensors of an eager kernel with their annotations: the parameters annotated in the
/// signature (`def k(A: T.Tensor((64,), T.float16))`), then those declared at the top of the body.
pub(crate) fn tensor_annotations(def: &StmtFunctionDef) -> Vec<(&str, &Expr)> {
    let signature = def
        .parameters
        .iter_non_variadic_params()
        .filter_map(|param| {
            let annotation = param.annotation()?;
            is_tensor_type(annotation).then_some((param.name().as_str(), annotation))
        });
    let body = def.body.iter().filter_map(|stmt| match stmt {
        Stmt::AnnAssign(ann) if ann.value.is_none() => match &*ann.target {
            Expr::Name(name) if is_tensor_type(&ann.annotation) => {
                Some((name.id.as_str(), &*ann.annotation))
            }
            _ => None,
        },
        _ => None,
    });
    signature.chain(body).collect()
}

/// `T.Tensor(...)`, `T.Tensor[...]`, `T.StridedTensor[...]`, `T.Buffer(...)`.
pub(crate) fn is_tensor_type(annotation: &Expr) -> bool {
    let head = match annotation {
        Expr::Call(call) => &*call.func,
        Expr::Subscript(subscript) => &*subscript.value,
        other => other,
    };
    dotted_name(head).is_some_and(|name| name.ends_with("Tensor") || name.ends_with("Buffer"))
}

/// The shape expression of a tensor annotation: the first argument of `T.Tensor(shape, dtype)`
/// or the first item of `T.Tensor[shape, dtype]`.
fn tensor_shape_expr(annotation: &Expr) -> Option<&Expr> {
    match annotation {
        Expr::Call(call) => call.arguments.args.first(),
        Expr::Subscript(subscript) => match &*subscript.slice {
            Expr::Tuple(tuple) => tuple.elts.first(),
            other => Some(other),
        },
        _ => None,
    }
}

impl Builder<'_> {
    /// The value of a parameter no call site gives (or gives only at run time): a symbol for an
    /// int the kernel allows to be symbolic, an assumed value otherwise.
    pub(crate) fn generic_value<'a>(&mut self, name: &str, annotation: Option<&Expr>) -> Value<'a> {
        let mut kind = generic_kind(name, annotation);
        // A name the code compares with texts is a text (`op_kind`), unless it names a dtype,
        // whose spellings are texts too and whose representatives are the floats.
        if kind == GenericKind::Int && self.compared_strings.iter().any(|(n, _)| n == name) {
            kind = GenericKind::Text;
        }
        // A "dtype" the code compares with texts that name no dtype (`dtype == "complex64"`)
        // is one of those texts: a float there takes no branch and reaches the `raise`.
        if kind == GenericKind::DType
            && self.compared_strings.iter().any(|(n, texts)| {
                n == name && texts.iter().all(|text| DType::from_name(text).is_none())
            })
        {
            kind = GenericKind::Text;
        }
        if kind == GenericKind::Function {
            // An elementwise kernel's `op_func` is whatever its caller passes: nothing tilec could
            // assume for it means anything, and calling it says so (`not-analysed`).
            return Value::Opaque(std::rc::Rc::from(format!(
                "`{name}`, a function its callers pass"
            )));
        }
        let configured = self.config_values.iter().any(|(n, ..)| n == name);
        let concrete = self.concrete_generics.iter().any(|n| n == name);
        if kind == GenericKind::Int && !configured && !concrete {
            return self.generic_symbol(name);
        }
        let (value, source) = self.assumed_value(name, kind);
        self.world.assumed_args.push(AssumedArg {
            name: name.to_owned(),
            value: value.clone(),
            source,
        });
        self.world.args.push((name.to_owned(), value.clone()));
        Value::from_const(&value)
    }

    /// The value of a factory parameter no call site gives: an object of its annotated class when
    /// the annotation names a class of the evaluated code (`in_config: CastInputConfig`), else
    /// [`Self::generic_value`].
    pub(crate) fn generic_param<'a>(
        &mut self,
        globals: &Env<'a>,
        name: &str,
        annotation: Option<&'a Expr>,
    ) -> Value<'a> {
        if let Some(annotation) = annotation {
            let strict = std::mem::replace(&mut self.strict, false);
            let class = self.eval(globals, annotation);
            self.strict = strict;
            if let Ok(Value::Class(class)) = class
                && let Some(object) = self.generic_object(name, &class)
            {
                return object;
            }
        }
        self.generic_value(name, annotation)
    }

    /// The object of a configuration class a parameter stands for: made by its constructor from
    /// what the call site's object was made with (`out_config.sf_block=(32, 1)`), the defaults of
    /// the other fields (or `__init__` parameters), and generic values, named `param.field`, for
    /// those without one. `None` when the constructor fails on them: the parameter is then
    /// generic as a whole.
    fn generic_object<'a>(
        &mut self,
        name: &str,
        class: &std::rc::Rc<crate::classes::ClassValue<'a>>,
    ) -> Option<Value<'a>> {
        let span = Span::default();
        let prefix = format!("{name}.");
        let passed: Vec<(String, ConstValue)> = self
            .object_fields
            .iter()
            .filter_map(|(key, value)| Some((key.strip_prefix(&prefix)?.to_owned(), value.clone())))
            .collect();
        // The fields the call site's object had only at run time are assumed one by one (see
        // `generic_field`); the object as a whole is, when the call site gave none of them or
        // left out fields the class needs.
        let given = passed.len();
        let mut keywords = Vec::new();
        for (field, value) in passed {
            let value = match value {
                ConstValue::RunTime => self.generic_field(name, class, &field),
                value => Value::from_const(&value),
            };
            keywords.push((field, value, span));
        }
        let mut assumed = given == 0;
        for (field, annotation) in class.required_parameters() {
            if keywords.iter().any(|(given, ..)| *given == field) {
                continue;
            }
            let value = self.generic_value(&format!("{name}.{field}"), annotation);
            keywords.push((field, value, span));
            assumed = true;
        }
        let args = crate::eval::Args {
            positional: Vec::new(),
            keywords,
            span,
        };
        let strict = std::mem::replace(&mut self.strict, false);
        let object = self.instantiate_class(class, args, span);
        self.strict = strict;
        let object = object.ok()?;
        if assumed {
            let source = if given == 0 {
                "an object made with the defaults of its class"
            } else {
                "an object made as the call site makes it, with the defaults of its class"
            };
            self.world.assumed_args.push(AssumedArg {
                name: name.to_owned(),
                value: ConstValue::Str(format!("{}(...)", class.name)),
                source: source.to_owned(),
            });
        }
        Some(object)
    }

    /// A field of a config object that the call site's object has only at run time: its class's
    /// compile-time default, said as an assumption, else a generic value named `param.field`.
    fn generic_field<'a>(
        &mut self,
        name: &str,
        class: &crate::classes::ClassValue<'a>,
        field: &str,
    ) -> Value<'a> {
        let full_name = format!("{name}.{field}");
        let default =
            class.fields.iter().flatten().find_map(|(known, default)| {
                (known == field).then_some(default.as_ref()).flatten()
            });
        match default.and_then(Value::to_const) {
            Some(value) => {
                self.world.assumed_args.push(AssumedArg {
                    name: full_name,
                    value: value.clone(),
                    source: "its class's default; the call site's is known at run time".to_owned(),
                });
                Value::from_const(&value)
            }
            None => self.generic_value(&full_name, None),
        }
    }

    /// An eager `T.const` symbol no call site binds: symbolic, unless the previous build showed
    /// that it must be known at compile time.
    pub(crate) fn generic_const<'a>(&mut self, name: &str) -> Value<'a> {
        if self.concrete_generics.iter().any(|n| n == name) {
            return self.generic_value(name, None);
        }
        self.generic_symbol(name)
    }

    fn generic_symbol<'a>(&mut self, name: &str) -> Value<'a> {
        let var = self.world.exprs.var(name, None);
        self.generic_vars.push((var, name.to_owned()));
        if !self.world.symbolic_args.iter().any(|n| n == name) {
            self.world.symbolic_args.push(name.to_owned());
        }
        Value::Index(self.world.exprs.var_expr(var))
    }

    /// The kernel's own config value for `name`, else the representative choice for its kind.
    fn assumed_value(&self, name: &str, kind: GenericKind) -> (ConstValue, String) {
        if let Some((_, value, source)) = self.config_values.iter().find(|(n, ..)| n == name) {
            return (value.clone(), source.clone());
        }
        let round = self.representative_round(name);
        let candidates = self.candidates(name, kind);
        let value = candidates[round.min(candidates.len() - 1)].clone();
        let asserted = self.asserted_ints.iter().any(|(n, _)| n == name);
        let source = match (asserted, round) {
            (true, 0) => "the first value the kernel's `assert` allows",
            (true, _) => "a value the kernel's `assert` allows",
            (false, 0) => "a representative choice",
            (false, _) => "a representative choice the kernel accepts",
        };
        (value, source.to_owned())
    }

    /// The values a generic parameter of `kind` is tried with: the literals the code compares a
    /// text with, the representatives of its kind otherwise. Never empty.
    fn candidates(&self, name: &str, kind: GenericKind) -> Vec<ConstValue> {
        if kind == GenericKind::Text
            && let Some((_, strings)) = self.compared_strings.iter().find(|(n, _)| n == name)
            && !strings.is_empty()
        {
            return strings.iter().cloned().map(ConstValue::Str).collect();
        }
        // `assert n in (0, 64)` says which values the kernel takes: no other is worth a build.
        if kind == GenericKind::Int
            && let Some((_, allowed)) = self.asserted_ints.iter().find(|(n, _)| n == name)
        {
            return allowed
                .iter()
                .map(|&value| ConstValue::Int(value))
                .collect();
        }
        let mut candidates = representatives(name, kind);
        // A block size the kernel's own thread-index tests need (`elif tx >= 256:` gives work
        // to a third warpgroup) comes first: with fewer threads the branches it tests are dead,
        // and the warpgroups they give work to do not exist.
        if kind == GenericKind::Int
            && let Some(&(_, least)) = self.thread_count_floors.iter().find(|(n, _)| n == name)
        {
            candidates.retain(|value| !matches!(value, ConstValue::Int(v) if *v < least));
            candidates.insert(0, ConstValue::Int(least));
            candidates.dedup();
        }
        // The ints the kernel compares the parameter with come right after the representative
        // choice: `assert threads == 384` rejects 128 and accepts nothing else.
        if kind == GenericKind::Int
            && let Some((_, ints)) = self.compared_ints.iter().find(|(n, _)| n == name)
        {
            let rest = candidates.split_off(1);
            for value in ints
                .iter()
                .filter(|&&v| v >= 1)
                .map(|&v| ConstValue::Int(v))
            {
                if !candidates.contains(&value) {
                    candidates.push(value);
                }
            }
            for value in rest {
                if !candidates.contains(&value) {
                    candidates.push(value);
                }
            }
        }
        candidates
    }

    fn representative_round(&self, name: &str) -> usize {
        self.representative_rounds
            .iter()
            .find(|(n, _)| n == name)
            .map_or(0, |(_, round)| *round)
    }

    /// After a build whose `assert` failed: moves the first parameter with a representative value
    /// that the failing statements use on to its next candidate (to its next larger one when an
    /// extent came out too small). False when there is none left to try, and the failure stands.
    pub(crate) fn next_representative(
        &self,
        used: &[String],
        rounds: &mut Vec<(String, usize)>,
    ) -> bool {
        if !self.rejected_oversized_shared.is_empty() {
            return self.shrink_representatives(used, rounds);
        }
        for assumed in &self.world.assumed_args {
            if !used.contains(&assumed.name)
                || self.config_values.iter().any(|(n, ..)| *n == assumed.name)
            {
                continue;
            }
            let kind = match assumed.value {
                ConstValue::Int(_) => GenericKind::Int,
                ConstValue::Bool(_) => GenericKind::Bool,
                ConstValue::DType(_) => GenericKind::DType,
                ConstValue::Str(_)
                    if self
                        .compared_strings
                        .iter()
                        .any(|(n, _)| *n == assumed.name) =>
                {
                    GenericKind::Text
                }
                _ => continue,
            };
            let candidates = self.candidates(&assumed.name, kind);
            let round = self.representative_round(&assumed.name);
            // An extent that came out too small grows with its sizes: only larger values help.
            let next = match (&assumed.value, self.rejected_small_extent) {
                (ConstValue::Int(current), Some(_)) => (round + 1..candidates.len())
                    .find(|&next| matches!(candidates[next], ConstValue::Int(v) if v > *current)),
                _ => Some(round + 1).filter(|&next| next < candidates.len()),
            };
            let Some(next) = next else {
                continue;
            };
            rounds.retain(|(n, _)| *n != assumed.name);
            rounds.push((assumed.name.clone(), next));
            return true;
        }
        false
    }

    /// After a build whose shared buffers did not fit: moves every assumed int the allocations
    /// read to its next smaller candidate, together (a 128 × 128 tile of a kernel its callers
    /// run at 64 × 64 shrinks in one step, not through 1 × 128). Tiles stop at 16, the smallest
    /// a tensor-core operand takes: past it the kernel's other constraints fail, not its
    /// memory. False when none moves.
    fn shrink_representatives(&self, used: &[String], rounds: &mut Vec<(String, usize)>) -> bool {
        const SMALLEST_TILE: i64 = 16;
        let mut moved = false;
        for assumed in &self.world.assumed_args {
            let ConstValue::Int(current) = assumed.value else {
                continue;
            };
            if !used.contains(&assumed.name)
                || self.config_values.iter().any(|(n, ..)| *n == assumed.name)
            {
                continue;
            }
            let candidates = self.candidates(&assumed.name, GenericKind::Int);
            let round = self.representative_round(&assumed.name);
            let next = (round + 1..candidates.len()).find(|&next| {
                matches!(candidates[next], ConstValue::Int(v) if (SMALLEST_TILE..current).contains(&v))
            });
            if let Some(next) = next {
                rounds.retain(|(n, _)| *n != assumed.name);
                rounds.push((assumed.name.clone(), next));
                moved = true;
            }
        }
        moved
    }

    /// When no candidate is accepted: the failure that rejected the assumed values is tilec's
    /// limit, not the user's error, if the failing statement uses one of them (`assert
    /// num_per_tokens == 128` where `num_per_tokens` comes from an object tilec made with its
    /// class's defaults). It is reported as not analysed, naming the values.
    pub(crate) fn blame_assumptions(&mut self, used: &[String]) {
        let assumed: Vec<String> = self
            .world
            .assumed_args
            .iter()
            .filter(|arg| used.contains(&arg.name))
            .map(|arg| format!("`{}` = {}", arg.name, arg.value))
            .collect();
        let Some(index) = self.rejection_diagnostic else {
            return;
        };
        let Some(diagnostic) = self.diagnostics.get_mut(index) else {
            return;
        };
        if assumed.is_empty() || !diagnostic.severity.stops_analysis() {
            return;
        }
        let message = format!(
            "{} with the values tilec assumed for this generic instance ({}), and with every \
             other candidate it tried: tilec cannot analyse the kernel without values it accepts",
            diagnostic.message,
            assumed.join(", ")
        );
        *diagnostic = Diagnostic::not_analysed(diagnostic.anchor, message).with_help(
            "pass the values at a call site, or list the instance in tilec.toml, to analyse it \
             with yours",
        );
    }

    /// The generic symbols this build needed as compile-time values: those in the shape of a
    /// buffer that is not global memory or in the extent of a `T.Parallel` loop. When the build
    /// failed, a symbol may have reached something else that must be known (a thread count, a
    /// compile-time branch): then the symbols that size no global tensor are demanded first, as
    /// sizes of global memory are what varies at run time, and all of them if that was done.
    pub(crate) fn demanded_generics(&self) -> Vec<String> {
        if self.world.symbolic_args.is_empty() {
            return Vec::new();
        }
        let failed = self
            .diagnostics
            .iter()
            .any(|diagnostic| diagnostic.severity.stops_analysis());
        let global = |buffer| self.world.scopes.get(buffer) == Some(&Scope::Global);
        let local_shapes = self
            .world
            .shapes
            .iter()
            .filter(|(buffer, _)| !global(*buffer));
        let global_shapes = self
            .world
            .shapes
            .iter()
            .filter(|(buffer, _)| global(*buffer));
        let parallel_extents = self
            .world
            .loops
            .iter()
            .filter(|(_, info)| info.kind == LoopKind::Parallel)
            .flat_map(|(_, info)| info.extents.iter().copied());
        let mut demanded = self.generic_names(
            local_shapes
                .flat_map(|(_, shape)| shape.iter().copied())
                .chain(parallel_extents),
        );
        // A launch learns a symbol at run time only from a tensor dimension that is that symbol
        // alone (`A: (M, K)` gives `M`); one that is not (`scale` in arithmetic, a size seen only
        // as `groups * group_size`) would reach the code with no value: it is assumed.
        // Strides count too: a launch reads them from the tensor as it does the shape.
        let bare_dims = self.world.params.iter().flat_map(|&param| {
            let shape = self.world.shapes.get(param).into_iter().flatten();
            let strides = self.world.strides.get(param).into_iter().flatten();
            shape
                .chain(strides)
                .copied()
                .filter(|&dim| matches!(self.world.exprs.get(dim), tilec_ir::Expr::Var(_)))
        });
        let recoverable = self.generic_names(bare_dims);
        demanded.extend(
            self.world
                .symbolic_args
                .iter()
                .map(String::as_str)
                .filter(|name| !recoverable.contains(name)),
        );
        if failed {
            let sizes = self.generic_names(global_shapes.flat_map(|(_, s)| s.iter().copied()));
            let configs: Vec<&String> = self
                .world
                .symbolic_args
                .iter()
                .filter(|name| !sizes.contains(name.as_str()))
                .collect();
            if configs.is_empty() {
                return self.world.symbolic_args.clone();
            }
            demanded.extend(configs.into_iter().map(String::as_str));
        }
        self.world
            .symbolic_args
            .iter()
            .filter(|name| demanded.contains(name.as_str()))
            .cloned()
            .collect()
    }

    /// Whether `value` is an integer expression over generic symbols alone (at least one), such as
    /// the test of `assert hidden % 512 == 0` with `hidden` symbolic.
    pub(crate) fn over_generic_symbols(&self, value: &Value<'_>) -> bool {
        let mut indices = Vec::new();
        match value {
            Value::Index(expr) => indices.push(*expr),
            // A comparison of symbols is a data expression: its leaves must be constants and
            // index expressions, with no buffer read among them.
            Value::Data { id, .. } => {
                let mut stack = vec![*id];
                while let Some(next) = stack.pop() {
                    let node = self.world.data.get(next);
                    match node {
                        DataExpr::Index(expr) => indices.push(*expr),
                        DataExpr::Int { .. } | DataExpr::Float { .. } => {}
                        DataExpr::Binary { .. }
                        | DataExpr::Compare { .. }
                        | DataExpr::Not(_)
                        | DataExpr::Neg(_)
                        | DataExpr::Cast { .. }
                        | DataExpr::Select { .. } => stack.extend(node.operands()),
                        _ => return false,
                    }
                }
            }
            _ => return false,
        }
        let vars: Vec<_> = indices
            .iter()
            .flat_map(|expr| self.world.exprs.vars_of(*expr))
            .collect();
        !vars.is_empty()
            && vars
                .iter()
                .all(|var| self.generic_vars.iter().any(|(v, _)| v == var))
    }

    /// The generic parameters whose symbols occur in `extents`.
    fn generic_names(&self, extents: impl Iterator<Item = tilec_ir::ExprId>) -> FxHashSet<&str> {
        let mut names = FxHashSet::default();
        for extent in extents {
            for var in self.world.exprs.vars_of(extent) {
                if let Some((_, name)) = self.generic_vars.iter().find(|(v, _)| *v == var) {
                    names.insert(name.as_str());
                }
            }
        }
        names
    }

    /// Says, once per instance, which parameters the analysis kept symbolic and which it assumed.
    pub(crate) fn note_generic_instance(&mut self, def: &StmtFunctionDef, origin: Option<Span>) {
        let symbolic = &self.world.symbolic_args;
        let assumed = &self.world.assumed_args;
        if symbolic.is_empty() && assumed.is_empty() {
            return;
        }
        let mut parts = Vec::new();
        if !symbolic.is_empty() {
            let names: Vec<String> = symbolic.iter().map(|name| format!("`{name}`")).collect();
            parts.push(format!("{} symbolic", names.join(", ")));
        }
        if self.generic_preconditions > 0 {
            parts.push(format!(
                "{} `assert`(s) on the symbols taken as preconditions the callers meet",
                self.generic_preconditions
            ));
        }
        if !assumed.is_empty() {
            let values: Vec<String> = assumed
                .iter()
                .map(|arg| format!("`{}` = {} ({})", arg.name, arg.value, arg.source))
                .collect();
            parts.push(format!("{} assumed", values.join(", ")));
        }
        let message = format!(
            "`{}` is analysed as a generic instance, without compile-time values for some \
             parameters: {}",
            def.name,
            parts.join("; ")
        );
        let anchor = Anchor::Span(origin.unwrap_or_else(|| range_span(&def.name)));
        self.diagnostics.push(
            Diagnostic::info(Code::GenericInstance, anchor, message).with_help(
                "pass the values at a call site, or list the instance in tilec.toml, to analyse \
                 it with yours",
            ),
        );
    }

    /// The kernel's own configs, for parameters no call site gives: the first config of its
    /// `@autotune(configs=...)`, else a module-level `get_configs()` / `default_config`. Evaluated
    /// leniently: a config tilec cannot evaluate gives nothing.
    pub(crate) fn read_configs<'a>(&mut self, globals: &Env<'a>, def: &'a StmtFunctionDef) {
        self.autotuned = autotune_decorator(def).is_some();
        let from_decorator = self
            .autotune_first_config(globals, def)
            .map(|config| (config, "the first `@autotune` config".to_owned()));
        let found = from_decorator.or_else(|| {
            let strict = std::mem::replace(&mut self.strict, false);
            let module = self.module_config(globals);
            self.strict = strict;
            let (value, source) = module?;
            Some((first_config(value)?, source))
        });
        let Some((config, source)) = found else {
            return;
        };
        for (key, value) in config {
            if let Some(value) = value.to_const() {
                self.config_values.push((key, value, source.clone()));
            }
        }
    }

    /// The first config of `def`'s `@autotune(configs=...)` decorator, evaluated leniently in
    /// `env` (the scope `def` is defined in): the values the autotuner passes first, by parameter
    /// name. `None` without the decorator or when its configs do not evaluate to a list of dicts.
    pub(crate) fn autotune_first_config<'a>(
        &mut self,
        env: &Env<'a>,
        def: &'a StmtFunctionDef,
    ) -> Option<Vec<(String, Value<'a>)>> {
        let call = autotune_decorator(def)?;
        let configs = call.arguments.keywords.iter().find_map(|keyword| {
            (keyword.arg.as_ref()?.as_str() == "configs").then_some(&keyword.value)
        })?;
        let strict = std::mem::replace(&mut self.strict, false);
        let value = self.eval(env, configs).ok();
        self.strict = strict;
        first_config(value?)
    }

    /// `get_configs()`, `default_config` or `autotune_configs` of the module, if one evaluates.
    fn module_config<'a>(&mut self, globals: &Env<'a>) -> Option<(Value<'a>, String)> {
        for name in [
            "default_config",
            "DEFAULT_CONFIG",
            "get_configs",
            "autotune_configs",
        ] {
            let Some(value) = crate::value::lookup(globals, name) else {
                continue;
            };
            let value = match value {
                Value::Function(function) => {
                    let args = crate::eval::Args {
                        positional: Vec::new(),
                        keywords: Vec::new(),
                        span: Span::default(),
                    };
                    match self.call_function(&function, args, Span::default()) {
                        Ok(value) => value,
                        Err(_) => continue,
                    }
                }
                other => other,
            };
            if matches!(value, Value::List(_) | Value::Tuple(_) | Value::Dict(_)) {
                let source = if name.starts_with("get_") {
                    format!("the first config of `{name}()`")
                } else {
                    format!("`{name}`")
                };
                return Some((value, source));
            }
        }
        None
    }
}

/// The `@autotune(...)` (or `@tilelang.autotune(...)`) call among `def`'s decorators.
fn autotune_decorator(def: &StmtFunctionDef) -> Option<&ruff_python_ast::ExprCall> {
    def.decorator_list.iter().find_map(|decorator| {
        let Expr::Call(call) = &decorator.expression else {
            return None;
        };
        let name = dotted_name(&call.func)?;
        (name == "autotune" || name.ends_with(".autotune")).then_some(call)
    })
}

/// The first config of an autotuner's `configs` (a list or tuple of dicts, or one dict), as
/// (parameter name, value) pairs; keys that are not texts are left out.
fn first_config(configs: Value<'_>) -> Option<Vec<(String, Value<'_>)>> {
    let first = match configs {
        Value::List(items) | Value::Tuple(items) => items.first().cloned(),
        dict @ Value::Dict(_) => Some(dict),
        _ => None,
    };
    let Some(Value::Dict(entries)) = first else {
        return None;
    };
    Some(
        entries
            .iter()
            .filter_map(|(key, value)| match key {
                Value::Str(key) => Some((key.to_string(), value.clone())),
                _ => None,
            })
            .collect(),
    )
}

/// For each name the code compares with string literals (`x == "sum"`, `"sum" != x`,
/// `x in ("sum", "mean")`), those literals in the order written, at any depth of `body`.
pub(crate) fn compared_strings(body: &[Stmt]) -> Vec<(String, Vec<String>)> {
    compared_literals(body, |literal| match literal {
        Expr::StringLiteral(text) => Some(text.value.to_str().to_owned()),
        _ => None,
    })
}

/// [`compared_strings`] of `body`, and for a name that `body` passes to a function of the module
/// (`_act_fn(activation)`), the texts that function compares its parameter with (`if name ==
/// "silu_and_mul":`): one call deep, where helpers pick an operation by name.
pub(crate) fn compared_strings_through_calls(
    body: &[Stmt],
    module: &[&Stmt],
) -> Vec<(String, Vec<String>)> {
    use ruff_python_ast::visitor::{Visitor, walk_expr};
    struct Calls<'m> {
        helpers: Vec<&'m StmtFunctionDef>,
        found: Vec<(String, Vec<String>)>,
    }
    impl Calls<'_> {
        fn add(&mut self, name: &str, helper: &StmtFunctionDef, parameter: &str) {
            let Some((_, texts)) = compared_strings(&helper.body)
                .into_iter()
                .find(|(compared, _)| compared == parameter)
            else {
                return;
            };
            add_unique(&mut self.found, name, texts);
        }
    }
    impl<'a> Visitor<'a> for Calls<'_> {
        fn visit_expr(&mut self, expr: &'a Expr) {
            if let Expr::Call(call) = expr
                && let Expr::Name(callee) = &*call.func
                && let Some(&helper) = self
                    .helpers
                    .iter()
                    .find(|helper| helper.name.as_str() == callee.id.as_str())
            {
                let parameters: Vec<String> = helper
                    .parameters
                    .iter_non_variadic_params()
                    .map(|p| p.name().to_string())
                    .collect();
                for (arg, parameter) in call.arguments.args.iter().zip(&parameters) {
                    if let Expr::Name(name) = arg {
                        self.add(name.id.as_str(), helper, parameter);
                    }
                }
                for keyword in &call.arguments.keywords {
                    if let (Some(parameter), Expr::Name(name)) = (&keyword.arg, &keyword.value) {
                        self.add(name.id.as_str(), helper, parameter.as_str());
                    }
                }
            }
            walk_expr(self, expr);
        }
    }
    let mut found = compared_strings(body);
    let helpers = module
        .iter()
        .filter_map(|stmt| match stmt {
            Stmt::FunctionDef(def) => Some(def),
            _ => None,
        })
        .collect();
    let mut calls = Calls {
        helpers,
        found: Vec::new(),
    };
    for stmt in body {
        calls.visit_stmt(stmt);
    }
    for (name, texts) in calls.found {
        add_unique(&mut found, &name, texts);
    }
    found
}

/// Adds `values` to the list of `name` in `found` (a new entry at the end if it has none), each
/// value once, in the order given.
fn add_unique<T: PartialEq>(
    found: &mut Vec<(String, Vec<T>)>,
    name: &str,
    values: impl IntoIterator<Item = T>,
) {
    let index = match found.iter().position(|(n, _)| n == name) {
        Some(index) => index,
        None => {
            found.push((name.to_owned(), Vec::new()));
            found.len() - 1
        }
    };
    for value in values {
        if !found[index].1.contains(&value) {
            found[index].1.push(value);
        }
    }
}

/// Threads of a warpgroup: the unit hand-written warp specialization gives roles to.
const WARPGROUP: i64 = 128;

/// For each name passed as a launch's `threads=` (`T.Kernel(..., threads=threads)`), the fewest
/// threads that make every test of the thread index in `body` go both ways: one warpgroup past
/// the largest bound tested (`if tx < 128: ... elif tx >= 256:` needs 384, `with T.ws(2):` the
/// same). Only bounds of a warpgroup or more count; none gives no entry.
pub(crate) fn thread_count_floors(body: &[Stmt]) -> Vec<(String, i64)> {
    use ruff_python_ast::visitor::{Visitor, walk_expr, walk_stmt};
    #[derive(Default)]
    struct Collect {
        thread_names: Vec<String>,
        counts: Vec<String>,
        bound: i64,
    }
    impl Collect {
        /// The thread index this expression scales: `tx` gives 1, `tx // 128` gives 128.
        fn scale_of_thread(&self, expr: &Expr) -> Option<i64> {
            match expr {
                Expr::Name(name) if self.thread_names.iter().any(|t| t == name.id.as_str()) => {
                    Some(1)
                }
                Expr::BinOp(binary) if binary.op == ruff_python_ast::Operator::FloorDiv => {
                    let divisor = int_literal(&binary.right)?;
                    Some(self.scale_of_thread(&binary.left)?.checked_mul(divisor)?)
                }
                _ => None,
            }
        }
    }
    fn int_literal(expr: &Expr) -> Option<i64> {
        match expr {
            Expr::NumberLiteral(number) => number.value.as_int()?.as_i64(),
            _ => None,
        }
    }
    impl<'a> Visitor<'a> for Collect {
        fn visit_stmt(&mut self, stmt: &'a Stmt) {
            if let Stmt::Assign(assign) = stmt
                && let Expr::Call(call) = &*assign.value
                && dotted_name(&call.func).is_some_and(|f| f.ends_with("get_thread_binding"))
            {
                for target in &assign.targets {
                    if let Expr::Name(name) = target {
                        self.thread_names.push(name.id.to_string());
                    }
                }
            }
            walk_stmt(self, stmt);
        }
        fn visit_expr(&mut self, expr: &'a Expr) {
            match expr {
                Expr::Compare(compare) => {
                    let operands: Vec<&Expr> = std::iter::once(&*compare.left)
                        .chain(compare.comparators.iter())
                        .collect();
                    for pair in operands.windows(2) {
                        let found = match (self.scale_of_thread(pair[0]), int_literal(pair[1])) {
                            (Some(scale), Some(value)) => Some((scale, value)),
                            _ => self.scale_of_thread(pair[1]).zip(int_literal(pair[0])),
                        };
                        if let Some((scale, value)) = found {
                            self.bound = self.bound.max(scale.saturating_mul(value));
                        }
                    }
                }
                Expr::Call(call) => {
                    let callee = dotted_name(&call.func);
                    if callee.as_deref().is_some_and(|f| f.ends_with(".ws"))
                        && let Some(role) = call.arguments.args.first().and_then(int_literal)
                    {
                        self.bound = self.bound.max(role.saturating_mul(WARPGROUP));
                    }
                    if callee.as_deref().is_some_and(|f| f.ends_with(".Kernel")) {
                        for keyword in &call.arguments.keywords {
                            if keyword
                                .arg
                                .as_ref()
                                .is_some_and(|a| a.as_str() == "threads")
                                && let Expr::Name(name) = &keyword.value
                            {
                                self.counts.push(name.id.to_string());
                            }
                        }
                    }
                }
                _ => {}
            }
            walk_expr(self, expr);
        }
    }
    let mut collect = Collect::default();
    for stmt in body {
        collect.visit_stmt(stmt);
    }
    if collect.bound < WARPGROUP {
        return Vec::new();
    }
    let least = (collect.bound / WARPGROUP + 1) * WARPGROUP;
    collect
        .counts
        .into_iter()
        .map(|name| (name, least))
        .collect()
}

/// For each name the code compares with int literals (`assert threads == 384`, `if n in (1, 2)`),
/// those ints in the order written: values the kernel's own checks single out, tried when the
/// representative values are rejected.
pub(crate) fn compared_ints(body: &[Stmt]) -> Vec<(String, Vec<i64>)> {
    compared_literals(body, |literal| match literal {
        Expr::NumberLiteral(number) => number.value.as_int()?.as_i64(),
        _ => None,
    })
}

/// For each name a top-level `assert` of `body` pins to int literals (`assert n in (0, 64)`,
/// `assert threads == 384`, several joined by `and`), the values it allows, in the order written.
pub(crate) fn asserted_ints(body: &[Stmt]) -> Vec<(String, Vec<i64>)> {
    use ruff_python_ast::CmpOp;
    fn allowed(test: &Expr, found: &mut Vec<(String, Vec<i64>)>) {
        match test {
            Expr::BoolOp(bool_op) if bool_op.op == ruff_python_ast::BoolOp::And => {
                for value in &bool_op.values {
                    allowed(value, found);
                }
            }
            Expr::Compare(compare) => {
                let ([op], [compared], Expr::Name(name)) =
                    (&compare.ops[..], &compare.comparators[..], &*compare.left)
                else {
                    return;
                };
                let int = |expr: &Expr| match expr {
                    Expr::NumberLiteral(number) => number.value.as_int()?.as_i64(),
                    _ => None,
                };
                let values: Option<Vec<i64>> = match (op, compared) {
                    (CmpOp::Eq, single) => int(single).map(|value| vec![value]),
                    (CmpOp::In, Expr::Tuple(items)) => items.elts.iter().map(int).collect(),
                    (CmpOp::In, Expr::List(items)) => items.elts.iter().map(int).collect(),
                    (CmpOp::In, Expr::Set(items)) => items.elts.iter().map(int).collect(),
                    _ => None,
                };
                if let Some(values) = values.filter(|values| !values.is_empty())
                    && !found.iter().any(|(n, _)| *n == name.id.as_str())
                {
                    found.push((name.id.to_string(), values));
                }
            }
            _ => {}
        }
    }
    let mut found = Vec::new();
    for stmt in body {
        if let Stmt::Assert(assert) = stmt {
            allowed(&assert.test, &mut found);
        }
    }
    found
}

/// For each name compared (`==`, `!=`, `in`, ...) with literals that `literal` reads, those
/// values in the order written, at any depth of `body`; a tuple, list or set of literals gives
/// each of its items.
fn compared_literals<T: PartialEq>(
    body: &[Stmt],
    literal: fn(&Expr) -> Option<T>,
) -> Vec<(String, Vec<T>)> {
    use ruff_python_ast::visitor::{Visitor, walk_expr};
    struct Collect<T> {
        found: Vec<(String, Vec<T>)>,
        literal: fn(&Expr) -> Option<T>,
    }
    impl<T: PartialEq> Collect<T> {
        fn add(&mut self, name: &str, compared: &Expr) {
            let values: Vec<T> = match compared {
                Expr::Tuple(items) => items.elts.iter().filter_map(self.literal).collect(),
                Expr::List(items) => items.elts.iter().filter_map(self.literal).collect(),
                Expr::Set(items) => items.elts.iter().filter_map(self.literal).collect(),
                single => (self.literal)(single).into_iter().collect(),
            };
            if values.is_empty() {
                return;
            }
            add_unique(&mut self.found, name, values);
        }
    }
    impl<'a, T: PartialEq> Visitor<'a> for Collect<T> {
        fn visit_expr(&mut self, expr: &'a Expr) {
            if let Expr::Compare(compare) = expr
                && let [comparator] = &compare.comparators[..]
            {
                match (&*compare.left, comparator) {
                    (Expr::Name(name), compared) | (compared, Expr::Name(name)) => {
                        self.add(name.id.as_str(), compared);
                    }
                    _ => {}
                }
            }
            walk_expr(self, expr);
        }
    }
    let mut collect = Collect {
        found: Vec::new(),
        literal,
    };
    for stmt in body {
        collect.visit_stmt(stmt);
    }
    collect.found
}
