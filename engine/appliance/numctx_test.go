package appliance_test

import (
	"context"
	"strings"
	"testing"

	"github.com/geisten/geist/engine/appliance"
	"github.com/geisten/geist/engine/appliance/appliancetest"
)

// TestNegativeNumCtx: a negative context is a bad request naming num_ctx,
// whatever front end sent it.
func TestNegativeNumCtx(t *testing.T) {
	c := start(t, &appliancetest.Engine{}, nil)
	_, err := c.Submit(context.Background(), appliance.Request{Text: "x", Options: appliance.Options{NumCtx: -1}}, nil)
	if errCode(err) != appliance.CodeBadRequest || !strings.Contains(err.Error(), "num_ctx -1 must not be negative") {
		t.Errorf("num_ctx -1: %v", err)
	}
}
