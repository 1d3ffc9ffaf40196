//! `tilec check` and `tilec ir`.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Result;
use tilec_db::{file_diagnostics, instance_reports, kernel_world, outline};
use tilec_ir::Severity;

use crate::Format;
use crate::render;
use crate::workspace::{Workspace, load_one, parse_target, selected_instances};

fn styled() -> bool {
    std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none()
}

/// Checks the files under `paths`. `strict` makes what tilec cannot analyse (`not-analysed`) fail
/// the check like an error; without it only the kernels' own errors do.
pub(crate) fn run(
    paths: &[PathBuf],
    format: Format,
    target: Option<&str>,
    strict: bool,
) -> Result<ExitCode> {
    let started = Instant::now();
    let cli_target = parse_target(target)?;
    let workspace = Workspace::load(paths)?;
    let target = cli_target.or(workspace.manifest_target).unwrap_or_default();
    let db = &workspace.db;
    let _settings = workspace.apply_settings(target);
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let (mut errors, mut warnings, mut instance_count, mut checked) =
        (0usize, 0usize, 0usize, 0usize);
    let mut not_analysed = 0usize;
    for problem in &workspace.manifest_problems {
        errors += 1;
        match format {
            Format::Human => writeln!(
                out,
                "{}\n",
                render::human_plain(
                    &problem.path,
                    &problem.text,
                    "config-error",
                    &problem.message,
                    problem.span,
                    styled()
                )
            )?,
            Format::Json => writeln!(
                out,
                "{}",
                serde_json::json!({
                    "kind": "diagnostic", "file": problem.path.display().to_string(), "line": 1, "column": 1,
                    "end_line": 1, "end_column": 1, "severity": "error", "code": "config-error",
                    "message": problem.message, "kernel": null, "instance": null, "related": [],
                })
            )?,
        }
    }
    report_unreadable(&workspace);
    for &file in &workspace.files {
        if !outline(db, file).uses_tilelang {
            continue;
        }
        checked += 1;
        let path = file.path(db).clone();
        let reports = instance_reports(db, file);
        instance_count += reports.len();
        if format == Format::Json {
            for report in &reports {
                writeln!(out, "{}", render::instance_json(&path, report))?;
            }
        }
        for diagnostic in file_diagnostics(db, file) {
            match diagnostic.severity {
                Severity::Error => errors += 1,
                Severity::Warning => warnings += 1,
                Severity::NotAnalysed => not_analysed += 1,
                Severity::Info => {}
            }
            match format {
                Format::Human => {
                    let named = with_instance_named(db, file, diagnostic);
                    writeln!(
                        out,
                        "{}\n",
                        render::human(&path, file.text(db), &named, styled())
                    )?
                }
                Format::Json => writeln!(out, "{}", render::diagnostic_json(db, file, diagnostic))?,
            }
        }
    }
    if format == Format::Human {
        let elapsed = started.elapsed();
        let not_analysed = match not_analysed {
            0 => String::new(),
            n => format!(", {n} construct(s) tilec cannot analyse yet"),
        };
        writeln!(
            out,
            "checked {checked} file(s), {instance_count} kernel instance(s) for {target}: {errors} error(s), {warnings} warning(s){not_analysed} in {:.1} ms",
            elapsed.as_secs_f64() * 1000.0,
        )?;
    }
    Ok(if !workspace.unreadable.is_empty() {
        ExitCode::from(2)
    } else if errors > 0 || (strict && not_analysed > 0) {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// `diagnostic` with the instance it belongs to named in its note, for people: a diagnostic that
/// every instance of its kernel shares has no note from the database (which names instances only to
/// tell them apart), but its message may depend on the arguments, so the text says which ones
/// (`in instance 0 (M=4096, N=8192) of `rms_norm``, `in all 3 instances of `gemm``).
fn with_instance_named(
    db: &dyn tilec_db::Db,
    file: tilec_db::SourceFile,
    diagnostic: &tilec_db::FileDiagnostic,
) -> tilec_db::FileDiagnostic {
    let mut named = diagnostic.clone();
    let Some(kernel) = diagnostic.kernel.as_deref() else {
        return named;
    };
    if named.instances_note.is_some() || diagnostic.shown_by.is_empty() {
        return named;
    }
    let instances: Vec<_> = tilec_db::instances(db, file)
        .iter()
        .filter(|instance| instance.kernel(db).name(db) == kernel)
        .filter(|instance| diagnostic.shown_by.contains(&instance.index(db)))
        .collect();
    named.instances_note = match instances.as_slice() {
        [] => None,
        [instance] => {
            let args: Vec<String> = instance
                .args(db)
                .iter()
                .map(|(name, value)| format!("{name}={value}"))
                .collect();
            Some(format!(
                "in instance {} ({}) of `{kernel}`",
                instance.index(db),
                args.join(", ")
            ))
        }
        several => Some(format!("in all {} instances of `{kernel}`", several.len())),
    };
    named
}

/// Names each file that could not be read, on stderr: the other files are checked all the same,
/// and the exit code (2) says that some were not.
pub(crate) fn report_unreadable(workspace: &Workspace) {
    for (path, why) in &workspace.unreadable {
        eprintln!("error: cannot read {}: {why}", path.display());
    }
}

pub(crate) fn print_ir(
    path: &Path,
    kernel: Option<&str>,
    instance: Option<u32>,
) -> Result<ExitCode> {
    let (workspace, file) = load_one(path)?;
    let db = &workspace.db;
    let mut out = std::io::stdout().lock();
    for candidate in selected_instances(db, file, kernel, instance)? {
        let name = candidate.kernel(db).name(db);
        writeln!(
            out,
            "# {} :: {name} instance {}",
            path.display(),
            candidate.index(db)
        )?;
        writeln!(out, "{}", kernel_world(db, candidate).pretty())?;
    }
    Ok(ExitCode::SUCCESS)
}
