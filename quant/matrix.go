package quant

import (
	"fmt"
	"sync"

	"github.com/geisten/geist/neon"
)

// kernel is what a weight type needs for products: the activation type ggml
// pairs it with, the neon kernel (chosen from the active set at each call)
// and a one-column dot product on the active set (for tests).
type kernel struct {
	act  Type
	pick pickFunc
	dot  dotFunc
	rows rowsPick // the row-group kernel, nil for types without one
	tile tilePick // the tile kernel, nil for types without one
	pack packPick // the packed layout, nil for types without one
}

// tilePick selects a weight type's tile kernel from a neon kernel set (nil
// when the set has none).
type tilePick func(k *neon.Kernels) *neon.Tile

// rowsPick selects a weight type's row-group kernel from a neon kernel set
// (nil when the set has none).
type rowsPick func(k *neon.Kernels) neon.RowsFunc

// kernels is the read-only kernel table, filled at initialisation from
// neon.Weights.
var kernels = func() map[Type]kernel {
	m := map[Type]kernel{}
	for _, w := range neon.Weights {
		t, ok := ParseType(w.Weight)
		act, ok2 := ParseType(w.Act)
		if !ok || !ok2 {
			panic("quant: neon.Weights names an unknown type: " + w.Weight + " × " + w.Act)
		}
		m[t] = kernel{act: act, pick: w.Dot, dot: oneColumn(w.Dot), rows: w.Rows, tile: w.Tile, pack: w.Pack}
	}
	return m
}()

func kernelFor(t Type) (kernel, bool) {
	k, ok := kernels[t]
	return k, ok
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
		x, dst := x[j*cols:(j+1)*cols], dst[j*ars:(j+1)*ars]
		switch at {
		case Q8_0:
			neon.QuantizeQ8_0(dst, x)
		case Q8_K:
			neon.QuantizeQ8_K(dst, x)
		default:
			if err := QuantizeRow(at, x, dst); err != nil {
				panic(err)
			}
		}
	}
}

// Matrix is a row-major weight matrix: Rows rows of Cols elements of Type,
// Data holding them (typically mmapped file bytes, never copied).
type Matrix struct {
	Type       Type
	Rows, Cols int
	Data       []byte

	rowSize int      // bytes per weight row
	actSize int      // bytes per activation row
	nb      int      // blocks per row (elements for plain float types)
	pick    pickFunc // the kernel of the active neon set
	rows    rowsPick // the row-group kernel of the active set, if any
	tile    tilePick // the tile kernel of the active set, if any
	pack    packPick // the packed layout of a set, if any
	pk      *packed  // the rows repacked by Pack, nil before
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
		rowSize: rs, actSize: as, nb: cols / t.BlockSize(), pick: k.pick, rows: k.rows, tile: k.tile, pack: k.pack,
	}, nil
}

// ActType is the activation type this matrix multiplies with.
func (m *Matrix) ActType() Type { return ActType(m.Type) }

// ActRowSize is the number of bytes of one quantized activation row.
func (m *Matrix) ActRowSize() int { return m.actSize }

// RowBytes is the number of bytes of one weight row.
func (m *Matrix) RowBytes() int { return m.rowSize }

// MulRows computes out[j*ldo + r] = dot(row r of m, activation row j) for r in
// [r0, r1) and j in [0, n). act holds n columns of activations made by
// m.QuantizeActs (ActBytes(n) bytes; for a matrix that is not packed, n
// rows of ActRowSize bytes made by QuantizeActs do too). Every output element is computed by the same code with the
// same accumulation order whatever n, r0 and r1 are, so a token's result is
// bit-identical alone or in a batch, and splitting rows across threads
// changes nothing. MulRows does not allocate; it panics when a buffer is too
// short (a caller bug).
func (m *Matrix) MulRows(out []float32, ldo int, act []byte, n, r0, r1 int) {
	rs, as, nb := m.rowSize, m.actSize, m.nb
	if r0 < 0 || r1 > m.Rows || r0 > r1 {
		panic(fmt.Sprintf("quant: MulRows rows [%d,%d) outside [0,%d)", r0, r1, m.Rows))
	}
	if n <= 0 || r0 == r1 {
		return
	}
	_ = out[(n-1)*ldo+r1-1]
	_ = act[n*as-1]
	ks := neon.Active()
	if pk := m.active(ks); pk != nil {
		m.mulPacked(pk, out, ldo, act, n, r0, r1)
		return
	}
	if n > 1 && m.tile != nil && r1-r0 >= neon.RowGroup {
		if tl := m.tile(ks); tl != nil {
			m.mulTiles(tl, out, ldo, act, n, r0, r1)
			return
		}
	}
	if m.rows != nil {
		if rows := m.rows(ks); rows != nil {
			m.mulGroups(rows, out, ldo, act, n, r0, r1)
			return
		}
	}
	dot := m.pick(ks)
	if n == 1 {
		for r := r0; r < r1; r++ {
			dot(out[r:r+1], m.Data[r*rs:(r+1)*rs], act, as, nb, 1)
		}
		return
	}
	// Tiles of tileRows weight rows × up to tileCols activation columns:
	// each weight row is read once per tileCols columns while the tile's
	// rows and columns stay in cache. Every output is still computed by the
	// kernel's per-column code, whatever the tiling.
	buf := scratch.Get().(*[tileCols]float32)
	defer scratch.Put(buf)
	for t0 := r0; t0 < r1; t0 += tileRows {
		t1 := min(t0+tileRows, r1)
		for j0 := 0; j0 < n; j0 += tileCols {
			c := min(tileCols, n-j0)
			a := act[j0*as:]
			for r := t0; r < t1; r++ {
				dot(buf[:c], m.Data[r*rs:(r+1)*rs], a, as, nb, c)
				for j, v := range buf[:c] {
					out[(j0+j)*ldo+r] = v
				}
			}
		}
	}
}

