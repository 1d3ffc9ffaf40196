//! Layout inference on the corpus: the layout facts of EXPECTED.toml, injectivity with a
//! round-tripping inverse for every inferred layout, PlanLoopPartition covering every iteration
//! exactly once (property test), and incrementality of the layout query.

use std::collections::HashMap;

use proptest::prelude::*;
use salsa::Setter;
use tilec_db::{Instance, RootDatabase, instances, kernel_world, layouts, loop_plans, resources};
use tilec_ir::ExprArena;
use tilec_passes::layout::{FragmentLayout, Layouts, LoopPlan, Origin, points};
use tilec_tests::{corpus_dir, instance, int, load_corpus, on_analysis_stack};

/// The layout of the fragment named `buffer`.
fn fragment<'a>(
    db: &'a RootDatabase,
    inst: Instance<'a>,
    buffer: &str,
) -> (&'a Layouts, FragmentLayout, Origin) {
    let world = kernel_world(db, inst);
    let layouts = layouts(db, inst);
    let (_, inferred) = layouts
        .buffers
        .iter()
        .find(|(entity, _)| world.name(**entity) == buffer)
        .unwrap_or_else(|| panic!("no layout for {buffer}"));
    (layouts, inferred.layout.clone(), inferred.origin.clone())
}

fn show(arena: &ExprArena, e: tilec_ir::ExprId) -> String {
    arena.display(e).to_string()
}

/// A file of the repository (`examples/` or `tests/fixtures/`, by its path relative to the
/// repository root) loaded into a fresh database.
fn load_in_repo(relative: &str) -> (RootDatabase, tilec_db::SourceFile) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(relative);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|error| panic!("cannot read {}: {error}", path.display()));
    let db = RootDatabase::default();
    let file = tilec_tests::source_file(&db, path, text);
    (db, file)
}

/// examples/tiled_gemm.py's first instance: a 128x128 fp32 accumulator on 128 threads.
#[test]
fn gemm_accumulator_has_the_tensor_core_layout_and_128_registers() {
    let (db, file) = load_in_repo("examples/tiled_gemm.py");
    let inst = instance(&db, file, "tiled_gemm", 0);
    let (_, layout, origin) = fragment(&db, inst, "acc");
    assert_eq!(origin, Origin::Gemm);
    assert_eq!(layout.replicate, 1);
    let world = kernel_world(&db, inst);
    let registers = resources(&db, inst)
        .fragment_registers
        .iter()
        .find(|(b, _)| world.name(**b) == "acc")
        .map(|(_, r)| *r);
    assert_eq!(registers, Some(128), "128x128 fp32 over 128 threads");
}

#[test]
fn annotated_layout_is_the_users() {
    let Some(dir) = corpus_dir() else { return };
    let (db, file) = load_corpus(&dir, "layout_annotated.py");
    let (layouts, layout, origin) = fragment(&db, instance(&db, file, "annotated", 0), "fragment");
    assert_eq!(origin, Origin::Annotation);
    assert_eq!(
        (
            show(&layouts.exprs, layout.thread),
            show(&layouts.exprs, layout.index[0])
        ),
        ("j".to_owned(), "i".to_owned())
    );
}

#[test]
fn serial_inner_read_costs_at_most_16_registers() {
    let Some(dir) = corpus_dir() else { return };
    let (db, file) = load_corpus(&dir, "layout_serial_inner_read.py");
    let inst = instance(&db, file, "copy_rows", 0);
    let (layouts, layout, _) = fragment(&db, inst, "Q");
    assert!(
        layout.local_size(&layouts.exprs) <= 16,
        "TileLang needs 64; we need {}",
        layout.local_size(&layouts.exprs)
    );
    assert_eq!(
        layout.replicate, 4,
        "rows replicated 4 times over 128 threads"
    );
}

