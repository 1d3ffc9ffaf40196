//! Tensor-core fragment layouts for `T.gemm` on the `mma.sync` path (Ampere, m16n8k16).
//!
//! A gemm fixes the layout of its accumulator, and of A or B operands that live in registers, to
//! the register layout of the `mma.sync` instruction tiled over the block's warps. TileLang's
//! layout inference starts from these layouts and propagates them to every other fragment, so
//! matching them exactly (as functions from element to thread and register) is what lets the rest
//! of the inference agree with TileLang's.
//!
//! The warps are arranged in a grid of `warps_m × warps_n` chosen as TileLang's
//! `ComputeDefaultWarpPartition` chooses it; each warp owns a `tile_m × tile_n` block of the
//! output, and inside it every 16×16 micro tile (16×8 when the warp's columns are not a multiple
//! of 16) is spread over the 32 lanes as the instruction's C fragment prescribes.
//!
//! On Hopper a gemm that fits runs on `wgmma` instead ([`select_gemm_instruction`]), as TileLang
//! chooses it: its accumulator stacks the four warps of a warpgroup along M, 16 rows each, and a
//! warp's rows repeat every `16 × warps_m` rows ([`wgmma_partition`] chooses `warps_m`, a multiple
//! of four). Per warp and 16-row slab the registers are mma.sync's C fragment, so the same
//! formulas serve both with the rows interleaved.

use tilec_ir::{DType, ExprArena, ExprId, VarId, WarpPolicy};

use crate::options::CodegenOptions;

use super::fragment::{FragmentLayout, fresh_vars};

/// Threads per warp on every CUDA target.
const WARP_SIZE: i64 = 32;
/// Rows of one `mma.sync` tile: each warp must own a multiple of this many rows.
const MMA_M: i64 = 16;
/// Columns of the narrowest `mma.sync` tile (n8) on Ampere and later: each warp must own a
/// multiple of this many columns.
const MMA_N: i64 = 8;
/// Reduction depth of one m16n8k16 instruction on 16-bit operands.
const MMA_K: i64 = 16;
/// No GPU block holds more than 32 warps; a far larger count can only be a mistake, and refusing
/// it keeps the partition search (linear in the warp count) cheap on any input.
const MAX_WARPS: i64 = 1024;

/// Warps in one warpgroup, the unit that issues a `wgmma`.
const WARPGROUP: i64 = 4;

/// The tensor-core instruction a `T.gemm` runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GemmInstruction {
    /// `mma.sync.m16n8k16` fed by `ldmatrix` (sm_80 and the fallback on sm_90).
    MmaSync,
    /// `wgmma.mma_async.m64nNk16` with shared-memory descriptors (sm_90).
    Wgmma,
}

/// What instruction selection needs to know about one `T.gemm`.
#[derive(Clone, Copy, Debug)]
pub struct GemmShape {
    pub m: i64,
    pub n: i64,
    pub k: i64,
    pub threads: i64,
    pub policy: WarpPolicy,
    /// The element types of A, B and C.
    pub dtypes: [DType; 3],
    /// Whether B is a fragment (wgmma reads B from shared memory only).
    pub b_in_registers: bool,
    /// `transpose_A` and `transpose_B`.
    pub transposed: [bool; 2],
}

/// The rows and columns of a gemm operand: its buffer's shape when it is a whole 2-D buffer, the
/// two ranged dimensions of a window otherwise (`A_s[stage, :, :]`, `Q_s[:, 0:32]`; ranges of one
/// element in front of two others count as points).
pub fn operand_shape(world: &tilec_ir::World, region: &tilec_ir::Region) -> Option<[i64; 2]> {
    let shape = world.const_shape(region.buffer)?;
    let mut ranges = Vec::new();
    for (dim, &extent) in region.dims.iter().zip(&shape) {
        match dim.extent {
            Some(e) => ranges.push(world.exprs.as_int(e)?),
            // As the gemm lowering reads a 2-D region: a dimension from 0 without an extent is
            // the whole dimension.
            None if region.dims.len() == 2 && world.exprs.as_int(dim.start) == Some(0) => {
                ranges.push(extent)
            }
            None => {}
        }
    }
    while ranges.len() > 2 && ranges[0] == 1 {
        ranges.remove(0);
    }
    match ranges[..] {
        [rows, cols] => Some([rows, cols]),
        _ => None,
    }
}

/// TileLang's `AllowWgmma`: Hopper with wgmma enabled, at least 64 rows, whole warpgroups,
/// 16-bit A and B with an fp32 accumulator, K in steps of 16, B in shared memory, and a warpgroup
/// partition of the tile. Everything else runs on mma.sync.
pub fn select_gemm_instruction(options: CodegenOptions, shape: &GemmShape) -> GemmInstruction {
    let warps = shape.threads / WARP_SIZE;
    let fits = options.wgmma
        && shape.m >= 64
        && warps > 0
        && warps % WARPGROUP == 0
        && !shape.b_in_registers
        && wgmma_takes_operands(shape)
        && wgmma_partition(shape.m, shape.n, warps, shape.policy).is_ok();
    if fits {
        GemmInstruction::Wgmma
    } else {
        GemmInstruction::MmaSync
    }
}

/// Whether wgmma multiplies these operand and accumulator types at this depth, as TileLang
/// decides it (so that the accumulator layouts agree even where tilec cannot lower the gemm
/// yet): 16-bit floats at any depth of 16, and tf32, fp8 or 8-bit integers only with A
/// row-major and B transposed, which is how those instructions read shared memory.
fn wgmma_takes_operands(shape: &GemmShape) -> bool {
    let [a, b, c] = shape.dtypes;
    let k_major = !shape.transposed[0] && shape.transposed[1];
    let is_fp8 = |d: DType| matches!(d, DType::Float8E4M3 | DType::Float8E5M2);
    let is_byte_int = |d: DType| matches!(d, DType::Int8 | DType::UInt8);
    match c {
        DType::Float16 => {
            (a == DType::Float16 && b == DType::Float16 && shape.k % 16 == 0)
                || (is_fp8(a) && is_fp8(b) && k_major && shape.k % 32 == 0)
        }
        DType::Float32 => match (a, b) {
            (DType::Float16, DType::Float16) | (DType::BFloat16, DType::BFloat16) => {
                shape.k % 16 == 0
            }
            (DType::TFloat32, DType::TFloat32) => k_major && shape.k % 8 == 0,
            _ => is_fp8(a) && is_fp8(b) && k_major && shape.k % 32 == 0,
        },
        DType::Int32 => is_byte_int(a) && is_byte_int(b) && k_major && shape.k % 32 == 0,
        _ => false,
    }
}

/// Warps along M and N for `wgmma`, as TileLang's ComputeDefaultWarpPartition chooses them for
/// it: `warps_m` is a multiple of four (whole warpgroups stacked along M). `Square` starts from
/// one warpgroup along M and picks the multiple of four whose per-warp tile best matches the
/// block's shape; `FullRow` takes the most warps along M that divide it; `FullCol` keeps one
/// warpgroup along M unless N does not divide over the rest.
pub fn wgmma_partition(
    m: i64,
    n: i64,
    warps: i64,
    policy: WarpPolicy,
) -> Result<(i64, i64), String> {
    check_partition_inputs(m, n, warps, policy)?;
    if warps % WARPGROUP != 0 {
        return Err(format!(
            "wgmma needs whole warpgroups (a multiple of {} threads), not {} threads",
            WARPGROUP * WARP_SIZE,
            warps * WARP_SIZE
        ));
    }
    let mut groups = (1..=warps / WARPGROUP).map(|g| g * WARPGROUP);
    let valid = |warps_m: i64| {
        let warps_n = warps / warps_m;
        warps % warps_m == 0 && m % (warps_m * MMA_M) == 0 && n % (warps_n * MMA_N) == 0
    };
    let found = match policy {
        WarpPolicy::FullRow => groups.rev().find(|&wm| valid(wm)),
        WarpPolicy::FullCol => groups.find(|&wm| valid(wm)),
        WarpPolicy::Square => {
            let ideal = m as f32 / n as f32;
            let mut best: Option<(i64, f32)> = None;
            for warps_m in groups.filter(|&wm| valid(wm)) {
                let rows = m as f32 / (warps_m * MMA_M) as f32;
                let cols = n as f32 / ((warps / warps_m) * MMA_N) as f32;
                let score = (rows / cols - ideal).abs();
                if best.is_none_or(|(_, s)| score < s) {
                    best = Some((warps_m, score));
                }
            }
            best.map(|(warps_m, _)| warps_m)
        }
    };
    found
        .map(|warps_m| (warps_m, warps / warps_m))
        .ok_or_else(|| {
            no_partition_message(
                m,
                n,
                warps,
                policy,
                " in whole warpgroups stacked along M (as wgmma needs)",
            )
        })
}

