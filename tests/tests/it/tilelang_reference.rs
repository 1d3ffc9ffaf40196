//! TileLang's inferred fragment layouts as the reference files record them (LayoutVisual output:
//! `shared/corpus/tilelang-layouts-sm*.txt` for the corpus, `tests/realworld/tilelang-layouts-sm90.txt`
//! for TileLang's own examples), and the point-by-point comparison of one of tilec's layouts with
//! one of TileLang's. Shared by `tilelang_layouts` (the corpus) and `realworld_layouts`.
//!
//! Layouts are compared as functions over each fragment's whole domain, never as formulas: for every
//! element, the set of threads holding it (TileLang's `{thread(point, rep) | rep < Replicate}`
//! against ours), and the register it sits in (flattened over each side's local shape).

use tilec_passes::layout::{FragmentLayout, Origin, points};

/// The formulas TileLang prints, read with ruff's Python parser (which the front end uses too) and
/// evaluated with the expression arena's floor division and modulo: integers, the variables `_i`,
/// `_j`, `_k`, `_l` (the logical indices, in order) and `_rep` (the replica), `+ - * // %`, unary
/// minus and parentheses.
pub(crate) mod formula {
    use ruff_python_ast::{Expr, Number, Operator, UnaryOp};
    use tilec_ir::expr::{floor_div, floor_mod};

    /// A parsed formula.
    #[derive(Clone, Debug)]
    pub(crate) enum Formula {
        Int(i64),
        /// The logical index of this dimension.
        Dim(usize),
        Rep,
        Neg(Box<Formula>),
        Binary(Operator, Box<Formula>, Box<Formula>),
    }

    impl Formula {
        /// The value at `point`, replica `rep`; `None` on division by zero, overflow or a
        /// dimension the point does not have.
        pub(crate) fn eval(&self, point: &[i64], rep: i64) -> Option<i64> {
            match self {
                Formula::Int(value) => Some(*value),
                Formula::Dim(dim) => point.get(*dim).copied(),
                Formula::Rep => Some(rep),
                Formula::Neg(inner) => inner.eval(point, rep)?.checked_neg(),
                Formula::Binary(op, left, right) => {
                    let (a, b) = (left.eval(point, rep)?, right.eval(point, rep)?);
                    match op {
                        Operator::Add => a.checked_add(b),
                        Operator::Sub => a.checked_sub(b),
                        Operator::Mult => a.checked_mul(b),
                        Operator::FloorDiv => floor_div(a, b),
                        _ => floor_mod(a, b),
                    }
                }
            }
        }
    }

    fn parse_expression(text: &str) -> Result<Expr, String> {
        ruff_python_parser::parse_expression(text)
            .map(|parsed| parsed.into_expr())
            .map_err(|error| format!("{text:?}: {error}"))
    }

    fn convert(expr: &Expr) -> Result<Formula, String> {
        match expr {
            Expr::NumberLiteral(literal) => match &literal.value {
                Number::Int(value) => value
                    .as_i64()
                    .map(Formula::Int)
                    .ok_or_else(|| format!("{value} does not fit")),
                other => Err(format!("not an integer: {other:?}")),
            },
            Expr::Name(name) => match name.id.as_str() {
                "_i" => Ok(Formula::Dim(0)),
                "_j" => Ok(Formula::Dim(1)),
                "_k" => Ok(Formula::Dim(2)),
                "_l" => Ok(Formula::Dim(3)),
                "_rep" => Ok(Formula::Rep),
                other => Err(format!("unknown variable {other}")),
            },
            Expr::UnaryOp(unary) if unary.op == UnaryOp::USub => {
                Ok(Formula::Neg(Box::new(convert(&unary.operand)?)))
            }
            Expr::BinOp(binary) => match binary.op {
                Operator::Add
                | Operator::Sub
                | Operator::Mult
                | Operator::FloorDiv
                | Operator::Mod => Ok(Formula::Binary(
                    binary.op,
                    Box::new(convert(&binary.left)?),
                    Box::new(convert(&binary.right)?),
                )),
                other => Err(format!("unexpected operator {other:?}")),
            },
            other => Err(format!("unexpected expression {other:?}")),
        }
    }

    /// Parses one formula, such as `_i // 16 * 32 + _rep`.
    pub(crate) fn parse(text: &str) -> Result<Formula, String> {
        convert(&parse_expression(text)?)
    }

    /// Parses a Python tuple of formulas, such as `(_i % 8, 0,)` or `(128, 64)`.
    pub(crate) fn parse_tuple(text: &str) -> Result<Vec<Formula>, String> {
        match parse_expression(text)? {
            Expr::Tuple(tuple) => tuple.elts.iter().map(convert).collect(),
            _ => Err(format!("not a tuple: {text:?}")),
        }
    }

