//! What the editor shows is worth its room (issue 33): an unclosed bracket typed keystroke by
//! keystroke gives one or two parse errors and leaves the other kernels' hovers and hints, and the
//! kernel typed into keeps its last good hints; inlay hints fit VS Code's cut and leave out what
//! says nothing; saving is handled; `info` logs are tilec's own, not salsa's per-query lines.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::client::{Client, open_fixture, position_at};

/// VS Code cuts an inlay hint's label after this many characters.
const VS_CODE_INLAY_CUT: usize = 43;

fn inlay_hints(client: &mut Client, uri: &str) -> Vec<Value> {
    let hints = client.result(
        "textDocument/inlayHint",
        json!({"textDocument": {"uri": uri}, "range": {"start": {"line": 0, "character": 0}, "end": {"line": 9999, "character": 0}}}),
    );
    hints.as_array().cloned().unwrap_or_default()
}

fn label(hint: &Value) -> &str {
    hint["label"].as_str().unwrap_or("?")
}

#[test]
fn typing_an_unclosed_call_gives_few_parse_errors_and_keeps_the_other_kernels() {
    let (mut client, uri, text) = open_fixture("kernels/pointwise_family.py");
    client.diagnostics(&uri, 1);
    let typed = "y = T.exp(x[i, j]";
    let anchor = "            for i in T.Parallel(block):\n";
    let at = text.find(anchor).expect("relu's loop") + anchor.len();
    let untouched_hints = inlay_hints(&mut client, &uri)
        .iter()
        .filter(|hint| hint["position"]["line"].as_u64() > Some(20))
        .count();
    assert!(untouched_hints > 0, "the kernels after relu have hints");
    for (version, end) in (1..=typed.len()).enumerate() {
        let version = i64::try_from(version).expect("a few versions") + 2;
        let mut edited = text.clone();
        edited.insert_str(at, &format!("                {}\n", &typed[..end]));
        client.change(&uri, version, &edited);
        let diagnostics = client.diagnostics(&uri, version);
        let parse_errors = diagnostics
            .iter()
            .filter(|d| d["code"] == "parse-error")
            .count();
        assert!(
            parse_errors <= 2,
            "`{}`: {parse_errors} parse errors: {diagnostics:?}",
            &typed[..end]
        );
        // `axpy`, two kernels further down, keeps its hover and its hints (a line shifted by one).
        let axpy = edited.find("def axpy").expect("axpy");
        let parallel = edited[axpy..].find("T.Parallel").expect("axpy's loop") + axpy;
        let hover = client.hover(&uri, position_at(&edited, parallel));
        let markdown = hover["contents"]["value"].as_str().unwrap_or("");
        assert!(
            markdown.contains("of `axpy`"),
            "`{}`: {hover}",
            &typed[..end]
        );
        let hints_after = inlay_hints(&mut client, &uri)
            .iter()
            .filter(|hint| hint["position"]["line"].as_u64() > Some(21))
            .count();
        assert_eq!(
            hints_after,
            untouched_hints,
            "`{}`: {:?}",
            &typed[..end],
            inlay_hints(&mut client, &uri)
                .iter()
                .map(|hint| format!("{} {}", hint["position"]["line"], label(hint)))
                .collect::<Vec<_>>()
        );
    }
}

#[test]
fn inlay_hints_fit_the_cut_and_say_something() {
    for fixture in ["kernels/softmax.py", "kernels/pointwise_family.py"] {
        let (mut client, uri, _) = open_fixture(fixture);
        let hints = inlay_hints(&mut client, &uri);
        assert!(!hints.is_empty(), "{fixture}");
        for hint in &hints {
            let label = label(hint);
            assert!(
                label.chars().count() <= VS_CODE_INLAY_CUT,
                "{fixture}: `{label}` is cut off"
            );
            assert_ne!(label, "vector 1", "{fixture}");
            assert!(!label.contains("~0 regs"), "{fixture}: `{label}`");
            assert!(!label.starts_with("0 regs"), "{fixture}: `{label}`");
        }
        // The launch's whole summary, occupancy included, moved to the hint's tooltip.
        let launch = hints
            .iter()
            .find(|hint| label(hint).contains("threads"))
            .expect("a launch hint");
        let tooltip = launch["tooltip"].as_str().unwrap_or("");
        assert!(tooltip.contains("per SM"), "{fixture}: {tooltip}");
    }
}

