//! Compile-time constant values: the concrete meta arguments of a kernel instance.

use std::fmt;

use crate::dtype::DType;

/// A Python value known at compile time, as it appears in an instance's arguments.
///
/// Floats are stored by their bit pattern so that the type is `Eq + Hash` (an instance is keyed by
/// its arguments); two floats are equal exactly when Python's `repr` of them would be.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ConstValue {
    None,
    Bool(bool),
    Int(i64),
    Float(u64),
    Str(String),
    DType(DType),
    Tuple(Vec<ConstValue>),
    List(Vec<ConstValue>),
    Dict(Vec<(ConstValue, ConstValue)>),
    /// Passed by the call site, but only known when the program runs (a size read from a tensor,
    /// a value computed by torch): the front end treats the parameter as generic.
    RunTime,
    /// A function passed by name, as the call site wrote it: a language operation (`T.exp`) or a
    /// function its module defines (`relu`). The front end resolves the name where it binds the
    /// parameter, so that a kernel built around an `op_func` is built with the caller's.
    Callable(String),
}

impl ConstValue {
    pub fn float(value: f64) -> ConstValue {
        ConstValue::Float(value.to_bits())
    }

    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            ConstValue::Float(bits) => Some(f64::from_bits(bits)),
            ConstValue::Int(value) => Some(value as f64),
            _ => None,
        }
    }
}

impl fmt::Display for ConstValue {
    /// Prints the value as Python would write it, so that messages quote what the user wrote.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConstValue::None => f.write_str("None"),
            ConstValue::Bool(true) => f.write_str("True"),
            ConstValue::Bool(false) => f.write_str("False"),
            ConstValue::Int(value) => write!(f, "{value}"),
            ConstValue::Float(bits) => write_python_float(f, f64::from_bits(*bits)),
            ConstValue::Str(text) => write_python_str(f, text),
            ConstValue::DType(dtype) => write!(f, "T.{dtype}"),
            ConstValue::Tuple(items) => {
                f.write_str("(")?;
                write_items(f, items)?;
                if items.len() == 1 {
                    f.write_str(",")?;
                }
                f.write_str(")")
            }
            ConstValue::List(items) => {
                f.write_str("[")?;
                write_items(f, items)?;
                f.write_str("]")
            }
            ConstValue::Dict(entries) => {
                f.write_str("{")?;
                for (index, (key, value)) in entries.iter().enumerate() {
                    if index > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{key}: {value}")?;
                }
                f.write_str("}")
            }
            ConstValue::RunTime => f.write_str("<run time>"),
            ConstValue::Callable(path) => f.write_str(path),
        }
    }
}

/// Python's `repr` of a string: single quotes, backslash escapes.
fn write_python_str(f: &mut fmt::Formatter<'_>, text: &str) -> fmt::Result {
    f.write_str("'")?;
    for c in text.chars() {
        match c {
            '\\' => f.write_str("\\\\")?,
            '\'' => f.write_str("\\'")?,
            '\n' => f.write_str("\\n")?,
            c => f.write_fmt(format_args!("{c}"))?,
        }
    }
    f.write_str("'")
}

fn write_items(f: &mut fmt::Formatter<'_>, items: &[ConstValue]) -> fmt::Result {
    for (index, item) in items.iter().enumerate() {
        if index > 0 {
            f.write_str(", ")?;
        }
        write!(f, "{item}")?;
    }
    Ok(())
}

/// Writes a float the way Python's `repr` does for the common cases (`1.0`, `0.5`, `1e-05`, `inf`).
pub fn write_python_float(f: &mut dyn fmt::Write, value: f64) -> fmt::Result {
    if value.is_infinite() {
        return f.write_str(if value > 0.0 { "inf" } else { "-inf" });
    }
    if value.is_nan() {
        return f.write_str("nan");
    }
    if value != 0.0 && (value.abs() < 1e-4 || value.abs() >= 1e16) {
        let text = format!("{value:e}");
        // Rust prints `1e-5`; Python prints `1e-05`.
        return match text.split_once('e') {
            Some((mantissa, exponent)) => {
                let (sign, digits) = match exponent.strip_prefix('-') {
                    Some(digits) => ("-", digits),
                    None => ("+", exponent),
                };
                write!(f, "{mantissa}e{sign}{digits:0>2}")
            }
            None => f.write_str(&text),
        };
    }
    if value.fract() == 0.0 {
        write!(f, "{value:.1}")
    } else {
        write!(f, "{value}")
    }
}

#[cfg(test)]
mod tests {
    use super::ConstValue;

    #[test]
    fn prints_like_python() {
        let value = ConstValue::Tuple(vec![
            ConstValue::Int(1024),
            ConstValue::float(1e-5),
            ConstValue::float(2.0),
            ConstValue::Str("float16".into()),
            ConstValue::Bool(true),
            ConstValue::Tuple(vec![ConstValue::Int(1)]),
        ]);
        assert_eq!(
            value.to_string(),
            "(1024, 1e-05, 2.0, 'float16', True, (1,))"
        );
    }
}
