package quant

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/geisten/geist/neon"
	"github.com/geisten/geist/neon/ggml"
)

func randRow(r *rand.Rand, n int, scale float64) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64() * scale)
	}
	// A few exact zeros and an outlier, as real weights have.
	x[3], x[n/2] = 0, 0
	x[n-5] = float32(6 * scale)
	return x
}

func mustQuantize(t testing.TB, typ Type, x []float32) []byte {
	t.Helper()
	size, err := RowSize(typ, len(x))
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, size)
	if err := QuantizeRow(typ, x, b); err != nil {
		t.Fatal(err)
	}
	return b
}

func mustDequantize(t testing.TB, typ Type, b []byte, n int) []float32 {
	t.Helper()
	y := make([]float32, n)
	if err := DequantizeRow(typ, b, y); err != nil {
		t.Fatal(err)
	}
	return y
}

// TestTypeSizes checks the byte layouts against ggml's block sizes.
func TestTypeSizes(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		t    Type
		size int
	}{
		{Q4_0, ggml.SizeQ4_0}, {Q4_1, ggml.SizeQ4_1}, {Q5_0, ggml.SizeQ5_0}, {Q5_1, ggml.SizeQ5_1},
		{Q8_0, ggml.SizeQ8_0}, {Q8_1, ggml.SizeQ8_1}, {Q2_K, ggml.SizeQ2_K}, {Q3_K, ggml.SizeQ3_K},
		{Q4_K, ggml.SizeQ4_K}, {Q5_K, ggml.SizeQ5_K}, {Q6_K, ggml.SizeQ6_K}, {Q8_K, ggml.SizeQ8_K},
	} {
		if c.t.TypeSize() != c.size {
			t.Errorf("%s: table says %d bytes, layout %d", c.t, c.t.TypeSize(), c.size)
		}
	}
}

// TestRoundTripError quantizes random rows and bounds the error of the
// dequantized values, relative to the row's RMS. The bounds are a little
// above what ggml's reference quantizers reach on Gaussian data.
func TestRoundTripError(t *testing.T) {
	t.Parallel()
	bounds := map[Type]float64{
		F32: 0, F16: 0.0005, BF16: 0.004,
		Q8_0: 0.0075, Q8_1: 0.0075, Q8_K: 0.012, // Q8_K: one step for 256 values and a 6σ outlier
		Q6_K: 0.026, Q5_K: 0.05, Q5_0: 0.06, Q5_1: 0.05,
		Q4_K: 0.10, Q4_0: 0.12, Q4_1: 0.105,
		Q3_K: 0.20, Q2_K: 0.40,
	}
	const n = 4 * QK_K
	for typ, bound := range bounds {
		r := rand.New(rand.NewPCG(7, uint64(typ)))
		var worst float64
		for trial := 0; trial < 8; trial++ {
			x := randRow(r, n, math.Pow(10, float64(trial%4)-3))
			y := mustDequantize(t, typ, mustQuantize(t, typ, x), n)
			var se, sx float64
			for i := range x {
				d := float64(x[i]) - float64(y[i])
				se += d * d
				sx += float64(x[i]) * float64(x[i])
			}
			worst = max(worst, math.Sqrt(se/sx))
		}
		if worst > bound {
			t.Errorf("%s: relative RMS error %.4f, bound %.4f", typ, worst, bound)
		}
		t.Logf("%-5s relative RMS error %.4f (bound %.4f)", typ, worst, bound)
	}
}

