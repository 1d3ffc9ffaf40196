//! `tilec bench`: per kernel instance, the cold time of parse + evaluate + checks, the cold time of
//! layout inference on top of it (a fresh database each time, as `tilec check` pays them), the
//! time to lower the instance and print its CUDA on top of that (what `tilec build --emit cuda`
//! adds, for the default target sm_90), and the time to recompute the file's diagnostics after an
//! edit elsewhere in the file (as an editor pays).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::Result;
use salsa::Setter;
use tilec_db::{
    RootDatabase, SourceFile, cuda_source, file_diagnostics, instance_checks, instances,
    kernel_positions, layouts, outline, resources, target,
};

use crate::workspace::collect_python_files;

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples.get(samples.len() / 2).copied().unwrap_or_default()
}

fn micros(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e6
}

/// Median times of one file, in microseconds per instance.
struct FileTimes {
    instances: usize,
    check: f64,
    layouts: f64,
    cuda: f64,
    edit: f64,
}

/// Times the pipeline on one file: cold front end + checks, cold layout inference, and the
/// recomputation of the file's diagnostics after an edit that changes no kernel.
fn time_file(path: &std::path::Path, text: &str, iterations: u32) -> Option<FileTimes> {
    let (mut check, mut layout, mut cuda) = (Vec::new(), Vec::new(), Vec::new());
    let mut count = 0;
    for _ in 0..iterations {
        let started = Instant::now();
        let db = RootDatabase::default();
        let file = SourceFile::new(&db, path.to_owned(), text.to_owned(), Vec::new());
        if !outline(&db, file).uses_tilelang {
            return None;
        }
        let all = instances(&db, file).clone();
        for &instance in &all {
            kernel_positions(&db, instance);
            instance_checks(&db, instance);
        }
        check.push(started.elapsed());
        let started = Instant::now();
        for &instance in &all {
            layouts(&db, instance);
            resources(&db, instance);
        }
        file_diagnostics(&db, file);
        layout.push(started.elapsed());
        let started = Instant::now();
        for &instance in &all {
            print_cuda(&db, instance);
        }
        cuda.push(started.elapsed());
        count = all.len();
    }
    if count == 0 {
        return None;
    }
    // An edit that changes no kernel (a comment appended) re-parses and re-derives positions:
    // what every keystroke outside the kernel being edited costs.
    let mut db = RootDatabase::default();
    let file = SourceFile::new(&db, path.to_owned(), text.to_owned(), Vec::new());
    file_diagnostics(&db, file);
    let mut edits = Vec::new();
    for round in 0..iterations {
        file.set_text(&mut db)
            .to(format!("{text}\n# edit {round}\n"));
        let started = Instant::now();
        file_diagnostics(&db, file);
        edits.push(started.elapsed());
    }
    let per = |samples: Vec<Duration>| micros(median(samples)) / count as f64;
    Some(FileTimes {
        instances: count,
        check: per(check),
        layouts: per(layout),
        cuda: per(cuda),
        edit: per(edits),
    })
}

/// Lowers `instance` and prints the CUDA of each launch (the query that memoizes it, in a fresh
/// database, so it runs); an instance that does not lower costs what finding that out costs.
fn print_cuda(db: &RootDatabase, instance: tilec_db::Instance<'_>) {
    std::hint::black_box(cuda_source(db, instance, target(db)));
}

pub(crate) fn run(paths: &[PathBuf], iterations: u32) -> Result<ExitCode> {
    if cfg!(debug_assertions) {
        eprintln!(
            "warning: this is a debug build; build with `cargo build --release` for meaningful numbers"
        );
    }
    let iterations = iterations.max(1);
    let files = collect_python_files(paths)?;
    let width = files
        .iter()
        .map(|path| path.display().to_string().len())
        .max()
        .unwrap_or(0)
        .max(20);
    println!(
        "{:<width$} {:>9} {:>16} {:>16} {:>14} {:>14}",
        "file", "instances", "check µs/inst", "layouts µs/inst", "cuda µs/inst", "edit µs/inst"
    );
    let mut totals = (0usize, 0.0f64, 0.0f64, 0.0f64, 0.0f64);
    for path in files {
        let text = std::fs::read_to_string(&path)?;
        let Some(times) = time_file(&path, &text, iterations) else {
            continue;
        };
        let n = times.instances as f64;
        totals = (
            totals.0 + times.instances,
            totals.1 + times.check * n,
            totals.2 + times.layouts * n,
            totals.3 + times.cuda * n,
            totals.4 + times.edit * n,
        );
        println!(
            "{:<width$} {:>9} {:>16.1} {:>16.1} {:>14.1} {:>14.1}",
            path.display().to_string(),
            times.instances,
            times.check,
            times.layouts,
            times.cuda,
            times.edit
        );
    }
    if totals.0 > 0 {
        let n = totals.0 as f64;
        println!(
            "{:<width$} {:>9} {:>16.1} {:>16.1} {:>14.1} {:>14.1}",
            "mean over instances",
            totals.0,
            totals.1 / n,
            totals.2 / n,
            totals.3 / n,
            totals.4 / n
        );
    }
    Ok(ExitCode::SUCCESS)
}