/// The accumulator layout of `instruction` for an m×n tile over `threads` threads.
pub fn gemm_accumulator_layout(
    arena: &mut ExprArena,
    instruction: GemmInstruction,
    m: i64,
    n: i64,
    threads: i64,
    policy: WarpPolicy,
) -> Result<FragmentLayout, String> {
    match instruction {
        GemmInstruction::MmaSync => accumulator_layout(arena, m, n, threads, policy),
        GemmInstruction::Wgmma => {
            let grid = WarpGrid::for_wgmma(m, n, threads, policy)?;
            grid.accumulator(arena, m, n)
        }
    }
}

/// Warps along M and N for a block tile, as TileLang's ComputeDefaultWarpPartition chooses them.
///
/// A partition is valid when the warps multiply to `warps` and every warp owns a multiple of 16
/// rows and 8 columns. `FullRow` takes the valid partition with the most warps along M, `FullCol`
/// the one with the most along N, and `Square` the one whose per-warp tile is closest in shape to
/// the block tile (ties go to fewer warps along M). The `Square` score is computed in `f32`, as
/// TileLang does, so that near-ties resolve the same way.
pub fn warp_partition(
    m: i64,
    n: i64,
    warps: i64,
    policy: WarpPolicy,
) -> Result<(i64, i64), String> {
    check_partition_inputs(m, n, warps, policy)?;
    let found = match policy {
        WarpPolicy::FullRow => (1..=warps)
            .rev()
            .find(|&wm| warps % wm == 0 && is_valid_split(m, n, wm, warps / wm))
            .map(|wm| (wm, warps / wm)),
        WarpPolicy::FullCol => (1..=warps)
            .rev()
            .find(|&wn| warps % wn == 0 && is_valid_split(m, n, warps / wn, wn))
            .map(|wn| (warps / wn, wn)),
        WarpPolicy::Square => most_square_split(m, n, warps),
    };
    found.ok_or_else(|| no_partition_message(m, n, warps, policy, ""))
}

/// The mma.sync m16n8k16 accumulator (C) layout of an m×n block tile over `threads` threads.
///
/// Element `(i, j)` lives in warp `(i // tile_m, j // tile_n)`, whose threads start at
/// `(j // tile_n) * warps_m * 32 + (i // tile_m) * 32` (warps are numbered M-fastest), on lane
/// `i % 8 * 4 + j % 8 // 2`. Its register is
/// `i % tile_m // 16 * (tile_n / 2) + j % tile_n // 8 * 4 + i % 16 // 8 * 2 + j % 2`: the warp's
/// 16-row micro tiles in order, within one the n8 atoms in order, and within an atom the four
/// registers `c0..c3` of the instruction. Nothing is replicated.
pub fn accumulator_layout(
    arena: &mut ExprArena,
    m: i64,
    n: i64,
    threads: i64,
    policy: WarpPolicy,
) -> Result<FragmentLayout, String> {
    let grid = WarpGrid::new(m, n, threads, policy)?;
    grid.accumulator(arena, m, n)
}

/// The A-operand register layout (m×k, for `T.gemm` with A in a fragment), replicated over the N
/// warps.
///
/// `n` is the gemm's N extent: the warp partition depends on it, so the A layout does too. The
/// layout is that of 16-bit operands (m16n8k16). With `transposed` the buffer is k×m (A is read
/// as its transpose) and element `(k, m)` sits where `(m, k)` sits in the plain layout.
///
/// Element `(i, j)` of the m×k operand lives on lane `i % 8 * 4 + j % 8 // 2` of warp row
/// `i // tile_m`; every warp of that row holds a copy, so replica `rep` (of `warps_n`) adds
/// `rep * warps_m * 32` to the thread. Its register is
/// `i % tile_m // 16 * 8 + j // 16 * (8 * tile_m / 16) + j % 16 // 8 * 4 + i % 16 // 8 * 2 + j % 2`:
/// the eight registers `a0..a7` of one 16×16 micro tile, micro tiles M-fastest, then along K.
pub fn operand_a_layout(
    arena: &mut ExprArena,
    m: i64,
    n: i64,
    k: i64,
    threads: i64,
    policy: WarpPolicy,
    transposed: bool,
) -> Result<FragmentLayout, String> {
    let grid = WarpGrid::new(m, n, threads, policy)?;
    grid.operand_a(arena, [m, k], OperandAtom::SIXTEEN_BIT, transposed)
}

/// The A-operand register layout `instruction` reads a fragment A operand in: [`operand_a_layout`]
/// over mma.sync's warp partition, or over wgmma's, whose warps take interleaved 16-row slabs
/// (as the accumulator's do). wgmma reads no transposed A from registers: an error says so.
pub fn gemm_operand_a_layout(
    arena: &mut ExprArena,
    instruction: GemmInstruction,
    [m, n, k]: [i64; 3],
    (threads, element_bits): (i64, u64),
    policy: WarpPolicy,
    transposed: bool,
) -> Result<FragmentLayout, String> {
    let atom = OperandAtom::for_bits(element_bits)?;
    let grid = match instruction {
        GemmInstruction::MmaSync => WarpGrid::new(m, n, threads, policy)?,
        GemmInstruction::Wgmma if transposed => {
            return Err("wgmma reads no transposed A operand from registers".to_owned());
        }
        GemmInstruction::Wgmma => WarpGrid::for_wgmma(m, n, threads, policy)?,
    };
    grid.operand_a(arena, [m, k], atom, transposed)
}

/// The 8-row atom of an A operand held in registers, by element width: lane `4 * row + col /
/// per_lane` holds `per_lane` consecutive elements of the row (two 16-bit values or four 8-bit
/// values fill one 32-bit register). A micro tile is 16 rows by two atoms' width, as TileLang
/// repeats its 8×4, 8×8 and 8×16 atoms two by two.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct OperandAtom {
    per_lane: i64,
}

impl OperandAtom {
    const SIXTEEN_BIT: OperandAtom = OperandAtom { per_lane: 2 };

    fn for_bits(bits: u64) -> Result<OperandAtom, String> {
        match bits {
            // The arm's widths are small, so the cast is exact.
            #[allow(clippy::cast_possible_wrap)]
            8 | 16 | 32 => Ok(OperandAtom {
                per_lane: 32 / bits as i64,
            }),
            _ => Err(format!(
                "a tensor-core A operand of {bits}-bit elements has no register layout"
            )),
        }
    }

    /// Columns of one atom: four lanes per row.
    fn width(self) -> i64 {
        4 * self.per_lane
    }

    /// The reduction depth of one micro tile (and one instruction): 8, 16 or 32.
    fn depth(self) -> i64 {
        2 * self.width()
    }

    /// Elements of one micro tile each lane holds.
    fn per_micro_tile(self) -> i64 {
        4 * self.per_lane
    }
}

