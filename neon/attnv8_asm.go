//go:build (amd64 || arm64) && !purego

package neon

import "github.com/geisten/geist/neon/ggml"

// transposeV8Asm wraps an assembly TransposeV8 kernel of nq >= 1 whole
// quads of four rows (tab the fp16 table): the positions of a last partial
// quad and the zeros up to the group's end are written here.
func transposeV8Asm(k func(vt *byte, dv *float32, v *byte, vStride, nq, nbv int, tab *float32)) func(vt []byte, dv []float32, v []byte, vStride, n, hd int) {
	return func(vt []byte, dv []float32, v []byte, vStride, n, hd int) {
		if n < 0 || n > AttnBlock || hd%32 != 0 || hd <= 0 || vStride < 0 {
			panic("neon: TransposeV8 takes 0..AttnBlock rows of a positive multiple of 32 channels")
		}
		nbv := hd / 32
		nvt, nd := V8Size(n, hd)
		vt, dv = vt[:nvt], dv[:nd]
		if n == 0 {
			return
		}
		_ = v[(n-1)*vStride+nbv*sizeQ8_0-1]
		nq := n / 4
		if nq > 0 {
			k(&vt[0], &dv[0], &v[0], vStride, nq, nbv, &fp16Table[0])
		}
		for p := 4 * nq; p < nvt/hd; p++ {
			transposeV8Pos(vt, dv, v, vStride, n, nbv, p)
		}
	}
}

// transposeV8Pos writes position p of TransposeV8's output (zeros when p
// >= n).
func transposeV8Pos(vt []byte, dv []float32, v []byte, vStride, n, nbv, p int) {
	g, t := p/32, p%32
	for c := range nbv {
		q := vt[(g*nbv+c)*1024+t/4*128+t%4:]
		d := &dv[(g*nbv+c)*32+t]
		if p >= n {
			*d = 0
			for i := range 32 {
				q[i*4] = 0
			}
			continue
		}
		blk := v[p*vStride+c*sizeQ8_0 : p*vStride+(c+1)*sizeQ8_0]
		*d = ggml.FP16ToFP32(uint16(blk[0]) | uint16(blk[1])<<8)
		for i := range 32 {
			q[i*4] = blk[2+i]
		}
	}
}

// sumV8Asm wraps an assembly SumV8 kernel of the groups g0..g0+ng-1 over
// weights zero outside the row's keys (a copy of them on the stack).
func sumV8Asm(k func(out, w *float32, vt *byte, dv *float32, g0, ng, nbv int)) func(out, w []float32, lo, hi int, vt []byte, dv []float32) {
	return func(out, w []float32, lo, hi int, vt []byte, dv []float32) {
		hd := len(out)
		if hd%32 != 0 || lo < 0 || hi > AttnBlock {
			panic("neon: SumV8 takes a multiple of 32 channels and keys within a block")
		}
		if lo >= hi || hd == 0 {
			return
		}
		nbv := hd / 32
		g0, g1 := lo/V8Group, (hi-1)/V8Group+1
		_, _ = vt[g1*nbv*1024-1], dv[g1*nbv*32-1]
		var ws [AttnBlock]float32
		copy(ws[lo:hi], w[lo:hi])
		k(&out[0], &ws[0], &vt[0], &dv[0], g0, g1-g0, nbv)
	}
}
