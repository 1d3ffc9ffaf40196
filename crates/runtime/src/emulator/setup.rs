//! Checks a program and its arguments before anything runs, and evaluates the declarations.
//!
//! Everything that does not change while blocks run is settled here: the scalar parameters are bound,
//! every buffer's element count is evaluated, shared buffers are checked to lie inside the shared
//! arena and tensors to match their parameters, the value arena is checked to refer only
//! backwards (so evaluating a value always terminates), and the TMA tensor maps are evaluated and
//! checked against what `cuTensorMapEncodeTiled` accepts.

use tilec_ir::thread::{BufferDecl, Memory as MemoryKind, TensorMap, Value};
use tilec_ir::{ExprId, ThreadProgram, VarId};

use super::error::{EmulatorError, ErrorKind, Fault, IndexFault};
use super::index::{Binding, Env, Indexer, UniformFault};
use super::index_i64;
use super::memory::{BufferInfo, Place};
use super::tma::MapInfo;
use crate::tensor::{HostTensor, element_bytes};

/// CUDA's limit on threads per block.
const MAX_THREADS: i64 = 1024;
/// More shared memory than any GPU has; larger declarations are mistakes, refused before allocating.
const MAX_SHARED_BYTES: i64 = 1 << 24;
/// Local elements over all buffers and threads of a block that the emulator allocates at most.
const MAX_LOCAL_ELEMENTS: usize = 1 << 24;
/// The blocks a persistent program is emulated on: few, and prime, so that small launches already
/// give blocks different numbers of rounds, each carrying its pipeline's barrier phases into the
/// next tile.
pub(super) const EMULATED_MULTIPROCESSORS: u32 = 3;

/// What the run needs from the declarations.
#[derive(Debug)]
pub(super) struct Setup<'p> {
    pub buffers: Vec<BufferInfo<'p>>,
    pub threads: usize,
    /// The blocks to run: the grid's, or a persistent program's [`EMULATED_MULTIPROCESSORS`].
    pub grid: [u32; 3],
    pub shared_bytes: usize,
    /// Scalars and the thread index bound; block indices are bound per block.
    pub env: Env,
    /// Per parameter, the shape to report unwritten elements in.
    pub shapes: Vec<Vec<i64>>,
    /// The tensor maps, evaluated.
    pub maps: Vec<MapInfo>,
}

/// Counts of the storage slots handed out so far: shared buffers, local buffers, and local elements
/// per thread.
#[derive(Clone, Copy, Debug, Default)]
struct Slots {
    shared: usize,
    local: usize,
    local_elements: usize,
}

pub(super) fn prepare<'p>(
    program: &'p ThreadProgram,
    tensors: &[HostTensor],
    scalars: &[i64],
    indexer: &mut Indexer<'p>,
) -> Result<Setup<'p>, Fault> {
    check_values(program)?;
    let env = bind_scalars(program, scalars)?;
    let threads = check_block(program)?;
    let mut grid = [0; 3];
    for (extent, &e) in grid.iter_mut().zip(&program.grid) {
        let value = uniform(indexer, &env, e, "grid extent")?;
        // CUDA allows up to 2^31 - 1 blocks in x and 65535 in y and z; 2^31 - 1 bounds them all.
        *extent = u32::try_from(value)
            .ok()
            .filter(|&blocks| blocks <= i32::MAX as u32)
            .ok_or_else(|| EmulatorError::malformed(format!("grid extent {value} out of range")))?;
    }
    let grid = program.launch_blocks(grid, EMULATED_MULTIPROCESSORS);
    let shared_bytes = usize::try_from(program.shared_bytes)
        .ok()
        .filter(|&bytes| index_i64(bytes) <= MAX_SHARED_BYTES)
        .ok_or_else(|| {
            EmulatorError::malformed(format!(
                "shared_bytes {} out of range",
                program.shared_bytes
            ))
        })?;
    let mut buffers = Vec::with_capacity(program.buffers.len());
    let mut slots = Slots::default();
    for (id, decl) in program.buffers.iter().enumerate() {
        let info = buffer_info(program, indexer, &env, id, decl, &mut slots, shared_bytes)?;
        buffers.push(info);
    }
    if slots.local_elements.saturating_mul(threads) > MAX_LOCAL_ELEMENTS {
        return Err(EmulatorError::malformed(
            "local buffers too large to emulate",
        ));
    }
    let shapes = check_tensors(program, tensors, &buffers, indexer, &env)?;
    let maps = program
        .tensor_maps
        .iter()
        .map(|map| map_info(program, &buffers, indexer, &env, map))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Setup {
        buffers,
        threads,
        grid,
        shared_bytes,
        env,
        shapes,
        maps,
    })
}

