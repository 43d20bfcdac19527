package httpapi

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/geisten/geist/engine/appliance"
)

// refusingStore refuses every pull as a private destination.
type refusingStore struct{ fakeStore }

func (refusingStore) Pull(context.Context, string, func(PullProgress)) error {
	return RefusedSource(errors.New("not a public address: refusing to fetch from 127.0.0.1"))
}

// TestPullRefusedSource: a pull the store refuses for its destination
// answers 403 with the reason, streamed or not (it answered 500).
func TestPullRefusedSource(t *testing.T) {
	ts := newTestServer(t, nil, func(c *Config, _ *appliance.Config) { c.Store = refusingStore{} })
	for _, stream := range []string{"false", "true"} {
		resp, body := ts.do(t, "POST", "/api/pull", `{"model":"https://127.0.0.1/x.gguf","stream":`+stream+`}`)
		if resp.StatusCode != 403 || !strings.Contains(body, "not a public address") {
			t.Errorf("stream %s: %d %s", stream, resp.StatusCode, body)
		}
	}
}
