//! `tilec bench`: parse + evaluate + check time per kernel instance, cold (a fresh database each
//! time, as `tilec check` pays it) and after an edit elsewhere in the file (as the editor pays it).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::Result;
use salsa::Setter;
use tilec_db::{RootDatabase, SourceFile, file_diagnostics, instances, outline};

use crate::workspace::collect_python_files;

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples.get(samples.len() / 2).copied().unwrap_or_default()
}

fn micros(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e6
}

pub fn run(paths: &[PathBuf], iterations: u32) -> Result<ExitCode> {
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
        "{:<width$} {:>9} {:>15} {:>15}",
        "file", "instances", "cold µs/inst", "edit µs/inst"
    );
    let (mut total_instances, mut total_cold, mut total_edit) = (0usize, 0.0f64, 0.0f64);
    for path in files {
        let text = std::fs::read_to_string(&path)?;
        let mut cold = Vec::new();
        let mut count = 0;
        for _ in 0..iterations {
            let started = Instant::now();
            let db = RootDatabase::default();
            let file = SourceFile::new(&db, path.clone(), text.clone(), Vec::new());
            if !outline(&db, file).uses_tilelang {
                break;
            }
            file_diagnostics(&db, file);
            count = instances(&db, file).len();
            cold.push(started.elapsed());
        }
        if count == 0 {
            continue;
        }
        // An edit that changes no kernel (a comment appended) re-parses and re-derives positions:
        // what every keystroke outside the kernel being edited costs.
        let mut db = RootDatabase::default();
        let file = SourceFile::new(&db, path.clone(), text.clone(), Vec::new());
        file_diagnostics(&db, file);
        let mut edits = Vec::new();
        for round in 0..iterations {
            file.set_text(&mut db)
                .to(format!("{text}\n# edit {round}\n"));
            let started = Instant::now();
            file_diagnostics(&db, file);
            edits.push(started.elapsed());
        }
        let per_cold = micros(median(cold)) / count as f64;
        let per_edit = micros(median(edits)) / count as f64;
        total_instances += count;
        total_cold += per_cold * count as f64;
        total_edit += per_edit * count as f64;
        println!(
            "{:<width$} {:>9} {:>15.1} {:>15.1}",
            path.display().to_string(),
            count,
            per_cold,
            per_edit
        );
    }
    if total_instances > 0 {
        println!(
            "{:<width$} {:>9} {:>15.1} {:>15.1}",
            "mean over instances",
            total_instances,
            total_cold / total_instances as f64,
            total_edit / total_instances as f64,
        );
    }
    Ok(ExitCode::SUCCESS)
}
