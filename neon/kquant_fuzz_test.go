package neon

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"
)

// FuzzKQuants feeds arbitrary bytes as Q4_K, Q5_K and Q6_K weights and
// Q8_K activations to every set's k-quant dots and packed layouts, which
// FuzzDotExact and FuzzPackings leave out (they are not bit-identical to
// generic). The bytes are taken as they are but for the float fields,
// which are made finite (weights' d and dmin, activations' d), and the
// activations' bsums, which are recomputed from their quants (every
// kernel may rely on them, as ggml's do). Checked: each column equals
// that column computed alone (batch invariance), outputs stay within
// their bounds, and each value is within the kernel's tolerance of the
// generic dot (unless its terms come near float32's range, where either
// may overflow).
func FuzzKQuants(f *testing.F) {
	f.Add(make([]byte, 2000), uint8(1))
	f.Add(bytes.Repeat([]byte("geist k-quants "), 300), uint8(4))
	f.Fuzz(checkKQuants)
}

// TestKQuantsRandomBytes runs FuzzKQuants' check over random bytes (-128
// quants included), for the platforms where the fuzzer cannot run.
func TestKQuantsRandomBytes(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(41, 42))
	rounds := 120
	if testing.Short() {
		rounds = 30
	}
	for i := 0; i < rounds; i++ {
		data := make([]byte, 300+r.IntN(12000))
		for j := range data {
			data[j] = byte(r.Uint32())
			if i%4 == 0 && r.IntN(3) == 0 {
				data[j] = 0x80
			}
		}
		checkKQuants(t, data, uint8(i))
	}
}

// saneHalf replaces a non-finite F16 value at b with 1/16.
func saneHalf(b []byte) {
	if h := binary.LittleEndian.Uint16(b); h&0x7c00 == 0x7c00 {
		binary.LittleEndian.PutUint16(b, 0x2c00)
	}
}

func checkKQuants(t *testing.T, data []byte, ncol uint8) {
	n := int(ncol%9) + 1
	for _, name := range []string{"Q4_K", "Q5_K", "Q6_K"} {
		dt := dotTypeNamed(name)
		// eight rows (for the packings) and n activation columns
		nb := len(data) / (packRowsTest*dt.wsize + n*dt.asize)
		if nb == 0 {
			continue
		}
		w := append([]byte(nil), data[:packRowsTest*nb*dt.wsize]...)
		a := append([]byte(nil), data[len(w):len(w)+n*nb*dt.asize]...)
		for b := 0; b < packRowsTest*nb; b++ {
			for _, off := range dt.scales {
				saneHalf(w[b*dt.wsize+off:])
			}
		}
		for b := 0; b < n*nb; b++ {
			y := a[b*dt.asize:]
			if d := math.Float32frombits(binary.LittleEndian.Uint32(y)); d != d || math.IsInf(float64(d), 0) {
				binary.LittleEndian.PutUint32(y, math.Float32bits(0.01))
			}
			for j := 0; j < qkK/16; j++ {
				var s int16
				for _, q := range y[4+16*j : 4+16*j+16] {
					s += int16(int8(q))
				}
				binary.LittleEndian.PutUint16(y[4+qkK+2*j:], uint16(s))
			}
		}
		ws, as := nb*dt.wsize, nb*dt.asize
		ref := make([]float32, packRowsTest*n)
		for r := 0; r < packRowsTest; r++ {
			for j := 0; j < n; j++ {
				dt.pick(generic)(ref[r*n+j:r*n+j+1], w[r*ws:], a[j*as:], 0, nb, 1)
			}
		}
		near := func(set, what string, r, j int, got float32, tol float64) {
			want := ref[r*n+j]
			mag := magnitude(dt, w[r*ws:], a[j*as:], nb)
			if mag > 1e30 {
				return // terms near float32's range: both may overflow, to inf or NaN
			}
			if d := math.Abs(float64(got) - float64(want)); !(d <= tol*mag+1e-30) && !sameBits(got, want) {
				t.Fatalf("%s %s %s nb=%d n=%d row %d col %d: %v, generic %v (diff %g > %g·%g)", set, what, name, nb, n, r, j, got, want, d, tol, mag)
			}
		}
		for _, k := range Available() {
			if k == generic {
				continue
			}
			// the one-row dots, several columns at once and alone
			dot := dt.pick(k)
			for r := 0; r < packRowsTest; r++ {
				out := make([]float32, n+2)
				out[0], out[n+1] = guard, guard
				dot(out[1:n+1], w[r*ws:], a, as, nb, n)
				if out[0] != guard || out[n+1] != guard {
					t.Fatalf("%s %s nb=%d n=%d: guard overwritten", k.Name, name, nb, n)
				}
				for j := 0; j < n; j++ {
					var one [1]float32
					dot(one[:], w[r*ws:], a[j*as:], 0, nb, 1)
					if !sameBits(out[1+j], one[0]) {
						t.Fatalf("%s %s nb=%d n=%d row %d col %d: %v in the batch, %v alone", k.Name, name, nb, n, r, j, out[1+j], one[0])
					}
					near(k.Name, "dot", r, j, out[1+j], dt.tol)
				}
			}
			// the packed layout, if the set has one for the type
			p := packingsOf(k)[name]
			if p == nil || p.Rows != packRowsTest {
				continue
			}
			g := make([]byte, p.GroupSize(nb))
			p.Pack(g, w, ws, nb)
			ka, kStride := a, as
			if p.ActRowSize != nil {
				kStride = p.ActRowSize(nb)
				ka = make([]byte, n*kStride)
				for j := 0; j < n; j++ {
					p.PrepActs(ka[j*kStride:(j+1)*kStride], a[j*as:], nb)
				}
			}
			out := make([]float32, n*packRowsTest)
			p.Mul(out, packRowsTest, g, ka, kStride, nb, n)
			for j := 0; j < n; j++ {
				one := make([]float32, packRowsTest)
				p.Mul(one, packRowsTest, g, ka[j*kStride:], kStride, nb, 1)
				for r := 0; r < packRowsTest; r++ {
					got := out[j*packRowsTest+r]
					if !sameBits(got, one[r]) {
						t.Fatalf("%s %s %s nb=%d n=%d row %d col %d: %v in the batch, %v alone", k.Name, p.Name, name, nb, n, r, j, got, one[r])
					}
					near(k.Name, p.Name, r, j, got, p.Tolerance)
				}
			}
		}
	}
}

// packRowsTest is the group size of the packings FuzzKQuants exercises
// (every set's packings group eight rows, the avx512vnni ones sixteen:
// those are left to TestPackingsMatchGeneric).
const packRowsTest = 8
