//! Statements: each [`Stmt`] of the program becomes the corresponding C statement.

use tilec_ir::thread::{AtomicOp, BufferId, Memory, ParamAccess, Place, Stmt, ValueId};
use tilec_ir::{DType, ExprId, VarId};

use super::index::IndexType;
use super::types::{compute_type, nibble_from_code, storage_type};
use super::value::CExpr;
use super::{MAX_DEPTH, Printer, STATEMENT_BUDGET, comment_text, stmt_kind};

impl Printer<'_> {
    /// Prints a statement list in order.
    pub(super) fn stmts(&mut self, stmts: &[Stmt]) {
        for stmt in stmts {
            self.budget = STATEMENT_BUDGET;
            self.stmt(stmt);
        }
    }

    fn stmt(&mut self, stmt: &Stmt) {
        if self.scopes.len() > MAX_DEPTH {
            let comment = self.invalid(&format!(
                "a {} statement is nested too deeply to print",
                stmt_kind(stmt)
            ));
            self.line(&comment);
            return;
        }
        match stmt {
            Stmt::For {
                var,
                extent,
                unroll,
                body,
            } => self.for_loop(*var, *extent, *unroll, body),
            Stmt::Let { var, value } => self.let_binding(*var, *value),
            Stmt::Bind { var, value } => self.value_binding(*var, *value),
            Stmt::If {
                cond,
                then,
                otherwise,
            } => self.if_else(*cond, then, otherwise),
            Stmt::While { cond, body } => self.while_loop(*cond, body),
            Stmt::Store {
                place: Place { buffer, index },
                value,
            } => self.store(*buffer, *index, *value),
            Stmt::VectorCopy { dst, src, lanes } => {
                self.vector_copy((dst.buffer, dst.index), (src.buffer, src.index), *lanes)
            }
            Stmt::Atomic {
                op,
                place,
                value,
                old,
            } => self.atomic(*op, *place, *value, *old),
            Stmt::Barrier => self.line("__syncthreads();"),
            Stmt::SyncWarp => self.line("__syncwarp();"),
            Stmt::Return => self.line("return;"),
            Stmt::Assert { cond, message } => self.device_assert(*cond, message),
            Stmt::CallExtern { name, args } => self.call_extern(name, args),
            Stmt::GridDependencyWait => self.line("tl_griddepcontrol_wait();"),
            Stmt::LaunchDependents => self.line("tl_griddepcontrol_launch_dependents();"),
            Stmt::GridSync => self.line("tl_sync_grid();"),
            Stmt::RngInit {
                seed,
                subsequence,
                offset,
            } => self.rng_init([*seed, *subsequence, *offset]),
            Stmt::AsyncCopy { dst, src, lanes } => {
                self.async_copy((dst.buffer, dst.index), (src.buffer, src.index), *lanes)
            }
            Stmt::AsyncCommit => self.line("tl_cp_async_commit();"),
            Stmt::AsyncWait { pending } => self.line(&format!("tl_cp_async_wait<{pending}>();")),
            Stmt::LoadMatrix {
                matrices,
                transpose,
                dst,
                src,
            } => self.load_matrix(
                (*matrices, *transpose),
                (dst.buffer, dst.index),
                (src.buffer, src.index),
            ),
            Stmt::Mma { a, b, c } => self.mma([
                (a.buffer, a.index),
                (b.buffer, b.index),
                (c.buffer, c.index),
            ]),
            Stmt::Wgmma { n, a, b, c } => self.wgmma(*n, a, b, (c.buffer, c.index)),
            Stmt::WgmmaFence => self.line("tl_wgmma_fence();"),
            Stmt::WgmmaCommit => self.line("tl_wgmma_commit();"),
            Stmt::WgmmaWait { pending } => self.wgmma_wait(*pending),
            Stmt::FenceProxyAsync => self.line("tl_fence_proxy_async();"),
            Stmt::MbarrierInit { barrier, count } => {
                self.mbarrier_init(barrier.buffer, barrier.index, *count)
            }
            Stmt::MbarrierInval { barrier } => self.mbarrier_inval(barrier.buffer, barrier.index),
            Stmt::MbarrierArrive {
                barrier,
                expect_bytes,
            } => self.mbarrier_arrive(barrier.buffer, barrier.index, *expect_bytes),
            Stmt::MbarrierExpectTx { barrier, bytes } => {
                self.mbarrier_expect_tx(barrier.buffer, barrier.index, *bytes)
            }
            Stmt::MbarrierWait { barrier, parity } => {
                self.mbarrier_wait(barrier.buffer, barrier.index, *parity)
            }
            Stmt::TmaLoad {
                map,
                dst,
                coords,
                barrier,
            } => self.tma_load(
                *map,
                (dst.buffer, dst.index),
                coords,
                (barrier.buffer, barrier.index),
            ),
            Stmt::TmaStore { map, src, coords } => {
                self.tma_store(*map, (src.buffer, src.index), coords)
            }
            Stmt::TmaStoreWait => self.line("tl_tma_store_wait();"),
            Stmt::WarpRoles {
                consumers,
                consumer,
                producer,
            } => self.warp_roles(*consumers, consumer, producer),
            Stmt::SetMaxRegisters { count, increase } => self.set_max_registers(*count, *increase),
            Stmt::NamedBarrier { id, threads } => self.named_barrier(*id, *threads),
            Stmt::NamedBarrierArrive { id, threads } => self.named_barrier_arrive(*id, *threads),
            Stmt::WarpgroupTurn {
                step,
                warpgroups,
                first_barrier,
            } => self.warpgroup_turn(*step, *warpgroups, *first_barrier),
            Stmt::Block { label, body, .. } => self.block(label, body),
        }
    }

    /// Prints `body` one level deeper, inside a C scope of its own.
    pub(super) fn nested(&mut self, body: &[Stmt]) {
        self.indent += 1;
        self.open_scope();
        self.stmts(body);
        self.close_scope();
        self.indent -= 1;
    }

    fn for_loop(&mut self, var: VarId, extent: ExprId, unroll: bool, body: &[Stmt]) {
        // The bound is printed before the variable is bound: it is evaluated outside the loop.
        let extent = self.index(extent).text;
        self.open_scope();
        let Some(name) = self.bind(var) else {
            let comment = self.invalid("a loop variable is not in the arena");
            self.line(&comment);
            self.close_scope();
            return;
        };
        if unroll {
            self.line("#pragma unroll");
        }
        self.line(&format!(
            "for (int {name} = 0; {name} < {extent}; ++{name}) {{"
        ));
        self.nested(body);
        self.line("}");
        self.close_scope();
    }

    /// `const int v = ..;`, or `long long` when the value's range is not known to fit an `int`
    /// and the variable's declared extent does not promise it either.
    fn let_binding(&mut self, var: VarId, value: ExprId) {
        let index = self.index(value);
        let extent_fits = var.index() < self.program.exprs.num_vars()
            && self
                .program
                .exprs
                .var_info(var)
                .extent
                .is_some_and(|extent| extent <= i64::from(i32::MAX) + 1);
        let Some(name) = self.bind(var) else {
            let comment = self.invalid("a let-bound variable is not in the arena");
            self.line(&comment);
            return;
        };
        let line = match index.ty {
            IndexType::Int => format!("const int {name} = {};", index.text),
            IndexType::Long if extent_fits => format!("const int {name} = (int)({});", index.text),
            IndexType::Long => {
                self.long_names.insert(name.clone());
                format!("const long long {name} = {};", index.text)
            }
        };
        self.line(&line);
    }

    /// A run-time scalar named for the index arithmetic after it. Its range is unknown, so it is
    /// declared `long long`, as an index of unknown range is: a 64-bit offset never wraps.
    fn value_binding(&mut self, var: VarId, value: ValueId) {
        self.declare_temporaries(value);
        let (printed, _) = self.root_value(value);
        self.forget_temporaries();
        let Some(name) = self.bind(var) else {
            let comment = self.invalid("a bound run-time variable is not in the arena");
            self.line(&comment);
            return;
        };
        self.long_names.insert(name.clone());
        self.line(&format!(
            "const long long {name} = (long long)({});",
            printed.text
        ));
    }

    fn if_else(&mut self, cond: ValueId, then: &[Stmt], otherwise: &[Stmt]) {
        self.declare_temporaries(cond);
        let (cond, _) = self.root_value(cond);
        self.forget_temporaries();
        self.line(&format!("if ({}) {{", cond.text));
        self.nested(then);
        if otherwise.is_empty() {
            self.line("}");
        } else {
            self.line("} else {");
            self.nested(otherwise);
            self.line("}");
        }
    }

    /// `while (true) { if (!cond) break; body }`: the condition's temporaries are computed again at
    /// the top of every iteration, inside the loop's scope.
    fn while_loop(&mut self, cond: ValueId, body: &[Stmt]) {
        self.line("while (true) {");
        self.indent += 1;
        self.open_scope();
        self.declare_temporaries(cond);
        let (cond, _) = self.root_value(cond);
        self.forget_temporaries();
        self.line(&format!("if (!({})) break;", cond.text));
        self.stmts(body);
        self.close_scope();
        self.indent -= 1;
        self.line("}");
    }

    /// `T.device_assert`: a thread whose condition is false prints the message and traps, which
    /// fails the launch.
    fn device_assert(&mut self, cond: ValueId, message: &str) {
        self.declare_temporaries(cond);
        let (cond, _) = self.root_value(cond);
        self.forget_temporaries();
        let mut quoted = String::new();
        for c in message.chars() {
            match c {
                '"' => quoted.push_str("\\\""),
                '\\' => quoted.push_str("\\\\"),
                '%' => quoted.push_str("%%"),
                c if c.is_ascii_graphic() || c == ' ' => quoted.push(c),
                _ => quoted.push('?'),
            }
        }
        self.line(&format!("if (!({})) {{", cond.text));
        self.line(&format!(
            "    printf(\"device_assert failed in block (%d, %d, %d), thread (%d, %d, %d): {quoted}\\n\", \
             blockIdx.x, blockIdx.y, blockIdx.z, threadIdx.x, threadIdx.y, threadIdx.z);"
        ));
        self.line("    __trap();");
        self.line("}");
    }

    /// `name(args);`, a function of the user's CUDA source: pointers as `&buffer[index]`, values
    /// as expressions.
    fn call_extern(&mut self, name: &str, args: &[tilec_ir::thread::ExternArg]) {
        if !tilec_ir::is_extern_name(name) {
            return self.skip(&format!(
                "an extern call of `{name}`, which is not a C++ function name"
            ));
        }
        let mut texts = Vec::new();
        for arg in args {
            match *arg {
                tilec_ir::thread::ExternArg::Pointer(Place { buffer, index }) => {
                    if let Some(message) = self.packed_nibbles(buffer, "pointer") {
                        return self.skip(&message);
                    }
                    let Some(element) = self.element(buffer, index) else {
                        return self.skip("an extern call on a buffer that could not be declared");
                    };
                    texts.push(format!("&{element}"));
                }
                tilec_ir::thread::ExternArg::Value(value) => {
                    self.declare_temporaries(value);
                    let (text, _) = self.root_value(value);
                    self.forget_temporaries();
                    texts.push(text.text);
                }
            }
        }
        self.line(&format!("{name}({});", texts.join(", ")));
    }

    /// `curand_init(seed, subsequence, offset, &state)` for the thread's Philox generator, its
    /// operands converted to 64-bit unsigned integers.
    fn rng_init(&mut self, operands: [ValueId; 3]) {
        let mut texts = Vec::new();
        for operand in operands {
            self.declare_temporaries(operand);
            let (x, from) = self.root_value(operand);
            self.forget_temporaries();
            texts.push(self.convert(x, from, DType::UInt64).text);
        }
        let Some(state) = self.rng_state.clone() else {
            return self.skip("a random generator that was not declared");
        };
        self.line(&format!(
            "tl_rng_init(&{state}, {}, {}, {});",
            texts[0], texts[1], texts[2]
        ));
    }

    /// `// label` above the statements in a `{ }` block.
    fn block(&mut self, label: &str, body: &[Stmt]) {
        let label = comment_text(label);
        let label = label.trim();
        if !label.is_empty() {
            self.line(&format!("// {label}"));
        }
        self.line("{");
        self.nested(body);
        self.line("}");
    }
}

