package model

import (
	"errors"
	"fmt"

	"github.com/geisten/geist/quant"
)

// Skip names the transformer blocks a forward pass leaves out: Attn[l]
// skips layer l's attention block, MLP[l] its feed-forward block (the
// residual stream passes through unchanged). A nil slice skips nothing of
// that kind. Self-speculative drafting runs the target model this way: the
// draft costs what the blocks it runs cost, and it reads the target's own
// keys and values for the layers it runs.
type Skip struct {
	Attn, MLP []bool
}

// Count returns the number of attention and feed-forward blocks skipped.
func (k *Skip) Count() (attn, mlp int) {
	if k == nil {
		return 0, 0
	}
	for _, b := range k.Attn {
		if b {
			attn++
		}
	}
	for _, b := range k.MLP {
		if b {
			mlp++
		}
	}
	return attn, mlp
}

func (k *Skip) attn(l int) bool { return k != nil && k.Attn != nil && k.Attn[l] }
func (k *Skip) mlp(l int) bool  { return k != nil && k.MLP != nil && k.MLP[l] }

func (s *State) checkSkip(k *Skip) error {
	if k == nil {
		return nil
	}
	if (k.Attn != nil && len(k.Attn) != s.m.NLayer) || (k.MLP != nil && len(k.MLP) != s.m.NLayer) {
		return fmt.Errorf("model: skip mask of %d/%d layers for a model of %d", len(k.Attn), len(k.MLP), s.m.NLayer)
	}
	return nil
}

// layout is the attention pattern of a pass that is not a plain causal
// chain (a token tree, or independent probes). Node i of the batch sees
// the first vis[i] cache positions and then its ancestors in the batch,
// root first and itself last (anc[off[i]:off[i+1]]); its position, for
// RoPE, is vis[i] plus its depth. Its keys and values are stored in slot
// pos0+i whatever its position.
type layout struct {
	on  bool
	vis []int32 // [maxNodes] cache positions node i sees
	off []int32 // [maxNodes+1] start of node i's ancestor list in anc
	anc []int32 // ancestor lists (batch indices, ascending)
}

func newLayout(maxRows, maxBatch int) layout {
	n := max(maxRows, maxBatch)
	return layout{
		vis: make([]int32, n),
		off: make([]int32, n+1),
		anc: make([]int32, max(maxRows*(maxRows+1)/2, maxBatch)),
	}
}

// position is the RoPE position of batch token i.
func (s *State) position(i, pos0 int) int {
	if !s.lay.on {
		return pos0 + i
	}
	return int(s.lay.vis[i]) + int(s.lay.off[i+1]-s.lay.off[i]) - 1
}

// span returns what batch token i attends to: the cache positions [0, vis),
// then the batch tokens anc (slots pos0+a). A causal token sees the cache
// up to and including its own slot.
func (s *State) span(i, pos0 int) (vis int, anc []int32) {
	if !s.lay.on {
		return pos0 + i + 1, nil
	}
	return int(s.lay.vis[i]), s.lay.anc[s.lay.off[i]:s.lay.off[i+1]]
}

// ForwardTree runs a token tree through the model, like ForwardRows: the
// final hidden states are kept and Logits gives the logits of any rows.
// parents[i] is the batch index of token i's parent (less than i), or -1
// for a token that follows the cache directly. Token i attends to the cache
// and to its ancestors only, at position Len() + its depth, so its logits
// are bit for bit those of its path computed alone (the same values summed
// in the same order). Every token takes a KV slot, Len()+i; Compact keeps
// the accepted path and drops the rest. nil parents is a chain (what
// ForwardRows does). skip, if not nil, leaves blocks out (a self-
// speculative draft).
func (s *State) ForwardTree(tokens []int32, parents []int32, skip *Skip) error {
	if len(tokens) > s.maxBatch || len(tokens) > s.maxRows {
		return fmt.Errorf("model: a batch of %d tokens for row logits, the state takes at most %d", len(tokens), min(s.maxBatch, s.maxRows))
	}
	if err := s.check(tokens); err != nil {
		return err
	}
	if err := s.checkSkip(skip); err != nil {
		return err
	}
	if parents != nil {
		if err := s.treeLayout(parents, len(tokens)); err != nil {
			return err
		}
	}
	defer s.profEnd(s.profStart(), len(tokens))
	s.skip = skip
	s.layers(tokens)
	s.lay.on, s.skip = false, nil
	s.rows = len(tokens)
	return nil
}

