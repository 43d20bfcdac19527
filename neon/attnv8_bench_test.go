//go:build linux

package neon

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
)

// BenchmarkAttnValuesQ8: the value part of one key block (AttnBlock
// positions) of attention over a Q8_0 cache, for a tile of rows query
// rows: "float" dequantizes the block once and sums each row's weighted
// values in float (the tile's Sum, as attnTileQ8 does for a batch),
// "fused" is the set's SumRowsQ8_0 where it has one (decoding), "int8" is
// TransposeV8 once and SumV8 per row. cpu-ns/op is the thread's CPU time
// (robust on a loaded machine).
func BenchmarkAttnValuesQ8(b *testing.B) {
	r := rand.New(rand.NewPCG(85, 86))
	for _, hd := range []int{64, 128} {
		nb := hd / 32
		v := v8Values(r, AttnBlock, nb, nb*sizeQ8_0)
		nvt, nd := V8Size(AttnBlock, hd)
		vt, dv := make([]byte, nvt), make([]float32, nd)
		vf := make([]float32, AttnBlock*hd)
		for _, rows := range []int{4, 32} {
			w := make([]float32, rows*AttnBlock)
			for i := range rows {
				copy(w[i*AttnBlock:], v8Weights(r))
			}
			out := make([]float32, rows*hd)
			for _, k := range Available() {
				tk := k.AttnTile
				if tk == nil {
					tk = GenericAttnTile()
				}
				run := func(name string, f func()) {
					b.Run(fmt.Sprintf("%s/hd%d/rows%d/%s", k.Name, hd, rows, name), func(b *testing.B) {
						runtime.LockOSThread()
						defer runtime.UnlockOSThread()
						t0 := threadCPU()
						for b.Loop() {
							f()
						}
						b.ReportMetric(float64((threadCPU()-t0).Nanoseconds())/float64(b.N), "cpu-ns/op")
					})
				}
				run("float", func() {
					k.DequantQ8_0(vf, v)
					tk.SumRows(out, hd, w, AttnBlock, vf)
				})
				if tk.SumRowsQ8_0 != nil && k.Name != "generic" {
					run("fused", func() { tk.SumRowsQ8_0(out, hd, w, AttnBlock, v, nb*sizeQ8_0) })
				}
				run("int8", func() {
					k.TransposeV8(vt, dv, v, nb*sizeQ8_0, AttnBlock, hd)
					for i := range rows {
						k.SumV8(out[i*hd:(i+1)*hd], w[i*AttnBlock:(i+1)*AttnBlock], 0, AttnBlock, vt, dv)
					}
				})
			}
		}
	}
}
