//go:build amd64 && !purego

package neon

import (
	"encoding/binary"
	"math"
	"strconv"
)

// The avx512vnni set's packed layouts for Q4_0, Q5_0 and Q8_0
// (pack_vnni_amd64.s): groups of 16 rows; per block the 16 F16 scales,
// then for Q5_0 the 16 qh words, then chunk k of every row side by side
// (row r's dword k at 4r of a 64-byte chunk). The groups take exactly the
// bytes of the 16 rows. The activations are prepared per column as
// 40-byte entries (packQ8_0VNNI: the quants, -o*sum, the scale as
// float32). Every output is bit-identical to the generic one-row dot.

const (
	packRows  = 16
	vnniEntry = TilePackSize // bytes of a prepared activation block
)

//go:noescape
func mulQ4_0x16VNNI(out *float32, ldo int, w *byte, groups int, a *byte, aStride, nb, n int)

//go:noescape
func mulQ5_0x16VNNI(out *float32, ldo int, w *byte, groups int, a *byte, aStride, nb, n int)

//go:noescape
func mulQ8_0x16VNNI(out *float32, ldo int, w *byte, groups int, a *byte, aStride, nb, n int)

type asmPacked func(out *float32, ldo int, w *byte, groups int, a *byte, aStride, nb, n int)

// packedMul checks the arguments of a Packing's Mul for a kernel whose
// groups hold rows rows in gsize bytes and whose columns hold nb blocks of
// asize bytes, and runs it. It panics with errShort (a caller bug, like an
// index out of range) unless g holds whole groups, out n columns of the
// groups' rows ldo apart and a n columns aStride apart.
func packedMul(k asmPacked, rows, gsize, asize int, out []float32, ldo int, g, a []byte, aStride, nb, n int) {
	if n < 1 || nb < 1 || nb > math.MaxInt/asize || gsize <= 0 || len(g) == 0 || len(g)%gsize != 0 {
		panic(errShort)
	}
	groups := len(g) / gsize
	r := groups * rows
	if (n > 1 && ldo < r) || !spans(len(out), n, ldo, r) || !spans(len(a), n, aStride, nb*asize) {
		panic(errShort)
	}
	k(&out[0], ldo, &g[0], groups, &a[0], aStride, nb, n)
}

// vnniLegacy describes the layout of one legacy block type.
type vnniLegacy struct {
	name  string
	bsize int  // bytes of a block (ggml)
	pre   int  // bytes before the quants in a ggml block after the scale (Q5_0: qh)
	chunk int  // dword chunks of quants per row
	xor   byte // XORed into the quants (Q8_0: 0x80)
	o     int  // the unsigned offset of the quants
	mul   asmPacked
}

// pack rearranges 16 rows of nb blocks (ggml layout, wStride apart) into
// dst.
func (l *vnniLegacy) pack(dst, w []byte, wStride, nb int) {
	bs := l.bsize * packRows
	x32 := uint32(l.xor) * 0x01010101
	base := 32 + l.pre*packRows
	_ = dst[nb*bs-1]
	for b := 0; b < nb; b++ {
		d := dst[b*bs : (b+1)*bs]
		for r := 0; r < packRows; r++ {
			x := w[r*wStride+b*l.bsize : r*wStride+(b+1)*l.bsize]
			copy(d[2*r:2*r+2], x[:2])
			if l.pre > 0 {
				copy(d[32+l.pre*r:32+l.pre*(r+1)], x[2:2+l.pre])
			}
			q := x[2+l.pre:]
			for k := 0; k < l.chunk; k++ {
				binary.LittleEndian.PutUint32(d[base+64*k+4*r:], binary.LittleEndian.Uint32(q[4*k:])^x32)
			}
		}
	}
}

// unpack writes row r of the group g back in ggml layout.
func (l *vnniLegacy) unpack(dst, g []byte, r, nb int) {
	bs := l.bsize * packRows
	x32 := uint32(l.xor) * 0x01010101
	base := 32 + l.pre*packRows
	_ = dst[nb*l.bsize-1]
	for b := 0; b < nb; b++ {
		d := g[b*bs : (b+1)*bs]
		x := dst[b*l.bsize : (b+1)*l.bsize]
		copy(x[:2], d[2*r:2*r+2])
		if l.pre > 0 {
			copy(x[2:2+l.pre], d[32+l.pre*r:32+l.pre*(r+1)])
		}
		q := x[2+l.pre:]
		for k := 0; k < l.chunk; k++ {
			binary.LittleEndian.PutUint32(q[4*k:], binary.LittleEndian.Uint32(d[base+64*k+4*r:])^x32)
		}
	}
}

// prep writes one column of prepared activations (nb Q8_0 blocks of a).
func (l *vnniLegacy) prep(dst, a []byte, nb int) {
	if len(a) < nb*sizeQ8_0 || len(dst) < nb*vnniEntry {
		panic(errShort)
	}
	packQ8_0VNNI(&dst[0], &a[0], 0, nb, 1, l.o)
}

func (l *vnniLegacy) packing() *Packing {
	gs := l.bsize * packRows
	return &Packing{
		Name:       l.name + "x16-vnni",
		Rows:       packRows,
		GroupSize:  func(nb int) int { return nb * gs },
		Pack:       l.pack,
		Unpack:     l.unpack,
		ActRowSize: func(nb int) int { return nb * vnniEntry },
		PrepActs:   l.prep,
		ActKey:     "q8_0-vnni-o" + strconv.Itoa(l.o),
		Mul: func(out []float32, ldo int, g, a []byte, aStride, nb, n int) {
			packedMul(l.mul, packRows, nb*gs, vnniEntry, out, ldo, g, a, aStride, nb, n)
		},
	}
}

var (
	vnniQ4_0 = &vnniLegacy{name: "q4_0", bsize: sizeQ4_0, chunk: 4, o: 8, mul: mulQ4_0x16VNNI}
	vnniQ5_0 = &vnniLegacy{name: "q5_0", bsize: sizeQ5_0, pre: 4, chunk: 4, o: 16, mul: mulQ5_0x16VNNI}
	vnniQ8_0 = &vnniLegacy{name: "q8_0", bsize: sizeQ8_0, chunk: 8, xor: 0x80, o: 128, mul: mulQ8_0x16VNNI}
)

// vnniPackings installs the avx512vnni set's packed layouts.
func vnniPackings(k *Kernels) {
	k.PackQ4_0 = vnniQ4_0.packing()
	k.PackQ5_0 = vnniQ5_0.packing()
	k.PackQ8_0 = vnniQ8_0.packing()
}
