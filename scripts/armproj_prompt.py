#!/usr/bin/env python3
"""The prompt (tile) kernels of scripts/armproj.sh (issue 38).

  armproj_prompt.py TOOLS DIR LLVM_MCA RESULTS ATTN_JSON

DIR holds geist.dis (geist's kernels, cross-built from this tree),
repack-a76.dis (llama.cpp's repack.cpp for -mcpu=cortex-a76: dotprod),
repack-n2.dis (for -mcpu=neoverse-n2: dotprod and i8mm) and the llama.cpp
A72 loops of the full run (k/ of $WORK). Prints the per-kernel table
(cycles per 32 weights per token inside the tile), the Llama-3.2-1B prompt
projection for a Pi 5, a Pi 4 and a Jetson Orin Nano, the Home Assistant
turn table and the one-line summary. Every figure is a throughput bound
from llvm-mca's models (no cache misses, no memory latency, no call
overhead); the assumptions are printed with the tables.
"""
import json
import os
import re
import subprocess
import sys

TOOLS, D, MCA, RES, ATTN = sys.argv[1:6]
sys.path.insert(0, TOOLS)
import mcatool  # noqa: E402  (the loop cutter of the shared script)

ITER = int(os.environ.get('ITER', '300'))
G = 'github.com/geisten/geist/neon.'
# weight-token multiply-adds per instruction: SDOT by element or vector
# (4 lanes x 4 bytes), SMMLA (2x8 by 8x2), and the ARMv8.0 8-bit widening
# products (8 lanes; only those with 16-bit results are weight products:
# the 16-bit by element ones of the K-quant mins are not)
MACS = {'sdot': 16, 'udot': 16, 'smmla': 32}
WIDEN = re.compile(r'^(smull2?|smlal2?)\s+v\d+\.8h,')


def loops(dis, sym):
    ins = mcatool.parse(dis, sym)
    base = None
    for line in open(dis):
        m = re.match(r'^([0-9a-f]+) <(.+)>:\s*$', line)
        if m and m.group(2) == sym:
            base = int(m.group(1), 16)
            break
    at = {off: i for i, (off, _, _) in enumerate(ins)}
    out = []
    for i, (off, mn, ops) in enumerate(ins):
        if mcatool.BR.match(mn):
            t = mcatool.target(ops)
            if t is not None and 0 <= t - base <= off and t - base in at:
                out.append((at[t - base], i))
    return ins, out


def macs(seq, kmins=False):
    n = 0
    for _, mn, ops in seq:
        n += MACS.get(mn, 0)
        if WIDEN.match(mn + ' ' + ops):
            n += 8
    # geist's Q4_K mins: per column and half four SDOTs of mins (by the
    # activations' sub-block sums split into two int8 digits), not of
    # weights, all into v13
    if kmins:
        n -= MACS['sdot'] * sum(1 for _, mn, ops in seq if mn == 'sdot' and ops.startswith('v13.4s'))
    return n


def write(seq, path):
    open(path, 'w').write('.Lloop:\n' + '\n'.join(mcatool.fmt(mn, ops, 0) for _, mn, ops in seq) + '\n')


def tile_loop(dis, sym, out, nth=0, kmins=False, last=False):
    """The innermost loop of sym with the most weight products (the widest
    tile; nth > 0: the nth widest), written to out; returns its MACs. On a
    tie the first one, or with last the last one (mulQ4_0x8DP's tile of
    eight columns by four rows, which it runs from eight columns on, comes
    after its tile of four columns by eight rows and has as many products
    per iteration)."""
    ins, ls = loops(dis, sym)
    inner = [(j, i) for (j, i) in ls if not any((j2, i2) != (j, i) and j <= j2 and i2 <= i for (j2, i2) in ls)]
    inner.sort(key=lambda l: (-macs(ins[l[0]:l[1] + 1], kmins), -l[0] if last else l[0]))
    j, i = inner[nth]
    seq = ins[j:i + 1]
    write(seq, out)
    return macs(seq, kmins), len(seq)


