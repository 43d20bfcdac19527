package model

import (
	"fmt"
	"math"
)

// The short-convolution block (lfm2) and its recurrent state.
//
// A convolution layer projects its normed input to B, C and x (three
// slices of one in-projection), convolves B⊙x causally over the current
// position and the ConvTaps before it, one kernel per channel, gates the
// result with C and projects it out:
//
//	y[p] = out_proj(C[p] ⊙ Σ_j w[j] ⊙ (B⊙x)[p-ConvTaps+j])
//
// The layer's state at position p is thus the rows (B⊙x) of the ConvTaps
// positions before p (zeros before the first token): a recurrent state,
// which truncating the KV cache alone does not rewind. The State keeps
//   - a ring of the rows of the last positions, enough for a verification
//     pass and its rewinding: a rejected draft, a tree's dropped branches
//     and Compact cost nothing more than they do for the KV cache, and a
//     tree node reads its ancestors' rows from the batch and the cache's
//     from the ring, so it computes exactly what its path alone computes;
//   - checkpoints, the state at every convEvery-th position, so that
//     Truncate to an older position (a prompt sharing only a prefix with
//     the last) rewinds to the checkpoint at or before it, exactly, and
//     the caller recomputes the few tokens after it (ExactPrefix says where);
//   - in snapshots (the prompt cache), the state at the snapshot's end
//     beside the keys and values.

// convEvery is the checkpoint interval in positions. A checkpoint costs
// ConvTaps rows per convolution layer (160 KiB for LFM2-1.2B), so the
// checkpoints of a 4096-token context take 10 MiB there; a rewind past
// the ring recomputes at most convEvery-1 tokens.
const convEvery = 64

// convRingSlack is how many positions the ring keeps beyond a
// verification pass and the convolution's reach.
const convRingSlack = 8

// convState is the recurrent state of a State's convolution layers.
type convState struct {
	taps int         // rows the convolution reads before the current one
	R    int         // ring rows: position p in row p%R
	ring [][]float32 // per layer (nil for attention layers): [R][NEmbd] B⊙x rows
	lo   int         // the ring holds the rows of positions [lo, Len())
	ck   [][]float32 // per layer: [ctx/convEvery+1][taps][NEmbd] checkpoints
	ckOK []bool      // checkpoint k holds the state at position k·convEvery
	bcx  []float32   // [maxBatch][3·NEmbd] in-projection output
	bx   []float32   // [maxBatch][NEmbd] B⊙x of the batch
	y    []float32   // [maxBatch][NEmbd] gated convolution output
}

// newConvState sizes the convolution state of s (nothing for a model
// without convolution layers). full keeps every position's row.
func (s *State) newConvState(full bool) {
	c := &s.m.Config
	if c.ConvLayers() == 0 {
		return
	}
	E := c.NEmbd
	cs := &s.conv
	cs.taps = c.ConvTaps
	cs.R = s.maxRows + cs.taps + convRingSlack
	if full {
		cs.R = s.ctx + cs.taps
	}
	cs.R = min(cs.R, s.ctx+cs.taps)
	nck := s.ctx/convEvery + 1
	cs.ring = make([][]float32, c.NLayer)
	cs.ck = make([][]float32, c.NLayer)
	for l := range c.NLayer {
		if c.IsConv(l) {
			cs.ring[l] = make([]float32, cs.R*E)
			cs.ck[l] = make([]float32, nck*cs.taps*E)
		}
	}
	cs.ckOK = make([]bool, nck)
	cs.bcx = make([]float32, s.maxBatch*3*E)
	cs.bx = make([]float32, s.maxBatch*E)
	cs.y = make([]float32, s.maxBatch*E)
}

// hasConv reports whether the model has convolution layers.
func (s *State) hasConv() bool { return s.conv.ring != nil }

// ringRow is the ring row of position p of layer l (nil for p < 0: zeros).
func (cs *convState) ringRow(l, p, E int) []float32 {
	if p < 0 {
		return nil
	}
	r := p % cs.R
	return cs.ring[l][r*E : (r+1)*E]
}

// histRow is the B⊙x row that batch token i reads back positions before
// its own, in layer l: an ancestor's (or, in a causal pass, an earlier
// token's) row of this batch, else the cache's row from the ring (nil:
// before the first position, zeros).
func (s *State) histRow(l, i, back, pos0 int) []float32 {
	E := s.m.NEmbd
	cs := &s.conv
	if !s.lay.on {
		if i-back >= 0 {
			return cs.bx[(i-back)*E : (i-back+1)*E]
		}
		return cs.ringRow(l, pos0+i-back, E)
	}
	vis, anc := s.span(i, pos0)
	if k := len(anc) - 1; back <= k {
		a := int(anc[k-back])
		return cs.bx[a*E : (a+1)*E]
	} else {
		return cs.ringRow(l, vis-(back-k), E)
	}
}

// shortConv runs layer l's convolution block over the batch of n tokens
// at pos0, adding its output to the residual stream, and keeps the rows
// the next passes read (not for a probe, which changes no state).
// Its three parts, as attention's: the input projection, the rows' own
// work against this state's rows, the output projection.
func (s *State) shortConv(l, n, pos0 int, probe bool) {
	s.shortConvIn(l, n)
	s.shortConvRows(l, n, pos0)
	s.shortConvOut(l, n)
	if !probe {
		s.shortConvKeep(l, n, pos0)
	}
}

