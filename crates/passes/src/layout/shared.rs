//! Shared-memory (and global-memory) layouts: where each element of a tile is stored.
//!
//! A [`SharedLayout`] maps a logical index of a tile to one storage offset (in elements). It uses
//! the representation of seed 002: every dimension of the shape is split into *modes* (outermost
//! first), each mode has a stride, the offset is the sum of mode coordinates times strides, and an
//! optional [`Swizzle`] then permutes the offset by XOR-ing bits of it.
//!
//! TileLang gives the shared-memory operands of `T.gemm` XOR-swizzled layouts so that the eight
//! rows an `ldmatrix` reads in one phase hit distinct banks. Its full-, half- and quarter-bank
//! swizzles XOR the 16-byte chunk number inside a 128-, 64- or 32-byte row atom with bits of the
//! row number; on the flattened storage offset each one is a CuTe-style swizzle, so the
//! constructors here build them in that form, and [`gemm_operand_layout`] chooses among them the
//! way TileLang's `MakeSwizzledLayout` does. Every property (bijectivity, equality) is decided by
//! enumerating the tile, which is always a compile-time constant.

use std::fmt::Write as _;

use tilec_ir::{ExprArena, ExprId};

use super::fragment::{MAX_POINTS, for_each_point};

/// The width of one swizzled chunk: a 128-bit vector, what one `ldmatrix` lane or one vectorized
/// shared-memory access moves.
const CHUNK_BITS: u32 = 128;
/// The largest storage span [`SharedLayout::inverse`] tabulates: a few times the largest tile,
/// which leaves room for padding but not for a stride typed wrong.
// `MAX_POINTS` is 2^22, far inside i64.
#[allow(clippy::cast_possible_wrap)]
const MAX_STORAGE: i64 = 4 * MAX_POINTS as i64;
/// Rows of one swizzle atom: the XOR pattern repeats every eight rows.
const ATOM_ROWS: i64 = 8;

/// A CuTe-style swizzle of a storage offset: the `bits` bits starting at bit `base + shift` are
/// XOR-ed into the `bits` bits starting at bit `base`.
///
/// With `base = log2(elements per 16-byte chunk)` the low bits select an element inside a chunk
/// and are left alone, the XOR-ed bits are the chunk number, and the bits it reads are the row
/// number inside an eight-row atom.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Swizzle {
    pub bits: u32,
    pub base: u32,
    pub shift: u32,
}

impl Swizzle {
    /// A swizzle, rejecting parameters whose read and written bits overlap (the map would not be
    /// a permutation) or that reach past the bits of an `i64`.
    pub fn new(bits: u32, base: u32, shift: u32) -> Result<Swizzle, String> {
        if bits == 0 || shift < bits {
            return Err(format!(
                "a swizzle of {bits} bits shifted by {shift} is not a permutation: it needs at \
                 least one bit and a shift no smaller than its bit count"
            ));
        }
        if u64::from(bits) + u64::from(base) + u64::from(shift) > 62 {
            return Err(format!(
                "a swizzle reading bits up to {} does not fit a 64-bit offset",
                bits + base + shift
            ));
        }
        Ok(Swizzle { bits, base, shift })
    }

    /// The swizzled offset.
    pub fn apply(self, offset: i64) -> i64 {
        let mask = ((1i64 << self.bits) - 1) << self.base;
        offset ^ ((offset >> self.shift) & mask)
    }

    /// The same permutation as arena formulas. The arena has no XOR, so each written bit is
    /// `(x // 2^a + x // 2^b) % 2`: the quotients differ from the two bits by even amounts.
    pub fn to_expr(self, arena: &mut ExprArena, offset: ExprId) -> ExprId {
        let block = 1i64 << (self.base + self.bits);
        let block_expr = arena.int(block);
        let kept_high = arena.floordiv(offset, block_expr);
        let mut result = arena.mul(kept_high, block_expr);
        let low = arena.int(1i64 << self.base);
        let kept_low = arena.floormod(offset, low);
        result = arena.add(result, kept_low);
        for bit in 0..self.bits {
            let written = bit_quotient(arena, offset, self.base + bit);
            let read = bit_quotient(arena, offset, self.base + self.shift + bit);
            let both = arena.add(written, read);
            let two = arena.int(2);
            let xor = arena.floormod(both, two);
            let weight = arena.int(1i64 << (self.base + bit));
            let term = arena.mul(xor, weight);
            result = arena.add(result, term);
        }
        result
    }

    /// The bytes of one swizzled row atom for elements of `element_bits` bits: 128 for the
    /// full-bank swizzle of 16-bit elements.
    pub fn atom_bytes(self, element_bits: u32) -> i64 {
        (1i64 << (self.base + self.bits)) * i64::from(element_bits) / 8
    }
}

/// `x // 2^bit`, whose parity is bit `bit` of `x`.
fn bit_quotient(arena: &mut ExprArena, x: ExprId, bit: u32) -> ExprId {
    let divisor = arena.int(1i64 << bit);
    arena.floordiv(x, divisor)
}

/// TileLang's three XOR swizzles of 16-byte chunks, smallest granularity first (the order
/// [`merge_swizzles`] uses).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum BankSwizzle {
    /// 32-byte atoms: two chunks, the chunk bit XOR-ed with bit 2 of the row.
    Quarter,
    /// 64-byte atoms: four chunks XOR-ed with bits 1..3 of the row.
    Half,
    /// 128-byte atoms: eight chunks XOR-ed with the row inside the eight-row atom.
    Full,
}

impl BankSwizzle {
    /// Chunks of 16 bytes in one row of an atom.
    fn chunks(self) -> i64 {
        match self {
            BankSwizzle::Quarter => 2,
            BankSwizzle::Half => 4,
            BankSwizzle::Full => 8,
        }
    }

