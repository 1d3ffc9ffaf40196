//! The software pipeline on TMA, in its two forms.
//!
//! Both keep one *full* mbarrier per stage: the thread that issues a stage's boxes arrives on it
//! with the stage's byte count (`arrive.expect_tx`), the boxes complete those bytes, and whoever
//! reads the stage first waits for the barrier's phase of that round (parity `(ko / k) % 2`).
//!
//! - Warp specialized (TileLang's default on sm_90): a producer warpgroup is added after the
//!   kernel's threads. One of its threads walks the loop issuing TMA, `k` stages ahead at most:
//!   before refilling a stage it waits for the stage's *empty* mbarrier, on which every consumer
//!   thread arrives once it has finished reading the stage. The kernel's own threads (the
//!   consumers) run everything else, with their barriers narrowed to a named barrier of their own,
//!   since the producer never reaches them. Registers move from the producer to the consumers
//!   (`setmaxnreg`).
//! - Otherwise (`tl.disable_warp_specialized`, a kernel of one warpgroup — see
//!   `why_not_specialized` — or a loop this does not apply to): the `cp.async`
//!   pipeline's schedule, with thread 0 issuing TMA `k - 1` iterations ahead, every thread waiting
//!   for the full barrier, and the block barrier after the wait proving that the stage about to
//!   be refilled has been read by everyone.

use tilec_ir::data::CompareOp;
use tilec_ir::thread::{BufferDecl, BufferId, Memory, Place, Stmt};
use tilec_ir::{DType, EntityId, ExprId, VarId};

use super::overlap::{HalfBarriers, OverlapPlan};
use super::pipeline::{Pipeline, SteadyParts};
use super::tma::TmaCopy;
use super::{Lowering, Unlowerable, groups, rewrite};

/// Threads of a warpgroup: the producer role is one.
const WARPGROUP: i64 = 128;
/// The most threads a block may have.
const MAX_THREADS: i64 = 1024;
/// Registers per thread the producer warpgroup keeps (CUTLASS's choice for a TMA producer).
const PRODUCER_REGISTERS: u32 = 40;
/// The most registers per thread `setmaxnreg` may give.
const MAX_REGISTERS: u32 = 240;
/// Registers of one multiprocessor, which one block of the specialized kernel fills.
const REGISTER_FILE: u32 = 65536;
/// The most registers a thread can be launched with, in units of 8 (the hardware's 255, rounded
/// down to the allocation unit).
const MAX_LAUNCH_REGISTERS: u32 = 248;
/// An mbarrier's transaction count is 20 bits wide.
const MAX_TRANSACTION_BYTES: u32 = 1 << 20;
/// The named barrier the consumers use instead of `__syncthreads` (0 is `__syncthreads`'s own).
const CONSUMER_BARRIER: u32 = 1;
/// The first of the named barriers the consumer warpgroups take turns on, one per warpgroup.
pub(super) const TURN_BARRIERS: u32 = 2;

/// The producer side of a warp-specialized pipeline, put in place once the whole launch is
/// lowered.
#[derive(Clone, Debug)]
pub(super) struct ProducerRole {
    /// The mbarrier initialisations, run by thread 0 before the roles split.
    setup: Vec<Stmt>,
    /// The producer's loop, run by one thread of the producer warpgroup.
    stmts: Vec<Stmt>,
}

