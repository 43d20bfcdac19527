package model

import (
	"errors"
	"fmt"
	"math"
)

// The recurrent layers' state (qwen35's gated DeltaNet; the machinery is
// the mixer's own only in its step function), exact under speculation,
// token trees and the prompt cache (design: /work/notes/recurrent.md).
//
// A recurrent layer's state after position p is a function of the state
// before it and the token's recurrence input (what the projections and
// the convolution computed from it), so the State keeps, per layer:
//   - base, the state at position bpos, and work, the state at Len()
//     (when Len() > bpos; at bpos the current state is base);
//   - the log: the recurrence inputs of positions [bpos, bpos+nlog), at
//     most recLog of them. Rewinding (Truncate, Compact) to any position
//     in between replays the logged inputs from base: an accepted token
//     costs one step of the recurrence (no weights), a rejected one
//     nothing;
//   - the convolution's input rows of the last positions (a ring, as
//     LFM2's shortconv.go keeps them), read back by the next tokens; a
//     tree node reads its ancestors' rows from the batch;
//   - tree slots: states of one layer along the path of the tree being
//     computed (a node starts from its parent's state);
//   - one checkpoint, the state at the end of the last prefill (Forward
//     of several tokens), for a later prompt that shares only that prefix.
// A pass starting at bpos reads base and writes work, so base survives
// it; a pass starting later first swaps base and work (free: the state at
// its start becomes base), except that the steps of a self-speculative
// draft append to the log so that the draft can be dropped as a whole.

// recStep advances recurrent layer l's state by one token's input in:
// dst = f(src, in) and out = the token's output. dst may be src; the
// bits are the same either way.
type recStep func(s *State, l int, dst, src, in, out []float32)

// recLogSlack is how many positions the log keeps beyond a verification
// pass (a self-draft's steps before its verification).
const recLogSlack = 16

type recState struct {
	step recStep
	// run, if set, runs a causal pass's recurrence of layer l (index r)
	// over its n tokens from src as the loop of recRun does (the same
	// steps, base taking the state before token longAt), in another
	// order of the independent parts of the state (Mamba-2: head by
	// head, each head's state kept in cache over the tokens).
	run func(s *State, l, r, n int, src []float32)
	// replay, if set, steps layer l's base through its first n logged
	// inputs into work as recReplay's loop does (the same steps: the
	// state's bits; the outputs are not needed).
	replay func(s *State, l, r, n int)
	// runTree, if set, runs a tree pass's recurrence of layer l from
	// start as recTree's loop does (the same steps from the same states).
	runTree       func(s *State, l, r, n int, start []float32)
	idx           []int       // per model layer: its index among the recurrent layers (-1: none)
	lay           []int       // per recurrent layer: its model layer
	base          [][]float32 // [nrec][RecState]
	work          [][]float32 // [nrec][RecState]
	bpos          int         // base is the state at this position
	nlog          int         // the log holds positions [bpos, bpos+nlog)
	K             int         // log capacity in positions
	log           [][]float32 // [nrec][K][RecIn]
	tree          bool        // the last pass was a tree (log entries treeAt.. are its nodes)
	treeAt, chain int         // its first entry, and how many of its first nodes form a chain
	draft         bool        // the last pass left blocks out (a self-speculative draft step)
	cut           int         // log entries from here on are not replayable (a draft skipped a recurrent layer there)
	// this pass (recBegin):
	fromBase bool // its first token reads base
	longAt   int  // the batch index before which base takes the working state (-1: none)
	logAt    int  // the log entry of its first logged token
	first    int  // its first logged batch index

	R    int         // ring rows: position p in row p%R
	ring [][]float32 // [nrec][R][RecConv] convolution input rows
	lo   int         // the ring holds the rows of positions [lo, Len())
	xc   []float32   // [maxBatch][RecConv] this layer's convolution input rows
	y    []float32   // [maxBatch][RecConv] convolution output
	ones []float32   // [RecConv] ones: the conv output's SiLU through the vector SiLUMul
	in   []float32   // [maxBatch][RecIn] recurrence inputs of the batch
	out  []float32   // [maxBatch][RecOut] recurrence outputs
	tmp  []float32   // [RecOut] the output of a replayed step

	slots [][]float32 // [depth][RecState] tree path states (one layer's)
	owner []int32     // batch index whose state slot d holds (-1: none)

	// Two checkpoints: [0] the end of the last prefill (Forward of
	// several tokens), [1] the one Checkpoint pinned (the system
	// prompt's end). ck[k][r] holds layer r's state, then its conv rows.
	ck    [2][][]float32
	ckPos [2]int // their positions (-1: none)
}

