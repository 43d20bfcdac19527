package model

import (
	"fmt"

	"github.com/geisten/geist/quant"
)

// The KV cache of a sliding-window layer (gemma3, gemma4) is a ring: a
// local layer's position p sees only p-Window+1..p, so its cache keeps the
// keys and values of the last positions, position p in slot p % kvCap[l],
// instead of the whole context. As llama.cpp's SWA cache (n_swa + n_ubatch
// cells) it holds a window and a batch: the first token of a pass still
// reads the Window-1 positions before it while the pass writes its own
// keys over the oldest slots. A block of attnBlock keys (blocks start at
// multiples of attnBlock of the position) lands in attnBlock consecutive
// slots because the ring's size is a multiple of attnBlock, so the
// attention kernels read a ring exactly as they read the whole cache, in
// the same order: a token's logits are the same bits with and without it.
//
// A ring forgets: after a pass at pos0 of n tokens the positions before
// pos0+n-kvCap are gone (kvLo). Rewinding (Truncate) to n keeps exactly
// what the local layers need when positions n-Window+1..n-1 are still
// there; the slack of attnBlock slots beyond a batch lets a verification
// pass, a self-draft's steps and the rejection of a draft rewind freely.
// Rewinding further (a prompt sharing a shorter prefix with the last)
// goes back to the start, which ExactPrefix reports. A snapshot (the
// prompt cache) keeps the local layers' last Window-1 positions.

// ringSize is the slots of a local layer's ring for batches of batch
// tokens in a context of up to limit positions: 0 (no ring: the layer's
// cache is the context's, growing with it) when the ring would not be
// smaller, when the state keeps the full history, or for a model without
// sliding windows.
func (s *State) ringSize(batch, limit int, full bool) int {
	c := &s.m.Config
	if c.SWA == nil || c.Window <= 0 || full {
		return 0
	}
	r := (c.Window - 1 + batch + attnBlock + attnBlock - 1) / attnBlock * attnBlock
	if r >= limit {
		return 0
	}
	return r
}

// hasRing reports whether the local layers' caches are rings.
func (s *State) hasRing() bool { return s.ringSlots > 0 }

// isRing reports whether layer l's cache (the one it reads) is a ring.
func (s *State) isRing(l int) bool {
	return s.ringSlots > 0 && !s.m.IsConv(l) && s.m.IsSWA(s.m.kvSrc(l))
}

// slot is the cache slot of position p in layer l.
func (s *State) slot(l, p int) int { return p % s.kvCap[l] }

// ringNeeds is the first position a continuation after n positions reads
// from a local layer's cache.
func (s *State) ringNeeds(n int) int {
	if s.m.SWA == nil {
		return 0
	}
	return max(0, n-s.m.Window+1)
}

// ringHolds reports whether the local layers' caches hold what a
// continuation after n positions reads.
func (s *State) ringHolds(n int) bool { return n == 0 || s.ringNeeds(n) >= s.kvLo }

// ringPassEnd records what a pass of n tokens at slots pos0.. overwrote.
func (s *State) ringPassEnd(n, pos0 int) {
	if pos0 == 0 {
		s.kvLo = 0 // a pass from the start needs nothing older
	}
	if s.hasRing() {
		s.kvLo = max(s.kvLo, pos0+n-s.ringSlots)
	}
}

// ringProbeCheck refuses a probe of k tokens from position from whose
// windows the rings no longer hold (or would overwrite).
func (s *State) ringProbeCheck(from, k int) error {
	if !s.hasRing() {
		return nil
	}
	lo := max(s.kvLo, s.n+k-s.ringSlots)
	if s.ringNeeds(from) < lo {
		return fmt.Errorf("model: a probe from position %d needs the local layers' keys from %d; their rings keep them from %d on (StateOptions.FullHistory keeps all)", from, s.ringNeeds(from), lo)
	}
	return nil
}

// snapFrom is the first position of layer l a snapshot of n positions
// holds: a local layer's last Window-1, every position of the others.
func (s *State) snapFrom(l, n int) int {
	if s.m.IsSWA(l) {
		return s.ringNeeds(n)
	}
	return 0
}

// KVBytes is the memory of the KV cache: what each layer's ring or full
// cache holds.
func (s *State) KVBytes() int64 {
	c := &s.m.Config
	var b int64
	for l := range c.NLayer {
		if !c.OwnKV(l) {
			continue
		}
		if s.kvType == quant.Q8_0 {
			b += int64(len(s.kq[l]) + len(s.vq[l]))
		} else {
			b += 2 * int64(len(s.kc[l])+len(s.vc[l]))
		}
	}
	return b
}

// KVSlots is the slots of layer l's cache (the window and a batch for a
// local layer's ring, else the positions allocated now; 0 for a
// convolution layer).
func (s *State) KVSlots(l int) int { return s.kvCap[l] }

// rowsOf returns head h's rows [from, to) of a layer cache of cap slots and
// width w, as one or two spans (a ring wraps).
func rowsOf[T uint16 | byte](buf []T, h, cp, from, to, w int) (a, b []T) {
	if from >= to {
		return nil, nil
	}
	base := h * cp * w
	f, t := from%cp, to%cp
	if t == 0 {
		t = cp
	}
	if to-from <= cp && f < t {
		return buf[base+f*w : base+t*w], nil
	}
	return buf[base+f*w : base+cp*w], buf[base : base+t*w]
}
