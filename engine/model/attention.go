package model

import (
	"math"
	"slices"

	"github.com/geisten/geist/neon"
	"github.com/geisten/geist/quant"
)

// Attention is tiled over queries and keys with an online softmax (as
// FlashAttention and llama.cpp's CPU flash path do it): a tile is up to
// attnRows query rows — the query heads that share one KV head, for
// several tokens of the batch — and it walks the keys in blocks of
// attnBlock positions, so each block of keys and values is read once per
// tile (and stays in the first-level cache while every row of the tile
// uses it) instead of once per query. A row skips the blocks past its
// last visible key (the causal mask costs nothing).
//
// Batch invariance: a row's result depends only on its query, the keys and
// values it sees and the block boundaries, which are fixed multiples of
// attnBlock of the position in its own key sequence, whatever the tile or
// the batch: its blocks are visited in ascending order, each block's
// scores, maximum, exponentials and weighted values are computed the same
// way alone or beside other rows, and the running maximum, sum and output
// are merged block after block in that one order. A tree token's key
// sequence is the cache it sees followed by its ancestors, exactly the
// sequence its path has once compacted into the cache, so a tree pass
// gives the bits of the chain.
const (
	attnBlock = 64 // key positions per block
	attnRows  = 32 // query rows per tile (at least one token's group)
)

// attnScratch is one worker's attention buffers.
type attnScratch struct {
	rows   []keySpan // [tileRows] the tile's rows
	sc     []float32 // [tileRows][attnBlock] one block's scores, then weights
	m      []float32 // [tileRows] running maximum score
	l      []float64 // [tileRows] running sum of weights
	kg, vg []uint16  // [attnBlock][HeadDim], [attnBlock][HeadDimV] a gathered F16 block
	// F16 cache with the set's tile kernels: a block converted once.
	kt, vf32 []float32 // [HeadDim][attnBlock] keys transposed, [attnBlock][HeadDimV] values
	kt2, vf2 []float32 // the same for a row's gathered block
	// F16 cache with half-precision scores (neon.AttnF16Scores): a block
	// of keys transposed, the same for a row's gathered block, and the
	// tile's queries scaled and rounded to half precision.
	kth, kth2, qh []uint16
	// Q8_0 cache:
	qq   []byte    // [attnRows][kRow] the rows' queries quantized
	vf   []float32 // [attnBlock][HeadDimV] a block of values dequantized
	vg32 []float32 // the same for a row's gathered block
	// Q8_0 cache, integer value sums (neon.AttnV8): a block of values
	// transposed, its scales, the same for a row's gathered block, and
	// the gathered Q8_0 rows.
	vt, vt2 []byte
	dv, dv2 []float32
	vgq     []byte
}

func (s *State) newAttnScratch(threads int) {
	c := &s.m.Config
	s.attnW = make([]attnScratch, max(threads, 1))
	R, hd, hdv := 0, 0, 0
	for l := range c.NLayer {
		R, hd, hdv = max(R, s.tileRows(l)), max(hd, c.HeadDimOf(l)), max(hdv, c.HeadDimVOf(l))
	}
	for i := range s.attnW {
		w := &s.attnW[i]
		w.rows = make([]keySpan, R)
		w.sc = make([]float32, R*attnBlock)
		w.m = make([]float32, R)
		w.l = make([]float64, R)
		if s.kvType == quant.Q8_0 {
			w.qq = make([]byte, R*slices.Max(s.kRow))
			w.vf = make([]float32, attnBlock*hdv)
			w.vg32 = make([]float32, attnBlock*hdv)
			nvt, nd := neon.V8Size(attnBlock, hdv)
			w.vt, w.vt2 = make([]byte, nvt), make([]byte, nvt)
			w.dv, w.dv2 = make([]float32, nd), make([]float32, nd)
			w.vgq = make([]byte, attnBlock*slices.Max(s.vRow))
			continue
		}
		w.kg = make([]uint16, attnBlock*hd)
		w.vg = make([]uint16, attnBlock*hdv)
		w.kt = make([]float32, attnBlock*hd)
		w.kt2 = make([]float32, attnBlock*hd)
		w.vf32 = make([]float32, attnBlock*hdv)
		w.vf2 = make([]float32, attnBlock*hdv)
		if tk := neon.Active().AttnTile; tk != nil && tk.SumRowsH != nil {
			w.kth, w.kth2 = make([]uint16, attnBlock*hd), make([]uint16, attnBlock*hd)
			w.qh = make([]uint16, R*hd)
		}
	}
}

