//! A scripted LSP client: spawns `tilec lsp`, frames JSON-RPC messages over its stdin and stdout,
//! and waits for responses and notifications. Dropping it shuts the server down and checks that it
//! exits cleanly, so every test also tests shutdown and exit.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// Long enough for a debug build on a loaded 2-core machine; a hang fails instead of blocking CI.
const WAIT: Duration = Duration::from_secs(60);

pub(super) fn corpus(name: &str) -> PathBuf {
    crate::common::corpus_dir().join(name)
}

/// A corpus file's text, or `None` when the corpus is not beside the checkout (the suite is then
/// reported skipped once, or fails in CI: `crate::common::skip_suite`).
pub(super) fn corpus_text(name: &str) -> Option<String> {
    let path = corpus(name);
    match std::fs::read_to_string(&path) {
        Ok(text) => Some(text),
        Err(_) => {
            crate::common::skip_suite(&path);
            None
        }
    }
}

/// A fixture's path and text (`tests/fixtures/`, in the repository).
pub(super) fn fixture_text(name: &str) -> (PathBuf, String) {
    let path = crate::common::fixture(name);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|error| panic!("cannot read {}: {error}", path.display()));
    (path, text)
}

/// A server with a fixture open: the client, the file's URI and its text.
pub(super) fn open_fixture(name: &str) -> (Client, String, String) {
    let (path, text) = fixture_text(name);
    let uri = uri_of(&path);
    let mut client = Client::start();
    client.open(&uri, &text);
    (client, uri, text)
}

pub(super) fn uri_of(path: &Path) -> String {
    format!("file://{}", path.display())
}

pub(super) struct Client {
    child: Child,
    stdin: ChildStdin,
    messages: Receiver<Value>,
    /// Notifications and server requests read while waiting for something else.
    pending: VecDeque<Value>,
    next_id: i64,
    shut_down: bool,
}

impl Client {
    pub(super) fn start() -> Client {
        Client::start_with(&[])
    }

    pub(super) fn start_with(env: &[(&str, &str)]) -> Client {
        Client::spawn(env, Stdio::inherit())
    }

