//! Semantic checks of a world: region shapes of tile ops, gemm and reduce extents, dtypes, scopes,
//! shared-memory capacity per target, and register buffers no block could hold.

use tilec_ir::{
    Anchor, Code, DType, Diagnostic, EntityId, ExprId, LoopKind, Region, Scope, Target, TileOp,
    World,
};

use crate::liveness::{launch_of, linearize, live_range, peak};
use crate::regions::{certainly_differ, format_extents, resolve_extents, squeeze};

mod reducers;

/// Every diagnostic the checks find in `world` for `target`, in entity order.
///
/// A world the front end could not finish (`incomplete`) is not checked: its errors are already
/// reported, and checking what is left would only add noise.
pub fn check_world(world: &World, target: Target) -> Vec<Diagnostic> {
    if world.incomplete {
        return Vec::new();
    }
    // Resolving extents interns new expressions, so the checks work on a scratch copy.
    let mut scratch = world.clone();
    let mut diagnostics = Vec::new();
    for (entity, op) in world.ops.iter() {
        let found = match op {
            TileOp::Copy { src, dst } => check_copy(&mut scratch, entity, src, dst),
            TileOp::Gemm {
                a,
                b,
                c,
                transpose_a,
                transpose_b,
                ..
            } => check_gemm(&mut scratch, entity, [a, b, c], *transpose_a, *transpose_b),
            TileOp::Reduce { src, dst, dim, .. } => {
                check_reduce(&mut scratch, entity, op.name(), src, dst, *dim)
            }
            TileOp::Scan { src, dst, dim, .. } => {
                check_scan(&mut scratch, entity, op.name(), (src, dst), *dim)
            }
            TileOp::AnnotateLayout { buffer, layout } => {
                check_annotation(world, entity, *buffer, &layout.shape)
            }
            TileOp::Fill { dst, value, .. } => {
                reducers::check_reducer_fill(world, entity, dst, *value)
            }
            _ => Vec::new(),
        };
        diagnostics.extend(found);
    }
    diagnostics.extend(reducers::check_reducer_stores(world));
    diagnostics.extend(check_thread_indexed_fragments(world));
    diagnostics.extend(check_shared_memory(world, target));
    diagnostics.extend(check_register_buffer_sizes(world));
    diagnostics.extend(check_parallel_loop_sizes(world));
    diagnostics
}

/// The most (iteration, thread) pairs of one `T.Parallel` loop that layout inference lays out: it
/// enumerates each iteration on each thread that may run it, and a loop whose every iteration
/// writes one element is replicated over the whole block (2^23 pairs of such a loop take 4 s and
/// a gigabyte; 2^27, a million iterations over 128 threads, took a minute and more memory than
/// the fuzzer allows). A 256 × 256 tile over 256 threads is 2^24.
pub const MAX_PARALLEL_LOOP_WORK: u64 = 1 << 24;

/// The `T.Parallel` loops over [`MAX_PARALLEL_LOOP_WORK`] (iterations × block threads), with their
/// iteration counts.
pub(crate) fn oversized_parallel_loops(
    world: &World,
) -> impl Iterator<Item = (EntityId, u64)> + '_ {
    let threads = world
        .launches
        .iter()
        .map(|(_, launch)| u64::try_from(launch.thread_count()).unwrap_or(u64::MAX))
        .max()
        .unwrap_or(1);
    world.loops.iter().filter_map(move |(entity, info)| {
        if info.kind != LoopKind::Parallel {
            return None;
        }
        let iterations = info.extents.iter().try_fold(1u64, |count, &extent| {
            let extent = u64::try_from(world.exprs.as_int(extent)?).ok()?;
            count.checked_mul(extent)
        });
        let iterations = iterations.unwrap_or(u64::MAX);
        (iterations.saturating_mul(threads) > MAX_PARALLEL_LOOP_WORK)
            .then_some((entity, iterations))
    })
}

/// Parallel loops too large for layout inference to enumerate: an `analysis-limit` warning at the
/// loop (what tilec cannot analyse, not the user's error); the kernel is then not laid out.
fn check_parallel_loop_sizes(world: &World) -> Vec<Diagnostic> {
    oversized_parallel_loops(world)
        .map(|(entity, iterations)| {
            let iterations = match iterations {
                u64::MAX => "more than 2^64".to_owned(),
                n => n.to_string(),
            };
            Diagnostic::warning(
                Code::AnalysisLimit,
                Anchor::Entity(entity),
                format!(
                    "this `T.Parallel` loop has {iterations} iterations; with the block's threads \
                     that is more than the {MAX_PARALLEL_LOOP_WORK} (iteration, thread) pairs tilec \
                     lays out, so the kernel's layouts are not inferred"
                ),
            )
            .with_help("split the loop over a `T.serial` or `T.Pipelined` loop of smaller tiles")
        })
        .collect()
}