/// Memory writes.
impl Printer<'_> {
    /// The buffer's dtype when the program may write it, or what is wrong.
    fn writable(&self, buffer: BufferId, what: &str) -> Result<DType, String> {
        let program = self.program;
        let Some(decl) = program.buffers.get(buffer.index()) else {
            return Err(format!(
                "a {what} names a buffer that is not in the program"
            ));
        };
        let read_only = match decl.memory {
            Memory::Global { param } => program
                .params
                .get(param)
                .is_some_and(|p| p.access == ParamAccess::Read),
            _ => false,
        };
        if read_only {
            return Err(format!(
                "a {what} writes `{}`, a read-only parameter",
                decl.name
            ));
        }
        Ok(decl.dtype)
    }

    /// Prints the placeholder of a statement that could not be printed.
    pub(super) fn skip(&mut self, message: &str) {
        let comment = self.invalid(message);
        self.line(&comment);
    }

    fn store(&mut self, buffer: BufferId, index: ExprId, value: ValueId) {
        let dtype = match self.writable(buffer, "store") {
            Ok(dtype) => dtype,
            Err(message) => return self.skip(&message),
        };
        let Some(name) = self.buffer_name(buffer) else {
            return self.skip("a store to a buffer that could not be declared");
        };
        let index = self.index(index).text;
        self.declare_temporaries(value);
        let (x, from) = self.root_value(value);
        self.forget_temporaries();
        let stored = self.stored_as(x, from, dtype);
        if self.packed_memory(buffer).is_some() {
            // Packed 4-bit memory: the element's four bits replace their nibble atomically, as a
            // neighbour sharing the byte may be stored by another thread at the same time.
            self.line(&format!(
                "tl_store_nibble({name}, {index}, tl_bits({}));",
                stored.text
            ));
        } else {
            self.line(&format!("{name}[{index}] = {};", stored.text));
        }
    }

    /// Why an access of several elements at once (a vector copy, `cp.async`, `ldmatrix`, an
    /// atomic, a pointer handed to user CUDA) cannot address `buffer`: its elements are 4-bit and
    /// packed two a byte in memory, where only the element-wise load and store reach them.
    fn packed_nibbles(&self, buffer: BufferId, what: &str) -> Option<String> {
        let dtype = self.packed_memory(buffer)?;
        let name = &self.program.buffers[buffer.index()].name;
        Some(format!(
            "a {what} of `{name}`, whose {dtype} elements are packed two a byte in memory"
        ))
    }

    /// One access of `lanes` elements, as the unsigned or vector type of that many bytes.
    fn vector_copy(&mut self, dst: (BufferId, ExprId), src: (BufferId, ExprId), lanes: u32) {
        let sub_byte = |b: BufferId| {
            self.program
                .buffers
                .get(b.index())
                .is_some_and(|decl| decl.dtype.is_sub_byte())
        };
        if sub_byte(dst.0) || sub_byte(src.0) {
            return self.nibble_vector_copy(dst, src, lanes);
        }
        let dtype = match self.writable(dst.0, "vector copy") {
            Ok(dtype) => dtype,
            Err(message) => return self.skip(&message),
        };
        let source = self.program.buffers.get(src.0.index()).map(|b| b.dtype);
        if source != Some(dtype) {
            return self.skip("a vector copy between buffers of different types");
        }
        let bytes = u64::from(lanes) * dtype.bytes();
        let Some(word) = vector_word(bytes) else {
            return self.skip(&format!(
                "a vector copy of {lanes} x {dtype} ({bytes} bytes) has no single access"
            ));
        };
        let names = (self.buffer_name(dst.0), self.buffer_name(src.0));
        let (Some(dst_name), Some(src_name)) = names else {
            return self.skip("a vector copy between buffers that could not be declared");
        };
        let dst_index = self.index(dst.1).text;
        let src_index = self.index(src.1).text;
        self.line(&format!(
            "*({word}*)({dst_name} + {dst_index}) = *(const {word}*)({src_name} + {src_index});"
        ));
    }

    /// A vector copy of `lanes` 4-bit elements (an even number, from an even index): whole bytes
    /// of packed memory, unpacked into or packed from a register array's byte per element. The
    /// thread owns every nibble of the bytes it stores, so the store is a plain one.
    fn nibble_vector_copy(&mut self, dst: (BufferId, ExprId), src: (BufferId, ExprId), lanes: u32) {
        let dtype = match self.writable(dst.0, "vector copy") {
            Ok(dtype) => dtype,
            Err(message) => return self.skip(&message),
        };
        let source = self.program.buffers.get(src.0.index()).map(|b| b.dtype);
        let word = match u64::from(lanes) / 2 {
            1 => "unsigned char",
            2 => "unsigned short",
            4 => "unsigned int",
            8 => "unsigned long long",
            _ => "",
        };
        if source != Some(dtype) || !lanes.is_multiple_of(2) || word.is_empty() {
            return self.skip(&format!(
                "a vector copy of {lanes} x {dtype} that is not 2 to 16 elements of one type"
            ));
        }
        let names = (self.buffer_name(dst.0), self.buffer_name(src.0));
        let (Some(dst_name), Some(src_name)) = names else {
            return self.skip("a vector copy between buffers that could not be declared");
        };
        let dst_index = self.index(dst.1).text;
        let src_index = self.index(src.1).text;
        let packed = |memory: Option<Memory>| !matches!(memory, Some(Memory::Local) | None);
        let (dst_packed, src_packed) =
            (packed(self.memory_of(dst.0)), packed(self.memory_of(src.0)));
        let from_code = nibble_from_code(dtype).unwrap_or("tl_e2m1_from_code");
        match (dst_packed, src_packed) {
            (true, true) => self.line(&format!(
                "*({word}*)({dst_name} + ({dst_index}) / 2) = *(const {word}*)({src_name} + ({src_index}) / 2);"
            )),
            (false, true) => {
                self.line("{");
                self.line(&format!(
                    "    const {word} tl_nibbles = *(const {word}*)({src_name} + ({src_index}) / 2);"
                ));
                for lane in 0..lanes {
                    self.line(&format!(
                        "    {dst_name}[{dst_index} + {lane}] = {from_code}((unsigned int)(tl_nibbles >> {}) & 15u);",
                        4 * lane
                    ));
                }
                self.line("}");
            }
            (true, false) => {
                self.line("{");
                self.line(&format!("    {word} tl_nibbles = 0;"));
                for lane in 0..lanes {
                    self.line(&format!(
                        "    tl_nibbles |= ({word})(tl_bits({src_name}[{src_index} + {lane}]) & 15u) << {};",
                        4 * lane
                    ));
                }
                self.line(&format!(
                    "    *({word}*)({dst_name} + ({dst_index}) / 2) = tl_nibbles;"
                ));
                self.line("}");
            }
            (false, false) => {
                for lane in 0..lanes {
                    self.line(&format!(
                        "{dst_name}[{dst_index} + {lane}] = {src_name}[{src_index} + {lane}];"
                    ));
                }
            }
        }
    }

    /// `cp.async` of 4, 8 or 16 bytes from global to shared memory.
    fn async_copy(&mut self, dst: (BufferId, ExprId), src: (BufferId, ExprId), lanes: u32) {
        if let Some(message) = self
            .packed_nibbles(dst.0, "cp.async")
            .or_else(|| self.packed_nibbles(src.0, "cp.async"))
        {
            return self.skip(&message);
        }
        let memories = (self.memory_of(dst.0), self.memory_of(src.0));
        if !matches!(
            memories,
            (Some(Memory::Shared { .. }), Some(Memory::Global { .. }))
        ) {
            return self.skip("a cp.async that is not from global to shared memory");
        }
        let dtype = self.program.buffers[dst.0.index()].dtype;
        let bytes = u64::from(lanes) * dtype.bytes();
        if !matches!(bytes, 4 | 8 | 16) || self.program.buffers[src.0.index()].dtype != dtype {
            return self.skip(&format!(
                "a cp.async of {lanes} x {dtype} needs 4, 8 or 16 bytes of one type"
            ));
        }
        let Some((dst, src)) = self.pointers(dst, src) else {
            return self.skip("a cp.async between buffers that could not be declared");
        };
        self.line(&format!("tl_cp_async<{bytes}>({dst}, {src});"));
    }

    /// `ldmatrix` from shared memory into a 16-bit register array.
    fn load_matrix(
        &mut self,
        (matrices, transpose): (u32, bool),
        dst: (BufferId, ExprId),
        src: (BufferId, ExprId),
    ) {
        if let Some(message) = self.packed_nibbles(src.0, "ldmatrix") {
            return self.skip(&message);
        }
        let memories = (self.memory_of(dst.0), self.memory_of(src.0));
        if !matches!(memories, (Some(Memory::Local), Some(Memory::Shared { .. })))
            || !matches!(matrices, 1 | 2 | 4)
        {
            return self
                .skip("an ldmatrix that is not 1, 2 or 4 matrices from shared to registers");
        }
        let (Some(dst), Some(src)) = (self.pointer(dst.0, dst.1), self.window_address(src)) else {
            return self.skip("an ldmatrix between buffers that could not be declared");
        };
        let trans = if transpose { "_trans" } else { "" };
        self.line(&format!("tl_ldmatrix_x{matrices}{trans}({dst}, {src});"));
    }

    /// The 32-bit shared-window address of element `index` of a shared buffer: the window base
    /// plus a byte offset, so that ptxas can fold the offset's constant part into the instruction.
    fn window_address(&mut self, (buffer, index): (BufferId, ExprId)) -> Option<String> {
        let Some(Memory::Shared { offset }) = self.memory_of(buffer) else {
            return None;
        };
        // A buffer that could not be declared is skipped, as `pointer` would.
        self.buffer_name(buffer)?;
        let window = self.shared_window.clone()?;
        let bytes = self.program.buffers.get(buffer.index())?.dtype.bytes();
        let index = self.index(index).text;
        let base = if offset == 0 {
            String::new()
        } else {
            format!("{offset}u + ")
        };
        Some(format!(
            "{window} + {base}(unsigned int)({index}) * {bytes}u"
        ))
    }

    /// `mma.sync` on register arrays, through the prelude's helper for its form: m16n8k16 on fp16
    /// or bf16, m16n8k8 on float32 or tf32 (rounded to tf32 in the helper) with an fp32
    /// accumulator, m16n8k32 on fp8 with an fp32 one or on 8-bit integers with an int32 one.
    fn mma(&mut self, [a, b, c]: [(BufferId, ExprId); 3]) {
        let dtype = |p: &Self, id: BufferId| p.program.buffers.get(id.index()).map(|b| b.dtype);
        let operands = (dtype(self, a.0), dtype(self, b.0), dtype(self, c.0));
        let Some(helper) = mma_helper(operands) else {
            return self.skip(
                "an mma whose operands are not fp16, bf16, tf32 or fp8 with an fp32 accumulator \
                 nor 8-bit integers with an int32 one",
            );
        };
        let local = [a.0, b.0, c.0]
            .iter()
            .all(|&id| self.memory_of(id) == Some(Memory::Local));
        if !local {
            return self.skip("an mma on operands outside registers");
        }
        let pointers = [a, b, c].map(|(id, index)| self.pointer(id, index));
        let [Some(a), Some(b), Some(c)] = pointers else {
            return self.skip("an mma on buffers that could not be declared");
        };
        self.line(&format!("{helper}({c}, {a}, {b});"));
    }

    pub(super) fn memory_of(&self, buffer: BufferId) -> Option<Memory> {
        self.program
            .buffers
            .get(buffer.index())
            .map(|b| b.memory.clone())
    }

    /// `name + index` for an element of a declared buffer.
    pub(super) fn pointer(&mut self, buffer: BufferId, index: ExprId) -> Option<String> {
        let name = self.buffer_name(buffer)?;
        let index = self.index(index).text;
        Some(format!("{name} + {index}"))
    }

    fn pointers(
        &mut self,
        dst: (BufferId, ExprId),
        src: (BufferId, ExprId),
    ) -> Option<(String, String)> {
        Some((self.pointer(dst.0, dst.1)?, self.pointer(src.0, src.1)?))
    }

    pub(super) fn buffer_name(&self, buffer: BufferId) -> Option<String> {
        self.buffers.get(buffer.index()).cloned().flatten()
    }

    /// An atomic update: the hardware instruction where one exists for the type and operation,
    /// the prelude's compare-and-swap loop otherwise.
    fn atomic(
        &mut self,
        op: AtomicOp,
        Place { buffer, index }: Place,
        value: ValueId,
        old: Option<Place>,
    ) {
        let dtype = match self.writable(buffer, "atomic") {
            Ok(dtype) => dtype,
            Err(message) => return self.skip(&message),
        };
        if self.program.buffers[buffer.index()].memory == Memory::Local {
            return self.skip("an atomic on a register array");
        }
        if let Some(message) = self.packed_nibbles(buffer, "atomic") {
            return self.skip(&message);
        }
        let Some(target) = self.element(buffer, index) else {
            return self.skip("an atomic on a buffer that could not be declared");
        };
        self.declare_temporaries(value);
        let (x, from) = self.root_value(value);
        self.forget_temporaries();
        // The operand takes the element's type first, as a store's value does.
        let x = self.convert(x, from, dtype);
        let call = atomic_call(op, dtype, &target, &x);
        match old.and_then(|old| self.element(old.buffer, old.index)) {
            Some(register) => self.line(&format!("{register} = {call};")),
            None => self.line(&format!("{call};")),
        }
    }
}