/// Checks that every value refers only to earlier values, so that evaluation terminates.
fn check_values(program: &ThreadProgram) -> Result<(), Fault> {
    for (index, value) in program.values.iter().enumerate() {
        for operand in value.operands() {
            if operand.index() >= index {
                return Err(EmulatorError::malformed(format!(
                    "value {index} refers to value {}, which is not an earlier one",
                    operand.index()
                )));
            }
        }
        if let Value::ShuffleXor { mask, .. } = value
            && *mask >= 32
        {
            return Err(EmulatorError::malformed(format!(
                "shuffle mask {mask} is not a lane mask"
            )));
        }
    }
    Ok(())
}

fn check_var(program: &ThreadProgram, var: VarId) -> Result<usize, Fault> {
    let index = var.index();
    if index < program.exprs.num_vars() {
        Ok(index)
    } else {
        Err(EmulatorError::malformed(format!(
            "variable id {index} out of range"
        )))
    }
}

/// The environment with the scalar parameters and the thread index bound.
fn bind_scalars(program: &ThreadProgram, scalars: &[i64]) -> Result<Env, Fault> {
    if scalars.len() != program.scalars.len() {
        let message = format!(
            "{} scalar(s) expected, {} given",
            program.scalars.len(),
            scalars.len()
        );
        return Err(EmulatorError::argument(&program.name, message));
    }
    let mut env = Env::new(program.exprs.num_vars());
    for (param, &value) in program.scalars.iter().zip(scalars) {
        let index = check_var(program, param.var)?;
        env.vars[index] = Binding::Uniform(value);
    }
    let thread = check_var(program, program.thread)?;
    env.vars[thread] = Binding::Thread;
    for &var in &program.block_index {
        check_var(program, var)?;
    }
    if let Some(persistent) = program.persistent {
        check_var(program, persistent.block)?;
        check_var(program, persistent.blocks)?;
    }
    Ok(env)
}

/// The number of threads per block.
fn check_block(program: &ThreadProgram) -> Result<usize, Fault> {
    let [x, y, z] = program.block;
    let threads = x.checked_mul(y).and_then(|xy| xy.checked_mul(z));
    match threads {
        // The count was just checked to lie in `1..=MAX_THREADS`.
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        Some(threads) if x >= 1 && y >= 1 && z >= 1 && threads <= MAX_THREADS => {
            Ok(threads as usize)
        }
        _ => Err(EmulatorError::malformed(format!(
            "block shape [{x}, {y}, {z}] is not a valid CUDA block"
        ))),
    }
}

/// Evaluates a declaration's expression, which may only read scalar parameters.
fn uniform(indexer: &mut Indexer<'_>, env: &Env, e: ExprId, what: &str) -> Result<i64, Fault> {
    indexer.eval_uniform(env, e).map_err(|fault| {
        let fault = match fault {
            UniformFault::Fault(fault) => fault,
            UniformFault::ThreadDependent => IndexFault::Unbound("the thread index".to_owned()),
            UniformFault::BadId => {
                return EmulatorError::malformed(format!("{what}: expression id out of range"));
            }
        };
        Box::new(EmulatorError::new(ErrorKind::IndexFault {
            buffer: Some(what.to_owned()),
            fault,
        }))
    })
}

