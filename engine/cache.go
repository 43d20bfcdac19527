package engine

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/geisten/geist/engine/chat"
	"github.com/geisten/geist/engine/model"
	"github.com/geisten/geist/engine/spec"
	"github.com/geisten/geist/quant"
)

// PromptCache stores KV-state blobs by model identity and token prefix
// (storage.Cache implements it). Lookup returns the longest stored prefix of
// tokens; damage must show as a miss, never as an error.
type PromptCache interface {
	Lookup(model []byte, tokens []int32) (n int, blob []byte, ok bool)
	Put(model []byte, tokens []int32, blob []byte) error
}

// PromptCacheInPlace is a PromptCache that hands a blob over in the pieces
// it is stored in (storage.Cache: the file's mapped pages), so that a
// restore copies it straight into the KV cache; use must not keep them.
// Prefixes of at most above tokens are skipped unread: memory holds them
// already, and reading and verifying the longest entry (a system prompt
// and tools of ~5,000 tokens are 60-160 MB of keys and values) only to
// find it no longer than what is held would delay every warm request.
type PromptCacheInPlace interface {
	LookupFunc(model []byte, tokens []int32, above int, use func(n int, blob [][]byte) bool) (n int, ok bool)
}

// PromptCacheDropper is a PromptCache that can evict the entry of one
// prefix (storage.Cache): restore drops an entry the state refuses, so
// that it is not read and refused again on every request.
type PromptCacheDropper interface {
	Drop(model []byte, tokens []int32) bool
}

// PromptCachePaused is a PromptCache whose Put can wait between the
// transactions it writes a large blob in (storage.Cache).
type PromptCachePaused interface {
	PutPaused(model []byte, tokens []int32, blob []byte, pause func()) error
}

// DraftStatsStore keeps the drafting statistics per model (storage.Cache
// implements it next to the prompt cache).
type DraftStatsStore interface {
	PutDraftStats(model, data []byte) error
	DraftStats(model []byte) ([]byte, bool)
}

// loadDraftStats restores the drafting statistics of earlier runs: the
// n-gram statistics, the controller's acceptance estimates and the blocks
// the skipped-layer draft skips. A malformed part is refused (and logged)
// and its statistics start afresh.
func (e *Engine) loadDraftStats() {
	ds, ok := e.opt.Cache.(DraftStatsStore)
	if !ok {
		return
	}
	b, ok := ds.DraftStats(e.id)
	if !ok {
		return
	}
	parts, err := splitDraftStats(b)
	if err != nil {
		e.log().Warn("drafting statistics unusable, starting afresh", "err", err)
		return
	}
	if len(parts.ngram) > 0 {
		if err := e.spec.ngram.UnmarshalBinary(parts.ngram); err != nil {
			e.log().Warn("n-gram statistics unusable, starting afresh", "err", err)
		}
	}
	if len(parts.accept) > 0 {
		if err := e.spec.ctrl.UnmarshalAcceptance(parts.accept); err != nil {
			e.log().Warn("acceptance estimates unusable, starting afresh", "err", err)
		}
	}
	if len(parts.skip) > 0 && e.selfMode != SelfSpecOff {
		set, err := spec.UnmarshalSkipSet(parts.skip, e.model.NLayer)
		if err != nil {
			e.log().Warn("skipped-layer draft unusable, choosing afresh", "err", err)
		} else {
			e.installSelf(set)
		}
	}
}

// saveDraftStats persists the drafting statistics.
func (e *Engine) saveDraftStats() {
	ds, ok := e.opt.Cache.(DraftStatsStore)
	if !ok {
		return
	}
	var p draftStats
	var err error
	if e.spec.ngram.Len() > 0 {
		if p.ngram, err = e.spec.ngram.MarshalBinary(); err != nil {
			e.log().Warn("saving drafting statistics failed", "err", err)
			return
		}
	}
	p.accept = e.spec.ctrl.MarshalAcceptance()
	if e.spec.self != nil {
		p.skip, _ = e.spec.self.Set().MarshalBinary()
	}
	if err := ds.PutDraftStats(e.id, joinDraftStats(p)); err != nil {
		e.log().Warn("saving drafting statistics failed", "err", err)
	}
}

// draftStats are the parts of the stored drafting statistics, each
// encoded by its owner.
type draftStats struct {
	ngram, accept, skip []byte
}

