//! The CUDA C printer: a [`ThreadProgram`] as one self-contained CUDA C++ translation unit.
//!
//! The printer is faithful: it makes no decision of its own. Every statement of the program becomes
//! the corresponding C statement, every value an inline C expression, in program order, so that
//! what the CPU emulator proves about the program holds for the printed kernel (a value a statement
//! uses twice is declared once as a `const` temporary before it, see `hoist.rs`). The output includes
//! no header: the prelude in `prelude.cuh` defines the 16-bit and 8-bit float types, their exact
//! conversions (inline PTX for fp16 and bf16, software for fp8), Python-style integer division and
//! the compare-and-swap atomics the hardware lacks. Kernels that use TMA, mbarriers or warp
//! specialization also get `prelude_sm90.cuh` (see `hopper.rs`).
//!
//! Invariants:
//! - The output is a pure function of the program and the target, and byte-for-byte deterministic.
//! - Nothing here panics. A malformed program (a dangling id, a store to a read-only tensor, a vector
//!   width with no C type) still prints: the offending spot holds a `/* invalid: .. */` comment and an
//!   `#error` line at the top names each problem, so NVRTC refuses the text instead of running it.

mod hoist;
mod hopper;
mod index;
mod literal;
mod names;
mod reinterpret;
mod stmt;
mod types;
mod value;
mod wgmma;

#[cfg(test)]
mod tests;

use std::fmt::Write as _;

use rustc_hash::{FxHashMap, FxHashSet};

use tilec_ir::thread::{Memory, ParamAccess, Stmt};
use tilec_ir::{ExprId, Target, ThreadProgram, VarId};

use names::Names;
use types::{memory_type, storage_type};

/// The prelude every kernel starts with.
pub const PRELUDE: &str = include_str!("prelude.cuh");

/// The part of the prelude for TMA, mbarriers and warp specialization, printed after [`PRELUDE`]
/// only for kernels that use them: its first line refuses any architecture before sm_90.
pub const PRELUDE_SM90: &str = include_str!("prelude_sm90.cuh");

/// curand's Philox4x32-10 generator, printed for programs that draw random numbers.
const PRELUDE_RANDOM: &str = include_str!("prelude_random.cuh");

/// The grid-wide barrier, printed for programs with a [`Stmt::GridSync`].
const PRELUDE_GRID: &str = include_str!("prelude_grid.cuh");

/// The name of the dynamic shared memory array every shared buffer points into.
const SHARED_ARRAY: &str = "tl_smem";

/// The most threads one block may have on every target tilec supports.
const MAX_THREADS_PER_BLOCK: i64 = 1024;

/// The C name under which [`emit_cuda`] prints a kernel named `name`: the name itself where it is a
/// usable identifier, else a renamed one (`double` becomes `v_double`, `_layernorm_fwd` becomes
/// `layernorm_fwd`). A Python function may be called anything C reserves, and that is no error of the
/// user's, so the generated code renames rather than refuses; whoever looks the compiled function up
/// by name asks this function for it.
pub fn kernel_symbol(name: &str) -> String {
    Names::default().fresh(name)
}

/// Prints `program` as a complete CUDA C++ translation unit for `target`: a comment with the launch
/// configuration, the prelude, and the kernel `extern "C" __global__ void <program.name>(..)`.
pub fn emit_cuda(program: &ThreadProgram, target: &Target) -> String {
    let mut printer = Printer::new(program);
    printer.kernel();
    printer.finish(*target)
}

