package daemon

import (
	"testing"
)

// TestParallelSetting: parallel in the config and --parallel.
func TestParallelSetting(t *testing.T) {
	for in, want := range map[string]int{"auto": -1, "1": 1, "4": 4, "16": 16} {
		var p parallelN
		if err := p.Set(in); err != nil || p.engine() != want {
			t.Errorf("parallel %q: %d, %v; want %d", in, p.engine(), err, want)
		}
	}
	for _, in := range []string{"0", "-1", "17", "four", ""} {
		var p parallelN
		if err := p.Set(in); err == nil {
			t.Errorf("parallel %q accepted", in)
		}
	}
	var p parallelN
	if err := p.UnmarshalTOML(int64(3)); err != nil || p != 3 {
		t.Errorf("parallel = 3: %d, %v", p, err)
	}
	if err := p.UnmarshalTOML(true); err == nil {
		t.Error("parallel = true accepted")
	}
}
