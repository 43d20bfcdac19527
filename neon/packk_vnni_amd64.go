//go:build amd64 && !purego

package neon

import "github.com/geisten/geist/neon/ggml"

// The avx512vnni set's packed layouts for Q4_K and Q6_K
// (packk_vnni_amd64.s): groups of 16 rows, per super-block the same bytes
// as the 16 rows' blocks, rearranged:
//
//	Q4_K (2304 bytes): d[16] f16, dmin[16] f16; for each sub-block j the
//	16 rows' bytes scale_j | (min_j&3)<<6 (128); for each pair of
//	sub-blocks the 16 rows' bytes (min_2p>>2) | (min_2p+1>>2)<<4 (64);
//	then for each pair p and dword k of qs[32p:32p+32] the 16 rows'
//	dwords side by side (2048).
//
//	Q5_K (2816 bytes): the Q4_K head (256), then for each dword k of qh
//	the 16 rows' dwords side by side (512), then the Q4_K quants.
//
//	Q6_K (3360 bytes): d[16] f16; for each pair of sub-blocks i the 16
//	rows' (scale_2i, scale_2i+1) bytes (256); then four quads (h, u) =
//	(0,0), (0,1), (1,0), (1,1), each the 16 rows' dwords 16h+4u+k
//	(k < 4) of ql, dwords 16h+8+4u+k of ql and dwords 8h+4u+k of qh
//	(768 each).
//
// The products read the Q8_K activation rows as they are. Their outputs
// differ from the generic dots' by float rounding only (they sum exact
// integer totals per super-block, the generic code 8 float lanes).

//go:noescape
func mulQ4_Kx16VNNI(out *float32, ldo int, w *byte, groups int, a *byte, aStride, nb, n int)

//go:noescape
func mulQ5_Kx16VNNI(out *float32, ldo int, w *byte, groups int, a *byte, aStride, nb, n int)

//go:noescape
func mulQ6_Kx16VNNI(out *float32, ldo int, w *byte, groups int, a *byte, aStride, nb, n int)

const (
	q4kx16 = 16 * sizeQ4_K
	q5kx16 = 16 * sizeQ5_K
	q6kx16 = 16 * sizeQ6_K
)

// packKHead writes row r's d, dmin, scales and mins (a Q4_K or Q5_K block
// x) into the head of a packed super-block d.
func packKHead(d, x []byte, r int) {
	copy(d[2*r:], x[0:2])
	copy(d[32+2*r:], x[2:4])
	var sc, mn [8]byte
	for j := 0; j < 8; j++ {
		sc[j], mn[j] = ggml.ScaleMinK4(j, x[4:16])
		d[64+16*j+r] = sc[j] | (mn[j]&3)<<6
	}
	for p := 0; p < 4; p++ {
		d[192+16*p+r] = mn[2*p]>>2 | (mn[2*p+1]>>2)<<4
	}
}

// unpackKHead restores row r's d, dmin and 12 scale bytes (ggml's
// packing, get_scale_min_k4 in reverse) into the block x.
func unpackKHead(x, d []byte, r int) {
	copy(x[0:2], d[2*r:])
	copy(x[2:4], d[32+2*r:])
	var sc, mn [8]byte
	for j := 0; j < 8; j++ {
		v := d[64+16*j+r]
		sc[j] = v & 63
		mn[j] = v>>6 | (d[192+16*(j/2)+r]>>(4*uint(j%2))&15)<<2
	}
	q := x[4:16]
	for j := 0; j < 4; j++ {
		q[j] = sc[j] | (sc[j+4]>>4)<<6
		q[j+4] = mn[j] | (mn[j+4]>>4)<<6
		q[j+8] = sc[j+4]&15 | (mn[j+4]&15)<<4
	}
}

// kLayout describes where Q4_K and Q5_K keep their quants: qh (Q5_K) at
// qhOff of a ggml block and 256 of a packed one, the nibbles at qsOff and
// qsPacked.
type kLayout struct {
	size, packed    int // bytes of a block, of a packed super-block of 16 rows
	qhOff           int // 0: no qh
	qsOff, qsPacked int
}

var (
	q4kLayout = kLayout{size: sizeQ4_K, packed: q4kx16, qsOff: 16, qsPacked: 256}
	q5kLayout = kLayout{size: sizeQ5_K, packed: q5kx16, qhOff: 16, qsOff: 48, qsPacked: 768}
)

func (l kLayout) pack(dst, w []byte, wStride, nb int) {
	_ = dst[nb*l.packed-1]
	for b := 0; b < nb; b++ {
		d := dst[b*l.packed : (b+1)*l.packed]
		for r := 0; r < packRows; r++ {
			x := w[r*wStride+b*l.size : r*wStride+(b+1)*l.size]
			packKHead(d, x, r)
			for k := 0; k < 8 && l.qhOff > 0; k++ {
				copy(d[256+64*k+4*r:][:4], x[l.qhOff+4*k:])
			}
			for p := 0; p < 4; p++ {
				for k := 0; k < 8; k++ {
					copy(d[l.qsPacked+(8*p+k)*64+4*r:][:4], x[l.qsOff+32*p+4*k:])
				}
			}
		}
	}
}