/// The state of printing one program.
#[derive(Debug)]
struct Printer<'a> {
    program: &'a ThreadProgram,
    /// The kernel's text so far (the header and prelude are added by [`Printer::finish`]).
    out: String,
    /// Indentation level of the next line, in steps of four spaces.
    indent: usize,
    names: Names,
    /// The C name of each variable where the printer stands now; `None` where it is not bound.
    visible: Vec<Option<String>>,
    /// The name each variable got when first bound, reused when a later statement binds it again.
    assigned: Vec<Option<String>>,
    /// For every open C scope, the variables it bound and the names they had before.
    scopes: Vec<Vec<(usize, Option<String>)>>,
    /// The names of variables declared `long long`; every other variable is an `int`.
    long_names: FxHashSet<String>,
    /// The values of the current statement declared as temporaries, by name (see `hoist.rs`).
    temporaries: FxHashMap<tilec_ir::thread::ValueId, String>,
    /// Which nodes of the index expression being printed compute in `int` (see `index.rs`).
    fits_memo: FxHashMap<ExprId, bool>,
    /// The C name each buffer is accessed through; `None` for a buffer that could not be declared.
    buffers: Vec<Option<String>>,
    /// What is wrong with the program, one line per problem, in the order met.
    errors: Vec<String>,
    /// Nodes the current statement may still print; bounds the text a shared DAG can expand to.
    budget: usize,
    /// Nesting depth of the value, expression or statement being printed.
    depth: usize,
    /// Helper functions generated for this program (one per wgmma form), by name.
    helpers: std::collections::BTreeMap<String, String>,
    /// The C name of each tensor map parameter, in the order of `program.tensor_maps`.
    tensor_maps: Vec<String>,
    /// The C name of the dynamic shared memory's 32-bit shared-window address, declared when an
    /// `ldmatrix` needs it.
    shared_window: Option<String>,
    /// The C name of the thread's random generator state, declared when the program has one.
    rng_state: Option<String>,
}

/// The names TileLang's CUDA headers give the user's `T.import_source` code beyond CUDA's own.
const EXTERN_SOURCE_TYPES: &str = "\
// ---- names TileLang's headers define for T.import_source code --------------------------------
#ifndef uint
#define uint unsigned int
#endif
typedef signed char int8_t;
typedef unsigned char uint8_t;
typedef short int16_t;
typedef unsigned short uint16_t;
typedef int int32_t;
typedef unsigned int uint32_t;

";

/// Nodes one statement may print before its expression is reported as too large.
const STATEMENT_BUDGET: usize = 20_000;

/// Nesting deeper than this is reported instead of followed, to keep recursion off the stack limit.
const MAX_DEPTH: usize = 256;

impl<'a> Printer<'a> {
    fn new(program: &'a ThreadProgram) -> Self {
        let vars = program.exprs.num_vars();
        Printer {
            program,
            out: String::new(),
            indent: 0,
            names: Names::default(),
            visible: vec![None; vars],
            assigned: vec![None; vars],
            scopes: Vec::new(),
            long_names: FxHashSet::default(),
            fits_memo: FxHashMap::default(),
            temporaries: FxHashMap::default(),
            buffers: vec![None; program.buffers.len()],
            errors: Vec::new(),
            budget: STATEMENT_BUDGET,
            depth: 0,
            helpers: std::collections::BTreeMap::new(),
            tensor_maps: Vec::new(),
            shared_window: None,
            rng_state: None,
        }
    }

    /// Writes one line at the current indentation.
    fn line(&mut self, text: &str) {
        for _ in 0..self.indent {
            self.out.push_str("    ");
        }
        self.out.push_str(text);
        self.out.push('\n');
    }

    /// Records a problem of the program and returns the comment that marks its spot.
    fn invalid(&mut self, message: &str) -> String {
        let message = comment_text(message).replace("*/", "* /");
        if !self.errors.contains(&message) {
            self.errors.push(message.clone());
        }
        format!("/* invalid: {message} */")
    }

    /// Takes one node from the statement's budget; false once it is spent.
    fn spend(&mut self) -> bool {
        let left = self.budget.checked_sub(1);
        self.budget = left.unwrap_or(0);
        left.is_some()
    }