// hasRec reports whether the model has recurrent layers.
func (s *State) hasRec() bool { return s.rec.base != nil }

// newRecState sizes the recurrent state (nothing for a model without
// recurrent layers).
func (s *State) newRecState() {
	c := &s.m.Config
	if c.RecLayers() == 0 {
		return
	}
	rs := &s.rec
	rs.step = deltaStep
	if c.SSMInner > 0 {
		rs.step, rs.run, rs.replay, rs.runTree = mamba2Step, mamba2Run, mamba2Replay, mamba2Tree
	}
	if c.DNHeadsV > 0 {
		rs.run, rs.replay, rs.runTree = deltaRun, deltaReplay, deltaTree
		s.newDeltaNet()
	}
	if c.SSMInner > 0 {
		s.newMamba2()
	}
	rs.idx = make([]int, c.NLayer)
	for l := range rs.idx {
		rs.idx[l] = -1
		if c.IsRec(l) {
			rs.idx[l] = len(rs.lay)
			rs.lay = append(rs.lay, l)
		}
	}
	nrec := len(rs.lay)
	rs.K = s.maxRows + recLogSlack
	rs.R = rs.K + c.RecTaps + convRingSlack // a pass reads its own rows from the batch
	rs.base, rs.work = make([][]float32, nrec), make([][]float32, nrec)
	rs.log, rs.ring = make([][]float32, nrec), make([][]float32, nrec)
	rs.ck[0], rs.ck[1] = make([][]float32, nrec), make([][]float32, nrec)
	for r := range nrec {
		rs.base[r] = make([]float32, c.RecState)
		rs.work[r] = make([]float32, c.RecState)
		rs.log[r] = make([]float32, rs.K*c.RecIn)
		rs.ring[r] = make([]float32, rs.R*c.RecConv)
		rs.ck[0][r] = make([]float32, c.RecState+c.RecTaps*c.RecConv)
		rs.ck[1][r] = make([]float32, c.RecState+c.RecTaps*c.RecConv)
	}
	B := s.maxBatch
	rs.xc = make([]float32, B*c.RecConv)
	rs.y = make([]float32, B*c.RecConv)
	rs.ones = make([]float32, c.RecConv)
	for i := range rs.ones {
		rs.ones[i] = 1
	}
	rs.in = make([]float32, B*c.RecIn)
	rs.out = make([]float32, B*c.RecOut)
	rs.tmp = make([]float32, c.RecOut)
	depth := min(s.maxRows, B)
	rs.slots = make([][]float32, depth)
	for d := range rs.slots {
		rs.slots[d] = make([]float32, c.RecState)
	}
	rs.owner = make([]int32, depth)
	rs.ckPos, rs.cut = [2]int{-1, -1}, rs.K
}

// RecStateBytes is the memory the recurrent state holds (what
// recurrent.md states): base, work, checkpoint, tree slots, log, ring and
// the batch buffers.
func (s *State) RecStateBytes() int {
	rs := &s.rec
	n := 0
	for r := range rs.base {
		n += len(rs.base[r]) + len(rs.work[r]) + len(rs.log[r]) + len(rs.ring[r]) + len(rs.ck[0][r]) + len(rs.ck[1][r])
	}
	for _, sl := range rs.slots {
		n += len(sl)
	}
	n += len(rs.xc) + len(rs.y) + len(rs.in) + len(rs.out) + len(s.dn.z) + len(s.dn.beta) + len(s.dn.alpha)
	return 4 * n
}

// cur is recurrent layer r's state at Len() (valid between passes).
func (s *State) recCur(r int) []float32 {
	if s.n == s.rec.bpos {
		return s.rec.base[r]
	}
	return s.rec.work[r]
}

