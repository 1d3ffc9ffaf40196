//! `tilec layout`: the inferred layout of every fragment and parallel loop of a file's instances,
//! as formulas, a thread-ownership grid, or JSON Lines; with `--svg`, a picture per fragment.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use anyhow::{Result, bail};
use serde_json::json;
use tilec_db::{
    Db, Instance, SourceFile, kernel_positions, kernel_world, layouts, line_column, resources,
};
use tilec_ir::{EntityId, World};
use tilec_passes::layout::{FragmentLayout, Inferred, Layouts, Origin};

use crate::Format;
use crate::svg::{Picture, write_pictures};
use crate::workspace::{load_one, selected_instances};

/// The largest grid printed: wider tiles show their top-left corner.
const GRID_ROWS: i64 = 16;
const GRID_COLUMNS: i64 = 16;

pub fn run(
    path: &Path,
    kernel: Option<&str>,
    instance: Option<u32>,
    buffer: Option<&str>,
    format: Format,
    svg: Option<&Path>,
) -> Result<ExitCode> {
    let (workspace, file) = load_one(path)?;
    let db = &workspace.db;
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let selected = selected_instances(db, file, kernel, instance)?;
    if let Some(svg) = svg {
        write_svgs(&mut out, db, file, &selected, buffer, format, svg)?;
        return Ok(ExitCode::SUCCESS);
    }
    for candidate in selected {
        match format {
            Format::Human => print_human(&mut out, db, file, candidate, buffer),
            Format::Json => print_json(&mut out, db, file, candidate, buffer),
        }?;
    }
    Ok(ExitCode::SUCCESS)
}