func (l kLayout) unpack(dst, g []byte, r, nb int) {
	_ = dst[nb*l.size-1]
	for b := 0; b < nb; b++ {
		d := g[b*l.packed : (b+1)*l.packed]
		x := dst[b*l.size : (b+1)*l.size]
		unpackKHead(x, d, r)
		for k := 0; k < 8 && l.qhOff > 0; k++ {
			copy(x[l.qhOff+4*k:][:4], d[256+64*k+4*r:])
		}
		for p := 0; p < 4; p++ {
			for k := 0; k < 8; k++ {
				copy(x[l.qsOff+32*p+4*k:][:4], d[l.qsPacked+(8*p+k)*64+4*r:])
			}
		}
	}
}

// q6kQuad returns the offset in a packed Q6_K super-block of row r's
// dword k (0..3) of chunk set c (0: ql A, 1: ql B, 2: qh) of quad q, and
// the offset in the ggml block of the dword it holds.
func q6kQuad(q, c, k, r int) (packed, block int) {
	h, u := q/2, q%2
	packed = 288 + 768*q + 256*c + 64*k + 4*r
	switch c {
	case 0:
		block = 4 * (16*h + 4*u + k)
	case 1:
		block = 4 * (16*h + 8 + 4*u + k)
	default:
		block = 128 + 4*(8*h+4*u+k)
	}
	return
}

func packQ6_Kx16(dst, w []byte, wStride, nb int) {
	_ = dst[nb*q6kx16-1]
	for b := 0; b < nb; b++ {
		d := dst[b*q6kx16 : (b+1)*q6kx16]
		for r := 0; r < packRows; r++ {
			x := w[r*wStride+b*sizeQ6_K : r*wStride+(b+1)*sizeQ6_K]
			copy(d[2*r:], x[208:210])
			for i := 0; i < 8; i++ {
				d[32+32*i+2*r] = x[192+2*i]
				d[32+32*i+2*r+1] = x[192+2*i+1]
			}
			for q := 0; q < 4; q++ {
				for c := 0; c < 3; c++ {
					for k := 0; k < 4; k++ {
						p, o := q6kQuad(q, c, k, r)
						copy(d[p:p+4], x[o:o+4])
					}
				}
			}
		}
	}
}

func unpackQ6_Kx16(dst, g []byte, r, nb int) {
	_ = dst[nb*sizeQ6_K-1]
	for b := 0; b < nb; b++ {
		d := g[b*q6kx16 : (b+1)*q6kx16]
		x := dst[b*sizeQ6_K : (b+1)*sizeQ6_K]
		copy(x[208:210], d[2*r:])
		for i := 0; i < 8; i++ {
			x[192+2*i] = d[32+32*i+2*r]
			x[192+2*i+1] = d[32+32*i+2*r+1]
		}
		for q := 0; q < 4; q++ {
			for c := 0; c < 3; c++ {
				for k := 0; k < 4; k++ {
					p, o := q6kQuad(q, c, k, r)
					copy(x[o:o+4], d[p:p+4])
				}
			}
		}
	}
}

//go:noescape
func mulQ4_Kx16AVX2(out *float32, ldo int, w *byte, groups int, a *byte, aStride, nb, n int)

//go:noescape
func mulQ5_Kx16AVX2(out *float32, ldo int, w *byte, groups int, a *byte, aStride, nb, n int)

//go:noescape
func mulQ6_Kx16AVX2(out *float32, ldo int, w *byte, groups int, a *byte, aStride, nb, n int)

// avx2KPackings installs the avx2 set's packed k-quant layouts (the same
// layouts; pack_avx2_amd64.s, the same bits as the avx512vnni kernels).
func avx2KPackings(k *Kernels) {
	k.PackQ4_K = kquantPacking("q4_kx16-avx2", q4kx16, q4kLayout.pack, q4kLayout.unpack, mulQ4_Kx16AVX2)
	k.PackQ5_K = kquantPacking("q5_kx16-avx2", q5kx16, q5kLayout.pack, q5kLayout.unpack, mulQ5_Kx16AVX2)
	k.PackQ6_K = kquantPacking("q6_kx16-avx2", q6kx16, packQ6_Kx16, unpackQ6_Kx16, mulQ6_Kx16AVX2)
}

// kquantPacking makes the Packing of a k-quant layout.
func kquantPacking(name string, gsize int, pack func(dst, w []byte, wStride, nb int), unpack func(dst, g []byte, r, nb int), mul asmPacked) *Packing {
	return &Packing{
		Name:      name,
		Rows:      packRows,
		GroupSize: func(nb int) int { return nb * gsize },
		Pack:      pack,
		Unpack:    unpack,
		Mul: func(out []float32, ldo int, g, a []byte, aStride, nb, n int) {
			packedMul(mul, packRows, nb*gsize, sizeQ8_K, out, ldo, g, a, aStride, nb, n)
		},
		Tolerance: kquantPackTol,
	}
}

// kquantPackTol is the tolerance of the packed k-quant products against
// the generic dots, relative to the sum of the magnitudes of the block
// terms (the tests' kquantTol).
const kquantPackTol = 2e-6

// vnniKPackings installs the avx512vnni set's packed k-quant layouts.
func vnniKPackings(k *Kernels) {
	k.PackQ4_K = kquantPacking("q4_kx16-vnni", q4kx16, q4kLayout.pack, q4kLayout.unpack, mulQ4_Kx16VNNI)
	k.PackQ5_K = kquantPacking("q5_kx16-vnni", q5kx16, q5kLayout.pack, q5kLayout.unpack, mulQ5_Kx16VNNI)
	k.PackQ6_K = kquantPacking("q6_kx16-vnni", q6kx16, packQ6_Kx16, unpackQ6_Kx16, mulQ6_Kx16VNNI)
}
