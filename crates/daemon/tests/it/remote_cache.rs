//! `tilec build` with a remote cache tier, end to end against real stores: a Redis server and an
//! S3-compatible server (moto), which `.ci/run` starts on ports of their own and names in
//! `TILEC_TEST_REDIS` and `TILEC_TEST_S3`. Two builds with separate local caches share the store:
//! the second lowers and compiles nothing; a corrupted remote entry is reported and rebuilt; a read-only
//! build stores nothing; a store that does not answer costs at most its timeout, once; and a
//! password in the store's URL is never printed.
//!
//! Without a server these tests say once that they skip (outside CI) or fail (with `CI` set), as
//! the suites over `shared/` do: they must never pass in CI by checking nothing.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Output};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::Value;

/// The fixtures built in each test: 7 instances, 7 launches.
const FILES: [&str; 3] = ["softmax.py", "pointwise_family.py", "elementwise_add.py"];
const LAUNCHES: u64 = 7;

/// A folder with `kernels/` holding the fixtures.
fn setup() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    let kernels = dir.path().join("kernels");
    std::fs::create_dir_all(&kernels).expect("kernels folder");
    for file in FILES {
        let source = crate::common::fixture(&format!("kernels/{file}"));
        std::fs::copy(&source, kernels.join(file)).expect("copies a fixture");
    }
    dir
}

/// A name no other test (or earlier run) uses, so that tests sharing one store do not meet.
fn unique_root(test: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("tilec-test-{test}-{}-{nanos}", std::process::id())
}

/// `tilec build PATH --out OUT --cache CACHE --format json` with the remote `url`, plus `extra`.
fn build_with(dir: &Path, path: &str, cache: &str, url: &str, extra: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tilec"))
        .current_dir(dir)
        .args([
            "build",
            path,
            "--out",
            &format!("out-{cache}"),
            "--cache",
            cache,
        ])
        .args(["--format", "json"])
        .args(extra)
        .env("TILEC_CACHE_REMOTE", url)
        .env("TILEC_CACHE_REMOTE_TIMEOUT", "2")
        .output()
        .expect("tilec runs")
}

/// The `"cache"` object of a build's summary (the build may have failed instances; the corpus
/// has files with errors on purpose).
fn cache_stats(output: &Output) -> Value {
    let stdout = String::from_utf8_lossy(&output.stdout);
    let summary = stdout
        .lines()
        .last()
        .and_then(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|value| value["kind"] == "build-summary")
        .unwrap_or_else(|| {
            panic!(
                "no build summary: {stdout}\n{}",
                String::from_utf8_lossy(&output.stderr)
            )
        });
    summary["cache"].clone()
}

fn count(stats: &Value, key: &str) -> u64 {
    stats[key].as_u64().unwrap_or(u64::MAX)
}

/// A store the tests need: its URL from `variable`, when it answers; else one line (outside CI)
/// or a failure (in CI).
fn store(variable: &str, what: &str, answers: fn(&str) -> bool) -> Option<String> {
    static SAID: Mutex<Vec<String>> = Mutex::new(Vec::new());
    let url = std::env::var(variable).ok().filter(|url| !url.is_empty());
    if let Some(url) = url.filter(|url| answers(url)) {
        return Some(url);
    }
    let why =
        format!("{what} is not reachable: set {variable} to a running one (`.ci/run` starts it)");
    assert!(
        std::env::var_os("CI").is_none(),
        "{why}, and CI must run every test"
    );
    let mut said = SAID
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if !said.iter().any(|name| name == variable) {
        said.push(variable.to_owned());
        let _ = writeln!(
            std::io::stderr().lock(),
            "SKIPPED remote cache tests: {why}"
        );
    }
    None
}

/// The Redis server of `TILEC_TEST_REDIS` (`redis://127.0.0.1:PORT`), when it answers PING.
fn redis() -> Option<String> {
    store("TILEC_TEST_REDIS", "the Redis server", |url| {
        Redis::connect(url).is_some_and(|mut redis| redis.command(&[b"PING"]) == b"+PONG\r\n")
    })
}

