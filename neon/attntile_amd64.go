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
func attnScoresT4AVX512(sc, q, kt *float32, hd int, scale float32)

//go:noescape
func attnSumFMA4AVX512(out, w, v *float32, hd64, rows int)

//go:noescape
func attnSumF16AVX512(out, w *float32, v *uint16, hd64, rows int)

//go:noescape
func attnSumF16x4AVX512(out, w *float32, v *uint16, hd64, rows int)

//go:noescape
func sumQ8AVX512(out, w *float32, v *byte, hd64, rows, vStride int, tab *float32)

//go:noescape
func sumQ8x4AVX512(out, w *float32, v *byte, hd64, rows, vStride int, tab *float32)

//go:noescape
func expSumAVX2(x *float32, n8 int, m float32) (s0, s1, s2, s3 float64)

//go:noescape
func expSumAVX512(x *float32, n8 int, m float32) (s0, s1, s2, s3 float64)

//go:noescape
func maxAVX2(x *float32, n8 int) float32

//go:noescape
func f16ToF32AVX2(dst *float32, src *uint16, n8 int)

// avx2AttnTile is the avx2 set's tiled attention, vnniAttnTile the
// avx512vnni set's (its products on 512-bit registers, four rows scored
// and summed at once: sixteen independent sums for both FMA pipes).
var avx2AttnTile = attnAsm{kt: attnKTAVX2, scores: attnScoresTAVX2, sum: attnSumFMAAVX2, max: maxAVX2, toF32: f16ToF32AVX2,
	scoresMul: 1, maxMul: 8, expSum: expSumAVX2}.tileSet()

var vnniAttnTile = attnAsm{kt: attnKTAVX2, scores: attnScoresTAVX512, sum: attnSumFMAAVX512, max: maxAVX2, toF32: f16ToF32AVX2,
	scoresMul: 1, maxMul: 8, expSum: expSumAVX512,
	scoresN: attnScoresT4AVX512, sumN: attnSumFMA4AVX512, rowsN: 4,
	sumF16: attnSumF16AVX512, sumF16N: attnSumF16x4AVX512, sumQ8: sumQ8AVX512, sumQ8N: sumQ8x4AVX512}.tileSet()
