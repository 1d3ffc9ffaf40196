//! Persistent launches: one block per multiprocessor walks the grid's tiles.
//!
//! A warp-specialized gemm launch spends a few microseconds per tile outside its main loop: the
//! pipeline fills before the first wgmma, and the consumers store the accumulator while the
//! producer idles. Launched as written, with one block per tile and one block per multiprocessor,
//! none of that overlaps. Made persistent, each block handles tiles `b`, `b + n`, `b + 2n`, … (see
//! [`PersistentGrid`]) and its producer runs straight on into the next tile's stages while the
//! consumers store the last one, so only the stores remain between two tiles' main loops.
//!
//! The rewrite is small because the kernel body is already written per tile:
//! - each role's statements run inside a loop over the block's rounds, which first binds the
//!   tile's block indices (and re-runs the launch's rasterization `let`s on them);
//! - the pipeline's stage and barrier parity count iterations across rounds
//!   (`ko + round × extent`), so the mbarriers' phases carry on from one tile to the next;
//! - the consumers release the last stage of every tile, which the producer waits for next round;
//! - no two shared buffers share space, since every buffer may be in use in some round while
//!   another is in the next, and the consumers meet at a barrier at the end of every tile, so no
//!   consumer's first write of the next tile overtakes another's last read of this one.
//!
//! Only a launch whose single pipelined loop gets a producer warpgroup, with the same trip count in
//! every tile, is made persistent: a loop without a producer warpgroup has no one to run ahead.
//!
//! What a tile's consumers copy from global memory before the pipeline (attention's Q tile) would
//! otherwise stall every tile's start for a full global-memory latency. In a persistent launch the
//! consumers load the next tile's copy into registers while their last gemm of this tile runs, and
//! store it into shared memory at the next tile's start ([`Lowering::prefetch_tile_inputs`]).
//! Attention measured slower persistent than one block per tile without this (H100: 2.01 against
//! 1.97 ms, 2026-11-25). With it, and with the epilogue's divisions in the prelude's `tl_div`, the
//! persistent kernel ran faster than the per-block kernel of the session before in both calls on
//! one H100 that measured the two (1.977 against 2.006 ms, 1.951 against 2.019 ms; BENCHMARKS.md,
//! 2026-11-25).

use tilec_ir::data::CompareOp;
use tilec_ir::thread::{
    BufferDecl, BufferId, Memory, ParamAccess, PersistentGrid, Place, Stmt, any_stmt,
};
use tilec_ir::{ExprId, VarId};

use super::{Lowering, Unlowerable};

/// The variables a persistent lowering binds: the block's round and what CUDA says about the
/// launch.
#[derive(Clone, Copy, Debug)]
pub(super) struct TileWalk {
    /// Which of the block's tiles the body is at (0, 1, …).
    pub round: VarId,
    /// `blockIdx.x` and `gridDim.x`.
    pub grid: PersistentGrid,
    /// The block indices of the block's next tile, bound where the consumers load its inputs
    /// ahead (`prefetch_tile_inputs`); each has the range of the block index it stands for.
    pub next_block_index: [VarId; 3],
    /// The number of that tile, below twice the tile count (first tile and stride are each
    /// below it).
    pub next_tile: VarId,
}

impl TileWalk {
    /// The variables for a grid of `tiles` tiles, when that is known: each is below it (the
    /// stride at most equal), which lets index arithmetic on them stay 32-bit.
    pub(super) fn new(
        exprs: &mut tilec_ir::ExprArena,
        tiles: Option<i64>,
        block_index: [VarId; 3],
    ) -> TileWalk {
        let next_block_index = block_index.map(|var| {
            let info = exprs.var_info(var);
            let (name, extent) = (format!("next_{}", info.name), info.extent);
            exprs.var(&name, extent)
        });
        TileWalk {
            round: exprs.var("tile_round", tiles),
            grid: PersistentGrid {
                block: exprs.var("first_tile", tiles),
                blocks: exprs.var("tile_stride", tiles.map(|t| t + 1)),
            },
            next_block_index,
            next_tile: exprs.var("next_tile", tiles.map(|t| 2 * t)),
        }
    }
}