    #[test]
    fn python_semantics() {
        let eval = |text: &str, point: &[i64], rep: i64| {
            parse(text).expect("the formula parses").eval(point, rep)
        };
        assert_eq!(eval("-7 // 2", &[], 0), Some(-4));
        assert_eq!(eval("-7 % 3", &[], 0), Some(2));
        assert_eq!(eval("7 % -3", &[], 0), Some(-2));
        assert_eq!(eval("1 // 0", &[], 0), None);
        assert_eq!(eval("2 + 3 * 4 - (1 + 1)", &[], 0), Some(12));
        assert_eq!(
            eval("_i // 16 * 32 + _i % 8 * 4 + _rep", &[21, 0], 3),
            Some(55)
        );
        assert_eq!(eval("_j % 8 // 2", &[0, 13], 0), Some(2));
        let tuple = parse_tuple("(_i % 16 // 8, _j,)").expect("the tuple parses");
        assert_eq!(tuple.len(), 2);
        assert_eq!(parse_tuple("(64,)").expect("parses").len(), 1);
        assert_eq!(parse_tuple("(128, 64)").expect("parses").len(), 2);
        assert!(parse("_x + 1").is_err());
        assert!(parse("1 / 2").is_err());
    }
}

pub(crate) use formula::Formula;

/// What TileLang printed for one fragment.
#[derive(Debug)]
pub(crate) struct TileLangFragment {
    pub(crate) name: String,
    pub(crate) shape: Vec<i64>,
    pub(crate) local_shape: Vec<i64>,
    pub(crate) thread: Formula,
    pub(crate) index: Vec<Formula>,
    pub(crate) replicate: i64,
    /// The formulas as printed, for the report.
    pub(crate) text: String,
}

#[derive(Debug)]
pub(crate) enum TileLangResult {
    Fragments(Vec<TileLangFragment>),
    NoFragments,
    Failed(String),
    /// The dump could not build the instance in Python at all (an import that fails on the machine
    /// that dumped, a kernel that is not a module-level name): nothing is known of TileLang's
    /// layouts, and nothing is said of whether TileLang compiles it.
    Skipped(String),
}

/// One `=== file :: kernel instance N (args) {kwargs}` record.
#[derive(Debug)]
pub(crate) struct TileLangInstance {
    pub(crate) file: String,
    pub(crate) kernel: String,
    pub(crate) index: u32,
    pub(crate) positional: Vec<String>,
    pub(crate) keywords: Vec<(String, String)>,
    pub(crate) header: String,
    pub(crate) result: TileLangResult,
}

/// Splits `text` at top-level `separator`s (outside brackets and quotes), trimming each piece and
/// dropping empty ones (a 1-tuple's trailing comma).
fn split_top_level(text: &str, separator: char) -> Vec<String> {
    let mut pieces = Vec::new();
    let mut depth = 0i32;
    let mut quote = None;
    let mut current = String::new();
    for c in text.chars() {
        match (quote, c) {
            (Some(q), _) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '\'' | '"') => quote = Some(c),
            (None, '(' | '[' | '{') => depth += 1,
            (None, ')' | ']' | '}') => depth -= 1,
            (None, _) if c == separator && depth == 0 => {
                pieces.push(std::mem::take(&mut current));
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    pieces.push(current);
    pieces
        .into_iter()
        .map(|piece| piece.trim().to_owned())
        .filter(|piece| !piece.is_empty())
        .collect()
}

/// `text` without its outer brackets `open`…`close`.
fn strip_brackets(text: &str, open: char, close: char) -> Result<&str, String> {
    text.trim()
        .strip_prefix(open)
        .and_then(|rest| rest.strip_suffix(close))
        .ok_or_else(|| format!("expected {open}…{close}: {text:?}"))
}

fn parse_ints(tuple: &str) -> Result<Vec<i64>, String> {
    split_top_level(strip_brackets(tuple, '(', ')')?, ',')
        .iter()
        .map(|item| item.parse().map_err(|e| format!("{item:?}: {e}")))
        .collect()
}

/// Parses `file :: kernel instance N (args) {kwargs}` (the text after `=== `).
fn parse_header(header: &str) -> Result<TileLangInstance, String> {
    let (file, rest) = header.split_once(" :: ").ok_or("no ` :: `")?;
    let (kernel, rest) = rest.split_once(" instance ").ok_or("no ` instance `")?;
    let (index, rest) = rest.split_once(' ').ok_or("no instance index")?;
    // The positional arguments end at the `)` that closes the first `(`.
    let mut depth = 0;
    let mut end = None;
    for (at, c) in rest.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    end = Some(at);
                    break;
                }
            }
            _ => {}
        }
    }
    let end = end.ok_or("unclosed positional arguments")?;
    let positional = split_top_level(strip_brackets(&rest[..=end], '(', ')')?, ',');
    let keywords = split_top_level(strip_brackets(&rest[end + 1..], '{', '}')?, ',')
        .iter()
        .map(|item| {
            let (key, value) = item
                .split_once(':')
                .ok_or_else(|| format!("keyword without `:`: {item:?}"))?;
            let key = key.trim().trim_matches('\'').trim_matches('"');
            Ok((key.to_owned(), value.trim().to_owned()))
        })
        .collect::<Result<_, String>>()?;
    Ok(TileLangInstance {
        file: file.to_owned(),
        kernel: kernel.to_owned(),
        index: index.parse().map_err(|e| format!("instance index: {e}"))?,
        positional,
        keywords,
        header: header.to_owned(),
        result: TileLangResult::NoFragments,
    })
}