    /// log2 of [`Self::chunks`]: the swizzle's bit count.
    fn chunk_bits(self) -> u32 {
        match self {
            BankSwizzle::Quarter => 1,
            BankSwizzle::Half => 2,
            BankSwizzle::Full => 3,
        }
    }
}

/// A storage layout: logical index → storage offset, as shape, mode shape, mode strides and an
/// optional swizzle of the final offset.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SharedLayout {
    shape: Vec<i64>,
    mode_shape: Vec<i64>,
    mode_strides: Vec<i64>,
    swizzle: Option<Swizzle>,
    element_bits: u32,
    /// The dimension each mode splits.
    mode_dims: Vec<usize>,
    /// For each mode, the product of the later modes of its dimension: the mode's coordinate is
    /// `index // divisor % size`.
    mode_divisors: Vec<i64>,
}

impl SharedLayout {
    /// A layout from its seed-002 parts. The modes split the dimensions in order, outermost mode
    /// of each dimension first; modes of size 1 may appear anywhere. `element_bits` is the width
    /// of one element, used to speak about bytes (swizzle atoms, descriptions).
    pub fn new(
        shape: &[i64],
        mode_shape: &[i64],
        mode_strides: &[i64],
        swizzle: Option<Swizzle>,
        element_bits: u32,
    ) -> Result<SharedLayout, String> {
        check_parts(shape, mode_shape, mode_strides, element_bits)?;
        let mode_dims = assign_modes(shape, mode_shape)?;
        let mode_divisors = mode_divisors(mode_shape, &mode_dims);
        Ok(SharedLayout {
            shape: shape.to_vec(),
            mode_shape: mode_shape.to_vec(),
            mode_strides: mode_strides.to_vec(),
            swizzle,
            element_bits,
            mode_dims,
            mode_divisors,
        })
    }

    /// The plain row-major layout (TileLang's `MakeLinearLayout`).
    pub fn row_major(shape: &[i64], element_bits: u32) -> Result<SharedLayout, String> {
        let mut strides = vec![1i64; shape.len()];
        for dim in (0..shape.len().saturating_sub(1)).rev() {
            strides[dim] = strides[dim + 1]
                .checked_mul(shape[dim + 1])
                .ok_or_else(|| too_large(shape))?;
        }
        SharedLayout::new(shape, shape, &strides, None, element_bits)
    }

    /// Row-major with each row `pitch` elements apart (`pitch >= cols`).
    pub fn with_row_pitch(
        rows: i64,
        cols: i64,
        pitch: i64,
        element_bits: u32,
    ) -> Result<SharedLayout, String> {
        if pitch < cols {
            return Err(format!(
                "a row pitch of {pitch} elements is shorter than the {cols}-element rows"
            ));
        }
        SharedLayout::new(
            &[rows, cols],
            &[rows, cols],
            &[pitch, 1],
            None,
            element_bits,
        )
    }

    /// TileLang's padded gemm layout (`MakeGemmABLayoutPadded`): rows padded by one 16-byte
    /// chunk when a row is a whole number of 32-byte sectors, so that consecutive rows start in
    /// different banks; otherwise plain row-major.
    pub fn padded(rows: i64, cols: i64, element_bits: u32) -> Result<SharedLayout, String> {
        let row_bits = i64::from(element_bits).saturating_mul(cols);
        let pad = if row_bits % 256 == 0 {
            i64::from(CHUNK_BITS / element_bits.max(1))
        } else {
            0
        };
        SharedLayout::with_row_pitch(rows, cols, cols.saturating_add(pad), element_bits)
    }

    /// TileLang's 128-byte (full-bank) XOR swizzle of a `rows × cols` tile.
    pub fn full_bank(rows: i64, cols: i64, element_bits: u32) -> Result<SharedLayout, String> {
        SharedLayout::bank_swizzled(rows, cols, element_bits, BankSwizzle::Full)
    }

    /// TileLang's 64-byte (half-bank) XOR swizzle of a `rows × cols` tile.
    pub fn half_bank(rows: i64, cols: i64, element_bits: u32) -> Result<SharedLayout, String> {
        SharedLayout::bank_swizzled(rows, cols, element_bits, BankSwizzle::Half)
    }

    /// TileLang's 32-byte (quarter-bank) XOR swizzle of a `rows × cols` tile.
    pub fn quarter_bank(rows: i64, cols: i64, element_bits: u32) -> Result<SharedLayout, String> {
        SharedLayout::bank_swizzled(rows, cols, element_bits, BankSwizzle::Quarter)
    }

    /// One of TileLang's bank swizzles (`Make{Full,Half,Quarter}BankSwizzleLayout2D`).
    ///
    /// TileLang cuts the tile into atoms of eight rows by one row atom of `chunks` 16-byte chunks
    /// and stores the atoms column-of-atoms outermost: element `(i, j)` of an atom sits at
    /// `i * W + j` with its chunk number XOR-ed with bits of `i % 8`, and atom column `j // W`
    /// starts `rows * W` elements in. TileLang also accepts exactly four rows (a truncated atom
    /// used by Hopper's gather4/scatter4); XOR-ing the flattened offset cannot express that one,
    /// and no gemm operand has four rows, so it is refused here.
    pub fn bank_swizzled(
        rows: i64,
        cols: i64,
        element_bits: u32,
        kind: BankSwizzle,
    ) -> Result<SharedLayout, String> {
        let chunk_elems = chunk_elements(element_bits)?;
        let width = chunk_elems * kind.chunks();
        if rows <= 0 || rows % ATOM_ROWS != 0 {
            return Err(format!(
                "a {}-byte XOR swizzle needs a positive multiple of {ATOM_ROWS} rows, not {rows}",
                width * i64::from(element_bits) / 8
            ));
        }
        if cols <= 0 || cols % width != 0 {
            return Err(format!(
                "a {}-byte XOR swizzle needs rows of a positive multiple of {width} elements of \
                 {element_bits} bits, not {cols}",
                width * i64::from(element_bits) / 8
            ));
        }
        let base = chunk_elems.trailing_zeros();
        let swizzle = Swizzle::new(kind.chunk_bits(), base, 3)?;
        let atom_column_stride = rows.checked_mul(width).ok_or_else(|| too_large(&[rows]))?;
        SharedLayout::new(
            &[rows, cols],
            &[rows, cols / width, width],
            &[width, atom_column_stride, 1],
            Some(swizzle),
            element_bits,
        )
    }