/// The B-operand register layout (k×n, for `T.gemm` with B in a fragment), replicated over the M
/// warps.
///
/// `m` is the gemm's M extent, which the warp partition depends on. The layout is that of 16-bit
/// operands (m16n8k16). With `transposed` (`transpose_B=True`) the buffer is n×k and element
/// `(n, k)` sits where `(k, n)` sits in the plain layout; TileLang builds the two from the same
/// base fragment, so one is exactly the transpose of the other.
///
/// Element `(k, n)` lives on lane `n % 8 * 4 + k % 8 // 2` (the instruction's B fragment: lane
/// `4g + t` holds column `g`, rows `2t, 2t + 1, 2t + 8, 2t + 9` in `b0..b3`) of warp column
/// `n // tile_n`; every warp of that column holds a copy, so replica `rep` (of `warps_m`) adds
/// `rep * 32`, and the warp column adds `warps_m * 32` per step (warps are numbered M-fastest).
/// Its register is `n % tile_n // 8 * 4 + k // 16 * (tile_n / 2) + k % 16 // 8 * 2 + k % 2`: the
/// four registers `b0..b3` of each n8 atom, atoms along N, then k16 steps.
pub fn operand_b_layout(
    arena: &mut ExprArena,
    m: i64,
    n: i64,
    k: i64,
    threads: i64,
    policy: WarpPolicy,
    transposed: bool,
) -> Result<FragmentLayout, String> {
    let grid = WarpGrid::new(m, n, threads, policy)?;
    check_reduction_depth(k, MMA_K, "B")?;
    // Built over (depth, column); the replicas are the warps along M that share a column.
    operand_layout(
        arena,
        [k, n],
        transposed,
        grid.warps_m,
        |arena, depth, col, rep| {
            let thread = grid.operand_b_thread(arena, depth, col, rep);
            (thread, grid.operand_b_register(arena, depth, col))
        },
    )
}

/// The frame both operand layouts share: a tile of shape `plain` (or its transpose, whose element
/// `(b, a)` sits where `(a, b)` does), `replicate` replicas, and thread and register formulas that
/// `formulas` builds over the plain coordinates and the replica variable.
fn operand_layout(
    arena: &mut ExprArena,
    plain: [i64; 2],
    transposed: bool,
    replicate: i64,
    formulas: impl FnOnce(&mut ExprArena, ExprId, ExprId, VarId) -> (ExprId, ExprId),
) -> Result<FragmentLayout, String> {
    let shape = if transposed {
        vec![plain[1], plain[0]]
    } else {
        plain.to_vec()
    };
    let vars = fresh_vars(arena, &shape);
    let (first, second) = two_vars(&vars)?;
    let (outer, inner) = if transposed {
        (second, first)
    } else {
        (first, second)
    };
    let (a, b) = (arena.var_expr(outer), arena.var_expr(inner));
    let rep = arena.var("rep", Some(replicate));
    let (thread, index) = formulas(arena, a, b, rep);
    Ok(FragmentLayout {
        shape,
        vars,
        rep,
        replicate,
        thread,
        index: vec![index],
    })
}

/// Rejects a reduction extent that whole tensor-core instructions (`depth` deep: 16 for 16-bit
/// operands) do not cover.
fn check_reduction_depth(k: i64, depth: i64, operand: &str) -> Result<(), String> {
    if k <= 0 || k % depth != 0 {
        return Err(format!(
            "the gemm's reduction extent {k} is not a positive multiple of {depth}, the depth of \
             one tensor-core instruction, so its {operand} operand cannot be held in registers"
        ));
    }
    Ok(())
}

/// The two variables of a two-dimensional layout.
fn two_vars(vars: &[VarId]) -> Result<(VarId, VarId), String> {
    match *vars {
        [first, second] => Ok((first, second)),
        _ => Err("internal error: a gemm layout needs exactly two index variables".to_owned()),
    }
}

/// Rejects shapes and warp counts no partition search should see, with the reason.
fn check_partition_inputs(m: i64, n: i64, warps: i64, policy: WarpPolicy) -> Result<(), String> {
    if m <= 0 || n <= 0 {
        return Err(format!(
            "a {m}×{n} gemm tile is empty: a tensor-core gemm needs at least {MMA_M} rows and \
             {MMA_N} columns"
        ));
    }
    if warps <= 0 {
        return Err(format!(
            "a tensor-core gemm needs at least one warp ({WARP_SIZE} threads), but the block has \
             {} threads",
            warps.saturating_mul(WARP_SIZE)
        ));
    }
    if warps > MAX_WARPS {
        return Err(format!(
            "a block of {warps} warps is far more than a GPU block can hold (at most 32 warps, \
             1024 threads)"
        ));
    }
    if m % MMA_M != 0 {
        let why = format!(", and {m} rows is not a multiple of {MMA_M}");
        return Err(no_partition_message(m, n, warps, policy, &why));
    }
    if n % MMA_N != 0 {
        let why = format!(", and {n} columns is not a multiple of {MMA_N}");
        return Err(no_partition_message(m, n, warps, policy, &why));
    }
    Ok(())
}

/// The error for a tile that no arrangement of the warps covers; `why` adds a specific reason.
fn no_partition_message(m: i64, n: i64, warps: i64, policy: WarpPolicy, why: &str) -> String {
    let policy = match policy {
        WarpPolicy::Square => "Square",
        WarpPolicy::FullRow => "FullRow",
        WarpPolicy::FullCol => "FullCol",
    };
    let plural = if warps == 1 { "warp" } else { "warps" };
    format!(
        "a {m}×{n} tile cannot be split over {warps} {plural} with the {policy} policy: each warp \
         needs a multiple of {MMA_M} rows and {MMA_N} columns{why}; change the number of threads \
         or the block tile"
    )
}

/// True when `warps_m × warps_n` warps tile an m×n block with whole mma tiles per warp.
fn is_valid_split(m: i64, n: i64, warps_m: i64, warps_n: i64) -> bool {
    m % (warps_m * MMA_M) == 0 && n % (warps_n * MMA_N) == 0
}

/// The `Square` choice: the valid split whose ratio of per-warp mma tiles best matches m/n.
///
/// The arithmetic is single precision on purpose: TileLang scores candidates in `float` and keeps
/// the first strictly better one, and only the same rounding guarantees the same winner.
fn most_square_split(m: i64, n: i64, warps: i64) -> Option<(i64, i64)> {
    let ideal = m as f32 / n as f32;
    let mut best: Option<((i64, i64), f32)> = None;
    for warps_m in (1..=warps).filter(|w| warps % w == 0) {
        let warps_n = warps / warps_m;
        if !is_valid_split(m, n, warps_m, warps_n) {
            continue;
        }
        let rows = m as f32 / (warps_m * MMA_M) as f32;
        let cols = n as f32 / (warps_n * MMA_N) as f32;
        let balance = (rows / cols - ideal).abs();
        if best.is_none_or(|(_, score)| balance < score) {
            best = Some(((warps_m, warps_n), balance));
        }
    }
    best.map(|(split, _)| split)
}

/// The block's warps arranged over the output tile, and the tile each warp owns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct WarpGrid {
    warps_m: i64,
    warps_n: i64,
    tile_m: i64,
    tile_n: i64,
    /// wgmma's arrangement: warp row `w` owns the 16-row slabs `w, w + warps_m, ..` instead of
    /// `tile_m` consecutive rows.
    interleaved: bool,
}

impl WarpGrid {
    /// The wgmma partition of an m×n tile over `threads` threads.
    fn for_wgmma(m: i64, n: i64, threads: i64, policy: WarpPolicy) -> Result<WarpGrid, String> {
        let (warps_m, warps_n) = wgmma_partition(m, n, threads / WARP_SIZE, policy)?;
        Ok(WarpGrid {
            warps_m,
            warps_n,
            tile_m: m / warps_m,
            tile_n: n / warps_n,
            interleaved: true,
        })
    }

