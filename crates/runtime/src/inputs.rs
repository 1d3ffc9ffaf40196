//! The tensors of a launch: shapes evaluated for the launch's scalar parameters, inputs filled with
//! seeded random values, outputs zeroed (the emulator poisons write-only ones itself).

use tilec_ir::ThreadProgram;
use tilec_ir::thread::ParamAccess;

use crate::tensor::HostTensor;

/// The concrete shape of every tensor parameter, in parameter order; `None` names the first
/// parameter whose shape does not evaluate (a symbolic dimension without a value).
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
            decl.shape
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
/// one input does not change when another is added), outputs zero.
pub fn make_tensors(
    program: &ThreadProgram,
    scalars: &[i64],
    seed: u64,
) -> Result<Vec<HostTensor>, String> {
    let shapes = param_shapes(program, scalars)?;
    Ok(program
        .params
        .iter()
        .zip(shapes)
        .enumerate()
        .map(|(position, (param, shape))| {
            let dtype = program.buffer(param.buffer).dtype;
            match param.access {
                ParamAccess::Write => HostTensor::zeros(dtype, &shape),
                ParamAccess::Read | ParamAccess::ReadWrite => HostTensor::random(
                    dtype,
                    &shape,
                    seed.wrapping_add(position as u64 * 0x9e37_79b9),
                ),
            }
        })
        .collect())
}

/// Bytes a launch moves at least once: every input read and every output written.
pub fn bytes_moved(program: &ThreadProgram, tensors: &[HostTensor]) -> u64 {
    program
        .params
        .iter()
        .zip(tensors)
        .map(|(param, tensor)| {
            let once = (tensor.len() * crate::tensor::element_bytes(tensor.dtype)) as u64;
            match param.access {
                ParamAccess::ReadWrite => 2 * once,
                _ => once,
            }
        })
        .sum()
}