fn buffer_info<'p>(
    program: &ThreadProgram,
    indexer: &mut Indexer<'_>,
    env: &Env,
    id: usize,
    decl: &'p BufferDecl,
    slots: &mut Slots,
    shared_bytes: usize,
) -> Result<BufferInfo<'p>, Fault> {
    let count = uniform(indexer, env, decl.elements, &decl.name)?;
    let elements = usize::try_from(count).map_err(|_| {
        EmulatorError::malformed(format!("buffer `{}` has {count} elements", decl.name))
    })?;
    let size = element_bytes(decl.dtype);
    let place = match decl.memory {
        MemoryKind::Global { param } => {
            if program.params.get(param).map(|p| p.buffer.index()) != Some(id) {
                return Err(EmulatorError::malformed(format!(
                    "global buffer `{}` names parameter {param}, which is not its parameter",
                    decl.name
                )));
            }
            Place::Global { param }
        }
        MemoryKind::Shared { offset } => {
            let start = usize::try_from(offset).ok();
            let stored = u64::try_from(elements)
                .ok()
                .map(|count| decl.dtype.storage_bytes(count))
                .and_then(|bytes| usize::try_from(bytes).ok());
            let end = start.and_then(|start| stored.and_then(|bytes| bytes.checked_add(start)));
            let start = start.filter(|start| {
                start.is_multiple_of(size) && end.is_some_and(|end| end <= shared_bytes)
            });
            let Some(start) = start else {
                return Err(EmulatorError::malformed(format!(
                    "shared buffer `{}` ({elements} × {size} bytes at offset {offset}) is misaligned or outside \
                     the {shared_bytes}-byte shared arena",
                    decl.name
                )));
            };
            slots.shared += 1;
            Place::Shared {
                offset: start,
                slot: slots.shared - 1,
            }
        }
        MemoryKind::Local => {
            slots.local += 1;
            slots.local_elements = slots.local_elements.saturating_add(elements);
            Place::Local {
                slot: slots.local - 1,
            }
        }
    };
    Ok(BufferInfo {
        name: &decl.name,
        dtype: decl.dtype,
        place,
        elements,
        size,
    })
}