/// A fragment's elements are spread over the threads by its layout, which inference chooses from
/// how the kernel's tile operations and parallel loops walk it: an index that names the thread
/// itself (`frag[T.get_thread_binding()]`) would fix which thread holds an element regardless of
/// that layout. tilec refuses it; a per-thread buffer is `T.alloc_local`.
fn check_thread_indexed_fragments(world: &World) -> Vec<Diagnostic> {
    let threads: Vec<_> = world
        .launches
        .iter()
        .filter_map(|(_, launch)| launch.thread_var)
        .collect();
    if threads.is_empty() {
        return Vec::new();
    }
    let mut diagnostics = Vec::new();
    for (entity, accesses) in world.accesses.iter() {
        let fragment = accesses.iter().find(|access| {
            world.scopes.get(world.storage_of(access.region.buffer)) == Some(&Scope::Fragment)
                && access.region.dims.iter().any(|dim| {
                    std::iter::once(dim.start)
                        .chain(dim.extent)
                        .any(|e| world.exprs.vars_of(e).iter().any(|v| threads.contains(v)))
                })
        });
        if let Some(access) = fragment {
            diagnostics.push(Diagnostic::not_analysed(
                Anchor::Entity(entity),
                format!(
                    "`{}` is a fragment, whose elements layout inference spreads over the \
                     threads: tilec does not index one with the thread index \
                     (`T.get_thread_binding` and its kin); a buffer each thread holds in full \
                     is `T.alloc_local`",
                    world.name(access.region.buffer)
                ),
            ));
        }
    }
    diagnostics
}

/// The most elements tilec compiles for one fragment or local buffer: a sanity bound, 16 times
/// the 64 Ki registers of a whole block, far beyond what spills to local memory would still run
/// at, that keeps layout inference's and lowering's per-element enumeration of a layout short
/// (a fragment of 2^20 elements takes about 0.2 s to infer).
pub const MAX_REGISTER_BUFFER_ELEMENTS: u64 = 1 << 20;

/// The fragments and local buffers over [`MAX_REGISTER_BUFFER_ELEMENTS`], with their element
/// counts (`u64::MAX` when the count does not fit).
pub(crate) fn oversized_register_buffers(
    world: &World,
) -> impl Iterator<Item = (EntityId, Scope, u64)> + '_ {
    world.scopes.iter().filter_map(|(buffer, scope)| {
        if !matches!(scope, Scope::Fragment | Scope::Local | Scope::LocalVar) {
            return None;
        }
        let elements = buffer_elements(world, buffer)?;
        (elements > MAX_REGISTER_BUFFER_ELEMENTS).then_some((buffer, *scope, elements))
    })
}

/// Fragments and local buffers no block could hold, whose element count may not even fit in an
/// integer: an error, where what merely spills is `register-pressure`'s warning.
fn check_register_buffer_sizes(world: &World) -> Vec<Diagnostic> {
    let mut found = Vec::new();
    for (buffer, scope, elements) in oversized_register_buffers(world) {
        let dims: Vec<String> = world
            .const_shape(buffer)
            .unwrap_or_default()
            .iter()
            .map(i64::to_string)
            .collect();
        let size = match elements {
            u64::MAX => "more than 2^64".to_owned(),
            n => n.to_string(),
        };
        let message = format!(
            "the {} buffer `{}` ({}) has {size} elements; tilec compiles at most \
             {MAX_REGISTER_BUFFER_ELEMENTS} for one register buffer (a block has 65536 registers)",
            scope.name(),
            world.name(buffer),
            dims.join("×"),
        );
        // With sizes tilec assumed for a generic instance (and no smaller candidate accepted),
        // the size is the assumption's: tilec cannot analyse the kernel, which is not the
        // kernel's error.
        found.push(if world.assumed_args.is_empty() {
            Diagnostic::error(Code::RegisterPressure, Anchor::Entity(buffer), message)
                .with_help("use smaller tiles, or keep the data in shared or global memory")
        } else {
            Diagnostic::not_analysed(
                Anchor::Entity(buffer),
                format!("{message}, with the values tilec assumed for this generic instance"),
            )
            .with_help(
                "pass the values at a call site, or list the instance in tilec.toml, to analyse \
                 it with yours",
            )
        });
    }
    found
}