// TestQ8KElementBound checks the Q8_K activation quantizer element by
// element: every value is within half a step of its quantized value, the
// extreme maps to ±127, and bsums are the sums of each 16 quants.
func TestQ8KElementBound(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(3, 4))
	x := randRow(r, 2*QK_K, 1)
	x[10] = -9 // negative extreme in the first block
	b := mustQuantize(t, Q8_K, x)
	y := mustDequantize(t, Q8_K, b, len(x))
	for blk := 0; blk < 2; blk++ {
		q := b[blk*ggml.SizeQ8_K : (blk+1)*ggml.SizeQ8_K]
		d := math.Float32frombits(binary.LittleEndian.Uint32(q))
		for i := 0; i < QK_K; i++ {
			e := math.Abs(float64(x[blk*QK_K+i]) - float64(y[blk*QK_K+i]))
			if e > float64(abs32(d))*0.5001 {
				t.Fatalf("block %d elem %d: error %g > d/2 = %g", blk, i, e, d/2)
			}
		}
		for j := 0; j < 16; j++ {
			var s int32
			for _, v := range q[4+16*j : 4+16*j+16] {
				s += int32(int8(v))
			}
			if got := int32(int16(binary.LittleEndian.Uint16(q[4+QK_K+2*j:]))); got != s {
				t.Fatalf("block %d bsums[%d] = %d, want %d", blk, j, got, s)
			}
		}
	}
	// iscale = -127/max: the extreme always becomes -127, d takes its sign.
	if q, d := int8(b[4+10]), math.Float32frombits(binary.LittleEndian.Uint32(b)); q != -127 || d <= 0 {
		t.Errorf("extreme -9 quantized to %d with d=%v, want -127 and d > 0", q, d)
	}
	zero := mustQuantize(t, Q8_K, make([]float32, QK_K))
	for i, v := range zero {
		if v != 0 {
			t.Fatalf("all-zero block: byte %d is %d", i, v)
		}
	}
}

func TestQuantizeErrors(t *testing.T) {
	t.Parallel()
	if err := QuantizeRow(Q4_0, make([]float32, 33), make([]byte, 36)); err == nil {
		t.Error("33 elements of Q4_0: no error")
	}
	if err := QuantizeRow(Q4_0, make([]float32, 32), make([]byte, 17)); err == nil {
		t.Error("short dst: no error")
	}
	if err := QuantizeRow(IQ2_XXS, make([]float32, 256), make([]byte, 66)); err == nil {
		t.Error("IQ2_XXS: no error")
	}
	if err := DequantizeRow(Q4_K, make([]byte, 10), make([]float32, 256)); err == nil {
		t.Error("short src: no error")
	}
	if err := DequantizeRow(Type(99), nil, nil); err == nil {
		t.Error("unknown type: no error")
	}
}

// dotTolerance is the allowed difference between a dot kernel and the
// float64 dot product of the dequantized rows, relative to sum |w_i*a_i|:
// kernels accumulate in float32 across blocks, and the k-quant kernels
// multiply scales in a different order than dequantization does. Q8_1
// activations carry s = d*sum(q) rounded to F16, which the Q4_1/Q5_1 kernels
// use for the min term (as ggml does): that adds up to 2^-11*|m*s| a block.
const dotTolerance = 2e-6

// q8_1SumAllowance is the error the F16 rounding of Q8_1's s may add to a
// Q4_1/Q5_1 dot: sum over blocks of |m_w * s| * 2^-11.
func q8_1SumAllowance(typ Type, w, a []byte) float64 {
	if ActType(typ) != Q8_1 {
		return 0
	}
	var allow float64
	for b := 0; b < len(a)/ggml.SizeQ8_1; b++ {
		m := ggml.F16At(w[b*typ.TypeSize():], 2)
		s := ggml.F16At(a[b*ggml.SizeQ8_1:], 2)
		allow += math.Abs(float64(m)*float64(s)) * 0x1p-11
	}
	return allow
}

var dotTypes = []Type{F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_K}

func TestDotMatchesDequantized(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(11, 12))
	for _, typ := range dotTypes {
		k, ok := kernelFor(typ)
		if !ok {
			t.Fatalf("%s: no kernel", typ)
		}
		for _, n := range []int{QK_K, 4 * QK_K, 16 * QK_K} {
			for trial := 0; trial < 4; trial++ {
				w := mustQuantize(t, typ, randRow(r, n, 0.02))
				a := mustQuantize(t, k.act, randRow(r, n, 3))
				wf := mustDequantize(t, typ, w, n)
				af := mustDequantize(t, k.act, a, n)
				var want, mag float64
				for i := range wf {
					p := float64(wf[i]) * float64(af[i])
					want += p
					mag += math.Abs(p)
				}
				got := float64(k.dot(w, a, n/typ.BlockSize()))
				allow := dotTolerance*mag + q8_1SumAllowance(typ, w, a)
				if e := math.Abs(got - want); e > allow {
					t.Errorf("%s n=%d: dot %g, dequantized %g (diff %.3g, allowed %.3g)", typ, n, got, want, e, allow)
				}
			}
		}
	}
}

