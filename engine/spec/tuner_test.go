package spec

import (
	"slices"
	"sync/atomic"
	"testing"

	"github.com/geisten/geist/engine/gguf"
	"github.com/geisten/geist/engine/model"
	"github.com/geisten/geist/engine/zoo"
)

func tinyModel(t *testing.T) *model.Model {
	t.Helper()
	f, err := gguf.Open(zoo.Path(t, "models", "tiny-llama-Q4_0.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	m, err := model.Load(f)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestStateYield: StateOptions.Yield is called before every layer and the
// head of a pass, and changes nothing the pass computes.
func TestStateYield(t *testing.T) {
	m := tinyModel(t)
	toks := []int32{1, 450, 3996, 1735, 1701}
	run := func(yield func()) []float32 {
		st, err := m.NewState(model.StateOptions{Ctx: 16, Batch: 8, Yield: yield})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		lg, err := st.Forward(toks, true)
		if err != nil {
			t.Fatal(err)
		}
		return slices.Clone(lg)
	}
	n := 0
	got := run(func() { n++ })
	if n != m.NLayer+1 {
		t.Errorf("a pass yielded %d times, want %d (each layer and the head)", n, m.NLayer+1)
	}
	if !slices.Equal(got, run(nil)) {
		t.Error("yielding changed the logits")
	}
}

// TestTunerYieldsToRequest: a request that arrives (Busy(true)) while a
// background search runs parks the search at its next yield point, a
// layer boundary, and nothing of the search runs until the request ends;
// then the search goes on and delivers its result.
func TestTunerYieldsToRequest(t *testing.T) {
	m := tinyModel(t)
	toks := make([]int32, 80)
	for i := range toks {
		toks[i] = int32(3 + i*37%4000)
	}
	var tu Tuner
	var steps atomic.Int64
	reached := make(chan struct{})
	parkedAt := make(chan int64, 1)
	tu.yielded = func() {
		if steps.Add(1) == 2*int64(m.NLayer)+5 { // inside a pass of the search
			close(reached)
		}
	}
	tu.parked = func() {
		select {
		case parkedAt <- steps.Load():
		default:
		}
	}
	tu.Start(m, toks, 1, func(k int) float64 { return 1 + 0.1*float64(k) })
	<-reached
	tu.Busy(true) // a request arrives
	arrived := steps.Load()
	p := <-parkedAt
	// Yield points passed at arrival may have looked before the flag; the
	// next one parks.
	if p > arrived+1 {
		t.Errorf("the search parked at yield point %d, the request arrived at %d: it ran %d more layers", p, arrived, p-arrived-1)
	}
	if s := steps.Load(); s != p {
		t.Errorf("the search ran on while parked (%d yield points, parked at %d)", s, p)
	}
	resumed := make(chan struct{})
	tu.yielded = func() {
		if steps.Add(1) == p+1 {
			close(resumed)
		}
	}
	tu.Busy(false) // the request ends
	<-resumed
	if testing.Short() {
		tu.Stop() // the rest of the search takes seconds under qemu
		return
	}
	tu.Wait()
	if tu.Take() == nil {
		t.Error("the search resumed but delivered no result")
	}
	if s := steps.Load(); s <= p {
		t.Errorf("the search did not resume (%d yield points, parked at %d)", s, p)
	}
	// The yield points are layers, not only passes: a search that paused
	// between passes alone would have at most this many.
	const rows = 32
	passes := (len(toks)+rows-1)/rows + SearchBudget(m.NLayer)*((len(toks)-8+rows-1)/rows)
	if s := steps.Load(); s <= int64(passes) {
		t.Errorf("%d yield points, no more than the search's at most %d passes", s, passes)
	}
}
