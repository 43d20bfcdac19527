#!/usr/bin/env python3
"""Pi 5 projection of the model-native drafters (scripts/armproj.sh, part
"drafters"), from the decode kernels' cycles of a full armproj run and the
weights of the GGUF files.

  armproj_drafters.py RESULTS.md TARGET.gguf,DRAFTER.gguf[,BENCH.jsonl] ...

For every pair: the drafter's step (the assistant with its dense 262k head
and with its sparse head) and the target's decode step on a Pi 5
(Cortex-A76, 2.4 GHz), each the larger of its compute (the weights' blocks
of 32 x llvm-mca cycles per block of the decode kernel that runs them) and
its read (bytes / BW). The target decodes on THREADS cores with its packed
kernels; the drafter steps on one core with the unpacked ones (its matrices
are not repacked: engine/model dense()). A verification pass over K+1
tokens reads the weights once and computes K+1 tokens' products: c(K+1) =
max(read, (K+1) compute) / max(read, compute), an upper bound (the
several-token tiles share weight loads). The speed-up at acceptance a is
E(a) / (c(K+1) + K d), E(a) = 1 + a + ... + a^K. BENCH.jsonl, when given,
is `geist bench --json --spec ... --oracle ...` output on this machine:
its measured d, c(K+1) and speed-ups are printed beside the projection.
Everything else on a step (norms, attention over the cache, the top-k scan
of the logits, softmax) is not counted.
"""
import json
import os
import re
import struct
import sys

GHZ = 2.4
BW = float(os.environ.get('PI5_BW', '10e9'))          # bytes/s, the Pi 5's effective decode read (4 threads)
THREADS = int(os.environ.get('PI5_THREADS', '4'))
K = int(os.environ.get('K', '3'))
ALPHAS = [0.5, 0.7, 0.9]
BYTES32 = {'Q4_0': 18.0, 'Q8_0': 34.0, 'Q6_K': 26.25, 'Q4_K': 18.0, 'Q5_K': 22.0, 'F16': 64.0, 'F32': 128.0}
TYPES = {0: 'F32', 1: 'F16', 2: 'Q4_0', 8: 'Q8_0', 12: 'Q4_K', 13: 'Q5_K', 14: 'Q6_K', 26: 'I32', 27: 'I64'}


def kernels(path):
    """A76 geist cycles per 32 weights: packed (target) and unpacked (drafter) decode kernels."""
    cyc = {}
    for line in open(path):
        p = [x.strip() for x in line.split('|')]
        if len(p) > 11 and p[1] == 'A76' and p[2] == 'geist':
            cyc.setdefault(p[4].split(' ')[0], float(p[10]))
    packed = {'Q4_0': cyc['mulQ4_0x8DP'], 'Q8_0': cyc['mulQ8_0x8DP'], 'Q4_K': cyc['mulQ4_Kx8DP'], 'Q6_K': cyc['mulQ6_Kx8DP']}
    unpacked = {'Q4_0': cyc['rowsQ4_0Q8_0DP'], 'Q8_0': cyc['rowsQ8_0Q8_0DP'], 'Q4_K': cyc['dotQ4_KQ8_KDP'], 'Q6_K': cyc['dotQ6_KQ8_KDP']}
    return packed, unpacked


def tensors(path):
    """name -> (type name, element count) of a GGUF file's tensors."""
    f = open(path, 'rb')
    d = f.read(64 << 20)
    off = 4

    def u(fmt):
        nonlocal off
        v = struct.unpack_from(fmt, d, off)
        off += struct.calcsize(fmt)
        return v[0]

    def s():
        nonlocal off
        n = u('<Q')
        v = d[off:off + n].decode('utf8', 'replace')
        off += n
        return v

    def skip(t):
        nonlocal off
        if t == 8:
            s()
        elif t == 9:
            at, n = u('<I'), u('<Q')
            for _ in range(n):
                skip(at)
        else:
            off += {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}[t]

    assert d[:4] == b'GGUF'
    u('<I')
    nt, nkv = u('<Q'), u('<Q')
    arch = None
    for _ in range(nkv):
        k = s()
        t = u('<I')
        if k == 'general.architecture':
            arch = s()
        else:
            skip(t)
    out = {}
    for _ in range(nt):
        n = s()
        nd = u('<I')
        dims = [u('<Q') for _ in range(nd)]
        t = u('<I')
        u('<Q')
        el = 1
        for x in dims:
            el *= x
        out[n] = (TYPES.get(t, str(t)), el, dims)
    return arch, out


