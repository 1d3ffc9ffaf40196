#!/usr/bin/env python3
"""Latency and memory benchmark for `tilec lsp`, driven as an editor would drive it.

What it measures: how long the language server takes from receiving an edit (a full-text didChange) to
publishing the diagnostics of exactly that document version, on a file of many kernels where every edit
changes the analysis of one kernel; how fast it reports and clears a syntax error typed in the middle of
a kernel; and how much memory the server keeps after thousands of edits (a leak shows up here long before
an editor session would notice it).

It is a plain LSP client over stdio (Content-Length framing, JSON-RPC), standard library only, so it
runs anywhere the server binary runs, with no editor and no LSP package.

Usage:
    python3 bench/lsp_latency.py --tilec target/release/tilec
    python3 bench/lsp_latency.py --tilec target/release/tilec --edits 200 --kernels 20 \\
        --rss-edits 10000 --syntax-edits 50 --json
    python3 bench/lsp_latency.py --write-file /tmp/twenty.py          # only write the generated file
    python3 bench/lsp_latency.py --tilec target/release/tilec --validate  # `tilec check` its variants

Phases:
  open     didOpen of the generated file (version 1) until its diagnostics.
  edit     --edits edits, one at a time: edit k changes the `threads=` literal of kernel k % N, cycling
           64 -> 128 -> 256 (a launch-configuration change, so layouts and estimates are recomputed).
  syntax   --syntax-edits edits alternating between inserting `x = (` on its own line in the middle of a
           kernel's body (its diagnostics must contain code "parse-error") and removing it again (its
           diagnostics must contain no error, severity 1). `--syntax-error` picks another line. ruff's parser alone cannot tell
           where an unclosed `(` ends and would swallow the rest of the file; tilec re-parses each
           top-level definition on its own when a file has syntax errors, so the other kernels stay
           analysed while the error is on screen.
  rss      VmRSS of the server after the open, then --rss-edits edits sent without waiting for each
           one's diagnostics (but waiting every 100 edits so the server's queue stays bounded),
           sampled every 1000 edits; reports start, end and max.
  shutdown shutdown request, exit notification; the server's exit code.

Latency is measured from just before the didChange is written to the moment the reader thread has read
the publishDiagnostics for that uri and version; older versions are ignored. Percentiles are
nearest-rank.

Exit status: 0 all went well; 1 a check failed (a syntax-error edit without "parse-error", an error
diagnostic on a valid version, a nonzero server exit code); 2 the server died, timed out or answered a
request with an error.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

URI = "file:///tmp/tilec-bench/twenty.py"
THREAD_CYCLE = (128, 256, 64)  # every kernel template is valid TileLang for each of these
SYNTAX_ERROR_LINE = "x = ("  # default of --syntax-error
ERROR = 1  # LSP DiagnosticSeverity.Error


# ---------------------------------------------------------------------------------------------------
# The generated file: N distinct factories from 4 templates, in the classic style of the corpus
# (a `@tilelang.jit` factory closing over its meta parameters, a `@T.prim_func def main` inside, and the
# instantiations in the module's `def main()`, which is where tilec looks for them).
# `{threads}` is the literal the edits cycle; it sits inside the kernel body (the T.Kernel launch), so an
# edit there is an edit of the kernel itself, not of its call site.
# ---------------------------------------------------------------------------------------------------

LOGSOFTMAX = '''\
@tilelang.jit(out_idx=[1])
def {name}(M, N, block_M, dtype="float16", accum_dtype="float32"):
    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads={threads}) as bx:
            x = T.alloc_fragment((block_M, N), accum_dtype)
            e = T.alloc_fragment((block_M, N), accum_dtype)
            row_max = T.alloc_fragment((block_M,), accum_dtype)
            row_sum = T.alloc_fragment((block_M,), accum_dtype)
            T.copy(X[bx * block_M, 0], x)
            T.reduce_max(x, row_max, dim=1, clear=True)
            for i, j in T.Parallel(block_M, N):
                x[i, j] = x[i, j] - row_max[i]
                e[i, j] = T.exp(x[i, j])
            T.reduce_sum(e, row_sum, dim=1, clear=True)
            for i, j in T.Parallel(block_M, N):
                Y[bx * block_M + i, j] = T.Cast(dtype, x[i, j] - T.log(row_sum[i]))

    return main
'''

ROWMEAN = '''\
@tilelang.jit(out_idx=[1])
def {name}(M, N, block_M, dtype="float32"):
    inv_n = 1.0 / N

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Mean: T.Tensor((M,), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads={threads}) as bx:
            x = T.alloc_fragment((block_M, N), dtype)
            s = T.alloc_fragment((block_M,), dtype)
            T.copy(X[bx * block_M, 0], x)
            T.reduce_sum(x, s, dim=1, clear=True)
            for i in T.Parallel(block_M):
                s[i] = s[i] * inv_n
            T.copy(s, Mean[bx * block_M])

    return main
'''

SCALE_ADD = '''\
@tilelang.jit(out_idx=[2])
def {name}(M, N, block_M, block_N, alpha, dtype="float16"):
    @T.prim_func
    def main(
        A: T.Tensor((M, N), dtype),
        B: T.Tensor((M, N), dtype),
        C: T.Tensor((M, N), dtype),
    ):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads={threads}) as (bx, by):
            a = T.alloc_fragment((block_M, block_N), dtype)
            b = T.alloc_fragment((block_M, block_N), dtype)
            T.copy(A[by * block_M, bx * block_N], a)
            T.copy(B[by * block_M, bx * block_N], b)
            for i, j in T.Parallel(block_M, block_N):
                a[i, j] = a[i, j] * alpha + b[i, j]
            T.copy(a, C[by * block_M, bx * block_N])

    return main
'''

RMSNORM = '''\
@tilelang.jit(out_idx=[2])
def {name}(M, N, block_M=2, dtype="bfloat16", eps=1e-6):
    assert N % 32 == 0, f"N={{N}} must be a multiple of 32"
    inv_n = 1.0 / N

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), W: T.Tensor((N,), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads={threads}) as bx:
            x = T.alloc_fragment((block_M, N), "float32")
            sq = T.alloc_fragment((block_M, N), "float32")
            rstd = T.alloc_fragment((block_M,), "float32")
            T.copy(X[bx * block_M, 0], x)
            for i, j in T.Parallel(block_M, N):
                sq[i, j] = x[i, j] * x[i, j]
            T.reduce_sum(sq, rstd, dim=1, clear=True)
            for i in T.Parallel(block_M):
                rstd[i] = T.rsqrt(rstd[i] * inv_n + T.float32(eps))
            for i, j in T.Parallel(block_M, N):
                Y[bx * block_M + i, j] = T.Cast(dtype, x[i, j] * rstd[i] * W[j])

    return main
'''


def instance_args(template: str, i: int) -> str:
    """Call arguments of kernel i: sizes vary with i so the instances differ, but every fragment stays
    small enough (at most 64 registers each on 64 threads) that no thread count triggers a warning."""
    m = (1024, 2048, 4096)[i % 3]
    if template == "logsoftmax":
        return f"{m}, {(512, 1024)[i % 2]}, 2"
    if template == "rowmean":
        return f"{m}, 512, {(4, 8)[i % 2]}"
    if template == "scale_add":
        bm, bn = ((64, 64), (32, 128))[i % 2]
        return f"{m}, 2048, {bm}, {bn}, {0.5 + i / 8}"
    return f"{m}, {(512, 1024)[i % 2]}"  # rmsnorm: block_M left at its default


TEMPLATES = {"logsoftmax": LOGSOFTMAX, "rowmean": ROWMEAN, "scale_add": SCALE_ADD, "rmsnorm": RMSNORM}
HEADER = '"""{n} TileLang kernels generated by bench/lsp_latency.py for the language-server benchmark."""\n' \
         "import tilelang\nimport tilelang.language as T\n"


@dataclass
class KernelFile:
    """The benchmark document: which thread count each kernel uses, and which kernel (if any) holds
    the syntax error. The text is rendered from this state, so every version is reproducible."""

    count: int
    threads_index: list[int] = field(init=False)  # into THREAD_CYCLE, one per kernel
    broken: int | None = None
    version: int = 1
    error_line: str = SYNTAX_ERROR_LINE

    def __post_init__(self) -> None:
        self.threads_index = [0] * self.count

    def name(self, i: int) -> tuple[str, str]:
        template = list(TEMPLATES)[i % len(TEMPLATES)]
        return template, f"{template}_{i}"

    def bump_threads(self, i: int) -> None:
        self.threads_index[i] = (self.threads_index[i] + 1) % len(THREAD_CYCLE)

    def kernel_text(self, i: int) -> str:
        template, name = self.name(i)
        text = TEMPLATES[template].format(name=name, threads=THREAD_CYCLE[self.threads_index[i]])
        return insert_syntax_error(text, self.error_line) if self.broken == i else text

    def text(self) -> str:
        kernels = "\n\n".join(self.kernel_text(i) for i in range(self.count))
        calls = "\n".join(f"    {self.name(i)[1]}({instance_args(self.name(i)[0], i)})" for i in range(self.count))
        footer = f"def main():\n{calls}\n\n\nif __name__ == \"__main__\":\n    main()\n"
        return f"{HEADER.format(n=self.count)}\n\n{kernels}\n\n{footer}"


def insert_syntax_error(kernel: str, error_line: str) -> str:
    """Put `error_line` (`x = (`) on its own line halfway through the kernel body (between the T.Kernel
    line and `return main`), indented like the line it precedes so that only the line itself is wrong."""
    lines = kernel.split("\n")
    start = next(k for k, line in enumerate(lines) if "with T.Kernel(" in line)
    end = next(k for k, line in enumerate(lines) if line.strip() == "return main")
    at = (start + 1 + end) // 2
    indent = lines[at][: len(lines[at]) - len(lines[at].lstrip())]
    return "\n".join(lines[:at] + [indent + error_line] + lines[at:])


# ---------------------------------------------------------------------------------------------------
# The LSP client.
# ---------------------------------------------------------------------------------------------------


class ServerFailure(Exception):
    """The server died, timed out, or answered with an error: the benchmark cannot go on (exit 2)."""


def read_message(stream) -> dict | None:
    """One Content-Length framed JSON-RPC message, or None at end of stream."""
    length = None
    while True:
        line = stream.readline()
        if not line:
            return None
        if line in (b"\r\n", b"\n"):
            break
        key, _, value = line.decode("ascii").partition(":")
        if key.strip().lower() == "content-length":
            length = int(value)
    if length is None:
        raise ServerFailure("message header without Content-Length")
    body = stream.read(length)
    return None if len(body) < length else json.loads(body)


class LspClient:
    """A stdio LSP connection. A reader thread parses the server's messages into a queue, stamped with
    the time they were read, so latency does not depend on when the main thread gets to them."""

    def __init__(self, argv: list[str], stderr) -> None:
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr)
        self.inbox: queue.Queue = queue.Queue()
        self.write_lock = threading.Lock()
        self.next_id = 1
        threading.Thread(target=self._read_loop, daemon=True).start()

    def send(self, message: dict) -> None:
        body = json.dumps(message, separators=(",", ":")).encode("utf-8")
        with self.write_lock:
            try:
                self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
                self.proc.stdin.flush()
            except (BrokenPipeError, OSError) as err:
                raise ServerFailure(f"cannot write to the server: {err}") from err

    def request(self, method: str, params) -> int:
        request_id, self.next_id = self.next_id, self.next_id + 1
        self.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        return request_id

    def notify(self, method: str, params) -> None:
        self.send({"jsonrpc": "2.0", "method": method, "params": params})

    def _read_loop(self) -> None:
        while True:
            try:
                message = read_message(self.proc.stdout)
            except (ValueError, ServerFailure) as err:  # bad framing or JSON: report it as a death
                message = {"_client_error": str(err)}
            if message is None or "_client_error" in message:
                self.inbox.put((time.perf_counter(), message))
                return
            if "method" in message and "id" in message:
                self._answer_server_request(message)
            self.inbox.put((time.perf_counter(), message))

    def _answer_server_request(self, message: dict) -> None:
        """Answer every server->client request at once with an empty result, so that a server awaiting
        registerCapability or workDoneProgress/create never blocks on us. The answer is written from a
        short-lived thread: the reader must keep draining stdout even while the main thread is in the
        middle of writing a large didChange."""
        result = None
        if message["method"] == "workspace/configuration":  # the spec's result is one value per item
            result = [None] * len(message.get("params", {}).get("items", []))
        reply = {"jsonrpc": "2.0", "id": message["id"], "result": result}
        threading.Thread(target=self._send_quietly, args=(reply,), daemon=True).start()

    def _send_quietly(self, message: dict) -> None:
        try:
            self.send(message)
        except ServerFailure:
            pass  # the main thread sees the death through the reader

    def next_message(self, deadline: float) -> tuple[float, dict]:
        try:
            stamp, message = self.inbox.get(timeout=max(0.0, deadline - time.perf_counter()))
        except queue.Empty:
            raise ServerFailure("timed out waiting for the server") from None
        if message is None:
            raise ServerFailure(f"the server closed its output (exit code {self.proc.poll()})")
        if "_client_error" in message:
            raise ServerFailure(f"unreadable message from the server: {message['_client_error']}")
        if "error" in message and "method" not in message:
            raise ServerFailure(f"error response to request {message.get('id')}: {message['error']}")
        return stamp, message

    def wait_response(self, request_id: int, timeout: float) -> dict:
        deadline = time.perf_counter() + timeout
        while True:
            _, message = self.next_message(deadline)
            if message.get("id") == request_id and "method" not in message:
                return message

    def wait_diagnostics(self, uri: str, version: int, timeout: float) -> tuple[float, list]:
        """Time stamp and diagnostics of the publishDiagnostics for exactly (uri, version); earlier
        versions, which the server may still publish after a newer edit arrived, are skipped."""
        deadline = time.perf_counter() + timeout
        seen = "none"  # the last version published for uri, to tell "late" from "never versioned"
        while True:
            try:
                stamp, message = self.next_message(deadline)
            except ServerFailure as err:
                raise ServerFailure(f"{err} (waiting for the diagnostics of version {version}; "
                                    f"last version published for the file: {seen})") from None
            params = message.get("params") or {}
            if message.get("method") != "textDocument/publishDiagnostics" or params.get("uri") != uri:
                continue
            seen = params.get("version")
            if seen == version:
                return stamp, params.get("diagnostics", [])


# ---------------------------------------------------------------------------------------------------
# The benchmark phases.
# ---------------------------------------------------------------------------------------------------

CLIENT_CAPABILITIES = {
    "textDocument": {
        "synchronization": {"dynamicRegistration": False, "didSave": False},
        "publishDiagnostics": {"relatedInformation": True, "versionSupport": True,
                               "codeDescriptionSupport": True, "dataSupport": True},
        "hover": {"dynamicRegistration": False, "contentFormat": ["markdown", "plaintext"]},
        "inlayHint": {"dynamicRegistration": False},
    },
    "workspace": {"configuration": True, "workspaceFolders": False},
    "window": {"workDoneProgress": True},
    "general": {"positionEncodings": ["utf-16"]},
}


@dataclass
class Run:
    """Everything one benchmark run measured, and the checks that failed."""

    kernels: int
    file_bytes: int
    latencies: dict[str, list[float]] = field(default_factory=dict)
    rss_kib: dict[str, int | None] = field(default_factory=dict)
    rss_samples_kib: list[int | None] = field(default_factory=list)
    rss_edits_per_s: float | None = None
    exit_code: int | None = None
    failures: list[str] = field(default_factory=list)


def has_error(diagnostics: list) -> bool:
    return any(d.get("severity") == ERROR for d in diagnostics)


def describe(diagnostics: list) -> str:
    shown = diagnostics[:3]  # enough to see what went wrong without flooding the report
    return "; ".join(f"{d.get('code')}@{d['range']['start']['line'] + 1}: {d.get('message')}" for d in shown)


def initialize(client: LspClient, timeout: float) -> dict:
    params = {"processId": os.getpid(), "clientInfo": {"name": "tilec-bench"},
              "rootUri": "file:///tmp/tilec-bench", "capabilities": CLIENT_CAPABILITIES}
    result = client.wait_response(client.request("initialize", params), timeout)["result"]
    client.notify("initialized", {})
    return result


def edit(client: LspClient, doc: KernelFile, timeout: float) -> tuple[float, list]:
    """Send the document's current text as the next version; return latency (ms) and diagnostics."""
    doc.version += 1
    text = doc.text()  # rendered before the clock starts: only the server's time is measured
    start = time.perf_counter()
    send_change(client, doc.version, text)
    stamp, diagnostics = client.wait_diagnostics(URI, doc.version, timeout)
    return (stamp - start) * 1000.0, diagnostics