/// `--svg OUT`: draws every selected fragment (see [`write_pictures`] for where the files go) and
/// prints the paths written, one per line or as JSON Lines.
fn write_svgs(
    out: &mut impl Write,
    db: &dyn Db,
    file: SourceFile,
    selected: &[Instance<'_>],
    wanted: Option<&str>,
    format: Format,
    target: &Path,
) -> Result<()> {
    let mut pictures = Vec::new();
    let mut available = Vec::new();
    for &instance in selected {
        let world = kernel_world(db, instance);
        let layouts = layouts(db, instance);
        let resources = resources(db, instance);
        for (&buffer, inferred) in &layouts.buffers {
            let name = world.name(buffer);
            available.push(name);
            if wanted.is_some_and(|w| w != name) {
                continue;
            }
            pictures.push(Picture {
                kernel: instance.kernel(db).name(db),
                instance: instance.index(db),
                buffer: name,
                registers: resources.fragment_registers.get(&buffer).copied(),
                layout: &inferred.layout,
                arena: &layouts.exprs,
            });
        }
    }
    if pictures.is_empty() {
        available.sort_unstable();
        available.dedup();
        let available = if available.is_empty() {
            "they have no fragment buffers".to_owned()
        } else {
            format!("fragments: {}", available.join(", "))
        };
        bail!(
            "no fragment{} to draw in the selected instances of {} ({available})",
            wanted.map_or(String::new(), |w| format!(" named `{w}`")),
            file.path(db).display()
        );
    }
    let written = write_pictures(target, &pictures)?;
    for (picture, path) in pictures.iter().zip(&written) {
        match format {
            Format::Human => writeln!(out, "{}", path.display())?,
            Format::Json => writeln!(
                out,
                "{}",
                json!({
                    "kind": "svg", "file": file.path(db).display().to_string(),
                    "kernel": picture.kernel, "instance": picture.instance,
                    "buffer": picture.buffer, "svg": path.display().to_string(),
                })
            )?,
        }
    }
    Ok(())
}

fn line_of(
    db: &dyn Db,
    file: SourceFile,
    instance: Instance<'_>,
    entity: EntityId,
) -> Option<usize> {
    let span = kernel_positions(db, instance).spans.get(entity)?;
    Some(line_column(db, file, span.start).0)
}

fn origin_words(world: &World, inferred: &Inferred) -> String {
    match &inferred.origin {
        Origin::Annotation => "T.annotate_layout".to_owned(),
        Origin::Gemm => "T.gemm (tensor-core accumulator)".to_owned(),
        Origin::Broadcast => "read at a constant index (replicated to every thread)".to_owned(),
        Origin::Plan { vector } => format!("planned ({vector}-wide vectors)"),
        Origin::Propagated { from } => match world.kind(*from) {
            Some(tilec_ir::EntityKind::Loop) => "the `T.Parallel` loop".to_owned(),
            Some(tilec_ir::EntityKind::TileOp) => "the `T.copy`".to_owned(),
            _ => format!("the layout of `{}`", world.name(*from)),
        },
        Origin::Reduce { from } => format!("reduction of `{}`", world.name(*from)),
    }
}

fn formulas(layouts: &Layouts, layout: &FragmentLayout) -> (String, Vec<String>) {
    let thread = layouts.exprs.display(layout.thread).to_string();
    let index = layout
        .index
        .iter()
        .map(|&e| layouts.exprs.display(e).to_string())
        .collect();
    (thread, index)
}

fn print_human(
    out: &mut impl Write,
    db: &dyn Db,
    file: SourceFile,
    instance: Instance<'_>,
    wanted: Option<&str>,
) -> std::io::Result<()> {
    let world = kernel_world(db, instance);
    let layouts = layouts(db, instance);
    let resources = resources(db, instance);
    writeln!(
        out,
        "# {} :: {} instance {}",
        file.path(db).display(),
        instance.kernel(db).name(db),
        instance.index(db)
    )?;
    for (&buffer, inferred) in &layouts.buffers {
        if wanted.is_some_and(|w| w != world.name(buffer)) {
            continue;
        }
        let (thread, index) = formulas(layouts, &inferred.layout);
        let line =
            line_of(db, file, instance, buffer).map_or(String::new(), |l| format!(" (line {l})"));
        let origin_line = line_of(db, file, instance, inferred.op)
            .map_or(String::new(), |l| format!(" at line {l}"));
        writeln!(
            out,
            "fragment {}{line}: shape {:?}",
            world.name(buffer),
            inferred.layout.shape
        )?;
        writeln!(out, "  thread    = {thread}")?;
        writeln!(out, "  index     = ({})", index.join(", "))?;
        writeln!(
            out,
            "  replicate = {}, {} registers per thread, from {}{origin_line}",
            inferred.layout.replicate,
            resources
                .fragment_registers
                .get(&buffer)
                .copied()
                .unwrap_or(0),
            origin_words(world, inferred),
        )?;
        if inferred.layout.shape.len() == 2 {
            print_grid(out, layouts, &inferred.layout)?;
        }
    }
    if wanted.is_none() {
        for (&entity, (inferred, vector)) in &layouts.loops {
            let (thread, _) = formulas(layouts, &inferred.layout);
            let line =
                line_of(db, file, instance, entity).map_or(String::new(), |l| format!("line {l}"));
            writeln!(
                out,
                "loop {line} over {:?}: thread = {thread}, vector width {vector}",
                inferred.layout.shape
            )?;
        }
    }
    writeln!(out)?;
    Ok(())
}

/// The thread owning each element (its first replica), rows by columns.
fn print_grid(
    out: &mut impl Write,
    layouts: &Layouts,
    layout: &FragmentLayout,
) -> std::io::Result<()> {
    let rows = layout.shape[0].min(GRID_ROWS);
    let columns = layout.shape[1].min(GRID_COLUMNS);
    let cells: Vec<Vec<String>> = (0..rows)
        .map(|i| {
            (0..columns)
                .map(|j| {
                    layout
                        .thread_of(&layouts.exprs, &[i, j], 0)
                        .map_or("?".to_owned(), |t| t.to_string())
                })
                .collect()
        })
        .collect();
    let width = cells
        .iter()
        .flatten()
        .map(String::len)
        .max()
        .unwrap_or(1)
        .max(2);
    let clipped = layout.shape[0] > rows || layout.shape[1] > columns;
    writeln!(
        out,
        "  thread of each element{}:",
        if clipped {
            format!(" (first {rows}×{columns})")
        } else {
            String::new()
        }
    )?;
    for row in cells {
        let row: Vec<String> = row.iter().map(|cell| format!("{cell:>width$}")).collect();
        writeln!(out, "    {}", row.join(" "))?;
    }
    Ok(())
}

fn print_json(
    out: &mut impl Write,
    db: &dyn Db,
    file: SourceFile,
    instance: Instance<'_>,
    wanted: Option<&str>,
) -> std::io::Result<()> {
    let world = kernel_world(db, instance);
    let layouts = layouts(db, instance);
    let resources = resources(db, instance);
    let path = file.path(db).display().to_string();
    let kernel = instance.kernel(db).name(db);
    let var_names = |layout: &FragmentLayout| -> Vec<String> {
        layout
            .vars
            .iter()
            .map(|&v| layouts.exprs.var_info(v).name.clone())
            .collect()
    };
    for (&buffer, inferred) in &layouts.buffers {
        if wanted.is_some_and(|w| w != world.name(buffer)) {
            continue;
        }
        let (thread, index) = formulas(layouts, &inferred.layout);
        let object = json!({
            "kind": "fragment", "file": path, "kernel": kernel, "instance": instance.index(db),
            "buffer": world.name(buffer), "line": line_of(db, file, instance, buffer),
            "shape": inferred.layout.shape, "vars": var_names(&inferred.layout),
            "rep_var": layouts.exprs.var_info(inferred.layout.rep).name,
            "thread": thread, "index": index, "replicate": inferred.layout.replicate,
            "registers_per_thread": resources.fragment_registers.get(&buffer),
            "origin_line": line_of(db, file, instance, inferred.op),
        });
        writeln!(out, "{object}")?;
    }
    if wanted.is_some() {
        return Ok(());
    }
    for (&entity, (inferred, vector)) in &layouts.loops {
        let (thread, _) = formulas(layouts, &inferred.layout);
        let object = json!({
            "kind": "loop", "file": path, "kernel": kernel, "instance": instance.index(db),
            "line": line_of(db, file, instance, entity), "vars": var_names(&inferred.layout),
            "extents": inferred.layout.shape, "thread": thread, "vector_width": vector,
        });
        writeln!(out, "{object}")?;
    }
    Ok(())
}