/// The C type of one access of `bytes` bytes.
fn vector_word(bytes: u64) -> Option<&'static str> {
    Some(match bytes {
        1 => "unsigned char",
        2 => "unsigned short",
        4 => "unsigned int",
        8 => "uint2",
        16 => "uint4",
        _ => return None,
    })
}

/// The call that applies `op` with operand `x` to the element `target` of type `dtype`.
fn atomic_call(op: AtomicOp, dtype: DType, target: &str, x: &CExpr) -> String {
    let (hardware, functor) = match op {
        AtomicOp::Add => ("atomicAdd", "tl_op_add"),
        AtomicOp::Max => ("atomicMax", "tl_op_max"),
        AtomicOp::Min => ("atomicMin", "tl_op_min"),
    };
    let value = &x.text;
    match (dtype, op) {
        (DType::Float32 | DType::Float64, AtomicOp::Add)
        | (DType::Int32 | DType::UInt32 | DType::UInt64, _)
        | (DType::Int64, AtomicOp::Max | AtomicOp::Min) => {
            format!("{hardware}(&{target}, {value})")
        }
        // Two's complement addition is the same on the unsigned type, which has the instruction.
        (DType::Int64, AtomicOp::Add) => format!(
            "atomicAdd((unsigned long long*)&{target}, (unsigned long long){})",
            x.operand()
        ),
        (DType::Float32, _) => format!("tl_atomic_cas_f32(&{target}, {value}, {functor}())"),
        (DType::Float64, _) => format!("tl_atomic_cas_f64(&{target}, {value}, {functor}())"),
        _ => {
            // The operand is passed in the element's compute type, which the loop computes in.
            let ty = compute_type(dtype);
            let operand = if storage_type(dtype) == ty && ty != "float" {
                format!("({ty}){}", x.operand())
            } else {
                value.clone()
            };
            format!("tl_atomic_cas_small(&{target}, {operand}, {functor}())")
        }
    }
}

