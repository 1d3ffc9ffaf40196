//! `tilec layout --svg`: the picture of a fragment shows what its layout says. One cell per drawn
//! element, each labelled with the thread(s) the layout assigns and the element's local index;
//! large tiles are cropped and say so; names are escaped; the files go where `--svg` says, and a
//! path that cannot be written is an error, not a panic.
//!
//! The pictures are drawn by `tilec_ide::svg`; the daemon (a binary only, whose modules another
//! package cannot import) writes them with its `svg.rs`, which this file includes. Both are driven
//! with layouts inferred from the corpus, as `tilec layout --svg` does.

#[path = "../../../crates/daemon/src/svg.rs"]
mod writer;

use tilec_db::{Instance, RootDatabase, kernel_world, layouts, resources};
use tilec_ide::svg::{MAX_COLUMNS, MAX_ROWS, Picture, fragment_svg};
use tilec_ir::ExprArena;
use tilec_passes::layout::{FragmentLayout, flatten, fresh_vars};
use tilec_tests::{corpus_dir, index, instance, load_corpus, on_analysis_stack};
use writer::write_pictures;

/// The picture of fragment `buffer` of `inst`, built as `tilec layout --svg` builds it.
fn picture<'a>(db: &'a RootDatabase, inst: Instance<'a>, buffer: &'a str) -> Picture<'a> {
    let world = kernel_world(db, inst);
    let layouts = layouts(db, inst);
    let (entity, inferred) = layouts
        .buffers
        .iter()
        .find(|(entity, _)| world.name(**entity) == buffer)
        .unwrap_or_else(|| panic!("no layout for {buffer}"));
    Picture {
        kernel: inst.kernel(db).name(db),
        instance: inst.index(db),
        buffer,
        registers: resources(db, inst).fragment_registers.get(entity).copied(),
        layout: &inferred.layout,
        arena: &layouts.exprs,
    }
}

/// One drawn cell, read back from the SVG text.
#[derive(Debug)]
struct DrawnCell {
    point: Vec<i64>,
    threads: Vec<i64>,
    /// The visible labels: the owner(s) and the local index.
    label: String,
    local: String,
}

fn parse_list(text: &str) -> Vec<i64> {
    if text.is_empty() {
        return Vec::new();
    }
    text.split(',')
        .map(|n| {
            n.parse()
                .unwrap_or_else(|_| panic!("not a list of integers: {text:?}"))
        })
        .collect()
}

/// The value of `attribute="..."` in `text`, from its first occurrence.
fn attribute<'s>(text: &'s str, attribute: &str) -> &'s str {
    let key = format!("{attribute}=\"");
    let start = text
        .find(&key)
        .unwrap_or_else(|| panic!("no {attribute} in {text}"))
        + key.len();
    let end = text[start..]
        .find('"')
        .expect("attribute values are quoted")
        + start;
    &text[start..end]
}

/// The content of the first `<text class="{class}" ...>` element of `text`.
fn text_of<'s>(text: &'s str, class: &str) -> &'s str {
    let open = format!("<text class=\"{class}\"");
    let start = text
        .find(&open)
        .unwrap_or_else(|| panic!("no {class} text in {text}"));
    let content = text[start..].find('>').expect("the tag closes") + start + 1;
    let end = text[content..].find("</text>").expect("the text ends") + content;
    &text[content..end]
}

/// Every cell group of the picture, in drawing order.
fn drawn_cells(svg: &str) -> Vec<DrawnCell> {
    svg.split("<g data-element=\"")
        .skip(1)
        .map(|chunk| {
            let group = &chunk[..chunk.find("</g>").expect("every cell group closes")];
            let point_end = group.find('"').expect("the element attribute closes");
            DrawnCell {
                point: parse_list(&group[..point_end]),
                threads: parse_list(attribute(group, "data-threads")),
                label: text_of(group, "thread").to_owned(),
                local: text_of(group, "local").to_owned(),
            }
        })
        .collect()
}

fn cell_rects(svg: &str) -> usize {
    svg.matches("<rect class=\"cell\"").count()
}

