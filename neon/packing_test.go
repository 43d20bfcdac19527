package neon

import (
	"bytes"
	"math"
	"math/rand/v2"
	"testing"
)

// packingsOf lists a set's packed layouts by weight type name (nil ones
// included).
func packingsOf(k *Kernels) map[string]*Packing {
	return map[string]*Packing{
		"Q4_0": k.PackQ4_0, "Q5_0": k.PackQ5_0, "Q8_0": k.PackQ8_0,
		"Q4_K": k.PackQ4_K, "Q5_K": k.PackQ5_K, "Q6_K": k.PackQ6_K,
	}
}

func dotTypeNamed(name string) dotType {
	for _, dt := range dotTypes {
		if dt.name == name {
			return dt
		}
	}
	panic("no dotType " + name)
}

// testPackings returns every packed layout to test: the available sets'
// and the reference ones (so that the checks themselves are checked on
// every platform), with the name of the set they belong to.
func testPackings() (names []string, ps []*Packing, types []string) {
	for _, k := range Available() {
		for tn, p := range packingsOf(k) {
			if p != nil {
				names, ps, types = append(names, k.Name), append(ps, p), append(types, tn)
			}
		}
	}
	for _, tn := range []string{"Q4_0", "Q8_0", "Q4_K", "Q6_K"} {
		names, ps, types = append(names, "reference"), append(ps, GenericPacking(tn, 8, tn[3] == 'K')), append(types, tn)
	}
	return
}

// TestPackingsMatchGeneric checks every packed layout of every available
// set: Pack writes exactly GroupSize bytes and Unpack gives every row back;
// Mul over 1..13 and 33 columns (odd strides, outputs ldo apart with
// guard values between) equals the generic one-row dot of each row and
// column, bit for bit unless the packing names a tolerance, and each
// column's result equals that column computed alone (batch invariance).
func TestPackingsMatchGeneric(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(31, 32))
	names, ps, types := testPackings()
	for i, p := range ps {
		dt := dotTypeNamed(types[i])
		nbs := []int{1, 2, 3, 5, 8, 9, 17}
		ns := []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 33}
		if dt.bs == 32 {
			nbs = append(nbs, 31, 64, 65)
		}
		if testing.Short() {
			nbs, ns = nbs[:5], []int{1, 2, 5, 12, 13}
		}
		for _, nb := range nbs {
			checkPacking(t, r, names[i], p, dt, nb, ns)
		}
	}
}

func checkPacking(t *testing.T, r *rand.Rand, set string, p *Packing, dt dotType, nb int, ns []int) {
	t.Helper()
	R := p.Rows
	wStride := nb*dt.wsize + 3
	w := randWeights(r, dt, (R-1)*wStride/dt.wsize+nb+1, 1)
	for row := 0; row < R; row++ { // random blocks at every row's start
		copy(w[row*wStride:], randWeights(r, dt, nb, 0))
	}
	gs := p.GroupSize(nb)
	g := make([]byte, gs+16)
	for i := range g {
		g[i] = 0xa5
	}
	p.Pack(g[:gs], w, wStride, nb)
	if !bytes.Equal(g[gs:], bytes.Repeat([]byte{0xa5}, 16)) {
		t.Fatalf("%s %s nb=%d: Pack wrote past GroupSize", set, p.Name, nb)
	}
	g = g[:gs]
	row := make([]byte, nb*dt.wsize)
	for rr := 0; rr < R; rr++ {
		p.Unpack(row, g, rr, nb)
		if !bytes.Equal(row, w[rr*wStride:rr*wStride+nb*dt.wsize]) {
			t.Fatalf("%s %s nb=%d: Unpack row %d differs from the packed row", set, p.Name, nb, rr)
		}
	}
	for _, n := range ns {
		aStride := nb*dt.asize + n%3
		a := randActs(r, dt, nb, n, aStride, 2)
		ka, kStride := a, aStride
		if p.ActRowSize != nil {
			kStride = p.ActRowSize(nb) + 4*(n%2)
			ka = make([]byte, (n-1)*kStride+p.ActRowSize(nb))
			for j := 0; j < n; j++ {
				p.PrepActs(ka[j*kStride:j*kStride+p.ActRowSize(nb)], a[j*aStride:], nb)
			}
		}
		// Two groups in one call (the same group twice) give both halves.
		two := make([]float32, n*2*R)
		p.Mul(two, 2*R, append(append([]byte{}, g...), g...), ka, kStride, nb, n)
		for j := 0; j < n; j++ {
			for rr := 0; rr < R; rr++ {
				if !sameBits(two[j*2*R+rr], two[j*2*R+R+rr]) {
					t.Fatalf("%s %s nb=%d n=%d: two groups in one call differ at row %d column %d", set, p.Name, nb, n, rr, j)
				}
			}
		}
		ldo := R + 3
		out := make([]float32, n*ldo)
		for i := range out {
			out[i] = guard
		}
		p.Mul(out, ldo, g, ka, kStride, nb, n)
		for j := 0; j < n; j++ {
			for rr := R; rr < ldo; rr++ {
				if out[j*ldo+rr] != guard {
					t.Fatalf("%s %s nb=%d n=%d: output guard %d of column %d overwritten", set, p.Name, nb, n, rr, j)
				}
			}
			one := make([]float32, R)
			p.Mul(one, R, g, ka[j*kStride:], kStride, nb, 1)
			if !sameBits(two[j*2*R], one[0]) {
				t.Fatalf("%s %s nb=%d n=%d: column %d of two groups differs from the group alone", set, p.Name, nb, n, j)
			}
			for rr := 0; rr < R; rr++ {
				got := out[j*ldo+rr]
				if !sameBits(got, one[rr]) {
					t.Fatalf("%s %s nb=%d n=%d: row %d column %d: %v in the batch, %v alone", set, p.Name, nb, n, rr, j, got, one[rr])
				}
				var ref [1]float32
				dt.pick(generic)(ref[:], w[rr*wStride:], a[j*aStride:], 0, nb, 1)
				if p.Tolerance == 0 {
					if !sameBits(got, ref[0]) {
						t.Fatalf("%s %s nb=%d n=%d: row %d column %d: %v, generic %v", set, p.Name, nb, n, rr, j, got, ref[0])
					}
					continue
				}
				mag := magnitude(dt, w[rr*wStride:], a[j*aStride:], nb)
				if d := math.Abs(float64(got) - float64(ref[0])); d > p.Tolerance*mag+1e-30 {
					t.Fatalf("%s %s nb=%d n=%d: row %d column %d: %v, generic %v (diff %g > %g·%g)", set, p.Name, nb, n, rr, j, got, ref[0], d, p.Tolerance, mag)
				}
			}
		}
	}
}

