//! `tilec explain CODE`: the documentation page of a diagnostic code.

use std::process::ExitCode;

use anyhow::{Result, bail};
use tilec_ide::explain_page as page;
use tilec_ir::Code;

/// The first line of a page after its title: the one-sentence summary.
fn summary(code: Code) -> &'static str {
    page(code)
        .lines()
        .skip(1)
        .map(str::trim)
        .find(|line| !line.is_empty())
        .unwrap_or("")
}

pub(crate) fn run(code: Option<&str>) -> Result<ExitCode> {
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
