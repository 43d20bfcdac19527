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
var avx2AttnTile, vnniAttnTile = amd64AttnTile(attnScoresTAVX2, attnSumFMAAVX2), amd64AttnTile(attnScoresTAVX512, attnSumFMAAVX512)

func amd64AttnTile(scores func(sc, q, kt *float32, hd int, scale float32), sum func(out, w, v *float32, hd64, rows int)) AttnTileKernels {
	return attnAsm{kt: attnKTAVX2, scores: scores, sum: sum, max: maxAVX2, toF32: f16ToF32AVX2, scoresMul: 1, maxMul: 8}.tileSet()
}