    /// The accumulator layout over this grid: nothing replicated.
    fn accumulator(&self, arena: &mut ExprArena, m: i64, n: i64) -> Result<FragmentLayout, String> {
        let vars = fresh_vars(arena, &[m, n]);
        let (row, col) = two_vars(&vars)?;
        let (i, j) = (arena.var_expr(row), arena.var_expr(col));
        let thread = self.accumulator_thread(arena, i, j);
        let index = self.accumulator_register(arena, i, j);
        let rep = arena.var("rep", Some(1));
        Ok(FragmentLayout {
            shape: vec![m, n],
            vars,
            rep,
            replicate: 1,
            thread,
            index: vec![index],
        })
    }

    /// The warp-row term of a thread (`warp row × 32`).
    fn warp_row_term(&self, arena: &mut ExprArena, i: ExprId) -> ExprId {
        if self.interleaved {
            digit(arena, i, Some(self.warps_m * MMA_M), MMA_M, WARP_SIZE)
        } else {
            digit(arena, i, None, self.tile_m, WARP_SIZE)
        }
    }

    /// The register term of a row's 16-row micro tile, `per_micro_tile` registers each.
    fn micro_row_term(&self, arena: &mut ExprArena, i: ExprId, per_micro_tile: i64) -> ExprId {
        if self.interleaved {
            digit(arena, i, None, self.warps_m * MMA_M, per_micro_tile)
        } else {
            digit(arena, i, Some(self.tile_m), MMA_M, per_micro_tile)
        }
    }

    /// The partition of an m×n tile over `threads` threads. Like TileLang, a block whose thread
    /// count is not a multiple of 32 uses only its whole warps.
    fn new(m: i64, n: i64, threads: i64, policy: WarpPolicy) -> Result<WarpGrid, String> {
        let warps = threads / WARP_SIZE;
        if threads <= 0 || warps == 0 {
            return Err(format!(
                "a tensor-core gemm needs at least one warp ({WARP_SIZE} threads), but the block \
                 has {threads} threads"
            ));
        }
        let (warps_m, warps_n) = warp_partition(m, n, warps, policy)?;
        Ok(WarpGrid {
            warps_m,
            warps_n,
            tile_m: m / warps_m,
            tile_n: n / warps_n,
            interleaved: false,
        })
    }

    /// The accumulator's thread: the warp's first thread plus the lane.
    fn accumulator_thread(&self, arena: &mut ExprArena, i: ExprId, j: ExprId) -> ExprId {
        let warp_col = digit(arena, j, None, self.tile_n, self.warps_m * WARP_SIZE);
        let warp_row = self.warp_row_term(arena, i);
        let lane = lane(arena, i, j);
        let warp = arena.add(warp_col, warp_row);
        arena.add(warp, lane)
    }

    /// The accumulator's register. Each 16-row micro tile holds `tile_n / 8` n8 atoms of four
    /// registers; the two-register halves of an atom are its upper and lower eight rows.
    fn accumulator_register(&self, arena: &mut ExprArena, i: ExprId, j: ExprId) -> ExprId {
        let micro_row = self.micro_row_term(arena, i, self.tile_n / 2);
        let atom = digit(arena, j, Some(self.tile_n), MMA_N, 4);
        let half = digit(arena, i, Some(MMA_M), 8, 2);
        let pair = digit(arena, j, Some(2), 1, 1);
        sum(arena, &[micro_row, atom, half, pair])
    }

    /// The A operand over an m×k (or, transposed, k×m) buffer: one copy per warp column, since
    /// every warp of a row multiplies the same rows of A. TileLang builds a transposed A from the
    /// 16-bit atom only.
    fn operand_a(
        &self,
        arena: &mut ExprArena,
        [m, k]: [i64; 2],
        atom: OperandAtom,
        transposed: bool,
    ) -> Result<FragmentLayout, String> {
        if transposed && atom != OperandAtom::SIXTEEN_BIT {
            return Err("a transposed A operand in registers needs 16-bit elements".to_owned());
        }
        check_reduction_depth(k, atom.depth(), "A")?;
        operand_layout(
            arena,
            [m, k],
            transposed,
            self.warps_n,
            |arena, i, j, rep| {
                let thread = self.operand_a_thread(arena, (i, j), atom, rep);
                (thread, self.operand_a_register(arena, i, j, atom))
            },
        )
    }

    /// The A operand's thread: lane and warp row as for the accumulator, and the replica's warp
    /// column.
    fn operand_a_thread(
        &self,
        arena: &mut ExprArena,
        (i, j): (ExprId, ExprId),
        atom: OperandAtom,
        rep: VarId,
    ) -> ExprId {
        let warp_row = self.warp_row_term(arena, i);
        let row = digit(arena, i, Some(8), 1, 4);
        let col = digit(arena, j, Some(atom.width()), atom.per_lane, 1);
        let lane = arena.add(row, col);
        let own = arena.add(warp_row, lane);
        // A single warp column has a single copy; leaving out the replica term (always zero then)
        // keeps the formula identical to the accumulator's.
        if self.warps_n == 1 {
            return own;
        }
        let rep = arena.var_expr(rep);
        let copy = digit(arena, rep, None, 1, self.warps_m * WARP_SIZE);
        arena.add(own, copy)
    }

    /// The A operand's register. For 16-bit elements, eight per 16×16 micro tile (`a0..a7`: the
    /// k8 half picks four, the upper or lower eight rows two, the column parity one), micro tiles
    /// M-fastest; other widths scale the same pattern by the elements a lane holds per atom.
    fn operand_a_register(
        &self,
        arena: &mut ExprArena,
        i: ExprId,
        j: ExprId,
        atom: OperandAtom,
    ) -> ExprId {
        let micro_rows = self.tile_m / MMA_M;
        let per_micro_tile = atom.per_micro_tile();
        let micro_row = self.micro_row_term(arena, i, per_micro_tile);
        // With one micro row per warp the micro tile's step along K and its atom half fuse into
        // `j // width * 2 * per_lane`; the split form is equal but prints less like TileLang's.
        let depth = if micro_rows == 1 {
            digit(arena, j, None, atom.width(), 2 * atom.per_lane)
        } else {
            let step = digit(arena, j, None, atom.depth(), per_micro_tile * micro_rows);
            let half = digit(
                arena,
                j,
                Some(atom.depth()),
                atom.width(),
                2 * atom.per_lane,
            );
            arena.add(step, half)
        };
        let half = digit(arena, i, Some(MMA_M), 8, atom.per_lane);
        let within = digit(arena, j, Some(atom.per_lane), 1, 1);
        sum(arena, &[micro_row, depth, half, within])
    }

    /// The B operand's thread: the lane of column `n` and depth `k`, one copy per warp row
    /// (TileLang replicates the warp's fragment before spreading it over the warp columns, so
    /// the replica sits where the accumulator's warp row does).
    fn operand_b_thread(&self, arena: &mut ExprArena, k: ExprId, n: ExprId, rep: VarId) -> ExprId {
        let warp_col = digit(arena, n, None, self.tile_n, self.warps_m * WARP_SIZE);
        let lane = lane(arena, n, k);
        let own = arena.add(warp_col, lane);
        if self.warps_m == 1 {
            return own;
        }
        let rep = arena.var_expr(rep);
        let copy = digit(arena, rep, None, 1, WARP_SIZE);
        arena.add(own, copy)
    }

    /// The B operand's register: four per n8 atom (`b0..b3`: the k8 half picks two, the depth
    /// parity one), atoms along the warp's columns, then one block of `tile_n / 2` per k16 step.
    fn operand_b_register(&self, arena: &mut ExprArena, k: ExprId, n: ExprId) -> ExprId {
        let atom = digit(arena, n, Some(self.tile_n), MMA_N, 4);
        let step = digit(arena, k, None, MMA_K, self.tile_n / 2);
        let half = digit(arena, k, Some(MMA_K), 8, 2);
        let pair = digit(arena, k, Some(2), 1, 1);
        sum(arena, &[atom, step, half, pair])
    }
}

