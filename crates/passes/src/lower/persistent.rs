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
//! Only a launch whose single pipelined loop gets a producer warpgroup and the plain consumer loop,
//! with the same trip count in every tile, is made persistent: a loop without a producer warpgroup
//! has no one to run ahead. FlashAttention-3's schedule (`overlap.rs`) would allow it (it releases
//! every stage it waits for, and the emulator runs it correctly), but the persistent attention
//! kernel measured slower than one block per tile (H200: 2.01 against 1.98 ms; H100: 2.06 against
//! 1.98 ms), so it stays per block. By hand, it became the faster form once the next tile's Q was
//! loaded into registers during the last PV and the epilogue's divisions took the reciprocal form
//! (1.92 ms, BENCHMARKS.md, 2026-11-25): what this rewrite would have to do first.

use tilec_ir::thread::{PersistentGrid, Stmt};
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
}

impl TileWalk {
    /// The variables for a grid of `tiles` tiles, when that is known: each is below it (the
    /// stride at most equal), which lets index arithmetic on them stay 32-bit.
    pub(super) fn new(exprs: &mut tilec_ir::ExprArena, tiles: Option<i64>) -> TileWalk {
        TileWalk {
            round: exprs.var("tile_round", tiles),
            grid: PersistentGrid {
                block: exprs.var("first_tile", tiles),
                blocks: exprs.var("tile_stride", tiles.map(|t| t + 1)),
            },
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
        let exprs = &mut self.program.exprs;
        let [gx, gy, gz] = self.program.grid;
        let first = exprs.var_expr(walk.grid.block);
        let stride = exprs.var_expr(walk.grid.blocks);
        let round = exprs.var_expr(walk.round);
        // The launcher starts no more blocks than tiles, so every block has at least one round.
        let xy = exprs.mul(gx, gy);
        let tiles = exprs.mul(xy, gz);
        let one = exprs.int(1);
        let last = exprs.sub(tiles, one);
        let after_first = exprs.sub(last, first);
        let more = exprs.floordiv(after_first, stride);
        let rounds = exprs.add(more, one);
        let step = exprs.mul(round, stride);
        let tile = exprs.add(first, step);
        let x = exprs.floormod(tile, gx);
        let column = exprs.floordiv(tile, gx);
        let y = exprs.floormod(column, gy);
        let z = exprs.floordiv(tile, xy);
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
}