/// The prelude's `mma.sync` helper for A, B and C of these dtypes (`tl_mma_m16n8k32_e4m3_e5m2`
/// and the like), if the instruction has that form.
fn mma_helper(operands: (Option<DType>, Option<DType>, Option<DType>)) -> Option<String> {
    let narrow = |d: DType| match d {
        DType::Float8E4M3 => Some("e4m3"),
        DType::Float8E5M2 => Some("e5m2"),
        DType::Int8 => Some("s8"),
        DType::UInt8 => Some("u8"),
        _ => None,
    };
    let tf32 = |d: DType| matches!(d, DType::Float32 | DType::TFloat32);
    let (Some(a), Some(b), Some(c)) = operands else {
        return None;
    };
    match (a, b, c) {
        (DType::Float16, DType::Float16, DType::Float32) => Some("tl_mma_m16n8k16_f16".into()),
        (DType::BFloat16, DType::BFloat16, DType::Float32) => Some("tl_mma_m16n8k16_bf16".into()),
        (a, b, DType::Float32) if tf32(a) && tf32(b) => Some("tl_mma_m16n8k8_tf32".into()),
        (a, b, c) => {
            let (x, y) = (narrow(a)?, narrow(b)?);
            let floats = a.is_float() && b.is_float() && c == DType::Float32;
            let ints = !a.is_float() && !b.is_float() && c == DType::Int32;
            (floats || ints).then(|| format!("tl_mma_m16n8k32_{x}_{y}"))
        }
    }
}
