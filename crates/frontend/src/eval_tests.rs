//! Unit tests of the meta-evaluator: Python evaluated at compile time must give exactly what
//! CPython gives, and what cannot be evaluated must say so.

use crate::builder::Builder;
use crate::syntax::ParsedModule;
use crate::value::{lookup, new_env};

/// Runs `source` as a module in strict mode and returns `str()` of the variable `result`, or the
/// first diagnostic as `code: message`.
fn run(source: &str) -> String {
    let parsed = ParsedModule::parse(source);
    assert!(
        parsed.errors().is_empty(),
        "test source does not parse: {source}"
    );
    let mut builder = Builder::new(true);
    let env = new_env(None);
    let _ = builder.exec_body(&env, &parsed.syntax().body);
    if let Some(diagnostic) = builder.diagnostics.first() {
        return format!("{}: {}", diagnostic.code, diagnostic.message);
    }
    match lookup(&env, "result") {
        Some(value) => value.python_str(),
        None => "<no result>".to_owned(),
    }
}

fn expr(expression: &str) -> String {
    run(&format!(
        "import math\nimport tilelang.language as T\nresult = {expression}\n"
    ))
}

#[test]
fn arithmetic_follows_python() {
    let cases = [
        ("1 + 2 * 3", "7"),
        ("7 // 2", "3"),
        ("-7 // 2", "-4"),
        ("7 // -2", "-4"),
        ("-7 % 2", "1"),
        ("7 % -2", "-1"),
        ("7 / 2", "3.5"),
        ("2 ** 10", "1024"),
        ("2 ** -1", "0.5"),
        ("1 << 20", "1048576"),
        ("1024 >> 3", "128"),
        ("6 & 3", "2"),
        ("6 | 3", "7"),
        ("6 ^ 3", "5"),
        ("(1.0 / 64) ** 0.5 * 1.44269504", "0.18033688"),
        ("7.5 // 2", "3.0"),
        ("-7.5 % 2", "0.5"),
        ("True + 1", "2"),
        ("-(3)", "-3"),
        ("~5", "-6"),
        ("1e-5", "1e-05"),
    ];
    for (source, expected) in cases {
        assert_eq!(expr(source), expected, "{source}");
    }
}

#[test]
fn comparisons_logic_and_conditionals() {
    let cases = [
        ("1 < 2 < 3", "True"),
        ("1 < 3 < 2", "False"),
        ("3 == 3.0", "True"),
        ("'a' != 'b'", "True"),
        ("None is None", "True"),
        ("2 in (1, 2)", "True"),
        ("'k' not in {'k': 1}", "False"),
        ("0 or 5", "5"),
        ("3 and 0", "0"),
        ("not []", "True"),
        ("'yes' if 2 > 1 else 'no'", "yes"),
        ("T.float16 == 'float16'", "True"),
    ];
    for (source, expected) in cases {
        assert_eq!(expr(source), expected, "{source}");
    }
}

#[test]
fn containers_strings_and_builtins() {
    let cases = [
        ("(1, 2) + (3,)", "(1, 2, 3)"),
        ("[0] * 3", "[0, 0, 0]"),
        ("(4, 5, 6)[-1]", "6"),
        ("{'a': 1, 'b': 2}['b']", "2"),
        ("[x * x for x in range(4) if x % 2 == 0]", "[0, 4]"),
        ("tuple(i for i in (3, 2))", "(3, 2)"),
        ("f'N={1024} is {\"ok\"}'", "N=1024 is ok"),
        ("min(3, 1, 2)", "1"),
        ("max([4, 9, 2])", "9"),
        ("abs(-2.5)", "2.5"),
        ("int(7.9)", "7"),
        ("float(3)", "3.0"),
        ("len((1, 2, 3))", "3"),
        ("list(range(1, 7, 2))", "[1, 3, 5]"),
        ("sum([1, 2, 3])", "6"),
        ("divmod(-7, 2)", "(-4, 1)"),
        ("list(enumerate('ab'))", "[(0, 'a'), (1, 'b')]"),
        ("list(zip((1, 2), (3, 4)))", "[(1, 3), (2, 4)]"),
        ("math.sqrt(16)", "4.0"),
        ("math.log2(1024)", "10.0"),
        ("math.ceil(2.1)", "3"),
        ("math.pi > 3.14", "True"),
        ("T.ceildiv(1000, 128)", "8"),
        ("{'a': 1}.get('b', 7)", "7"),
        ("list({'x': 1, 'y': 2}.keys())", "['x', 'y']"),
        ("[k + str(v) for k, v in {'x': 1}.items()]", "['x1']"),
        ("T.float32", "float32"),
    ];
    for (source, expected) in cases {
        assert_eq!(expr(source), expected, "{source}");
    }
}