    /// The header comment, the `#error` lines of a malformed program, the prelude and the kernel.
    fn finish(self, target: Target) -> String {
        let mut text = String::new();
        let name = comment_text(&self.program.name);
        let _ = writeln!(text, "// Generated by tilec for {target}: kernel `{name}`.");
        let _ = writeln!(text, "// Launch: {}.", self.launch_summary());
        for error in &self.errors {
            let quoted = error.replace('\\', "\\\\").replace('"', "\\\"");
            let _ = writeln!(text, "#error \"tilec: invalid thread program: {quoted}\"");
        }
        text.push('\n');
        text.push_str(PRELUDE);
        text.push('\n');
        if hopper::uses_sm90_prelude(self.program) {
            text.push_str(PRELUDE_SM90);
            text.push('\n');
        }
        for helper in self.helpers.values() {
            text.push_str(helper);
            text.push('\n');
        }
        // The user's own CUDA (`T.import_source`), as written, for its extern calls. It is
        // written against TileLang's headers, which define `uint` and the fixed-width integers.
        if !self.program.extern_sources.is_empty() {
            text.push_str(EXTERN_SOURCE_TYPES);
        }
        for source in &self.program.extern_sources {
            text.push_str(source);
            if !source.ends_with('\n') {
                text.push('\n');
            }
            text.push('\n');
        }
        text.push_str(&self.out);
        text
    }

    /// Grid, block and shared memory in words, for the header comment.
    fn launch_summary(&self) -> String {
        let arena = &self.program.exprs;
        let grid: Vec<String> = self
            .program
            .grid
            .iter()
            .map(|&e| {
                if e.index() < arena.len() {
                    comment_text(&arena.display(e).to_string())
                } else {
                    "?".to_owned()
                }
            })
            .collect();
        let [x, y, z] = self.program.block;
        let blocks = match self.program.persistent {
            Some(_) => format!(
                "persistent: one block per multiprocessor walking the tiles of grid ({})",
                grid.join(", ")
            ),
            None => format!("grid ({})", grid.join(", ")),
        };
        format!(
            "{blocks}, block ({x}, {y}, {z}), {} bytes of dynamic shared memory",
            self.program.shared_bytes
        )
    }
}