    /// TileLang's float64 gemm layouts (`makeGemmABLayoutF64_Kinner` / `_Kouter`): atoms of four
    /// rows by 16 elements; with K inner the low two bits of the column are XOR-ed with the row,
    /// with K outer bits 2..4 of the column are.
    fn float64_swizzled(rows: i64, cols: i64, k_inner: bool) -> Result<SharedLayout, String> {
        if rows <= 0 || rows % 4 != 0 || cols <= 0 || cols % 16 != 0 {
            return Err(format!(
                "the float64 gemm swizzle needs a multiple of 4 rows and of 16 columns, not \
                 {rows}×{cols}"
            ));
        }
        let swizzle = if k_inner {
            Swizzle::new(2, 0, 4)?
        } else {
            Swizzle::new(2, 2, 2)?
        };
        let atom_column_stride = rows.checked_mul(16).ok_or_else(|| too_large(&[rows]))?;
        SharedLayout::new(
            &[rows, cols],
            &[rows, cols / 16, 16],
            &[16, atom_column_stride, 1],
            Some(swizzle),
            64,
        )
    }

    /// The same layout with identity dimensions in front (TileLang's `Expand`): each leading
    /// index steps over a whole copy of this layout's storage.
    pub fn expand(&self, leading: &[i64]) -> Result<SharedLayout, String> {
        let block = self.storage_size()?;
        if let Some(swizzle) = self.swizzle {
            let period = 1i64 << (swizzle.base + swizzle.shift + swizzle.bits);
            if block % period != 0 {
                return Err(format!(
                    "a layout of {block} elements cannot be stacked under its swizzle, whose \
                     pattern repeats every {period} elements"
                ));
            }
        }
        let mut strides = vec![block; leading.len()];
        for dim in (0..leading.len().saturating_sub(1)).rev() {
            strides[dim] = strides[dim + 1]
                .checked_mul(leading[dim + 1])
                .ok_or_else(|| too_large(leading))?;
        }
        let shape = [leading, &self.shape].concat();
        let modes = [leading, &self.mode_shape].concat();
        let mode_strides = [&strides, &self.mode_strides[..]].concat();
        SharedLayout::new(
            &shape,
            &modes,
            &mode_strides,
            self.swizzle,
            self.element_bits,
        )
    }

    pub fn shape(&self) -> &[i64] {
        &self.shape
    }

    pub fn mode_shape(&self) -> &[i64] {
        &self.mode_shape
    }

    pub fn mode_strides(&self) -> &[i64] {
        &self.mode_strides
    }

    pub fn swizzle(&self) -> Option<Swizzle> {
        self.swizzle
    }

    pub fn element_bits(&self) -> u32 {
        self.element_bits
    }

    /// Elements of the logical tile.
    pub fn size(&self) -> i64 {
        self.shape.iter().product()
    }

    /// The storage offset of `point`, or `None` when it lies outside the shape.
    pub fn offset(&self, point: &[i64]) -> Option<i64> {
        if point.len() != self.shape.len() {
            return None;
        }
        let inside = point
            .iter()
            .zip(&self.shape)
            .all(|(&x, &n)| 0 <= x && x < n);
        if !inside {
            return None;
        }
        let mut offset = 0i64;
        for mode in 0..self.mode_shape.len() {
            let index = point[self.mode_dims[mode]];
            let coordinate = index / self.mode_divisors[mode] % self.mode_shape[mode];
            offset = offset.checked_add(coordinate.checked_mul(self.mode_strides[mode])?)?;
        }
        Some(self.swizzle.map_or(offset, |swizzle| swizzle.apply(offset)))
    }

    /// The storage offset as one arena formula of the index expressions `indices`.
    pub fn offset_expr(&self, arena: &mut ExprArena, indices: &[ExprId]) -> Result<ExprId, String> {
        if indices.len() != self.shape.len() {
            return Err(format!(
                "a {}-dimensional layout was given {} indices",
                self.shape.len(),
                indices.len()
            ));
        }
        let mut offset = arena.int(0);
        for mode in 0..self.mode_shape.len() {
            let coordinate = self.mode_coordinate(arena, indices[self.mode_dims[mode]], mode);
            let stride = arena.int(self.mode_strides[mode]);
            let term = arena.mul(coordinate, stride);
            offset = arena.add(offset, term);
        }
        Ok(match self.swizzle {
            Some(swizzle) => swizzle.to_expr(arena, offset),
            None => offset,
        })
    }

    /// `index // divisor % size` for one mode, without the modulo on the outermost mode of a
    /// dimension (in-range indices never reach it) so that formulas stay short.
    fn mode_coordinate(&self, arena: &mut ExprArena, index: ExprId, mode: usize) -> ExprId {
        let divisor = arena.int(self.mode_divisors[mode]);
        let quotient = arena.floordiv(index, divisor);
        let outermost = self.mode_dims[..mode]
            .iter()
            .all(|&dim| dim != self.mode_dims[mode]);
        if outermost {
            return quotient;
        }
        let size = arena.int(self.mode_shape[mode]);
        arena.floormod(quotient, size)
    }