/// Every drawn cell names exactly the owners and the local index the layout gives its element.
fn assert_cells_match_layout(svg: &str, layout: &FragmentLayout, arena: &ExprArena) {
    let cells = drawn_cells(svg);
    assert_eq!(cells.len(), cell_rects(svg), "one group per cell rectangle");
    for cell in &cells {
        let threads = layout.threads_of(arena, &cell.point);
        assert_eq!(cell.threads, threads, "owners of {:?}", cell.point);
        let expected = match threads.as_slice() {
            [] => "?".to_owned(),
            run if run.len() >= 3 && run.windows(2).all(|pair| pair[1] == pair[0] + 1) => {
                format!("T{}..T{}", run[0], run[run.len() - 1])
            }
            few if few.len() <= 4 => {
                let names: Vec<String> = few.iter().map(|t| format!("T{t}")).collect();
                names.join(",")
            }
            [first, rest @ ..] => format!("T{first}+{} more", rest.len()),
        };
        assert_eq!(cell.label, expected, "label of {:?}", cell.point);
        let local = layout
            .local_of(arena, &cell.point)
            .unwrap_or_else(|| panic!("no local index for {:?}", cell.point));
        let local: Vec<String> = local.iter().map(i64::to_string).collect();
        assert_eq!(cell.local, format!("[{}]", local.join(",")));
    }
}

fn assert_is_svg(svg: &str) {
    assert!(svg.starts_with("<svg"), "{}", &svg[..svg.len().min(200)]);
    assert!(svg.contains("xmlns=\"http://www.w3.org/2000/svg\""));
    assert!(svg.trim_end().ends_with("</svg>"));
}

#[test]
fn sparse_thread_map_draws_every_element_with_its_owner() {
    let Some(dir) = corpus_dir() else { return };
    on_analysis_stack(|| {
        let (db, file) = load_corpus(&dir, "layout_sparse_thread_map.py");
        let inst = instance(&db, file, "plan_then_buffer_layout", 0);
        let picture = picture(&db, inst, "fragment");
        assert_eq!(picture.layout.shape, [4, 16]);
        let svg = fragment_svg(&picture);
        assert_is_svg(&svg);
        assert_eq!(cell_rects(&svg), 64, "a 4x16 fragment has 64 cells");
        assert!(svg.contains("all 64 elements shown"));
        assert!(!svg.contains("cropped"));
        assert_cells_match_layout(&svg, picture.layout, picture.arena);
        // thread = i * 16 + j: element (2, 5) is thread 37's.
        let cell = drawn_cells(&svg)
            .into_iter()
            .find(|c| c.point == [2, 5])
            .expect("element (2, 5) is drawn");
        assert_eq!(cell.label, "T37");
    });
}

#[test]
fn softmax_rows_are_cropped_and_labelled_by_owner() {
    let Some(dir) = corpus_dir() else { return };
    on_analysis_stack(|| {
        let (db, file) = load_corpus(&dir, "softmax.py");
        let inst = instance(&db, file, "softmax", 0);
        let picture = picture(&db, inst, "x");
        assert_eq!(picture.layout.shape, [2, 4096]);
        let svg = fragment_svg(&picture);
        assert_is_svg(&svg);
        assert_eq!(cell_rects(&svg), index(2 * MAX_COLUMNS));
        assert!(
            svg.contains("cropped: showing rows 0..2 of 2, columns 0..64 of 4096"),
            "the header says the picture is cropped"
        );
        assert!(svg.contains("<title>x — kernel softmax, instance 0</title>"));
        assert!(svg.contains("replicate 1, 32 registers per thread"));
        assert_cells_match_layout(&svg, picture.layout, picture.arena);
        let cells = drawn_cells(&svg);
        let origin = cells.iter().find(|c| c.point == [0, 0]).expect("(0, 0)");
        let owner = picture
            .layout
            .thread_of(picture.arena, &[0, 0], 0)
            .expect("(0, 0) has an owner");
        assert_eq!(origin.label, format!("T{owner}"));
    });
}

#[test]
fn softmax_row_max_shows_all_its_replicas() {
    let Some(dir) = corpus_dir() else { return };
    on_analysis_stack(|| {
        let (db, file) = load_corpus(&dir, "softmax.py");
        let inst = instance(&db, file, "softmax", 0);
        let picture = picture(&db, inst, "row_max");
        assert_eq!(picture.layout.replicate, 256);
        let svg = fragment_svg(&picture);
        assert_eq!(cell_rects(&svg), 2, "a 1-D fragment is one row");
        assert_eq!(svg.matches("<rect class=\"replica\"").count(), 2);
        assert_cells_match_layout(&svg, picture.layout, picture.arena);
        let cells = drawn_cells(&svg);
        assert!(cells.iter().all(|c| c.label == "T0..T255"), "every thread");
        assert!(
            cells
                .iter()
                .all(|c| c.threads == (0..256).collect::<Vec<_>>())
        );
    });
}

