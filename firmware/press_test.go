package firmware

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// sample is a raw level held from at (offset from the start) on.
type sample struct {
	at      time.Duration
	pressed bool
}

// simulate runs the detector over a raw level pattern, sampling at every
// change and at every deadline the detector asks for, until end. It
// returns the presses with the offset at which each was reported.
func simulate(t *testing.T, tm Timing, double, talk bool, pattern []sample, end time.Duration) []string {
	t.Helper()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	d := newDetector(tm, double, talk, t0)
	var out []string
	level, i := false, 0
	now := time.Duration(0)
	for steps := 0; now <= end; steps++ {
		if steps > 10000 {
			t.Fatal("detector does not settle")
		}
		for i < len(pattern) && pattern[i].at <= now {
			level = pattern[i].pressed
			i++
		}
		for _, k := range d.update(t0.Add(now), level) {
			out = append(out, fmt.Sprintf("%s@%dms", k, now.Milliseconds()))
		}
		next := end + 1
		if i < len(pattern) {
			next = pattern[i].at
		}
		if at, ok := d.next(); ok {
			if dl := at.Sub(t0); dl < next {
				next = dl
			}
		}
		if next <= now {
			t.Fatalf("detector asks for a deadline %v not after now %v", next, now)
		}
		now = next
	}
	return out
}

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

// bounce makes a chattering transition to pressed at at: n flips 1ms apart
// ending in the level.
func bounce(at time.Duration, pressed bool, n int) []sample {
	var s []sample
	for k := 0; k < n; k++ {
		s = append(s, sample{at + ms(k), k%2 == 0 == pressed})
	}
	return append(s, sample{at + ms(n), pressed})
}

func TestDetector(t *testing.T) {
	tm := Timing{Debounce: ms(20), LongPress: ms(800), DoubleGap: ms(300)}
	cat := func(parts ...[]sample) []sample { return slices.Concat(parts...) }
	press := func(at, dur time.Duration) []sample { return []sample{{at, true}, {at + dur, false}} }
	tests := []struct {
		name         string
		double, talk bool
		pattern      []sample
		want         []string
	}{
		{"clean short press", false, false, press(ms(100), ms(100)),
			[]string{"press@220ms"}},
		{"glitch shorter than debounce is ignored", false, false, press(ms(100), ms(5)), nil},
		{"bouncing short press is one press", false, false,
			cat(bounce(ms(100), true, 7), bounce(ms(250), false, 9)),
			[]string{"press@278ms"}},
		{"long press fires while held", false, false, press(ms(100), ms(2000)),
			[]string{"long_press@920ms"}},
		{"bouncing long press", false, false,
			cat(bounce(ms(100), true, 5), bounce(ms(1500), false, 5)),
			[]string{"long_press@924ms"}},
		{"short press waits for double gap", true, false, press(ms(100), ms(100)),
			[]string{"press@520ms"}},
		{"double press", true, false, cat(press(ms(100), ms(100)), press(ms(400), ms(80))),
			[]string{"double_press@500ms"}},
		{"double press with bounce", true, false,
			cat(bounce(ms(100), true, 3), bounce(ms(200), false, 3), bounce(ms(400), true, 3), bounce(ms(500), false, 3)),
			[]string{"double_press@522ms"}},
		{"second press after the gap is a new press", true, false,
			cat(press(ms(100), ms(100)), press(ms(700), ms(100))),
			[]string{"press@520ms", "press@1120ms"}},
		{"second press debounced just after the gap still counts", true, false,
			cat(press(ms(100), ms(100)), press(ms(515), ms(100))),
			[]string{"double_press@635ms"}},
		{"short then long", true, false, cat(press(ms(100), ms(100)), press(ms(400), ms(1500))),
			[]string{"press@1220ms", "long_press@1220ms"}},
		{"three quick presses: double then pending single", true, false,
			cat(press(ms(100), ms(50)), press(ms(250), ms(50)), press(ms(400), ms(50))),
			[]string{"double_press@320ms", "press@770ms"}},
		{"push to talk", false, true, cat(bounce(ms(100), true, 3), bounce(ms(3000), false, 3)),
			[]string{"down@122ms", "up@3022ms"}},
		{"push to talk never long-presses", false, true, press(ms(100), ms(5000)),
			[]string{"down@120ms", "up@5120ms"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := simulate(t, tm, tc.double, tc.talk, tc.pattern, ms(6000))
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestPressStrings(t *testing.T) {
	for k, want := range map[Press]string{ShortPress: "press", LongPress: "long_press", DoublePress: "double_press"} {
		if k.String() != want {
			t.Errorf("%d: %q, want %q", k, k.String(), want)
		}
	}
}
