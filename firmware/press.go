package firmware

import "time"

// Press is the kind of a recognized button press.
type Press int

// Press kinds. Down and Up are only reported for push-to-talk buttons.
const (
	ShortPress Press = iota + 1
	LongPress
	DoublePress
	Down
	Up
)

// String returns the Home Assistant event type: "press", "long_press",
// "double_press" (and "down", "up").
func (p Press) String() string {
	switch p {
	case ShortPress:
		return "press"
	case LongPress:
		return "long_press"
	case DoublePress:
		return "double_press"
	case Down:
		return "down"
	case Up:
		return "up"
	}
	return "unknown"
}

// detector turns raw samples of a button (pressed or not, with the time of
// the sample) into debounced presses. It is a pure state machine: the
// caller feeds it samples and asks when it next needs to look again.
type detector struct {
	t      Timing
	double bool // detect double presses
	talk   bool // report Down/Up instead of presses

	raw    bool      // last sampled level (true = pressed)
	rawAt  time.Time // when raw last changed
	stable bool      // debounced level
	downAt time.Time // when the debounced press began
	long   bool      // a long press was reported for the current hold
	clicks int       // 1 while a short press waits for a possible second one
	upAt   time.Time // release time of that press
}

func newDetector(t Timing, double, talk bool, now time.Time) *detector {
	return &detector{t: t.withDefaults(), double: double && !talk, talk: talk, rawAt: now}
}

// update feeds a sample taken at now and returns the presses it completes.
func (d *detector) update(now time.Time, pressed bool) []Press {
	var out []Press
	if pressed != d.raw {
		d.raw, d.rawAt = pressed, now
	}
	if d.raw != d.stable && now.Sub(d.rawAt) >= d.t.Debounce {
		d.stable = d.raw
		if d.stable {
			d.downAt, d.long = now, false
			if d.talk {
				out = append(out, Down)
			}
		} else {
			switch {
			case d.talk:
				out = append(out, Up)
			case d.long:
			case !d.double:
				out = append(out, ShortPress)
			case d.clicks == 1:
				out = append(out, DoublePress)
				d.clicks = 0
			default:
				d.clicks, d.upAt = 1, now
			}
		}
	}
	if d.stable && !d.talk && !d.long && now.Sub(d.downAt) >= d.t.LongPress {
		if d.clicks == 1 { // a short press, then a long one
			out = append(out, ShortPress)
			d.clicks = 0
		}
		d.long = true
		out = append(out, LongPress)
	}
	if !d.stable && d.clicks == 1 && now.Sub(d.upAt) >= d.t.DoubleGap {
		// Only when nothing is pending on the raw level: a press that is
		// still being debounced may be the second one.
		if !d.raw || now.Sub(d.upAt) >= d.t.DoubleGap+d.t.Debounce {
			out = append(out, ShortPress)
			d.clicks = 0
		}
	}
	return out
}

// next returns when the detector must sample again even without an edge,
// and false when only an edge can change anything.
func (d *detector) next() (time.Time, bool) {
	var at time.Time
	ok := false
	add := func(t time.Time) {
		if !ok || t.Before(at) {
			at, ok = t, true
		}
	}
	if d.raw != d.stable {
		add(d.rawAt.Add(d.t.Debounce))
	}
	if d.stable && !d.talk && !d.long {
		add(d.downAt.Add(d.t.LongPress))
	}
	if !d.stable && d.clicks == 1 {
		if d.raw {
			add(d.upAt.Add(d.t.DoubleGap + d.t.Debounce))
		} else {
			add(d.upAt.Add(d.t.DoubleGap))
		}
	}
	return at, ok
}
