//go:build (amd64 || arm64) && !purego

package neon

// attnAsm are a set's assembly kernels for tiled attention: kt and sum as
// AttnTileKernels' KT and Sum (hd8 = hd/8, hd64 = hd/64, rows > 0),
// scores as Scores for head sizes that are positive multiples of
// scoresMul, max the largest of a positive multiple of maxMul values,
// toF32 8*n8 conversions. scoresN and sumN, when the set has them, are
// scores and sum for rowsN rows at once (q, sc, out rows one after the
// other, w rows AttnBlock apart); expSum, when it has it, is ExpSum for
// 8*n8 values returning sumF64's four running sums.
type attnAsm struct {
	kt                func(kt *float32, k *uint16, hd8 int)
	scores            func(sc, q, kt *float32, hd int, scale float32)
	sum               func(out, w, v *float32, hd64, rows int)
	max               func(x *float32, n int) float32
	toF32             func(dst *float32, src *uint16, n8 int)
	scoresMul, maxMul int
	scoresN           func(sc, q, kt *float32, hd int, scale float32)
	sumN              func(out, w, v *float32, hd64, rows int)
	rowsN             int
	expSum            func(x *float32, n8 int, m float32) (s0, s1, s2, s3 float64)
	// sumF16 and sumF16N, when the set has them, are sum and sumN over
	// F16 values (SumRowsF16).
	sumF16, sumF16N func(out, w *float32, v *uint16, hd64, rows int)
	// sumQ8 and sumQ8N, when the set has them, are sum and sumN over the
	// values of a Q8_0 cache (SumRowsQ8_0; tab the fp16 table).
	sumQ8, sumQ8N func(out, w *float32, v *byte, hd64, rows, vStride int, tab *float32)
}