// tileRows is the most query rows of a tile: attnRows, or one token's
// group of query heads when that is larger.
func (s *State) tileRows(l int) int {
	group := s.m.NHead / s.m.KVHeadsOf(l)
	return max(group, attnRows/group*group)
}

// attnTiles is how the attention job of a batch of n tokens is split into
// units: every KV head's query rows in tiles of tok tokens, and when that
// gives fewer units than workers, each tile's group of heads in parts.
type attnTiles struct {
	tok, tiles, parts int
}

func (s *State) attnSplit(n int) attnTiles {
	c := &s.m.Config
	kvh := c.KVHeadsOf(s.job.l)
	group := c.NHead / kvh
	t := attnTiles{tok: max(1, attnRows/group), parts: 1}
	t.tiles = (n + t.tok - 1) / t.tok
	if units := kvh * t.tiles; units < s.pool.n {
		t.parts = min(group, (s.pool.n+units-1)/units)
	}
	return t
}

// runAttention computes the attention output of every query head for the
// batch of the current job.
func (s *State) runAttention() {
	c := &s.m.Config
	s.job.tiles = s.attnSplit(s.job.n)
	s.pool.runWorker(s.attnFn, c.KVHeadsOf(s.job.l)*s.job.tiles.tiles*s.job.tiles.parts, 1)
}

// attnUnits computes units [lo, hi) of the attention job on worker w's
// scratch.
func (s *State) attnUnits(w, lo, hi int) {
	c := &s.m.Config
	group := c.NHead / c.KVHeadsOf(s.job.l)
	t := s.job.tiles
	for u := lo; u < hi; u++ {
		kvh, rem := u/(t.tiles*t.parts), u%(t.tiles*t.parts)
		tile, part := rem/t.parts, rem%t.parts
		i0, i1 := tile*t.tok, min((tile+1)*t.tok, s.job.n)
		g0, g1 := part*group/t.parts, (part+1)*group/t.parts
		s.attnTile(&s.attnW[w], kvh, i0, i1, g0, g1)
	}
}

// keySpan is what query row r of a tile sees: its token, its query head
// and its key sequence, positions [lo, vis+len(anc)) of the sequence of
// the cache positions [0, vis) and then the batch slots pos0+anc[j] (lo
// > 0 on a sliding-window layer).
type keySpan struct {
	tok, head int
	lo, vis   int
	anc       []int32
}

func (k keySpan) keys() int { return k.vis + len(k.anc) }

// slot is the cache slot of position j of the row's key sequence in a
// cache of cp slots.
func (k keySpan) slot(j, pos0, cp int) int {
	if j < k.vis {
		return j % cp
	}
	return (pos0 + int(k.anc[j-k.vis])) % cp
}

