//! C identifiers for everything the kernel names: parameters, buffers, thread, block and loop
//! variables.
//!
//! Names come from the program (buffer names, variable names of the expression arena) and are only
//! adjusted where C requires it: characters that cannot appear in an identifier become `_`, a name
//! that would collide with a keyword, a CUDA built-in, a function the kernel calls or the prelude's
//! `tl_` namespace gets a prefix, and a name already taken gets a numeric suffix.

use rustc_hash::FxHashSet;

/// Words a generated identifier must not be: C++ keywords, CUDA built-ins, the functions and
/// types the printed kernel uses, and object-like macros a compiler may predefine.
const RESERVED: &[&str] = &[
    // C++ keywords and alternative tokens.
    "alignas",
    "alignof",
    "and",
    "and_eq",
    "asm",
    "auto",
    "bitand",
    "bitor",
    "bool",
    "break",
    "case",
    "catch",
    "char",
    "char8_t",
    "char16_t",
    "char32_t",
    "class",
    "compl",
    "concept",
    "const",
    "consteval",
    "constexpr",
    "constinit",
    "const_cast",
    "continue",
    "co_await",
    "co_return",
    "co_yield",
    "decltype",
    "default",
    "delete",
    "do",
    "double",
    "dynamic_cast",
    "else",
    "enum",
    "explicit",
    "export",
    "extern",
    "false",
    "float",
    "for",
    "friend",
    "goto",
    "if",
    "inline",
    "int",
    "long",
    "mutable",
    "namespace",
    "new",
    "noexcept",
    "not",
    "not_eq",
    "nullptr",
    "operator",
    "or",
    "or_eq",
    "private",
    "protected",
    "public",
    "register",
    "reinterpret_cast",
    "requires",
    "return",
    "short",
    "signed",
    "sizeof",
    "static",
    "static_assert",
    "static_cast",
    "struct",
    "switch",
    "template",
    "this",
    "thread_local",
    "throw",
    "true",
    "try",
    "typedef",
    "typeid",
    "typename",
    "union",
    "unsigned",
    "using",
    "virtual",
    "void",
    "volatile",
    "wchar_t",
    "while",
    "xor",
    "xor_eq",
    // CUDA built-in variables and types.
    "threadIdx",
    "blockIdx",
    "blockDim",
    "gridDim",
    "warpSize",
    "uint2",
    "uint4",
    "dim3",
    // Functions the printed kernel calls (a variable of the same name would hide them).
    "expf",
    "exp2f",
    "logf",
    "log2f",
    "sqrtf",
    "rsqrtf",
    "fabsf",
    "fmaxf",
    "fminf",
    "tanhf",
    "floorf",
    "powf",
    "erff",
    "sinf",
    "cosf",
    "tanf",
    "sinhf",
    "coshf",
    "asinf",
    "acosf",
    "atanf",
    "exp10f",
    "log10f",
    "log1pf",
    "exp",
    "exp2",
    "log",
    "log2",
    "sqrt",
    "rsqrt",
    "fabs",
    "fmax",
    "fmin",
    "tanh",
    "floor",
    "pow",
    "erf",
    "sin",
    "cos",
    "tan",
    "sinh",
    "cosh",
    "asin",
    "acos",
    "atan",
    "exp10",
    "log10",
    "log1p",
    "atomicAdd",
    "atomicMax",
    "atomicMin",
    "atomicCAS",
    "min",
    "max",
    "abs",
    // Object-like macros some toolchains predefine.
    "NULL",
    "INFINITY",
    "NAN",
    "HUGE_VAL",
    "HUGE_VALF",
];

/// Allocates unique C identifiers.
#[derive(Debug, Default)]
pub(super) struct Names {
    taken: FxHashSet<String>,
}

impl Names {
    /// A fresh identifier based on `wanted`, distinct from every one handed out before.
    pub(super) fn fresh(&mut self, wanted: &str) -> String {
        let base = sanitize(wanted);
        let mut candidate = base.clone();
        let mut suffix = 1_u32;
        while self.taken.contains(&candidate) {
            candidate = format!("{base}_{suffix}");
            suffix += 1;
        }
        self.taken.insert(candidate.clone());
        candidate
    }
}

/// `name` as a valid, unreserved C identifier.
///
/// Runs of `_` collapse and leading underscores go, because C++ reserves names with a double
/// underscore or a leading underscore and a capital for the implementation.
pub(super) fn sanitize(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for ch in name.chars() {
        let ch = if ch.is_ascii_alphanumeric() { ch } else { '_' };
        if ch == '_' && (out.is_empty() || out.ends_with('_')) {
            continue;
        }
        out.push(ch);
    }
    if out.is_empty() || out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert_str(0, "v_");
    }
    if RESERVED.contains(&out.as_str()) || out.starts_with("tl_") {
        out.insert_str(0, "v_");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sanitizes_and_uniquifies() {
        let mut names = Names::default();
        assert_eq!(names.fresh("i"), "i");
        assert_eq!(names.fresh("i"), "i_1");
        assert_eq!(names.fresh("i"), "i_2");
        assert_eq!(names.fresh("A.shared"), "A_shared");
        assert_eq!(names.fresh("__x__y"), "x_y");
        assert_eq!(names.fresh("0k"), "v_0k");
        assert_eq!(names.fresh(""), "v_");
        assert_eq!(names.fresh("int"), "v_int");
        assert_eq!(names.fresh("tl_smem"), "v_tl_smem");
        assert_eq!(names.fresh("threadIdx"), "v_threadIdx");
        assert_eq!(names.fresh("héllo"), "h_llo");
    }
}
