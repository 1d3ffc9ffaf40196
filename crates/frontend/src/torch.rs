//! `torch` as driver code uses it: tensors made with `torch.randn(M, K, dtype=...)` and moved with
//! `.cuda()`, `.half()`, `.to(dtype)`, `.t()`, `.view(...)` keep their shape and dtype, so that an
//! eager kernel called with them binds its `T.const` dimensions, and `x.shape`, `x.size(i)` and
//! `x.dtype` are the numbers and dtypes the script would see.
//!
//! Nothing else of torch is modelled: any other function or method gives an unknown value (an
//! `Opaque` that says what it was), never a guess. A dimension tilec cannot know (a size read from
//! a file, a tensor indexed with a runtime mask) stays unknown inside an otherwise known shape.

use std::rc::Rc;

use tilec_ir::{Code, DType};

use crate::builder::{Builder, Eval};
use crate::eval::Args;
use crate::value::{Module, Value};

/// What tilec knows of a torch tensor: its shape (each extent, if known) and its dtype.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub(crate) struct TensorValue {
    /// `None` when not even the rank is known.
    pub shape: Option<Vec<Option<i64>>>,
    pub dtype: Option<DType>,
}

impl TensorValue {
    fn unknown() -> TensorValue {
        TensorValue {
            shape: None,
            dtype: None,
        }
    }

    fn with_dtype(&self, dtype: Option<DType>) -> TensorValue {
        TensorValue {
            shape: self.shape.clone(),
            dtype,
        }
    }

    fn with_shape(&self, shape: Option<Vec<Option<i64>>>) -> TensorValue {
        TensorValue {
            shape,
            dtype: self.dtype,
        }
    }
}

/// `torch.float16`, `torch.long`, ...: the dtypes torch names, in tilec's terms.
pub(crate) fn torch_dtype(name: &str) -> Option<DType> {
    Some(match name {
        "long" => DType::Int64,
        "short" => DType::Int16,
        "int" => DType::Int32,
        "byte" => DType::UInt8,
        "char" => DType::Int8,
        "float8_e4m3fnuz" => DType::Float8E4M3,
        "float8_e5m2fnuz" => DType::Float8E5M2,
        other => return DType::from_name(other),
    })
}

/// The torch functions that make tensors.
const CONSTRUCTORS: [&str; 15] = [
    "randn",
    "rand",
    "empty",
    "zeros",
    "ones",
    "full",
    "arange",
    "randint",
    "tensor",
    "empty_like",
    "zeros_like",
    "ones_like",
    "randn_like",
    "rand_like",
    "full_like",
];

/// Methods that return the tensor itself (or a copy of the same shape and dtype).
const SAME_TENSOR: [&str; 16] = [
    "cuda",
    "cpu",
    "contiguous",
    "clone",
    "detach",
    "requires_grad_",
    "fill_",
    "zero_",
    "normal_",
    "uniform_",
    "random_",
    "pin_memory",
    "abs",
    "neg",
    "exp",
    "sqrt",
];

