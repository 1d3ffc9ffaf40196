//! The values the meta-evaluator computes: Python values known at compile time, and the IR handles
//! (index expressions, data expressions, buffers, regions) that kernel code builds from them.

use std::cell::RefCell;
use std::fmt::Write as _;
use std::rc::{Rc, Weak};

use ruff_python_ast::{ExprLambda, StmtFunctionDef};
use rustc_hash::FxHashMap;
use tilec_ir::{
    ConstValue, DType, DataId, EntityId, ExprId, LayoutAnnotation, LoopKind, Region, WarpPolicy,
};

/// A module the evaluator knows by its import.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Module {
    /// `tilelang.language`, usually imported as `T`.
    Language,
    /// `tilelang` itself (`tilelang.jit`, `tilelang.compile`, `tilelang.PassConfigKey`).
    Tilelang,
    Math,
    /// `argparse`: parsers are modelled so that `args.m` is the argument's default.
    Argparse,
    /// `itertools` (`product`, for autotune configuration lists).
    Itertools,
    /// `torch`: tensor constructors and dtypes (see `torch.rs`).
    Torch,
    /// `functools`: caching decorators pass their function through; `partial` binds arguments.
    Functools,
    /// `tilelang.carver.arch.driver` and `torch.cuda`: what they tell of the GPU is the target's.
    Driver,
    /// `tilelang.tools.cuda.iket`, TileLang's in-kernel event tracing: its ranges and marks record
    /// timestamps for a profiler and change no result, so tilec enters and drops them.
    Iket,
    /// TVM's IR namespace, `tvm.tirx` (TileLang's fork) or `tvm.tir`, which kernels reach past the
    /// language module for typed constants and a few expression constructors; each is the
    /// language operation of the same meaning (see `Builder::tir_call`).
    Tir,
    /// `tvm` itself, reached for its IR namespace and `DataType`.
    Tvm,
    /// `os`, for the environment a module reads its settings from: tilec reads the environment
    /// as empty, so `os.environ.get(name, default)` and `os.getenv(name, default)` are the
    /// default (the analysis does not depend on the shell it runs in).
    Os,
}

/// Python builtins the evaluator implements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Builtin {
    Min,
    Max,
    Abs,
    Int,
    Float,
    Bool,
    Str,
    Len,
    Range,
    Sum,
    Tuple,
    List,
    Round,
    Pow,
    Print,
    Enumerate,
    Zip,
    IsInstance,
    Divmod,
    Dict,
    GetAttr,
    HasAttr,
    Any,
    All,
    Sorted,
    Reversed,
}

impl Builtin {
    pub(crate) fn from_name(name: &str) -> Option<Builtin> {
        Some(match name {
            "min" => Builtin::Min,
            "max" => Builtin::Max,
            "abs" => Builtin::Abs,
            "int" => Builtin::Int,
            "float" => Builtin::Float,
            "bool" => Builtin::Bool,
            "str" => Builtin::Str,
            "len" => Builtin::Len,
            "range" => Builtin::Range,
            "sum" => Builtin::Sum,
            "tuple" => Builtin::Tuple,
            "list" => Builtin::List,
            "round" => Builtin::Round,
            "pow" => Builtin::Pow,
            "print" => Builtin::Print,
            "enumerate" => Builtin::Enumerate,
            "zip" => Builtin::Zip,
            "isinstance" => Builtin::IsInstance,
            "divmod" => Builtin::Divmod,
            "dict" => Builtin::Dict,
            "getattr" => Builtin::GetAttr,
            "hasattr" => Builtin::HasAttr,
            "any" => Builtin::Any,
            "all" => Builtin::All,
            "sorted" => Builtin::Sorted,
            "reversed" => Builtin::Reversed,
            _ => return None,
        })
    }
}