    /// Calls `visit(ordinal, point, offset)` for every point, row-major; an error when the tile
    /// is too large to enumerate or an offset overflows.
    fn for_each_offset(&self, mut visit: impl FnMut(u64, &[i64], i64)) -> Result<(), String> {
        enumerable(&self.shape)?;
        let mut ordinal = 0u64;
        let mut failed = false;
        for_each_point(&self.shape, |point| {
            let Some(offset) = self.offset(point) else {
                failed = true;
                return false;
            };
            visit(ordinal, point, offset);
            ordinal += 1;
            true
        });
        if failed {
            return Err(format!(
                "an offset of the {} layout overflows",
                self.describe()
            ));
        }
        Ok(())
    }

    /// Elements of storage the layout spans: the largest offset plus one (what TileLang
    /// allocates; more than [`Self::size`] for a padded layout).
    pub fn storage_size(&self) -> Result<i64, String> {
        if self.swizzle.is_none() {
            // Without a swizzle the largest offset is the corner with every mode at its end.
            let corner = self
                .mode_shape
                .iter()
                .zip(&self.mode_strides)
                .try_fold(0i64, |sum, (&size, &stride)| {
                    sum.checked_add((size - 1).checked_mul(stride)?)
                });
            return corner
                .and_then(|corner| corner.checked_add(1))
                .ok_or_else(|| too_large(&self.shape));
        }
        // A swizzle rewrites bits `base..base + bits` from bits at least `shift >= bits` higher,
        // so it permutes every aligned block of 2^(base + bits) offsets. When the offsets before
        // swizzling are exactly `0..size` in whole blocks, so are the ones after.
        if let Some(swizzle) = self.swizzle
            && self.is_dense_unswizzled()
            && self.size() % (1i64 << (swizzle.base + swizzle.bits)) == 0
        {
            return Ok(self.size());
        }
        let mut largest = -1i64;
        self.for_each_offset(|_, _, offset| largest = largest.max(offset))?;
        Ok(largest + 1)
    }

    /// Whether the modes, without the swizzle, place the elements at exactly `0..size`: sorted by
    /// stride, each stride is the product of the smaller modes' sizes (a mixed-radix numbering).
    fn is_dense_unswizzled(&self) -> bool {
        let mut modes: Vec<(i64, i64)> = self
            .mode_strides
            .iter()
            .copied()
            .zip(self.mode_shape.iter().copied())
            .filter(|&(_, size)| size != 1)
            .collect();
        modes.sort_unstable();
        let mut expected = 1i64;
        for (stride, size) in modes {
            if stride != expected {
                return false;
            }
            let Some(next) = expected.checked_mul(size) else {
                return false;
            };
            expected = next;
        }
        true
    }

    /// True when the offsets are exactly `0..size` (each once): the layout permutes storage
    /// without holes, as every swizzle must. Padded layouts are not bijective.
    pub fn is_bijective(&self) -> Result<bool, String> {
        enumerable(&self.shape)?;
        let size = usize::try_from(self.size()).map_err(|_| too_large(&self.shape))?;
        let mut seen = vec![false; size];
        let mut bijective = true;
        self.for_each_offset(|_, _, offset| {
            match usize::try_from(offset).ok().and_then(|o| seen.get_mut(o)) {
                Some(slot) if !*slot => *slot = true,
                _ => bijective = false,
            }
        })?;
        Ok(bijective)
    }

    /// For each storage offset in `0..storage_size`, the row-major number of the point stored
    /// there (`None` for a padding hole); an error when two points share an offset.
    pub fn inverse(&self) -> Result<Vec<Option<u64>>, String> {
        let storage = self.storage_size()?;
        if storage > MAX_STORAGE {
            return Err(format!(
                "the {} layout spans {storage} elements of storage, too many to tabulate",
                self.describe()
            ));
        }
        let storage = usize::try_from(storage).map_err(|_| too_large(&self.shape))?;
        let mut table = vec![None; storage];
        let mut clash = None;
        self.for_each_offset(|ordinal, point, offset| {
            let slot = usize::try_from(offset).ok().and_then(|o| table.get_mut(o));
            match slot {
                Some(slot @ None) => *slot = Some(ordinal),
                _ => {
                    clash.get_or_insert((point.to_vec(), offset));
                }
            }
        })?;
        match clash {
            Some((point, offset)) => Err(format!(
                "the {} layout is not invertible: {point:?} is stored at offset {offset}, which \
                 another element already uses",
                self.describe()
            )),
            None => Ok(table),
        }
    }

    /// True when both layouts have the same shape and store every point at the same offset.
    pub fn equal(&self, other: &SharedLayout) -> Result<bool, String> {
        if self.shape != other.shape {
            return Ok(false);
        }
        let mut equal = true;
        self.for_each_offset(|_, point, offset| {
            equal &= other.offset(point) == Some(offset);
        })?;
        Ok(equal)
    }

    /// The layout in words, e.g. "128-byte XOR swizzle over 8 rows × 64 halfs".
    pub fn describe(&self) -> String {
        let tile = self.describe_shape();
        if let Some(swizzle) = self.swizzle {
            let bytes = swizzle.atom_bytes(self.element_bits);
            return format!("{bytes}-byte XOR swizzle over {tile}");
        }
        if self.is_row_major() {
            return format!("row-major {tile}");
        }
        if let Some(pitch) = self.row_pitch() {
            return format!("row-major {tile}, rows padded to {pitch} elements");
        }
        let mut text = format!("{tile} in modes {:?}", self.mode_shape);
        let _ = write!(text, " with strides {:?}", self.mode_strides);
        text
    }