/// Checks every tensor against its parameter; returns the shapes to report elements in.
fn check_tensors(
    program: &ThreadProgram,
    tensors: &[HostTensor],
    buffers: &[BufferInfo<'_>],
    indexer: &mut Indexer<'_>,
    env: &Env,
) -> Result<Vec<Vec<i64>>, Fault> {
    if tensors.len() != program.params.len() {
        let message = format!(
            "{} tensor(s) expected, {} given",
            program.params.len(),
            tensors.len()
        );
        return Err(EmulatorError::argument(&program.name, message));
    }
    let mut shapes = Vec::with_capacity(tensors.len());
    for (param, tensor) in program.params.iter().zip(tensors) {
        let info = buffers.get(param.buffer.index()).ok_or_else(|| {
            EmulatorError::malformed(format!("parameter `{}` has no buffer", param.name))
        })?;
        if tensor.dtype != info.dtype {
            let message = format!("dtype {} expected, {} given", info.dtype, tensor.dtype);
            return Err(EmulatorError::argument(&param.name, message));
        }
        if tensor.values.len() != tensor.shape.iter().product::<usize>()
            || tensor.values.len() != info.elements
        {
            let message = format!(
                "{} element(s) expected, a tensor of shape {:?} with {} value(s) given",
                info.elements,
                tensor.shape,
                tensor.values.len()
            );
            return Err(EmulatorError::argument(&param.name, message));
        }
        let decl = program.buffer(param.buffer);
        shapes.push(declared_shape(indexer, env, decl, tensor));
    }
    Ok(shapes)
}

/// The declared shape when it evaluates and matches the tensor's size, else the tensor's shape.
fn declared_shape(
    indexer: &mut Indexer<'_>,
    env: &Env,
    decl: &BufferDecl,
    tensor: &HostTensor,
) -> Vec<i64> {
    let declared: Option<Vec<i64>> = decl
        .shape
        .iter()
        .map(|&e| indexer.eval_uniform(env, e).ok())
        .collect();
    let matches = |shape: &Vec<i64>| {
        shape.iter().try_fold(1i64, |n, &d| n.checked_mul(d)) == Some(index_i64(tensor.len()))
    };
    match declared {
        Some(shape) if matches(&shape) => shape,
        _ => tensor.shape.iter().map(|&d| index_i64(d)).collect(),
    }
}

/// A tensor map evaluated for this run. The encoding's limits are checked here, as the host's
/// `cuTensorMapEncodeTiled` would refuse the map; global byte strides depend on the run's scalars,
/// so a bad one is an argument error.
fn map_info(
    program: &ThreadProgram,
    buffers: &[BufferInfo<'_>],
    indexer: &mut Indexer<'_>,
    env: &Env,
    map: &TensorMap,
) -> Result<MapInfo, Fault> {
    let malformed =
        |what: &str| EmulatorError::malformed(format!("tensor map `{}`: {what}", map.name));
    let decl = program
        .buffers
        .get(map.buffer.index())
        .filter(|decl| matches!(decl.memory, MemoryKind::Global { .. }))
        .ok_or_else(|| malformed("its buffer is not a tensor parameter"))?;
    let info = buffers
        .get(map.buffer.index())
        .ok_or_else(|| malformed("its buffer is missing"))?;
    let size = index_i64(info.size);
    let box_dims = check_box(map, decl.shape.len(), size, program.shared_bytes)
        .map_err(|what| malformed(&what))?;
    let mut dims = Vec::with_capacity(decl.shape.len());
    for &extent in decl.shape.iter().rev() {
        dims.push(uniform(indexer, env, extent, &decl.name)?);
    }
    let strides = element_strides(&map.name, &dims, size)?;
    Ok(MapInfo {
        buffer: map.buffer.index(),
        dims,
        strides,
        box_dims,
        swizzle: map.swizzle,
    })
}

/// The box of a map over a tensor of rank `rank` and elements of `size` bytes, checked: a rank of
/// 1 to 5, box dimensions of 1 to 256, an inner row of a multiple of 16 bytes and at most the
/// swizzle span, and a box that fits in the block's shared memory.
fn check_box(map: &TensorMap, rank: usize, size: i64, shared: i64) -> Result<Vec<i64>, String> {
    if !(1..=5).contains(&rank) || map.box_dims.len() != rank {
        return Err("the box and the tensor must have the same rank, 1 to 5".to_owned());
    }
    let box_dims: Vec<i64> = map.box_dims.iter().map(|&d| i64::from(d)).collect();
    if box_dims.iter().any(|d| !(1..=256).contains(d)) {
        return Err("box dimensions must be 1 to 256".to_owned());
    }
    let row = box_dims.first().copied().unwrap_or(0) * size;
    let span = map.swizzle.map_or(i64::MAX, |swizzle| swizzle.row_bytes());
    if row % 16 != 0 || row > span {
        return Err(format!(
            "an inner box row of {row} bytes, not a multiple of 16 within the swizzle span"
        ));
    }
    if box_dims.iter().product::<i64>() * size > shared {
        return Err("a box does not fit in the block's shared memory".to_owned());
    }
    Ok(box_dims)
}

/// The element stride of each dimension (innermost first) of a tensor with dimensions `dims`,
/// checking that every dimension is positive and every outer byte stride a multiple of 16.
fn element_strides(name: &str, dims: &[i64], size: i64) -> Result<Vec<i64>, Fault> {
    let mut strides = Vec::with_capacity(dims.len());
    let mut stride = 1i64;
    for (d, &extent) in dims.iter().enumerate() {
        if d > 0 && stride.checked_mul(size).is_none_or(|bytes| bytes % 16 != 0) {
            let message = format!(
                "the byte stride of dimension {d} (innermost first) is {} bytes, not a multiple of 16",
                stride.saturating_mul(size)
            );
            return Err(EmulatorError::argument(name, message));
        }
        if extent < 1 {
            let message = format!("dimension {d} (innermost first) is {extent}");
            return Err(EmulatorError::argument(name, message));
        }
        strides.push(stride);
        stride = stride.saturating_mul(extent);
    }
    Ok(strides)
}
