//! Tests of the editor-facing analysis on small kernels written inline, with the cursor marked `$0`
//! in the text (as rust-analyzer's `crates/ide/src/hover/tests.rs` does): hovers, inlay hints, the
//! layout-conflict code action, go-to-definition, the outline, the CUDA text and the tuning lenses
//! of a store handed in. Each checks the exact text the editor would show, so that a change of what
//! `ide` says is a reviewed snapshot update (`UPDATE_EXPECT=1 cargo test -p tilec-ide`).

use expect_test::{Expect, expect};
use tilec_db::{RootDatabase, SourceFile};
use tilec_ir::Span;

use crate::{Symbol, code_actions, document_symbols, goto_definition, hover, inlay_hints, kernels};

/// Marks the cursor in a fixture.
const CURSOR: &str = "$0";

/// A GEMM and a row reduction, each with one call site: what the hovers and hints describe.
const KERNELS: &str = r#"import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[-1])
def gemm(M, N, K, block_M=64, block_N=64, block_K=32):
    @T.prim_func
    def main(
        A: T.Tensor((M, K), "float16"),
        B: T.Tensor((K, N), "float16"),
        C: T.Tensor((M, N), "float32"),
    ):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_tile = T.alloc_shared((block_M, block_K), "float16")
            B_tile = T.alloc_shared((block_K, block_N), "float16")
            acc = T.alloc_fragment((block_M, block_N), "float32")
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                T.copy(A[by * block_M, k * block_K], A_tile)
                T.copy(B[k * block_K, bx * block_N], B_tile)
                T.gemm(A_tile, B_tile, acc)
            T.copy(acc, C[by * block_M, bx * block_N])

    return main


