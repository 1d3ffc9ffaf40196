"""Compiles a CUDA file as tilec's runtime does (NVRTC, sm_90a or another architecture) and prints
its SASS, or a count of its instructions by opcode, without a GPU.

NVRTC and nvdisasm come from PyPI wheels, so a machine without the CUDA toolkit can read what ptxas
made of a kernel (register counts come from `tilec build --emit ptx` with the same library):

    python3 -m pip download --no-deps --only-binary=:all: -d /tmp/cuda nvidia-cuda-nvrtc nvidia-cuda-nvdisasm
    (cd /tmp/cuda && for w in *.whl; do python3 -m zipfile -e "$w" .; done)
    chmod +x $(find /tmp/cuda -name nvdisasm)
    export LD_LIBRARY_PATH=$(dirname $(find /tmp/cuda -name 'libnvrtc.so.*' | head -1))
    ln -sf "$LD_LIBRARY_PATH"/libnvrtc.so.* "$LD_LIBRARY_PATH/libnvrtc.so"   # the name tilec's runtime opens
    python3 bench/local_sass.py KERNEL.cu [--arch sm_90a] [--counts] [--nvdisasm PATH]

Set CUDA_CACHE_DISABLE=1 as well when ptxas's report matters: NVRTC leaves it out on a compute-cache hit.
"""
import argparse
import collections
import ctypes
import glob
import os
import re
import subprocess
import sys
import tempfile


def find_nvdisasm(given):
    if given:
        return given
    for folder in os.environ.get("PATH", "").split(os.pathsep) + ["/tmp/cuda"]:
        found = glob.glob(os.path.join(folder, "**", "nvdisasm"), recursive=True)
        if found:
            return found[0]
    sys.exit("nvdisasm not found: pass --nvdisasm or unpack the nvidia-cuda-nvdisasm wheel in /tmp/cuda")


def cubin(source, arch):
    """The cubin NVRTC makes of `source`, with the options tilec's runtime passes."""
    nvrtc = ctypes.CDLL("libnvrtc.so")
    program = ctypes.c_void_p()
    if nvrtc.nvrtcCreateProgram(ctypes.byref(program), source, b"kernel.cu", 0, None, None) != 0:
        sys.exit("NVRTC could not create the program")
    options = [f"--gpu-architecture={arch}".encode(), b"-std=c++17", b"-lineinfo", b"--ptxas-options=-v"]
    compiled = nvrtc.nvrtcCompileProgram(program, len(options), (ctypes.c_char_p * len(options))(*options))
    size = ctypes.c_size_t()
    nvrtc.nvrtcGetProgramLogSize(program, ctypes.byref(size))
    log = ctypes.create_string_buffer(size.value)
    nvrtc.nvrtcGetProgramLog(program, log)
    sys.stderr.write(log.value.decode(errors="replace"))
    if compiled != 0:
        sys.exit("NVRTC could not compile the source")
    nvrtc.nvrtcGetCUBINSize(program, ctypes.byref(size))
    image = ctypes.create_string_buffer(size.value)
    nvrtc.nvrtcGetCUBIN(program, image)
    return image.raw


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("cuda")
    parser.add_argument("--arch", default="sm_90a")
    parser.add_argument("--counts", action="store_true", help="instructions by opcode instead of the listing")
    parser.add_argument("--nvdisasm", default=None)
    args = parser.parse_args()
    with open(args.cuda, "rb") as f:
        image = cubin(f.read(), args.arch)
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(image)
        f.flush()
        sass = subprocess.run([find_nvdisasm(args.nvdisasm), "-c", f.name], capture_output=True, text=True,
                              check=True).stdout
    if not args.counts:
        print(sass)
        return
    opcodes = collections.Counter()
    for line in sass.splitlines():
        match = re.match(r"\s*/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*)", line)
        if match:
            opcodes[match.group(1)] += 1
    print(f"{sum(opcodes.values())} instructions")
    for opcode, count in opcodes.most_common():
        print(f"{count:6} {opcode}")


if __name__ == "__main__":
    main()