#[test]
fn sparse_thread_map_infers_and_its_second_loop_runs_on_four_threads() {
    let Some(dir) = corpus_dir() else { return };
    let (db, file) = load_corpus(&dir, "layout_sparse_thread_map.py");
    let inst = instance(&db, file, "plan_then_buffer_layout", 0);
    let (layouts, layout, _) = fragment(&db, inst, "fragment");
    assert_eq!(show(&layouts.exprs, layout.thread), "i * 16 + j");
    assert_eq!(
        layout.local_size(&layouts.exprs),
        1,
        "one register per thread"
    );
    let mut loops = layouts.loops.values();
    let second = loops
        .nth(1)
        .map(|(inferred, _)| inferred.layout.clone())
        .expect("two loops");
    let mut threads: Vec<i64> = points(&second.shape)
        .iter()
        .flat_map(|p| second.threads_of(&layouts.exprs, p))
        .collect();
    threads.sort_unstable();
    assert_eq!(threads, vec![0, 16, 32, 48]);
    // The first loop fills the 64 threads; the second has no closed-form inverse and is
    // recorded as a guarded plan on its four threads instead of failing (TileLang 0.1.15 fails).
    let plans: Vec<&LoopPlan> = loop_plans(&db, inst).values().collect();
    assert_eq!(
        plans,
        vec![
            &LoopPlan::Dense {
                threads: 64,
                per_thread: 1
            },
            &LoopPlan::Guarded {
                active: vec![0, 16, 32, 48],
                per_thread: 1
            }
        ]
    );
}

#[test]
fn scalar_read_at_a_constant_index_is_on_every_thread() {
    let Some(dir) = corpus_dir() else { return };
    let (db, file) = load_corpus(&dir, "scalar_broadcast.py");
    let (layouts, layout, origin) =
        fragment(&db, instance(&db, file, "scale_by_first", 0), "first");
    assert_eq!(origin, Origin::Broadcast);
    assert_eq!(layout.replicate, 128);
    assert_eq!(layout.threads_of(&layouts.exprs, &[0]).len(), 128);
}

/// tests/fixtures/kernels/elementwise_add.py: a (64, 256) fp16 tile on 256 threads.
#[test]
fn elementwise_loop_moves_16_bytes_per_access() {
    let (db, file) = load_in_repo("tests/fixtures/kernels/elementwise_add.py");
    let layouts = layouts(&db, instance(&db, file, "add", 0));
    let (inferred, vector) = layouts.loops.values().next().expect("one loop");
    assert_eq!(inferred.layout.shape, vec![64, 256]);
    assert_eq!(*vector, 8, "8 fp16 elements = 16 bytes");
}

#[test]
fn a_syntax_error_elsewhere_leaves_layouts_and_registers_available() {
    let Some(dir) = corpus_dir() else { return };
    let (db, file) = load_corpus(&dir, "errors/syntax_error_midedit.py");
    let inst = instance(&db, file, "double", 0);
    assert!(!layouts(&db, inst).buffers.is_empty());
    assert!(!resources(&db, inst).fragment_registers.is_empty());
}

/// Every inferred layout in the corpus is injective over (element, replica), and the inverse built
/// from it maps each (thread, register) back to the one (element, replica) it holds.
#[test]
fn every_inferred_layout_has_a_round_tripping_inverse() {
    let Some(dir) = corpus_dir() else { return };
    on_analysis_stack(|| {
        let mut checked = 0;
        for relative in corpus_files(&dir) {
            let (db, file) = load_corpus(&dir, &relative);
            for &inst in instances(&db, file) {
                let layouts = layouts(&db, inst);
                for inferred in layouts
                    .buffers
                    .values()
                    .chain(layouts.loops.values().map(|(l, _)| l))
                {
                    assert_round_trip(&layouts.exprs, &inferred.layout, &relative);
                    checked += 1;
                }
            }
        }
        assert!(checked > 40, "only {checked} layouts checked");
    });
}

/// The same property over every kernel of the repository (`examples/` and `tests/fixtures/`), so
/// that it is checked in every clone.
#[test]
fn every_inferred_layout_of_the_repositorys_kernels_has_a_round_tripping_inverse() {
    on_analysis_stack(|| {
        let mut files = Vec::new();
        for folder in [
            "examples",
            "tests/fixtures/kernels",
            "tests/fixtures/diagnostics",
        ] {
            let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("..")
                .join(folder);
            for entry in std::fs::read_dir(&dir)
                .unwrap_or_else(|error| panic!("cannot list {}: {error}", dir.display()))
                .flatten()
            {
                let name = entry.file_name().to_string_lossy().to_string();
                if name.ends_with(".py") {
                    files.push(format!("{folder}/{name}"));
                }
            }
        }
        files.sort();
        let mut checked = 0;
        for relative in &files {
            let (db, file) = load_in_repo(relative);
            for &inst in instances(&db, file) {
                let layouts = layouts(&db, inst);
                for inferred in layouts
                    .buffers
                    .values()
                    .chain(layouts.loops.values().map(|(l, _)| l))
                {
                    assert_round_trip(&layouts.exprs, &inferred.layout, relative);
                    checked += 1;
                }
            }
        }
        assert!(checked > 40, "only {checked} layouts checked in {files:?}");
    });
}