#[test]
fn functions_closures_and_control_flow() {
    let source = "
SCALE = 3

def helper(x, y=2, *rest, **named):
    return x * y + SCALE + len(rest) + len(named)

def make_adder(n):
    def add(x):
        return x + n
    return add

total = 0
for k in [1, 2, 3]:
    if k == 2:
        continue
    total += k
while total < 40:
    total = total * 2
result = (helper(5), helper(1, 1, 9, 9, z=1), make_adder(10)(5), (lambda a, b=1: a - b)(4), total)
";
    assert_eq!(run(source), "(13, 7, 15, 3, 64)");
}

/// Each failure is a diagnostic with its code; an operation tilec does not implement yet is its
/// limit (`not-analysed`), not the kernel's error.
/// Conversions to int are exact or fail: ints do not go through `f64` (which would drop their low
/// bits past 2^53), and a float with no 64-bit int is an error, not the saturated value of an
/// `as` cast.
#[test]
fn conversions_to_int_are_exact_or_reported() {
    let cases = [
        ("math.floor(2 ** 60 + 1)", "1152921504606846977"),
        ("math.ceil(-(2 ** 60) - 1)", "-1152921504606846977"),
        ("math.trunc(True)", "1"),
        ("math.floor(-2.5)", "-3"),
        ("math.isqrt(2 ** 62 - 1)", "2147483647"),
        ("math.isqrt(10)", "3"),
        ("math.gcd(2 ** 60 + 2, 2 ** 59 + 1)", "576460752303423489"),
        ("math.gcd(-12, 18)", "6"),
        ("math.gcd()", "0"),
        ("int(-7.9)", "-7"),
        ("round(2.5)", "2"),
        ("(1, 2, 3)[::2]", "(1, 3)"),
        ("'abcd'[::-2]", "db"),
        (
            "int(1e30)",
            "meta-error: `int(1000000000000000000000000000000)` is not an int tilec can hold (its ints are 64-bit)",
        ),
        (
            "math.ceil(1e19)",
            "meta-error: `math.ceil(10000000000000000000)` is not an int tilec can hold (its ints are 64-bit)",
        ),
        (
            "math.gcd(-(2 ** 62) * 2, 0)",
            "not-analysed: `math.gcd` with these arguments is not supported by tilec",
        ),
    ];
    for (source, expected) in cases {
        assert_eq!(expr(source), expected, "{source}");
    }
}

