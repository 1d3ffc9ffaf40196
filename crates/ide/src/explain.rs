//! The documentation pages of the diagnostic codes.

use tilec_ir::Code;

/// The documentation page of a diagnostic code (markdown, from `docs/codes/`, compiled in): what
/// `tilec explain CODE` prints and what a diagnostic's link opens in the editor.
pub fn explain_page(code: Code) -> &'static str {
    match code {
        Code::ParseError => include_str!("../../../docs/codes/parse-error.md"),
        Code::UndefinedName => include_str!("../../../docs/codes/undefined-name.md"),
        Code::UnsupportedSyntax => include_str!("../../../docs/codes/unsupported-syntax.md"),
        Code::AssertionFailed => include_str!("../../../docs/codes/assertion-failed.md"),
        Code::MissingArgument => include_str!("../../../docs/codes/missing-argument.md"),
        Code::InvalidCall => include_str!("../../../docs/codes/invalid-call.md"),
        Code::MetaError => include_str!("../../../docs/codes/meta-error.md"),
        Code::ShapeMismatch => include_str!("../../../docs/codes/shape-mismatch.md"),
        Code::DtypeMismatch => include_str!("../../../docs/codes/dtype-mismatch.md"),
        Code::ScopeMismatch => include_str!("../../../docs/codes/scope-mismatch.md"),
        Code::SharedMemoryCapacity => include_str!("../../../docs/codes/shared-memory-capacity.md"),
        Code::ConfigError => include_str!("../../../docs/codes/config-error.md"),
        Code::LayoutConflict => include_str!("../../../docs/codes/layout-conflict.md"),
        Code::DataRace => include_str!("../../../docs/codes/data-race.md"),
        Code::RegisterPressure => include_str!("../../../docs/codes/register-pressure.md"),
        Code::InvalidLayout => include_str!("../../../docs/codes/invalid-layout.md"),
        Code::UnevenPartition => include_str!("../../../docs/codes/uneven-partition.md"),
        Code::CannotLower => include_str!("../../../docs/codes/cannot-lower.md"),
        Code::GenericInstance => include_str!("../../../docs/codes/generic-instance.md"),
        Code::UnresolvedImport => include_str!("../../../docs/codes/unresolved-import.md"),
        Code::AnalysisLimit => include_str!("../../../docs/codes/analysis-limit.md"),
        Code::NotAnalysed => include_str!("../../../docs/codes/not-analysed.md"),
    }
}
