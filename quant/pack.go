package quant

import (
	"fmt"
	"sync"

	"github.com/geisten/geist/neon"
)

// packPick selects a weight type's packed layout from a neon kernel set
// (nil when the set multiplies the type in ggml layout).
type packPick func(k *neon.Kernels) *neon.Packing

// packed is a matrix repacked for one kernel set.
type packed struct {
	p      *neon.Packing
	set    *neon.Kernels // the set whose layout this is
	data   []byte        // groups of p.Rows rows, then the rows left over in ggml layout
	groups int           // whole groups
	gsize  int           // bytes per group
	prep   int           // bytes of one prepared activation column, 0 if none
}

// PackedSize is the number of bytes Pack needs for m with the active kernel
// set: whole groups of rows in the set's layout for m's type, then the rows
// left over in ggml layout. It is 0 when the set has no packed layout for
// the type (Pack then does nothing).
func (m *Matrix) PackedSize() int {
	p := m.packing(neon.Active())
	if p == nil {
		return 0
	}
	g := m.Rows / p.Rows
	return g*p.GroupSize(m.nb) + (m.Rows-g*p.Rows)*m.rowSize
}

func (m *Matrix) packing(ks *neon.Kernels) *neon.Packing {
	if m.pack == nil {
		return nil
	}
	return m.pack(ks)
}

// Pack rearranges m's rows into the active kernel set's layout for m's
// type, in dst (PackedSize bytes, typically anonymous memory the caller
// owns for as long as m is used), and multiplies from there afterwards
// whenever that set is active; under another set (tests switch sets)
// products fall back to Data. Data itself is not changed: a caller that
// keeps it only as that fallback may release its pages. Pack does nothing
// when PackedSize is 0.
func (m *Matrix) Pack(dst []byte) error { return m.PackReleasing(dst, nil) }

// packChunk is how many bytes of Data PackReleasing packs between two calls
// of its release function.
const packChunk = 4 << 20

// PackReleasing is Pack, calling release (when not nil) with each stretch
// of Data it has finished reading, about every 4 MiB, so that a caller
// that keeps Data only as the fallback can drop its pages while a large
// matrix (a 150k-token output head) is still being packed: resident
// memory then holds little more than one copy of the weights at any time.
// The stretches cover Data in order; its last bytes (the rows after the
// last whole group) are not among them.
func (m *Matrix) PackReleasing(dst []byte, release func(src []byte)) error {
	ks := neon.Active()
	p := m.packing(ks)
	if p == nil {
		return nil
	}
	if len(dst) != m.PackedSize() {
		return fmt.Errorf("quant: packing a %s matrix %d×%d takes %d bytes, have %d", m.Type, m.Rows, m.Cols, m.PackedSize(), len(dst))
	}
	m.packWith(p, ks, dst, release)
	return nil
}

// packWith packs m with p for the set ks into dst.
func (m *Matrix) packWith(p *neon.Packing, ks *neon.Kernels, dst []byte, release func([]byte)) {
	pk := &packed{p: p, set: ks, data: dst, groups: m.Rows / p.Rows, gsize: p.GroupSize(m.nb)}
	if p.ActRowSize != nil {
		pk.prep = p.ActRowSize(m.nb)
	}
	rs := m.rowSize
	done := 0 // bytes of Data handed to release
	for g := 0; g < pk.groups; g++ {
		p.Pack(dst[g*pk.gsize:(g+1)*pk.gsize], m.Data[g*p.Rows*rs:], rs, m.nb)
		if end := (g + 1) * p.Rows * rs; release != nil && (end-done >= packChunk || g == pk.groups-1) {
			release(m.Data[done:end])
			done = end
		}
	}
	copy(dst[pk.groups*pk.gsize:], m.Data[pk.groups*p.Rows*rs:])
	m.pk = pk
}

// Packed names the layout m is packed in ("" for ggml layout).
func (m *Matrix) Packed() string {
	if m.pk == nil {
		return ""
	}
	return m.pk.p.Name
}

// PackedExact reports whether m is packed in a layout whose products are
// bit for bit those of the ggml layout (false for k-quant layouts that
// sum a block's terms in another order, within their Tolerance, and for
// a matrix that is not packed).
func (m *Matrix) PackedExact() bool { return m.pk != nil && m.pk.p.Tolerance == 0 }

// active returns m's packing when its set is the active one.
func (m *Matrix) active(ks *neon.Kernels) *packed {
	if m.pk != nil && m.pk.set == ks {
		return m.pk
	}
	return nil
}

// Row returns row r of m in ggml layout: a slice of Data, or, for a packed
// matrix (whose Data pages may have been released), the row unpacked into
// buf (RowBytes long) or a slice of the packed copy.
func (m *Matrix) Row(r int, buf []byte) []byte {
	rs := m.rowSize
	pk := m.pk
	if pk == nil {
		return m.Data[r*rs : (r+1)*rs]
	}
	R := pk.p.Rows
	if g := r / R; g < pk.groups {
		buf = buf[:rs]
		pk.p.Unpack(buf, pk.data[g*pk.gsize:(g+1)*pk.gsize], r%R, m.nb)
		return buf
	}
	off := pk.groups*pk.gsize + (r-pk.groups*R)*rs
	return pk.data[off : off+rs]
}

