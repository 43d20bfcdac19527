#!/usr/bin/env bash
# The arm64 kernel projection of issue 16 on this tree: runs the shared
# llvm-mca script (../shared/peer/armproj.sh: llvm/clang 19, geist
# cross-built, llama.cpp's ARM kernels from the node-llama-cpp npm package,
# each kernel's inner loop cut out and run through llvm-mca as a Cortex-A72
# and a Cortex-A76) with the loop shapes of geist's current kernels, which
# the shared script cannot know: how many weights one iteration of each
# extracted loop covers and which loop of the function is the decode loop.
#
# Then it projects the attention kernels (issue 24) against llama.cpp's
# flash-attention loops and the Pi 5 / Pi 4 time of a long prompt, and the
# GELU of Gemma's feed-forward (issue 23) against llama.cpp's (below).
#
#   scripts/armproj.sh                 # from the project root; ~2 minutes
#   ARMPROJ=/path/to/armproj.sh WORK=/tmp/x scripts/armproj.sh
#   ARMPROJ_PART=attn scripts/armproj.sh   # the attention part only
#   ARMPROJ_PART=gelu scripts/armproj.sh   # the GELU part only
#   ARMPROJ_PART=prompt scripts/armproj.sh # attention and prompt parts only
#   ARMPROJ_PART=rec scripts/armproj.sh    # the recurrences only (DeltaNet, Mamba-2)
#   ARMPROJ_PART=drafters DRAFTER_PAIRS="T.gguf,D.gguf ..." scripts/armproj.sh
#                                          # the model-native drafters only
#
# Then the prompt (tile) kernels (issue 38): cycles per 32 weights per
# token inside geist's widest tiles beside llama.cpp's gemm kernels, and
# the Llama-3.2-1B prompt rate and Home Assistant turn for a Pi 5, a Pi 4
# and a Jetson Orin Nano (scripts/armproj_prompt.py). The last line of the
# output is the one-line summary:
#   armproj summary: pi5_prompt_tok_s=F pi5_sdot_bound_fraction=F pi5_ha_call_s=F pi5_ha_cold_s=F llamacpp_pi5_prompt_tok_s=F
#
# Results: $WORK/results.md, $WORK/attn/results.md, $WORK/gelu/results.md,
# $WORK/rec/results.md, $WORK/prompt/results.md and $WORK/drafters/results.md
# (WORK defaults to /tmp/armproj). Every number is a throughput bound from
# llvm-mca's models: no cache misses, no memory latency, no call overhead.
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
    # last loop of each, loop 3, or loop 5 of mulQ6_Kx8DP and of
    # mulQ4_Kx8DP, which have wider tiles (up to 9 and 10 columns);
    # mulQ4_Kx8DP's has 8 SDOTs of mins beside its 128 of weights),
    # compared with llama.cpp's repacked gemv kernels
    ('GK="dotQ4_0Q8_0DP ', 'GK="mulQ4_0x8DP mulQ8_0x8DP mulQ4_Kx8DP mulQ6_Kx8DP dotQ4_0Q8_0DP '),
    ("for spec in dotQ4_0Q8_0DP:first:sdot=16 ",
     "for spec in mulQ4_0x8DP:3:sdot=16 mulQ8_0x8DP:3:sdot=16 mulQ4_Kx8DP:5:sdot=136 mulQ6_Kx8DP:5:sdot=128 \\\n"
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

WORK=${WORK:-${TMPDIR:-/tmp}/armproj}
export WORK
PART=${ARMPROJ_PART:-all}
case $PART in
all | attn | gelu | rec | prompt | drafters) ;;
*) echo "armproj: ARMPROJ_PART=$PART: want attn, gelu, rec, prompt or drafters (or unset for all)" >&2; exit 1 ;;
esac
if [ "$PART" = all ]; then
  GEIST_SRC=${GEIST_SRC:-$(pwd)} bash "$tmp/armproj.sh"
fi
# The model-native drafters (issue 36) on a Pi 5: the assistant's sparse
# head against its dense 262k head and each drafter's step against its
# target's decode step, from the decode kernels' cycles of the full run's
# results.md and the weights of the GGUF files in DRAFTER_PAIRS
# ("TARGET.gguf,DRAFTER.gguf[,BENCH.jsonl] ...": the optional BENCH is
# `geist bench --json --spec assistant|eagle3 --oracle ...` output, printed
# beside the projection). ARMPROJ_PART=drafters reruns only this part (a
# second) on the $WORK of an earlier full run; PI5_BW, PI5_THREADS and K
# change its assumptions (10e9 bytes/s, 4 threads, 3 drafted tokens).
if [ "$PART" = drafters ] || [ -n "${DRAFTER_PAIRS:-}" ]; then
  [ -f "$WORK/results.md" ] || { echo "armproj: $WORK/results.md missing (run scripts/armproj.sh in full once)" >&2; exit 1; }
  [ -n "${DRAFTER_PAIRS:-}" ] || { echo 'armproj: DRAFTER_PAIRS="TARGET.gguf,DRAFTER.gguf[,BENCH.jsonl] ..." (geist synth --shape gemma4-e2b + gemma4-e2b-assistant, qwen3-1.7b + qwen3-1.7b-eagle3)' >&2; exit 1; }
  mkdir -p "$WORK/drafters"
  # shellcheck disable=SC2086
  python3 scripts/armproj_drafters.py "$WORK/results.md" $DRAFTER_PAIRS | tee "$WORK/drafters/results.md"
  [ "$PART" = drafters ] && exit 0
