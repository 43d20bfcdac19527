package engine

import (
	"errors"
	"fmt"
	"sync"

	"github.com/geisten/geist/engine/model"
	"github.com/geisten/geist/engine/spec"
)

// The model drafters of a batched sequence: each slot has its own,
// sized once when the batch is made, so that a sequence drafts with them
// as it would alone.
//
//   - A model-native drafter (a Gemma 4 assistant, an EAGLE-3 head, the
//     file's MTP block) over the slot's state, with its own cache: the
//     slot's state keeps its rows' hidden states (model.State.KeepRows)
//     and features (CaptureInputs) from each batched pass, which the
//     drafter reads between the slot's passes (Kept), as alone it reads
//     the rows of the engine's state. The MTP block's head runs on the
//     target's workers, held from the passes while the sequence drafts.
//   - The draft model over a slot of the draft model's state (its own KV
//     cache; the draft model's workspace and workers are shared, one
//     sequence's draft pass at a time: slotDecoder).
//   - The skipped-layer draft over the slot's state, its steps
//     ForwardBatch passes of the sequence alone with the blocks skipped
//     (model.Seq.Skip), on the target's workers held from the passes
//     (slotSkip).
//
// Their drafts only decide which rows a verification pass computes: the
// output is the sequence's alone whatever they draft.

// slotDrafters is a slot's model drafters (nil: none).
type slotDrafters struct {
	native        spec.NativeDrafter
	nativeWorkers bool // the native drafter's steps run on the target's workers
	feed          bool // the running request may draft with native: its passes hand it their rows
	draft         *spec.ModelDraft
	draftState    *model.State // the slot of the draft model's state (nil: the workspace's own)
	dec           slotDecoder
	self          *spec.SelfDraft // the skipped-layer draft of the engine's set (selfDraft)
	skip          slotSkip
}

// initDrafters gives slot sl (its index i; 0 is the engine's state) the
// engine's model drafters.
func (b *batcher) initDrafters(sl *slot, i int) error {
	e := b.e
	sps := &e.spec
	if sps.nativeFor != nil {
		if i == 0 {
			// The engine's own drafter reads the engine's state.
			sl.native = sps.native
			_, sl.nativeWorkers = sps.native.(*spec.MTPDraft) // its head may run on them
		} else {
			var err error
			if sl.native, sl.nativeWorkers, err = sps.nativeFor(sl.s); err != nil {
				return err
			}
		}
		sl.s.KeepRows()
		sl.w.ctrl.AssumeDraftCost(idxNative, sps.nativeCost)
	}
	if d := sps.draft; d != nil {
		ds := d.s
		if i > 0 {
			var err error
			if ds, err = d.s.NewSlot(model.StateOptions{Ctx: d.s.Allocated(), MaxCtx: e.maxCtx, KVType: d.s.KVType()}); err != nil {
				return fmt.Errorf("draft model: %w", err)
			}
			sl.draftState = ds
		}
		sl.dec = slotDecoder{ws: d.s, s: ds, mu: &b.draftMu, out: make([]float32, d.m.NVocab)}
		sl.draft = spec.NewModelDraft(&sl.dec)
		sl.w.ctrl.AssumeDraftCost(idxDraft, sps.draftCost)
	}
	sl.skip = slotSkip{ws: e.state, s: sl.s, out: make([]float32, e.model.NVocab)}
	return nil
}

// closeDrafters frees what initDrafters allocated beside the engine's.
func (sl *slot) closeDrafters() {
	if sl.draftState != nil {
		sl.draftState.Close()
	}
}

// selfDraft is the slot's skipped-layer draft of the engine's set (nil:
// none), made again when the set
// changes (its controller seeded as the engine's is).
func (sl *slot) selfDraft(set *spec.SelfDraft) *spec.SelfDraft {
	if set == nil || sl.skip.ws == nil {
		return nil
	}
	if sl.self == nil || sl.self.Set() != set.Set() {
		s := set.Set()
		sl.self = spec.NewSelfDraft(&sl.skip, s)
		sl.w.ctrl.AssumeDraftCost(idxSelf, s.Cost)
		sl.w.ctrl.Seed(idxSelf, s.Agreement, 20)
	}
	return sl.self
}

// slotDecoder is a slot of the draft model's state as spec.ModelDraft
// drafts with it: its passes are ForwardBatch passes of it alone on the
// draft model's workspace, one at a time (mu), the logits in its own
// buffer.
type slotDecoder struct {
	ws, s *model.State
	mu    *sync.Mutex
	seq   [1]model.Seq
	out   []float32 // [NVocab] the last pass's logits
}

func (d *slotDecoder) Forward(toks []int32, all bool) ([]float32, error) {
	if all {
		return nil, errors.New("engine: a draft slot's pass returns the last token's logits only")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for len(toks) > 0 {
		k := min(len(toks), d.ws.MaxBatch())
		d.seq[0] = model.Seq{S: d.s, Tokens: toks[:k], Logits: k == len(toks), Out: d.out}
		_, err := d.ws.ForwardBatch(d.seq[:])
		d.seq[0] = model.Seq{}
		if err != nil {
			return nil, err
		}
		toks = toks[k:]
	}
	return d.out, nil
}

func (d *slotDecoder) Tokens() []int32 { return d.s.Tokens() }
func (d *slotDecoder) Len() int        { return d.s.Len() }
func (d *slotDecoder) Ctx() int        { return d.s.Ctx() }

func (d *slotDecoder) Truncate(n int) {
	d.mu.Lock() // a recurrent draft's rewind replays on the workers
	d.s.Truncate(n)
	d.mu.Unlock()
}

// slotSkip is a batch slot's state as the skipped-layer draft drafts with
// it: ForwardBatch passes of the slot alone with the blocks skipped, on
// the engine's state as the workspace (the caller holds its workers).
type slotSkip struct {
	ws, s *model.State
	seq   [1]model.Seq
	out   []float32 // [NVocab] the last pass's last row's logits
	rows  int
}

func (k *slotSkip) ForwardTree(toks, parents []int32, skip *model.Skip) error {
	if parents != nil {
		return errors.New("engine: a skipped-layer draft step of a batch slot is a chain")
	}
	k.rows = 0
	k.seq[0] = model.Seq{S: k.s, Tokens: toks, Logits: true, Out: k.out, Skip: skip}
	_, err := k.ws.ForwardBatch(k.seq[:])
	k.seq[0] = model.Seq{}
	if err == nil {
		k.rows = len(toks)
	}
	return err
}

func (k *slotSkip) Logits(lo, hi int) ([]float32, error) {
	if lo != k.rows-1 || hi != k.rows {
		return nil, fmt.Errorf("engine: a skipped-layer draft step's logits of rows [%d,%d) (the last row of %d only)", lo, hi, k.rows)
	}
	return k.out, nil
}

func (k *slotSkip) Len() int       { return k.s.Len() }
func (k *slotSkip) Ctx() int       { return k.s.Ctx() }
func (k *slotSkip) Truncate(n int) { k.s.Truncate(n) }
