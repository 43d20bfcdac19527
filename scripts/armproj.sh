#!/usr/bin/env bash
# The arm64 kernel projection of issue 16 on this tree: runs the shared
# llvm-mca script (../shared/peer/armproj.sh: llvm/clang 19, geist
# cross-built, llama.cpp's ARM kernels from the node-llama-cpp npm package,
# each kernel's inner loop cut out and run through llvm-mca as a Cortex-A72
# and a Cortex-A76) with the loop shapes of geist's current kernels, which
# the shared script cannot know: how many weights one iteration of each
# extracted loop covers and which loop of the function is the decode loop.
#
#   scripts/armproj.sh                 # from the project root; ~1-2 minutes
#   ARMPROJ=/path/to/armproj.sh WORK=/tmp/x scripts/armproj.sh
#
# Results: $WORK/results.md (WORK defaults to /tmp/armproj). Every number is
# a throughput bound from llvm-mca's models: no cache misses, no memory
# latency, no call overhead.
set -euo pipefail
cd "$(dirname "$0")/.."
src=${ARMPROJ:-../shared/peer/armproj.sh}
[ -f "$src" ] || { echo "armproj: $src not found (set ARMPROJ)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

python3 - "$src" "$tmp/armproj.sh" <<'PY'
import sys

s = open(sys.argv[1]).read()
# (old, new): each old text must be there exactly once, so that a change of
# the shared script is noticed instead of silently mis-measured.
subs = [
    # row-group kernels: two blocks of eight rows per loop iteration
    ("'rowsQ4_0Q8_0DP (8 rows x 1 block; decode path)', 'geist_rowsQ4_0Q8_0DP', 256)",
     "'rowsQ4_0Q8_0DP (8 rows x 2 blocks; decode path)', 'geist_rowsQ4_0Q8_0DP', 512)"),
    ("'rowsQ8_0Q8_0DP (8 rows x 1 block; decode path)', 'geist_rowsQ8_0Q8_0DP', 256)",
     "'rowsQ8_0Q8_0DP (8 rows x 2 blocks; decode path)', 'geist_rowsQ8_0Q8_0DP', 512)"),
    ("'rowsQ4_0Q8_0NE (8 rows x 1 block; decode path)', 'geist_rowsQ4_0Q8_0NE', 256)",
     "'rowsQ4_0Q8_0NE (8 rows x 2 blocks; decode path)', 'geist_rowsQ4_0Q8_0NE', 512)"),
    ("'rowsQ8_0Q8_0NE (8 rows x 1 block; decode path)', 'geist_rowsQ8_0Q8_0NE', 256)",
     "'rowsQ8_0Q8_0NE (8 rows x 2 blocks; decode path)', 'geist_rowsQ8_0Q8_0NE', 512)"),
    # one-row 32-value block kernels: two steps of four blocks
    ("'dotQ4_0Q8_0DP (1 row x 4 blocks)', 'geist_dotQ4_0Q8_0DP', 128)",
     "'dotQ4_0Q8_0DP (1 row x 8 blocks)', 'geist_dotQ4_0Q8_0DP', 256)"),
    ("'dotQ8_0Q8_0DP (1 row x 4 blocks)', 'geist_dotQ8_0Q8_0DP', 128)",
     "'dotQ8_0Q8_0DP (1 row x 8 blocks)', 'geist_dotQ8_0Q8_0DP', 256)"),
    ("'dotQ4_0Q8_0NE (1 row x 4 blocks)', 'geist_dotQ4_0Q8_0NE', 128)",
     "'dotQ4_0Q8_0NE (1 row x 8 blocks)', 'geist_dotQ4_0Q8_0NE', 256)"),
    ("'dotQ8_0Q8_0NE (1 row x 4 blocks)', 'geist_dotQ8_0Q8_0NE', 128)",
     "'dotQ8_0Q8_0NE (1 row x 8 blocks)', 'geist_dotQ8_0Q8_0NE', 256)"),
    # Q4_K dotprod: two super-blocks per iteration (software-pipelined)
    ("'dotQ4_KQ8_KDP (1 super-block)', 'geist_dotQ4_KQ8_KDP', 256)",
     "'dotQ4_KQ8_KDP (1 row x 2 super-blocks)', 'geist_dotQ4_KQ8_KDP', 512)"),
    # decode loops are now the functions' first loops (the several-column
    # paths follow them), with these instruction mixes
    ("dotQ4_0Q8_0DP:first:sdot=8 dotQ4_0Q8_0NE:first:smull=4",
     "dotQ4_0Q8_0DP:first:sdot=16 dotQ4_0Q8_0NE:first:smull=8"),
    ("rowsQ4_0Q8_0DP:first:sdot=16 rowsQ4_0Q8_0NE:first:smull=8",
     "rowsQ4_0Q8_0DP:first:sdot=36 rowsQ4_0Q8_0NE:first:smull=16"),
    ("dotQ4_KQ8_KDP:outer:sdot=16", "dotQ4_KQ8_KDP:first:sdot=32"),
    ("dotQ6_KQ8_KDP:outer:sdot=16 dotQ6_KQ8_KNE:outer:smull=16",
     "dotQ6_KQ8_KDP:first:sdot=16 dotQ6_KQ8_KNE:first:smull=16"),
    ("dotQ8_0Q8_0DP:first:sdot=8 dotQ8_0Q8_0NE:first:smull=8",
     "dotQ8_0Q8_0DP:first:sdot=16 dotQ8_0Q8_0NE:first:smull=16"),
    ("rowsQ8_0Q8_0DP:first:sdot=16 rowsQ8_0Q8_0NE:first:smull=16",
     "rowsQ8_0Q8_0DP:first:sdot=32 rowsQ8_0Q8_0NE:first:smull=32"),
    # neon-dotprod decodes from its packed layouts (neon.Packing): the
    # one-column loop of each packed kernel (the tile of one column: the
    # last block loop of mulQ4_0x8DP and mulQ8_0x8DP, the second of
    # mulQ4_Kx8DP, the third of mulQ6_Kx8DP), compared with llama.cpp's
    # repacked gemv kernels
    ('GK="dotQ4_0Q8_0DP ', 'GK="mulQ4_0x8DP mulQ8_0x8DP mulQ4_Kx8DP mulQ6_Kx8DP dotQ4_0Q8_0DP '),
    ("for spec in dotQ4_0Q8_0DP:first:sdot=16 ",
     "for spec in mulQ4_0x8DP:3:sdot=16 mulQ8_0x8DP:3:sdot=16 mulQ4_Kx8DP:1:sdot=128 mulQ6_Kx8DP:2:sdot=128 \\\n"
     "            dotQ4_0Q8_0DP:first:sdot=16 "),
    ("K = [\n",
     "K = [\n"
     "    ('A76', 'geist', 'Q4_0', 'mulQ4_0x8DP (packed q4_0x8dp, 8 rows x 1 block; decode path)', 'geist_mulQ4_0x8DP', 256),\n"
     "    ('A76', 'geist', 'Q8_0', 'mulQ8_0x8DP (packed q8_0x8dp, 8 rows x 1 block; decode path)', 'geist_mulQ8_0x8DP', 256),\n"
     "    ('A76', 'geist', 'Q4_K', 'mulQ4_Kx8DP (packed q4_Kx8dp, 8 rows x 1 sb; decode path)', 'geist_mulQ4_Kx8DP', 2048),\n"
     "    ('A76', 'geist', 'Q6_K', 'mulQ6_Kx8DP (packed q6_Kx8dp, 8 rows x 1 sb; decode path)', 'geist_mulQ6_Kx8DP', 2048),\n"),
    ("PAIRS = [\n",
     "PAIRS = [\n"
     "    ('A76', 'Q4_0', 'geist_mulQ4_0x8DP', 'llama_a76_gemv_q4_0_4x4'),\n"
     "    ('A76', 'Q4_K', 'geist_mulQ4_Kx8DP', 'llama_a76_gemv_q4_K_8x4'),\n"
     "    ('A76', 'Q8_0', 'geist_mulQ8_0x8DP', 'llama_a76_gemv_q8_0_4x4'),\n"
     "    ('A76', 'Q6_K', 'geist_mulQ6_Kx8DP', 'llama_a76_gemv_q6_K_8x4'),\n"),
    ("        ('A76', 'geist', 'geist_rowsQ4_0Q8_0DP', 'geist_dotQ6_KQ8_KDP'),",
     "        ('A76', 'geist', 'geist_mulQ4_0x8DP', 'geist_mulQ6_Kx8DP'),"),
    # Q5_K (no row in the shared script): geist's dots against llama.cpp's
    # vec_dot_q5_K, whose A72 build is a loop nest (one super-block: the
    # outer loop at +0x40 with its inner loop at +0xd0..+0x184 run 4 times)
    ('rowsQ8_0Q8_0NE"', 'rowsQ8_0Q8_0NE dotQ5_KQ8_KDP dotQ5_KQ8_KNE"'),
    ("            dotQ4_0Q8_0DP:first:sdot=16 ",
     "            dotQ5_KQ8_KDP:first:sdot=32 dotQ5_KQ8_KNE:outer:smull=9 \\\n"
     "            dotQ4_0Q8_0DP:first:sdot=16 "),
    ("# 4. sanity: tiny loops",
     "$T loop  out/quants-a76.dis ggml_vec_dot_q5_K_q8_K 0 -o k/llama_a76_vec_dot_q5_K.s;   check k/llama_a76_vec_dot_q5_K.s 1 sdot=16\n"
     "$T trace out/quants-a72.dis ggml_vec_dot_q5_K_q8_K 40 184=TTTN 1b4=T -o k/llama_a72_vec_dot_q5_K.s\n"
     "check k/llama_a72_vec_dot_q5_K.s 1 smull2=16\n\n"
     "# 4. sanity: tiny loops"),
    ("BYTES32 = {'Q4_0': 18.0,", "BYTES32 = {'Q5_K': 22.0, 'Q4_0': 18.0,"),
    ("    ('A72', 'geist', 'Q8_0', 'rowsQ8_0Q8_0NE",
     "    ('A76', 'geist', 'Q5_K', 'dotQ5_KQ8_KDP (1 row x 2 super-blocks)', 'geist_dotQ5_KQ8_KDP', 512),\n"
     "    ('A76', 'llama', 'Q5_K', 'vec_dot_q5_K (no repack)', 'llama_a76_vec_dot_q5_K', 256),\n"
     "    ('A72', 'geist', 'Q5_K', 'dotQ5_KQ8_KNE (1 super-block)', 'geist_dotQ5_KQ8_KNE', 256),\n"
     "    ('A72', 'llama', 'Q5_K', 'vec_dot_q5_K (armv8.0)', 'llama_a72_vec_dot_q5_K', 256),\n"
     "    ('A72', 'geist', 'Q8_0', 'rowsQ8_0Q8_0NE"),
    ("    ('A72', 'Q8_0', 'geist_rowsQ8_0Q8_0NE', 'llama_a72_vec_dot_q8_0'),",
     "    ('A76', 'Q5_K', 'geist_dotQ5_KQ8_KDP', 'llama_a76_vec_dot_q5_K'),\n"
     "    ('A72', 'Q5_K', 'geist_dotQ5_KQ8_KNE', 'llama_a72_vec_dot_q5_K'),\n"
     "    ('A72', 'Q8_0', 'geist_rowsQ8_0Q8_0NE', 'llama_a72_vec_dot_q8_0'),"),
]
for old, new in subs:
    n = s.count(old)
    if n != 1:
        sys.exit('armproj: the shared script changed (%d matches for %r)' % (n, old))
    s = s.replace(old, new)
open(sys.argv[2], 'w').write(s)
PY

GEIST_SRC=${GEIST_SRC:-$(pwd)} bash "$tmp/armproj.sh"