fi
# The parts below use the full run's $WORK (llama.cpp's source, the loop
# cutter) with geist cross-built from this tree.
LLVM=${LLVM:-/usr/lib/llvm-19/bin}
LC=$WORK/nlc/llama.cpp
for f in "$LC/ggml/src/ggml-cpu/simd-gemm.h" "$WORK/tools/mcatool.py"; do
  [ -f "$f" ] || { echo "armproj: $f missing (run scripts/armproj.sh in full once)" >&2; exit 1; }
done
# (rebuilt unless a build newer than every kernel and model source is there)
if [ ! -x "$WORK/geist-arm64" ] || [ -n "$(find neon engine/model cmd -newer "$WORK/geist-arm64" \( -name '*.go' -o -name '*.s' \) | head -1)" ]; then
  CGO_ENABLED=0 GOARCH=arm64 nice -n 19 go build -p 1 -buildvcs=false -o "$WORK/geist-arm64" ./cmd/geist
fi
GEIST_AT="$(git log --oneline -1 | cut -c1-60)$(git diff --quiet HEAD -- neon engine/model || echo ' (modified)')"
LLAMA_AT="node-llama-cpp $(ls "$WORK"/nlc/node-llama-cpp-*.tgz | sed 's/.*node-llama-cpp-//; s/\.tgz$//'), $(tr -d ' \n' < "$WORK/nlc/package/llama/llama.cpp.info.json")"
export GEIST_AT LLAMA_AT

# GELU (issue 23), per element of Gemma's GELU-gated feed-forward. geist's
# GELUMul and GELU (engine/model/gemma.go) are Go, not assembly: per
# element a call of ggml.FP32ToFP16 (integer code with a branch on the
# rounding), a load from the GELU table of halves and one from the fp16
# table. llama.cpp's ggml_vec_geglu_f32 and ggml_vec_gelu_f32 (vec.h with
# GGML_GELU_FP16: the same table) are scalar loops too; on arm64 their
# FP32->FP16 is ggml's branchless software conversion (simd-mappings.h
# gives NEON only the FP16->FP32 direction, one FCVT). The executed path
# of one element in (-10, 10), the path of every Gemma gate, is found in
# each binary by what it does (scripts/armproj_gelu.py), not by offsets.
#
# The mixture of experts (qwen3moe) has no gathering kernel of its own:
# engine/model/moe.go copies the rows routed to an expert together and
# multiplies them by the expert's gate, up and down matrices with the
# ordinary quantized kernels of the first table, as llama.cpp's mul_mat_id
# runs its ordinary vec_dot/gemv kernels per expert.
if [ "$PART" = all ] || [ "$PART" = gelu ]; then
  GL=$WORK/gelu
  mkdir -p "$GL"
  GM=github.com/geisten/geist/engine/model
  "$LLVM/llvm-objdump" -d --no-show-raw-insn --triple=aarch64 \
    --disassemble-symbols=$GM.GELUMul,$GM.GELU,github.com/geisten/geist/neon/ggml.FP32ToFP16 \
    "$WORK/geist-arm64" > "$GL/geist.dis"
  printf '%s\n' '#include "common.h"' '#include "vec.h"' \
    'void gl_geglu(int n, float * y, const float * x, const float * g) { ggml_vec_geglu_f32(n, y, x, g); }' \
    'void gl_gelu(int n, float * y, const float * x) { ggml_vec_gelu_f32(n, y, x); }' > "$GL/gl.cpp"
  grep -q '^#define GGML_GELU_FP16$' "$LC/ggml/src/ggml-cpu/vec.h" || { echo "armproj: vec.h no longer defines GGML_GELU_FP16" >&2; exit 1; }
  CF="--target=aarch64-linux-gnu -O3 -DNDEBUG -D_GNU_SOURCE -I$LC/ggml/include -I$LC/ggml/src -I$LC/ggml/src/ggml-cpu"
  for c in a76 a72; do
    "$LLVM/clang++" $CF -std=c++17 -mcpu=cortex-$c -c "$GL/gl.cpp" -o "$GL/gl-$c.o"
    "$LLVM/llvm-objdump" -d --no-show-raw-insn --mattr=+dotprod,+fullfp16 "$GL/gl-$c.o" > "$GL/gl-$c.dis"
  done
  python3 scripts/armproj_gelu.py "$WORK/tools" "$GL" "$LLVM/llvm-mca" | tee "$GL/results.md"
fi
[ "$PART" = gelu ] && exit 0

