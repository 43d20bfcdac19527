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

// prepGo is prep in Go (for CPUs without VPDPBUSD).
func (l *vnniLegacy) prepGo(dst, a []byte, nb int) {
	_, _ = a[nb*sizeQ8_0-1], dst[nb*vnniEntry-1]
	for b := 0; b < nb; b++ {
		e, y := dst[b*vnniEntry:(b+1)*vnniEntry], a[b*sizeQ8_0:(b+1)*sizeQ8_0]
		copy(e[:32], y[2:34])
		var sum int32
		for _, q := range y[2:34] {
			sum += int32(int8(q))
		}
		binary.LittleEndian.PutUint32(e[32:], uint32(-int32(l.o)*sum))
		binary.LittleEndian.PutUint32(e[36:], math.Float32bits(f16at(y, 0)))
	}
}

// packing makes the Packing of the layout with the kernel mul and the
// activation preparation prep (suffix names the set).
func (l *vnniLegacy) packing(suffix string, mul asmPacked, prep func(dst, a []byte, nb int)) *Packing {
	gs := l.bsize * packRows
	return &Packing{
		Name:       l.name + "x16-" + suffix,
		Rows:       packRows,
		GroupSize:  func(nb int) int { return nb * gs },
		Pack:       l.pack,
		Unpack:     l.unpack,
		ActRowSize: func(nb int) int { return nb * vnniEntry },
		PrepActs:   prep,
		ActKey:     "q8_0-x16-o" + strconv.Itoa(l.o),
		Mul: func(out []float32, ldo int, g, a []byte, aStride, nb, n int) {
			packedMul(mul, packRows, nb*gs, vnniEntry, out, ldo, g, a, aStride, nb, n)
		},
	}
}

var (
	vnniQ4_0 = &vnniLegacy{name: "q4_0", bsize: sizeQ4_0, chunk: 4, o: 8}
	vnniQ5_0 = &vnniLegacy{name: "q5_0", bsize: sizeQ5_0, pre: 4, chunk: 4, o: 16}
	vnniQ8_0 = &vnniLegacy{name: "q8_0", bsize: sizeQ8_0, chunk: 8, xor: 0x80, o: 128}
)

// vnniPackings installs the avx512vnni set's packed layouts.
func vnniPackings(k *Kernels) {
	k.PackQ4_0 = vnniQ4_0.packing("vnni", mulQ4_0x16VNNI, vnniQ4_0.prep)
	k.PackQ5_0 = vnniQ5_0.packing("vnni", mulQ5_0x16VNNI, vnniQ5_0.prep)
	k.PackQ8_0 = vnniQ8_0.packing("vnni", mulQ8_0x16VNNI, vnniQ8_0.prep)
}

//go:noescape
func mulQ4_0x16AVX2(out *float32, ldo int, w *byte, groups int, a *byte, aStride, nb, n int)

//go:noescape
func mulQ5_0x16AVX2(out *float32, ldo int, w *byte, groups int, a *byte, aStride, nb, n int)

// avx2Packings installs the avx2 set's packed layouts: the same layouts
// (pack_avx2_amd64.s multiplies a group in two halves of 8 rows), the
// activations prepared in Go. Q8_0 stays in ggml layout there (its
// unsigned quants overflow VPMADDUBSW's int16 pairs).
func avx2Packings(k *Kernels) {
	k.PackQ4_0 = vnniQ4_0.packing("avx2", mulQ4_0x16AVX2, vnniQ4_0.prepGo)
	k.PackQ5_0 = vnniQ5_0.packing("avx2", mulQ5_0x16AVX2, vnniQ5_0.prepGo)
}
