//! Hopper's asynchronous data movement and warp specialization: TMA tensor map parameters,
//! `cp.async.bulk.tensor` loads, mbarriers, warp roles, `setmaxnreg` and named barriers.
//!
//! Each statement becomes one call of a helper of `prelude_sm90.cuh`, which holds the inline PTX.
//! That part of the prelude is printed only for kernels that use it, because its first line refuses
//! every architecture before sm_90 and kernels without these statements must still build for sm_80.
//! What the hardware would reject (a rank TMA lacks, a register count `setmaxnreg` refuses, a barrier
//! that is not a 64-bit shared word) is reported like any other malformed program.

use tilec_ir::thread::{BufferId, Memory, Stmt, TurnStep, any_stmt};
use tilec_ir::{DType, ExprId, ThreadProgram};

use super::Printer;
use super::index::IndexType;

/// The most arrivals, and the largest transaction count, one mbarrier phase can hold (2^20 - 1).
const MBARRIER_LIMIT: u32 = (1 << 20) - 1;

/// The named barriers a block has; `bar.sync` ids are 0 to 15.
const NAMED_BARRIERS: u32 = 16;

/// Whether the program needs `prelude_sm90.cuh`: it takes a tensor map or uses a statement whose
/// helper lives there.
pub(super) fn uses_sm90_prelude(program: &ThreadProgram) -> bool {
    !program.tensor_maps.is_empty()
        || any_stmt(&program.body, |stmt| {
            matches!(
                stmt,
                Stmt::MbarrierInit { .. }
                    | Stmt::MbarrierInval { .. }
                    | Stmt::MbarrierArrive { .. }
                    | Stmt::MbarrierExpectTx { .. }
                    | Stmt::MbarrierWait { .. }
                    | Stmt::TmaLoad { .. }
                    | Stmt::TmaStore { .. }
                    | Stmt::TmaStoreWait
                    | Stmt::WarpRoles { .. }
                    | Stmt::SetMaxRegisters { .. }
                    | Stmt::NamedBarrier { .. }
                    | Stmt::NamedBarrierArrive { .. }
                    | Stmt::WarpgroupTurn { .. }
                    | Stmt::GridDependencyWait
                    | Stmt::LaunchDependents
            )
        })
}

/// Whether any statement is a `setmaxnreg`.
pub(super) fn uses_set_max_registers(program: &ThreadProgram) -> bool {
    any_stmt(&program.body, |stmt| {
        matches!(stmt, Stmt::SetMaxRegisters { .. })
    })
}

/// Whether any statement is a TMA load or store, whose swizzle, like wgmma's, applies to the
/// absolute shared address and so needs the shared array aligned to the 1024-byte swizzle pattern.
pub(super) fn uses_tma(program: &ThreadProgram) -> bool {
    any_stmt(&program.body, |stmt| {
        matches!(stmt, Stmt::TmaLoad { .. } | Stmt::TmaStore { .. })
    })
}