#[test]
fn errors_are_diagnostics_not_panics() {
    let cases = [
        ("1 // 0", "meta-error: integer division or modulo by zero"),
        (
            "(1, 2)[5]",
            "meta-error: index 5 out of range for a sequence of length 2",
        ),
        (
            "undefined_thing + 1",
            "undefined-name: name `undefined_thing` is not defined",
        ),
        (
            "9223372036854775807 + 1",
            "meta-error: integer overflow or invalid operand at compile time",
        ),
        ("{'a': 1}['b']", "meta-error: key 'b' not found"),
        (
            "T.print(1)",
            "not-analysed: `T.print` is not supported by tilec yet",
        ),
        (
            "T.async_copy(1, 2)",
            "invalid-call: `src` must be a buffer or a region of one, found an int",
        ),
        (
            "T.alloc_tmem((128, 128), 'float32')",
            "not-analysed: `T.alloc_tmem` needs an NVIDIA Blackwell GPU (sm_100 or later), and this kernel is compiled for sm_90: tilec does not target Blackwell yet, so the kernel's other Blackwell operations are not reported",
        ),
        (
            "T.tma_copy(1, 2)",
            "invalid-call: `src` must be a buffer or a region of one, found an int",
        ),
        (
            "T.copy(1, 2)",
            "invalid-call: `src` must be a buffer or a region of one, found an int",
        ),
    ];
    for (source, expected) in cases {
        assert_eq!(expr(source), expected, "{source}");
    }
}

#[test]
fn failing_assert_reports_its_message() {
    let source = "N = 1000\nassert N % 32 == 0, f\"N={N} must be a multiple of 32\"\nresult = 1\n";
    assert_eq!(
        run(source),
        "assertion-failed: assertion failed: N=1000 must be a multiple of 32"
    );
}

#[test]
fn endless_loops_stop_with_a_diagnostic() {
    let message = run("x = 0\nwhile True:\n    x = x + 1\nresult = x\n");
    assert!(
        message.starts_with("analysis-limit: compile-time evaluation did not finish"),
        "{message}"
    );
}

/// Values whose size the source controls are refused where they are made, with the size they
/// would have had, instead of exhausting memory (or being silently cut short).
#[test]
fn oversized_values_are_reported_not_allocated() {
    let cases = [
        (
            "s = 'ab'\nfor _ in range(40):\n    s = s + s\nresult = len(s)\n",
            "analysis-limit: this string would have 2,097,152 elements; tilec evaluates strings of up to 1,048,576 elements at compile time",
        ),
        (
            "result = [0] * (1 << 20) * (1 << 20)\n",
            "analysis-limit: this list would have 1,099,511,627,776 elements; tilec evaluates lists of up to 1,048,576 elements at compile time",
        ),
        (
            "result = [0] * 10**9\n",
            "analysis-limit: this list would have 1,000,000,000 elements; tilec evaluates lists of up to 1,048,576 elements at compile time",
        ),
        (
            "result = 'x' * 10**12\n",
            "analysis-limit: this string would have 1,000,000,000,000 elements; tilec evaluates strings of up to 1,048,576 elements at compile time",
        ),
        (
            "result = ','.join(['abc'] * 1000).replace('', 'x' * 1000)\n",
            "analysis-limit: this string would have 4,003,999 elements; tilec evaluates strings of up to 1,048,576 elements at compile time",
        ),
        (
            "result = 0\nfor i in range(10**12):\n    result += i\n",
            "analysis-limit: this range would have 1,000,000,000,000 elements; tilec evaluates ranges of up to 1,048,576 elements at compile time",
        ),
    ];
    for (source, expected) in cases {
        assert_eq!(run(source), expected, "{source}");
    }
}

/// The budget counts work, not statements: a loop that builds a large list at every iteration
/// ends after a few iterations, not two million.
#[test]
fn building_large_lists_in_a_loop_spends_the_budget_quickly() {
    let started = std::time::Instant::now();
    let message = run("while True:\n    x = [0] * (1 << 20)\n");
    assert!(
        message.starts_with("analysis-limit: compile-time evaluation did not finish"),
        "{message}"
    );
    // Generous for a debug build on a loaded machine; the release build takes about 0.2 s.
    assert!(started.elapsed().as_secs() < 30, "{:?}", started.elapsed());
}

/// Appending in a loop grows the list in place: ten thousand appends are ten thousand steps of
/// work, not fifty million element copies.
#[test]
fn appends_in_a_loop_do_not_copy_the_list() {
    let source = "xs = []\nfor i in range(100000):\n    xs.append(i)\nresult = len(xs)\n";
    assert_eq!(run(source), "100000");
}