# The recurrences of the hybrid families (issue 35), per value of the
# recurrent state and token: geist's NEON kernels (neon/_asm vector.go:
# deltaRowNEON, one row of the gated delta rule in two passes, decay + dot
# with k, then update + dot with q; ssmStepNEON, two rows of a Mamba-2
# head per iteration, FMUL then FADD for the generic bits) beside
# llama.cpp's CPU loops in ggml-cpu/ops.cpp: ggml_compute_forward_ssm_scan
# (Mamba-2: one row, 16 values per iteration, FMLA for the sum) and
# ggml_compute_forward_gated_delta_net (per token four passes over the
# state: ggml_vec_scale_f32 by exp(g), ggml_vec_dot_f32 with k,
# ggml_vec_mad_f32 of k·delta, ggml_vec_dot_f32 with q). The loops are cut
# from the compiled functions (ops.cpp, vec.cpp) and their instruction
# mixes checked, as above; the projection is the recurrence's time per
# token on a Pi (one core) for Qwen3.5-0.8B (18 DeltaNet layers of 16 heads
# of 128 x 128) and Granite-4.0-H-1B (36 Mamba-2 layers of 48 heads of
# 64 x 128), beside nothing else (the weights of the first table dominate
# a token; the recurrence is what replay under speculation costs).
if [ "$PART" = all ] || [ "$PART" = rec ]; then
  R=$WORK/rec
  mkdir -p "$R"
  G=github.com/geisten/geist/neon
  "$LLVM/llvm-objdump" -d --no-show-raw-insn --triple=aarch64 --mattr=+dotprod,+fullfp16 \
    --disassemble-symbols=$G.deltaRowNEON.abi0,$G.ssmStepNEON.abi0,$G.ssmDecayNEON.abi0 \
    "$WORK/geist-arm64" > "$R/geist.dis"
  CF="--target=aarch64-linux-gnu -O3 -DNDEBUG -D_GNU_SOURCE -I$LC/ggml/include -I$LC/ggml/src -I$LC/ggml/src/ggml-cpu"
  for c in a76 a72; do
    for f in ops vec; do
      [ -s "$R/$f-$c.dis" ] && [ "$R/$f-$c.dis" -nt "$LC/ggml/src/ggml-cpu/$f.cpp" ] && continue
      "$LLVM/clang++" $CF -std=c++17 -mcpu=cortex-$c -c "$LC/ggml/src/ggml-cpu/$f.cpp" -o "$R/$f-$c.o"
      "$LLVM/llvm-objdump" -d --no-show-raw-insn --mattr=+dotprod,+fullfp16 "$R/$f-$c.o" > "$R/$f-$c.dis"
    done
  done
  # rloop FILE SYM RULE OUT MNEMONIC=COUNT...: as loop() above, into $R
  rloop() {
    local dis=$1 sym=$2 rule=$3 out=$4 kv m want got; shift 4
    python3 "$WORK/tools/mcatool.py" loop "$dis" "$sym" "$rule" -o "$R/$out.s" 2>/dev/null
    for kv in "$@"; do
      m=${kv%%=*} want=${kv##*=}
      got=$(grep -cP "^\t$m\t" "$R/$out.s" || true)
      [ "$got" = "$want" ] || { echo "armproj: $out: $m=$got, expected $want (kernel changed: re-check the counts)" >&2; exit 1; }
    done
  }
  rloop "$R/geist.dis" $G.deltaRowNEON.abi0 0 g_dn_decay fmul=4 fmla=4      # 16 values: decay, dot with k
  rloop "$R/geist.dis" $G.deltaRowNEON.abi0 1 g_dn_update fmla=8            # 16 values: update, dot with q
  rloop "$R/geist.dis" $G.ssmStepNEON.abi0 0 g_ssm fmul=12 fadd=8          # 2 rows x 8 values
  rloop "$R/geist.dis" $G.ssmDecayNEON.abi0 0 g_ssm_replay fmul=4 fadd=2   # 8 values, no outputs
  for c in a76 a72; do
    # the loops by their mix: the 16-value NEON bodies (GGML_F32_STEP)
    python3 - "$WORK/tools/mcatool.py" "$R/ops-$c.dis" "$R/vec-$c.dis" "$R/idx-$c" <<'PY'
import re, subprocess, sys
tool, ops, vec, out = sys.argv[1:]
def find(dis, sym, want):
    ls = subprocess.run(['python3', tool, 'loops', dis, sym], capture_output=True, text=True, check=True).stdout
    for line in ls.splitlines():
        m = re.match(r'loop (\d+): \S+ (\d+) insns\s+(.*)$', line)
        mix = dict(kv.split(':') for kv in m.group(3).split())
        if all(mix.get(k) == v for k, v in want.items()) and int(m.group(2)) < 45:
            return m.group(1)
    sys.exit('armproj: no loop of %s in %s with %s' % (sym, dis, want))
open(out, 'w').write(' '.join([
    find(ops, 'ggml_compute_forward_ssm_scan', {'fmul': '8', 'fadd': '4', 'fmla': '4'}),
    find(ops, 'ggml_compute_forward_gated_delta_net', {'fmul': '4', 'ldp': '2', 'stp': '2'}),
    find(ops, 'ggml_compute_forward_gated_delta_net', {'fmla': '4', 'ldp': '4', 'stp': '2'}),
    find(vec, 'ggml_vec_dot_f32', {'fmla': '4', 'ldp': '4'})]) + '\n')
PY
    read -r i_ssm i_scale i_mad i_dot < "$R/idx-$c"
    rloop "$R/ops-$c.dis" ggml_compute_forward_ssm_scan "$i_ssm" l_${c}_ssm fmul=8 fadd=4 fmla=4           # 16 values
    rloop "$R/ops-$c.dis" ggml_compute_forward_gated_delta_net "$i_scale" l_${c}_dn_scale fmul=4          # 16 values
    rloop "$R/ops-$c.dis" ggml_compute_forward_gated_delta_net "$i_mad" l_${c}_dn_mad fmla=4              # 16 values
    rloop "$R/vec-$c.dis" ggml_vec_dot_f32 "$i_dot" l_${c}_dot fmla=4                                     # 16 values
  done
  python3 - "$R" "$LLVM/llvm-mca" <<'PY' | tee "$R/results.md"
import os, re, subprocess, sys

R, MCA = sys.argv[1], sys.argv[2]
ITER = int(os.environ.get('ITER', '300'))
CPUS = {'A76': ('neoverse-n1', 2.4), 'A72': ('cortex-a72', 1.8)}


def mca(f, cpu):
    out = subprocess.run([MCA, '-mtriple=aarch64', '-mcpu=' + CPUS[cpu][0], '-mattr=+dotprod,+fullfp16',
                          '-iterations=%d' % ITER, os.path.join(R, f + '.s')],
                         capture_output=True, text=True, check=True).stdout
    it = int(re.search(r'^Iterations:\s+(\d+)', out, re.M).group(1))
    return int(re.search(r'^Total Cycles:\s+(\d+)', out, re.M).group(1)) / it


# (model, engine, loops: (name, file, values per iteration, passes per token))
rows = lambda c: [
    ('DeltaNet', 'geist', [('deltaRowNEON decay + dot with k (16 values)', 'g_dn_decay', 16, 1),
                           ('deltaRowNEON update + dot with q (16 values)', 'g_dn_update', 16, 1)]),
    ('DeltaNet', 'llama.cpp', [('ggml_vec_scale_f32 by exp(g) (16 values)', 'l_%s_dn_scale' % c, 16, 1),
                               ('ggml_vec_dot_f32 with k, then with q (16 values)', 'l_%s_dot' % c, 16, 2),
                               ('ggml_vec_mad_f32 k x delta (16 values)', 'l_%s_dn_mad' % c, 16, 1)]),
    ('Mamba-2', 'geist', [('ssmStepNEON (2 rows x 8 values)', 'g_ssm', 16, 1)]),
    ('Mamba-2', 'llama.cpp', [('ssm_scan inner loop (16 values)', 'l_%s_ssm' % c, 16, 1)]),
    ('Mamba-2 replay', 'geist', [('ssmDecayNEON, no outputs (8 values)', 'g_ssm_replay', 8, 1)]),
]
STATE = {'DeltaNet': ('Qwen3.5-0.8B', 18 * 16 * 128 * 128), 'Mamba-2': ('Granite-4.0-H-1B', 36 * 48 * 64 * 128),
         'Mamba-2 replay': ('Granite-4.0-H-1B', 36 * 48 * 64 * 128)}
print('## Recurrences: cycles per state value and token\n')
print('geist at %s; llama.cpp from %s.\n' % (os.environ['GEIST_AT'], os.environ['LLAMA_AT']))
print('%d llvm-mca iterations; A76 = `-mcpu=neoverse-n1` at 2.4 GHz, A72 = `-mcpu=cortex-a72` at 1.8 GHz. '
      'Inner loops only: no per-row or per-head work (the decay, softplus, the reductions of the sums), '
      'no cache misses (a Mamba-2 head is 32 KiB, a DeltaNet head 64 KiB: each streams once per token '
      'when decoding; prefill keeps a head in cache over the tokens in geist).\n' % ITER)
print('| CPU | recurrence | engine | loop | cycles/iter | cycles per value |')
print('|---|---|---|---|---|---|')
per = {}
for cpu in CPUS:
    for rec, eng, loops in rows(cpu.lower()):
        for name, f, vals, passes in loops:
            cy = mca(f, cpu)
            per[(cpu, rec, eng)] = per.get((cpu, rec, eng), 0) + cy * passes / vals
            print('| %s | %s | %s | %s%s | %.1f | %.3f |' % (cpu, rec, eng, name, ' x%d' % passes if passes > 1 else '', cy, cy * passes / vals))
print('\n| CPU | recurrence | geist cycles/value | llama.cpp cycles/value | geist / llama.cpp | model | values per token | geist ms/token | llama.cpp ms/token |')
print('|---|---|---|---|---|---|---|---|---|')
for cpu in CPUS:
    ghz = CPUS[cpu][1]
    for rec in ('DeltaNet', 'Mamba-2', 'Mamba-2 replay'):
        g = per[(cpu, rec, 'geist')]
        l = per.get((cpu, rec, 'llama.cpp'))
        model, n = STATE[rec]
        print('| %s | %s | %.3f | %s | %s | %s | %.1f M | %.2f | %s |' % (
            cpu, rec, g, '%.3f' % l if l else '-', '%.2f' % (g / l) if l else '-', model, n / 1e6,
            g * n / (ghz * 1e6), '%.2f' % (l * n / (ghz * 1e6)) if l else '-'))
PY
  [ "$PART" = rec ] && exit 0
fi

# Attention (issue 24): geist's F16 tile kernels (neon/attntile_arm64.s)
# beside llama.cpp's flash-attention loops (ggml-cpu/ops.cpp: the per-row
# one_chunk path with ggml_vec_dot_f16 / ggml_vec_mad_f16, which it runs for
# decode and for batches of fewer than GGML_FA_TILE_Q rows, and the tiled
# path, simd_gemm's register tile for QK and PV, which it runs for prompts),
# per (query row, key) at head size 64, and the projected attention time of
# a cold Home Assistant turn and of a GetLiveContext call for the
# Llama-3.2-1B shape. ARMPROJ_PART=attn reruns only this part (a few
# seconds) on the $WORK of an earlier full run (llama.cpp's source, the
# loop cutter), with geist cross-built from this tree.
A=$WORK/attn
mkdir -p "$A"
G=github.com/geisten/geist/neon
"$LLVM/llvm-objdump" -d --no-show-raw-insn --triple=aarch64 --mattr=+dotprod,+fullfp16 \
  --disassemble-symbols=$G.attnKTNEON.abi0,$G.attnScoresTNEON.abi0,$G.attnSumFMANEON.abi0,$G.f16ToF32NEON.abi0,$(
  )$G.attnKTHNEON.abi0,$G.attnScoresHNEON.abi0,$G.attnSumHNEON.abi0,$(
  )$G.scoresQ8_0DP.abi0,$G.scoresQ8_0NE.abi0,$G.dequantQ8_0NEON.abi0,$G.transposeV8NEON.abi0,$G.sumV8DP.abi0,$G.sumV8NE.abi0 \
  "$WORK/geist-arm64" > "$A/geist.dis"
# llama.cpp's steps as callable functions: the inline vector calls of
# vec.h, simd_gemm's full tile, and the tiled path's K packing and V
# conversion (ggml_cpu_fp16_to_fp32 on arm is its scalar loop) written as
# the one-line loops they are.
cat > "$A/fa.cpp" <<'EOF'
#include "common.h"
#include "vec.h"
#include "simd-gemm.h"
void fa_mad_f16(int n, ggml_fp16_t * y, const ggml_fp16_t * x, float v) { ggml_vec_mad_f16(n, y, x, v); }
void fa_gemm(float * c, const float * a, const float * b, int k, int n) { simd_gemm_ukernel<GEMM_RM, GEMM_RN>(c, a, b, k, n); }
void fa_kpack(float * kt, const ggml_fp16_t * k, int dk) { for (int d = 0; d < dk; d++) kt[d * GGML_FA_TILE_KV] = GGML_CPU_FP16_TO_FP32(k[d]); }
void fa_vconv(float * y, const ggml_fp16_t * x, int n) { for (int i = 0; i < n; i++) y[i] = GGML_CPU_FP16_TO_FP32(x[i]); }
EOF
CF="--target=aarch64-linux-gnu -O3 -DNDEBUG -D_GNU_SOURCE -I$LC/ggml/include -I$LC/ggml/src -I$LC/ggml/src/ggml-cpu"
for c in a76 a72; do
  "$LLVM/clang++" $CF -std=c++17 -mcpu=cortex-$c -c "$A/fa.cpp" -o "$A/fa-$c.o"
  "$LLVM/clang++" $CF -std=c++17 -mcpu=cortex-$c -c "$LC/ggml/src/ggml-cpu/vec.cpp" -o "$A/vec-$c.o"
  for o in fa vec; do "$LLVM/llvm-objdump" -d --no-show-raw-insn --mattr=+dotprod,+fullfp16 "$A/$o-$c.o" > "$A/$o-$c.dis"; done
done
grep -q '^#define GGML_FA_TILE_Q  64$' "$LC/ggml/src/ggml-cpu/common.h" || { echo "armproj: GGML_FA_TILE_Q is not 64" >&2; exit 1; }
# loop FILE SYM RULE OUT MNEMONIC=COUNT...: cut the loop, stop if its mix is
# not the one the per-iteration counts below assume
loop() {
  local dis=$1 sym=$2 rule=$3 out=$4 kv m want got; shift 4
  python3 "$WORK/tools/mcatool.py" loop "$dis" "$sym" "$rule" -o "$A/$out.s" 2>/dev/null
  for kv in "$@"; do
    m=${kv%%=*} want=${kv##*=}
    got=$(grep -cP "^\t$m\t" "$A/$out.s" || true)
    [ "$got" = "$want" ] || { echo "armproj: $out: $m=$got, expected $want (kernel changed: re-check the counts)" >&2; exit 1; }
  done
}
loop "$A/geist.dis" $G.attnKTNEON.abi0 first g_kt ld1=4 fcvtl=4 fcvtl2=4      # 4 keys x 8 d
loop "$A/geist.dis" $G.attnScoresTNEON.abi0 first g_sc fmla=64                # 4 d x 64 keys
loop "$A/geist.dis" $G.attnSumFMANEON.abi0 first g_sum fmla=16 ldr=1          # 1 key x 64 outputs
loop "$A/geist.dis" $G.f16ToF32NEON.abi0 first g_cvt fcvtl=1 fcvtl2=1         # 8 values
# the F16 cache in half-precision arithmetic (neon/attnf16.go, A76 only:
# the A72 has no FP16 arithmetic): keys transposed as halves (shared by
# the tile), scores in runs of 32 d (the run loop: its half sums widened
# into float32 included), values summed from the cache one key per
# iteration, and once per run of 32 keys the half sums of 64 outputs
# widened into float32 (the run's other steps: zeroing, its length)
loop "$A/geist.dis" $G.attnKTHNEON.abi0 first g_kth ld1=8 trn1=8 trn2=8 zip1=4 zip2=4 # 8 keys x 8 d
loop "$A/geist.dis" $G.attnScoresHNEON.abi0 first g_sch fmla=256 fcvtl=8 fcvtl2=8 # 32 d x 64 keys
loop "$A/geist.dis" $G.attnSumHNEON.abi0 first g_sumh fmla=8 fcvt=1 ld1=2     # 1 key x 64 outputs
python3 - "$A/geist.dis" "$A/g_sumhw.s" <<'PY'
# attnSumHNEON's run steps outside its key loop: from the key loop's
# branch to the run loop's (the widening), and the run's head (zeroing, its
# length) up to the key loop's start
import re, sys
body, sym = [], None
for line in open(sys.argv[1]):
    m = re.match(r'^[0-9a-f]+ <(.*)>:', line)
    if m:
        sym = m.group(1)
        continue
    m = re.match(r'^\s*[0-9a-f]+:\s+(\S+)\s*(.*)$', line)
    if m and sym and sym.endswith('attnSumHNEON.abi0'):
        body.append((m.group(1), m.group(2).split('//')[0].strip()))
br = [i for i, (op, _) in enumerate(body) if op in ('b.ne', 'cbnz')]
kloop, rloop = br[0], br[1]
head = [i for i, (op, a) in enumerate(body) if op == 'movi' and i < kloop]
run = body[kloop + 1:rloop] + body[head[-8]:kloop - 16]  # widening, then zeroing/length (up to the key loop's 16 steps)
ops = [op for op, _ in run]
if ops.count('fcvtl') != 8 or ops.count('fcvtl2') != 8 or ops.count('fadd') != 16 or ops.count('movi') != 8 or ops.count('csel') != 1:
    sys.exit('armproj: attnSumHNEON run steps changed: %s' % ' '.join(ops))
open(sys.argv[2], 'w').write(''.join('\t%s\t%s\n' % (op, a) for op, a in run))
PY
# the Q8_0 cache: integer scores (4 keys x 32 d per block loop), and the
# values either dequantized (shared by the tile) and summed in float, or
# transposed (shared) and summed in int8 (neon/attnv8.go: one loop
# iteration is 32 positions x 32 channels of one row, its weights'
# quantization included)
loop "$A/geist.dis" $G.scoresQ8_0DP.abi0 1 g_a76_scq8 sdot=8                   # 4 keys x 32 d
loop "$A/geist.dis" $G.scoresQ8_0NE.abi0 1 g_a72_scq8 smull=8 smull2=8         # 4 keys x 32 d
loop "$A/geist.dis" $G.dequantQ8_0NEON.abi0 first g_dq scvtf=8                 # 32 values
loop "$A/geist.dis" $G.transposeV8NEON.abi0 first g_tv8 zip1=8 zip2=8          # 4 positions x 32 channels
loop "$A/geist.dis" $G.sumV8DP.abi0 first g_a76_sv8 sdot=64 fcvtnu=8           # 32 positions x 32 channels
loop "$A/geist.dis" $G.sumV8NE.abi0 first g_a72_sv8 smull=32 smlal2=32 sadalp=64 # 32 positions x 32 channels
loop "$A/vec-a76.dis" ggml_vec_dot_f16 0 l_a76_dot fmla=4 ldp=4               # 32 halves (FP16 FMA)
loop "$A/vec-a72.dis" ggml_vec_dot_f16 0 l_a72_dot fmla=4 fcvtl=8             # 16 halves
loop "$A/fa-a76.dis" _Z10fa_mad_f16iPtPKtf 0 l_a76_mad fmla=4 stp=2           # 32 halves
loop "$A/fa-a72.dis" _Z10fa_mad_f16iPtPKtf 0 l_a72_mad fmla=4 fcvtn=4         # 16 halves
for c in a76 a72; do
  loop "$A/fa-$c.dis" _Z7fa_gemmPfPKfS1_ii 0 l_${c}_gemm fmla=4 ld1r=1        # 2 rows x 8 columns x 1 k
  loop "$A/fa-$c.dis" _Z8fa_kpackPfPKti 0 l_${c}_kpack fcvt=2                 # 2 values
  loop "$A/fa-$c.dis" _Z8fa_vconvPfPKti 0 l_${c}_vconv fcvtl=2 fcvtl2=2       # 16 values
done

python3 - "$A" "$WORK/results.md" "$LLVM/llvm-mca" <<'PY' | tee "$A/results.md"
import json, os, re, subprocess, sys

A, RES, MCA = sys.argv[1], sys.argv[2], sys.argv[3]
ITER = int(os.environ.get('ITER', '300'))
CPUS = {'A76': ('neoverse-n1', 2.4), 'A72': ('cortex-a72', 1.8)}
HD = 64          # head size (keys and values)
R = 32           # geist's rows per tile (engine/model/attention.go attnRows)
QT = 64          # llama.cpp's rows per tile (GGML_FA_TILE_Q, one head)
LAYERS, HEADS = 16, 32


def mca(f, cpu):
    out = subprocess.run([MCA, '-mtriple=aarch64', '-mcpu=' + CPUS[cpu][0], '-mattr=+dotprod,+fullfp16',
                          '-iterations=%d' % ITER, os.path.join(A, f + '.s')],
                         capture_output=True, text=True, check=True).stdout
    it = int(re.search(r'^Iterations:\s+(\d+)', out, re.M).group(1))
    return int(re.search(r'^Total Cycles:\s+(\d+)', out, re.M).group(1)) / it


# (row, kernel, file, iterations per (row, key) as a function of the CPU)
c = {}
for cpu in CPUS:
    lc = cpu.lower()
    dot_w = 32 if cpu == 'A76' else 16
    c[cpu] = [
        ('geist', 'attnKTNEON (4 keys x 8 d), shared by %d rows' % R, 'g_kt', HD / 8 / 4 / R),
        ('geist', 'attnScoresTNEON (4 d x 64 keys)', 'g_sc', HD / 4 / 64),
        ('geist', 'attnSumFMANEON (1 key x 64 outputs)', 'g_sum', HD / 64),
        ('geist', 'f16ToF32NEON values (8), shared by %d rows' % R, 'g_cvt', HD / 8 / R),
        ('one_chunk', 'ggml_vec_dot_f16 (%d halves)' % dot_w, 'l_%s_dot' % lc, HD / dot_w),
        ('one_chunk', 'ggml_vec_mad_f16 (%d halves)' % dot_w, 'l_%s_mad' % lc, HD / dot_w),
        ('tiled', 'simd_gemm tile, QK (2 rows x 8 keys x 1 d)', 'l_%s_gemm' % lc, HD / 16),
        ('tiled', 'simd_gemm tile, PV (2 rows x 8 outputs x 1 key)', 'l_%s_gemm' % lc, HD / 16),
        ('tiled', 'K tile packing (2 values), shared by %d rows' % QT, 'l_%s_kpack' % lc, HD / 2 / QT),
        ('tiled', 'V conversion (16 values), shared by %d rows' % QT, 'l_%s_vconv' % lc, HD / 16 / QT),
        ('geist_q8f', 'scoresQ8_0 (4 keys x 32 d, integer)', 'g_%s_scq8' % lc, HD / 32 / 4),
        ('geist_q8f', 'dequantQ8_0NEON values (32), shared by %d rows' % R, 'g_dq', HD / 32 / R),
        ('geist_q8f', 'attnSumFMANEON (1 key x 64 outputs)', 'g_sum', HD / 64),
        ('geist_q8i', 'scoresQ8_0 (4 keys x 32 d, integer)', 'g_%s_scq8' % lc, HD / 32 / 4),
        ('geist_q8i', 'transposeV8NEON (4 positions x 32 channels), shared by %d rows' % R, 'g_tv8', HD / 32 / 4 / R),
        ('geist_q8i', 'sumV8 (32 positions x 32 channels, int8)', 'g_%s_sv8' % lc, HD / 32 / 32),
    ]
    if cpu == 'A76':  # FEAT_FP16 arithmetic: half value sums (the default), and half scores too (GEIST_ATTN_F16=all)
        c[cpu] += [
            ('geist_hv', 'attnKTNEON (4 keys x 8 d), shared by %d rows' % R, 'g_kt', HD / 8 / 4 / R),
            ('geist_hv', 'attnScoresTNEON (4 d x 64 keys)', 'g_sc', HD / 4 / 64),
            ('geist_hv', 'attnSumHNEON (1 key x 64 outputs, half)', 'g_sumh', HD / 64),
            ('geist_hv', 'attnSumHNEON run steps (64 outputs per 32 keys)', 'g_sumhw', HD / 64 / 32),
            ('geist_h', 'attnKTHNEON (8 keys x 8 d, halves), shared by %d rows' % R, 'g_kth', HD / 8 / 8 / R),
            ('geist_h', 'attnScoresHNEON (32 d x 64 keys, half runs widened)', 'g_sch', HD / 32 / 64),
            ('geist_h', 'attnSumHNEON (1 key x 64 outputs, half)', 'g_sumh', HD / 64),
            ('geist_h', 'attnSumHNEON run steps (64 outputs per 32 keys)', 'g_sumhw', HD / 64 / 32),
        ]

print('## Attention: head size 64, per (query row, key), QK plus PV\n')
print('geist at %s; llama.cpp from %s.\n' % (os.environ['GEIST_AT'], os.environ['LLAMA_AT']))
print('%d llvm-mca iterations; A76 = `-mcpu=neoverse-n1` at 2.4 GHz, A72 = `-mcpu=cortex-a72` at 1.8 GHz. '
      'geist: the tile kernels of neon/attntile_arm64.s. llama.cpp: ops.cpp\'s flash-attention paths, '
      'one_chunk (one row at a time: decode, batches under %d rows) and tiled (prompts). '
      'Not counted on either side: the softmax (maximum, exponentials, sums), the scale and mask passes, '
      'call overhead, cache misses; for geist\'s Q8_0 cache also the queries\' quantization (per row, not per key). '
      'The F16 cache is geist\'s default (llama.cpp\'s too); with the Q8_0 cache (--kv-type q8_0) the scores are '
      'integer dots, and the values are summed in float after a dequantization (GEIST_ATTN_V8=off) or in int8 '
      '(neon/attnv8.go: the weights quantized per 32 positions and 32 channels).\n' % (ITER, QT))
print('| CPU | engine, path | loop | cycles/iter | iter per (row, key) | cycles per (row, key) |')
print('|---|---|---|---|---|---|')
per = {}
for cpu, rows in c.items():
    for eng, name, f, n in rows:
        cy = mca(f, cpu)
        per[(cpu, eng)] = per.get((cpu, eng), 0) + cy * n
        label = {'geist': 'geist', 'geist_q8f': 'geist Q8_0 cache, float values', 'geist_q8i': 'geist Q8_0 cache, int8 values',
                 'geist_hv': 'geist F16 cache, half value sums (default on FP16 cores)',
                 'geist_h': 'geist F16 cache, half scores and value sums (GEIST_ATTN_F16=all)'}.get(eng, 'llama.cpp ' + eng)
        print('| %s | %s | %s | %.1f | %.4g | %.2f |' % (cpu, label, name, cy, n, cy * n))
json.dump({cpu: {e: per[(cpu, e)] for e in ('geist', 'geist_hv', 'geist_h', 'geist_q8f', 'geist_q8i', 'tiled', 'one_chunk') if (cpu, e) in per} for cpu in CPUS},
          open(os.path.join(A, 'perpair.json'), 'w'))
print('\n| CPU | geist F16 cache | geist F16 cache, half value sums (default on FP16 cores) | geist F16 cache, half scores and values (GEIST_ATTN_F16=all) | geist Q8_0 cache, float values | geist Q8_0 cache, int8 values | llama.cpp tiled (prompts) | llama.cpp one_chunk (decode) | geist F16 / tiled | geist half values / tiled | geist int8 / tiled |')
print('|---|---|---|---|---|---|---|---|---|---|---|')
for cpu in CPUS:
    g, qf, qi, t, o = (per[(cpu, e)] for e in ('geist', 'geist_q8f', 'geist_q8i', 'tiled', 'one_chunk'))
    hv, h = per.get((cpu, 'geist_hv')), per.get((cpu, 'geist_h'))
    na = 'n/a (no FP16 arithmetic)'
    print('| %s | %.2f | %s | %s | %.2f | %.2f | %.2f | %.2f | %.2f | %s | %.2f |' % (cpu, g, '%.2f' % hv if hv else na, '%.2f' % h if h else na, qf, qi, t, o, g / t,
                                                                          '%.2f' % (hv / t) if hv else 'n/a', qi / t))

# the weights, from the full run's per-kernel table (decode loops: an upper
# bound for prompts, whose tiles share weight loads between tokens)
w = {}
if os.path.exists(RES):
    for line in open(RES):
        p = [x.strip() for x in line.split('|')]
        if len(p) > 11 and p[1] in CPUS and p[2] in ('geist', 'llama'):
            w.setdefault((p[1], p[2], p[4].split(' ')[0]), float(p[10]))
WK = {'A76': {'geist': ('mulQ4_0x8DP', 'mulQ6_Kx8DP'), 'llama': ('gemv_q4_0_4x4', 'gemv_q6_K_8x4')},
      'A72': {'geist': ('rowsQ4_0Q8_0NE', 'dotQ6_KQ8_KNE'), 'llama': ('vec_dot_q4_0', 'vec_dot_q6_K')}}
LAYER_W, HEAD_W = 0.973e9, 0.263e9   # Llama-3.2-1B: 16 layers' matrices (Q4_0), the tied head (Q6_K)

calls = [('cold HA turn, 4,900 tokens at 0-4,899', 0, 4900),
         ('GetLiveContext call, 2,000 tokens at 4,900-6,899', 4900, 2000)]
for board, cpu in (('Pi 5', 'A76'), ('Pi 4', 'A72')):
    ghz = CPUS[cpu][1]
    print('\n## Projected %s (%s, %.1f GHz) prompt time, Llama-3.2-1B shape (16 layers, 32 heads x 64, 8 KV heads), F16 cache\n' % (board, cpu, ghz))
    print('Seconds on one core (on four, scaled perfectly: /4). Attention = (row, key) pairs x 32 heads x 16 layers x the cycles above; '
          'llama.cpp runs its tiled path for these prompts. Weights: the decode loops of the table above '
          '(Q4_0 layers, 0.97 G multiply-adds per token; the Q6_K head, 0.26 G, runs for the last token only).\n')
    print('| call | pairs per head and layer | geist attention | llama.cpp attention | geist weights | llama.cpp weights | geist total | llama.cpp total | geist total, 4 cores | llama.cpp total, 4 cores |')
    print('|---|---|---|---|---|---|---|---|---|---|')
    for name, p0, n in calls:
        pairs = n * p0 + n * (n + 1) // 2
        att = {e: pairs * HEADS * LAYERS * per[(cpu, e)] / (ghz * 1e9) for e in ('geist', 'tiled')}
        wt = {}
        for e in ('geist', 'llama'):
            q4, q6 = WK[cpu][e]
            if (cpu, e, q4) in w and (cpu, e, q6) in w:
                wt[e] = (n * LAYER_W * w[(cpu, e, q4)] + HEAD_W * w[(cpu, e, q6)]) / 32 / (ghz * 1e9)
        fw = lambda e: '%.1f' % wt[e] if e in wt else 'n/a'
        ft = lambda a, e, k=1: '%.1f' % ((a + wt[e]) / k) if e in wt else 'n/a'
        print('| %s | %.2f M | %.1f | %.1f | %s | %s | %s | %s | %s | %s |' % (
            name, pairs / 1e6, att['geist'], att['tiled'], fw('geist'), fw('llama'),
            ft(att['geist'], 'geist'), ft(att['tiled'], 'llama'), ft(att['geist'], 'geist', 4), ft(att['tiled'], 'llama', 4)))
    if not w:
        print('\n(weights: no %s; run scripts/armproj.sh in full)' % RES)
PY
[ "$PART" = attn ] && exit 0

# Prompt (tile) kernels (issue 38): geist's packed dotprod kernels and
# ARMv8.0 multi-column loops, llama.cpp's repack.cpp gemm kernels (the
# dotprod build of the full run; an i8mm build for the Neoverse N2, a core
# that has it), then the Llama-3.2-1B and Home Assistant tables. The loops
# are found by what they do (the innermost loop with the most weight
# products), not by offsets; see scripts/armproj_prompt.py.
P=$WORK/prompt
mkdir -p "$P"
syms=$(for f in mulQ4_0x8DP mulQ8_0x8DP mulQ4_Kx8DP mulQ6_Kx8DP rowsQ4_0Q8_0NE rowsQ8_0Q8_0NE dotQ4_KQ8_KNE dotQ6_KQ8_KNE; do printf '%s.%s.abi0,' $G $f; done)
"$LLVM/llvm-objdump" -d --no-show-raw-insn --triple=aarch64 --mattr=+dotprod,+fullfp16 \
  --disassemble-symbols="${syms%,}" "$WORK/geist-arm64" > "$P/geist.dis"
cp "$WORK/out/repack-a76.dis" "$P/repack-a76.dis"
if [ ! -f "$P/repack-n2.dis" ]; then
  nice -n 19 "$LLVM/clang++" $CF -std=c++17 -mcpu=neoverse-n2 -c "$LC/ggml/src/ggml-cpu/arch/arm/repack.cpp" -o "$P/repack-n2.o"
  "$LLVM/llvm-objdump" -d --no-show-raw-insn --mattr=+dotprod,+fullfp16,+i8mm "$P/repack-n2.o" > "$P/repack-n2.dis"
fi
python3 scripts/armproj_prompt.py "$WORK/tools" "$P" "$LLVM/llvm-mca" "$WORK/results.md" "$A/perpair.json" | tee "$P/results.md"