/// The S3 endpoint of `TILEC_TEST_S3` (`http://127.0.0.1:PORT`), when it answers HTTP.
fn s3() -> Option<String> {
    store("TILEC_TEST_S3", "the S3-compatible server", |url| {
        http(url, "GET", "/").is_some()
    })
}

/// A minimal Redis client over RESP, enough to list, read and overwrite keys behind tilec's back.
struct Redis(TcpStream);

impl Redis {
    fn connect(url: &str) -> Option<Redis> {
        let address = url.trim_start_matches("redis://").split('/').next()?;
        let stream = TcpStream::connect(address).ok()?;
        stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
        Some(Redis(stream))
    }

    /// Sends one command and returns the raw reply (read until the socket is quiet).
    fn command(&mut self, args: &[&[u8]]) -> Vec<u8> {
        let mut request = format!("*{}\r\n", args.len()).into_bytes();
        for arg in args {
            request.extend(format!("${}\r\n", arg.len()).bytes());
            request.extend(*arg);
            request.extend(b"\r\n");
        }
        self.0.write_all(&request).expect("writes to Redis");
        let mut reply = Vec::new();
        let mut chunk = [0u8; 65536];
        self.0
            .set_read_timeout(Some(Duration::from_millis(200)))
            .expect("sets a timeout");
        while let Ok(read @ 1..) = self.0.read(&mut chunk) {
            reply.extend(&chunk[..read]);
        }
        reply
    }

    /// The keys matching `pattern` (from a `KEYS` reply's bulk strings).
    fn keys(&mut self, pattern: &str) -> Vec<String> {
        let reply =
            String::from_utf8_lossy(&self.command(&[b"KEYS", pattern.as_bytes()])).into_owned();
        reply
            .split("\r\n")
            .filter(|line| !line.is_empty() && !line.starts_with(['*', '$']))
            .map(str::to_owned)
            .collect()
    }
}

/// Sends a bodiless HTTP/1.1 request to `endpoint` and returns the status line, if any answer.
fn http(endpoint: &str, method: &str, path: &str) -> Option<String> {
    let address = endpoint.trim_start_matches("http://").trim_end_matches('/');
    let mut stream = TcpStream::connect(address).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {address}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).ok()?;
    let mut reply = String::new();
    let _ = stream.read_to_string(&mut reply);
    reply.lines().next().map(str::to_owned)
}