impl Lowering<'_> {
    /// Starts a pipelined loop of `extent` iterations: in a persistent launch its stages and
    /// barrier parities count on from the iterations of the block's earlier rounds, which needs
    /// the same trip count in every tile.
    pub(super) fn begin_pipeline_count(&mut self, extent: ExprId) -> Result<(), Unlowerable> {
        let Some(walk) = self.tile_walk else {
            return Ok(());
        };
        let scalars: Vec<VarId> = self.program.scalars.iter().map(|s| s.var).collect();
        let exprs = &mut self.program.exprs;
        if exprs.vars_of(extent).iter().any(|v| !scalars.contains(v)) {
            return self
                .refuse_persistence("the pipelined loop's trip count differs between tiles");
        }
        let round = exprs.var_expr(walk.round);
        self.stage_offset = Some(exprs.mul(round, extent));
        Ok(())
    }

    /// The pipeline's iteration count at iteration `ko` of its loop, from which the stage index
    /// and the barrier parity are computed: `ko`, or in a persistent launch `ko + round × extent`.
    pub(super) fn pipeline_count(&mut self, ko: ExprId) -> ExprId {
        match self.stage_offset {
            Some(offset) => self.program.exprs.add(ko, offset),
            None => ko,
        }
    }

    /// `extent - 1`: the loop's last iteration.
    pub(super) fn last_iteration(&mut self, extent: ExprId) -> ExprId {
        let exprs = &mut self.program.exprs;
        let one = exprs.int(1);
        exprs.sub(extent, one)
    }

    /// Gives up a persistent lowering (the caller then lowers the launch as written) for `why`;
    /// nothing in an ordinary lowering.
    pub(super) fn refuse_persistence(&self, why: &str) -> Result<(), Unlowerable> {
        match self.tile_walk {
            Some(_) => Err(Unlowerable::new(format!("not persistent: {why}"))),
            None => Ok(()),
        }
    }

    /// One role's statements run once per tile of the block: a loop over the rounds whose body
    /// binds the tile's block indices, then runs `per_tile_lets` (the rasterization) and `body`.
    pub(super) fn tile_loop(
        &mut self,
        walk: TileWalk,
        per_tile_lets: &[Stmt],
        body: Vec<Stmt>,
    ) -> Stmt {
        // The launcher starts no more blocks than tiles, so every block has at least one round.
        let tiles = self.tile_count();
        let exprs = &mut self.program.exprs;
        let first = exprs.var_expr(walk.grid.block);
        let stride = exprs.var_expr(walk.grid.blocks);
        let round = exprs.var_expr(walk.round);
        let one = exprs.int(1);
        let last = exprs.sub(tiles, one);
        let after_first = exprs.sub(last, first);
        let more = exprs.floordiv(after_first, stride);
        let rounds = exprs.add(more, one);
        let tile = self.tile_of_round(walk, round);
        let [x, y, z] = self.tile_block_indices(tile);
        let [bx, by, bz] = self.program.block_index;
        let mut stmts = vec![
            Stmt::Let { var: bx, value: x },
            Stmt::Let { var: by, value: y },
            Stmt::Let { var: bz, value: z },
        ];
        stmts.extend(per_tile_lets.iter().cloned());
        stmts.extend(body);
        Stmt::Block {
            origin: None,
            label: "persistent: this block's tiles, one per round, one block per multiprocessor"
                .to_owned(),
            body: vec![Stmt::For {
                var: walk.round,
                extent: rounds,
                unroll: false,
                body: stmts,
            }],
        }
    }

    /// How many tiles the grid has.
    fn tile_count(&mut self) -> ExprId {
        let [gx, gy, gz] = self.program.grid;
        let exprs = &mut self.program.exprs;
        let xy = exprs.mul(gx, gy);
        exprs.mul(xy, gz)
    }

    /// The number of the tile the block handles in round `round`: `first + round × stride`.
    fn tile_of_round(&mut self, walk: TileWalk, round: ExprId) -> ExprId {
        let exprs = &mut self.program.exprs;
        let first = exprs.var_expr(walk.grid.block);
        let stride = exprs.var_expr(walk.grid.blocks);
        let step = exprs.mul(round, stride);
        exprs.add(first, step)
    }

    /// The block indices of tile number `tile`, x fastest.
    fn tile_block_indices(&mut self, tile: ExprId) -> [ExprId; 3] {
        let [gx, gy, _] = self.program.grid;
        let exprs = &mut self.program.exprs;
        let xy = exprs.mul(gx, gy);
        let x = exprs.floormod(tile, gx);
        let column = exprs.floordiv(tile, gx);
        let y = exprs.floormod(column, gy);
        let z = exprs.floordiv(tile, xy);
        [x, y, z]
    }

    /// The consumers' statements for one tile, with every copy from a read-only tensor into
    /// registers that comes before the pipeline and depends on nothing but the tile's block
    /// indices, the thread and its own loop (the staged half of a global → shared copy) loaded one
    /// tile ahead: round 0 loads its own tile's data at the start, every round loads the next
    /// tile's into a register array just before waiting for its last gemm, and the next round's
    /// copy starts from that array. Unchanged where no copy qualifies, or where the launch
    /// rasterizes (the next tile's indices would need its `let`s too).
    pub(super) fn prefetch_tile_inputs(
        &mut self,
        walk: TileWalk,
        per_tile_lets: &[Stmt],
        per_tile: Vec<Stmt>,
    ) -> Vec<Stmt> {
        // The pipeline is the first statement that waits on an mbarrier.
        let pipeline = per_tile.iter().position(|stmt| {
            any_stmt(std::slice::from_ref(stmt), |s| {
                matches!(s, Stmt::MbarrierWait { .. })
            })
        });
        let Some(pipeline) = pipeline.filter(|_| per_tile_lets.is_empty()) else {
            return per_tile;
        };
        let mut out = Vec::with_capacity(per_tile.len() + 1);
        let mut next_tile_loads = Vec::new();
        for stmt in &per_tile[..pipeline] {
            match self.staged_global_load(stmt) {
                Some(load) => {
                    let (at_start, ahead) = self.load_ahead(walk, stmt, load);
                    out.extend(at_start);
                    next_tile_loads.push(ahead);
                }
                None => out.push(stmt.clone()),
            }
        }
        if next_tile_loads.is_empty() {
            return per_tile;
        }
        let mut rest = per_tile[pipeline..].to_vec();
        let ahead = self.next_tile_block(walk, next_tile_loads);
        // The pipeline's block ends with the wait for the tile's last gemm: the loads go just
        // before it, so that they overlap the gemm. A pipeline of another form gets them after it.
        if let Stmt::Block { body, .. } = &mut rest[0] {
            let at = body
                .iter()
                .rposition(|s| matches!(s, Stmt::WgmmaWait { pending: 0 }))
                .unwrap_or(body.len());
            body.insert(at, ahead);
        } else {
            rest.insert(1, ahead);
        }
        out.extend(rest);
        out
    }

    /// The first statement of a copy block when it is an unguarded, unrolled loop over chunks
    /// whose first statement loads a vector of a read-only tensor into a register array, at an
    /// index of nothing but the block indices, the thread and the chunk (and scalar parameters).
    fn staged_global_load(&self, stmt: &Stmt) -> Option<StagedLoad> {
        let Stmt::Block { body, .. } = stmt else {
            return None;
        };
        let [
            Stmt::For {
                var,
                extent,
                unroll: true,
                body: chunk_body,
            },
        ] = &body[..]
        else {
            return None;
        };
        let Some(&Stmt::VectorCopy { dst, src, lanes }) = chunk_body.first() else {
            return None;
        };
        let program = &self.program;
        let read_only = program.param_access(src.buffer) == Some(ParamAccess::Read);
        let local = program.buffer(dst.buffer).memory == Memory::Local;
        let chunks = program.exprs.as_int(*extent)?;
        let allowed = |v: VarId| {
            v == *var
                || v == program.thread
                || program.block_index.contains(&v)
                || program.scalars.iter().any(|s| s.var == v)
        };
        let pure = program.exprs.vars_of(src.index).into_iter().all(allowed);
        let first_vector = program.exprs.as_int(dst.index) == Some(0);
        (read_only && local && pure && first_vector).then_some(StagedLoad {
            chunk: *var,
            chunks,
            src: src.buffer,
            src_index: src.index,
            staging: dst.buffer,
            lanes,
        })
    }

    /// The statements that replace `copy` at the tile's start (round 0's own load into the
    /// prefetch registers, then the copy reading them), and the load of the next tile's data.
    fn load_ahead(&mut self, walk: TileWalk, copy: &Stmt, load: StagedLoad) -> (Vec<Stmt>, Stmt) {
        let ahead = self.prefetch_registers(load);
        let own = self.fill_ahead(load, ahead, load.src_index);
        let exprs = &mut self.program.exprs;
        let round = exprs.var_expr(walk.round);
        let zero = exprs.int(0);
        let first_round = self.compare_indices(CompareOp::Eq, round, zero);
        let at_start = vec![
            Stmt::If {
                cond: first_round,
                then: vec![own],
                otherwise: Vec::new(),
            },
            self.copy_from_registers(copy, load, ahead),
        ];
        let next_index = self.at_next_tile(walk, load.src_index);
        (at_start, self.fill_ahead(load, ahead, next_index))
    }

    /// The register array that holds one tile of `load`'s vectors between two rounds.
    fn prefetch_registers(&mut self, load: StagedLoad) -> BufferId {
        let source = self.program.buffer(load.src);
        let (name, dtype) = (format!("{}_next", source.name), source.dtype);
        let name = self.program.unique_buffer_name(&name);
        let elements = self.program.exprs.int(load.chunks * i64::from(load.lanes));
        self.program.add_buffer(BufferDecl {
            name,
            dtype,
            memory: Memory::Local,
            shape: vec![elements],
            elements,
            strides: None,
        })
    }

    /// `copy` with its global load (the first statement of its chunk loop, as
    /// [`Lowering::staged_global_load`] found it) reading the prefetch registers instead.
    fn copy_from_registers(&mut self, copy: &Stmt, load: StagedLoad, ahead: BufferId) -> Stmt {
        let mut from_registers = copy.clone();
        if let Stmt::Block { body, .. } = &mut from_registers
            && let [
                Stmt::For {
                    body: chunk_body, ..
                },
            ] = &mut body[..]
        {
            let exprs = &mut self.program.exprs;
            let chunk = exprs.var_expr(load.chunk);
            let width = exprs.int(i64::from(load.lanes));
            chunk_body[0] = Stmt::VectorCopy {
                dst: Place {
                    buffer: load.staging,
                    index: exprs.int(0),
                },
                src: Place {
                    buffer: ahead,
                    index: exprs.mul(chunk, width),
                },
                lanes: load.lanes,
            };
        }
        from_registers
    }

    /// `index` with the block indices replaced by the next tile's.
    fn at_next_tile(&mut self, walk: TileWalk, index: ExprId) -> ExprId {
        let current = self.program.block_index;
        let exprs = &mut self.program.exprs;
        let next = walk.next_block_index.map(|v| exprs.var_expr(v));
        let map = move |v: VarId| current.iter().position(|&b| b == v).map(|axis| next[axis]);
        exprs.substitute(index, &map)
    }

    /// The unrolled loop that loads a tile's vectors of `load`'s tensor, from `src_index` on, into
    /// the prefetch registers `ahead`.
    fn fill_ahead(&mut self, load: StagedLoad, ahead: BufferId, src_index: ExprId) -> Stmt {
        let exprs = &mut self.program.exprs;
        let chunk = exprs.var_expr(load.chunk);
        let width = exprs.int(i64::from(load.lanes));
        Stmt::For {
            var: load.chunk,
            extent: exprs.int(load.chunks),
            unroll: true,
            body: vec![Stmt::VectorCopy {
                dst: Place {
                    buffer: ahead,
                    index: exprs.mul(chunk, width),
                },
                src: Place {
                    buffer: load.src,
                    index: src_index,
                },
                lanes: load.lanes,
            }],
        }
    }

    /// `loads`, run for the block's next tile when it has one: the next tile's number and block
    /// indices (the variables the loads were written over) bound first.
    fn next_tile_block(&mut self, walk: TileWalk, loads: Vec<Stmt>) -> Stmt {
        let tiles = self.tile_count();
        let exprs = &mut self.program.exprs;
        let round = exprs.var_expr(walk.round);
        let one = exprs.int(1);
        let next_round = exprs.add(round, one);
        let tile = self.tile_of_round(walk, next_round);
        let next_tile = walk.next_tile;
        let next_tile_expr = self.program.exprs.var_expr(next_tile);
        let has_next = self.compare_indices(CompareOp::Lt, next_tile_expr, tiles);
        let indices = self.tile_block_indices(next_tile_expr);
        let mut then: Vec<Stmt> = walk
            .next_block_index
            .iter()
            .zip(indices)
            .map(|(&var, value)| Stmt::Let { var, value })
            .collect();
        then.extend(loads);
        Stmt::Block {
            origin: None,
            label: "persistent: the next tile's inputs into registers while this tile's last \
                    gemm runs"
                .to_owned(),
            body: vec![
                Stmt::Let {
                    var: next_tile,
                    value: tile,
                },
                Stmt::If {
                    cond: has_next,
                    then,
                    otherwise: Vec::new(),
                },
            ],
        }
    }
}

/// The register-staged load at the head of a global → shared copy (see
/// [`Lowering::staged_global_load`]).
#[derive(Clone, Copy, Debug)]
struct StagedLoad {
    chunk: VarId,
    chunks: i64,
    src: BufferId,
    src_index: ExprId,
    staging: BufferId,
    lanes: u32,
}