// attnTile runs the tile of tokens [i0, i1) and the query heads g0..g1-1
// of KV head kvh's group.
func (s *State) attnTile(w *attnScratch, kvh, i0, i1, g0, g1 int) {
	c, l := &s.m.Config, s.job.l
	group := c.NHead / c.KVHeadsOf(l)
	hd, hdv := c.HeadDimOf(l), c.HeadDimVOf(l)
	qDim := c.NHead * hd
	pos0 := s.job.pos0
	rows := w.rows
	nr, most, first := 0, 0, math.MaxInt
	for i := i0; i < i1; i++ {
		vis, anc := s.span(i, pos0)
		from, _, wanc := s.window(l, i, pos0)
		lo := from + len(anc) - len(wanc) // a window starting inside the ancestors
		for g := g0; g < g1; g++ {
			rows[nr] = keySpan{tok: i, head: kvh*group + g, lo: lo, vis: vis, anc: anc}
			most, first = max(most, rows[nr].keys()), min(first, lo)
			nr++
		}
	}
	for r := 0; r < nr; r++ {
		w.m[r] = float32(math.Inf(-1))
		w.l[r] = 0
		clear(s.attOut(rows[r], hdv))
	}
	first = first / attnBlock * attnBlock
	scale := s.attnScale(hd)
	if s.kvType == quant.Q8_0 && neon.AttnV8() {
		s.attnTileQ8V8(w, rows[:nr], kvh, first, most, scale)
	} else if s.kvType == quant.Q8_0 {
		s.attnTileQ8(w, rows[:nr], kvh, first, most, scale)
	} else if tk := neon.Active().AttnTile; tk != nil && hd%8 == 0 && hdv%64 == 0 {
		if w.kth != nil && neon.AttnF16() && tk.SumRowsH != nil {
			s.attnTileH(tk, w, rows[:nr], kvh, first, most, scale)
		} else {
			s.attnTileF16(tk, w, rows[:nr], kvh, first, most, scale)
		}
	} else {
		src := c.kvSrc(l)
		cp := s.kvCap[src]
		kc := s.kc[src][kvh*cp*hd : (kvh+1)*cp*hd]
		vc := s.vc[src][kvh*cp*hdv : (kvh+1)*cp*hdv]
		for b := first; b < most; b += attnBlock {
			off := b - b%cp // a block lies in one lap of a ring
			for r := 0; r < nr; r++ {
				row := &rows[r]
				rb, e := max(b, row.lo), min(b+attnBlock, row.keys())
				if e <= rb {
					continue // the causal mask (or the window): the whole block is hidden
				}
				k, v := kc[(rb-off)*hd:(e-off)*hd], vc[(rb-off)*hdv:(e-off)*hdv]
				if e > row.vis { // the block reaches into the row's ancestors
					for j := rb; j < e; j++ {
						t := row.slot(j, pos0, cp)
						copy(w.kg[(j-rb)*hd:(j-rb+1)*hd], kc[t*hd:(t+1)*hd])
						copy(w.vg[(j-rb)*hdv:(j-rb+1)*hdv], vc[t*hdv:(t+1)*hdv])
					}
					k, v = w.kg[:(e-rb)*hd], w.vg[:(e-rb)*hdv]
				}
				q := s.q[row.tok*qDim+row.head*hd : row.tok*qDim+(row.head+1)*hd]
				sc := w.sc[r*attnBlock : r*attnBlock+e-rb]
				neon.AttnScores(sc, q, k, scale)
				out := s.attOut(*row, hdv)
				s.softmaxBlock(w, r, sc, out, blockMax(sc))
				neon.AttnSum(out, sc, v)
			}
		}
	}
	for r := 0; r < nr; r++ {
		inv := float32(1 / w.l[r])
		out := s.attOut(rows[r], hdv)
		for d := range out {
			out[d] *= inv
		}
	}
}