#[test]
fn a_few_replicas_are_listed_and_many_scattered_ones_counted() {
    let Some(dir) = corpus_dir() else { return };
    on_analysis_stack(|| {
        // Q is read by 4 warps: thread = i + rep * 32.
        let (db, file) = load_corpus(&dir, "layout_serial_inner_read.py");
        let inst = instance(&db, file, "copy_rows", 0);
        let picture = picture(&db, inst, "Q");
        assert_eq!(picture.layout.replicate, 4);
        let svg = fragment_svg(&picture);
        assert_eq!(cell_rects(&svg), 32 * 16);
        assert_eq!(svg.matches("<rect class=\"replica\"").count(), 32 * 16);
        assert_cells_match_layout(&svg, picture.layout, picture.arena);
        let cells = drawn_cells(&svg);
        let cell = cells.iter().find(|c| c.point == [5, 3]).expect("(5, 3)");
        assert_eq!(cell.label, "T5,T37,T69,T101");
    });
    // Eight owners two apart: neither listable nor a range.
    let mut arena = ExprArena::new();
    let vars = fresh_vars(&mut arena, &[3]);
    let rep = arena.var("rep", Some(8));
    let rep_expr = arena.var_expr(rep);
    let two = arena.int(2);
    let thread = arena.mul(rep_expr, two);
    let index = vec![flatten(&mut arena, &vars, &[3])];
    let layout = FragmentLayout {
        shape: vec![3],
        vars,
        rep,
        replicate: 8,
        thread,
        index,
    };
    let svg = fragment_svg(&Picture {
        kernel: "k",
        instance: 0,
        buffer: "b",
        registers: Some(3),
        layout: &layout,
        arena: &arena,
    });
    assert_cells_match_layout(&svg, &layout, &arena);
    let cells = drawn_cells(&svg);
    assert!(cells.iter().all(|c| c.label == "T0+7 more"), "{cells:?}");
}

#[test]
fn long_one_dimensional_fragments_wrap_into_rows_of_16() {
    let Some(dir) = corpus_dir() else { return };
    on_analysis_stack(|| {
        let (db, file) = load_corpus(&dir, "flash_attention_fwd.py");
        let inst = instance(&db, file, "flashattn", 0);
        let picture = picture(&db, inst, "scores_max");
        assert_eq!(picture.layout.shape, [128]);
        let svg = fragment_svg(&picture);
        assert_eq!(cell_rects(&svg), 128, "every element, none cropped");
        assert!(svg.contains("1-D: rows of 16 elements"));
        assert!(svg.contains("all 128 elements shown"));
        assert_cells_match_layout(&svg, picture.layout, picture.arena);
        let cells = drawn_cells(&svg);
        // Row-major: the 18th cell drawn is element 17, in the row labelled 16.
        assert_eq!(cells[17].point, [17]);
        assert!(
            svg.contains(">16</text>"),
            "rows are labelled by their first element"
        );
        // thread = i // 16 * 32 + i % 8 * 4 + rep over 4 replicas: 36, 37, 38, 39.
        assert_eq!(cells[17].label, "T36..T39");
    });
}

#[test]
fn gemm_accumulator_shows_the_tensor_core_pattern() {
    let Some(dir) = corpus_dir() else { return };
    on_analysis_stack(|| {
        let (db, file) = load_corpus(&dir, "gemm.py");
        let inst = instance(&db, file, "matmul", 0);
        let picture = picture(&db, inst, "C_local");
        let svg = fragment_svg(&picture);
        assert_is_svg(&svg);
        assert_eq!(cell_rects(&svg), index(MAX_ROWS * MAX_COLUMNS));
        assert!(svg.contains("cropped: showing rows 0..64 of 128, columns 0..64 of 128"));
        assert_cells_match_layout(&svg, picture.layout, picture.arena);
        // The m16n8k16 accumulator: each thread holds two adjacent columns, four threads span a
        // row of 8, the next row belongs to the next four threads, and row 8 repeats row 0 in the
        // next registers.
        let cells = drawn_cells(&svg);
        let at = |point: [i64; 2]| {
            let cell = cells
                .iter()
                .find(|c| c.point == point)
                .unwrap_or_else(|| panic!("{point:?} is drawn"));
            (cell.label.as_str(), cell.local.as_str())
        };
        assert_eq!(at([0, 0]), ("T0", "[0]"));
        assert_eq!(at([0, 1]), ("T0", "[1]"));
        assert_eq!(at([0, 2]), ("T1", "[0]"));
        assert_eq!(at([1, 0]), ("T4", "[0]"));
        assert_eq!(at([8, 0]), ("T0", "[2]"));
    });
}

