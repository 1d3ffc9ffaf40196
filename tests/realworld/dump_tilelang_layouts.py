#!/usr/bin/env python3
"""Dump the fragment layouts TileLang 0.1.15 infers for every kernel instance tilec finds in TileLang's
own examples, for target sm_90, into `tests/realworld/tilelang-layouts-sm90.txt`.

That file is the reference of `tests/tests/it/realworld_layouts.rs`, which compares tilec's layouts
with TileLang's point by point. The test never runs TileLang: this script is run by hand, once, and
its output is committed (like `shared/corpus/tilelang-layouts-sm90.txt` for the corpus).

Regenerate (no GPU needed; 15 to 20 minutes on two busy cores):

    python3 -m venv /tmp/tl && /tmp/tl/bin/pip install -q tilelang==0.1.15
    /tmp/tl/bin/pip install -q einops packaging pytest scipy   # what examples import at the top
    cargo build -p tilec
    nice /tmp/tl/bin/python tests/realworld/dump_tilelang_layouts.py

Options: `--tilec PATH` (default `target/debug/tilec`), `--examples DIR` (default
`../shared/realworld/tilelang-examples`), `--out FILE`, `--timeout SECONDS` (per instance),
and file paths relative to the examples folder to dump only those (printed, not written).

How an instance is reproduced, so that TileLang sees exactly tilec's parameter values:

1. `tilec check --format json --target sm_90` over the examples gives every instance: its kernel
   (the factory or jit function), its arguments, the values it assumes where no call gives one, and
   the parameters it keeps symbolic. Only the files of `tests/realworld/EXPECTED.toml` that it does
   not mark `out_of_scope` are dumped (the real-world set of `tests/tests/it/realworld.rs`).
2. Each file is imported in a forked child (its sibling folder on `sys.path`, under a module name
   other than `__main__`, so its `main()` does not run), with TileLang's compile entry points
   replaced by ones that capture the PrimFunc and stop: nothing is ever compiled with nvcc.
   Statements that fail at the top level (a script's CUDA tensors, an import of a package only a
   reference implementation uses) are passed over one by one.
3. The kernel is looked up by name at module level and built with tilec's values as keywords:
   a `@tilelang.jit` function (also under `@autotune`) through `get_tir`, a plain factory by calling
   it (a PrimFunc it returns, or one it hands to a compile entry point, is captured). A symbolic
   parameter becomes `T.dynamic(name)`; a dtype name becomes that TileLang dtype.
4. The PrimFunc is lowered with `tilelang.lower` for `cuda -arch=sm_90` (host llvm), under the jit's
   own pass configs plus TileLang's layout visualization (text), which prints every fragment's
   inferred layout right after layout inference. Those blocks are what the file records.

Each record is `=== <file> :: <kernel> instance <n> () {<arguments as JSON>}` followed by the
fragment layouts, `(no fragment layouts printed)`, `FAILED: <TileLang's error>` when lowering fails,
or `SKIPPED: <why>` when this script cannot build the instance in Python at all (an import that
fails here, a kernel that is not a module-level name, values tilec assumes for names the function
does not take). Only the layout blocks and FAILED come from TileLang; SKIPPED says nothing about it.
Some FAILED records are TileLang refusing a size tilec keeps symbolic (a `T.dynamic` that no buffer
shape binds, or that a shape divides by): they say nothing of the kernel at its real sizes either.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import re
import select
import signal
import subprocess
import sys
import time
import tomllib
import types
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DEFAULT_EXAMPLES = REPO.parent / "shared" / "realworld" / "tilelang-examples"
DEFAULT_OUT = REPO / "tests" / "realworld" / "tilelang-layouts-sm90.txt"
EXPECTED = REPO / "tests" / "realworld" / "EXPECTED.toml"

# tilec's dtype names that TileLang spells differently.
DTYPE_RENAMES = {"float8_e4m3": "float8_e4m3fn"}
DTYPE_NAMES = {
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float8_e4m3", "float8_e5m2", "float16", "bfloat16", "float32", "float64",
}  # fmt: skip

# How a symbolic parameter is written in a record's header (tilec has no value for it).
SYMBOLIC = "<symbolic>"

HEADER = """\
# Fragment layouts inferred by TileLang 0.1.15 for the kernel instances tilec finds in TileLang's own
# examples (shared/realworld/tilelang-examples), target sm_90 (its LayoutVisual output), built with the
# parameter values tilec uses ("<symbolic>": a parameter tilec keeps symbolic, given to TileLang as
# T.dynamic). Variables: _i, _j = the buffer's logical indices; _rep = the replica.
# FAILED: TileLang's lowering fails (for some, only because a size is symbolic). SKIPPED: the dump
# could not build the instance in Python.
# Written by tests/realworld/dump_tilelang_layouts.py (its docstring says how to regenerate); read by
# tests/tests/it/realworld_layouts.rs.
"""


class Captured(Exception):
    """Raised by the replaced compile entry points: the PrimFunc and the pass configs it had."""

    def __init__(self, func, pass_configs):
        super().__init__("captured")
        self.func = func
        self.pass_configs = dict(pass_configs or {})


class Timeout(Exception):
    """A child that did not answer in time."""


class Failure(Exception):
    """A child that raised: its error, as one line."""


def one_line(text: str, limit: int = 240) -> str:
    """The most telling line of an error message, whitespace collapsed, at most `limit` chars."""
    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    # TVM errors end with the check that failed; Python ones start with it.
    telling = [line for line in lines if "Error" in line or "Check failed" in line]
    line = telling[-1] if telling else (lines[0] if lines else "")
    return re.sub(r"\s+", " ", line)[:limit]


def tilec_instances(tilec: Path, examples: Path) -> list[dict]:
    """Every instance `tilec check` finds under `examples`, with paths relative to it."""
    result = subprocess.run(
        [str(tilec), "check", "--format", "json", "--target", "sm_90", str(examples)],
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode not in (0, 1):
        sys.exit(f"tilec check failed ({result.returncode}): {result.stderr}")
    out = []
    for line in result.stdout.splitlines():
        record = json.loads(line)
        if record.get("kind") == "instance":
            record["file"] = str(Path(record["file"]).resolve().relative_to(examples.resolve()))
            out.append(record)
    return out


def in_scope() -> set[str]:
    """The files of the real-world set (those `tests/realworld/EXPECTED.toml` lists: every file that
    launches a kernel) that are in scope for sm_90."""
    table = tomllib.loads(EXPECTED.read_text())
    return {
        name
        for name, entry in table.items()
        if name != "summary" and isinstance(entry, dict) and "out_of_scope" not in entry
    }


def effective_arguments(record: dict) -> dict:
    """tilec's values for the instance: its arguments, run-time ones replaced by the assumed value
    or `<symbolic>`."""
    args = {}
    for name, value in record["args"].items():
        if value == "<run time>" and name in record["assumed"]:
            value = record["assumed"][name]["value"]
        elif value == "<run time>" and name in record["symbolic"]:
            value = SYMBOLIC
        args[name] = value
    # Values assumed for parameters that are not arguments of the call (an autotuned config).
    for name, assumed in record["assumed"].items():
        args.setdefault(name, assumed["value"])
    # And symbolic sizes no call names (an eager kernel's `T.const` that no tensor fixes).
    for name in record["symbolic"]:
        args.setdefault(name, SYMBOLIC)
    return args


def python_value(name: str, value):
    """The Python value TileLang gets for a tilec value."""
    import tilelang.language as T

    if value == SYMBOLIC:
        return T.dynamic(name)
    if isinstance(value, str) and value in DTYPE_NAMES:
        return T.dtype(DTYPE_RENAMES.get(value, value))
    if isinstance(value, list):
        # JSON has no tuples; TileLang's jit takes tuples (hashable) where a call passes a sequence.
        return tuple(python_value(name, item) for item in value)
    return value


def install_target_facts():
    """Makes the device queries an example may ask while it builds a kernel answer as tilec's do for
    sm_90 (`TargetFacts` in crates/frontend/src/modules.rs: an H100 SXM), since there is no GPU
    here and a forked child must not initialise CUDA."""
    import torch
    from tilelang.carver.arch import driver

    properties = types.SimpleNamespace(
        multi_processor_count=132, name="NVIDIA H100 80GB HBM3", major=9, minor=0
    )
    torch.cuda.get_device_capability = lambda *args, **kwargs: (9, 0)
    torch.cuda.get_device_name = lambda *args, **kwargs: properties.name
    torch.cuda.get_device_properties = lambda *args, **kwargs: properties
    torch.cuda.device_count = lambda: 1
    torch.cuda.current_device = lambda: 0
    driver.get_num_sms = lambda *args, **kwargs: 132
    driver.get_max_dynamic_shared_size_bytes = lambda *args, **kwargs: 227 * 1024


def install_capture():
    """Replaces TileLang's compile entry points by ones that raise `Captured`."""
    import tilelang

    # `tilelang.jit` is also the name of the decorator, which shadows the module as an attribute.
    jit = sys.modules["tilelang.jit"]

    def capture_compile(func, *args, **kwargs):
        raise Captured(func, kwargs.get("pass_configs"))

    def capture_jit_compile(self, *args, **kwargs):
        raise Captured(self.get_tir(*args, **kwargs), self.pass_configs)

    def capture_jit_call(self, *args, **kwargs):
        kwargs.pop("__tune_params", None)
        raise Captured(self.get_tir(*args, **kwargs), self.pass_configs)

    tilelang.compile = capture_compile
    jit.compile = capture_compile
    jit.JITImpl.compile = capture_jit_compile
    jit.JITImpl.__call__ = capture_jit_call


