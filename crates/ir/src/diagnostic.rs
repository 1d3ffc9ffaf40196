//! Diagnostics: stable codes, severities, and where a diagnostic points.
//!
//! The front end knows source positions and anchors its diagnostics at byte spans; passes only see the
//! position-free world and anchor theirs at entities. Both are resolved to file positions by the
//! database, through the instance's span table.

use std::fmt;

use crate::span::Span;
use crate::world::EntityId;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Severity {
    Error,
    Warning,
    Info,
    /// tilec cannot analyse this part of the kernel (an operation or a Python construct it does not
    /// support yet): a limit of tilec's, never an error in the kernel. Like an error it stops the
    /// instance's analysis, so its other checks are withheld; unlike one, `tilec check` exits 0 on
    /// it unless `--strict`, so that CI can gate on the kernel's own errors alone.
    NotAnalysed,
}

impl Severity {
    pub fn name(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Info => "info",
            Severity::NotAnalysed => "not-analysed",
        }
    }

    /// Whether a diagnostic of this severity leaves its instance unanalysed: an error, or a
    /// construct tilec does not support. Neither instance can be checked further or lowered.
    pub fn stops_analysis(self) -> bool {
        match self {
            Severity::Error | Severity::NotAnalysed => true,
            Severity::Warning | Severity::Info => false,
        }
    }
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A stable diagnostic code. Each has a kebab-case name and a `tilec explain` page.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Code {
    ParseError,
    UndefinedName,
    UnsupportedSyntax,
    AssertionFailed,
    MissingArgument,
    InvalidCall,
    MetaError,
    ShapeMismatch,
    DtypeMismatch,
    ScopeMismatch,
    SharedMemoryCapacity,
    ConfigError,
    LayoutConflict,
    DataRace,
    RegisterPressure,
    InvalidLayout,
    UnevenPartition,
    CannotLower,
    GenericInstance,
    UnresolvedImport,
    AnalysisLimit,
    NotAnalysed,
}