/// The lane holding element `(i, j)` of an mma fragment: rows of eight lanes four apart, each
/// lane holding two adjacent columns.
fn lane(arena: &mut ExprArena, i: ExprId, j: ExprId) -> ExprId {
    let row = digit(arena, i, Some(8), 1, 4);
    let col = digit(arena, j, Some(8), 2, 1);
    arena.add(row, col)
}

/// `x % modulo // divisor * scale` (without the modulo when it is `None`), the shape of every
/// term of a tensor-core layout.
fn digit(
    arena: &mut ExprArena,
    x: ExprId,
    modulo: Option<i64>,
    divisor: i64,
    scale: i64,
) -> ExprId {
    let reduced = match modulo {
        Some(modulo) => {
            let modulo = arena.int(modulo);
            arena.floormod(x, modulo)
        }
        None => x,
    };
    let divisor = arena.int(divisor);
    let quotient = arena.floordiv(reduced, divisor);
    let scale = arena.int(scale);
    arena.mul(quotient, scale)
}

/// The sum of several terms.
fn sum(arena: &mut ExprArena, terms: &[ExprId]) -> ExprId {
    let zero = arena.int(0);
    terms.iter().fold(zero, |acc, &term| arena.add(acc, term))
}

#[cfg(test)]
mod tests {
    use tilec_ir::{ExprArena, WarpPolicy};

    use super::{accumulator_layout, operand_a_layout, operand_b_layout, warp_partition};
    use crate::layout::algebra::{RepeatOn, RepeatOrder, inverse, repeat, replicate};
    use crate::layout::fragment::{FragmentLayout, fresh_vars, points};

    /// A layout transcribed from TileLang's printed output: (i, j) to (thread, local index).
    type Formula = fn(i64, i64) -> (i64, i64);

    /// `gemm.py` instances 0 and 1, `gemm_eager.py`, `gemm_splitk_atomic.py` (64×64 warp tiles):
    /// Thread `_j // 64 * 64 + _i // 64 * 32 + _i % 8 * 4 + _j % 8 // 2`,
    /// Index `_i % 64 // 16 * 32 + _j % 64 // 8 * 4 + _i % 16 // 8 * 2 + _j % 2`.
    fn tilelang_gemm_64x64_warps(i: i64, j: i64) -> (i64, i64) {
        let thread = j / 64 * 64 + i / 64 * 32 + i % 8 * 4 + j % 8 / 2;
        let index = i % 64 / 16 * 32 + j % 64 / 8 * 4 + i % 16 / 8 * 2 + j % 2;
        (thread, index)
    }

    /// `flash_attention_fwd.py` instance 1, acc_s, acc_s_cast and acc_o (16×128 warp tiles):
    /// Thread `_i // 16 * 32 + _i % 8 * 4 + _j % 8 // 2`,
    /// Index `_j // 8 * 4 + _i % 16 // 8 * 2 + _j % 2`.
    fn tilelang_flash_attention(i: i64, j: i64) -> (i64, i64) {
        let thread = i / 16 * 32 + i % 8 * 4 + j % 8 / 2;
        let index = j / 8 * 4 + i % 16 / 8 * 2 + j % 2;
        (thread, index)
    }

    /// Checks `layout` against `formula` at every point of its shape (with replica 0).
    fn assert_matches(arena: &ExprArena, layout: &FragmentLayout, formula: Formula) {
        let all = points(&layout.shape);
        assert!(!all.is_empty(), "the layout's domain was not enumerated");
        for point in all {
            let (i, j) = (point[0], point[1]);
            let (thread, index) = formula(i, j);
            assert_eq!(
                layout.thread_of(arena, &point, 0),
                Some(thread),
                "thread of {point:?}"
            );
            assert_eq!(
                layout.local_of(arena, &point),
                Some(vec![index]),
                "index of {point:?}"
            );
        }
    }

    /// Builds an accumulator layout and checks the properties every accumulator must have: no
    /// replication, injective, `m * n / threads` registers, every thread used.
    fn accumulator(
        arena: &mut ExprArena,
        m: i64,
        n: i64,
        threads: i64,
        policy: WarpPolicy,
    ) -> Result<FragmentLayout, String> {
        let layout = accumulator_layout(arena, m, n, threads, policy)?;
        assert_eq!(layout.replicate, 1);
        assert_eq!(layout.collision(arena), None);
        assert_eq!(layout.local_size(arena), m * n / threads);
        assert_eq!(layout.thread_extent(arena), threads);
        Ok(layout)
    }

    #[test]
    fn wgmma_partitions_match_tilelang() {
        use super::wgmma_partition;
        // gemm.py instance 0: one warpgroup along M (its layout repeats every 64 rows).
        assert_eq!(wgmma_partition(128, 128, 4, WarpPolicy::Square), Ok((4, 1)));
        // gemm.py instance 1: one warpgroup along M, two along N (TileLang's `_j // 128 * 128`).
        assert_eq!(wgmma_partition(128, 256, 8, WarpPolicy::Square), Ok((4, 2)));
        // flash attention: FullRow stacks both warpgroups along M.
        assert_eq!(
            wgmma_partition(128, 128, 8, WarpPolicy::FullRow),
            Ok((8, 1))
        );
        assert_eq!(
            wgmma_partition(128, 128, 8, WarpPolicy::FullCol),
            Ok((4, 2))
        );
        assert!(wgmma_partition(128, 128, 6, WarpPolicy::Square).is_err());
        assert!(wgmma_partition(32, 128, 4, WarpPolicy::Square).is_err());
    }

    #[test]
    fn wgmma_is_chosen_as_tilelang_allows_it() {
        use super::{GemmInstruction, GemmShape, select_gemm_instruction};
        use crate::options::CodegenOptions;
        use tilec_ir::{ConstValue, DType, Target};
        let shape = GemmShape {
            m: 128,
            n: 128,
            k: 32,
            threads: 128,
            policy: WarpPolicy::Square,
            dtypes: [DType::Float16, DType::Float16, DType::Float32],
            b_in_registers: false,
            transposed: [false, false],
        };
        let hopper = CodegenOptions::for_target(Target::Sm90);
        assert_eq!(
            select_gemm_instruction(hopper, &shape),
            GemmInstruction::Wgmma
        );
        let ampere = CodegenOptions::for_target(Target::Sm80);
        assert_eq!(
            select_gemm_instruction(ampere, &shape),
            GemmInstruction::MmaSync
        );
        let off = [("tl.disable_wgmma".to_owned(), ConstValue::Bool(true))];
        let disabled = CodegenOptions::new(Target::Sm90, &off);
        assert_eq!(
            select_gemm_instruction(disabled, &shape),
            GemmInstruction::MmaSync
        );
        let narrow = GemmShape { m: 32, ..shape };
        assert_eq!(
            select_gemm_instruction(hopper, &narrow),
            GemmInstruction::MmaSync
        );
        let odd_block = GemmShape {
            threads: 96,
            ..shape
        };
        assert_eq!(
            select_gemm_instruction(hopper, &odd_block),
            GemmInstruction::MmaSync
        );
        let fp32 = GemmShape {
            dtypes: [DType::Float32, DType::Float32, DType::Float32],
            ..shape
        };
        assert_eq!(
            select_gemm_instruction(hopper, &fp32),
            GemmInstruction::MmaSync
        );
    }