    /// "8 rows × 64 halfs" (leading dimensions first, plain numbers).
    fn describe_shape(&self) -> String {
        let noun = element_noun(self.element_bits);
        match self.shape.as_slice() {
            [] => "a scalar".to_owned(),
            [cols] => format!("{cols} {noun}"),
            [leading @ .., rows, cols] => {
                let mut text = String::new();
                for extent in leading {
                    let _ = write!(text, "{extent} × ");
                }
                let _ = write!(text, "{rows} rows × {cols} {noun}");
                text
            }
        }
    }

    fn is_row_major(&self) -> bool {
        SharedLayout::row_major(&self.shape, self.element_bits).is_ok_and(|plain| {
            plain.mode_shape == self.mode_shape && plain.mode_strides == self.mode_strides
        })
    }

    /// The pitch of a two-dimensional row-major layout with padded rows.
    pub(super) fn row_pitch(&self) -> Option<i64> {
        match (
            self.shape.as_slice(),
            self.mode_shape.as_slice(),
            self.mode_strides.as_slice(),
        ) {
            ([rows, cols], [mode_rows, mode_cols], [pitch, 1])
                if rows == mode_rows && cols == mode_cols && pitch > cols =>
            {
                Some(*pitch)
            }
            _ => None,
        }
    }

    /// Which of TileLang's bank swizzles this layout is, compared as functions with the
    /// canonical layout of its shape (leading dimensions expanded), as TileLang's
    /// `DetectSwizzleMode` compares structurally.
    pub fn bank_swizzle(&self) -> Option<BankSwizzle> {
        let [leading @ .., rows, cols] = self.shape.as_slice() else {
            return None;
        };
        [BankSwizzle::Quarter, BankSwizzle::Half, BankSwizzle::Full]
            .into_iter()
            .find(|&kind| {
                SharedLayout::bank_swizzled(*rows, *cols, self.element_bits, kind)
                    .and_then(|canonical| canonical.expand(leading))
                    .and_then(|canonical| canonical.equal(self))
                    .unwrap_or(false)
            })
    }
}

/// The layout TileLang gives a shared-memory gemm operand of `rows × cols` elements (the last
/// dimension contiguous) on the `mma.sync` path, `MakeSwizzledLayout` with padding allowed.
///
/// float64 gets its own four-row swizzles when the columns are a multiple of 16; int8 with K
/// outer is padded; otherwise the widest bank swizzle whose row atom divides the row is used
/// (128, 64, then 32 bytes), and a row narrower than two chunks is padded. TileLang's gemm always
/// passes `k_inner = true`, so the int8 and float64 K-outer cases only arise through an explicit
/// `make_swizzled_layout(buf, k_major=False)`. Where TileLang would stop with an internal check
/// (a swizzle over a row count that is not a multiple of 8, which no gemm tile has), this falls
/// back to the padded layout.
pub fn gemm_operand_layout(
    rows: i64,
    cols: i64,
    element_bits: u32,
    k_inner: bool,
) -> Result<SharedLayout, String> {
    chunk_elements(element_bits)?;
    if element_bits == 64 {
        return SharedLayout::float64_swizzled(rows, cols, k_inner)
            .or_else(|_| SharedLayout::padded(rows, cols, element_bits));
    }
    if !k_inner && element_bits == 8 {
        return SharedLayout::padded(rows, cols, element_bits);
    }
    widest_bank_swizzle(rows, cols, element_bits)
        .map_or_else(|| SharedLayout::padded(rows, cols, element_bits), Ok)
}

/// The widest of TileLang's bank swizzles (full, half, quarter) that a `rows × cols` tile allows.
pub fn widest_bank_swizzle(rows: i64, cols: i64, element_bits: u32) -> Option<SharedLayout> {
    [BankSwizzle::Full, BankSwizzle::Half, BankSwizzle::Quarter]
        .into_iter()
        .find_map(|kind| SharedLayout::bank_swizzled(rows, cols, element_bits, kind).ok())
}

/// TileLang's `MergeSwizzleLayouts`: two bank swizzles of the same tile merge into the one of
/// smaller granularity (which every access pattern of either tolerates); anything else does not
/// merge.
pub fn merge_swizzles(first: &SharedLayout, second: &SharedLayout) -> Option<SharedLayout> {
    if first.shape != second.shape || first.element_bits != second.element_bits {
        return None;
    }
    let kind = first.bank_swizzle()?.min(second.bank_swizzle()?);
    let [leading @ .., rows, cols] = first.shape.as_slice() else {
        return None;
    };
    SharedLayout::bank_swizzled(*rows, *cols, first.element_bits, kind)
        .and_then(|merged| merged.expand(leading))
        .ok()
}

/// Elements in one 16-byte chunk; element widths must divide 128 bits.
fn chunk_elements(element_bits: u32) -> Result<i64, String> {
    if element_bits == 0 || !element_bits.is_power_of_two() || element_bits > 64 {
        return Err(format!(
            "a swizzled layout needs elements of 1 to 64 bits, a power of two, not {element_bits} \
             bits"
        ));
    }
    Ok(i64::from(CHUNK_BITS / element_bits))
}

/// Rejects parts that are not a layout: empty or non-positive extents, mismatched mode lists,
/// negative strides.
fn check_parts(
    shape: &[i64],
    mode_shape: &[i64],
    mode_strides: &[i64],
    element_bits: u32,
) -> Result<(), String> {
    if shape.is_empty() || shape.iter().any(|&n| n <= 0) {
        return Err(format!("a layout needs positive extents, not {shape:?}"));
    }
    if mode_shape.len() != mode_strides.len() {
        return Err(format!(
            "{} modes were given {} strides",
            mode_shape.len(),
            mode_strides.len()
        ));
    }
    if mode_shape.iter().any(|&n| n <= 0) || mode_strides.iter().any(|&s| s < 0) {
        return Err(format!(
            "modes need positive sizes and non-negative strides, not {mode_shape:?} with \
             {mode_strides:?}"
        ));
    }
    if element_bits == 0 {
        return Err("elements need a positive width".to_owned());
    }
    Ok(())
}