func newTestMatrix(t testing.TB, typ Type, rows, cols int, r *rand.Rand) *Matrix {
	t.Helper()
	rs, err := RowSize(typ, cols)
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, rows*rs)
	for i := 0; i < rows; i++ {
		if err := QuantizeRow(typ, randRow(r, cols, 0.05), data[i*rs:(i+1)*rs]); err != nil {
			t.Fatal(err)
		}
	}
	m, err := NewMatrix(typ, rows, cols, data)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestMulRowsBatchInvariance: a row computed alone, in a batch of 7, or in
// any split of the weight rows gives the same bits.
func TestMulRowsBatchInvariance(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(5, 6))
	const rows, cols, n = 37, 2 * QK_K, 7
	for _, typ := range dotTypes {
		m := newTestMatrix(t, typ, rows, cols, r)
		x := make([]float32, 0, n*cols)
		for j := 0; j < n; j++ {
			x = append(x, randRow(r, cols, 1)...)
		}
		act := make([]byte, n*m.ActRowSize())
		QuantizeActs(act, typ, x, n, cols)

		batch := make([]float32, n*rows)
		m.MulRows(batch, rows, act, n, 0, rows)

		// Each token alone, with an unusual ldo.
		for j := 0; j < n; j++ {
			one := make([]float32, rows+3)
			as := m.ActRowSize()
			m.MulRows(one, rows+3, act[j*as:(j+1)*as], 1, 0, rows)
			for i := 0; i < rows; i++ {
				if math.Float32bits(one[i]) != math.Float32bits(batch[j*rows+i]) {
					t.Fatalf("%s: token %d row %d alone %v, in batch %v", typ, j, i, one[i], batch[j*rows+i])
				}
			}
		}
		// Split rows like threads would.
		split := make([]float32, n*rows)
		for _, cut := range [][2]int{{0, 5}, {5, 6}, {6, 30}, {30, rows}} {
			m.MulRows(split, rows, act, n, cut[0], cut[1])
		}
		for i := range split {
			if math.Float32bits(split[i]) != math.Float32bits(batch[i]) {
				t.Fatalf("%s: split result %d differs: %v vs %v", typ, i, split[i], batch[i])
			}
		}
		// Mul agrees with QuantizeActs+MulRows.
		out := make([]float32, n*rows)
		m.Mul(out, x, n, nil)
		for i := range out {
			if math.Float32bits(out[i]) != math.Float32bits(batch[i]) {
				t.Fatalf("%s: Mul result %d differs", typ, i)
			}
		}
	}
}

func TestMulRowsNoAllocs(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 9))
	for _, typ := range dotTypes {
		m := newTestMatrix(t, typ, 8, QK_K, r)
		act := make([]byte, 2*m.ActRowSize())
		QuantizeActs(act, typ, randRow(r, 2*QK_K, 1), 2, QK_K)
		out := make([]float32, 16)
		if a := testing.AllocsPerRun(20, func() { m.MulRows(out, 8, act, 2, 0, 8) }); a != 0 {
			t.Errorf("%s: MulRows allocates %v times", typ, a)
		}
	}
}

func TestNewMatrixErrors(t *testing.T) {
	t.Parallel()
	_, err := NewMatrix(IQ2_XXS, 1, 256, make([]byte, 66))
	if err == nil || !strings.Contains(err.Error(), "quant: tensor type IQ2_XXS is not supported") {
		t.Errorf("IQ2_XXS: %v", err)
	}
	if _, err := NewMatrix(Q4_0, 2, 32, make([]byte, 35)); err == nil {
		t.Error("short data: no error")
	}
	if _, err := NewMatrix(Q4_0, 2, 33, make([]byte, 36)); err == nil {
		t.Error("cols not whole blocks: no error")
	}
	if _, err := NewMatrix(Q4_K, 0, 256, nil); err == nil {
		t.Error("zero rows: no error")
	}
	if Supported(Q8_1) || Supported(IQ4_NL) || !Supported(Q6_K) {
		t.Error("Supported is wrong")
	}
	for typ, act := range map[Type]Type{
		F32: F32, F16: F16, BF16: BF16, Q4_0: Q8_0, Q5_0: Q8_0, Q8_0: Q8_0,
		Q4_1: Q8_1, Q5_1: Q8_1, Q2_K: Q8_K, Q3_K: Q8_K, Q4_K: Q8_K, Q5_K: Q8_K, Q6_K: Q8_K,
	} {
		if ActType(typ) != act {
			t.Errorf("ActType(%s) = %s, want %s", typ, ActType(typ), act)
		}
	}
	if ActRowSize(Q4_K, 512) != 2*ggml.SizeQ8_K || ActRowSize(Q4_0, 64) != 2*ggml.SizeQ8_0 || ActRowSize(F16, 10) != 20 {
		t.Error("ActRowSize is wrong")
	}
}