// treeLayout fills s.lay for a tree of n tokens.
func (s *State) treeLayout(parents []int32, n int) error {
	if len(parents) != n {
		return fmt.Errorf("model: %d parents for %d tree tokens", len(parents), n)
	}
	l := &s.lay
	l.off[0] = 0
	for i, p := range parents {
		if p < -1 || int(p) >= i {
			return fmt.Errorf("model: tree token %d has parent %d (want -1 or an earlier token)", i, p)
		}
		o := l.off[i]
		if p >= 0 {
			o += int32(copy(l.anc[o:], l.anc[l.off[p]:l.off[p+1]]))
		}
		l.anc[o] = int32(i)
		l.off[i+1] = o + 1
		l.vis[i] = int32(s.n)
	}
	l.on = true
	return nil
}

// Probe runs tokens, which continue the first from cache positions (from
// + len(tokens) <= Len()), each as a one-token step alone after the cache:
// token j at position from+j sees cache positions [0, from+j) and itself.
// It is teacher-forced drafting in one batch: with skip set, row j of
// Logits is what a draft that skips those blocks would predict after
// cache position from+j, given the target's keys and values for the
// prefix. The cache is not changed (the probe's keys and values go to
// scratch slots past Len(), which must have room).
func (s *State) Probe(tokens []int32, from int, skip *Skip) error {
	if len(tokens) > s.maxBatch || len(tokens) > s.maxRows {
		return fmt.Errorf("model: a probe of %d tokens, the state takes at most %d", len(tokens), min(s.maxBatch, s.maxRows))
	}
	if from < 0 || from+len(tokens) > s.n {
		return fmt.Errorf("model: a probe of %d tokens from position %d, the cache holds %d", len(tokens), from, s.n)
	}
	if err := s.check(tokens); err != nil {
		return err
	}
	if err := s.checkSkip(skip); err != nil {
		return err
	}
	if err := s.recProbeCheck(); err != nil {
		return err
	}
	if err := s.convProbeCheck(from); err != nil {
		return err
	}
	if err := s.ringProbeCheck(from, len(tokens)); err != nil {
		return err
	}
	l := &s.lay
	for j := range tokens {
		l.vis[j] = int32(from + j)
		l.off[j] = int32(j)
		l.anc[j] = int32(j)
	}
	l.off[len(tokens)] = int32(len(tokens))
	l.on = true
	defer s.profEnd(s.profStart(), len(tokens))
	s.skip, s.probing = skip, true
	n := s.n
	s.layers(tokens)
	s.n, s.toks = n, s.toks[:n]
	s.lay.on, s.skip, s.probing = false, nil, false
	s.rows = len(tokens)
	return nil
}

// Compact keeps, of the tokens of a tree pass that started at cache
// position base, those at batch indices nodes (ascending; a path from the
// root, as Logits saw it), moving their keys and values (and Tokens) to
// positions base, base+1, ..., and drops the rest of the pass. A tree token's keys were
// rotated for its depth, so the kept path is exactly what a pass over the
// path alone would have left.
func (s *State) Compact(base int, nodes []int32) error {
	if base < 0 || base+len(nodes) > s.n {
		return fmt.Errorf("model: compacting %d tokens at %d, the cache holds %d", len(nodes), base, s.n)
	}
	prev := int32(-1)
	for _, j := range nodes {
		if j <= prev || base+int(j) >= s.n {
			return errors.New("model: compaction indices must ascend inside the last pass")
		}
		prev = j
	}
	if s.hasRec() {
		if err := s.recCompact(base, nodes); err != nil {
			return err
		}
	}
	c := &s.m.Config
	for d, j := range nodes {
		if int(j) == d {
			continue
		}
		from, to := base+int(j), base+d
		s.toks[to] = s.toks[from]
		for l := 0; l < c.NLayer; l++ {
			if !c.OwnKV(l) {
				continue
			}
			cp, f, t := s.kvCap[l], s.slot(l, from), s.slot(l, to)
			for h := 0; h < c.KVHeadsOf(l); h++ {
				if s.kvType == quant.Q8_0 {
					moveRow(s.kq[l], h*cp, f, t, s.kRow[l])
					moveRow(s.vq[l], h*cp, f, t, s.vRow[l])
					continue
				}
				moveRow(s.kc[l], h*cp, f, t, c.HeadDimOf(l))
				moveRow(s.vc[l], h*cp, f, t, c.HeadDimVOf(l))
			}
		}
	}
	if s.hasConv() {
		s.convCompact(base, nodes)
	}
	s.n = base + len(nodes)
	s.toks = s.toks[:s.n]
	s.rows = 0
	return nil
}

// moveRow copies row from to row to of the rows of width w starting at row
// head in buf.
func moveRow[T uint16 | byte](buf []T, head, from, to, w int) {
	copy(buf[(head+to)*w:(head+to+1)*w], buf[(head+from)*w:(head+from+1)*w])
}
