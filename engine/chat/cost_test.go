package chat

import (
	"context"
	"encoding/json"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"
)

// costSlack is what a render may take past its Limits.Time: the step
// that sees the clock comes at most one bounded operation late. Under
// qemu (-short) every operation is 10-20 times slower, and on a loaded
// machine the process waits for a core: 5 s there.
func costSlack() time.Duration {
	if testing.Short() {
		return 5 * time.Second
	}
	return time.Second
}

// The review's templates (issue 22, item 3): string methods and filters
// on a 4 MB string cost one step each, so 1000 iterations took 28 s to
// compile and 9.3 s per render, and s|list and split(”) built hundreds
// of MB before the byte budget saw them. Now each is refused, by its
// cost, long before that.
func TestTemplateCost(t *testing.T) {
	const big = `{% set s = 'x' * 4000000 %}`
	for _, c := range []struct{ name, src string }{
		{"upper", big + `{% for i in range(1000) %}{{ s.upper()|length }}{% endfor %}{{ messages[0].content }}`},
		{"strip", big + `{% for i in range(65536) %}{{ s.strip()|length }}{% endfor %}{{ messages[0].content }}`},
		{"find", big + `{% for i in range(65536) %}{{ s.find('y') }}{% endfor %}{{ messages[0].content }}`},
		{"count", big + `{% for i in range(65536) %}{{ s.count('y') }}{% endfor %}{{ messages[0].content }}`},
		{"in", big + `{% for i in range(65536) %}{{ 'y' in s }}{% endfor %}{{ messages[0].content }}`},
		{"upper filter", big + `{% for i in range(65536) %}{{ (s|upper)|length }}{% endfor %}{{ messages[0].content }}`},
		{"list", big + `{{ (s|list)|length }}{{ messages[0].content }}`},
		{"split", big + `{{ s.split('')|length }}{{ messages[0].content }}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			start := time.Now()
			_, err := Compile(c.src)
			took := time.Since(start)
			runtime.ReadMemStats(&after)
			if !errors.Is(err, ErrLimit) {
				t.Fatalf("compiled (%v): %v", took, err)
			}
			if took > DefaultLimits.Time+costSlack() {
				t.Errorf("refused after %v, past the %v budget", took, DefaultLimits.Time)
			}
			alloc := after.TotalAlloc - before.TotalAlloc
			if alloc > 128<<20 {
				t.Errorf("allocated %d MiB before refusing", alloc>>20)
			}
			t.Logf("refused in %v, %d MiB allocated: %v", took.Round(time.Millisecond), alloc>>20, err)
		})
	}
}

// A render stops at its deadline and at the request's cancellation: an
// MQTT ask cancelled at 0.3 s held the next one for 18 s.
func TestRenderDeadlineAndCancel(t *testing.T) {
	lim := DefaultLimits
	lim.Steps = 1 << 50 // only the clock and the context bound it
	lim.Time = 0
	src := `{% set s = 'x' * 1000000 %}{% if messages[0].content == 'go' %}{% for i in range(65536) %}{{ s.upper()|length }}{% endfor %}{% endif %}{{ messages[0].content }}`
	tmpl, err := CompileLimits(src, lim)
	if err != nil {
		t.Fatal(err)
	}
	msgs := []Message{{Role: "user", Content: "go"}}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = tmpl.Render(msgs, Options{Context: ctx})
	took := time.Since(start)
	if err == nil || !strings.Contains(err.Error(), "cancelled") {
		t.Fatalf("render after its request was cancelled: %v", err)
	}
	if took > 100*time.Millisecond+costSlack() {
		t.Errorf("the cancelled render went on for %v", took)
	}
	t.Logf("cancelled at 100 ms, returned after %v", took.Round(time.Millisecond))

	lim.Time = 200 * time.Millisecond
	tmpl, err = CompileLimits(src, lim)
	if err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	_, err = tmpl.Render(msgs, Options{})
	took = time.Since(start)
	if !errors.Is(err, ErrLimit) || took > lim.Time+costSlack() {
		t.Fatalf("render with a 200 ms deadline: %v after %v", err, took)
	}
	t.Logf("deadline 200 ms: returned after %v: %v", took.Round(time.Millisecond), err)
}

// A tool schema nested deeper than the JSON bound is the client's error
// (ErrBadTool, a 400 from the HTTP API), not a failure (issue 22, item 8).
func TestDeepToolSchemaIsBadTool(t *testing.T) {
	t.Parallel()
	tmpl, err := Compile(`{% for m in messages %}{{ m.content }}{% endfor %}{{ tools|length }}`)
	if err != nil {
		t.Fatal(err)
	}
	deep := `{"type":"function","function":{"name":"f","parameters":` + strings.Repeat(`{"a":`, 100) + `1` + strings.Repeat(`}`, 100) + `}}`
	_, err = tmpl.Render([]Message{{Role: "user", Content: "hi"}}, Options{Tools: []json.RawMessage{json.RawMessage(deep)}})
	if !errors.Is(err, ErrBadTool) {
		t.Fatalf("deep tool schema: %v, want ErrBadTool", err)
	}
}