// draftStatsMagic heads the stored drafting statistics: the n-gram
// statistics and the acceptance table (each length-prefixed, possibly
// empty), then the skipped-layer choice. Earlier formats: "GDS2" (n-grams
// length-prefixed, then the acceptance table) and a blob without a magic
// (the n-gram statistics alone).
const (
	draftStatsMagic = "GDS3"
	draftStatsV2    = "GDS2"
)

func joinDraftStats(p draftStats) []byte {
	b := make([]byte, 0, 12+len(p.ngram)+len(p.accept)+len(p.skip))
	b = append(b, draftStatsMagic...)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(p.ngram)))
	b = append(b, p.ngram...)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(p.accept)))
	b = append(b, p.accept...)
	return append(b, p.skip...)
}

func splitDraftStats(b []byte) (draftStats, error) {
	var p draftStats
	if len(b) < 4 || (string(b[:4]) != draftStatsMagic && string(b[:4]) != draftStatsV2) {
		p.ngram = b
		return p, nil
	}
	v2 := string(b[:4]) == draftStatsV2
	rest := b[4:]
	part := func(what string) ([]byte, error) {
		if len(rest) < 4 {
			return nil, fmt.Errorf("engine: drafting statistics truncated before the %s", what)
		}
		n := binary.LittleEndian.Uint32(rest)
		if uint64(n) > uint64(len(rest)-4) {
			return nil, fmt.Errorf("engine: drafting statistics: %d bytes of %s in %d", n, what, len(rest)-4)
		}
		x := rest[4 : 4+n]
		rest = rest[4+n:]
		return x, nil
	}
	var err error
	if p.ngram, err = part("n-grams"); err != nil {
		return draftStats{}, err
	}
	if v2 {
		p.accept = rest
		return p, nil
	}
	if p.accept, err = part("acceptance table"); err != nil {
		return draftStats{}, err
	}
	p.skip = rest
	return p, nil
}

// minRestore is the fewest tokens a restore from the prompt cache must add
// over the in-memory reuse to be worth reading a blob.
const minRestore = 16

func modelID(header []byte, kv quant.Type) []byte {
	h := sha256.New()
	h.Write(header)
	h.Write([]byte("\x00kv=" + kv.String() + "\x00geist-kv-1"))
	return h.Sum(nil)
}

// restore tries the prompt cache for a longer prefix of toks than the
// reuse the state already offers; it returns the new reuse.
func (e *Engine) restore(toks []int32, reuse int) int { return e.restoreInto(e.state, toks, reuse) }

// restoreInto is restore into the state st (a batch slot's).
func (e *Engine) restoreInto(st *model.State, toks []int32, reuse int) int {
	if e.opt.Cache == nil || len(toks)-reuse < minRestore {
		return reuse
	}
	if c, ok := e.opt.Cache.(PromptCacheInPlace); ok {
		var err error
		n := 0
		c.LookupFunc(e.id, toks, reuse+minRestore/2, func(at int, blob [][]byte) bool {
			if at <= reuse+minRestore/2 || at > len(toks) {
				return false
			}
			n = at
			err = st.RestoreChunks(toks[:n], blob)
			return err == nil
		})
		switch {
		case n == 0:
			return reuse
		case err != nil:
			e.unusable(toks[:n], err)
			return 0 // Restore left the state empty
		}
		e.markStored(toks[:n])
		return n
	}
	n, blob, ok := e.opt.Cache.Lookup(e.id, toks)
	if !ok || n <= reuse+minRestore/2 || n > len(toks) {
		return reuse
	}
	if err := st.Restore(toks[:n], blob); err != nil {
		e.unusable(toks[:n], err)
		return 0 // Restore left the state empty
	}
	e.markStored(toks[:n])
	return n
}

// unusable evicts the prompt-cache entry of toks that the state refused
// to restore (when the cache can), so that the next request does not
// read and refuse it again: it recomputes the prefix and stores it anew.
func (e *Engine) unusable(toks []int32, err error) {
	dropped := false
	if d, ok := e.opt.Cache.(PromptCacheDropper); ok {
		dropped = d.Drop(e.id, toks)
	}
	sn := &e.snap
	sn.mu.Lock()
	delete(sn.stored, prefixKey(toks)) // stored again once recomputed
	sn.mu.Unlock()
	e.log().Warn("prompt cache: unusable entry, recomputing", "tokens", len(toks), "evicted", dropped, "err", err)
}