// recBegin decides, before a pass of n tokens at pos0, where its
// recurrence starts and what the log keeps of it.
func (s *State) recBegin(n, pos0 int) {
	rs := &s.rec
	rs.longAt = -1
	if s.probing {
		return // refused before (Probe)
	}
	draft := s.skip != nil
	switch {
	case pos0 == rs.bpos:
		rs.fromBase = true
	case !s.lay.on && (draft || rs.draft) && !rs.tree && pos0-rs.bpos+n <= rs.K:
		rs.fromBase = false // a draft's steps: appended, so that the draft rewinds as a whole
	default:
		rs.base, rs.work = rs.work, rs.base // base: the state at pos0
		rs.bpos, rs.fromBase = pos0, true
	}
	if rs.fromBase {
		rs.cut = rs.K
	}
	rs.logAt, rs.first = pos0-rs.bpos, 0
	if n > rs.K {
		// A long pass keeps its last K tokens: base takes the working
		// state before token n-K.
		rs.longAt, rs.logAt, rs.first = n-rs.K, 0, n-rs.K
	}
}

// recRun runs recurrent layer l's recurrence over the batch's inputs
// (rs.in), leaving each token's output in rs.out, and logs the inputs.
func (s *State) recRun(l, n, pos0 int) {
	c := &s.m.Config
	rs := &s.rec
	r := rs.idx[l]
	In, Out := c.RecIn, c.RecOut
	if !s.probing {
		for i := rs.first; i < n; i++ {
			e := rs.logAt + i - rs.first
			copy(rs.log[r][e*In:(e+1)*In], rs.in[i*In:(i+1)*In])
		}
	}
	if s.lay.on {
		s.recTree(l, r, n)
		return
	}
	src := rs.work[r]
	if rs.fromBase {
		src = rs.base[r]
	}
	if rs.run != nil && n > 1 {
		rs.run(s, l, r, n, src)
		return
	}
	for i := 0; i < n; i++ {
		if i == rs.longAt {
			copy(rs.base[r], src)
		}
		rs.step(s, l, rs.work[r], src, rs.in[i*In:(i+1)*In], rs.out[i*Out:(i+1)*Out])
		src = rs.work[r]
	}
}

// recTree runs the recurrence over a tree pass: node i starts from its
// parent's state, kept in the slot of the parent's depth while the nodes
// below it are computed (depth-first order); a node whose parent's state
// is not there (another order) recomputes its path from the pass's start.
func (s *State) recTree(l, r, n int) {
	c := &s.m.Config
	rs := &s.rec
	In, Out := c.RecIn, c.RecOut
	start := rs.work[r]
	if rs.fromBase {
		start = rs.base[r]
	}
	if rs.runTree != nil {
		rs.runTree(s, l, r, n, start)
		return
	}
	for d := range rs.owner {
		rs.owner[d] = -1
	}
	for i := 0; i < n; i++ {
		_, anc := s.span(i, 0)
		d := len(anc) - 1
		// The deepest ancestor whose state a slot holds.
		k := d - 1
		for k >= 0 && rs.owner[k] != anc[k] {
			k--
		}
		for ; k < d-1; k++ { // recompute the missing part of the path
			src := start
			if k >= 0 {
				src = rs.slots[k]
			}
			a := int(anc[k+1])
			rs.step(s, l, rs.slots[k+1], src, rs.in[a*In:(a+1)*In], rs.tmp)
			rs.owner[k+1] = anc[k+1]
		}
		src := start
		if d > 0 {
			src = rs.slots[d-1]
		}
		rs.step(s, l, rs.slots[d], src, rs.in[i*In:(i+1)*In], rs.out[i*Out:(i+1)*Out])
		rs.owner[d] = int32(i)
		for j := d + 1; j < len(rs.owner) && rs.owner[j] >= 0; j++ {
			rs.owner[j] = -1
		}
	}
}

// recSkip is a recurrent layer left out by a draft: its state passes
// through unchanged, its inputs are zero-cost placeholders (the state of
// the tokens after it is its state before them). It logs nothing the
// replay could misread: a skipped layer's log rows repeat the identity,
// which the step cannot express, so a draft that skips a recurrent layer
// is only ever dropped as a whole (the engine truncates a draft back to
// where it started, which needs no replay).
func (s *State) recSkip(l, n, pos0 int) {
	rs := &s.rec
	r := rs.idx[l]
	rs.cut = min(rs.cut, pos0-rs.bpos)
	if !rs.fromBase || s.lay.on {
		return // work already holds the state at pos0 and stays so
	}
	copy(rs.work[r], rs.base[r])
}