def import_example(path: Path):
    """Imports the example as a module, one top-level statement at a time: a statement that fails
    (a script's `torch.randn(..., device="cuda")`, or a compile at the top level, which the capture
    stops) is passed over, so that the definitions around it still exist, as they do for tilec,
    which reads the file without running it. So is a failing `import`: examples import packages
    only their reference implementations use (`fla`); a kernel that needs a missing name fails to
    build with a NameError, which its record says."""
    import ast
    import __future__

    sys.path.insert(0, str(path.parent))
    source = path.read_text()
    tree = ast.parse(source, filename=str(path))
    flags = 0
    for statement in tree.body:
        if isinstance(statement, ast.ImportFrom) and statement.module == "__future__":
            for alias in statement.names:
                flags |= getattr(__future__, alias.name).compiler_flag
    module = types.ModuleType("tilelang_example_under_test")
    module.__file__ = str(path)
    sys.modules[module.__name__] = module
    for statement in tree.body:
        code = compile(ast.Module([statement], []), str(path), "exec", flags=flags, dont_inherit=True)
        with contextlib.suppress(Exception):
            exec(code, module.__dict__)
    return module


def build(module, kernel: str, kwargs: dict):
    """The PrimFunc of the instance and its pass configs, or raises `LookupError` with the reason
    this instance cannot be built here."""
    from tilelang.autotuner.tuner import AutoTuneImpl
    from tilelang.jit import JITImpl
    from tvm.tirx import PrimFunc

    obj = getattr(module, kernel, None)
    if obj is None:
        raise LookupError(f"`{kernel}` is not a module-level name of the file")
    if isinstance(obj, AutoTuneImpl):
        obj = obj.jit_impl
    if isinstance(obj, JITImpl):
        return obj.get_tir(**kwargs), dict(obj.pass_configs or {})
    if isinstance(obj, PrimFunc):
        if kwargs:
            raise LookupError(f"`{kernel}` is a PrimFunc, but tilec gives it arguments")
        return obj, {}
    if not callable(obj):
        raise LookupError(f"`{kernel}` is not callable")
    import inspect

    try:
        signature = inspect.signature(obj)
        takes_any = any(p.kind == p.VAR_KEYWORD for p in signature.parameters.values())
        unknown = [name for name in kwargs if name not in signature.parameters]
        if unknown and not takes_any:
            raise LookupError(f"tilec's values for {', '.join(unknown)} are not parameters of `{kernel}`")
    except (TypeError, ValueError):
        pass
    try:
        result = obj(**kwargs)
    except Captured as captured:
        return captured.func, captured.pass_configs
    if isinstance(result, PrimFunc):
        return result, {}
    raise LookupError(f"`{kernel}(...)` returns a {type(result).__name__}, not a PrimFunc")


