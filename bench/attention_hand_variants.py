"""Writes the hand-edited attention kernels BENCHMARKS.md measured, from the CUDA tilec generates for
the corpus attention instance 1 on sm_90, so that they can be measured again with
`tilec run --cuda-source` (bench/gpu_attention_shapes.py's `LABEL=tilec%FILE.cu`).

Usage (here, no GPU needed):
    tilec build CORPUS/flash_attention_fwd.py --instance 1 --target sm_90 --emit cuda --out BUILD
    python3 bench/attention_hand_variants.py BUILD/flash_attention_fwd/flashattn-1.cu OUT_DIR

The input is the persistent kernel (the default on sm_90 since the eighth session). Writes into
OUT_DIR, each launched by a tilec whose program for the instance is persistent too:
    unchecked_division.cu  tl_div without the NaN and sign handling: three float operations
    ieee_division.cu       tl_div as IEEE `/`
    no_output_store.cu     knockout: the output's global stores removed (wrong output, timing only)
    bulk_store.cu          the output by cp.async.bulk, one 256-byte row per thread, waited for at once
    bulk_store_deferred.cu the same, its wait moved to the next tile's epilogue
    direct_store.cu        the output stored from registers, without the O_shared round trip
    q_before_stores.cu     the next tile's Q stored and fenced before this tile's output stores
The sessions before measured per-block variants (rescale order, reciprocal division, Q prefetch by
hand) from earlier versions of this script; the compiler now does the Q prefetch itself.
"""
import os
import re
import sys

TL_DIV = re.compile(r"__device__ __forceinline__ float tl_div\(float a, float b\) \{\n.*?\n\}\n", re.S)
# The copy of the output tile from O_shared to global memory, at the end of every tile.
OUTPUT_COPY = re.compile(
    r"( *)// T\.copy\n *\{\n *#pragma unroll\n *for \(int chunk_2 = 0; chunk_2 < 8; \+\+chunk_2\) \{\n.*?\n\1\}\n", re.S)
# The store of the normalized accumulator into O_shared.
O_SHARED_STORE = "O_shared + tx / 32 * 2048 + tx % 4 * 2 + tx / 4 % 8 * 128 + chunk_1 / 2 * 8 + chunk_1 % 2 * 1024"
# The start-of-tile copy of the prefetched Q rows into shared memory.
Q_COPY = re.compile(
    r"( *)// T\.copy\n *\{\n *#pragma unroll\n *for \(int chunk = 0; chunk < 8; \+\+chunk\) \{\n"
    r" *\*\(uint4\*\)\(Q_vec \+ 0\) = \*\(const uint4\*\)\(Q_next \+ chunk \* 8\);.*?\n\1\}\n", re.S)
FENCE_BARRIER = "tl_fence_proxy_async();\n{ind}tl_named_barrier(1, 256);\n"


def one(pattern, text):
    found = list(pattern.finditer(text))
    assert len(found) == 1, f"expected one match of {pattern.pattern[:40]}..., found {len(found)}"
    return found[0]


def with_division(cuda, body):
    return TL_DIV.sub(lambda _: "__device__ __forceinline__ float tl_div(float a, float b) {\n" + body + "}\n", cuda)


def output_parts(cuda):
    """The output copy, its indentation, its shared source index and its global target index."""
    m = one(OUTPUT_COPY, cuda)
    block = m.group(0)
    lds = re.search(r"\*\(const uint4\*\)\((O_shared \+ [^;]*)\);", block).group(1)
    stg = re.search(r"\*\(uint4\*\)\((Output \+ [^;]*)\) = ", block).group(1)
    return block, m.group(1), lds, stg


def tile_base(stg):
    return re.search(r"Output \+ (bx \* \d+ \+ by \* \d+ \+ bz \* \d+)", stg).group(1)


def no_output_store(cuda):
    block, _, _, stg = output_parts(cuda)
    return cuda.replace(re.search(r"\n *\*\(uint4\*\)\(Output \+ [^\n]*\n", block).group(0), "\n", 1)


