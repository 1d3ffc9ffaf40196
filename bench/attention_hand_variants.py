"""Writes the hand-edited attention kernels BENCHMARKS.md measured (2026-11-25), from the CUDA tilec
generates for the corpus attention instance 1 on sm_90, so that they can be measured again with
`tilec run --cuda-source` and serve as the specification of the lowering still to be written.

Usage (here, no GPU needed):
    tilec build CORPUS/flash_attention_fwd.py --instance 1 --target sm_90 --emit cuda --out PER_BLOCK
    (a build with FlashAttention-3's persistence allowed) ... --out PERSISTENT
    python3 bench/attention_hand_variants.py PER_BLOCK.cu PERSISTENT.cu OUT_DIR

Writes into OUT_DIR:
    rescale_after_qk.cu  per block; O rescaled after QK(k+1) is issued, before PV(k) (FlashAttention-3's order)
    reciprocal.cu        per block; x / d as x * RN(1/d): not the same numerics, timing only
    markstein.cu         per block; x / d from RN(1/d) and one fma correction
    q_prefetch.cu        persistent; the next tile's Q loaded into registers while the last PV runs
    q_prefetch_markstein.cu  persistent; both
A persistent file must be launched by a tilec whose program for the instance is persistent too
(`tilec run` takes the launch grid from the program).
"""
import os
import re
import sys

# The O rescale `acc_o[i, j] *= scores_scale[i]`, as tilec prints it.
RESCALE = re.compile(
    r"( *)// T\.Parallel\(128, 128\)\n *\{\n *#pragma unroll\n *for \(int (step_\d+) = 0; \2 < 64; \+\+\2\) \{\n"
    r" *acc_o\[[^\n]*__fmul_rn\(acc_o[^\n]*scores_scale[^\n]*\n *\}\n *\}\n")
# The normalization `acc_o[i, j] /= logsum[i]`.
DIVISION = re.compile(r"(acc_o\[[^\]]*\]) = \1 / (logsum\[[^\]]*\]);")
# The consumers' copy of Q into shared memory at the start of a tile.
Q_COPY = re.compile(
    r" *// T\.copy\n *\{\n *#pragma unroll\n *for \(int chunk = 0; chunk < 8; \+\+chunk\) \{\n"
    r" *\*\(uint4\*\)\(Q_vec \+ 0\) = \*\(const uint4\*\)\((Q \+ [^;]*)\);\n *#pragma unroll\n"
    r" *for \(int lane = 0; lane < 8; \+\+lane\) \{\n *Q_shared_vec\[lane\] = Q_vec\[lane\];\n *\}\n"
    r" *\*\(uint4\*\)\((Q_shared \+ [^;]*)\) = \*\(const uint4\*\)\(Q_shared_vec \+ 0\);\n *\}\n *\}\n")


def one(pattern, text):
    found = list(pattern.finditer(text))
    assert len(found) == 1, f"expected one match of {pattern.pattern[:40]}..., found {len(found)}"
    return found[0]


def rescale_after_qk(cuda):
    """The rescale by scale(k) moved between QK(k+1)'s issue and PV(k)'s, and before the last PV."""
    blocks = list(RESCALE.finditer(cuda))
    assert len(blocks) == 2, len(blocks)
    prologue, in_loop = blocks
    text = in_loop.group(0).strip() + "\ntl_fence_registers<64>(acc_o);\n"
    out = cuda[:prologue.start()] + cuda[prologue.end():in_loop.start()] + cuda[in_loop.end():]
    in_loop_wait = "tl_mbarrier_wait(late_full_barrier + k % 2, k / 2 % 2);"
    last_wait = re.search(r"tl_mbarrier_wait\(late_full_barrier \+ \d+, \d+\);", out.split(in_loop_wait)[1]).group(0)
    return out.replace(in_loop_wait, text + in_loop_wait).replace(last_wait, text + last_wait)