// tileSet wraps the kernels with the length checks (a short buffer panics
// like an index out of range) and does the lengths they do not take in Go.
func (k attnAsm) tileSet() AttnTileKernels {
	t := k.kernels()
	t.ScoresRows, t.SumRows, t.ExpSum = scoresRows(t.Scores), sumRows(t.Sum), expSubThenSum
	if k.scoresN != nil {
		one := t.ScoresRows
		t.ScoresRows = func(sc, q []float32, hd int, kt []float32, scale float32) {
			r, n := 0, len(q)/hd
			if hd%k.scoresMul == 0 {
				_ = kt[hd*AttnBlock-1]
				for ; r+k.rowsN <= n; r += k.rowsN {
					_, _ = sc[(r+k.rowsN)*AttnBlock-1], q[(r+k.rowsN)*hd-1]
					k.scoresN(&sc[r*AttnBlock], &q[r*hd], &kt[0], hd, scale)
				}
			}
			one(sc[r*AttnBlock:], q[r*hd:n*hd], hd, kt, scale)
		}
	}
	if k.sumN != nil {
		one := t.SumRows
		t.SumRows = func(out []float32, hd int, w []float32, n int, v []float32) {
			r, nr := 0, len(out)/hd
			if hd%64 == 0 && n > 0 {
				_ = v[n*hd-1]
				for ; r+k.rowsN <= nr; r += k.rowsN {
					_, _ = out[(r+k.rowsN)*hd-1], w[(r+k.rowsN-1)*AttnBlock+n-1]
					k.sumN(&out[r*hd], &w[r*AttnBlock], &v[0], hd/64, n)
				}
			}
			if r < nr {
				one(out[r*hd:nr*hd], hd, w[r*AttnBlock:], n, v)
			}
		}
	}
	if k.sumF16 != nil {
		t.SumRowsF16 = func(out []float32, hd int, w []float32, n int, v []uint16) {
			if hd%64 != 0 || hd == 0 {
				panic("neon: AttnTile.SumRowsF16 needs a head size that is a multiple of 64")
			}
			if n == 0 {
				return
			}
			_ = v[n*hd-1]
			r, nr := 0, len(out)/hd
			if k.sumF16N != nil {
				for ; r+k.rowsN <= nr; r += k.rowsN {
					_, _ = out[(r+k.rowsN)*hd-1], w[(r+k.rowsN-1)*AttnBlock+n-1]
					k.sumF16N(&out[r*hd], &w[r*AttnBlock], &v[0], hd/64, n)
				}
			}
			for ; r < nr; r++ {
				_, _ = out[(r+1)*hd-1], w[r*AttnBlock+n-1]
				k.sumF16(&out[r*hd], &w[r*AttnBlock], &v[0], hd/64, n)
			}
		}
	}
	if k.sumQ8 != nil {
		t.SumRowsQ8_0 = func(out []float32, hd int, w []float32, n int, v []byte, vStride int) {
			if hd%64 != 0 || hd == 0 {
				panic("neon: AttnTile.SumRowsQ8_0 needs a head size that is a multiple of 64")
			}
			if n == 0 {
				return
			}
			_ = v[(n-1)*vStride+hd/32*sizeQ8_0-1]
			r, nr := 0, len(out)/hd
			if k.sumQ8N != nil {
				for ; r+k.rowsN <= nr; r += k.rowsN {
					_, _ = out[(r+k.rowsN)*hd-1], w[(r+k.rowsN-1)*AttnBlock+n-1]
					k.sumQ8N(&out[r*hd], &w[r*AttnBlock], &v[0], hd/64, n, vStride, &fp16Table[0])
				}
			}
			for ; r < nr; r++ {
				_, _ = out[(r+1)*hd-1], w[r*AttnBlock+n-1]
				k.sumQ8(&out[r*hd], &w[r*AttnBlock], &v[0], hd/64, n, vStride, &fp16Table[0])
			}
		}
	}
	if k.expSum != nil {
		t.ExpSum = func(x []float32, m float32) float64 {
			var s [4]float64
			n8 := len(x) / 8
			if n8 > 0 {
				s[0], s[1], s[2], s[3] = k.expSum(&x[0], n8, m)
				if 8*n8 == len(x) { // a whole block: no tail
					return (s[0] + s[1]) + (s[2] + s[3])
				}
			}
			expSub(x[8*n8:], m)
			return sumF64From(&s, x[8*n8:])
		}
	}
	return t
}

// kernels wraps the one-row kernels.
func (k attnAsm) kernels() AttnTileKernels {
	return AttnTileKernels{
		KT: func(kt []float32, kc []uint16, hd int) {
			if hd%8 != 0 || hd == 0 {
				panic("neon: AttnTile.KT needs a head size that is a multiple of 8")
			}
			_, _ = kt[AttnBlock*hd-1], kc[AttnBlock*hd-1]
			k.kt(&kt[0], &kc[0], hd/8)
		},
		Scores: func(sc, q, kt []float32, scale float32) {
			if len(q) == 0 {
				clear(sc[:AttnBlock])
				return
			}
			if len(q)%k.scoresMul != 0 {
				attnScoresT(sc, q, kt, scale)
				return
			}
			_, _ = sc[AttnBlock-1], kt[len(q)*AttnBlock-1]
			k.scores(&sc[0], &q[0], &kt[0], len(q), scale)
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
			k.sum(&out[0], &w[0], &v[0], hd/64, len(w))
		},
		Max: func(x []float32) float32 {
			n := len(x) / k.maxMul * k.maxMul
			if n == 0 {
				return maxF32(x)
			}
			m := k.max(&x[0], n/k.maxMul)
			for _, v := range x[n:] {
				m = max(m, v)
			}
			return m
		},
		ToF32: func(dst []float32, src []uint16) {
			if n8 := len(dst) / 8; n8 > 0 {
				_ = src[n8*8-1]
				k.toF32(&dst[0], &src[0], n8)
			}
			f16ToF32(dst[len(dst)/8*8:], src[len(dst)/8*8:len(dst)])
		},
	}
}
