//! The tensors of a launch: shapes evaluated for the launch's scalar parameters, inputs filled with
//! seeded random values, outputs zeroed (the emulator poisons write-only ones itself).

use std::time::Instant;

use tilec_ir::ThreadProgram;
use tilec_ir::thread::{BufferId, ParamAccess, Stmt, Value, for_each_stmt};

use crate::tensor::{HostTensor, RandomError};

/// The concrete shape of every tensor parameter, in parameter order (for a `T.StridedTensor`, the
/// one dimension of its storage); the error names the first parameter whose shape does not
/// evaluate (a symbolic dimension without a value).
pub fn param_shapes(program: &ThreadProgram, scalars: &[i64]) -> Result<Vec<Vec<usize>>, String> {
    let env = |var| {
        program
            .scalars
            .iter()
            .position(|scalar| scalar.var == var)
            .and_then(|k| scalars.get(k).copied())
    };
    program
        .params
        .iter()
        .map(|param| {
            let decl = program.buffer(param.buffer);
            // A strided tensor is passed as its storage: every element from the first to one
            // past the last its strides reach, gaps included.
            let extents = match decl.strides {
                Some(_) => std::slice::from_ref(&decl.elements),
                None => decl.shape.as_slice(),
            };
            extents
                .iter()
                .map(|&extent| {
                    program
                        .exprs
                        .eval(extent, &env)
                        .and_then(|value| usize::try_from(value).ok())
                        .ok_or_else(|| format!("the shape of `{}` has no value", param.name))
                })
                .collect()
        })
        .collect()
}

/// Tensors for every parameter: inputs random (seeded by `seed` and the parameter's position, so
/// one input does not change when another is added), outputs zero. Together they may have at
/// most [`max_elements`] for where the launch runs.
pub fn make_tensors(
    program: &ThreadProgram,
    scalars: &[i64],
    seed: u64,
    on_gpu: bool,
) -> Result<Vec<HostTensor>, String> {
    make_tensors_before(program, scalars, (seed, on_gpu), None).map_err(RandomError::into_message)
}

/// [`make_tensors`], or [`RandomError::OutOfTime`] once `deadline` has passed: the inputs of a
/// kernel at its real sizes can take seconds to fill, which a run with a time budget must not
/// spend past it.
pub fn make_tensors_before(
    program: &ThreadProgram,
    scalars: &[i64],
    (seed, on_gpu): (u64, bool),
    deadline: Option<Instant>,
) -> Result<Vec<HostTensor>, RandomError> {
    let shapes = param_shapes(program, scalars).map_err(RandomError::TooLarge)?;
    check_host_size(program, &shapes, on_gpu).map_err(RandomError::TooLarge)?;
    let indices = index_buffers(program);
    program
        .params
        .iter()
        .zip(shapes)
        .enumerate()
        .map(|(position, (param, shape))| {
            let dtype = program.buffer(param.buffer).dtype;
            let seed = seed.wrapping_add(position as u64 * 0x9e37_79b9);
            match param.access {
                ParamAccess::Write => {
                    HostTensor::try_zeros(dtype, &shape).map_err(RandomError::TooLarge)
                }
                ParamAccess::Read | ParamAccess::ReadWrite => {
                    let index = indices.contains(&param.buffer);
                    HostTensor::random_before(dtype, &shape, (seed, index), deadline)
                }
            }
        })
        .collect()
}

/// The buffers the program reads run-time indices from: those a [`Stmt::Bind`] value loads.
fn index_buffers(program: &ThreadProgram) -> Vec<BufferId> {
    let mut roots = Vec::new();
    for_each_stmt(&program.body, &mut |stmt| {
        if let Stmt::Bind { value, .. } = stmt {
            roots.push(*value);
        }
    });
    let mut buffers = Vec::new();
    let mut seen = vec![false; program.values.len()];
    while let Some(id) = roots.pop() {
        match seen.get_mut(id.index()) {
            Some(visited) if !*visited => *visited = true,
            _ => continue,
        }
        let value = program.value(id);
        if let Value::Load { buffer, .. } = value {
            buffers.push(*buffer);
        }
        roots.extend(value.operands());
    }
    buffers
}

/// The most elements the tensors of one GPU launch may have together on the host, where each
/// takes 8 bytes (16 GiB in all): the largest benchmarks (FlashAttention at batch 8, 32 heads,
/// 4096 tokens) need 2^29. Larger sizes are refused before anything is allocated, with a message,
/// rather than aborting the process when memory runs out.
const MAX_GPU_HOST_ELEMENTS: u64 = 1 << 31;

/// The most elements the tensors of one launch on the CPU emulator may have together (2 GiB of
/// values, as the corpus softmax at its default size needs half of): the emulator also keeps
/// state per element, and a larger launch would take many minutes.
const MAX_EMULATOR_ELEMENTS: u64 = 1 << 28;

/// The most elements a launch's tensors may have: on a GPU ([`MAX_GPU_HOST_ELEMENTS`]) or on the
/// CPU emulator ([`MAX_EMULATOR_ELEMENTS`]).
fn max_elements(on_gpu: bool) -> u64 {
    if on_gpu {
        MAX_GPU_HOST_ELEMENTS
    } else {
        MAX_EMULATOR_ELEMENTS
    }
}

/// Fails, naming the largest tensor, when the launch's tensors exceed [`max_elements`] or their
/// sizes overflow.
fn check_host_size(
    program: &ThreadProgram,
    shapes: &[Vec<usize>],
    on_gpu: bool,
) -> Result<(), String> {
    let limit = max_elements(on_gpu);
    let counts: Vec<Option<u64>> = shapes
        .iter()
        .map(|shape| {
            shape
                .iter()
                .try_fold(1u64, |acc, &extent| acc.checked_mul(extent as u64))
        })
        .collect();
    let total = counts
        .iter()
        .try_fold(0u64, |acc, count| acc.checked_add((*count)?));
    if total.is_some_and(|total| total <= limit) {
        return Ok(());
    }
    let largest = counts
        .iter()
        .enumerate()
        .max_by_key(|(_, count)| count.unwrap_or(u64::MAX))
        .map(|(position, _)| position);
    let name = largest
        .and_then(|position| program.params.get(position))
        .map_or("?", |param| param.name.as_str());
    let total = total.map_or_else(|| "more than 2^64".to_owned(), |total| total.to_string());
    Err(format!(
        "the tensors of this launch have {total} elements in all (the largest is `{name}`); tilec \
         runs launches of up to {limit} elements {}: pass smaller sizes with `--with`",
        if on_gpu {
            "on a GPU"
        } else {
            "on the CPU emulator"
        }
    ))
}

/// Bytes a launch moves at least once: every input read and every output written.
pub fn bytes_moved(program: &ThreadProgram, tensors: &[HostTensor]) -> u64 {
    program
        .params
        .iter()
        .zip(tensors)
        .map(|(param, tensor)| {
            let once = crate::tensor::storage_bytes(tensor.dtype, tensor.len())
                .unwrap_or(usize::MAX) as u64;
            match param.access {
                ParamAccess::ReadWrite => 2 * once,
                _ => once,
            }
        })
        .sum()
}
