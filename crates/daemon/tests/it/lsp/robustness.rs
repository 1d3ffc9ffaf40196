//! What a client can do wrong without taking the server down: a set of hostile messages (broken
//! framing, bodies that are not JSON or not JSON-RPC, unknown methods, wrong parameters) sent one
//! after another to one server, which answers each as JSON-RPC says and then still hovers
//! correctly; documents with CR-only line endings; a document whose name looks like an option,
//! run with `tilec/runKernel`; an analysis cancelled by another document's edit, which must run
//! again; and pathological documents open beside a normal one, which must not slow its hovers.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::client::{Client, position_of, uri_of};

/// A small kernel whose fragment `x` has a hover, and whose instance the emulator runs at once.
const ROW_SUM: &str = r#"import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[1])
def row_sum(M, N, block_M, threads=128, dtype="float32"):
    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), S: T.Tensor((M,), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            x = T.alloc_fragment((block_M, N), dtype)
            s = T.alloc_fragment((block_M,), dtype)
            T.copy(X[bx * block_M, 0], x)
            T.reduce_sum(x, s, dim=1)
            T.copy(s, S[bx * block_M])

    return main


row_sum(64, 128, 8)
"#;

/// What the hover on `x` in [`ROW_SUM`] must say.
const X_HOVER: &str = "**`x`**: local.fragment buffer, `float32[8, 128]`";

fn framed(body: &[u8]) -> Vec<u8> {
    [
        format!("Content-Length: {}\r\n\r\n", body.len()).as_bytes(),
        body,
    ]
    .concat()
}

fn framed_json(message: &Value) -> Vec<u8> {
    framed(message.to_string().as_bytes())
}

/// What the server must send back for one hostile message.
enum Expect {
    /// An error response with this id and code.
    Error(Value, i64),
    /// Nothing: the message is logged and skipped.
    Nothing,
}

/// The hostile set: each entry's bytes and the answer they get. Requests in it use ids from 100.
fn hostile_messages(uri: &str) -> Vec<(&'static str, Vec<u8>, Expect)> {
    use Expect::{Error, Nothing};
    let hover = |id: i64, params: Value| json!({"jsonrpc": "2.0", "id": id, "method": "textDocument/hover", "params": params});
    let good_hover = hover(
        150,
        json!({"textDocument": {"uri": uri}, "position": {"line": 9, "character": 12}}),
    )
    .to_string();
    vec![
        (
            "not JSON",
            framed(b"{\"jsonrpc\": \"2.0\", \"id\": 1,"),
            Error(Value::Null, -32700),
        ),
        (
            "not UTF-8",
            framed(b"{\"jsonrpc\":\"2.0\",\"method\":\"\xff\xfe\"}"),
            Error(Value::Null, -32700),
        ),
        ("an empty body", framed(b""), Error(Value::Null, -32700)),
        ("a JSON number", framed(b"42"), Error(Value::Null, -32600)),
        (
            "a batch",
            framed(br#"[{"jsonrpc":"2.0","id":101,"method":"shutdown"}]"#),
            Error(Value::Null, -32600),
        ),
        (
            "an object that is no message",
            framed(br#"{"jsonrpc":"2.0"}"#),
            Error(Value::Null, -32600),
        ),
        (
            "an id without a method",
            framed(br#"{"jsonrpc":"2.0","id":"x"}"#),
            Error(json!("x"), -32600),
        ),
        (
            "JSON-RPC 1.0",
            framed(br#"{"jsonrpc":"1.0","id":102,"method":"textDocument/hover"}"#),
            Error(json!(102), -32600),
        ),
        (
            "a method that is not a string",
            framed(br#"{"jsonrpc":"2.0","id":103,"method":7}"#),
            Error(json!(103), -32600),
        ),
        (
            "an id that is an object",
            framed(br#"{"jsonrpc":"2.0","id":{"a":1},"method":"shutdown"}"#),
            Error(Value::Null, -32600),
        ),
        (
            "an unknown method",
            framed_json(&json!({"jsonrpc": "2.0", "id": 104, "method": "tilec/noSuchThing"})),
            Error(json!(104), -32601),
        ),
        (
            "a hover with wrong params",
            framed_json(&hover(105, json!({"textDocument": 5}))),
            Error(json!(105), -32602),
        ),
        (
            "a hover without params",
            framed_json(&json!({"jsonrpc": "2.0", "id": 106, "method": "textDocument/hover"})),
            Error(json!(106), -32602),
        ),
        (
            "runKernel with wrong params",
            framed_json(
                &json!({"jsonrpc": "2.0", "id": 107, "method": "tilec/runKernel", "params": [1, 2]}),
            ),
            Error(json!(107), -32602),
        ),
        (
            "didOpen with wrong params",
            framed_json(
                &json!({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": {"uri": 3}}}),
            ),
            Nothing,
        ),
        (
            "didChange without params",
            framed_json(&json!({"jsonrpc": "2.0", "method": "textDocument/didChange"})),
            Nothing,
        ),
        (
            "an unknown notification",
            framed_json(&json!({"jsonrpc": "2.0", "method": "tilec/noSuchNote", "params": {}})),
            Nothing,
        ),
        (
            "a response to no request",
            framed_json(&json!({"jsonrpc": "2.0", "id": 999, "result": null})),
            Nothing,
        ),
        (
            "a header without Content-Length",
            [
                b"Content-Type: application/vscode-jsonrpc\r\n\r\n".as_slice(),
                br#"{"jsonrpc":"2.0","id":108,"method":"shutdown"}"#,
            ]
            .concat(),
            Nothing,
        ),
        (
            "a Content-Length that is not a number",
            [
                b"Content-Length: twelve\r\n\r\n".as_slice(),
                br#"{"jsonrpc":"2.0","id":109,"method":"shutdown"}"#,
            ]
            .concat(),
            Nothing,
        ),
        (
            "a negative Content-Length",
            b"Content-Length: -1\r\n\r\n{}".to_vec(),
            Nothing,
        ),
        (
            "an absurd Content-Length",
            b"Content-Length: 99999999999999\r\n\r\n{}".to_vec(),
            Nothing,
        ),
        (
            "bytes with no header at all",
            b"hello, server\r\n\r\n\x00\x01\x02".to_vec(),
            Nothing,
        ),
        // 10 bytes of a request: a parse error, and the rest of it is skipped as garbage.
        (
            "a Content-Length too short",
            [
                b"Content-Length: 10\r\n\r\n".as_slice(),
                hover(110, json!({})).to_string().as_bytes(),
            ]
            .concat(),
            Error(Value::Null, -32700),
        ),
        (
            "a hover at line 2^32-1",
            framed_json(&hover(
                111,
                json!({"textDocument": {"uri": uri}, "position": {"line": u32::MAX, "character": u32::MAX}}),
            )),
            Nothing,
        ),
        // The next message's header starts inside the announced body: the request is still read.
        (
            "a Content-Length too long",
            [
                format!("Content-Length: {}\r\n\r\n", good_hover.len() + 30).as_bytes(),
                good_hover.as_bytes(),
            ]
            .concat(),
            Nothing,
        ),
    ]
}

#[test]
fn the_server_survives_every_hostile_message_and_still_hovers() {
    let folder = tempfile::tempdir().expect("temp folder");
    let uri = uri_of(&folder.path().join("row_sum.py"));
    let mut client = Client::start();
    client.open(&uri, ROW_SUM);
    client.diagnostics(&uri, 1);
    let messages = hostile_messages(&uri);
    assert!(messages.len() >= 15);
    for (what, bytes, expect) in messages {
        client.write_raw(&bytes);
        if let Expect::Error(id, code) = expect {
            let reply = client.wait_for(|m| m.get("method").is_none() && m["id"] == id);
            assert_eq!(reply["error"]["code"], code, "{what}: {reply}");
        }
        assert!(client.alive(), "the server died after {what}");
    }
    // The hover whose Content-Length was too long is answered once the next message arrives.
    let at = position_of(ROW_SUM, "x = T.alloc_fragment", 0);
    let hover = client.hover(&uri, at);
    assert!(
        hover["contents"]["value"]
            .as_str()
            .is_some_and(|markdown| markdown.starts_with(X_HOVER)),
        "{hover}"
    );
    let overrun = client.response(150);
    assert!(
        overrun["result"]["contents"]["value"]
            .as_str()
            .is_some_and(|markdown| markdown.starts_with(X_HOVER)),
        "{overrun}"
    );
    let far = client.response(111);
    assert!(far.get("error").is_none(), "{far}");
    // Nothing else was answered: no extra errors, and the request cut short is lost, not run.
    let extra: Vec<&Value> = client
        .unclaimed()
        .filter(|m| m.get("method").is_none())
        .collect();
    assert!(extra.is_empty(), "unexpected answers: {extra:?}");
    assert!(client.alive());
}

#[test]
fn cr_only_line_endings_give_the_same_positions() {
    let broken = ROW_SUM.replace("S[bx * block_M]", "S[bx * block_K]");
    let mut client = Client::start();
    let folder = tempfile::tempdir().expect("temp folder");
    for (name, newline) in [("lf", "\n"), ("cr", "\r"), ("crlf", "\r\n")] {
        let uri = uri_of(&folder.path().join(format!("{name}.py")));
        client.open(&uri, &broken.replace('\n', newline));
        let diagnostics = client.diagnostics(&uri, 1);
        assert_eq!(diagnostics.len(), 1, "{name}: {diagnostics:?}");
        assert_eq!(diagnostics[0]["code"], "undefined-name", "{name}");
        assert_eq!(
            diagnostics[0]["range"],
            json!({"start": {"line": 13, "character": 29}, "end": {"line": 13, "character": 36}}),
            "{name}: `block_K` on line 14"
        );
        let hover = client.hover(&uri, json!({"line": 9, "character": 12}));
        assert!(
            hover["contents"]["value"]
                .as_str()
                .is_some_and(|markdown| markdown.starts_with(X_HOVER)),
            "{name}: {hover}"
        );
        assert_eq!(
            hover["range"],
            json!({"start": {"line": 9, "character": 12}, "end": {"line": 9, "character": 13}}),
            "{name}"
        );
    }
}

#[test]
fn run_kernel_never_reads_a_document_name_as_an_option() {
    let folder = tempfile::tempdir().expect("temp folder");
    let path = folder.path().join("--help.py");
    std::fs::write(&path, ROW_SUM).expect("write");
    let mut client = Client::start();
    let uri = uri_of(&path);
    client.open(&uri, ROW_SUM);
    let run = client.result(
        "tilec/runKernel",
        json!({"textDocument": {"uri": uri}, "position": null, "device": "cpu"}),
    );
    assert_eq!(run["ok"], true, "{run}");
    assert!(
        run["output"]
            .as_str()
            .is_some_and(|output| output.contains("the CPU emulator")),
        "{run}"
    );
    // An unsaved document is named by its URI's path: `--help`, which must stay a (missing) file.
    let untitled = "untitled:--help";
    client.open(untitled, ROW_SUM);
    let run = client.result(
        "tilec/runKernel",
        json!({"textDocument": {"uri": untitled}, "position": null, "device": "cpu"}),
    );
    assert_eq!(run["ok"], false, "{run}");
    let output = run["output"].as_str().expect("output");
    assert!(!output.contains("Usage:"), "read as an option: {output}");
    assert!(output.contains("--help"), "{output}");
}

/// A module whose evaluation takes a few hundred milliseconds.
const SLOW_MODULE: &str = "import tilelang\nimport tilelang.language as T\n\nt = 0\nfor i in range(1000000):\n    t = t + i\n";

#[test]
fn an_analysis_cancelled_by_another_documents_open_runs_again() {
    // Opening the second document changes the database while the first is analysed, which
    // cancels that analysis; the first document must still get its diagnostics.
    let folder = tempfile::tempdir().expect("temp folder");
    let mut client = Client::start();
    let slow = uri_of(&folder.path().join("slow.py"));
    client.open(&slow, SLOW_MODULE);
    std::thread::sleep(Duration::from_millis(100));
    let normal = uri_of(&folder.path().join("row_sum.py"));
    client.open(&normal, ROW_SUM);
    assert_eq!(client.diagnostics(&normal, 1), Vec::<Value>::new());
    assert_eq!(client.diagnostics(&slow, 1), Vec::<Value>::new());
}

/// A module that never stops running: every statement at module level is evaluated.
const ENDLESS_LOOP: &str =
    "import tilelang\nimport tilelang.language as T\n\nwhile True:\n    x = [0] * (1 << 20)\n";

/// Another, counting instead of allocating.
const ENDLESS_COUNT: &str =
    "import tilelang\nimport tilelang.language as T\n\nn = 0\nwhile n >= 0:\n    n = n + 1\n";

/// A module that builds a string of 2^40 bytes by doubling (without a bound on the evaluator's
/// memory, it takes all the machine has).
const DOUBLING_STRING: &str = "import tilelang\nimport tilelang.language as T\n\ns = 'a'\nfor _ in range(40):\n    s = s + s\n";

/// A kernel whose fragment has 2^40 elements.
const HUGE_FRAGMENT: &str = r#"import tilelang
import tilelang.language as T


@tilelang.jit
def huge(M):
    @T.prim_func
    def main(A: T.Tensor((M,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            a = T.alloc_fragment((1 << 40,), "float32")
            T.copy(A[0], a)

    return main


huge(1024)
"#;

/// The longest a hover on a normal document may take beside pathological ones.
const HOVER_BUDGET: Duration = Duration::from_millis(100);

/// Opens `pathological` documents (all in one write, as an editor restoring its tabs does) and a
/// normal one, and returns the client and the normal document's URI once it has diagnostics.
fn open_beside(pathological: &[&str], folder: &std::path::Path) -> (Client, String) {
    let mut client = Client::start();
    let opens: Vec<u8> = pathological
        .iter()
        .enumerate()
        .flat_map(|(index, text)| {
            let uri = uri_of(&folder.join(format!("bad{index}.py")));
            framed_json(&json!({"jsonrpc": "2.0", "method": "textDocument/didOpen",
                "params": {"textDocument": {"uri": uri, "languageId": "python", "version": 1,
                "text": text}}}))
        })
        .collect();
    client.write_raw(&opens);
    let uri = uri_of(&folder.join("row_sum.py"));
    client.open(&uri, ROW_SUM);
    assert_eq!(client.diagnostics(&uri, 1), Vec::<Value>::new());
    (client, uri)
}

/// Hovers on `x` in the normal document three times, each within [`HOVER_BUDGET`].
fn assert_hovers_fast(client: &mut Client, uri: &str) {
    let at = position_of(ROW_SUM, "x = T.alloc_fragment", 0);
    let params = json!({"textDocument": {"uri": uri}, "position": at});
    for _ in 0..3 {
        let started = Instant::now();
        let hover = client.result("textDocument/hover", params.clone());
        let took = started.elapsed();
        assert!(
            hover["contents"]["value"]
                .as_str()
                .is_some_and(|markdown| markdown.starts_with(X_HOVER)),
            "{hover}"
        );
        assert!(
            took < HOVER_BUDGET,
            "the hover took {took:?} beside pathological documents"
        );
    }
}

#[test]
fn a_normal_document_hovers_fast_beside_endless_modules() {
    // Two analyses that never end hold two threads (as many as the pool starts with); the normal
    // document is analysed, and hovered, on others.
    let folder = tempfile::tempdir().expect("temp folder");
    let (mut client, uri) =
        open_beside(&[ENDLESS_LOOP, ENDLESS_COUNT, HUGE_FRAGMENT], folder.path());
    assert_hovers_fast(&mut client, &uri);
    assert!(client.alive());
}

#[test]
fn a_normal_document_hovers_fast_beside_a_doubling_string() {
    let folder = tempfile::tempdir().expect("temp folder");
    let (mut client, uri) = open_beside(&[DOUBLING_STRING, ENDLESS_LOOP], folder.path());
    assert_hovers_fast(&mut client, &uri);
    assert!(client.alive());
}

#[test]
fn an_edit_beside_an_endless_module_is_analysed() {
    let folder = tempfile::tempdir().expect("temp folder");
    let (mut client, uri) = open_beside(&[ENDLESS_LOOP, HUGE_FRAGMENT], folder.path());
    let broken = ROW_SUM.replace("S[bx * block_M]", "S[bx * block_K]");
    client.change(&uri, 2, &broken);
    let diagnostics = client.diagnostics(&uri, 2);
    assert_eq!(diagnostics.len(), 1, "{diagnostics:?}");
    assert_eq!(diagnostics[0]["code"], "undefined-name");
    assert_hovers_fast(&mut client, &uri);
}