// recPassEnd records a pass of n tokens at pos0 (not a probe): the log's
// extent, the ring's, the tree.
func (s *State) recPassEnd(n, pos0 int) {
	rs := &s.rec
	if s.probing {
		return
	}
	if rs.longAt >= 0 {
		rs.bpos, rs.nlog = pos0+rs.longAt, rs.K
	} else {
		rs.nlog = pos0 + n - rs.bpos
	}
	rs.lo = max(rs.lo, pos0+n-rs.R)
	rs.draft = s.skip != nil
	rs.tree = s.lay.on
	if rs.tree {
		rs.treeAt, rs.chain = pos0-rs.bpos, 0
		for i := 0; i < n; i++ {
			_, anc := s.span(i, pos0)
			if len(anc) != i+1 {
				break
			}
			rs.chain++
		}
	}
}

// recValid is the last position the log replays to (bpos..recValid).
func (s *State) recValid() int {
	rs := &s.rec
	v := rs.nlog
	if rs.tree {
		v = rs.treeAt + rs.chain
	}
	return rs.bpos + min(v, rs.cut)
}

// recHolds reports whether the state returns to position n by a replay
// (or at once: base, or the current state).
func (s *State) recHolds(n int) bool {
	rs := &s.rec
	if max(0, n-s.m.RecTaps) < rs.lo || n < rs.bpos {
		return false
	}
	return n == rs.bpos || (n == s.n && !rs.tree) || n <= s.recValid()
}

// recExact is ExactPrefix for the recurrent state.
func (s *State) recExact(n int) int {
	rs := &s.rec
	if s.recHolds(n) {
		return n
	}
	if k := rs.ckAt(n); k >= 0 {
		return rs.ckPos[k]
	}
	return 0
}

// ckAt is the checkpoint at the latest position at or before n (-1: none).
func (rs *recState) ckAt(n int) int {
	best := -1
	for k, p := range rs.ckPos {
		if p >= 0 && p <= n && (best < 0 || p > rs.ckPos[best]) {
			best = k
		}
	}
	return best
}

// recReplay makes work the state at position to (bpos < to <=
// recValid()) by stepping base through the logged inputs.
func (s *State) recReplay(to int) {
	c := &s.m.Config
	rs := &s.rec
	In := c.RecIn
	for r, l := range rs.lay {
		if rs.replay != nil && to-rs.bpos > 0 {
			rs.replay(s, l, r, to-rs.bpos)
			continue
		}
		src := rs.base[r]
		for e := 0; e < to-rs.bpos; e++ {
			rs.step(s, l, rs.work[r], src, rs.log[r][e*In:(e+1)*In], rs.tmp)
			src = rs.work[r]
		}
	}
}

// recTruncate rewinds the recurrent state to n (< Len()), which
// ExactPrefix returned.
func (s *State) recTruncate(n int) {
	rs := &s.rec
	c := &s.m.Config
	switch {
	case s.recHolds(n):
		if n > rs.bpos {
			s.recReplay(n)
		}
		rs.nlog = n - rs.bpos
	case rs.ckAt(n) >= 0 && rs.ckPos[rs.ckAt(n)] == n:
		ck := rs.ck[rs.ckAt(n)]
		for r := range rs.lay {
			copy(rs.base[r], ck[r][:c.RecState])
			for j := 0; j < c.RecTaps; j++ {
				if row := rs.ringRow(r, n-c.RecTaps+j, c.RecConv); row != nil {
					copy(row, ck[r][c.RecState+j*c.RecConv:c.RecState+(j+1)*c.RecConv])
				}
			}
		}
		rs.bpos, rs.nlog, rs.lo = n, 0, max(0, n-c.RecTaps)
	default: // n == 0
		for r := range rs.lay {
			clear(rs.base[r])
		}
		rs.bpos, rs.nlog, rs.lo = 0, 0, 0
	}
	for k, p := range rs.ckPos {
		if p > n {
			rs.ckPos[k] = -1
		}
	}
	rs.tree, rs.draft, rs.cut = false, false, rs.K
}

