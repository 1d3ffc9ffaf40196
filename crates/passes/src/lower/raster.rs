//! Block rasterization (`T.use_swizzle`): the kernel's block indices become a permutation of the
//! hardware's, so that blocks running at the same time share panels of their operands in L2.
//!
//! The permutation is TileLang's `rasterization2DRow` / `rasterization2DColumn`: the grid is cut
//! into panels of `panel` rows (or columns), each panel is walked column by column (row by row),
//! and every other panel is walked backwards. The last panel may be narrower; its width is the
//! `min` below, since every earlier panel has at least `panel` rows left.

use tilec_ir::thread::Stmt;
use tilec_ir::{EntityId, ExprArena, ExprId, TileOp, VarId};

use super::Lowering;

impl Lowering<'_> {
    /// The block-index bindings of the launch's first enabled `T.use_swizzle` among `body` (its
    /// top-level statements, where TileLang allows it); none without one.
    pub(super) fn rasterization(&mut self, body: &[EntityId]) -> Vec<Stmt> {
        let swizzle = body
            .iter()
            .find_map(|&entity| match self.world.ops.get(entity) {
                Some(TileOp::UseSwizzle {
                    panel_size,
                    column_major,
                    enable: true,
                }) => Some((*panel_size, *column_major)),
                _ => None,
            });
        match swizzle {
            Some((panel, column_major)) => self.rasterize(panel, column_major),
            None => Vec::new(),
        }
    }

    /// Rebinds the kernel's first two block indices to the rasterized order: the program reads
    /// fresh hardware indices and the returned `let`s bind the kernel's own variables, so every
    /// statement lowered afterwards sees the permuted blocks.
    pub(super) fn rasterize(&mut self, panel: i64, column_major: bool) -> Vec<Stmt> {
        let [bx, by, _] = self.program.block_index;
        if bx == by || panel < 1 {
            return Vec::new();
        }
        let arena = &mut self.program.exprs;
        let hardware = [
            fresh_like(arena, bx, "block_x"),
            fresh_like(arena, by, "block_y"),
        ];
        let grid = [self.program.grid[0], self.program.grid[1]];
        // The grid dimension a panel is walked along.
        let walked = usize::from(column_major);
        let [hx, hy] = hardware.map(|v| arena.var_expr(v));
        let width = arena.mul(hy, grid[0]);
        let block = arena.add(hx, width);
        let cells = arena.mul(grid[0], grid[1]);
        let panel_width = arena.int(panel);
        let panel_cells = arena.mul(panel_width, grid[walked]);
        let offset = arena.floormod(block, panel_cells);
        let index = arena.floordiv(block, panel_cells);
        // The rows the current panel really has: `panel`, or what is left in the last one.
        let before = arena.mul(index, panel_cells);
        let left = arena.sub(cells, before);
        let left_rows = arena.floordiv(left, grid[walked]);
        let rows = arena.min(panel_width, left_rows);
        let along = arena.floordiv(offset, rows);
        // Odd panels walk backwards: `along + parity * (extent - 1 - 2 * along)`.
        let two = arena.int(2);
        let parity = arena.floormod(index, two);
        let one = arena.int(1);
        let last = arena.sub(grid[walked], one);
        let twice = arena.mul(along, two);
        let reflected = arena.sub(last, twice);
        let turn = arena.mul(parity, reflected);
        let walked_index = arena.add(along, turn);
        let within = arena.floormod(offset, rows);
        let first_row = arena.mul(index, panel_width);
        let stacked_index = arena.add(within, first_row);
        let values: [ExprId; 2] = if column_major {
            [stacked_index, walked_index]
        } else {
            [walked_index, stacked_index]
        };
        self.program.block_index[0] = hardware[0];
        self.program.block_index[1] = hardware[1];
        vec![
            Stmt::Let {
                var: bx,
                value: values[0],
            },
            Stmt::Let {
                var: by,
                value: values[1],
            },
        ]
    }
}

/// A new variable with `like`'s extent, for the hardware index `like` is rebound from.
fn fresh_like(arena: &mut ExprArena, like: VarId, name: &str) -> VarId {
    let extent = arena.var_info(like).extent;
    arena.var(name, extent)
}