fn shape_mismatch(entity: EntityId, message: String) -> Diagnostic {
    Diagnostic::error(Code::ShapeMismatch, Anchor::Entity(entity), message)
}

fn check_copy(world: &mut World, entity: EntityId, src: &Region, dst: &Region) -> Vec<Diagnostic> {
    let (Some(src_extents), Some(dst_extents)) = (
        resolve_extents(world, src, Some(dst)),
        resolve_extents(world, dst, Some(src)),
    ) else {
        return vec![shape_mismatch(
            entity,
            "`T.copy` needs the extent of at least one side: pass a whole buffer or a slice"
                .to_owned(),
        )];
    };
    let mut found = Vec::new();
    let (a, b) = (squeeze(world, &src_extents), squeeze(world, &dst_extents));
    if certainly_differ(world, &a, &b) {
        found.push(shape_mismatch(
            entity,
            format!(
                "`T.copy` moves a {} region of `{}` into a {} region of `{}`",
                format_extents(world, &src_extents),
                world.name(src.buffer),
                format_extents(world, &dst_extents),
                world.name(dst.buffer),
            ),
        ));
    }
    found.extend(out_of_bounds(world, entity, src, &src_extents));
    found.extend(out_of_bounds(world, entity, dst, &dst_extents));
    found
}

/// A region that certainly runs past the end of an on-chip buffer. Global tensors are left alone:
/// TileLang guards their accesses, so a tile hanging over the edge is legal there.
fn out_of_bounds(
    world: &World,
    entity: EntityId,
    region: &Region,
    extents: &[ExprId],
) -> Option<Diagnostic> {
    if world.scopes.get(region.buffer) == Some(&Scope::Global) {
        return None;
    }
    let shape = world.shapes.get(region.buffer)?;
    for (axis, ((dim, &extent), &size)) in region.dims.iter().zip(extents).zip(shape).enumerate() {
        let (Some(start), Some(extent), Some(size)) = (
            world.exprs.as_int(dim.start),
            world.exprs.as_int(extent),
            world.exprs.as_int(size),
        ) else {
            continue;
        };
        if start < 0 || start + extent > size {
            return Some(shape_mismatch(
                entity,
                format!(
                    "this region of `{}` covers {start}..{} in dimension {axis}, but the buffer's extent there is {size}",
                    world.name(region.buffer),
                    start + extent,
                ),
            ));
        }
    }
    None
}

/// The 2-D extents of a gemm operand (leading unit dimensions dropped).
fn matrix_extents(world: &mut World, region: &Region) -> Option<[ExprId; 2]> {
    let extents = resolve_extents(world, region, None)?;
    let mut extents: Vec<ExprId> = extents.into_iter().collect();
    while extents.len() > 2 && world.exprs.as_int(extents[0]) == Some(1) {
        extents.remove(0);
    }
    match extents.as_slice() {
        [rows, cols] => Some([*rows, *cols]),
        _ => None,
    }
}

fn check_gemm(
    world: &mut World,
    entity: EntityId,
    operands: [&Region; 3],
    transpose_a: bool,
    transpose_b: bool,
) -> Vec<Diagnostic> {
    let mut found = check_gemm_types(world, entity, operands);
    let [a, b, c] = operands;
    let (Some(a_ext), Some(b_ext), Some(c_ext)) = (
        matrix_extents(world, a),
        matrix_extents(world, b),
        matrix_extents(world, c),
    ) else {
        found.push(shape_mismatch(
            entity,
            "`T.gemm` operands must be 2-D tiles".to_owned(),
        ));
        return found;
    };
    let (m, k_a) = if transpose_a {
        (a_ext[1], a_ext[0])
    } else {
        (a_ext[0], a_ext[1])
    };
    let (k_b, n) = if transpose_b {
        (b_ext[1], b_ext[0])
    } else {
        (b_ext[0], b_ext[1])
    };
    let dim_of = |transposed: bool, first: bool| if transposed == first { 1 } else { 0 };
    let name = |region: &Region| world.name(region.buffer).to_owned();
    let show = |e: ExprId| world.exprs.display(e).to_string();
    if certainly_differ(world, &[k_a], &[k_b]) {
        found.push(shape_mismatch(
            entity,
            format!(
                "the reduction extents of `T.gemm` disagree: `{}` ({}) has K = {} in dimension {}, `{}` ({}) has K = {} in dimension {}",
                name(a), format_extents(world, &a_ext), show(k_a), dim_of(transpose_a, false),
                name(b), format_extents(world, &b_ext), show(k_b), dim_of(transpose_b, true),
            ),
        ));
    }
    if certainly_differ(world, &[m, n], &c_ext) {
        found.push(shape_mismatch(
            entity,
            format!(
                "`T.gemm` computes a {}×{} tile but the accumulator `{}` is {}",
                show(m),
                show(n),
                name(c),
                format_extents(world, &c_ext),
            ),
        ));
    }
    found
}