// recCompact keeps the path nodes of the last pass from base0: their log
// entries move like their keys and values, their conv rows too, and work
// is replayed along the path (an accepted token costs one step; nothing
// when the pass was a chain kept whole).
func (s *State) recCompact(base0 int, nodes []int32) error {
	rs := &s.rec
	c := &s.m.Config
	In, C := c.RecIn, c.RecConv
	end := base0 + len(nodes)
	moved := false
	for d, j := range nodes {
		moved = moved || int(j) != d
	}
	if !moved && !rs.tree && end == s.n {
		return nil // the whole chain: work is the state at Len()
	}
	lim := rs.bpos + rs.nlog
	if rs.tree {
		lim = rs.bpos + rs.treeAt
	}
	if base0 < rs.bpos || base0 > min(lim, rs.bpos+rs.cut) || end-rs.bpos > rs.K {
		return fmt.Errorf("model: compacting %d tokens at %d: the recurrent state replays from %d to %d", len(nodes), base0, rs.bpos, min(lim, rs.bpos+rs.cut))
	}
	for d, j := range nodes {
		if int(j) == d {
			continue
		}
		from, to := base0+int(j)-rs.bpos, base0+d-rs.bpos
		for r := range rs.lay {
			copy(rs.log[r][to*In:(to+1)*In], rs.log[r][from*In:(from+1)*In])
			copy(rs.ringRow(r, base0+d, C), rs.ringRow(r, base0+int(j), C))
		}
	}
	if end > rs.bpos {
		s.recReplay(end)
	}
	rs.nlog = end - rs.bpos
	rs.tree, rs.draft = false, false
	return nil
}

// recProbeCheck refuses a probe: the recurrent state is not kept per
// position.
func (s *State) recProbeCheck() error {
	if s.hasRec() {
		return errors.New("model: a probe needs the recurrent layers' state at every position, which this model's state does not keep")
	}
	return nil
}

// ringRow is the conv ring row of position p of recurrent layer r (nil
// for p < 0: zeros).
func (rs *recState) ringRow(r, p, C int) []float32 {
	if p < 0 {
		return nil
	}
	k := p % rs.R
	return rs.ring[r][k*C : (k+1)*C]
}

// recHist is the convolution input row that batch token i reads back
// positions before its own in recurrent layer r: an ancestor's (or an
// earlier token's) row of this batch, else the ring's (nil: zeros).
func (s *State) recHist(r, i, back, pos0 int) []float32 {
	rs := &s.rec
	C := s.m.RecConv
	if !s.lay.on {
		if i-back >= 0 {
			return rs.xc[(i-back)*C : (i-back+1)*C]
		}
		return rs.ringRow(r, pos0+i-back, C)
	}
	vis, anc := s.span(i, pos0)
	if k := len(anc) - 1; back <= k {
		a := int(anc[k-back])
		return rs.xc[a*C : (a+1)*C]
	} else {
		return rs.ringRow(r, vis-(back-k), C)
	}
}

// recConv runs the causal depthwise convolution of layer l (kernel w,
// [RecTaps+1][RecConv]) over the batch's input rows rs.xc into rs.y, in
// ggml_ssm_conv's order (oldest tap first, from zero), and keeps the rows
// in the ring (not for a probe).
func (s *State) recConv(l, n, pos0 int, w []float32) {
	c := &s.m.Config
	rs := &s.rec
	r := rs.idx[l]
	C, taps := c.RecConv, c.RecTaps
	for i := 0; i < n; i++ {
		y := rs.y[i*C : (i+1)*C]
		clear(y)
		for j := 0; j <= taps; j++ {
			var row []float32
			if j == taps {
				row = rs.xc[i*C : (i+1)*C]
			} else {
				row = s.recHist(r, i, taps-j, pos0)
			}
			if row != nil {
				convTap(y, w[j*C:(j+1)*C], row)
			}
		}
	}
	if s.probing {
		return
	}
	for i := max(0, n-rs.R); i < n; i++ {
		copy(rs.ringRow(r, pos0+i, C), rs.xc[i*C:(i+1)*C])
	}
}

// Checkpoint keeps the recurrent state at Len() (a model with recurrent
// layers returns there exactly: Truncate, Snapshot) until a Truncate
// before it or the next Checkpoint. The engine pins the end of the
// system prompt this way; the end of every prefill (Forward of several
// tokens) is kept besides. Nothing for other models.
func (s *State) Checkpoint() {
	if s.hasRec() {
		s.recCheckpoint(1)
	}
}