/// A long loop at module level says so, and the names defined after it still exist, so that one
/// loop does not empty the file.
#[test]
fn definitions_after_a_module_loop_that_spent_the_budget_still_exist() {
    let source = "n = 0\nwhile True:\n    n = n + 1\nBLOCK = 64\ndef twice(x):\n    return 2 * x\n";
    let parsed = ParsedModule::parse(source);
    let mut builder = Builder::new(false);
    let env = new_env(None);
    for stmt in &parsed.syntax().body {
        builder.exec_module_statement(&env, stmt);
    }
    let messages: Vec<String> = builder
        .diagnostics
        .iter()
        .map(|d| format!("{}: {}", d.code, d.message))
        .collect();
    assert_eq!(messages.len(), 1, "{messages:?}");
    assert!(messages[0].starts_with("analysis-limit: compile-time evaluation did not finish"));
    assert_eq!(
        lookup(&env, "BLOCK").map(|v| v.python_str()).as_deref(),
        Some("64")
    );
    assert!(lookup(&env, "twice").is_some());
}

#[test]
fn unevaluable_module_values_are_reported_where_kernel_code_uses_them() {
    let source = "import numpy as np\nBLOCK = int(np.int32(128))\nresult = BLOCK * 2\n";
    let parsed = ParsedModule::parse(source);
    let mut builder = Builder::new(false);
    let env = new_env(None);
    let _ = builder.exec_body(&env, &parsed.syntax().body[..2]);
    builder.strict = true;
    let _ = builder.exec_body(&env, &parsed.syntax().body[2..]);
    let messages: Vec<String> = builder
        .diagnostics
        .iter()
        .map(|d| format!("{}: {}", d.code, d.message))
        .collect();
    assert_eq!(
        messages,
        [
            "not-analysed: `BLOCK` cannot be used here: it is assigned from an expression tilec could not evaluate at compile time"
        ]
    );
}

#[test]
fn dtype_spellings_and_typed_constants() {
    assert_eq!(expr("T.dtype('float')"), "float32");
    assert_eq!(expr("T.bfloat16"), "bfloat16");
    assert_eq!(expr("T.float32(1.0)"), "<a runtime value>");
}

#[test]
fn classes_hold_configuration() {
    let cases = [
        // A dataclass: fields in order, defaults, keywords, a method and a property.
        (
            r#"
from dataclasses import dataclass

@dataclass(frozen=True)
class Config:
    block_M: int
    block_N: int = 64
    stages: int = 2

    @property
    def tile(self):
        return self.block_M * self.block_N

    def scaled(self, k):
        return Config(self.block_M * k, block_N=self.block_N)

cfg = Config(128, stages=3)
result = (cfg.block_M, cfg.block_N, cfg.stages, cfg.tile, cfg.scaled(2).block_M)
"#,
            "(128, 64, 3, 8192, 256)",
        ),
        // A NamedTuple, with inheritance of fields.
        (
            r#"
from typing import NamedTuple

class Shape(NamedTuple):
    M: int
    N: int = 16

result = (Shape(4).M, Shape(4).N, Shape(M=2, N=3).N)
"#,
            "(4, 16, 3)",
        ),
        // A plain class: `__init__` sets attributes, a base class supplies a method, class
        // attributes, staticmethod and classmethod, isinstance.
        (
            r#"
class Base:
    THREADS = 128

    def threads(self):
        return self.THREADS * self.warps

    @staticmethod
    def align(x):
        return (x + 15) // 16 * 16

    @classmethod
    def make(cls, warps):
        return cls(warps)

class Op(Base):
    def __init__(self, warps):
        self.warps = warps

op = Op.make(2)
result = (op.threads(), Op.align(100), isinstance(op, Base), isinstance(3, Op), Op.__name__)
"#,
            "(256, 112, True, False, 'Op')",
        ),
        (
            r#"
from dataclasses import dataclass

@dataclass
class C:
    a: int

result = C()
"#,
            "invalid-call: missing argument `a` for `C`",
        ),
    ];
    for (source, expected) in cases {
        assert_eq!(run(source), expected, "{source}");
    }
}