impl Lowering<'_> {
    /// Lowers a pipelined loop whose producers all have a TMA form.
    pub(super) fn tma_pipeline(
        &mut self,
        pipeline: &Pipeline,
        copies: &[TmaCopy],
        out: &mut Vec<Stmt>,
    ) -> Result<(), Unlowerable> {
        match self.why_not_specialized(pipeline, copies) {
            None => self.specialized_pipeline(pipeline, copies, out),
            Some(why) => {
                self.refuse_persistence(&format!("no producer warpgroup ({why})"))?;
                self.tma_steady_pipeline(pipeline, copies, out, why)
            }
        }
    }

    /// Why the loop keeps a single role, or `None` when it gets a producer warpgroup.
    fn why_not_specialized(&self, pipeline: &Pipeline, copies: &[TmaCopy]) -> Option<String> {
        if !self.options.warp_specialized {
            return Some("tl.disable_warp_specialized".to_owned());
        }
        if self.producer_role.is_some() {
            return Some("another loop of the kernel has the producer warpgroup".to_owned());
        }
        if self.world.parents.get(pipeline.entity) != Some(&self.launch) {
            return Some("the loop is nested in another statement".to_owned());
        }
        if self.threads % WARPGROUP != 0 || self.threads + WARPGROUP > MAX_THREADS {
            return Some(format!(
                "{} threads leave no room for a warpgroup of its own",
                self.threads
            ));
        }
        // The specialized kernel moves registers between its warpgroups (`setmaxnreg`), which
        // holds it to one block per multiprocessor: with a single consumer warpgroup, one
        // warpgroup per multiprocessor would issue the tensor-core work, where the single-role
        // pipeline lets several blocks share it. TileLang's example GEMM (128×128×32 tiles, 128
        // threads, 3 stages) at 8192³ on an H200 ran 2.32 ms single-role, 3.29 ms specialized.
        if self.threads < 2 * WARPGROUP {
            return Some(format!(
                "{} threads are one consumer warpgroup, which a producer warpgroup would hold to \
                 one block per multiprocessor",
                self.threads
            ));
        }
        let mut bound = vec![pipeline.var, self.program.thread];
        bound.extend(self.program.block_index);
        bound.extend(self.program.scalars.iter().map(|s| s.var));
        bound.extend(self.top_lets.iter().copied());
        let exprs = &self.program.exprs;
        let free = copies
            .iter()
            .flat_map(|copy| &copy.boxes)
            .flat_map(|tma_box| &tma_box.coords)
            .flat_map(|&c| exprs.vars_of(c))
            .any(|v| !bound.contains(&v));
        free.then(|| "a copy's coordinates depend on a value computed in the kernel".to_owned())
    }

    /// The warp-specialized form: the consumers' loop goes in place, the producer's is kept for
    /// [`Lowering::warp_specialize`].
    fn specialized_pipeline(
        &mut self,
        pipeline: &Pipeline,
        copies: &[TmaCopy],
        out: &mut Vec<Stmt>,
    ) -> Result<(), Unlowerable> {
        let stages = pipeline.stages;
        let full = self.mbarriers("full_barrier", stages);
        let empty = self.mbarriers("empty_barrier", stages);
        // Publishes what the consumers wrote before the loop to the loop's readers, which no
        // barrier at the top of every iteration does here.
        out.push(Stmt::Barrier);
        self.sync.barrier_placed();
        let ko = self.program.exprs.var_expr(pipeline.var);
        let (stage, parity) = self.stage_and_parity(ko, stages, false);
        let mut body = vec![Stmt::MbarrierWait {
            barrier: Place {
                buffer: full,
                index: stage,
            },
            parity,
        }];
        self.sync.begin_loop();
        self.consumers(pipeline, &mut body)?;
        let may_run_zero_times = self
            .program
            .exprs
            .as_int(pipeline.extent)
            .is_none_or(|n| n < 1);
        self.sync.end_loop(&mut body, may_run_zero_times);
        let warpgroups = u32::try_from(self.threads / WARPGROUP).unwrap_or(0);
        if self.options.overlap_gemms {
            let dsts: Vec<_> = copies.iter().map(|copy| copy.shared).collect();
            if let Some(plan) = self.overlap_plan(pipeline, &body, &dsts, warpgroups) {
                return self.overlapped_pipeline(pipeline, copies, &plan, (full, empty), out);
            }
        }
        let consumers = u32::try_from(self.threads).unwrap_or(u32::MAX);
        let setup = self.mbarrier_setup(&[(full, 1), (empty, consumers)], stages);
        let overlapped = keep_last_gemm_in_flight(&mut body);
        let (label, after) = if overlapped {
            // The stage the previous iteration's gemm read is released once that gemm is done,
            // which the wait for all but the newest group proves.
            let exprs = &mut self.program.exprs;
            let one = exprs.int(1);
            let previous = exprs.sub(ko, one);
            let zero = exprs.int(0);
            let (previous_stage, _) = self.stage_and_parity(previous, stages, false);
            let not_first = self.compare_indices(CompareOp::Gt, ko, zero);
            body.push(Stmt::If {
                cond: not_first,
                then: vec![Stmt::MbarrierArrive {
                    barrier: Place {
                        buffer: empty,
                        index: previous_stage,
                    },
                    expect_bytes: None,
                }],
                otherwise: Vec::new(),
            });
            let mut after = vec![Stmt::WgmmaWait { pending: 0 }];
            // The next tile of a persistent block refills the last stage too.
            if self.tile_walk.is_some() {
                let last = self.last_iteration(pipeline.extent);
                let (last_stage, _) = self.stage_and_parity(last, stages, false);
                after.push(Stmt::MbarrierArrive {
                    barrier: Place {
                        buffer: empty,
                        index: last_stage,
                    },
                    expect_bytes: None,
                });
            }
            (
                "T.Pipelined (consumer warpgroups): wait for the stage's TMA boxes, issue its \
                 wgmmas, wait for the previous iteration's and release its stage",
                after,
            )
        } else {
            body.push(Stmt::MbarrierArrive {
                barrier: Place {
                    buffer: empty,
                    index: stage,
                },
                expect_bytes: None,
            });
            (
                "T.Pipelined (consumer warpgroups): wait for the stage's TMA boxes, compute, \
                 release the stage",
                Vec::new(),
            )
        };
        let mut stmts = vec![Stmt::For {
            var: pipeline.var,
            extent: pipeline.extent,
            unroll: false,
            body,
        }];
        stmts.extend(after);
        out.push(Stmt::Block {
            origin: Some(pipeline.entity),
            label: label.to_owned(),
            body: stmts,
        });
        let producer = self.producer_loop(pipeline, &[(copies, full, empty)])?;
        self.producer_role = Some(ProducerRole {
            setup,
            stmts: producer,
        });
        Ok(())
    }

    /// The consumers on FlashAttention-3's schedule (`overlap.rs`), with a second pair of
    /// mbarriers per stage for the copies only the second gemm reads, and the producer filling
    /// each half of a stage as soon as its own barrier says it is free.
    fn overlapped_pipeline(
        &mut self,
        pipeline: &Pipeline,
        copies: &[TmaCopy],
        plan: &OverlapPlan,
        (full, empty): (BufferId, BufferId),
        out: &mut Vec<Stmt>,
    ) -> Result<(), Unlowerable> {
        let stages = pipeline.stages;
        let late_full = self.mbarriers("late_full_barrier", stages);
        let late_empty = self.mbarriers("late_empty_barrier", stages);
        let consumers = u32::try_from(self.threads).unwrap_or(u32::MAX);
        let arrays = [
            (full, 1),
            (empty, consumers),
            (late_full, 1),
            (late_empty, consumers),
        ];
        let setup = self.mbarrier_setup(&arrays, stages);
        let warpgroups = u32::try_from(self.threads / WARPGROUP).unwrap_or(0);
        let barriers = HalfBarriers {
            empty,
            late_full,
            late_empty,
        };
        let body = self.overlapped_gemm_loop(pipeline, plan, barriers, warpgroups);
        out.push(Stmt::Block {
            origin: Some(pipeline.entity),
            label: format!(
                "T.Pipelined (consumer warpgroups), FlashAttention-3's schedule: iteration k's \
                 first gemm and k-1's second are issued together, the {warpgroups} warpgroups \
                 taking turns, and what does not need the second gemm runs while it does"
            ),
            body,
        });
        let (mut early, mut late) = (Vec::new(), Vec::new());
        for (copy, &is_late) in copies.iter().zip(&plan.late_copies) {
            match is_late {
                true => late.push(copy.clone()),
                false => early.push(copy.clone()),
            }
        }
        let halves = [
            (&early[..], full, empty),
            (&late[..], late_full, late_empty),
        ];
        let producer = self.producer_loop(pipeline, &halves)?;
        self.producer_role = Some(ProducerRole {
            setup,
            stmts: producer,
        });
        Ok(())
    }

    /// The producer's loop: for each group of copies with its pair of mbarriers, wait until the
    /// consumers released the group's part of the stage, then refill it.
    fn producer_loop(
        &mut self,
        pipeline: &Pipeline,
        groups: &[(&[TmaCopy], BufferId, BufferId)],
    ) -> Result<Vec<Stmt>, Unlowerable> {
        let info = self.program.exprs.var_info(pipeline.var).clone();
        let exprs = &mut self.program.exprs;
        let load = exprs.var(&format!("{}_load", info.name), info.extent);
        let ko = exprs.var_expr(load);
        let (stage, parity) = self.stage_and_parity(ko, pipeline.stages, true);
        let mut body = Vec::new();
        for &(copies, full, empty) in groups {
            body.push(Stmt::MbarrierWait {
                barrier: Place {
                    buffer: empty,
                    index: stage,
                },
                parity,
            });
            body.extend(self.tma_issue(pipeline, copies, full, ko)?);
        }
        let boxes: usize = groups
            .iter()
            .flat_map(|(copies, ..)| copies.iter())
            .map(|c| c.boxes.len())
            .sum();
        Ok(vec![Stmt::Block {
            origin: Some(pipeline.entity),
            label: format!(
                "T.Pipelined (producer): {boxes} TMA box(es) per stage, {} stages ahead at most",
                pipeline.stages
            ),
            body: vec![Stmt::For {
                var: load,
                extent: pipeline.extent,
                unroll: false,
                body,
            }],
        }])
    }

    /// The single-role form: the `cp.async` schedule with TMA issued by thread 0.
    fn tma_steady_pipeline(
        &mut self,
        pipeline: &Pipeline,
        copies: &[TmaCopy],
        out: &mut Vec<Stmt>,
        why: String,
    ) -> Result<(), Unlowerable> {
        let (var, stages) = (pipeline.var, pipeline.stages);
        let full = self.mbarriers("full_barrier", stages);
        let mut setup = self.mbarrier_setup(&[(full, 1)], stages);
        setup.push(Stmt::Barrier);
        self.sync.barrier_placed();
        out.push(Stmt::Block {
            origin: Some(pipeline.entity),
            label: "the pipeline's mbarriers, initialised by thread 0".to_owned(),
            body: setup,
        });
        let ko = self.program.exprs.var_expr(var);
        let issue_stmts = self.tma_issue(pipeline, copies, full, ko)?;
        let issue_stmts = self.with_iteration_binds(pipeline, issue_stmts)?;
        let elected = self.thread_is(0);
        let issue = vec![Stmt::If {
            cond: elected,
            then: issue_stmts,
            otherwise: Vec::new(),
        }];
        out.push(self.prologue_stages(&issue, var, pipeline.extent, stages));
        let exprs = &mut self.program.exprs;
        let ahead = exprs.int(stages - 1);
        let next = exprs.add(ko, ahead);
        let shifted =
            rewrite::substitute_stmts(&mut self.program, &issue, &|v| (v == var).then_some(next));
        let (stage, parity) = self.stage_and_parity(ko, stages, false);
        let parts = SteadyParts {
            wait: vec![Stmt::MbarrierWait {
                barrier: Place {
                    buffer: full,
                    index: stage,
                },
                parity,
            }],
            ahead: shifted,
            after_ahead: Vec::new(),
            label: format!(
                "T.Pipelined on TMA: the iterations that issue a stage ahead, then the last ones \
                 (one role: {why})"
            ),
            prefetch_fragments: false,
        };
        let steady = self.steady_state(pipeline, parts)?;
        out.push(steady);
        if self.inside_loop(pipeline.entity) {
            out.push(self.mbarrier_teardown(pipeline.entity, full, pipeline.stages));
        }
        Ok(())
    }

    /// Whether `entity` runs inside another loop of its launch (a serial loop over tiles, a
    /// `while` over a work range), so that it is entered more than once.
    pub(super) fn inside_loop(&self, entity: EntityId) -> bool {
        self.world
            .ancestors(entity)
            .any(|parent| self.world.kind(parent) == Some(tilec_ir::EntityKind::Loop))
    }

    /// After a pipeline that is entered again: once every thread has passed its last wait (the
    /// barrier), thread 0 invalidates the `count` mbarriers of `full`, so that the next entry
    /// initialises them afresh, with their phases back at zero as its waits expect.
    pub(super) fn mbarrier_teardown(
        &mut self,
        entity: EntityId,
        full: BufferId,
        count: i64,
    ) -> Stmt {
        let invals = (0..count)
            .map(|s| Stmt::MbarrierInval {
                barrier: Place {
                    buffer: full,
                    index: self.program.exprs.int(s),
                },
            })
            .collect();
        let elected = self.thread_is(0);
        self.sync.barrier_placed();
        Stmt::Block {
            origin: Some(entity),
            label: "the pipeline's mbarriers, invalidated for its next entry".to_owned(),
            body: vec![
                Stmt::Barrier,
                Stmt::If {
                    cond: elected,
                    then: invals,
                    otherwise: Vec::new(),
                },
            ],
        }
    }

    /// Iteration `ko`'s issue: the expected bytes on its stage's full barrier, then every box.
    fn tma_issue(
        &mut self,
        pipeline: &Pipeline,
        copies: &[TmaCopy],
        full: BufferId,
        ko: ExprId,
    ) -> Result<Vec<Stmt>, Unlowerable> {
        let (stage, _) = self.stage_and_parity(ko, pipeline.stages, false);
        let barrier = Place {
            buffer: full,
            index: stage,
        };
        self.boxes_on_barrier(pipeline.var, copies, (barrier, stage), ko)
    }

    /// `copies` for iteration `ko` into stage `stage` of their buffers: `barrier` expects their
    /// bytes, then every box is issued to complete on it.
    pub(super) fn boxes_on_barrier(
        &mut self,
        var: VarId,
        copies: &[TmaCopy],
        (barrier, stage): (Place, ExprId),
        ko: ExprId,
    ) -> Result<Vec<Stmt>, Unlowerable> {
        let bytes: i64 = copies.iter().map(|copy| copy.bytes).sum();
        let bytes = u32::try_from(bytes)
            .ok()
            .filter(|&bytes| bytes < MAX_TRANSACTION_BYTES)
            .ok_or_else(|| {
                Unlowerable::new("a stage's TMA boxes exceed an mbarrier's byte count")
            })?;
        let mut stmts = vec![Stmt::MbarrierArrive {
            barrier,
            expect_bytes: Some(bytes),
        }];
        for copy in copies {
            stmts.push(self.copy_boxes(var, copy, (barrier, stage), ko)?);
        }
        Ok(stmts)
    }

    /// One copy's boxes for iteration `ko`, into stage `stage` of its buffer, completing on
    /// `barrier`.
    fn copy_boxes(
        &mut self,
        var: VarId,
        copy: &TmaCopy,
        (barrier, stage): (Place, ExprId),
        ko: ExprId,
    ) -> Result<Stmt, Unlowerable> {
        let dst = self.buffer_of(copy.shared)?;
        let storage = self.stage_elements(copy.shared);
        let mut body = Vec::new();
        for tma_box in &copy.boxes {
            let exprs = &mut self.program.exprs;
            let size = exprs.int(storage);
            let stage_start = exprs.mul(stage, size);
            let offset = exprs.int(tma_box.shared_offset);
            let dst_index = exprs.add(stage_start, offset);
            let coords = tma_box
                .coords
                .iter()
                .map(|&c| exprs.substitute(c, &|v| (v == var).then_some(ko)))
                .collect();
            body.push(Stmt::TmaLoad {
                map: tma_box.map,
                dst: Place {
                    buffer: dst,
                    index: dst_index,
                },
                coords,
                barrier,
            });
        }
        Ok(Stmt::Block {
            origin: Some(copy.producer),
            label: format!(
                "T.copy into `{}` (pipelined: {} TMA box(es) into its stage)",
                self.world.name(copy.shared),
                copy.boxes.len()
            ),
            body,
        })
    }

    /// Elements of one stage of a pipelined shared buffer.
    fn stage_elements(&self, buffer: EntityId) -> i64 {
        self.layouts
            .shared
            .get(&buffer)
            .map_or(0, |assigned| assigned.storage_elements)
    }

    /// `ko % k` and the parity of round `ko / k`, flipped for the producer's empty-barrier wait
    /// (whose first round must pass at once); in a persistent launch `ko` counts on from the
    /// block's earlier tiles.
    pub(super) fn stage_and_parity(
        &mut self,
        ko: ExprId,
        stages: i64,
        flipped: bool,
    ) -> (ExprId, ExprId) {
        let count = self.pipeline_count(ko);
        let exprs = &mut self.program.exprs;
        let k = exprs.int(stages);
        let two = exprs.int(2);
        let stage = exprs.floormod(count, k);
        let mut round = exprs.floordiv(count, k);
        if flipped {
            let one = exprs.int(1);
            round = exprs.add(round, one);
        }
        (stage, exprs.floormod(round, two))
    }

    /// A shared array of `count` mbarriers after everything else in shared memory.
    pub(super) fn mbarriers(&mut self, base: &str, count: i64) -> BufferId {
        let offset = (self.program.shared_bytes + 7) / 8 * 8;
        self.program.shared_bytes = offset + 8 * count;
        let exprs = &mut self.program.exprs;
        let elements = exprs.int(count);
        let name = self.program.unique_buffer_name(base);
        self.program.add_buffer(BufferDecl {
            name,
            dtype: DType::UInt64,
            memory: Memory::Shared { offset },
            shape: vec![elements],
            elements,
            strides: None,
        })
    }

    /// Thread 0 initialises `stages` barriers of each array with its arrival count.
    pub(super) fn mbarrier_setup(&mut self, arrays: &[(BufferId, u32)], stages: i64) -> Vec<Stmt> {
        let mut inits = Vec::new();
        for &(barrier, count) in arrays {
            for s in 0..stages {
                let index = self.program.exprs.int(s);
                inits.push(Stmt::MbarrierInit {
                    barrier: Place {
                        buffer: barrier,
                        index,
                    },
                    count,
                });
            }
        }
        let elected = self.thread_is(0);
        vec![Stmt::If {
            cond: elected,
            then: inits,
            otherwise: Vec::new(),
        }]
    }

    /// Splits the launch into its consumer and producer roles once the whole body is lowered:
    /// the leading `let`s (rasterization) stay shared, the barriers are initialised, and the rest
    /// of the body becomes the consumers' role. In a persistent launch each role loops over the
    /// block's tiles and re-runs the `let`s per tile (`persistent.rs`).
    pub(super) fn warp_specialize(&mut self, stmts: Vec<Stmt>, role: ProducerRole) -> Vec<Stmt> {
        let consumers = self.threads;
        let lets = stmts
            .iter()
            .take_while(|stmt| matches!(stmt, Stmt::Let { .. }))
            .count();
        let (leading, rest) = stmts.split_at(lets);
        // A persistent launch binds the block indices per tile, so its `let`s go into each role's
        // loop over tiles instead.
        let mut body: Vec<Stmt> = match self.tile_walk {
            Some(_) => Vec::new(),
            None => leading.to_vec(),
        };
        let mut setup = role.setup;
        setup.push(Stmt::Barrier);
        body.push(Stmt::Block {
            origin: None,
            label: "warp specialization: thread 0 initialises the pipeline's mbarriers".to_owned(),
            body: setup,
        });
        let consumer_count = u32::try_from(consumers).unwrap_or(u32::MAX);
        let mut consumer = vec![Stmt::SetMaxRegisters {
            count: consumer_registers(consumer_count),
            increase: true,
        }];
        let mut producer_stmts = role.stmts;
        match self.tile_walk {
            Some(walk) => {
                let mut per_tile = self.prefetch_tile_inputs(walk, leading, rest.to_vec());
                // The next tile's first shared-memory writes wait for every consumer to finish
                // this tile's reads.
                per_tile.push(Stmt::Barrier);
                consumer.push(self.tile_loop(walk, leading, per_tile));
                producer_stmts = vec![self.tile_loop(walk, leading, producer_stmts)];
            }
            None => consumer.extend(rest.iter().cloned()),
        }
        groups::narrow_barriers(&mut consumer, CONSUMER_BARRIER, consumer_count);
        // The thread index's range (the consumers') lets the arena simplify `tx % 128` to `tx`,
        // which is wrong for the producer's threads: they read it through a variable of their
        // own with no range.
        let exprs = &mut self.program.exprs;
        let t = exprs.var_expr(self.program.thread);
        let producer_thread = exprs.var("producer_tx", None);
        let p = exprs.var_expr(producer_thread);
        let group = exprs.int(WARPGROUP);
        let lane = exprs.floormod(p, group);
        let zero = exprs.int(0);
        let elected = self.compare_indices(CompareOp::Eq, lane, zero);
        let producer = vec![
            Stmt::SetMaxRegisters {
                count: PRODUCER_REGISTERS,
                increase: false,
            },
            Stmt::Let {
                var: producer_thread,
                value: t,
            },
            Stmt::If {
                cond: elected,
                then: producer_stmts,
                otherwise: Vec::new(),
            },
        ];
        body.push(Stmt::WarpRoles {
            consumers: consumer_count,
            consumer,
            producer,
        });
        self.program.block[0] = consumers + WARPGROUP;
        body
    }
}

