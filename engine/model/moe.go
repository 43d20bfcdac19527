package model

import "github.com/geisten/geist/quant"

// The mixture-of-experts feed-forward block (qwen3moe, llama.cpp's
// build_moe_ffn with a softmax router and renormalized weights): the
// router's softmax over the experts, the ExpertsUsed best per token, their
// probabilities renormalized to sum 1; each chosen expert's SiLU-gated
// output times its weight, summed in rank order.
//
// A pass runs each expert once, over the rows of the batch routed to it
// (gathered into one contiguous batch), so decoding reads only the chosen
// experts' weights and a verification pass of K drafted tokens reads the
// union of their experts once. Every token's result is the same alone or
// in any batch: its rows are computed by the same kernels whichever other
// rows share the expert, and its experts' outputs are summed in its own
// rank order.

// moeBufs are the block's buffers, sized once for the batch.
type moeBufs struct {
	probs []float32 // [maxBatch][Experts] router softmax
	sel   []int32   // [maxBatch][ExpertsUsed] the chosen experts, best first
	w     []float32 // [maxBatch][ExpertsUsed] their weights
	rows  []int32   // [Experts][maxBatch] per expert: token·ExpertsUsed+rank of its rows
	count []int     // [Experts] rows routed to each expert in this pass
	xe    []float32 // [maxBatch][NEmbd] the rows of one expert, gathered
	gate  []float32 // [maxBatch][FFNExp]
	up    []float32 // [maxBatch][FFNExp]
	down  []float32 // [maxBatch][NEmbd]
	out   []float32 // [maxBatch][ExpertsUsed][NEmbd] weighted expert outputs by rank
	// Read counts the bytes of expert weights the passes read (each
	// chosen expert's three matrices once per pass), for benchmarks.
	Read int64
}

func (s *State) newMoE(B int) {
	c := &s.m.Config
	X, K, E, F := c.Experts, c.ExpertsUsed, c.NEmbd, c.FFNExp
	s.moe = moeBufs{
		probs: make([]float32, B*X),
		sel:   make([]int32, B*K),
		w:     make([]float32, B*K),
		rows:  make([]int32, X*B),
		count: make([]int, X),
		xe:    make([]float32, B*E),
		gate:  make([]float32, B*F),
		up:    make([]float32, B*F),
		down:  make([]float32, B*E),
		out:   make([]float32, B*K*E),
	}
}

// ExpertBytesRead is the number of expert weight bytes the state's passes
// have read so far (zero for a dense model).
func (s *State) ExpertBytesRead() int64 { return s.moe.Read }

// experts runs layer l's mixture of experts over the n normed rows in
// s.xb, leaving the block's output in s.proj.
func (s *State) experts(l, n int) {
	c, L, mb := &s.m.Config, &s.m.Layers[l], &s.moe
	X, K, E, F := c.Experts, c.ExpertsUsed, c.NEmbd, c.FFNExp
	s.mul(s.xb, n, product{w: L.Router, out: mb.probs})
	clear(mb.count)
	for i := 0; i < n; i++ {
		p := mb.probs[i*X : (i+1)*X]
		Softmax(p)
		sel, w := mb.sel[i*K:(i+1)*K], mb.w[i*K:(i+1)*K]
		topK(sel, p)
		sum := 0.0
		for k, e := range sel {
			w[k] = p[e]
			sum += float64(p[e])
		}
		inv := float32(sum)
		for k, e := range sel {
			w[k] /= inv
			mb.rows[int(e)*s.maxBatch+mb.count[e]] = int32(i*K + k)
			mb.count[e]++
		}
	}
	if f := s.m.File; f != nil { // start reading every chosen expert left in the file
		for e := 0; e < X; e++ {
			if mb.count[e] > 0 {
				for _, w := range [...]*quant.Matrix{L.ExpGate[e], L.ExpUp[e], L.ExpDown[e]} {
					if w.Packed() == "" {
						f.WillNeed(w.Data)
					}
				}
			}
		}
	}
	for e := 0; e < X; e++ {
		ne := mb.count[e]
		if ne == 0 {
			continue
		}
		rows := mb.rows[e*s.maxBatch : e*s.maxBatch+ne]
		for j, r := range rows {
			i := int(r) / K
			copy(mb.xe[j*E:(j+1)*E], s.xb[i*E:(i+1)*E])
		}
		g, u, d := L.ExpGate[e], L.ExpUp[e], L.ExpDown[e]
		mb.Read += int64(len(g.Data) + len(u.Data) + len(d.Data))
		s.mul(mb.xe, ne, product{w: g, out: mb.gate}, product{w: u, out: mb.up})
		SiLUMul(mb.gate[:ne*F], mb.up[:ne*F])
		s.mul(mb.gate, ne, product{w: d, out: mb.down})
		for j, r := range rows {
			dst, src, w := mb.out[int(r)*E:(int(r)+1)*E], mb.down[j*E:(j+1)*E], mb.w[r]
			for x, v := range src {
				dst[x] = v * w
			}
		}
	}
	for i := 0; i < n; i++ {
		dst := s.proj[i*E : (i+1)*E]
		copy(dst, mb.out[i*K*E:(i*K+1)*E])
		for k := 1; k < K; k++ {
			addTo(dst, mb.out[(i*K+k)*E:(i*K+k+1)*E])
		}
	}
}

// adviseExperts tells the kernel that the experts left in the mapped
// file (not repacked) are read at random: the router picks a few of a
// layer's experts per token, so reading ahead from a fault in one expert
// into its neighbours would mostly read weights no token uses. experts
// asks for each chosen expert's pages (WillNeed) right after routing.
func (m *Model) adviseExperts() {
	if m.File == nil {
		return
	}
	for i := range m.Layers {
		L := &m.Layers[i]
		for e := range L.ExpGate {
			for _, w := range [...]*quant.Matrix{L.ExpGate[e], L.ExpUp[e], L.ExpDown[e]} {
				if w.Packed() == "" {
					m.File.AdviseRandom(w.Data)
				}
			}
		}
	}
}

// topK writes the indices of the len(sel) largest values of p into sel,
// largest first (the lower index first among equal values).
func topK(sel []int32, p []float32) {
	for k := range sel {
		best := -1
		for e, v := range p {
			if best >= 0 && v <= p[best] {
				continue
			}
			taken := false
			for _, t := range sel[:k] {
				if int(t) == e {
					taken = true
					break
				}
			}
			if !taken {
				best = e
			}
		}
		sel[k] = int32(best)
	}
}