// attnTileF16 is the tile's walk over an F16 cache with the set's tile
// kernels: each block of keys is converted to float32 (transposed) and
// its values to float32 once for the rows that see it whole from the
// cache; a token whose block reaches into its ancestors converts its own
// gathered block. The query heads of one token (consecutive rows, the
// same keys) are scored and summed together, against one load of the
// block for all of them; each row's bits are those of the row alone.
func (s *State) attnTileF16(tk *neon.AttnTileKernels, w *attnScratch, rows []keySpan, kvh, first, most int, scale float32) {
	c, l := &s.m.Config, s.job.l
	hd, hdv := c.HeadDimOf(l), c.HeadDimVOf(l)
	qDim := c.NHead * hd
	pos0, src := s.job.pos0, c.kvSrc(l)
	cp := s.kvCap[src]
	kc := s.kc[src][kvh*cp*hd : (kvh+1)*cp*hd]
	vc := s.vc[src][kvh*cp*hdv : (kvh+1)*cp*hdv]
	// A tile of one token's heads (decoding) sums the values straight
	// from the F16 cache when the set can: each block is read once.
	direct := tk.SumRowsF16 != nil && rows[0].tok == rows[len(rows)-1].tok
	for b := first; b < most; b += attnBlock {
		converted := false
		sb := b % cp // the block's first slot (a ring's size is a multiple of attnBlock)
		for r, n := 0, 0; r < len(rows); r += n {
			row := &rows[r]
			n = 1 // the token's heads: consecutive rows
			for r+n < len(rows) && rows[r+n].tok == row.tok {
				n++
			}
			rb, re := max(b, row.lo), min(b+attnBlock, row.keys())
			if re <= rb {
				continue // the causal mask (or the window): the whole block is hidden
			}
			kt, vf := w.kt, w.vf32
			if re > row.vis { // the block reaches into the token's ancestors
				clear(w.kg)
				for j := b; j < re; j++ {
					t := row.slot(j, pos0, cp)
					copy(w.kg[(j-b)*hd:(j-b+1)*hd], kc[t*hd:(t+1)*hd])
					copy(w.vg[(j-b)*hdv:(j-b+1)*hdv], vc[t*hdv:(t+1)*hdv])
				}
				kt, vf = w.kt2, w.vf2
				tk.KT(kt, w.kg, hd)
				tk.ToF32(vf[:(re-b)*hdv], w.vg[:(re-b)*hdv])
			} else if !converted {
				e := min(b+attnBlock, most)
				if sb+attnBlock <= cp {
					tk.KT(kt, kc[sb*hd:(sb+attnBlock)*hd], hd)
				} else { // the cache ends inside the block
					clear(w.kg)
					copy(w.kg, kc[sb*hd:])
					tk.KT(kt, w.kg, hd)
				}
				if !direct {
					tk.ToF32(vf[:(e-b)*hdv], vc[sb*hdv:(sb+e-b)*hdv])
				}
				converted = true
			}
			q0 := row.tok*qDim + row.head*hd
			tk.ScoresRows(w.sc[r*attnBlock:(r+n)*attnBlock], s.q[q0:q0+n*hd], hd, kt, scale)
			for i := r; i < r+n; i++ {
				sc := w.sc[i*attnBlock+rb-b : i*attnBlock+re-b]
				s.softmaxBlock(w, i, sc, s.attOut(rows[i], hdv), tk.Max(sc))
			}
			o0 := (row.tok*s.m.NHead + row.head) * hdv
			if direct && re <= row.vis {
				tk.SumRowsF16(s.att[o0:o0+n*hdv], hdv, w.sc[r*attnBlock+rb-b:], re-rb, vc[(sb+rb-b)*hdv:(sb+re-b)*hdv])
				continue
			}
			tk.SumRows(s.att[o0:o0+n*hdv], hdv, w.sc[r*attnBlock+rb-b:], re-rb, vf[(rb-b)*hdv:(re-b)*hdv])
		}
	}
}

