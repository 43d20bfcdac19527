package engine

import (
	"fmt"

	"github.com/geisten/geist/engine/model"
	"github.com/geisten/geist/engine/spec"
)

// loadNative loads a model-native drafter (a Gemma 4 assistant, an
// EAGLE-3 head) given as the draft model; ok is false when the file is
// an ordinary draft model.
func (e *Engine) loadNative(path string) (ok bool, err error) {
	tok, f, err := LoadVocab(path)
	if err != nil {
		return false, fmt.Errorf("engine: draft model: %w", err)
	}
	if !model.IsAssistant(f) && !model.IsEagle3(f) {
		f.Close()
		return false, nil
	}
	if err := sameVocab(tok, e.tok); err != nil {
		f.Close()
		return true, fmt.Errorf("engine: draft model %s: %w", path, err)
	}
	sp := &e.spec
	var cost float64
	switch {
	case model.IsAssistant(f):
		a, err := model.LoadAssistant(f, e.model)
		if err != nil {
			f.Close()
			return true, fmt.Errorf("engine: draft model %s: %w", path, err)
		}
		d := spec.NewAssistDraft(a, e.state)
		d.State().Sparse = a.Centroids != nil && !e.opt.DenseHead
		if d.State().Sparse {
			if err := a.Cluster(); err != nil {
				f.Close()
				return true, fmt.Errorf("engine: draft model %s: %w", path, err)
			}
		}
		sp.native, sp.nativeMode = d, SpecAssistant
		cost = float64(a.Bytes(d.State().Sparse)) / float64(e.model.DecodeBytes())
		sparse := d.State().Sparse
		sp.nativeFor = func(s *model.State) (spec.NativeDrafter, bool, error) {
			d := spec.NewAssistDraft(a, s)
			d.State().Sparse = sparse
			return d, false, nil
		}
	default:
		h, err := model.LoadEagle3(f, e.model)
		if err != nil {
			f.Close()
			return true, fmt.Errorf("engine: draft model %s: %w", path, err)
		}
		d, err := spec.NewEagle3Draft(h, e.state)
		if err != nil {
			f.Close()
			return true, err
		}
		sp.native, sp.nativeMode = d, SpecEagle3
		cost = float64(h.Bytes()) / float64(e.model.DecodeBytes())
		sp.nativeFor = func(s *model.State) (spec.NativeDrafter, bool, error) {
			d, err := spec.NewEagle3Draft(h, s)
			return d, false, err
		}
	}
	sp.nativeCost = cost
	sp.nativeFile = f
	sp.feed = true // until a request that does not draft with it
	sp.ctrl.AssumeDraftCost(idxNative, cost)
	return true, nil
}

// loadMTP makes the target's own next-token prediction block (Qwen3.5's
// MTP layer) the model-native drafter when the file has one and no other
// model-native drafter was given.
func (e *Engine) loadMTP() error {
	sp := &e.spec
	if sp.native != nil || e.model.NextN == 0 {
		return nil
	}
	t, err := model.LoadMTP(e.model)
	if err != nil {
		return fmt.Errorf("engine: %w", err)
	}
	d := spec.NewMTPDraft(t, e.state, e.model)
	d.State().SetDraftVocab(e.opt.DraftVocab)
	sp.native, sp.nativeMode = d, SpecMTP
	sp.feed = true
	sp.nativeCost = float64(t.Bytes(d.State().DraftVocab())) / float64(e.model.DecodeBytes())
	sp.ctrl.AssumeDraftCost(idxNative, sp.nativeCost)
	sp.nativeFor = func(s *model.State) (spec.NativeDrafter, bool, error) {
		// The head on the engine's workers (the pass's workspace: a
		// slot has no row buffers), which the draft holds meanwhile.
		var head func(out, x []float32, rows int)
		if t.Output == e.model.Output {
			head = e.state.HeadProduct
		}
		d := spec.NewMTPDraftHead(t, s, head)
		d.State().SetDraftVocab(e.opt.DraftVocab)
		return d, head != nil, nil
	}
	return nil
}

// NativeDrafter is the model-native drafter (a Gemma 4 assistant, an
// EAGLE-3 head, the file's MTP block; nil: none), for benchmarks.
func (e *Engine) NativeDrafter() spec.NativeDrafter { return e.spec.native }