def cost(ts, names, cyc, threads=1):
    """(seconds of compute on threads cores, bytes) of the products over the named tensors."""
    cy = by = 0.0
    for n in names:
        t, el, _ = ts[n]
        if t not in BYTES32:
            continue
        blocks = el / 32
        by += blocks * BYTES32[t]
        cy += blocks * cyc.get(t, cyc['Q4_0'] * BYTES32[t] / 18)
    return cy / (GHZ * 1e9) / threads, by


def step(c):
    return max(c[0], c[1] / BW)


def main():
    packed, unpacked = kernels(sys.argv[1])
    print('## Model-native drafters on a Pi 5: a projection\n')
    print('Cortex-A76 at %.1f GHz; the target decodes on %d cores (packed kernels), the drafter on one (unpacked); '
          'memory read %.0f GB/s; a step costs the larger of its compute and its read. K = %d drafted tokens per step. '
          'c(%d) = max(read, %d x compute) / max(read, compute) (an upper bound: several-token tiles share weight loads). '
          'Not counted: norms, attention, the top-k scan of the logits. A projection from llvm-mca cycles and bytes, '
          'not a measurement.\n' % (GHZ, THREADS, BW / 1e9, K, K + 1, K + 1))
    rows = []
    for arg in sys.argv[2:]:
        parts = arg.split(',')
        _, tt = tensors(parts[0])
        arch, dt = tensors(parts[1])
        bench = [json.loads(l) for l in open(parts[2])] if len(parts) > 2 and os.path.exists(parts[2]) else []
        # the target: every matrix but the lookup-only per-layer embedding;
        # a tied head reads token_embd
        tnames = [n for n in tt if n != 'per_layer_token_embd.weight' and len(tt[n][2]) >= 2]
        tgt = cost(tt, tnames, packed, THREADS)
        t1 = step(tgt)
        c = max(tgt[1] / BW, (K + 1) * tgt[0]) / t1
        mats = [n for n in dt if len(dt[n][2]) >= 2 and dt[n][0] in BYTES32]
        heads = []
        if arch == 'gemma4-assistant':
            body = [n for n in mats if n not in ('token_embd.weight', 'masked_embd_centroids.weight')]
            b = cost(dt, body, unpacked)
            dense = cost(dt, ['token_embd.weight'], unpacked)
            heads.append(('dense', b, dense))
            if 'masked_embd_centroids.weight' in dt:
                nc = dt['masked_embd_centroids.weight'][2][1]
                top = max(1, min(32, nc // 8))
                cen = cost(dt, ['masked_embd_centroids.weight'], unpacked)
                sparse = (cen[0] + dense[0] * top / nc, cen[1] + dense[1] * top / nc)
                heads.insert(0, ('sparse', b, sparse))
        else:
            body = [n for n in mats if n not in ('output.weight', 'fc.weight')]
            b = cost(dt, body, unpacked)
            heads.append(('', b, cost(dt, ['output.weight'], unpacked)))
        for h, b, hd in heads:
            dstep = max(b[0] + hd[0], (b[1] + hd[1]) / BW)
            d = dstep / t1
            meas = [x for x in bench if x.get('head', '') == h]
            rows.append((os.path.basename(parts[0]), arch + (' ' + h if h else ''), t1, hd, dstep, d, c, meas))
    print('| target | drafter | target step, ms | drafter head: compute / read, ms | drafter step, ms | d | c(%d) | %s | measured here (x86, 1 thread, CPU time): d, c(%d), %s |' % (
        K + 1, ' | '.join('a=%.1f' % a for a in ALPHAS), K + 1, ', '.join('a=%.1f' % a for a in ALPHAS)))
    print('|---|---|---|---|---|---|---|%s---|' % ('---|' * len(ALPHAS)))
    for tgt, name, t1, hd, ds, d, c, meas in rows:
        sp = []
        for a in ALPHAS:
            e = sum(a ** i for i in range(K + 1))
            sp.append('%.2fx' % (e / (c + K * d)))
        m = 'n/a'
        if meas:
            by = {round(x['oracle'], 2): x for x in meas}
            x0 = meas[0]
            cm = min(x['verify_cost'] for x in meas)
            m = 'd %.4f, c %.2f, %s; the Pi 5 d with this c: %s' % (
                min(x['draft_cost'] for x in meas), cm,
                ', '.join('%.2fx' % by[a].get('speedup_cpu', by[a]['speedup']) if a in by else '-' for a in ALPHAS),
                ', '.join('%.2fx' % (sum(a ** i for i in range(K + 1)) / (cm + K * d)) for a in ALPHAS))
        print('| %s | %s | %.1f | %.3f / %.3f | %.3f | %.4f | %.2f | %s | %s |' % (
            tgt, name, 1000 * t1, 1000 * hd[0], 1000 * hd[1] / BW, 1000 * ds, d, c, ' | '.join(sp), m))


if __name__ == '__main__':
    main()