// attnTileH is attnTileF16 with the values summed in half-precision
// arithmetic (neon.AttnF16) straight from the cache (or a token's
// gathered block), in runs that start at the row's first key of the
// block: each row's bits are those of the row alone. The scores are
// attnTileF16's (float32, the keys converted once per block), or with
// neon.AttnF16Scores in half precision too: the tile's queries scaled and
// rounded to half precision once, each block of keys transposed as it is.
func (s *State) attnTileH(tk *neon.AttnTileKernels, w *attnScratch, rows []keySpan, kvh, first, most int, scale float32) {
	c, l := &s.m.Config, s.job.l
	hd, hdv := c.HeadDimOf(l), c.HeadDimVOf(l)
	qDim := c.NHead * hd
	pos0, src := s.job.pos0, c.kvSrc(l)
	cp := s.kvCap[src]
	kc := s.kc[src][kvh*cp*hd : (kvh+1)*cp*hd]
	vc := s.vc[src][kvh*cp*hdv : (kvh+1)*cp*hdv]
	hs := neon.AttnF16Scores()
	if hs {
		for r, row := range rows {
			q0 := row.tok*qDim + row.head*hd
			neon.QH(w.qh[r*hd:(r+1)*hd], s.q[q0:q0+hd], scale)
		}
	}
	// the keys of a block transposed (halves or float32)
	kt := func(dst []uint16, dstF []float32, k []uint16) {
		if hs {
			tk.KTH(dst, k, hd)
		} else {
			tk.KT(dstF, k, hd)
		}
	}
	for b := first; b < most; b += attnBlock {
		converted := false
		sb := b % cp // the block's first slot (a ring's size is a multiple of attnBlock)
		for r, n := 0, 0; r < len(rows); r += n {
			row := &rows[r]
			n = 1 // the token's heads: consecutive rows
			for r+n < len(rows) && rows[r+n].tok == row.tok {
				n++
			}
			rb, re := max(b, row.lo), min(b+attnBlock, row.keys())
			if re <= rb {
				continue // the causal mask (or the window): the whole block is hidden
			}
			kh, kf, v := w.kth, w.kt, vc[(sb+rb-b)*hdv:(sb+re-b)*hdv]
			if re > row.vis { // the block reaches into the token's ancestors
				clear(w.kg)
				for j := b; j < re; j++ {
					t := row.slot(j, pos0, cp)
					copy(w.kg[(j-b)*hd:(j-b+1)*hd], kc[t*hd:(t+1)*hd])
					copy(w.vg[(j-b)*hdv:(j-b+1)*hdv], vc[t*hdv:(t+1)*hdv])
				}
				kh, kf, v = w.kth2, w.kt2, w.vg[(rb-b)*hdv:(re-b)*hdv]
				kt(kh, kf, w.kg)
			} else if !converted {
				if sb+attnBlock <= cp {
					kt(kh, kf, kc[sb*hd:(sb+attnBlock)*hd])
				} else { // the cache ends inside the block
					clear(w.kg)
					copy(w.kg, kc[sb*hd:])
					kt(kh, kf, w.kg)
				}
				converted = true
			}
			if hs {
				tk.ScoresRowsH(w.sc[r*attnBlock:(r+n)*attnBlock], w.qh[r*hd:(r+n)*hd], hd, kh)
			} else {
				q0 := row.tok*qDim + row.head*hd
				tk.ScoresRows(w.sc[r*attnBlock:(r+n)*attnBlock], s.q[q0:q0+n*hd], hd, kf, scale)
			}
			for i := r; i < r+n; i++ {
				sc := w.sc[i*attnBlock+rb-b : i*attnBlock+re-b]
				s.softmaxBlock(w, i, sc, s.attOut(rows[i], hdv), tk.Max(sc))
			}
			o0 := (row.tok*s.m.NHead + row.head) * hdv
			tk.SumRowsH(s.att[o0:o0+n*hdv], hdv, w.sc[r*attnBlock+rb-b:], re-rb, v)
		}
	}
}

// attOut is the attention output of a row.
func (s *State) attOut(r keySpan, hdv int) []float32 {
	o := (r.tok*s.m.NHead + r.head) * hdv
	return s.att[o : o+hdv]
}

// softmaxBlock turns row r's scores of one block into weights relative to
// the running maximum, rescaling the row's output and sum when the block
// raises the maximum.
func (s *State) softmaxBlock(w *attnScratch, r int, sc, out []float32, mb float32) {
	if mb > w.m[r] {
		if !math.IsInf(float64(w.m[r]), -1) {
			f := neon.Exp(w.m[r] - mb)
			for d := range out {
				out[d] *= f
			}
			w.l[r] *= float64(f)
		}
		w.m[r] = mb
	}
	w.l[r] += neon.ExpSubSum(sc, w.m[r])
}

// blockMax is the largest of x (not empty).
func blockMax(x []float32) float32 {
	m := x[0]
	for _, v := range x[1:] {
		if v > m { // scores are never NaN
			m = v
		}
	}
	return m
}