// shortConvIn computes the input projection of n rows of layer l.
func (s *State) shortConvIn(l, n int) {
	c, L := &s.m.Config, &s.m.Layers[l]
	E := c.NEmbd
	for i := 0; i < n; i++ {
		RMSNorm(s.xb[i*E:(i+1)*E], s.x[i*E:(i+1)*E], L.AttnNorm, c.NormEps)
	}
	s.mul(s.xb, n, product{w: L.ConvIn, out: s.conv.bcx})
}

// shortConvOut projects the convolution outputs of n rows and adds them
// to the residual stream.
func (s *State) shortConvOut(l, n int) {
	E := s.m.NEmbd
	s.mul(s.conv.y, n, product{w: s.m.Layers[l].ConvOut, out: s.proj})
	addTo(s.x[:n*E], s.proj[:n*E])
}

// shortConvRows computes the rows' gated convolution (into conv.y) from
// their projections and this state's rows.
func (s *State) shortConvRows(l, n, pos0 int) {
	c, L := &s.m.Config, &s.m.Layers[l]
	cs := &s.conv
	E, taps := c.NEmbd, cs.taps
	for i := 0; i < n; i++ {
		bcx := cs.bcx[i*3*E : (i+1)*3*E]
		b, x := bcx[:E], bcx[2*E:]
		bx := cs.bx[i*E : (i+1)*E]
		for j := range bx {
			bx[j] = b[j] * x[j]
		}
	}
	for i := 0; i < n; i++ {
		// ggml_ssm_conv's order: the oldest tap first, summed from zero
		// in float32. A zero row adds nothing (x + ±0 == x), so the
		// rows before the first position are skipped.
		y := cs.y[i*E : (i+1)*E]
		clear(y)
		for j := 0; j <= taps; j++ {
			var r []float32
			if j == taps {
				r = cs.bx[i*E : (i+1)*E]
			} else {
				r = s.histRow(l, i, taps-j, pos0)
			}
			if r != nil {
				convTap(y, L.ConvW[j*E:(j+1)*E], r)
			}
		}
		cc := cs.bcx[i*3*E+E : i*3*E+2*E]
		for j := range y {
			y[j] *= cc[j]
		}
	}
}

// shortConvKeep keeps the rows of a pass (not a probe's) that the next
// passes read, and the checkpoints it crosses.
func (s *State) shortConvKeep(l, n, pos0 int) {
	cs := &s.conv
	E, taps := s.m.NEmbd, cs.taps
	// Keep the rows: the last R of a causal pass, every node of a tree
	// (which is never longer than the ring's verification share).
	for i := max(0, n-cs.R); i < n; i++ {
		copy(cs.ringRow(l, pos0+i, E), cs.bx[i*E:(i+1)*E])
	}
	if s.lay.on || s.skip != nil {
		return // checkpoints only hold the target's own causal rows (Compact writes a tree's)
	}
	for q := (pos0/convEvery + 1) * convEvery; q <= pos0+n; q += convEvery {
		ck := cs.ck[l][q/convEvery*taps*E : (q/convEvery+1)*taps*E]
		for j := 0; j < taps; j++ {
			p := q - taps + j
			switch {
			case p < 0:
				clear(ck[j*E : (j+1)*E])
			case p >= pos0:
				copy(ck[j*E:(j+1)*E], cs.bx[(p-pos0)*E:(p-pos0+1)*E])
			default:
				copy(ck[j*E:(j+1)*E], cs.ringRow(l, p, E))
			}
		}
	}
}

// convTap adds w⊙r to y, each product rounded to float32 before the add
// (no fused multiply-add, as ggml's loop: the same bits on every
// platform).
func convTap(y, w, r []float32) {
	_, _ = w[len(y)-1], r[len(y)-1]
	for j := range y {
		y[j] += float32(w[j] * r[j])
	}
}

// convPassEnd updates the ring's extent and the checkpoint flags after a
// pass of n tokens at pos0 (not a probe).
func (s *State) convPassEnd(n, pos0 int) {
	cs := &s.conv
	cs.lo = max(cs.lo, pos0+n-cs.R)
	if s.lay.on || s.skip != nil {
		return
	}
	for q := (pos0/convEvery + 1) * convEvery; q <= pos0+n; q += convEvery {
		cs.ckOK[q/convEvery] = true
	}
}

// inRing reports whether the ring holds the state at position p (the rows
// of the taps positions before it).
func (cs *convState) inRing(p int) bool { return max(0, p-cs.taps) >= cs.lo }

// ExactPrefix is the longest prefix of at most n positions (and at most
// Len()) that the state can return to exactly: Truncate to n keeps that
// many, and Snapshot takes only such a prefix. A model without recurrent
// layers returns to any position; one with convolution layers to the last
// positions (those a verification pass may rewind over) and to the
// checkpoints, every convEvery positions; one with sliding-window rings
// to the positions whose windows the rings still hold (else to 0).
func (s *State) ExactPrefix(n int) int {
	n = max(0, min(n, s.n))
	if s.hasConv() {
		n = s.convExact(n)
	}
	if s.hasRec() {
		n = s.recExact(n)
	}
	if !s.ringHolds(n) {
		return 0
	}
	return n
}

