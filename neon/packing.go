package neon

// The reference packed layouts (GenericPacking): the plumbing's test
// double, and the shape every set's packings follow.

// genericDot is the generic one-row dot of a weight type with a packed
// layout (Weights: the types with a Pack kernel), with its block sizes
// (weights, activations).
func genericDot(name string) (dot func(w, a []byte, nb int) float32, wsize, asize int) {
	for _, wt := range Weights {
		if wt.Weight == name && wt.Pack != nil {
			d := wt.Dot(generic)
			return func(w, a []byte, nb int) float32 {
				var out [1]float32
				d(out[:], w, a, 0, nb, 1)
				return out[0]
			}, wt.WSize, wt.ASize
		}
	}
	return nil, 0, 0
}

// GenericPacking returns a reference packed layout for weight type name
// ("Q4_0", "Q5_0", "Q8_0", "Q4_K", "Q5_K", "Q6_K"; nil for others), for
// tests: groups of rows rows interleaved block by block (block b of row r
// at (b*rows + r) blocks), multiplied by the generic one-row dot. With
// prep, it also prepares activations (a copy of each activation row with
// its blocks in reverse order), so that tests cover both ways Mul may read
// activations.
func GenericPacking(name string, rows int, prep bool) *Packing {
	dot, ws, as := genericDot(name)
	if dot == nil || rows < 1 {
		return nil
	}
	p := &Packing{
		Name:      "generic-" + name,
		Rows:      rows,
		GroupSize: func(nb int) int { return rows * nb * ws },
		Pack: func(dst, w []byte, wStride, nb int) {
			for r := 0; r < rows; r++ {
				for b := 0; b < nb; b++ {
					copy(dst[(b*rows+r)*ws:(b*rows+r+1)*ws], w[r*wStride+b*ws:])
				}
			}
		},
		Unpack: func(dst, g []byte, r, nb int) {
			for b := 0; b < nb; b++ {
				copy(dst[b*ws:(b+1)*ws], g[(b*rows+r)*ws:])
			}
		},
	}
	unrev := func(a []byte, nb int) []byte { return a[:nb*as] }
	if prep {
		p.Name += "-prep"
		p.ActKey = "generic-reversed-" + name[len(name)-1:]
		p.ActRowSize = func(nb int) int { return nb * as }
		p.PrepActs = func(dst, a []byte, nb int) {
			for b := 0; b < nb; b++ {
				copy(dst[(nb-1-b)*as:(nb-b)*as], a[b*as:(b+1)*as])
			}
		}
		unrev = func(a []byte, nb int) []byte {
			out := make([]byte, nb*as)
			for b := 0; b < nb; b++ {
				copy(out[b*as:(b+1)*as], a[(nb-1-b)*as:])
			}
			return out
		}
	}
	p.Mul = func(out []float32, ldo int, g []byte, a []byte, aStride, nb, n int) {
		row := make([]byte, nb*ws)
		gs := p.GroupSize(nb)
		for k := 0; k < len(g)/gs; k++ {
			for r := 0; r < rows; r++ {
				p.Unpack(row, g[k*gs:(k+1)*gs], r, nb)
				for j := 0; j < n; j++ {
					out[j*ldo+k*rows+r] = dot(row, unrev(a[j*aStride:], nb), nb)
				}
			}
		}
	}
	return p
}