/// `T.dynamic("m, n")` makes one symbol per name, as a tuple; one name makes one symbol.
#[test]
fn dynamic_symbols_one_per_name() {
    // Symbols print as index expressions; the count and their use in arithmetic are what matter.
    assert_eq!(expr("len(T.dynamic('seq_len, batch_plus_one'))"), "2");
    assert_eq!(expr("len(T.dynamic('m n'))"), "2");
    assert_eq!(expr("T.dynamic('m, n')[1] * 2"), "<an index expression>");
    assert_eq!(
        expr("len(T.dynamic('m'))"),
        "meta-error: `len` needs a sequence known at compile time"
    );
}

/// `itertools.product` is sized before it is built: a small one is Python's, an empty pool gives
/// nothing however large `repeat` is, and one past the limit is an `analysis-limit` warning
/// (found by the fuzzer: `repeat=10**9` aborted for memory).
#[test]
fn itertools_product_is_sized_before_it_is_built() {
    let run_product = |expression: &str| run(&format!("import itertools\nresult = {expression}\n"));
    assert_eq!(
        run_product("list(itertools.product([1, 2], repeat=2))"),
        "[(1, 1), (1, 2), (2, 1), (2, 2)]"
    );
    assert_eq!(
        run_product("list(itertools.product([], repeat=10**9))"),
        "[]"
    );
    assert_eq!(
        run_product("list(itertools.product([1, 2], repeat=10**9))"),
        "analysis-limit: this product would have more than 1,048,576 rows; tilec evaluates \
         products of up to that many at compile time"
    );
    assert_eq!(
        run_product("list(itertools.product([1], repeat=10**9))"),
        "analysis-limit: this product would have 1,000,000,000 elements; tilec evaluates \
         products of up to 1,048,576 elements at compile time"
    );
}

#[test]
fn getattr_hasattr_and_the_sequence_builtins() {
    for (expr, expected) in [
        ("getattr(math, 'fl' + 'oor')(2.5)", "2"),
        ("getattr(cfg, 'block', 64)", "64"),
        ("getattr(cfg, 'rows', 64)", "8"),
        ("hasattr(cfg, 'rows')", "True"),
        ("hasattr(cfg, 'cols')", "False"),
        ("any(x > 4 for x in [1, 5])", "True"),
        ("all(x > 4 for x in [1, 5])", "False"),
        ("sorted([3, 1, 2])", "[1, 2, 3]"),
        ("sorted([3, 1, 2], reverse=True)", "[3, 2, 1]"),
        ("list(reversed((1, 2, 3)))", "[3, 2, 1]"),
    ] {
        let source = format!(
            "import math\nimport tilelang.language as T\n\nclass Cfg:\n    rows = 8\n\ncfg = Cfg()\nresult = {expr}\n"
        );
        assert_eq!(run(&source), expected, "{expr}");
    }
    for (expr, expected) in [
        (
            "eval('1 + 1')",
            "not-analysed: the Python builtin `eval` is not evaluated by tilec, which runs Python itself and models only the builtins kernel code commonly uses",
        ),
        // As `cfg.cols`: an attribute tilec did not see set is unknown, not an error.
        ("getattr(cfg, 'cols')", "<a value tilec cannot evaluate>"),
    ] {
        let source = format!(
            "import math\nimport tilelang.language as T\n\nclass Cfg:\n    rows = 8\n\ncfg = Cfg()\nresult = {expr}\n"
        );
        assert_eq!(run(&source), expected, "{expr}");
    }
}