def bulk_store(cuda, deferred=False):
    block, ind, _, stg = output_parts(cuda)
    wait_now = "" if deferred else f'{ind}    asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");\n'
    new = (f"{ind}if (tx < 128) {{\n"
           f'{ind}    asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], 256;" :: '
           f'"l"(Output + {tile_base(stg)} + tx * 2048), "r"(tl_shared_address(O_shared + tx * 128)) : "memory");\n'
           f'{ind}    asm volatile("cp.async.bulk.commit_group;" ::: "memory");\n'
           f"{wait_now}{ind}}}\n")
    out = cuda.replace(block, new, 1)
    if deferred:
        at = out.rindex("// T.copy", 0, out.index("for (int chunk_1 = 0; chunk_1 < 32; ++chunk_1)"))
        line = out.rindex("\n", 0, at) + 1
        pad = out[line:at]
        out = (out[:line] + f'{pad}if (tx < 128) asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");\n'
               f"{pad}tl_named_barrier(1, 256);\n" + out[line:])
        end = out.index("    } else {\n        tl_setmaxnreg_dec<")
        out = out[:end] + '        if (tx < 128) asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");\n' + out[end:]
    return out


def direct_store(cuda):
    block, ind, _, stg = output_parts(cuda)
    assert cuda.count(O_SHARED_STORE) == 1
    rows = f"Output + {tile_base(stg)} + (tx / 32 * 16 + tx / 4 % 8 + chunk_1 % 2 * 8) * 2048 + tx % 4 * 2 + chunk_1 / 2 * 8"
    out = cuda.replace(O_SHARED_STORE, rows)
    return out.replace(ind + FENCE_BARRIER.format(ind=ind) + block, "", 1)


def q_before_stores(cuda):
    q = one(Q_COPY, cuda)
    qstore = re.search(r"\*\(uint4\*\)\((Q_shared \+ [^;]*)\) = ", q.group(0)).group(1)
    out = cuda.replace(q.group(0), f"{q.group(1)}if (tile_round == 0)\n" + q.group(0), 1)
    pre = "tl_fence_proxy_async();\n                tl_named_barrier(1, 256);\n                // T.Pipelined (consumer"
    assert out.count(pre) == 1
    out = out.replace(pre, "if (tile_round == 0) tl_fence_proxy_async();\n                tl_named_barrier(1, 256);\n"
                           "                // T.Pipelined (consumer")
    block, ind, lds, stg = output_parts(out)
    tiles = re.search(r"if \(next_tile < (\d+)\)", out).group(1)
    tail = ind + FENCE_BARRIER.format(ind=ind)
    new = (f"{ind}{{\n{ind}    uint4 o_out[8];\n{ind}    #pragma unroll\n"
           f"{ind}    for (int chunk_2 = 0; chunk_2 < 8; ++chunk_2) o_out[chunk_2] = *(const uint4*)({lds});\n"
           f"{ind}    if ((tile_round + 1) * tile_stride + first_tile < {tiles}) {{\n{ind}        #pragma unroll\n"
           f"{ind}        for (int chunk = 0; chunk < 8; ++chunk) *(uint4*)({qstore}) = *(const uint4*)(Q_next + chunk * 8);\n"
           f"{ind}    }}\n{ind}    tl_fence_proxy_async();\n{ind}    tl_named_barrier(1, 256);\n{ind}    #pragma unroll\n"
           f"{ind}    for (int chunk_2 = 0; chunk_2 < 8; ++chunk_2) *(uint4*)({stg}) = o_out[chunk_2];\n{ind}}}\n")
    assert out.count(block + tail) == 1
    return out.replace(block + tail, new, 1)


def main():
    persistent, out = sys.argv[1], sys.argv[2]
    cuda = open(persistent).read()
    assert "persistent:" in cuda.splitlines()[1], "the kernel is not persistent"
    os.makedirs(out, exist_ok=True)
    variants = {
        "unchecked_division.cu": with_division(
            cuda, "    const float r = __frcp_rn(b);\n    const float q = __fmul_rn(a, r);\n"
                  "    return fmaf(-fmaf(b, q, -a), r, q);\n"),
        "ieee_division.cu": with_division(cuda, "    return a / b;\n"),
        "no_output_store.cu": no_output_store(cuda),
        "bulk_store.cu": bulk_store(cuda),
        "bulk_store_deferred.cu": bulk_store(cuda, deferred=True),
        "direct_store.cu": direct_store(cuda),
        "q_before_stores.cu": q_before_stores(cuda),
    }
    for name, text in variants.items():
        assert text != cuda, name
        with open(os.path.join(out, name), "w") as f:
            f.write(text)
        print(os.path.join(out, name))


if __name__ == "__main__":
    main()
