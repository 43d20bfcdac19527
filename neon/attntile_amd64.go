//go:build amd64 && !purego

package neon

//go:noescape
func attnKTAVX2(kt *float32, k *uint16, hd8 int)

//go:noescape
func attnScoresTAVX2(sc, q, kt *float32, hd int, scale float32)

//go:noescape
func attnSumFMAAVX2(out, w, v *float32, hd64, rows int)

//go:noescape
func attnScoresTAVX512(sc, q, kt *float32, hd int, scale float32)

//go:noescape
func attnSumFMAAVX512(out, w, v *float32, hd64, rows int)

//go:noescape
func maxAVX2(x *float32, n8 int) float32

//go:noescape
func f16ToF32AVX2(dst *float32, src *uint16, n8 int)

// avx2AttnTile is the avx2 set's tiled attention, vnniAttnTile the
// avx512vnni set's (its products on 512-bit registers).
var avx2AttnTile, vnniAttnTile = attnTileSet(attnScoresTAVX2, attnSumFMAAVX2), attnTileSet(attnScoresTAVX512, attnSumFMAAVX512)

func attnTileSet(scores func(sc, q, kt *float32, hd int, scale float32), sum func(out, w, v *float32, hd64, rows int)) AttnTileKernels {
	return AttnTileKernels{
		KT: func(kt []float32, k []uint16, hd int) {
			if hd%8 != 0 || hd == 0 {
				panic("neon: AttnTile.KT needs a head size that is a multiple of 8")
			}
			_, _ = kt[AttnBlock*hd-1], k[AttnBlock*hd-1]
			attnKTAVX2(&kt[0], &k[0], hd/8)
		},
		Scores: func(sc, q, kt []float32, scale float32) {
			if len(q) == 0 {
				clear(sc[:AttnBlock])
				return
			}
			_, _ = sc[AttnBlock-1], kt[len(q)*AttnBlock-1]
			scores(&sc[0], &q[0], &kt[0], len(q), scale)
		},
		Sum: func(out, w, v []float32) {
			hd := len(out)
			if hd%64 != 0 || hd == 0 {
				panic("neon: AttnTile.Sum needs a head size that is a multiple of 64")
			}
			if len(w) == 0 {
				return
			}
			_ = v[len(w)*hd-1]
			sum(&out[0], &w[0], &v[0], hd/64, len(w))
		},
		Max: func(x []float32) float32 {
			n8 := len(x) / 8
			if n8 == 0 {
				return maxF32(x)
			}
			m := maxAVX2(&x[0], n8)
			for _, v := range x[n8*8:] {
				m = max(m, v)
			}
			return m
		},
		ToF32: func(dst []float32, src []uint16) {
			if n8 := len(dst) / 8; n8 > 0 {
				_ = src[n8*8-1]
				f16ToF32AVX2(&dst[0], &src[0], n8)
			}
			f16ToF32(dst[len(dst)/8*8:], src[len(dst)/8*8:len(dst)])
		},
	}
}