// attnTileQ8 is the tile's walk over a Q8_0 cache: each row's query is
// quantized to Q8_0 for integer dots with the keys (as llama.cpp's Q8_0
// path), a block of keys against every row of the tile per call; each
// block of values is dequantized once for the whole tile. A row whose
// block reaches into its ancestors (a tree token) is scored and summed
// over a gathered block instead. A row of a sliding-window layer uses the
// part of each block from its first visible key on.
func (s *State) attnTileQ8(w *attnScratch, rows []keySpan, kvh, first, most int, scale float32) {
	c, l := &s.m.Config, s.job.l
	hd, hdv := c.HeadDimOf(l), c.HeadDimVOf(l)
	qDim := c.NHead * hd
	src := c.kvSrc(l)
	pos0, kR, vR, cp := s.job.pos0, s.kRow[l], s.vRow[l], s.kvCap[src]
	nbk := hd / 32
	kq := s.kq[src][kvh*cp*kR : (kvh+1)*cp*kR]
	vq := s.vq[src][kvh*cp*vR : (kvh+1)*cp*vR]
	nr := len(rows)
	tk := neon.Active().AttnTile // its fused sums when the set has them
	if hdv%64 != 0 {
		tk = nil
	}
	for r, row := range rows {
		neon.QuantizeQ8_0(w.qq[r*kR:(r+1)*kR], s.q[row.tok*qDim+row.head*hd:row.tok*qDim+(row.head+1)*hd])
	}
	// A tile of one token's heads (decoding) sums the values of the
	// blocks it reads whole from the Q8_0 cache straight from it when the
	// set can (four rows at a time where there are four): no such block
	// is dequantized to float32 first.
	direct := tk != nil && tk.SumRowsQ8_0 != nil && rows[0].tok == rows[nr-1].tok
	for b := first; b < most; b += attnBlock {
		// Slots [b, e) hold keys every row reads from the cache or (past
		// its visible ones, or before its window) does not read: score
		// them against all rows.
		e := min(b+attnBlock, most)
		sb := b % cp // the block's first slot (a ring's size is a multiple of attnBlock)
		neon.ScoresQ8_0(w.sc, kq[sb*kR:(sb+e-b)*kR], kR, w.qq, kR, nbk, e-b, nr, scale)
		if row := &rows[0]; direct && min(b+attnBlock, row.keys()) <= row.vis {
			// every row sees the same keys, all from the cache
			rb, re := max(b, row.lo), min(b+attnBlock, row.keys())
			if re <= rb {
				continue
			}
			for r := range rows {
				sc := w.sc[r*attnBlock+rb-b : r*attnBlock+re-b]
				s.softmaxBlock(w, r, sc, s.attOut(rows[r], hdv), tk.Max(sc))
			}
			o0 := (row.tok*s.m.NHead + row.head) * hdv
			tk.SumRowsQ8_0(s.att[o0:o0+nr*hdv], hdv, w.sc[rb-b:], re-rb, vq[(sb+rb-b)*vR:(sb+re-b)*vR], vR)
			continue
		}
		neon.DequantQ8_0(w.vf[:(e-b)*hdv], vq[sb*vR:(sb+e-b)*vR])
		for r := range rows {
			row := &rows[r]
			rb, re := max(b, row.lo), min(b+attnBlock, row.keys())
			if re <= rb {
				continue // the causal mask (or the window): the whole block is hidden
			}
			sc := w.sc[r*attnBlock+rb-b : r*attnBlock+re-b]
			vf := w.vf[(rb-b)*hdv : (re-b)*hdv]
			if re > row.vis {
				for j := max(rb, row.vis); j < re; j++ {
					t := row.slot(j, pos0, cp)
					neon.DotQ8_0Q8_0(sc[j-rb:j-rb+1], kq[t*kR:(t+1)*kR], w.qq[r*kR:(r+1)*kR], 0, nbk, 1)
					sc[j-rb] *= scale
				}
				vf = w.vg32[:(re-rb)*hdv]
				copy(vf, w.vf[(rb-b)*hdv:(re-b)*hdv])
				for j := max(rb, row.vis); j < re; j++ {
					t := row.slot(j, pos0, cp)
					neon.DequantQ8_0(vf[(j-rb)*hdv:(j-rb+1)*hdv], vq[t*vR:(t+1)*vR])
				}
			}
			out := s.attOut(*row, hdv)
			if tk != nil {
				s.softmaxBlock(w, r, sc, out, tk.Max(sc))
				tk.Sum(out, sc, vf)
			} else {
				s.softmaxBlock(w, r, sc, out, blockMax(sc))
				neon.AttnSumF32(out, sc, vf)
			}
		}
	}
}

