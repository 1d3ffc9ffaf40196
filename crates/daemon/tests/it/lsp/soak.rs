//! Random edits of corpus files: 2,000 of them, with hovers, hints and symbols asked in between.
//! The server never dies, never answers with an internal error, and its final diagnostics equal
//! a fresh `tilec check` of the final text.

use std::process::Command;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};

use super::client::{Client, corpus_text, uri_of};

const EDITS: usize = 2_000;
const FILES: [&str; 4] = [
    "softmax.py",
    "pointwise_family.py",
    "errors/layout_conflict_gemm_serial.py",
    "layernorm.py",
];
/// Pieces a person types, including half-finished ones.
const SNIPPETS: [&str; 16] = [
    "(",
    ")",
    ":",
    "T.",
    "\n",
    "    ",
    "x",
    "1",
    ",",
    "#",
    "\"",
    "[",
    "]",
    "for i in T.Parallel(4):\n",
    "T.copy(",
    "= T.alloc_fragment((",
];

/// One random edit: delete a short range, insert a snippet, duplicate a line, or undo everything.
fn edit(rng: &mut StdRng, text: &str, original: &str) -> String {
    let mut at = rng.gen_range(0..=text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    match rng.gen_range(0..20) {
        0 => original.to_owned(),
        1..=7 => {
            let mut end = (at + rng.gen_range(1..20)).min(text.len());
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            format!("{}{}", &text[..at], &text[end..])
        }
        8..=16 => {
            let snippet = SNIPPETS[rng.gen_range(0..SNIPPETS.len())];
            format!("{}{snippet}{}", &text[..at], &text[at..])
        }
        _ => {
            let start = text[..at].rfind('\n').map_or(0, |n| n + 1);
            let end = text[at..].find('\n').map_or(text.len(), |n| at + n + 1);
            format!("{}{}{}", &text[..end], &text[start..end], &text[end..])
        }
    }
}

/// (code, start line, start column, end line, end column, message) with 1-based lines and columns,
/// as `tilec check --format json` prints them.
type Key = (String, i64, i64, i64, i64, String);

fn lsp_keys(diagnostics: &[Value]) -> Vec<Key> {
    let mut keys: Vec<Key> = diagnostics
        .iter()
        .map(|d| {
            let number = |v: &Value| v.as_i64().unwrap_or(-1) + 1;
            let message = d["message"].as_str().unwrap_or("");
            let message = message.split("\nhelp: ").next().unwrap_or("").to_owned();
            let r = &d["range"];
            (
                d["code"].as_str().unwrap_or("").to_owned(),
                number(&r["start"]["line"]),
                number(&r["start"]["character"]),
                number(&r["end"]["line"]),
                number(&r["end"]["character"]),
                message,
            )
        })
        .collect();
    keys.sort();
    keys
}

fn check_keys(path: &std::path::Path) -> Vec<Key> {
    let output = Command::new(env!("CARGO_BIN_EXE_tilec"))
        .args(["check", "--format", "json"])
        .arg(path)
        .output()
        .expect("tilec check runs");
    let mut keys: Vec<Key> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|record| record["kind"] == "diagnostic")
        .map(|d| {
            (
                d["code"].as_str().unwrap_or("").to_owned(),
                d["line"].as_i64().unwrap_or(0),
                d["column"].as_i64().unwrap_or(0),
                d["end_line"].as_i64().unwrap_or(0),
                d["end_column"].as_i64().unwrap_or(0),
                d["message"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect();
    keys.sort();
    keys
}

#[test]
fn two_thousand_random_edits() {
    let Some(originals) = FILES
        .iter()
        .map(|name| corpus_text(name))
        .collect::<Option<Vec<String>>>()
    else {
        return;
    };
    let folder = tempfile::tempdir().expect("temp folder");
    let paths: Vec<_> = FILES
        .iter()
        .enumerate()
        .map(|(i, _)| folder.path().join(format!("soak_{i}.py")))
        .collect();
    let uris: Vec<String> = paths.iter().map(|p| uri_of(p)).collect();
    let mut texts = originals.clone();
    let mut versions = vec![1_i64; FILES.len()];
    let mut client = Client::start();
    for (uri, text) in uris.iter().zip(&texts) {
        client.open(uri, text);
    }
    let mut rng = StdRng::seed_from_u64(0x0071_17ec);
    let mut requests = Vec::new();
    for step in 0..EDITS {
        let which = rng.gen_range(0..FILES.len());
        texts[which] = edit(&mut rng, &texts[which], &originals[which]);
        versions[which] += 1;
        client.change(&uris[which], versions[which], &texts[which]);
        if step % 10 == 0 {
            let line = rng.gen_range(0..texts[which].lines().count().max(1));
            let position = json!({"line": line, "character": rng.gen_range(0..40)});
            let document = json!({"uri": uris[which]});
            requests.push(client.send_request(
                "textDocument/hover",
                json!({"textDocument": document, "position": position}),
            ));
            requests.push(client.send_request("textDocument/inlayHint", json!({"textDocument": document,
                "range": {"start": {"line": 0, "character": 0}, "end": {"line": 9999, "character": 0}}})));
            requests.push(client.send_request(
                "textDocument/documentSymbol",
                json!({"textDocument": document}),
            ));
        }
        if step % 100 == 99 {
            // Keep pace: the diagnostics of the latest version of the file just edited.
            client.diagnostics(&uris[which], versions[which]);
            assert!(client.alive(), "the server died after {step} edits");
        }
    }
    let (mut answered, mut cancelled) = (0, 0);
    for id in requests {
        let response = client.response(id);
        let code = response["error"]["code"].as_i64();
        assert!(
            code.is_none() || code == Some(-32801),
            "request {id}: {response}"
        );
        if code.is_some() {
            cancelled += 1
        } else {
            answered += 1
        }
    }
    eprintln!("soak: {answered} requests answered, {cancelled} cancelled by edits");
    for i in 0..FILES.len() {
        // A no-op edit makes every file publish once more, for its final version.
        versions[i] += 1;
        client.change(&uris[i], versions[i], &texts[i]);
        let published = lsp_keys(&client.diagnostics(&uris[i], versions[i]));
        std::fs::write(&paths[i], &texts[i]).expect("write the final text");
        eprintln!(
            "soak: {} ends with {} diagnostic(s)",
            FILES[i],
            published.len()
        );
        assert_eq!(
            published,
            check_keys(&paths[i]),
            "{}: the server and `tilec check` disagree",
            FILES[i]
        );
    }
}
