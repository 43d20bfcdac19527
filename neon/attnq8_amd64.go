//go:build amd64 && !purego

package neon

// dequantQ8_0AVX2 dequantizes nb >= 1 Q8_0 blocks (dequant_amd64.s).
//
//go:noescape
func dequantQ8_0AVX2(dst *float32, src *byte, nb int)

var dequantQ8_0avx2 = dequantAsm(dequantQ8_0AVX2)

// scoresQ8_0AVX2 scores ng groups of eight keys (attnq8_amd64.s).
//
//go:noescape
func scoresQ8_0AVX2(sc *float32, k *byte, kStride int, q *byte, qStride, nb, ng, nq int, scale float32, dk, tab *float32)

func scoresQ8_0avx2(sc []float32, k []byte, kStride int, q []byte, qStride, nb, nk, nq int, scale float32) {
	ng := scoresGroups(sc, k, kStride, q, qStride, nb, nk, nq, 8)
	if ng > 0 {
		var dk [maxScoreBlocks * 8]float32
		scoresQ8_0AVX2(&sc[0], &k[0], kStride, &q[0], qStride, nb, ng, nq, scale, &dk[0], &fp16Table[0])
	}
	scoresTail(dotQ8_0Q8_0avx2, sc, k, kStride, q, qStride, nb, 8*ng, nk, nq, scale)
}

// scoresQ8_0VNNI scores ng groups of eight keys against nq <= vnniRows
// rows (attnq8_amd64.s).
//
//go:noescape
func scoresQ8_0VNNI(sc *float32, k *byte, kStride int, q *byte, qStride, nb, ng, nq int, scale float32, scratch, tab *float32)

// vnniScoreRows is the most query rows per scoresQ8_0VNNI call (the
// scratch holds their blocks' sums and scales).
const vnniScoreRows = 64

func scoresQ8_0vnni(sc []float32, k []byte, kStride int, q []byte, qStride, nb, nk, nq int, scale float32) {
	ng := scoresGroups(sc, k, kStride, q, qStride, nb, nk, nq, 8)
	if ng > 0 {
		var scratch [16 + 2*vnniScoreRows*maxScoreBlocks]float32
		for r := 0; r < nq; r += vnniScoreRows {
			n := min(vnniScoreRows, nq-r)
			scoresQ8_0VNNI(&sc[r*AttnBlock], &k[0], kStride, &q[r*qStride], qStride, nb, ng, n, scale, &scratch[0], &fp16Table[0])
		}
	}
	scoresTail(dotQ8_0Q8_0avx2, sc, k, kStride, q, qStride, nb, 8*ng, nk, nq, scale)
}