/// A user-defined function or lambda with the scope it closes over.
#[derive(Clone, Debug)]
pub(crate) struct Function<'a> {
    pub body: FunctionBody<'a>,
    pub closure: Env<'a>,
    /// Decorated with `T.prim_func`: calling it is not allowed, instantiating it builds a kernel.
    pub prim_func: bool,
    /// Parameter defaults, evaluated once where the function is defined, as Python does.
    pub defaults: Vec<(String, Value<'a>)>,
    /// The first config of its `@autotune(configs=...)` decorator: the autotuner passes these
    /// for the parameters a call leaves out (or leaves at `None`), so a call such as `kernel()`
    /// sees them instead of the defaults. Empty without that decorator.
    pub autotune_config: Vec<(String, Value<'a>)>,
    /// The imported workspace module that defines it (`None`: the file itself).
    pub module: Option<usize>,
}

/// The function and arguments of a `functools.partial`.
#[derive(Debug)]
pub(crate) struct Partial<'a> {
    pub function: Value<'a>,
    pub positional: Vec<Value<'a>>,
    pub keywords: Vec<(String, Value<'a>)>,
}

#[derive(Clone, Copy, Debug)]
pub(crate) enum FunctionBody<'a> {
    Def(&'a StmtFunctionDef),
    Lambda(&'a ExprLambda),
}

#[derive(Clone, Debug)]
pub(crate) enum Value<'a> {
    None,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(Rc<str>),
    Tuple(Rc<Vec<Value<'a>>>),
    List(Rc<Vec<Value<'a>>>),
    Dict(Rc<Vec<(Value<'a>, Value<'a>)>>),
    Range {
        start: i64,
        stop: i64,
        step: i64,
    },
    DType(DType),
    /// A symbolic integer: a loop variable, a block index, an unbound const, or arithmetic on them.
    Index(ExprId),
    /// A value only known when the kernel runs.
    Data {
        id: DataId,
        dtype: Option<DType>,
    },
    Buffer(EntityId),
    /// `A[a:b, y]`: a region of a buffer, or one element when every dimension is a point.
    Region(Region),
    Function(Rc<Function<'a>>),
    Builtin(Builtin),
    Module(Module),
    /// A function or constant of the language module, by name (`T.copy`).
    ModuleFn(Module, Rc<str>),
    /// `buffer.data`: where a buffer's storage starts, which `T.Tensor(shape, dtype, data)`
    /// views with another shape (the storage's buffer, never an alias).
    DataPointer(EntityId),
    /// `T.GemmWarpPolicy` and its members.
    PolicyEnum,
    Policy(WarpPolicy),
    /// `tilelang.PassConfigKey`.
    PassConfigKeys,
    /// `T.Tensor(shape, dtype)`: the annotation of a tensor parameter; `strides` of a
    /// `T.StridedTensor(shape, strides, dtype)`.
    TensorType {
        shape: Rc<Vec<Value<'a>>>,
        dtype: DType,
        strides: Option<Rc<Vec<Value<'a>>>>,
    },
    /// `T.Kernel(...)`, waiting for its `with`.
    KernelFrame {
        grid: Vec<ExprId>,
        threads: Vec<i64>,
        /// `prelude=`: CUDA source placed before the kernel, as `T.import_source` does (the
        /// inner `None` for a text tilec cannot know).
        prelude: Option<Option<Rc<str>>>,
    },
    /// `T.Parallel(...)`, `T.Pipelined(...)`, ..., waiting for its `for`.
    LoopFrame {
        kind: LoopKind,
        extents: Vec<ExprId>,
        start: Option<ExprId>,
        /// The distance between consecutive values of a one-variable loop (`T.serial(0, n, 2)`),
        /// `None` for 1: the variable is `start + i * step` for `i` in `0..extent`.
        step: Option<ExprId>,
    },
    Layout(Rc<LayoutAnnotation>),
    /// `T.Persistent(domain, wave_size, index, group_size)`, waiting for its `for`.
    PersistentFrame(Rc<PersistentTiles>),
    /// `T.ws(...)`, waiting for its `with`: the body is a runtime `if` on this condition.
    GuardFrame(DataId),
    /// A context manager entered for no effect on the kernel (`iket.range`, `iket.session`).
    NoOpFrame,
    /// `T.If(cond)`, waiting for its `with`: its body is `with T.Then():` and `with T.Else():`.
    IfFrame(Rc<Value<'a>>),
    /// `T.Then()` (true) or `T.Else()` (false), the branches of a `T.If` frame.
    BranchFrame(bool),
    /// `T.comm_reducer(combiner, identity)`: the binary operation its combiner is.
    CommReducer(tilec_ir::data::BinaryOp),
    /// `T.attr(reducer, "reduce_scope", ...)`, waiting for its `with`: inside it,
    /// `T.tvm_thread_allreduce` combines with this operation.
    ReduceScope(tilec_ir::data::BinaryOp),
    /// `T.thread_binding(...)`: the bound thread (or block) index, waiting for its `for` or for
    /// the name an assignment binds it to (which, as in TVMScript, enters the frame).
    ThreadBinding(ExprId),
    /// An eager-style tensor parameter not yet declared by `A: T.Tensor(...)`.
    PendingTensor,
    /// A kernel factory seen from driver code: calling it records an instance.
    /// `k.compile` and its kin are the same kernel: calling them records an instance too.
    KernelRef {
        name: Rc<str>,
    },
    /// An `argparse.ArgumentParser`, with the arguments added so far and their defaults.
    ArgParser(Rc<RefCell<Vec<(String, Value<'a>)>>>),
    /// The result of `parse_args()`: every argument at its default.
    Namespace(Rc<Vec<(String, Value<'a>)>>),
    /// A method looked up on a value, waiting for its call (`parser.add_argument`).
    Method(Box<Value<'a>>, Rc<str>),
    /// A torch tensor of driver code, with what is known of its shape and dtype.
    Tensor(Rc<crate::torch::TensorValue>),
    /// `functools.partial(f, *args, **kwargs)`: calling it calls `f` with these arguments first.
    Partial(Rc<Partial<'a>>),
    /// A module of the workspace (`import pkg.utils as u`), run when first used.
    UserModule(Rc<crate::modules::UserModule>),
    /// A class defined in the evaluated code, and an instance of one.
    Class(Rc<crate::classes::ClassValue<'a>>),
    Object(Rc<crate::classes::ObjectValue<'a>>),
    /// A value tilec does not model (a torch tensor, a file handle); the text says what it was.
    Opaque(Rc<str>),
    /// The result of something that already failed with a diagnostic: using it fails silently.
    Poison,
}

impl<'a> Value<'a> {
    pub(crate) fn str(text: &str) -> Value<'a> {
        Value::Str(Rc::from(text))
    }

    pub(crate) fn tuple(items: Vec<Value<'a>>) -> Value<'a> {
        Value::Tuple(Rc::new(items))
    }

    /// A short description for messages: "an int", "a fragment buffer".
    pub(crate) fn describe(&self) -> &'static str {
        match self {
            Value::None => "None",
            Value::Bool(_) => "a bool",
            Value::Int(_) => "an int",
            Value::Float(_) => "a float",
            Value::Str(_) => "a string",
            Value::Tuple(_) => "a tuple",
            Value::List(_) => "a list",
            Value::Dict(_) => "a dict",
            Value::Range { .. } => "a range",
            Value::DType(_) => "a dtype",
            Value::Index(_) => "an index expression",
            Value::Data { .. } => "a runtime value",
            Value::Buffer(_) => "a buffer",
            Value::Region(_) => "a buffer region",
            Value::DataPointer(_) => "a buffer's data pointer",
            Value::Function(_) => "a function",
            Value::Builtin(_) => "a builtin function",
            Value::Module(_) => "a module",
            Value::ModuleFn(..) => "a module function",
            Value::PolicyEnum | Value::Policy(_) => "a warp policy",
            Value::PassConfigKeys => "PassConfigKey",
            Value::TensorType { .. } => "a tensor type",
            Value::KernelFrame { .. } => "a T.Kernel frame",
            Value::LoopFrame { .. } => "a loop frame",
            Value::Layout(_) => "a layout",
            Value::ThreadBinding(_) => "a thread binding",
            Value::NoOpFrame => "a tracing context",
            Value::CommReducer(_) => "a T.comm_reducer",
            Value::ReduceScope(_) => "a T.attr reduce scope",
            Value::GuardFrame(_) => "a T.ws frame",
            Value::IfFrame(_) => "a T.If frame",
            Value::BranchFrame(true) => "a T.Then frame",
            Value::BranchFrame(false) => "a T.Else frame",
            Value::PersistentFrame(_) => "a persistent loop frame",
            Value::PendingTensor => "a tensor parameter",
            Value::KernelRef { .. } => "a kernel",
            Value::ArgParser(_) => "an argument parser",
            Value::Namespace(_) => "parsed arguments",
            Value::Method(..) => "a method",
            Value::Tensor(_) => "a torch tensor",
            Value::Partial(_) => "a partial function",
            Value::UserModule(_) => "a module",
            Value::Class(_) => "a class",
            Value::Object(_) => "an object",
            Value::Opaque(_) => "a value tilec cannot evaluate",
            Value::Poison => "an invalid value",
        }
    }

    /// Python truthiness, for values that have one at compile time.
    pub(crate) fn truthy(&self) -> Option<bool> {
        Some(match self {
            Value::None => false,
            Value::Bool(value) => *value,
            Value::Int(value) => *value != 0,
            Value::Float(value) => *value != 0.0,
            Value::Str(text) => !text.is_empty(),
            Value::Tuple(items) | Value::List(items) => !items.is_empty(),
            Value::Dict(entries) => !entries.is_empty(),
            Value::Range { start, stop, step } => range_len(*start, *stop, *step) > 0,
            Value::DType(_) | Value::Function(_) | Value::Builtin(_) | Value::Module(_) => true,
            Value::ModuleFn(..) | Value::Policy(_) | Value::Buffer(_) | Value::Layout(_) => true,
            Value::Partial(_) | Value::KernelRef { .. } | Value::UserModule(_) => true,
            Value::Class(_) | Value::Object(_) => true,
            _ => return None,
        })
    }

    pub(crate) fn from_const(value: &ConstValue) -> Value<'a> {
        match value {
            ConstValue::None => Value::None,
            ConstValue::Bool(value) => Value::Bool(*value),
            ConstValue::Int(value) => Value::Int(*value),
            ConstValue::Float(bits) => Value::Float(f64::from_bits(*bits)),
            ConstValue::Str(text) => Value::str(text),
            ConstValue::DType(dtype) => Value::DType(*dtype),
            ConstValue::Tuple(items) => Value::tuple(items.iter().map(Value::from_const).collect()),
            ConstValue::List(items) => {
                Value::List(Rc::new(items.iter().map(Value::from_const).collect()))
            }
            ConstValue::RunTime => Value::Opaque(Rc::from("a value only known at run time")),
            // Where the module's functions are known, `Builder::callable_arg` resolves the name.
            ConstValue::Callable(path) => match path.strip_prefix("T.") {
                Some(operation) => Value::ModuleFn(Module::Language, Rc::from(operation)),
                None => Value::Opaque(Rc::from(format!("`{path}`, a function of the module"))),
            },
            ConstValue::Dict(entries) => Value::Dict(Rc::new(
                entries
                    .iter()
                    .map(|(k, v)| (Value::from_const(k), Value::from_const(v)))
                    .collect(),
            )),
        }
    }

    /// The compile-time constant this value is, if it is one.
    ///
    /// `None` also for a value of more than [`MAX_SEQUENCE_LEN`] nodes in all: lists that share
    /// their items (`b = [a] * n`) are small in memory but would be copied out in full.
    pub(crate) fn to_const(&self) -> Option<ConstValue> {
        let mut nodes_left = crate::builder::MAX_SEQUENCE_LEN;
        self.to_const_within(&mut nodes_left)
    }

    fn to_const_within(&self, nodes_left: &mut usize) -> Option<ConstValue> {
        *nodes_left = nodes_left.checked_sub(1)?;
        let mut items_of = |items: &[Value<'a>]| -> Option<Vec<ConstValue>> {
            items
                .iter()
                .map(|item| item.to_const_within(nodes_left))
                .collect()
        };
        Some(match self {
            Value::None => ConstValue::None,
            Value::Bool(value) => ConstValue::Bool(*value),
            Value::Int(value) => ConstValue::Int(*value),
            Value::Float(value) => ConstValue::float(*value),
            Value::Str(text) => ConstValue::Str(text.to_string()),
            Value::DType(dtype) => ConstValue::DType(*dtype),
            // `T.GemmWarpPolicy` is an `IntEnum`, so a policy passed to a factory is its int
            // (`T.gemm` takes the ints as the members they are).
            Value::Policy(policy) => ConstValue::Int(match policy {
                WarpPolicy::Square => 0,
                WarpPolicy::FullRow => 1,
                WarpPolicy::FullCol => 2,
            }),
            Value::Tuple(items) => ConstValue::Tuple(items_of(items)?),
            Value::List(items) => ConstValue::List(items_of(items)?),
            Value::Dict(entries) => ConstValue::Dict(
                entries
                    .iter()
                    .map(|(k, v)| {
                        Some((
                            k.to_const_within(nodes_left)?,
                            v.to_const_within(nodes_left)?,
                        ))
                    })
                    .collect::<Option<_>>()?,
            ),
            // A function passed by name: a language operation, or a `def` (a lambda has none).
            Value::ModuleFn(Module::Language, name) => ConstValue::Callable(format!("T.{name}")),
            Value::Function(function) if !function.prim_func => match function.body {
                FunctionBody::Def(def) => ConstValue::Callable(def.name.to_string()),
                FunctionBody::Lambda(_) => return None,
            },
            _ => return None,
        })
    }

    /// Python's `str()` of a compile-time value (f-strings, assert messages).
    pub(crate) fn python_str(&self) -> String {
        match self {
            Value::Str(text) => text.to_string(),
            Value::DType(dtype) => dtype.name().to_owned(),
            other => match other.to_const() {
                Some(value) => value.to_string(),
                None => {
                    let mut text = String::new();
                    let _ = write!(text, "<{}>", other.describe());
                    text
                }
            },
        }
    }
}

/// A length, count or position as a Python `int`. An allocation holds at most `isize::MAX` bytes,
/// so every length fits in `i64` and the saturation is never reached; it stands where an `as` cast
/// would wrap silently.
pub(crate) fn int_of_len(len: usize) -> i64 {
    i64::try_from(len).unwrap_or(i64::MAX)
}

/// The size in bytes of an element of `dtype` as a Python `int` (at most 8).
pub(crate) fn dtype_bytes(dtype: DType) -> i64 {
    i64::try_from(dtype.bytes()).unwrap_or(i64::MAX)
}

/// The `int` that an integral float (a result of `ceil`, `floor`, `trunc` or `round`) converts
/// to: `None` for NaN, the infinities and values outside tilec's 64-bit ints, where Python raises
/// (or, past 64 bits, has an int tilec does not) and an `as` cast would saturate silently.
#[allow(clippy::cast_possible_truncation)] // the cast is reached only for values just checked in range
pub(crate) fn int_of_float(x: f64) -> Option<i64> {
    // -2^63 is exact in f64, and 2^63 is the first float past `i64::MAX`.
    const LIMIT: f64 = 9_223_372_036_854_775_808.0;
    (-LIMIT..LIMIT).contains(&x).then_some(x as i64)
}

/// How many values `range(start, stop, step)` yields. Computed in 128 bits, since `stop - start`
/// overflows 64 for the widest ranges; a length past `i64::MAX` is clamped to it.
pub(crate) fn range_len(start: i64, stop: i64, step: i64) -> i64 {
    let (start, stop, step) = (i128::from(start), i128::from(stop), i128::from(step));
    let len = if step > 0 && stop > start {
        (stop - start + step - 1) / step
    } else if step < 0 && start > stop {
        (start - stop - step - 1) / -step
    } else {
        0
    };
    i64::try_from(len).unwrap_or(i64::MAX)
}

/// One scope of names: a module, a function call, a comprehension.
#[derive(Debug, Default)]
pub(crate) struct Frame<'a> {
    pub vars: FxHashMap<String, Value<'a>>,
    pub parent: Option<Env<'a>>,
    /// Every frame of the evaluation this one belongs to (see [`release_frames`]).
    registry: Rc<FrameRegistry<'a>>,
}

/// A shared, mutable scope; closures keep the scope they were defined in.
pub(crate) type Env<'a> = Rc<RefCell<Frame<'a>>>;

/// The frames of one evaluation, weakly: a function defined in a frame is bound in that frame and
/// keeps it as its closure, a reference cycle that reference counting never frees. The evaluation
/// releases its frames when it ends ([`Globals`]), which breaks every such cycle.
#[derive(Default)]
struct FrameRegistry<'a> {
    frames: RefCell<Vec<Weak<RefCell<Frame<'a>>>>>,
    /// When driver code is evaluated, the last frame each function body ran in, by the offset of
    /// its `def`: call sites the evaluation did not reach are evaluated there afterwards.
    call_frames: RefCell<Option<FxHashMap<u32, Env<'a>>>>,
    /// The workspace modules this evaluation may import.
    modules: RefCell<Option<Rc<crate::modules::ModuleTable<'a>>>>,
}

impl std::fmt::Debug for FrameRegistry<'_> {
    // Kept call frames point back at this registry: print counts, not the frames.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FrameRegistry")
            .field("frames", &self.frames.borrow().len())
            .field(
                "call_frames",
                &self.call_frames.borrow().as_ref().map(FxHashMap::len),
            )
            .finish()
    }
}

/// A new frame; a frame without a parent starts a new evaluation's registry.
pub(crate) fn new_env<'a>(parent: Option<Env<'a>>) -> Env<'a> {
    let registry = parent
        .as_ref()
        .map_or_else(Rc::default, |parent| Rc::clone(&parent.borrow().registry));
    let env = Rc::new(RefCell::new(Frame {
        vars: FxHashMap::default(),
        parent,
        registry: Rc::clone(&registry),
    }));
    let mut frames = registry.frames.borrow_mut();
    // Loops that call functions make many short-lived frames: forget the dead ones now and then.
    if frames.len() >= 64 && frames.len().is_power_of_two() {
        frames.retain(|frame| frame.strong_count() > 0);
    }
    frames.push(Rc::downgrade(&env));
    drop(frames);
    env
}

/// A new module scope (no parent) in the same evaluation as `env`: an imported module's globals.
pub(crate) fn new_module_env<'a>(env: &Env<'a>) -> Env<'a> {
    let registry = Rc::clone(&env.borrow().registry);
    let scope = Rc::new(RefCell::new(Frame {
        vars: FxHashMap::default(),
        parent: None,
        registry: Rc::clone(&registry),
    }));
    registry.frames.borrow_mut().push(Rc::downgrade(&scope));
    scope
}

/// Makes `table` the workspace modules that the evaluation `env` belongs to may import.
pub(crate) fn install_modules<'a>(env: &Env<'a>, table: crate::modules::ModuleTable<'a>) {
    let registry = Rc::clone(&env.borrow().registry);
    *registry.modules.borrow_mut() = Some(Rc::new(table));
}

/// The workspace modules of `env`'s evaluation, if any were installed.
pub(crate) fn module_table<'a>(env: &Env<'a>) -> Option<Rc<crate::modules::ModuleTable<'a>>> {
    let registry = Rc::clone(&env.borrow().registry);
    registry.modules.borrow().clone()
}