@tilelang.jit(out_idx=[1])
def row_sum(M, N, block_M=8, dtype="float32"):
    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), S: T.Tensor((M,), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            tile = T.alloc_fragment((block_M, N), dtype)
            sums = T.alloc_fragment((block_M,), dtype)
            T.copy(A[bx * block_M, 0], tile)
            T.reduce_sum(tile, sums, dim=1)
            for i in T.Parallel(block_M):
                S[bx * block_M + i] = sums[i] * 0.5

    return main


def main():
    gemm(256, 256, 128)
    row_sum(1024, 256)
"#;

/// The fixture without its cursor marker, and the marker's byte offset (if it has one).
fn split_cursor(fixture: &str) -> (String, Option<u32>) {
    match fixture.find(CURSOR) {
        Some(at) => {
            let text = format!("{}{}", &fixture[..at], &fixture[at + CURSOR.len()..]);
            let offset = u32::try_from(at).expect("a fixture is smaller than 4 GiB");
            (text, Some(offset))
        }
        None => (fixture.to_owned(), None),
    }
}

/// `fixture` with the cursor placed before the `nth` (0-based) occurrence of `needle` in `text`.
fn with_cursor(text: &str, needle: &str, nth: usize) -> String {
    let (at, _) = text
        .match_indices(needle)
        .nth(nth)
        .unwrap_or_else(|| panic!("`{needle}` occurs {} times, not {}", nth + 1, nth + 1));
    format!("{}{CURSOR}{}", &text[..at], &text[at..])
}

/// Runs `work` on a database holding `text`, on a thread with a large stack (the parser and the
/// evaluator recurse over the syntax tree, as in the `tilec` binary).
fn analyse<T: Send>(text: String, work: impl FnOnce(&RootDatabase, SourceFile) -> T + Send) -> T {
    std::thread::scope(|scope| {
        std::thread::Builder::new()
            .stack_size(tilec_frontend::ANALYSIS_STACK_BYTES)
            .spawn_scoped(scope, move || {
                let db = RootDatabase::default();
                let file = SourceFile::new(&db, "kernels.py".into(), text, Vec::new());
                work(&db, file)
            })
            .expect("a thread with a large stack starts")
            .join()
            .unwrap_or_else(|payload| std::panic::resume_unwind(payload))
    })
}

/// 1-based `line:column` of a byte offset.
fn line_column(text: &str, offset: u32) -> String {
    let before = &text[..offset as usize];
    let line = before.matches('\n').count() + 1;
    let column = before.len() - before.rfind('\n').map_or(0, |at| at + 1) + 1;
    format!("{line}:{column}")
}

fn slice(text: &str, span: Span) -> &str {
    &text[span.start as usize..span.end as usize]
}

/// The hover at the cursor: the text it covers, then its markdown.
fn check_hover(fixture: &str, expected: Expect) {
    let (text, offset) = split_cursor(fixture);
    let offset = offset.expect("the fixture marks the cursor");
    let rendered = analyse(text.clone(), move |db, file| {
        hover(db, file, offset).map_or_else(
            || "(no hover)".to_owned(),
            |hover| format!("`{}`\n---\n{}", slice(&text, hover.span), hover.markdown),
        )
    });
    expected.assert_eq(&rendered);
}

#[test]
fn hover_on_a_fragment_gives_its_layout_and_registers() {
    check_hover(
        &with_cursor(KERNELS, "acc = T.alloc_fragment", 0),
        expect![[r#"
            `acc`
            ---
            **`acc`**: local.fragment buffer, `float32[64, 64]`

            ```text
            thread    = i // 16 * 32 + i % 8 * 4 + j % 8 // 2
            index     = (i % 16 // 8 * 2 + j // 8 * 4 + j % 2)
            replicate = 1
            ```

            32 registers per thread, layout from T.gemm (tensor-core accumulator) at line 21

            Thread of each element (top-left corner):
            ```text
             0  0  1  1  2  2  3  3
             4  4  5  5  6  6  7  7
             8  8  9  9 10 10 11 11
            12 12 13 13 14 14 15 15
            16 16 17 17 18 18 19 19
            20 20 21 21 22 22 23 23
            24 24 25 25 26 26 27 27
            28 28 29 29 30 30 31 31
            ```

            _Shown for instance #0 (M=256, N=256, K=128) of `gemm`._"#]],
    );
}

#[test]
fn hover_on_a_shared_buffer_gives_its_size_and_stages() {
    check_hover(
        &with_cursor(KERNELS, "A_tile = T.alloc_shared", 0),
        expect![[r#"
            `A_tile`
            ---
            **`A_tile`**: shared buffer, `float16[64, 32]`

            8 KiB (2 stages), 64-byte XOR swizzle over 64 rows × 32 halfs (operand of the `T.gemm`)

            _Shown for instance #0 (M=256, N=256, K=128) of `gemm`._"#]],
    );
}

#[test]
fn hover_on_a_parallel_loop_gives_its_plan() {
    check_hover(
        &with_cursor(KERNELS, "in T.Parallel(block_M)", 0),
        expect![[r#"
            `for i in T.Parallel(block_M):`
            ---
            **`T.Parallel`** over `[8]`

            ```text
            thread = i % 2 * 64 + rep
            ```

            vector width 1, layout from the layout of `sums`

            dense: each of 128 threads runs 4 iteration(s)

            _Shown for instance #0 (M=1024, N=256) of `row_sum`._"#]],
    );
}

#[test]
fn hover_on_a_kernel_name_gives_its_launch() {
    check_hover(
        &with_cursor(KERNELS, "row_sum(M, N", 0),
        expect![[r#"
        `row_sum`
        ---
        **kernel `row_sum`**

        launch: grid (128) × block (128)

        128 threads, 0 B shared, ~20 fragment registers per thread, 16 block(s) per SM (limited by threads)

        _Shown for instance #0 (M=1024, N=256) of `row_sum`._"#]],
    );
}

#[test]
fn no_hover_outside_a_kernel() {
    check_hover(
        &with_cursor(KERNELS, "import tilelang.language", 0),
        expect!["(no hover)"],
    );
    check_hover(&with_cursor(KERNELS, "gemm(256", 0), expect!["(no hover)"]);
}

#[test]
fn inlay_hints_name_registers_bytes_vectors_and_launches() {
    let text = KERNELS.to_owned();
    let rendered = analyse(text.clone(), move |db, file| {
        inlay_hints(db, file)
            .iter()
            .map(|hint| {
                format!(
                    "{} {} ({})",
                    line_column(&text, hint.offset),
                    hint.label,
                    hint.tooltip
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    });
    expect![[r#"
        13:94 128 threads · 16 KiB shared · ~32 regs (128 threads, 16 KiB shared, ~32 fragment registers per thread, 13 block(s) per SM (limited by shared memory)
        instance #0 (M=256, N=256, K=128) of `gemm`)
        14:67 8 KiB (2 stages) (instance #0 (M=256, N=256, K=128) of `gemm`)
        15:67 8 KiB (2 stages) (instance #0 (M=256, N=256, K=128) of `gemm`)
        16:66 32 regs/thread (instance #0 (M=256, N=256, K=128) of `gemm`)
        31:65 128 threads · ~20 regs (128 threads, 0 B shared, ~20 fragment registers per thread, 16 block(s) per SM (limited by threads)
        instance #0 (M=1024, N=256) of `row_sum`)
        32:57 16 regs/thread (instance #0 (M=1024, N=256) of `row_sum`)
        33:55 4 regs/thread (instance #0 (M=1024, N=256) of `row_sum`)
        34:45 vector 4 (instance #0 (M=1024, N=256) of `row_sum`)"#]].assert_eq(&rendered);
}

#[test]
fn go_to_definition_leads_from_a_use_to_the_allocation() {
    let (text, offset) = split_cursor(&with_cursor(KERNELS, "sums, dim=1", 0));
    let offset = offset.expect("cursor");
    let rendered = analyse(text.clone(), move |db, file| {
        goto_definition(db, file, offset).map(|span| {
            format!(
                "{} `{}`",
                line_column(&text, span.start),
                slice(&text, span)
            )
        })
    });
    expect![[r#"Some("33:13 `sums`")"#]].assert_eq(&format!("{rendered:?}"));
}

#[test]
fn the_outline_lists_each_kernel_with_its_buffers() {
    fn render(symbol: &Symbol, depth: usize, out: &mut Vec<String>) {
        out.push(format!(
            "{}{} {:?} {}",
            "  ".repeat(depth),
            symbol.name,
            symbol.kind,
            symbol.detail
        ));
        for child in &symbol.children {
            render(child, depth + 1, out);
        }
    }
    let rendered = analyse(KERNELS.to_owned(), |db, file| {
        let mut out = Vec::new();
        for symbol in document_symbols(db, file) {
            render(&symbol, 0, &mut out);
        }
        out.join("\n")
    });
    expect![[r#"
        gemm Kernel 1 instance(s)
          A Parameter global float16
          B Parameter global float16
          C Parameter global float32
          A_tile Buffer shared float16
          B_tile Buffer shared float16
          acc Buffer fragment float32
        row_sum Kernel 1 instance(s)
          A Parameter global float32
          S Parameter global float32
          tile Buffer fragment float32
          sums Buffer fragment float32"#]]
    .assert_eq(&rendered);
}

/// A GEMM accumulator read row by row by a serial loop inside `T.Parallel`: a layout conflict,
/// which the code action fixes by iterating both variables in parallel.
const CONFLICT: &str = r#"import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[-1])
def gemm_rows(M, N, K, block_M=64, block_N=64, block_K=32):
    @T.prim_func
    def main(
        A: T.Tensor((M, K), "float16"),
        B: T.Tensor((K, N), "float16"),
        C: T.Tensor((M, N), "float32"),
    ):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_tile = T.alloc_shared((block_M, block_K), "float16")
            B_tile = T.alloc_shared((block_K, block_N), "float16")
            acc = T.alloc_fragment((block_M, block_N), "float32")
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                T.copy(A[by * block_M, k * block_K], A_tile)
                T.copy(B[k * block_K, bx * block_N], B_tile)
                T.gemm(A_tile, B_tile, acc)
            for i in T.Parallel(block_M):
                for j in T.serial(block_N):
                    C[by * block_M + i, bx * block_N + j] = acc[i, j]

    return main


def main():
    gemm_rows(256, 256, 128)
"#;

#[test]
fn the_layout_conflict_action_merges_the_loops_and_the_result_is_clean() {
    let (text, offset) = split_cursor(&with_cursor(CONFLICT, "acc[i, j]", 0));
    let offset = offset.expect("cursor");
    let fixed = analyse(text.clone(), move |db, file| {
        let actions = code_actions(
            db,
            file,
            Span {
                start: offset,
                end: offset,
            },
        );
        assert_eq!(actions.len(), 1, "{actions:#?}");
        let action = &actions[0];
        assert_eq!(action.title, "Iterate `j` with `T.Parallel` as well");
        assert_eq!(action.code, tilec_ir::Code::LayoutConflict);
        let mut fixed = text.clone();
        for edit in action.edits.iter().rev() {
            fixed.replace_range(
                edit.span.start as usize..edit.span.end as usize,
                &edit.new_text,
            );
        }
        fixed
    });
    let merged = "            for i, j in T.Parallel(block_M, block_N):\n                \
                  C[by * block_M + i, bx * block_N + j] = acc[i, j]\n";
    assert!(fixed.contains(merged), "{fixed}");
    assert!(!fixed.contains("T.serial"), "{fixed}");
    let left = analyse(fixed, |db, file| tilec_db::file_diagnostics(db, file).len());
    assert_eq!(left, 0, "the fixed file has no diagnostic");
}

#[test]
fn no_action_away_from_a_diagnostic() {
    let (text, offset) = split_cursor(&with_cursor(CONFLICT, "T.clear(acc)", 0));
    let offset = offset.expect("cursor");
    let count = analyse(text, move |db, file| {
        code_actions(
            db,
            file,
            Span {
                start: offset,
                end: offset,
            },
        )
        .len()
    });
    assert_eq!(count, 0);
}

#[test]
fn every_kernel_of_the_file_is_found_with_its_instance() {
    let rendered = analyse(KERNELS.to_owned(), |db, file| {
        kernels(db, file)
            .iter()
            .map(|kernel| {
                format!(
                    "{} {} instance(s), shown: {}",
                    kernel.def.name(db),
                    kernel.instances.len(),
                    kernel
                        .shown
                        .map_or_else(|| "none".to_owned(), |i| crate::instance_label(db, i))
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    });
    expect![[r#"
        gemm 1 instance(s), shown: #0 (M=256, N=256, K=128)
        row_sum 1 instance(s), shown: #0 (M=1024, N=256)"#]]
    .assert_eq(&rendered);
}

/// The CUDA the editor shows is the query's for the target asked for, and a kernel that cannot be
/// lowered gets the reason instead of text.
#[test]
fn cuda_text_is_printed_for_the_target_asked_for_or_says_why_there_is_none() {
    let (hopper, ampere) = analyse(KERNELS.to_owned(), |db, file| {
        let row_sum = kernels(db, file)
            .iter()
            .find(|kernel| kernel.def.name(db) == "row_sum")
            .and_then(|kernel| kernel.shown)
            .expect("row_sum has an instance");
        (
            crate::cuda_text(db, row_sum, tilec_ir::Target::Sm90),
            crate::cuda_text(db, row_sum, tilec_ir::Target::Sm80),
        )
    });
    let hopper = hopper.expect("row_sum lowers for sm_90");
    let ampere = ampere.expect("row_sum lowers for sm_80");
    assert!(
        hopper.starts_with("// Generated by tilec for sm_90: kernel"),
        "{hopper}"
    );
    assert!(
        ampere.starts_with("// Generated by tilec for sm_80: kernel"),
        "{ampere}"
    );

    // `T.gemm` on float64 operands has no tensor-core instruction to lower to.
    let float_gemm = KERNELS.replace("\"float16\"", "\"float64\"");
    let why = analyse(float_gemm, |db, file| {
        let gemm = kernels(db, file)
            .iter()
            .find(|kernel| kernel.def.name(db) == "gemm")
            .and_then(|kernel| kernel.shown)
            .expect("gemm has an instance");
        crate::cuda_text(db, gemm, tilec_ir::Target::Sm90)
    });
    let why = why.expect_err("a float64 gemm does not lower");
    assert!(
        why.starts_with("`gemm` cannot be lowered to CUDA yet: "),
        "{why}"
    );
}

/// A tuning store that knows one winner, measured on an sm_90 GPU, for `row_sum`'s instance.
#[derive(Debug)]
struct OneWinner;

impl crate::tune::TunedResults for OneWinner {
    fn winner(
        &self,
        file: &std::path::Path,
        kernel: &str,
        args: &[(String, tilec_ir::ConstValue)],
        target: tilec_ir::Target,
    ) -> Option<crate::tune::MeasuredWinner> {
        let wanted = file == std::path::Path::new("kernels.py")
            && kernel == "row_sum"
            && args.iter().any(|(name, _)| name == "M")
            && target == tilec_ir::Target::Sm90;
        wanted.then(|| crate::tune::MeasuredWinner {
            config: vec![("block_M".to_owned(), 16)],
            device: "NVIDIA H100".to_owned(),
            median_ms: 0.01,
            measured: Vec::new(),
        })
    }
}

/// The editor's lenses ask the store they are handed for the document's target, and show its
/// winner; for another target the store has none, and no measured lens appears.
#[test]
fn the_editor_lenses_show_the_winner_of_the_store_handed_in() {
    let measured_titles = |target| {
        analyse(KERNELS.to_owned(), move |db, file| {
            crate::tune::editor_tune_lenses(db, file, target, Some(&OneWinner))
                .into_iter()
                .map(|lens| lens.title)
                .filter(|title| title.starts_with("tilec tune:"))
                .collect::<Vec<_>>()
        })
    };
    let hopper = measured_titles(tilec_ir::Target::Sm90);
    assert_eq!(
        hopper,
        ["tilec tune: block_M=16 measured fastest on NVIDIA H100: 10.0 µs - apply"],
        "{hopper:?}"
    );
    assert_eq!(
        measured_titles(tilec_ir::Target::Sm80),
        Vec::<String>::new()
    );
}