/// Kernel signature and declarations.
impl Printer<'_> {
    /// Prints the whole kernel: signature, index variables, buffers and body.
    fn kernel(&mut self) {
        let name = self.kernel_name();
        let threads = self.threads();
        let params = self.params();
        // `setmaxnreg` needs ptxas to know the register count at entry, which it fixes only when
        // the bounds also name the blocks per multiprocessor; otherwise it ignores the instruction.
        let bounds = if hopper::uses_set_max_registers(self.program) {
            format!("{threads}, 1")
        } else {
            threads.to_string()
        };
        let head = format!("extern \"C\" __global__ void __launch_bounds__({bounds}) {name}(");
        if params.is_empty() {
            self.line(&format!("{head}) {{"));
        } else {
            self.line(&head);
            let last = params.len() - 1;
            for (i, param) in params.iter().enumerate() {
                let end = if i == last { ") {" } else { "," };
                self.line(&format!("    {param}{end}"));
            }
        }
        self.indent += 1;
        self.scopes.push(Vec::new());
        self.index_variables();
        self.buffer_declarations();
        self.generator_declarations();
        let program = self.program;
        self.stmts(&program.body);
        self.scopes.pop();
        self.indent -= 1;
        self.line("}");
    }

    /// The state of the thread's random generator, when the program draws random numbers, and
    /// the grid barrier's helper, when it has one.
    fn generator_declarations(&mut self) {
        let program = self.program;
        let draws = program
            .values
            .iter()
            .any(|value| matches!(value, tilec_ir::thread::Value::Random(_)));
        if draws || tilec_ir::thread::any_stmt(&program.body, |s| matches!(s, Stmt::RngInit { .. }))
        {
            let name = self.names.fresh("rng_state");
            self.line(&format!("tl_philox {name};"));
            self.rng_state = Some(name);
            self.helpers
                .insert("tl_philox".to_owned(), PRELUDE_RANDOM.to_owned());
        }
        if tilec_ir::thread::uses_grid_sync(&program.body) {
            self.helpers
                .insert("tl_sync_grid".to_owned(), PRELUDE_GRID.to_owned());
        }
    }

    /// The kernel's C name: the program's name made a usable, unreserved identifier by
    /// [`kernel_symbol`], which the launcher calls too to look the function up.
    fn kernel_name(&mut self) -> String {
        let name = self.names.fresh(&self.program.name);
        self.names.fresh(SHARED_ARRAY);
        name
    }

    /// Threads per block, checked against what a block may have.
    fn threads(&mut self) -> i64 {
        let [x, y, z] = self.program.block;
        let threads = x.checked_mul(y).and_then(|xy| xy.checked_mul(z));
        match threads {
            Some(n) if x >= 1 && y >= 1 && z >= 1 && n <= MAX_THREADS_PER_BLOCK => n,
            _ => {
                self.invalid(&format!(
                    "a block of {x} x {y} x {z} threads is not launchable (1 to {MAX_THREADS_PER_BLOCK} threads)"
                ));
                1
            }
        }
    }

    /// The parameter declarations, tensors first, then scalars, then tensor maps; names every
    /// parameter and binds the scalars' variables.
    fn params(&mut self) -> Vec<String> {
        let mut params = Vec::new();
        let mut param_names = Vec::new();
        for param in &self.program.params {
            let dtype = self
                .program
                .buffers
                .get(param.buffer.index())
                .map(|b| b.dtype);
            let element = match dtype {
                Some(dtype) => memory_type(dtype),
                None => {
                    self.invalid(&format!("parameter `{}` names no buffer", param.name));
                    "unsigned char"
                }
            };
            let name = self.names.fresh(&param.name);
            let constness = if param.access == ParamAccess::Read {
                "const "
            } else {
                ""
            };
            params.push(format!("{constness}{element}* __restrict__ {name}"));
            param_names.push(name);
        }
        for scalar in &self.program.scalars {
            let name = self.names.fresh(&scalar.name);
            params.push(format!("int {name}"));
            self.bind_as(scalar.var, name);
        }
        params.extend(self.tensor_map_params());
        self.name_global_buffers(&param_names);
        params
    }

    /// Gives every global buffer that is a parameter's own buffer the parameter's name.
    fn name_global_buffers(&mut self, param_names: &[String]) {
        for (param, name) in self.program.params.iter().zip(param_names) {
            if let Some(slot) = self.buffers.get_mut(param.buffer.index()) {
                *slot = Some(name.clone());
            }
        }
    }

    /// Defines the flat thread index and the three block indices under their variables' names.
    fn index_variables(&mut self) {
        let thread = if self.program.block[1..] == [1, 1] {
            "threadIdx.x".to_owned()
        } else {
            "threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)".to_owned()
        };
        let thread_var = self.program.thread;
        self.define_index_variable(thread_var, &thread);
        // A persistent program binds its tile's indices itself, once per round.
        if let Some(persistent) = self.program.persistent {
            self.define_index_variable(persistent.block, "blockIdx.x");
            self.define_index_variable(persistent.blocks, "gridDim.x");
            return;
        }
        let block_vars = self.program.block_index;
        for (var, axis) in block_vars.into_iter().zip(["x", "y", "z"]) {
            self.define_index_variable(var, &format!("blockIdx.{axis}"));
        }
    }

    fn define_index_variable(&mut self, var: VarId, value: &str) {
        match self.bind(var) {
            Some(name) => self.line(&format!("const int {name} = {value};")),
            None => {
                let comment =
                    self.invalid(&format!("variable {} is not in the arena", var.index()));
                self.line(&comment);
            }
        }
    }

    /// Declares the shared-memory pointers, the register arrays and the typed views of global
    /// tensors, in buffer order.
    fn buffer_declarations(&mut self) {
        let program = self.program;
        let has_shared = program.shared_bytes > 0
            || program
                .buffers
                .iter()
                .any(|b| matches!(b.memory, Memory::Shared { .. }));
        if has_shared {
            // wgmma's swizzled operands and TMA's swizzled boxes repeat every 1024 bytes of the
            // absolute address.
            let align = if tilec_ir::thread::uses_wgmma(&program.body) || hopper::uses_tma(program)
            {
                1024
            } else {
                16
            };
            self.line(&format!(
                "extern __shared__ __align__({align}) unsigned char {SHARED_ARRAY}[];"
            ));
            if tilec_ir::thread::any_stmt(&program.body, |s| matches!(s, Stmt::LoadMatrix { .. })) {
                let window = self.names.fresh("smem_window");
                self.line(&format!(
                    "const unsigned int {window} = tl_shared_address({SHARED_ARRAY});"
                ));
                self.shared_window = Some(window);
            }
        }
        for (index, buffer) in program.buffers.iter().enumerate() {
            match buffer.memory {
                Memory::Global { param } => self.declare_global_view(index, param),
                Memory::Shared { offset } => self.declare_shared(index, offset),
                Memory::Local => self.declare_local(index),
            }
        }
    }

    /// A global buffer that is not its parameter's own buffer reads the parameter's memory
    /// through a pointer of its own element type.
    fn declare_global_view(&mut self, index: usize, param: usize) {
        let program = self.program;
        let buffer = &program.buffers[index];
        let Some(tensor) = program.params.get(param) else {
            let comment = self.invalid(&format!(
                "buffer `{}` lives in parameter {param}, which does not exist",
                buffer.name
            ));
            self.line(&comment);
            return;
        };
        if tensor.buffer.index() == index {
            return;
        }
        let Some(Some(param_name)) = self.buffers.get(tensor.buffer.index()).cloned() else {
            return;
        };
        let element = memory_type(buffer.dtype);
        let constness = if tensor.access == ParamAccess::Read {
            "const "
        } else {
            ""
        };
        let name = self.names.fresh(&buffer.name);
        self.line(&format!(
            "{constness}{element}* {name} = ({constness}{element}*){param_name};"
        ));
        self.buffers[index] = Some(name);
    }

    /// A shared buffer is a typed pointer `offset` bytes into the dynamic shared memory.
    fn declare_shared(&mut self, index: usize, offset: i64) {
        let buffer = &self.program.buffers[index];
        let size = i64::try_from(buffer.dtype.bytes()).unwrap_or(i64::MAX);
        let elements = self.program.exprs.as_int_checked(buffer.elements);
        let end = elements
            .and_then(|n| u64::try_from(n).ok())
            .and_then(|n| i64::try_from(buffer.dtype.storage_bytes(n)).ok())
            .and_then(|bytes| bytes.checked_add(offset));
        if offset < 0
            || offset % size != 0
            || end.is_some_and(|end| end > self.program.shared_bytes)
        {
            let comment = self.invalid(&format!(
                "shared buffer `{}` at byte {offset} is misaligned or outside the {} bytes of shared memory",
                buffer.name, self.program.shared_bytes
            ));
            self.line(&comment);
            return;
        }
        let element = memory_type(buffer.dtype);
        let name = self.names.fresh(&buffer.name);
        self.line(&format!(
            "{element}* {name} = ({element}*)({SHARED_ARRAY} + {offset});"
        ));
        self.buffers[index] = Some(name);
    }

    /// A local buffer is a register array. It is aligned to its size (up to 16 bytes) so that the
    /// widest vector copy its indices allow is an aligned access.
    fn declare_local(&mut self, index: usize) {
        let buffer = &self.program.buffers[index];
        let size = i64::try_from(buffer.dtype.bytes()).unwrap_or(i64::MAX);
        let elements = self.program.exprs.as_int_checked(buffer.elements);
        let Some(elements) = elements.filter(|&n| n >= 1 && n <= i64::from(i32::MAX) / 16) else {
            let comment = self.invalid(&format!(
                "local buffer `{}` needs a constant, positive number of elements",
                buffer.name
            ));
            self.line(&comment);
            return;
        };
        let bytes = elements * size;
        let align = (1_i64 << bytes.trailing_zeros()).min(16);
        let attribute = if align > size {
            format!("__align__({align}) ")
        } else {
            String::new()
        };
        let element = storage_type(buffer.dtype);
        let name = self.names.fresh(&buffer.name);
        self.line(&format!("{attribute}{element} {name}[{elements}];"));
        self.buffers[index] = Some(name);
    }
}