fn check_gemm_types(world: &World, entity: EntityId, [a, b, c]: [&Region; 3]) -> Vec<Diagnostic> {
    let mut found = Vec::new();
    let scope = |region: &Region| world.scopes.get(region.buffer).copied();
    for (region, role) in [(a, "A"), (b, "B")] {
        if !matches!(
            scope(region),
            Some(Scope::Shared | Scope::SharedDyn | Scope::Fragment)
        ) {
            found.push(Diagnostic::error(
                Code::ScopeMismatch,
                Anchor::Entity(entity),
                format!("`T.gemm` reads operand {role} from shared memory or a fragment, but `{}` is in {} memory", world.name(region.buffer), scope(region).map_or("unknown", Scope::name)),
            ).with_help("stage it with `T.copy` into a `T.alloc_shared` buffer first"));
        }
    }
    if scope(c) != Some(Scope::Fragment) {
        found.push(
            Diagnostic::error(
                Code::ScopeMismatch,
                Anchor::Entity(entity),
                format!(
                    "`T.gemm` accumulates into a fragment, but `{}` is in {} memory",
                    world.name(c.buffer),
                    scope(c).map_or("unknown", Scope::name)
                ),
            )
            .with_help("allocate the accumulator with `T.alloc_fragment`"),
        );
    }
    let dtype = |region: &Region| world.dtypes.get(region.buffer).copied();
    if let (Some(a_type), Some(b_type)) = (dtype(a), dtype(b)) {
        if a_type != b_type {
            found.push(Diagnostic::error(
                Code::DtypeMismatch,
                Anchor::Entity(entity),
                format!(
                    "`T.gemm` operands have different dtypes: `{}` is {a_type}, `{}` is {b_type}",
                    world.name(a.buffer),
                    world.name(b.buffer)
                ),
            ));
        } else if let Some(c_type) = dtype(c) {
            let accepted: &[DType] = match a_type {
                DType::Int8 | DType::UInt8 | DType::Int4 | DType::UInt4 => &[DType::Int32],
                DType::Float16 => &[DType::Float32, DType::Float16],
                DType::Float64 => &[DType::Float64],
                _ => &[DType::Float32],
            };
            if !accepted.contains(&c_type) {
                let names: Vec<&str> = accepted.iter().map(|d| d.name()).collect();
                found.push(Diagnostic::error(
                    Code::DtypeMismatch,
                    Anchor::Entity(entity),
                    format!(
                        "a {a_type} `T.gemm` accumulates in {}, but `{}` is {c_type}",
                        names.join(" or "),
                        world.name(c.buffer)
                    ),
                ));
            }
        }
    }
    found
}

/// `dim` as an index into `rank` dimensions, if it is one (the front end made a negative `dim`
/// count from the end already).
fn dimension(dim: i64, rank: usize) -> Option<usize> {
    usize::try_from(dim).ok().filter(|&d| d < rank)
}

