//go:build arm64 && !purego

package neon

// The packed layouts of the neon-dotprod set (see _asm/packdp.go for the
// kernels): groups of eight rows, per block the eight F16 scales, then
// rows 0-3 and 4-7 with their quants interleaved in 4-byte groups, the
// shape SDOT by element reads. A group is exactly as large as its eight
// rows in ggml layout.

//go:noescape
func mulQ4_0x8DP(out *float32, ldo int, w *byte, ngroups int, a *byte, aStride, nb, n int)

//go:noescape
func mulQ8_0x8DP(out *float32, ldo int, w *byte, ngroups int, a *byte, aStride, nb, n int)

const packRows = 8

// packedLayout describes one interleaved block type: wsize bytes per ggml
// block (2 of them the F16 scale), qsize quant bytes, xor applied to every
// stored quant byte.
type packedLayout struct {
	wsize, qsize int
	xor          byte
}

var (
	layoutQ4_0 = packedLayout{sizeQ4_0, 16, 0x88}
	layoutQ8_0 = packedLayout{sizeQ8_0, 32, 0}
)

// at is the offset, within a packed block of eight rows, of quant byte i
// of row r.
func (l packedLayout) at(r, i int) int {
	h, rr := r/4, r%4
	return 16 + h*4*l.qsize + (i/4)*16 + rr*4 + i%4
}

func (l packedLayout) pack(dst, w []byte, wStride, nb int) {
	bs := packRows * l.wsize
	_ = dst[nb*bs-1]
	for b := 0; b < nb; b++ {
		d := dst[b*bs : (b+1)*bs]
		for r := 0; r < packRows; r++ {
			x := w[r*wStride+b*l.wsize:][:l.wsize]
			d[2*r], d[2*r+1] = x[0], x[1]
			for i := 0; i < l.qsize; i++ {
				d[l.at(r, i)] = x[2+i] ^ l.xor
			}
		}
	}
}

func (l packedLayout) unpack(dst, g []byte, r, nb int) {
	bs := packRows * l.wsize
	_ = g[nb*bs-1]
	for b := 0; b < nb; b++ {
		d, x := g[b*bs:(b+1)*bs], dst[b*l.wsize:][:l.wsize]
		x[0], x[1] = d[2*r], d[2*r+1]
		for i := 0; i < l.qsize; i++ {
			x[2+i] = d[l.at(r, i)] ^ l.xor
		}
	}
}

// packedMul wraps a packed-group kernel: it checks the buffers (a short
// one panics with errShort, a caller bug) and runs the kernel over every
// whole group in g.
func packedMul(k func(out *float32, ldo int, g *byte, ngroups int, a *byte, aStride, nb, n int), wsize, asize int) func(out []float32, ldo int, g []byte, a []byte, aStride, nb, n int) {
	return func(out []float32, ldo int, g []byte, a []byte, aStride, nb, n int) {
		gs := packRows * nb * wsize
		if n < 1 || nb < 1 || nb > (1<<40)/gs {
			panic(errShort)
		}
		ng := len(g) / gs
		if ng == 0 {
			return
		}
		if ldo < 0 || aStride < 0 || (n > 1 && ldo < ng*packRows) || (len(out)-ng*packRows)/max(ldo, 1) < n-1 ||
			len(out) < ng*packRows || len(a) < nb*asize || (n > 1 && (len(a)-nb*asize)/(n-1) < aStride) {
			panic(errShort)
		}
		k(&out[0], ldo, &g[0], ng, &a[0], aStride, nb, n)
	}
}

func newPacking(name string, l packedLayout, k func(out *float32, ldo int, g *byte, ngroups int, a *byte, aStride, nb, n int)) *Packing {
	return &Packing{
		Name:      name,
		Rows:      packRows,
		GroupSize: func(nb int) int { return packRows * nb * l.wsize },
		Pack:      l.pack,
		Unpack:    l.unpack,
		Mul:       packedMul(k, l.wsize, sizeQ8_0),
	}
}

//go:noescape
func mulQ4_Kx8DP(out *float32, ldo int, w *byte, ngroups int, a *byte, aStride, nb, n int)

