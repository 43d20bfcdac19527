package quant

import "testing"

func TestRounding(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		f     float32
		round float32 // C's roundf: ties away from zero
	}{
		{0.5, 1}, {1.5, 2}, {2.5, 3}, {-0.5, -1}, {-1.5, -2}, {-2.5, -3},
		{0.49999997, 0}, {126.6, 127}, {-127.5, -128},
	} {
		if got := roundf(c.f); got != c.round {
			t.Errorf("roundf(%v) = %v, want %v", c.f, got, c.round)
		}
	}
}