LAYOUT_BLOCK = re.compile(
    r"^(?P<name>\S+) inferred layout:\n"
    r"  Shape: (?P<shape>.*)\n"
    r"  Thread: (?P<thread>.*)\n"
    r"  Index:  (?P<index>.*)\n"
    r"  Replicate:  (?P<replicate>\d+)(?P<partials> \(partials\))?$",
    re.MULTILINE,
)


def lower_layouts(func, pass_configs: dict) -> list[str]:
    """Lowers `func` for sm_90 and returns the printed layout blocks, each as its lines."""
    import tilelang
    from tvm.target import Target

    config = dict(pass_configs)
    config["tl.layout_visualization_enable"] = True
    config["tl.layout_visualization_formats"] = "txt"
    target = Target({"kind": "cuda", "arch": "sm_90"}, host="llvm")
    printed = io.StringIO()
    with tilelang.transform.PassContext(opt_level=3, config=config), target:
        with contextlib.redirect_stdout(printed):
            tilelang.lower(func, target=target)
    blocks = []
    for match in LAYOUT_BLOCK.finditer(printed.getvalue()):
        block = [
            f"{match['name']} inferred layout:",
            f"  Shape: {match['shape']}",
            f"  Thread: {match['thread']}",
            f"  Index:  {match['index']}",
            f"  Replicate:  {match['replicate']}",
        ]
        if match["partials"]:
            # A reducer's partial sums, not copies: said in a comment the test reads past.
            block.insert(0, f"# {match['name']}: reducer partials (replicas are addends)")
        if block not in blocks:
            blocks.append(block)
    return [line for block in blocks for line in block]