fn corpus_files(dir: &std::path::Path) -> Vec<String> {
    let mut files = Vec::new();
    for sub in ["", "errors/"] {
        for entry in std::fs::read_dir(dir.join(sub))
            .into_iter()
            .flatten()
            .flatten()
        {
            let name = entry.file_name().to_string_lossy().to_string();
            if name.ends_with(".py") {
                files.push(format!("{sub}{name}"));
            }
        }
    }
    files.sort();
    files
}

fn assert_round_trip(arena: &ExprArena, layout: &FragmentLayout, context: &str) {
    let mut inverse: HashMap<(i64, Vec<i64>), (Vec<i64>, i64)> = HashMap::new();
    for point in points(&layout.shape) {
        let local = layout
            .local_of(arena, &point)
            .expect("local index evaluates");
        for rep in 0..layout.replicate {
            let thread = layout
                .thread_of(arena, &point, rep)
                .expect("thread evaluates");
            let previous = inverse.insert((thread, local.clone()), (point.clone(), rep));
            assert!(
                previous.is_none(),
                "{context}: {previous:?} and {:?} share thread {thread}, register {local:?}",
                (point, rep)
            );
        }
    }
    for ((thread, local), (point, rep)) in &inverse {
        assert_eq!(
            layout.thread_of(arena, point, *rep).as_ref(),
            Some(thread),
            "{context}"
        );
        assert_eq!(
            layout.local_of(arena, point).as_ref(),
            Some(local),
            "{context}"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// PlanLoopPartition gives every iteration to exactly `replicate` threads, within the block, each
    /// in a register slot no other iteration uses.
    #[test]
    fn plan_covers_every_iteration_exactly_once(
        dims in proptest::collection::vec(prop_oneof![Just(1i64), Just(2), Just(3), Just(4), Just(8), Just(16), Just(24), Just(64)], 1..=3),
        threads in prop_oneof![Just(32i64), Just(64), Just(128), Just(256)],
        vector in prop_oneof![Just(1i64), Just(2), Just(4), Just(8)],
    ) {
        let inner = *dims.last().unwrap_or(&1);
        prop_assume!(inner % vector == 0);
        let mut arena = ExprArena::new();
        let layout = FragmentLayout::plan(&mut arena, &dims, threads, vector);
        prop_assert!(layout.collision(&arena).is_none());
        for point in points(&dims) {
            let owners = layout.threads_of(&arena, &point);
            prop_assert_eq!(int(owners.len()), layout.replicate);
            prop_assert!(owners.iter().all(|&t| (0..threads).contains(&t)), "{owners:?}");
        }
    }
}

/// Editing one kernel re-runs layout inference for that kernel only (on the five kernels of
/// tests/fixtures/kernels/pointwise_family.py).
#[test]
fn editing_one_factory_reruns_layouts_of_that_kernel_only() {
    let path = tilec_tests::fixture_path("kernels/pointwise_family.py");
    let text = std::fs::read_to_string(&path).expect("the fixture is readable");
    let mut db = RootDatabase::with_event_log();
    let file = tilec_tests::source_file(&db, path, text.clone());
    for &inst in instances(&db, file) {
        layouts(&db, inst);
        resources(&db, inst);
    }
    db.take_executed();
    let edited = text.replacen(
        "* alpha + Y[bx * block + i]",
        "* alpha - Y[bx * block + i]",
        1,
    );
    assert_ne!(edited, text, "the edit applies");
    file.set_text(&mut db).to(edited);
    let mut ran = Vec::new();
    for &inst in instances(&db, file) {
        layouts(&db, inst);
        resources(&db, inst);
    }
    for executed in db.take_executed() {
        if executed.query == "layouts" || executed.query == "resources" {
            let kernel = instances(&db, file)
                .iter()
                .find(|i| salsa::plumbing::AsId::as_id(*i) == executed.key)
                .map(|i| i.kernel(&db).name(&db).clone());
            ran.push((executed.query, kernel));
        }
    }
    ran.sort();
    assert_eq!(
        ran,
        vec![
            ("layouts".to_owned(), Some("axpy".to_owned())),
            ("resources".to_owned(), Some("axpy".to_owned()))
        ],
        "only axpy's layout queries re-run"
    );
}

#[test]
fn shared_memory_counts_pipeline_stages_and_occupancy_follows() {
    let Some(dir) = corpus_dir() else { return };
    on_analysis_stack(|| {
        let (db, file) = load_corpus(&dir, "gemm.py");
        let inst = instance(&db, file, "matmul", 0);
        let world = kernel_world(&db, inst);
        let resources = resources(&db, inst);
        let shared: Vec<(String, u64, i64)> = resources
            .shared
            .iter()
            .map(|(&b, s)| (world.name(b).to_owned(), s.bytes, s.stages))
            .collect();
        // 128×32 and 32×128 float16 tiles, each filled inside `T.Pipelined(..., num_stages=3)`.
        assert_eq!(
            shared,
            vec![
                ("A_shared".to_owned(), 3 * 8192, 3),
                ("B_shared".to_owned(), 3 * 8192, 3)
            ]
        );
        let (&launch, &peak) = resources.peak_shared.iter().next().expect("one launch");
        assert_eq!(peak, 48 * 1024);
        // sm_90: 228 KiB per multiprocessor / (48 KiB + 1 KiB reserved) = 4 blocks; 128 fragment
        // registers × 128 threads also allow exactly 4.
        let occupancy = resources.occupancy[&launch];
        assert_eq!(occupancy.blocks_per_sm, 4);
    });
}

/// The storage offsets of a shared buffer's layout at a few points.
fn shared_offsets(
    db: &RootDatabase,
    inst: Instance<'_>,
    buffer: &str,
    points: &[&[i64]],
) -> (String, Vec<i64>) {
    let world = kernel_world(db, inst);
    let layouts = layouts(db, inst);
    let (_, assigned) = layouts
        .shared
        .iter()
        .find(|(entity, _)| world.name(**entity) == buffer)
        .unwrap_or_else(|| panic!("no shared layout for {buffer}"));
    let offsets = points
        .iter()
        .map(|point| {
            let mut out = Vec::new();
            assigned
                .map
                .eval_into(&layouts.exprs, point, &mut out)
                .expect("evaluates");
            out[0]
        })
        .collect();
    (assigned.description.clone(), offsets)
}

#[test]
fn gemm_operands_in_shared_memory_get_tilelangs_swizzles() {
    let Some(dir) = corpus_dir() else { return };
    let (db, file) = load_corpus(&dir, "gemm.py");
    let inst = instance(&db, file, "matmul", 0);
    // A_shared is 128 × 32 halfs: 64-byte rows, so TileLang's half-bank swizzle, where element
    // (i, j) goes to vec + ((c ^ (s / 2)) + s * 4) * 8 with s = i % 8, c = j / 8 % 4, vec = j % 8:
    // (2, 8) → 64 and (3, 31) → 7 + (2 + 12) * 8 = 119. B_shared, 32 × 128 halfs, has 256-byte
    // rows and takes the full-bank one, vec + ((c ^ s) + s * 8) * 8 within each 64-column panel:
    // (1, 0) → 72 and (1, 8) → 64.
    let (a, a_offsets) = shared_offsets(
        &db,
        inst,
        "A_shared",
        &[&[0, 0], &[1, 0], &[2, 8], &[3, 31]],
    );
    assert!(a.starts_with("64-byte XOR swizzle"), "{a}");
    assert_eq!(a_offsets, vec![0, 32, 64, 119]);
    let (b, b_offsets) = shared_offsets(&db, inst, "B_shared", &[&[0, 0], &[1, 0], &[1, 8]]);
    assert!(b.starts_with("128-byte XOR swizzle"), "{b}");
    assert_eq!(b_offsets, vec![0, 72, 64]);
}

#[test]
fn shared_buffers_no_op_constrains_are_row_major() {
    let Some(dir) = corpus_dir() else { return };
    let (db, file) = load_corpus(&dir, "transpose_shared.py");
    let inst = instance(&db, file, "transpose", 0);
    let (description, offsets) = shared_offsets(&db, inst, "tile", &[&[0, 1], &[1, 0], &[63, 63]]);
    assert_eq!(description, "row-major");
    assert_eq!(offsets, vec![1, 64, 64 * 64 - 1]);
}