def send_change(client: LspClient, version: int, text: str) -> None:
    client.notify("textDocument/didChange", {"textDocument": {"uri": URI, "version": version},
                                             "contentChanges": [{"text": text}]})


def phase_open(client: LspClient, doc: KernelFile, run: Run, timeout: float) -> None:
    text = doc.text()
    start = time.perf_counter()
    client.notify("textDocument/didOpen", {"textDocument": {"uri": URI, "languageId": "python",
                                                            "version": doc.version, "text": text}})
    stamp, diagnostics = client.wait_diagnostics(URI, doc.version, timeout)
    run.latencies["open"] = [(stamp - start) * 1000.0]
    run.rss_kib["start"] = read_rss_kib(client.proc.pid)  # the baseline: one file open and analysed
    if has_error(diagnostics):
        run.failures.append(f"open: error diagnostics on the valid file: {describe(diagnostics)}")


def phase_edits(client: LspClient, doc: KernelFile, run: Run, edits: int, timeout: float) -> None:
    run.latencies["edit"] = []
    for k in range(edits):
        doc.bump_threads(k % doc.count)
        ms, diagnostics = edit(client, doc, timeout)
        run.latencies["edit"].append(ms)
        if has_error(diagnostics):
            run.failures.append(f"edit {k} (v{doc.version}): error on a valid version: {describe(diagnostics)}")


