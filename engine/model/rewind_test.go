package model

import "testing"

// rewindSetup is the fixture of the recurrent-state rewind tests
// (TestConvRewind, TestRecurrentRewind, TestMamba2Rewind): the model at
// path, a sequence of n tokens, a constructor of states that hold it, and
// the reference logits after every position from one pass per token.
func rewindSetup(t *testing.T, path string, n int) (m *Model, seq []int32, newState func() *State, ref [][]float32) {
	t.Helper()
	m = openModel(t, path)
	seq = make([]int32, n)
	for i := range seq {
		seq[i] = int32((i*7919 + 13) % m.NVocab)
	}
	newState = func() *State {
		s, err := m.NewState(StateOptions{Ctx: n, Batch: 16, LogitRows: 8, Threads: 2})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		return s
	}
	ref = make([][]float32, n)
	one := newState()
	for i, tok := range seq {
		lg, err := one.Forward([]int32{tok}, false)
		if err != nil {
			t.Fatal(err)
		}
		ref[i] = append([]float32(nil), lg...)
	}
	return m, seq, newState, ref
}