    /// A server whose log (stderr) is collected: the client and the lines logged so far, which
    /// grow as the server goes on.
    pub(super) fn start_logging(env: &[(&str, &str)]) -> (Client, Arc<Mutex<Vec<String>>>) {
        let mut client = Client::spawn(env, Stdio::piped());
        let stderr = client.child.stderr.take().expect("stderr");
        let log = Arc::new(Mutex::new(Vec::new()));
        let lines = Arc::clone(&log);
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                lines.lock().expect("log lock").push(line);
            }
        });
        (client, log)
    }

    fn spawn(env: &[(&str, &str)], stderr: Stdio) -> Client {
        let mut command = Command::new(env!("CARGO_BIN_EXE_tilec"));
        command
            .arg("lsp")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr);
        for (key, value) in env {
            command.env(key, value);
        }
        let mut child = command.spawn().expect("tilec lsp starts");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = child.stdout.take().expect("stdout");
        let (sender, messages) = channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            while let Some(message) = read_message(&mut reader) {
                if sender.send(message).is_err() {
                    break;
                }
            }
        });
        let mut client = Client {
            child,
            stdin,
            messages,
            pending: VecDeque::new(),
            next_id: 1,
            shut_down: false,
        };
        let result = client.request(
            "initialize",
            json!({"processId": null, "rootUri": null, "capabilities": {},
                   "initializationOptions": {"target": "sm_90"}}),
        );
        assert_eq!(result["result"]["serverInfo"]["name"], "tilec", "{result}");
        client.notify("initialized", json!({}));
        client
    }

    fn write(&mut self, message: &Value) {
        let body = message.to_string();
        write!(self.stdin, "Content-Length: {}\r\n\r\n{body}", body.len()).expect("write");
        self.stdin.flush().expect("flush");
    }

    /// Writes bytes as they are, framing and all: for messages a well-behaved client never sends.
    pub(super) fn write_raw(&mut self, bytes: &[u8]) {
        self.stdin.write_all(bytes).expect("write");
        self.stdin.flush().expect("flush");
    }

    /// The messages read while waiting for others and not yet asked for.
    pub(super) fn unclaimed(&self) -> impl Iterator<Item = &Value> {
        self.pending.iter()
    }

    pub(super) fn notify(&mut self, method: &str, params: Value) {
        self.write(&json!({"jsonrpc": "2.0", "method": method, "params": params}));
    }

    /// Sends a request and returns its id without waiting.
    pub(super) fn send_request(&mut self, method: &str, params: Value) -> i64 {
        let id = self.next_id;
        self.next_id += 1;
        self.write(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        id
    }

    /// The whole response (`result` or `error`) to request `id`.
    pub(super) fn response(&mut self, id: i64) -> Value {
        self.wait_for(|message| message["id"] == id && message.get("method").is_none())
    }

    pub(super) fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.send_request(method, params);
        self.response(id)
    }

    /// The result of a request that must succeed.
    pub(super) fn result(&mut self, method: &str, params: Value) -> Value {
        let response = self.request(method, params);
        assert!(
            response.get("error").is_none(),
            "{method} failed: {response}"
        );
        response["result"].clone()
    }

    /// The hover at `position` (an LSP position object) of the document `uri`.
    pub(super) fn hover(&mut self, uri: &str, position: Value) -> Value {
        self.result(
            "textDocument/hover",
            json!({"textDocument": {"uri": uri}, "position": position}),
        )
    }

    /// The diagnostics published for `uri` at `version`.
    pub(super) fn diagnostics(&mut self, uri: &str, version: i64) -> Vec<Value> {
        let message = self.wait_for(|message| {
            message["method"] == "textDocument/publishDiagnostics"
                && message["params"]["uri"] == uri
                && message["params"]["version"] == version
        });
        message["params"]["diagnostics"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    pub(super) fn open(&mut self, uri: &str, text: &str) {
        self.notify(
            "textDocument/didOpen",
            json!({"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": text}}),
        );
    }

    pub(super) fn change(&mut self, uri: &str, version: i64, text: &str) {
        self.notify(
            "textDocument/didChange",
            json!({"textDocument": {"uri": uri, "version": version}, "contentChanges": [{"text": text}]}),
        );
    }

    /// The first message (already read, or read within a minute) for which `wanted` holds.
    pub(super) fn wait_for(&mut self, wanted: impl Fn(&Value) -> bool) -> Value {
        if let Some(at) = self.pending.iter().position(&wanted) {
            return self.pending.remove(at).expect("present");
        }
        let deadline = Instant::now() + WAIT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.messages.recv_timeout(left) {
                Ok(message) if wanted(&message) => return message,
                Ok(message) => {
                    // The server asks nothing of this client, but answer any request so it
                    // never waits on us.
                    if message.get("method").is_some() && message.get("id").is_some() {
                        let id = message["id"].clone();
                        self.write(&json!({"jsonrpc": "2.0", "id": id, "result": null}));
                    } else {
                        self.pending.push_back(message);
                    }
                }
                Err(RecvTimeoutError::Timeout) => panic!("no answer from tilec lsp in {WAIT:?}"),
                Err(RecvTimeoutError::Disconnected) => panic!("tilec lsp closed its output"),
            }
        }
    }

    /// True while the server process runs.
    pub(super) fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Shutdown, exit, and the exit status.
    pub(super) fn shutdown(&mut self) {
        let response = self.request("shutdown", Value::Null);
        assert!(response.get("error").is_none(), "{response}");
        self.notify("exit", Value::Null);
        self.shut_down = true;
        let status = self.child.wait().expect("the server exits");
        assert!(status.success(), "tilec lsp exited with {status}");
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        if !self.shut_down && !std::thread::panicking() {
            self.shutdown();
        }
        let _ = self.child.kill();
    }
}

fn read_message(reader: &mut impl BufRead) -> Option<Value> {
    let mut length = None;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).ok()? == 0 {
            return None;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some(value) = line.strip_prefix("Content-Length: ") {
            length = value.parse::<usize>().ok();
        }
    }
    let mut body = vec![0; length?];
    reader.read_exact(&mut body).ok()?;
    serde_json::from_slice(&body).ok()
}

/// The 0-based (line, character) of the first occurrence of `needle` in `text`, plus `shift`
/// characters.
pub(super) fn position_of(text: &str, needle: &str, shift: usize) -> Value {
    let at = text
        .find(needle)
        .unwrap_or_else(|| panic!("`{needle}` is in the text"));
    position_at(text, at + shift)
}

/// The 0-based (line, character) of a byte offset of an ASCII text.
pub(super) fn position_at(text: &str, at: usize) -> Value {
    let line = text[..at].matches('\n').count();
    let column = at - text[..at].rfind('\n').map_or(0, |n| n + 1);
    json!({"line": line, "character": column})
}