// FuzzPackings feeds arbitrary bytes as weights (and, for the types with
// Q8_0 activations, as activations too) to the packed layouts that must
// equal the generic dots bit for bit.
func FuzzPackings(f *testing.F) {
	f.Add(make([]byte, 600), uint8(1))
	f.Add(bytes.Repeat([]byte("geist packs rows "), 40), uint8(5))
	f.Fuzz(checkPackingsExact)
}

// TestPackingsRandomBytes runs FuzzPackings' check over random bytes
// (extreme quants and NaN or infinite scales included), for the platforms
// where the fuzzer cannot run.
func TestPackingsRandomBytes(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(33, 34))
	rounds := 200
	if testing.Short() {
		rounds = 40
	}
	for i := 0; i < rounds; i++ {
		data := make([]byte, r.IntN(6000))
		for j := range data {
			data[j] = byte(r.Uint32())
			if i%4 == 0 && r.IntN(3) == 0 {
				data[j] = 0x80
			}
		}
		checkPackingsExact(t, data, uint8(i))
	}
}

func checkPackingsExact(t *testing.T, data []byte, ncol uint8) {
	// A few groups' worth is enough; longer inputs only slow the fuzzer
	// (and its minimizing) down.
	data = data[:min(len(data), 4096)]
	n := int(ncol%13) + 1
	names, ps, types := testPackings()
	for i, p := range ps {
		dt := dotTypeNamed(types[i])
		if p.Tolerance != 0 || dt.actK {
			continue
		}
		R := p.Rows
		nb := len(data) / (R*dt.wsize + n*dt.asize)
		if nb == 0 {
			continue
		}
		w, a := data[:R*nb*dt.wsize], data[R*nb*dt.wsize:]
		stride := nb * dt.asize
		g := make([]byte, p.GroupSize(nb))
		p.Pack(g, w, nb*dt.wsize, nb)
		ka, kStride := a, stride
		if p.ActRowSize != nil {
			kStride = p.ActRowSize(nb)
			ka = make([]byte, n*kStride)
			for j := 0; j < n; j++ {
				p.PrepActs(ka[j*kStride:(j+1)*kStride], a[j*stride:], nb)
			}
		}
		out := make([]float32, n*R)
		p.Mul(out, R, g, ka, kStride, nb, n)
		for j := 0; j < n; j++ {
			for rr := 0; rr < R; rr++ {
				var ref [1]float32
				dt.pick(generic)(ref[:], w[rr*nb*dt.wsize:], a[j*stride:], 0, nb, 1)
				if !sameBits(out[j*R+rr], ref[0]) {
					t.Fatalf("%s %s nb=%d: row %d column %d: %v, generic %v", names[i], p.Name, nb, rr, j, out[j*R+rr], ref[0])
				}
			}
		}
	}
}
