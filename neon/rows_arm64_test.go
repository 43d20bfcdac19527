//go:build arm64 && !purego

package neon

import (
	"errors"
	"math/rand/v2"
	"testing"
)

// TestRowsBounds checks the row-group wrappers' argument checks: buffers
// sized exactly (the last row and column only nb blocks long) run and
// match generic, one byte or float short panics with errShort, and so do
// overlapping output groups.
func TestRowsBounds(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(27, 28))
	for _, k := range Available() {
		for _, rt := range rowsTypes {
			f := rt.pick(k)
			if f == nil || k.Name == "generic" {
				continue
			}
			dt := rt.dt
			const nb, n, ldo = 3, 3, RowGroup + 2
			wStride, aStride := nb*dt.wsize+5, nb*dt.asize+3
			w := make([]byte, (RowGroup-1)*wStride+nb*dt.wsize)
			for row := 0; row < RowGroup; row++ {
				copy(w[row*wStride:], randWeights(r, dt, nb, 0)[:nb*dt.wsize])
			}
			a := randActs(r, dt, nb, n, aStride, 0)[:(n-1)*aStride+nb*dt.asize]
			out := make([]float32, (n-1)*ldo+RowGroup)
			f(out, ldo, w, wStride, a, aStride, nb, n)
			for j := 0; j < n; j++ {
				for row := 0; row < RowGroup; row++ {
					want := rowsRef(dt.name)(w[row*wStride:], a[j*aStride:], nb)
					if !sameBits(out[j*ldo+row], want) {
						t.Fatalf("%s %s row %d col %d: %v, generic %v", k.Name, dt.name, row, j, out[j*ldo+row], want)
					}
				}
			}
			short := []struct {
				name string
				run  func()
			}{
				{"w", func() { f(out, ldo, w[:len(w)-1], wStride, a, aStride, nb, n) }},
				{"a", func() { f(out, ldo, w, wStride, a[:len(a)-1], aStride, nb, n) }},
				{"out", func() { f(out[:len(out)-1], ldo, w, wStride, a, aStride, nb, n) }},
				{"ldo", func() { f(out, RowGroup-1, w, wStride, a, aStride, nb, n) }},
				{"nb", func() { f(out, ldo, w, wStride, a, aStride, -1, n) }},
				{"n", func() { f(out, ldo, w, wStride, a, aStride, nb, 0) }},
				{"wStride", func() { f(out, ldo, w, -1, a, aStride, nb, n) }},
			}
			for _, s := range short {
				func() {
					defer func() {
						if e, ok := recover().(error); !ok || !errors.Is(e, errShort) {
							t.Errorf("%s %s: short %s did not panic with errShort", k.Name, dt.name, s.name)
						}
					}()
					s.run()
				}()
			}
			// nb == 0 zeroes the outputs and nothing else.
			for i := range out {
				out[i] = guard
			}
			f(out, ldo, nil, 0, nil, 0, 0, n)
			for i, v := range out {
				if inside := i%ldo < RowGroup; inside != (v == 0) {
					t.Fatalf("%s %s nb=0: out[%d] = %v", k.Name, dt.name, i, v)
				}
			}
		}
	}
}