// mulGroups is MulRows with a row-group kernel: neon.RowGroup rows at a
// time over chunks of groupCols columns, and the generic one-row kernel
// (whose results the row-group kernels reproduce bit for bit) for the rows
// left over at the end of the range.
func (m *Matrix) mulGroups(rows neon.RowsFunc, out []float32, ldo int, act []byte, n, r0, r1 int) {
	rs, as, nb := m.rowSize, m.actSize, m.nb
	g := r0
	if n == 1 {
		for ; g+neon.RowGroup <= r1; g += neon.RowGroup {
			rows(out[g:], ldo, m.Data[g*rs:], rs, act, as, nb, 1)
		}
	} else {
		// The kernels accumulate in their outputs: a compact buffer keeps
		// the columns' accumulators in a few cache lines (out's columns
		// are ldo floats apart, often a multiple of 4 KiB, and would all
		// compete for the same L1 set).
		acc := groupScratch.Get().(*[groupCols * neon.RowGroup]float32)
		defer groupScratch.Put(acc)
		for ; g+neon.RowGroup <= r1; g += neon.RowGroup {
			for j0 := 0; j0 < n; j0 += groupCols {
				c := min(groupCols, n-j0)
				rows(acc[:], neon.RowGroup, m.Data[g*rs:], rs, act[j0*as:], as, nb, c)
				for j := 0; j < c; j++ {
					copy(out[(j0+j)*ldo+g:(j0+j)*ldo+g+neon.RowGroup], acc[j*neon.RowGroup:(j+1)*neon.RowGroup])
				}
			}
		}
	}
	m.mulLeft(out, ldo, act, n, g, r1)
}

// mulTiles is MulRows with a tile kernel: the activations packed once per
// chunk of groupCols columns, then neon.RowGroup rows at a time, and the
// generic one-row kernel (whose results the tile kernels reproduce bit for
// bit) for the rows left over at the end of the range.
func (m *Matrix) mulTiles(tl *neon.Tile, out []float32, ldo int, act []byte, n, r0, r1 int) {
	rs, as, nb := m.rowSize, m.actSize, m.nb
	pb := packScratch.Get().(*[]byte)
	defer packScratch.Put(pb)
	if need := neon.TilePackSize * nb * min(n, groupCols); cap(*pb) < need {
		*pb = make([]byte, need)
	}
	g0 := r0
	for j0 := 0; j0 < n; j0 += groupCols {
		c := min(groupCols, n-j0)
		pack := (*pb)[:neon.TilePackSize*nb*c]
		tl.Pack(pack, act[j0*as:], as, nb, c)
		for g := r0; g+neon.RowGroup <= r1; g += neon.RowGroup {
			tl.Mul(out[j0*ldo+g:], ldo, m.Data[g*rs:], rs, pack, nb, c)
			g0 = g + neon.RowGroup
		}
	}
	m.mulLeft(out, ldo, act, n, g0, r1)
}

// mulLeft computes rows [g, r1) with the generic one-row kernel.
func (m *Matrix) mulLeft(out []float32, ldo int, act []byte, n, g, r1 int) {
	if g == r1 {
		return
	}
	rs, as, nb := m.rowSize, m.actSize, m.nb
	dot := m.pick(neon.Generic())
	buf := scratch.Get().(*[tileCols]float32)
	defer scratch.Put(buf)
	for r := g; r < r1; r++ {
		for j0 := 0; j0 < n; j0 += tileCols {
			c := min(tileCols, n-j0)
			dot(buf[:c], m.Data[r*rs:(r+1)*rs], act[j0*as:], as, nb, c)
			for j, v := range buf[:c] {
				out[(j0+j)*ldo+r] = v
			}
		}
	}
}

// packScratch holds the packed activations of the tile path; a buffer
// grows to the largest product's size once and is reused after.
var packScratch = sync.Pool{New: func() any { return new([]byte) }}

const (
	// groupCols bounds the activation columns of one row-group call so
	// that they stay in the L2 cache while the group's weights are reused.
	groupCols = 32
	tileRows  = 16 // weight rows per tile
	tileCols  = 8  // activation columns per kernel call
)

// scratch holds the per-call buffers of MulRows' multi-column path: a
// buffer passed to a kernel through a function value escapes, so it comes
// from a pool instead of the stack (no allocation in the steady state).
var scratch = sync.Pool{New: func() any { return new([tileCols]float32) }}

// groupScratch holds the compact outputs of the row-group path.
var groupScratch = sync.Pool{New: func() any { return new([groupCols * neon.RowGroup]float32) }}

// Mul computes out[j*Rows + r] = dot(row r, x row j) for all rows and the n
// rows of x (n×Cols float32). It quantizes x into buf, growing it when it is
// too small, and returns buf for reuse (pass nil the first time).
func (m *Matrix) Mul(out, x []float32, n int, buf []byte) []byte {
	need := m.ActBytes(n)
	if cap(buf) < need {
		buf = make([]byte, need)
	}
	buf = buf[:need]
	m.QuantizeActs(buf, x, n)
	m.MulRows(out, m.Rows, buf, n, 0, m.Rows)
	return buf
}