// markStored records that the prompt cache holds the prefix toks (just
// restored from it), so that the end of the request does not copy and
// store it again.
func (e *Engine) markStored(toks []int32) {
	key := prefixKey(toks)
	sn := &e.snap
	sn.mu.Lock()
	defer sn.mu.Unlock()
	if sn.stored == nil {
		sn.stored = map[[32]byte]bool{}
	}
	if len(sn.stored) > 4096 {
		clear(sn.stored)
	}
	sn.stored[key] = true
}

// snapshotter writes KV snapshots to the prompt cache in the background,
// one at a time, remembering which prefixes it already stored. A snapshot
// taken while a write runs waits as the one pending job (a newer one
// replaces it), so the conversation's snapshot taken right after the
// system prompt's is not lost behind it: at most two buffers, the one
// being written and the pending one.
type snapshotter struct {
	mu      sync.Mutex
	busy    bool     // a writer goroutine runs
	writing [32]byte // the key it writes
	pending *snapJob // the next job, taken when the write ends
	spare   []byte   // a buffer neither written nor pending
	wg      sync.WaitGroup
	stored  map[[32]byte]bool
	// active: a request runs. A write (130-280 MB for the conversation
	// of a Home Assistant turn, in 8 MiB transactions) waits between its
	// transactions while one does, so that the next voice command does
	// not share the CPU and the disk with the last one's snapshot.
	active atomic.Bool
}

// maxWritePause bounds each wait of a snapshot write for the requests to
// end, so that a server that is never idle still stores its prefixes.
const maxWritePause = 5 * time.Second

// pause waits while a request runs, at most maxWritePause.
func (sn *snapshotter) pause() {
	for deadline := time.Now().Add(maxWritePause); sn.active.Load() && time.Now().Before(deadline); {
		time.Sleep(2 * time.Millisecond)
	}
}

// snapJob is one prefix's snapshot waiting for or in its write.
type snapJob struct {
	toks []int32
	key  [32]byte
	blob []byte
}

func prefixKey(toks []int32) [32]byte {
	h := sha256.New()
	var b [4]byte
	for _, t := range toks {
		b[0], b[1], b[2], b[3] = byte(t), byte(t>>8), byte(t>>16), byte(t>>24)
		h.Write(b[:])
	}
	var k [32]byte
	h.Sum(k[:0])
	return k
}

// snapshot stores the KV state of the first n tokens of the state unless that
// prefix is stored, being written or pending already. The copy is taken
// now; the write happens on another goroutine, after the running one.
// Like Generate, it must not run concurrently with itself.
func (e *Engine) snapshot(n int) { e.snapshotOf(e.state, n) }

// snapshotOf is snapshot of the state st (a batch slot's).
func (e *Engine) snapshotOf(st *model.State, n int) {
	sn := &e.snap
	if e.opt.Cache == nil || n > st.Len() {
		return
	}
	// A recurrent state is kept at checkpoints: store the longest such
	// prefix (still a prefix a later prompt can restore).
	if n = st.ExactPrefix(n); n < minRestore {
		return
	}
	toks := append([]int32(nil), st.Tokens()[:n]...)
	key := prefixKey(toks)
	sn.mu.Lock()
	if sn.stored[key] || (sn.busy && sn.writing == key) || (sn.pending != nil && sn.pending.key == key) {
		sn.mu.Unlock()
		return
	}
	// The buffer to copy into: the pending job's (the newer snapshot
	// replaces it) or the spare one; the writer owns the other.
	buf := sn.spare
	if sn.pending != nil {
		buf, sn.pending = sn.pending.blob, nil
	}
	sn.spare = nil
	sn.mu.Unlock()
	blob, err := st.Snapshot(n, buf)
	sn.mu.Lock()
	defer sn.mu.Unlock()
	if err != nil {
		sn.spare = blob
		return
	}
	job := &snapJob{toks: toks, key: key, blob: blob}
	if sn.busy {
		sn.pending = job
		return
	}
	sn.busy, sn.writing = true, key
	sn.wg.Add(1)
	go e.writeSnapshots(job)
}

