//! What the editor shows for the fixtures of `tests/fixtures/` (and one corpus file): diagnostics with their ranges, related locations and
//! links; a fragment's layout on hover; registers and shared memory as inlay hints; symbols and
//! definitions; the code action that removes a layout conflict; the custom requests.

use expect_test::expect;
use serde_json::{Value, json};

use super::client::{Client, corpus_text, fixture_text, open_fixture, position_of, uri_of};

/// `line:col-line:col code` (0-based), one per diagnostic, for readable assertions.
fn summarize(diagnostics: &[Value]) -> String {
    diagnostics
        .iter()
        .map(|d| {
            let r = &d["range"];
            format!(
                "{}:{}-{}:{} {}",
                r["start"]["line"],
                r["start"]["character"],
                r["end"]["line"],
                r["end"]["character"],
                d["code"].as_str().unwrap_or("?")
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn a_layout_conflict_is_published_with_its_origin_and_its_page() {
    let (mut client, uri, _) = open_fixture("diagnostics/serial_read_of_gemm_accumulator.py");
    let diagnostics = client.diagnostics(&uri, 1);
    expect!["27:20-27:69 layout-conflict"].assert_eq(&summarize(&diagnostics));
    let conflict = &diagnostics[0];
    assert_eq!(conflict["severity"], 1);
    assert_eq!(conflict["source"], "tilec");
    // The link is the code's page in the source tree, which opens outside VS Code too; it is the
    // page `tilec explain layout-conflict` prints.
    let href = conflict["codeDescription"]["href"].as_str().expect("href");
    let page = href
        .strip_prefix("file://")
        .filter(|path| path.ends_with("/docs/codes/layout-conflict.md"))
        .unwrap_or_else(|| panic!("a file link to docs/codes/layout-conflict.md: {href}"));
    assert_eq!(
        std::fs::read_to_string(page).expect("the linked page exists"),
        tilec_ide::explain_page(tilec_ir::Code::LayoutConflict)
    );
    let related = &conflict["relatedInformation"][0];
    assert_eq!(related["location"]["uri"], uri);
    assert_eq!(
        related["location"]["range"]["start"]["line"], 24,
        "the T.gemm line"
    );
    assert_eq!(related["message"], "`acc`'s layout is fixed here");
    let message = conflict["message"].as_str().expect("message");
    assert!(
        message.contains("threads 0 and 1") && message.contains("\nhelp: iterate `j`"),
        "{message}"
    );
}

#[test]
fn the_code_action_removes_the_conflict() {
    let (mut client, uri, text) = open_fixture("diagnostics/serial_read_of_gemm_accumulator.py");
    let diagnostics = client.diagnostics(&uri, 1);
    let actions = client.result(
        "textDocument/codeAction",
        json!({"textDocument": {"uri": uri}, "range": diagnostics[0]["range"],
               "context": {"diagnostics": diagnostics}}),
    );
    let action = &actions[0];
    assert_eq!(action["title"], "Iterate `j` with `T.Parallel` as well");
    assert_eq!(action["kind"], "quickfix");
    assert_eq!(action["diagnostics"][0]["code"], "layout-conflict");
    let edits = action["edit"]["changes"][uri.as_str()]
        .as_array()
        .expect("edits")
        .clone();
    let fixed = apply(&text, &edits);
    let merged = "            for i, j in T.Parallel(block_M, block_N):\n                C[by * block_M + i, bx * block_N + j] = acc[i, j]  # error: layout-conflict\n";
    let start = fixed.find("            for i, j").expect("the merged loop");
    assert_eq!(&fixed[start..start + merged.len()], merged);
    assert!(!fixed.contains("T.serial"), "the serial loop is gone");
    client.change(&uri, 2, &fixed);
    assert_eq!(
        summarize(&client.diagnostics(&uri, 2)),
        "",
        "the fix leaves no diagnostic"
    );
}

/// Applies LSP text edits (non-overlapping) to a text.
fn apply(text: &str, edits: &[Value]) -> String {
    let offset = |position: &Value| -> usize {
        let line = usize::try_from(position["line"].as_u64().expect("line")).expect("a line");
        let character =
            usize::try_from(position["character"].as_u64().expect("character")).expect("a column");
        let start: usize = text.split_inclusive('\n').take(line).map(str::len).sum();
        start + character
    };
    let mut edits: Vec<(usize, usize, String)> = edits
        .iter()
        .map(|e| {
            (
                offset(&e["range"]["start"]),
                offset(&e["range"]["end"]),
                e["newText"].as_str().expect("text").to_owned(),
            )
        })
        .collect();
    edits.sort_by_key(|e| std::cmp::Reverse(e.0));
    let mut out = text.to_owned();
    for (start, end, new_text) in edits {
        out.replace_range(start..end, &new_text);
    }
    out
}

#[test]
fn hover_on_a_fragment_shows_its_layout() {
    let (mut client, uri, text) = open_fixture("kernels/softmax.py");
    client.diagnostics(&uri, 1);
    let hover = client.hover(&uri, position_of(&text, "x = T.alloc_fragment", 0));
    assert_eq!(hover["contents"]["kind"], "markdown");
    expect![[r#"
        **`x`**: local.fragment buffer, `float32[2, 4096]`

        ```text
        thread    = j // 4 % 256
        index     = (i * 16 + j // 1024 * 4 + j % 4)
        replicate = 1
        ```

        32 registers per thread, layout from the `T.copy` at line 15

        Thread of each element (top-left corner):
        ```text
         0  0  0  0  1  1  1  1
         0  0  0  0  1  1  1  1
        ```

        _Shown for instance #0 (M=16384, N=4096, block_M=2) of `softmax`._"#]]
    .assert_eq(hover["contents"]["value"].as_str().expect("markdown"));
    assert_eq!(
        hover["range"]["start"],
        json!({"line": 11, "character": 12})
    );
}

#[test]
fn hover_on_a_loop_and_on_the_kernel() {
    let (mut client, uri, text) = open_fixture("kernels/softmax.py");
    let loop_hover = client.hover(&uri, position_of(&text, "in T.Parallel", 3));
    expect![[r#"
        **`T.Parallel`** over `[2, 4096]`

        ```text
        thread = j // 4 % 256
        ```

        vector width 1, layout from the layout of `x`

        dense: each of 256 threads runs 32 iteration(s)

        _Shown for instance #0 (M=16384, N=4096, block_M=2) of `softmax`._"#]]
    .assert_eq(loop_hover["contents"]["value"].as_str().expect("markdown"));
    let kernel_hover = client.hover(&uri, position_of(&text, "with T.Kernel", 5));
    expect![[r#"
        **kernel `softmax`**

        launch: grid (8192) × block (256)

        256 threads, 0 B shared, ~34 fragment registers per thread, 6 block(s) per SM (limited by registers)

        _Shown for instance #0 (M=16384, N=4096, block_M=2) of `softmax`._"#]].assert_eq(kernel_hover["contents"]["value"].as_str().expect("markdown"));
}

#[test]
fn inlay_hints_show_registers_bytes_vectors_and_the_launch() {
    let (mut client, uri, _) = open_fixture("kernels/softmax.py");
    let hints = client.result(
        "textDocument/inlayHint",
        json!({"textDocument": {"uri": uri}, "range": {"start": {"line": 0, "character": 0}, "end": {"line": 999, "character": 0}}}),
    );
    let shown: Vec<String> = hints
        .as_array()
        .expect("hints")
        .iter()
        .map(|h| {
            format!(
                "{}:{} {}",
                h["position"]["line"],
                h["position"]["character"],
                h["label"].as_str().unwrap_or("?")
            )
        })
        .collect();
    expect![[r#"
        10:68 256 threads · ~34 regs
        11:59 32 regs/thread
        12:60 2 regs/thread
        13:61 2 regs/thread
        14:41 vector 4"#]]
    .assert_eq(&shown.join("\n"));
}

#[test]
fn symbols_and_definitions() {
    let (mut client, uri, text) = open_fixture("kernels/softmax.py");
    let symbols = client.result(
        "textDocument/documentSymbol",
        json!({"textDocument": {"uri": uri}}),
    );
    let kernel = &symbols[0];
    assert_eq!(kernel["name"], "softmax");
    let children: Vec<String> = kernel["children"]
        .as_array()
        .expect("children")
        .iter()
        .map(|c| {
            format!(
                "{} ({})",
                c["name"].as_str().unwrap_or("?"),
                c["detail"].as_str().unwrap_or("?")
            )
        })
        .collect();
    expect!["X (global float16), Y (global float16), x (fragment float32), peak (fragment float32), total (fragment float32)"].assert_eq(&children.join(", "));
    // From the use of `peak` in `T.reduce_max(x, peak, ...)` to its allocation.
    let definition = client.result(
        "textDocument/definition",
        json!({"textDocument": {"uri": uri}, "position": position_of(&text, "reduce_max(x, peak", 15)}),
    );
    assert_eq!(
        definition["range"]["start"],
        json!({"line": 12, "character": 12})
    );
}

#[test]
fn custom_requests_give_cuda_a_picture_and_a_page() {
    let (mut client, uri, text) = open_fixture("kernels/softmax.py");
    let at = position_of(&text, "x = T.alloc_fragment", 0);
    let cuda = client.result(
        "tilec/cudaSource",
        json!({"textDocument": {"uri": uri}, "position": at}),
    );
    assert_eq!(cuda["kernel"], "softmax");
    assert!(
        cuda["cuda"].as_str().expect("cuda").contains("__global__"),
        "{cuda}"
    );
    let svg = client.result(
        "tilec/layoutSvg",
        json!({"textDocument": {"uri": uri}, "position": at}),
    );
    assert_eq!(svg["buffer"], "x");
    let picture = svg["svg"].as_str().expect("svg");
    assert!(picture.starts_with("<svg"), "{svg}");
    // The page around the grid follows the viewer's theme: no colour of it is an attribute (which
    // no stylesheet could override); the stylesheet has the dark scheme and the editor's class.
    assert!(
        picture.contains("@media (prefers-color-scheme: dark)")
            && picture.contains("svg.dark .background"),
        "{picture}"
    );
    for fixed in ["fill=\"#fff\"", "stroke=\"#222\"", "fill=\"#111\""] {
        assert!(!picture.contains(fixed), "{fixed} in {picture}");
    }
    let page = client.result("tilec/explain", json!({"code": "layout-conflict"}));
    assert!(
        page["markdown"]
            .as_str()
            .expect("page")
            .starts_with("# layout-conflict")
    );
    let unknown = client.request("tilec/explain", json!({"code": "no-such-code"}));
    assert_eq!(unknown["error"]["code"], -32803, "{unknown}");
}

#[test]
fn run_kernel_runs_the_saved_file_in_a_child_process() {
    let Some(text) = corpus_text("row_reduce.py") else {
        return;
    };
    // A small instance, so that the emulator answers in a moment.
    let text = text.replace("row_reduce(1024, 512, 8)", "row_reduce(64, 128, 8)");
    let folder = tempfile::tempdir().expect("temp folder");
    let path = folder.path().join("row_reduce.py");
    std::fs::write(&path, &text).expect("write");
    let uri = uri_of(&path);
    let mut client = Client::start();
    client.open(&uri, &text);
    let run = client.result(
        "tilec/runKernel",
        json!({"textDocument": {"uri": uri}, "position": null, "device": "cpu"}),
    );
    assert_eq!(run["kernel"], "row_reduce");
    assert_eq!(run["ok"], true, "{run}");
    let output = run["output"].as_str().expect("output");
    assert!(output.contains("the CPU emulator"), "{output}");
    client.change(
        &uri,
        2,
        &text.replace("row_reduce(64, 128, 8)", "row_reduce(64, 128, 4)"),
    );
    let run = client.result(
        "tilec/runKernel",
        json!({"textDocument": {"uri": uri}, "position": null, "device": "cpu"}),
    );
    assert!(
        run["output"]
            .as_str()
            .expect("output")
            .starts_with("note: the file has unsaved changes"),
        "{run}"
    );
    let bad = client.request(
        "tilec/runKernel",
        json!({"textDocument": {"uri": uri}, "position": null, "device": "tpu"}),
    );
    assert_eq!(bad["error"]["code"], -32803, "{bad}");
}

#[test]
fn files_without_tilelang_are_left_alone() {
    let mut client = Client::start();
    let uri = "file:///tmp/plain.py";
    client.open(uri, "import numpy as np\n\ndef f(x):\n    return x +\n");
    assert_eq!(client.diagnostics(uri, 1), Vec::<Value>::new());
    let hover = client.hover(uri, json!({"line": 2, "character": 4}));
    assert_eq!(hover, Value::Null);
}

/// Two fragments annotated with layouts that disagree, read in one loop.
const ANNOTATIONS_DISAGREE: &str = r#"import tilelang
import tilelang.language as T


def by_column(i, j):
    return j, i


def by_row(i, j):
    return i * 16 + j, 0


@tilelang.jit
def mixed():
    @T.prim_func
    def main(A: T.Tensor((4, 16), T.float32), C: T.Tensor((4, 16), T.float32)):
        with T.Kernel(1, threads=64):
            a = T.alloc_fragment((4, 16), T.float32)
            b = T.alloc_fragment((4, 16), T.float32)
            T.annotate_layout({a: T.Fragment((4, 16), forward_fn=by_row)})
            T.annotate_layout({b: T.Fragment((4, 16), forward_fn=by_column)})
            for i, j in T.Parallel(4, 16):
                a[i, j] = A[i, j]
            for i, j in T.Parallel(4, 16):
                C[i, j] = a[i, j] + b[i, j]

    return main


def main():
    mixed()
"#;

#[test]
fn the_annotation_action_inserts_a_layout_that_works() {
    let folder = tempfile::tempdir().expect("temp folder");
    let path = folder.path().join("annotations.py");
    let uri = uri_of(&path);
    let mut client = Client::start();
    client.open(&uri, ANNOTATIONS_DISAGREE);
    let diagnostics = client.diagnostics(&uri, 1);
    assert_eq!(summarize(&diagnostics), "24:16-24:43 layout-conflict");
    let actions = client.result(
        "textDocument/codeAction",
        json!({"textDocument": {"uri": uri}, "range": diagnostics[0]["range"],
               "context": {"diagnostics": diagnostics}}),
    );
    let action = &actions[0];
    assert_eq!(
        action["title"],
        "Annotate `a` with the layout the other accesses agree on"
    );
    let edits = action["edit"]["changes"][uri.as_str()]
        .as_array()
        .expect("edits")
        .clone();
    let fixed = apply(ANNOTATIONS_DISAGREE, &edits);
    let annotation = fixed
        .lines()
        .find(|l| l.contains("annotate_layout({a:"))
        .expect("the new annotation");
    expect!["T.annotate_layout({a: T.Fragment((4, 16), forward_fn=lambda i, j: (j, i))})"]
        .assert_eq(annotation.trim());
    client.change(&uri, 2, &fixed);
    assert_eq!(
        summarize(&client.diagnostics(&uri, 2)),
        "",
        "the new annotation leaves no diagnostic"
    );
}

#[test]
fn the_tuning_lens_recommends_a_configuration_and_then_shows_the_measured_winner() {
    let (_, source) = fixture_text("kernels/softmax.py");
    let folder = tempfile::tempdir().expect("temp folder");
    let path = folder.path().join("softmax.py");
    std::fs::write(&path, &source).expect("writes the kernel");
    let uri = uri_of(&path);
    let mut client = Client::start();
    client.open(&uri, &source);
    client.diagnostics(&uri, 1);
    let lens_request = json!({"textDocument": {"uri": uri}});
    // The model's best, block_M=1 threads=128, is estimated at 69.7 µs against 71.3 µs now: 2 %
    // is not worth a lens over the call.
    let lenses = client.result("textDocument/codeLens", lens_request.clone());
    assert_eq!(lenses, json!([]), "no lens for a 2 % estimate");

    // Once `tilec tune` has stored a measurement for a GPU of the session's architecture, the
    // lens shows it: 73.7 µs against 80.6 µs is 9 % faster.
    let args = [
        ("M".to_owned(), tilec_ir::ConstValue::Int(16384)),
        ("N".to_owned(), tilec_ir::ConstValue::Int(4096)),
        ("block_M".to_owned(), tilec_ir::ConstValue::Int(2)),
    ];
    let winner = vec![("block_M".to_owned(), 1), ("threads".to_owned(), 128)];
    let current = vec![("block_M".to_owned(), 2), ("threads".to_owned(), 256)];
    tilec_runtime::tuned::TunedStore::new(&folder.path().join(".tilec-cache"))
        .put(
            &tilec_runtime::tuned::TunedInstance {
                file: &path,
                kernel: "softmax",
                args: &args,
            },
            &tilec_runtime::tuned::TunedRecord {
                device: "NVIDIA H200".to_owned(),
                arch: "sm_90".to_owned(),
                winner: winner.clone(),
                median_ms: 0.0737,
                measured: vec![(winner, 0.0737), (current, 0.0806)],
            },
        )
        .expect("stores the record");
    let lenses = client.result("textDocument/codeLens", lens_request.clone());
    let lenses = lenses.as_array().expect("lenses").clone();
    assert_eq!(lenses.len(), 1, "{lenses:?}");
    let command = &lenses[0]["command"];
    assert_eq!(
        command["title"],
        "tilec tune: block_M=1 threads=128 measured fastest on NVIDIA H200: 73.7 µs vs 80.6 µs now - apply"
    );
    assert_eq!(command["command"], "tilec.applyTuning");
    assert_eq!(command["arguments"][0], uri.as_str());
    let edits = command["arguments"][1].as_array().expect("edits").clone();
    let edited = apply(&source, &edits);
    assert!(
        edited.contains("kernel = softmax(16384, 4096, 1, threads=128)"),
        "{edited}"
    );
    assert_eq!(
        lenses[0]["range"]["start"],
        position_of(&source, "softmax(16384", 0)
    );

    // Rows of 32 on 256 threads are estimated at twice the time of the model's best: that change
    // is worth a lens (the measurement was for rows of 2, so it has none).
    let wide = source.replace("softmax(16384, 4096, 2)", "softmax(16384, 4096, 32)");
    client.change(&uri, 2, &wide);
    client.diagnostics(&uri, 2);
    let lenses = client.result("textDocument/codeLens", lens_request);
    let titles: Vec<&str> = lenses
        .as_array()
        .expect("lenses")
        .iter()
        .map(|lens| lens["command"]["title"].as_str().unwrap_or("?"))
        .collect();
    expect![[
        r#"["tilec: recommend threads=512 (est. 68.3 µs vs 133.4 µs now on the H200) - apply"]"#
    ]]
    .assert_eq(&format!("{titles:?}"));
    assert!(client.alive());
}

/// A library kernel nothing in its file calls: sizes from tensors at run time.
const LIBRARY: &str = r#"import tilelang
import tilelang.language as T
from .helpers import BLOCK


@tilelang.jit(out_idx=[1])
def scale(M, N, dtype="float16"):
    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, BLOCK), threads=128) as bx:
            tile = T.alloc_fragment((BLOCK, N), dtype)
            T.copy(A[bx * BLOCK, 0], tile)
            T.copy(tile, B[bx * BLOCK, 0])

    return main


def apply(x):
    return scale(x.shape[0], x.shape[1])(x)
"#;

#[test]
fn a_generic_instance_says_what_it_assumed_and_offers_to_pin_it() {
    let folder = tempfile::tempdir().expect("temp folder");
    let package = folder.path().join("ops");
    std::fs::create_dir_all(&package).expect("package folder");
    std::fs::write(package.join("__init__.py"), "").expect("writes __init__");
    // The helper module is not open in the editor: the server reads it from disk.
    std::fs::write(package.join("helpers.py"), "BLOCK = 32\n").expect("writes the helper");
    let path = package.join("scale.py");
    std::fs::write(&path, LIBRARY).expect("writes the kernel");
    let uri = uri_of(&path);
    let mut client = Client::start();
    client.open(&uri, LIBRARY);
    let diagnostics = client.diagnostics(&uri, 1);
    assert_eq!(summarize(&diagnostics), "18:11-18:40 generic-instance");
    let hover = client.hover(&uri, position_of(LIBRARY, "def scale", 5));
    let markdown = hover["contents"]["value"].as_str().expect("markdown");
    assert!(
        markdown.contains(
            "_Analysed with `M` symbolic; `N` = 128 (a representative choice): no call gives \
             these values at compile time._"
        ),
        "{markdown}"
    );
    // `BLOCK` came from the helper module: the fragment is 32 rows.
    let hover = client.hover(&uri, position_of(LIBRARY, "tile =", 0));
    let markdown = hover["contents"]["value"].as_str().expect("markdown");
    assert!(markdown.contains("`float16[32, 128]`"), "{markdown}");

    let actions = client.result(
        "textDocument/codeAction",
        json!({"textDocument": {"uri": uri}, "range": diagnostics[0]["range"],
               "context": {"diagnostics": diagnostics}}),
    );
    let action = &actions[0];
    assert_eq!(
        action["title"],
        "Pin this instance of `scale` in tilec.toml, to analyse it with your values"
    );
    let operations = action["edit"]["documentChanges"]
        .as_array()
        .expect("document changes");
    let manifest = uri_of(&package.join("tilec.toml"));
    assert_eq!(operations[0]["kind"], "create");
    assert_eq!(operations[0]["uri"], manifest.as_str());
    let inserted = operations[1]["edits"][0]["newText"]
        .as_str()
        .expect("the entry");
    expect![[r#"

        # M only known at run time: replace 1024 with a size you run.
        [[instance]]
        file = "scale.py"
        kernel = "scale"
        args = { N = 128, dtype = "float16", M = 1024 }
    "#]]
    .assert_eq(inserted);

    // Written as offered, the entry is an instance of its own, with no assumed value left.
    std::fs::write(package.join("tilec.toml"), inserted).expect("writes tilec.toml");
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_tilec"))
        .args(["check", "--format", "json"])
        .arg(&path)
        .output()
        .expect("tilec runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stdout.contains(r#""args":{"M":1024,"N":128,"dtype":"float16"},"symbolic":[],"assumed":{},"status":"ok""#),
        "{stdout}\n{stderr}"
    );
}

/// Show CUDA on a kernel whose text does not parse (a line being typed) says where the reason is,
/// never an empty one (found in a real VS Code: "cannot be lowered to CUDA yet: " and nothing).
#[test]
fn cuda_of_a_kernel_being_typed_says_why_there_is_none() {
    let (mut client, uri, text) = open_fixture("kernels/softmax.py");
    let broken = text.replace(
        "            T.copy(x, Y[bx * block_M, 0])\n",
        "            T.copy(x, Y[bx * block_M, 0])\n            y = T.exp(x[i, j]\n",
    );
    client.change(&uri, 2, &broken);
    let at = position_of(&broken, "x = T.alloc_fragment", 0);
    let answer = client.request(
        "tilec/cudaSource",
        json!({"textDocument": {"uri": uri}, "position": at}),
    );
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("cannot be lowered to CUDA yet: ") && !message.trim_end().ends_with(':'),
        "{answer}"
    );
}
