//! Editing: an edit that arrives while a request runs cancels it (ContentModified); a change with
//! an old version is dropped; a syntax error typed mid-kernel leaves the other kernels' hovers;
//! errors appear and clear as they are typed and fixed.

use serde_json::{Value, json};

use super::client::{Client, fixture_text, open_fixture, position_at, position_of, uri_of};

fn codes(diagnostics: &[Value]) -> Vec<String> {
    diagnostics
        .iter()
        .map(|d| d["code"].as_str().unwrap_or("?").to_owned())
        .collect()
}

#[test]
fn an_edit_during_a_request_cancels_it() {
    let (path, text) = fixture_text("kernels/softmax.py");
    let uri = uri_of(&path);
    // Every read waits 400 ms before it starts, so the edit sent 100 ms after the request lands
    // while the request holds its snapshot.
    let mut client = Client::start_with(&[("TILEC_LSP_READ_DELAY_MS", "400")]);
    client.open(&uri, &text);
    client.diagnostics(&uri, 1);
    let at = position_of(&text, "x = T.alloc_fragment", 0);
    let id = client.send_request(
        "textDocument/hover",
        json!({"textDocument": {"uri": uri}, "position": at}),
    );
    std::thread::sleep(std::time::Duration::from_millis(100));
    let edited = text.replace("threads=256", "threads=128");
    client.change(&uri, 2, &edited);
    let cancelled = client.response(id);
    assert_eq!(
        cancelled["error"]["code"], -32801,
        "ContentModified: {cancelled}"
    );
    assert_eq!(client.diagnostics(&uri, 2), Vec::<Value>::new());
    // The next request sees the edit: 128 threads hold the 2×4096 tile, 64 registers each.
    let hover = client.hover(&uri, at);
    let markdown = hover["contents"]["value"].as_str().expect("markdown");
    assert!(markdown.contains("thread    = j // 4 % 128"), "{markdown}");
    assert!(markdown.contains("64 registers per thread"), "{markdown}");
}

#[test]
fn a_change_with_an_old_version_is_dropped() {
    let (mut client, uri, text) = open_fixture("kernels/softmax.py");
    client.diagnostics(&uri, 1);
    let broken = text.replace("row_max = T.alloc_fragment", "row_max = T.alloc_fragment((");
    client.change(&uri, 3, &text.replace("threads=256", "threads=128"));
    client.change(&uri, 2, &broken);
    assert_eq!(client.diagnostics(&uri, 3), Vec::<Value>::new());
    // Version 2 arrived after 3 and was ignored: the document still has version 3's text.
    let at = position_of(&text, "x = T.alloc_fragment", 0);
    let hover = client.hover(&uri, at);
    assert!(
        hover["contents"]["value"]
            .as_str()
            .expect("markdown")
            .contains("% 128"),
        "{hover}"
    );
}

#[test]
fn a_syntax_error_mid_kernel_keeps_the_other_kernels() {
    let (mut client, uri, text) = open_fixture("kernels/pointwise_family.py");
    assert_eq!(codes(&client.diagnostics(&uri, 1)), Vec::<String>::new());
    // Half a statement typed inside `relu`, the first kernel.
    let anchor = "def relu(N, block, threads=128, dtype=\"float32\"):\n    @T.prim_func\n";
    let at = text.find(anchor).expect("relu") + anchor.len();
    let mut edited = text.clone();
    edited.insert_str(at, "    y = T.alloc_fragment((\n");
    client.change(&uri, 2, &edited);
    let diagnostics = client.diagnostics(&uri, 2);
    assert!(
        codes(&diagnostics).contains(&"parse-error".to_owned()),
        "{diagnostics:?}"
    );
    let line = i64::try_from(edited[..at].matches('\n').count()).expect("a short file");
    assert!(
        diagnostics.iter().any(|d| d["range"]["start"]["line"]
            .as_i64()
            .is_some_and(|l| (line..line + 3).contains(&l))),
        "the error is where it was typed: {diagnostics:?}"
    );
    // `axpy`, further down, still has its loop layout on hover.
    let axpy = edited.find("def axpy").expect("axpy");
    let parallel = edited[axpy..].find("T.Parallel").expect("axpy's loop") + axpy;
    let hover = client.hover(&uri, position_at(&edited, parallel));
    let markdown = hover["contents"]["value"].as_str().expect("markdown");
    assert!(
        markdown.contains("T.Parallel") && markdown.contains("thread = "),
        "{markdown}"
    );
    assert!(markdown.contains("of `axpy`"), "{markdown}");
}

#[test]
fn errors_appear_and_clear_as_they_are_typed() {
    let (mut client, uri, text) = open_fixture("kernels/softmax.py");
    client.diagnostics(&uri, 1);
    let broken = text.replace(
        "T.reduce_max(x, peak, dim=1, clear=True)",
        "T.reduce_max(x, peak, dim=1, clear=True",
    );
    assert_ne!(broken, text, "the fixture has the line this test breaks");
    for version in 2..22 {
        let (current, wanted) = if version % 2 == 0 {
            (&broken, vec!["parse-error".to_owned()])
        } else {
            (&text, Vec::new())
        };
        client.change(&uri, version, current);
        let found = codes(&client.diagnostics(&uri, version));
        assert_eq!(
            found.iter().filter(|c| *c == "parse-error").count().min(1),
            wanted.len(),
            "version {version}: {found:?}"
        );
        if wanted.is_empty() {
            assert_eq!(found, Vec::<String>::new(), "version {version}");
        }
    }
}