/// The fields of a fragment being read, line by line.
#[derive(Default)]
struct PartialFragment {
    name: String,
    shapes: Option<(Vec<i64>, Vec<i64>)>,
    thread: Option<(Formula, String)>,
    index: Option<(Vec<Formula>, String)>,
}

/// Parses a whole `tilelang-layouts-*.txt` file.
pub(crate) fn parse_reference(text: &str) -> Result<Vec<TileLangInstance>, String> {
    let mut out: Vec<TileLangInstance> = Vec::new();
    let mut fragment: Option<PartialFragment> = None;
    for (number, line) in text.lines().enumerate() {
        let at = |message: String| format!("line {}: {message}", number + 1);
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        if let Some(header) = trimmed.strip_prefix("=== ") {
            out.push(parse_header(header).map_err(at)?);
            continue;
        }
        let current = out
            .last_mut()
            .ok_or_else(|| at("a record before any header".to_owned()))?;
        if trimmed == "(no fragment layouts printed)" {
            current.result = TileLangResult::NoFragments;
        } else if let Some(reason) = trimmed.strip_prefix("FAILED:") {
            current.result = TileLangResult::Failed(reason.trim().to_owned());
        } else if let Some(reason) = trimmed.strip_prefix("SKIPPED:") {
            current.result = TileLangResult::Skipped(reason.trim().to_owned());
        } else if let Some(name) = trimmed.strip_suffix(" inferred layout:") {
            fragment = Some(PartialFragment {
                name: name.to_owned(),
                ..PartialFragment::default()
            });
        } else {
            let partial = fragment
                .as_mut()
                .ok_or_else(|| at(format!("outside a fragment: {trimmed:?}")))?;
            let (key, value) = trimmed
                .split_once(':')
                .ok_or_else(|| at(format!("no `:` in {trimmed:?}")))?;
            let value = value.trim();
            match key {
                "Shape" => {
                    let (logical, local) = value
                        .split_once("->")
                        .ok_or_else(|| at("shape without `->`".to_owned()))?;
                    partial.shapes = Some((
                        parse_ints(logical).map_err(at)?,
                        parse_ints(local).map_err(at)?,
                    ));
                }
                "Thread" => {
                    partial.thread = Some((formula::parse(value).map_err(at)?, value.to_owned()));
                }
                "Index" => {
                    partial.index =
                        Some((formula::parse_tuple(value).map_err(at)?, value.to_owned()));
                }
                "Replicate" => {
                    let replicate = value.parse().map_err(|e| at(format!("replicate: {e}")))?;
                    let done = fragment
                        .take()
                        .ok_or_else(|| at("no fragment".to_owned()))?;
                    let missing = || at(format!("{} is incomplete", done.name));
                    let (shape, local_shape) = done.shapes.clone().ok_or_else(missing)?;
                    let (thread, thread_text) = done.thread.ok_or_else(missing)?;
                    let (index, index_text) = done.index.ok_or_else(missing)?;
                    let fragment = TileLangFragment {
                        name: done.name,
                        shape,
                        local_shape,
                        thread,
                        index,
                        replicate,
                        text: format!(
                            "thread {thread_text} | index {index_text} | replicate {replicate}"
                        ),
                    };
                    match &mut current.result {
                        TileLangResult::Fragments(list) => list.push(fragment),
                        other => *other = TileLangResult::Fragments(vec![fragment]),
                    }
                }
                _ => return Err(at(format!("unknown field {key:?}"))),
            }
        }
    }
    Ok(out)
}

