//! Mutations of Python source text: the edits a user makes while typing, and the ones that break
//! assumptions about sizes. Each mutant is a function of its seed alone, so a failure found by one
//! run is reproduced by naming its seed.
//!
//! The edits work on lines and on a rough tokenisation (identifiers, numbers, single characters),
//! never on bytes inside a character, so every mutant is valid UTF-8; it is usually not valid
//! Python, which is the point.

/// Values that break assumptions about sizes and counts: zero, negatives, odd numbers, powers of two
/// past every limit, numbers past 32 and 64 bits, and floats where integers are expected.
const INTERESTING_NUMBERS: &[&str] = &[
    "0",
    "1",
    "-1",
    "-16",
    "3",
    "7",
    "255",
    "1023",
    "65536",
    "(1 << 20)",
    "(1 << 31)",
    "2**40",
    "10**9",
    "(1 << 62)",
    "2**63",
    "2**64",
    "0.5",
    "1e30",
];

/// Lines that exercise the evaluator's limits and the checks' geometry, inserted with the
/// indentation of the line they precede.
const HOSTILE_LINES: &[&str] = &[
    "while True: pass",
    "x = [0] * (1 << 20)",
    "x = [0] * 10**9",
    "s = 'ab'\nfor _ in range(40): s = s + s",
    "for _ in range(10**12): pass",
    "assert False",
    "raise ValueError('x')",
    "def f(): return f()\nf()",
    "import does_not_exist",
    "from . import nothing_here",
    "T.Parallel(0)",
    "for i in T.Parallel(0): pass",
    "y = 1 // 0",
    "z = T.alloc_fragment((1 << 40,), 'float32')",
    "z = T.alloc_shared((0, 16), 'float16')",
    "z = T.alloc_local((-4,), 'float32')",
    "T.sync_threads()",
    "pass",
    "return",
    "break",
];

/// One kind of edit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Edit {
    /// Deletes one to three consecutive lines.
    DeleteLines,
    /// Repeats a line right after itself.
    DuplicateLine,
    /// Swaps a line with the next one.
    SwapLines,
    /// Replaces a number literal with an interesting value or a nearby one.
    ChangeNumber,
    /// Replaces an identifier with another identifier of the same file.
    ReplaceName,
    /// Replaces an operator or bracket with another one.
    ReplacePunctuation,
    /// Deletes one token.
    DeleteToken,
    /// Cuts the file at a random character.
    Truncate,
    /// Inserts a line of another seed, or a hostile line, with the local indentation.
    InsertLine,
}

impl Edit {
    pub const ALL: [Edit; 9] = [
        Edit::DeleteLines,
        Edit::DuplicateLine,
        Edit::SwapLines,
        Edit::ChangeNumber,
        Edit::ReplaceName,
        Edit::ReplacePunctuation,
        Edit::DeleteToken,
        Edit::Truncate,
        Edit::InsertLine,
    ];

    /// How often the edit is chosen, relative to the others: number changes find the most (sizes
    /// drive every limit), truncations the fewest (most truncations are parse errors).
    fn weight(self) -> u32 {
        match self {
            Edit::ChangeNumber => 6,
            Edit::InsertLine => 3,
            Edit::ReplaceName | Edit::DeleteLines | Edit::DeleteToken => 2,
            Edit::DuplicateLine | Edit::SwapLines | Edit::ReplacePunctuation | Edit::Truncate => 1,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Edit::DeleteLines => "delete-lines",
            Edit::DuplicateLine => "duplicate-line",
            Edit::SwapLines => "swap-lines",
            Edit::ChangeNumber => "change-number",
            Edit::ReplaceName => "replace-name",
            Edit::ReplacePunctuation => "replace-punctuation",
            Edit::DeleteToken => "delete-token",
            Edit::Truncate => "truncate",
            Edit::InsertLine => "insert-line",
        }
    }
}

/// A token of the rough tokenisation: a byte range of the text and what it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Token {
    start: usize,
    end: usize,
    kind: TokenKind,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TokenKind {
    Name,
    Number,
    Punctuation,
}