/// When the consumers' iteration is the stage's wait and one wgmma gemm and nothing else (a gemm
/// loop), lets that gemm's group stay in flight into the next iteration: its final
/// `wgmma.wait_group 0` becomes `wait_group 1`, which retires the previous iteration's group
/// instead. The accumulator is only chained into the next iteration's wgmmas, which the hardware
/// orders, so the tensor cores never drain between k steps. Returns whether it applied; the
/// caller then releases the previous stage, not the current one, and waits for the last group
/// after the loop.
fn keep_last_gemm_in_flight(body: &mut [Stmt]) -> bool {
    let [Stmt::MbarrierWait { .. }, Stmt::Block { body: gemm, .. }] = body else {
        return false;
    };
    let issues_wgmma = gemm.iter().any(|stmt| matches!(stmt, Stmt::Wgmma { .. }));
    let tail = gemm.len().saturating_sub(2);
    match &mut gemm[tail..] {
        [Stmt::WgmmaCommit, Stmt::WgmmaWait { pending }] if issues_wgmma && *pending == 0 => {
            *pending = 1;
            true
        }
        _ => false,
    }
}

/// Registers per consumer thread: what the producer gives up, shared out, in multiples of 8.
///
/// `setmaxnreg` moves registers within the block's own pool, which is what the block was
/// launched with: every thread gets the launch bound's share of the register file, rounded
/// down to the allocation unit of 8 (168 for 384 threads, 96 for 640). A request past that pool
/// never completes, and the consumers wait in `setmaxnreg.inc` forever: with 512 consumers,
/// sharing out the whole register file (112 each) hung the GPU, while the pool allows 104.
fn consumer_registers(consumers: u32) -> u32 {
    // `WARPGROUP` is 128 threads.
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let producers = WARPGROUP as u32;
    let threads = consumers.max(1).saturating_add(producers);
    let per_thread = (REGISTER_FILE / threads / 8 * 8).min(MAX_LAUNCH_REGISTERS);
    let pool = per_thread * threads;
    let left = pool.saturating_sub(PRODUCER_REGISTERS * producers);
    (left / consumers.max(1) / 8 * 8).min(MAX_REGISTERS)
}

#[cfg(test)]
mod tests {
    use super::consumer_registers;

    /// The consumers' share stays within the block's launch pool: 1 producer + 2 consumer
    /// warpgroups are launched with 168 registers a thread (CUTLASS's 232 / 40 split fills the
    /// pool exactly); with 4 consumer warpgroups the 640 threads launch with 96, and 112 a
    /// consumer (the register file's share) waited forever on the GPU.
    #[test]
    fn consumers_get_the_launch_pool_not_the_register_file() {
        // The block's pool: every thread launched with `launched` registers; the producer
        // warpgroup keeps 40 of its own.
        let fits = |consumers: u32, launched: u32| {
            consumer_registers(consumers) * consumers + 40 * 128 <= launched * (consumers + 128)
        };
        assert_eq!(consumer_registers(256), 232);
        assert!(fits(256, 168));
        assert_eq!(consumer_registers(512), 104);
        assert!(fits(512, 96));
        assert_eq!(consumer_registers(128), 240);
        assert_eq!(consumer_registers(384), 152);
        assert!(fits(384, 128));
    }
}