    #[test]
    fn warp_partitions_match_tilelang() {
        // gemm.py instance 0 (and gemm_eager, gemm_splitk): 2×2 warps of 64×64.
        assert_eq!(warp_partition(128, 128, 4, WarpPolicy::Square), Ok((2, 2)));
        // gemm.py instance 1: 2×4 warps of 64×64.
        assert_eq!(warp_partition(128, 256, 8, WarpPolicy::Square), Ok((2, 4)));
        // flash attention: FullRow puts all eight warps along M.
        assert_eq!(warp_partition(128, 128, 8, WarpPolicy::FullRow), Ok((8, 1)));
        // errors/layout_conflict_gemm_serial.py: 2×2 warps of 32×32.
        assert_eq!(warp_partition(64, 64, 4, WarpPolicy::Square), Ok((2, 2)));
        assert_eq!(warp_partition(128, 128, 8, WarpPolicy::FullCol), Ok((1, 8)));
        // FullRow falls back to fewer warps along M when 16-row warps would not divide M.
        assert_eq!(warp_partition(32, 128, 4, WarpPolicy::FullRow), Ok((2, 2)));
        assert_eq!(warp_partition(16, 64, 4, WarpPolicy::Square), Ok((1, 4)));
    }

    #[test]
    fn impossible_partitions_are_explained() {
        assert_eq!(
            warp_partition(128, 128, 3, WarpPolicy::Square),
            Err(
                "a 128×128 tile cannot be split over 3 warps with the Square policy: each warp \
                 needs a multiple of 16 rows and 8 columns; change the number of threads or the \
                 block tile"
                    .to_owned()
            )
        );
        let Err(rows) = warp_partition(24, 128, 4, WarpPolicy::FullRow) else {
            panic!("24 rows cannot be split into 16-row warps");
        };
        assert!(rows.contains("24 rows is not a multiple of 16"), "{rows}");
        let Err(cols) = warp_partition(64, 12, 1, WarpPolicy::FullCol) else {
            panic!("12 columns cannot be split into 8-column warps");
        };
        assert!(cols.contains("12 columns is not a multiple of 8"), "{cols}");
        assert!(warp_partition(16, 8, 2, WarpPolicy::Square).is_err());
        assert!(warp_partition(0, 8, 1, WarpPolicy::Square).is_err());
        assert!(warp_partition(16, 8, 0, WarpPolicy::Square).is_err());
        assert!(warp_partition(16, 8, i64::MAX, WarpPolicy::Square).is_err());
        let mut arena = ExprArena::new();
        assert!(accumulator_layout(&mut arena, 128, 128, 16, WarpPolicy::Square).is_err());
        assert!(accumulator_layout(&mut arena, 128, 128, -32, WarpPolicy::Square).is_err());
        assert!(accumulator_layout(&mut arena, i64::MAX, 8, 32, WarpPolicy::Square).is_err());
        assert!(operand_a_layout(&mut arena, 64, 64, 24, 128, WarpPolicy::Square, false).is_err());
    }

    #[test]
    fn gemm_128x128_on_128_threads_matches_tilelang() -> Result<(), String> {
        let mut arena = ExprArena::new();
        let layout = accumulator(&mut arena, 128, 128, 128, WarpPolicy::Square)?;
        assert_matches(&arena, &layout, tilelang_gemm_64x64_warps);
        assert_eq!(layout.local_size(&arena), 128);
        Ok(())
    }

    #[test]
    fn gemm_128x256_on_256_threads_matches_tilelang() -> Result<(), String> {
        let mut arena = ExprArena::new();
        let layout = accumulator(&mut arena, 128, 256, 256, WarpPolicy::Square)?;
        assert_matches(&arena, &layout, tilelang_gemm_64x64_warps);
        Ok(())
    }

    #[test]
    fn flash_attention_accumulators_match_tilelang() -> Result<(), String> {
        // acc_s (Q·Kᵀ) and acc_o (P·V) are both 128×128 over 256 threads with FullRow.
        let mut arena = ExprArena::new();
        let layout = accumulator(&mut arena, 128, 128, 256, WarpPolicy::FullRow)?;
        assert_matches(&arena, &layout, tilelang_flash_attention);
        Ok(())
    }

    #[test]
    fn splitk_accumulator_matches_tilelang() -> Result<(), String> {
        // gemm_splitk_atomic.py: C_local is 128×128 over 128 threads, Square.
        let mut arena = ExprArena::new();
        let layout = accumulator(&mut arena, 128, 128, 128, WarpPolicy::Square)?;
        assert_matches(&arena, &layout, tilelang_gemm_64x64_warps);
        Ok(())
    }

    #[test]
    fn layout_conflict_gemm_accumulator_is_injective() -> Result<(), String> {
        // errors/layout_conflict_gemm_serial.py fails in TileLang before a layout is printed; the
        // 64×64 accumulator over 128 threads uses 32×32 warp tiles.
        let mut arena = ExprArena::new();
        let layout = accumulator(&mut arena, 64, 64, 128, WarpPolicy::Square)?;
        assert_eq!(layout.local_size(&arena), 32);
        Ok(())
    }

    /// The flash-attention formulas as the arena prints them: TileLang's terms, in the arena's
    /// canonical order (terms sorted by variable).
    const FLASH_ATTENTION_TEXT: &str = "thread i // 16 * 32 + i % 8 * 4 + j % 8 // 2 | index (i % \
                                        16 // 8 * 2 + j // 8 * 4 + j % 2) | replicate 1";

    #[test]
    fn accumulators_print_tilelangs_terms() -> Result<(), String> {
        let mut arena = ExprArena::new();
        let gemm = accumulator_layout(&mut arena, 128, 128, 128, WarpPolicy::Square)?;
        assert_eq!(
            gemm.describe(&arena),
            "thread i // 64 * 32 + i % 8 * 4 + j // 64 * 64 + j % 8 // 2 | index (i % 16 // 8 * 2 \
             + i % 64 // 16 * 32 + j % 64 // 8 * 4 + j % 2) | replicate 1"
        );
        let flash = accumulator_layout(&mut arena, 128, 128, 256, WarpPolicy::FullRow)?;
        assert_eq!(flash.describe(&arena), FLASH_ATTENTION_TEXT);
        Ok(())
    }

    #[test]
    fn narrow_warp_tiles_use_n8_atoms() -> Result<(), String> {
        // 8-column warp tiles (16×64 over 8 warps, FullCol) take one n8 atom per warp and micro
        // row: four registers each, no gaps.
        let mut arena = ExprArena::new();
        let layout = accumulator(&mut arena, 32, 64, 256, WarpPolicy::FullCol)?;
        assert_eq!(layout.local_shape(&arena), vec![8]);
        // 64×48 over 2 warps gives 64×24 warp tiles: one 16-column micro tile would straddle
        // two warps, so TileLang switches the whole warp to n8 atoms (three per micro row).
        assert_eq!(warp_partition(64, 48, 2, WarpPolicy::Square), Ok((1, 2)));
        let mixed = accumulator(&mut arena, 64, 48, 64, WarpPolicy::Square)?;
        assert_eq!(mixed.local_shape(&arena), vec![48]);
        Ok(())
    }

    #[test]
    fn flash_attention_operand_a_equals_its_accumulator_layout() -> Result<(), String> {
        // acc_s_cast is the A operand of the second gemm (128×128 by 128, 256 threads,
        // FullRow). TileLang prints the accumulator formula for it; with all warps along M the
        // A-fragment layout is the same function, without replication.
        let mut arena = ExprArena::new();
        let layout = operand_a_layout(&mut arena, 128, 128, 128, 256, WarpPolicy::FullRow, false)?;
        assert_eq!(layout.replicate, 1);
        assert_eq!(layout.collision(&arena), None);
        assert_matches(&arena, &layout, tilelang_flash_attention);
        assert_eq!(layout.describe(&arena), FLASH_ATTENTION_TEXT);
        Ok(())
    }

    /// Checks that each element of an A layout sits on `copies` distinct threads and that no two
    /// (element, replica) pairs share a register.
    fn assert_replicated(arena: &ExprArena, layout: &FragmentLayout, copies: i64) {
        assert_eq!(layout.replicate, copies);
        assert_eq!(layout.collision(arena), None);
        for point in points(&layout.shape) {
            let mut threads = layout.threads_of(arena, &point);
            threads.sort_unstable();
            threads.dedup();
            assert_eq!(
                i64::try_from(threads.len()),
                Ok(copies),
                "copies of {point:?}"
            );
        }
    }