/// The dimension each mode splits: modes fill the dimensions in order, a dimension being full
/// when its modes multiply to its extent.
fn assign_modes(shape: &[i64], mode_shape: &[i64]) -> Result<Vec<usize>, String> {
    let mismatch = || format!("the modes {mode_shape:?} do not split the shape {shape:?}");
    let mut dims = Vec::with_capacity(mode_shape.len());
    let (mut dim, mut filled) = (0usize, 1i64);
    for &size in mode_shape {
        if size > 1 {
            while dim < shape.len() && filled == shape[dim] {
                (dim, filled) = (dim + 1, 1);
            }
        }
        let extent = *shape.get(dim).ok_or_else(mismatch)?;
        filled = filled.checked_mul(size).ok_or_else(mismatch)?;
        if extent % filled != 0 {
            return Err(mismatch());
        }
        dims.push(dim);
    }
    let rest_full = shape
        .get(dim + 1..)
        .is_some_and(|rest| rest.iter().all(|&n| n == 1));
    if filled != shape[dim] || !rest_full {
        return Err(mismatch());
    }
    Ok(dims)
}

/// For each mode, the product of the sizes of the later modes of the same dimension.
fn mode_divisors(mode_shape: &[i64], mode_dims: &[usize]) -> Vec<i64> {
    let dims = mode_dims.iter().max().map_or(0, |&d| d + 1);
    let mut inner = vec![1i64; dims];
    let mut divisors = vec![1i64; mode_shape.len()];
    for mode in (0..mode_shape.len()).rev() {
        let dim = mode_dims[mode];
        divisors[mode] = inner[dim];
        // The modes of a dimension multiply to its extent, which fits an i64.
        inner[dim] = inner[dim].saturating_mul(mode_shape[mode]);
    }
    divisors
}

/// An error unless the tile has at most [`MAX_POINTS`] points.
pub(super) fn enumerable(shape: &[i64]) -> Result<(), String> {
    let total = shape.iter().try_fold(1u64, |acc, &extent| {
        acc.checked_mul(u64::try_from(extent).ok()?)
    });
    match total {
        Some(total) if total <= MAX_POINTS => Ok(()),
        _ => Err(too_large(shape)),
    }
}

fn too_large(shape: &[i64]) -> String {
    format!("a layout over {shape:?} is too large to enumerate (more than {MAX_POINTS} elements)")
}

/// What to call elements of a width in a description.
fn element_noun(bits: u32) -> String {
    match bits {
        8 => "bytes".to_owned(),
        16 => "halfs".to_owned(),
        _ => format!("{bits}-bit elements"),
    }
}

#[cfg(test)]
mod tests {
    use tilec_ir::ExprArena;

    use super::{BankSwizzle, SharedLayout, Swizzle, gemm_operand_layout, merge_swizzles};
    use crate::layout::fragment::points;

    /// TileLang's `Make{Full,Half,Quarter}BankSwizzleLayout2D`, transcribed: output coordinates
    /// `(tc, ts, index)` over the output shape `(cols / W, rows / 8, 8 * W)`, flattened row-major
    /// as TileLang allocates the buffer.
    fn tilelang_bank_swizzle(i: i64, j: i64, rows: i64, bits: i64, chunks: i64) -> i64 {
        let vector = 128 / bits;
        let (ts, s) = (i / 8, i % 8);
        let (tc, c, v) = (j / vector / chunks, j / vector % chunks, j % vector);
        let swizzled = c ^ (s / (8 / chunks));
        let index = v + (swizzled + s * chunks) * vector;
        (tc * (rows / 8) + ts) * (8 * chunks * vector) + index
    }

    /// Checks `offset` and the arena formula against `expected` at every point.
    fn assert_offsets(layout: &SharedLayout, expected: impl Fn(&[i64]) -> i64) {
        let mut arena = ExprArena::new();
        let vars: Vec<_> = layout
            .shape()
            .iter()
            .map(|&n| arena.var("x", Some(n)))
            .collect();
        let indices: Vec<_> = vars.iter().map(|&v| arena.var_expr(v)).collect();
        let formula = layout.offset_expr(&mut arena, &indices).expect("formula");
        for point in points(layout.shape()) {
            let want = expected(&point);
            assert_eq!(layout.offset(&point), Some(want), "offset of {point:?}");
            let env = |var| vars.iter().position(|&v| v == var).map(|d| point[d]);
            assert_eq!(
                arena.eval(formula, &env),
                Some(want),
                "formula at {point:?}"
            );
        }
    }

    #[test]
    fn full_bank_swizzle_of_8x64_halfs_matches_hand_computed_points() {
        // 8 chunks of 8 halfs per row; chunk c of row r moves to chunk c ^ r.
        let layout = SharedLayout::full_bank(8, 64, 16).expect("full bank");
        assert_eq!(layout.offset(&[0, 0]), Some(0));
        assert_eq!(layout.offset(&[1, 0]), Some(72)); // chunk 0 ^ 1 = 1: 64 + 8
        assert_eq!(layout.offset(&[3, 17]), Some(201)); // chunk 2 ^ 3 = 1: 192 + 8 + 1
        assert_eq!(layout.offset(&[5, 42]), Some(322)); // chunk 5 ^ 5 = 0: 320 + 2
        assert_eq!(layout.offset(&[6, 9]), Some(441)); // chunk 1 ^ 6 = 7: 384 + 56 + 1
        assert_eq!(layout.offset(&[7, 63]), Some(455)); // chunk 7 ^ 7 = 0: 448 + 7
        assert_eq!(layout.offset(&[8, 0]), None);
        assert_eq!(
            layout.describe(),
            "128-byte XOR swizzle over 8 rows × 64 halfs"
        );
        assert_offsets(&layout, |p| tilelang_bank_swizzle(p[0], p[1], 8, 16, 8));
    }

