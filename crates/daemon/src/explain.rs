//! `tilec explain CODE`: the documentation page of a diagnostic code.

use std::process::ExitCode;

use anyhow::{Result, bail};
use tilec_ir::Code;

/// The page of each code, from `docs/codes/`, compiled into the binary.
fn page(code: Code) -> &'static str {
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
    }
}

/// The first line of a page after its title: the one-sentence summary.
fn summary(code: Code) -> &'static str {
    page(code)
        .lines()
        .skip(1)
        .map(str::trim)
        .find(|line| !line.is_empty())
        .unwrap_or("")
}

pub fn run(code: Option<&str>) -> Result<ExitCode> {
    match code {
        None => {
            println!("diagnostic codes (run `tilec explain CODE` for one):\n");
            for code in Code::ALL {
                println!("  {:<24} {}", code.name(), summary(code));
            }
        }
        Some(name) => match Code::from_name(name.trim()) {
            Some(code) => print!("{}", page(code)),
            None => bail!("unknown code `{name}`; `tilec explain` lists them"),
        },
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use tilec_ir::Code;

    #[test]
    fn every_code_has_a_page_titled_with_it() {
        for code in Code::ALL {
            assert!(
                super::page(code).starts_with(&format!("# {}", code.name())),
                "{}",
                code.name()
            );
            assert!(!super::summary(code).is_empty(), "{}", code.name());
        }
    }
}
