//! `tilec layout`: the inferred layout of every fragment and parallel loop of a file's instances,
//! as formulas, a thread-ownership grid, or JSON Lines; with `--svg`, a picture per fragment.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use anyhow::{Result, bail};
use serde_json::json;
use tilec_db::{
    Db, Instance, SourceFile, kernel_positions, kernel_world, layouts, line_column, loop_plans,
    resources,
};
use tilec_ir::{EntityId, World};
use tilec_passes::check::format_bytes;
use tilec_passes::layout::{FragmentLayout, Layouts, LoopPlan};
use tilec_passes::resources::Resources;

use crate::Format;
use crate::svg::write_pictures;
use crate::workspace::{InstanceSelection, load_one, refuse};
use tilec_ide::describe::{
    formulas, grid_is_clipped, origin_words, ownership_grid, plan_words, register_words,
    shared_layout_words, shared_of,
};
use tilec_ide::svg::Picture;

/// The largest grid printed: wider tiles show their top-left corner.
const GRID_ROWS: i64 = 16;
const GRID_COLUMNS: i64 = 16;

pub(crate) fn run(
    path: &Path,
    selection: &InstanceSelection,
    buffer: Option<&str>,
    format: Format,
    svg: Option<&Path>,
) -> Result<ExitCode> {
    let (workspace, file) = load_one(path)?;
    let db = &workspace.db;
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let selected = selection.selected_with(db, file)?;
    if let Some(wanted) = buffer {
        check_buffer_exists(db, &selected, wanted)?;
    }
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

/// `--buffer NAME` names a fragment of at least one selected instance; otherwise the command would
/// print headers with nothing under them, so it is refused with the fragments there are.
fn check_buffer_exists(db: &dyn Db, selected: &[Instance<'_>], wanted: &str) -> Result<()> {
    let mut fragments: Vec<&str> = Vec::new();
    for &instance in selected {
        let world = kernel_world(db, instance);
        fragments.extend(layouts(db, instance).buffers.keys().map(|&b| world.name(b)));
    }
    if fragments.contains(&wanted) {
        return Ok(());
    }
    fragments.sort_unstable();
    fragments.dedup();
    if fragments.is_empty() {
        refuse!("no fragment {wanted}; the selected instances have no fragment buffers");
    }
    refuse!("no fragment {wanted}; fragments: {}", fragments.join(", "))
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
        for picture in Picture::of_instance(db, instance) {
            available.push(picture.buffer);
            if wanted.is_none_or(|w| w == picture.buffer) {
                pictures.push(picture);
            }
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

/// Per launch: threads, shared memory (each buffer with its stages), fragment registers at the
/// peak, and blocks per multiprocessor.
fn print_launches(
    out: &mut impl Write,
    world: &World,
    layouts: &Layouts,
    resources: &Resources,
) -> std::io::Result<()> {
    for (launch, info) in world.launches.iter() {
        let shared = resources.peak_shared.get(&launch).copied().unwrap_or(0);
        let registers = resources.peak_registers.get(&launch).copied().unwrap_or(0);
        writeln!(
            out,
            "launch: {} threads, {} shared memory at the peak, ~{registers} fragment registers per thread at the peak",
            info.thread_count(),
            format_bytes(shared),
        )?;
        for (&buffer, shared) in shared_of(world, resources, launch) {
            let stages = if shared.stages > 1 {
                format!(" ({} stages)", shared.stages)
            } else {
                String::new()
            };
            let layout = layouts
                .shared
                .get(&buffer)
                .map(|assigned| shared_layout_words(world, assigned))
                .unwrap_or_default();
            writeln!(
                out,
                "  shared {}: {}{stages}{layout}",
                world.name(buffer),
                format_bytes(shared.bytes)
            )?;
        }
        if let Some(occupancy) = resources.occupancy.get(&launch) {
            writeln!(
                out,
                "  {} block(s) per multiprocessor, limited by {}",
                occupancy.blocks_per_sm,
                occupancy.limited_by.name()
            )?;
        }
    }
    Ok(())
}

fn plan_record(plan: &LoopPlan) -> serde_json::Value {
    match plan {
        LoopPlan::Dense {
            threads,
            per_thread,
        } => json!({"kind": "dense", "threads": threads, "per_thread": per_thread}),
        LoopPlan::Guarded { active, per_thread } => {
            json!({"kind": "guarded", "active_threads": active, "per_thread": per_thread})
        }
    }
}

/// The JSON Lines record of each launch (`"kind": "kernel"`).
fn launch_records(world: &World, resources: &Resources) -> Vec<serde_json::Value> {
    world
        .launches
        .iter()
        .map(|(launch, info)| {
            let shared: serde_json::Map<String, serde_json::Value> =
                shared_of(world, resources, launch)
                    .map(|(&buffer, shared)| {
                        let value = json!({"bytes": shared.bytes, "stages": shared.stages});
                        (world.name(buffer).to_owned(), value)
                    })
                    .collect();
            let occupancy = resources.occupancy.get(&launch);
            json!({
                "threads": info.thread_count(),
                "shared_bytes": resources.peak_shared.get(&launch),
                "shared_buffers": shared,
                "fragment_registers_per_thread": resources.peak_registers.get(&launch),
                "blocks_per_sm": occupancy.map(|o| o.blocks_per_sm),
                "occupancy_limited_by": occupancy.map(|o| o.limited_by.name()),
            })
        })
        .collect()
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
    if wanted.is_none() {
        print_launches(out, world, layouts, resources)?;
    }
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
        let registers = register_words(world, resources, buffer);
        writeln!(
            out,
            "  replicate = {}, {registers}, from {}{origin_line}",
            inferred.layout.replicate,
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
            if let Some(plan) = loop_plans(db, instance).get(&entity) {
                writeln!(out, "  {}", plan_words(plan))?;
            }
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
    let clipped = grid_is_clipped(layout, GRID_ROWS, GRID_COLUMNS);
    let rows = layout.shape[0].min(GRID_ROWS);
    let columns = layout.shape[1].min(GRID_COLUMNS);
    writeln!(
        out,
        "  thread of each element{}:",
        if clipped {
            format!(" (first {rows}×{columns})")
        } else {
            String::new()
        }
    )?;
    for row in ownership_grid(layouts, layout, GRID_ROWS, GRID_COLUMNS) {
        writeln!(out, "    {row}")?;
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
            "registers_per_thread": resources.fragment_registers.get(&world.storage_of(buffer)),
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
            "plan": loop_plans(db, instance).get(&entity).map(plan_record),
        });
        writeln!(out, "{object}")?;
    }
    for mut record in launch_records(world, resources) {
        if let Some(fields) = record.as_object_mut() {
            let mut line = serde_json::Map::new();
            line.insert("kind".to_owned(), json!("kernel"));
            line.insert("file".to_owned(), json!(path));
            line.insert("kernel".to_owned(), json!(kernel));
            line.insert("instance".to_owned(), json!(instance.index(db)));
            line.append(fields);
            writeln!(out, "{}", serde_json::Value::Object(line))?;
        }
    }
    Ok(())
}