// recCheckpoint keeps the state at Len() in checkpoint k.
func (s *State) recCheckpoint(k int) {
	rs := &s.rec
	c := &s.m.Config
	if rs.tree || s.n-c.RecTaps < rs.lo && s.n >= c.RecTaps {
		return
	}
	if k == 0 && rs.ckPos[1] == s.n {
		return // the pinned one holds it
	}
	for r := range rs.lay {
		ck := rs.ck[k][r]
		copy(ck, s.recCur(r))
		for j := 0; j < c.RecTaps; j++ {
			dst := ck[c.RecState+j*c.RecConv : c.RecState+(j+1)*c.RecConv]
			if row := rs.ringRow(r, s.n-c.RecTaps+j, c.RecConv); row != nil {
				copy(dst, row)
			} else {
				clear(dst)
			}
		}
	}
	rs.ckPos[k] = s.n
}

// recSnapshotSize is the size of the recurrent state in a snapshot.
func (s *State) recSnapshotSize() int {
	if !s.hasRec() {
		return 0
	}
	c := &s.m.Config
	return len(s.rec.lay) * (c.RecState + c.RecTaps*c.RecConv) * 4
}

// appendRec appends the recurrent state at position n (which ExactPrefix
// allows): per recurrent layer its state, then its conv rows of positions
// n-RecTaps..n-1 (zeros before 0), little-endian float32. A position
// between base and Len() is replayed into a tree slot (the live state is
// not changed).
func (s *State) appendRec(dst []byte, n int) []byte {
	rs := &s.rec
	c := &s.m.Config
	useCk := !s.recHolds(n)
	var ck [][]float32
	if useCk {
		ck = rs.ck[rs.ckAt(n)]
	}
	In := c.RecIn
	for r, l := range rs.lay {
		var st []float32
		switch {
		case useCk:
			st = ck[r][:c.RecState]
		case n == rs.bpos:
			st = rs.base[r]
		case n == s.n && !rs.tree:
			st = rs.work[r]
		default:
			st = rs.slots[0]
			src := rs.base[r]
			for e := 0; e < n-rs.bpos; e++ {
				rs.step(s, l, st, src, rs.log[r][e*In:(e+1)*In], rs.tmp)
				src = st
			}
		}
		dst = appendF32(dst, st)
		for j := 0; j < c.RecTaps; j++ {
			var row []float32
			switch {
			case n-c.RecTaps+j < 0:
			case useCk:
				row = ck[r][c.RecState+j*c.RecConv : c.RecState+(j+1)*c.RecConv]
			default:
				row = rs.ringRow(r, n-c.RecTaps+j, c.RecConv)
			}
			if row == nil {
				for range c.RecConv {
					dst = appendU32(dst, 0)
				}
				continue
			}
			dst = appendF32(dst, row)
		}
	}
	return dst
}

func appendF32(dst []byte, x []float32) []byte {
	for _, v := range x {
		dst = appendU32(dst, math.Float32bits(v))
	}
	return dst
}

func readF32(dst []float32, p []byte) []byte {
	for i := range dst {
		dst[i] = math.Float32frombits(le32(p))
		p = p[4:]
	}
	return p
}

// readRec loads the recurrent state of a snapshot of n positions (p is
// exactly recSnapshotSize bytes) as base at n.
func (s *State) readRec(p []byte, n int) {
	rs := &s.rec
	c := &s.m.Config
	for r := range rs.lay {
		p = readF32(rs.base[r], p)
		for j := 0; j < c.RecTaps; j++ {
			if row := rs.ringRow(r, n-c.RecTaps+j, c.RecConv); row != nil {
				p = readF32(row, p)
			} else {
				p = p[4*c.RecConv:]
			}
		}
	}
	rs.bpos, rs.nlog, rs.lo, rs.ckPos = n, 0, max(0, n-c.RecTaps), [2]int{-1, -1}
	rs.tree, rs.draft, rs.cut = false, false, rs.K
}

// recReset empties the recurrent state (a failed restore).
func (s *State) recReset() {
	rs := &s.rec
	for r := range rs.lay {
		clear(rs.base[r])
	}
	rs.bpos, rs.nlog, rs.lo, rs.ckPos = 0, 0, 0, [2]int{-1, -1}
	rs.tree, rs.draft, rs.cut = false, false, rs.K
}