impl Builder<'_> {
    /// `torch.<name>`.
    pub(crate) fn torch_attribute<'a>(&self, name: &str) -> Value<'a> {
        if let Some(dtype) = torch_dtype(name) {
            return Value::DType(dtype);
        }
        if CONSTRUCTORS.contains(&name) {
            return Value::ModuleFn(Module::Torch, Rc::from(name));
        }
        match name {
            // What torch tells of the GPU is the target's.
            "cuda" => return Value::Module(Module::Driver),
            // A CUDA build of torch, as on every NVIDIA target.
            "version" => {
                return Value::Namespace(Rc::new(vec![
                    ("hip".to_owned(), Value::None),
                    ("cuda".to_owned(), Value::str("12.8")),
                ]));
            }
            _ => {}
        }
        Value::Opaque(Rc::from(format!("`torch.{name}`")))
    }

    /// A torch constructor: the shape from its size arguments, the dtype from `dtype=` or torch's
    /// default for that constructor.
    pub(crate) fn torch_call<'a>(&mut self, name: &str, args: Args<'a>) -> Eval<Value<'a>> {
        let explicit = match args.keyword("dtype") {
            Some(Value::DType(dtype)) => Some(*dtype),
            Some(Value::None) | None => None,
            Some(_) => return Ok(tensor(TensorValue::unknown())),
        };
        let positional: Vec<&Value<'a>> = args.positional.iter().map(|(v, _)| v).collect();
        let tensor_value = match name {
            "empty_like" | "zeros_like" | "ones_like" | "randn_like" | "rand_like"
            | "full_like" => match positional.first() {
                Some(Value::Tensor(like)) => like.with_dtype(explicit.or(like.dtype)),
                _ => TensorValue::unknown().with_dtype(explicit),
            },
            "full" => TensorValue {
                shape: positional.first().map(|size| sizes(&[size])),
                dtype: explicit.or_else(|| match positional.get(1) {
                    Some(Value::Int(_) | Value::Bool(_)) => Some(DType::Int64),
                    _ => Some(DType::Float32),
                }),
            },
            "arange" => arange(&positional, explicit),
            "randint" => TensorValue {
                shape: args
                    .get(2, "size")
                    .map(|size| sizes(&[size]))
                    .filter(|_| positional.len() >= 2 || args.keyword("size").is_some()),
                dtype: explicit.or(Some(DType::Int64)),
            },
            "tensor" => TensorValue {
                shape: positional.first().and_then(|data| nested_shape(data)),
                dtype: explicit,
            },
            _ => TensorValue {
                shape: Some(sizes(&positional)),
                dtype: explicit.or(Some(DType::Float32)),
            },
        };
        Ok(tensor(tensor_value))
    }

    /// `x.shape`, `x.dtype`, `x.T`, `x.ndim`; methods wait for their call.
    pub(crate) fn tensor_attribute<'a>(&mut self, x: &Rc<TensorValue>, name: &str) -> Value<'a> {
        match name {
            "shape" => match &x.shape {
                Some(shape) => {
                    Value::tuple(shape.iter().map(|extent| size_value(*extent)).collect())
                }
                None => Value::Opaque(Rc::from("the shape of a tensor tilec cannot follow")),
            },
            "dtype" => match x.dtype {
                Some(dtype) => Value::DType(dtype),
                None => Value::Opaque(Rc::from("the dtype of a tensor tilec cannot follow")),
            },
            "ndim" => match &x.shape {
                Some(shape) => Value::Int(crate::value::int_of_len(shape.len())),
                None => Value::Opaque(Rc::from("the rank of a tensor tilec cannot follow")),
            },
            "T" | "mT" => tensor(x.with_shape(x.shape.as_ref().map(|shape| {
                let mut shape = shape.clone();
                shape.reverse();
                shape
            }))),
            "device" | "is_cuda" | "data" | "grad" => {
                Value::Opaque(Rc::from(format!("`.{name}` of a tensor")))
            }
            _ => Value::Method(Box::new(Value::Tensor(Rc::clone(x))), Rc::from(name)),
        }
    }

    /// A method call on a tensor.
    pub(crate) fn tensor_method<'a>(
        &mut self,
        x: &TensorValue,
        name: &str,
        args: Args<'a>,
    ) -> Eval<Value<'a>> {
        let positional: Vec<&Value<'a>> = args.positional.iter().map(|(v, _)| v).collect();
        let cast = |dtype: DType| Ok(tensor(x.with_dtype(Some(dtype))));
        match name {
            _ if SAME_TENSOR.contains(&name) => Ok(tensor(x.clone())),
            "half" => cast(DType::Float16),
            "float" => cast(DType::Float32),
            "double" => cast(DType::Float64),
            "bfloat16" => cast(DType::BFloat16),
            "int" => cast(DType::Int32),
            "long" => cast(DType::Int64),
            "short" => cast(DType::Int16),
            "bool" => cast(DType::Bool),
            "byte" => cast(DType::UInt8),
            "char" => cast(DType::Int8),
            "to" | "type" => {
                let target = positional.iter().copied().chain(args.keyword("dtype"));
                let mut dtype = x.dtype;
                for value in target {
                    match value {
                        Value::DType(d) => dtype = Some(*d),
                        Value::Tensor(other) => dtype = other.dtype,
                        // A device (string or `torch.device`) keeps the dtype.
                        _ => {}
                    }
                }
                Ok(tensor(x.with_dtype(dtype)))
            }
            "size" => match (&x.shape, positional.first()) {
                (Some(shape), None) => Ok(Value::tuple(
                    shape.iter().map(|extent| size_value(*extent)).collect(),
                )),
                (Some(shape), Some(Value::Int(dim))) => Ok(axis(shape.len(), *dim)
                    .map_or_else(|| self.out_of_range(&args, *dim), |d| size_value(shape[d]))),
                _ => Ok(Value::Opaque(Rc::from("a tensor size tilec cannot follow"))),
            },
            "dim" | "ndimension" => Ok(match &x.shape {
                Some(shape) => Value::Int(crate::value::int_of_len(shape.len())),
                None => Value::Opaque(Rc::from("the rank of a tensor tilec cannot follow")),
            }),
            "numel" => Ok(x
                .shape
                .as_ref()
                .and_then(|shape| {
                    shape
                        .iter()
                        .try_fold(1i64, |n, extent| n.checked_mul((*extent)?))
                })
                .map_or_else(
                    || Value::Opaque(Rc::from("the size of a tensor tilec cannot follow")),
                    Value::Int,
                )),
            "element_size" => Ok(x.dtype.map_or_else(
                || Value::Opaque(Rc::from("the dtype of a tensor tilec cannot follow")),
                |dtype| Value::Int(crate::value::dtype_bytes(dtype)),
            )),
            "t" => Ok(self.tensor_attribute(&Rc::new(x.clone()), "T")),
            "transpose" | "swapaxes" => Ok(tensor(x.with_shape(transposed(x, &positional)))),
            "permute" => Ok(tensor(x.with_shape(permuted(x, &positional)))),
            "view" | "reshape" => {
                if let [Value::DType(dtype)] = positional.as_slice() {
                    // `x.view(torch.int8)` reinterprets the bytes: the shape is not tracked.
                    return Ok(tensor(TensorValue {
                        shape: None,
                        dtype: Some(*dtype),
                    }));
                }
                Ok(tensor(x.with_shape(reshaped(x, &positional))))
            }
            "unsqueeze" => Ok(tensor(x.with_shape(unsqueezed(x, &positional)))),
            _ => Ok(Value::Opaque(Rc::from(format!(
                "the result of `.{name}(...)` on a tensor"
            )))),
        }
    }

    fn out_of_range<'a>(&mut self, args: &Args<'a>, dim: i64) -> Value<'a> {
        self.error(
            Code::MetaError,
            args.span,
            format!("dimension {dim} is out of range for this tensor"),
        );
        Value::Opaque(Rc::from("a dimension out of range"))
    }
}

