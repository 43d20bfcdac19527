package model

import (
	"errors"
	"fmt"
	"math"

	"github.com/geisten/geist/neon"
	"github.com/geisten/geist/quant"
)

// What the model-native drafters (a Gemma 4 assistant, an EAGLE-3 head)
// read from the target's state: the target's hidden state at the rows of
// the last pass, the residual stream entering chosen layers (EAGLE-3's
// features), and the target's own KV cache (the assistant attends over
// it). All of it is kept from the passes the target runs anyway: no second
// forward pass, no allocation per token.

// CaptureInputs makes every later pass keep, for each of its tokens, the
// residual stream entering each of layers (a layer index equal to NLayer
// means the final state after the output norm, the head's input, as
// llama.cpp hands an EAGLE-3 head for it), concatenated in that order:
// Features reads them. The buffer is sized once, for a whole batch.
func (s *State) CaptureInputs(layers []int) error {
	for _, l := range layers {
		if l < 0 || l > s.m.NLayer {
			return fmt.Errorf("model: feature layer %d out of range [0, %d]", l, s.m.NLayer)
		}
	}
	s.capLayers = append([]int(nil), layers...)
	s.feat = make([]float32, s.maxBatch*len(layers)*s.m.NEmbd)
	return nil
}

// FeatureWidth is the width of one token's captured features.
func (s *State) FeatureWidth() int { return len(s.capLayers) * s.m.NEmbd }

// Features returns batch row i's captured features of the last pass (the
// state's own buffer: read it before the next pass).
func (s *State) Features(i int) []float32 {
	w := s.FeatureWidth()
	return s.feat[i*w : (i+1)*w]
}

// capture copies the residual stream of the batch's n rows into the
// feature slots of every captured layer l.
func (s *State) capture(l, n int) {
	E, w := s.m.NEmbd, s.FeatureWidth()
	for k, cl := range s.capLayers {
		if cl != l {
			continue
		}
		for i := 0; i < n; i++ {
			if l == s.m.NLayer {
				RMSNorm(s.feat[i*w+k*E:i*w+(k+1)*E], s.x[i*E:(i+1)*E], s.m.OutNorm, s.m.NormEps)
				continue
			}
			copy(s.feat[i*w+k*E:i*w+(k+1)*E], s.x[i*E:(i+1)*E])
		}
	}
}

// HiddenNormed writes batch row i's final hidden state of the last pass
// after the output norm (the input of the output head) into dst. After a
// ForwardBatch pass, i is the row among this state's own rows of it
// (KeepRows).
func (s *State) HiddenNormed(i int, dst []float32) {
	E := s.m.NEmbd
	x := s.x
	if s.hxOn {
		x = s.hx
	}
	RMSNorm(dst[:E], x[i*E:(i+1)*E], s.m.OutNorm, s.m.NormEps)
}

// KeepRows makes every ForwardBatch pass over this state (a slot, or the
// workspace as one of the pass's sequences) keep its rows' final hidden
// states in a buffer of its own (MaxBatch rows, sized once), so that
// HiddenNormed reads them after the workspace's row buffers have moved on
// to other passes: a model-native drafter of a batched sequence reads
// them between its passes.
func (s *State) KeepRows() {
	if s.hx == nil {
		s.hx = make([]float32, s.maxBatch*s.m.NEmbd)
	}
}

// keepBatch copies the final hidden rows of every sequence of seqs that
// keeps them (KeepRows) into its own buffer.
func (s *State) keepBatch(seqs []Seq) {
	E := s.m.NEmbd
	r := 0
	for i := range seqs {
		S, k := seqs[i].S, len(seqs[i].Tokens)
		if S.hx != nil {
			copy(S.hx[:k*E], s.x[r*E:(r+k)*E])
			S.hxOn = true
		}
		r += k
	}
}

// captureBatch is capture over a batched pass: each sequence of seqs that
// captures features (CaptureInputs, the same layers as every other) gets
// its rows' residual stream entering layer l in its own buffer, its first
// row first.
func (s *State) captureBatch(seqs []Seq, l int) {
	E := s.m.NEmbd
	r := 0
	for i := range seqs {
		S, k := seqs[i].S, len(seqs[i].Tokens)
		w := S.FeatureWidth()
		for c, cl := range S.capLayers {
			if cl != l {
				continue
			}
			for j := 0; j < k; j++ {
				dst, src := S.feat[j*w+c*E:j*w+(c+1)*E], s.x[(r+j)*E:(r+j+1)*E]
				if l == s.m.NLayer {
					RMSNorm(dst, src, s.m.OutNorm, s.m.NormEps)
					continue
				}
				copy(dst, src)
			}
		}
		r += k
	}
}