def reciprocal(cuda):
    m = one(DIVISION, cuda)
    return cuda.replace(m.group(0), f"{m.group(1)} = __fmul_rn({m.group(1)}, __frcp_rn({m.group(2)}));")


def markstein(cuda):
    m = one(DIVISION, cuda)
    x, d = m.group(1), m.group(2)
    return cuda.replace(m.group(0), (
        f"{{ const float tl_d = {d}; const float tl_r = __frcp_rn(tl_d); const float tl_x = {x}; "
        f"const float tl_q = __fmul_rn(tl_x, tl_r); {x} = fmaf(fmaf(-tl_d, tl_q, tl_x), tl_r, tl_q); }}"))


def q_prefetch(cuda):
    """Round r loads round r+1's Q rows into registers right after issuing its last PV; round r+1
    stores them (round 0 loads its own), after the end-of-tile barrier both warpgroups pass."""
    m = one(Q_COPY, cuda)
    source, target = m.group(1), m.group(2)
    top = (
        "                {\n"
        "                    if (tile_round == 0) {\n"
        "                        #pragma unroll\n"
        f"                        for (int chunk = 0; chunk < 8; ++chunk) q_next[chunk] = *(const uint4*)({source});\n"
        "                    }\n"
        "                    #pragma unroll\n"
        f"                    for (int chunk = 0; chunk < 8; ++chunk) *(uint4*)({target}) = q_next[chunk];\n"
        "                }\n")
    out = cuda.replace(m.group(0), top)
    out = out.replace("    __align__(16) tl_half Q_vec[8];\n", "    __align__(16) tl_half Q_vec[8];\n    uint4 q_next[8];\n", 1)
    last_wait = re.search(r"tl_mbarrier_wait\(late_full_barrier \+ \d+, \d+\);\n", out)
    issued = out.index("tl_wgmma_commit();", last_wait.end()) + len("tl_wgmma_commit();")
    tiles = re.search(r"tl_floordiv\(-first_tile \+ (\d+), tile_stride\)", out).group(1)
    grid_x = re.search(r"const int bx = \(tile_round \* tile_stride \+ first_tile\) % (\d+);", out).group(1)
    grid_y = re.search(r"const int by = \(tile_round \* tile_stride \+ first_tile\) / \d+ % (\d+);", out).group(1)
    next_source = source.replace("bx *", "nbx *").replace("by *", "nby *").replace("bz *", "nbz *")
    prefetch = (
        "\n{ const int next_tile = (tile_round + 1) * tile_stride + first_tile;\n"
        f"  if (next_tile <= {tiles}) {{ const int nbx = next_tile % {grid_x}; const int nby = next_tile / {grid_x} % {grid_y};\n"
        f"    const int nbz = next_tile / {int(grid_x) * int(grid_y)};\n"
        "    #pragma unroll\n"
        f"    for (int chunk = 0; chunk < 8; ++chunk) q_next[chunk] = *(const uint4*)({next_source}); }} }}\n")
    return out[:issued] + prefetch + out[issued:]


def main():
    per_block, persistent, out = sys.argv[1], sys.argv[2], sys.argv[3]
    os.makedirs(out, exist_ok=True)
    block_cuda, persistent_cuda = open(per_block).read(), open(persistent).read()
    assert "persistent:" in persistent_cuda.splitlines()[1], "the second file is not persistent"
    variants = {
        "rescale_after_qk.cu": rescale_after_qk(block_cuda),
        "reciprocal.cu": reciprocal(block_cuda),
        "markstein.cu": markstein(block_cuda),
        "q_prefetch.cu": q_prefetch(persistent_cuda),
        "q_prefetch_markstein.cu": markstein(q_prefetch(persistent_cuda)),
    }
    for name, text in variants.items():
        with open(os.path.join(out, name), "w") as f:
            f.write(text)
        print(os.path.join(out, name))


if __name__ == "__main__":
    main()