/// From now on, the evaluation `env` belongs to keeps the last frame of every function body it
/// runs ([`record_call_frame`], [`call_frame`]).
pub(crate) fn keep_call_frames(env: &Env<'_>) {
    let registry = Rc::clone(&env.borrow().registry);
    registry
        .call_frames
        .borrow_mut()
        .get_or_insert_with(FxHashMap::default);
}

/// Remembers `frame` as the frame the function defined at `def_start` last ran in, if the
/// evaluation keeps call frames.
pub(crate) fn record_call_frame<'a>(frame: &Env<'a>, def_start: u32) {
    let registry = Rc::clone(&frame.borrow().registry);
    if let Some(frames) = registry.call_frames.borrow_mut().as_mut() {
        frames.insert(def_start, Rc::clone(frame));
    }
}

/// The frame the function defined at `def_start` last ran in, if it ran.
pub(crate) fn call_frame<'a>(env: &Env<'a>, def_start: u32) -> Option<Env<'a>> {
    let registry = Rc::clone(&env.borrow().registry);
    let frames = registry.call_frames.borrow();
    frames.as_ref()?.get(&def_start).cloned()
}

/// Empties every frame of `env`'s evaluation, so that the cycles through closures are broken and
/// the frames freed. Values read from the frames afterwards are gone: call it when the evaluation's
/// results have been converted to plain data.
pub(crate) fn release_frames(env: &Env<'_>) {
    let registry = Rc::clone(&env.borrow().registry);
    let kept = registry.call_frames.borrow_mut().take();
    drop(kept);
    let modules = registry.modules.borrow_mut().take();
    if let Some(modules) = modules {
        crate::modules::release_modules(&modules);
    }
    let frames = std::mem::take(&mut *registry.frames.borrow_mut());
    for frame in frames {
        if let Some(frame) = frame.upgrade() {
            // Take the variables out before dropping them: dropping may free other frames.
            let vars = std::mem::take(&mut frame.borrow_mut().vars);
            drop(vars);
        }
    }
}