    #[test]
    fn bank_swizzles_match_tilelang_formulas_everywhere() {
        let cases = [
            (BankSwizzle::Full, 64, 128, 16, 8),
            (BankSwizzle::Full, 16, 32, 32, 8),
            (BankSwizzle::Full, 32, 256, 8, 8),
            (BankSwizzle::Half, 32, 32, 16, 4),
            (BankSwizzle::Half, 64, 96, 16, 4),
            (BankSwizzle::Quarter, 24, 16, 16, 2),
            (BankSwizzle::Quarter, 16, 32, 8, 2),
        ];
        for (kind, rows, cols, bits, chunks) in cases {
            let layout = SharedLayout::bank_swizzled(rows, cols, bits, kind).expect("swizzle");
            assert_offsets(&layout, |p| {
                tilelang_bank_swizzle(p[0], p[1], rows, i64::from(bits), chunks)
            });
            assert_eq!(layout.is_bijective(), Ok(true), "{}", layout.describe());
            assert_eq!(layout.storage_size(), Ok(rows * cols));
            assert_eq!(layout.bank_swizzle(), Some(kind));
        }
        // A hand-computed point of a two-atom-wide tile: (9, 70) is in atom column 1, atom row 1,
        // row 1 of its atom, chunk 0 ^ 1.
        let wide = SharedLayout::full_bank(64, 128, 16).expect("full bank");
        assert_eq!(wide.offset(&[9, 70]), Some((8 + 1) * 512 + 64 + 8 + 6));
        let half = SharedLayout::half_bank(8, 32, 16).expect("half bank");
        assert_eq!(half.offset(&[3, 9]), Some(97)); // chunk 1 ^ (3 / 2) = 0
        let quarter = SharedLayout::quarter_bank(8, 16, 16).expect("quarter bank");
        assert_eq!(quarter.offset(&[5, 3]), Some(91)); // chunk 0 ^ (5 / 4) = 1
    }

    #[test]
    fn swizzle_applies_cute_semantics() {
        let swizzle = Swizzle::new(3, 3, 3).expect("swizzle");
        assert_eq!(swizzle.apply(64), 72);
        assert_eq!(swizzle.apply(swizzle.apply(1234)), 1234);
        assert_eq!(swizzle.atom_bytes(16), 128);
        assert!(Swizzle::new(3, 3, 2).is_err());
        assert!(Swizzle::new(0, 3, 3).is_err());
        assert!(Swizzle::new(30, 20, 30).is_err());
    }

    #[test]
    fn seed_002_mode_example() {
        // Shape (64, 32) split into modes (8, 8, 16, 2) with strides (256, 2, 16, 1).
        let layout =
            SharedLayout::new(&[64, 32], &[8, 8, 16, 2], &[256, 2, 16, 1], None, 16).expect("new");
        assert_eq!(layout.offset(&[9, 5]), Some(256 + 2 + 32 + 1));
        assert_offsets(&layout, |p| {
            p[0] / 8 * 256 + p[0] % 8 * 2 + p[1] / 2 * 16 + p[1] % 2
        });
        assert_eq!(layout.is_bijective(), Ok(true));
        assert_eq!(
            layout.describe(),
            "64 rows × 32 halfs in modes [8, 8, 16, 2] with strides [256, 2, 16, 1]"
        );
        let row_major = SharedLayout::row_major(&[64, 32], 16).expect("row major");
        assert_eq!(layout.equal(&row_major), Ok(false));
        let same = SharedLayout::new(&[64, 32], &[64, 32], &[32, 1], None, 16).expect("new");
        assert_eq!(row_major.equal(&same), Ok(true));
    }

    #[test]
    fn malformed_layouts_are_refused() {
        assert!(SharedLayout::new(&[64, 32], &[8, 8, 16], &[256, 2, 16], None, 16).is_err());
        assert!(SharedLayout::new(&[64, 32], &[8, 8, 32], &[1, 2], None, 16).is_err());
        assert!(SharedLayout::new(&[64, 32], &[64, 32], &[-1, 1], None, 16).is_err());
        assert!(SharedLayout::new(&[0, 32], &[32], &[1], None, 16).is_err());
        // Modes of size 1 may sit anywhere; extent-1 dimensions need no mode.
        assert!(SharedLayout::new(&[1, 4, 1], &[1, 4, 1], &[0, 1, 0], None, 16).is_ok());
        assert!(SharedLayout::new(&[1, 4], &[4], &[1], None, 16).is_ok());
        assert!(SharedLayout::full_bank(12, 64, 16).is_err());
        assert!(SharedLayout::full_bank(8, 32, 16).is_err());
        assert!(SharedLayout::full_bank(8, 64, 12).is_err());
        assert!(SharedLayout::with_row_pitch(8, 64, 32, 16).is_err());
    }

