package bench

import "testing"

// TestParseProcCPU: bench --ha --server-pid reads utime+stime (ticks of
// 10 ms) after the command name, which may hold spaces and parentheses.
func TestParseProcCPU(t *testing.T) {
	line := "4242 (geist (x) y) S 1 4242 4242 0 -1 4194560 1234 0 0 0 250 17 0 0 20 0 9 0 123 456 789"
	if got := parseProcCPU(line); got != 2670 {
		t.Errorf("%q: %v ms, want 2670", line, got)
	}
	if parseProcCPU("garbage") != 0 || procCPU(0) != 0 {
		t.Error("no CPU time expected")
	}
}