/// Splits `text` into names, numbers and single punctuation characters (whitespace dropped).
fn tokens(text: &str) -> Vec<Token> {
    let mut found = Vec::new();
    let mut chars = text.char_indices().peekable();
    while let Some((start, c)) = chars.next() {
        let continues: fn(char) -> bool = if c.is_alphabetic() || c == '_' {
            |c| c.is_alphanumeric() || c == '_'
        } else if c.is_ascii_digit() {
            |c| c.is_ascii_alphanumeric() || c == '.' || c == '_'
        } else if c.is_whitespace() {
            continue;
        } else {
            found.push(Token {
                start,
                end: start + c.len_utf8(),
                kind: TokenKind::Punctuation,
            });
            continue;
        };
        let mut end = start + c.len_utf8();
        while let Some(&(at, next)) = chars.peek() {
            if !continues(next) {
                break;
            }
            end = at + next.len_utf8();
            chars.next();
        }
        let kind = if c.is_ascii_digit() {
            TokenKind::Number
        } else {
            TokenKind::Name
        };
        found.push(Token { start, end, kind });
    }
    found
}

/// Applies one to three random edits to `text`. `donor` is another seed's text, whose lines
/// [`Edit::InsertLine`] may borrow. Returns the mutant and the edits made, for the report.
pub fn mutate(text: &str, donor: &str, rng: &mut fastrand::Rng) -> (String, Vec<Edit>) {
    let mut mutant = text.to_owned();
    let mut edits = Vec::new();
    for _ in 0..rng.usize(1..=3) {
        let edit = pick_edit(rng);
        if let Some(next) = apply(&mutant, donor, edit, rng) {
            mutant = next;
            edits.push(edit);
        }
    }
    (mutant, edits)
}

fn pick_edit(rng: &mut fastrand::Rng) -> Edit {
    let total: u32 = Edit::ALL.iter().map(|edit| edit.weight()).sum();
    let mut pick = rng.u32(0..total);
    for edit in Edit::ALL {
        if pick < edit.weight() {
            return edit;
        }
        pick -= edit.weight();
    }
    Edit::ChangeNumber
}

/// `text` with `edit` applied, or `None` when the text offers nothing to edit (no numbers, say).
pub fn apply(text: &str, donor: &str, edit: Edit, rng: &mut fastrand::Rng) -> Option<String> {
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    match edit {
        Edit::DeleteLines => {
            let first = rng.usize(0..lines.len().max(1));
            let count = rng.usize(1..=3);
            Some(splice_lines(&lines, first, count, &[]))
        }
        Edit::DuplicateLine => {
            let at = rng.usize(0..lines.len().max(1));
            let line = *lines.get(at)?;
            Some(splice_lines(&lines, at, 0, &[line]))
        }
        Edit::SwapLines => {
            if lines.len() < 2 {
                return None;
            }
            let at = rng.usize(0..lines.len() - 1);
            let mut swapped = lines.clone();
            swapped.swap(at, at + 1);
            Some(swapped.iter().map(|line| with_newline(line)).collect())
        }
        Edit::ChangeNumber => {
            let numbers: Vec<Token> = tokens(text)
                .into_iter()
                .filter(|token| token.kind == TokenKind::Number)
                .collect();
            let token = *rng.choice(&numbers)?;
            let replacement = new_number(&text[token.start..token.end], rng);
            Some(replace(text, token, &replacement))
        }
        Edit::ReplaceName => {
            let names: Vec<Token> = tokens(text)
                .into_iter()
                .filter(|token| token.kind == TokenKind::Name)
                .collect();
            let target = *rng.choice(&names)?;
            let source = *rng.choice(&names)?;
            Some(replace(text, target, &text[source.start..source.end]))
        }
        Edit::ReplacePunctuation => {
            const PUNCTUATION: &[&str] = &[
                "+", "-", "*", "/", "//", "%", "<", ">", "==", "(", ")", "[", "]", ",", ":", ".",
                "=", "**", "<<", "@",
            ];
            let marks: Vec<Token> = tokens(text)
                .into_iter()
                .filter(|token| token.kind == TokenKind::Punctuation)
                .collect();
            let token = *rng.choice(&marks)?;
            Some(replace(text, token, rng.choice(PUNCTUATION)?))
        }
        Edit::DeleteToken => {
            let all = tokens(text);
            let token = *rng.choice(&all)?;
            Some(replace(text, token, ""))
        }
        Edit::Truncate => {
            let boundaries: Vec<usize> = text.char_indices().map(|(at, _)| at).collect();
            let at = *rng.choice(&boundaries)?;
            Some(text[..at].to_owned())
        }
        Edit::InsertLine => {
            let at = rng.usize(0..=lines.len());
            let indent = lines
                .get(at)
                .map_or("", |line| &line[..line.len() - line.trim_start().len()]);
            let borrowed = if rng.bool() {
                let donor_lines: Vec<&str> =
                    donor.lines().filter(|l| !l.trim().is_empty()).collect();
                rng.choice(&donor_lines).map(|line| line.trim().to_owned())
            } else {
                None
            };
            let inserted = borrowed.unwrap_or_else(|| {
                rng.choice(HOSTILE_LINES)
                    .copied()
                    .unwrap_or("pass")
                    .to_owned()
            });
            let indented: String = inserted
                .lines()
                .map(|line| format!("{indent}{line}\n"))
                .collect();
            Some(splice_lines(&lines, at, 0, &[indented.as_str()]))
        }
    }
}