/// The acceptance test of the remote tier, over the corpus: a second builder with an empty
/// local cache takes every launch from the store and compiles nothing.
#[test]
fn a_second_builder_with_an_empty_local_cache_compiles_nothing() {
    let Some(redis) = redis() else { return };
    let corpus = crate::common::corpus_dir();
    if !corpus.join("EXPECTED.toml").is_file() {
        crate::common::skip_suite(&corpus.join("EXPECTED.toml"));
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let url = format!("{redis}/0/{}", unique_root("corpus"));
    let corpus = corpus.display().to_string();
    let first = cache_stats(&build_with(dir.path(), &corpus, "one", &url, &[]));
    let launches = count(&first, "misses");
    assert!(launches > 10, "{first}");
    assert_eq!(count(&first, "remote_hits"), 0, "{first}");
    assert!(count(&first, "bytes_up") > 0, "{first}");
    let second = cache_stats(&build_with(dir.path(), &corpus, "two", &url, &[]));
    assert_eq!(count(&second, "remote_hits"), launches, "{second}");
    assert_eq!(count(&second, "misses"), 0, "{second}");
    assert_eq!(count(&second, "nvrtc_calls"), 0, "{second}");
    assert_eq!(count(&second, "lowered"), 0, "{second}");
    assert_eq!(
        count(&second, "instance_hits"),
        count(&first, "lowered"),
        "{second}"
    );
    assert_eq!(count(&second, "bytes_up"), 0, "{second}");
    assert!(count(&second, "bytes_down") > 0, "{second}");
    assert_eq!(second["remote_available"], true, "{second}");
    // The remote hits were copied into the second local cache: a third build is all local.
    let third = cache_stats(&build_with(dir.path(), &corpus, "two", &url, &[]));
    assert_eq!(count(&third, "local_hits"), launches, "{third}");
    // Both builders wrote the same outputs.
    let one = std::fs::read_to_string(dir.path().join("out-one/gemm/matmul-0.cu"));
    let two = std::fs::read_to_string(dir.path().join("out-two/gemm/matmul-0.cu"));
    assert!(one.is_ok() && one.ok() == two.ok(), "the outputs differ");
}

/// One launch entry damaged in the store (truncated, checksum no longer matching): the second
/// builder reports it, rebuilds that launch, and replaces the entry, so a third builder gets it
/// whole.
#[test]
fn a_corrupted_remote_entry_is_reported_rebuilt_and_replaced() {
    let Some(redis) = redis() else { return };
    let dir = setup();
    let root = unique_root("corrupt");
    let url = format!("{redis}/0/{root}");
    let emit = ["--emit", "cuda"];
    let first = cache_stats(&build_with(dir.path(), "kernels", "one", &url, &emit));
    assert_eq!(count(&first, "misses"), LAUNCHES, "{first}");
    let mut client = Redis::connect(&redis).expect("connects");
    let keys = client.keys(&format!("*{root}*"));
    assert_eq!(
        keys.len(),
        14,
        "a launch and an instance entry each: {keys:?}"
    );
    let launch_key = keys
        .iter()
        .find(|key| {
            let value = client.command(&[b"GET", key.as_bytes()]);
            String::from_utf8_lossy(&value).contains("\"cuda\"")
        })
        .expect("a launch entry");
    client.command(&[b"SET", launch_key.as_bytes(), b"tilec-cache 3 truncated"]);
    let output = build_with(dir.path(), "kernels", "two", &url, &emit);
    let second = cache_stats(&output);
    assert_eq!(count(&second, "remote_hits"), LAUNCHES - 1, "{second}");
    assert_eq!(count(&second, "misses"), 1, "{second}");
    assert_eq!(count(&second, "lowered"), 1, "{second}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        stderr.matches("corrupt cache entry for").count(),
        1,
        "{stderr}"
    );
    assert!(stderr.contains("in the remote cache"), "{stderr}");
    let third = cache_stats(&build_with(dir.path(), "kernels", "three", &url, &emit));
    assert_eq!(count(&third, "remote_hits"), LAUNCHES, "repaired: {third}");
}

/// A read-only builder (an untrusted job) reads the store but stores nothing in it.
#[test]
fn a_read_only_build_reads_and_stores_nothing() {
    let Some(redis) = redis() else { return };
    let dir = setup();
    let url = format!("{redis}/0/{}", unique_root("read-only"));
    let read_only = ["--emit", "cuda", "--cache-remote-mode", "read-only"];
    let first = cache_stats(&build_with(dir.path(), "kernels", "one", &url, &read_only));
    assert_eq!(count(&first, "bytes_up"), 0, "{first}");
    assert_eq!(first["remote_mode"], "read-only", "{first}");
    let second = cache_stats(&build_with(dir.path(), "kernels", "two", &url, &read_only));
    assert_eq!(count(&second, "remote_hits"), 0, "{second}");
    assert_eq!(count(&second, "misses"), LAUNCHES, "{second}");
}

/// The same two builders over S3 (moto's server): the second is all remote hits.
#[test]
fn the_s3_store_serves_a_second_builder() {
    let Some(endpoint) = s3() else { return };
    let bucket = unique_root("s3").to_lowercase().replace('_', "-");
    let bucket = &bucket[..bucket.len().min(63)];
    let created = http(&endpoint, "PUT", &format!("/{bucket}")).unwrap_or_default();
    assert!(
        created.contains("200"),
        "cannot create the bucket: {created}"
    );
    let dir = setup();
    let url = format!("s3://{bucket}/tilec");
    let run = |cache: &str| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_tilec"));
        command
            .current_dir(dir.path())
            .args(["build", "kernels", "--emit", "cuda", "--format", "json"])
            .args(["--out", &format!("out-{cache}"), "--cache", cache])
            .env("TILEC_CACHE_REMOTE", &url)
            .env("TILEC_CACHE_REMOTE_TIMEOUT", "5")
            .env("AWS_ENDPOINT_URL", &endpoint)
            .env("AWS_REGION", "us-east-1")
            .env("AWS_ACCESS_KEY_ID", "testing")
            .env("AWS_SECRET_ACCESS_KEY", "testing");
        cache_stats(&command.output().expect("tilec runs"))
    };
    let first = run("one");
    assert_eq!(count(&first, "misses"), LAUNCHES, "{first}");
    assert!(count(&first, "bytes_up") > 0, "{first}");
    let second = run("two");
    assert_eq!(count(&second, "remote_hits"), LAUNCHES, "{second}");
    assert_eq!(count(&second, "misses"), 0, "{second}");
}

