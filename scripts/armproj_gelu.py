#!/usr/bin/env python3
"""The GELU part of scripts/armproj.sh: cycles per element of geist's GELUMul
and GELU (engine/model/gemma.go, Go) and of llama.cpp's ggml_vec_geglu_f32 and
ggml_vec_gelu_f32 (vec.h), from llvm-mca on each loop's executed path for one
element in (-10, 10).

  armproj_gelu.py TOOLS GL MCA

TOOLS holds the shared script's mcatool.py (its objdump parser), GL the
disassemblies geist.dis and gl-a76.dis / gl-a72.dis; the cut paths are
written there as .s files. The paths are found by what they do: the loop
(from the head of its widest backward branch back to it) through the table
lookup, for geist with the call of FP32ToFP16 and that function's paths for
a normal half spliced in at the call (the call and its return are executed,
so they are counted).
"""
import os
import re
import subprocess
import sys

sys.path.insert(0, sys.argv[1])
import mcatool  # noqa: E402  (parse, BR, target)

GL, MCA = sys.argv[2], sys.argv[3]
ITER = int(os.environ.get('ITER', '300'))
CPUS = {'A76': ('neoverse-n1', 2.4), 'A72': ('cortex-a72', 1.8)}
# instructions decoded per cycle: a floor under llvm-mca's figure, whose
# Neoverse-N1 model dispatches 8 per cycle (as the shared script does)
DECODE = {'A76': 4, 'A72': 3}
GM = 'github.com/geisten/geist/engine/model.'
F2H = 'github.com/geisten/geist/neon/ggml.FP32ToFP16'
# Gemma-3-1B: 26 layers, feed-forward width 6912
LAYERS, FFN = 26, 6912


def function(dis, sym):
    """The function's instructions (function-relative offsets) and address."""
    insns = mcatool.parse(dis, sym)
    for line in open(dis):
        m = re.match(r'^([0-9a-f]+) <(.+)>:\s*$', line)
        if m and m.group(2) == sym:
            return insns, int(m.group(1), 16)
    sys.exit('armproj: no %s in %s' % (sym, dis))


def paths(insns, base, start, to_ret):
    """Every executed path from offset start until control comes back to
    start (to_ret false) or reaches ret (to_ret true), no instruction twice."""
    at = {off: i for i, (off, _, _) in enumerate(insns)}
    out = []

    def walk(i, seq, seen):
        off, mn, ops = insns[i]
        seq = seq + [insns[i]]
        if mn == 'ret':
            if to_ret:
                out.append(seq)
            return
        nxt = [i + 1]
        if mcatool.BR.match(mn):
            t = mcatool.target(ops)
            j = at.get(t - base) if t is not None else None
            nxt = ([] if mn == 'b' else [i + 1]) + ([j] if j is not None else [])
        for j in nxt:
            if not to_ret and j == at[start]:
                out.append(seq)
            elif j < len(insns) and j not in seen:
                walk(j, seq, seen | {j})
        if len(out) > 256:
            sys.exit('armproj: too many paths')

    walk(at[start], [], {at[start]})
    return out


def head(insns, base):
    """The loop head: the target of the backward branch spanning most, not
    counting branches to the entry (Go's stack growth retries the function
    from there; the loops start after the length checks)."""
    best = None
    for off, mn, ops in insns:
        t = mcatool.target(ops) if mcatool.BR.match(mn) else None
        if t is not None and 0 < t - base <= off and (best is None or off - (t - base) > best[1] - best[0]):
            best = (t - base, off)
    if best is None:
        sys.exit('armproj: no loop')
    return best[0]


def has(seq, pat):
    return any(re.search(pat, '%s\t%s' % (mn, ops)) for _, mn, ops in seq)


def element_paths(dis, sym, must, callee=None, callee_must=None):
    """The loop's one path through the lookup (an instruction matching
    must) that calls nothing but callee; with a callee, one path per path
    of the callee to ret that matches callee_must, spliced in at the call.
    Paths through other calls (runtime panics, the stack check) are not
    element paths."""
    insns, base = function(dis, sym)
    calls = []
    if callee:
        cin, cbase = function(dis, callee)
        calls = [p for p in paths(cin, cbase, 0, True) if has(p, callee_must) and not has(p, r'^bl\t')]
        if not calls:
            sys.exit('armproj: no path of %s matches %r' % (callee, callee_must))
    want = ['0x%x' % cbase] if callee else []
    loop = [p for p in paths(insns, base, head(insns, base), False)
            if has(p, must) and [ops for _, mn, ops in p if mn == 'bl'] == want]
    if len(loop) != 1:
        sys.exit('armproj: %s: %d loop paths through %r, want 1' % (sym, len(loop), must))
    p = loop[0]
    if not callee:
        return [p]
    k = next(i for i, (_, mn, _) in enumerate(p) if mn == 'bl')
    return [p[:k + 1] + c + p[k + 1:] for c in calls]