fn check_reduce(
    world: &mut World,
    entity: EntityId,
    name: &str,
    src: &Region,
    dst: &Region,
    dim: i64,
) -> Vec<Diagnostic> {
    let mut found = on_chip_scopes(world, entity, name, &[src, dst]);
    let (Some(src_ext), Some(dst_ext)) = (
        resolve_extents(world, src, None),
        resolve_extents(world, dst, None),
    ) else {
        return found;
    };
    let Some(axis) = dimension(dim, src_ext.len()) else {
        found.push(shape_mismatch(
            entity,
            format!(
                "`T.{name}` reduces dimension {dim}, but `{}` has {} dimension(s)",
                world.name(src.buffer),
                src_ext.len()
            ),
        ));
        return found;
    };
    let mut expected = src_ext.clone();
    expected.remove(axis);
    let with_unit = {
        let mut kept = src_ext.clone();
        kept[axis] = world.exprs.int(1);
        kept
    };
    let matches = !certainly_differ(world, &squeeze(world, &expected), &squeeze(world, &dst_ext))
        || !certainly_differ(world, &with_unit, &dst_ext);
    if !matches {
        found.push(shape_mismatch(
            entity,
            format!(
                "`T.{name}` over dimension {axis} of `{}` ({}) gives {}, but `{}` is {}",
                world.name(src.buffer),
                format_extents(world, &src_ext),
                format_extents(world, &expected),
                world.name(dst.buffer),
                format_extents(world, &dst_ext),
            ),
        ));
    }
    found
}

fn check_scan(
    world: &mut World,
    entity: EntityId,
    name: &str,
    (src, dst): (&Region, &Region),
    dim: i64,
) -> Vec<Diagnostic> {
    let mut found = on_chip_scopes(world, entity, name, &[src, dst]);
    let (Some(src_ext), Some(dst_ext)) = (
        resolve_extents(world, src, None),
        resolve_extents(world, dst, None),
    ) else {
        return found;
    };
    if dimension(dim, src_ext.len()).is_none() {
        found.push(shape_mismatch(
            entity,
            format!(
                "`T.{name}` scans dimension {dim}, but `{}` has {} dimension(s)",
                world.name(src.buffer),
                src_ext.len()
            ),
        ));
    } else if certainly_differ(world, &src_ext, &dst_ext) {
        found.push(shape_mismatch(
            entity,
            format!(
                "`T.{name}` writes a {} result into `{}` ({})",
                format_extents(world, &src_ext),
                world.name(dst.buffer),
                format_extents(world, &dst_ext)
            ),
        ));
    }
    found
}

fn on_chip_scopes(
    world: &World,
    entity: EntityId,
    name: &str,
    regions: &[&Region],
) -> Vec<Diagnostic> {
    regions
        .iter()
        .filter(|region| world.scopes.get(region.buffer) == Some(&Scope::Global))
        .map(|region| {
            Diagnostic::error(
                Code::ScopeMismatch,
                Anchor::Entity(entity),
                format!(
                    "`T.{name}` works on fragments or shared memory, but `{}` is a global tensor",
                    world.name(region.buffer)
                ),
            )
            .with_help("copy the tile on chip with `T.copy` first")
        })
        .collect()
}

fn check_annotation(
    world: &World,
    entity: EntityId,
    buffer: EntityId,
    shape: &[i64],
) -> Vec<Diagnostic> {
    match world.const_shape(buffer) {
        Some(actual) if actual != shape => vec![shape_mismatch(
            entity,
            format!(
                "the layout annotated for `{}` has shape {shape:?}, but the buffer's shape is {actual:?}",
                world.name(buffer)
            ),
        )],
        _ => Vec::new(),
    }
}

/// Shared memory per launch, as the peak over program points of the buffers live there. A
/// buffer's live range runs from its first to its last access, each widened to its outermost
/// enclosing loop: never longer than the range TileLang's allocator must keep it for (it merges
/// buffers whose ranges are disjoint), so the peak is a lower bound of what the kernel needs and an
/// error here is certain.
fn check_shared_memory(world: &World, target: Target) -> Vec<Diagnostic> {
    let limit = target.shared_memory_per_block();
    let mut found = Vec::new();
    for (launch, _) in world.launches.iter() {
        let order = linearize(world, launch);
        let Some((point, total, live)) = shared_memory_peak(world, launch, &order) else {
            continue;
        };
        if total <= limit {
            continue;
        }
        let Some(&(first, first_bytes)) = live.first() else {
            continue;
        };
        let message = format!(
            "this kernel needs at least {} of shared memory: {} buffer(s) are live at the same time, and one block can use at most {} on {target} (`{}` alone is {})",
            format_bytes(total),
            live.len(),
            format_bytes(limit),
            world.name(first),
            format_bytes(first_bytes),
        );
        // With sizes tilec assumed for a generic instance (128 for every tile of a kernel that
        // is called with 64), the excess is the assumption's, not the kernel's: a warning that
        // says so, which the sizes of a call site or `tilec.toml` settle.
        let mut diagnostic = if world.assumed_args.is_empty() {
            Diagnostic::error(Code::SharedMemoryCapacity, Anchor::Entity(first), message).with_help(
                "use smaller tiles, fewer or narrower shared buffers, or keep data in \
                     fragments",
            )
        } else {
            Diagnostic::warning(
                Code::SharedMemoryCapacity,
                Anchor::Entity(first),
                format!("{message}, with the values tilec assumed for this generic instance"),
            )
            .with_help(
                "the kernel may fit with the sizes it is called with: pass them at a call site, \
                 or list the instance in tilec.toml",
            )
        };
        for &(buffer, bytes) in &live[1..] {
            diagnostic = diagnostic.with_related(
                Anchor::Entity(buffer),
                format!("`{}` adds {}", world.name(buffer), format_bytes(bytes)),
            );
        }
        diagnostic = diagnostic.with_related(
            Anchor::Entity(order[point]),
            "all of them are live here".to_owned(),
        );
        found.push(diagnostic);
    }
    found
}