fn tensor<'a>(value: TensorValue) -> Value<'a> {
    Value::Tensor(Rc::new(value))
}

fn size_value<'a>(extent: Option<i64>) -> Value<'a> {
    match extent {
        Some(extent) => Value::Int(extent),
        None => Value::Opaque(Rc::from("a tensor size tilec cannot follow")),
    }
}

/// The extents of `torch.randn(2, 3)` or `torch.randn((2, 3))`: each one an int, or unknown.
fn sizes(values: &[&Value<'_>]) -> Vec<Option<i64>> {
    flattened(values)
        .iter()
        .map(|item| match item {
            Value::Int(extent) => Some(*extent),
            _ => None,
        })
        .collect()
}

/// The arguments of `f(2, 3)` or `f((2, 3))`, as one list either way.
fn flattened<'a>(values: &[&Value<'a>]) -> Vec<Value<'a>> {
    match values {
        [Value::Tuple(items) | Value::List(items)] => items.to_vec(),
        _ => values.iter().map(|value| (*value).clone()).collect(),
    }
}

/// The dimension `dim` (negative from the end) of a rank-`rank` tensor, if it exists.
fn axis(rank: usize, dim: i64) -> Option<usize> {
    let rank = i64::try_from(rank).ok()?;
    let dim = if dim < 0 { dim + rank } else { dim };
    usize::try_from(dim).ok().filter(|_| dim < rank)
}