// q4kAt maps byte i of a Q4_K super-block of row r (< 8) to its offset in
// the packed super-block of eight rows (see _asm/packkq.go).
func q4kAt(r, i int) int {
	h, rr := r/4, r%4
	switch {
	case i < 2: // d
		return 2*r + i
	case i < 4: // dmin
		return 16 + 2*r + i - 2
	case i < 16: // scales: word (i-4)/4, byte (i-4)%4
		return 32 + 48*h + 16*((i-4)/4) + 4*((i-4)%4) + rr
	}
	q := i - 16 // nibbles: pair q/32, byte l = q%32
	l := q % 32
	return 128 + 256*(q/32) + 128*h + 16*(l/4) + 4*rr + l%4
}

// kquantPackTol is the tolerance of the packed k-quant kernels against the
// generic dots (as the arm64 one-row k-quant dots: exact integer sums per
// super-block, float steps in another order and fused).
const kquantPackTol = 2e-6

//go:noescape
func mulQ6_Kx8DP(out *float32, ldo int, w *byte, ngroups int, a *byte, aStride, nb, n int)

// q6kAt maps byte i of a Q6_K super-block of row r (< 8) to its offset in
// the packed super-block of eight rows (see _asm/packq6.go).
func q6kAt(r, i int) int {
	h, rr := r/4, r%4
	// quants: one unpack step (hh, c) reads three 16-byte sources (src 0,
	// 1: ql bytes 64hh+16c.., 64hh+32+16c..; src 2: qh bytes 32hh+16c..),
	// byte t of each
	step := func(hh, c, src, t int) int {
		return 144 + 768*h + 192*(2*hh+c) + 64*src + 16*(t/4) + 4*rr + t%4
	}
	switch {
	case i < 128: // ql
		m := i % 64
		return step(i/64, m%32/16, m/32, m%16)
	case i < 192: // qh
		q := i - 128
		return step(q/32, q%32/16, 2, q%16)
	case i < 208: // scales: sub-block j = 8hh + c + 2k
		j := i - 192
		return 16 + 64*h + 16*(2*(j/8)+j%2) + 4*(j%8/2) + rr
	}
	return 2*r + i - 208 // d
}

// packedBytes is a packing's Pack and Unpack for a byte map at (row r,
// byte i of a ggml block of bsize bytes) -> offset in the packed block of
// eight rows.
func packedBytes(bsize int, at func(r, i int) int) (pack func(dst, w []byte, wStride, nb int), unpack func(dst, g []byte, r, nb int)) {
	gs := packRows * bsize
	perm := make([]int32, gs) // byte i of row r -> perm[r*bsize+i]
	for r := 0; r < packRows; r++ {
		for i := 0; i < bsize; i++ {
			perm[r*bsize+i] = int32(at(r, i))
		}
	}
	pack = func(dst, w []byte, wStride, nb int) {
		_ = dst[nb*gs-1]
		for b := 0; b < nb; b++ {
			d := dst[b*gs : (b+1)*gs]
			for r := 0; r < packRows; r++ {
				p := perm[r*bsize : (r+1)*bsize]
				for i, v := range w[r*wStride+b*bsize:][:bsize] {
					d[p[i]] = v
				}
			}
		}
	}
	unpack = func(dst, g []byte, r, nb int) {
		_ = g[nb*gs-1]
		p := perm[r*bsize : (r+1)*bsize]
		for b := 0; b < nb; b++ {
			d, x := g[b*gs:(b+1)*gs], dst[b*bsize:][:bsize]
			for i := range x {
				x[i] = d[p[i]]
			}
		}
	}
	return pack, unpack
}

// newPackingK is a packed k-quant layout (outputs within kquantPackTol of
// the generic dot: the float steps are fused and on lanes).
func newPackingK(name string, bsize int, at func(r, i int) int, k func(out *float32, ldo int, g *byte, ngroups int, a *byte, aStride, nb, n int)) *Packing {
	pack, unpack := packedBytes(bsize, at)
	return &Packing{
		Name:      name,
		Rows:      packRows,
		GroupSize: func(nb int) int { return packRows * nb * bsize },
		Pack:      pack,
		Unpack:    unpack,
		Mul:       packedMul(k, bsize, sizeQ8_K),
		Tolerance: kquantPackTol,
	}
}