#[test]
fn saving_and_editing_at_info_log_no_warning_and_no_salsa_lines() {
    let lines = log_of_a_session("info");
    let noisy: Vec<&String> = lines
        .iter()
        .filter(|line| line.contains("salsa") || line.contains("WARN"))
        .collect();
    assert!(
        noisy.is_empty(),
        "{} log lines, noisy: {noisy:#?}",
        lines.len()
    );
    // Salsa does log a line per query at `info`: naming it in the filter brings them back.
    let salsa = log_of_a_session("info,salsa=info");
    assert!(
        salsa.iter().filter(|line| line.contains("salsa")).count() > 10,
        "{salsa:#?}"
    );
}

/// The server's log, at `filter`, over an open, four edits, saves and hint requests.
fn log_of_a_session(filter: &str) -> Vec<String> {
    let (mut client, log) = Client::start_logging(&[("TILEC_LOG", filter)]);
    let (path, text) = super::client::fixture_text("kernels/softmax.py");
    let uri = super::client::uri_of(&path);
    client.open(&uri, &text);
    client.diagnostics(&uri, 1);
    for version in 2..6 {
        let edited = text.replace("threads=256", &format!("threads={}", 64 << (version % 2)));
        client.change(&uri, version, &edited);
        client.diagnostics(&uri, version);
        client.notify(
            "textDocument/didSave",
            json!({"textDocument": {"uri": uri}}),
        );
        inlay_hints(&mut client, &uri);
    }
    client.shutdown();
    // The log thread reads to the end of the closed pipe; give it a moment to get there.
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline && !reader_finished(&log) {
        std::thread::sleep(Duration::from_millis(50));
    }
    log.lock().expect("log").clone()
}

/// True once the log reader has let go of the log (it ends when the server's stderr closes).
fn reader_finished(log: &std::sync::Arc<std::sync::Mutex<Vec<String>>>) -> bool {
    std::sync::Arc::strong_count(log) == 1
}

#[test]
fn the_kernel_being_typed_into_keeps_its_last_good_hints() {
    let (mut client, uri, text) = open_fixture("kernels/softmax.py");
    client.diagnostics(&uri, 1);
    let labels_of = |hints: &[Value]| {
        let mut labels: Vec<String> = hints.iter().map(|hint| label(hint).to_owned()).collect();
        labels.sort();
        labels
    };
    let good = labels_of(&inlay_hints(&mut client, &uri));
    assert!(good.len() > 3, "{good:?}");
    let typed = "y = T.exp(x[i, j]";
    let anchor = "                x[i, j] = x[i, j] / total[i]\n";
    let at = text.find(anchor).expect("the second loop's body") + anchor.len();
    let typed_line = text[..at].matches('\n').count() as u64;
    for (version, end) in (1..=typed.len()).enumerate() {
        let version = i64::try_from(version).expect("a few versions") + 2;
        let mut edited = text.clone();
        edited.insert_str(at, &format!("                {}\n", &typed[..end]));
        client.change(&uri, version, &edited);
        client.diagnostics(&uri, version);
        let hints = inlay_hints(&mut client, &uri);
        assert_eq!(labels_of(&hints), good, "`{}`", &typed[..end]);
        // The hints after the typed line moved down with it.
        for hint in &hints {
            let line = hint["position"]["line"].as_u64().unwrap_or(0);
            assert_ne!(line, typed_line, "`{}`: {hint}", &typed[..end]);
        }
    }
}