impl Printer<'_> {
    /// One `const __grid_constant__ tl_tensor_map` parameter per tensor map, in order.
    pub(super) fn tensor_map_params(&mut self) -> Vec<String> {
        let program = self.program;
        let mut params = Vec::with_capacity(program.tensor_maps.len());
        for map in &program.tensor_maps {
            if !program.params.iter().any(|p| p.buffer == map.buffer) {
                self.invalid(&format!(
                    "tensor map `{}` describes a buffer that is not a tensor parameter",
                    map.name
                ));
            }
            let name = self.names.fresh(&map.name);
            params.push(format!("const __grid_constant__ tl_tensor_map {name}"));
            self.tensor_maps.push(name);
        }
        params
    }

    /// `tl_mbarrier_init(barrier, count);`
    pub(super) fn mbarrier_init(&mut self, barrier: BufferId, index: ExprId, count: u32) {
        if !(1..=MBARRIER_LIMIT).contains(&count) {
            return self.skip(&format!(
                "an mbarrier initialised for {count} arrivals (1 to {MBARRIER_LIMIT})"
            ));
        }
        let Some(barrier) = self.barrier_pointer(barrier, index) else {
            return;
        };
        self.line(&format!("tl_mbarrier_init({barrier}, {count});"));
    }

    /// `tl_mbarrier_inval(barrier);`
    pub(super) fn mbarrier_inval(&mut self, barrier: BufferId, index: ExprId) {
        let Some(barrier) = self.barrier_pointer(barrier, index) else {
            return;
        };
        self.line(&format!("tl_mbarrier_inval({barrier});"));
    }

    /// `tl_mbarrier_arrive(barrier);`, or with a transaction count
    /// `tl_mbarrier_arrive_expect_tx(barrier, bytes);`.
    pub(super) fn mbarrier_arrive(
        &mut self,
        barrier: BufferId,
        index: ExprId,
        expect_bytes: Option<u32>,
    ) {
        if let Some(bytes) = expect_bytes.filter(|&bytes| bytes > MBARRIER_LIMIT) {
            return self.skip(&format!(
                "an mbarrier arrival expecting {bytes} bytes (at most {MBARRIER_LIMIT})"
            ));
        }
        let Some(barrier) = self.barrier_pointer(barrier, index) else {
            return;
        };
        let line = match expect_bytes {
            Some(bytes) => format!("tl_mbarrier_arrive_expect_tx({barrier}, {bytes});"),
            None => format!("tl_mbarrier_arrive({barrier});"),
        };
        self.line(&line);
    }

    /// `tl_mbarrier_expect_tx(barrier, bytes);`
    pub(super) fn mbarrier_expect_tx(&mut self, barrier: BufferId, index: ExprId, bytes: u32) {
        if bytes > MBARRIER_LIMIT {
            return self.skip(&format!(
                "an mbarrier expecting {bytes} bytes (at most {MBARRIER_LIMIT})"
            ));
        }
        let Some(barrier) = self.barrier_pointer(barrier, index) else {
            return;
        };
        self.line(&format!("tl_mbarrier_expect_tx({barrier}, {bytes});"));
    }

    /// `tl_mbarrier_wait(barrier, parity);`
    pub(super) fn mbarrier_wait(&mut self, barrier: BufferId, index: ExprId, parity: ExprId) {
        let Some(barrier) = self.barrier_pointer(barrier, index) else {
            return;
        };
        let parity = self.int_argument(parity);
        self.line(&format!("tl_mbarrier_wait({barrier}, {parity});"));
    }

    /// `tl_tma_load_{rank}d(dst, &map, barrier, c0, ..);` with the coordinates innermost first.
    pub(super) fn tma_load(
        &mut self,
        map: usize,
        dst: (BufferId, ExprId),
        coords: &[ExprId],
        barrier: (BufferId, ExprId),
    ) {
        let Some(map_name) = self.tma_operands(map, coords.len(), dst.0, ("load", "destination"))
        else {
            return;
        };
        let Some(dst) = self.pointer(dst.0, dst.1) else {
            return self.skip("a TMA load into a buffer that could not be declared");
        };
        let Some(barrier) = self.barrier_pointer(barrier.0, barrier.1) else {
            return;
        };
        let coords: Vec<String> = coords.iter().map(|&c| self.int_argument(c)).collect();
        self.line(&format!(
            "tl_tma_load_{}d({dst}, &{map_name}, {barrier}, {});",
            coords.len(),
            coords.join(", ")
        ));
    }

    /// `tl_tma_store_{rank}d(&map, src, c0, ..);`: one box from shared memory into the map's
    /// tensor, committed as the thread's bulk group.
    pub(super) fn tma_store(&mut self, map: usize, src: (BufferId, ExprId), coords: &[ExprId]) {
        let Some(map_name) = self.tma_operands(map, coords.len(), src.0, ("store", "source"))
        else {
            return;
        };
        let Some(src) = self.pointer(src.0, src.1) else {
            return self.skip("a TMA store from a buffer that could not be declared");
        };
        let coords: Vec<String> = coords.iter().map(|&c| self.int_argument(c)).collect();
        self.line(&format!(
            "tl_tma_store_{}d(&{map_name}, {src}, {});",
            coords.len(),
            coords.join(", ")
        ));
    }

    /// The parameter name of tensor map `map` for a TMA `what` ("load" or "store") of `rank`
    /// coordinates whose shared `side` ("destination" or "source") is `shared`; `None`, with the
    /// statement skipped and said why, where the map does not exist, the ranks differ or the
    /// buffer is not shared.
    fn tma_operands(
        &mut self,
        map: usize,
        rank: usize,
        shared: BufferId,
        (what, side): (&str, &str),
    ) -> Option<String> {
        let program = self.program;
        let (Some(decl), Some(name)) = (program.tensor_maps.get(map), self.tensor_maps.get(map))
        else {
            self.skip(&format!(
                "a TMA {what} through tensor map {map}, which does not exist"
            ));
            return None;
        };
        if !(1..=5).contains(&rank) || rank != decl.box_dims.len() {
            self.skip(&format!(
                "a TMA {what} of rank {rank} through tensor map `{}` of rank {} (TMA has ranks 1 \
                 to 5)",
                decl.name,
                decl.box_dims.len()
            ));
            return None;
        }
        let name = name.clone();
        if !matches!(self.memory_of(shared), Some(Memory::Shared { .. })) {
            self.skip(&format!(
                "a TMA {what} whose {side} is not in shared memory"
            ));
            return None;
        }
        Some(name)
    }

    /// `if (thread < consumers) { consumer } else { producer }`.
    pub(super) fn warp_roles(&mut self, consumers: u32, consumer: &[Stmt], producer: &[Stmt]) {
        let threads = self.program.threads();
        if consumers == 0 || !consumers.is_multiple_of(128) || i64::from(consumers) >= threads {
            return self.skip(&format!(
                "warp roles with {consumers} consumer threads in a block of {threads} (a positive \
                 multiple of 128 below the block's threads)"
            ));
        }
        let Some(thread) = self.thread_name() else {
            return self.skip("warp roles where the thread index is not defined");
        };
        self.line(&format!("if ({thread} < {consumers}) {{"));
        self.nested(consumer);
        self.line("} else {");
        self.nested(producer);
        self.line("}");
    }

    /// The C name of the flat thread index, once it is defined.
    fn thread_name(&self) -> Option<String> {
        self.visible
            .get(self.program.thread.index())
            .cloned()
            .flatten()
    }

    /// `tl_setmaxnreg_inc<count>();` or `tl_setmaxnreg_dec<count>();`.
    pub(super) fn set_max_registers(&mut self, count: u32, increase: bool) {
        if !(24..=256).contains(&count) || !count.is_multiple_of(8) {
            return self.skip(&format!(
                "setmaxnreg to {count} registers (24 to 256 in steps of 8)"
            ));
        }
        let direction = if increase { "inc" } else { "dec" };
        self.line(&format!("tl_setmaxnreg_{direction}<{count}>();"));
    }

    /// `tl_named_barrier(id, threads);`
    pub(super) fn named_barrier(&mut self, id: u32, threads: u32) {
        if id >= NAMED_BARRIERS || threads == 0 || !threads.is_multiple_of(32) {
            return self.skip(&format!(
                "a named barrier {id} of {threads} threads (ids 0 to {}, a positive multiple of 32 \
                 threads)",
                NAMED_BARRIERS - 1
            ));
        }
        self.line(&format!("tl_named_barrier({id}, {threads});"));
    }

    /// `tl_named_barrier_arrive(id, threads);`
    pub(super) fn named_barrier_arrive(&mut self, id: u32, threads: u32) {
        if id >= NAMED_BARRIERS || threads == 0 || !threads.is_multiple_of(32) {
            return self.skip(&format!(
                "an arrival on named barrier {id} of {threads} threads (ids 0 to {}, a positive \
                 multiple of 32 threads)",
                NAMED_BARRIERS - 1
            ));
        }
        self.line(&format!("tl_named_barrier_arrive({id}, {threads});"));
    }

    /// A step of the consumer warpgroups' turn-taking, on named barriers `first_barrier` to
    /// `first_barrier + warpgroups - 1`; each phase has two warpgroups' threads, the taker's
    /// `bar.sync` and the giver's `bar.arrive`.
    pub(super) fn warpgroup_turn(&mut self, step: TurnStep, warpgroups: u32, first: u32) {
        if warpgroups < 2 || first == 0 || first.saturating_add(warpgroups) > NAMED_BARRIERS {
            return self.skip(&format!(
                "a turn among {warpgroups} warpgroups on named barriers from {first} (at least \
                 two warpgroups, barriers 1 to {})",
                NAMED_BARRIERS - 1
            ));
        }
        let Some(thread) = self.thread_name() else {
            return self.skip("a warpgroup turn where the thread index is not defined");
        };
        let group = format!("{thread} / 128");
        let pair = 2 * 128;
        let last = warpgroups - 1;
        let line = match step {
            TurnStep::Start => format!(
                "if ({group} == {last}) tl_named_barrier_arrive({first}, {pair}); // the first turn \
                 goes to warpgroup 0"
            ),
            TurnStep::Take => {
                format!("tl_named_barrier({first} + {group}, {pair}); // take the turn")
            }
            TurnStep::Pass => format!(
                "tl_named_barrier_arrive({first} + ({group} + 1) % {warpgroups}, {pair}); // hand \
                 the turn on"
            ),
            TurnStep::End => format!(
                "if ({group} == 0) tl_named_barrier({first}, {pair}); // the last turn handed on"
            ),
        };
        self.line(&line);
    }

    /// `barrier + index` for an mbarrier, which must be a 64-bit word of shared memory; prints the
    /// placeholder and returns `None` otherwise.
    fn barrier_pointer(&mut self, barrier: BufferId, index: ExprId) -> Option<String> {
        let decl = self.program.buffers.get(barrier.index());
        let is_word = decl.is_some_and(|decl| {
            decl.dtype == DType::UInt64 && matches!(decl.memory, Memory::Shared { .. })
        });
        if !is_word {
            self.skip("an mbarrier that is not a uint64 element of a shared buffer");
            return None;
        }
        let pointer = self.pointer(barrier, index);
        if pointer.is_none() {
            self.skip("an mbarrier in a buffer that could not be declared");
        }
        pointer
    }

    /// An index expression passed as an `int` argument: cast where it is computed in `long long`.
    fn int_argument(&mut self, e: ExprId) -> String {
        let index = self.index(e);
        match index.ty {
            IndexType::Int => index.text,
            IndexType::Long => format!("(int)({})", index.text),
        }
    }
}
