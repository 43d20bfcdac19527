package quant

import "fmt"

// kernel is what a weight type needs for products: the activation type ggml
// pairs it with and the dot product of one weight row with one activation
// row. The table is read-only; faster implementations of a dot product (and
// a later multi-row kernel) plug in here, per type, behind the same API.
type kernel struct {
	act Type
	dot dotFunc
}

func kernelFor(t Type) (kernel, bool) {
	switch t {
	case F32:
		return kernel{F32, dotF32}, true
	case F16:
		return kernel{F16, dotF16}, true
	case BF16:
		return kernel{BF16, dotBF16}, true
	case Q4_0:
		return kernel{Q8_0, dotQ4_0Q8_0}, true
	case Q4_1:
		return kernel{Q8_1, dotQ4_1Q8_1}, true
	case Q5_0:
		return kernel{Q8_0, dotQ5_0Q8_0}, true
	case Q5_1:
		return kernel{Q8_1, dotQ5_1Q8_1}, true
	case Q8_0:
		return kernel{Q8_0, dotQ8_0Q8_0}, true
	case Q2_K:
		return kernel{Q8_K, dotQ2_KQ8_K}, true
	case Q3_K:
		return kernel{Q8_K, dotQ3_KQ8_K}, true
	case Q4_K:
		return kernel{Q8_K, dotQ4_KQ8_K}, true
	case Q5_K:
		return kernel{Q8_K, dotQ5_KQ8_K}, true
	case Q6_K:
		return kernel{Q8_K, dotQ6_KQ8_K}, true
	case Q8_K:
		return kernel{Q8_K, dotQ8_KQ8_K}, true
	}
	return kernel{}, false
}

// Supported reports whether weights of type t have a dot product here:
// F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K
// and Q8_K.
func Supported(t Type) bool {
	_, ok := kernelFor(t)
	return ok
}

// ActType is the activation type ggml's vec_dot pairs with weights of type t:
// Q8_0 for Q4_0/Q5_0/Q8_0, Q8_1 for Q4_1/Q5_1, Q8_K for the k-quants, and the
// weight type itself for F32, F16 and BF16 (ggml converts activations to F16
// for F16 weights). It returns F32 for a type that is not Supported.
func ActType(t Type) Type {
	if k, ok := kernelFor(t); ok {
		return k.act
	}
	return F32
}

// ActRowSize is the number of bytes of one activation row of cols elements
// for weights of type t (0 when cols is not a whole number of blocks).
func ActRowSize(t Type, cols int) int {
	n, err := RowSize(ActType(t), cols)
	if err != nil {
		return 0
	}
	return n
}

// QuantizeActs converts n activation rows x (n×cols float32, row-major) to
// the activation type for weights of type w, writing n rows of
// ActRowSize(w, cols) bytes to dst. Do it once per product and share the
// result between the threads that call MulRows. It panics if cols is not a
// whole number of blocks or the buffers are shorter than n rows (caller
// bugs, like an index out of range).
func QuantizeActs(dst []byte, w Type, x []float32, n, cols int) {
	at := ActType(w)
	ars := ActRowSize(w, cols)
	if ars == 0 && cols != 0 {
		panic(fmt.Sprintf("quant: %d columns is not a whole number of %s blocks", cols, at))
	}
	for j := 0; j < n; j++ {
		if err := QuantizeRow(at, x[j*cols:(j+1)*cols], dst[j*ars:(j+1)*ars]); err != nil {
			panic(err)
		}
	}
}

// Matrix is a row-major weight matrix: Rows rows of Cols elements of Type,
// Data holding them (typically mmapped file bytes, never copied).
type Matrix struct {
	Type       Type
	Rows, Cols int
	Data       []byte

	rowSize int     // bytes per weight row
	actSize int     // bytes per activation row
	nb      int     // blocks per row (elements for plain float types)
	dot     dotFunc // one weight row · one activation row
}

// NewMatrix wraps data as a rows×cols matrix of type t. It fails when t has
// no dot product here, when cols is not a whole number of t's blocks or when
// data does not hold exactly rows rows.
func NewMatrix(t Type, rows, cols int, data []byte) (*Matrix, error) {
	k, ok := kernelFor(t)
	if !ok {
		return nil, fmt.Errorf("quant: tensor type %s is not supported", t)
	}
	if rows <= 0 || cols <= 0 {
		return nil, fmt.Errorf("quant: bad %s matrix shape %d×%d", t, rows, cols)
	}
	rs, err := RowSize(t, cols)
	if err != nil {
		return nil, err
	}
	as, err := RowSize(k.act, cols)
	if err != nil {
		return nil, err
	}
	if rows > len(data)/rs || rows*rs != len(data) {
		return nil, fmt.Errorf("quant: %s matrix %d×%d needs %d bytes, have %d", t, rows, cols, rows*rs, len(data))
	}
	return &Matrix{
		Type: t, Rows: rows, Cols: cols, Data: data,
		rowSize: rs, actSize: as, nb: cols / t.BlockSize(), dot: k.dot,
	}, nil
}

// ActType is the activation type this matrix multiplies with.
func (m *Matrix) ActType() Type { return ActType(m.Type) }

// ActRowSize is the number of bytes of one quantized activation row.
func (m *Matrix) ActRowSize() int { return m.actSize }

// RowBytes is the number of bytes of one weight row.
func (m *Matrix) RowBytes() int { return m.rowSize }

// MulRows computes out[j*ldo + r] = dot(row r of m, activation row j) for r in
// [r0, r1) and j in [0, n). act holds n rows of ActRowSize bytes made by
// QuantizeActs. Every output element is computed by the same code with the
// same accumulation order whatever n, r0 and r1 are, so a token's result is
// bit-identical alone or in a batch, and splitting rows across threads
// changes nothing. MulRows does not allocate; it panics when a buffer is too
// short (a caller bug).
func (m *Matrix) MulRows(out []float32, ldo int, act []byte, n, r0, r1 int) {
	rs, as, nb, dot := m.rowSize, m.actSize, m.nb, m.dot
	if r0 < 0 || r1 > m.Rows || r0 > r1 {
		panic(fmt.Sprintf("quant: MulRows rows [%d,%d) outside [0,%d)", r0, r1, m.Rows))
	}
	if n <= 0 || r0 == r1 {
		return
	}
	_ = out[(n-1)*ldo+r1-1]
	_ = act[n*as-1]
	for r := r0; r < r1; r++ {
		w := m.Data[r*rs : (r+1)*rs]
		for j := 0; j < n; j++ {
			out[j*ldo+r] = dot(w, act[j*as:(j+1)*as], nb)
		}
	}
}

// Mul computes out[j*Rows + r] = dot(row r, x row j) for all rows and the n
// rows of x (n×Cols float32). It quantizes x into buf, growing it when it is
// too small, and returns buf for reuse (pass nil the first time).
func (m *Matrix) Mul(out, x []float32, n int, buf []byte) []byte {
	need := n * m.actSize
	if cap(buf) < need {
		buf = make([]byte, need)
	}
	buf = buf[:need]
	QuantizeActs(buf, m.Type, x, n, m.Cols)
	m.MulRows(out, m.Rows, buf, n, 0, m.Rows)
	return buf
}
