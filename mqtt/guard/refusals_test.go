package guard_test

import (
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/geisten/geist/mqtt/guard"
	"github.com/geisten/geist/mqtt/mqtttest"
)

// TestRefusals: a burst is answered, the rest of a flood is held back,
// counted and reported in one line; each topic has its own bucket.
func TestRefusals(t *testing.T) {
	var log mqtttest.Log
	r := guard.NewRefusals(1, 5, 50*time.Millisecond, slog.New(slog.NewTextHandler(&log, nil)))
	allowed := 0
	for range 1000 {
		if r.Allow("geist/d/ask") {
			allowed++
		}
	}
	if !r.Allow("geist/d/cancel") {
		t.Error("another topic's first refusal held back")
	}
	if allowed < 5 || allowed > 6 || r.Held() != int64(1000-allowed) {
		t.Errorf("allowed %d, held %d", allowed, r.Held())
	}
	time.Sleep(200 * time.Millisecond)
	out := log.String()
	if strings.Count(out, "\n") != 1 || !strings.Contains(out, "refusals not answered") || !strings.Contains(out, "by_topic.geist/d/ask="+strconv.Itoa(1000-allowed)) {
		t.Errorf("log:\n%s", out)
	}
}