// BenchmarkDot measures each dot kernel on one 4096-element row; SetBytes
// counts the weight bytes, so MB/s reads as weight bandwidth.
func BenchmarkDot(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	const n = 4096
	for _, typ := range dotTypes {
		k, _ := kernelFor(typ)
		w := mustQuantize(b, typ, randRow(r, n, 0.02))
		a := mustQuantize(b, k.act, randRow(r, n, 1))
		nb := n / typ.BlockSize()
		b.Run(typ.String(), func(b *testing.B) {
			b.SetBytes(int64(len(w)))
			var s float32
			for b.Loop() {
				s += k.dot(w, a, nb)
			}
			_ = s
		})
	}
}

// BenchmarkMulRows measures a 256×4096 matrix times a batch of 4 tokens.
func BenchmarkMulRows(b *testing.B) {
	r := rand.New(rand.NewPCG(2, 2))
	const rows, cols, n = 256, 4096, 4
	for _, typ := range []Type{F16, Q4_0, Q8_0, Q4_K, Q6_K} {
		m := newTestMatrix(b, typ, rows, cols, r)
		act := make([]byte, n*m.ActRowSize())
		QuantizeActs(act, typ, randRow(r, n*cols, 1), n, cols)
		out := make([]float32, n*rows)
		b.Run(typ.String(), func(b *testing.B) {
			b.SetBytes(int64(len(m.Data)))
			for b.Loop() {
				m.MulRows(out, rows, act, n, 0, rows)
			}
		})
	}
}

// TestMulGroupsMatchesGeneric: the row-group path (here with the reference
// row-group kernels) gives the generic set's bits for every row, the rows
// left over after the last whole group included, for more columns than
// one row-group call takes.
func TestMulGroupsMatchesGeneric(t *testing.T) {
	checkPathMatchesGeneric(t, 10, func(m *Matrix, out []float32, ldo int, act []byte, n, r0, r1 int) {
		m.mulGroups(neon.GenericRows(m.Type.String()), out, ldo, act, n, r0, r1)
	})
}

// TestMulTilesMatchesGeneric: the same for the tile path (with the
// reference tile kernels), for more columns than one packed chunk holds.
func TestMulTilesMatchesGeneric(t *testing.T) {
	checkPathMatchesGeneric(t, 12, func(m *Matrix, out []float32, ldo int, act []byte, n, r0, r1 int) {
		m.mulTiles(neon.GenericTile(m.Type.String()), out, ldo, act, n, r0, r1)
	})
}

// checkPathMatchesGeneric runs a MulRows path over three row ranges and
// 2, 9 and 2*groupCols+5 columns, and compares every output with the
// generic set's MulRows bit for bit.
func checkPathMatchesGeneric(t *testing.T, seed uint64, path func(m *Matrix, out []float32, ldo int, act []byte, n, r0, r1 int)) {
	restore, err := neon.Use("generic")
	if err != nil {
		t.Fatal(err)
	}
	defer restore()
	r := rand.New(rand.NewPCG(seed, seed+1))
	const rows, cols, n = 37, 4 * 32, 2*groupCols + 5
	for _, typ := range []Type{Q4_0, Q5_0, Q8_0} {
		m := newTestMatrix(t, typ, rows, cols, r)
		act := make([]byte, n*m.ActRowSize())
		QuantizeActs(act, typ, randRow(r, n*cols, 1), n, cols)
		want := make([]float32, n*rows)
		m.MulRows(want, rows, act, n, 0, rows)
		for _, nc := range []int{2, 9, n} {
			got := make([]float32, n*rows)
			for _, cut := range [][2]int{{0, 5}, {5, 21}, {21, rows}} {
				path(m, got, rows, act, nc, cut[0], cut[1])
			}
			for i := range got[:nc*rows] {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("%s n=%d: output %d (row %d, column %d) %v, generic %v", typ, nc, i, i%rows, i/rows, got[i], want[i])
				}
			}
		}
	}
}