/// A server that accepts connections and never answers (a hung store): the build goes on from
/// local work, warns once, and is slower by about one timeout, not one per launch. A port where
/// nothing listens (a stopped server) fails at once. Neither needs a real store.
#[test]
fn a_store_that_does_not_answer_costs_one_timeout_once() {
    let listener = TcpListener::bind("127.0.0.1:0").expect("binds");
    let port = listener.local_addr().expect("an address").port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming().flatten() {
            held.push(stream);
        }
    });
    let dir = setup();
    let emit = ["--emit", "cuda"];
    let started = Instant::now();
    let output = build_with(
        dir.path(),
        "kernels",
        "hung",
        &format!("redis://127.0.0.1:{port}/0"),
        &emit,
    );
    let elapsed = started.elapsed();
    let stats = cache_stats(&output);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(count(&stats, "misses"), LAUNCHES, "{stats}");
    assert_eq!(stats["remote_available"], false, "{stats}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(stderr.matches("is unavailable").count(), 1, "{stderr}");
    // The timeout is 2 s; the build itself takes well under a second here.
    assert!(elapsed < Duration::from_secs(10), "{elapsed:?}");

    let closed = TcpListener::bind("127.0.0.1:0").expect("binds");
    let port = closed.local_addr().expect("an address").port();
    drop(closed);
    let started = Instant::now();
    let output = build_with(
        dir.path(),
        "kernels",
        "stopped",
        &format!("redis://127.0.0.1:{port}/0"),
        &emit,
    );
    assert!(output.status.success());
    assert_eq!(cache_stats(&output)["remote_available"], false);
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
}

/// A password in the store's URL reaches neither the summary nor the warning: both show it
/// masked.
#[test]
fn a_password_in_the_url_is_never_printed() {
    let closed = TcpListener::bind("127.0.0.1:0").expect("binds");
    let port = closed.local_addr().expect("an address").port();
    drop(closed);
    let dir = setup();
    let url = format!("redis://tilec:hunter2@127.0.0.1:{port}/0");
    for format in ["json", "human"] {
        let output = Command::new(env!("CARGO_BIN_EXE_tilec"))
            .current_dir(dir.path())
            .args([
                "build", "kernels", "--out", "out", "--cache", "cache", "--emit", "cuda",
            ])
            .args(["--format", format])
            .env("TILEC_CACHE_REMOTE", &url)
            .output()
            .expect("tilec runs");
        let all = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(!all.contains("hunter2"), "{all}");
        assert!(all.contains("redis://tilec:****@127.0.0.1"), "{all}");
    }
}