    #[test]
    fn gemm_operands_get_tilelangs_swizzle_granularity() {
        let pick = |rows, cols, bits, k_inner| {
            gemm_operand_layout(rows, cols, bits, k_inner)
                .expect("layout")
                .describe()
        };
        // 64 halfs = 128 bytes per row: full bank; 32 halfs: half; 16 halfs: quarter.
        assert_eq!(
            pick(128, 64, 16, true),
            "128-byte XOR swizzle over 128 rows × 64 halfs"
        );
        assert_eq!(
            pick(64, 32, 16, true),
            "64-byte XOR swizzle over 64 rows × 32 halfs"
        );
        assert_eq!(
            pick(64, 16, 16, true),
            "32-byte XOR swizzle over 64 rows × 16 halfs"
        );
        assert_eq!(
            pick(32, 32, 32, true),
            "128-byte XOR swizzle over 32 rows × 32 32-bit elements"
        );
        assert_eq!(
            pick(64, 32, 8, true),
            "32-byte XOR swizzle over 64 rows × 32 bytes"
        );
        // Six chunks a row: only pairs of chunks divide it.
        assert_eq!(
            pick(64, 48, 16, true),
            "32-byte XOR swizzle over 64 rows × 48 halfs"
        );
        // An odd number of chunks cannot be swizzled, and is padded only when a row is whole
        // 32-byte sectors, which it is not.
        assert_eq!(pick(64, 8, 16, true), "row-major 64 rows × 8 halfs");
        assert_eq!(pick(64, 40, 16, true), "row-major 64 rows × 40 halfs");
        // int8 with K outer is padded.
        assert_eq!(
            pick(64, 32, 8, false),
            "row-major 64 rows × 32 bytes, rows padded to 48 elements"
        );
        // Rows not a multiple of 8 (TileLang stops there) fall back to padding.
        assert_eq!(
            pick(12, 64, 16, true),
            "row-major 12 rows × 64 halfs, rows padded to 72 elements"
        );
        assert!(gemm_operand_layout(64, 64, 12, true).is_err());
    }

    #[test]
    fn float64_operands_use_four_row_swizzles() {
        let k_inner = gemm_operand_layout(16, 16, 64, true).expect("k inner");
        let k_outer = gemm_operand_layout(16, 32, 64, false).expect("k outer");
        // makeGemmABLayoutF64_Kinner: index = c // 4 * 4 + (c % 4 ^ s) + s * 16 in atoms of
        // 4 rows × 16; K outer XORs c // 4 instead.
        let tilelang = |i: i64, j: i64, rows: i64, inner: bool| {
            let (tc, ts, c, s) = (j / 16, i / 4, j % 16, i % 4);
            let swizzled = if inner {
                c / 4 * 4 + ((c % 4) ^ s)
            } else {
                c % 4 + ((c / 4) ^ s) * 4
            };
            (tc * (rows / 4) + ts) * 64 + swizzled + s * 16
        };
        assert_offsets(&k_inner, |p| tilelang(p[0], p[1], 16, true));
        assert_offsets(&k_outer, |p| tilelang(p[0], p[1], 16, false));
        assert_eq!(k_inner.is_bijective(), Ok(true));
        assert_eq!(k_outer.is_bijective(), Ok(true));
        // Not a multiple of 16 columns: padded.
        assert_eq!(
            gemm_operand_layout(16, 8, 64, true).map(|l| l.describe()),
            Ok("row-major 16 rows × 8 64-bit elements, rows padded to 10 elements".to_owned())
        );
    }

    #[test]
    fn padded_layouts_are_injective_with_holes() {
        let padded = SharedLayout::padded(4, 16, 16).expect("padded");
        assert_eq!(padded.offset(&[1, 0]), Some(24));
        assert_eq!(padded.storage_size(), Ok(3 * 24 + 16));
        assert_eq!(padded.is_bijective(), Ok(false));
        let table = padded.inverse().expect("inverse");
        assert_eq!(table.len(), 88);
        assert_eq!(table.iter().filter(|slot| slot.is_none()).count(), 24);
        assert_eq!(table[24], Some(16));
    }

    #[test]
    fn inverse_round_trips_every_swizzle() {
        let layout = SharedLayout::half_bank(32, 64, 16).expect("half bank");
        let table = layout.inverse().expect("inverse");
        let all = points(layout.shape());
        assert_eq!(table.len(), all.len());
        for (ordinal, point) in all.iter().enumerate() {
            let offset = layout.offset(point).expect("offset");
            let slot = usize::try_from(offset).expect("non-negative");
            assert_eq!(table[slot], Some(ordinal as u64));
        }
        let clashing = SharedLayout::new(&[4, 4], &[4, 4], &[1, 1], None, 16).expect("new");
        assert!(clashing.inverse().is_err());
        assert_eq!(clashing.is_bijective(), Ok(false));
    }

    #[test]
    fn expanded_layouts_stack_copies() {
        let base = SharedLayout::full_bank(8, 64, 16).expect("full bank");
        let staged = base.expand(&[3]).expect("expand");
        assert_eq!(staged.shape(), &[3, 8, 64]);
        assert_eq!(staged.offset(&[2, 1, 0]), Some(2 * 512 + 72));
        assert_eq!(staged.is_bijective(), Ok(true));
        assert_eq!(staged.bank_swizzle(), Some(BankSwizzle::Full));
        assert_eq!(
            staged.describe(),
            "128-byte XOR swizzle over 3 × 8 rows × 64 halfs"
        );
    }

    #[test]
    fn merging_swizzles_keeps_the_smaller_granularity() {
        let full = SharedLayout::full_bank(64, 64, 16).expect("full");
        let half = SharedLayout::half_bank(64, 64, 16).expect("half");
        let quarter = SharedLayout::quarter_bank(64, 64, 16).expect("quarter");
        assert_eq!(merge_swizzles(&full, &half), Some(half.clone()));
        assert_eq!(merge_swizzles(&quarter, &full), Some(quarter.clone()));
        assert_eq!(merge_swizzles(&full, &full), Some(full.clone()));
        let padded = SharedLayout::padded(64, 64, 16).expect("padded");
        assert_eq!(merge_swizzles(&full, &padded), None);
        let other = SharedLayout::full_bank(32, 64, 16).expect("full");
        assert_eq!(merge_swizzles(&full, &other), None);
        let staged_full = full.expand(&[2]).expect("expand");
        let staged_half = half.expand(&[2]).expect("expand");
        assert_eq!(
            merge_swizzles(&staged_full, &staged_half),
            Some(staged_half)
        );
    }
}