// writeSnapshots writes job, then the pending jobs, until none is left.
//
// It runs at the lowest CPU priority: a request that arrives while a
// transaction is being written (the pause waits only between them) gets
// the processors first.
func (e *Engine) writeSnapshots(job *snapJob) {
	sn := &e.snap
	defer sn.wg.Done()
	lowerPriority()
	for {
		var err error
		if c, ok := e.opt.Cache.(PromptCachePaused); ok {
			err = c.PutPaused(e.id, job.toks, job.blob, sn.pause)
		} else {
			err = e.opt.Cache.Put(e.id, job.toks, job.blob)
		}
		sn.mu.Lock()
		if err != nil {
			e.log().Warn("prompt cache: storing a prefix failed", "tokens", len(job.toks), "err", err)
		} else {
			if sn.stored == nil {
				sn.stored = map[[32]byte]bool{}
			}
			if len(sn.stored) > 4096 {
				clear(sn.stored)
			}
			sn.stored[job.key] = true
		}
		sn.spare = job.blob
		job = sn.pending
		if job == nil {
			sn.busy = false
			sn.mu.Unlock()
			return
		}
		sn.pending, sn.writing = nil, job.key
		sn.mu.Unlock()
	}
}

// waitSnapshots blocks until background snapshot writes are done.
func (e *Engine) waitSnapshots() { e.snap.wg.Wait() }

// sysPrefix remembers the tokens of the last system prompt keepPrefix
// rendered alone, so that requests sharing it tokenize only their prompt.
type sysPrefix struct {
	system string
	toks   []int32
}

// keepPrefix returns the token prefix worth caching besides the whole
// conversation: the part the system prompt renders to, which every
// request with the same system prompt shares. msgs are the messages the
// prompt was rendered from; the request's tools render with the system
// prompt (a template may put them there, as Qwen's do).
func (e *Engine) keepPrefix(req *Request, msgs []chat.Message, prompt []int32) int {
	if e.opt.Cache == nil || len(msgs) == 0 || msgs[0].Role != "system" {
		return 0
	}
	k := &e.sysKeep
	key := msgs[0].Content
	for _, t := range req.Tools {
		key += "\x00" + string(t)
	}
	if k.toks == nil || k.system != key {
		text, err := e.renderMessages(req, msgs[:1], false)
		if err != nil || !strings.Contains(text, msgs[0].Content) {
			// A template that folds the system prompt into the first user
			// turn (Gemma's) renders nothing for it alone, one that wants
			// a user turn (Qwen3.5's) refuses it: render it before an
			// empty user turn, whose common prefix with the prompt is
			// still the system part.
			if text, err = e.renderMessages(req, []chat.Message{msgs[0], {Role: "user"}}, false); err != nil {
				return 0
			}
		}
		k.system, k.toks = key, e.encode(text)
	}
	return spec.CommonPrefix(k.toks, prompt)
}

// PromptCacheRecent is a PromptCache that names its most recently used
// prefix (storage.Cache).
type PromptCacheRecent interface {
	Recent(model []byte) (tokens []int32, ok bool)
}

// Warm restores the prompt cache's most recently used prefix of this model
// into the KV state, so that the first request after a start or a model
// reload (a voice command after a reboot, with the system prompt seen
// before) pays no prefill and no restore for it: the state holds it, and
// the request reuses its common prefix. It returns the tokens restored
// (0: none, the cache holds nothing for this model or is off) and the time
// taken. It does nothing when the state holds a prefix already. Like
// Generate, it must not run concurrently with another call.
func (e *Engine) Warm() (int, time.Duration) {
	start := time.Now()
	c, ok := e.opt.Cache.(PromptCacheRecent)
	if !ok {
		return 0, 0
	}
	if e.state.Len() >= minRestore {
		return 0, 0 // memory holds a prefix already: the one served last
	}
	toks, ok := c.Recent(e.id)
	if !ok || len(toks) < minRestore || len(toks) >= e.Ctx() {
		return 0, time.Since(start)
	}
	e.state.Truncate(0)
	n := e.restore(toks, 0)
	return n, time.Since(start)
}

// CheckSnapshot checks a KV-state blob handed over from elsewhere (a put
// through geist serve's control socket) before it is stored: that this
// model's state would restore it as the state after tokens, and that its
// keys and values are plausible (model.State.CheckSnapshot: finite,
// within ±model.MaxSnapshotValue). It is not a proof that the blob is
// the state the tokens lead to: only recomputing them is (see the
// README's trust boundary). It reads the blob once and may run beside a
// generation.
func (e *Engine) CheckSnapshot(tokens []int32, blob []byte) error {
	n, err := e.state.CheckSnapshot(blob)
	if err != nil {
		return err
	}
	if n != len(tokens) {
		return fmt.Errorf("%w: %d positions for %d tokens", model.ErrSnapshot, n, len(tokens))
	}
	return nil
}
