package engine

import (
	"context"
	"fmt"

	"github.com/geisten/geist/engine/spec"
)

// The skipped-layer draft (spec.SelfDraft): when its blocks are chosen
// (at load, or by a background search between requests) and installed.

// SelfSpec modes (Options.SelfSpec).
const (
	SelfSpecAuto = "auto" // search in the background after a request, when idle (the default)
	SelfSpecLoad = "load" // search at load, on text the model generates from nothing
	SelfSpecOff  = "off"  // no skipped-layer draft
)

// selfSpecMode checks Options.SelfSpec.
func selfSpecMode(s string) (string, error) {
	switch s {
	case "", SelfSpecAuto:
		return SelfSpecAuto, nil
	case SelfSpecLoad, SelfSpecOff:
		return s, nil
	}
	return "", fmt.Errorf("engine: self-speculation mode %q (want auto, load or off)", s)
}

// costModel returns the controller's current c(k) for k up to
// spec.MaxDraft+1, frozen (the search may run on another goroutine).
func (e *Engine) costModel() func(int) float64 {
	var c [spec.MaxDraft + 2]float64
	for k := 1; k < len(c); k++ {
		c[k] = e.spec.ctrl.Cost(k)
	}
	return func(k int) float64 { return c[min(max(k, 1), len(c)-1)] }
}

// TuneSelfSpec chooses the blocks the skipped-layer draft skips, by a
// search on toks, the model's own output (nil: text the model generates
// from nothing), and installs the choice. It blocks; the engine must not
// be generating meanwhile.
func (e *Engine) TuneSelfSpec(ctx context.Context, toks []int32) (*spec.SkipSet, error) {
	if len(toks) == 0 {
		var err error
		if toks, err = e.ownText(ctx, calibrationTokens); err != nil {
			return nil, err
		}
	}
	set, err := spec.TuneSkip(ctx, e.model, toks, e.opt.Threads, spec.SearchBudget(e.model.NLayer), e.costModel(), nil)
	if err != nil {
		return nil, err
	}
	e.installSelf(set)
	return set, nil
}

// calibrationTokens is how much of its own output the search reads.
const calibrationTokens = 160

// ownText is the model's greedy continuation of its BOS token (or of
// nothing), n tokens long, from a fresh cache.
func (e *Engine) ownText(ctx context.Context, n int) ([]int32, error) {
	s := e.state
	defer s.Truncate(0)
	s.Truncate(0)
	toks := make([]int32, 0, n)
	first := e.tok.BOS()
	if first < 0 {
		first = 0
	}
	toks = append(toks, first)
	for len(toks) < min(n, s.Ctx()) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		lg, err := s.Forward(toks[len(toks)-1:], false)
		if err != nil {
			return nil, err
		}
		toks = append(toks, spec.Argmax(lg))
	}
	return toks, nil
}

// installSelf makes set the skipped-layer draft and seeds the
// controller with the agreement the search measured.
func (e *Engine) installSelf(set *spec.SkipSet) {
	if set == nil {
		return
	}
	e.spec.self = spec.NewSelfDraft(e.state, set)
	e.spec.ctrl.AssumeDraftCost(idxSelf, set.Cost)
	e.spec.ctrl.Seed(idxSelf, set.Agreement, 20)
}

// takeTuned installs a background search's result, if one came in.
func (e *Engine) takeTuned() { e.installSelf(e.spec.tune.Take()) }

// tuneInBackground starts a search on history (the request's prompt and
// output) when the engine has no skipped-layer draft and none is being
// searched. It runs while no request does.
func (e *Engine) tuneInBackground(history []int32) {
	if e.selfMode != SelfSpecAuto || e.spec.self != nil || len(history) < minCalibration || e.model.RecLayers() > 0 {
		return // (a recurrent model's search fails at its first probe: see spec.TuneSkip)
	}
	e.spec.tune.Start(e.model, history[max(0, len(history)-2*calibrationTokens):], e.opt.Threads, e.costModel())
}

// minCalibration is the least text a background search starts on.
const minCalibration = 64

// stopTuning cancels a background search and waits for it to end.
func (e *Engine) stopTuning() { e.spec.tune.Stop() }

// WaitTuned waits for a background skipped-layer search to end and
// installs its result; it returns the engine's skipped-layer draft (nil:
// none).
func (e *Engine) WaitTuned() *spec.SkipSet {
	e.spec.tune.Wait()
	e.takeTuned()
	if e.spec.self == nil {
		return nil
	}
	return e.spec.self.Set()
}