// attnTileQ8V8 is attnTileQ8 with the values summed in integer
// arithmetic (neon.SumV8): each block of values is transposed once for
// the tile (neon.TransposeV8), and every row adds its weights times it,
// its weights quantized per group of 32 positions of the block; a row
// whose block reaches into its ancestors transposes its own gathered
// block. A row's bits depend only on its keys and weights, the same
// whatever the tile or batch.
func (s *State) attnTileQ8V8(w *attnScratch, rows []keySpan, kvh, first, most int, scale float32) {
	c, l := &s.m.Config, s.job.l
	hd, hdv := c.HeadDimOf(l), c.HeadDimVOf(l)
	qDim := c.NHead * hd
	src := c.kvSrc(l)
	pos0, kR, vR, cp := s.job.pos0, s.kRow[l], s.vRow[l], s.kvCap[src]
	nbk := hd / 32
	kq := s.kq[src][kvh*cp*kR : (kvh+1)*cp*kR]
	vq := s.vq[src][kvh*cp*vR : (kvh+1)*cp*vR]
	nr := len(rows)
	k := neon.Active()
	maxf := blockMax
	if tk := k.AttnTile; tk != nil {
		maxf = tk.Max
	}
	for r, row := range rows {
		k.QuantizeQ8_0(w.qq[r*kR:(r+1)*kR], s.q[row.tok*qDim+row.head*hd:row.tok*qDim+(row.head+1)*hd])
	}
	for b := first; b < most; b += attnBlock {
		e := min(b+attnBlock, most)
		sb := b % cp // the block's first slot (a ring's size is a multiple of attnBlock)
		k.ScoresQ8_0(w.sc, kq[sb*kR:(sb+e-b)*kR], kR, w.qq, kR, nbk, e-b, nr, scale)
		k.TransposeV8(w.vt, w.dv, vq[sb*vR:(sb+e-b)*vR], vR, e-b, hdv)
		for r := range rows {
			row := &rows[r]
			rb, re := max(b, row.lo), min(b+attnBlock, row.keys())
			if re <= rb {
				continue // the causal mask (or the window): the whole block is hidden
			}
			sc := w.sc[r*attnBlock : (r+1)*attnBlock]
			vt, dv := w.vt, w.dv
			if re > row.vis { // the block reaches into the row's ancestors
				for j := max(rb, row.vis); j < re; j++ {
					t := row.slot(j, pos0, cp)
					k.DotQ8_0Q8_0(sc[j-b:j-b+1], kq[t*kR:(t+1)*kR], w.qq[r*kR:(r+1)*kR], 0, nbk, 1)
					sc[j-b] *= scale
				}
				for j := b; j < re; j++ {
					t := row.slot(j, pos0, cp)
					copy(w.vgq[(j-b)*vR:(j-b+1)*vR], vq[t*vR:(t+1)*vR])
				}
				vt, dv = w.vt2, w.dv2
				k.TransposeV8(vt, dv, w.vgq[:(re-b)*vR], vR, re-b, hdv)
			}
			ws := sc[rb-b : re-b]
			s.softmaxBlock(w, r, ws, s.attOut(*row, hdv), maxf(ws))
			k.SumV8(s.attOut(*row, hdv), sc, rb-b, re-b, vt, dv)
		}
	}
}
