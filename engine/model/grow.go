package model

import "github.com/geisten/geist/quant"

// reserve makes the KV cache hold at least n positions (n at most the
// state's limit): it grows the cache to the larger of n and twice its
// size, capped at the limit, and moves the positions it holds. Growing is
// rare (a request that asks for more context than any before it); the
// forward pass itself never allocates.
func (s *State) reserve(n int) {
	if n <= s.ctx {
		return
	}
	old := s.ctx
	grown := min(max(n, 2*old), s.limit)
	c := &s.m.Config
	for l := range c.NLayer {
		if !c.OwnKV(l) || s.isRing(l) {
			continue // a ring keeps its size
		}
		if s.kvType == quant.Q8_0 {
			s.kq[l] = regrow(s.kq[l], c.KVHeadsOf(l), old, grown, s.kRow[l])
			s.vq[l] = regrow(s.vq[l], c.KVHeadsOf(l), old, grown, s.vRow[l])
		} else {
			s.kc[l] = regrow(s.kc[l], c.KVHeadsOf(l), old, grown, c.HeadDimOf(l))
			s.vc[l] = regrow(s.vc[l], c.KVHeadsOf(l), old, grown, c.HeadDimVOf(l))
		}
	}
	for l := range s.kvCap {
		if s.kvCap[l] == old && !s.isRing(l) {
			s.kvCap[l] = grown
		}
	}
	toks := make([]int32, len(s.toks), grown)
	copy(toks, s.toks)
	s.toks = toks
	s.ctx = grown
}

// regrow copies a per-head cache [heads][old][row] into one laid out as
// [heads][grown][row].
func regrow[E uint16 | byte](src []E, heads, old, grown, row int) []E {
	dst := newKV[E](heads * grown * row)
	for h := range heads {
		copy(dst[h*grown*row:], src[h*old*row:(h+1)*old*row])
	}
	return dst
}

// Allocated is how many positions the KV cache holds now; it grows on
// demand up to Ctx.
func (s *State) Allocated() int { return s.ctx }