def nest(dis, sym, out_in, out_rest, trips):
    """A loop nest: the innermost loop with the most products and what its
    enclosing loop runs besides it; the pair stands for one outer iteration
    with the inner loop run `trips` times (their cycles are added: no
    overlap between the two is counted)."""
    ins, ls = loops(dis, sym)
    encl = lambda l: [o for o in ls if o != l and o[0] <= l[0] and l[1] <= o[1]]
    inner = max((l for l in ls if encl(l)), key=lambda l: (macs(ins[l[0]:l[1] + 1]), -(l[1] - l[0])))
    outer = min(encl(inner), key=lambda l: l[1] - l[0])
    write(ins[inner[0]:inner[1] + 1], out_in)
    write(ins[outer[0]:inner[0]] + ins[inner[1] + 1:outer[1] + 1], out_rest)
    return macs(ins[inner[0]:inner[1] + 1]) * trips


def mca(path, mcpu):
    out = subprocess.run([MCA, '-mtriple=aarch64', '-mcpu=' + mcpu, '-mattr=+dotprod,+fullfp16,+i8mm',
                          '-iterations=%d' % ITER, path], capture_output=True, text=True, check=True).stdout
    it = int(re.search(r'^Iterations:\s+(\d+)', out, re.M).group(1))
    n = int(re.search(r'^Instructions:\s+(\d+)', out, re.M).group(1)) // it
    return int(re.search(r'^Total Cycles:\s+(\d+)', out, re.M).group(1)) / it, n


# models: llvm-19 schedules -mcpu=cortex-a76 and -mcpu=cortex-a78 with the
# Cortex-A57 model; the Neoverse N1 (the A76's server twin, same pipes as
# the A78: two 128-bit ASIMD pipes, SDOT on both) has its own model and
# stands in for both. decode: instructions the core decodes per cycle (the
# model does not bound it; checked as a floor).
CORE = {'A76': ('neoverse-n1', 4), 'A72': ('cortex-a72', 3), 'N2': ('neoverse-n2', 5)}
K = os.path.join(D, 'k')
os.makedirs(K, exist_ok=True)
rows = []  # (core, engine, fmt, kernel, file(s), macs/iter)


def add(core, eng, fmt, name, files, m):
    rows.append((core, eng, fmt, name, files, m))