// convExact is ExactPrefix for the convolution state.
func (s *State) convExact(n int) int {
	cs := &s.conv
	if cs.inRing(n) {
		return n
	}
	for q := n / convEvery * convEvery; q > 0; q -= convEvery {
		if cs.ckOK[q/convEvery] {
			return q
		}
	}
	return 0
}

// convTruncate rewinds the convolution state to position n, which
// ExactPrefix returned: from a checkpoint unless the ring holds it; the
// checkpoints past n no longer hold this history's state.
func (s *State) convTruncate(n int) {
	cs := &s.conv
	E := s.m.NEmbd
	if !cs.inRing(n) {
		k := n / convEvery
		for l, ring := range cs.ring {
			if ring == nil {
				continue
			}
			for j := 0; j < cs.taps; j++ {
				if r := cs.ringRow(l, n-cs.taps+j, E); r != nil {
					copy(r, cs.ck[l][(k*cs.taps+j)*E:(k*cs.taps+j+1)*E])
				}
			}
		}
		cs.lo = max(0, n-cs.taps)
	}
	for k := n/convEvery + 1; k < len(cs.ckOK); k++ {
		cs.ckOK[k] = false
	}
}

// convCompact moves the ring rows of the kept tree nodes like Compact
// moves their keys and values, and fills the checkpoints the kept path
// crosses.
func (s *State) convCompact(base int, nodes []int32) {
	cs := &s.conv
	E := s.m.NEmbd
	for l, ring := range cs.ring {
		if ring == nil {
			continue
		}
		for d, j := range nodes {
			if int(j) != d {
				copy(cs.ringRow(l, base+d, E), cs.ringRow(l, base+int(j), E))
			}
		}
	}
	end := base + len(nodes)
	for q := (base/convEvery + 1) * convEvery; q <= end; q += convEvery {
		k := q / convEvery
		for l, ring := range cs.ring {
			if ring == nil {
				continue
			}
			for j := 0; j < cs.taps; j++ {
				dst := cs.ck[l][(k*cs.taps+j)*E : (k*cs.taps+j+1)*E]
				if r := cs.ringRow(l, q-cs.taps+j, E); r != nil {
					copy(dst, r)
				} else {
					clear(dst)
				}
			}
		}
		cs.ckOK[k] = true
	}
}

// convProbeCheck refuses a probe whose tokens read rows the ring no longer
// holds (a state made without FullHistory keeps only the last positions).
func (s *State) convProbeCheck(from int) error {
	if s.hasConv() && !s.conv.inRing(from) {
		return fmt.Errorf("model: a probe from position %d needs the convolution state there; this state keeps it from %d on (StateOptions.FullHistory keeps all)", from, s.conv.lo+s.conv.taps)
	}
	return nil
}

// convSnapshotSize is the size of the convolution state in a snapshot.
func (s *State) convSnapshotSize() int {
	if !s.hasConv() {
		return 0
	}
	return s.m.ConvLayers() * s.conv.taps * s.m.NEmbd * 4
}

// appendConv appends the convolution state at position n (which
// ExactPrefix allows): per convolution layer its taps rows, oldest first,
// as little-endian float32.
func (s *State) appendConv(dst []byte, n int) []byte {
	cs := &s.conv
	E := s.m.NEmbd
	k := n / convEvery
	for l, ring := range cs.ring {
		if ring == nil {
			continue
		}
		for j := 0; j < cs.taps; j++ {
			p := n - cs.taps + j
			var r []float32
			switch {
			case p < 0:
			case cs.inRing(n):
				r = cs.ringRow(l, p, E)
			default:
				r = cs.ck[l][(k*cs.taps+j)*E : (k*cs.taps+j+1)*E]
			}
			for e := 0; e < E; e++ {
				var v float32
				if r != nil {
					v = r[e]
				}
				dst = appendU32(dst, math.Float32bits(v))
			}
		}
	}
	return dst
}

// readConv loads the convolution state of a snapshot of n positions into
// the ring (p is exactly convSnapshotSize bytes); no checkpoint holds
// this history yet.
func (s *State) readConv(p []byte, n int) {
	cs := &s.conv
	E := s.m.NEmbd
	for l, ring := range cs.ring {
		if ring == nil {
			continue
		}
		for j := 0; j < cs.taps; j++ {
			r := cs.ringRow(l, n-cs.taps+j, E)
			for e := 0; e < E; e++ {
				if r != nil {
					r[e] = math.Float32frombits(le32(p))
				}
				p = p[4:]
			}
		}
	}
	cs.lo = max(0, n-cs.taps)
	clear(cs.ckOK)
}

func appendU32(b []byte, v uint32) []byte {
	return append(b, byte(v), byte(v>>8), byte(v>>16), byte(v>>24))
}

func le32(b []byte) uint32 {
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}