/// The module frame of an evaluation; dropping it releases every frame of the evaluation.
#[derive(Debug)]
pub(crate) struct Globals<'a>(pub Env<'a>);

impl<'a> std::ops::Deref for Globals<'a> {
    type Target = Env<'a>;

    fn deref(&self) -> &Env<'a> {
        &self.0
    }
}

impl Drop for Globals<'_> {
    fn drop(&mut self) {
        release_frames(&self.0);
    }
}

pub(crate) fn lookup<'a>(env: &Env<'a>, name: &str) -> Option<Value<'a>> {
    let frame = env.borrow();
    if let Some(value) = frame.vars.get(name) {
        return Some(value.clone());
    }
    frame
        .parent
        .as_ref()
        .and_then(|parent| lookup(parent, name))
}

/// Sets `name` in the innermost frame that defines it (or in `env` if none does).
pub(crate) fn rebind<'a>(env: &Env<'a>, name: &str, value: Value<'a>) {
    let mut frame = Rc::clone(env);
    loop {
        if frame.borrow().vars.contains_key(name) {
            frame.borrow_mut().vars.insert(name.to_owned(), value);
            return;
        }
        let parent = frame.borrow().parent.clone();
        match parent {
            Some(parent) => frame = parent,
            None => break,
        }
    }
    bind(env, name, value);
}

pub(crate) fn bind<'a>(env: &Env<'a>, name: &str, value: Value<'a>) {
    env.borrow_mut().vars.insert(name.to_owned(), value);
}

/// The tiles a `T.Persistent` loop walks: the tile domain, how many blocks share the walk
/// (`wave_size`), which of them this block is (`index`) and the group size of the tile order.
#[derive(Clone, Debug)]
pub(crate) struct PersistentTiles {
    pub domain: Vec<ExprId>,
    pub wave_size: ExprId,
    pub index: ExprId,
    pub group_size: ExprId,
}