# geist: the widest tile of each packed dotprod kernel (A76), the
# multi-column loops of the ARMv8.0 kernels (A72: the row-group kernels
# take a block of eight rows once for all the columns, in an outer loop
# whose cost is spread over NCOL columns; the K-quant dots one row and
# one column at a time)
NCOL = 64
for fmt, sym in (('Q4_0', 'mulQ4_0x8DP'), ('Q8_0', 'mulQ8_0x8DP'), ('Q4_K', 'mulQ4_Kx8DP'), ('Q6_K', 'mulQ6_Kx8DP')):
    f = os.path.join(K, 'g_tile_' + sym + '.s')
    m, n = tile_loop(os.path.join(D, 'geist.dis'), G + sym + '.abi0', f, kmins=sym == 'mulQ4_Kx8DP', last=True)
    add('A76', 'geist', fmt, '%s widest tile (%d x 32 weight-tokens)' % (sym, m // 32), [(f, 1)], m)
for fmt, sym in (('Q4_0', 'rowsQ4_0Q8_0NE'), ('Q8_0', 'rowsQ8_0Q8_0NE')):
    fi, fr = os.path.join(K, 'g_tile_' + sym + '.s'), os.path.join(K, 'g_tile_' + sym + '_rest.s')
    m = nest(os.path.join(D, 'geist.dis'), G + sym + '.abi0', fi, fr, 1)
    add('A72', 'geist', fmt, '%s column loop (8 rows x 1 block) + block loop / %d columns' % (sym, NCOL), [(fi, 1), (fr, 1 / NCOL)], m)
for fmt, sym in (('Q4_K', 'dotQ4_KQ8_KNE'), ('Q6_K', 'dotQ6_KQ8_KNE')):
    f = os.path.join(K, 'g_tile_' + sym + '.s')
    m, n = tile_loop(os.path.join(D, 'geist.dis'), G + sym + '.abi0', f)
    add('A72', 'geist', fmt, '%s (1 row x 1 super-block x 1 column)' % sym, [(f, 1)], m)

# llama.cpp: the gemm kernels it runs for prompts on a Pi 5 (dotprod, no
# i8mm: q4_0_4x4, q8_0_4x4, q4_K_8x4, q6_K_8x4, ggml-cpu/repack.cpp's
# choice) and with i8mm (4x8, 8x8; compiled for the Neoverse N2, a core
# that has it). On the A72 (no dotprod) llama.cpp does not repack and runs
# its vec_dot loops (the full run's k/ files) per row and column.
RA, RN = os.path.join(D, 'repack-a76.dis'), os.path.join(D, 'repack-n2.dis')
for fmt, sym, core, dis in (('Q4_0', 'ggml_gemm_q4_0_4x4_q8_0', 'A76', RA), ('Q8_0', 'ggml_gemm_q8_0_4x4_q8_0', 'A76', RA),
                            ('Q4_0', 'ggml_gemm_q4_0_4x8_q8_0', 'N2', RN), ('Q8_0', 'ggml_gemm_q8_0_4x8_q8_0', 'N2', RN),
                            ('Q4_K', 'ggml_gemm_q4_K_8x8_q8_K', 'N2', RN), ('Q6_K', 'ggml_gemm_q6_K_8x8_q8_K', 'N2', RN)):
    f = os.path.join(K, 'l_%s_%s.s' % (core, sym))
    m, n = tile_loop(dis, sym, f)
    note = '' if fmt in ('Q4_0', 'Q8_0') else '; inner loop only: optimistic'
    add(core, 'llama', fmt, '%s innermost loop (%d x 32)%s' % (sym[5:], m // 32, note), [(f, 1)], m)
# q4_K_8x4: one super-block of eight rows and four columns (its sub-block
# loop run 4 times) with the float steps around it
fi, fr = os.path.join(K, 'l_q4K84_in.s'), os.path.join(K, 'l_q4K84_rest.s')
m = nest(RA, 'ggml_gemm_q4_K_8x4_q8_K', fi, fr, 4)
add('A76', 'llama', 'Q4_K', 'gemm_q4_K_8x4 (8 rows x 4 columns x 1 super-block)', [(fi, 4), (fr, 1)], m)
# q6_K_8x4: rotated loops; its sub-block loop (8 per super-block of eight
# rows and four columns) plus the per-super-block float loop once
ins, ls = loops(RA, 'ggml_gemm_q6_K_8x4_q8_K')
sd = [l for l in ls if macs(ins[l[0]:l[1] + 1]) > 0]
fl = [l for l in ls if macs(ins[l[0]:l[1] + 1]) == 0 and any(mn == 'scvtf' for _, mn, _ in ins[l[0]:l[1] + 1])]
fi, fr = os.path.join(K, 'l_q6K84_in.s'), os.path.join(K, 'l_q6K84_rest.s')
li = min(sd, key=lambda l: l[1] - l[0])
write(ins[li[0]:li[1] + 1], fi)
lf = max(fl, key=lambda l: sum(1 for _, mn, _ in ins[l[0]:l[1] + 1] if mn == 'scvtf'))
write(ins[lf[0]:lf[1] + 1], fr)
add('A76', 'llama', 'Q6_K', 'gemm_q6_K_8x4 (8 sub-block steps + float steps, approx.)', [(fi, 8), (fr, 1)], macs(ins[li[0]:li[1] + 1]) * 8)
WK = os.path.join(os.path.dirname(D), 'k')
for fmt, f, w in (('Q4_0', 'llama_a72_vec_dot_q4_0', 64), ('Q8_0', 'llama_a72_vec_dot_q8_0', 64),
                  ('Q4_K', 'llama_a72_vec_dot_q4_K', 256), ('Q6_K', 'llama_a72_vec_dot_q6_K', 256)):
    add('A72', 'llama', fmt, 'vec_dot_%s (armv8.0, no repack)' % fmt.lower(), [(os.path.join(WK, f + '.s'), 1)], w)

print('## Prompt (tile) kernels: cycles per 32 weights per token inside the tile\n')
print('geist at %s; llama.cpp from %s.\n' % (os.environ.get('GEIST_AT', '?'), os.environ.get('LLAMA_AT', '?')))
print('%d llvm-mca iterations. A76 (and A78) = `-mcpu=neoverse-n1`, A72 = `-mcpu=cortex-a72`, N2 = `-mcpu=neoverse-n2` '
      '(i8mm; none of the boards has it: the Pi 5\'s A76 and the Orin\'s A78AE are Armv8.2 with dotprod only). '
      'Weight-token products per iteration are counted from the loop itself (SDOT 16, SMMLA 32, 8-bit widening '
      'SMULL/SMLAL 8). The SDOT bound of an A76/A78 is 1.0 cycle per 32 (two SDOTs a cycle); the A72 has no SDOT '
      '(its bound with SMULL/SMLAL on its one multiply pipe: 4 cycles per 32). Not counted: setup and stores '
      'outside the loops, cache misses, the activations\' quantization.\n' % ITER)
print('| core | engine | fmt | loop | weight-tokens/iter | cycles/iter | insns/iter | decode floor | cycles/32 | of SDOT bound |')
print('|---|---|---|---|---|---|---|---|---|---|')
c32 = {}
for core, eng, fmt, name, files, m in rows:
    cy, ni = 0.0, 0.0
    for f, k in files:
        c, n = mca(f, CORE[core][0])
        cy += c * k
        ni += n * k
    floor = ni / CORE[core][1]
    ce = max(cy, floor)
    v = ce * 32 / m
    c32[(core, eng, fmt)] = v
    print('| %s | %s | %s | %s | %d | %.1f | %.0f | %.1f%s | %.2f | %s |' % (
        core, eng, fmt, name, m, cy, ni, floor, ' (binds)' if floor > cy else '', v,
        '%.0f%%' % (100 / v) if core != 'A72' else '(%.0f%% of SMULL bound)' % (400 / v)))

# the Llama-3.2-1B shape: 16 layers of q 2048x2048, k, v 2048x512, o
# 2048x2048, gate, up 2048x8192, down 8192x2048; Q4_K_M (llama.cpp's
# rules: attn_v and ffn_down Q6_K in the 8 layers of use_more_bits, layers
# 0, 1, 4, 7, 10, 13, 14, 15; the rest Q4_K; the tied head Q6_K) and Q4_0
# (all Q4_0, head Q6_K). The head runs for the last token of a prompt only.
PER = 2048 * 2048 * 2 + 2048 * 512 * 2 + 2048 * 8192 * 3
Q6L = (2048 * 512 + 8192 * 2048) * 8
MIX = {'Q4_K_M': {'Q4_K': 16 * PER - Q6L, 'Q6_K': Q6L}, 'Q4_0': {'Q4_0': 16 * PER}}
HEAD = 2048 * 128256
attn = json.load(open(ATTN)) if os.path.exists(ATTN) else {}
# decode loops of the full run for the head (one column)
dec = {}
if os.path.exists(RES):
    for line in open(RES):
        p = [x.strip() for x in line.split('|')]
        if len(p) > 11 and p[1] in ('A72', 'A76') and p[2] in ('geist', 'llama'):
            dec.setdefault((p[1], p[2], p[3]), float(p[10]))
BOARDS = [('Pi 5', 'A76', 2.4, 4), ('Pi 4', 'A72', 1.8, 4), ('Orin Nano', 'A76', 1.5, 6)]


def weights_s(core, eng, mix, n, ghz):
    t = sum(w * n * c32[(core, eng, f)] for f, w in MIX[mix].items()) / 32
    t += HEAD * dec.get((core, eng, 'Q6_K'), c32[(core, eng, 'Q6_K')]) / 32
    return t / (ghz * 1e9)


def attn_s(core, eng, p0, n, ghz):
    pairs = n * p0 + n * (n + 1) // 2
    key = {'geist': 'geist', 'geist-hv': 'geist_hv', 'geist-h': 'geist_h', 'geist-q8': 'geist_q8i', 'llama': 'tiled'}[eng]
    return pairs * 32 * 16 * attn.get(core, {}).get(key, 0) / (ghz * 1e9)


def blend(core, eng, mix):
    tot = sum(MIX[mix].values())
    return sum(w * c32[(core, eng, f)] for f, w in MIX[mix].items()) / tot


print('\n## Llama-3.2-1B shape: prompt rate and the Home Assistant turn\n')
print('Weights: 0.973 G multiply-adds a token (16 layers), %s; the Q6_K head (0.263 G) for the last token only, '
      'with the decode loops of the first table. Attention: the F16 cache (geist and llama.cpp) or the Q8_0 cache with integer scores and value sums (geist), the per (row, key) cycles of the attention '
      'table x 32 heads x 16 layers (llama.cpp: its tiled path). Boards: Pi 5 = 4 x A76 at 2.4 GHz, Pi 4 = 4 x A72 '
      'at 1.8 GHz, Jetson Orin Nano = 6 x A78AE at 1.5 GHz (projected with the A76/N1 figures: same ASIMD pipes); '
      'the cores scale perfectly (no hand-offs, no memory stalls: a tile reuses each weight load across its tokens, '
      'so prompts are compute-bound). Not counted on either side: norms, RoPE, softmax, activations\' quantization, '
      'sampling. The prompt rate is a 512-token prompt from an empty cache.\n'
      % ', '.join('%s %.0f%%' % (f, 100.0 * w / sum(MIX['Q4_K_M'].values())) for f, w in MIX['Q4_K_M'].items()))
print('| board | file | engine | cycles/32 (weights, blended) | of SDOT bound | 512-token prompt tok/s | cold turn 4,900 tok s | GetLiveContext call 2,000 at 4,900 s | call: weights / attention s |')
print('|---|---|---|---|---|---|---|---|---|')
summ = {}
LABEL = {'geist': 'geist, F16 cache', 'geist-hv': 'geist, F16 cache, half value sums (default on FP16 cores)',
         'geist-h': 'geist, F16 cache, half scores and value sums (GEIST_ATTN_F16=all)',
         'geist-q8': 'geist, Q8_0 cache (int8 attention)'}
for board, core, ghz, cores in BOARDS:
    for mix in ('Q4_K_M', 'Q4_0'):
        for eng in ('geist', 'geist-hv', 'geist-h', 'geist-q8', 'llama'):
            if eng.startswith('geist-') and {'geist-q8': 'geist_q8i', 'geist-hv': 'geist_hv', 'geist-h': 'geist_h'}[eng] not in attn.get(core, {}):
                continue
            we = 'geist' if eng.startswith('geist-') else eng  # the same weights
            b = blend(core, we, mix)
            tot = lambda p0, n: (weights_s(core, we, mix, n, ghz) + attn_s(core, eng, p0, n, ghz)) / cores
            pp = 512 / tot(0, 512)
            cold, call = tot(0, 4900), tot(4900, 2000)
            cw, ca = weights_s(core, we, mix, 2000, ghz) / cores, attn_s(core, eng, 4900, 2000, ghz) / cores
            frac = 1.0 / b if core != 'A72' else float('nan')
            print('| %s | %s | %s | %.2f | %s | %.0f | %.1f | %.1f | %.1f / %.1f |' % (
                board, mix, LABEL.get(eng, 'llama.cpp, F16 cache'), b, '%.0f%%' % (100 * frac) if core != 'A72' else 'n/a',
                pp, cold, call, cw, ca))
            if board == 'Pi 5' and mix == 'Q4_K_M':
                summ[eng] = (pp, frac, call, cold)
print('\nllama.cpp measured on a Pi 5 (its README\'s pp512 on Llama-3.2-1B Q4_K_M, as the issue quotes): 72.9 tok/s; '
      'its projection above is the same bound as geist\'s, not a measurement.')
# geist's figures: its fastest attention for the call among those within
# llama.cpp's tolerance on every zoo file (the F16 cache with half value
# sums, the default on a Pi 5's cores, or the Q8_0 cache with integer
# attention; not the half scores, which are selectable only; the F16 cache
# in float32, the A72's path, is in the table above)
gk = min((e for e in ('geist-hv', 'geist-q8', 'geist') if e in summ), key=lambda e: summ[e][2])
print('\narmproj summary figures for geist: %s (F16 cache in float32: prompt %.1f tok/s, call %.2f s, cold %.2f s)'
      % (LABEL[gk], summ['geist'][0], summ['geist'][2], summ['geist'][3]))
g, l = summ[gk], summ['llama']
print('\narmproj summary: pi5_prompt_tok_s=%.1f pi5_sdot_bound_fraction=%.3f pi5_ha_call_s=%.2f pi5_ha_cold_s=%.2f llamacpp_pi5_prompt_tok_s=%.1f'
      % (g[0], g[1], g[2], g[3], l[0]))