/// The program point of `order` (the launch's linearized statements) where the most shared
/// memory is live, with the bytes live there and the buffers that make them up.
fn shared_memory_peak(
    world: &World,
    launch: EntityId,
    order: &[EntityId],
) -> Option<crate::liveness::Peak<EntityId>> {
    let ranges: Vec<(EntityId, u64, usize, usize)> = world
        .shared_buffers()
        // A view of another buffer's bytes takes none of its own (its base is live wherever it
        // is).
        .filter(|&buffer| !world.is_byte_view(buffer))
        .filter(|&buffer| launch_of(world, buffer) == Some(launch))
        .filter_map(|buffer| {
            let (first, last) = live_range(world, order, buffer)?;
            Some((buffer, staged_bytes(world, buffer)?, first, last))
        })
        .collect();
    peak(order.len(), &ranges)
}

/// Whether every launch of `world` keeps its live shared buffers within what a block of some
/// target holds. The front end asks this of a generic instance, to retry sizes it assumed that
/// do not fit (`tilec_frontend::BuildHooks::fits`).
pub fn fits_shared_memory(world: &World) -> bool {
    let largest = Target::ALL
        .iter()
        .map(|target| target.shared_memory_per_block())
        .max()
        .unwrap_or(0);
    world.launches.iter().all(|(launch, _)| {
        let order = linearize(world, launch);
        shared_memory_peak(world, launch, &order).is_none_or(|(_, total, _)| total <= largest)
    })
}

/// How many copies of a shared buffer a software pipeline keeps: `num_stages` when the buffer is
/// filled by a producer copy of a `T.Pipelined(..., num_stages=k)` loop, as the lowering stages it
/// (`lower::pipeline`), else 1.
pub fn pipeline_stages(world: &World, buffer: EntityId) -> i64 {
    world
        .roots
        .iter()
        .filter(|&&root| world.kind(root) == Some(tilec_ir::EntityKind::Kernel))
        .find_map(|&root| {
            crate::lower::staged_buffers(world, root)
                .get(&buffer)
                .copied()
        })
        .unwrap_or(1)
}

/// The shared memory a buffer takes, with every pipeline stage.
pub fn staged_bytes(world: &World, buffer: EntityId) -> Option<u64> {
    let stages = u64::try_from(pipeline_stages(world, buffer)).unwrap_or(1);
    Some(buffer_bytes(world, buffer)?.saturating_mul(stages))
}

/// The size of a buffer in bytes, saturating: a shape too large to count is still far too large.
pub(crate) fn buffer_bytes(world: &World, buffer: EntityId) -> Option<u64> {
    let elements = buffer_elements(world, buffer)?;
    Some(world.dtypes.get(buffer)?.storage_bytes(elements))
}

/// The number of elements of a buffer with a constant shape, saturating at `u64::MAX`.
fn buffer_elements(world: &World, buffer: EntityId) -> Option<u64> {
    let shape = world.const_shape(buffer)?;
    Some(shape.iter().fold(1u64, |acc, &extent| {
        acc.saturating_mul(u64::try_from(extent).unwrap_or(0))
    }))
}

/// `512 KiB`, `1.5 KiB`, `96 B`.
pub fn format_bytes(bytes: u64) -> String {
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let kib = bytes as f64 / 1024.0;
    if bytes.is_multiple_of(1024) {
        format!("{} KiB", bytes / 1024)
    } else {
        format!("{kib:.1} KiB")
    }
}