/// Variable scopes: C scopes follow the program's statement lists, and a variable bound again while
/// its earlier binding is still visible gets a fresh name, so no C declaration is ever repeated.
impl Printer<'_> {
    /// Binds `var` in the innermost scope under a name derived from its arena name; `None` for a
    /// variable the arena does not have.
    fn bind(&mut self, var: VarId) -> Option<String> {
        let index = var.index();
        if index >= self.program.exprs.num_vars() {
            return None;
        }
        let name = match (&self.visible[index], &self.assigned[index]) {
            (None, Some(name)) => name.clone(),
            _ => {
                let wanted = &self.program.exprs.var_info(var).name;
                self.names.fresh(wanted)
            }
        };
        self.bind_as(var, name.clone());
        Some(name)
    }

    /// Binds `var` to `name` in the innermost scope.
    fn bind_as(&mut self, var: VarId, name: String) {
        let index = var.index();
        let Some(slot) = self.visible.get_mut(index) else {
            return;
        };
        let previous = slot.replace(name.clone());
        if self.assigned[index].is_none() {
            self.assigned[index] = Some(name);
        }
        if let Some(scope) = self.scopes.last_mut() {
            scope.push((index, previous));
        }
    }

    fn open_scope(&mut self) {
        self.scopes.push(Vec::new());
    }

    /// Closes the innermost scope, restoring what its bindings hid.
    fn close_scope(&mut self) {
        let Some(scope) = self.scopes.pop() else {
            return;
        };
        for (index, previous) in scope.into_iter().rev() {
            self.visible[index] = previous;
        }
    }
}