    #[test]
    fn operand_a_is_replicated_over_the_n_warps() -> Result<(), String> {
        let mut arena = ExprArena::new();
        // 128×128 output on 128 threads: 2×2 warps, so each A element lives in two warps.
        let square = operand_a_layout(&mut arena, 128, 128, 32, 128, WarpPolicy::Square, false)?;
        assert_replicated(&arena, &square, 2);
        assert_eq!(square.local_size(&arena), 64 * 32 / 32);
        assert_eq!(square.thread_extent(&arena), 128);
        // 2×4 warps: four copies.
        let wide = operand_a_layout(&mut arena, 128, 256, 64, 256, WarpPolicy::Square, false)?;
        assert_replicated(&arena, &wide, 4);
        let full_col = operand_a_layout(&mut arena, 64, 64, 16, 128, WarpPolicy::FullCol, false)?;
        assert_replicated(&arena, &full_col, 4);
        assert_eq!(full_col.local_size(&arena), 64 * 16 / 32);
        Ok(())
    }

    #[test]
    fn transposed_operand_a_is_the_transpose() -> Result<(), String> {
        let mut arena = ExprArena::new();
        let plain = operand_a_layout(&mut arena, 128, 128, 32, 128, WarpPolicy::Square, false)?;
        let flipped = operand_a_layout(&mut arena, 128, 128, 32, 128, WarpPolicy::Square, true)?;
        assert_eq!(flipped.shape, vec![32, 128]);
        assert_replicated(&arena, &flipped, 2);
        for point in points(&plain.shape) {
            let swapped = [point[1], point[0]];
            for rep in 0..2 {
                assert_eq!(
                    plain.thread_of(&arena, &point, rep),
                    flipped.thread_of(&arena, &swapped, rep)
                );
            }
            assert_eq!(
                plain.local_of(&arena, &point),
                flipped.local_of(&arena, &swapped)
            );
        }
        Ok(())
    }

    #[test]
    fn operand_b_lanes_match_the_ptx_fragment_table() -> Result<(), String> {
        // PTX ISA, m16n8k16 .f16 B fragment: lane 4g + t holds column n = g, rows
        // k = 2t, 2t + 1, 2t + 8, 2t + 9 in b0..b3. One warp, K×N = 16×8.
        let mut arena = ExprArena::new();
        let layout = operand_b_layout(&mut arena, 16, 8, 16, 32, WarpPolicy::Square, false)?;
        assert_eq!(layout.shape, vec![16, 8]);
        assert_eq!(layout.replicate, 1);
        assert_eq!(layout.local_size(&arena), 4);
        let table = inverse(&arena, &layout)?;
        assert_eq!(table.holes(), 0);
        let expected: [[[i64; 2]; 4]; 4] = [
            [[0, 0], [1, 0], [8, 0], [9, 0]],
            [[2, 0], [3, 0], [10, 0], [11, 0]],
            [[4, 0], [5, 0], [12, 0], [13, 0]],
            [[6, 0], [7, 0], [14, 0], [15, 0]],
        ];
        for (lane, registers) in expected.iter().enumerate() {
            for (register, element) in registers.iter().enumerate() {
                assert_eq!(
                    table.element_at(
                        i64::try_from(lane).expect("a lane fits i64"),
                        &[i64::try_from(register).expect("a register fits i64")]
                    ),
                    Some((element.to_vec(), 0)),
                    "lane {lane}, b{register}"
                );
            }
        }
        // Lane 5 (g = 1, t = 1) holds column 1.
        assert_eq!(table.element_at(5, &[2]), Some((vec![10, 1], 0)));
        Ok(())
    }

    #[test]
    fn operand_b_second_n8_atom_takes_registers_4_to_7() -> Result<(), String> {
        let mut arena = ExprArena::new();
        let layout = operand_b_layout(&mut arena, 16, 16, 16, 32, WarpPolicy::Square, false)?;
        assert_eq!(layout.local_size(&arena), 8);
        let table = inverse(&arena, &layout)?;
        assert_eq!(table.element_at(0, &[4]), Some((vec![0, 8], 0)));
        assert_eq!(table.element_at(3, &[7]), Some((vec![15, 8], 0)));
        // The transposed buffer (N×K) holds the same elements with the indices swapped.
        let flipped = operand_b_layout(&mut arena, 16, 16, 16, 32, WarpPolicy::Square, true)?;
        assert_eq!(
            inverse(&arena, &flipped)?.element_at(3, &[7]),
            Some((vec![8, 15], 0))
        );
        Ok(())
    }