#[test]
fn leading_dimensions_are_flattened_into_rows() {
    let mut arena = ExprArena::new();
    let layout = FragmentLayout::plan(&mut arena, &[2, 3, 4], 8, 1);
    let picture = Picture {
        kernel: "k",
        instance: 0,
        buffer: "t",
        registers: Some(3),
        layout: &layout,
        arena: &arena,
    };
    let svg = fragment_svg(&picture);
    assert_eq!(cell_rects(&svg), 24);
    assert!(svg.contains("the leading 2 dimensions flattened row-major (6 rows)"));
    assert_cells_match_layout(&svg, &layout, &arena);
    let cells = drawn_cells(&svg);
    // Grid row 5 is (1, 2, _): the last cell drawn is element (1, 2, 3).
    assert_eq!(cells.last().map(|c| c.point.clone()), Some(vec![1, 2, 3]));
    assert!(
        svg.contains(">1,2</text>"),
        "row 5 is labelled with its leading indices"
    );
}

#[test]
fn names_are_escaped_in_the_picture_and_sanitised_in_file_names() {
    let mut arena = ExprArena::new();
    let layout = FragmentLayout::plan(&mut arena, &[4], 4, 1);
    let picture = Picture {
        kernel: "a<b>&\"c\"",
        instance: 2,
        buffer: "../x y",
        registers: None,
        layout: &layout,
        arena: &arena,
    };
    let svg = fragment_svg(&picture);
    assert!(svg.contains("a&lt;b&gt;&amp;"), "names are escaped");
    assert!(!svg.contains("a<b>"));
    assert_eq!(picture.file_name(), "a_b___c_-2-.._x_y.svg");
}

#[test]
fn one_picture_is_a_file_and_several_are_a_folder() {
    let mut arena = ExprArena::new();
    let first = FragmentLayout::plan(&mut arena, &[8, 8], 32, 2);
    let second = FragmentLayout::plan(&mut arena, &[16], 16, 1);
    let make = |buffer, layout| Picture {
        kernel: "k",
        instance: 1,
        buffer,
        registers: Some(2),
        layout,
        arena: &arena,
    };
    let root = std::env::temp_dir().join(format!("tilec-layout-svg-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).expect("the temporary folder can be created");

    let single = root.join("one.svg");
    let written = write_pictures(&single, &[make("A", &first)]).expect("one file is written");
    assert_eq!(written, [single.as_path()]);
    let text = std::fs::read_to_string(&single).expect("the file exists");
    assert_eq!(cell_rects(&text), 64);

    // One picture and an existing folder: the file goes inside, under its own name.
    let written = write_pictures(&root, &[make("A", &first)]).expect("written into the folder");
    assert_eq!(written, [root.join("k-1-A.svg")]);

    let folder = root.join("many");
    let written = write_pictures(&folder, &[make("A", &first), make("B", &second)])
        .expect("a folder of files is written");
    assert_eq!(
        written,
        [folder.join("k-1-A.svg"), folder.join("k-1-B.svg")]
    );
    let text = std::fs::read_to_string(folder.join("k-1-B.svg")).expect("the file exists");
    assert_eq!(cell_rects(&text), 16);

    // A path below a regular file cannot be written: an error that names it, not a panic.
    let blocked = single.join("x.svg");
    let error = write_pictures(&blocked, &[make("A", &first)]).expect_err("cannot write");
    assert!(format!("{error:#}").contains("cannot write"), "{error:#}");
    let error = write_pictures(&blocked, &[make("A", &first), make("B", &second)])
        .expect_err("cannot create the folder");
    assert!(
        format!("{error:#}").contains("cannot be created"),
        "{error:#}"
    );
    assert!(write_pictures(&single, &[]).is_err(), "nothing to draw");

    let _ = std::fs::remove_dir_all(&root);
}