/// The comparison of one fragment that both compilers lay out.
#[derive(Clone, Debug)]
pub(crate) struct Comparison {
    /// Every element is held by the same set of threads (counted with multiplicity).
    pub(crate) same_threads: bool,
    /// Elements whose thread sets differ, and the first of them.
    pub(crate) thread_mismatches: usize,
    pub(crate) first_mismatch: Option<String>,
    /// The first element whose (flattened) register differs.
    pub(crate) first_index_difference: Option<String>,
    pub(crate) ours_registers: i64,
    pub(crate) their_registers: i64,
    pub(crate) ours_replicate: i64,
    pub(crate) their_replicate: i64,
    /// The register index is the same function of the element (after flattening).
    pub(crate) same_index: bool,
    pub(crate) ours_text: String,
    pub(crate) their_text: String,
    pub(crate) origin: String,
}

/// Compares our layout of a fragment with TileLang's over the whole domain.
pub(crate) fn compare(
    arena: &tilec_ir::ExprArena,
    ours: &FragmentLayout,
    origin: &Origin,
    theirs: &TileLangFragment,
) -> Comparison {
    let ours_registers = ours.local_size(arena);
    let their_registers = theirs.local_shape.iter().product();
    let ours_local_shape = ours.local_shape(arena);
    let mut comparison = Comparison {
        same_threads: ours.shape == theirs.shape,
        thread_mismatches: 0,
        first_mismatch: None,
        first_index_difference: None,
        ours_registers,
        their_registers,
        ours_replicate: ours.replicate,
        their_replicate: theirs.replicate,
        same_index: ours.shape == theirs.shape,
        ours_text: ours.describe(arena),
        their_text: theirs.text.clone(),
        origin: format!("{origin:?}"),
    };
    if ours.shape != theirs.shape {
        comparison.first_mismatch = Some(format!(
            "shapes differ: ours {:?}, TileLang {:?}",
            ours.shape, theirs.shape
        ));
        return comparison;
    }
    let owners = ours.owners(arena);
    for point in points(&ours.shape) {
        let mut their_threads: Vec<Option<i64>> = (0..theirs.replicate)
            .map(|rep| theirs.thread.eval(&point, rep))
            .collect();
        their_threads.sort_unstable();
        let our_threads: Vec<Option<i64>> = owners
            .ordinal(&point)
            .map(|ordinal| owners.of(ordinal))
            .unwrap_or(&[])
            .iter()
            .map(|&t| (t >= 0).then_some(t))
            .collect();
        if our_threads != their_threads {
            comparison.same_threads = false;
            comparison.thread_mismatches += 1;
            if comparison.first_mismatch.is_none() {
                comparison.first_mismatch = Some(format!(
                    "element {point:?}: ours on {}, TileLang's on {}",
                    thread_set(&our_threads),
                    thread_set(&their_threads)
                ));
            }
        }
        let our_index = ours
            .local_of(arena, &point)
            .and_then(|local| flatten(&local, &ours_local_shape));
        let their_index = theirs
            .index
            .iter()
            .map(|f| f.eval(&point, 0))
            .collect::<Option<Vec<i64>>>()
            .and_then(|local| flatten(&local, &theirs.local_shape));
        if our_index.is_none() || our_index != their_index {
            comparison.same_index = false;
            if comparison.first_index_difference.is_none() {
                comparison.first_index_difference = Some(format!(
                    "element {point:?}: ours in register {our_index:?}, TileLang's in {their_index:?}"
                ));
            }
        }
    }
    comparison
}

/// A set of threads for messages: `{0, 8, 16, … (16 threads)}`; `?` where a formula has no value.
fn thread_set(threads: &[Option<i64>]) -> String {
    const SHOWN: usize = 6;
    let mut items: Vec<String> = threads
        .iter()
        .take(SHOWN)
        .map(|t| t.map_or_else(|| "?".to_owned(), |t| t.to_string()))
        .collect();
    if threads.len() > SHOWN {
        items.push(format!("… ({} threads)", threads.len()));
    }
    format!("{{{}}}", items.join(", "))
}

/// The row-major position of a local index in a local shape.
fn flatten(local: &[i64], shape: &[i64]) -> Option<i64> {
    if local.len() != shape.len() {
        return None;
    }
    local
        .iter()
        .zip(shape)
        .try_fold(0i64, |flat, (&index, &extent)| {
            flat.checked_mul(extent.max(1))?.checked_add(index)
        })
}