def run_forked(work, timeout: float):
    """Runs `work()` in a forked child and returns what it returned (a JSON value). The child is
    killed after `timeout` seconds (lowering can spin inside the C++ compiler, where no Python
    signal reaches it) and `Timeout` raised; an exception of the child comes back as `Failure`."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        try:
            answer = {"value": work()}
        except BaseException as error:  # noqa: BLE001 - everything is reported as a line
            answer = {"error": f"{type(error).__name__}: {one_line(error)}"}
        with os.fdopen(write_end, "w") as pipe:
            json.dump(answer, pipe)
        os._exit(0)
    os.close(write_end)
    chunks = []
    deadline = time.monotonic() + timeout
    with os.fdopen(read_end) as pipe:
        while True:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([pipe], [], [], max(left, 0))
            if not ready:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                raise Timeout(f"killed after {timeout:.0f} s")
            chunk = os.read(pipe.fileno(), 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
    _, status = os.waitpid(pid, 0)
    if not chunks:
        raise Failure(f"the child ended without an answer (status {status})")
    answer = json.loads(b"".join(chunks))
    if "error" in answer:
        raise Failure(answer["error"])
    return answer["value"]


def instance_lines(module, record: dict) -> list[str]:
    """The body of one instance's record."""
    kwargs = {name: python_value(name, value) for name, value in effective_arguments(record).items()}
    try:
        func, pass_configs = build(module, record["kernel"], kwargs)
    except LookupError as why:
        return [f"SKIPPED: {one_line(why)}"]
    except Captured:
        return ["SKIPPED: the kernel compiles while it is being built"]
    except Exception as error:  # noqa: BLE001 - the example's own Python failed here
        return [f"SKIPPED: building it in Python raised {type(error).__name__}: {one_line(error)}"]
    try:
        layouts = lower_layouts(func, pass_configs)
    except Exception as error:  # noqa: BLE001 - TileLang's error is the record
        return [f"FAILED: {type(error).__name__}: {one_line(error)}"]
    return layouts or ["(no fragment layouts printed)"]


def file_records(examples: Path, relative: str, records: list[dict], timeout: float) -> list[str]:
    """The records of one file: imported once in a child, each instance lowered in a grandchild
    (so that one instance's crash or hang costs only its own record)."""

    def work():
        install_target_facts()
        install_capture()
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                module = import_example(examples / relative)
        except BaseException as error:  # noqa: BLE001 - reported for every instance
            why = f"SKIPPED: importing the file raised {type(error).__name__}: {one_line(error)}"
            return [[why] for _ in records]
        bodies = []
        for record in records:
            try:
                bodies.append(run_forked(lambda r=record: instance_lines(module, r), timeout))
            except Timeout as why:
                bodies.append([f"FAILED: TileLang's lowering did not finish ({why})"])
            except Failure as why:
                bodies.append([f"FAILED: {why}"])
        return bodies

    try:
        bodies = run_forked(work, timeout * (len(records) + 1))
    except (Timeout, Failure) as why:
        bodies = [[f"SKIPPED: the file's child failed ({why})"] for _ in records]
    out = []
    for record, body in zip(records, bodies):
        arguments = json.dumps(effective_arguments(record))
        out.append(f"=== {relative} :: {record['kernel']} instance {record['instance']} () {arguments}")
        out.extend(body)
        out.append("")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tilec", type=Path, default=REPO / "target" / "debug" / "tilec")
    parser.add_argument("--examples", type=Path, default=DEFAULT_EXAMPLES)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("files", nargs="*", help="only these files (printed, not written)")
    options = parser.parse_args()

    import tilelang  # noqa: F401 - imported once here, before the children fork

    scope = in_scope()
    by_file: dict[str, list[dict]] = {}
    for record in tilec_instances(options.tilec, options.examples):
        if record["file"] in scope:
            by_file.setdefault(record["file"], []).append(record)
    chosen = options.files or sorted(by_file)
    lines = [HEADER]
    for relative in chosen:
        print(f"{relative}: {len(by_file.get(relative, []))} instances", file=sys.stderr, flush=True)
        lines.extend(file_records(options.examples, relative, by_file.get(relative, []), options.timeout))
    text = "\n".join(lines)
    if options.files:
        print(text)
    else:
        options.out.write_text(text)


if __name__ == "__main__":
    main()