// ActBytes is the number of bytes of n columns of activations for m as
// m.QuantizeActs writes them: n activation rows of ActRowSize bytes, then,
// when m's kernels prepare activations their own way, n prepared columns.
func (m *Matrix) ActBytes(n int) int {
	b := n * m.actSize
	if pk := m.pk; pk != nil {
		b += n * pk.prep
	}
	return b
}

// QuantizeActs converts n activation rows x (n×Cols float32) into dst
// (ActBytes(n) bytes) for products with m: the activation rows, then the
// prepared columns its packed kernels read. Do it once per product and
// share the result between the threads that call MulRows, and between
// matrices whose SameActs says so.
func (m *Matrix) QuantizeActs(dst []byte, x []float32, n int) { m.QuantizeActsRows(dst, x, n, 0, n) }

// QuantizeActsRows is QuantizeActs for rows [lo, hi) of the n: threads
// may share the work of a batch.
func (m *Matrix) QuantizeActsRows(dst []byte, x []float32, n, lo, hi int) {
	as, cols := m.actSize, m.Cols
	QuantizeActs(dst[lo*as:hi*as], m.Type, x[lo*cols:hi*cols], hi-lo, cols)
	if pk := m.pk; pk != nil && pk.prep > 0 {
		prep := dst[n*as : n*(as+pk.prep)]
		for j := lo; j < hi; j++ {
			pk.p.PrepActs(prep[j*pk.prep:(j+1)*pk.prep], dst[j*as:(j+1)*as], m.nb)
		}
	}
}

// SameActs reports whether m and o take the same activations from the
// same input (QuantizeActs of one serves the other).
func (m *Matrix) SameActs(o *Matrix) bool {
	if m.Cols != o.Cols || ActType(m.Type) != ActType(o.Type) {
		return false
	}
	a, b := m.pk, o.pk
	switch {
	case a == nil || a.prep == 0:
		return b == nil || b.prep == 0
	case b == nil || b.prep == 0:
		return false
	}
	return a.p.ActKey != "" && a.p.ActKey == b.p.ActKey && a.prep == b.prep
}

// mulPacked is MulRows over m's packed groups: one pk.p.Mul call for the
// whole groups inside [r0, r1), one per group only partly inside (into a
// scratch buffer), and the set's one-row kernel for the rows left over
// after the last group.
func (m *Matrix) mulPacked(pk *packed, out []float32, ldo int, act []byte, n, r0, r1 int) {
	a, aStride := act, m.actSize
	if pk.prep > 0 {
		a, aStride = act[n*m.actSize:], pk.prep
	}
	R := pk.p.Rows
	end := min(r1, pk.groups*R)
	// The whole groups inside [r0, r1) in one call.
	if g0, g1 := (r0+R-1)/R, end/R; g0 < g1 {
		pk.p.Mul(out[g0*R:], ldo, pk.data[g0*pk.gsize:g1*pk.gsize], a, aStride, m.nb, n)
	}
	for g := r0 / R; g*R < end; g++ {
		lo, hi := max(r0, g*R), min(end, (g+1)*R)
		if lo == g*R && hi == (g+1)*R {
			continue
		}
		grp := pk.data[g*pk.gsize : (g+1)*pk.gsize]
		// A group cut by the range: all its rows into scratch, a chunk of
		// columns at a time, the wanted ones copied out.
		sp := packScratchF.Get().(*[]float32)
		if cap(*sp) < R*groupCols {
			*sp = make([]float32, R*groupCols)
		}
		buf := (*sp)[:R*groupCols]
		for j0 := 0; j0 < n; j0 += groupCols {
			c := min(groupCols, n-j0)
			pk.p.Mul(buf, R, grp, a[j0*aStride:], aStride, m.nb, c)
			for j := 0; j < c; j++ {
				copy(out[(j0+j)*ldo+lo:(j0+j)*ldo+hi], buf[j*R+lo-g*R:j*R+hi-g*R])
			}
		}
		packScratchF.Put(sp)
	}
	if r1 <= pk.groups*R {
		return
	}
	// The rows left over, in ggml layout after the groups.
	dot := m.pick(pk.set)
	rs, as := m.rowSize, m.actSize
	left := pk.data[pk.groups*pk.gsize:]
	buf := scratch.Get().(*[tileCols]float32)
	defer scratch.Put(buf)
	for r := max(r0, pk.groups*R); r < r1; r++ {
		w := left[(r-pk.groups*R)*rs : (r-pk.groups*R+1)*rs]
		for j0 := 0; j0 < n; j0 += tileCols {
			c := min(tileCols, n-j0)
			dot(buf[:c], w, act[j0*as:], as, m.nb, c)
			for j, v := range buf[:c] {
				out[(j0+j)*ldo+r] = v
			}
		}
	}
}

// packScratchF holds the outputs of groups cut by a MulRows range.
var packScratchF = sync.Pool{New: func() any { return new([]float32) }}
