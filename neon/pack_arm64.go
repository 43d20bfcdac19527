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

// legacyAt is the byte map of the Q4_0 (qsize 16) and Q8_0 (qsize 32)
// layouts: byte i of row r's block (the F16 scale in bytes 0-1, then the
// quants) -> its offset in the packed block of eight rows, and what it is
// XORed with there (Q4_0's quants with 0x88, see _asm/packdp.go).
func legacyAt(qsize int, xor byte) func(r, i int) (int, byte) {
	return func(r, i int) (int, byte) {
		if i < 2 {
			return 2*r + i, 0
		}
		q, h, rr := i-2, r/4, r%4
		return 16 + h*4*qsize + (q/4)*16 + rr*4 + q%4, xor
	}
}

// packedMul wraps a packed-group kernel: it checks the buffers (a short
// one panics with errShort, a caller bug) and runs the kernel over every
// whole group in g.
func packedMul(k func(out *float32, ldo int, g *byte, ngroups int, a *byte, aStride, nb, n int), wsize, asize int) func(out []float32, ldo int, g []byte, a []byte, aStride, nb, n int) {
	return func(out []float32, ldo int, g []byte, a []byte, aStride, nb, n int) {
		if n < 1 || nb < 1 || nb > (1<<40)/(packRows*wsize) {
			panic(errShort)
		}
		gs := packRows * nb * wsize
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

// newPacking is a packed layout of eight rows per group, same size as in
// ggml layout: byte map at (row r, byte i of a ggml block of bsize bytes)
// -> offset in the packed block of eight rows and the XOR stored there;
// kernel k; tolerance tol against the generic dots (0: bit-identical).
func newPacking(name string, bsize int, at func(r, i int) (int, byte), k func(out *float32, ldo int, g *byte, ngroups int, a *byte, aStride, nb, n int), asize int, tol float64) *Packing {
	pack, unpack := packedBytes(bsize, at)
	return &Packing{
		Name:      name,
		Rows:      packRows,
		GroupSize: func(nb int) int { return packRows * nb * bsize },
		Pack:      pack,
		Unpack:    unpack,
		Mul:       packedMul(k, bsize, asize),
		Tolerance: tol,
	}
}

//go:noescape
func mulQ4_Kx8DP(out *float32, ldo int, w *byte, ngroups int, a *byte, aStride, nb, n int)

// q4kAt maps byte i of a Q4_K super-block of row r (< 8) to its offset in
// the packed super-block of eight rows (see _asm/packkq.go).
func q4kAt(r, i int) (int, byte) {
	h, rr := r/4, r%4
	switch {
	case i < 2: // d
		return 2*r + i, 0
	case i < 4: // dmin
		return 16 + 2*r + i - 2, 0
	case i < 16: // scales: word (i-4)/4, byte (i-4)%4
		return 32 + 48*h + 16*((i-4)/4) + 4*((i-4)%4) + rr, 0
	}
	q := i - 16 // nibbles: pair q/32, byte l = q%32
	l := q % 32
	return 128 + 256*(q/32) + 128*h + 16*(l/4) + 4*rr + l%4, 0
}

// prepQ8_KDigits prepares Q8_K activation blocks for the packed K-quant
// kernels (ActKey "q8_K-digits"): each block keeps its size, d and quants
// (bytes 0-259); its sixteen 16-value sums make way for what the Q4_K
// kernel's mins take, the eight 32-value sums s_j split into two int8
// digits, lo_j = s_j & 63 at 272+j and hi_j = s_j >> 6 at 280+j (s_j =
// 64·hi_j + lo_j, |s_j| <= 32·128; the rest zero). Done once per column
// and product, it saves the kernel four instructions per column, half and
// super-block; the Q6_K kernel reads only d and the quants.
func prepQ8_KDigits(dst, a []byte, nb int) {
	_, _ = a[nb*sizeQ8_K-1], dst[nb*sizeQ8_K-1]
	for b := 0; b < nb; b++ {
		e, y := dst[b*sizeQ8_K:(b+1)*sizeQ8_K], a[b*sizeQ8_K:(b+1)*sizeQ8_K]
		copy(e[:260], y[:260])
		clear(e[260:])
		for j := 0; j < 8; j++ {
			s := int16(uint16(y[260+4*j])|uint16(y[261+4*j])<<8) + int16(uint16(y[262+4*j])|uint16(y[263+4*j])<<8)
			e[272+j] = byte(s & 63)
			e[280+j] = byte(s >> 6)
		}
	}
}

// withQ8_KDigits gives p the activations of prepQ8_KDigits.
func withQ8_KDigits(p *Packing) *Packing {
	p.ActRowSize = func(nb int) int { return nb * sizeQ8_K }
	p.PrepActs = prepQ8_KDigits
	p.ActKey = "q8_K-digits"
	return p
}

// kquantPackTol is the tolerance of the packed k-quant kernels against the
// generic dots (as the arm64 one-row k-quant dots: exact integer sums per
// super-block, float steps in another order and fused).
const kquantPackTol = 2e-6

//go:noescape
func mulQ6_Kx8DP(out *float32, ldo int, w *byte, ngroups int, a *byte, aStride, nb, n int)

// q6kAt maps byte i of a Q6_K super-block of row r (< 8) to its offset in
// the packed super-block of eight rows (see _asm/packq6.go).
func q6kAt(r, i int) (int, byte) {
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
		return step(i/64, m%32/16, m/32, m%16), 0
	case i < 192: // qh
		q := i - 128
		return step(q/32, q%32/16, 2, q%16), 0xaa
	case i < 208: // scales: sub-block j = 8hh + c + 2k
		j := i - 192
		return 16 + 64*h + 16*(2*(j/8)+j%2) + 4*(j%8/2) + rr, 0
	}
	return 2*r + i - 208, 0 // d
}

// packedBytes is a packing's Pack and Unpack for a byte map (see
// newPacking), turned into a permutation once.
func packedBytes(bsize int, at func(r, i int) (int, byte)) (pack func(dst, w []byte, wStride, nb int), unpack func(dst, g []byte, r, nb int)) {
	gs := packRows * bsize
	perm := make([]int32, gs) // byte i of row r -> perm[r*bsize+i], XORed with xor[...]
	xor := make([]byte, gs)
	for r := 0; r < packRows; r++ {
		for i := 0; i < bsize; i++ {
			o, x := at(r, i)
			perm[r*bsize+i], xor[r*bsize+i] = int32(o), x
		}
	}
	pack = func(dst, w []byte, wStride, nb int) {
		_ = dst[nb*gs-1]
		for b := 0; b < nb; b++ {
			d := dst[b*gs : (b+1)*gs]
			for r := 0; r < packRows; r++ {
				p, x := perm[r*bsize:(r+1)*bsize], xor[r*bsize:(r+1)*bsize]
				for i, v := range w[r*wStride+b*bsize:][:bsize] {
					d[p[i]] = v ^ x[i]
				}
			}
		}
	}
	unpack = func(dst, g []byte, r, nb int) {
		_ = g[nb*gs-1]
		p, x := perm[r*bsize:(r+1)*bsize], xor[r*bsize:(r+1)*bsize]
		for b := 0; b < nb; b++ {
			d, y := g[b*gs:(b+1)*gs], dst[b*bsize:][:bsize]
			for i := range y {
				y[i] = d[p[i]] ^ x[i]
			}
		}
	}
	return pack, unpack
}