    /// Which gemm operand a TileLang recipe builds.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    enum Operand {
        A,
        B,
    }

    /// TileLang's `make_mma_load_layout` for 16-bit operands, built with the layout algebra from
    /// its base fragment (`shared_16x16_to_mma_{a,b}_32x8_layout`): the base repeated over the
    /// warp's micro tiles on registers, then over the warps on threads, and replicated over the
    /// other warp dimension (A after the thread repeat, B before it).
    fn tilelang_operand(
        arena: &mut ExprArena,
        operand: Operand,
        (m, n, k): (i64, i64, i64),
        threads: i64,
        policy: WarpPolicy,
        transposed: bool,
    ) -> Result<FragmentLayout, String> {
        let (warps_m, warps_n) = warp_partition(m, n, threads / 32, policy)?;
        let (tile_m, tile_n) = (m / warps_m, n / warps_n);
        let micro_n = if tile_n % 16 == 0 { 16 } else { 8 };
        let (micro_s, warp_s, block_s, copies) = match operand {
            Operand::A => (16, tile_m / 16, warps_m, warps_n),
            Operand::B => (micro_n, tile_n / micro_n, warps_n, warps_m),
        };
        // "sr": the spatial index first (A as M×K, B as N×K).
        let sr = (operand == Operand::A) != transposed;
        let base = base_operand(arena, operand, micro_s, sr);
        let (warp_repeats, order) = if sr {
            ([warp_s, k / 16], RepeatOrder::FirstDimFastest)
        } else {
            ([k / 16, warp_s], RepeatOrder::LastDimFastest)
        };
        let warp = repeat(arena, &base, &warp_repeats, RepeatOn::Registers, order)?;
        let block_repeats = if sr { [block_s, 1] } else { [1, block_s] };
        let on_threads = |arena: &mut ExprArena, layout: &FragmentLayout| {
            repeat(
                arena,
                layout,
                &block_repeats,
                RepeatOn::Threads,
                RepeatOrder::LastDimFastest,
            )
        };
        match operand {
            Operand::A => {
                let spread = on_threads(arena, &warp)?;
                replicate(arena, &spread, copies)
            }
            Operand::B => {
                let copied = replicate(arena, &warp, copies)?;
                on_threads(arena, &copied)
            }
        }
    }

    /// The 16-bit mma base fragment of one warp: lane `4 * (s % 8) + r % 8 // 2`; register
    /// `4 * (r // 8) + 2 * (s // 8) + r % 2` for A, `4 * (s // 8) + 2 * (r // 8) + r % 2` for B.
    fn base_operand(
        arena: &mut ExprArena,
        operand: Operand,
        micro_s: i64,
        sr: bool,
    ) -> FragmentLayout {
        let shape = if sr { [micro_s, 16] } else { [16, micro_s] };
        let vars = fresh_vars(arena, &shape);
        let (first, second) = (arena.var_expr(vars[0]), arena.var_expr(vars[1]));
        let (s, r) = if sr { (first, second) } else { (second, first) };
        let lane = super::lane(arena, s, r);
        let (r_scale, s_scale) = match operand {
            Operand::A => (4, 2),
            Operand::B => (2, 4),
        };
        let depth = super::digit(arena, r, None, 8, r_scale);
        let row = super::digit(arena, s, None, 8, s_scale);
        let pair = super::digit(arena, r, Some(2), 1, 1);
        let index = super::sum(arena, &[depth, row, pair]);
        let rep = arena.var("rep", Some(1));
        FragmentLayout {
            shape: shape.to_vec(),
            vars,
            rep,
            replicate: 1,
            thread: lane,
            index: vec![index],
        }
    }

    /// Checks that two layouts are the same function of (element, replica).
    fn assert_same_function(arena: &ExprArena, ours: &FragmentLayout, theirs: &FragmentLayout) {
        assert_eq!(ours.shape, theirs.shape);
        assert_eq!(ours.replicate, theirs.replicate);
        for point in points(&ours.shape) {
            for rep in 0..ours.replicate {
                assert_eq!(
                    ours.thread_of(arena, &point, rep),
                    theirs.thread_of(arena, &point, rep),
                    "thread of {point:?}, replica {rep}"
                );
            }
            assert_eq!(
                ours.local_of(arena, &point),
                theirs.local_of(arena, &point),
                "register of {point:?}"
            );
        }
    }

    /// (m, n, k, threads, policy) of gemms covering every partition shape: square warps, wide
    /// warp grids, all warps along M or N, and n8-wide warp tiles.
    const GEMMS: [(i64, i64, i64, i64, WarpPolicy); 6] = [
        (128, 128, 32, 128, WarpPolicy::Square),
        (128, 256, 64, 256, WarpPolicy::Square),
        (128, 128, 32, 256, WarpPolicy::FullRow),
        (64, 64, 16, 128, WarpPolicy::FullCol),
        (64, 48, 32, 64, WarpPolicy::Square),
        (32, 64, 16, 256, WarpPolicy::FullCol),
    ];

    #[test]
    fn operand_b_matches_tilelangs_recipe() -> Result<(), String> {
        for (m, n, k, threads, policy) in GEMMS {
            for transposed in [false, true] {
                let mut arena = ExprArena::new();
                let ours = operand_b_layout(&mut arena, m, n, k, threads, policy, transposed)?;
                let theirs = tilelang_operand(
                    &mut arena,
                    Operand::B,
                    (m, n, k),
                    threads,
                    policy,
                    transposed,
                )?;
                assert_same_function(&arena, &ours, &theirs);
                assert_eq!(ours.collision(&arena), None);
                let (warps_m, warps_n) = warp_partition(m, n, threads / 32, policy)?;
                assert_eq!(ours.replicate, warps_m);
                assert_eq!(ours.local_size(&arena), n / warps_n * k / 32);
                assert_eq!(ours.thread_extent(&arena), threads);
            }
        }
        Ok(())
    }

    #[test]
    fn operand_a_matches_tilelangs_recipe() -> Result<(), String> {
        for (m, n, k, threads, policy) in GEMMS {
            for transposed in [false, true] {
                let mut arena = ExprArena::new();
                let ours = operand_a_layout(&mut arena, m, n, k, threads, policy, transposed)?;
                let theirs = tilelang_operand(
                    &mut arena,
                    Operand::A,
                    (m, n, k),
                    threads,
                    policy,
                    transposed,
                )?;
                assert_same_function(&arena, &ours, &theirs);
            }
        }
        Ok(())
    }

    /// TileLang's recipe for an A operand of `per_lane` elements per lane and atom (one for
    /// 32-bit tf32, two for 16-bit, four for 8-bit): the 8×(4·per_lane) atom repeated two by two
    /// into a micro tile, micro tiles over the warp's rows and K, warps over M, copies over N.
    fn tilelang_operand_a_of_width(
        arena: &mut ExprArena,
        (m, n, k): (i64, i64, i64),
        threads: i64,
        policy: WarpPolicy,
        per_lane: i64,
    ) -> Result<FragmentLayout, String> {
        let (warps_m, warps_n) = warp_partition(m, n, threads / 32, policy)?;
        let width = 4 * per_lane;
        let vars = fresh_vars(arena, &[16, 2 * width]);
        let (s, r) = (arena.var_expr(vars[0]), arena.var_expr(vars[1]));
        let row = super::digit(arena, s, Some(8), 1, 4);
        let col = super::digit(arena, r, Some(width), per_lane, 1);
        let lane = arena.add(row, col);
        let half = super::digit(arena, r, None, width, 2 * per_lane);
        let upper = super::digit(arena, s, None, 8, per_lane);
        let within = super::digit(arena, r, Some(per_lane), 1, 1);
        let index = super::sum(arena, &[half, upper, within]);
        let rep = arena.var("rep", Some(1));
        let base = FragmentLayout {
            shape: vec![16, 2 * width],
            vars,
            rep,
            replicate: 1,
            thread: lane,
            index: vec![index],
        };
        let repeats = [m / warps_m / 16, k / (2 * width)];
        let warp = repeat(
            arena,
            &base,
            &repeats,
            RepeatOn::Registers,
            RepeatOrder::FirstDimFastest,
        )?;
        let spread = repeat(
            arena,
            &warp,
            &[warps_m, 1],
            RepeatOn::Threads,
            RepeatOrder::LastDimFastest,
        )?;
        replicate(arena, &spread, warps_n)
    }

    #[test]
    fn operand_a_of_tf32_and_8_bit_elements_matches_tilelangs_recipe() -> Result<(), String> {
        for (m, n, k, threads, policy) in GEMMS {
            for (bits, per_lane) in [(32, 1), (16, 2), (8, 4)] {
                if k % (8 * per_lane) != 0 {
                    continue;
                }
                let mut arena = ExprArena::new();
                let ours = super::gemm_operand_a_layout(
                    &mut arena,
                    super::GemmInstruction::MmaSync,
                    [m, n, k],
                    (threads, bits),
                    policy,
                    false,
                )?;
                let theirs =
                    tilelang_operand_a_of_width(&mut arena, (m, n, k), threads, policy, per_lane)?;
                assert_same_function(&arena, &ours, &theirs);
                assert_eq!(ours.collision(&arena), None, "{bits}-bit A of {m}x{k}");
            }
        }
        // Depths follow the element width: tf32 needs multiples of 8, 8-bit ones of 32.
        let mut arena = ExprArena::new();
        let shallow = |arena: &mut ExprArena, bits, k| {
            super::gemm_operand_a_layout(
                arena,
                super::GemmInstruction::MmaSync,
                [64, 64, k],
                (128, bits),
                WarpPolicy::Square,
                false,
            )
        };
        assert!(shallow(&mut arena, 32, 8).is_ok());
        assert!(shallow(&mut arena, 8, 16).is_err());
        assert!(shallow(&mut arena, 4, 64).is_err());
        Ok(())
    }

    #[test]
    fn operand_b_is_replicated_over_the_m_warps() -> Result<(), String> {
        let mut arena = ExprArena::new();
        // 2×2 warps: each B element is in the two warps of its warp column, 32 threads apart.
        let square = operand_b_layout(&mut arena, 128, 128, 32, 128, WarpPolicy::Square, false)?;
        assert_replicated(&arena, &square, 2);
        assert_eq!(square.threads_of(&arena, &[0, 64]), vec![64, 96]);
        // FullRow puts every warp along M: eight copies, and the whole of N in each warp.
        let full_row = operand_b_layout(&mut arena, 128, 128, 32, 256, WarpPolicy::FullRow, true)?;
        assert_replicated(&arena, &full_row, 8);
        assert_eq!(full_row.local_size(&arena), 128 * 32 / 32);
        assert!(operand_b_layout(&mut arena, 64, 64, 24, 128, WarpPolicy::Square, false).is_err());
        assert!(operand_b_layout(&mut arena, 64, 64, 16, 96, WarpPolicy::Square, false).is_err());
        Ok(())
    }
}