/// A new literal for `old`: an interesting value, or `old` doubled, halved or negated.
fn new_number(old: &str, rng: &mut fastrand::Rng) -> String {
    let value: Option<i64> = old.replace('_', "").parse().ok();
    match (rng.u8(0..4), value) {
        (0, Some(value)) => value.saturating_mul(2).to_string(),
        (1, Some(value)) => (value / 2).to_string(),
        (2, Some(value)) => format!("(-{value})"),
        _ => rng
            .choice(INTERESTING_NUMBERS)
            .copied()
            .unwrap_or("0")
            .to_owned(),
    }
}

fn replace(text: &str, token: Token, with: &str) -> String {
    format!("{}{with}{}", &text[..token.start], &text[token.end..])
}

/// `lines` with `count` lines from `first` replaced by `inserted` (each ending in a newline).
fn splice_lines(lines: &[&str], first: usize, count: usize, inserted: &[&str]) -> String {
    let first = first.min(lines.len());
    let end = (first + count).min(lines.len());
    lines[..first]
        .iter()
        .chain(inserted)
        .chain(&lines[end..])
        .map(|line| with_newline(line))
        .collect()
}

fn with_newline(line: &str) -> String {
    if line.ends_with('\n') {
        line.to_owned()
    } else {
        format!("{line}\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SOURCE: &str =
        "import tilelang.language as T\nM = 128\n\ndef k(n=4):\n    x = n * 2  # λ\n    return x\n";

    #[test]
    fn tokens_split_names_numbers_and_punctuation() {
        let found: Vec<(&str, TokenKind)> = tokens("x1 = f(0x10, 2.5)λ")
            .iter()
            .map(|token| (&"x1 = f(0x10, 2.5)λ"[token.start..token.end], token.kind))
            .collect();
        assert_eq!(
            found,
            [
                ("x1", TokenKind::Name),
                ("=", TokenKind::Punctuation),
                ("f", TokenKind::Name),
                ("(", TokenKind::Punctuation),
                ("0x10", TokenKind::Number),
                (",", TokenKind::Punctuation),
                ("2.5", TokenKind::Number),
                (")", TokenKind::Punctuation),
                ("λ", TokenKind::Name),
            ]
        );
    }

    #[test]
    fn every_edit_keeps_utf8_and_changes_the_text() {
        for edit in Edit::ALL {
            let mut changed = 0;
            for seed in 0..50 {
                let mut rng = fastrand::Rng::with_seed(seed);
                if let Some(mutant) = apply(SOURCE, "y = 3\n", edit, &mut rng) {
                    // Building a `String` already proves UTF-8; the text must also differ for
                    // most seeds, or the edit does nothing.
                    changed += usize::from(mutant != SOURCE);
                }
            }
            assert!(changed >= 25, "{} changed {changed} of 50", edit.name());
        }
    }

    #[test]
    fn a_mutant_is_a_function_of_its_seed() {
        let first = mutate(SOURCE, "y = 3\n", &mut fastrand::Rng::with_seed(7));
        let second = mutate(SOURCE, "y = 3\n", &mut fastrand::Rng::with_seed(7));
        assert_eq!(first, second);
    }

    #[test]
    fn number_changes_replace_whole_literals() {
        let mut rng = fastrand::Rng::with_seed(3);
        let mutant = apply("M = 128\n", "", Edit::ChangeNumber, &mut rng).unwrap_or_default();
        assert!(
            mutant.starts_with("M = ") && !mutant.contains("128"),
            "{mutant}"
        );
    }
}