/// `torch.arange(end)`, `arange(start, end[, step])`: one dimension, int64 for integer bounds.
fn arange(positional: &[&Value<'_>], explicit: Option<DType>) -> TensorValue {
    let ints: Option<Vec<i64>> = positional
        .iter()
        .map(|value| match value {
            Value::Int(v) => Some(*v),
            _ => None,
        })
        .collect();
    let length = match ints.as_deref() {
        Some([end]) => Some(crate::value::range_len(0, *end, 1)),
        Some([start, end]) => Some(crate::value::range_len(*start, *end, 1)),
        Some([start, end, step]) if *step != 0 => {
            Some(crate::value::range_len(*start, *end, *step))
        }
        _ => None,
    };
    let integral = ints.is_some();
    TensorValue {
        shape: Some(vec![length]),
        dtype: explicit.or(Some(if integral {
            DType::Int64
        } else {
            DType::Float32
        })),
    }
}

/// The shape of `torch.tensor([[1, 2], [3, 4]])`.
fn nested_shape(value: &Value<'_>) -> Option<Vec<Option<i64>>> {
    match value {
        Value::List(items) | Value::Tuple(items) => {
            let mut shape = vec![Some(crate::value::int_of_len(items.len()))];
            if let Some(first) = items.first()
                && let Some(inner) = nested_shape(first)
            {
                shape.extend(inner);
            }
            Some(shape)
        }
        Value::Int(_) | Value::Float(_) | Value::Bool(_) => Some(Vec::new()),
        _ => None,
    }
}

fn int_args(positional: &[&Value<'_>]) -> Option<Vec<i64>> {
    sizes(positional).into_iter().collect()
}

fn transposed(x: &TensorValue, positional: &[&Value<'_>]) -> Option<Vec<Option<i64>>> {
    let shape = x.shape.as_ref()?;
    let [a, b] = int_args(positional)?[..] else {
        return None;
    };
    let (a, b) = (axis(shape.len(), a)?, axis(shape.len(), b)?);
    let mut shape = shape.clone();
    shape.swap(a, b);
    Some(shape)
}

fn permuted(x: &TensorValue, positional: &[&Value<'_>]) -> Option<Vec<Option<i64>>> {
    let shape = x.shape.as_ref()?;
    let dims = int_args(positional)?;
    if dims.len() != shape.len() {
        return None;
    }
    dims.iter()
        .map(|&dim| axis(shape.len(), dim).map(|d| shape[d]))
        .collect()
}

/// `x.view(a, -1)`: the `-1` is what the known extents leave.
fn reshaped(x: &TensorValue, positional: &[&Value<'_>]) -> Option<Vec<Option<i64>>> {
    let mut shape = sizes(positional);
    if let Some(inferred) = shape.iter().position(|extent| *extent == Some(-1)) {
        let total = x.shape.as_ref().and_then(|old| {
            old.iter()
                .try_fold(1i64, |n, extent| n.checked_mul((*extent)?))
        });
        let rest = shape
            .iter()
            .enumerate()
            .filter(|(k, _)| *k != inferred)
            .try_fold(1i64, |n, (_, extent)| n.checked_mul((*extent)?));
        shape[inferred] = match (total, rest) {
            (Some(total), Some(rest)) if rest > 0 && total % rest == 0 => Some(total / rest),
            _ => None,
        };
    }
    Some(shape)
}

fn unsqueezed(x: &TensorValue, positional: &[&Value<'_>]) -> Option<Vec<Option<i64>>> {
    let shape = x.shape.as_ref()?;
    let [Value::Int(dim)] = positional else {
        return None;
    };
    let position = axis(shape.len() + 1, *dim)?;
    let mut shape = shape.clone();
    shape.insert(position, Some(1));
    Some(shape)
}

/// `x * 2 - 1` and the other element-wise operators of Python on torch tensors: a tensor of the
/// broadcast shape, so that a script's `A = torch.rand(m, k) * 2 - 1` still tells `A.shape`.
/// A float scalar makes an integer tensor float32, as torch's type promotion does; two tensors
/// broadcast from their trailing dimensions, and what cannot be known stays unknown. `None` when
/// neither operand is a tensor, or the operator is `@`.
pub(crate) fn elementwise<'a>(
    op: ruff_python_ast::Operator,
    lhs: &Value<'a>,
    rhs: &Value<'a>,
) -> Option<Value<'a>> {
    if op == ruff_python_ast::Operator::MatMult {
        return None;
    }
    let operand = |value: &Value<'a>| -> Option<TensorValue> {
        match value {
            Value::Tensor(tensor) => Some((**tensor).clone()),
            Value::Float(_) => Some(TensorValue {
                shape: Some(Vec::new()),
                dtype: Some(DType::Float32),
            }),
            Value::Int(_) | Value::Bool(_) => Some(TensorValue {
                shape: Some(Vec::new()),
                dtype: None,
            }),
            _ => None,
        }
    };
    if !matches!(lhs, Value::Tensor(_)) && !matches!(rhs, Value::Tensor(_)) {
        return None;
    }
    let (a, b) = (operand(lhs)?, operand(rhs)?);
    let shape = match (a.shape, b.shape) {
        (Some(a), Some(b)) => broadcast(&a, &b),
        _ => None,
    };
    let dtype = match (a.dtype, b.dtype) {
        (Some(x), Some(y)) if x.is_float() != y.is_float() => {
            Some(if x.is_float() { x } else { y })
        }
        (Some(x), _) => Some(x),
        (None, y) => y,
    };
    Some(tensor(TensorValue { shape, dtype }))
}

/// NumPy broadcasting of two shapes, from the trailing dimension; `None` where they disagree.
fn broadcast(a: &[Option<i64>], b: &[Option<i64>]) -> Option<Vec<Option<i64>>> {
    let rank = a.len().max(b.len());
    let at = |shape: &[Option<i64>], i: usize| -> Option<i64> {
        let pad = rank - shape.len();
        if i < pad { Some(1) } else { shape[i - pad] }
    };
    (0..rank)
        .map(|i| match (at(a, i), at(b, i)) {
            (Some(1), other) | (other, Some(1)) => Some(other),
            (Some(x), Some(y)) if x == y => Some(Some(x)),
            (Some(_), Some(_)) => None,
            _ => Some(None),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::broadcast;

    #[test]
    fn shapes_broadcast_from_their_trailing_dimensions() {
        let shape = |dims: &[i64]| dims.iter().map(|&d| Some(d)).collect::<Vec<_>>();
        assert_eq!(
            broadcast(&shape(&[3, 1]), &shape(&[4])),
            Some(shape(&[3, 4]))
        );
        assert_eq!(
            broadcast(&shape(&[2, 5]), &shape(&[])),
            Some(shape(&[2, 5]))
        );
        assert_eq!(broadcast(&shape(&[2, 5]), &shape(&[3])), None);
        assert_eq!(
            broadcast(&[None, Some(5)], &shape(&[1, 5])),
            Some(vec![None, Some(5)])
        );
    }
}