/// `text` made safe inside a `//` comment or a string: one line, printable ASCII, no backslash (a
/// backslash before the line end would splice the next line into the comment).
fn comment_text(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            '\\' => '/',
            ' '..='~' => c,
            _ => ' ',
        })
        .collect()
}

/// Arena look-ups that report a foreign id instead of panicking.
trait CheckedArena {
    fn as_int_checked(&self, e: ExprId) -> Option<i64>;
}

impl CheckedArena for tilec_ir::ExprArena {
    fn as_int_checked(&self, e: ExprId) -> Option<i64> {
        (e.index() < self.len()).then(|| self.as_int(e)).flatten()
    }
}

/// The statement kinds, for messages.
fn stmt_kind(stmt: &Stmt) -> &'static str {
    match stmt {
        Stmt::For { .. } => "for",
        Stmt::Let { .. } => "let",
        Stmt::Bind { .. } => "bind",
        Stmt::If { .. } => "if",
        Stmt::While { .. } => "while",
        Stmt::Store { .. } => "store",
        Stmt::VectorCopy { .. } => "vector copy",
        Stmt::Atomic { .. } => "atomic",
        Stmt::Barrier => "barrier",
        Stmt::AsyncCopy { .. } => "cp.async",
        Stmt::AsyncCommit => "cp.async commit",
        Stmt::AsyncWait { .. } => "cp.async wait",
        Stmt::LoadMatrix { .. } => "ldmatrix",
        Stmt::Mma { .. } => "mma",
        Stmt::Wgmma { .. } => "wgmma",
        Stmt::WgmmaFence => "wgmma fence",
        Stmt::WgmmaCommit => "wgmma commit",
        Stmt::WgmmaWait { .. } => "wgmma wait",
        Stmt::FenceProxyAsync => "proxy fence",
        Stmt::MbarrierInit { .. } => "mbarrier init",
        Stmt::MbarrierInval { .. } => "mbarrier inval",
        Stmt::MbarrierArrive { .. } => "mbarrier arrive",
        Stmt::MbarrierExpectTx { .. } => "mbarrier expect_tx",
        Stmt::MbarrierWait { .. } => "mbarrier wait",
        Stmt::TmaLoad { .. } => "TMA load",
        Stmt::TmaStore { .. } => "TMA store",
        Stmt::TmaStoreWait => "TMA store wait",
        Stmt::WarpRoles { .. } => "warp roles",
        Stmt::SetMaxRegisters { .. } => "setmaxnreg",
        Stmt::NamedBarrier { .. } => "named barrier",
        Stmt::NamedBarrierArrive { .. } => "named barrier arrival",
        Stmt::WarpgroupTurn { .. } => "warpgroup turn",
        Stmt::SyncWarp => "warp sync",
        Stmt::Return => "return",
        Stmt::Assert { .. } => "device assert",
        Stmt::GridDependencyWait => "grid dependency wait",
        Stmt::LaunchDependents => "launch dependents",
        Stmt::CallExtern { .. } => "extern call",
        Stmt::RngInit { .. } => "random generator init",
        Stmt::GridSync => "grid barrier",
        Stmt::Block { .. } => "block",
    }
}