// attendCache computes one query head's attention over layer l's cached
// keys and values of positions [from, to) for KV head kvh: out (the value
// width) = Σ softmax(scale·q·k)·v. sc holds to-from scores, row a key or
// value row in float32 (Q8_0 caches).
func (s *State) attendCache(l, kvh int, q []float32, from, to int, scale float32, sc, row, out []float32) {
	c := &s.m.Config
	src := c.kvSrc(l)
	hd, hdv := c.HeadDimOf(l), c.HeadDimVOf(l)
	cp := s.kvCap[src]
	ks := neon.Active()
	sc = sc[:to-from]
	for p := from; p < to; p++ {
		slot := s.slot(src, p)
		if s.kvType == quant.Q8_0 {
			kR := s.kRow[src]
			quant.DequantizeRow(quant.Q8_0, s.kq[src][(kvh*cp+slot)*kR:(kvh*cp+slot+1)*kR], row[:hd])
			var d float32
			for j, v := range q[:hd] {
				d += v * row[j]
			}
			sc[p-from] = d * scale
			continue
		}
		sc[p-from] = ks.DotF32F16(q[:hd], s.kc[src][(kvh*cp+slot)*hd:(kvh*cp+slot+1)*hd]) * scale
	}
	Softmax(sc)
	out = out[:hdv]
	clear(out)
	for p := from; p < to; p++ {
		slot := s.slot(src, p)
		w := sc[p-from]
		if s.kvType == quant.Q8_0 {
			vR := s.vRow[src]
			quant.DequantizeRow(quant.Q8_0, s.vq[src][(kvh*cp+slot)*vR:(kvh*cp+slot+1)*vR], row[:hdv])
			for j := range out {
				out[j] += w * row[j]
			}
			continue
		}
		ks.AxpyF16(out, w, s.vc[src][(kvh*cp+slot)*hdv:(kvh*cp+slot+1)*hdv])
	}
}

// errNoKV is returned when a drafter asks for keys the target's cache no
// longer holds (a ring that moved on).
var errNoKV = errors.New("model: the target's cache no longer holds the keys the drafter reads")

// dense is a single-threaded matrix product helper for the drafters: out
// = w·x for one row, its activations in buf (sized once).
func dense(w *quant.Matrix, out, x []float32, buf []byte) {
	w.QuantizeActsRows(buf, x, 1, 0, 1)
	w.MulRows(out, w.Rows, buf, 1, 0, w.Rows)
}

// ropeTableFor is ropeTable without a State: the cos/sin of every rotated
// pair of dims at position p (ggml's recurrence, in float32).
func ropeTableFor(cs []float32, p int, base float32, freqs []float32) {
	dims := len(cs)
	thetaScale := float32(math.Pow(float64(base), -2/float64(dims)))
	theta := float32(p)
	for i := 0; i < dims; i += 2 {
		ff := float32(1)
		if freqs != nil {
			ff = freqs[i/2]
		}
		th := theta / ff
		cs[i] = float32(math.Cos(float64(th)))
		cs[i+1] = float32(math.Sin(float64(th)))
		theta *= thetaScale
	}
}

// ropeApply rotates the first len(cs) dims of x with the table cs, in
// split-halves (neox) or adjacent pairs.
func ropeApply(x, cs []float32, neox bool) {
	dims := len(cs)
	half := dims / 2
	for i := 0; i < dims; i += 2 {
		cos, sin := cs[i], cs[i+1]
		var a, b *float32
		if neox {
			a, b = &x[i/2], &x[i/2+half]
		} else {
			a, b = &x[i], &x[i+1]
		}
		x0, x1 := *a, *b
		*a = x0*cos - x1*sin
		*b = x0*sin + x1*cos
	}
}

// HeadProduct computes out = the output head · x for one row x (already
// normed), on the state's workers: a drafter's logits between passes.
// Only the head's first rows are computed (rows ≤ 0: all; the others are
// left as they are).
func (s *State) HeadProduct(out, x []float32, rows int) {
	if rows <= 0 || rows > s.m.Output.Rows {
		rows = s.m.Output.Rows
	}
	s.mulLimit(x, 1, rows, product{w: s.m.Output, out: out})
}