impl Code {
    pub const ALL: [Code; 22] = [
        Code::ParseError,
        Code::UndefinedName,
        Code::UnsupportedSyntax,
        Code::AssertionFailed,
        Code::MissingArgument,
        Code::InvalidCall,
        Code::MetaError,
        Code::ShapeMismatch,
        Code::DtypeMismatch,
        Code::ScopeMismatch,
        Code::SharedMemoryCapacity,
        Code::ConfigError,
        Code::LayoutConflict,
        Code::DataRace,
        Code::RegisterPressure,
        Code::InvalidLayout,
        Code::UnevenPartition,
        Code::CannotLower,
        Code::GenericInstance,
        Code::UnresolvedImport,
        Code::AnalysisLimit,
        Code::NotAnalysed,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Code::ParseError => "parse-error",
            Code::UndefinedName => "undefined-name",
            Code::UnsupportedSyntax => "unsupported-syntax",
            Code::AssertionFailed => "assertion-failed",
            Code::MissingArgument => "missing-argument",
            Code::InvalidCall => "invalid-call",
            Code::MetaError => "meta-error",
            Code::ShapeMismatch => "shape-mismatch",
            Code::DtypeMismatch => "dtype-mismatch",
            Code::ScopeMismatch => "scope-mismatch",
            Code::SharedMemoryCapacity => "shared-memory-capacity",
            Code::ConfigError => "config-error",
            Code::LayoutConflict => "layout-conflict",
            Code::DataRace => "data-race",
            Code::RegisterPressure => "register-pressure",
            Code::InvalidLayout => "invalid-layout",
            Code::UnevenPartition => "uneven-partition",
            Code::CannotLower => "cannot-lower",
            Code::GenericInstance => "generic-instance",
            Code::UnresolvedImport => "unresolved-import",
            Code::AnalysisLimit => "analysis-limit",
            Code::NotAnalysed => "not-analysed",
        }
    }

    /// The code in one sentence: the summary column of `docs/codes/README.md` (the tidy test
    /// checks that the table there is exactly [`Code::ALL`] with these summaries and severities).
    pub fn summary(self) -> &'static str {
        match self {
            Code::ParseError => "The file is not valid Python at this point.",
            Code::UndefinedName => "A name is used but nothing defines it.",
            Code::UnsupportedSyntax => {
                "Python or a `T.*` operation used where TileLang does not allow it."
            }
            Code::AssertionFailed => "An `assert` is false for this instance's arguments.",
            Code::MissingArgument => "A call leaves out a parameter without a default.",
            Code::InvalidCall => "An operation or function gets arguments that do not fit.",
            Code::MetaError => "Compile-time Python fails for this instance's arguments.",
            Code::ShapeMismatch => "Tile or tensor extents do not fit the operation.",
            Code::DtypeMismatch => "An unknown dtype, or operand dtypes that do not fit.",
            Code::ScopeMismatch => "A buffer is in a memory the operation cannot use.",
            Code::SharedMemoryCapacity => "Shared memory exceeds the per-block limit.",
            Code::ConfigError => "A `tilec.toml` cannot be read or is malformed.",
            Code::LayoutConflict => {
                "A loop needs a fragment's elements on threads where its layout does not put them."
            }
            Code::DataRace => {
                "Several iterations of one `T.Parallel` loop store to the same element."
            }
            Code::RegisterPressure => {
                "The fragments live at one point need more than 255 registers per thread."
            }
            Code::InvalidLayout => {
                "An annotated fragment layout puts two elements in one register, or uses threads outside the block."
            }
            Code::UnevenPartition => {
                "A fragment loop's iterations do not divide evenly among the block's threads."
            }
            Code::CannotLower => {
                "`tilec run` or `tilec build` cannot turn an operation into per-thread code yet."
            }
            Code::GenericInstance => {
                "A kernel is analysed with some parameters symbolic or assumed (no call site gives them)."
            }
            Code::UnresolvedImport => {
                "A relative import names no file of the workspace, or an import closes a cycle."
            }
            Code::AnalysisLimit => {
                "tilec stopped analysing here: the code exceeds one of tilec's own limits."
            }
            Code::NotAnalysed => {
                "An operation or Python construct tilec does not support yet; the kernel's other checks are withheld."
            }
        }
    }

    /// The severity a diagnostic of this code usually has. `register-pressure` is an error for a
    /// buffer no block could hold (past 2^20 elements); every other code always has this one.
    pub fn usual_severity(self) -> Severity {
        match self {
            Code::ParseError
            | Code::UndefinedName
            | Code::UnsupportedSyntax
            | Code::AssertionFailed
            | Code::MissingArgument
            | Code::InvalidCall
            | Code::MetaError
            | Code::ShapeMismatch
            | Code::DtypeMismatch
            | Code::ScopeMismatch
            | Code::SharedMemoryCapacity
            | Code::ConfigError
            | Code::LayoutConflict
            | Code::InvalidLayout
            | Code::CannotLower => Severity::Error,
            Code::DataRace
            | Code::RegisterPressure
            | Code::UnevenPartition
            | Code::AnalysisLimit => Severity::Warning,
            Code::GenericInstance | Code::UnresolvedImport => Severity::Info,
            Code::NotAnalysed => Severity::NotAnalysed,
        }
    }

    pub fn from_name(name: &str) -> Option<Code> {
        Code::ALL.into_iter().find(|code| code.name() == name)
    }
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Where a diagnostic (or one of its related locations) points.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Anchor {
    /// A byte range in the file (front-end diagnostics).
    Span(Span),
    /// An entity of the instance's world (pass diagnostics); resolved through the span table.
    Entity(EntityId),
}

/// A secondary location: the allocation that adds to a total, the op that fixed a layout.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Related {
    pub anchor: Anchor,
    pub message: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Diagnostic {
    pub code: Code,
    pub severity: Severity,
    pub message: String,
    pub anchor: Anchor,
    pub related: Vec<Related>,
    /// A suggestion in words ("use `T.exp` inside a kernel").
    pub help: Option<String>,
}

impl Diagnostic {
    pub fn error(code: Code, anchor: Anchor, message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            code,
            severity: Severity::Error,
            message: message.into(),
            anchor,
            related: Vec::new(),
            help: None,
        }
    }

    /// A construct tilec cannot analyse yet ([`Code::NotAnalysed`], [`Severity::NotAnalysed`]).
    pub fn not_analysed(anchor: Anchor, message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            severity: Severity::NotAnalysed,
            ..Diagnostic::error(Code::NotAnalysed, anchor, message)
        }
    }

    pub fn warning(code: Code, anchor: Anchor, message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            severity: Severity::Warning,
            ..Diagnostic::error(code, anchor, message)
        }
    }

    pub fn info(code: Code, anchor: Anchor, message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            severity: Severity::Info,
            ..Diagnostic::error(code, anchor, message)
        }
    }

    pub fn with_help(mut self, help: impl Into<String>) -> Diagnostic {
        self.help = Some(help.into());
        self
    }

    pub fn with_related(mut self, anchor: Anchor, message: impl Into<String>) -> Diagnostic {
        self.related.push(Related {
            anchor,
            message: message.into(),
        });
        self
    }
}