def mca(seq, name, cpu):
    """Cycles per iteration of seq (branch targets pointed at the top,
    which llvm-mca only needs to parse). A call is given to llvm-mca as an
    unconditional branch: it models bl as 100 cycles of latency, which
    would hold up retirement, while a direct call costs the core what a
    taken branch does (and the link register write)."""
    lines = ['.Lloop:']
    for _, mn, ops in seq:
        if mn == 'bl':
            mn = 'b'
        if mcatool.BR.match(mn):
            parts = ops.split(',')
            parts[-1] = (' ' if len(parts) > 1 else '') + '.Lloop'
            ops = ','.join(parts)
        lines.append('\t%s\t%s' % (mn, ops) if ops else '\t' + mn)
    path = os.path.join(GL, name + '.s')
    open(path, 'w').write('\n'.join(lines) + '\n')
    out = subprocess.run([MCA, '-mtriple=aarch64', '-mcpu=' + CPUS[cpu][0], '-mattr=+dotprod,+fullfp16',
                          '-iterations=%d' % ITER, path], capture_output=True, text=True, check=True).stdout
    it = int(re.search(r'^Iterations:\s+(\d+)', out, re.M).group(1))
    return int(re.search(r'^Total Cycles:\s+(\d+)', out, re.M).group(1)) / it


# (kernel, engine, function, disassembly, symbol, lookup, callee, callee's paths)
# geist's callee paths are FP32ToFP16's for a normal half (the exponent
# shifted into place): rounded down, rounded up, or a tie. Half the inputs
# round each way, so the shortest and the longest path are averaged.
ROWS = [
    ('geglu', 'geist', 'GELUMul', 'geist.dis', GM + 'GELUMul', r'^ldrh\t', F2H, r'lsl #10$'),
    ('geglu', 'llama.cpp', 'ggml_vec_geglu_f32', 'gl-%s.dis', '_Z8gl_gegluiPfPKfS1_', r'^fcvt\ts\d+, h\d+$', None, None),
    ('gelu', 'geist', 'GELU', 'geist.dis', GM + 'GELU', r'^ldrh\t', F2H, r'lsl #10$'),
    ('gelu', 'llama.cpp', 'ggml_vec_gelu_f32', 'gl-%s.dis', '_Z7gl_geluiPfPKf', r'^fcvt\ts\d+, h\d+$', None, None),
]


def main():
    print('## GELU: per element of the GELU-gated feed-forward (Gemma)\n')
    print('geist at %s; llama.cpp from %s.\n' % (os.environ.get('GEIST_AT', '?'), os.environ.get('LLAMA_AT', '?')))
    print('%d llvm-mca iterations of the executed path of one element in (-10, 10); A76 = `-mcpu=neoverse-n1` '
          'at 2.4 GHz, A72 = `-mcpu=cortex-a72` at 1.8 GHz. geist: Go code, the call of FP32ToFP16 and its '
          'return included, its paths for a value rounded down and up averaged; llama.cpp: vec.h\'s table loops '
          'compiled with clang. cycles/element is at least insns/element over the decode width (4 on the A76, 3 on the A72). Not counted: branch mispredictions (geist\'s rounding branch goes either way at '
          'random), cache misses (the tables are 128 KiB and 256 KiB).\n' % ITER)
    print('| CPU | kernel | engine | function | paths | insns/element | llvm-mca cycles | cycles/element |')
    print('|---|---|---|---|---|---|---|---|')
    res = {}
    for cpu in CPUS:
        for kern, eng, fn, dis, sym, must, callee, cmust in ROWS:
            d = os.path.join(GL, dis % cpu.lower() if '%s' in dis else dis)
            seqs = element_paths(d, sym, must, callee, cmust)
            mc = [mca(q, '%s_%s_%s_%d' % (cpu.lower(), kern, eng.split('.')[0], i), cpu) for i, q in enumerate(seqs)]
            cy = [max(c, len(q) / DECODE[cpu]) for c, q in zip(mc, seqs)]
            res[(cpu, kern, eng)] = (min(cy) + max(cy)) / 2
            n = sorted(len(q) for q in seqs)
            lo, hi = '%.1f' % min(cy), '%.1f' % max(cy)
            print('| %s | %s | %s | %s | %d | %s | %s | %.1f%s%s |' % (
                cpu, kern, eng, fn, len(seqs), n[0] if n[0] == n[-1] else '%d-%d' % (n[0], n[-1]),
                '/'.join(sorted(set('%.1f' % c for c in mc))), res[(cpu, kern, eng)],
                '' if lo == hi else ' (%s-%s)' % (lo, hi),
                ' (decode binds)' if any(c > m for c, m in zip(cy, mc)) else ''))
    print('\n| CPU | kernel | geist cycles/element | llama.cpp | geist / llama.cpp | '
          'per token, Gemma-3-1B (%d x %d), geist / llama.cpp |' % (LAYERS, FFN))
    print('|---|---|---|---|---|---|')
    for cpu, (_, ghz) in CPUS.items():
        for kern in ('geglu', 'gelu'):
            g, l = res[(cpu, kern, 'geist')], res[(cpu, kern, 'llama.cpp')]
            us = lambda c: LAYERS * FFN * c / ghz / 1e3
            print('| %s | %s | %.1f | %.1f | %.2f | %.0f / %.0f us |' % (cpu, kern, g, l, g / l, us(g), us(l)))


if __name__ == '__main__':
    main()