def phase_syntax(client: LspClient, doc: KernelFile, run: Run, edits: int, timeout: float) -> None:
    errors, fixes = run.latencies.setdefault("syntax-error", []), run.latencies.setdefault("syntax-fix", [])
    for k in range(edits):
        breaking = k % 2 == 0
        doc.broken = (k // 2) % doc.count if breaking else None
        ms, diagnostics = edit(client, doc, timeout)
        (errors if breaking else fixes).append(ms)
        check_syntax_edit(run, k, doc, breaking, diagnostics)
    if doc.broken is not None:  # an odd count leaves an error behind: clear it, untimed
        doc.broken = None
        edit(client, doc, timeout)


def check_syntax_edit(run: Run, k: int, doc: KernelFile, breaking: bool, diagnostics: list) -> None:
    if breaking and not any(d.get("code") == "parse-error" for d in diagnostics):
        run.failures.append(f"syntax edit {k} (v{doc.version}): no parse-error diagnostic "
                            f"(got: {describe(diagnostics) or 'none'})")
    if not breaking and has_error(diagnostics):
        run.failures.append(f"syntax fix {k} (v{doc.version}): error diagnostics remain: {describe(diagnostics)}")


def read_rss_kib(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def phase_rss(client: LspClient, doc: KernelFile, run: Run, edits: int, timeout: float) -> None:
    """Many edits, pipelined: waiting every 100 edits bounds the server's backlog; the wait is for the
    newest version, so a server that skips superseded versions is not penalised."""
    pid = client.proc.pid
    samples = [run.rss_kib.get("start")]
    start = time.perf_counter()
    for k in range(edits):
        doc.bump_threads(k % doc.count)
        doc.version += 1
        send_change(client, doc.version, doc.text())
        if (k + 1) % 100 == 0 or k + 1 == edits:
            client.wait_diagnostics(URI, doc.version, timeout)
        if (k + 1) % 1000 == 0:
            samples.append(read_rss_kib(pid))
    elapsed = time.perf_counter() - start
    end = read_rss_kib(pid)
    known = [s for s in samples + [end] if s is not None]
    run.rss_kib |= {"end": end, "max": max(known) if known else None}
    run.rss_samples_kib = samples[1:]  # every 1000 edits: a steady climb is a leak, a plateau a cache
    run.rss_edits_per_s = edits / elapsed if edits and elapsed > 0 else None


def shutdown(client: LspClient, run: Run, timeout: float) -> None:
    client.wait_response(client.request("shutdown", None), timeout)
    client.notify("exit", None)
    client.proc.stdin.close()
    try:
        run.exit_code = client.proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        raise ServerFailure("the server did not exit after the exit notification") from None
    if run.exit_code != 0:
        run.failures.append(f"the server exited with code {run.exit_code} after shutdown + exit")


# ---------------------------------------------------------------------------------------------------
# Reporting.
# ---------------------------------------------------------------------------------------------------


def percentile(values: list[float], p: float) -> float:
    """Nearest-rank percentile: the smallest value with at least p % of the values at or below it."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p / 100.0 * len(ordered)) - 1)]


def summary(values: list[float]) -> dict:
    if not values:
        return {"n": 0}
    stats = {"p50_ms": percentile(values, 50), "p90_ms": percentile(values, 90),
             "p99_ms": percentile(values, 99), "max_ms": max(values)}
    return {"n": len(values)} | {key: round(value, 3) for key, value in stats.items()}


def run_json(run: Run) -> dict:
    phases = {name: summary(values) for name, values in run.latencies.items()}
    syntax = run.latencies.get("syntax-error", []) + run.latencies.get("syntax-fix", [])
    if syntax:
        phases["syntax-all"] = summary(syntax)
    return {"kernels": run.kernels, "file_bytes": run.file_bytes, "latency": phases,
            "rss_kib": run.rss_kib, "rss_samples_kib": run.rss_samples_kib, "rss_edits_per_s": run.rss_edits_per_s, "exit_code": run.exit_code,
            "failures": run.failures, "ok": not run.failures}


def print_table(report: dict) -> None:
    print(f"tilec lsp: {report['kernels']} kernels, {report['file_bytes']} bytes, full-text sync")
    print(f"{'phase':<14}{'n':>7}{'p50 ms':>10}{'p90 ms':>10}{'p99 ms':>10}{'max ms':>10}")
    for name, s in report["latency"].items():
        if s["n"]:
            cells = "".join(f"{s[key]:>10.2f}" for key in ("p50_ms", "p90_ms", "p99_ms", "max_ms"))
            print(f"{name:<14}{s['n']:>7}{cells}")
    rss = report["rss_kib"]
    if rss:
        mib = {k: "n/a" if v is None else f"{v / 1024:.1f} MiB" for k, v in rss.items()}
        rate = report["rss_edits_per_s"]
        print(f"RSS: start {mib['start']}, end {mib['end']}, max {mib['max']}"
              + (f"  ({rate:.0f} pipelined edits/s)" if rate else ""))
        samples = " ".join("n/a" if v is None else f"{v / 1024:.1f}" for v in report["rss_samples_kib"])
        if samples:
            print(f"RSS every 1000 edits (MiB): {samples}")
    print(f"server exit code: {report['exit_code']}")
    for failure in report["failures"][:20]:
        print(f"FAIL: {failure}")
    if len(report["failures"]) > 20:
        print(f"... and {len(report['failures']) - 20} more failures")


# ---------------------------------------------------------------------------------------------------
# Validation of the generator with `tilec check`, and the command line.
# ---------------------------------------------------------------------------------------------------


def validate(tilec: str, kernels: int, error_line: str) -> int:
    """`tilec check` every thread count on all kernels at once (must be clean) and a file with the
    syntax error (must give parse-error): the edits of the benchmark only ever produce such texts."""
    ok = True
    with tempfile.TemporaryDirectory(prefix="tilec-bench-") as tmp:
        for index, threads in enumerate(THREAD_CYCLE):
            doc = KernelFile(kernels)
            doc.threads_index = [index] * kernels
            ok &= check_file(tilec, Path(tmp) / f"threads_{threads}.py", doc.text(), expect_parse_error=False)
        doc = KernelFile(kernels, broken=kernels // 2, error_line=error_line)
        ok &= check_file(tilec, Path(tmp) / "broken.py", doc.text(), expect_parse_error=True)
    return 0 if ok else 1


def check_file(tilec: str, path: Path, text: str, expect_parse_error: bool) -> bool:
    path.write_text(text)
    out = subprocess.run([tilec, "check", "--format", "json", str(path)], capture_output=True, text=True)
    records = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    diagnostics = [r for r in records if r.get("kind") == "diagnostic"]
    errors = [d for d in diagnostics if d.get("severity") == "error"]
    instances = sum(r.get("kind") == "instance" for r in records)
    if expect_parse_error:
        ok = bool(errors) and all(d.get("code") == "parse-error" for d in errors)
    else:
        ok = not diagnostics and out.returncode == 0
    codes = ", ".join(f"{d.get('code')}@{d.get('line')}" for d in diagnostics) or "none"
    print(f"{'ok  ' if ok else 'FAIL'} {path.name}: {instances} instances, diagnostics: {codes}")
    return ok


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tilec", help="path of the tilec binary (runs `tilec lsp`)")
    parser.add_argument("--edits", type=int, default=200, help="timed edits, one at a time (default 200)")
    parser.add_argument("--kernels", type=int, default=20, help="kernels in the generated file (default 20)")
    parser.add_argument("--rss-edits", type=int, default=10000,
                        help="pipelined edits for the RSS phase (default 10000)")
    parser.add_argument("--syntax-edits", type=int, default=50, help="alternating break/fix edits (default 50)")
    parser.add_argument("--syntax-error", default=SYNTAX_ERROR_LINE,
                        help="the line the syntax phase inserts (default %(default)r)")
    parser.add_argument("--timeout", type=float, default=60.0,
                        help="seconds to wait for any one answer (default 60)")
    parser.add_argument("--server-log", default="/tmp/tilec-bench/lsp-stderr.log",
                        help="file for the server's stderr; '' discards it (default %(default)s)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    parser.add_argument("--write-file", metavar="PATH", help="write the generated file to PATH and exit")
    parser.add_argument("--validate", action="store_true",
                        help="run `tilec check` on the generated variants and exit")
    args = parser.parse_args(argv)
    if args.kernels < 1:
        parser.error("--kernels must be at least 1")
    if not args.write_file and not args.tilec:
        parser.error("--tilec is required (except with --write-file)")
    return args


def benchmark(args: argparse.Namespace) -> Run:
    doc = KernelFile(args.kernels, error_line=args.syntax_error)
    run = Run(kernels=args.kernels, file_bytes=len(doc.text().encode()))
    if args.server_log:
        Path(args.server_log).parent.mkdir(parents=True, exist_ok=True)
    with open(args.server_log or os.devnull, "wb") as stderr:
        client = LspClient([args.tilec, "lsp"], stderr)
        try:
            initialize(client, args.timeout)
            phase_open(client, doc, run, args.timeout)
            phase_edits(client, doc, run, args.edits, args.timeout)
            phase_syntax(client, doc, run, args.syntax_edits, args.timeout)
            phase_rss(client, doc, run, args.rss_edits, args.timeout)
            shutdown(client, run, args.timeout)
        finally:
            if client.proc.poll() is None:  # a failure left it running: it is ours, end it
                client.proc.kill()
                client.proc.wait()
    return run


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    if args.write_file:
        Path(args.write_file).write_text(KernelFile(args.kernels).text())
        return 0
    if args.validate:
        return validate(args.tilec, args.kernels, args.syntax_error)
    try:
        run = benchmark(args)
    except ServerFailure as err:
        print(f"tilec lsp failed: {err}" + (f" (server stderr: {args.server_log})" if args.server_log else ""),
              file=sys.stderr)
        return 2
    report = run_json(run)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print_table(report)
    return 1 if run.failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
