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
func packedMul(k func(out *float32, ldo int, g *byte, ngroups int, a *byte, aStride, nb, n int), l packedLayout) func(out []float32, ldo int, g []byte, a []byte, aStride, nb, n int) {
	return func(out []float32, ldo int, g []byte, a []byte, aStride, nb, n int) {
		gs := packRows * nb * l.wsize
		if n < 1 || nb < 1 || nb > (1<<40)/gs {
			panic(errShort)
		}
		ng := len(g) / gs
		if ng == 0 {
			return
		}
		if ldo < 0 || aStride < 0 || (n > 1 && ldo < ng*packRows) || (len(out)-ng*packRows)/max(ldo, 1) < n-1 ||
			len(out) < ng*packRows || len(a) < nb*sizeQ8_0 || (n > 1 && (len(a)-nb*sizeQ8_0)/(n-1) < aStride) {
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
		Mul:       packedMul(k, l),
	}
}
